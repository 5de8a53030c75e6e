//! Outputs too large for memory: [`OutputBuffer`] keeps the first and last bytes in memory and
//! streams the whole text to a spill file once it grows past a threshold.
//!
//! Tools that can produce unbounded output (a `grep` with no limit, a command that floods its
//! pipe) write into an `OutputBuffer` and return the finished [`LongText`] as
//! [`crate::Content::Long`]. They do not truncate: the pipeline's truncation stage turns a
//! `LongText` into the shown text and its notice, pointing at the spill file already written.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufWriter, Write};

use crate::spill::{SpillFile, SpillStore};
use crate::terminal::Screen;

/// Bytes kept in memory at each end by default.
pub const DEFAULT_KEEP: usize = 1024 * 1024;

/// A finished large output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LongText {
    /// The first bytes (all of it when `spill` is `None`).
    pub head: String,
    /// The last bytes (empty when `spill` is `None`).
    pub tail: String,
    /// Bytes in the whole output.
    pub total_bytes: u64,
    /// Lines in the whole output.
    pub total_lines: u64,
    /// The whole output, once it outgrew memory (up to the buffer's cap: see `saved`).
    pub spill: Option<SpillFile>,
    /// Bytes in the spill file: less than `total_bytes` when the output passed the cap.
    pub saved: u64,
}

impl LongText {
    /// A complete text that fitted in memory.
    pub fn complete(text: String) -> Self {
        let total_lines = count_lines(&text) as u64;
        Self {
            total_bytes: text.len() as u64,
            head: text,
            tail: String::new(),
            total_lines,
            spill: None,
            saved: 0,
        }
    }
}

/// Lines in `text`, as `text.split_inclusive('\n').count()` counts them, in one vectorised pass.
pub(crate) fn count_lines(text: &str) -> usize {
    let newlines = memchr::memchr_iter(b'\n', text.as_bytes()).count();
    newlines + usize::from(!text.is_empty() && !text.ends_with('\n'))
}

/// The saved log of one command stops growing here (a flood must not fill the disk).
pub(crate) const MAX_LOG_BYTES: u64 = 64 * 1024 * 1024;

/// Builds a [`LongText`] in bounded memory.
pub struct OutputBuffer {
    /// Where to spill; `None`: keep both ends in memory and spill nothing.
    store: Option<SpillStore>,
    keep: usize,
    head: String,
    tail: VecDeque<u8>,
    total_bytes: u64,
    newlines: u64,
    last_byte: Option<u8>,
    spill: Option<(BufWriter<File>, SpillFile)>,
    spill_failed: bool,
    max_spill: u64,
    saved: u64,
    /// Bytes kept at the end (the same as at the start unless set).
    tail_keep: usize,
}

impl std::fmt::Debug for OutputBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutputBuffer")
            .field("total_bytes", &self.total_bytes)
            .finish_non_exhaustive()
    }
}

impl OutputBuffer {
    /// A buffer keeping `keep` bytes at each end in memory, spilling into `store`.
    pub fn new(store: &SpillStore, keep: usize) -> Self {
        Self::with_store(Some(store.clone()), keep)
    }

    /// A buffer keeping `keep` bytes at each end in memory that spills nothing: what is
    /// between the ends is dropped (for a text whose source is saved elsewhere).
    pub(crate) fn in_memory(keep: usize) -> Self {
        Self::with_store(None, keep)
    }

    fn with_store(store: Option<SpillStore>, keep: usize) -> Self {
        Self {
            store,
            keep,
            head: String::new(),
            tail: VecDeque::new(),
            total_bytes: 0,
            newlines: 0,
            last_byte: None,
            spill: None,
            spill_failed: false,
            max_spill: u64::MAX,
            saved: 0,
            tail_keep: keep,
        }
    }

    /// Keeps only `bytes` at the end in memory (for outputs shown from their start).
    #[must_use]
    pub fn with_tail(mut self, bytes: usize) -> Self {
        self.tail_keep = bytes.min(self.keep);
        self
    }

    /// Stops the spill file from growing past `bytes` (the in-memory tail keeps following).
    #[must_use]
    pub fn with_max_spill(mut self, bytes: u64) -> Self {
        self.max_spill = bytes;
        self
    }

