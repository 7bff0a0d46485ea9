#!/usr/bin/env bats
# transfer.bats - checkpoints copied between nodes (issue 35 item 2;
# SPEC §9 "Checkpoint transfer", cardbaton(5) checkpoint_transfer): two
# real sshd test hosts (tests/lib/sshhosts.bash) with one card each and
# no shared filesystem in the config.  A job with checkpoint_transfer,
# paused on host1, resumes on host2 while host1 is busy: its checkpoint
# directory (a 1 GiB file in it) is streamed host1 -> the daemon ->
# host2 into host2's state directory, checked, and read there; its
# steps are continuous and the bytes it reads are the ones it saved.
# `status` shows the copy while it runs.  Killed in the middle (kill -9
# of the daemon, ss -K of the connections), the copy leaves no partial
# copy behind and the job resumes exactly once, from a whole copy.  A
# checkpoint that changes during the copy, one too big, and one through
# a symbolic link are each said, and nothing resumes from them.  The
# copies are removed when the job ends.
#
# The kill and the cut need a copy that lasts: there ssh_command is a
# wrapper that lets the stream into receive-checkpoint 1 MiB at a time
# (about 40 MiB/s).

load ../lib/common
load ../lib/sshhosts
load ../lib/hosttools

setup_file() {
	hosts_available || return 0
	hosts_up 2
}

teardown_file() { hosts_down; }

setup() {
	[ -n "${HOSTS_UID:-}" ] || skip "needs root, ip netns and sshd"
	setup_common
	C=$T/config.yaml
	for i in 1 2; do
		rm -rf "$(host_home "$i")/.local" "$(host_home "$i")"/ck.*
		host_gpus "$i" "0, $(host_gpu_uuid "$i" 0), NVIDIA A100-SXM4-80GB, 0, 81920, 0"
		host_apps "$i"
	done
	CK2=$(host_home 2)/.local/state/sshgpu-queue/checkpoints
	config "ssh, -F, $SSH_CONFIG"
	# The slow ssh: the stream into receive-checkpoint in 1 MiB steps.
	cat > "$T/slowssh" <<-'SH'
		#!/bin/sh
		case "$*" in
		*receive-checkpoint*) ;;
		*) exec ssh "$@" ;;
		esac
		t=$(mktemp) || exit 71
		while dd bs=65536 count=16 iflag=fullblock status=none > "$t" && [ -s "$t" ]; do
			cat "$t" || break
			sleep 0.02
		done | ssh "$@"
		rc=$?
		rm -f "$t"
		exit $rc
	SH
	chmod +x "$T/slowssh"
	# coop.sh N LOG MIB: N steps, one line each in LOG; at the pause file
	# it saves its step and a MIB MiB file (sparse, 64 KiB of noise in
	# it) in the directory $HOME/ck.ATTEMPT, publishes it and exits 75;
	# resumed, it says where it runs, the path it read, and the SHA-256
	# of the file it found, and goes on after the saved step.
	cat > "$T/coop.sh" <<-'SH'
		n=$1 log=$2 mib=$3 i=0
		if [ -n "${SSHGPU_CHECKPOINT:-}" ]; then
			i=$(cat "$SSHGPU_CHECKPOINT/step") || exit 66
			sum=$(sha256sum < "$SSHGPU_CHECKPOINT/payload") || exit 66
			echo "resumed $CARDBATON_HOST $SSHGPU_CHECKPOINT ${sum%% *}" >> "$log.resumes"
		fi
		while [ "$i" -lt "$n" ]; do
			i=$((i + 1))
			echo "step $i" >> "$log"
			sleep 0.05
			if [ -e "$SSHGPU_PAUSE_FILE" ]; then
				ck=$HOME/ck.$CARDBATON_ATTEMPT_ID
				mkdir -p "$ck/sub" && echo "$i" > "$ck/step" && echo meta > "$ck/sub/meta" &&
					truncate -s "${mib}M" "$ck/payload" &&
					head -c 65536 /dev/urandom | dd of="$ck/payload" bs=65536 seek=7 conv=notrunc status=none ||
					exit 1
				printf '{"checkpoint": "%s"}\n' "$ck" > "$SSHGPU_CHECKPOINT_READY.tmp"
				mv "$SSHGPU_CHECKPOINT_READY.tmp" "$SSHGPU_CHECKPOINT_READY"
				exit 75
			fi
		done
	SH
}

teardown() {
	teardown_common
	host_kill_procs 1 2
	[ -z "${TMPFS:-}" ] || nsenter -t "$(host_sshd_pid 2)" -m umount "$TMPFS" || true
}

