//! Scans that look only where something changed: on Linux an inotify watch on every folder the
//! walk enters, so that a scan drains the events and lists again only the folders they name;
//! on macOS and Windows one recursive watch on the root (`watch_tree.rs`), whose events name
//! paths, each mapped to the folder to list again.
//!
//! The kernel queues an inotify event when the syscall that caused it runs, so once a command
//! has ended, reading the queue until it is empty gives every change it made: nothing to
//! flush, nothing to wait for. `FSEvents` and `ReadDirectoryChangesW` deliver later, on another
//! thread: their scans wait for a cookie's event first (`watch_tree.rs`).
//!
//! The full walk (`scan::scan_with`) says what a scan means; a scan here gives the same
//! changes and leaves the same cache, or falls back to it:
//! - on the first scan (which sets up the watches before the walk lists a folder, so that
//!   nothing falls between the walk and the watch);
//! - when events were lost (inotify's queue overflowed, `FSEvents` says to scan again, Windows'
//!   buffer overflowed), an event comes for a watch it does not know or a path outside the
//!   root, the root itself was moved or removed, or a cookie's event did not come;
//! - when an ignore file (`.gitignore`, `.ignore`) or a `.git` changed anywhere, or
//!   `.git/info/exclude` changed (its stat is compared on each scan): what is ignored may
//!   have changed anywhere below.
//!
//! When a watch cannot be added (`fs.inotify.max_user_watches` reached, or no inotify
//! instance left), the watcher is dropped for the root and its scans are full walks from then
//! on (logged at debug level).
//!
//! Otherwise, each folder with events is listed again one level deep with the walk's rules;
//! its files are compared with the cache (those an event named are read again whatever their
//! stat), a new or replaced subfolder is walked whole (adding its watches), and a subfolder
//! that is gone (or replaced: another inode, or an event naming it as a folder) takes every
//! cached entry under it out of the cache. Removals come before additions, so a folder moved
//! within the root, whose watch the kernel keeps under the same number, is mapped to its new
//! name.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::ffi::OsString;
#[cfg(target_os = "linux")]
use std::mem::MaybeUninit;
#[cfg(target_os = "linux")]
use std::os::fd::OwnedFd;
use std::path::Path;
use std::time::SystemTime;

#[cfg(target_os = "linux")]
use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
#[cfg(target_os = "linux")]
use rustix::io::Errno;

use super::scan::{self, Cache, Delta, Limits, Pass, Stat};
use super::store::Store;

#[cfg(any(target_os = "macos", windows, all(target_os = "linux", test)))]
#[path = "watch_tree.rs"]
mod tree;

/// The events a folder's watch asks for.
#[cfg(target_os = "linux")]
fn mask() -> WatchFlags {
    WatchFlags::CREATE
        | WatchFlags::DELETE
        | WatchFlags::MODIFY
        | WatchFlags::ATTRIB
        | WatchFlags::CLOSE_WRITE
        | WatchFlags::MOVED_FROM
        | WatchFlags::MOVED_TO
        | WatchFlags::DELETE_SELF
        | WatchFlags::MOVE_SELF
        | WatchFlags::DONT_FOLLOW
        | WatchFlags::ONLYDIR
}

/// Names whose change changes what the walk leaves out.
fn rules_file(name: &[u8]) -> bool {
    matches!(name, b".gitignore" | b".ignore" | b".git")
}

/// A watched folder.
#[derive(Debug)]
struct Watched {
    rel: String,
    ino: u64,
}

/// Where the events come from.
#[derive(Debug)]
enum Source {
    /// An inotify instance with a watch on every folder (Linux).
    #[cfg(target_os = "linux")]
    Inotify(OwnedFd),
    /// One recursive watch on the root (macOS, Windows; Linux in tests); folders are numbered
    /// here.
    #[cfg(any(target_os = "macos", windows, all(target_os = "linux", test)))]
    Tree { tree: tree::Tree, next: i32 },
}

/// The watches of one root.
#[derive(Debug)]
pub(crate) struct Watcher {
    source: Source,
    /// Watch number -> folder.
    dirs: HashMap<i32, Watched>,
    /// Folder -> watch number.
    by_path: BTreeMap<String, i32>,
    /// Watches taken off (their late events mean nothing).
    retired: HashSet<i32>,
    /// The names at the top of the root the walk does not leave out.
    top: BTreeSet<OsString>,
    /// The stat of `.git/info/exclude`, if there is one.
    exclude: Option<ExcludeStat>,
    /// A watch could not be added: the watches are incomplete.
    broken: bool,
    /// Test only: the next scan finds the queue overflowed.
    #[cfg(test)]
    overflow: bool,
}

