#!/usr/bin/env bats
# slurm.bats - a Slurm partition as a node (LAYOUT.md §14): a real
# one-machine Slurm 22.05 cluster (tests/lib/slurm.bash: munged,
# slurmctld, slurmd, GPUs as character devices so that Slurm sets
# CUDA_VISIBLE_DEVICES) beside a real sshd test host
# (tests/lib/sshhosts.bash), both reached from the client namespace,
# where the daemon and the tools run.  Only the GPUs are simulated.

bats_require_minimum_version 1.5.0

load ../lib/common
load ../lib/sshhosts
load ../lib/hosttools
load ../lib/slurm

setup_file() {
	if hosts_available && slurm_available; then
		hosts_up 1 && SLURM_NETNS=$CLIENT_NS slurm_up 4
	fi
}

teardown_file() {
	slurm_down
	hosts_down
}

setup() {
	[ -n "${HOSTS_UID:-}" ] && [ -n "${SLURM_DIR:-}" ] || skip "needs root, ip netns, sshd and Slurm"
	setup_common
	C=$T/config.yaml
	rm -rf "$(host_home 1)/.local"
	host_gpus 1 "0, $(host_gpu_uuid 1 0), NVIDIA A100-SXM4-80GB, 0, 81920, 0"
	host_apps 1
	cat > "$C" <<-YAML
		spool: ./spool
		ssh_command: [ssh, -F, $SSH_CONFIG]
		reserve_after_seconds: 0
		nodes:
		  host1:
		    ssh: host1
		  cluster:
		    slurm:
		      partition: gpu
		      sbatch_args: [--comment, cardbaton-test]
	YAML
}

teardown() {
	teardown_common
	in_client scancel --name "cb-*" >/dev/null 2>&1 || true
	ids=$(in_client squeue -h -o %i 2>/dev/null) || true
	# shellcheck disable=SC2086
	[ -z "$ids" ] || in_client scancel $ids 2>/dev/null || true
	wait_for 20 '[ -z "$(in_client squeue -h -o %i)" ]' || true
	host_kill_procs 1
}

final() {
	case "$(state "$1")" in succeeded|failed|cancelled|lost) return 0 ;; esac
	return 1
}
# The attempt ID of job ID's last attempt, as its record has it.
aid() { json "d['attempts'][-1]['id']" < "$(ls "$T"/spool/*/"$(printf %010d "$1")".job)"; }
# The Slurm jobs named after attempt A, in every state Slurm remembers.
slurm_jobs() { in_client squeue -h -t all -o %i --name "cb-$1"; }

slurm_daemon() {
	ip netns exec "$CLIENT_NS" cardbaton-spoold --config "$C" >>"$T/daemon.log" 2>&1 3>&- &
	DAEMON_PID=$!
	wait_for 10 'grep -q serving "$T/daemon.log"'
}

