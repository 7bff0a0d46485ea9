#!/usr/bin/env bats
# ckstream.bats - a checkpoint copied between nodes (issue 35), the
# worker's side run locally: send-checkpoint's stream (worker/ckpt.c,
# cardbaton-worker(8)) into receive-checkpoint, as the daemon relays
# it, and drop-checkpoints.  What must hold whatever goes wrong: a copy
# is in STATE/checkpoints/JOB/ATTEMPT only when whole and checked, and
# no ATTEMPT.part is ever left behind by a receiver that ended.

load ../lib/common

bats_require_minimum_version 1.5.0
test_timeout 60

setup() {
	setup_common
	CK=$STATE/checkpoints
	export SRC=$T/src
	mkdir -p "$SRC"
}

teardown() {
	if [ -n "${MOUNTED:-}" ]; then
		umount "$MOUNTED" 2>/dev/null
	fi
	teardown_common
}

send() { cardbaton-worker send-checkpoint "$@"; }
recv() { cardbaton-worker receive-checkpoint "$@"; }

# field KEY < RECORD: the first value of KEY, as the record has it.
field() { sed -n "s/^$1 //p" | head -n 1; }

# nothing_left JOB: the receiver left no copy and no .part of any attempt.
nothing_left() {
	local left
	left=$(ls -A "$CK/$1" 2>/dev/null)
	[ -z "$left" ] || { echo "left in $CK/$1: $left" >&2; return 1; }
}

# modes DIR: every entry's mode and name, NUL-separated (newlines in names).
modes() { (cd "$1" && find . -printf '%m %y %s %P\0' | sort -z); }

# tree [MIB]: $SRC/ck with all the shapes of a checkpoint, and a file of
# MIB (50) MiB.
tree() {
	mkdir -p "$SRC/ck/a/b/c" "$SRC/ck/empty" "$SRC/ck/with space"
	printf 'model' > "$SRC/ck/a/weights"
	: > "$SRC/ck/a/b/empty-file"
	printf 'x' > "$SRC/ck/with space/name with spaces"
	printf 'y' > "$SRC/ck/a/new"$'\n'"line"
	head -c $((${1:-50} << 20)) /dev/urandom > "$SRC/ck/a/b/c/big"
	printf 'opt' > "$SRC/ck/optimizer"
	chmod 600 "$SRC/ck/a/weights"
	chmod 640 "$SRC/ck/optimizer"
	chmod 755 "$SRC/ck/a/b" "$SRC/ck/with space"
	chmod 750 "$SRC/ck/a"
	chmod 700 "$SRC/ck/empty"
}

@test "a directory tree round trip: identical, modes kept, the answer right, no .part" {
	tree
	run --separate-stderr bash -c 'cardbaton-worker send-checkpoint "$1" | tee "$2" |
		cardbaton-worker receive-checkpoint 7 ab-1' _ "$SRC/ck" "$T/stream"
	[ "$status" -eq 0 ] || { echo "$stderr"; false; }
	[ -z "$stderr" ]
	copy=$CK/7/ab-1/ck
	[ "$(field path <<< "$output")" = "$copy" ]
	diff -r "$SRC/ck" "$copy"
	[ "$(modes "$SRC/ck" | md5sum)" = "$(modes "$copy" | md5sum)" ]
	[ "$(stat -c %a "$copy/a/weights")" = 600 ]
	[ "$(stat -c %a "$copy/optimizer")" = 640 ]
	[ "$(stat -c %a "$copy/a/b")" = 755 ]
	total=$(find "$SRC/ck" -type f -printf '%s\n' | awk '{ s += $1 } END { print s }')
	[ "$(field bytes <<< "$output")" = "$total" ]
	# The checksum: of every byte before the end line (69 bytes).
	sum=$(head -c -69 "$T/stream" | sha256sum | cut -d' ' -f1)
	[ "$(field sha256 <<< "$output")" = "$sum" ]
	[ "$(tail -c 69 "$T/stream")" = "end $sum" ]
	[ "$(head -n 1 "$T/stream")" = "cardbaton-checkpoint 1 $total 12" ]
	[ "$(ls -A "$CK/7")" = ab-1 ]
	[ "$(stat -c %a "$CK" "$CK/7" "$CK/7/ab-1")" = $'700\n700\n700' ]
}