/// Why a scan cannot use the events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fallback {
    /// The queue overflowed: events were lost.
    Overflow,
    /// An event for a watch this watcher does not know.
    UnknownWatch,
    /// An ignore file, `.git` or `.git/info/exclude` changed.
    Rules,
    /// The root itself was moved or removed.
    Root,
    /// The queue could not be read.
    Read,
    /// A folder the walk knows was removed, renamed or replaced (Windows, where Wine reports
    /// a folder's move between two folders by its old name alone, at times).
    #[cfg_attr(
        all(target_os = "linux", not(test)),
        expect(dead_code, reason = "Linux's watcher follows moved folders")
    )]
    Folder,
    /// The cookie could not be made or its event did not come (`watch_tree.rs`).
    #[cfg_attr(
        all(target_os = "linux", not(test)),
        expect(dead_code, reason = "Linux's inotify needs no cookie")
    )]
    Sync,
}

/// What the events of one scan say.
#[derive(Debug, Default)]
struct Events {
    /// Folder -> names of entries an event named (`None`: the folder itself).
    dirty: BTreeMap<String, BTreeSet<String>>,
    /// Folder -> names of subfolders created, removed, moved or chmodded (to walk again).
    dirs: BTreeMap<String, BTreeSet<String>>,
    /// Watches the kernel dropped.
    gone: Vec<i32>,
}

/// What tells that `.git/info/exclude` changed: its size, modification time and (Unix)
/// change time and inode.
type ExcludeStat = (u64, Option<SystemTime>, i64, u64);

fn exclude_stat(root: &Path) -> Option<ExcludeStat> {
    let meta = std::fs::symlink_metadata(root.join(".git/info/exclude")).ok()?;
    #[cfg(unix)]
    let (ctime, ino) = {
        use std::os::unix::fs::MetadataExt as _;
        (meta.ctime_nsec() + meta.ctime() * 1_000_000_000, meta.ino())
    };
    #[cfg(not(unix))]
    let (ctime, ino) = (0, 0);
    Some((meta.len(), meta.modified().ok(), ctime, ino))
}

/// A folder's inode (0 where the system has none to give: then only events tell that a
/// folder was replaced).
fn ino(entry: &ignore::DirEntry) -> u64 {
    #[cfg(unix)]
    return entry.ino().unwrap_or(0);
    #[cfg(not(unix))]
    {
        let _ = entry;
        0
    }
}

fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_owned()
    } else {
        format!("{dir}/{name}")
    }
}

/// The keys of `map` under folder `dir` (`direct`: only those directly in it), in order.
fn keys_under<V>(map: &BTreeMap<String, V>, dir: &str, direct: bool) -> Vec<String> {
    let prefix = if dir.is_empty() {
        String::new()
    } else {
        format!("{dir}/")
    };
    map.range(prefix.clone()..)
        .take_while(|(k, _)| k.starts_with(&prefix))
        .filter(|(k, _)| !(k.is_empty() || direct && k[prefix.len()..].contains('/')))
        .map(|(k, _)| k.clone())
        .collect()
}

/// The watched folders directly in folder `dir`.
fn children(by_path: &BTreeMap<String, i32>, dir: &str) -> Vec<(String, i32)> {
    keys_under(by_path, dir, true)
        .into_iter()
        .map(|k| {
            let wd = by_path[&k];
            (k, wd)
        })
        .collect()
}

/// Takes out of `map` every key under folder `dir` (`direct`: only those directly in it).
fn take_under<V>(map: &mut BTreeMap<String, V>, dir: &str, direct: bool) -> Vec<(String, V)> {
    keys_under(map, dir, direct)
        .into_iter()
        .filter_map(|k| map.remove(&k).map(|v| (k, v)))
        .collect()
}

