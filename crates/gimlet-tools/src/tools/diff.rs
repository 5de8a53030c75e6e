//! `diff`: a checkpoint's changes, or every change since it, as unified diffs.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt::Write as _;

use schemars::JsonSchema;
use serde::Deserialize;

use crate::change::restore::diff_states;
use crate::checkpoint::{Checkpoints, State};
use crate::context::{ToolContext, ToolEnv};
use crate::error::ToolError;
use crate::tool::Tool;
use crate::vocab::{ToolFlags, ToolOutput};

const DESCRIPTION: &str = include_str!("diff.md");

/// Arguments of `diff`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DiffArgs {
    /// The checkpoint's number, as `checkpoints` lists it (`12` for `#12`).
    pub checkpoint: u64,
    /// Show every change since the checkpoint began (its changes and all after, up to the
    /// files as they are now) instead of the checkpoint's own (default false).
    pub since: Option<bool>,
    /// Only these paths.
    pub paths: Option<Vec<String>>,
}

/// The `diff` tool.
#[derive(Debug, Default, Clone, Copy)]
pub struct DiffTool;

impl Tool for DiffTool {
    type Args = DiffArgs;
    const NAME: &'static str = "diff";
    const TITLE: &'static str = "Diff a checkpoint";

    fn description(&self, _env: &ToolEnv) -> Cow<'static, str> {
        DESCRIPTION.into()
    }

    fn enabled(&self, env: &ToolEnv) -> bool {
        env.checkpoints().enabled()
    }

    fn flags(&self, _args: Option<&DiffArgs>) -> ToolFlags {
        ToolFlags::READ_ONLY
    }

    async fn execute(&self, args: DiffArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        ctx.blocking(move |ctx| diff(&ctx, &args)).await
    }
}

fn diff(ctx: &ToolContext, args: &DiffArgs) -> Result<ToolOutput, ToolError> {
    let roots = ctx
        .env()
        .checkpoints()
        .of_roots(ctx.roots().roots().iter().map(|r| r.path()));
    let (root, checkpoint) =
        Checkpoints::find(&roots, args.checkpoint).map_err(ToolError::invalid)?;
    let mut wanted = None;
    if let Some(paths) = &args.paths {
        let mut rels = Vec::new();
        for path in paths {
            let resolved = ctx.resolve(path)?;
            rels.push(root.relative(&resolved.path).ok_or_else(|| {
                ToolError::invalid(format!("`{path}` is not under {}", root.root().display()))
            })?);
        }
        wanted = Some(rels);
    }
    let keep = |rel: &str| wanted.as_ref().is_none_or(|w| w.iter().any(|p| p == rel));
    // Path -> (before, after).
    let mut pairs: BTreeMap<String, (State, State)> = BTreeMap::new();
    if args.since.unwrap_or(false) {
        let (list, _) = root.list().map_err(ToolError::failed)?;
        for later in list.iter().filter(|c| c.id >= checkpoint.id) {
            for change in &later.changes {
                pairs
                    .entry(change.path.clone())
                    .or_insert_with(|| (change.before.clone(), State::Absent));
            }
        }
        for (rel, (_, now)) in &mut pairs {
            *now = root.state_now(rel).map_err(ToolError::failed)?;
        }
    } else {
        for change in &checkpoint.changes {
            pairs.insert(
                change.path.clone(),
                (change.before.clone(), change.after.clone()),
            );
        }
    }
    let mut text = String::new();
    let what = if args.since.unwrap_or(false) {
        "since the start of"
    } else {
        "in"
    };
    let _ = writeln!(
        text,
        "Changes {what} checkpoint #{} ({}: {}):",
        checkpoint.id, checkpoint.tool, checkpoint.label
    );
    let mut shown = 0;
    for (rel, (before, after)) in pairs.iter().filter(|(rel, _)| keep(rel)) {
        if before == after {
            continue;
        }
        shown += 1;
        let old = if matches!(before, State::Absent) {
            "/dev/null".to_owned()
        } else {
            format!("a/{rel}")
        };
        let new = if matches!(after, State::Absent) {
            "/dev/null".to_owned()
        } else {
            format!("b/{rel}")
        };
        let _ = writeln!(text, "--- {old}\n+++ {new}");
        let (diff, _) = diff_states(&root, before, after);
        text.push_str(&diff);
        if !text.ends_with('\n') {
            text.push('\n');
        }
    }
    if shown == 0 {
        text.push_str("no differences\n");
    }
    Ok(ToolOutput::text(text).with_title(format!("diff #{}", checkpoint.id)))
}
