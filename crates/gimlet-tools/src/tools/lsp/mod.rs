//! `lsp`: ask the file's language server: definition, references, hover, symbols,
//! diagnostics, and the edits a rename would make.

mod refactor;
mod render;
mod workspace_edit;

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::context::{AccessKind, ToolContext, ToolEnv};
use crate::error::ToolError;
use crate::lsp::diagnostics::Basis;
use crate::lsp::position::{line_at, uri_of, utf16_of_char};
use crate::lsp::{Client, Waited};
use crate::permission::Access;
use crate::tool::Tool;
use crate::vocab::{InterruptBehavior, ToolFlags, ToolOutput};
use render::{Place, Sources};

const DESCRIPTION: &str = include_str!("lsp.md");

/// Results per page when no `head_limit` is given.
const DEFAULT_LIMIT: usize = 100;

/// What to ask the language server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LspOperation {
    /// Where the symbol at the position is defined
    Definition,
    /// Every use of the symbol at the position, its definition included
    References,
    /// The type and documentation of the symbol at the position
    Hover,
    /// The file's outline: classes, functions, methods, with their places
    DocumentSymbols,
    /// Symbols across the project whose name matches `query`
    WorkspaceSymbols,
    /// The file's errors and warnings now (without `path`: every file the servers have open)
    Diagnostics,
    /// The edits renaming the symbol at the position to `new_name` would make (none is applied)
    RenamePreview,
    /// Renames the symbol at the position to `new_name`, applying the edits as one change
    Rename,
    /// The actions offered at the position or range, numbered; `action` applies one
    CodeActions,
}

/// Arguments of `lsp`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LspArgs {
    /// What to ask.
    pub operation: LspOperation,
    /// The file (needed for every operation but `workspace_symbols` and `diagnostics`).
    pub path: Option<String>,
    /// The line (1-based, as `read` numbers lines).
    pub line: Option<usize>,
    /// The column (1-based, in characters). Default: where `symbol` starts on the line, else
    /// the line's first word.
    pub column: Option<usize>,
    /// A name in the file: the position is where it is defined (or, with `line`, where it
    /// occurs on that line). Instead of `line` and `column`.
    pub symbol: Option<String>,
    /// `workspace_symbols`: the name, or part of it, to look for.
    pub query: Option<String>,
    /// `rename`, `rename_preview`: the new name.
    pub new_name: Option<String>,
    /// `code_actions`: the line where the range ends (1-based; default: the position, an empty
    /// range).
    pub end_line: Option<usize>,
    /// `code_actions`: the column where the range ends (1-based, in characters; default: the
    /// end of `end_line`).
    pub end_column: Option<usize>,
    /// `code_actions`: the number of the action to apply, from the list without it.
    pub action: Option<usize>,
    /// `code_actions`: only actions of this kind (`quickfix`, `refactor`, `source`,
    /// `source.organizeImports` ...); some servers offer source actions only when asked so.
    pub kind: Option<String>,
    /// Results per page (default 100).
    pub head_limit: Option<usize>,
    /// Results to skip, to get the next page.
    pub offset: Option<usize>,
}

impl LspArgs {
    fn needs_position(&self) -> bool {
        matches!(
            self.operation,
            LspOperation::Definition
                | LspOperation::References
                | LspOperation::Hover
                | LspOperation::RenamePreview
                | LspOperation::Rename
                | LspOperation::CodeActions
        )
    }

    /// Whether the call changes files: `rename`, and `code_actions` with `action`.
    fn changes_files(&self) -> bool {
        self.operation == LspOperation::Rename
            || (self.operation == LspOperation::CodeActions && self.action.is_some())
    }
}

/// The `lsp` tool.
#[derive(Debug, Default, Clone, Copy)]
pub struct LspTool;

impl Tool for LspTool {
    type Args = LspArgs;
    const NAME: &'static str = "lsp";
    const TITLE: &'static str = "Ask the language server";

