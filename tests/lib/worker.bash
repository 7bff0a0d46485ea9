# tests/lib/worker.bash - helpers for suites that drive cardbaton-worker
# directly against a state directory, as the controller does
# (worker.bats, baton.bats).  Load it after common: its `st` and `field`
# are the worker's (records), not the tools'.

U0=GPU-00000000-0000-0000-0000-000000000000
U1=GPU-11111111-1111-1111-1111-111111111111
U2=GPU-22222222-2222-2222-2222-222222222222
U3=GPU-33333333-3333-3333-3333-333333333333

# wesc STRING: STRING as a wire value (bytes below 0x21, 0x7f and '%'
# as %XX).
wesc() {
	local s=$1 out= c i LC_ALL=C
	for ((i = 0; i < ${#s}; i++)); do
		c=${s:i:1}
		case $c in
		[[:cntrl:]]|' '|%) printf -v c '%%%02X' "'$c" ;;
		esac
		out+=$c
	done
	printf '%s' "$out"
}

# spec KEY VALUE [KEY VALUE]... : a record on stdout.
spec() {
	while [ $# -ge 2 ]; do
		printf '%s %s\n' "$1" "$(wesc "$2")"
		shift 2
	done
	echo end
}

# launch KEY VALUE... : run `cardbaton-worker launch` on that spec.
launch() {
	spec "$@" > "$T/spec.in"
	run cardbaton-worker launch < "$T/spec.in"
}

# field KEY < RECORD : the first value of KEY, decoded.
field() {
	local v out= c
	v=$(sed -n "s/^$1 //p" | head -n 1)
	while [[ $v == *%* ]]; do
		out+=${v%%\%*}
		v=${v#*%}
		printf -v c "\\x${v:0:2}"
		out+=$c
		v=${v:2}
	done
	printf '%s\n' "$out$v"
}

# gpu_rec INDEX < gpus output : that card's record.
gpu_rec() {
	awk -v want="index $1" '
		$0 == "end" { if (hit) { print rec; exit } rec = ""; hit = 0; next }
		{ rec = rec $0 "\n"; if ($0 == want) hit = 1 }'
}

st() {       # st ID KEY : KEY of the attempt's status record
	cardbaton-worker status "$1" | field "$2"
}

is_final() {
	cardbaton-worker status "$1" | grep -Eq '^state (succeeded|failed|cancelled|lost|paused|unstaged)$'
}

wait_final() {      # wait_final ID [SECONDS]
	wait_for "${2:-5}" "is_final $1"
}

cpu_ticks() {      # cpu_ticks PID: user + system time so far, in clock ticks
	awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"
}

lease_free() {      # lease_free UUID: nobody holds leases/UUID
	[ ! -e "$STATE/leases/$1" ] || flock -n "$STATE/leases/$1" true
}

lock_free() {       # lock_free ID: nobody holds attempts/ID/lock
	flock -n "$STATE/attempts/$1/lock" true
}

no_trace() {        # no_trace ID: nothing of attempt ID on disk
	[ ! -e "$STATE/attempts/$1" ] && [ ! -e "$STATE/attempts/$1.state" ]
}

sup_of() {          # sup_of PID: the job's parent, its supervisor
	awk '{ sub(/.*\) /, ""); print $2 }' "/proc/$1/stat"
}

now_ms() {
	echo $(( $(date +%s%N) / 1000000 ))
}

# record_with LINE < records: the last record that holds LINE.
record_with() {
	awk -v want="$1" '$0 == "end" { if (hit) last = rec; rec = ""; hit = 0; next }
		{ rec = rec $0 "\n"; if ($0 == want) hit = 1 } END { printf "%s", last }'
}

# start_watch: `cardbaton-worker watch` in the background writing
# $T/watch.out; stop_watch closes its stdin and waits for it.
start_watch() {
	mkfifo "$T/watch.in"
	cardbaton-worker watch < "$T/watch.in" > "$T/watch.out" 3>&- &
	WATCH_PID=$!
	exec {WATCH_FD}> "$T/watch.in"
	wait_for 10 'grep -qx "ready 1" "$T/watch.out"'
}
stop_watch() {
	exec {WATCH_FD}>&-
	wait "$WATCH_PID"
}

# A job that waits for a line on the fifo $T/go (then exits 0).
go_fifo() {
	mkfifo "$T/go"
}
go() {
	echo go > "$T/go"
}
