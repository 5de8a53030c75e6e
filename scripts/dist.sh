#!/usr/bin/env bash
# Builds what users install into dist/: per platform a PyPI wheel (gimlet-mcp) and an npm
# platform package, then the npm launcher (gimlet), one .mcpb bundle for Claude Desktop,
# server.json for the MCP Registry and SHA256SUMS. Each platform's binary is compiled once
# and every artifact is packed from it (packaging/dist.py).
#
#   scripts/dist.sh                        every platform this machine can build, then finish
#   scripts/dist.sh --targets linux-x64    only these (comma-separated), then finish
#   scripts/dist.sh --targets X --no-finish   build and pack X only (a release job per runner)
#   scripts/dist.sh --finish               only the last step, over what dist/ holds
#
# Platforms: linux-x64 and linux-arm64 (glibc 2.17 and newer: zig links against glibc 2.17's
# symbols, `cargo zigbuild --target <triple>.2.17`), darwin-universal (arm64 + x86_64 in one
# binary: on macOS built natively and joined with lipo, elsewhere `cargo zigbuild --target
# universal2-apple-darwin`), win32-x64 (on Windows MSVC; elsewhere x86_64-pc-windows-gnu with
# MinGW, for trying it under Wine). A platform that cannot be built here (a missing toolchain,
# gimlet not yet ported to that OS) is reported and skipped; the script fails only when a
# platform it set out to build does not build, or packing fails.
#
# Needs: cargo; for Linux targets cargo-zigbuild and zig (`pip install cargo-zigbuild ziglang`);
# python3; npm (the npm packages and the .mcpb tool, installed into ~/.cache/gimlet-dist).
set -euo pipefail
cd "$(dirname "$0")/.."
source packaging/tools.sh
PYTHON="$(command -v python3 || command -v python)"

OUT=dist
ALL="linux-x64,linux-arm64,darwin-universal,win32-x64"
targets="" build=1 finish=1
while (( $# )); do
  case "$1" in
    --targets) targets="$2"; shift 2 ;;
    --targets=*) targets="${1#*=}"; shift ;;
    --no-finish) finish=0; shift ;;
    --finish) build=0; shift ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "dist.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
requested="${targets:-$ALL}"

host_os="$(uname -s)"
TARGET_DIR="${CARGO_TARGET_DIR:-target}"
skipped=() failed=() built=()

say() { printf '==> %s\n' "$*" >&2; }
skip() { say "$1: skipped: $2"; skipped+=("$1"); }

# The Rust target(s) a platform is compiled for here, or nothing when it cannot be.
rust_targets() {
  case "$1" in
    linux-x64) echo x86_64-unknown-linux-gnu ;;
    linux-arm64) echo aarch64-unknown-linux-gnu ;;
    darwin-universal) echo aarch64-apple-darwin x86_64-apple-darwin ;;
    win32-x64)
      if [[ "$host_os" == MINGW* || "$host_os" == MSYS* || "$host_os" == CYGWIN* ]]; then
        echo x86_64-pc-windows-msvc
      else
        echo x86_64-pc-windows-gnu
      fi ;;
    *) return 1 ;;
  esac
}

# Why this platform cannot be built on this machine, or nothing when it can.
unbuildable() {
  local platform="$1" target installed
  installed="$(rustup target list --installed 2>/dev/null || true)"
  for target in $(rust_targets "$platform"); do
    if [[ -n "$installed" ]] && ! grep -qx "$target" <<< "$installed"; then
      echo "the Rust target $target is not installed (rustup target add $target)"; return
    fi
    # gimlet-tools depends on Linux-only crates for every OS until the macOS/Windows port
    # (issue 37) moves them under cfg(target_os = "linux"); until then the build stops there.
    if [[ "$target" != *linux* ]] && cargo tree --locked --offline --target "$target" \
        -e normal --prefix none 2>/dev/null | grep -qE '^(landlock|seccompiler) '; then
      echo "gimlet does not build for $target yet: it depends on Linux-only crates (landlock, seccompiler) on every OS (the port is issue 37)"
      return
    fi
  done
  case "$platform" in
    linux-*)
      [[ "$host_os" == Linux ]] || { echo "Linux builds are made on Linux"; return; }
      command -v cargo-zigbuild > /dev/null || { echo "needs cargo-zigbuild (pip install cargo-zigbuild ziglang)"; return; }
      ;;
    darwin-universal)
      if [[ "$host_os" != Darwin ]]; then
        command -v cargo-zigbuild > /dev/null || { echo "needs macOS, or cargo-zigbuild to cross-compile"; return; }
      fi ;;
    win32-x64)
      if [[ "$host_os" == Linux ]]; then
        command -v x86_64-w64-mingw32-gcc > /dev/null || { echo "needs MinGW (apt-get install gcc-mingw-w64-x86-64)"; return; }
      fi ;;
  esac
}

