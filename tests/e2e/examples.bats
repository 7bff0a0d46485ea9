#!/usr/bin/env bats
# examples.bats - the files in examples/, without the daemon.
#
# The checkpoint jobs are driven directly, as the worker drives them: the
# test sets SSHGPU_PAUSE_FILE and SSHGPU_CHECKPOINT_READY, creates the pause
# file while the job runs, expects exit 75 and a valid marker, and resumes
# with SSHGPU_CHECKPOINT set to the marker's path (SPEC §9).  A job paused
# any number of times must end with the same result, byte for byte, and the
# same step log (every step once, in order) as a run never paused.  The
# configs and the sweep are checked with the real parsers and submit.

load ../lib/common

bats_require_minimum_version 1.5.0
test_timeout 60

setup() {
	setup_common
	EX=$CB_TOP/examples
	PY=$EX/checkpoint_job.py
	SH=$EX/checkpoint_job.sh
	LOG=$T/steps.log
	PYJOB=(python3 "$PY" --steps 200 --log "$LOG" --result "$T/result.json")
	SHJOB=(sh "$SH" 200)
	export SSHGPU_PAUSE_FILE=$T/pause SSHGPU_CHECKPOINT_READY=$T/ready
	unset SSHGPU_CHECKPOINT CARDBATON_CHECKPOINT CARDBATON_PAUSE_FILE \
		CARDBATON_CHECKPOINT_READY CHECKPOINT_DIR
}

teardown() {
	teardown_common
}

# marker FILE: the checkpoint path FILE publishes, when FILE is exactly
# {"checkpoint": ABSOLUTE_PATH_OF_A_FILE}; fails otherwise.
marker() {
	python3 - "$1" <<-'EOF'
		import json, os, sys
		d = json.load(open(sys.argv[1]))
		assert isinstance(d, dict) and list(d) == ["checkpoint"], d
		p = d["checkpoint"]
		assert isinstance(p, str) and os.path.isabs(p) and os.path.isfile(p), p
		print(p)
	EOF
}

# pause_at LINES CMD...: run CMD in the background; once the step log has
# LINES lines create the pause file; expect exit 75, a valid marker and no
# temporary file left beside the state or the marker.  Sets CKPT to the
# published path.
pause_at() {
	local lines=$1 pid rc=0 ready=${SSHGPU_CHECKPOINT_READY:-$CARDBATON_CHECKPOINT_READY}
	local pause=${SSHGPU_PAUSE_FILE:-$CARDBATON_PAUSE_FILE}
	shift
	rm -f "$ready"
	"$@" 2>>"$T/job.err" &
	pid=$!
	wait_for 10 '[ "$(wc -l < "$LOG")" -ge "$lines" ]'
	touch "$pause"
	wait "$pid" || rc=$?
	rm -f "$pause"
	if [ "$rc" -ne 75 ]; then
		echo "exit $rc, expected 75 (the pause at $lines lines came too late?)" >&2
		cat "$T/job.err" >&2
		return 1
	fi
	CKPT=$(marker "$ready")
	[ -z "$(ls -A "$(dirname "$CKPT")" | grep -v -x "$(basename "$CKPT")")" ]
	[ -z "$(ls -A "$(dirname "$ready")" | grep '\.tmp$')" ]
}

# steps_once N FILE: FILE's lines are "step 1 ..." to "step N ...", in order.
steps_once() {
	diff <(cut -d' ' -f1-2 "$2") <(seq -f 'step %g' 1 "$1")
}

# The jobs run 200 steps: slowly (10 ms a step) while a pause is coming,
# so that it always comes before the end, then at full speed: the time per
# step is not part of the state.  A full run at full speed is the
# reference.  (Arrays, not functions: in the background, $! is then the
# job itself, not a subshell.)

py_reference() {
	python3 "$PY" --steps 200 --step-seconds 0 --log "$T/full.log" --result "$T/full.json"
	steps_once 200 "$T/full.log"
}

