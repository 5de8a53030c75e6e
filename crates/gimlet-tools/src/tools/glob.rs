//! `glob`: find files by name pattern, newest first.

use std::borrow::Cow;
use std::fmt::Write as _;

use globset::{Glob, GlobBuilder, GlobMatcher};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::context::{AccessKind, ToolContext, ToolEnv};
use crate::error::ToolError;
use crate::fs::PathError;
use crate::permission::Access;
use crate::search::walk::{Filters, Stat, collect_files};
use crate::tool::Tool;
use crate::vocab::{InterruptBehavior, JsonObject, ToolFlags, ToolOutput};

const DESCRIPTION: &str = include_str!("glob.md");

/// Paths returned when no `limit` is given.
const DEFAULT_LIMIT: usize = 100;

/// Arguments of `glob`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GlobArgs {
    /// The glob, relative to `path`: `**/*.rs`, `src/**/*.{ts,tsx}`, `*.md`.
    pub pattern: String,
    /// The directory to search (default: the first root folder).
    pub path: Option<String>,
    /// The most paths to return (default 100).
    pub limit: Option<usize>,
}

impl GlobArgs {
    /// The pattern parsed: what `validate` checks (compiling it is `execute`'s work, once).
    fn glob(&self) -> Result<Glob, ToolError> {
        let pattern = self.pattern.trim_start_matches("./");
        if pattern.starts_with('/') {
            return Err(ToolError::invalid(format!(
                "`pattern` `{}` is absolute; give a pattern relative to `path` (and put the directory in `path`)",
                self.pattern
            )));
        }
        GlobBuilder::new(pattern)
            .literal_separator(true)
            .build()
            .map_err(|e| ToolError::invalid(format!("`pattern` is not a valid glob: {e}")))
    }

    fn matcher(&self) -> Result<GlobMatcher, ToolError> {
        Ok(self.glob()?.compile_matcher())
    }
}

/// The `glob` tool.
#[derive(Debug, Default, Clone, Copy)]
pub struct GlobTool;

impl Tool for GlobTool {
    type Args = GlobArgs;
    const NAME: &'static str = "glob";
    const TITLE: &'static str = "Find files by name";

    fn description(&self, _env: &ToolEnv) -> Cow<'static, str> {
        DESCRIPTION.into()
    }

    fn flags(&self, _args: Option<&GlobArgs>) -> ToolFlags {
        ToolFlags {
            interrupt: InterruptBehavior::Cancel,
            ..ToolFlags::READ_ONLY
        }
    }

    fn output_schema(&self) -> Option<JsonObject> {
        Some(crate::schema::output_schema::<GlobResult>())
    }

    async fn validate(&self, args: GlobArgs, _ctx: &ToolContext) -> Result<GlobArgs, ToolError> {
        if args.pattern.trim().is_empty() {
            return Err(ToolError::invalid(
                "`pattern` is empty; for all files use `**/*`",
            ));
        }
        if args.limit == Some(0) {
            return Err(ToolError::invalid("`limit` must be at least 1"));
        }
        args.glob()?;
        Ok(args)
    }

    async fn accesses(&self, args: &GlobArgs, ctx: &ToolContext) -> Result<Vec<Access>, ToolError> {
        Ok(vec![
            ctx.path_access(args.path.as_deref().unwrap_or("."), AccessKind::Read)
                .await?,
        ])
    }

    async fn execute(&self, args: GlobArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        ctx.blocking(move |ctx| glob(&args, &ctx)).await
    }
}

/// Paths kept in the structured result at most.
const MAX_STRUCTURED: usize = 1000;

/// The structured result of `glob`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
struct GlobResult {
    /// The paths shown, most recent first (the first 1000 of them; the text has all).
    files: Vec<String>,
    /// Files matching in all.
    total: usize,
    /// More files match than were shown (`limit` cut the list).
    truncated: bool,
}

fn glob(args: &GlobArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
    let resolved = ctx.resolve_allowed(args.path.as_deref().unwrap_or("."))?;
    // A path that is missing or not a directory is said as such, not as "no files match".
    resolved.open_existing_dir().map_err(|err| match err {
        PathError::NotADirectory { path } => ToolError::invalid(format!(
            "`{path}` is a file, not a directory; give `path` a directory to search in"
        )),
        other => other.into(),
    })?;
    let matcher = args.matcher()?;
    let filters = Filters::new(&resolved.path, None, None)?;
    let keep = |rel: &std::path::Path| matcher.is_match(rel);
    // Only files that open beneath the root without a symlink are kept: a directory swapped
    // for a link during the walk cannot make a name outside the roots appear.
    let stat = Stat::Confined(&resolved);
    let found = collect_files(&resolved.path, &filters, &keep, stat, ctx.cancellation())?;
    let limit = args.limit.unwrap_or(DEFAULT_LIMIT);
    let base = resolved.display();
    // The paths go straight into the text; the structured result keeps the first
    // `MAX_STRUCTURED` (as `grep` samples its matches), so a big listing is not held thrice.
    let mut text = String::new();
    let mut files: Vec<String> = Vec::new();
    let mut shown = 0;
    for file in found.iter().take(limit) {
        let line_start = text.len();
        if base != "." {
            text.push_str(&base);
            text.push('/');
        }
        let _ = write!(text, "{}", file.rel.display());
        if files.len() < MAX_STRUCTURED {
            files.push(text[line_start..].to_owned());
        }
        text.push('\n');
        shown += 1;
    }
    let truncated = found.len() > shown;
    if shown == 0 {
        let _ = write!(text, "No files match `{}` in `{base}`.", args.pattern);
    } else if truncated {
        let _ = write!(
            text,
            "[{} of {} files matching `{}`, most recently modified first; raise `limit` or narrow the pattern to see more]",
            shown,
            found.len(),
            args.pattern
        );
    } else {
        let noun = if shown == 1 { "file" } else { "files" };
        let _ = write!(
            text,
            "[{} {noun} matching `{}`, most recently modified first]",
            shown, args.pattern
        );
    }
    Ok(ToolOutput::text(text)
        .with_title(format!("glob {}", args.pattern))
        .with_structured_of(&GlobResult {
            files,
            total: found.len(),
            truncated,
        }))
}

#[cfg(test)]
#[path = "glob_tests.rs"]
mod tests;
