#!/usr/bin/env bats
# hooks.bats - on_finish (issue 13 part 7): a command run for every job
# that ends, with its `status --json` element on standard input and
# CARDBATON_JOB_ID/STATE/NAME in its environment; a node's own
# on_finish for the jobs that ran there; in the background, HOOK_MAX (4)
# at once; a failure is one log line; at least once across a kill -9,
# through the pending files in SPOOL/hooks/ (LAYOUT.md §12).

load ../lib/common

bats_require_minimum_version 1.5.0
test_timeout 120

setup() {
	setup_common
	C=$T/config.yaml
	mkdir -p "$T/h"
	# hook.sh TAG: what it was given goes to h/ID.json, one line "TAG ID
	# STATE NAME" to h/ran; with $T/hold present it first says so (h/started)
	# and waits for $T/go.
	cat > "$T/hook.sh" <<-EOF
	#!/bin/sh
	cat > "$T/h/\$CARDBATON_JOB_ID.json"
	if [ -e "$T/hold" ]; then
		echo "\$CARDBATON_JOB_ID" >> "$T/h/started"
		until [ -e "$T/go" ]; do sleep 0.05; done
	fi
	echo "\$1 \$CARDBATON_JOB_ID \$CARDBATON_JOB_STATE \$CARDBATON_JOB_NAME" >> "$T/h/ran"
	EOF
	chmod +x "$T/hook.sh"
	config "on_finish: [$T/hook.sh, top]"
}

teardown() {
	teardown_common
}

# config LINE...: the config, one local node, with LINEs at the top level.
config() {
	{ echo 'spool: ./spool'; printf '%s\n' "$@"; printf 'nodes:\n  local:\n    local: true\n'; } > "$C"
}

sub() { cardbaton-submit --config "$C" "$@"; }
st() { cardbaton-status --config "$C" "$@"; }
state() { st --json "$1" | json 'd["jobs"][0]["state"]'; }
final() {
	case "$(state "$1")" in succeeded|failed|cancelled|lost) return 0 ;; esac
	return 1
}
# ran ID: the lines of h/ran about job ID.
ran() { awk -v id="$1" '$2 == id' "$T/h/ran" 2>/dev/null; }
ran_count() { ran "$1" | wc -l; }
no_pending() { [ -z "$(ls -A "$T/spool/hooks")" ]; }

@test "each job that ends, in every final state, is seen by the hook exactly once: its status --json element, its ID, state and name" {
	# Card 3 busy for good: a job pinned to it waits until cancelled.
	fake_apps "GPU-33333333-3333-3333-3333-333333333333, 4242, 500"
	start_daemon
	ok=$(sub --name 'the good one' -- true)
	bad=$(sub --gpu-count 0 -- sh -c 'exit 3')
	q=$(sub --gpus 3 -- true)
	wait_for 10 '[ "$(state "$q")" = queued ]'
	cardbaton-cancel --config "$C" "$q"
	wait_for 10 final "$ok"
	wait_for 10 final "$bad"
	wait_for 10 final "$q"
	# One running job at a time from here: lost (its worker and job
	# killed), then cancelled while running.
	lost=$(sub --gpu-count 0 -- sleep 300)
	wait_for 10 '[ "$(state "$lost")" = running ]'
	# The job itself runs (its sleep exec'd), not only its supervisor.
	wait_for 10 'f=$(grep -l "^state running" "$STATE"/attempts/*.state) &&
		p=$(awk "\$1 == \"pid\" { print \$2 }" "$f") && [ "$(cat "/proc/$p/comm")" = sleep ]'
	kill_attempt_procs
	wait_for 20 final "$lost"
	can=$(sub --gpu-count 0 -- sleep 300)
	wait_for 10 '[ "$(state "$can")" = running ]'
	cardbaton-cancel --config "$C" "$can"
	wait_for 20 final "$can"
	for id in $ok $bad $q $lost $can; do
		wait_for 10 '[ "$(ran_count "$id")" -ge 1 ]'
	done
	wait_for 10 no_pending
	[ "$(state "$ok") $(state "$bad") $(state "$q") $(state "$lost") $(state "$can")" = \
		"succeeded failed cancelled lost cancelled" ]
	[ "$(ran "$ok")" = "top $ok succeeded the good one" ]
	[ "$(ran "$bad")" = "top $bad failed " ]
	[ "$(ran "$q")" = "top $q cancelled " ]
	[ "$(ran "$lost")" = "top $lost lost " ]
	[ "$(ran "$can")" = "top $can cancelled " ]
	[ "$(wc -l < "$T/h/ran")" -eq 5 ]
	# Its standard input: one line, the element status --json shows.
	for id in $ok $bad $q $lost $can; do
		[ "$(wc -l < "$T/h/$id.json")" -eq 1 ]
		st --json "$id" | python3 -c '
import json, os, pwd, sys
shown = json.load(sys.stdin)["jobs"][0]
given = json.load(open(sys.argv[1]))
assert given == shown, (given, shown)
assert given["id"] == sys.argv[2] and given["state"] in ("succeeded", "failed", "cancelled", "lost")
assert given["owner"] == pwd.getpwuid(os.getuid()).pw_name, given   # who submitted it
' "$T/h/$id.json" "$id"
	done
	# Nothing but the finished jobs' hooks is said in the log.
	not grep -q on_finish "$T/daemon.log"
}

