#!/usr/bin/env bash
# Installs, where missing, what the macOS and Windows checks need on a fresh Debian machine:
#   - the Rust targets (rustup);
#   - Debian's mingw-w64 (the Windows GNU linker, and the C compiler ring needs) and Wine 8
#     (runs the Windows build: scripts/wine.sh);
#   - zig and cargo-zigbuild from PyPI, in a virtualenv kept in the cache (zig compiles ring's
#     C for the Apple targets; no Apple SDK is needed to check them).
# Prints the virtualenv's bin folder, for the caller to put on PATH.
set -euo pipefail
cache="${XDG_CACHE_HOME:-$HOME/.cache}/gimlet-cross"
ZIGLANG=0.17.1
CARGO_ZIGBUILD=0.24.1

rustup target add aarch64-apple-darwin x86_64-apple-darwin x86_64-pc-windows-gnu >&2

need=()
command -v x86_64-w64-mingw32-gcc > /dev/null || need+=(gcc-mingw-w64-x86-64)
command -v wine > /dev/null || need+=(wine wine64)
if ((${#need[@]})); then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  echo "installing ${need[*]} (apt)" >&2
  $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
fi

if command -v cargo-zigbuild > /dev/null && command -v python3 > /dev/null \
  && python3 -m ziglang version > /dev/null 2>&1; then
  dirname "$(command -v cargo-zigbuild)"
  exit 0
fi
stamp="$cache/.installed-$ZIGLANG-$CARGO_ZIGBUILD"
if [ ! -e "$stamp" ]; then
  python3 -m venv "$cache/venv" >&2
  "$cache/venv/bin/pip" install -q --disable-pip-version-check \
    "ziglang==$ZIGLANG" "cargo-zigbuild==$CARGO_ZIGBUILD" >&2
  touch "$stamp"
fi
echo "$cache/venv/bin"
