//! Between our places and the protocol's: file paths and `file://` URIs, 1-based
//! line/column (columns in characters, as a person counts) and LSP positions (0-based, columns
//! in UTF-16 code units, the protocol's default encoding).

use std::path::{Path, PathBuf};

/// A `file://` URI for an absolute path, percent-encoding what a URI path may not hold. On
/// Windows `C:\src\a.rs` becomes `file:///C:/src/a.rs`, as language servers there expect.
pub(crate) fn uri_of(path: &Path) -> lsp_types::Uri {
    let mut text = String::from("file://");
    let bytes = path_bytes(path);
    if cfg!(windows) && !bytes.starts_with(b"/") {
        text.push('/');
    }
    for byte in bytes {
        if byte.is_ascii_alphanumeric() || b"/-._~!$&'()*+,;=:@".contains(&byte) {
            text.push(char::from(byte));
        } else {
            text.push_str(&format!("%{byte:02X}"));
        }
    }
    // Every byte is unreserved or escaped: this parses.
    text.parse().unwrap_or_else(|_| {
        "file:///"
            .parse()
            .unwrap_or_else(|_| unreachable!("a constant URI parses"))
    })
}

/// A path's bytes as a URI holds them: as they are on Unix; on Windows UTF-8, with `/` for
/// the separator.
fn path_bytes(path: &Path) -> Vec<u8> {
    #[cfg(unix)]
    return std::os::unix::ffi::OsStrExt::as_bytes(path.as_os_str()).to_vec();
    #[cfg(windows)]
    return path.to_string_lossy().replace('\\', "/").into_bytes();
}

/// The path of a `file://` URI, decoded ([`crate::util::file_uri_path`]); `None` for other
/// schemes.
pub(crate) fn path_of(uri: &lsp_types::Uri) -> Option<PathBuf> {
    crate::util::file_uri_path(uri.as_str())
}

/// The UTF-16 offset of a character column (0-based) in a line.
pub(crate) fn utf16_of_char(line: &str, chars: usize) -> u32 {
    let units: usize = line.chars().take(chars).map(char::len_utf16).sum();
    u32::try_from(units).unwrap_or(u32::MAX)
}

/// The character column (0-based) of a UTF-16 offset in a line.
pub(crate) fn char_of_utf16(line: &str, units: u32) -> usize {
    let mut seen = 0usize;
    let target = units as usize;
    for (i, c) in line.chars().enumerate() {
        if seen >= target {
            return i;
        }
        seen += c.len_utf16();
    }
    line.chars().count()
}

/// The lines of a text, without their endings (`\n` or `\r\n`).
pub(crate) fn line_at(text: &str, line: usize) -> Option<&str> {
    text.split('\n')
        .nth(line)
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
}

/// An LSP position as `line:col`, 1-based, the column in characters of `text`'s line (or
/// the UTF-16 column + 1 when the text is not at hand).
pub(crate) fn human(text: Option<&str>, position: lsp_types::Position) -> (usize, usize) {
    let line = position.line as usize;
    let col = match text.and_then(|t| line_at(t, line)) {
        Some(l) => char_of_utf16(l, position.character),
        None => position.character as usize,
    };
    (line + 1, col + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_uris_round_trip() {
        for path in ["/a/b.py", "/with space/ü.rs", "/odd/%41#?.c", "/x/[1].ts"] {
            let uri = uri_of(Path::new(path));
            assert!(uri.as_str().starts_with("file:///"), "{}", uri.as_str());
            assert!(
                !uri.as_str()[7..].contains(['#', '?', ' ']),
                "{}",
                uri.as_str()
            );
            assert_eq!(path_of(&uri).unwrap(), Path::new(path));
        }
        assert_eq!(
            uri_of(Path::new("/with space/a.py")).as_str(),
            "file:///with%20space/a.py"
        );
        let lower: lsp_types::Uri = "file:///x/%c3%bc.py".parse().unwrap();
        assert_eq!(path_of(&lower).unwrap(), Path::new("/x/ü.py"));
        let host: lsp_types::Uri = "file://localhost/x.py".parse().unwrap();
        assert_eq!(path_of(&host).unwrap(), Path::new("/x.py"));
        let other: lsp_types::Uri = "untitled:Untitled-1".parse().unwrap();
        assert_eq!(path_of(&other), None);
    }

    #[test]
    fn columns_convert_between_characters_and_utf16() {
        let line = "a😀b = 'é'";
        assert_eq!(utf16_of_char(line, 0), 0);
        assert_eq!(utf16_of_char(line, 2), 3, "the emoji is two units");
        assert_eq!(char_of_utf16(line, 3), 2);
        assert_eq!(char_of_utf16(line, 99), line.chars().count());
        let text = "first\r\nsecond 😀x\n";
        assert_eq!(line_at(text, 0), Some("first"));
        assert_eq!(
            human(Some(text), lsp_types::Position::new(1, 9)),
            (2, 9),
            "x sits after a two-unit emoji"
        );
        assert_eq!(human(None, lsp_types::Position::new(4, 2)), (5, 3));
    }
}
