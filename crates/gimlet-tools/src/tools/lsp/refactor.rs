//! The `lsp` operations that change files: `rename` and `code_actions` (with `action`). A
//! server's `WorkspaceEdit` becomes one change through the path `apply_patch` takes: every path
//! resolved and judged by the rules, all or nothing (`change::commit_many` and its intent log),
//! journaled under one change id so that one `undo` reverts it, the session's read state
//! updated, and each file reported to `ToolContext::record_change`, so the diagnostics stage
//! runs after it as after any change.
//!
//! A server's edit is judged like the agent's own: a path the rules deny, that would need the
//! user's approval (outside the roots, protected, an `ask` rule, the strict mode) or that does
//! not resolve refuses the whole edit, naming the path and why. The call's own file was judged
//! (and, if need be, approved) by the permission stage.
//!
//! `workspace/applyEdit` requests from the server are accepted only while an action's command
//! runs (`Client::accept_edits`), and go through the same path, under the action's change id.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};

use super::workspace_edit::{self, EditError, FileOp, PlannedFile};
use super::{LspArgs, request};
use crate::change::{Loaded, check_fresh, check_not_stale, commit_many, load};
use crate::context::{AccessKind, ToolContext};
use crate::error::ToolError;
use crate::fs::{Journal, create_parents};
use crate::lsp::Client;
use crate::lsp::position::{line_at, uri_of, utf16_of_char};
use crate::permission::Permission;
use crate::text::counted;
use crate::vocab::{ToolFlags, ToolOutput};

/// What one applied edit did to one file, for the summary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Touched {
    /// The file, as shown.
    pub(super) display: String,
    /// Text edits applied to it.
    pub(super) edits: usize,
    /// What happened to it.
    pub(super) how: How,
}

/// What happened to a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum How {
    /// Its text changed.
    Edited,
    /// Created (or a rename's destination, shown with its source).
    Created,
    /// Renamed: this is its old name, the new one is given.
    Renamed { to: String },
    /// Removed.
    Deleted,
}

/// `rename`: asks the server for the edit and applies it.
pub(super) async fn rename(
    args: &LspArgs,
    ctx: &ToolContext,
    client: &Arc<Client>,
    file: &Path,
    at: Value,
) -> Result<ToolOutput, ToolError> {
    resync_open(ctx, client, file).await?;
    let mut params = at;
    params["newName"] = json!(args.new_name);
    let edit = request(client, ctx, "textDocument/rename", params).await?;
    let new_name = args.new_name.as_deref().unwrap_or_default();
    if edit.is_null() {
        return Ok(ToolOutput::text(format!(
            "The server proposes no edits for renaming to `{new_name}`: nothing was changed \
             (is there a symbol at the position?)."
        )));
    }
    let change = ctx.session().state::<Journal>().begin();
    let touched = apply_edit(ctx, client, file, &edit, change).await?;
    Ok(ToolOutput::text(summary(
        &format!("Renamed to `{new_name}`"),
        &touched,
    )))
}

/// `code_actions`: lists the actions at the position or range, or applies the one numbered
/// `action`.
pub(super) async fn code_actions(
    args: &LspArgs,
    ctx: &ToolContext,
    client: &Arc<Client>,
    file: &Path,
    text: &str,
    start: lsp_types::Position,
) -> Result<ToolOutput, ToolError> {
    let end = range_end(args, text, start);
    let display = ctx.roots().display(file);
    if args.action.is_some() {
        resync_open(ctx, client, file).await?;
    }
    let diagnostics: Vec<lsp_types::Diagnostic> = client
        .published(file)
        .map(|p| p.items)
        .unwrap_or_default()
        .into_iter()
        .filter(|d| {
            let (s, e) = (d.range.start, d.range.end);
            (s.line, s.character) <= (end.line, end.character)
                && (e.line, e.character) >= (start.line, start.character)
        })
        .collect();
    let mut params = json!({
        "textDocument": {"uri": uri_of(file)},
        "range": {"start": start, "end": end},
        "context": {"diagnostics": diagnostics, "triggerKind": 1},
    });
    if let Some(kind) = args.kind.as_deref().filter(|k| !k.is_empty()) {
        params["context"]["only"] = json!([kind]);
    }
    let result = request(client, ctx, "textDocument/codeAction", params).await?;
    let actions: Vec<Value> = match result {
        Value::Array(items) => items,
        _ => Vec::new(),
    };
    let place = format!("{display}:{}", human_range(text, start, end));
    let Some(number) = args.action else {
        return Ok(ToolOutput::text(list_actions(&place, &actions))
            .with_metadata("total", json!(actions.len())));
    };
    let Some(chosen) = number.checked_sub(1).and_then(|i| actions.get(i)).cloned() else {
        return Err(ToolError::invalid(format!(
            "there is no action {number} at {place}: the server offers {}. List them again \
             (without `action`) and choose by number",
            counted(actions.len(), "action", "actions")
        )));
    };
    apply_action(ctx, client, file, chosen).await
}

