//! `apply_patch`: the Codex patch envelope, many files in one call, all or nothing.

use std::borrow::Cow;
use std::fmt::Write as _;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::change::edit::preview_text;
use crate::change::{Loaded, check_fresh, check_not_stale, commit_many, load};
use crate::context::{AccessKind, ToolContext, ToolEnv};
use crate::error::ToolError;
use crate::fs::{Journal, PathError, ResolvedPath, create_parents};
use crate::patch::{FileOp, Patch, apply_hunks, parse};
use crate::permission::Access;
use crate::text::{Document, MatchLevel, in_style_of, render_diff};
use crate::tool::Tool;
use crate::vocab::{JsonObject, ToolFlags, ToolOutput};

const DESCRIPTION: &str = include_str!("apply_patch.md");

/// Arguments of `apply_patch`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApplyPatchArgs {
    /// The whole patch, from `*** Begin Patch` to `*** End Patch`.
    pub patch: String,
}

/// The `apply_patch` tool.
#[derive(Debug, Default, Clone, Copy)]
pub struct ApplyPatchTool;

impl Tool for ApplyPatchTool {
    type Args = ApplyPatchArgs;
    const NAME: &'static str = "apply_patch";
    const TITLE: &'static str = "Apply patch";

    fn description(&self, _env: &ToolEnv) -> Cow<'static, str> {
        DESCRIPTION.into()
    }

    fn flags(&self, _args: Option<&ApplyPatchArgs>) -> ToolFlags {
        ToolFlags::MUTATING
    }

    fn output_schema(&self) -> Option<JsonObject> {
        Some(crate::schema::output_schema::<PatchResult>())
    }

    async fn validate(
        &self,
        args: ApplyPatchArgs,
        _ctx: &ToolContext,
    ) -> Result<ApplyPatchArgs, ToolError> {
        parse_patch(&args.patch)?;
        Ok(args)
    }

    async fn accesses(
        &self,
        args: &ApplyPatchArgs,
        ctx: &ToolContext,
    ) -> Result<Vec<Access>, ToolError> {
        let patch = parse_patch(&args.patch)?;
        let mut accesses = Vec::new();
        for path in touched_paths(&patch) {
            accesses.push(ctx.path_access(&path, AccessKind::Write).await?);
        }
        Ok(accesses)
    }

    async fn ask_detail(
        &self,
        args: &ApplyPatchArgs,
        ctx: &ToolContext,
    ) -> Result<Option<String>, ToolError> {
        let patch = parse_patch(&args.patch)?;
        let plan = ctx.blocking(move |ctx| plan(&ctx, &patch)).await?;
        for change in &plan {
            ctx.bind_preview(&change.loaded.resolved.path, change.loaded.hash);
        }
        let mut diffs = String::new();
        for change in &plan {
            let _ = writeln!(diffs, "{} {}", change.letter(), change.label());
            diffs.push_str(&change.diff().0);
        }
        Ok(Some(preview_text(&diffs)))
    }

    async fn execute(
        &self,
        args: ApplyPatchArgs,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let patch = parse_patch(&args.patch)?;
        let paths = {
            let patch = patch.clone();
            ctx.blocking(move |ctx| {
                touched_paths(&patch)
                    .iter()
                    .map(|p| Ok(ctx.resolve_allowed(p)?.path))
                    .collect::<Result<Vec<_>, ToolError>>()
            })
            .await?
        };
        let _guards = ctx.env().locks().lock_all(&paths).await;
        ctx.blocking(move |ctx| {
            let plan = plan(&ctx, &patch)?;
            apply(&ctx, &plan)?;
            Ok(report(&plan))
        })
        .await
    }
}

fn parse_patch(text: &str) -> Result<Patch, ToolError> {
    parse(text).map_err(|e| {
        ToolError::invalid(format!(
            "{e}. The patch format is described in the tool description; nothing was changed"
        ))
    })
}

