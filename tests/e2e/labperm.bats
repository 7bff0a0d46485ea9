#!/usr/bin/env bats
# labperm.bats - who may do what in a lab's spool (issue 33, SPEC §12,
# LAYOUT.md §7 "Who may do what"), with real Unix accounts: alice and bob
# members, carol a member and the lab's admin.  The tools refuse another's
# job with 77 and write nothing; the daemon refuses, logs and counts a
# request written by hand by the owner of its ctl/ file; a member's
# promote goes ahead of the member's own jobs only; drain and undrain are
# an admin's, written to ctl/ and applied by the daemon.
#
# tests/lib/lab.bash makes the accounts (prefix cbp, this file's own: 4
# hex digits of the build directory keep the plain and sanitizer lanes
# apart), $L, the config $LC and the spool $LS; the daemon runs as root,
# the spool's owner.

load ../lib/common
load ../lib/lab

bats_require_minimum_version 1.5.0
test_timeout 120

setup_file() { lab_accounts cbp; }
teardown_file() { lab_accounts_down cbp; }

setup() {
	setup_common
	lab_setup
	lab_config '  users:' '    default: {max_priority: 10}'
	C=$LC S=$LS
	# ck.sh: a resumable job (the checkpoint contract in sh).
	cat > "$L/ck.sh" <<-'EOF'
	#!/bin/sh
	[ -n "${CARDBATON_CHECKPOINT-}" ] && exit 0
	until [ -e "$CARDBATON_PAUSE_FILE" ]; do sleep 0.02; done
	echo saved > "$0.state"
	printf '{"checkpoint": "%s"}' "$0.state" > "$CARDBATON_CHECKPOINT_READY.tmp"
	mv "$CARDBATON_CHECKPOINT_READY.tmp" "$CARDBATON_CHECKPOINT_READY"
	exit 75
	EOF
	chmod 0755 "$L/ck.sh"
	lab_spool
}

teardown() {
	lab_teardown
	teardown_common
}

tool() { ltool "$@"; }
f() { lab_field "$@"; }
daemon() { lab_daemon; }
# by USER NAME [CONTENT]: USER writes ctl/NAME by hand (tmp/, then rename).
by() {
	as "$1" sh -c 'printf "%s" "$3" > "$1/tmp/$2" && mv "$1/tmp/$2" "$1/ctl/$2"' sh "$S" "$2" "${3-}"
}
refused_total() { sed -n 's/^cardbaton_requests_refused_total //p' "$S/metrics.prom"; }

@test "bob's cancel, pause, resume, hold, release and promote of alice's jobs: 77, one line each, nothing written or asked" {
	daemon
	q=$(tool "$UA" submit --hold -- true)
	r=$(tool "$UA" submit --gpu-count 1 --resume-command "sh $L/ck.sh" -- sh "$L/ck.sh")
	wait_for 10 '[ "$(f "$r" state)" = running ]'
	for op in cancel hold release promote resume; do
		run --separate-stderr tool "$UB" "$op" "$q"
		failed 77 "cardbaton-$op"
		[ "$stderr" = "cardbaton-$op: job $q is $UA's: only $UA or an admin may $op it" ]
	done
	run --separate-stderr tool "$UB" promote --priority 5 "$q"
	failed 77 cardbaton-promote
	for op in pause cancel; do
		run --separate-stderr tool "$UB" "$op" "$r"
		failed 77 "cardbaton-$op"
		[ "$stderr" = "cardbaton-$op: job $r is $UA's: only $UA or an admin may $op it" ]
	done
	[ -z "$(ls -A "$S/ctl")" ]
	settle 0.5
	[ "$(f "$q" state)" = queued ] && [ "$(f "$q" reason)" = held ] && [ "$(f "$q" priority)" = 0 ]
	[ "$(f "$r" state)" = running ]
	not grep -q 'ctl/' "$T/daemon.log"
	[ "$(refused_total)" = 0 ]
	# Alice may; carol, the admin, may too.
	run -0 tool "$UA" release "$q"
	wait_for 10 '[ "$(f "$q" state)" = succeeded ]'
	run -0 tool "$UA" pause "$r"
	wait_for 10 '[ "$(f "$r" state)" = paused ]'
	run --separate-stderr tool "$UB" resume "$r"
	failed 77 cardbaton-resume
	run -0 tool "$UC" resume "$r"
	wait_for 10 '[ "$(f "$r" state)" = succeeded ]'
}

