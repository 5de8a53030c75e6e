//! `read`: numbered lines of a text file, an image, or a clear refusal.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, Read};
use std::time::SystemTime;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use crate::context::{AccessKind, ToolContext, ToolEnv};
use crate::error::ToolError;
use crate::fs::{ContentHash, FileStamp, Hasher, ResolvedPath, nowait};
use crate::images::{self, Format, ImageRefusal};
use crate::permission::Access;
use crate::text::{ByteOrder, Encoding, EncodingError, Utf16Fault};
use crate::tool::Tool;
use crate::vocab::{Content, FilePage, OutputLimits, ToolFlags, ToolOutput};

const DESCRIPTION: &str = include_str!("read.md");

/// Lines returned when no `limit` is given, unless the line limit leaves less room (see
/// [`default_limit`]).
pub(crate) const DEFAULT_LIMIT: usize = 2000;
/// Lines a page's footer takes: a blank line, the footer, a note about the encoding.
const FOOTER_LINES: usize = 3;

/// Lines returned when no `limit` is given: [`DEFAULT_LIMIT`], or fewer when the output's line
/// limit would not hold them and their footer.
fn default_limit(limits: OutputLimits) -> usize {
    DEFAULT_LIMIT
        .min(limits.max_lines.saturating_sub(FOOTER_LINES))
        .max(1)
}
/// Characters after which a line is cut.
pub(crate) const MAX_LINE_CHARS: usize = 2000;
/// Bytes inspected to tell text from binary.
const SNIFF_BYTES: usize = 8192;

/// Arguments of `read`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadArgs {
    /// The file to read: absolute, or relative to the first root folder.
    pub path: String,
    /// The 1-based line number to start at (default 1).
    pub offset: Option<usize>,
    /// How many lines to return (default 1997, so that the page and its footer fit in 2000
    /// lines).
    pub limit: Option<usize>,
}

/// The `read` tool.
#[derive(Debug, Default, Clone, Copy)]
pub struct ReadTool;

impl Tool for ReadTool {
    type Args = ReadArgs;
    const NAME: &'static str = "read";
    const TITLE: &'static str = "Read file";

    fn description(&self, _env: &ToolEnv) -> Cow<'static, str> {
        DESCRIPTION.into()
    }

    fn flags(&self, _args: Option<&ReadArgs>) -> ToolFlags {
        ToolFlags::READ_ONLY
    }

    fn inline(&self) -> bool {
        true
    }

    async fn validate(&self, mut args: ReadArgs, ctx: &ToolContext) -> Result<ReadArgs, ToolError> {
        if args.limit == Some(0) {
            return Err(ToolError::invalid(
                "`limit` must be at least 1 (it is a number of lines)",
            ));
        }
        // The default page leaves room for its footer within the line limit: a host that
        // keeps only the first 2000 lines of a result still shows the footer.
        if args.limit.is_none() {
            args.limit = Some(default_limit(ctx.env().limits()));
        }
        // Line numbers start at 1; treat 0 as "from the start" rather than failing.
        if args.offset == Some(0) {
            args.offset = Some(1);
        }
        Ok(args)
    }

    async fn accesses(&self, args: &ReadArgs, ctx: &ToolContext) -> Result<Vec<Access>, ToolError> {
        Ok(vec![ctx.path_access(&args.path, AccessKind::Read).await?])
    }

    async fn execute(&self, args: ReadArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        // A small cached file is read in place; anything else on the blocking pool.
        ctx.nonblocking_first(move |ctx| read_blocking(&args, ctx))
            .await
    }
}

