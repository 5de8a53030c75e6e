//! Diagnostics that belong to the text gimlet sent, decided per server by what it offers:
//!
//! 1. **Pull** (`textDocument/diagnostic`, LSP 3.17) when the server advertises
//!    `diagnosticProvider` (or registers it): the answer is for the text the server has when
//!    the request arrives, and the change was sent before it on the same pipe. The last
//!    `resultId` goes with the next request, so an unchanged file costs the server nothing.
//! 2. **tsserver asked directly** when the server offers `typescript.tsserverRequest`
//!    (typescript-language-server, which has no pull diagnostics and publishes without
//!    versions, syntax first and types later): `syntacticDiagnosticsSync` and
//!    `semanticDiagnosticsSync` go to tsserver after the change, in its queue's order.
//! 3. **Versioned publications** otherwise: only a `publishDiagnostics` whose `version` is the
//!    one sent (or a later one: another call changed the file since) is taken.
//! 4. A publication **without a version** is taken after the server's settle time (the next
//!    part may follow), and marked: it may be for an older text.
//!
//! When 1 or 2 fail (an error, not a timeout), the wait falls back to 3 and 4.

use std::path::Path;

use lsp_types::{Diagnostic, DiagnosticSeverity, NumberOrString, Position, Range};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{Client, Published, Report, RequestError, Synced, Waited};
use crate::lsp::diagnostics::{Basis, basis_of};
use crate::lsp::position::uri_of;
use crate::util::MutexExt as _;

/// How a server's diagnostics are tied to the text (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Freshness {
    /// `textDocument/diagnostic`.
    Pull,
    /// tsserver's `*DiagnosticsSync` through `typescript.tsserverRequest`.
    Tsserver,
    /// `publishDiagnostics`, versioned or not.
    Pushed,
}

impl Freshness {
    /// Its name, for the metadata and the docs.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Pull => "pull",
            Self::Tsserver => "tsserver",
            Self::Pushed => "published",
        }
    }
}

/// The tsserver command typescript-language-server forwards.
const TSSERVER_REQUEST: &str = "typescript.tsserverRequest";

impl Client {
    /// How this server's diagnostics are tied to the text, from its capabilities.
    pub(crate) fn freshness(&self) -> Freshness {
        if self.state.locked().pull_registered {
            return Freshness::Pull;
        }
        let caps = self.capabilities.locked();
        if caps
            .get("diagnosticProvider")
            .is_some_and(|p| !p.is_null() && p != &Value::Bool(false))
        {
            return Freshness::Pull;
        }
        let commands = caps
            .pointer("/executeCommandProvider/commands")
            .and_then(Value::as_array);
        if commands.is_some_and(|c| c.iter().any(|c| c.as_str() == Some(TSSERVER_REQUEST))) {
            return Freshness::Tsserver;
        }
        Freshness::Pushed
    }

    /// Whether the server answers for its current text when asked (pull or tsserver), so that
    /// what it has for a file can be asked for rather than taken from its publications.
    pub(crate) fn answers_when_asked(&self) -> bool {
        self.freshness() != Freshness::Pushed
    }

    /// The diagnostics of `path` for the text [`Client::sync`] sent (`synced`), waited for
    /// until `deadline`, by the server's [`Freshness`].
    pub(crate) async fn report(
        &self,
        path: &Path,
        synced: &Synced,
        deadline: tokio::time::Instant,
        cancel: &CancellationToken,
    ) -> Waited {
        let _in_use = self.in_use();
        let asked = match self.freshness() {
            Freshness::Pull => self.pull_when_idle(path, deadline, cancel).await,
            Freshness::Tsserver => self
                .ask_tsserver(path, deadline, cancel)
                .await
                .map(|items| (items, false)),
            Freshness::Pushed => {
                match self
                    .wait_published_or_registered(path, synced, deadline, cancel)
                    .await
                {
                    Some(waited) => return waited,
                    // The server registered pull diagnostics meanwhile (basedpyright does so
                    // after `initialized`, and then publishes nothing): ask.
                    None => self.pull_when_idle(path, deadline, cancel).await,
                }
            }
        };
        match asked {
            Ok((items, settled)) => {
                let current = self
                    .documents
                    .lock()
                    .await
                    .get(path)
                    .map_or(synced.version, |d| d.version);
                let basis = if current > synced.version {
                    Basis::Later
                } else {
                    Basis::Asked
                };
                let published = self.keep(path, Some(current), items);
                Waited::Reported(Report {
                    published,
                    basis,
                    settled,
                })
            }
            Err(RequestError::Exited(reason)) => Waited::Exited(reason),
            Err(RequestError::Timeout { .. } | RequestError::Cancelled) => Waited::TimedOut,
            Err(err @ RequestError::Server { .. }) => {
                tracing::debug!(server = %self.name, "{err}; waiting for published diagnostics");
                self.wait_published(path, synced, deadline, cancel).await
            }
        }
    }

