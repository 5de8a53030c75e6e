#!/usr/bin/env node
// The `gimlet` command of the npm package: runs the binary from the platform package npm
// installed beside it (one of `optionalDependencies`, chosen by its `os`, `cpu` and `libc`),
// with stdio inherited. No download, no postinstall: without the platform package it says
// what to do and exits 1.
"use strict";

const { spawn } = require("node:child_process");
const path = require("node:path");

// `process.platform-process.arch` -> the package that carries that platform's binary.
const PACKAGES = {
  "linux-x64": "@gimlet-mcp/linux-x64",
  "linux-arm64": "@gimlet-mcp/linux-arm64",
  "darwin-x64": "@gimlet-mcp/darwin-universal",
  "darwin-arm64": "@gimlet-mcp/darwin-universal",
  "win32-x64": "@gimlet-mcp/win32-x64",
};

function binary() {
  const platform = `${process.platform}-${process.arch}`;
  const name = PACKAGES[platform];
  if (!name) {
    throw new Error(
      `gimlet has no prebuilt binary for ${platform}; build it from source: ` +
        "cargo install --locked --git https://github.com/gimlet-mcp/gimlet",
    );
  }
  let manifest;
  try {
    manifest = require.resolve(`${name}/package.json`);
  } catch {
    throw new Error(
      `gimlet: the package ${name} is not installed. It is an optional dependency of ` +
        "gimlet: install again without --omit=optional / --no-optional (on Linux it needs " +
        "glibc 2.17 or newer; musl systems such as Alpine are not supported).",
    );
  }
  const exe = process.platform === "win32" ? "gimlet.exe" : "gimlet";
  return path.join(path.dirname(manifest), "bin", exe);
}

function main() {
  let exe;
  try {
    exe = binary();
  } catch (error) {
    process.stderr.write(`${error.message}\n`);
    process.exit(1);
  }
  const child = spawn(exe, process.argv.slice(2), { stdio: "inherit", windowsHide: true });
  // The host stops a server with a signal to the process it started (this one): pass it on,
  // and stay until the binary has ended. SIGHUP makes gimlet read its config again.
  const forward = (signal) => child.kill(signal);
  const signals = process.platform === "win32" ? ["SIGINT", "SIGTERM"] : ["SIGINT", "SIGTERM", "SIGHUP"];
  for (const signal of signals) process.on(signal, forward);
  child.on("error", (error) => {
    process.stderr.write(`gimlet: could not start ${exe}: ${error.message}\n`);
    process.exit(1);
  });
  child.on("exit", (code, signal) => {
    if (signal) {
      // Ended by a signal: end the same way, so that the caller sees what the binary did.
      for (const s of signals) process.removeListener(s, forward);
      process.kill(process.pid, signal);
      process.exit(1); // only where the signal does not end this process (Windows)
    }
    process.exit(code ?? 1);
  });
}

if (require.main === module) main();

module.exports = { PACKAGES };
