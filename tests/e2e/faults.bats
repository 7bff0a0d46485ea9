#!/usr/bin/env bats
# faults.bats - a short seeded fault run on real SSH test hosts
# (tests/soak/soak; `make soak` is the long one): 60 jobs while the
# daemon is killed and restarted, connections are cut (ss -K), hosts are
# partitioned and healed, nvidia-smi fails or hangs, workers and whole
# attempts are killed and jobs are cancelled, all chosen by a seeded RNG;
# then tests/soak/check.py checks the invariants (no job vanished or run
# twice, every job terminal or legitimately waiting, every lost job truly
# lost, no card booked twice, nodes and spool agree).
#
# The seed is printed; CB_FAULT_SEED=N repeats a run (the same jobs and
# the same fault decisions; the timing of a shared machine still varies).
# Also here: the run's own instruments (the jobs' card locks, the
# checker) shown to catch what they are for, and what fault runs found,
# each made deterministic.

load ../lib/common
load ../lib/sshhosts

setup() {
	T=$BATS_TEST_TMPDIR
}

need_hosts() {
	hosts_available || skip "needs root, ip netns and sshd"
}

# Found by the fault run (its first submit races the daemon's start):
# two creators of a new spool, one's id.new renamed over the other's.
@test "tools creating a new spool at once: every one of them succeeds" {
	for r in $(seq 1 10); do
		printf 'spool: ./sp%s\nnodes:\n  local:\n    local: true\n' "$r" > "$T/c$r.yaml"
		for k in 1 2 3 4 5 6; do
			"$CB_BUILD/cardbaton-submit" --config "$T/c$r.yaml" -- true >/dev/null 2>>"$T/err" &
		done
		wait
	done
	[ ! -s "$T/err" ] || { cat "$T/err"; false; }
	[ "$(cat "$T"/sp*/id | sort -u | wc -l)" -eq 10 ]
	[ "$(ls "$T"/sp*/new | grep -c '\.job$')" -eq 60 ]
}

@test "the job's card locks see a card booked twice (the soak's live check)" {
	mkdir -p "$T/effects" "$T/cards"
	CARDBATON_ATTEMPT_ID=0000abcd-7-0 CUDA_VISIBLE_DEVICES=GPU-a,GPU-b \
		bash "$CB_TOP/tests/soak/job.sh" "$T" 2 0 3>&- &
	job=$!
	# Its sleep runs once its card locks are held.  (Probing them with
	# flock(1) instead could take one at the moment the job tries.)
	wait_for 10 "pgrep -P $job -x sleep"
	if flock -n "$T/cards/GPU-b" true; then false; fi
	run env CARDBATON_ATTEMPT_ID=0000abcd-8-0 CUDA_VISIBLE_DEVICES=GPU-c \
		bash "$CB_TOP/tests/soak/job.sh" "$T" 0 3
	[ "$status" -eq 3 ]
	[ ! -e "$T/violations" ]
	run env CARDBATON_ATTEMPT_ID=0000abcd-9-0 CUDA_VISIBLE_DEVICES=GPU-b \
		bash "$CB_TOP/tests/soak/job.sh" "$T" 0 0
	[ "$status" -eq 0 ]
	grep -q '^DOUBLE GPU-b 0000abcd-9-0 ' "$T/violations"
	wait
	[ "$(grep -c '^start ' "$T/effects/7")" -eq 1 ]
	[ "$(grep -c '^end 0000abcd-8-0 ' "$T/effects/8")" -eq 1 ]
}

