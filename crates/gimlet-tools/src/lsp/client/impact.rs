//! The other files a change may break, asked about before and after it (`lsp/impact.rs` has
//! the rules and the block):
//!
//! - **which files**: those holding references to the symbols the change touched, asked in the
//!   old text before the change is sent (a renamed function's callers use the old name), then
//!   the other files known otherwise (those with errors at their last check, then those open
//!   on the server, then the rest checked after an earlier change; at most
//!   [`MAX_KNOWN_FILES`] of them); at most [`MAX_OTHER_FILES`] in all, each served by this
//!   server under its root;
//! - **before the change**: what the last check found for the file, while its text is the
//!   same; else it is opened from disk and asked now, by the server's freshness rule;
//! - **after the change**: asked again by the same rule; for a server that only publishes,
//!   the file's text is sent again as a new version (`didChange` with the same text), so the
//!   report awaited is for a version sent after the change.
//!
//! Every step ends at the call's bound; a file not answered by then is counted, not guessed.

use std::hash::{DefaultHasher, Hash as _, Hasher as _};
use std::path::{Path, PathBuf};

use lsp_types::Diagnostic;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::fresh::Freshness;
use super::{Client, Waited};
use crate::lsp::diagnostics::ChangedLines;
use crate::lsp::impact::touched_symbols;
use crate::lsp::position::{path_of, uri_of};
use crate::lsp::read_text;
use crate::util::MutexExt as _;

/// Other files checked after one change, at most.
pub(crate) const MAX_OTHER_FILES: usize = 40;
/// Of those, at most this many not found by references (open, or checked before): each costs
/// a check after every change.
const MAX_KNOWN_FILES: usize = 10;

/// An other file, with its text and what the server reported for it before the change.
#[derive(Debug, Clone)]
pub(crate) struct Other {
    pub(crate) path: PathBuf,
    pub(crate) text: String,
    pub(crate) before: Vec<Diagnostic>,
}

/// The other files to check after a change, chosen before it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Plan {
    /// Those whose diagnostics before the change are known.
    pub(crate) files: Vec<Other>,
    /// Those chosen whose diagnostics before the change did not come in time.
    pub(crate) unknown: usize,
}

/// Whether the call may read a file without asking: other files it may not are not checked
/// (their diagnostics would show what the policy hides). Blocking.
pub(crate) type Readable = std::sync::Arc<dyn Fn(&Path) -> bool + Send + Sync>;

/// The last diagnostics of an other file, tied to its text by a hash.
#[derive(Debug, Clone)]
pub(crate) struct Checked {
    text_hash: u64,
    items: Vec<Diagnostic>,
}

fn hash_of(text: &str) -> u64 {
    let mut hasher = DefaultHasher::new();
    text.hash(&mut hasher);
    hasher.finish()
}

impl Client {
    /// Before a change of `path` from `old` to `new` is sent: the other files to check and
    /// their diagnostics now. `exclude` are files the same call changed (they have their own
    /// block); only files `readable` allows are checked. The references are looked up until
    /// `lookup`, the rest until `deadline`.
    pub(crate) async fn impact_before(
        &self,
        path: &Path,
        (old, new): (&str, &str),
        (exclude, readable): (&[PathBuf], Readable),
        (lookup, deadline): (tokio::time::Instant, tokio::time::Instant),
        cancel: &CancellationToken,
    ) -> Plan {
        let mut seen = std::collections::HashSet::new();
        let mut keep = |p: &PathBuf| {
            p != path && !exclude.contains(p) && self.serves(p) && seen.insert(p.clone())
        };
        let mut chosen = self.referencing(path, old, new, lookup, cancel).await;
        chosen.retain(&mut keep);
        chosen.truncate(MAX_OTHER_FILES);
        // Then, fewer, the files known otherwise: those with errors at their last check first
        // (the change may be their fix), then those open at the server, then the rest checked.
        let mut known: Vec<(u8, PathBuf)> = self
            .documents
            .lock()
            .await
            .keys()
            .map(|p| (1, p.clone()))
            .collect();
        known.extend(
            self.state
                .locked()
                .checked
                .iter()
                .map(|(p, c)| (if c.items.is_empty() { 2 } else { 0 }, p.clone())),
        );
        known.sort();
        let mut extra: Vec<PathBuf> = known.into_iter().map(|(_, p)| p).collect();
        extra.retain(&mut keep);
        extra.truncate(MAX_KNOWN_FILES);
        chosen.extend(extra);
        chosen.truncate(MAX_OTHER_FILES);
        tracing::debug!(server = %self.name, files = chosen.len(), "other files to check");
        if chosen.is_empty() {
            return Plan::default();
        }
        let texts = {
            let chosen = chosen.clone();
            tokio::task::spawn_blocking(move || {
                chosen
                    .iter()
                    .map(|p| if readable(p) { read_text(p) } else { None })
                    .collect()
            })
            .await
            .unwrap_or_else(|_| Vec::new())
        };
        let mut plan = Plan::default();
        let mut ask = Vec::new();
        for (path, text) in chosen.into_iter().zip(texts) {
            // Gone, not text, or not the call's to read: not checked.
            let Some(text) = text else { continue };
            let known = self
                .state
                .locked()
                .checked
                .get(&path)
                .filter(|c| c.text_hash == hash_of(&text))
                .map(|c| c.items.clone());
            match known {
                Some(before) => plan.files.push(Other { path, text, before }),
                None => ask.push((path, text)),
            }
        }
        // Open what is asked about, so that every rule can answer for it.
        let mut synced = Vec::new();
        for (path, text) in &ask {
            synced.push(self.sync(path, text.clone()).await);
        }
        let paths: Vec<&Path> = ask.iter().map(|(p, _)| p.as_path()).collect();
        let answers = self
            .check_now(&paths, Some(&synced), deadline, cancel)
            .await;
        for ((path, text), answer) in ask.into_iter().zip(answers) {
            match answer {
                Some(before) => plan.files.push(Other { path, text, before }),
                None => plan.unknown += 1,
            }
        }
        plan
    }

