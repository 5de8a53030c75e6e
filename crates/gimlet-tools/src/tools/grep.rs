//! `grep`: search file contents with ripgrep's crates, in process.

use crate::util::MutexExt as _;
use std::borrow::Cow;
use std::fmt::Write as _;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use grep_matcher::Matcher;
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch};
use rustix::fs::OFlags;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::context::{AccessKind, ToolContext, ToolEnv};
use crate::error::ToolError;
use crate::fs::{PathError, ResolvedPath};
use crate::output::{DEFAULT_KEEP, OutputBuffer};
use crate::permission::Access;
use crate::search::ordered::{Flow, map_in_order};
use crate::search::walk::{Filters, Found, Stat, collect_files, walk_files, walk_threads};
use crate::tool::Tool;
use crate::vocab::{Content, InterruptBehavior, JsonObject, ToolFlags, ToolOutput};

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
        Some(crate::schema::object(json!({
            "type": "object",
            "properties": {
                "mode": {"type": "string", "enum": ["files_with_matches", "content", "count"]},
                "files": {"type": "array", "items": {"type": "string"}, "description": "files_with_matches: the matching files of this page"},
                "matches": {
                    "type": "array",
                    "description": "content: the matching lines of this page",
                    "items": {
                        "type": "object",
                        "properties": {"path": {"type": "string"}, "line": {"type": "integer"}, "text": {"type": "string"}},
                        "required": ["path", "line", "text"],
                    },
                },
                "counts": {
                    "type": "array",
                    "description": "count: matching lines per file, this page",
                    "items": {
                        "type": "object",
                        "properties": {"path": {"type": "string"}, "count": {"type": "integer"}},
                        "required": ["path", "count"],
                    },
                },
                "next_offset": {"type": ["integer", "null"], "description": "The offset of the next page, or null when this is the last."},
                "files_searched": {"type": "integer"},
            },
            "required": ["mode", "next_offset", "files_searched"],
        })))
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
        samples: Vec<Value>,
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
    match resolved.open_raw(OFlags::PATH, rustix::fs::Mode::empty()) {
        Ok(fd) => {
            let stat = rustix::fs::fstat(&fd).map_err(|e| {
                ToolError::io(format!("searching {}", resolved.display()), e.into())
            })?;
            Ok(
                rustix::fs::FileType::from_raw_mode(stat.st_mode)
                    == rustix::fs::FileType::Directory,
            )
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
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    let Ok(fd) = target.base.open_child(&found.rel, flags) else {
        return FileResult::Skipped;
    };
    let file = File::from(fd);
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

/// A found file's path as shown: relative to the first root when the search base is.
fn display_path(display_base: &str, rel: &Path) -> String {
    if rel.as_os_str().is_empty() {
        display_base.to_owned()
    } else if display_base == "." {
        rel.display().to_string()
    } else {
        Path::new(display_base).join(rel).display().to_string()
    }
}

/// Output formatted as it is found.
struct Direct<'a> {
    samples_left: &'a std::sync::atomic::AtomicUsize,
    path: String,
    text: Vec<u8>,
    /// Lines in `text`.
    lines: usize,
    samples: Vec<Value>,
}

impl Direct<'_> {
    fn line(
        &mut self,
        separator: u8,
        number: u64,
        bytes: &[u8],
        matcher: &RegexMatcher,
        sample: bool,
    ) {
        let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
        let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
        self.text.extend_from_slice(self.path.as_bytes());
        self.text.push(separator);
        push_number(&mut self.text, number);
        self.text.push(separator);
        if bytes.len() <= MAX_LINE_CHARS {
            self.text.extend_from_slice(bytes);
        } else {
            self.text
                .extend_from_slice(shown_line(bytes, matcher).as_bytes());
        }
        self.text.push(b'\n');
        self.lines += 1;
        let take = || {
            use std::sync::atomic::Ordering::Relaxed;
            self.samples_left
                .fetch_update(Relaxed, Relaxed, |n| n.checked_sub(1))
                .is_ok()
        };
        if sample && take() {
            let text = shown_line(bytes, matcher);
            self.samples
                .push(json!({"path": self.path, "line": number, "text": text}));
        }
    }
}

