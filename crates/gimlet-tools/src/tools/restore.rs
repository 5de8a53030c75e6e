//! `restore`: put chosen paths (or all) of a checkpoint back as they were before it.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use crate::change::restore::{Target, put_back};
use crate::checkpoint::{Checkpoint, Checkpoints, RootCheckpoints};
use crate::context::{AccessKind, ToolContext, ToolEnv};
use crate::error::ToolError;
use crate::permission::Access;
use crate::tool::Tool;
use crate::vocab::{ToolFlags, ToolOutput};

const DESCRIPTION: &str = include_str!("restore.md");

/// Arguments of `restore`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RestoreArgs {
    /// The checkpoint's number, as `checkpoints` lists it (`12` for `#12`).
    pub checkpoint: u64,
    /// Only these of its paths (default: all it changed).
    pub paths: Option<Vec<String>>,
    /// Put them back even where a file changed since the checkpoint (default false: refuse,
    /// changing nothing).
    pub overwrite: Option<bool>,
}

/// The `restore` tool.
#[derive(Debug, Default, Clone, Copy)]
pub struct RestoreTool;

impl Tool for RestoreTool {
    type Args = RestoreArgs;
    const NAME: &'static str = "restore";
    const TITLE: &'static str = "Restore a checkpoint";

    fn description(&self, _env: &ToolEnv) -> Cow<'static, str> {
        DESCRIPTION.into()
    }

    fn enabled(&self, env: &ToolEnv) -> bool {
        env.checkpoints().enabled()
    }

    fn flags(&self, _args: Option<&RestoreArgs>) -> ToolFlags {
        ToolFlags::MUTATING
    }

    async fn accesses(
        &self,
        args: &RestoreArgs,
        ctx: &ToolContext,
    ) -> Result<Vec<Access>, ToolError> {
        let args = args.clone();
        let paths = ctx
            .blocking(move |ctx| {
                let (root, _, targets) = plan(&ctx, &args)?;
                Ok(absolute(&root, &targets))
            })
            .await?;
        let mut accesses = Vec::with_capacity(paths.len());
        for path in paths {
            accesses.push(
                ctx.path_access(&path.display().to_string(), AccessKind::Write)
                    .await?,
            );
        }
        Ok(accesses)
    }

    async fn execute(&self, args: RestoreArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let plan_args = args.clone();
        let (root, checkpoint, targets) = ctx.blocking(move |ctx| plan(&ctx, &plan_args)).await?;
        let paths = absolute(&root, &targets);
        let _guards = ctx.env().locks().lock_all(&paths).await;
        let overwrite = args.overwrite.unwrap_or(false);
        ctx.blocking(move |ctx| {
            let what = format!("checkpoint #{}", checkpoint.id);
            let done = put_back(&ctx, &root, &targets, overwrite, &what)?;
            let mut text = format!(
                "Put back as before checkpoint #{} ({}: {}):\n",
                checkpoint.id, checkpoint.tool, checkpoint.label
            );
            for one in &done {
                let _ = writeln!(text, "`{}` {}.", one.rel, one.action);
                text.push_str(&one.diff);
            }
            let files: Vec<&str> = done.iter().map(|d| d.rel.as_str()).collect();
            Ok(ToolOutput::text(text)
                .with_title("restore")
                .with_structured(json!({ "checkpoint": checkpoint.id, "restored": files })))
        })
        .await
    }
}

/// The checkpoint and the paths to put back. Blocking.
fn plan(
    ctx: &ToolContext,
    args: &RestoreArgs,
) -> Result<(Arc<RootCheckpoints>, Checkpoint, Vec<Target>), ToolError> {
    let roots = ctx
        .env()
        .checkpoints()
        .of_roots(ctx.roots().roots().iter().map(|r| r.path()));
    let (root, checkpoint) =
        Checkpoints::find(&roots, args.checkpoint).map_err(ToolError::invalid)?;
    let mut targets: Vec<Target> = checkpoint
        .changes
        .iter()
        .map(|c| Target {
            rel: c.path.clone(),
            want: c.before.clone(),
            expect: c.after.clone(),
        })
        .collect();
    if let Some(paths) = &args.paths {
        let mut rels = Vec::new();
        for path in paths {
            let resolved = ctx.resolve(path)?;
            let rel = root.relative(&resolved.path).ok_or_else(|| {
                ToolError::invalid(format!("`{path}` is not under {}", root.root().display()))
            })?;
            if !targets.iter().any(|t| t.rel == rel) {
                return Err(ToolError::invalid(format!(
                    "checkpoint #{} did not change `{path}`; it changed: {}",
                    checkpoint.id,
                    targets
                        .iter()
                        .map(|t| format!("`{}`", t.rel))
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
            rels.push(rel);
        }
        targets.retain(|t| rels.contains(&t.rel));
    }
    if targets.is_empty() {
        return Err(ToolError::invalid(format!(
            "checkpoint #{} changed no file that can be put back",
            checkpoint.id
        )));
    }
    Ok((root, checkpoint, targets))
}

fn absolute(root: &RootCheckpoints, targets: &[Target]) -> Vec<PathBuf> {
    targets.iter().map(|t| root.root().join(&t.rel)).collect()
}
