#!/usr/bin/env bash
# Runs the stdio benchmark (`cargo bench --bench stdio`) and measures the reference MCP
# filesystem server (@modelcontextprotocol/server-filesystem, TypeScript) the same way on the
# same machine: cold start to tools/list, and CPU per small read (its `read_text_file`).
# Needs npm; installs Node 22 and the server (pinned) into a cache directory the first time.
#
#   bench/stdio-compare.sh
set -euo pipefail

cd "$(dirname "$0")/.."
source bench/node-cache.sh
SERVER_VERSION="2026.8.31"
node_package @modelcontextprotocol/server-filesystem "$SERVER_VERSION"
SERVER="$CACHE/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
NODE="$(node_binary)"

GIMLET_BENCH_OTHER="$(printf '{"command": ["%s", "%s", "{root}"], "call": {"name": "read_text_file", "arguments": {"path": "{root}/small.txt"}}}' "$NODE" "$SERVER")" \
  cargo bench --bench stdio
