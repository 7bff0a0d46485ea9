#!/usr/bin/env bats
# device.bats - tests/device/run, the real-GPU check (README "Real-GPU
# check"), on this machine against the fakes (DEVICE_FAKE=1): the fake
# nvidia-smi and the fake NVML library answer its comparisons and carry
# its handoff runs, the PyTorch checks skip; with DEVICE_STANDIN=1 the
# PyTorch jobs are stand-ins, so that the steps of those checks run too.
# The binaries are $CB_BUILD's (DEVICE_BUILD): the script does not build.

load ../lib/common

test_timeout 180

setup() {
	setup_common
}

teardown() {
	teardown_common
}

# device [ENV...]: tests/device/run against the fakes, its table in
# $T/out/device-table.md.
device() {
	run env "$@" DEVICE_FAKE=1 DEVICE_BUILD="$CB_BUILD" DEVICE_HANDOFF_N=10 OUT="$T/out" \
		"$CB_TOP/tests/device/run"
}

# has RESULT CHECK...: each CHECK's row in the table says RESULT.
has() {
	local res=$1 c
	shift
	for c in "$@"; do
		grep -q "^| $c | $res | " "$T/out/device-table.md" || {
			echo "row $c is not $res:" >&2
			cat "$T/out/device-table.md" >&2
			return 1
		}
	done
}

@test "device check against the fakes: gpus agrees with nvidia-smi and NVML, handoff both ways; the PyTorch checks skip" {
	device
	echo "$output"
	[ "$status" -eq 0 ]
	has pass build gpus-vs-smi gpus-vs-nvml handoff-nvml handoff-smi
	has skip busy cuda-visible checkpoint
	grep -q '^| busy | skip | - | skip: no NVIDIA GPU (fakes) |$' "$T/out/device-table.md"
	grep -q '^| gpus-vs-smi | pass | 2 cards | both ways' "$T/out/device-table.md"
	grep -q '^| handoff-nvml | pass | median [0-9.]* ms | p90 [0-9.]* ms, 9 gaps' "$T/out/device-table.md"
	# The same table on stdout, and nothing left running or behind.
	[[ $output == *"| gpus-vs-nvml | pass | 2 cards |"* ]]
	[[ $output == *"0 failed"* ]]
	[ -s "$T/out/device-logs/daemon.log" ]
	[ -z "$(find /tmp -maxdepth 1 -name 'cardbaton-device.*' -newer "$T/config.yaml" 2>/dev/null)" ]
}

@test "device check: an nvidia-smi that disagrees with NVML (another UUID) is a FAIL row and exit 1" {
	printf '#!/bin/sh\n"%s" "$@" | sed s/GPU-d1d1d1d1/GPU-e1e1e1e1/\n' "$CB_TOP/tests/fake-nvidia-smi" > "$T/liar"
	chmod 755 "$T/liar"
	device DEVICE_FAKE_SMI="$T/liar"
	echo "$output"
	[ "$status" -eq 1 ]
	has FAIL gpus-vs-smi
	grep -q '^| gpus-vs-smi | FAIL | 2 cards | through NVML: card 1 uuid' "$T/out/device-table.md"
	has pass build gpus-vs-nvml handoff-nvml handoff-smi
	[[ $output == *"1 failed"* ]]
}

@test "device check with stand-ins for the PyTorch jobs: busy, CUDA_VISIBLE_DEVICES, checkpoint pause/resume pass" {
	device DEVICE_STANDIN=1 DEVICE_CK_STEPS=200
	echo "$output"
	[ "$status" -eq 0 ]
	has pass build gpus-vs-smi gpus-vs-nvml busy cuda-visible checkpoint handoff-nvml handoff-smi
	grep -q '^| busy | pass | held: 2048 MiB, 1 proc | the pinned job waited (' "$T/out/device-table.md"
	grep -q '^| checkpoint | pass | paused at [0-9]*/200 |' "$T/out/device-table.md"
}

@test "device check: a build that cannot be used is a FAIL row, every other check skipped, exit 1" {
	mkdir "$T/nobuild"
	run env DEVICE_FAKE=1 DEVICE_BUILD="$T/nobuild" OUT="$T/out" "$CB_TOP/tests/device/run"
	[ "$status" -eq 1 ]
	has FAIL build
	has skip gpus-vs-smi gpus-vs-nvml busy cuda-visible checkpoint handoff-nvml handoff-smi
}
