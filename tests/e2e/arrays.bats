#!/usr/bin/env bats
# arrays.bats - many jobs from one submit: arrays (--array SPEC, %K),
# parameter sweeps (--param, --max-running), all or nothing.  Real
# daemon, real worker, real inotify on the local node; the rules are
# C unit tests (tests/unit/test_expand.c, test_plan.c).

load ../lib/common

bats_require_minimum_version 1.5.0

setup() {
	setup_common
	C=$T/config.yaml
}

teardown() {
	teardown_common
}

field() { st --json "$1" | json "d['jobs'][0]$2"; }
njobs() { st --all --json | json 'len(d["jobs"])'; }
count_state() { st --all --json | json "len([j for j in d['jobs'] if j['state'] == '$1'])"; }

@test "--array 0-9%2 runs 10 jobs, never more than 2 at a time (across a daemon restart), each with its own index" {
	mkdir "$T/live" "$T/out"
	# Each job: marks itself live, notes how many are, waits for go,
	# writes what it was told, leaves.
	run -0 sub --array 0-9%2 --gpu-count 0 --name 'part-{index}' -- sh -c '
		touch "$0/live/$CARDBATON_ARRAY_INDEX"; ls "$0/live" | wc -l >> "$0/counts"
		until [ -e "$0/go" ]; do sleep 0.02; done
		echo "$CARDBATON_ARRAY_INDEX $CARDBATON_ARRAY_ID $1" > "$0/out/$CARDBATON_ARRAY_INDEX"
		rm "$0/live/$CARDBATON_ARRAY_INDEX"' "$T" '{index}'
	ids=($output)
	[ "${#ids[@]}" -eq 10 ]
	first=${ids[0]}
	for k in $(seq 0 9); do [ "${ids[$k]}" -eq $((first + k)) ]; done
	start_daemon
	wait_for 10 '[ "$(count_state running)" -eq 2 ]'
	[ "$(count_state queued)" -eq 8 ]
	q=$(st --json | json '[j["id"] for j in d["jobs"] if j["state"] == "queued"][0]')
	[ "$(field "$q" '["reason"]')" = "waiting to be scheduled (at most 2 of array $first at once)" ]
	# The limit is the spool's, not the daemon's memory.
	kill -9 "$DAEMON_PID"
	wait "$DAEMON_PID" || true
	start_daemon
	settle 0.5
	[ "$(count_state running)" -eq 2 ]
	touch "$T/go"
	wait_for 30 '[ "$(count_state succeeded)" -eq 10 ]'
	[ "$(sort -n "$T/counts" | tail -1)" -le 2 ]
	for k in $(seq 0 9); do
		[ "$(cat "$T/out/$k")" = "$k $first $k" ]
		[ "$(field $((first + k)) '["array"]')" = "{\"id\": $first, \"index\": $k}" ]
		[ "$(field $((first + k)) '["name"]')" = "part-$k" ]
	done
}

@test "a --param sweep queues one job per combination, first key slowest, with {KEY} and CARDBATON_PARAM_KEY" {
	mkdir "$T/out"
	run -0 sub --hold --param lr=0.1,0.01 --param seed=1,2,3 --max-running 4 \
		--name 'lr{lr}-s{seed}' --cwd "$T/out" --resume-command 'resume {lr} {seed}' \
		-- sh -c 'echo "$CARDBATON_PARAM_lr $CARDBATON_PARAM_seed $CARDBATON_ARRAY_INDEX" > "$0"' '{lr}-{seed}'
	ids=($output)
	[ "${#ids[@]}" -eq 6 ]
	want=(0.1-1 0.1-2 0.1-3 0.01-1 0.01-2 0.01-3)
	for k in 0 1 2 3 4 5; do
		id=${ids[$k]}
		[ "$(field "$id" '["command"][3]')" = "${want[$k]}" ]
		[ "$(field "$id" '["name"]')" = "lr${want[$k]%-*}-s${want[$k]#*-}" ]
		[ "$(field "$id" '["array"]["index"]')" = "$k" ]
	done
	start_daemon
	wait_for 10 '[ "$(field "${ids[5]}" "[\"state\"]")" = queued ]'
	[ "$(field "${ids[5]}" '["reason"]')" = held ]
	cardbaton-release --config "$C" "${ids[@]}"
	wait_for 30 '[ "$(count_state succeeded)" -eq 6 ]'
	for k in 0 1 2 3 4 5; do
		w=${want[$k]}
		[ "$(cat "$T/out/$w")" = "${w%-*} ${w#*-} $k" ]
	done
	python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["job"]["resume_command"] == "resume 0.01 3"' \
		spool/done/"$(printf %010d "${ids[5]}")".job
}

@test "more than 10,000 jobs from one submit: exit 64 and nothing queued; bad specs: exit 64" {
	sub --hold -- true
	run --separate-stderr sub --array 0-10000 -- true
	failed 64 cardbaton-submit
	[[ $stderr == *"more than 10000 jobs"* ]]
	# 73 x 137 = 10,001.
	run --separate-stderr sub --param a=$(seq -s, 1 73) --param b=$(seq -s, 1 137) -- true
	failed 64 cardbaton-submit
	[[ $stderr == *"more than 10000 jobs"* ]]
	for spec in '' 3-1 1-5:0 'a-b' '1,1' '0-3%0' '0-3%' '1-2-3' '-1' '0-99999999'; do
		run --separate-stderr sub --array "$spec" -- true
		failed 64 cardbaton-submit
	done
	for p in lr 'lr=' 'lr=1,,2' 'lr=1,1' '1x=2' 'index=1'; do
		run --separate-stderr sub --param "$p" -- true
		failed 64 cardbaton-submit
	done
	run --separate-stderr sub --array 0-3 --param a=1 -- true
	failed 64 cardbaton-submit
	run --separate-stderr sub --max-running 2 -- true
	failed 64 cardbaton-submit
	run --separate-stderr sub --array 0-3%2 --max-running 2 -- true
	failed 64 cardbaton-submit
	run --separate-stderr sub --param "x=$(head -c 300 /dev/zero | tr '\0' a)" --name 'n-{x}' -- true
	failed 64 cardbaton-submit
	[[ $stderr == *"name: longer than 256 bytes"* ]]
	[ "$(ls spool/new)" = 0000000001.job ] || [ "$(ls spool/new)" = 100000000-0000000001.job ]
	[ -z "$(ls spool/tmp)" ]
	[ "$(njobs)" -eq 1 ]
}

