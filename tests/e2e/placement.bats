#!/usr/bin/env bats
# placement.bats - placement by what a job needs of a card beyond its
# number: memory (gpu_memory_mib, --gpu-memory).  Real sshd test hosts
# in network namespaces (tests/lib/sshhosts.bash) with cards of
# different sizes; the rules themselves are C unit tests
# (tests/unit/test_plan.c test_memory).

load ../lib/common
load ../lib/sshhosts
load ../lib/hosttools

setup_file() {
	if hosts_available; then hosts_up 2; fi
}

teardown_file() {
	hosts_down
}

setup() {
	[ -n "${HOSTS_UID:-}" ] || skip "needs root, ip netns and sshd"
	setup_common
	C=$T/config.yaml
	for i in 1 2; do rm -rf "$(host_home "$i")/.local"; done
	# host1: four 24 GiB cards, first in the config; host2: two 80 GiB.
	local l1=() l2=() c
	for c in 0 1 2 3; do l1+=("$c, $(host_gpu_uuid 1 $c), NVIDIA L4, 0, 24576, 0"); done
	for c in 0 1; do l2+=("$c, $(host_gpu_uuid 2 $c), NVIDIA A100-SXM4-80GB, 0, 81920, 0"); done
	host_gpus 1 "${l1[@]}"
	host_gpus 2 "${l2[@]}"
	host_apps 1
	host_apps 2
	cat > "$C" <<-YAML
		spool: ./spool
		ssh_command: [ssh, -F, $SSH_CONFIG]
		reserve_after_seconds: 0
		nodes:
		  host1:
		    ssh: host1
		  host2:
		    ssh: host2
	YAML
}

teardown() {
	teardown_common
	host_kill_procs 1 2
}

final() {
	case "$(field "$1" state)" in succeeded|failed|cancelled|lost) return 0 ;; esac
	return 1
}


@test "a job needing 60,000 MiB goes to the 80 GiB cards, never the 24 GiB ones; one bigger than any card waits with the reason and holds nothing" {
	ssh_daemon
	big=()
	for i in 1 2 3; do
		big+=("$(sub --gpu-memory 60000 -- sh -c 'echo "$CARDBATON_HOST" > "$0"; sleep 1' "$T/big.$i")")
	done
	small=$(sub --gpu-memory 20G -- sh -c 'echo "$CARDBATON_HOST" > "$0"' "$T/small")
	huge=$(sub --priority 5 --gpu-memory 100G -- true)
	wait_for 20 '[ "$(field "$huge" reason)" = "waiting: no card has 102400 MiB" ]'
	for id in "${big[@]}" "$small"; do wait_for 40 final "$id"; done
	for id in "${big[@]}" "$small"; do [ "$(field "$id" state)" = succeeded ]; done
	# Three of them, two cards that can take them: one after the others.
	[ "$(cat "$T"/big.* | sort -u)" = host2 ]
	[ "$(cat "$T/small")" = host1 ]
	# The job no card can hold holds nothing: host2's cards still go to
	# whoever fits, and it is still waiting.
	later=$(sub --node host2 -- true)
	wait_for 20 final "$later"
	[ "$(field "$later" state)" = succeeded ]
	[ "$(field "$huge" state)" = queued ]
	in_client cat "$T/spool/queued/"*"-$(printf %010d "$huge").job" | json 'd["job"]["gpu_memory_mib"]' | grep -qx 102400
}
