#!/usr/bin/env bats
# Checkpoint pause and resume, time limits, cancel in every state, and
# freeing a card for an urgent job (SPEC §9), on the local node.
# tests/e2e/ssh.bats has the same contract against an SSH test host.

load ../lib/common

setup() {
	setup_common
	C=$T/config.yaml
	fake_gpus "0, GPU-00000000-0000-0000-0000-000000000000, NVIDIA Fake A100, 0, 81920, 0"
	coop_script > "$T/coop.sh"
}

teardown() {
	teardown_common
}

sub() { cardbaton-submit --config "$C" "$@"; }
st() { cardbaton-status --config "$C" "$@"; }
state() { st --json "$1" | json 'd["jobs"][0]["state"]'; }
field() { st --json "$1" | json "d[\"jobs\"][0][\"$2\"]"; }
final() {
	case "$(state "$1")" in succeeded|failed|cancelled|lost) return 0 ;; esac
	return 1
}
record() { cat "$T"/spool/*/"$(printf %010d "$1").job"; }

# A cooperating job in POSIX sh: N steps, one line each in LOG; at the
# pause file it saves its step, publishes the marker, exits 75; resumed,
# it continues after the saved step.  IGNORE=1: it never checkpoints.
# NOMARKER=1: it exits 75 without publishing the marker.  SLOWSAVE=S:
# it takes S seconds to save (so that the pausing state is seen).
coop_script() {
	cat <<-'SH'
		n=$1 log=$2 i=0
		if [ -n "${SSHGPU_CHECKPOINT:-}" ]; then i=$(cat "$SSHGPU_CHECKPOINT"); fi
		[ "${CARDBATON_CHECKPOINT:-}" = "${SSHGPU_CHECKPOINT:-}" ] || exit 9
		while [ "$i" -lt "$n" ]; do
			i=$((i + 1))
			echo "step $i" >> "$log"
			sleep 0.05
			if [ -e "$SSHGPU_PAUSE_FILE" ] && [ -z "${IGNORE:-}" ]; then
				[ -n "${NOMARKER:-}" ] && exit 75
				sleep "${SLOWSAVE:-0}"
				echo "$i" > "$log.ck.tmp" && mv "$log.ck.tmp" "$log.ck"
				printf '{"checkpoint": "%s"}\n' "$log.ck" > "$SSHGPU_CHECKPOINT_READY.tmp"
				mv "$SSHGPU_CHECKPOINT_READY.tmp" "$SSHGPU_CHECKPOINT_READY"
				exit 75
			fi
		done
	SH
}

coop() { # coop N LOG [submit flags...]
	local n=$1 log=$2
	shift 2
	sub --resume-command "sh $T/coop.sh $n $log" "$@" -- sh "$T/coop.sh" "$n" "$log"
}

# The step log has every step 1..N exactly once, in order.
continuous() {
	[ "$(cat "$2")" = "$(seq 1 "$1" | sed 's/^/step /')" ]
}

@test "pause -> pausing -> paused -> resume -> succeeded, the step log continuous, two attempts with their own logs" {
	start_daemon
	# A second to save: the pausing state is there to be seen (a job
	# that saves at once may be paused before the daemon hears that
	# the node was asked, and its record goes straight to paused).
	id=$(coop 60 "$T/steps" --env SLOWSAVE=1)
	wait_for 10 '[ "$(wc -l < "$T/steps" 2>/dev/null)" -ge 5 ]'
	cardbaton-pause --config "$C" "$id"
	wait_for 5 '[ "$(state "$id")" = pausing ]'
	grep -q "job $id: pausing" "$T/daemon.log"
	wait_for 10 '[ "$(state "$id")" = paused ]'
	[ "$(record "$id" | json 'd["checkpoint"]')" = "$T/steps.ck" ]
	[ "$(record "$id" | json 'd["attempts"][0]["state"]')" = paused ]
	[ "$(record "$id" | json 'd["attempts"][0]["exit_code"]')" = 75 ]
	# The card is free while it is paused.
	[ "$(cardbaton-gpus --config "$C" --json | json 'd["nodes"][0]["gpus"][0]["idle"]')" = True ]
	cardbaton-resume --config "$C" "$id"
	wait_for 20 final "$id"
	[ "$(state "$id")" = succeeded ]
	continuous 60 "$T/steps"
	[ "$(field "$id" attempts)" -eq 2 ]
	[ "$(record "$id" | json 'd["attempts"][1]["node"]')" = local ]
	# Each attempt has its own log.
	[ "$(record "$id" | json 'd["attempts"][0]["log"] != d["attempts"][1]["log"]')" = True ]
	cardbaton-logs --config "$C" --attempt 0 "$id" >/dev/null
	cardbaton-logs --config "$C" --attempt 1 "$id" >/dev/null
}

@test "a resume_command list is the resumed attempt's exact argv: spaces, quotes, \$, a newline arrive as they are, no shell between" {
	start_daemon
	# Writes its arguments but the first (NUL after each) to the file
	# named by the first, then runs what follows the three test words.
	cat > "$T/argv.sh" <<-'SH'
		out=$1; shift
		printf '%s\0' "$@" > "$out"
		shift 3
		exec "$@"
	SH
	w1='two  spaces, "double" and '"'single'"' quotes'
	w2='$HOME ${X:-x} $(touch '"$T"'/expanded) `touch '"$T"'/expanded` * ~ \'
	w3=$'line\nbreak\ttab'
	python3 -c 'import json, sys; a = sys.argv[1:]; print(json.dumps({
		"command": ["sh", a[0], "60", a[1]],
		"resume_command": ["sh", a[2], a[3], a[4], a[5], a[6], "sh", a[0], "60", a[1]]}))' \
		"$T/coop.sh" "$T/steps" "$T/argv.sh" "$T/argv.out" "$w1" "$w2" "$w3" > "$T/list.job"
	id=$(sub --job "$T/list.job")
	wait_for 10 '[ "$(wc -l < "$T/steps" 2>/dev/null)" -ge 5 ]'
	cardbaton-pause --config "$C" "$id"
	wait_for 10 '[ "$(state "$id")" = paused ]'
	# The record keeps the list.
	record "$id" | python3 -c 'import json, sys; sys.exit(json.load(sys.stdin)["job"]["resume_command"][3:6] != sys.argv[1:])' \
		"$w1" "$w2" "$w3"
	cardbaton-resume --config "$C" "$id"
	wait_for 20 final "$id"
	[ "$(state "$id")" = succeeded ]
	# Resumed from its checkpoint (SSHGPU_CHECKPOINT set): every step once.
	continuous 60 "$T/steps"
	printf '%s\0' "$w1" "$w2" "$w3" sh "$T/coop.sh" 60 "$T/steps" | cmp - "$T/argv.out"
	[ ! -e "$T/expanded" ]
	# The launch sent it as arg fields, with the checkpoint, not a shell string.
	spec=$STATE/attempts/$(record "$id" | json 'd["attempts"][1]["id"]')/spec
	[ "$(grep -c '^arg ' "$spec")" -eq 10 ]
	not grep -q '^shell ' "$spec"
	[ "$(sed -n 's/^checkpoint //p' "$spec")" = "$T/steps.ck" ]
}

@test "pause is refused for a job that is not resumable, or not running; resume for one not paused" {
	start_daemon
	plain=$(sub -- sleep 30)
	wait_for 10 '[ "$(state "$plain")" = running ]'
	run cardbaton-pause --config "$C" "$plain"
	[ "$status" -eq 1 ]
	[[ "$output" == *"not resumable"* ]]
	queued=$(coop 5 "$T/q")
	run cardbaton-pause --config "$C" "$queued"
	[ "$status" -eq 1 ]
	[[ "$output" == *"not running"* ]]
	run cardbaton-resume --config "$C" "$queued"
	[ "$status" -eq 1 ]
	[[ "$output" == *"not paused"* ]]
	run cardbaton-pause --config "$C" 999
	[ "$status" -eq 66 ]
}

@test "a job that exits 75 without a marker after a pause fails, and says why" {
	start_daemon
	id=$(coop 100 "$T/steps" --env NOMARKER=1)
	wait_for 10 '[ "$(wc -l < "$T/steps" 2>/dev/null)" -ge 3 ]'
	cardbaton-pause --config "$C" "$id"
	wait_for 10 final "$id"
	[ "$(state "$id")" = failed ]
	[[ "$(field "$id" reason)" == *"no checkpoint marker"* ]]
}

@test "time limits: a non-resumable job is killed with its processes; a resumable one checkpoints, re-queues and finishes" {
	start_daemon
	plain=$(sub --timeout 1 -- sh -c 'sleep 300 & echo $! > "$0"; wait' "$T/child")
	wait_for 20 final "$plain"
	[ "$(state "$plain")" = failed ]
	[ "$(field "$plain" reason)" = timeout ]
	not kill -0 "$(cat "$T/child")" 2>/dev/null
	res=$(coop 60 "$T/steps" --timeout 1)
	wait_for 30 final "$res"
	[ "$(state "$res")" = succeeded ]
	continuous 60 "$T/steps"
	[ "$(field "$res" attempts)" -ge 2 ]
	[ "$(record "$res" | json 'd["attempts"][0]["state"]')" = paused ]
}

@test "a resumable job that ignores the pause request fails after its limit plus grace" {
	start_daemon
	id=$(coop 400 "$T/steps" --timeout 1 --env IGNORE=1 --job /dev/stdin <<< 'checkpoint_grace_seconds: 1')
	wait_for 30 final "$id"
	[ "$(state "$id")" = failed ]
	[ "$(field "$id" reason)" = timeout ]
	n=$(wc -l < "$T/steps")
	settle 0.3
	[ "$(wc -l < "$T/steps")" -eq "$n" ]
}

@test "the time limit holds while the daemon is stopped" {
	start_daemon
	id=$(sub --timeout 2 -- sh -c 'echo $$ > "$0"; exec sleep 300' "$T/pid")
	wait_for 10 '[ -s "$T/pid" ]'
	stop_daemon
	wait_for 15 '! kill -0 "$(cat "$T/pid")" 2>/dev/null'
	start_daemon
	wait_for 15 final "$id"
	[ "$(state "$id")" = failed ]
	[ "$(field "$id" reason)" = timeout ]
}

@test "cancel in every state; no process or lease left behind" {
	start_daemon
	run_id=$(coop 400 "$T/r")
	wait_for 10 '[ "$(state "$run_id")" = running ]'
	q=$(coop 5 "$T/q")
	cardbaton-cancel --config "$C" "$q"
	wait_for 10 '[ "$(state "$q")" = cancelled ]'
	cardbaton-cancel --config "$C" "$run_id"
	wait_for 15 '[ "$(state "$run_id")" = cancelled ]'
	p=$(coop 400 "$T/p")
	wait_for 10 '[ "$(state "$p")" = running ]'
	cardbaton-pause --config "$C" "$p"
	wait_for 10 '[ "$(state "$p")" = paused ]'
	cardbaton-cancel --config "$C" "$p"
	wait_for 10 '[ "$(state "$p")" = cancelled ]'
	# pausing: a job that never acknowledges.
	g=$(coop 400 "$T/g" --env IGNORE=1)
	wait_for 10 '[ "$(state "$g")" = running ]'
	cardbaton-pause --config "$C" "$g"
	wait_for 10 '[ "$(state "$g")" = pausing ]'
	cardbaton-cancel --config "$C" "$g"
	wait_for 15 '[ "$(state "$g")" = cancelled ]'
	# Nothing of theirs runs (nothing holds an attempt's files or a
	# lease; the daemon's watch holds only the attempts directory), and
	# the card's lease is free.
	# (A cancel request's worker may take a moment to exit after the end.)
	wait_for 5 '[ -z "$(find /proc/[0-9]*/fd -maxdepth 1 \( -lname "$STATE/attempts/*" -o -lname "$STATE/leases/*" \) 2>/dev/null)" ]'
	[ "$(cardbaton-gpus --config "$C" --json | json 'd["nodes"][0]["gpus"][0]["lease"]')" = None ]
}

