#!/usr/bin/env bats
# make demo: the README's first set-up command, end to end.

load ../lib/common

setup() {
	setup_common
}

teardown() {
	teardown_common
}

@test "the demo runs the embedded default config on simulated GPUs and stops cleanly" {
	run env -u FAKE_GPU_DIR PATH="${PATH#"$FAKE_GPU_DIR/bin:"}" "$CB_TOP/tests/demo.sh" "$CB_BUILD"
	echo "$output" | sed 's/^/# /' >&3
	[ "$status" -eq 0 ]
	[[ "$output" == *"simulating four cards"* ]]
	[[ "$output" == *"pinned to GPU 1: CUDA_VISIBLE_DEVICES=GPU-5d1e0a3c-1111-4a4e-9a51-111111111111"* ]]
	[[ "$output" == *"demo finished: 3 succeeded, 1 failed as intended"* ]]
	[[ "$output" == *"stopping; running jobs keep running"* ]]
	# Into a pipe (run's): plain text, not one escape.
	[[ "$output" != *$'\033'* ]]
}

# demo_on_tty [ENV...]: the demo with its standard output on a terminal
# (script(1), as tests/e2e/terminal.bats does), under env ENV...
demo_on_tty() {
	script -qec "env -u FAKE_GPU_DIR $* PATH='${PATH#"$FAKE_GPU_DIR/bin:"}' '$CB_TOP/tests/demo.sh' '$CB_BUILD'" /dev/null
}

@test "the demo's headings are bold on a terminal only, and never with NO_COLOR set (not empty)" {
	run demo_on_tty -u NO_COLOR
	[ "$status" -eq 0 ]
	[[ "$output" == *$'\033[1m== cardbaton gpus\033[0m'* ]]
	[[ "$output" == *$'\033[1m== demo finished: 3 succeeded, 1 failed as intended\033[0m'* ]]
	# An empty NO_COLOR does not count (https://no-color.org).
	run demo_on_tty NO_COLOR=
	[ "$status" -eq 0 ]
	[[ "$output" == *$'\033[1m== cardbaton gpus\033[0m'* ]]
	# NO_COLOR: no escape at all, the tools' output included.
	run demo_on_tty NO_COLOR=1
	[ "$status" -eq 0 ]
	[[ "$output" == *"== demo finished: 3 succeeded, 1 failed as intended"* ]]
	[[ "$output" != *$'\033'* ]]
}
