#!/usr/bin/env bats
# sshhosts.bats - the SSH test-host harness itself (tests/lib/sshhosts.bash):
# three network namespaces with their own sshd, reached over real TCP from
# a client namespace; per-host environment and fake GPUs; partitions,
# cut connections and nvidia-smi faults; clean bring-up and tear-down.

load ../lib/common
load ../lib/sshhosts

bats_require_minimum_version 1.5.0
test_timeout 30

# bats 1.8 cannot skip in setup_file (it reports a failure): skip in setup.
setup_file() {
	hosts_available || return 0
	hosts_up 3
	# For the stale-run test: our run's owner must be a live process.
	export SUITE_OWNER=$$
}

teardown_file() {
	hosts_down
}

setup() {
	[ -n "${HOSTS_UID:-}" ] || skip "needs root, ip netns and /usr/sbin/sshd"
	T=$BATS_TEST_TMPDIR
}

teardown() {
	# Put back whatever a test changed on the shared hosts.
	[ -n "${HOSTS_UID:-}" ] || return 0
	local i
	for i in 1 2 3; do
		host_heal "$i" 2>/dev/null
		host_nvsmi_ok "$i" 2>/dev/null
		host_default_gpus "$i" 2>/dev/null
	done
}

ms_since() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }

# The smallest of the printed millisecond times of running "$@" 5 times.
min_ms() {
	local i s t best=
	for i in 1 2 3 4 5; do
		s=$(date +%s%N)
		"$@" >/dev/null || return 1
		t=$(ms_since "$s")
		[ -z "$best" ] || [ "$t" -lt "$best" ] && best=$t
	done
	echo "$best"
}

# Forget the suite's hosts in this (sub)shell, to make other runs.
forget_hosts() {
	unset HOSTS_UID HOSTS_N HOSTS_NET CLIENT_NS SSH_CONFIG CLIENT_KEY HOSTS_DIR HOSTS_UP_MS
}

@test "three hosts come up, each a namespace with its own sshd, and nothing routes outside" {
	echo "# bring-up of 3 hosts: ${HOSTS_UP_MS} ms" >&3
	[ "$HOSTS_N" = 3 ]
	for ns in "$CLIENT_NS" "$(host_ns 1)" "$(host_ns 2)" "$(host_ns 3)"; do
		[ -e "/run/netns/$ns" ]
		# No default route, and an outside address is unreachable.
		[ -z "$(ip -n "$ns" route show default)" ]
		run ip netns exec "$ns" ip route get 192.0.2.1
		[ "$status" -ne 0 ]
	done
	for i in 1 2 3; do
		pid=$(host_sshd_pid "$i")
		_cbh_running "$pid"
		# That sshd lives in host i's network namespace.
		[ "$(readlink "/proc/$pid/ns/net")" = "$(ip netns exec "$(host_ns "$i")" readlink /proc/self/ns/net)" ]
		[ "$(host_addr "$i")" = "$HOSTS_NET.$i" ]
		[[ "$HOSTS_NET" == 10.200.* ]]
	done
	# The client namespace holds only lo, the bridge and the host ports.
	[ "$(ip -n "$CLIENT_NS" -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | sort | tr '\n' ' ')" = "br0 lo vh1 vh2 vh3 " ]
	# The route options that keep a connection's set-up fast.
	ip -n "$CLIENT_NS" route | grep -q quickack
	ip -n "$(host_ns 2)" route | grep -q quickack
}

@test "each host answers with its own hostname, CARDBATON_HOST, HOME, TMPDIR and PATH" {
	for i in 1 2 3; do
		run host_ssh "$i" 'hostname; echo "$CARDBATON_HOST"; echo "$HOME"; echo "$TMPDIR"; echo "$FAKE_GPU_DIR"; command -v nvidia-smi'
		[ "$status" -eq 0 ]
		[ "${lines[0]}" = "host$i" ]
		[ "${lines[1]}" = "host$i" ]
		[ "${lines[2]}" = "$(host_home "$i")" ]
		[ "${lines[3]}" = "$HOSTS_DIR/host$i/tmp" ]
		[ "${lines[4]}" = "$(host_gpu_dir "$i")" ]
		[ "${lines[5]}" = "$(host_bin_dir "$i")/nvidia-smi" ]
	done
	run host_ssh 1 hostname
	[ "$output" = host1 ]
	run host_ssh 3 'echo $CARDBATON_HOST'
	[ "$output" = host3 ]
	# The fake nvidia-smi comes first in each host's PATH.
	run host_ssh 2 'command -v nvidia-smi'
	[ "$output" = "$(host_bin_dir 2)/nvidia-smi" ]
	# Arguments are joined and run by the remote shell, as with ssh.
	run host_ssh 1 echo a '"b c"' -n
	[ "$output" = "a b c -n" ]
	# The machine's own hostname is untouched.
	[ "$(hostname)" != host1 ]
}

