//! `multi_edit`: several replacements in one file, in order, all or nothing.

use std::borrow::Cow;

use schemars::JsonSchema;
use serde::Deserialize;

use crate::change::edit::{ChangeResult, OwnedEdit, edit_file, edit_preview};
use crate::context::{AccessKind, ToolContext, ToolEnv};
use crate::error::ToolError;
use crate::permission::Access;
use crate::tool::Tool;
use crate::vocab::{JsonObject, ToolFlags, ToolOutput};

const DESCRIPTION: &str = include_str!("multi_edit.md");

/// Arguments of `multi_edit`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MultiEditArgs {
    /// The file to change: absolute, or relative to the first root folder.
    pub path: String,
    /// The edits, applied in order; all or none.
    pub edits: Vec<OneEdit>,
    /// The hash `read` reported; the change is refused if the file changed since.
    pub expected_hash: Option<String>,
}

/// One edit of a `multi_edit`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OneEdit {
    /// The exact text to replace (empty in the first edit to create the file).
    pub old_string: String,
    /// The text to put in its place; must differ from `old_string`.
    pub new_string: String,
    /// Replace every occurrence (default false).
    pub replace_all: Option<bool>,
}

impl MultiEditArgs {
    fn owned(&self) -> Vec<OwnedEdit> {
        self.edits
            .iter()
            .map(|e| OwnedEdit {
                old_string: e.old_string.clone(),
                new_string: e.new_string.clone(),
                replace_all: e.replace_all.unwrap_or(false),
            })
            .collect()
    }
}

/// The `multi_edit` tool.
#[derive(Debug, Default, Clone, Copy)]
pub struct MultiEditTool;

impl Tool for MultiEditTool {
    type Args = MultiEditArgs;
    const NAME: &'static str = "multi_edit";
    const TITLE: &'static str = "Edit file (several changes)";

    fn description(&self, _env: &ToolEnv) -> Cow<'static, str> {
        DESCRIPTION.into()
    }

    fn flags(&self, _args: Option<&MultiEditArgs>) -> ToolFlags {
        ToolFlags::MUTATING
    }

    fn output_schema(&self) -> Option<JsonObject> {
        Some(crate::schema::output_schema::<ChangeResult>())
    }

    async fn validate(
        &self,
        args: MultiEditArgs,
        _ctx: &ToolContext,
    ) -> Result<MultiEditArgs, ToolError> {
        if args.edits.is_empty() {
            return Err(ToolError::invalid(
                "`edits` is empty; give at least one {old_string, new_string}",
            ));
        }
        if let Some(i) = args.edits.iter().position(|e| e.old_string == e.new_string) {
            return Err(ToolError::invalid(format!(
                "edit {} of {}: `old_string` and `new_string` are the same, so there is nothing to change",
                i + 1,
                args.edits.len()
            )));
        }
        if let Some(i) = args
            .edits
            .iter()
            .skip(1)
            .position(|e| e.old_string.is_empty())
        {
            return Err(ToolError::invalid(format!(
                "edit {} of {}: `old_string` is empty; only the first edit may create the file",
                i + 2,
                args.edits.len()
            )));
        }
        Ok(args)
    }

    async fn accesses(
        &self,
        args: &MultiEditArgs,
        ctx: &ToolContext,
    ) -> Result<Vec<Access>, ToolError> {
        Ok(vec![ctx.path_access(&args.path, AccessKind::Write).await?])
    }

    async fn ask_detail(
        &self,
        args: &MultiEditArgs,
        ctx: &ToolContext,
    ) -> Result<Option<String>, ToolError> {
        edit_preview(ctx, &args.path, args.owned(), args.expected_hash.clone()).await
    }

    async fn execute(
        &self,
        args: MultiEditArgs,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let edits = args.owned();
        edit_file(ctx, Self::NAME, args.path, edits, args.expected_hash).await
    }
}