@test "checkpoint_job.py: paused once, resumed: the same result and step log as a full run" {
	py_reference
	pause_at 20 "${PYJOB[@]}" --step-seconds 0.01
	[ "$CKPT" = "$T/checkpoints/checkpoint.json" ]
	[ ! -e "$T/result.json" ]
	[ "$(wc -l < "$LOG")" -lt 200 ]
	SSHGPU_CHECKPOINT=$CKPT "${PYJOB[@]}" --step-seconds 0
	cmp "$T/full.json" "$T/result.json"
	cmp "$T/full.log" "$LOG"
	steps_once 200 "$LOG"
}

@test "checkpoint_job.py: paused twice (SSHGPU_* then CARDBATON_* names), resumed: identical" {
	py_reference
	pause_at 15 "${PYJOB[@]}" --step-seconds 0.01 --checkpoint-dir "$T/ck dir"
	first=$(wc -l < "$LOG")
	SSHGPU_CHECKPOINT=$CKPT pause_at 35 "${PYJOB[@]}" --step-seconds 0.01 --checkpoint-dir "$T/ck dir"
	[ "$(wc -l < "$LOG")" -gt "$first" ]
	unset SSHGPU_PAUSE_FILE SSHGPU_CHECKPOINT_READY
	CARDBATON_PAUSE_FILE=$T/pause2 CARDBATON_CHECKPOINT_READY=$T/ready2 CARDBATON_CHECKPOINT=$CKPT \
		pause_at 50 "${PYJOB[@]}" --step-seconds 0.01 --checkpoint-dir "$T/ck dir"
	[ "$CKPT" = "$T/ck dir/checkpoint.json" ]
	CARDBATON_CHECKPOINT=$CKPT "${PYJOB[@]}" --step-seconds 0 --checkpoint-dir "$T/ck dir"
	cmp "$T/full.json" "$T/result.json"
	cmp "$T/full.log" "$LOG"
	[ "$(json 'd["steps"]' < "$T/result.json")" = 200 ]
}

@test "checkpoint_job.py: SIGTERM: dies of it, no marker, no temporary file" {
	"${PYJOB[@]}" --step-seconds 0.05 2>"$T/job.err" &
	pid=$!
	wait_for 10 '[ "$(wc -l < "$LOG")" -ge 5 ]'
	kill -TERM "$pid"
	rc=0
	wait "$pid" || rc=$?
	[ "$rc" -eq 143 ]
	[ ! -e "$T/ready" ]
	[ ! -e "$T/result.json" ]
	[ ! -e "$T/checkpoints" ]
	grep -q 'stopped by SIGTERM' "$T/job.err"
}

@test "checkpoint_job.py: resumed again from a checkpoint after a killed attempt: steps after it dropped" {
	py_reference
	pause_at 15 "${PYJOB[@]}" --step-seconds 0.01
	cp "$CKPT" "$T/saved.json"
	rm "$T/ready"
	# The resumed attempt runs on, then is killed without a checkpoint.
	SSHGPU_CHECKPOINT=$CKPT "${PYJOB[@]}" --step-seconds 0.01 2>>"$T/job.err" &
	pid=$!
	wait_for 10 '[ "$(wc -l < "$LOG")" -ge 30 ]'
	kill -TERM "$pid"
	rc=0
	wait "$pid" || rc=$?
	[ "$rc" -eq 143 ]
	[ ! -e "$T/ready" ]
	cmp "$CKPT" "$T/saved.json"
	SSHGPU_CHECKPOINT=$CKPT "${PYJOB[@]}" --step-seconds 0
	cmp "$T/full.json" "$T/result.json"
	cmp "$T/full.log" "$LOG"
}

