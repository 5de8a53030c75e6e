//! Startup and per-call cost of `gimlet serve` over stdio, as a client sees it.
//!
//! `cargo bench --bench stdio` prints:
//! - cold start: from spawning the process to the `tools/list` answer (initialize included);
//! - small `read` calls one after another: client-observed latency, and the server's CPU time
//!   per call (process-wide user+system time from /proc, over many calls), for a 3-line file
//!   by relative path and a 200-line source file by absolute path (as hosts send it), and
//!   `glob` and `grep` in a small folder;
//! - the same for a no-op MCP server on rmcp (this benchmark re-run as the server, [`floor_server`]):
//!   the floor any MCP server on rmcp pays, answering the same text without touching a file;
//! - calls/s with 16 calls kept in flight, gimlet against the no-op server;
//! - `edit` of a 60 KB file, back to back and one every 50 ms (as hosts send them), against the
//!   no-op server answering the same request;
//! - the server's memory (resident set) at rest, at its peak over a workload of every kind of
//!   call including 10 MiB reads with raised output limits, and a second after
//!   (`cargo bench --bench stdio -- memory` runs only this);
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
        Self::spawn_configured(root, data, None)
    }

    /// gimlet, with a config file (`--config`) if one is given.
    fn spawn_configured(
        root: &std::path::Path,
        data: &std::path::Path,
        config: Option<&std::path::Path>,
    ) -> Self {
        let mut command = Command::new(gimlet_binary());
        if let Some(config) = config {
            command.arg("--config").arg(config);
        }
        command
            .args(["serve", "--root"])
            .arg(root)
            .env("XDG_DATA_HOME", data)
            .env_remove("RUST_LOG");
        Self::start(command)
    }

    /// This benchmark itself as the no-op MCP server ([`floor_server`]), answering `read` with
    /// the text in `answer`.
    fn spawn_floor(answer: &std::path::Path) -> Self {
        let mut command = Command::new(std::env::current_exe().unwrap());
        command.env(FLOOR, answer);
        Self::start(command)
    }

    /// The no-op server on the TypeScript SDK ([`TS_FLOOR`]), answering `read` with the text in
    /// `answer`; `None` when the variable is not set.
    fn spawn_ts_floor(answer: &std::path::Path) -> Option<Self> {
        let command = std::env::var(TS_FLOOR).ok()?;
        let command: Vec<String> = serde_json::from_str(&command)
            .unwrap_or_else(|_| panic!("{TS_FLOOR} must be a JSON array: [\"node\", \"script\"]"));
        let mut spawn = Command::new(&command[0]);
        spawn.args(&command[1..]).arg(answer);
        Some(Self::start(spawn))
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

    /// Keeps `depth` calls in flight until `total` have been answered; calls per second and
    /// the server's CPU time per call.
    fn in_flight(&mut self, call: &serde_json::Value, depth: usize, total: usize) -> (f64, f64) {
        let cpu_before = self.cpu();
        let started = Instant::now();
        let mut sent = 0;
        let mut answered = 0;
        while sent < depth.min(total) {
            self.send("tools/call", call);
            sent += 1;
        }
        let mut line = String::new();
        while answered < total {
            line.clear();
            assert!(
                self.stdout.read_line(&mut line).unwrap() > 0,
                "server closed stdout"
            );
            // Only answers carry a result; the `isError` test is cheap on the raw line.
            if line.contains("\"result\"") {
                assert!(!line.contains("\"isError\":true"), "{line}");
                answered += 1;
                if sent < total {
                    self.send("tools/call", call);
                    sent += 1;
                }
            }
        }
        let wall = started.elapsed();
        let cpu_after = self.cpu();
        let cpu = (cpu_after.0 + cpu_after.1).saturating_sub(cpu_before.0 + cpu_before.1);
        (total as f64 / wall.as_secs_f64(), us(cpu) / total as f64)
    }

    /// The resident set now and its peak so far, in KiB (`VmRSS`, `VmHWM`).
    fn memory(&self) -> (u64, u64) {
        let [rss, peak] = self.status_kib(["VmRSS:", "VmHWM:"]);
        (rss, peak)
    }

    /// Fields of `/proc/<pid>/status` given in kB, by name (with the colon).
    fn status_kib<const N: usize>(&self, names: [&str; N]) -> [u64; N] {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        names.map(|name| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                .unwrap()
        })
    }

    /// The resident set's parts now, in KiB: anonymous memory and file pages (the binary's code
    /// and data among them).
    fn memory_parts(&self) -> (u64, u64) {
        let [anonymous, file] = self.status_kib(["RssAnon:", "RssFile:"]);
        (anonymous, file)
    }

    /// Starts a new peak: `VmHWM` is the current resident set from here.
    fn reset_peak(&self) {
        std::fs::write(format!("/proc/{}/clear_refs", self.child.id()), "5").unwrap();
    }

    /// One call, answered without error.
    fn call(&mut self, call: &serde_json::Value) -> serde_json::Value {
        let id = self.send("tools/call", call);
        let reply = self.wait_for(id);
        assert!(reply.get("error").is_none(), "{reply}");
        assert_ne!(reply["result"]["isError"], true, "{reply}");
        reply
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

/// `READS` calls one after another: their client-observed latencies (sorted) and the server's
/// CPU time.
struct Timed {
    latencies: Vec<Duration>,
    /// Server CPU time per call, user + system, in µs.
    cpu_us: f64,
    user_us: f64,
    system_us: f64,
    calls_per_second: f64,
}

impl std::fmt::Display for Timed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:.1} µs ({:.1} user + {:.1} system; {:.0} calls/s)",
            self.cpu_us, self.user_us, self.system_us, self.calls_per_second
        )
    }
}

