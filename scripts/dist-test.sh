#!/usr/bin/env bash
# Installs what scripts/dist.sh put in dist/ as users would, offline, each into an empty HOME,
# and runs an MCP session through each (packaging/session.py: initialize, tools/list, a read, a
# bash call, then SIGTERM, which must end it with exit code 0; npx: see below):
#   - the wheel: `uvx --offline --find-links dist gimlet-mcp`, then `uv tool install` (its
#     commands are links in ~/.local/bin: both `gimlet` and `gimlet-mcp` must work through them);
#   - the npm packages, published to a throwaway verdaccio on loopback (no uplinks), run with
#     `npx -y --registry ...`;
#   - the .mcpb: validated, unpacked, its command resolved by @anthropic-ai/mcpb's own
#     getMcpConfigForManifest (as Claude Desktop does) and started;
#   - server.json validated against the MCP Registry's schema; its name, npm's mcpName, the
#     README's and the wheel's `mcp-name:` agree, and every version is the workspace's;
#   - the Linux x86_64 binary: nothing in `objdump -T` newer than GLIBC_2.17, and a session in a
#     Debian 11 root (glibc 2.31; debootstrap, cached in ~/.cache/gimlet-dist) run with chroot.
# Prints the figures: artifact sizes and the time from an empty cache to the first tools/list.
#
#   scripts/dist-test.sh            (after scripts/dist.sh; needs uv, npm, python3, objdump;
#                                   root and debootstrap for the Debian 11 part, else skipped)
set -euo pipefail
cd "$(dirname "$0")/.."
source packaging/tools.sh
REPO="$PWD"
DIST="${GIMLET_DIST_DIR:-$REPO/dist}"  # another folder for trying a build elsewhere
VERSION="$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)"
SCHEMA="$REPO/tests/data/mcp-registry-server.schema.2025-12-11.json"

WORK="$(mktemp -d)"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2> /dev/null || true; done
  if mountpoint -q "$DIST_CACHE/bullseye/proc" 2> /dev/null; then umount "$DIST_CACHE/bullseye/proc"; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

step() { printf '\n==> %s\n' "$*"; }
figures=()
session() { # LABEL -- COMMAND...: a session; keeps its time to the first tools/list
  local label="$1" result
  shift
  result="$(python3 "$REPO/packaging/session.py" --version "$VERSION" "$@")"
  echo "$label: $result"
  figures+=("$label: $(sed 's/.*"tools_list_ms": \([0-9.]*\).*/\1/' <<< "$result") ms to the first tools/list")
}
fresh_home() { # a new empty HOME (and caches in it) for the next install
  export HOME="$WORK/home-$1"
  mkdir -p "$HOME"
  export XDG_CACHE_HOME="$HOME/.cache" XDG_DATA_HOME="$HOME/.local/share" \
    XDG_CONFIG_HOME="$HOME/.config" UV_CACHE_DIR="$HOME/.cache/uv" \
    UV_TOOL_DIR="$HOME/.local/share/uv/tools" UV_TOOL_BIN_DIR="$HOME/.local/bin" \
    npm_config_cache="$HOME/.npm" npm_config_userconfig="$HOME/.npmrc"
  unset UV_PYTHON_INSTALL_DIR
}

wheel="$(ls "$DIST"/gimlet_mcp-"$VERSION"-py3-none-manylinux_2_17_x86_64*.whl 2> /dev/null | head -n1 || true)"
if [[ -z "$wheel" ]]; then
  echo "dist-test.sh: no Linux x86_64 wheel in dist/: run scripts/dist.sh first" >&2
  exit 1
fi
dist_tools
MCPB="$DIST_TOOLS/node_modules/.bin/mcpb"
REAL_HOME="$HOME"

step "server.json, names and versions"
python3 - "$DIST/server.json" "$REPO/server.json" "$SCHEMA" "$VERSION" "$wheel" "$DIST/npm/gimlet/package.json" <<'PY'
import json, re, sys, zipfile
built, committed, schema, version, wheel, npm = sys.argv[1:]
try:
    import jsonschema
