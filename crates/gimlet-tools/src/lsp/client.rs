//! One running language server: the JSON-RPC connection over its stdin and stdout, the
//! answers to its requests, and what it told us (diagnostics, progress).

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt};
use tokio::sync::{Notify, mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::framing::{FrameError, frame, read_message, write_frame};
use super::position::{path_of, uri_of};
use super::servers::ServerSpec;
use super::spawn::{Process, kill_tree};

use crate::util::MutexExt as _;

/// Files whose diagnostics we keep at most, per server.
const MAX_DIAGNOSTIC_FILES: usize = 10_000;
/// Diagnostics kept per file at most.
const MAX_DIAGNOSTICS_PER_FILE: usize = 2_000;
/// Lines of the server's stderr kept for a crash report.
const STDERR_TAIL: usize = 20;
/// Bytes of one stderr line kept.
const STDERR_LINE: u64 = 4096;

/// Why a request got no result.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum RequestError {
    /// No answer in time (the request was cancelled at the server).
    #[error("{server} did not answer `{method}` within {secs:.1} s")]
    Timeout {
        /// The server.
        server: String,
        /// The request.
        method: String,
        /// The limit.
        secs: f64,
    },
    /// The call was cancelled (so was the request).
    #[error("cancelled")]
    Cancelled,
    /// The server is gone.
    #[error("{0}")]
    Exited(String),
    /// The server answered with an error.
    #[error("{server} answered `{method}` with an error: {message}")]
    Server {
        /// The server.
        server: String,
        /// The request.
        method: String,
        /// Its message.
        message: String,
    },
}

/// A file's diagnostics as last published.
#[derive(Debug, Clone, Default)]
pub(crate) struct Published {
    /// The publication's place in the order of all of this server's publications.
    pub(crate) seq: u64,
    /// The document version they are for, if the server said.
    pub(crate) version: Option<i32>,
    /// The diagnostics.
    pub(crate) items: Vec<lsp_types::Diagnostic>,
}

/// What the server told us.
#[derive(Debug, Default)]
struct State {
    diagnostics: HashMap<PathBuf, Published>,
    seq: u64,
    /// Work-done progress under way: token -> title.
    progress: HashMap<String, String>,
    /// Why the server is gone, once it is.
    exit: Option<String>,
}

/// A document as the server has it.
#[derive(Debug, Clone)]
struct Document {
    version: i32,
    text: String,
}

/// What [`Client::sync`] did.
#[derive(Debug, Clone)]
pub(crate) struct Synced {
    /// The version the server has now.
    pub(crate) version: i32,
    /// The publication count before the change was sent: a report for the change comes after.
    pub(crate) seq_before: u64,
    /// Whether anything was sent (the server's text was already this one otherwise).
    pub(crate) sent: bool,
}

/// The outcome of waiting for a file's diagnostics.
#[derive(Debug, Clone)]
pub(crate) enum Waited {
    /// The server reported.
    Reported(Published),
    /// Nothing came in time.
    TimedOut,
    /// The server is gone.
    Exited(String),
}