impl Watcher {
    /// A new watcher: on Linux an inotify instance without watches yet, elsewhere (and on
    /// Linux when a test asks) the recursive watch of the root.
    fn new(root: &Path) -> Result<Self, String> {
        #[cfg(target_os = "linux")]
        let inotify = || -> Result<Source, String> {
            Ok(Source::Inotify(
                inotify::init(CreateFlags::NONBLOCK | CreateFlags::CLOEXEC)
                    .map_err(|err| err.to_string())?,
            ))
        };
        #[cfg(all(target_os = "linux", test))]
        let source = if tests::tree_watcher() {
            Self::tree(root)?
        } else {
            inotify()?
        };
        #[cfg(all(target_os = "linux", not(test)))]
        let source = inotify()?;
        #[cfg(not(target_os = "linux"))]
        let source = Self::tree(root)?;
        Ok(Self {
            source,
            dirs: HashMap::new(),
            by_path: BTreeMap::new(),
            retired: HashSet::new(),
            top: BTreeSet::new(),
            exclude: exclude_stat(root),
            broken: false,
            #[cfg(test)]
            overflow: false,
        })
    }

    #[cfg(any(target_os = "macos", windows, all(target_os = "linux", test)))]
    fn tree(root: &Path) -> Result<Source, String> {
        Ok(Source::Tree {
            tree: tree::Tree::new(root).map_err(|err| err.to_string())?,
            next: 0,
        })
    }

    /// Watches folder `rel` (at `path`, inode `ino`).
    fn add(&mut self, path: &Path, rel: &str, ino: u64) {
        if self.broken {
            return;
        }
        let wd = match &mut self.source {
            #[cfg(target_os = "linux")]
            Source::Inotify(fd) => {
                #[cfg(test)]
                let added = if tests::watch_limit_reached() {
                    Err(Errno::NOSPC)
                } else {
                    inotify::add_watch(&*fd, path, mask())
                };
                #[cfg(not(test))]
                let added = inotify::add_watch(&*fd, path, mask());
                match added {
                    Ok(wd) => wd,
                    // Gone or replaced since the walk saw it, or not readable (nor listed
                    // then): its parent's events tell when that changes.
                    Err(Errno::NOENT | Errno::NOTDIR | Errno::ACCESS) => return,
                    Err(err) => {
                        tracing::debug!(
                            %err,
                            path = %path.display(),
                            "a checkpoint watch could not be added \
                             (fs.inotify.max_user_watches?); scans of this root walk it whole"
                        );
                        self.broken = true;
                        return;
                    }
                }
            }
            // The recursive watch covers it already: only a number for it here.
            #[cfg(any(target_os = "macos", windows, all(target_os = "linux", test)))]
            Source::Tree { next, .. } => {
                let _ = path;
                *next += 1;
                *next
            }
        };
        if let Some(old) = self.dirs.insert(
            wd,
            Watched {
                rel: rel.to_owned(),
                ino,
            },
        ) && old.rel != rel
        {
            // The same folder under two names (cannot happen without hard-linked folders);
            // keep one.
            self.by_path.remove(&old.rel);
        }
        self.retired.remove(&wd);
        self.by_path.insert(rel.to_owned(), wd);
    }

    /// Takes the watches of folder `rel` and of every folder under it off.
    fn drop_dirs(&mut self, rel: &str) {
        let mut gone = take_under(&mut self.by_path, rel, false);
        if let Some(wd) = self.by_path.remove(rel) {
            gone.push((rel.to_owned(), wd));
        }
        for (_, wd) in gone {
            self.dirs.remove(&wd);
            self.retired.insert(wd);
            // Fails for a folder already removed; nothing to do then.
            match &self.source {
                #[cfg(target_os = "linux")]
                Source::Inotify(fd) => {
                    let _ = inotify::remove_watch(fd, wd);
                }
                #[cfg(any(target_os = "macos", windows, all(target_os = "linux", test)))]
                Source::Tree { .. } => {}
            }
        }
    }

    /// Whether the watch should be set up again before the next scan: on Windows, once a
    /// folder was moved in (or renamed). Wine's recursive watch reports nothing from inside a
    /// folder moved in; a new watch sees the tree as it is. Windows' own watch follows the
    /// tree in the kernel and should not need it, but that could not be tried here: the price
    /// is one full walk after such a call.
    fn stale(&self) -> bool {
        match &self.source {
            #[cfg(target_os = "linux")]
            Source::Inotify(_) => false,
            #[cfg(any(target_os = "macos", windows, all(target_os = "linux", test)))]
            Source::Tree { tree, .. } => cfg!(windows) && tree.moved(),
        }
    }

    /// Every event since the last scan.
    fn drain(&mut self) -> Result<Events, Fallback> {
        #[cfg(test)]
        if std::mem::take(&mut self.overflow) {
            let _ = self.drain_source();
            return Err(Fallback::Overflow);
        }
        self.drain_source()
    }

