#!/usr/bin/env bats
# lab.bats - a lab's spool (issue 33, SPEC §12, LAYOUT.md §15) with real
# Unix accounts (tests/lib/lab.bash): the daemon (root) makes the spool
# with the lab's modes and refuses one whose modes differ; members find
# the config with no flags ($CARDBATON_CONFIG, /etc/cardbaton/config.yaml
# in a mount namespace of the test's own), one outside the group is told
# why (78), never handed the next config; every job's owner is the
# account that owns its file; hostile members (symlinks, FIFOs,
# hardlinks, writable files, a claimed owner, the sticky bit, records
# written by hand, an outsider, a flood past max_queued, a priority past
# max_priority) are each refused with one clear line, and nothing of
# alice's is lost or changed.  Who may act on whose job, max_gpus, fair
# share and `cardbaton users` are labperm.bats' and the others'.

load ../lib/common
load ../lib/lab

bats_require_minimum_version 1.5.0
test_timeout 60

setup_file() { lab_accounts cbl; }
teardown_file() { lab_accounts_down cbl; }

setup() {
	setup_common
	lab_setup
}

teardown() {
	lab_teardown
	teardown_common
}

# says TEXT: the last stderr is exactly TEXT.
says() {
	[ "$stderr" = "$1" ] || { echo "stderr: $stderr"$'\n'"wanted: $1" >&2; return 1; }
}

# mode PATH: its mode (stat %a) and owner:group.
mode() { stat -c '%a %U:%G' "$1"; }

# setmode OCTAL PATH: exactly that mode (chmod(1) keeps a directory's
# set-group-ID bit unless told otherwise; chmod(2) does not).
setmode() { python3 -c 'import os, sys; os.chmod(sys.argv[2], int(sys.argv[1], 8))' "$1" "$2"; }

# job_file USER NAME TEXT: NAME in USER's home, TEXT in it, USER's, 0640.
job_file() {
	printf '%s' "$3" > "$L/home-$1/$2"
	chown "$1:$(id -g "$1")" "$L/home-$1/$2"
	chmod 0640 "$L/home-$1/$2"
}

# ---- the spool's modes ------------------------------------------------------