/// A running server.
pub(crate) struct Client {
    pub(crate) spec: Arc<ServerSpec>,
    /// The project root it was started for.
    pub(crate) root: PathBuf,
    /// A short name for messages (`basedpyright-langserver`).
    pub(crate) name: String,
    /// Whether it runs in the sandbox.
    pub(crate) sandboxed: bool,
    pid: Option<u32>,
    outgoing: Mutex<Option<mpsc::UnboundedSender<Vec<u8>>>>,
    next_id: AtomicI64,
    pending: Mutex<HashMap<i64, oneshot::Sender<Result<Value, String>>>>,
    state: Mutex<State>,
    /// Woken on every publication, progress change and the exit.
    changed: Notify,
    stderr_tail: Mutex<VecDeque<String>>,
    documents: tokio::sync::Mutex<HashMap<PathBuf, Document>>,
    capabilities: Mutex<Value>,
    stopping: AtomicBool,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("name", &self.name)
            .field("root", &self.root)
            .field("pid", &self.pid)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// Takes over a started process: starts its reader, writer and stderr tasks, then
    /// initializes it. Fails (and kills it) if it does not answer `initialize` in `timeout`.
    pub(crate) async fn start(
        spec: Arc<ServerSpec>,
        root: PathBuf,
        name: String,
        process: Process,
        timeout: Duration,
    ) -> Result<Arc<Self>, String> {
        let Process {
            child,
            stdin,
            stdout,
            stderr,
            sandboxed,
        } = process;
        let (tx, rx) = mpsc::unbounded_channel();
        let client = Arc::new(Self {
            spec,
            root,
            name,
            sandboxed,
            pid: child.id(),
            outgoing: Mutex::new(Some(tx)),
            next_id: AtomicI64::new(1),
            pending: Mutex::new(HashMap::new()),
            state: Mutex::new(State::default()),
            changed: Notify::new(),
            stderr_tail: Mutex::new(VecDeque::new()),
            documents: tokio::sync::Mutex::new(HashMap::new()),
            capabilities: Mutex::new(Value::Null),
            stopping: AtomicBool::new(false),
        });
        tokio::spawn(write_loop(stdin, rx));
        tokio::spawn(stderr_loop(Arc::clone(&client), stderr));
        tokio::spawn(read_loop(Arc::clone(&client), stdout, child));
        let never = CancellationToken::new();
        let result = client
            .request("initialize", client.initialize_params(), timeout, &never)
            .await;
        match result {
            Ok(result) => {
                *client.capabilities.locked() =
                    result.get("capabilities").cloned().unwrap_or_default();
                client.notify("initialized", json!({}));
                Ok(client)
            }
            Err(err) => {
                client.kill();
                // Give the reader a moment to collect the exit status and stderr.
                let _ = tokio::time::timeout(Duration::from_millis(500), client.exited()).await;
                let exit = client.state.locked().exit.clone();
                let tail = client.stderr_tail();
                let mut message = match (err, exit) {
                    (RequestError::Exited(_), Some(exit)) => exit,
                    (err, _) => err.to_string(),
                };
                if !tail.is_empty() {
                    message.push_str(&format!("; its last output: {tail}"));
                }
                Err(message)
            }
        }
    }

    fn initialize_params(&self) -> Value {
        let root_uri = uri_of(&self.root);
        let folder_name = self.root.file_name().map_or_else(
            || String::from("root"),
            |n| n.to_string_lossy().into_owned(),
        );
        // vscode-languageserver's servers exit when they cannot see this process (a check
        // every 3 s): a sandboxed one, in its own PID namespace and Landlock scope, never
        // can. It needs no watchdog: its stdin closes and its process group is killed when
        // gimlet goes. `null` is what the protocol says for "no parent to watch".
        let process_id = (!self.sandboxed).then(std::process::id);
        json!({
            "processId": process_id,
            "clientInfo": {"name": "gimlet", "version": env!("CARGO_PKG_VERSION")},
            "rootUri": root_uri,
            "rootPath": self.root,
            "workspaceFolders": [{"uri": root_uri, "name": folder_name}],
            "initializationOptions": self.spec.initialization_options,
            "capabilities": {
                "general": {"positionEncodings": ["utf-16"]},
                "window": {"workDoneProgress": true, "showMessage": {}},
                "workspace": {
                    "configuration": true,
                    "workspaceFolders": true,
                    "applyEdit": false,
                    "symbol": {"dynamicRegistration": false},
                    "didChangeConfiguration": {"dynamicRegistration": false},
                },
                "textDocument": {
                    "synchronization": {"didSave": true, "dynamicRegistration": false},
                    "publishDiagnostics": {
                        "versionSupport": true,
                        "relatedInformation": false,
                        "codeDescriptionSupport": false,
                    },
                    "hover": {"contentFormat": ["plaintext", "markdown"]},
                    "definition": {"linkSupport": true},
                    "references": {},
                    "documentSymbol": {"hierarchicalDocumentSymbolSupport": true},
                    "rename": {"prepareSupport": false},
                },
            },
        })
    }

    /// The server's process id (the helper's, when it runs under one).
    pub(crate) fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// Whether the server is still there.
    pub(crate) fn alive(&self) -> bool {
        self.state.locked().exit.is_none()
    }

    /// Why the server is gone, if it is.
    pub(crate) fn exit_reason(&self) -> Option<String> {
        self.state.locked().exit.clone()
    }