# config SSH_COMMAND [TOP-LEVEL LINE]: the two hosts, no shared filesystem.
config() {
	cat > "$C" <<-YAML
		spool: ./spool
		ssh_command: [$1]
		${2:-}
		nodes:
		  host1:
		    ssh: host1
		  host2:
		    ssh: host2
	YAML
}



# coop N MIB [FLAG...]: the job (checkpoint_transfer unless told
# otherwise), with host2 busy until it is paused: it starts on host1.
coop() {
	local n=$1 mib=$2
	shift 2
	host_apps 2 "$(host_gpu_uuid 2 0), 4243, 30000"
	sub "${@:---checkpoint-transfer}" --resume-command "sh $T/coop.sh $n $T/steps $mib" -- \
		sh "$T/coop.sh" "$n" "$T/steps" "$mib"
}

# paused_on ID: job ID ran a few steps on host1 and was paused there.
paused_on() {
	local id=$1
	wait_for 20 '[ "$(wc -l < "$T/steps" 2>/dev/null)" -ge 5 ]'
	[ "$(field "$id" node)" = host1 ]
	host_apps 2
	in_client cardbaton-pause --config "$C" "$id"
	wait_for 20 '[ "$(state "$id")" = paused ]'
}

# transfer_of ID: --json's transfer of job ID, "FROM TO BYTES_TOTAL", or none.
transfer_of() {
	st --json "$1" | json '"%s %s %s" % (t["from"], t["to"], t["bytes_total"]) if (t := d["jobs"][0]["transfer"]) and 0 <= t["bytes_done"] <= t["bytes_total"] else "none"'
}
busy1() { host_apps 1 "$(host_gpu_uuid 1 0), 4242, 30000"; }
continuous() { [ "$(cat "$T/steps")" = "$(seq 1 "$1" | sed 's/^/step /')" ]; }
ck_of() { record "$1" | json 'd["checkpoint"]'; }
sum_of() { local s; s=$(sha256sum < "$1/payload") && echo "${s%% *}"; }
# files_of CK: the bytes of CK's files (the step file's length is that
# of the step number the job reached).
files_of() { find "$1" -type f -printf '%s\n' | awk '{ n += $1 } END { print n }'; }
no_partial() { ! ls -d "$CK2"/*/*.part >/dev/null 2>&1; }

# resumed_once_on_host2 ID SUM: it resumed once, on host2, from its
# copy there, reading the bytes it saved (SUM).
resumed_once_on_host2() {
	local word host path sum
	[ "$(wc -l < "$T/steps.resumes")" -eq 1 ]
	read -r word host path sum < "$T/steps.resumes"
	[ "$host" = host2 ]
	[[ $path == "$CK2/$1/"*"/ck."* ]]
	[ "$sum" = "$2" ]
}

@test "paused on host1, it resumes on host2 while host1 is busy: its 1 GiB checkpoint directory copied through the daemon and checked, the steps are continuous, the bytes are the ones saved, and the copy is removed at its end" {
	ssh_daemon
	id=$(coop 60 1024)
	paused_on "$id"
	ck=$(ck_of "$id")
	sum=$(sum_of "$ck") total=$(files_of "$ck")
	busy1
	in_client cardbaton-resume --config "$C" "$id"
	wait_for 60 '[ "$(state "$id")" = succeeded ]'
	continuous 60
	resumed_once_on_host2 "$id" "$sum"
	grep -q "job $id: checkpoint copied to host2: $CK2/$id/.*/ck\.[^ ]* ($total bytes, sha256 [0-9a-f]\{64\})" "$T/daemon.log"
	[ "$(record "$id" | json 'd["attempts"][-1]["node"]')" = host2 ]
	[ "$(record "$id" | json 'd["checkpoint_copies"]')" = '["host2"]' ]
	# The source stays where it was; the copy goes with the job's end.
	[ -f "$ck/payload" ]
	wait_for 20 '[ ! -e "$CK2/$id" ]'
	# No transfer now: null.
	[ "$(st --json --all "$id" | json 'd["jobs"][0]["transfer"]')" = None ]
}