@test "a single file is a checkpoint too" {
	printf 'state dict' > "$SRC/model.pt"
	chmod 640 "$SRC/model.pt"
	run --separate-stderr bash -c 'cardbaton-worker send-checkpoint "$1" | cardbaton-worker receive-checkpoint 8 a1' _ "$SRC/model.pt"
	[ "$status" -eq 0 ]
	[ "$(field path <<< "$output")" = "$CK/8/a1/model.pt" ]
	[ "$(field bytes <<< "$output")" = 10 ]
	cmp "$SRC/model.pt" "$CK/8/a1/model.pt"
	[ "$(stat -c %a "$CK/8/a1/model.pt")" = 640 ]
}

@test "send-checkpoint: symbolic links, FIFOs and bad paths are refused, nothing sent" {
	mkdir -p "$SRC/ck/sub" "$T/real/ck"
	printf 'x' > "$SRC/ck/sub/f"
	ln -s /etc/passwd "$SRC/ck/sub/link"
	run --separate-stderr send "$SRC/ck"
	failed 65 cardbaton-worker
	[ "$stderr" = "cardbaton-worker: send-checkpoint: $SRC/ck/sub/link: a symbolic link: not copied (a checkpoint is regular files and directories)" ]
	[ -z "$output" ]
	rm "$SRC/ck/sub/link"
	mkfifo "$SRC/ck/sub/fifo"
	run --separate-stderr send "$SRC/ck"
	failed 65 cardbaton-worker
	[[ $stderr == *"$SRC/ck/sub/fifo: a FIFO: not copied"* ]]
	[ -z "$output" ]
	# PATH itself a link, or reached through one.
	ln -s "$T/real" "$T/via"
	run --separate-stderr send "$T/via/ck"
	failed 65 cardbaton-worker
	[[ $stderr == *"reached through a symbolic link ($T/via)"* ]]
	ln -s "$T/real/ck" "$T/cklink"
	run --separate-stderr send "$T/cklink"
	failed 65 cardbaton-worker
	[[ $stderr == *"$T/cklink: a symbolic link: not copied"* ]]
	# Relative, dotted, missing.
	for p in ck "$SRC/./ck" "$SRC/../src/ck" "$SRC//ck" "$SRC/ck/" /; do
		run --separate-stderr send "$p"
		failed 64 cardbaton-worker
	done
	run --separate-stderr send "$SRC/nothing"
	failed 66 cardbaton-worker
	[[ $stderr == *"$SRC/nothing: No such file or directory" ]]
	run --separate-stderr send --max 10x "$SRC/ck"
	failed 64 cardbaton-worker
}

@test "send-checkpoint --max: a checkpoint over the limit is refused before a byte" {
	mkdir -p "$SRC/ck"
	truncate -s $((3 << 29)) "$SRC/ck/big"
	run --separate-stderr send --max $((1 << 30)) "$SRC/ck"
	failed 65 cardbaton-worker
	[ "$stderr" = "cardbaton-worker: send-checkpoint: $SRC/ck: checkpoint is 1.5 GiB, more than the limit of 1.0 GiB" ]
	[ -z "$output" ]
}

@test "receive-checkpoint: a cut stream is 75 and leaves nothing" {
	tree 4
	send "$SRC/ck" > "$T/stream"
	for n in 0 10 100 $((2 << 20)) $(( $(stat -c %s "$T/stream") - 1 )); do
		run --separate-stderr recv 9 ab-2 < <(head -c "$n" "$T/stream")
		failed 75 cardbaton-worker
		[[ $stderr == *"receive-checkpoint: the stream ended "*"(the sender stopped)" ]]
		nothing_left 9
	done
	run --separate-stderr recv 9 ab-2 < <(head -c $((2 << 20)) "$T/stream")
	[[ $stderr =~ "the stream ended after "[0-9]+" of 4194314 bytes (the sender stopped)" ]]
}

