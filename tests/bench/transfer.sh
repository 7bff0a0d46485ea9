#!/usr/bin/env bash
# tests/bench/transfer.sh BUILD [MIB]   (env BENCH_TRANSFER_RUNS=3, BENCH_TMP=DIR; BENCH_KEEP=1 keeps its files)
#
# CardBaton's checkpoint transfer (SPEC §9, checkpoint_transfer) beside
# a plain `ssh host1 tar | ssh host2 tar` of the same directory, in one
# run, on two real sshd test hosts (tests/lib/sshhosts.bash; needs root)
# with one card each and no shared filesystem in the config.
#
# The checkpoint: a directory of 8 files of MIB/8 MiB (default MIB 1024)
# from /dev/urandom, made once in host1's home (so in the page cache for
# every run, CardBaton's and the baseline's alike).  Each round:
#   1. CardBaton: a resumable job started on host1 (host2 busy) is
#      paused (it publishes that directory as its checkpoint and exits
#      75), host1 made busy, the job resumed: the daemon copies the
#      checkpoint to host2 (its mover: send-checkpoint on host1 over ssh
#      | the daemon | receive-checkpoint on host2 over ssh, which fsyncs
#      every file and checks the SHA-256).  Timed from the daemon's
#      "transferring checkpoint" log line to its "checkpoint copied" one:
#      the daemon's standard error goes through a bash read loop that
#      prefixes each line with $EPOCHREALTIME as it arrives.
#   2. the baseline, from the client namespace like the daemon:
#      ssh host1 tar -C DIR -cf - . | ssh host2 'mkdir -p X && tar -C X -xf - && sync'
#      (sync: CardBaton's receiver fsyncs), and the same without sync.
#      Timed around the pipeline (two fresh ssh connections each, where
#      the daemon's links are already up and shared: ControlMaster).
# Every measurement starts after a `sync` (nothing dirty left by the
# one before), and each copy is removed before the next.
# BENCH_TRANSFER_RUNS rounds (default 3).  Prints a summary on standard
# error and one line on standard output:
#   transfer: {"mib":..,"bytes":..,"cb":[s..],"sync":[s..],"nosync":[s..]}
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
mib=${2:-1024}
runs=${BENCH_TRANSFER_RUNS:-3}
top=$(cd "$(dirname "$0")/../.." && pwd)
export CB_BUILD=$build CB_TOP=$top
tmp=$(mktemp -d "${BENCH_TMP:-/tmp}/cardbaton-bench.XXXXXX")
export BATS_FILE_TMPDIR=$tmp HOME=$tmp/home XDG_RUNTIME_DIR=$tmp/run XDG_STATE_HOME=$tmp/state
mkdir -p "$HOME" && mkdir -m 700 "$XDG_RUNTIME_DIR"
export PATH=$build:$PATH
daemon=
cleanup() {
	[ -n "$daemon" ] && kill "$daemon" 2>/dev/null || true
	hosts_down
	[ -n "${BENCH_KEEP:-}" ] || rm -rf "$tmp"
}
trap cleanup EXIT
say() { printf '%s transfer: %s\n' "$(date +%T)" "$*" >&2; }
die() { say "$*"; [ -f "$tmp/daemon.log" ] && tail -n 30 "$tmp/daemon.log" >&2; exit 1; }
# until_ SECONDS CMD: CMD (a shell string, evaluated here: the caller's
# locals, never its $1) true within SECONDS, polled at 20 ms.
until_() {
	local k=0 lim=$(($1 * 50))
	until eval "$2"; do
		sleep 0.02; k=$((k + 1)); [ $k -lt $lim ] || return 1
	done
}
now() { echo "$EPOCHREALTIME"; }
secs() { python3 -c "import sys; print(round(float(sys.argv[2]) - float(sys.argv[1]), 3))" "$1" "$2"; }

# shellcheck source=../lib/sshhosts.bash
. "$top/tests/lib/sshhosts.bash"
hosts_available || die "needs root, ip netns and sshd"
hosts_up 2 >/dev/null
for i in 1 2; do
	host_gpus "$i" "0, $(host_gpu_uuid "$i" 0), NVIDIA A100-SXM4-80GB, 0, 81920, 0"
	host_apps "$i"
done
busy() { host_apps "$1" "$(host_gpu_uuid "$1" 0), 424$1, 30000"; }
C=$tmp/config.yaml
printf 'spool: %s/spool\nssh_command: [ssh, -F, %s]\ncheckpoint_transfer_max_gib: %d\nnodes:\n  host1:\n    ssh: host1\n  host2:\n    ssh: host2\n' \
	"$tmp" "$SSH_CONFIG" $((mib / 1024 + 2)) > "$C"
CK=$(host_home 1)/ck
CK2=$(host_home 2)/.local/state/sshgpu-queue/checkpoints

say "making the checkpoint: 8 files of $((mib * 128)) KiB from /dev/urandom in $CK"
mkdir -p "$CK"
for f in 0 1 2 3 4 5 6 7; do head -c $((mib * 131072)) /dev/urandom > "$CK/part.$f"; done
sync