    fn drain_source(&mut self) -> Result<Events, Fallback> {
        match &mut self.source {
            #[cfg(target_os = "linux")]
            Source::Inotify(fd) => Self::drain_inotify(fd, &self.dirs, &self.retired),
            #[cfg(any(target_os = "macos", windows, all(target_os = "linux", test)))]
            Source::Tree { tree, .. } => {
                let changes = tree.sync()?;
                let mut events = Events::default();
                for change in &changes {
                    self.note(&mut events, change)?;
                }
                Ok(events)
            }
        }
    }

    /// Maps a recursive watch's change of a path to the folder to list again: the path's
    /// folder when it is known (one the walk entered), else the deepest known folder above
    /// it, which then lists the name under it (a new folder is walked whole; an ignored one
    /// is not listed).
    #[cfg(any(target_os = "macos", windows, all(target_os = "linux", test)))]
    fn note(&self, events: &mut Events, change: &tree::Change) -> Result<(), Fallback> {
        let parts: Vec<&str> = change.rel.split('/').collect();
        let Some((name, folders)) = parts.split_last() else {
            return Ok(());
        };
        if folders.contains(&".git") {
            // Inside a repository's `.git`, which no walk enters (`.git/info/exclude` is
            // compared by its stat).
            return Ok(());
        }
        if rules_file(name.as_bytes()) {
            return Err(Fallback::Rules);
        }
        if cfg!(windows) && change.entry && self.by_path.contains_key(&change.rel) {
            return Err(Fallback::Folder);
        }
        // The deepest known folder above the path, by cutting its name at each `/` (no
        // allocation per level: an install floods ignored trees with events).
        let rel = change.rel.as_str();
        let parent = rel.rfind('/').map_or("", |i| &rel[..i]);
        let mut dir = parent;
        while !dir.is_empty() && !self.by_path.contains_key(dir) {
            dir = dir.rfind('/').map_or("", |i| &dir[..i]);
        }
        if dir.len() < parent.len() {
            // Under a folder the walk has not entered (new, or ignored): its name in `dir`.
            let below = &rel[if dir.is_empty() { 0 } else { dir.len() + 1 }..];
            let first = below.split('/').next().unwrap_or(below);
            events
                .dirty
                .entry(dir.to_owned())
                .or_default()
                .insert(first.to_owned());
            return Ok(());
        }
        let dir = dir.to_owned();
        if change.entry {
            events
                .dirs
                .entry(dir.clone())
                .or_default()
                .insert((*name).to_owned());
        } else if self.by_path.contains_key(&change.rel) {
            // A known folder's content or times changed (Windows says so of a folder whose
            // entries changed): list it again.
            events.dirty.entry(change.rel.clone()).or_default();
        }
        events
            .dirty
            .entry(dir)
            .or_default()
            .insert((*name).to_owned());
        Ok(())
    }

    /// Reads every event in the inotify queue.
    #[cfg(target_os = "linux")]
    fn drain_inotify(
        fd: &OwnedFd,
        dirs: &HashMap<i32, Watched>,
        retired: &HashSet<i32>,
    ) -> Result<Events, Fallback> {
        let mut events = Events::default();
        let mut fallback = None;
        let mut buf = [MaybeUninit::<u8>::uninit(); 16 * 1024];
        let mut reader = inotify::Reader::new(fd, &mut buf);
        loop {
            let event = match reader.next() {
                Ok(event) => event,
                Err(Errno::AGAIN) => break,
                Err(Errno::INTR) => continue,
                Err(_) => return Err(Fallback::Read),
            };
            let flags = event.events();
            if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
                fallback = Some(Fallback::Overflow);
                continue;
            }
            let wd = event.wd();
            let Some(watched) = dirs.get(&wd) else {
                if !retired.contains(&wd) && !flags.contains(ReadFlags::IGNORED) {
                    fallback.get_or_insert(Fallback::UnknownWatch);
                }
                continue;
            };
            if flags.contains(ReadFlags::IGNORED) {
                events.gone.push(wd);
                continue;
            }
            let Some(name) = event.file_name() else {
                // An event on the folder itself: its parent has one naming it, but for the
                // root, which has no parent here.
                if watched.rel.is_empty()
                    && flags.intersects(ReadFlags::DELETE_SELF | ReadFlags::MOVE_SELF)
                {
                    fallback.get_or_insert(Fallback::Root);
                }
                continue;
            };
            let name_bytes = name.to_bytes();
            if rules_file(name_bytes) {
                fallback.get_or_insert(Fallback::Rules);
                continue;
            }
            let Ok(name) = name.to_str() else {
                // Not UTF-8: left out of the cache, as by the walk.
                continue;
            };
            let rel = watched.rel.clone();
            if flags.contains(ReadFlags::ISDIR)
                && flags.intersects(
                    ReadFlags::CREATE
                        | ReadFlags::DELETE
                        | ReadFlags::MOVED_FROM
                        | ReadFlags::MOVED_TO
                        // A folder made unreadable (or readable again): walked again.
                        | ReadFlags::ATTRIB,
                )
            {
                events
                    .dirs
                    .entry(rel.clone())
                    .or_default()
                    .insert(name.to_owned());
            }
            events.dirty.entry(rel).or_default().insert(name.to_owned());
        }
        match fallback {
            Some(why) => Err(why),
            None => Ok(events),
        }
    }
}

