//! Newline-delimited JSON-RPC over a byte stream (the stdio transport), with a direct decoder
//! for `tools/call`.
//!
//! rmcp's own stream transport reads every message through serde's buffered, untagged
//! dispatch: a `tools/call` is tried against each client request type in turn, and each miss
//! builds an error message. That was a quarter of the server's instructions per small call.
//! Here a `tools/call` request is decoded straight into rmcp's types; every other message,
//! and any `tools/call` the direct decoder does not accept, goes through rmcp's codec, so the
//! wire behaviour is rmcp's: the same line limit, BOM and CR handling, ignored non-MCP
//! notifications, unparsable lines dropped and a well-formed but unrecognised message answered
//! with Invalid Request. One difference: no request whose id can be read is left unanswered.
//! The answer to an unrecognised request carries its id (rmcp's carries none); a request whose
//! JSON cannot be read (nested deeper than serde's 128 levels, malformed after its id, cut
//! short) gets a Parse error with its id, and one over the line limit an Invalid Request with
//! its id, where the id comes before the cut; rmcp drops both.

use std::borrow::Cow;
use std::sync::{Arc, LazyLock};

use memchr::memmem;
use rmcp::RoleServer;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientRequest, ErrorData, JsonRpcMessage,
    JsonRpcRequest, JsonRpcVersion2_0, RequestId,
};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::{JsonRpcMessageCodec, JsonRpcMessageCodecError};
use serde::Deserialize;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::Mutex;
use tokio_util::bytes::BytesMut;
use tokio_util::codec::Decoder;

/// Lines longer than this are discarded (rmcp's limit for its stream transport).
const MAX_LINE: usize = 16 * 1024 * 1024;

/// A line buffer larger than this is not kept after its message.
const KEEP_LINE: usize = 256 * 1024;

/// How much of an over-long line is kept to find the request to answer: its first members.
const HEAD: usize = 4096;

/// UTF-8 byte order mark; JSON parsers may ignore a leading one (RFC 8259 §8.1).
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// The server side of a newline-delimited JSON-RPC stream.
pub(crate) struct LineTransport<R, W> {
    read: BufReader<R>,
    /// The line read so far. A `receive` dropped mid-line (rmcp polls it in a `select!`)
    /// leaves its bytes here, and the next call goes on with the same line.
    line: Vec<u8>,
    /// Lines longer than this are discarded ([`MAX_LINE`]).
    max_line: usize,
    /// Inside a line over the limit: skip up to its end.
    discarding: bool,
    write: Arc<Mutex<Option<W>>>,
}

