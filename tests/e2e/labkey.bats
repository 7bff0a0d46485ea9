#!/usr/bin/env bats
# labkey.bats - the lab's key (issue 34 part 2; SPEC §12, LAYOUT.md
# §16), end to end with real Unix accounts (tests/lib/lab.bash) on a
# real sshd test host (tests/lib/sshhosts.bash): the lab's daemon (root)
# makes its key pair and publishes SPOOL/controller.pub; alice, with her
# own key to her own account on host1, runs `cardbaton bootstrap --lab`,
# which puts the lab's key in her authorized_keys restricted to the gate
# (`cardbaton-worker gate`); with that key (root, from the client
# namespace) the worker's own commands and its install run, and nothing
# else does: no command, a login shell, other programs, shell syntax
# appended to a worker command, port forwarding; `--lab --remove` takes
# it out again, alice's alone (bob's stays).
#
# The host's sshd lets alice and bob in (AllowUsers) with their own
# ~/.ssh/authorized_keys under their passwd homes ($KD/home-NAME, set
# with usermod for this file's own accounts, removed with them), and
# gives their sessions the host's PATH (the fake nvidia-smi) and cards
# (a Match block's SetEnv replaces the hosts' global one: HOME stays the
# passwd home).  Each has a personal ed25519 key of her own
# ($KD/key-NAME, 0600) and one ssh_config for both ($KD/ssh_config:
# IdentityFile by %u, the host's known key); the members' config $LM
# names the lab's spool and host1 through it.  The daemon's config $LC
# has only its local node: it never connects to host1.

load ../lib/common
load ../lib/sshhosts
load ../lib/lab

bats_require_minimum_version 1.5.0
test_timeout 60

setup_file() {
	local u
	lab_accounts cbk || return 1
	lab_can && hosts_available || return 0
	KD=$(mktemp -d /tmp/cblabkey.XXXXXX) || return 1
	chmod 0755 "$KD"
	export KD
	for u in "$UA" "$UB"; do
		install -d -m 0700 -o "$u" -g "$(id -g "$u")" "$KD/home-$u" "$KD/key-$u" || return 1
		# Not locked ("!": sshd without PAM refuses a locked account).
		usermod -d "$KD/home-$u" -p '*' "$u" || return 1
		setpriv --reuid="$u" --regid="$(id -g "$u")" --init-groups \
			ssh-keygen -q -t ed25519 -N '' -C "$u-own" -f "$KD/key-$u/id_ed25519" </dev/null || return 1
	done
	export HOSTS_DIR=$KD/hosts
	local d=$HOSTS_DIR/host1
	HOSTS_SSHD_EXTRA="AllowUsers root $UA $UB
Match User $UA,$UB
	AuthorizedKeysFile .ssh/authorized_keys
	SetEnv PATH=$d/bin:$CBH_SYS_PATH FAKE_GPU_DIR=$d/gpus CARDBATON_HOST=host1 CARDBATON_NVML=off"
	HOSTS_SSHD_EXTRA=$HOSTS_SSHD_EXTRA hosts_up 1 || return 1
	cat > "$KD/ssh_config" <<-EOF
		Host host1
		    HostName $(host_addr 1)
		    HostKeyAlias host1
		    IdentityFile $KD/key-%u/id_ed25519
		    IdentitiesOnly yes
		    UserKnownHostsFile $HOSTS_DIR/known_hosts
		    GlobalKnownHostsFile /dev/null
		    StrictHostKeyChecking yes
		    BatchMode yes
		    ConnectTimeout 5
	EOF
	chmod 0644 "$KD/ssh_config"
}

teardown_file() {
	hosts_down
	lab_accounts_down cbk
	case ${KD:-} in /tmp/cblabkey.*) rm -rf "$KD" ;; esac
}