@test "one card: promote the urgent job, pause the running one; the urgent job runs there, then the first resumes and finishes" {
	start_daemon
	first=$(coop 80 "$T/steps")
	wait_for 10 '[ "$(wc -l < "$T/steps" 2>/dev/null)" -ge 3 ]'
	filler=$(sub -- sh -c 'echo filler >> "$0"' "$T/order")
	urgent=$(sub -- sh -c 'echo "urgent $CUDA_VISIBLE_DEVICES" >> "$0"' "$T/order")
	cardbaton-promote --config "$C" "$urgent"
	cardbaton-pause --config "$C" "$first"
	wait_for 15 final "$urgent"
	[ "$(head -1 "$T/order")" = "urgent GPU-00000000-0000-0000-0000-000000000000" ]
	[ "$(state "$first")" = paused ]
	cardbaton-resume --config "$C" "$first"
	wait_for 30 final "$first"
	[ "$(state "$first")" = succeeded ]
	continuous 80 "$T/steps"
	[ "$(record "$first" | json '[a["node"] for a in d["attempts"]]')" = '["local", "local"]' ]
}

@test "examples/checkpoint_job.py paused and resumed by the queue ends exactly as an uninterrupted run" {
	command -v python3 >/dev/null || skip "python3 missing"
	py=$CB_TOP/examples/checkpoint_job.py
	args="--steps 120 --step-seconds 0.01 --seed 7"
	python3 "$py" $args --log "$T/full.log" --checkpoint-dir "$T/ck-full" --result "$T/full.json"
	start_daemon
	cmd="python3 $py $args --log $T/q.log --checkpoint-dir $T/ck --result $T/q.json"
	id=$(sub --resume-command "$cmd" -- sh -c "$cmd")
	wait_for 10 '[ "$(wc -l < "$T/q.log" 2>/dev/null)" -ge 10 ]'
	cardbaton-pause --config "$C" "$id"
	wait_for 10 '[ "$(state "$id")" = paused ]'
	cardbaton-resume --config "$C" "$id"
	wait_for 30 final "$id"
	[ "$(state "$id")" = succeeded ]
	cmp "$T/full.json" "$T/q.json"
	cmp "$T/full.log" "$T/q.log"
	[ "$(field "$id" attempts)" -eq 2 ]
}
