//! `undo`: revert the latest change a gimlet tool made, from the session's journal.

use std::borrow::Cow;
use std::fmt::Write as _;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use crate::change::{commit_files, load};
use crate::context::{AccessKind, ToolContext, ToolEnv};
use crate::error::ToolError;
use crate::fs::{Journal, JournalEntry, create_parents};
use crate::permission::Access;
use crate::text::{Document, render_diff};
use crate::tool::Tool;
use crate::vocab::{ToolFlags, ToolOutput};

const DESCRIPTION: &str = include_str!("undo.md");

/// Arguments of `undo`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UndoArgs {
    /// The file whose latest change to revert; without it, the latest change overall.
    pub path: Option<String>,
}

/// The `undo` tool.
#[derive(Debug, Default, Clone, Copy)]
pub struct UndoTool;

impl Tool for UndoTool {
    type Args = UndoArgs;
    const NAME: &'static str = "undo";
    const TITLE: &'static str = "Undo last change";

    fn description(&self, _env: &ToolEnv) -> Cow<'static, str> {
        DESCRIPTION.into()
    }

    fn flags(&self, _args: Option<&UndoArgs>) -> ToolFlags {
        ToolFlags::MUTATING
    }

    async fn accesses(&self, args: &UndoArgs, ctx: &ToolContext) -> Result<Vec<Access>, ToolError> {
        let entries = entries(args, ctx).await?;
        let mut accesses = Vec::new();
        for entry in &entries {
            accesses.push(
                ctx.path_access(&entry.path.display().to_string(), AccessKind::Write)
                    .await?,
            );
        }
        Ok(accesses)
    }

    async fn execute(&self, args: UndoArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let entries = entries(&args, ctx).await?;
        let paths: Vec<_> = entries.iter().map(|e| e.path.clone()).collect();
        let _guards = ctx.env().locks().lock_all(&paths).await;
        ctx.blocking(move |ctx| revert(&ctx, &entries)).await
    }
}

/// The journal entries the call reverts, or an error that says what can be undone.
async fn entries(args: &UndoArgs, ctx: &ToolContext) -> Result<Vec<JournalEntry>, ToolError> {
    let journal = ctx.session().state::<Journal>();
    let path = match &args.path {
        Some(path) => {
            let path = path.clone();
            Some(
                ctx.blocking(move |ctx| Ok(ctx.resolve(&path)?.path))
                    .await?,
            )
        }
        None => None,
    };
    let entries = journal.latest(path.as_deref());
    if entries.is_empty() {
        let changed = journal.paths();
        let what = match &args.path {
            Some(p) => format!("no change to `{p}` by a gimlet tool in this session"),
            None => String::from("no change by a gimlet tool in this session"),
        };
        let hint = if changed.is_empty() {
            String::new()
        } else {
            format!("; files that can be undone: {}", changed.join(", "))
        };
        return Err(ToolError::invalid(format!("nothing to undo: {what}{hint}")));
    }
    Ok(entries)
}

fn revert(ctx: &ToolContext, entries: &[JournalEntry]) -> Result<ToolOutput, ToolError> {
    // Check everything first: undo changes nothing unless it can revert every file.
    let mut current = Vec::with_capacity(entries.len());
    for entry in entries {
        let loaded = load(ctx.resolve_allowed(&entry.path.display().to_string())?)?;
        if loaded.hash != entry.after {
            let now = loaded.hash.map_or_else(
                || String::from("it was removed"),
                |h| format!("its hash is now {h}"),
            );
            return Err(ToolError::Stale(format!(
                "`{}` changed after `{}` changed it ({now}); undo would overwrite that work, so nothing was \
                 reverted. Read the file and fix it by hand",
                entry.display, entry.tool
            )));
        }
        current.push(loaded);
    }
    // The content before, from what the journal kept and what the file holds now (what the
    // change left, as the hash just showed).
    let mut restored: Vec<Option<Vec<u8>>> = Vec::with_capacity(entries.len());
    for (entry, loaded) in entries.iter().zip(&current) {
        restored.push(match &entry.before {
            None => None,
            Some(before) => Some(
                before
                    .restore(loaded.bytes.as_deref().unwrap_or_default())
                    .ok_or_else(|| {
                        ToolError::failed(format!(
                            "`{}` cannot be restored from what the journal kept; nothing was \
                             reverted",
                            entry.display
                        ))
                    })?,
            ),
        });
    }
    for (loaded, before) in current.iter().zip(&restored) {
        if before.is_some() && !loaded.exists() {
            create_parents(&loaded.resolved)?;
        }
    }
    // Every file back, or none, each only if it is still as checked above.
    let files: Vec<_> = entries
        .iter()
        .zip(&current)
        .zip(&restored)
        .map(|((entry, loaded), before)| (loaded, before.as_deref(), entry.ownership))
        .collect();
    commit_files(ctx, &files)?;
    let mut text = String::new();
    for ((entry, loaded), before) in entries.iter().zip(&current).zip(&restored) {
        let before_text = loaded
            .bytes
            .as_ref()
            .map_or_else(String::new, |b| normalized(b));
        let after_text = before.as_ref().map_or_else(String::new, |b| normalized(b));
        let (diff, _) = render_diff(&before_text, &after_text);
        let action = match (&entry.before, entry.after) {
            (None, _) => "removed (it did not exist before)",
            (Some(_), None) => "restored (it had been deleted)",
            (Some(_), Some(_)) => "restored",
        };
        let _ = writeln!(
            text,
            "`{}` {action}, undoing `{}`.",
            entry.display, entry.tool
        );
        text.push_str(&diff);
    }
    ctx.session().state::<Journal>().remove(entries);
    let files: Vec<&str> = entries.iter().map(|e| e.display.as_str()).collect();
    Ok(ToolOutput::text(text)
        .with_title("undo")
        .with_structured(json!({ "reverted": files })))
}

fn normalized(bytes: &[u8]) -> String {
    Document::decode(bytes.to_vec())
        .map(|d| d.normalized().to_owned())
        .unwrap_or_default()
}
