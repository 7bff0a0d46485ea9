# tests/lib/slurm.bash - a real one-machine Slurm cluster for the
# end-to-end suites (Debian's Slurm 22.05: slurmctld, slurmd, munge).
#
# slurm_up [NGPUS] builds, as root, everything under a fresh $SLURM_DIR
# and starts a private munged, slurmctld and slurmd on loopback: one
# node (named after `hostname -s`, 16 CPUs advertised whatever the
# machine has) with NGPUS (default 4) GPUs in one partition "gpu".
# The GPUs are character devices $SLURM_DIR/dev/nvidiaN (195, N), so
# Slurm books them by index and sets CUDA_VISIBLE_DEVICES per job; the
# node's fake nvidia-smi serves $SLURM_DIR/gpus (NGPUS idle cards, UUIDs
# from slurm_gpu_uuid).  It exports SLURM_CONF, so sbatch, squeue,
# sinfo, scontrol and scancel (and a daemon started by the test) talk
# to this cluster.
#
#     load ../lib/common
#     load ../lib/slurm
#     setup_file() { if slurm_available; then slurm_up 4; fi; }
#     setup() { [ -n "${SLURM_DIR:-}" ] || skip "needs root and Slurm"; }
#     teardown_file() { slurm_down; }
#
# Call slurm_up in setup_file (or setup), not inside `run` or $(...):
# it exports its variables.  With SLURM_NETNS=NS (e.g. the SSH test
# hosts' $CLIENT_NS) the daemons listen on that namespace's loopback:
# Slurm's commands then work there (in_client sbatch ...), not here.  See tests/lib/README.md.

CBS_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# scaled_ms, scaled: its waits are bounds scaled by CB_TEST_TIMEOUT_SCALE.
declare -F scaled_ms >/dev/null || . "$CBS_LIB_DIR/scale.bash"
CBS_SYS_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
# The GPUs' type: with one, Slurm shows the used cards' indices
# (GresUsed=gpu:a100:2(IDX:0-1)); jobs may still ask for --gres=gpu:N.
CBS_GPU_TYPE=a100

_cbs_err() { echo "slurm: $*" >&2; }

# CMD... in $SLURM_NETNS when it is set (a network namespace, e.g. the
# SSH test hosts' client namespace, where a daemon under test runs and
# must reach slurmctld on its loopback), else here.
_cbs_ns() {
	# nsenter, not `ip netns exec`: the network namespace alone, so that
	# slurmd keeps the machine's /sys (and its cgroups).
	if [ -n "${SLURM_NETNS:-}" ]; then
		nsenter --net="/run/netns/$SLURM_NETNS" -- "$@"
	else
		"$@"
	fi
}

# Is PID running (not gone, not a zombie)?
_cbs_running() {
	local s
	read -r s 2>/dev/null < "/proc/$1/stat" || return 1
	s=${s##*) }
	case ${s%% *} in Z|X|x) return 1 ;; esac
}

# slurm_available: 0 when the harness can run here (root, slurmctld,
# slurmd, munged, sbatch).  Suites: slurm_available || skip.
slurm_available() {
	[ "$(id -u)" -eq 0 ] || return 1
	local c
	for c in slurmctld slurmd munged sbatch squeue sinfo scontrol scancel; do
		PATH=$PATH:/usr/sbin:/sbin command -v "$c" >/dev/null 2>&1 || return 1
	done
	id munge >/dev/null 2>&1
}

# The UUID of fake card C of the Slurm node: GPU-5100000C-0000-4000-8000-51000000000C
# (decimal digits, card 2: GPU-51000002-0000-4000-8000-510000000002).
slurm_gpu_uuid() {
	printf 'GPU-5100%04d-0000-4000-8000-5100%08d\n' "$1" "$1"
}

# slurm_gpus LINE...: replace the node's gpus.csv ("index, uuid, name,
# memory.used, memory.total, utilization.gpu" per line) atomically.
# slurm_apps [LINE...]: replace apps.csv ("gpu_uuid, pid, used_memory[,
# process_name]"); no LINE: none.  slurm_default_gpus: NGPUS idle cards.
slurm_gpus() { _cbs_write gpus.csv "$@"; }
# shellcheck disable=SC2120
slurm_apps() { _cbs_write apps.csv "$@"; }
slurm_default_gpus() {
	local c lines=()
	for ((c = 0; c < ${CBS_NGPUS:?slurm_up first}; c++)); do
		lines+=("$c, $(slurm_gpu_uuid "$c"), NVIDIA A100-SXM4-80GB, 0, 81920, 0")
	done
	slurm_gpus "${lines[@]}" && slurm_apps
}
_cbs_write() {
	local d=${CBS_GPU_DIR:?slurm_up first} f=$1; shift
	if [ $# -gt 0 ]; then printf '%s\n' "$@" > "$d/.$f.tmp"; else : > "$d/.$f.tmp"; fi &&
		mv -f "$d/.$f.tmp" "$d/$f"
}

# A TCP port nobody listens on, below the ephemeral range.
_cbs_free_port() {
	local p used
	used=" $(ss -Htln 2>/dev/null | awk '{n = split($4, a, ":"); printf "%s ", a[n]}') ${*} "
	while :; do
		p=$(( 20000 + (RANDOM * 32768 + RANDOM) % 12000 ))
		case $used in *" $p "*) ;; *) echo "$p"; return 0 ;; esac
	done
}

