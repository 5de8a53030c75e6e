//! Startup and per-call cost of `gimlet serve` over stdio, as a client sees it.
//!
//! `cargo bench --bench stdio` prints:
//! - cold start: from spawning the process to the `tools/list` answer (initialize included);
//! - small `read` calls one after another: client-observed latency, and the server's CPU time
//!   per call (process-wide user+system time from /proc, over many calls);
//! - the same CPU figure for `ping`: the floor of any request over stdio on this machine;
//! - and for a bare loop that does the least any server must for a small read (this benchmark
//!   re-run as the server: read a line, open, stat, read and close the file, write a line), to
//!   tell the machine's cost of system calls and wake-ups from gimlet's;
//! - with `GIMLET_BENCH_OTHER` set, the same for another MCP server (`bench/stdio-compare.sh`);
//! - N calls sent at once against N one after another (`grep` over a tree, small `read`s);
//! - `echo hello` through `bash` (sandboxed where the kernel allows), call to result, beside
//!   `bash -c 'echo hello'` run directly (`cargo bench --bench stdio -- bash` runs only this).
//!
//! Run on a quiet machine; the figures go into docs/performance.md.

#![expect(
    clippy::unwrap_used,
    clippy::print_stdout,
    reason = "a benchmark program"
)]
#![expect(
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "statistics over counts far below 2^52"
)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

const STARTS: usize = 30;
const READS: usize = 20_000;

struct Server {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
}

