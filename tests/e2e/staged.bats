#!/usr/bin/env bats
# staged.bats - the baton through the daemon: a job waiting for cards
# held by running jobs is staged on their node, and the node starts it
# when they end, with no round trip to the daemon, even with the daemon
# stopped.  Real daemon, real worker on the local node with simulated
# cards.  Which job is staged where is a C unit test
# (tests/unit/test_plan.c test_baton); the worker's side of it alone is
# tests/e2e/baton.bats.

load ../lib/common

bats_require_minimum_version 1.5.0

setup() {
	setup_common
	C=$T/config.yaml
	# One card, unless a test says otherwise.
	fake_gpus "0, GPU-00000000-0000-0000-0000-000000000000, NVIDIA Fake A100, 0, 81920, 0"
}

teardown() {
	teardown_common
}

# hold_until FILE: a job that runs until FILE exists, then says when
# it ended (epoch ns) in FILE.ended.
hold_until() { echo "until [ -e $1 ]; do sleep 0.02; done; date +%s%N > $1.ended"; }
staged_now() { [ "$(field "$1" staged)" = True ]; }

@test "a job waiting for the busy card is staged on its node and shown so; the node starts it when the card frees, with the daemon stopped" {
	start_daemon
	a=$(sub --gpu-count 1 -- sh -c "$(hold_until "$T/go")")
	wait_for 10 '[ "$(field "$a" state)" = running ]'
	b=$(sub --gpu-count 1 -- sh -c 'date +%s%N > "$0"; echo "$CUDA_VISIBLE_DEVICES" >> "$0"' "$T/b.started")
	wait_for 10 staged_now "$b"
	# Queued for scripts and the filters, "staged" in the table, with
	# where and after whom.
	[ "$(field "$b" state)" = queued ]
	[ "$(field "$b" node)" = local ]
	[ "$(field "$b" reason)" = "staged on local: starts when job $a ends" ]
	st | grep -Eq "^ *$b +staged +0 +local +0 +0 "
	st --state queued --json | json "[j['id'] for j in d['jobs']]" | grep -q "\"$b\""
	# The daemon stops; the card frees; the node hands it on.
	stop_daemon
	touch "$T/go"
	wait_for 10 '[ -s "$T/b.started" ]'
	[ "$(sed -n 2p "$T/b.started")" = GPU-00000000-0000-0000-0000-000000000000 ]
	[ "$(head -1 "$T/b.started")" -ge "$(cat "$T/go.ended")" ]
	# Back, the daemon finds both jobs' ends like any other attempt's.
	start_daemon
	wait_for 20 final "$a"
	wait_for 20 final "$b"
	[ "$(field "$a" state)" = succeeded ]
	[ "$(field "$b" state)" = succeeded ]
	[ "$(field "$b" attempts)" = 1 ]
	[ "$(field "$b" staged)" = False ]
	grep -q "job $b: staged attempt .* on local" "$T/daemon.log"
}

@test "cancel of a staged job: cancelled, and it never starts" {
	start_daemon
	a=$(sub --gpu-count 1 -- sh -c "$(hold_until "$T/go")")
	wait_for 10 '[ "$(field "$a" state)" = running ]'
	b=$(sub --gpu-count 1 -- touch "$T/b.ran")
	wait_for 10 staged_now "$b"
	cardbaton-cancel --config "$C" "$b"
	wait_for 10 final "$b"
	[ "$(field "$b" state)" = cancelled ]
	touch "$T/go"
	wait_for 10 final "$a"
	settle 0.5
	[ ! -e "$T/b.ran" ]
	wait_for 5 '[ -z "$(ls "$STATE/staged")" ]'
}

@test "hold of a staged job: it is asked back from its node and held in the queue; release runs it" {
	start_daemon
	a=$(sub --gpu-count 1 -- sh -c "$(hold_until "$T/go")")
	wait_for 10 '[ "$(field "$a" state)" = running ]'
	b=$(sub --gpu-count 1 -- touch "$T/b.ran")
	wait_for 10 staged_now "$b"
	cardbaton-hold --config "$C" "$b"
	wait_for 10 '[ "$(field "$b" reason)" = held ]'
	[ "$(field "$b" staged)" = False ]
	[ -z "$(ls "$T/spool/ctl")" ]
	touch "$T/go"
	wait_for 10 final "$a"
	settle 0.5
	[ ! -e "$T/b.ran" ]
	# Its file on the node is gone: removed by the unstage, or (the
	# daemon stops its call once it has heard "unstaged" on the stream)
	# by the baton that A's end ran, which finds it beside its final
	# state.
	wait_for 5 '[ -z "$(ls "$STATE/staged")" ]'
	cardbaton-release --config "$C" "$b"
	wait_for 10 final "$b"
	[ "$(field "$b" state)" = succeeded ]
	[ -e "$T/b.ran" ]
}