    /// Bytes written so far.
    pub fn len(&self) -> u64 {
        self.total_bytes
    }

    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.total_bytes == 0
    }

    /// Appends text.
    pub fn push_str(&mut self, text: &str) {
        self.push_bytes(text.as_bytes());
    }

    /// Appends bytes; invalid UTF-8 is shown with replacement characters in memory and kept
    /// as is in the spill file.
    pub fn push_bytes(&mut self, bytes: &[u8]) {
        let newlines = memchr::memchr_iter(b'\n', bytes).count();
        self.push_counted(bytes, newlines);
    }

    /// Appends bytes whose number of `\n` the caller already knows (saves counting them).
    pub fn push_counted(&mut self, bytes: &[u8], newlines: usize) {
        if bytes.is_empty() {
            return;
        }
        debug_assert_eq!(newlines, memchr::memchr_iter(b'\n', bytes).count());
        self.total_bytes += bytes.len() as u64;
        self.newlines += newlines as u64;
        self.last_byte = bytes.last().copied();
        if self.spill.is_none() && !self.spill_failed && self.head.len() + bytes.len() > self.keep {
            self.start_spill();
        }
        if let Some((writer, _)) = &mut self.spill {
            let room =
                usize::try_from(self.max_spill.saturating_sub(self.saved)).unwrap_or(usize::MAX);
            let part = &bytes[..bytes.len().min(room)];
            if writer.write_all(part).is_err() {
                self.spill = None;
                self.spill_failed = true;
            } else {
                self.saved += part.len() as u64;
            }
        }
        let room = self.keep.saturating_sub(self.head.len());
        if room > 0 {
            let take = &bytes[..bytes.len().min(room)];
            self.head.push_str(&String::from_utf8_lossy(take));
            if self.spill.is_none() && !self.spill_failed {
                return;
            }
        }
        let bytes = &bytes[bytes.len().saturating_sub(self.tail_keep)..];
        self.tail.extend(bytes);
        let excess = self.tail.len().saturating_sub(self.tail_keep);
        self.tail.drain(..excess);
    }

    fn start_spill(&mut self) {
        let Some(store) = &self.store else {
            // Memory only: from now on the tail is kept, as after a failed spill.
            self.spill_failed = true;
            return;
        };
        match store.create() {
            Ok((file, spill)) => {
                let mut writer = BufWriter::with_capacity(64 * 1024, file);
                if writer.write_all(self.head.as_bytes()).is_ok() {
                    self.saved = self.head.len() as u64;
                    self.spill = Some((writer, spill));
                    return;
                }
                self.spill_failed = true;
            }
            Err(err) => {
                tracing::warn!("cannot save a large output: {err}");
                self.spill_failed = true;
            }
        }
    }

    /// The finished output.
    pub fn finish(self) -> LongText {
        let total_lines =
            self.newlines + u64::from(self.total_bytes > 0 && self.last_byte != Some(b'\n'));
        let saved = self.saved;
        let spill = self.spill.and_then(|(mut writer, mut spill)| {
            writer.flush().ok()?;
            spill.size = saved;
            Some(spill)
        });
        let tail = if spill.is_some() || self.spill_failed {
            let bytes: Vec<u8> = self.tail.into_iter().collect();
            // The kept tail may start inside a character; skip to the next boundary.
            let start = bytes
                .iter()
                .position(|b| (b & 0xC0) != 0x80)
                .unwrap_or(bytes.len());
            String::from_utf8_lossy(&bytes[start..]).into_owned()
        } else {
            String::new()
        };
        LongText {
            head: self.head,
            tail,
            total_bytes: self.total_bytes,
            total_lines,
            spill,
            saved,
        }
    }
}

/// The bytes a command printed, exactly as printed: in memory up to `keep` bytes, then in a
/// spill file (up to its cap). The text shown of them is a [`CommandOutput`]'s.
pub(crate) struct RawLog {
    store: SpillStore,
    keep: usize,
    memory: Vec<u8>,
    file: Option<(BufWriter<File>, SpillFile)>,
    failed: bool,
    max: u64,
    saved: u64,
    total: u64,
}

impl RawLog {
    /// A log keeping `keep` bytes in memory before it moves to a spill file of at most `max`
    /// bytes.
    pub(crate) fn new(store: &SpillStore, keep: usize, max: u64) -> Self {
        Self {
            store: store.clone(),
            keep,
            memory: Vec::new(),
            file: None,
            failed: false,
            max,
            saved: 0,
            total: 0,
        }
    }

    /// Bytes printed so far.
    pub(crate) fn total(&self) -> u64 {
        self.total
    }

    /// Appends bytes.
    pub(crate) fn push(&mut self, bytes: &[u8]) {
        self.total += bytes.len() as u64;
        if self.file.is_none() && !self.failed && self.memory.len() + bytes.len() > self.keep {
            self.start_file();
        }
        match &mut self.file {
            Some((writer, _)) => {
                let room =
                    usize::try_from(self.max.saturating_sub(self.saved)).unwrap_or(usize::MAX);
                let part = &bytes[..bytes.len().min(room)];
                if writer.write_all(part).is_ok() {
                    self.saved += part.len() as u64;
                } else {
                    self.file = None;
                    self.failed = true;
                }
            }
            None if !self.failed => self.memory.extend_from_slice(bytes),
            None => {}
        }
    }

