#!/usr/bin/env bats
# runas.bats - run_as: owner (issue 34 item 1; SPEC §12, LAYOUT.md §16),
# end to end with real Unix accounts (tests/lib/lab.bash) on a real sshd
# test host (tests/lib/sshhosts.bash): the lab's daemon (root, in the
# client namespace) reaches host1 as each job's owner with the lab's key
# (`ssh -i LABKEY -o IdentitiesOnly=yes -l OWNER`), through the gate the
# owner put in her authorized_keys with `cardbaton bootstrap --lab`; the
# jobs run as their owners, their attempt directories and logs are the
# owners', and one member cannot read another's; a member who has not
# authorized the key has her jobs wait, named in status, gpus and the
# node's view, while the others' run; `logs` reads a job's log through
# the invoker's own ssh as the owner's account (77 for another member);
# `cancel` reaches the owner's job; a kill -9 of the daemon and ss -K
# of the connections during the launches run each job once, as its
# owner; lab.accounts maps a member to an account of another name there;
# and one lease_dir keeps the lab's daemon (as two owners) and a
# member's own controller off each other's cards, sharers counted
# across all three.
#
# The host's sshd lets alice, bob, carol and dave in (AllowUsers) with
# their own ~/.ssh/authorized_keys under their passwd homes
# ($KD/home-NAME, set with usermod for this file's own accounts, removed
# with them), and gives their sessions the host's PATH (the fake
# nvidia-smi) and cards (a Match block's SetEnv: HOME stays the passwd
# home).  alice, bob and carol each have a personal ed25519 key
# ($KD/key-NAME); the members' ssh_config $KD/ssh_config picks it by %u,
# and carol logs in there as dave (her account on the node has another
# name: dave's authorized_keys holds carol's key; lab.accounts maps
# carol to dave).  The daemon's own ssh_config $KD/ssh_config.daemon
# has no IdentityFile at all: it logs in with the lab's key or not at
# all.  The members' config $LM names the lab's spool and host1 through
# their ssh_config; the daemon's $LC the same node through its own.

load ../lib/common
load ../lib/sshhosts
load ../lib/lab

bats_require_minimum_version 1.5.0
test_timeout 60

setup_file() {
	local u
	lab_accounts cbo || return 1
	lab_can && hosts_available || return 0
	KD=$(mktemp -d /tmp/cbrunas.XXXXXX) || return 1
	chmod 0755 "$KD"
	export KD
	for u in "$UA" "$UB" "$UC" "$UD"; do
		install -d -m 0700 -o "$u" -g "$(id -g "$u")" "$KD/home-$u" || return 1
		# Not locked ("!": sshd without PAM refuses a locked account).
		usermod -d "$KD/home-$u" -p '*' "$u" || return 1
	done
	for u in "$UA" "$UB" "$UC"; do
		install -d -m 0700 -o "$u" -g "$(id -g "$u")" "$KD/key-$u" || return 1
		setpriv --reuid="$u" --regid="$(id -g "$u")" --init-groups \
			ssh-keygen -q -t ed25519 -N '' -C "$u-own" -f "$KD/key-$u/id_ed25519" </dev/null || return 1
	done
	export HOSTS_DIR=$KD/hosts
	local d=$HOSTS_DIR/host1
	HOSTS_SSHD_EXTRA="AllowUsers root $UA $UB $UC $UD
Match User $UA,$UB,$UC,$UD
	AuthorizedKeysFile .ssh/authorized_keys
	SetEnv PATH=$d/bin:$CBH_SYS_PATH FAKE_GPU_DIR=$d/gpus CARDBATON_HOST=host1 CARDBATON_NVML=off"
	HOSTS_SSHD_EXTRA=$HOSTS_SSHD_EXTRA hosts_up 1 || return 1
	local common
	common="    HostName $(host_addr 1)
    HostKeyAlias host1
    UserKnownHostsFile $HOSTS_DIR/known_hosts
    GlobalKnownHostsFile /dev/null
    StrictHostKeyChecking yes
    BatchMode yes
    ConnectTimeout 5"
	# The members': each her own key; carol is dave on the node.
	cat > "$KD/ssh_config" <<-EOF
		Match localuser $UC
		    User $UD
		Host host1
		    IdentityFile $KD/key-%u/id_ed25519
		    IdentitiesOnly yes
		$common
	EOF
	# The daemon's: no key of its own (the lab's comes with -i).
	cat > "$KD/ssh_config.daemon" <<-EOF
		Host host1
		    IdentitiesOnly yes
		$common
	EOF
	chmod 0644 "$KD/ssh_config" "$KD/ssh_config.daemon"
}