impl<R, W> LineTransport<R, W>
where
    R: AsyncRead + Send + Unpin,
    W: AsyncWrite + Send + Unpin + 'static,
{
    pub(crate) fn new(read: R, write: W) -> Self {
        Self {
            read: BufReader::new(read),
            line: Vec::new(),
            max_line: MAX_LINE,
            discarding: false,
            write: Arc::new(Mutex::new(Some(write))),
        }
    }

    /// Reads up to the end of the next line into `self.line`. `false` at the end of the
    /// stream or on a read error.
    async fn read_line(&mut self) -> bool {
        loop {
            let available = match self.read.fill_buf().await {
                Ok([]) => return false,
                Ok(available) => available,
                Err(err) => {
                    tracing::error!("cannot read the client's messages: {err}");
                    return false;
                }
            };
            let newline = available.iter().position(|b| *b == b'\n');
            let take = newline.map_or(available.len(), |at| at + 1);
            if self.discarding {
                if newline.is_some() {
                    self.discarding = false;
                    self.answer_oversized();
                }
            } else if self.line.len() + take > self.max_line {
                tracing::error!(
                    max_line_length = self.max_line,
                    "an incoming message exceeded the maximum line length; discarding it"
                );
                // Its head is kept: it may say which request to answer.
                let room = HEAD.saturating_sub(self.line.len()).min(take);
                self.line.truncate(HEAD);
                self.line.extend_from_slice(&available[..room]);
                if newline.is_some() {
                    self.answer_oversized();
                } else {
                    self.discarding = true;
                }
            } else {
                self.line.extend_from_slice(&available[..take]);
                if newline.is_some() {
                    self.read.consume(take);
                    return true;
                }
            }
            self.read.consume(take);
        }
    }

    /// Empties the line buffer for the next message; one that grew for a large message is
    /// given back rather than kept at that size for the rest of the session.
    fn forget_line(&mut self) {
        if self.line.capacity() > KEEP_LINE {
            self.line = Vec::new();
        } else {
            self.line.clear();
        }
    }

    /// Answers a line that was too long to read, if its head (in `self.line`) shows a request,
    /// and forgets it.
    fn answer_oversized(&mut self) {
        if let Some(id) = request_id(&self.line) {
            let message = format!(
                "the request is longer than {}, the most gimlet reads in one message; send less \
                 in one call",
                size(self.max_line)
            );
            self.answer(ErrorData::invalid_request(message, None), Some(id));
        }
        self.line.clear();
    }

    /// Answers a message that could not be delivered. The answer goes out on its own task:
    /// `receive` may be dropped at any await (rmcp polls it in a `select!`), and a write cut
    /// short would garble the stream.
    fn answer(&mut self, error: ErrorData, id: Option<RequestId>) {
        let send = self.send(TxJsonRpcMessage::<RoleServer>::error(error, id));
        tokio::spawn(async move {
            if let Err(err) = send.await {
                tracing::debug!("cannot answer an unreadable message: {err}");
            }
        });
    }
}

impl<R, W> Transport<RoleServer> for LineTransport<R, W>
where
    R: AsyncRead + Send + Unpin,
    W: AsyncWrite + Send + Unpin + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let write = Arc::clone(&self.write);
        async move {
            if payload_size(&item) >= STREAM_FROM {
                let mut write = write.lock().await;
                let out = open(&mut write)?;
                return stream(item, out).await;
            }
            let mut bytes = serde_json::to_vec(&item)?;
            bytes.push(b'\n');
            let mut write = write.lock().await;
            let out = open(&mut write)?;
            out.write_all(&bytes).await?;
            out.flush().await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            if !self.read_line().await {
                return None;
            }
            let answer = match decode(&self.line) {
                Ok(Some(message)) => {
                    self.forget_line();
                    return Some(message);
                }
                Ok(None) => None,
                Err(JsonRpcMessageCodecError::Serde(err)) if !err.is_syntax() && !err.is_eof() => {
                    // Well-formed JSON that is no JSON-RPC message we know: a protocol error,
                    // answered with the request's id when it has one.
                    tracing::debug!("protocol error on an incoming message: {err}");
                    let id = request_id(body(&self.line));
                    Some((ErrorData::invalid_request("Invalid request", None), id))
                }
                Err(JsonRpcMessageCodecError::Serde(err)) => {
                    // JSON we cannot read: malformed, cut short, or nested deeper than the
                    // parser goes. If its top level, as far as it reads, shows a request, the
                    // request is answered, so that its client is not left waiting. Anything
                    // else is not: an answer without an id helps no client, and answering
                    // garbage can start an error storm with a peer that echoes it (other MCP
                    // SDKs ignore it too).
                    tracing::debug!("cannot read an incoming message: {err}");
                    request_id(body(&self.line)).map(|id| (unreadable(&err), Some(id)))
                }
                Err(err) => {
                    tracing::debug!("ignoring an unparsable incoming message: {err}");
                    None
                }
            };
            self.forget_line();
            if let Some((error, id)) = answer {
                self.answer(error, id);
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        drop(self.write.lock().await.take());
        Ok(())
    }
}

/// Messages carrying at least this many bytes of text are written as they are encoded, in
/// pieces of [`PIECE`] bytes, instead of encoded whole first: a 10 MiB read is then held once
/// (its text), not twice (its text and its JSON).
const STREAM_FROM: usize = 1 << 20;

/// The size of the pieces a large message is written in.
const PIECE: usize = 64 * 1024;

