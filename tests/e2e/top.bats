#!/usr/bin/env bats
# top.bats - cardbaton top: the live view in a tmux pane (tmux -S on a
# private socket, a fixed 120x40 window; send-keys for the keys,
# capture-pane for what the terminal shows, #{alternate_on} and
# #{cursor_flag} for the screen it leaves), and the one frame it prints
# on anything but a terminal.

load ../lib/common

bats_require_minimum_version 1.5.0
test_timeout 60

setup() {
	setup_common
	C=$T/config.yaml
	command -v tmux >/dev/null || skip "tmux not installed"
	TM=(tmux -S "$T/tmux.sock" -f /dev/null)
}

teardown() {
	"${TM[@]}" kill-server 2>/dev/null || true
	teardown_common
}

ESC=$'\033'

# What the pane shows now; its alternate screen (1: on) and cursor
# (1: shown) flags.
pane() { "${TM[@]}" capture-pane -p -t t; }
alt_on() { "${TM[@]}" display -p -t t '#{alternate_on}'; }
cursor_on() { "${TM[@]}" display -p -t t '#{cursor_flag}'; }

# start_top: a shell in a 120x40 pane prints BEFORE-TOP, then runs top
# (stderr to $T/top.err) and then prints top's exit status.  Returns
# once the first frame is up.
start_top() {
	"${TM[@]}" new-session -d -s t -x 120 -y 40 "env PS1='$ ' bash --norc --noprofile"
	"${TM[@]}" send-keys -t t \
		"echo BEFORE-TOP; cardbaton-top --config '$C' 2>'$T/top.err'; echo top-exit=\$?" Enter
	wait_for 10 'pane | grep -q "^cardbaton top "'
}

# top_pid: the top running in the pane.
top_pid() {
	pgrep -P "$("${TM[@]}" display -p -t t '#{pane_pid}')" -x cardbaton-top
}

# The screen as it was before top: the shell's lines, no frame, the main
# screen, the cursor shown; top said nothing on stderr.
restored() {
	pane | grep -q '^BEFORE-TOP$'
	[ "$(pane | grep -c '^cardbaton top ')" -eq 0 ]
	[ "$(alt_on)" = 0 ]
	[ "$(cursor_on)" = 1 ]
	[ ! -s "$T/top.err" ] || { cat "$T/top.err" >&2; false; }
}

@test "top in tmux shows a submitted job appear, run and finish without a key press, and q restores the screen" {
	start_daemon
	start_top
	[ "$(alt_on)" = 1 ]
	[ "$(cursor_on)" = 0 ]
	pane | grep -q '^RUNNING  0 jobs$'
	pane | grep -q '^local  up, '
	id=$(cardbaton-submit --config "$C" --name topjob -- sleep 2)
	# Running on local, card 0, its lease held by the job; the other
	# three cards idle.
	wait_for 10 'pane | grep -Eq "^ +$id +running +local +0 +[0-9]+s +- +topjob +sleep 2$"'
	wait_for 10 'pane | grep -Eq "^ +0 +job $id +\[\.+\] 0/81920 MiB"'
	pane | grep -Eq "^local  up, 4 cards as of [0-9]{2}:[0-9]{2}:[0-9]{2} \([0-9]+s ago\)$"
	[ "$(pane | grep -Ec '^ +[0-3] +(job [0-9]+|idle|busy) +\[')" -eq 4 ]
	[ "$(pane | grep -Ec '^ +[1-3] +idle ')" -eq 3 ]
	# Finished: gone from the view, the card idle again.
	wait_for 15 'pane | grep -q "^RUNNING  0 jobs$"'
	[ "$(pane | grep -c topjob)" -eq 0 ]
	wait_for 10 'pane | grep -Eq "^ +0 +idle "'
	[ "$(job_state "$id")" = succeeded ]
	"${TM[@]}" send-keys -t t q
	wait_for 10 'pane | grep -q "^top-exit=0$"'
	restored
}

