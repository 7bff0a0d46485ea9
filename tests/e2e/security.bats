#!/usr/bin/env bats
# security.bats - SPEC §10 "security" and README "Trust model":
#
#   - the spool and the node state directory are private to the user
#     (directories 0700, files 0600), whatever the umask;
#   - a spool can be shared with a group the documented way (LAYOUT.md
#     §1: SPOOL made set-group-ID), tested with real second accounts;
#   - nothing is followed through a symbolic link: the spool's state
#     directories, its lock, seq, seq.lock and id, the node state
#     directory's leases/ and attempts/ (symlinks and FIFOs *inside*
#     the spool directories are tests/e2e/hostile.bats' catalogue);
#   - arguments, environment, cwd and name reach the job byte for byte,
#     on the local node and through ssh (whose remote side is a shell);
#   - bootstrap keeps every authorized_keys entry byte for byte, is
#     idempotent, and a kill -9 mid-write leaves the old file whole;
#     bootstraps at once each add their key (flock(1), or a mkdir lock);
#   - a second controller on the same remote_state_dir never gets a
#     card whose lease the first one's job holds.

load ../lib/common
load ../lib/sshhosts

bats_require_minimum_version 1.5.0
test_timeout 60

setup_file() {
	if hosts_available; then hosts_up 1; fi
}

teardown_file() {
	hosts_down
}

setup() {
	setup_common
	C=$T/config.yaml
	S=$T/spool
}

teardown() {
	if [ -n "${D2_PID:-}" ]; then kill -TERM "$D2_PID" 2>/dev/null; wait "$D2_PID" 2>/dev/null; fi
	teardown_common
	users_down
	if [ -n "${HOSTS_UID:-}" ]; then
		local h p
		h=$(host_home 1)
		for p in $(find /proc/[0-9]*/fd -maxdepth 1 -lname "$h/*" 2>/dev/null | cut -d/ -f3 | sort -u); do
			kill -KILL "$p" 2>/dev/null || true
		done
		rm -f "$(host_bin_dir 1)/cat" "$(host_bin_dir 1)/mv"
		rm -rf "${h:?}/.local" "${h:?}/.ssh" "${h:?}"/st* "${h:?}/stalled"
		case ${DASH_DIR:-} in */-cbsec-"$HOSTS_UID"-dash) rm -rf "$DASH_DIR" ;; esac
	fi
}

needs_hosts() { [ -n "${HOSTS_UID:-}" ] || skip "needs root, ip netns and sshd"; }

sub() { cardbaton-submit --config "$C" "$@"; }
st() { cardbaton-status --config "$C" "$@"; }
state() { st --json "$1" | json 'd["jobs"][0]["state"]'; }
final() {
	case "$(state "$1")" in succeeded|failed|cancelled|lost) return 0 ;; esac
	return 1
}

# one_line CODE PROG: the last `run --separate-stderr` exited CODE (or,
# with CODE "!0", anything but 0) with exactly one line on stderr, from PROG.
one_line() {
	if { [ "$1" = '!0' ] && [ "$status" -eq 0 ]; } || { [ "$1" != '!0' ] && [ "$status" -ne "$1" ]; }; then
		echo "exit $status, expected $1; stderr: $stderr" >&2
		return 1
	fi
	[ "${#stderr_lines[@]}" -eq 1 ] && [[ ${stderr_lines[0]} == "$2: "* ]] ||
		{ echo "stderr: $stderr" >&2; return 1; }
}

# modes_ok DIR DMODE FMODE: every directory under DIR (DIR too) has
# exactly mode DMODE, everything else exactly FMODE.
modes_ok() {
	local bad
	bad=$(find "$1" \( -type d ! -perm "$2" -printf '%m %p\n' \) -o \( ! -type d ! -perm "$3" -printf '%m %p\n' \))
	[ -z "$bad" ] || { echo "wrong modes (want $2/$3): $bad" >&2; return 1; }
}

# ---- private by default -----------------------------------------------------