@test "the sharing jobs' card locks see a third sharer of two, and an exclusive job beside a sharer" {
	mkdir -p "$T/effects" "$T/cards"
	for a in 1 2; do
		CARDBATON_ATTEMPT_ID=0000abcd-$a-0 CUDA_VISIBLE_DEVICES=GPU-a \
			bash "$CB_TOP/tests/soak/job.sh" "$T" 3 0 share 2 3>&- &
	done
	wait_for 10 '[ "$(grep -c "^start " "$T"/effects/* | awk -F: "{s += \$2} END {print s}")" = 2 ]'
	wait_for 10 '[ "$(pgrep -f "sleep 3" | wc -l)" -ge 2 ]'
	[ ! -e "$T/violations" ]
	run env CARDBATON_ATTEMPT_ID=0000abcd-3-0 CUDA_VISIBLE_DEVICES=GPU-a \
		bash "$CB_TOP/tests/soak/job.sh" "$T" 0 0 share 2
	[ "$status" -eq 0 ]
	grep -q '^OVERSHARE GPU-a 0000abcd-3-0 ' "$T/violations"
	not grep -q '^DOUBLE' "$T/violations"
	run env CARDBATON_ATTEMPT_ID=0000abcd-4-0 CUDA_VISIBLE_DEVICES=GPU-a \
		bash "$CB_TOP/tests/soak/job.sh" "$T" 0 0
	grep -q '^DOUBLE GPU-a 0000abcd-4-0 ' "$T/violations"
	wait
}

@test "the limited user's card slots see her past max_gpus (the lab soak's live check)" {
	mkdir -p "$T/effects" "$T/cards" "$T/users"
	SOAK_USER=ann SOAK_MAX_GPUS=2 CARDBATON_ATTEMPT_ID=0000abcd-1-0 CUDA_VISIBLE_DEVICES=GPU-a,GPU-b \
		bash "$CB_TOP/tests/soak/job.sh" "$T" 3 0 3>&- &
	wait_for 10 '[ -e "$T/effects/1" ] && pgrep -f "sleep 3" >/dev/null'
	[ ! -e "$T/violations" ]
	# Another user's job, or one without the limit: nothing to see.
	run env SOAK_USER=ben SOAK_MAX_GPUS=2 CARDBATON_ATTEMPT_ID=0000abcd-2-0 CUDA_VISIBLE_DEVICES=GPU-c \
		bash "$CB_TOP/tests/soak/job.sh" "$T" 0 0
	[ ! -e "$T/violations" ]
	run env SOAK_USER=ann SOAK_MAX_GPUS=2 CARDBATON_ATTEMPT_ID=0000abcd-3-0 CUDA_VISIBLE_DEVICES=GPU-d \
		bash "$CB_TOP/tests/soak/job.sh" "$T" 0 0
	[ "$status" -eq 0 ]
	grep -q '^OVERLIMIT ann 0000abcd-3-0 ' "$T/violations"
	[ "$(wc -l < "$T/violations")" -eq 1 ]
	wait
}

@test "the checker reports a job run twice, a false loss and a double booking" {
	d=$T/run
	mkdir -p "$d/effects" "$d/faults" "$d/spool/done"
	echo "1 ok --gpu-count 1" > "$d/plan"
	echo "2 ok --gpu-count 1" >> "$d/plan"
	printf 'seed 1\nseconds 5\njobs 2\nhosts 1\n' > "$d/meta"
	: > "$d/faults/killed"
	# Job 1 succeeded but started twice; job 2 lost although nobody
	# killed its worker; a card held by two jobs.
	for j in 1 2; do
		st=succeeded; [ $j = 2 ] && st=lost
		cat > "$d/spool/done/000000000$j.job" <<-EOF
			{"id": "$j", "rev": 3, "state": "$st", "reason": null,
			 "attempts": [{"n": 0, "id": "0000abcd-$j-0", "node": "host1", "gpus": [0],
			   "gpu_uuids": ["GPU-x"], "state": "$st", "exit_code": 0,
			   "finished_ms": 2000}]}
		EOF
	done
	printf 'start 0000abcd-1-0 host1 GPU-x 1 1000\nend 0000abcd-1-0 1500\nstart 0000abcd-1-0 host1 GPU-x 2 1600\n' > "$d/effects/1"
	echo "DOUBLE GPU-x 0000abcd-1-0 1600" > "$d/violations"
	run python3 "$CB_TOP/tests/soak/check.py" --dir "$d" --build "$CB_BUILD" --config /nonexistent
	[ "$status" -eq 1 ]
	[[ "$output" == *"job 1 "*"RUN TWICE"* ]]
	[[ "$output" == *"job 2 "*"not truly lost"*"nobody killed its worker"* ]]
	[[ "$output" == *"card double-booked: DOUBLE GPU-x"* ]]
	[[ "$output" == *'"run_twice": 1'* ]]
	[[ "$output" == *'"double_booked": 1'* ]]
}

