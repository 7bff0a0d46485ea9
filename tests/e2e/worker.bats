#!/usr/bin/env bats
# worker.bats - cardbaton-worker driven directly, as the controller does
# (LAYOUT.md sections 8-10): real processes, real locks, real inotify;
# only nvidia-smi is the fake from tests/fake-nvidia-smi.

load ../lib/common
load ../lib/worker

# A hung test must not hang the suite (a worker holding the launcher's
# stdout would make `run` wait forever).
test_timeout 60

setup() {
	setup_common
}

teardown() {
	teardown_common
}

# The job's side of the checkpoint contract (SPEC section 9) in POSIX
# sh: poll for the pause file; then wait for a line on $GO when GO is
# set; publish $MARK (when set) atomically at SSHGPU_CHECKPOINT_READY,
# or do $PUBLISH; exit $CODE.
CKJOB='while [ ! -e "$SSHGPU_PAUSE_FILE" ]; do sleep 0.05; done
if [ -n "${GO-}" ]; then read x < "$GO"; fi
if [ -n "${MARK-}" ]; then
	printf "%s" "$MARK" > "$SSHGPU_CHECKPOINT_READY.tmp"
	mv "$SSHGPU_CHECKPOINT_READY.tmp" "$SSHGPU_CHECKPOINT_READY"
fi
eval "${PUBLISH-}"
exit "$CODE"'

# ---- usage, version, state directory ---------------------------------------

@test "usage errors exit 64 with one line on stderr" {
	run cardbaton-worker
	[ "$status" -eq 64 ]
	run cardbaton-worker frobnicate
	[ "$status" -eq 64 ]
	[[ $output == "cardbaton-worker: unknown command frobnicate"* ]]
	[ "${#lines[@]}" -eq 1 ]
	run cardbaton-worker status
	[ "$status" -eq 64 ]
	[[ $output == "cardbaton-worker: usage: "* ]]
	[ "${#lines[@]}" -eq 1 ]
	run cardbaton-worker cancel
	[ "$status" -eq 64 ]
	run cardbaton-worker cancel a b
	[ "$status" -eq 64 ]
	run cardbaton-worker log
	[ "$status" -eq 64 ]
	run cardbaton-worker log a b
	[ "$status" -eq 64 ]
	run cardbaton-worker launch extra < /dev/null
	[ "$status" -eq 64 ]
	run cardbaton-worker gpus extra
	[ "$status" -eq 64 ]
	run cardbaton-worker deck
	[ "$status" -eq 64 ]
	[ "$output" = "cardbaton-worker: usage: cardbaton-worker [-d STATE_DIR] deck ID" ]
	run cardbaton-worker deck a b
	[ "$status" -eq 64 ]
	run cardbaton-worker -d
	[ "$status" -eq 64 ]
	run cardbaton-worker -x status
	[ "$status" -eq 64 ]
	run cardbaton-worker -h
	[ "$status" -eq 0 ]
	[[ $output == "usage: cardbaton-worker "* ]]
}

@test "version prints a version record" {
	run cardbaton-worker version
	[ "$status" -eq 0 ]
	[ "$output" = "$(printf 'version 0.1.0\nend')" ]
}

@test "the state directory is made 0700 with attempts/ and leases/; ~ expands against HOME; -d goes before or after the command" {
	run cardbaton-worker status nope
	[ "$status" -eq 0 ]
	[ "$(stat -c %a "$STATE")" = 700 ]
	[ "$(stat -c %a "$STATE/attempts")" = 700 ]
	[ "$(stat -c %a "$STATE/leases")" = 700 ]
	run cardbaton-worker -d '~/other/state' status nope
	[ "$status" -eq 0 ]
	[ -d "$HOME/other/state/attempts" ]
	[ ! -e "$T/~" ]
	run cardbaton-worker status -d '~' nope
	[ "$status" -eq 0 ]
	[ -d "$HOME/leases" ]
}

# ---- gpus -------------------------------------------------------------------

@test "gpus: one record per card with memory, utilisation, processes and lease" {
	fake_gpus \
		"0, $U0, NVIDIA Fake A100, 0, 81920, 0" \
		"1, $U1, NVIDIA Fake A100, 4000, 81920, 37" \
		"2, $U2, NVIDIA Fake, Special Edition, 12, 40960, [N/A]" \
		"3, $U3, NVIDIA Fake A100, [N/A], [N/A], [Not Supported]"
	fake_apps "$U1, 4242, 3000" "$U1, 4243, 1000" "$U3, 99, [N/A]"
	go_fifo
	launch attempt aa-1 shell 'read x < "$GO"' env "GO=$T/go" gpu 2 idle_mib 64
	[ "$status" -eq 0 ]
	run cardbaton-worker gpus
	[ "$status" -eq 0 ]
	[ "$(grep -c '^end$' <<< "$output")" -eq 4 ]
	r0=$(gpu_rec 0 <<< "$output")
	[ "$(field uuid <<< "$r0")" = "$U0" ]
	[ "$(field name <<< "$r0")" = "NVIDIA Fake A100" ]
	[ "$(field memory_used_mib <<< "$r0")" = 0 ]
	[ "$(field memory_total_mib <<< "$r0")" = 81920 ]
	[ "$(field processes <<< "$r0")" = 0 ]
	grep -qx 'lease ' <<< "$r0"
	r1=$(gpu_rec 1 <<< "$output")
	[ "$(field memory_used_mib <<< "$r1")" = 4000 ]
	[ "$(field utilization <<< "$r1")" = 37 ]
	[ "$(field processes <<< "$r1")" = 2 ]
	r2=$(gpu_rec 2 <<< "$output")
	[ "$(field name <<< "$r2")" = "NVIDIA Fake, Special Edition" ]
	[ "$(field utilization <<< "$r2")" = 0 ]
	[ "$(field lease <<< "$r2")" = aa-1 ]
	r3=$(gpu_rec 3 <<< "$output")
	[ "$(field processes <<< "$r3")" = 1 ]
	grep -qx 'memory_used_mib ' <<< "$r3"      # unknown: empty, never a number
	go
	wait_final aa-1
	run cardbaton-worker gpus
	grep -qx 'lease ' <<< "$(gpu_rec 2 <<< "$output")"
}

@test "gpus: nvidia-smi failing, missing or printing nonsense exits 69 with an error record" {
	: > "$FAKE_GPU_DIR/fail"
	run cardbaton-worker gpus
	[ "$status" -eq 69 ]
	grep -q '^error nvidia-smi%20failed%20(exit%209):%20NVIDIA-SMI%20has%20failed' <<< "$output"
	[[ $output == *"cardbaton-worker: nvidia-smi failed (exit 9): NVIDIA-SMI has failed"* ]]
	rm "$FAKE_GPU_DIR/fail"

	rm "$FAKE_GPU_DIR/bin/nvidia-smi"
	# (nvidia-smi alone: through NVML, CB_TEST_NVML=fake, it would answer.)
	CARDBATON_NVML=off PATH=$CB_BUILD:$FAKE_GPU_DIR/bin:/usr/bin:/bin run cardbaton-worker gpus
	[ "$status" -eq 69 ]
	grep -q '^error ' <<< "$output"
	[[ $output == *"cannot run nvidia-smi: No such file or directory"* ]]
	ln -s "$CB_TOP/tests/fake-nvidia-smi" "$FAKE_GPU_DIR/bin/nvidia-smi"

	fake_gpus "0, $U0, NVIDIA Fake A100, 0, 81920, 0" "1, $U1, NVIDIA Fake A100, lots, 81920, 0"
	run cardbaton-worker gpus
	[ "$status" -eq 69 ]
	[[ $output == *"cannot parse line 2: \"1, $U1, lots, 81920, 0, NVIDIA Fake A100\""* ]]
}

@test "gpus: a hung nvidia-smi is killed after 10 s and reported (slow)" {
	echo 61.25 > "$FAKE_GPU_DIR/delay"
	SECONDS=0
	run cardbaton-worker gpus
	[ "$status" -eq 69 ]
	[[ $output == *"nvidia-smi did not answer within 10 s"* ]]
	[ "$SECONDS" -le 12 ]
	# Its whole process group went with it (the fake's sleep).
	not pgrep -f '^sleep 61\.25$'
}

