//! The LSP base protocol: `Content-Length` headers, a blank line, a JSON body.
//!
//! Our own few lines over tokio rather than a framework crate: a reader that refuses headers
//! and bodies over fixed limits (a server that floods us cannot grow our memory), and a
//! writer that frames one message.

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The largest message body we accept from a server.
pub(crate) const MAX_MESSAGE_BYTES: usize = 32 * 1024 * 1024;
/// The largest header line.
const MAX_HEADER_LINE: usize = 4096;
/// Header lines per message at most.
const MAX_HEADERS: usize = 16;

/// Why a message could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FrameError {
    /// The stream ended (between messages).
    #[error("the server closed its output")]
    Closed,
    /// Reading failed.
    #[error("reading from the server: {0}")]
    Io(#[from] std::io::Error),
    /// The header was not what the protocol says.
    #[error("the server sent a malformed header: {0}")]
    Header(String),
    /// The body was over [`MAX_MESSAGE_BYTES`].
    #[error("the server sent a message of {0} bytes, over the {MAX_MESSAGE_BYTES}-byte limit")]
    TooLarge(usize),
}

/// Reads one message body.
pub(crate) async fn read_message<R: AsyncBufRead + Unpin>(
    reader: &mut R,
) -> Result<Vec<u8>, FrameError> {
    let mut length: Option<usize> = None;
    let mut line = Vec::new();
    let mut headers = 0;
    loop {
        line.clear();
        let n = (&mut *reader)
            .take(MAX_HEADER_LINE as u64)
            .read_until(b'\n', &mut line)
            .await?;
        if n == 0 {
            return Err(if headers == 0 {
                FrameError::Closed
            } else {
                FrameError::Header(String::from("the stream ended inside a header"))
            });
        }
        if line.last() != Some(&b'\n') {
            return Err(FrameError::Header(format!(
                "a header line over {MAX_HEADER_LINE} bytes"
            )));
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches(['\r', '\n']);
        if text.is_empty() {
            if headers == 0 {
                // Stray blank lines between messages are tolerated.
                continue;
            }
            break;
        }
        headers += 1;
        if headers > MAX_HEADERS {
            return Err(FrameError::Header(String::from("too many header lines")));
        }
        if let Some((name, value)) = text.split_once(':')
            && name.trim().eq_ignore_ascii_case("content-length")
        {
            length = Some(value.trim().parse().map_err(|_| {
                FrameError::Header(format!("Content-Length `{}` is not a number", value.trim()))
            })?);
        }
    }
    let length = length.ok_or_else(|| FrameError::Header(String::from("no Content-Length")))?;
    if length > MAX_MESSAGE_BYTES {
        return Err(FrameError::TooLarge(length));
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).await.map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            FrameError::Header(String::from("the stream ended inside a message"))
        } else {
            FrameError::Io(e)
        }
    })?;
    Ok(body)
}

/// Frames a message body.
pub(crate) fn frame(body: &[u8]) -> Vec<u8> {
    let mut framed = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    framed.extend_from_slice(body);
    framed
}

/// Writes one framed message and flushes.
pub(crate) async fn write_frame<W: AsyncWrite + Unpin>(
    writer: &mut W,
    framed: &[u8],
) -> std::io::Result<()> {
    writer.write_all(framed).await?;
    writer.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn read_all(input: &[u8]) -> Vec<Result<Vec<u8>, String>> {
        let mut reader = tokio::io::BufReader::new(input);
        let mut out = Vec::new();
        loop {
            match read_message(&mut reader).await {
                Err(FrameError::Closed) => return out,
                Err(e) => {
                    out.push(Err(e.to_string()));
                    return out;
                }
                Ok(body) => out.push(Ok(body)),
            }
        }
    }

    #[tokio::test]
    async fn messages_round_trip_with_extra_headers() {
        let mut input = frame(b"{\"a\":1}");
        input.extend_from_slice(
            b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\ncontent-length: 2\r\n\r\n{}",
        );
        let got = read_all(&input).await;
        assert_eq!(got, vec![Ok(b"{\"a\":1}".to_vec()), Ok(b"{}".to_vec())]);
    }

    #[tokio::test]
    async fn oversized_and_malformed_messages_are_refused_without_reading_them() {
        let huge = format!("Content-Length: {}\r\n\r\n", MAX_MESSAGE_BYTES + 1);
        let got = read_all(huge.as_bytes()).await;
        assert!(
            matches!(&got[..], [Err(e)] if e.contains("over the")),
            "{got:?}"
        );
        let got = read_all(b"Content-Length: ten\r\n\r\n").await;
        assert!(
            matches!(&got[..], [Err(e)] if e.contains("not a number")),
            "{got:?}"
        );
        let got = read_all(b"X-Other: 1\r\n\r\n{}").await;
        assert!(
            matches!(&got[..], [Err(e)] if e.contains("no Content-Length")),
            "{got:?}"
        );
        let long = vec![b'x'; MAX_HEADER_LINE + 10];
        let got = read_all(&long).await;
        assert!(
            matches!(&got[..], [Err(e)] if e.contains("header line over")),
            "{got:?}"
        );
        let got = read_all(b"Content-Length: 10\r\n\r\n{}").await;
        assert!(
            matches!(&got[..], [Err(e)] if e.contains("inside a message")),
            "{got:?}"
        );
    }
}
