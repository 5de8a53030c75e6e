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
//! The parser is as lenient as Codex's where models are sloppy (a first hunk without `@@`,
//! blank context lines without their leading space, a heredoc wrapper) and strict elsewhere:
//! every error names the patch line and what was expected.

mod apply;

pub use apply::{HunkError, apply_hunks};

/// A parsed patch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Patch {
    /// The operations, in order.
    pub ops: Vec<FileOp>,
}

/// One file operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileOp {
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
    pub fn path(&self) -> &str {
        match self {
            Self::Add { path, .. } | Self::Delete { path } | Self::Update { path, .. } => path,
        }
    }
}

/// One `@@` hunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hunk {
    /// The text after `@@`: a line to find first (e.g. a function signature).
    pub anchor: Option<String>,
    /// The hunk's lines.
    pub lines: Vec<HunkLine>,
    /// `*** End of File` closed the hunk: it must match at the end of the file.
    pub end_of_file: bool,
    /// Where the hunk starts in the patch (1-based), for messages.
    pub patch_line: usize,
}

impl Hunk {
    /// The lines the file has now (context and removed).
    pub fn old_lines(&self) -> Vec<&str> {
        self.lines
            .iter()
            .filter_map(|l| match l {
                HunkLine::Context(t) | HunkLine::Remove(t) => Some(t.as_str()),
                HunkLine::Add(_) => None,
            })
            .collect()
    }

    /// The lines it will have (context and added).
    pub fn new_lines(&self) -> Vec<&str> {
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
pub enum HunkLine {
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
pub struct ParseError {
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

fn error(line: usize, message: impl Into<String>) -> ParseError {
    ParseError {
        line,
        message: message.into(),
    }
}

/// Parses a patch.
pub fn parse(text: &str) -> Result<Patch, ParseError> {
    let all: Vec<&str> = text.lines().collect();
    let (offset, lines) = strip_wrapper(&all);
    let mut i = 0;
    let number = |i: usize| offset + i + 1;
    if lines.first().map(|l| l.trim()) != Some(BEGIN) {
        return Err(error(number(0), format!("a patch starts with `{BEGIN}`")));
    }
    i += 1;
    let mut ops = Vec::new();
    loop {
        let Some(line) = lines.get(i) else {
            return Err(error(number(i), format!("the patch ends without `{END}`")));
        };
        let trimmed = line.trim_end();
        if trimmed.trim() == END {
            if i + 1 < lines.len() {
                return Err(error(number(i + 1), format!("nothing may follow `{END}`")));
            }
            break;
        }
        if let Some(path) = trimmed.strip_prefix(ADD) {
            let path = file_path(path, number(i))?;
            i += 1;
            let mut content = String::new();
            while let Some(line) = lines.get(i).filter(|l| !l.starts_with("*** ")) {
                let Some(text) = line.strip_prefix('+') else {
                    return Err(error(
                        number(i),
                        format!("lines of an added file start with `+`; got `{line}`"),
                    ));
                };
                content.push_str(text);
                content.push('\n');
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
            if let Some(dest) = lines.get(i).and_then(|l| l.trim_end().strip_prefix(MOVE)) {
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
        } else {
            return Err(error(
                number(i),
                format!("expected `{ADD}`, `{DELETE}`, `{UPDATE}` or `{END}`; got `{trimmed}`"),
            ));
        }
    }
    if ops.is_empty() {
        return Err(error(number(0), "the patch has no file operations"));
    }
    Ok(Patch { ops })
}

/// Drops a heredoc wrapper (`<<'EOF'` ... `EOF`) and blank lines around the patch. Returns the
/// number of lines dropped at the start and the rest.
fn strip_wrapper<'a>(lines: &'a [&'a str]) -> (usize, &'a [&'a str]) {
    let mut start = lines
        .iter()
        .position(|l| !l.trim().is_empty())
        .unwrap_or(lines.len());
    let mut end = lines
        .iter()
        .rposition(|l| !l.trim().is_empty())
        .map_or(start, |e| e + 1);
    if let Some(first) = lines.get(start).map(|l| l.trim())
        && first.starts_with("<<")
        && end > start + 1
    {
        let delimiter = first
            .trim_start_matches('<')
            .trim_matches(|c| c == '\'' || c == '"');
        if lines[end - 1].trim() == delimiter {
            start += 1;
            end -= 1;
        }
    }
    (start, &lines[start..end.max(start)])
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
    while let Some(line) = lines.get(i) {
        if line.starts_with("*** ") && !line.starts_with(END_OF_FILE) {
            break;
        }
        if let Some(anchor) = line.strip_prefix("@@") {
            let anchor = anchor.trim();
            let anchor = anchor.strip_suffix("@@").map_or(anchor, str::trim);
            hunks.push(Hunk {
                anchor: (!anchor.is_empty()).then(|| anchor.to_owned()),
                lines: Vec::new(),
                end_of_file: false,
                patch_line: number(i),
            });
            i += 1;
            continue;
        }
        if hunks.is_empty() {
            // Codex accepts a first hunk without its `@@` line.
            hunks.push(Hunk {
                anchor: None,
                lines: Vec::new(),
                end_of_file: false,
                patch_line: number(i),
            });
        }
        let Some(hunk) = hunks.last_mut() else { break };
        if line.trim_end() == END_OF_FILE {
            hunk.end_of_file = true;
            i += 1;
            continue;
        }
        if hunk.end_of_file {
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
            None => HunkLine::Context(String::new()),
            Some(_) => {
                return Err(error(
                    number(i),
                    format!(
                        "hunk lines start with ` ` (context), `-` (remove) or `+` (add); got `{line}`"
                    ),
                ));
            }
        };
        hunk.lines.push(parsed);
        i += 1;
    }
    if let Some(empty) = hunks.iter().find(|h| h.lines.is_empty()) {
        return Err(error(empty.patch_line, "this hunk has no lines"));
    }
    Ok((hunks, i))
}

#[cfg(test)]
#[path = "patch_tests.rs"]
mod tests;