@test "gpus: nvidia-smi's two questions (the cards, their compute processes) are asked at once" {
	# Each run answers only once the other has been asked: asked one
	# after the other, the first gives up after 5 s and the query fails.
	rm "$FAKE_GPU_DIR/bin/nvidia-smi"
	cat > "$FAKE_GPU_DIR/bin/nvidia-smi" <<-EOF
		#!/bin/sh
		case "\$1" in --query-gpu=*) me=gpu other=apps ;; *) me=apps other=gpu ;; esac
		: > "$T/asked.\$me"
		i=0
		while [ ! -e "$T/asked.\$other" ] && [ \$i -lt 100 ]; do sleep 0.05; i=\$((i + 1)); done
		[ -e "$T/asked.\$other" ] || { echo "asked one after the other" >&2; exit 3; }
		exec "$CB_TOP/tests/fake-nvidia-smi" "\$@"
	EOF
	chmod +x "$FAKE_GPU_DIR/bin/nvidia-smi"
	fake_apps "$U1, 4242, 500"
	run cardbaton-worker gpus
	[ "$status" -eq 0 ]
	[ "$(grep -c '^index ' <<< "$output")" -eq 4 ]
	[ "$(grep '^processes ' <<< "$output" | tr '\n' ' ')" = "processes 0 processes 1 processes 0 processes 0 " ]
}

# ---- launch ------------------------------------------------------------------

@test "launch: CUDA_VISIBLE_DEVICES is exactly the requested cards' UUIDs, in order" {
	launch attempt ab-1 shell 'printf %s "$CUDA_VISIBLE_DEVICES" > "$OUT"' env "OUT=$T/cvd" gpu 2 gpu 0
	[ "$status" -eq 0 ]
	[ "$(field attempt <<< "$output")" = ab-1 ]
	grep -Eq '^state (running|succeeded)$' <<< "$output"
	[ "$(grep '^gpu \|^uuid ' <<< "$output" | tr '\n' ' ')" = "gpu 2 uuid $U2 gpu 0 uuid $U0 " ]
	wait_final ab-1
	[ "$(cat "$T/cvd")" = "$U2,$U0" ]
	[ "$(st ab-1 state)" = succeeded ]
	[ "$(st ab-1 exit_code)" = 0 ]

	# A CPU job: set, and empty (not inherited from the worker).
	CUDA_VISIBLE_DEVICES=junk launch attempt ab-2 \
		shell 'printf "%s:%s" "${CUDA_VISIBLE_DEVICES+set}" "$CUDA_VISIBLE_DEVICES" > "$OUT"' env "OUT=$T/cpu"
	[ "$status" -eq 0 ]
	wait_final ab-2
	[ "$(cat "$T/cpu")" = "set:" ]
}

@test "launch: a CPU job needs no nvidia-smi; a GPU job with nvidia-smi failing exits 69 and leaves no trace" {
	: > "$FAKE_GPU_DIR/fail"
	launch attempt ac-1 arg true
	[ "$status" -eq 0 ]
	wait_final ac-1
	launch attempt ac-2 arg true gpu 0
	[ "$status" -eq 69 ]
	[[ $output == *"cardbaton-worker: nvidia-smi failed (exit 9)"* ]]
	no_trace ac-2
}

@test "launch: the same attempt launched again is answered, never run twice" {
	go_fifo
	launch attempt ad-1 shell 'echo ran >> "$COUNT"; read x < "$GO"' env "COUNT=$T/count" env "GO=$T/go" gpu 1
	[ "$status" -eq 0 ]
	pid=$(field pid <<< "$output")
	[ -n "$pid" ]
	# Again while it runs, five at once: the same attempt, still running.
	pids=
	for i in 1 2 3 4 5; do
		cardbaton-worker launch < "$T/spec.in" > "$T/again.$i" &
		pids+=" $!"
	done
	wait $pids
	for i in 1 2 3 4 5; do
		[ "$(field state < "$T/again.$i")" = running ]
		[ "$(field pid < "$T/again.$i")" = "$pid" ]
	done
	go
	wait_final ad-1
	# And after the end: the final record, and still one run.
	run cardbaton-worker launch < "$T/spec.in"
	[ "$status" -eq 0 ]
	[ "$(field state <<< "$output")" = succeeded ]
	[ "$(wc -l < "$T/count")" -eq 1 ]
}

@test "launch: five launches of one new attempt at once start it once" {
	spec attempt ae-1 shell 'echo ran >> "$COUNT"' env "COUNT=$T/count" gpu 0 > "$T/spec.in"
	pids=
	for i in 1 2 3 4 5; do
		cardbaton-worker launch < "$T/spec.in" > "$T/out.$i" &
		pids+=" $!"
	done
	wait $pids
	wait_final ae-1
	[ "$(wc -l < "$T/count")" -eq 1 ]
	for i in 1 2 3 4 5; do
		grep -Eq '^state (starting|running|succeeded)$' "$T/out.$i"
	done
}

@test "launch: a directory left by a launch that died before step 6 is taken over" {
	mkdir -p "$STATE/attempts/af-1"
	launch attempt af-1 shell 'echo ran > "$OUT"' env "OUT=$T/out"
	[ "$status" -eq 0 ]
	wait_final af-1
	[ "$(cat "$T/out")" = ran ]
	# One whose lock is still held (a launcher at work) is waited for;
	# when the holder lets go without a state file, it is taken over.
	mkdir -p "$STATE/attempts/af-2"
	flock "$STATE/attempts/af-2/lock" sleep 0.3 &
	wait_for 10 'test -e "$STATE/attempts/af-2/lock"'
	launch attempt af-2 arg true
	[ "$status" -eq 0 ]
	wait_final af-2
	[ "$(st af-2 state)" = succeeded ]
}

@test "launch: attempts/ID planted as a symlink or a file ends the attempt failed naming it, nothing followed or run" {
	mkdir -p "$STATE/attempts" "$T/elsewhere"
	ln -s "$T/elsewhere" "$STATE/attempts/aa-1"
	launch attempt aa-1 gpu 0 shell 'echo ran > "$OUT"' env "OUT=$T/out"
	[ "$status" -eq 0 ]
	[ "$(echo "$output" | field state)" = failed ]
	[ "$(echo "$output" | field reason)" = "attempts/aa-1: is a symbolic link (not followed)" ]
	[ -n "$(echo "$output" | field finished)" ]
	# Final on the node: status, and the same launch again, answer it.
	[ "$(st aa-1 state)" = failed ]
	[ "$(st aa-1 alive)" = 0 ]
	launch attempt aa-1 gpu 0 shell 'echo ran > "$OUT"' env "OUT=$T/out"
	[ "$status" -eq 0 ]
	[ "$(echo "$output" | field reason)" = "attempts/aa-1: is a symbolic link (not followed)" ]
	# Nothing was followed, run or leased.
	[ -z "$(ls -A "$T/elsewhere")" ]
	[ -L "$STATE/attempts/aa-1" ]
	[ ! -e "$T/out" ]
	lease_free "$U0"
	touch "$STATE/attempts/aa-2"
	launch attempt aa-2 arg true
	[ "$status" -eq 0 ]
	[ "$(echo "$output" | field reason)" = "attempts/aa-2: is not a directory" ]
	[ "$(st aa-2 state)" = failed ]
}

@test "launch: a card with memory in use above idle_mib is busy (75) and leaves no trace" {
	fake_gpus "0, $U0, NVIDIA Fake A100, 0, 81920, 0" "1, $U1, NVIDIA Fake A100, 4000, 81920, 0"
	launch attempt b0-1 arg true gpu 0 gpu 1
	[ "$status" -eq 75 ]
	[ "$(field state <<< "$output")" = busy ]
	[ "$(field attempt <<< "$output")" = b0-1 ]
	[ "$(field reason <<< "$output")" = "GPU 1 ($U1): 4000 MiB in use" ]
	no_trace b0-1
	lease_free "$U0"
	[ ! -s "$STATE/leases/$U0" ]
	# The same ID later, when the card counts as idle: it runs.
	launch attempt b0-1 arg true gpu 0 gpu 1 idle_mib 4000
	[ "$status" -eq 0 ]
	wait_final b0-1
	[ "$(st b0-1 state)" = succeeded ]
}

@test "launch: a card with a compute process is busy" {
	fake_apps "$U3, 4242, 300"
	launch attempt b1-1 arg true gpu 3
	[ "$status" -eq 75 ]
	[ "$(field reason <<< "$output")" = "GPU 3 ($U3): has 1 compute process" ]
	no_trace b1-1
	launch attempt b1-2 arg true gpu 7
	[ "$status" -eq 75 ]
	[ "$(field reason <<< "$output")" = "GPU 7: no such GPU on this node" ]
	no_trace b1-2
}

