#!/usr/bin/env bats
# mcp.bats - cardbaton-mcp, the Model Context Protocol server on stdio
# (bin/mcp.c, cardbaton-mcp(1)): the official MCP TypeScript SDK's
# client drives it as an assistant would (tests/mcp/client.mjs), and raw
# JSON-RPC lines test the protocol's edges: parse errors, unknown
# methods, batches, bad arguments, the message cap, calls in flight side
# by side, cancellation and the end of input.
#
# The raw lines go through tests/mcp/rpc.py (a server, send, receive
# with a deadline) or a plain pipe where the answers are immediate.

load ../lib/common

bats_require_minimum_version 1.5.0
test_timeout 90

setup() {
	setup_common
	C=$T/config.yaml
	export PYTHONPATH=$CB_TOP/tests/mcp PYTHONDONTWRITEBYTECODE=1
}

teardown() {
	teardown_common
}

# mcp_pipe LINE...: the lines to a fresh server; its output in $output.
mcp_pipe() {
	run --separate-stderr sh -c 'printf "%s\n" "$@" | cardbaton-mcp --config "$0"' "$C" "$@"
	[ "$status" -eq 0 ] || { echo "exit $status: $stderr" >&2; return 1; }
}

# py SCRIPT: python3 with rpc.py importable and $C, $T in its environment.
py() { C=$C T=$T python3 -c "$1"; }

# gate NAME: a CPU job that runs until $T/NAME exists; prints its ID.
gate() { sub --gpu-count 0 -- sh -c "while [ ! -e '$T/$1' ]; do sleep 0.05; done"; }

@test "the MCP TypeScript SDK client: initialize, tools, submit, status, wait, logs, tool errors" {
	if [ ! -d "$CB_TOP/tests/mcp/node_modules/@modelcontextprotocol/sdk" ]; then
		echo "the MCP SDK is not installed: run 'npm ci --prefix tests/mcp' (tests/install-deps does)" >&2
		false
	fi
	command -v node >/dev/null || { echo "node is not installed" >&2; false; }
	start_daemon
	run node "$CB_TOP/tests/mcp/client.mjs" "$CB_BUILD/cardbaton-mcp" "$C"
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(grep -c '^ok - ' <<<"$output")" -eq 12 ]
}

@test "usage: --help is the man page's SYNOPSIS; an operand is 64; mandoc -Tlint is clean" {
	run --separate-stderr cardbaton-mcp --help
	[ "$status" -eq 0 ]
	[ "$output" = "usage: cardbaton-mcp [--config PATH]" ]
	run --separate-stderr cardbaton-mcp extra
	failed 64 cardbaton-mcp
	run --separate-stderr cardbaton-mcp --bogus
	failed 64 cardbaton-mcp
	run --separate-stderr cardbaton --help
	[[ $output == *"mcp "*"Model Context Protocol"* ]]
	command -v mandoc >/dev/null || skip "mandoc not installed"
	page=$CB_TOP/man/cardbaton-mcp.1
	syn=$(mandoc -Tascii "$page" | sed $'s/.\b//g' | sed -n '/^SYNOPSIS/,/^DESCRIPTION/p' |
		sed '1d;$d' | tr -s ' \t\n' ' ' | sed 's/^ //; s/ $//')
	[ "$syn" = "cardbaton-mcp [--config PATH]" ]
	out=$(mandoc -Tlint -Wwarning "$page" 2>&1)
	[ -z "$out" ] || { echo "$out" >&2; false; }
	grep -q '^\.Sh EXIT STATUS' "$page"
	grep -q '"mcpServers"' "$page"
}

