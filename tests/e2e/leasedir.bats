#!/usr/bin/env bats
# leasedir.bats - a node's lease_dir (issue 34 part 3; LAYOUT.md §8):
# the per-card leases and marks of every account and controller naming
# one directory, with real Unix accounts (tests/lib/lab.bash).  Each of
# alice, bob and carol runs a single-user daemon of her own (her own
# config, spool and remote_state_dir under her home), all on one local
# node over the same fake cards, all naming one lease_dir $LD
# (root's, `install -d -m 1777`): no card is ever held by two of them
# at once, nor by more sharers than max_jobs_per_gpu counted across
# them; a lease_dir or a lease in it that is unsafe (no sticky bit,
# missing, a symlink, a FIFO planted by another) fails the node with
# one line naming it, and never hangs; the sticky bit keeps another's
# lease and mark from being removed or moved; `cardbaton gpus` names
# each holder's account.

load ../lib/common
load ../lib/lab

bats_require_minimum_version 1.5.0
test_timeout 120

setup_file() { lab_accounts cbd; }
teardown_file() { lab_accounts_down cbd; }

U0=GPU-00000000-0000-0000-0000-000000000000
U1=GPU-11111111-1111-1111-1111-111111111111
U2=GPU-22222222-2222-2222-2222-222222222222

setup() {
	setup_common
	lab_setup
	LD=$L/leases
	install -d -m 1777 "$LD"
	DPIDS=()
}

teardown() {
	local p u
	for p in "${DPIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
	for p in "${DPIDS[@]}"; do wait "$p" 2>/dev/null; done
	if [ -z "${BATS_TEST_COMPLETED:-}" ] && [ -n "${L:-}" ]; then
		for u in "$UA" "$UB" "$UC"; do
			[ -s "$T/daemon-$u.log" ] || continue
			{ echo "# --- daemon of $u"; sed 's/^/# /' "$T/daemon-$u.log"; } >&3
			[ -e "$L/home-$u/config.yaml" ] &&
				{ echo "# --- jobs of $u"; ast "$u" --all 2>&1 | sed 's/^/# /'; } >&3
		done
		[ -d "$LD" ] && { echo "# --- $LD"; find "$LD" -printf '# %M %u %p\n' | sort -k3; } >&3
	fi
	lab_teardown
	teardown_common
}

# acct_config USER [LINE...]: USER's own config, $L/home-USER/config.yaml:
# a spool and a remote_state_dir in USER's home, one local node whose
# lease_dir is $LEASE_DIR (default $LD), then each LINE (more of the
# node: indent it four blanks).
acct_config() {
	local u=$1 h=$L/home-$1
	shift
	{
		printf 'spool: %s/spool\nremote_state_dir: %s/state\n' "$h" "$h"
		printf 'nodes:\n  local:\n    local: true\n    lease_dir: %s\n' "${LEASE_DIR:-$LD}"
		[ $# -eq 0 ] || printf '%s\n' "$@"
	} > "$h/config.yaml" || return 1
	chown "$u:$(id -g "$u")" "$h/config.yaml"
}

# acct_daemon USER: USER's daemon on USER's config, as USER (its PID in
# DPIDS, its log $T/daemon-USER.log); returns once it serves.
acct_daemon() {
	local u=$1 AS
	as_argv "$u"
	(cd "$L/home-$u" && exec "${AS[@]}" cardbaton-spoold --config "$L/home-$u/config.yaml") \
		>>"$T/daemon-$u.log" 2>&1 &
	DPIDS+=("$!")
	wait_for 10 'grep -q serving "$T/daemon-$u.log"'
}

# The tools as USER on USER's own config: asub (submit), ast (status),
# agpus (gpus --json); afield USER ID KEY: a field of job ID's status.
asub() { local u=$1; shift; as "$u" cardbaton-submit --config "$L/home-$u/config.yaml" "$@"; }
ast() { local u=$1; shift; as "$u" cardbaton-status --config "$L/home-$u/config.yaml" "$@"; }
agpus() { local u=$1; shift; as "$u" cardbaton-gpus --config "$L/home-$u/config.yaml" --json "$@"; }
afield() { ast "$1" --json "$2" | json "d['jobs'][0]['$3']"; }

# node_view USER: whether USER's daemon last saw its node reachable
# (status --json "nodes"): 1 or 0.
node_view() {
	ast "$1" --json | json '"%d" % d["nodes"][0]["reachable"]'
}

# node_error USER: the reason USER's daemon gives for its node (status
# --json "nodes"), or "None".
node_error() {
	ast "$1" --json | json 'd["nodes"][0].get("error")'
}

# worker USER CMD...: the worker as USER on USER's state and $LEASE_DIR
# (default $LD), the way the daemon runs it for a local node; stopped
# after 10 s, scaled (124: it hung).
worker() {
	local u=$1
	shift
	as "$u" timeout "$(scaled 10)" cardbaton-worker -d "$L/home-$u/state" \
		--lease-dir "${LEASE_DIR:-$LD}" "$@"
}

# not_started USER ID FILE: job ID of USER has not started (whatever a
# launch the worker sent back busy did meanwhile) and FILE, what it
# makes first, is not there.
not_started() {
	[ "$(afield "$1" "$2" started)" = None ] || { echo "job $2 of $1 started" >&2; return 1; }
	case $(afield "$1" "$2" state) in queued | running) ;; *) echo "job $2 of $1 ended" >&2; return 1 ;; esac
	[ ! -e "$3" ] || { echo "$3 is there" >&2; return 1; }
}

