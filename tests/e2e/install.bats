#!/usr/bin/env bats
# install.bats - `make install` / `make uninstall` (every tool, the worker
# for nodes, the man pages, the bash completion, the examples), the
# completion itself, and the README's quick start as written.

load ../lib/common

bats_require_minimum_version 1.5.0
export BATS_TEST_TIMEOUT=${BATS_TEST_TIMEOUT:-120}

setup() {
	setup_common
}

teardown() {
	teardown_common
}

# What `make install DESTDIR=$T/root PREFIX=/usr` must put in place.
installed_files() {
	local t m
	echo usr/bin/cardbaton
	echo usr/bin/sshgpu
	for t in submit status logs promote pause resume cancel gpus bootstrap spoold run worker; do
		echo "usr/bin/cardbaton-$t"
	done
	echo usr/libexec/cardbaton/cardbaton-worker-static
	echo usr/libexec/cardbaton/cardbaton-worker.shar
	for m in "$CB_TOP"/worker/*.c "$CB_TOP"/worker/*.h; do
		echo "usr/libexec/cardbaton/${m##*/}"
	done
	for m in "$CB_TOP"/base/*.[ch]; do
		echo "usr/libexec/cardbaton/${m##*/}"
	done
	echo usr/libexec/cardbaton/wire.c
	echo usr/libexec/cardbaton/wire.h
	for m in "$CB_TOP"/man/*.[158]; do
		echo "usr/share/man/man${m##*.}/${m##*/}"
	done
	echo usr/share/bash-completion/completions/cardbaton
	echo usr/share/bash-completion/completions/sshgpu
	for m in "$CB_TOP"/examples/*; do
		echo "usr/share/doc/cardbaton/examples/${m##*/}"
	done
}

@test "make install puts every tool, the worker, man pages, completion and examples in place; uninstall removes them" {
	run make -C "$CB_TOP" B="$CB_BUILD" install DESTDIR="$T/root" PREFIX=/usr
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	local f
	for f in $(installed_files); do
		[ -e "$T/root/$f" ] || { echo "missing: $f"; false; }
	done
	# The man pages of every section, the new section-5 pages among them.
	[ -f "$T/root/usr/share/man/man5/cardbaton.5" ]
	[ -f "$T/root/usr/share/man/man5/cardbaton-spool.5" ]
	[ -f "$T/root/usr/share/man/man8/cardbaton-worker.8" ]
	# Links, and executables where they must be.
	[ "$(readlink "$T/root/usr/bin/sshgpu")" = cardbaton ]
	[ "$(readlink "$T/root/usr/bin/cardbaton-run")" = cardbaton-spoold ]
	[ "$(readlink "$T/root/usr/share/bash-completion/completions/sshgpu")" = cardbaton ]
	for f in cardbaton cardbaton-submit cardbaton-spoold cardbaton-worker; do
		[ -x "$T/root/usr/bin/$f" ]
	done
	[ -x "$T/root/usr/libexec/cardbaton/cardbaton-worker-static" ]
	cmp "$CB_TOP/completion/cardbaton.bash" "$T/root/usr/share/bash-completion/completions/cardbaton"
	cmp "$CB_TOP/examples/cluster.yaml" "$T/root/usr/share/doc/cardbaton/examples/cluster.yaml"
	# The installed tools run.
	"$T/root/usr/bin/cardbaton" --help >/dev/null

	run make -C "$CB_TOP" B="$CB_BUILD" uninstall DESTDIR="$T/root" PREFIX=/usr
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	run find "$T/root" ! -type d
	[ "$status" -eq 0 ]
	[ -z "$output" ] || { echo "left behind: $output"; false; }
	for f in $(installed_files); do
		[ ! -e "$T/root/$f" ] && [ ! -L "$T/root/$f" ]
	done
	[ ! -e "$T/root/usr/libexec/cardbaton" ]
	[ ! -e "$T/root/usr/share/doc/cardbaton" ]
}

