# tests/lib/common.bash - shared by every bats suite in tests/e2e.
#
# Each test gets a fresh directory $T with its own HOME, XDG dirs, a
# simulated GPU fixture ($FAKE_GPU_DIR, read by tests/fake-nvidia-smi
# and by the fake NVML library, see use_fake_nvml)
# and a config ($T/config.yaml, one local node) whose spool is $T/spool.
# The binaries under test come from $CB_BUILD (set by tests/run).
#
# Every timeout is a bound on a wait, scaled by CB_TEST_TIMEOUT_SCALE
# (tests/lib/scale.bash, chosen by tests/run): wait_for, start_daemon,
# test_timeout (bats' per-test limit), and `timeout "$(scaled N)"` or
# `$(scaled N)` wherever a test bounds a command or a loop itself.

: "${CB_BUILD:?run the suite through tests/run}"
: "${CB_TOP:?run the suite through tests/run}"
. "$CB_TOP/tests/lib/scale.bash"
cb_scale_check || exit 1
# A BATS_TEST_TIMEOUT given to tests/run is every test's limit.
[ -z "${CB_BATS_TEST_TIMEOUT:-}" ] || export BATS_TEST_TIMEOUT=$CB_BATS_TEST_TIMEOUT

# test_timeout SECONDS (at a file's top level): each of its tests is
# stopped and failed after SECONDS, scaled (BATS_TEST_TIMEOUT).
test_timeout() {
	export BATS_TEST_TIMEOUT=${CB_BATS_TEST_TIMEOUT:-$(scaled "$1")}
}

setup_common() {
	T=$BATS_TEST_TMPDIR
	export HOME=$T/home XDG_CONFIG_HOME=$T/home/.config XDG_STATE_HOME=$T/home/.local/state
	# ssh connection-sharing sockets per test (link/node.c puts them here).
	export XDG_RUNTIME_DIR=$T/run
	mkdir -p "$HOME"
	mkdir -m 0700 "$XDG_RUNTIME_DIR"
	export FAKE_GPU_DIR=$T/gpus
	mkdir -p "$FAKE_GPU_DIR/bin"
	ln -s "$CB_TOP/tests/fake-nvidia-smi" "$FAKE_GPU_DIR/bin/nvidia-smi"
	export PATH=$CB_BUILD:$FAKE_GPU_DIR/bin:$PATH
	export CARDBATON_WORKER=$CB_BUILD/cardbaton-worker
	export STATE=$HOME/.local/state/sshgpu-queue
	# The worker asks NVML before nvidia-smi: never the machine's own
	# driver library here.  CB_TEST_NVML=fake (or fake-old) runs a whole
	# suite through the fake NVML library before the fake nvidia-smi.
	case ${CB_TEST_NVML:-} in
	fake) use_fake_nvml ;;
	fake-old) use_fake_nvml old ;;
	*) export CARDBATON_NVML=off ;;
	esac
	# Four idle cards by default.
	fake_gpus \
		"0, GPU-00000000-0000-0000-0000-000000000000, NVIDIA Fake A100, 0, 81920, 0" \
		"1, GPU-11111111-1111-1111-1111-111111111111, NVIDIA Fake A100, 0, 81920, 0" \
		"2, GPU-22222222-2222-2222-2222-222222222222, NVIDIA Fake A100, 0, 81920, 0" \
		"3, GPU-33333333-3333-3333-3333-333333333333, NVIDIA Fake A100, 0, 81920, 0"
	: > "$FAKE_GPU_DIR/apps.csv"
	cd "$T" || return 1
	printf 'spool: ./spool\nnodes:\n  local:\n    local: true\n' > "$T/config.yaml"
}

# use_fake_nvml [old]: the worker asks the fake NVML library
# (tests/fake-nvml/, the same fixtures as the fake nvidia-smi) first;
# "old" is the one of a pre-R510 driver.  CARDBATON_NVML=off: nvidia-smi
# alone (setup_common's default).
use_fake_nvml() {
	export CARDBATON_NVML=$CB_BUILD/tests/fake-nvml${1:+-$1}/libnvidia-ml.so.1
}

# fake_gpus LINE... : replace gpus.csv ("index, uuid, name, memory.used,
# memory.total, utilization.gpu" per line) atomically.
fake_gpus() {
	printf '%s\n' "$@" > "$FAKE_GPU_DIR/.gpus.csv.tmp"
	mv "$FAKE_GPU_DIR/.gpus.csv.tmp" "$FAKE_GPU_DIR/gpus.csv"
}

# fake_apps LINE... : replace apps.csv ("gpu_uuid, pid, used_memory").
fake_apps() {
	printf '%s\n' "$@" > "$FAKE_GPU_DIR/.apps.csv.tmp"
	mv "$FAKE_GPU_DIR/.apps.csv.tmp" "$FAKE_GPU_DIR/apps.csv"
}

# wait_for SECONDS 'CONDITION' : evaluate the shell CONDITION until it
# succeeds, at most SECONDS (scaled: CB_TEST_TIMEOUT_SCALE).  Single-quote
# it so that $(...) in it is run anew each time:
# wait_for 10 '[ "$(state "$id")" = running ]'.  It is tried every 20 ms
# at first, then less often, up to every 100 ms: a condition that runs a
# tool and python is most of a CPU at 20 ms, and a loaded machine is
# loaded the more by every test that waits.
wait_for() {
	local _wf_ms
	cb_scaled_ms "$1" _wf_ms || return 1
	shift
	_poll "$_wf_ms" "wait_for timed out" "$@"
}

