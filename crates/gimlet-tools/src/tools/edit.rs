//! `edit`: replace an exact string in a file (with graded fallbacks). The flow it shares with
//! `multi_edit`, `write` and `apply_patch` is in [`crate::change::edit`].

use std::borrow::Cow;

use schemars::JsonSchema;
use serde::Deserialize;

use crate::change::edit::{ChangeResult, OwnedEdit, edit_file, edit_preview};
use crate::context::{AccessKind, ToolContext, ToolEnv};
use crate::error::ToolError;
use crate::permission::Access;
use crate::tool::Tool;
use crate::vocab::{JsonObject, ToolFlags, ToolOutput};

const DESCRIPTION: &str = include_str!("edit.md");

/// Arguments of `edit`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditArgs {
    /// The file to change: absolute, or relative to the first root folder.
    pub path: String,
    /// The exact text to replace, copied from the file (without the line-number prefix `read`
    /// shows). Empty to create a file that does not exist.
    pub old_string: String,
    /// The text to put in its place; must differ from `old_string`.
    pub new_string: String,
    /// Replace every occurrence instead of requiring exactly one (default false).
    pub replace_all: Option<bool>,
    /// The hash `read` reported; the edit is refused if the file changed since.
    pub expected_hash: Option<String>,
}

/// The `edit` tool.
#[derive(Debug, Default, Clone, Copy)]
pub struct EditTool;

impl Tool for EditTool {
    type Args = EditArgs;
    const NAME: &'static str = "edit";
    const TITLE: &'static str = "Edit file";

    fn description(&self, _env: &ToolEnv) -> Cow<'static, str> {
        DESCRIPTION.into()
    }

    fn flags(&self, _args: Option<&EditArgs>) -> ToolFlags {
        ToolFlags::MUTATING
    }

    fn output_schema(&self) -> Option<JsonObject> {
        Some(crate::schema::output_schema::<ChangeResult>())
    }

    async fn validate(&self, args: EditArgs, _ctx: &ToolContext) -> Result<EditArgs, ToolError> {
        if args.old_string == args.new_string {
            return Err(ToolError::invalid(
                "`old_string` and `new_string` are the same, so there is nothing to change",
            ));
        }
        Ok(args)
    }

    async fn accesses(&self, args: &EditArgs, ctx: &ToolContext) -> Result<Vec<Access>, ToolError> {
        Ok(vec![ctx.path_access(&args.path, AccessKind::Write).await?])
    }

    async fn ask_detail(
        &self,
        args: &EditArgs,
        ctx: &ToolContext,
    ) -> Result<Option<String>, ToolError> {
        let edits = vec![OwnedEdit::from(args)];
        edit_preview(ctx, &args.path, edits, args.expected_hash.clone()).await
    }

    async fn execute(&self, args: EditArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let edits = vec![OwnedEdit::from(&args)];
        edit_file(ctx, Self::NAME, args.path, edits, args.expected_hash).await
    }
}

impl From<&EditArgs> for OwnedEdit {
    fn from(args: &EditArgs) -> Self {
        Self {
            old_string: args.old_string.clone(),
            new_string: args.new_string.clone(),
            replace_all: args.replace_all.unwrap_or(false),
        }
    }
}

#[cfg(test)]
#[path = "edit_tests.rs"]
mod tests;
