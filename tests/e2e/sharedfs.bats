#!/usr/bin/env bats
# sharedfs.bats - checkpoints on a shared filesystem (issue 35 item 1;
# SPEC §9, cardbaton(5) shared_fs): two real sshd test hosts
# (tests/lib/sshhosts.bash) that mount one directory under different
# paths (bind mounts: $MB/shared at $MB/mnt-host1 and $MB/mnt-host2,
# named `lab` in each node's shared_fs).  A job paused on host1 resumes
# on host2 while host1 is busy, reading its checkpoint by host2's path,
# its steps continuous; with both free it resumes on host1, its own;
# a checkpoint outside the shared path stays on its node; one host2
# cannot see (not mounted where host2's shared_fs says, or a symbolic
# link) makes that launch busy with the reason, host2 left out, and
# nothing resumed from it.
#
# Each host has one card.  The job (coop.sh) finds its mount by
# $CARDBATON_HOST (the hosts' SetEnv) and writes its checkpoint there.

load ../lib/common
load ../lib/sshhosts
load ../lib/hosttools

setup_file() {
	hosts_available || return 0
	MB=$(mktemp -d /tmp/cbsharedfs.XXXXXX) || return 1
	chmod 0755 "$MB"
	export MB
	mkdir -p "$MB/shared" "$MB/mnt-host1" "$MB/mnt-host2" || return 1
	mount --bind "$MB/shared" "$MB/mnt-host1" || return 1
	mount --bind "$MB/shared" "$MB/mnt-host2" || return 1
	hosts_up 2
}

teardown_file() {
	hosts_down
	[ -n "${MB:-}" ] || return 0
	umount "$MB/mnt-host1" "$MB/mnt-host2" 2>/dev/null
	case $MB in /tmp/cbsharedfs.*) rm -rf "$MB" ;; esac
}

setup() {
	[ -n "${HOSTS_UID:-}" ] || skip "needs root, ip netns, sshd and mount --bind"
	setup_common
	C=$T/config.yaml
	for i in 1 2; do
		rm -rf "$(host_home "$i")/.local"
		host_gpus "$i" "0, $(host_gpu_uuid "$i" 0), NVIDIA A100-SXM4-80GB, 0, 81920, 0"
		host_apps "$i"
	done
	rm -rf "${MB:?}/shared/"*
	cat > "$C" <<-YAML
		spool: ./spool
		ssh_command: [ssh, -F, $SSH_CONFIG]
		nodes:
		  host1:
		    ssh: host1
		    shared_fs: {lab: $MB/mnt-host1}
		  host2:
		    ssh: host2
		    shared_fs: {lab: $MB/mnt-host2}
	YAML
	# coop.sh N LOG [LOCAL]: N steps, one line each in LOG; at the pause
	# file it saves its step under its host's mount of `lab` (or, LOCAL,
	# in $T), publishes the checkpoint and exits 75; resumed, it says
	# which path and host it read, and goes on after the saved step.
	cat > "$T/coop.sh" <<-'SH'
		n=$1 log=$2 i=0
		if [ -n "${SSHGPU_CHECKPOINT:-}" ]; then
			i=$(cat "$SSHGPU_CHECKPOINT") || exit 66
			echo "resumed $CARDBATON_HOST $SSHGPU_CHECKPOINT" >> "$log.resumes"
		fi
		while [ "$i" -lt "$n" ]; do
			i=$((i + 1))
			echo "step $i" >> "$log"
			sleep 0.05
			if [ -e "$SSHGPU_PAUSE_FILE" ]; then
				ck=$MB/mnt-$CARDBATON_HOST/ck.$CARDBATON_ATTEMPT_ID
				[ -z "$3" ] || ck=$T/ck.$CARDBATON_ATTEMPT_ID
				echo "$i" > "$ck.tmp" && mv "$ck.tmp" "$ck"
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
}



# coop N LOG [LOCAL]: the job, resumable, submitted (its ID), with host2
# busy until it is paused (paused_on): it starts on host1.
coop() {
	host_apps 2 "$(host_gpu_uuid 2 0), 4243, 30000"
	sub --env "MB=$MB" --env "T=$T" --resume-command "sh $T/coop.sh $1 $2 ${3:-}" -- \
		sh "$T/coop.sh" "$1" "$2" "${3:-}"
}

# paused_on ID HOST: job ID (started with host2 busy, so on host1) ran
# a few steps there, and was paused.
paused_on() {
	local id=$1
	wait_for 20 '[ "$(wc -l < "$T/steps" 2>/dev/null)" -ge 5 ]'
	[ "$(field "$id" node)" = "$2" ]
	host_apps 2
	in_client cardbaton-pause --config "$C" "$id"
	wait_for 20 '[ "$(state "$id")" = paused ]'
}