@test "one priority queue over an SSH host and a Slurm partition; a 2-card job on Slurm gets two cards from Slurm, its log through logs" {
	sed -i 's/^      partition: gpu$/&\n      max_jobs: 2/' "$C"
	# Submitted with no daemon: the queue's order is priority, then ID.
	low=()
	for i in 1 2 3; do low+=("$(sub -- sh -c 'echo "ran"; sleep 2')"); done
	two=$(sub --gpu-count 2 -- sh -c 'echo "visible=$CUDA_VISIBLE_DEVICES job=$SLURM_JOB_ID"; sleep 1')
	top=$(sub --priority 9 -- sh -c 'echo top; sleep 2')
	slurm_daemon
	all=("${low[@]}" "$two" "$top")
	for id in "${all[@]}"; do wait_for 90 final "$id"; done
	for id in "${all[@]}"; do [ "$(state "$id")" = succeeded ]; done
	# Placed in the queue's order, on both kinds of node.
	# (A job staged on host1, the baton, is placed too: "staged attempt".)
	order=$(sed -n 's/^cardbaton-spoold: job \([0-9]*\): \(staged \)\?attempt .* on .*/\1/p' "$T/daemon.log" | tr '\n' ' ')
	[ "$order" = "$top ${low[*]} $two " ]
	nodes=$(for id in "${all[@]}"; do field "$id" node; done | sort -u | tr '\n' ' ')
	[ "$nodes" = "cluster host1 " ]
	in_client cardbaton-logs --config "$C" "$top" | grep -qx top
	# The 2-card job needs Slurm: its cards as Slurm set them, recorded
	# from inside the allocation.
	[ "$(field "$two" node)" = cluster ]
	run in_client cardbaton-logs --config "$C" "$two"
	[[ $output =~ ^visible=([0-9]),([0-9])\ job=([0-9]+)$ ]]
	a=${BASH_REMATCH[1]} b=${BASH_REMATCH[2]} job=${BASH_REMATCH[3]}
	[ "$a" != "$b" ]
	[ "$(field "$two" gpus | tr -d ' ')" = "[$a,$b]" ]
	[ "$(field "$two" gpu_uuids | tr -d ' "')" = "[$(slurm_gpu_uuid "$a"),$(slurm_gpu_uuid "$b")]" ]
	[ "$(field "$two" slurm_job)" = "$job" ]
	# status shows the Slurm job beside the node; Slurm has our name and arguments.
	st --all | grep -q "cluster(slurm:$job)"
	in_client scontrol show job -o "$job" | grep -q "JobName=cb-$(aid "$two") .*Comment=cardbaton-test"
	for id in "${all[@]}"; do
		[ "$(field "$id" node)" = cluster ] || [ "$(field "$id" slurm_job)" = None ]
	done
}

@test "gpus shows the partition's cards as Slurm has them; a pinned or memory job is refused for a Slurm node (65)" {
	slurm_daemon
	run in_client cardbaton-gpus --config "$C" --json
	[ "$status" -eq 0 ]
	[ "$(echo "$output" | json "len([n for n in d['nodes'] if n['name'] == 'cluster'][0]['gpus'])")" = 4 ]
	id=$(sub --gpu-count 4 -- sleep 30)
	wait_for 30 '[ "$(state "$id")" = running ]'
	# All four allocated in Slurm: none idle.
	wait_for 20 '[ "$(in_client cardbaton-gpus --config "$C" --json | json "sum(g[\"idle\"] for n in d[\"nodes\"] if n[\"name\"] == \"cluster\" for g in n[\"gpus\"])")" = 0 ]'
	run --separate-stderr sub --node cluster --gpus 0 -- true
	failed 65 cardbaton-submit
	[[ $stderr == *"node 'cluster': a Slurm node takes no pinned GPUs (Slurm picks the cards)" ]]
	run --separate-stderr sub --node cluster --gpu-memory 10G -- true
	failed 65 cardbaton-submit
	[[ $stderr == *"node 'cluster': a Slurm node takes no gpu_memory_mib"* ]]
}

@test "a resumable job on Slurm is paused, resumed on the same Slurm node, its work intact; cancel takes a job out of Slurm" {
	slurm_daemon
	id=$(sub --node cluster --resume-command "sh $CB_TOP/tests/lib/coop-steps.sh 60 $T/steps SLURMD_NODENAME SLURM_JOB_ID" -- sh "$CB_TOP/tests/lib/coop-steps.sh" 60 "$T/steps" SLURMD_NODENAME SLURM_JOB_ID)
	wait_for 30 '[ "$(wc -l < "$T/steps" 2>/dev/null)" -ge 3 ]'
	first=$(aid "$id")
	# 0, or 69 when Slurm refused the signal for the moment ("scancel:
	# ... Invalid job id specified" for a job it runs, seen once in CI
	# under load): the request then waits for the daemon, which sends
	# it again (cardbaton-pause(1)); the job pauses either way.
	run in_client cardbaton-pause --config "$C" "$id"
	[ "$status" -eq 0 ] || { [ "$status" -eq 69 ] && [[ $output == *"the pause request waits for the daemon"* ]]; }
	wait_for 30 '[ "$(state "$id")" = paused ]'
	wait_for 20 '[ -z "$(in_client squeue -h -o %i --name "cb-$first")" ]'
	in_client cardbaton-resume --config "$C" "$id"
	wait_for 60 final "$id"
	[ "$(state "$id")" = succeeded ]
	[ "$(cut -d' ' -f1,2 "$T/steps")" = "$(seq 1 60 | sed 's/^/step /')" ]
	[ "$(cut -d' ' -f3 "$T/steps" | sort -u)" = "$CBS_NODE" ]
	# Two Slurm jobs, one per attempt; the resume asked for the host the
	# checkpoint is on.
	[ "$(cut -d' ' -f4 "$T/steps" | sort -u | wc -l)" = 2 ]
	second=$(aid "$id")
	[ "$second" != "$first" ]
	job=$(slurm_jobs "$second")
	in_client scontrol show job -o "$job" | grep -q "ReqNodeList=$CBS_NODE "
	# Cancel: the running job leaves Slurm, and is cancelled.
	long=$(sub --node cluster -- sleep 300)
	wait_for 30 '[ "$(field "$long" reason)" = "running on cluster" ]'
	in_client cardbaton-cancel --config "$C" "$long"
	wait_for 30 '[ "$(state "$long")" = cancelled ]'
	[ "$(field "$long" reason)" = "cancelled by user" ]
	wait_for 20 '[ -z "$(in_client squeue -h -o %i --name "cb-$(aid "$long")")" ]'
}

@test "a job still pending in Slurm is cancelled there: recorded cancelled, gone from squeue, never run" {
	sed -i 's/sbatch_args: \[--comment, cardbaton-test\]/sbatch_args: [--begin=now+600]/' "$C"
	slurm_daemon
	id=$(sub --node cluster -- sh -c 'echo ran > "$0"' "$T/ran")
	wait_for 30 '[ "$(in_client squeue -h -o %T --name "cb-$(aid "$id")")" = PENDING ]'
	[ "$(field "$id" reason)" = "launching on cluster" ]
	in_client cardbaton-cancel --config "$C" "$id"
	wait_for 30 '[ "$(state "$id")" = cancelled ]'
	[ "$(field "$id" reason)" = "cancelled by user" ]
	[ -z "$(in_client squeue -h -o %i --name "cb-$(aid "$id")")" ]
	[ ! -e "$T/ran" ]
}

@test "a job Slurm refuses: the node's error says why, the attempt waits and is sent again, nothing is left in Slurm" {
	sed -i 's/sbatch_args: \[--comment, cardbaton-test\]/sbatch_args: [--nodelist=nosuchhost]/' "$C"
	slurm_daemon
	id=$(sub --node cluster -- true)
	nerr() { st --json | json "[n['error'] or '' for n in d['nodes'] if n['name'] == 'cluster'][0]"; }
	wait_for 30 '[[ $(nerr) == *"sbatch: "*"Invalid node name specified"* ]]'
	# Asked again (the daemon logs each failure), never by a new attempt.
	wait_for 30 '[ "$(grep -c "Invalid node name specified" "$T/daemon.log")" -ge 2 ]'
	[ "$(state "$id")" = running ]
	[ "$(field "$id" reason)" = "launching on cluster" ]
	[ "$(field "$id" attempts)" = 1 ]
	[ -z "$(slurm_jobs "$(aid "$id")")" ]
}

@test "kill -9 of the daemon again and again while jobs go to Slurm: each runs once, from one sbatch" {
	ids=()
	for i in $(seq 1 8); do
		ids+=("$(sub --node cluster -- sh -c 'echo "$CARDBATON_ATTEMPT_ID" >> "$0"; sleep 0.5' "$T/ran.$i")")
	done
	for k in $(seq 1 8); do
		slurm_daemon
		sleep "0.$((RANDOM % 8 + 1))"
		kill -KILL "$DAEMON_PID"
		wait "$DAEMON_PID" 2>/dev/null || true
	done
	slurm_daemon
	for id in "${ids[@]}"; do wait_for 90 final "$id"; done
	for i in $(seq 1 8); do
		id=${ids[$((i - 1))]}
		[ "$(state "$id")" = succeeded ]
		[ "$(wc -l < "$T/ran.$i")" = 1 ]
		[ "$(cat "$T/ran.$i")" = "$(aid "$id")" ]
		[ "$(slurm_jobs "$(aid "$id")" | wc -l)" = 1 ]
	done
}

@test "a job scancelled behind the daemon's back is cancelled with Slurm's reason; one whose Slurm job vanished is lost" {
	slurm_daemon
	a=$(sub --node cluster -- sleep 300)
	b=$(sub --node cluster -- sleep 300)
	wait_for 30 '[ "$(field "$a" reason)" = "running on cluster" ] && [ "$(field "$b" reason)" = "running on cluster" ]'
	in_client scancel "$(field "$a" slurm_job)"
	wait_for 30 '[ "$(state "$a")" = cancelled ]'
	[ "$(field "$a" reason)" = "cancelled: the worker got SIGTERM from Slurm (scancel, its time limit, or the node going down)" ]
	# b's worker and job killed outright: Slurm ends the job, nobody
	# writes a final state.
	job=$(field "$b" slurm_job)
	worker=$(pgrep -f "slurm-job $(aid "$b")")
	pgid=$(sed -n 's/^pgid //p' "$STATE/attempts/$(aid "$b").state")
	[ -n "$worker" ] && [ -n "$pgid" ]
	kill -KILL -- "$worker" "-$pgid"
	wait_for 40 '[ "$(state "$b")" = lost ]'
	[[ $(field "$b" reason) == "Slurm job $job ended "*" without a final status" ]]
}

# The Slurm steps' crash points (worker/slurm.c; the crash walk runs on
# a local node and leaves them to this test): the worker SIGKILLed
# there, then launched again by the daemon, submits nothing twice.
@test "a worker killed at each Slurm crash point: every job runs once, from one sbatch" {
	grep -q CARDBATON_CRASH_AT "$CB_BUILD/cardbaton-spoold" || skip "needs a crash-point build (make test's build-san)"
	points=$(grep -ho 'CRASH_POINT("[^"]*"' "$CB_TOP/worker/slurm.c" | sed 's/CRASH_POINT("//; s/"$//')
	[ -n "$points" ]
	while IFS= read -r p; do
		rm -f "$T/once" "$T"/ran.*
		CARDBATON_CRASH_AT=$p CARDBATON_CRASH_ONCE=$T/once slurm_daemon
		ids=()
		for i in 1 2; do
			ids+=("$(sub --node cluster -- sh -c 'echo "$CARDBATON_ATTEMPT_ID" >> "$0"' "$T/ran.$p.$i")")
		done
		for id in "${ids[@]}"; do wait_for 60 final "$id"; done
		[ -e "$T/once" ]
		for i in 1 2; do
			id=${ids[$((i - 1))]}
			[ "$(state "$id")" = succeeded ]
			[ "$(cat "$T/ran.$p.$i")" = "$(aid "$id")" ]
			[ "$(slurm_jobs "$(aid "$id")" | wc -l)" = 1 ]
		done
		stop_daemon
	done <<< "$points"
}