@test "a checkpoint through a symbolic link, and one over checkpoint_transfer_max_gib, are not copied: the reason said once, nothing left on host2, and it resumes on host1 when host1 is free" {
	config "ssh, -F, $SSH_CONFIG" "checkpoint_transfer_max_gib: 1"
	ssh_daemon
	# A symbolic link: its path is one.
	id=$(coop 30 1)
	paused_on "$id"
	ck=$(ck_of "$id")
	mv "$ck" "$ck.real"
	ln -s "$ck.real" "$ck"
	busy1
	in_client cardbaton-resume --config "$C" "$id"
	wait_for 30 'grep -q "job $id: checkpoint transfer from host1 to host2 failed: host1: send-checkpoint: .*symbolic link" "$T/daemon.log"'
	settle 2
	[ "$(state "$id")" = queued ]
	[[ $(field "$id" reason) == "waiting: checkpoint transfer from host1 to host2 failed: host1: "*"; its checkpoint stays on host1" ]]
	[ "$(grep -c "job $id: checkpoint transfer from host1" "$T/daemon.log")" -eq 1 ]
	[ ! -e "$T/steps.resumes" ]
	[ ! -e "$CK2/$id" ] || [ -z "$(ls -A "$CK2/$id")" ]
	rm "$ck"
	mv "$ck.real" "$ck"
	host_apps 1
	wait_for 30 '[ "$(state "$id")" = succeeded ]'
	read -r word host path sum < "$T/steps.resumes"
	[ "$host" = host1 ] && [ "$path" = "$ck" ]

	# 2 GiB (sparse) over the 1 GiB limit.
	rm -f "$T/steps" "$T/steps.resumes"
	id=$(coop 30 2048)
	paused_on "$id"
	busy1
	in_client cardbaton-resume --config "$C" "$id"
	wait_for 30 'grep -q "job $id: checkpoint transfer from host1 to host2 failed: host1: send-checkpoint: .*checkpoint is 2.0 GiB, more than the limit of 1.0 GiB" "$T/daemon.log"'
	settle 2
	[ "$(state "$id")" = queued ]
	[ "$(grep -c "job $id: checkpoint transfer from host1" "$T/daemon.log")" -eq 1 ]
	host_apps 1
	wait_for 30 '[ "$(state "$id")" = succeeded ]'
	read -r word host path sum < "$T/steps.resumes"
	[ "$host" = host1 ]
}

@test "a full disk on host2 (a 1 MiB tmpfs for its copies): the copy is refused there, saying so, host2 is left out for the job, nothing is left; it resumes on host1 once host1 is free" {
	mkdir -p "$CK2"
	nsenter -t "$(host_sshd_pid 2)" -m mount -t tmpfs -o size=1m tmpfs "$CK2" || skip "cannot mount a tmpfs in host2's namespace"
	TMPFS=$CK2
	ssh_daemon
	id=$(coop 30 4)
	paused_on "$id"
	busy1
	in_client cardbaton-resume --config "$C" "$id"
	wait_for 30 'grep -q "job $id: checkpoint transfer from host1 to host2 failed: host2: receive-checkpoint: not enough space in .*; its checkpoint stays on host1" "$T/daemon.log"'
	settle 2
	[ "$(state "$id")" = queued ]
	[ "$(grep -c "job $id: transferring checkpoint from" "$T/daemon.log")" -eq 1 ]
	[ -z "$(nsenter -t "$(host_sshd_pid 2)" -m ls -A "$CK2/$id" 2>/dev/null)" ]
	host_apps 1
	wait_for 30 '[ "$(state "$id")" = succeeded ]'
	read -r word host path sum < "$T/steps.resumes"
	[ "$host" = host1 ]
}

@test "a checkpoint that changes during the copy: the copy is given up, said, nothing is left on host2 and nothing resumes from it; unchanged, the next copy is whole and the job resumes on host2 from it" {
	config "$T/slowssh, -F, $SSH_CONFIG"
	ssh_daemon
	id=$(coop 30 128)
	paused_on "$id"
	ck=$(ck_of "$id")
	busy1
	in_client cardbaton-resume --config "$C" "$id"
	wait_for 30 'grep -q "job $id: transferring checkpoint" "$T/daemon.log"'
	settle 1
	echo more >> "$ck/sub/meta"
	wait_for 30 'grep -q "job $id: checkpoint transfer from host1 to host2 failed: host1: send-checkpoint: checkpoint changed during the copy: $ck/sub/meta" "$T/daemon.log"'
	wait_for 20 no_partial
	[ ! -e "$T/steps.resumes" ]
	# After its back-off it is copied again, unchanged now.
	wait_for 60 '[ "$(state "$id")" = succeeded ]'
	continuous 30
	resumed_once_on_host2 "$id" "$(sum_of "$ck")"
	grep -q "^meta$" "$ck/sub/meta"
}