# cards LINE...: the fake cards (fake_gpus), readable by every account.
cards() { fake_gpus "$@" && chmod 0644 "$FAKE_GPU_DIR/gpus.csv"; }

# gpus_fails USER TEXT: USER's `cardbaton gpus --json` answers (no
# hang) with the node unreachable and an error containing TEXT.
gpus_fails() {
	local out rc=0
	out=$(as "$1" timeout "$(scaled 20)" cardbaton-gpus --config "$L/home-$1/config.yaml" --json) || rc=$?
	[ "$rc" -ne 124 ] || { echo "cardbaton-gpus hung" >&2; return 1; }
	[ "$(printf '%s' "$out" | json 'd["nodes"][0]["reachable"]')" = False ] ||
		{ echo "gpus: node reachable: $out" >&2; return 1; }
	[[ $(printf '%s' "$out" | json 'd["nodes"][0]["error"]') == *"$2"* ]] ||
		{ echo "gpus: error does not contain '$2': $out" >&2; return 1; }
}

# iv_job FILE SECONDS: a job's argv (after --) that notes "START_NS
# END_NS CUDA_VISIBLE_DEVICES" in FILE, running SECONDS.
iv_job() {
	IV=(sh -c 's=$(date +%s%N); sleep '"$2"'; echo "$s $(date +%s%N) $CUDA_VISIBLE_DEVICES" >> "$0"' "$1")
}

# cards_used FILE...: how many distinct cards the lines name.
cards_used() { cat "$@" | awk '{ print $3 }' | sort -u | wc -l; }

# all_succeeded USER N: USER's spool has N jobs, every one succeeded.
all_succeeded() {
	ast "$1" --json --all | json '"%d %d" % (len(d["jobs"]), sum(j["state"] == "succeeded" for j in d["jobs"]))' > "$T/ok.$1"
	[ "$(cat "$T/ok.$1")" = "$2 $2" ] || { echo "$1: jobs, succeeded: $(cat "$T/ok.$1"), wanted $2" >&2; return 1; }
}

# ---- many accounts, one lease_dir ------------------------------------------

