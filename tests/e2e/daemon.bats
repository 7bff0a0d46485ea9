#!/usr/bin/env bats
# cardbaton-spoold on the local node: scheduling, recovery, bad input.
# Real daemon, real worker, real inotify; only nvidia-smi is simulated.

load ../lib/common

setup() {
	setup_common
	C=$T/config.yaml
}

teardown() {
	teardown_common
}

sub() { cardbaton-submit --config "$C" "$@"; }
st() { cardbaton-status --config "$C" "$@"; }

# state ID: the job's state, read from its record wherever it is.
state() { st --json "$1" | json 'd["jobs"][0]["state"]'; }

final() {
	case "$(state "$1")" in succeeded|failed|cancelled|lost) return 0 ;; esac
	return 1
}

@test "a job pinned to GPU 1 gets exactly GPU 1's UUID" {
	start_daemon
	id=$(sub --gpus 1 -- sh -c 'printf %s "$CUDA_VISIBLE_DEVICES" > "$0"' "$T/cvd")
	wait_for 10 final "$id"
	[ "$(state "$id")" = succeeded ]
	[ "$(cat "$T/cvd")" = GPU-11111111-1111-1111-1111-111111111111 ]
	st --json "$id" | json 'd["jobs"][0]["gpus"]' | grep -qx '\[1\]'
	[ "$(st --json "$id" | json 'd["jobs"][0]["gpu_uuids"][0]')" = GPU-11111111-1111-1111-1111-111111111111 ]
}

@test "a --gpu-count 2 job gets two idle cards, never a busy one" {
	# Card 0 over idle_mib, card 1 running a foreign compute process.
	fake_gpus \
		"0, GPU-00000000-0000-0000-0000-000000000000, NVIDIA Fake A100, 4000, 81920, 0" \
		"1, GPU-11111111-1111-1111-1111-111111111111, NVIDIA Fake A100, 0, 81920, 0" \
		"2, GPU-22222222-2222-2222-2222-222222222222, NVIDIA Fake A100, 0, 81920, 0" \
		"3, GPU-33333333-3333-3333-3333-333333333333, NVIDIA Fake A100, 10, 81920, 0"
	fake_apps "GPU-11111111-1111-1111-1111-111111111111, 4242, 500"
	start_daemon
	id=$(sub --gpu-count 2 -- sh -c 'printf %s "$CUDA_VISIBLE_DEVICES" > "$0"' "$T/cvd")
	wait_for 10 final "$id"
	[ "$(cat "$T/cvd")" = GPU-22222222-2222-2222-2222-222222222222,GPU-33333333-3333-3333-3333-333333333333 ]
	st --json "$id" | json 'd["jobs"][0]["gpus"]' | grep -qx '\[2, 3\]'
}

@test "a job waiting for a busy card starts when the card frees" {
	log_worker_calls
	fake_apps "GPU-11111111-1111-1111-1111-111111111111, 4242, 500"
	start_daemon
	id=$(sub --gpus 1 -- true)
	after_a_poll
	[ "$(state "$id")" = queued ]
	fake_apps
	wait_for 10 final "$id"
	[ "$(state "$id")" = succeeded ]
}

@test "the node's gpus list and idle_mib are respected" {
	printf 'spool: ./spool\nnodes:\n  local:\n    local: true\n    gpus: [2, 3]\n    idle_mib: 100\n' > "$C"
	fake_gpus \
		"0, GPU-00000000-0000-0000-0000-000000000000, NVIDIA Fake A100, 0, 81920, 0" \
		"1, GPU-11111111-1111-1111-1111-111111111111, NVIDIA Fake A100, 0, 81920, 0" \
		"2, GPU-22222222-2222-2222-2222-222222222222, NVIDIA Fake A100, 99, 81920, 0" \
		"3, GPU-33333333-3333-3333-3333-333333333333, NVIDIA Fake A100, 101, 81920, 0"
	start_daemon
	id=$(sub -- sh -c 'printf %s "$CUDA_VISIBLE_DEVICES" > "$0"' "$T/cvd")
	wait_for 10 final "$id"
	[ "$(cat "$T/cvd")" = GPU-22222222-2222-2222-2222-222222222222 ]
	# A job pinned to an excluded card is refused at submit.
	run sub --node local --gpus 0 -- true
	[ "$status" -eq 65 ]
}