@test "kill -9 of the daemon, then ss -K of the connections, in the middle of copies: no partial copy is left, and the job resumes exactly once, on host2, from a whole copy" {
	config "$T/slowssh, -F, $SSH_CONFIG"
	ssh_daemon
	id=$(coop 30 128)
	paused_on "$id"
	ck=$(ck_of "$id")
	sum=$(sum_of "$ck")
	busy1
	in_client cardbaton-resume --config "$C" "$id"
	wait_for 30 'ls -d "$CK2/$id"/*.part >/dev/null 2>&1'
	# While it copies: the line under the table, and --json's transfer.
	wait_for 30 'st | grep -q "^job $id on host2: transferring checkpoint from host1: [0-9.]* of 0.1 GiB$"'
	# 128 MiB and the two small files.
	# (Read in a wait: the copy may end between two reads.)
	total=$(files_of "$ck")
	[ "$total" -gt 134217728 ]
	wait_for 30 '[ "$(transfer_of "$id")" = "host1 host2 $total" ]'
	[ "$(st --json | json '[n["transfers"] for n in d["nodes"]]')" = "[[], [\"$id\"]]" ]
	kill -9 "$DAEMON_PID"
	wait "$DAEMON_PID" 2>/dev/null || true
	DAEMON_PID=
	# The mover goes with the daemon, the receiver with its input.
	wait_for 20 no_partial
	[ "$(state "$id")" = queued ]
	ssh_daemon
	wait_for 30 '[ "$(grep -c "job $id: transferring checkpoint" "$T/daemon.log")" -ge 2 ]'
	wait_for 30 'ls -d "$CK2/$id"/*.part >/dev/null 2>&1'
	settle 1
	host_cut 2
	host_cut 1
	wait_for 30 'grep -q "job $id: checkpoint transfer from host1 to host2 failed" "$T/daemon.log"'
	wait_for 20 no_partial
	[ ! -e "$T/steps.resumes" ]
	wait_for 90 '[ "$(state "$id")" = succeeded ]'
	continuous 30
	resumed_once_on_host2 "$id" "$sum"
	[ "$(record "$id" | json '[a["node"] for a in d["attempts"] if a["state"] != "aborted"]')" = '["host1", "host2"]' ]
	wait_for 20 '[ ! -e "$CK2/$id" ]'
	# No transfer now: null.
	[ "$(st --json --all "$id" | json 'd["jobs"][0]["transfer"]')" = None ]
}

@test "examples/torch_job.py (real PyTorch) with checkpoint_transfer: paused by hand, by its time limit and by a preemption, its checkpoint moved between the hosts each time, it ends with weights bit-identical to an uninterrupted run" {
	py3=/usr/bin/python3
	"$py3" -c 'import torch' 2>/dev/null || skip "/usr/bin/python3 has no torch (Debian: python3-torch)"
	# Cards read every 2 s: a staged attempt sees host2 free soon.
	config "ssh, -F, $SSH_CONFIG" "preemption: {enabled: true, min_runtime_seconds: 0}
gpu_refresh_seconds: 2"
	py=$CB_TOP/examples/torch_job.py steps=40000
	"$py3" "$py" --steps "$steps" --out "$T/plain.pt" --checkpoint "$T/plain.ck"
	ssh_daemon
	host_apps 2 "$(host_gpu_uuid 2 0), 4243, 30000"
	args=("$py3" "$py" --steps "$steps" --out "$T/moved.pt" --checkpoint "$T/moved.ck")
	id=$(sub --checkpoint-transfer --timeout 6 --env "PYTHONPATH=$CB_TOP/python" --resume-command "${args[*]}" -- "${args[@]}")
	on() { [ "$(field "$id" state)" = running ] && [ "$(field "$id" node)" = "$1" ]; }
	copies() { grep -c "job $id: checkpoint copied to" "$T/daemon.log"; }
	# By hand, on host1; resumed on host2 by a copy.
	wait_for 30 'on host1'
	sleep 1
	in_client cardbaton-pause --config "$C" "$id"
	wait_for 30 '[ "$(field "$id" state)" = paused ]'
	busy1
	host_apps 2
	in_client cardbaton-resume --config "$C" "$id"
	wait_for 60 'on host2'
	[ "$(copies)" -eq 1 ]
	# Its time limit on host2, now busy from outside too: to host1.
	host_apps 2 "$(host_gpu_uuid 2 0), 4243, 30000"
	host_apps 1
	wait_for 60 'on host1'
	[ "$(copies)" -eq 2 ]
	grep -q "job $id: .*time limit reached" "$T/daemon.log"
	# Preempted on host1 by an urgent job pinned there (staged behind it
	# there at first, perhaps, while host2 still looked busy): to host2.
	host_apps 2
	urgent=$(sub --node host1 --priority 10 -- sleep 60)
	wait_for 60 'on host2'
	[ "$(copies)" -eq 3 ]
	grep -q "job $id: .*preempted by job $urgent" "$T/daemon.log"
	wait_for 120 '[ "$(field "$id" state)" = succeeded ]'
	in_client cardbaton-cancel --config "$C" "$urgent"
	"$py3" -c 'import sys, torch
a, b = torch.load(sys.argv[1]), torch.load(sys.argv[2])
sys.exit(0 if a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a) else 1)' "$T/plain.pt" "$T/moved.pt"
	wait_for 20 '[ ! -e "$CK2/$id" ]'
}
