#!/usr/bin/env bats
# metrics.bats - SPOOL/metrics.prom and `cardbaton metrics` (issue 17,
# part 2), checked by Prometheus's own promtool (Debian's prometheus):
# while jobs run, after a handoff, after a restart and a kill -9; the
# counters never go down across a restart; the card snapshot of
# nodes/NAME.json that metrics and top read.  What each transition
# counts, and the handoff rule, are unit tests (tests/unit/test_metrics.c).

load ../lib/common

bats_require_minimum_version 1.5.0
test_timeout 60

setup() {
	setup_common
	C=$T/config.yaml
	command -v promtool >/dev/null || { echo "promtool missing: tests/install-deps installs prometheus" >&2; return 1; }
}

teardown() {
	teardown_common
}

# check: the file as a scraper reads it passes promtool's lint.
check() {
	run --separate-stderr sh -c "cardbaton-metrics --config '$C' | promtool check metrics"
	[ "$status" -eq 0 ] || { echo "promtool: $output $stderr" >&2; return 1; }
}
# val SERIES: its value in metrics.prom, or nothing.
val() { awk -v k="$1" '$1 == k { print $2 }' "$T/spool/metrics.prom"; }
gate() { sub --gpu-count "${2:-1}" -- sh -c "while [ ! -e '$T/$1' ]; do sleep 0.05; done"; }

@test "metrics.prom passes promtool while jobs run and after a handoff; the figures are the daemon's" {
	start_daemon
	a=$(gate a 4)
	b=$(gate b 4)           # waits for a's cards
	wait_for 10 '[ "$(job_state "$a")" = running ]'
	wait_for 5 '[ "$(val "cardbaton_jobs{state=\"queued\"}")" = 1 ]'
	check
	[ "$(val 'cardbaton_jobs{state="running"}')" = 1 ]
	[ "$(val 'cardbaton_queue_length{band="normal"}')" = 1 ]
	[ "$(val 'cardbaton_node_up{node="local"}')" = 1 ]
	[ "$(val 'cardbaton_gpu_state{node="local",gpu="0",uuid="GPU-00000000-0000-0000-0000-000000000000",state="leased"}')" = 1 ]
	[ "$(val 'cardbaton_gpu_memory_total_bytes{node="local",gpu="3",uuid="GPU-33333333-3333-3333-3333-333333333333"}')" = 85899345920 ]
	# The handoff: a ends, b takes its four cards.
	touch "$T/a"
	wait_for 10 '[ "$(job_state "$b")" = running ]'
	wait_for 5 '[ "$(val "cardbaton_handoff_seconds_count{node=\"local\"}")" = 4 ]'
	check
	[ "$(val 'cardbaton_attempts_total{outcome="succeeded"}')" = 1 ]
	[ "$(val 'cardbaton_jobs_finished_total{state="succeeded"}')" = 1 ]
	[ "$(val 'cardbaton_queue_wait_seconds_count')" = 2 ]
	# The file is the tool's output, byte for byte.
	diff <(cardbaton-metrics --config "$C") "$T/spool/metrics.prom"
	# Not a lab's spool: no user families.
	not grep -q cardbaton_user_ "$T/spool/metrics.prom"
	touch "$T/b"
	wait_for 10 'final "$b"'
}