@test "spool and node state directory: directories 0700, files 0600, whatever the umask" {
	for m in 000 022 0277; do
		umask "$m"
		d=$T/u$m
		# Parents made on the way are private too.
		printf 'spool: %s/a/b/spool\nremote_state_dir: %s/state/x\nnodes:\n  local:\n    local: true\n' \
			"$d" "$d" > "$C"
		start_daemon
		id=$(sub --gpus 1 -- sh -c 'echo out')
		q=$(sub --gpus 2 --priority 3 -- true)
		(umask 077 && echo 'command: [' > "$d/a/b/spool/tmp/bad") && mv "$d/a/b/spool/tmp/bad" "$d/a/b/spool/new/bad.job"
		wait_for 20 final "$id"
		wait_for 20 final "$q"
		wait_for 20 '[ -n "$(ls "$d/a/b/spool/rejected")" ]'
		[ "$(state "$id")" = succeeded ]
		stop_daemon
		umask 022
		modes_ok "$d/a" 700 600
		modes_ok "$d/state" 700 600
		# What there is to check: records, the reject and its reason,
		# node status, lock files; attempts, leases, logs, specs.
		[ -n "$(ls "$d/a/b/spool/done")" ] && [ -e "$d/a/b/spool/lock" ] &&
			[ -e "$d/a/b/spool/nodes/local.json" ] && [ -e "$d/a/b/spool/seq.lock" ]
		[ "$(ls "$d/a/b/spool/rejected" | wc -l)" -eq 2 ]
		[ -e "$d/state/x/leases/GPU-11111111-1111-1111-1111-111111111111" ]
		[ "$(find "$d/state/x/attempts" -name log | wc -l)" -eq 2 ]
	done
}

# ---- a spool shared with a group --------------------------------------------

# users_up: a group $G, accounts $UA (runs the daemon) and $UB in it,
# and $UC outside it; $D, a directory all of them can traverse, with
# their homes, a fake GPU set and a config.  users_down undoes it.
users_up() {
	[ "$(id -u)" -eq 0 ] || skip "needs root"
	command -v useradd >/dev/null && command -v setpriv >/dev/null || skip "needs useradd and setpriv"
	local s u
	s=$(printf '%04x%04x' "$$" "$RANDOM")
	G=cbsg$s UA=cbsa$s UB=cbsb$s UC=cbsc$s
	echo "$G $UA $UB $UC" > "$T/users"
	groupadd "$G"
	useradd -M -U -G "$G" -s /bin/sh "$UA"
	useradd -M -U -G "$G" -s /bin/sh "$UB"
	useradd -M -U -s /bin/sh "$UC"
	D=$(mktemp -d /tmp/cbsec.XXXXXX)
	echo "$D" >> "$T/users"
	chmod 0711 "$D"
	for u in "$UA" "$UB" "$UC"; do install -d -m 0700 -o "$u" "$D/home-$u"; done
	mkdir -p "$D/gpus/bin"
	ln -s "$CB_TOP/tests/fake-nvidia-smi" "$D/gpus/bin/nvidia-smi"
	cp "$FAKE_GPU_DIR/gpus.csv" "$D/gpus/gpus.csv"
	: > "$D/gpus/apps.csv"
	chmod -R go+rX "$D/gpus"
	install -d -m 0755 -o "$UA" "$D/a" "$D/out"
	printf 'spool: %s/a/spool\nnodes:\n  local:\n    local: true\n' "$D" > "$D/config.yaml"
	chmod 0644 "$D/config.yaml"
}

users_down() {
	local g a b c dir p uid
	[ -f "$T/users" ] || return 0
	{ read -r g a b c; read -r dir; } < "$T/users"
	for u in "$a" "$b" "$c"; do
		uid=$(id -u "$u" 2>/dev/null) || continue
		for p in $(ps -o pid= -U "$uid"); do kill -KILL "$p" 2>/dev/null; done
	done
	for u in "$a" "$b" "$c"; do userdel -f "$u" 2>/dev/null; done
	groupdel "$g" 2>/dev/null
	case $dir in /tmp/cbsec.*) rm -rf "$dir" ;; esac
	rm -f "$T/users"
	return 0
}

# as USER CMD...: run CMD as USER (its groups too), with a clean
# environment: its own HOME, the binaries under test, the fake GPUs.
# as_argv USER: the same command prefix in $AS, for a background job.
as_argv() {
	AS=(setpriv --reuid="$1" --regid="$(id -g "$1")" --init-groups
		env -i HOME="$D/home-$1" PATH="$CB_BUILD:$D/gpus/bin:/usr/bin:/bin"
		FAKE_GPU_DIR="$D/gpus" CARDBATON_WORKER="$CB_BUILD/cardbaton-worker")
}
as() {
	local AS
	as_argv "$1"
	shift
	"${AS[@]}" "$@"
}

