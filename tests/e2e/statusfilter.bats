#!/usr/bin/env bats
# statusfilter.bats - status's filters (issue 17, part 5): --state,
# --node, --name, --since, alone and together, in the table and in
# --json (whose shape does not change), over the queue, the index and
# done/; bad values are one line and 64 (65 for an unknown node).

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
