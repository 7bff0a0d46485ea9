#!/bin/sh
# checkpoint_job.sh - the CardBaton checkpoint contract (SPEC section 9) in
# POSIX sh.
#
# usage: checkpoint_job.sh [STEPS [SECONDS_PER_STEP [STEP_LOG]]]
#        (defaults: 100, 0.02, ./steps.log; the state is saved under
#        ${CHECKPOINT_DIR:-./checkpoints})
#
# A counter loop 1..STEPS that appends "step K" to STEP_LOG, sleeping
# SECONDS_PER_STEP per step (a fractional sleep, as GNU, busybox and BSD
# sleep(1) all accept).  Its whole state is the counter.
#
#   * After every step (a safe point) it looks for the file named by
#     SSHGPU_PAUSE_FILE (or CARDBATON_PAUSE_FILE).  When it exists, the job
#     writes the counter to CHECKPOINT_DIR/state atomically (a temporary
#     file in the same directory, sync, mv), publishes
#     {"checkpoint": "/abs/path/state"} at SSHGPU_CHECKPOINT_READY (or
#     CARDBATON_CHECKPOINT_READY) the same way, and exits 75.  The worker
#     records the job paused only on that exit status with a valid marker.
#   * Started with SSHGPU_CHECKPOINT (or CARDBATON_CHECKPOINT) set, as the
#     resume_command is, it reads the counter from that file and goes on
#     with the next step.  The step log is cut back to the checkpoint's
#     step first, so every step is in it exactly once, in order, however
#     many times the job was paused (or killed after a checkpoint).  A fresh
#     run starts the step log afresh.
#   * SIGTERM (cancel, or a time limit without a checkpoint): the job
#     removes its temporary files and dies of the signal; no marker.
#
# Exit status: 0 done, 75 paused (state saved and published), 64 usage,
# 65 unusable checkpoint, 66 checkpoint missing, 74 I/O error.
#
# Job file:
#     command: [sh, checkpoint_job.sh, "1000", "1"]
#     resume_command: sh checkpoint_job.sh 1000 1

prog=checkpoint_job.sh
steps=${1:-100}
secs=${2:-0.02}
log=${3:-./steps.log}
dir=${CHECKPOINT_DIR:-./checkpoints}
pause=${SSHGPU_PAUSE_FILE:-${CARDBATON_PAUSE_FILE:-}}
ready=${SSHGPU_CHECKPOINT_READY:-${CARDBATON_CHECKPOINT_READY:-}}
ckpt=${SSHGPU_CHECKPOINT:-${CARDBATON_CHECKPOINT:-}}

die() { # STATUS MESSAGE
	printf '%s: %s\n' "$prog" "$2" >&2
	exit "$1"
}

case $steps in
'' | *[!0-9]*) die 64 "STEPS must be a whole number, not '$steps'" ;;
esac
[ $# -le 3 ] || die 64 "usage: $prog [STEPS [SECONDS_PER_STEP [STEP_LOG]]]"

# The temporary file being written, if any: removed on any exit.
tmp=
cleanup() { [ -z "$tmp" ] || rm -f -- "$tmp"; }
trap cleanup EXIT
# Die of the signal itself (after cleanup), so the worker sees it.
trap 'cleanup; trap - TERM; kill -TERM $$' TERM
trap 'cleanup; trap - INT; kill -INT $$' INT

# sync FILE flushes just that file with GNU coreutils and busybox; plain
# POSIX sync (everything) otherwise.
fsync() { sync "$@" 2>/dev/null || sync; }

# atomic_write PATH: standard input to PATH through a temporary file in the
# same directory, synced before the rename (mv within one directory is
# rename(2)), then the directory synced.
atomic_write() {
	tmp=$(dirname -- "$1")/.$(basename -- "$1").$$.tmp
	cat > "$tmp" && fsync "$tmp" && mv -f -- "$tmp" "$1" && tmp= &&
		fsync "$(dirname -- "$1")"
}

# The JSON string for $1 (a path): backslash and double quote escaped;
# control characters are refused.
json_str() {
	case $1 in
	*[[:cntrl:]]*) return 1 ;;
	esac
	esc=$(printf '%s' "$1" | sed 's/[\\"]/\\&/g')
	printf '"%s"' "$esc"
}

step=0
if [ -n "$ckpt" ]; then
	[ -f "$ckpt" ] || die 66 "checkpoint $ckpt: no such file"
	IFS= read -r step < "$ckpt" || die 65 "checkpoint $ckpt: empty"
	case $step in
	'' | *[!0-9]*) die 65 "checkpoint $ckpt: not a step count: '$step'" ;;
	esac
	[ "$step" -le "$steps" ] || die 65 "checkpoint $ckpt is at step $step, beyond $steps"
	printf '%s: resuming after step %s from %s\n' "$prog" "$step" "$ckpt" >&2
fi

# The step log holds steps 1..$step, nothing after (lines an attempt wrote
# after this checkpoint are dropped): cut it back, atomically.
lines=0
[ ! -f "$log" ] || lines=$(($(wc -l < "$log")))
if [ "$lines" -gt "$step" ]; then
	head -n "$step" "$log" | atomic_write "$log" || die 74 "$log: cannot cut it back"
elif [ "$step" -eq 0 ]; then
	: > "$log" || die 74 "$log: cannot write"
fi

while [ "$step" -lt "$steps" ]; do
	step=$((step + 1))
	sleep "$secs"
	echo "step $step" >> "$log" || die 74 "$log: cannot write"
	# The safe point; after the last step there is nothing left to save.
	if [ -n "$pause" ] && [ -e "$pause" ] && [ "$step" -lt "$steps" ]; then
		fsync "$log"
		mkdir -p -- "$dir" || die 74 "$dir: cannot create"
		abs=$(cd -- "$dir" && pwd -P)/state || die 74 "$dir: cannot enter"
		echo "$step" | atomic_write "$abs" || die 74 "$abs: cannot save"
		# From here on the marker and exit 75 go together: a SIGTERM
		# now is ignored, and the job exits 75 in a moment anyway.
		trap '' TERM INT
		if [ -n "$ready" ]; then
			js=$(json_str "$abs") || die 74 "$abs: a control character in the path"
			printf '{"checkpoint": %s}\n' "$js" | atomic_write "$ready" ||
				die 74 "$ready: cannot publish"
		else
			printf '%s: no SSHGPU_CHECKPOINT_READY: not published\n' "$prog" >&2
		fi
		printf '%s: paused after step %s: %s\n' "$prog" "$step" "$abs" >&2
		exit 75
	fi
done
echo "done after $step steps"
