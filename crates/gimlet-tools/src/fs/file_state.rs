//! What a session has read: the file-state store behind read-before-write and staleness checks.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use sha2::{Digest, Sha256};

use crate::util::MutexExt as _;

/// A short content hash: the first 64 bits of SHA-256, as 16 hex digits.
///
/// `read` reports it; `edit` accepts it back as `expected_hash`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ContentHash([u8; 8]);

impl ContentHash {
    /// Hashes bytes.
    pub fn of(bytes: &[u8]) -> Self {
        Self::from_digest(&Sha256::digest(bytes))
    }

    /// Takes the first 8 bytes of a SHA-256 digest.
    pub fn from_digest(digest: &[u8]) -> Self {
        let mut short = [0; 8];
        short.copy_from_slice(&digest[..8]);
        Self(short)
    }

    /// Parses 16 hex digits (case-insensitive, surrounding space ignored).
    pub fn parse(text: &str) -> Option<Self> {
        let text = text.trim();
        if text.len() != 16 {
            return None;
        }
        let mut short = [0; 8];
        for (i, byte) in short.iter_mut().enumerate() {
            *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        Some(Self(short))
    }
}

impl fmt::Display for ContentHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut text = [0u8; 16];
        for (i, byte) in self.0.iter().enumerate() {
            text[2 * i] = HEX[usize::from(byte >> 4)];
            text[2 * i + 1] = HEX[usize::from(byte & 0xf)];
        }
        // Only ASCII hex digits were written.
        f.write_str(std::str::from_utf8(&text).map_err(|_| fmt::Error)?)
    }
}

/// An incremental [`ContentHash`], for hashing a file while streaming it.
#[derive(Default)]
pub struct Hasher(Sha256);

impl Hasher {
    /// Feeds bytes.
    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    /// The hash of everything fed.
    pub fn finish(self) -> ContentHash {
        ContentHash::from_digest(&self.0.finalize())
    }
}

/// What the session knew about a file when it last read or wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileStamp {
    /// The content hash.
    pub hash: ContentHash,
    /// Size in bytes.
    pub size: u64,
    /// Modification time.
    pub modified: Option<SystemTime>,
    /// When the session read (or wrote) it.
    pub seen_at: SystemTime,
}

/// The files a session has read or written, by resolved path.
#[derive(Debug, Default)]
pub struct FileStates {
    files: Mutex<HashMap<PathBuf, FileStamp>>,
}

impl FileStates {
    /// Records what the session now knows about a file.
    pub fn record(&self, path: &Path, stamp: FileStamp) {
        self.lock().insert(path.to_owned(), stamp);
    }

    /// What the session knows about a file, if it read it.
    pub fn get(&self, path: &Path) -> Option<FileStamp> {
        self.lock().get(path).cloned()
    }

    /// Forgets a file (after it was deleted or moved away).
    pub fn forget(&self, path: &Path) {
        self.lock().remove(path);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, FileStamp>> {
        self.files.locked()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_round_trips_through_its_text() {
        let hash = ContentHash::of(b"hello\n");
        assert_eq!(hash.to_string().len(), 16);
        assert_eq!(ContentHash::parse(&hash.to_string()), Some(hash));
        assert_eq!(
            ContentHash::parse(&hash.to_string().to_uppercase()),
            Some(hash)
        );
        assert_eq!(ContentHash::parse("xyz"), None);
        assert_eq!(ContentHash::parse("zzzzzzzzzzzzzzzz"), None);
    }

    #[test]
    fn streaming_hash_equals_one_shot_hash() {
        let mut hasher = Hasher::default();
        hasher.update(b"hel");
        hasher.update(b"lo\n");
        assert_eq!(hasher.finish(), ContentHash::of(b"hello\n"));
        assert_ne!(ContentHash::of(b"a"), ContentHash::of(b"b"));
    }
}
