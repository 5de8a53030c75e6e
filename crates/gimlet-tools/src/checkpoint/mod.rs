//! Checkpoints: what every call that can change files changed under the roots, kept in
//! gimlet's own content-addressed store, to be listed (`checkpoints`), diffed (`diff`) and put
//! back (`restore`, `undo`).
//!
//! Each root has a store in gimlet's data folder (`<data>/gimlet/checkpoints/<key>/`, outside
//! every root, so that sandboxed commands, which may write only the roots and their temp
//! folder, cannot change it): the content of every file it tracks (`store.rs`), the list of
//! checkpoints, and a stat cache (`scan.rs`) so that a scan reads only files whose stat
//! changed. The pipeline scans before and after each such call (`pipeline/checkpoint.rs`):
//! what the scan before finds was made by no call (the user's editor) or by a background job,
//! and is recorded as such; what the scan after finds is the call's.
//!
//! A root that is `/` or the home folder, or that holds the store, gets no checkpoints.

mod scan;
mod stat_log;
mod store;
#[cfg(any(target_os = "linux", target_os = "macos", windows))]
mod watch;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use crate::config::CheckpointsConfig;
use crate::util::MutexExt as _;

pub(crate) use scan::Limits;
pub use store::{Checkpoint, Damaged, Index, Kind, PathChange, State};

/// The checkpoints of every root of an environment.
#[derive(Debug)]
pub struct Checkpoints {
    dir: PathBuf,
    config: CheckpointsConfig,
    roots: Mutex<Vec<Arc<RootCheckpoints>>>,
}

/// A checkpoint about to be recorded.
#[derive(Debug, Clone)]
pub(crate) struct NewCheckpoint {
    pub(crate) kind: Kind,
    pub(crate) tool: String,
    pub(crate) label: String,
    pub(crate) session: String,
    pub(crate) call: String,
    pub(crate) journal_change: Option<u64>,
}

impl Checkpoints {
    /// Checkpoints kept in `dir` (one folder per root), as configured.
    pub fn new(dir: PathBuf, config: CheckpointsConfig) -> Self {
        Self {
            dir,
            config,
            roots: Mutex::new(Vec::new()),
        }
    }

    /// Whether checkpoints are recorded.
    pub fn enabled(&self) -> bool {
        self.config.enabled
    }

    /// The folder of every root's store.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The checkpoints of `root`, or `None` when they are off or the root cannot have them
    /// (`/`, the home folder, a folder holding the store).
    pub fn for_root(&self, root: &Path) -> Option<Arc<RootCheckpoints>> {
        if !self.config.enabled || !suitable(root, &self.dir) {
            return None;
        }
        let mut roots = self.roots.locked();
        if let Some(found) = roots.iter().find(|r| r.root == root) {
            return Some(Arc::clone(found));
        }
        let key = &store::content_id(root.as_os_str().as_encoded_bytes())[..32];
        let made = Arc::new(RootCheckpoints {
            root: root.to_owned(),
            dir: self.dir.join(key),
            limits: Limits {
                max_file: self.config.max_file_mb.saturating_mul(1024 * 1024),
                max_store: self.config.max_store_mb.saturating_mul(1024 * 1024),
            },
            max_count: self.config.max_checkpoints.max(1),
            watch: self.config.watch,
            call_lock: Arc::new(tokio::sync::Mutex::new(())),
            inner: Mutex::new(None),
        });
        roots.push(Arc::clone(&made));
        Some(made)
    }

