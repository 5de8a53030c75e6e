//! The client side of the integration tests: spawn `gimlet`, initialize, call tools.

#![allow(dead_code, reason = "not every test uses every helper")]
#![expect(clippy::unwrap_used, reason = "test helpers fail loudly")]
#![expect(
    deprecated,
    reason = "roots are deprecated in 2026-07-28 but still served"
)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, CallToolResult, CancelledNotificationParam, ClientCapabilities,
    ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction, Implementation,
    ListRootsResult, LoggingMessageNotificationParam, ProgressNotificationParam, RequestId, Root,
};
use rmcp::service::{NotificationContext, RequestContext, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, ErrorData, RoleClient, ServiceExt};
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::process::Command;

/// How the test client answers elicitations.
pub type Elicit = Arc<dyn Fn(&ElicitRequestParams) -> ElicitResult + Send + Sync>;

/// A client that records what the server sends and answers elicitations from a script.
#[derive(Clone, Default)]
pub struct TestClient {
    pub elicit: Option<Elicit>,
    pub elicitations: Arc<Mutex<Vec<ElicitRequestParams>>>,
    pub progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
    /// Waits this long before answering an elicitation.
    pub elicit_delay: Option<std::time::Duration>,
    /// When set, the client declares roots and lists these `file://` URIs.
    pub roots: Option<Arc<Mutex<Vec<String>>>>,
    /// `notifications/message` received.
    pub logs: Arc<Mutex<Vec<LoggingMessageNotificationParam>>>,
    /// `notifications/tools/list_changed` received.
    pub tools_changed: Arc<std::sync::atomic::AtomicUsize>,
    /// Waits this long before answering `roots/list`.
    pub roots_delay: Option<std::time::Duration>,
    /// The request ids of the elicitations received.
    pub elicitation_ids: Arc<Mutex<Vec<RequestId>>>,
    /// `notifications/cancelled` received.
    pub cancelled: Arc<Mutex<Vec<CancelledNotificationParam>>>,
    /// The `clientInfo.name` to give (default `gimlet-tests`).
    pub name: Option<&'static str>,
}

impl TestClient {
    /// A client that declares elicitation and answers with `answer`.
    pub fn answering(
        answer: impl Fn(&ElicitRequestParams) -> ElicitResult + Send + Sync + 'static,
    ) -> Self {
        Self {
            elicit: Some(Arc::new(answer)),
            ..Self::default()
        }
    }

    /// A client that accepts with this content.
    pub fn accepting(content: Value) -> Self {
        Self::answering(move |_| {
            ElicitResult::new(ElicitationAction::Accept).with_content(content.clone())
        })
    }
}

impl ClientHandler for TestClient {
    fn get_info(&self) -> ClientConfig {
        let mut caps = if self.elicit.is_some() {
            ClientCapabilities::builder().enable_elicitation().build()
        } else {
            ClientCapabilities::default()
        };
        if self.roots.is_some() {
            caps.roots = ClientCapabilities::builder()
                .enable_roots()
                .enable_roots_list_changed()
                .build()
                .roots;
        }
        ClientConfig::new(
            caps,
            Implementation::new(self.name.unwrap_or("gimlet-tests"), "0.0.0"),
        )
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        rc: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        self.elicitations.lock().unwrap().push(request.clone());
        self.elicitation_ids.lock().unwrap().push(rc.id.clone());
        if let Some(delay) = self.elicit_delay {
            tokio::time::sleep(delay).await;
        }
        Ok(match &self.elicit {
            Some(answer) => answer(&request),
            None => ElicitResult::new(ElicitationAction::Decline),
        })
    }

    async fn list_roots(
        &self,
        _rc: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        if let Some(delay) = self.roots_delay {
            tokio::time::sleep(delay).await;
        }
        let uris = self
            .roots
            .as_ref()
            .map(|roots| roots.lock().unwrap().clone())
            .unwrap_or_default();
        Ok(ListRootsResult::new(
            uris.into_iter().map(Root::new).collect(),
        ))
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _cx: NotificationContext<RoleClient>,
    ) {
        self.logs.lock().unwrap().push(params);
    }

    async fn on_cancelled(
        &self,
        params: CancelledNotificationParam,
        _cx: NotificationContext<RoleClient>,
    ) {
        self.cancelled.lock().unwrap().push(params);
    }

    async fn on_tool_list_changed(&self, _cx: NotificationContext<RoleClient>) {
        self.tools_changed
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _cx: NotificationContext<RoleClient>,
    ) {
        self.progress.lock().unwrap().push(params);
    }
}

