//! A server's `WorkspaceEdit` as a change set: pure functions, no file system. `parse` reads
//! the edit (`changes` or `documentChanges`: text edits with versions, and file create, rename
//! and delete operations with their options); `plan` runs its operations in order over the
//! files as they are (given by a loader) and returns what every touched file becomes. The
//! caller loads, checks and commits that set as one change (`refactor.rs`).
//!
//! Text edits are in UTF-16 positions on the text as the server has it: the file's text without
//! its BOM, line endings as they are. They are sorted, refused when they overlap, and applied
//! back to front; their new text takes the file's dominant line ending, and the file keeps its
//! BOM and encoding.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::lsp::position::path_of;
use crate::text::{Document, Ending};

/// One operation of a `WorkspaceEdit`, in its order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FileOp {
    /// Text edits to one file; `version` is the document version they were made for (`None`:
    /// the server did not say).
    Edit {
        path: PathBuf,
        version: Option<i32>,
        edits: Vec<lsp_types::TextEdit>,
    },
    /// A new (empty) file.
    Create {
        path: PathBuf,
        overwrite: bool,
        ignore_if_exists: bool,
    },
    /// A file moved to another name.
    Rename {
        from: PathBuf,
        to: PathBuf,
        overwrite: bool,
        ignore_if_exists: bool,
    },
    /// A file removed.
    Delete {
        path: PathBuf,
        ignore_if_not_exists: bool,
    },
}

impl FileOp {
    /// Every path the operation names.
    pub(crate) fn paths(&self) -> Vec<&Path> {
        match self {
            Self::Edit { path, .. } | Self::Create { path, .. } | Self::Delete { path, .. } => {
                vec![path]
            }
            Self::Rename { from, to, .. } => vec![from, to],
        }
    }
}

/// Why a `WorkspaceEdit` cannot be applied. Each message ends with "nothing was changed".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum EditError {
    /// The edit is not a `WorkspaceEdit` this client understands.
    #[error("the server's edit is malformed: {0}; nothing was changed")]
    Malformed(String),
    /// Two text edits of one file overlap.
    #[error(
        "the server's edits to `{path}` overlap (at lines {first} and {second}); nothing was changed"
    )]
    Overlap {
        path: String,
        first: u32,
        second: u32,
    },
    /// A position past the end of the file, or inside a character.
    #[error(
        "the server's edit to `{path}` points at line {line}, column {character} (UTF-16), which \
         is {why}; the file may have changed since the server read it: ask again. Nothing was \
         changed"
    )]
    Position {
        path: String,
        line: u32,
        character: u32,
        why: &'static str,
    },
    /// The edit was made for another version of the document than gimlet sent.
    #[error(
        "the server's edit to `{path}` is for version {edit} of it, but gimlet sent version \
         {sent}: it was made for another text. Ask again; nothing was changed"
    )]
    Version { path: String, edit: i32, sent: i32 },
    /// A file to create or rename onto exists, and the operation may not replace it.
    #[error(
        "the server's edit creates `{path}`, which exists already (and may not be replaced); \
         nothing was changed"
    )]
    Exists { path: String },
    /// A file to edit, rename or delete does not exist.
    #[error("the server's edit {what} `{path}`, which does not exist; nothing was changed")]
    Missing { path: String, what: &'static str },
    /// A file that is not text in an encoding gimlet edits.
    #[error("the server's edit changes `{path}`, which {why}; nothing was changed")]
    NotText { path: String, why: String },
}

/// What one touched file becomes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PlannedFile {
    /// The file.
    pub(crate) path: PathBuf,
    /// Its content before (`None`: no file there).
    pub(crate) before: Option<Vec<u8>>,
    /// Its content after (`None`: no file there).
    pub(crate) after: Option<Vec<u8>>,
    /// Text edits applied to it (under this name).
    pub(crate) edits: usize,
    /// The file it was renamed from, when its content came from a rename.
    pub(crate) renamed_from: Option<PathBuf>,
    /// Where it was renamed to, when a rename took its content away.
    pub(crate) renamed_to: Option<PathBuf>,
}