@test "checkpoint_job.py: paused after its first step (a cached Gaussian in the generator): identical" {
	py_reference
	touch "$T/pause"
	pause_at 0 "${PYJOB[@]}" --step-seconds 0
	[ "$(json 'd["step"]' < "$CKPT")" = 1 ]
	# random.gauss() made 15 values, in pairs: the 16th waits in the state.
	[ "$(json 'd["rng"][2] is not None' < "$CKPT")" = True ]
	SSHGPU_CHECKPOINT=$CKPT "${PYJOB[@]}" --step-seconds 0
	cmp "$T/full.json" "$T/result.json"
	cmp "$T/full.log" "$LOG"
}

@test "checkpoint_job.py: a missing or foreign checkpoint is refused, not 75; --help" {
	run -66 env SSHGPU_CHECKPOINT="$T/nothing" python3 "$PY" --steps 3 --step-seconds 0
	[[ "$output" == *"no such file"* ]]
	touch "$T/pause"
	pause_at 0 "${PYJOB[@]}" --step-seconds 0
	run -65 env SSHGPU_CHECKPOINT="$CKPT" python3 "$PY" --steps 200 --lr 0.5 --log "$LOG"
	[[ "$output" == *"made with"* ]]
	run -64 python3 "$PY" --no-such-flag
	run -0 python3 "$PY" --help
	[[ "$output" == *SSHGPU_PAUSE_FILE* ]]
	[[ "$output" == *SSHGPU_CHECKPOINT_READY* ]]
}

@test "checkpoint_job.sh: paused twice, resumed: the step log of a full run" {
	out=$(sh "$SH" 200 0 "$T/full.log")
	[ "$out" = "done after 200 steps" ]
	steps_once 200 "$T/full.log"
	pause_at 15 "${SHJOB[@]}" 0.01 "$LOG"
	[ "$CKPT" = "$T/checkpoints/state" ]
	SSHGPU_CHECKPOINT=$CKPT CHECKPOINT_DIR="$T/o\"dd dir" pause_at 35 "${SHJOB[@]}" 0.01 "$LOG"
	[ "$CKPT" = "$T/o\"dd dir/state" ]
	out=$(SSHGPU_CHECKPOINT=$CKPT "${SHJOB[@]}" 0 "$LOG")
	[ "$out" = "done after 200 steps" ]
	cmp "$T/full.log" "$LOG"
}

@test "checkpoint_job.sh: SIGTERM: dies of it, no marker, no temporary file" {
	sh "$SH" 100 0.05 "$LOG" 2>"$T/job.err" &
	pid=$!
	wait_for 10 '[ "$(wc -l < "$LOG")" -ge 5 ]'
	kill -TERM "$pid"
	rc=0
	wait "$pid" || rc=$?
	[ "$rc" -ne 0 ] && [ "$rc" -ne 75 ]
	[ ! -e "$T/ready" ]
	[ -z "$(ls -A "$T" | grep '\.tmp$')" ]
}

@test "the shell examples are POSIX sh" {
	for f in "$SH" "$EX/sweep.sh" "$EX/hook-mail.sh" "$EX/hook-webhook.sh"; do
		sh -n "$f"
		if command -v dash >/dev/null; then dash -n "$f"; fi
		if command -v checkbashisms >/dev/null; then checkbashisms -p -x "$f"; fi
		if command -v shellcheck >/dev/null; then shellcheck -s sh "$f"; fi
	done
	python3 -c 'import py_compile, sys; py_compile.compile(sys.argv[1], sys.argv[2], doraise=True)' \
		"$PY" "$T/checkpoint_job.pyc"
}

@test "cluster.yaml parses, with every config key" {
	run -0 cardbaton-status --config "$EX/cluster.yaml"
	for k in spool remote_state_dir ssh_command reserve_after_seconds nodes; do
		grep -q "^$k:" "$EX/cluster.yaml"
	done
	for k in ssh local gpus idle_mib public_key; do
		grep -Eq "^    $k:" "$EX/cluster.yaml"
	done
	# on_finish, shown commented out (a hook runs a command for every job).
	grep -Eq "^# on_finish: " "$EX/cluster.yaml"
	grep -Eq "^    # on_finish: " "$EX/cluster.yaml"
	sed -E 's/^( *)# (on_finish: )/\1\2/' "$EX/cluster.yaml" > "$T/hooked.yaml"
	run -0 cardbaton-status --config "$T/hooked.yaml"
}