/// Every path the patch writes, in order (move destinations included).
fn touched_paths(patch: &Patch) -> Vec<String> {
    let mut paths = Vec::new();
    for op in &patch.ops {
        paths.push(op.path().to_owned());
        if let FileOp::Update {
            move_to: Some(dest),
            ..
        } = op
        {
            paths.push(dest.clone());
        }
    }
    paths
}

/// The structured result of `apply_patch`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
struct PatchResult {
    /// The files changed, in the order the patch changed them.
    files: Vec<PatchedFile>,
}

/// What the patch did to one file.
#[derive(Debug, Clone, Serialize, JsonSchema)]
struct PatchedFile {
    /// The file, as shown.
    path: String,
    /// What happened to it.
    action: PatchAction,
    /// Where a moved file went, or null when it did not move.
    moved_to: Option<String>,
    /// The new content hash, or null when the file was removed (deleted or moved away).
    hash: Option<String>,
    /// Lines added.
    added: usize,
    /// Lines removed.
    removed: usize,
    /// How each hunk was found in the file, in order.
    match_levels: Vec<MatchLevel>,
}

/// What happened to a file.
#[derive(Debug, Clone, Copy, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum PatchAction {
    /// Created (or, at a move's destination, written).
    Added,
    /// Changed in place, or replaced whole.
    Updated,
    /// Removed.
    Deleted,
    /// Moved away: the file named in `moved_to` is its new place.
    Moved,
}

/// What one file will become.
struct FileChange {
    loaded: Loaded,
    /// The new content, or `None` to remove the file.
    new: Option<Document>,
    action: Action,
    levels: Vec<MatchLevel>,
}

#[derive(Clone, PartialEq, Eq)]
enum Action {
    Added,
    /// An existing file replaced whole (`*** Add File` or `*** Move to` onto it).
    Replaced,
    Updated,
    Deleted,
    /// The source half of a move (removed); the destination is an `Added` change after it.
    MovedAway {
        to: String,
    },
}

impl FileChange {
    fn letter(&self) -> char {
        match self.action {
            Action::Added => 'A',
            Action::Replaced | Action::Updated => 'M',
            Action::Deleted => 'D',
            Action::MovedAway { .. } => 'R',
        }
    }

    fn label(&self) -> String {
        match &self.action {
            Action::MovedAway { to } => format!("{} -> {to}", self.loaded.resolved.display()),
            Action::Replaced => format!("{} (replaced whole)", self.loaded.resolved.display()),
            _ => self.loaded.resolved.display(),
        }
    }

    fn diff(&self) -> (String, crate::text::DiffStats) {
        let before = self.loaded.bytes.as_ref().map_or_else(String::new, |b| {
            Document::decode(b.clone())
                .map(|d| d.normalized().to_owned())
                .unwrap_or_default()
        });
        if matches!(self.action, Action::MovedAway { .. }) {
            return (String::new(), crate::text::DiffStats::default());
        }
        render_diff(&before, self.new.as_ref().map_or("", Document::normalized))
    }
}