@test "a job promoted above a staged one takes its seat: the staged job is sent back and starts after it" {
	start_daemon
	a=$(sub --gpu-count 1 -- sh -c "$(hold_until "$T/go")")
	wait_for 10 '[ "$(field "$a" state)" = running ]'
	b=$(sub --gpu-count 1 -- sh -c 'echo b >> "$0"' "$T/order")
	wait_for 10 staged_now "$b"
	c=$(sub --gpu-count 1 -- sh -c 'echo c >> "$0"; sleep 0.3' "$T/order")
	settle 0.3
	[ "$(field "$c" staged)" = False ]
	cardbaton-promote --config "$C" "$c"
	wait_for 10 staged_now "$c"
	[ "$(field "$b" staged)" = False ]
	[ "$(field "$b" state)" = queued ]
	touch "$T/go"
	wait_for 10 final "$b"
	[ "$(cat "$T/order")" = "$(printf 'c\nb')" ]
	grep -q "job $b: un-staging it on local: its place is better taken" "$T/daemon.log"
}

@test "a staged job whose card is busy from outside the queue when its turn comes goes back to its place, and runs once the card is idle" {
	start_daemon
	a=$(sub --gpu-count 1 -- sh -c "$(hold_until "$T/go")")
	wait_for 10 '[ "$(field "$a" state)" = running ]'
	b=$(sub --gpu-count 1 -- touch "$T/b.ran")
	wait_for 10 staged_now "$b"
	# A process from outside the queue on the card.
	fake_apps "GPU-00000000-0000-0000-0000-000000000000, 4242, 2000"
	touch "$T/go"
	wait_for 10 'grep -q "job $b: queued: waiting: cards busy when its turn came" "$T/daemon.log"'
	[ ! -e "$T/b.ran" ]
	[ "$(field "$b" state)" = queued ]
	fake_apps
	wait_for 20 final "$b"
	[ "$(field "$b" state)" = succeeded ]
	# The staged attempt is not counted: one attempt ran.
	[ "$(field "$b" attempts)" = 1 ]
}

@test "a better placement: a staged job moves to a card that frees first elsewhere" {
	fake_gpus "0, GPU-00000000-0000-0000-0000-000000000000, NVIDIA Fake A100, 0, 81920, 0" \
		"1, GPU-11111111-1111-1111-1111-111111111111, NVIDIA Fake A100, 0, 81920, 0"
	start_daemon
	a=$(sub --gpus 0 -- sh -c "$(hold_until "$T/go")")
	x=$(sub --gpus 1 -- sh -c "$(hold_until "$T/gox")")
	wait_for 10 '[ "$(field "$a" state)" = running ] && [ "$(field "$x" state)" = running ]'
	b=$(sub --gpu-count 1 -- sh -c 'echo "$CUDA_VISIBLE_DEVICES" > "$0"' "$T/b.ran")
	wait_for 10 staged_now "$b"
	[ "$(field "$b" gpus)" = "[0]" ]
	touch "$T/gox"
	wait_for 20 final "$b"
	[ "$(cat "$T/b.ran")" = GPU-11111111-1111-1111-1111-111111111111 ]
	[ "$(field "$a" state)" = running ]
	[ ! -e "$T/go.ended" ]
}

@test "a chain through one card: each job staged behind the one before, each with one attempt (a staged job that started holds its card: nothing is launched onto it)" {
	start_daemon
	ids=()
	for i in 1 2 3 4 5; do ids+=("$(sub --gpu-count 1 -- sleep 0.3)"); done
	for id in "${ids[@]}"; do wait_for 30 final "$id"; done
	for id in "${ids[@]}"; do
		[ "$(field "$id" state)" = succeeded ]
		# The record's attempts, given-back ones included: one.
		[ "$(json 'len(d["attempts"])' < "$T/spool/done/$(printf %010d "$id").job")" = 1 ]
	done
	[ "$(grep -c 'staged attempt' "$T/daemon.log")" -ge 3 ]
	not grep -q 'not started on local' "$T/daemon.log"
}

# The node's event stream (cardbaton-worker watch): its PIDs, by the
# state directory it holds open.
watch_pids() {
	local p
	for p in $(find /proc/[0-9]*/fd -maxdepth 1 -lname "$STATE" 2>/dev/null | cut -d/ -f3 | sort -u); do
		tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null | grep -q ' watch' && echo "$p"
	done
}

@test "a hold that arrives while the stage is still on its way is applied once the node has it" {
	start_daemon
	a=$(sub --gpu-count 1 -- sh -c "$(hold_until "$T/go")")
	wait_for 10 '[ "$(field "$a" state)" = running ]'
	wait_for 10 '[ -n "$(watch_pids)" ]'
	w=$(watch_pids)
	kill -STOP $w
	b=$(sub --gpu-count 1 -- touch "$T/b.ran")
	# Recorded staged; the node, frozen, has not answered.
	wait_for 10 staged_now "$b"
	cardbaton-hold --config "$C" "$b"
	# The daemon's time to take the hold while the node is frozen: no
	# sign of it to wait for (the request stays in ctl/ until the job is
	# queued again); taken late, the test passes, checking less.
	sleep 1
	kill -CONT $w
	wait_for 15 '[ "$(field "$b" reason)" = held ]'
	touch "$T/go"
	wait_for 10 final "$a"
	settle 0.5
	[ ! -e "$T/b.ran" ]
}