setup() {
	local u h
	[ -n "${HOSTS_UID:-}" ] || skip "needs root, ip netns, sshd, useradd and setpriv"
	setup_common
	lab_setup
	WID=$(sed -n 's/^#define WORKER_ID "\(.*\)"$/\1/p' "$CB_BUILD/worker-id.h")
	[ -n "$WID" ]
	# Each test: the members' homes on the host with their own key
	# alone, no worker, no state.
	for u in "$UA" "$UB"; do
		h=$KD/home-$u
		rm -rf "$h"
		install -d -m 0700 -o "$u" -g "$(id -g "$u")" "$h" "$h/.ssh"
		install -m 0600 -o "$u" -g "$(id -g "$u")" "$KD/key-$u/id_ed25519.pub" "$h/.ssh/authorized_keys"
	done
	# The members' config: the lab's spool, host1 through their own keys.
	LM=$L/member.yaml
	{
		printf 'spool: %s\nssh_command: [ssh, -F, %s]\n' "$LS" "$KD/ssh_config"
		printf 'nodes:\n  host1:\n    ssh: host1\n'
		printf 'lab:\n  group: %s\n  admins: [%s]\n' "$LAB_GROUP" "$UC"
	} > "$LM"
	chown "root:$LAB_GROUP" "$LM" && chmod 0640 "$LM"
	BG=() KEYED_OPTS=()
}

teardown() {
	local p
	for p in "${BG[@]}"; do kill -TERM "$p" 2>/dev/null; done
	for p in "${BG[@]}"; do wait "$p" 2>/dev/null; done
	if [ -z "${BATS_TEST_COMPLETED:-}" ] && [ -n "${HOSTS_DIR:-}" ] && [ -s "$HOSTS_DIR/host1/sshd.log" ]; then
		{ echo "# --- host1 sshd.log (last 30)"; tail -n 30 "$HOSTS_DIR/host1/sshd.log" | sed 's/^/# /'; } >&3
	fi
	lab_teardown
	teardown_common
}

# mem USER CMD...: CMD as USER (lab.bash's as_argv), in the client
# namespace, from USER's home on the controller side.
mem() {
	local AS u=$1
	as_argv "$u"
	shift
	(cd "$L/home-$u" && in_client "${AS[@]}" "$@")
}

# boot USER ARGS...: USER's cardbaton-bootstrap --node host1 on $LM.
boot() { local u=$1; shift; mem "$u" cardbaton-bootstrap --config "$LM" --node host1 "$@"; }

# The lab's key: the daemon's (root's, under its XDG_STATE_HOME).
labkey() { echo "$XDG_STATE_HOME/cardbaton/lab-$(cat "$LS/id")"; }

# keyed USER [CMD]: ssh with the lab's key alone to USER's account on
# host1, from the client namespace, as root; options before the host in
# KEYED_OPTS.  keyed_argv USER: that ssh up to its options, in KA.
keyed_argv() {
	KA=(ip netns exec "$CLIENT_NS" ssh -F /dev/null -i "$(labkey)" -o IdentitiesOnly=yes
		-o BatchMode=yes -o HostKeyAlias=host1 -o UserKnownHostsFile="$HOSTS_DIR/known_hosts"
		-o GlobalKnownHostsFile=/dev/null -o StrictHostKeyChecking=yes -o ConnectTimeout=5
		-o ControlMaster=no -o ControlPath=none -l "$1")
}
keyed() {
	local KA u=$1
	shift
	keyed_argv "$u"
	"${KA[@]}" "${KEYED_OPTS[@]}" "$(host_addr 1)" "$@" 3>&-
}

# The state directory on the host, absolute, of USER; the worker's
# command as the controller writes it (link/node.c worker_argv) with
# ARGS (each quoted, as sh_quote does).
state_of() { echo "$KD/home-$1/.local/state/sshgpu-queue"; }
wcmd() {
	local a s
	s="exec \"\$HOME\"'/.local/state/sshgpu-queue/bin/cardbaton-worker-$WID' -d '~/.local/state/sshgpu-queue'"
	for a; do s+=" '$a'"; done
	printf '%s' "$s"
}

