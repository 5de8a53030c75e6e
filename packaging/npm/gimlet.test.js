// The npm launcher (gimlet.js), run as npm installs it: in node_modules beside a platform
// package whose "binary" is a Node script that reports what reaches it. `node --test packaging/npm`.
"use strict";

const assert = require("node:assert/strict");
const { spawn } = require("node:child_process");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const test = require("node:test");

const { PACKAGES } = require("./gimlet.js");

// Prints its arguments and "ready" once its handlers are in place; on SIGHUP prints HUP and
// goes on; on SIGTERM prints TERM and exits 0; on SIGINT dies of SIGINT; on a line "exit N"
// exits N.
const FAKE = `#!${process.execPath}
console.log("args " + JSON.stringify(process.argv.slice(2)));
process.on("SIGHUP", () => console.log("HUP"));
process.on("SIGTERM", () => { console.log("TERM"); process.exit(0); });
process.on("SIGINT", () => { process.removeAllListeners("SIGINT"); process.kill(process.pid, "SIGINT"); });
require("node:readline").createInterface({ input: process.stdin }).on("line", (line) => {
  const m = /^exit (\\d+)$/.exec(line);
  if (m) process.exit(Number(m[1]));
  console.log("echo " + line);
});
console.log("ready");
`;

/** node_modules with the launcher and, unless `withBinary` is false, this platform's package. */
function install(withBinary = true) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "gimlet-launcher-"));
  const launcher = path.join(dir, "node_modules", "gimlet", "bin", "gimlet.js");
  fs.mkdirSync(path.dirname(launcher), { recursive: true });
  fs.copyFileSync(path.join(__dirname, "gimlet.js"), launcher);
  const name = PACKAGES[`${process.platform}-${process.arch}`];
  if (withBinary && name) {
    const pkg = path.join(dir, "node_modules", ...name.split("/"));
    fs.mkdirSync(path.join(pkg, "bin"), { recursive: true });
    fs.writeFileSync(path.join(pkg, "package.json"), JSON.stringify({ name, version: "0.0.0" }));
    fs.writeFileSync(path.join(pkg, "bin", "gimlet"), FAKE, { mode: 0o755 });
  }
  return launcher;
}

/** Runs the launcher; `lines` resolves to the output lines so far whenever `until` is seen. */
function run(launcher, args) {
  const child = spawn(process.execPath, [launcher, ...args], { stdio: ["pipe", "pipe", "pipe"] });
  let out = "";
  let err = "";
  const waiters = [];
  child.stdout.on("data", (chunk) => {
    out += chunk;
    for (const w of waiters.splice(0)) {
      if (out.split("\n").includes(w.line)) w.resolve();
      else waiters.push(w);
    }
  });
  child.stderr.on("data", (chunk) => (err += chunk));
  const seen = (line) =>
    new Promise((resolve) => {
      if (out.split("\n").includes(line)) resolve();
      else waiters.push({ line, resolve });
    });
  const ended = new Promise((resolve) =>
    child.on("close", (code, signal) => resolve({ code, signal, out, err })),
  );
  return { child, seen, ended };
}

const unix = process.platform !== "win32";

test("arguments, stdin and stdout pass through, and the exit code comes back", { timeout: 30000 }, async () => {
  const { child, seen, ended } = run(install(), ["serve", "--root", "a b"]);
  await seen("ready");
  child.stdin.write("hello\n");
  await seen("echo hello");
  child.stdin.write("exit 7\n");
  const end = await ended;
  assert.equal(end.code, 7);
  assert.ok(end.out.includes('args ["serve","--root","a b"]'), end.out);
});

test("SIGHUP reaches the binary and SIGTERM ends it cleanly", { skip: !unix, timeout: 30000 }, async () => {
  const { child, seen, ended } = run(install(), ["serve"]);
  await seen("ready");
  child.kill("SIGHUP");
  await seen("HUP");
  child.kill("SIGTERM");
  const end = await ended;
  assert.deepEqual([end.code, end.signal], [0, null]);
  assert.ok(end.out.includes("TERM"), end.out);
});

test("a binary that dies of a signal makes the launcher die of it too", { skip: !unix, timeout: 30000 }, async () => {
  const { child, seen, ended } = run(install(), []);
  await seen("ready");
  child.kill("SIGINT");
  const end = await ended;
  assert.deepEqual([end.code, end.signal], [null, "SIGINT"]);
});

test("without the platform package it says what to do and exits 1", { timeout: 30000 }, async () => {
  const { ended } = run(install(false), ["serve"]);
  const end = await ended;
  assert.equal(end.code, 1);
  assert.match(end.err, /optional dependency|no prebuilt binary/);
});
