#!/usr/bin/env bats
# nvml.bats - cardbaton-worker asking NVML (worker/nvml.c) before
# nvidia-smi: the fake NVML library (tests/fake-nvml/) serves the same
# fixtures as tests/fake-nvidia-smi, so every answer is compared between
# the two ways, and every way NVML can fail must end in nvidia-smi's
# answer.  At the end, SSH nodes (link/ship.c): the worker compiled on
# a test host with cc asks NVML; a host whose cc fails, or that has
# none, gets the static build (nvidia-smi).

load ../lib/common
load ../lib/worker
load ../lib/sshhosts

bats_require_minimum_version 1.5.0

# The hang tests rely on this: a worker that waited for a hung NVML
# (which never returns) instead of killing it would run past it,
# however it is scaled.
test_timeout 40

U0=GPU-00000000-0000-0000-0000-000000000000
U1=GPU-11111111-1111-1111-1111-111111111111
U2=GPU-22222222-2222-2222-2222-222222222222
U3=GPU-33333333-3333-3333-3333-333333333333

# Two SSH test hosts whose sessions see the fake NVML library
# (HOSTS_NVML=fake): host1 has the machine's cc, host2 a cc that fails.
# Each host's nvidia-smi notes its runs in hostN/gpus/smi.log.
setup_file() {
	hosts_available || return 0
	HOSTS_NVML=fake hosts_up 2 || return 1
	printf '#!/bin/sh\necho "cc: this compiler is broken" >&2\nexit 1\n' > "$(host_bin_dir 2)/cc"
	chmod 755 "$(host_bin_dir 2)/cc"
	for i in 1 2; do
		rm "$(host_bin_dir "$i")/nvidia-smi"
		printf '#!/bin/sh\necho "$*" >> "$FAKE_GPU_DIR/smi.log"\nexec "%s" "$@"\n' \
			"$CB_TOP/tests/fake-nvidia-smi" > "$(host_bin_dir "$i")/nvidia-smi"
		chmod 755 "$(host_bin_dir "$i")/nvidia-smi"
	done
}

teardown_file() {
	hosts_down
}

setup() {
	setup_common
	NVML=$CB_BUILD/tests/fake-nvml/libnvidia-ml.so.1
	NVML_OLD=$CB_BUILD/tests/fake-nvml-old/libnvidia-ml.so.1
	# nvidia-smi notes each run in smi.log; the fake NVML each call in
	# nvml.log.
	rm "$FAKE_GPU_DIR/bin/nvidia-smi"
	printf '#!/bin/sh\necho "$*" >> "$FAKE_GPU_DIR/smi.log"\nexec "%s" "$@"\n' \
		"$CB_TOP/tests/fake-nvidia-smi" > "$FAKE_GPU_DIR/bin/nvidia-smi"
	chmod 755 "$FAKE_GPU_DIR/bin/nvidia-smi"
	logs_clear
}

teardown() {
	teardown_common
	# What a test left running on the SSH hosts: everything that holds
	# a file of a host's state directory.
	[ -n "${HOSTS_UID:-}" ] || return 0
	host_kill_procs 1 2
}

logs_clear() {
	: > "$FAKE_GPU_DIR/smi.log"
	: > "$FAKE_GPU_DIR/nvml.log"
}

smi_runs() { wc -l < "$FAKE_GPU_DIR/smi.log"; }
nvml_calls() { grep -cx "$1" "$FAKE_GPU_DIR/nvml.log" || true; }

# ask WAY ARGS... : `cardbaton-worker ARGS` with CARDBATON_NVML=WAY;
# $T/WAY.out, .err and .rc hold what it did.
ask() {
	local way=$1 name rc=0
	shift
	name=$(basename "$(dirname "$way")")
	[ "$way" = off ] && name=off
	CARDBATON_NVML=$way cardbaton-worker "$@" > "$T/$name.out" 2> "$T/$name.err" || rc=$?
	echo "$rc" > "$T/$name.rc"
	LAST=$T/$name
}

# same ARGS... : stdout and exit status of `cardbaton-worker ARGS` are
# the same through nvidia-smi alone and through both fake NVMLs.
# NVML_SERVED is set when both NVMLs answered without nvidia-smi.
same() {
	local lib
	ask off "$@"
	NVML_SERVED=1
	for lib in "$NVML" "$NVML_OLD"; do
		logs_clear
		ask "$lib" "$@"
		if ! cmp -s "$T/off.out" "$LAST.out" || ! cmp -s "$T/off.rc" "$LAST.rc"; then
			echo "# $lib answers differently:" >&3
			diff "$T/off.out" "$LAST.out" | sed 's/^/# /' >&3
			echo "# exit $(cat "$T/off.rc") vs $(cat "$LAST.rc"); stderr: $(cat "$LAST.err")" >&3
			return 1
		fi
		if [ "$(smi_runs)" -ne 0 ] || [ "$(nvml_calls nvmlInit_v2)" -eq 0 ] || [ -s "$LAST.err" ]; then
			NVML_SERVED=
		fi
	done
}

