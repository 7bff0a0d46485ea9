#!/usr/bin/env bats
# SSH nodes: real sshd test hosts in network namespaces (tests/lib/sshhosts.bash),
# the worker shipped over ssh, the daemon and the tools in the client namespace.

load ../lib/common
load ../lib/sshhosts
load ../lib/hosttools

setup_file() {
	if hosts_available; then hosts_up 3; fi
}

teardown_file() {
	hosts_down
}

setup() {
	[ -n "${HOSTS_UID:-}" ] || skip "needs root, ip netns and sshd"
	setup_common
	C=$T/config.yaml
	for i in 1 2 3; do host_default_gpus "$i"; done
	# Each test starts with no worker and no state on the hosts.
	for i in 1 2 3; do rm -rf "$(host_home "$i")/.local"; done
	cat > "$C" <<-YAML
		spool: ./spool
		ssh_command: [ssh, -F, $SSH_CONFIG]
		nodes:
		  host1:
		    ssh: host1
		  host2:
		    ssh: host2
		  host3:
		    ssh: host3
		    gpus: [0, 1, 2, 3, 4, 5]
	YAML
}

teardown() {
	teardown_common
	# A host process a test stopped (kill -STOP): continued and killed,
	# not left for the rest of the file.
	for p in ${FROZEN:-}; do
		kill -CONT "$p" 2>/dev/null || true
		kill -KILL "$p" 2>/dev/null || true
	done
	FROZEN=
	for i in 1 2 3; do host_heal "$i" 2>/dev/null || true; done
	# Processes of this test on the hosts: everything that holds a file of
	# a host's state directory.
	host_kill_procs 1 2 3
}