@test "a group-shared spool (made set-group-ID): members submit, watch and cancel, others see nothing" {
	users_up
	# LAYOUT.md §1, done by the spool's owner.
	as "$UA" sh -c 'mkdir "$1" && chgrp "$2" "$1" && chmod 2770 "$1"' sh "$D/a/spool" "$G"
	# Whatever the umask of anyone involved.
	umask 077
	as_argv "$UA"
	"${AS[@]}" cardbaton-spoold --config "$D/config.yaml" >> "$T/daemon.log" 2>&1 &
	DAEMON_PID=$!
	wait_for 10 'grep -q serving "$T/daemon.log"'
	id=$(as "$UB" cardbaton-submit --config "$D/config.yaml" --gpu-count 0 -- sh -c 'id -un > "$0"' "$D/out/who")
	wait_for 20 '[ "$(as "$UB" cardbaton-status --config "$D/config.yaml" --json "$id" | json "d[\"jobs\"][0][\"state\"]")" = succeeded ]'
	# Jobs run as the account that runs the daemon (README, trust model).
	[ "$(cat "$D/out/who")" = "$UA" ]
	# A member cancels a job that waits for a busy card.
	printf 'GPU-11111111-1111-1111-1111-111111111111, 4242, 500\n' > "$D/gpus/apps.csv"
	q=$(as "$UB" cardbaton-submit --config "$D/config.yaml" --gpus 1 -- true)
	wait_for 20 '[ -n "$(ls "$D/a/spool/queued")" ]'
	as "$UB" cardbaton-cancel --config "$D/config.yaml" "$q"
	wait_for 20 '[ "$(as "$UB" cardbaton-status --config "$D/config.yaml" --json "$q" | json "d[\"jobs\"][0][\"state\"]")" = cancelled ]'
	# The owner sees the member's jobs the same way.
	[ "$(as "$UA" cardbaton-status --config "$D/config.yaml" --json "$id" | json 'd["jobs"][0]["state"]')" = succeeded ]
	stop_daemon
	umask 022
	# Everything in it: directories 2770, files 0660, of the group.
	modes_ok "$D/a/spool" 2770 660
	[ -z "$(find "$D/a/spool" ! -group "$G")" ]
	[ -n "$(find "$D/a/spool" -user "$UB" -type f)" ]      # seq, written by the member
	# Someone outside the group reads and writes nothing.
	run --separate-stderr as "$UC" cardbaton-status --config "$D/config.yaml"
	one_line '!0' cardbaton-status
	run --separate-stderr as "$UC" cardbaton-submit --config "$D/config.yaml" -- true
	one_line '!0' cardbaton-submit
	run as "$UC" cat "$D/a/spool/done/$(printf %010d "$id").job"
	[ "$status" -ne 0 ]
	# And a spool CardBaton makes itself is the owner's alone.
	printf 'spool: %s/a/private\nnodes:\n  local:\n    local: true\n' "$D" > "$D/private.yaml"
	chmod 0644 "$D/private.yaml"
	as "$UA" cardbaton-submit --config "$D/private.yaml" -- true >/dev/null
	modes_ok "$D/a/private" 700 600
	run --separate-stderr as "$UB" cardbaton-status --config "$D/private.yaml"
	one_line '!0' cardbaton-status
}

# ---- symbolic links -----------------------------------------------------------

@test "a state directory of the spool that is a symbolic link is refused, never followed" {
	sub -- true >/dev/null
	for d in tmp new incoming queued running done ctl; do
		mkdir "$T/elsewhere"
		mv "$S/$d" "$T/real"
		ln -s "$T/elsewhere" "$S/$d"
		run --separate-stderr sub -- true
		one_line 78 cardbaton-submit
		[ "$stderr" = "cardbaton-submit: $S/$d: is a symbolic link (not followed)" ]
		run --separate-stderr cardbaton-spoold --config "$C" --once
		one_line 78 cardbaton-spoold
		run --separate-stderr st
		one_line 78 cardbaton-status
		run --separate-stderr cardbaton-cancel --config "$C" 1
		one_line 78 cardbaton-cancel
		[ -z "$(ls -A "$T/elsewhere")" ]
		rm "$S/$d"
		mv "$T/real" "$S/$d"
		rmdir "$T/elsewhere"
	done
	# Put back, it serves again.
	start_daemon
	[ "$(ls "$S/new" | wc -l)" -eq 0 ] || wait_for 10 '[ -z "$(ls "$S/new")" ]'
}