# complete WORD... : run the completion function on the command line
# WORD... (the last word is the one being completed); prints COMPREPLY.
complete_line() {
	bash -c '
		source "$CB_TOP/completion/cardbaton.bash" || exit 1
		COMP_WORDS=("$@")
		COMP_CWORD=$(( $# - 1 ))
		COMP_LINE="$*"
		COMP_POINT=${#COMP_LINE}
		_cardbaton "${COMP_WORDS[0]}" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
		printf "%s\n" "${COMPREPLY[@]}" | sort
	' complete "$@"
}

@test "bash completion: subcommands, flags, node names, queued job IDs" {
	printf 'spool: ./spool\nnodes:\n  alpha:\n    local: true\n  beta:\n    local: true\n    idle_mib: 64\n' > "$T/config.yaml"

	run complete_line cardbaton pa
	[ "$status" -eq 0 ]
	[ "$output" = pause ]
	run complete_line sshgpu re
	[ "$output" = resume ]
	run complete_line cardbaton submit --no
	[ "$output" = --node ]
	run complete_line cardbaton-status --js
	[ "$output" = --json ]

	# --node: the nodes of ./config.yaml, or of the --config named.
	run complete_line cardbaton submit --node ''
	[ "$output" = "$(printf 'alpha\nbeta')" ]
	mkdir "$T/elsewhere"
	printf 'nodes:\n  gamma:\n    local: true\n' > "$T/elsewhere/other.yaml"
	run complete_line cardbaton --config "$T/elsewhere/other.yaml" gpus --node ''
	[ "$output" = gamma ]

	# Job IDs from the spool's names (new/ included: no daemon runs).
	# Pinned to a card no node has, so that they stay queued.
	local a b
	a=$(cardbaton-submit --config "$T/config.yaml" --gpus 7 -- true)
	b=$(cardbaton-submit --config "$T/config.yaml" --gpus 7 --priority 5 -- true)
	run complete_line cardbaton cancel ''
	[ "$output" = "$(printf '%s\n' "$a" "$b" | sort)" ]
	run complete_line cardbaton promote "$b"
	[ "$output" = "$b" ]
	# Accepted by the daemon: now read from queued/.
	start_daemon
	stop_daemon
	[ -z "$(ls "$T/spool/new")" ]
	run complete_line cardbaton pause ''
	[ "$output" = "$(printf '%s\n' "$a" "$b" | sort)" ]
}

@test "README quick start, as written, on the embedded default config" {
	# No config.yaml in the working directory: the embedded default (one
	# local node, spool in $XDG_STATE_HOME/cardbaton/spool).  Two cards, so
	# that the job asking for two stays queued behind the pinned one.
	mkdir "$T/qs"
	cd "$T/qs"
	fake_gpus \
		"0, GPU-00000000-0000-0000-0000-000000000000, NVIDIA Fake A100, 0, 81920, 0" \
		"1, GPU-11111111-1111-1111-1111-111111111111, NVIDIA Fake A100, 0, 81920, 0"
	# What the README's commands need: ~/experiments with train.py in it.
	mkdir -p "$HOME/experiments"
	cat > "$HOME/experiments/train.py" <<'PY'
import sys, time, os
print("training with", " ".join(sys.argv[1:]), flush=True)
while not os.path.exists(os.path.expanduser("~/experiments/stop")):
    time.sleep(0.05)
PY
	cp "$HOME/experiments/train.py" "$T/qs/train.py"

	# The lines of the README's quick start (README.md, "Quick start").
	run cardbaton gpus
	[ "$status" -eq 0 ]
	[[ $output == *local* ]]
	cardbaton run >>"$T/daemon.log" 2>&1 &
	DAEMON_PID=$!
	wait_for 10 'grep -q serving "$T/daemon.log"'

	local a b
	a=$(cardbaton submit --gpus 1 --priority 10 --timeout 7200 --cwd '~/experiments' -- python3 train.py --seed 0)
	b=$(cardbaton submit --gpu-count 2 -- python3 train.py --seed 1)
	[ -n "$a" ] && [ -n "$b" ]
	wait_for 20 '[ "$(cardbaton status --json "$a" | json "d[\"jobs\"][0][\"state\"]")" = running ]'
	wait_for 10 '[ "$(cardbaton status --json "$b" | json "d[\"jobs\"][0][\"state\"]")" = queued ]'

	run cardbaton status
	[ "$status" -eq 0 ]
	[[ $output == *"$a"* ]] && [[ $output == *"$b"* ]]
	wait_for 10 'cardbaton logs "$a" | grep -q "training with --seed 0"'
	run cardbaton logs "$a"
	[ "$status" -eq 0 ]
	[[ $output == *"training with --seed 0"* ]]

	run cardbaton promote "$b"
	[ "$status" -eq 0 ]
	run cardbaton cancel "$b"
	[ "$status" -eq 0 ]
	wait_for 10 '[ "$(cardbaton status --json "$b" | json "d[\"jobs\"][0][\"state\"]")" = cancelled ]'
	run cardbaton cancel "$a"
	[ "$status" -eq 0 ]
	wait_for 30 '[ "$(cardbaton status --json "$a" | json "d[\"jobs\"][0][\"state\"]")" = cancelled ]'
	# The spool is the embedded default's.
	[ -d "$XDG_STATE_HOME/cardbaton/spool/done" ]
	[ ! -e "$T/qs/spool" ]
}