    /// The checkpoints of each of `roots` that can have them.
    pub fn of_roots<'a>(
        &self,
        roots: impl IntoIterator<Item = &'a Path>,
    ) -> Vec<Arc<RootCheckpoints>> {
        roots.into_iter().filter_map(|r| self.for_root(r)).collect()
    }

    /// Checkpoint `id` among `roots` (numbers are per root: one found in two roots is an
    /// error that says so). Blocking.
    pub fn find(
        roots: &[Arc<RootCheckpoints>],
        id: u64,
    ) -> Result<(Arc<RootCheckpoints>, Checkpoint), String> {
        let mut found = Vec::new();
        for root in roots {
            if let Some(checkpoint) = root.get(id)? {
                found.push((Arc::clone(root), checkpoint));
            }
        }
        match found.len() {
            0 => Err(format!(
                "no checkpoint #{id} here; `checkpoints` lists them (the oldest are dropped \
                 beyond the store's limits)"
            )),
            1 => Ok(found.remove(0)),
            _ => Err(format!(
                "checkpoint #{id} exists in more than one root (numbers are per root); choosing \
                 between roots is not supported yet: `checkpoints` lists each root's, and \
                 `undo` steps back through the latest"
            )),
        }
    }

    /// Builds the baseline of these roots on a thread of its own (the first call waits for it).
    pub fn start_baselines(&self, roots: &[PathBuf]) {
        let found: Vec<_> = roots.iter().filter_map(|r| self.for_root(r)).collect();
        if found.is_empty() {
            return;
        }
        let spawned = std::thread::Builder::new()
            .name("gimlet-baseline".into())
            .spawn(move || {
                for root in found {
                    if let Err(err) = root.with(|_| ()) {
                        tracing::warn!(%err, "no checkpoints for this root");
                    }
                }
            });
        if let Err(err) = spawned {
            tracing::warn!(%err, "the checkpoint baseline could not start; the first call builds it");
        }
    }
}

/// Whether a root may have checkpoints.
fn suitable(root: &Path, store: &Path) -> bool {
    let machine_wide = root.parent().is_none() || dirs::home_dir().is_some_and(|h| h == root);
    !machine_wide && !store.starts_with(root) && !root.starts_with(store)
}

/// The checkpoints of one root.
#[derive(Debug)]
pub struct RootCheckpoints {
    root: PathBuf,
    dir: PathBuf,
    limits: Limits,
    max_count: usize,
    /// Whether scans may use a watcher (Linux, macOS, Windows) instead of a full walk.
    #[cfg_attr(
        not(any(target_os = "linux", target_os = "macos", windows)),
        expect(dead_code, reason = "no watcher on this system")
    )]
    watch: bool,
    /// Held from a call's scan before to its scan after, so that calls of other sessions do
    /// not mix their changes.
    call_lock: Arc<tokio::sync::Mutex<()>>,
    /// Opened on first use; `Err` when the store cannot be opened.
    inner: Mutex<Option<Result<Inner, String>>>,
}

#[derive(Debug)]
struct Inner {
    store: store::Store,
    index: Index,
    cache: scan::Cache,
    /// What of the cache is on disk.
    persisted: stat_log::Persisted,
    /// Damage found (a list set aside, a blob that does not match).
    damage: Vec<String>,
    /// The watches of the root, when scans can use them.
    #[cfg(any(target_os = "linux", target_os = "macos", windows))]
    watching: watch::Watching,
}

/// Milliseconds since the epoch.
fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// What a scan around a call found, for its result.
#[derive(Debug, Default)]
pub(crate) struct Recorded {
    /// Ignored entries at the top of the root that changed.
    pub(crate) ignored: Vec<String>,
    /// Changed files too large to keep.
    pub(crate) unkept: Vec<String>,
    /// Changed files whose content did not fit in the store, even with every older
    /// checkpoint dropped.
    pub(crate) full: Vec<String>,
}

impl RootCheckpoints {
    /// The root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The lock a call holds from its scan before to its scan after.
    pub(crate) fn call_lock(&self) -> Arc<tokio::sync::Mutex<()>> {
        Arc::clone(&self.call_lock)
    }

    /// Runs `work` on the opened store (opening it and building the baseline first). Blocking.
    fn with<T>(&self, work: impl FnOnce(&mut Inner) -> T) -> Result<T, String> {
        let mut slot = self.inner.locked();
        if slot.is_none() {
            *slot = Some(self.open());
        }
        match slot.as_mut() {
            Some(Ok(inner)) => Ok(work(inner)),
            Some(Err(err)) => Err(err.clone()),
            None => Err(String::from("the checkpoint store is not open")),
        }
    }

