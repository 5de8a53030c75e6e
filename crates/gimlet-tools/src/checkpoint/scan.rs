//! The scan of a root: a walk (the `ignore` crate, honouring `.gitignore`, never entering a
//! `.git`) against a stat cache, so that only files whose stat changed are read and hashed.
//!
//! As git does for its index, a file whose modification time is not older than the previous
//! scan's start is read again even when its stat matches ("racy" timestamps: a write within
//! the clock's step after the scan would otherwise go unseen).

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::fs;
use std::io;
use std::path::Path;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use super::store::{PathChange, State, Store, content_id};

/// What the cache knows of one file or symlink.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Stat {
    pub(super) size: u64,
    pub(super) mtime_ns: i128,
    pub(super) ctime_ns: i128,
    pub(super) ino: u64,
    pub(super) mode: u32,
    pub(super) state: State,
}

/// The stat cache of a root, persisted between runs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Cache {
    /// When the scan that wrote it started, in ns since the epoch.
    pub(super) scanned_ns: i128,
    /// Relative path -> what it held.
    pub(crate) entries: BTreeMap<String, Stat>,
    /// Ignored names at the top of the root -> their latest modification time (their own and
    /// that of the entries directly in them).
    pub(super) ignored: BTreeMap<String, i128>,
}

impl Cache {
    /// The content ids the current files refer to (kept in the store).
    pub(crate) fn ids(&self) -> BTreeSet<&str> {
        self.entries
            .values()
            .filter_map(|s| s.state.kept_id())
            .collect()
    }
}

/// How much a scan keeps.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Files larger than this are not read.
    pub(crate) max_file: u64,
    /// The store holds at most this many bytes.
    pub(crate) max_store: u64,
}

/// What changed since the previous scan.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Delta {
    /// Per path, before and after.
    pub(crate) changes: Vec<PathChange>,
    /// Ignored entries at the top of the root that changed.
    pub(crate) ignored: Vec<String>,
    /// The scan's stats or contents changed (the cache should be saved).
    pub(crate) touched: bool,
    /// The cache's entries set or removed (what a save writes).
    pub(crate) dirty: Vec<String>,
}

pub(super) fn nanos(time: io::Result<SystemTime>) -> i128 {
    time.ok()
        .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
        .map_or(0, |d| i128::try_from(d.as_nanos()).unwrap_or(i128::MAX))
}

/// Stat fields: (mtime, ctime, inode, permission bits).
#[cfg(unix)]
fn fields(meta: &fs::Metadata) -> (i128, i128, u64, u32) {
    use std::os::unix::fs::MetadataExt as _;
    (
        i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
        i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec()),
        meta.ino(),
        meta.mode() & 0o7777,
    )
}

/// Stat fields: (mtime, ctime, inode, permission bits). Windows has neither a change time nor
/// an inode here; the mode is 0o644, or 0o444 read-only.
#[cfg(windows)]
fn fields(meta: &fs::Metadata) -> (i128, i128, u64, u32) {
    let mode = if meta.permissions().readonly() {
        0o444
    } else {
        0o644
    };
    (nanos(meta.modified()), 0, 0, mode)
}

/// The state of one file or symlink, read now: its content kept in `store` when it fits.
pub(crate) fn read_state(
    path: &Path,
    meta: &fs::Metadata,
    store: &mut Store,
    limits: Limits,
) -> io::Result<State> {
    let (mtime, _, _, mode) = fields(meta);
    if meta.file_type().is_symlink() {
        let target = fs::read_link(path)?;
        return Ok(State::Symlink {
            target: target.to_string_lossy().into_owned(),
        });
    }
    let size = meta.len();
    if size > limits.max_file {
        return Ok(State::File {
            id: format!("big-{size}-{mtime}"),
            size,
            mode,
            kept: false,
        });
    }
    let bytes = fs::read(path)?;
    let id = content_id(&bytes);
    let kept = store.put(&id, &bytes, limits.max_store)?;
    Ok(State::File {
        id,
        size: bytes.len() as u64,
        mode,
        kept,
    })
}

