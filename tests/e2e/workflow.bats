#!/usr/bin/env bats
# workflow.bats - jobs that wait for something other than cards:
# dependencies (--after, --after-any), hold and release, delayed start
# (--begin).  Real daemon, real worker, real inotify on the local node
# (four simulated cards); the rules themselves are C unit tests
# (tests/unit/test_plan.c, test_table.c).

load ../lib/common

bats_require_minimum_version 1.5.0

setup() {
	setup_common
	C=$T/config.yaml
}

teardown() {
	teardown_common
}

sub() { cardbaton-submit --config "$C" "$@"; }
st() { cardbaton-status --config "$C" "$@"; }
state() { st --json "$1" | json 'd["jobs"][0]["state"]'; }
reason() { st --json "$1" | json 'd["jobs"][0]["reason"]'; }
final() {
	case "$(state "$1")" in succeeded|failed|cancelled|lost) return 0 ;; esac
	return 1
}

@test "a chain train -> eval runs in order; status shows after and after_any" {
	start_daemon
	train=$(sub -- sh -c 'until [ -e "$0" ]; do sleep 0.02; done; echo train >> "$1"' "$T/go" "$T/order")
	eval=$(sub --after "$train" -- sh -c 'echo eval >> "$0"' "$T/order")
	any=$(sub --after-any "$train,$eval" -- true)
	wait_for 10 '[ "$(reason "$eval")" = "waiting for job $train" ]'
	[ "$(state "$eval")" = queued ]
	st --json "$eval" | json 'd["jobs"][0]["after"]' | grep -qx "\[$train\]"
	st --json "$eval" | json 'd["jobs"][0]["after_any"]' | grep -qx '\[\]'
	st --json "$any" | json 'd["jobs"][0]["after_any"]' | grep -qx "\[$train, $eval\]"
	touch "$T/go"
	wait_for 10 final "$any"
	[ "$(state "$eval")" = succeeded ]
	[ "$(state "$any")" = succeeded ]
	[ "$(cat "$T/order")" = "$(printf 'train\neval')" ]
}

@test "a failed job cancels its dependants and theirs, naming it; --after-any runs after a failure" {
	start_daemon
	train=$(sub -- sh -c 'until [ -e "$0" ]; do sleep 0.02; done; exit 3' "$T/go")
	eval=$(sub --after "$train" -- touch "$T/eval.ran")
	# (Higher priority: looked at before the job it follows.)
	report=$(sub --priority 5 --after "$eval" -- touch "$T/report.ran")
	cleanup=$(sub --after-any "$train" -- touch "$T/cleanup.ran")
	wait_for 10 '[ "$(reason "$report")" = "waiting for job $eval" ]'
	touch "$T/go"
	wait_for 10 final "$report"
	wait_for 10 final "$cleanup"
	[ "$(state "$train")" = failed ]
	[ "$(state "$eval")" = cancelled ]
	[ "$(reason "$eval")" = "dependency $train ended failed" ]
	[ "$(state "$report")" = cancelled ]
	[ "$(reason "$report")" = "dependency $eval ended cancelled" ]
	[ "$(state "$cleanup")" = succeeded ]
	[ ! -e "$T/eval.ran" ] && [ ! -e "$T/report.ran" ] && [ -e "$T/cleanup.ran" ]
	# The same chain with nothing else going on: the cancel of one
	# dependant is what brings the next look at the other.
	x=$(sub -- sh -c 'until [ -e "$0" ]; do sleep 0.02; done; exit 1' "$T/go2")
	y=$(sub --after "$x" -- true)
	z=$(sub --priority 5 --after "$y" -- true)
	wait_for 10 '[ "$(reason "$z")" = "waiting for job $y" ]'
	touch "$T/go2"
	wait_for 10 final "$z"
	[ "$(reason "$z")" = "dependency $y ended cancelled" ]
}

@test "a dependant of a paused job whose record is then removed by hand is cancelled at the next end, naming it" {
	# Paused, the job is known by its record only: its dependants are
	# looked at again at every end, whether they were looked at while it
	# ran or after it was paused.
	cat > "$T/pz.sh" <<-'SH'
		until [ -e "$SSHGPU_PAUSE_FILE" ]; do sleep 0.02; done
		echo 1 > "$1"
		printf '{"checkpoint": "%s"}\n' "$1" > "$SSHGPU_CHECKPOINT_READY.tmp"
		mv "$SSHGPU_CHECKPOINT_READY.tmp" "$SSHGPU_CHECKPOINT_READY"
		exit 75
	SH
	start_daemon
	p=$(sub --resume-command true -- sh "$T/pz.sh" "$T/pz.ck")
	before=$(sub --after "$p" -- touch "$T/before.ran")
	wait_for 10 '[ "$(state "$p")" = running ]'
	wait_for 10 '[ "$(reason "$before")" = "waiting for job $p" ]'
	cardbaton-pause --config "$C" "$p"
	wait_for 10 '[ "$(state "$p")" = paused ]'
	after=$(sub --after-any "$p" -- touch "$T/after.ran")
	wait_for 10 '[ "$(reason "$after")" = "waiting for job $p" ]'
	rm "$T/spool/paused/$(printf %010d "$p").job"
	other=$(sub -- true)
	wait_for 10 final "$before"
	[ "$(state "$before")" = cancelled ]
	[ "$(reason "$before")" = "dependency $p ended without a record" ]
	# after_any: a job with no record counts as ended.
	wait_for 10 final "$after"
	[ "$(state "$after")" = succeeded ]
	[ ! -e "$T/before.ran" ] && [ -e "$T/after.ran" ]
	wait_for 10 final "$other"
}