@test "receive-checkpoint: a flipped byte is a checksum mismatch, and nothing is left" {
	tree 4
	send "$SRC/ck" > "$T/stream"
	python3 -c 'import sys
d = bytearray(open(sys.argv[1], "rb").read()); d[len(d) // 2] ^= 0x20
open(sys.argv[2], "wb").write(d)' "$T/stream" "$T/flipped"
	run --separate-stderr recv 9 ab-3 < "$T/flipped"
	failed 65 cardbaton-worker
	[[ $stderr =~ ^"cardbaton-worker: receive-checkpoint: checksum mismatch (sent "[0-9a-f]{64}", received "[0-9a-f]{64}")"$ ]]
	nothing_left 9
}

@test "receive-checkpoint: hostile streams are refused (65) and leave nothing" {
	h='cardbaton-checkpoint 1'
	z=0000000000000000000000000000000000000000000000000000000000000000
	i=0
	for s in \
		"$h 0 2\nd 755 2\nckd 755 5\nck/..end $z\n" \
		"$h 0 2\nd 755 2\nckd 755 6\nck/../xend $z\n" \
		"$h 0 1\nd 755 4\n/etcend $z\n" \
		"$h 0 2\nd 755 2\nckd 755 6\n/ck/aaend $z\n" \
		"$h 0 2\nd 755 2\nckd 755 2\nxxend $z\n" \
		"$h 0 3\nd 755 2\nckd 755 6\nck/a/bd 755 4\nck/aend $z\n" \
		"$h 3 2\nd 755 2\nckf 644 9 4\nck/a123456789end $z\n" \
		"$h 0 2\nd 755 2\nckd 755 5\nck//aend $z\n" \
		"$h 0 2\nd 755 2\nckf 644 0 4\nck/ad 755 4\nck/aend $z\n" \
		"$h 0 3\nd 755 2\nckf 644 0 4\nck/af 644 0 4\nck/aend $z\n" \
		"$h 0 2\nd 4755 2\nckd 755 4\nck/aend $z\n" \
		"$h 0 2\nd 0755 2\nckd 755 4\nck/aend $z\n" \
		"$h 00 1\nd 755 2\nckend $z\n" \
		"$h 0 1\nd 755 0\nend $z\n" \
		"$h 0 1\nd 755 4097\nck" \
		"cardbaton-checkpoint 2 0 1\nd 755 2\nckend $z\n" \
		"tar\n" \
		"$h 0 1\nd  755 2\nckend $z\n" \
		"$h 0 2\nd 755 2\nckend $z\n" \
		"$h 0 1\nd 755 3\nc\000kend $z\n"; do
		i=$((i + 1))
		run --separate-stderr recv 10 "a$i" < <(printf "$s")
		failed 65 cardbaton-worker || { echo "stream $i: $s" >&2; false; }
		[[ $stderr == "cardbaton-worker: receive-checkpoint: bad stream at byte "* ]]
		nothing_left 10
	done
	# A stream made whole and right, then one byte more.
	mkdir -p "$SRC/ck"
	printf 'x' > "$SRC/ck/f"
	send "$SRC/ck" > "$T/stream"
	run --separate-stderr recv 10 abc < "$T/stream"
	[ "$status" -eq 0 ]
	rm -r "$CK/10/abc"
	printf '\n' >> "$T/stream"
	run --separate-stderr recv 10 abc < "$T/stream"
	failed 65 cardbaton-worker
	[[ $stderr == *"bytes after the end line" ]]
	nothing_left 10
	# IDs: a job is a positive number, an attempt the worker's ID.
	for a in "0 a" "01 a" "x a" "../1 a" "1 ../a" "1 A" "1 a.part" "1" "1 a b"; do
		run --separate-stderr recv $a < /dev/null
		failed 64 cardbaton-worker
	done
	[ ! -e "$CK/0" ] && [ ! -e "$CK/1" ]
}

@test "send-checkpoint: a checkpoint that changes during the copy is never ended" {
	mkdir -p "$SRC/ck"
	printf 'a' > "$SRC/ck/a"
	# Appended to (200 MiB: the change comes while it is read), touched
	# (8 MiB are enough for that too), a file added (found by the scan
	# at the end).
	for change in 'echo more >> "$SRC/ck/big"' 'touch -d "1 hour ago" "$SRC/ck/big"' \
		      'printf n > "$SRC/ck/new"'; do
		rm -f "$SRC/ck/big" "$SRC/ck/new"
		case $change in
		*new* | touch*) truncate -s $((8 << 20)) "$SRC/ck/big" ;;
		*) truncate -s $((200 << 20)) "$SRC/ck/big" ;;
		esac
		# The reader takes 1 MiB (the sender is then inside big),
		# changes the checkpoint, then takes the rest, all of it
		# into the receiver.
		run --separate-stderr bash -c '{ rc=0; cardbaton-worker send-checkpoint "$1" 2> "$2/err" || rc=$?
			echo "$rc" > "$2/rc"; } |
			{ dd bs=65536 count=16 iflag=fullblock status=none; eval "$3"; cat; } |
			cardbaton-worker receive-checkpoint 11 ab-4' _ "$SRC/ck" "$T" "$change"
		[ "$(cat "$T/rc")" = 75 ]
		[[ $(cat "$T/err") == "cardbaton-worker: send-checkpoint: checkpoint changed during the copy: $SRC/ck"* ]]
		[ "$(wc -l < "$T/err")" -eq 1 ]
		failed 75 cardbaton-worker
		[[ $stderr == *"receive-checkpoint: the stream ended after "*" bytes (the sender stopped)" ]]
		nothing_left 11
	done
}

