//! The patch envelope Codex models emit, parsed into file operations.
//!
//! ```text
//! *** Begin Patch
//! *** Add File: docs/new.md
//! +first line
//! *** Update File: src/lib.rs
//! *** Move to: src/core.rs
//! @@ fn main() {
//!      let a = 1;
//! -    let b = 2;
//! +    let b = 3;
//! *** Delete File: old.txt
//! *** End Patch
//! ```
//!
//! The parser accepts what Codex's own parser accepts, and a little more where the meaning is
//! still plain (see [`parse`]); it is strict elsewhere: every error names the patch line and
//! what was expected.

mod apply;

pub(crate) use apply::apply_hunks;

/// A parsed patch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Patch {
    /// The operations, in order.
    pub ops: Vec<FileOp>,
}

/// One file operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FileOp {
    /// Create a file.
    Add {
        /// Its path.
        path: String,
        /// Its content (`\n` line breaks, ending with one).
        content: String,
    },
    /// Remove a file.
    Delete {
        /// Its path.
        path: String,
    },
    /// Change a file, and perhaps move it.
    Update {
        /// Its path.
        path: String,
        /// Where it moves to.
        move_to: Option<String>,
        /// The changes, in file order.
        hunks: Vec<Hunk>,
    },
}

impl FileOp {
    /// The path the operation reads or removes.
    pub(crate) fn path(&self) -> &str {
        match self {
            Self::Add { path, .. } | Self::Delete { path } | Self::Update { path, .. } => path,
        }
    }
}

/// One `@@` hunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Hunk {
    /// The text after `@@`: a line to find first (e.g. a function signature).
    pub anchor: Option<String>,
    /// The hunk's lines.
    pub lines: Vec<HunkLine>,
    /// `*** End of File` closed the hunk: it must match at the end of the file.
    pub end_of_file: bool,
    /// Where the hunk starts in the patch (1-based), for messages.
    pub patch_line: usize,
    /// How many of the last lines are blank lines written without their leading space (blank
    /// lines before the next hunk or `*** End Patch`): context when the file has them there,
    /// dropped when it does not.
    pub soft_tail: usize,
}

impl Hunk {
    /// The lines the file has now (context and removed).
    pub(crate) fn old_lines(&self) -> Vec<&str> {
        self.lines
            .iter()
            .filter_map(|l| match l {
                HunkLine::Context(t) | HunkLine::Remove(t) => Some(t.as_str()),
                HunkLine::Add(_) => None,
            })
            .collect()
    }

    /// The lines it will have (context and added).
    pub(crate) fn new_lines(&self) -> Vec<&str> {
        self.lines
            .iter()
            .filter_map(|l| match l {
                HunkLine::Context(t) | HunkLine::Add(t) => Some(t.as_str()),
                HunkLine::Remove(_) => None,
            })
            .collect()
    }
}

/// One line of a hunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HunkLine {
    /// Unchanged.
    Context(String),
    /// Removed.
    Remove(String),
    /// Added.
    Add(String),
}

/// A patch that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid patch, line {line}: {message}")]
pub(crate) struct ParseError {
    /// The 1-based patch line.
    pub line: usize,
    /// What was wrong and what was expected.
    pub message: String,
}

const BEGIN: &str = "*** Begin Patch";
const END: &str = "*** End Patch";
const ADD: &str = "*** Add File:";
const DELETE: &str = "*** Delete File:";
const UPDATE: &str = "*** Update File:";
const MOVE: &str = "*** Move to:";
const END_OF_FILE: &str = "*** End of File";

/// Commands a here-doc wrapper may name (`apply_patch <<'EOF'`, `cat <<"EOF"`).
const WRAPPER_COMMANDS: [&str; 4] = ["", "apply_patch", "applypatch", "cat"];

fn error(line: usize, message: impl Into<String>) -> ParseError {
    ParseError {
        line,
        message: message.into(),
    }
}

