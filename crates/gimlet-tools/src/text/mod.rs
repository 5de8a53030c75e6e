//! Text as the edit tools see it: decoded once, matched and changed in a line-ending-neutral
//! form, written back with every untouched byte as it was.
//!
//! A [`Document`] keeps the original bytes, the BOM, and each line's own ending. Matching runs
//! on the *normalized* text (BOM removed, every `\r\n` as `\n`); offsets found there are mapped
//! back to the original with [`Document::original_offset`], so a replacement touches exactly
//! the matched bytes. Inserted line breaks take the file's dominant ending. A UTF-16 file (told
//! by its BOM, see [`Encoding`]) is decoded to the same kind of text and written back in its own
//! byte order.

mod diff;
mod encoding;
mod matcher;

pub(crate) use diff::{DiffStats, render_diff};
pub(crate) use encoding::{ByteOrder, Encoding, Utf16Fault, Utf32};
pub(crate) use matcher::{
    LINE_LEVELS, Lines, Window, closest, find_windows, insertion, window_edits_kept,
};
pub(crate) use matcher::{MatchError, MatchLevel, find_replacement};

use std::borrow::Cow;
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
pub(crate) enum EncodingError {
    /// Not valid UTF-8 (and no UTF-16 BOM).
    #[error(
        "the file is not valid UTF-8 (byte 0x{byte:02X} at offset {offset}, line {line}); gimlet \
         edits UTF-8 and UTF-16 text only and will not rewrite it with replacement characters. \
         Convert it first (e.g. `iconv -f latin1 -t utf-8`), or change it with a command"
    )]
    Utf8 {
        /// The first invalid byte.
        byte: u8,
        /// Its offset in the file.
        offset: usize,
        /// Its 1-based line.
        line: usize,
    },
    /// A UTF-16 BOM, and then not valid UTF-16.
    #[error(
        "the file starts with a {encoding} byte-order mark but is not valid {encoding} ({}, at \
         offset {}, line {}); gimlet will not rewrite it with replacement characters. Fix it \
         with a command, or replace the whole file with `write`",
        fault.problem,
        fault.offset,
        fault.line
    )]
    Utf16 {
        /// `Encoding::Utf16` in the file's byte order.
        encoding: Encoding,
        /// What is wrong, and where.
        fault: Utf16Fault,
    },
    /// A UTF-32 BOM.
    #[error(
        "the file is {0}; gimlet reads and edits UTF-8 and UTF-16 text only. Convert it first \
         (e.g. `iconv -f UTF-32 -t UTF-8`), or change it with a command"
    )]
    Utf32(Utf32),
}

impl EncodingError {
    /// The encoding a replacement of the whole file is written in: UTF-16 when the file
    /// announced it, else UTF-8 (gimlet writes no UTF-32).
    pub(crate) fn encoding(&self) -> Encoding {
        match self {
            Self::Utf16 { encoding, .. } => *encoding,
            Self::Utf8 { .. } | Self::Utf32(_) => Encoding::Utf8,
        }
    }
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
    /// How the text is stored; a UTF-16 document always has its BOM.
    encoding: Encoding,
}

impl fmt::Debug for Document {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Document")
            .field("bytes", &self.original.len())
            .field("bom", &self.bom)
            .field("encoding", &self.encoding)
            .finish_non_exhaustive()
    }
}

impl Document {
    /// Decodes bytes: UTF-16 when a UTF-16 BOM starts them, else UTF-8. Refuses what is not
    /// valid in its encoding, and UTF-32.
    pub(crate) fn decode(bytes: Vec<u8>) -> Result<Self, EncodingError> {
        let encoding = Encoding::sniff(&bytes).map_err(EncodingError::Utf32)?;
        let original = match encoding {
            Encoding::Utf8 => String::from_utf8(bytes).map_err(|err| {
                let offset = err.utf8_error().valid_up_to();
                let bytes = err.as_bytes();
                let line = memchr::memchr_iter(b'\n', &bytes[..offset]).count() + 1;
                EncodingError::Utf8 {
                    byte: bytes[offset],
                    offset,
                    line,
                }
            })?,
            Encoding::Utf16(order) => order
                .decode(&bytes)
                .map_err(|fault| EncodingError::Utf16 { encoding, fault })?,
        };
        Ok(Self::from_text_in(original, encoding))
    }

    /// A document of valid text, stored as UTF-8.
    pub(crate) fn from_text(original: String) -> Self {
        Self::from_text_in(original, Encoding::Utf8)
    }

    /// A document of valid text, stored in `encoding`. UTF-16 text gets a BOM if it has none:
    /// without one, the file would not be read back as UTF-16.
    pub(crate) fn from_text_in(mut original: String, encoding: Encoding) -> Self {
        if matches!(encoding, Encoding::Utf16(_)) && !original.starts_with(BOM) {
            original.insert_str(0, BOM);
        }
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
            encoding,
        }
    }

    /// The original text.
    #[cfg(test)]
    pub(crate) fn original(&self) -> &str {
        &self.original
    }

    /// How the file stores its text.
    pub(crate) fn encoding(&self) -> Encoding {
        self.encoding
    }

    /// The original text without its BOM: the text as a language server has it (line
    /// endings as they are).
    pub(crate) fn body(&self) -> &str {
        self.original.strip_prefix(BOM).unwrap_or(&self.original)
    }

    /// The file's bytes: the original text in the document's encoding.
    pub(crate) fn bytes(&self) -> Cow<'_, [u8]> {
        self.encoding.encode(&self.original)
    }

    /// The normalized text: no BOM, `\n` line endings.
    pub(crate) fn normalized(&self) -> &str {
        self.normalized.as_deref().unwrap_or(&self.original)
    }

    /// Whether the file starts with a BOM (always, for UTF-16).
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

/// `text` (with `\n` breaks) in the style of `like`: its dominant ending, its BOM and its
/// encoding. Used by `write` so that overwriting a CRLF file with LF text keeps it CRLF, and a
/// UTF-16 file UTF-16.
pub(crate) fn in_style_of(like: &Document, text: &str) -> Document {
    let body = text.strip_prefix(BOM).unwrap_or(text);
    let body = if body.contains('\r') || like.dominant_ending() == Ending::Lf {
        body.to_owned()
    } else {
        body.replace('\n', "\r\n")
    };
    let text = if like.has_bom() {
        format!("{BOM}{body}")
    } else {
        body
    };
    Document::from_text_in(text, like.encoding())
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
    /// The new text, in the file's own style (endings, BOM), to be stored in the file's
    /// encoding.
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
    let mut current: Cow<'_, Document> = Cow::Borrowed(doc);
    let mut levels = Vec::with_capacity(edits.len());
    let mut replacements = 0;
    for (index, edit) in edits.iter().enumerate() {
        let old = normalize_input(edit.old);
        let new = normalize_input(edit.new);
        let found =
            find_replacement(&current, &old, &new, edit.replace_all).map_err(|e| (index, e))?;
        replacements += found.edits.len();
        levels.push(found.level);
        current = Cow::Owned(Document::from_text_in(
            current.replace(&found.edits),
            doc.encoding,
        ));
    }
    Ok(Applied {
        text: current.into_owned().original,
        levels,
        replacements,
    })
}

/// Normalizes text the model wrote: `\r\n` as `\n`, no BOM.
pub(crate) fn normalize_input(text: &str) -> Cow<'_, str> {
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