@test "the daemon makes a lab spool root:GROUP, tmp/ new/ ctl/ 3770, every other directory 2750, its files 0640 (seq 0660, lock 0600), whatever the umask" {
	for m in 000 077; do
		rm -rf "$LS"
		umask "$m"
		lab_daemon
		umask 022
		# Something in every kind of file: a record, a reject, a status index.
		id=$(umask 077; lsub "$UA" --gpu-count 0 -- true)
		h=$(umask 077; lsub "$UB" --hold -- true)
		job_file "$UB" bad.job 'command: [true]
bogus: 1
'
		lab_drop "$UB" "$L/home-$UB/bad.job"
		wait_for 10 '[ "$(lab_field "$id" state)" = succeeded ] && lab_rec "$h" && [ -n "$(ls "$LS/rejected")" ]'
		stop_daemon
		[ "$(mode "$LS")" = "2750 root:$LAB_GROUP" ]
		for d in tmp new ctl; do
			[ "$(mode "$LS/$d")" = "3770 root:$LAB_GROUP" ] || { echo "umask $m: $d: $(mode "$LS/$d")"; false; }
		done
		for d in incoming queued running paused done rejected nodes hooks drain; do
			[ "$(mode "$LS/$d")" = "2750 root:$LAB_GROUP" ] || { echo "umask $m: $d: $(mode "$LS/$d")"; false; }
		done
		# And any other directory there is (one made later on): 2750.
		bad=$(find "$LS" -mindepth 1 -type d ! -path "$LS/tmp" ! -path "$LS/new" ! -path "$LS/ctl" \
			\( ! -perm 2750 -o ! -user root \) -printf '%m %u %p\n')
		[ -z "$bad" ] || { echo "umask $m: $bad"; false; }
		[ -z "$(find "$LS" ! -group "$LAB_GROUP")" ]
		[ "$(mode "$LS/seq")" = "660 root:$LAB_GROUP" ]
		[ "$(mode "$LS/lock")" = "600 root:$LAB_GROUP" ]
		# Every other file the daemon wrote: 0640, root's (the
		# members' own are in new/ and tmp/, and a rejected one's
		# file, kept as it came, beside its .reason).
		[ -n "$(ls "$LS/done")" ] && [ -n "$(ls "$LS/queued")" ] && [ -e "$LS/seq.lock" ] &&
			[ -e "$LS/id" ] && [ -e "$LS/nodes/local.json" ]
		bad=$(find "$LS" -type f ! -path "$LS/seq" ! -path "$LS/lock" ! -path "$LS/new/*" ! -path "$LS/tmp/*" ! -path "$LS/rejected/*.job" \
			\( ! -perm 0640 -o ! -user root \) -printf '%m %u %p\n')
		[ -z "$bad" ] || { echo "umask $m: $bad"; false; }
		# A member's submission: hers, 0640, whatever her umask.
		n=$(umask 000; lsub "$UA" --hold -- true)
		f=$(ls "$LS"/new/*-"$(printf %010d "$n")".job)
		[ "$(mode "$f")" = "640 $UA:$LAB_GROUP" ]
	done
}

@test "a lab spool whose directories differ in mode, group or owner is refused at start-up: 78, one line naming the path, its mode and the expected one" {
	lab_once
	gid=$(getent group "$LAB_GROUP" | cut -d: -f3)
	uid=$(id -u "$UA")
	# refused CMD...: change something, the daemon (serving or --once)
	# refuses to start with the line given, then it is changed back.
	refused() {
		local why=$1 undo=$2 a
		shift 2
		"$@"
		for a in '' --once; do
			run --separate-stderr timeout "$(scaled 10)" cardbaton-spoold --config "$LC" $a
			failed 78 cardbaton-spoold
			says "cardbaton-spoold: $why"
		done
		eval "$undo"
	}
	refused "$LS/new: mode 2770, expected 3770" 'setmode 3770 "$LS/new"' setmode 2770 "$LS/new"
	refused "$LS/ctl: mode 1770, expected 3770" 'setmode 3770 "$LS/ctl"' setmode 1770 "$LS/ctl"
	refused "$LS/tmp: mode 3777, expected 3770" 'setmode 3770 "$LS/tmp"' setmode 3777 "$LS/tmp"
	refused "$LS/queued: mode 2770, expected 2750" 'setmode 2750 "$LS/queued"' setmode 2770 "$LS/queued"
	refused "$LS/done: mode 2755, expected 2750" 'setmode 2750 "$LS/done"' setmode 2755 "$LS/done"
	refused "$LS/rejected: mode 0750, expected 2750" 'setmode 2750 "$LS/rejected"' setmode 0750 "$LS/rejected"
	refused "$LS: mode 0770, expected 2750" 'setmode 2750 "$LS"' setmode 0770 "$LS"
	refused "$LS/tmp: group gid 0, expected the lab's group (gid $gid)" \
		'chgrp "$LAB_GROUP" "$LS/tmp"' chgrp root "$LS/tmp"
	refused "$LS/new: owned by uid $uid, expected the daemon's account (uid 0)" \
		'chown root "$LS/new"' chown "$UA" "$LS/new"
	# Put right, it serves.
	lab_daemon
}

@test "a lab spool whose hooks/ or drain/ differs in mode is refused at start-up too" {
	lab_once
	for d in hooks drain; do
		setmode 2770 "$LS/$d"
		run --separate-stderr timeout "$(scaled 10)" cardbaton-spoold --config "$LC" --once
		failed 78 cardbaton-spoold
		says "cardbaton-spoold: $LS/$d: mode 2770, expected 2750"
		setmode 2750 "$LS/$d"
	done
}

@test "a lab spool whose lock or seq differs in mode is refused at start-up (a member who could read lock could flock it and keep the daemon down)" {
	lab_once
	setmode 0640 "$LS/lock"
	run --separate-stderr timeout "$(scaled 10)" cardbaton-spoold --config "$LC" --once
	failed 78 cardbaton-spoold
	says "cardbaton-spoold: $LS/lock: mode 0640, expected 0600"
	setmode 0600 "$LS/lock"
	setmode 0666 "$LS/seq"
	run --separate-stderr timeout "$(scaled 10)" cardbaton-spoold --config "$LC" --once
	failed 78 cardbaton-spoold
	says "cardbaton-spoold: $LS/seq: mode 0666, expected 0660"
}

# ---- finding the config -----------------------------------------------------

@test "members find the lab's config with no flags through \$CARDBATON_CONFIG; one it names that is missing is 78, not the next one" {
	lab_daemon
	id=$(as "$UA" CARDBATON_CONFIG="$LC" cardbaton-submit --gpu-count 0 -- true)
	wait_for 10 '[ "$(lab_field "$id" state)" = succeeded ]'
	[ "$(as "$UB" CARDBATON_CONFIG="$LC" cardbaton status --json "$id" | json 'd["jobs"][0]["owner"]')" = "$UA" ]
	h=$(as "$UB" CARDBATON_CONFIG="$LC" cardbaton submit --hold -- true)
	[ "$(as "$UA" CARDBATON_CONFIG="$LC" cardbaton-status --json "$h" | json 'd["jobs"][0]["owner"]')" = "$UB" ]
	run --separate-stderr as "$UA" CARDBATON_CONFIG="$L/none.yaml" cardbaton-status
	failed 78 cardbaton-status
	says "cardbaton-status: $L/none.yaml: No such file or directory"
}

@test "members find the lab's config with no flags through /etc/cardbaton/config.yaml (a mount namespace of the test's own)" {
	[ -e /etc/cardbaton ] && before=$(ls -A /etc/cardbaton) || before=none
	lab_daemon
	mkdir -p "$LE"
	cp -a "$LC" "$LE/config.yaml"
	id=$(lab_in_etc "$UA" cardbaton-submit --gpu-count 0 -- true)
	wait_for 10 '[ "$(lab_field "$id" state)" = succeeded ]'
	[ "$(lab_in_etc "$UB" cardbaton status --json "$id" | json 'd["jobs"][0]["owner"]')" = "$UA" ]
	h=$(lab_in_etc "$UB" cardbaton-submit --hold -- true)
	[ "$(lab_field "$h" owner)" = "$UB" ]
	# $CARDBATON_CONFIG comes before it: a missing one is 78.
	run --separate-stderr lab_in_etc "$UB" CARDBATON_CONFIG="$L/none.yaml" cardbaton-status
	failed 78 cardbaton-status
	says "cardbaton-status: $L/none.yaml: No such file or directory"
	# Nothing of it outside the namespace.
	if [ "$before" = none ]; then [ ! -e /etc/cardbaton ]; else [ "$(ls -A /etc/cardbaton)" = "$before" ]; fi
}

@test "a config found but unreadable (dave, outside the group; 0640 root:GROUP) is 78 naming the file and why, never a fall-through to the next one" {
	mkdir -p "$LE"
	cp -a "$LC" "$LE/config.yaml"
	lab_once
	for tool in status submit cancel gpus; do
		args=(); [ "$tool" = submit ] && args=(-- true); [ "$tool" = cancel ] && args=(1)
		run --separate-stderr as "$UD" CARDBATON_CONFIG="$LC" "cardbaton-$tool" "${args[@]}"
		failed 78 "cardbaton-$tool"
		says "cardbaton-$tool: $LC: Permission denied"
		run --separate-stderr lab_in_etc "$UD" "cardbaton-$tool" "${args[@]}"
		failed 78 "cardbaton-$tool"
		says "cardbaton-$tool: /etc/cardbaton/config.yaml: Permission denied"
	done
	# The embedded default was not used: no spool of dave's own.
	[ -z "$(ls -A "$L/home-$UD")" ]
	# A copy he may read: the spool itself is closed to him.
	cp "$LC" "$L/home-$UD/lab.yaml"
	chown "$UD" "$L/home-$UD/lab.yaml"
	run --separate-stderr as "$UD" cardbaton-status --config "$L/home-$UD/lab.yaml"
	[ "$status" -ne 0 ] && [ "${#stderr_lines[@]}" -eq 1 ]
	[[ $stderr == "cardbaton-status: "*"$LS"* ]]
}

# ---- owners -----------------------------------------------------------------

@test "alice and bob submit to one lab spool: status, status --json and the records show each job's owner (the file's account, never the file's word)" {
	lab_daemon
	a=$(lsub "$UA" --hold -- true)
	b=$(lsub "$UB" --hold -- true)
	c=$(lsub "$UC" --hold -- true)
	r=$(cardbaton-submit --config "$LC" --hold -- true)
	d=$(lsub "$UA" --gpu-count 0 -- true)
	wait_for 10 'lab_rec "$a" && lab_rec "$b" && lab_rec "$c" && lab_rec "$r" && [ "$(lab_field "$d" state)" = succeeded ]'
	[ "$(lst "$UA" --json "$a" | json 'd["jobs"][0]["owner"]')" = "$UA" ]
	[ "$(lst "$UA" --json "$b" | json 'd["jobs"][0]["owner"]')" = "$UB" ]
	[ "$(lst "$UB" --json "$c" | json 'd["jobs"][0]["owner"]')" = "$UC" ]
	[ "$(lst "$UB" --json "$r" | json 'd["jobs"][0]["owner"]')" = root ]
	[ "$(lst "$UB" --json "$d" | json 'd["jobs"][0]["owner"]')" = "$UA" ]
	# The whole queue, as a member sees it: every job its owner.
	[ "$(lst "$UB" --json | json '" ".join("%s=%s" % (j["id"], j["owner"]) for j in d["jobs"])')" = \
		"$a=$UA $b=$UB $c=$UC $r=root" ]
	# The records: owner and owner_uid.
	for x in "$a:$UA" "$b:$UB" "$c:$UC" "$d:$UA" "$r:root"; do
		f=$(lab_rec "${x%%:*}")
		[ "$(json 'd["owner"], d["owner_uid"]' < "$f")" = "('${x#*:}', $(id -u "${x#*:}"))" ]
	done
	# The table: OWNER after STATE.
	run -0 lst "$UA"
	[[ ${lines[0]} == "ID  STATE  OWNER  "* ]] || [[ ${lines[0]} =~ ^ID\ +STATE\ +OWNER\  ]]
	[[ $(printf '%s\n' "${lines[@]}" | grep -E "^ *$b ") =~ ^\ *$b\ +queued\ +$UB\  ]]
	# A job still in new/ (no daemon) shows its file's owner too.
	stop_daemon
	n=$(lsub "$UB" --hold -- true)
	[ -n "$(ls "$LS/new")" ]
	[ "$(lst "$UA" --json "$n" | json 'd["jobs"][0]["owner"]')" = "$UB" ]
}

@test "a job file claiming owner: alice is refused: submit 65 naming the key, a drop rejected with the same line; nothing queued as hers" {
	lab_once
	job_file "$UB" claim.job "command: [true]
owner: $UA
"
	run --separate-stderr as "$UB" cardbaton-submit --config "$LC" --job claim.job
	failed 65 cardbaton-submit
	says "cardbaton-submit: claim.job:2: owner: not a job field: a job's owner is the account that owns its file"
	lab_drop "$UB" "$L/home-$UB/claim.job"
	lab_once
	lab_rejected claim.job "claim.job:2: owner: not a job field: a job's owner is the account that owns its file"
	[ -z "$(ls -A "$LS/queued")" ] && [ -z "$(ls -A "$LS/new")" ]
	[ "$(lst "$UA" --json | json 'len(d["jobs"])')" = 0 ]
}

# ---- hostile members --------------------------------------------------------

@test "hostile members: a symlink and a FIFO dropped into new/ are rejected with one line, nothing followed or blocked on; alice's job is untouched" {
	lab_once
	a=$(lsub "$UA" --hold -- sh -c 'echo alice')
	lab_once
	before=$(lab_sum "$a")
	# alice's private job file, and her record: bob points at both.
	job_file "$UA" secret.job 'command: [echo, secret]
'
	chmod 0600 "$L/home-$UA/secret.job"
	as "$UB" ln -s "$L/home-$UA/secret.job" "$LS/new/link.job"
	as "$UB" ln -s "$(lab_rec "$a")" "$LS/new/rec.job"
	as "$UB" mkfifo "$LS/new/fifo.job"
	timeout "$(scaled 10)" cardbaton-spoold --config "$LC" --once >>"$T/daemon.log" 2>&1
	lab_rejected link.job "*is a symbolic link*"
	lab_rejected rec.job "*is a symbolic link*"
	lab_rejected fifo.job "*not a regular file*"
	# Nothing of what they point at was read into the spool.
	[ -z "$(grep -rl secret "$LS")" ]
	[ "$(lab_sum "$a")" = "$before" ]
	[ "$(ls "$LS/queued" | wc -l)" -eq 1 ]
	[ "$(lab_field "$a" owner)" = "$UA" ]
}

@test "hostile members: a hardlink into new/ (bob's own file) is rejected; bob cannot hardlink alice's file at all (the kernel) or it is rejected (its links)" {
	lab_once
	job_file "$UB" mine.job 'hold: true
command: [true]
'
	as "$UB" ln "$L/home-$UB/mine.job" "$LS/new/hard.job"
	# alice's file in new/, not accepted yet: bob links it under a name of his.
	a=$(lsub "$UA" --hold -- sh -c 'echo alice')
	f=$(ls "$LS"/new/*-"$(printf %010d "$a")".job)
	sum=$(sha256sum < "$f")
	run --separate-stderr as "$UB" ln "$f" "$LS/new/stolen.job"
	if [ "$(sysctl -n fs.protected_hardlinks)" = 1 ]; then
		[ "$status" -ne 0 ] && [[ $stderr == *"Operation not permitted"* ]]
	fi
	linked=$status
	lab_once
	lab_rejected hard.job "*link*"
	if [ "$linked" -eq 0 ]; then
		lab_rejected stolen.job "*link*"
	fi
	# alice's own was accepted as hers, as she wrote it (the kernel
	# kept bob out: one link).
	if [ "$linked" -ne 0 ]; then
		[ "$(lab_field "$a" owner)" = "$UA" ]
		[ "$(lab_field "$a" state)" = queued ]
	fi
	[ "$(ls "$LS/queued" | wc -l)" -eq "$(( linked ? 1 : 0 ))" ]
	[ "$(sha256sum < "$L/home-$UB/mine.job")" = "$(printf 'hold: true\ncommand: [true]\n' | sha256sum)" ]
	: "$sum"
}

@test "hostile members: a file writable by the group or by others dropped into new/ is rejected with one line" {
	lab_once
	job_file "$UB" w.job 'hold: true
command: [true]
'
	for m in 0660 0620 0646 0642 0666 0670; do
		MODE=$m lab_drop "$UB" "$L/home-$UB/w.job" "w$m.job"
	done
	# A read-only one (0400, 0600, 0640, 0644) is fine: only the writers matter.
	for m in 0400 0600 0640 0644; do
		MODE=$m lab_drop "$UB" "$L/home-$UB/w.job" "ok$m.job"
	done
	lab_once
	for m in 0660 0620 0646 0642 0666 0670; do
		lab_rejected "w$m.job" "*writable*"
	done
	[ "$(ls "$LS/queued" | wc -l)" -eq 4 ]
	[ "$(lst "$UA" --json | json '" ".join(sorted(set(j["owner"] for j in d["jobs"])))')" = "$UB" ]
}

@test "the sticky bit: bob cannot rename, remove or replace alice's file in new/ (EPERM) nor write into it (EACCES); it is accepted as hers, unchanged" {
	lab_once
	a=$(lsub "$UA" --hold -- sh -c 'echo alice')
	f=$(ls "$LS"/new/*-"$(printf %010d "$a")".job)
	sum=$(sha256sum < "$f")
	job_file "$UB" over.job 'command: [sh, -c, echo bob]
'
	as "$UB" cp "$L/home-$UB/over.job" "$LS/tmp/over.job"
	for cmd in "mv '$f' '$LS/new/mine.job'" "mv '$f' '$LS/tmp/x.job'" "rm -f '$f'" "mv '$LS/tmp/over.job' '$f'"; do
		run --separate-stderr as "$UB" sh -c "LC_ALL=C $cmd"
		[ "$status" -ne 0 ] && [[ $stderr == *"Operation not permitted"* ]] ||
			{ echo "$cmd: $status $stderr"; false; }
	done
	run --separate-stderr as "$UB" sh -c 'echo "command: [true]" >> "$1"' sh "$f"
	[ "$status" -ne 0 ] && [[ $stderr == *"Permission denied"* ]]
	[ "$(sha256sum < "$f")" = "$sum" ]
	lab_once
	[ "$(lab_field "$a" owner)" = "$UA" ]
	[ "$(lab_field "$a" command)" = "['sh', '-c', 'echo alice']" ] ||
		[ "$(lab_field "$a" command)" = '["sh", "-c", "echo alice"]' ]
	[ "$(ls "$LS/queued" | wc -l)" -eq 1 ]
}

@test "bob cannot write a record into queued/ (or any directory but tmp/ new/ ctl/), nor change or remove alice's record (EACCES); hers stays as it was" {
	lab_once
	a=$(lsub "$UA" --hold -- sh -c 'echo alice')
	lab_once
	r=$(lab_rec "$a")
	before=$(lab_sum "$a")
	for d in queued running paused done rejected incoming nodes hooks drain; do
		run --separate-stderr as "$UB" sh -c 'echo "{}" > "$1"' sh "$LS/$d/099999990-0000000099.job"
		[ "$status" -ne 0 ] && [[ $stderr == *"Permission denied"* ]] || { echo "$d: $status $stderr"; false; }
	done
	for cmd in 'echo "{}" >> "$1"' 'echo "{}" > "$1"' 'rm -f "$1"' 'mv "$1" "$1.x"' 'ln -s /dev/null "$1.job"'; do
		run --separate-stderr as "$UB" sh -c "$cmd" sh "$r"
		[ "$status" -ne 0 ] && [[ $stderr == *"Permission denied"* ]] || { echo "$cmd: $status $stderr"; false; }
	done
	# The spool's own files (not seq, the members' counter).
	for x in id lock queued.idx metrics.prom; do
		[ -e "$LS/$x" ] || continue
		run --separate-stderr as "$UB" sh -c 'echo x >> "$1"' sh "$LS/$x"
		[ "$status" -ne 0 ] || { echo "$x: written"; false; }
	done
	[ "$(lab_sum "$a")" = "$before" ]
	lab_daemon
	[ "$(lab_field "$a" owner)" = "$UA" ] && [ "$(lab_field "$a" state)" = queued ]
	[ "$(lab_sum "$a")" = "$before" ]
}

@test "dave, outside the group, cannot even reach new/ (EACCES); a file of his (or of an account with no name) that root plants there is rejected, naming why; carol's and root's are accepted" {
	lab_once
	run --separate-stderr as "$UD" sh -c 'echo "command: [true]" > "$1"' sh "$LS/new/dave.job"
	[ "$status" -ne 0 ] && [[ $stderr == *"Permission denied"* ]]
	run --separate-stderr as "$UD" ls "$LS"
	[ "$status" -ne 0 ] && [[ $stderr == *"Permission denied"* ]]
	nobody=$(( 3999000 + RANDOM % 1000 ))
	not getent passwd "$nobody" >/dev/null
	for x in "dave.job:$UD" "ghost.job:$nobody" "carol.job:$UC" "root.job:root"; do
		printf 'hold: true\ncommand: [true]\n' > "$LS/tmp/${x%%:*}"
		chown "${x#*:}" "$LS/tmp/${x%%:*}"
		chmod 0640 "$LS/tmp/${x%%:*}"
		mv "$LS/tmp/${x%%:*}" "$LS/new/${x%%:*}"
	done
	lab_once
	lab_rejected dave.job "*$UD*member*"
	lab_rejected ghost.job "*$nobody*member*"
	[ "$(ls "$LS/queued" | wc -l)" -eq 2 ]
	[ "$(lst "$UA" --json | json '" ".join(sorted(j["owner"] for j in d["jobs"]))')" = "$UC root" ]
}

# ---- limits via submit and drops ----------------------------------------------

# queue3: the config gives alice max_queued 3 (everyone else 100); the
# daemon serves; she has three held jobs ${j[1..3]}, their records
# summed in $sums.
queue3() {
	lab_config "  users:" "    default: {max_queued: 100}" "    $UA: {max_queued: 3}"
	lab_daemon
	for i in 1 2 3; do
		j[i]=$(lsub "$UA" --hold -- sh -c "echo alice $i")
	done
	wait_for 10 'lab_rec "${j[1]}" && lab_rec "${j[2]}" && lab_rec "${j[3]}"'
	sums=$(for i in 1 2 3; do lab_sum "${j[i]}"; done)
}

@test "max_queued: submit beyond it exits 75 naming the limit, an array all or none; another user's is his own; a job ended makes room" {
	queue3
	run --separate-stderr lsub "$UA" --hold -- true
	failed 75 cardbaton-submit
	[[ $stderr == *max_queued* && $stderr == *3* ]]
	# An array that would pass it: none of it.
	run --separate-stderr lsub "$UA" --hold --array 0-1 -- true
	failed 75 cardbaton-submit
	[[ $stderr == *max_queued* ]]
	[ "$(lst "$UA" --json | json 'len(d["jobs"])')" -eq 3 ]
	# bob's limit (default's) is his.
	run -0 lsub "$UB" --hold --array 0-9 -- true
	[ "$(for i in 1 2 3; do lab_sum "${j[i]}"; done)" = "$sums" ]
	# One ended: room for one more, and no more.
	ltool "$UA" cancel "${j[1]}"
	wait_for 10 '[ "$(lab_field "${j[1]}" state)" = cancelled ]'
	run -0 lsub "$UA" --hold -- true
	run --separate-stderr lsub "$UA" --hold -- true
	failed 75 cardbaton-submit
}

@test "max_queued: a flood of drops beyond it is rejected, each with one line in submit's words; alice's jobs unchanged" {
	queue3
	run --separate-stderr lsub "$UA" --hold -- true
	sub_rc=$status limit=${stderr#cardbaton-submit: }
	job_file "$UA" f.job 'hold: true
command: [true]
'
	for i in 1 2 3 4 5 6 7 8; do lab_drop "$UA" "$L/home-$UA/f.job" "flood$i.job"; done
	wait_for 10 '[ "$(cat "$LS"/rejected/*.reason | grep -c "^original name: flood")" -eq 8 ]'
	for i in 1 2 3 4 5 6 7 8; do
		lab_rejected "flood$i.job" "*max_queued*3*"
		# The same words as submit's (where submit says them).
		[ "$sub_rc" -ne 75 ] || [[ $(lab_reason "flood$i.job") == *"$limit"* ]] ||
			{ echo "flood$i.job: '$(lab_reason "flood$i.job")', submit: '$limit'"; false; }
	done
	[ "$(lst "$UA" --json | json 'len(d["jobs"])')" -eq 3 ]
	[ "$(for i in 1 2 3; do lab_sum "${j[i]}"; done)" = "$sums" ]
	# bob's drops are his own count.
	job_file "$UB" b.job 'hold: true
command: [true]
'
	lab_drop "$UB" "$L/home-$UB/b.job"
	wait_for 10 '[ "$(lst "$UB" --json | json "len(d[\"jobs\"])")" -eq 4 ]'
}

@test "max_queued while the daemon is down: submit counts the jobs waiting in new/; one dropped past it is rejected when the daemon takes them" {
	lab_config "  users:" "    default: {max_queued: 2}"
	lab_once
	run -0 lsub "$UA" --hold -- true
	run -0 lsub "$UA" --hold -- true
	job_file "$UA" f.job 'hold: true
command: [true]
'
	lab_drop "$UA" "$L/home-$UA/f.job" flood.job
	lab_once
	lab_rejected flood.job "*max_queued*2*"
	[ "$(ls "$LS/queued" | wc -l)" -eq 2 ]
	run --separate-stderr lsub "$UA" --hold -- true
	failed 75 cardbaton-submit
	[[ $stderr == *max_queued* ]]
	[ -z "$(ls -A "$LS/new")" ]
}

@test "max_queued: the daemon counts a batch of drops all or none per file (an array past the limit is rejected whole)" {
	lab_config "  users:" "    default: {max_queued: 3}"
	lab_once
	job_file "$UA" arr.job 'hold: true
array: 0-3
command: [true]
'
	job_file "$UA" two.job 'hold: true
array: 0-1
command: [true]
'
	lab_drop "$UA" "$L/home-$UA/arr.job"
	lab_once
	lab_rejected arr.job "*max_queued*3*"
	[ -z "$(ls -A "$LS/queued")" ]
	lab_drop "$UA" "$L/home-$UA/two.job"
	lab_once
	[ "$(ls "$LS/queued" | wc -l)" -eq 2 ]
}

@test "max_priority: submit --priority (or a job file's priority) above the user's exits 77 naming the limit; at it is accepted; a named user inherits default's other limits" {
	lab_config "  users:" "    default: {max_priority: 10, max_queued: 4}" "    $UA: {max_priority: 5}"
	lab_once
	run --separate-stderr lsub "$UA" --hold --priority 6 -- true
	failed 77 cardbaton-submit
	[[ $stderr == *max_priority* && $stderr == *5* ]]
	job_file "$UA" p6.job 'priority: 6
hold: true
command: [true]
'
	run --separate-stderr as "$UA" cardbaton-submit --config "$LC" --job p6.job
	failed 77 cardbaton-submit
	[[ $stderr == *max_priority* ]]
	run -0 lsub "$UA" --hold --priority 5 -- true
	run --separate-stderr lsub "$UB" --hold --priority 11 -- true
	failed 77 cardbaton-submit
	[[ $stderr == *max_priority* && $stderr == *10* ]]
	run -0 lsub "$UB" --hold --priority 10 -- true
	# alice's max_queued is default's 4.
	run -0 lsub "$UA" --hold --array 0-2 -- true
	run --separate-stderr lsub "$UA" --hold -- true
	failed 75 cardbaton-submit
}

@test "max_priority: a drop above the user's is rejected naming the limit; one at it is accepted" {
	lab_config "  users:" "    default: {max_priority: 10}" "    $UA: {max_priority: 5}"
	lab_once
	for p in 6 5; do
		job_file "$UA" "p$p.job" "priority: $p
hold: true
command: [true]
"
		lab_drop "$UA" "$L/home-$UA/p$p.job"
	done
	job_file "$UB" p10.job 'priority: 10
hold: true
command: [true]
'
	lab_drop "$UB" "$L/home-$UB/p10.job"
	lab_once
	lab_rejected p6.job "*max_priority*5*"
	[ "$(ls "$LS/queued" | wc -l)" -eq 2 ]
	[ "$(lst "$UA" --json | json '" ".join(sorted("%s:%s" % (j["owner"], j["priority"]) for j in d["jobs"]))')" = "$UB:10 $UA:5" ] ||
		[ "$(lst "$UA" --json | json '" ".join(sorted("%s:%s" % (j["owner"], j["priority"]) for j in d["jobs"]))')" = "$UA:5 $UB:10" ]
}
