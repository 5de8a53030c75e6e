# shellcheck shell=bash
# Sourced by scripts/dist.sh and scripts/dist-test.sh: the tools they install and share.

# Node tools (the .mcpb CLI, and verdaccio, a throwaway npm registry for the tests), pinned and
# installed once into a cache outside the repository. (verdaccio 6 needs Node 22; 5.33 runs
# on the Node 20 this machine has.)
DIST_CACHE="${GIMLET_DIST_CACHE:-$HOME/.cache/gimlet-dist}"
DIST_TOOLS="$DIST_CACHE/node"

dist_tools() {
  if [[ -x "$DIST_TOOLS/node_modules/.bin/mcpb" && -x "$DIST_TOOLS/node_modules/.bin/verdaccio" ]]; then
    return
  fi
  mkdir -p "$DIST_TOOLS"
  # verdaccio-audit asks for node-fetch by a dist-tag ("cjs") that not every registry mirror
  # carries; 2.7.0 is the version that tag names.
  cat > "$DIST_TOOLS/package.json" <<'JSON'
{
  "private": true,
  "dependencies": { "@anthropic-ai/mcpb": "2.1.2", "verdaccio": "5.33.0" },
  "overrides": { "node-fetch": "2.7.0" }
}
JSON
  (cd "$DIST_TOOLS" && npm install --no-audit --no-fund --loglevel=error >&2)
}

# zig, from PATH or from the `ziglang` Python package that cargo-zigbuild also finds.
zig_run() {
  if command -v zig > /dev/null; then zig "$@"; else python3 -m ziglang "$@"; fi
}