@test "priority first, FIFO among equals: 10, 10, 5, 0 on one card" {
	fake_gpus "0, GPU-00000000-0000-0000-0000-000000000000, NVIDIA Fake A100, 0, 81920, 0"
	# Submitted while the daemon is down, so the order is the queue's.
	a=$(sub --priority 0 --name p0 -- sh -c 'echo p0 >> "$0"' "$T/order")
	b=$(sub --priority 10 --name p10a -- sh -c 'echo p10a >> "$0"' "$T/order")
	c=$(sub --priority 10 --name p10b -- sh -c 'echo p10b >> "$0"' "$T/order")
	d=$(sub --priority 5 --name p5 -- sh -c 'echo p5 >> "$0"' "$T/order")
	start_daemon
	for id in $a $b $c $d; do wait_for 20 final "$id"; done
	[ "$(tr '\n' ' ' < "$T/order")" = "p10a p10b p5 p0 " ]
}

@test "ls queued/ is dispatch order and cat shows JSON with state and reason" {
	fake_gpus "0, GPU-00000000-0000-0000-0000-000000000000, NVIDIA Fake A100, 0, 81920, 0"
	fake_apps "GPU-00000000-0000-0000-0000-000000000000, 4242, 500"
	a=$(sub --priority 0 -- true)
	b=$(sub --priority 7 -- true)
	c=$(sub --priority -3 -- true)
	d=$(sub --priority 7 -- true)
	cardbaton-spoold --config "$C" --once
	run env LC_ALL=C ls "$T/spool/queued"
	[ "${lines[0]}" = "$(printf '%09d-%010d.job' $((100000000 - 7)) "$b")" ]
	[ "${lines[1]}" = "$(printf '%09d-%010d.job' $((100000000 - 7)) "$d")" ]
	[ "${lines[2]}" = "$(printf '%09d-%010d.job' 100000000 "$a")" ]
	[ "${lines[3]}" = "$(printf '%09d-%010d.job' $((100000000 + 3)) "$c")" ]
	f=$T/spool/queued/${lines[0]}
	[ "$(json 'd["state"]' < "$f")" = queued ]
	[ -n "$(json 'd["reason"]' < "$f")" ]
	[ "$(json 'd["id"]' < "$f")" = "$b" ]
}

# The rules themselves (order, holds, reserve_after_seconds on a clock)
# are tests/unit/test_plan.c; these show that the daemon applies them.
@test "no head-of-line blocking: a 2-card job that waits does not stop a 1-card job behind it" {
	fake_gpus \
		"0, GPU-00000000-0000-0000-0000-000000000000, NVIDIA Fake A100, 0, 81920, 0" \
		"1, GPU-11111111-1111-1111-1111-111111111111, NVIDIA Fake A100, 0, 81920, 0"
	fake_apps "GPU-00000000-0000-0000-0000-000000000000, 4242, 500"
	big=$(sub --priority 10 --gpu-count 2 -- true)
	small=$(sub -- true)
	start_daemon
	wait_for 10 final "$small"
	[ "$(state "$small")" = succeeded ]
	[ "$(state "$big")" = queued ]
}

@test "a job that has waited reserve_after_seconds holds the cards: the job behind it waits, then runs after it" {
	printf 'spool: ./spool\nreserve_after_seconds: 0\nnodes:\n  local:\n    local: true\n' > "$C"
	fake_gpus \
		"0, GPU-00000000-0000-0000-0000-000000000000, NVIDIA Fake A100, 0, 81920, 0" \
		"1, GPU-11111111-1111-1111-1111-111111111111, NVIDIA Fake A100, 0, 81920, 0"
	fake_apps "GPU-00000000-0000-0000-0000-000000000000, 4242, 500"
	big=$(sub --priority 10 --gpu-count 2 -- sh -c 'echo big >> "$0"' "$T/order")
	small=$(sub -- sh -c 'echo small >> "$0"' "$T/order")
	# One pass: card 1 is free, but held for the big job.
	cardbaton-spoold --config "$C" --once
	[ "$(state "$small")" = queued ]
	[ "$(state "$big")" = queued ]
	fake_apps
	start_daemon
	wait_for 20 final "$small"
	[ "$(state "$big")" = succeeded ]
	[ "$(tr '\n' ' ' < "$T/order")" = "big small " ]
}

@test "jobs outlive the daemon, and a restarted daemon relaunches nothing" {
	start_daemon
	id=$(sub -- sh -c 'echo run >> "$0"; sleep 2' "$T/runs")
	wait_for 10 '[ "$(state "$id")" = running ]'
	kill -9 "$DAEMON_PID"; wait "$DAEMON_PID" 2>/dev/null || true; DAEMON_PID=
	wait_for 10 'grep -q run "$T/runs"'
	start_daemon
	wait_for 10 final "$id"
	[ "$(state "$id")" = succeeded ]
	[ "$(wc -l < "$T/runs")" -eq 1 ]
}

