#!/usr/bin/env bats
# hostile.bats - the hostile input catalogue (issue 5, item 5).
#
# Every way a job file, a flag, a job or attempt ID, or a stray file in
# the spool can be wrong, each with what CardBaton must do about it:
# one clear line (`file:line: key: problem` for job files), a
# documented exit code (64 usage, 65 bad data, 66 no such job), nothing
# followed, nothing blocked on, nothing lost, and the daemon serving on.
# Job files are tried at both entry points: `cardbaton submit --job`
# and a file dropped into new/ for the daemon (`--once` accepts new/
# and exits, so no test waits for a background daemon unless it must).
# The limits these tests rely on are in cardbaton(5) and the README.

load ../lib/common

bats_require_minimum_version 1.5.0
test_timeout 90

setup() {
	setup_common
	C=$T/config.yaml
}

teardown() {
	teardown_common
}

sub() { cardbaton-submit --config "$C" "$@"; }
st() { cardbaton-status --config "$C" "$@"; }
once() { cardbaton-spoold --config "$C" --once >>"$T/daemon.log" 2>&1; }

# says TEXT: the last stderr is exactly TEXT.
says() {
	[ "$stderr" = "$1" ] || { echo "stderr: $stderr"$'\n'"wanted: $1" >&2; return 1; }
}

# make_spool: create the spool (as the daemon would) with no job in it.
make_spool() { [ -d "$T/spool/new" ] || once; }

# drop FILE: copy $T/FILE into new/ the way LAYOUT.md §4 says (tmp/,
# then rename), under the same name, so that the daemon's reason and
# submit's message name it alike.
drop() {
	make_spool
	cp "$T/$1" "$T/spool/tmp/$1"
	mv "$T/spool/tmp/$1" "$T/spool/new/$1"
}

# refused FILE LINE: `submit --job FILE` exits 65 with exactly
# "cardbaton-submit: LINE", and FILE dropped into new/ is queued for
# the check by rejected_as (after a daemon pass).
refused() {
	run --separate-stderr sub --job "$1"
	failed 65 cardbaton-submit
	says "cardbaton-submit: $2"
	drop "$1"
}