@test "launch: a card leased by another attempt is busy; the other cards are released" {
	go_fifo
	launch attempt b2-1 shell 'read x < "$GO"' env "GO=$T/go" gpu 0
	[ "$status" -eq 0 ]
	launch attempt b2-2 arg true gpu 1 gpu 0
	[ "$status" -eq 75 ]
	[ "$(field reason <<< "$output")" = "GPU 0 ($U0): leased by b2-1" ]
	no_trace b2-2
	lease_free "$U1"
	not lease_free "$U0"
	go
	wait_final b2-1
	lease_free "$U0"
}

@test "launch: argv reaches the job byte for byte" {
	args=("with space" "'single'" '"double"' '$HOME' '`id`' 'back\slash' $'new\nline' $'tab\there'
		'*' '' 'grüße ✓' '%41' '-n' '  ' ';&|')
	{
		printf 'attempt c0-2\narg sh\narg -c\narg %s\narg argv0\n' "$(wesc 'printf "%s\0" "$@" > "$OUT"')"
		for a in "${args[@]}"; do printf 'arg %s\n' "$(wesc "$a")"; done
		printf 'env %s\nend\n' "$(wesc "OUT=$T/argv")"
	} > "$T/spec.in"
	run cardbaton-worker launch < "$T/spec.in"
	[ "$status" -eq 0 ]
	wait_final c0-2
	printf '%s\0' "${args[@]}" > "$T/expected"
	cmp "$T/expected" "$T/argv"
}

@test "launch: a string command runs under sh -c" {
	launch attempt c1-1 shell 'echo "$0" > "$OUT"; for w in a b; do echo $w; done >> "$OUT"' env "OUT=$T/out"
	[ "$status" -eq 0 ]
	wait_final c1-1
	[ "$(cat "$T/out")" = "$(printf 'sh\na\nb')" ]
}

@test "launch: cwd (with ~) and env are applied; the job gets the pause and checkpoint variables" {
	mkdir -p "$HOME/work"
	launch attempt c2-1 cwd '~/work' env 'GREETING=hello world' env 'EMPTY=' checkpoint /ck/path \
		shell 'pwd > out.txt; printf "%s|%s|%s|%s|%s|%s|%s|%s|%s\n" "$GREETING" "${EMPTY-unset}" "$CARDBATON_ATTEMPT_ID" "$SSHGPU_PAUSE_FILE" "$CARDBATON_PAUSE_FILE" "$SSHGPU_CHECKPOINT_READY" "$CARDBATON_CHECKPOINT_READY" "$SSHGPU_CHECKPOINT" "$CARDBATON_CHECKPOINT" >> out.txt'
	[ "$status" -eq 0 ]
	wait_final c2-1
	a=$STATE/attempts/c2-1
	[ "$(sed -n 1p "$HOME/work/out.txt")" = "$HOME/work" ]
	[ "$(sed -n 2p "$HOME/work/out.txt")" = "hello world||c2-1|$a/pause|$a/pause|$a/checkpoint|$a/checkpoint|/ck/path|/ck/path" ]
	# Without a checkpoint, none is inherited from the worker.
	SSHGPU_CHECKPOINT=/stale launch attempt c2-2 shell 'echo "${SSHGPU_CHECKPOINT-unset}" > "$OUT"' env "OUT=$T/ck"
	wait_final c2-2
	[ "$(cat "$T/ck")" = unset ]
	# The spec as received is kept.
	grep -qx 'attempt c2-1' "$a/spec"
}

@test "launch: a missing cwd or program fails the attempt with the reason (launch itself exits 0)" {
	launch attempt c3-1 cwd /nonexistent/dir arg true gpu 1
	[ "$status" -eq 0 ]
	[ "$(field state <<< "$output")" = failed ]
	[ "$(field reason <<< "$output")" = "cwd /nonexistent/dir: No such file or directory" ]
	lease_free "$U1"
	launch attempt c3-2 arg /nonexistent/prog arg x
	[ "$status" -eq 0 ]
	[ "$(field state <<< "$output")" = failed ]
	[ "$(field reason <<< "$output")" = "exec /nonexistent/prog: No such file or directory" ]
	[ "$(st c3-2 alive)" = 0 ]
}

@test "launch: a non-zero exit and a death by signal are recorded" {
	launch attempt c4-1 shell 'echo bye; exit 3'
	wait_final c4-1
	run cardbaton-worker status c4-1
	[ "$(field state <<< "$output")" = failed ]
	[ "$(field exit_code <<< "$output")" = 3 ]
	[ "$(field reason <<< "$output")" = "exit status 3" ]
	[ -n "$(field finished <<< "$output")" ]
	launch attempt c4-2 shell 'kill -9 $$'
	wait_final c4-2
	run cardbaton-worker status c4-2
	[ "$(field state <<< "$output")" = failed ]
	[ "$(field signal <<< "$output")" = 9 ]
	[ "$(field reason <<< "$output")" = "killed by signal 9 (SIGKILL)" ]
}

@test "launch: the job outlives the launcher, holds the leases and the lock, and none of the launcher's streams" {
	go_fifo
	launch attempt c5-1 shell 'read x < "$GO"' env "GO=$T/go" gpu 0 gpu 3
	[ "$status" -eq 0 ]
	pid=$(field pid <<< "$output")
	[ "$(field pgid <<< "$output")" = "$pid" ]
	[ "$(field log <<< "$output")" = "$STATE/attempts/c5-1/log" ]
	sup=$(awk '{ sub(/.*\) /, ""); print $2 }' "/proc/$pid/stat")
	# Both run on; the leases and the lock are held ...
	kill -0 "$pid"
	[ "$(st c5-1 state)" = running ]
	[ "$(st c5-1 alive)" = 1 ]
	not lease_free "$U0"
	not lease_free "$U3"
	lease_free "$U1"
	[ "$(cat "$STATE/leases/$U0")" = c5-1 ]
	# ... by the job itself (inherited), not only by its supervisor.
	ls -l "/proc/$pid/fd" | grep -q "leases/$U0"
	ls -l "/proc/$pid/fd" | grep -q "leases/$U3"
	ls -l "/proc/$pid/fd" | grep -q "attempts/c5-1/lock"
	# The job and its supervisor: stdin /dev/null, stdout+stderr the log,
	# in a session of their own.
	for p in "$pid" "$sup"; do
		[ "$(readlink "/proc/$p/fd/0")" = /dev/null ]
		[ "$(readlink "/proc/$p/fd/1")" = "$STATE/attempts/c5-1/log" ]
		[ "$(readlink "/proc/$p/fd/2")" = "$STATE/attempts/c5-1/log" ]
	done
	[ "$(ps -o sid= -p "$sup" | tr -d ' ')" = "$sup" ]
	# The supervisor sleeps while the job runs (no busy wait).
	c0=$(cpu_ticks "$sup")
	settle 0.5
	[ $(( $(cpu_ticks "$sup") - c0 )) -le 2 ]
	go
	wait_final c5-1
	lease_free "$U0"
	lease_free "$U3"
	lock_free c5-1
	[ "$(st c5-1 alive)" = 0 ]
}

@test "launch: a bad spec exits 65 and leaves nothing" {
	bad() {
		printf '%b' "$1" > "$T/spec.in"
		run cardbaton-worker launch < "$T/spec.in"
		[ "$status" -eq 65 ] || { echo "not 65: $1 -> $status $output"; return 1; }
		[[ $output == "cardbaton-worker: bad spec: "* ]] || { echo "$output"; return 1; }
	}
	bad ''
	bad 'attempt x\narg true\n'                          # no end
	bad 'arg true\nend\n'                                # no attempt
	bad 'attempt ../x\narg true\nend\n'
	bad 'attempt ABC\narg true\nend\n'
	bad 'attempt 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0\narg true\nend\n'
	bad 'attempt d0-1\nend\n'                            # neither arg nor shell
	bad 'attempt d0-1\narg true\nshell true\nend\n'      # both
	bad 'attempt d0-1\nshell true\nshell false\nend\n'
	bad 'attempt d0-1\narg true\nenv 1X=a\nend\n'
	bad 'attempt d0-1\narg true\nenv NOVALUE\nend\n'
	bad 'attempt d0-1\narg true\ngpu 1\ngpu 1\nend\n'
	bad 'attempt d0-1\narg true\ngpu -1\nend\n'
	bad 'attempt d0-1\narg true\ngpu x\nend\n'
	bad 'attempt d0-1\narg true\ntimeout -5\nend\n'
	bad 'attempt d0-1\narg true\nidle_mib lots\nend\n'
	bad 'attempt d0-1\narg true\nresumable 2\nend\n'
	bad 'attempt d0-1\narg a%%00b\nend\n'                # a bad escape
	bad 'attempt d0-1\narg a%00b\nend\n'                 # NUL in argv
	[ "$output" = "cardbaton-worker: bad spec: %00 (a NUL byte) in a value" ]
	bad 'attempt d0-1\narg a b\nend\n'                   # unescaped space
	bad 'attempt d0-1\nBAD x\nend\n'
	[ -z "$(ls -A "$STATE/attempts")" ]
}