@test "kill -9 of the daemon again and again: every job runs exactly once" {
	printf 'spool: ./spool\nnodes:\n  local:\n    local: true\n' > "$C"
	ids=()
	for i in $(seq 1 24); do
		if [ $((i % 3)) -eq 0 ]; then g=0; else g=1; fi
		ids+=("$(sub --gpu-count $g -- sh -c 'echo "$1" >> "$0"; sleep 0.2' "$T/runs" "$i")")
	done
	for round in 1 2 3 4 5 6 7 8; do
		start_daemon
		sleep 0.$((RANDOM % 6 + 2))
		kill -9 "$DAEMON_PID"; wait "$DAEMON_PID" 2>/dev/null || true; DAEMON_PID=
	done
	start_daemon
	for id in "${ids[@]}"; do wait_for 30 final "$id"; done
	for id in "${ids[@]}"; do [ "$(state "$id")" = succeeded ]; done
	[ "$(wc -l < "$T/runs")" -eq 24 ]
	[ "$(sort -n "$T/runs" | uniq | wc -l)" -eq 24 ]
	# No job has an attempt that started twice: one started attempt each.
	for id in "${ids[@]}"; do
		n=$(st --json "$id" | json 'd["jobs"][0]["attempts"]')
		[ "$n" -eq 1 ]
	done
	# And each job has one record.
	[ "$(ls "$T/spool/done" | wc -l)" -eq 24 ]
	[ -z "$(ls -A "$T/spool/queued")$(ls -A "$T/spool/running")$(ls -A "$T/spool/incoming")" ]
}