teardown_file() {
	hosts_down
	lab_accounts_down cbo
	case ${KD:-} in /tmp/cbrunas.*) rm -rf "$KD" ;; esac
}

setup() {
	local u h
	[ -n "${HOSTS_UID:-}" ] || skip "needs root, ip netns, sshd, useradd and setpriv"
	setup_common
	lab_setup
	WID=$(sed -n 's/^#define WORKER_ID "\(.*\)"$/\1/p' "$CB_BUILD/worker-id.h")
	[ -n "$WID" ]
	host_default_gpus 1
	# Each test: the accounts' homes on the host with their own key
	# alone (dave's: carol's), no worker, no state; an empty lease_dir.
	for u in "$UA" "$UB" "$UC" "$UD"; do
		h=$KD/home-$u
		rm -rf "$h"
		install -d -m 0700 -o "$u" -g "$(id -g "$u")" "$h" "$h/.ssh"
	done
	for u in "$UA" "$UB" "$UC"; do
		install -m 0600 -o "$u" -g "$(id -g "$u")" "$KD/key-$u/id_ed25519.pub" "$KD/home-$u/.ssh/authorized_keys"
	done
	install -m 0600 -o "$UD" -g "$(id -g "$UD")" "$KD/key-$UC/id_ed25519.pub" "$KD/home-$UD/.ssh/authorized_keys"
	LD=$KD/leases
	rm -rf "$LD"
	install -d -m 1777 "$LD"
	# The daemon's config $LC and the members' $LM: the same lab and
	# node, each through its own ssh_config.
	LM=$L/member.yaml
	runas_config "$LC" "$KD/ssh_config.daemon"
	runas_config "$LM" "$KD/ssh_config"
	GO=$L/go
	WHY_B="$UB: not authorized on host1 (cardbaton bootstrap --node host1 --lab)"
}

teardown() {
	if [ -z "${BATS_TEST_COMPLETED:-}" ] && [ -n "${HOSTS_DIR:-}" ] && [ -s "$HOSTS_DIR/host1/sshd.log" ]; then
		{ echo "# --- host1 sshd.log (last 30)"; tail -n 30 "$HOSTS_DIR/host1/sshd.log" | sed 's/^/# /'; } >&3
	fi
	if [ -z "${BATS_TEST_COMPLETED:-}" ] && [ -n "${LC:-}" ] && [ -d "${LS:-/nonexistent}" ]; then
		{ echo "# --- status --all"; cardbaton-status --config "$LC" --all 2>&1 | sed 's/^/# /'; } >&3
	fi
	lab_teardown
	teardown_common
}

# runas_config FILE SSH_CONFIG [LINE]: the lab's config with host1 as a
# run_as: owner node (its lease_dir $LD, and LINE of host1's) through
# SSH_CONFIG; carol's account there is dave's (lab.accounts).  0640
# root:GROUP.
runas_config() {
	{
		printf 'spool: %s\nssh_command: [ssh, -F, %s]\n' "$LS" "$2"
		printf 'nodes:\n  host1:\n    ssh: host1\n    run_as: owner\n    lease_dir: %s\n' "$LD"
		[ -z "${3:-}" ] || printf '%s\n' "$3"
		printf 'lab:\n  group: %s\n  admins: [%s]\n  accounts:\n    %s: %s\n' "$LAB_GROUP" "$UC" "$UC" "$UD"
	} > "$1"
	chown "root:$LAB_GROUP" "$1" && chmod 0640 "$1"
}

# mem USER CMD...: CMD as USER (lab.bash's as_argv), in the client
# namespace, from USER's home on the controller side.
mem() {
	local AS u=$1
	as_argv "$u"
	shift
	(cd "$L/home-$u" && in_client "${AS[@]}" "$@")
}

# boot USER: USER's cardbaton-bootstrap --node host1 --lab on $LM
# (through her own ssh).
boot() {
	run --separate-stderr mem "$1" cardbaton-bootstrap --config "$LM" --node host1 --lab
	[ "$status" -eq 0 ] || { echo "bootstrap --lab as $1: exit $status: $stderr" >&2; return 1; }
}

