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
}
