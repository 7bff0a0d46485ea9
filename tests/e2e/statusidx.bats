#!/usr/bin/env bats
# statusidx.bats - SPOOL/queued.idx, the daemon's summary of queued/
# that `status` reads instead of every record (LAYOUT.md §11).
#
# It is a cache: status prints the same bytes with it as without it;
# it is used only while queued/ is exactly as it was made for (device,
# inode, ctime, mtime); anything stale, truncated, corrupt, of another
# kind (a symlink, a directory) is ignored.  The tests compare status
# with the index against status with the index moved away, and show
# that it is used (a record changed in place, behind the spool's back,
# is not read while the index is current).

load ../lib/common

bats_require_minimum_version 1.5.0
test_timeout 90

setup() {
	setup_common
	C=$T/config.yaml
	Q=$T/spool/queued
}

teardown() {
	teardown_common
}

sub() { cardbaton-submit --config "$C" "$@"; }
# fails CMD...: CMD must fail (a bare `! CMD` fails no bats test but the last line).
fails() {
	if "$@"; then
		echo "succeeded, expected to fail: $*" >&2
		return 1
	fi
}
st() { cardbaton-status --config "$C" "$@"; }

# index_current: queued.idx was made for queued/ as it is now (its
# "queued DEV INO CTIME MTIME" line) and knows done/ ("done -" not).
index_current() {
	python3 - "$T/spool" <<-'EOF'
	import os, sys
	sp = sys.argv[1]
	lines = open(sp + "/queued.idx", "rb").read().split(b"\n")
	def key(d):
	    st = os.stat(sp + "/" + d)
	    return [st.st_dev, st.st_ino, st.st_ctime_ns, st.st_mtime_ns]
	q, d = lines[1].split(), lines[2].split()
	ok = q[0] == b"queued" and [int(x) for x in q[1:]] == key("queued") and \
	     d[0] == b"done" and d[1:] != [b"-"] and [int(x) for x in d[1:]] == key("done")
	sys.exit(0 if ok else 1)
	EOF
}

# queued_current: the same for queued/ alone.
queued_current() {
	python3 - "$T/spool" <<-'EOF'
	import os, sys
	sp = sys.argv[1]
	q = open(sp + "/queued.idx", "rb").read().split(b"\n")[1].split()
	st = os.stat(sp + "/queued")
	sys.exit(0 if [int(x) for x in q[1:]] == [st.st_dev, st.st_ino, st.st_ctime_ns, st.st_mtime_ns] else 1)
	EOF
}

# clone ID NEW: a copy of job ID's queued record as job NEW, put into
# queued/ by hand (through tmp/ and a rename, as a writer must).
clone() {
	python3 - "$Q" "$T/spool/tmp/x" "$1" "$2" <<-'EOF'
	import json, os, sys
	q, tmp, old, new = sys.argv[1:]
	src = [n for n in os.listdir(q) if n.endswith("-%010d.job" % int(old))][0]
	r = json.load(open(q + "/" + src))
	r["id"] = new
	json.dump(r, open(tmp, "w"), indent="\t")
	os.rename(tmp, "%s/%09d-%010d.job" % (q, 100000000 - r["priority"], int(new)))
	EOF
}

# reindex: a run of the daemon, until the index is current again.
reindex() {
	start_daemon
	wait_for 30 index_current
	stop_daemon
}

# The AGE column counts from now: blank it (the columns before it hold
# no spaces), and the padding after it, which follows its width.
noage() {
	sed -E 's/^( *[0-9]+ +[a-z]+ +-?[0-9]+ +[^ ]+ +[^ ]+ +[0-9]+) +[^ ]+ +/\1 AGE /; 1s/ATT +AGE +/ATT AGE /'
}

# views OUT: every view status has of the whole spool into OUT.*
views() {
	st | noage > "$1.table"
	st --json > "$1.json"
	st --all | noage > "$1.all"
	st --all --json > "$1.alljson"
}

# same A B: the two sets of views are byte for byte the same.
same() {
	local v
	for v in table json all alljson; do
		if ! cmp "$1.$v" "$2.$v"; then
			diff "$1.$v" "$2.$v" >&2
			return 1
		fi
	done
}