# ---- gpus: the same answers -------------------------------------------------

@test "gpus: NVML answers what nvidia-smi answers, without running it" {
	same gpus
	[ "$NVML_SERVED" = 1 ]
	[ "$(grep -c '^end$' "$T/off.out")" -eq 4 ]

	# Every kind of value: a name with ", ", unknown memory, unsupported
	# utilisation, processes (one with unknown memory, one with a name),
	# a lease; comments, blank lines and CRLF endings in the fixtures.
	fake_gpus \
		"# the cards" \
		"0, $U0, NVIDIA Fake A100, 0, 81920, 0" \
		"" \
		"1, $U1, NVIDIA Fake A100, 4000, 81920, 37"$'\r' \
		"2, $U2, NVIDIA Fake, Special Edition, 12, 40960, [N/A]" \
		"3, $U3, NVIDIA Fake A100, [N/A], [N/A], [Not Supported]"
	fake_apps "$U1, 4242, 3000" "$U1, 4243, 1000, python3" "$U3, 99, [N/A]"
	mkdir -p "$STATE/leases"
	echo other-1 > "$STATE/leases/$U2"
	flock "$STATE/leases/$U2" sleep 30 &
	holder=$!
	wait_for 5 '! flock -n "$STATE/leases/$U2" true'
	same gpus
	kill "$holder"
	[ "$NVML_SERVED" = 1 ]
	grep -qx 'processes 2' "$T/off.out"
	grep -qx 'lease other-1' "$T/off.out"
	grep -qx 'name NVIDIA%20Fake,%20Special%20Edition' "$T/off.out"

	# No cards at all, and no fixture files at all.
	fake_gpus
	fake_apps
	same gpus
	[ "$NVML_SERVED" = 1 ]
	[ ! -s "$T/off.out" ]
	rm "$FAKE_GPU_DIR/gpus.csv" "$FAKE_GPU_DIR/apps.csv"
	same gpus
	[ "$NVML_SERVED" = 1 ]
}

@test "gpus: on a card no one leases, its processes' accounts (each once, from /proc), from NVML and nvidia-smi alike; none on a leased card, none for a process gone" {
	command -v setpriv > /dev/null || skip "needs setpriv"
	sleep 60 &
	mine=$!
	setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups sleep 60 &
	theirs=$!
	fake_apps "$U0, $mine, 100" "$U0, $theirs, 100" "$U0, $mine, 50" "$U1, 999999999, 10" "$U2, $mine, 1"
	mkdir -p "$STATE/leases"
	echo other-1 > "$STATE/leases/$U2"
	flock "$STATE/leases/$U2" sleep 30 &
	holder=$!
	wait_for 5 '! flock -n "$STATE/leases/$U2" true'
	same gpus
	# The tool: "3 (root,nobody)" in PROCS, and process_accounts.
	run cardbaton-gpus
	[ "$status" -eq 0 ]
	[[ $output == *" 3 ($(id -un),nobody) "* ]] || { echo "$output"; false; }
	run cardbaton-gpus --json
	[ "$status" -eq 0 ]
	[ "$(jq -c '[.nodes[0].gpus[].process_accounts]' <<< "$output")" = "[[\"$(id -un)\",\"nobody\"],[],[],[]]" ]
	kill "$holder" "$mine" "$theirs"
	[ "$NVML_SERVED" = 1 ]
	awk -v RS='end\n' -v u="$U0" 'index($0, "uuid " u "\n")' "$T/off.out" > "$T/u0"
	[ "$(grep -c '^process_account ' "$T/u0")" -eq 2 ]
	grep -qx "process_account $(id -un)" "$T/u0"
	grep -qx 'process_account nobody' "$T/u0"
	grep -qx 'processes 3' "$T/u0"
	# The pid gone, and the leased card: processes counted, no account.
	[ "$(grep -c '^process_account ' "$T/off.out")" -eq 2 ]
}

@test "gpus: more compute processes than the first buffer holds are all counted, on every layout" {
	lines=()
	for pid in $(seq 1000 1039); do lines+=("$U1, $pid, 100"); done
	fake_apps "${lines[@]}" "$U2, 7, 100"
	same gpus
	[ "$NVML_SERVED" = 1 ]
	grep -qx 'processes 40' "$T/off.out"
	grep -qx 'processes 1' "$T/off.out"
}