/// Makes `READS` calls one after another.
fn timed_calls(server: &mut Server, method: &str, params: &serde_json::Value) -> Timed {
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
    Timed {
        latencies,
        cpu_us: us(user + system) / READS as f64,
        user_us: us(user) / READS as f64,
        system_us: us(system) / READS as f64,
        calls_per_second: READS as f64 / wall.as_secs_f64(),
    }
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

/// Set (to the file whose text it answers `read` with) in the environment of the benchmark
/// started as the no-op MCP server.
const FLOOR: &str = "GIMLET_BENCH_FLOOR_ANSWER";

/// The least an MCP server on rmcp does for a call, as rmcp's own examples start one (a
/// multi-threaded runtime, rmcp's stdio transport, a hand-written handler): it answers `read`
/// with a text it holds (the numbered lines gimlet answers the same call with) and any other
/// tool with "ok", touching no file. What is above it is what gimlet's checks and file work
/// cost; the protocol, the runtime and the pipes are in both.
fn floor_server(answer: &std::path::Path) {
    use rmcp::ServiceExt as _;
    use rmcp::model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
        PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    };
    use rmcp::service::RequestContext;
    use rmcp::{ErrorData, RoleServer, ServerHandler};

    struct Noop {
        answer: String,
    }

    impl ServerHandler for Noop {
        fn get_info(&self) -> ServerConfig {
            ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
        }

        async fn list_tools(
            &self,
            _page: Option<PaginatedRequestParams>,
            _rc: RequestContext<RoleServer>,
        ) -> Result<ListToolsResult, ErrorData> {
            let schema: serde_json::Map<String, serde_json::Value> =
                serde_json::from_value(serde_json::json!({"type": "object"})).unwrap();
            let schema = std::sync::Arc::new(schema);
            Ok(ListToolsResult::with_all_items(vec![
                Tool::new("read", "Answers a fixed text", schema.clone()),
                Tool::new("edit", "Answers ok", schema),
            ]))
        }

        async fn call_tool(
            &self,
            params: CallToolRequestParams,
            _rc: RequestContext<RoleServer>,
        ) -> Result<CallToolResponse, ErrorData> {
            let text = if params.name == "read" {
                self.answer.clone()
            } else {
                String::from("ok")
            };
            Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into())
        }
    }

    let answer = std::fs::read_to_string(answer).unwrap();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let running = Noop { answer }
                .serve(rmcp::transport::stdio())
                .await
                .unwrap();
            let _ = running.waiting().await;
        });
}

/// The no-op server on the official TypeScript SDK, as a JSON array: the node binary (itself,
/// not a wrapper: its CPU time is read from /proc) and `bench/noop-server.mjs`
/// (`bench/floor-compare.sh` sets it). Measured beside the rmcp one when set.
const TS_FLOOR: &str = "GIMLET_BENCH_TS_FLOOR";