    /// After the change was sent: each planned file's diagnostics now, by the server's rule,
    /// until `deadline` (`None` for a file with no answer by then). Each answer is kept as
    /// the file's last check.
    pub(crate) async fn impact_after(
        &self,
        plan: &Plan,
        deadline: tokio::time::Instant,
        cancel: &CancellationToken,
    ) -> Vec<Option<Vec<Diagnostic>>> {
        let paths: Vec<&Path> = plan.files.iter().map(|f| f.path.as_path()).collect();
        let answers = if self.freshness() == Freshness::Pushed {
            // A report for a version sent after the change.
            let mut touched = Vec::new();
            for path in &paths {
                touched.push(self.resend(path).await);
            }
            let Some(touched) = touched.into_iter().collect::<Option<Vec<_>>>() else {
                return vec![None; paths.len()];
            };
            self.check_now(&paths, Some(&touched), deadline, cancel)
                .await
        } else {
            self.check_now(&paths, None, deadline, cancel).await
        };
        let mut state = self.state.locked();
        for (file, answer) in plan.files.iter().zip(&answers) {
            if let Some(items) = answer {
                state.checked.insert(
                    file.path.clone(),
                    Checked {
                        text_hash: hash_of(&file.text),
                        items: items.clone(),
                    },
                );
            }
        }
        answers
    }

    /// The files with references to the symbols the change touched, asked in the old text
    /// (which the server has: the change is not sent yet).
    async fn referencing(
        &self,
        path: &Path,
        old: &str,
        new: &str,
        until: tokio::time::Instant,
        cancel: &CancellationToken,
    ) -> Vec<PathBuf> {
        let left = || until.saturating_duration_since(tokio::time::Instant::now());
        let document = json!({"uri": uri_of(path)});
        let Ok(symbols) = self
            .request(
                "textDocument/documentSymbol",
                json!({"textDocument": document}),
                left(),
                cancel,
            )
            .await
        else {
            return Vec::new();
        };
        let mut files = Vec::new();
        let touched = touched_symbols(&symbols, ChangedLines::between(old, new));
        tracing::debug!(server = %self.name, ?touched, "symbols the change touched");
        for at in touched {
            let params = json!({
                "textDocument": document,
                "position": at,
                "context": {"includeDeclaration": false},
            });
            match self
                .request("textDocument/references", params, left(), cancel)
                .await
            {
                Ok(found) => files.extend(
                    found
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|l| l.get("uri").and_then(Value::as_str))
                        .filter_map(|u| u.parse::<lsp_types::Uri>().ok())
                        .filter_map(|u| path_of(&u)),
                ),
                Err(super::RequestError::Server { .. }) => {}
                Err(_) => break,
            }
        }
        files
    }

    /// Whether an other file is one this server checks: beneath its root, of its language.
    fn serves(&self, path: &Path) -> bool {
        path.starts_with(&self.root)
            && crate::lsp::servers::extension_of(path)
                .is_some_and(|ext| self.spec.extensions.contains(&ext))
    }

    /// Each file's diagnostics now, until `deadline`: asked (pull, tsserver), or the
    /// publication for the version in `synced` (a server that only publishes).
    async fn check_now(
        &self,
        paths: &[&Path],
        synced: Option<&[super::Synced]>,
        deadline: tokio::time::Instant,
        cancel: &CancellationToken,
    ) -> Vec<Option<Vec<Diagnostic>>> {
        let freshness = self.freshness();
        let mut answers = Vec::with_capacity(paths.len());
        for (i, path) in paths.iter().enumerate() {
            let asked = match freshness {
                Freshness::Pull => self.pull(path, deadline, cancel).await.ok(),
                Freshness::Tsserver => self.ask_tsserver(path, deadline, cancel).await.ok(),
                Freshness::Pushed => match synced.and_then(|s| s.get(i)) {
                    Some(synced) => match self.wait_published(path, synced, deadline, cancel).await
                    {
                        Waited::Reported(report) => Some(report.published.items),
                        Waited::TimedOut | Waited::Exited(_) => None,
                    },
                    None => None,
                },
            };
            answers.push(asked);
        }
        if freshness == Freshness::Pushed
            && let Some(synced) = synced
            && answers.iter().any(Option::is_some)
        {
            // basedpyright publishes a file's version again as its check goes on (what it
            // parsed first, then what it checked, while "n files to analyze" is under way):
            // the last publication for the version once it is done, or at the bound.
            self.settle(deadline, cancel).await;
            for ((path, synced), answer) in paths.iter().zip(synced).zip(&mut answers) {
                if answer.is_some()
                    && let Some(published) = self.published(path)
                    && published.version.is_some_and(|v| v >= synced.version)
                {
                    *answer = Some(published.items);
                }
            }
        }
        answers
    }

    /// Waits until no work-done progress is under way, `deadline` or cancellation.
    async fn settle(&self, deadline: tokio::time::Instant, cancel: &CancellationToken) {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.state.locked().progress.is_empty() || !self.alive() {
                return;
            }
            tokio::select! {
                () = &mut notified => {}
                () = tokio::time::sleep_until(deadline) => return,
                () = cancel.cancelled() => return,
            }
        }
    }
}
