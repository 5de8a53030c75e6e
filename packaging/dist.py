"""Packages built gimlet binaries into the artifacts users install (run by scripts/dist.sh).

    python3 packaging/dist.py platform OUT PLATFORM BINARY   one platform's wheel, npm package
                                                             and .mcpb binary, from one binary
    python3 packaging/dist.py finish OUT MCPB                the npm launcher, the .mcpb (packed with
                                                             the CLI at MCPB), server.json and
                                                             SHA256SUMS, for the platforms in OUT

Everything is made from the binary as it is: the wheel by hand (the layout maturin gives a
`bindings = "bin"` project: the binary in `<name>-<version>.data/scripts/`), since maturin
always compiles and one compilation per target feeds every artifact. Standard library only;
npm packages are packed with `npm pack`, the bundle with `mcpb pack` (scripts/dist.sh finds it).
"""

import base64
import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HERE = os.path.dirname(os.path.abspath(__file__))

# The PyPI distribution (the name `gimlet` is taken there) and its commands.
PYPI_NAME = "gimlet-mcp"
NPM_NAME = "gimlet"
NPM_SCOPE = "@gimlet-mcp"

# Platform -> how each artifact names it. `npm` is the platform package's `os`/`cpu`/`libc`;
# `mcpb` the bundle's folder, named by Node's `process.platform` (the bundle has no CPU field:
# macOS ships one universal binary, Linux x86_64 only).
PLATFORMS = {
    "linux-x64": {
        "wheel": "manylinux_2_17_x86_64.manylinux2014_x86_64",
        "npm": {"os": ["linux"], "cpu": ["x64"], "libc": ["glibc"]},
        "mcpb": "linux",
        "exe": "gimlet",
    },
    "linux-arm64": {
        "wheel": "manylinux_2_17_aarch64.manylinux2014_aarch64",
        "npm": {"os": ["linux"], "cpu": ["arm64"], "libc": ["glibc"]},
        "mcpb": None,
        "exe": "gimlet",
    },
    "darwin-universal": {
        "wheel": "macosx_10_12_x86_64.macosx_11_0_arm64.macosx_10_12_universal2",
        "npm": {"os": ["darwin"], "cpu": ["x64", "arm64"]},
        "mcpb": "darwin",
        "exe": "gimlet",
    },
    "win32-x64": {
        "wheel": "win_amd64",
        "npm": {"os": ["win32"], "cpu": ["x64"]},
        "mcpb": "win32",
        "exe": "gimlet.exe",
    },
}

# `gimlet-mcp`, the command registry clients run (`uvx gimlet-mcp`), on Unix: it finds the
# binary beside the file it really is, so it keeps working when an installer links it
# elsewhere (`uv tool install` puts links in ~/.local/bin). On Windows it is a copy of the
# binary (no shell there, and links are rare).
ALIAS_SCRIPT = """#!/bin/sh
# `gimlet-mcp`: the same program as `gimlet` (the PyPI package is named gimlet-mcp).
self="$0"
while [ -L "$self" ]; do
  link="$(readlink "$self")"
  case "$link" in
    /*) self="$link" ;;
    *) self="$(dirname "$self")/$link" ;;
  esac
done
exec "$(dirname "$self")/gimlet" "$@"
"""


def cargo_metadata():
    """The workspace's version, description, licence and repository (Cargo.toml)."""
    text = read_text(os.path.join(ROOT, "Cargo.toml"))

    def field(name, section):
        block = text.split(f"[{section}]", 1)[1].split("\n[", 1)[0]
        match = re.search(rf'^{name}\s*=\s*"([^"]*)"', block, re.MULTILINE)
        if not match:
            sys.exit(f"dist.py: no {name} in [{section}] of Cargo.toml")
        return match.group(1)

    return {
        "version": field("version", "workspace.package"),
        "license": field("license", "workspace.package"),
        "repository": field("repository", "workspace.package"),
        "description": field("description", "package"),
    }


def server_name():
    """The MCP Registry name, from server.json (the README and npm's `mcpName` say the same)."""
    return load_json(os.path.join(ROOT, "server.json"))["name"]


def read_text(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def load_json(path):
    return json.loads(read_text(path))


def write_json(path, value):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f, indent=2)
        f.write("\n")


def npm_package_name(platform):
    return f"{NPM_SCOPE}/{platform}"


# --- the wheel ---------------------------------------------------------------------------