/// Appends a number's decimal digits without allocating (once per output line).
fn push_number(out: &mut Vec<u8>, mut number: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + u8::try_from(number % 10).unwrap_or(0);
        number /= 10;
        if number == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

/// Collects one file's matches (and context lines in content mode).
struct Collect<'m> {
    matcher: &'m RegexMatcher,
    mode: OutputMode,
    cap: Option<u64>,
    matches: u64,
    lines: Vec<Line>,
    pending_break: bool,
    direct: Option<Direct<'m>>,
}

impl Sink for Collect<'_> {
    type Error = std::io::Error;

    fn matched(&mut self, searcher: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, Self::Error> {
        if self.mode == OutputMode::Count && searcher.multi_line_with_matcher(self.matcher) {
            // A multi-line match is no line: count the matches it holds, as `rg -c -U` does
            // (adjacent matches come in one piece).
            let mut found = 0u64;
            let _ = self.matcher.find_iter(mat.bytes(), |_| {
                found += 1;
                true
            });
            self.matches += found.max(1);
        } else {
            self.matches += 1;
        }
        if let Some(direct) = &mut self.direct {
            if std::mem::take(&mut self.pending_break) {
                direct.text.extend_from_slice(b"--\n");
                direct.lines += 1;
            }
            let first = mat.line_number().unwrap_or(0);
            for (i, line) in mat.lines().enumerate() {
                direct.line(b':', first + i as u64, line, self.matcher, i == 0);
            }
        } else if self.mode == OutputMode::Content {
            let first = mat.line_number().unwrap_or(0);
            for (i, line) in mat.lines().enumerate() {
                let text = shown_line(line, self.matcher);
                self.lines.push(Line {
                    number: first + i as u64,
                    text,
                    is_match: true,
                    break_before: std::mem::take(&mut self.pending_break),
                });
            }
        }
        Ok(self.cap.is_none_or(|cap| self.matches < cap))
    }

    fn context(
        &mut self,
        _searcher: &Searcher,
        context: &SinkContext<'_>,
    ) -> Result<bool, Self::Error> {
        let number = context.line_number().unwrap_or(0);
        if let Some(direct) = &mut self.direct {
            if std::mem::take(&mut self.pending_break) {
                direct.text.extend_from_slice(b"--\n");
                direct.lines += 1;
            }
            direct.line(b'-', number, context.bytes(), self.matcher, false);
        } else if self.mode == OutputMode::Content {
            let text = shown_line(context.bytes(), self.matcher);
            let break_before = std::mem::take(&mut self.pending_break);
            self.lines.push(Line {
                number,
                text,
                is_match: false,
                break_before,
            });
        }
        Ok(true)
    }

    fn context_break(&mut self, _searcher: &Searcher) -> Result<bool, Self::Error> {
        self.pending_break =
            !self.lines.is_empty() || self.direct.as_ref().is_some_and(|d| !d.text.is_empty());
        Ok(true)
    }
}

/// A line as shown: without its ending, and cut around the match when long. A long line is
/// never decoded whole: only the part shown is.
fn shown_line(bytes: &[u8], matcher: &RegexMatcher) -> String {
    let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
    if bytes.len() <= MAX_LINE_CHARS {
        return String::from_utf8_lossy(bytes).into_owned();
    }
    let chars = count_chars(bytes);
    if chars <= MAX_LINE_CHARS {
        return String::from_utf8_lossy(bytes).into_owned();
    }
    let at = matcher.find(bytes).ok().flatten().map_or(0, |m| m.start());
    let at_char = count_chars(&bytes[..at]);
    let start = at_char.saturating_sub(MAX_LINE_CHARS / 3);
    let end = (start + MAX_LINE_CHARS).min(chars);
    let start = end.saturating_sub(MAX_LINE_CHARS);
    let middle = &bytes[byte_of_char(bytes, start)..byte_of_char(bytes, end)];
    let mut out = String::new();
    if start > 0 {
        let _ = write!(out, "[... {start} chars] ");
    }
    out.push_str(&String::from_utf8_lossy(middle));
    if end < chars {
        let _ = write!(out, " [{} chars ...]", chars - end);
    }
    out
}

