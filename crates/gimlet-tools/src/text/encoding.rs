//! The encodings a text file may be stored in, told by its first bytes: UTF-16 in either byte
//! order when it starts with that byte-order mark (as Windows tools write it: `.rc` and `.reg`
//! files, PowerShell 5's `Out-File` and `>`), UTF-8 otherwise. A UTF-16 file is decoded to text
//! with its BOM as U+FEFF, so the rest of `text/` keeps the BOM as it keeps a UTF-8 one, and is
//! encoded back in the same byte order.
//!
//! UTF-16 is only ever recognised by its BOM: without one, the NUL bytes of ASCII text in
//! UTF-16 make the file binary, as they do for ripgrep. A UTF-32 BOM is recognised only to
//! refuse the file by name (a UTF-32 LE BOM begins with the UTF-16 LE one).

use std::borrow::Cow;
use std::fmt;

/// How a text file's characters are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Encoding {
    /// UTF-8, with or without a BOM.
    Utf8,
    /// UTF-16 in this byte order, with its BOM (`FF FE` little-endian, `FE FF` big-endian).
    Utf16(ByteOrder),
}

/// The byte order of UTF-16 code units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ByteOrder {
    /// Little-endian (what Windows writes).
    Little,
    /// Big-endian.
    Big,
}

impl fmt::Display for Encoding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Utf8 => "UTF-8",
            Self::Utf16(ByteOrder::Little) => "UTF-16LE",
            Self::Utf16(ByteOrder::Big) => "UTF-16BE",
        })
    }
}

/// A UTF-32 byte-order mark: such a file is refused, saying so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Utf32 {
    /// `FF FE 00 00`.
    Le,
    /// `00 00 FE FF`.
    Be,
}

impl fmt::Display for Utf32 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Le => "UTF-32LE (it starts with the byte-order mark FF FE 00 00)",
            Self::Be => "UTF-32BE (it starts with the byte-order mark 00 00 FE FF)",
        })
    }
}

/// What is wrong in a file that announces UTF-16.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Utf16Problem {
    /// A surrogate code unit without its other half.
    UnpairedSurrogate(u16),
    /// The file ends in half a code unit.
    OddLength,
}

impl fmt::Display for Utf16Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnpairedSurrogate(unit) => write!(f, "an unpaired surrogate 0x{unit:04X}"),
            Self::OddLength => f.write_str("an odd number of bytes: the last byte is half a unit"),
        }
    }
}

/// The first fault of a UTF-16 file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Utf16Fault {
    /// What is wrong.
    pub(crate) problem: Utf16Problem,
    /// The byte offset of the bad unit in the file (BOM included).
    pub(crate) offset: usize,
    /// Its 1-based line.
    pub(crate) line: usize,
}

impl Encoding {
    /// The encoding a file's first bytes announce (UTF-8 unless a UTF-16 BOM starts it), or the
    /// UTF-32 BOM that starts it.
    pub(crate) fn sniff(head: &[u8]) -> Result<Self, Utf32> {
        match head {
            [0xFF, 0xFE, 0, 0, ..] => Err(Utf32::Le),
            [0, 0, 0xFE, 0xFF, ..] => Err(Utf32::Be),
            [0xFF, 0xFE, ..] => Ok(Self::Utf16(ByteOrder::Little)),
            [0xFE, 0xFF, ..] => Ok(Self::Utf16(ByteOrder::Big)),
            _ => Ok(Self::Utf8),
        }
    }

    /// `text` in this encoding. UTF-8 is the text's own bytes; UTF-16 text is expected to start
    /// with its BOM (U+FEFF), which becomes the byte-order mark.
    pub(crate) fn encode(self, text: &str) -> Cow<'_, [u8]> {
        let unit = match self {
            Self::Utf8 => return Cow::Borrowed(text.as_bytes()),
            Self::Utf16(ByteOrder::Little) => u16::to_le_bytes,
            Self::Utf16(ByteOrder::Big) => u16::to_be_bytes,
        };
        let mut out = Vec::with_capacity(text.len() * 2);
        for u in text.encode_utf16() {
            out.extend_from_slice(&unit(u));
        }
        Cow::Owned(out)
    }
}

impl ByteOrder {
    /// Decodes UTF-16 bytes (the BOM becomes U+FEFF), refusing the first fault.
    pub(crate) fn decode(self, bytes: &[u8]) -> Result<String, Utf16Fault> {
        let mut first = None;
        let text = self.decode_with(bytes, &mut |fault| {
            first = Some(fault);
            false
        });
        first.map_or(Ok(text), Err)
    }

    /// Decodes UTF-16 bytes for showing them: each bad unit (and a last odd byte) as U+FFFD,
    /// and the first fault beside.
    pub(crate) fn decode_lossy(self, bytes: &[u8]) -> (String, Option<Utf16Fault>) {
        let mut first = None;
        let text = self.decode_with(bytes, &mut |fault| {
            first.get_or_insert(fault);
            true
        });
        (text, first)
    }

