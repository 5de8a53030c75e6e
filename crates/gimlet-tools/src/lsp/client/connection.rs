//! The connection side of a [`Client`]: the writer, stderr and reader tasks over the server's
//! pipes, and what the reader does with each message: answers the server's requests, keeps
//! what it reports (diagnostics, progress), hands responses to the requests waiting for them,
//! and records the end.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt};
use tokio::sync::mpsc;

use super::{Client, Progress, Published};
use crate::lsp::framing::{FrameError, frame, read_message, write_frame};
use crate::lsp::position::{path_of, uri_of};
use crate::lsp::spawn::kill_tree;
use crate::util::MutexExt as _;

/// Files whose diagnostics we keep at most, per server.
const MAX_DIAGNOSTIC_FILES: usize = 10_000;
/// Diagnostics kept per file at most.
const MAX_DIAGNOSTICS_PER_FILE: usize = 2_000;
/// Lines of the server's stderr kept for a crash report.
const STDERR_TAIL: usize = 20;
/// Bytes of one stderr line kept.
const STDERR_LINE: u64 = 4096;

impl Client {
    pub(super) fn send(&self, message: &Value) {
        let body = serde_json::to_vec(message).unwrap_or_default();
        if let Some(tx) = self.outgoing.locked().as_ref() {
            let _ = tx.send(frame(&body));
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
            "client/registerCapability" => {
                let registers_pull = params
                    .get("registrations")
                    .and_then(Value::as_array)
                    .is_some_and(|r| {
                        r.iter().any(|r| {
                            r.get("method").and_then(Value::as_str)
                                == Some("textDocument/diagnostic")
                        })
                    });
                if registers_pull {
                    self.state.locked().pull_registered = true;
                    // A report waiting for publications asks instead (a server that
                    // registers pull diagnostics may publish none).
                    self.changed.notify_waiters();
                }
                Ok(Value::Null)
            }
            "window/workDoneProgress/create"
            | "client/unregisterCapability"
            | "window/showMessageRequest"
            | "window/showDocument"
            | "workspace/diagnostic/refresh"
            | "workspace/semanticTokens/refresh"
            | "workspace/inlayHint/refresh"
            | "workspace/inlineValue/refresh"
            | "workspace/codeLens/refresh" => Ok(Value::Null),
            // A server changes files only while gimlet applies an action it asked for, and then
            // through the same path as the file tools (`tools/lsp/refactor.rs`), which answers.
            "workspace/applyEdit" => {
                if let Some(sink) = self.edit_sink.locked().as_ref()
                    && sink.send((id.clone(), params.clone())).is_ok()
                {
                    return;
                }
                Ok(json!({"applied": false, "failureReason": super::REFUSED_EDIT}))
            }
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
                let text = |key: &str| {
                    value
                        .get(key)
                        .and_then(Value::as_str)
                        .map(|t| clip(t.trim(), 80))
                        .filter(|t| !t.is_empty())
                };
                let percentage = value
                    .get("percentage")
                    .and_then(Value::as_u64)
                    .map(|p| p.min(100));
                let mut state = self.state.locked();
                match value.get("kind").and_then(Value::as_str) {
                    Some("begin") if state.progress.len() < 256 => {
                        state.progress.insert(
                            token,
                            Progress {
                                title: text("title"),
                                message: text("message"),
                                percentage,
                            },
                        );
                    }
                    Some("report") => {
                        if let Some(progress) = state.progress.get_mut(&token) {
                            if let Some(message) = text("message") {
                                progress.message = Some(message);
                            }
                            if percentage.is_some() {
                                progress.percentage = percentage;
                            }
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

pub(super) async fn write_loop(
    mut stdin: tokio::process::ChildStdin,
    mut rx: mpsc::UnboundedReceiver<Vec<u8>>,
) {
    while let Some(framed) = rx.recv().await {
        if write_frame(&mut stdin, &framed).await.is_err() {
            break;
        }
    }
}

pub(super) async fn stderr_loop(client: Arc<Client>, stderr: tokio::process::ChildStderr) {
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

pub(super) async fn read_loop(
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
        Ok(Ok(status)) => match (status.code(), signal_of(status)) {
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

/// The signal that ended a process (Unix).
fn signal_of(status: std::process::ExitStatus) -> Option<i32> {
    #[cfg(unix)]
    return std::os::unix::process::ExitStatusExt::signal(&status);
    #[cfg(not(unix))]
    {
        let _ = status;
        None
    }
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