/// Characters in UTF-8 bytes (each byte that starts one).
fn count_chars(bytes: &[u8]) -> usize {
    bytes.iter().filter(|&&b| (b & 0xC0) != 0x80).count()
}

/// The byte offset where character `n` starts (the end for `n` past the last).
fn byte_of_char(bytes: &[u8], n: usize) -> usize {
    bytes
        .iter()
        .enumerate()
        .filter(|(_, b)| (**b & 0xC0) != 0x80)
        .nth(n)
        .map_or(bytes.len(), |(i, _)| i)
}

/// The buffer a page is written into: everything the output limits may show stays in memory
/// (the rest streams to a spill file), so raised limits are honoured whole.
fn output_buffer(ctx: &ToolContext) -> OutputBuffer {
    let limits = ctx.env().limits();
    let keep = DEFAULT_KEEP.max(limits.max_bytes.saturating_add(1));
    let buffer = OutputBuffer::new(ctx.env().spill(), keep);
    match limits.mode {
        // Shown from the start: the end need not be kept whole.
        crate::vocab::TruncationMode::Head => buffer.with_tail(64 * 1024),
        crate::vocab::TruncationMode::Tail | crate::vocab::TruncationMode::HeadTail => buffer,
    }
}

/// The page being built, in result order.
struct Page<'a> {
    args: &'a GrepArgs,
    display_base: String,
    mode: OutputMode,
    limit: Option<usize>,
    offset: usize,
    /// Results seen so far (files, or matching lines in content mode).
    seen: usize,
    shown: usize,
    more: bool,
    out: OutputBuffer,
    structured: Vec<Value>,
    files_with_results: usize,
    /// Files whose search stopped at a line over [`HEAP_LIMIT`].
    too_long: Vec<String>,
}

impl<'a> Page<'a> {
    fn new(
        args: &'a GrepArgs,
        ctx: &'a ToolContext,
        base: &ResolvedPath,
        limit: Option<usize>,
        offset: usize,
    ) -> Self {
        Self {
            args,
            display_base: base.display(),
            mode: args.mode(),
            limit,
            offset,
            seen: 0,
            shown: 0,
            more: false,
            out: output_buffer(ctx),
            structured: Vec::new(),
            files_with_results: 0,
            too_long: Vec::new(),
        }
    }

    fn display(&self, rel: &Path) -> String {
        display_path(&self.display_base, rel)
    }

    /// Takes a file's directly formatted lines (content mode without paging).
    fn add_formatted(
        &mut self,
        matches: u64,
        text: &[u8],
        lines: usize,
        samples: Vec<Value>,
    ) -> Flow {
        if matches == 0 {
            return Flow::Continue;
        }
        if self.files_with_results > 0 {
            self.out.push_str("--\n");
        }
        self.files_with_results += 1;
        self.out.push_counted(text, lines);
        let matches = usize::try_from(matches).unwrap_or(usize::MAX);
        self.seen += matches;
        self.shown += matches;
        for sample in samples {
            if self.structured.len() < 1000 {
                self.structured.push(sample);
            }
        }
        Flow::Continue
    }

    fn full(&self) -> bool {
        self.limit.is_some_and(|limit| self.shown >= limit)
    }

    /// Takes one file's results. Stops once one result beyond the page was seen.
    fn add(&mut self, rel: &Path, matches: u64, lines: Vec<Line>) -> Flow {
        if matches == 0 {
            return Flow::Continue;
        }
        let path = self.display(rel);
        match self.mode {
            OutputMode::FilesWithMatches | OutputMode::Count => {
                self.seen += 1;
                if self.seen <= self.offset {
                    return Flow::Continue;
                }
                if self.full() {
                    self.more = true;
                    return Flow::Stop;
                }
                self.shown += 1;
                if self.mode == OutputMode::Count {
                    let _ = writeln!(self.out_text(), "{path}:{matches}");
                    self.structured
                        .push(json!({"path": path, "count": matches}));
                } else {
                    let _ = writeln!(self.out_text(), "{path}");
                    self.structured.push(Value::String(path));
                }
                Flow::Continue
            }
            OutputMode::Content => self.add_lines(&path, lines),
        }
    }

