"""tests/mcp/rpc.py - raw JSON-RPC lines to cardbaton-mcp, no SDK
(tests/e2e/mcp.bats): start the server, send messages, read its answers
one line at a time with a deadline.

    import rpc
    s = rpc.Server(["cardbaton-mcp", "--config", cfg])
    s.send({"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert s.recv()["id"] == 1

Every line the server writes must be one JSON object (anything else on
its standard output fails the test).
"""
import json
import os
import select
import subprocess
import time

# Every timeout here is a bound on a wait, scaled as the suites' are
# (CB_TEST_TIMEOUT_SCALE, tests/lib/scale.bash).
SCALE = float(os.environ.get("CB_TEST_TIMEOUT_SCALE") or 1)


def scaled(seconds):
    return seconds * SCALE


class Server:
    def __init__(self, argv):
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.buf = b""

    def send_raw(self, data):
        self.p.stdin.write(data)
        self.p.stdin.flush()

    def send(self, msg):
        self.send_raw(json.dumps(msg).encode() + b"\n")

    def call(self, id_, tool, args=None):
        self.send({"jsonrpc": "2.0", "id": id_, "method": "tools/call",
                   "params": {"name": tool, "arguments": args or {}}})

    def line(self, timeout=30):
        """The next line (bytes), or None at the end of the output."""
        timeout = scaled(timeout)
        deadline = time.monotonic() + timeout
        fd = self.p.stdout.fileno()
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no answer within %s s" % timeout)
            r, _, _ = select.select([fd], [], [], left)
            if r:
                chunk = os.read(fd, 65536)
                if not chunk:
                    if self.buf:
                        raise AssertionError("output ends without a newline: %r" % self.buf)
                    return None
                self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line

    def recv(self, timeout=30):
        line = self.line(timeout)
        assert line is not None, "the server's output ended"
        msg = json.loads(line)
        assert isinstance(msg, dict) and msg.get("jsonrpc") == "2.0", line
        return msg

    def close(self, timeout=30):
        """End its input; the rest of its answers, and its exit status."""
        self.p.stdin.close()
        rest = []
        while True:
            line = self.line(timeout)
            if line is None:
                break
            rest.append(json.loads(line))
        return rest, self.p.wait(scaled(timeout))


def text(msg):
    """The text of a tools/call result."""
    return msg["result"]["content"][0]["text"]