@test "the spool's lock, seq, seq.lock and id: a symbolic link there is never followed, a FIFO never opened for long" {
	start_daemon
	stop_daemon
	printf '41\n' > "$T/victim"
	cp -p "$T/victim" "$T/victim.orig"
	mkfifo "$T/fifo"
	for f in lock seq seq.lock id; do
		for what in "$T/victim" "$T/nothing" fifo "$T/fifo"; do
			mv "$S/$f" "$T/real"
			if [ "$what" = fifo ]; then
				mkfifo "$S/$f"
				why="is not a regular file"
			else
				ln -s "$what" "$S/$f"
				why="is a symbolic link (not followed)"
			fi
			run --separate-stderr timeout "$(scaled 20)" cardbaton-submit --config "$C" -- true
			case $f in
			lock) [ "$status" -eq 0 ] ;;   # submit does not take the daemon's lock
			*) one_line 71 cardbaton-submit; [ "$stderr" = "cardbaton-submit: $S/$f: $why" ] ;;
			esac
			# A file in new/ under a name of its own needs a sequence number.
			printf '{"command": ["true"]}\n' > "$S/new/hand.job"
			run --separate-stderr timeout "$(scaled 20)" cardbaton-spoold --config "$C" --once
			case $f in
			lock|id) one_line 71 cardbaton-spoold; [ "$stderr" = "cardbaton-spoold: $S/$f: $why" ] ;;
			*) [ "$status" -eq 0 ]; [[ $stderr == *"cardbaton-spoold: $S/$f: $why"* ]] ;;
			esac
			cmp "$T/victim" "$T/victim.orig"
			[ "$(stat -c %Y "$T/victim")" = "$(stat -c %Y "$T/victim.orig")" ]
			[ ! -e "$T/nothing" ]
			[ -p "$T/fifo" ]
			rm "$S/$f"
			mv "$T/real" "$S/$f"
		done
	done
}

@test "the node state directory: leases/ or attempts/ a symbolic link is refused, never followed" {
	for d in leases attempts; do
		rm -rf "$STATE" "$T/elsewhere"
		mkdir -p "$STATE/attempts" "$STATE/leases" "$T/elsewhere"
		rmdir "$STATE/$d"
		ln -s "$T/elsewhere" "$STATE/$d"
		run --separate-stderr cardbaton-gpus --config "$C"
		one_line 69 cardbaton-gpus
		[[ $stderr == *"$STATE/$d: is a symbolic link (not followed)"* ]]
		start_daemon
		id=$(sub -- sh -c 'touch "$0"' "$T/ran")
		wait_for 20 'grep -qF "$STATE/$d: is a symbolic link (not followed)" "$T/daemon.log"'
		[ "$(state "$id")" = queued ]
		stop_daemon
		[ ! -e "$T/ran" ]
		[ -z "$(ls -A "$T/elsewhere")" ]
		cardbaton-cancel --config "$C" "$id"
	done
}

@test "an attempt directory planted as a symbolic link is never followed; the job never runs through it" {
	rm -rf "$STATE"
	id=$(sub --gpu-count 0 -- sh -c 'touch "$0"' "$T/ran")
	mkdir -p "$STATE/attempts" "$STATE/leases" "$T/elsewhere"
	# The attempt ID the daemon will choose (LAYOUT.md §2).
	ln -s "$T/elsewhere" "$STATE/attempts/$(head -c 8 "$S/id")-$id-0"
	start_daemon
	# The attempt fails saying why (hostile.bats has the case in full).
	wait_for 20 '[ "$(job_state "$id")" = failed ]'
	[ ! -e "$T/ran" ]
	[ -z "$(ls -A "$T/elsewhere")" ]
	[ -L "$STATE/attempts/$(head -c 8 "$S/id")-$id-0" ]
}

# ---- arguments reach the job byte for byte -----------------------------------

# The words a shell would act on, each of which must arrive unchanged.
weird_words() {
	W=('$(touch '"$T"'/pwned)' '`touch '"$T"'/pwned`' 'a;touch '"$T"'/pwned' "it's" '"q"'
		$'new\nline' '*' '' '-n' '--config=/dev/null' 'back\slash' '$HOME' '|cat' '&' '>x'
		$'tab\there' '~' '#' '{a,b}' 'é✓')
	DIR="$T/"$'c w d;$(touch pwned)`x`\'"*\n-'
	ENV_VAL='$(touch '"$T"'/pwned);`x` '"'q'"' "d"'$'\n''*'
	NAME=$'-rf $(touch pwned); \'n\' `x`'
	PROG='import json, os, sys; json.dump({"argv": sys.argv[1:], "env": os.environ["X"], "cwd": os.getcwd()}, open(os.environ["OUT"], "w"))'
}

# check_weird OUT: the job wrote exactly what was submitted; no shell
# ran anything.
check_weird() {
	python3 - "$1" "$DIR" "$ENV_VAL" "${W[@]}" <<-'PY'
		import json, sys
		got = json.load(open(sys.argv[1]))
		want = {"argv": sys.argv[4:], "env": sys.argv[3], "cwd": sys.argv[2]}
		assert got == want, (got, want)
	PY
	[ ! -e "$T/pwned" ] && [ ! -e "$DIR/pwned" ] && [ ! -e "$T/x" ] && [ ! -e "$DIR/x" ] && [ ! -e "$HOME/pwned" ]
}