    fn start_file(&mut self) {
        let started = self.store.create().and_then(|(file, spill)| {
            let mut writer = BufWriter::with_capacity(64 * 1024, file);
            let take = self
                .memory
                .len()
                .min(usize::try_from(self.max).unwrap_or(usize::MAX));
            writer.write_all(&self.memory[..take])?;
            Ok((writer, spill, take))
        });
        match started {
            Ok((writer, spill, take)) => {
                self.saved = take as u64;
                self.file = Some((writer, spill));
            }
            Err(err) => {
                tracing::warn!("cannot save a command's output: {err}");
                self.failed = true;
            }
        }
        self.memory = Vec::new();
    }

    /// The finished log as a spill file (written now if it was still in memory), with the
    /// bytes it holds; `None` if it could not be saved.
    pub(crate) fn into_file(mut self) -> Option<SpillFile> {
        if self.file.is_none() && !self.failed {
            self.start_file();
        }
        let saved = self.saved;
        let (mut writer, mut spill) = self.file.take()?;
        writer.flush().ok()?;
        spill.size = saved;
        Some(spill)
    }

    /// The finished log as a spill file if it outgrew memory (else dropped).
    pub(crate) fn into_file_if_large(self) -> Option<SpillFile> {
        if self.file.is_some() {
            self.into_file()
        } else {
            None
        }
    }

    /// Drops the log, and its spill file if it had one.
    pub(crate) fn discard(mut self) {
        if let Some((writer, spill)) = self.file.take() {
            drop(writer);
            let _ = std::fs::remove_file(&spill.path);
        }
    }
}

/// A command's output: the bytes it printed go to a [`RawLog`], and the text a terminal would
/// show of them ([`Screen`]) to an in-memory [`OutputBuffer`] that the result shows. The shown
/// text is what counts against the output limits; the raw bytes are what is saved when the
/// result is cut.
pub(crate) struct CommandOutput {
    screen: Screen,
    shown: OutputBuffer,
    raw: RawLog,
    line: String,
}

impl CommandOutput {
    /// Output keeping `keep` bytes of shown text at each end in memory, and raw bytes in
    /// `store` past `keep` (up to `max_log` bytes).
    pub(crate) fn new(store: &SpillStore, keep: usize, max_log: u64) -> Self {
        Self {
            screen: Screen::new(),
            shown: OutputBuffer::in_memory(keep),
            raw: RawLog::new(store, keep, max_log),
            line: String::new(),
        }
    }

    /// Appends what the command printed.
    pub(crate) fn push(&mut self, bytes: &[u8]) {
        self.raw.push(bytes);
        self.screen.feed(bytes, &mut self.line);
        self.shown.push_str(&self.line);
        self.line.clear();
    }