fn read_blocking(args: &ReadArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
    let resolved = ctx.resolve_allowed(&args.path)?;
    let (mut file, meta) = resolved
        .open_regular()
        .map_err(|e| resolved.with_similar_names(e))?;
    // One byte more than the file has: a small file is then read whole, and its end seen,
    // with one read.
    let size = usize::try_from(meta.len()).unwrap_or(usize::MAX);
    let mut head = vec![0; SNIFF_BYTES.min(size.saturating_add(1))];
    let head_len = read_up_to(&mut file, &mut head, size).map_err(|e| io_error(&resolved, e))?;
    let mut at_end = head_len == size && head.len() > size;
    head.truncate(head_len);
    let is_notebook = resolved.path.extension().is_some_and(|e| e == "ipynb");
    let image = Format::sniff(&head);
    if nowait::active() && (!at_end || is_notebook || image.is_some()) {
        // Attempts without waiting serve small text files read whole in the first read (the
        // only read they make); the rest is read where waiting is allowed.
        return Err(io_error(&resolved, nowait::would_block()));
    }
    if let Some(format) = image {
        return read_image(&resolved, file, head, &meta, format, ctx);
    }
    match Encoding::sniff(&head) {
        Ok(Encoding::Utf8) => {}
        Ok(Encoding::Utf16(order)) => {
            let file = (!at_end).then_some(file);
            return read_utf16(&resolved, file, head, &meta, order, args, ctx);
        }
        Err(utf32) => {
            return Err(ToolError::failed(format!(
                "`{}`: {}",
                resolved.display(),
                EncodingError::Utf32(utf32)
            )));
        }
    }
    if let Some(kind) = binary_kind(&head) {
        return Err(ToolError::failed(format!(
            "`{}` is a binary file ({kind}, {} bytes); `read` shows text files and PNG, JPEG, GIF \
             and WebP images only",
            resolved.display(),
            meta.len()
        )));
    }
    if is_notebook && meta.len() <= MAX_NOTEBOOK_BYTES {
        let mut bytes = head;
        file.read_to_end(&mut bytes)
            .map_err(|e| io_error(&resolved, e))?;
        match crate::notebook::Notebook::parse(&bytes) {
            Ok(notebook) => return Ok(read_notebook(&resolved, &notebook, &bytes, &meta, ctx)),
            Err(why) => {
                tracing::debug!(
                    "{} is not a notebook ({why}); shown as text",
                    resolved.display()
                );
                let (again, _) = resolved.open_regular()?;
                file = again;
                head = Vec::new();
                at_end = false;
            }
        }
    }
    let page = Page::read(head, at_end, Some(file), meta.len(), args)
        .map_err(|e| io_error(&resolved, e))?;
    page.record(&resolved, &meta, ctx);
    page.into_output(&resolved, args)
}

/// UTF-16 files are shown up to this size (they are read whole to be decoded): the largest
/// file the edit tools change.
const MAX_UTF16_BYTES: u64 = crate::change::MAX_EDIT_BYTES;

/// A UTF-16 text file (told by its BOM; [`crate::text::Encoding`]): read whole, decoded, and
/// shown as a UTF-8 one is, its BOM left out; the footer names the encoding. The hash and size
/// are those of the bytes on disk, as for every file, so the edit tools' freshness check
/// compares like with like. `rest` is the file when `head` is not all of it.
fn read_utf16(
    resolved: &ResolvedPath,
    rest: Option<File>,
    mut bytes: Vec<u8>,
    meta: &std::fs::Metadata,
    order: ByteOrder,
    args: &ReadArgs,
    ctx: &ToolContext,
) -> Result<ToolOutput, ToolError> {
    let encoding = Encoding::Utf16(order);
    let too_big = |len: u64| {
        ToolError::failed(format!(
            "`{}` is {encoding} text of {len} bytes; `read` shows UTF-16 files up to \
             {MAX_UTF16_BYTES} bytes. Search it with `grep`, or convert it first (e.g. `iconv -f \
             UTF-16 -t UTF-8`)",
            resolved.display()
        ))
    };
    if meta.len() > MAX_UTF16_BYTES {
        return Err(too_big(meta.len()));
    }
    if let Some(file) = rest {
        file.take(MAX_UTF16_BYTES + 1 - bytes.len() as u64)
            .read_to_end(&mut bytes)
            .map_err(|e| io_error(resolved, e))?;
        if bytes.len() as u64 > MAX_UTF16_BYTES {
            return Err(too_big(bytes.len() as u64));
        }
    }
    let (mut text, fault) = order.decode_lossy(&bytes);
    if text.starts_with('\u{feff}') {
        text.drain(..'\u{feff}'.len_utf8());
    }
    if text.chars().take(SNIFF_BYTES / 2).any(|c| c == '\0') {
        return Err(ToolError::failed(format!(
            "`{}` is a binary file (it starts with a {encoding} byte-order mark, but decodes to \
             NUL characters; {} bytes); `read` shows text files and PNG, JPEG, GIF and WebP \
             images only",
            resolved.display(),
            bytes.len()
        )));
    }
    let size = text.len() as u64;
    let mut page =
        Page::read(text.into_bytes(), true, None, size, args).map_err(|e| io_error(resolved, e))?;
    page.hash = ContentHash::of(&bytes);
    page.bytes = bytes.len() as u64;
    page.utf16 = Some((encoding, fault));
    page.record(resolved, meta, ctx);
    page.into_output(resolved, args)
}