@test "a node's on_finish replaces the top level's for the jobs that ran there; a job that never ran gets the top level's" {
	fake_apps "GPU-33333333-3333-3333-3333-333333333333, 4242, 500"
	{
		echo 'spool: ./spool'
		echo "on_finish: [$T/hook.sh, top]"
		printf 'nodes:\n  a:\n    local: true\n    on_finish: [%s, node-a]\n  b:\n    local: true\n' "$T/hook.sh"
	} > "$C"
	start_daemon
	on_a=$(sub --node a --gpu-count 0 -- true)
	on_b=$(sub --node b --gpu-count 0 -- true)
	never=$(sub --node a --gpus 3 -- true)
	wait_for 10 '[ "$(state "$never")" = queued ]'
	cardbaton-cancel --config "$C" "$never"
	for id in $on_a $on_b $never; do
		wait_for 10 final "$id"
		wait_for 10 '[ "$(ran_count "$id")" -eq 1 ]'
	done
	[ "$(ran "$on_a")" = "node-a $on_a succeeded " ]
	[ "$(ran "$on_b")" = "top $on_b succeeded " ]
	[ "$(ran "$never")" = "top $never cancelled " ]
	# Without a top-level one, a job that ran elsewhere runs none.
	stop_daemon
	printf 'spool: ./spool\nnodes:\n  a:\n    local: true\n    on_finish: [%s, node-a]\n  b:\n    local: true\n' \
		"$T/hook.sh" > "$C"
	start_daemon
	on_b=$(sub --node b --gpu-count 0 -- true)
	on_a=$(sub --node a --gpu-count 0 -- true)
	wait_for 10 final "$on_b"
	wait_for 10 '[ "$(ran_count "$on_a")" -eq 1 ]'
	[ "$(ran_count "$on_b")" -eq 0 ]
	no_pending
}

@test "hooks that hang block nothing: jobs are launched and finish; 4 hooks run at once, the others wait their turn" {
	touch "$T/hold"
	start_daemon
	ids=()
	for i in 1 2 3 4 5 6; do ids+=("$(sub --gpu-count 0 -- true)"); done
	for id in "${ids[@]}"; do wait_for 10 final "$id"; done
	wait_for 10 '[ "$(wc -l < "$T/h/started")" -eq 4 ]'
	# While four hang, jobs still run and end (a loop turn at least), and
	# no fifth hook starts.
	more=$(sub -- true)
	wait_for 10 '[ "$(state "$more")" = succeeded ]'
	[ "$(wc -l < "$T/h/started")" -eq 4 ]
	[ ! -e "$T/h/ran" ]
	[ "$(ls "$T/spool/hooks" | wc -l)" -eq 7 ]
	touch "$T/go"
	for id in "${ids[@]}" "$more"; do wait_for 20 '[ "$(ran_count "$id")" -eq 1 ]'; done
	wait_for 10 no_pending
	[ "$(sort -u "$T/h/started" | wc -l)" -eq 7 ]
}

@test "a failing hook is one log line: its exit status and the first line it said; one that cannot start, one line too" {
	config "on_finish: [sh, -c, 'echo \"oops: \$CARDBATON_JOB_ID\"; echo more >&2; exit 3']"
	start_daemon
	id=$(sub -- true)
	wait_for 10 final "$id"
	wait_for 10 'grep -q "job $id: on_finish" "$T/daemon.log"'
	wait_for 10 no_pending
	[ "$(grep -c on_finish "$T/daemon.log")" -eq 1 ]
	grep -qx "cardbaton-spoold: job $id: on_finish sh exited with status 3: oops: $id" "$T/daemon.log"
	stop_daemon
	config "on_finish: [$T/no/such/hook, x]"
	start_daemon
	id=$(sub -- true)
	wait_for 10 'grep -q "job $id: on_finish" "$T/daemon.log"'
	wait_for 10 no_pending
	[ "$(grep -c "job $id: on_finish" "$T/daemon.log")" -eq 1 ]
	grep -qx "cardbaton-spoold: job $id: on_finish $T/no/such/hook could not start: No such file or directory" "$T/daemon.log"
	# Killed by a signal: said so.
	stop_daemon
	config "on_finish: [sh, -c, 'kill -TERM \$\$']"
	start_daemon
	id=$(sub -- true)
	wait_for 10 'grep -q "job $id: on_finish" "$T/daemon.log"'
	grep -qx "cardbaton-spoold: job $id: on_finish sh killed by signal 15" "$T/daemon.log"
	wait_for 10 no_pending
}

