//! `grep`: search file contents with ripgrep's crates, in process.

mod printer;

use std::borrow::Cow;
#[allow(unused_imports)]
use std::fs::File;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::context::{AccessKind, ToolContext, ToolEnv};
use crate::error::ToolError;
use crate::fs::{PathError, ResolvedPath};
use crate::permission::Access;
use crate::search::ordered::{Flow, map_in_order};
use crate::search::walk::{Filters, Found, Stat, collect_files, walk_files, walk_threads};
use crate::tool::Tool;
use crate::util::MutexExt as _;
use crate::vocab::{InterruptBehavior, JsonObject, ToolFlags, ToolOutput};
use printer::{Collect, Direct, Page, display_path};

const DESCRIPTION: &str = include_str!("grep.md");

/// Matched lines longer than this many characters are cut around the match.
pub(crate) const MAX_LINE_CHARS: usize = 300;
/// Results per page when no `head_limit` is given: files (`files_with_matches`, `count`).
const DEFAULT_FILES: usize = 100;
/// Results per page when no `head_limit` is given: matching lines (content).
const DEFAULT_LINES: usize = 200;
/// Context lines at most, each side.
const MAX_CONTEXT: usize = 50;
/// Memory one file's search may hold: the longest line searched (and, with `multiline`, the
/// largest file). A line over it is reported, not loaded whole.
pub(crate) const HEAP_LIMIT: usize = 32 * 1024 * 1024;

/// What `grep` returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OutputMode {
    /// Paths of matching files, most recently modified first.
    #[default]
    FilesWithMatches,
    /// Matching lines as `path:line:text`, with context lines when asked.
    Content,
    /// The number of matching lines per file.
    Count,
}

/// The structured result of `grep`: one page, in the list `mode` names.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub(crate) struct GrepResult {
    /// The output mode, which names the list the page has (`files`, `matches` or `counts`).
    pub(crate) mode: OutputMode,
    /// `files_with_matches` mode: the matching files of this page.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Vec<String>")]
    pub(crate) files: Option<Vec<String>>,
    /// `content` mode: the matching lines of this page (the first 1000 of them).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Vec<GrepMatch>")]
    pub(crate) matches: Option<Vec<GrepMatch>>,
    /// `count` mode: matching lines per file, this page.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Vec<FileCount>")]
    pub(crate) counts: Option<Vec<FileCount>>,
    /// The offset of the next page, or null when this is the last.
    pub(crate) next_offset: Option<usize>,
    /// Files searched.
    pub(crate) files_searched: usize,
}

/// One matching line.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub(crate) struct GrepMatch {
    /// The file, as shown.
    pub(crate) path: String,
    /// The line number (1-based).
    pub(crate) line: u64,
    /// The line, cut around the match when long.
    pub(crate) text: String,
}

/// The matching lines of one file.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub(crate) struct FileCount {
    /// The file, as shown.
    pub(crate) path: String,
    /// Its matching lines.
    pub(crate) count: u64,
}

/// Arguments of `grep`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GrepArgs {
    /// The regular expression (Rust regex syntax), or a literal with `fixed_strings`.
    pub pattern: String,
    /// The file or directory to search (default: the first root folder).
    pub path: Option<String>,
    /// Only files matching these globs, space-separated (e.g. `*.rs`, `*.{ts,tsx}`,
    /// `!**/vendor/**` to exclude).
    pub glob: Option<String>,
    /// Only files of this type, as ripgrep knows them (`rust`, `py`, `js`, `go` ...).
    #[serde(rename = "type")]
    pub file_type: Option<String>,
    /// What to return (default `files_with_matches`).
    pub output_mode: Option<OutputMode>,
    /// Match case-insensitively.
    pub case_insensitive: Option<bool>,
    /// Treat `pattern` as a literal string, not a regex.
    pub fixed_strings: Option<bool>,
    /// Let a match span lines (`.` also matches newlines).
    pub multiline: Option<bool>,
    /// Lines of context before each match (content mode).
    pub before_context: Option<usize>,
    /// Lines of context after each match (content mode).
    pub after_context: Option<usize>,
    /// Lines of context before and after each match (content mode).
    pub context: Option<usize>,
    /// Results per page: files, or matching lines in content mode (default 100 files, 200
    /// lines; 0 for all).
    pub head_limit: Option<usize>,
    /// Results to skip, to get the next page.
    pub offset: Option<usize>,
}

