//! Finding `old_string` in a document: exact first, then graded fallbacks.
//!
//! Levels, tried in order, each adding a relaxation to the one before:
//! 1. [`MatchLevel::Exact`]: the text as written (line endings aside).
//! 2. [`MatchLevel::TrailingWhitespace`]: lines compared without trailing whitespace.
//! 3. [`MatchLevel::Indentation`]: a uniform indentation shift is ignored; the replacement is
//!    re-indented to the file's indentation.
//! 4. [`MatchLevel::Punctuation`]: curly quotes, dashes and non-breaking spaces normalized.
//!
//! Fallbacks compare whole lines and are used only when they find exactly one candidate. The
//! replacement covers the matched lines only, and lines the model left unchanged (equal in
//! `old_string` and `new_string`) keep the file's exact bytes.

use std::fmt::Write as _;
use std::ops::Range;

use similar::{Algorithm, DiffOp};

use super::Document;

/// How `old_string` was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MatchLevel {
    /// Exactly as written.
    Exact,
    /// Ignoring trailing whitespace.
    TrailingWhitespace,
    /// Ignoring a uniform indentation shift.
    Indentation,
    /// With Unicode punctuation normalized.
    Punctuation,
}

impl MatchLevel {
    /// Words for the result.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Exact => "exact match",
            Self::TrailingWhitespace => "matched ignoring trailing whitespace",
            Self::Indentation => {
                "matched ignoring an indentation shift; the replacement was re-indented"
            }
            Self::Punctuation => {
                "matched with curly quotes, dashes and non-breaking spaces normalized"
            }
        }
    }
}

/// Where to replace, and with what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replacement {
    /// Normalized ranges and their new text (`\n` breaks), ascending.
    pub edits: Vec<(Range<usize>, String)>,
    /// How the text was found.
    pub level: MatchLevel,
}

/// Why `old_string` could not be placed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MatchError {
    /// Nowhere.
    #[error("`old_string` was not found{}", closest.as_deref().map_or_else(|| String::from("; read the file again and copy the exact text, whitespace included"), |c| format!(". {c}")))]
    NotFound {
        /// The closest region and how it differs, rendered.
        closest: Option<String>,
    },
    /// In several places.
    #[error(
        "`old_string` matches {count} places ({}, lines {}{}); add surrounding lines to make it \
         unique, or set `replace_all` to change every one",
        level.describe(),
        lines.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "),
        if *count > lines.len() { ", ..." } else { "" }
    )]
    Ambiguous {
        /// How many.
        count: usize,
        /// The first lines of the first few.
        lines: Vec<usize>,
        /// The level they were found at.
        level: MatchLevel,
    },
}

/// Places one `old` -> `new` change (both with `\n` breaks) in `doc`.
pub fn find_replacement(
    doc: &Document,
    old: &str,
    new: &str,
    replace_all: bool,
) -> Result<Replacement, MatchError> {
    let text = doc.normalized();
    if !old.is_empty() {
        // Overlapping occurrences count: `aa` is not unique in `aaa`.
        let hits = occurrences(text, old);
        match hits.len() {
            0 => {}
            1 => return Ok(exact(&hits, old, new)),
            _ if replace_all => {
                let mut disjoint: Vec<usize> = Vec::with_capacity(hits.len());
                for &hit in &hits {
                    if disjoint.last().is_none_or(|&last| hit >= last + old.len()) {
                        disjoint.push(hit);
                    }
                }
                return Ok(exact(&disjoint, old, new));
            }
            count => {
                let lines = hits.iter().take(5).map(|&i| doc.line_of(i)).collect();
                return Err(MatchError::Ambiguous {
                    count,
                    lines,
                    level: MatchLevel::Exact,
                });
            }
        }
    }
    let lines = Lines::of(text);
    for level in [
        MatchLevel::TrailingWhitespace,
        MatchLevel::Indentation,
        MatchLevel::Punctuation,
    ] {
        let (old_lines, _) = split_lines(old);
        let candidates = find_windows(&lines, 0, &old_lines, level);
        match candidates.len() {
            0 => {}
            1 => return Ok(fuzzy(&lines, &candidates[0], old, new, level)),
            count => {
                let lines = candidates.iter().take(5).map(|c| c.first + 1).collect();
                return Err(MatchError::Ambiguous {
                    count,
                    lines,
                    level,
                });
            }
        }
    }
    Err(MatchError::NotFound {
        closest: closest(doc, &lines, old),
    })
}