@test "initialize: the client's protocol version when known, else ours; serverInfo; tools" {
	mcp_pipe \
		'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}' \
		'{"jsonrpc":"2.0","method":"notifications/initialized"}' \
		'{"jsonrpc":"2.0","id":"two","method":"initialize","params":{"protocolVersion":"1999-01-01"}}' \
		'{"jsonrpc":"2.0","id":3,"method":"ping"}' \
		'{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{}}'
	[ "${#lines[@]}" -eq 4 ]
	[ "$(json 'd["result"]["protocolVersion"]' <<<"${lines[0]}")" = 2024-11-05 ]
	[ "$(json 'd["result"]["serverInfo"]["name"]' <<<"${lines[0]}")" = cardbaton ]
	[ "$(json 'd["result"]["serverInfo"]["version"]' <<<"${lines[0]}")" = \
	  "$(cardbaton --version | cut -d' ' -f2)" ]
	[ "$(json 'd["result"]["capabilities"]' <<<"${lines[0]}")" = '{"tools": {"listChanged": false}}' ]
	[ "$(json 'd["id"] + " " + d["result"]["protocolVersion"]' <<<"${lines[1]}")" = "two 2025-11-25" ]
	[ "$(json '[d["id"], d["result"]]' <<<"${lines[2]}")" = '[3, {}]' ]
	[ "$(json '" ".join(t["name"] for t in d["result"]["tools"])' <<<"${lines[3]}")" = \
	  "submit status logs gpus pause resume cancel promote wait" ]
	# Each schema says what the tool takes, and only that.
	[ "$(json '[t["name"] for t in d["result"]["tools"] if t["inputSchema"]["additionalProperties"] is not False]' \
	     <<<"${lines[3]}")" = '[]' ]
	[ "$(json '[t for t in d["result"]["tools"] if t["name"] == "wait"][0]["inputSchema"]["properties"]["job_ids"]["type"]' \
	     <<<"${lines[3]}")" = array ]
}

@test "protocol errors: bad JSON -32700, unknown method -32601, batch and non-JSON-RPC -32600, bad params -32602" {
	mcp_pipe \
		'{"jsonrpc":"2.0","id":1,"method":' \
		'not json at all' \
		'{"jsonrpc":"2.0","id":2,"method":"frobnicate"}' \
		'{"jsonrpc":"2.0","method":"notifications/frobnicated"}' \
		'[{"jsonrpc":"2.0","id":3,"method":"ping"}]' \
		'{"id":4,"method":"ping"}' \
		'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"frobnicate"}}' \
		'{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"arguments":{}}}' \
		'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"status","arguments":[1]}}' \
		'{"jsonrpc":"2.0","id":8,"method":"ping"} trailing' \
		'' \
		'{"jsonrpc":"2.0","id":9,"result":{}}' \
		'{"jsonrpc":"2.0","id":10,"method":"ping"}'
	# Nothing for the notification, the empty line or the response.
	printf '%s\n' "${lines[@]}"
	[ "${#lines[@]}" -eq 10 ]
	e() { json '[d["id"], d["error"]["code"]]' <<<"${lines[$1]}"; }
	[ "$(e 0)" = '[null, -32700]' ]
	[ "$(e 1)" = '[null, -32700]' ]
	[ "$(e 2)" = '[2, -32601]' ]
	[ "$(json 'd["error"]["message"]' <<<"${lines[2]}")" = "method not found: frobnicate" ]
	[ "$(e 3)" = '[null, -32600]' ]
	[ "$(e 4)" = '[4, -32600]' ]
	[ "$(e 5)" = '[5, -32602]' ]
	[ "$(json 'd["error"]["message"]' <<<"${lines[5]}")" = "tools/call: unknown tool 'frobnicate'" ]
	[ "$(e 6)" = '[6, -32602]' ]
	[ "$(e 7)" = '[7, -32602]' ]
	[ "$(e 8)" = '[null, -32700]' ]
	[ "$(json '[d["id"], d["result"]]' <<<"${lines[9]}")" = '[10, {}]' ]
}

