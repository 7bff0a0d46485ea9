# tests/lib/lab.bash - a lab's spool (issue 33, SPEC §12, LAYOUT.md
# §15) tested with real Unix accounts (../shared/TESTING.md, "Several
# people"): load it after common.bash.  Needs root (CI is): without it
# lab_setup skips each test.
#
#   setup_file()    { lab_accounts cbl; }      # PREFIX: the file's own
#   teardown_file() { lab_accounts_down cbl; }
#   setup()         { setup_common; lab_setup; }
#   teardown()      { lab_teardown; teardown_common; }
#
# The accounts (lab_names PREFIX sets and exports the names):
#   $UA alice, $UB bob   members (primary group $LAB_GROUP)
#   $UC carol            a member and the lab's admin
#   $UD dave             not a member (his own group)
# Names are PREFIX, 4 hex digits of the build directory, "_alice": a file
# has its own PREFIX, so two files never share an account, and the plain
# and sanitizer lanes of `make test` (the same file at the same time, on
# two build directories) never do either.  Made idempotently (`id NAME
# ||`, `groupadd -f`), so that a run killed before its teardown_file is
# taken up again by the next one; removed by lab_accounts_down.
#
# Per test, lab_setup makes $L, a directory under /tmp that every
# account can traverse ($T lies under bats' 0700 directories): the
# lab's config $LC ($L/config.yaml, lab_config), its spool $LS ($L/spool,
# made by the daemon, which runs as root: the spool is root:$LAB_GROUP),
# a home per account ($L/home-NAME, 0700, its own) and a copy of the
# fake GPUs ($L/gpus).  lab_teardown removes it.  Nothing here waits but
# through wait_for.

# lab_names PREFIX: set and export LAB_GROUP UA UB UC UD.
lab_names() {
	local h
	h=$(printf '%s' "${CB_BUILD:?}" | cksum | cut -d' ' -f1)
	h=$(printf '%04x' $(( h % 65536 )))
	LAB_GROUP=$1${h}_gpuq UA=$1${h}_alice UB=$1${h}_bob UC=$1${h}_carol UD=$1${h}_dave
	export LAB_GROUP UA UB UC UD
}

# lab_can: this machine can make the accounts (root, the tools).
lab_can() {
	local x
	[ "$(id -u)" -eq 0 ] || return 1
	for x in groupadd useradd userdel groupdel setpriv unshare; do
		command -v "$x" >/dev/null || return 1
	done
}

# lab_accounts PREFIX (setup_file): the group and the four accounts;
# nothing where lab_can says no (bats 1.8 cannot skip in setup_file:
# lab_setup skips each test then).
lab_accounts() {
	local x
	lab_can || return 0
	lab_names "$1"
	groupadd -f "$LAB_GROUP" || return 1
	for x in "$UA" "$UB" "$UC"; do
		id "$x" >/dev/null 2>&1 ||
			useradd -M -N -g "$LAB_GROUP" -G "$LAB_GROUP" -s /bin/sh "$x" || return 1
	done
	id "$UD" >/dev/null 2>&1 || useradd -M -U -s /bin/sh "$UD" || return 1
}