busy_cards() {
	fake_apps "GPU-00000000-0000-0000-0000-000000000000, 4242, 500" \
		"GPU-11111111-1111-1111-1111-111111111111, 4242, 500" \
		"GPU-22222222-2222-2222-2222-222222222222, 4242, 500" \
		"GPU-33333333-3333-3333-3333-333333333333, 4242, 500"
}

# A spool of every kind of job: running, finished, queued ones of all
# shapes (names and command words with spaces, '%', quotes, tabs,
# newlines, UTF-8; a string command; pinned cards; priorities), a
# submission the daemon has not seen and one under a foreign name.
# The daemon has made the index and is stopped.
mixed_spool() {
	start_daemon
	r=$(sub --name runner --gpu-count 1 -- sleep 1000)
	d=$(sub --gpu-count 0 -- true)
	wait_for 20 '[ "$(job_state "$r")" = running ] && [ "$(job_state "$d")" = succeeded ]'
	busy_cards
	sub --name 'two  words %41 é' --gpu-count 2 -- echo 'a b' '50%' "it's" "$(printf 'tab\there')" "$(printf 'nl\nx')" '' >/dev/null
	sub --priority 5 --gpus 2,1 -- python3 train.py --seed 1 >/dev/null
	sub --priority -3 --gpus 7 -- true >/dev/null
	printf 'command: "while :; do echo %%s; done | wc -l"\nname: "-"\n' > "$T/s.yaml"
	sub --job "$T/s.yaml" >/dev/null
	for i in 1 2 3 4 5; do sub --gpu-count 1 -- sleep "$i" >/dev/null; done
	# Nine queued: in queued/, or one staged behind the runner (the
	# baton: its record in running/, shown queued).
	wait_for 30 '[ -z "$(ls "$T/spool/new")" ] && [ "$(st --json | json "len([j for j in d[\"jobs\"] if j[\"state\"] == \"queued\"])")" -eq 9 ]'
	wait_for 30 index_current
	stop_daemon
	sub --name pending -- true >/dev/null
	printf 'command: [true]\n' > "$T/spool/new/by-hand.job"
}

@test "status: the same table and --json with the index as without it, on a mixed spool" {
	mixed_spool
	index_current
	views "$T/with"
	mv "$T/spool/queued.idx" "$T/off"
	views "$T/without"
	same "$T/with" "$T/without"
	# Every kind was there.
	grep -q 'running' "$T/with.table"
	grep -q 'succeeded' "$T/with.all"
	grep -q 'pending' "$T/with.table"
	grep -q "1 more submission" "$T/with.table"
	grep -q "\$'nl\\\\nx'" "$T/with.table"
	[ "$(json 'len(d["jobs"])' < "$T/with.json")" -eq 11 ]
}

@test "status: while the index is current, no record of queued/ is read" {
	mixed_spool
	f=$(ls "$Q" | head -1)
	id=$(st --json | json 'd["jobs"][0]["id"]')
	# Rewritten in place (not by rename, against LAYOUT.md §3): queued/
	# does not change, so the index stays current and is used.
	echo 'not a record' > "$T/x" && cat "$T/x" > "$Q/$f"
	index_current
	run --separate-stderr st --json
	[ "$status" -eq 0 ]
	[ -z "$stderr" ]
	[ "$(json 'd["jobs"][0]["id"]' <<<"$output")" = "$id" ]
	# Without the index the record is read, and is bad.
	mv "$T/spool/queued.idx" "$T/off"
	run --separate-stderr st --json
	[ "$status" -eq 65 ]
	[[ $stderr == *"$f: not a valid job record"* ]]
}

