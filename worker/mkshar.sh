#!/bin/sh
# mkshar.sh OUT FILE... : write a POSIX sh script that builds
# cardbaton-worker from FILE... on an SSH node (link/ship.c: on every
# node that has a C compiler, dynamically linked, so that the worker
# asks the driver's NVML library there: worker/nvml.c).  The script
# expects $dest (the final path of the binary) to be set by the lines
# the controller puts before it, and needs only sh, mktemp, sed, cp and
# cc (${CC:-cc}) on the node.
#
# Its exit status says what the controller does next:
#   0   installed: $dest is the worker built there (or was already there);
#   86  this node cannot build it (no working compiler, a build that
#       does not run, no temporary directory): the last line of its
#       standard error says why, and nothing is left behind; the
#       controller ships its static build instead where it can;
#   else the install itself failed (the state directory not writable,
#       ...): the controller reports it, as for the static build.
# The binary is built in a temporary directory, copied to
# $(dirname $dest)/.tmp.PID, checked to run (`version`) from there,
# then linked to $dest (never over one installed meanwhile; renamed
# where there are no hard links): never half a worker under its name.
set -eu
out=$1
shift
eof=CARDBATON_WORKER_SOURCE_EOF_$$
# The files land side by side (so do they in make install's libexec):
# two of one name would silently be one.
dup=$(for f in "$@"; do basename "$f"; done | sort | uniq -d)
if [ -n "$dup" ]; then
	echo "mkshar.sh: two files named $dup" >&2
	exit 1
fi
{
	# All of it in one brace group: the node's shell reads the whole
	# script (its standard input) before it runs any of it, so that an
	# early exit never leaves the controller writing into a closed pipe.
	cat <<-'EOF'
	{
	set -u
	umask 077
	cannot() { echo "cardbaton-worker: $*" >&2; exit 86; }
	bin=$(dirname "$dest")
	t=
	# First what would fail the static build as well: no time spent.
	mkdir -p "$bin" || exit 1
	# One compile at a time per node (a daemon's stream and its first
	# query arrive together): flock(1) on bin/ itself, released by the
	# kernel whatever becomes of its holder; without flock, or after
	# two minutes, each compiles on its own (the renames are atomic).
	if command -v flock >/dev/null 2>&1 && exec 9<"$bin"; then
		flock -w 120 9 2>/dev/null || :
	fi
	# Another install finished meanwhile: nothing to do.
	[ -x "$dest" ] && exit 0
	src=$(mktemp -d "${TMPDIR:-/tmp}/cardbaton-worker.XXXXXX") ||
		cannot "cannot make a temporary directory in ${TMPDIR:-/tmp}"
	trap 'rm -rf "$src"; [ -z "$t" ] || rm -f "$t"' EXIT
	trap 'exit 1' HUP INT TERM PIPE
	EOF
	for f in "$@"; do
		if grep -q "^$eof\$" "$f"; then
			echo "mkshar.sh: $f contains the end marker" >&2
			exit 1
		fi
		b=$(basename "$f")
		printf 'cat > "$src/%s" <<'\''%s'\'' || cannot "cannot write $src/%s"\n' "$b" "$eof" "$b"
		cat "$f"
		echo "$eof"
	done
	cat <<-'EOF'
	# -ldl: dlopen (worker/nvml.c) is in libc itself only from glibc
	# 2.34 on; an empty libdl.a stands in on newer glibc and musl.
	# Each file in parallel (a node has cores), then the link.
	pids= rc=0
	for f in "$src"/*.c; do
		${CC:-cc} -std=c11 -O2 -D_GNU_SOURCE -I"$src" -c -o "${f%.c}.o" "$f" > "${f%.c}.log" 2>&1 &
		pids="$pids $!"
	done
	for p in $pids; do wait "$p" || rc=$?; done
	[ "$rc" -ne 0 ] || ${CC:-cc} -o "$src/cardbaton-worker" "$src"/*.o -ldl > "$src/link.log" 2>&1 || rc=$?
	if [ "$rc" -ne 0 ]; then
		why=$(cat "$src"/*.log | sed -n '/[Ee]rror/{p;q;}')
		[ -n "$why" ] || why=$(cat "$src"/*.log | sed -n '$p')
		cannot "${CC:-cc} failed (exit $rc)${why:+: $why}"
	fi
	t=$bin/.tmp.$$
	cp "$src/cardbaton-worker" "$t" || exit 1
	chmod 755 "$t" || exit 1
	case $("$t" version 2>/dev/null) in
	"version "*) ;;
	*) cannot "the worker built by ${CC:-cc} does not run" ;;
	esac
	# Never over a worker installed meanwhile (link/ship.c ship_build).
	ln "$t" "$dest" 2>/dev/null || [ -x "$dest" ] || mv -f "$t" "$dest" || exit 1
	rm -f "$t"
	t=
	}
	EOF
} > "$out.tmp"
mv -f "$out.tmp" "$out"