c() { in_client "$@"; }
final() {
	case "$(state "$1")" in succeeded|failed|cancelled|lost) return 0 ;; esac
	return 1
}
# host_watch_pids N: the PIDs of host N's `cardbaton-worker watch`
# (the worker shipped into its state directory, run as `watch`; not one
# left from an earlier test, whose binary is gone).
host_watch_pids() {
	local bin p
	bin=$(host_home "$1")/.local/state/sshgpu-queue/bin/
	for p in /proc/[0-9]*; do
		case $(readlink "$p/exe" 2>/dev/null) in *" (deleted)") continue ;; "$bin"*) ;; *) continue ;; esac
		tr '\0' '\n' < "$p/cmdline" 2>/dev/null | grep -qx watch && echo "${p#/proc/}"
	done
	return 0
}
# in_poll PID...: every PID sleeps in poll(2) (a watch: past its `ready`).
in_poll() {
	[ $# -gt 0 ] || return 1
	local p
	for p; do grep -q poll "/proc/$p/wchan" 2>/dev/null || return 1; done
}
# last_attempt_state ID: the state of running job ID's last attempt, from its record.
last_attempt_state() {
	in_client cat "$T/spool/running/$(printf %010d "$1").job" | json 'd["attempts"][-1]["state"]'
}
# frozen_launch SCRIPT: host1's event stream, once it waits for requests
# (its `ready` sent), is frozen (FROZEN: its PIDs; teardown continues
# them), then a job pinned there running `sh -c SCRIPT $T/runs` ($id)
# is placed: its launch request gets no answer.
frozen_launch() {
	wait_for 30 'in_poll $(host_watch_pids 1)'
	FROZEN=$(host_watch_pids 1)
	kill -STOP $FROZEN
	id=$(sub --node host1 -- sh -c "$1" "$T/runs")
	wait_for 30 'grep -q "job $id: attempt .* on host1" "$T/daemon.log"'
}


@test "jobs spread over the hosts, never on busy or excluded cards; a pinned job gets that card" {
	ssh_daemon
	ids=()
	for i in $(seq 1 12); do
		ids+=("$(sub -- sh -c 'echo "$CARDBATON_HOST $CUDA_VISIBLE_DEVICES" > "$0"; sleep 3' "$T/out.$i")")
	done
	pinned=$(sub --node host3 --gpus 5 -- sh -c 'echo "$CUDA_VISIBLE_DEVICES" > "$0"' "$T/pinned")
	for id in "${ids[@]}" "$pinned"; do wait_for 40 final "$id"; done
	for id in "${ids[@]}" "$pinned"; do [ "$(state "$id")" = succeeded ]; done
	[ "$(cat "$T/pinned")" = "$(host_gpu_uuid 3 5)" ]
	cat "$T"/out.* > "$T/all"
	# Used all three hosts; never host2's busy card 1, host3's card 0
	# (compute process) or its excluded cards 6 and 7.
	grep -q '^host1 ' "$T/all"
	grep -q '^host2 ' "$T/all"
	grep -q '^host3 ' "$T/all"
	not grep -q "$(host_gpu_uuid 2 1)" "$T/all"
	not grep -q "$(host_gpu_uuid 3 0)" "$T/all"
	not grep -q "$(host_gpu_uuid 3 6)" "$T/all"
	not grep -q "$(host_gpu_uuid 3 7)" "$T/all"
	# The worker was shipped once per host, into its state directory.
	for i in 1 2 3; do
		[ "$(ls "$(host_home "$i")/.local/state/sshgpu-queue/bin" | wc -l)" -eq 1 ]
	done
}

@test "launches go through each host's event stream: no ssh session per launch" {
	# ssh, each remote command line logged.
	cat > "$T/ssh" <<-EOF
	#!/bin/sh
	for a; do last=\$a; done
	echo "\$last" >> "$T/remote"
	exec ssh "\$@"
	EOF
	chmod +x "$T/ssh"
	sed -i "s|^ssh_command: \[ssh,|ssh_command: [$T/ssh,|" "$C"
	ssh_daemon
	ids=()
	for i in 1 2 3 4 5 6; do ids+=("$(sub --gpu-count 1 -- true)"); done
	for id in "${ids[@]}"; do wait_for 30 final "$id"; done
	for id in "${ids[@]}"; do [ "$(state "$id")" = succeeded ]; done
	grep -q " 'watch'$" "$T/remote"
	not grep -q " 'launch'$" "$T/remote"
}

@test "a list command reaches the node's argv byte for byte; a string runs under sh -c" {
	ssh_daemon
	printf '%s\n' '{"command": ["python3", "-c", "import sys,json; open(sys.argv[1],\"w\").write(json.dumps(sys.argv[2:]))", "ARGV_OUT", "a b", "it'"'"'s", "\"q\"", "$HOME", "back\\slash", "new\nline", "*", "", "é✓"], "node": "host2"}' \
		| sed "s#ARGV_OUT#$T/argv#" > "$T/job.json"
	id=$(sub --job "$T/job.json")
	s=$(sub --node host1 --job /dev/stdin <<< 'command: "echo $((6 * 7)) > '"$T"'/shell"')
	wait_for 20 final "$id"
	wait_for 20 final "$s"
	[ "$(state "$id")" = succeeded ]
	python3 - "$T/argv" <<-'PY'
		import json, sys
		got = json.load(open(sys.argv[1]))
		want = ["a b", "it's", '"q"', "$HOME", "back\\slash", "new\nline", "*", "", "é✓"]
		assert got == want, (got, want)
	PY
	[ "$(cat "$T/shell")" = 42 ]
}

@test "connections cut again and again during launches: every job runs exactly once" {
	ssh_daemon
	ids=()
	for i in $(seq 1 20); do
		ids+=("$(sub --node host1 --gpu-count 0 -- sh -c 'echo "$1" >> "$0"; sleep 0.3' "$T/runs" "$i")")
	done
	for k in $(seq 1 15); do host_cut 1; sleep 0.15; done
	for id in "${ids[@]}"; do wait_for 60 final "$id"; done
	for id in "${ids[@]}"; do [ "$(state "$id")" = succeeded ]; done
	[ "$(wc -l < "$T/runs")" -eq 20 ]
	[ "$(sort -n "$T/runs" | uniq | wc -l)" -eq 20 ]
}

@test "kill -9 of the daemon during launches and runs: every job exactly once, all recorded" {
	ids=()
	for i in $(seq 1 18); do
		ids+=("$(sub -- sh -c 'echo "$1" >> "$0"; sleep 0.4' "$T/runs" "$i")")
	done
	for round in 1 2 3 4 5; do
		ssh_daemon
		sleep 0.$((RANDOM % 7 + 3))
		kill -9 "$DAEMON_PID"; wait "$DAEMON_PID" 2>/dev/null || true; DAEMON_PID=
	done
	ssh_daemon
	for id in "${ids[@]}"; do wait_for 60 final "$id"; done
	for id in "${ids[@]}"; do [ "$(state "$id")" = succeeded ]; done
	[ "$(wc -l < "$T/runs")" -eq 18 ]
	[ "$(sort -n "$T/runs" | uniq | wc -l)" -eq 18 ]
}

@test "a partitioned host: gpus answers within its deadline; after healing the job's end is recorded once" {
	ssh_daemon
	id=$(sub --node host2 -- sh -c 'echo run >> "$0"; sleep 4' "$T/runs")
	wait_for 20 '[ "$(state "$id")" = running ]'
	host_partition 2
	t0=$(date +%s)
	run in_client cardbaton-gpus --config "$C" --json
	t1=$(date +%s)
	[ "$status" -eq 0 ]
	[ $((t1 - t0)) -le 20 ]
	[ "$(echo "$output" | json '[n["reachable"] for n in d["nodes"]]')" = "[true, false, true]" ]
	[ "$(echo "$output" | json 'd["nodes"][1]["error"] is not None')" = True ]
	# The daemon notices (its reconcile has a 15 s deadline) and says so.
	wait_for 40 '[ "$(st --json | json "[n[\"reachable\"] for n in d[\"nodes\"] if n[\"name\"] == \"host2\"]")" = "[false]" ]'
	st | grep -q '^node host2 unreachable since '
	# While the node cannot be asked, its job is not declared lost; a
	# job pinned to it waits, others go elsewhere.
	[ "$(state "$id")" = running ]
	pinned=$(sub --node host2 -- true)
	other=$(sub -- true)
	wait_for 30 final "$other"
	[ "$(state "$other")" = succeeded ]
	[ "$(state "$pinned")" = queued ]
	host_heal 2
	wait_for 60 final "$pinned"
	[ "$(state "$pinned")" = succeeded ]
	wait_for 60 final "$id"
	[ "$(state "$id")" = succeeded ]
	[ "$(wc -l < "$T/runs")" -eq 1 ]
}

@test "worker and job killed on a host: lost within the reconcile interval" {
	ssh_daemon
	id=$(sub --node host1 -- sh -c 'echo $$ > "$0"; exec sleep 300' "$T/pid")
	wait_for 20 '[ -s "$T/pid" ]'
	wait_for 20 '[ "$(state "$id")" = running ]'
	aid=$(in_client cat "$T/spool/running/$(printf %010d "$id").job" | json 'd["attempts"][-1]["id"]')
	state_dir=$(host_home 1)/.local/state/sshgpu-queue
	for p in $(find /proc/[0-9]*/fd -maxdepth 1 -lname "$state_dir/attempts/$aid/*" 2>/dev/null | cut -d/ -f3 | sort -u); do
		kill -KILL "$p"
	done
	# Reconcile every 5 s, plus the status call: lost within 10 s.
	within 12 '[ "$(state "$id")" = lost ]'
	[[ "$(field "$id" reason)" == *"worker vanished"* ]]
}

@test "the worker is shipped on first contact, atomically, and reused afterwards" {
	bin=$(host_home 1)/.local/state/sshgpu-queue/bin
	mkdir -p "$bin"
	# An older version already there stays; the new one is added.
	printf '#!/bin/sh\nexit 99\n' > "$bin/cardbaton-worker-0.0.1-0000000000000000"
	chmod 755 "$bin/cardbaton-worker-0.0.1-0000000000000000"
	run in_client cardbaton-gpus --config "$C" --node host1 --json
	[ "$status" -eq 0 ]
	[ "$(ls "$bin" | wc -l)" -eq 2 ]
	new=$(ls "$bin" | grep -v 0.0.1)
	[ -x "$bin/$new" ]
	[ -z "$(ls -A "$bin" | grep '^\.')" ]
	before=$(stat -c %Y.%i "$bin/$new")
	in_client cardbaton-gpus --config "$C" --node host1 >/dev/null
	ssh_daemon
	id=$(sub --node host1 -- true)
	wait_for 20 final "$id"
	[ "$(stat -c %Y.%i "$bin/$new")" = "$before" ]
	[ "$(ls "$bin" | wc -l)" -eq 2 ]
}

@test "a node of another architecture gets the worker compiled from source" {
	command -v cc >/dev/null || skip "no C compiler on the test host"
	# host3 says it is a riscv64 machine.
	printf '#!/bin/sh\n[ "$1" = -m ] && echo riscv64 || exec /bin/uname "$@"\n' > "$(host_bin_dir 3)/uname"
	chmod 755 "$(host_bin_dir 3)/uname"
	run in_client cardbaton-gpus --config "$C" --node host3 --json
	rm -f "$(host_bin_dir 3)/uname"
	[ "$status" -eq 0 ]
	bin=$(host_home 3)/.local/state/sshgpu-queue/bin
	[ "$(ls "$bin" | wc -l)" -eq 1 ]
	# Built there: not the static build that was shipped to the others.
	not cmp -s "$bin"/cardbaton-worker-* "$CB_BUILD/cardbaton-worker-static"
	[ "$(echo "$output" | json 'len(d["nodes"][0]["gpus"])')" -eq 8 ]
}

@test "bootstrap keeps every entry, adds a missing newline, and skips a key already there" {
	ak=$(host_home 1)/.ssh/authorized_keys
	mkdir -p "$(dirname "$ak")"
	ssh-keygen -q -t ed25519 -N '' -C new@controller -f "$T/newkey"
	ssh-keygen -q -t ed25519 -N '' -C other -f "$T/other"
	{
		echo "# managed by hand"
		echo "from=\"10.0.0.0/8\",no-pty $(cut -d' ' -f1,2 "$T/other.pub") someone"
		printf '%s' "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQC0 last-line-without-newline"
	} > "$ak"
	cp "$ak" "$T/before"
	run in_client cardbaton-bootstrap --config "$C" --node host1 --public-key "$T/newkey.pub"
	[ "$status" -eq 0 ]
	# Every old line kept byte for byte, the last one now ended, the key added.
	[ "$(head -c "$(stat -c %s "$T/before")" "$ak")" = "$(cat "$T/before")" ]
	[ "$(sed -n 3p "$ak")" = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQC0 last-line-without-newline" ]
	[ "$(sed -n 4p "$ak")" = "$(cat "$T/newkey.pub")" ]
	[ "$(wc -l < "$ak")" -eq 4 ]
	[ "$(stat -c %a "$ak")" = 600 ]
	# Again: nothing changes.  A key present with options is not added either.
	run in_client cardbaton-bootstrap --config "$C" --node host1 --public-key "$T/newkey.pub"
	[ "$status" -eq 0 ]
	run in_client cardbaton-bootstrap --config "$C" --node host1 --public-key "$T/other.pub"
	[ "$status" -eq 0 ]
	[ "$(wc -l < "$ak")" -eq 4 ]
	[ -z "$(ls -A "$(dirname "$ak")" | grep cardbaton | grep -vx '\.authorized_keys\.cardbaton\.lock')" ]
	# Bad input: a private key, a missing file, a local node, no --node.
	run in_client cardbaton-bootstrap --config "$C" --node host1 --public-key "$T/newkey"
	[ "$status" -eq 65 ]
	run in_client cardbaton-bootstrap --config "$C" --node host1 --public-key "$T/nope.pub"
	[ "$status" -eq 66 ]
	run in_client cardbaton-bootstrap --config "$C" --public-key "$T/newkey.pub"
	[ "$status" -eq 64 ]
	run in_client cardbaton-bootstrap --config "$C" --node nowhere --public-key "$T/newkey.pub"
	[ "$status" -eq 65 ]
}

@test "public_key: in the config and run --public-key are ensured when the daemon starts" {
	ssh-keygen -q -t ed25519 -N '' -C cfg -f "$T/cfgkey"
	ssh-keygen -q -t ed25519 -N '' -C flag -f "$T/flagkey"
	sed -i "s#^    ssh: host2#    ssh: host2\n    public_key: $T/cfgkey.pub#" "$C"
	before=$(grep -c serving "$T/daemon.log" 2>/dev/null || true)
	ip netns exec "$CLIENT_NS" cardbaton-spoold --config "$C" --public-key "$T/flagkey.pub" >>"$T/daemon.log" 2>&1 3>&- &
	DAEMON_PID=$!
	wait_for 20 '[ "$(grep -c "public key added" "$T/daemon.log")" -eq 3 ]'
	grep -qF "$(cat "$T/cfgkey.pub")" "$(host_home 2)/.ssh/authorized_keys"
	not grep -qF "$(cat "$T/flagkey.pub")" "$(host_home 2)/.ssh/authorized_keys"
	grep -qF "$(cat "$T/flagkey.pub")" "$(host_home 1)/.ssh/authorized_keys"
	grep -qF "$(cat "$T/flagkey.pub")" "$(host_home 3)/.ssh/authorized_keys"
}

@test "logs fetches an attempt's output from its node, and -f follows it to the end" {
	ssh_daemon
	id=$(sub --node host3 -- sh -c 'for i in 1 2 3; do echo "line $i"; sleep 0.5; done')
	wait_for 20 '[ "$(state "$id")" = running ]'
	run in_client cardbaton-logs --config "$C" -f "$id"
	[ "$status" -eq 0 ]
	[ "$output" = "$(printf 'line 1\nline 2\nline 3')" ]
	wait_for 20 final "$id"
	[ "$(in_client cardbaton-logs --config "$C" --attempt 0 "$id" | wc -l)" -eq 3 ]
}

@test "checkpoint on an SSH host: pause, resume on the same host; a resumed job waits for its unreachable node" {
	ssh_daemon
	id=$(sub --resume-command "sh $CB_TOP/tests/lib/coop-steps.sh 60 $T/steps CARDBATON_HOST" -- sh "$CB_TOP/tests/lib/coop-steps.sh" 60 "$T/steps" CARDBATON_HOST)
	wait_for 20 '[ "$(wc -l < "$T/steps" 2>/dev/null)" -ge 3 ]'
	host=$(head -1 "$T/steps" | cut -d' ' -f3)
	n=${host#host}
	in_client cardbaton-pause --config "$C" "$id"
	wait_for 20 '[ "$(state "$id")" = paused ]'
	# Its node goes away: resumed, the job waits for it and does not move.
	host_partition "$n"
	in_client cardbaton-resume --config "$C" "$id"
	settle 4
	[ "$(state "$id")" = queued ]
	host_heal "$n"
	wait_for 60 final "$id"
	[ "$(state "$id")" = succeeded ]
	[ "$(cut -d' ' -f1,2 "$T/steps")" = "$(seq 1 60 | sed 's/^/step /')" ]
	[ "$(cut -d' ' -f3 "$T/steps" | sort -u)" = "$host" ]
}

@test "a host that stops answering in the middle of a launch delays no other host's handoff" {
	ssh_daemon
	# host1's stream frozen: what the daemon writes to it gets no answer.
	frozen_launch 'echo run >> "$0"'
	# Ten jobs on host2's one free card, each submitted once the one
	# before is over: each waits for the handoff of that card.
	for i in $(seq 1 10); do
		j=$(sub --node host2 --gpu-count 1 -- sh -c 'echo "$1" >> "$0"' "$T/host2" "$i")
		wait_for 60 final "$j"
		[ "$(state "$j")" = succeeded ]
	done
	[ "$(cat "$T/host2")" = "$(seq 1 10)" ]
	# All of that while host1's launch was still unanswered: its job
	# launching, the launch's deadline not reached (the daemon that
	# waited for the answer got to host2 only after that deadline).
	[ "$(state "$id")" = running ]
	[ "$(last_attempt_state "$id")" = launching ]
	not grep 'node host1 unreachable' "$T/daemon.log"
	not grep 'host1: .*restarting the event stream' "$T/daemon.log"
	[ ! -e "$T/runs" ]
	# host1 answers again: its job runs, once.
	kill -CONT $FROZEN
	wait_for 60 final "$id"
	[ "$(state "$id")" = succeeded ]
	[ "$(wc -l < "$T/runs")" -eq 1 ]
}

@test "run --once against a fresh SSH node ships the worker and launches" {
	state_dir=$(host_home 1)/.local/state/sshgpu-queue
	[ ! -e "$state_dir" ]
	# The job waits for $T/go: one that ended before the launcher
	# read its state file back would be answered (and recorded) as
	# succeeded by this very pass.
	id=$(sub --node host1 -- sh -c 'until [ -e "$1" ]; do sleep 0.02; done; echo run >> "$0"' "$T/runs" "$T/go")
	run in_client cardbaton-spoold --config "$C" --once
	echo "$output"
	[ "$status" -eq 0 ]
	# Shipped by that pass, and the job launched with it.
	[ "$(ls "$state_dir/bin" | wc -l)" -eq 1 ]
	[ -x "$state_dir"/bin/cardbaton-worker-* ]
	[ "$(state "$id")" = running ]
	aid=$(in_client cat "$T/spool/running/$(printf %010d "$id").job" | json 'd["attempts"][-1]["id"]')
	touch "$T/go"
	wait_for 30 '[ -s "$T/runs" ]'
	# Its end on the node, then recorded by the next pass.
	wait_for 30 'grep -qx "state succeeded" "$state_dir/attempts/$aid.state"'
	run in_client cardbaton-spoold --config "$C" --once
	[ "$status" -eq 0 ]
	[ "$(state "$id")" = succeeded ]
	[ "$(wc -l < "$T/runs")" -eq 1 ]
}

@test "a status answer asked before a launch reached the node does not make the running job lost" {
	# ssh, with the answers of `status` held back 3 s after they were
	# made (on the node, before the launch below got there).
	cat > "$T/ssh" <<-EOF
	#!/bin/sh
	for a; do last=\$a; done
	case "\$last" in
	*" 'status' "*)
		out=\$(mktemp); ssh "\$@" > "\$out"; rc=\$?
		echo asked >> "$T/asked"; sleep 3; cat "\$out"; rm -f "\$out"
		echo answered >> "$T/answered"; exit \$rc ;;
	esac
	exec ssh "\$@"
	EOF
	chmod +x "$T/ssh"
	sed -i "s|^ssh_command: \[ssh,|ssh_command: [$T/ssh,|" "$C"
	ssh_daemon
	# The job runs until $T/runs.go: still running when the late answer
	# is applied, however long the steps below take.
	frozen_launch 'echo run >> "$0"; until [ -e "$0.go" ]; do sleep 0.05; done'
	# A reconcile now: the node has no record of the attempt yet.
	kill -HUP "$DAEMON_PID"
	wait_for 10 '[ -s "$T/asked" ]'
	# The launch reaches the node and the job runs, before that answer
	# ("unknown") comes back.
	kill -CONT $FROZEN
	FROZEN=
	wait_for 10 '[ -s "$T/runs" ]'
	wait_for 20 '[ "$(last_attempt_state "$id")" = running ]'
	wait_for 10 '[ -s "$T/answered" ]'
	settle 0.5   # read and applied by the daemon
	[ "$(state "$id")" = running ]
	touch "$T/runs.go"
	wait_for 30 final "$id"
	[ "$(state "$id")" = succeeded ]
	not grep -q "job $id: lost" "$T/daemon.log"
}

@test "a runtime directory too long for a socket's path: connections are shared under /tmp/cardbaton-UID, and the node works" {
	# ssh's master socket is DIR/%C (40 hex digits) plus a 17-byte
	# suffix while it starts: 120 bytes of directory leave no room.
	export XDG_RUNTIME_DIR=$T/run/$(printf 'r%.0s' $(seq 120))
	mkdir -m 0700 "$XDG_RUNTIME_DIR"
	ssh_daemon
	id=$(sub --node host1 -- true)
	wait_for 30 final "$id"
	[ "$(state "$id")" = succeeded ]
	not grep -q 'too long for Unix domain socket' "$T/daemon.log"
	[ ! -e "$XDG_RUNTIME_DIR/cardbaton" ]
	[ -n "$(find "/tmp/cardbaton-$(id -u)" -maxdepth 1 -type s)" ]
	stop_daemon
	pkill -f "ControlPath=/tmp/cardbaton-$(id -u)/" || true
}