    fn description(&self, _env: &ToolEnv) -> Cow<'static, str> {
        DESCRIPTION.into()
    }

    fn enabled(&self, env: &ToolEnv) -> bool {
        env.lsp().enabled()
    }

    fn flags(&self, args: Option<&LspArgs>) -> ToolFlags {
        // Without arguments (`tools/list`'s annotations) what holds for every input: `rename`
        // and an applied code action change files (one may delete a file).
        match args {
            Some(args) if !args.changes_files() => ToolFlags {
                interrupt: InterruptBehavior::Cancel,
                ..ToolFlags::READ_ONLY
            },
            _ => ToolFlags::MUTATING,
        }
    }

    fn offered_read_only(&self) -> bool {
        // Read-only mode offers the questions; `rename` and applying an action are writes,
        // which that mode refuses.
        true
    }

    async fn validate(&self, args: LspArgs, _ctx: &ToolContext) -> Result<LspArgs, ToolError> {
        let op = serde_json::to_value(args.operation).unwrap_or_default();
        let op = op.as_str().unwrap_or("this operation");
        let needs_path = !matches!(
            args.operation,
            LspOperation::WorkspaceSymbols | LspOperation::Diagnostics
        );
        if needs_path && args.path.is_none() {
            return Err(ToolError::invalid(format!(
                "`{op}` needs `path`: the file to ask about"
            )));
        }
        if args.needs_position() && args.line.is_none() && args.symbol.is_none() {
            return Err(ToolError::invalid(format!(
                "`{op}` needs a position: `line` (and `column`), or `symbol` (a name in the file)"
            )));
        }
        if args.line == Some(0) || args.column == Some(0) {
            return Err(ToolError::invalid(
                "`line` and `column` start at 1, as `read` numbers lines",
            ));
        }
        if args.operation == LspOperation::WorkspaceSymbols
            && args.query.as_deref().is_none_or(str::is_empty)
        {
            return Err(ToolError::invalid(
                "`workspace_symbols` needs `query`: the name (or part of it) to look for",
            ));
        }
        if matches!(
            args.operation,
            LspOperation::RenamePreview | LspOperation::Rename
        ) && args.new_name.as_deref().is_none_or(str::is_empty)
        {
            return Err(ToolError::invalid(format!("`{op}` needs `new_name`")));
        }
        if args.operation != LspOperation::CodeActions
            && (args.end_line.is_some()
                || args.end_column.is_some()
                || args.action.is_some()
                || args.kind.is_some())
        {
            return Err(ToolError::invalid(format!(
                "`end_line`, `end_column`, `action` and `kind` belong to `code_actions`, not `{op}`"
            )));
        }
        if args.end_line == Some(0) || args.end_column == Some(0) || args.action == Some(0) {
            return Err(ToolError::invalid(
                "`end_line`, `end_column` and `action` start at 1",
            ));
        }
        if args.end_column.is_some() && args.end_line.is_none() {
            return Err(ToolError::invalid(
                "`end_column` needs `end_line`: the range ends at that line and column",
            ));
        }
        Ok(args)
    }

    async fn accesses(&self, args: &LspArgs, ctx: &ToolContext) -> Result<Vec<Access>, ToolError> {
        // A changing operation is judged as a write of its file here; the other files the
        // server's edit touches are judged when it is known (`refactor.rs`).
        let kind = if args.changes_files() {
            AccessKind::Write
        } else {
            AccessKind::Read
        };
        match &args.path {
            Some(path) => Ok(vec![ctx.path_access(path, kind).await?]),
            None => Ok(Vec::new()),
        }
    }

    async fn execute(&self, args: LspArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let Some(path) = args.path.clone() else {
            return match args.operation {
                LspOperation::Diagnostics => all_diagnostics(ctx).await,
                _ => {
                    let output = workspace_symbols(&args, ctx, None).await?;
                    let clients = ctx.env().lsp().running_within(ctx.roots());
                    let mut partial = false;
                    let mut output = clients.iter().fold(output, |output, client| {
                        let status = client.status(None);
                        partial |= status.partial();
                        with_status(output, &client.name, &status)
                    });
                    output = output.with_metadata(
                        "completeness",
                        json!(if partial { "partial" } else { "complete" }),
                    );
                    Ok(output)
                }
            };
        };
        let (file, text) = ctx
            .blocking(move |ctx| {
                let resolved = ctx.resolve_allowed(&path)?;
                let text = crate::lsp::read_text(&resolved.path).ok_or_else(|| {
                    ToolError::invalid(format!(
                        "`{}` is not a text file up to 8 MiB; the language server cannot read it",
                        resolved.display()
                    ))
                })?;
                Ok((resolved.path, text))
            })
            .await?;
        let lsp = Arc::clone(ctx.env().lsp());
        let mut restarted = false;
        loop {
            let deadline = tokio::time::Instant::now() + lsp.request_timeout();
            let (client, note) = lsp
                .client_for(&file, ctx.roots(), deadline)
                .await
                .map_err(|unavailable| ToolError::failed(unavailable.message()))?;
            let answer = answer(&args, ctx, &client, &file, text.clone()).await;
            if answer.is_err()
                && !restarted
                && !client.alive()
                && !client.stopped_by_us()
                && !ctx.cancellation().is_cancelled()
            {
                // The server died under the call (not stopped by us): the next `client_for`
                // restarts it (once a session, and says so) and the question is asked again.
                restarted = true;
                continue;
            }
            let mut output = answer?;
            if let Some(note) = note {
                output
                    .content
                    .push(crate::vocab::Content::Text(format!("note: {note}.")));
            }
            let status = client.status(None);
            if args.operation != LspOperation::Diagnostics {
                output = with_status(output, &client.name, &status);
            }
            return Ok(output
                .with_metadata("completeness", json!(status.word()))
                .with_metadata("server", json!(client.name))
                .with_metadata("server_pid", json!(client.pid()))
                .with_metadata("sandboxed", json!(client.sandboxed)));
        }
    }
}