# The lab's key made (the daemon's start, --once), read into
# KTYPE KBLOB KCOMMENT.
lab_key_made() {
	lab_once
	[ -s "$LS/controller.pub" ] || { echo "no $LS/controller.pub; daemon.log:"; cat "$T/daemon.log"; return 1; }
	read -r KTYPE KBLOB KCOMMENT < "$LS/controller.pub"
}

# ak USER: USER's authorized_keys on the host.
ak() { echo "$KD/home-$1/.ssh/authorized_keys"; }

# The line bootstrap --lab writes for USER.
lab_line() {
	local s
	s=$(state_of "$1")
	printf "restrict,command=\"exec '%s/bin/cardbaton-gate' gate '%s'\" %s %s %s\n" "$s" "$s" "$KTYPE" "$KBLOB" "$KCOMMENT"
}

# refused_by_gate: the last `run --separate-stderr` was the gate's
# refusal: 77, one line, nothing on stdout.
refused_by_gate() {
	failed 77 cardbaton-gate || return 1
	[[ ${stderr_lines[0]} == "cardbaton-gate: refused: "* ]] || { echo "stderr: $stderr" >&2; return 1; }
	[ -z "$output" ] || { echo "stdout: $output" >&2; return 1; }
}

# ---- the daemon's key -------------------------------------------------------

@test "a lab's daemon makes its key at its first start: the private key 0600 under its XDG_STATE_HOME, SPOOL/controller.pub 0640 root:GROUP, its public half with comment cardbaton-lab:SPOOLID" {
	[ ! -e "$XDG_STATE_HOME/cardbaton" ]
	lab_daemon
	wait_for 10 '[ -s "$LS/controller.pub" ]'
	sid=$(cat "$LS/id")
	[[ $sid =~ ^[0-9a-f]{8}$ ]]
	key=$XDG_STATE_HOME/cardbaton/lab-$sid
	[ "$(stat -c '%a %U' "$key")" = "600 root" ]
	[ "$(stat -c '%a %U:%G' "$LS/controller.pub")" = "640 root:$LAB_GROUP" ]
	[ "$(wc -l < "$LS/controller.pub")" -eq 1 ]
	read -r t b c rest < "$LS/controller.pub"
	[ "$t" = ssh-ed25519 ] && [ "$c" = "cardbaton-lab:$sid" ] && [ -z "$rest" ]
	read -r kt kb _ < <(ssh-keygen -y -f "$key")
	[ "$kt $kb" = "$t $b" ]
	# A member reads it (the group's).
	[ "$(as "$UA" cat "$LS/controller.pub")" = "$(cat "$LS/controller.pub")" ]
	# No key material left in the spool but the public half.
	[ -z "$(find "$LS" -name 'lab-*' -o -name '*.pub' ! -name controller.pub)" ]
}

@test "a restart keeps the lab's key; a controller.pub removed is written again at the next start, the same, 0640" {
	lab_daemon
	wait_for 10 '[ -s "$LS/controller.pub" ]'
	stop_daemon
	key=$(labkey)
	cp -p "$key" "$T/key.before"
	cp "$LS/controller.pub" "$T/pub.before"
	ino=$(stat -c %i "$key")
	# Started and stopped: SIGTERM waits in the signalfd until the
	# start-up (the key's check) is over.
	lab_daemon
	stop_daemon
	cmp "$key" "$T/key.before"
	[ "$(stat -c %i "$key")" = "$ino" ]
	cmp "$LS/controller.pub" "$T/pub.before"
	rm "$LS/controller.pub"
	lab_daemon
	wait_for 10 '[ -s "$LS/controller.pub" ]'
	stop_daemon
	cmp "$LS/controller.pub" "$T/pub.before"
	[ "$(stat -c '%a %U:%G' "$LS/controller.pub")" = "640 root:$LAB_GROUP" ]
	cmp "$key" "$T/key.before"
	not grep 'lab key' "$T/daemon.log"
}