@test "a job being accepted while a submit looks for it is found: 200 submits each --after the one before, the daemon accepting meanwhile" {
	start_daemon
	prev=$(sub --gpu-count 0 -- true)
	for i in $(seq 1 200); do
		prev=$(sub --gpu-count 0 --after "$prev" -- true)
	done
	wait_for 60 final "$prev"
	[ "$(state "$prev")" = succeeded ]
}

@test "a dependency on a job that does not exist: submit exits 66 naming it; a dropped file is rejected" {
	run --separate-stderr sub --after 41 -- true
	failed 66 cardbaton-submit
	[[ $stderr == *"no such job 41"* ]]
	run --separate-stderr sub --after-any 7 -- true
	failed 66 cardbaton-submit
	run --separate-stderr sub --after 1,x -- true
	failed 64 cardbaton-submit
	run --separate-stderr sub --after 2,2 -- true
	failed 64 cardbaton-submit
	[ -z "$(ls "$T/spool/new")" ]
	# Job 1 is rejected (it has no record); job 2 depends on it, job 3
	# on a job not submitted yet.
	printf 'command: [true]\nbogus: 1\n' > "$T/spool/new/a.job"
	start_daemon
	wait_for 10 '[ -e "$T/spool/rejected/0000000001.reason" ]'
	printf 'command: [true]\nafter: [1]\n' > "$T/spool/new/b.job"
	wait_for 10 '[ -e "$T/spool/rejected/0000000002.reason" ]'
	grep -q 'reason: after: no such job 1$' "$T/spool/rejected/0000000002.reason"
	printf 'command: [true]\nafter_any: [41]\n' > "$T/spool/new/c.job"
	wait_for 10 '[ -e "$T/spool/rejected/0000000003.reason" ]'
	grep -q 'reason: after_any: job 41 is not an earlier job$' "$T/spool/rejected/0000000003.reason"
}

@test "a held job is never placed until released; hold is refused for a job that is not queued" {
	start_daemon
	id=$(sub --hold -- touch "$T/held.ran")
	wait_for 10 '[ "$(reason "$id")" = held ]'
	# Another job after it runs: the held job holds up nothing.
	other=$(sub -- true)
	wait_for 10 final "$other"
	[ "$(state "$id")" = queued ]
	[ ! -e "$T/held.ran" ]
	# `wait` without IDs leaves it aside; named, it is waited for.
	cardbaton-wait --config "$C" --timeout "$(scaled 10)"
	run cardbaton-wait --config "$C" --timeout 1 "$id"
	[ "$status" -eq 75 ]
	# It stays held across a restart.
	stop_daemon
	start_daemon
	other=$(sub -- true)
	wait_for 10 final "$other"
	[ "$(state "$id")" = queued ]
	cardbaton-release --config "$C" "$id"
	wait_for 10 final "$id"
	[ "$(state "$id")" = succeeded ]
	[ -e "$T/held.ran" ]
	# hold of a queued job; of a finished one: exit 1; unknown: 66.
	blocker=$(sub --gpu-count 4 -- sh -c 'until [ -e "$0" ]; do sleep 0.02; done' "$T/go")
	wait_for 10 '[ "$(state "$blocker")" = running ]'
	late=$(sub -- touch "$T/late.ran")
	cardbaton-hold --config "$C" "$late"
	wait_for 10 '[ "$(reason "$late")" = held ]'
	run --separate-stderr cardbaton-hold --config "$C" "$id"
	failed 1 cardbaton-hold
	[[ $stderr == *"job $id is succeeded, not queued"* ]]
	run --separate-stderr cardbaton-hold --config "$C" "$blocker"
	failed 1 cardbaton-hold
	run --separate-stderr cardbaton-hold --config "$C" 999
	failed 66 cardbaton-hold
	run --separate-stderr cardbaton-hold --config "$C"
	failed 64 cardbaton-hold
	touch "$T/go"
	wait_for 10 final "$blocker"
	other=$(sub -- true)
	wait_for 10 final "$other"
	[ "$(state "$late")" = queued ]
	[ ! -e "$T/late.ran" ]
	cardbaton release --config "$C" "$late"
	wait_for 10 final "$late"
	[ -e "$T/late.ran" ]
}