/// The state of one path now (nothing there, a directory or anything else is `Absent`).
pub(crate) fn state_now(path: &Path, store: &mut Store, limits: Limits) -> io::Result<State> {
    match fs::symlink_metadata(path) {
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(State::Absent),
        Err(err) => Err(err),
        Ok(meta) if meta.is_file() || meta.file_type().is_symlink() => {
            read_state(path, &meta, store, limits)
        }
        Ok(_) => Ok(State::Absent),
    }
}

/// The walker of a folder under a root: hidden files included, `.gitignore` (also outside a
/// repository), `.ignore` and `.git/info/exclude` honoured (those of the folders above it
/// too, so a walk of a subfolder applies the same rules as the walk of the root), symlinks not
/// followed, `.git` never entered.
pub(super) fn walker(dir: &Path) -> ignore::WalkBuilder {
    let mut builder = ignore::WalkBuilder::new(dir);
    builder
        .standard_filters(false)
        .git_ignore(true)
        .git_exclude(true)
        .ignore(true)
        .parents(true)
        .require_git(false)
        .follow_links(false)
        .filter_entry(|entry| entry.file_name() != ".git");
    builder
}

/// The relative, `/`-separated name of `path` under `root`; `None` for names that are not
/// UTF-8 (left out: the index is JSON).
pub(super) fn relative(root: &Path, path: &Path) -> Option<String> {
    let rel = path.strip_prefix(root).ok()?.to_str()?;
    #[cfg(windows)]
    return Some(rel.replace('\\', "/"));
    #[cfg(not(windows))]
    Some(rel.to_owned())
}

/// One scan's comparison of what it finds with the cache.
pub(super) struct Pass<'a> {
    /// When the previous scan started (the racy rule).
    pub(super) previous_ns: i128,
    pub(super) store: &'a mut Store,
    pub(super) limits: Limits,
    pub(super) delta: Delta,
}

/// A file whose modification time is this close to the previous scan's start (or later) is
/// read again even when its stat matches: file systems stamp times from a clock that advances
/// in steps (a jiffy, up to 10 ms), so a write just after a scan can carry a time just before
/// its start.
const RACY_NS: i128 = 20_000_000;

impl Pass<'_> {
    /// Compares the file or symlink `rel` (at `path`, with `meta`) with its cached stat
    /// `before`, reading it when the stat changed (or `force`), and records it in `seen`.
    pub(super) fn file(
        &mut self,
        path: &Path,
        rel: String,
        meta: &fs::Metadata,
        before: Option<Stat>,
        force: bool,
        seen: &mut BTreeMap<String, Stat>,
    ) {
        let (mtime_ns, ctime_ns, ino, mode) = fields(meta);
        let size = meta.len();
        if let Some(stat) = before.as_ref()
            && !force
            && stat.size == size
            && stat.mtime_ns == mtime_ns
            && stat.ctime_ns == ctime_ns
            && stat.ino == ino
            && stat.mode == mode
            && mtime_ns < self.previous_ns - RACY_NS
        {
            if let Some(stat) = before {
                seen.insert(rel, stat);
            }
            return;
        }
        self.delta.touched = true;
        self.delta.dirty.push(rel.clone());
        // Gone or unreadable since the walk saw it: left out, like a file not there.
        let Ok(state) = read_state(path, meta, self.store, self.limits) else {
            if let Some(stat) = before {
                self.gone(rel, stat);
            }
            return;
        };
        let previous = before.map_or(State::Absent, |s| s.state);
        if previous != state {
            self.delta.changes.push(PathChange {
                path: rel.clone(),
                before: previous,
                after: state.clone(),
            });
        }
        seen.insert(
            rel,
            Stat {
                size,
                mtime_ns,
                ctime_ns,
                ino,
                mode,
                state,
            },
        );
    }

    /// Records that `rel`, cached as `stat`, is gone.
    pub(super) fn gone(&mut self, rel: String, stat: Stat) {
        self.delta.dirty.push(rel.clone());
        self.delta.changes.push(PathChange {
            path: rel,
            before: stat.state,
            after: State::Absent,
        });
    }
}

/// Walks `root`, updating `cache`, keeping new contents in `store`, and returns what changed.
///
/// Each entry's cached stat is moved, not copied, into the new cache when it still holds; what
/// is left of the old cache after the walk was removed.
pub(crate) fn scan(root: &Path, cache: &mut Cache, store: &mut Store, limits: Limits) -> Delta {
    scan_with(root, cache, store, limits, &mut |_, _| {}).0
}