@test "command, environment, cwd and name with shell metacharacters reach a local job byte for byte" {
	weird_words
	mkdir "$DIR"
	start_daemon
	id=$(sub --gpu-count 0 --name "$NAME" --env "X=$ENV_VAL" --env "OUT=$T/out" --cwd "$DIR" -- python3 -c "$PROG" "${W[@]}")
	wait_for 20 final "$id"
	[ "$(state "$id")" = succeeded ]
	check_weird "$T/out"
	[ "$(st --json "$id" | json 'd["jobs"][0]["name"]')" = "$NAME" ]
	st --json "$id" | python3 -c 'import json, sys; c = json.load(sys.stdin)["jobs"][0]["command"]; assert c[3:] == sys.argv[1:], c' "${W[@]}"
}

ssh_config() {
	cat > "$C" <<-YAML
		spool: ./spool
		ssh_command: [ssh, -F, $SSH_CONFIG]
		${1:-}
		nodes:
		  host1:
		    ssh: host1
	YAML
}


@test "through ssh too: metacharacters reach the job byte for byte, also in remote_state_dir" {
	needs_hosts
	weird_words
	mkdir "$DIR"
	# A state directory whose name a shell would expand, split and run.
	rsd='~/st ate/$(touch '"$T"'/pwned);`touch '"$T"'/pwned` '\''q'\'' "d" *'
	ssh_config "remote_state_dir: $(python3 -c 'import json, sys; print(json.dumps(sys.argv[1]))' "$rsd")"
	ssh_daemon
	id=$(in_client cardbaton-submit --config "$C" --gpus 2 --name "$NAME" --env "X=$ENV_VAL" --env "OUT=$T/out" --cwd "$DIR" -- python3 -c "$PROG" "${W[@]}")
	wait_for 30 final "$id"
	[ "$(state "$id")" = succeeded ]
	check_weird "$T/out"
	# The state directory is that very name under the host's home, and
	# private: directories 0700, files 0600 (the shipped worker 0755).
	h=$(host_home 1)
	sd=$h/${rsd#\~/}
	[ -d "$sd/attempts" ] && [ -d "$sd/leases" ] && [ -f "$sd/leases/$(host_gpu_uuid 1 2)" ]
	[ "$(ls "$sd/bin" | wc -l)" -eq 1 ]
	bad=$(find "$sd" \( -type d ! -perm 700 -printf '%m %p\n' \) -o \( -type f ! -path "$sd/bin/*" ! -perm 600 -printf '%m %p\n' \))
	[ -z "$bad" ] || { echo "$bad" >&2; false; }
	[ "$(stat -c %a "$sd/bin/"*)" = 755 ]
	[ "$(ls -A "$h")" = "$(ls -A "$h" | grep -x 'st ate')" ]
	# The logs come back through the same quoting.
	in_client cardbaton-logs --config "$C" "$id" >/dev/null
}

@test "through ssh: a relative remote_state_dir that begins with '-' is a path, not an option" {
	needs_hosts
	# Relative to the directory ssh starts in on the node (the account's
	# home in the password file, not \$HOME): cleaned up by teardown.
	DASH_DIR=$(host_ssh 1 pwd)/-cbsec-$HOSTS_UID-dash
	ssh_config "remote_state_dir: \"${DASH_DIR##*/}/x\""
	ssh_daemon
	id=$(in_client cardbaton-submit --config "$C" --gpu-count 0 -- touch "$T/ran")
	wait_for 30 final "$id"
	[ "$(state "$id")" = succeeded ]
	[ -e "$T/ran" ]
	[ -d "$DASH_DIR/x/attempts" ] && [ "$(ls "$DASH_DIR/x/bin" | wc -l)" -eq 1 ]
}

# ---- bootstrap ---------------------------------------------------------------

# keys: $KEY (the public key to install, "type blob comment") and
# $KTYPE $KBLOB; $OTHER1 $OTHER2 unrelated keys.
keys() {
	ssh-keygen -q -t ed25519 -N '' -C 'new key' -f "$T/newkey" </dev/null
	ssh-keygen -q -t ed25519 -N '' -C 'one' -f "$T/k1" </dev/null
	ssh-keygen -q -t ed25519 -N '' -C 'two' -f "$T/k2" </dev/null
	KEY=$(cat "$T/newkey.pub")
	read -r KTYPE KBLOB _ <<< "$KEY"
	OTHER1=$(cat "$T/k1.pub")
	OTHER2=$(cat "$T/k2.pub")
	AK=$(host_home 1)/.ssh/authorized_keys
	mkdir -p -m 0700 "$(host_home 1)/.ssh"
}

boot() { in_client cardbaton-bootstrap --config "$C" --node host1 --public-key "$T/newkey.pub"; }

@test "bootstrap keeps every authorized_keys entry byte for byte and is idempotent" {
	needs_hosts
	keys
	ssh_config
	# Comments, blank lines, options with quotes and spaces, CRLF, a
	# commented-out copy of the key and a longer blob that begins with
	# it (neither is the key), and no final newline.
	printf '# managed by hand\n\n   # indented\r\ncommand="echo \\"hi there\\"",no-pty %s\r\n#%s %s old copy\n%s %sAAAA longer\n\t%s' \
		"$OTHER1" "$KTYPE" "$KBLOB" "$KTYPE" "$KBLOB" "$OTHER2" > "$AK"
	chmod 0644 "$AK"
	cp "$AK" "$T/ak.orig"
	boot
	{ cat "$T/ak.orig"; printf '\n%s\n' "$KEY"; } > "$T/ak.want"
	cmp "$T/ak.want" "$AK"
	[ "$(stat -c %a "$AK")" = 600 ]
	# Nothing else left but the lock (flock(1) is on the host).
	[ "$(ls -A "$(host_home 1)/.ssh" | grep -vx '\.authorized_keys\.cardbaton\.lock')" = authorized_keys ]
	# Again: nothing changes, not even the file.
	ino=$(stat -c %i "$AK")
	boot
	cmp "$T/ak.want" "$AK"
	[ "$(stat -c %i "$AK")" = "$ino" ]
	# The key already there with options and another comment: kept as it is.
	printf 'from="10.0.0.0/8",no-agent-forwarding %s %s someone@else\n%s' "$KTYPE" "$KBLOB" "$OTHER1" > "$AK"
	cp "$AK" "$T/ak.orig"
	boot
	cmp "$T/ak.orig" "$AK"
	# No file at all: just the key, mode 600.
	rm "$AK"
	boot
	[ "$(cat "$AK")" = "$KEY" ]
	[ "$(stat -c %a "$AK")" = 600 ]
}

@test "bootstrap killed mid-write (kill -9) leaves the old authorized_keys whole; the next run adds the key" {
	needs_hosts
	keys
	ssh_config
	for i in $(seq 1 200); do printf '%s entry-%d\n' "$OTHER1" "$i"; done > "$AK"
	printf '%s last, no newline' "$OTHER2" >> "$AK"
	cp "$AK" "$T/ak.orig"
	bin=$(host_bin_dir 1)
	# Test hooks on the host's PATH: the copy of authorized_keys stops
	# half-way (the crash falls mid-write), then the rename waits (the
	# crash falls between the complete temporary file and the rename).
	for step in cat mv; do
		cat > "$bin/$step" <<-EOF
			#!/bin/sh
			case "\$*" in *"\$HOME/.ssh/authorized_keys"*)
				if [ $step = cat ]; then head -c 5000 "\$1"; fi
				echo "\$\$ \$PPID" > "\$HOME/stalled.tmp"; /bin/mv "\$HOME/stalled.tmp" "\$HOME/stalled"
				exec sleep 600 ;;
			esac
			exec /bin/$step "\$@"
		EOF
		chmod +x "$bin/$step"
		rm -f "$(host_home 1)/stalled"
		boot 2>/dev/null &
		bpid=$!
		wait_for 20 '[ -s "$(host_home 1)/stalled" ]'
		read -r hook sh < "$(host_home 1)/stalled"
		kill -KILL "$sh" "$hook"
		wait "$bpid" && false
		cmp "$T/ak.orig" "$AK"
		# What the crash interrupted: a temporary file beside it.
		tmp=$(ls -A "$(host_home 1)/.ssh" | grep -v -e '^authorized_keys$' -e '^\.authorized_keys\.cardbaton\.lock$')
		[ -n "$tmp" ]
		if [ $step = cat ]; then
			[ "$(stat -c %s "$(host_home 1)/.ssh/$tmp")" -lt "$(stat -c %s "$AK")" ]
		fi
		rm -f "$bin/$step" "$(host_home 1)/.ssh/$tmp"
	done
	boot
	{ cat "$T/ak.orig"; printf '\n%s\n' "$KEY"; } | cmp - "$AK"
}

