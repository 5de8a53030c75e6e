"""One everyday session over stdio, for scripts/link-order.sh: start-up, `initialize`,
`tools/list`, then a few rounds of the calls hosts make most (read by absolute and relative
path, glob and grep over a tree, grep in each mode, ls, edit, write, bash, todo_write), and an
error; then a second server whose output limits are raised, reading a 2 MiB file (the answer
streamed while it is encoded).

    python3 session.py WORK_DIR COMMAND...   (COMMAND runs `gimlet serve --root WORK_DIR/root`)
"""

import json
import os
import subprocess
import sys

work, command = sys.argv[1], sys.argv[2:]
root = os.path.join(work, "root")
os.makedirs(os.path.join(root, "src"))
with open(os.path.join(root, "src", "lib.rs"), "w") as f:
    f.writelines(f"pub fn f{i}(x: u32) -> u32 {{ x + {i} }} // line {i}\n" for i in range(200))
with open(os.path.join(root, "notes.txt"), "w") as f:
    f.write("hello world\n" * 3000)

for d in range(20):
    os.makedirs(os.path.join(root, "tree", f"dir{d}"))
    for n in range(20):
        with open(os.path.join(root, "tree", f"dir{d}", f"file{n}.rs"), "w") as f:
            f.writelines(f"pub const C{i}: u32 = {i}; // item {i} of {n}\n" for i in range(100))
with open(os.path.join(root, "big.txt"), "w") as f:
    f.write("the quick brown fox jumps over the lazy dog, again and again\n" * 35000)
limits = os.path.join(work, "limits.toml")
with open(limits, "w") as f:
    f.write("[output]\nmax_lines = 1000000\nmax_bytes = 67108864\n")

data = os.path.join(work, "data")
env = {**os.environ, "XDG_DATA_HOME": data, "XDG_CONFIG_HOME": data}
env.pop("RUST_LOG", None)
count = 0


def start(arguments):
    global server
    server = subprocess.Popen(arguments, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    call("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                        "clientInfo": {"name": "claude-code", "version": "2"}})
    server.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    server.stdin.flush()
    call("tools/list")


def stop():
    server.stdin.close()
    server.wait()


def call(method, params=None):
    global count
    count += 1
    message = {"jsonrpc": "2.0", "id": count, "method": method}
    if params is not None:
        message["params"] = params
    server.stdin.write((json.dumps(message) + "\n").encode())
    server.stdin.flush()
    answer = json.loads(server.stdout.readline())
    if "error" in answer:
        sys.exit(f"{method}: {answer['error']}")
    return answer


def tool(name, arguments):
    return call("tools/call", {"name": name, "arguments": arguments})


start(command)
lines = "hello world\n" * 2999
for _ in range(3):
    tool("read", {"path": os.path.join(root, "src", "lib.rs")})
    tool("read", {"path": "src/lib.rs", "offset": 10, "limit": 20})
    tool("glob", {"pattern": "**/*.rs"})
    tool("grep", {"pattern": "line 1[0-9]", "output_mode": "content"})
    tool("grep", {"pattern": "hello"})
    tool("grep", {"pattern": "fn", "output_mode": "count"})
    tool("glob", {"pattern": "tree/**/*.rs"})
    tool("grep", {"pattern": "item 7 of", "path": "tree", "output_mode": "content"})
    tool("ls", {"path": root})
    tool("read", {"path": os.path.join(root, "notes.txt")})
    tool("edit", {"path": os.path.join(root, "notes.txt"),
                  "old_string": lines + "hello world", "new_string": lines + "hello there"})
    tool("edit", {"path": os.path.join(root, "notes.txt"),
                  "old_string": "hello there", "new_string": "hello world"})
    tool("write", {"path": os.path.join(root, "new.txt"), "content": "x\n"})
    tool("bash", {"command": "echo hello"})
    tool("todo_write", {"todos": [{"content": "a", "status": "pending", "activeForm": "a"}]})
    os.remove(os.path.join(root, "new.txt"))
tool("read", {"path": "missing.txt"})
stop()

# `serve` comes last in the command; the config flag goes before it.
at = command.index("serve")
start(command[:at] + ["--config", limits] + command[at:])
for _ in range(2):
    tool("read", {"path": "big.txt", "limit": 1000000})
stop()