/// Applies one action: resolved first when the server fills its edit on request, then its
/// edit, then its command (whose `workspace/applyEdit` requests are taken as part of it).
async fn apply_action(
    ctx: &ToolContext,
    client: &Arc<Client>,
    file: &Path,
    mut action: Value,
) -> Result<ToolOutput, ToolError> {
    let title = action
        .get("title")
        .and_then(Value::as_str)
        .unwrap_or("the action")
        .to_owned();
    if let Some(reason) = action.pointer("/disabled/reason").and_then(Value::as_str) {
        return Err(ToolError::failed(format!(
            "the server offers `{title}` but disabled it: {reason}; nothing was changed"
        )));
    }
    // A bare `Command` has its command name in `command` as a string.
    let bare = action.get("command").is_some_and(Value::is_string);
    let resolvable = client.capability("/codeActionProvider/resolveProvider") == json!(true);
    if !bare && action.get("edit").is_none() && resolvable {
        action = request(client, ctx, "codeAction/resolve", action).await?;
    }
    let change = ctx.session().state::<Journal>().begin();
    let mut touched = Vec::new();
    if let Some(edit) = action.get("edit").filter(|e| !e.is_null()) {
        touched.extend(apply_edit(ctx, client, file, edit, change).await?);
    }
    let command = if bare {
        Some(action.clone())
    } else {
        action.get("command").filter(|c| c.is_object()).cloned()
    };
    if let Some(command) = command {
        touched.extend(run_command(ctx, client, file, &command, change).await?);
    }
    if touched.is_empty() {
        return Ok(ToolOutput::text(format!(
            "Applied `{title}`: it changed no file."
        )));
    }
    Ok(ToolOutput::text(summary(
        &format!("Applied `{title}`"),
        &touched,
    )))
}

/// Runs an action's command (`workspace/executeCommand`), applying the edits the server sends
/// back meanwhile (`workspace/applyEdit`) as part of the action's change.
async fn run_command(
    ctx: &ToolContext,
    client: &Arc<Client>,
    file: &Path,
    command: &Value,
    change: u64,
) -> Result<Vec<Touched>, ToolError> {
    let Some(mut accepted) = client.accept_edits() else {
        return Err(ToolError::failed(format!(
            "{} is applying another action; try again when it is done. Nothing was changed",
            client.name
        )));
    };
    let params = json!({
        "command": command.get("command").cloned().unwrap_or_default(),
        "arguments": command.get("arguments").cloned().unwrap_or_else(|| json!([])),
    });
    let mut touched = Vec::new();
    let mut failure: Option<ToolError> = None;
    let executed = request(client, ctx, "workspace/executeCommand", params);
    tokio::pin!(executed);
    let result = loop {
        tokio::select! {
            result = &mut executed => break result,
            Some((id, params)) = accepted.requests.recv() => {
                let outcome = match (&failure, params.get("edit")) {
                    (Some(_), _) => Err(String::from("an earlier edit of this action failed")),
                    (None, Some(edit)) => apply_edit(ctx, client, file, edit, change)
                        .await
                        .map_err(|err| {
                            let reason = err.to_string();
                            failure = Some(err);
                            reason
                        }),
                    (None, None) => Err(String::from("the request has no `edit`")),
                };
                match outcome {
                    Ok(files) => {
                        touched.extend(files);
                        client.answer_edit(&id, Ok(()));
                    }
                    Err(reason) => client.answer_edit(&id, Err(reason)),
                }
            }
        }
    };
    drop(accepted);
    if let Some(err) = failure {
        if touched.is_empty() {
            return Err(err);
        }
        let files: Vec<&str> = touched.iter().map(|t| t.display.as_str()).collect();
        return Err(ToolError::failed(format!(
            "{err}; the action's earlier edits stay applied ({}): one `undo` reverts them",
            files.join(", ")
        )));
    }
    // Edits already applied are the action's effect even when the command's own answer is an
    // error (or the server went after sending them): they are reported, not applied again.
    if touched.is_empty() {
        result?;
    }
    Ok(touched)
}

