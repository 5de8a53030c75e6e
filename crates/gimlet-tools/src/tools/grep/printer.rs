//! `grep`'s printer, apart from the search (as ripgrep keeps `grep-printer` apart from
//! `grep-searcher`): the sinks that format matches as they are found, the page of results with
//! its limits and notices, and the output buffer they write to.

use std::fmt::Write as _;
use std::path::Path;

use grep_matcher::Matcher;
use grep_regex::RegexMatcher;
use grep_searcher::{Searcher, Sink, SinkContext, SinkMatch};

use crate::context::ToolContext;
use crate::fs::ResolvedPath;
use crate::output::{DEFAULT_KEEP, OutputBuffer};
use crate::search::ordered::Flow;
use crate::vocab::{Content, ToolOutput};

use super::{
    FileCount, GrepArgs, GrepMatch, GrepResult, HEAP_LIMIT, Line, MAX_LINE_CHARS, OutputMode,
};

/// A found file's path as shown: relative to the first root when the search base is.
pub(super) fn display_path(display_base: &str, rel: &Path) -> String {
    if rel.as_os_str().is_empty() {
        display_base.to_owned()
    } else if display_base == "." {
        rel.display().to_string()
    } else {
        Path::new(display_base).join(rel).display().to_string()
    }
}

/// Output formatted as it is found.
pub(super) struct Direct<'a> {
    pub(super) samples_left: &'a std::sync::atomic::AtomicUsize,
    pub(super) path: String,
    pub(super) text: Vec<u8>,
    /// Lines in `text`.
    pub(super) lines: usize,
    pub(super) samples: Vec<GrepMatch>,
}

impl Direct<'_> {
    pub(super) fn line(
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
            self.samples.push(GrepMatch {
                path: self.path.clone(),
                line: number,
                text,
            });
        }
    }
}

/// Appends a number's decimal digits without allocating (once per output line).
pub(super) fn push_number(out: &mut Vec<u8>, mut number: u64) {
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
pub(super) struct Collect<'m> {
    pub(super) matcher: &'m RegexMatcher,
    pub(super) mode: OutputMode,
    pub(super) cap: Option<u64>,
    pub(super) matches: u64,
    pub(super) lines: Vec<Line>,
    pub(super) pending_break: bool,
    pub(super) direct: Option<Direct<'m>>,
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
pub(super) fn shown_line(bytes: &[u8], matcher: &RegexMatcher) -> String {
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
pub(super) fn count_chars(bytes: &[u8]) -> usize {
    bytes.iter().filter(|&&b| (b & 0xC0) != 0x80).count()
}

/// The byte offset where character `n` starts (the end for `n` past the last).
pub(super) fn byte_of_char(bytes: &[u8], n: usize) -> usize {
    bytes
        .iter()
        .enumerate()
        .filter(|(_, b)| (**b & 0xC0) != 0x80)
        .nth(n)
        .map_or(bytes.len(), |(i, _)| i)
}

/// The buffer a page is written into: everything the output limits may show stays in memory
/// (the rest streams to a spill file), so raised limits are honoured whole.
pub(super) fn output_buffer(ctx: &ToolContext) -> OutputBuffer {
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
pub(super) struct Page<'a> {
    pub(super) args: &'a GrepArgs,
    pub(super) display_base: String,
    pub(super) mode: OutputMode,
    pub(super) limit: Option<usize>,
    pub(super) offset: usize,
    /// Results seen so far (files, or matching lines in content mode).
    pub(super) seen: usize,
    pub(super) shown: usize,
    pub(super) more: bool,
    pub(super) out: OutputBuffer,
    /// The structured result's list, `files` mode (every file of the page).
    pub(super) files: Vec<String>,
    /// The structured result's list, `content` mode (the first 1000 matching lines).
    pub(super) matches: Vec<GrepMatch>,
    /// The structured result's list, `count` mode (every file of the page).
    pub(super) counts: Vec<FileCount>,
    pub(super) files_with_results: usize,
    /// Files whose search stopped at a line over [`HEAP_LIMIT`].
    pub(super) too_long: Vec<String>,
}

impl<'a> Page<'a> {
    pub(super) fn new(
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
            files: Vec::new(),
            matches: Vec::new(),
            counts: Vec::new(),
            files_with_results: 0,
            too_long: Vec::new(),
        }
    }

    pub(super) fn display(&self, rel: &Path) -> String {
        display_path(&self.display_base, rel)
    }

    /// Takes a file's directly formatted lines (content mode without paging).
    pub(super) fn add_formatted(
        &mut self,
        matches: u64,
        text: &[u8],
        lines: usize,
        samples: Vec<GrepMatch>,
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
            if self.matches.len() < 1000 {
                self.matches.push(sample);
            }
        }
        Flow::Continue
    }

    pub(super) fn full(&self) -> bool {
        self.limit.is_some_and(|limit| self.shown >= limit)
    }

    /// Takes one file's results. Stops once one result beyond the page was seen.
    pub(super) fn add(&mut self, rel: &Path, matches: u64, lines: Vec<Line>) -> Flow {
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
                    self.counts.push(FileCount {
                        path,
                        count: matches,
                    });
                } else {
                    let _ = writeln!(self.out_text(), "{path}");
                    self.files.push(path);
                }
                Flow::Continue
            }
            OutputMode::Content => self.add_lines(&path, lines),
        }
    }

    pub(super) fn out_text(&mut self) -> Writer<'_> {
        Writer(&mut self.out)
    }

    pub(super) fn add_lines(&mut self, path: &str, lines: Vec<Line>) -> Flow {
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
                if self.matches.len() < 1000 {
                    self.matches.push(GrepMatch {
                        path: path.to_owned(),
                        line: line.number,
                        text: line.text,
                    });
                }
            }
        }
        self.seen += total;
        if stop { Flow::Stop } else { Flow::Continue }
    }

    pub(super) fn finish(self, searched: usize) -> ToolOutput {
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
        let mut structured = GrepResult {
            mode: self.mode,
            files: None,
            matches: None,
            counts: None,
            next_offset,
            files_searched: searched,
        };
        match self.mode {
            OutputMode::FilesWithMatches => structured.files = Some(self.files),
            OutputMode::Content => structured.matches = Some(self.matches),
            OutputMode::Count => structured.counts = Some(self.counts),
        }
        ToolOutput {
            title: Some(format!("grep {}", self.args.pattern)),
            content: vec![Content::Long(text)],
            ..ToolOutput::default()
        }
        .with_structured_of(&structured)
    }
}

/// `write!` into an [`OutputBuffer`].
pub(super) struct Writer<'a>(&'a mut OutputBuffer);

impl std::fmt::Write for Writer<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.push_str(s);
        Ok(())
    }
}