# reason ORIG: the reason the daemon wrote for the file dropped as ORIG.
reason() {
	local f
	f=$(grep -lx "original name: $1" "$T"/spool/rejected/*.reason) || return 1
	sed -n 's/^reason: //p' "$f"
}

# rejected_as ORIG LINE: the file dropped as ORIG was rejected with the
# reason LINE, and is kept beside it.
rejected_as() {
	local got f
	got=$(reason "$1") || { echo "$1 was not rejected" >&2; return 1; }
	[ "$got" = "$2" ] || { echo "$1: reason '$got', wanted '$2'" >&2; return 1; }
	f=$(grep -lx "original name: $1" "$T"/spool/rejected/*.reason)
	[ -e "${f%.reason}.job" ] || [ -L "${f%.reason}.job" ]
}

# nothing_queued: no job was accepted (new/ and incoming/ empty too).
nothing_queued() {
	[ -z "$(ls -A "$T/spool/queued" "$T/spool/new" "$T/spool/incoming" 2>/dev/null | grep -v ':$' | grep .)" ]
}

asan() { ldd "$CB_BUILD/cardbaton-submit" 2>/dev/null | grep -q libasan; }

# ---- names, IDs and paths -----------------------------------------------------

@test "job IDs that are not IDs (../../x, 1/../2, '', -1, 0, 1e3, 0x10, 10^10, ' 5') are 64 for every tool, nothing written" {
	# Every form on status; the path-like ones on every tool.
	for id in 0 1e3 0x10 10000000000 ' 5' '5/' '5.job' "$(head -c 40 /dev/zero | tr '\0' 1)"; do
		run --separate-stderr cardbaton-status --config "$C" -- "$id"
		failed 64 cardbaton-status
		says "cardbaton-status: '$id' is not a job ID (1 to 9999999999)"
	done
	for tool in status cancel logs promote pause resume wait; do
		for id in ../../x 1/../2 '' -1; do
			run --separate-stderr "cardbaton-$tool" --config "$C" -- "$id"
			failed 64 "cardbaton-$tool"
			says "cardbaton-$tool: '$id' is not a job ID (1 to 9999999999)"
		done
	done
	# IDs inside flags: an attempt number, a priority.
	for a in ../1 -1 1e3 99999999999999999999; do
		run --separate-stderr cardbaton-logs --config "$C" --attempt "$a" 1
		failed 64 cardbaton-logs
		[[ $stderr == *"--attempt: '$a' is not an integer"* ]]
	done
	for p in 99999999999999999999 100000000 1e9 0x10 '' ' 5'; do
		run --separate-stderr cardbaton-promote --config "$C" --priority "$p" 1
		failed 64 cardbaton-promote
		[[ $stderr == *"--priority: '$p' is not an integer"* ]]
	done
	# A time limit: negative, a fraction, overflow, over ten years.
	for s in -1 1.5 1e3 0x10 99999999999999999999 315360001 '' ' 5' abc; do
		run --separate-stderr cardbaton-wait --config "$C" --timeout "$s" 1
		failed 64 cardbaton-wait
		says "cardbaton-wait: --timeout: '$s' is not an integer from 0 to 315360000"
	done
	# Nothing was created: not even the spool.
	[ ! -e "$T/spool" ]
}

@test "attempt IDs: a record whose attempt ID is not [0-9a-f-] is invalid; the worker refuses such IDs" {
	make_spool
	sid=$(cut -c1-8 "$T/spool/id")
	mkdir -p "$T/victim"
	for bad in "../../../victim" "$sid-5-0/../x" "$sid-5-0/" "" "$(head -c 65 /dev/zero | tr '\0' a)"; do
		rm -f "$T/spool/running/"*
		printf '{"id": "5", "rev": 1, "state": "running", "reason": "by hand", "priority": 0,
		  "job": {"command": ["sleep", "5"]},
		  "attempts": [{"n": 0, "id": "%s", "node": "local", "gpus": [0], "state": "running"}]}\n' \
			"$bad" > "$T/spool/running/0000000005.job"
		for tool in status logs cancel pause; do
			run --separate-stderr "cardbaton-$tool" --config "$C" 5
			failed 65 "cardbaton-$tool"
			says "cardbaton-$tool: $T/spool/running/0000000005.job: not a valid job record"
		done
	done
	# The same for an attempt ID a staged attempt waits for (staged_after).
	for bad in "../../../victim" "" 7; do
		[ "$bad" = 7 ] || bad="\"$bad\""
		printf '{"id": "5", "rev": 1, "state": "running", "reason": "by hand", "priority": 0,
		  "job": {"command": ["sleep", "5"]},
		  "attempts": [{"n": 0, "id": "%s-5-0", "node": "local", "gpus": [0], "state": "staged",
		                "staged_after": [%s]}]}\n' "$sid" "$bad" > "$T/spool/running/0000000005.job"
		run --separate-stderr cardbaton-status --config "$C" 5
		failed 65 cardbaton-status
		says "cardbaton-status: $T/spool/running/0000000005.job: not a valid job record"
	done
	# Nothing reached ctl/ (the request is written only for a valid job).
	[ -z "$(ls "$T/spool/ctl")" ]
	# The daemon leaves the record alone, with a line, and serves on.
	id=$(sub --gpu-count 0 -- true)
	once
	wait_for 10 '[ -e "$T/spool/done/$(printf %010d "$id").job" ] || { once; false; }'
	[ "$(grep -c 'running/0000000005.job: not a valid job record' "$T/daemon.log")" -ge 1 ]
	[ -e "$T/spool/running/0000000005.job" ]
	# The worker itself never takes such an ID as a path.
	for bad in ../victim "$sid-5-0/../../victim" . .. ''; do
		for cmd in log cancel pause unstage; do
			run --separate-stderr cardbaton-worker -d "$STATE" "$cmd" "$bad"
			[ "$status" -eq 66 ] || [ "$status" -eq 64 ]
		done
		run cardbaton-worker -d "$STATE" status "$bad"
		[ "$status" -eq 0 ]
		[[ $output == *"state unknown"* ]]
	done
	[ -z "$(ls -A "$T/victim")" ]
}

@test "an attempt directory planted as a symlink on the node: the job fails naming it, nothing followed, the daemon serves on" {
	make_spool
	sid=$(cut -c1-8 "$T/spool/id")
	mkdir -p "$STATE/attempts" "$T/elsewhere"
	# The worker run for the launch (run --once has no event stream) ...
	a=$(sub --gpu-count 0 -- touch "$T/ran")
	ln -s "$T/elsewhere" "$STATE/attempts/$sid-$a-0"
	once
	[ "$(job_state "$a")" = failed ]
	[ "$(st --json "$a" | json 'd["jobs"][0]["reason"]')" = "attempts/$sid-$a-0: is a symbolic link (not followed)" ]
	# ... and the daemon's launch through the node's stream.
	b=$(( $(cut -d" " -f1 "$T/spool/seq") + 1 ))
	ln -s "$T/elsewhere" "$STATE/attempts/$sid-$b-0"
	start_daemon
	[ "$(sub --gpus 0 -- touch "$T/ran")" = "$b" ]
	wait_for 15 '[ "$(job_state "$b")" = failed ]'
	[ "$(st --json "$b" | json 'd["jobs"][0]["reason"]')" = "attempts/$sid-$b-0: is a symbolic link (not followed)" ]
	# Nothing followed, nothing ran; the card is free for the next job.
	[ -z "$(ls -A "$T/elsewhere")" ]
	[ ! -e "$T/ran" ]
	c=$(sub --gpus 0 -- true)
	wait_for 15 '[ "$(job_state "$c")" = succeeded ]'
}

@test "a job name with '/' and '..' is free text: shown as given, never a path" {
	make_spool
	a=$(sub --name '../../x/y' --gpu-count 0 -- true)
	printf 'command: [true]\ngpu_count: 0\nname: "/etc/passwd/../.."\n' > named.job
	drop named.job
	once
	st --json --all | json '[j["name"] for j in d["jobs"]]' | grep -qF '"../../x/y"'
	st --json --all | json '[j["name"] for j in d["jobs"]]' | grep -qF '"/etc/passwd/../.."'
	[ "$(st --json "$a" | json 'd["jobs"][0]["name"]')" = "../../x/y" ]
	# Nothing was made from the name anywhere.
	[ ! -e "$T/../x" ] && [ ! -e "$T/x" ] && [ ! -e "$T/spool/x" ]
	[ -z "$(find "$T/spool" "$STATE" -name 'y' -o -name 'passwd')" ]
}

@test "--node and node: with '/', '..', a leading '-' or empty are refused (64 flag, 65 file, rejected in new/)" {
	for n in ../x a/b ./ -oProxyCommand=x "$(head -c 65 /dev/zero | tr '\0' a)"; do
		run --separate-stderr sub --node "$n" -- true
		failed 64 cardbaton-submit
		[[ $stderr == "cardbaton-submit: --node: '$n' "* ]]
	done
	run --separate-stderr sub --node '' -- true
	failed 64 cardbaton-submit
	# '..' is a well-formed node name (it never names a path): unknown.
	run --separate-stderr sub --node .. -- true
	failed 65 cardbaton-submit
	says "cardbaton-submit: unknown node '..' (not in $C)"
	printf 'command: [true]\nnode: ../x\n' > dotdot.job
	refused dotdot.job "dotdot.job:2: node: must be a node name (1 to 64 of A-Z a-z 0-9 . _ -)"
	printf 'command: [true]\nnode: "a/b"\n' > slash.job
	refused slash.job "slash.job:2: node: must be a node name (1 to 64 of A-Z a-z 0-9 . _ -)"
	printf 'command: [true]\nnode: -x\n' > dash.job
	refused dash.job "dash.job:2: node: must not begin with '-'"
	printf 'command: [true]\nnode: ""\n' > empty.job
	refused empty.job "empty.job:2: node: must be a node name (1 to 64 of A-Z a-z 0-9 . _ -)"
	once
	rejected_as dotdot.job "dotdot.job:2: node: must be a node name (1 to 64 of A-Z a-z 0-9 . _ -)"
	rejected_as slash.job "slash.job:2: node: must be a node name (1 to 64 of A-Z a-z 0-9 . _ -)"
	rejected_as dash.job "dash.job:2: node: must not begin with '-'"
	rejected_as empty.job "empty.job:2: node: must be a node name (1 to 64 of A-Z a-z 0-9 . _ -)"
	nothing_queued
}

@test "an unknown node or GPU index: submit 65 naming it; in new/ rejected naming it" {
	run --separate-stderr sub --node nowhere -- true
	failed 65 cardbaton-submit
	says "cardbaton-submit: unknown node 'nowhere' (not in $C)"
	printf 'command: [true]\nnode: nowhere\n' > node.job
	refused node.job "unknown node 'nowhere' (not in $C)"
	# Above the largest index any node may have.
	run --separate-stderr sub --gpus 1024 -- true
	failed 64 cardbaton-submit
	printf 'command: [true]\ngpus: [1024]\n' > big.job
	refused big.job "big.job:2: gpus[0]: must be between 0 and 1023"
	# Outside the node's gpus: list.
	printf 'spool: ./spool\nnodes:\n  local:\n    local: true\n    gpus: [0, 1]\n' > "$C"
	run --separate-stderr sub --node local --gpus 2 -- true
	failed 65 cardbaton-submit
	[[ $stderr == *"node 'local'"*"gpus"* ]]
	printf 'command: [true]\nnode: local\ngpus: [0, 3]\n' > list.job
	refused list.job "node 'local': pinned GPUs are not in its gpus: list"
	printf 'command: [true]\ngpus: [3]\n' > anynode.job
	refused anynode.job "no node in $C may use the pinned GPUs"
	printf 'command: [true]\ngpu_count: 3\n' > count.job
	refused count.job "no node in $C has 3 eligible GPUs"
	once
	rejected_as node.job "node: unknown node 'nowhere'"
	rejected_as big.job "big.job:2: gpus[0]: must be between 0 and 1023"
	rejected_as list.job "gpus: GPU 3 is not in node local's gpus list"
	rejected_as anynode.job "gpus: no node may use GPU 3"
	rejected_as count.job "gpu_count: no node has 3 eligible GPUs"
	nothing_queued
}

@test "a pinned GPU index no node has: the job waits, and its reason says so" {
	printf 'spool: ./spool\nnodes:\n  local:\n    local: true\n' > "$C"
	id=$(sub --gpus 7 -- true)
	other=$(sub --gpus 1 -- true)
	once
	wait_for 10 '[ -e "$T/spool/done/$(printf %010d "$other").job" ] || { once; false; }'
	[ "$(st --json "$id" | json 'd["jobs"][0]["state"]')" = queued ]
	[ "$(st --json "$id" | json 'd["jobs"][0]["reason"]')" = "waiting: no node has GPU 7 (local has 0-3)" ]
}

@test "a job asking for more cards than any node has holds nothing: the jobs behind it run, even in strict priority order" {
	printf 'spool: ./spool\nreserve_after_seconds: 0\nnodes:\n  local:\n    local: true\n' > "$C"
	big=$(sub --priority 10 --gpu-count 5 -- true)
	small=$(sub --gpu-count 4 -- true)
	once
	wait_for 10 '[ -e "$T/spool/done/$(printf %010d "$small").job" ] || { once; false; }'
	[ "$(st --json "$big" | json 'd["jobs"][0]["reason"]')" = "waiting: no node has 5 eligible GPUs (local has 0-3)" ]
	grep -q "job $big: waiting: no node has 5 eligible GPUs" "$T/daemon.log"
}

# ---- numbers ------------------------------------------------------------------

@test "integers: overflow, negative, float, exponent, string, hex, octal, sign, leading zeros are 65 file:line: key; rejected in new/" {
	make_spool
	i=0
	for key in priority gpu_count timeout_seconds checkpoint_grace_seconds gpus; do
		case $key in
		priority) lo=-99999999 hi=99999999 ;;
		gpu_count) lo=0 hi=1024 ;;
		gpus) lo=0 hi=1023 ;;
		*) lo=0 hi=315360000 ;;
		esac
		for v in 99999999999999999999 -99999999999999999999 1e9 1.5 '"5"' 0x10 +5 05 .inf \
			9223372036854775808 -9223372036854775809 $((hi + 1)) $((lo - 1)); do
			i=$((i + 1))
			f=int$i.job
			if [ "$key" = gpus ]; then
				printf 'command: [true]\ngpus: [%s]\n' "$v" > "$f"
				k='gpus[0]'
			else
				printf 'command: [true]\n%s: %s\n' "$key" "$v" > "$f"
				k=$key
			fi
			case $v in
			05) why="must be an integer without leading zeros" ;;
			*[!0-9-]*|'"5"') why="must be an integer" ;;
			*) why="must be between $lo and $hi" ;;
			esac
			refused "$f" "$f:2: $k: $why"
			printf '%s\n' "$f:2: $k: $why" > "$f.want"
		done
	done
	once
	for w in int*.job.want; do
		rejected_as "${w%.want}" "$(cat "$w")"
	done
	nothing_queued
	# The same values as flags are usage errors naming the flag.
	for flag in --priority --gpu-count --timeout --gpus; do
		for v in 99999999999999999999 1e9 1.5 0x10 +5 ' 5' ''; do
			run --separate-stderr sub "$flag" "$v" -- true
			failed 64 cardbaton-submit
			[[ $stderr == "cardbaton-submit: $flag: "* ]]
		done
	done
	# The bounds themselves are fine.
	printf 'command: [true]\npriority: -99999999\ntimeout_seconds: 315360000\ngpu_count: 0\n' > edge.job
	sub --job edge.job >/dev/null
	sub --priority 99999999 --gpus 1023 --timeout 0 -- true >/dev/null
}

@test "workflow fields: hold, begin, after, after_any of the wrong kind are 65 file:line: key; rejected in new/; their flags 64" {
	make_spool
	local cases=(
		'hold: yes|must be true or false'
		'hold: 1|must be true or false'
		'hold: [true]|must be true or false'
		'begin: +3s|not an RFC 3339 time (like 2026-12-01T18:00:00Z)'
		'begin: 2026-02-30T00:00:00Z|not an RFC 3339 time (like 2026-12-01T18:00:00Z)'
		'begin: 1969-12-31T23:59:59Z|not an RFC 3339 time (like 2026-12-01T18:00:00Z)'
		'begin: 10000-01-01T00:00:00Z|not an RFC 3339 time (like 2026-12-01T18:00:00Z)'
		'begin: 2026-12-01T18:00:00|not an RFC 3339 time (like 2026-12-01T18:00:00Z)'
		'begin: 2026-12-01T18:00:00.1234567890Z|not an RFC 3339 time (like 2026-12-01T18:00:00Z)'
		'begin: 2026-12-01T18:00:00.Z|not an RFC 3339 time (like 2026-12-01T18:00:00Z)'
		'begin: 2026-12-01T18:00:00,5Z|not an RFC 3339 time (like 2026-12-01T18:00:00Z)'
		'begin: 9999-12-31T23:59:59.9999Z|not an RFC 3339 time (like 2026-12-01T18:00:00Z)'
		'begin: 9999-12-31T23:30:00-00:31|not an RFC 3339 time (like 2026-12-01T18:00:00Z)'
		'begin: 1970-01-01T00:30:00.5+01:00|not an RFC 3339 time (like 2026-12-01T18:00:00Z)'
		'begin: 2026-12-01T18:00:00+24:00|not an RFC 3339 time (like 2026-12-01T18:00:00Z)'
		'begin: 2026-12-01T18:00:00-01:60|not an RFC 3339 time (like 2026-12-01T18:00:00Z)'
		'begin: 2026-12-01T18:00:00+0100|not an RFC 3339 time (like 2026-12-01T18:00:00Z)'
		'begin: 2026-12-01T18:00:00 EST|not an RFC 3339 time (like 2026-12-01T18:00:00Z)'
		'after: []|must list at least one job ID'
		'after: 5|must be a list'
		'after: {a: 1}|must be a list'
	)
	local c k=0 line want
	for c in "${cases[@]}"; do
		k=$((k + 1))
		line=${c%%|*}
		want="wf$k.job:2: ${line%%:*}: ${c#*|}"
		printf 'command: [true]\n%s\n' "$line" > "wf$k.job"
		refused "wf$k.job" "$want"
		printf '%s\n' "$want" > "wf$k.job.want"
	done
	printf 'command: [true]\nafter: [1, 1]\n' > wfdup.job
	refused wfdup.job "wfdup.job:2: after[1]: 1 is listed twice"
	printf '%s\n' "wfdup.job:2: after[1]: 1 is listed twice" > wfdup.job.want
	printf 'command: [true]\nafter_any: [99999999999]\n' > wfbig.job
	refused wfbig.job "wfbig.job:2: after_any[0]: must be between 1 and 9999999999"
	printf '%s\n' "wfbig.job:2: after_any[0]: must be between 1 and 9999999999" > wfbig.job.want
	# 1025 IDs: more than JOB_MAX_DEPS.
	{ printf 'command: [true]\nafter: ['; seq -s, 1 1025 | tr -d '\n'; printf ']\n'; } > wfmany.job
	run --separate-stderr sub --job wfmany.job
	failed 65 cardbaton-submit
	once
	for w in wf*.job.want; do
		rejected_as "${w%.want}" "$(cat "$w")"
	done
	nothing_queued
	for v in '' x 1,,2 0 -1 1.5 99999999999 ' 1' 1,1; do
		for flag in --after --after-any; do
			run --separate-stderr sub "$flag" "$v" -- true
			failed 64 cardbaton-submit
			[[ $stderr == "cardbaton-submit: $flag: "* ]]
		done
	done
	for v in '' + +x +1y +-1 ++1 +99999999999d 2026-12-01T18:00:00 now +1.5s +2s5 +315360001 +3651d \
		 2026-12-01T18:00:00.1234567890Z 2026-12-01T18:00:00.Z 9999-12-31T23:59:59.9999Z \
		 9999-12-31T23:30:00-00:31 2026-12-01T18:00:00+24:00 2026-12-01T18:00:00+01 \
		 2026-12-01T18:00:00UTC '2026-12-01T18:00:00.5 +01:00'; do
		run --separate-stderr sub --begin "$v" -- true
		failed 64 cardbaton-submit
		[[ $stderr == "cardbaton-submit: --begin: "* ]]
	done
	for tool in cardbaton-hold cardbaton-release; do
		run --separate-stderr "$tool" --config "$C"
		failed 64 "$tool"
		run --separate-stderr "$tool" --config "$C" 1 ../2
		failed 64 "$tool"
		run --separate-stderr "$tool" --config "$C" 12345
		failed 66 "$tool"
	done
	nothing_queued
}

@test "array, sweep, memory and share fields: bad specs, params, limits and combinations are 65 naming the field; rejected in new/; their flags 64" {
	make_spool
	local cases=(
		"array: '3-1'|wa1.job:2: array: not an array spec (A-B, A-B:STEP or I,J,K, then %K if wanted)"
		"array: '1,1'|wa2.job:2: array: an index is given twice"
		"array: '0-10000'|wa3.job:2: array: more than 10000 jobs"
		"array: [1]|wa4.job:2: array: must be a string"
		"params: {}|wa5.job:2: params: must name at least one parameter"
		"params: {a: []}|wa6.job:2: params.a: must list at least one value"
		"params: {a: [x, x]}|wa7.job:2: params.a[1]: 'x' is listed twice"
		"params: {index: [1]}|wa8.job:2: params.index: is the array index, not a parameter name"
		"params: {a-b: [1]}|wa9.job:2: params.a-b: not a valid parameter name ([A-Za-z_][A-Za-z0-9_]*)"
		"params: {a: ['']}|wa10.job:2: params.a[0]: must not be empty"
		"params: {a: 1}|wa11.job:2: params.a: must be a list"
		"max_running: 2|wa12.job: max_running: only for an array or params"
		"max_running: 0|wa13.job:2: max_running: must be between 1 and 10000"
		"gpu_memory_mib: 0|wa14.job:2: gpu_memory_mib: must be between 1 and 16777216"
		"gpu_memory_mib: 16777217|wa15.job:2: gpu_memory_mib: must be between 1 and 16777216"
		"gpu_memory_mib: 60G|wa16.job:2: gpu_memory_mib: must be an integer"
		"share: yes|wa17.job:2: share: must be true or false"
		"share: true|wa18.job: share: needs gpu_memory_mib (what the job takes of each card)"
	)
	local c k=0 line want
	for c in "${cases[@]}"; do
		k=$((k + 1))
		line=${c%%|*}
		want=${c#*|}
		printf 'command: [true]\n%s\n' "$line" > "wa$k.job"
		refused "wa$k.job" "$want"
		printf '%s\n' "$want" > "wa$k.job.want"
	done
	printf 'command: [true]\narray: "0-3"\nparams: {a: [1]}\n' > wab.job
	refused wab.job "wab.job: params: cannot be combined with array"
	printf '%s\n' "wab.job: params: cannot be combined with array" > wab.job.want
	once
	for w in wa*.job.want; do
		rejected_as "${w%.want}" "$(cat "$w")"
	done
	nothing_queued
	for v in '' x 3-1 1-5:0 1,1 0-3%0 0-3% 1-2-3 -1 0-10000 ' 1' 1%2%3; do
		run --separate-stderr sub --array "$v" -- true
		failed 64 cardbaton-submit
		[[ $stderr == "cardbaton-submit: --array: "* ]]
	done
	for v in '' a a= 'a=1,,2' 'a=1,1' '1a=2' 'index=1' '=1' "a=$(printf 'x\001')"; do
		run --separate-stderr sub --param "$v" -- true
		failed 64 cardbaton-submit
		[[ $stderr == "cardbaton-submit: --param"* ]]
	done
	for v in '' 0 -1 10001 x; do
		run --separate-stderr sub --array 0-1 --max-running "$v" -- true
		failed 64 cardbaton-submit
	done
	for v in '' 0 -1 x 5K G +5 16385G 16777217 ' 5' 1.5G; do
		run --separate-stderr sub --gpu-memory "$v" -- true
		failed 64 cardbaton-submit
		[[ $stderr == "cardbaton-submit: --gpu-memory: "* ]]
	done
	run --separate-stderr sub --array 0-1 --param a=1 -- true
	failed 64 cardbaton-submit
	run --separate-stderr sub --max-running 2 -- true
	failed 64 cardbaton-submit
	says "cardbaton-submit: max_running: only for an array or params"
	nothing_queued
}

# ---- command, cwd, env ----------------------------------------------------------

@test "command: empty, null, a mapping, nested, an empty first word or a NUL are refused; scalars in the list are their text" {
	printf 'command: []\n' > c1.job
	refused c1.job "c1.job:1: command: must not be empty"
	printf 'command: ~\n' > c2.job
	refused c2.job "c2.job:1: command: must be a list of strings or a string"
	printf 'command: {a: b}\n' > c3.job
	refused c3.job "c3.job:1: command: must be a list of strings or a string"
	printf 'command: [[a, b]]\n' > c4.job
	refused c4.job "c4.job:1: command[0]: must be a string"
	printf 'command: ["", x]\n' > c5.job
	refused c5.job "c5.job:1: command[0]: must not be empty"
	printf 'command: ""\n' > c6.job
	refused c6.job "c6.job:1: command: must not be empty"
	printf 'command: [echo, "a\\0b"]\n' > c7.job
	refused c7.job "c7.job:1: command[1]: must not contain a NUL character"
	printf 'command: [echo, {a: 1}]\n' > c8.job
	refused c8.job "c8.job:1: command[1]: must be a string"
	printf 'command: [echo, null]\n' > c9.job
	refused c9.job "c9.job:1: command[1]: must be a string"
	printf 'gpu_count: 0\n' > c10.job
	refused c10.job "c10.job: command: missing"
	once
	for n in 1 2 3 4 5 6 7 8 9 10; do
		[ -n "$(reason "c$n.job")" ]
	done
	rejected_as c7.job "c7.job:1: command[1]: must not contain a NUL character"
	rejected_as c10.job "c10.job: command: missing"
	nothing_queued
	# The only empty word that matters is the first.
	run --separate-stderr sub -- '' x
	failed 64 cardbaton-submit
	# Plain scalars in a list are taken as their text ([sleep, 10]).
	id=$(sub --job <(printf 'command: [sh, -c, "echo $0 $1 > %s", 1, true]\ngpu_count: 0\n' "$T/out"))
	once
	wait_for 10 '[ -s "$T/out" ] && { once; [ -e "$T/spool/done/$(printf %010d "$id").job" ]; }'
	[ "$(cat "$T/out")" = "1 true" ]
}

@test "resume_command: empty, null, a mapping, nested, an empty first word or a NUL are refused as in command; --resume-command stays a string" {
	printf 'command: [true]\nresume_command: []\n' > r1.job
	refused r1.job "r1.job:2: resume_command: must not be empty"
	printf 'command: [true]\nresume_command: ~\n' > r2.job
	refused r2.job "r2.job:2: resume_command: must be a list of strings or a string"
	printf 'command: [true]\nresume_command: {a: b}\n' > r3.job
	refused r3.job "r3.job:2: resume_command: must be a list of strings or a string"
	printf 'command: [true]\nresume_command: [[a, b]]\n' > r4.job
	refused r4.job "r4.job:2: resume_command[0]: must be a string"
	printf 'command: [true]\nresume_command: ["", x]\n' > r5.job
	refused r5.job "r5.job:2: resume_command[0]: must not be empty"
	printf 'command: [true]\nresume_command: ""\n' > r6.job
	refused r6.job "r6.job:2: resume_command: must not be empty"
	printf 'command: [true]\nresume_command: [echo, "a\\0b"]\n' > r7.job
	refused r7.job "r7.job:2: resume_command[1]: must not contain a NUL character"
	printf '{"command": ["true"],\n "resume_command": ["echo", {"a": 1}]}\n' > r8.job
	refused r8.job "r8.job:2: resume_command[1]: must be a string"
	printf '{"command": ["true"],\n "resume_command": ["echo", null]}\n' > r9.job
	refused r9.job "r9.job:2: resume_command[1]: must be a string"
	printf '{"command": ["true"],\n "resume_command": ["echo", ["x"]]}\n' > r10.job
	refused r10.job "r10.job:2: resume_command[1]: must be a string"
	once
	for n in 1 2 3 4 5 6 7 8 9 10; do
		rejected_as "r$n.job" "$(sub --job "r$n.job" 2>&1 | sed 's/^cardbaton-submit: //')"
	done
	nothing_queued
	# The flag is a string (run by sh -c), whatever it looks like.
	id=$(sub --gpu-count 0 --resume-command '[a, "b c"]' -- true)
	once
	[ "$(cat "$T"/spool/*/"$(printf %010d "$id").job" | json 'd["job"]["resume_command"]')" = '[a, "b c"]' ]
}