@test "receive-checkpoint: SIGTERM mid-stream removes the partial copy" {
	tree
	send "$SRC/ck" > "$T/stream"
	mkfifo "$T/pipe"
	cardbaton-worker receive-checkpoint 12 ab-5 < "$T/pipe" > "$T/out" 2> "$T/err" &
	pid=$!
	# The sender paused: 20 MiB written, then nothing.
	exec 7> "$T/pipe"
	head -c $((20 << 20)) "$T/stream" >&7
	wait_for 10 '[ "$(stat -c %s "$CK/12/ab-5.part/ck/a/b/c/big" 2>/dev/null || echo 0)" -gt 0 ]'
	kill -TERM "$pid"
	rc=0
	wait "$pid" || rc=$?
	exec 7>&-
	[ "$rc" -eq 75 ] || { echo "exit $rc: $(cat "$T/err")"; false; }
	grep -q "receive-checkpoint: stopped by SIGTERM after" "$T/err"
	[ "$(wc -l < "$T/err")" -eq 1 ]
	[ ! -s "$T/out" ]
	nothing_left 12
}

@test "receive-checkpoint: not enough space is 73, and nothing is left" {
	[ "$(id -u)" -eq 0 ] || skip "needs root to mount a tmpfs"
	mkdir -p "$CK"
	mount -t tmpfs -o size=1m,mode=0700 tmpfs "$CK" || skip "tmpfs mount failed"
	MOUNTED=$CK
	mkdir -p "$SRC/ck"
	head -c $((3 << 20)) /dev/urandom > "$SRC/ck/big"
	send "$SRC/ck" > "$T/stream"
	run --separate-stderr recv 13 ab-6 < "$T/stream"
	failed 73 cardbaton-worker
	[[ $stderr =~ "receive-checkpoint: not enough space in $CK/13: the checkpoint needs 0.0 GiB, 0.0 GiB free" ]]
	nothing_left 13
}

