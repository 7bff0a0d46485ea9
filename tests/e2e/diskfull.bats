#!/usr/bin/env bats
# diskfull.bats - a spool on a full disk or a read-only file system
# (SPEC §10 "a full disk ... never a crash or a lost job"; LAYOUT.md §9).
#
# The spool lives on a small tmpfs of its own ($T/full), filled with
# dd or remounted read-only.  Tools fail with 75 and one line, leaving
# nothing behind; the daemon stalls (one log line, no launches, no
# spinning), keeps every record valid and in one place, and catches up
# when the spool can be written again -- with or without spare files
# to record into on the full disk (LAYOUT.md §9 "Spare files on a full
# disk").

load ../lib/common

bats_require_minimum_version 1.5.0
test_timeout 60

setup() {
	setup_common
	C=$T/config.yaml
	mkdir "$T/full"
	mount -t tmpfs -o size=512k,mode=0700 tmpfs "$T/full" 2>/dev/null ||
		skip "cannot mount a tmpfs here"
	S=$T/full/spool
	printf 'spool: %s\nnodes:\n  local:\n    local: true\n' "$S" > "$C"
}

teardown() {
	teardown_common
	if mountpoint -q "$T/full" 2>/dev/null; then umount "$T/full" || umount -l "$T/full"; fi
}

sub() { cardbaton-submit --config "$C" "$@"; }
st() { cardbaton-status --config "$C" "$@"; }
state() { st --json "$1" | json 'd["jobs"][0]["state"]'; }
field() { st --json "$1" | json "d[\"jobs\"][0][\"$2\"]"; }
final() {
	case "$(state "$1")" in succeeded|failed|cancelled|lost) return 0 ;; esac
	return 1
}

# fill: no byte left on the spool's file system.  room N: N free pages.
fill() { dd if=/dev/zero of="$T/full/filler" bs=4k 2>/dev/null || true; }
room() { truncate -s "-$(($1 * 4096))" "$T/full/filler"; }
unfill() { rm -f "$T/full/filler"; }


# empty DIR...: no entry (dot files too) in any of the DIRs.
empty() {
	local d
	for d; do
		[ -z "$(ls -A "$d")" ] || { echo "$d:" $(ls -A "$d") >&2; return 1; }
	done
}

# nothing_staged: no file, dot-named or not, in tmp/ or new/.
nothing_staged() {
	[ -z "$(ls -A "$S/tmp")" ] || { ls -lA "$S/tmp" >&2; return 1; }
	[ -z "$(ls -A "$S/new")" ] || { ls -lA "$S/new" >&2; return 1; }
}

# records_ok: every record is one whole JSON object whose id and state
# match its name and directory, and no job has two records.
records_ok() {
	python3 - "$S" <<-'PY'
		import json, os, sys
		s = sys.argv[1]
		where = {}
		dirs = {"queued": ("queued",), "running": ("running", "pausing"),
		        "paused": ("paused",), "done": ("succeeded", "failed", "cancelled", "lost")}
		for d, states in dirs.items():
		    for n in sorted(os.listdir(os.path.join(s, d))):
		        if n.startswith("."):
		            continue
		        r = json.load(open(os.path.join(s, d, n)))
		        assert r["state"] in states, (d, n, r["state"])
		        assert n.endswith("%010d.job" % int(r["id"])), (d, n, r["id"])
		        assert r["id"] not in where, ("two records", r["id"], where[r["id"]], d)
		        where[r["id"]] = d
	PY
}

