#!/usr/bin/env bats
# share.bats - card sharing (node max_jobs_per_gpu, job share: true):
# real daemon(s), real worker and its shared leases on the local node
# with one simulated 80 GiB card; the rule itself is a C unit test
# (tests/unit/test_plan.c test_share).

load ../lib/common

bats_require_minimum_version 1.5.0

setup() {
	setup_common
	C=$T/config.yaml
	fake_gpus "0, GPU-00000000-0000-0000-0000-000000000000, NVIDIA Fake A100, 0, 81920, 0"
	printf 'spool: ./spool\nnodes:\n  local:\n    local: true\n    max_jobs_per_gpu: 2\n' > "$C"
}

teardown() {
	teardown_common
}

# A job that runs until $T/$1 exists.
until_go() { echo "until [ -e '$T/$1' ]; do sleep 0.02; done"; }

@test "two sharing jobs of 20,000 MiB run together on one 80 GiB card; a third waits; an exclusive job waits until both are done" {
	start_daemon
	a=$(sub --share --gpu-memory 20000 -- sh -c "$(until_go go.a)")
	b=$(sub --share --gpu-memory 20000 -- sh -c "$(until_go go.b)")
	c=$(sub --share --gpu-memory 20000 -- true)
	x=$(sub -- touch "$T/x.ran")
	wait_for 10 '[ "$(field "$a" state)" = running ] && [ "$(field "$b" state)" = running ]'
	[ "$(field "$a" gpus)" = "[0]" ] && [ "$(field "$b" gpus)" = "[0]" ]
	cardbaton-gpus --config "$C" --json | json 'd["nodes"][0]["gpus"][0]["leases"]' > "$T/leases"
	grep -q "\"$a\"" "$T/leases" && grep -q "\"$b\"" "$T/leases"
	cardbaton-gpus --config "$C" | grep -Eq "($a,$b|$b,$a)"
	settle 0.5
	[ "$(field "$c" state)" = queued ]
	[ "$(field "$x" state)" = queued ]
	touch "$T/go.a"
	# a's place goes to the third sharer, not to the exclusive job.
	wait_for 10 final "$c"
	[ "$(field "$x" state)" = queued ]
	touch "$T/go.b"
	wait_for 10 final "$x"
	[ "$(field "$x" state)" = succeeded ]
}

@test "share needs gpu_memory_mib (65); a card with a compute process from outside takes no sharing job" {
	run --separate-stderr sub --share -- true
	failed 65 cardbaton-submit
	[[ $stderr == *"share: needs gpu_memory_mib"* ]]
	fake_apps "GPU-00000000-0000-0000-0000-000000000000, 4242, 100"
	fake_gpus "0, GPU-00000000-0000-0000-0000-000000000000, NVIDIA Fake A100, 100, 81920, 3"
	start_daemon
	s=$(sub --share --gpu-memory 1000 -- true)
	settle 1
	[ "$(field "$s" state)" = queued ]
	fake_apps
	fake_gpus "0, GPU-00000000-0000-0000-0000-000000000000, NVIDIA Fake A100, 0, 81920, 0"
	wait_for 10 final "$s"
	[ "$(field "$s" state)" = succeeded ]
}

@test "a second controller on the same remote_state_dir never places an exclusive job on the shared card" {
	start_daemon
	a=$(sub --share --gpu-memory 20000 -- sh -c "$(until_go go.a)")
	wait_for 10 '[ "$(field "$a" state)" = running ]'
	# Another spool, the same node and state directory.
	C2=$T/other.yaml
	printf 'spool: ./spool2\nnodes:\n  local:\n    local: true\n' > "$C2"
	cardbaton-spoold --config "$C2" >> "$T/daemon2.log" 2>&1 &
	d2=$!
	y=$(cardbaton-submit --config "$C2" -- touch "$T/y.ran")
	settle 1.5
	[ "$(cardbaton-status --config "$C2" --json "$y" | json 'd["jobs"][0]["state"]')" = queued ]
	[ ! -e "$T/y.ran" ]
	touch "$T/go.a"
	wait_for 15 '[ -e "$T/y.ran" ]'
	kill -TERM "$d2"
	wait "$d2" || true
}