@test "three accounts, three daemons, one lease_dir, three cards: 30 exclusive jobs all succeed and no two ever overlap on one card" {
	cards "0, $U0, NVIDIA Fake A100, 0, 81920, 0" "1, $U1, NVIDIA Fake A100, 0, 81920, 0" \
		"2, $U2, NVIDIA Fake A100, 0, 81920, 0"
	for u in "$UA" "$UB" "$UC"; do acct_config "$u"; acct_daemon "$u"; done
	for u in "$UA" "$UB" "$UC"; do
		iv_job "$L/home-$u/iv" 0.2
		asub "$u" --gpu-count 1 --array 1-10 -- "${IV[@]}" > "$T/ids.$u"
		[ "$(wc -l < "$T/ids.$u")" = 10 ]
	done
	logs=("$L/home-$UA/iv" "$L/home-$UB/iv" "$L/home-$UC/iv")
	wait_for 90 '[ "$(cat "${logs[@]}" 2>/dev/null | wc -l)" -ge 30 ]'
	for u in "$UA" "$UB" "$UC"; do wait_for 20 all_succeeded "$u" 10; done
	[ "$(cat "${logs[@]}" | wc -l)" = 30 ]
	# Each ran on one of the cards, named by its UUID.
	[ -z "$(cat "${logs[@]}" | awk '{ print $3 }' | grep -vxE "$U0|$U1|$U2")" ]
	[ "$(most_per_card "${logs[@]}")" = 1 ]
	# The daemons did race for the cards: each placed on all it saw idle.
	[ "$(cards_used "${logs[@]}")" -ge 2 ]
	# The leases are in the lease_dir, regular files of mode 0644, and
	# none in any account's own remote_state_dir.
	for x in $(cat "${logs[@]}" | awk '{ print $3 }' | sort -u); do
		[ -f "$LD/$x" ]
		[ ! -L "$LD/$x" ]
	done
	bad=$(find "$LD" -maxdepth 1 -type f -name 'GPU-*' ! -name '*[+=]*' ! -perm 0644 -printf '%m %p\n')
	[ -z "$bad" ]
	for u in "$UA" "$UB" "$UC"; do
		[ -z "$(find "$L/home-$u/state/leases" -mindepth 1 2>/dev/null)" ]
	done
}

@test "three accounts sharing one lease_dir, max_jobs_per_gpu 2: two accounts' sharers fill a card and the third's waits; 24 sharers never more than 2 on a card" {
	cards "0, $U0, NVIDIA Fake A100, 0, 81920, 0" "1, $U1, NVIDIA Fake A100, 0, 81920, 0"
	for u in "$UA" "$UB" "$UC"; do acct_config "$u" '    max_jobs_per_gpu: 2'; acct_daemon "$u"; done
	go() { echo 'touch "$0.started"; until [ -e "$0" ]; do sleep 0.05; done'; }
	a=$(asub "$UA" --gpus 0 --share --gpu-memory 20000 -- sh -c "$(go)" "$L/go.a")
	wait_for 20 '[ "$(afield "$UA" "$a" state)" = running ]'
	b=$(asub "$UB" --gpus 0 --share --gpu-memory 20000 -- sh -c "$(go)" "$L/go.b")
	wait_for 20 '[ "$(afield "$UB" "$b" state)" = running ]'
	# alice and bob share card 0; carol's sharer for it finds it full.
	c=$(asub "$UC" --gpus 0 --share --gpu-memory 20000 -- sh -c "$(go)" "$L/go.c")
	agpus "$UC" | json 'd["nodes"][0]["gpus"][0]' > "$T/card0"
	[ "$(json 'len(d["leases"])' < "$T/card0")" = 2 ]
	[ "$(json 'sorted(d["lease_accounts"])' < "$T/card0")" = "$(printf '["%s", "%s"]' "$UA" "$UB")" ]
	settle 1.5
	not_started "$UC" "$c" "$L/go.c.started"
	# Two sharers' marks beside the lease, alice's and bob's.
	[ "$(find "$LD" -maxdepth 1 -name "$U0+*" -printf '%u\n' | sort | tr '\n' ' ')" = \
		"$(printf '%s\n' "$UA" "$UB" | sort | tr '\n' ' ')" ]
	touch "$L/go.a"
	wait_for 30 '[ "$(afield "$UC" "$c" state)" = running ]'
	touch "$L/go.b" "$L/go.c"
	for u in "$UA" "$UB" "$UC"; do wait_for 20 all_succeeded "$u" 1; done
	# Then eight sharers from each, all at once.
	for u in "$UA" "$UB" "$UC"; do
		iv_job "$L/home-$u/iv" 0.3
		asub "$u" --share --gpu-memory 20000 --array 1-8 -- "${IV[@]}" > "$T/ids.$u"
	done
	logs=("$L/home-$UA/iv" "$L/home-$UB/iv" "$L/home-$UC/iv")
	wait_for 90 '[ "$(cat "${logs[@]}" 2>/dev/null | wc -l)" -ge 24 ]'
	for u in "$UA" "$UB" "$UC"; do wait_for 20 all_succeeded "$u" 9; done
	[ "$(cat "${logs[@]}" | wc -l)" = 24 ]
	[ -z "$(cat "${logs[@]}" | awk '{ print $3 }' | grep -vxE "$U0|$U1")" ]
	[ "$(most_per_card "${logs[@]}")" -le 2 ]
}

