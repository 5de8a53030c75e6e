//! The edit flow that `edit`, `multi_edit`, `write` and `apply_patch` share: plan the new
//! content of a file from edits, commit it, report it, and show it in a question.

use schemars::JsonSchema;
use serde::Serialize;

use crate::context::ToolContext;
use crate::error::ToolError;
use crate::fs::{Journal, create_parents};
use crate::text::{
    DiffStats, Document, EditSpec, MatchError, MatchLevel, apply_edits, render_diff,
};
use crate::vocab::ToolOutput;

use super::{Loaded, check_fresh, commit_meanwhile, load};

/// One edit, owned (for moving into blocking work).
#[derive(Debug, Clone)]
pub(crate) struct OwnedEdit {
    pub(crate) old_string: String,
    pub(crate) new_string: String,
    pub(crate) replace_all: bool,
}

/// The structured result of `edit`, `multi_edit` and `write`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub(crate) struct ChangeResult {
    /// The file, as shown.
    pub(crate) path: String,
    /// The new content hash, or null when the file was removed.
    pub(crate) hash: Option<String>,
    /// The file did not exist before.
    pub(crate) created: bool,
    /// Occurrences replaced (0 for `write`).
    pub(crate) replacements: usize,
    /// How each edit's `old_string` was found, in order (empty for `write`).
    pub(crate) match_levels: Vec<MatchLevel>,
    /// Lines added.
    pub(crate) added: usize,
    /// Lines removed.
    pub(crate) removed: usize,
}

/// What a change computes before anything is written.
pub(crate) struct Planned {
    pub(crate) loaded: Loaded,
    /// The file as it is (`None` when it does not exist).
    pub(crate) before: Option<Document>,
    /// The file as it will be.
    pub(crate) after: Document,
    pub(crate) levels: Vec<MatchLevel>,
    pub(crate) replacements: usize,
}

/// Works out the new content of the file, or why not. Blocking.
///
/// An empty `old_string` in the first edit creates the file (it must not exist, or be empty);
/// the other edits then apply to that content.
pub(crate) fn plan_edits(loaded: Loaded, edits: &[OwnedEdit]) -> Result<Planned, ToolError> {
    let display = loaded.resolved.display();
    let existing = match &loaded.bytes {
        Some(bytes) => Some(
            Document::decode(bytes.clone())
                .map_err(|e| ToolError::failed(format!("`{display}`: {e}")))?,
        ),
        None => None,
    };

    let creates = edits.first().is_some_and(|e| e.old_string.is_empty());
    let (start, rest) = match (&existing, creates) {
        (None, false) => {
            return Err(ToolError::Path(crate::fs::PathError::NotFound {
                path: display,
                hint: String::from("; to create it, pass an empty `old_string` (or use `write`)"),
            }));
        }
        (Some(doc), true) if !doc.normalized().is_empty() => {
            return Err(ToolError::invalid(format!(
                "`old_string` is empty but `{display}` already has content; to change it, copy the \
                 text to replace into `old_string` (use `write` to replace the whole file)"
            )));
        }
        (Some(doc), false) => (std::borrow::Cow::Borrowed(doc), edits),
        (_, true) => {
            let doc = match &existing {
                // An empty file that had a BOM keeps it (and a UTF-16 one its encoding).
                Some(existing) => crate::text::in_style_of(existing, &edits[0].new_string),
                None => Document::from_text(edits[0].new_string.clone()),
            };
            (std::borrow::Cow::Owned(doc), &edits[1..])
        }
    };
    let specs: Vec<EditSpec<'_>> = rest
        .iter()
        .map(|e| EditSpec {
            old: &e.old_string,
            new: &e.new_string,
            replace_all: e.replace_all,
        })
        .collect();
    let applied = apply_edits(&start, &specs).map_err(|(index, err)| {
        match_error(&display, edits.len(), index + usize::from(creates), &err)
    })?;
    let mut levels = Vec::with_capacity(edits.len());
    if creates {
        levels.push(MatchLevel::Exact);
    }
    levels.extend(applied.levels);
    Ok(Planned {
        // In the file's encoding: a UTF-16 file is written back in UTF-16.
        after: Document::from_text_in(applied.text, start.encoding()),
        loaded,
        before: existing,
        levels,
        replacements: applied.replacements + usize::from(creates),
    })
}

fn match_error(display: &str, count: usize, index: usize, err: &MatchError) -> ToolError {
    let which = if count > 1 {
        format!("edit {} of {count}: ", index + 1)
    } else {
        String::new()
    };
    ToolError::failed(format!("{which}{err} (in `{display}`)"))
}