/// Sends the server every open document's text as it is on disk now, so that its edit is made
/// for the files as they are (a command may have changed them since it last saw them).
async fn resync_open(ctx: &ToolContext, client: &Client, skip: &Path) -> Result<(), ToolError> {
    let open: Vec<PathBuf> = client
        .open_paths()
        .await
        .into_iter()
        .filter(|p| p != skip)
        .collect();
    if open.is_empty() {
        return Ok(());
    }
    let texts = ctx
        .blocking(move |_| {
            Ok(open
                .into_iter()
                .filter_map(|p| crate::lsp::read_text(&p).map(|t| (p, t)))
                .collect::<Vec<_>>())
        })
        .await?;
    for (path, text) in texts {
        client.sync(&path, text).await;
    }
    Ok(())
}

/// Applies a server's `WorkspaceEdit` as one change (see the module docs).
async fn apply_edit(
    ctx: &ToolContext,
    client: &Client,
    file: &Path,
    edit: &Value,
    change: u64,
) -> Result<Vec<Touched>, ToolError> {
    let ops = workspace_edit::parse(edit).map_err(edit_error)?;
    let mut paths: Vec<PathBuf> = Vec::new();
    for op in &ops {
        for path in op.paths() {
            if !paths.iter().any(|p| p == path) {
                paths.push(path.to_owned());
            }
        }
    }
    if paths.is_empty() {
        return Ok(Vec::new());
    }
    // What gimlet sent the server of each edited file: the version edits must be made for.
    let mut sent = HashMap::new();
    for op in &ops {
        if let FileOp::Edit { path, .. } = op
            && let Some(version) = client.open_version(path).await
        {
            sent.insert(path.clone(), version);
        }
    }
    let resolved = {
        let paths = paths.clone();
        let file = file.to_owned();
        ctx.blocking(move |ctx| judge_paths(&ctx, &paths, &file))
            .await?
    };
    let locked: Vec<PathBuf> = resolved.iter().map(|r| r.path.clone()).collect();
    let _guards = ctx.env().locks().lock_all(&locked).await;
    ctx.blocking(move |ctx| commit_plan(&ctx, &ops, &paths, resolved, &sent, change))
        .await
}

/// Resolves every path of an edit and judges writing it as the rules judge the agent's writes.
/// Blocking.
fn judge_paths(
    ctx: &ToolContext,
    paths: &[PathBuf],
    file: &Path,
) -> Result<Vec<crate::fs::ResolvedPath>, ToolError> {
    let mut resolved = Vec::with_capacity(paths.len());
    for path in paths {
        let shown = ctx.roots().display(path);
        let one = ctx.resolve(&path.display().to_string()).map_err(|err| {
            ToolError::PermissionDenied(format!(
                "the server's edit changes `{shown}`, which gimlet may not change: {err}. \
                 Nothing was changed"
            ))
        })?;
        if one.path != file {
            let access = ctx.access_of(&one, AccessKind::Write);
            let judgement = ctx.policy().judge(
                <super::LspTool as crate::tool::Tool>::NAME,
                ToolFlags::MUTATING,
                &[access],
                ctx.session().grants(),
            );
            match judgement.permission {
                Permission::Allow => {}
                Permission::Deny(why) => {
                    return Err(ToolError::PermissionDenied(format!(
                        "the server's edit changes `{shown}`: {why}. Nothing was changed"
                    )));
                }
                Permission::Ask(request) => {
                    return Err(ToolError::PermissionDenied(format!(
                        "the server's edit changes `{shown}`, which needs the user's approval \
                         ({}); gimlet applies a server's edit only where the rules let it write \
                         without asking. Nothing was changed: make that part of the change with \
                         `apply_patch`, which asks",
                        request.reason.describe()
                    )));
                }
            }
        }
        ctx.check_allowed(&one).map_err(|err| {
            ToolError::PermissionDenied(format!(
                "the server's edit changes `{shown}`: {err}. Nothing was changed"
            ))
        })?;
        resolved.push(one);
    }
    Ok(resolved)
}

