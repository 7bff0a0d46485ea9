# tests/lib/sshhosts.bash - real SSH test hosts for the end-to-end suites.
#
# hosts_up N builds, as root, N "hosts": each one a network namespace with
# its own sshd, its own hostname (UTS namespace), HOME, TMPDIR and fake
# GPU set, all reachable over real TCP from one client namespace in
# which the controller side (ssh, cardbaton-spoold, the tools) runs:
#
#     client netns  cbh-U-c     br0 10.200.K.254/24
#                                |-- vh1 <-veth-> eth0 10.200.K.1  netns cbh-U-1 (sshd)
#                                |-- vh2 <-veth-> eth0 10.200.K.2  netns cbh-U-2 (sshd)
#                                ...
#
# Every link and address lives only inside these namespaces: there is
# no default route anywhere and nothing is connected to the root
# namespace, so no packet can reach or come from the outside.
#
# Load it after common.bash (or alone) and call hosts_up from setup_file:
#
#     load ../lib/common
#     load ../lib/sshhosts
#     setup_file() { if hosts_available; then hosts_up 3; fi; }
#     setup() { [ -n "${HOSTS_UID:-}" ] || skip "needs root, ip netns, sshd"; }
#     teardown_file() { hosts_down; }
#
# See tests/lib/README.md for the functions and fault injections.

CBH_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# scaled_ms: its waits are bounds scaled by CB_TEST_TIMEOUT_SCALE.
declare -F scaled_ms >/dev/null || . "$CBH_LIB_DIR/scale.bash"
# Where each run records what it made (owner, namespaces, dirs), so that
# a later run can clean up after one that was killed.
CBH_RUN_ROOT=${CBH_RUN_ROOT:-/run/cbh}
CBH_PREFIX=cbh
CBH_SSHD=${CBH_SSHD:-/usr/sbin/sshd}
CBH_SYS_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

# Nanoseconds (microsecond resolution) without a fork: bats makes forks slow.
_cbh_now() { local t=${EPOCHREALTIME/[.,]/}; echo "${t}000"; }
_cbh_ms_since() { local t=${EPOCHREALTIME/[.,]/}; echo $(( (t - $1 / 1000) / 1000 )); }

# Is PID running (not gone, not a zombie)?  kill -0 says yes to zombies.
_cbh_running() {
	local s
	read -r s 2>/dev/null < "/proc/$1/stat" || return 1
	s=${s##*) }
	case ${s%% *} in Z|X|x) return 1 ;; esac
}
_cbh_err() { echo "sshhosts: $*" >&2; }