@test "a cwd that does not exist on the node fails the job with reason 'cwd DIR: ...'; nothing else is affected" {
	start_daemon
	bad=$(sub --cwd "$T/no/such/dir" --gpu-count 0 -- true)
	file=$(sub --cwd "$C" --gpu-count 0 -- true)
	good=$(sub --cwd "$T" --gpu-count 0 -- sh -c 'pwd > out')
	for id in $bad $file $good; do
		wait_for 15 '[ -e "$T/spool/done/$(printf %010d "$id").job" ]'
	done
	[ "$(st --json "$bad" | json 'd["jobs"][0]["state"]')" = failed ]
	[ "$(st --json "$bad" | json 'd["jobs"][0]["reason"]')" = "cwd $T/no/such/dir: No such file or directory" ]
	[ "$(st --json "$file" | json 'd["jobs"][0]["reason"]')" = "cwd $C: Not a directory" ]
	[ "$(st --json "$good" | json 'd["jobs"][0]["state"]')" = succeeded ]
	[ "$(cat "$T/out")" = "$T" ]
	kill -0 "$DAEMON_PID"
}

@test "env: names with '=', NUL, empty or a digit first, values with NUL, a list or null: refused; flags 64" {
	printf 'command: [true]\nenv: {"A=B": x}\n' > e1.job
	refused e1.job "e1.job:2: env.A=B: not a valid variable name"
	printf 'command: [true]\nenv: {"": x}\n' > e2.job
	refused e2.job "e2.job:2: env.: not a valid variable name"
	printf 'command: [true]\nenv: {"A\\0B": x}\n' > e3.job
	refused e3.job "e3.job:2: env: keys must be strings"
	printf 'command: [true]\nenv: {A: "x\\0y"}\n' > e4.job
	refused e4.job "e4.job:2: env.A: must not contain a NUL character"
	printf 'command: [true]\nenv: {1A: x}\n' > e5.job
	refused e5.job "e5.job:2: env.1A: not a valid variable name"
	printf 'command: [true]\nenv: [A=1]\n' > e6.job
	refused e6.job "e6.job:2: env: must be a mapping"
	printf 'command: [true]\nenv: {A: ~}\n' > e7.job
	refused e7.job "e7.job:2: env.A: must be a string"
	printf 'command: [true]\nenv: {A: 1, A: 2}\n' > e8.job
	refused e8.job "e8.job:2: env.A: duplicate key"
	printf 'command: [true]\nenv: {"A B": x}\n' > e9.job
	refused e9.job "e9.job:2: env.A B: not a valid variable name"
	once
	for n in 1 2 3 4 5 6 7 8 9; do
		[ -n "$(reason "e$n.job")" ]
	done
	rejected_as e1.job "e1.job:2: env.A=B: not a valid variable name"
	rejected_as e4.job "e4.job:2: env.A: must not contain a NUL character"
	nothing_queued
	for e in =x A '=' '1A=x' 'A B=x' "$(printf 'A\tB=x')"; do
		run --separate-stderr sub --env "$e" -- true
		failed 64 cardbaton-submit
		[[ $stderr == "cardbaton-submit: --env: "* ]]
	done
	# A value may hold '=' and anything but NUL.
	id=$(sub --gpu-count 0 --env 'A=b=c' --env "B=$(printf 'x\ny')" -- sh -c 'printf "%s|%s" "$A" "$B" > "$0"' "$T/out")
	start_daemon
	wait_for 10 '[ -s "$T/out" ]'
	[ "$(cat "$T/out")" = "b=c|$(printf 'x\ny')" ]
}

# ---- YAML ---------------------------------------------------------------------