# The job: on host1 it says it runs (STARTED.ATTEMPT) and waits for its
# pause file, then publishes CK as its checkpoint and exits 75; resumed
# (on host2, from the copy) it ends at once.
cat > "$tmp/job.sh" <<-'SH'
	[ -z "${SSHGPU_CHECKPOINT:-}" ] || exit 0
	: > "$2.$CARDBATON_HOST"
	while [ ! -e "$SSHGPU_PAUSE_FILE" ]; do sleep 0.02; done
	printf '{"checkpoint": "%s"}\n' "$1" > "$SSHGPU_CHECKPOINT_READY.tmp"
	mv "$SSHGPU_CHECKPOINT_READY.tmp" "$SSHGPU_CHECKPOINT_READY"
	exit 75
SH

stamp() { local l; while IFS= read -r l; do printf '%s %s\n' "$EPOCHREALTIME" "$l"; done; }
ip netns exec "$CLIENT_NS" cardbaton-spoold --config "$C" 2> >(stamp >> "$tmp/daemon.log") >/dev/null &
daemon=$!
until_ 20 'grep -q serving "$tmp/daemon.log" 2>/dev/null' || die "the daemon did not start"
state() { in_client cardbaton-status --config "$C" --json --all "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["jobs"][0]["state"])'; }

# cb_copy ROUND: one copy by CardBaton; prints its seconds.
cb_copy() {
	local round=$1 id t0 t1 line
	busy 2
	host_apps 1
	id=$(in_client cardbaton-submit --config "$C" --checkpoint-transfer \
		--resume-command "sh $tmp/job.sh $CK $tmp/started.$round" -- sh "$tmp/job.sh" "$CK" "$tmp/started.$round")
	until_ 60 '[ -e "$tmp/started.$round.host1" ]' || die "job $id did not start on host1"
	host_apps 2
	in_client cardbaton-pause --config "$C" "$id" >/dev/null
	until_ 60 '[ "$(state "$id")" = paused ]' || die "job $id not paused"
	busy 1
	sync
	in_client cardbaton-resume --config "$C" "$id" >/dev/null
	until_ 600 'grep -q "job $id: checkpoint copied to host2\|job $id: checkpoint transfer .* failed" "$tmp/daemon.log"' ||
		die "job $id: no copy in 10 minutes"
	grep -q "job $id: checkpoint copied to host2" "$tmp/daemon.log" || die "job $id: the copy failed"
	t0=$(grep -m1 " cardbaton-spoold: job $id: transferring checkpoint " "$tmp/daemon.log" | cut -d' ' -f1)
	line=$(grep -m1 " cardbaton-spoold: job $id: checkpoint copied to host2" "$tmp/daemon.log")
	t1=${line%% *}
	until_ 60 '[ "$(state "$id")" = succeeded ]' || die "job $id did not succeed on host2"
	until_ 60 '[ ! -e "$CK2/$id" ]' || die "job $id: its copy on host2 not removed"
	host_apps 1
	secs "$t0" "$t1"
}

# base_copy ROUND SYNC: the baseline (SYNC: "&& sync" or nothing); prints its seconds.
base_copy() {
	local x=$(host_home 2)/base.$1 t0 t1 got
	sync
	t0=$(now)
	# shellcheck disable=SC2029
	in_client sh -c 'ssh -F "$1" host1 tar -C "$2" -cf - . | ssh -F "$1" host2 "mkdir -p $3 && tar -C $3 -xf - $4"' \
		sh "$SSH_CONFIG" "$CK" "$x" "$2"
	t1=$(now)
	got=$(du -sb --apparent-size "$x"/part.* | awk '{s += $1} END {print s}')
	[ "$got" = $((mib * 1048576)) ] || die "baseline: $got bytes arrived, not $((mib * 1048576))"
	rm -rf "$x"
	secs "$t0" "$t1"
}

cb=() sy=() ns=()
for ((r = 1; r <= runs; r++)); do
	cb+=("$(cb_copy "$r")")
	sy+=("$(base_copy "$r.s" "&& sync")")
	ns+=("$(base_copy "$r.n" "")")
	say "round $r: CardBaton ${cb[-1]} s, ssh|tar+sync ${sy[-1]} s, ssh|tar ${ns[-1]} s"
done
# bytes as the daemon said them (the last round's; the files' sizes and
# names, in its stream).
bytes=$(sed -n 's/.*checkpoint copied to host2: .* (\([0-9]*\) bytes, sha256 .*/\1/p' "$tmp/daemon.log" | tail -1)
python3 - "$mib" "${bytes:-0}" "${cb[*]}" "${sy[*]}" "${ns[*]}" <<'PY'
import json, statistics, sys
mib, nbytes = int(sys.argv[1]), int(sys.argv[2])
cb, sy, ns = ([float(x) for x in a.split()] for a in sys.argv[3:6])
data = mib * 1048576
m = {k: statistics.median(v) for k, v in (("cb", cb), ("sync", sy), ("nosync", ns))}
print(f"transfer {mib} MiB: CardBaton median {m['cb']:.3f} s ({data / m['cb'] / 1e6:.0f} MB/s), "
      f"ssh|tar+sync {m['sync']:.3f} s ({data / m['sync'] / 1e6:.0f} MB/s), "
      f"ssh|tar {m['nosync']:.3f} s ({data / m['nosync'] / 1e6:.0f} MB/s); "
      f"ratio {m['cb'] / m['sync']:.2f}", file=sys.stderr)
print("transfer: " + json.dumps({"mib": mib, "bytes": nbytes, "cb": cb, "sync": sy, "nosync": ns}))
PY
