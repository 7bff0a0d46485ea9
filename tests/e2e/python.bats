#!/usr/bin/env bats
# python.bats - the Python helper for the checkpoint contract
# (python/cardbaton, issue 35 item 3; SPEC §9): its calls by hand, with
# the contract's variables set as the worker sets them, and a job using
# it paused and resumed by the queue on the local node -- by hand and by
# a preemption -- its steps continuous.  cardbaton.torch with real
# PyTorch where python3 has torch (Debian's python3-torch).

load ../lib/common

bats_require_minimum_version 1.5.0

setup() {
	setup_common
	C=$T/config.yaml
	fake_gpus "0, GPU-00000000-0000-0000-0000-000000000000, NVIDIA Fake A100, 0, 81920, 0"
	export PYTHONPATH=$CB_TOP/python
	# helper_job.py N LOG: N steps, one line each in LOG; the contract
	# through the helper alone.
	cat > "$T/helper_job.py" <<-'PY'
		import os, sys, time
		import cardbaton
		n, log = int(sys.argv[1]), sys.argv[2]
		ck = os.path.join(os.path.dirname(log), "ck.%s" % os.environ["CARDBATON_ATTEMPT_ID"])
		i = int(open(cardbaton.resume_path()).read()) if cardbaton.resume_path() else 0
		while i < n:
		    i += 1
		    with open(log, "a") as f:
		        f.write("step %d\n" % i)
		    time.sleep(0.05)
		    if i < n and cardbaton.pause_requested():
		        cardbaton.atomic_write(ck, "%d\n" % i)
		        cardbaton.save_and_exit(ck)
	PY
}

teardown() {
	teardown_common
}

