#!/usr/bin/env bats
# A lab's limits, fair share and a queue no member can freeze, end to
# end (SPEC §12), with real
# accounts (tests/lib/lab.bash): max_gpus keeps a user's next job
# waiting with its reason while another's takes the free card; equal
# priorities go to the user who has used the least, the same across a
# kill -9 of the daemon, since usage is read from the records.  The
# rules themselves are tests/unit/test_plan.c and test_lab.c on a fake
# clock.

load ../lib/common
load ../lib/lab

test_timeout 120

setup_file() { lab_accounts cbf; }
teardown_file() { lab_accounts_down cbf; }
setup() {
	setup_common
	lab_setup
}
teardown() {
	lab_teardown
	teardown_common
}

# Two cards.
two_cards() {
	printf '%s\n' \
		"0, GPU-00000000-0000-0000-0000-000000000000, NVIDIA Fake A100, 0, 81920, 0" \
		"1, GPU-11111111-1111-1111-1111-111111111111, NVIDIA Fake A100, 0, 81920, 0" \
		> "$L/gpus/gpus.csv"
}

# $L/hold TAG: a job that says when it started ($L/started-TAG) and
# runs until $L/go-TAG exists.
hold_script() {
	printf '#!/bin/sh\ndate +%%s%%N > "%s/started-$1"\nwhile [ ! -e "%s/go-$1" ]; do sleep 0.05; done\n' \
		"$L" "$L" > "$L/hold"
	chmod 0755 "$L/hold"
}

@test "max_gpus: 1: alice's second job waits with the reason and holds nothing, while bob's takes the free card" {
	two_cards
	hold_script
	lab_config "  users:" "    $UA: {max_gpus: 1}"
	lab_spool
	a1=$(lsub "$UA" --gpu-count 1 -- "$L/hold" a1)
	a2=$(lsub "$UA" --gpu-count 1 -- true)
	b1=$(lsub "$UB" --gpu-count 1 -- "$L/hold" b1)
	lab_daemon
	wait_for 20 '[ "$(lab_field "$a1" state)" = running ] && [ "$(lab_field "$b1" state)" = running ]'
	wait_for 10 '[ "$(lab_field "$a2" reason)" = "waiting: user limit: $UA holds 1 GPU (max_gpus 1)" ]'
	[ "$(lab_field "$a2" state)" = queued ]
	# Once alice's first ends, her second runs.
	touch "$L/go-a1"
	wait_for 20 '[ "$(lab_field "$a2" state)" = succeeded ]'
	touch "$L/go-b1"
	wait_for 20 '[ "$(lab_field "$b1" state)" = succeeded ]'
	grep -q "user limit" "$T/daemon.log"
}

# A done record of USER's that used CARDS cards for HOURS hours, ending
# now (written as the daemon would, with the daemon stopped): a job of
# USER's run to its end, its attempt's times moved back.
used() {
	local u=$1 cards=$2 hours=$3 id rec
	id=$(lsub "$u" --gpu-count "$cards" -- true)
	lab_daemon
	wait_for 20 '[ "$(lab_field "$id" state)" = succeeded ]'
	stop_daemon
	rec=$(lab_rec "$id")
	python3 - "$rec" "$hours" <<'EOF'
import json, sys, time
p, h = sys.argv[1], float(sys.argv[2])
r = json.load(open(p))
now = int(time.time() * 1000)
a = r["attempts"][-1]
a["started_ms"] = now - int(h * 3600 * 1000)
a["finished_ms"] = now
open(p + ".new", "w").write(json.dumps(r, indent=2) + "\n")
EOF
	chmod 0640 "$rec.new"
	chgrp "$LAB_GROUP" "$rec.new"
	mv "$rec.new" "$rec"
}

@test "fair share: alice used 10 GPU-hours, bob none; of their equal-priority jobs (alice's queued first) bob's start first, and the same after kill -9" {
	# One card: one job at a time, so the order is the start order.
	printf '%s\n' "0, GPU-00000000-0000-0000-0000-000000000000, NVIDIA Fake A100, 0, 81920, 0" \
		> "$L/gpus/gpus.csv"
	hold_script
	lab_spool
	used "$UA" 1 10
	a1=$(lsub "$UA" --gpu-count 1 -- "$L/hold" a1)
	a2=$(lsub "$UA" --gpu-count 1 -- "$L/hold" a2)
	b1=$(lsub "$UB" --gpu-count 1 -- "$L/hold" b1)
	b2=$(lsub "$UB" --gpu-count 1 -- "$L/hold" b2)
	[ "$a1" -lt "$b1" ]
	lab_daemon
	wait_for 20 '[ "$(lab_field "$b1" state)" = running ]'
	settle 0.5
	[ "$(lab_field "$a1" state)" = queued ]
	# The daemon dies; its successor reads the usage from the records.
	kill -9 "$DAEMON_PID"
	wait "$DAEMON_PID" 2>/dev/null || true
	lab_daemon
	touch "$L/go-b1"
	wait_for 20 '[ "$(lab_field "$b2" state)" = running ]'
	[ "$(lab_field "$a1" state)" = queued ]
	touch "$L/go-b2"
	wait_for 20 '[ "$(lab_field "$a1" state)" = running ]'
	touch "$L/go-a1" "$L/go-a2"
	wait_for 20 '[ "$(lab_field "$a2" state)" = succeeded ]'
	# The start order: bob's two, then alice's in her own order.
	[ "$(cat "$L/started-b1")" -lt "$(cat "$L/started-b2")" ]
	[ "$(cat "$L/started-b2")" -lt "$(cat "$L/started-a1")" ]
	[ "$(cat "$L/started-a1")" -lt "$(cat "$L/started-a2")" ]
}