/// One question to one running server about `file` (whose text is `text`).
async fn answer(
    args: &LspArgs,
    ctx: &ToolContext,
    client: &Arc<Client>,
    file: &Path,
    text: String,
) -> Result<ToolOutput, ToolError> {
    let lsp = ctx.env().lsp();
    let synced = client.sync(file, text.clone()).await;
    if args.operation != LspOperation::Diagnostics && client.published(file).is_none() {
        // A server that has not reported on the file yet may still be loading the
        // project (pyright finds the workspace's files after its configuration): answers
        // across files wait for its first report on this one, at most `wait_ms`.
        let until = tokio::time::Instant::now() + lsp.wait();
        let _ = client
            .report(file, &synced, until, ctx.cancellation())
            .await;
    }
    match args.operation {
        LspOperation::WorkspaceSymbols => {
            workspace_symbols(args, ctx, Some(Arc::clone(client))).await
        }
        LspOperation::Diagnostics => {
            let wait =
                tokio::time::Instant::now() + lsp.wait().max(std::time::Duration::from_secs(1));
            let report = match client.report(file, &synced, wait, ctx.cancellation()).await {
                Waited::Reported(report) => Some(report),
                // What it said last: marked when it is not for this text.
                Waited::TimedOut => client.published(file).map(|published| crate::lsp::Report {
                    basis: crate::lsp::diagnostics::basis_of(published.version, synced.version)
                        .unwrap_or(Basis::Older),
                    published,
                    settled: false,
                }),
                Waited::Exited(reason) => return Err(ToolError::failed(client.gone(reason))),
            };
            Ok(file_diagnostics(ctx, client, file, &text, report.as_ref()))
        }
        LspOperation::DocumentSymbols => {
            let result = request(
                client,
                ctx,
                "textDocument/documentSymbol",
                json!({
                    "textDocument": {"uri": uri_of(file)},
                }),
            )
            .await?;
            let places = render::document_symbols(&result, file);
            page(ctx, args, places, Some((file, text)), ("symbol", "symbols")).await
        }
        LspOperation::CodeActions => {
            let position = position(args, client, ctx, file, &text).await?;
            refactor::code_actions(args, ctx, client, file, &text, position).await
        }
        LspOperation::Rename => {
            let position = position(args, client, ctx, file, &text).await?;
            let at = json!({"textDocument": {"uri": uri_of(file)}, "position": position});
            refactor::rename(args, ctx, client, file, at).await
        }
        LspOperation::Definition
        | LspOperation::References
        | LspOperation::Hover
        | LspOperation::RenamePreview => {
            let position = position(args, client, ctx, file, &text).await?;
            let at = json!({"textDocument": {"uri": uri_of(file)}, "position": position});
            at_position(args, ctx, client, at, file, text).await
        }
    }
}

