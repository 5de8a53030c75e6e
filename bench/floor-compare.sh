#!/usr/bin/env bash
# Runs the stdio benchmark (`cargo bench --bench stdio`) with a second floor beside the rmcp
# one: a no-op MCP server on the official TypeScript SDK (`bench/noop-server.mjs`), measured
# in the same run (reads, calls in flight). Needs npm; installs Node 22 and the SDK (pinned)
# into a cache directory the first time.
#
#   bench/floor-compare.sh
set -euo pipefail

cd "$(dirname "$0")/.."
source bench/node-cache.sh
node_package @modelcontextprotocol/sdk 1.32.2
# The script imports the SDK from the cache's node_modules: it runs from there.
cp bench/noop-server.mjs "$CACHE/noop-server.mjs"
NODE="$(node_binary)"
GIMLET_BENCH_TS_FLOOR="$(printf '["%s", "%s"]' "$NODE" "$CACHE/noop-server.mjs")" \
  cargo bench --bench stdio -- "$@"