# lab_accounts_down PREFIX (teardown_file): every process of the
# accounts killed, the accounts and the group removed.
lab_accounts_down() {
	local u uid p dirs=()
	lab_names "$1"
	for u in "$UA" "$UB" "$UC" "$UD"; do
		uid=$(id -u "$u" 2>/dev/null) || continue
		for p in $(ps -o pid= -U "$uid" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
		# ssh's connection-sharing sockets of the account (link/node.c).
		[ -d "/tmp/cardbaton-$uid" ] && [ "$(stat -c %u "/tmp/cardbaton-$uid")" = "$uid" ] &&
			dirs+=("/tmp/cardbaton-$uid")
	done
	for u in "$UA" "$UB" "$UC" "$UD"; do userdel -f "$u" >/dev/null 2>&1; done
	[ ${#dirs[@]} -eq 0 ] || rm -rf "${dirs[@]}"
	groupdel "$UD" >/dev/null 2>&1     # dave's own, where userdel left it
	groupdel "$LAB_GROUP" >/dev/null 2>&1
	return 0
}

# lab_setup (setup, after setup_common): $L, $LC, $LS; the homes, the
# GPUs, and the default lab config (lab_config).
lab_setup() {
	local u
	lab_can || skip "needs root, useradd, setpriv and unshare: real accounts (TESTING.md, Several people)"
	[ -n "${UA:-}" ] && id "$UA" >/dev/null 2>&1 ||
		{ echo "lab_setup: no accounts (lab_accounts in setup_file)" >&2; return 1; }
	L=$(mktemp -d /tmp/cblab.XXXXXX) || return 1
	echo "$L" > "$T/lab.dir"
	chmod 0755 "$L"
	LC=$L/config.yaml LS=$L/spool LE=$L/etc/cardbaton
	for u in "$UA" "$UB" "$UC" "$UD"; do
		install -d -m 0700 -o "$u" -g "$(id -g "$u")" "$L/home-$u" || return 1
	done
	mkdir -p "$L/gpus/bin"
	ln -s "$CB_TOP/tests/fake-nvidia-smi" "$L/gpus/bin/nvidia-smi"
	cp "$FAKE_GPU_DIR/gpus.csv" "$L/gpus/gpus.csv"
	: > "$L/gpus/apps.csv"
	chmod -R go+rX "$L/gpus"
	# The daemon (root) sees the same cards as the members' tools.
	export FAKE_GPU_DIR=$L/gpus
	lab_config
}

# lab_teardown (teardown, before teardown_common): the daemon stopped,
# every process of the accounts killed, $L removed.
lab_teardown() {
	local u uid p dir
	stop_daemon
	for u in "${UA:-}" "${UB:-}" "${UC:-}" "${UD:-}"; do
		[ -n "$u" ] && uid=$(id -u "$u" 2>/dev/null) || continue
		for p in $(ps -o pid= -U "$uid" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
	done
	dir=$(cat "$T/lab.dir" 2>/dev/null) || return 0
	if [ -z "${BATS_TEST_COMPLETED:-}" ] && [ -d "$dir/spool" ]; then
		{ echo "# --- $dir/spool"; find "$dir/spool" -printf '# %M %u:%g %p\n' | sort -k3; } >&3
	fi
	case $dir in /tmp/cblab.*) rm -rf "$dir" ;; esac
	rm -f "$T/lab.dir"
	return 0
}

# lab_config [LINE...]: write $LC, the lab's config: its spool $LS, one
# local node, and `lab:` with group $LAB_GROUP, admins [$UC], then each
# LINE as given (more of lab:, indented two blanks: "  users:" ...).
# The file is 0640 root:$LAB_GROUP, as a machine's would be: members
# read it, dave cannot.
lab_config() {
	{
		printf 'spool: %s\nnodes:\n  local:\n    local: true\n' "$LS"
		printf 'lab:\n  group: %s\n  admins: [%s]\n' "$LAB_GROUP" "$UC"
		[ $# -eq 0 ] || printf '%s\n' "$@"
	} > "$LC.tmp" || return 1
	chown "root:$LAB_GROUP" "$LC.tmp" && chmod 0640 "$LC.tmp" && mv "$LC.tmp" "$LC"
}

# as_argv USER: in $AS, the prefix that runs a command as USER, with
# USER's groups and a clean environment: USER's own HOME, the binaries
# under test, the fake GPUs.  A command after it may begin with more
# NAME=VALUE (env's own syntax): "${AS[@]}" CARDBATON_CONFIG=$LC cmd.
as_argv() {
	AS=(setpriv --reuid="$1" --regid="$(id -g "$1")" --init-groups
		env -i HOME="$L/home-$1" PATH="$CB_BUILD:$L/gpus/bin:/usr/bin:/bin"
		LC_ALL=C FAKE_GPU_DIR="$L/gpus" CARDBATON_WORKER="$CB_BUILD/cardbaton-worker"
		CARDBATON_NVML=off)
}

# as USER CMD...: run CMD as USER (as_argv), in USER's home (no
# ./config.yaml there: the lookup goes on past it).
as() {
	local AS u=$1
	as_argv "$u"
	shift
	(cd "$L/home-$u" && "${AS[@]}" "$@")
}

# The tools as USER on the lab's config: lsub USER ARGS (submit), lst
# USER ARGS (status); ltool USER TOOL ARGS any other.
lsub() { local u=$1; shift; as "$u" cardbaton-submit --config "$LC" "$@"; }
lst() { local u=$1; shift; as "$u" cardbaton-status --config "$LC" "$@"; }
ltool() { local u=$1 t=$2; shift 2; as "$u" "cardbaton-$t" --config "$LC" "$@"; }

# lab_field ID KEY: a field of job ID's status --json element (read as
# root).
lab_field() {
	cardbaton-status --config "$LC" --json "$1" | json "d['jobs'][0]['$2']"
}

# lab_daemon [ARGS...]: the lab's daemon, as root, in the background
# ($DAEMON_PID, log $T/daemon.log; stop_daemon stops it); returns once
# it serves.
lab_daemon() {
	local before
	before=$(grep -c 'serving' "$T/daemon.log" 2>/dev/null || true)
	cardbaton-spoold --config "$LC" "$@" >>"$T/daemon.log" 2>&1 &
	DAEMON_PID=$!
	wait_for 10 '[ "$(grep -c serving "$T/daemon.log")" -gt "${before:-0}" ]'
}

# lab_once: one pass of the daemon (accept new/, then exit), as root.
lab_once() { cardbaton-spoold --config "$LC" --once >>"$T/daemon.log" 2>&1; }

# lab_spool: the spool made by the daemon, with no job in it.
lab_spool() { [ -d "$LS/new" ] || lab_once; }

# lab_drop USER FILE [NAME]: USER writes FILE (a path USER can read)
# into new/ by hand, the way LAYOUT.md §4 says (tmp/, then rename),
# under NAME (default: FILE's base name).  The file is USER's, mode
# 0640 (what submit makes) unless MODE is set in the environment.
lab_drop() {
	local u=$1 f=$2 n=${3:-${2##*/}}
	as "$u" sh -c 'umask 077; cat "$1" > "$2/tmp/$3" && chmod "$4" "$2/tmp/$3" && mv "$2/tmp/$3" "$2/new/$3"' \
		sh "$f" "$LS" "$n" "${MODE:-0640}"
}

# lab_reason ORIG: the reason the daemon wrote for the file dropped as
# ORIG (rejected/*.reason).
lab_reason() {
	local f
	f=$(grep -lx "original name: $1" "$LS"/rejected/*.reason 2>/dev/null) || return 1
	sed -n 's/^reason: //p' "$f"
}

# lab_in_etc USER CMD...: run CMD as USER in a private mount namespace
# in which /etc/cardbaton is $LE ($L/etc/cardbaton: write the config
# there first): no other process (another test, a lane beside this one)
# sees it.  A bind mount over the machine's /etc/cardbaton when there is
# one, else an overlay of /etc whose upper layer holds a copy of $LE
# (nothing is made in the machine's /etc either way).
lab_in_etc() {
	local AS u=$1
	shift
	as_argv "$u"
	mkdir -p "$LE" "$L/etc-ns" || return 1
	(cd "$L/home-$u" && unshare -m --propagation private sh -c '
		L=$1; shift
		if [ -d /etc/cardbaton ]; then
			mount --bind "$L/etc/cardbaton" /etc/cardbaton || exit 71
		else
			# The upper layer on a tmpfs of this namespace alone (an
			# overlay cannot be the upper layer of another).
			mount -t tmpfs -o mode=0755 tmpfs "$L/etc-ns" &&
				mkdir "$L/etc-ns/up" "$L/etc-ns/work" &&
				cp -a "$L/etc/cardbaton" "$L/etc-ns/up/" &&
				mount -t overlay overlay \
					-o "lowerdir=/etc,upperdir=$L/etc-ns/up,workdir=$L/etc-ns/work" /etc ||
				exit 71
		fi
		exec "$@"' sh "$L" "${AS[@]}" "$@")
}

# lab_rejected ORIG GLOB: the file dropped as ORIG was rejected with one
# line of reason that matches GLOB (a bash pattern: *"max_queued"*).
lab_rejected() {
	local got f
	f=$(grep -lx "original name: $1" "$LS"/rejected/*.reason 2>/dev/null) ||
		{ echo "$1 was not rejected; rejected/: $(ls "$LS/rejected" 2>&1)" >&2; return 1; }
	got=$(sed -n 's/^reason: //p' "$f")
	[ -n "$got" ] && [ "$(printf '%s\n' "$got" | wc -l)" -eq 1 ] ||
		{ echo "$1: not one line of reason: $(cat "$f")" >&2; return 1; }
	# shellcheck disable=SC2053
	[[ $got == $2 ]] || { echo "$1: reason '$got', wanted $2" >&2; return 1; }
}

# lab_rec ID: the path of job ID's record (queued/, running/, paused/,
# done/).
lab_rec() {
	local s
	s=$(printf '%010d' "$1")
	ls "$LS"/queued/*-"$s".job "$LS"/running/"$s".job "$LS"/paused/"$s".job \
		"$LS"/done/"$s".job 2>/dev/null | head -n 1 | grep .
}

# lab_sum ID: job ID's record, its name and its bytes (compare before
# and after: nothing of it changed).
lab_sum() {
	local r
	r=$(lab_rec "$1") || { echo "no record of job $1"; return 0; }
	printf '%s %s\n' "$r" "$(sha256sum < "$r")"
}

# most_per_card FILE...: the most intervals ("START END CARD" lines, as
# the jobs of leasedir.bats and runas.bats write them) that overlap at
# one instant on one card, over all the files.
most_per_card() {
	python3 -c '
import collections, sys
ev = collections.defaultdict(list)
for f in sys.argv[1:]:
    for line in open(f):
        s, e, card = line.split()
        ev[card] += [(int(s), 1), (int(e), -1)]
most = 0
for card, v in ev.items():
    n = 0
    for _, d in sorted(v):      # an end before a start at the same instant
        n += d
        most = max(most, n)
print(most)' "$@"
}
