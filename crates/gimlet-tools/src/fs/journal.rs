//! The journals: in memory, every change a gimlet tool made in a session, with what was there
//! before (for `undo`); on disk, the intent of a multi-file change while it goes in, so that a
//! crash in the middle is rolled back at the next start ([`commit_all`], [`recover_pending`]).

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use super::file_state::ContentHash;
use super::write::Ownership;

use crate::util::MutexExt as _;

#[cfg(unix)]
mod intent;
#[cfg(windows)]
#[path = "journal/intent_windows.rs"]
mod intent;

pub use intent::{CommitError, Step, commit_all, recover_pending};

/// Entries (files changed) kept at most: room for a rename across thousands of files.
const MAX_ENTRIES: usize = 4096;
/// Bytes of previous content kept at most; older entries go first.
const MAX_BYTES: usize = 64 * 1024 * 1024;

/// One file changed by one tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalEntry {
    /// The call's change id (all files of one `apply_patch` share it).
    pub change: u64,
    /// The tool that made the change.
    pub tool: String,
    /// The resolved path.
    pub path: PathBuf,
    /// The path as shown.
    pub display: String,
    /// The content before, or `None` when the file did not exist.
    pub before: Option<Before>,
    /// Mode and owner before.
    pub ownership: Option<Ownership>,
    /// The hash after, or `None` when the change deleted the file.
    pub after: Option<ContentHash>,
}

/// What a file held before a change, kept only where it differs from what the change left:
/// the bytes between the start and the end both share. An edit of one line in a large file
/// keeps that line, not the file. Undo runs only while the file still holds what the change
/// left (it checks the hash first), so the shared parts come from the file then.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Before {
    /// Bytes at the start shared with what the change left.
    prefix: usize,
    /// Bytes at the end shared with it.
    suffix: usize,
    /// The rest of the content before.
    middle: Vec<u8>,
}

impl Before {
    /// The content `before` a change that left `after` (`None`: it removed the file).
    pub fn new(before: &[u8], after: Option<&[u8]>) -> Self {
        let after = after.unwrap_or_default();
        let prefix = crate::util::common_prefix(before, after);
        let suffix = crate::util::common_suffix(&before[prefix..], &after[prefix..]);
        Self {
            prefix,
            suffix,
            middle: before[prefix..before.len() - suffix].to_vec(),
        }
    }

    /// The content before, given what the file holds now: what the change left. `None` if
    /// that cannot be it (it is shorter than the shared parts).
    pub fn restore(&self, now: &[u8]) -> Option<Vec<u8>> {
        let end = now.len().checked_sub(self.suffix)?;
        if self.prefix > end {
            return None;
        }
        let mut restored = Vec::with_capacity(self.prefix + self.middle.len() + self.suffix);
        restored.extend_from_slice(&now[..self.prefix]);
        restored.extend_from_slice(&self.middle);
        restored.extend_from_slice(&now[end..]);
        Some(restored)
    }

    /// Bytes kept in memory.
    pub fn kept(&self) -> usize {
        self.middle.len()
    }
}

/// The session's journal.
#[derive(Debug, Default)]
pub struct Journal {
    entries: Mutex<VecDeque<JournalEntry>>,
    next_change: AtomicU64,
}