/// Loads every file and works out its new content; writes nothing.
fn plan(ctx: &ToolContext, patch: &Patch) -> Result<Vec<FileChange>, ToolError> {
    let mut changes: Vec<FileChange> = Vec::new();
    let resolve =
        |path: &str| -> Result<ResolvedPath, ToolError> { Ok(ctx.resolve_allowed(path)?) };
    for op in &patch.ops {
        let loaded = load(resolve(op.path())?)?;
        let display = loaded.resolved.display();
        if changes
            .iter()
            .any(|c| c.loaded.resolved.path == loaded.resolved.path)
        {
            return Err(ToolError::invalid(format!(
                "the patch changes `{display}` twice; merge its hunks into one `Update File`"
            )));
        }
        match op {
            FileOp::Add { content, .. } => {
                let (new, action) = if loaded.exists() {
                    // Codex overwrites; gimlet does when the session has seen what goes.
                    check_replaceable(ctx, &loaded, "`*** Add File:` replaces it")?;
                    (replacement(&loaded, content), Action::Replaced)
                } else {
                    (Document::from_text(content.clone()), Action::Added)
                };
                changes.push(FileChange {
                    loaded,
                    new: Some(new),
                    action,
                    levels: Vec::new(),
                });
            }
            FileOp::Delete { .. } => {
                if !loaded.exists() {
                    return Err(PathError::NotFound {
                        path: display,
                        hint: String::from("; nothing to delete"),
                    }
                    .into());
                }
                check_not_stale(ctx, &loaded)?;
                changes.push(FileChange {
                    loaded,
                    new: None,
                    action: Action::Deleted,
                    levels: Vec::new(),
                });
            }
            FileOp::Update { move_to, hunks, .. } => {
                let Some(bytes) = &loaded.bytes else {
                    return Err(PathError::NotFound {
                        path: display,
                        hint: String::from("; to create it use `*** Add File:`"),
                    }
                    .into());
                };
                check_not_stale(ctx, &loaded)?;
                let doc = Document::decode(bytes.clone())
                    .map_err(|e| ToolError::failed(format!("`{display}`: {e}")))?;
                let (text, levels) = if hunks.is_empty() {
                    (doc, Vec::new())
                } else {
                    let (text, levels) = apply_hunks(&doc, hunks).map_err(|e| {
                        let e = e.to_string();
                        let e = e.trim_end_matches('.');
                        ToolError::failed(format!("`{display}`, {e}. Nothing was changed"))
                    })?;
                    // The file keeps its encoding (a UTF-16 file is written back in UTF-16).
                    (Document::from_text_in(text, doc.encoding()), levels)
                };
                match move_to {
                    None => changes.push(FileChange {
                        loaded,
                        new: Some(text),
                        action: Action::Updated,
                        levels,
                    }),
                    Some(dest) => {
                        let target = load(resolve(dest)?)?;
                        plan_move(ctx, &mut changes, loaded, target, text, levels)?;
                    }
                }
            }
        }
    }
    Ok(changes)
}

/// The two halves of a move: the source removed, the destination written (replacing a file
/// there only as `write` would).
fn plan_move(
    ctx: &ToolContext,
    changes: &mut Vec<FileChange>,
    loaded: Loaded,
    target: Loaded,
    text: Document,
    levels: Vec<MatchLevel>,
) -> Result<(), ToolError> {
    let dest_display = target.resolved.display();
    if target.resolved.path == loaded.resolved.path {
        // Moving a file onto itself is an update.
        changes.push(FileChange {
            loaded,
            new: Some(text),
            action: Action::Updated,
            levels,
        });
        return Ok(());
    }
    if changes
        .iter()
        .any(|c| c.loaded.resolved.path == target.resolved.path)
    {
        return Err(ToolError::invalid(format!(
            "the patch changes `{dest_display}` twice; merge its operations into one"
        )));
    }
    let action = if target.exists() {
        check_replaceable(ctx, &target, "`*** Move to:` replaces it")?;
        Action::Replaced
    } else {
        Action::Added
    };
    changes.push(FileChange {
        loaded,
        new: None,
        action: Action::MovedAway { to: dest_display },
        levels: levels.clone(),
    });
    changes.push(FileChange {
        loaded: target,
        new: Some(text),
        action,
        levels,
    });
    Ok(())
}

/// Refuses to replace an existing file the session has not seen as it is: the rule of `write`.
fn check_replaceable(ctx: &ToolContext, loaded: &Loaded, what: &str) -> Result<(), ToolError> {
    let display = loaded.resolved.display();
    match check_fresh(ctx, loaded, None) {
        Ok(()) => Ok(()),
        Err(ToolError::Stale(_)) if ctx.session().files().get(&loaded.resolved.path).is_none() => {
            Err(ToolError::Stale(format!(
                "`{display}` already exists and has not been read in this session; {what} only \
                 after a `read` (so that nothing is overwritten unseen). Read it first, or change \
                 it with `*** Update File: {display}`. Nothing was changed"
            )))
        }
        Err(ToolError::Stale(reason)) => Err(ToolError::Stale(format!(
            "`{display}` already exists and {what} only as this session read it: {reason}. \
             Nothing was changed"
        ))),
        Err(other) => Err(other),
    }
}

