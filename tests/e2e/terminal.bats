#!/usr/bin/env bats
# terminal.bats - the human output of gpus and status: colour on a
# terminal only (and never with NO_COLOR set), usage bars in gpus.
# script(1) (util-linux) gives the tools a terminal.

load ../lib/common

bats_require_minimum_version 1.5.0
test_timeout 60

setup() {
	setup_common
	C=$T/config.yaml
	unset NO_COLOR
	fake_gpus \
		"0, GPU-00000000-0000-0000-0000-000000000000, NVIDIA Fake A100, 0, 81920, 0" \
		"1, GPU-11111111-1111-1111-1111-111111111111, NVIDIA Fake A100, 40960, 81920, 100"
}

teardown() {
	teardown_common
}

ESC=$'\033'

# on_tty CMD: run the shell command CMD with its stdout on a terminal.
on_tty() {
	script -qec "$1" /dev/null
}

@test "gpus: usage bars in plain ASCII, also when piped" {
	run cardbaton-gpus --config "$C"
	[ "$status" -eq 0 ]
	[[ $output != *"$ESC"* ]]
	[[ ${lines[1]} == *"MEM USE  GPU USE"* ]]
	[[ ${lines[2]} == *" ........ ........ "*" 0/81920 MiB"*idle ]]
	[[ ${lines[3]} == *" ####.... ######## "*"40960/81920 MiB  100%"*busy ]]
}

@test "gpus: idle green and busy yellow on a terminal; NO_COLOR and pipes turn colour off" {
	run on_tty "cardbaton-gpus --config '$C'"
	[ "$status" -eq 0 ]
	[[ $output == *"${ESC}[32midle${ESC}[0m"* ]]
	[[ $output == *"${ESC}[33mbusy${ESC}[0m"* ]]
	run on_tty "NO_COLOR=1 cardbaton-gpus --config '$C'"
	[ "$status" -eq 0 ]
	[[ $output == *idle* ]]
	[[ $output != *"$ESC"* ]]
	# An empty NO_COLOR does not count.
	run on_tty "NO_COLOR= cardbaton-gpus --config '$C'"
	[[ $output == *"${ESC}[32midle"* ]]
	run on_tty "cardbaton-gpus --config '$C' | cat"
	[[ $output == *idle* ]]
	[[ $output != *"$ESC"* ]]
	# --json is never coloured.
	run on_tty "cardbaton-gpus --config '$C' --json"
	[[ $output != *"$ESC"* ]]
}

@test "gpus: an unreachable node in red on a terminal" {
	printf 'spool: ./spool\nssh_command: [false]\nnodes:\n  far:\n    ssh: far\n' > "$C"
	run on_tty "cardbaton-gpus --config '$C'"
	[[ $output == *"far: ${ESC}[31munreachable${ESC}[0m: "* ]]
	run on_tty "NO_COLOR=1 cardbaton-gpus --config '$C'"
	[[ $output == *"far: unreachable: "* ]]
}

@test "shipping the worker to a node: two progress lines on a terminal, none on a pipe" {
	# An "ssh" that runs the remote command line here: the node is this
	# machine, its state directory $T/far, and the worker not there yet.
	printf '#!/bin/sh\nwhile [ "$1" != -- ]; do shift; done\nexec sh -c "$2"\n' > "$T/ssh"
	chmod +x "$T/ssh"
	printf 'spool: ./spool\nssh_command: [%s]\nremote_state_dir: %s\nnodes:\n  far:\n    ssh: far\n' \
		"$T/ssh" "$T/far" > "$C"
	id=$(sed -n 's/^#define WORKER_ID "\(.*\)"/\1/p' "$CB_BUILD/worker-id.h")
	run on_tty "cardbaton-gpus --config '$C'"
	[ "$status" -eq 0 ]
	[[ $output == *"cardbaton: far: installing cardbaton-worker $id ($(uname -m), glibc $(getconf GNU_LIBC_VERSION | cut -d' ' -f2))..."* ]]
	[[ $output == *"cardbaton: far: cardbaton-worker installed"* ]]
	[ -x "$T/far/bin/cardbaton-worker-$id" ]
	# Once there, nothing to say; and never anything but on a terminal.
	run on_tty "cardbaton-gpus --config '$C'"
	[[ $output != *"cardbaton-worker installed"* ]]
	rm -r "$T/far/bin"
	run --separate-stderr cardbaton-gpus --config "$C"
	[ "$status" -eq 0 ]
	[ -z "$stderr" ]
	[ -x "$T/far/bin/cardbaton-worker-$id" ]
}

@test "status: states in colour on a terminal only" {
	local a
	a=$(cardbaton-submit --config "$C" --gpus 0 -- sleep 30)
	start_daemon
	wait_for 10 '[ "$(job_state "$a")" = running ]'
	run on_tty "cardbaton-status --config '$C'"
	[ "$status" -eq 0 ]
	[[ $output == *"${ESC}[32mrunning${ESC}[0m"* ]]
	[[ $output != *"${ESC}[32mSTATE"* ]]
	run on_tty "NO_COLOR=1 cardbaton-status --config '$C'"
	[[ $output == *running* ]]
	[[ $output != *"$ESC"* ]]
	run cardbaton-status --config "$C"
	[[ $output == *running* ]]
	[[ $output != *"$ESC"* ]]
	run on_tty "cardbaton-status --config '$C' --json"
	[[ $output != *"$ESC"* ]]
	cardbaton-cancel --config "$C" "$a"
	wait_for 20 '[ "$(job_state "$a")" = cancelled ]'
}