@test "receive-checkpoint: an older copy and a stale .part of the attempt are replaced" {
	mkdir -p "$SRC/ck" "$CK/14/ab-7/old" "$CK/14/ab-7.part/ck/junk" "$CK/14/other"
	printf 'new' > "$SRC/ck/f"
	printf 'stale' > "$CK/14/ab-7/old/f"
	printf 'junk' > "$CK/14/ab-7.part/ck/junk/f"
	chmod 500 "$CK/14/ab-7.part/ck/junk"
	# A link in there is removed, never followed.
	mkdir "$T/keep"
	printf 'keep' > "$T/keep/f"
	ln -s "$T/keep" "$CK/14/ab-7/old/link"
	run --separate-stderr bash -c 'cardbaton-worker send-checkpoint "$1" | cardbaton-worker receive-checkpoint 14 ab-7' _ "$SRC/ck"
	[ "$status" -eq 0 ] || { echo "$stderr"; false; }
	[ "$(ls -A "$CK/14" | tr '\n' ' ')" = "ab-7 other " ]
	[ "$(ls -A "$CK/14/ab-7")" = ck ]
	[ "$(cat "$CK/14/ab-7/ck/f")" = new ]
	[ "$(cat "$T/keep/f")" = keep ]
}

@test "drop-checkpoints removes the jobs' copies; a missing one is fine" {
	mkdir -p "$SRC/ck/d"
	printf 'x' > "$SRC/ck/d/f"
	send "$SRC/ck" > "$T/stream"
	recv 15 a1 < "$T/stream" > /dev/null
	recv 15 a2 < "$T/stream" > /dev/null
	recv 16 a1 < "$T/stream" > /dev/null
	mkdir "$CK/15/a3.part"
	chmod 500 "$CK/15/a1/ck/d"
	mkdir "$T/keep"
	ln -s "$T/keep" "$CK/15/link"
	run --separate-stderr cardbaton-worker drop-checkpoints 15 99
	[ "$status" -eq 0 ] || { echo "$stderr"; false; }
	[ ! -e "$CK/15" ] && [ -d "$CK/16/a1/ck" ] && [ -d "$T/keep" ]
	run --separate-stderr cardbaton-worker drop-checkpoints 15
	[ "$status" -eq 0 ]
	for a in "" "x" "../16" "16 ../x" "0"; do
		run --separate-stderr cardbaton-worker drop-checkpoints $a
		failed 64 cardbaton-worker
	done
	[ -d "$CK/16/a1/ck" ]
	run --separate-stderr cardbaton-worker drop-checkpoints 16
	[ "$status" -eq 0 ]
	[ -z "$(ls -A "$CK")" ]
	# No checkpoints/ at all: nothing to do.
	rmdir "$CK"
	run --separate-stderr cardbaton-worker drop-checkpoints 17
	[ "$status" -eq 0 ]
}

@test "receive-checkpoint: killed at its crash points, a copy is whole or only a .part" {
	grep -q CARDBATON_CRASH_AT "$CB_BUILD/cardbaton-worker" || skip "not a crash-point build"
	mkdir -p "$SRC/ck"
	printf 'x' > "$SRC/ck/f"
	send "$SRC/ck" > "$T/stream"
	run env CARDBATON_CRASH_AT="worker receive: copy complete" cardbaton-worker receive-checkpoint 18 a1 < "$T/stream"
	[ "$status" -eq 137 ]
	[ -f "$CK/18/a1.part/ck/f" ] && [ ! -e "$CK/18/a1" ]
	# The next receive of the attempt starts afresh.
	run env CARDBATON_CRASH_AT="worker receive: renamed" cardbaton-worker receive-checkpoint 18 a1 < "$T/stream"
	[ "$status" -eq 137 ]
	[ "$(ls -A "$CK/18")" = a1 ]
	cmp "$SRC/ck/f" "$CK/18/a1/ck/f"
}
