#!/usr/bin/env bash
# Writes link/functions.order: the functions of the release binary a session runs (start-up,
# `initialize`, `tools/list`, then each built-in's everyday calls). build.rs hands the file to
# the linker (`--symbol-ordering-file`), which lays those functions out together: the kernel
# maps code 64 KiB around every page first run, so spread out they kept most of the binary's
# code resident (docs/performance.md, "Memory").
#
#   scripts/link-order.sh                  writes the file, and link/functions.order.stamp
#   scripts/link-order.sh --check          says whether the names can still be current (CI; no build)
#   scripts/link-order.sh --check-binary   says whether the release build still has its functions
#
# Symbol names carry hashes of the crates' build settings, and `cargo bench` builds the binary
# with the features the dev-dependencies add: the file lists the names of each build (the one
# `cargo build --release` and `cargo install` make, the benchmark's, and, where cargo-zigbuild
# is installed, the portable one the packages ship: `--target x86_64-unknown-linux-gnu.2.17`
# names the target, which changes the hashes again). Needs valgrind, nm and python3. Re-run it
# after large changes or dependency updates: names the file has and the binary lacks are
# skipped by the linker, and new functions land outside the ordered block.
set -euo pipefail

cd "$(dirname "$0")/.."

# What the names' hashes are made of (cargo's `-C metadata` of each crate): the compiler, every
# package of the resolved graph with its features and dependencies, and the profiles. One
# SHA-256; paths of the workspace's own packages left out, so a clone anywhere has the same.
build_stamp() {
  {
    rustc -vV
    cargo metadata --format-version 1 --locked --offline | python3 -c '
import json, re, sys
local = lambda s: re.sub(r"path\+file://[^#]*#", "path#", s)
for node in sorted(json.load(sys.stdin)["resolve"]["nodes"], key=lambda n: local(n["id"])):
    deps = sorted(local(d["pkg"]) + str(sorted(map(str, d["dep_kinds"]))) for d in node["deps"])
    print(local(node["id"]), sorted(node["features"]), deps)
'
    sed -n '/^\[profile/,/^\[[^p]/p' Cargo.toml
  } | sha256sum | cut -d' ' -f1
}

if [[ "${1:-}" == "--check" ]]; then
  # Symbol names change with the crates' build hashes (a dependency added or updated renames
  # every gimlet function): a stale file orders nothing of gimlet's, and the code a session runs
  # spreads over the binary again (3 MiB more resident at rest). The stamp records what those
  # hashes were made of when the file was written; any difference means the names may be gone.
  # (It errs towards "stale": a change to the graph that renames nothing still asks for a run.)
  if [[ "$(build_stamp)" != "$(cat link/functions.order.stamp 2>/dev/null)" ]]; then
    echo "link/functions.order is stale: the compiler, the dependency graph or a profile changed since it was written; run scripts/link-order.sh (needs valgrind) and commit both files" >&2
    exit 1
  fi
  echo "link/functions.order: written for this compiler, dependency graph and profiles"
  exit 0
fi

if [[ "${1:-}" == "--check-binary" ]]; then
  # The file names each gimlet function two or three times (the release build's, the
  # benchmark's and the portable build's name), so a current file has a third to a half of its
  # gimlet names in the release binary; a fifth is the floor.
  cargo build --release --locked -q
  present="$(nm --defined-only target/release/gimlet | awk 'NF == 3 { print $3 }' | sort -u)"
  named="$(grep gimlet link/functions.order | sort -u)"
  total="$(printf '%s\n' "$named" | grep -c . || true)"
  found="$(comm -12 <(printf '%s\n' "$named") <(printf '%s\n' "$present") | grep -c . || true)"
  echo "link/functions.order: $found of its $total gimlet functions are in the release binary"
  if (( total == 0 || found * 5 < total )); then
    echo "link/functions.order is stale: run scripts/link-order.sh (needs valgrind) and commit it" >&2
    exit 1
  fi
  exit 0
fi

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

profile() { # binary → the functions it ran, in the order callgrind lists them
  local binary="$1" run="$WORK/run"
  rm -rf "$run" && mkdir -p "$run"
  python3 scripts/link-order/session.py "$run" \
    valgrind --tool=callgrind --demangle=no --dump-instr=no --compress-strings=no \
    --compress-pos=no --callgrind-out-file="$run/callgrind.%p" \
    "$binary" serve --root "$run/root" 2>/dev/null
  nm --defined-only "$binary" | awk 'NF == 3 && $2 ~ /^[tTwW]$/ { print $3 }' > "$run/symbols"
  python3 - "$run/symbols" "$run"/callgrind.* <<'PY'
import re, sys
symbols = set(open(sys.argv[1]).read().split())
seen = {}
for out in sys.argv[2:]:  # one file per server process, in the order they ran
    for line in open(out, errors="replace"):
        if not line.startswith(("fn=", "cfn=")):
            continue
        name = line.split("=", 1)[1].strip()
        # `.1234`: a local the link-time optimiser renamed; the number changes every build.
        # Only Rust's functions and `main`: the portable build links a few of glibc 2.17's C
        # helpers (`fstat`, `__libc_csu_init`) into the binary.
        rust = name.startswith(("_ZN", "_R")) or name == "main"
        if name in symbols and rust and not re.search(r"\.\d+$", name):
            seen.setdefault(name, None)
sys.stdout.write("".join(f"{name}\n" for name in seen))
PY
}

cargo build --release --locked -q
cp target/release/gimlet "$WORK/gimlet-release"
cargo bench --bench stdio --locked --no-run -q 2>/dev/null
cp target/release/gimlet "$WORK/gimlet-bench"
builds=("$WORK/gimlet-release" "$WORK/gimlet-bench")
if command -v cargo-zigbuild > /dev/null; then
  cargo zigbuild --release --locked -q --bin gimlet --target x86_64-unknown-linux-gnu.2.17
  cp target/x86_64-unknown-linux-gnu/release/gimlet "$WORK/gimlet-portable"
  builds+=("$WORK/gimlet-portable")
else
  echo "cargo-zigbuild not found: the portable build's names are left out" >&2
fi
for binary in "${builds[@]}"; do profile "$binary"; done | awk '!seen[$0]++' > link/functions.order
build_stamp > link/functions.order.stamp
echo "link/functions.order: $(wc -l < link/functions.order) functions"