hjob() { # hjob N LOG [submit flags...]
	local n=$1 log=$2
	shift 2
	sub --env "PYTHONPATH=$PYTHONPATH" --resume-command "python3 $T/helper_job.py $n $log" "$@" \
		-- python3 "$T/helper_job.py" "$n" "$log"
}
continuous() { [ "$(cat "$2")" = "$(seq 1 "$1" | sed 's/^/step /')" ]; }
record() { cat "$T"/spool/*/"$(printf %010d "$1").job"; }

@test "python3 -m cardbaton --help prints the contract and the calls; --version; anything else is 64" {
	run python3 -m cardbaton --help
	[ "$status" -eq 0 ]
	[[ ${lines[0]} == "usage: python3 -m cardbaton [--help | --version]" ]]
	for w in SSHGPU_PAUSE_FILE SSHGPU_CHECKPOINT_READY SSHGPU_CHECKPOINT "exits with status 75" \
		 cardbaton.pause_requested: cardbaton.save_and_exit: cardbaton.resume_path: cardbaton.torch.save; do
		[[ $output == *"$w"* ]] || { echo "no '$w' in: $output"; false; }
	done
	[ "$(python3 -m cardbaton --version)" = "cardbaton 0.1.0" ]
	run --separate-stderr python3 -m cardbaton --frobnicate
	[ "$status" -eq 64 ]
	[ "$stderr" = "usage: python3 -m cardbaton [--help | --version]" ]
}

@test "the calls by hand: no pause outside the queue, the pause file asked for, the marker published whole and absolute, exit 75; publish outside the queue is an error" {
	unset SSHGPU_PAUSE_FILE CARDBATON_PAUSE_FILE SSHGPU_CHECKPOINT_READY CARDBATON_CHECKPOINT_READY \
	      SSHGPU_CHECKPOINT CARDBATON_CHECKPOINT
	[ "$(python3 -c 'import cardbaton; print(cardbaton.pause_requested(), cardbaton.resume_path())')" = "False None" ]
	run python3 -c 'import cardbaton; cardbaton.publish("x")'
	[ "$status" -eq 1 ] && [[ $output == *"RuntimeError: cardbaton.publish: no SSHGPU_CHECKPOINT_READY"* ]]
	export SSHGPU_PAUSE_FILE=$T/pause SSHGPU_CHECKPOINT_READY=$T/ready
	[ "$(python3 -c 'import cardbaton; print(cardbaton.pause_requested())')" = False ]
	touch "$T/pause"
	[ "$(python3 -c 'import cardbaton; print(cardbaton.pause_requested())')" = True ]
	# The CARDBATON_* names alone do as well.
	[ "$(env -u SSHGPU_PAUSE_FILE CARDBATON_PAUSE_FILE="$T/pause" python3 -c 'import cardbaton; print(cardbaton.pause_requested())')" = True ]
	run python3 -c 'import cardbaton; cardbaton.save_and_exit("rel/ck")'
	[ "$status" -eq 75 ]
	[ "$(json 'd["checkpoint"]' < "$T/ready")" = "$T/rel/ck" ]
	[ -z "$(find "$T" -maxdepth 1 -name '.ready.*')" ]
	run python3 -c 'import cardbaton; cardbaton.publish("")'
	[ "$status" -eq 1 ] && [[ $output == *"ValueError"* ]]
	[ "$(SSHGPU_CHECKPOINT=/ck/7 python3 -c 'import cardbaton; print(cardbaton.resume_path())')" = /ck/7 ]
}

@test "a job using the helper, paused by hand and resumed by the queue, twice: paused each time with its checkpoint, the steps continuous" {
	start_daemon
	id=$(hjob 200 "$T/steps")
	for round in 1 2; do
		wait_for 20 '[ "$(wc -l < "$T/steps" 2>/dev/null)" -ge $((round * 30)) ]'
		cardbaton-pause --config "$C" "$id"
		wait_for 20 '[ "$(field "$id" state)" = paused ]'
		[[ $(record "$id" | json 'd["checkpoint"]') == "$T/ck.$(cat "$T"/spool/id)-$id-"* ]]
		cardbaton-resume --config "$C" "$id"
	done
	wait_for 30 final "$id"
	[ "$(field "$id" state)" = succeeded ]
	continuous 200 "$T/steps"
	[ "$(field "$id" attempts)" -eq 3 ]
}

@test "a job using the helper, preempted by an urgent one: it checkpoints, the urgent job runs, it resumes and finishes, its steps continuous" {
	printf 'preemption:\n  enabled: true\n  min_runtime_seconds: 0\n' >> "$C"
	start_daemon
	low=$(hjob 200 "$T/steps")
	wait_for 20 '[ "$(wc -l < "$T/steps" 2>/dev/null)" -ge 10 ]'
	high=$(sub --priority 10 -- sh -c 'echo urgent >> "$0"' "$T/urgent")
	wait_for 30 '[ "$(field "$high" state)" = succeeded ]'
	wait_for 30 final "$low"
	[ "$(field "$low" state)" = succeeded ]
	continuous 200 "$T/steps"
	[ "$(field "$low" attempts)" -ge 2 ]
	grep -q "job $high: preempting job $low on local" "$T/daemon.log"
}

@test "examples/torch_job.py (cardbaton.torch, real PyTorch): paused and resumed by the queue, twice, it ends with weights bit-identical to an uninterrupted run" {
	python3 -c 'import torch' 2>/dev/null || skip "python3 has no torch (Debian: python3-torch)"
	py=$CB_TOP/examples/torch_job.py
	python3 "$py" --steps 400 --out "$T/plain.pt" --checkpoint "$T/plain.ck"
	[ ! -e "$T/plain.ck" ]
	start_daemon
	args=(python3 "$py" --steps 400 --out "$T/queued.pt" --checkpoint "$T/queued.ck")
	id=$(sub --env "PYTHONPATH=$PYTHONPATH" --resume-command "${args[*]}" -- "${args[@]}")
	for round in 1 2; do
		wait_for 30 '[ "$(field "$id" state)" = running ]'
		sleep 0.5
		cardbaton-pause --config "$C" "$id"
		wait_for 30 '[ "$(field "$id" state)" = paused ] || final "$id"'
		[ "$(field "$id" state)" = paused ] || break     # it had ended first
		cardbaton-resume --config "$C" "$id"
	done
	wait_for 60 final "$id"
	[ "$(field "$id" state)" = succeeded ]
	[ "$(field "$id" attempts)" -ge 2 ]
	python3 -c 'import sys, torch
a, b = torch.load(sys.argv[1]), torch.load(sys.argv[2])
sys.exit(0 if a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a) else 1)' "$T/plain.pt" "$T/queued.pt"
}
