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