@test "bad job files dropped into new/ are rejected with a reason; the daemon serves on" {
	start_daemon
	n=$T/spool/new
	printf 'command: [echo, "unterminated\n' > "$T/tmp.job"; mv "$T/tmp.job" "$n/malformed.job"
	printf 'command: [true]\nbogus: 1\n' > "$T/tmp.job"; mv "$T/tmp.job" "$n/unknown.job"
	printf 'command: [true]\ngpu_count: two\n' > "$T/tmp.job"; mv "$T/tmp.job" "$n/type.job"
	printf 'command: [true]\ngpu_count: -1\n' > "$T/tmp.job"; mv "$T/tmp.job" "$n/negative.job"
	: > "$T/tmp.job"; mv "$T/tmp.job" "$n/empty.job"
	head -c 4096 /dev/urandom > "$T/tmp.job"; mv "$T/tmp.job" "$n/binary.job"
	printf 'command: [true]\n' > "$T/target"; ln -s "$T/target" "$n/symlink.job"
	head -c $((10 * 1024 * 1024)) /dev/zero | tr '\0' 'x' > "$T/tmp.job"; mv "$T/tmp.job" "$n/huge.job"
	mkdir "$n/dir.job"
	mkfifo "$n/fifo.job"
	wait_for 10 '[ "$(ls "$T/spool/rejected" | grep -c reason)" -eq 10 ]'
	for f in "$T"/spool/rejected/*.reason; do
		grep -q '^original name: ' "$f"
		grep -q '^reason: ' "$f"
	done
	r() { grep -l "original name: $1" "$T"/spool/rejected/*.reason | head -1 | xargs cat; }
	r malformed.job | grep -q 'reason: malformed.job:[0-9]*:'
	r unknown.job | grep -q 'bogus'
	r type.job | grep -q 'gpu_count'
	r negative.job | grep -q 'gpu_count'
	r symlink.job | grep -q 'symbolic link'
	r huge.job | grep -q 'larger than 1 MiB'
	r dir.job | grep -q 'directory'
	r fifo.job | grep -q 'not a regular file'
	[ -z "$(ls "$n")" ]
	# Still serving.
	id=$(sub -- true)
	wait_for 10 final "$id"
	kill -0 "$DAEMON_PID"
}

@test "submit --job with bad content exits 65 with file:line; an unknown flag exits 64" {
	printf 'command: [true]\nbogus: 1\n' > "$T/bad.yaml"
	run sub --job "$T/bad.yaml"
	[ "$status" -eq 65 ]
	[[ "$output" == *"bad.yaml:2: bogus"* ]]
	printf 'command: [echo, "x\n' > "$T/bad2.yaml"
	run sub --job "$T/bad2.yaml"
	[ "$status" -eq 65 ]
	[[ "$output" == *"bad2.yaml:"[0-9]* ]]
	run sub --frobnicate -- true
	[ "$status" -eq 64 ]
	[ -z "$(ls "$T/spool/new" 2>/dev/null)" ]
}

@test "files with other names are accepted; dot files and other suffixes are ignored" {
	printf 'command: [true]\n' > "$T/a"; mv "$T/a" "$T/x"
	mkdir -p "$T/spool"
	start_daemon
	printf '{"command": ["true"], "priority": 3}\n' > "$T/a"; mv "$T/a" "$T/spool/new/from-a-script.job"
	printf 'command: [true]\n' > "$T/a"; mv "$T/a" "$T/spool/new/.hidden.job"
	printf 'command: [true]\n' > "$T/a"; mv "$T/a" "$T/spool/new/notes.txt"
	wait_for 10 '! ls "$T/spool/new" | grep -q from-a-script'
	wait_for 10 '[ "$(ls "$T/spool/done" | wc -l)" -eq 1 ]'
	[ -e "$T/spool/new/.hidden.job" ]
	[ -e "$T/spool/new/notes.txt" ]
}

@test "start-up sweeps tmp/: a dead writer's temporary and one older than 36 h go; a live writer's, and what no writer makes, stay" {
	mkdir -p "$T/spool/tmp"
	sleep 600 & live=$!
	: > "$T/spool/tmp/.999999999.dead"
	: > "$T/spool/tmp/.$live.live"
	: > "$T/spool/tmp/.$live.old"
	touch -d '-37 hours' "$T/spool/tmp/.$live.old"
	: > "$T/spool/tmp/.notapid.x"
	mkdir "$T/spool/tmp/adir"
	start_daemon
	# The sweep comes before the loop: a job done is a sweep over.
	id=$(sub --gpu-count 0 -- true)
	wait_for 10 final "$id"
	kill "$live"
	[ ! -e "$T/spool/tmp/.999999999.dead" ]
	[ ! -e "$T/spool/tmp/.$live.old" ]
	[ -e "$T/spool/tmp/.$live.live" ]
	[ -e "$T/spool/tmp/.notapid.x" ]
	[ -d "$T/spool/tmp/adir" ]
	grep -q 'tmp/adir: is a directory; ignored' "$T/daemon.log"
}

@test "spare files: a record's old copies are kept in tmp/ and their inodes reused by later records; a stop removes them, a crash leaves them to the next start" {
	start_daemon
	a=$(sub --gpu-count 0 -- true)
	wait_for 10 final "$a"
	wait_for 10 '[ -z "$(ls -A "$T/spool/running")" ]'   # its old copy moved
	# a's old copies went into tmp/ as spares of this daemon's ...
	[ "$(ls -A "$T/spool/tmp" | grep -c "^\.$DAEMON_PID\.")" -ge 1 ]
	before=$(find "$T/spool/tmp" -type f -printf '%i\n')
	# ... and the next job's records are written into them or into its
	# own submitted file, never into a new inode.
	printf 'command: [true]\ngpu_count: 0\n' > "$T/spool/tmp/b"
	sub_ino=$(stat -c %i "$T/spool/tmp/b")
	mv "$T/spool/tmp/b" "$T/spool/new/b.job"
	wait_for 10 '[ "$(ls "$T/spool/done" | wc -l)" -eq 2 ]'
	b=$(ls "$T/spool/done" | sort | tail -n 1)
	grep -qx "$(stat -c %i "$T/spool/done/$b")" <<< "$before
$sub_ino"
	stop_daemon
	[ -z "$(ls -A "$T/spool/tmp")" ]
	start_daemon
	c=$(sub --gpu-count 0 -- true)
	wait_for 10 final "$c"
	[ -n "$(ls -A "$T/spool/tmp")" ]
	dead=$DAEMON_PID
	kill -KILL "$DAEMON_PID"
	wait "$DAEMON_PID" 2>/dev/null || true
	start_daemon
	id=$(sub --gpu-count 0 -- true)
	wait_for 10 final "$id"
	[ -z "$(ls -A "$T/spool/tmp" | grep "^\.$dead\.")" ]
	[ "$(state "$a")" = succeeded ] && [ "$(state "$c")" = succeeded ] && [ "$(state "$id")" = succeeded ]
}

@test "one daemon per spool" {
	start_daemon
	run cardbaton-spoold --config "$C"
	[ "$status" -eq 75 ]
	[[ "$output" == *"another cardbaton-spoold"* ]]
}

@test "run --once accepts, dispatches and exits; results are recorded by the next pass" {
	id=$(sub -- sh -c 'echo ran > "$0"' "$T/ran")
	run cardbaton-spoold --config "$C" --once
	[ "$status" -eq 0 ]
	wait_for 5 test -s "$T/ran"
	# Its attempt has ended on the node (the job ran, then exited).
	wait_for 10 'grep -q "^state succeeded" "$STATE"/attempts/*.state'
	cardbaton-spoold --config "$C" --once
	[ "$(state "$id")" = succeeded ]
}

@test "accepting a dropped file looks for no record of the ID it was just given (LAYOUT.md §5)" {
	command -v strace >/dev/null || { echo "strace missing: tests/install-deps installs it" >&2; false; }
	sub --gpu-count 0 -- true >/dev/null   # the spool made
	rm "$T/spool/new/"*.job
	for i in $(seq 1 10); do
		printf 'command: [true]\ngpu_count: 0\n' > "$T/a"; mv "$T/a" "$T/spool/new/j$i.job"
	done
	# LeakSanitizer cannot run under ptrace: off for it.
	ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 strace -f -qq -y \
		-e trace=faccessat,faccessat2 -o "$T/strace.out" cardbaton-spoold --config "$C" --once
	[ "$(ls "$T/spool/queued" "$T/spool/running" "$T/spool/done" | grep -c '\.job$')" -eq 10 ]
	# Fresh IDs from seq have no record anywhere: the look after a crash
	# (a record written, its incoming/ file not yet removed) is for
	# incoming/'s files at start-up only.  It made 3 lookups a file.
	[ "$(grep -cE 'faccessat2?\([0-9]+<[^>]*/spool/(running|paused|done)>' "$T/strace.out")" -eq 0 ]
}

