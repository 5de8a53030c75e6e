#!/usr/bin/env python3
"""Replays the scripted calls against `gimlet serve` over stdio, as a bare MCP client, and saves
each CallToolResult: what gimlet itself returned, to compare with what a host forwarded.

  reference.py --gimlet BIN --root DIR --calls calls.json --out reference.json [--client-name N]
"""

import argparse
import json
import subprocess
import sys


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--gimlet", required=True)
    parser.add_argument("--root", required=True)
    parser.add_argument("--calls", required=True)
    parser.add_argument("--out", required=True)
    # gimlet sizes pages for some hosts (Codex): the reference names itself as the host does.
    parser.add_argument("--client-name", default="gimlet-hosts-reference")
    args = parser.parse_args()
    with open(args.calls, encoding="utf-8") as f:
        calls = json.load(f)["calls"]

    proc = subprocess.Popen(
        [args.gimlet, "serve", "--root", args.root],
        cwd=args.root,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        encoding="utf-8",
    )

    def send(message):
        proc.stdin.write(json.dumps(message) + "\n")
        proc.stdin.flush()

    def answer(request_id):
        while True:
            line = proc.stdout.readline()
            if not line:
                sys.exit(f"reference: gimlet closed stdout before answering request {request_id}")
            message = json.loads(line)
            if message.get("id") == request_id and "method" not in message:
                return message
            if "method" in message and "id" in message:
                # A request from the server (we declared no capabilities): refuse it.
                send({"jsonrpc": "2.0", "id": message["id"],
                      "error": {"code": -32601, "message": "not supported"}})

    send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": args.client_name, "version": "1"}}})
    init = answer(0)
    if "error" in init:
        sys.exit(f"reference: initialize failed: {init['error']}")
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    results = []
    for i, call in enumerate(calls, start=1):
        send({"jsonrpc": "2.0", "id": i, "method": "tools/call",
              "params": {"name": call["tool"], "arguments": call["args"]}})
        reply = answer(i)
        results.append({"label": call["label"], "result": reply.get("result"),
                        "error": reply.get("error")})
    proc.stdin.close()
    proc.wait(timeout=10)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"protocolVersion": init["result"].get("protocolVersion"), "results": results},
                  f, indent=1, ensure_ascii=False)


if __name__ == "__main__":
    main()