/// Parses a patch.
///
/// Accepted besides the plain envelope (Codex's parser accepts the same, unless said):
/// - whitespace before or after the markers (`  *** Update File: x`, ` *** End Patch `) and
///   blank lines around and between operations and hunks;
/// - a here-doc wrapper: a first line `<<EOF`, `<<'EOF'`, `<<"EOF"`, with a command before it
///   (`apply_patch`, `applypatch`, `cat`) or a `| apply_patch` after it, and the delimiter as
///   the last line. Mismatched quotes (`<<"EOF'`), which Codex refuses, and a missing closing
///   delimiter are accepted too: the body is always taken literally, as a quoted here-doc would
///   be. A wrapper that does more (`cd dir && apply_patch <<EOF`) is refused, since its paths
///   would mean something else;
/// - a first hunk without `@@`; `@@ anchor @@`; blank context lines without their leading space;
///   blank lines after `*** End of File`; blank lines inside an added file (as empty lines);
/// - CRLF line breaks.
pub(crate) fn parse(text: &str) -> Result<Patch, ParseError> {
    let all: Vec<&str> = text.lines().collect();
    let (offset, lines) = envelope(&all)?;
    let number = |i: usize| offset + i + 1;
    let mut i = 0;
    let mut ops = Vec::new();
    while let Some(line) = lines.get(i) {
        let trimmed = line.trim();
        if trimmed.is_empty() {
            i += 1;
            continue;
        }
        if let Some(path) = trimmed.strip_prefix(ADD) {
            let path = file_path(path, number(i))?;
            i += 1;
            let mut content = String::new();
            let mut blanks = 0;
            while let Some(line) = lines.get(i) {
                if let Some(text) = line.strip_prefix('+') {
                    // Blank lines between added lines are empty lines that lost their `+`.
                    content.extend(std::iter::repeat_n('\n', blanks));
                    blanks = 0;
                    content.push_str(text);
                    content.push('\n');
                } else if line.trim().is_empty() {
                    blanks += 1;
                } else if is_marker(line) {
                    break;
                } else {
                    return Err(error(
                        number(i),
                        format!("lines of an added file start with `+`; got `{line}`"),
                    ));
                }
                i += 1;
            }
            ops.push(FileOp::Add { path, content });
        } else if let Some(path) = trimmed.strip_prefix(DELETE) {
            ops.push(FileOp::Delete {
                path: file_path(path, number(i))?,
            });
            i += 1;
        } else if let Some(path) = trimmed.strip_prefix(UPDATE) {
            let path = file_path(path, number(i))?;
            let start = i;
            i += 1;
            let mut move_to = None;
            if let Some(dest) = lines.get(i).and_then(|l| l.trim().strip_prefix(MOVE)) {
                move_to = Some(file_path(dest, number(i))?);
                i += 1;
            }
            let (hunks, next) = parse_hunks(lines, i, offset)?;
            i = next;
            if hunks.is_empty() && move_to.is_none() {
                return Err(error(
                    number(start),
                    format!(
                        "`{UPDATE} {path}` has no hunks; add `@@` hunks or remove the operation"
                    ),
                ));
            }
            ops.push(FileOp::Update {
                path,
                move_to,
                hunks,
            });
        } else if trimmed == END {
            // An earlier end marker: the patch went on after it.
            let after = (i + 1..lines.len())
                .find(|&j| !lines[j].trim().is_empty())
                .unwrap_or(i + 1);
            return Err(error(number(after), format!("nothing may follow `{END}`")));
        } else {
            return Err(error(
                number(i),
                format!("expected `{ADD}`, `{DELETE}`, `{UPDATE}` or `{END}`; got `{trimmed}`"),
            ));
        }
    }
    if ops.is_empty() {
        return Err(error(offset, "the patch has no file operations"));
    }
    Ok(Patch { ops })
}

/// A line that starts an operation or ends the patch (whitespace around it allowed).
fn is_marker(line: &str) -> bool {
    let line = line.trim();
    [ADD, DELETE, UPDATE, END]
        .iter()
        .any(|m| line.starts_with(m))
}