@test "cancel: a queued job is removed, a running one loses its whole process group" {
	fake_gpus "0, GPU-00000000-0000-0000-0000-000000000000, NVIDIA Fake A100, 0, 81920, 0"
	start_daemon
	run_id=$(sub -- sh -c 'sleep 300 & echo $! > "$0"; wait' "$T/child")
	q_id=$(sub -- true)
	wait_for 10 test -s "$T/child"
	[ "$(state "$q_id")" = queued ]
	cardbaton-cancel --config "$C" "$q_id"
	wait_for 10 '[ "$(state "$q_id")" = cancelled ]'
	child=$(cat "$T/child")
	cardbaton-cancel --config "$C" "$run_id"
	wait_for 15 '[ "$(state "$run_id")" = cancelled ]'
	not kill -0 "$child" 2>/dev/null
	[ "$(st --json "$run_id" | json 'd["jobs"][0]["reason"]')" = "cancelled by user" ]
}

@test "a failing job is recorded with its exit code" {
	start_daemon
	id=$(sub -- sh -c 'echo oops >&2; exit 3')
	wait_for 10 final "$id"
	[ "$(state "$id")" = failed ]
	[ "$(st --json "$id" | json 'd["jobs"][0]["exit_code"]')" = 3 ]
	cardbaton-logs --config "$C" "$id" | grep -qx oops
}

@test "an inotify queue overflow is recovered by a rescan" {
	[ -w /proc/sys/fs/inotify/max_queued_events ] || skip "needs root to shrink the inotify queue"
	old=$(cat /proc/sys/fs/inotify/max_queued_events)
	# A run killed (or racing this test) between the two echos left 8.
	[ "$old" -ge 1024 ] || old=16384
	echo 8 > /proc/sys/fs/inotify/max_queued_events
	start_daemon || { echo "$old" > /proc/sys/fs/inotify/max_queued_events; false; }
	echo "$old" > /proc/sys/fs/inotify/max_queued_events
	kill -STOP "$DAEMON_PID"
	for i in $(seq 1 40); do
		printf 'command: [true]\ngpu_count: 0\n' > "$T/a"; mv "$T/a" "$T/spool/new/j$i.job"
	done
	kill -CONT "$DAEMON_PID"
	wait_for 20 '[ "$(ls "$T/spool/done" | wc -l)" -eq 40 ]'
	grep -q overflow "$T/daemon.log"
}