except ImportError:
    jsonschema = None
name = json.load(open(committed))["name"]
for path in (committed, built):
    server = json.load(open(path))
    if jsonschema:
        validator = jsonschema.Draft7Validator(json.load(open(schema)), format_checker=jsonschema.FormatChecker())
        errors = [f"{'/'.join(map(str, e.path))}: {e.message}" for e in validator.iter_errors(server)]
        assert not errors, f"{path}: {errors}"
    assert server["name"] == name and server["version"] == version, path
    assert all(p["version"] == version for p in server["packages"]), path
kinds = sorted(p["registryType"] for p in json.load(open(built))["packages"])
assert kinds == ["mcpb", "npm", "pypi"], kinds
readme = open("README.md").read()
assert f"mcp-name: {name}" in readme, "README has no mcp-name line"
with zipfile.ZipFile(wheel) as archive:
    metadata = next(archive.read(n).decode() for n in archive.namelist() if n.endswith("/METADATA"))
assert f"mcp-name: {name}" in metadata and f"\nVersion: {version}\n" in metadata
package = json.load(open(npm))
assert package["mcpName"] == name and package["version"] == version
assert all(v == version for v in package["optionalDependencies"].values())
print(f"{name} {version}: server.json valid{'' if jsonschema else ' (jsonschema not installed: schema not checked)'}, npm, PyPI and README agree")
PY

step "uvx, offline, from an empty cache"
fresh_home uvx
session "uvx (empty cache)" -- uvx --offline --find-links "$DIST" gimlet-mcp serve --root '{root}'
session "uvx (cached)" -- uvx --offline --find-links "$DIST" gimlet-mcp serve --root '{root}'

step "uv tool install, offline; the commands are links in ~/.local/bin"
fresh_home uv-tool
uv tool install --offline --find-links "$DIST" gimlet-mcp
ls -l "$UV_TOOL_BIN_DIR"
[[ -L "$UV_TOOL_BIN_DIR/gimlet-mcp" ]] || echo "(gimlet-mcp is not a link here: the alias is tested as a copy)"
session "uv tool: gimlet" -- "$UV_TOOL_BIN_DIR/gimlet" serve --root '{root}'
session "uv tool: gimlet-mcp" -- "$UV_TOOL_BIN_DIR/gimlet-mcp" serve --root '{root}'
mkdir -p "$WORK/elsewhere" && ln -s "$UV_TOOL_BIN_DIR/gimlet-mcp" "$WORK/elsewhere/gm"
session "uv tool: a link to the gimlet-mcp link" -- "$WORK/elsewhere/gm" serve --root '{root}'

step "npm: verdaccio on loopback (no uplinks), publish, npx from an empty cache"
fresh_home npm
REGISTRY_DIR="$WORK/registry"
mkdir -p "$REGISTRY_DIR"
cat > "$REGISTRY_DIR/config.yaml" <<EOF
storage: $REGISTRY_DIR/storage
auth: { htpasswd: { file: $REGISTRY_DIR/htpasswd, max_users: -1 } }
uplinks: {}
packages: { '**': { access: \$all, publish: \$all } }
log: { type: stdout, format: pretty, level: warn }
max_body_size: 200mb
EOF
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
REGISTRY="http://127.0.0.1:$port/"
"$DIST_TOOLS/node_modules/.bin/verdaccio" --config "$REGISTRY_DIR/config.yaml" \
  --listen "127.0.0.1:$port" > "$REGISTRY_DIR/log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do curl -sf "${REGISTRY}-/ping" > /dev/null && break; sleep 0.1; done