/// Where a root's watches stand.
#[derive(Debug, Default)]
pub(crate) enum Watching {
    /// None yet: the next scan walks the root whole and sets them up.
    #[default]
    New,
    /// In place: scans use their events.
    Active(Box<Watcher>),
    /// A watch could not be added (or no watcher made): scans walk the root whole.
    Off,
}

/// Scans `root` with the watcher's events when it has one, else walks it whole and (unless the
/// watches could not be set up before) sets up a new watcher. Returns also why it walked the
/// root whole after a watcher was in place.
pub(crate) fn scan(
    root: &Path,
    cache: &mut Cache,
    store: &mut Store,
    limits: Limits,
    watching: &mut Watching,
) -> (Delta, Option<Fallback>) {
    let mut why = None;
    match watching {
        Watching::Active(current) => {
            let drained = if exclude_stat(root) == current.exclude {
                current.drain()
            } else {
                Err(Fallback::Rules)
            };
            match drained {
                Ok(events) => {
                    tracing::debug!(
                        folders = events.dirty.len(),
                        "a checkpoint scan from the watcher's events"
                    );
                    let delta = current.apply(root, cache, store, limits, events);
                    if current.broken {
                        *watching = Watching::Off;
                    } else if current.stale() {
                        tracing::debug!("a folder was moved: the next scan sets up a new watch");
                        *watching = Watching::New;
                    }
                    return (delta, None);
                }
                Err(Fallback::Sync) => {
                    // The cookie could not be made, or its event did not come within the wait:
                    // each scan would wait as long again. Full walks from now on.
                    tracing::debug!(
                        root = %root.display(),
                        "the checkpoint watcher did not answer; scans of this root walk it whole"
                    );
                    *watching = Watching::Off;
                    return (scan::scan(root, cache, store, limits), Some(Fallback::Sync));
                }
                Err(fallback) => {
                    tracing::debug!(?fallback, root = %root.display(), "a full checkpoint scan");
                    why = Some(fallback);
                }
            }
        }
        Watching::Off => return (scan::scan(root, cache, store, limits), None),
        Watching::New => tracing::debug!("a full checkpoint scan, setting up the watcher"),
    }
    // The old watcher goes first: two watches of one root at once share state in Wine, whose
    // new watch then kept a moved folder's old name.
    *watching = Watching::New;
    let mut fresh = match Watcher::new(root) {
        Ok(fresh) => Some(fresh),
        Err(err) => {
            tracing::debug!(%err, "no file watcher for checkpoints; scans walk the root whole");
            None
        }
    };
    let (delta, top) = scan::scan_with(root, cache, store, limits, &mut |rel, entry| {
        if let Some(fresh) = fresh.as_mut() {
            fresh.add(entry.path(), rel, ino(entry));
        }
    });
    *watching = match fresh {
        Some(mut fresh) if !fresh.broken => {
            fresh.top = top;
            Watching::Active(Box::new(fresh))
        }
        Some(_) | None => Watching::Off,
    };
    (delta, why)
}