/// The writer, unless the transport was closed.
fn open<W>(write: &mut Option<W>) -> std::io::Result<&mut W> {
    write.as_mut().ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::NotConnected, "the transport is closed")
    })
}

/// Bytes of text and data a message carries in its results (tool content and resource
/// contents): what its JSON is about as long as.
fn payload_size(item: &TxJsonRpcMessage<RoleServer>) -> usize {
    use rmcp::model::{ContentBlock, ResourceContents, ServerResult};
    let JsonRpcMessage::Response(response) = item else {
        return 0;
    };
    match &response.result {
        ServerResult::CallToolResult(result) => result
            .content
            .iter()
            .map(|block| match block {
                ContentBlock::Text(text) => text.text.len(),
                ContentBlock::Image(image) => image.data.len(),
                _ => 0,
            })
            .sum(),
        ServerResult::ReadResourceResult(result) => result
            .contents
            .iter()
            .map(|contents| match contents {
                ResourceContents::TextResourceContents { text, .. } => text.len(),
                ResourceContents::BlobResourceContents { blob, .. } => blob.len(),
                _ => 0,
            })
            .sum(),
        _ => 0,
    }
}

/// Writes a message while it is encoded: the encoding runs on the blocking pool and hands
/// over pieces of [`PIECE`] bytes through a channel of two, so at most a few pieces of the JSON
/// exist at once. A failed write stops the encoding.
async fn stream<W: AsyncWrite + Unpin>(
    item: TxJsonRpcMessage<RoleServer>,
    out: &mut W,
) -> std::io::Result<()> {
    let (send, mut pieces) = tokio::sync::mpsc::channel::<Vec<u8>>(2);
    let encode = tokio::task::spawn_blocking(move || {
        let mut writer = Pieces {
            piece: Vec::with_capacity(PIECE),
            send,
        };
        serde_json::to_writer(&mut writer, &item)?;
        drop(item);
        writer.piece.push(b'\n');
        writer.hand_over()
    });
    while let Some(piece) = pieces.recv().await {
        out.write_all(&piece).await?;
    }
    encode.await.map_err(std::io::Error::other)??;
    out.flush().await
}

/// A writer that hands its bytes over in pieces ([`stream`]).
struct Pieces {
    piece: Vec<u8>,
    send: tokio::sync::mpsc::Sender<Vec<u8>>,
}

impl Pieces {
    fn hand_over(&mut self) -> std::io::Result<()> {
        let piece = std::mem::replace(&mut self.piece, Vec::with_capacity(PIECE));
        self.send.blocking_send(piece).map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::BrokenPipe,
                "the answer could not be written",
            )
        })
    }
}

impl std::io::Write for Pieces {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.piece.extend_from_slice(bytes);
        if self.piece.len() >= PIECE {
            self.hand_over()?;
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// One line (with its `\n`) as a client message. `Ok(None)`: nothing to deliver (blank, or
/// a notification rmcp ignores for compatibility).
fn decode(line: &[u8]) -> Result<Option<RxJsonRpcMessage<RoleServer>>, JsonRpcMessageCodecError> {
    let body = body(line);
    if body.is_empty() {
        return Ok(None);
    }
    if let Some(call) = decode_call(body) {
        return Ok(Some(call));
    }
    let mut buffer = BytesMut::from(line);
    // The codec strips the BOM and the CR itself; a fresh one per line has no state to keep.
    JsonRpcMessageCodec::<RxJsonRpcMessage<RoleServer>>::new_with_max_length(MAX_LINE)
        .decode(&mut buffer)
}

/// The message in a line: without its line ending and a leading byte order mark.
fn body(line: &[u8]) -> &[u8] {
    let body = line.strip_suffix(b"\n").unwrap_or(line);
    let body = body.strip_suffix(b"\r").unwrap_or(body);
    body.strip_prefix(BOM).unwrap_or(body)
}

/// The top-level members of a message that could not be decoded, as far as they can be read:
/// enough to answer it. `serde_json` skips the values it ignores without a depth limit, so
/// this reads the outline of a message nested deeper than a full parse allows; and what was
/// read before an error stays, so the head of a line cut short or malformed further on tells
/// too.
#[derive(Default)]
struct Outline {
    id: Option<RequestId>,
    method: bool,
    result: bool,
    error: bool,
}

impl<'de> serde::de::DeserializeSeed<'de> for &mut Outline {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> serde::de::Visitor<'de> for &mut Outline {
    type Value = ();

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("a JSON-RPC message")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            match &*key {
                "id" => {
                    self.id = map.next_value()?;
                    continue;
                }
                "method" => self.method = true,
                "result" => self.result = true,
                "error" => self.error = true,
                _ => {}
            }
            map.next_value::<serde::de::IgnoredAny>()?;
        }
        Ok(())
    }
}