# The most jobs whose intervals ("START END" lines, ns, in file $1)
# overlap at one instant.
most_at_once() {
	python3 -c '
import sys
ev = []
for line in open(sys.argv[1]):
    s, e = map(int, line.split())
    ev += [(s, 1), (e, -1)]
n = most = 0
for _, d in sorted(ev, key=lambda x: (x[0], x[1])):
    n += d
    most = max(most, n)
print(most)' "$1"
}

# A sharing job that notes its interval in $T/iv, running $1 seconds.
interval_job() { echo "s=\$(date +%s%N); sleep $1; echo \"\$s \$(date +%s%N)\" >> '$T/iv'"; }

@test "three sharers, N = 2, one card that may take sharers: two run, the third waits naming the card's limit, then runs" {
	# Submitted while the daemon is stopped: the first pass places two,
	# and the query that follows the launches may be read before their
	# leases (issue 32: all three ran on card 1).
	fake_gpus "0, GPU-00000000-0000-0000-0000-000000000000, NVIDIA Fake A100, 100, 81920, 3" \
		"1, GPU-11111111-1111-1111-1111-111111111111, NVIDIA Fake A100, 0, 81920, 0"
	fake_apps "GPU-00000000-0000-0000-0000-000000000000, 4242, 100"
	a=$(sub --share --gpu-memory 20000 -- sh -c "$(until_go go.a)")
	b=$(sub --share --gpu-memory 20000 -- sh -c "$(until_go go.b)")
	c=$(sub --share --gpu-memory 20000 -- sh -c "$(until_go go.c)")
	start_daemon
	wait_for 10 '[ "$(field "$a" state)" = running ] && [ "$(field "$b" state)" = running ]'
	[ "$(field "$a" gpus)" = "[1]" ] && [ "$(field "$b" gpus)" = "[1]" ]
	wait_for 10 '[ "$(field "$c" reason)" = "waiting: GPU 1 of local: shared by 2 jobs, max_jobs_per_gpu 2" ]'
	sleep 1         # the negative: nothing more starts there
	[ "$(field "$c" state)" = queued ]
	# Never even tried: the daemon knows its own leases, whatever a
	# query read before them (the worker would send it back busy).
	[ "$(field "$c" attempts)" = 0 ]
	cardbaton-gpus --config "$C" --json | json 'len(d["nodes"][0]["gpus"][1]["leases"])' > "$T/n"
	[ "$(cat "$T/n")" = 2 ]
	touch "$T/go.a"
	wait_for 10 '[ "$(field "$c" state)" = running ]'
	[ "$(field "$c" gpus)" = "[1]" ]
	cardbaton-gpus --config "$C" --json | json 'sorted(d["nodes"][0]["gpus"][1]["leases"])' > "$T/l"
	[ "$(cat "$T/l")" = "$(printf '["%s", "%s"]' "$b" "$c")" ]
	touch "$T/go.b" "$T/go.c"
	wait_for 10 final "$b" && wait_for 10 final "$c"
	[ "$(field "$c" state)" = succeeded ]
}

@test "two controllers on one remote_state_dir never put more than max_jobs_per_gpu sharers on a card" {
	# Two sharers in each spool, both daemons started together, and each
	# node query takes a second: both daemons place their two on a
	# snapshot that shows neither's, and only the worker's count under
	# the lease keeps the card at two (issue 32).
	C2=$T/other.yaml
	printf 'spool: ./spool2\nnodes:\n  local:\n    local: true\n    max_jobs_per_gpu: 2\n' > "$C2"
	ids=() ids2=()
	for i in 1 2; do
		ids+=("$(sub --share --gpu-memory 20000 -- sh -c "$(interval_job 2)")")
		ids2+=("$(cardbaton-submit --config "$C2" --share --gpu-memory 20000 -- sh -c "$(interval_job 2)")")
	done
	echo 1 > "$FAKE_GPU_DIR/delay"
	cardbaton-spoold --config "$C2" >> "$T/daemon2.log" 2>&1 &
	d2=$!
	start_daemon
	for id in "${ids[@]}"; do wait_for 60 final "$id"; [ "$(field "$id" state)" = succeeded ]; done
	for id in "${ids2[@]}"; do
		wait_for 60 '[ "$(cardbaton-status --config "$C2" --json "$id" | json "d[\"jobs\"][0][\"state\"]")" = succeeded ]'
	done
	kill -TERM "$d2"
	wait "$d2" || true
	[ "$(wc -l < "$T/iv")" = 4 ]
	[ "$(most_at_once "$T/iv")" -le 2 ]
}
