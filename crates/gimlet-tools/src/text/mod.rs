//! Text as the edit tools see it: decoded once, matched and changed in a line-ending-neutral
//! form, written back with every untouched byte as it was.
//!
//! A [`Document`] keeps the original bytes, the BOM, and each line's own ending. Matching runs
//! on the *normalized* text (BOM removed, every `\r\n` as `\n`); offsets found there are mapped
//! back to the original with [`Document::original_offset`], so a replacement touches exactly
//! the matched bytes. Inserted line breaks take the file's dominant ending.

mod diff;
mod matcher;

pub(crate) use diff::{DiffStats, render_diff};
pub(crate) use matcher::{
    LINE_LEVELS, Lines, Window, closest, find_windows, insertion, window_edits_kept,
};
pub(crate) use matcher::{MatchError, MatchLevel, find_replacement};

use std::fmt;

/// A line ending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    /// `\n`
    Lf,
    /// `\r\n`
    CrLf,
}

const BOM: &str = "\u{feff}";

/// Why a file cannot be edited as text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the file is not valid UTF-8 (byte 0x{byte:02X} at offset {offset}, line {line}); gimlet edits \
     UTF-8 text only and will not rewrite it with replacement characters. Convert it first (e.g. \
     `iconv -f latin1 -t utf-8`), or change it with a command"
)]
pub(crate) struct EncodingError {
    /// The first invalid byte.
    pub byte: u8,
    /// Its offset in the file.
    pub offset: usize,
    /// Its 1-based line.
    pub line: usize,
}

/// A text file, decoded.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Document {
    /// The original text (BOM included).
    original: String,
    /// The text matched against: BOM removed, `\r\n` as `\n`; `None` when that is the
    /// original itself (no BOM, no CRLF), so big LF files are not held twice.
    normalized: Option<String>,
    /// Normalized offsets of the `\n`s that were `\r\n` in the original, ascending.
    crlf_at: Vec<usize>,
    bom: bool,
}

impl fmt::Debug for Document {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Document")
            .field("bytes", &self.original.len())
            .field("bom", &self.bom)
            .finish_non_exhaustive()
    }
}

impl Document {
    /// Decodes bytes; refuses invalid UTF-8.
    pub(crate) fn decode(bytes: Vec<u8>) -> Result<Self, EncodingError> {
        let original = String::from_utf8(bytes).map_err(|err| {
            let offset = err.utf8_error().valid_up_to();
            let bytes = err.as_bytes();
            let line = memchr::memchr_iter(b'\n', &bytes[..offset]).count() + 1;
            EncodingError {
                byte: bytes[offset],
                offset,
                line,
            }
        })?;
        Ok(Self::from_text(original))
    }

    /// A document of valid text.
    pub(crate) fn from_text(original: String) -> Self {
        let bom = original.starts_with(BOM);
        let body = if bom {
            &original[BOM.len()..]
        } else {
            &original[..]
        };
        let mut crlf_at = Vec::new();
        let finder = memchr::memmem::Finder::new("\r\n");
        let normalized = if !bom && finder.find(body.as_bytes()).is_none() {
            None
        } else {
            let mut normalized = String::with_capacity(body.len());
            let mut copied = 0;
            for at in finder.find_iter(body.as_bytes()) {
                normalized.push_str(&body[copied..at]);
                crlf_at.push(normalized.len());
                normalized.push('\n');
                copied = at + 2;
            }
            normalized.push_str(&body[copied..]);
            Some(normalized)
        };
        Self {
            original,
            normalized,
            crlf_at,
            bom,
        }
    }

    /// The original text.
    pub(crate) fn original(&self) -> &str {
        &self.original
    }

    /// The normalized text: no BOM, `\n` line endings.
    pub(crate) fn normalized(&self) -> &str {
        self.normalized.as_deref().unwrap_or(&self.original)
    }

    /// Whether the file starts with a UTF-8 BOM.
    pub(crate) fn has_bom(&self) -> bool {
        self.bom
    }

    /// The ending most lines use (`\n` when there are none or it is a tie).
    pub(crate) fn dominant_ending(&self) -> Ending {
        let newlines = memchr::memchr_iter(b'\n', self.normalized().as_bytes()).count();
        if self.crlf_at.len() * 2 > newlines {
            Ending::CrLf
        } else {
            Ending::Lf
        }
    }

