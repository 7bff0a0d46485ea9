#!/usr/bin/env bats
# users.bats - cardbaton users (bin/users.c, cardbaton-users(1)): a lab's
# users from the records -- shares, decayed GPU-hours, effective usage,
# the fair-share order, GPUs held and jobs against their limits -- in the
# table and in --json, with and without decay; not a lab's spool is 78.
#
# One account runs the tests: the daemon makes real records, and then
# their owners and attempts are written by hand (the daemon stopped),
# so that every figure is known.

load ../lib/common

bats_require_minimum_version 1.5.0
test_timeout 90

setup() {
	setup_common
	C=$T/config.yaml
	# HALF: the lab's half-life in hours (0: no decay).
	lab_config 0
}

teardown() {
	touch "$T/go"
	teardown_common
}

# lab_config HALF: a lab of root's own group, with limits for ann and cy
# (accounts that need not exist).
lab_config() {
	cat > "$C" <<-EOF
	spool: ./spool
	nodes:
	  local:
	    local: true
	lab:
	  group: root
	  admins: [root]
	  fair_share: {half_life_hours: $1}
	  users:
	    default: {max_gpus: 8, max_queued: 1000, max_priority: 10}
	    ann: {max_gpus: 2, shares: 2}
	    cy: {shares: 3}
	    dee: {}
	EOF
}

us() { cardbaton-users --config "$C" "$@"; }

# edit ID CODE: job ID's record (wherever it is) as r, changed by the
# Python CODE (att(a, cards, start_h, end_h) sets attempt a's cards and
# times, in hours before NOW, end None: running), written back as a
# writer must (tmp/ and a rename, the file's mode kept).
edit() {
	python3 - "$T/spool" "$1" "$NOW" "$2" <<-'EOF'
	import json, os, sys, time
	sp, jid, now, code = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
	def iso(ms):
	    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms // 1000))
	def att(a, cards, start_h, end_h):
	    a["gpus"] = list(range(cards))
	    a["gpu_uuids"] = ["GPU-%d" % i for i in range(cards)]
	    s = now - int(start_h * 3600000)
	    a["started_ms"], a["started"] = s, iso(s)
	    if end_h is not None:
	        e = now - int(end_h * 3600000)
	        a["finished_ms"], a["finished"] = e, iso(e)
	for d in ("queued", "running", "paused", "done"):
	    for n in os.listdir(sp + "/" + d):
	        if n.endswith("%010d.job" % jid):
	            path = "%s/%s/%s" % (sp, d, n)
	            r = json.load(open(path))
	            exec(code)
	            r["rev"] += 1
	            tmp = sp + "/tmp/edit"
	            with open(tmp, "w") as f:
	                json.dump(r, f, indent="\t")
	            os.chmod(tmp, os.stat(path).st_mode & 0o7777)
	            os.rename(tmp, path)
	EOF
}