# ---- a hostile lease_dir ---------------------------------------------------

@test "a lease_dir writable by others without the sticky bit fails the node (71, one line naming it): the job waits, gpus shows it unreachable; chmod 1777 and it runs" {
	python3 -c 'import os, sys; os.chmod(sys.argv[1], 0o777)' "$LD"
	acct_config "$UA"
	run --separate-stderr worker "$UA" gpus
	failed 71 cardbaton-worker
	[ "$stderr" = "cardbaton-worker: lease_dir $LD: writable by others without the sticky bit" ]
	# Group-writable without the sticky bit: the same; 3770 with a group: fine.
	chgrp "$LAB_GROUP" "$LD"
	python3 -c 'import os, sys; os.chmod(sys.argv[1], 0o2770)' "$LD"
	run --separate-stderr worker "$UA" gpus
	failed 71 cardbaton-worker
	[[ $stderr == "cardbaton-worker: lease_dir $LD: "*"without the sticky bit" ]]
	python3 -c 'import os, sys; os.chmod(sys.argv[1], 0o3770)' "$LD"
	run --separate-stderr worker "$UA" gpus
	[ "$status" -eq 0 ]
	python3 -c 'import os, sys; os.chmod(sys.argv[1], 0o777)' "$LD"
	chgrp root "$LD"
	acct_daemon "$UA"
	id=$(asub "$UA" -- touch "$L/home-$UA/ran")
	gpus_fails "$UA" "lease_dir $LD: writable by others without the sticky bit"
	wait_for 20 '[ "$(node_view "$UA")" = 0 ]'
	# The daemon's own view names the worker's reason, not just a failure.
	[ "$(node_error "$UA")" = "lease_dir $LD: writable by others without the sticky bit" ]
	settle 1        # the negative: a retry or two, and still nothing placed
	[ "$(afield "$UA" "$id" state)" = queued ]
	[ "$(afield "$UA" "$id" attempts)" = 0 ]
	[ ! -e "$L/home-$UA/ran" ]
	python3 -c 'import os, sys; os.chmod(sys.argv[1], 0o1777)' "$LD"
	wait_for 90 '[ "$(afield "$UA" "$id" state)" = succeeded ]'
	[ -e "$L/home-$UA/ran" ]
}

@test "a missing lease_dir, a file or a symlink as the lease_dir fails the node with one line naming it; nothing is placed until it is made" {
	LEASE_DIR=$L/nope
	acct_config "$UA"
	run --separate-stderr worker "$UA" gpus
	failed 71 cardbaton-worker
	[[ $stderr == "cardbaton-worker: lease_dir $L/nope: "* ]]
	[[ $stderr == *"No such file or directory"* ]]
	# Not a directory.
	: > "$L/nope"
	run --separate-stderr worker "$UA" gpus
	failed 71 cardbaton-worker
	[[ $stderr == "cardbaton-worker: lease_dir $L/nope: "* ]]
	[[ $stderr == *[Nn]"ot a directory"* ]]
	rm "$L/nope"
	# A symlink to a good lease_dir: not followed.
	ln -s "$LD" "$L/nope"
	run --separate-stderr worker "$UA" gpus
	failed 71 cardbaton-worker
	[[ $stderr == "cardbaton-worker: lease_dir $L/nope: "* ]]
	[[ $stderr == *"symbolic link"* ]]
	rm "$L/nope"
	acct_daemon "$UA"
	id=$(asub "$UA" -- touch "$L/home-$UA/ran")
	gpus_fails "$UA" "lease_dir $L/nope: "
	wait_for 20 '[ "$(node_view "$UA")" = 0 ]'
	settle 1        # the negative: a retry or two, and still nothing placed
	[ "$(afield "$UA" "$id" state)" = queued ]
	[ "$(afield "$UA" "$id" attempts)" = 0 ]
	[ ! -e "$L/home-$UA/ran" ]
	# The admin makes it: the job runs, its lease there.
	install -d -m 1777 "$L/nope"
	wait_for 90 '[ "$(afield "$UA" "$id" state)" = succeeded ]'
	[ -f "$L/nope/$U0" ]
}