/// Loads the files, runs the edit over them, checks the session's view of each, and commits
/// the result all or nothing under `change`. Blocking, under the paths' locks.
fn commit_plan(
    ctx: &ToolContext,
    ops: &[FileOp],
    paths: &[PathBuf],
    resolved: Vec<crate::fs::ResolvedPath>,
    sent: &HashMap<PathBuf, i32>,
    change: u64,
) -> Result<Vec<Touched>, ToolError> {
    let mut loaded: HashMap<PathBuf, Loaded> = HashMap::new();
    for (path, one) in paths.iter().zip(resolved) {
        loaded.insert(path.clone(), load(one)?);
    }
    let display = |p: &Path| ctx.roots().display(p);
    let planned = workspace_edit::plan(
        ops,
        &mut |p| {
            loaded
                .get(p)
                .map(|file| file.bytes.clone())
                .ok_or_else(|| EditError::Malformed(format!("`{}` was not loaded", p.display())))
        },
        &|p| sent.get(p).copied(),
        &display,
    )
    .map_err(edit_error)?;
    let changed: Vec<&PlannedFile> = planned.iter().filter(|f| !f.unchanged()).collect();
    for file in &changed {
        let now = &loaded[&file.path];
        let replaced_whole =
            file.before.is_some() && (file.renamed_from.is_some() || file.edits == 0);
        if replaced_whole && file.after.is_some() {
            check_fresh(ctx, now, None).map_err(|err| match err {
                ToolError::Stale(reason) => ToolError::Stale(format!(
                    "the server's edit replaces `{}` whole: {reason}. Nothing was changed",
                    now.resolved.display()
                )),
                other => other,
            })?;
        } else {
            check_not_stale(ctx, now)?;
        }
    }
    // Writes go before removals (a rename's destination before its source goes).
    let mut order: Vec<&PlannedFile> = changed
        .iter()
        .copied()
        .filter(|f| f.after.is_some())
        .collect();
    order.extend(changed.iter().copied().filter(|f| f.after.is_none()));
    for file in &order {
        let now = &loaded[&file.path];
        if !now.exists() {
            create_parents(&now.resolved)?;
        }
    }
    let files: Vec<(&Loaded, Option<&[u8]>)> = order
        .iter()
        .map(|f| (&loaded[&f.path], f.after.as_deref()))
        .collect();
    commit_many(ctx, "lsp", change, &files)?;
    Ok(changed
        .iter()
        .map(|f| Touched {
            display: display(&f.path),
            edits: f.edits,
            how: match (&f.before, &f.after, &f.renamed_to) {
                (_, None, Some(to)) => How::Renamed { to: display(to) },
                (_, None, None) => How::Deleted,
                (None, Some(_), _) => How::Created,
                (Some(_), Some(_), _) => How::Edited,
            },
        })
        .collect())
}

fn edit_error(err: EditError) -> ToolError {
    match err {
        EditError::Version { .. } | EditError::Position { .. } => ToolError::Stale(err.to_string()),
        other => ToolError::Failed(other.to_string()),
    }
}

