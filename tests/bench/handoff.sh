#!/usr/bin/env bash
# tests/bench/handoff.sh BUILD [local|ssh] [N]   (env HOLD=SECONDS, NVML=fake, BENCH_TMP=DIR)
#
# N trivial jobs through one card; each records its start and end time
# (ns).  Prints the median and p90 of next-start minus previous-end: the
# time CardBaton takes to hand a freed card to the next job.  The ssh
# variant runs against a real sshd test host (tests/lib/sshhosts.bash;
# needs root).  The worker asks the fake nvidia-smi; with NVML=fake,
# the fake NVML library (tests/fake-nvml/) first.  On the SSH host that
# is the worker compiled there (link/ship.c), whose sessions see the
# fake library (HOSTS_NVML=fake); without NVML=fake the host's cc fails,
# so that it gets the static build, nvidia-smi only: the fallback of a
# node without a compiler.
# Its files (spool, node state, the test host's) go under BENCH_TMP
# (default /tmp), as those of tests/bench/run do.
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
mode=${2:-local}
n=${3:-50}
top=$(cd "$(dirname "$0")/../.." && pwd)
export CB_BUILD=$build CB_TOP=$top
tmp=$(mktemp -d "${BENCH_TMP:-/tmp}/cardbaton-bench.XXXXXX")
export BATS_FILE_TMPDIR=$tmp HOME=$tmp/home XDG_RUNTIME_DIR=$tmp/run XDG_STATE_HOME=$tmp/state
mkdir -p "$HOME" && mkdir -m 700 "$XDG_RUNTIME_DIR"
export PATH=$build:$PATH
run=()
cleanup() {
	[ -n "${daemon:-}" ] && kill "$daemon" 2>/dev/null || true
	[ "$mode" = ssh ] && hosts_down
	rm -rf "$tmp"
}
trap cleanup EXIT

if [ "$mode" = ssh ]; then
	# shellcheck source=../lib/sshhosts.bash
	. "$top/tests/lib/sshhosts.bash"
	if [ "${NVML:-}" = fake ]; then
		HOSTS_NVML=fake hosts_up 1 >/dev/null
	else
		hosts_up 1 >/dev/null
		# An older glibc than ours and no working cc: the static build.
		printf '#!/bin/sh\necho "cc: none here (handoff.sh)" >&2\nexit 1\n' > "$(host_bin_dir 1)/cc"
		printf '#!/bin/sh\necho "glibc 2.17"\n' > "$(host_bin_dir 1)/getconf"
		chmod 755 "$(host_bin_dir 1)/cc" "$(host_bin_dir 1)/getconf"
	fi
	run=(ip netns exec "$CLIENT_NS")
	printf 'spool: %s/spool\nssh_command: [ssh, -F, %s]\nnodes:\n  h:\n    ssh: host1\n    gpus: [0]\n' \
		"$tmp" "$SSH_CONFIG" > "$tmp/config.yaml"
else
	export FAKE_GPU_DIR=$tmp/gpus
	mkdir -p "$FAKE_GPU_DIR/bin"
	ln -s "$top/tests/fake-nvidia-smi" "$FAKE_GPU_DIR/bin/nvidia-smi"
	export PATH=$FAKE_GPU_DIR/bin:$PATH
	# Never the machine's own NVML: the fake cards only.
	if [ "${NVML:-}" = fake ]; then
		export CARDBATON_NVML=$build/tests/fake-nvml/libnvidia-ml.so.1
	else
		export CARDBATON_NVML=off
	fi
	echo "0, GPU-00000000-0000-0000-0000-000000000000, Fake, 0, 80000, 0" > "$FAKE_GPU_DIR/gpus.csv"
	: > "$FAKE_GPU_DIR/apps.csv"
	printf 'spool: %s/spool\nnodes:\n  h:\n    local: true\n' "$tmp" > "$tmp/config.yaml"
fi

# Each job holds the card HOLD seconds (default 0.2: the next one is
# staged on the node meanwhile, the baton; 0: placed after the end).
for i in $(seq 1 "$n"); do
	"${run[@]}" cardbaton-submit --config "$tmp/config.yaml" --gpu-count 1 -- \
		sh -c 'date +%s%N >> "$0.start"; sleep "$1"; date +%s%N >> "$0.end"' "$tmp/t" "${HOLD:-0.2}" >/dev/null
done
"${run[@]}" cardbaton-spoold --config "$tmp/config.yaml" 2>"$tmp/daemon.log" &
daemon=$!
until [ -f "$tmp/t.end" ] && [ "$(wc -l < "$tmp/t.end")" -ge "$n" ]; do sleep 0.1; done
python3 - "$tmp/t.start" "$tmp/t.end" "$mode${NVML:+, NVML=$NVML}" <<'PY'
import sys, statistics
s = [int(x) for x in open(sys.argv[1])]
e = [int(x) for x in open(sys.argv[2])]
gaps = sorted((s[i + 1] - e[i]) / 1e6 for i in range(len(s) - 1))
p90 = gaps[int(0.9 * (len(gaps) - 1))]
print(f"handoff ({sys.argv[3]}): n={len(gaps)} median={statistics.median(gaps):.1f} ms p90={p90:.1f} ms")
PY
