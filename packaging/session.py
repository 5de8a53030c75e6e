"""One MCP session through an installed gimlet, as a host runs it (scripts/dist-test.sh).

    python3 packaging/session.py [--root DIR] [--root-as PATH] [--version V] -- COMMAND...

Makes DIR (a new temporary folder by default) with a file in it, starts COMMAND with `{root}`
replaced by PATH (default: DIR; another name when the server sees DIR elsewhere, as in a
chroot), and speaks MCP over its stdin and stdout: initialize (the server must say it is
gimlet, of version V when given), tools/list, a `read` of the file, an `echo` through `bash`;
then SIGTERM to the process it started (or `--stop`: see --help; on Windows stdin is closed),
which must end with exit code 0 and close stdout (so nothing it started is left holding it).
Prints one JSON line: the milliseconds from the start to the `tools/list` answer, how it was
stopped, and the exit code. Exits 1 with the reason on any failure.
"""

import argparse
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time

TIMEOUT = 120  # seconds for any one answer: the first start of npx or uvx may install


def fail(message, server=None):
    if server and server.poll() is None:
        server.kill()
    sys.exit(f"session: {message}")


class Session:
    def __init__(self, command, env):
        self.server = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.server.stdout, selectors.EVENT_READ)
        self.buffer = b""
        self.next_id = 0

    def line(self, deadline):
        """The next line the server writes, or None at end of output."""
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not self.selector.select(left):
                fail("no answer in time", self.server)
            chunk = os.read(self.server.stdout.fileno(), 1 << 16)
            if not chunk:
                return None
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line

    def send(self, message):
        self.server.stdin.write(json.dumps(message).encode() + b"\n")
        self.server.stdin.flush()

    def call(self, method, params):
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        deadline = time.monotonic() + TIMEOUT
        while True:
            line = self.line(deadline)
            if line is None:
                fail(f"the server closed its output during {method}", self.server)
            message = json.loads(line)
            if message.get("id") == self.next_id and "method" not in message:
                if "error" in message:
                    fail(f"{method} failed: {message['error']}", self.server)
                return message["result"]

    def tool(self, name, arguments):
        result = self.call("tools/call", {"name": name, "arguments": arguments})
        text = "".join(c.get("text", "") for c in result.get("content", []))
        if result.get("isError"):
            fail(f"{name} answered with an error: {text}", self.server)
        return text


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--root")
    parser.add_argument("--root-as")
    parser.add_argument("--version")
    parser.add_argument(
        "--stop", choices=["sigterm", "stdin", "npx"], default="sigterm",
        help="end the session with SIGTERM (exit code 0 expected), by closing stdin (0 "
        "expected), or as for npx: SIGTERM, which npm dies of without passing it on (its exit "
        "status is reported), then stdin closed as the host does, which must end the server",
    )
    parser.add_argument(
        "--no-bash", action="store_true",
        help="skip the bash call (a server under qemu-user finds the emulated root's bash)",
    )
    parser.add_argument("command", nargs="+")
    args = parser.parse_args()

    root = args.root or tempfile.mkdtemp(prefix="gimlet-session-")
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, "hello.txt"), "w") as f:
        f.write("first line\nsecond line, from the dist test\n")
    command = [part.replace("{root}", args.root_as or root) for part in args.command]

    started = time.monotonic()
    session = Session(command, dict(os.environ))
    info = session.call("initialize", {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "dist-test", "version": "1"},
    })
    server_info = info.get("serverInfo", {})
    if server_info.get("name") != "gimlet":
        fail(f"initialize: not gimlet: {server_info}", session.server)
    if args.version and server_info.get("version") != args.version:
        fail(f"initialize: version {server_info.get('version')}, expected {args.version}", session.server)
    session.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    tools = {tool["name"] for tool in session.call("tools/list", {})["tools"]}
    first_list_ms = (time.monotonic() - started) * 1000
    for needed in ("read", "edit", "bash"):
        if needed not in tools:
            fail(f"tools/list has no {needed}: {sorted(tools)}", session.server)

    text = session.tool("read", {"path": "hello.txt"})
    if "second line, from the dist test" not in text:
        fail(f"read did not show the file: {text!r}", session.server)
    text = "dist-42" if args.no_bash else session.tool("bash", {"command": "echo dist-$((6 * 7))"})
    if "dist-42" not in text:
        fail(f"bash did not run the command: {text!r}", session.server)

    stop = "stdin" if sys.platform == "win32" else args.stop  # no SIGTERM there
    if stop == "stdin":
        session.server.stdin.close()
    else:
        session.server.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 15
    if stop == "npx":
        try:
            code = session.server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            fail("npx still running 15 s after SIGTERM", session.server)
        session.server.stdin.close()
    while True:  # until every process holding stdout has ended
        left = deadline - time.monotonic()
        if left <= 0 or not session.selector.select(left):
            fail(f"something still holds the server's stdout 15 s after the {stop} stop", session.server)
        if not os.read(session.server.stdout.fileno(), 1 << 16):
            break
    try:
        code = session.server.wait(timeout=max(1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        fail(f"still running 15 s after the {stop} stop", session.server)
    if code != 0 and not (stop == "npx" and code == -signal.SIGTERM):
        fail(f"exit code {code} after the {stop} stop (expected 0)")
    print(json.dumps({"tools_list_ms": round(first_list_ms, 1), "stop": stop, "exit": code}))


if __name__ == "__main__":
    main()
