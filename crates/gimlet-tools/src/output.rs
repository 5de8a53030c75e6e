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
    store: SpillStore,
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
        Self {
            store: store.clone(),
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
        match self.store.create() {
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
