//! Finding `old_string` in a document: exact first, then graded fallbacks.
//!
//! Levels, tried in order:
//! 1. [`MatchLevel::Exact`]: the text as written (line endings aside).
//! 2. [`MatchLevel::TrailingWhitespace`]: lines compared without trailing whitespace.
//! 3. [`MatchLevel::Indentation`]: a uniform indentation shift is ignored; the replacement is
//!    re-indented to the file's indentation.
//! 4. [`MatchLevel::Punctuation`]: curly quotes, dashes and non-breaking spaces normalized.
//! 5. [`MatchLevel::Whitespace`]: whitespace runs inside a line collapsed or widened, and each
//!    line's indentation ignored on its own; changed lines take the indentation of the file line
//!    they replace.
//! 6. [`MatchLevel::Escapes`]: `old_string` read with its escape sequences (`\n`, `\t`, `\'`,
//!    `\"`, `\\`) as the characters they stand for.
//!
//! Levels 2-5 each add a relaxation to the one before and compare whole lines (a one-line
//! `old_string` at level 5 may match inside a line). Every fallback is used only when it finds
//! exactly one place. A match anchored on its first and last lines whose middle differs is
//! never used. The replacement changes only what differs: lines the model left unchanged
//! (equal in `old_string` and `new_string`) keep the file's exact bytes, line endings included,
//! and a changed line keeps its own ending (an exact match across lines is compared line by
//! line too, see `by_lines`).

use std::fmt::Write as _;
use std::ops::Range;

use similar::{Algorithm, DiffOp};

use super::Document;

/// How `old_string` was found.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub(crate) enum MatchLevel {
    /// Exactly as written.
    Exact,
    /// Ignoring trailing whitespace.
    TrailingWhitespace,
    /// Ignoring a uniform indentation shift.
    Indentation,
    /// With Unicode punctuation normalized.
    Punctuation,
    /// With whitespace runs and each line's indentation normalized.
    Whitespace,
    /// With escape sequences in `old_string` read as the characters they stand for.
    Escapes,
}

impl MatchLevel {
    /// Words for the result.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Self::Exact => "exact match",
            Self::TrailingWhitespace => "matched ignoring trailing whitespace",
            Self::Indentation => {
                "matched ignoring an indentation shift; the replacement was re-indented"
            }
            Self::Punctuation => {
                "matched with curly quotes, dashes and non-breaking spaces normalized"
            }
            Self::Whitespace => {
                "matched ignoring whitespace differences inside and around lines; changed lines \
                 took the indentation of the lines they replace"
            }
            Self::Escapes => {
                "matched reading the escape sequences in `old_string` (\\n, \\t, \\', \\\", \\\\) \
                 as the characters they stand for; `new_string` was written as given"
            }
        }
    }
}

/// The line-comparing fallback levels, in order.
pub(crate) const LINE_LEVELS: [MatchLevel; 4] = [
    MatchLevel::TrailingWhitespace,
    MatchLevel::Indentation,
    MatchLevel::Punctuation,
    MatchLevel::Whitespace,
];

/// One change of the normalized text: a range and what replaces it (`\n` breaks).
type Edit = (Range<usize>, String);

/// Where to replace, and with what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Replacement {
    /// Normalized ranges and their new text (`\n` breaks), ascending.
    pub edits: Vec<(Range<usize>, String)>,
    /// How the text was found.
    pub level: MatchLevel,
}

