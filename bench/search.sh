#!/usr/bin/env bash
# Compares gimlet's `grep` and `glob` with the `rg` command line on a large real tree, in one run:
# wall time (hyperfine, warm cache) and peak memory (GNU time). Not part of CI.
#
#   bench/search.sh [TREE]    (default: the crate sources in ~/.cargo/registry/src)
set -euo pipefail
cd "$(dirname "$0")/.."

TREE=${1:-$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/ 2>/dev/null | head -n 1)}
if [ -z "$TREE" ] || [ ! -d "$TREE" ]; then
  echo "no tree to search: pass a directory (after a build, ~/.cargo/registry/src has one)" >&2
  exit 2
fi
need() {
  command -v "$1" >/dev/null && return
  if command -v apt-get >/dev/null; then apt-get install -y "$2" >/dev/null; else cargo install --locked "$2"; fi
}
need rg ripgrep
need hyperfine hyperfine
[ -x /usr/bin/time ] || apt-get install -y time >/dev/null

cargo build --release --quiet
GIMLET="$PWD/target/release/gimlet"
XDG_DATA_HOME=$(mktemp -d)
export XDG_DATA_HOME
trap 'rm -rf "$XDG_DATA_HOME"' EXIT

files=$(rg --files "$TREE" | wc -l)
size=$(du -sh "$TREE" | cut -f1)
echo "tree: $TREE ($files files, $size); $(rg --version | head -n 1); $(nproc) cores"
echo

# name | gimlet command | rg command
cases=(
  "rare literal (PhantomPinned)|$GIMLET --root $TREE call grep '{\"pattern\":\"PhantomPinned\",\"output_mode\":\"content\",\"head_limit\":0}'|rg -n PhantomPinned $TREE"
  "common literal (fn )|$GIMLET --root $TREE call grep '{\"pattern\":\"fn \",\"output_mode\":\"content\",\"head_limit\":0}'|rg -n 'fn ' $TREE"
  "regex with a class ([A-Z][a-z]+Error\\\\b)|$GIMLET --root $TREE call grep '{\"pattern\":\"[A-Z][a-z]+Error\\\\\\\\b\",\"output_mode\":\"content\",\"head_limit\":0}'|rg -n '[A-Z][a-z]+Error\\b' $TREE"
  "glob **/*.rs|$GIMLET --root $TREE call glob '{\"pattern\":\"**/*.rs\",\"limit\":100000}'|rg --files -g '*.rs' $TREE"
)

peak_kib() { /usr/bin/time -f '%M' bash -c "$1 >/dev/null" 2>&1 >/dev/null | tail -n 1; }

echo "| case | gimlet | rg | time ratio | gimlet peak | rg peak | memory ratio |"
echo "|---|---|---|---|---|---|---|"
for case in "${cases[@]}"; do
  IFS='|' read -r name gimlet rg <<<"$case"
  json=$(mktemp)
  hyperfine --style none --warmup 2 --runs 10 --prepare "rm -rf $XDG_DATA_HOME/gimlet" --export-json "$json" "$gimlet" "$rg" >/dev/null
  read -r g r < <(python3 -c "import json,sys; d=json.load(open('$json'))['results']; print(d[0]['median'], d[1]['median'])")
  rm -f "$json"
  gm=$(peak_kib "$gimlet"); rm_=$(peak_kib "$rg")
  python3 - "$name" "$g" "$r" "$gm" "$rm_" <<'PY'
import sys
name, g, r, gm, rm = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
print(f"| {name} | {g*1000:.0f} ms | {r*1000:.0f} ms | {g/r:.2f}x | {gm/1024:.1f} MiB | {rm/1024:.1f} MiB | {gm/rm:.2f}x |")
PY
done