    /// Opens the store and scans the root against the saved stat cache: the baseline. What
    /// changed while gimlet was not running is recorded as an outside checkpoint.
    fn open(&self) -> Result<Inner, String> {
        let describe = |err: std::io::Error| {
            format!(
                "the checkpoint store {} cannot be used: {err}",
                self.dir.display()
            )
        };
        let (store, index, damage) = store::Store::open(&self.dir, &self.root).map_err(describe)?;
        let saved = stat_log::load(&self.dir);
        let had_cache = saved.is_some();
        let (cache, persisted) =
            saved.unwrap_or_else(|| (scan::Cache::default(), stat_log::unsaved()));
        let mut inner = Inner {
            store,
            index,
            cache,
            persisted,
            damage,
            #[cfg(any(target_os = "linux", target_os = "macos", windows))]
            watching: watch::Watching::New,
        };
        let delta = self.scan(&mut inner);
        if had_cache && !delta.changes.is_empty() {
            let outside = NewCheckpoint {
                kind: Kind::Outside,
                tool: String::from("outside"),
                label: String::from("changed while gimlet was not running"),
                session: String::new(),
                call: String::new(),
                journal_change: None,
            };
            self.push(&mut inner, outside, delta);
        } else {
            self.save(&mut inner, true, &delta.dirty);
        }
        Ok(inner)
    }

    /// Scans the root and records what changed since the last scan as `new`, when anything
    /// did. Blocking.
    pub(crate) fn scan_and_record(&self, new: NewCheckpoint) -> Result<Recorded, String> {
        self.with(|inner| {
            let delta = self.scan(inner);
            if delta.changes.is_empty() && delta.ignored.is_empty() {
                if delta.touched {
                    self.save(inner, false, &delta.dirty);
                }
                return Recorded::default();
            }
            self.push(inner, new, delta)
        })
    }

    /// Scans the root: with the watcher's events where there is one, else a full walk.
    /// Content a full store could not keep gets room made for it afterwards
    /// ([`Self::make_room_for`]).
    fn scan(&self, inner: &mut Inner) -> scan::Delta {
        #[cfg(any(target_os = "linux", target_os = "macos", windows))]
        let mut delta = if self.watch {
            watch::scan(
                &self.root,
                &mut inner.cache,
                &mut inner.store,
                self.limits,
                &mut inner.watching,
            )
            .0
        } else {
            scan::scan(&self.root, &mut inner.cache, &mut inner.store, self.limits)
        };
        #[cfg(not(any(target_os = "linux", target_os = "macos", windows)))]
        let mut delta = scan::scan(&self.root, &mut inner.cache, &mut inner.store, self.limits);
        self.make_room_for(inner, &mut delta);
        delta
    }