# Start time (clock ticks since boot) of PID, empty if there is none.
_cbh_starttime() {
	local s f
	read -r s 2>/dev/null < "/proc/$1/stat" || return 0
	s=${s##*) }
	read -ra f <<< "$s"
	echo "${f[19]}"
}

# hosts_available: 0 when the harness can run here (root, ip netns,
# sshd, ssh, ssh-keygen, unshare, ss).  Suites: hosts_available || skip.
hosts_available() {
	[ "$(id -u)" -eq 0 ] || return 1
	[ -x "$CBH_SSHD" ] || return 1
	local c
	for c in ip ssh ssh-keygen unshare ss; do
		command -v "$c" >/dev/null 2>&1 || return 1
	done
	ip netns list >/dev/null 2>&1 || return 1
	# Namespaces can really be made (not inside a restricted container).
	local probe=$CBH_PREFIX-probe-$$-$RANDOM ok=1
	ip netns add "$probe" 2>/dev/null || return 1
	ip netns exec "$probe" true 2>/dev/null || ok=0
	ip netns del "$probe" 2>/dev/null
	[ "$ok" = 1 ]
}

# Is the run that wrote metadata dir $1 still alive?
_cbh_owner_alive() {
	local pid st
	read -r pid st < "$1/owner" 2>/dev/null || return 1
	[ -n "$pid" ] && [ "$(_cbh_starttime "$pid")" = "$st" ]
}

# Kill (SIGKILL) everything in the given namespaces and whatever sshd a
# pid file in HOSTS_DIR names (if it still runs our config), wait for
# them to go, then delete the namespaces.
_cbh_kill_and_delete() {
	local dir=$1; shift
	local ns pids p f i alive _
	# Rounds, because what runs there may fork while we look.
	for _ in 1 2 3 4 5; do
		pids=()
		for ns in "$@"; do
			[ -e "/run/netns/$ns" ] || continue
			for p in $(ip netns pids "$ns" 2>/dev/null); do
				_cbh_running "$p" && pids+=("$p")
			done
		done
		if [ -n "$dir" ] && [ -d "$dir" ]; then
			for f in "$dir"/host*/sshd.pid; do
				[ -f "$f" ] || continue
				read -r p < "$f" 2>/dev/null || continue
				case $p in ''|*[!0-9]*) continue ;; esac
				_cbh_running "$p" || continue
				if tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null | grep -qF -- "${f%/sshd.pid}/sshd_config"; then
					pids+=("$p")
				fi
			done
		fi
		[ ${#pids[@]} -gt 0 ] || break
		kill -9 "${pids[@]}" 2>/dev/null
		# Gone, or a zombie that its parent (or PID 1) reaps later.
		for ((i = 0; i < 50; i++)); do
			alive=0
			for p in "${pids[@]}"; do
				_cbh_running "$p" && { alive=1; break; }
			done
			[ $alive = 0 ] && break
			sleep 0.02
		done
	done
	for ns in "$@"; do
		[ -e "/run/netns/$ns" ] && ip netns del "$ns" 2>/dev/null
	done
	return 0
}

# Tear down what the run with metadata dir $1 made.
_cbh_destroy_run() {
	local meta=$1 u dir='' nss=()
	u=${meta##*/}
	[ -f "$meta/hostsdir" ] && read -r dir < "$meta/hostsdir"
	# Only namespaces of this run: cbh-U-<i> and cbh-U-c.
	local ns
	for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
		case $ns in "$CBH_PREFIX-$u-"*) nss+=("$ns") ;; esac
	done
	_cbh_kill_and_delete "$dir" "${nss[@]}"
	# The hosts' directory, only if it carries this run's mark.
	if [ -n "$dir" ] && [ -f "$dir/.cbh-$u" ]; then
		rm -rf "$dir"
	fi
	rm -rf "$meta"
}

# Leftovers of earlier runs that were killed before their hosts_down:
# runs whose owner process is gone and that started before this one.
_cbh_reap_stale() {
	local start=$1 meta created
	[ -d "$CBH_RUN_ROOT" ] || return 0
	for meta in "$CBH_RUN_ROOT"/*/; do
		meta=${meta%/}
		[ -d "$meta" ] || continue
		[ "${meta##*/}" = "${HOSTS_UID:-}" ] && continue
		_cbh_owner_alive "$meta" && continue
		read -r created < "$meta/created" 2>/dev/null || created=0
		[ "${created:-0}" -lt "$start" ] || continue
		_cbh_destroy_run "$meta"
	done
}

# The UUID of default card C on host N: GPU-NNNNCCCC-0000-4000-8000-NNNN0000CCCC
# (host 1 card 2: GPU-00010002-0000-4000-8000-000100000002).
host_gpu_uuid() {
	printf 'GPU-%04d%04d-0000-4000-8000-%04d%08d\n' "$1" "$2" "$1" "$2"
}
_cbh_uuid() { printf -v "$1" 'GPU-%04d%04d-0000-4000-8000-%04d%08d' "$2" "$3" "$2" "$3"; }

# The default GPU set of host N (used by hosts_up; host_default_gpus N
# puts it back).  host1: 4 idle A100 80GB; host2: 2 A100 40GB, card 1
# busy (30000 MiB used, 87 %); host3: 8 idle H100 but card 0 runs a
# compute process (pid 4242, 500 MiB); host4 and on: 1 idle card each.
host_default_gpus() {
	local n=$1 c g lines=() apps=()
	case $n in
	1)
		for c in 0 1 2 3; do
			_cbh_uuid g 1 $c
			lines+=("$c, $g, NVIDIA A100-SXM4-80GB, 0, 81920, 0")
		done ;;
	2)
		_cbh_uuid g 2 0
		lines+=("0, $g, NVIDIA A100-PCIE-40GB, 0, 40960, 0")
		_cbh_uuid g 2 1
		lines+=("1, $g, NVIDIA A100-PCIE-40GB, 30000, 40960, 87") ;;
	3)
		for c in 0 1 2 3 4 5 6 7; do
			_cbh_uuid g 3 $c
			lines+=("$c, $g, NVIDIA H100 80GB HBM3, $((c == 0 ? 500 : 0)), 81559, 0")
		done
		_cbh_uuid g 3 0
		apps+=("$g, 4242, 500, python3") ;;
	*)
		_cbh_uuid g "$n" 0
		lines+=("0, $g, NVIDIA L4, 0, 23034, 0") ;;
	esac
	host_gpus "$n" "${lines[@]}"
	host_apps "$n" "${apps[@]}"
}