@test "nvidia-smi on each host shows that host's fixture, and fixture edits show at once" {
	run host_ssh 2 nvidia-smi --query-gpu=index,uuid,memory.used --format=csv,noheader,nounits
	[ "$status" -eq 0 ]
	[ "${#lines[@]}" -eq 2 ]
	[ "${lines[0]}" = "0, $(host_gpu_uuid 2 0), 0" ]
	[ "${lines[1]}" = "1, GPU-00020001-0000-4000-8000-000200000001, 30000" ]
	run host_ssh 1 nvidia-smi --query-gpu=index,uuid,memory.used,utilization.gpu --format=csv,noheader,nounits
	[ "${#lines[@]}" -eq 4 ]
	[ "${lines[3]}" = "3, $(host_gpu_uuid 1 3), 0, 0" ]
	run host_ssh 3 nvidia-smi --query-gpu=index --format=csv,noheader
	[ "${#lines[@]}" -eq 8 ]
	run host_ssh 3 nvidia-smi --query-compute-apps=gpu_uuid,pid,used_memory --format=csv,noheader,nounits
	[ "$output" = "$(host_gpu_uuid 3 0), 4242, 500" ]
	run host_ssh 1 nvidia-smi --query-compute-apps=gpu_uuid,pid --format=csv,noheader
	[ "$status" -eq 0 ] && [ -z "$output" ]
	# UUIDs are distinct across hosts.
	all=$(for i in 1 2 3; do host_ssh "$i" nvidia-smi --query-gpu=uuid --format=csv,noheader; done)
	[ "$(echo "$all" | wc -l)" -eq 14 ]
	[ "$(echo "$all" | sort -u | wc -l)" -eq 14 ]
	# A test edits a host's fixture while it runs.
	host_gpus 2 "0, $(host_gpu_uuid 2 0), NVIDIA A100-PCIE-40GB, 12345, 40960, 50"
	host_apps 2 "$(host_gpu_uuid 2 0), 777, 12000"
	run host_ssh 2 nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits
	[ "$output" = "0, 12345" ]
	run host_ssh 2 nvidia-smi --query-compute-apps=pid --format=csv,noheader
	[ "$output" = 777 ]
	host_apps 2
	run host_ssh 2 nvidia-smi --query-compute-apps=pid --format=csv,noheader
	[ -z "$output" ]
	[ -f "$(host_gpu_dir 2)/gpus.csv" ] && [ "$(host_gpu_dir 2)" = "$HOSTS_DIR/host2/gpus" ]
}

@test "a ControlMaster connection is reused: later commands are fast and make no new login" {
	cm=(-o ControlMaster=auto -o "ControlPath=$T/cm-%n" -o ControlPersist=30)
	new=$(min_ms host_ssh 1 true)
	logins0=$(grep -c 'Accepted publickey' "$(host_dir 1)/sshd.log")
	in_client ssh -F "$SSH_CONFIG" "${cm[@]}" host1 true
	run in_client ssh -F "$SSH_CONFIG" "${cm[@]}" -O check host1
	[ "$status" -eq 0 ]
	[[ "$output" == *"Master running"* ]]
	via=$(min_ms in_client ssh -F "$SSH_CONFIG" "${cm[@]}" host1 true)
	run in_client ssh -F "$SSH_CONFIG" "${cm[@]}" host1 'echo $CARDBATON_HOST'
	[ "$output" = host1 ]
	# One login for the master, none for the 6 commands through it.
	[ "$(grep -c 'Accepted publickey' "$(host_dir 1)/sshd.log")" -eq $((logins0 + 1)) ]
	echo "# new connection (ssh + login + true, best of 5): ${new} ms" >&3
	echo "# command through a ControlMaster (best of 5): ${via} ms" >&3
	[ "$via" -lt 1000 ]
	[ "$via" -lt "$new" ]
	in_client ssh -F "$SSH_CONFIG" "${cm[@]}" -O exit host1 2>/dev/null
}

