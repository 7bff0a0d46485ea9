#!/usr/bin/env bats
# tools.bats - the command-line tools (bin/): cardbaton, sshgpu,
# cardbaton-submit, -status, -logs, -promote, -cancel, -gpus (-wait:
# wait.bats).
#
# Most tests run with the daemon stopped: every tool must work without
# it (SPEC §2, §5).  Records of running or finished jobs are either
# written by hand in the format of LAYOUT.md §6 or, where a real node
# is needed (logs, cancel of a running job, leases), made by one run of
# cardbaton-spoold that is stopped again before the tool under test runs.

load ../lib/common

bats_require_minimum_version 1.5.0
test_timeout 60

setup() {
	setup_common
	C=$T/config.yaml
}

teardown() {
	if mountpoint -q "$T/full" 2>/dev/null; then umount "$T/full"; fi
	teardown_common
}

sub() { cardbaton-submit --config "$C" "$@"; }
st() { cardbaton-status --config "$C" "$@"; }

# newfile ID: the job file submit wrote into new/ for job ID.
newfile() { ls "$T"/spool/new/*-"$(printf %010d "$1")".job; }

# jf ID EXPR: a Python expression over job ID's submitted file (d).
jf() { json "$2" < "$(newfile "$1")"; }

# spool_id: the spool's id (the spool is created if need be).
spool_id() {
	[ -e "$T/spool/id" ] || { sub -- true >/dev/null && rm -f "$T"/spool/new/*; }
	cut -c1-8 "$T/spool/id"
}

# record DIR NAME ID STATE REV [ATTEMPTS_JSON [PRIORITY]]: write a job
# record by hand, as the daemon would (LAYOUT.md §6).
record() {
	local dir=$1 name=$2 id=$3 state=$4 rev=$5 atts=${6:-[]} prio=${7:-0}
	spool_id >/dev/null
	cat > "$T/spool/$dir/$name" <<-EOF
	{"id": "$id", "rev": $rev, "state": "$state", "reason": "by hand",
	 "priority": $prio, "submitted_ms": 1700000000000, "queued_at_ms": 1700000000000,
	 "job": {"command": ["sleep", "$id"], "priority": $prio},
	 "attempts": $atts}
	EOF
}

# attempt N NODE STATE: one attempt of job 5 as JSON.
attempt() {
	printf '{"n": %s, "id": "%s-5-%s", "node": "%s", "gpus": [0], "state": "%s", "started_ms": 1700000001000}' \
		"$1" "$(spool_id)" "$1" "$2" "$3"
}

has_daemon() { [ -x "$CB_BUILD/cardbaton-spoold" ] && [ -x "$CB_BUILD/cardbaton-worker" ]; }

# state ID: the job's state from status --json.
state() { st --json "$1" | json 'd["jobs"][0]["state"]'; }

final() {
	case "$(state "$1")" in succeeded|failed|cancelled|lost) return 0 ;; esac
	return 1
}

# gone PID: no such process any more (or only its zombie).
gone() {
	[ ! -e "/proc/$1" ] || [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" = Z ]
}

# ---- submit -----------------------------------------------------------------

@test "submit prints the job ID alone and writes new/ under the queued grammar" {
	run --separate-stderr sub -- echo hello
	[ "$status" -eq 0 ]
	[ "$output" = 1 ]
	[ -z "$stderr" ]
	[ -f "$T/spool/new/100000000-0000000001.job" ]
	run --separate-stderr sub --priority 7 -- echo again
	[ "$output" = 2 ]
	[ -f "$T/spool/new/099999993-0000000002.job" ]
	# The spool is private to the user (LAYOUT.md §1).
	[ "$(stat -c %a "$T/spool")" = 700 ]
}

@test "submit without the daemon: status shows the job queued, waiting for the daemon" {
	id=$(sub -- echo hello)
	[ ! -e "$T/spool/lock" ]
	run st --json
	[ "$status" -eq 0 ]
	[ "$(echo "$output" | json 'd["jobs"][0]["state"]')" = queued ]
	[ "$(echo "$output" | json 'd["jobs"][0]["id"]')" = "$id" ]
	[ "$(echo "$output" | json 'd["jobs"][0]["reason"]')" = "waiting for the daemon to accept it" ]
	run st
	[ "$status" -eq 0 ]
	[[ ${lines[0]} == *ID*STATE*PRIO*NODE*GPUS*ATT*AGE*COMMAND* ]]
	[[ ${lines[1]} == *"$id"*queued*"echo hello"* ]]
}

@test "status --json has every field of SPEC §2 with its type" {
	sub --name first --gpus 0,2 --priority 3 -- python3 -c 'print(1)' >/dev/null
	st --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert list(d) == ["jobs", "nodes"], d
j = d["jobs"][0]
for k in ("id", "name", "state", "priority", "node", "gpus", "gpu_uuids", "attempts",
          "exit_code", "reason", "command", "submitted", "started", "finished", "begin"):
    assert k in j, k
assert j["id"] == "1" and j["name"] == "first" and j["state"] == "queued"
assert j["priority"] == 3 and j["node"] is None and j["gpus"] == [0, 2]
assert j["gpu_uuids"] == [] and j["attempts"] == 0 and j["exit_code"] is None
assert j["command"] == ["python3", "-c", "print(1)"]
assert j["submitted"].endswith("Z") and j["started"] is None and j["finished"] is None
assert j["begin"] is None
'
}

@test "submit: every flag lands in the job file" {
	id=$(sub --node local --gpus 1,3 --priority -4 --timeout 3600 --cwd '~/exp' \
		--name 'a name' --resume-command 'python3 train.py --resume' \
		--env A=1 --env B='x y' -- python3 train.py --seed 0)
	[ "$(jf "$id" 'd["node"]')" = local ]
	[ "$(jf "$id" 'd["gpus"]')" = "[1, 3]" ]
	[ "$(jf "$id" 'd["priority"]')" = -4 ]
	[ "$(jf "$id" 'd["timeout_seconds"]')" = 3600 ]
	[ "$(jf "$id" 'd["cwd"]')" = "~/exp" ]
	[ "$(jf "$id" 'd["name"]')" = "a name" ]
	[ "$(jf "$id" 'd["resume_command"]')" = "python3 train.py --resume" ]
	[ "$(jf "$id" 'd["env"]')" = '{"A": "1", "B": "x y"}' ]
	[ "$(jf "$id" 'd["command"]')" = '["python3", "train.py", "--seed", "0"]' ]
	# The queued/ name grammar carries the priority.
	[ -f "$T/spool/new/100000004-$(printf %010d "$id").job" ]
	id=$(sub --gpu-count 0 -- true)
	[ "$(jf "$id" 'd["gpu_count"]')" = 0 ]
}

@test "submit: the command after -- is an exact argv, and -- may be left out" {
	id=$(sub -- printf '%s|' 'a b' "it's" '' '$HOME' '--flag')
	[ "$(jf "$id" 'd["command"]')" = '["printf", "%s|", "a b", "it'"'"'s", "", "$HOME", "--flag"]' ]
	id=$(sub --priority 1 python3 train.py --seed 3)
	[ "$(jf "$id" 'd["command"]')" = '["python3", "train.py", "--seed", "3"]' ]
	[ "$(jf "$id" 'd["priority"]')" = 1 ]
}

@test "submit --job: YAML and JSON job files, and standard input" {
	cat > job.yaml <<-'EOF'
	command: [python3, train.py]
	priority: 3
	gpus: [1]
	name: from yaml
	EOF
	id=$(sub --job job.yaml)
	[ "$(jf "$id" 'd["name"]')" = "from yaml" ]
	[ "$(jf "$id" 'd["gpus"]')" = "[1]" ]
	echo '{"command": "echo hi && echo there", "priority": 2}' > job.json
	id=$(sub --job job.json)
	[ "$(jf "$id" 'd["command"]')" = "echo hi && echo there" ]
	id=$(printf 'command: [true]\nname: stdin\n' | sub --job -)
	[ "$(jf "$id" 'd["name"]')" = stdin ]
	# A symbolic link to a job file is an ordinary user file.
	ln -s job.yaml link.yaml
	id=$(sub --job link.yaml)
	[ "$(jf "$id" 'd["name"]')" = "from yaml" ]
}

@test "submit --job: flags override the file's fields" {
	cat > job.yaml <<-'EOF'
	command: [python3, train.py]
	priority: 3
	gpus: [1, 2]
	gpu_count: 2
	timeout_seconds: 60
	name: file
	env:
	  A: "1"
	  B: "2"
	EOF
	id=$(sub --job job.yaml --priority 9 --timeout 120 --name flag --env B=3 --env C=4 -- ls -l)
	[ "$(jf "$id" 'd["priority"]')" = 9 ]
	[ "$(jf "$id" 'd["timeout_seconds"]')" = 120 ]
	[ "$(jf "$id" 'd["name"]')" = flag ]
	[ "$(jf "$id" 'd["command"]')" = '["ls", "-l"]' ]
	# --env adds to the file's env and replaces a variable of the same name.
	[ "$(jf "$id" 'd["env"]')" = '{"A": "1", "B": "3", "C": "4"}' ]
	# --gpus replaces the file's placement (its gpu_count goes with it).
	id=$(sub --job job.yaml --gpus 3)
	[ "$(jf "$id" 'd["gpus"]')" = "[3]" ]
	[ "$(jf "$id" '"gpu_count" in d')" = False ]
	# --gpu-count asks for any K cards instead of the pinned ones.
	id=$(sub --job job.yaml --gpu-count 1)
	[ "$(jf "$id" '"gpus" in d')" = False ]
	[ "$(jf "$id" 'd["gpu_count"]')" = 1 ]
}

@test "submit: bad flag values are usage errors naming the flag (64)" {
	for args in "--priority abc" "--priority 100000000" "--gpus 0,x" "--gpus ''" \
		"--gpus 1,1" "--gpus -1" "--gpu-count -1" "--timeout 1h" "--env NOEQUALS" \
		"--env 1X=2" "--cwd ''" "--name ''"; do
		eval "run --separate-stderr sub $args -- true"
		failed 64 cardbaton-submit
		flag=${args%% *}
		[[ $stderr == *"$flag"* ]] || { echo "no $flag in: $stderr" >&2; false; }
	done
	run --separate-stderr sub --name "$(printf 'a\nb')" -- true
	failed 64 cardbaton-submit
	[ ! -e "$T/spool" ]
}

@test "submit: unknown options, missing arguments and no command are usage errors" {
	run --separate-stderr sub --bogus -- true
	failed 64 cardbaton-submit
	[[ $stderr == *"'--bogus'"*"usage: cardbaton-submit"* ]]
	run --separate-stderr sub --priority
	failed 64 cardbaton-submit
	[[ $stderr == *"'--priority' needs an argument"* ]]
	run --separate-stderr sub
	failed 64 cardbaton-submit
	run --separate-stderr sub -- ''
	failed 64 cardbaton-submit
	[ ! -e "$T/spool" ]
}

@test "submit: bad job data is 65 with the file:line: key: problem line" {
	printf 'command: [true]\npriority: high\n' > bad.yaml
	run --separate-stderr sub --job bad.yaml
	failed 65 cardbaton-submit
	[ "$stderr" = "cardbaton-submit: bad.yaml:2: priority: must be an integer" ] ||
		[[ $stderr == "cardbaton-submit: bad.yaml:2: priority: "* ]]
	printf 'command: [true]\nbogus: 1\n' > bad.yaml
	run --separate-stderr sub --job bad.yaml
	failed 65 cardbaton-submit
	[[ $stderr == "cardbaton-submit: bad.yaml:2: bogus: "* ]]
	run --separate-stderr sub --job nonexistent.yaml
	failed 66 cardbaton-submit
	head -c 1100000 /dev/zero | tr '\0' '#' > big.yaml
	run --separate-stderr sub --job big.yaml
	failed 65 cardbaton-submit
	# Contradicting flags: two pinned cards but a count of 3.
	run --separate-stderr sub --gpus 0,1 --gpu-count 3 -- true
	failed 65 cardbaton-submit
	[[ $stderr == *gpu_count* ]]
	[ ! -e "$T/spool" ]
}

@test "submit: an unknown node, or GPUs outside a node's gpus: list, is 65" {
	run --separate-stderr sub --node nowhere -- true
	failed 65 cardbaton-submit
	[[ $stderr == *"unknown node 'nowhere'"* ]]
	printf 'command: [true]\nnode: elsewhere\n' > job.yaml
	run --separate-stderr sub --job job.yaml
	failed 65 cardbaton-submit
	[[ $stderr == *"unknown node 'elsewhere'"* ]]
	printf 'spool: ./spool\nnodes:\n  local:\n    local: true\n    gpus: [0, 1]\n' > "$C"
	run --separate-stderr sub --node local --gpus 2 -- true
	failed 65 cardbaton-submit
	run --separate-stderr sub --gpus 1,3 -- true
	failed 65 cardbaton-submit
	run --separate-stderr sub --gpu-count 3 -- true
	failed 65 cardbaton-submit
	run --separate-stderr sub --node local --gpus 1 -- true
	[ "$status" -eq 0 ]
	[ "$output" = 1 ]
}

@test "submit: a full disk is a temporary failure (75) and leaves nothing in new/" {
	mkdir "$T/full"
	mount -t tmpfs -o size=256k tmpfs "$T/full" 2>/dev/null || skip "cannot mount a tmpfs here"
	printf 'spool: %s/full/spool\nnodes:\n  local:\n    local: true\n' "$T" > "$C"
	sub -- true
	dd if=/dev/zero of="$T/full/filler" bs=4k 2>/dev/null || true
	run --separate-stderr sub -- python3 -c "$(head -c 60000 /dev/zero | tr '\0' x)"
	failed 75 cardbaton-submit
	[ "$(ls "$T/full/spool/new" | wc -l)" -eq 1 ]
	[ "$(ls "$T/full/spool/tmp" | wc -l)" -eq 0 ]
}

@test "submit: with standard output closed nothing is queued (74)" {
	run --separate-stderr sh -c 'cardbaton-submit -- true >&-'
	failed 74 cardbaton-submit
	[ ! -e "$T/spool/new" ] || [ -z "$(ls "$T/spool/new")" ]
}

@test "submit: the job files it writes are the ones the daemon accepts" {
	has_daemon || skip "cardbaton-spoold not built"
	id=$(sub --name n --env 'X=a b' --cwd /tmp --timeout 5 --resume-command 'echo r' \
		--gpus 0 -- sh -c 'printf "%s" "$X" > "$0"' "$T/out")
	start_daemon
	wait_for 10 'final "$id"'
	[ "$(state "$id")" = succeeded ]
	[ "$(cat "$T/out")" = "a b" ]
	[ -z "$(ls "$T/spool/rejected")" ]
}

# ---- status -----------------------------------------------------------------

@test "status on a spool that does not exist yet: an empty queue, spool not created" {
	run --separate-stderr st
	[ "$status" -eq 0 ]
	[ "${#lines[@]}" -eq 1 ]
	[[ ${lines[0]} == ID* ]]
	run --separate-stderr st --json
	[ "$status" -eq 0 ]
	[ "$(echo "$output" | json 'd')" = '{"jobs": [], "nodes": []}' ]
	[ ! -e "$T/spool" ]
	run --separate-stderr st 1
	failed 66 cardbaton-status
	[ "$stderr" = "cardbaton-status: no such job 1" ]
	[ ! -e "$T/spool" ]
}

@test "status lists the queue in dispatch order: priority, then FIFO" {
	a=$(sub -- echo a)
	b=$(sub --priority 5 -- echo b)
	c=$(sub -- echo c)
	d=$(sub --priority -1 -- echo d)
	e=$(sub --priority 5 -- echo e)
	[ "$(st --json | json '" ".join(j["id"] for j in d["jobs"])')" = "$b $e $a $c $d" ]
	run st
	[[ ${lines[1]} == *" $b "*"echo b" ]]
	[[ ${lines[5]} == *" $d "*"echo d" ]]
}

@test "status merges queued records, new/ and incoming/ submissions in dispatch order" {
	spool_id >/dev/null
	record queued 099999990-0000000005.job 5 queued 1 '[]' 10
	record queued 100000000-0000000006.job 6 queued 1 '[]' 0
	# Accepted by the daemon but not yet recorded: incoming/ has a
	# plain name; the priority comes from the file.
	echo '{"command": ["x"], "priority": 20}' > "$T/spool/incoming/0000000007.job"
	echo '{"command": ["y"], "priority": 5}' > "$T/spool/new/099999995-0000000008.job"
	[ "$(st --json | json '" ".join(j["id"] for j in d["jobs"])')" = "7 5 8 6" ]
	[ "$(st --json 7 | json 'd["jobs"][0]["reason"]')" = "waiting for the daemon to accept it" ]
	[ "$(st --json 5 | json 'd["jobs"][0]["reason"]')" = "by hand" ]
}

@test "status: queue, then running, paused, and finished only with --all" {
	record done 0000000001.job 1 succeeded 3
	record paused 0000000002.job 2 paused 3
	record running 0000000003.job 3 running 3
	record running 0000000004.job 4 pausing 3
	record queued 100000000-0000000009.job 9 queued 1
	[ "$(st --json | json '" ".join(j["id"] for j in d["jobs"])')" = "9 3 4 2" ]
	[ "$(st --json --all | json '" ".join(j["id"] for j in d["jobs"])')" = "9 3 4 2 1" ]
	[ "$(st --json --all | json '" ".join(j["state"] for j in d["jobs"])')" = "queued running pausing paused succeeded" ]
	run st
	[ "${#lines[@]}" -eq 5 ]
	run st --all
	[ "${#lines[@]}" -eq 6 ]
}

@test "status shows a job present twice (crash inside spool_put) once, the higher rev" {
	record queued 100000000-0000000005.job 5 queued 1
	record running 0000000005.job 5 running 2
	[ "$(st --json | json '[(j["id"], j["state"]) for j in d["jobs"]]')" = '[["5", "running"]]' ]
	[ "$(st --json 5 | json 'd["jobs"][0]["state"]')" = running ]
	# The other way round: the queued copy is the newer one.
	record queued 100000000-0000000005.job 5 queued 3
	[ "$(st --json | json '[(j["id"], j["state"]) for j in d["jobs"]]')" = '[["5", "queued"]]' ]
	# Promoted: two queued names of one ID.
	record queued 099999990-0000000005.job 5 queued 4 '[]' 10
	[ "$(st --json | json '[(j["id"], j["priority"]) for j in d["jobs"]]')" = '[["5", 10]]' ]
	# A finished job with a stale running copy is finished.
	rm "$T"/spool/queued/*
	record done 0000000005.job 5 succeeded 5
	[ "$(st --json | json 'd["jobs"]')" = "[]" ]
	[ "$(st --json --all | json '[(j["id"], j["state"]) for j in d["jobs"]]')" = '[["5", "succeeded"]]' ]
	# A submission whose record exists already is not shown again.
	cp "$T/spool/done/0000000005.job" "$T/spool/incoming/0000000005.job"
	[ "$(st --json --all | json 'len(d["jobs"])')" = 1 ]
}

@test "status: files in new/ without an ID yet are counted, not listed" {
	sub -- true >/dev/null
	echo '{"command": ["x"]}' > "$T/spool/new/mine.job"
	echo '{"command": ["y"]}' > "$T/spool/new/.hidden.job"
	echo '{"command": ["z"]}' > "$T/spool/new/notajob"
	[ "$(st --json | json 'len(d["jobs"])')" = 1 ]
	run --separate-stderr st
	[ "$status" -eq 0 ]
	[ "${#lines[@]}" -eq 3 ]
	[[ ${lines[2]} == "1 more submission in "*"/new waits for the daemon to give it a job ID" ]]
}

@test "status JOB_ID...: those jobs in the order given, any state; unknown IDs are 66" {
	a=$(sub -- echo a)
	b=$(sub --priority 5 -- echo b)
	record done 0000000003.job 3 failed 2
	[ "$(st --json "$a" 3 "$b" | json '" ".join(j["id"] for j in d["jobs"])')" = "$a 3 $b" ]
	[ "$(st --json 003 | json 'd["jobs"][0]["state"]')" = failed ]
	run --separate-stderr st --json "$a" 99 "$b" 98
	[ "$status" -eq 66 ]
	[ "$(echo "$output" | json '" ".join(j["id"] for j in d["jobs"])')" = "$a $b" ]
	[ "$stderr" = "cardbaton-status: no such jobs 99 98" ]
	run --separate-stderr st 12x
	failed 64 cardbaton-status
	run --separate-stderr st 0
	failed 64 cardbaton-status
}

@test "status: the human view's columns, quoting and placement" {
	sub --gpus 0,2 --priority 3 -- printf '%s\n' 'a b' "it's" "$(printf 'x\ny')" >/dev/null
	sub --gpu-count 2 --node local -- true >/dev/null
	sub --gpu-count 0 -- true >/dev/null
	sub --job <(echo 'command: "echo $HOME | tr a-z A-Z"') >/dev/null
	run --separate-stderr st
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = "ID  STATE   PRIO  NODE   GPUS   ATT  AGE  COMMAND" ]
	[[ ${lines[1]} == " 1  queued     3  -      0,2      0  "*"printf '%s\\n' 'a b' 'it'\\''s' \$'x\\ny'" ]]
	[[ ${lines[2]} == " 2  queued     0  local  any:2    0  "*"  true" ]]
	[[ ${lines[3]} == " 3  queued     0  -      none     0  "*"  true" ]]
	[[ ${lines[4]} == *"  echo \$HOME | tr a-z A-Z" ]]
	# The NAME column appears when a job has a name.
	sub --name 'my run' -- true >/dev/null
	run st
	[[ ${lines[0]} == *"AGE  NAME    COMMAND" ]]
	[[ ${lines[5]} == *"my run  true" ]]
	# Not a terminal: long lines are not cut.
	long=$(head -c 500 /dev/zero | tr '\0' x)
	sub -- echo "$long" >/dev/null
	st | grep -q "echo $long\$"
}

@test "status: a running job shows its node, cards, attempts and age" {
	record running 0000000005.job 5 running 3 "[$(attempt 0 local running)]"
	run st
	[[ ${lines[1]} =~ ^\ 5\ \ running\ +0\ \ local\ \ 0\ +1\ \ [0-9]+d[0-9]+h\ \ sleep\ 5$ ]]
	[ "$(st --json | json 'd["jobs"][0]["node"]')" = local ]
	[ "$(st --json | json 'd["jobs"][0]["attempts"]')" = 1 ]
	[ "$(st --json | json 'd["jobs"][0]["started"]')" = None ]
}

@test "status: a corrupt record is reported and the others are still shown" {
	sub -- true >/dev/null
	echo 'not json' > "$T/spool/running/0000000009.job"
	run --separate-stderr st --json
	failed 65 cardbaton-status
	[ "$(echo "$output" | json 'len(d["jobs"])')" = 1 ]
	[[ $stderr == *"running/0000000009.job"* ]]
}

# ---- promote ----------------------------------------------------------------

@test "promote writes a request for a job not yet accepted, with or without --priority" {
	id=$(sub -- true)
	run --separate-stderr cardbaton-promote "$id"
	[ "$status" -eq 0 ]
	[ -z "$output" ] && [ -z "$stderr" ]
	f=$(ls "$T"/spool/ctl/"$id".promote.*)
	[ ! -s "$f" ]
	rm "$f"
	run cardbaton-promote --priority 42 "$id"
	[ "$status" -eq 0 ]
	[ "$(cat "$T"/spool/ctl/"$id".promote.*)" = "priority 42" ]
	record queued 100000000-0000000007.job 7 queued 1
	cardbaton-promote --priority -3 7
	[ "$(cat "$T"/spool/ctl/7.promote.*)" = "priority -3" ]
}

@test "promote refuses what is not queued (1), unknown jobs (66), bad input (64)" {
	record running 0000000005.job 5 running 2
	run --separate-stderr cardbaton-promote 5
	failed 1 cardbaton-promote
	[ "$stderr" = "cardbaton-promote: job 5 is running, not queued" ]
	record done 0000000006.job 6 failed 2
	run --separate-stderr cardbaton-promote 6
	failed 1 cardbaton-promote
	run --separate-stderr cardbaton-promote 99
	failed 66 cardbaton-promote
	[ "$stderr" = "cardbaton-promote: no such job 99" ]
	[ -z "$(ls "$T/spool/ctl")" ]
	run --separate-stderr cardbaton-promote --priority x 5
	failed 64 cardbaton-promote
	run --separate-stderr cardbaton-promote
	failed 64 cardbaton-promote
	run --separate-stderr cardbaton-promote 1 2
	failed 64 cardbaton-promote
}

@test "promote and cancel on a spool that does not exist: no such job, nothing created" {
	run --separate-stderr cardbaton-promote 1
	failed 66 cardbaton-promote
	run --separate-stderr cardbaton-cancel 1
	failed 66 cardbaton-cancel
	run --separate-stderr cardbaton-logs 1
	failed 66 cardbaton-logs
	[ ! -e "$T/spool" ]
}

# ---- cancel -----------------------------------------------------------------

@test "cancel of a queued or paused job writes the request and prints nothing" {
	id=$(sub -- true)
	run --separate-stderr cardbaton-cancel "$id"
	[ "$status" -eq 0 ]
	[ -z "$output" ] && [ -z "$stderr" ]
	ls "$T"/spool/ctl/"$id".cancel.*
	record paused 0000000005.job 5 paused 4 "[$(attempt 0 local paused)]"
	cardbaton-cancel 5
	ls "$T"/spool/ctl/5.cancel.*
}

@test "cancel refuses finished jobs (1) and unknown ones (66)" {
	record done 0000000005.job 5 succeeded 2
	run --separate-stderr cardbaton-cancel 5
	failed 1 cardbaton-cancel
	[ "$stderr" = "cardbaton-cancel: job 5 already succeeded" ]
	run --separate-stderr cardbaton-cancel 6
	failed 66 cardbaton-cancel
	[ -z "$(ls "$T/spool/ctl")" ]
	run --separate-stderr cardbaton-cancel x
	failed 64 cardbaton-cancel
}

@test "cancel of a running job whose node left the config: 69, the request stays" {
	record running 0000000005.job 5 running 2 "[$(attempt 0 gone-node running)]"
	run --separate-stderr cardbaton-cancel 5
	failed 69 cardbaton-cancel
	[[ $stderr == *"gone-node"*"waits for the daemon"* ]]
	ls "$T"/spool/ctl/5.cancel.*
}

@test "cancel of a running job stops it on the node while the daemon is down" {
	has_daemon || skip "cardbaton-spoold not built"
	id=$(sub -- sh -c 'echo $$ > "$0"; exec sleep 300' "$T/pid")
	start_daemon
	wait_for 10 '[ -s "$T/pid" ]'
	wait_for 10 '[ "$(state "$id")" = running ]'
	stop_daemon
	pid=$(cat "$T/pid")
	not gone "$pid"
	run --separate-stderr cardbaton-cancel "$id"
	[ "$status" -eq 0 ]
	[ -z "$stderr" ]
	gone "$pid"
	ls "$T"/spool/ctl/"$id".cancel.*
	# The daemon records it when it comes back.
	start_daemon
	wait_for 10 'final "$id"'
	[ "$(state "$id")" = cancelled ]
}

# ---- logs -------------------------------------------------------------------

@test "logs: not started (1), unknown job (66), unknown attempt (66), gone node (69)" {
	id=$(sub -- true)
	run --separate-stderr cardbaton-logs "$id"
	failed 1 cardbaton-logs
	[ "$stderr" = "cardbaton-logs: job $id has not started" ]
	run --separate-stderr cardbaton-logs 99
	failed 66 cardbaton-logs
	record done 0000000005.job 5 failed 2 "[$(attempt 0 gone-node failed)]"
	run --separate-stderr cardbaton-logs --attempt 1 5
	failed 66 cardbaton-logs
	run --separate-stderr cardbaton-logs 5
	failed 69 cardbaton-logs
	[[ $stderr == *"gone-node"* ]]
	run --separate-stderr cardbaton-logs --attempt x 5
	failed 64 cardbaton-logs
	run --separate-stderr cardbaton-logs
	failed 64 cardbaton-logs
}

@test "logs: an attempt the node does not know is 66; a failing node is 69" {
	record done 0000000005.job 5 failed 2 "[$(attempt 0 local failed)]"
	run --separate-stderr cardbaton-logs 5
	failed 66 cardbaton-logs
	printf 'spool: ./spool\nssh_command: [false]\nnodes:\n  local:\n    ssh: nohost\n' > "$C"
	run --separate-stderr cardbaton-logs 5
	failed 69 cardbaton-logs
}

@test "logs: the job's output from its node, per attempt, and -f until the end" {
	has_daemon || skip "cardbaton-spoold not built"
	id=$(sub -- sh -c 'echo out; echo err >&2; printf "no newline"')
	start_daemon
	wait_for 10 'final "$id"'
	stop_daemon
	run --separate-stderr cardbaton-logs "$id"
	[ "$status" -eq 0 ]
	[ "$output" = "$(printf 'out\nerr\nno newline')" ]
	[ -z "$stderr" ]
	run cardbaton-logs --attempt 0 "$id"
	[ "$output" = "$(printf 'out\nerr\nno newline')" ]
	run cardbaton-logs -f "$id"
	[ "$status" -eq 0 ]
	[ "$output" = "$(printf 'out\nerr\nno newline')" ]
	run --separate-stderr cardbaton-logs --attempt 1 "$id"
	failed 66 cardbaton-logs
}

@test "logs -f follows a running job to its end" {
	has_daemon || skip "cardbaton-spoold not built"
	id=$(sub -- sh -c 'echo one; while [ ! -e "$0" ]; do sleep 0.05; done; echo two' "$T/go")
	start_daemon
	wait_for 10 'cardbaton-logs "$id" | grep -q one'
	cardbaton-logs -f "$id" > "$T/followed" &
	f=$!
	settle 0.3
	kill -0 "$f"
	touch "$T/go"
	wait "$f"
	[ "$(cat "$T/followed")" = "$(printf 'one\ntwo')" ]
}

# ---- gpus -------------------------------------------------------------------

@test "gpus: the local node's cards, human view and SPEC §2 JSON" {
	fake_gpus \
		"0, GPU-00000000-0000-0000-0000-000000000000, NVIDIA Fake A100, 0, 81920, 0" \
		"1, GPU-11111111-1111-1111-1111-111111111111, NVIDIA Fake A100, 4000, 81920, 57"
	run --separate-stderr cardbaton-gpus
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = "local: 2 GPUs, 1 idle" ]
	[[ ${lines[1]} == "IDX  UUID"*"NAME"*"MEMORY  UTIL  PROCS  LEASE  STATE" ]]
	[[ ${lines[2]} == "  0  GPU-00000000-0000-0000-0000-000000000000  NVIDIA Fake A100"*" 0/81920 MiB    0%      0  -      idle" ]]
	[[ ${lines[3]} == *"4000/81920 MiB   57%      0  -      busy" ]]
	cardbaton-gpus --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert list(d) == ["nodes"]
n = d["nodes"][0]
assert n["name"] == "local" and n["reachable"] is True and n["error"] is None
g = n["gpus"]
assert [x["index"] for x in g] == [0, 1]
for k in ("index", "uuid", "name", "memory_used_mib", "memory_total_mib", "utilization",
          "processes", "lease", "idle"):
    assert k in g[0], k
assert g[0]["uuid"] == "GPU-00000000-0000-0000-0000-000000000000"
assert g[0]["name"] == "NVIDIA Fake A100"
assert g[1]["memory_used_mib"] == 4000 and g[1]["memory_total_mib"] == 81920
assert g[1]["utilization"] == 57 and g[0]["processes"] == 0
assert g[0]["lease"] is None and g[0]["idle"] is True and g[1]["idle"] is False
'
}

@test "gpus: compute processes make a card busy; cards outside gpus: are excluded" {
	fake_apps "GPU-22222222-2222-2222-2222-222222222222, 4242, 500"
	printf 'spool: ./spool\nnodes:\n  local:\n    local: true\n    gpus: [1, 2]\n' > "$C"
	run cardbaton-gpus
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = "local: 4 GPUs, 1 idle" ]
	[[ ${lines[2]} == *excluded ]]
	[[ ${lines[3]} == *idle ]]
	[[ ${lines[4]} == *"1  -      busy" ]]
	[[ ${lines[5]} == *excluded ]]
	[ "$(cardbaton-gpus --json | json '[g["idle"] for g in d["nodes"][0]["gpus"]]')" = "[false, true, false, false]" ]
	[ "$(cardbaton-gpus --json | json 'd["nodes"][0]["gpus"][2]["processes"]')" = 1 ]
}

@test "gpus: an unreachable node is shown as such; 69 only when no node answered" {
	printf 'spool: ./spool\nssh_command: [false]\nnodes:\n  local:\n    local: true\n  far:\n    ssh: far.invalid\n' > "$C"
	run --separate-stderr cardbaton-gpus
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = "local: 4 GPUs, 4 idle" ]
	[[ $output == *$'\n\nfar: unreachable: '* ]]
	cardbaton-gpus --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
far = d["nodes"][1]
assert far["name"] == "far" and far["reachable"] is False and far["gpus"] == []
assert isinstance(far["error"], str) and far["error"]
'
	run --separate-stderr cardbaton-gpus --node far
	failed 69 cardbaton-gpus
	[[ $stderr == "cardbaton-gpus: far: "* ]]
	[ "${lines[0]}" = "far: unreachable: ${stderr#cardbaton-gpus: far: }" ]
	echo "driver gone" > "$FAKE_GPU_DIR/fail"
	run --separate-stderr cardbaton-gpus --node local --json
	failed 69 cardbaton-gpus
	[ "$(echo "$output" | json 'd["nodes"][0]["reachable"]')" = False ]
	run --separate-stderr cardbaton-gpus --node nowhere
	failed 65 cardbaton-gpus
	[[ $stderr == *"unknown node 'nowhere'"* ]]
}

@test "gpus: nodes are asked in parallel" {
	# Two local nodes sharing one slow fake nvidia-smi: asked one after
	# the other they would take twice as long as one node alone.
	printf 'spool: ./spool\nnodes:\n  a:\n    local: true\n  b:\n    local: true\n' > "$C"
	echo 1 > "$FAKE_GPU_DIR/delay"
	t0=$(date +%s%N)
	cardbaton-gpus --node a >/dev/null
	t1=$(date +%s%N)
	run cardbaton-gpus --json
	t2=$(date +%s%N)
	[ "$status" -eq 0 ]
	[ "$(echo "$output" | json '[n["reachable"] for n in d["nodes"]]')" = "[true, true]" ]
	one=$(( (t1 - t0) / 1000000 )) both=$(( (t2 - t1) / 1000000 ))
	echo "one node: $one ms, two nodes: $both ms" >&2
	[ "$both" -lt $(( one * 3 / 2 )) ]
}

@test "gpus: a lease shows the job ID holding the card" {
	has_daemon || skip "cardbaton-spoold not built"
	id=$(sub --gpus 2 -- sh -c 'touch "$0"; exec sleep 300' "$T/started")
	start_daemon
	wait_for 10 '[ -e "$T/started" ]'
	stop_daemon
	[ "$(cardbaton-gpus --json | json 'd["nodes"][0]["gpus"][2]["lease"]')" = "$id" ]
	[ "$(cardbaton-gpus --json | json 'd["nodes"][0]["gpus"][2]["idle"]')" = False ]
	run cardbaton-gpus
	[[ ${lines[4]} == *"  $id"*busy ]]
	# Seen from another spool, the lease is another controller's attempt.
	printf 'spool: ./other\nnodes:\n  local:\n    local: true\n' > "$T/other.yaml"
	lease=$(cardbaton-gpus --config "$T/other.yaml" --json | json 'd["nodes"][0]["gpus"][2]["lease"]')
	[ "$lease" = "$(spool_id)-$id-0" ]
	cardbaton-cancel "$id"
}

# ---- the dispatcher, sshgpu, common options ---------------------------------

@test "cardbaton runs cardbaton-COMMAND with --config passed on" {
	cd "$HOME"
	run --separate-stderr cardbaton --config "$C" submit -- echo hi
	[ "$status" -eq 0 ]
	[ "$output" = 1 ]
	[ -f "$T/spool/new/100000000-0000000001.job" ]
	[ "$(cardbaton --config="$C" status --json | json 'd["jobs"][0]["id"]')" = 1 ]
	[ "$(sshgpu --config "$C" status --json 1 | json 'd["jobs"][0]["state"]')" = queued ]
	# Its exit status is the tool's.
	run --separate-stderr cardbaton --config "$C" status 9
	failed 66 cardbaton-status
}

@test "cardbaton finds its tools beside its real executable before PATH" {
	mkdir -p "$T/bin"
	ln -s "$CB_BUILD/cardbaton" "$T/bin/sshgpu"
	run --separate-stderr env PATH=/usr/bin:/bin "$T/bin/sshgpu" --config "$C" submit -- true
	[ "$status" -eq 0 ]
	[ "$output" = 1 ]
}

@test "cardbaton: --version, --help, and usage errors with the name it was called by" {
	run --separate-stderr cardbaton --version
	[ "$status" -eq 0 ]
	[[ $output =~ ^cardbaton\ [0-9]+\.[0-9]+\.[0-9]+$ ]]
	run --separate-stderr cardbaton --help
	[ "$status" -eq 0 ]
	[[ ${lines[0]} == "usage: cardbaton [--config PATH] [-h|--help] [--version] COMMAND [ARGS...]" ]]
	for c in run submit status logs promote pause resume cancel wait gpus bootstrap; do
		[[ $output == *"  $c "* ]]
	done
	run --separate-stderr cardbaton frobnicate
	failed 64 cardbaton
	[ "$stderr" = "cardbaton: unknown command 'frobnicate' (see cardbaton --help)" ]
	run --separate-stderr sshgpu frobnicate
	failed 64 sshgpu
	[ "$stderr" = "sshgpu: unknown command 'frobnicate' (see sshgpu --help)" ]
	run --separate-stderr cardbaton
	[ "$status" -eq 64 ]
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr == "usage: cardbaton "* ]]
	run --separate-stderr cardbaton --bogus status
	failed 64 cardbaton
	run --separate-stderr cardbaton --config
	failed 64 cardbaton
}

@test "cardbaton: a command whose program is not installed is 69" {
	missing=
	for c in bootstrap pause resume; do
		if [ ! -e "$CB_BUILD/cardbaton-$c" ] && ! command -v "cardbaton-$c" >/dev/null; then
			missing=$c
			break
		fi
	done
	[ -n "$missing" ] || skip "every command is installed"
	run --separate-stderr cardbaton "$missing"
	failed 69 cardbaton
	[[ $stderr == *"cardbaton-$missing"* ]]
}

@test "every tool: -h/--help prints its usage on stdout; unknown options are 64" {
	for t in submit status logs promote cancel wait gpus top metrics report mcp users; do
		run --separate-stderr "cardbaton-$t" --help
		[ "$status" -eq 0 ]
		[[ $output == "usage: cardbaton-$t "* ]]
		[ -z "$stderr" ]
		run --separate-stderr "cardbaton-$t" -h
		[ "$status" -eq 0 ]
		run --separate-stderr "cardbaton-$t" --no-such-option
		failed 64 "cardbaton-$t"
		[[ $stderr == *"'--no-such-option'"* ]]
	done
}

@test "every tool: a bad config is 78 with file:line: key" {
	printf 'spool: ./spool\nnodes:\n  local:\n    local: maybe\n' > "$C"
	for t in status gpus "promote 1" "cancel 1" "logs 1" "wait 1" "submit -- true"; do
		run --separate-stderr cardbaton --config "$C" $t
		failed 78 "cardbaton-${t%% *}"
		[[ $stderr == *"config.yaml:4: "* ]]
	done
	run --separate-stderr st --config "$T/missing.yaml"
	failed 78 cardbaton-status
}

@test "the tools use ./config.yaml by default and the built-in default without one" {
	sub -- true >/dev/null
	[ "$(cardbaton-status --json | json 'len(d["jobs"])')" = 1 ]
	cd "$HOME"
	id=$(cardbaton-submit -- true)
	[ "$id" = 1 ]
	[ -d "$XDG_STATE_HOME/cardbaton/spool/new" ]
}

@test "man pages: SYNOPSIS matches each tool's usage line; mandoc -Tlint is clean" {
	command -v mandoc >/dev/null || skip "mandoc not installed"
	for t in submit status logs promote pause resume cancel wait drain undrain gpus bootstrap spoold \
		 top metrics report mcp users; do
		page=$CB_TOP/man/cardbaton-$t.1
		[ -f "$page" ]
		syn=$(mandoc -Tascii "$page" | sed $'s/.\b//g' | sed -n '/^SYNOPSIS/,/^DESCRIPTION/p' |
			sed '1d;$d' | tr -s ' \t\n' ' ' | sed 's/^ //; s/ $//')
		use=$("cardbaton-$t" --help | sed 's/^usage: //')
		[ "$syn" = "$use" ] || { echo "man: $syn" >&2; echo "use: $use" >&2; false; }
		grep -q '^\.Sh EXIT STATUS' "$page"
		grep -q '^\.Sh EXAMPLES' "$page"
	done
	[ "$(mandoc -Tascii "$CB_TOP/man/cardbaton.1" | sed $'s/.\b//g' | grep -c 'COMMAND \[ARGS...\]')" -eq 2 ]
	for page in "$CB_TOP"/man/*.[158]; do
		out=$(mandoc -Tlint -Wwarning "$page" 2>&1) || { echo "$out" >&2; false; }
		[ -z "$out" ] || { echo "$out" >&2; false; }
	done
}