impl PlannedFile {
    /// Whether the change leaves it as it was.
    pub(crate) fn unchanged(&self) -> bool {
        self.before == self.after
    }
}

/// Reads a `WorkspaceEdit`: `documentChanges` when present (the richer form), else `changes`.
pub(crate) fn parse(edit: &Value) -> Result<Vec<FileOp>, EditError> {
    let malformed = |what: String| EditError::Malformed(what);
    let uri_path = |uri: &Value| -> Result<PathBuf, EditError> {
        let text = uri
            .as_str()
            .ok_or_else(|| malformed(format!("a URI is not a string: {uri}")))?;
        let parsed: lsp_types::Uri = text
            .parse()
            .map_err(|_| malformed(format!("`{text}` is not a URI")))?;
        path_of(&parsed).ok_or_else(|| malformed(format!("`{text}` is not a file URI")))
    };
    let text_edits = |edits: &Value| -> Result<Vec<lsp_types::TextEdit>, EditError> {
        serde_json::from_value(edits.clone())
            .map_err(|e| malformed(format!("text edits that do not read: {e}")))
    };
    let flag = |options: Option<&Value>, name: &str| {
        options
            .and_then(|o| o.get(name))
            .and_then(Value::as_bool)
            .unwrap_or(false)
    };
    let mut ops = Vec::new();
    match (edit.get("documentChanges"), edit.get("changes")) {
        (Some(Value::Array(changes)), _) => {
            for change in changes {
                let options = change.get("options");
                match change.get("kind").and_then(Value::as_str) {
                    None => {
                        let document = change.get("textDocument").ok_or_else(|| {
                            malformed(format!("a change without a kind: {change}"))
                        })?;
                        let version = document
                            .get("version")
                            .and_then(Value::as_i64)
                            .and_then(|v| i32::try_from(v).ok());
                        ops.push(FileOp::Edit {
                            path: uri_path(document.get("uri").unwrap_or(&Value::Null))?,
                            version,
                            edits: text_edits(change.get("edits").unwrap_or(&Value::Null))?,
                        });
                    }
                    Some("create") => ops.push(FileOp::Create {
                        path: uri_path(change.get("uri").unwrap_or(&Value::Null))?,
                        overwrite: flag(options, "overwrite"),
                        ignore_if_exists: flag(options, "ignoreIfExists"),
                    }),
                    Some("rename") => ops.push(FileOp::Rename {
                        from: uri_path(change.get("oldUri").unwrap_or(&Value::Null))?,
                        to: uri_path(change.get("newUri").unwrap_or(&Value::Null))?,
                        overwrite: flag(options, "overwrite"),
                        ignore_if_exists: flag(options, "ignoreIfExists"),
                    }),
                    Some("delete") => ops.push(FileOp::Delete {
                        path: uri_path(change.get("uri").unwrap_or(&Value::Null))?,
                        ignore_if_not_exists: flag(options, "ignoreIfNotExists"),
                    }),
                    Some(other) => {
                        return Err(malformed(format!("an unknown operation `{other}`")));
                    }
                }
            }
        }
        (Some(other), _) if !other.is_null() => {
            return Err(malformed(String::from("`documentChanges` is not a list")));
        }
        (_, Some(Value::Object(changes))) => {
            // A map has no order; sorting by path keeps the result stable.
            let mut by_path = Vec::new();
            for (uri, edits) in changes {
                by_path.push((uri_path(&Value::String(uri.clone()))?, text_edits(edits)?));
            }
            by_path.sort_by(|a, b| a.0.cmp(&b.0));
            ops.extend(by_path.into_iter().map(|(path, edits)| FileOp::Edit {
                path,
                version: None,
                edits,
            }));
        }
        (_, Some(other)) if !other.is_null() => {
            return Err(malformed(String::from("`changes` is not a map")));
        }
        _ => {}
    }
    Ok(ops)
}

/// A file as the plan sees it while it runs the operations.
struct Slot {
    before: Option<Vec<u8>>,
    now: Option<Vec<u8>>,
    edits: usize,
    renamed_from: Option<PathBuf>,
    renamed_to: Option<PathBuf>,
}

