//! `undo`: revert the latest change of the session: a file tool's from the session's journal
//! (as it always did), any other call's (`bash`, a background job, a plugin, `restore`) from
//! its checkpoint. Changes no call made (the user's) are never undone.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use crate::change::restore::{Target, put_back};
use crate::change::{commit_files, load};
use crate::checkpoint::{Checkpoint, Kind, RootCheckpoints};
use crate::context::{AccessKind, ToolContext, ToolEnv};
use crate::error::ToolError;
use crate::fs::{Journal, JournalEntry, create_parents};
use crate::permission::Access;
use crate::text::{Document, render_diff};
use crate::tool::Tool;
use crate::vocab::{ToolFlags, ToolOutput};

const DESCRIPTION: &str = include_str!("undo.md");
/// With checkpoints on, `undo` reaches every call's changes.
const DESCRIPTION_CHECKPOINTS: &str = include_str!("undo_checkpoints.md");

/// Arguments of `undo`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UndoArgs {
    /// The file whose latest change to revert; without it, the latest call's changes.
    pub path: Option<String>,
}

/// The `undo` tool.
#[derive(Debug, Default, Clone, Copy)]
pub struct UndoTool;

impl Tool for UndoTool {
    type Args = UndoArgs;
    const NAME: &'static str = "undo";
    const TITLE: &'static str = "Undo last change";

    fn description(&self, env: &ToolEnv) -> Cow<'static, str> {
        if env.checkpoints().enabled() {
            DESCRIPTION_CHECKPOINTS.into()
        } else {
            DESCRIPTION.into()
        }
    }

    fn flags(&self, _args: Option<&UndoArgs>) -> ToolFlags {
        ToolFlags::MUTATING
    }

    async fn accesses(&self, args: &UndoArgs, ctx: &ToolContext) -> Result<Vec<Access>, ToolError> {
        let plan = plan(args, ctx).await?;
        let mut accesses = Vec::new();
        for path in plan.paths() {
            accesses.push(
                ctx.path_access(&path.display().to_string(), AccessKind::Write)
                    .await?,
            );
        }
        Ok(accesses)
    }

    async fn execute(&self, args: UndoArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let plan = plan(&args, ctx).await?;
        let paths = plan.paths();
        let _guards = ctx.env().locks().lock_all(&paths).await;
        match plan {
            Plan::Journal { entries, linked } => {
                ctx.blocking(move |ctx| {
                    let output = revert(&ctx, &entries)?;
                    if let Some((root, id)) = linked {
                        let rels: Vec<String> = entries
                            .iter()
                            .filter_map(|e| root.relative(&e.path))
                            .collect();
                        if let Err(err) = root.mark_undone(id, &rels) {
                            tracing::warn!(%err, "a checkpoint could not be marked undone");
                        }
                    }
                    Ok(output)
                })
                .await
            }
            Plan::Checkpoint {
                root,
                checkpoint,
                targets,
            } => {
                ctx.blocking(move |ctx| step_back(&ctx, &root, &checkpoint, &targets))
                    .await
            }
        }
    }
}

/// What an undo reverts.
enum Plan {
    /// A file tool's change, from the journal; with the checkpoint of the same call.
    Journal {
        entries: Vec<JournalEntry>,
        linked: Option<(Arc<RootCheckpoints>, u64)>,
    },
    /// Another call's changes, from its checkpoint.
    Checkpoint {
        root: Arc<RootCheckpoints>,
        checkpoint: Checkpoint,
        targets: Vec<Target>,
    },
}

impl Plan {
    fn paths(&self) -> Vec<PathBuf> {
        match self {
            Self::Journal { entries, .. } => entries.iter().map(|e| e.path.clone()).collect(),
            Self::Checkpoint { root, targets, .. } => {
                targets.iter().map(|t| root.root().join(&t.rel)).collect()
            }
        }
    }
}