/// The whole flow of `edit` and `multi_edit`, under the path's lock.
pub(crate) async fn edit_file(
    ctx: &ToolContext,
    tool: &'static str,
    path: String,
    edits: Vec<OwnedEdit>,
    expected_hash: Option<String>,
) -> Result<ToolOutput, ToolError> {
    let resolved = {
        let path = path.clone();
        ctx.blocking(move |ctx| Ok(ctx.resolve_allowed(&path)?))
            .await?
    };
    let _guard = ctx.env().locks().lock(&resolved.path).await;
    ctx.blocking(move |ctx| {
        let loaded = load(resolved)?;
        check_fresh(&ctx, &loaded, expected_hash.as_deref())?;
        let created = !loaded.exists();
        let planned = plan_edits(loaded, &edits)?;
        if created {
            create_parents(&planned.loaded.resolved)?;
        }
        let change = ctx.session().state::<Journal>().begin();
        // The diff is rendered while the new content goes to the disk.
        let mut diff = None;
        let hash = commit_meanwhile(
            &ctx,
            tool,
            change,
            &planned.loaded,
            Some(&planned.after.bytes()),
            &mut || diff = Some(planned.diff()),
        )?;
        Ok(report(&planned, hash, created, diff))
    })
    .await
}

impl Planned {
    /// The diff the change makes, and its counts.
    fn diff(&self) -> (String, DiffStats) {
        let before = self.before.as_ref().map_or("", Document::normalized);
        render_diff(before, self.after.normalized())
    }
}

/// The result: a summary line, then the diff (`diff`, if rendered already).
pub(crate) fn report(
    planned: &Planned,
    hash: Option<crate::fs::ContentHash>,
    created: bool,
    diff: Option<(String, DiffStats)>,
) -> ToolOutput {
    let display = planned.loaded.resolved.display();
    let after = &planned.after;
    let (diff, stats) = diff.unwrap_or_else(|| planned.diff());
    let hash_text = hash.map_or_else(String::new, |h| h.to_string());
    let levels: Vec<&str> = planned.levels.iter().map(|l| l.describe()).collect();
    let mut distinct = levels.clone();
    distinct.dedup();
    let summary = if created {
        format!(
            "Created `{display}` ({}). Hash {hash_text}.",
            crate::text::counted(after.normalized().lines().count(), "line", "lines")
        )
    } else {
        format!(
            "Edited `{display}`: {} ({}). +{} -{} lines. New hash {hash_text}.",
            crate::text::counted(planned.replacements, "replacement", "replacements"),
            distinct.join("; "),
            stats.added,
            stats.removed
        )
    };
    let text = if diff.is_empty() {
        summary
    } else {
        format!("{summary}\n{diff}")
    };
    ToolOutput::text(text)
        .with_title(display.clone())
        .with_structured_of(&ChangeResult {
            path: display,
            hash: hash.map(|h| h.to_string()),
            created,
            replacements: planned.replacements,
            match_levels: planned.levels.clone(),
            added: stats.added,
            removed: stats.removed,
        })
}

/// For a question about an edit: the diff the change would make; the approval is bound to the
/// file as it was shown.
pub(crate) async fn edit_preview(
    ctx: &ToolContext,
    path: &str,
    edits: Vec<OwnedEdit>,
    expected_hash: Option<String>,
) -> Result<Option<String>, ToolError> {
    let path = path.to_owned();
    let (detail, bound) = ctx
        .blocking(move |ctx| {
            let resolved = ctx.resolve(&path)?;
            let loaded = load(resolved)?;
            check_fresh(&ctx, &loaded, expected_hash.as_deref())?;
            let bound = (loaded.resolved.path.clone(), loaded.hash);
            let planned = plan_edits(loaded, &edits)?;
            let (diff, _) = render_diff(
                planned.before.as_ref().map_or("", Document::normalized),
                planned.after.normalized(),
            );
            Ok((preview_text(&diff), bound))
        })
        .await?;
    ctx.bind_preview(&bound.0, bound.1);
    Ok(Some(detail))
}

/// A diff for a question: at most 60 lines.
pub(crate) fn preview_text(diff: &str) -> String {
    let lines: Vec<&str> = diff.lines().collect();
    if lines.len() <= 60 {
        return format!("The change:\n{diff}");
    }
    format!(
        "The change (first 60 of {} diff lines):\n{}\n...",
        lines.len(),
        lines[..60].join("\n")
    )
}