@test "YAML anchors and aliases (billion laughs) are refused at the first anchor, in bounded memory" {
	{
		printf 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
		p=a
		for n in b c d e f g h i j; do
			printf '%s: &%s [*%s,*%s,*%s,*%s,*%s,*%s,*%s,*%s,*%s]\n' $n $n $p $p $p $p $p $p $p $p $p
			p=$n
		done
		printf 'command: [true]\n'
	} > laughs.job
	# An alias without an anchor, and an anchor on the command itself.
	printf 'command: *x\n' > alias.job
	printf 'command: &c [true]\nname: c\n' > anchor.job
	printf '{"command": ["true"], "env": {"A": &v "x", "B": *v}}\n' > json.job
	if ! asan; then
		# Refused without building the graph: well under 64 MiB.
		run --separate-stderr bash -c "ulimit -v 65536; cardbaton-submit --config '$C' --job laughs.job"
		failed 65 cardbaton-submit
	fi
	refused laughs.job "laughs.job:1: anchors and aliases are not allowed"
	run --separate-stderr sub --job alias.job
	failed 65 cardbaton-submit
	[[ $stderr == "cardbaton-submit: alias.job:1: "* ]]
	drop alias.job
	refused anchor.job "anchor.job:1: anchors and aliases are not allowed"
	refused json.job "json.job:1: anchors and aliases are not allowed"
	once
	rejected_as laughs.job "laughs.job:1: anchors and aliases are not allowed"
	rejected_as anchor.job "anchor.job:1: anchors and aliases are not allowed"
	[[ $(reason alias.job) == "alias.job:1: "* ]]
	nothing_queued
}

@test "10^5 levels of [ or { are refused: nesting deeper than 16 levels" {
	{ printf 'command: '; head -c 100000 /dev/zero | tr '\0' '['; head -c 100000 /dev/zero | tr '\0' ']'; echo; } > seq.job
	{ printf 'command: '; yes '{a: ' | head -n 100000 | tr -d '\n'; echo; } > mapd.job
	{ head -c 100000 /dev/zero | tr '\0' '{'; echo; } > open.job
	{ printf '{"command": '; head -c 100000 /dev/zero | tr '\0' '['; printf '"x"'; head -c 100000 /dev/zero | tr '\0' ']'; echo '}'; } > deep.json.job
	# Block style: 17 levels of "- " nested lists.
	{ printf 'command:\n'; for i in $(seq 0 17); do printf '%*s- \n' $((i * 2 + 2)) ''; done; } > block.job
	if ! asan; then
		run --separate-stderr bash -c "ulimit -v 65536; cardbaton-submit --config '$C' --job seq.job"
		failed 65 cardbaton-submit
	fi
	refused seq.job "seq.job:1: nesting deeper than 16 levels"
	refused mapd.job "mapd.job:1: nesting deeper than 16 levels"
	refused open.job "open.job:1: nesting deeper than 16 levels"
	refused deep.json.job "deep.json.job:1: nesting deeper than 16 levels"
	run --separate-stderr sub --job block.job
	failed 65 cardbaton-submit
	[[ $stderr == *"nesting deeper than 16 levels" ]]
	drop block.job
	once
	for f in seq mapd open deep.json; do
		rejected_as "$f.job" "$f.job:1: nesting deeper than 16 levels"
	done
	[[ $(reason block.job) == *"nesting deeper than 16 levels" ]]
	nothing_queued
}

@test "several documents in one file are refused: more than one document; an end marker alone is fine" {
	printf 'command: [true]\n---\ncommand: [false]\n' > two.job
	refused two.job "two.job:2: more than one document"
	printf -- '---\ncommand: [true]\n...\n---\n' > empty2.job
	refused empty2.job "empty2.job:4: more than one document"
	printf '{"command": ["true"]}\n---\n{"command": ["false"]}\n' > json2.job
	refused json2.job "json2.job:2: more than one document"
	printf -- '---\ncommand: [true]\ngpu_count: 0\n...\n' > one.job
	sub --job one.job >/dev/null
	drop one.job
	once
	rejected_as two.job "two.job:2: more than one document"
	rejected_as empty2.job "empty2.job:4: more than one document"
	rejected_as json2.job "json2.job:2: more than one document"
	[ -z "$(reason one.job)" ]
}

@test "NUL bytes, invalid UTF-8 and UTF-16 are refused naming the offset; a UTF-8 byte order mark is accepted" {
	printf 'command: [true]\nname: a\0b\n' > nul.job
	refused nul.job "nul.job: contains a NUL byte (offset 23)"
	printf 'command: [true]\nname: "\xff"\n' > ff.job
	refused ff.job "ff.job: not valid UTF-8: invalid leading UTF-8 octet (byte 0xff at offset 23)"
	printf 'command: [true]\nname: "\xc0\xaf"\n' > overlong.job
	refused overlong.job "overlong.job: not valid UTF-8: invalid length of a UTF-8 sequence (byte 0xc0 at offset 23)"
	printf 'command: [true]\nname: "\xed\xa0\x80"\n' > surrogate.job
	refused surrogate.job "surrogate.job: not valid UTF-8: invalid Unicode character U+D800 (byte 0xed at offset 23)"
	printf 'command: [true]\nname: "\xe2\x82"\n' > cut.job
	refused cut.job "cut.job: not valid UTF-8: invalid trailing UTF-8 octet (byte 0x22 at offset 25)"
	printf 'command: [true]\n' | iconv -t UTF-16 > utf16.job
	refused utf16.job "utf16.job: not valid UTF-8: UTF-16 byte order mark"
	printf 'command: [true]\n' | iconv -t UTF-16BE > utf16be.job
	refused utf16be.job "utf16be.job: contains a NUL byte (offset 0)"
	printf 'command: [true]\nname: "\x01"\n' > ctl.job
	refused ctl.job "ctl.job: control characters are not allowed (U+0001 at offset 23)"
	# A UTF-8 byte order mark at the start is accepted (YAML allows it),
	# in YAML and in JSON.
	printf '\xef\xbb\xbfcommand: [true]\nname: bom\ngpu_count: 0\n' > bom.job
	printf '\xef\xbb\xbf{"command": ["true"], "name": "bomj", "gpu_count": 0}' > bomj.job
	a=$(sub --job bom.job)
	b=$(sub --job bomj.job)
	[ "$(st --json "$a" | json 'd["jobs"][0]["name"]')" = bom ]
	[ "$(st --json "$b" | json 'd["jobs"][0]["name"]')" = bomj ]
	drop bom.job
	drop bomj.job
	once
	for f in nul ff overlong surrogate cut utf16 utf16be ctl; do
		[ "$(reason "$f.job")" = "$(sub --job "$f.job" 2>&1 | sed 's/^cardbaton-submit: //')" ]
	done
	[ -z "$(reason bom.job)" ] && [ -z "$(reason bomj.job)" ]
	[ "$(st --json --all | json 'sorted(j["name"] for j in d["jobs"])')" = '["bom", "bom", "bomj", "bomj"]' ]
}

@test "a %00 in a worker record (a state file on the node, a launch spec, a watch request) is refused with its reason, never read cut short" {
	jstate() { st --json "$id" | json 'd["jobs"][0]["state"]'; }
	start_daemon
	id=$(sub --gpu-count 0 -- sh -c 'while [ ! -e "$0" ]; do sleep 0.02; done' "$T/go")
	wait_for 20 '[ "$(jstate)" = running ]'
	aid=$(cd "$STATE/attempts" && ls -- *.state)
	aid=${aid%.state}
	# Its state file forged on the node: "succeeded" and a reason, each
	# with a NUL after it (the worker writes NUL as %00).
	printf 'attempt %s\nstate succeeded%%00running\nexit_code 0\nreason exit%%20status%%200%%00x\nend\n' \
		"$aid" > "$STATE/attempts/.forged"
	mv "$STATE/attempts/.forged" "$STATE/attempts/$aid.state"
	# The worker names the file and the reason (status, and watch, whose
	# stderr is the daemon's) ...
	run --separate-stderr cardbaton-worker -d "$STATE" status "$aid"
	[ "$status" -eq 71 ]
	[ "${stderr_lines[0]}" = "cardbaton-worker: attempts/$aid.state: %00 (a NUL byte) in a value" ]
	[ -z "$output" ]
	wait_for 10 'grep -qxF "cardbaton-worker: attempts/$aid.state: %00 (a NUL byte) in a value" "$T/daemon.log"'
	# ... and the job is not taken as succeeded: it runs on, and ends as
	# it really does once its own state file is written.
	[ "$(jstate)" = running ]
	echo 'attempt 0' > "$T/go"
	wait_for 30 '[ "$(jstate)" = succeeded ]'
	[ "$(st --json "$id" | json 'd["jobs"][0]["reason"]')" = "exit status 0" ]
	# A launch spec on stdin, and a request on watch's: refused whole.
	printf 'attempt d1-1\narg tr%%00ue\nend\n' > "$T/spec.in"
	run --separate-stderr cardbaton-worker -d "$STATE" launch < "$T/spec.in"
	failed 65 cardbaton-worker
	says "cardbaton-worker: bad spec: %00 (a NUL byte) in a value"
	printf 'request launch\nattempt d1-2\narg true%%00\nend\n' > "$T/watch.in"
	run --separate-stderr cardbaton-worker -d "$STATE" watch < "$T/watch.in"
	[ "$status" -eq 71 ]
	[ "${lines[0]}" = "ready 1" ]
	not grep -q '^reply' <<< "$output"
	says "cardbaton-worker: watch: bad request: %00 (a NUL byte) in a value"
	[ ! -e "$STATE/attempts/d1-1" ] && [ ! -e "$STATE/attempts/d1-2" ]
}

# ---- sizes ----------------------------------------------------------------------

@test "huge: a 100 MB file in new/ is rejected unread; 100 MB or endless --job input is 65" {
	make_spool
	truncate -s 100M "$T/spool/tmp/huge.job"
	mv "$T/spool/tmp/huge.job" "$T/spool/new/huge.job"
	truncate -s 100M huge.job
	run --separate-stderr sub --job huge.job
	failed 65 cardbaton-submit
	says "cardbaton-submit: huge.job: larger than 1048576 bytes"
	run --separate-stderr sub --job /dev/zero
	failed 65 cardbaton-submit
	says "cardbaton-submit: /dev/zero: larger than 1048576 bytes"
	run --separate-stderr bash -c "yes 'command: [true]' | cardbaton-submit --config '$C' --job -"
	failed 65 cardbaton-submit
	# One byte over the limit is refused; exactly at it is accepted.
	{ printf 'command: [true]\n'; head -c $((1048576 - 16)) /dev/zero | tr '\0' '#'; } > limit.job
	{ cat limit.job; echo; } > over.job
	run --separate-stderr sub --job over.job
	failed 65 cardbaton-submit
	drop over.job
	once
	rejected_as huge.job "is larger than 1 MiB"
	rejected_as over.job "is larger than 1 MiB"
	nothing_queued
	[ "$(wc -c < limit.job)" -eq 1048576 ]
	sub --job limit.job >/dev/null
}