# planted KIND: bob plants KIND (symlink: to a file of his that anyone
# may read; fifo) as the lease of card 0 before anyone leased it;
# alice's daemon places nothing on the node (not on card 1 either),
# her tools and her daemon answer, the error names the lease; bob
# removes it and alice's job runs, its lease hers.
planted() {
	acct_config "$UA"
	case $1 in
	symlink)
		install -m 0644 -o "$UB" /dev/null "$L/bob.file"
		as "$UB" ln -s "$L/bob.file" "$LD/$U0" ;;
	fifo)
		as "$UB" mkfifo -m 0666 "$LD/$U0" ;;
	esac
	run --separate-stderr worker "$UA" gpus
	failed 71 cardbaton-worker
	[[ $stderr == "cardbaton-worker: $LD/$U0: "* ]]
	acct_daemon "$UA"
	id=$(asub "$UA" -- touch "$L/home-$UA/ran")
	gpus_fails "$UA" "$LD/$U0: "
	wait_for 20 '[ "$(node_view "$UA")" = 0 ]'
	settle 1        # the negative: a retry or two, and still nothing placed
	# The daemon is not stuck on it.
	run as "$UA" timeout "$(scaled 10)" cardbaton-status --config "$L/home-$UA/config.yaml"
	[ "$status" -eq 0 ]
	[ "$(afield "$UA" "$id" state)" = queued ]
	[ "$(afield "$UA" "$id" attempts)" = 0 ]
	[ ! -e "$L/home-$UA/ran" ]
	[ "$(cat "$L/bob.file" 2>/dev/null)" = "" ]
	as "$UB" rm "$LD/$U0"
	wait_for 90 '[ "$(afield "$UA" "$id" state)" = succeeded ]'
	[ -f "$LD/$U0" ]
	[ ! -L "$LD/$U0" ]
	[ "$(stat -c '%U %a' "$LD/$U0")" = "$UA 644" ]
}

@test "a symlink another account planted as a card's lease in the lease_dir: the node fails naming the lease, nothing placed, no hang; removed, the job runs" {
	cards "0, $U0, NVIDIA Fake A100, 0, 81920, 0" "1, $U1, NVIDIA Fake A100, 0, 81920, 0"
	planted symlink
}

@test "a FIFO another account planted as a card's lease in the lease_dir: the node fails naming the lease, nothing placed, never a hang; removed, the job runs" {
	cards "0, $U0, NVIDIA Fake A100, 0, 81920, 0" "1, $U1, NVIDIA Fake A100, 0, 81920, 0"
	planted fifo
}

