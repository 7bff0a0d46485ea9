#!/usr/bin/env bats
# The deterministic crash-point walk (tests/crash-walk): the daemon or
# the worker SIGKILLs itself at each named step of every transition the
# scenario passes, is restarted, and the invariants are checked.  Runs
# against a crash-point build (`make test`'s build-san is one); skipped
# against a release build, which has no crash points.

load ../lib/common

@test "crash points: killed at each step of every transition and restarted, every job ends once, nothing runs twice or is half-written" {
	grep -q CARDBATON_CRASH_AT "$CB_BUILD/cardbaton-spoold" ||
		skip "not a crash-point build (make test's build-san is one)"
	run "$CB_TOP/tests/crash-walk" "$CB_BUILD"
	echo "$output"
	[ "$status" -eq 0 ]
	# The walk covered more than the discovery run.
	[ "$(grep -c '^ok ' <<< "$output")" -gt 20 ]
}

@test "crash points: a release build has none" {
	grep -q CARDBATON_CRASH_AT "$CB_BUILD/cardbaton-spoold" &&
		skip "this is the crash-point build"
	for b in cardbaton-spoold cardbaton-worker cardbaton-worker-static cardbaton-submit; do
		not grep -q CARDBATON_CRASH_AT "$CB_BUILD/$b"
	done
}
