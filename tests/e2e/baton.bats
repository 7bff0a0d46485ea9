#!/usr/bin/env bats
# baton.bats - staged attempts on the node (LAYOUT.md section 8, "Staged
# attempts (the baton)"): cardbaton-worker driven directly, no daemon.
# A spec with `after` is staged in STATE/staged/ID and started by the
# node itself when the attempts it names end (its deck, waiting on their
# locks; or the supervisor of the last one, exec'ing `baton`), or given
# up as `unstaged`.

load ../lib/common
load ../lib/worker

bats_require_minimum_version 1.5.0

test_timeout 60

setup() {
	setup_common
}

teardown() {
	teardown_common
}

# A job that waits for a line on the fifo $T/go.N, so that a test ends
# it when it wants: hold N.  end_hold N lets it go.
hold() {
	[ -p "$T/go.$1" ] || mkfifo "$T/go.$1"
}
end_hold() {
	echo go > "$T/go.$1"
}

# The staged job: appends its attempt ID and CUDA_VISIBLE_DEVICES to
# $T/ran (one line per start), then waits on $T/go.b when it exists.
BJOB='echo "$CARDBATON_ATTEMPT_ID $CUDA_VISIBLE_DEVICES" >> "$RAN"; if [ -p "$GO" ]; then read x < "$GO"; fi'