@test "top: the queue in dispatch order with each job's reason, the running job's time limit" {
	start_daemon
	a=$(cardbaton-submit --config "$C" --name long --timeout 600 -- sleep 30)
	b=$(cardbaton-submit --config "$C" --hold -- true)
	c=$(cardbaton-submit --config "$C" --priority 5 --gpu-count 9 -- true)
	wait_for 10 '[ "$(job_state "$a")" = running ]'
	start_top
	wait_for 10 'pane | grep -Eq "^ +$a +running +local +0 +[0-9]+s +10m00s +long +sleep 30$"'
	wait_for 10 'pane | grep -Eq "^ +$c +5 +any:9 +- +[0-9]+s +- +waiting: "'
	pane | grep -Eq "^ +$b +0 +any:1 +- +[0-9]+s +- +held$"
	# Dispatch order: the higher priority first.
	[ "$(pane | grep -Eo "^ +($b|$c) +[0-9]+ +any" | awk '{print $1}' | tr '\n' ' ')" = "$c $b " ]
	pane | grep -q '^QUEUED  2 jobs$'
	"${TM[@]}" send-keys -t t q
	wait_for 10 'pane | grep -q "^top-exit=0$"'
	restored
}

@test "top: SIGTERM and SIGINT restore the screen, and end top by that signal" {
	start_top
	kill -TERM "$(top_pid)"
	wait_for 10 'pane | grep -q "^top-exit=143$"'
	restored
	"${TM[@]}" send-keys -t t clear Enter
	# (bash drops the rest of a command line whose command ^C ended)
	"${TM[@]}" send-keys -t t "echo BEFORE-TOP" Enter "cardbaton-top --config '$C' 2>'$T/top.err'" Enter
	wait_for 10 'pane | grep -q "^cardbaton top "'
	"${TM[@]}" send-keys -t t C-c
	wait_for 10 '[ "$(alt_on)" = 0 ]'
	"${TM[@]}" send-keys -t t "echo top-exit=\$?" Enter
	wait_for 10 'pane | grep -q "^top-exit=130$"'
	restored
}

@test "top: a resize redraws the frame to the new width and height" {
	start_daemon
	id=$(cardbaton-submit --config "$C" -- sleep 30)
	start_top
	wait_for 10 'pane | grep -Eq "^ +0 +job $id "'
	[ "$(pane | head -n 1 | awk '{ print length }')" -gt 60 ]
	"${TM[@]}" resize-window -t t -x 60 -y 10
	# The title cut to 60 columns, and the nodes panel shortened to fit
	# 10 lines (which it never is in 40).
	wait_for 10 'pane | grep -q "^  \.\.\. [0-9]* more line"'
	[ "$(pane | head -n 1 | awk '{ print length }')" -eq 60 ]
	[ "$(pane | awk 'length > 60' | wc -l)" -eq 0 ]
	[ "$(pane | wc -l)" -le 10 ]
	pane | grep -Eq "^ +$id +running +local"
	"${TM[@]}" resize-window -t t -x 120 -y 40
	wait_for 10 '[ "$(pane | head -n 1 | awk "{ print length }")" -gt 60 ]'
	[ "$(pane | grep -c 'more line')" -eq 0 ]
	"${TM[@]}" send-keys -t t q
	wait_for 10 'pane | grep -q "^top-exit=0$"'
	restored
}

# cards_at: the time of the cards of nodes/local.json, local time as top
# shows it ("14:02:11").
cards_at() {
	date -d "@$(json 'd["gpus_at_ms"] // 1000' < "$T/spool/nodes/local.json")" +%H:%M:%S
}