/// A running `gimlet` with a temporary root folder.
pub struct Gimlet {
    pub client: RunningService<RoleClient, TestClient>,
    pub handler: TestClient,
    pub root: TempDir,
    pub data: TempDir,
    /// The server's process id.
    pub pid: u32,
}

/// The path of the built binary.
pub fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_gimlet")
}

/// A command for the binary that keeps its data (saved outputs) in `data`.
///
/// Results carry `structuredContent` here (`GIMLET_STRUCTURED_OUTPUT`), so that tests can read
/// their fields and check them against the output schemas; the text content is the same either
/// way. `tests/suite/shape.rs` and the `tools/list` snapshot check the default, text-only shape
/// (see [`default_shape`]).
pub fn command(data: &Path) -> Command {
    let mut command = Command::new(binary());
    command
        .env("XDG_DATA_HOME", data)
        .env("XDG_CONFIG_HOME", data)
        .env("GIMLET_STRUCTURED_OUTPUT", "true")
        .env_remove("RUST_LOG")
        .env_remove("TAVILY_API_KEY");
    // To see a server's log while a test runs: GIMLET_TEST_LOG=gimlet=debug cargo test ...
    if let Some(filter) = std::env::var_os("GIMLET_TEST_LOG") {
        command.env("RUST_LOG", filter);
    }
    command.kill_on_drop(true);
    command
}

/// Makes `command` serve results as a user's gimlet does by default: text only.
pub fn default_shape(command: &mut Command) -> &mut Command {
    command.env_remove("GIMLET_STRUCTURED_OUTPUT")
}

/// `gimlet serve --root <root>` for a client that speaks raw JSON-RPC lines: stdin and stdout
/// piped, stderr dropped (set it again to read it).
pub fn raw_command(data: &Path, root: &Path) -> Command {
    let mut command = command(data);
    command
        .arg("--root")
        .arg(root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    command
}

/// The `initialize` request of a raw client named `client`, id 1.
pub fn initialize_request(client: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": client, "version": "1"}}})
}

/// Writes each of `lines` with its newline, as a raw client does.
pub async fn write_lines(stdin: &mut tokio::process::ChildStdin, lines: &[impl std::fmt::Display]) {
    use tokio::io::AsyncWriteExt as _;
    for line in lines {
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
    }
    stdin.flush().await.unwrap();
}

impl Gimlet {
    /// Starts `gimlet serve --root <tmp>` with a default client.
    pub async fn start() -> Self {
        Self::start_with(TestClient::default(), &[]).await
    }

    /// Like [`Gimlet::start_with`], with this text as the config file (`--config`). The
    /// directory returned holds `config.toml` and must live as long as the server.
    pub async fn start_with_config(
        handler: TestClient,
        config: &str,
        args: &[&str],
    ) -> (Self, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, config).unwrap();
        let mut all = vec!["--config", path.to_str().unwrap()];
        all.extend_from_slice(args);
        (Self::start_with(handler, &all).await, dir)
    }

    /// Starts with a client handler and extra arguments.
    pub async fn start_with(handler: TestClient, args: &[&str]) -> Self {
        Self::start_adjusted(handler, args, |_| {}).await
    }

    /// Starts with the default, text-only shape of results (see [`command`]).
    pub async fn start_default_shape(handler: TestClient, args: &[&str]) -> Self {
        Self::start_adjusted(handler, args, |command| {
            default_shape(command);
        })
        .await
    }

    /// Starts with a client handler and extra arguments, `adjust`ing the command first.
    pub async fn start_adjusted(
        handler: TestClient,
        args: &[&str],
        adjust: impl FnOnce(&mut Command),
    ) -> Self {
        let root = tempfile::Builder::new()
            .prefix("gimlet-root")
            .tempdir()
            .unwrap();
        let data = tempfile::tempdir().unwrap();
        let mut command = command(data.path());
        command
            .arg("serve")
            .arg("--root")
            .arg(root.path())
            .args(args);
        adjust(&mut command);
        let (transport, _stderr) = TokioChildProcess::builder(command)
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let pid = transport.id().unwrap();
        let client = handler.clone().serve(transport).await.unwrap();
        Self {
            client,
            handler,
            root,
            data,
            pid,
        }
    }

    /// The resolved root folder.
    pub fn root(&self) -> PathBuf {
        let path = std::fs::canonicalize(self.root.path()).unwrap();
        // Windows canonicalises to the verbatim `\\?\C:\...`; gimlet shows the usual `C:\...`.
        #[cfg(windows)]
        if let Some(usual) = path
            .to_str()
            .and_then(|p| p.strip_prefix(r"\\?\"))
            .filter(|p| p.as_bytes().get(1) == Some(&b':'))
        {
            return PathBuf::from(usual);
        }
        path
    }

    /// Writes a file below the root.
    pub fn write(&self, rel: &str, content: impl AsRef<[u8]>) -> PathBuf {
        let path = self.root().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, content).unwrap();
        path
    }

    /// Calls a tool; protocol errors panic.
    pub async fn call(&self, tool: &str, args: Value) -> CallToolResult {
        self.try_call(tool, args).await.unwrap()
    }

    /// Calls a tool.
    pub async fn try_call(
        &self,
        tool: &str,
        args: Value,
    ) -> Result<CallToolResult, rmcp::ServiceError> {
        let Value::Object(args) = args else {
            panic!("arguments must be an object")
        };
        self.client
            .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args))
            .await
    }

    /// Stops the server.
    pub async fn stop(self) {
        let _ = self.client.cancel().await;
    }
}

