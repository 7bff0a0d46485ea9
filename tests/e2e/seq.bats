#!/usr/bin/env bats
# seq.bats - the job ID counter (LAYOUT.md §2, issue 16 item 3): a
# submit makes two flushes, the job file's and new/'s; SPOOL/seq is
# replaced without a sync while the machine stays up (its boot ID is in
# the file), and a seq written in another boot -- which a crash of the
# machine may have left behind -- is never trusted alone: the next ID is
# above every job ID on disk.

load ../lib/common

bats_require_minimum_version 1.5.0
test_timeout 60

setup() {
	setup_common
	C=$T/config.yaml
	BOOT=$(cat /proc/sys/kernel/random/boot_id)
}

teardown() {
	teardown_common
}

# traced TRACE CMD...: CMD under strace -e trace=TRACE, into
# $T/strace.out (LeakSanitizer cannot run under ptrace: off for it).
traced() {
	local what=$1
	shift
	ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 \
		strace -f -qq -e trace="$what" -o "$T/strace.out" "$@" >/dev/null
}

# syncs CMD...: how many fsync, fdatasync, sync_file_range or syncfs
# calls CMD makes (strace), on stdout.
syncs() {
	traced fsync,fdatasync,syncfs,sync_file_range,sync "$@"
	grep -cE '^[0-9]+ +(fsync|fdatasync|syncfs|sync_file_range|sync)\(' "$T/strace.out" || true
}

@test "a submit makes two flushes (the job file, new/); seq carries this boot" {
	command -v strace >/dev/null || { echo "strace missing: tests/install-deps installs it" >&2; false; }
	sub -- true >/dev/null          # the spool made, seq written the first time
	[ "$(cat "$T/spool/seq")" = "0000000001 $BOOT" ]
	ino=$(stat -c %i "$T/spool/seq")
	[ "$(syncs cardbaton-submit --config "$C" -- true)" -eq 2 ]
	[ "$(cat "$T/spool/seq")" = "0000000002 $BOOT" ]
	# An array of 5: still one seq update and two flushes.
	[ "$(syncs cardbaton-submit --config "$C" --array 1-5 -- echo '{index}')" -eq 2 ]
	[ "$(cat "$T/spool/seq")" = "0000000007 $BOOT" ]
	# Rewritten in place: the same inode, no rename (ext4 flushes the data
	# of a file renamed over another), no new file.
	[ "$(stat -c %i "$T/spool/seq")" = "$ino" ]
	traced rename,renameat,renameat2 cardbaton-submit --config "$C" -- true
	[ "$(grep -c rename "$T/strace.out")" -eq 1 ]     # the job file's, into new/
}

@test "a seq of another boot, or of an older CardBaton, is raised to the highest job ID on disk first" {
	start_daemon
	for i in 1 2 3; do sub --gpu-count 0 -- true >/dev/null; done
	last=$(sub --gpu-count 0 -- true)
	wait_for 10 'final "$last"'
	stop_daemon
	held=$(sub --hold --gpu-count 0 -- true)               # in new/, no daemon
	arr=$(sub --hold --array 1-3 --gpu-count 0 -- true | tail -1)   # a block in new/
	[ "$arr" = $((held + 3)) ]
	# A crash of the machine left a seq behind what was submitted.
	echo "0000000002 00000000-0000-0000-0000-000000000000" > "$T/spool/seq"
	[ "$(sub -- true)" = $((arr + 1)) ]
	[ "$(cat "$T/spool/seq")" = "$(printf %010d $((arr + 1))) $BOOT" ]
	# An older CardBaton's seq (a number alone) was synced: trusted, and
	# from then on this boot's record.
	echo $((arr + 5)) > "$T/spool/seq"
	[ "$(sub -- true)" = $((arr + 6)) ]
	[ "$(cat "$T/spool/seq")" = "$(printf %010d $((arr + 6))) $BOOT" ]
	# One that says it was synced ("-", where the boot was not known) too.
	echo "$(printf %010d $((arr + 9))) -" > "$T/spool/seq"
	[ "$(sub -- true)" = $((arr + 10)) ]
	# The IDs in done/ alone: the daemon takes them all.
	start_daemon
	wait_for 10 '[ -z "$(ls "$T/spool/new")" ]'
	stop_daemon
	echo "0 x" > "$T/spool/seq"
	[ "$(sub -- true)" = $((arr + 11)) ]
	# Within this boot the file is the truth: no directory is listed
	# (but after a seq of another boot, they are).
	traced getdents64,getdents cardbaton-submit --config "$C" -- true
	[ ! -s "$T/strace.out" ]
	echo "1 x" > "$T/spool/seq"
	traced getdents64,getdents cardbaton-submit --config "$C" -- true
	[ -s "$T/strace.out" ]
}

