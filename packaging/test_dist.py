"""packaging/dist.py without a compiled binary: a stand-in "binary" (a shell script that
prints its name and arguments) packed into a wheel, installed with uv (or pip) into a new virtual
environment, and run through a link to each command, as `uv tool install` links them.

    python3 -m unittest packaging/test_dist.py     (Linux and macOS; in CI)
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import venv
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dist  # noqa: E402

FAKE = '#!/bin/sh\necho "ran $(basename "$0"): $*"\n'


@unittest.skipIf(sys.platform == "win32", "the alias is a shell script on Unix only")
class WheelTest(unittest.TestCase):
    def setUp(self):
        self.work = tempfile.TemporaryDirectory()
        self.dir = self.work.name
        self.binary = os.path.join(self.dir, "gimlet")
        with open(self.binary, "w") as f:
            f.write(FAKE)
        os.chmod(self.binary, 0o755)
        self.meta = dist.cargo_metadata()

    def tearDown(self):
        self.work.cleanup()

    def test_the_wheel_has_both_commands_and_a_record_of_every_file(self):
        wheel = dist.write_wheel(self.dir, "linux-x64", self.binary, self.meta)
        version = self.meta["version"]
        self.assertEqual(
            os.path.basename(wheel),
            f"gimlet_mcp-{version}-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
        )
        with zipfile.ZipFile(wheel) as archive:
            names = archive.namelist()
            record = archive.read(f"gimlet_mcp-{version}.dist-info/RECORD").decode()
            for name in names:
                self.assertIn(f"{name},", record)
                if name.endswith("/RECORD"):
                    continue
                line = next(l for l in record.splitlines() if l.startswith(f"{name},"))
                self.assertEqual(line.split(",")[1], dist.record_hash(archive.read(name)))
            modes = {i.filename: i.external_attr >> 16 & 0o777 for i in archive.infolist()}
        scripts = f"gimlet_mcp-{version}.data/scripts"
        self.assertEqual(modes[f"{scripts}/gimlet"], 0o755)
        self.assertEqual(modes[f"{scripts}/gimlet-mcp"], 0o755)

    def test_both_commands_run_through_links_to_them(self):
        wheel = dist.write_wheel(self.dir, "linux-x64", self.binary, self.meta)
        env_dir = os.path.join(self.dir, "venv")
        python = os.path.join(env_dir, "bin", "python")
        if shutil.which("uv"):  # seconds faster than a venv with pip
            subprocess.run(["uv", "venv", "-q", "--python", sys.executable, env_dir], check=True)
            subprocess.run(["uv", "pip", "install", "-q", "--offline", "--python", python, wheel], check=True)
        else:
            venv.create(env_dir, with_pip=True)
            subprocess.run([python, "-m", "pip", "install", "-q", "--no-index", wheel], check=True)
        for command in ("gimlet", "gimlet-mcp"):
            # a link to a link, relative, alone in its folder, as `uv tool install` and then a
            # user might make
            links = os.path.join(self.dir, f"links-{command}")
            os.makedirs(links)
            os.symlink(os.path.join(env_dir, "bin", command), os.path.join(links, f"{command}-1"))
            os.symlink(f"{command}-1", os.path.join(links, command))
            out = subprocess.run(
                [os.path.join(links, command), "serve", "--root", "a b"],
                check=True, capture_output=True, text=True,
            ).stdout
            self.assertEqual(out, "ran gimlet: serve --root a b\n", command)


class ServerJsonTest(unittest.TestCase):
    def test_the_bundle_is_added_with_its_url_and_hash(self):
        with tempfile.TemporaryDirectory() as out:
            bundle = os.path.join(out, "gimlet-9.9.9.mcpb")
            with open(bundle, "wb") as f:
                f.write(b"bundle")
            meta = {**dist.cargo_metadata(), "version": "9.9.9"}
            dist.write_server_json(out, bundle, meta)
            server = dist.load_json(os.path.join(out, "server.json"))
            digest = dist.sha256(bundle)
        mcpb = server["packages"][-1]
        self.assertEqual(mcpb["registryType"], "mcpb")
        self.assertEqual(
            mcpb["identifier"],
            f"{meta['repository']}/releases/download/v9.9.9/gimlet-9.9.9.mcpb",
        )
        self.assertEqual(mcpb["fileSha256"], digest)


if __name__ == "__main__":
    unittest.main()
