//! The checkpoint around a call that can change files: a scan of each root before the call
//! (what it finds, no call made: it is recorded as the user's, or as a background job's while
//! the session has one), the call, and a scan after, whose changes are the call's checkpoint.
//!
//! The scan before runs ahead of the permission stage, so that `undo` and `restore` judge and
//! act on a list that includes what changed meanwhile. From then until the scan after, the
//! call holds each root's checkpoint lock: a call of another session that changes files waits,
//! so that two sessions' changes are not mixed.

use std::fmt::Write as _;
use std::sync::Arc;

use serde_json::Value;

use crate::checkpoint::{Kind, NewCheckpoint, RootCheckpoints};
use crate::context::ToolContext;
use crate::error::ToolError;
use crate::fs::Journal;
use crate::jobs::Jobs;
use crate::registry::DynTool;
use crate::vocab::{Content, ToolOutput};

/// The tool that reads a background job's output: a scan runs before it (only), so that what
/// the job changed is attributed to it early.
const JOB_READER: &str = "bash_output";

/// A call between its scan before and its scan after.
pub(super) struct Begun {
    roots: Vec<Arc<RootCheckpoints>>,
    locks: Vec<tokio::sync::OwnedMutexGuard<()>>,
    tool: String,
    label: String,
    journal_before: u64,
}

/// Scans before a call of `tool` with `input`, when the tool can change files.
pub(super) async fn before(tool: &dyn DynTool, input: &Value, ctx: &ToolContext) -> Option<Begun> {
    let checkpoints = ctx.env().checkpoints();
    if !checkpoints.enabled() {
        return None;
    }
    // A call that may run beside others (its flags for this input say so) gets no checkpoint
    // of its own: holding the roots' lock would serialise it, and its changes are found by
    // the next scan. No built-in tool that changes files is such a call.
    let flags = match tool.parse(input.clone()) {
        Ok(args) => tool.flags(Some(&args)),
        Err(_) => tool.flags(None),
    };
    let mutating = !flags.read_only && !flags.concurrency_safe;
    if !mutating && tool.name() != JOB_READER {
        return None;
    }
    let roots: Vec<Arc<RootCheckpoints>> = ctx
        .roots()
        .roots()
        .iter()
        .filter_map(|root| checkpoints.for_root(root.path()))
        .collect();
    if roots.is_empty() {
        return None;
    }
    let mut locks = Vec::with_capacity(roots.len());
    for root in &roots {
        locks.push(root.call_lock().lock_owned().await);
    }
    let jobs = ctx.session().state::<Jobs>().unattributed();
    let (kind, tool_name, label, session) = if jobs.is_empty() {
        (
            Kind::Outside,
            String::from("outside"),
            String::from("changed between calls, by no call"),
            String::new(),
        )
    } else {
        let ids: Vec<&str> = jobs.iter().map(|(id, _)| id.as_str()).collect();
        let commands: Vec<&str> = jobs.iter().map(|(_, c)| c.as_str()).collect();
        (
            Kind::Job,
            format!("bash ({})", ids.join(", ")),
            short(&commands.join("; ")),
            ctx.session().id().to_owned(),
        )
    };
    let scanned = roots.clone();
    let found = NewCheckpoint {
        kind,
        tool: tool_name,
        label,
        session,
        call: String::new(),
        journal_change: None,
    };
    let scan = ctx
        .blocking(move |_| {
            for root in scanned {
                if let Err(err) = root.scan_and_record(found.clone()) {
                    tracing::warn!(%err, "the scan before a call failed");
                }
            }
            Ok(())
        })
        .await;
    if let Err(err) = scan {
        tracing::warn!(%err, "the scan before a call failed");
    }
    if !mutating {
        return None;
    }
    Some(Begun {
        roots,
        locks,
        tool: tool.name().to_owned(),
        label: label_of(tool.name(), input),
        journal_before: ctx.session().state::<Journal>().current(),
    })
}

impl Begun {
    /// Scans after the call and records its changes; a result gets a note when the call
    /// changed what cannot be restored (ignored trees, files over the size limit).
    pub(super) async fn after(
        self,
        result: Result<ToolOutput, ToolError>,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let journal_after = ctx.session().state::<Journal>().current();
        let kind = match self.tool.as_str() {
            "undo" => Kind::Undo,
            "restore" => Kind::Restore,
            _ => Kind::Call,
        };
        let new = NewCheckpoint {
            kind,
            tool: self.tool,
            label: self.label,
            session: ctx.session().id().to_owned(),
            call: ctx.call_id().to_owned(),
            journal_change: (journal_after != self.journal_before).then_some(journal_after),
        };
        let roots = self.roots;
        let notes = ctx
            .blocking(move |_| {
                let mut notes = String::new();
                for root in roots {
                    match root.scan_and_record(new.clone()) {
                        Ok(recorded) => {
                            if !recorded.ignored.is_empty() {
                                let _ = write!(
                                    notes,
                                    "\n[this call also changed ignored files under {} in {}: \
                                     they are not in its checkpoint and cannot be restored]",
                                    quoted(&recorded.ignored),
                                    root.root().display()
                                );
                            }
                            if !recorded.unkept.is_empty() {
                                let _ = write!(
                                    notes,
                                    "\n[changed files too large to keep (over [checkpoints] \
                                     max_file_mb): {}; they cannot be restored]",
                                    quoted(&recorded.unkept)
                                );
                            }
                            if !recorded.full.is_empty() {
                                let _ = write!(
                                    notes,
                                    "\n[the checkpoint store is full (over [checkpoints] \
                                     max_store_mb even with every older checkpoint dropped): \
                                     the content of {} was not kept; they cannot be restored]",
                                    quoted(&recorded.full)
                                );
                            }
                        }
                        Err(err) => {
                            tracing::warn!(%err, "the scan after a call failed");
                        }
                    }
                }
                Ok(notes)
            })
            .await
            .unwrap_or_default();
        drop(self.locks);
        match result {
            Ok(mut output) if !notes.is_empty() => {
                output
                    .content
                    .push(Content::Text(notes.trim_start().to_owned()));
                Ok(output)
            }
            other => other,
        }
    }
}

fn quoted(names: &[String]) -> String {
    const SHOWN: usize = 5;
    let mut text: Vec<String> = names.iter().take(SHOWN).map(|n| format!("`{n}`")).collect();
    if names.len() > SHOWN {
        text.push(format!("and {} more", names.len() - SHOWN));
    }
    text.join(", ")
}

/// A short label for a call: the command, or the path.
fn label_of(tool: &str, input: &Value) -> String {
    let field = [
        "command",
        "path",
        "file_path",
        "notebook_path",
        "checkpoint",
    ]
    .iter()
    .find_map(|key| input.get(key));
    match field {
        Some(Value::String(text)) => short(text),
        Some(other) => short(&other.to_string()),
        None => tool.to_owned(),
    }
}

/// At most 80 characters of one line.
fn short(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default();
    let mut cut: String = line.chars().take(80).collect();
    if cut.len() < text.len() {
        cut.push('…');
    }
    cut
}