impl GrepArgs {
    fn mode(&self) -> OutputMode {
        self.output_mode.unwrap_or_default()
    }

    fn limit(&self) -> Option<usize> {
        match self.head_limit {
            Some(0) => None,
            Some(n) => Some(n),
            None if self.mode() == OutputMode::Content => Some(DEFAULT_LINES),
            None => Some(DEFAULT_FILES),
        }
    }

    fn contexts(&self) -> (usize, usize) {
        let both = self.context.unwrap_or(0);
        (
            self.before_context.unwrap_or(both),
            self.after_context.unwrap_or(both),
        )
    }

    fn matcher(&self) -> Result<RegexMatcher, ToolError> {
        let multiline = self.multiline.unwrap_or(false);
        let mut builder = RegexMatcherBuilder::new();
        builder
            .case_insensitive(self.case_insensitive.unwrap_or(false))
            .fixed_strings(self.fixed_strings.unwrap_or(false))
            .multi_line(true)
            .dot_matches_new_line(multiline);
        if !multiline {
            builder.line_terminator(Some(b'\n'));
        }
        builder.build(&self.pattern).map_err(|e| {
            if !multiline && e.to_string().contains("is not allowed in a regex") {
                // The line terminator is banned from a line-by-line search.
                return ToolError::invalid(
                    "`pattern` matches a line break, and without `multiline` every match stays \
                     within one line; set `multiline: true` to match across lines",
                );
            }
            if self.fixed_strings.unwrap_or(false) {
                return ToolError::invalid(format!("`pattern` cannot be searched for:\n{e}"));
            }
            // grep-regex reports syntax errors against the pattern wrapped as `(?:...)`; the
            // regex crate's parser (the same one) points into the pattern as it was given.
            let syntax = regex::RegexBuilder::new(&self.pattern)
                .case_insensitive(self.case_insensitive.unwrap_or(false))
                .multi_line(true)
                .dot_matches_new_line(multiline)
                .build()
                .err();
            let e = syntax.map_or_else(|| e.to_string(), |syntax| syntax.to_string());
            ToolError::invalid(format!(
                "`pattern` is not a valid regex (for a literal, set `fixed_strings`):\n{e}"
            ))
        })
    }
}

/// The `grep` tool.
#[derive(Debug, Default, Clone, Copy)]
pub struct GrepTool;

impl Tool for GrepTool {
    type Args = GrepArgs;
    const NAME: &'static str = "grep";
    const TITLE: &'static str = "Search file contents";

    fn description(&self, _env: &ToolEnv) -> Cow<'static, str> {
        DESCRIPTION.into()
    }

    fn flags(&self, _args: Option<&GrepArgs>) -> ToolFlags {
        ToolFlags {
            interrupt: InterruptBehavior::Cancel,
            ..ToolFlags::READ_ONLY
        }
    }

    fn output_schema(&self) -> Option<JsonObject> {
        Some(crate::schema::output_schema::<GrepResult>())
    }

    async fn validate(&self, args: GrepArgs, _ctx: &ToolContext) -> Result<GrepArgs, ToolError> {
        if args.pattern.is_empty() {
            return Err(ToolError::invalid(
                "`pattern` is empty; give a regex or, with `fixed_strings`, a literal",
            ));
        }
        args.matcher()?;
        let (before, after) = args.contexts();
        if before > MAX_CONTEXT || after > MAX_CONTEXT {
            return Err(ToolError::invalid(format!(
                "context may be at most {MAX_CONTEXT} lines each side"
            )));
        }
        let has_context = args
            .context
            .or(args.before_context)
            .or(args.after_context)
            .is_some_and(|n| n > 0);
        if has_context && args.mode() != OutputMode::Content {
            return Err(ToolError::invalid(
                "context lines are shown in `output_mode: \"content\"` only; set it, or drop the context arguments",
            ));
        }
        Ok(args)
    }

    async fn accesses(&self, args: &GrepArgs, ctx: &ToolContext) -> Result<Vec<Access>, ToolError> {
        let path = args.path.as_deref().unwrap_or(".");
        Ok(vec![ctx.path_access(path, AccessKind::Read).await?])
    }

    async fn execute(&self, args: GrepArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        ctx.blocking(move |ctx| grep(&args, &ctx)).await
    }
}