def record_hash(data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return f"sha256={digest.decode()}"


def write_wheel(out, platform, binary, meta):
    """`gimlet_mcp-VERSION-py3-none-TAG.whl`: the binary as the `gimlet` script, the alias,
    METADATA (the README as its description: the MCP Registry finds `mcp-name:` there), WHEEL
    and RECORD. Entries carry fixed times, so the same binary gives the same wheel."""
    spec = PLATFORMS[platform]
    dist = PYPI_NAME.replace("-", "_")
    version = meta["version"]
    tag = spec["wheel"]
    name = f"{dist}-{version}-py3-none-{tag}.whl"
    data = f"{dist}-{version}.data/scripts"
    info = f"{dist}-{version}.dist-info"
    with open(binary, "rb") as f:
        binary_bytes = f.read()
    exe = spec["exe"]
    files = [(f"{data}/{exe}", binary_bytes, 0o755)]
    if exe.endswith(".exe"):
        files.append((f"{data}/gimlet-mcp.exe", binary_bytes, 0o755))
    else:
        files.append((f"{data}/gimlet-mcp", ALIAS_SCRIPT.encode(), 0o755))
    readme = read_text(os.path.join(ROOT, "README.md"))
    metadata = (
        "Metadata-Version: 2.4\n"
        f"Name: {PYPI_NAME}\n"
        f"Version: {version}\n"
        f"Summary: {meta['description']}\n"
        f"License-Expression: {meta['license']}\n"
        f"Project-URL: Repository, {meta['repository']}\n"
        "Requires-Python: >=3.8\n"
        "Description-Content-Type: text/markdown\n"
        "\n" + readme
    )
    wheel = (
        "Wheel-Version: 1.0\n"
        "Generator: gimlet packaging/dist.py\n"
        "Root-Is-Purelib: false\n"
        + "".join(f"Tag: py3-none-{t}\n" for t in tag.split("."))
    )
    files.append((f"{info}/METADATA", metadata.encode(), 0o644))
    files.append((f"{info}/WHEEL", wheel.encode(), 0o644))
    record = "".join(f"{path},{record_hash(content)},{len(content)}\n" for path, content, _ in files)
    record += f"{info}/RECORD,,\n"
    files.append((f"{info}/RECORD", record.encode(), 0o644))
    path = os.path.join(out, name)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        for entry, content, mode in files:
            item = zipfile.ZipInfo(entry, date_time=(1980, 1, 1, 0, 0, 0))
            item.external_attr = (stat.S_IFREG | mode) << 16
            item.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(item, content)
    return path


# --- npm ---------------------------------------------------------------------------------


def npm_pack(folder, out):
    """`npm pack` of a folder into OUT; the tarball's path."""
    npm = shutil.which("npm") or "npm"  # npm.cmd on Windows, which needs its full path
    result = subprocess.run(
        [npm, "pack", "--silent", "--pack-destination", os.path.abspath(out)],
        cwd=folder, check=True, capture_output=True, text=True,
    )
    return os.path.join(out, result.stdout.strip().splitlines()[-1])


def write_npm_platform(out, platform, binary, meta):
    """The platform package: `bin/gimlet` and a package.json that npm installs only where
    `os`, `cpu` and `libc` match (the launcher lists it in `optionalDependencies`)."""
    spec = PLATFORMS[platform]
    folder = os.path.join(out, "npm", platform)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(os.path.join(folder, "bin"))
    target = os.path.join(folder, "bin", spec["exe"])
    shutil.copyfile(binary, target)
    os.chmod(target, 0o755)
    package = {
        "name": npm_package_name(platform),
        "version": meta["version"],
        "description": f"The gimlet MCP server's binary for {platform} (installed by `gimlet`).",
        "license": meta["license"],
        "repository": {"type": "git", "url": f"git+{meta['repository']}.git"},
        **spec["npm"],
        "files": ["bin"],
        "preferUnplugged": True,
    }
    write_json(os.path.join(folder, "package.json"), package)
    return npm_pack(folder, out)


def write_npm_launcher(out, platforms, meta):
    """`gimlet`: the launcher (packaging/npm/gimlet.js) and the platform packages as optional
    dependencies, each at exactly this version."""
    folder = os.path.join(out, "npm", NPM_NAME)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(os.path.join(folder, "bin"))
    shutil.copyfile(os.path.join(HERE, "npm", "gimlet.js"), os.path.join(folder, "bin", "gimlet.js"))
    os.chmod(os.path.join(folder, "bin", "gimlet.js"), 0o755)
    shutil.copyfile(os.path.join(ROOT, "README.md"), os.path.join(folder, "README.md"))
    package = {
        "name": NPM_NAME,
        "version": meta["version"],
        "description": meta["description"],
        "mcpName": server_name(),
        "license": meta["license"],
        "repository": {"type": "git", "url": f"git+{meta['repository']}.git"},
        "keywords": ["mcp", "mcp-server", "modelcontextprotocol", "coding-agent"],
        "bin": {"gimlet": "bin/gimlet.js"},
        "files": ["bin"],
        "engines": {"node": ">=18"},
        "optionalDependencies": {npm_package_name(p): meta["version"] for p in platforms},
    }
    write_json(os.path.join(folder, "package.json"), package)
    return npm_pack(folder, out)


# --- the .mcpb bundle --------------------------------------------------------------------


def write_mcpb_manifest(out, platforms, meta):
    """dist/mcpb/manifest.json: one bundle for every OS built (the binary under
    `server/<process.platform>/`), the root a folder the user picks, always passed as `--root`."""
    folders = [PLATFORMS[p]["mcpb"] for p in platforms if PLATFORMS[p]["mcpb"]]
    if not folders:
        return None
    exe = {PLATFORMS[p]["mcpb"]: PLATFORMS[p]["exe"] for p in platforms if PLATFORMS[p]["mcpb"]}
    args = ["serve", "--root", "${user_config.root}"]
    base = folders[0]
    manifest = {
        "manifest_version": "0.3",
        "name": "gimlet",
        "display_name": "gimlet",
        "version": meta["version"],
        "description": meta["description"],
        "long_description": (
            "gimlet gives Claude the coding-agent tool set (read, write, edit, patch, undo, grep, "
            "glob, ls, bash) inside the project folder you choose. Paths stay inside it; "
            "commands run sandboxed where the OS allows; anything else asks you first."
        ),
        "author": {"name": "gimlet contributors", "url": meta["repository"]},
        "repository": {"type": "git", "url": meta["repository"]},
        "homepage": meta["repository"],
        "license": meta["license"],
        "keywords": ["coding", "files", "edit", "grep", "bash"],
        "server": {
            "type": "binary",
            "entry_point": f"server/{base}/{exe[base]}",
            "mcp_config": {
                "command": f"${{__dirname}}/server/{base}/{exe[base]}",
                "args": args,
                "platform_overrides": {
                    folder: {"command": f"${{__dirname}}/server/{folder}/{exe[folder]}", "args": args}
                    for folder in folders[1:]
                },
            },
        },
        "compatibility": {"platforms": folders},
        "user_config": {
            "root": {
                "type": "directory",
                "title": "Project folder",
                "description": "The folder gimlet works in: its tools read and change files only "
                "here, and ask before anything outside it.",
                "required": True,
            }
        },
    }
    if not manifest["server"]["mcp_config"]["platform_overrides"]:
        del manifest["server"]["mcp_config"]["platform_overrides"]
    write_json(os.path.join(out, "mcpb", "manifest.json"), manifest)
    return os.path.join(out, "mcpb", "manifest.json")


def stage_mcpb_binary(out, platform, binary):
    folder = PLATFORMS[platform]["mcpb"]
    if not folder:
        return
    target = os.path.join(out, "mcpb", "server", folder, PLATFORMS[platform]["exe"])
    os.makedirs(os.path.dirname(target), exist_ok=True)
    shutil.copyfile(binary, target)
    os.chmod(target, 0o755)


# --- server.json and the sums ------------------------------------------------------------


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_server_json(out, bundle, meta):
    """dist/server.json: the committed server.json (npm and PyPI packages) with the bundle
    added, at its release URL with its SHA-256 (the registry requires one for `.mcpb`)."""
    server = load_json(os.path.join(ROOT, "server.json"))
    if bundle:
        version = meta["version"]
        server["packages"].append({
            "registryType": "mcpb",
            "identifier": f"{meta['repository']}/releases/download/v{version}/{os.path.basename(bundle)}",
            "version": version,
            "fileSha256": sha256(bundle),
            "transport": {"type": "stdio"},
        })
    write_json(os.path.join(out, "server.json"), server)


def write_sums(out):
    names = sorted(
        name for name in os.listdir(out)
        if os.path.isfile(os.path.join(out, name)) and name != "SHA256SUMS"
    )
    with open(os.path.join(out, "SHA256SUMS"), "w", encoding="utf-8") as f:
        for name in names:
            f.write(f"{sha256(os.path.join(out, name))}  {name}\n")


def built_platforms(out):
    """The platforms packaged into OUT so far (their npm folders)."""
    folder = os.path.join(out, "npm")
    if not os.path.isdir(folder):
        return []
    return [p for p in PLATFORMS if os.path.isdir(os.path.join(folder, p))]


def main(argv):
    meta = cargo_metadata()
    if len(argv) == 4 and argv[0] == "platform":
        out, platform, binary = argv[1], argv[2], argv[3]
        if platform not in PLATFORMS:
            sys.exit(f"dist.py: unknown platform {platform}; one of {', '.join(PLATFORMS)}")
        os.makedirs(out, exist_ok=True)
        print(write_wheel(out, platform, binary, meta))
        print(write_npm_platform(out, platform, binary, meta))
        stage_mcpb_binary(out, platform, binary)
    elif len(argv) == 3 and argv[0] == "finish":
        out, mcpb = argv[1], argv[2]
        platforms = built_platforms(out)
        if not platforms:
            sys.exit(f"dist.py: nothing packaged in {out} yet")
        print(write_npm_launcher(out, platforms, meta))
        bundle = None
        manifest = write_mcpb_manifest(out, platforms, meta)
        if manifest:
            mcpb_folder = os.path.dirname(manifest)
            bundle = os.path.join(out, f"gimlet-{meta['version']}.mcpb")
            subprocess.run([mcpb, "validate", manifest], check=True)
            subprocess.run([mcpb, "pack", mcpb_folder, bundle], check=True)
            print(bundle)
        write_server_json(out, bundle, meta)
        write_sums(out)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