    /// Maps an offset in the normalized text to the original text.
    pub(crate) fn original_offset(&self, normalized: usize) -> usize {
        let crlf_before = self.crlf_at.partition_point(|&at| at < normalized);
        normalized + crlf_before + if self.bom { BOM.len() } else { 0 }
    }

    /// Replaces normalized ranges (ascending, not overlapping) by texts whose line breaks are
    /// `\n`; they are written with the file's dominant ending. Everything else keeps its bytes.
    pub(crate) fn replace(&self, edits: &[(std::ops::Range<usize>, String)]) -> String {
        let ending = self.dominant_ending();
        let mut out = String::with_capacity(self.original.len() + 64);
        let mut copied = 0;
        for (range, text) in edits {
            let start = self.original_offset(range.start);
            let end = self.original_offset(range.end);
            out.push_str(&self.original[copied..start]);
            match ending {
                Ending::Lf => out.push_str(text),
                Ending::CrLf => out.push_str(&text.replace('\n', "\r\n")),
            }
            copied = end;
        }
        out.push_str(&self.original[copied..]);
        out
    }

    /// The 1-based line of a normalized offset.
    pub(crate) fn line_of(&self, normalized: usize) -> usize {
        let text = self.normalized().as_bytes();
        memchr::memchr_iter(b'\n', &text[..normalized.min(text.len())]).count() + 1
    }
}

/// Writes `text` (with `\n` breaks) in the style of `like`: its dominant ending and its BOM.
/// Used by `write` so that overwriting a CRLF file with LF text keeps it CRLF.
pub(crate) fn in_style_of(like: &Document, text: &str) -> String {
    let body = text.strip_prefix(BOM).unwrap_or(text);
    let body = if body.contains('\r') || like.dominant_ending() == Ending::Lf {
        body.to_owned()
    } else {
        body.replace('\n', "\r\n")
    };
    if like.has_bom() {
        format!("{BOM}{body}")
    } else {
        body
    }
}

/// One `old` -> `new` change.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EditSpec<'a> {
    /// The text to find.
    pub old: &'a str,
    /// Its replacement.
    pub new: &'a str,
    /// Replace every occurrence.
    pub replace_all: bool,
}

/// The result of [`apply_edits`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Applied {
    /// The new text, in the file's own style (endings, BOM).
    pub text: String,
    /// How each edit was matched.
    pub levels: Vec<MatchLevel>,
    /// Replacements made in all.
    pub replacements: usize,
}

/// Applies edits in order, each to the result of the one before. All or nothing: the error
/// gives the index of the edit that failed.
pub(crate) fn apply_edits(
    doc: &Document,
    edits: &[EditSpec<'_>],
) -> Result<Applied, (usize, MatchError)> {
    let mut current: std::borrow::Cow<'_, Document> = std::borrow::Cow::Borrowed(doc);
    let mut levels = Vec::with_capacity(edits.len());
    let mut replacements = 0;
    for (index, edit) in edits.iter().enumerate() {
        let old = normalize_input(edit.old);
        let new = normalize_input(edit.new);
        let found =
            find_replacement(&current, &old, &new, edit.replace_all).map_err(|e| (index, e))?;
        replacements += found.edits.len();
        levels.push(found.level);
        current = std::borrow::Cow::Owned(Document::from_text(current.replace(&found.edits)));
    }
    Ok(Applied {
        text: current.into_owned().original,
        levels,
        replacements,
    })
}

/// Normalizes text the model wrote: `\r\n` as `\n`, no BOM.
pub(crate) fn normalize_input(text: &str) -> std::borrow::Cow<'_, str> {
    let text = text.strip_prefix(BOM).unwrap_or(text);
    if text.contains("\r\n") {
        text.replace("\r\n", "\n").into()
    } else {
        text.into()
    }
}

#[cfg(test)]
#[path = "text_tests.rs"]
mod tests;

/// `n` and its noun, in the singular for one: `counted(1, "line", "lines")` is "1 line".
pub(crate) fn counted(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

#[cfg(test)]
mod counted_tests {
    #[test]
    fn one_is_singular_and_everything_else_plural() {
        assert_eq!(super::counted(1, "line", "lines"), "1 line");
        assert_eq!(super::counted(0, "line", "lines"), "0 lines");
        assert_eq!(super::counted(2, "entry", "entries"), "2 entries");
    }
}