@test "a lab key the daemon cannot make, or one open to others, is one log line and the queue serves on; no controller.pub is written from it" {
	# A file where the key's directory goes: it cannot be made.
	mkdir -p "$XDG_STATE_HOME"
	: > "$XDG_STATE_HOME/cardbaton"
	lab_daemon
	id=$(lsub "$UA" --gpu-count 0 -- true)
	wait_for 10 '[ "$(lab_field "$id" state)" = succeeded ]'
	[ "$(grep -c '^cardbaton-spoold: lab key: ' "$T/daemon.log")" -eq 1 ]
	[ ! -e "$LS/controller.pub" ]
	stop_daemon
	rm "$XDG_STATE_HOME/cardbaton"
	lab_daemon
	stop_daemon
	[ -s "$LS/controller.pub" ]
	# The private key readable by others: refused, said, not published.
	chmod 0644 "$(labkey)"
	rm "$LS/controller.pub"
	: > "$T/daemon.log"
	lab_daemon
	id=$(lsub "$UA" --gpu-count 0 -- true)
	wait_for 10 '[ "$(lab_field "$id" state)" = succeeded ]'
	grep -q "^cardbaton-spoold: lab key: $(labkey): the lab's private key must be .*0600" "$T/daemon.log"
	[ ! -e "$LS/controller.pub" ]
}

# ---- bootstrap --lab ----------------------------------------------------------

@test "alice's bootstrap --lab puts the lab's key once in her own authorized_keys on the node, restricted to the gate, after her own key; again, the file is untouched" {
	lab_key_made
	run --separate-stderr boot "$UA" --lab
	[ "$status" -eq 0 ] || { echo "exit $status: $stderr"; false; }
	f=$(ak "$UA")
	[ "$(grep -c -F " $KBLOB " "$f")" -eq 1 ]
	grep -F " $KBLOB " "$f" | grep -q "^restrict,command=\"exec '"
	# Exactly: her own key's line first, kept, then the lab's.
	diff <(cat "$KD/key-$UA/id_ed25519.pub"; lab_line "$UA") "$f"
	[ "$(stat -c '%a %U' "$f")" = "600 $UA" ]
	# The gate is the worker, copied beside it, hers.
	s=$(state_of "$UA")
	cmp "$s/bin/cardbaton-gate" "$s/bin/cardbaton-worker-$WID"
	[ "$(stat -c %U "$s/bin/cardbaton-gate")" = "$UA" ]
	# Nothing of bob's touched.
	diff "$KD/key-$UB/id_ed25519.pub" "$(ak "$UB")"
	[ ! -e "$KD/home-$UB/.local" ]
	# A second run: nothing written.
	cp "$f" "$T/ak.before"
	ino=$(stat -c %i "$f")
	run --separate-stderr boot "$UA" --lab
	[ "$status" -eq 0 ] || { echo "exit $status: $stderr"; false; }
	cmp "$f" "$T/ak.before"
	[ "$(stat -c %i "$f")" = "$ino" ]
}

@test "bootstrap --lab replaces a line holding the lab's key with other options by its own restricted one" {
	lab_key_made
	# A line of the lab's key without restrict (written by hand).
	printf '%s %s by-hand\n' "$KTYPE" "$KBLOB" >> "$(ak "$UA")"
	run --separate-stderr boot "$UA" --lab
	[ "$status" -eq 0 ] || { echo "exit $status: $stderr"; false; }
	diff <(cat "$KD/key-$UA/id_ed25519.pub"; lab_line "$UA") "$(ak "$UA")"
}

# ---- the gate, through sshd -----------------------------------------------------