@test "a lab's spool: cardbaton_user_gpu_seconds_total and cardbaton_user_gpus_held per user, from the records across a restart; promtool passes" {
	me=$(id -un)
	# Root's own group and root an admin; this account named in users,
	# so that it is shown from the start.
	printf 'spool: ./spool\nnodes:\n  local:\n    local: true\nlab:\n  group: root\n  admins: [root]\n  users:\n    %s: {shares: 2}\n' "$me" > "$C"
	start_daemon
	held="cardbaton_user_gpus_held{user=\"$me\"}"
	used="cardbaton_user_gpu_seconds_total{user=\"$me\"}"
	wait_for 10 '[ "$(val "$held")" = 0 ]'
	check
	grep -q '^# TYPE cardbaton_user_gpu_seconds_total counter$' "$T/spool/metrics.prom"
	a=$(gate a 2)
	wait_for 10 '[ "$(job_state "$a")" = running ]'
	wait_for 10 '[ "$(val "$held")" = 2 ]'
	# A running attempt's time counts as it runs (the file is rewritten
	# at the daemon's next turn: a reconcile is every 5 s).
	wait_for 20 'python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) > 0 else 1)" "$(val "$used")"'
	check
	touch "$T/a"
	wait_for 10 'final "$a"'
	wait_for 10 '[ "$(val "$held")" = 0 ]'
	# Ended: 2 cards x the attempt's time, as its record says.
	want=$(python3 -c 'import json, sys
a = json.load(open(sys.argv[1]))["attempts"][-1]
print(2 * (a["finished_ms"] - a["started_ms"]) / 1000)' "$T/spool/done/$(printf %010d "$a").job")
	wait_for 10 'python3 -c "import sys; sys.exit(0 if abs(float(sys.argv[1]) - float(sys.argv[2])) < 1e-6 else 1)" "$(val "$used")" "$want"'
	check
	# A restart counts it again from the records: never lower.
	stop_daemon
	start_daemon
	wait_for 10 'python3 -c "import sys; sys.exit(0 if abs(float(sys.argv[1]) - float(sys.argv[2])) < 1e-6 else 1)" "$(val "$used")" "$want"'
	[ "$(val "$held")" = 0 ]
}

@test "an idle daemon reads the cards again every gpu_refresh_seconds: a card changed outside the queue shows in metrics.prom and nodes/NAME.json, with the reading's time" {
	printf 'spool: ./spool\ngpu_refresh_seconds: 1\nnodes:\n  local:\n    local: true\n' > "$C"
	start_daemon
	# No job ever: the cards are read all the same, and when.
	ts='cardbaton_node_gpus_timestamp_seconds{node="local"}'
	wait_for 10 '[ -n "$(val "$ts")" ]'
	check
	mem='cardbaton_gpu_memory_used_bytes{node="local",gpu="1",uuid="GPU-11111111-1111-1111-1111-111111111111"}'
	[ "$(val "$mem")" = 0 ]
	first=$(val "$ts")
	# A process outside the queue takes memory on card 1.
	fake_gpus \
		"0, GPU-00000000-0000-0000-0000-000000000000, NVIDIA Fake A100, 0, 81920, 0" \
		"1, GPU-11111111-1111-1111-1111-111111111111, NVIDIA Fake A100, 2048, 81920, 75" \
		"2, GPU-22222222-2222-2222-2222-222222222222, NVIDIA Fake A100, 0, 81920, 0" \
		"3, GPU-33333333-3333-3333-3333-333333333333, NVIDIA Fake A100, 0, 81920, 0"
	wait_for 10 '[ "$(val "$mem")" = 2147483648 ]'
	[ "$(val 'cardbaton_gpu_utilization_ratio{node="local",gpu="1",uuid="GPU-11111111-1111-1111-1111-111111111111"}')" = 0.75 ]
	[ "$(val 'cardbaton_gpu_state{node="local",gpu="1",uuid="GPU-11111111-1111-1111-1111-111111111111",state="busy"}')" = 1 ]
	[ "$(val "$ts")" -gt "$first" ]
	check
	wait_for 10 '[ "$(json "d[\"gpus\"][1][\"memory_used_mib\"]" < "$T/spool/nodes/local.json")" = 2048 ]'
	[ "$(json 'd["gpus"][1]["idle"]' < "$T/spool/nodes/local.json")" = False ]
	# Still idle: no job was ever queued.
	[ "$(val 'cardbaton_jobs{state="queued"}')" = 0 ]
	# The gauge is the time of nodes/local.json's reading: both files
	# are rewritten at every reading, each on its own beat, and a
	# stopping daemon writes both of the last one.
	stop_daemon
	[ "$(val "$ts")" = "$(json 'd["gpus_at_ms"] // 1000' < "$T/spool/nodes/local.json")" ]
}

@test "the counters never go down across a restart, a kill -9 included" {
	start_daemon
	for i in 1 2 3; do sub --gpu-count 1 -- true >/dev/null; done
	f=$(sub --gpu-count 1 -- false)
	wait_for 10 'final "$f"'
	wait_for 5 '[ "$(val "cardbaton_attempts_total{outcome=\"failed\"}")" = 1 ]'
	wait_for 5 '[ "$(val "cardbaton_attempts_total{outcome=\"succeeded\"}")" = 3 ]'
	cp "$T/spool/metrics.prom" "$T/before.prom"
	kill -KILL "$DAEMON_PID"
	wait "$DAEMON_PID" 2>/dev/null || true
	DAEMON_PID=
	start_daemon
	id=$(sub --gpu-count 1 -- true)
	wait_for 10 'final "$id"'
	wait_for 5 '[ "$(val "cardbaton_attempts_total{outcome=\"succeeded\"}")" = 4 ]'
	check
	stop_daemon
	start_daemon
	check
	# Every counter and histogram series of before.prom is there, and
	# not lower.
	python3 - "$T/before.prom" "$T/spool/metrics.prom" <<-'EOF'
	import sys
	def series(path):
	    out = {}
	    for line in open(path):
	        if line.startswith('#') or not line.strip():
	            continue
	        k, v = line.rsplit(' ', 1)
	        out[k] = float(v)
	    return out
	old, new = series(sys.argv[1]), series(sys.argv[2])
	counted = [k for k in old if k.split('{')[0].endswith(('_total', '_bucket', '_count', '_sum'))]
	assert len(counted) > 30, counted
	for k in counted:
	    assert k in new, k
	    assert new[k] >= old[k], (k, old[k], new[k])
	assert new['cardbaton_jobs_finished_total{state="succeeded"}'] == 4
	EOF
}

@test "a metrics.prom that is not the daemon's is read for what it can, then replaced" {
	mkdir -p "$T/spool"
	printf 'garbage\ncardbaton_pauses_total 7\ncardbaton_preemptions_total -1\n\0\377{"\n' > "$T/spool/metrics.prom"
	start_daemon
	wait_for 5 'grep -q cardbaton_daemon_start_time_seconds "$T/spool/metrics.prom"'
	check
	[ "$(val cardbaton_pauses_total)" = 7 ]
	[ "$(val cardbaton_preemptions_total)" = 0 ]
	not grep -q garbage "$T/spool/metrics.prom"
}

@test "cardbaton metrics: no file yet is 66 naming it; it takes no operand (64)" {
	run --separate-stderr cardbaton-metrics --config "$C"
	failed 66 cardbaton-metrics
	[[ $stderr == *"no spool yet"* ]]
	sub --hold -- true >/dev/null          # the spool, without a daemon
	run --separate-stderr cardbaton-metrics --config "$C"
	failed 66 cardbaton-metrics
	[[ $stderr == *"$T/spool/metrics.prom: no metrics yet"* ]]
	run --separate-stderr cardbaton-metrics --config "$C" extra
	failed 64 cardbaton-metrics
	run --separate-stderr cardbaton metrics --config "$C" --help
	[ "$status" -eq 0 ]
	[ "$output" = "usage: cardbaton-metrics [--config PATH]" ]
}

@test "nodes/NAME.json carries the daemon's card snapshot: the lease holder and its job while it runs" {
	start_daemon
	id=$(gate g 2)
	wait_for 10 '[ "$(job_state "$id")" = running ]'
	wait_for 5 '[ "$(json "[g[\"job\"] for g in d[\"gpus\"]]" < "$T/spool/nodes/local.json")" = "['"$id"', '"$id"', null, null]" ]'
	json 'd["gpus"][0]["lease"]' < "$T/spool/nodes/local.json" | grep -q -- "-$id-0\$"
	[ "$(json 'd["gpus"][3]["idle"]' < "$T/spool/nodes/local.json")" = True ]
	[ "$(json 'd["gpus"][3]["memory_total_mib"]' < "$T/spool/nodes/local.json")" = 81920 ]
	[ -n "$(json 'd["gpus_at"]' < "$T/spool/nodes/local.json")" ]
	touch "$T/g"
	wait_for 10 'final "$id"'
	wait_for 5 '[ "$(json "[g[\"lease\"] for g in d[\"gpus\"]]" < "$T/spool/nodes/local.json")" = "[null, null, null, null]" ]'
	# status still reads it (reachable, no line).
	run st
	[ "$status" -eq 0 ]
	[[ $output != *unreachable* ]]
}