@test "top: when the cards were read (cards as of TIME), and stale once older than gpu_refresh_seconds and a query's deadline" {
	start_daemon
	start_top
	wait_for 10 '[ -e "$T/spool/nodes/local.json" ]'
	# The reading time is nodes/local.json's, live.
	wait_for 10 'pane | grep -Eqx "local  up, 4 cards as of $(cards_at) \([0-9]+s ago\)"'
	"${TM[@]}" send-keys -t t q
	wait_for 10 'pane | grep -q "^top-exit=0$"'
	restored
	stop_daemon
	# The daemon gone, the cards read 2 minutes ago: older than the
	# default gpu_refresh_seconds (30) and a query's 15 s, so stale, and
	# yellow on a terminal.
	python3 - "$T/spool/nodes/local.json" <<-'EOF'
		import json, os, sys, time
		d = json.load(open(sys.argv[1]))
		d["gpus_at_ms"] = int(time.time() * 1000) - 120000
		json.dump(d, open(sys.argv[1] + ".new", "w"))
		os.rename(sys.argv[1] + ".new", sys.argv[1])
	EOF
	at=$(cards_at)
	run --separate-stderr cardbaton-top --config "$C"
	[ "$status" -eq 0 ]
	printf '%s\n' "$output" | grep -Eqx "local  up, 4 cards as of $at \(2m0[0-9]s ago, stale\)"
	[[ $output != *"$ESC"* ]]
	run script -qec "cardbaton-top --once --config '$C'" /dev/null
	[[ $output == *"${ESC}[33mlocal  up, 4 cards as of $at (2m0"?"s ago, stale)"* ]]
	# With gpu_refresh_seconds: 600 the same reading is not stale yet;
	# with 0 (the daemon reads them only while jobs wait), the default's
	# bound holds.
	printf 'spool: ./spool\ngpu_refresh_seconds: 600\nnodes:\n  local:\n    local: true\n' > "$C"
	run --separate-stderr cardbaton-top --config "$C"
	printf '%s\n' "$output" | grep -Eqx "local  up, 4 cards as of $at \(2m0[0-9]s ago\)"
	printf 'spool: ./spool\ngpu_refresh_seconds: 0\nnodes:\n  local:\n    local: true\n' > "$C"
	run --separate-stderr cardbaton-top --config "$C"
	[[ $output == *"s ago, stale)"* ]]
}

@test "top: a drained node and an unreachable one show as such, live" {
	printf 'spool: ./spool\nssh_command: [false]\nnodes:\n  local:\n    local: true\n  far:\n    ssh: far\n' > "$C"
	start_daemon
	start_top
	wait_for 10 'pane | grep -q "^far  unreachable for [0-9]*s: "'
	pane | grep -q "^local  up, "
	cardbaton-drain --config "$C" local
	wait_for 10 'pane | grep -q "^local  DRAINED, up, "'
	cardbaton-undrain --config "$C" local
	wait_for 10 'pane | grep -q "^local  up, "'
	"${TM[@]}" send-keys -t t q
	wait_for 10 'pane | grep -q "^top-exit=0$"'
	restored
}

@test "top: control characters in a command and a reason are shown as '?', never sent raw" {
	start_daemon
	printf 'name: esc\ncommand: "sleep 30 # \\e[2J\\e]2;pwned\\a"\n' > "$T/spool/new/esc.job"
	start_top
	wait_for 10 'pane | grep -Eq "^ +1 +running +local .* esc +sleep 30 # \?\[2J\?\]2;pwned\?$"'
	[ "$("${TM[@]}" display -p -t t '#{pane_title}')" != pwned ]
	"${TM[@]}" send-keys -t t q
	wait_for 10 'pane | grep -q "^top-exit=0$"'
	restored
	# A reason with control characters, from a record (no daemon):
	# none reaches the output either.
	stop_daemon
	id=$(cardbaton-submit --config "$C" --hold -- true)
	cardbaton-spoold --config "$C" --once
	f=$(ls "$T/spool/queued/"*"-$(printf %010d "$id").job")
	python3 - "$f" "$T/spool/tmp/r" <<-'EOF'
		import json, os, sys
		d = json.load(open(sys.argv[1]))
		d["reason"] = "held \x1b]2;pwned\x07 \x1b[31mred"
		json.dump(d, open(sys.argv[2], "w"))
		os.rename(sys.argv[2], sys.argv[1])
	EOF
	run --separate-stderr cardbaton-top --config "$C"
	[ "$status" -eq 0 ]
	[[ $output == *"held ?]2;pwned? ?[31mred"* ]]
	[[ $output != *"$ESC"* ]]
	[[ $output != *$'\a'* ]]
}