@test "partition: a new connection fails after ConnectTimeout, a master stalls; heal: both work again" {
	cm=(-o ControlMaster=auto -o "ControlPath=$T/cm-%n" -o ControlPersist=30)
	in_client ssh -F "$SSH_CONFIG" "${cm[@]}" host2 true
	host_partition 2
	s=$(date +%s%N)
	run host_ssh 2 true
	took=$(ms_since "$s")
	echo "# partitioned: new connection failed (exit $status) after ${took} ms" >&3
	[ "$status" -eq 255 ]
	[ "$took" -ge 1500 ] && [ "$took" -lt 3500 ]
	# Only host 2 is cut off.
	run host_ssh 3 echo ok
	[ "$output" = ok ]
	# A command through the open master hangs (no error) until the heal.
	in_client ssh -F "$SSH_CONFIG" "${cm[@]}" host2 'echo through' > "$T/through" 2>&1 &
	mpid=$!
	settle 0.5
	[ ! -s "$T/through" ]
	host_heal 2
	s=$(date +%s%N)
	wait "$mpid"
	echo "# healed: stalled command through the master finished $(ms_since "$s") ms later" >&3
	[ "$(cat "$T/through")" = through ]
	run host_ssh 2 'echo $CARDBATON_HOST'
	[ "$status" -eq 0 ] && [ "$output" = host2 ]
	in_client ssh -F "$SSH_CONFIG" "${cm[@]}" -O exit host2 2>/dev/null
}

@test "host_cut kills an open session at once; a setsid process on the host keeps running" {
	host_ssh 2 'setsid sh -c "echo \$\$ > \$TMPDIR/bg.pid; exec sleep 60" </dev/null >/dev/null 2>&1 & sleep 30' \
		>/dev/null 2>&1 &
	spid=$!
	wait_for 5 '[ -s "$HOSTS_DIR/host2/tmp/bg.pid" ]'
	bg=$(cat "$HOSTS_DIR/host2/tmp/bg.pid")
	s=$(date +%s%N)
	host_cut 2
	rc=0
	wait "$spid" || rc=$?
	took=$(ms_since "$s")
	echo "# host_cut: ssh exited $rc after ${took} ms" >&3
	[ "$rc" -eq 255 ]
	[ "$took" -lt 2000 ]
	settle 0.2
	_cbh_running "$bg"
	# It is on host 2 (its network namespace), seen from there too.
	[ "$(readlink "/proc/$bg/ns/net")" = "$(in_host 2 readlink /proc/self/ns/net)" ]
	run host_ssh 2 "cut -d' ' -f3 /proc/$bg/stat"
	[ "$output" = S ]
	# New connections work at once.
	run host_ssh 2 true
	[ "$status" -eq 0 ]
	kill -9 "$bg"
}

@test "nvidia-smi faults: fail (driver error, exit 9), custom message, hang, ok" {
	q=(nvidia-smi --query-gpu=index --format=csv,noheader)
	host_nvsmi_fail 1
	run host_ssh 1 "${q[@]}"
	[ "$status" -eq 9 ]
	[[ "$output" == *"couldn't communicate with the NVIDIA driver"* ]]
	# Other hosts are not affected.
	run host_ssh 2 "${q[@]}"
	[ "$status" -eq 0 ] && [ "${#lines[@]}" -eq 2 ]
	host_nvsmi_fail 1 "Unable to determine the device handle for GPU0000:17:00.0: Unknown Error"
	run host_ssh 1 "${q[@]}"
	[ "$status" -eq 9 ] && [ "$output" = "Unable to determine the device handle for GPU0000:17:00.0: Unknown Error" ]
	host_nvsmi_ok 1
	run host_ssh 1 "${q[@]}"
	[ "$status" -eq 0 ] && [ "${#lines[@]}" -eq 4 ]
	# Hang: a caller's deadline fires; without one it answers late.
	host_nvsmi_hang 3 1
	run host_ssh 3 timeout 0.3 "${q[@]}"
	[ "$status" -eq 124 ]
	s=$(date +%s%N)
	run host_ssh 3 "${q[@]}"
	took=$(ms_since "$s")
	[ "$status" -eq 0 ] && [ "${#lines[@]}" -eq 8 ]
	[ "$took" -ge 1000 ]
	host_nvsmi_ok 3
	s=$(date +%s%N)
	run host_ssh 3 "${q[@]}"
	[ "$status" -eq 0 ] && [ "$(ms_since "$s")" -lt 1000 ]
}