/// Every start of `needle` in `text`, overlapping ones included.
fn occurrences(text: &str, needle: &str) -> Vec<usize> {
    let finder = memchr::memmem::Finder::new(needle.as_bytes());
    let mut hits = Vec::new();
    let mut from = 0;
    while let Some(i) = finder.find(&text.as_bytes()[from..]) {
        let at = from + i;
        hits.push(at);
        // Continue after the first character of this hit.
        from = at + text[at..].chars().next().map_or(1, char::len_utf8);
        if from > text.len() {
            break;
        }
    }
    hits
}

fn exact(hits: &[usize], old: &str, new: &str) -> Replacement {
    Replacement {
        edits: hits
            .iter()
            .map(|&i| (i..i + old.len(), new.to_owned()))
            .collect(),
        level: MatchLevel::Exact,
    }
}

/// The lines of the normalized text, with their byte ranges (newline excluded).
pub(crate) struct Lines<'a> {
    pub(crate) text: &'a str,
    pub(crate) ranges: Vec<Range<usize>>,
}

impl<'a> Lines<'a> {
    pub(crate) fn of(text: &'a str) -> Self {
        let mut ranges = Vec::new();
        let mut start = 0;
        for (i, b) in text.bytes().enumerate() {
            if b == b'\n' {
                ranges.push(start..i);
                start = i + 1;
            }
        }
        if start < text.len() {
            ranges.push(start..text.len());
        }
        Self { text, ranges }
    }

    pub(crate) fn line(&self, i: usize) -> &'a str {
        &self.text[self.ranges[i].clone()]
    }

    pub(crate) fn len(&self) -> usize {
        self.ranges.len()
    }

    /// The normalized byte range of lines `first..first + count`, taking the newline after the
    /// last one when `with_newline` and there is one.
    pub(crate) fn span(&self, first: usize, count: usize, with_newline: bool) -> Range<usize> {
        if count == 0 {
            let at = self.ranges.get(first).map_or(self.text.len(), |r| r.start);
            return at..at;
        }
        let start = self.ranges[first].start;
        let mut end = self.ranges[first + count - 1].end;
        if with_newline && end < self.text.len() {
            end += 1;
        }
        start..end
    }
}

/// `old` as lines; the flag says it ended with a newline (the match then takes the newline of
/// its last line too).
pub(crate) fn split_lines(text: &str) -> (Vec<&str>, bool) {
    let trailing = text.ends_with('\n');
    let body = if trailing {
        &text[..text.len() - 1]
    } else {
        text
    };
    if body.is_empty() && !trailing {
        return (Vec::new(), false);
    }
    (body.split('\n').collect(), trailing)
}

/// A window of file lines that matches `old` at some level.
pub(crate) struct Window {
    pub(crate) first: usize,
    pub(crate) count: usize,
    /// The file's common indentation over the window (Indentation level and above).
    file_indent: String,
    /// `old`'s common indentation.
    old_indent: String,
}

