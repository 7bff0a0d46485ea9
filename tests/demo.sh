#!/usr/bin/env bash
# make demo: the daemon on the embedded default config (one local node),
# with simulated GPUs where no real ones answer, a few jobs, their status
# and logs, then a clean stop.  Touches nothing outside a temp directory.
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
top=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d /tmp/cardbaton-demo.XXXXXX)
export HOME=$tmp/home XDG_STATE_HOME=$tmp/state XDG_CONFIG_HOME=$tmp/config
export PATH=$build:$PATH
mkdir -p "$HOME"
cd "$tmp"

# The headings in bold only on a terminal, and never with NO_COLOR set
# and not empty (https://no-color.org), as the tools decide (bin/top.c,
# status.c, gpus.c use_colour): piped or logged, plain text.
if [ -t 1 ] && [ -z "${NO_COLOR:-}" ]; then
	bold=$'\033[1m' plain=$'\033[0m'
else
	bold= plain=
fi
say() { printf '\n%s== %s%s\n' "$bold" "$*" "$plain"; }

if nvidia-smi -L >/dev/null 2>&1; then
	say "real GPUs found: using nvidia-smi"
else
	say "no GPU answers here: simulating four cards (tests/fake-nvidia-smi)"
	export FAKE_GPU_DIR=$tmp/gpus CARDBATON_NVML=off
	mkdir -p "$FAKE_GPU_DIR/bin"
	ln -s "$top/tests/fake-nvidia-smi" "$FAKE_GPU_DIR/bin/nvidia-smi"
	export PATH=$FAKE_GPU_DIR/bin:$PATH
	cat > "$FAKE_GPU_DIR/gpus.csv" <<'CSV'
0, GPU-5d1e0a3c-0000-4a4e-9a51-000000000000, NVIDIA Simulated H100, 0, 81559, 0
1, GPU-5d1e0a3c-1111-4a4e-9a51-111111111111, NVIDIA Simulated H100, 0, 81559, 0
2, GPU-5d1e0a3c-2222-4a4e-9a51-222222222222, NVIDIA Simulated H100, 0, 81559, 0
3, GPU-5d1e0a3c-3333-4a4e-9a51-333333333333, NVIDIA Simulated H100, 0, 81559, 0
CSV
	: > "$FAKE_GPU_DIR/apps.csv"
fi

say "cardbaton gpus"
cardbaton gpus

say "cardbaton run (the daemon, in the background)"
cardbaton run 2> "$tmp/daemon.log" &
daemon=$!
trap 'kill -TERM $daemon 2>/dev/null || true' EXIT
until grep -q serving "$tmp/daemon.log"; do sleep 0.05; done

say "submitting four jobs"
a=$(cardbaton submit --gpus 1 --name pinned -- sh -c 'echo "pinned to GPU 1: CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES"; sleep 1')
b=$(cardbaton submit --gpu-count 2 --name two-cards -- sh -c 'echo "two cards: CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES"; sleep 1')
c=$(cardbaton submit --name fails -- sh -c 'echo "this one fails" >&2; exit 3')
d=$(cardbaton submit --gpu-count 0 --priority 5 --name cpu-only -- echo "no GPU needed")
echo "job IDs: $a $b $c $d"
sleep 0.3
cardbaton status

for id in $a $b $c $d; do
	until cardbaton status --json "$id" | grep -Eq '"state": *"(succeeded|failed|cancelled|lost)"'; do
		sleep 0.1
	done
done

say "cardbaton status --all"
cardbaton status --all
for id in $a $b $c $d; do
	say "cardbaton logs $id"
	cardbaton logs "$id" || true
done

say "stopping the daemon"
kill -TERM $daemon
wait $daemon || true
trap - EXIT
cat "$tmp/daemon.log"
ok=1
for id in $a $b $d; do
	cardbaton status --json "$id" | grep -q '"state": *"succeeded"' || ok=0
done
cardbaton status --json "$c" | grep -q '"state": *"failed"' || ok=0
rm -rf "$tmp"
[ $ok = 1 ] && say "demo finished: 3 succeeded, 1 failed as intended"