/// Sends a request with the configured timeout and the call's cancellation.
async fn request(
    client: &Client,
    ctx: &ToolContext,
    method: &str,
    params: Value,
) -> Result<Value, ToolError> {
    let timeout = ctx.env().lsp().request_timeout();
    client
        .request(method, params, timeout, ctx.cancellation())
        .await
        .map_err(|err| match err {
            crate::lsp::RequestError::Cancelled => ToolError::Cancelled,
            crate::lsp::RequestError::Exited(reason) => ToolError::failed(client.gone(reason)),
            other => ToolError::failed(other.to_string()),
        })
}

async fn at_position(
    args: &LspArgs,
    ctx: &ToolContext,
    client: &Client,
    at: Value,
    file: &Path,
    text: String,
) -> Result<ToolOutput, ToolError> {
    match args.operation {
        LspOperation::Definition => {
            let result = request(client, ctx, "textDocument/definition", at).await?;
            page(
                ctx,
                args,
                render::places(&result),
                Some((file, text)),
                ("definition", "definitions"),
            )
            .await
        }
        LspOperation::References => {
            let mut params = at;
            params["context"] = json!({"includeDeclaration": true});
            let result = request(client, ctx, "textDocument/references", params).await?;
            let mut places = render::places(&result);
            places.sort_by(|a, b| {
                (&a.path, a.start.line, a.start.character).cmp(&(
                    &b.path,
                    b.start.line,
                    b.start.character,
                ))
            });
            places.dedup();
            page(
                ctx,
                args,
                places,
                Some((file, text)),
                ("reference", "references"),
            )
            .await
        }
        LspOperation::Hover => {
            let result = request(client, ctx, "textDocument/hover", at).await?;
            Ok(ToolOutput::text(
                render::hover_text(&result).unwrap_or_else(|| {
                    String::from(
                        "The server has nothing to say about this position (no symbol there?).",
                    )
                }),
            ))
        }
        LspOperation::RenamePreview => {
            let mut params = at;
            params["newName"] = json!(args.new_name);
            let result = request(client, ctx, "textDocument/rename", params).await?;
            let (edits, count) = ctx
                .blocking({
                    let file = file.to_owned();
                    move |ctx| {
                        let mut sources = Sources::new(&ctx);
                        sources.seed(&file, text);
                        Ok(render::rename_edits(&result, &mut sources))
                    }
                })
                .await?;
            let text = if count == 0 {
                String::from("The server proposes no edits for this rename.\n")
            } else {
                format!(
                    "Renaming to `{}` would make {}. Nothing was changed: apply them with \
                     `edit`, `multi_edit` or `apply_patch`.\n{edits}",
                    args.new_name.as_deref().unwrap_or_default(),
                    crate::text::counted(count, "edit", "edits")
                )
            };
            Ok(ToolOutput::text(text))
        }
        LspOperation::DocumentSymbols
        | LspOperation::WorkspaceSymbols
        | LspOperation::Diagnostics
        | LspOperation::Rename
        | LspOperation::CodeActions => Err(ToolError::failed("not a position operation")),
    }
}