/// The id of an undecodable message if it is a request: an object whose top level, as far as
/// it can be read, has a method and an id and no result or error. A response is never
/// answered: its id is one of ours, and an error with it would reach whichever request of the
/// client's own carries the same id.
fn request_id(body: &[u8]) -> Option<RequestId> {
    use serde::de::DeserializeSeed as _;
    let mut outline = Outline::default();
    // An error ends the reading; what was read before it stays in `outline`.
    let _ = (&mut outline).deserialize(&mut serde_json::Deserializer::from_slice(body));
    (outline.method && !outline.result && !outline.error)
        .then_some(outline.id)
        .flatten()
}

/// `bytes` for a message: in MiB when it is a whole number of them.
fn size(bytes: usize) -> String {
    const MIB: usize = 1 << 20;
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else {
        format!("{bytes} bytes")
    }
}

/// The answer to a request whose JSON could not be read.
fn unreadable(err: &serde_json::Error) -> ErrorData {
    let message = if err.to_string().starts_with("recursion limit exceeded") {
        String::from(
            "the request is nested more than 128 levels deep, deeper than gimlet reads; send \
             it with less nesting",
        )
    } else {
        format!("cannot read the request as JSON: {err}")
    };
    ErrorData::parse_error(message, None)
}

/// A `tools/call` request, the shape rmcp accepts: `jsonrpc: "2.0"`, an id, the method, its
/// params, and no `result` or `error` member.
#[derive(Deserialize)]
struct CallMessage<'a> {
    /// Parsing it checks it is "2.0".
    #[serde(rename = "jsonrpc")]
    _jsonrpc: JsonRpcVersion2_0,
    id: RequestId,
    #[serde(borrow)]
    method: Cow<'a, str>,
    params: CallToolRequestParams,
    #[serde(default, deserialize_with = "present")]
    result: bool,
    #[serde(default, deserialize_with = "present")]
    error: bool,
}

/// `true` for a member that is there, whatever its value.
fn present<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
    serde::de::IgnoredAny::deserialize(deserializer)?;
    Ok(true)
}

/// The direct decoder. `None` for anything but a well-formed `tools/call`, which then takes
/// rmcp's path (and gets rmcp's answer if it is malformed).
fn decode_call(body: &[u8]) -> Option<RxJsonRpcMessage<RoleServer>> {
    // A cheap look before parsing: most other messages never name the method. The searcher
    // is built once, not per message.
    static METHOD: LazyLock<memmem::Finder<'static>> =
        LazyLock::new(|| memmem::Finder::new(b"\"tools/call\""));
    METHOD.find(body)?;
    let message: CallMessage<'_> = serde_json::from_slice(body).ok()?;
    if message.method != "tools/call" || message.result || message.error {
        return None;
    }
    let mut params = message.params;
    // rmcp keeps a request's `_meta` in its extensions, not in the params.
    let meta = params.meta.take();
    let mut request = CallToolRequest::new(params);
    if let Some(meta) = meta {
        request.extensions.insert(meta);
    }
    Some(JsonRpcMessage::Request(JsonRpcRequest::new(
        message.id,
        ClientRequest::CallToolRequest(request),
    )))
}

#[cfg(test)]
#[path = "lines_tests.rs"]
mod tests;