@test "with the lab's key, a command (id, sh -c, another program, the gate itself) and a login shell (ssh -T, a terminal: no pty) are refused by the gate: 77, one line, nothing run; ssh -tt gets no pty" {
	lab_key_made
	boot "$UA" --lab
	h=$KD/home-$UA
	s=$(state_of "$UA")
	run --separate-stderr keyed "$UA" id
	refused_by_gate
	for c in "touch $h/ran-1" "sh -c 'touch $h/ran-2'" "exec '/bin/touch' '$h/ran-3'" \
		"exec '$s/bin/cardbaton-gate' gate '$s'" "exec '/usr/bin/touch' '$s/bin/cardbaton-worker-x'" \
		"'$s/bin/cardbaton-worker-$WID/../../../../../../../bin/touch' '$h/ran-4'"; do
		run --separate-stderr keyed "$UA" "$c"
		refused_by_gate || { echo "command: $c"; false; }
	done
	# No command: a shell, with or without a terminal asked for.
	KEYED_OPTS=(-T)
	run --separate-stderr keyed "$UA" </dev/null
	refused_by_gate
	[[ $stderr == *"no command (a shell)"* ]]
	# ssh -tt: sshd gives it no terminal (restrict), and ssh, told to
	# have one, gives up.
	KEYED_OPTS=(-tt)
	run --separate-stderr keyed "$UA" </dev/null
	[ "$status" -eq 255 ] || { echo "exit $status: $stderr"; false; }
	[[ $stderr == *"PTY allocation request failed"* ]]
	# A plain login from a terminal (script(1)): ssh asks for one, is
	# refused it and goes on (it was not told -t); the shell it asks for
	# is the gate's to refuse.
	keyed_argv "$UA"
	run script -qec "$(printf '%q ' "${KA[@]}" "$(host_addr 1)")" /dev/null </dev/null
	[ "$status" -eq 77 ] || { echo "exit $status: $output"; false; }
	[[ $output == *"PTY allocation request failed"* ]]
	[ "$(grep -c '^cardbaton-gate: refused: no command (a shell)' <<< "${output//$'\r'/}")" -eq 1 ]
	[ -z "$(find "$h" -name 'ran-*')" ]
	[ ! -e "$s/bin/cardbaton-worker-x" ]
}

@test "with the lab's key, sshd refuses port forwarding (-L and -R: restrict); alice's own key may forward" {
	lab_key_made
	boot "$UA" --lab
	a=$(host_addr 1)
	# -R: sshd refuses the forward, ssh gives up.
	keyed_argv "$UA"
	run --separate-stderr timeout "$(scaled 20)" "${KA[@]}" -N -o ExitOnForwardFailure=yes \
		-R 127.0.0.1:47022:127.0.0.1:22 "$a" 3>&-
	[ "$status" -eq 255 ] || { echo "exit $status: $stderr"; false; }
	[[ $stderr == *"remote port forwarding failed"* ]]
	# -L: the local end listens, but nothing comes through it.
	banner() { in_client timeout "$(scaled 5)" bash -c 'exec 5<>"/dev/tcp/127.0.0.1/$1" && head -c 7 <&5' sh "$1" 2>/dev/null; }
	listening() { [ -n "$(in_client ss -Hltn "sport = :$1")" ]; }
	keyed_argv "$UA"
	"${KA[@]}" -N -L "127.0.0.1:47023:$a:22" "$a" </dev/null >"$T/fwd-lab.log" 2>&1 3>&- &
	BG+=($!)
	wait_for 10 'listening 47023'
	[ "$(banner 47023)" = "" ]
	# The same forward with her own key carries sshd's banner: what the
	# lab's key missed was the forward itself.
	as_argv "$UA"
	ip netns exec "$CLIENT_NS" "${AS[@]}" ssh -F "$KD/ssh_config" -N -L "127.0.0.1:47024:$a:22" host1 \
		</dev/null >"$T/fwd-own.log" 2>&1 3>&- &
	BG+=($!)
	wait_for 10 'listening 47024'
	[ "$(banner 47024)" = "SSH-2.0" ]
	grep -q 'refused local port forward' "$HOSTS_DIR/host1/sshd.log"
}

@test "with the lab's key, the worker's own commands run as the controller writes them: gpus (the node's fake cards), version" {
	lab_key_made
	boot "$UA" --lab
	run --separate-stderr keyed "$UA" "$(wcmd gpus)"
	[ "$status" -eq 0 ] || { echo "exit $status: $stderr"; false; }
	for c in 0 1 2 3; do [[ $output == *"$(host_gpu_uuid 1 "$c")"* ]]; done
	[[ $output == *"A100-SXM4-80GB"* ]]
	run --separate-stderr keyed "$UA" "$(wcmd version)"
	[ "$status" -eq 0 ] || { echo "exit $status: $stderr"; false; }
	[ "$output" = "$("$CB_BUILD/cardbaton-worker" version)" ]
	# The absolute form too.
	run --separate-stderr keyed "$UA" "exec '$(state_of "$UA")/bin/cardbaton-worker-$WID' -d '$(state_of "$UA")' version"
	[ "$status" -eq 0 ] || { echo "exit $status: $stderr"; false; }
	# As alice, in her state directory.
	[ "$(stat -c %U "$(state_of "$UA")")" = "$UA" ]
}

@test "with the lab's key, a worker command with shell syntax appended (; && \$() backquotes | > newline) is refused and what was appended never runs" {
	lab_key_made
	boot "$UA" --lab
	h=$KD/home-$UA
	w=$(wcmd gpus)
	i=0
	for tail in "; touch $h/ran-@" " && touch $h/ran-@" ' $(touch '"$h"'/ran-@)' " \`touch $h/ran-@\`" \
		" | touch $h/ran-@" " > $h/ran-@" " & touch $h/ran-@" $'\n'"touch $h/ran-@"; do
		i=$((i + 1))
		c=$w${tail//@/$i}
		run --separate-stderr keyed "$UA" "$c"
		refused_by_gate || { echo "command: $c"; false; }
	done
	settle 0.3
	[ -z "$(find "$h" -name 'ran-*')" ] || { ls -l "$h"; false; }
	# The plain one still runs.
	run --separate-stderr keyed "$UA" "$w"
	[ "$status" -eq 0 ]
}

@test "with the lab's key, install ID takes a worker on stdin into STATE/bin and it runs there; install ../x and other bad IDs are refused" {
	lab_key_made
	boot "$UA" --lab
	s=$(state_of "$UA")
	run --separate-stderr keyed "$UA" "install 9.9.9-test" < "$CB_BUILD/cardbaton-worker-dynamic"
	[ "$status" -eq 0 ] || { echo "exit $status: $stderr"; false; }
	[ "$output" = installed ]
	cmp "$s/bin/cardbaton-worker-9.9.9-test" "$CB_BUILD/cardbaton-worker-dynamic"
	[ "$(stat -c %U "$s/bin/cardbaton-worker-9.9.9-test")" = "$UA" ]
	run --separate-stderr keyed "$UA" \
		"exec \"\$HOME\"'/.local/state/sshgpu-queue/bin/cardbaton-worker-9.9.9-test' -d '~/.local/state/sshgpu-queue' version"
	[ "$status" -eq 0 ] || { echo "exit $status: $stderr"; false; }
	[ "$output" = "$("$CB_BUILD/cardbaton-worker-dynamic" version)" ]
	for id in ../x ../../bin/x .hidden 'a/b' "'x;id'" ''; do
		run --separate-stderr keyed "$UA" "install $id" </dev/null
		refused_by_gate || { echo "install $id"; false; }
	done
	[ ! -e "$s/x" ]
	[ -z "$(find "$s/bin" -mindepth 1 ! -name "cardbaton-worker-$WID" ! -name cardbaton-worker-9.9.9-test ! -name cardbaton-gate)" ]
}

# ---- --remove, and another member's key ------------------------------------------

@test "bootstrap --lab --remove takes the lab's key out of alice's authorized_keys (her own stays): it logs in no more (255, Permission denied); again, 0" {
	lab_key_made
	boot "$UA" --lab
	run --separate-stderr keyed "$UA" "$(wcmd version)"
	[ "$status" -eq 0 ]
	# A second line of the same key (by hand): it goes too.
	printf 'no-pty %s %s again\n' "$KTYPE" "$KBLOB" >> "$(ak "$UA")"
	run --separate-stderr boot "$UA" --lab --remove
	[ "$status" -eq 0 ] || { echo "exit $status: $stderr"; false; }
	diff "$KD/key-$UA/id_ed25519.pub" "$(ak "$UA")"
	run --separate-stderr keyed "$UA" "$(wcmd version)"
	[ "$status" -eq 255 ]
	[[ $stderr == *"Permission denied"* ]]
	# Her own key still works.
	[ "$(mem "$UA" ssh -F "$KD/ssh_config" host1 echo ok)" = ok ]
	ino=$(stat -c %i "$(ak "$UA")")
	run --separate-stderr boot "$UA" --lab --remove
	[ "$status" -eq 0 ] || { echo "exit $status: $stderr"; false; }
	diff "$KD/key-$UA/id_ed25519.pub" "$(ak "$UA")"
	[ "$(stat -c %i "$(ak "$UA")")" = "$ino" ]
}

@test "bob authorizes the lab's key in his own account: alice's --remove leaves bob's line alone and the lab's key still runs bob's worker" {
	lab_key_made
	boot "$UA" --lab
	boot "$UB" --lab
	diff <(cat "$KD/key-$UB/id_ed25519.pub"; lab_line "$UB") "$(ak "$UB")"
	cp "$(ak "$UB")" "$T/bob.before"
	boot "$UA" --lab --remove
	cmp "$(ak "$UB")" "$T/bob.before"
	run --separate-stderr keyed "$UB" "$(wcmd gpus)"
	[ "$status" -eq 0 ] || { echo "exit $status: $stderr"; false; }
	[[ $output == *"$(host_gpu_uuid 1 0)"* ]]
	run --separate-stderr keyed "$UB" id
	refused_by_gate
	run --separate-stderr keyed "$UA" "$(wcmd gpus)"
	[ "$status" -eq 255 ]
}

# ---- errors -------------------------------------------------------------------

@test "bootstrap --lab errors: no lab: in the config 78; with --public-key 64; --remove alone 64; no controller.pub 66 naming it; nothing reaches the node" {
	# A config without lab: (the same node).
	printf 'spool: %s\nssh_command: [ssh, -F, %s]\nnodes:\n  host1:\n    ssh: host1\n' \
		"$L/home-$UA/spool" "$KD/ssh_config" > "$L/plain.yaml"
	chmod 0644 "$L/plain.yaml"
	run --separate-stderr mem "$UA" cardbaton-bootstrap --config "$L/plain.yaml" --node host1 --lab
	failed 78 cardbaton-bootstrap
	[[ $stderr == *"lab:"* ]]
	run --separate-stderr mem "$UA" cardbaton-bootstrap --config "$L/plain.yaml" --node host1 --lab --remove
	failed 78 cardbaton-bootstrap
	run --separate-stderr boot "$UA" --lab --public-key "$KD/key-$UA/id_ed25519.pub"
	failed 64 cardbaton-bootstrap
	run --separate-stderr boot "$UA" --remove
	failed 64 cardbaton-bootstrap
	run --separate-stderr boot "$UA" --public-key "$KD/key-$UA/id_ed25519.pub" --remove
	failed 64 cardbaton-bootstrap
	# The spool without controller.pub (the daemon stopped).
	lab_key_made
	rm "$LS/controller.pub"
	run --separate-stderr boot "$UA" --lab
	failed 66 cardbaton-bootstrap
	[[ $stderr == *"$LS/controller.pub"* ]]
	[[ $stderr == *"daemon"* ]]
	run --separate-stderr boot "$UA" --lab --remove
	failed 66 cardbaton-bootstrap
	# Nothing reached alice's account.
	diff "$KD/key-$UA/id_ed25519.pub" "$(ak "$UA")"
	[ ! -e "$KD/home-$UA/.local" ]
}