# slurm_up [NGPUS]: bring up the cluster (see the top of this file).
# Exports SLURM_DIR, SLURM_CONF, CBS_NODE (the node name, `hostname
# -s`), CBS_NGPUS, CBS_GPU_DIR, CBS_BIN_DIR (holds nvidia-smi),
# CBS_UP_MS.  SLURM_DIR may be set beforehand to a directory that does
# not exist yet; otherwise it is a new /tmp/cbslurm.XXXXXX.  Quiet on
# success; on failure it prints the daemons' log tails, undoes
# everything and returns 1.
slurm_up() {
	local n=${1:-4} t0
	case $n in ''|*[!0-9]*) _cbs_err "slurm_up: bad NGPUS '$n'"; return 1 ;; esac
	if [ "$n" -lt 1 ] || [ "$n" -gt 64 ]; then
		_cbs_err "slurm_up: 1 to 64 GPUs"
		return 1
	fi
	if [ -n "${SLURM_DIR:-}" ] && [ -f "$SLURM_DIR/.cbslurm" ]; then
		_cbs_err "slurm_up: a cluster is up in $SLURM_DIR; slurm_down first"
		return 1
	fi
	t0=${EPOCHREALTIME/[.,]/}
	if [ -n "${SLURM_DIR:-}" ] && [ ! -e "$SLURM_DIR" ]; then
		mkdir -p "$SLURM_DIR" || return 1
	else
		SLURM_DIR=$(mktemp -d /tmp/cbslurm.XXXXXX) || return 1
	fi
	# Slurm's daemons run as root but its job steps and munge's clients
	# must get in: world-traversable.
	chmod 0755 "$SLURM_DIR"
	: > "$SLURM_DIR/.cbslurm"
	export SLURM_NETNS=${SLURM_NETNS:-}
	export SLURM_DIR SLURM_CONF=$SLURM_DIR/slurm.conf CBS_NGPUS=$n
	export CBS_GPU_DIR=$SLURM_DIR/gpus CBS_BIN_DIR=$SLURM_DIR/bin
	CBS_NODE=$(hostname -s) || return 1
	export CBS_NODE
	# Without the DEBUG/ERR traps and errexit bats sets (slow, and a
	# failing probe is expected while the daemons come up).
	if ! (set +eET; trap - DEBUG ERR RETURN; _cbs_build "$n"); then
		_cbs_err "slurm_up failed ($SLURM_DIR); logs:"
		local f
		for f in munged.err munge/munged.log slurmctld.log slurmd.log; do
			[ -s "$SLURM_DIR/$f" ] || f=${f%.log}.out
			[ -s "$SLURM_DIR/$f" ] && tail -n 15 "$SLURM_DIR/$f" | sed "s|^|${f##*/}: |" >&2
		done
		slurm_down
		return 1
	fi
	CBS_UP_MS=$(( (${EPOCHREALTIME/[.,]/} - t0) / 1000 ))
	export CBS_UP_MS
}