# ---- status ------------------------------------------------------------------

@test "status: unknown attempts, and several at once" {
	launch attempt e0-1 arg true
	wait_final e0-1
	run cardbaton-worker status nope e0-1 ../../etc
	[ "$status" -eq 0 ]
	[ "$output" = "$(printf 'attempt nope\nstate unknown\nalive 0\nend\n%s\nattempt ../../etc\nstate unknown\nalive 0\nend' \
		"$(cardbaton-worker status e0-1)")" ]
}

@test "status: supervisor and job killed with SIGKILL -> lost, alive 0, and the state file says so" {
	launch attempt e1-1 arg sleep arg 300 gpu 2
	[ "$status" -eq 0 ]
	pid=$(field pid <<< "$output")
	sup=$(awk '{ sub(/.*\) /, ""); print $2 }' "/proc/$pid/stat")
	kill -KILL "$sup"
	kill -KILL -- "-$pid"
	wait_for 5 'lock_free e1-1'
	# Launched again: answered (as lost), not started again.
	run cardbaton-worker launch < "$T/spec.in"
	[ "$status" -eq 0 ]
	[ "$(field state <<< "$output")" = lost ]
	run cardbaton-worker status e1-1
	[ "$status" -eq 0 ]
	[ "$(field state <<< "$output")" = lost ]
	[ "$(field alive <<< "$output")" = 0 ]
	[ "$(field reason <<< "$output")" = "worker vanished without a final status" ]
	[ -n "$(field finished <<< "$output")" ]
	[ "$(field state < "$STATE/attempts/e1-1.state")" = lost ]
	not grep -q '^alive' "$STATE/attempts/e1-1.state"
	lease_free "$U2"
}

# ---- cancel, timeout -----------------------------------------------------------

@test "cancel: the whole process group goes; the state is cancelled" {
	launch attempt f0-1 shell 'sleep 300 & echo $! > "$BG"; sleep 300' env "BG=$T/bg" gpu 0
	[ "$status" -eq 0 ]
	pid=$(field pid <<< "$output")
	wait_for 10 'test -s "$T/bg"'
	bg=$(cat "$T/bg")
	kill -0 "$bg"
	SECONDS=0
	run cardbaton-worker cancel f0-1
	[ "$status" -eq 0 ]
	[ "$SECONDS" -le 2 ]
	[ "$(field state <<< "$output")" = cancelled ]
	[ "$(field reason <<< "$output")" = cancelled ]
	# Every process of the attempt is gone (reaped by the supervisor,
	# so not even a zombie), and so are the lease and the lock.
	not kill -0 "$pid" 2>/dev/null
	not kill -0 "$bg" 2>/dev/null
	wait_for 10 'lock_free f0-1'
	lease_free "$U0"
	# Cancel of a finished attempt: the record, unchanged.
	before=$(cat "$STATE/attempts/f0-1.state")
	run cardbaton-worker cancel f0-1
	[ "$status" -eq 0 ]
	[ "$output" = "$before" ]
	[ "$(cat "$STATE/attempts/f0-1.state")" = "$before" ]
	run cardbaton-worker cancel nope
	[ "$status" -eq 66 ]
	[[ $output == *"cardbaton-worker: unknown attempt nope"* ]]
}

@test "a finished job's leftover processes (its group, and escapees in a new session) are stopped before the final state" {
	launch attempt f2-1 shell 'sleep 300 & echo $! > "$BG"; setsid sleep 301 & echo $! > "$ESC"; exit 0' \
		env "BG=$T/bg" env "ESC=$T/esc" gpu 2
	[ "$status" -eq 0 ]
	SECONDS=0
	wait_final f2-1
	[ "$SECONDS" -le 2 ]
	[ "$(st f2-1 state)" = succeeded ]
	not kill -0 "$(cat "$T/bg")" 2>/dev/null
	not kill -0 "$(cat "$T/esc")" 2>/dev/null
	lease_free "$U2"
}

@test "timeout: the job is stopped and fails with reason timeout" {
	SECONDS=0
	launch attempt f1-1 arg sleep arg 300 timeout 1 gpu 1
	[ "$status" -eq 0 ]
	wait_final f1-1 5
	[ "$SECONDS" -le 3 ]
	run cardbaton-worker status f1-1
	[ "$(field state <<< "$output")" = failed ]
	[ "$(field reason <<< "$output")" = timeout ]
	[ "$(field signal <<< "$output")" = 15 ]
	[ "$(field timeout <<< "$output")" = 1 ]
	# Not resumable: never asked to pause, never pausing.
	[ ! -e "$STATE/attempts/f1-1/pause" ]
	lease_free "$U1"
}

# ---- pause, the checkpoint contract, the time limit's pause -------------------

@test "pause: pausing (state file and watch), then paused with the checkpoint and exit 75" {
	start_watch
	go_fifo
	launch attempt 5a-1 shell "$CKJOB" env "GO=$T/go" env 'MARK={"checkpoint": "/ck/step 7", "step": 7}' \
		env CODE=75 resumable 1 gpu 0
	[ "$status" -eq 0 ]
	pid=$(field pid <<< "$output")
	sup=$(sup_of "$pid")
	[ ! -e "$STATE/attempts/5a-1/pause" ]
	# pause answers at once (the job is still waiting for go).
	run cardbaton-worker pause 5a-1
	[ "$status" -eq 0 ]
	[ "$(field attempt <<< "$output")" = 5a-1 ]
	grep -Eq '^state (running|pausing)$' <<< "$output"
	[ -f "$STATE/attempts/5a-1/pause" ]
	[ ! -L "$STATE/attempts/5a-1/pause" ]
	wait_for 5 '[ "$(field state < "$STATE/attempts/5a-1.state")" = pausing ]'
	rec=$(cat "$STATE/attempts/5a-1.state")
	[ "$(field reason <<< "$rec")" = "pause requested" ]
	[ "$(field pid <<< "$rec")" = "$pid" ]
	[ "$(field pgid <<< "$rec")" = "$pid" ]
	[ "$(field gpu <<< "$rec")" = 0 ]
	[ "$(field uuid <<< "$rec")" = "$U0" ]
	[ -n "$(field started <<< "$rec")" ]
	[ "$(field log <<< "$rec")" = "$STATE/attempts/5a-1/log" ]
	not grep -q '^timeout ' <<< "$rec"
	not grep -q '^exit_code ' <<< "$rec"
	wait_for 5 'grep -qx "state pausing" "$T/watch.out"'
	[ "$(field reason <<< "$(record_with 'state pausing' < "$T/watch.out")")" = "pause requested" ]
	# Pausing is not an end: alive, the card held, the supervisor asleep.
	[ "$(st 5a-1 alive)" = 1 ]
	not lease_free "$U0"
	c0=$(cpu_ticks "$sup")
	settle 0.5
	[ $(( $(cpu_ticks "$sup") - c0 )) -le 2 ]
	# Asked again while pausing: answered, harmless.
	run cardbaton-worker pause 5a-1
	[ "$status" -eq 0 ]
	[ "$(field state <<< "$output")" = pausing ]
	go
	wait_final 5a-1
	run cardbaton-worker status 5a-1
	[ "$(field state <<< "$output")" = paused ]
	[ "$(field exit_code <<< "$output")" = 75 ]
	[ "$(field checkpoint <<< "$output")" = "/ck/step 7" ]
	[ "$(field reason <<< "$output")" = "checkpoint saved" ]
	[ -n "$(field finished <<< "$output")" ]
	[ "$(field alive <<< "$output")" = 0 ]
	not grep -q '^timeout ' <<< "$output"
	not grep -q '^signal ' <<< "$output"
	lease_free "$U0"
	wait_for 5 'grep -qx "state paused" "$T/watch.out"'
	[ "$(field checkpoint <<< "$(record_with 'state paused' < "$T/watch.out")")" = "/ck/step 7" ]
	stop_watch
	# Paused is final: pause and cancel answer the record unchanged.
	before=$(cat "$STATE/attempts/5a-1.state")
	run cardbaton-worker pause 5a-1
	[ "$status" -eq 0 ]
	[ "$output" = "$before" ]
	run cardbaton-worker cancel 5a-1
	[ "$status" -eq 0 ]
	[ "$output" = "$before" ]
	[ "$(cat "$STATE/attempts/5a-1.state")" = "$before" ]
}

