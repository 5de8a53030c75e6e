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

    /// Hashes content being written, and remembers it with its hash (the last content written,
    /// up to 1 MiB): the next change of the file loads the same bytes, and
    /// comparing them costs a tenth of hashing them ([`Self::of_loaded`]).
    pub fn of_written(bytes: &[u8]) -> Self {
        let hash = Self::of(bytes);
        if bytes.len() <= REMEMBERED_BYTES {
            let mut written = WRITTEN.locked();
            written.bytes.clear();
            if written.bytes.capacity() > 4 * bytes.len().max(4096) {
                written.bytes.shrink_to(bytes.len());
            }
            written.bytes.extend_from_slice(bytes);
            written.hash = Some(hash);
        }
        hash
    }

    /// [`Self::of`] for content just read: answered from memory when it is the content this
    /// process wrote last (compared byte for byte), hashed otherwise.
    pub fn of_loaded(bytes: &[u8]) -> Self {
        {
            let written = WRITTEN.locked();
            if let Some(hash) = written.hash
                && written.bytes == bytes
            {
                return hash;
            }
        }
        Self::of(bytes)
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

/// The largest content [`ContentHash::of_written`] remembers.
const REMEMBERED_BYTES: usize = 1 << 20;

/// The last content this process wrote, and its hash.
struct Written {
    bytes: Vec<u8>,
    hash: Option<ContentHash>,
}

static WRITTEN: Mutex<Written> = Mutex::new(Written {
    bytes: Vec::new(),
    hash: None,
});

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
    fn a_remembered_hash_is_given_only_for_the_same_bytes() {
        let written = b"fn main() {}\n".repeat(100);
        assert_eq!(ContentHash::of_written(&written), ContentHash::of(&written));
        assert_eq!(ContentHash::of_loaded(&written), ContentHash::of(&written));
        // Same length, one byte different; shorter; longer: hashed.
        let mut changed = written.clone();
        changed[700] = b'X';
        for other in [
            &changed[..],
            &written[..10],
            &[&written[..], b"\n"].concat()[..],
        ] {
            assert_eq!(ContentHash::of_loaded(other), ContentHash::of(other));
        }
        // Beyond the limit nothing is remembered, and the answer is still the hash.
        let big = vec![b'a'; REMEMBERED_BYTES + 1];
        assert_eq!(ContentHash::of_written(&big), ContentHash::of(&big));
        assert_eq!(ContentHash::of_loaded(&big), ContentHash::of(&big));
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