# Builds a platform's release binary (stripped); prints its path. (It runs as the condition
# of an `if`, where `set -e` does not apply: every step says `|| return`.)
build_binary() {
  local platform="$1" work="target/dist/$1" target
  mkdir -p "$work" || return
  case "$platform" in
    linux-x64 | linux-arm64)
      target="$(rust_targets "$platform")"
      cargo zigbuild --release --locked --bin gimlet --target "$target.2.17" >&2 || return
      strip_elf "$TARGET_DIR/$target/release/gimlet" "$work/gimlet" || return
      check_glibc "$work/gimlet" || return
      ;;
    darwin-universal)
      if [[ "$host_os" == Darwin ]]; then
        cargo build --release --locked --bin gimlet --target aarch64-apple-darwin >&2 || return
        cargo build --release --locked --bin gimlet --target x86_64-apple-darwin >&2 || return
        lipo -create -output "$work/gimlet" "$TARGET_DIR/aarch64-apple-darwin/release/gimlet" \
          "$TARGET_DIR/x86_64-apple-darwin/release/gimlet" || return
        strip -x "$work/gimlet" || return
      else
        cargo zigbuild --release --locked --bin gimlet --target universal2-apple-darwin \
          2>&1 | tee "$work/build.log" >&2
        (( PIPESTATUS[0] == 0 )) || return
        cp "$TARGET_DIR/universal2-apple-darwin/release/gimlet" "$work/gimlet" || return
      fi ;;
    win32-x64)
      target="$(rust_targets "$platform")"
      cargo build --release --locked --bin gimlet --target "$target" >&2 || return
      cp "$TARGET_DIR/$target/release/gimlet.exe" "$work/gimlet.exe" || return
      if [[ "$target" == *gnu ]]; then x86_64-w64-mingw32-strip "$work/gimlet.exe" || return; fi
      echo "$work/gimlet.exe"
      return ;;
  esac
  echo "$work/gimlet"
}

# Copies an ELF binary without its symbol table: with the first stripper that reads its
# architecture (zig's objcopy cannot strip these yet; GNU strip reads only the machine's own;
# Debian's binutils-aarch64-linux-gnu has one for arm64).
strip_elf() {
  rm -f "$2"
  if zig_run objcopy --strip-all "$1" "$2" 2> /dev/null; then return 0; fi
  local tool
  for tool in llvm-strip aarch64-linux-gnu-strip strip; do
    command -v "$tool" > /dev/null || continue
    rm -f "$2"
    if "$tool" --strip-all -o "$2" "$1" 2> /dev/null; then
      echo "stripped with $tool" >&2
      return 0
    fi
  done
  echo "no stripper here reads $1" >&2
  return 1
}

# Fails when an ELF binary asks for a glibc symbol version newer than 2.17 (readelf reads
# every architecture's version needs).
check_glibc() {
  local newest
  newest="$(readelf -V --wide "$1" | grep -o 'GLIBC_2\.[0-9.]*' | sort -uV | tail -n1)"
  echo "$1: newest glibc symbol version $newest" >&2
  if [[ "$(printf '%s\n' "$newest" GLIBC_2.17 | sort -V | tail -n1)" != GLIBC_2.17 ]]; then
    echo "$1 needs a glibc newer than 2.17 ($newest)" >&2
    return 1
  fi
}

if (( build )); then
  IFS=, read -ra platforms <<< "$requested"
  for platform in "${platforms[@]}"; do
    if ! rust_targets "$platform" > /dev/null; then
      say "$platform: unknown platform (one of $ALL)"; failed+=("$platform"); continue
    fi
    reason="$(unbuildable "$platform")"
    if [[ -n "$reason" ]]; then skip "$platform" "$reason"; continue; fi
    say "$platform: building"
    if ! binary="$(build_binary "$platform")"; then
      # Cross-linking for macOS needs the SDK's frameworks and libraries (SDKROOT), which a
      # Linux machine rarely has: that is this machine's limit, not a failure of the build.
      if [[ "$platform" == darwin-* && "$host_os" != Darwin ]] \
          && grep -qiE 'framework|SDKROOT|libSystem|unable to find (library|dynamic)' "target/dist/$platform/build.log" 2> /dev/null; then
        skip "$platform" "linking for macOS needs the macOS SDK (set SDKROOT), which this machine lacks; the release builds it on a macOS runner"
        continue
      fi
      say "$platform: FAILED to build"; failed+=("$platform"); continue
    fi
    say "$platform: packing $binary ($(du -h "$binary" | cut -f1))"
    if ! "$PYTHON" packaging/dist.py platform "$OUT" "$platform" "$binary"; then
      say "$platform: FAILED to pack"; failed+=("$platform"); continue
    fi
    built+=("$platform")
  done
fi

if (( finish )) && (( ${#failed[@]} == 0 )); then
  say "the npm launcher, the .mcpb bundle, server.json, SHA256SUMS"
  dist_tools
  "$PYTHON" packaging/dist.py finish "$OUT" "$DIST_TOOLS/node_modules/.bin/mcpb"
  ls -l "$OUT" >&2
fi

say "built: ${built[*]:-none}; skipped: ${skipped[*]:-none}; failed: ${failed[*]:-none}"
(( ${#failed[@]} == 0 ))