# host1 busy: a compute process on its card (outside the queue).
busy1() { host_apps 1 "$(host_gpu_uuid 1 0), 4242, 30000"; }

continuous() { [ "$(cat "$2")" = "$(seq 1 "$1" | sed 's/^/step /')" ]; }

@test "a job paused on host1 resumes on host2 while host1 is busy: its checkpoint read by host2's path of the shared filesystem, its steps continuous" {
	ssh_daemon
	id=$(coop 200 "$T/steps")
	paused_on "$id" host1
	[[ $(record "$id" | json 'd["checkpoint"]') == "$MB/mnt-host1/ck."* ]]
	busy1
	in_client cardbaton-resume --config "$C" "$id"
	wait_for 30 '[ "$(state "$id")" = succeeded ]'
	continuous 200 "$T/steps"
	[ "$(record "$id" | json 'd["attempts"][1]["node"]')" = host2 ]
	read -r word host path < "$T/steps.resumes"
	[ "$host" = host2 ]
	[[ $path == "$MB/mnt-host2/ck."* ]]
	[ "$(wc -l < "$T/steps.resumes")" -eq 1 ]
}

@test "with both hosts free, a job paused on host1 resumes on host1, its own" {
	ssh_daemon
	id=$(coop 200 "$T/steps")
	paused_on "$id" host1
	in_client cardbaton-resume --config "$C" "$id"
	wait_for 30 '[ "$(state "$id")" = succeeded ]'
	continuous 200 "$T/steps"
	[ "$(record "$id" | json 'd["attempts"][1]["node"]')" = host1 ]
	read -r word host path < "$T/steps.resumes"
	[ "$host" = host1 ] && [[ $path == "$MB/mnt-host1/ck."* ]]
}

@test "a checkpoint outside the shared path stays on its node: with host1 busy the job waits, host2 idle; freed, it resumes on host1" {
	ssh_daemon
	id=$(coop 200 "$T/steps" local)
	paused_on "$id" host1
	busy1
	in_client cardbaton-resume --config "$C" "$id"
	settle 3
	[ "$(state "$id")" = queued ]
	[ ! -e "$T/steps.resumes" ]
	host_apps 1
	wait_for 30 '[ "$(state "$id")" = succeeded ]'
	continuous 200 "$T/steps"
	[ "$(record "$id" | json 'd["attempts"][-1]["node"]')" = host1 ]
}

@test "host2 cannot see the checkpoint (not mounted where its shared_fs says, then a symbolic link in its place): the launch there is busy, saying so, host2 is left out, nothing resumes from it; host1 freed, it resumes there" {
	sed -i "s|lab: $MB/mnt-host2|lab: $MB/none-host2|" "$C"
	ssh_daemon
	id=$(coop 200 "$T/steps")
	paused_on "$id" host1
	ck=$(record "$id" | json 'd["checkpoint"]')
	busy1
	in_client cardbaton-resume --config "$C" "$id"
	wait_for 20 'grep -q "job $id: not started on host2: checkpoint not visible on host2: $MB/none-host2/${ck##*/} (No such file or directory)" "$T/daemon.log"'
	settle 2
	[ "$(state "$id")" = queued ]
	[ ! -e "$T/steps.resumes" ]
	# Left out: one try on host2, not one a pass.
	[ "$(grep -c "job $id: not started on host2" "$T/daemon.log")" -eq 1 ]
	host_apps 1
	wait_for 30 '[ "$(state "$id")" = succeeded ]'
	continuous 200 "$T/steps"
	[ "$(record "$id" | json 'd["attempts"][-1]["node"]')" = host1 ]

	# A symbolic link on host2's path to a checkpoint of another job.
	stop_daemon
	sed -i "s|lab: $MB/none-host2|lab: $MB/mnt-host2|" "$C"
	rm -f "$T/steps" "$T/steps.resumes"
	ssh_daemon
	id=$(coop 200 "$T/steps")
	paused_on "$id" host1
	ck=$(record "$id" | json 'd["checkpoint"]')
	echo 39 > "$MB/shared/other"
	mv "$ck" "$ck.real"
	ln -s "$MB/mnt-host2/other" "$ck"
	busy1
	in_client cardbaton-resume --config "$C" "$id"
	wait_for 20 'grep -q "job $id: not started on host2: checkpoint not visible on host2: .* (reached through a symbolic link)" "$T/daemon.log"'
	settle 2
	[ "$(state "$id")" = queued ]
	[ ! -e "$T/steps.resumes" ]
}