@test "pause: a marker of exactly 64 KiB, with other JSON around an escaped path, is accepted; one byte more is not" {
	# A marker of exactly 64 KiB: other keys of every kind, escapes.
	printf '{"step": [1, -2.5e3, true, null, {"a": "\\u00e9"}], "checkpoint": "/ck/\\u00e9t\\u00e9 \\ud83d\\ude00\\/x", "pad": "' > "$T/mark"
	n=$(( 65536 - $(stat -c %s "$T/mark") - 2 ))
	head -c "$n" /dev/zero | tr '\0' x >> "$T/mark"
	printf '"}' >> "$T/mark"
	[ "$(stat -c %s "$T/mark")" -eq 65536 ]
	launch attempt 5a-2 shell "$CKJOB" env "PUBLISH=cp \"$T/mark\" \"\$SSHGPU_CHECKPOINT_READY\"" env CODE=75 resumable 1
	[ "$status" -eq 0 ]
	run cardbaton-worker pause 5a-2
	[ "$status" -eq 0 ]
	wait_final 5a-2
	run cardbaton-worker status 5a-2
	[ "$(field state <<< "$output")" = paused ]
	[ "$(field checkpoint <<< "$output")" = "/ck/été 😀/x" ]
	# One byte more is refused.
	printf ' ' >> "$T/mark"
	launch attempt 5a-3 shell "$CKJOB" env "PUBLISH=cp \"$T/mark\" \"\$SSHGPU_CHECKPOINT_READY\"" env CODE=75 resumable 1
	run cardbaton-worker pause 5a-3
	wait_final 5a-3
	run cardbaton-worker status 5a-3
	[ "$(field state <<< "$output")" = failed ]
	[ "$(field reason <<< "$output")" = "checkpoint marker at $STATE/attempts/5a-3/checkpoint is larger than 64 KiB" ]
}

@test "pause: asked while the attempt is still starting (its cards being checked), the job sees the request at once and pauses" {
	echo 0.5 > "$FAKE_GPU_DIR/delay"
	spec attempt 5a-4 shell "$CKJOB" env 'MARK={"checkpoint": "/ck/early"}' env CODE=75 resumable 1 gpu 0 > "$T/spec.in"
	cardbaton-worker launch < "$T/spec.in" > "$T/launch.out" &
	lpid=$!
	wait_for 5 'test -e "$STATE/attempts/5a-4/spec"'
	run cardbaton-worker pause 5a-4
	[ "$status" -eq 0 ]
	[ "$(field state <<< "$output")" = starting ]
	wait "$lpid"
	rm "$FAKE_GPU_DIR/delay"
	wait_final 5a-4
	run cardbaton-worker status 5a-4
	[ "$(field state <<< "$output")" = paused ]
	[ "$(field checkpoint <<< "$output")" = /ck/early ]
	[ "$(field reason <<< "$output")" = "checkpoint saved" ]
}

@test "pause: a job that finishes (exit 0) before it checkpoints has succeeded" {
	launch attempt 5c-1 shell "$CKJOB" env 'MARK={"checkpoint": "/x"}' env CODE=0 resumable 1
	[ "$status" -eq 0 ]
	run cardbaton-worker pause 5c-1
	[ "$status" -eq 0 ]
	wait_final 5c-1
	run cardbaton-worker status 5c-1
	[ "$(field state <<< "$output")" = succeeded ]
	[ "$(field exit_code <<< "$output")" = 0 ]
}

@test "pause: every other end after a pause request is a failure that says what was missing" {
	A=$STATE/attempts
	# ck ID CODE MARK REASON [SPEC KEY VALUE]...
	ck() {
		local id=$1 code=$2 mark=$3 want=$4
		shift 4
		launch attempt "$id" shell "$CKJOB" env "MARK=$mark" env "CODE=$code" resumable 1 "$@"
		[ "$status" -eq 0 ] || { echo "launch $id: $output"; return 1; }
		run cardbaton-worker pause "$id"
		[ "$status" -eq 0 ] || { echo "pause $id: $output"; return 1; }
		wait_final "$id" || return 1
		run cardbaton-worker status "$id"
		[ "$(field state <<< "$output")" = failed ] || { echo "$id: $output"; return 1; }
		[ "$(field reason <<< "$output")" = "$want" ] || { echo "$id: $output"; echo "wanted: $want"; return 1; }
		not grep -q '^timeout ' <<< "$output"
	}
	ck 5b-1 75 '' "exit status 75 but no checkpoint marker at $A/5b-1/checkpoint"
	[ "$(st 5b-1 exit_code)" = 75 ]
	ck 5b-2 75 'not json' "checkpoint marker is not valid JSON: unexpected character 'n' (expected a value) at offset 0"
	ck 5b-3 75 '{"checkpoint": "/x"' \
		"checkpoint marker is not valid JSON: unexpected end of input (expected ',' or '}') at offset 19"
	ck 5b-4 75 '{"checkpoint": "/x"} junk' "checkpoint marker is not valid JSON: trailing characters after the JSON value at offset 21"
	ck 5b-5 75 "{'checkpoint': '/x'}" "checkpoint marker is not valid JSON: unexpected byte 0x27 (expected a string key) at offset 1"
	ck 5b-6 75 '{"checkpoint": ""}' 'checkpoint marker has no non-empty "checkpoint" string'
	ck 5b-7 75 '{"path": "/x"}' 'checkpoint marker has no non-empty "checkpoint" string'
	ck 5b-8 75 '{"checkpoint": 5}' 'checkpoint marker has no non-empty "checkpoint" string'
	ck 5b-9 75 '{"checkpoint": null}' 'checkpoint marker has no non-empty "checkpoint" string'
	ck 5b-a 75 '["/x"]' 'checkpoint marker is not a JSON object'
	ck 5b-b 75 '{"checkpoint": "/x", "checkpoint": "/y"}' 'checkpoint marker has "checkpoint" more than once'
	# The right marker but the wrong exit.
	ck 5b-d 3 '{"checkpoint": "/x"}' 'paused but exited with status 3 (expected 75)'
	[ "$(st 5b-d exit_code)" = 3 ]
	ck 5b-e 75 '{"checkpoint": "/x"}' 'killed by signal 9 (SIGKILL) after a pause request' env 'PUBLISH=kill -9 $$'
	[ "$(st 5b-e signal)" = 9 ]
	# A marker that is not a plain file: a symlink (to a valid one), a
	# FIFO (which must not hang the supervisor), a directory.
	printf '{"checkpoint": "/x"}' > "$T/real"
	ck 5b-f 75 '' "checkpoint marker at $A/5b-f/checkpoint is a symbolic link" \
		env "REAL=$T/real" env 'PUBLISH=ln -s "$REAL" "$SSHGPU_CHECKPOINT_READY"'
	ck 5b-10 75 '' "checkpoint marker at $A/5b-10/checkpoint is not a regular file" \
		env 'PUBLISH=mkfifo "$SSHGPU_CHECKPOINT_READY"'
	ck 5b-11 75 '' "checkpoint marker at $A/5b-11/checkpoint is not a regular file" \
		env 'PUBLISH=mkdir "$SSHGPU_CHECKPOINT_READY"'
}

@test "pause: exit 75 without a pause request is an ordinary failure, marker or not" {
	launch attempt 5c-1 shell 'printf "{\"checkpoint\": \"/x\"}" > "$SSHGPU_CHECKPOINT_READY"; exit 75' resumable 1
	[ "$status" -eq 0 ]
	wait_final 5c-1
	run cardbaton-worker status 5c-1
	[ "$(field state <<< "$output")" = failed ]
	[ "$(field reason <<< "$output")" = "exit status 75" ]
	[ "$(field exit_code <<< "$output")" = 75 ]
	not grep -q '^checkpoint ' <<< "$output"
}