/// One line of output for one file.
struct Line {
    number: u64,
    text: String,
    is_match: bool,
    /// A `--` separator goes before this line.
    break_before: bool,
}

/// What searching one file produced.
enum FileResult {
    /// Unreadable or vanished: skipped silently, as `rg` does.
    Skipped,
    /// Searched, keeping each line for paging.
    Searched {
        rel: PathBuf,
        matches: u64,
        lines: Vec<Line>,
        modified: SystemTime,
    },
    /// Searched without paging: the output lines already formatted, and the first few matches
    /// for the structured result.
    Formatted {
        matches: u64,
        text: Vec<u8>,
        lines: usize,
        samples: Vec<GrepMatch>,
    },
}

/// Matches kept for the structured result, in all.
const MAX_SAMPLES: usize = 1000;

fn grep(args: &GrepArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
    let input = args.path.as_deref().unwrap_or(".");
    let resolved = ctx.resolve_allowed(input)?;
    let matcher = args.matcher()?;
    let dir = is_dir(&resolved)?;
    let mode = args.mode();
    let (before, after) = args.contexts();
    let offset = args.offset.unwrap_or(0);
    let limit = args.limit();
    let mut builder = SearcherBuilder::new();
    builder
        .heap_limit(Some(HEAP_LIMIT))
        .binary_detection(BinaryDetection::quit(b'\0'))
        // grep-searcher's default, said here so that it stays: a file starting with a UTF-16
        // BOM is transcoded to UTF-8 (encoding_rs_io) and searched as the text `read` shows.
        .bom_sniffing(true)
        .line_number(true)
        .multi_line(args.multiline.unwrap_or(false))
        .before_context(before)
        .after_context(after);
    let page = Page::new(args, ctx, &resolved, limit, offset);
    let search = Search {
        too_long: Mutex::new(Vec::new()),
        samples_left: std::sync::atomic::AtomicUsize::new(MAX_SAMPLES),
        resolved: &resolved,
        display_base: resolved.display(),
        matcher: &matcher,
        builder,
        mode,
    };
    if dir && limit.is_none() && offset == 0 {
        let filters = Filters::new(
            &resolved.path,
            args.glob.as_deref(),
            args.file_type.as_deref(),
        )?;
        return search_everything(&search, &filters, page, ctx);
    }
    let files = if dir {
        let filters = Filters::new(
            &resolved.path,
            args.glob.as_deref(),
            args.file_type.as_deref(),
        )?;
        collect_files(
            &resolved.path,
            &filters,
            &|_| true,
            Stat::Walker,
            ctx.cancellation(),
        )?
    } else {
        vec![Found {
            rel: PathBuf::new(),
            modified: SystemTime::UNIX_EPOCH,
        }]
    };
    search_in_order(
        &search,
        &files,
        page,
        limit.map(|limit| offset + limit),
        ctx,
    )
}

/// What every file of one call is searched with.
struct Search<'a> {
    /// Files whose search stopped at a line over [`HEAP_LIMIT`] (shown paths).
    too_long: Mutex<Vec<String>>,
    /// Structured-result matches still wanted (shared by the worker threads).
    samples_left: std::sync::atomic::AtomicUsize,
    resolved: &'a ResolvedPath,
    display_base: String,
    matcher: &'a RegexMatcher,
    builder: SearcherBuilder,
    mode: OutputMode,
}