@test "gpus: a fixture NVML cannot express is answered by nvidia-smi, the same" {
	# Indices out of order; memory half known; a process on no card.
	fake_gpus "1, $U1, NVIDIA Fake A100, 0, 81920, 0" "0, $U0, NVIDIA Fake A100, 0, 81920, 0"
	same gpus
	[ -z "$NVML_SERVED" ]
	[ "$(cat "$T/off.rc")" -eq 0 ]
	grep -q 'NVML: nvmlInit_v2: Unknown Error; asked nvidia-smi instead' "$LAST.err"

	fake_gpus "0, $U0, NVIDIA Fake A100, [N/A], 81920, 0"
	same gpus
	[ -z "$NVML_SERVED" ]
	grep -qx 'memory_total_mib 81920' "$T/off.out"

	fake_gpus "0, $U0, NVIDIA Fake A100, 0, 81920, 0"
	fake_apps "$U3, 4242, 300"
	same gpus
	[ -z "$NVML_SERVED" ]
}

@test "gpus: nonsense and failures end in nvidia-smi's error, word for word" {
	# Unparsable values: nvidia-smi's parse error.
	fake_gpus "0, $U0, NVIDIA Fake A100, 0, 81920, 0" "1, $U1, NVIDIA Fake A100, lots, 81920, 0"
	same gpus
	[ "$(cat "$T/off.rc")" -eq 69 ]
	cmp "$T/off.err" "$LAST.err"
	grep -q 'cannot parse line 2' "$T/off.err"

	# A UUID that cannot name a lease, served by NVML all the same.
	fake_gpus "0, GPU/0, NVIDIA Fake A100, 0, 81920, 0"
	same gpus
	[ "$(cat "$T/off.rc")" -eq 69 ]
	cmp "$T/off.err" "$LAST.err"

	# The driver gone: NVML fails to start, nvidia-smi fails too.
	fake_gpus "0, $U0, NVIDIA Fake A100, 0, 81920, 0"
	echo "driver gone" > "$FAKE_GPU_DIR/fail"
	same gpus
	[ "$(cat "$T/off.rc")" -eq 69 ]
	cmp "$T/off.err" "$LAST.err"
	grep -qx 'cardbaton-worker: nvidia-smi failed (exit 9): driver gone' "$LAST.err"
	[ "$(nvml_calls nvmlInit_v2)" -eq 1 ]
	rm "$FAKE_GPU_DIR/fail"

	# Slow but answering (delay applies to both).
	echo 0.2 > "$FAKE_GPU_DIR/delay"
	same gpus
	[ "$NVML_SERVED" = 1 ]
	[ "$(grep -c '^end$' "$T/off.out")" -eq 1 ]
}

@test "gpus: a hung driver is killed; nvidia-smi's deadline is the answer" {
	# A delay of its own: pgrep below sees every process on the machine.
	echo "3600.$$" > "$FAKE_GPU_DIR/delay"
	ask "$NVML" -d "$T/hung-state" gpus
	[ "$(cat "$LAST.rc")" -eq 69 ]
	grep -qx 'error nvidia-smi%20did%20not%20answer%20within%2010%20s' "$LAST.out"
	grep -qx 'cardbaton-worker: nvidia-smi did not answer within 10 s' "$LAST.err"
	# NVML was asked, then nvidia-smi (its two questions at once);
	# nothing of either is left.
	[ "$(nvml_calls nvmlInit_v2)" -eq 1 ]
	[ "$(smi_runs)" -eq 2 ]
	not pgrep -f "$T/hung-state"
	not pgrep -f "^sleep 3600\\.$$\$"
}

@test "gpus: NVML hung alone: killed at half the deadline, and nvidia-smi answers" {
	echo "nvmlDeviceGetCount_v2 hang" > "$FAKE_GPU_DIR/nvml-fail"
	ask off gpus
	ask "$NVML" -d "$T/hung-state" gpus
	cmp "$T/off.out" "$LAST.out"
	[ "$(cat "$LAST.rc")" -eq 0 ]
	[ "$(cat "$LAST.err")" = "cardbaton-worker: NVML: no answer within 5 s; asked nvidia-smi instead" ]
	not pgrep -f "$T/hung-state"
}