/// A page of places, with their source lines (read off the runtime).
async fn page(
    ctx: &ToolContext,
    args: &LspArgs,
    places: Vec<Place>,
    seed: Option<(&Path, String)>,
    noun: (&'static str, &'static str),
) -> Result<ToolOutput, ToolError> {
    let offset = args.offset.unwrap_or(0);
    let limit = match args.head_limit {
        Some(0) => usize::MAX,
        Some(n) => n,
        None => DEFAULT_LIMIT,
    };
    let seed = seed.map(|(p, t)| (p.to_owned(), t));
    let total = places.len();
    let text = ctx
        .blocking(move |ctx| {
            let mut sources = Sources::new(&ctx);
            if let Some((path, text)) = seed {
                sources.seed(&path, text);
            }
            Ok(render::render_places(
                &places,
                &mut sources,
                offset,
                limit,
                noun,
            ))
        })
        .await?;
    Ok(ToolOutput::text(text).with_metadata("total", json!(total)))
}

/// The position of the call: `line`/`column`, or `symbol`'s place.
async fn position(
    args: &LspArgs,
    client: &Client,
    ctx: &ToolContext,
    file: &Path,
    text: &str,
) -> Result<lsp_types::Position, ToolError> {
    let display = ctx.roots().display(file);
    let (line, col) = match (&args.symbol, args.line) {
        (Some(symbol), Some(line)) => {
            let source = line_at(text, line - 1).ok_or_else(|| past_end(&display, line, text))?;
            let col = find_word(source, symbol).ok_or_else(|| {
                ToolError::invalid(format!(
                    "`{symbol}` does not occur on line {line} of `{display}`: {}",
                    source.trim()
                ))
            })?;
            (line - 1, args.column.map_or(col, |c| c - 1))
        }
        (Some(symbol), None) => {
            let result = request(
                client,
                ctx,
                "textDocument/documentSymbol",
                json!({
                    "textDocument": {"uri": uri_of(file)},
                }),
            )
            .await
            .unwrap_or(Value::Null);
            let declared = render::document_symbols(&result, file)
                .into_iter()
                .find(|p| p.name.as_deref() == Some(symbol.as_str()));
            match declared {
                Some(place) => {
                    let source = line_at(text, place.start.line as usize).unwrap_or_default();
                    let col = crate::lsp::position::char_of_utf16(source, place.start.character);
                    (place.start.line as usize, col)
                }
                None => text
                    .split('\n')
                    .enumerate()
                    .find_map(|(i, l)| find_word(l, symbol).map(|c| (i, c)))
                    .ok_or_else(|| {
                        ToolError::invalid(format!(
                            "no symbol `{symbol}` in `{display}`; give `line` and `column`, or \
                             look for it with `workspace_symbols`"
                        ))
                    })?,
            }
        }
        (None, Some(line)) => {
            let source = line_at(text, line - 1).ok_or_else(|| past_end(&display, line, text))?;
            let col = match args.column {
                Some(c) => c - 1,
                None => source
                    .char_indices()
                    .position(|(_, c)| c.is_alphanumeric() || c == '_')
                    .unwrap_or(0),
            };
            (line - 1, col)
        }
        (None, None) => return Err(ToolError::invalid("give `line` or `symbol`")),
    };
    let source = line_at(text, line).unwrap_or_default();
    Ok(lsp_types::Position::new(
        u32::try_from(line).unwrap_or(u32::MAX),
        utf16_of_char(source, col),
    ))
}

fn past_end(display: &str, line: usize, text: &str) -> ToolError {
    ToolError::invalid(format!(
        "`{display}` has {} lines; line {line} is past its end",
        text.split('\n').count()
    ))
}

