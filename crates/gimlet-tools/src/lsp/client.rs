//! One running language server: the JSON-RPC connection over its stdin and stdout, the
//! answers to its requests, and what it told us (diagnostics, progress).
//!
//! This file holds the [`Client`] as the rest of the crate uses it: starting and initializing
//! the server, requests and notifications, the documents it has open and the wait for their
//! diagnostics. `client/connection.rs` holds the connection side: the tasks over the pipes and
//! the handling of each message the server sends.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::diagnostics::{Basis, Status};
use super::position::uri_of;
use super::servers::ServerSpec;
use super::spawn::{Process, kill_tree};

use crate::util::MutexExt as _;

mod connection;
mod fresh;
mod impact;

pub(crate) use connection::clip;
use connection::{read_loop, stderr_loop, write_loop};
pub(crate) use impact::{Plan, Readable};

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

/// Work-done progress under way (`$/progress`): what the server says it is doing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Progress {
    pub(crate) title: Option<String>,
    pub(crate) message: Option<String>,
    pub(crate) percentage: Option<u64>,
}

impl Progress {
    /// `title: message (40%)`, with what the server gave.
    pub(crate) fn describe(&self) -> String {
        let mut text = [&self.title, &self.message]
            .into_iter()
            .flatten()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join(": ");
        if text.is_empty() {
            text.push_str("working");
        }
        if let Some(percentage) = self.percentage {
            text.push_str(&format!(" ({percentage}%)"));
        }
        text
    }
}

