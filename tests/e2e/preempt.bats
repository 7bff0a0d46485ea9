#!/usr/bin/env bats
# preempt.bats - checkpoint-aware preemption (config preemption:): a
# job of higher priority that cannot be placed pauses resumable jobs of
# lower priority through the checkpoint contract, runs, and they resume
# where they were.  Real daemon, real worker on the local node with
# one simulated card; which jobs are chosen is a C unit test
# (tests/unit/test_plan.c test_preempt).

load ../lib/common

bats_require_minimum_version 1.5.0

setup() {
	setup_common
	C=$T/config.yaml
	fake_gpus "0, GPU-00000000-0000-0000-0000-000000000000, NVIDIA Fake A100, 0, 81920, 0"
	printf 'preemption:\n  enabled: true\n  min_runtime_seconds: 0\n' >> "$C"
	# steps.sh N: counts steps 1..N into $0.log, 0.05 s each; asked to
	# pause, saves the next step and exits 75; resumed, goes on from it.
	cat > "$T/steps.sh" <<-'EOF'
	#!/bin/sh
	i=1
	if [ -n "${CARDBATON_CHECKPOINT-}" ]; then i=$(cat "$CARDBATON_CHECKPOINT"); fi
	while [ "$i" -le "$1" ]; do
		if [ -e "$CARDBATON_PAUSE_FILE" ]; then
			echo "$i" > "$0.ck"
			printf '{"checkpoint": "%s"}' "$0.ck" > "$CARDBATON_CHECKPOINT_READY.tmp"
			mv "$CARDBATON_CHECKPOINT_READY.tmp" "$CARDBATON_CHECKPOINT_READY"
			exit 75
		fi
		echo "$i" >> "$0.log"
		i=$((i + 1))
		sleep 0.05
	done
	EOF
}

teardown() {
	teardown_common
}


@test "a priority-10 job pauses the priority-0 resumable job on the only card, runs, and the victim resumes with its work intact" {
	start_daemon
	low=$(sub --resume-command "sh $T/steps.sh 40" -- sh "$T/steps.sh" 40)
	wait_for 10 '[ -s "$T/steps.sh.log" ]'
	high=$(sub --priority 10 -- sh -c 'echo "high after step $(tail -1 "$0")" > "$1"' "$T/steps.sh.log" "$T/high")
	wait_for 20 final "$high"
	[ "$(field "$high" state)" = succeeded ]
	grep -q "job $high: preempting job $low on local" "$T/daemon.log"
	grep -q "job $low: preempted by job $high: asked to checkpoint within 60 s" "$T/daemon.log"
	wait_for 30 final "$low"
	[ "$(field "$low" state)" = succeeded ]
	[ "$(field "$low" attempts)" = 2 ]
	# Every step once, in order: none lost, none repeated.
	[ "$(cat "$T/steps.sh.log")" = "$(seq 1 40)" ]
	# The urgent job ran while the victim was paused.
	n=$(sed 's/high after step //' "$T/high")
	[ "$n" -ge 1 ] && [ "$n" -lt 40 ]
	grep -q "job $low: queued: preempted by job $high: checkpoint saved; resumes on local" "$T/daemon.log"
}

@test "never preempted: a job without resume_command, one of the same priority, one running less than min_runtime_seconds" {
	start_daemon
	plain=$(sub -- sh -c 'until [ -e "$0" ]; do sleep 0.02; done' "$T/go1")
	wait_for 10 '[ "$(field "$plain" state)" = running ]'
	high=$(sub --priority 10 -- touch "$T/high1")
	same=$(sub --resume-command true -- true)
	settle 1
	[ "$(field "$plain" state)" = running ]
	[ "$(field "$high" state)" = queued ]
	touch "$T/go1"
	wait_for 10 final "$high"
	wait_for 10 final "$same"
	not grep -q preempting "$T/daemon.log"
	# Equal priority: no preemption.
	eq=$(sub --priority 3 --resume-command "sh $T/steps.sh 1000" -- sh "$T/steps.sh" 1000)
	wait_for 10 '[ "$(field "$eq" state)" = running ]'
	eq2=$(sub --priority 3 -- true)
	settle 1
	[ "$(field "$eq" state)" = running ]
	[ "$(field "$eq2" state)" = queued ]
	cardbaton-cancel --config "$C" "$eq"
	wait_for 10 final "$eq2"
	not grep -q preempting "$T/daemon.log"
	# Too young to be chosen.
	stop_daemon
	printf 'preemption:\n  enabled: true\n  min_runtime_seconds: 3600\n' > "$T/pre.yaml"
	sed -i '/^preemption:/,$d' "$C"
	cat "$T/pre.yaml" >> "$C"
	start_daemon
	young=$(sub --resume-command "sh $T/steps.sh 1000" -- sh "$T/steps.sh" 1000)
	wait_for 10 '[ "$(field "$young" state)" = running ]'
	urgent=$(sub --priority 10 -- true)
	settle 1
	[ "$(field "$young" state)" = running ]
	[ "$(field "$urgent" state)" = queued ]
	not grep -q preempting "$T/daemon.log"
	cardbaton-cancel --config "$C" "$young"
	wait_for 10 final "$urgent"
}

@test "a victim that does not checkpoint within its grace fails, 'preempted: no checkpoint within N s'; the urgent job then runs" {
	start_daemon
	printf 'command: [sh, -c, "sleep 300"]\nresume_command: "true"\ncheckpoint_grace_seconds: 1\n' > "$T/deaf.yaml"
	deaf=$(sub --job "$T/deaf.yaml")
	wait_for 10 '[ "$(field "$deaf" state)" = running ]'
	high=$(sub --priority 10 -- true)
	wait_for 20 final "$deaf"
	[ "$(field "$deaf" state)" = failed ]
	[ "$(field "$deaf" reason)" = "preempted: no checkpoint within 1 s" ]
	wait_for 20 final "$high"
	[ "$(field "$high" state)" = succeeded ]
}

@test "preemption off (the default): nobody is preempted" {
	sed -i '/^preemption:/,$d' "$C"
	start_daemon
	low=$(sub --resume-command "sh $T/steps.sh 1000" -- sh "$T/steps.sh" 1000)
	wait_for 10 '[ "$(field "$low" state)" = running ]'
	high=$(sub --priority 10 -- true)
	settle 1
	[ "$(field "$low" state)" = running ]
	[ "$(field "$high" state)" = queued ]
	cardbaton-cancel --config "$C" "$low"
	wait_for 10 final "$high"
}