impl Server {
    fn spawn(root: &std::path::Path, data: &std::path::Path) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_gimlet"));
        command
            .args(["serve", "--root"])
            .arg(root)
            .env("XDG_DATA_HOME", data)
            .env_remove("RUST_LOG");
        Self::start(command)
    }

    /// This benchmark itself as the bare server ([`bare_server`]), reading files in `root`.
    fn spawn_bare(root: &std::path::Path) -> Self {
        let mut command = Command::new(std::env::current_exe().unwrap());
        command.env(BARE, root);
        Self::start(command)
    }

    /// Another MCP server, from [`OTHER`]'s command with `{root}` replaced by `root`.
    fn spawn_other(other: &Other, root: &std::path::Path) -> Self {
        let command_line: Vec<String> = other
            .command
            .iter()
            .map(|arg| arg.replace("{root}", &root.display().to_string()))
            .collect();
        let mut command = Command::new(&command_line[0]);
        command.args(&command_line[1..]);
        Self::start(command)
    }

    fn start(mut command: Command) -> Self {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Self {
            child,
            stdin,
            stdout,
            next_id: 1,
        }
    }

    fn send(&mut self, method: &str, params: &serde_json::Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let message =
            serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(self.stdin, "{message}").unwrap();
        id
    }

    fn notify(&mut self, method: &str) {
        writeln!(
            self.stdin,
            "{}",
            serde_json::json!({"jsonrpc": "2.0", "method": method})
        )
        .unwrap();
    }

    fn wait_for(&mut self, id: u64) -> serde_json::Value {
        let mut line = String::new();
        loop {
            line.clear();
            assert!(
                self.stdout.read_line(&mut line).unwrap() > 0,
                "server closed stdout"
            );
            let message: serde_json::Value = serde_json::from_str(&line).unwrap();
            if message["id"] == id {
                return message;
            }
        }
    }

    fn initialize(&mut self) {
        let id = self.send(
            "initialize",
            &serde_json::json!({"protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "bench", "version": "1"}}),
        );
        self.wait_for(id);
        self.notify("notifications/initialized");
    }

    /// Waits for all of these replies, in whatever order they come.
    fn wait_all(&mut self, ids: &[u64]) {
        let mut left: Vec<u64> = ids.to_vec();
        let mut line = String::new();
        while !left.is_empty() {
            line.clear();
            assert!(
                self.stdout.read_line(&mut line).unwrap() > 0,
                "server closed stdout"
            );
            let message: serde_json::Value = serde_json::from_str(&line).unwrap();
            if let Some(id) = message["id"].as_u64() {
                assert_eq!(message["result"]["isError"], false, "{message}");
                left.retain(|l| *l != id);
            }
        }
    }

    /// User and system CPU time of the server process so far.
    fn cpu(&self) -> (Duration, Duration) {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap();
        let after_name = &stat[stat.rfind(')').unwrap() + 2..];
        let fields: Vec<&str> = after_name.split_whitespace().collect();
        let ticks = |i: usize| Duration::from_micros(fields[i].parse::<u64>().unwrap() * 10_000); // USER_HZ = 100
        (ticks(11), ticks(12))
    }

    fn stop(mut self) {
        drop(self.stdin);
        let _ = self.child.wait();
    }
}

/// Makes `READS` calls one after another; their client-observed latencies (sorted) and the
/// server's CPU time per call.
fn timed_calls(
    server: &mut Server,
    method: &str,
    params: &serde_json::Value,
) -> (Vec<Duration>, String) {
    let cpu_before = server.cpu();
    let mut latencies = Vec::with_capacity(READS);
    let all = Instant::now();
    for _ in 0..READS {
        let started = Instant::now();
        let id = server.send(method, params);
        let reply = server.wait_for(id);
        latencies.push(started.elapsed());
        assert!(reply.get("error").is_none(), "{reply}");
        assert_ne!(reply["result"]["isError"], true, "{reply}");
    }
    let wall = all.elapsed();
    let cpu_after = server.cpu();
    let user = cpu_after.0.saturating_sub(cpu_before.0);
    let system = cpu_after.1.saturating_sub(cpu_before.1);
    latencies.sort();
    let cpu = format!(
        "{:.1} µs ({:.1} user + {:.1} system; {:.0} calls/s)",
        us(user + system) / READS as f64,
        us(user) / READS as f64,
        us(system) / READS as f64,
        READS as f64 / wall.as_secs_f64()
    );
    (latencies, cpu)
}

/// Spawns a server `STARTS` times and times each from the spawn to its `tools/list` answer
/// (initialize included); sorted.
fn cold_starts(spawn: impl Fn() -> Server) -> Vec<Duration> {
    let mut starts = Vec::with_capacity(STARTS);
    for _ in 0..STARTS {
        let started = Instant::now();
        let mut server = spawn();
        server.initialize();
        let id = server.send("tools/list", &serde_json::json!({}));
        server.wait_for(id);
        starts.push(started.elapsed());
        server.stop();
    }
    starts.sort();
    starts
}

/// An initialized server that has answered `call` a few hundred times.
fn warmed_up(mut server: Server, call: &serde_json::Value) -> Server {
    server.initialize();
    for _ in 0..200 {
        let id = server.send("tools/call", call);
        server.wait_for(id);
    }
    server
}

/// One table row: the median, p10 and p90 of `sorted`, in ms or µs.
fn row(label: &str, sorted: &[Duration], in_ms: bool) {
    let [median, p10, p90] = [0.5, 0.1, 0.9].map(|p| percentile(sorted, p));
    if in_ms {
        println!(
            "| {label} | {:.2} ms | {:.2} ms | {:.2} ms |",
            ms(median),
            ms(p10),
            ms(p90)
        );
    } else {
        println!(
            "| {label} | {:.1} µs | {:.1} µs | {:.1} µs |",
            us(median),
            us(p10),
            us(p90)
        );
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index]
}

/// Set (to the root) in the environment of the benchmark started as the bare server.
const BARE: &str = "GIMLET_BENCH_BARE_ROOT";

/// Another server to measure the same way, for a comparison on the same machine (see
/// `bench/stdio-compare.sh`): JSON `{"command": [...], "call": {"name": ..., "arguments":
/// {...}}}`, where `{root}` in the command and the arguments stands for the files' folder.
/// The command must be the server process itself (not a wrapper such as `npx`): its CPU time
/// is read from `/proc`.
const OTHER: &str = "GIMLET_BENCH_OTHER";

struct Other {
    command: Vec<String>,
    call: serde_json::Value,
}

impl Other {
    fn parse(text: &str) -> Option<Self> {
        let value: serde_json::Value = serde_json::from_str(text).ok()?;
        let command: Vec<String> = value["command"]
            .as_array()?
            .iter()
            .map(|arg| arg.as_str().map(str::to_owned))
            .collect::<Option<_>>()?;
        let call = value.get("call")?.clone();
        (!command.is_empty()).then_some(Self { command, call })
    }
}

/// Cold start and CPU per read of the [`OTHER`] server, as `main` measures gimlet's.
fn measure_other(other: &Other, root: &std::path::Path) {
    let call: serde_json::Value = serde_json::from_str(
        &other
            .call
            .to_string()
            .replace("{root}", &root.display().to_string()),
    )
    .unwrap();
    let starts = cold_starts(|| Server::spawn_other(other, root));
    let mut server = warmed_up(Server::spawn_other(other, root), &call);
    let (latencies, cpu) = timed_calls(&mut server, "tools/call", &call);
    server.stop();
    println!("other server: {}", other.command.join(" "));
    row("other: cold start to tools/list", &starts, true);
    row(
        "other: read round trip (client-observed)",
        &latencies,
        false,
    );
    println!("other server CPU per read: {cpu}");
}

/// The least a stdio server can do for a small read, to measure this machine's floor: one
/// thread that reads a line, parses it, opens, stats, reads and closes the file, and writes
/// the answer. No protocol beyond the id, no checks, no threads.
fn bare_server(root: &std::path::Path) {
    use std::io::Read;
    let mut input = std::io::stdin().lock();
    let mut output = std::io::stdout().lock();
    let mut line = String::new();
    while {
        line.clear();
        input.read_line(&mut line).unwrap() > 0
    } {
        let message: serde_json::Value = serde_json::from_str(&line).unwrap();
        let Some(id) = message.get("id") else {
            continue;
        };
        let mut result = serde_json::json!({});
        if message["method"] == "tools/call" {
            let path = root.join(message["params"]["arguments"]["path"].as_str().unwrap());
            let mut file = std::fs::File::open(path).unwrap();
            let size = file.metadata().unwrap().len();
            let mut text = String::with_capacity(usize::try_from(size).unwrap() + 1);
            file.read_to_string(&mut text).unwrap();
            result = serde_json::json!({"content": [{"type": "text", "text": text}]});
        }
        let answer = serde_json::json!({"jsonrpc": "2.0", "id": id, "result": result});
        writeln!(output, "{answer}").unwrap();
        output.flush().unwrap();
    }
}

fn main() {
    if let Some(root) = std::env::var_os(BARE) {
        bare_server(std::path::Path::new(&root));
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("small.txt"), "one\ntwo\nthree\n").unwrap();
    // `cargo bench --bench stdio -- bash`: only the command case.
    let only_bash = std::env::args().any(|a| a == "bash");
    if only_bash {
        commands(root.path(), data.path());
        return;
    }

    let starts = cold_starts(|| Server::spawn(root.path(), data.path()));
    // Small reads one after another.
    let read = serde_json::json!({"name": "read", "arguments": {"path": "small.txt"}});
    let mut server = warmed_up(Server::spawn(root.path(), data.path()), &read);
    let (latencies, reads_cpu) = timed_calls(&mut server, "tools/call", &read);
    // The floor: a `ping` costs the same pipe reads and writes and JSON-RPC handling, but no
    // tool, no pipeline and no hand-off to a worker thread.
    let (_, pings_cpu) = timed_calls(&mut server, "ping", &serde_json::json!({}));
    server.stop();
    // The machine's floor for the same read (see `bare_server`).
    let mut bare = warmed_up(Server::spawn_bare(root.path()), &read);
    let (_, bare_cpu) = timed_calls(&mut bare, "tools/call", &read);
    bare.stop();

    println!(
        "gimlet stdio benchmark ({STARTS} cold starts, {READS} sequential reads of a 3-line file)"
    );
    println!("| measure | median | p10 | p90 |");
    println!("|---|---|---|---|");
    row("cold start to tools/list", &starts, true);
    row("read round trip (client-observed)", &latencies, false);
    println!("server CPU per read: {reads_cpu}");
    println!("server CPU per ping (the protocol floor): {pings_cpu}");
    println!("bare loop CPU per read (this machine's floor): {bare_cpu}");
    if let Ok(other) = std::env::var(OTHER) {
        let other = Other::parse(&other).unwrap_or_else(|| {
            panic!("{OTHER} must be {{\"command\": [\"server\", ...], \"call\": {{...}}}}")
        });
        measure_other(&other, root.path());
    }
    let tree = tempfile::tempdir().unwrap();
    parallel(tree.path(), data.path());
    commands(root.path(), data.path());
}

/// How many `echo hello` commands are timed.
const COMMANDS: usize = 1000;

/// `echo hello` through `bash` over stdio, call to result (sandboxed where the kernel allows),
/// beside `bash -c 'echo hello'` run directly by this process: what a command costs through
/// gimlet, and what it costs at all.
fn commands(root: &std::path::Path, data: &std::path::Path) {
    let call = serde_json::json!({"name": "bash", "arguments": {"command": "echo hello"}});
    let mut server = Server::spawn(root, data);
    server.initialize();
    let id = server.send("tools/call", &call);
    let first = server.wait_for(id);
    let sandboxed = first["result"]["structuredContent"]["sandboxed"] == true;
    for _ in 0..50 {
        let id = server.send("tools/call", &call);
        server.wait_for(id);
    }
    let mut through = Vec::with_capacity(COMMANDS);
    let mut direct = Vec::with_capacity(COMMANDS);
    // Alternating, so that a busy moment of the machine weighs on both alike.
    for _ in 0..COMMANDS {
        let started = Instant::now();
        let id = server.send("tools/call", &call);
        let reply = server.wait_for(id);
        through.push(started.elapsed());
        assert_eq!(reply["result"]["isError"], false, "{reply}");
        let started = Instant::now();
        let output = Command::new("bash")
            .args(["-c", "echo hello"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        direct.push(started.elapsed());
        assert_eq!(output.stdout, b"hello\n");
    }
    server.stop();
    through.sort();
    direct.sort();
    let sandbox = if sandboxed {
        "sandboxed"
    } else {
        "not sandboxed"
    };
    println!("\n`echo hello`, {COMMANDS} times each, alternating");
    println!("| measure | median | p10 | p90 |");
    println!("|---|---|---|---|");
    row(
        &format!("through `bash` over stdio ({sandbox})"),
        &through,
        true,
    );
    row("`bash -c 'echo hello'` run directly", &direct, true);
    println!(
        "ratio of the medians: {:.2}",
        ms(percentile(&through, 0.5)) / ms(percentile(&direct, 0.5))
    );
}

/// N calls sent at once against N times one call, for `grep` over a tree and small `read`s.
fn parallel(root: &std::path::Path, data: &std::path::Path) {
    const N: usize = 8;
    const ROUNDS: usize = 10;
    for d in 0..40 {
        let dir = root.join(format!("dir{d}"));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..50 {
            let text: String = (0..200)
                .map(|l| format!("fn item_{d}_{f}_{l}() {{ let value = {l} * 7; }}\n"))
                .collect();
            std::fs::write(dir.join(format!("file{f}.rs")), text).unwrap();
        }
    }
    let mut server = Server::spawn(root, data);
    server.initialize();
    for (name, args) in [
        (
            "grep",
            serde_json::json!({"pattern": "value = 13[0-9]", "output_mode": "count"}),
        ),
        (
            "read",
            serde_json::json!({"path": "dir0/file0.rs", "limit": 50}),
        ),
    ] {
        let call = serde_json::json!({"name": name, "arguments": args});
        // Warm up.
        for _ in 0..3 {
            let id = server.send("tools/call", &call);
            server.wait_for(id);
        }
        let started = Instant::now();
        for _ in 0..ROUNDS * N {
            let id = server.send("tools/call", &call);
            server.wait_all(&[id]);
        }
        let one_by_one = started.elapsed();
        let started = Instant::now();
        for _ in 0..ROUNDS {
            let ids: Vec<u64> = (0..N).map(|_| server.send("tools/call", &call)).collect();
            server.wait_all(&ids);
        }
        let together = started.elapsed();
        println!(
            "{N} `{name}` calls at once: {:.2} ms vs {:.2} ms one after another ({:.2}x)",
            ms(together) / ROUNDS as f64,
            ms(one_by_one) / ROUNDS as f64,
            one_by_one.as_secs_f64() / together.as_secs_f64()
        );
    }
    server.stop();
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}
