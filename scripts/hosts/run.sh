#!/usr/bin/env bash
# One host run, inside a network namespace that has only loopback (scripts/hosts.sh starts it
# with `unshare -n`). Starts the model stub, configures gimlet in the host as the README says,
# runs the host non-interactively, then replays the same calls with a bare MCP client for the
# reference. Everything it makes is under DIR.
#
#   run.sh HOST DIR        HOST: claude | claude-http | codex | gemini
#
# From the environment: GIMLET (absolute path), HOSTS_BIN (the hosts' node_modules/.bin),
# HOSTS_NODE_BIN (a directory with the node to use), PYTHON (python3), HOST_TIMEOUT (seconds).
set -euo pipefail

host="$1"
dir="$2"
here="$(cd "$(dirname "$0")" && pwd)"
timeout_s="${HOST_TIMEOUT:-300}"
prompt="Run the gimlet hosts check: call the tools you are asked to call."

ip link set lo up
if ip -o link show | grep -qv ': lo:'; then
  echo "run.sh: this namespace has more than loopback; refusing to run" >&2
  exit 1
fi

mkdir -p "$dir"/{home,tmp,bin,project,reference,xdg/config,xdg/cache,xdg/data,xdg/state}
ln -sf "$GIMLET" "$dir/bin/gimlet"
"$PYTHON" "$here/plan.py" fixture "$dir/project"
"$PYTHON" "$here/plan.py" fixture "$dir/reference"
"$PYTHON" "$here/plan.py" calls "$dir/calls.json"

# A clean environment: nothing of the user's configuration, no keys, no proxies.
clean_env=(
  env -i
  HOME="$dir/home"
  PATH="$dir/bin:$HOSTS_NODE_BIN:$HOSTS_BIN:/usr/local/bin:/usr/bin:/bin"
  XDG_CONFIG_HOME="$dir/xdg/config"
  XDG_CACHE_HOME="$dir/xdg/cache"
  XDG_DATA_HOME="$dir/xdg/data"
  XDG_STATE_HOME="$dir/xdg/state"
  TMPDIR="$dir/tmp"
  LANG=C.UTF-8
  TERM=dumb
  NO_COLOR=1
)

"$PYTHON" "$here/stub.py" --plan "$dir/calls.json" --record "$dir/requests.jsonl" \
  --port-file "$dir/stub.port" 2>"$dir/stub.log" &
stub=$!
server=""
cleanup() {
  kill "$stub" 2>/dev/null || true
  if [[ -n "$server" ]]; then kill "$server" 2>/dev/null || true; fi
  wait 2>/dev/null || true
}
trap cleanup EXIT
setup_failed() {
  echo "run.sh: $1 failed:" >&2
  cat "$dir/setup.log" >&2
  exit 1
}

for _ in $(seq 100); do
  [[ -s "$dir/stub.port" ]] && break
  sleep 0.1
done
if [[ ! -s "$dir/stub.port" ]]; then
  echo "run.sh: the model stub did not start:" >&2
  cat "$dir/stub.log" >&2
  exit 1
fi
port="$(cat "$dir/stub.port")"
base="http://127.0.0.1:$port"

cd "$dir/project"
status=0
case "$host" in
  claude | claude-http)
    claude_env=(
      "${clean_env[@]}"
      ANTHROPIC_BASE_URL="$base"
      ANTHROPIC_API_KEY=sk-ant-stub
      DISABLE_TELEMETRY=1
      DISABLE_AUTOUPDATER=1
      DISABLE_ERROR_REPORTING=1
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1
    )
    if [[ "$host" == claude ]]; then
      # README, "Client configuration": claude mcp add gimlet -- gimlet serve --root "$PWD"
      "${claude_env[@]}" claude mcp add gimlet -- gimlet serve --root "$PWD" >"$dir/setup.log" 2>&1 ||
        setup_failed "claude mcp add"
    else
      token="hosts-$RANDOM$RANDOM$RANDOM"
      "${clean_env[@]}" gimlet serve --http 127.0.0.1:0 --root "$PWD" --auth-token "$token" \
        2>"$dir/gimlet-http.log" &
      server=$!
      url=""
      for _ in $(seq 100); do
        url="$(sed -n 's/^gimlet: serving MCP at //p' "$dir/gimlet-http.log" | head -n1)"
        [[ -n "$url" ]] && break
        sleep 0.1
      done
      if [[ -z "$url" ]]; then
        echo "run.sh: gimlet serve --http did not start:" >&2
        cat "$dir/gimlet-http.log" >&2
        exit 1
      fi
      # README, "Remote use": claude mcp add --transport http gimlet URL --header "Authorization: Bearer T"
      "${claude_env[@]}" claude mcp add --transport http gimlet "$url" \
        --header "Authorization: Bearer $token" >"$dir/setup.log" 2>&1 ||
        setup_failed "claude mcp add --transport http"
    fi
    "${claude_env[@]}" claude mcp list >>"$dir/setup.log" 2>&1 || true
    "${claude_env[@]}" timeout -k 10 "$timeout_s" claude -p "$prompt" --allowedTools mcp__gimlet \
      --output-format stream-json --verbose >"$dir/host.out" 2>"$dir/host.err" || status=$?
    ;;
  codex)
    mkdir -p "$dir/home/.codex"
    cat >"$dir/home/.codex/config.toml" <<EOF