    fn out_text(&mut self) -> Writer<'_> {
        Writer(&mut self.out)
    }

    fn add_lines(&mut self, path: &str, lines: Vec<Line>) -> Flow {
        // Each context line belongs to the next match of its file (after the last match, to
        // that one); a line is shown when the match it belongs to is on the page.
        let total = lines.iter().filter(|l| l.is_match).count();
        let end = self.limit.map_or(usize::MAX, |l| self.offset + l);
        let mut ordinal = 0;
        let mut printed_any = false;
        let mut stop = false;
        for line in lines {
            if line.is_match {
                ordinal += 1;
            }
            let owner = match (line.is_match, ordinal < total) {
                (true, _) => self.seen + ordinal - 1,
                (false, true) => self.seen + ordinal,
                (false, false) => self.seen + total.saturating_sub(1),
            };
            if owner < self.offset {
                continue;
            }
            if owner >= end {
                self.more = true;
                stop = true;
                if line.is_match {
                    break;
                }
                continue;
            }
            if !printed_any {
                if self.files_with_results > 0 {
                    let _ = writeln!(self.out_text(), "--");
                }
                self.files_with_results += 1;
                printed_any = true;
            } else if line.break_before {
                let _ = writeln!(self.out_text(), "--");
            }
            let separator = if line.is_match { ':' } else { '-' };
            let _ = writeln!(
                self.out_text(),
                "{path}{separator}{}{separator}{}",
                line.number,
                line.text
            );
            if line.is_match {
                self.shown += 1;
                if self.structured.len() < 1000 {
                    self.structured
                        .push(json!({"path": path, "line": line.number, "text": line.text}));
                }
            }
        }
        self.seen += total;
        if stop { Flow::Stop } else { Flow::Continue }
    }

    fn finish(self, searched: usize) -> ToolOutput {
        let what = match self.mode {
            OutputMode::FilesWithMatches | OutputMode::Count => "files",
            OutputMode::Content => "matching lines",
        };
        let mut text = self.out.finish();
        let next_offset = self.more.then_some(self.offset + self.shown);
        let footer = if self.shown == 0 && self.seen == 0 {
            format!(
                "No matches for `{}` in `{}` ({searched} file{} searched).",
                self.args.pattern,
                self.display_base,
                if searched == 1 { "" } else { "s" }
            )
        } else if self.shown == 0 {
            format!(
                "No {what} at offset {}: there are {} in all. Use a smaller offset.",
                self.offset, self.seen
            )
        } else {
            let first = self.offset + 1;
            let last = self.offset + self.shown;
            let order = if self.mode == OutputMode::FilesWithMatches {
                ", most recently modified first"
            } else {
                ""
            };
            match next_offset {
                Some(next) => format!(
                    "[{what} {first}-{last}{order}; more exist: use offset={next} for the next page]"
                ),
                None => format!("[{what} {first}-{last} of {}{order}]", self.seen),
            }
        };
        let mut notes = String::new();
        for path in &self.too_long {
            let _ = writeln!(
                notes,
                "[`{path}`: a line longer than {} MiB was not searched, nor anything after it]",
                HEAP_LIMIT / (1024 * 1024)
            );
        }
        let footer = format!("{notes}{footer}");
        if text.spill.is_none() {
            text.head.push_str(&footer);
            text.total_bytes = text.head.len() as u64;
        } else {
            text.tail.push_str(&footer);
        }
        let key = match self.mode {
            OutputMode::FilesWithMatches => "files",
            OutputMode::Content => "matches",
            OutputMode::Count => "counts",
        };
        let mode = serde_json::to_value(self.mode).unwrap_or(Value::Null);
        let mut structured =
            json!({"mode": mode, "next_offset": next_offset, "files_searched": searched});
        structured[key] = Value::Array(self.structured);
        ToolOutput {
            title: Some(format!("grep {}", self.args.pattern)),
            content: vec![Content::Long(text)],
            structured: Some(structured),
            ..ToolOutput::default()
        }
    }
}

/// `write!` into an [`OutputBuffer`].
struct Writer<'a>(&'a mut OutputBuffer);

impl std::fmt::Write for Writer<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.push_str(s);
        Ok(())
    }
}

#[cfg(test)]
#[path = "grep_tests.rs"]
mod tests;