# boot_all AK CONFIG NODE N: N bootstraps at once into the account whose
# authorized_keys is AK, each of a key of its own ($T/cI.pub), all
# through `sync` slowed down on the node's PATH (the window between
# reading the file and the rename, where a second run without the lock
# loses the first one's key); then checks that each key is there
# exactly once, after the old entries kept byte for byte ($T/ak.orig),
# and that nothing but the lock is left in ~/.ssh.
boot_all() {
	local ak=$1 cfg=$2 node=$3 n=$4 i pids=() want got
	for i in $(seq 1 "$n"); do
		[ -e "$T/c$i.pub" ] || ssh-keygen -q -t ed25519 -N '' -C "concurrent $i" -f "$T/c$i" </dev/null
	done
	for i in $(seq 1 "$n"); do
		in_client cardbaton-bootstrap --config "$cfg" --node "$node" --public-key "$T/c$i.pub" 2>>"$T/boot.err" &
		pids+=($!)
	done
	for i in "${pids[@]}"; do wait "$i" || { cat "$T/boot.err" >&2; return 1; }; done
	cmp -n "$(stat -c %s "$T/ak.orig")" "$T/ak.orig" "$ak"
	want=$(for i in $(seq 1 "$n"); do cat "$T/c$i.pub"; done | sort)
	got=$(tail -c +"$(( $(stat -c %s "$T/ak.orig") + 1 ))" "$ak" | sed '1{/^$/d}' | sort)
	[ "$got" = "$want" ] || { echo "keys added: $got"$'\n'"wanted: $want" >&2; return 1; }
	[ "$(stat -c %a "$ak")" = 600 ]
	[ "$(ls -A "$(dirname "$ak")" | grep -v -e '^authorized_keys$' -e '^\.authorized_keys\.cardbaton\.lock$')" = "" ]
}

