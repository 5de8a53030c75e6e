//! The events of macOS (`FSEvents`) and Windows (`ReadDirectoryChangesW`), through `notify`: one
//! recursive watch on the root, whose events name paths (Linux's inotify names a folder's
//! entries, `watch.rs`). The tests also run it on Linux, where `notify` uses inotify.
//!
//! Unlike inotify's queue, these events reach a thread of `notify`'s, later than the change
//! that caused them: a scan cannot simply read what has arrived. So each scan makes a
//! *cookie*, a file `.gimlet-sync-<pid>-<n>` at the top of the root (watchman's way), and
//! reads events until the cookie's own arrives: every change made before it was made has
//! arrived then, since the events of one watch arrive in order. The cookie is removed at once,
//! before the scan lists anything, and the events of the latest few cookies' names are
//! skipped while no file has that name. Nothing else is skipped: a file a command names like a
//! cookie is captured as any other (a name it guesses before gimlet makes it only makes the
//! cookie fail, below). A cookie that cannot be made (a root that is not writable) or whose
//! event does not come within [`SYNC_WAIT`] makes this scan and every later one of the root a
//! full walk (`watch::scan`): each would wait as long again.

use std::path::{Component, Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use notify::Watcher as _;
use notify::event::ModifyKind;
use notify::{Config, Event, EventKind, EventKindMask, RecommendedWatcher, RecursiveMode};

use super::Fallback;

/// The start of a cookie's name.
pub(super) const COOKIE_PREFIX: &str = ".gimlet-sync-";

/// How many of the latest cookies' names are remembered, so that the events of their removal
/// are skipped when they come.
const RECENT_COOKIES: usize = 4;

/// How long a scan waits for its cookie's event.
#[cfg(not(test))]
const SYNC_WAIT: Duration = Duration::from_secs(5);
#[cfg(test)]
const SYNC_WAIT: Duration = Duration::from_millis(500);

/// What an event says of a path under the root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Change {
    /// The path's relative, `/`-separated name (empty: the root).
    pub(super) rel: String,
    /// Created, removed, renamed or its metadata changed (a folder so named is walked again);
    /// else its content or times changed.
    pub(super) entry: bool,
}

/// Where an event's path is.
enum Place {
    /// Under the root: its relative, `/`-separated name (empty: the root).
    Under(String),
    /// Under the root, with a name that is not UTF-8: left out of the cache, as by the walk.
    NotUtf8,
    /// Not under the root.
    Outside,
}

/// The recursive watch of one root.
pub(super) struct Tree {
    watcher: RecommendedWatcher,
    events: mpsc::Receiver<notify::Result<Event>>,
    root: PathBuf,
    /// The root as the system names it (`FSEvents` reports `/private/var` for `/var`).
    canonical: Option<PathBuf>,
    cookies: u64,
    /// Cookies not removed yet.
    leftovers: Vec<PathBuf>,
    /// The names of the latest cookies (their removals' events are skipped).
    recent: std::collections::VecDeque<String>,
    /// A folder was moved (renamed) under the root since the watch began (`Watcher::stale`).
    moved_folder: bool,
}

impl std::fmt::Debug for Tree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tree")
            .field("root", &self.root)
            .field("cookies", &self.cookies)
            .finish_non_exhaustive()
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        // Ends the watch before the watcher goes: dropping it alone ends it later, on its
        // thread, and a watch of the same root made meanwhile shares its state (in Wine, whose
        // new watch then kept a moved folder's old name).
        let _ = self.watcher.unwatch(&self.root);
        for cookie in &self.leftovers {
            let _ = std::fs::remove_file(cookie);
        }
    }
}

/// Whether an event of `kind` says that an entry came, went or changed what it is.
fn entry_kind(kind: EventKind) -> bool {
    !matches!(
        kind,
        EventKind::Modify(ModifyKind::Data(_) | ModifyKind::Any | ModifyKind::Other)
            | EventKind::Access(_)
    )
}

impl Tree {
    /// Watches `root` and everything under it. Fails when the system refuses (Linux: the
    /// user's inotify watches used up).
    pub(super) fn new(root: &Path) -> notify::Result<Self> {
        let (sender, events) = mpsc::channel();
        let config = Config::default()
            .with_event_kinds(EventKindMask::CORE | EventKindMask::ACCESS_CLOSE)
            .with_follow_symlinks(false);
        let mut watcher = RecommendedWatcher::new(sender, config)?;
        watcher.watch(root, RecursiveMode::Recursive)?;
        Ok(Self {
            watcher,
            events,
            root: root.to_owned(),
            canonical: std::fs::canonicalize(root).ok().filter(|c| c != root),
            cookies: 0,
            leftovers: Vec::new(),
            recent: std::collections::VecDeque::new(),
            moved_folder: false,
        })
    }

    /// Where `path` is.
    fn place(&self, path: &Path) -> Place {
        let Some(rest) = path
            .strip_prefix(&self.root)
            .ok()
            .or_else(|| path.strip_prefix(self.canonical.as_ref()?).ok())
        else {
            return Place::Outside;
        };
        let mut parts = Vec::new();
        for part in rest.components() {
            match part {
                Component::Normal(name) => match name.to_str() {
                    Some(name) => parts.push(name),
                    None => return Place::NotUtf8,
                },
                Component::CurDir => {}
                _ => return Place::Outside,
            }
        }
        Place::Under(parts.join("/"))
    }