@test "a request bob writes by hand into ctl/ is refused by the daemon, logged and counted; carol cancels the job" {
	q=$(tool "$UA" submit --hold -- true)
	b=$(tool "$UB" submit --hold -- true)
	daemon
	wait_for 10 '[ "$(f "$q" state)" = queued ]'
	by "$UB" "$q.cancel.1.1"
	wait_for 10 'grep -qxF "cardbaton-spoold: ctl/$q.cancel.1.1: $UB may not cancel job $q ($UA'"'"'s): refused" "$T/daemon.log"'
	by "$UB" "$q.release.1.2"
	# His own job, above his max_priority; a drain; a link to his own file.
	by "$UB" "$b.promote.1.3" 'priority 50'
	by "$UB" 0.drain.1.4 'node local'
	as "$UB" sh -c ': > "$1/tmp/x" && ln "$1/tmp/x" "$1/tmp/y" && mv "$1/tmp/y" "$1/ctl/$2.cancel.1.5"' \
		sh "$S" "$b"
	wait_for 10 '[ "$(refused_total)" = 5 ]'
	grep -qxF "cardbaton-spoold: ctl/$b.promote.1.3: $UB may not promote job $b to priority 50 (max_priority 10): refused" "$T/daemon.log"
	grep -qxF "cardbaton-spoold: ctl/0.drain.1.4: $UB may not drain a node (admins only): refused" "$T/daemon.log"
	grep -qxF "cardbaton-spoold: ctl/$b.cancel.1.5: $UB may not make a request of 2 links: refused" "$T/daemon.log"
	[ "$(grep -c ': refused$' "$T/daemon.log")" = 5 ]
	[ -z "$(ls -A "$S/ctl")" ] && [ -z "$(ls -A "$S/drain")" ]
	[ "$(f "$q" state)" = queued ] && [ "$(f "$q" reason)" = held ]
	[ "$(f "$b" state)" = queued ] && [ "$(f "$b" priority)" = 0 ]
	# What he may do by hand is done: his own job, within his limit.
	by "$UB" "$b.promote.1.6" 'priority 7'
	wait_for 10 '[ "$(f "$b" priority)" = 7 ]'
	# The count survives a restart.
	stop_daemon
	daemon
	[ "$(refused_total)" = 5 ]
	run -0 tool "$UC" cancel "$q"
	wait_for 10 '[ "$(f "$q" state)" = cancelled ]'
	[ "$(refused_total)" = 5 ]
}

