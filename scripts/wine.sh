#!/usr/bin/env bash
# Runs the integration suite (tests/all.rs, with the Windows session and attacks of
# tests/suite/windows.rs) as Windows programs under Wine, and prints a pass/fail summary.
#
# Needs: wine (Debian's `wine`, 8.x), gcc-mingw-w64-x86-64, `rustup target add x86_64-pc-windows-gnu`.
# Sets up, once, its own Wine prefix in ${XDG_CACHE_HOME:-$HOME/.cache}/gimlet-wine/prefix, with
# scripts/wine/bcryptprimitives.c built and installed in system32 (Wine 8 lacks ProcessPrng,
# which Rust's std calls). Extra arguments go to the test binary (a filter, --nocapture...).
set -euo pipefail

cd "$(dirname "$0")/.."
cache="${XDG_CACHE_HOME:-$HOME/.cache}/gimlet-wine"
export WINEPREFIX="$cache/prefix" WINEDEBUG=-all WINEARCH=win64
mkdir -p "$cache"

if [ ! -f "$WINEPREFIX/system.reg" ]; then
    echo "wine.sh: creating the Wine prefix (once)"
    wineboot --init >/dev/null 2>&1 || wine wineboot --init >/dev/null 2>&1
    wineserver --wait 2>/dev/null || true
fi
shim="$cache/bcryptprimitives.dll"
if [ ! -f "$shim" ] || [ scripts/wine/bcryptprimitives.c -nt "$shim" ]; then
    x86_64-w64-mingw32-gcc -O2 -shared -o "$shim" scripts/wine/bcryptprimitives.c -ladvapi32
fi
cmp -s "$shim" "$WINEPREFIX/drive_c/windows/system32/bcryptprimitives.dll" \
    || cp "$shim" "$WINEPREFIX/drive_c/windows/system32/bcryptprimitives.dll"
# The language server of the memory cap's test (tests/suite/windows.rs).
fake_lsp="$cache/fake_lsp_server.exe"
if [ ! -f "$fake_lsp" ] || [ scripts/wine/fake_lsp_server.c -nt "$fake_lsp" ]; then
    x86_64-w64-mingw32-gcc -O2 -o "$fake_lsp" scripts/wine/fake_lsp_server.c
fi
export GIMLET_WINE_FAKE_LSP="Z:${fake_lsp//\//\\}"

export CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER=wine
log="$(mktemp)"
# Links Windows does not report as links (Unix symlinks, seen through Wine as plain names):
# planted here, where a Windows test cannot make them (tests/suite/windows.rs).
links="$(mktemp -d)"
trap 'rm -f "$log"; rm -rf "$links"' EXIT
mkdir "$links/root" "$links/out"
printf 'TOP-SECRET-CONTENT' >"$links/out/secret.txt"
ln -s ../out "$links/root/dirlink"
ln -s ../out/secret.txt "$links/root/filelink"
ln -s "$links/out" "$links/root/abslink"
export GIMLET_WINE_UNIX_LINKS="Z:${links//\//\\}"
status=0
# Built first, so that the time limit is the run's alone: a test that hangs under Wine fails the
# run after 15 minutes instead of holding it (the whole run takes under two).
cargo test --locked --no-run --target x86_64-pc-windows-gnu --target-dir target/cross --test all
timeout 900 cargo test --locked --target x86_64-pc-windows-gnu --target-dir target/cross --test all -- "$@" \
    --skip checkpoints_watch 2>&1 | tee "$log" || status=$?
# The checkpoint watcher's tests run alone: with other tests' programs making and removing
# folders in the same Wine at the same time, Wine's recursive watch (one state for the whole
# prefix) at times reports nothing from inside a folder, and the tests fail for Wine's sake.
nocapture=()
for arg in "$@"; do [ "$arg" = --nocapture ] && nocapture=(--nocapture); done
timeout 300 cargo test --locked --target x86_64-pc-windows-gnu --target-dir target/cross --test all -- \
    checkpoints_watch --test-threads 1 "${nocapture[@]}" 2>&1 | tee -a "$log" || status=$?

echo
echo "== Windows session (tests/suite/windows.rs): tool | what | outcome"
grep -E '^\| ' "$log" || echo "(rows are printed with --nocapture)"
echo "== summary"
grep -E '^test .* \.\.\. (ok|FAILED|ignored)' "$log" | sed -E 's/.* \.\.\. //; s/,.*//' | sort | uniq -c
grep -E '^test .* \.\.\. FAILED' "$log" || true
grep -E '^test result' "$log" || true
exit "$status"