@test "a job file named with a future job ID keeps it, and later IDs do not collide" {
	start_daemon
	printf 'command: [true]\ngpu_count: 0\n' > "$T/a"
	mv "$T/a" "$T/spool/new/$(printf '%09d-%010d.job' 100000000 500)"
	wait_for 10 '[ "$(state 500)" = succeeded ]'
	id=$(sub --gpu-count 0 -- true)
	[ "$id" -gt 500 ]
	wait_for 10 final "$id"
	# A second file with the same number is a copy: it gets a fresh ID.
	printf 'command: [true]\ngpu_count: 0\n' > "$T/a"
	mv "$T/a" "$T/spool/new/$(printf '%09d-%010d.job' 100000000 500)"
	wait_for 10 '[ "$(ls "$T/spool/done" | wc -l)" -eq 3 ]'
	[ "$(state 500)" = succeeded ]
}

# Every worker call, logged as "TIME COMMAND" (the command after -d DIR);
# launches through the event stream run inside `watch` and log nothing.
log_worker_calls() {
	cat > "$T/worker" <<-EOF
	#!/bin/sh
	echo "\$(date +%s%N) \$3" >> "$T/calls"
	exec "$CB_BUILD/cardbaton-worker" "\$@"
	EOF
	chmod +x "$T/worker"
	export CARDBATON_WORKER=$T/worker
}

# While a GPU job waits the cards are re-read every 2 s: return right
# after one such query has ended, with the log cleared.
after_a_poll() {
	: > "$T/calls"
	wait_for 10 'grep -q " gpus$" "$T/calls"'
	wait_for 10 '! pgrep -f "$T/worker -d [^ ]* gpus" >/dev/null'
	: > "$T/calls"
}

# The next reconcile (every 5 s) from now on, with the log cleared
# before it: more than GPU_POLL_MS (2 s) of calls in the log.
a_reconcile_long() {
	: > "$T/calls"
	wait_for 10 'grep -q " status" "$T/calls"'
	: > "$T/calls"
	wait_for 10 'grep -q " status" "$T/calls"'
}

@test "a card freed by a job's end goes to the next job without asking the node again; a card still busy sends it back" {
	log_worker_calls
	fake_gpus "0, GPU-00000000-0000-0000-0000-000000000000, NVIDIA Fake A100, 0, 81920, 0"
	start_daemon
	a=$(sub --gpus 0 -- sh -c 'until [ -e "$0" ]; do sleep 0.02; done' "$T/go")
	b=$(sub --gpus 0 -- sh -c 'date +%s%N > "$0"' "$T/b.start")
	wait_for 10 '[ "$(state "$a")" = running ]'
	# B waits, but the only card is leased by A: its end is the news,
	# and the node is not asked for its cards meanwhile.
	a_reconcile_long
	not grep -q " gpus$" "$T/calls"
	touch "$T/go"
	wait_for 10 final "$b"
	[ "$(state "$b")" = succeeded ]
	# No query between A's end and B's start.
	[ -z "$(awk -v s="$(cat "$T/b.start")" '$2 == "gpus" && $1 < s' "$T/calls")" ]

	# The guess is checked: a card that stays busy after its job's end
	# (a process outside the queue took it) sends the next job back:
	# placed after C's end, the launch says so; staged behind C (the
	# baton), the node, once it has tried for 3 s.
	c=$(sub --gpus 0 -- sh -c 'until [ -e "$0" ]; do sleep 0.02; done' "$T/go2")
	d=$(sub --gpus 0 -- true)
	wait_for 10 '[ "$(state "$c")" = running ]'
	fake_apps "GPU-00000000-0000-0000-0000-000000000000, 4242, 500"
	touch "$T/go2"
	wait_for 10 final "$c"
	wait_for 10 'st --json "$d" | grep -q "waiting: \(cards busy when its turn came: \)\?GPU 0 .*compute process"'
	[ "$(state "$d")" = queued ]
	grep -Eq "job $d: (not started on local|queued: waiting: cards busy when its turn came)" "$T/daemon.log"
	fake_apps
	wait_for 10 final "$d"
	[ "$(state "$d")" = succeeded ]
}