# cpu_ticks PID: user + system clock ticks of PID and its reaped children.
cpu_ticks() {
	local s f
	read -r s < "/proc/$1/stat"
	s=${s##*) }
	read -ra f <<< "$s"
	echo $(( f[11] + f[12] + f[13] + f[14] ))
}

# ---- tools ------------------------------------------------------------------

@test "submit on a full spool: 75 and one line, nothing left in new/ or tmp/" {
	sub -- true >/dev/null
	rm "$S/new/"*
	fill
	# No room for the sequence number.
	run --separate-stderr sub -- true
	failed 75 cardbaton-submit
	[[ $stderr == *"No space left on device"* ]]
	nothing_staged
	# Room for the sequence number but not for the job file.
	room 2
	run --separate-stderr sub -- python3 -c "$(head -c 60000 /dev/zero | tr '\0' x)"
	failed 75 cardbaton-submit
	[[ $stderr == *"/new/"*"No space left on device"* ]]
	nothing_staged
	# A request (ctl/) cannot be written either.
	room 0
	dd if=/dev/zero of="$T/full/filler2" bs=4k 2>/dev/null || true
	run --separate-stderr cardbaton-promote --config "$C" --priority 5 1
	[ "$status" -eq 66 ] || [ "$status" -eq 75 ]
	unfill
	rm -f "$T/full/filler2"
	id=$(sub -- true)
	[ -n "$id" ]
	[ "$(ls "$S/new")" = "$(printf '100000000-%010d.job' "$id")" ]
}

@test "a read-only spool: submit, cancel and promote exit 75 with one line; status reads it" {
	id=$(sub -- true)
	mount -o remount,ro "$T/full"
	run --separate-stderr sub -- true
	failed 75 cardbaton-submit
	[[ $stderr == *"Read-only file system"* ]]
	run --separate-stderr cardbaton-cancel --config "$C" "$id"
	failed 75 cardbaton-cancel
	run --separate-stderr cardbaton-promote --config "$C" "$id"
	failed 75 cardbaton-promote
	run --separate-stderr st --json "$id"
	[ "$status" -eq 0 ]
	[ "$(echo "$output" | json 'd["jobs"][0]["state"]')" = queued ]
	mount -o remount,rw "$T/full"
	[ "$(ls "$S/new" | wc -l)" -eq 1 ]
	empty "$S/tmp" "$S/ctl"
}

@test "the daemon on a fresh read-only spool exits 75 with one line" {
	mkdir -p "$S"
	mount -o remount,ro "$T/full"
	run --separate-stderr cardbaton-spoold --config "$C"
	failed 75 cardbaton-spoold
	[[ $stderr == *"Read-only file system"* ]]
}

# ---- the daemon -------------------------------------------------------------

# The scenario of the daemon tests, up to the fault: job A runs until
# $T/go appears, then exits 3; jobs B and C wait for cards 1 and 2,
# which foreign processes hold.
fault_setup() {
	fake_apps "GPU-11111111-1111-1111-1111-111111111111, 4242, 500" \
		"GPU-22222222-2222-2222-2222-222222222222, 4343, 500"
	start_daemon
	A=$(sub --gpu-count 0 -- sh -c 'while [ ! -e "$0" ]; do sleep 0.02; done; exit 3' "$T/go")
	B=$(sub --gpus 1 -- true)
	Cj=$(sub --gpus 2 -- sh -c 'echo c > "$0"' "$T/c.out")
	wait_for 20 '[ "$(state "$A")" = running ]'
	wait_for 20 '[ "$(ls "$S/queued" | wc -l)" -eq 2 ]'
	[ "$(state "$B")" = queued ]
	aid=$(ls "$STATE/attempts" | grep -v '\.state$')
}

# hand_job: a job file dropped into new/ under a name of its own (the
# daemon needs a new sequence number for it), by the maildir steps.
hand_job() {
	printf '{"command": ["sh", "-c", "echo hand > %s/hand.out"], "gpu_count": 0}\n' "$T" > "$S/tmp/hand"
	mv "$S/tmp/hand" "$S/new/hand.job"
}

# While the spool cannot be written: A ends, card 2 frees (C could be
# placed, but its launch cannot be recorded), and, on a full disk, B
# is cancelled; then the checks of the stalled daemon.  $3 = spares:
# the daemon has spare files (LAYOUT.md §3) on the full disk, and what
# fits in them may still be recorded: only the checks that hold either
# way.
during_fault() {
	local t0 t1
	touch "$T/go"
	fake_apps "GPU-11111111-1111-1111-1111-111111111111, 4242, 500"
	# The node has A's final state; the daemon cannot record it.
	wait_for 20 'grep -q "^state failed" "$STATE/attempts/$aid.state"'
	wait_for 20 'grep -q "cannot write the spool" "$T/daemon.log"'
	if [ "$1" = full ]; then
		# An empty request needs no block: written, and kept in ctl/
		# until the daemon can record the cancel.
		cardbaton-cancel --config "$C" "$B"
	fi
	# Not spinning: under half a CPU over two seconds (a busy loop
	# takes all of one), and still there.
	t0=$(cpu_ticks "$DAEMON_PID")
	settle 2
	t1=$(cpu_ticks "$DAEMON_PID")
	[ $((t1 - t0)) -lt $(getconf CLK_TCK) ] || { echo "daemon used $((t1 - t0)) ticks in 2 s" >&2; return 1; }
	kill -0 "$DAEMON_PID"
	# One line for the whole episode, and nothing lost or half-written:
	# A still running in its record, B still queued, the request still
	# in ctl/, the dropped file still waiting.
	[ "$(grep -c "cannot write the spool" "$T/daemon.log")" -eq 1 ]
	grep "cannot write the spool" "$T/daemon.log" | grep -q "$2"
	records_ok
	[ -z "$(ls "$S/tmp")" ]
	[ "${3:-}" != spares ] || return 0
	[ "$(state "$A")" = running ]
	[ "$(state "$B")" = queued ]
	[ "$(state "$Cj")" = queued ]
	[ ! -e "$T/c.out" ]
	if [ "$1" = full ]; then
		[ -n "$(ls "$S/ctl")" ]
		not empty "$S/new" "$S/incoming" 2>/dev/null
	fi
}

after_fault() {
	wait_for 30 final "$A"
	[ "$(state "$A")" = failed ]
	[ "$(field "$A" exit_code)" = 3 ]
	[ "$(field "$A" reason)" = "exit status 3" ]
	wait_for 30 final "$Cj"
	[ "$(state "$Cj")" = succeeded ]
	[ "$(cat "$T/c.out")" = c ]
	if [ "$1" = full ]; then
		wait_for 30 final "$B"
		[ "$(state "$B")" = cancelled ]
		[ -z "$(ls "$S/ctl")" ]
		# The dropped file was accepted and ran.
		wait_for 30 '[ -s "$T/hand.out" ]'
		[ "$(cat "$T/hand.out")" = hand ]
		wait_for 30 'empty "$S/new" "$S/incoming" "$S/running"'
		grep -l hand.out "$S"/done/*.job | xargs cat | json 'd["state"]' | grep -qx succeeded
	else
		# B waits on for its card, as before.
		[ "$(state "$B")" = queued ]
	fi
	# Said when a write of its own retried succeeds (on a timer): with
	# spare files the jobs may all be recorded before that (ci26).
	wait_for 30 'grep -q "the spool can be written again" "$T/daemon.log"'
	[ "$(grep -c "cannot write the spool" "$T/daemon.log")" -eq 1 ]
	records_ok
	stop_daemon
	[ -z "$(ls -A "$S/tmp")" ]
}

@test "the daemon on a full disk: stalls with one line, loses nothing, catches up when space returns" {
	fault_setup
	# A daemon that has no spare file to write into: restarted on the
	# full disk (its last stop removed its spares, and start-up any left).
	fill
	stop_daemon
	fill
	start_daemon
	room 1
	hand_job        # takes the last page
	during_fault full "No space left on device"
	unfill
	after_fault full
}

@test "the daemon on a full disk with spare files: what fits in them is recorded, still one line, nothing lost" {
	fault_setup
	[ -n "$(ls -A "$S/tmp")" ]      # the spares of the records it moved
	fill
	room 1
	hand_job
	during_fault full "No space left on device" spares
	unfill
	after_fault full
}

@test "the daemon on a spool remounted read-only: the same, until it is read-write again" {
	fault_setup
	mount -o remount,ro "$T/full"
	during_fault ro "Read-only file system"
	mount -o remount,rw "$T/full"
	after_fault ro
}

@test "the daemon started on a read-only spool serves and stalls; a file left in new/ is accepted later" {
	start_daemon                    # makes the spool and its lock
	stop_daemon
	hand_job
	mount -o remount,ro "$T/full"
	start_daemon
	wait_for 20 'grep -q "cannot write the spool.*Read-only file system" "$T/daemon.log"'
	[ -n "$(ls "$S/new")" ]
	mount -o remount,rw "$T/full"
	wait_for 30 '[ -s "$T/hand.out" ]'
	wait_for 30 'empty "$S/new" "$S/incoming" "$S/running"'
	[ "$(grep -c "cannot write the spool" "$T/daemon.log")" -eq 1 ]
	records_ok
}

@test "a turn's records that cannot be made durable (fsync: EIO): the daemon exits 74 with one line, nothing sent on; restarted, the request is applied and the job runs once" {
	printf 'spool: %s\nnodes:\n  local:\n    local: true\n' "$T/spool" > "$C"
	id=$(sub --hold -- sh -c 'echo ran >> "$0"' "$T/ran")
	# The daemon with syncs that fail once $T/bad exists.
	CB_FAIL_SYNC=$T/bad LD_PRELOAD=$CB_BUILD/tests/failsync/failsync.so \
		ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0 \
		cardbaton-spoold --config "$C" >>"$T/daemon.log" 2>&1 &
	DAEMON_PID=$!
	wait_for 10 '[ "$(field "$id" reason)" = held ]'
	touch "$T/bad"
	cardbaton-release --config "$C" "$id"
	rc=0
	wait "$DAEMON_PID" || rc=$?
	DAEMON_PID=
	[ "$rc" -eq 74 ]
	[ "$(grep -c "cannot make this turn's records durable" "$T/daemon.log")" -eq 1 ]
	grep "cannot make this turn's records durable" "$T/daemon.log" | grep -q 'Input/output error'
	# Nothing went on: the job is held on disk, the request still waits.
	[ "$(field "$id" reason)" = held ]
	[ -n "$(ls "$T/spool/ctl")" ]
	[ ! -e "$T/ran" ]
	rm "$T/bad"
	start_daemon
	wait_for 10 final "$id"
	[ "$(state "$id")" = succeeded ]
	[ "$(cat "$T/ran")" = ran ]
	[ -z "$(ls "$T/spool/ctl")" ]
}
