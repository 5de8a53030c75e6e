//! Applying the hunks of one `Update File` to a document.

use crate::text::{Document, Lines, MatchLevel, Window, closest, find_windows, replacement_lines};

use super::Hunk;

/// A hunk that could not be placed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("hunk {hunk} (patch line {patch_line}): {message}")]
pub struct HunkError {
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
    for level in [
        MatchLevel::Exact,
        MatchLevel::TrailingWhitespace,
        MatchLevel::Indentation,
        MatchLevel::Punctuation,
    ] {
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

/// Applies hunks in order. Returns the new text (in the document's style) and how each hunk
/// matched.
pub fn apply_hunks(doc: &Document, hunks: &[Hunk]) -> Result<(String, Vec<MatchLevel>), HunkError> {
    let text = doc.normalized();
    let lines = Lines::of(text);
    let mut position = 0;
    let mut edits: Vec<(std::ops::Range<usize>, String)> = Vec::with_capacity(hunks.len());
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
        let old = hunk.old_lines();
        let new = hunk.new_lines();
        if old.is_empty() {
            // Only additions: after the anchor, or at the end of the file.
            let at = if hunk.anchor.is_some() && !hunk.end_of_file {
                position
            } else {
                lines.len()
            };
            let mut insert = new.join("\n");
            let range = lines.span(at, 0, false);
            if at == lines.len() && !text.is_empty() && !text.ends_with('\n') {
                insert.insert(0, '\n');
            } else {
                insert.push('\n');
            }
            edits.push((range, insert));
            levels.push(MatchLevel::Exact);
            position = at;
            continue;
        }
        let (window, level) = match seek(&lines, position, &old, hunk.end_of_file) {
            Seek::Found(window, level) => (window, level),
            Seek::Ambiguous(at, level) => {
                let at: Vec<String> = at.iter().map(ToString::to_string).collect();
                return Err(fail(format!(
                    "its lines match several places ({}, lines {}); add context lines or an `@@` line to tell them apart",
                    level.describe(),
                    at.join(", ")
                )));
            }
            Seek::NotFound => {
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
                let hint = closest(doc, &lines, &old.join("\n")).unwrap_or_else(|| {
                    String::from("Read the file and copy the context lines exactly.")
                });
                return Err(fail(format!(
                    "its context and `-` lines were not found{where_}{end}. {hint}"
                )));
            }
        };
        let replacement = replacement_lines(&lines, &window, &old, &new, level);
        let span = lines.span(window.first, window.count, true);
        let takes_newline = span.end > lines.ranges[window.first + window.count - 1].end;
        let mut text = replacement.join("\n");
        if takes_newline && !replacement.is_empty() {
            text.push('\n');
        }
        edits.push((span, text));
        levels.push(level);
        position = window.first + window.count;
    }
    // Edits must be in file order and apart, or splicing them would corrupt the text.
    if let Some(i) = edits
        .windows(2)
        .position(|pair| pair[1].0.start < pair[0].0.end)
    {
        let hunk = &hunks[i + 1];
        return Err(HunkError {
            hunk: i + 2,
            patch_line: hunk.patch_line,
            message: String::from(
                "it overlaps the hunk before it or comes before it in the file; order hunks as in the file",
            ),
        });
    }
    Ok((doc.replace(&edits), levels))
}