@test "a job's end hands its card over while a card query is still in flight" {
	# The cards query answers what it saw 2 s late.
	cat > "$T/worker" <<-EOF
	#!/bin/sh
	[ "\$3" = gpus ] || exec "$CB_BUILD/cardbaton-worker" "\$@"
	echo "\$(date +%s%N) start" >> "$T/calls"
	out=\$("$CB_BUILD/cardbaton-worker" "\$@"); rc=\$?
	sleep 2
	echo "\$(date +%s%N) end" >> "$T/calls"
	printf '%s\n' "\$out"
	exit \$rc
	EOF
	chmod +x "$T/worker"
	export CARDBATON_WORKER=$T/worker
	# Card 1 is free but not for B (pinned to 0): while B waits the
	# cards are asked for again.
	fake_gpus "0, GPU-00000000-0000-0000-0000-000000000000, NVIDIA Fake A100, 0, 81920, 0" \
		"1, GPU-11111111-1111-1111-1111-111111111111, NVIDIA Fake A100, 0, 81920, 0"
	start_daemon
	a=$(sub --gpus 0 -- sh -c 'until [ -e "$0" ]; do sleep 0.02; done' "$T/go")
	b=$(sub --gpus 0 -- sh -c 'date +%s%N > "$0"' "$T/b.start")
	wait_for 10 '[ "$(state "$a")" = running ]'
	# End A while a query is out.
	wait_for 10 '[ "$(tail -n 1 "$T/calls" 2>/dev/null | cut -d" " -f2)" = start ]'
	n=$(wc -l < "$T/calls")
	touch "$T/go"
	wait_for 10 final "$b"
	[ "$(state "$b")" = succeeded ]
	# B started before that query answered.
	answered() { tail -n +$((n + 1)) "$T/calls" | grep -m1 ' end$' | cut -d' ' -f1; }
	wait_for 10 '[ -n "$(answered)" ]'
	[ "$(cat "$T/b.start")" -lt "$(answered)" ]
	not grep -q "not started" "$T/daemon.log"
}

@test "a launch goes through the node's event stream (no worker run per launch); without the stream the worker is run" {
	log_worker_calls
	start_daemon
	wait_for 10 'grep -q " watch$" "$T/calls"'
	id=$(sub -- true)
	wait_for 10 final "$id"
	[ "$(state "$id")" = succeeded ]
	not grep -q " launch$" "$T/calls"
	# A stream that cannot take requests (a worker of before): run it.
	cat > "$T/worker" <<-EOF
	#!/bin/sh
	echo "\$(date +%s%N) \$3" >> "$T/calls"
	if [ "\$3" = watch ]; then
		"$CB_BUILD/cardbaton-worker" "\$@" | grep --line-buffered -v '^requests '
		exit
	fi
	exec "$CB_BUILD/cardbaton-worker" "\$@"
	EOF
	pkill -P "$DAEMON_PID" -f " watch$"
	wait_for 10 '[ "$(grep -c " watch$" "$T/calls")" -ge 2 ]'
	id=$(sub -- true)
	wait_for 10 final "$id"
	[ "$(state "$id")" = succeeded ]
	grep -q " launch$" "$T/calls"
}

@test "a launched job's cards are seen as taken: the next job waits, no launch is refused" {
	fake_gpus "0, GPU-00000000-0000-0000-0000-000000000000, NVIDIA Fake A100, 0, 81920, 0"
	start_daemon
	a=$(sub --gpus 0 -- sleep 600)
	wait_for 10 '[ "$(state "$a")" = running ]'
	b=$(sub --gpus 0 -- true)
	wait_for 10 '[ "$(state "$b")" = queued ]'
	# Past a re-read of the cards (every 2 s while B waits).
	settle 2.5
	[ "$(state "$b")" = queued ]
	not grep -q "not started" "$T/daemon.log"
	cardbaton-cancel --config "$C" "$a"
	wait_for 10 final "$b"
	[ "$(state "$b")" = succeeded ]
}

@test "a cancel the node cannot hear is kept in ctl/ and sent again, across a restart, until the job stops" {
	# A worker that refuses every cancel while $T/deaf exists.
	cat > "$T/worker" <<-EOF
	#!/bin/sh
	if [ "\$3" = cancel ] && [ -e "$T/deaf" ]; then echo refused >> "$T/refused"; exit 255; fi
	exec "$CB_BUILD/cardbaton-worker" "\$@"
	EOF
	chmod +x "$T/worker"
	export CARDBATON_WORKER=$T/worker
	start_daemon
	id=$(sub -- sleep 600)
	wait_for 10 '[ "$(state "$id")" = running ]'
	touch "$T/deaf"
	run cardbaton-cancel --config "$C" "$id"
	[ "$status" -eq 69 ]
	# The tool's try and the daemon's, then the daemon's again.
	wait_for 20 '[ "$(wc -l < "$T/refused")" -ge 3 ]'
	[ "$(state "$id")" = running ]
	ls "$T/spool/ctl" | grep -q "^$id\.cancel\."
	kill -KILL "$DAEMON_PID"
	wait "$DAEMON_PID" 2>/dev/null || true
	start_daemon
	rm "$T/deaf"
	wait_for 20 '[ "$(state "$id")" = cancelled ]'
	wait_for 10 '[ -z "$(ls "$T/spool/ctl")" ]'
}