    /// Keeps what a request answered as the file's latest diagnostics.
    fn keep(&self, path: &Path, version: Option<i32>, items: Vec<Diagnostic>) -> Published {
        let mut state = self.state.locked();
        state.seq += 1;
        let published = Published {
            seq: state.seq,
            version,
            items,
        };
        state.diagnostics.insert(path.to_owned(), published.clone());
        published
    }

    /// [`Self::pull`]; when the server answered while still busy (loading, analysing) and
    /// there is time, asked again once it is done, so that a first edit's report is the
    /// whole file's, not what was checked so far (then marked partial).
    async fn pull_when_idle(
        &self,
        path: &Path,
        deadline: tokio::time::Instant,
        cancel: &CancellationToken,
    ) -> Result<(Vec<Diagnostic>, bool), RequestError> {
        let first = self.pull(path, deadline, cancel).await?;
        if self.busy().is_empty() {
            return Ok((first, true));
        }
        if !self.until_idle(deadline, cancel).await {
            return Ok((first, false));
        }
        match self.pull(path, deadline, cancel).await {
            Ok(again) => Ok((again, true)),
            Err(RequestError::Timeout { .. } | RequestError::Cancelled) => Ok((first, false)),
            Err(err) => Err(err),
        }
    }

    /// Waits until no work-done progress is under way; `false` when `deadline` came first
    /// (or the call was cancelled, or the server ended).
    async fn until_idle(&self, deadline: tokio::time::Instant, cancel: &CancellationToken) -> bool {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let state = self.state.locked();
                if state.exit.is_some() {
                    return false;
                }
                if state.progress.is_empty() {
                    return true;
                }
            }
            tokio::select! {
                () = &mut notified => {}
                () = tokio::time::sleep_until(deadline) => return false,
                () = cancel.cancelled() => return false,
            }
        }
    }

    /// `textDocument/diagnostic`, with the last `resultId`.
    pub(super) async fn pull(
        &self,
        path: &Path,
        deadline: tokio::time::Instant,
        cancel: &CancellationToken,
    ) -> Result<Vec<Diagnostic>, RequestError> {
        let previous = self
            .state
            .locked()
            .pulled
            .get(path)
            .map(|(id, _)| id.clone());
        let mut params = json!({"textDocument": {"uri": uri_of(path)}});
        if let Some(previous) = &previous {
            params["previousResultId"] = json!(previous);
        }
        let timeout = deadline.saturating_duration_since(tokio::time::Instant::now());
        let answer = self
            .request("textDocument/diagnostic", params, timeout, cancel)
            .await?;
        let unreadable = |what: &str| RequestError::Server {
            server: self.name.clone(),
            method: String::from("textDocument/diagnostic"),
            message: format!("an answer gimlet cannot read ({what})"),
        };
        let result_id = answer
            .get("resultId")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let items = match answer.get("kind").and_then(Value::as_str) {
            Some("unchanged") => self
                .state
                .locked()
                .pulled
                .get(path)
                .filter(|(id, _)| Some(id) == result_id.as_ref())
                .map(|(_, items)| items.clone())
                .ok_or_else(|| unreadable("`unchanged` for a result it never sent"))?,
            Some("full") => serde_json::from_value::<Vec<Diagnostic>>(answer["items"].clone())
                .map_err(|_| unreadable("its `items`"))?,
            _ => return Err(unreadable("no `kind`")),
        };
        let mut state = self.state.locked();
        match result_id {
            Some(id) => {
                state.pulled.insert(path.to_owned(), (id, items.clone()));
            }
            None => {
                state.pulled.remove(path);
            }
        }
        Ok(items)
    }

    /// tsserver's syntactic and semantic diagnostics of the file, asked together.
    pub(super) async fn ask_tsserver(
        &self,
        path: &Path,
        deadline: tokio::time::Instant,
        cancel: &CancellationToken,
    ) -> Result<Vec<Diagnostic>, RequestError> {
        let timeout = deadline.saturating_duration_since(tokio::time::Instant::now());
        let ask = |command: &'static str| {
            self.request(
                "workspace/executeCommand",
                json!({
                    "command": TSSERVER_REQUEST,
                    "arguments": [command, {"file": uri_of(path)}],
                }),
                timeout,
                cancel,
            )
        };
        let (syntactic, semantic) = tokio::join!(
            ask("syntacticDiagnosticsSync"),
            ask("semanticDiagnosticsSync")
        );
        let mut items = Vec::new();
        for (command, answer) in [("syntactic", syntactic?), ("semantic", semantic?)] {
            let body = answer
                .get("body")
                .and_then(Value::as_array)
                .filter(|_| answer.get("success") != Some(&Value::Bool(false)))
                .ok_or_else(|| RequestError::Server {
                    server: self.name.clone(),
                    method: format!("{TSSERVER_REQUEST} {command}DiagnosticsSync"),
                    message: super::clip(&answer.to_string(), 300),
                })?;
            items.extend(body.iter().filter_map(from_tsserver));
        }
        Ok(items)
    }

    /// Waits for a publication for the version sent (or a later one); one without a version
    /// is taken after the settle time, marked.
    pub(super) async fn wait_published(
        &self,
        path: &Path,
        synced: &Synced,
        deadline: tokio::time::Instant,
        cancel: &CancellationToken,
    ) -> Waited {
        self.wait_published_within(path, synced, deadline, cancel, false)
            .await
            .unwrap_or(Waited::TimedOut)
    }

    /// [`Self::wait_published`], or `None` as soon as the server registers pull diagnostics
    /// while nothing was taken yet.
    async fn wait_published_or_registered(
        &self,
        path: &Path,
        synced: &Synced,
        deadline: tokio::time::Instant,
        cancel: &CancellationToken,
    ) -> Option<Waited> {
        self.wait_published_within(path, synced, deadline, cancel, true)
            .await
    }

    async fn wait_published_within(
        &self,
        path: &Path,
        synced: &Synced,
        deadline: tokio::time::Instant,
        cancel: &CancellationToken,
        until_registered: bool,
    ) -> Option<Waited> {
        if !synced.sent
            && let Some(published) = self.published(path)
            && let Some(basis) = basis_of(published.version, synced.version)
        {
            // Nothing changed for the server: what it said last for this text still holds.
            return Some(Waited::Reported(Report {
                published,
                basis,
                settled: false,
            }));
        }
        let mut got: Option<Report> = None;
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let state = self.state.locked();
                if let Some(p) = state.diagnostics.get(path)
                    && p.seq > got.as_ref().map_or(synced.seq_before, |g| g.published.seq)
                    && let Some(basis) = basis_of(p.version, synced.version)
                {
                    got = Some(Report {
                        published: p.clone(),
                        basis,
                        settled: false,
                    });
                }
                if let Some(exit) = &state.exit {
                    return Some(
                        got.map_or_else(|| Waited::Exited(exit.clone()), Waited::Reported),
                    );
                }
                if until_registered && got.is_none() && state.pull_registered {
                    return None;
                }
            }
            let until = match &got {
                // Without a version, the next part of the report may follow (typescript:
                // syntax, then types): that long for it.
                Some(report)
                    if report.basis == Basis::Unversioned && !self.spec.settle.is_zero() =>
                {
                    deadline.min(tokio::time::Instant::now() + self.spec.settle)
                }
                Some(_) => break,
                None => deadline,
            };
            tokio::select! {
                () = &mut notified => {}
                () = tokio::time::sleep_until(until) => break,
                () = cancel.cancelled() => break,
            }
        }
        Some(got.map_or(Waited::TimedOut, Waited::Reported))
    }
}