# verdaccio lets anyone publish here, but npm will not publish without a token to send.
echo "//127.0.0.1:$port/:_authToken=dist-test" > "$HOME/.npmrc"
for tarball in "$DIST"/gimlet-mcp-*-"$VERSION".tgz "$DIST/gimlet-$VERSION.tgz"; do
  npm publish --registry "$REGISTRY" "$tarball" --loglevel=warn
done
# Hosts stop a server by closing its stdin first (the MCP spec's order), then SIGTERM. npm 11's
# `npm exec` dies of SIGTERM without passing it on: the launcher and gimlet then end when the
# host closes stdin (`--stop npx` checks that nothing is left after that).
session "npx (empty cache)" --stop stdin -- npx -y --registry "$REGISTRY" gimlet serve --root '{root}'
session "npx (cached)" --stop npx -- npx -y --registry "$REGISTRY" gimlet serve --root '{root}'

step "the .mcpb: validate, unpack, start as Claude Desktop does"
fresh_home mcpb
bundle="$DIST/gimlet-$VERSION.mcpb"
"$MCPB" validate "$DIST/mcpb/manifest.json"
"$MCPB" unpack "$bundle" "$WORK/bundle"
"$MCPB" info "$bundle" | head -n 20 || true
mkdir -p "$WORK/bundle-root"
launch="$(cd "$DIST_TOOLS" && node --input-type=module - "$WORK/bundle" "$WORK/bundle-root" <<'JS'
import { readFileSync } from "node:fs";
import { getMcpConfigForManifest } from "@anthropic-ai/mcpb";
const [dir, root] = process.argv.slice(2);
const manifest = JSON.parse(readFileSync(`${dir}/manifest.json`, "utf8"));
const config = await getMcpConfigForManifest({
  manifest, extensionPath: dir, systemDirs: {}, userConfig: { root }, pathSeparator: "/",
});
console.log(JSON.stringify([config.command, ...config.args]));
JS
)"
echo "the host would run: $launch"
mapfile -t command < <(python3 -c 'import json, sys; print("\n".join(json.loads(sys.argv[1])))' "$launch")
session ".mcpb (unpacked)" --root "$WORK/bundle-root" -- "${command[@]}"

step "the Linux x86_64 binary: glibc 2.17 symbols, and a session in Debian 11"
binary="$WORK/bundle/server/linux/gimlet"
newest="$(objdump -T "$binary" | grep -o 'GLIBC_[0-9.]*' | sort -t. -k1,1 -k2,2n -k3,3n -u | tail -n1)"
echo "newest glibc symbol version: $newest"
objdump -T "$binary" | grep -o 'GLIBC_[0-9.]*' | sort -u | python3 -c '
import sys
bad = [v for v in sys.stdin.read().split() if tuple(map(int, v[6:].split("."))) > (2, 17)]
sys.exit(f"needs glibc newer than 2.17: {bad}" if bad else 0)'
if readelf -d "$binary" | grep -q RELR; then echo "packed relocations in the portable binary" >&2; exit 1; fi
HOME="$REAL_HOME"
chroot_dir="$DIST_CACHE/bullseye"
# Debian's packages through the mirror apt is configured with.
mirror="$(sed -n 's/^URIs: *\(http[^ ]*\/debian\)\/\{0,1\}$/\1/p' /etc/apt/sources.list.d/*.sources 2> /dev/null | head -n1)"
mirror="${mirror:-http://deb.debian.org/debian}"
if [[ "$(id -u)" != 0 ]] || ! command -v debootstrap > /dev/null; then
  echo "skipped: the Debian 11 session needs root and debootstrap"
