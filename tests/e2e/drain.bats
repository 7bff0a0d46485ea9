#!/usr/bin/env bats
# drain.bats - taking a node out of service: `cardbaton drain NODE
# [--checkpoint]`, `cardbaton undrain NODE`.  Real daemon, real worker,
# real inotify on the local node (four simulated cards).

load ../lib/common

bats_require_minimum_version 1.5.0

setup() {
	setup_common
	C=$T/config.yaml
	# ck.sh: the checkpoint contract in sh; it runs until asked to
	# pause (then saves and exits 75), and resumed from its checkpoint
	# it says so and ends.
	cat > "$T/ck.sh" <<-'EOF'
	#!/bin/sh
	if [ -n "${CARDBATON_CHECKPOINT-}" ]; then
		echo "resumed from $(cat "$CARDBATON_CHECKPOINT")" >> "$0.log"
		exit 0
	fi
	echo started >> "$0.log"
	until [ -e "$CARDBATON_PAUSE_FILE" ]; do sleep 0.02; done
	echo "step 7" > "$0.state"
	printf '{"checkpoint": "%s"}' "$0.state" > "$CARDBATON_CHECKPOINT_READY.tmp"
	mv "$CARDBATON_CHECKPOINT_READY.tmp" "$CARDBATON_CHECKPOINT_READY"
	exit 75
	EOF
}

teardown() {
	teardown_common
}

nodes() { st --json | json "$1"; }

@test "drain --checkpoint: the resumable job checkpoints and waits, the plain one finishes, nothing new starts; undrain resumes it there" {
	start_daemon
	ck=$(sub --resume-command "sh $T/ck.sh" -- sh "$T/ck.sh")
	plain=$(sub -- sh -c 'until [ -e "$0" ]; do sleep 0.02; done' "$T/plain.go")
	wait_for 10 '[ "$(field "$ck" state)" = running ] && [ "$(field "$plain" state)" = running ]'
	run -0 cardbaton-drain --config "$C" --checkpoint local
	wait_for 10 '[ "$(field "$ck" state)" = queued ]'
	[ "$(field "$ck" reason)" = "node local drained: checkpoint saved; resumes on local" ]
	[ "$(field "$plain" state)" = running ]
	grep -q 'node local drained (its resumable jobs checkpoint)' "$T/daemon.log"
	grep -q "job $ck: node local drained: asked to checkpoint within 60 s" "$T/daemon.log"
	# Nothing new is placed there, a CPU job neither; it survives a restart.
	new=$(sub --gpu-count 0 -- touch "$T/new.ran")
	stop_daemon
	start_daemon
	touch "$T/plain.go"
	wait_for 10 '[ "$(field "$plain" state)" = succeeded ]'
	[ "$(nodes 'd["nodes"][0]["drained"]')" = True ]
	st | grep -qx 'node local drained: nothing new is placed there'
	cardbaton-gpus --config "$C" --json | json 'd["nodes"][0]["drained"]' | grep -qx True
	cardbaton-gpus --config "$C" | grep -q '^local: 4 GPUs, 4 idle; drained$'
	settle 1
	[ "$(field "$new" state)" = queued ]
	[ "$(field "$ck" state)" = queued ]
	[ ! -e "$T/new.ran" ]
	# Back in service: the checkpointed job resumes there, from its state.
	run -0 cardbaton-undrain --config "$C" local
	wait_for 10 '[ "$(field "$ck" state)" = succeeded ] && [ "$(field "$new" state)" = succeeded ]'
	[ "$(cat "$T/ck.sh.log")" = "$(printf 'started\nresumed from step 7')" ]
	[ "$(field "$ck" attempts)" = 2 ]
	[ "$(nodes 'd["nodes"][0]["drained"]')" = False ]
	[ -e "$T/new.ran" ]
}

@test "drain without --checkpoint: running jobs run on, nothing new starts; a resumable job that ignores the request fails after its grace" {
	start_daemon
	one=$(sub -- sh -c 'until [ -e "$0" ]; do sleep 0.02; done' "$T/one.go")
	wait_for 10 '[ "$(field "$one" state)" = running ]'
	cardbaton-drain --config "$C" local
	two=$(sub -- true)
	touch "$T/one.go"
	wait_for 10 '[ "$(field "$one" state)" = succeeded ]'
	settle 0.5
	[ "$(field "$two" state)" = queued ]
	cardbaton-undrain --config "$C" local
	wait_for 10 '[ "$(field "$two" state)" = succeeded ]'
	# Drained with --checkpoint, a job that never checkpoints is
	# stopped when its grace is out, and says why.
	printf 'command: [sh, -c, "sleep 300"]\nresume_command: true\ncheckpoint_grace_seconds: 1\n' > "$T/deaf.yaml"
	deaf1=$(sub --job "$T/deaf.yaml")
	wait_for 10 '[ "$(field "$deaf1" state)" = running ]'
	cardbaton-drain --config "$C" --checkpoint local
	wait_for 15 '[ "$(field "$deaf1" state)" = failed ]'
	[ "$(field "$deaf1" reason)" = "drained: no checkpoint within 1 s" ]
}

@test "drain and undrain: an unknown node is 66, bad usage 64; drain twice, undrain twice: fine" {
	run --separate-stderr cardbaton-drain --config "$C" nowhere
	failed 66 cardbaton-drain
	[ "$stderr" = "cardbaton-drain: unknown node 'nowhere' (not in $C)" ]
	run --separate-stderr cardbaton-undrain --config "$C" nowhere
	failed 66 cardbaton-undrain
	run --separate-stderr cardbaton-drain --config "$C"
	failed 64 cardbaton-drain
	run --separate-stderr cardbaton-drain --config "$C" local local
	failed 64 cardbaton-drain
	run --separate-stderr cardbaton-undrain --config "$C" --checkpoint local
	failed 64 cardbaton-undrain
	run -0 cardbaton-drain --config "$C" local
	run -0 cardbaton-drain --config "$C" --checkpoint local
	[ "$(cat spool/drain/local)" = "drain checkpoint" ]
	run -0 cardbaton-undrain --config "$C" local
	run -0 cardbaton-undrain --config "$C" local
	[ ! -e spool/drain/local ]
}

@test "drain/: a symlink or a directory in a node's place is not followed, said, and drains nothing; other content drains" {
	start_daemon
	mkdir -p spool/drain
	echo drain > "$T/elsewhere"
	ln -s "$T/elsewhere" spool/drain/local
	kill -HUP "$DAEMON_PID"
	wait_for 10 'grep -q "drain/local.*; not a drain" "$T/daemon.log"'
	kill -HUP "$DAEMON_PID"
	id=$(sub -- true)
	wait_for 10 '[ "$(field "$id" state)" = succeeded ]'
	[ "$(nodes 'd["nodes"][0]["drained"]')" = False ]
	rm spool/drain/local
	mkdir spool/drain/local
	id=$(sub -- true)
	wait_for 10 '[ "$(field "$id" state)" = succeeded ]'
	rmdir spool/drain/local
	# Said once while it stays.
	[ "$(grep -c "drain/local.*; not a drain" "$T/daemon.log")" -le 2 ]
	printf 'whatever\n' > spool/tmp/d
	mv spool/tmp/d spool/drain/local
	wait_for 10 'grep -q "node local drained" "$T/daemon.log"'
	id=$(sub -- true)
	settle 0.5
	[ "$(field "$id" state)" = queued ]
}