# The hooks run as the daemon runs them (hooks.bats): the job's element
# on standard input, CARDBATON_JOB_* set; here with a PATH of fakes.
hook_env() { # PATH STATE CMD...
	local p=$1 s=$2
	shift 2
	printf '%s\n' "$EL" | env PATH="$p" CARDBATON_JOB_ID=7 CARDBATON_JOB_STATE="$s" \
		CARDBATON_JOB_NAME='lr=0.1/seed=2' /bin/sh "$@"
}

# fake NAME: $T/fake/NAME records its arguments (one a line) in
# $T/NAME.args and its standard input in $T/NAME.in, then exits
# $FAKE_EXIT (0).
fake() {
	mkdir -p "$T/fake"
	[ -e "$T/fake/cat" ] || ln -s "$(command -v cat)" "$T/fake/cat"
	cat > "$T/fake/$1" <<-EOF
	#!/bin/sh
	printf '%s\n' "\$@" > "$T/$1.args"
	cat > "$T/$1.in"
	exit \${FAKE_EXIT:-0}
	EOF
	chmod +x "$T/fake/$1"
}

EL='{"id":"7","name":"lr=0.1/seed=2","state":"failed","exit_code":3}'

@test "hook-mail.sh: mails the jobs that end failed or lost (or in the states named), the element as the body; mail, else sendmail" {
	fake mail
	hook_env "$T/fake" failed "$EX/hook-mail.sh" you@example.org
	[ "$(cat "$T/mail.args")" = "$(printf '%s\n' -s 'cardbaton: job 7 (lr=0.1/seed=2) failed' -- you@example.org)" ]
	[ "$(cat "$T/mail.in")" = "$EL" ]
	rm "$T/mail.args"
	hook_env "$T/fake" succeeded "$EX/hook-mail.sh" you@example.org
	[ ! -e "$T/mail.args" ]
	hook_env "$T/fake" succeeded "$EX/hook-mail.sh" you@example.org succeeded failed
	grep -qx 'cardbaton: job 7 (lr=0.1/seed=2) succeeded' "$T/mail.args"
	# Without mail(1): sendmail, the headers its own.
	rm "$T/fake/mail"
	fake sendmail
	hook_env "$T/fake" lost "$EX/hook-mail.sh" you@example.org
	[ "$(cat "$T/sendmail.args")" = "$(printf '%s\n' -i -- you@example.org)" ]
	[ "$(cat "$T/sendmail.in")" = "$(printf 'To: you@example.org\nSubject: cardbaton: job 7 (lr=0.1/seed=2) lost\nContent-Type: application/json\n\n%s' "$EL")" ]
	# A failed send is the hook's failure; neither program: 69, one line.
	FAKE_EXIT=75 run hook_env "$T/fake" lost "$EX/hook-mail.sh" you@example.org
	[ "$status" -eq 75 ]
	rm "$T/fake/sendmail"
	if [ ! -x /usr/sbin/sendmail ] && [ ! -x /usr/lib/sendmail ]; then
		run --separate-stderr hook_env "$T/fake" lost "$EX/hook-mail.sh" you@example.org
		[ "$status" -eq 69 ]
		[ "$stderr" = "hook-mail.sh: neither mail nor sendmail is installed" ]
	fi
	run hook_env "$T/fake" lost "$EX/hook-mail.sh"
	[ "$status" -ne 0 ]
}