/// A tsserver diagnostic (`{start: {line, offset}, end, text, code, category}`, 1-based) as
/// an LSP one, as typescript-language-server converts them.
fn from_tsserver(item: &Value) -> Option<Diagnostic> {
    let place = |key: &str| -> Option<Position> {
        let at = item.get(key)?;
        let line = at.get("line")?.as_u64()?;
        let offset = at.get("offset")?.as_u64()?;
        Some(Position::new(
            u32::try_from(line.saturating_sub(1)).ok()?,
            u32::try_from(offset.saturating_sub(1)).ok()?,
        ))
    };
    let start = place("start")?;
    let end = place("end").unwrap_or(start);
    let severity = match item.get("category").and_then(Value::as_str) {
        Some("warning") => DiagnosticSeverity::WARNING,
        Some("suggestion") => DiagnosticSeverity::HINT,
        Some("message") => DiagnosticSeverity::INFORMATION,
        _ => DiagnosticSeverity::ERROR,
    };
    Some(Diagnostic {
        range: Range::new(start, end),
        severity: Some(severity),
        code: item
            .get("code")
            .and_then(Value::as_i64)
            .and_then(|c| i32::try_from(c).ok())
            .map(NumberOrString::Number),
        source: Some(String::from("typescript")),
        message: item.get("text").and_then(Value::as_str)?.to_owned(),
        ..Diagnostic::default()
    })
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn tsserver_diagnostics_become_lsp_ones() {
        let item = json!({
            "start": {"line": 3, "offset": 30},
            "end": {"line": 3, "offset": 33},
            "text": "Argument of type 'string' is not assignable to parameter of type 'number'.",
            "code": 2345,
            "category": "error",
        });
        let diagnostic = from_tsserver(&item).unwrap();
        assert_eq!(
            diagnostic.range,
            Range::new(Position::new(2, 29), Position::new(2, 32))
        );
        assert_eq!(diagnostic.severity, Some(DiagnosticSeverity::ERROR));
        assert_eq!(diagnostic.code, Some(NumberOrString::Number(2345)));
        assert!(diagnostic.message.starts_with("Argument of type"));
        let hint =
            json!({"start": {"line": 1, "offset": 1}, "text": "unused", "category": "suggestion"});
        assert_eq!(
            from_tsserver(&hint).unwrap().severity,
            Some(DiagnosticSeverity::HINT)
        );
        assert_eq!(from_tsserver(&json!({"text": "no place"})), None);
    }
}