/// Notebooks up to this size are shown as cells.
const MAX_NOTEBOOK_BYTES: u64 = 64 * 1024 * 1024;

/// A notebook's cells (ids, types, sources, text outputs) instead of its JSON.
fn read_notebook(
    resolved: &ResolvedPath,
    notebook: &crate::notebook::Notebook,
    bytes: &[u8],
    meta: &std::fs::Metadata,
    ctx: &ToolContext,
) -> ToolOutput {
    let hash = ContentHash::of(bytes);
    ctx.session().files().record(
        &resolved.path,
        FileStamp {
            hash,
            size: bytes.len() as u64,
            modified: meta.modified().ok(),
            seen_at: SystemTime::now(),
        },
    );
    let display = resolved.display();
    let language = notebook
        .language()
        .map(|l| format!("{l}, "))
        .unwrap_or_default();
    let text = format!(
        "Notebook `{display}` ({language}{} cells, hash {hash}); edit cells with `notebook_edit`.\n\n{}",
        notebook.len(),
        notebook.render().trim_end()
    );
    ToolOutput::text(text).with_title(display.clone())
}

fn io_error(resolved: &ResolvedPath, err: io::Error) -> ToolError {
    ToolError::io(format!("reading {}", resolved.display()), err)
}

/// Fills `buf` as far as the file allows, stopping early once `enough` bytes are in (after
/// one read at least); returns the bytes read. With `buf` one byte larger than the file's size
/// and `enough` that size, a small file is read whole, and its end known, with a single read.
fn read_up_to(file: &mut File, buf: &mut [u8], enough: usize) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() && (filled < enough || filled == 0) {
        // Inside a nowait attempt, only the head is read, from the start, and nothing after
        // it (see `read_blocking`): positional reads that fail rather than wait.
        let read = if nowait::active() {
            nowait::read_at(file, &mut buf[filled..], filled as u64)
        } else {
            file.read(&mut buf[filled..])
        };
        match read {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// The lines of one page of a file, with what the whole file told us on the way.
struct Page {
    /// The shown lines as the answer shows them: each with its number, a tab, the line
    /// without its line ending, and `\n`. Written as the file streams by, so that a large
    /// page is held once, not once per line and again joined.
    text: String,
    /// The number of the last shown line (0 before the first).
    last_shown: usize,
    /// Lines in the whole file.
    total_lines: usize,
    /// Bytes in the whole file.
    bytes: u64,
    /// Hash of the whole file.
    hash: ContentHash,
    /// The byte offset of the first invalid UTF-8 sequence, if the shown part has one.
    invalid_utf8_at: Option<usize>,
    /// For text decoded from UTF-16: its encoding, and the first fault in the whole file.
    utf16: Option<(Encoding, Option<Utf16Fault>)>,
}

/// Bytes of one line kept for display: enough for [`MAX_LINE_CHARS`] characters of any width.
const LINE_KEEP_BYTES: usize = MAX_LINE_CHARS * 4;

/// The line being assembled while streaming.
#[derive(Default)]
struct LineBuf {
    /// Its first bytes (up to [`LINE_KEEP_BYTES`]), if the line is on the page.
    kept: Vec<u8>,
    /// Its full length in bytes.
    len: usize,
    /// Its byte offset in the file.
    start: u64,
}

impl LineBuf {
    fn push(&mut self, bytes: &[u8], wanted: bool) {
        if wanted && self.kept.len() < LINE_KEEP_BYTES {
            let room = LINE_KEEP_BYTES - self.kept.len();
            self.kept.extend_from_slice(&bytes[..bytes.len().min(room)]);
        }
        self.len += bytes.len();
    }
}

impl Page {
    /// Streams the file once: hashes it, counts its lines, keeps the requested ones. `head`
    /// is what was read already; `at_end`: it is the whole file (then `file` may be `None`).
    fn read(
        head: Vec<u8>,
        at_end: bool,
        file: Option<File>,
        size: u64,
        args: &ReadArgs,
    ) -> io::Result<Self> {
        let first = args.offset.unwrap_or(1);
        let last = first.saturating_add(args.limit.unwrap_or(DEFAULT_LIMIT)) - 1;
        let wanted = move |number: usize| (first..=last).contains(&number);
        let mut hasher = Hasher::default();
        let mut page = Self {
            // The whole file, numbered, when it is small; a large page grows as it goes.
            text: String::with_capacity(
                usize::try_from(size.min(1 << 20)).unwrap_or(0) * 5 / 4 + 160,
            ),
            last_shown: 0,
            total_lines: 0,
            bytes: 0,
            hash: ContentHash::of(b""),
            invalid_utf8_at: None,
            utf16: None,
        };
        let mut line = LineBuf::default();
        // Small files are read whole in the first chunk. The buffer for the rest is sized to
        // what is left plus one byte to see the end: at least 4 KiB (kernel files say their
        // size is 0) and at most 64 KiB.
        let left = usize::try_from(size.saturating_sub(head.len() as u64)).unwrap_or(usize::MAX);
        let mut feed = |page: &mut Self, chunk: &[u8]| {
            hasher.update(chunk);
            let mut rest = chunk;
            while let Some(newline) = memchr_newline(rest) {
                let (text, after) = rest.split_at(newline + 1);
                let wanted_line = wanted(page.total_lines + 1);
                if line.len == 0 {
                    // The whole line is in this chunk: shown from it, not copied first.
                    page.end_line(text, text.len(), line.start, wanted_line);
                } else {
                    line.push(text, wanted_line);
                    page.end_line(&line.kept, line.len, line.start, wanted_line);
                    line.kept.clear();
                    line.len = 0;
                }
                line.start = page.bytes + (chunk.len() - after.len()) as u64;
                rest = after;
            }
            line.push(rest, wanted(page.total_lines + 1));
            page.bytes += chunk.len() as u64;
        };
        feed(&mut page, &head);
        if let Some(mut file) = file
            && !(at_end && page.bytes == size)
        {
            drop(head);
            let mut buf = vec![0; left.saturating_add(1).clamp(4096, 64 * 1024)];
            loop {
                let n = read_up_to(&mut file, &mut buf, usize::MAX)?;
                if n == 0 {
                    break;
                }
                feed(&mut page, &buf[..n]);
            }
        }
        if line.len > 0 {
            // A last line without a newline.
            page.end_line(
                &line.kept,
                line.len,
                line.start,
                wanted(page.total_lines + 1),
            );
        }
        page.hash = hasher.finish();
        Ok(page)
    }

    /// Counts the next line and, if `wanted`, shows it: `bytes` is its start (all of it, or at
    /// least its first [`LINE_KEEP_BYTES`]), `len` its full length with its line ending, and
    /// `start` its offset in the file.
    fn end_line(&mut self, bytes: &[u8], len: usize, start: u64, wanted: bool) {
        self.total_lines += 1;
        if wanted {
            let mut bytes = &bytes[..bytes.len().min(LINE_KEEP_BYTES)];
            let capped = len > bytes.len();
            while let [rest @ .., b'\n' | b'\r'] = bytes {
                bytes = rest;
            }
            let text = match std::str::from_utf8(bytes) {
                Ok(text) => Cow::Borrowed(text),
                // The kept prefix ends inside a character: not an encoding error.
                Err(err) if capped && err.error_len().is_none() => {
                    String::from_utf8_lossy(&bytes[..err.valid_up_to()])
                }
                Err(err) => {
                    let at = start + err.valid_up_to() as u64;
                    self.invalid_utf8_at
                        .get_or_insert(usize::try_from(at).unwrap_or(usize::MAX));
                    String::from_utf8_lossy(bytes)
                }
            };
            reserve(&mut self.text, text.len() + 64);
            push_number(&mut self.text, self.total_lines);
            push_cut_line(&mut self.text, &text, len);
            self.text.push('\n');
            self.last_shown = self.total_lines;
        }
    }

    /// Remembers in the session what was read (for the edit tools' freshness check).
    fn record(&self, resolved: &ResolvedPath, meta: &std::fs::Metadata, ctx: &ToolContext) {
        ctx.session().files().record(
            &resolved.path,
            FileStamp {
                hash: self.hash,
                size: self.bytes,
                modified: meta.modified().ok(),
                seen_at: SystemTime::now(),
            },
        );
    }

    fn into_output(
        self,
        resolved: &ResolvedPath,
        args: &ReadArgs,
    ) -> Result<ToolOutput, ToolError> {
        let display = resolved.display();
        let first = args.offset.unwrap_or(1);
        let encoding = self.utf16.map(|(encoding, _)| encoding);
        if self.total_lines == 0 {
            let text = match encoding {
                None => format!("[{display}: empty file (0 bytes), hash {}]", self.hash),
                Some(encoding) => format!(
                    "[{display}: empty {encoding} file ({} bytes: its byte-order mark), hash {}]",
                    self.bytes, self.hash
                ),
            };
            let mut structured =
                json!({"path": display, "total_lines": 0, "hash": self.hash.to_string()});
            if let Some(encoding) = encoding {
                structured["encoding"] = json!(encoding.to_string());
            }
            return Ok(ToolOutput::text(text)
                .with_title(display.clone())
                .with_structured(structured));
        }
        if first > self.total_lines {
            return Err(ToolError::invalid(format!(
                "`offset` {first} is past the end of `{display}`, which has {} lines; use an offset \
                 from 1 to {}",
                self.total_lines, self.total_lines
            )));
        }
        let end = if self.last_shown == 0 {
            first
        } else {
            self.last_shown
        };
        let hash = self.hash.to_string();
        let mut text = self.text;
        let _ = write!(
            text,
            "\n[{display}: lines {first}-{end} of {}, ",
            self.total_lines
        );
        if let Some(encoding) = encoding {
            let _ = write!(text, "{encoding}, ");
        }
        let _ = write!(text, "hash {hash}");
        if end < self.total_lines {
            let _ = write!(text, "; use offset={} to read on", end + 1);
        }
        text.push(']');
        if let Some(at) = self.invalid_utf8_at {
            let _ = write!(
                text,
                "\n[note: the file is not valid UTF-8 (first bad byte at offset {at}); bad bytes are \
                 shown as U+FFFD, and the edit tools will refuse this file]"
            );
        }
        if let Some((encoding, Some(fault))) = self.utf16 {
            let _ = write!(
                text,
                "\n[note: the file is not valid {encoding} (first fault: {} at offset {}); it is \
                 shown as U+FFFD, and the edit tools will refuse this file]",
                fault.problem, fault.offset
            );
        }
        let mut structured = json!({
            "path": display,
            "start_line": first,
            "end_line": end,
            "total_lines": self.total_lines,
            "bytes": self.bytes,
            "hash": self.hash.to_string(),
        });
        if let Some(encoding) = encoding {
            structured["encoding"] = json!(encoding.to_string());
        }
        let mut output = ToolOutput::text(text)
            .with_title(display.clone())
            .with_structured(structured);
        output.page = Some(FilePage {
            first,
            last: end,
            total: self.total_lines,
        });
        Ok(output)
    }
}

/// Appends a line number right-aligned in six columns and a tab, as `cat -n` shows it
/// (`{number:>6}\t`, without the formatting machinery: it runs once per shown line).
fn push_number(text: &mut String, number: usize) {
    let mut digits = [b' '; 24];
    let mut at = digits.len() - 1;
    digits[at] = b'\t';
    let mut left = number;
    loop {
        at -= 1;
        digits[at] = b"0123456789"[left % 10];
        left /= 10;
        if left == 0 {
            break;
        }
    }
    let from = at.min(digits.len() - 7);
    text.push_str(std::str::from_utf8(&digits[from..]).unwrap_or("\t"));
}

/// A page's text past this size grows at once to [`LARGE_TEXT`] bytes of capacity.
const LARGE_FROM: usize = 1 << 20;

/// The capacity of a large page's text: over 32 MiB, the ceiling of glibc's dynamic mmap
/// threshold. glibc maps a block that large on its own and unmaps it when it is freed, without
/// raising the threshold, so the pages of a 10 MiB read go back to the system as soon as its
/// answer is written. A smaller mapped block would, once freed, raise the threshold to its
/// size, and the next large page would be built on the heap and stay resident after it is
/// freed. Capacity is address space only: the pages touched are the text's.
const LARGE_TEXT: usize = (32 << 20) + (64 << 10);

/// Makes room for `more` bytes, growing a large text straight to [`LARGE_TEXT`] (or double).
fn reserve(text: &mut String, more: usize) {
    let needed = text.len() + more;
    if needed > text.capacity() && needed > LARGE_FROM {
        let capacity = needed.max(LARGE_TEXT).max(text.len() * 2);
        text.reserve_exact(capacity - text.len());
    }
}

/// Appends a line cut after [`MAX_LINE_CHARS`] characters, with a marker giving its full
/// length.
fn push_cut_line(out: &mut String, line: &str, full_bytes: usize) {
    if line.len() <= MAX_LINE_CHARS && full_bytes <= line.len() + 2 {
        // Too few bytes for too many characters, and all of the line: nothing to cut (most
        // lines, found without counting characters).
        out.push_str(line);
        return;
    }
    match line.char_indices().nth(MAX_LINE_CHARS) {
        None if full_bytes <= line.len() + 2 => out.push_str(line),
        None => {
            out.push_str(line);
            let _ = write!(out, "... [line cut: {full_bytes} bytes in all]");
        }
        Some((cut, _)) => {
            out.push_str(&line[..cut]);
            let _ = write!(out, "... [line cut: {full_bytes} bytes in all]");
        }
    }
}

fn memchr_newline(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|&b| b == b'\n')
}

/// An image, decoded and checked, and scaled down and re-encoded when it is larger than a model
/// takes ([`crate::images`]). Decoding is CPU work: this runs on the blocking pool (the attempt
/// without waiting leaves images to it).
fn read_image(
    resolved: &ResolvedPath,
    mut file: File,
    head: Vec<u8>,
    meta: &std::fs::Metadata,
    format: Format,
    ctx: &ToolContext,
) -> Result<ToolOutput, ToolError> {
    debug_assert!(
        !nowait::active(),
        "images are decoded where waiting is allowed"
    );
    let size = meta.len();
    let refused = |why: ImageRefusal| {
        ToolError::failed(format!(
            "`{}` {why}; it is {size} bytes",
            resolved.display()
        ))
    };
    if size > images::MAX_INPUT_BYTES {
        return Err(refused(ImageRefusal::FileTooLarge {
            format: format.name(),
            bytes: size,
        }));
    }
    let mut data = head;
    file.read_to_end(&mut data)
        .map_err(|e| io_error(resolved, e))?;
    let hash = ContentHash::of(&data);
    let bytes = data.len() as u64;
    let max_side = ctx.env().settings().read.image_max_side();
    let prepared = images::prepare(data, format, max_side).map_err(refused)?;
    ctx.session().files().record(
        &resolved.path,
        FileStamp {
            hash,
            size: bytes,
            modified: meta.modified().ok(),
            seen_at: SystemTime::now(),
        },
    );
    let display = resolved.display();
    let (width, height) = prepared.original;
    let mut caption = format!(
        "[{display}: {} image, {width}x{height}, {bytes} bytes, hash {hash}",
        format.name()
    );
    if let Some(done) = prepared.describe(max_side) {
        let _ = write!(caption, "; {done}");
    }
    caption.push(']');
    let structured = json!({
        "path": display,
        "mime_type": prepared.format.mime_type(),
        "bytes": bytes,
        "hash": hash.to_string(),
        "width": width,
        "height": height,
        "sent_width": prepared.width,
        "sent_height": prepared.height,
        "sent_bytes": prepared.data.len(),
    });
    Ok(ToolOutput {
        title: Some(display.clone()),
        content: vec![
            Content::Image {
                mime_type: prepared.format.mime_type().to_owned(),
                data: prepared.data,
            },
            Content::Text(caption),
        ],
        structured: Some(structured),
        ..ToolOutput::default()
    })
}

/// What a binary file looks like, or `None` for text. Text may contain any byte but NUL and
/// may be invalid UTF-8 (it is shown with replacement characters).
fn binary_kind(head: &[u8]) -> Option<&'static str> {
    const KNOWN: &[(&[u8], &str)] = &[
        (b"\x7fELF", "an ELF executable"),
        (b"%PDF", "a PDF document"),
        (b"PK\x03\x04", "a zip archive"),
        (b"\x1f\x8b", "gzip-compressed data"),
        (b"\x28\xb5\x2f\xfd", "zstd-compressed data"),
        (b"SQLite format 3\0", "an SQLite database"),
        (b"\0asm", "a WebAssembly module"),
    ];
    if let Some((_, kind)) = KNOWN.iter().find(|(magic, _)| head.starts_with(magic)) {
        return Some(kind);
    }
    head.contains(&0).then_some("it contains NUL bytes")
}

#[cfg(test)]
#[path = "read_tests.rs"]
mod tests;