/// Why `old_string` could not be placed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum MatchError {
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
pub(crate) fn find_replacement(
    doc: &Document,
    old: &str,
    new: &str,
    replace_all: bool,
) -> Result<Replacement, MatchError> {
    let text = doc.normalized();
    if !old.is_empty()
        && let Some(found) = find_literal(doc, old, new, replace_all, MatchLevel::Exact)
    {
        return found;
    }
    let lines = Lines::of(text);
    let (old_lines, _) = split_lines(old);
    for level in LINE_LEVELS {
        if level == MatchLevel::Whitespace && !old.contains('\n') {
            // One line: it may match inside a line; whole lines are found the same way.
            if let Some(found) = find_collapsed(doc, old, new) {
                return found;
            }
            continue;
        }
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
    let unescaped = unescape(old);
    if unescaped != old
        && !unescaped.is_empty()
        && let Some(found) = find_literal(doc, &unescaped, new, replace_all, MatchLevel::Escapes)
    {
        return found;
    }
    Err(MatchError::NotFound {
        closest: closest(doc, &lines, old),
    })
}

/// `old` found literally: one place, or every place with `replace_all`. `None` when it does
/// not occur.
fn find_literal(
    doc: &Document,
    old: &str,
    new: &str,
    replace_all: bool,
    level: MatchLevel,
) -> Option<Result<Replacement, MatchError>> {
    let text = doc.normalized();
    // Overlapping occurrences count: `aa` is not unique in `aaa`.
    let hits = occurrences(text, old);
    match hits.len() {
        0 => None,
        1 => Some(Ok(literal(text, &hits, old, new, level))),
        _ if replace_all => {
            let mut disjoint: Vec<usize> = Vec::with_capacity(hits.len());
            for &hit in &hits {
                if disjoint.last().is_none_or(|&last| hit >= last + old.len()) {
                    disjoint.push(hit);
                }
            }
            Some(Ok(literal(text, &disjoint, old, new, level)))
        }
        count => {
            let lines = hits.iter().take(5).map(|&i| doc.line_of(i)).collect();
            Some(Err(MatchError::Ambiguous {
                count,
                lines,
                level,
            }))
        }
    }
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

fn literal(text: &str, hits: &[usize], old: &str, new: &str, level: MatchLevel) -> Replacement {
    let bytewise = || {
        hits.iter()
            .map(|&i| minimal_edit(i, &text[i..i + old.len()], new))
            .collect()
    };
    let (first, _) = minimal_edit(0, old, new);
    let across_lines = old[first.clone()].contains('\n')
        || new[first.start..new.len() - (old.len() - first.end)].contains('\n');
    if !across_lines {
        return Replacement {
            edits: bytewise(),
            level,
        };
    }
    // A change across lines: compared line by line, so that each line keeps its own ending
    // (see `by_lines`). Occurrences that share a line (`replace_all`) are changed bytewise.
    let mut edits = Vec::new();
    let mut last_end = None;
    for &at in hits {
        let Some((span, mut hit)) = by_lines(text, at, old.len(), new) else {
            return Replacement {
                edits: bytewise(),
                level,
            };
        };
        if last_end.is_some_and(|end| span.start < end) {
            return Replacement {
                edits: bytewise(),
                level,
            };
        }
        last_end = Some(span.end);
        edits.append(&mut hit);
    }
    Replacement { edits, level }
}

/// `old` (of `old_len` bytes at `at`) replaced by `new` as a change of whole lines: the lines it
/// touches, from the start of its first line to the break after its last, are compared with
/// what they become, as the fuzzy levels compare them. Lines left as they were keep their
/// bytes, a changed line keeps its own ending, added lines take the file's dominant one; the
/// last line is the same line before and after, so nothing beyond `old` changes. A
/// bytewise edit can give a changed line the break of a neighbour equal to another line (`x`
/// of `x\r\nsame\nsame\r\n` turned into `y`, one `same` dropped, ended with `\n`). The span
/// of lines and the edits; `None` when the change adds or removes the text's final break (the
/// bytewise edit is right then).
fn by_lines(text: &str, at: usize, old_len: usize, new: &str) -> Option<(Range<usize>, Vec<Edit>)> {
    let end = at + old_len;
    let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let stop = text[end..].find('\n').map_or(text.len(), |i| end + i + 1);
    let before = &text[start..stop];
    let after = format!("{}{new}{}", &text[start..at], &text[end..stop]);
    let (old_lines, old_trailing) = split_lines(before);
    let (new_lines, new_trailing) = split_lines(&after);
    if old_trailing != new_trailing || new_lines.is_empty() {
        return None;
    }
    // The last lines are the same line: the break after it lies beyond `old`, and stays.
    let (old_last, new_last) = (old_lines.len() - 1, new_lines.len() - 1);
    let lines = Lines::of(before);
    let window = Window {
        first: 0,
        count: old_last,
        file_indent: String::new(),
        old_indent: String::new(),
    };
    let mut edits = window_edits(
        &lines,
        &window,
        &old_lines[..old_last],
        &new_lines[..new_last],
        MatchLevel::Exact,
    );
    if old_lines[old_last] != new_lines[new_last] {
        edits.push((
            lines.ranges[old_last].clone(),
            new_lines[new_last].to_owned(),
        ));
    }
    let edits = edits
        .into_iter()
        .map(|(range, text)| (range.start + start..range.end + start, text))
        .collect();
    Some((start..stop, edits))
}

/// The edit that turns `old` (at `at`) into `new`, without the prefix and suffix they share:
/// bytes that stay the same are not rewritten (a line break among them keeps its own ending).
fn minimal_edit(at: usize, old: &str, new: &str) -> (Range<usize>, String) {
    let (a, b) = (old.as_bytes(), new.as_bytes());
    let mut prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    while !(old.is_char_boundary(prefix) && new.is_char_boundary(prefix)) {
        prefix -= 1;
    }
    let most = a.len().min(b.len()) - prefix;
    let mut suffix = a
        .iter()
        .rev()
        .zip(b.iter().rev())
        .take(most)
        .take_while(|(x, y)| x == y)
        .count();
    while !(old.is_char_boundary(a.len() - suffix) && new.is_char_boundary(b.len() - suffix)) {
        suffix -= 1;
    }
    (
        at + prefix..at + a.len() - suffix,
        new[prefix..b.len() - suffix].to_owned(),
    )
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
        for i in memchr::memchr_iter(b'\n', text.as_bytes()) {
            ranges.push(start..i);
            start = i + 1;
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

    /// Whether the text ends without a line break (and is not empty).
    pub(crate) fn open_end(&self) -> bool {
        !self.text.is_empty() && !self.text.ends_with('\n')
    }

    /// Where the lines `first..first + count` and their breaks start and end, for removing them:
    /// the last line of a text without a final newline takes the break before it instead, so
    /// the text keeps ending without one.
    fn removal(&self, first: usize, count: usize) -> Range<usize> {
        let start = self.ranges[first].start;
        let end = self
            .ranges
            .get(first + count)
            .map_or(self.text.len(), |r| r.start);
        if first + count == self.len() && self.open_end() && start > 0 {
            start - 1..end
        } else {
            start..end
        }
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

/// The form a line is compared in at a level (allocating only when something changes).
fn normalize_line(line: &str, level: MatchLevel) -> std::borrow::Cow<'_, str> {
    match level {
        MatchLevel::Exact | MatchLevel::Escapes => line.into(),
        MatchLevel::TrailingWhitespace | MatchLevel::Indentation => line.trim_end().into(),
        MatchLevel::Punctuation => line
            .trim_end()
            .chars()
            .map(plain_punctuation)
            .collect::<String>()
            .into(),
        MatchLevel::Whitespace => collapse_whitespace(line).into(),
    }
}

/// A line with punctuation made plain, its ends trimmed, and each whitespace run made one space.
fn collapse_whitespace(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut space = false;
    for c in line.chars().map(plain_punctuation) {
        if c.is_whitespace() {
            space = true;
        } else {
            if space && !out.is_empty() {
                out.push(' ');
            }
            space = false;
            out.push(c);
        }
    }
    out
}

/// Removes the common indentation at the levels that ignore a uniform shift.
fn strip_for<'a>(line: &'a str, indent: &str, level: MatchLevel) -> &'a str {
    if matches!(level, MatchLevel::Indentation | MatchLevel::Punctuation) {
        line.strip_prefix(indent).unwrap_or(line)
    } else {
        line
    }
}

/// The leading whitespace of a line.
fn indentation(line: &str) -> &str {
    &line[..line.len() - line.trim_start().len()]
}

/// The longest whitespace prefix shared by every non-blank line.
fn common_indent(lines: &[String]) -> String {
    let mut common: Option<&str> = None;
    for line in lines.iter().filter(|l| !l.trim().is_empty()) {
        let indent = indentation(line);
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

/// The replacement for a fuzzy window of whole lines.
fn fuzzy(
    lines: &Lines<'_>,
    window: &Window,
    old: &str,
    new: &str,
    level: MatchLevel,
) -> Replacement {
    let (old_lines, mut old_trailing) = split_lines(old);
    let (new_lines, mut new_trailing) = split_lines(new);
    if window.first + window.count == lines.len() && lines.open_end() && old_trailing {
        // `old` ended with a newline the file does not have: it matched the end of the file,
        // and the file keeps ending without a newline.
        old_trailing = false;
        new_trailing = false;
    }
    if new_lines.is_empty() && !old_trailing {
        // Lines without their last break become nothing: the breaks around them stay, as an
        // exact match of the same text would leave them.
        return Replacement {
            edits: vec![(lines.span(window.first, window.count, false), String::new())],
            level,
        };
    }
    if old_trailing == new_trailing {
        return Replacement {
            edits: window_edits(lines, window, &old_lines, &new_lines, level),
            level,
        };
    }
    // The change adds or removes the break after the window: replace the window whole.
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

/// Edits that turn the window's lines into `new_lines`, touching only what differs: lines
/// equal in `old_lines` and `new_lines` are not rewritten, a changed line keeps its own ending,
/// and added lines (with `\n` breaks) take the file's dominant one. Ascending, not overlapping.
pub(crate) fn window_edits(
    lines: &Lines<'_>,
    window: &Window,
    old_lines: &[&str],
    new_lines: &[&str],
    level: MatchLevel,
) -> Vec<(Range<usize>, String)> {
    window_edits_kept(lines, window, old_lines, new_lines, level, &[])
}

/// [`window_edits`] where some lines are known to stay: `kept` holds ascending pairs (index
/// in `old_lines`, index in `new_lines`) of the same line before and after (a patch's context
/// lines). Only the runs between them are compared, so a kept line keeps its own bytes even
/// when a neighbour is equal to it: of `same\r\nsame\n` with `-same` then ` same`, the first
/// line goes and the second stays, `\n` and all.
pub(crate) fn window_edits_kept(
    lines: &Lines<'_>,
    window: &Window,
    old_lines: &[&str],
    new_lines: &[&str],
    level: MatchLevel,
    kept: &[(usize, usize)],
) -> Vec<(Range<usize>, String)> {
    let mut edits = Vec::new();
    let ends = kept
        .iter()
        .copied()
        .chain(std::iter::once((old_lines.len(), new_lines.len())));
    let (mut old_from, mut new_from) = (0, 0);
    for (old_to, new_to) in ends {
        let ops = similar::capture_diff_slices(
            Algorithm::Myers,
            &old_lines[old_from..old_to],
            &new_lines[new_from..new_to],
        );
        let change = Change {
            lines,
            window,
            old_lines,
            new_lines,
            level,
        };
        for op in ops {
            change.edits_of(op, old_from, new_from, &mut edits);
        }
        (old_from, new_from) = (old_to + 1, new_to + 1);
    }
    edits
}

/// What [`window_edits_kept`] turns into edits, one diff operation at a time.
struct Change<'a, 'b> {
    lines: &'a Lines<'b>,
    window: &'a Window,
    old_lines: &'a [&'a str],
    new_lines: &'a [&'a str],
    level: MatchLevel,
}

impl Change<'_, '_> {
    /// The edits of one operation of a diff between `old_lines[old_from..]` and
    /// `new_lines[new_from..]` (its indices are relative to those).
    fn edits_of(
        &self,
        op: DiffOp,
        old_from: usize,
        new_from: usize,
        edits: &mut Vec<(Range<usize>, String)>,
    ) {
        let Self {
            lines,
            window,
            old_lines,
            new_lines,
            level,
        } = *self;
        let line_at = |j: usize| window.first + j;
        let reindent =
            |line: &str, anchor: usize| reindent(line, lines, window, old_lines, anchor, level);
        match op {
            DiffOp::Equal { .. } => {}
            DiffOp::Delete {
                old_index, old_len, ..
            } => edits.push((
                lines.removal(line_at(old_from + old_index), old_len),
                String::new(),
            )),
            DiffOp::Insert {
                old_index,
                new_index,
                new_len,
            } => {
                let (old_index, new_index) = (old_from + old_index, new_from + new_index);
                let anchor = old_index.min(old_lines.len().saturating_sub(1));
                let added: Vec<String> = new_lines[new_index..new_index + new_len]
                    .iter()
                    .map(|l| reindent(l, anchor))
                    .collect();
                edits.push(insertion(lines, line_at(old_index), &added));
            }
            DiffOp::Replace {
                old_index,
                old_len,
                new_index,
                new_len,
            } => {
                let (old_index, new_index) = (old_from + old_index, new_from + new_index);
                let paired = old_len.min(new_len);
                for j in 0..paired {
                    let mut text = reindent(new_lines[new_index + j], old_index + j);
                    if j + 1 == paired && new_len > paired {
                        // The extra new lines go after the last replaced line, before its break.
                        for extra in &new_lines[new_index + paired..new_index + new_len] {
                            text.push('\n');
                            text.push_str(&reindent(extra, old_index + j));
                        }
                    }
                    edits.push((lines.ranges[line_at(old_index + j)].clone(), text));
                }
                if old_len > paired {
                    edits.push((
                        lines.removal(line_at(old_index + paired), old_len - paired),
                        String::new(),
                    ));
                }
            }
        }
    }
}

/// Lines inserted before line `at` (or at the end): each followed by a break, except at the
/// end of a text that has no final newline, where the break goes before them.
pub(crate) fn insertion(lines: &Lines<'_>, at: usize, added: &[String]) -> (Range<usize>, String) {
    if at < lines.len() {
        let start = lines.ranges[at].start;
        return (
            start..start,
            added.iter().map(|l| format!("{l}\n")).collect(),
        );
    }
    let end = lines.text.len();
    if lines.open_end() {
        let text = added.iter().map(|l| format!("\n{l}")).collect();
        (end..end, text)
    } else {
        (end..end, added.iter().map(|l| format!("{l}\n")).collect())
    }
}

/// The lines that replace a window, whole: lines equal in `old_lines` and `new_lines` keep the
/// file's text; changed and added lines come from `new_lines`, re-indented as the level says.
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
                old_index,
                new_index,
                new_len,
            }
            | DiffOp::Replace {
                old_index,
                new_index,
                new_len,
                ..
            } => {
                let anchor = old_index.min(old_lines.len().saturating_sub(1));
                out.extend(
                    new_lines[new_index..new_index + new_len]
                        .iter()
                        .map(|l| reindent(l, lines, window, old_lines, anchor, level)),
                );
            }
            DiffOp::Delete { .. } => {}
        }
    }
    out
}