    /// Whether gimlet itself stopped it.
    pub(crate) fn stopped_by_us(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    /// Waits until the server is gone.
    pub(crate) async fn exited(&self) {
        loop {
            let notified = self.changed.notified();
            if !self.alive() {
                return;
            }
            notified.await;
        }
    }

    /// Why it is gone, with the last lines of its stderr: what a failed call reports.
    pub(crate) fn gone(&self, reason: String) -> String {
        match self.stderr_tail() {
            tail if tail.is_empty() => reason,
            tail => format!("{reason}; its last output: {tail}"),
        }
    }

    /// The last lines of its stderr, joined.
    pub(crate) fn stderr_tail(&self) -> String {
        self.stderr_tail
            .locked()
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join(" | ")
    }

    /// The titles of work-done progress under way (indexing, loading ...).
    pub(crate) fn busy(&self) -> Vec<String> {
        let mut titles: Vec<String> = self.state.locked().progress.values().cloned().collect();
        titles.sort();
        titles.dedup();
        titles
    }

    /// A file's diagnostics as last published, if any were.
    pub(crate) fn published(&self, path: &Path) -> Option<Published> {
        self.state.locked().diagnostics.get(path).cloned()
    }

    /// Every file's diagnostics as last published, by path.
    pub(crate) fn all_published(&self) -> Vec<(PathBuf, Published)> {
        let state = self.state.locked();
        let mut all: Vec<_> = state
            .diagnostics
            .iter()
            .map(|(p, d)| (p.clone(), d.clone()))
            .collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }

    /// The text the server has of a file, if it is open.
    pub(crate) async fn open_text(&self, path: &Path) -> Option<String> {
        self.documents
            .lock()
            .await
            .get(path)
            .map(|d| d.text.clone())
    }

    /// Makes the server's copy of `path` read `text`: `didOpen` the first time, then
    /// `didChange` (the whole text) and `didSave` when the server wants saves.
    pub(crate) async fn sync(&self, path: &Path, text: String) -> Synced {
        let mut documents = self.documents.lock().await;
        let seq_before = self.state.locked().seq;
        let uri = uri_of(path);
        match documents.get_mut(path) {
            Some(doc) if doc.text == text => Synced {
                version: doc.version,
                seq_before,
                sent: false,
            },
            Some(doc) => {
                doc.version += 1;
                doc.text = text;
                self.notify(
                    "textDocument/didChange",
                    json!({
                        "textDocument": {"uri": uri, "version": doc.version},
                        "contentChanges": [{"text": doc.text}],
                    }),
                );
                if self.wants_save() {
                    self.notify(
                        "textDocument/didSave",
                        json!({"textDocument": {"uri": uri}}),
                    );
                }
                Synced {
                    version: doc.version,
                    seq_before,
                    sent: true,
                }
            }
            None => {
                self.notify(
                    "textDocument/didOpen",
                    json!({"textDocument": {
                        "uri": uri,
                        "languageId": self.spec.language_id(path),
                        "version": 1,
                        "text": text,
                    }}),
                );
                documents.insert(path.to_owned(), Document { version: 1, text });
                Synced {
                    version: 1,
                    seq_before,
                    sent: true,
                }
            }
        }
    }

    /// Forgets a file that is gone: `didClose` if it was open, and its diagnostics.
    pub(crate) async fn close(&self, path: &Path) {
        if self.documents.lock().await.remove(path).is_some() {
            self.notify(
                "textDocument/didClose",
                json!({"textDocument": {"uri": uri_of(path)}}),
            );
        }
        self.state.locked().diagnostics.remove(path);
    }

    fn wants_save(&self) -> bool {
        let caps = self.capabilities.locked();
        match caps.get("textDocumentSync") {
            Some(Value::Object(sync)) => sync
                .get("save")
                .is_some_and(|s| s.as_bool().unwrap_or(s.is_object())),
            _ => false,
        }
    }

    /// Waits until `deadline` for a report on `path` newer than `synced`: a publication after
    /// the change for its version (or, from a server that sends no versions, any). A server
    /// that reports in parts ([`ServerSpec::settle`]) gets that long for the next part.
    pub(crate) async fn wait_for(
        &self,
        path: &Path,
        synced: &Synced,
        deadline: tokio::time::Instant,
        cancel: &CancellationToken,
    ) -> Waited {
        if !synced.sent {
            // Nothing changed for the server: what it said last still holds.
            if let Some(published) = self.published(path) {
                return Waited::Reported(published);
            }
        }
        let mut got: Option<Published> = None;
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let state = self.state.locked();
                if let Some(p) = state.diagnostics.get(path)
                    && p.seq > got.as_ref().map_or(synced.seq_before, |g| g.seq)
                    && p.version.is_none_or(|v| v >= synced.version)
                {
                    got = Some(p.clone());
                }
                if let Some(exit) = &state.exit {
                    return got.map_or_else(|| Waited::Exited(exit.clone()), Waited::Reported);
                }
            }
            let until = match &got {
                Some(_) if self.spec.settle.is_zero() => break,
                Some(_) => deadline.min(tokio::time::Instant::now() + self.spec.settle),
                None => deadline,
            };
            tokio::select! {
                () = &mut notified => {}
                () = tokio::time::sleep_until(until) => break,
                () = cancel.cancelled() => break,
            }
        }
        got.map_or(Waited::TimedOut, Waited::Reported)
    }

    /// Sends a request and waits for its result, at most `timeout`. On timeout or
    /// cancellation the server gets `$/cancelRequest`.
    pub(crate) async fn request(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Result<Value, RequestError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.pending.locked().insert(id, tx);
        let mut guard = Pending {
            client: self,
            id,
            done: false,
        };
        if let Some(exit) = self.exit_reason() {
            return Err(RequestError::Exited(exit));
        }
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let answer = tokio::select! {
            answer = rx => answer,
            () = tokio::time::sleep(timeout) => {
                return Err(RequestError::Timeout {
                    server: self.name.clone(),
                    method: method.to_owned(),
                    secs: timeout.as_secs_f64(),
                });
            }
            () = cancel.cancelled() => return Err(RequestError::Cancelled),
        };
        guard.done = true;
        match answer {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(message)) => Err(RequestError::Server {
                server: self.name.clone(),
                method: method.to_owned(),
                message,
            }),
            Err(_) => Err(RequestError::Exited(self.exit_reason().unwrap_or_else(
                || format!("{} stopped before it answered", self.name),
            ))),
        }
    }

    /// Sends a notification.
    pub(crate) fn notify(&self, method: &str, params: Value) {
        let mut message = serde_json::Map::new();
        message.insert(String::from("jsonrpc"), json!("2.0"));
        message.insert(String::from("method"), json!(method));
        message.insert(String::from("params"), params);
        self.send(&Value::Object(message));
    }

    fn send(&self, message: &Value) {
        let body = serde_json::to_vec(message).unwrap_or_default();
        if let Some(tx) = self.outgoing.locked().as_ref() {
            let _ = tx.send(frame(&body));
        }
    }

    /// Asks the server to shut down and exit, and waits up to `grace` for it; then kills it.
    pub(crate) async fn shutdown(&self, grace: Duration) {
        self.stopping.store(true, Ordering::SeqCst);
        if self.alive() {
            let never = CancellationToken::new();
            let _ = self.request("shutdown", Value::Null, grace, &never).await;
            self.notify("exit", Value::Null);
        }
        // Closing its stdin ends a server that ignored `exit`.
        self.outgoing.locked().take();
        if tokio::time::timeout(grace, self.exited()).await.is_err() {
            self.kill();
        }
    }

    /// Kills the server and what it started, at once.
    pub(crate) fn kill(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.outgoing.locked().take();
        if let Some(pid) = self.pid {
            kill_tree(pid);
        }
    }

    fn answer(&self, id: &Value, result: Result<Value, (i64, String)>) {
        let message = match result {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err((code, message)) => {
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
            }
        };
        self.send(&message);
    }

    /// A request from the server: answered at once.
    fn on_request(&self, id: &Value, method: &str, params: &Value) {
        let result = match method {
            "workspace/configuration" => {
                let items = params.get("items").and_then(Value::as_array);
                let answers: Vec<Value> = items
                    .map(|items| {
                        items
                            .iter()
                            .map(|item| {
                                let section = item.get("section").and_then(Value::as_str);
                                section_of(&self.spec.settings, section)
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                Ok(Value::Array(answers))
            }
            "workspace/workspaceFolders" => {
                let name = self
                    .root
                    .file_name()
                    .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
                Ok(json!([{"uri": uri_of(&self.root), "name": name}]))
            }
            "window/workDoneProgress/create"
            | "client/registerCapability"
            | "client/unregisterCapability"
            | "window/showMessageRequest"
            | "window/showDocument"
            | "workspace/diagnostic/refresh"
            | "workspace/semanticTokens/refresh"
            | "workspace/inlayHint/refresh"
            | "workspace/inlineValue/refresh"
            | "workspace/codeLens/refresh" => Ok(Value::Null),
            // We never let a server change files: edits go through the file tools.
            "workspace/applyEdit" => Ok(json!({
                "applied": false,
                "failureReason": "gimlet applies edits only through its file tools",
            })),
            _ => Err((-32601, format!("gimlet does not handle `{method}`"))),
        };
        self.answer(id, result);
    }

    /// A notification from the server.
    fn on_notification(&self, method: &str, params: Value) {
        match method {
            "textDocument/publishDiagnostics" => {
                let Ok(mut params) =
                    serde_json::from_value::<lsp_types::PublishDiagnosticsParams>(params)
                else {
                    return;
                };
                let Some(path) = path_of(&params.uri) else {
                    return;
                };
                tracing::debug!(
                    server = %self.name,
                    path = %path.display(),
                    version = ?params.version,
                    count = params.diagnostics.len(),
                    "diagnostics published"
                );
                params.diagnostics.truncate(MAX_DIAGNOSTICS_PER_FILE);
                let mut state = self.state.locked();
                state.seq += 1;
                let seq = state.seq;
                if state.diagnostics.len() >= MAX_DIAGNOSTIC_FILES
                    && !state.diagnostics.contains_key(&path)
                {
                    // Keep the files with problems; forget clean ones first.
                    state.diagnostics.retain(|_, p| !p.items.is_empty());
                    if state.diagnostics.len() >= MAX_DIAGNOSTIC_FILES {
                        return;
                    }
                }
                state.diagnostics.insert(
                    path,
                    Published {
                        seq,
                        version: params.version,
                        items: params.diagnostics,
                    },
                );
                drop(state);
                self.changed.notify_waiters();
            }
            "$/progress" => {
                let token = match params.get("token") {
                    Some(Value::String(s)) => s.clone(),
                    Some(other) => other.to_string(),
                    None => return,
                };
                let value = params.get("value").cloned().unwrap_or_default();
                let mut state = self.state.locked();
                match value.get("kind").and_then(Value::as_str) {
                    Some("begin") => {
                        let title = value
                            .get("title")
                            .and_then(Value::as_str)
                            .unwrap_or("working")
                            .chars()
                            .take(80)
                            .collect();
                        if state.progress.len() < 256 {
                            state.progress.insert(token, title);
                        }
                    }
                    Some("end") => {
                        state.progress.remove(&token);
                    }
                    _ => {}
                }
                drop(state);
                self.changed.notify_waiters();
            }
            "window/logMessage" | "window/showMessage" => {
                let message = params.get("message").and_then(Value::as_str).unwrap_or("");
                tracing::debug!(server = %self.name, "{}", clip(message, 2000));
            }
            _ => {}
        }
    }

    fn on_response(&self, message: &Value) {
        let Some(id) = message.get("id").and_then(Value::as_i64) else {
            return;
        };
        let Some(tx) = self.pending.locked().remove(&id) else {
            return;
        };
        let result = match message.get("error") {
            Some(error) => Err(error
                .get("message")
                .and_then(Value::as_str)
                .map_or_else(|| error.to_string(), |m| clip(m, 1000))),
            None => Ok(message.get("result").cloned().unwrap_or(Value::Null)),
        };
        let _ = tx.send(result);
    }

    fn ended(&self, reason: String) {
        let mut state = self.state.locked();
        state.exit.get_or_insert(reason);
        state.progress.clear();
        drop(state);
        self.pending.locked().clear();
        self.outgoing.locked().take();
        self.changed.notify_waiters();
    }
}

/// A request in flight: dropped before its answer, it is cancelled at the server.
struct Pending<'a> {
    client: &'a Client,
    id: i64,
    done: bool,
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        self.client.pending.locked().remove(&self.id);
        if !self.done && self.client.alive() {
            self.client
                .notify("$/cancelRequest", json!({"id": self.id}));
        }
    }
}

/// The answer to one `workspace/configuration` item: the settings under `section` (a key of
/// the settings as written, or a dotted path into them), or null.
fn section_of(settings: &Value, section: Option<&str>) -> Value {
    let Some(section) = section.filter(|s| !s.is_empty()) else {
        return settings.clone();
    };
    if let Some(value) = settings.get(section) {
        return value.clone();
    }
    let mut value = settings;
    for part in section.split('.') {
        match value.get(part) {
            Some(inner) => value = inner,
            None => return Value::Null,
        }
    }
    value.clone()
}

/// At most `max` characters of `text`.
pub(crate) fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

async fn write_loop(
    mut stdin: tokio::process::ChildStdin,
    mut rx: mpsc::UnboundedReceiver<Vec<u8>>,
) {
    while let Some(framed) = rx.recv().await {
        if write_frame(&mut stdin, &framed).await.is_err() {
            break;
        }
    }
}

async fn stderr_loop(client: Arc<Client>, stderr: tokio::process::ChildStderr) {
    let mut reader = tokio::io::BufReader::new(stderr);
    let mut line = Vec::new();
    loop {
        line.clear();
        match (&mut reader)
            .take(STDERR_LINE)
            .read_until(b'\n', &mut line)
            .await
        {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if line.last() != Some(&b'\n') {
            // The rest of an over-long line is dropped, a buffer at a time.
            let mut skipped = Vec::new();
            loop {
                skipped.clear();
                match (&mut reader)
                    .take(STDERR_LINE)
                    .read_until(b'\n', &mut skipped)
                    .await
                {
                    Ok(0) | Err(_) => break,
                    Ok(_) if skipped.last() == Some(&b'\n') => break,
                    Ok(_) => {}
                }
            }
        }
        let text = String::from_utf8_lossy(&line).trim_end().to_owned();
        if text.is_empty() {
            continue;
        }
        tracing::debug!(server = %client.name, stderr = %text);
        let mut tail = client.stderr_tail.locked();
        if tail.len() == STDERR_TAIL {
            tail.pop_front();
        }
        tail.push_back(clip(&text, 300));
    }
}

async fn read_loop(
    client: Arc<Client>,
    stdout: tokio::process::ChildStdout,
    mut child: tokio::process::Child,
) {
    let mut reader = tokio::io::BufReader::with_capacity(64 * 1024, stdout);
    let failure = loop {
        let body = match read_message(&mut reader).await {
            Ok(body) => body,
            Err(err) => break err,
        };
        let Ok(message) = serde_json::from_slice::<Value>(&body) else {
            tracing::debug!(server = %client.name, "a message that is not JSON; ignored");
            continue;
        };
        drop(body);
        let method = message.get("method").and_then(Value::as_str);
        match (method, message.get("id")) {
            (Some(method), Some(id)) => {
                let params = message.get("params").cloned().unwrap_or_default();
                client.on_request(id, method, &params);
            }
            (Some(method), None) => {
                let method = method.to_owned();
                let params = message.get("params").cloned().unwrap_or_default();
                client.on_notification(&method, params);
            }
            (None, Some(_)) => client.on_response(&message),
            (None, None) => {}
        }
    };
    if !matches!(failure, FrameError::Closed) {
        // A protocol fault (or a flood): the server is stopped rather than trusted further.
        tracing::warn!(server = %client.name, "{failure}; stopping it");
        if let Some(pid) = client.pid {
            kill_tree(pid);
        }
    }
    let status = tokio::time::timeout(Duration::from_secs(2), child.wait()).await;
    let how = match status {
        Ok(Ok(status)) => match (
            status.code(),
            std::os::unix::process::ExitStatusExt::signal(&status),
        ) {
            (Some(code), _) => format!("exited with code {code}"),
            (None, Some(signal)) => format!("was killed by signal {signal}"),
            (None, None) => String::from("exited"),
        },
        _ => {
            let _ = child.start_kill();
            String::from("closed its output and was stopped")
        }
    };
    let reason = match failure {
        FrameError::Closed => format!("{} {how}", client.name),
        other => format!("{} {how} ({other})", client.name),
    };
    client.ended(reason);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configuration_sections_are_found_as_written_or_by_path() {
        let settings = json!({
            "python.analysis": {"typeCheckingMode": "strict"},
            "gopls": {"ui": {"semanticTokens": true}},
        });
        assert_eq!(
            section_of(&settings, Some("python.analysis")),
            json!({"typeCheckingMode": "strict"})
        );
        assert_eq!(
            section_of(&settings, Some("gopls.ui.semanticTokens")),
            json!(true)
        );
        assert_eq!(
            section_of(&settings, Some("basedpyright.analysis")),
            Value::Null
        );
        assert_eq!(section_of(&Value::Null, Some("x")), Value::Null);
        assert_eq!(section_of(&settings, None), settings);
    }

    #[test]
    fn clip_keeps_whole_characters() {
        assert_eq!(clip("héllo", 2), "hé…");
        assert_eq!(clip("hi", 5), "hi");
    }
}