@test "a cancel that arrives in the same inotify read as its submission finds the job" {
	start_daemon
	kill -STOP "$DAEMON_PID"
	id=$(sub -- sleep 30)
	cardbaton-cancel --config "$C" "$id"
	kill -CONT "$DAEMON_PID"
	wait_for 10 final "$id"
	[ "$(state "$id")" = cancelled ]
}

# A node whose ssh never connects (a host that drops packets): its
# ProxyCommand sleeps.  Its probe and query fail only at ssh's 10 s
# ConnectTimeout (link/node.c), which nobody else may wait for.
dead_node() {
	printf 'Host dead\n  ProxyCommand sleep 3598.%s\n' "$$" > "$T/ssh_config"
	printf '  dead:\n    ssh: dead\nssh_command: [ssh, -F, %s]\n' "$T/ssh_config" >> "$C"
}

@test "a node that never answers holds up no other: local jobs run before it is even declared unreachable" {
	dead_node
	start_daemon
	for i in 1 2; do
		id=$(sub --gpu-count 1 -- true)
		wait_for 10 final "$id"
		[ "$(state "$id")" = succeeded ]
	done
	# Both went through one card, one after another, while the dead
	# node's first contact was still waiting for its deadline.  (Two:
	# five took over those 10 s once on CI's loaded two cores.)
	not grep -q "node dead unreachable" "$T/daemon.log"
	wait_for 40 'grep -q "node dead unreachable" "$T/daemon.log"'
	id=$(sub --gpu-count 1 -- true)
	wait_for 10 final "$id"
	[ "$(state "$id")" = succeeded ]
	pkill -f "sleep 3598.$$" || true
}

@test "a node whose state directory is broken gets its event stream restarted with back-off" {
	mkdir -p "$STATE"
	: > "$STATE/attempts"       # a file where its directory belongs
	start_daemon
	# 1 s, 2 s, 4 s: a second each time would stay at "in 1 s".
	wait_for 20 'grep -q "node local: .*restarting the event stream in 4 s" "$T/daemon.log"'
	grep -q "node local: .*restarting the event stream in 2 s" "$T/daemon.log"
	[ "$(grep -c "restarting the event stream in 1 s" "$T/daemon.log")" -eq 1 ]
	# Repaired, the stream comes up and jobs run.
	rm "$STATE/attempts"
	id=$(sub --gpu-count 1 -- true)
	wait_for 20 final "$id"
	[ "$(state "$id")" = succeeded ]
}

@test "SIGTERM in the daemon's first instant is a clean stop (exit 0), not a death by signal" {
	# A sanitizer runtime starts before main() (and a signal then is
	# its, not ours): the plain build's pass checks this.
	if ldd "$CB_BUILD/cardbaton-spoold" 2>/dev/null | grep -q libasan; then
		skip "ASan's runtime runs before main()"
	fi
	for i in 1 2 3 4 5 6 7 8 9 10; do
		rm -rf "$T/spool"
		cardbaton-spoold --config "$C" 2>>"$T/early.log" &
		pid=$!
		# As soon as main() has blocked it (its first statement; before
		# that the process is the loader's, and the default action is
		# all there is): before it has read its config or opened the
		# spool.  SIGTERM is signal 15: bit 0x4000 of SigBlk.
		# (A daemon that never blocks it gets the signal after 10 s,
		# and dies of it.)
		end=$((SECONDS + 10))
		# The exe is the daemon first: the shell's child, before its
		# exec, may block SIGTERM too (a kill then was a death by it,
		# exit 143, once in CI).
		until [[ $(readlink "/proc/$pid/exe" 2>/dev/null) == */cardbaton-spoold ]] &&
			sigblk=$(sed -n 's/^SigBlk:\t//p' "/proc/$pid/status" 2>/dev/null) &&
			[ -n "$sigblk" ] && (( 0x$sigblk & 0x4000 )); do
			[ "$SECONDS" -lt "$end" ] && kill -0 "$pid" 2>/dev/null || break
		done
		kill -TERM "$pid"
		rc=0
		wait "$pid" || rc=$?
		[ "$rc" -eq 0 ] || { echo "try $i: exit $rc"; false; }
	done
}
