#!/bin/sh
# mkshar.sh OUT FILE... : write a POSIX sh script that rebuilds
# cardbaton-worker from FILE... on a node whose architecture differs
# from the controller's.  The script expects $dest (the final path of
# the binary) to be set by the lines the controller puts before it, and
# needs only sh, mktemp and cc on the node.
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
	echo 'set -eu'
	echo 'umask 077'
	echo 'src=$(mktemp -d "${TMPDIR:-/tmp}/cardbaton-worker.XXXXXX")'
	echo 'trap '\''rm -rf "$src"'\'' EXIT'
	for f in "$@"; do
		if grep -q "^$eof\$" "$f"; then
			echo "mkshar.sh: $f contains the end marker" >&2
			exit 1
		fi
		printf 'cat > "$src/%s" <<'\''%s'\''\n' "$(basename "$f")" "$eof"
		cat "$f"
		echo "$eof"
	done
	echo 'mkdir -p "$(dirname "$dest")"'
	echo 'echo "cardbaton-worker: compiling on $(uname -m)" >&2'
	# -ldl: dlopen (worker/nvml.c) is in libc itself only from glibc
	# 2.34 on; an empty libdl.a stands in on newer glibc and musl.
	echo '${CC:-cc} -std=c11 -O2 -D_GNU_SOURCE -I"$src" -o "$dest.tmp.$$" "$src"/*.c -ldl'
	echo 'chmod 755 "$dest.tmp.$$"'
	echo 'mv -f "$dest.tmp.$$" "$dest"'
} > "$out.tmp"
mv -f "$out.tmp" "$out"