@test "--begin +3s starts no sooner than 3 s after submit; a bad --begin is a usage error" {
	start_daemon
	t0=$(date +%s)
	id=$(sub --begin +3s -- sh -c 'date +%s > "$0"' "$T/started")
	# Until the daemon has taken it the reason is "waiting for the
	# daemon to accept it"; a begin time 3 s out leaves it ample time.
	wait_for 3 '[[ "$(reason "$id")" == "begins at "* ]]'
	[ "$(state "$id")" = queued ]
	wait_for 10 final "$id"
	[ "$(state "$id")" = succeeded ]
	[ "$(cat "$T/started")" -ge $((t0 + 3)) ]
	# An absolute time in the past: at once.
	id=$(sub --begin 2020-01-01T00:00:00Z -- true)
	wait_for 10 final "$id"
	for bad in tomorrow +3x + +-1 2026-13-01T00:00:00Z 2026-02-30T00:00:00Z '2026-12-01 00:00:00'; do
		run --separate-stderr sub --begin "$bad" -- true
		failed 64 cardbaton-submit
	done
}

# begin_check FILE: each line "ID T0 I" (T0 the ms just before job ID's
# submit, I its number): its attempt started (the node's ms in its
# record) at least 2000 ms after T0, and so did the job by its own clock
# ($T/started.I); its record's begin_ms is at least T0 + 2000, and
# neither start is before it.  Fails naming the first job that broke it.
begin_check() {
	python3 - "$1" "$T" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    jid, t0, i = line.split()
    t0 = int(t0)
    r = json.load(open("%s/spool/done/%010d.job" % (sys.argv[2], int(jid))))
    a = r["attempts"][-1]
    own = int(open("%s/started.%s" % (sys.argv[2], i)).read())
    assert r["state"] == "succeeded", (jid, r["state"])
    assert a["started_ms"] >= t0 + 2000, (jid, "started after", a["started_ms"] - t0)
    assert own >= t0 + 2000, (jid, "its clock after", own - t0)
    assert r["begin_ms"] >= t0 + 2000, (jid, "begin after", r["begin_ms"] - t0)
    assert a["started_ms"] >= r["begin_ms"] and own >= r["begin_ms"], (jid, "before its begin")
PY
}

@test "--begin +2s: none of 20 jobs starts before 2.000 s after its submit, on the records' ms" {
	start_daemon
	local i id t subs
	for i in $(seq 20); do
		t=${EPOCHREALTIME/[.,]/}
		id=$(sub --gpu-count 0 --begin +2s -- sh -c 'date +%s%3N > "$0"' "$T/started.$i")
		printf '%s %s %s\n' "$id" "$((t / 1000))" "$i" >> "$T/submits"
	done
	mapfile -t subs < "$T/submits"
	for i in "${subs[@]}"; do
		wait_for 30 final "${i%% *}"
	done
	begin_check "$T/submits"
}

@test "status --json begin: RFC 3339 to the ms (a finer fraction up, the offset applied), null when none; the reason says begins at that TIME" {
	start_daemon
	a=$(sub --begin 2999-01-01T01:00:00.1234+01:00 -- true)
	b=$(sub --begin 2999-01-01T00:00:07Z -- true)
	c=$(sub -- true)
	d=$(sub --begin 2020-01-01T00:00:00.5Z -- true)
	wait_for 10 '[ "$(reason "$a")" = "begins at 2999-01-01T00:00:00.124Z" ]'
	[ "$(field "$a" begin)" = 2999-01-01T00:00:00.124Z ]
	[ "$(reason "$b")" = "begins at 2999-01-01T00:00:07Z" ]
	[ "$(field "$b" begin)" = 2999-01-01T00:00:07Z ]
	wait_for 10 final "$c"
	[ "$(field "$c" begin)" = None ]
	wait_for 10 final "$d"
	[ "$(field "$d" begin)" = 2020-01-01T00:00:00.500Z ]
	# The record: the same, and its ms beside it.
	r=$(echo "$T"/spool/queued/*-$(printf %010d "$a").job)
	[ "$(json '[d["begin"], d["begin_ms"], d["job"]["begin"]]' < "$r")" = \
	  '["2999-01-01T00:00:00.124Z", 32472144000124, "2999-01-01T00:00:00.124Z"]' ]
}

@test "dependencies, holds and begin times survive a restart; a dependant of a job cancelled while the daemon was down is cancelled" {
	start_daemon
	a=$(sub --gpu-count 0 --hold -- true)
	b=$(sub --after "$a" -- true)
	c=$(sub --begin +1d -- true)
	wait_for 10 '[ "$(reason "$b")" = "waiting for job $a" ]'
	wait_for 10 '[[ "$(reason "$c")" == "begins at "* ]]'
	begin=$(field "$c" begin)
	stop_daemon
	cardbaton-cancel --config "$C" "$a"
	start_daemon
	wait_for 10 final "$b"
	[ "$(state "$a")" = cancelled ]
	[ "$(state "$b")" = cancelled ]
	[ "$(reason "$b")" = "dependency $a ended cancelled" ]
	[ "$(state "$c")" = queued ]
	[ "$(reason "$c")" = "begins at $begin" ]
	[ "$(field "$c" begin)" = "$begin" ]
}