else
  if [[ ! -x "$chroot_dir/bin/bash" ]]; then
    echo "debootstrap of Debian 11 from $mirror into $chroot_dir (once)"
    rm -rf "$chroot_dir.tmp"
    debootstrap --variant=minbase bullseye "$chroot_dir.tmp" "$mirror" > "$WORK/debootstrap.log" \
      || { tail -n 20 "$WORK/debootstrap.log"; exit 1; }
    mv "$chroot_dir.tmp" "$chroot_dir"
  fi
  echo "in the chroot: $(chroot "$chroot_dir" ldd --version | head -n1)"
  install -D -m 755 "$binary" "$chroot_dir/opt/gimlet/gimlet"
  rm -rf "$chroot_dir/srv/root"
  mountpoint -q "$chroot_dir/proc" || mount -t proc proc "$chroot_dir/proc"
  session "Debian 11 (chroot)" --root "$chroot_dir/srv/root" --root-as /srv/root -- \
    chroot "$chroot_dir" /opt/gimlet/gimlet serve --root /srv/root
  umount "$chroot_dir/proc"
  if [[ -x target/release/gimlet ]]; then # the control: what `cargo build --release` makes
    cp target/release/gimlet "$chroot_dir/opt/gimlet/native"
    if chroot "$chroot_dir" /opt/gimlet/native --version > /dev/null 2>&1; then
      echo "note: target/release/gimlet starts in Debian 11 too (built against an old glibc?)"
    else
      echo "control: target/release/gimlet does not start there ($(chroot "$chroot_dir" /opt/gimlet/native --version 2>&1 | grep -o 'GLIBC[A-Z_]*[0-9.]*' | sort -u | tr '\n' ' '))"
    fi
    rm -f "$chroot_dir/opt/gimlet/native"
  fi
fi

step "the Linux arm64 binary: glibc 2.17 symbols, and a session under qemu-aarch64 with Debian 11's arm64 C library"
arm_wheel="$(ls "$DIST"/gimlet_mcp-"$VERSION"-py3-none-manylinux_2_17_aarch64*.whl 2> /dev/null | head -n1 || true)"
if [[ -z "$arm_wheel" ]]; then
  echo "skipped: no arm64 wheel in dist/"
elif ! command -v qemu-aarch64 > /dev/null || ! command -v debootstrap > /dev/null; then
  echo "skipped: needs qemu-aarch64 (apt-get install qemu-user) and debootstrap"
else
  arm_root="$DIST_CACHE/bullseye-arm64"
  if [[ ! -e "$arm_root/lib/ld-linux-aarch64.so.1" ]]; then
    # Only unpacked (--foreign): qemu needs the C library's files, not a configured system.
    rm -rf "$arm_root.tmp"
    debootstrap --arch=arm64 --foreign --variant=minbase bullseye "$arm_root.tmp" \
      "$mirror" > "$WORK/debootstrap-arm64.log" \
      || { tail -n 20 "$WORK/debootstrap-arm64.log"; exit 1; }
    mv "$arm_root.tmp" "$arm_root"
  fi
  mkdir -p "$WORK/arm64"
  python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$arm_wheel" "$WORK/arm64"
  arm_binary="$(find "$WORK/arm64" -path '*/scripts/gimlet')"
  chmod +x "$arm_binary"
  readelf -V --wide "$arm_binary" | grep -o 'GLIBC_2\.[0-9.]*' | sort -uV | python3 -c '
import sys
versions = sys.stdin.read().split()
bad = [v for v in versions if tuple(map(int, v[6:].split("."))) > (2, 17)]
print(f"newest glibc symbol version: {versions[-1]}")
sys.exit(f"needs glibc newer than 2.17: {bad}" if bad else 0)'
  # No bash call: under qemu-user the server's /bin/bash is the emulated root's arm64 one,
  # which this machine's kernel cannot run (no binfmt here).
  session "arm64 under qemu (Debian 11 libc)" --no-bash -- qemu-aarch64 -L "$arm_root" \
    "$arm_binary" serve --root '{root}'
fi

step "figures"
echo "artifact sizes:"
(cd "$DIST" && ls -l --block-size=K -- *.whl *.tgz *.mcpb | awk '{ printf "  %8s  %s\n", $5, $9 }')
printf '  %s\n' "${figures[@]}"
echo "dist-test: all passed"