@test "a seeded fault run: every job once, terminal or legitimately waiting; lost only when truly lost; no card booked twice" {
	need_hosts
	seed=${CB_FAULT_SEED:-4242}
	echo "# fault run: seed $seed (CB_FAULT_SEED=$seed repeats it)" >&3
	run "$CB_TOP/tests/soak/soak" --build "$CB_BUILD" --seed "$seed" --seconds 45 --jobs 60 --drain 90 3>&-
	echo "$output"
	echo "$output" | grep -E '^soak: (jobs|faults|lost|seed)' | sed 's/^/# /' >&3
	[ "$status" -eq 0 ]
	[[ "$output" == *"SOAK_RESULT "*'"violations": 0'* ]]
	# Three users of a lab's spool, one of them limited, where accounts
	# can be made (root: as CI is).
	if [ "$(id -u)" = 0 ]; then
		[[ "$output" == *'"limits_passed": 0'* && "$output" == *'"users": 3'* ]]
	fi
}

# The fault run's first finding, made deterministic: a daemon that
# restarts while a launch is still at the cards (its nvidia-smi hanging)
# hears "starting" for an attempt that has no state file yet.  That is
# not a start: the launcher then gives up ("nvidia-smi did not answer"),
# removes the attempt, and the job must be launched again, not declared
# lost ("the node has no record of this attempt").
@test "a daemon restarted while a launch hangs at the cards: the job is launched again, not lost" {
	need_hosts
	setup_common
	unset HOSTS_UID HOSTS_DIR
	hosts_up 1
	C=$T/config.yaml
	printf 'spool: ./spool\nssh_command: [ssh, -F, %s]\nnodes:\n  host1:\n    ssh: host1\n' "$SSH_CONFIG" > "$C"
	# nvidia-smi on host1: the launch's look at the cards, the first call
	# made by a process that holds a card's lease open (leases/UUID),
	# hangs past the worker's 10 s; every other call answers.  Not "the
	# Nth call": the daemon's and the watch's queries run two at a time
	# and their number is nobody's promise.
	fake=$(readlink -f "$(host_bin_dir 1)/nvidia-smi")
	rm "$(host_bin_dir 1)/nvidia-smi"
	cat > "$(host_bin_dir 1)/nvidia-smi" <<-SH
		#!/bin/sh
		if ls -l /proc/\$PPID/fd 2>/dev/null | grep -q '/leases/' && mkdir "$T/hung" 2>/dev/null; then
			sleep 12
		fi
		exec "$fake" "\$@"
	SH
	chmod 755 "$(host_bin_dir 1)/nvidia-smi"
	id=$(cardbaton-submit --config "$C" --gpu-count 1 -- sh -c 'echo run >> "$0"' "$T/runs")
	ip netns exec "$CLIENT_NS" cardbaton-spoold --config "$C" >>"$T/daemon.log" 2>&1 3>&- &
	DAEMON_PID=$!
	atts=$(host_home 1)/.local/state/sshgpu-queue/attempts
	wait_for 60 '[ -d "$T/hung" ]' || { ls -la "$atts"; cat "$T/daemon.log"; false; }
	# The launch is at the cards: the daemon dies and comes back.
	kill -9 "$DAEMON_PID"; wait "$DAEMON_PID" 2>/dev/null || true
	ip netns exec "$CLIENT_NS" cardbaton-spoold --config "$C" >>"$T/daemon.log" 2>&1 3>&- &
	DAEMON_PID=$!
	wait_for 90 '[ "$(job_state "$id")" = succeeded ] || [ "$(job_state "$id")" = lost ]'
	cat "$T/daemon.log"
	[ "$(job_state "$id")" = succeeded ]
	[ "$(wc -l < "$T/runs")" -eq 1 ]
}

teardown() {
	[ -n "${DAEMON_PID:-}" ] && { kill -9 "$DAEMON_PID" 2>/dev/null; wait "$DAEMON_PID" 2>/dev/null; }
	[ -n "${HOSTS_UID:-}" ] && hosts_down
	return 0
}
