//! The store of one root: content-addressed blobs (`blobs/ab/<sha256>`) and the index of
//! checkpoints (`index.json`), each file private to the user (0600, folders 0700 on Unix) and
//! written to a temporary name first, then renamed into place, so a crash leaves the old file
//! or the new one. A blob is checked against its name whenever it is read: a damaged blob is
//! reported and never written back to the user's files.
//!
//! A full store makes room for new content by dropping the oldest checkpoints (and the blobs
//! only they refer to), never the content the current files have, nor content kept during the
//! same scan: see [`Store::begin_room`].

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::fs;
use std::io::{self, Write as _};
#[cfg(unix)]
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

/// The format of `index.json` this code writes and reads.
const INDEX_VERSION: u32 = 1;

/// What a path held at one moment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum State {
    /// Nothing.
    Absent,
    /// A regular file.
    File {
        /// Its content id: the SHA-256 of the content in hex, or `big-<size>-<mtime>` for a
        /// file over the size limit, whose content is not kept.
        id: String,
        /// Its size in bytes.
        size: u64,
        /// Its permission bits.
        mode: u32,
        /// Whether the content is in the store (so it can be restored).
        kept: bool,
    },
    /// A symbolic link.
    Symlink {
        /// Where it points, as written.
        target: String,
    },
}

impl State {
    /// The content id of a kept file.
    pub fn kept_id(&self) -> Option<&str> {
        match self {
            Self::File { id, kept: true, .. } => Some(id),
            Self::File { .. } | Self::Absent | Self::Symlink { .. } => None,
        }
    }

    /// Whether this state can be put back from the store.
    pub fn restorable(&self) -> bool {
        match self {
            Self::File { kept, .. } => *kept,
            Self::Absent | Self::Symlink { .. } => true,
        }
    }

    /// Whether two states hold the same thing: content and mode (a big file by its stat), or
    /// link target, whether or not the content was kept.
    pub fn same(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::File { id: a, mode: m, .. }, Self::File { id: b, mode: n, .. }) => {
                a == b && m == n
            }
            (Self::Absent, Self::Absent) => true,
            (Self::Symlink { target: a }, Self::Symlink { target: b }) => a == b,
            (Self::File { .. } | Self::Absent | Self::Symlink { .. }, _) => false,
        }
    }
}

/// One path changed by a checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathChange {
    /// The path relative to the root, `/`-separated.
    pub path: String,
    /// Before the call.
    pub before: State,
    /// After it.
    pub after: State,
}

/// Who made a checkpoint's changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A tool call of the agent.
    Call,
    /// A background job of the agent (found when the next call started, or the job's output
    /// was read).
    Job,
    /// Found between calls, made by no call: the user, an editor, another program.
    Outside,
    /// A `restore` call.
    Restore,
    /// An `undo` call.
    Undo,
}

/// One checkpoint: what one call (or the world between calls) changed under a root.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// Its number in this root's list, increasing.
    pub id: u64,
    /// Who made it.
    pub kind: Kind,
    /// The tool (`outside` for changes no call made).
    pub tool: String,
    /// A short label: the command, the path, the job.
    pub label: String,
    /// The session that made it (empty for outside changes).
    pub session: String,
    /// The call id, where there is one.
    pub call: String,
    /// When it was recorded, in milliseconds since the Unix epoch.
    pub created_ms: u64,
    /// The paths changed.
    pub changes: Vec<PathChange>,
    /// Ignored folders or files at the top of the root (not captured) that changed too.
    #[serde(default)]
    pub ignored: Vec<String>,
    /// Paths already undone (all of them: the checkpoint is undone).
    #[serde(default)]
    pub undone: Vec<String>,
    /// The session journal's change id of a file tool's call, for `undo`.
    #[serde(default)]
    pub journal_change: Option<u64>,
}

impl Checkpoint {
    /// Whether every change was undone.
    pub fn fully_undone(&self) -> bool {
        !self.changes.is_empty() && self.changes.iter().all(|c| self.undone.contains(&c.path))
    }

    /// The content ids it refers to.
    fn ids(&self) -> impl Iterator<Item = &str> {
        self.changes
            .iter()
            .flat_map(|c| [c.before.kept_id(), c.after.kept_id()])
            .flatten()
    }
}

/// The list of a root's checkpoints, oldest first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Index {
    /// The format.
    pub version: u32,
    /// The root it belongs to.
    pub root: PathBuf,
    /// The next checkpoint's number.
    pub next_id: u64,
    /// The checkpoints.
    pub checkpoints: Vec<Checkpoint>,
}