/// [`scan`], calling `on_dir` with each folder the walk enters (the root first, as `""`) when
/// the walk yields it, before its entries are listed; returns also the names at the top of the
/// root that the walk did not leave out.
pub(super) fn scan_with(
    root: &Path,
    cache: &mut Cache,
    store: &mut Store,
    limits: Limits,
    on_dir: &mut dyn FnMut(&str, &ignore::DirEntry),
) -> (Delta, BTreeSet<OsString>) {
    let started = nanos(Ok(SystemTime::now()));
    let mut old = std::mem::take(&mut cache.entries);
    let mut seen: BTreeMap<String, Stat> = BTreeMap::new();
    let mut top: BTreeSet<OsString> = BTreeSet::new();
    let mut pass = Pass {
        previous_ns: cache.scanned_ns,
        store,
        limits,
        delta: Delta::default(),
    };
    for entry in walker(root).build().flatten() {
        if entry.depth() == 1 {
            top.insert(entry.file_name().to_owned());
        }
        let Some(kind) = entry.file_type() else {
            continue;
        };
        let Some(rel) = relative(root, entry.path()) else {
            continue;
        };
        if kind.is_dir() {
            on_dir(&rel, &entry);
            continue;
        }
        if !(kind.is_file() || kind.is_symlink()) {
            continue;
        }
        let Ok(meta) = entry.metadata() else {
            continue;
        };
        let before = old.remove(&rel);
        pass.file(entry.path(), rel, &meta, before, false, &mut seen);
    }
    for (path, stat) in old {
        pass.gone(path, stat);
    }
    let mut delta = pass.delta;
    finish(root, cache, &mut delta, &top);
    cache.entries = seen;
    cache.scanned_ns = started;
    (delta, top)
}

/// Sorts the changes and compares the ignored entries at the top of the root (`top`: the
/// names the walk did not leave out) with the cache's.
pub(super) fn finish(root: &Path, cache: &mut Cache, delta: &mut Delta, top: &BTreeSet<OsString>) {
    delta.changes.sort_by(|a, b| a.path.cmp(&b.path));
    let ignored = ignored_tops(root, top);
    for (name, time) in &ignored {
        if cache.ignored.get(name) != Some(time) {
            delta.ignored.push(name.clone());
        }
    }
    for name in cache.ignored.keys() {
        if !ignored.contains_key(name) {
            delta.ignored.push(name.clone());
        }
    }
    delta.touched |= !delta.changes.is_empty() || !delta.ignored.is_empty();
    cache.ignored = ignored;
}