# uid NAME: the account's uid, or None.
uid() { python3 -c 'import pwd, sys
try: print(pwd.getpwnam(sys.argv[1]).pw_uid)
except KeyError: print(None)' "$1"; }

# make_history: five jobs, their owners and attempts written by hand:
#   J1 ann, done: 2 cards from 5 h ago to 4 h ago          2 GPU-hours
#   J2 ann, done: 1 card 4 h to 3.5 h ago, 1 card 3 h to 2.5 h ago   1
#   J3 ben, running: 1 card from 1 h ago                   1 and counting
#   J4 ann, queued (held)                                  0
#   J5 no owner, done: 1 card 2 h to 1.5 h ago             0.5
make_history() {
	start_daemon
	j1=$(sub --gpu-count 1 -- true)
	j2=$(sub --gpu-count 1 -- true)
	j5=$(sub --gpu-count 1 -- true)
	wait_for 20 'final "$j1" && final "$j2" && final "$j5"'
	j3=$(sub --gpu-count 1 -- sh -c "while [ ! -e '$T/go' ]; do sleep 0.05; done")
	j4=$(sub --hold --gpu-count 1 -- true)
	wait_for 20 '[ "$(field "$j3" state)" = running ] && [ "$(field "$j4" reason)" = held ]'
	stop_daemon
	NOW=$(date +%s%3N)
	edit "$j1" 'r["owner"], r["owner_uid"] = "ann", 5001; att(r["attempts"][0], 2, 5, 4)'
	edit "$j2" 'r["owner"], r["owner_uid"] = "ann", 5001; att(r["attempts"][0], 1, 4, 3.5)
b = dict(r["attempts"][0]); b["n"] = 1; b["id"] = b["id"][:-1] + "1"; att(b, 1, 3, 2.5)
r["attempts"].append(b)'
	edit "$j3" 'r["owner"], r["owner_uid"] = "ben", 5002; att(r["attempts"][0], 1, 1, None)'
	edit "$j4" 'r["owner"], r["owner_uid"] = "ann", 5001'
	edit "$j5" 'del r["owner"], r["owner_uid"]; att(r["attempts"][0], 1, 2, 1.5)'
}

@test "users: each user's shares, GPU-hours, effective usage and fair-share order, GPUs and jobs against the limits" {
	make_history
	run --separate-stderr us --json
	[ "$status" -eq 0 ]
	[ -z "$stderr" ]
	# The order: cy and dee (none used) share the first place, then the
	# jobs without an owner (0.5), ben (1 and a little), ann (3 / 2).
	[ "$(json '[(u["user"], u["order"]) for u in d["users"]]' <<<"$output")" = \
	  '[["cy", 1], ["dee", 1], [null, 3], ["ben", 4], ["ann", 5]]' ]
	[ "$(json 'd["half_life_hours"]' <<<"$output")" = 0 ]
	python3 - "$output" "$(uid ann)" "$(uid cy)" <<-'EOF'
	import json, sys
	d = json.loads(sys.argv[1])
	u = {x["user"]: x for x in d["users"]}
	uid = lambda s: None if s == "None" else int(s)
	near = lambda a, b: abs(a - b) < 0.01
	ann, ben, cy, none = u["ann"], u["ben"], u["cy"], u[None]
	assert sorted(ann) == sorted(["user", "uid", "shares", "gpu_hours", "effective_usage", "order",
	                              "gpus_held", "max_gpus", "jobs", "max_queued", "max_priority"]), ann
	# A named user's uid is its account's (ann without one: her
	# records'); an owner's, the record's.
	assert ann["uid"] == (uid(sys.argv[2]) or 5001) and cy["uid"] == uid(sys.argv[3]), (ann, cy)
	assert ben["uid"] == 5002 and none["uid"] is None, (ben, none)
	assert (ann["shares"], ben["shares"], cy["shares"], none["shares"]) == (2, 1, 3, 1)
	assert near(ann["gpu_hours"], 3) and near(ann["effective_usage"], 1.5), ann
	assert near(ben["gpu_hours"], 1) and ben["gpu_hours"] > 1, ben   # running: counting
	assert near(none["gpu_hours"], 0.5) and cy["gpu_hours"] == 0, (none, cy)
	assert (ann["gpus_held"], ann["max_gpus"], ann["jobs"], ann["max_queued"]) == (0, 2, 1, 1000), ann
	assert (ben["gpus_held"], ben["max_gpus"], ben["jobs"]) == (1, 8, 1), ben
	assert (none["gpus_held"], none["jobs"]) == (0, 0), none
	assert all(x["max_priority"] == 10 for x in d["users"])
	EOF
	# The table: the same rows and figures.
	run --separate-stderr us
	[ "$status" -eq 0 ]
	[ "${#lines[@]}" -eq 7 ]
	[[ ${lines[0]} == "usage as of "*", never decayed (half_life_hours 0)" ]]
	[[ ${lines[1]} =~ ^USER\ +UID\ +SHARES\ +GPU-HOURS\ +EFFECTIVE\ +ORDER\ +GPUS\ +JOBS\ +MAX-PRIO$ ]]
	[[ ${lines[2]} =~ ^cy\ .*\ 3\ +0\.00\ +0\.00\ +1\ +0/8\ +0/1000\ +10$ ]]
	[[ ${lines[3]} =~ ^dee\ .*\ 1\ +0\.00\ +0\.00\ +1\ +0/8\ +0/1000\ +10$ ]]
	[[ ${lines[4]} =~ ^-\ +-\ +1\ +0\.50\ +0\.50\ +3\ +0/8\ +0/1000\ +10$ ]]
	[[ ${lines[5]} =~ ^ben\ +5002\ +1\ +1\.00\ +1\.00\ +4\ +1/8\ +1/1000\ +10$ ]]
	[[ ${lines[6]} =~ ^ann\ .*\ 2\ +3\.00\ +1\.50\ +5\ +0/2\ +1/1000\ +10$ ]]
	# It writes nothing.
	before=$(find "$T/spool" -printf '%p %s %T@ %C@\n' | sort)
	us > /dev/null
	us --json > /dev/null
	[ "$(find "$T/spool" -printf '%p %s %T@ %C@\n' | sort)" = "$before" ]
}

@test "users: usage decays with the half-life (a quarter after two), shares divide it; --json and the table agree" {
	make_history
	lab_config 1
	before=$(date +%s%3N)
	out=$(us --json)
	after=$(date +%s%3N)
	python3 - "$out" "$NOW" "$before" "$after" <<-'EOF'
	import json, math, sys
	d = json.loads(sys.argv[1])
	now0, t0, t1 = (int(x) for x in sys.argv[2:])
	u = {x["user"]: x for x in d["users"]}
	# The integral of cards x 2^-(age/h) over each span, in hours (h = 1).
	def span(cards, s_h, e_h, at):
	    shift = (at - now0) / 3600000.0
	    return cards / math.log(2) * (2 ** -(e_h + shift) - 2 ** -(s_h + shift))
	def ann(at):
	    return span(2, 5, 4, at) + span(1, 4, 3.5, at) + span(1, 3, 2.5, at)
	def ben(at):
	    return span(1, 1, -(at - now0) / 3600000.0, at)
	assert d["half_life_hours"] == 1
	lo, hi = sorted((ann(t0), ann(t1)))
	assert lo - 1e-6 <= u["ann"]["gpu_hours"] <= hi + 1e-6, (u["ann"], lo, hi)
	assert abs(u["ann"]["effective_usage"] - u["ann"]["gpu_hours"] / 2) < 1e-9
	lo, hi = sorted((ben(t0), ben(t1)))
	assert lo - 1e-6 <= u["ben"]["gpu_hours"] <= hi + 1e-6, (u["ben"], lo, hi)
	# The jobs without an owner used 0.5 card-hours between 2 and 1.5
	# half-lives ago: a quarter of it and a bit more.
	assert 0.125 < u[None]["gpu_hours"] < 0.5 * 2 ** -1.5, u[None]
	# ann's 3 card-hours are older than ben's 1 and the others' 0.5:
	# ann comes before both now.
	assert [x["user"] for x in d["users"]] == ["cy", "dee", "ann", None, "ben"], d["users"]
	EOF
	run us
	[[ ${lines[0]} == "usage as of "*", decayed by half every 1 hour" ]]
	[[ ${lines[4]} == ann* ]]
	[[ ${lines[5]} == "- "* ]]
	[[ ${lines[6]} == ben* ]]
}

@test "users: no spool yet, the configured users with nothing used; an unreadable record is named and 65" {
	run --separate-stderr us --json
	[ "$status" -eq 0 ]
	[ "$(json '[(u["user"], u["gpu_hours"], u["jobs"], u["order"]) for u in d["users"]]' <<<"$output")" = \
	  '[["ann", 0, 0, 1], ["cy", 0, 0, 1], ["dee", 0, 0, 1]]' ]
	make_history
	mode=$(stat -c %a "$T/spool/done/$(printf %010d "$j1").job")
	printf '{ not json' > "$T/spool/tmp/bad"
	chmod "$mode" "$T/spool/tmp/bad"
	mv "$T/spool/tmp/bad" "$T/spool/done/$(printf %010d "$j1").job"
	run --separate-stderr us --json
	[ "$status" -eq 65 ]
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ ${stderr_lines[0]} == "cardbaton-users: "*"$(printf %010d "$j1").job"* ]]
	# J1's 2 GPU-hours are left out, the rest counted.
	[ "$(json '[round(float(u["gpu_hours"]), 1) for u in d["users"] if u["user"] == "ann"]' <<<"$output")" = '[1.0]' ]
}

@test "users: not a lab's spool is one line and 78; usage errors are 64" {
	printf 'spool: ./spool\nnodes:\n  local:\n    local: true\n' > "$C"
	run --separate-stderr us
	failed 78 cardbaton-users
	[ "$stderr" = "cardbaton-users: not a lab's spool: the config has no lab:" ]
	[ -z "$output" ]
	run --separate-stderr us --json
	failed 78 cardbaton-users
	run --separate-stderr us extra
	failed 64 cardbaton-users
	run --separate-stderr us --bogus
	failed 64 cardbaton-users
	[ "$(cardbaton users --help)" = "$(cardbaton-users --help)" ]
}