impl Search<'_> {
    fn file(
        &self,
        searcher: &mut Searcher,
        found: &Found,
        direct: bool,
        cap: Option<u64>,
    ) -> FileResult {
        let target = Target {
            base: self.resolved,
            display_base: &self.display_base,
            direct,
            samples_left: &self.samples_left,
            too_long: &self.too_long,
        };
        search_file(&target, found, self.matcher, searcher, self.mode, cap)
    }
}

/// Pages: files in a fixed order (newest first), searched side by side, consumed in order, and
/// stopped once the page is full.
fn search_in_order(
    search: &Search<'_>,
    files: &[Found],
    mut page: Page<'_>,
    page_end: Option<usize>,
    ctx: &ToolContext,
) -> Result<ToolOutput, ToolError> {
    // No file needs to yield more matches than the pages up to this one would show.
    let cap = match (search.mode, page_end) {
        (OutputMode::FilesWithMatches, _) => Some(1),
        (OutputMode::Content, Some(end)) => Some(end as u64 + 1),
        _ => None,
    };
    let direct = search.mode == OutputMode::Content && page_end.is_none();
    ctx.progress(crate::context::ProgressUpdate::counted(
        format!("searching {} files", files.len()),
        0,
        files.len(),
    ));
    let mut last_progress = Instant::now();
    let mut searched = 0usize;
    let total = files.len();
    map_in_order(
        files,
        walk_threads(),
        || search.builder.build(),
        |searcher, found| {
            if ctx.is_cancelled() {
                return FileResult::Skipped;
            }
            search.file(searcher, found, direct, cap)
        },
        |result| {
            searched += 1;
            if last_progress.elapsed() > Duration::from_millis(500) {
                last_progress = Instant::now();
                let message = format!(
                    "searched {searched} of {total} files, {} results",
                    page.seen
                );
                ctx.progress(crate::context::ProgressUpdate::counted(
                    message, searched, total,
                ));
            }
            if ctx.is_cancelled() {
                return Flow::Stop;
            }
            match result {
                FileResult::Skipped => Flow::Continue,
                FileResult::Searched {
                    rel,
                    matches,
                    lines,
                    ..
                } => page.add(&rel, matches, lines),
                FileResult::Formatted {
                    matches,
                    text,
                    lines,
                    samples,
                } => page.add_formatted(matches, &text, lines, samples),
            }
        },
    );
    if ctx.is_cancelled() {
        return Err(ToolError::Cancelled);
    }
    page.too_long = take_too_long(search);
    Ok(page.finish(searched))
}

/// Everything, no paging: one pass like `rg`, each walker thread searching the files it visits.
/// Content streams in walk order (whole files at a time); files and counts are sorted newest
/// first at the end, from the searched files' own metadata.
fn search_everything(
    search: &Search<'_>,
    filters: &Filters,
    page: Page<'_>,
    ctx: &ToolContext,
) -> Result<ToolOutput, ToolError> {
    struct Shared<'p> {
        page: Page<'p>,
        hits: Vec<(PathBuf, u64, SystemTime)>,
        searched: usize,
        last_progress: Instant,
    }
    let shared = Mutex::new(Shared {
        page,
        hits: Vec::new(),
        searched: 0,
        last_progress: Instant::now(),
    });
    let direct = search.mode == OutputMode::Content;
    let cap = (search.mode == OutputMode::FilesWithMatches).then_some(1);
    ctx.progress_message(format!("searching {}", search.display_base));
    walk_files(
        &search.resolved.path,
        filters,
        ctx.cancellation(),
        || search.builder.build(),
        |searcher, _entry, rel| {
            let found = Found {
                rel: rel.to_owned(),
                modified: SystemTime::UNIX_EPOCH,
            };
            let result = search.file(searcher, &found, direct, cap);
            let mut shared = shared.locked();
            shared.searched += 1;
            if shared.last_progress.elapsed() > Duration::from_millis(500) {
                shared.last_progress = Instant::now();
                ctx.progress_message(format!(
                    "searched {} files, {} results",
                    shared.searched, shared.page.seen
                ));
            }
            match result {
                FileResult::Skipped | FileResult::Searched { matches: 0, .. } => {}
                FileResult::Formatted {
                    matches,
                    text,
                    lines,
                    samples,
                } => {
                    shared.page.add_formatted(matches, &text, lines, samples);
                }
                FileResult::Searched {
                    rel,
                    matches,
                    modified,
                    ..
                } => shared.hits.push((rel, matches, modified)),
            }
        },
    )?;
    let Shared {
        mut page,
        mut hits,
        searched,
        ..
    } = shared
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    hits.sort_unstable_by(|a, b| b.2.cmp(&a.2).then_with(|| a.0.cmp(&b.0)));
    for (rel, matches, _) in hits {
        page.add(&rel, matches, Vec::new());
    }
    page.too_long = take_too_long(search);
    Ok(page.finish(searched))
}