@test "pause: a pause file or marker left in a taken-over attempt directory does not count" {
	mkdir -p "$STATE/attempts/5d-1"
	printf '{"checkpoint": "/stale"}' > "$STATE/attempts/5d-1/checkpoint"
	: > "$STATE/attempts/5d-1/pause"
	launch attempt 5d-1 shell '[ ! -e "$SSHGPU_PAUSE_FILE" ] || echo pause >> "$SEEN"
		[ ! -e "$SSHGPU_CHECKPOINT_READY" ] || echo marker >> "$SEEN"
		'"$CKJOB" env "SEEN=$T/seen" env CODE=75 resumable 1
	[ "$status" -eq 0 ]
	[ "$(field state <<< "$output")" = running ]
	settle 0.2
	[ "$(st 5d-1 state)" = running ]
	run cardbaton-worker pause 5d-1
	[ "$status" -eq 0 ]
	wait_final 5d-1
	[ "$(st 5d-1 state)" = failed ]
	[ "$(st 5d-1 reason)" = "exit status 75 but no checkpoint marker at $STATE/attempts/5d-1/checkpoint" ]
	[ ! -e "$T/seen" ]
}

@test "pause: refused (1) for a non-resumable attempt, 66 for an unknown one, the record unchanged for a finished one" {
	go_fifo
	launch attempt 5e-1 shell 'read x < "$GO"' env "GO=$T/go"
	[ "$status" -eq 0 ]
	run cardbaton-worker pause 5e-1
	[ "$status" -eq 1 ]
	[ "$output" = "cardbaton-worker: attempt 5e-1 is not resumable" ]
	[ ! -e "$STATE/attempts/5e-1/pause" ]
	[ "$(st 5e-1 state)" = running ]
	go
	wait_final 5e-1
	[ "$(st 5e-1 state)" = succeeded ]
	run cardbaton-worker pause nope
	[ "$status" -eq 66 ]
	[ "$output" = "cardbaton-worker: unknown attempt nope" ]
	run cardbaton-worker pause ../x
	[ "$status" -eq 66 ]
	launch attempt 5e-2 arg true resumable 1
	wait_final 5e-2
	before=$(cat "$STATE/attempts/5e-2.state")
	run cardbaton-worker pause 5e-2
	[ "$status" -eq 0 ]
	[ "$output" = "$before" ]
	[ "$(cat "$STATE/attempts/5e-2.state")" = "$before" ]
	[ ! -e "$STATE/attempts/5e-2/pause" ]
	run cardbaton-worker pause
	[ "$status" -eq 64 ]
	[[ $output == "cardbaton-worker: usage: "* ]]
	run cardbaton-worker pause a b
	[ "$status" -eq 64 ]
}

@test "pause: cancel while pausing wins; a supervisor that vanishes while pausing leaves a lost attempt" {
	launch attempt 5f-1 shell 'sleep 300 & echo $! > "$BG"; sleep 300' env "BG=$T/bg" resumable 1 gpu 3
	[ "$status" -eq 0 ]
	pid=$(field pid <<< "$output")
	wait_for 10 'test -s "$T/bg"'
	run cardbaton-worker pause 5f-1
	[ "$status" -eq 0 ]
	wait_for 5 '[ "$(st 5f-1 state)" = pausing ]'
	SECONDS=0
	run cardbaton-worker cancel 5f-1
	[ "$status" -eq 0 ]
	[ "$SECONDS" -le 2 ]
	[ "$(field state <<< "$output")" = cancelled ]
	[ "$(field reason <<< "$output")" = cancelled ]
	not kill -0 "$pid" 2>/dev/null
	not kill -0 "$(cat "$T/bg")" 2>/dev/null
	wait_for 10 'lease_free "$U3"'

	launch attempt 5f-2 arg sleep arg 300 resumable 1
	pid=$(field pid <<< "$output")
	sup=$(sup_of "$pid")
	run cardbaton-worker pause 5f-2
	wait_for 5 '[ "$(st 5f-2 state)" = pausing ]'
	kill -KILL "$sup"
	kill -KILL -- "-$pid"
	wait_for 5 'lock_free 5f-2'
	run cardbaton-worker status 5f-2
	[ "$(field state <<< "$output")" = lost ]
	[ "$(field reason <<< "$output")" = "worker vanished without a final status" ]
}

@test "share: sharing attempts hold a card together (LOCK_SH and a mark each); an exclusive one is refused there, and a sharer beside an exclusive one; gpus lists every holder" {
	launch attempt 7a-1 arg sleep arg 300 gpu 0 share 1 memory 20000 max_jobs_per_gpu 2
	[ "$status" -eq 0 ]
	[ "$(field state <<< "$output")" = running ]
	# The fake card shows the first sharer's memory and process.
	fake_gpus "0, $U0, NVIDIA Fake A100, 20000, 81920, 0" \
		"1, $U1, NVIDIA Fake A100, 0, 81920, 0" \
		"2, $U2, NVIDIA Fake A100, 0, 81920, 0" \
		"3, $U3, NVIDIA Fake A100, 0, 81920, 0"
	fake_apps "$U0, 4242, 20000"
	# The spec's max_jobs_per_gpu: one sharer alone at 1 (the default).
	launch attempt 7a-2 arg sleep arg 300 gpu 0 share 1 memory 20000
	[ "$(field state <<< "$output")" = busy ]
	[ "$(field reason <<< "$output")" = "GPU 0 ($U0): shared by 1 job, max_jobs_per_gpu 1" ]
	launch attempt 7a-2 arg sleep arg 300 gpu 0 share 1 memory 20000 max_jobs_per_gpu 2
	[ "$(field state <<< "$output")" = running ]
	# A third: busy, whatever memory is free; no mark of it is left.
	launch attempt 7a-9 arg true gpu 0 share 1 memory 1000 max_jobs_per_gpu 2
	[ "$(field state <<< "$output")" = busy ]
	[ "$(field reason <<< "$output")" = "GPU 0 ($U0): shared by 2 jobs, max_jobs_per_gpu 2" ]
	[ ! -e "$STATE/leases/$U0+7a-9" ] && [ ! -e "$STATE/leases/.$U0+7a-9" ]
	launch attempt 7a-10 arg true gpu 0 share 1 memory 1000 max_jobs_per_gpu 0
	[ "$status" -ne 0 ]
	run cardbaton-worker gpus
	rec=$(gpu_rec 0 <<< "$output")
	[ "$(field shared <<< "$rec")" = 1 ]
	[ "$(grep -c '^lease ' <<< "$rec")" -eq 2 ]
	grep -qx 'lease 7a-1' <<< "$rec"
	grep -qx 'lease 7a-2' <<< "$rec"
	# An exclusive attempt: the card is busy (and its lease is held shared).
	launch attempt 7a-3 arg true gpu 0
	[ "$(field state <<< "$output")" = busy ]
	# More than its free memory: busy.
	launch attempt 7a-4 arg true gpu 0 share 1 memory 70000 max_jobs_per_gpu 3
	[ "$(field state <<< "$output")" = busy ]
	[[ "$(field reason <<< "$output")" == *"MiB free, 70000 wanted"* ]]
	# A sharer on a card an exclusive attempt holds: refused.
	launch attempt 7a-5 arg sleep arg 300 gpu 1
	[ "$(field state <<< "$output")" = running ]
	launch attempt 7a-6 arg true gpu 1 share 1 memory 1000
	[ "$(field state <<< "$output")" = busy ]
	# A compute process of no sharing job: no sharer.
	fake_apps "$U0, 4242, 20000" "$U2, 999, 100"
	launch attempt 7a-7 arg true gpu 2 share 1 memory 1000
	[ "$(field state <<< "$output")" = busy ]
	[[ "$(field reason <<< "$output")" == *"compute processes of no sharing job"* ]]
	# share without memory is a bad spec.
	launch attempt 7a-8 arg true gpu 3 share 1
	[ "$status" -ne 0 ]
	for a in 7a-1 7a-2 7a-5; do cardbaton-worker cancel "$a" >/dev/null; done
	wait_for 10 'lease_free "$U0"'
	[ -z "$(ls "$STATE/leases" | grep '+')" ]
	fake_apps
	fake_gpus "0, $U0, NVIDIA Fake A100, 0, 81920, 0" "1, $U1, NVIDIA Fake A100, 0, 81920, 0" \
		"2, $U2, NVIDIA Fake A100, 0, 81920, 0" "3, $U3, NVIDIA Fake A100, 0, 81920, 0"
	launch attempt 7a-9 arg true gpu 0
	# `true` may have ended by the time the launcher answers.
	grep -Eq '^state (running|succeeded)$' <<< "$output"
}