@test "tool errors: a bad argument is 64 naming it; an operand is never a flag; the tool's own line and code" {
	mcp_pipe \
		'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"submit","arguments":{"command":["true"],"priority":"high"}}}' \
		'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"submit","arguments":{"command":["true"],"bogus":1}}}' \
		'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"logs","arguments":{}}}' \
		'{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"status","arguments":{"job_ids":["--all"]}}}' \
		'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"submit","arguments":{"gpu_count":1.5,"command":["true"]}}}' \
		'{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"submit","arguments":{"env":{"A":1},"command":["true"]}}}'
	[ "${#lines[@]}" -eq 6 ]
	r() { grep "\"id\":$1," <<<"$output" | json '[d["result"]["isError"], d["result"]["structuredContent"]["exit_code"], d["result"]["content"][0]["text"]]'; }
	# priority "high": passed to submit, which refuses it as its flag.
	[ "$(r 1)" = "[true, 64, \"cardbaton-submit: --priority: 'high' is not an integer from -99999999 to 99999999\"]" ]
	[ "$(r 2)" = '[true, 64, "cardbaton-mcp: submit: unknown argument '"'bogus'"' (submit takes: command, job, job_text, node, gpus, gpu_count, gpu_memory, share, priority, timeout, cwd, name, resume_command, env, hold, begin, after, after_any, array, param, max_running)"]' ]
	[ "$(r 3)" = '[true, 64, "cardbaton-mcp: logs: argument '"'job_id'"' is required"]' ]
	[ "$(r 4)" = '[true, 64, "cardbaton-status: '"'--all'"' is not a job ID (1 to 9999999999)"]' ]
	[ "$(r 5)" = '[true, 64, "cardbaton-mcp: submit: argument '"'gpu_count'"' must be an integer"]' ]
	[ "$(r 6)" = '[true, 64, "cardbaton-mcp: submit: argument '"'env'"' must be an object of strings"]' ]
	# Nothing was queued by any of them.
	[ "$(st --json | json 'len(d["jobs"])')" = 0 ]
}