/// The files whose search stopped at an over-long line, sorted.
fn take_too_long(search: &Search<'_>) -> Vec<String> {
    let mut files = std::mem::take(&mut *search.too_long.locked());
    files.sort();
    files
}

fn is_dir(resolved: &ResolvedPath) -> Result<bool, ToolError> {
    match resolved.open(crate::fs::OpenKind::Handle) {
        Ok(handle) => {
            let meta = handle
                .metadata()
                .map_err(|e| ToolError::io(format!("searching {}", resolved.display()), e))?;
            Ok(meta.is_dir())
        }
        Err(err) => Err(resolved.with_similar_names(err).into()),
    }
}

impl From<PathError> for FileResult {
    fn from(_: PathError) -> Self {
        Self::Skipped
    }
}

/// Where a file is searched and how its lines are shown.
struct Target<'a> {
    base: &'a ResolvedPath,
    display_base: &'a str,
    /// Format lines directly (no paging).
    direct: bool,
    samples_left: &'a std::sync::atomic::AtomicUsize,
    too_long: &'a Mutex<Vec<String>>,
}

fn search_file(
    target: &Target<'_>,
    found: &Found,
    matcher: &RegexMatcher,
    searcher: &mut Searcher,
    mode: OutputMode,
    cap: Option<u64>,
) -> FileResult {
    let Ok(file) = target.base.open_child_read(&found.rel) else {
        return FileResult::Skipped;
    };
    // Only regular files: a FIFO found by the walk must not be read.
    let Ok(meta) = file.metadata() else {
        return FileResult::Skipped;
    };
    if !meta.is_file() {
        return FileResult::Skipped;
    }
    let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
    let direct = target.direct.then(|| Direct {
        samples_left: target.samples_left,
        path: display_path(target.display_base, &found.rel),
        text: Vec::with_capacity(4096),
        lines: 0,
        samples: Vec::new(),
    });
    let mut sink = Collect {
        matcher,
        mode,
        cap,
        matches: 0,
        lines: Vec::new(),
        pending_break: false,
        direct,
    };
    if let Err(err) = searcher.search_file(matcher, &file, &mut sink) {
        // grep-searcher's heap limit: a line (or, with `multiline`, a file) too big to hold.
        // What was found before it stands; the file is reported.
        if err.kind() != std::io::ErrorKind::Other || !err.to_string().contains("allocation limit")
        {
            return FileResult::Skipped;
        }
        target
            .too_long
            .locked()
            .push(display_path(target.display_base, &found.rel));
    }
    match sink.direct {
        Some(direct) => FileResult::Formatted {
            matches: sink.matches,
            text: direct.text,
            lines: direct.lines,
            samples: direct.samples,
        },
        None => FileResult::Searched {
            rel: found.rel.clone(),
            matches: sink.matches,
            lines: sink.lines,
            modified,
        },
    }
}

#[cfg(test)]
#[path = "grep_tests.rs"]
mod tests;