/// Windows of `lines` at or after line `from` whose lines match `old_lines` at `level`.
pub(crate) fn find_windows(
    lines: &Lines<'_>,
    from: usize,
    old_lines: &[&str],
    level: MatchLevel,
) -> Vec<Window> {
    let k = old_lines.len();
    if k == 0 || from + k > lines.len() || old_lines.iter().all(|l| l.trim().is_empty()) {
        return Vec::new();
    }
    let old_norm: Vec<String> = old_lines
        .iter()
        .map(|l| normalize_line(l, level).into_owned())
        .collect();
    let old_indent = common_indent(&old_norm);
    let old_cmp: Vec<&str> = old_norm
        .iter()
        .map(|l| strip_for(l, &old_indent, level))
        .collect();
    let first_key = old_cmp.iter().position(|l| !l.is_empty()).unwrap_or(0);
    let mut found = Vec::new();
    for first in from..=lines.len() - k {
        // Cheap check on one non-blank line before normalizing the whole window.
        let probe = normalize_line(lines.line(first + first_key), level);
        let plausible = match level {
            MatchLevel::Exact => probe == old_cmp[first_key],
            _ => probe.trim_start() == old_cmp[first_key].trim_start(),
        };
        if !plausible {
            continue;
        }
        let window: Vec<String> = (first..first + k)
            .map(|i| normalize_line(lines.line(i), level).into_owned())
            .collect();
        let file_indent = common_indent(&window);
        let same = window
            .iter()
            .zip(&old_cmp)
            .all(|(w, o)| strip_for(w, &file_indent, level) == *o);
        if same {
            found.push(Window {
                first,
                count: k,
                file_indent,
                old_indent: old_indent.clone(),
            });
        }
    }
    found
}

/// The form a line is compared in at a level (allocating only to normalize punctuation).
fn normalize_line(line: &str, level: MatchLevel) -> std::borrow::Cow<'_, str> {
    match level {
        MatchLevel::Exact => line.into(),
        MatchLevel::TrailingWhitespace | MatchLevel::Indentation => line.trim_end().into(),
        MatchLevel::Punctuation => line
            .trim_end()
            .chars()
            .map(plain_punctuation)
            .collect::<String>()
            .into(),
    }
}

/// Removes the common indentation at the Indentation level and above.
fn strip_for<'a>(line: &'a str, indent: &str, level: MatchLevel) -> &'a str {
    if level >= MatchLevel::Indentation {
        line.strip_prefix(indent).unwrap_or(line)
    } else {
        line
    }
}

/// The longest whitespace prefix shared by every non-blank line.
fn common_indent(lines: &[String]) -> String {
    let mut common: Option<&str> = None;
    for line in lines.iter().filter(|l| !l.trim().is_empty()) {
        let indent = &line[..line.len() - line.trim_start().len()];
        common = Some(match common {
            None => indent,
            Some(c) => {
                let shared = c
                    .chars()
                    .zip(indent.chars())
                    .take_while(|(a, b)| a == b)
                    .map(|(a, _)| a.len_utf8())
                    .sum();
                &c[..shared]
            }
        });
    }
    common.unwrap_or("").to_owned()
}

/// Curly quotes, dashes and special spaces as their ASCII look-alikes.
pub(crate) fn plain_punctuation(c: char) -> char {
    match c {
        '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}' | '\u{2032}' => '\'',
        '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' | '\u{2033}' => '"',
        '\u{2010}'..='\u{2015}' | '\u{2212}' => '-',
        '\u{00A0}' | '\u{2002}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' => ' ',
        other => other,
    }
}

/// The replacement for a fuzzy window: changed lines from `new` (re-indented at the
/// Indentation level), unchanged lines as they are in the file.
fn fuzzy(
    lines: &Lines<'_>,
    window: &Window,
    old: &str,
    new: &str,
    level: MatchLevel,
) -> Replacement {
    let (old_lines, old_trailing) = split_lines(old);
    let (new_lines, new_trailing) = split_lines(new);
    let out = replacement_lines(lines, window, &old_lines, &new_lines, level);
    let span = lines.span(window.first, window.count, old_trailing);
    let mut text = out.join("\n");
    if new_trailing && (old_trailing || !text.is_empty()) {
        text.push('\n');
    }
    Replacement {
        edits: vec![(span, text)],
        level,
    }
}

