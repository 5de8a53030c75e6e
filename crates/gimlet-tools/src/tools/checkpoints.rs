//! `checkpoints`: the recent checkpoints of the roots, what each call (or the world between
//! calls) changed.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::time::SystemTime;

use schemars::JsonSchema;
use serde::Deserialize;

use crate::change::restore::describe;
use crate::checkpoint::{Checkpoint, Kind};
use crate::context::{ToolContext, ToolEnv};
use crate::error::ToolError;
use crate::tool::Tool;
use crate::vocab::{ToolFlags, ToolOutput};

const DESCRIPTION: &str = include_str!("checkpoints.md");

/// Checkpoints listed by default.
const DEFAULT_LIMIT: usize = 20;
/// Paths shown per checkpoint.
const PATHS_SHOWN: usize = 20;

/// Arguments of `checkpoints`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckpointsArgs {
    /// At most this many, newest first (default 20).
    pub limit: Option<usize>,
    /// Only checkpoints that changed this file.
    pub path: Option<String>,
}

/// The `checkpoints` tool.
#[derive(Debug, Default, Clone, Copy)]
pub struct CheckpointsTool;

impl Tool for CheckpointsTool {
    type Args = CheckpointsArgs;
    const NAME: &'static str = "checkpoints";
    const TITLE: &'static str = "List checkpoints";

    fn description(&self, _env: &ToolEnv) -> Cow<'static, str> {
        DESCRIPTION.into()
    }

    fn enabled(&self, env: &ToolEnv) -> bool {
        env.checkpoints().enabled()
    }

    fn flags(&self, _args: Option<&CheckpointsArgs>) -> ToolFlags {
        ToolFlags::READ_ONLY
    }

    async fn execute(
        &self,
        args: CheckpointsArgs,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        ctx.blocking(move |ctx| list(&ctx, &args)).await
    }
}

fn list(ctx: &ToolContext, args: &CheckpointsArgs) -> Result<ToolOutput, ToolError> {
    let roots = ctx
        .env()
        .checkpoints()
        .of_roots(ctx.roots().roots().iter().map(|r| r.path()));
    if roots.is_empty() {
        return Err(ToolError::failed(
            "no root here has checkpoints (they are off in `[checkpoints]`, or the root is `/`, \
             the home folder or holds gimlet's data folder)",
        ));
    }
    let wanted = match &args.path {
        Some(path) => Some(ctx.resolve(path)?.path),
        None => None,
    };
    let limit = args.limit.unwrap_or(DEFAULT_LIMIT).max(1);
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    let mut text = String::new();
    for root in &roots {
        let (list, damage) = root.list().map_err(ToolError::failed)?;
        let rel = wanted.as_deref().and_then(|p| root.relative(p));
        if wanted.is_some() && rel.is_none() {
            continue;
        }
        let shown: Vec<&Checkpoint> = list
            .iter()
            .rev()
            .filter(|c| {
                rel.as_ref()
                    .is_none_or(|r| c.changes.iter().any(|x| &x.path == r))
            })
            .take(limit)
            .collect();
        let _ = writeln!(
            text,
            "Checkpoints of {} ({} of {}, newest first):",
            root.root().display(),
            shown.len(),
            list.len()
        );
        for note in &damage {
            let _ = writeln!(text, "  [damage: {note}]");
        }
        if shown.is_empty() {
            text.push_str("  none yet\n");
        }
        for checkpoint in shown {
            heading(&mut text, checkpoint, now);
            let (lines, total) = describe(root, &checkpoint.changes, PATHS_SHOWN);
            for line in &lines {
                let undone = line
                    .split_whitespace()
                    .nth(1)
                    .is_some_and(|p| checkpoint.undone.iter().any(|u| u == p));
                let _ = writeln!(text, "    {line}{}", if undone { " (undone)" } else { "" });
            }
            if total > lines.len() {
                let _ = writeln!(text, "    and {} more", total - lines.len());
            }
            for name in &checkpoint.ignored {
                let _ = writeln!(text, "    ? {name}/ (ignored: changed, not captured)");
            }
        }
    }
    Ok(ToolOutput::text(text).with_title("checkpoints"))
}

fn heading(text: &mut String, checkpoint: &Checkpoint, now_ms: u64) {
    let age = ago(now_ms.saturating_sub(checkpoint.created_ms));
    let who = match checkpoint.kind {
        Kind::Outside => String::from("outside (not the agent's: an editor, the user)"),
        Kind::Job => format!("{} (background job)", checkpoint.tool),
        Kind::Call | Kind::Restore | Kind::Undo => checkpoint.tool.clone(),
    };
    let undone = if checkpoint.fully_undone() {
        ", undone"
    } else {
        ""
    };
    let _ = writeln!(
        text,
        "  #{} {who}: {} ({age}{undone})",
        checkpoint.id, checkpoint.label
    );
}

fn ago(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..60 => format!("{s}s ago"),
        60..3600 => format!("{}m ago", s / 60),
        3600..86_400 => format!("{}h ago", s / 3600),
        _ => format!("{}d ago", s / 86_400),
    }
}