/// The character column where `word` occurs on `line` as a whole word.
fn find_word(line: &str, word: &str) -> Option<usize> {
    let is_word = |c: char| c.is_alphanumeric() || c == '_' || c == '$';
    let mut from = 0;
    while let Some(found) = line[from..].find(word) {
        let start = from + found;
        let end = start + word.len();
        let before_ok = line[..start]
            .chars()
            .next_back()
            .is_none_or(|c| !is_word(c));
        let after_ok = line[end..].chars().next().is_none_or(|c| !is_word(c));
        if before_ok && after_ok {
            return Some(line[..start].chars().count());
        }
        from = start + word.len().max(1);
        if from > line.len() {
            break;
        }
    }
    None
}

/// A file's diagnostics, every severity but hints, after the server's name and status.
fn file_diagnostics(
    ctx: &ToolContext,
    client: &Client,
    file: &Path,
    text: &str,
    report: Option<&crate::lsp::Report>,
) -> ToolOutput {
    let display = ctx.roots().display(file);
    let Some(report) = report else {
        let status = client.status(None);
        return ToolOutput::text(format!(
            "{} {}: no report on `{display}` yet; ask again shortly.",
            client.name,
            status.marker()
        ))
        .with_metadata("completeness", json!(status.word()));
    };
    let status = client.status_of(report);
    let lines = diagnostic_lines(&display, Some(text), &report.published.items);
    let server = format!("{} {}", client.name, status.marker());
    let output = if lines.is_empty() && status.partial() {
        ToolOutput::text(format!(
            "{server}: no problems in {display} so far; it may report more when it is done: \
             ask again then."
        ))
    } else if lines.is_empty() {
        ToolOutput::text(format!("{server}: no problems in {display}."))
    } else {
        ToolOutput::text(format!(
            "{server} reports {} in {display}:\n{}",
            crate::text::counted(lines.len(), "problem", "problems"),
            lines.join("\n")
        ))
    };
    output.with_metadata("completeness", json!(status.word()))
}

/// An answer with the server's status as its last line: `server [complete]`, or, from a
/// server still loading, `[partial: …]` and what that means (an empty answer is "none so
/// far", never "none").
fn with_status(mut output: ToolOutput, server: &str, status: &crate::lsp::Status) -> ToolOutput {
    let line = if status.partial() {
        format!(
            "{server} {}: the answer may be incomplete; ask again when it is done.",
            status.marker()
        )
    } else {
        format!("{server} {}", status.marker())
    };
    if status.partial() && output.metadata.get("total") == Some(&json!(0)) {
        for content in &mut output.content {
            if let crate::vocab::Content::Text(text) = content
                && let Some(rest) = text.strip_prefix("No ")
            {
                *text = format!("No {} so far.\n", rest.trim_end().trim_end_matches('.'));
            }
        }
    }
    match output.content.last_mut() {
        Some(crate::vocab::Content::Text(text)) => {
            if !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(&line);
        }
        _ => output.content.push(crate::vocab::Content::Text(line)),
    }
    output
}

fn diagnostic_lines(
    display: &str,
    text: Option<&str>,
    items: &[lsp_types::Diagnostic],
) -> Vec<String> {
    let mut items: Vec<&lsp_types::Diagnostic> = items
        .iter()
        .filter(|d| d.severity != Some(lsp_types::DiagnosticSeverity::HINT))
        .collect();
    items.sort_by_key(|d| {
        (
            d.severity.map(|s| {
                serde_json::to_value(s)
                    .ok()
                    .and_then(|v| v.as_i64())
                    .unwrap_or(1)
            }),
            d.range.start.line,
            d.range.start.character,
        )
    });
    items
        .into_iter()
        .map(|d| {
            let (line, col) = crate::lsp::position::human(text, d.range.start);
            let code = d
                .code
                .as_ref()
                .map(|c| match c {
                    lsp_types::NumberOrString::Number(n) => format!(" {n}"),
                    lsp_types::NumberOrString::String(s) => format!(" {s}"),
                })
                .unwrap_or_default();
            format!(
                "{display}:{line}:{col} {}{code} {}",
                crate::lsp::severity_name(d.severity),
                crate::lsp::one_line(&d.message)
            )
        })
        .collect()
}