/// The latest checkpoint of this session that `undo` may step back through (not the user's,
/// not an undo's, not undone), touching `path` if given, with its root.
fn latest_checkpoint(
    ctx: &ToolContext,
    path: Option<&std::path::Path>,
) -> Option<(Arc<RootCheckpoints>, Checkpoint, Vec<Target>)> {
    let roots = ctx
        .env()
        .checkpoints()
        .of_roots(ctx.roots().roots().iter().map(|r| r.path()));
    let mut best: Option<(Arc<RootCheckpoints>, Checkpoint, Vec<Target>)> = None;
    for root in roots {
        let rel = match path {
            Some(path) => match root.relative(path) {
                Some(rel) => Some(rel),
                None => continue,
            },
            None => None,
        };
        let Ok((list, _)) = root.list() else {
            continue;
        };
        let found = list.into_iter().rev().find_map(|checkpoint| {
            let undoable = matches!(checkpoint.kind, Kind::Call | Kind::Job | Kind::Restore)
                && checkpoint.session == ctx.session().id();
            if !undoable {
                return None;
            }
            let targets: Vec<Target> = checkpoint
                .changes
                .iter()
                .filter(|c| !checkpoint.undone.contains(&c.path))
                .filter(|c| rel.as_ref().is_none_or(|r| &c.path == r))
                .map(|c| Target {
                    rel: c.path.clone(),
                    want: c.before.clone(),
                    expect: c.after.clone(),
                })
                .collect();
            (!targets.is_empty()).then_some((checkpoint, targets))
        });
        if let Some((checkpoint, targets)) = found
            && best
                .as_ref()
                .is_none_or(|(_, b, _)| b.created_ms <= checkpoint.created_ms)
        {
            best = Some((Arc::clone(&root), checkpoint, targets));
        }
    }
    best
}

/// What the call reverts, or an error that says what can be undone.
async fn plan(args: &UndoArgs, ctx: &ToolContext) -> Result<Plan, ToolError> {
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
    let wanted = path.clone();
    let latest = ctx
        .blocking(move |ctx| Ok(latest_checkpoint(&ctx, wanted.as_deref())))
        .await?;
    let journal = ctx.session().state::<Journal>();
    let entries = journal.latest(path.as_deref());
    match latest {
        Some((root, checkpoint, _))
            if !entries.is_empty() && checkpoint.journal_change == Some(entries[0].change) =>
        {
            Ok(Plan::Journal {
                entries,
                linked: Some((root, checkpoint.id)),
            })
        }
        Some((root, checkpoint, targets)) => Ok(Plan::Checkpoint {
            root,
            checkpoint,
            targets,
        }),
        None if !entries.is_empty() => Ok(Plan::Journal {
            entries,
            linked: None,
        }),
        None => Err(nothing_to_undo(args, &journal)),
    }
}

/// Steps back through a checkpoint: its paths as they were before it, if they still hold what
/// it left.
fn step_back(
    ctx: &ToolContext,
    root: &RootCheckpoints,
    checkpoint: &Checkpoint,
    targets: &[Target],
) -> Result<ToolOutput, ToolError> {
    let what = format!(
        "checkpoint #{} (`{}`: {})",
        checkpoint.id, checkpoint.tool, checkpoint.label
    );
    let done = put_back(ctx, root, targets, /*overwrite*/ false, &what)?;
    let mut text = String::new();
    for one in &done {
        let _ = writeln!(
            text,
            "`{}` {}, undoing `{}` (checkpoint #{}: {}).",
            one.rel, one.action, checkpoint.tool, checkpoint.id, checkpoint.label
        );
        text.push_str(&one.diff);
    }
    let rels: Vec<String> = targets.iter().map(|t| t.rel.clone()).collect();
    if let Err(err) = root.mark_undone(checkpoint.id, &rels) {
        tracing::warn!(%err, "a checkpoint could not be marked undone");
    }
    Ok(ToolOutput::text(text)
        .with_title("undo")
        .with_structured(json!({ "reverted": rels, "checkpoint": checkpoint.id })))
}

fn nothing_to_undo(args: &UndoArgs, journal: &Journal) -> ToolError {
    let changed = journal.paths();
    let what = match &args.path {
        Some(p) => format!("no change to `{p}` by a call of this session"),
        None => String::from("no change by a call of this session"),
    };
    let hint = if changed.is_empty() {
        String::new()
    } else {
        format!("; files that can be undone: {}", changed.join(", "))
    };
    ToolError::invalid(format!("nothing to undo: {what}{hint}"))
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