model = "gpt-stub"
model_provider = "stub"

[model_providers.stub]
name = "stub"
base_url = "$base/v1"
env_key = "STUB_API_KEY"
wire_api = "responses"
EOF
    codex_env=("${clean_env[@]}" CODEX_HOME="$dir/home/.codex" STUB_API_KEY=stub)
    # README: Codex reads ~/.codex/config.toml ([mcp_servers.gimlet] command, args);
    # `codex mcp add` writes that table.
    "${codex_env[@]}" codex mcp add gimlet -- gimlet serve --root "$PWD" >"$dir/setup.log" 2>&1 ||
      setup_failed "codex mcp add"
    "${codex_env[@]}" codex mcp list >>"$dir/setup.log" 2>&1 || true
    "${codex_env[@]}" timeout -k 10 "$timeout_s" codex exec --skip-git-repo-check \
      -c 'approval_policy="never"' \
      -c 'mcp_servers.gimlet.default_tools_approval_mode="approve"' \
      "$prompt" >"$dir/host.out" 2>"$dir/host.err" </dev/null || status=$?
    ;;
  gemini)
    mkdir -p "$dir/home/.gemini"
    cat >"$dir/home/.gemini/settings.json" <<EOF
{"security": {"auth": {"selectedType": "gemini-api-key"}},
 "privacy": {"usageStatisticsEnabled": false},
 "general": {"disableAutoUpdate": true, "disableUpdateNag": true}}
EOF
    "$PYTHON" -c 'import json,sys; print(json.dumps({sys.argv[1]: "TRUST_FOLDER"}))' "$PWD" \
      >"$dir/home/.gemini/trustedFolders.json"
    gemini_env=(
      "${clean_env[@]}"
      GEMINI_API_KEY=stub
      GOOGLE_GEMINI_BASE_URL="$base"
      GEMINI_CLI_NO_RELAUNCH=1
    )
    # README: any other client takes the command and args of mcp.json.example.
    "${gemini_env[@]}" gemini mcp add -s user gimlet gimlet serve --root "$PWD" >"$dir/setup.log" 2>&1 ||
      setup_failed "gemini mcp add"
    "${gemini_env[@]}" gemini mcp list >>"$dir/setup.log" 2>&1 || true
    "${gemini_env[@]}" timeout -k 10 "$timeout_s" gemini -p "$prompt" --yolo -o json -m gemini-2.5-pro \
      >"$dir/host.out" 2>"$dir/host.err" </dev/null || status=$?
    ;;
  *)
    echo "run.sh: unknown host $host" >&2
    exit 2
    ;;
esac
echo "$status" >"$dir/host.status"

# The reference: the same calls, straight to gimlet over stdio, with the same environment (the
# spill files land in the same place, so the truncation notice has the same length).
# gimlet sizes its pages for Codex (see crates/gimlet-mcp/src/hosts.rs): the reference names
# itself as the host does.
client_name=gimlet-hosts-reference
[[ "$host" == codex ]] && client_name=codex-mcp-client
if ! "${clean_env[@]}" "$PYTHON" "$here/reference.py" --gimlet "$GIMLET" --root "$dir/reference" \
  --calls "$dir/calls.json" --out "$dir/reference.json" --client-name "$client_name" \
  2>"$dir/reference.log"; then
  echo "run.sh: the reference run (gimlet over stdio, no host) failed:" >&2
  cat "$dir/reference.log" >&2
  exit 1
fi