/// A new line as it goes into the file. At the Indentation and Punctuation levels the window's
/// indentation shift is applied; at the Whitespace level the line takes the indentation of the
/// file line that `old_lines[anchor]` matched, when it starts with that old line's indentation.
fn reindent(
    line: &str,
    lines: &Lines<'_>,
    window: &Window,
    old_lines: &[&str],
    anchor: usize,
    level: MatchLevel,
) -> String {
    if line.trim().is_empty() {
        return line.to_owned();
    }
    match level {
        MatchLevel::Exact | MatchLevel::TrailingWhitespace | MatchLevel::Escapes => line.to_owned(),
        MatchLevel::Indentation | MatchLevel::Punctuation => {
            if window.old_indent == window.file_indent {
                return line.to_owned();
            }
            match line.strip_prefix(window.old_indent.as_str()) {
                Some(rest) => format!("{}{rest}", window.file_indent),
                None => format!("{}{}", window.file_indent, line.trim_start()),
            }
        }
        MatchLevel::Whitespace => {
            let Some(old) = old_lines.get(anchor) else {
                return line.to_owned();
            };
            // An anchor that is blank says nothing about indentation: use the nearest
            // non-blank line before it, or after it.
            let anchor = if old.trim().is_empty() {
                (0..anchor)
                    .rev()
                    .chain(anchor + 1..old_lines.len())
                    .find(|&j| !old_lines[j].trim().is_empty())
                    .unwrap_or(anchor)
            } else {
                anchor
            };
            let old_indent = indentation(old_lines[anchor]);
            let file_indent = indentation(lines.line(window.first + anchor));
            match line.strip_prefix(old_indent) {
                Some(rest) => format!("{file_indent}{rest}"),
                None => line.to_owned(),
            }
        }
    }
}