/// The entries at the top of `root` the walk left out (ignored), but `.git`, with the latest
/// modification time of each and of what is directly in it: a build writing into `target/`
/// or an install into `node_modules/` shows there, cheaply (deeper changes alone do not).
fn ignored_tops(root: &Path, walked: &BTreeSet<OsString>) -> BTreeMap<String, i128> {
    let mut ignored = BTreeMap::new();
    let Ok(entries) = fs::read_dir(root) else {
        return ignored;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        if name == ".git" || walked.contains(&name) {
            continue;
        }
        let Some(text) = name.to_str() else {
            continue;
        };
        let Ok(meta) = entry.path().symlink_metadata() else {
            continue;
        };
        let mut latest = nanos(meta.modified());
        if meta.is_dir()
            && let Ok(inner) = fs::read_dir(entry.path())
        {
            for child in inner.flatten() {
                if let Ok(meta) = child.path().symlink_metadata() {
                    latest = latest.max(nanos(meta.modified()));
                }
            }
        }
        ignored.insert(text.to_owned(), latest);
    }
    ignored
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        max_file: 1 << 20,
        max_store: 1 << 30,
    };

    fn changed(delta: &Delta) -> Vec<&str> {
        delta.changes.iter().map(|c| c.path.as_str()).collect()
    }

    #[test]
    fn a_scan_finds_what_changed_and_reads_only_that() {
        let root = tempfile::tempdir().unwrap();
        let store_dir = tempfile::tempdir().unwrap();
        let (mut store, _, _) = Store::open(store_dir.path(), root.path()).unwrap();
        let r = root.path();
        fs::write(r.join("a.txt"), "one\n").unwrap();
        fs::create_dir_all(r.join("src")).unwrap();
        fs::write(r.join("src/b.rs"), "fn main() {}\n").unwrap();
        fs::write(r.join(".gitignore"), "target/\n").unwrap();
        fs::create_dir_all(r.join("target/debug")).unwrap();
        fs::write(r.join("target/debug/x"), "built").unwrap();
        fs::create_dir_all(r.join(".git/objects")).unwrap();
        fs::write(r.join(".git/HEAD"), "ref").unwrap();
        let mut cache = Cache::default();
        let baseline = scan(r, &mut cache, &mut store, LIMITS);
        assert_eq!(changed(&baseline), vec![".gitignore", "a.txt", "src/b.rs"]);
        assert_eq!(baseline.ignored, vec!["target".to_owned()]);
        // Nothing changed: nothing found.
        let again = scan(r, &mut cache, &mut store, LIMITS);
        assert!(again.changes.is_empty() && again.ignored.is_empty());
        // A change of content, a new file, a removal, a mode change, a change in .git and in
        // the ignored tree.
        fs::write(r.join("a.txt"), "two\n").unwrap();
        fs::write(r.join("src/c.rs"), "").unwrap();
        fs::remove_file(r.join("src/b.rs")).unwrap();
        fs::write(r.join(".git/HEAD"), "other").unwrap();
        fs::write(r.join("target/new"), "x").unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            fs::set_permissions(r.join(".gitignore"), fs::Permissions::from_mode(0o755)).unwrap();
        }
        let delta = scan(r, &mut cache, &mut store, LIMITS);
        #[cfg(unix)]
        assert_eq!(
            changed(&delta),
            vec![".gitignore", "a.txt", "src/b.rs", "src/c.rs"]
        );
        assert_eq!(delta.ignored, vec!["target".to_owned()]);
        let a = delta.changes.iter().find(|c| c.path == "a.txt").unwrap();
        assert_eq!(
            store.get(a.before.kept_id().unwrap()).unwrap(),
            b"one\n".to_vec()
        );
        assert_eq!(
            store.get(a.after.kept_id().unwrap()).unwrap(),
            b"two\n".to_vec()
        );
    }

    #[test]
    fn a_change_with_the_same_stat_is_found_by_the_racy_rule() {
        let root = tempfile::tempdir().unwrap();
        let store_dir = tempfile::tempdir().unwrap();
        let (mut store, _, _) = Store::open(store_dir.path(), root.path()).unwrap();
        let path = root.path().join("a");
        fs::write(&path, "aaaa").unwrap();
        let mut cache = Cache::default();
        scan(root.path(), &mut cache, &mut store, LIMITS);
        // Same size, and the modification time put back: only the cache's time tells.
        let mtime = fs::metadata(&path).unwrap().modified().unwrap();
        fs::write(&path, "bbbb").unwrap();
        fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(mtime)
            .unwrap();
        // The cache says the earlier scan started 5 ms after this mtime, which a file
        // system's coarse clock allows for a write that came after the scan: re-read.
        cache.scanned_ns = nanos(Ok(mtime)) + 5_000_000;
        let entry = cache.entries.get_mut("a").unwrap();
        entry.ctime_ns = fields(&fs::metadata(&path).unwrap()).1;
        let delta = scan(root.path(), &mut cache, &mut store, LIMITS);
        assert_eq!(changed(&delta), vec!["a"]);
    }

    #[test]
    fn big_files_are_seen_but_not_kept() {
        let root = tempfile::tempdir().unwrap();
        let store_dir = tempfile::tempdir().unwrap();
        let (mut store, _, _) = Store::open(store_dir.path(), root.path()).unwrap();
        fs::write(root.path().join("big"), vec![0u8; 2000]).unwrap();
        let limits = Limits {
            max_file: 1000,
            ..LIMITS
        };
        let mut cache = Cache::default();
        let delta = scan(root.path(), &mut cache, &mut store, limits);
        assert!(!delta.changes[0].after.restorable());
        assert_eq!(store.total(), 0);
    }
}