/// Gives a file's content as it is (`None`: no file there).
pub(crate) type Loader<'a> = dyn FnMut(&Path) -> Result<Option<Vec<u8>>, EditError> + 'a;

/// The files an edit touched so far, in the order it touched them.
#[derive(Default)]
struct Tree {
    order: Vec<PathBuf>,
    files: HashMap<PathBuf, Slot>,
}

impl Tree {
    /// Loads a file the first time the edit names it.
    fn touch(&mut self, path: &Path, load: &mut Loader<'_>) -> Result<(), EditError> {
        if !self.files.contains_key(path) {
            let before = load(path)?;
            self.files.insert(
                path.to_owned(),
                Slot {
                    now: before.clone(),
                    before,
                    edits: 0,
                    renamed_from: None,
                    renamed_to: None,
                },
            );
            self.order.push(path.to_owned());
        }
        Ok(())
    }

    /// A touched file.
    fn slot(&mut self, path: &Path) -> &mut Slot {
        self.files
            .get_mut(path)
            .unwrap_or_else(|| unreachable!("every path of an operation is touched first"))
    }

    /// Runs one operation.
    fn run(
        &mut self,
        op: &FileOp,
        sent: &dyn Fn(&Path) -> Option<i32>,
        display: &dyn Fn(&Path) -> String,
    ) -> Result<(), EditError> {
        match op {
            FileOp::Edit {
                path,
                version,
                edits,
            } => {
                if let (Some(edit), Some(sent)) = (*version, sent(path))
                    && edit != sent
                {
                    return Err(EditError::Version {
                        path: display(path),
                        edit,
                        sent,
                    });
                }
                let slot = self.slot(path);
                let Some(bytes) = &slot.now else {
                    return Err(EditError::Missing {
                        path: display(path),
                        what: "edits",
                    });
                };
                slot.now = Some(apply_text_edits(bytes, edits, &display(path))?);
                slot.edits += edits.len();
            }
            FileOp::Create {
                path,
                overwrite,
                ignore_if_exists,
            } => {
                let slot = self.slot(path);
                match (&slot.now, overwrite, ignore_if_exists) {
                    (None, _, _) | (Some(_), true, _) => slot.now = Some(Vec::new()),
                    (Some(_), false, true) => {}
                    (Some(_), false, false) => {
                        return Err(EditError::Exists {
                            path: display(path),
                        });
                    }
                }
            }
            FileOp::Rename {
                from,
                to,
                overwrite,
                ignore_if_exists,
            } => {
                if from == to {
                    return Ok(());
                }
                let Some(content) = self.slot(from).now.clone() else {
                    return Err(EditError::Missing {
                        path: display(from),
                        what: "renames",
                    });
                };
                let target = self.slot(to);
                if target.now.is_some() && !overwrite {
                    if *ignore_if_exists {
                        return Ok(());
                    }
                    return Err(EditError::Exists { path: display(to) });
                }
                target.now = Some(content);
                target.renamed_from = Some(from.clone());
                let source = self.slot(from);
                source.now = None;
                source.renamed_to = Some(to.clone());
            }
            FileOp::Delete {
                path,
                ignore_if_not_exists,
            } => {
                let slot = self.slot(path);
                if slot.now.is_none() {
                    if *ignore_if_not_exists {
                        return Ok(());
                    }
                    return Err(EditError::Missing {
                        path: display(path),
                        what: "deletes",
                    });
                }
                slot.now = None;
            }
        }
        Ok(())
    }
}

/// Runs `ops` in order over the files as `load` gives them (`None`: no file), and returns what
/// every touched file becomes, in the order they were first touched. `sent` gives the version
/// of a document as gimlet sent it to the server (`None`: not open); a versioned edit must
/// match it. `display` names a path in messages.
pub(crate) fn plan(
    ops: &[FileOp],
    load: &mut Loader<'_>,
    sent: &dyn Fn(&Path) -> Option<i32>,
    display: &dyn Fn(&Path) -> String,
) -> Result<Vec<PlannedFile>, EditError> {
    let mut tree = Tree::default();
    for op in ops {
        for path in op.paths() {
            tree.touch(path, load)?;
        }
        tree.run(op, sent, display)?;
    }
    let Tree { order, mut files } = tree;
    Ok(order
        .into_iter()
        .filter_map(|path| {
            let slot = files.remove(&path)?;
            Some(PlannedFile {
                path,
                before: slot.before,
                after: slot.now,
                edits: slot.edits,
                renamed_from: slot.renamed_from,
                renamed_to: slot.renamed_to,
            })
        })
        .collect())
}