/// The lines that replace a window: lines equal in `old_lines` and `new_lines` keep the file's
/// text; changed and added lines come from `new_lines`, re-indented at the Indentation level.
pub(crate) fn replacement_lines(
    lines: &Lines<'_>,
    window: &Window,
    old_lines: &[&str],
    new_lines: &[&str],
    level: MatchLevel,
) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(new_lines.len());
    for op in similar::capture_diff_slices(Algorithm::Myers, old_lines, new_lines) {
        match op {
            DiffOp::Equal { old_index, len, .. } => {
                out.extend(
                    (old_index..old_index + len).map(|j| lines.line(window.first + j).to_owned()),
                );
            }
            DiffOp::Insert {
                new_index, new_len, ..
            }
            | DiffOp::Replace {
                new_index, new_len, ..
            } => {
                out.extend(
                    new_lines[new_index..new_index + new_len]
                        .iter()
                        .map(|l| reindent(l, window, level)),
                );
            }
            DiffOp::Delete { .. } => {}
        }
    }
    out
}

fn reindent(line: &str, window: &Window, level: MatchLevel) -> String {
    if level < MatchLevel::Indentation
        || window.old_indent == window.file_indent
        || line.trim().is_empty()
    {
        return line.to_owned();
    }
    match line.strip_prefix(window.old_indent.as_str()) {
        Some(rest) => format!("{}{rest}", window.file_indent),
        None => format!("{}{}", window.file_indent, line.trim_start()),
    }
}

/// Files longer than this get no closest-region search on a miss (it compares every window).
const CLOSEST_MAX_LINES: usize = 20_000;

/// The region most like `old`, with line numbers and a diff, for the not-found error.
pub(crate) fn closest(doc: &Document, lines: &Lines<'_>, old: &str) -> Option<String> {
    let (old_lines, _) = split_lines(old);
    let k = old_lines.len().max(1);
    if lines.len() == 0 || old_lines.is_empty() || lines.len() > CLOSEST_MAX_LINES {
        return None;
    }
    let k = k.min(lines.len());
    let old_trimmed: Vec<&str> = old_lines.iter().map(|l| l.trim()).collect();
    // Score each window by equal lines (trimmed), then by character similarity.
    let mut best: Option<(usize, f32, usize)> = None;
    for first in 0..=lines.len() - k {
        let equal = (0..k)
            .filter(|&j| lines.line(first + j).trim() == old_trimmed.get(j).copied().unwrap_or(""))
            .count();
        if best.is_some_and(|(e, _, _)| equal < e) {
            continue;
        }
        let window: Vec<&str> = (first..first + k).map(|i| lines.line(i)).collect();
        let ratio = similar::TextDiff::configure()
            .algorithm(Algorithm::Myers)
            .timeout(std::time::Duration::from_millis(5))
            .diff_chars(window.join("\n").as_str(), old_lines.join("\n").as_str())
            .ratio();
        if best.is_none_or(|(e, r, _)| equal > e || ratio > r) {
            best = Some((equal, ratio, first));
        }
    }
    let (equal, ratio, first) = best?;
    if equal == 0 && ratio < 0.5 {
        return None;
    }
    let _ = doc;
    let mut text = format!(
        "The closest text is at lines {}-{}:\n",
        first + 1,
        first + k
    );
    for i in first..first + k {
        let _ = writeln!(text, "{:>6}\t{}", i + 1, lines.line(i));
    }
    text.push_str("How `old_string` differs from it (- old_string, + file):\n");
    let region: Vec<&str> = (first..first + k).map(|i| lines.line(i)).collect();
    for op in similar::capture_diff_slices(Algorithm::Myers, &old_lines, &region) {
        for change in op.iter_changes(&old_lines, &region) {
            let sign = match change.tag() {
                similar::ChangeTag::Equal => ' ',
                similar::ChangeTag::Delete => '-',
                similar::ChangeTag::Insert => '+',
            };
            let _ = writeln!(text, "{sign}{}", visible_whitespace(change.value()));
        }
    }
    text.push_str("Copy the exact text from the file (read it again if it may have changed).");
    Some(text)
}

/// Makes trailing whitespace and tabs visible in the diff of a miss.
fn visible_whitespace(line: &str) -> String {
    let trimmed = line.trim_end();
    let trailing = &line[trimmed.len()..];
    if trailing.is_empty() {
        line.to_owned()
    } else {
        format!(
            "{trimmed}{}",
            trailing
                .chars()
                .map(|c| if c == '\t' { '→' } else { '·' })
                .collect::<String>()
        )
    }
}