/// A one-line `old` at the Whitespace level: searched with whitespace runs collapsed, inside
/// lines too. `None` when it does not occur.
fn find_collapsed(doc: &Document, old: &str, new: &str) -> Option<Result<Replacement, MatchError>> {
    let needle = collapse_whitespace(old);
    if needle.is_empty() {
        return None;
    }
    let text = doc.normalized();
    let (collapsed, map) = collapse_text(text);
    let hits = occurrences(&collapsed, &needle);
    match hits.len() {
        0 => None,
        1 => {
            let start = map[hits[0]];
            let last = hits[0] + needle.len() - 1;
            // `last` may sit inside a character: its first byte maps to the file character.
            let last_start = (0..=last).rev().find(|&i| collapsed.is_char_boundary(i))?;
            let end = map[last_start] + text[map[last_start]..].chars().next()?.len_utf8();
            // Whitespace the model put around `old` was not matched; take the same off `new`.
            let lead = &old[..old.len() - old.trim_start().len()];
            let trail = &old[old.trim_end().len()..];
            let new = new.strip_prefix(lead).unwrap_or(new);
            let new = new.strip_suffix(trail).unwrap_or(new);
            Some(Ok(Replacement {
                edits: vec![minimal_edit(start, &text[start..end], new)],
                level: MatchLevel::Whitespace,
            }))
        }
        count => {
            let lines = hits.iter().take(5).map(|&i| doc.line_of(map[i])).collect();
            Some(Err(MatchError::Ambiguous {
                count,
                lines,
                level: MatchLevel::Whitespace,
            }))
        }
    }
}