/// What the server told us.
#[derive(Debug, Default)]
struct State {
    diagnostics: HashMap<PathBuf, Published>,
    seq: u64,
    /// Work-done progress under way, by token.
    progress: HashMap<String, Progress>,
    /// Whether the server registered pull diagnostics (`client/registerCapability`).
    pull_registered: bool,
    /// The last pull result per file: its `resultId` and items (see `client/fresh.rs`).
    pulled: HashMap<PathBuf, (String, Vec<lsp_types::Diagnostic>)>,
    /// Other files' diagnostics after the last change that may have broken them (see
    /// `client/impact.rs`).
    checked: HashMap<PathBuf, impact::Checked>,
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

/// A file's diagnostics for a change, and how they are tied to its text.
#[derive(Debug, Clone)]
pub(crate) struct Report {
    /// The diagnostics.
    pub(crate) published: Published,
    /// How they belong to the text sent.
    pub(crate) basis: Basis,
    /// Asked for once the server was done with its work (no progress under way when it
    /// answered, or asked again after it ended): complete, whatever work the asking itself
    /// started (basedpyright reports "1 file to analyze" after each pull).
    pub(crate) settled: bool,
}

/// The outcome of waiting for a file's diagnostics.
#[derive(Debug, Clone)]
pub(crate) enum Waited {
    /// The server reported.
    Reported(Report),
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
    /// When a change or a request last went to it (see [`Client::idle_for`]).
    last_used: Mutex<Instant>,
    /// Waits for its reports under way ([`Client::in_use`]).
    waiting: AtomicUsize,
    /// Where the server's `workspace/applyEdit` requests go while gimlet applies an action it
    /// asked for ([`Client::accept_edits`]); refused when `None`.
    edit_sink: Mutex<Option<mpsc::UnboundedSender<EditRequest>>>,
}

/// A `workspace/applyEdit` request from the server: its id (for the answer) and its params.
pub(crate) type EditRequest = (Value, Value);

/// The server's edits accepted while this lives (see [`Client::accept_edits`]); dropped, they
/// are refused again.
pub(crate) struct AcceptedEdits {
    client: Arc<Client>,
    /// The requests, in the order they came.
    pub(crate) requests: mpsc::UnboundedReceiver<EditRequest>,
}

impl Drop for AcceptedEdits {
    fn drop(&mut self) {
        self.client.edit_sink.locked().take();
        // Requests that came after the action ended are refused, not left unanswered.
        while let Ok((id, _)) = self.requests.try_recv() {
            self.client
                .answer_edit(&id, Err(String::from(REFUSED_EDIT)));
        }
    }
}

/// Why a server's `workspace/applyEdit` is refused outside an action gimlet applies.
pub(crate) const REFUSED_EDIT: &str = "gimlet applies a server's edits only while it applies a \
    code action the agent chose; other changes go through its file tools";

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
            last_used: Mutex::new(Instant::now()),
            waiting: AtomicUsize::new(0),
            edit_sink: Mutex::new(None),
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
                    // Accepted only while gimlet applies an action it asked for.
                    "applyEdit": true,
                    "workspaceEdit": {
                        "documentChanges": true,
                        "resourceOperations": ["create", "rename", "delete"],
                        "failureHandling": "abort",
                        "normalizesLineEndings": false,
                    },
                    "executeCommand": {"dynamicRegistration": false},
                    "symbol": {"dynamicRegistration": false},
                    "didChangeConfiguration": {"dynamicRegistration": false},
                },
                "textDocument": {
                    "synchronization": {"didSave": true, "dynamicRegistration": false},
                    "diagnostic": {"dynamicRegistration": true, "relatedDocumentSupport": false},
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
                    "codeAction": {
                        "codeActionLiteralSupport": {"codeActionKind": {"valueSet": [
                            "", "quickfix", "refactor", "refactor.extract", "refactor.inline",
                            "refactor.rewrite", "source", "source.organizeImports",
                            "source.fixAll",
                        ]}},
                        "isPreferredSupport": true,
                        "disabledSupport": true,
                        "dataSupport": true,
                        "resolveSupport": {"properties": ["edit"]},
                    },
                },
            },
        })
    }

    /// A server capability by JSON pointer (`/codeActionProvider/resolveProvider`), or null.
    pub(crate) fn capability(&self, pointer: &str) -> Value {
        self.capabilities
            .locked()
            .pointer(pointer)
            .cloned()
            .unwrap_or(Value::Null)
    }

    /// Accepts the server's `workspace/applyEdit` requests until the returned guard is dropped:
    /// for the time gimlet runs a command of an action it asked for. `None` while another call
    /// holds it (one action at a time per server).
    pub(crate) fn accept_edits(self: &Arc<Self>) -> Option<AcceptedEdits> {
        let mut sink = self.edit_sink.locked();
        if sink.as_ref().is_some_and(|s| !s.is_closed()) {
            return None;
        }
        let (tx, rx) = mpsc::unbounded_channel();
        *sink = Some(tx);
        Some(AcceptedEdits {
            client: Arc::clone(self),
            requests: rx,
        })
    }

    /// Answers a `workspace/applyEdit` request: applied, or not and why.
    pub(crate) fn answer_edit(&self, id: &Value, applied: Result<(), String>) {
        let result = match applied {
            Ok(()) => json!({"applied": true}),
            Err(reason) => json!({"applied": false, "failureReason": reason}),
        };
        self.send(&json!({"jsonrpc": "2.0", "id": id, "result": result}));
    }

    /// The paths of the documents the server has open.
    pub(crate) async fn open_paths(&self) -> Vec<PathBuf> {
        self.documents.lock().await.keys().cloned().collect()
    }

    /// The server's process id (the helper's, when it runs under one).
    pub(crate) fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// Marks the server as used now: an idle shutdown counts from here.
    pub(crate) fn touch(&self) {
        *self.last_used.locked() = Instant::now();
    }

    /// How long nobody has used the server: `None` while a request of ours is in flight or
    /// a call waits for its report.
    pub(crate) fn idle_for(&self) -> Option<Duration> {
        if !self.pending.locked().is_empty() || self.waiting.load(Ordering::SeqCst) > 0 {
            return None;
        }
        Some(self.last_used.locked().elapsed())
    }

    /// Marks the server used until the guard is dropped (a wait for its report).
    pub(crate) fn in_use(&self) -> InUse<'_> {
        self.waiting.fetch_add(1, Ordering::SeqCst);
        InUse(self)
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

    /// What work-done progress under way says (indexing, loading ...), at most three.
    pub(crate) fn busy(&self) -> Vec<String> {
        let mut said: Vec<String> = self
            .state
            .locked()
            .progress
            .values()
            .map(Progress::describe)
            .collect();
        said.sort();
        said.dedup();
        said.truncate(3);
        said
    }

    /// Whether the server is done now, with `basis` for a diagnostics report.
    pub(crate) fn status(&self, basis: Option<Basis>) -> Status {
        Status {
            busy: self.busy(),
            basis,
        }
    }

    /// The status of a diagnostics report: done when it was asked for once the server was
    /// ([`Report::settled`]), else as [`Self::status`] says now.
    pub(crate) fn status_of(&self, report: &Report) -> Status {
        if report.settled {
            return Status {
                busy: Vec::new(),
                basis: Some(report.basis),
            };
        }
        self.status(Some(report.basis))
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

    /// The version of a file the server has open, if it is.
    pub(crate) async fn open_version(&self, path: &Path) -> Option<i32> {
        self.documents.lock().await.get(path).map(|d| d.version)
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
        self.touch();
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

    /// Sends the text the server has of an open document again, as a new version: the server
    /// checks it again and reports for that version. `None` when it is not open.
    pub(crate) async fn resend(&self, path: &Path) -> Option<Synced> {
        let mut documents = self.documents.lock().await;
        let seq_before = self.state.locked().seq;
        let doc = documents.get_mut(path)?;
        doc.version += 1;
        self.notify(
            "textDocument/didChange",
            json!({
                "textDocument": {"uri": uri_of(path), "version": doc.version},
                "contentChanges": [{"text": doc.text}],
            }),
        );
        Some(Synced {
            version: doc.version,
            seq_before,
            sent: true,
        })
    }

    /// Forgets a file that is gone: `didClose` if it was open, and its diagnostics.
    pub(crate) async fn close(&self, path: &Path) {
        if self.documents.lock().await.remove(path).is_some() {
            self.notify(
                "textDocument/didClose",
                json!({"textDocument": {"uri": uri_of(path)}}),
            );
        }
        let mut state = self.state.locked();
        state.diagnostics.remove(path);
        state.checked.remove(path);
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
        self.touch();
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

    /// Kills the server and what it started, at once. Finding what it started reads `/proc`,
    /// so on a runtime that happens on a blocking thread (started here, not awaited).
    pub(crate) fn kill(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.outgoing.locked().take();
        if let Some(pid) = self.pid {
            match tokio::runtime::Handle::try_current() {
                Ok(runtime) => drop(runtime.spawn_blocking(move || kill_tree(pid))),
                Err(_) => kill_tree(pid),
            }
        }
    }
}

/// A wait on a server under way (see [`Client::in_use`]).
pub(crate) struct InUse<'a>(&'a Client);

impl Drop for InUse<'_> {
    fn drop(&mut self) {
        self.0.touch();
        self.0.waiting.fetch_sub(1, Ordering::SeqCst);
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
        self.client.touch();
        self.client.pending.locked().remove(&self.id);
        if !self.done && self.client.alive() {
            self.client
                .notify("$/cancelRequest", json!({"id": self.id}));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_reads_as_the_server_gave_it() {
        let loading = Progress {
            title: Some(String::from("Loading project")),
            message: Some(String::from("3/40 files")),
            percentage: Some(7),
        };
        assert_eq!(loading.describe(), "Loading project: 3/40 files (7%)");
        let untitled = Progress {
            title: None,
            message: Some(String::from("1 file to analyze")),
            percentage: None,
        };
        assert_eq!(untitled.describe(), "1 file to analyze");
        assert_eq!(Progress::default().describe(), "working");
    }
}