@test "status: index lines from a daemon before \"transfer\" (their elements without it) give the same --json, each element with \"transfer\": null" {
	mixed_spool
	grep -q ',"transfer":null}' "$T/spool/queued.idx"
	views "$T/with"
	# Lines kept from such a daemon (LAYOUT.md §11, step 2): the same
	# index with no "transfer" in its elements, queued/ untouched.
	# (Its "sections" line gives the JSON section's bytes: fewer now.)
	python3 - "$T/spool/queued.idx" "$T/old.idx" <<-'EOF'
	import sys
	lines = open(sys.argv[1], "rb").read().split(b"\n")
	cut = 0
	for i, l in enumerate(lines):
	    if l.startswith(b"{") and l.endswith(b',"transfer":null}'):
	        lines[i] = l[:-len(b',"transfer":null}')] + b"}"
	        cut += len(b',"transfer":null')
	for i, l in enumerate(lines):
	    if l.startswith(b"sections "):
	        w = l.split()
	        lines[i] = b"sections %s %d" % (w[1], int(w[2]) - cut)
	open(sys.argv[2], "wb").write(b"\n".join(lines))
	EOF
	! grep -q '"transfer"' "$T/old.idx"
	cat "$T/old.idx" > "$T/spool/queued.idx"
	index_current
	views "$T/old"
	same "$T/with" "$T/old"
	[ "$(json '[j["transfer"] for j in d["jobs"]]' < "$T/old.json")" = "$(json '[None] * len(d["jobs"])' < "$T/old.json")" ]
	# The old lines were what status read: a record rewritten in place
	# (as in the test above) is not read, and the output is unchanged.
	f=$(ls "$Q" | head -1)
	echo 'not a record' > "$T/x" && cat "$T/x" > "$Q/$f"
	index_current
	run --separate-stderr st --json
	[ "$status" -eq 0 ]
	[ -z "$stderr" ]
	cmp - "$T/old.json" <<<"$output"
}