@test "hosts_down removes everything, twice is fine; a failed hosts_up leaves nothing" {
	links0=$(ip -o link show | wc -l)
	(
		forget_hosts
		hosts_up 1
		echo "$HOSTS_UID $HOSTS_DIR $(host_sshd_pid 1) $(host_ns 1) $CLIENT_NS" > "$T/run"
		[ "$(host_ssh 1 'echo $CARDBATON_HOST')" = host1 ]
		# Something started on the host outlives its session ...
		host_ssh 1 'setsid sleep 60 </dev/null >/dev/null 2>&1 & echo $!' > "$T/bg"
		hosts_down
		hosts_down
	)
	read -r u dir pid hns cns < "$T/run"
	[ ! -e "/run/netns/$hns" ] && [ ! -e "/run/netns/$cns" ]
	[ -z "$(ip netns list | grep -- "-$u-")" ]
	[ ! -e "$dir" ] && [ ! -e "$CBH_RUN_ROOT/$u" ]
	not _cbh_running "$pid"
	# ... but not hosts_down.
	bg=$(cat "$T/bg")
	[ -n "$bg" ] && ! _cbh_running "$bg"
	# Nothing was ever made in this (the root) namespace.
	[ "$(ip -o link show | wc -l)" -eq "$links0" ]

	# An sshd that cannot start: hosts_up fails and undoes all it made.
	run -1 --separate-stderr bash -c '
		source "$CB_TOP/tests/lib/sshhosts.bash"
		unset HOSTS_UID HOSTS_DIR
		HOSTS_SSHD_EXTRA="NoSuchOption yes" hosts_up 2'
	u=$(echo "$stderr" | sed -n 's/.*hosts_up failed (run \([0-9a-f]*\)).*/\1/p')
	[ -n "$u" ]
	[[ "$stderr" == *NoSuchOption* ]]
	[ -z "$(ip netns list | grep -- "-$u-")" ]
	[ ! -e "$CBH_RUN_ROOT/$u" ]
	# hosts_down with nothing up is a no-op.
	( forget_hosts; hosts_down )
	# The suite's hosts are unharmed.
	run host_ssh 1 true
	[ "$status" -eq 0 ]
}

@test "a killed run's leftovers are reaped by the next hosts_up; live runs are not" {
	# A run whose owner exits without hosts_down, like a killed suite.
	bash -c '
		source "$CB_TOP/tests/lib/sshhosts.bash"
		unset HOSTS_UID HOSTS_DIR
		HOSTS_DIR=$1/stale hosts_up 1 || exit 1
		echo "$HOSTS_UID $(host_sshd_pid 1)" > "$1/stale.run"' sh "$T"
	read -r su spid < "$T/stale.run"
	_cbh_running "$spid"
	[ -e "/run/netns/cbh-$su-1" ] && [ -d "$T/stale" ]
	(
		forget_hosts
		hosts_up 1
		hosts_down
	)
	not _cbh_running "$spid"
	[ ! -e "/run/netns/cbh-$su-1" ] && [ ! -e "/run/netns/cbh-$su-c" ]
	[ ! -e "$T/stale" ] && [ ! -e "$CBH_RUN_ROOT/$su" ]
	# The suite's own run (owner alive) was left alone.
	[ -d "$CBH_RUN_ROOT/$HOSTS_UID" ]
	read -r owner _ < "$CBH_RUN_ROOT/$HOSTS_UID/owner"
	[ "$owner" = "$SUITE_OWNER" ]
	run host_ssh 3 'echo $CARDBATON_HOST'
	[ "$output" = host3 ]
}