@test "hook-webhook.sh: POSTs the element as is to the URL with curl, failing when curl does" {
	fake curl
	hook_env "$T/fake" failed "$EX/hook-webhook.sh" 'https://hooks.example.org/cb?x=1'
	[ "$(cat "$T/curl.in")" = "$EL" ]
	grep -A1 -x -- --data-binary "$T/curl.args" | tail -n1 | grep -qx '@-'
	grep -A1 -x -- --url "$T/curl.args" | tail -n1 | grep -qx 'https://hooks.example.org/cb?x=1'
	grep -qx 'Content-Type: application/json' "$T/curl.args"
	grep -qx 'X-CardBaton-Job: 7' "$T/curl.args"
	grep -qx -- --fail "$T/curl.args"
	FAKE_EXIT=22 run hook_env "$T/fake" failed "$EX/hook-webhook.sh" https://hooks.example.org/cb
	[ "$status" -eq 22 ]
	run hook_env "$T/fake" failed "$EX/hook-webhook.sh"
	[ "$status" -ne 0 ]
}

@test "job.yaml submits, with every job field" {
	sed "s|^spool:.*|spool: $T/spool|" "$EX/cluster.yaml" > "$T/cluster.yaml"
	id=$(cardbaton-submit --config "$T/cluster.yaml" --job "$EX/job.yaml")
	[[ "$id" =~ ^[0-9]+$ ]]
	cardbaton-status --config "$T/cluster.yaml" --json "$id" > "$T/st.json"
	[ "$(json 'd["jobs"][0]["state"]' < "$T/st.json")" = queued ]
	[ "$(json 'd["jobs"][0]["node"]' < "$T/st.json")" = lab-a ]
	[ "$(json 'd["jobs"][0]["priority"]' < "$T/st.json")" = 10 ]
	f=$(ls "$T"/spool/new/*-"$(printf %010d "$id")".job)
	json 'd["resume_command"]' < "$f" | grep -q '^python3 checkpoint_job.py '
	[ "$(json 'd["checkpoint_grace_seconds"]' < "$f")" = 120 ]
	for k in command cwd node gpus gpu_count priority timeout_seconds resume_command \
		checkpoint_grace_seconds env name; do
		grep -Eq "^(# )?$k:" "$EX/job.yaml"
	done
}

@test "sweep.sh submits one job per learning rate and seed, and prints their IDs" {
	cd "$HOME"
	ids=$(CARDBATON=$CB_BUILD/cardbaton CONFIG=$T/config.yaml LRS="0.1 0.01" SEEDS="0 1 2" \
		sh "$EX/sweep.sh" --steps 10 2>"$T/sweep.err")
	[ "$(printf '%s\n' "$ids" | grep -cE '^[0-9]+$')" -eq 6 ]
	[ "$(printf '%s\n' "$ids" | sort -u | wc -l)" -eq 6 ]
	cardbaton-status --config "$T/config.yaml" --json $ids > "$T/st.json"
	[ "$(json '" ".join(j["name"] for j in d["jobs"])' < "$T/st.json")" = \
		"lr=0.1/seed=0 lr=0.1/seed=1 lr=0.1/seed=2 lr=0.01/seed=0 lr=0.01/seed=1 lr=0.01/seed=2" ]
	[ "$(json 'd["jobs"][5]["command"]' < "$T/st.json")" = \
		'["python3", "train.py", "--lr", "0.01", "--seed", "2", "--steps", "10"]' ]
	# A failed submission stops the sweep with cardbaton's status.
	run -78 env CARDBATON=$CB_BUILD/cardbaton CONFIG=$T/missing.yaml sh "$EX/sweep.sh"
}

@test "cardbaton-spoold.service verifies" {
	command -v systemd-analyze >/dev/null || skip "no systemd-analyze"
	mkdir -p "$HOME/.local/bin"
	ln -s "$CB_BUILD/cardbaton-spoold" "$HOME/.local/bin/cardbaton-spoold"
	run -0 systemd-analyze verify --man=no "$EX/cardbaton-spoold.service"
	# Unknown keys and bad values are only warnings, naming the unit.
	[[ "$output" != *cardbaton-spoold.service* ]]
	grep -qx 'KillMode=process' "$EX/cardbaton-spoold.service"
}