/// The diagnostics of every file the running servers reported on, each file's block headed by
/// its server's marker (a report for an older text than the server has, or without a version,
/// says it may be stale), and a line for each server still busy.
async fn all_diagnostics(ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
    let clients = ctx.env().lsp().running_within(ctx.roots());
    if clients.is_empty() {
        return Ok(ToolOutput::text(
            "No language server is running yet: servers start when a file of their language is changed or asked about. Give `path` to ask about one file.",
        ));
    }
    let mut reports: Vec<(String, PathBuf, crate::lsp::Published, crate::lsp::Status)> = Vec::new();
    let mut busy = Vec::new();
    for client in &clients {
        let status = client.status(None);
        if status.partial() {
            busy.push(format!(
                "{} {}: it may report more when it is done.",
                client.name,
                status.marker()
            ));
        }
        for (path, published) in client.all_published() {
            if published.items.is_empty() {
                continue;
            }
            let open = client.open_version(&path).await;
            let basis = match (published.version, open) {
                (Some(version), Some(open)) if version >= open => Basis::Versioned,
                (Some(_), Some(_)) => Basis::Older,
                // A file the server read from disk, not one gimlet sent: no version to match.
                (_, None) | (None, Some(_)) => Basis::Unversioned,
            };
            reports.push((
                client.name.clone(),
                path,
                published,
                client.status(Some(basis)),
            ));
        }
    }
    let partial = !busy.is_empty();
    let text = ctx
        .blocking(move |ctx| {
            let mut sources = Sources::new(&ctx);
            let mut out = String::new();
            for (server, path, published, status) in &reports {
                let display = ctx.roots().display(path);
                let lines = diagnostic_lines(&display, sources.text(path), &published.items);
                if lines.is_empty() {
                    continue;
                }
                out.push_str(&format!(
                    "{server} {}: {}\n{}\n",
                    status.marker(),
                    crate::text::counted(lines.len(), "problem", "problems"),
                    lines.join("\n")
                ));
            }
            if out.is_empty() {
                out.push_str(if busy.is_empty() {
                    "No problems in the files the language servers have seen.\n"
                } else {
                    "No problems in the files the language servers have seen so far.\n"
                });
            }
            for line in &busy {
                out.push_str(line);
                out.push('\n');
            }
            Ok(out)
        })
        .await?;
    Ok(ToolOutput::text(text).with_metadata(
        "completeness",
        json!(if partial { "partial" } else { "complete" }),
    ))
}

/// `workspace_symbols`: through the file's server, or every running one.
async fn workspace_symbols(
    args: &LspArgs,
    ctx: &ToolContext,
    client: Option<Arc<Client>>,
) -> Result<ToolOutput, ToolError> {
    let clients = match client {
        Some(client) => vec![client],
        None => ctx.env().lsp().running_within(ctx.roots()),
    };
    if clients.is_empty() {
        return Err(ToolError::invalid(
            "no language server is running yet; give `path` (a file of the language to search) so its server starts",
        ));
    }
    let mut places = Vec::new();
    for client in &clients {
        let result = request(
            client,
            ctx,
            "workspace/symbol",
            json!({"query": args.query}),
        )
        .await?;
        places.extend(render::flat_symbols(&result));
    }
    page(ctx, args, places, None, ("symbol", "symbols")).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_found_whole() {
        assert_eq!(
            find_word("    total = subtotal + total_tax", "total"),
            Some(4)
        );
        assert_eq!(find_word("subtotal + total_tax", "total"), None);
        assert_eq!(
            find_word("é = total", "total"),
            Some(4),
            "columns count characters"
        );
        assert_eq!(find_word("", "x"), None);
    }
}