@test "top: not a terminal, one frame without escapes and exit 0; --once on a terminal" {
	COLUMNS=300 run --separate-stderr cardbaton-top --config "$C"
	[ "$status" -eq 0 ]
	[ -z "$stderr" ]
	[[ ${lines[0]} == "cardbaton top  "*"  queued 0  running 0  pausing 0  paused 0  $T/spool" ]]
	[[ $output == *$'\nno spool at '* ]]
	[[ $output == *$'\nlocal  no word from the daemon yet'* ]]
	[[ $output != *"$ESC"* ]]
	start_daemon
	id=$(cardbaton-submit --config "$C" -- true)
	wait_for 10 '[ "$(job_state "$id")" = succeeded ]'
	wait_for 10 'cardbaton-top --config "$C" | grep -Ec "^ +[0-3] +idle " | grep -qx 4'
	cardbaton-submit --config "$C" --hold --name "$(printf 'x%.0s' {1..200})" -- true >/dev/null
	run --separate-stderr cardbaton-top --config "$C"
	[ "$status" -eq 0 ]
	[[ $output == *$'\nRUNNING  0 jobs\nQUEUED  1 job\n'* ]]
	[[ $output == *$'\nlocal  up, 4 cards as of '*$' ago)\n'* ]]
	[ "$(printf '%s\n' "$output" | grep -Ec '^ +[0-3] +idle +\[\.\.\.\.\.\.\.\.\.\.\] 0/81920 MiB +\[\.\.\.\.\.\.\.\.\.\.\] +0% +0 +NVIDIA')" -eq 4 ]
	[[ $output != *"$ESC"* ]]
	# Lines cut to 80 columns, or $COLUMNS.
	[ "$(printf '%s\n' "$output" | awk 'length > 80' | wc -l)" -eq 0 ]
	[ "$(printf '%s\n' "$output" | awk 'length == 80' | wc -l)" -ge 1 ]
	COLUMNS=100 run cardbaton-top --config "$C"
	[ "$(printf '%s\n' "$output" | awk 'length > 100' | wc -l)" -eq 0 ]
	[ "$(printf '%s\n' "$output" | awk 'length == 100' | wc -l)" -ge 1 ]
	# --once on a terminal: one frame, on the main screen, and it exits.
	"${TM[@]}" new-session -d -s t -x 120 -y 40 "env PS1='$ ' bash --norc --noprofile"
	"${TM[@]}" send-keys -t t "NO_COLOR=1 cardbaton-top --once --config '$C'; echo top-exit=\$?" Enter
	wait_for 10 'pane | grep -q "^top-exit=0$"'
	pane | grep -q '^cardbaton top '
	[ "$(alt_on)" = 0 ]
	# Usage.
	run --separate-stderr cardbaton-top --config "$C" extra
	failed 64 cardbaton-top
	run --separate-stderr cardbaton-top --help
	[ "$status" -eq 0 ]
	[ "$output" = "usage: cardbaton-top [--config PATH] [--once]" ]
}

@test "top: the man page's SYNOPSIS is the usage line; mandoc -Tlint is clean" {
	command -v mandoc >/dev/null || skip "mandoc not installed"
	page=$CB_TOP/man/cardbaton-top.1
	syn=$(mandoc -Tascii "$page" | sed $'s/.\b//g' | sed -n '/^SYNOPSIS/,/^DESCRIPTION/p' |
		sed '1d;$d' | tr -s ' \t\n' ' ' | sed 's/^ //; s/ $//')
	[ "$syn" = "$(cardbaton-top --help | sed 's/^usage: //')" ]
	grep -q '^\.Sh EXIT STATUS' "$page"
	grep -q '^\.Sh EXAMPLES' "$page"
	out=$(mandoc -Tlint -Wwarning "$page" 2>&1)
	[ -z "$out" ] || { echo "$out" >&2; false; }
}
