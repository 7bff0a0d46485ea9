#!/usr/bin/env bats
# wait.bats - cardbaton-wait (issue 13, part 6): it blocks until every
# job named has ended (0 all succeeded, 1 one did not, 66 an unknown
# ID, 75 at --timeout), or, without IDs, until nothing is queued,
# running or pausing (held and paused jobs aside), jobs submitted
# meanwhile included; it learns of changes through inotify and works
# whether or not the daemon runs.
#
# "wait has read the spool and waits" is seen from outside: the process
# sleeps in poll(2) (blocked).  Records are written by hand where no
# daemon is needed (LAYOUT.md §6), as in tools.bats.

load ../lib/common

bats_require_minimum_version 1.5.0
test_timeout 60

setup() {
	setup_common
	C=$T/config.yaml
}

teardown() {
	teardown_common
}

sub() { cardbaton-submit --config "$C" "$@"; }
cw() { cardbaton-wait --config "$C" "$@"; }

# done_file ID: where job ID's record is once it has ended.
done_file() { echo "$T/spool/done/$(printf %010d "$1").job"; }

# gate NAME: a CPU job that runs until $T/NAME exists; prints its ID.
gate() { sub --gpu-count 0 -- sh -c "while [ ! -e '$T/$1' ]; do sleep 0.05; done"; }

# bg_wait ARGS...: cardbaton-wait in the background, $WAIT_PID, its
# stderr in $T/wait.err.
bg_wait() {
	cardbaton-wait --config "$C" "$@" 2>"$T/wait.err" &
	WAIT_PID=$!
}