@test "a job without an owner (a record from before owners) is an admin's alone" {
	q=$(tool "$UA" submit --hold -- true)
	lab_once
	rec=$(ls "$S"/queued/*-$(printf %010d "$q").job)
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d.pop("owner"); d.pop("owner_uid"); json.dump(d, open(sys.argv[1], "w"))' "$rec"
	[ "$(f "$q" owner)" = None ]
	for u in "$UA" "$UB"; do
		run --separate-stderr tool "$u" hold "$q"
		failed 77 cardbaton-hold
		[ "$stderr" = "cardbaton-hold: job $q has no owner: only an admin may hold it" ]
	done
	by "$UA" "$q.cancel.1.1"
	daemon
	wait_for 10 'grep -qxF "cardbaton-spoold: ctl/$q.cancel.1.1: $UA may not cancel job $q (it has no owner): refused" "$T/daemon.log"'
	[ "$(f "$q" state)" = queued ]
	run -0 tool "$UC" cancel "$q"
	wait_for 10 '[ "$(f "$q" state)" = cancelled ]'
}

@test "a member's promote goes ahead of the member's own queued jobs only, at most max_priority; an admin's above everything" {
	a1=$(tool "$UA" submit --hold -- true)
	a2=$(tool "$UA" submit --hold --priority 3 -- true)
	b1=$(tool "$UB" submit --hold --priority 8 -- true)
	daemon
	wait_for 10 '[ "$(f "$b1" state)" = queued ]'
	run -0 tool "$UA" promote "$a1"
	wait_for 10 '[ "$(f "$a1" priority)" = 4 ]'     # above a2 (3), not b1 (8)
	[ "$(f "$b1" priority)" = 8 ]
	run -0 tool "$UA" promote "$a1"                 # the highest of hers already
	wait_for 10 '[ -z "$(ls -A "$S/ctl")" ]'
	[ "$(f "$a1" priority)" = 4 ]
	run -0 tool "$UC" promote "$a2"                 # carol's: above everything
	wait_for 10 '[ "$(f "$a2" priority)" = 9 ]'
	run -0 tool "$UA" promote "$a1"                 # above a2 (9): 10, her max_priority
	wait_for 10 '[ "$(f "$a1" priority)" = 10 ]'
	run -0 tool "$UC" promote "$a2"
	wait_for 10 '[ "$(f "$a2" priority)" = 11 ]'
	run -0 tool "$UA" promote "$a1"                 # capped: stays 10
	wait_for 10 '[ -z "$(ls -A "$S/ctl")" ]'
	[ "$(f "$a1" priority)" = 10 ]
	[ -z "$(ls -A "$S/ctl")" ]
	run --separate-stderr tool "$UA" promote --priority 11 "$a1"
	failed 77 cardbaton-promote
	[ "$stderr" = "cardbaton-promote: --priority 11: above $UA's max_priority 10 (only an admin may)" ]
	run -0 tool "$UA" promote --priority 2 "$a1"
	wait_for 10 '[ "$(f "$a1" priority)" = 2 ]'
	run -0 tool "$UC" promote --priority 50 "$b1"
	wait_for 10 '[ "$(f "$b1" priority)" = 50 ]'
	[ "$(refused_total)" = 0 ]
}

@test "drain and undrain: a member's 77 and nothing written; an admin's is a ctl/ request the daemon applies" {
	run --separate-stderr tool "$UB" drain local
	failed 77 cardbaton-drain
	[ "$stderr" = "cardbaton-drain: only an admin may drain node local" ]
	[ -z "$(ls -A "$S/ctl")$(ls -A "$S/drain")" ]
	# Daemon down: the request waits in ctl/; drain/ is the daemon's.
	run -0 tool "$UC" drain --checkpoint local
	[ -z "$(ls -A "$S/drain")" ]
	n=$(ls "$S/ctl")
	[[ $n == 0.drain.* ]]
	[ "$(stat -c %U "$S/ctl/$n")" = "$UC" ]
	[ "$(printf 'node local\ncheckpoint\n')" = "$(cat "$S/ctl/$n")" ]
	daemon
	wait_for 10 '[ -f "$S/drain/local" ]'
	[ "$(cat "$S/drain/local")" = "drain checkpoint" ]
	[ "$(stat -c %U "$S/drain/local")" = root ]
	grep -q 'node local drained (its resumable jobs checkpoint)' "$T/daemon.log"
	wait_for 10 '[ -z "$(ls -A "$S/ctl")" ]'
	tool "$UA" status | grep -qx 'node local drained: nothing new is placed there'
	j=$(tool "$UA" submit --gpu-count 0 -- true)
	settle 0.5
	[ "$(f "$j" state)" = queued ]
	run --separate-stderr tool "$UA" undrain local
	failed 77 cardbaton-undrain
	[ "$stderr" = "cardbaton-undrain: only an admin may undrain node local" ]
	[ -f "$S/drain/local" ] && [ -z "$(ls -A "$S/ctl")" ]
	run -0 tool "$UC" undrain local
	wait_for 10 '[ ! -e "$S/drain/local" ]'
	wait_for 10 '[ "$(f "$j" state)" = succeeded ]'
	grep -q 'node local undrained' "$T/daemon.log"
	[ "$(refused_total)" = 0 ]
}