/// The content an `*** Add File` puts over an existing file: in that file's line-ending, BOM
/// and encoding style when it is text, as `write` does.
fn replacement(loaded: &Loaded, content: &str) -> Document {
    match loaded.bytes.as_ref().map(|b| Document::decode(b.clone())) {
        Some(Ok(old)) => in_style_of(&old, content),
        Some(Err(err)) => Document::from_text_in(content.to_owned(), err.encoding()),
        None => Document::from_text(content.to_owned()),
    }
}

/// Writes every change, all or nothing, also across a crash (see `fs::commit_all`).
fn apply(ctx: &ToolContext, plan: &[FileChange]) -> Result<(), ToolError> {
    let change = ctx.session().state::<Journal>().begin();
    // Moves write the destination before removing the source.
    let mut order: Vec<&FileChange> = plan
        .iter()
        .filter(|c| !matches!(c.action, Action::MovedAway { .. }))
        .collect();
    order.extend(
        plan.iter()
            .filter(|c| matches!(c.action, Action::MovedAway { .. })),
    );
    for file in &order {
        if !file.loaded.exists() {
            create_parents(&file.loaded.resolved)?;
        }
    }
    let bytes: Vec<Option<Cow<'_, [u8]>>> = order
        .iter()
        .map(|c| c.new.as_ref().map(Document::bytes))
        .collect();
    let files: Vec<(&Loaded, Option<&[u8]>)> = order
        .iter()
        .zip(&bytes)
        .map(|(c, bytes)| (&c.loaded, bytes.as_deref()))
        .collect();
    commit_many(ctx, ApplyPatchTool::NAME, change, &files)?;
    Ok(())
}

fn report(plan: &[FileChange]) -> ToolOutput {
    let mut summary = format!(
        "Applied the patch: {} file{} changed.\n",
        plan.len(),
        if plan.len() == 1 { "" } else { "s" }
    );
    let mut diffs = String::new();
    let mut files = Vec::new();
    for change in plan {
        let (diff, stats) = change.diff();
        let levels: Vec<&str> = change.levels.iter().map(|l| l.describe()).collect();
        let mut distinct = levels.clone();
        distinct.dedup();
        let how = if distinct.is_empty() || distinct == ["exact match"] {
            String::new()
        } else {
            format!("; {}", distinct.join("; "))
        };
        let _ = writeln!(
            summary,
            "{} {} (+{} -{}{how})",
            change.letter(),
            change.label(),
            stats.added,
            stats.removed
        );
        if !diff.is_empty() {
            let _ = writeln!(diffs, "--- {}", change.loaded.resolved.display());
            diffs.push_str(&diff);
        }
        let hash = change
            .new
            .as_ref()
            .map(|doc| crate::fs::ContentHash::of(&doc.bytes()).to_string());
        let (action, moved_to) = match &change.action {
            Action::Added => (PatchAction::Added, None),
            Action::Replaced | Action::Updated => (PatchAction::Updated, None),
            Action::Deleted => (PatchAction::Deleted, None),
            Action::MovedAway { to } => (PatchAction::Moved, Some(to.clone())),
        };
        files.push(PatchedFile {
            path: change.loaded.resolved.display(),
            action,
            moved_to,
            hash,
            added: stats.added,
            removed: stats.removed,
            match_levels: change.levels.clone(),
        });
    }
    let text = if diffs.is_empty() {
        summary
    } else {
        format!("{summary}\n{diffs}")
    };
    ToolOutput::text(text)
        .with_title("apply_patch")
        .with_structured_of(&PatchResult { files })
}

#[cfg(test)]
#[path = "apply_patch_tests.rs"]
mod tests;