@test "bootstraps of one SSH account at once, each of its own key: every key added exactly once, the old entries kept byte for byte" {
	needs_hosts
	keys
	ssh_config
	printf '# by hand\n%s\n%s last, no newline' "$OTHER1" "$OTHER2" > "$AK"
	cp "$AK" "$T/ak.orig"
	printf '#!/bin/sh\nsleep 0.2\nexec /bin/sync "$@"\n' > "$(host_bin_dir 1)/sync"
	chmod +x "$(host_bin_dir 1)/sync"
	boot_all "$AK" "$C" host1 8
	# flock(1) is on the host: the lock is a file, kept.
	[ -f "$(host_home 1)/.ssh/.authorized_keys.cardbaton.lock" ]
}

# fake_node PATHDIR: node "acct" reached through $T/fakessh, which runs
# the remote command here under /bin/sh, as an account whose home is
# $T/acct and whose PATH is PATHDIR, holding the commands the bootstrap
# uses (and flock only when FLOCK=1), `sync` slowed down.
fake_node() {
	local c
	mkdir -p "$1" "$T/acct/.ssh"
	for c in awk cat chmod mkdir mv rm rmdir sleep tail ${FLOCK:+flock}; do
		[ -e "$1/$c" ] || ln -s "$(command -v "$c")" "$1/$c"
	done
	printf '#!/bin/sh\nsleep 0.2\nexec %s "$@"\n' "$(command -v sync)" > "$1/sync"
	printf '#!/bin/sh\nfor a; do c=$a; done\nexec env -i HOME=%s PATH=%s /bin/sh -c "$c"\n' "$T/acct" "$1" > "$T/fakessh"
	chmod +x "$1/sync" "$T/fakessh"
	printf 'spool: ./spool\nssh_command: [%s]\nnodes:\n  acct:\n    ssh: acct\n' "$T/fakessh" > "$C"
}

