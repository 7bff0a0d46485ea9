#!/usr/bin/env bats
# statusfilter.bats - status's filters (issue 17, part 5): --state,
# --node, --name, --since, alone and together, in the table and in
# --json (whose shape does not change), over the queue, the index and
# done/; bad values are one line and 64 (65 for an unknown node).  A
# lab's spool (issue 33): the OWNER column, --user and --mine, from the
# records and from the index.

load ../lib/common

bats_require_minimum_version 1.5.0
test_timeout 60

setup() {
	setup_common
	C=$T/config.yaml
	printf 'spool: ./spool\nnodes:\n  local:\n    local: true\n  other:\n    local: true\n    gpus: []\n' > "$C"
}

teardown() {
	touch "$T/go"
	teardown_common
}

# ids ARGS...: the IDs status --json shows with ARGS, space-separated.
ids() { st --json "$@" | json '" ".join(j["id"] for j in d["jobs"])'; }

@test "status --state, --node, --name, --since select jobs; --json keeps its shape" {
	start_daemon
	ok=$(sub --name train-a --gpu-count 1 -- true)
	bad=$(sub --name eval-b --gpu-count 1 -- false)
	wait_for 10 'final "$ok" && final "$bad"'
	run_=$(sub --name train-run --gpu-count 1 -- sh -c "while [ ! -e '$T/go' ]; do sleep 0.05; done")
	held=$(sub --name train-held --hold --gpu-count 1 -- true)
	anon=$(sub --hold --gpu-count 0 -- true)
	wait_for 10 '[ "$(job_state "$run_")" = running ]'

	[ "$(ids --state queued)" = "$held $anon" ]
	[ "$(ids --state running)" = "$run_" ]
	# A finished state reads done/ without --all.
	[ "$(ids --state succeeded,failed)" = "$ok $bad" ]
	[ "$(ids --state failed,queued)" = "$held $anon $bad" ]
	[ "$(ids --name 'train-*')" = "$held $run_" ]
	[ "$(ids --all --name 'train-*')" = "$held $run_ $ok" ]
	[ "$(ids --all --name '*-b')" = "$bad" ]
	[ "$(ids --all --name '*')" = "$held $run_ $ok $bad" ]     # the unnamed one never matches
	[ "$(ids --all --node local)" = "$run_ $ok $bad" ]
	[ "$(ids --node other)" = "" ]
	# --since: what had not ended before WHEN (so done/ is read).
	[ "$(ids --since 1h)" = "$held $anon $run_ $ok $bad" ]
	[ "$(ids --since 2099-01-01)" = "$held $anon $run_" ]
	[ "$(ids --since 2099-01-01T00:00:00Z --state running)" = "$run_" ]
	# Together: every filter must pass; named jobs are filtered too.
	[ "$(ids --state succeeded --name 'train-*' --node local)" = "$ok" ]
	[ "$(ids --state running "$ok" "$run_")" = "$run_" ]
	# The shape: jobs and nodes; --node keeps that node alone.
	[ "$(st --json --node local | json 'sorted(d.keys())')" = '["jobs", "nodes"]' ]
	[ "$(st --json --node local | json '[n["name"] for n in d["nodes"]]')" = '["local"]' ]
	[ "$(st --json | json '"local" in [n["name"] for n in d["nodes"]]')" = True ]
	# The table shows the same rows.
	run st --state succeeded,failed
	[ "$status" -eq 0 ]
	[ "${#lines[@]}" -eq 3 ]
	[[ ${lines[1]} == *succeeded*train-a* ]]
	[[ ${lines[2]} == *failed*eval-b* ]]
}

@test "status filters: a bad value is one line naming it (64; an unknown node 65), before any output" {
	run --separate-stderr st --state running,bogus
	failed 64 cardbaton-status
	[[ $stderr == *"--state: 'bogus' is not a state"* ]]
	[ -z "$output" ]
	run --separate-stderr st --state ,
	failed 64 cardbaton-status
	run --separate-stderr st --since yesterday
	failed 64 cardbaton-status
	[[ $stderr == *"--since: 'yesterday' is not a time"* ]]
	for w in 0d 7D 1.5h 2026-13-01 ''; do
		run --separate-stderr st --since "$w"
		failed 64 cardbaton-status
	done
	run --separate-stderr st --node nosuch
	failed 65 cardbaton-status
	[[ $stderr == *"unknown node 'nosuch'"* ]]
	run --separate-stderr st --name
	failed 64 cardbaton-status
}