@test "under the sticky bit bob can neither remove nor move alice's lease and mark; his job for the card waits until hers ends; gpus names alice as the holder's account" {
	cards "0, $U0, NVIDIA Fake A100, 0, 81920, 0"
	acct_config "$UA"
	acct_config "$UB"
	acct_daemon "$UA"
	acct_daemon "$UB"
	a=$(asub "$UA" -- sh -c 'until [ -e "$0" ]; do sleep 0.05; done' "$L/go")
	wait_for 20 '[ "$(afield "$UA" "$a" state)" = running ]'
	# The lease is alice's, 0644; beside it one mark, alice's.
	[ -f "$LD/$U0" ]
	[ "$(stat -c '%U %a' "$LD/$U0")" = "$UA 644" ]
	marks=("$LD/$U0"[+=]*)
	[ "${#marks[@]}" = 1 ]
	[ -f "${marks[0]}" ]
	[ "$(stat -c %U "${marks[0]}")" = "$UA" ]
	for f in "$LD/$U0" "${marks[0]}"; do
		run as "$UB" rm -f "$f"
		[ "$status" -ne 0 ]
		[[ $output == *"Operation not permitted"* ]]
		run as "$UB" mv "$f" "$LD/bob-took-it"
		[ "$status" -ne 0 ]
		[[ $output == *"Operation not permitted"* ]]
		run as "$UB" sh -c ': > "$1"' sh "$f"
		[ "$status" -ne 0 ]
		[ -e "$f" ]
		[ ! -e "$LD/bob-took-it" ]
	done
	b=$(asub "$UB" -- touch "$L/home-$UB/ran")
	agpus "$UB" | json 'd["nodes"][0]["gpus"][0]' > "$T/card0"
	[ "$(json 'len(d["leases"])' < "$T/card0")" = 1 ]
	[ "$(json 'd["lease_accounts"]' < "$T/card0")" = "[\"$UA\"]" ]
	as "$UB" cardbaton-gpus --config "$L/home-$UB/config.yaml" > "$T/table"
	grep -qF "($UA)" "$T/table"
	settle 1.5
	not_started "$UB" "$b" "$L/home-$UB/ran"
	touch "$L/go"
	wait_for 20 '[ "$(afield "$UA" "$a" state)" = succeeded ]'
	wait_for 30 '[ "$(afield "$UB" "$b" state)" = succeeded ]'
	[ -e "$L/home-$UB/ran" ]
}

@test "files bob planted under the names of alice's next mark (.UUID=ID, then UUID=ID): her launch fails naming each, nothing runs, the card is nobody's; once he removes them her job runs" {
	cards "0, $U0, NVIDIA Fake A100, 0, 81920, 0"
	acct_config "$UA"
	a=$(asub "$UA" -- touch "$L/home-$UA/ran")
	aid=$(cat "$L/home-$UA/spool/id")-$a-0
	as "$UB" touch "$LD/.$U0=$aid" "$LD/$U0=$aid"
	acct_daemon "$UA"
	wait_for 30 '[[ $(node_error "$UA") == *"$LD/.$U0=$aid: Operation not permitted"* ]]'
	not_started "$UA" "$a" "$L/home-$UA/ran"
	# Its temporary name free, the rename onto bob's file fails: named too.
	as "$UB" rm "$LD/.$U0=$aid"
	wait_for 60 '[[ $(node_error "$UA") == *"$LD/$U0=$aid: Operation not permitted"* ]]'
	not_started "$UA" "$a" "$L/home-$UA/ran"
	# No lease of alice's is left held: bob's own job may take the card.
	acct_config "$UB"
	acct_daemon "$UB"
	b=$(asub "$UB" -- touch "$L/home-$UB/ran")
	wait_for 30 '[ "$(afield "$UB" "$b" state)" = succeeded ]'
	not_started "$UA" "$a" "$L/home-$UA/ran"
	as "$UB" rm "$LD/$U0=$aid"
	wait_for 90 '[ "$(afield "$UA" "$a" state)" = succeeded ]'
	[ -e "$L/home-$UA/ran" ]
}

# ---- the config ------------------------------------------------------------

@test "lease_dir must be an absolute path: 78 from submit and the daemon naming lease_dir; a Slurm node takes no lease_dir (78); an SSH node may have one" {
	local node
	C=$T/config.yaml
	for node in '  local:\n    local: true\n    lease_dir: relative/leases' \
		'  c:\n    slurm:\n      partition: gpu\n    lease_dir: /var/lib/cardbaton/leases'; do
		printf "spool: ./spool\nnodes:\n$node\n" > "$C"
		run --separate-stderr cardbaton-submit --config "$C" -- true
		failed 78 cardbaton-submit
		[[ $stderr == *lease_dir* ]]
		run --separate-stderr timeout "$(scaled 10)" cardbaton-spoold --config "$C" --once
		failed 78 cardbaton-spoold
		[[ $stderr == *lease_dir* ]]
	done
	printf 'spool: ./spool\nnodes:\n  a:\n    ssh: lab-a\n    lease_dir: /var/lib/cardbaton/leases\n' > "$C"
	run --separate-stderr cardbaton-submit --config "$C" --hold -- true
	[ "$status" -eq 0 ]
}