    /// The shown text, and the bytes printed. When the shown text will be cut (it outgrew
    /// memory, or `fits` says it does not fit the limits it will be cut to), the raw bytes are
    /// its spill file, which the truncation stage points to; otherwise nothing is saved.
    pub(crate) fn finish(mut self, fits: impl FnOnce(&str) -> bool) -> (LongText, u64) {
        self.screen.finish(&mut self.line);
        self.shown.push_str(&self.line);
        let raw_bytes = self.raw.total();
        let mut text = self.shown.finish();
        let outgrew = !text.tail.is_empty();
        if !outgrew && fits(&text.head) {
            self.raw.discard();
            return (text, raw_bytes);
        }
        match self.raw.into_file() {
            Some(file) => {
                text.saved = file.size;
                text.spill = Some(file);
                if !outgrew {
                    // All of the text is in memory: both ends are it, for the truncation
                    // stage to cut as it cuts a saved output.
                    text.tail = text.head.clone();
                }
            }
            // Not saved: an output that outgrew memory says so; one that fitted is saved as
            // text by the truncation stage.
            None => text.saved = 0,
        }
        (text, raw_bytes)
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn small_outputs_stay_in_memory() {
        let dir = tempfile::tempdir().unwrap();
        let store = SpillStore::open(dir.path()).unwrap();
        let mut buffer = OutputBuffer::new(&store, 100);
        buffer.push_str("a\nb\n");
        buffer.push_str("c");
        let text = buffer.finish();
        assert_eq!(
            text,
            LongText {
                head: "a\nb\nc".into(),
                tail: String::new(),
                total_bytes: 5,
                total_lines: 3,
                spill: None,
                saved: 0,
            }
        );
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn large_outputs_keep_both_ends_and_spill_everything() {
        let dir = tempfile::tempdir().unwrap();
        let store = SpillStore::open(dir.path()).unwrap();
        let mut buffer = OutputBuffer::new(&store, 10);
        let mut all = String::new();
        for i in 0..100 {
            let line = format!("line {i}\n");
            buffer.push_str(&line);
            all.push_str(&line);
        }
        let text = buffer.finish();
        assert_eq!(text.head, "line 0\nlin");
        assert_eq!(text.tail, "8\nline 99\n");
        assert_eq!(
            (text.total_bytes, text.total_lines),
            (all.len() as u64, 100)
        );
        let spill = text.spill.unwrap();
        assert_eq!(std::fs::read_to_string(&spill.path).unwrap(), all);
        assert_eq!(spill.size, all.len() as u64);
    }

    /// Whether a text fits 100 lines and 1000 bytes.
    fn small_limits(text: &str) -> bool {
        text.len() <= 1000 && count_lines(text) <= 100
    }

    // See: issue 38, item 5.
    #[test]
    fn command_output_shows_the_screen_and_saves_nothing_when_it_fits() {
        let dir = tempfile::tempdir().unwrap();
        let store = SpillStore::open(dir.path()).unwrap();
        let mut output = CommandOutput::new(&store, 64, MAX_LOG_BYTES);
        output.push(b"red \x1b[31mRED\x1b");
        output.push(b"[0m\n10%\r100%");
        // A progress bar of many bytes: past what is kept in memory raw, a few bytes shown.
        for i in 0..=100 {
            output.push(format!("\r{i:>3}%").as_bytes());
        }
        let (text, printed) = output.finish(small_limits);
        assert_eq!(text.head, "red RED\n100%");
        assert_eq!((text.total_bytes, text.total_lines), (12, 2));
        assert!(printed > 500, "{printed}");
        assert_eq!((text.spill, text.tail.as_str()), (None, ""));
        // The raw bytes had gone to a file past 64 bytes: it is removed, as nothing is cut.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn command_output_that_will_be_cut_saves_the_bytes_printed() {
        let dir = tempfile::tempdir().unwrap();
        let store = SpillStore::open(dir.path()).unwrap();
        let mut output = CommandOutput::new(&store, 64 * 1024, MAX_LOG_BYTES);
        let mut raw = Vec::new();
        for i in 0..200 {
            let mut line = format!("\x1b[32mline {i}\x1b[0m ").into_bytes();
            line.extend_from_slice(b"\xff\r\n");
            raw.extend_from_slice(&line);
            output.push(&line);
        }
        let (text, printed) = output.finish(small_limits);
        assert_eq!(printed, raw.len() as u64);
        assert!(
            text.head.starts_with("line 0 \u{fffd}\nline 1 \u{fffd}\n"),
            "{}",
            &text.head[..40]
        );
        assert_eq!(text.total_lines, 200);
        assert_eq!(text.total_bytes, text.head.len() as u64);
        // The whole text is in memory: both ends are it, for the truncation stage.
        assert_eq!(text.tail, text.head);
        let spill = text.spill.unwrap();
        assert_eq!(std::fs::read(&spill.path).unwrap(), raw);
        assert_eq!(
            (spill.size, text.saved),
            (raw.len() as u64, raw.len() as u64)
        );
    }

    #[test]
    fn command_output_past_memory_keeps_both_ends_of_the_screen_and_every_byte() {
        let dir = tempfile::tempdir().unwrap();
        let store = SpillStore::open(dir.path()).unwrap();
        let mut output = CommandOutput::new(&store, 100, MAX_LOG_BYTES);
        let mut raw = Vec::new();
        for i in 0..100 {
            let line = format!("\x1b[1m{i:03}\x1b[0m\n");
            raw.extend_from_slice(line.as_bytes());
            output.push(line.as_bytes());
        }
        let (text, _) = output.finish(|_| true);
        assert!(text.head.starts_with("000\n001\n"), "{}", text.head);
        assert!(text.tail.ends_with("098\n099\n"), "{}", text.tail);
        assert_eq!((text.total_bytes, text.total_lines), (400, 100));
        assert_eq!(std::fs::read(text.spill.unwrap().path).unwrap(), raw);
    }

    #[test]
    fn the_spill_file_stops_at_its_cap() {
        let dir = tempfile::tempdir().unwrap();
        let store = SpillStore::open(dir.path()).unwrap();
        let mut buffer = OutputBuffer::new(&store, 10).with_max_spill(100);
        for _ in 0..50 {
            buffer.push_str("0123456789\n");
        }
        let text = buffer.finish();
        assert_eq!((text.total_bytes, text.saved), (550, 100));
        assert_eq!(
            std::fs::metadata(&text.spill.unwrap().path).unwrap().len(),
            100
        );
        assert_eq!(text.tail, "0123456789\n"[1..].to_owned());
    }
}