# set_owner ID NAME UID: job ID's record (wherever it is) owned by NAME,
# rewritten as a writer must (tmp/ and a rename), with the daemon down.
set_owner() {
	python3 - "$T/spool" "$1" "$2" "$3" <<-'EOF'
	import json, os, sys
	sp, jid, name, uid = sys.argv[1:]
	for d in ("queued", "running", "paused", "done"):
	    for n in os.listdir(sp + "/" + d):
	        if n.endswith("%010d.job" % int(jid)):
	            r = json.load(open("%s/%s/%s" % (sp, d, n)))
	            r["owner"], r["owner_uid"] = name, int(uid)
	            r["rev"] += 1
	            tmp = sp + "/tmp/owner"
	            with open(tmp, "w") as f:
	                json.dump(r, f, indent="\t")
	            os.chmod(tmp, os.stat("%s/%s/%s" % (sp, d, n)).st_mode & 0o7777)
	            os.rename(tmp, "%s/%s/%s" % (sp, d, n))
	EOF
}

# index_current: queued.idx was made for queued/ as it is now.
index_current() {
	python3 - "$T/spool" <<-'EOF'
	import os, sys
	sp = sys.argv[1]
	q = open(sp + "/queued.idx", "rb").read().split(b"\n")[1].split()
	st = os.stat(sp + "/queued")
	sys.exit(0 if [int(x) for x in q[1:]] == [st.st_dev, st.st_ino, st.st_ctime_ns, st.st_mtime_ns] else 1)
	EOF
}

@test "a lab's spool: OWNER after STATE; --user and --mine select by owner, from the records and from the index" {
	# root's own group and root an admin: one account, the others'
	# owners written into their records.
	printf 'spool: ./spool\nnodes:\n  local:\n    local: true\nlab:\n  group: root\n  admins: [root]\n' > "$C"
	start_daemon
	mine=$(sub --hold --name mine -- true)
	a=$(sub --hold --name a -- true)
	b=$(sub --hold --name b --gpu-count 0 -- true)
	wait_for 10 '[ "$(field "$b" reason)" = held ]'
	stop_daemon
	[ "$(field "$mine" owner)" = "$(id -un)" ]
	set_owner "$a" alice 4001
	set_owner "$b" bob 4002
	# From the records (the index is stale), then from the index.
	for from in records index; do
		if [ $from = index ]; then
			start_daemon
			wait_for 30 index_current
			stop_daemon
			grep -q ' queued alice ' "$T/spool/queued.idx"
		else
			not index_current
		fi
		run st
		[ "$status" -eq 0 ]
		[[ ${lines[0]} == "ID  STATE   OWNER  PRIO  NODE"* ]]
		[[ ${lines[1]} =~ ^\ *$mine\ +queued\ +root\ +0\  ]]
		[[ ${lines[2]} =~ ^\ *$a\ +queued\ +alice\ +0\  ]]
		[[ ${lines[3]} =~ ^\ *$b\ +queued\ +bob\ +0\  ]]
		[ "$(ids --user alice)" = "$a" ]
		[ "$(ids --user bob,alice)" = "$a $b" ]
		[ "$(ids --user carol)" = "" ]
		[ "$(ids --mine)" = "$mine" ]
		[ "$(ids --user 0)" = "$mine" ]         # a number: that account's name too
		[ "$(ids --user 4001)" = "" ]           # no account 4001: owners are names
		# Every filter must pass.
		[ "$(ids --mine --user alice)" = "" ]
		[ "$(ids --user alice,bob --name b)" = "$b" ]
		[ "$(ids --user alice --state running)" = "" ]
		[ "$(ids --user alice "$a" "$b")" = "$a" ]
		[ "$(st --json --user bob | json 'd["jobs"][0]["owner"]')" = bob ]
		run st --user alice
		[ "${#lines[@]}" -eq 2 ]
		[[ ${lines[1]} == *alice* ]]
	done
	# --user needs names; no list is empty.
	run --separate-stderr st --user ''
	failed 64 cardbaton-status
	run --separate-stderr st --user alice,,bob
	failed 64 cardbaton-status
	# Not a lab's spool: no OWNER column, the filters the same.
	printf 'spool: ./spool\nnodes:\n  local:\n    local: true\n' > "$T/plain.yaml"
	run cardbaton-status --config "$T/plain.yaml"
	[[ ${lines[0]} == "ID  STATE   PRIO  NODE"* ]]
	[ "$(cardbaton-status --config "$T/plain.yaml" --json --mine | json '" ".join(j["id"] for j in d["jobs"])')" = "$mine" ]
}