impl Journal {
    /// A fresh change id for one call.
    pub fn begin(&self) -> u64 {
        self.next_change.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// The latest change id handed out (0 before any).
    pub fn current(&self) -> u64 {
        self.next_change.load(Ordering::Relaxed)
    }

    /// Records an entry, dropping the oldest changes beyond the limits. A change goes whole
    /// (an undo restores all of its files or it is not offered), and the newest one is never
    /// dropped: one `undo` reverts a change of any size (a rename across hundreds of files).
    pub fn record(&self, entry: JournalEntry) {
        let mut entries = self.entries.locked();
        entries.push_back(entry);
        let mut bytes: usize = entries
            .iter()
            .map(|e| e.before.as_ref().map_or(0, Before::kept))
            .sum();
        let newest = entries.back().map(|e| e.change);
        while entries.len() > MAX_ENTRIES || bytes > MAX_BYTES {
            let Some(oldest) = entries.front().map(|e| e.change) else {
                break;
            };
            if Some(oldest) == newest {
                break;
            }
            while entries.front().is_some_and(|e| e.change == oldest) {
                if let Some(old) = entries.pop_front() {
                    bytes -= old.before.as_ref().map_or(0, Before::kept);
                }
            }
        }
    }

    /// The entries of the latest change (to `path`, if given), newest last, without removing them.
    pub fn latest(&self, path: Option<&Path>) -> Vec<JournalEntry> {
        let entries = self.entries.locked();
        match path {
            Some(path) => entries
                .iter()
                .rev()
                .find(|e| e.path == path)
                .cloned()
                .into_iter()
                .collect(),
            None => {
                let Some(last) = entries.back() else {
                    return Vec::new();
                };
                entries
                    .iter()
                    .filter(|e| e.change == last.change)
                    .cloned()
                    .collect()
            }
        }
    }

    /// Removes entries (after they were undone).
    pub fn remove(&self, undone: &[JournalEntry]) {
        let mut entries = self.entries.locked();
        entries.retain(|e| !undone.contains(e));
    }

    /// Removes every entry of a change (after it was rolled back).
    pub fn remove_change(&self, change: u64) {
        let mut entries = self.entries.locked();
        entries.retain(|e| e.change != change);
    }

    /// Paths with entries, newest first, for error messages.
    pub fn paths(&self) -> Vec<String> {
        let entries = self.entries.locked();
        let mut paths: Vec<String> = Vec::new();
        for entry in entries.iter().rev() {
            if !paths.contains(&entry.display) {
                paths.push(entry.display.clone());
            }
        }
        paths
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(change: u64, path: &str) -> JournalEntry {
        JournalEntry {
            change,
            tool: "edit".into(),
            path: PathBuf::from(path),
            display: path.into(),
            before: Some(Before::new(&[0; 10], Some(b"x"))),
            ownership: None,
            after: None,
        }
    }

    #[test]
    fn a_change_is_dropped_whole_and_the_newest_never() {
        let journal = Journal::default();
        journal.record(entry(1, "/old-a"));
        journal.record(entry(1, "/old-b"));
        // One change of more files than the journal keeps entries otherwise.
        for i in 0..MAX_ENTRIES + 10 {
            journal.record(entry(2, &format!("/f{i}")));
        }
        assert_eq!(journal.latest(None).len(), MAX_ENTRIES + 10);
        assert!(journal.latest(Some(Path::new("/old-a"))).is_empty());
        // The next change drops the big one whole, never a part of it.
        journal.record(entry(3, "/g"));
        assert_eq!(journal.latest(None), vec![entry(3, "/g")]);
        assert!(journal.latest(Some(Path::new("/f0"))).is_empty());
    }

    #[test]
    fn latest_change_or_latest_for_a_path() {
        let journal = Journal::default();
        journal.record(entry(1, "/a"));
        journal.record(entry(2, "/b"));
        journal.record(entry(2, "/c"));
        assert_eq!(journal.latest(None).len(), 2);
        assert_eq!(journal.latest(Some(Path::new("/a"))), vec![entry(1, "/a")]);
        journal.remove(&journal.latest(None));
        assert_eq!(journal.latest(None), vec![entry(1, "/a")]);
        assert_eq!(journal.paths(), vec!["/a".to_owned()]);
    }

    #[test]
    fn only_what_differs_is_kept_and_the_rest_comes_back_from_the_file() {
        let cases: [(&[u8], Option<&[u8]>); 9] = [
            (b"one\ntwo\nthree\n", Some(b"one\n2\nthree\n")),
            (b"abc", Some(b"abc")),
            (b"", Some(b"new file")),
            (b"gone", None),
            (b"aaaa", Some(b"aa")),
            (b"aa", Some(b"aaaa")),
            (b"xyx", Some(b"x")),
            (b"prefix only", Some(b"prefix")),
            (b"only suffix", Some(b"suffix")),
        ];
        for (before, after) in cases {
            let kept = Before::new(before, after);
            assert!(kept.kept() <= before.len());
            assert_eq!(
                kept.restore(after.unwrap_or_default()).as_deref(),
                Some(before),
                "{before:?} -> {after:?}"
            );
        }
        // A 60 KB file with one line changed keeps that line.
        let before: Vec<u8> = (0..2000)
            .flat_map(|i| format!("line {i:05} of the file\n").into_bytes())
            .collect();
        let mut after = before.clone();
        after[30_010..30_015].copy_from_slice(b"EDIT!");
        let kept = Before::new(&before, Some(&after));
        assert_eq!(kept.kept(), 5);
        assert_eq!(kept.restore(&after), Some(before));
        // What cannot be what the change left is refused.
        assert_eq!(Before::new(b"abcdef", Some(b"abXdef")).restore(b"ab"), None);
    }

    #[test]
    fn the_journal_is_bounded() {
        let journal = Journal::default();
        let changes = MAX_ENTRIES as u64 + 100;
        for i in 0..changes {
            journal.record(entry(i, "/a"));
        }
        assert_eq!(journal.entries.lock().unwrap().len(), MAX_ENTRIES);
        assert_eq!(journal.latest(None)[0].change, changes - 1);
    }
}