@test "pause --grace (a yield): pausing with its why, then paused with requeue 1; ignored, failed with its fail reason once the grace is out" {
	launch attempt 5e-1 shell "$CKJOB" env "GO=$T/go" env 'MARK={"checkpoint": "/ck/y"}' env CODE=75 \
		resumable 1 gpu 1
	[ "$status" -eq 0 ]
	go_fifo
	run cardbaton-worker pause --grace 30 --why "preempted by job 7" --fail "preempted: no checkpoint within 30 s" 5e-1
	[ "$status" -eq 0 ]
	wait_for 5 '[ "$(st 5e-1 state)" = pausing ]'
	[ "$(st 5e-1 reason)" = "preempted by job 7" ]
	[ "$(st 5e-1 requeue)" = 1 ]
	# A second request does not replace the first.
	run cardbaton-worker pause 5e-1
	[ "$status" -eq 0 ]
	[ "$(field why < "$STATE/attempts/5e-1/pause")" = "preempted by job 7" ]
	go
	wait_final 5e-1
	run cardbaton-worker status 5e-1
	[ "$(field state <<< "$output")" = paused ]
	[ "$(field checkpoint <<< "$output")" = /ck/y ]
	[ "$(field reason <<< "$output")" = "preempted by job 7: checkpoint saved" ]
	[ "$(field requeue <<< "$output")" = 1 ]
	not grep -q '^timeout ' <<< "$output"
	lease_free "$U1"
	# One that ignores it: stopped when the grace runs out.
	launch attempt 5e-2 shell 'sleep 300 & echo $! > "$BG"; sleep 300' env "BG=$T/bg" resumable 1 gpu 2
	pid=$(field pid <<< "$output")
	wait_for 10 'test -s "$T/bg"'
	run cardbaton-worker pause --grace 1 --why "node lab drained" --fail "drained: no checkpoint within 1 s" 5e-2
	[ "$status" -eq 0 ]
	wait_final 5e-2 8
	run cardbaton-worker status 5e-2
	[ "$(field state <<< "$output")" = failed ]
	[ "$(field reason <<< "$output")" = "drained: no checkpoint within 1 s" ]
	not grep -q '^requeue ' <<< "$output"
	not kill -0 "$pid" 2>/dev/null
	not kill -0 "$(cat "$T/bg")" 2>/dev/null
	lease_free "$U2"
	# Bad requests.
	launch attempt 5e-3 arg sleep arg 300 resumable 1
	run cardbaton-worker pause --grace x --why a --fail b 5e-3
	[ "$status" -eq 64 ]
	run cardbaton-worker pause --grace 5 --why a 5e-3
	[ "$status" -eq 64 ]
	[ "$(st 5e-3 state)" = running ]
	run cardbaton-worker cancel 5e-3
}

@test "time limit, resumable: asked to pause at the limit; a checkpoint within the grace is paused with timeout 1" {
	start_watch
	go_fifo
	t0=$(now_ms)
	launch attempt 6a-1 shell "$CKJOB" env "GO=$T/go" env 'MARK={"checkpoint": "/ck/limit"}' env CODE=75 \
		resumable 1 timeout 1 grace 5 gpu 1
	[ "$status" -eq 0 ]
	[ "$(field state <<< "$output")" = running ]
	wait_for 5 'grep -qx "state pausing" "$T/watch.out"'
	[ $(( $(now_ms) - t0 )) -ge 1000 ]
	rec=$(record_with 'state pausing' < "$T/watch.out")
	[ "$(field reason <<< "$rec")" = "time limit reached: pause requested" ]
	[ "$(field timeout <<< "$rec")" = 1 ]
	[ -f "$STATE/attempts/6a-1/pause" ]
	go
	wait_final 6a-1
	run cardbaton-worker status 6a-1
	[ "$(field state <<< "$output")" = paused ]
	[ "$(field exit_code <<< "$output")" = 75 ]
	[ "$(field checkpoint <<< "$output")" = /ck/limit ]
	[ "$(field reason <<< "$output")" = "time limit reached: checkpoint saved" ]
	[ "$(field timeout <<< "$output")" = 1 ]
	lease_free "$U1"
	stop_watch
}

@test "time limit, resumable: a job that ignores the request is stopped when the grace runs out: failed, timeout, all its processes gone" {
	t0=$(now_ms)
	launch attempt 6b-1 shell 'sleep 300 & echo $! > "$BG"; sleep 300' env "BG=$T/bg" resumable 1 timeout 1 grace 1 gpu 2
	[ "$status" -eq 0 ]
	pid=$(field pid <<< "$output")
	wait_for 10 'test -s "$T/bg"'
	wait_for 5 '[ "$(field state < "$STATE/attempts/6b-1.state")" = pausing ]'
	[ "$(field reason < "$STATE/attempts/6b-1.state")" = "time limit reached: pause requested" ]
	wait_final 6b-1 6
	el=$(( $(now_ms) - t0 ))
	[ "$el" -ge 2000 ]
	[ "$el" -le 4000 ]
	run cardbaton-worker status 6b-1
	[ "$(field state <<< "$output")" = failed ]
	[ "$(field reason <<< "$output")" = timeout ]
	[ "$(field signal <<< "$output")" = 15 ]
	[ "$(field timeout <<< "$output")" = 1 ]
	not grep -q '^checkpoint ' <<< "$output"
	not kill -0 "$pid" 2>/dev/null
	not kill -0 "$(cat "$T/bg")" 2>/dev/null
	lease_free "$U2"
	# A user's pause that is ignored is bounded the same way by the
	# limit and the grace.
	launch attempt 6b-2 arg sleep arg 300 resumable 1 timeout 1 grace 1
	run cardbaton-worker pause 6b-2
	[ "$status" -eq 0 ]
	wait_final 6b-2 6
	[ "$(st 6b-2 state)" = failed ]
	[ "$(st 6b-2 reason)" = timeout ]
}

@test "the time limit is kept by the supervisor alone: no controller and no worker command after the launch" {
	spec attempt 6c-1 shell "$CKJOB" env 'MARK={"checkpoint": "/ck/alone"}' env CODE=75 resumable 1 timeout 1 grace 5 > "$T/s1"
	spec attempt 6c-2 arg sleep arg 300 resumable 1 timeout 1 grace 1 > "$T/s2"
	spec attempt 6c-3 arg sleep arg 300 timeout 1 > "$T/s3"
	# Launched as ssh would, the launchers gone at once; from now on
	# only the state files are read.
	for i in 1 2 3; do
		setsid cardbaton-worker launch < "$T/s$i" > /dev/null 2>&1
	done
	wait_for 5 '[ "$(field state < "$STATE/attempts/6c-1.state")" = paused ]'
	[ "$(field checkpoint < "$STATE/attempts/6c-1.state")" = /ck/alone ]
	[ "$(field timeout < "$STATE/attempts/6c-1.state")" = 1 ]
	wait_for 6 '[ "$(field state < "$STATE/attempts/6c-2.state")" = failed ]'
	[ "$(field reason < "$STATE/attempts/6c-2.state")" = timeout ]
	wait_for 5 '[ "$(field state < "$STATE/attempts/6c-3.state")" = failed ]'
	[ "$(field reason < "$STATE/attempts/6c-3.state")" = timeout ]
	[ ! -e "$STATE/attempts/6c-3/pause" ]
}

@test "the contract's variables: absolute paths with a relative state directory; the checkpoint ones only on a resumed attempt" {
	mkdir -p "$T/w"
	cd "$T/w"
	spec attempt 6d-1 resumable 1 env "OUT=$T/vars" env SSHGPU_CHECKPOINT=/injected env CARDBATON_CHECKPOINT=/injected \
		shell 'printf "%s\n" "$SSHGPU_PAUSE_FILE" "$CARDBATON_PAUSE_FILE" "$SSHGPU_CHECKPOINT_READY" "$CARDBATON_CHECKPOINT_READY" "${SSHGPU_CHECKPOINT-unset}" "${CARDBATON_CHECKPOINT-unset}" > "$OUT"' \
		> "$T/spec.in"
	run cardbaton-worker -d rel/state launch < "$T/spec.in"
	[ "$status" -eq 0 ]
	wait_for 5 'test -s "$T/vars"'
	a=$(pwd -P)/rel/state/attempts/6d-1
	[ "$(cat "$T/vars")" = "$(printf '%s\n' "$a/pause" "$a/pause" "$a/checkpoint" "$a/checkpoint" unset unset)" ]
	# Resumed: SSHGPU_CHECKPOINT and CARDBATON_CHECKPOINT are the spec's
	# checkpoint, whatever the environment says.
	spec attempt 6d-2 resumable 1 checkpoint '/saved/step 9' env SSHGPU_CHECKPOINT=/injected env "OUT=$T/ck" \
		shell 'printf "%s|%s\n" "$SSHGPU_CHECKPOINT" "$CARDBATON_CHECKPOINT" > "$OUT"' > "$T/spec.in"
	SSHGPU_CHECKPOINT=/inherited CARDBATON_CHECKPOINT=/inherited run cardbaton-worker -d rel/state launch < "$T/spec.in"
	[ "$status" -eq 0 ]
	wait_for 5 'test -s "$T/ck"'
	[ "$(cat "$T/ck")" = "/saved/step 9|/saved/step 9" ]
	[ "$(cardbaton-worker -d rel/state status 6d-2 | field checkpoint)" = "/saved/step 9" ]
}

