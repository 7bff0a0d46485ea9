# tests/lib/scale.bash - the one factor every timeout of the tests is
# multiplied by, CB_TEST_TIMEOUT_SCALE, and the machine's share of the
# work.  Sourced by tests/run, tests/lib/common.bash, tests/crash-walk
# and tests/soak/soak (bash; no process started but what is said).
#
# A timeout here is a bound on how long a test waits for something
# that should happen (a state, a file, a log line, a daemon's start) or
# on a whole test (bats' BATS_TEST_TIMEOUT): it is there to end a hung
# run, never to check a speed.  On a loaded or small machine, or under
# the sanitizers, everything takes longer, so every such bound is
# SECONDS x CB_TEST_TIMEOUT_SCALE.  What a test checks about time (a
# limit the product keeps, "within a second of the job's end") is not
# a timeout and is never scaled (common.bash `within`).

# cb_nproc: the CPUs this process may run on.
cb_nproc() { nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1; }

# cb_load: the 1-minute load average, whole (rounded down).
cb_load() {
	local l _
	read -r l _ < /proc/loadavg 2>/dev/null || l=0
	echo "${l%%.*}"
}

# cb_sanitized BUILD_DIR: its daemon is built with AddressSanitizer.
cb_sanitized() { grep -qa __asan_init "$1/cardbaton-spoold" 2>/dev/null; }

# cb_default_scale BUILD_DIR: the factor when CB_TEST_TIMEOUT_SCALE is
# not set: 1, doubled for each of: a sanitizer build (ASan+UBSan run
# our C 2-4 times slower); a machine of at most 2 CPUs (make test runs
# its lanes at once, and they share them); a 1-minute load average at
# or above the CPU count at start.  So 1 on an idle workstation, 4 for
# the plain pass on CI's 2 cores, 8 for its sanitizer pass.
cb_default_scale() {
	local s=1 n
	n=$(cb_nproc)
	cb_sanitized "$1" && s=$((s * 2))
	[ "$n" -le 2 ] && s=$((s * 2))
	[ "$(cb_load)" -ge "$n" ] && s=$((s * 2))
	echo "$s"
}

# cb_milli NUMBER VAR: VAR=NUMBER in thousandths (NUMBER: digits, at
# most three decimals: 2, 1.5, 0.25); fails, saying so, on anything else.
cb_milli() {
	local _i _f
	[[ $1 =~ ^([0-9]+)(\.([0-9]{1,3}))?$ ]] || { echo "not a number like 2 or 1.5: '$1'" >&2; return 1; }
	_i=${BASH_REMATCH[1]} _f=${BASH_REMATCH[3]}000
	printf -v "$2" '%d' $(( 10#$_i * 1000 + 10#${_f:0:3} ))
}

# cb_scale_check: CB_TEST_TIMEOUT_SCALE (1 when unset) is a number
# above 0; sets CB_SCALE_MILLI, the factor in thousandths.
cb_scale_check() {
	cb_milli "${CB_TEST_TIMEOUT_SCALE:-1}" CB_SCALE_MILLI 2>/dev/null && [ "$CB_SCALE_MILLI" -gt 0 ] || {
		echo "CB_TEST_TIMEOUT_SCALE: '${CB_TEST_TIMEOUT_SCALE-}' is not a number above 0 (like 2 or 1.5)" >&2
		return 1
	}
}

# cb_scaled_ms SECONDS VAR: VAR=SECONDS x CB_TEST_TIMEOUT_SCALE, in
# milliseconds (no process started: wait_for's).
cb_scaled_ms() {
	local _m
	[ -n "${CB_SCALE_MILLI:-}" ] || cb_scale_check || return 1
	cb_milli "$1" _m || return 1
	printf -v "$2" '%d' $(( _m * CB_SCALE_MILLI / 1000 ))
}

# scaled_ms SECONDS: the same, printed.
scaled_ms() {
	local ms
	cb_scaled_ms "$1" ms || return 1
	echo "$ms"
}

# scaled SECONDS: the same in whole seconds, rounded up (for timeout(1),
# BATS_TEST_TIMEOUT and the like).
scaled() {
	local ms
	ms=$(scaled_ms "$1") || return 1
	echo $(( (ms + 999) / 1000 ))
}

# cb_jobs MAX: how many runs that mostly wait to have going at once:
# two per CPU, at most MAX.  (The crash walk's runs mostly wait on its
# timed steps, about a minute each under the sanitizers on a busy
# 2-CPU machine: 2 at a time there make the walk some 20 minutes, 4 is
# what CI ran within its 17, 6 left timed steps unreached.  A loaded
# machine is answered by the timeouts' scale, not by fewer runs.)
cb_jobs() {
	local j
	j=$(( 2 * $(cb_nproc) ))
	[ "$j" -le "$1" ] || j=$1
	echo "$j"
}