_cbs_build() {
	local n=$1 d=$SLURM_DIR i top fake host
	top=${CB_TOP:-$(cd "$CBS_LIB_DIR/../.." && pwd)}
	fake=$top/tests/fake-nvidia-smi
	[ -x "$fake" ] || { _cbs_err "no $fake"; return 1; }
	host=$CBS_NODE
	mkdir -p "$d/dev" "$d/state" "$d/spool" "$d/bin" "$d/gpus" "$d/munge" || return 1

	# The node's GPUs: character devices, as Slurm wants (with plain
	# files or Count= alone the node drains), and their fake nvidia-smi.
	for ((i = 0; i < n; i++)); do
		mknod "$d/dev/nvidia$i" c 195 "$i" || return 1
	done
	ln -s "$fake" "$d/bin/nvidia-smi" || return 1
	slurm_default_gpus || return 1

	# A private munged: its own key, socket, pid, log and seed under
	# $SLURM_DIR/munge (never the system's /etc/munge or /run/munge).
	chown munge:munge "$d/munge" && chmod 0755 "$d/munge" || return 1
	local key=$d/munge/munge.key sock=$d/munge/munge.socket
	dd if=/dev/urandom of="$key" bs=1024 count=1 status=none || return 1
	chown munge:munge "$key" && chmod 0400 "$key" || return 1
	runuser -u munge -- /usr/sbin/munged --socket="$sock" --key-file="$key" \
		--pid-file="$d/munge/munged.pid" --log-file="$d/munge/munged.log" \
		--seed-file="$d/munge/munged.seed" --num-threads=2 \
		</dev/null >/dev/null 2>>"$d/munged.err" 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&- ||
		{ _cbs_err "munged did not start"; return 1; }
	local tries
	tries=$(( $(scaled_ms 5) / 20 )) || return 1
	for ((i = 0; i < tries; i++)); do
		[ -S "$sock" ] && break
		sleep 0.02
	done
	[ -S "$sock" ] || { _cbs_err "no munge socket"; return 1; }

	local cport dport
	cport=$(_cbs_free_port) && dport=$(_cbs_free_port "$cport") || return 1
	# The environment every batch job gets from the node, whatever it was
	# submitted with (--export=NONE too): the node's nvidia-smi first in
	# PATH and its fixture.
	cat > "$d/task_prolog" <<-EOF
		#!/bin/sh
		echo "export PATH=$d/bin:\${PATH:-$CBS_SYS_PATH}"
		echo "export FAKE_GPU_DIR=$d/gpus"
	EOF
	chmod 0755 "$d/task_prolog"
	printf 'Name=gpu Type=%s File=%s/dev/nvidia[0-%d]\n' "$CBS_GPU_TYPE" "$d" $((n - 1)) > "$d/gres.conf"
	cat > "$SLURM_CONF" <<-EOF
		# A one-node test cluster, made by tests/lib/slurm.bash
		ClusterName=cbslurm
		SlurmctldHost=$host(127.0.0.1)
		SlurmctldPort=$cport
		SlurmdPort=$dport
		SlurmUser=root
		SlurmdUser=root
		AuthType=auth/munge
		CredType=cred/munge
		AuthInfo=socket=$sock,cred_expire=10
		StateSaveLocation=$d/state
		SlurmdSpoolDir=$d/spool
		SlurmctldPidFile=$d/slurmctld.pid
		SlurmdPidFile=$d/slurmd.pid
		SlurmctldLogFile=$d/slurmctld.log
		SlurmdLogFile=$d/slurmd.log
		SlurmctldDebug=info
		SlurmdDebug=info
		ProctrackType=proctrack/linuxproc
		TaskPlugin=task/none
		TaskProlog=$d/task_prolog
		JobAcctGatherType=jobacct_gather/none
		AccountingStorageType=accounting_storage/none
		JobCompType=jobcomp/none
		MpiDefault=none
		SwitchType=switch/none
		SelectType=select/cons_tres
		SelectTypeParameters=CR_Core
		SchedulerType=sched/backfill
		SchedulerParameters=sched_interval=5,batch_sched_delay=0,sched_min_interval=0
		GresTypes=gpu
		SlurmdParameters=config_overrides
		ReturnToService=2
		MinJobAge=300
		KillWait=5
		InactiveLimit=0
		Waittime=0
		MessageTimeout=10
		SlurmdTimeout=300
		NodeName=$host NodeAddr=127.0.0.1 NodeHostname=$host CPUs=16 RealMemory=16000 Gres=gpu:$CBS_GPU_TYPE:$n State=UNKNOWN
		PartitionName=gpu Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
	EOF

	# The daemons in the foreground (-D), in the background, logging to
	# their files; the fds bats watches (3 and up) must not leak to them.
	_cbs_ns setsid /usr/sbin/slurmctld -D -i -f "$SLURM_CONF" \
		</dev/null >>"$d/slurmctld.out" 2>&1 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&- &
	echo $! > "$d/slurmctld.spawned"
	disown $!
	_cbs_ns setsid /usr/sbin/slurmd -D -f "$SLURM_CONF" -N "$host" \
		</dev/null >>"$d/slurmd.out" 2>&1 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&- &
	echo $! > "$d/slurmd.spawned"
	disown $!

	# Ready: the controller answers, the node is idle and a job would
	# be scheduled there (sbatch --test-only submits nothing).
	local lim st deadline
	lim=$(scaled 60) || return 1
	deadline=$(( ${EPOCHREALTIME%[.,]*} + lim ))
	while :; do
		st=$(_cbs_ns sinfo -h -N -n "$host" -o %T 2>/dev/null)
		if [ "$st" = idle ] &&
			_cbs_ns sbatch --test-only -p gpu --gres=gpu:1 -o /dev/null --wrap true >/dev/null 2>&1; then
			return 0
		fi
		for i in slurmctld slurmd; do
			_cbs_running "$(cat "$d/$i.spawned")" || { _cbs_err "$i exited"; return 1; }
		done
		if [ "${EPOCHREALTIME%[.,]*}" -gt "$deadline" ]; then
			_cbs_err "node not idle after $lim s (state '${st:-none}')"
			_cbs_ns scontrol show node "$host" >&2 2>&1
			return 1
		fi
		sleep 0.1
	done
}