    /// Every change since the last call, up to a cookie made now.
    pub(super) fn sync(&mut self) -> Result<Vec<Change>, Fallback> {
        self.cookies += 1;
        let name = format!("{COOKIE_PREFIX}{}-{}", std::process::id(), self.cookies);
        let cookie = self.root.join(&name);
        if let Err(err) = std::fs::File::create_new(&cookie) {
            tracing::debug!(%err, "no checkpoint cookie in the root; a full scan");
            return Err(Fallback::Sync);
        }
        if self.recent.len() == RECENT_COOKIES {
            self.recent.pop_front();
        }
        self.recent.push_back(name.clone());
        let result = self.until_cookie(&name);
        // Its removal's event comes in the next call, and is skipped there. A removal that
        // fails (Windows: a scanner holding the file open) is tried again at each call.
        self.leftovers.push(cookie);
        self.leftovers
            .retain(|cookie| std::fs::remove_file(cookie).is_err() && cookie.exists());
        result
    }

    fn until_cookie(&mut self, name: &str) -> Result<Vec<Change>, Fallback> {
        let deadline = Instant::now() + SYNC_WAIT;
        let mut changes = Vec::new();
        let mut fallback = None;
        loop {
            let event = match self
                .events
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            {
                Ok(Ok(event)) => event,
                Ok(Err(err)) => {
                    tracing::debug!(%err, "a checkpoint watch failed");
                    fallback.get_or_insert(Fallback::Read);
                    continue;
                }
                Err(mpsc::RecvTimeoutError::Timeout) => return Err(Fallback::Sync),
                Err(mpsc::RecvTimeoutError::Disconnected) => return Err(Fallback::Read),
            };
            if event.need_rescan() {
                fallback.get_or_insert(Fallback::Overflow);
            }
            let entry = entry_kind(event.kind);
            let renamed = matches!(event.kind, EventKind::Modify(ModifyKind::Name(_)));
            let mut synced = false;
            for path in &event.paths {
                if renamed && path.is_dir() {
                    self.moved_folder = true;
                }
                let rel = match self.place(path) {
                    Place::Under(rel) => rel,
                    Place::NotUtf8 => continue,
                    Place::Outside => {
                        fallback.get_or_insert(Fallback::UnknownWatch);
                        continue;
                    }
                };
                if rel == name {
                    synced = true;
                } else if self.recent.contains(&rel) && std::fs::symlink_metadata(path).is_err()
                    || self.leftovers.iter().any(|c| c.ends_with(&rel))
                {
                    // An earlier cookie, removed (a file made again under its name is a
                    // change as any other), or one that could not be removed yet.
                } else if rel.is_empty() {
                    if entry {
                        fallback.get_or_insert(Fallback::Root);
                    }
                } else {
                    changes.push(Change { rel, entry });
                }
            }
            if synced {
                return match fallback {
                    Some(why) => Err(why),
                    None => Ok(changes),
                };
            }
        }
    }

    /// Whether a folder was moved (renamed) under the root since the watch began.
    pub(super) fn moved(&self) -> bool {
        self.moved_folder
    }

    /// Stops watching (the events of a dropped watcher stop too).
    #[cfg(test)]
    pub(super) fn unwatch(&mut self) {
        let _ = self.watcher.unwatch(&self.root);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// macOS names a root under `/var` or `/tmp` by its real path (`/private/var/...`) in
    /// `FSEvents`' events: a path is placed under the root by either name.
    #[test]
    fn paths_are_placed_under_the_root_by_its_given_or_real_name() {
        let dir = tempfile::tempdir().unwrap();
        let actual = dir.path().join("real");
        std::fs::create_dir(&actual).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&actual, &link).unwrap();
        let tree = Tree::new(&link).unwrap();
        let under = |path: &Path| match tree.place(path) {
            Place::Under(rel) => Some(rel),
            Place::NotUtf8 | Place::Outside => None,
        };
        assert_eq!(under(&link.join("a/b.txt")).as_deref(), Some("a/b.txt"));
        assert_eq!(under(&actual.join("a/b.txt")).as_deref(), Some("a/b.txt"));
        assert_eq!(under(&actual).as_deref(), Some(""));
        assert_eq!(under(&dir.path().join("other/x")), None);
        assert_eq!(under(&link.join("../x")), None);
        let odd = <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(b"\xff.txt");
        assert!(matches!(tree.place(&actual.join(odd)), Place::NotUtf8));
    }

    #[test]
    fn writes_are_content_changes_and_renames_are_entry_changes() {
        use notify::event::{
            AccessKind, AccessMode, CreateKind, DataChange, MetadataKind, RemoveKind, RenameMode,
        };
        assert!(!entry_kind(EventKind::Modify(ModifyKind::Data(
            DataChange::Content
        ))));
        assert!(!entry_kind(EventKind::Modify(ModifyKind::Any)));
        assert!(!entry_kind(EventKind::Access(AccessKind::Close(
            AccessMode::Write
        ))));
        assert!(entry_kind(EventKind::Create(CreateKind::Folder)));
        assert!(entry_kind(EventKind::Remove(RemoveKind::Any)));
        assert!(entry_kind(EventKind::Modify(ModifyKind::Name(
            RenameMode::From
        ))));
        assert!(entry_kind(EventKind::Modify(ModifyKind::Metadata(
            MetadataKind::Permissions
        ))));
        assert!(entry_kind(EventKind::Any));
    }
}