_cbh_check_n() {
	case ${1:-} in ''|*[!0-9]*) _cbh_err "bad host number '${1:-}'"; return 1 ;; esac
	if [ -z "${HOSTS_N:-}" ] || [ "$1" -lt 1 ] || [ "$1" -gt "$HOSTS_N" ]; then
		_cbh_err "no host $1 (hosts_up made ${HOSTS_N:-0})"
		return 1
	fi
}

# The CARDBATON_NVML value the hosts' sessions get for HOSTS_NVML
# (off, the default: nvidia-smi alone, never the machine's own driver
# library; fake or fake-old: the fake NVML library of $CB_BUILD).
_cbh_nvml() {
	case ${HOSTS_NVML:-off} in
	off) echo off ;;
	fake|fake-old)
		local lib=${CB_BUILD:-}/tests/fake-nvml${HOSTS_NVML#fake}/libnvidia-ml.so.1
		[ -n "${CB_BUILD:-}" ] && [ -f "$lib" ] || { _cbh_err "HOSTS_NVML=$HOSTS_NVML: no $lib (CB_BUILD)"; return 1; }
		echo "$lib" ;;
	*) _cbh_err "HOSTS_NVML: off, fake or fake-old, not '$HOSTS_NVML'"; return 1 ;;
	esac
}