@test "gpus: any NVML call failing or crashing: said once, and nvidia-smi answers the same" {
	ask off gpus
	for call in nvmlInit_v2 nvmlDeviceGetCount_v2 nvmlDeviceGetHandleByIndex_v2 nvmlDeviceGetUUID \
		nvmlDeviceGetName nvmlDeviceGetMemoryInfo_v2 nvmlDeviceGetUtilizationRates \
		nvmlDeviceGetComputeRunningProcesses_v3; do
		echo "$call" > "$FAKE_GPU_DIR/nvml-fail"
		logs_clear
		ask "$NVML" gpus
		cmp "$T/off.out" "$LAST.out"
		[ "$(cat "$LAST.rc")" -eq 0 ]
		[ "$(wc -l < "$LAST.err")" -eq 1 ]
		grep -Eq "^cardbaton-worker: NVML: $call( \(GPU 0\))?: Unknown Error; asked nvidia-smi instead\$" "$LAST.err"
		[ "$(smi_runs)" -eq 2 ]
	done
	# The pre-R510 library's own names.
	for call in nvmlDeviceGetMemoryInfo nvmlDeviceGetComputeRunningProcesses; do
		echo "$call" > "$FAKE_GPU_DIR/nvml-fail"
		ask "$NVML_OLD" gpus
		cmp "$T/off.out" "$LAST.out"
		[ "$(cat "$LAST.err")" = "cardbaton-worker: NVML: $call (GPU 0): Unknown Error; asked nvidia-smi instead" ]
	done
	echo "nvmlDeviceGetName crash" > "$FAKE_GPU_DIR/nvml-fail"
	ask "$NVML" gpus
	cmp "$T/off.out" "$LAST.out"
	# SIGSEGV; SIGABRT under ASan, whose handler reports it first.
	[[ $(cat "$LAST.err") =~ ^"cardbaton-worker: NVML: the query was killed by signal "(11|6)"; asked nvidia-smi instead"$ ]]
}

@test "gpus: CARDBATON_NVML names the library; a bad one is said, the driver's missing is not" {
	ask off gpus
	ask "$T/no-such-lib.so" gpus
	cmp "$T/off.out" "$LAST.out"
	grep -q "^cardbaton-worker: NVML: cannot load .*no-such-lib.so" "$LAST.err"
	# A library without NVML in it.
	libc=$(ldd "$CB_BUILD/cardbaton-worker" | awk '$1 ~ /^libc\.so/ { print $3 }')
	[ -f "$libc" ]
	ask "$libc" gpus
	cmp "$T/off.out" "$LAST.out"
	grep -qx "cardbaton-worker: NVML: $libc has no nvmlInit_v2; asked nvidia-smi instead" "$LAST.err"
	# Unset: the driver's libnvidia-ml.so.1, which this machine has not.
	if ldconfig -p | grep -q 'libnvidia-ml\.so\.1'; then
		skip "this machine has NVIDIA's libnvidia-ml.so.1"
	fi
	unset CARDBATON_NVML
	cardbaton-worker gpus > "$T/unset.out" 2> "$T/unset.err"
	cmp "$T/off.out" "$T/unset.out"
	[ ! -s "$T/unset.err" ]
}

# ---- launch ---------------------------------------------------------------------

# wesc, spec, field: tests/lib/worker.bash.  Its own wait_final: an
# attempt here ends succeeded, failed or cancelled.
wait_final() {      # wait_final ID
	FINAL_ID=$1
	wait_for 5 'cardbaton-worker status "$FINAL_ID" | grep -Eq "^state (succeeded|failed|cancelled)\$"'
}