/// A stored thing that does not hold what it should.
#[derive(Debug, Clone, thiserror::Error)]
#[error("the checkpoint store is damaged: {0}")]
pub struct Damaged(pub String);

/// The blobs and index of one root.
#[derive(Debug)]
pub(crate) struct Store {
    dir: PathBuf,
    /// Content id -> size, for every blob on disk.
    sizes: HashMap<String, u64>,
    total: u64,
    /// While a scan runs: what may go to make room.
    room: Option<Room>,
    /// Blobs of checkpoints dropped to make room, deleted once the list without them is
    /// saved ([`Self::remove_dropped`]): a crash before leaves no checkpoint without its
    /// content.
    doomed: Vec<String>,
    /// Blobs nothing refers to may be on disk (from before this run): the next eviction
    /// looks for them even when it drops no checkpoint.
    unswept: bool,
}

/// What a full store may drop during one scan, oldest first.
#[derive(Debug, Default)]
struct Room {
    /// Each checkpoint, oldest first, with the blobs that go with it (no newer checkpoint and
    /// no current file refers to them).
    plan: VecDeque<(u64, Vec<String>)>,
    /// Content kept or seen during the scan: it stays.
    kept: HashSet<String>,
    /// The checkpoints dropped so far.
    dropped: Vec<u64>,
}

/// Creates `dir` (and its parents) private to the user.
pub(crate) fn private_dir(dir: &Path) -> io::Result<()> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    builder.mode(0o700);
    builder.create(dir)
}