# hosts_up N: bring up N hosts (see the top of this file).  Exports
# HOSTS_N, HOSTS_UID, HOSTS_DIR, HOSTS_NET (10.200.K), CLIENT_NS,
# SSH_CONFIG, CLIENT_KEY.  HOSTS_DIR may be set beforehand; otherwise it
# is $BATS_FILE_TMPDIR/hosts-U (or under $T, or a new temporary dir).
# HOSTS_NVML=fake (or fake-old) gives every host's sessions the fake
# NVML library (CARDBATON_NVML) instead of CARDBATON_NVML=off.
# On failure it prints the sshd logs, undoes everything and returns 1.
hosts_up() {
	local n=${1:?usage: hosts_up N} t0 i k u
	case $n in ''|*[!0-9]*|0) _cbh_err "hosts_up: bad N '$n'"; return 1 ;; esac
	[ "$n" -le 250 ] || { _cbh_err "hosts_up: at most 250 hosts"; return 1; }
	_cbh_nvml >/dev/null || return 1
	if [ -n "${HOSTS_UID:-}" ] && [ -d "$CBH_RUN_ROOT/$HOSTS_UID" ]; then
		_cbh_err "hosts_up: hosts $HOSTS_UID are up; hosts_down first"
		return 1
	fi
	t0=$(_cbh_now)
	mkdir -p "$CBH_RUN_ROOT" || return 1
	# A root sshd insists on its privilege-separation directory.
	[ -d /run/sshd ] || mkdir -m 0755 /run/sshd || return 1
	(set +eET; trap - DEBUG ERR RETURN; _cbh_reap_stale "$t0")

	# A unique run id and a subnet no live run uses.
	u=$(printf '%x%04x' "$$" "$RANDOM")
	while [ -e "$CBH_RUN_ROOT/$u" ]; do u=$(printf '%x%04x' "$$" "$RANDOM"); done
	local used=" " m s
	for m in "$CBH_RUN_ROOT"/*/subnet; do
		[ -f "$m" ] && read -r s < "$m" && used="$used$s "
	done
	k=$(( ($$ + RANDOM) % 256 ))
	for ((i = 0; i < 256; i++)); do
		case $used in *" $k "*) k=$(( (k + 1) % 256 )) ;; *) break ;; esac
	done

	local meta=$CBH_RUN_ROOT/$u
	mkdir "$meta" || return 1
	# Owner: the bats process that called us (setup_file: bats-exec-file).
	echo "$$ $(_cbh_starttime $$)" > "$meta/owner"
	echo "$t0" > "$meta/created"
	echo "$k" > "$meta/subnet"

	export HOSTS_UID=$u HOSTS_N=$n HOSTS_NET=10.200.$k
	export CLIENT_NS=$CBH_PREFIX-$u-c
	if [ -z "${HOSTS_DIR:-}" ] || [ -e "$HOSTS_DIR" ]; then
		local base=${BATS_FILE_TMPDIR:-${T:-}}
		[ -n "$base" ] || base=$(mktemp -d)
		HOSTS_DIR=$base/hosts-$u
	fi
	export HOSTS_DIR
	echo "$HOSTS_DIR" > "$meta/hostsdir"
	export SSH_CONFIG=$HOSTS_DIR/ssh_config CLIENT_KEY=$HOSTS_DIR/client_key
	# In a subshell without the DEBUG/ERR traps and errexit that bats sets:
	# they make every command of the build several times slower.
	if ! (set +eET; trap - DEBUG ERR RETURN; _cbh_build "$n"); then
		_cbh_err "hosts_up failed (run $u); sshd logs:"
		for ((i = 1; i <= n; i++)); do
			[ -s "$HOSTS_DIR/host$i/sshd.log" ] && sed "s/^/host$i: /" "$HOSTS_DIR/host$i/sshd.log" >&2
		done
		hosts_down
		return 1
	fi
	HOSTS_UP_MS=$(_cbh_ms_since "$t0")
	export HOSTS_UP_MS
}

_cbh_build() {
	local n=$1 i d ns fake top pids=() batch nvml
	top=${CB_TOP:-$(cd "$CBH_LIB_DIR/../.." && pwd)}
	nvml=$(_cbh_nvml) || return 1
	fake=$top/tests/fake-nvidia-smi
	[ -x "$fake" ] || { _cbh_err "no $fake"; return 1; }
	local dirs=("$HOSTS_DIR")
	for ((i = 1; i <= n; i++)); do
		d=$HOSTS_DIR/host$i
		dirs+=("$d/bin" "$d/home" "$d/tmp" "$d/gpus")
	done
	mkdir -p "${dirs[@]}" || return 1
	: > "$HOSTS_DIR/.cbh-$HOSTS_UID"

	# Keys: the client's and one host key per host, made in parallel
	# with the network.
	ssh-keygen -q -t ed25519 -N '' -C "cbh-client" -f "$CLIENT_KEY" </dev/null >/dev/null 2>&1 3>&- &
	pids+=($!)
	for ((i = 1; i <= n; i++)); do
		d=$HOSTS_DIR/host$i
		ssh-keygen -q -t ed25519 -N '' -C "host$i" -f "$d/ssh_host_ed25519_key" </dev/null >/dev/null 2>&1 3>&- &
		pids+=($!)
	done

	# Network: all namespaces at once; in the client namespace lo, the
	# bridge and one veth pair per host (its other end, eth0, made right
	# in the host's namespace); then each host's addresses and routes.
	# Nothing is ever made in the namespace we run in.
	batch="netns add $CLIENT_NS"
	for ((i = 1; i <= n; i++)); do batch+=$'\n'"netns add $CBH_PREFIX-$HOSTS_UID-$i"; done
	ip -batch - <<< "$batch" || return 1
	batch="link set lo up
link add br0 type bridge
addr add $HOSTS_NET.254/24 dev br0
link set br0 up
route replace $HOSTS_NET.0/24 dev br0 proto kernel scope link src $HOSTS_NET.254 quickack 1"
	for ((i = 1; i <= n; i++)); do
		batch+=$'\n'"link add vh$i type veth peer name eth0 netns $CBH_PREFIX-$HOSTS_UID-$i"
		batch+=$'\n'"link set vh$i master br0 up"
	done
	ip -n "$CLIENT_NS" -batch - <<< "$batch" || return 1
	for ((i = 1; i <= n; i++)); do
		ip -n "$CBH_PREFIX-$HOSTS_UID-$i" -batch - <<-EOF || return 1
			link set lo up
			addr add $HOSTS_NET.$i/24 dev eth0
			link set eth0 up
			route replace $HOSTS_NET.0/24 dev eth0 proto kernel scope link src $HOSTS_NET.$i quickack 1
		EOF
	done

	# Host files: config, fixtures, PATH.
	local extra=
	# OpenSSH >= 9.8 penalises sources whose connections fail or are cut,
	# which fault-injection tests do on purpose: switch that off there.
	if grep -qai persourcepenalties "$CBH_SSHD" 2>/dev/null; then
		extra="PerSourcePenalties no"
	fi
	for ((i = 1; i <= n; i++)); do
		d=$HOSTS_DIR/host$i
		ln -sf "$fake" "$d/bin/nvidia-smi"
		cat > "$d/sshd_config" <<-EOF
			# sshd of test host host$i ($CBH_PREFIX-$HOSTS_UID-$i), made by tests/lib/sshhosts.bash
			ListenAddress $HOSTS_NET.$i
			Port 22
			HostKey $d/ssh_host_ed25519_key
			PidFile $d/sshd.pid
			UsePAM no
			StrictModes no
			PermitRootLogin prohibit-password
			PubkeyAuthentication yes
			AuthenticationMethods publickey
			PasswordAuthentication no
			KbdInteractiveAuthentication no
			AuthorizedKeysFile $d/authorized_keys
			KexAlgorithms curve25519-sha256
			HostKeyAlgorithms ssh-ed25519
			UseDNS no
			PrintMotd no
			PrintLastLog no
			X11Forwarding no
			Subsystem sftp internal-sftp
			SetEnv PATH=$d/bin:$CBH_SYS_PATH HOME=$d/home TMPDIR=$d/tmp FAKE_GPU_DIR=$d/gpus CARDBATON_HOST=host$i CARDBATON_NVML=$nvml
			${extra}
			${HOSTS_SSHD_EXTRA:-}
		EOF
		host_default_gpus "$i" || return 1
	done

	for i in "${pids[@]}"; do wait "$i" || { _cbh_err "ssh-keygen failed"; return 1; }; done

	# Client side: ssh_config and known_hosts (host keys under their alias).
	local cfg=$HOSTS_DIR/ssh_config kh=$HOSTS_DIR/known_hosts typ key ckey
	read -r ckey < "$CLIENT_KEY.pub" || return 1
	: > "$kh"; : > "$cfg"
	for ((i = 1; i <= n; i++)); do
		d=$HOSTS_DIR/host$i
		printf '%s\n' "$ckey" > "$d/authorized_keys"
		read -r typ key _ < "$d/ssh_host_ed25519_key.pub" || return 1
		printf 'host%s %s %s\n' "$i" "$typ" "$key" >> "$kh"
		printf 'Host host%s\n    HostName %s\n    HostKeyAlias host%s\n' "$i" "$HOSTS_NET.$i" "$i" >> "$cfg"
	done
	cat >> "$cfg" <<-EOF

		Host *
		    User root
		    Port 22
		    IdentityFile $CLIENT_KEY
		    IdentitiesOnly yes
		    UserKnownHostsFile $kh
		    GlobalKnownHostsFile /dev/null
		    StrictHostKeyChecking yes
		    UpdateHostKeys no
		    CheckHostIP no
		    BatchMode yes
		    KexAlgorithms curve25519-sha256
		    HostKeyAlgorithms ssh-ed25519
		    ConnectTimeout 2
	EOF

	# The sshds, each in its host's network namespace and its own UTS
	# namespace (hostname hostN).  The fds bats watches (3 and up) must
	# not leak into them, or bats waits for them at the end.
	local spawned=()
	for ((i = 1; i <= n; i++)); do
		d=$HOSTS_DIR/host$i
		# shellcheck disable=SC2016
		ip netns exec "$CBH_PREFIX-$HOSTS_UID-$i" \
			unshare --uts sh -c 'hostname "$1" && shift && exec "$@"' sh "host$i" \
			"$CBH_SSHD" -f "$d/sshd_config" -D -e \
			</dev/null >>"$d/sshd.log" 2>&1 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&- &
		spawned+=($!)
		disown $!
	done
	# Ready when every sshd has written its pid file (after it listens).
	local t0 ready lim
	t0=$(_cbh_now)
	lim=$(scaled_ms 5) || return 1
	while :; do
		ready=0
		for ((i = 1; i <= n; i++)); do
			if [ -s "$HOSTS_DIR/host$i/sshd.pid" ]; then
				ready=$((ready + 1))
			elif ! _cbh_running "${spawned[i - 1]}"; then
				_cbh_err "sshd of host$i exited"
				return 1
			fi
		done
		[ "$ready" -eq "$n" ] && break
		if [ "$(_cbh_ms_since "$t0")" -gt "$lim" ]; then
			_cbh_err "sshds not ready after $lim ms ($ready of $n)"
			return 1
		fi
		sleep 0.005
	done
}

# hosts_down: kill every process in this run's namespaces (sshds, what
# they started, ssh clients and masters in the client namespace), delete
# the namespaces and HOSTS_DIR.  Safe to call twice or after a failed
# hosts_up.
hosts_down() {
	[ -n "${HOSTS_UID:-}" ] || return 0
	(
		set +eET; trap - DEBUG ERR RETURN
		meta=$CBH_RUN_ROOT/$HOSTS_UID
		if [ -d "$meta" ]; then
			_cbh_destroy_run "$meta"
		else
			# Metadata gone: still remove the namespaces by name.
			nss=()
			for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
				case $ns in "$CBH_PREFIX-$HOSTS_UID-"*) nss+=("$ns") ;; esac
			done
			_cbh_kill_and_delete "${HOSTS_DIR:-}" "${nss[@]}"
		fi
	)
	unset HOSTS_UID HOSTS_N HOSTS_NET CLIENT_NS SSH_CONFIG CLIENT_KEY HOSTS_UP_MS
	unset HOSTS_DIR
	return 0
}

# in_client CMD...: run CMD in the client namespace (fd 3 closed, so a
# background ssh master or daemon does not hold up bats).
in_client() {
	ip netns exec "${CLIENT_NS:?hosts_up first}" "$@" 3>&-
}

# in_host N CMD...: run CMD directly inside host N's network namespace,
# not through ssh: without the host's PATH, HOME, FAKE_GPU_DIR or
# hostname (use host_ssh for those).
in_host() {
	_cbh_check_n "$1" || return 1
	local n=$1; shift
	ip netns exec "$CBH_PREFIX-$HOSTS_UID-$n" "$@" 3>&-
}

# host_ssh N CMD...: run CMD on host N over ssh from the client
# namespace; like ssh, the words are joined with spaces and run by the
# remote shell.  Extra ssh options: HOST_SSH_OPTS=(-o X=y) before.
host_ssh() {
	_cbh_check_n "$1" || return 1
	local n=$1; shift
	ip netns exec "$CLIENT_NS" ssh -F "$SSH_CONFIG" "${HOST_SSH_OPTS[@]}" "host$n" -- "$@" 3>&-
}

host_ns() { _cbh_check_n "$1" && echo "$CBH_PREFIX-$HOSTS_UID-$1"; }
host_addr() { _cbh_check_n "$1" && echo "$HOSTS_NET.$1"; }
host_dir() { _cbh_check_n "$1" && echo "$HOSTS_DIR/host$1"; }
host_gpu_dir() { _cbh_check_n "$1" && echo "$HOSTS_DIR/host$1/gpus"; }
host_home() { _cbh_check_n "$1" && echo "$HOSTS_DIR/host$1/home"; }
host_bin_dir() { _cbh_check_n "$1" && echo "$HOSTS_DIR/host$1/bin"; }
host_sshd_pid() { _cbh_check_n "$1" && cat "$HOSTS_DIR/host$1/sshd.pid"; }

_cbh_write() {  # DIR FILE LINE...: replace DIR/FILE atomically
	local dir=$1 f=$2; shift 2
	if [ $# -gt 0 ]; then
		printf '%s\n' "$@" > "$dir/.$f.tmp"
	else
		: > "$dir/.$f.tmp"
	fi && mv -f "$dir/.$f.tmp" "$dir/$f"
}

# host_gpus N LINE...: replace host N's gpus.csv ("index, uuid, name,
# memory.used, memory.total, utilization.gpu" per line), atomically.
host_gpus() { _cbh_check_n "$1" || return 1; local n=$1; shift; _cbh_write "$HOSTS_DIR/host$n/gpus" gpus.csv "$@"; }
# host_apps N [LINE...]: replace apps.csv ("gpu_uuid, pid, used_memory[,
# process_name]"); no LINE: no compute processes.
host_apps() { _cbh_check_n "$1" || return 1; local n=$1; shift; _cbh_write "$HOSTS_DIR/host$n/gpus" apps.csv "$@"; }

# host_nvsmi_fail N [MESSAGE]: nvidia-smi on host N prints MESSAGE (or the
# usual driver error) and exits 9.  host_nvsmi_hang N SECONDS: it sleeps
# first.  host_nvsmi_ok N: neither.
host_nvsmi_fail() {
	_cbh_check_n "$1" || return 1
	local d=$HOSTS_DIR/host$1/gpus
	if [ -n "${2:-}" ]; then printf '%s\n' "$2" > "$d/.fail.tmp"; else : > "$d/.fail.tmp"; fi
	mv -f "$d/.fail.tmp" "$d/fail"
}
host_nvsmi_hang() {
	_cbh_check_n "$1" || return 1
	local d=$HOSTS_DIR/host$1/gpus
	echo "${2:?usage: host_nvsmi_hang N SECONDS}" > "$d/.delay.tmp" && mv -f "$d/.delay.tmp" "$d/delay"
}
host_nvsmi_ok() {
	_cbh_check_n "$1" || return 1
	rm -f "$HOSTS_DIR/host$1/gpus/fail" "$HOSTS_DIR/host$1/gpus/delay"
}

# host_partition N: host N drops off the network (its bridge port goes
# down): new connections time out (ConnectTimeout), open ones stall
# without an error.  host_heal N: back; stalled connections resume.
host_partition() {
	_cbh_check_n "$1" || return 1
	ip -n "$CLIENT_NS" link set "vh$1" down
}
host_heal() {
	_cbh_check_n "$1" || return 1
	ip -n "$CLIENT_NS" link set "vh$1" up
}

# ssh_daemon: cardbaton-spoold --config $C in the client namespace (as an
# operator's controller reaching the hosts), its output appended to
# $T/daemon.log, DAEMON_PID set (ip netns exec execs it: $! is the daemon
# itself); returns once this one says it is serving.
ssh_daemon() {
	local before
	before=$(grep -c serving "$T/daemon.log" 2>/dev/null || true)
	ip netns exec "$CLIENT_NS" cardbaton-spoold --config "$C" >>"$T/daemon.log" 2>&1 3>&- &
	DAEMON_PID=$!
	wait_for 10 '[ "$(grep -c serving "$T/daemon.log")" -gt "${before:-0}" ]'
}

# host_kill_procs N...: SIGKILL every process holding a file of host N's
# state directories (workers, supervisors, jobs: their locks and
# leases), whatever its command line -- a test's leftovers on its hosts.
host_kill_procs() {
	local i p
	[ -n "${HOSTS_DIR:-}" ] || return 0     # no hosts up: none of theirs
	for i in "$@"; do
		for p in $(find /proc/[0-9]*/fd -maxdepth 1 -lname "$HOSTS_DIR/host$i/home/.local/*" 2>/dev/null |
			   cut -d/ -f3 | sort -u); do
			kill -KILL "$p" 2>/dev/null || true
		done
	done
}

# host_cut N: abort every TCP connection to host N's sshd on the client
# side (ss -K in the client namespace): ssh clients, masters and the
# daemon's sessions see the connection die at once (ssh exits 255).
# What runs on the host goes on until its session notices.
host_cut() {
	_cbh_check_n "$1" || return 1
	ip netns exec "$CLIENT_NS" ss -K -t -n dst "$HOSTS_NET.$1" dport = 22 >/dev/null
}