@test "huge fields: a value over 64 KiB, 4097 arguments or env entries, 100k env entries: refused quickly, flags 64" {
	big=$(head -c 65537 /dev/zero | tr '\0' x)
	printf 'command: [echo, "%s"]\n' "$big" > arg.job
	refused arg.job "arg.job:1: value longer than 65536 bytes"
	# A 1 MiB argument makes a file over the limit (and no kernel passes
	# one in argv: MAX_ARG_STRLEN is 128 KiB).
	{ printf 'command: [echo, "'; head -c 1048576 /dev/zero | tr '\0' x; printf '"]\n'; } > arg1m.job
	refused arg1m.job "arg1m.job: larger than 1048576 bytes"
	python3 -c 'import json; print(json.dumps({"command": ["true"] + ["a"] * 4096}))' > args.job
	refused args.job "args.job:1: command: more than 4096 items"
	python3 -c 'import json; print(json.dumps({"command": ["true"], "env": {"V%d" % i: "x" for i in range(4097)}}))' > env.job
	refused env.job "env.job:1: env: more than 4096 entries"
	python3 -c 'import json; print(json.dumps({"command": ["true"], "resume_command": ["r"] + ["a"] * 4096}))' > rargs.job
	refused rargs.job "rargs.job:1: resume_command: more than 4096 items"
	printf 'command: [true]\nresume_command: [r, "%s"]\n' "$big" > rarg.job
	refused rarg.job "rarg.job:2: value longer than 65536 bytes"
	# 100k entries fit in 1 MiB of YAML: the value count stops them.
	python3 -c '
import itertools, string
print("command: [true]\nenv:")
for k in itertools.islice(itertools.product(string.ascii_letters, repeat=3), 100000):
    print(" %s: x" % "".join(k))' > env100k.job
	[ "$(wc -c < env100k.job)" -lt 1048576 ]
	run --separate-stderr sub --job env100k.job
	failed 65 cardbaton-submit
	# Value 65537: the root, command, its list and word, env, its
	# mapping (6), then two per entry: the key of entry 32766, line 32768.
	says "cardbaton-submit: env100k.job:32768: too many values (more than 65536)"
	drop env100k.job
	once
	rejected_as arg.job "arg.job:1: value longer than 65536 bytes"
	rejected_as arg1m.job "is larger than 1 MiB"
	rejected_as args.job "args.job:1: command: more than 4096 items"
	rejected_as env.job "env.job:1: env: more than 4096 entries"
	rejected_as rargs.job "rargs.job:1: resume_command: more than 4096 items"
	rejected_as rarg.job "rarg.job:2: value longer than 65536 bytes"
	[ -n "$(reason env100k.job)" ]
	nothing_queued
	# The same through flags: usage errors naming what is too big.
	run --separate-stderr sub -- echo "$big"
	failed 64 cardbaton-submit
	[[ $stderr == *"longer than 65536 bytes"* ]]
	run --separate-stderr sub -- $(seq 4097)
	failed 64 cardbaton-submit
	[[ $stderr == *"more than 4096"* ]]
	run --separate-stderr sub --name "$(head -c 257 /dev/zero | tr '\0' n)" -- true
	failed 64 cardbaton-submit
	[[ $stderr == "cardbaton-submit: --name: longer than 256 bytes" ]]
	run --separate-stderr sub --cwd "/$big" -- true
	failed 64 cardbaton-submit
	[[ $stderr == "cardbaton-submit: --cwd: longer than 65536 bytes" ]]
	# 20k --env flags (about as many as the kernel passes): refused at
	# the 4097th, not after a merge that is quadratic in their number.
	seq -f '--env=V%.0f=x' 20000 > envflags
	run --separate-stderr bash -c "timeout $(scaled 20) cardbaton-submit --config '$C' \$(cat envflags) -- true"
	failed 64 cardbaton-submit
	says "cardbaton-submit: --env: more than 4096 variables"
	# The limits themselves are accepted.
	python3 -c 'import json; print(json.dumps({"command": ["true"] + ["a"] * 4095, "gpu_count": 0, "env": {"V%d" % i: "x" for i in range(4096)},
		"resume_command": ["r"] + ["a"] * 4095}))' > max.job
	sub --job max.job >/dev/null
	sub --gpu-count 0 -- echo "$(head -c 65536 /dev/zero | tr '\0' x)" >/dev/null
}

# ---- stray files in the spool -------------------------------------------------

# stray DIR NAME KIND: put a symlink (to $T/outside/NAME, which holds
# something valid), a directory or a FIFO at SPOOL/DIR/NAME.
stray() {
	local p=$T/spool/$1/$2
	case $3 in
	link)
		mkdir -p "$T/outside"
		printf '%s\n' "${4:-x}" > "$T/outside/$1-$2"
		ln -s "$T/outside/$1-$2" "$p" ;;
	dir) mkdir "$p" ;;
	fifo) mkfifo "$p" ;;
	esac
}