# stage_b ID AFTER... [-- KEY VALUE...]: launch ID on card 0 (with its
# UUID) after the attempts AFTER; $output the answer.
stage_b() {
	local id=$1 a=()
	shift
	while [ $# -gt 0 ] && [ "$1" != -- ]; do a+=(after "$1"); shift; done
	[ "${1:-}" != -- ] || shift
	launch attempt "$id" shell "$BJOB" env "RAN=$T/ran" env "GO=$T/go.b" gpu 0 uuid "$U0" "${a[@]}" "$@"
}

deck_of() {         # deck_of ID: the PID of attempt ID's deck, or nothing
	pgrep -f -x "cardbaton-worker -d $STATE deck $1" || true
}

# no_deck ID: ID's deck (there is one) killed, so that the baton of the
# attempt it waits for is what starts it.
no_deck() {
	local deck_id=$1 p
	wait_for 5 '[ -n "$(deck_of "$deck_id")" ]'
	p=$(deck_of "$deck_id")
	kill -KILL $p
	wait_for 5 '[ -z "$(deck_of "$deck_id")" ]'
}

# flush_steps A B [STARTER]: the steps of strace -f -y's $T/st in order,
# one a line, into $T/steps (and shown): A's and B's state renames
# ("rename A"), the syncs of their state files' data ("sync A data"),
# of attempts/ and syncfs, and B's job's exec.  With STARTER (a PID),
# any other process's lines from its exec into a deck or baton on are
# left out.
flush_steps() {
	awk -v a="$1" -v b="$2" -v starter="${3:-}" '
		starter != "" && $1 != starter &&
		    /execve\("\/proc\/self\/exe", \["cardbaton-worker", "-d", "[^"]*", "(deck|baton)"/ { out[$1] = 1 }
		out[$1] { next }
		/ (rename|renameat|renameat2)\(/ && index($0, "\"" a ".state\"") { print "rename A"; next }
		/ (rename|renameat|renameat2)\(/ && index($0, "\"" b ".state\"") { print "rename B"; next }
		/ (fsync|fdatasync)\(/ && index($0, "/." a ".state.tmp>") { print "sync A data"; next }
		/ (fsync|fdatasync)\(/ && index($0, "/." b ".state.tmp>") { print "sync B data"; next }
		/ (fsync|fdatasync)\([0-9]+<[^>]*\/attempts>/ { print "sync attempts"; next }
		/ syncfs\(/ { print "syncfs"; next }
		/ execve\(.*CARDBATON_ATTEMPT_ID/ && !x { print "exec B"; x = 1 }' "$T/st" > "$T/steps"
	cat "$T/steps"
}

# end_then_start: in $T/steps, from the sync before A's last rename (its
# end) to B's job, exactly: A's data, its rename, B's `starting` and the
# flush of attempts/ that makes both durable, then B's job.
end_then_start() {
	local last exec_b
	last=$(grep -n '^rename A$' "$T/steps" | tail -n1 | cut -d: -f1)
	exec_b=$(grep -n '^exec B$' "$T/steps" | cut -d: -f1)
	[ "$(sed -n "$((last - 1)),${exec_b}p" "$T/steps" | tr '\n' ,)" = \
		"sync A data,rename A,sync B data,rename B,sync attempts,exec B," ]
}

starts() {          # starts ID: how many times attempt ID's job started
	if [ -e "$T/ran" ]; then grep -c "^$1 " "$T/ran" || true; else echo 0; fi
}

@test "staged after a running attempt: staged, no attempt directory; it starts by itself the moment that one ends, on the card's UUID" {
	hold a
	launch attempt ba-1 shell 'read x < "$GO"' env "GO=$T/go.a" gpu 0
	[ "$status" -eq 0 ]
	[ "$(field state <<< "$output")" = running ]
	hold b
	stage_b bb-1 ba-1
	[ "$status" -eq 0 ]
	[ "$(field attempt <<< "$output")" = bb-1 ]
	[ "$(field state <<< "$output")" = staged ]
	[ "$(field after <<< "$output")" = ba-1 ]
	[ "$(field gpu <<< "$output")" = 0 ]
	[ "$(field uuid <<< "$output")" = "$U0" ]
	[ ! -e "$STATE/attempts/bb-1" ] && [ ! -e "$STATE/attempts/bb-1.state" ]
	[ -f "$STATE/staged/bb-1" ]
	[ "$(stat -c %a "$STATE/staged")" = 700 ]
	[ "$(stat -c %a "$STATE/staged/bb-1")" = 600 ]
	[ "$(st bb-1 state)" = staged ]
	[ "$(st bb-1 alive)" = 0 ]
	[ "$(st bb-1 after)" = ba-1 ]
	# A staged attempt has no log yet.
	run --separate-stderr cardbaton-worker log bb-1
	failed 66 cardbaton-worker
	# The first one ends: the second runs, no command run meanwhile.
	end_hold a
	wait_for 10 '[ "$(starts bb-1)" -eq 1 ]'
	wait_for 5 '[ "$(st bb-1 state)" = running ]'
	[ "$(st ba-1 state)" = succeeded ]
	[ "$(cat "$T/ran")" = "bb-1 $U0" ]
	[ ! -e "$STATE/staged/bb-1" ]
	not lease_free "$U0"
	# The same launch again: its running record, never a second start.
	run cardbaton-worker launch < "$T/spec.in"
	[ "$status" -eq 0 ]
	[ "$(field state <<< "$output")" = running ]
	[ ! -e "$STATE/staged/bb-1" ]
	end_hold b
	wait_final bb-1
	run cardbaton-worker launch < "$T/spec.in"
	[ "$(field state <<< "$output")" = succeeded ]
	[ "$(starts bb-1)" -eq 1 ]
}

@test "staged after two attempts: it starts only once both have ended" {
	hold a
	hold c
	launch attempt ca-1 shell 'read x < "$GO"' env "GO=$T/go.a" gpu 0
	launch attempt cc-1 shell 'read x < "$GO"' env "GO=$T/go.c" gpu 1
	launch attempt cb-1 shell "$BJOB" env "RAN=$T/ran" gpu 0 gpu 1 after ca-1 after cc-1
	[ "$(field state <<< "$output")" = staged ]
	[ "$(grep -c '^after ' <<< "$output")" -eq 2 ]
	end_hold a
	wait_final ca-1
	# Its baton ran (the staged file is still there, untouched) ...
	settle 0.5
	[ "$(st cb-1 state)" = staged ]
	[ "$(starts cb-1)" -eq 0 ]
	end_hold c
	wait_final cb-1 10
	[ "$(st cb-1 state)" = succeeded ]
	[ "$(starts cb-1)" -eq 1 ]
	[ "$(cut -d' ' -f2 "$T/ran")" = "$U0,$U1" ]
}

@test "staged after attempts already over, or never seen here: it starts at once, and the answer is its running record" {
	launch attempt da-1 arg true gpu 0
	wait_final da-1
	hold b
	stage_b db-1 da-1 ff-00
	[ "$status" -eq 0 ]
	[ "$(field state <<< "$output")" = running ]
	[ -n "$(field pid <<< "$output")" ]
	[ ! -e "$STATE/staged/db-1" ]
	[ "$(starts db-1)" -eq 1 ]
	end_hold b
	wait_final db-1
}

@test "unstage while the attempt it waits for runs: unstaged, its file gone; that attempt's end starts nothing" {
	hold a
	launch attempt ea-1 shell 'read x < "$GO"' env "GO=$T/go.a" gpu 0
	stage_b eb-1 ea-1
	[ "$(field state <<< "$output")" = staged ]
	run cardbaton-worker unstage eb-1
	[ "$status" -eq 0 ]
	[ "$(field state <<< "$output")" = unstaged ]
	[ "$(field reason <<< "$output")" = "unstaged by the controller" ]
	[ "$(field alive <<< "$output")" = 0 ]
	[ -n "$(field finished <<< "$output")" ]
	[ "$(field uuid <<< "$output")" = "$U0" ]
	[ ! -e "$STATE/staged/eb-1" ]
	[ ! -e "$STATE/attempts/eb-1" ]
	[ "$(st eb-1 state)" = unstaged ]
	# Again: the record as status has it.  Never heard of: 66.
	run cardbaton-worker unstage eb-1
	[ "$status" -eq 0 ]
	[ "$(field state <<< "$output")" = unstaged ]
	run --separate-stderr cardbaton-worker unstage ee-9
	failed 66 cardbaton-worker
	# The same launch again answers the final record and stages nothing.
	run cardbaton-worker launch < "$T/spec.in"
	[ "$status" -eq 0 ]
	[ "$(field state <<< "$output")" = unstaged ]
	[ ! -e "$STATE/staged/eb-1" ]
	end_hold a
	wait_final ea-1
	run cardbaton-worker baton
	[ "$status" -eq 0 ]
	[ -z "$output" ]
	[ "$(st eb-1 state)" = unstaged ]
	[ "$(starts eb-1)" -eq 0 ]
	lease_free "$U0"
}

@test "cancel of a staged attempt: cancelled, never started; pause of one: unstaged, back in the queue" {
	hold a
	launch attempt fa-1 shell 'read x < "$GO"' env "GO=$T/go.a" gpu 0
	stage_b fb-1 fa-1
	stage_b fb-2 fa-1
	run cardbaton-worker cancel fb-1
	[ "$status" -eq 0 ]
	[ "$(field state <<< "$output")" = cancelled ]
	[ "$(field reason <<< "$output")" = "cancelled before it started" ]
	# pause needs no resumable spec here: nothing runs yet.
	run cardbaton-worker pause fb-2
	[ "$status" -eq 0 ]
	[ "$(field state <<< "$output")" = unstaged ]
	[ "$(field reason <<< "$output")" = "paused before it started: back in the queue" ]
	[ -z "$(ls -A "$STATE/staged")" ]
	end_hold a
	wait_final fa-1
	settle 0.3
	[ "$(st fb-1 state)" = cancelled ]
	[ "$(st fb-2 state)" = unstaged ]
	[ "$(starts fb-1)" -eq 0 ] && [ "$(starts fb-2)" -eq 0 ]
	[ ! -e "$STATE/attempts/fb-1" ] && [ ! -e "$STATE/attempts/fb-2" ]
}

@test "the card busy (a compute process) when the turn comes: tried for the settle time, then unstaged saying why" {
	hold a
	launch attempt 6a-1 shell 'read x < "$GO"' env "GO=$T/go.a" gpu 0
	stage_b 6b-1 6a-1
	fake_apps "$U0, 4242, 300"
	end_hold a
	wait_final 6a-1
	# Still trying within the settle time, then given up.
	wait_for 10 '[ "$(st 6b-1 state)" = unstaged ]'
	[ "$(st 6b-1 reason)" = "cards busy when its turn came: GPU 0 ($U0): has 1 compute process" ]
	[ ! -e "$STATE/staged/6b-1" ]
	[ ! -e "$STATE/attempts/6b-1" ]
	[ "$(starts 6b-1)" -eq 0 ]
	lease_free "$U0"
}

@test "a card that frees itself within the settle time: the staged attempt starts" {
	hold a
	launch attempt 7a-1 shell 'read x < "$GO"' env "GO=$T/go.a" gpu 0
	stage_b 7b-1 7a-1
	fake_gpus "0, $U0, NVIDIA Fake A100, 5000, 81920, 0"
	end_hold a
	wait_final 7a-1
	settle 0.5
	# Staged still, or "starting" while a try holds its lock.
	[[ "$(st 7b-1 state)" =~ ^(staged|starting)$ ]]
	fake_gpus "0, $U0, NVIDIA Fake A100, 0, 81920, 0"
	wait_final 7b-1 5
	[ "$(st 7b-1 state)" = succeeded ]
	[ "$(starts 7b-1)" -eq 1 ]
}

@test "an end and the staged start it makes share one flush of attempts/: the end's data synced before its rename, its name by the start's, before the job runs; the end exchanged into place, the old state removed after; the exec into the baton releases no inotify instance" {
	command -v strace >/dev/null || { echo "strace missing: tests/install-deps installs it" >&2; false; }
	hold a
	spec attempt fa-1 shell 'read x < "$GO"' env "GO=$T/go.a" gpu 0 > "$T/spec.a"
	# A's launch, its supervisor, the baton it becomes and B's
	# supervisor and job, all traced (-y: each fd's path).
	ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 \
		strace -f -qq -y -s 200 -e trace=fsync,fdatasync,syncfs,rename,renameat,renameat2,execve,fcntl \
		-o "$T/st" cardbaton-worker launch < "$T/spec.a" > "$T/a.out" 3>&- &
	tracer=$!
	wait_for 10 '[ "$(st fa-1 state)" = running ]'
	stage_b fb-1 fa-1
	[ "$(field state <<< "$output")" = staged ]
	# The baton's way (the deck's is the next test's).
	no_deck fb-1
	end_hold a
	wait_for 10 '[ "$(starts fb-1)" -eq 1 ]'
	wait_final fb-1
	wait "$tracer"
	[ "$(st fa-1 state)" = succeeded ]
	flush_steps fa-1 fb-1
	end_then_start
	# A's end took its running state's place by an exchange (that file
	# not freed on the way to B's start), and was removed after.
	grep -qE 'renameat2\([^,]*, "\.fa-1\.state\.tmp", [^,]*, "fa-1\.state", RENAME_EXCHANGE\) = 0' "$T/st"
	[ ! -e "$STATE/attempts/.fa-1.state.tmp" ]
	# B's end, with nothing staged after it: its data synced before its
	# rename, and a flush of attempts/ after it, its supervisor's own
	# (the baton's final flush, of A's end, may come before, after or
	# between the two: another process).
	lastb=$(grep -n '^rename B$' "$T/steps" | tail -n1 | cut -d: -f1)
	[ "$(grep -xE 'sync B data|rename B' "$T/steps" | tail -n2 | tr '\n' ,)" = "sync B data,rename B," ]
	sed -n "$((lastb + 1)),\$p" "$T/steps" | grep -qx 'sync attempts'
	# A's supervisor's inotify descriptor went with it into the baton,
	# open there after the exec (which would have waited for the
	# kernel to release it: 1 to 15 ms on the way to B's start), and
	# close-on-exec again for what the baton runs.
	baton=$(grep -m1 'execve("/proc/self/exe", \["cardbaton-worker", "-d", "[^"]*", "baton"\]' "$T/st" | cut -d' ' -f1)
	[ -n "$baton" ]
	grep -E "^$baton +fcntl\([0-9]+<anon_inode:inotify>, F_SETFD, FD_CLOEXEC\)" "$T/st"
}

@test "on deck: a deck waits while the attempt is staged, starts it the moment the end is written, with its flush before the job, and is gone; unstaged, it exits at that end" {
	command -v strace >/dev/null || { echo "strace missing: tests/install-deps installs it" >&2; false; }
	hold a
	hold b
	spec attempt d1a-1 shell 'read x < "$GO"' env "GO=$T/go.a" gpu 0 > "$T/spec.a"
	spec attempt d1b-1 shell "$BJOB" env "RAN=$T/ran" env "GO=$T/go.b" gpu 0 uuid "$U0" after d1a-1 > "$T/spec.b"
	# A's launch, then (once $T/out.go is there) B's, and so B's deck,
	# all traced with their children.
	ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 \
		strace -f -qq -y -s 200 -e trace=fsync,fdatasync,rename,renameat,renameat2,execve \
		-o "$T/st" sh -c 'cardbaton-worker launch < "$1" > "$3.a"
			until [ -e "$3.go" ]; do sleep 0.02; done
			cardbaton-worker launch < "$2" > "$3.b"' sh "$T/spec.a" "$T/spec.b" "$T/out" 3>&- &
	tracer=$!
	wait_for 10 '[ "$(st d1a-1 state)" = running ]'
	touch "$T/out.go"
	wait_for 10 '[ -s "$T/out.b" ]'
	[ "$(field state < "$T/out.b")" = staged ]
	wait_for 5 '[ -n "$(deck_of d1b-1)" ]'
	deck=$(deck_of d1b-1)
	# In a session of its own, nobody's child: not the launch's.
	[ "$(ps -o sid= -p "$deck")" != "$(ps -o sid= -p $$)" ]
	[ "$(ps -o ppid= -p "$deck" | tr -d ' ')" != "$tracer" ]
	end_hold a
	wait_for 10 '[ "$(starts d1b-1)" -eq 1 ]'
	# (B's supervisor, its child, bears the deck's command line.)
	wait_for 5 '! kill -0 "$deck" 2>/dev/null'
	[ ! -e "$STATE/staged/d1b-1" ]
	end_hold b
	wait_final d1b-1
	wait "$tracer"
	[ "$(st d1a-1 state)" = succeeded ]
	[ "$(starts d1b-1)" -eq 1 ]
	# Whoever started B (the deck; the baton that A's supervisor
	# becomes, when it was quicker) did it in this order, after A's
	# end: A's supervisor's lines, and those of that one process from
	# its exec on (the other one's are left out).
	grep -q 'execve("/proc/self/exe", \["cardbaton-worker", "-d", "[^"]*", "deck", "d1b-1"\]' "$T/st"
	starter=$(grep -m1 -E ' (rename|renameat|renameat2)\(.*"d1b-1\.state"' "$T/st" | cut -d' ' -f1)
	flush_steps d1a-1 d1b-1 "$starter"
	end_then_start

	# Unstaged while it waits: the deck exits at the end it waited
	# for, and nothing starts.
	hold a
	launch attempt d2a-1 shell 'read x < "$GO"' env "GO=$T/go.a" gpu 1
	launch attempt d2b-1 shell "$BJOB" env "RAN=$T/ran" gpu 1 after d2a-1
	[ "$(field state <<< "$output")" = staged ]
	wait_for 5 '[ -n "$(deck_of d2b-1)" ]'
	run cardbaton-worker unstage d2b-1
	[ "$status" -eq 0 ]
	[ -n "$(deck_of d2b-1)" ]
	end_hold a
	wait_final d2a-1
	wait_for 5 '[ -z "$(deck_of d2b-1)" ]'
	[ "$(st d2b-1 state)" = unstaged ]
	[ "$(starts d2b-1)" -eq 0 ]
	run --separate-stderr cardbaton-worker deck ../x
	failed 64 cardbaton-worker
	[ "$stderr" = "cardbaton-worker: deck: not an attempt ID: ../x" ]
}

@test "supervisor and job killed with SIGKILL: the deck starts the staged attempt at once; without one, the next baton (or watch's start)" {
	launch attempt 9a-1 shell 'exec sleep 30' gpu 0
	pid=$(field pid <<< "$output")
	stage_b 9b-1 9a-1
	wait_for 5 '[ -n "$(deck_of 9b-1)" ]'
	kill -KILL "$(sup_of "$pid")" "$pid"
	wait_for 10 '[ "$(starts 9b-1)" -eq 1 ]'
	[ "$(st 9a-1 state)" = lost ]
	wait_final 9b-1
	[ ! -e "$STATE/staged/9b-1" ]
	# Without a deck.
	hold a
	launch attempt 8a-1 shell 'read x < "$GO"' env "GO=$T/go.a" gpu 0
	pid=$(field pid <<< "$output")
	stage_b 8b-1 8a-1
	no_deck 8b-1
	kill -KILL "$(sup_of "$pid")" "$pid"
	wait_for 5 lock_free 8a-1
	settle 0.3
	[ "$(starts 8b-1)" -eq 0 ]
	run cardbaton-worker baton
	[ "$status" -eq 0 ]
	[ -z "$output" ]
	[ "$(st 8a-1 state)" = lost ]
	wait_final 8b-1
	[ "$(starts 8b-1)" -eq 1 ]
	[ ! -e "$STATE/staged/8b-1" ]
	# Again, with watch's start in place of the baton.
	launch attempt 8c-1 shell 'exec sleep 30' gpu 2
	pid=$(field pid <<< "$output")
	launch attempt 8c-2 shell "$BJOB" env "RAN=$T/ran" gpu 1 after 8c-1
	[ "$(field state <<< "$output")" = staged ]
	no_deck 8c-2
	kill -KILL "$(sup_of "$pid")" "$pid"
	wait_for 5 lock_free 8c-1
	start_watch
	grep -qx "stage 1" "$T/watch.out"
	wait_for 10 '[ "$(starts 8c-2)" -eq 1 ]'
	wait_for 10 'grep -qx "attempt 8c-2" "$T/watch.out"'
	stop_watch
	wait_final 8c-2
}

@test "watch: a launch request with after answers staged; the start comes as a state event" {
	hold a
	launch attempt 9a-1 shell 'read x < "$GO"' env "GO=$T/go.a" gpu 0
	start_watch
	[ "$(sed -n 3p "$T/watch.out")" = "stage 1" ]
	{ echo "request launch"; spec attempt 9b-1 shell "$BJOB" env "RAN=$T/ran" gpu 0 after 9a-1; } >&$WATCH_FD
	wait_for 10 'grep -qx "reply launch" "$T/watch.out"'
	[ "$(field out < "$T/watch.out" | field state)" = staged ]
	end_hold a
	wait_for 10 'record_with "attempt 9b-1" < "$T/watch.out" | grep -qx "state succeeded"'
	stop_watch
	[ "$(starts 9b-1)" -eq 1 ]
}

@test "many launches of one staged attempt at once, its afters over: it starts once" {
	launch attempt a0a-1 arg true gpu 0
	wait_final a0a-1
	spec attempt a0b-1 shell "$BJOB" env "RAN=$T/ran" gpu 0 after a0a-1 > "$T/spec.in"
	pids=
	for i in 1 2 3 4 5 6; do
		cardbaton-worker launch < "$T/spec.in" > "$T/out.$i" &
		pids+=" $!"
	done
	wait $pids
	wait_final a0b-1
	for i in 1 2 3 4 5 6; do
		grep -Eq '^state (staged|starting|running|succeeded)$' "$T/out.$i"
	done
	[ "$(starts a0b-1)" -eq 1 ]
	[ -z "$(ls -A "$STATE/staged")" ]
}

@test "a stage cut off between its temporary's open and its unlink: the next stage removes that leftover; a live writer's, and other dot names, are left" {
	hold a
	launch attempt dd-a shell 'read x < "$GO"' env "GO=$T/go.a" gpu 0
	[ "$status" -eq 0 ]
	# .ID.PID.tmp of a writer that is dead (no PID is that high), of one
	# that lives (this shell), and names of other shapes.
	: > "$STATE/staged/.dd-1.999999999.tmp"
	: > "$STATE/staged/.dd-2.$$.tmp"
	: > "$STATE/staged/.dd-3.0.tmp"
	: > "$STATE/staged/.dd-4.12x.tmp"
	: > "$STATE/staged/.keep"
	stage_b dd-5 dd-a
	[ "$(field state <<< "$output")" = staged ]
	[ ! -e "$STATE/staged/.dd-1.999999999.tmp" ]
	[ -e "$STATE/staged/.dd-2.$$.tmp" ]
	[ -e "$STATE/staged/.dd-3.0.tmp" ] && [ -e "$STATE/staged/.dd-4.12x.tmp" ] && [ -e "$STATE/staged/.keep" ]
	# None of them is a staged attempt: the baton starts dd-5 alone.
	end_hold a
	wait_for 10 '[ "$(starts dd-5)" -eq 1 ]'
	[ "$(wc -l < "$T/ran")" -eq 1 ]
}

@test "a bad after is a bad spec (65); a Slurm node takes no staged attempt; nothing planted in staged/ is followed" {
	for bad in ../x 'A1' "$(head -c 65 /dev/zero | tr '\0' a)" ''; do
		spec attempt a1a-1 arg true after "$bad" > "$T/spec.in"
		run --separate-stderr cardbaton-worker launch < "$T/spec.in"
		failed 65 cardbaton-worker
		[ "$stderr" = "cardbaton-worker: bad spec: after must be 1 to 64 of [0-9a-f-]" ]
	done
	spec attempt a1a-1 arg true after a1a-1 > "$T/spec.in"
	run --separate-stderr cardbaton-worker launch < "$T/spec.in"
	failed 65 cardbaton-worker
	spec attempt a1a-1 arg true after a1a-0 > "$T/spec.in"
	run --separate-stderr cardbaton-worker --slurm gpu launch < "$T/spec.in"
	failed 65 cardbaton-worker
	[ "$stderr" = "cardbaton-worker: bad spec: after: a Slurm node takes no staged attempt" ]
	[ ! -e "$STATE/attempts/a1a-1" ] && [ -z "$(ls -A "$STATE/staged")" ]
	# A Slurm worker's watch offers no staging.
	run cardbaton-worker --slurm gpu watch < /dev/null
	[ "$output" = "$(printf 'ready 1\nrequests launch\nend')" ]
	# A link, a FIFO, a directory in staged/: never followed, read or
	# blocked on; the baton says so and goes on.
	mkdir -p "$T/elsewhere"
	ln -s "$T/elsewhere/x" "$STATE/staged/a1b-1"
	mkfifo "$STATE/staged/a1b-2"
	mkdir "$STATE/staged/a1b-3"
	run --separate-stderr cardbaton-worker baton
	[ "$status" -eq 0 ]
	[[ $stderr == *"staged/a1b-1: is a symbolic link (not followed)"* ]]
	[[ $stderr == *"staged/a1b-2: is not a regular file (skipped)"* ]]
	[ -z "$(ls -A "$T/elsewhere")" ]
	[ "$(st a1b-1 state)" = unknown ]
}

# The baton's crash points (worker/baton.c; the crash walk leaves them
# to this test): the worker SIGKILLed there, then a baton or the same
# launch again, and the staged attempt has started exactly once (or,
# given up, never).
@test "a worker killed at each baton crash point: the staged attempt starts once, or is given up once" {
	grep -q CARDBATON_CRASH_AT "$CB_BUILD/cardbaton-worker" || skip "needs a crash-point build (make test's build-san)"
	# Staged (then started at once: its after is over): killed after
	# the rename; the launch again starts it.
	launch attempt c0a-1 arg true gpu 0
	wait_final c0a-1
	spec attempt c0b-1 shell "$BJOB" env "RAN=$T/ran" gpu 0 after c0a-1 > "$T/spec.in"
	CARDBATON_CRASH_AT="worker stage: staged" CARDBATON_CRASH_ONCE=$T/once.1 \
		run cardbaton-worker launch < "$T/spec.in"
	[ "$status" -eq 137 ]
	[ -e "$T/once.1" ]
	[ -f "$STATE/staged/c0b-1" ] && [ ! -e "$STATE/attempts/c0b-1" ]
	run cardbaton-worker launch < "$T/spec.in"
	[ "$status" -eq 0 ]
	wait_final c0b-1
	[ "$(starts c0b-1)" -eq 1 ]

	# Started by the baton of an attempt that ended, which is killed
	# before it removes the staged file: the next baton removes it.
	hold a
	hold b
	CARDBATON_CRASH_AT="worker baton: started" CARDBATON_CRASH_ONCE=$T/once.2 \
		launch attempt c1a-1 shell 'read x < "$GO"' env "GO=$T/go.a" gpu 0
	stage_b c1b-1 c1a-1
	no_deck c1b-1
	end_hold a
	wait_for 10 '[ -e "$T/once.2" ]'
	wait_for 10 '[ "$(st c1b-1 state)" = running ]'
	[ -f "$STATE/staged/c1b-1" ]
	run cardbaton-worker baton
	[ ! -e "$STATE/staged/c1b-1" ]
	end_hold b
	wait_final c1b-1
	[ "$(starts c1b-1)" -eq 1 ]

	# Given up (the card busy), killed before the staged file's
	# removal: the next baton only removes it.
	hold a
	CARDBATON_CRASH_AT="worker baton: gave up" CARDBATON_CRASH_ONCE=$T/once.3 \
		launch attempt c2a-1 shell 'read x < "$GO"' env "GO=$T/go.a" gpu 0
	stage_b c2b-1 c2a-1
	no_deck c2b-1
	fake_apps "$U0, 4242, 300"
	end_hold a
	wait_for 10 '[ -e "$T/once.3" ]'
	[ "$(st c2b-1 state)" = unstaged ]
	[ -f "$STATE/staged/c2b-1" ]
	fake_apps
	run cardbaton-worker baton
	[ ! -e "$STATE/staged/c2b-1" ]
	[ "$(st c2b-1 state)" = unstaged ]
	[ "$(starts c2b-1)" -eq 0 ]
}