    /// When the store was too full to keep new content the scan found: drops the oldest
    /// checkpoints (and the blobs only they hold; never what the current files, this delta or
    /// the newest checkpoint refer to) until it fits, and keeps each such file's content if
    /// the file still holds it. Only then is the list of what may go worked out (it walks
    /// every checkpoint's and current file's content ids), so a store with room pays nothing.
    fn make_room_for(&self, inner: &mut Inner, delta: &mut scan::Delta) {
        let unfit: Vec<usize> = delta
            .changes
            .iter()
            .enumerate()
            .filter(|(_, c)| {
                matches!(&c.after, State::File { id, kept: false, .. } if !id.starts_with("big-"))
            })
            .map(|(i, _)| i)
            .collect();
        if unfit.is_empty() {
            return;
        }
        let mut stays: BTreeSet<String> =
            inner.cache.ids().into_iter().map(str::to_owned).collect();
        for change in &delta.changes {
            stays.extend(change.before.kept_id().map(str::to_owned));
            stays.extend(change.after.kept_id().map(str::to_owned));
        }
        let stays: BTreeSet<&str> = stays.iter().map(String::as_str).collect();
        inner.store.begin_room(&inner.index, &stays);
        for i in unfit {
            let change = &mut delta.changes[i];
            let State::File { id, kept, .. } = &mut change.after else {
                continue;
            };
            // Read again: kept only if the file still holds what the scan found.
            let Ok(bytes) = std::fs::read(self.root.join(&change.path)) else {
                continue;
            };
            if store::content_id(&bytes) != *id
                || !inner
                    .store
                    .put(id, &bytes, self.limits.max_store)
                    .unwrap_or(false)
            {
                continue;
            }
            *kept = true;
            if let Some(entry) = inner.cache.entries.get_mut(&change.path) {
                entry.state = change.after.clone();
                delta.dirty.push(change.path.clone());
            }
        }
        let dropped = inner.store.end_room();
        if !dropped.is_empty() {
            tracing::info!(
                count = dropped.len(),
                "the checkpoint store was full: the oldest checkpoints were dropped"
            );
            inner.index.checkpoints.retain(|c| !dropped.contains(&c.id));
            match inner.store.save_index(&inner.index) {
                Ok(()) => inner.store.remove_dropped(),
                // Their content stays on disk until a list without them is saved.
                Err(err) => tracing::warn!(%err, "the list of checkpoints could not be saved"),
            }
        }
    }

    fn push(&self, inner: &mut Inner, new: NewCheckpoint, mut delta: scan::Delta) -> Recorded {
        let dirty = std::mem::take(&mut delta.dirty);
        let id = inner.index.next_id;
        inner.index.next_id += 1;
        let (mut unkept, mut full) = (Vec::new(), Vec::new());
        for change in &delta.changes {
            let states = [&change.before, &change.after];
            if states.iter().any(|s| !s.restorable()) {
                // A file over the size limit is known by its stat (`big-`), not its content.
                let big = states.iter().any(
                    |s| matches!(s, State::File { id, kept: false, .. } if id.starts_with("big-")),
                );
                if big { &mut unkept } else { &mut full }.push(change.path.clone());
            }
        }
        let recorded = Recorded {
            ignored: delta.ignored.clone(),
            unkept,
            full,
        };
        inner.index.checkpoints.push(Checkpoint {
            id,
            kind: new.kind,
            tool: new.tool,
            label: new.label,
            session: new.session,
            call: new.call,
            created_ms: now_ms(),
            changes: delta.changes,
            ignored: delta.ignored,
            undone: Vec::new(),
            journal_change: new.journal_change,
        });
        self.save(inner, true, &dirty);
        recorded
    }

    /// Applies the limits and writes the list and the stat cache (of which the entries
    /// `dirty` changed since the last save).
    fn save(&self, inner: &mut Inner, list: bool, dirty: &[String]) {
        if list {
            let cache = &inner.cache;
            inner.store.evict(
                &mut inner.index,
                || cache.ids(),
                self.max_count,
                self.limits.max_store,
            );
            if let Err(err) = inner.store.save_index(&inner.index) {
                tracing::warn!(%err, "the list of checkpoints could not be saved");
            }
        }
        if let Err(err) =
            stat_log::save(inner.store.dir(), &inner.cache, &mut inner.persisted, dirty)
        {
            tracing::warn!(%err, "the checkpoint stat cache could not be saved");
        }
    }

    /// The checkpoints, oldest first, and any damage found.
    pub fn list(&self) -> Result<(Vec<Checkpoint>, Vec<String>), String> {
        self.with(|inner| (inner.index.checkpoints.clone(), inner.damage.clone()))
    }

    /// One checkpoint.
    pub fn get(&self, id: u64) -> Result<Option<Checkpoint>, String> {
        self.with(|inner| inner.index.checkpoints.iter().find(|c| c.id == id).cloned())
    }