/// Finds the envelope: the lines between `*** Begin Patch` and the last `*** End Patch`, and
/// the index of the first of them. A here-doc wrapper and blank lines around are dropped.
fn envelope<'a>(all: &'a [&'a str]) -> Result<(usize, &'a [&'a str]), ParseError> {
    let non_blank = |range: std::ops::Range<usize>| {
        let mut range = range;
        range.find(|&i| !all[i].trim().is_empty())
    };
    let Some(first) = non_blank(0..all.len()) else {
        return Err(error(1, format!("a patch starts with `{BEGIN}`")));
    };
    let mut begin = first;
    let mut delimiter = None;
    if all[first].trim() != BEGIN {
        delimiter = heredoc_opener(all[first].trim(), first + 1)?;
        if delimiter.is_some() {
            begin = non_blank(first + 1..all.len()).unwrap_or(all.len());
        }
        if all.get(begin).map(|l| l.trim()) != Some(BEGIN) {
            let got = all.get(begin).map_or("", |l| l.trim());
            return Err(error(
                begin + 1,
                format!("a patch starts with `{BEGIN}`; got `{got}`"),
            ));
        }
    }
    let mut last = (begin + 1..all.len())
        .rev()
        .find(|&i| !all[i].trim().is_empty());
    if let (Some(word), Some(end)) = (delimiter, last)
        && all[end].trim() == word
    {
        last = (begin + 1..end).rev().find(|&i| !all[i].trim().is_empty());
    }
    match last {
        Some(end) if all[end].trim() == END => Ok((begin + 1, &all[begin + 1..end])),
        Some(end) => {
            if let Some(earlier) = (begin + 1..end).rev().find(|&i| all[i].trim() == END) {
                let after = non_blank(earlier + 1..all.len()).unwrap_or(end);
                return Err(error(after + 1, format!("nothing may follow `{END}`")));
            }
            Err(error(
                all.len() + 1,
                format!("the patch ends without `{END}`"),
            ))
        }
        None => Err(error(
            all.len() + 1,
            format!("the patch ends without `{END}`"),
        )),
    }
}

/// The delimiter word of a here-doc opener such as `apply_patch <<'EOF'`, `cat <<"EOF"`,
/// `<<EOF` or `cat <<'EOF' | apply_patch`; `None` when the line is no here-doc opener.
fn heredoc_opener(line: &str, number: usize) -> Result<Option<&str>, ParseError> {
    let Some(at) = line.find("<<") else {
        return Ok(None);
    };
    let command = line[..at].trim();
    let rest = line[at + 2..].strip_prefix('-').unwrap_or(&line[at + 2..]);
    let rest = rest.trim_start();
    let rest = rest.strip_prefix(['\'', '"']).unwrap_or(rest);
    let word_len = rest
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    if word_len == 0 {
        return Ok(None);
    }
    let word = &rest[..word_len];
    let after = rest[word_len..]
        .strip_prefix(['\'', '"'])
        .unwrap_or(&rest[word_len..]);
    let after: String = after.split_whitespace().collect::<Vec<_>>().join(" ");
    let piped = after.is_empty() || after == "| apply_patch" || after == "| applypatch";
    if WRAPPER_COMMANDS.contains(&command) && piped {
        return Ok(Some(word));
    }
    Err(error(
        number,
        format!(
            "the patch is wrapped in a shell command (`{line}`) that does more than pass it on; \
             send only the patch, from `{BEGIN}` to `{END}` (paths are relative to the first \
             root folder; a `cd` in a wrapper is not applied)"
        ),
    ))
}

fn file_path(text: &str, line: usize) -> Result<String, ParseError> {
    let path = text.trim();
    if path.is_empty() {
        return Err(error(line, "the file path is empty"));
    }
    Ok(path.to_owned())
}

/// Hunks of one `Update File`, up to the next operation.
fn parse_hunks(
    lines: &[&str],
    mut i: usize,
    offset: usize,
) -> Result<(Vec<Hunk>, usize), ParseError> {
    let number = |i: usize| offset + i + 1;
    let mut hunks: Vec<Hunk> = Vec::new();
    let new_hunk = |anchor: Option<String>, line: usize| Hunk {
        anchor,
        lines: Vec::new(),
        end_of_file: false,
        patch_line: line,
        soft_tail: 0,
    };
    while let Some(line) = lines.get(i) {
        if line.starts_with("***") {
            if line.trim_end() != END_OF_FILE {
                break;
            }
            match hunks.last_mut() {
                Some(hunk) if !hunk.lines.is_empty() => hunk.end_of_file = true,
                _ => {
                    return Err(error(
                        number(i),
                        format!("`{END_OF_FILE}` ends a hunk, but no hunk lines come before it"),
                    ));
                }
            }
            i += 1;
            continue;
        }
        if let Some(anchor) = line.strip_prefix("@@") {
            drop_if_only_blank(&mut hunks);
            let anchor = anchor.trim();
            let anchor = anchor.strip_suffix("@@").map_or(anchor, str::trim);
            hunks.push(new_hunk(
                (!anchor.is_empty()).then(|| anchor.to_owned()),
                number(i),
            ));
            i += 1;
            continue;
        }
        if hunks.is_empty() {
            // Codex accepts a first hunk without its `@@` line.
            hunks.push(new_hunk(None, number(i)));
        }
        let Some(hunk) = hunks.last_mut() else { break };
        let blank = line.trim().is_empty() && !line.starts_with(' ');
        if hunk.end_of_file {
            if blank {
                i += 1;
                continue;
            }
            return Err(error(
                number(i),
                format!("`{END_OF_FILE}` ends a hunk; start a new one with `@@`"),
            ));
        }
        let parsed = match line.chars().next() {
            Some(' ') => HunkLine::Context(line[1..].to_owned()),
            Some('-') => HunkLine::Remove(line[1..].to_owned()),
            Some('+') => HunkLine::Add(line[1..].to_owned()),
            // A blank context line whose leading space was lost.
            _ if blank => HunkLine::Context(String::new()),
            Some(_) | None => {
                return Err(error(
                    number(i),
                    format!(
                        "hunk lines start with ` ` (context), `-` (remove) or `+` (add); got `{line}`"
                    ),
                ));
            }
        };
        hunk.soft_tail = if blank { hunk.soft_tail + 1 } else { 0 };
        hunk.lines.push(parsed);
        i += 1;
    }
    drop_if_only_blank(&mut hunks);
    if let Some(empty) = hunks.iter().find(|h| h.lines.is_empty()) {
        return Err(error(empty.patch_line, "this hunk has no lines"));
    }
    Ok((hunks, i))
}

/// Drops the last hunk when it holds only blank lines without their space (blank lines
/// between `*** Update File` and the first `@@`, or between hunks): it says nothing.
fn drop_if_only_blank(hunks: &mut Vec<Hunk>) {
    if hunks
        .last()
        .is_some_and(|h| h.anchor.is_none() && !h.lines.is_empty() && h.soft_tail == h.lines.len())
    {
        hunks.pop();
    }
}

#[cfg(test)]
#[path = "patch_tests.rs"]
mod tests;