# within SECONDS 'CONDITION' : the same, but SECONDS is what the test
# checks (a deadline the product keeps, "within a second of the job's
# end"), not a bound on a wait: never scaled.  Use it only for that.
within() {
	local _wf_ms
	cb_milli "$1" _wf_ms || return 1
	shift
	_poll "$_wf_ms" "not within the time checked" "$@"
}

# settle SECONDS: the pause of a negative check -- what must not happen
# (a launch, an exit, a state change) is given SECONDS to happen, and
# the line after checks that it did not.  Not a wait for something: an
# event that should come is waited for with wait_for.  Not scaled: a
# slower machine can make such a check pass that should have failed,
# never the reverse.
settle() { sleep "$1"; }

# _poll MS WHAT CONDITION...: wait_for's loop (its locals named so as
# not to hide a variable the condition reads).
_poll() {
	local _wf_end _wf_what=$2 _wf_iv=20 _wf_t _wf_s
	_wf_t=${EPOCHREALTIME/[.,]/}
	_wf_end=$(( _wf_t / 1000 + $1 ))
	shift 2
	until eval "$*" >/dev/null 2>&1; do
		_wf_t=${EPOCHREALTIME/[.,]/}
		if [ $(( _wf_t / 1000 )) -gt "$_wf_end" ]; then
			echo "$_wf_what: $*" >&2
			return 1
		fi
		printf -v _wf_s '0.%03d' "$_wf_iv"
		sleep "$_wf_s"
		[ "$_wf_iv" -ge 100 ] || _wf_iv=$(( _wf_iv * 3 / 2 ))
	done
}

# start_daemon [ARGS...]: cardbaton-spoold in the background, $DAEMON_PID.
# Returns once the daemon watches its spool (its "serving" line).
start_daemon() {
	local before
	before=$(grep -c 'serving' "$T/daemon.log" 2>/dev/null || true)
	cardbaton-spoold --config "$T/config.yaml" "$@" >>"$T/daemon.log" 2>&1 &
	DAEMON_PID=$!
	wait_for 10 '[ "$(grep -c serving "$T/daemon.log")" -gt "${before:-0}" ]'
}

stop_daemon() {
	if [ -n "${DAEMON_PID:-}" ]; then
		kill -TERM "$DAEMON_PID" 2>/dev/null
		wait "$DAEMON_PID" 2>/dev/null
		DAEMON_PID=
	fi
}

# job_state ID: the job's state from status --json.
job_state() {
	cardbaton-status --config "$T/config.yaml" --json "$1" |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["jobs"][0]["state"])'
}

# not CMD...: succeeds when CMD fails.  Use it, not "! CMD", inside a
# test: bats does not fail a test on a "! CMD" that is not its last line.
not() {
	if "$@"; then
		echo "not: this succeeded: $*" >&2
		return 1
	fi
}

# failed CODE PROG: the last `run --separate-stderr` exited CODE with
# exactly one line on stderr, "PROG: ...".
failed() {
	if [ "$status" -ne "$1" ]; then
		echo "exit $status, expected $1; stderr: $stderr" >&2
		return 1
	fi
	if [ "${#stderr_lines[@]}" -ne 1 ] || [[ ${stderr_lines[0]} != "$2: "* ]]; then
		echo "stderr is not one '$2: ' line: $stderr" >&2
		return 1
	fi
}

# json EXPR < doc : print a Python expression over the parsed document d.
json() {
	python3 -c 'import json,sys; d=json.load(sys.stdin); r=eval(sys.argv[1]); print(r if not isinstance(r,(list,dict)) else json.dumps(r))' "$1"
}

# kill_attempt_procs: SIGKILL every process holding a file of $STATE
# open (supervisors and jobs hold their lock and leases), whatever its
# command line.
kill_attempt_procs() {
	local p
	[ -n "${STATE:-}" ] || return 0
	for p in $(find /proc/[0-9]*/fd -maxdepth 1 -lname "$STATE/*" 2>/dev/null | cut -d/ -f3 | sort -u); do
		[ "$p" != "$$" ] && kill -KILL "$p" 2>/dev/null
	done
	return 0
}

teardown_common() {
	if [ -z "${BATS_TEST_COMPLETED:-}" ] && [ -s "$T/daemon.log" ]; then
		{ echo "# --- $T/daemon.log"; sed 's/^/# /' "$T/daemon.log"; } >&3
	fi
	stop_daemon
	kill_attempt_procs
	# Kill whatever a test left running in its own tree.
	pkill -KILL -f "$T/" 2>/dev/null || true
}

# The tools on the test's config ($C): sub (submit), st (status);
# field ID KEY: a field of job ID's status --json element; final ID:
# the job has ended.  A file may define its own (the SSH ones do).
sub() { cardbaton-submit --config "$C" "$@"; }
st() { cardbaton-status --config "$C" "$@"; }
field() { st --json "$1" | json "d['jobs'][0]['$2']"; }
final() {
	case "$(field "$1" state)" in succeeded|failed|cancelled|lost) return 0 ;; esac
	return 1
}