# accepted_once: the daemon takes what is in new/ once (--once) and exits.
accepted_once() { cardbaton-spoold --config "$C" --once > "$T/once.log" 2>&1; }

@test "an accept that hands out no number leaves a trusted seq as it is: not rewritten, not synced (a boot it cannot know too)" {
	sub --hold -- true >/dev/null        # in new/ with its own ID, 1
	echo "0000000005 -" > "$T/spool/seq"         # synced, and above it
	ino=$(stat -c %i "$T/spool/seq")
	accepted_once
	[ -z "$(ls "$T/spool/new")" ]
	[ "$(cat "$T/spool/seq")" = "0000000005 -" ]
	[ "$(stat -c %i "$T/spool/seq")" = "$ino" ]
	# Where /proc's boot ID cannot be read (every write synced, "-"):
	# the same, at each such accept.
	unshare -m sh -c 'mount --bind /dev/null /proc/sys/kernel/random/boot_id' 2>/dev/null ||
		skip "needs a mount namespace (root, unshare(1)) to hide the boot ID"
	sub --hold -- true >/dev/null
	[ "$(cat "$T/spool/seq")" = "0000000006 $BOOT" ]
	echo "0000000009 -" > "$T/spool/seq"
	ino=$(stat -c %i "$T/spool/seq")
	unshare -m sh -c 'mount --bind /dev/null /proc/sys/kernel/random/boot_id &&
		exec cardbaton-spoold --config "$1" --once' sh "$C" > "$T/once.log" 2>&1
	[ -z "$(ls "$T/spool/new")" ]
	[ "$(cat "$T/spool/seq")" = "0000000009 -" ]
	[ "$(stat -c %i "$T/spool/seq")" = "$ino" ]
}

@test "a seq that is not one: garbage is 78, a symlink, directory or FIFO is named and never followed or blocked on; nothing is queued" {
	sub -- true >/dev/null
	n=$(ls "$T/spool/new" | wc -l)
	for bad in "x $BOOT" "12 $BOOT extra" "" "12"; do
		printf '%s' "$bad" > "$T/spool/seq"
		run --separate-stderr sub -- true
		failed 78 cardbaton-submit
		[[ $stderr == *"/seq: not a sequence number"* ]]
	done
	rm "$T/spool/seq"
	echo "0000000099 -" > "$T/target"
	ln -s "$T/target" "$T/spool/seq"
	run --separate-stderr sub -- true
	failed 71 cardbaton-submit
	[[ $stderr == *"/seq: is a symbolic link (not followed)"* ]]
	[ "$(cat "$T/target")" = "0000000099 -" ]
	rm "$T/spool/seq"
	mkfifo "$T/spool/seq"
	run --separate-stderr timeout "$(scaled 10)" cardbaton-submit --config "$C" -- true
	failed 71 cardbaton-submit
	[[ $stderr == *"/seq: is not a regular file"* ]]
	rm "$T/spool/seq"
	mkdir "$T/spool/seq"
	run --separate-stderr sub -- true
	failed 71 cardbaton-submit
	[[ $stderr == *"/seq: is a directory"* ]]
	[ "$(ls "$T/spool/new" | wc -l)" -eq "$n" ]
}