@test "at least once: a daemon killed -9 while the hook runs runs it again after its restart; the pending file is gone once it completes" {
	touch "$T/hold"
	start_daemon
	id=$(sub -- true)
	wait_for 10 final "$id"
	wait_for 10 '[ "$(wc -l < "$T/h/started")" -eq 1 ]'
	# Pending: staged with the final record, the job's element inside.
	[ "$(ls "$T/spool/hooks")" = "$(printf %010d "$id").hook" ]
	[ "$(json 'd["state"]' < "$T/spool/hooks/$(printf %010d "$id").hook")" = succeeded ]
	kill -9 "$DAEMON_PID"; wait "$DAEMON_PID" 2>/dev/null || true; DAEMON_PID=
	start_daemon
	wait_for 10 '[ "$(wc -l < "$T/h/started")" -eq 2 ]'
	[ -e "$T/spool/hooks/$(printf %010d "$id").hook" ]
	touch "$T/go"
	# The restarted daemon's run completes (the first, orphaned, too).
	wait_for 10 '[ "$(ran_count "$id")" -ge 1 ]'
	wait_for 10 no_pending
	[ "$(ran "$id" | sort -u)" = "top $id succeeded " ]
}

@test "at start-up: a pending hook of a job not yet ended waits for its end; of no job, removed; strays are said once and left" {
	make_spool() { cardbaton-spoold --config "$C" --once >> "$T/daemon.log" 2>&1; }
	make_spool
	id=$(sub --gpu-count 0 -- true)
	H=$T/spool/hooks
	printf '{}\n' > "$H/$(printf %010d "$id").hook"     # a crash between the renames
	printf '{}\n' > "$H/0000000099.hook"                 # no such job
	ln -s /etc/passwd "$H/0000000098.hook"
	mkdir "$H/dir"
	echo x > "$H/notes.txt"
	start_daemon
	wait_for 10 final "$id"
	wait_for 10 '[ "$(ran_count "$id")" -eq 1 ]'
	[ "$(ran "$id")" = "top $id succeeded " ]
	[ "$(json 'd["id"]' < "$T/h/$id.json")" = "$id" ]
	[ ! -e "$H/0000000099.hook" ]
	grep -qx "cardbaton-spoold: job 99: no such job; its pending hook is removed" "$T/daemon.log"
	grep -qx "cardbaton-spoold: job $id: queued, not ended: its pending hook waits for its end" "$T/daemon.log"
	grep -qx "cardbaton-spoold: $H/0000000098.hook: is a symbolic link (not followed); ignored" "$T/daemon.log"
	grep -qx "cardbaton-spoold: $H/dir: is a directory; ignored" "$T/daemon.log"
	grep -qx "cardbaton-spoold: $H/notes.txt: not a pending hook (SSSSSSSSSS.hook); ignored" "$T/daemon.log"
	[ "$(ls -A "$H" | sort | tr '\n' ' ')" = "0000000098.hook dir notes.txt " ]
	[ -L "$H/0000000098.hook" ]
}

@test "run --once runs the hooks of the jobs it saw end, and waits for them" {
	id=$(sub -- sh -c 'echo ran > "$0"' "$T/job-ran")
	cardbaton-spoold --config "$C" --once >> "$T/daemon.log" 2>&1
	wait_for 10 test -s "$T/job-ran"
	# Its attempt has ended on the node (the job ran, then exited).
	wait_for 10 'grep -q "^state succeeded" "$STATE"/attempts/*.state'
	cardbaton-spoold --config "$C" --once >> "$T/daemon.log" 2>&1
	[ "$(state "$id")" = succeeded ]
	[ "$(ran "$id")" = "top $id succeeded " ]
	no_pending
}

@test "examples/hook-webhook.sh as the hook: each job's element reaches curl, as status --json shows it" {
	mkdir -p "$T/fake"
	printf '#!/bin/sh\ncat > "%s/posted.$CARDBATON_JOB_ID"\n' "$T" > "$T/fake/curl"
	chmod +x "$T/fake/curl"
	config "on_finish: [sh, $CB_TOP/examples/hook-webhook.sh, https://hooks.example.org/cb]"
	PATH=$T/fake:$PATH start_daemon
	id=$(sub --name 'web hook' -- sh -c 'exit 4')
	wait_for 10 final "$id"
	wait_for 10 no_pending
	st --json "$id" | python3 -c '
import json, sys
assert json.load(open(sys.argv[1])) == json.load(sys.stdin)["jobs"][0]' "$T/posted.$id"
	not grep -q on_finish "$T/daemon.log"
}