@test "symlinks, directories and FIFOs in every spool directory: the daemon rejects those in new/, warns once about the rest, follows nothing and runs jobs" {
	make_spool
	id=$(cut -c1-8 "$T/spool/id")
	rec='{"id": "%s", "rev": 9, "state": "%s", "reason": "forged", "priority": 0, "job": {"command": ["touch", "'"$T"'/forged"]}, "attempts": []}'
	# Names of each directory's grammar, so that nothing is skipped by name.
	n=0
	for kind in link dir fifo; do
		n=$((n + 1))
		stray new "$kind.job" $kind '{"command": ["touch", "'"$T"'/forged"]}'
		stray incoming "000000060$n.job" $kind '{"command": ["touch", "'"$T"'/forged"]}'
		stray queued "100000000-000000010$n.job" $kind "$(printf "$rec" 10$n queued)"
		stray running "000000020$n.job" $kind "$(printf "$rec" 20$n running)"
		stray paused "000000030$n.job" $kind "$(printf "$rec" 30$n paused)"
		stray done "000000040$n.job" $kind "$(printf "$rec" 40$n succeeded)"
		stray rejected "000000050$n.job" $kind
		stray ctl "30$n.resume.1.1.$kind" $kind
		stray nodes "$kind.json" $kind '{"name": "forged", "reachable": true}'
		stray hooks "000000080$n.hook" $kind '{"id": "80'$n'", "state": "failed"}'
		stray tmp "$kind.job" $kind
	done
	# A socket and a device (opening one may do something): refused unopened.
	python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$T/spool/new/sock.job"
	dev=0
	mknod "$T/spool/new/dev.job" c 1 3 2>/dev/null && dev=1
	# The daemon's own nodes/ file a directory: it cannot be written.
	rm -f "$T/spool/nodes/local.json"
	mkdir "$T/spool/nodes/local.json"
	# One ID in three directories: still one line for each.
	stray running 0000000701.job link "$(printf "$rec" 701 running)"
	stray paused 0000000701.job fifo
	stray done 0000000701.job dir
	touch -h -d '3 days ago' "$T"/spool/tmp/*
	before=$(cd "$T/outside" && sha256sum *)
	start_daemon
	# A real job runs, beside all of it.
	a=$(sub --gpu-count 0 -- true)
	wait_for 15 '[ -e "$T/spool/done/$(printf %010d "$a").job" ]'
	# new/ and incoming/: rejected, with the kind as the reason.
	wait_for 10 '[ -z "$(ls -A "$T/spool/new" "$T/spool/incoming" | grep -v ":$" | grep .)" ]'
	rejected_as link.job "is a symbolic link"
	rejected_as dir.job "is a directory"
	rejected_as fifo.job "is not a regular file"
	rejected_as sock.job "is not a regular file"
	[ "$dev" = 0 ] || rejected_as dev.job "is not a regular file"
	rejected_as 0000000601.job "is a symbolic link"
	rejected_as 0000000602.job "is a directory"
	rejected_as 0000000603.job "is not a regular file"
	# Everywhere else: one warning line each, the item left alone.
	for item in queued/100000000-000000010{1,2,3}.job running/000000020{1,2,3}.job \
		paused/000000030{1,2,3}.job done/000000040{1,2,3}.job rejected/000000050{1,2,3}.job \
		ctl/301.resume.1.1.link ctl/302.resume.1.1.dir ctl/303.resume.1.1.fifo \
		nodes/{link,dir,fifo}.json tmp/{link,dir,fifo}.job {running,paused,done}/0000000701.job \
		hooks/000000080{1,2,3}.hook; do
		c=$(grep -c "$item" "$T/daemon.log" || true)
		[ "$c" -eq 1 ] || { echo "$item: $c lines in the daemon's log" >&2; false; }
		case $item in
		ctl/*link|ctl/*fifo) [ ! -e "$T/spool/$item" ] && [ ! -L "$T/spool/$item" ] ;;  # removed, as a bad request is
		*) [ -L "$T/spool/$item" ] || [ -e "$T/spool/$item" ] ;;
		esac
	done
	# That one is said when found and when a write fails, not at
	# every node call.
	[ "$(grep -c 'nodes/local.json' "$T/daemon.log")" -le 2 ]
	# Nothing followed: no forged job ran, no target changed.
	[ ! -e "$T/forged" ]
	[ "$(cd "$T/outside" && sha256sum *)" = "$before" ]
	# Still serving.
	b=$(sub --gpu-count 0 -- true)
	wait_for 15 '[ -e "$T/spool/done/$(printf %010d "$b").job" ]'
	kill -0 "$DAEMON_PID"
	stop_daemon
	# Restarted with all of it still there: starts and serves.
	start_daemon
	c=$(sub --gpu-count 0 -- true)
	wait_for 15 '[ -e "$T/spool/done/$(printf %010d "$c").job" ]'
	[ ! -e "$T/forged" ]
}

@test "symlinks, directories and FIFOs in the spool: every reading tool names them, follows nothing and never blocks" {
	make_spool
	rec='{"id": "%s", "rev": 9, "state": "%s", "reason": "forged", "priority": 0, "job": {"command": ["true"]}, "attempts": []}'
	real=$(sub --gpu-count 0 -- true)
	n=0
	for kind in link dir fifo; do
		n=$((n + 1))
		stray new "09999999$n-000000070$n.job" $kind '{"command": ["x"]}'
		stray queued "100000000-000000010$n.job" $kind "$(printf "$rec" 10$n queued)"
		stray running "000000020$n.job" $kind "$(printf "$rec" 20$n running)"
		stray paused "000000030$n.job" $kind "$(printf "$rec" 30$n paused)"
		stray done "000000040$n.job" $kind "$(printf "$rec" 40$n succeeded)"
		stray nodes "$kind.json" $kind '{"name": "local", "reachable": false, "error": "forged"}'
	done
	rm -f "$T/spool/nodes/local.json"
	stray running 0000000801.job link "$(printf "$rec" 801 running)"
	stray paused 0000000801.job fifo
	stray done 0000000801.job dir
	before=$(cd "$T/outside" && sha256sum *)
	what() { case $1 in 1) echo "is a symbolic link (not followed)" ;; 2) echo "is a directory" ;; 3) echo "is not a regular file" ;; esac; }
	# status lists the real job, with one line per stray record, exit 65.
	run --separate-stderr timeout "$(scaled 20)" cardbaton-status --config "$C" --json --all
	[ "$status" -eq 65 ]
	[ "$(echo "$output" | json '[j["id"] for j in d["jobs"] if j["id"] == "'"$real"'"]')" = "[\"$real\"]" ]
	[ "$(echo "$output" | json '[n["name"] for n in d["nodes"]]')" = "[]" ]
	[ "${#stderr_lines[@]}" -eq 15 ]
	for f in running/0000000801.job paused/0000000801.job done/0000000801.job; do
		printf '%s\n' "${stderr_lines[@]}" | grep -q "^cardbaton-status: $T/spool/$f: "
	done
	for n in 1 2 3; do
		for f in queued/100000000-000000010$n.job running/000000020$n.job paused/000000030$n.job done/000000040$n.job; do
			printf '%s\n' "${stderr_lines[@]}" | grep -qxF "cardbaton-status: $T/spool/$f: $(what $n)"
		done
	done
	# Each tool on each stray ID: 65 and that line; nothing written.
	for n in 1 2 3; do
		for id in 10$n 20$n 30$n 40$n; do
			for tool in status cancel promote pause resume logs wait; do
				run --separate-stderr timeout "$(scaled 20)" "cardbaton-$tool" --config "$C" "$id"
				failed 65 "cardbaton-$tool"
				[[ $stderr == *": $(what $n)" ]]
			done
		done
	done
	[ -z "$(ls "$T/spool/ctl")" ]
	# A submission in new/ that is not a regular file shows as waiting.
	[ "$(timeout "$(scaled 20)" cardbaton-status --config "$C" --json 701 702 703 | json '[j["state"] for j in d["jobs"]]')" = '["queued", "queued", "queued"]' ]
	# Nothing followed: the symlinks' targets are as they were.
	[ "$(cd "$T/outside" && sha256sum *)" = "$before" ]
}

@test "wait without IDs: a symlink, directory or FIFO in queued/ or running/ is named (65), never followed or blocked on" {
	make_spool
	rec='{"id": "%s", "rev": 9, "state": "%s", "reason": "forged", "priority": 0, "job": {"command": ["true"]}, "attempts": []}'
	n=0
	for kind in link dir fifo; do
		n=$((n + 1))
		for d in queued running; do
			case $d in
			queued) id=10$n name=100000000-000000010$n.job ;;
			running) id=20$n name=000000020$n.job ;;
			esac
			stray $d "$name" $kind "$(printf "$rec" $id $d)"
			run --separate-stderr timeout "$(scaled 20)" cardbaton-wait --config "$C"
			failed 65 cardbaton-wait
			case $kind in
			link) says "cardbaton-wait: $T/spool/$d/$name: is a symbolic link (not followed)" ;;
			dir) says "cardbaton-wait: $T/spool/$d/$name: is a directory" ;;
			fifo) says "cardbaton-wait: $T/spool/$d/$name: is not a regular file" ;;
			esac
			rm -rf "$T/spool/$d/$name"
		done
	done
	# Paused, finished or rejected: aside, not read.
	stray paused 0000000301.job fifo
	stray done 0000000401.job link "$(printf "$rec" 401 succeeded)"
	stray rejected 0000000501.job dir
	run --separate-stderr timeout "$(scaled 20)" cardbaton-wait --config "$C"
	[ "$status" -eq 0 ]
	[ -z "$stderr" ]
}

@test "a spool whose directories are symlinks is refused by every tool and the daemon (78), nothing followed" {
	make_spool
	mkdir "$T/elsewhere"
	mv "$T/spool/queued" "$T/elsewhere/queued"
	ln -s "$T/elsewhere/queued" "$T/spool/queued"
	run --separate-stderr st
	failed 78 cardbaton-status
	[[ $stderr == *"$T/spool/queued: "* ]]
	run --separate-stderr sub -- true
	failed 78 cardbaton-submit
	run --separate-stderr timeout "$(scaled 20)" cardbaton-wait --config "$C"
	failed 78 cardbaton-wait
	[[ $stderr == *"$T/spool/queued: "* ]]
	run --separate-stderr cardbaton-spoold --config "$C" --once
	failed 78 cardbaton-spoold
	[ -z "$(ls -A "$T/elsewhere/queued")" ]
	# hooks/, the daemon's alone: the daemon refuses it, the tools never look.
	rm "$T/spool/queued"
	mv "$T/elsewhere/queued" "$T/spool/queued"
	mv "$T/spool/hooks" "$T/elsewhere/hooks"
	ln -s "$T/elsewhere/hooks" "$T/spool/hooks"
	run --separate-stderr cardbaton-spoold --config "$C" --once
	failed 78 cardbaton-spoold
	[ "$stderr" = "cardbaton-spoold: $T/spool/hooks: is a symbolic link (not followed)" ]
	run -0 st
	[ -z "$(ls -A "$T/elsewhere/hooks")" ]
}

@test "a config whose on_finish is not a non-empty list of strings is 78 for the daemon and every tool, one line naming file:line: key" {
	for v in 'x' '[]' "['']" "['', x]" '~' '{a: b}' '[a, [b]]' '[a, {b: c}]' '[a, ~]'; do
		printf 'spool: ./spool\non_finish: %s\nnodes:\n  local:\n    local: true\n' "$v" > "$C"
		case $v in
		x|'~'|'{a: b}') why="on_finish: must be a list" ;;
		'[]') why="on_finish: must not be empty" ;;
		"['']"|"['', x]") why="on_finish[0]: must not be empty" ;;
		*) why="on_finish[1]: must be a string" ;;
		esac
		run --separate-stderr cardbaton-spoold --config "$C" --once
		failed 78 cardbaton-spoold
		says "cardbaton-spoold: $C:2: $why"
		for tool in status submit cancel gpus; do
			args=(); [ "$tool" = submit ] && args=(-- true); [ "$tool" = cancel ] && args=(1)
			run --separate-stderr "cardbaton-$tool" --config "$C" "${args[@]}"
			failed 78 "cardbaton-$tool"
			says "cardbaton-$tool: $C:2: $why"
		done
	done
	# A node's own, the same; scalars in the list are their text.
	printf 'spool: ./spool\nnodes:\n  a:\n    local: true\n    on_finish: [notify, 5, true]\n  b:\n    local: true\n    on_finish: notify\n' > "$C"
	run --separate-stderr cardbaton-spoold --config "$C" --once
	failed 78 cardbaton-spoold
	says "cardbaton-spoold: $C:8: nodes.b.on_finish: must be a list"
	# Twice: a duplicate key.
	printf 'spool: ./spool\non_finish: [a]\non_finish: [b]\nnodes:\n  local:\n    local: true\n' > "$C"
	run --separate-stderr st
	failed 78 cardbaton-status
	says "cardbaton-status: $C:3: on_finish: duplicate key"
}

# lab_refused WHY: the daemon and every tool on $C exit 78 with the one
# line "PROG: WHY".
# lab_refused LINE [all]: the daemon and status refuse $C with LINE;
# with all, every tool does (each reads the config through
# config_load: the cases need not go through all of them).
lab_refused() {
	local tool args tools=(status)
	[ "${2:-}" = all ] && tools=(status submit cancel pause resume hold release promote logs wait \
		gpus drain undrain metrics report top users)
	run --separate-stderr cardbaton-spoold --config "$C" --once
	failed 78 cardbaton-spoold
	says "cardbaton-spoold: $1"
	for tool in "${tools[@]}"; do
		case $tool in
		submit) args=(-- true) ;;
		drain|undrain) args=(local) ;;
		status|gpus|metrics|report|top|users) args=() ;;
		*) args=(1) ;;
		esac
		run --separate-stderr "cardbaton-$tool" --config "$C" "${args[@]}"
		failed 78 "cardbaton-$tool"
		says "cardbaton-$tool: $1"
	done
}

@test "a bad lab: config is 78 for the daemon and every tool, one line naming file:line: key: problem; a group or admin the machine lacks, the file and the name" {
	local g="a group name is 1 to 32 letters, digits, '.', '_' and '-', not beginning with '-'"
	local all=all
	while IFS='|' read -r v why; do
		printf 'spool: ./spool\nlab: %s\nnodes:\n  local:\n    local: true\n' "$v" > "$C"
		lab_refused "$C:2: ${why/GROUP/$g}" $all
		all=
	done <<'CASES'
gpuq|lab: must be a mapping
[gpuq]|lab: must be a mapping
{}|lab: group: missing (the members' Unix group)
{admins: [carol]}|lab: group: missing (the members' Unix group)
{group: ''}|lab.group: must not be empty
{group: -gpuq}|lab.group: GROUP
{group: 'a/b'}|lab.group: GROUP
{group: g, grop: h}|lab.grop: unknown key
{group: g, admins: carol}|lab.admins: must be a list
{group: g, admins: [carol, '../x']}|lab.admins[1]: a user name is letters, digits, '.', '_' and '-'
{group: g, admins: ["a\nb"]}|lab.admins[0]: a user name is letters, digits, '.', '_' and '-'
{group: g, fair_share: {half_life_hours: -1}}|lab.fair_share.half_life_hours: must be between 0 and 1000000
{group: g, fair_share: {half_life_hours: 1000001}}|lab.fair_share.half_life_hours: must be between 0 and 1000000
{group: g, fair_share: {half_life: 5}}|lab.fair_share.half_life: unknown key
{group: g, users: [alice]}|lab.users: must be a mapping
{group: g, users: {default: {shares: 0}}}|lab.users.default.shares: must be between 1 and 1000000
{group: g, users: {alice: {max_gpus: -1}}}|lab.users.alice.max_gpus: must be between 0 and 1000000000
{group: g, users: {alice: {max_queued: 1e3}}}|lab.users.alice.max_queued: must be an integer
{group: g, users: {alice: {max_priority: 100000000}}}|lab.users.alice.max_priority: must be between -99999999 and 99999999
{group: g, users: {alice: {max_gpu: 1}}}|lab.users.alice.max_gpu: unknown key
{group: g, users: {-alice: {}}}|lab.users.-alice: a user name must not begin with '-'
{group: g, users: {'a b': {}}}|lab.users.a b: a user name is letters, digits, '.', '_' and '-'
CASES
	# Block style: the line of the key itself.
	printf 'spool: ./spool\nnodes:\n  local:\n    local: true\nlab:\n  group: gpuq\n  users:\n    default: {max_gpus: 8}\n    alice:\n      max_gpus: 2\n      shares: 0\n' > "$C"
	lab_refused "$C:11: lab.users.alice.shares: must be between 1 and 1000000"
	printf 'spool: ./spool\nnodes:\n  local:\n    local: true\nlab:\n  group: gpuq\n  users:\n    alice: {}\n    alice: {shares: 2}\n' > "$C"
	lab_refused "$C:9: lab.users.alice: duplicate key"
	# Well formed, but the machine has no such group or admin: the
	# daemon names the file and the name (and a tool, once there is a
	# spool); nothing is made.
	printf 'spool: ./spool\nnodes:\n  local:\n    local: true\nlab:\n  group: cb-no-such-group\n' > "$C"
	run --separate-stderr cardbaton-spoold --config "$C" --once
	failed 78 cardbaton-spoold
	says "cardbaton-spoold: $C: lab: group: no group 'cb-no-such-group'"
	[ ! -e "$T/spool" ]
	[ "$(id -u)" -eq 0 ] || return 0        # a spool of group root needs the daemon to be root
	printf 'spool: ./spool\nnodes:\n  local:\n    local: true\nlab:\n  group: root\n  admins: [root]\n' > "$C"
	run -0 cardbaton-spoold --config "$C" --once
	printf 'spool: ./spool\nnodes:\n  local:\n    local: true\nlab:\n  group: root\n  admins: [root, cb-no-such-user]\n' > "$C"
	run --separate-stderr cardbaton-spoold --config "$C" --once
	failed 78 cardbaton-spoold
	says "cardbaton-spoold: $C: lab: admins: no user 'cb-no-such-user'"
	for tool in status submit cancel users; do
		case $tool in submit) args=(-- true) ;; cancel) args=(1) ;; *) args=() ;; esac
		run --separate-stderr "cardbaton-$tool" --config "$C" "${args[@]}"
		failed 78 "cardbaton-$tool"
		says "cardbaton-$tool: $C: lab: admins: no user 'cb-no-such-user'"
	done
}

@test "a config whose gpu_refresh_seconds is not an integer from 0 to 86400 is 78 for the daemon, top and every tool, one line naming file:line: key" {
	for v in -1 86401 99999999999999999999 30s 1.5 '[30]' '{a: 1}' '~' "''" true; do
		printf 'spool: ./spool\nnodes:\n  local:\n    local: true\ngpu_refresh_seconds: %s\n' "$v" > "$C"
		case $v in
		-1|86401|9999*) why="gpu_refresh_seconds: must be between 0 and 86400" ;;
		*) why="gpu_refresh_seconds: must be an integer" ;;
		esac
		run --separate-stderr cardbaton-spoold --config "$C" --once
		failed 78 cardbaton-spoold
		says "cardbaton-spoold: $C:5: $why"
		for tool in status submit top metrics gpus; do
			args=(); [ "$tool" = submit ] && args=(-- true)
			run --separate-stderr "cardbaton-$tool" --config "$C" "${args[@]}"
			failed 78 "cardbaton-$tool"
			says "cardbaton-$tool: $C:5: $why"
		done
	done
	# Twice: a duplicate key.
	printf 'spool: ./spool\ngpu_refresh_seconds: 1\ngpu_refresh_seconds: 2\nnodes:\n  local:\n    local: true\n' > "$C"
	run --separate-stderr cardbaton-spoold --config "$C" --once
	failed 78 cardbaton-spoold
	says "cardbaton-spoold: $C:3: gpu_refresh_seconds: duplicate key"
	# The bounds themselves are taken.
	for v in 0 86400; do
		printf 'spool: ./spool\ngpu_refresh_seconds: %s\nnodes:\n  local:\n    local: true\n' "$v" > "$C"
		run --separate-stderr cardbaton-spoold --config "$C" --once
		[ "$status" -eq 0 ]
	done
}

@test "a lease_dir that is not an absolute path, holds a control character or sits on a Slurm node is 78 for the daemon and the tools, naming file:line: key; the worker refuses a relative or empty --lease-dir" {
	while IFS='|' read -r v why; do
		printf 'spool: ./spool\nnodes:\n  local:\n    local: true\n    lease_dir: %s\n' "$v" > "$C"
		for tool in spoold status submit gpus; do
			args=(); [ "$tool" = submit ] && args=(-- true); [ "$tool" = spoold ] && args=(--once)
			run --separate-stderr "cardbaton-$tool" --config "$C" "${args[@]}"
			failed 78 "cardbaton-$tool"
			says "cardbaton-$tool: $C:5: nodes.local.lease_dir: $why"
		done
	done <<'CASES'
leases|must be an absolute path on the node
~/leases|must be an absolute path on the node
"/x\ty"|must not hold control characters
[/x]|must be a string
''|must not be empty
CASES
	printf 'spool: ./spool\nnodes:\n  c:\n    slurm: {partition: gpu}\n    lease_dir: /x\n' > "$C"
	run --separate-stderr cardbaton-spoold --config "$C" --once
	failed 78 cardbaton-spoold
	says "cardbaton-spoold: $C:3: nodes.c: a Slurm node takes no lease_dir (Slurm leases its cards)"
	run --separate-stderr cardbaton-worker -d "$STATE" --lease-dir leases gpus
	failed 71 cardbaton-worker
	says "cardbaton-worker: lease_dir leases: not an absolute path"
	run --separate-stderr cardbaton-worker -d "$STATE" --lease-dir '' gpus
	failed 64 cardbaton-worker
}

@test "run_as: owner without lab:, without lease_dir, on a local node, or another value, and a bad lab.accounts name are 78 for the daemon and the tools, naming file:line: key" {
	while IFS='|' read -r node lab where why; do
		printf 'spool: ./spool\nnodes:\n  n:\n%s\n%s' "$(printf '%s' "$node" | sed 's/^/    /; s/;/\n    /g')" "$lab" > "$C"
		for tool in spoold status submit gpus; do
			args=(); [ "$tool" = submit ] && args=(-- true); [ "$tool" = spoold ] && args=(--once)
			run --separate-stderr "cardbaton-$tool" --config "$C" "${args[@]}"
			failed 78 "cardbaton-$tool"
			says "cardbaton-$tool: $C:$where: $why"
		done
	done <<CASES
ssh: h;run_as: owner;lease_dir: /l||5|nodes.n.run_as: owner needs lab: (the members' accounts)
ssh: h;run_as: owner|lab: {group: $(id -gn)}|3|nodes.n: run_as: owner needs lease_dir (one lease per card across the owners' accounts)
local: true;run_as: owner;lease_dir: /l|lab: {group: $(id -gn)}|3|nodes.n: run_as: owner on a local: true node (a local node runs its jobs as the daemon's account)
ssh: h;run_as: root;lease_dir: /l|lab: {group: $(id -gn)}|5|nodes.n.run_as: is owner or daemon
ssh: h|lab: {group: $(id -gn), accounts: {alice: "a\\nb"}}|5|lab.accounts.alice: a user name is letters, digits, '.', '_' and '-'
CASES
}

@test "a shared_fs that is not a mapping, a bad filesystem name, a path not absolute, with . or .. or a trailing /, or a control character is 78 for the daemon and the tools, naming file:line: key; a worker spec's checkpoint_on without an absolute checkpoint is refused" {
	while IFS='|' read -r v where why; do
		printf 'spool: ./spool\nnodes:\n  n:\n    ssh: h\n    shared_fs: %s\n' "$v" > "$C"
		for tool in spoold status submit gpus; do
			args=(); [ "$tool" = submit ] && args=(-- true); [ "$tool" = spoold ] && args=(--once)
			run --separate-stderr "cardbaton-$tool" --config "$C" "${args[@]}"
			failed 78 "cardbaton-$tool"
			says "cardbaton-$tool: $C:5: nodes.n.shared_fs$where: $why"
		done
	done <<'CASES'
[/mnt]||must be a mapping
{lab: mnt}|.lab|must be an absolute path
{lab: /mnt/}|.lab|must have no empty, "." or ".." part, nor a trailing '/'
{lab: /a/./b}|.lab|must have no empty, "." or ".." part, nor a trailing '/'
{lab: /a//b}|.lab|must have no empty, "." or ".." part, nor a trailing '/'
{lab: "/a\tb"}|.lab|must not hold control characters
{"-x": /m}|.-x|must not begin with '-'
{"l/b": /m}|.l/b|must be a filesystem name (1 to 64 of A-Z a-z 0-9 . _ -)
CASES
	printf 'attempt 3fa9c2d1-42-2\nshell true\ncheckpoint run7/ck.pt\ncheckpoint_on lab-b\nend\n' > "$T/spec"
	run --separate-stderr cardbaton-worker -d "$STATE" launch < "$T/spec"
	failed 65 cardbaton-worker
	says "cardbaton-worker: bad spec: checkpoint_on needs an absolute checkpoint"
}

@test "checkpoint_transfer: checkpoint_transfer_max_gib out of range or not an integer is 78; the job field not a boolean, or without resume_command, is 65 (submit, a job file, the flag); a nodes/ file whose transfers are not transfers shows none; a record whose checkpoint_copies is not a list of strings is not a record" {
	for v in -1 1048577 2.5 '"64"' '[1]'; do
		printf 'spool: ./spool\ncheckpoint_transfer_max_gib: %s\nnodes:\n  n:\n    local: true\n' "$v" > "$C"
		run --separate-stderr cardbaton-status --config "$C"
		failed 78 cardbaton-status
		[[ $stderr == "cardbaton-status: $C:2: checkpoint_transfer_max_gib: must be "* ]]
	done
	printf 'spool: ./spool\nnodes:\n  n:\n    local: true\n' > "$C"
	run --separate-stderr sub --checkpoint-transfer -- true
	failed 65 cardbaton-submit
	says "cardbaton-submit: command line: checkpoint_transfer: needs resume_command (only a resumable job has a checkpoint)"
	printf 'command: [true]\ncheckpoint_transfer: yes please\nresume_command: x\n' > "$T/j.yaml"
	run --separate-stderr sub --job "$T/j.yaml"
	failed 65 cardbaton-submit
	says "cardbaton-submit: $T/j.yaml:2: checkpoint_transfer: must be true or false"
	printf 'command: [true]\ncheckpoint_transfer: true\n' > "$T/j.yaml"
	run --separate-stderr sub --job "$T/j.yaml"
	failed 65 cardbaton-submit
	# Dropped into new/: rejected with the reason, nothing else touched.
	make_spool
	cp "$T/j.yaml" "$T/spool/new/j.job"
	once
	grep -q "checkpoint_transfer: needs resume_command" "$T"/spool/rejected/*.reason
	# nodes/: transfers of every wrong shape, none shown; the one whole one is.
	cat > "$T/spool/nodes/n.json" <<-'JSON'
	{"name": "n", "reachable": true, "error": null, "since_ms": 0, "gpus": [],
	 "transfers": [1, "x", {"job": -4, "from": "a", "bytes_done": 1}, {"job": 3, "from": 7, "bytes_done": 1},
	  {"job": 3, "from": "a", "bytes_done": -9}, {"job": 5, "from": "a", "bytes_done": 10, "bytes_total": "9"}]}
	JSON
	run --separate-stderr st --json
	[ "$status" -eq 0 ]
	[ "$(echo "$output" | json '[n["transfers"] for n in d["nodes"]]')" = '[["5"]]' ]
	run --separate-stderr st
	[ "$status" -eq 0 ]
	[ "$(echo "$output" | grep transferring)" = "job 5 on n: transferring checkpoint from a: starting" ]
	# A record with checkpoint_copies of the wrong shape: not a record.
	id=$(sub --hold --resume-command x -- true)
	once
	f=$(ls "$T"/spool/queued/*.job | head -1)
	python3 - "$f" <<-'PY'
	import json, sys
	r = json.load(open(sys.argv[1])); r["checkpoint_copies"] = [1]
	json.dump(r, open(sys.argv[1], "w"))
	PY
	run --separate-stderr st --json "$id"
	[[ $stderr == *"not a valid job record"* ]]
}

@test "the lab key's gate: a shell, other programs, metacharacters, control characters, paths outside STATE/bin, a bad install ID are 77 with one line and nothing runs; a link, another's or a writable bin/ is refused; the worker's own command runs" {
	local st=$T/gst w=$T/gst/bin/cardbaton-worker-1.0-t ran=$T/ran
	mkdir -p "$st/bin"
	chmod 700 "$st" "$st/bin"
	cp "$CB_BUILD/cardbaton-worker" "$w"
	gate() { SSH_ORIGINAL_COMMAND=$1 run --separate-stderr cardbaton-worker gate "$st"; }
	for c in "touch '$ran'" "sh -c 'touch $ran'" "exec '$w' version; touch '$ran'" \
		"exec '$w' version && touch '$ran'" "exec '$w' version | touch '$ran'" \
		"exec '$w' \$(touch '$ran')" "exec '$w' \`touch $ran\`" "exec '$w' version"$'\n'"touch '$ran'" \
		"exec '$w' version > '$ran'" "exec '/bin/touch' '$ran'" "exec '$st/bin/../bin/cardbaton-worker-1.0-t' version" \
		"exec '$st/bin/cardbaton-worker-' version" "exec \"\$PATH\" version" "exec 'unterminated" \
		"install ../x" "install" "install .hidden" $'exec \x01\x7f'; do
		gate "$c"
		failed 77 cardbaton-gate
		[[ $stderr == "cardbaton-gate: refused: "*" (this key runs cardbaton-worker's commands only)" ]]
		[ ! -e "$ran" ]
	done
	# No command at all: a shell; an empty one too.
	run --separate-stderr env -u SSH_ORIGINAL_COMMAND cardbaton-worker gate "$st"
	failed 77 cardbaton-gate
	says "cardbaton-gate: refused: no command (a shell) (this key runs cardbaton-worker's commands only)"
	gate "   "
	failed 77 cardbaton-gate
	# The worker's own command, and the gate not run again from inside.
	gate "exec '$w' -d '$st' version"
	[ "$status" -eq 0 ] && [ "${lines[0]}" = "version $(cardbaton-worker version | sed -n 's/^version //p')" ]
	gate "exec '$w' gate '$st'"
	failed 77 cardbaton-gate
	says "cardbaton-gate: refused: the gate inside the gate (this key runs cardbaton-worker's commands only)"
	# A symlink as the worker, a bin/ others may write: refused (71).
	ln -s /bin/true "$st/bin/cardbaton-worker-2.0-l"
	gate "exec '$st/bin/cardbaton-worker-2.0-l' version"
	failed 71 cardbaton-worker
	chmod 777 "$st/bin"
	gate "exec '$w' version"
	failed 71 cardbaton-worker
	says "cardbaton-worker: gate: $st/bin: writable by others"
	chmod 700 "$st/bin"
	# Not installed (no such worker, no bin/ at all): 127, as a shell says.
	gate "exec '$st/bin/cardbaton-worker-4.0-none' version"
	failed 127 cardbaton-gate
	SSH_ORIGINAL_COMMAND="exec '$T/none/bin/cardbaton-worker-1' version" run --separate-stderr \
		cardbaton-worker gate "$T/none"
	failed 127 cardbaton-gate
	says "cardbaton-gate: $T/none/bin/cardbaton-worker-1: not installed"
	# A relative state directory for the gate itself is a usage error.
	SSH_ORIGINAL_COMMAND="exec '$w' version" run --separate-stderr cardbaton-worker gate gst
	failed 64 cardbaton-worker
	# install: what does not run is not installed; what runs is, once.
	SSH_ORIGINAL_COMMAND="install 3.0-x" run --separate-stderr cardbaton-worker gate "$st" < /etc/passwd
	failed 69 cardbaton-worker
	[ ! -e "$st/bin/cardbaton-worker-3.0-x" ]
	SSH_ORIGINAL_COMMAND="install 3.0-x" run --separate-stderr cardbaton-worker gate "$st" < /dev/null
	failed 65 cardbaton-worker
	SSH_ORIGINAL_COMMAND="install 3.0-x" run --separate-stderr cardbaton-worker gate "$st" < "$CB_BUILD/cardbaton-worker"
	[ "$status" -eq 0 ] && [ "$output" = installed ]
	[ -x "$st/bin/cardbaton-worker-3.0-x" ]
	[ -z "$(find "$st/bin" -name '.gate.*')" ]
}

@test "a Slurm node's config, options and spec: bad partitions, sbatch_args, max_jobs and combinations are 78 naming file:line: key; the worker refuses a bad --slurm and nodelist; submit refuses pinned and memory jobs (65)" {
	for v in '{max_jobs: 2}' '{partition: -x}' "{partition: 'a b'}" '{partition: a/b}' '{partition: ""}' \
		'{partition: gpu, max_jobs: 0}' '{partition: gpu, max_jobs: 1.5}' '{partition: gpu, sbatch_args: x}' \
		'{partition: gpu, sbatch_args: [a, [b]]}' '{partition: gpu, qos: x}' '[gpu]' 'gpu'; do
		printf 'spool: ./spool\nnodes:\n  c:\n    slurm: %s\n' "$v" > "$C"
		case $v in
		'{max_jobs: 2}') why="nodes.c.slurm: needs partition" ;;
		*-x*|*"a b"*|*a/b*) why="nodes.c.slurm.partition: must be a partition name (no blanks, '/', ',' or quotes, not beginning with '-')" ;;
		*'""'*) why="nodes.c.slurm.partition: must not be empty" ;;
		*'max_jobs: 0'*) why="nodes.c.slurm.max_jobs: must be between 1 and 1000000" ;;
		*'max_jobs: 1.5'*) why="nodes.c.slurm.max_jobs: must be an integer" ;;
		*'sbatch_args: x'*) why="nodes.c.slurm.sbatch_args: must be a list" ;;
		*'[a, [b]]'*) why="nodes.c.slurm.sbatch_args[1]: must be a string" ;;
		*qos*) why="nodes.c.slurm.qos: unknown key" ;;
		*) why="nodes.c.slurm: must be a mapping" ;;
		esac
		run --separate-stderr cardbaton-spoold --config "$C" --once
		failed 78 cardbaton-spoold
		says "cardbaton-spoold: $C:4: $why"
		run --separate-stderr cardbaton-status --config "$C"
		failed 78 cardbaton-status
		says "cardbaton-status: $C:4: $why"
	done
	printf 'spool: ./spool\nnodes:\n  c:\n    slurm: {partition: gpu}\n    gpus: [0]\n' > "$C"
	run --separate-stderr cardbaton-spoold --config "$C" --once
	failed 78 cardbaton-spoold
	says "cardbaton-spoold: $C:3: nodes.c: a Slurm node takes no gpus: list (Slurm picks the cards)"
	# The worker: an empty partition is a usage error; a spec's nodelist
	# must be a host name.
	run --separate-stderr cardbaton-worker -d "$STATE" --slurm '' gpus
	failed 64 cardbaton-worker
	for h in -x .x 'a b' 'a/b' ''; do
		printf 'attempt d2-1\narg true\nnodelist %s\nend\n' "$(printf %s "$h" | sed 's/ /%20/g')" > "$T/spec.in"
		run --separate-stderr cardbaton-worker -d "$STATE" --slurm gpu launch < "$T/spec.in"
		failed 65 cardbaton-worker
		says "cardbaton-worker: bad spec: nodelist must be a host name ([A-Za-z0-9._-], not starting with '-' or '.')"
	done
	[ ! -e "$STATE/attempts/d2-1" ]
	# Jobs a Slurm node can never take, at submit.
	printf 'spool: ./spool\nnodes:\n  c:\n    slurm: {partition: gpu}\n' > "$C"
	run --separate-stderr sub --gpus 0 -- true
	failed 65 cardbaton-submit
	says "cardbaton-submit: no node in $C may use the pinned GPUs"
	run --separate-stderr sub --gpu-memory 1G -- true
	failed 65 cardbaton-submit
	says "cardbaton-submit: no node in $C may take gpu_memory_mib"
	[ -z "$(ls "$T/spool/new")" ]
}

@test "the views: a metrics.prom or nodes/ file that is a symlink, a directory or garbage is never followed; the daemon serves on" {
	make_spool
	echo secret > "$T/target"
	rm "$T/spool/metrics.prom"      # --once wrote it
	ln -s "$T/target" "$T/spool/metrics.prom"
	run --separate-stderr cardbaton-metrics --config "$C"
	failed 65 cardbaton-metrics
	[ "$stderr" = "cardbaton-metrics: $T/spool/metrics.prom: is a symbolic link (not followed)" ]
	# The daemon reads nothing through it and replaces the link itself.
	run -0 cardbaton-spoold --config "$C" --once
	[ "$(cat "$T/target")" = secret ]
	[ -f "$T/spool/metrics.prom" ] && [ ! -L "$T/spool/metrics.prom" ]
	cardbaton-metrics --config "$C" | grep -q '^cardbaton_pauses_total 0$'
	# A directory in its place: said once, the daemon runs the job.
	rm "$T/spool/metrics.prom"
	mkdir "$T/spool/metrics.prom"
	id=$(sub --gpu-count 1 -- true)
	start_daemon
	wait_for 10 'final "$id"'
	[ "$(grep -c 'metrics.prom: Is a directory; the counters start from 0' "$T/daemon.log")" -eq 1 ]
	[ "$(grep -c 'metrics.prom: Is a directory (the metrics are written' "$T/daemon.log")" -eq 1 ]
	run --separate-stderr cardbaton-metrics --config "$C"
	failed 66 cardbaton-metrics
	stop_daemon
	# nodes/: garbage and a symlink are skipped by status, never followed.
	printf '{"name": "local", "reachable": false, "gpus": [{"index": -5}, 7, {"index": 1e300}]' > "$T/spool/nodes/local.json"
	ln -s "$T/target" "$T/spool/nodes/ghost.json"
	run -0 st
	[[ $output != *secret* ]]
	run -0 st --json
	[ "$(echo "$output" | json 'len(d["nodes"])')" = 0 ]
	printf '{"name": "local", "reachable": true, "gpus": [{"index": -5}, 7, {"index": 1e300}, {"index": 2, "shares": [1, "x", -4, 3]}]}' > "$T/spool/nodes/local.json"
	run -0 st --json
	[ "$(echo "$output" | json 'len(d["nodes"])')" = 1 ]
	# A node's error (ssh's own words end in CR) reaches the table as '?'.
	printf '{"name": "local", "reachable": false, "error": "refused\r\u001b[2J\u0007", "since_ms": 1}' > "$T/spool/nodes/local.json"
	run -0 st
	[[ $output == *"node local unreachable since 1970-01-01T00:00:00Z: refused??[2J?"* ]]
	[[ $output != *$'\r'* && $output != *$'\e'* ]]
}

@test "status filters and --since: every bad value is one line, 64, before any output" {
	for a in "--state runing" "--state ," "--since tomorrow" "--since 99999999999d" "--since 2026-02-30" "--name" "--since"; do
		run --separate-stderr st $a
		failed 64 cardbaton-status
		[ -z "$output" ]
	done
}

# ---- checkpoint transfer (issue 35): the worker's copy commands -------------
# (worker/ckpt.c; tests/e2e/ckstream.bats has every stream refusal.)  The
# IDs and names a daemon or a hostile sender could hand the worker never
# name a path outside STATE/checkpoints/JOB/, and a link planted there is
# never followed.

@test "checkpoint transfer: traversal in IDs and stream names, linked checkpoints/: refused, never followed" {
	local ck=$STATE/checkpoints
	for a in "../1 a" "1 ../../x" "1/2 a" "-- -1 a" "1 a/b" "1 .part"; do
		run --separate-stderr cardbaton-worker receive-checkpoint $a < /dev/null
		failed 64 cardbaton-worker
	done
	run --separate-stderr cardbaton-worker drop-checkpoints ../..
	failed 64 cardbaton-worker
	run --separate-stderr cardbaton-worker send-checkpoint ../etc
	failed 64 cardbaton-worker
	[ ! -e "$ck" ]
	# Names that climb out, or start at /: refused, nothing made.
	for s in 'd 755 2\nckd 755 8\nck/../..' 'd 755 2\nckd 755 7\n/tmp/ck' 'd 755 2\n..'; do
		run --separate-stderr cardbaton-worker receive-checkpoint 1 a < <(printf "cardbaton-checkpoint 1 0 2\n$s")
		failed 65 cardbaton-worker
		[ -z "$(ls -A "$ck/1")" ]
	done
	# checkpoints/ or checkpoints/JOB a link elsewhere: not written
	# through, not removed through.
	mkdir -p "$T/src/ck" "$T/elsewhere"
	printf 'x' > "$T/src/ck/f"
	cardbaton-worker send-checkpoint "$T/src/ck" > "$T/stream"
	ln -s "$T/elsewhere" "$ck/2"
	run --separate-stderr cardbaton-worker receive-checkpoint 2 a < "$T/stream"
	failed 74 cardbaton-worker
	[ -z "$(ls -A "$T/elsewhere")" ]
	mkdir "$T/elsewhere/kept"
	run --separate-stderr cardbaton-worker drop-checkpoints 2
	[ "$status" -eq 0 ]
	[ ! -L "$ck/2" ] && [ -d "$T/elsewhere/kept" ]
	rm -r "$ck"
	ln -s "$T/elsewhere" "$ck"
	run --separate-stderr cardbaton-worker receive-checkpoint 3 a < "$T/stream"
	failed 74 cardbaton-worker
	run --separate-stderr cardbaton-worker drop-checkpoints 3
	failed 74 cardbaton-worker
	[ "$(ls -A "$T/elsewhere")" = kept ]
}