/// The text blocks of a result, joined.
pub fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text())
        .map(|t| t.text.as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// What a client shows the model of a result: its text blocks joined by line breaks, and a
/// resource link as a line of its name and URI with room for a host's words around them
/// (32 bytes).
pub fn shown(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| {
            c.as_text().map(|t| t.text.clone()).or_else(|| {
                c.as_resource_link()
                    .map(|l| format!("{}{}{}", l.name, l.uri, " ".repeat(32)))
            })
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Asserts that a result, as a client shows it ([`shown`]), fits the default limits: 2000
/// lines and 45 KiB (issue 38: a host keeps only the first 2000 lines).
#[track_caller]
pub fn assert_fits_default_limits(result: &CallToolResult) {
    let text = shown(result);
    let lines = text.lines().count();
    assert!(
        lines <= 2000 && text.len() <= 45 * 1024,
        "{lines} lines, {} bytes; it ends:\n{}",
        text.len(),
        text.lines().rev().take(6).collect::<Vec<_>>().join("\n")
    );
}

/// Text with Windows' path separators turned into `/`, so that one assertion serves every
/// system (on Unix a `\\` is a character of a name, and the text is left as it is).
pub fn slashed(text: &str) -> String {
    if cfg!(windows) {
        text.replace('\\', "/")
    } else {
        text.to_owned()
    }
}

/// Asserts a successful result and returns its text.
#[track_caller]
pub fn ok_text(result: &CallToolResult) -> String {
    assert_eq!(
        result.is_error,
        Some(false),
        "expected success, got: {}",
        text(result)
    );
    text(result)
}

/// Asserts an error result and returns its text.
#[track_caller]
pub fn err_text(result: &CallToolResult) -> String {
    assert_eq!(
        result.is_error,
        Some(true),
        "expected an error, got: {}",
        text(result)
    );
    text(result)
}

/// A marker unique to one test, to find its processes by their command line.
pub fn marker() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(1);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("{}{:04}.{}", 3000 + n, std::process::id() % 10_000, n)
}

/// Processes whose command line contains `needle` (read from `/proc`, so Linux only: elsewhere
/// a test that looked for processes would find none, and pass without checking anything).
#[cfg(target_os = "linux")]
pub fn processes_with(needle: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // Zombies are dead already.
            let zombie = state
                .rsplit(')')
                .next()
                .is_some_and(|rest| rest.trim_start().starts_with('Z'));
            !zombie
                && String::from_utf8_lossy(&cmdline)
                    .replace('\0', " ")
                    .contains(needle)
        })
        .collect()
}

/// Waits up to `limit` for `check` to hold.
pub async fn eventually(limit: std::time::Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + limit;
    while std::time::Instant::now() < deadline {
        if check() {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    check()
}

/// Resident memory of a process, in KiB (from `/proc`: Linux only).
#[cfg(target_os = "linux")]
pub fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// A temp folder outside the roots that a sandboxed command can see (read-only): on Linux in
/// `/var/tmp` where there is one, since a sandboxed command's `/tmp` is its session's own and
/// does not show the machine's. Tests that aim a command at a folder outside the roots use it.
pub fn outside_tempdir() -> TempDir {
    let var_tmp = Path::new("/var/tmp");
    let parent = if cfg!(target_os = "linux") && var_tmp.is_dir() {
        var_tmp.to_owned()
    } else {
        std::env::temp_dir()
    };
    tempfile::Builder::new()
        .prefix("gimlet-outside")
        .tempdir_in(parent)
        .unwrap()
}

/// Whether the sandbox works on this machine (the helper's probe).
pub fn sandbox_works() -> bool {
    let out = std::process::Command::new(binary())
        .args(["__exec", "--probe"])
        .output()
        .unwrap();
    let support: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    support["landlock"] != "none" && support["seccomp"] == true
}