@test "bootstraps at once on a node without flock(1): a mkdir lock, removed after; a lock left behind is waited for (bounded), named, never broken" {
	in_client() { "$@"; }
	keys
	AK=$T/acct/.ssh/authorized_keys
	for FLOCK in 1 ''; do
		rm -rf "$T/acct" "$T/path"
		fake_node "$T/path"
		printf '%s\n%s' "$OTHER1" "$OTHER2" > "$AK"
		cp "$AK" "$T/ak.orig"
		boot_all "$AK" "$C" acct 6
		if [ -n "$FLOCK" ]; then
			[ -f "$T/acct/.ssh/.authorized_keys.cardbaton.lock" ]
		else
			[ ! -e "$T/acct/.ssh/.authorized_keys.cardbaton.lock" ]
		fi
	done
	# A lock directory left by a run killed with -9: refused once the
	# wait is over (sleep made instant here), the file and the lock
	# untouched.
	mkdir "$T/acct/.ssh/.authorized_keys.cardbaton.lock.d"
	printf '#!/bin/sh\nexit 0\n' > "$T/path/sleep.tmp"
	chmod +x "$T/path/sleep.tmp"
	mv -f "$T/path/sleep.tmp" "$T/path/sleep"
	cp "$AK" "$T/ak.before"
	run --separate-stderr cardbaton-bootstrap --config "$C" --node acct --public-key "$T/newkey.pub"
	failed 69 cardbaton-bootstrap
	[ "$stderr" = "cardbaton-bootstrap: acct: $T/acct/.ssh/.authorized_keys.cardbaton.lock.d: there for 20 s: remove it if no bootstrap is running" ]
	cmp "$T/ak.before" "$AK"
	[ -d "$T/acct/.ssh/.authorized_keys.cardbaton.lock.d" ]
	# Removed, the next run adds the key.
	rmdir "$T/acct/.ssh/.authorized_keys.cardbaton.lock.d"
	cardbaton-bootstrap --config "$C" --node acct --public-key "$T/newkey.pub"
	{ cat "$T/ak.before"; printf '%s\n' "$KEY"; } | cmp - "$AK"
	[ "$(ls -A "$T/acct/.ssh")" = authorized_keys ]
}

# ---- two controllers, one node state directory --------------------------------

@test "two controllers on one remote_state_dir: a card whose lease is held is never handed out twice" {
	fake_gpus \
		"0, GPU-00000000-0000-0000-0000-000000000000, NVIDIA Fake A100, 0, 81920, 0" \
		"1, GPU-11111111-1111-1111-1111-111111111111, NVIDIA Fake A100, 0, 81920, 0"
	printf 'spool: ./spool2\nnodes:\n  local:\n    local: true\n' > "$T/c2.yaml"
	sub2() { cardbaton-submit --config "$T/c2.yaml" "$@"; }
	state2() { cardbaton-status --config "$T/c2.yaml" --json "$1" | json 'd["jobs"][0]["state"]'; }
	start_daemon
	# The first controller's job holds card 0 ...
	L=$(sub --gpus 0 -- sh -c 'while [ ! -e "$0" ]; do sleep 0.02; done' "$T/go")
	wait_for 20 '[ "$(state "$L")" = running ]'
	laid=$(head -c 8 "$S/id")-$L-0
	# ... which the second one sees leased, and does not use.
	M=$(sub2 --gpus 0 -- touch "$T/m.ran")
	cardbaton-spoold --config "$T/c2.yaml" --once >> "$T/daemon2.log" 2>&1
	[ "$(state2 "$M")" = queued ]
	[ ! -e "$T/m.ran" ]
	[ "$(cardbaton-gpus --config "$T/c2.yaml" --json | json 'd["nodes"][0]["gpus"][0]["lease"]')" = "$laid" ]
	# Once the lease is free, it may.
	touch "$T/go"
	wait_for 20 final "$L"
	cardbaton-spoold --config "$T/c2.yaml" --once >> "$T/daemon2.log" 2>&1
	wait_for 20 '[ -e "$T/m.ran" ]'
	# Both controllers at full tilt on two cards: each job takes a lock
	# of its own on its card, like the lease; a second holder at the same
	# time fails and records it.
	cardbaton-spoold --config "$T/c2.yaml" >> "$T/daemon2.log" 2>&1 &
	D2_PID=$!
	wait_for 10 '[ "$(grep -c serving "$T/daemon2.log")" -eq 3 ]'
	job='u=$CUDA_VISIBLE_DEVICES; exec 9>"$0/card-$u"; flock -n 9 || { echo "$1 $u" >> "$0/overlap"; exit 1; }; echo "$1 $u" >> "$0/ran"; sleep 0.2'
	a=() b=()
	for i in 1 2 3; do
		a+=("$(sub -- sh -c "$job" "$T" "a$i")")
		b+=("$(sub2 -- sh -c "$job" "$T" "b$i")")
	done
	for id in "${a[@]}"; do wait_for 40 final "$id"; done
	for id in "${b[@]}"; do wait_for 40 '[ "$(state2 "$id")" = succeeded ]'; done
	for id in "${a[@]}"; do [ "$(state "$id")" = succeeded ]; done
	[ ! -e "$T/overlap" ]
	[ "$(wc -l < "$T/ran")" -eq 6 ]
	[ "$(cardbaton-gpus --config "$C" --json | json '[g["lease"] for g in d["nodes"][0]["gpus"]]')" = '[null, null]' ]
}