@test "launch: step 3 asks for the cards alone; the check under the leases for their processes" {
	spec attempt 1a-1 arg true gpu 2 > "$T/spec.in"
	CARDBATON_NVML=off cardbaton-worker launch < "$T/spec.in" > "$T/out"
	[ "$(field state < "$T/out")" != busy ]
	wait_final 1a-1
	# nvidia-smi: three runs, not four (the check's two at once).
	[ "$(sort "$FAKE_GPU_DIR/smi.log")" = "--query-compute-apps=gpu_uuid,pid,used_memory --format=csv,noheader,nounits
--query-gpu=index,uuid,memory.used,memory.total,utilization.gpu,name --format=csv,noheader,nounits
--query-gpu=index,uuid,memory.used,memory.total,utilization.gpu,name --format=csv,noheader,nounits" ]

	# NVML: two queries, processes asked of each card once.
	logs_clear
	spec attempt 1a-2 arg true gpu 2 > "$T/spec.in"
	CARDBATON_NVML=$NVML cardbaton-worker launch < "$T/spec.in" > "$T/out" 2> "$T/err"
	[ ! -s "$T/err" ]
	wait_final 1a-2
	[ "$(smi_runs)" -eq 0 ]
	[ "$(nvml_calls nvmlInit_v2)" -eq 2 ]
	[ "$(nvml_calls nvmlDeviceGetComputeRunningProcesses_v3)" -eq 4 ]
	[ "$(field uuid < "$T/out")" = "$U2" ]
}

@test "launch: through NVML, the same answers: busy reasons, unknown cards, CUDA_VISIBLE_DEVICES" {
	fake_gpus "0, $U0, NVIDIA Fake A100, 0, 81920, 0" "1, $U1, NVIDIA Fake A100, 4000, 81920, 0" \
		"2, $U2, NVIDIA Fake A100, 0, 81920, 0" "3, $U3, NVIDIA Fake A100, 0, 81920, 0"
	fake_apps "$U3, 4242, 300"
	n=0
	for gpus in "0 1" "3" "7" "2 0"; do
		for way in off "$NVML" "$NVML_OLD"; do
			n=$((n + 1))
			args=(attempt "2b-$n" shell 'printf %s "$CUDA_VISIBLE_DEVICES" > "$OUT"' env "OUT=$T/cvd.$n")
			for g in $gpus; do args+=(gpu "$g"); done
			spec "${args[@]}" > "$T/spec.in"
			rc=0
			CARDBATON_NVML=$way cardbaton-worker launch < "$T/spec.in" > "$T/launch.$n" 2> "$T/err.$n" ||
				rc=$?
			echo "$rc" > "$T/rc.$n"
			[ ! -s "$T/err.$n" ]
			# What the launch says: its exit status, the busy reason,
			# or the cards the job got.
			{ cat "$T/rc.$n"; field reason < "$T/launch.$n"; } > "$T/what.$n"
			if [ "$(cat "$T/rc.$n")" -eq 0 ]; then
				wait_final "2b-$n"
				cat "$T/cvd.$n" >> "$T/what.$n"
			fi
		done
		cmp "$T/what.$((n - 2))" "$T/what.$((n - 1))"
		cmp "$T/what.$((n - 2))" "$T/what.$n"
	done
	[ "$(cat "$T/what.1")" = "75
GPU 1 ($U1): 4000 MiB in use" ]
	[ "$(cat "$T/what.4")" = "75
GPU 3 ($U3): has 1 compute process" ]
	[ "$(cat "$T/what.7")" = "75
GPU 7: no such GPU on this node" ]
	[ "$(cat "$T/what.10")" = "0

$U2,$U0" ]
}

@test "launch: NVML failing (driver gone) ends in nvidia-smi's error, and no trace" {
	echo "driver gone" > "$FAKE_GPU_DIR/fail"
	spec attempt 3c-1 arg true gpu 0 > "$T/spec.in"
	rc=0
	CARDBATON_NVML=$NVML cardbaton-worker launch < "$T/spec.in" > "$T/out" 2> "$T/err" || rc=$?
	[ "$rc" -eq 69 ]
	[ "$(cat "$T/err")" = "cardbaton-worker: nvidia-smi failed (exit 9): driver gone" ]
	[ ! -e "$STATE/attempts/3c-1" ] && [ ! -e "$STATE/attempts/3c-1.state" ]
}

# ---- which workers use NVML ---------------------------------------------------------

@test "the static worker (SSH nodes) never loads NVML; the one built from source there does" {
	CARDBATON_NVML=$NVML "$CB_BUILD/cardbaton-worker-static" gpus > "$T/static.out"
	[ "$(nvml_calls nvmlInit_v2)" -eq 0 ]
	[ "$(smi_runs)" -eq 2 ]
	ask off gpus
	cmp "$T/off.out" "$T/static.out"

	command -v cc >/dev/null || skip "no C compiler"
	dest=$T/shar/cardbaton-worker sh "$CB_BUILD/cardbaton-worker.shar" 2> "$T/cc.err"
	logs_clear
	CARDBATON_NVML=$NVML "$T/shar/cardbaton-worker" gpus > "$T/shar.out"
	cmp "$T/off.out" "$T/shar.out"
	[ "$(smi_runs)" -eq 0 ]
	[ "$(nvml_calls nvmlInit_v2)" -eq 1 ]
}

@test "a GPU job runs end to end on a node whose worker has NVML and no nvidia-smi" {
	rm "$FAKE_GPU_DIR/bin/nvidia-smi"
	use_fake_nvml
	start_daemon
	id=$(cardbaton-submit --config "$T/config.yaml" --gpu-count 2 -- sh -c 'echo "$CUDA_VISIBLE_DEVICES"')
	wait_for 20 '[ "$(job_state "$id")" = succeeded ]'
	[ "$(cardbaton-logs --config "$T/config.yaml" "$id")" = "$U0,$U1" ]
	run cardbaton-gpus --config "$T/config.yaml" --json
	[ "$status" -eq 0 ]
	[ "$(echo "$output" | json 'len(d["nodes"][0]["gpus"])')" -eq 4 ]
}

# ---- SSH nodes: the worker compiled there asks NVML (link/ship.c) ---------------

# ssh_hosts: skip without the test hosts; else fresh hosts (no worker,
# no state, default cards, empty logs) and $C, a config with both.
ssh_hosts() {
	[ -n "${HOSTS_UID:-}" ] || skip "needs root, ip netns and sshd"
	local i
	for i in 1 2; do
		rm -f "$(host_bin_dir "$i")/getconf"
		rm -rf "$(host_home "$i")/.local"
		host_default_gpus "$i"
		: > "$(host_gpu_dir "$i")/smi.log"
		: > "$(host_gpu_dir "$i")/nvml.log"
	done
	C=$T/ssh.yaml
	cat > "$C" <<-YAML
		spool: ./spool
		ssh_command: [ssh, -F, $SSH_CONFIG]
		nodes:
		  host1:
		    ssh: host1
		  host2:
		    ssh: host2
	YAML
	WID=$(sed -n 's/^#define WORKER_ID "\(.*\)"/\1/p' "$CB_BUILD/worker-id.h")
}
# old_glibc N: host N says its glibc is older than ours (getconf), so
# that our dynamically linked worker is not for it.
old_glibc() {
	printf '#!/bin/sh\necho "glibc 2.17"\n' > "$(host_bin_dir "$1")/getconf"
	chmod 755 "$(host_bin_dir "$1")/getconf"
}
host_smi_runs() { wc -l < "$(host_gpu_dir "$1")/smi.log"; }
host_nvml_calls() { grep -cx "$2" "$(host_gpu_dir "$1")/nvml.log" || true; }
host_worker() { echo "$(host_home "$1")/.local/state/sshgpu-queue/bin/cardbaton-worker-$WID"; }
# elf_interp FILE: FILE is an ELF program with a PT_INTERP header (it
# is dynamically linked: the kernel starts its dynamic loader).
elf_interp() {
	python3 - "$1" <<-'PY'
		import struct, sys
		f = open(sys.argv[1], "rb").read()
		assert f[:4] == b"\x7fELF", "not ELF"
		e = "<" if f[5] == 1 else ">"
		if f[4] == 2:
		    (off,) = struct.unpack_from(e + "Q", f, 0x20)
		    size, num = struct.unpack_from(e + "HH", f, 0x36)
		else:
		    (off,) = struct.unpack_from(e + "I", f, 0x1C)
		    size, num = struct.unpack_from(e + "HH", f, 0x2A)
		types = [struct.unpack_from(e + "I", f, off + i * size)[0] for i in range(num)]
		sys.exit(0 if 3 in types else 1)
	PY
}
ssh_state() { in_client cardbaton-status --config "$C" --json "$1" | json 'd["jobs"][0]["state"]'; }
ssh_final() { case "$(ssh_state "$1")" in succeeded|failed|cancelled|lost) return 0 ;; esac; return 1; }

@test "SSH node with our glibc: our dynamically linked worker, byte for byte, nothing compiled, and NVML answers" {
	ssh_hosts
	run in_client script -qec "cardbaton-gpus --config '$C' --node host1 --json" /dev/null
	[ "$status" -eq 0 ]
	[[ $output == *"cardbaton: host1: installing cardbaton-worker $WID ($(uname -m), glibc $(getconf GNU_LIBC_VERSION | cut -d' ' -f2))..."* ]]
	[[ $output != *"compiled there"* && $output != *"static build"* ]]
	cmp "$(host_worker 1)" "$CB_BUILD/cardbaton-worker-dynamic"
	elf_interp "$(host_worker 1)"
	[ "$(ls -A "$(dirname "$(host_worker 1)")")" = "cardbaton-worker-$WID" ]
	run in_client cardbaton-gpus --config "$C" --node host1 --json
	[ "$status" -eq 0 ]
	[ "$(echo "$output" | json 'len(d["nodes"][0]["gpus"])')" -eq 4 ]
	[ "$(host_nvml_calls 1 nvmlInit_v2)" -ge 2 ]
	[ "$(host_smi_runs 1)" -eq 0 ]
}

@test "SSH node with an older glibc and cc: the worker is compiled there, dynamically linked, and its queries and handoffs go through NVML" {
	ssh_hosts
	old_glibc 1
	# The check below tells the two builds apart.
	elf_interp "$CB_BUILD/cardbaton-worker"
	not elf_interp "$CB_BUILD/cardbaton-worker-static"

	run in_client script -qec "cardbaton-gpus --config '$C' --node host1 --json" /dev/null
	[ "$status" -eq 0 ]
	[[ $output == *"cardbaton: host1: installing cardbaton-worker $WID ($(uname -m), compiled there)..."* ]]
	[[ $output == *"cardbaton: host1: cardbaton-worker installed"* ]]
	[[ $output != *"static build"* ]]
	elf_interp "$(host_worker 1)"
	not cmp -s "$(host_worker 1)" "$CB_BUILD/cardbaton-worker-static"
	# Nothing else in bin/, nothing left in the host's TMPDIR.
	[ "$(ls -A "$(dirname "$(host_worker 1)")")" = "cardbaton-worker-$WID" ]
	[ -z "$(ls -A "$(host_dir 1)/tmp")" ]
	# The query: the four cards, from NVML.
	run in_client cardbaton-gpus --config "$C" --node host1 --json
	[ "$status" -eq 0 ]
	[ "$(echo "$output" | json 'len(d["nodes"][0]["gpus"])')" -eq 4 ]
	[ "$(echo "$output" | json 'd["nodes"][0]["gpus"][3]["uuid"]')" = "$(host_gpu_uuid 1 3)" ]
	[ "$(host_nvml_calls 1 nvmlInit_v2)" -ge 2 ]
	[ "$(host_smi_runs 1)" -eq 0 ]

	# A handoff: the second job waits for the first one's card and is
	# placed when the node says it ended.  NVML all the way: the
	# daemon's queries, the check under the lease.
	: > "$(host_gpu_dir 1)/nvml.log"
	ssh_daemon
	a=$(in_client cardbaton-submit --config "$C" --node host1 --gpus 0 -- sh -c 'sleep 1; echo "$CUDA_VISIBLE_DEVICES" > "$0"' "$T/a")
	b=$(in_client cardbaton-submit --config "$C" --node host1 --gpus 0 -- sh -c 'echo "$CUDA_VISIBLE_DEVICES" > "$0"' "$T/b")
	wait_for 60 ssh_final "$b"
	[ "$(ssh_state "$a")" = succeeded ]
	[ "$(ssh_state "$b")" = succeeded ]
	[ "$(cat "$T/a")" = "$(host_gpu_uuid 1 0)" ]
	[ "$(cat "$T/b")" = "$(host_gpu_uuid 1 0)" ]
	[ "$(host_nvml_calls 1 nvmlInit_v2)" -ge 2 ]
	[ "$(host_nvml_calls 1 nvmlDeviceGetComputeRunningProcesses_v3)" -ge 2 ]
	[ "$(host_smi_runs 1)" -eq 0 ]
	not grep -q 'NVML' "$T/daemon.log"
	# Shipped once.
	[ "$(ls -A "$(dirname "$(host_worker 1)")")" = "cardbaton-worker-$WID" ]
}

@test "SSH node whose cc fails: the static build, one line saying why, and nvidia-smi answers" {
	ssh_hosts
	old_glibc 2
	run in_client script -qec "cardbaton-gpus --config '$C' --node host2 --json" /dev/null
	[ "$status" -eq 0 ]
	[[ $output == *"cardbaton: host2: installing cardbaton-worker $WID ($(uname -m), compiled there)..."* ]]
	[[ $output == *"cardbaton: host2: cannot compile the worker there (cc failed (exit 1): cc: this compiler is broken); installing the static build (nvidia-smi only)..."* ]]
	[[ $output == *"cardbaton: host2: cardbaton-worker installed"* ]]
	[ "$(grep -c 'cannot compile' <<< "$output")" -eq 1 ]
	cmp "$(host_worker 2)" "$CB_BUILD/cardbaton-worker-static"
	[ "$(ls -A "$(dirname "$(host_worker 2)")")" = "cardbaton-worker-$WID" ]
	[ -z "$(ls -A "$(host_dir 2)/tmp")" ]
	# The fake NVML is there, but the static worker never loads it.
	run in_client cardbaton-gpus --config "$C" --node host2 --json
	[ "$status" -eq 0 ]
	[ "$(echo "$output" | json 'len(d["nodes"][0]["gpus"])')" -eq 2 ]
	[ "$(echo "$output" | json 'd["nodes"][0]["gpus"][1]["memory_used_mib"]')" -eq 30000 ]
	[ "$(host_smi_runs 2)" -ge 2 ]
	[ "$(host_nvml_calls 2 nvmlInit_v2)" -eq 0 ]

	# Jobs and a handoff through nvidia-smi.
	: > "$(host_gpu_dir 2)/smi.log"
	ssh_daemon
	a=$(in_client cardbaton-submit --config "$C" --node host2 --gpus 0 -- sh -c 'sleep 1; echo "$CUDA_VISIBLE_DEVICES" > "$0"' "$T/a")
	b=$(in_client cardbaton-submit --config "$C" --node host2 --gpus 0 -- sh -c 'echo "$CUDA_VISIBLE_DEVICES" > "$0"' "$T/b")
	wait_for 60 ssh_final "$b"
	[ "$(ssh_state "$a")" = succeeded ]
	[ "$(ssh_state "$b")" = succeeded ]
	[ "$(cat "$T/b")" = "$(host_gpu_uuid 2 0)" ]
	[ "$(host_smi_runs 2)" -ge 4 ]
	[ "$(host_nvml_calls 2 nvmlInit_v2)" -eq 0 ]
	# Installed once, not compiled again by the daemon.
	cmp "$(host_worker 2)" "$CB_BUILD/cardbaton-worker-static"
}

# far_node [ENV...]: config $C with one SSH node "far" whose "ssh" runs
# the remote command line here, under env ENV... (the node is this
# machine; its state directory $T/far).
far_node() {
	printf '#!/bin/sh\nwhile [ "$1" != -- ]; do shift; done\nexec env %s sh -c "$2"\n' "$*" > "$T/ssh"
	chmod +x "$T/ssh"
	C=$T/far.yaml
	printf 'spool: ./spool\nssh_command: [%s]\nremote_state_dir: %s\nnodes:\n  far:\n    ssh: far\n' \
		"$T/ssh" "$T/far" > "$C"
	WID=$(sed -n 's/^#define WORKER_ID "\(.*\)"/\1/p' "$CB_BUILD/worker-id.h")
}

@test "a node without a compiler gets the static build; of another architecture, an error that says why" {
	mkdir "$T/old"
	printf '#!/bin/sh\necho "glibc 2.17"\n' > "$T/old/getconf"
	chmod 755 "$T/old/getconf"
	far_node "PATH=$T/old:$PATH" CC=/nonexistent/cc
	run script -qec "cardbaton-gpus --config '$C'" /dev/null
	[ "$status" -eq 0 ]
	[[ $output == *"cardbaton: far: installing cardbaton-worker $WID ($(uname -m), static build)..."* ]]
	[[ $output != *"compiled there"* ]]
	cmp "$T/far/bin/cardbaton-worker-$WID" "$CB_BUILD/cardbaton-worker-static"

	# Another architecture: no compiler, a compiler that fails.
	rm -r "$T/far"
	mkdir "$T/arch"
	printf '#!/bin/sh\n[ "$1" = -m ] && echo riscv64 || exec /bin/uname "$@"\n' > "$T/arch/uname"
	chmod 755 "$T/arch/uname"
	far_node "PATH=$T/arch:$PATH" CC=/nonexistent/cc
	run --separate-stderr cardbaton-gpus --config "$C" --json
	[ "$status" -eq 69 ]
	[ "$(echo "$output" | json 'd["nodes"][0]["error"]')" = "far: cannot install the worker: no C compiler there to build it for riscv64, and the static build is for $(uname -m)" ]
	[ ! -e "$T/far/bin/cardbaton-worker-$WID" ]
	printf '#!/bin/sh\necho "cc: this compiler is broken" >&2\nexit 1\n' > "$T/arch/cc"
	chmod 755 "$T/arch/cc"
	far_node "PATH=$T/arch:$PATH"
	run --separate-stderr cardbaton-gpus --config "$C" --json
	[ "$status" -eq 69 ]
	[ "$(echo "$output" | json 'd["nodes"][0]["error"]')" = "far: cannot install the worker: cc failed (exit 1): cc: this compiler is broken (and the static build is for $(uname -m), not riscv64)" ]
	[ -z "$(ls -A "$T/far/bin")" ]
}

@test "a compile that fails for another reason than the compiler fails the install: no static build" {
	command -v cc >/dev/null || skip "no C compiler"
	far_node
	# bin/ cannot be made: the state directory is a file.
	echo > "$T/far"
	run --separate-stderr cardbaton-gpus --config "$C" --json
	[ "$status" -eq 69 ]
	[[ $(echo "$output" | json 'd["nodes"][0]["error"]') == "far: installing the worker failed: mkdir: "* ]]
	[ -f "$T/far" ]
}
