#!/usr/bin/env bats
# slurmharness.bats - the Slurm test-cluster harness itself
# (tests/lib/slurm.bash): a one-node cluster with 4 GPUs on loopback;
# batch jobs, GPU binding, the node's fake nvidia-smi, signals,
# cancellation and the queries a Slurm backend relies on.

load ../lib/common
load ../lib/slurm

bats_require_minimum_version 1.5.0
test_timeout 60

# bats 1.8 cannot skip in setup_file (it reports a failure): skip in setup.
setup_file() {
	slurm_available || return 0
	slurm_up 4
}

teardown_file() {
	slurm_down
}

setup() {
	[ -n "${SLURM_DIR:-}" ] || skip "needs root, slurmctld, slurmd, munged and sbatch"
	T=$BATS_TEST_TMPDIR
	cd "$T" || return 1
}

teardown() {
	# No test leaves a job behind for the next one.
	[ -n "${SLURM_DIR:-}" ] || return 0
	local ids
	ids=$(squeue -h -o %i 2>/dev/null)
	# shellcheck disable=SC2086
	[ -z "$ids" ] || scancel $ids
	wait_for 20 '[ -z "$(squeue -h -o %i)" ]'
	slurm_default_gpus
}

# sb ARGS...: sbatch --parsable, output in $T; prints the job ID.
sb() { sbatch --parsable -o "$T/out-%j" "$@"; }
# jstate ID: JobState from scontrol (also for a finished job).
jstate() { scontrol show job -o "$1" | tr ' ' '\n' | sed -n 's/^JobState=//p'; }
jfield() { scontrol show job -o "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }

@test "the cluster is up: one idle node with 4 GPUs in partition gpu, all under SLURM_DIR" {
	echo "# bring-up: ${CBS_UP_MS} ms" >&3
	[ "$SLURM_CONF" = "$SLURM_DIR/slurm.conf" ]
	[[ $SLURM_DIR == /tmp/cbslurm.* ]]
	[ "$(stat -c %a "$SLURM_DIR")" = 755 ]
	[ "$(sinfo -h -N -o '%N|%P|%T|%G')" = "$CBS_NODE|gpu*|idle|gpu:a100:4" ]
	[ "$CBS_NODE" = "$(hostname -s)" ]
	scontrol ping | grep -q 'is UP'
	for i in 0 1 2 3; do [ -c "$SLURM_DIR/dev/nvidia$i" ]; done
	# Every daemon runs on this directory's files.
	for f in slurmctld.pid slurmd.pid munge/munged.pid; do
		[ -s "$SLURM_DIR/$f" ]
		_cbs_running "$(cat "$SLURM_DIR/$f")"
	done
}

@test "a batch job runs and writes its output; sbatch --parsable prints the bare ID" {
	run -0 sb -J cb-hello --wrap 'echo hello from $SLURM_JOB_ID on $SLURMD_NODENAME'
	[[ $output =~ ^[0-9]+$ ]]
	id=$output
	wait_for 20 '[ "$(jstate "$id")" = COMPLETED ]'
	[ "$(cat "$T/out-$id")" = "hello from $id on $CBS_NODE" ]
	[ "$(jfield "$id" ExitCode)" = 0:0 ]
	[ "$(jfield "$id" BatchHost)" = "$CBS_NODE" ]
}

@test "sbatch reads the script from stdin, and --nodelist takes hostname -s" {
	id=$(printf '#!/bin/sh\necho from stdin\n' | sb --nodelist "$(hostname -s)")
	wait_for 20 '[ "$(jstate "$id")" = COMPLETED ]'
	[ "$(cat "$T/out-$id")" = "from stdin" ]
}

@test "a 2-GPU job sees two indices in CUDA_VISIBLE_DEVICES; two such jobs get disjoint sets at once" {
	script='echo "$CUDA_VISIBLE_DEVICES|$SLURM_JOB_GPUS" > '"$T"'/cvd-$SLURM_JOB_ID; sleep 30'
	a=$(sb --gres=gpu:2 --wrap "$script")
	b=$(sb --gres=gpu:2 --wrap "$script")
	wait_for 20 '[ -s "$T/cvd-$a" ] && [ -s "$T/cvd-$b" ]'
	IFS='|' read -r ca ga < "$T/cvd-$a"
	IFS='|' read -r cb gb < "$T/cvd-$b"
	[[ $ca =~ ^[0-3],[0-3]$ ]] && [[ $cb =~ ^[0-3],[0-3]$ ]]
	[ "$ca" = "$ga" ] && [ "$cb" = "$gb" ]
	# Disjoint, all four cards in use, both running at the same time.
	[ "$(echo "$ca,$cb" | tr , '\n' | sort -u | wc -l)" = 4 ]
	[ "$(jstate "$a")" = RUNNING ] && [ "$(jstate "$b")" = RUNNING ]
	# Slurm shows the used cards' indices, per node and per job.
	[ "$(sinfo -h -N -p gpu -O 'GresUsed:|')" = "gpu:a100:4(IDX:0-3)|" ]
	# A third one waits for resources.
	c=$(sb --gres=gpu:1 --wrap true)
	wait_for 10 '[ "$(squeue -h -j "$c" -o "%T|%R")" = "PENDING|(Resources)" ]'
}

@test "the node's fake nvidia-smi works inside the allocation, with or without the submitter's environment" {
	for exp in ALL NONE; do
		id=$(env -u FAKE_GPU_DIR sbatch --parsable -o "$T/out-%j" --export=$exp --gres=gpu:1 \
			--wrap 'nvidia-smi --query-gpu=index,uuid --format=csv,noheader; echo "$FAKE_GPU_DIR"')
		wait_for 20 '[ "$(jstate "$id")" = COMPLETED ]'
		run cat "$T/out-$id"
		[ "${lines[0]}" = "0, $(slurm_gpu_uuid 0)" ]
		[ "${lines[3]}" = "3, $(slurm_gpu_uuid 3)" ]
		[ "${lines[4]}" = "$CBS_GPU_DIR" ]
	done
	# The fixture may change under a running cluster.
	slurm_gpus "0, $(slurm_gpu_uuid 0), NVIDIA A100-SXM4-80GB, 30000, 81920, 87"
	id=$(sb --wrap 'nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader,nounits')
	wait_for 20 '[ "$(jstate "$id")" = COMPLETED ]'
	[ "$(cat "$T/out-$id")" = "30000, 87" ]
}

@test "scancel --signal=USR1 --batch signals the batch script's shell only" {
	cat > "$T/job.sh" <<-EOF
		#!/bin/bash
		trap 'echo usr1 >> $T/script-sig' USR1
		bash -c "trap 'echo usr1 >> $T/child-sig' USR1; echo \\\$\\\$ > $T/child; while :; do sleep 0.1; done" &
		echo \$\$ > $T/script
		while [ ! -s $T/script-sig ]; do wait; done
		kill \$(cat $T/child)
		echo done
	EOF
	id=$(sb "$T/job.sh")
	wait_for 20 '[ -s "$T/script" ] && [ -s "$T/child" ]'
	scancel --signal=USR1 --batch "$id"
	wait_for 20 '[ "$(jstate "$id")" = COMPLETED ]'
	[ "$(cat "$T/script-sig")" = usr1 ]
	[ ! -e "$T/child-sig" ]
	[ "$(cat "$T/out-$id")" = "done" ]
}

@test "scancel ends a job: SIGTERM to its processes, CANCELLED, and squeue no longer lists it" {
	cat > "$T/job.sh" <<-EOF
		#!/bin/bash
		trap 'echo term >> $T/sig; exit 143' TERM
		echo \$\$ > $T/script
		sleep 1000 & wait
	EOF
	id=$(sb -J cb-cancel-$$ "$T/job.sh")
	wait_for 20 '[ -s "$T/script" ]'
	[ "$(squeue -h -j "$id" -o '%i|%j|%T|%R|%N')" = "$id|cb-cancel-$$|RUNNING|$CBS_NODE|$CBS_NODE" ]
	scancel "$id"
	wait_for 20 '[ -z "$(squeue -h -j "$id" -o %i)" ]'
	[ "$(cat "$T/sig")" = term ]
	[ "$(jstate "$id")" = CANCELLED ]
	grep -q "\*\*\* JOB $id ON $CBS_NODE CANCELLED AT " "$T/out-$id"
	not _cbs_running "$(cat "$T/script")"
}

@test "scontrol show job -o still shows finished jobs: COMPLETED, FAILED with the exit code" {
	ok=$(sb --wrap 'exit 0')
	bad=$(sb --wrap 'exit 3')
	wait_for 20 '[ "$(jstate "$ok")" = COMPLETED ] && [ "$(jstate "$bad")" = FAILED ]'
	[ "$(jfield "$bad" ExitCode)" = 3:0 ]
	[ "$(jfield "$bad" Reason)" = NonZeroExitCode ]
	# squeue leaves finished jobs out unless asked for every state.
	[ -z "$(squeue -h -j "$ok" -o %i)" ]
	[ "$(squeue -h -t all -j "$ok" -o %T)" = COMPLETED ]
	run scontrol show job -o 999999
	[ "$status" -ne 0 ]
}

@test "squeue --name finds a job by name; squeue --json works" {
	id=$(sb -J "cb-find-$$" --wrap 'sleep 30')
	wait_for 20 '[ "$(squeue -h --name "cb-find-$$" -o %i)" = "$id" ]'
	[ -z "$(squeue -h --name "cb-none-$$" -o %i)" ]
	squeue --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
j = [j for j in d["jobs"] if j["job_id"] == int(sys.argv[1])][0]
assert j["name"] == sys.argv[2], j["name"]
assert j["job_state"] in ("PENDING", "RUNNING"), j["job_state"]
' "$id" "cb-find-$$"
}

@test "slurm_down cancels what is left and stops every daemon; safe twice; slurm_up again" {
	# In a subshell, on a second cluster, not to disturb the suite's one.
	outer=$SLURM_DIR
	(
		unset SLURM_DIR SLURM_CONF
		slurm_up 1
		d=$SLURM_DIR
		[ "$d" != "$outer" ]
		[ "$(sinfo -h -N -o %G)" = gpu:a100:1 ]
		id=$(sbatch --parsable -o /dev/null --wrap 'trap "" TERM; sleep 1000')
		wait_for 20 '[ "$(squeue -h -j "$id" -o %T)" = RUNNING ]'
		pids=$(cat "$d/slurmctld.pid" "$d/slurmd.pid" "$d/munge/munged.pid")
		slurm_down
		[ ! -e "$d" ]
		[ -z "${SLURM_DIR:-}" ]
		for p in $pids; do not _cbs_running "$p"; done
		not pgrep -f "$d/" >/dev/null
		slurm_down
	) 3>&-
	# The suite's cluster is unaffected.
	[ "$(sinfo -h -N -o %T)" = idle ]
}