/// Writes `bytes` to `path` through a temporary file in the same folder (0600), then renames it
/// into place; with `durable`, synced first.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8], durable: bool) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(format!(".tmp-{}", crate::util::random_hex()?));
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    options.mode(0o600);
    let written = (|| {
        let mut file = options.open(&tmp)?;
        file.write_all(bytes)?;
        if durable {
            file.sync_all()?;
        }
        fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written
}

/// The content id of some bytes.
pub(crate) fn content_id(bytes: &[u8]) -> String {
    crate::util::hex(&Sha256::digest(bytes))
}

impl Store {
    /// Opens (creating) the store in `dir`, and reads its index. A damaged index is moved aside
    /// (`index.json.damaged`) and reported in the second value; the list starts empty then.
    pub(crate) fn open(dir: &Path, root: &Path) -> io::Result<(Self, Index, Vec<String>)> {
        private_dir(&dir.join("blobs"))?;
        let mut sizes = HashMap::new();
        let mut total = 0;
        for fan in fs::read_dir(dir.join("blobs"))? {
            let fan = fan?;
            if !fan.file_type()?.is_dir() {
                continue;
            }
            for blob in fs::read_dir(fan.path())? {
                let blob = blob?;
                let name = blob.file_name().to_string_lossy().into_owned();
                if name.starts_with(".tmp-") {
                    let _ = fs::remove_file(blob.path());
                    continue;
                }
                let size = blob.metadata()?.len();
                total += size;
                sizes.insert(name, size);
            }
        }
        let store = Self {
            dir: dir.to_owned(),
            sizes,
            total,
            room: None,
            doomed: Vec::new(),
            unswept: true,
        };
        let mut damage = Vec::new();
        let path = dir.join("index.json");
        let index = match fs::read(&path) {
            Err(err) if err.kind() == io::ErrorKind::NotFound => None,
            Err(err) => return Err(err),
            Ok(bytes) => match serde_json::from_slice::<Index>(&bytes) {
                Ok(index) if index.version == INDEX_VERSION => Some(index),
                Ok(index) => {
                    damage.push(format!(
                        "the list of checkpoints has format {}, not {INDEX_VERSION}; it was set \
                         aside",
                        index.version
                    ));
                    let _ = fs::rename(&path, dir.join("index.json.damaged"));
                    None
                }
                Err(err) => {
                    damage.push(format!(
                        "the list of checkpoints could not be read ({err}); it was set aside as \
                         index.json.damaged and a new list started"
                    ));
                    let _ = fs::rename(&path, dir.join("index.json.damaged"));
                    None
                }
            },
        };
        let index = index.unwrap_or_else(|| Index {
            version: INDEX_VERSION,
            root: root.to_owned(),
            next_id: 1,
            checkpoints: Vec::new(),
        });
        Ok((store, index, damage))
    }

    /// The folder.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Bytes of content held.
    pub(crate) fn total(&self) -> u64 {
        self.total
    }

    fn blob_path(&self, id: &str) -> PathBuf {
        let fan = id.get(..2).unwrap_or("__");
        self.dir.join("blobs").join(fan).join(id)
    }

    /// Whether the store holds this content.
    pub(crate) fn has(&self, id: &str) -> bool {
        self.sizes.contains_key(id)
    }

    /// Keeps `bytes` under `id` (their content id), unless already kept. Past `limit` bytes,
    /// drops the oldest checkpoints the scan may drop ([`Self::begin_room`]) until it fits.
    /// `Ok(false)`: not kept, since it would not fit even then.
    pub(crate) fn put(&mut self, id: &str, bytes: &[u8], limit: u64) -> io::Result<bool> {
        if let Some(room) = &mut self.room {
            room.kept.insert(id.to_owned());
        }
        if self.has(id) {
            return Ok(true);
        }
        let size = bytes.len() as u64;
        if self.total + size > limit && !self.make_room(size, limit) {
            return Ok(false);
        }
        let path = self.blob_path(id);
        if let Some(fan) = path.parent() {
            private_dir(fan)?;
        }
        write_atomic(&path, bytes, false)?;
        self.sizes.insert(id.to_owned(), size);
        self.total += size;
        Ok(true)
    }

    /// Lets the puts of the scan that starts drop the oldest checkpoints of `index` when the
    /// store is full; `current` (the content the files have now) stays. [`Self::end_room`]
    /// tells which went.
    pub(crate) fn begin_room(&mut self, index: &Index, current: &BTreeSet<&str>) {
        let mut later: HashSet<&str> = current.iter().copied().collect();
        let mut plan = VecDeque::with_capacity(index.checkpoints.len());
        for checkpoint in index.checkpoints.iter().rev() {
            let only: Vec<String> = checkpoint
                .ids()
                .filter(|id| later.insert(id))
                .map(str::to_owned)
                .collect();
            plan.push_front((checkpoint.id, only));
        }
        self.room = Some(Room {
            plan,
            ..Room::default()
        });
    }

    /// Ends what [`Self::begin_room`] began; returns the checkpoints dropped to make room
    /// (their blobs are gone: drop them from the list).
    pub(crate) fn end_room(&mut self) -> Vec<u64> {
        self.room
            .take()
            .map(|room| room.dropped)
            .unwrap_or_default()
    }

    /// Drops the oldest checkpoints until `size` more bytes fit in `limit`; nothing when they
    /// would not fit even with every droppable one gone.
    fn make_room(&mut self, size: u64, limit: u64) -> bool {
        let Some(room) = &mut self.room else {
            return false;
        };
        let freed = |blobs: &[String]| -> u64 {
            blobs
                .iter()
                .filter(|id| !room.kept.contains(*id))
                .filter_map(|id| self.sizes.get(id))
                .sum()
        };
        let droppable: u64 = room.plan.iter().map(|(_, blobs)| freed(blobs)).sum();
        if (self.total + size).saturating_sub(droppable) > limit {
            return false;
        }
        while self.total + size > limit {
            let Some((checkpoint, blobs)) = room.plan.pop_front() else {
                return false;
            };
            for id in blobs.into_iter().filter(|id| !room.kept.contains(id)) {
                if let Some(size) = self.sizes.remove(&id) {
                    self.total -= size;
                    self.doomed.push(id);
                }
            }
            room.dropped.push(checkpoint);
        }
        true
    }

    /// Deletes the blobs of the checkpoints dropped to make room (call once the list without
    /// them is saved); content kept again since stays.
    pub(crate) fn remove_dropped(&mut self) {
        for id in std::mem::take(&mut self.doomed) {
            if !self.sizes.contains_key(&id) {
                let _ = fs::remove_file(self.blob_path(&id));
            }
        }
    }

    /// The content of `id`, checked against its id.
    pub(crate) fn get(&self, id: &str) -> Result<Vec<u8>, Damaged> {
        let bytes = fs::read(self.blob_path(id))
            .map_err(|err| Damaged(format!("the content {id} cannot be read: {err}")))?;
        if content_id(&bytes) != id {
            return Err(Damaged(format!(
                "the content {id} does not match its hash (the store was changed or cut short)"
            )));
        }
        Ok(bytes)
    }

    /// Writes the index, synced, in place of the old one.
    pub(crate) fn save_index(&self, index: &Index) -> io::Result<()> {
        let bytes = serde_json::to_vec(index).map_err(io::Error::other)?;
        write_atomic(&self.dir.join("index.json"), &bytes, true)
    }

    /// Drops the oldest checkpoints beyond `max_count`, and beyond `max_bytes` of content (the
    /// current files' content, in `current`, is never dropped), then every blob nothing refers
    /// to. Returns how many checkpoints were dropped.
    pub(crate) fn evict<'c>(
        &mut self,
        index: &mut Index,
        current: impl FnOnce() -> BTreeSet<&'c str>,
        max_count: usize,
        max_bytes: u64,
    ) -> usize {
        let mut dropped = 0;
        while index.checkpoints.len() > max_count {
            index.checkpoints.remove(0);
            dropped += 1;
        }
        // Blobs lose their last reference only when a checkpoint is dropped (a file's old
        // content is the new checkpoint's before-state): without a drop, nothing to collect,
        // and the walk over every checkpoint's and current file's ids (20 ms with 25,000
        // files, 60 ms with 100,000) is spared.
        if dropped == 0 && !self.unswept && self.total <= max_bytes {
            return 0;
        }
        self.unswept = false;
        let current = current();
        loop {
            self.collect(index, &current);
            // The newest stays, restorable (its content was kept as it fit).
            if self.total <= max_bytes || index.checkpoints.len() <= 1 {
                break;
            }
            index.checkpoints.remove(0);
            dropped += 1;
        }
        dropped
    }

    /// Removes the blobs neither the checkpoints nor the current files refer to.
    fn collect(&mut self, index: &Index, current: &BTreeSet<&str>) {
        let mut used: BTreeSet<&str> = current.clone();
        for checkpoint in &index.checkpoints {
            used.extend(checkpoint.ids());
        }
        let unused: Vec<String> = self
            .sizes
            .keys()
            .filter(|id| !used.contains(id.as_str()))
            .cloned()
            .collect();
        for id in unused {
            let path = self.blob_path(&id);
            let _ = fs::remove_file(&path);
            if !path.exists()
                && let Some(size) = self.sizes.remove(&id)
            {
                self.total -= size;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(id: &str) -> State {
        State::File {
            id: id.to_owned(),
            size: 1,
            mode: 0o644,
            kept: true,
        }
    }

    fn checkpoint(id: u64, blob: &str) -> Checkpoint {
        Checkpoint {
            id,
            kind: Kind::Call,
            tool: "bash".into(),
            label: String::new(),
            session: "s".into(),
            call: String::new(),
            created_ms: 0,
            changes: vec![PathChange {
                path: "a".into(),
                before: State::Absent,
                after: file(blob),
            }],
            ignored: Vec::new(),
            undone: Vec::new(),
            journal_change: None,
        }
    }

    #[test]
    fn blobs_are_checked_and_damage_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let (mut store, _, damage) = Store::open(dir.path(), Path::new("/r")).unwrap();
        assert!(damage.is_empty());
        let id = content_id(b"hello");
        assert!(store.put(&id, b"hello", 1 << 20).unwrap());
        assert_eq!(store.get(&id).unwrap(), b"hello");
        std::fs::write(store.blob_path(&id), b"hellO").unwrap();
        assert!(store.get(&id).unwrap_err().0.contains("does not match"));
        // Over the limit: not kept.
        assert!(!store.put(&content_id(b"big"), b"big", 6).unwrap());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(&store.blob_path(&id)), 0o600);
            assert_eq!(mode(&dir.path().join("blobs")), 0o700);
        }
    }

    #[test]
    fn a_damaged_index_is_set_aside_and_reported() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("index.json"), b"{not json").unwrap();
        let (_, index, damage) = Store::open(dir.path(), Path::new("/r")).unwrap();
        assert!(index.checkpoints.is_empty());
        assert_eq!(damage.len(), 1, "{damage:?}");
        assert!(dir.path().join("index.json.damaged").exists());
    }

    #[test]
    fn the_limits_drop_the_oldest_checkpoints_and_their_blobs() {
        let dir = tempfile::tempdir().unwrap();
        let (mut store, mut index, _) = Store::open(dir.path(), Path::new("/r")).unwrap();
        for i in 0..10u64 {
            let bytes = vec![b'x'; 100 + usize::try_from(i).unwrap()];
            let id = content_id(&bytes);
            store.put(&id, &bytes, u64::MAX).unwrap();
            index.checkpoints.push(checkpoint(i, &id));
        }
        assert_eq!(store.evict(&mut index, BTreeSet::new, 5, u64::MAX), 5);
        assert_eq!(index.checkpoints[0].id, 5);
        assert_eq!(store.sizes.len(), 5);
        // 5 blobs of ~105 bytes; 250 bytes leave two.
        store.evict(&mut index, BTreeSet::new, 5, 250);
        assert_eq!(index.checkpoints.len(), 2);
        assert!(store.total() <= 250);
        store.save_index(&index).unwrap();
        let (again, read, damage) = Store::open(dir.path(), Path::new("/r")).unwrap();
        assert!(damage.is_empty());
        assert_eq!(read, index);
        assert_eq!(again.total(), store.total());
    }
}