@test "submit's arguments become its flags: job_text on its stdin, env, gpus, after, params" {
	one=$(sub -- true)
	py '
import json, os, rpc
s = rpc.Server(["cardbaton-mcp", "--config", os.environ["C"]])
s.call(1, "submit", {"job_text": "command: [echo, from-text]\npriority: 3\n", "name": "t"})
m = s.recv()
assert not m["result"]["isError"], m
j = m["result"]["structuredContent"]["jobs"][0]
assert j["command"] == ["echo", "from-text"] and j["priority"] == 3 and j["name"] == "t", j
assert j["begin"] is None, j
s.call(2, "submit", {"command": ["python3", "-c", "print(1)", "--flag"], "env": {"A": "b c"},
                     "gpus": [1, 3], "after": ["'"$one"'"], "hold": True, "share": False,
                     "priority": -5})
j = s.recv()["result"]["structuredContent"]["jobs"][0]
assert j["command"] == ["python3", "-c", "print(1)", "--flag"] and j["gpus"] == [1, 3], j
assert j["after"] == [int("'"$one"'")] and j["priority"] == -5, j
s.call(5, "submit", {"command": ["true"], "begin": "2999-01-01T01:00:00.1234+01:00"})
j = s.recv()["result"]["structuredContent"]["jobs"][0]
assert j["begin"] == "2999-01-01T00:00:00.124Z", j
s.call(6, "status", {"job_ids": [j["id"]]})
j = s.recv()["result"]["structuredContent"]["jobs"][0]
assert j["begin"] == "2999-01-01T00:00:00.124Z", j
s.call(3, "submit", {"command": ["echo", "{lr}"], "param": {"lr": ["0.1", "0.01"]}})
jobs = s.recv()["result"]["structuredContent"]["jobs"]
assert [j["command"] for j in jobs] == [["echo", "0.1"], ["echo", "0.01"]], jobs
s.call(4, "submit", {"job_text": "command: [x]", "job": "/nonexistent"})
m = s.recv()
assert m["result"]["isError"] and "not both" in rpc.text(m), m
rest, rc = s.close()
assert rest == [] and rc == 0, (rest, rc)
'
	[ "$(field 2 command)" = '["echo", "from-text"]' ]
	[ "$(st --json 3 | json 'd["jobs"][0]["gpus"]')" = '[1, 3]' ]
	f=$(echo "$T"/spool/new/*-0000000003.job)
	[ "$(json '[d["env"], d["hold"], d.get("share", False)]' < "$f")" = '[{"A": "b c"}, true, false]' ]
}

@test "two calls in flight: a wait on a running job, then status; status is answered first" {
	start_daemon
	id=$(gate go)
	wait_for 10 '[ "$(job_state "$id")" = running ]'
	py '
import os, rpc
s = rpc.Server(["cardbaton-mcp", "--config", os.environ["C"]])
s.call(1, "wait", {"job_ids": ["'"$id"'"]})
s.call(2, "status", {"job_ids": ["'"$id"'"]})
m = s.recv()
assert m["id"] == 2, m
assert m["result"]["structuredContent"]["jobs"][0]["state"] == "running", m
s.send({"jsonrpc": "2.0", "id": 3, "method": "ping"})
assert s.recv()["id"] == 3
open(os.environ["T"] + "/go", "w").close()
m = s.recv(60)
assert m["id"] == 1 and not m["result"]["isError"], m
assert m["result"]["structuredContent"]["jobs"][0]["state"] == "succeeded", m
rest, rc = s.close()
assert rest == [] and rc == 0, (rest, rc)
'
}

@test "wait: a job that failed is an answer, not an error; --timeout is the tool's error" {
	start_daemon
	bad=$(sub --gpu-count 0 -- sh -c 'exit 3')
	id=$(gate go)
	py '
import os, rpc
s = rpc.Server(["cardbaton-mcp", "--config", os.environ["C"]])
s.call(1, "wait", {"job_ids": ["'"$bad"'"]})
m = s.recv(60)
assert not m["result"]["isError"], m
j = m["result"]["structuredContent"]["jobs"][0]
assert j["state"] == "failed" and j["exit_code"] == 3, j
s.call(2, "wait", {"job_ids": ["'"$id"'"], "timeout": 0})
m = s.recv(60)
assert m["result"]["isError"] and m["result"]["structuredContent"]["exit_code"] == 75, m
assert rpc.text(m).startswith("cardbaton-wait: "), m
s.close()
'
	touch "$T/go"
}

@test "notifications/cancelled stops that call's tool, which is never answered" {
	start_daemon
	id=$(gate go)
	wait_for 10 '[ "$(job_state "$id")" = running ]'
	py '
import os, rpc, time
s = rpc.Server(["cardbaton-mcp", "--config", os.environ["C"]])
s.call("w", "wait", {"job_ids": ["'"$id"'"]})
s.call(2, "status", {})
assert s.recv()["id"] == 2
def waits():
    n = 0
    for p in os.listdir("/proc"):
        try:
            with open("/proc/%s/cmdline" % p, "rb") as f:
                a = f.read().split(b"\0")
        except OSError:
            continue
        if a[0].endswith(b"cardbaton-wait") and os.environ["C"].encode() in a:
            n += 1
    return n
assert waits() == 1
s.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "w", "reason": "no"}})
deadline = time.monotonic() + rpc.scaled(10)
while waits() and time.monotonic() < deadline:
    time.sleep(0.02)
assert waits() == 0
s.send({"jsonrpc": "2.0", "id": 3, "method": "ping"})
assert s.recv()["id"] == 3
rest, rc = s.close()
assert rest == [] and rc == 0, (rest, rc)
'
	# The job itself goes on: only the call was cancelled.
	[ "$(job_state "$id")" = running ]
	touch "$T/go"
}

@test "the end of input: the calls still running are answered, then it exits 0; SIGTERM stops them" {
	id=$(sub -- true)
	# A one-shot pipe gets its answer (no daemon: the job stays queued).
	mcp_pipe '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"status","arguments":{"job_ids":["'"$id"'"]}}}'
	[ "${#lines[@]}" -eq 1 ]
	[ "$(json 'd["result"]["structuredContent"]["jobs"][0]["id"]' <<<"${lines[0]}")" = "$id" ]
	# A wait that cannot end without the daemon; the server lingers
	# until it does, and SIGTERM stops both.
	cardbaton-mcp --config "$C" > "$T/out" 2>"$T/err" < <(
		echo '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"wait","arguments":{"job_ids":["'"$id"'"]}}}') &
	pid=$!
	wait_for 10 'pgrep -P "$pid" >/dev/null'
	child=$(pgrep -P "$pid")
	settle 0.3
	kill -0 "$pid"
	kill -TERM "$pid"
	rc=0
	wait "$pid" || rc=$?
	[ "$rc" -eq 143 ]
	wait_for 10 'not kill -0 "$child"'
	[ ! -s "$T/out" ]
}

@test "a message over 16 MiB is answered -32600 and skipped; the next is answered" {
	py '
import os, rpc
s = rpc.Server(["cardbaton-mcp", "--config", os.environ["C"]])
s.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"x\":\"" + b"a" * (17 << 20) + b"\"}}\n")
m = s.recv()
assert m["id"] is None and m["error"]["code"] == -32600 and "16 MiB" in m["error"]["message"], m
s.send({"jsonrpc": "2.0", "id": 2, "method": "ping"})
assert s.recv()["id"] == 2
rest, rc = s.close()
assert rest == [] and rc == 0
'
}

@test "logs: output that is not UTF-8 comes back valid, bad bytes as U+FFFD; gpus is its JSON document" {
	start_daemon
	id=$(sub --gpu-count 0 -- printf 'caf\351 ok\n')
	cardbaton-wait --config "$C" "$id"
	py '
import os, rpc
s = rpc.Server(["cardbaton-mcp", "--config", os.environ["C"]])
s.call(1, "logs", {"job_id": int("'"$id"'")})
m = s.recv()
assert not m["result"]["isError"], m
assert rpc.text(m) == "caf\ufffd ok\n", rpc.text(m)
assert "structuredContent" not in m["result"]
s.call(2, "gpus", {})
m = s.recv()
assert not m["result"]["isError"], m
g = m["result"]["structuredContent"]["nodes"][0]
assert g["name"] == "local" and len(g["gpus"]) == 4, g
s.close()
'
}

@test "status's user and mine: the owner filters (a name or a list of names; a boolean), each job's owner in its element" {
	a=$(sub --hold -- true)
	b=$(sub --hold -- true)
	me=$(id -un)
	mcp_pipe \
		'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"status","arguments":{"user":"'"$me"'"}}}' \
		'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"status","arguments":{"user":["nobody-here","'"$me"'"],"job_ids":["'"$b"'"]}}}' \
		'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"status","arguments":{"user":"nobody-here"}}}' \
		'{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"status","arguments":{"mine":true}}}' \
		'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"status","arguments":{"mine":true,"user":"nobody-here"}}}' \
		'{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"status","arguments":{"user":[]}}}' \
		'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"status","arguments":{"user":["a,b"]}}}' \
		'{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"status","arguments":{"user":7}}}' \
		'{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"status","arguments":{"mine":"yes"}}}' \
		'{"jsonrpc":"2.0","id":10,"method":"tools/list"}'
	[ "${#lines[@]}" -eq 10 ]
	ids() { grep "\"id\":$1," <<<"$output" | json '" ".join(j["id"] + ":" + j["owner"] for j in d["result"]["structuredContent"]["jobs"])'; }
	err() { grep "\"id\":$1," <<<"$output" | json '[d["result"]["isError"], d["result"]["structuredContent"]["exit_code"]]'; }
	[ "$(ids 1)" = "$a:$me $b:$me" ]
	[ "$(ids 2)" = "$b:$me" ]
	[ "$(ids 3)" = "" ]
	[ "$(ids 4)" = "$a:$me $b:$me" ]
	[ "$(ids 5)" = "" ]
	for k in 6 7 8 9; do [ "$(err $k)" = '[true, 64]' ]; done
	[[ $(grep '"id":8,' <<<"$output") == *"argument 'user' must be a string or a non-empty array of strings without commas"* ]]
	# The schema: a string, or a non-empty array of strings; a boolean.
	[ "$(grep '"id":10,' <<<"$output" | json '[t for t in d["result"]["tools"] if t["name"] == "status"][0]["inputSchema"]["properties"]["user"]["anyOf"]')" = \
	  '[{"type": "string"}, {"type": "array", "items": {"type": "string"}, "minItems": 1}]' ]
	[ "$(grep '"id":10,' <<<"$output" | json '[t for t in d["result"]["tools"] if t["name"] == "status"][0]["inputSchema"]["properties"]["mine"]["type"]')" = boolean ]
}