    /// Decodes, telling `fault` each fault; it says whether to go on (with U+FFFD for it).
    fn decode_with(self, bytes: &[u8], fault: &mut dyn FnMut(Utf16Fault) -> bool) -> String {
        let unit = match self {
            Self::Little => u16::from_le_bytes,
            Self::Big => u16::from_be_bytes,
        };
        let pairs = bytes.chunks_exact(2);
        let odd = !pairs.remainder().is_empty();
        let units = pairs.map(|pair| unit([pair[0], pair[1]]));
        // ASCII text takes one byte per two.
        let mut text = String::with_capacity(bytes.len() / 2 + 16);
        let mut at = 0;
        let mut lines = 1;
        for decoded in char::decode_utf16(units) {
            match decoded {
                Ok(c) => {
                    at += 2 * c.len_utf16();
                    lines += usize::from(c == '\n');
                    text.push(c);
                }
                Err(err) => {
                    let problem = Utf16Problem::UnpairedSurrogate(err.unpaired_surrogate());
                    if !fault(Utf16Fault {
                        problem,
                        offset: at,
                        line: lines,
                    }) {
                        return text;
                    }
                    at += 2;
                    text.push(char::REPLACEMENT_CHARACTER);
                }
            }
        }
        if odd {
            let fault = fault(Utf16Fault {
                problem: Utf16Problem::OddLength,
                offset: at,
                line: lines,
            });
            if fault {
                text.push(char::REPLACEMENT_CHARACTER);
            }
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn le(text: &str) -> Vec<u8> {
        text.encode_utf16().flat_map(u16::to_le_bytes).collect()
    }

    #[test]
    fn sniffing_tells_utf16_by_its_bom_and_refuses_utf32() {
        assert_eq!(
            Encoding::sniff(b"\xff\xfeh\0"),
            Ok(Encoding::Utf16(ByteOrder::Little))
        );
        assert_eq!(
            Encoding::sniff(b"\xfe\xff\0h"),
            Ok(Encoding::Utf16(ByteOrder::Big))
        );
        assert_eq!(
            Encoding::sniff(b"\xff\xfe"),
            Ok(Encoding::Utf16(ByteOrder::Little))
        );
        assert_eq!(Encoding::sniff(b"\xff\xfe\0\0h\0\0\0"), Err(Utf32::Le));
        assert_eq!(Encoding::sniff(b"\0\0\xfe\xff\0\0\0h"), Err(Utf32::Be));
        // No BOM, no UTF-16: ASCII in UTF-16 without a BOM is not recognised.
        assert_eq!(Encoding::sniff(b"h\0i\0"), Ok(Encoding::Utf8));
        assert_eq!(Encoding::sniff(b"\xef\xbb\xbfhi"), Ok(Encoding::Utf8));
        assert_eq!(Encoding::sniff(b""), Ok(Encoding::Utf8));
    }

    #[test]
    fn utf16_round_trips_in_both_byte_orders() {
        let text = "\u{feff}caf\u{e9} \u{1f600}\r\nz\r\n";
        for order in [ByteOrder::Little, ByteOrder::Big] {
            let bytes = Encoding::Utf16(order).encode(text).into_owned();
            assert_eq!(bytes.len(), 2 * text.encode_utf16().count());
            assert_eq!(order.decode(&bytes).as_deref(), Ok(text));
        }
        let le = Encoding::Utf16(ByteOrder::Little);
        let be = Encoding::Utf16(ByteOrder::Big);
        assert_eq!(&le.encode("\u{feff}A")[..], b"\xff\xfeA\0");
        assert_eq!(&be.encode("\u{feff}A")[..], b"\xfe\xff\0A");
        assert_eq!(&Encoding::Utf8.encode("A")[..], b"A");
    }

    #[test]
    fn faults_are_named_with_their_offset_and_line() {
        // A lone high surrogate on line 2, at byte 8 (BOM, "a", "\n", "b").
        let mut bytes = le("\u{feff}a\nb");
        bytes.extend_from_slice(&0xD800u16.to_le_bytes());
        bytes.extend_from_slice(&le("c"));
        let fault = ByteOrder::Little.decode(&bytes).unwrap_err();
        assert_eq!(
            fault,
            Utf16Fault {
                problem: Utf16Problem::UnpairedSurrogate(0xD800),
                offset: 8,
                line: 2,
            }
        );
        let (shown, first) = ByteOrder::Little.decode_lossy(&bytes);
        assert_eq!(shown, "\u{feff}a\nb\u{fffd}c");
        assert_eq!(first, Some(fault));
        // A lone low surrogate, big-endian.
        let bytes = b"\xfe\xff\xdc\x00\x00x";
        let fault = ByteOrder::Big.decode(bytes).unwrap_err();
        assert_eq!(fault.problem, Utf16Problem::UnpairedSurrogate(0xDC00));
        assert_eq!(fault.offset, 2);
        // An odd byte at the end.
        let mut bytes = le("\u{feff}ab");
        bytes.push(b'c');
        let fault = ByteOrder::Little.decode(&bytes).unwrap_err();
        assert_eq!((fault.problem, fault.offset), (Utf16Problem::OddLength, 6));
        assert_eq!(
            ByteOrder::Little.decode_lossy(&bytes).0,
            "\u{feff}ab\u{fffd}"
        );
    }
}