/// The text with every line collapsed as [`collapse_whitespace`] does (breaks kept), and for
/// each byte of the result the offset of the text byte it came from.
fn collapse_text(text: &str) -> (String, Vec<usize>) {
    let mut out = String::with_capacity(text.len());
    let mut map = Vec::with_capacity(text.len());
    for (line_start, line) in line_starts(text) {
        let mut space: Option<usize> = None;
        let mut started = false;
        for (i, c) in line.char_indices() {
            let plain = plain_punctuation(c);
            if plain.is_whitespace() {
                if started && space.is_none() {
                    space = Some(line_start + i);
                }
                continue;
            }
            if let Some(at) = space.take() {
                out.push(' ');
                map.push(at);
            }
            started = true;
            let before = out.len();
            out.push(plain);
            map.extend(std::iter::repeat_n(line_start + i, out.len() - before));
        }
        if line_start + line.len() < text.len() {
            out.push('\n');
            map.push(line_start + line.len());
        }
    }
    (out, map)
}

/// Each line of `text` (without its break) and where it starts.
fn line_starts(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut start = 0;
    text.split('\n').map(move |line| {
        let at = start;
        start += line.len() + 1;
        (at, line)
    })
}

/// `text` with its escape sequences read as the characters they stand for: `\n`, `\t`, `\r`,
/// `\'`, `\"`, `` \` ``, `\$`, `\\` and a backslash before a line break. Other backslashes stay.
pub(crate) fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let next = chars.clone().next();
        let replaced = match next {
            Some('n') => Some('\n'),
            Some('t') => Some('\t'),
            Some('r') => Some('\r'),
            Some(q @ ('\'' | '"' | '`' | '$' | '\\' | '\n')) => Some(q),
            _ => None,
        };
        match replaced {
            Some(r) => {
                out.push(r);
                chars.next();
            }
            None => out.push('\\'),
        }
    }
    out
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