    /// The kept content `id`, checked; damage is remembered for the listing.
    pub fn content(&self, id: &str) -> Result<Vec<u8>, String> {
        self.with(|inner| {
            inner.store.get(id).map_err(|damaged| {
                let text = damaged.to_string();
                if !inner.damage.contains(&text) {
                    inner.damage.push(text.clone());
                }
                text
            })
        })?
    }

    /// What `rel` holds on disk now (read, not from the cache; its content kept). Blocking.
    pub(crate) fn state_now(&self, rel: &str) -> Result<State, String> {
        let path = self.root.join(rel);
        self.with(|inner| {
            scan::state_now(&path, &mut inner.store, self.limits)
                .map_err(|err| format!("`{rel}` cannot be read: {err}"))
        })?
    }

    /// Marks paths of a checkpoint undone.
    pub(crate) fn mark_undone(&self, id: u64, paths: &[String]) -> Result<(), String> {
        self.with(|inner| {
            if let Some(found) = inner.index.checkpoints.iter_mut().find(|c| c.id == id) {
                for path in paths {
                    if !found.undone.contains(path) {
                        found.undone.push(path.clone());
                    }
                }
            }
            if let Err(err) = inner.store.save_index(&inner.index) {
                tracing::warn!(%err, "the list of checkpoints could not be saved");
            }
        })
    }

    /// The relative, `/`-separated name of a path under the root.
    pub fn relative(&self, path: &Path) -> Option<String> {
        let rel = path.strip_prefix(&self.root).ok()?.to_str()?;
        Some(rel.replace('\\', "/"))
    }

    /// Bytes of content the store holds.
    pub fn stored_bytes(&self) -> Result<u64, String> {
        self.with(|inner| inner.store.total())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(label: &str) -> NewCheckpoint {
        NewCheckpoint {
            kind: Kind::Call,
            tool: "bash".into(),
            label: label.into(),
            session: "s".into(),
            call: String::new(),
            journal_change: None,
        }
    }

    #[test]
    fn the_list_survives_a_restart_and_changes_made_meanwhile_are_outside() {
        let root = tempfile::tempdir().unwrap();
        let data = tempfile::tempdir().unwrap();
        let root_path = crate::util::canonical(root.path()).unwrap();
        std::fs::write(root_path.join("a"), "1").unwrap();
        let first = Checkpoints::new(data.path().to_owned(), CheckpointsConfig::on());
        let cps = first.for_root(&root_path).unwrap();
        // The baseline.
        assert!(cps.list().unwrap().0.is_empty());
        std::fs::write(root_path.join("a"), "2").unwrap();
        cps.scan_and_record(call("echo 2 > a")).unwrap();
        drop(first);
        std::fs::write(root_path.join("b"), "new").unwrap();
        let second = Checkpoints::new(data.path().to_owned(), CheckpointsConfig::on());
        let (list, damage) = second.for_root(&root_path).unwrap().list().unwrap();
        assert!(damage.is_empty());
        let kinds: Vec<_> = list
            .iter()
            .map(|c| (c.id, c.kind, c.label.as_str()))
            .collect();
        assert_eq!(
            kinds,
            vec![
                (1, Kind::Call, "echo 2 > a"),
                (2, Kind::Outside, "changed while gimlet was not running")
            ]
        );
    }

    #[test]
    fn machine_wide_roots_and_the_store_itself_get_none() {
        let data = tempfile::tempdir().unwrap();
        let cps = Checkpoints::new(data.path().join("cp"), CheckpointsConfig::on());
        assert!(cps.for_root(Path::new("/")).is_none());
        if let Some(home) = dirs::home_dir() {
            assert!(cps.for_root(&home).is_none());
        }
        assert!(cps.for_root(data.path()).is_none());
        let off = Checkpoints::new(
            data.path().join("cp"),
            CheckpointsConfig {
                enabled: false,
                ..CheckpointsConfig::on()
            },
        );
        assert!(off.for_root(Path::new("/tmp/x")).is_none());
    }

    #[test]
    fn a_flood_of_changes_stays_within_the_limits() {
        let root = tempfile::tempdir().unwrap();
        let data = tempfile::tempdir().unwrap();
        let root_path = crate::util::canonical(root.path()).unwrap();
        let config = CheckpointsConfig {
            max_store_mb: 1,
            max_checkpoints: 10,
            ..CheckpointsConfig::on()
        };
        let cps = Checkpoints::new(data.path().to_owned(), config)
            .for_root(&root_path)
            .unwrap();
        assert!(cps.list().unwrap().0.is_empty());
        for i in 0..40u32 {
            // 100 KiB of fresh content each time: 4 MB in all, against a 1 MiB store.
            let bytes: Vec<u8> = (0..100 * 1024u32)
                .map(|j| u8::try_from((i * 7 + j) % 251).unwrap())
                .collect();
            std::fs::write(root_path.join(format!("f{}", i % 3)), bytes).unwrap();
            cps.scan_and_record(call("write")).unwrap();
        }
        let (list, _) = cps.list().unwrap();
        assert!(list.len() <= 10, "{}", list.len());
        assert!(cps.stored_bytes().unwrap() <= 1024 * 1024);
        assert_eq!(list.last().unwrap().id, 40);
    }

    /// Bytes of the files under every `blobs` folder below `dir`, as on disk.
    fn blob_bytes(dir: &Path) -> u64 {
        let mut total = 0;
        let mut stack = vec![dir.to_owned()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let entry = entry.unwrap();
                if entry.file_type().unwrap().is_dir() {
                    stack.push(entry.path());
                } else if entry.path().ancestors().any(|a| a.ends_with("blobs")) {
                    total += entry.metadata().unwrap().len();
                }
            }
        }
        total
    }

