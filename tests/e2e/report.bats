#!/usr/bin/env bats
# report.bats - cardbaton report (bin/report.c, cardbaton-report(1)):
# the per-card figures from the records' attempts, the idle-while-
# waiting rule, the --since window, the HTML timeline rendered in
# headless Chromium, and bad input.
#
# The rules are checked on records written by hand (exact times, every
# case of the man page's rule); the whole path -- real jobs through a
# real daemon on the four fake cards, the figures against a computation
# of our own from done/, the screenshot -- on 50 jobs.

load ../lib/common

bats_require_minimum_version 1.5.0
test_timeout 120

setup() {
	setup_common
	C=$T/config.yaml
}

teardown() {
	teardown_common
}

rep() { cardbaton-report --config "$C" "$@"; }

# An empty spool, made by the tools (its id, its directories).
mkspool() {
	sub -- true >/dev/null
	rm -f "$T"/spool/new/*
}

# records SCRIPT: write job records by hand (LAYOUT.md §6) from Python:
# SCRIPT calls rec(ID, STATE, DIR, atts=[att(...)], **fields) with times
# in seconds after T0 (an hour ago, whole seconds; printed as $T/t0).
records() {
	mkspool
	python3 - "$T/spool" "$1" <<-'PY'
		import json, os, sys, time
		spool, script = sys.argv[1], sys.argv[2]
		sid = open(os.path.join(spool, "id")).read().strip()
		T0 = (int(time.time()) - 3600) * 1000
		open(os.path.join(spool, "..", "t0"), "w").write("%d\n" % T0)
		def ms(s): return T0 + int(s * 1000)
		def rfc(s): return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms(s) / 1000))
		def att(job, n, state, gpus, start=None, end=None, reason=None, node="local"):
		    a = {"n": n, "id": "%s-%d-%d" % (sid, job, n), "node": node, "gpus": gpus,
		         "gpu_uuids": ["GPU-%s" % (str(g) * 8) for g in gpus], "state": state,
		         "reason": reason}
		    if start is not None: a["started_ms"] = ms(start)
		    if end is not None: a["finished_ms"] = ms(end)
		    return a
		def rec(id, state, d="done", atts=(), submitted=0, queued_at=None, finished=None,
		        name=None, command=("sleep", "1"), owner=None, **job):
		    job = dict(job, command=list(command))
		    if name is not None: job["name"] = name
		    r = {"id": str(id), "rev": 3, "state": state, "reason": "by hand", "priority": 0,
		         "submitted_ms": ms(submitted),
		         "queued_at_ms": ms(submitted if queued_at is None else queued_at),
		         "job": job, "attempts": list(atts)}
		    if finished is not None: r["finished_ms"] = ms(finished)
		    if owner is not None: r["owner"], r["owner_uid"] = owner, 5000 + len(owner)
		    fn = ("%09d-%010d.job" % (100000000, id)) if d == "queued" else "%010d.job" % id
		    with open(os.path.join(spool, d, fn), "w") as f:
		        json.dump(r, f, indent=1)
		exec(script)
	PY
}

# card J NODE INDEX KEY: KEY of card INDEX of NODE in the report J.
card() {
	json "[g for n in d['nodes'] if n['name'] == '$2' for g in n['gpus'] if g['index'] == $3][0]['$4']" < "$1"
}

# The rules of cardbaton-report(1), one case each; the figures by hand:
#   card 0 busy: 1 [0,10] 2 [10,20] 3 [20,25] [50,60] 8 [130,140], and 10 since 200, running
#   card 1 busy: 2 [10,20] 4 [60,70] [80,90] 7 [120,125] 9 [150,155]
#   waits: 2 [2,10] (all cards); 3 after a user's pause, from its queued_at [40,50];
#   4 after a preemption [70,80]; 5 none (a CPU job); 6 until its end, its
#   attempt aborted [100,110]; 7 from its begin [115,120]; 9 from the end
#   of job 8 that it follows [140,150].
SCENARIO='
rec(1, "succeeded", atts=[att(1, 0, "succeeded", [0], 0, 10)], finished=10)
rec(2, "succeeded", submitted=2, gpu_count=2, atts=[att(2, 0, "succeeded", [0, 1], 10, 20)], finished=20)
rec(3, "succeeded", submitted=20, queued_at=40, resume_command="r", finished=60,
    atts=[att(3, 0, "paused", [0], 20, 25, "checkpoint saved"), att(3, 1, "succeeded", [0], 50, 60)])
rec(4, "succeeded", submitted=60, resume_command="r", finished=90,
    atts=[att(4, 0, "paused", [1], 60, 70, "preempted by job 9: checkpoint saved"),
          att(4, 1, "succeeded", [1], 80, 90)])
rec(5, "cancelled", submitted=90, gpu_count=0, finished=100)
rec(6, "cancelled", submitted=100, finished=110, atts=[att(6, 0, "aborted", [0])])
rec(7, "succeeded", submitted=110, begin=rfc(115), finished=125, atts=[att(7, 0, "succeeded", [1], 120, 125)])
rec(8, "succeeded", submitted=130, finished=140, atts=[att(8, 0, "succeeded", [0], 130, 140)])
rec(9, "succeeded", submitted=130, after=[8], finished=155, atts=[att(9, 0, "succeeded", [1], 150, 155)])
rec(10, "running", "running", submitted=200, atts=[att(10, 0, "running", [0], 200)])
'

@test "per card: busy time is the union of attempts, jobs and attempts counted, idle while jobs waited by the rules" {
	records "$SCENARIO"
	t0=$(cat "$T/t0")
	before=$(date +%s%3N)
	run --separate-stderr rep --json
	after=$(date +%s%3N)
	[ "$status" -eq 0 ]
	[ -z "$stderr" ]
	echo "$output" > "$T/r.json"
	[ "$(json 'd["jobs"], d["unreadable"], d["since_ms"]' < "$T/r.json")" = "(10, 0, $t0)" ]
	[ "$(json '[n["name"] for n in d["nodes"]]' < "$T/r.json")" = '["local"]' ]
	[ "$(card "$T/r.json" local 1 busy_seconds)" = 40 ]
	[ "$(card "$T/r.json" local 1 jobs)" = 4 ]
	[ "$(card "$T/r.json" local 1 attempts)" = 5 ]
	[ "$(card "$T/r.json" local 1 uuid)" = GPU-11111111 ]
	[ "$(card "$T/r.json" local 1 idle_waiting_seconds)" = 53 ]
	[ "$(card "$T/r.json" local 0 idle_waiting_seconds)" = 45 ]
	[ "$(card "$T/r.json" local 0 jobs)" = 5 ]
	[ "$(card "$T/r.json" local 0 attempts)" = 6 ]
	# Card 0: 45 s, and job 10's attempt that runs until now.
	python3 - "$T/r.json" "$t0" "$before" "$after" <<-'PY'
		import json, sys
		d = json.load(open(sys.argv[1]))
		t0, before, after = map(int, sys.argv[2:])
		g0 = d["nodes"][0]["gpus"][0]
		lo, hi = 45 + (before - t0) / 1000 - 200, 45 + (after - t0) / 1000 - 200
		assert lo - 0.002 <= g0["busy_seconds"] <= hi + 0.002, (g0, lo, hi)
		n = d["nodes"][0]
		# The node: the sums, its jobs and attempts each counted once.
		assert n["cards"] == 2 and n["jobs"] == 8 and n["attempts"] == 10, n
		assert abs(n["busy_seconds"] - g0["busy_seconds"] - 40) < 0.002, n
		assert n["idle_waiting_seconds"] == 98, n
		w = d["window_seconds"]
		assert abs(w - (d["until_ms"] - t0) / 1000) < 0.002
		assert abs(n["idle_waiting_share"] - 98 / (2 * w)) < 1e-9, n
		assert abs(d["nodes"][0]["gpus"][1]["busy_share"] - 40 / w) < 1e-9
	PY
	# The table: a row per card and one for the node, H:MM:SS.
	run --separate-stderr rep
	[ "$status" -eq 0 ]
	[[ ${lines[0]} == "window "*" to "*", 10 jobs" ]]
	[[ ${lines[1]} == NODE*GPU*BUSY*BUSY%*JOBS*ATT*IDLE-WAIT%*UUID ]]
	[[ ${lines[3]} == local*1*0:00:40*4*5*GPU-11111111 ]]
	[[ ${lines[4]} == local*all*8*10*"(2 cards)" ]]
	# Then the users: these records have no owner.
	[[ ${lines[5]} =~ ^USER\ +GPU-HOURS\ +JOBS\ +ATT\ +MEAN-WAIT$ ]]
	[[ ${lines[6]} =~ ^-\ +[0-9.]+\ +10\ +10\ +0:00:0[0-9]$ ]]
	[ "${#lines[@]}" -eq 7 ]
}

# The same history with owners: alice 1-3, bob 4-7, none 8-10.
OWNED=$(sed -E 's/^rec\(([123]), ("[a-z]+")/rec(\1, \2, owner="alice"/; s/^rec\(([4567]), ("[a-z]+")/rec(\1, \2, owner="bob"/' <<<"$SCENARIO")

@test "per user: GPU-hours (cards x time), jobs alive in the window, attempts, the mean wait for cards; --since clips them" {
	records "$OWNED"
	t0=$(cat "$T/t0")
	before=$(date +%s%3N)
	rep --json > "$T/r.json"
	after=$(date +%s%3N)
	python3 - "$T/r.json" "$t0" "$before" "$after" <<-'PY'
		import json, sys
		d = json.load(open(sys.argv[1]))
		t0, before, after = map(int, sys.argv[2:])
		u = d["users"]
		# Most GPU time first: the jobs without an owner hold job 10's
		# attempt, running since 200 s.
		assert [x["user"] for x in u] == [None, "alice", "bob"], u
		none, alice, bob = u
		assert sorted(alice) == ["attempts", "gpu_hours", "jobs", "mean_wait_seconds", "user"], alice
		# alice: 1 card 10 s, 2 cards 10 s, 1 card 5 + 10 s; waits 0, 8, 0
		# and 10 after her pause (from its queued_at).
		assert abs(alice["gpu_hours"] - 45 / 3600) < 1e-9, alice
		assert (alice["jobs"], alice["attempts"], alice["mean_wait_seconds"]) == (3, 4, 4.5), alice
		# bob: 1 card 10 + 10 s, a CPU job, an aborted attempt, 5 s; waits
		# 0, 10 after a preemption, 5 from a begin (job 6 never started).
		assert abs(bob["gpu_hours"] - 25 / 3600) < 1e-9, bob
		assert (bob["jobs"], bob["attempts"], bob["mean_wait_seconds"]) == (4, 3, 5), bob
		lo, hi = (15 + (before - t0) / 1000 - 200) / 3600, (15 + (after - t0) / 1000 - 200) / 3600
		assert lo - 1e-6 <= none["gpu_hours"] <= hi + 1e-6, (none, lo, hi)
		assert (none["jobs"], none["attempts"]) == (3, 3), none
		assert abs(none["mean_wait_seconds"] - 10 / 3) < 1e-9, none
	PY
	# The table, after the cards'.
	run --separate-stderr rep
	[ "$status" -eq 0 ]
	[[ ${lines[5]} =~ ^USER\ +GPU-HOURS\ +JOBS\ +ATT\ +MEAN-WAIT$ ]]
	[[ ${lines[6]} =~ ^-\ +0\.9[0-9]\ +3\ +3\ +0:00:03$ ]]
	[[ ${lines[7]} =~ ^alice\ +0\.01\ +3\ +4\ +0:00:04$ ]]
	[[ ${lines[8]} =~ ^bob\ +0\.01\ +4\ +3\ +0:00:05$ ]]
	[ "${#lines[@]}" -eq 9 ]
	# --since 100 s after T0: alice's jobs had all ended; bob's 5, 6, 7
	# were alive, 7's attempt and its wait in the window.
	s=$(python3 -c "import time; print(time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime($t0 / 1000 + 100)))")
	rep --since "$s" --json > "$T/r.json"
	python3 - "$T/r.json" <<-'PY'
		import json, sys
		u = json.load(open(sys.argv[1]))["users"]
		assert [(x["user"], x["jobs"], x["attempts"], x["mean_wait_seconds"]) for x in u] == \
		       [(None, 3, 3, 10 / 3), ("bob", 3, 1, 5)], u
		assert abs(u[1]["gpu_hours"] * 3600 - 5) < 1e-6, u
	PY
	# The HTML has the users' table too.
	rep --html "$T/r.html" > /dev/null
	grep -q '<table class="users">' "$T/r.html"
	grep -q '<td>alice</td><td>0.01</td><td>3</td><td>4</td><td>0&#58;00&#58;04</td>' "$T/r.html"
}

@test "--since clips every interval to the window; a window after every attempt shows the cards idle" {
	records "$SCENARIO"
	t0=$(cat "$T/t0")
	s=$(python3 -c 'import sys, time; print(time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(sys.argv[1]) / 1000 + 5)))' "$t0")
	rep --since "$s" --json > "$T/r.json"
	[ "$(json 'd["since_ms"]' < "$T/r.json")" = $((t0 + 5000)) ]
	[ "$(card "$T/r.json" local 1 busy_seconds)" = 40 ]
	# Job 2 waited [2,10]: 5 s of it in the window.
	[ "$(card "$T/r.json" local 1 idle_waiting_seconds)" = 50 ]
	# Job 1's attempt [0,10]: half of it.
	[ "$(card "$T/r.json" local 0 attempts)" = 6 ]
	# Half an hour ago: only job 10 runs in the window; card 1 idle.
	rep --since 30m --json > "$T/r.json"
	[ "$(card "$T/r.json" local 1 busy_seconds)" = 0 ]
	[ "$(card "$T/r.json" local 1 jobs)" = 0 ]
	[ "$(card "$T/r.json" local 1 attempts)" = 0 ]
	[ "$(card "$T/r.json" local 1 idle_waiting_seconds)" = 0 ]
	[ "$(card "$T/r.json" local 0 jobs)" = 1 ]
	python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert abs(d["window_seconds"] - 1800) < 1, d
g0 = d["nodes"][0]["gpus"][0]
assert abs(g0["busy_seconds"] - 1800) < 1 and abs(g0["busy_share"] - 1) < 0.001, g0
' "$T/r.json"
}

@test "a job that follows another waits from that job's end, not from its submission" {
	# The same two jobs, with and without the dependency: job 2 on
	# card 0, job 1 on card 1 until 10.
	records '
rec(1, "succeeded", atts=[att(1, 0, "succeeded", [1], 0, 10)], finished=10)
rec(2, "succeeded", after=[1], finished=30, atts=[att(2, 0, "succeeded", [0], 20, 30)])
'
	rep --json > "$T/r.json"
	[ "$(card "$T/r.json" local 0 idle_waiting_seconds)" = 10 ]
	[ "$(card "$T/r.json" local 1 idle_waiting_seconds)" = 10 ]
	rm "$T"/spool/done/*
	records '
rec(1, "succeeded", atts=[att(1, 0, "succeeded", [1], 0, 10)], finished=10)
rec(2, "succeeded", finished=30, atts=[att(2, 0, "succeeded", [0], 20, 30)])
'
	rep --json > "$T/r.json"
	[ "$(card "$T/r.json" local 0 idle_waiting_seconds)" = 20 ]
}

@test "a queued job waits until now (for its pinned node only); a held one does not; sharing jobs' busy time is not counted twice" {
	cat >> "$C" <<-'EOF'
	  other:
	    local: true
	EOF
	records '
rec(1, "succeeded", atts=[att(1, 0, "succeeded", [0], 0, 100)], finished=100)
rec(2, "succeeded", submitted=50, share=True, gpu_memory_mib=10, atts=[att(2, 0, "succeeded", [0], 50, 150)], finished=150)
rec(3, "succeeded", atts=[att(3, 0, "succeeded", [0], 0, 10, node="other")], finished=10)
rec(4, "queued", "queued", submitted=3000, node="local")
rec(5, "queued", "queued", submitted=1000, hold=True)
'
	before=$(date +%s%3N)
	rep --json > "$T/r.json"
	after=$(date +%s%3N)
	t0=$(cat "$T/t0")
	[ "$(card "$T/r.json" local 0 busy_seconds)" = 150 ]
	[ "$(card "$T/r.json" local 0 jobs)" = 2 ]
	[ "$(card "$T/r.json" local 0 attempts)" = 2 ]
	[ "$(card "$T/r.json" other 0 idle_waiting_seconds)" = 0 ]
	python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
t0, before, after = map(int, sys.argv[2:])
g = d["nodes"][0]["gpus"][0]
lo, hi = (before - t0) / 1000 - 3000, (after - t0) / 1000 - 3000
assert lo - 0.002 <= g["idle_waiting_seconds"] <= hi + 0.002, (g, lo, hi)
' "$T/r.json" "$t0" "$before" "$after"
}

@test "the HTML escapes what the records hold, names no URL, marks pauses and preemptions; --html - writes it to standard output" {
	records '
rec(1, "failed", name="<script>alert(\"x\")</script>", command=["curl", "https://example.com/a?b=1&c=2"],
    atts=[att(1, 0, "failed", [0], 0, 10, "exit status 1")], finished=10)
rec(2, "succeeded", resume_command="r", finished=90, name="p&q",
    atts=[att(2, 0, "paused", [1], 20, 30, "checkpoint saved"),
          att(2, 1, "paused", [1], 40, 50, "node local drained: checkpoint saved"),
          att(2, 2, "succeeded", [1], 60, 90)])
'
	run --separate-stderr rep --html "$T/r.html"
	[ "$status" -eq 0 ]
	[ -z "$stderr" ]
	[[ ${lines[0]} == "window "* ]]
	f=$T/r.html
	not grep -E 'https?://' "$f"
	not grep -i '<script' "$f"
	grep -q '1 &lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;' "$f"
	grep -q 'curl &#39;https&#58;//example.com/a?b=1&amp;c=2&#39;' "$f"
	grep -q 'p&amp;q' "$f"
	# Hover: the job, its state, its reason, its command.
	grep -q '<title>job 2 p&amp;q&#10;attempt 1&#58; paused' "$f"
	grep -q 'reason&#58; node local drained&#58; checkpoint saved' "$f"
	# The bars in their colours, the pause (two strokes) and the
	# preemption (a corner) marked.
	[ "$(grep -c 'fill="#d62828"' "$f")" -ge 1 ]
	[ "$(grep -c 'fill="#17becf"' "$f")" -ge 2 ]
	[ "$(grep -c 'fill="#063c42"' "$f")" -ge 2 ]
	[ "$(grep -c '<polygon' "$f")" -ge 1 ]
	# Nothing to fetch: the policy forbids it.
	grep -q "default-src 'none'" "$f"
	# A user's file: the umask's mode, like a redirection.
	[ "$(stat -c %a "$f")" = "$(printf '%o' $((0666 & ~$(umask))))" ]
	chmod 0600 "$f"
	rep --html "$f" >/dev/null
	[ "$(stat -c %a "$f")" = 600 ]
	[ -z "$(find "$T" -maxdepth 1 -name '.*r.html*')" ]
	# To standard output, alone.
	run --separate-stderr rep --html -
	[ "$status" -eq 0 ]
	[[ ${lines[0]} == "<!DOCTYPE html>" ]]
	[ "${lines[-1]}" = "</html>" ]
	[ "$(grep -c '<title>job ' <<<"$output")" -eq "$(grep -c '<title>job ' "$f")" ]
	run --separate-stderr rep --html - --json
	failed 64 cardbaton-report
	[ -z "$output" ]
}

@test "bad input: --since, --html into a missing directory, an operand, a corrupt record and a link in done/" {
	records '
rec(1, "succeeded", atts=[att(1, 0, "succeeded", [0], 0, 10)], finished=10)
rec(2, "succeeded", atts=[att(2, 0, "succeeded", [1], 0, 20)], finished=20)
'
	for w in yesterday 2h30 0m -1d 2026-13-45 ''; do
		run --separate-stderr rep --since "$w"
		failed 64 cardbaton-report
		[ -z "$output" ]
	done
	[[ $stderr == *"--since '': not a time"* ]]
	run --separate-stderr rep --since 2999-01-01
	failed 64 cardbaton-report
	[[ $stderr == *future* ]]
	run --separate-stderr rep extra
	failed 64 cardbaton-report
	# A file that cannot be created: one line, 73, nothing written.
	run --separate-stderr rep --html "$T/no/such/dir/r.html"
	failed 73 cardbaton-report
	[[ $stderr == *"$T/no/such/dir/r.html"*"No such file or directory"* ]]
	[ -z "$output" ]
	[ ! -e "$T/no" ]
	mkdir "$T/adir"
	run --separate-stderr rep --html "$T/adir"
	failed 73 cardbaton-report
	[ -z "$(ls -A "$T/adir")" ]
	# A record that cannot be read is named, the others reported, 65.
	printf '{"id": "3", "rev": ' > "$T/spool/done/0000000003.job"
	ln -s /etc/passwd "$T/spool/done/0000000004.job"
	run --separate-stderr rep --json
	[ "$status" -eq 65 ]
	[ "${#stderr_lines[@]}" -eq 2 ]
	[[ ${stderr_lines[0]} == "cardbaton-report: "*0000000003.job* ]]
	[[ ${stderr_lines[1]} == "cardbaton-report: "*0000000004.job* ]]
	[ "$(echo "$output" | json 'd["jobs"], d["unreadable"]')" = "(2, 2)" ]
	[ "$(echo "$output" | json 'd["nodes"][0]["gpus"][1]["busy_seconds"]')" = 20 ]
	# No spool at all: an empty report.
	rm -rf "$T/spool"
	run --separate-stderr rep --json
	[ "$status" -eq 0 ]
	[ "$(echo "$output" | json 'd["nodes"]')" = "[]" ]
	[ ! -e "$T/spool" ]
}

@test "the man page: its SYNOPSIS is the usage line, mandoc -Tlint is clean" {
	command -v mandoc >/dev/null || skip "mandoc not installed"
	page=$CB_TOP/man/cardbaton-report.1
	syn=$(mandoc -Tascii "$page" | sed $'s/.\b//g' | sed -n '/^SYNOPSIS/,/^DESCRIPTION/p' |
		sed '1d;$d' | tr -s ' \t\n' ' ' | sed 's/^ //; s/ $//')
	use=$(cardbaton-report --help | sed 's/^usage: //')
	[ "$syn" = "$use" ] || { echo "man: $syn" >&2; echo "use: $use" >&2; false; }
	out=$(mandoc -Tlint -Wwarning "$page" 2>&1)
	[ -z "$out" ] || { echo "$out" >&2; false; }
	[ "$(cardbaton report --help)" = "$(cardbaton-report --help)" ]
}

# ---- 50 real jobs on the four fake cards ------------------------------------------

@test "50 jobs over 4 cards: busy time per card as done/ says, and Chromium renders the timeline" {
	start_daemon
	# A resumable job, paused and resumed, and one cancelled while it
	# runs.  120 steps (6 s): under CI's load 40 were all done before
	# the pause came.
	coop=$(sub --priority 9 --name coop --resume-command "sh $CB_TOP/tests/lib/coop-steps.sh 120 $T/steps" \
		-- sh "$CB_TOP/tests/lib/coop-steps.sh" 120 "$T/steps")
	long=$(sub --priority 9 --name long -- sleep 30)
	for i in $(seq 1 48); do
		case $((i % 8)) in
		0) sub --name "fail$i" -- sh -c 'sleep 0.1; exit 3' ;;
		1) sub --name '<script>alert("x")</script>' -- sleep 0.2 ;;
		*) sub --name "job$i" -- sleep "0.$((i % 3 + 1))" ;;
		esac >/dev/null
	done
	wait_for 20 '[ "$(wc -l < "$T/steps" 2>/dev/null)" -ge 3 ]'
	cardbaton-pause --config "$C" "$coop"
	wait_for 20 '[ "$(field "$coop" state)" = paused ]'
	cardbaton-resume --config "$C" "$coop"
	wait_for 20 '[ "$(field "$long" state)" = running ]'
	cardbaton-cancel --config "$C" "$long"
	cardbaton-wait --config "$C" --timeout "$(scaled 90)"
	wait_for 20 '[ "$(ls "$T/spool/done" | wc -l)" -eq 50 ]'
	stop_daemon
	[ "$(field "$coop" state)" = succeeded ]
	[ "$(field "$long" state)" = cancelled ]

	run --separate-stderr rep --json --html "$T/r.html"
	[ "$status" -eq 0 ]
	[ -z "$stderr" ]
	echo "$output" > "$T/r.json"
	# Our own computation from the records: per card the union of the
	# attempts' intervals, the jobs and attempts.
	python3 - "$T/spool/done" "$T/r.json" <<-'PY'
		import glob, json, os, sys
		cards = {}
		for f in glob.glob(os.path.join(sys.argv[1], "*.job")):
		    r = json.load(open(f))
		    for a in r["attempts"]:
		        if a["state"] == "aborted" or not a.get("started_ms"):
		            continue
		        for g in a["gpus"]:
		            c = cards.setdefault((a["node"], g), {"iv": [], "jobs": set(), "att": 0})
		            c["iv"].append((a["started_ms"], a["finished_ms"]))
		            c["jobs"].add(r["id"])
		            c["att"] += 1
		def union(iv):
		    t, end = 0, None
		    for s, e in sorted(iv):
		        if end is None or s > end:
		            t, end = t + e - s, e
		        elif e > end:
		            t, end = t + e - end, e
		    return t
		d = json.load(open(sys.argv[2]))
		assert d["jobs"] == 50 and d["unreadable"] == 0, d
		got = {(n["name"], g["index"]): g for n in d["nodes"] for g in n["gpus"]}
		assert sorted(got) == sorted(cards) == [("local", i) for i in range(4)], (got, cards)
		for k, c in cards.items():
		    g = got[k]
		    assert abs(g["busy_seconds"] - union(c["iv"]) / 1000) < 0.0005, (k, g, union(c["iv"]))
		    assert g["jobs"] == len(c["jobs"]) and g["attempts"] == c["att"], (k, g, c)
		    assert g["uuid"] == "GPU-%s-%s-%s-%s-%s" % (str(k[1]) * 8, str(k[1]) * 4, str(k[1]) * 4,
		                                                 str(k[1]) * 4, str(k[1]) * 12), g
		n = d["nodes"][0]
		assert n["attempts"] == 51 and n["jobs"] == 50, n
		assert abs(n["busy_seconds"] - sum(g["busy_seconds"] for g in got.values())) < 0.001
		# Jobs waited while the cards were all busy: some idle-wait, but
		# little, and never more than the window.
		for g in got.values():
		    assert 0 <= g["idle_waiting_share"] <= 1 and g["busy_share"] > 0, g
	PY
	f=$T/r.html
	not grep -E 'https?://' "$f"
	not grep -i '<script' "$f"
	grep -q '&lt;script&gt;' "$f"
	[ "$(grep -c '<title>job ' "$f")" -eq 51 ]
	# A window after the last attempt: every card idle.
	sleep 1.1
	rep --since 1s --json > "$T/late.json"
	[ "$(json '[g["busy_seconds"] for g in d["nodes"][0]["gpus"]]' < "$T/late.json")" = "[0, 0, 0, 0]" ]
	[ "$(json 'd["nodes"][0]["jobs"]' < "$T/late.json")" = 0 ]

	command -v chromium >/dev/null || skip "chromium not installed"
	timeout "$(scaled 90)" chromium --headless --no-sandbox --disable-gpu --hide-scrollbars \
		--user-data-dir="$T/chrome" --screenshot="$T/shot.png" --window-size=1400,900 \
		"file://$f" >"$T/chromium.log" 2>&1 || { cat "$T/chromium.log" >&2; false; }
	[ -s "$T/shot.png" ]
	png=$CB_TOP/tests/lib/png.py
	# Not blank: many colours, the white page not all of it.
	read -r size _ ncolours _ top ntop < <(python3 "$png" "$T/shot.png")
	[ "$size" = 1400x900 ]
	[ "$ncolours" -ge 8 ]
	[ "$ntop" -lt $((1400 * 900 * 98 / 100)) ]
	# The bars: succeeded green, failed red, paused cyan, cancelled grey.
	[ "$(python3 "$png" "$T/shot.png" count 2e9e44)" -ge 1000 ]
	[ "$(python3 "$png" "$T/shot.png" count d62828)" -ge 100 ]
	[ "$(python3 "$png" "$T/shot.png" count 17becf)" -ge 100 ]
	[ "$(python3 "$png" "$T/shot.png" count 9e9e9e)" -ge 100 ]
}
