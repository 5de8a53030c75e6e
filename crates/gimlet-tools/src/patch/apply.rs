//! Applying the hunks of one `Update File` to a document.

use std::ops::Range;

use crate::text::{
    Document, LINE_LEVELS, Lines, MatchLevel, Window, closest, find_windows, insertion,
    window_edits_kept,
};

use super::{Hunk, HunkLine};

/// A hunk that could not be placed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("hunk {hunk} (patch line {patch_line}): {message}")]
pub(crate) struct HunkError {
    /// The 1-based hunk number within its file.
    pub hunk: usize,
    /// Where the hunk starts in the patch.
    pub patch_line: usize,
    /// What went wrong and what to do.
    pub message: String,
}

enum Seek {
    Found(Window, MatchLevel),
    NotFound,
    Ambiguous(Vec<usize>, MatchLevel),
}

/// Finds `old` at or after line `from`. An exact match takes the first place after `from`
/// (hunks are in file order, as Codex applies them); a fallback level only a single candidate.
fn seek(lines: &Lines<'_>, from: usize, old: &[&str], end_of_file: bool) -> Seek {
    for level in std::iter::once(MatchLevel::Exact).chain(LINE_LEVELS) {
        let mut windows = find_windows(lines, from, old, level);
        if end_of_file {
            windows.retain(|w| w.first + w.count == lines.len());
        }
        match (windows.len(), level) {
            (0, _) => {}
            (1, _) | (_, MatchLevel::Exact) => return Seek::Found(windows.remove(0), level),
            (_, level) => {
                return Seek::Ambiguous(
                    windows.iter().take(5).map(|w| w.first + 1).collect(),
                    level,
                );
            }
        }
    }
    Seek::NotFound
}

/// Why a hunk was not found, with the closest text of the file.
fn not_found(
    doc: &Document,
    lines: &Lines<'_>,
    hunk: &Hunk,
    position: usize,
    old: &[&str],
) -> String {
    let where_ = if position > 0 {
        format!(" after line {position}")
    } else {
        String::new()
    };
    let end = if hunk.end_of_file {
        " at the end of the file"
    } else {
        ""
    };
    let hint = closest(doc, lines, &old.join("\n"))
        .unwrap_or_else(|| String::from("Read the file and copy the context lines exactly."));
    format!("its context and `-` lines were not found{where_}{end}. {hint}")
}

/// The hunk's context lines as (index among its old lines, index among its new lines), those
/// within the first `old_len` and `new_len` (a dropped soft tail is left out): the lines that
/// stay where they are, each with its own bytes.
fn context_pairs(hunk: &Hunk, old_len: usize, new_len: usize) -> Vec<(usize, usize)> {
    let (mut old, mut new) = (0, 0);
    let mut pairs = Vec::new();
    for line in &hunk.lines {
        match line {
            HunkLine::Context(_) => {
                if old < old_len && new < new_len {
                    pairs.push((old, new));
                }
                old += 1;
                new += 1;
            }
            HunkLine::Remove(_) => old += 1,
            HunkLine::Add(_) => new += 1,
        }
    }
    pairs
}

/// Applies hunks in order. Returns the new text (in the document's style: context lines and
/// other untouched lines keep their own endings, also beside equal lines, a changed line its
/// own, added lines take the dominant one) and how each hunk matched.
pub(crate) fn apply_hunks(
    doc: &Document,
    hunks: &[Hunk],
) -> Result<(String, Vec<MatchLevel>), HunkError> {
    let text = doc.normalized();
    let lines = Lines::of(text);
    let mut position = 0;
    // Each edit with the hunk it comes from.
    let mut edits: Vec<(usize, Range<usize>, String)> = Vec::new();
    let mut levels = Vec::with_capacity(hunks.len());
    for (n, hunk) in hunks.iter().enumerate() {
        let fail = |message: String| HunkError {
            hunk: n + 1,
            patch_line: hunk.patch_line,
            message,
        };
        if let Some(anchor) = &hunk.anchor {
            match seek(&lines, position, &[anchor.as_str()], false) {
                Seek::Found(window, _) => position = window.first + 1,
                Seek::NotFound | Seek::Ambiguous(..) => {
                    return Err(fail(format!(
                        "the `@@ {anchor}` line was not found after line {position}; check it against the file"
                    )));
                }
            }
        }
        let mut old = hunk.old_lines();
        let mut new = hunk.new_lines();
        if old.is_empty() {
            // Only additions: after the anchor, or at the end of the file. An addition at the
            // end does not move the place later hunks are looked for from (Codex's rule).
            let at = if hunk.anchor.is_some() && !hunk.end_of_file {
                position
            } else {
                lines.len()
            };
            let added: Vec<String> = new.iter().map(|l| (*l).to_owned()).collect();
            let (range, insert) = insertion(&lines, at, &added);
            edits.push((n, range, insert));
            levels.push(MatchLevel::Exact);
            continue;
        }
        let mut found = seek(&lines, position, &old, hunk.end_of_file);
        if matches!(found, Seek::NotFound) && hunk.soft_tail > 0 && old.len() > hunk.soft_tail {
            // Blank lines the model left before the next hunk or the end, and the file does not
            // have: they are the last context lines, so the last lines of `old` and `new`.
            let keep_old = old.len() - hunk.soft_tail;
            let again = seek(&lines, position, &old[..keep_old], hunk.end_of_file);
            if !matches!(again, Seek::NotFound) {
                found = again;
                old.truncate(keep_old);
                new.truncate(new.len() - hunk.soft_tail);
            }
        }
        let (window, level) = match found {
            Seek::Found(window, level) => (window, level),
            Seek::Ambiguous(at, level) => {
                let at: Vec<String> = at.iter().map(ToString::to_string).collect();
                return Err(fail(format!(
                    "its lines match several places ({}, lines {}); add context lines or an `@@` line to tell them apart",
                    level.describe(),
                    at.join(", ")
                )));
            }
            Seek::NotFound => return Err(fail(not_found(doc, &lines, hunk, position, &old))),
        };
        let kept = context_pairs(hunk, old.len(), new.len());
        edits.extend(
            window_edits_kept(&lines, &window, &old, &new, level, &kept)
                .into_iter()
                .map(|(range, text)| (n, range, text)),
        );
        levels.push(level);
        position = window.first + window.count;
    }
    // Edits must be apart, or splicing them would corrupt the text. Additions at the end may
    // come before hunks that change earlier lines, so the edits are put in file order first.
    edits.sort_by_key(|(_, range, _)| range.start);
    if let Some(pair) = edits
        .windows(2)
        .find(|pair| pair[1].1.start < pair[0].1.end)
    {
        let n = pair[0].0.max(pair[1].0);
        return Err(HunkError {
            hunk: n + 1,
            patch_line: hunks[n].patch_line,
            message: String::from(
                "it overlaps another hunk; each line may be changed by one hunk only",
            ),
        });
    }
    let edits: Vec<(Range<usize>, String)> = edits
        .into_iter()
        .map(|(_, range, text)| (range, text))
        .collect();
    Ok((doc.replace(&edits), levels))
}