/// Another gimlet binary to measure instead of the one built with this benchmark, for A/B
/// runs of two builds in one session.
const BINARY: &str = "GIMLET_BENCH_BINARY";

fn gimlet_binary() -> std::ffi::OsString {
    std::env::var_os(BINARY).unwrap_or_else(|| env!("CARGO_BIN_EXE_gimlet").into())
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
    let timed = timed_calls(&mut server, "tools/call", &call);
    server.stop();
    println!("other server: {}", other.command.join(" "));
    row("other: cold start to tools/list", &starts, true);
    row(
        "other: read round trip (client-observed)",
        &timed.latencies,
        false,
    );
    println!("other server CPU per read: {timed}");
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

/// One case of the benchmark, run alone with `cargo bench --bench stdio -- NAME`: it gets the
/// files' folder and the server's data folder.
type Case = fn(&std::path::Path, &std::path::Path);

fn main() {
    if let Some(root) = std::env::var_os(BARE) {
        bare_server(std::path::Path::new(&root));
        return;
    }
    if let Some(answer) = std::env::var_os(FLOOR) {
        floor_server(std::path::Path::new(&answer));
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("small.txt"), "one\ntwo\nthree\n").unwrap();
    std::fs::write(root.path().join("source.rs"), source_text(SOURCE_LINES)).unwrap();
    // `cargo bench --bench stdio -- bash` (or `memory`, `throughput`, `edit`): only that case.
    let cases: [(&str, Case); 4] = [
        ("bash", commands),
        ("memory", memory),
        ("throughput", throughput),
        ("edit", edits_here_and_in_memory),
    ];
    if let Some((_, case)) = cases
        .iter()
        .find(|(name, _)| std::env::args().skip(1).any(|a| a == *name))
    {
        case(root.path(), data.path());
        return;
    }

    let starts = cold_starts(|| Server::spawn(root.path(), data.path()));
    println!(
        "gimlet stdio benchmark ({STARTS} cold starts; {READS} sequential calls per row: a \
         3-line file, and a {SOURCE_LINES}-line source file of {} bytes)",
        source_text(SOURCE_LINES).len()
    );
    println!("| measure | median | p10 | p90 |");
    println!("|---|---|---|---|");
    row("cold start to tools/list", &starts, true);
    reads(root.path(), data.path());
    if let Ok(other) = std::env::var(OTHER) {
        let other = Other::parse(&other).unwrap_or_else(|| {
            panic!("{OTHER} must be {{\"command\": [\"server\", ...], \"call\": {{...}}}}")
        });
        measure_other(&other, root.path());
    }
    throughput(root.path(), data.path());
    edits_here_and_in_memory(root.path(), data.path());
    let tree = tempfile::tempdir().unwrap();
    parallel(tree.path(), data.path());
    memory(root.path(), data.path());
    commands(root.path(), data.path());
}

/// Lines of the typical source file read by absolute path.
const SOURCE_LINES: usize = 200;

/// Rust-like source text of `lines` lines, about 32 bytes a line as in ordinary code.
fn source_text(lines: usize) -> String {
    (0..lines)
        .map(|i| {
            let mut line = match i % 10 {
                0 => String::new(),
                1 => {
                    format!("/// Returns the value of item {i}, or the default when it is missing.")
                }
                2 => {
                    format!("pub fn item_{i}(map: &HashMap<String, usize>, key: &str) -> usize {{")
                }
                3 => String::from("    let value = map.get(key).copied().unwrap_or_default();"),
                4 => format!("    if value > {i} {{"),
                5 => String::from("        tracing::debug!(key, value, \"over the limit\");"),
                6 => String::from("        return value - 1;"),
                7 => String::from("    }"),
                8 => format!("    value + {i}"),
                _ => String::from("}"),
            };
            line.push('\n');
            line
        })
        .collect()
}

/// Sequential reads through gimlet (a 3-line file by relative path, the source file by
/// absolute and by relative path), `ping`, the bare loop and the no-op MCP server.
fn reads(root: &std::path::Path, data: &std::path::Path) {
    let small = serde_json::json!({"name": "read", "arguments": {"path": "small.txt"}});
    let absolute = root.join("source.rs").display().to_string();
    let source_abs = serde_json::json!({"name": "read", "arguments": {"path": absolute}});
    let source_rel = serde_json::json!({"name": "read", "arguments": {"path": "source.rs"}});
    let mut server = warmed_up(Server::spawn(root, data), &source_abs);
    // The no-op server answers the text gimlet answers.
    let answer = server.call(&source_abs)["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    let answer_file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(answer_file.path(), &answer).unwrap();
    let small_read = timed_calls(&mut server, "tools/call", &small);
    let abs_read = timed_calls(&mut server, "tools/call", &source_abs);
    let rel_read = timed_calls(&mut server, "tools/call", &source_rel);
    // Searches of a small folder (the two files), as hosts send them: by absolute path.
    let folder = root.display().to_string();
    let glob =
        serde_json::json!({"name": "glob", "arguments": {"pattern": "*.rs", "path": folder}});
    let grep = serde_json::json!({"name": "grep",
        "arguments": {"pattern": "over the limit", "path": folder}});
    let small_glob = timed_calls(&mut server, "tools/call", &glob);
    let small_grep = timed_calls(&mut server, "tools/call", &grep);
    // A `ping` costs the same pipe reads and writes and JSON-RPC handling, but no tool and no
    // pipeline.
    let pings = timed_calls(&mut server, "ping", &serde_json::json!({}));
    server.stop();
    let mut floor = warmed_up(Server::spawn_floor(answer_file.path()), &source_abs);
    let floor_read = timed_calls(&mut floor, "tools/call", &source_abs);
    floor.stop();
    let ts_read = Server::spawn_ts_floor(answer_file.path()).map(|ts| {
        let mut ts = warmed_up(ts, &source_abs);
        let timed = timed_calls(&mut ts, "tools/call", &source_abs);
        ts.stop();
        timed
    });
    // The machine's floor for the small read (see `bare_server`).
    let mut bare = warmed_up(Server::spawn_bare(root), &small);
    let bare_read = timed_calls(&mut bare, "tools/call", &small);
    bare.stop();

    row(
        "read 3-line file, relative path",
        &small_read.latencies,
        false,
    );
    row(
        &format!("read {SOURCE_LINES}-line file, absolute path"),
        &abs_read.latencies,
        false,
    );
    row(
        &format!("read {SOURCE_LINES}-line file, relative path"),
        &rel_read.latencies,
        false,
    );
    row("glob in a 2-file folder", &small_glob.latencies, false);
    row("grep in a 2-file folder", &small_grep.latencies, false);
    row(
        "no-op rmcp server, same answer",
        &floor_read.latencies,
        false,
    );
    if let Some(ts) = &ts_read {
        row(
            "no-op TypeScript SDK server, same answer",
            &ts.latencies,
            false,
        );
    }
    println!("server CPU per call:");
    println!("- read 3-line file, relative: {small_read}");
    println!("- read {SOURCE_LINES}-line file, absolute: {abs_read}");
    println!("- read {SOURCE_LINES}-line file, relative: {rel_read}");
    println!("- glob in a 2-file folder: {small_glob}");
    println!("- grep in a 2-file folder: {small_grep}");
    println!("- ping (gimlet's protocol floor): {pings}");
    println!("- no-op rmcp server: {floor_read}");
    if let Some(ts) = &ts_read {
        println!("- no-op TypeScript SDK server: {ts}");
    }
    println!("- bare loop, 3-line file (this machine's floor): {bare_read}");
    let ratio = |a: &Timed, b: &Timed| {
        format!(
            "latency {:.2}x, CPU {:.2}x",
            us(percentile(&a.latencies, 0.5)) / us(percentile(&b.latencies, 0.5)),
            a.cpu_us / b.cpu_us
        )
    };
    println!(
        "{SOURCE_LINES}-line read against the no-op rmcp server: absolute path {}; relative path {}",
        ratio(&abs_read, &floor_read),
        ratio(&rel_read, &floor_read)
    );
    if let Some(ts) = &ts_read {
        println!(
            "{SOURCE_LINES}-line read against the no-op TypeScript SDK server: absolute path {}; \
             relative path {}",
            ratio(&abs_read, ts),
            ratio(&rel_read, ts)
        );
    }
}

/// Calls per second with 16 calls kept in flight (and one at a time), gimlet reading the
/// source file by absolute path against the no-op server answering the same text.
fn throughput(root: &std::path::Path, data: &std::path::Path) {
    const DEPTH: usize = 16;
    const CALLS: usize = 20_000;
    let absolute = root.join("source.rs").display().to_string();
    let call = serde_json::json!({"name": "read", "arguments": {"path": absolute}});
    let mut gimlet = warmed_up(Server::spawn(root, data), &call);
    let answer = gimlet.call(&call)["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    let answer_file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(answer_file.path(), &answer).unwrap();
    let mut floor = warmed_up(Server::spawn_floor(answer_file.path()), &call);
    // Alternating, so that a busy moment weighs on both alike.
    let gimlet_one = gimlet.in_flight(&call, 1, CALLS);
    let floor_one = floor.in_flight(&call, 1, CALLS);
    let gimlet_many = gimlet.in_flight(&call, DEPTH, CALLS);
    let floor_many = floor.in_flight(&call, DEPTH, CALLS);
    gimlet.stop();
    floor.stop();
    let ts = Server::spawn_ts_floor(answer_file.path()).map(|ts| {
        let mut ts = warmed_up(ts, &call);
        let one = ts.in_flight(&call, 1, CALLS);
        let many = ts.in_flight(&call, DEPTH, CALLS);
        ts.stop();
        (one, many)
    });
    println!("\n{CALLS} reads of the {SOURCE_LINES}-line file by absolute path");
    println!(
        "| in flight | gimlet calls/s | CPU per call | no-op rmcp server calls/s | CPU per call | ratio |"
    );
    println!("|---|---|---|---|---|---|");
    for (depth, (g, g_cpu), (f, f_cpu)) in
        [(1, gimlet_one, floor_one), (DEPTH, gimlet_many, floor_many)]
    {
        println!(
            "| {depth} | {g:.0} | {g_cpu:.1} µs | {f:.0} | {f_cpu:.1} µs | {:.2} |",
            g / f
        );
    }
    if let Some(((one, one_cpu), (many, many_cpu))) = ts {
        println!(
            "no-op TypeScript SDK server: {one:.0} calls/s one at a time ({one_cpu:.1} µs CPU per \
             call), {many:.0} with {DEPTH} in flight ({many_cpu:.1} µs); gimlet against it: \
             {:.2} and {:.2}",
            gimlet_one.0 / one,
            gimlet_many.0 / many
        );
    }
}

/// [`edits`] in the temporary folder (on disk here), and again in a folder on a memory file
/// system (`/dev/shm`, where there is one), where fsync costs nothing: the difference is what
/// durability costs on this disk, the rest is gimlet's.
fn edits_here_and_in_memory(root: &std::path::Path, data: &std::path::Path) {
    edits(root, data, "the temporary folder");
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir()
        && let Ok(memory) = tempfile::tempdir_in(shm)
    {
        edits(memory.path(), data, "a memory file system (/dev/shm)");
    }
}

/// `edit` of a 60 KB file in `root`, one after another, against the no-op server answering the
/// same request. A `.txt` file: no language server is started for it, so what is measured is
/// the edit (the `lsp` benchmark measures the servers).
fn edits(root: &std::path::Path, data: &std::path::Path, place: &str) {
    const EDITS: usize = 2_000;
    let path = root.join("big.txt");
    std::fs::write(&path, edit_text()).unwrap();
    let path = path.display().to_string();
    let mut server = Server::spawn(root, data);
    server.initialize();
    server.call(&serde_json::json!({"name": "read", "arguments": {"path": path}}));
    let edit = |from: &str, to: &str| {
        serde_json::json!({"name": "edit", "arguments": {"path": path,
            "old_string": format!("const MARKER: u32 = {from};"),
            "new_string": format!("const MARKER: u32 = {to};")}})
    };
    let (forth, back) = (edit("0", "1"), edit("1", "0"));
    let timed_every = |server: &mut Server, n: usize, gap: Duration| {
        let cpu_before = server.cpu();
        let mut latencies = Vec::with_capacity(n);
        for i in 0..n {
            pause(gap);
            let call = if i % 2 == 0 { &forth } else { &back };
            let started = Instant::now();
            server.call(call);
            latencies.push(started.elapsed());
        }
        let cpu_after = server.cpu();
        let cpu = (cpu_after.0 + cpu_after.1).saturating_sub(cpu_before.0 + cpu_before.1);
        latencies.sort();
        (latencies, us(cpu) / n as f64)
    };
    let timed = |server: &mut Server, n: usize| timed_every(server, n, Duration::ZERO);
    timed(&mut server, 100);
    let (latencies, cpu) = timed(&mut server, EDITS);
    let (paced, paced_cpu) = timed_every(&mut server, PACED, PACE);
    server.stop();
    let answer_file = tempfile::NamedTempFile::new().unwrap();
    let mut floor = Server::spawn_floor(answer_file.path());
    floor.initialize();
    timed(&mut floor, 100);
    let (floor_latencies, floor_cpu) = timed(&mut floor, EDITS);
    let (floor_paced, floor_paced_cpu) = timed_every(&mut floor, PACED, PACE);
    floor.stop();
    let durable = durable_replaces(root, EDITS, Duration::ZERO);
    let durable_paced = durable_replaces(root, PACED, PACE);
    println!(
        "\n`edit` of a {} KB file in {place}, {EDITS} times one after another",
        edit_text().len() / 1000
    );
    println!("| measure | median | p10 | p90 |");
    println!("|---|---|---|---|");
    row("gimlet `edit` (client-observed)", &latencies, true);
    row("no-op rmcp server, same request", &floor_latencies, true);
    row(
        "the file's durable replacement alone (write, fsync, rename, fsync of the folder)",
        &durable,
        true,
    );
    println!("server CPU per call: gimlet {cpu:.1} µs, no-op server {floor_cpu:.1} µs");
    println!(
        "\nThe same, {PACED} times, one every {} ms (as a host sends them: the machine idles in \
         between)",
        PACE.as_millis()
    );
    println!("| measure | median | p10 | p90 |");
    println!("|---|---|---|---|");
    row("gimlet `edit` (client-observed)", &paced, true);
    row("no-op rmcp server, same request", &floor_paced, true);
    row("the file's durable replacement alone", &durable_paced, true);
    println!("server CPU per call: gimlet {paced_cpu:.1} µs, no-op server {floor_paced_cpu:.1} µs");
}

/// Edits measured again one at a time with a pause before each, as hosts send them.
const PACED: usize = 200;
/// The pause before each of those edits.
const PACE: Duration = Duration::from_millis(50);

/// Waits `gap` (nothing for zero).
fn pause(gap: Duration) {
    let until = Instant::now() + gap;
    while let Some(left) = until.checked_duration_since(Instant::now()) {
        if left.is_zero() {
            break;
        }
        std::thread::park_timeout(left);
    }
}

/// The least a durable replacement of the edited file costs on this file system, done by this
/// process: write a temporary file next to it, fsync it, rename it over the file, fsync the
/// folder. Sorted times of `n` replacements, each after a pause of `gap`.
fn durable_replaces(root: &std::path::Path, n: usize, gap: Duration) -> Vec<Duration> {
    let dir = root.join("durable");
    std::fs::create_dir_all(&dir).unwrap();
    let folder = std::fs::File::open(&dir).unwrap();
    let (one, other) = (edit_text(), edit_text().replace("= 0;", "= 1;"));
    let mut times = Vec::with_capacity(n);
    for i in 0..n {
        pause(gap);
        let started = Instant::now();
        let temp = dir.join(".big.txt.tmp");
        let mut file = std::fs::File::create(&temp).unwrap();
        file.write_all(if i % 2 == 0 {
            one.as_bytes()
        } else {
            other.as_bytes()
        })
        .unwrap();
        file.sync_all().unwrap();
        drop(file);
        std::fs::rename(&temp, dir.join("big.txt")).unwrap();
        folder.sync_all().unwrap();
        times.push(started.elapsed());
    }
    times.sort();
    times
}

/// A 60 KB source file with one line the edits change.
fn edit_text() -> String {
    let mut text = source_text(1850);
    text.push_str("const MARKER: u32 = 0;\n");
    text
}

/// The server's resident set at rest, at its peak over each kind of call (10 MiB reads with
/// raised output limits among them), and a second after the last.
#[expect(
    clippy::disallowed_methods,
    reason = "a synchronous benchmark: it waits for the server to settle"
)]
fn memory(root: &std::path::Path, data: &std::path::Path) {
    let config = root.join("limits.toml");
    std::fs::write(
        &config,
        "[output]\nmax_lines = 1000000\nmax_bytes = 67108864\n",
    )
    .unwrap();
    let huge = root.join("huge.txt");
    let line = "the quick brown fox jumps over the lazy dog, again and again\n";
    std::fs::write(&huge, line.repeat((10 << 20) / line.len())).unwrap();
    std::fs::write(root.join("big.txt"), edit_text()).unwrap();
    let tree = root.join("tree");
    for d in 0..20 {
        let dir = tree.join(format!("dir{d}"));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..20 {
            std::fs::write(dir.join(format!("file{f}.rs")), source_text(100)).unwrap();
        }
    }
    let mut server = Server::spawn_configured(root, data, Some(&config));
    server.initialize();
    let id = server.send("tools/list", &serde_json::json!({}));
    server.wait_for(id);
    std::thread::sleep(Duration::from_secs(1));
    let (idle, _) = server.memory();
    let idle_parts = server.memory_parts();
    let edit = |from: &str, to: &str| {
        serde_json::json!({"name": "edit", "arguments": {"path": "big.txt",
            "old_string": format!("const MARKER: u32 = {from};"),
            "new_string": format!("const MARKER: u32 = {to};")}})
    };
    let phases: Vec<(&str, Vec<serde_json::Value>)> = vec![
        (
            "small reads (2,000)",
            vec![serde_json::json!({"name": "read", "arguments": {"path": "source.rs"}}); 2000],
        ),
        (
            "shell (100 `echo`)",
            vec![serde_json::json!({"name": "bash", "arguments": {"command": "echo hello"}}); 100],
        ),
        (
            "glob (200)",
            vec![serde_json::json!({"name": "glob", "arguments": {"pattern": "**/*.rs"}}); 200],
        ),
        (
            "edit of a 60 KB file (200)",
            std::iter::once(serde_json::json!({"name": "read", "arguments": {"path": "big.txt"}}))
                .chain((0..100).flat_map(|_| [edit("0", "1"), edit("1", "0")]))
                .collect(),
        ),
        (
            "grep (200)",
            vec![
                serde_json::json!({"name": "grep", "arguments": {"pattern": "over the limit",
                    "path": "tree", "output_mode": "content"}});
                200
            ],
        ),
        (
            "10 MiB reads (5)",
            vec![
                serde_json::json!({"name": "read", "arguments": {"path": "huge.txt",
                    "limit": 1_000_000}});
                5
            ],
        ),
    ];
    println!("\nmemory of the server (resident set; limits raised to 1,000,000 lines and 64 MiB)");
    println!("| phase | peak | after |");
    println!("|---|---|---|");
    println!("| at rest after initialize | {} | |", mib(idle));
    let mut peak = idle;
    for (name, calls) in phases {
        server.reset_peak();
        for call in &calls {
            let reply = server.call(call);
            if name.starts_with("10 MiB") {
                let text = reply["result"]["content"][0]["text"].as_str().unwrap();
                assert!(
                    text.len() > 10 << 20,
                    "a 10 MiB read was cut: {}",
                    text.len()
                );
            }
        }
        let (now, phase_peak) = server.memory();
        peak = peak.max(phase_peak);
        println!("| {name} | {} | {} |", mib(phase_peak), mib(now));
    }
    let (after_0, _) = server.memory();
    std::thread::sleep(Duration::from_secs(1));
    let (after_1, _) = server.memory();
    let after_parts = server.memory_parts();
    server.stop();
    println!(
        "peak over the workload {}; after the last call {}, a second later {}; at rest {}",
        mib(peak),
        mib(after_0),
        mib(after_1),
        mib(idle)
    );
    println!(
        "of which anonymous memory and file pages (the binary's code among them): at rest {} and \
         {}, at the end {} and {}",
        mib(idle_parts.0),
        mib(idle_parts.1),
        mib(after_parts.0),
        mib(after_parts.1)
    );
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
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
    // The default shape is text only: the footer says `[exit code 0 · 0.0 s · sandboxed]`.
    let sandboxed = first["result"]["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|block| block["text"].as_str())
        .any(|text| text.ends_with("· sandboxed]"));
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