/// Applies text edits (UTF-16 positions on the text without its BOM) to a file's bytes: sorted
/// by place (edits at one place keep their order), refused when they overlap, applied back to
/// front; new text takes the file's dominant line ending; BOM and encoding stay.
pub(crate) fn apply_text_edits(
    bytes: &[u8],
    edits: &[lsp_types::TextEdit],
    display: &str,
) -> Result<Vec<u8>, EditError> {
    if edits.is_empty() {
        return Ok(bytes.to_vec());
    }
    let doc = Document::decode(bytes.to_vec()).map_err(|e| EditError::NotText {
        path: display.to_owned(),
        why: e.to_string(),
    })?;
    let body = doc.body();
    let starts = line_starts(body);
    let mut spans = Vec::with_capacity(edits.len());
    for (i, edit) in edits.iter().enumerate() {
        let start = offset_of(body, &starts, edit.range.start, display)?;
        let end = offset_of(body, &starts, edit.range.end, display)?;
        if end < start {
            return Err(EditError::Position {
                path: display.to_owned(),
                line: edit.range.end.line + 1,
                character: edit.range.end.character,
                why: "before the start of its range",
            });
        }
        spans.push((start, end, i));
    }
    // Stable: edits at one place keep the order the server gave them.
    spans.sort_by_key(|&(start, end, i)| (start, end, i));
    for pair in spans.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        if b.0 < a.1 {
            return Err(EditError::Overlap {
                path: display.to_owned(),
                first: edits[a.2].range.start.line + 1,
                second: edits[b.2].range.start.line + 1,
            });
        }
    }
    let crlf = doc.dominant_ending() == Ending::CrLf;
    let mut text = body.to_owned();
    for &(start, end, i) in spans.iter().rev() {
        let new = &edits[i].new_text;
        if crlf && new.contains('\n') {
            let new = new.replace("\r\n", "\n").replace('\n', "\r\n");
            text.replace_range(start..end, &new);
        } else {
            text.replace_range(start..end, new);
        }
    }
    if doc.has_bom() {
        text.insert(0, '\u{feff}');
    }
    Ok(Document::from_text_in(text, doc.encoding())
        .bytes()
        .into_owned())
}

/// Byte offsets where each line starts (after `\n`; `\r\n` ends a line as one break).
fn line_starts(text: &str) -> Vec<usize> {
    std::iter::once(0)
        .chain(memchr::memchr_iter(b'\n', text.as_bytes()).map(|at| at + 1))
        .collect()
}

/// The byte offset of an LSP position: a character past the line's end means its end (as the
/// protocol says), a line past the last means the end of the text; a position inside a
/// surrogate pair is refused.
fn offset_of(
    text: &str,
    starts: &[usize],
    position: lsp_types::Position,
    display: &str,
) -> Result<usize, EditError> {
    let refuse = |why| EditError::Position {
        path: display.to_owned(),
        line: position.line + 1,
        character: position.character,
        why,
    };
    let line = position.line as usize;
    let Some(&start) = starts.get(line) else {
        if line == starts.len() && position.character == 0 {
            return Ok(text.len());
        }
        return Err(refuse("past the end of the file"));
    };
    let end = starts.get(line + 1).map_or(text.len(), |&next| {
        let content = &text[start..next - 1];
        start + content.strip_suffix('\r').unwrap_or(content).len()
    });
    let mut units = 0u32;
    for (at, c) in text[start..end].char_indices() {
        if units == position.character {
            return Ok(start + at);
        }
        units += u32::try_from(c.len_utf16()).unwrap_or(2);
        if units > position.character {
            return Err(refuse("inside a character"));
        }
    }
    Ok(end)
}

#[cfg(test)]
#[path = "workspace_edit_tests.rs"]
mod tests;