# ---- watch --------------------------------------------------------------------

@test "watch: ready first, then each state record as it is replaced; exits when stdin closes" {
	launch attempt 9a-0 arg true
	wait_final 9a-0
	mkfifo "$T/watch.in"
	cardbaton-worker watch < "$T/watch.in" > "$T/watch.out" 3>&- &
	wpid=$!
	exec {wfd}> "$T/watch.in"
	wait_for 10 'grep -qx "ready 1" "$T/watch.out"'
	# No history: only the ready record so far.
	[ "$(cat "$T/watch.out")" = "$(printf 'ready 1\nrequests launch\nstage 1\nend')" ]
	go_fifo
	launch attempt 9a-1 shell 'read x < "$GO"' env "GO=$T/go"
	wait_for 10 'grep -qx "state running" "$T/watch.out"'
	go
	# The final record within a second of the job's end.
	within 1 'grep -qx "state succeeded" "$T/watch.out"'
	rec=$(awk '$0 == "end" { if (hit) print rec; rec = ""; hit = 0; next }
		{ rec = rec $0 "\n"; if ($0 == "state succeeded") hit = 1 }' "$T/watch.out")
	[ "$(field attempt <<< "$rec")" = 9a-1 ]
	[ "$(field exit_code <<< "$rec")" = 0 ]
	not grep -q 9a-0 "$T/watch.out"
	exec {wfd}>&-
	wait "$wpid"
	# stdin at EOF from the start: ready, then exit 0.
	run cardbaton-worker watch < /dev/null
	[ "$status" -eq 0 ]
	[ "$output" = "$(printf 'ready 1\nrequests launch\nstage 1\nend')" ]
}

# reply_rec < watch output : the reply record.
reply_rec() {
	awk '$0 == "end" { if (hit) { print rec; exit } rec = ""; hit = 0; next }
		{ rec = rec $0 "\n"; if ($1 == "reply") hit = 1 }'
}

@test "watch runs a launch request as launch would, and answers with its exit status, output and error" {
	fake_gpus "0, GPU-00000000-0000-0000-0000-000000000000, NVIDIA Fake A100, 0, 81920, 0"
	mkfifo "$T/watch.in"
	cardbaton-worker watch < "$T/watch.in" > "$T/watch.out" 3>&- &
	wpid=$!
	exec {wfd}> "$T/watch.in"
	wait_for 10 'grep -qx "ready 1" "$T/watch.out"'
	go_fifo
	{ echo "request launch"; spec attempt 9c-1 gpu 0 shell 'read x < "$GO"' env "GO=$T/go"; } >&$wfd
	wait_for 10 'grep -qx "reply launch" "$T/watch.out"'
	rec=$(reply_rec < "$T/watch.out")
	[ "$(field exit <<< "$rec")" = 0 ]
	[ "$(field out <<< "$rec" | field state)" = running ]
	[ "$(field out <<< "$rec" | field uuid)" = GPU-00000000-0000-0000-0000-000000000000 ]
	# The job is the launcher's, not the watch's: it runs on its own.
	[ "$(st 9c-1 state)" = running ]
	# The card is leased: a second launch on it answers busy (75).
	{ echo "request launch"; spec attempt 9c-2 gpu 0 arg true; } >&$wfd
	wait_for 10 '[ "$(grep -cx "reply launch" "$T/watch.out")" -eq 2 ]'
	rec=$(awk '$0 == "end" { if (hit == 2) { print rec; exit } rec = ""; next }
		{ rec = rec $0 "\n"; if ($1 == "reply") hit++ }' "$T/watch.out")
	[ "$(field exit <<< "$rec")" = 75 ]
	[ "$(field out <<< "$rec" | field state)" = busy ]
	# A bad spec: 65 and the error line, and the stream goes on.
	{ echo "request launch"; spec attempt 9c-3; } >&$wfd
	wait_for 10 '[ "$(grep -cx "reply launch" "$T/watch.out")" -eq 3 ]'
	grep -q "^exit 65$" "$T/watch.out"
	grep -q "^error cardbaton-worker:%20bad%20spec:" "$T/watch.out"
	# An unknown request: 64.
	{ echo "request fly"; echo end; } >&$wfd
	wait_for 10 'grep -qx "reply fly" "$T/watch.out"'
	grep -q "^exit 64$" "$T/watch.out"
	# The job's state events still come.
	go
	wait_for 5 'grep -qx "state succeeded" "$T/watch.out"'
	exec {wfd}>&-
	wait "$wpid"
}

@test "launch: a spec with the cards' UUIDs takes their leases at once; a UUID that no longer matches answers busy" {
	fake_gpus "0, GPU-00000000-0000-0000-0000-000000000000, NVIDIA Fake A100, 0, 81920, 0"
	# nvidia-smi, each run logged.
	mkdir -p "$T/bin"
	printf '#!/bin/sh\necho "$1" >> "%s/smi.calls"\nexec "%s" "$@"\n' "$T" "$(command -v nvidia-smi)" > "$T/bin/nvidia-smi"
	chmod +x "$T/bin/nvidia-smi"
	PATH=$T/bin:$PATH
	# Without UUIDs: the cards first, then everything under the leases.
	launch attempt 9d-0 gpu 0 arg true
	[ "$status" -eq 0 ]
	[ "$(wc -l < "$T/smi.calls")" -eq 3 ]
	wait_final 9d-0
	: > "$T/smi.calls"
	# With them: only the check under the leases.
	launch attempt 9d-1 gpu 0 uuid GPU-00000000-0000-0000-0000-000000000000 arg true
	[ "$status" -eq 0 ]
	[ "$(wc -l < "$T/smi.calls")" -eq 2 ]
	wait_final 9d-1
	[ "$(st 9d-1 uuid)" = GPU-00000000-0000-0000-0000-000000000000 ]
	# The card at index 0 is another one now.
	launch attempt 9d-2 gpu 0 uuid GPU-11111111-0000-0000-0000-000000000000 arg true
	[ "$status" -eq 75 ]
	[ "$(field reason <<< "$output")" = "GPU 0: now GPU-00000000-0000-0000-0000-000000000000, was GPU-11111111-0000-0000-0000-000000000000" ]
	[ ! -e "$STATE/attempts/9d-2" ]
	# Bad UUIDs are refused before anything is touched.
	launch attempt 9d-3 gpu 0 uuid ../../escape arg true
	[ "$status" -eq 65 ]
	[[ $output == *"uuid must be"* ]]
	launch attempt 9d-4 gpu 0 gpu 1 uuid GPU-00000000-0000-0000-0000-000000000000 arg true
	[ "$status" -eq 65 ]
	[[ $output == *"once for each gpu"* ]]
	[ ! -e "$STATE/leases/escape" ] && [ ! -e "$STATE/../escape" ]
}

# ---- log ----------------------------------------------------------------------

@test "log prints the job's output; log -f follows it to the end" {
	go_fifo
	launch attempt 9b-1 shell 'echo one; echo err >&2; read x < "$GO"; echo two' env "GO=$T/go"
	[ "$status" -eq 0 ]
	wait_for 10 'grep -q one "$STATE/attempts/9b-1/log"'
	wait_for 10 'grep -q err "$STATE/attempts/9b-1/log"'
	run cardbaton-worker log 9b-1
	[ "$status" -eq 0 ]
	[ "$output" = "$(printf 'one\nerr')" ]
	cardbaton-worker log 9b-1 -f > "$T/follow" 3>&- &
	fpid=$!
	wait_for 10 'grep -q err "$T/follow"'
	kill -0 "$fpid"
	go
	wait "$fpid"
	[ "$(cat "$T/follow")" = "$(printf 'one\nerr\ntwo')" ]
	run cardbaton-worker log -f 9b-1
	[ "$status" -eq 0 ]
	[ "$output" = "$(printf 'one\nerr\ntwo')" ]
	run cardbaton-worker log nope
	[ "$status" -eq 66 ]
	run cardbaton-worker log -f ../x
	[ "$status" -eq 66 ]
}