@test "a kill -9 of submit in the middle of a 1,000-job sweep leaves all of it or none" {
	# The spool made first (a kill while it is made leaves it half made).
	sub --hold -- true
	total=1
	for delay in 0 0.005 0.01 0.02 0.04 0.08 0.15 0.3; do
		cardbaton-submit --config "$C" --hold --param a=$(seq -s, 1 10) --param b=$(seq -s, 1 100) \
			-- echo '{a}' '{b}' > "$T/ids" &
		pid=$!
		sleep "$delay"
		kill -9 "$pid" 2>/dev/null || true
		wait "$pid" || true
		n=$(njobs)
		[ $((n - total)) -eq 0 ] || [ $((n - total)) -eq 1000 ]
		total=$n
	done
	# The daemon accepts what was queued, every member once.
	start_daemon
	wait_for 30 '[ -z "$(ls spool/new)$(ls spool/incoming)" ]'
	[ "$(count_state queued)" -eq "$total" ]
	[ "$(ls spool/queued | wc -l)" -eq "$total" ]
	echo "# $(( (total - 1) / 1000 )) of 8 sweeps queued before the kill" >&3
}

@test "a file dropped into new/ with array: or params: becomes its jobs; a block's name that lies is rejected" {
	start_daemon
	printf 'command: [sh, -c, "echo {index} > %s/a-{index}"]\narray: "3,5,7"\ngpu_count: 0\n' "$T" > spool/tmp/x
	mv spool/tmp/x spool/new/mine.job
	printf '{"command": ["sh", "-c", "echo {k} > %s/p-{k}"], "params": {"k": ["x", "y"]}, "gpu_count": 0}' "$T" > spool/tmp/y
	mv spool/tmp/y spool/new/sweep.job
	wait_for 10 '[ -e "$T/a-7" ] && [ -e "$T/p-y" ]'
	[ "$(cat "$T/a-3") $(cat "$T/a-5") $(cat "$T/p-x")" = "3 5 x" ]
	wait_for 10 '[ "$(count_state succeeded)" -eq 5 ]'
	# Their IDs are consecutive, in index order.
	st --all --json | json '[(j["array"]["id"], j["array"]["index"], int(j["id"])) for j in d["jobs"]]' > "$T/arr"
	python3 - "$T/arr" <<-'EOF'
		import ast, sys
		groups = {}
		for first, idx, jid in ast.literal_eval(open(sys.argv[1]).read()):
		    groups.setdefault(first, []).append((jid, idx))
		assert sorted(sorted(i for _, i in m) for m in groups.values()) == [[0, 1], [3, 5, 7]], groups
		for first, m in groups.items():
		    m.sort()
		    assert [j for j, _ in m] == list(range(first, first + len(m))), groups
		    assert [i for _, i in m] == sorted(i for _, i in m), groups
	EOF
	# A block's name says 3 jobs; the file makes 2.
	printf 'command: [true]\narray: "0-1"\n' > spool/tmp/z
	mv spool/tmp/z spool/new/100000000-0000000100+00003.job
	wait_for 10 '[ -n "$(ls spool/rejected/*.reason 2>/dev/null)" ]'
	grep -q 'another number of jobs' spool/rejected/*.reason
	# A block's name for a file that is neither.
	printf 'command: [true]\n' > spool/tmp/w
	mv spool/tmp/w spool/new/100000000-0000000200+00001.job
	wait_for 10 '[ "$(ls spool/rejected/*.reason | wc -l)" -eq 2 ]'
	grep -q 'neither array nor params' spool/rejected/*.reason
}

@test "a daemon killed when only part of a block's records are in place queues the rest once restarted, each member once" {
	grep -q CARDBATON_CRASH_AT "$CB_BUILD/cardbaton-spoold" ||
		skip "not a crash-point build (make test's build-san is one)"
	sub --hold -- true
	CARDBATON_CRASH_AT="batch: renamed one" CARDBATON_CRASH_ONCE=$T/once \
		cardbaton-spoold --config "$C" >> "$T/daemon.log" 2>&1 &
	pid=$!
	wait_for 10 'grep -q serving "$T/daemon.log"'
	run -0 sub --hold --array 0-9 -- true
	ids=($output)
	wait "$pid" || true
	# Killed after the first of the batch: the rest waits in incoming/.
	[ -e "$T/once" ]
	[ -n "$(ls spool/incoming)" ]
	[ "$(ls spool/queued | wc -l)" -eq 2 ]
	start_daemon
	wait_for 10 '[ -z "$(ls spool/incoming)$(ls spool/new)" ]'
	[ "$(ls spool/queued | wc -l)" -eq 11 ]
	for id in "${ids[@]}"; do [ "$(field "$id" '["state"]')" = queued ]; done
	[ "$(njobs)" -eq 11 ]
}