# blocked PID: the process sleeps in poll(2): it has read the spool and
# waits for an event (a kernel that does not name the wait channel
# says 0).
blocked() {
	local w
	[ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" = S ] || return 1
	w=$(cat "/proc/$1/wchan" 2>/dev/null)
	[[ $w == *poll* ]] || [ "$w" = 0 ]
}

# still_waiting PID: it has not returned, given the time to (a wait
# that had wrongly returned would be a zombie by then).
still_waiting() {
	settle 0.5
	blocked "$1"
}

# reaped PID CODE: it returned, with exit status CODE.
reaped() {
	local rc=0
	wait "$1" || rc=$?
	[ "$rc" = "$2" ] || { echo "exit status $rc, wanted $2" >&2; return 1; }
}

# make_spool: the spool, with no job in it.
make_spool() {
	[ -e "$T/spool/id" ] || { sub -- true >/dev/null && rm -f "$T"/spool/new/*; }
}

# record DIR NAME ID STATE REV [JOB_FIELDS]: a job record written by
# hand, as the daemon would (LAYOUT.md §6); JOB_FIELDS, fields of its
# job besides the command, e.g. '"hold": true'.
record() {
	make_spool
	cat > "$T/spool/$1/$2" <<-EOF
	{"id": "$3", "rev": $5, "state": "$4", "reason": "by hand",
	 "priority": 0, "submitted_ms": 1700000000000, "queued_at_ms": 1700000000000,
	 "job": {"command": ["sleep", "$3"]${6:+, $6}}, "attempts": []}
	EOF
}

@test "wait ID...: returns 0 once every job named has succeeded, not before" {
	start_daemon
	a=$(gate go)
	b=$(sub --gpu-count 0 -- true)
	bg_wait "$a" "$b"
	wait_for 15 '[ -e "$(done_file "$b")" ]'
	# b has ended, a has not: still waiting.
	still_waiting "$WAIT_PID"
	touch "$T/go"
	reaped "$WAIT_PID" 0
	[ -e "$(done_file "$a")" ]
	[ ! -s "$T/wait.err" ]
	# Jobs that have ended: at once, even with no time to wait; through
	# the dispatcher, --config passed on.
	run --separate-stderr cw --timeout 0 "$a" "$b" "$a"
	[ "$status" -eq 0 ]
	[ -z "$output$stderr" ]
	cd "$HOME"
	run --separate-stderr cardbaton --config "$C" wait "$b"
	[ "$status" -eq 0 ]
}

@test "wait ID...: 1 when a job did not succeed, one line naming each that did not" {
	start_daemon
	a=$(sub --gpu-count 0 -- true)
	b=$(sub --gpu-count 0 -- false)
	# Pinned to a card no node has: it stays queued until cancelled.
	c=$(sub --gpus 7 -- true)
	cardbaton-cancel --config "$C" "$c"
	run --separate-stderr timeout "$(scaled 30)" cardbaton-wait --config "$C" "$a" "$b" "$c"
	failed 1 cardbaton-wait
	[ "$stderr" = "cardbaton-wait: job $b failed, job $c cancelled" ]
	run --separate-stderr cw "$a"
	[ "$status" -eq 0 ]
}

@test "wait ID...: an unknown ID is 66 naming it, and nothing is waited for" {
	# No spool yet: every ID is unknown, and nothing is created.
	run --separate-stderr cw 5
	failed 66 cardbaton-wait
	[ "$stderr" = "cardbaton-wait: no such job 5" ]
	run --separate-stderr cw
	[ "$status" -eq 0 ]
	[ ! -e "$T/spool" ]
	# A job that will not end (no daemon) beside unknown ones: 66 at
	# once (timeout(1) would make it 124).
	a=$(sub -- true)
	run --separate-stderr timeout "$(scaled 20)" cardbaton-wait --config "$C" "$a" 999
	failed 66 cardbaton-wait
	[ "$stderr" = "cardbaton-wait: no such job 999" ]
	run --separate-stderr timeout "$(scaled 20)" cardbaton-wait --config "$C" 998 "$a" 999
	failed 66 cardbaton-wait
	[ "$stderr" = "cardbaton-wait: no such jobs 998 999" ]
	# Nothing written: the submission is where it was, no request.
	[ -e "$T/spool/new/100000000-$(printf %010d "$a").job" ]
	[ -z "$(ls "$T/spool/ctl")" ]
}

@test "wait --timeout: 75 with one line when the time is up" {
	a=$(sub -- true)
	run --separate-stderr cw --timeout 1 "$a"
	failed 75 cardbaton-wait
	[ "$stderr" = "cardbaton-wait: timed out after 1 s; not ended: $a" ]
	run --separate-stderr cw --timeout 1
	failed 75 cardbaton-wait
	[ "$stderr" = "cardbaton-wait: timed out after 1 s; jobs are still queued, running or pausing" ]
	run --separate-stderr cw --timeout 0
	failed 75 cardbaton-wait
}

@test "wait without IDs: waits for a job submitted while it waits, then 0" {
	start_daemon
	a=$(gate go1)
	wait_for 15 '[ "$(job_state "$a")" = running ]'
	bg_wait
	wait_for 10 'blocked "$WAIT_PID"'
	b=$(gate go2)
	touch "$T/go1"
	wait_for 15 '[ -e "$(done_file "$a")" ]'
	# a has ended, b (submitted while wait waited) has not.
	still_waiting "$WAIT_PID"
	touch "$T/go2"
	reaped "$WAIT_PID" 0
	[ -e "$(done_file "$b")" ]
	[ ! -s "$T/wait.err" ]
	# Whatever became of the jobs: a failed one leaves 0 too.
	sub --gpu-count 0 -- false >/dev/null
	run --separate-stderr timeout "$(scaled 30)" cardbaton-wait --config "$C"
	[ "$status" -eq 0 ]
}

@test "wait works when the daemon starts only after it began: a submission has not ended" {
	a=$(sub --gpu-count 0 -- true)
	b=$(sub --gpu-count 0 -- true)
	bg_wait "$a"
	w1=$WAIT_PID
	cardbaton-wait --config "$C" 2>"$T/wait2.err" &
	w2=$!
	wait_for 10 'blocked "$w1"'
	wait_for 10 'blocked "$w2"'
	still_waiting "$w1"
	still_waiting "$w2"
	start_daemon
	reaped "$w1" 0
	reaped "$w2" 0
	[ -e "$(done_file "$a")" ]
	[ -e "$(done_file "$b")" ]
}

@test "wait without IDs: held and paused jobs are aside; queued, running, new/ and incoming/ are waited for" {
	# No daemon: the records stay where they are written.
	record queued 100000000-0000000005.job 5 queued 2 '"hold": true'
	record paused 0000000006.job 6 paused 4
	run --separate-stderr timeout "$(scaled 20)" cardbaton-wait --config "$C"
	[ "$status" -eq 0 ]
	# Named, a held job is waited for like any other.
	run --separate-stderr cw --timeout 1 5
	failed 75 cardbaton-wait
	# Each of these is something to wait for, alone.
	record queued 100000000-0000000007.job 7 queued 2 '"hold": false'
	run --separate-stderr cw --timeout 0
	failed 75 cardbaton-wait
	rm "$T/spool/queued/100000000-0000000007.job"
	record running 0000000008.job 8 running 3
	run --separate-stderr cw --timeout 0
	failed 75 cardbaton-wait
	rm "$T/spool/running/0000000008.job"
	echo '{"command": ["true"]}' > "$T/spool/incoming/0000000009.job"
	run --separate-stderr cw --timeout 0
	failed 75 cardbaton-wait
	rm "$T/spool/incoming/0000000009.job"
	echo '{"command": ["true"]}' > "$T/spool/new/mine.job"
	run --separate-stderr cw --timeout 0
	failed 75 cardbaton-wait
	rm "$T/spool/new/mine.job"
	# Names the daemon ignores in new/ are no jobs.
	echo x > "$T/spool/new/notes.txt"
	echo x > "$T/spool/new/.mine.job"
	run --separate-stderr cw --timeout 0
	[ "$status" -eq 0 ]
}

@test "wait: of two records of one job (a crash between a record's two steps), the higher rev is the job" {
	# running/ rev 3 and done/ rev 4: it has ended.
	record running 0000000005.job 5 running 3
	record done 0000000005.job 5 succeeded 4
	run --separate-stderr cw --timeout 0 5
	[ "$status" -eq 0 ]
	run --separate-stderr cw --timeout 0
	[ "$status" -eq 0 ]
	# queued/ rev 5 and paused/ rev 6: paused, aside; queued rev 7: queued.
	record queued 100000000-0000000006.job 6 queued 5
	record paused 0000000006.job 6 paused 6
	run --separate-stderr cw --timeout 0
	[ "$status" -eq 0 ]
	record queued 100000000-0000000006.job 6 queued 7
	run --separate-stderr cw --timeout 0
	failed 75 cardbaton-wait
	# A record in done/ that lost to a newer one has not ended.
	record running 0000000005.job 5 running 9
	run --separate-stderr cw --timeout 0 5
	failed 75 cardbaton-wait
}

@test "wait ID: a submission the daemon rejects, or one removed from new/, ends it with 1" {
	make_spool
	printf 'command: [true\n' > "$T/spool/new/100000000-0000000042.job"
	bg_wait 42
	wait_for 10 'blocked "$WAIT_PID"'
	cardbaton-spoold --config "$C" --once >>"$T/daemon.log" 2>&1
	[ -e "$T/spool/rejected/0000000042.job" ]
	reaped "$WAIT_PID" 1
	[ "$(cat "$T/wait.err")" = "cardbaton-wait: job 42 was rejected" ]
	# A submission taken back before any daemon saw it.
	a=$(sub -- true)
	bg_wait "$a"
	wait_for 10 'blocked "$WAIT_PID"'
	rm "$T/spool/new/100000000-$(printf %010d "$a").job"
	reaped "$WAIT_PID" 1
	[ "$(cat "$T/wait.err")" = "cardbaton-wait: job $a is gone (its submission was removed)" ]
}

@test "wait: a spool directory moved away while it waits is an error (71), not a wait for ever" {
	a=$(sub -- true)
	bg_wait "$a"
	wait_for 10 'blocked "$WAIT_PID"'
	mv "$T/spool/done" "$T/done.away"
	reaped "$WAIT_PID" 71
	[ "$(cat "$T/wait.err")" = "cardbaton-wait: $T/spool/done: removed or moved away while waiting" ]
}

@test "wait: usage errors are 64 with one line; --help prints the usage" {
	run --separate-stderr cw --help
	[ "$status" -eq 0 ]
	[ "$output" = "usage: cardbaton-wait [--config PATH] [--timeout SECS] [JOB_ID...]" ]
	for args in "--timeout" "--timeout -1" "--timeout abc" "--timeout 1.5" "--timeout 99999999999999999999" \
		"--timeout 315360001" "--bogus" "x" "0" "--timeout 5 1 y"; do
		run --separate-stderr cw $args
		failed 64 cardbaton-wait
	done
	[ ! -e "$T/spool" ]
}