impl Watcher {
    /// Applies `events` to `cache`: lists again the folders they name.
    fn apply(
        &mut self,
        root: &Path,
        cache: &mut Cache,
        store: &mut Store,
        limits: Limits,
        events: Events,
    ) -> Delta {
        let started = scan::nanos(Ok(SystemTime::now()));
        let mut pass = Pass {
            previous_ns: cache.scanned_ns,
            store,
            limits,
            delta: Delta::default(),
        };
        // The cached entries looked at again; what is left of them at the end is gone.
        let mut old: BTreeMap<String, Stat> = BTreeMap::new();
        // First the removals: list each folder with events, and take out of the cache (and
        // off the watches) every subfolder gone or replaced.
        let mut listed: Vec<(String, Vec<ignore::DirEntry>)> = Vec::new();
        let mut walk: Vec<String> = Vec::new();
        for dir in events.dirty.keys() {
            if !self.by_path.contains_key(dir) {
                // Under a folder already taken off.
                continue;
            }
            let entries: Vec<ignore::DirEntry> = scan::walker(&root.join(dir))
                .max_depth(Some(1))
                .build()
                .flatten()
                .filter(|e| e.depth() == 1)
                .collect();
            let empty = BTreeSet::new();
            let dir_events = events.dirs.get(dir).unwrap_or(&empty);
            let mut present: HashMap<String, u64> = HashMap::new();
            for entry in &entries {
                if entry.file_type().is_some_and(|k| k.is_dir())
                    && let Some(name) = entry.file_name().to_str()
                {
                    present.insert(name.to_owned(), ino(entry));
                }
            }
            for (sub, wd) in children(&self.by_path, dir) {
                let name = &sub[if dir.is_empty() { 0 } else { dir.len() + 1 }..];
                let same = present.get(name).is_some_and(|ino| {
                    self.dirs.get(&wd).is_some_and(|w| w.ino == *ino) && !dir_events.contains(name)
                });
                if !same {
                    self.drop_dirs(&sub);
                    old.extend(take_under(&mut cache.entries, &sub, false));
                }
            }
            old.extend(take_under(&mut cache.entries, dir, true));
            for name in present.keys() {
                let sub = join(dir, name);
                if !self.by_path.contains_key(&sub) {
                    walk.push(sub);
                }
            }
            if dir.is_empty() {
                self.top = entries.iter().map(|e| e.file_name().to_owned()).collect();
            }
            listed.push((dir.clone(), entries));
        }
        // The kernel dropped these watches (their folders are gone): their parents' events
        // took the entries out already.
        for wd in events.gone {
            if let Some(watched) = self.dirs.remove(&wd)
                && self.by_path.get(&watched.rel) == Some(&wd)
            {
                self.by_path.remove(&watched.rel);
            }
        }
        // Then the additions: the files of each folder listed, and the new subfolders whole.
        for (dir, entries) in listed {
            let named = events.dirty.get(&dir);
            for entry in entries {
                let Some(kind) = entry.file_type() else {
                    continue;
                };
                if !(kind.is_file() || kind.is_symlink()) {
                    continue;
                }
                let Some(rel) = scan::relative(root, entry.path()) else {
                    continue;
                };
                let Ok(meta) = entry.metadata() else {
                    continue;
                };
                let force = entry
                    .file_name()
                    .to_str()
                    .is_some_and(|n| named.is_some_and(|set| set.contains(n)));
                let before = old.remove(&rel);
                pass.file(entry.path(), rel, &meta, before, force, &mut cache.entries);
            }
        }
        for sub in walk {
            self.walk(root, &sub, &mut pass, &mut old, &mut cache.entries);
        }
        for (path, stat) in old {
            pass.gone(path, stat);
        }
        let mut delta = pass.delta;
        scan::finish(root, cache, &mut delta, &self.top);
        cache.scanned_ns = started;
        delta
    }

    /// Walks the new folder `sub` whole, watching each folder in it.
    fn walk(
        &mut self,
        root: &Path,
        sub: &str,
        pass: &mut Pass<'_>,
        old: &mut BTreeMap<String, Stat>,
        seen: &mut BTreeMap<String, Stat>,
    ) {
        for entry in scan::walker(&root.join(sub)).build().flatten() {
            let Some(kind) = entry.file_type() else {
                continue;
            };
            let Some(rel) = scan::relative(root, entry.path()) else {
                continue;
            };
            if kind.is_dir() {
                self.add(entry.path(), &rel, ino(&entry));
                continue;
            }
            if !(kind.is_file() || kind.is_symlink()) {
                continue;
            }
            let Ok(meta) = entry.metadata() else {
                continue;
            };
            let before = old.remove(&rel).or_else(|| seen.remove(&rel));
            pass.file(entry.path(), rel, &meta, before, false, seen);
        }
    }

    /// Test only: the next scan finds the queue overflowed.
    #[cfg(test)]
    pub(crate) fn inject_overflow(&mut self) {
        self.overflow = true;
    }
}

#[cfg(test)]
#[path = "watch_tests.rs"]
mod tests;