@test "fair share: shares: 2 halves alice's usage -- 10 GPU-hours at 2 shares beside carol's 6 at 1: alice's job first" {
	printf '%s\n' "0, GPU-00000000-0000-0000-0000-000000000000, NVIDIA Fake A100, 0, 81920, 0" \
		> "$L/gpus/gpus.csv"
	hold_script
	lab_config "  users:" "    $UA: {shares: 2}"
	lab_spool
	used "$UA" 1 10
	used "$UC" 1 6
	c1=$(lsub "$UC" --gpu-count 1 -- "$L/hold" c1)
	a1=$(lsub "$UA" --gpu-count 1 -- "$L/hold" a1)
	lab_daemon
	wait_for 20 '[ "$(lab_field "$a1" state)" = running ]'
	[ "$(lab_field "$c1" state)" = queued ]
	touch "$L/go-a1" "$L/go-c1"
	wait_for 20 '[ "$(lab_field "$c1" state)" = succeeded ]'
}

@test "a member holding seq.lock freezes nothing: the daemon names her and accepts the drop once she lets go, a request meanwhile is applied, submit gives up with 75 naming her" {
	lab_spool
	q=$(lsub "$UA" --hold -- true)
	lab_daemon
	wait_for 10 '[ "$(lab_field "$q" reason)" = held ]'
	# bob takes the lock (a flock needs only the read access members have).
	as "$UB" flock "$LS/seq.lock" sleep 120 &
	holder=$!
	wait_for 10 'grep -q "FLOCK.*:$(stat -c %i "$LS/seq.lock") " /proc/locks'
	# submit waits 10 s at most, then says who holds it (meanwhile, below).
	as "$UA" timeout "$(scaled 60)" cardbaton-submit --config "$LC" -- true \
		> "$L/submit.out" 2> "$L/submit.err" &
	sub=$!
	# A drop under a name of its own needs an ID from seq: it waits.
	printf 'command: [true]\ngpu_count: 0\n' > "$L/plain.job"
	chmod 0644 "$L/plain.job"
	lab_drop "$UA" "$L/plain.job"
	wait_for 10 'grep -q "seq.lock: held by pid [0-9]* ($UB).*new/ waits" "$T/daemon.log"'
	[ -e "$LS/new/plain.job" ]
	# The daemon serves on: alice's cancel is applied.
	ltool "$UA" cancel "$q"
	wait_for 10 '[ "$(lab_field "$q" state)" = cancelled ]'
	rc=0
	wait "$sub" || rc=$?
	[ "$rc" -eq 75 ]
	[[ $(cat "$L/submit.err") == *"seq.lock: held by pid "*"($UB)"* ]]
	# flock(1) left its lock to the sleep it runs: every process of bob's.
	pkill -KILL -u "$(id -u "$UB")"
	wait "$holder" 2>/dev/null || true
	wait_for 10 '[ ! -e "$LS/new/plain.job" ]'
	[ "$(grep -c 'seq.lock: held' "$T/daemon.log")" -eq 1 ]
	wait_for 10 '[ "$(cardbaton-status --config "$LC" --all --json |
		json "len([j for j in d[\"jobs\"] if j[\"owner\"] == \"$UA\"])")" = 2 ]'
}

@test "a member who writes seq back, far ahead or into nonsense reuses no job ID and overwrites no record; submit and the daemon count the IDs on disk" {
	lab_spool
	lab_daemon
	a1=$(lsub "$UA" --gpu-count 0 -- true)
	a2=$(lsub "$UA" --gpu-count 0 -- true)
	wait_for 20 '[ "$(lab_field "$a2" state)" = succeeded ]'
	before=$(lab_sum "$a1")
	boot=$(cat /proc/sys/kernel/random/boot_id)
	# Back to 0: the next IDs are still above every record.
	as "$UB" sh -c 'printf "%010d %s\n" 0 "$2" > "$1/seq"' sh "$LS" "$boot"
	printf 'command: [true]\ngpu_count: 0\n' > "$L/plain.job"
	chmod 0644 "$L/plain.job"
	lab_drop "$UB" "$L/plain.job"
	wait_for 10 '[ ! -e "$LS/new/plain.job" ]'
	[ "$(lab_sum "$a1")" = "$before" ]
	b1=$(lsub "$UB" --gpu-count 0 -- true)
	[ "$b1" -gt "$a2" ]
	# Far ahead: the daemon takes no ID from it.
	as "$UB" sh -c 'printf "%010d %s\n" 9999999990 "$2" > "$1/seq"' sh "$LS" "$boot"
	lab_drop "$UB" "$L/plain.job" plain2.job
	wait_for 10 '[ ! -e "$LS/new/plain2.job" ]'
	top=$(cardbaton-status --config "$LC" --all --json | json "max(int(j['id']) for j in d['jobs'])")
	[ "$top" -lt 1000 ]
	# Nonsense: submit counts the IDs on disk and writes it anew.
	as "$UB" sh -c 'echo garbage > "$1/seq"' sh "$LS"
	a3=$(lsub "$UA" --gpu-count 0 -- true)
	[ "$a3" -gt "$b1" ] && [ "$a3" -lt 1000 ]
	wait_for 20 '[ "$(lab_field "$a3" state)" = succeeded ]'
	[ "$(lab_sum "$a1")" = "$before" ]
	# One record per job.
	[ "$(ls "$LS"/done | sort | uniq -d | wc -l)" -eq 0 ]
}