# PIDs of the processes still running of this cluster: its daemons (by
# pid file and as spawned), its slurmstepds (their environment names our
# SLURM_CONF) and everything below those.
_cbs_pids() {
	local d=$SLURM_DIR f p comm
	local -A want=() kids=()
	for f in "$d"/slurmctld.spawned "$d"/slurmd.spawned "$d"/slurmctld.pid "$d"/slurmd.pid "$d"/munge/munged.pid; do
		[ -f "$f" ] || continue
		read -r p < "$f" 2>/dev/null || continue
		case $p in ''|*[!0-9]*) continue ;; esac
		_cbs_running "$p" || continue
		# Still ours: its command line or pid file names our directory.
		if tr '\0' ' ' 2>/dev/null < "/proc/$p/cmdline" | grep -qF -- "$d/"; then
			want[$p]=1
		fi
	done
	local stat ppid rest
	for f in /proc/[0-9]*/stat; do
		p=${f#/proc/}; p=${p%/stat}
		read -r stat 2>/dev/null < "$f" || continue
		comm=${stat#* (}; comm=${comm%%) *}
		rest=${stat##*) }
		read -r _ ppid _ <<< "$rest"
		kids[$ppid]+=" $p"
		case ${rest%% *} in Z|X|x) continue ;; esac
		if [ "$comm" = slurmstepd ] && tr '\0' '\n' 2>/dev/null < "/proc/$p/environ" |
			grep -qxF -- "SLURM_CONF=$SLURM_CONF"; then
			want[$p]=1
		fi
	done
	# Descendants of the slurmstepds and the daemons (not munged's: none).
	local queue=("${!want[@]}") q
	while [ ${#queue[@]} -gt 0 ]; do
		q=${queue[0]}; queue=("${queue[@]:1}")
		for p in ${kids[$q]:-}; do
			[ -n "${want[$p]:-}" ] && continue
			_cbs_running "$p" || continue
			want[$p]=1; queue+=("$p")
		done
	done
	[ ${#want[@]} -gt 0 ] && printf '%s\n' "${!want[@]}"
	return 0
}

# slurm_down: cancel every job left, stop slurmd, slurmctld and our
# munged (SIGTERM, then SIGKILL after 10 s scaled, also for job processes left),
# wait for them to exit, remove SLURM_DIR unless CB_KEEP is set.  Safe to
# call twice or after a failed slurm_up.
slurm_down() {
	[ -n "${SLURM_DIR:-}" ] && [ -f "$SLURM_DIR/.cbslurm" ] || return 0
	(
		set +eET; trap - DEBUG ERR RETURN
		d=$SLURM_DIR
		# 10 s (scaled) for the jobs to go, then for each signal.
		tries=$(( $(scaled_ms 10) / 100 ))
		ctld=
		[ -f "$d/slurmctld.spawned" ] && read -r ctld < "$d/slurmctld.spawned"
		if [ -n "$ctld" ] && _cbs_running "$ctld"; then
			ids=$(_cbs_ns squeue -h -o %i 2>/dev/null)
			if [ -n "$ids" ]; then
				# shellcheck disable=SC2086
				_cbs_ns scancel $ids 2>/dev/null
				for ((i = 0; i < tries; i++)); do
					[ -z "$(_cbs_ns squeue -h -o %i -t PD,R,CG,S,CF 2>/dev/null)" ] && break
					sleep 0.1
				done
			fi
		fi
		# Daemons first (SIGTERM: slurmd leaves its steps alone), then
		# whatever is left of the jobs.
		for sig in TERM KILL; do
			pids=$(_cbs_pids)
			[ -n "$pids" ] || break
			# shellcheck disable=SC2086
			kill -$sig $pids 2>/dev/null
			for ((i = 0; i < tries; i++)); do
				alive=0
				for p in $pids; do _cbs_running "$p" && { alive=1; break; }; done
				[ $alive = 0 ] && break
				sleep 0.1
			done
		done
		pids=$(_cbs_pids)
		# shellcheck disable=SC2086
		[ -n "$pids" ] && kill -KILL $pids 2>/dev/null
		if [ -z "${CB_KEEP:-}" ]; then
			rm -rf "$d"
		else
			rm -f "$d/.cbslurm"
			echo "slurm: kept $d" >&2
		fi
	)
	unset SLURM_DIR SLURM_CONF SLURM_NETNS CBS_NODE CBS_NGPUS CBS_GPU_DIR CBS_BIN_DIR CBS_UP_MS
	return 0
}