@test "status: an index made stale by hand (a record added, replaced, removed) is not used" {
	mixed_spool
	id=$(st --json | json '[j for j in d["jobs"] if j["state"] == "queued"][-1]["id"]')
	# Added.
	clone "$id" 9999
	fails queued_current
	views "$T/added"
	grep -q '^ *9999 ' "$T/added.table"
	mv "$T/spool/queued.idx" "$T/off"
	views "$T/plain"
	same "$T/added" "$T/plain"
	# Replaced under the same name.
	reindex
	one=$(ls "$Q" | head -1)
	sed 's/"waiting/"changed by hand, waiting/' "$Q/$one" > "$T/spool/tmp/x"
	mv "$T/spool/tmp/x" "$Q/$one"
	fails queued_current
	st --json | grep -q 'changed by hand'
	views "$T/replaced"
	mv "$T/spool/queued.idx" "$T/off"
	views "$T/plain"
	same "$T/replaced" "$T/plain"
	# Removed.
	reindex
	st | grep -q '^ *9999 '
	rm "$Q"/*-0000009999.job
	fails queued_current
	fails grep -q '^ *9999 ' <<<"$(st)"
	views "$T/removed"
	mv "$T/spool/queued.idx" "$T/off"
	views "$T/plain"
	same "$T/removed" "$T/plain"
}

@test "status: a file added to queued/ with its mtime put back (touch -d) still makes the index stale" {
	mixed_spool
	id=$(st --json | json '[j for j in d["jobs"] if j["state"] == "queued"][-1]["id"]')
	mtime=$(stat -c %y "$Q")
	clone "$id" 9998
	touch -d "$mtime" "$Q"
	# The mtime is the index's again; only the ctime tells.
	[ "$(stat -c %y "$Q")" = "$mtime" ]
	[ "$(sed -n 2p "$T/spool/queued.idx" | cut -d' ' -f5)" = "$(python3 -c 'import os,sys; print(os.stat(sys.argv[1]).st_mtime_ns)' "$Q")" ]
	fails queued_current
	st | grep -q '^ *9998 '
	[ "$(st --json | json 'len(d["jobs"])')" -eq 12 ]
}

@test "status: a truncated, corrupt, symlinked or foreign index is ignored, and the output is unchanged" {
	mixed_spool
	mv "$T/spool/queued.idx" "$T/good.idx"
	views "$T/plain"
	size=$(stat -c %s "$T/good.idx")
	for cut in 1 40 200 $((size / 2)) $((size - 1)); do
		head -c "$cut" "$T/good.idx" > "$T/spool/tmp/i" && mv "$T/spool/tmp/i" "$T/spool/queued.idx"
		views "$T/cut"
		same "$T/cut" "$T/plain"
	done
	# A field broken in the middle of the table section.
	python3 - "$T/good.idx" "$T/spool/tmp/i" <<-'EOF'
	import sys
	b = bytearray(open(sys.argv[1], "rb").read())
	at = b.index(b"\nj ") + 3
	at = b.index(b" ", at) + 1      # the inode: a number
	b[at] = ord("x")
	open(sys.argv[2], "wb").write(b)
	EOF
	mv "$T/spool/tmp/i" "$T/spool/queued.idx"
	views "$T/bad"
	same "$T/bad" "$T/plain"
	# Another version's.
	sed -E '1s/index [0-9]+ /index 99 /' "$T/good.idx" > "$T/spool/queued.idx"
	views "$T/other"
	same "$T/other" "$T/plain"
	# A symbolic link to a good one: never followed.
	rm "$T/spool/queued.idx"
	ln -s "$T/good.idx" "$T/spool/queued.idx"
	views "$T/link"
	same "$T/link" "$T/plain"
	# A directory, a FIFO.
	rm "$T/spool/queued.idx"
	mkdir "$T/spool/queued.idx"
	views "$T/dir"
	same "$T/dir" "$T/plain"
	rmdir "$T/spool/queued.idx"
	mkfifo "$T/spool/queued.idx"
	views "$T/fifo"
	same "$T/fifo" "$T/plain"
	# And the good one is used again.
	rm "$T/spool/queued.idx"
	cp "$T/good.idx" "$T/spool/queued.idx"
	views "$T/good"
	same "$T/good" "$T/plain"
}

@test "status: a finished copy of a queued job written after the index still hides the job (the higher rev wins)" {
	mixed_spool
	id=$(st --json | json '[j for j in d["jobs"] if j["state"] == "queued"][0]["id"]')
	src=$(ls "$Q" | grep -- "-$(printf %010d "$id").job")
	# What a crash between the two steps of spool_put leaves: the new
	# copy in done/, the old one still in queued/.
	python3 - "$Q/$src" "$T/spool/tmp/x" <<-'EOF'
	import json, sys
	r = json.load(open(sys.argv[1]))
	r["state"] = "cancelled"; r["rev"] += 1; r["reason"] = "cancelled by user"
	json.dump(r, open(sys.argv[2], "w"), indent="\t")
	EOF
	mv "$T/spool/tmp/x" "$T/spool/done/$(printf %010d "$id").job"
	# queued/ is unchanged (the index is used for it), done/ is not.
	queued_current
	fails index_current
	fails grep -q "^ *$id " <<<"$(st)"
	[ "$(st --all --json | json "[j['state'] for j in d['jobs'] if j['id'] == '$id']")" = '["cancelled"]' ]
	mv "$T/spool/queued.idx" "$T/off"
	fails grep -q "^ *$id " <<<"$(st)"
}

@test "daemon: keeps the index current as the queue changes, and writes nothing else" {
	start_daemon
	busy_cards
	a=$(sub --gpu-count 1 -- true)
	wait_for 20 '[ -e "$T/spool/queued.idx" ] && index_current'
	[ "$(st --json | json 'd["jobs"][0]["id"]')" = "$a" ]
	b=$(sub --priority 9 --gpu-count 1 -- true)
	wait_for 20 '[ "$(job_state "$b")" = queued ] && index_current'
	grep -q "\"id\":\"$b\"" "$T/spool/queued.idx"
	[ "$(st --json | json 'd["jobs"][0]["id"]')" = "$b" ]
	cardbaton-cancel --config "$C" "$b"
	wait_for 20 '[ "$(job_state "$b")" = cancelled ] && index_current'
	fails grep -q "\"id\":\"$b\"" "$T/spool/queued.idx"
	# The cards come free: the job runs and leaves the queue.
	fake_apps
	wait_for 20 '[ "$(job_state "$a")" = succeeded ] && index_current'
	[ "$(awk '/^end /{print $2}' "$T/spool/queued.idx")" = 0 ]
	# Mode as every spool file (LAYOUT.md §1).
	[ "$(stat -c %a "$T/spool/queued.idx")" = 600 ]
	stop_daemon
	# No child left behind, nothing in tmp/.
	fails pgrep -f "cardbaton-spoold --config $C"
	[ -z "$(ls -A "$T/spool/tmp")" ]
}

@test "daemon: an index it cannot write (a directory in its place) costs nothing but speed" {
	mkdir "$T/spool" "$T/spool/queued.idx"
	start_daemon
	a=$(sub --gpu-count 1 -- true)
	wait_for 20 '[ "$(job_state "$a")" = succeeded ]'
	[ -d "$T/spool/queued.idx" ]
	busy_cards
	b=$(sub --gpu-count 1 -- true)
	wait_for 20 '[ "$(job_state "$b")" = queued ]'
	[ "$(st --json | json 'd["jobs"][0]["id"]')" = "$b" ]
	fails grep -q 'queued.idx' "$T/daemon.log"
}