    #[test]
    fn a_full_store_drops_the_oldest_checkpoints_and_keeps_the_newest_restorable() {
        let root = tempfile::tempdir().unwrap();
        let data = tempfile::tempdir().unwrap();
        let root_path = crate::util::canonical(root.path()).unwrap();
        let config = CheckpointsConfig {
            max_store_mb: 1,
            ..CheckpointsConfig::on()
        };
        let cps = Checkpoints::new(data.path().to_owned(), config)
            .for_root(&root_path)
            .unwrap();
        assert!(cps.list().unwrap().0.is_empty());
        let mut files: [Option<Vec<u8>>; 3] = [None, None, None];
        for i in 0..30u32 {
            // 200 KiB of fresh content each time in one of three files: 6 MB in all against
            // 1 MiB; the current files and the newest checkpoint's content fit.
            let bytes: Vec<u8> = (0..200 * 1024u32)
                .map(|j| u8::try_from((i * 31 + j * 7 + j / 251) % 256).unwrap())
                .collect();
            let slot = usize::try_from(i % 3).unwrap();
            std::fs::write(root_path.join(format!("f{slot}")), &bytes).unwrap();
            let recorded = cps.scan_and_record(call("write")).unwrap();
            assert!(recorded.full.is_empty(), "round {i}: {:?}", recorded.full);
            let (list, _) = cps.list().unwrap();
            let newest = list.last().unwrap();
            assert_eq!(newest.id, u64::from(i) + 1);
            // The newest checkpoint is restorable both ways, byte for byte.
            let change = &newest.changes[0];
            let after = change.after.kept_id().unwrap();
            assert_eq!(cps.content(after).unwrap(), bytes, "round {i}");
            match &files[slot] {
                Some(previous) => {
                    let before = change
                        .before
                        .kept_id()
                        .unwrap_or_else(|| panic!("round {i}: the content before was not kept"));
                    assert_eq!(&cps.content(before).unwrap(), previous, "round {i}");
                }
                None => assert_eq!(change.before, State::Absent),
            }
            files[slot] = Some(bytes);
            let on_disk = blob_bytes(data.path());
            assert!(on_disk <= 1024 * 1024, "round {i}: {on_disk} bytes");
        }
        // The oldest went to make room.
        let (list, _) = cps.list().unwrap();
        assert!(list.len() < 30 && list[0].id > 1, "{}", list.len());
    }
}