/// The summary of an applied edit: a headline with the counts, then a line per file.
pub(super) fn summary(headline: &str, touched: &[Touched]) -> String {
    // A rename's destination is shown on its source's line.
    let destinations: Vec<&str> = touched
        .iter()
        .filter_map(|t| match &t.how {
            How::Renamed { to } => Some(to.as_str()),
            _ => None,
        })
        .collect();
    let edits: usize = touched.iter().map(|t| t.edits).sum();
    let renamed = destinations.len();
    let created = touched
        .iter()
        .filter(|t| t.how == How::Created && !destinations.contains(&t.display.as_str()))
        .count();
    let deleted = touched.iter().filter(|t| t.how == How::Deleted).count();
    // A rename is one file under two names.
    let files = touched.len().saturating_sub(renamed);
    let mut out = format!(
        "{headline}: {} changed ({})",
        counted(files, "file", "files"),
        counted(edits, "edit", "edits")
    );
    for (n, word) in [
        (renamed, "renamed"),
        (created, "created"),
        (deleted, "deleted"),
    ] {
        if n > 0 {
            let _ = write!(out, ", {n} {word}");
        }
    }
    out.push_str(". One `undo` reverts it all.\n");
    let edits_of = |n: usize| {
        if n == 0 {
            String::new()
        } else {
            format!(" ({})", counted(n, "edit", "edits"))
        }
    };
    for t in touched {
        let line = match &t.how {
            // A rename's destination is on its source's line.
            How::Created | How::Edited if destinations.contains(&t.display.as_str()) => continue,
            How::Edited => format!("M {}{}", t.display, edits_of(t.edits)),
            How::Renamed { to } => {
                let moved = touched
                    .iter()
                    .find(|d| &d.display == to)
                    .map_or(0, |d| d.edits);
                format!("R {} -> {to}{}", t.display, edits_of(t.edits + moved))
            }
            How::Created => format!("A {}{}", t.display, edits_of(t.edits)),
            How::Deleted => format!("D {}", t.display),
        };
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// The numbered list of actions the server offers at `place`.
pub(super) fn list_actions(place: &str, actions: &[Value]) -> String {
    if actions.is_empty() {
        return format!("The server offers no code actions at {place}.\n");
    }
    let mut out = format!(
        "{} at {place}:\n",
        counted(actions.len(), "code action", "code actions")
    );
    for (i, action) in actions.iter().enumerate() {
        let title = action
            .get("title")
            .and_then(Value::as_str)
            .unwrap_or("(untitled)");
        let kind = match action.get("kind").and_then(Value::as_str) {
            Some(kind) if !kind.is_empty() => kind,
            _ if action.get("command").is_some_and(Value::is_string) => "command",
            _ => "action",
        };
        let _ = write!(out, "{}. [{kind}] {}", i + 1, crate::lsp::one_line(title));
        if action.get("isPreferred") == Some(&json!(true)) {
            out.push_str(" (preferred)");
        }
        if let Some(reason) = action.pointer("/disabled/reason").and_then(Value::as_str) {
            let _ = write!(out, " (disabled: {})", crate::lsp::one_line(reason));
        }
        out.push('\n');
    }
    out.push_str("Apply one with `action` (its number) and the same position.\n");
    out
}

/// The end of a `code_actions` range: `end_line`/`end_column` (1-based, characters), the end
/// of `end_line` without a column, else the start (an empty range).
fn range_end(args: &LspArgs, text: &str, start: lsp_types::Position) -> lsp_types::Position {
    let Some(line) = args.end_line else {
        return start;
    };
    let source = line_at(text, line - 1).unwrap_or_default();
    let column = args
        .end_column
        .map_or_else(|| source.chars().count(), |c| c - 1);
    lsp_types::Position::new(
        u32::try_from(line - 1).unwrap_or(u32::MAX),
        utf16_of_char(source, column),
    )
}

/// `line:col` or `line:col-line:col`, 1-based, columns in characters.
fn human_range(text: &str, start: lsp_types::Position, end: lsp_types::Position) -> String {
    let (l1, c1) = crate::lsp::position::human(Some(text), start);
    if start == end {
        return format!("{l1}:{c1}");
    }
    let (l2, c2) = crate::lsp::position::human(Some(text), end);
    format!("{l1}:{c1}-{l2}:{c2}")
}

#[cfg(test)]
#[path = "refactor_tests.rs"]
mod tests;