# rdaemon: the lab's daemon (root) on $LC in the client namespace
# ($DAEMON_PID, log $T/daemon.log), once it serves and its key's public
# half is in the spool.
rdaemon() {
	local before
	before=$(grep -c serving "$T/daemon.log" 2>/dev/null || true)
	# ip netns exec execs the daemon: $! is the daemon itself.
	ip netns exec "$CLIENT_NS" cardbaton-spoold --config "$LC" >>"$T/daemon.log" 2>&1 3>&- &
	DAEMON_PID=$!
	wait_for 10 '[ "$(grep -c serving "$T/daemon.log")" -gt "${before:-0}" ]'
	wait_for 10 '[ -s "$LS/controller.pub" ]'
}

# The state directory on the host of USER's account; the attempt ID of
# job ID's attempt N (default 0).
state_of() { echo "$KD/home-$1/.local/state/sshgpu-queue"; }
aid() { echo "$(cat "$LS/id")-$1-${2:-0}"; }

# A job's argv (after --): it appends "ATTEMPT_ID ACCOUNT" to ~/runs on
# the node, says who it is on stdout, and, with HOLD=1, runs until $GO
# exists.
job_argv() {
	JOB=(sh -c 'echo "$CARDBATON_ATTEMPT_ID $(id -un)" >> "$HOME/runs"; echo "ran as $(id -un)"
		if [ -n "$1" ]; then until [ -e "$0" ]; do sleep 0.05; done; fi' "$GO" "${HOLD:-}")
}

state() { lab_field "$1" state; }

# gone PID: no such process, or a zombie (kill -0 says yes to those).
gone() {
	local s
	read -r s 2>/dev/null < "/proc/$1/stat" || return 0
	s=${s##*) }
	case ${s%% *} in Z | X | x) return 0 ;; esac
	return 1
}

# ---- jobs as their owners ---------------------------------------------------

@test "alice's and bob's jobs on one run_as: owner host run as their owners: id -un, leases in the lease_dir, attempt directories and logs each the owner's, and neither can read the other's" {
	rdaemon
	boot "$UA"
	boot "$UB"
	HOLD=1 job_argv
	a=$(lsub "$UA" --node host1 --gpu-count 1 -- "${JOB[@]}")
	b=$(lsub "$UB" --node host1 --gpu-count 1 -- "${JOB[@]}")
	wait_for 30 '[ -s "$KD/home-$UA/runs" ] && [ -s "$KD/home-$UB/runs" ]'
	wait_for 20 '[ "$(state "$a")" = running ] && [ "$(state "$b")" = running ]'
	[ "$(cat "$KD/home-$UA/runs")" = "$(aid "$a") $UA" ]
	[ "$(cat "$KD/home-$UB/runs")" = "$(aid "$b") $UB" ]
	# Their cards' leases in the lease_dir, each the owner's.
	ls -l "$LD" > "$T/leases"
	[ "$(find "$LD" -maxdepth 1 -type f -name 'GPU-*' ! -name '*[+=]*' -user "$UA" | wc -l)" -eq 1 ]
	[ "$(find "$LD" -maxdepth 1 -type f -name 'GPU-*' ! -name '*[+=]*' -user "$UB" | wc -l)" -eq 1 ]
	touch "$GO"
	wait_for 30 '[ "$(state "$a")" = succeeded ] && [ "$(state "$b")" = succeeded ]'
	for x in "$UA:$a" "$UB:$b"; do
		u=${x%%:*} id=${x#*:}
		s=$(state_of "$u")
		d=$s/attempts/$(aid "$id")
		# The worker, through the gate, installed in the owner's account.
		[ "$(stat -c %U "$s/bin/cardbaton-worker-$WID")" = "$u" ]
		[ "$(stat -c '%U %a' "$d")" = "$u 700" ]
		[ "$(stat -c %U "$d/log")" = "$u" ]
		[ "$(cat "$d/log")" = "ran as $u" ]
		[ "$(stat -c %U "$s/attempts/$(aid "$id").state")" = "$u" ]
		# No attempt of anyone's in root's state there.
		[ ! -e "$(host_home 1)/.local/state/sshgpu-queue/attempts/$(aid "$id")" ]
	done
	# Neither member can read the other's attempt directory or log.
	da=$(state_of "$UA")/attempts/$(aid "$a")
	db=$(state_of "$UB")/attempts/$(aid "$b")
	run as "$UB" cat "$da/log"
	[ "$status" -ne 0 ] && [[ $output == *"Permission denied"* ]]
	run as "$UB" ls "$da"
	[ "$status" -ne 0 ] && [[ $output == *"Permission denied"* ]]
	run as "$UA" cat "$db/log"
	[ "$status" -ne 0 ] && [[ $output == *"Permission denied"* ]]
	run as "$UA" ls "$db"
	[ "$status" -ne 0 ] && [[ $output == *"Permission denied"* ]]
	# The daemon logged in as each owner with the lab's key (its
	# fingerprint), never as root.
	fp=$(ssh-keygen -l -f "$LS/controller.pub" | awk '{ print $2 }')
	[[ $fp == SHA256:* ]]
	grep "Accepted publickey for $UA " "$HOSTS_DIR/host1/sshd.log" | grep -qF " $fp"
	grep "Accepted publickey for $UB " "$HOSTS_DIR/host1/sshd.log" | grep -qF " $fp"
	not grep -q "Accepted publickey for root " "$HOSTS_DIR/host1/sshd.log"
	[ ! -e "$(host_home 1)/.local/state/sshgpu-queue" ]
}

@test "bob, who has not authorized the lab's key on host1, has his pinned job wait with the reason (status, status --json, gpus, gpus --json, nodes/host1.json, the daemon's log, once) while alice's run there; once he runs bootstrap --lab his job runs as him, its first attempt" {
	rdaemon
	boot "$UA"
	job_argv
	b=$(lsub "$UB" --node host1 -- "${JOB[@]}")
	wait_for 20 '[ "$(lab_field "$b" reason)" = "waiting: $WHY_B" ]'
	[ "$(state "$b")" = queued ]
	[ ! -e "$(state_of "$UB")" ]
	# status, as bob and as alice.
	lst "$UB" > "$T/status"
	grep -qxF "node host1: $WHY_B" "$T/status" || { cat "$T/status"; false; }
	lst "$UA" | grep -qxF "node host1: $WHY_B"
	lst "$UB" --json > "$T/status.json"
	[ "$(json '[n["refused"] for n in d["nodes"] if n["name"] == "host1"][0]' < "$T/status.json")" = "[\"$WHY_B\"]" ]
	[ "$(json 'd["jobs"][0]["reason"]' < <(lst "$UB" --json "$b"))" = "waiting: $WHY_B" ]
	# The node's view.
	[ "$(json 'd["refused"]' < "$LS/nodes/host1.json")" = "[\"$WHY_B\"]" ]
	# gpus (alice's, through her own ssh): one indented line under the
	# node's header; --json, nodes[].refused.
	mem "$UA" cardbaton-gpus --config "$LM" > "$T/gpus.out"
	[ "$(grep -A1 '^host1: ' "$T/gpus.out" | sed -n 2p)" = "  $WHY_B" ] || { cat "$T/gpus.out"; false; }
	mem "$UA" cardbaton-gpus --config "$LM" --json > "$T/gpus.json"
	[ "$(json 'd["nodes"][0]["refused"]' < "$T/gpus.json")" = "[\"$WHY_B\"]" ]
	# Alice's jobs run there meanwhile.
	a1=$(lsub "$UA" --node host1 -- "${JOB[@]}")
	a2=$(lsub "$UA" --node host1 --gpu-count 0 -- "${JOB[@]}")
	wait_for 30 '[ "$(state "$a1")" = succeeded ] && [ "$(state "$a2")" = succeeded ]'
	[ "$(sort "$KD/home-$UA/runs")" = "$(printf '%s %s\n' "$(aid "$a1")" "$UA" "$(aid "$a2")" "$UA" | sort)" ]
	[ "$(state "$b")" = queued ]
	[ "$(lab_field "$b" reason)" = "waiting: $WHY_B" ]
	[ ! -e "$KD/home-$UB/runs" ]
	# The daemon said so once: its probes, asked again after a back-off,
	# launch nothing and say nothing new.
	[ "$(grep -cF "node host1: $WHY_B" "$T/daemon.log")" -eq 1 ]
	# bob authorizes it: at the next probe, his job runs, as him, its
	# first attempt (nothing was launched through the refused account).
	boot "$UB"
	wait_for 60 '[ "$(state "$b")" = succeeded ]'
	read -r ab who < "$KD/home-$UB/runs"
	[ "$(wc -l < "$KD/home-$UB/runs")" -eq 1 ] && [ "$who" = "$UB" ]
	[ "$ab" = "$(cat "$LS/id")-$b-0" ]
	[ "$(stat -c %U "$(state_of "$UB")/attempts/$ab")" = "$UB" ]
	grep -qF "node host1: $UB: the lab's key is taken" "$T/daemon.log"
	# No refusal left anywhere.
	wait_for 10 '[ "$(json "d[\"refused\"]" < "$LS/nodes/host1.json")" = "[]" ]'
	not grep -qF "node host1: $WHY_B" <(lst "$UB")
	[ "$(json '[n["refused"] for n in d["nodes"] if n["name"] == "host1"][0]' < <(lst "$UB" --json))" = "[]" ]
}

@test "logs of alice's job on a run_as: owner node: alice reads it through her own ssh; bob gets 77 naming the account he has no SSH access as" {
	rdaemon
	boot "$UA"
	boot "$UB"
	job_argv
	a=$(lsub "$UA" --node host1 -- "${JOB[@]}")
	b=$(lsub "$UB" --node host1 -- "${JOB[@]}")
	wait_for 30 '[ "$(state "$a")" = succeeded ] && [ "$(state "$b")" = succeeded ]'
	run --separate-stderr mem "$UA" cardbaton-logs --config "$LM" "$a"
	[ "$status" -eq 0 ] || { echo "exit $status: $stderr"; false; }
	[ "$output" = "ran as $UA" ]
	run --separate-stderr mem "$UB" cardbaton-logs --config "$LM" "$a"
	failed 77 cardbaton-logs
	[[ $stderr == "cardbaton-logs: host1: job $a ran as $UA there, and you have no SSH access as $UA ("* ]]
	[[ $stderr == *"Permission denied"* ]]
	[ -z "$output" ]
	# Bob's own job's log is his to read, and not alice's.
	run --separate-stderr mem "$UB" cardbaton-logs --config "$LM" "$b"
	[ "$status" -eq 0 ] && [ "$output" = "ran as $UB" ]
	run --separate-stderr mem "$UA" cardbaton-logs --config "$LM" "$b"
	failed 77 cardbaton-logs
	[[ $stderr == "cardbaton-logs: host1: job $b ran as $UB there, and you have no SSH access as $UB ("* ]]
}

@test "cancel of alice's running job on a run_as: owner node: the daemon reaches it as alice, the job ends cancelled and its process is gone on the host" {
	rdaemon
	boot "$UA"
	a=$(lsub "$UA" --node host1 -- sh -c 'echo $$ > "$HOME/job.pid"; exec sleep 300')
	wait_for 30 '[ -s "$KD/home-$UA/job.pid" ]'
	wait_for 20 '[ "$(state "$a")" = running ]'
	pid=$(cat "$KD/home-$UA/job.pid")
	[ "$(stat -c %U "/proc/$pid")" = "$UA" ]
	run --separate-stderr ltool "$UA" cancel "$a"
	[ "$status" -eq 0 ] || { echo "exit $status: $stderr"; false; }
	wait_for 20 '[ "$(state "$a")" = cancelled ]'
	[ "$(lab_field "$a" reason)" = "cancelled by user" ]
	wait_for 10 'gone "$pid"'
	# Asked in alice's account, by alice (the worker through her gate).
	d=$(state_of "$UA")/attempts/$(aid "$a")
	[ "$(stat -c %U "$d/cancel")" = "$UA" ]
	# Its lease given back: no mark left in the lease_dir.
	wait_for 10 '[ -z "$(find "$LD" -maxdepth 1 -name "GPU-*[+=]*")" ]'
	not grep -q "job $a: .*refused" "$T/daemon.log"
}

# A cooperating job in POSIX sh (checkpoint.bats's): N steps, one line
# each in LOG; at the pause file it saves its step and publishes the
# checkpoint, exits 75; resumed, it goes on after the saved step.
coop_script() {
	cat <<-'SH'
		n=$1 log=$2 i=0
		if [ -n "${SSHGPU_CHECKPOINT:-}" ]; then i=$(cat "$SSHGPU_CHECKPOINT"); fi
		while [ "$i" -lt "$n" ]; do
			i=$((i + 1))
			echo "step $i $(id -un)" >> "$log"
			sleep 0.05
			if [ -e "$SSHGPU_PAUSE_FILE" ]; then
				echo "$i" > "$log.ck.tmp" && mv "$log.ck.tmp" "$log.ck"
				printf '{"checkpoint": "%s"}\n' "$log.ck" > "$SSHGPU_CHECKPOINT_READY.tmp"
				mv "$SSHGPU_CHECKPOINT_READY.tmp" "$SSHGPU_CHECKPOINT_READY"
				exit 75
			fi
		done
	SH
}

@test "pause and resume of alice's job on a run_as: owner node: asked as alice, it checkpoints in her account and is paused; resumed, it goes on as alice, its steps continuous" {
	rdaemon
	boot "$UA"
	coop_script > "$KD/coop.sh"
	chmod 0755 "$KD/coop.sh"
	steps=$KD/home-$UA/steps
	id=$(lsub "$UA" --node host1 --resume-command "sh $KD/coop.sh 60 $steps" -- sh "$KD/coop.sh" 60 "$steps")
	wait_for 15 '[ "$(wc -l < "$steps" 2>/dev/null)" -ge 5 ]'
	ltool "$UA" pause "$id"
	wait_for 15 '[ "$(state "$id")" = paused ]'
	[ "$(stat -c %U "$steps.ck")" = "$UA" ]
	[ "$(stat -c %U "$(state_of "$UA")/attempts/$(aid "$id")/pause")" = "$UA" ]
	ltool "$UA" resume "$id"
	wait_for 20 '[ "$(state "$id")" = succeeded ]'
	[ "$(cat "$steps")" = "$(seq 1 60 | sed "s/\$/ $UA/; s/^/step /")" ]
	[ "$(stat -c %U "$(state_of "$UA")/attempts/$(aid "$id" 1)")" = "$UA" ]
}

# ---- a crash during the launches --------------------------------------------------

@test "kill -9 of the daemon, then ss -K of every connection to the host, during the launches of alice's and bob's jobs: each job runs exactly once, as its owner" {
	rdaemon
	boot "$UA"
	boot "$UB"
	stop_daemon
	job_argv
	ids_a=() ids_b=()
	for i in 1 2 3; do
		ids_a+=("$(lsub "$UA" --node host1 -- "${JOB[@]}")")
		ids_b+=("$(lsub "$UB" --node host1 -- "${JOB[@]}")")
	done
	: > "$T/daemon.log"
	rdaemon
	wait_for 20 'grep -q "attempt .* on host1" "$T/daemon.log"'
	kill -9 "$DAEMON_PID"
	wait "$DAEMON_PID" 2>/dev/null || true
	DAEMON_PID=
	rdaemon
	for id in "${ids_a[@]}" "${ids_b[@]}"; do wait_for 40 '[ "$(state "$id")" = succeeded ]'; done
	# Then three more of each, and their connections cut (both accounts'
	# streams and calls) as they launch, three times over.
	n0=$(grep -c "attempt .* on host1" "$T/daemon.log")
	for i in 1 2 3; do
		ids_a+=("$(lsub "$UA" --node host1 -- "${JOB[@]}")")
		ids_b+=("$(lsub "$UB" --node host1 -- "${JOB[@]}")")
	done
	wait_for 20 '[ "$(grep -c "attempt .* on host1" "$T/daemon.log")" -gt "$n0" ]'
	for i in 1 2 3; do host_cut 1; sleep 0.2; done
	for id in "${ids_a[@]}" "${ids_b[@]}"; do wait_for 60 '[ "$(state "$id")" = succeeded ]'; done
	# Each job once, in its owner's account, as its owner.
	for u in "$UA" "$UB"; do
		[ "$(awk '{ print $2 }' "$KD/home-$u/runs" | sort -u)" = "$u" ]
		[ "$(wc -l < "$KD/home-$u/runs")" -eq 6 ]
	done
	sid=$(cat "$LS/id")
	for id in "${ids_a[@]}"; do
		[ "$(grep -c "^$sid-$id-[0-9]* $UA\$" "$KD/home-$UA/runs")" -eq 1 ]
	done
	for id in "${ids_b[@]}"; do
		[ "$(grep -c "^$sid-$id-[0-9]* $UB\$" "$KD/home-$UB/runs")" -eq 1 ]
	done
}

# ---- the config -------------------------------------------------------------------

@test "run_as: owner on a local node, without lease_dir, without lab:, and a run_as other than owner or daemon: 78 and one line naming it, from the daemon and the tools" {
	C=$T/c.yaml
	lab="lab:\n  group: $LAB_GROUP\n  admins: [$UC]\n"
	check() {
		printf '%b' "$1" > "$C"
		run --separate-stderr timeout "$(scaled 10)" cardbaton-spoold --config "$C" --once
		failed 78 cardbaton-spoold || return 1
		[ "$stderr" = "cardbaton-spoold: $C:$2" ] || { echo "spoold: $stderr, wanted $C:$2" >&2; return 1; }
		run --separate-stderr cardbaton-status --config "$C"
		failed 78 cardbaton-status || return 1
		[ "$stderr" = "cardbaton-status: $C:$2" ] || { echo "status: $stderr" >&2; return 1; }
		run --separate-stderr cardbaton-submit --config "$C" --hold -- true
		failed 78 cardbaton-submit || return 1
		[ "$stderr" = "cardbaton-submit: $C:$2" ] || { echo "submit: $stderr" >&2; return 1; }
	}
	check "spool: ./spool\nnodes:\n  here:\n    local: true\n    run_as: owner\n    lease_dir: $LD\n$lab" \
		"3: nodes.here: run_as: owner on a local: true node (a local node runs its jobs as the daemon's account)"
	check "spool: ./spool\nnodes:\n  host1:\n    ssh: host1\n    run_as: owner\n$lab" \
		"3: nodes.host1: run_as: owner needs lease_dir (one lease per card across the owners' accounts)"
	check "spool: ./spool\nnodes:\n  host1:\n    ssh: host1\n    run_as: owner\n    lease_dir: $LD\n" \
		"5: nodes.host1.run_as: owner needs lab: (the members' accounts)"
	check "spool: ./spool\nnodes:\n  host1:\n    ssh: host1\n    run_as: root\n    lease_dir: $LD\n$lab" \
		"5: nodes.host1.run_as: is owner or daemon"
	# run_as: daemon, anywhere; run_as: owner with all it needs: fine.
	printf "spool: ./spool\nnodes:\n  here:\n    local: true\n    run_as: daemon\n" > "$C"
	run --separate-stderr cardbaton-submit --config "$C" --hold -- true
	[ "$status" -eq 0 ] || { echo "exit $status: $stderr"; false; }
	run --separate-stderr cardbaton-status --config "$LC"
	[ "$status" -eq 0 ] || { echo "exit $status: $stderr"; false; }
}

# ---- lab.accounts -------------------------------------------------------------------

@test "lab.accounts: carol's account on host1 is dave's: her bootstrap --lab and her jobs go to dave's account, run as dave; she reads their logs through her own ssh as dave" {
	rdaemon
	boot "$UC"
	# The lab's key went into dave's authorized_keys, not carol's.
	read -r _ kblob _ < "$LS/controller.pub"
	grep -qF " $kblob " "$KD/home-$UD/.ssh/authorized_keys"
	not grep -qF " $kblob " "$KD/home-$UC/.ssh/authorized_keys"
	job_argv
	c=$(lsub "$UC" --node host1 -- "${JOB[@]}")
	wait_for 30 '[ "$(state "$c")" = succeeded ]'
	[ "$(cat "$KD/home-$UD/runs")" = "$(aid "$c") $UD" ]
	[ ! -e "$KD/home-$UC/runs" ]
	d=$(state_of "$UD")/attempts/$(aid "$c")
	[ "$(stat -c '%U %a' "$d")" = "$UD 700" ]
	[ "$(cat "$d/log")" = "ran as $UD" ]
	# The job is carol's in the spool.
	[ "$(lab_field "$c" owner)" = "$UC" ]
	run --separate-stderr mem "$UC" cardbaton-logs --config "$LM" "$c"
	[ "$status" -eq 0 ] || { echo "exit $status: $stderr"; false; }
	[ "$output" = "ran as $UD" ]
	# alice, who has no access as dave: 77 naming dave.
	run --separate-stderr mem "$UA" cardbaton-logs --config "$LM" "$c"
	failed 77 cardbaton-logs
	[[ $stderr == "cardbaton-logs: host1: job $c ran as $UD there, and you have no SSH access as $UD ("* ]]
}

# ---- one lease_dir for the lab and a member's own controller -----------------

# own_daemon [LINE]: carol's own single-user controller (as carol, in the
# client namespace; log $T/own.log): its spool in her home here, host1
# through her own ssh (as dave there) with the same lease_dir $LD (and
# LINE of host1's); config $CC.
own_daemon() {
	CC=$L/home-$UC/own.yaml
	{
		printf 'spool: %s\nssh_command: [ssh, -F, %s]\n' "$L/home-$UC/spool" "$KD/ssh_config"
		printf 'nodes:\n  host1:\n    ssh: host1\n    lease_dir: %s\n' "$LD"
		[ -z "${1:-}" ] || printf '%s\n' "$1"
	} > "$CC"
	chown "$UC" "$CC"
	local before
	before=$(grep -c serving "$T/own.log" 2>/dev/null || true)
	mem "$UC" cardbaton-spoold --config "$CC" >> "$T/own.log" 2>&1 &
	wait_for 10 '[ "$(grep -c serving "$T/own.log")" -gt "${before:-0}" ]'
}

# iv_job: a job's argv that sleeps 0.2 s and appends "START END CARDS"
# (ns; CUDA_VISIBLE_DEVICES) to ~/iv on the node.
iv_job() {
	IV=(sh -c 's=$(date +%s%N); sleep 0.2; echo "$s $(date +%s%N) $CUDA_VISIBLE_DEVICES" >> "$HOME/iv"')
}

# ivs N: N intervals in alice's, bob's and dave's ~/iv on the node.
ivs() { [ "$(cat "$KD/home-$UA/iv" "$KD/home-$UB/iv" "$KD/home-$UD/iv" 2>/dev/null | wc -l)" -ge "$1" ]; }

@test "one lease_dir on host1 for the lab's daemon (as alice and as bob) and carol's own controller (as dave): 30 exclusive jobs, never two on one card; with max_jobs_per_gpu 2, 24 sharers, never more than two on one" {
	rdaemon
	boot "$UA"
	boot "$UB"
	own_daemon
	iv_job
	lsub "$UA" --node host1 --gpu-count 1 --array 1-10 -- "${IV[@]}" > "$T/ids.a"
	lsub "$UB" --node host1 --gpu-count 1 --array 1-10 -- "${IV[@]}" > "$T/ids.b"
	mem "$UC" cardbaton-submit --config "$CC" --gpu-count 1 --array 1-10 -- "${IV[@]}" > "$T/ids.c"
	wait_for 60 'ivs 30'
	ivs=("$KD/home-$UA/iv" "$KD/home-$UB/iv" "$KD/home-$UD/iv")
	for f in "${ivs[@]}"; do [ "$(wc -l < "$f")" -eq 10 ]; done
	[ "$(most_per_card "${ivs[@]}")" = 1 ]
	# The three controllers did meet on the cards.
	[ "$(cat "${ivs[@]}" | awk '{ print $3 }' | sort -u | wc -l)" -ge 2 ]
	# Every lease in the one lease_dir; none in an account's own state.
	for u in "$UA" "$UB" "$UD"; do
		[ -z "$(find "$(state_of "$u")/leases" -mindepth 1 2>/dev/null)" ]
	done
	[ -n "$(find "$LD" -maxdepth 1 -name 'GPU-*' -type f)" ]
	# Sharing, counted across all three.
	stop_daemon
	pkill -u "$UC" -f "cardbaton-spoold --config"
	wait_for 10 '! pgrep -u "$UC" -f "cardbaton-spoold --config" > /dev/null'
	runas_config "$LC" "$KD/ssh_config.daemon" '    max_jobs_per_gpu: 2'
	rdaemon
	own_daemon '    max_jobs_per_gpu: 2'
	rm -f "${ivs[@]}"
	lsub "$UA" --node host1 --share --gpu-memory 20000 --array 1-8 -- "${IV[@]}" > /dev/null
	lsub "$UB" --node host1 --share --gpu-memory 20000 --array 1-8 -- "${IV[@]}" > /dev/null
	mem "$UC" cardbaton-submit --config "$CC" --share --gpu-memory 20000 --array 1-8 -- "${IV[@]}" > /dev/null
	wait_for 60 'ivs 24'
	[ "$(most_per_card "${ivs[@]}")" -le 2 ]
}
