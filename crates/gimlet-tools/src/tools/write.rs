//! `write`: create or replace a whole file, atomically.

use std::borrow::Cow;

use schemars::JsonSchema;
use serde::Deserialize;

use crate::change::edit::{ChangeResult, preview_text};
use crate::change::{Loaded, check_fresh, commit_meanwhile, load};
use crate::context::{AccessKind, ToolContext, ToolEnv};
use crate::error::ToolError;
use crate::fs::{Journal, create_parents};
use crate::permission::Access;
use crate::text::{Document, in_style_of, render_diff};
use crate::tool::Tool;
use crate::vocab::{JsonObject, ToolFlags, ToolOutput};

const DESCRIPTION: &str = include_str!("write.md");

/// Arguments of `write`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteArgs {
    /// The file to write: absolute, or relative to the first root folder.
    pub path: String,
    /// The whole new content.
    pub content: String,
    /// The hash `read` reported; replacing is refused if the file changed since.
    pub expected_hash: Option<String>,
}

/// The `write` tool.
#[derive(Debug, Default, Clone, Copy)]
pub struct WriteTool;

impl Tool for WriteTool {
    type Args = WriteArgs;
    const NAME: &'static str = "write";
    const TITLE: &'static str = "Write file";

    fn description(&self, _env: &ToolEnv) -> Cow<'static, str> {
        DESCRIPTION.into()
    }

    fn flags(&self, _args: Option<&WriteArgs>) -> ToolFlags {
        ToolFlags {
            idempotent: true,
            ..ToolFlags::MUTATING
        }
    }

    fn output_schema(&self) -> Option<JsonObject> {
        Some(crate::schema::output_schema::<ChangeResult>())
    }

    async fn accesses(
        &self,
        args: &WriteArgs,
        ctx: &ToolContext,
    ) -> Result<Vec<Access>, ToolError> {
        Ok(vec![ctx.path_access(&args.path, AccessKind::Write).await?])
    }

    async fn ask_detail(
        &self,
        args: &WriteArgs,
        ctx: &ToolContext,
    ) -> Result<Option<String>, ToolError> {
        let args = args.clone();
        let (detail, path, hash) = ctx
            .blocking(move |ctx| {
                let loaded = load(ctx.resolve(&args.path)?)?;
                check_fresh(&ctx, &loaded, args.expected_hash.as_deref())?;
                let (before, after) = contents(&loaded, &args.content);
                let (diff, _) = render_diff(&before, after.normalized());
                Ok((
                    preview_text(&diff),
                    loaded.resolved.path.clone(),
                    loaded.hash,
                ))
            })
            .await?;
        ctx.bind_preview(&path, hash);
        Ok(Some(detail))
    }

    async fn execute(&self, args: WriteArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let resolved = {
            let path = args.path.clone();
            ctx.blocking(move |ctx| Ok(ctx.resolve_allowed(&path)?))
                .await?
        };
        let _guard = ctx.env().locks().lock(&resolved.path).await;
        ctx.blocking(move |ctx| {
            let loaded = load(resolved)?;
            check_fresh(&ctx, &loaded, args.expected_hash.as_deref())?;
            let created = !loaded.exists();
            let (before, after_doc) = contents(&loaded, &args.content);
            let after = after_doc.bytes();
            let display = loaded.resolved.display();
            if !created && loaded.bytes.as_deref() == Some(&after[..]) {
                let hash = loaded.hash.map(|h| h.to_string()).unwrap_or_default();
                return Ok(ToolOutput::text(format!(
                    "`{display}` already has this content; nothing was written. Hash {hash}."
                )));
            }
            if created {
                create_parents(&loaded.resolved)?;
            }
            let change = ctx.session().state::<Journal>().begin();
            // The diff is rendered while the new content goes to the disk.
            let mut diff = None;
            let hash = commit_meanwhile(
                &ctx,
                WriteTool::NAME,
                change,
                &loaded,
                Some(&after),
                &mut || diff = Some(render_diff(&before, after_doc.normalized())),
            )?;
            let hash = hash.map(|h| h.to_string()).unwrap_or_default();
            let (diff, stats) =
                diff.unwrap_or_else(|| render_diff(&before, after_doc.normalized()));
            let lines = after_doc.normalized().lines().count();
            let bytes = after.len();
            let size = format!(
                "{}, {}",
                crate::text::counted(lines, "line", "lines"),
                crate::text::counted(bytes, "byte", "bytes")
            );
            let text = if created {
                format!("Created `{display}` ({size}). Hash {hash}.")
            } else {
                format!(
                    "Replaced `{display}` ({size}; +{} -{} lines). New hash {hash}.\n{diff}",
                    stats.added, stats.removed
                )
            };
            Ok(ToolOutput::text(text)
                .with_title(display.clone())
                .with_structured_of(&ChangeResult {
                    path: display,
                    hash: Some(hash),
                    created,
                    replacements: 0,
                    match_levels: Vec::new(),
                    added: stats.added,
                    removed: stats.removed,
                }))
        })
        .await
    }
}

/// The old text (normalized, for the diff) and the new content: for an existing text file,
/// in that file's line-ending, BOM and encoding style (a UTF-16 file stays UTF-16).
fn contents(loaded: &Loaded, content: &str) -> (String, Document) {
    match &loaded.bytes {
        None => (String::new(), Document::from_text(content.to_owned())),
        Some(bytes) => match Document::decode(bytes.clone()) {
            Ok(old) => (old.normalized().to_owned(), in_style_of(&old, content)),
            // Replacing a file that does not decode with text is allowed; there is no style to
            // keep, but one that announced UTF-16 is replaced in UTF-16.
            Err(err) => (
                String::from("(binary content, or text that does not decode)\n"),
                Document::from_text_in(content.to_owned(), err.encoding()),
            ),
        },
    }
}
