//! Unnamed temporary files made ahead of time, so that a write does not wait for the file
//! system to find a free inode.
//!
//! Finding a free inode is most of what creating a file costs, and on some file systems it grows
//! with the files freed lately: ext4 without a journal steps over each inode freed in the last
//! minutes, one by one, which after a run of edits was 130-150 µs of a 60 KB edit on the disk
//! of our benchmarks. A write that replaces a file takes a spare made in the same folder (same
//! mount, device and inode) if there is one, and the late-append watcher, which wakes after
//! such writes anyway, makes the next one off the write's path. No thread is woken for it.
//!
//! Spares are unnamed (`O_TMPFILE`, close-on-exec, locked as every temporary is): nothing shows
//! in the folder, no other program reaches them by a name (nor through `/proc`: the server is
//! not dumpable), and the kernel frees them when the server ends, however it ends. At most
//! [`FOLDERS`] folders keep at most [`PER_FOLDER`] spares each, and a folder's go [`KEEP`]
//! after its last write. A spare is only used to replace an existing
//! file, whose owner and mode the write then gives it, as it does a new temporary.

use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rustix::fs::{AtFlags, FlockOperation, Mode, OFlags, StatxFlags};

use crate::util::MutexExt as _;

/// Folders kept at most; the one written least lately goes first.
const FOLDERS: usize = 4;
/// Spares kept per folder: enough for edits that come faster than the watcher wakes.
const PER_FOLDER: usize = 2;
/// How long a folder's spares are kept after its last write.
pub(super) const KEEP: Duration = Duration::from_secs(30);

/// Which folder: a spare can only be linked into a folder on its own mount.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FolderKey {
    mount: u64,
    dev: (u32, u32),
    ino: u64,
}

impl FolderKey {
    /// Of an open folder; `None` where the kernel does not say the mount.
    fn of(dir: &OwnedFd) -> Option<Self> {
        let stat = rustix::fs::statx(
            dir,
            "",
            AtFlags::EMPTY_PATH,
            StatxFlags::INO | StatxFlags::MNT_ID,
        )
        .ok()?;
        let known = StatxFlags::from_bits_truncate(stat.stx_mask);
        known
            .contains(StatxFlags::INO | StatxFlags::MNT_ID)
            .then_some(Self {
                mount: stat.stx_mnt_id,
                dev: (stat.stx_dev_major, stat.stx_dev_minor),
                ino: stat.stx_ino,
            })
    }
}

/// One folder's spares.
struct Folder {
    key: FolderKey,
    /// The folder, for making its spares.
    dir: Arc<OwnedFd>,
    files: Vec<OwnedFd>,
    /// When a write last asked for a spare here.
    used: Instant,
    /// Making one failed (no unnamed files here, no space): none is made again.
    failed: bool,
}

impl Folder {
    fn wants(&self) -> usize {
        if self.failed {
            0
        } else {
            PER_FOLDER.saturating_sub(self.files.len())
        }
    }
}

/// The folders with spares (at most [`FOLDERS`]).
static SPARES: Mutex<Vec<Folder>> = Mutex::new(Vec::new());

/// A spare made in `dir`, if there is one. The folder is noted either way, so that the watcher
/// makes spares for the next writes there.
pub(super) fn take(dir: &OwnedFd) -> Option<OwnedFd> {
    let key = FolderKey::of(dir)?;
    let now = Instant::now();
    let mut folders = SPARES.locked();
    if let Some(at) = folders.iter().position(|f| f.key == key) {
        let folder = &mut folders[at];
        folder.used = now;
        return folder.files.pop();
    }
    let copy = rustix::io::fcntl_dupfd_cloexec(dir, 0).ok()?;
    let evicted = (folders.len() >= FOLDERS).then(|| {
        let oldest = (0..folders.len())
            .min_by_key(|&i| folders[i].used)
            .unwrap_or(0);
        folders.swap_remove(oldest)
    });
    folders.push(Folder {
        key,
        dir: Arc::new(copy),
        files: Vec::new(),
        used: now,
        failed: false,
    });
    drop(folders);
    // Freed outside the lock: closing a spare frees its inode.
    drop(evicted);
    None
}

/// Lets go of the folders not written for [`KEEP`], and makes the spares the others lack.
/// Called by the watcher thread whenever it wakes. Returns when a folder is next due to go.
pub(super) fn top_up(now: Instant) -> Option<Instant> {
    let (stale, wanted) = {
        let mut folders = SPARES.locked();
        let (stale, kept): (Vec<Folder>, Vec<Folder>) = std::mem::take(&mut *folders)
            .into_iter()
            .partition(|f| now.saturating_duration_since(f.used) >= KEEP);
        *folders = kept;
        let wanted: Vec<_> = folders
            .iter()
            .filter(|f| f.wants() > 0)
            .map(|f| (f.key, Arc::clone(&f.dir), f.wants()))
            .collect();
        (stale, wanted)
    };
    drop(stale);
    for (key, dir, count) in wanted {
        for _ in 0..count {
            // Made outside the lock: this is the slow part a write no longer waits for.
            let made = make(&dir);
            let mut folders = SPARES.locked();
            let Some(folder) = folders.iter_mut().find(|f| f.key == key) else {
                break;
            };
            match made {
                Ok(file) if folder.files.len() < PER_FOLDER => folder.files.push(file),
                Ok(_) => break,
                Err(err) => {
                    tracing::debug!("no spare temporary file: {err}");
                    folder.failed = true;
                    break;
                }
            }
        }
    }
    SPARES.locked().iter().map(|f| f.used + KEEP).min()
}

/// A new unnamed file in `dir`, private and locked, as a temporary starts.
fn make(dir: &OwnedFd) -> rustix::io::Result<OwnedFd> {
    let fd = rustix::fs::openat(
        dir,
        ".",
        OFlags::WRONLY | OFlags::TMPFILE | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )?;
    rustix::fs::flock(&fd, FlockOperation::LockExclusive)?;
    Ok(fd)
}

#[cfg(test)]
/// The inodes of the spares kept for `dir`.
pub(super) fn held(dir: &OwnedFd) -> Vec<u64> {
    let Some(key) = FolderKey::of(dir) else {
        return Vec::new();
    };
    SPARES
        .locked()
        .iter()
        .filter(|f| f.key == key)
        .flat_map(|f| &f.files)
        .filter_map(|fd| rustix::fs::fstat(fd).ok())
        .map(|stat| stat.st_ino)
        .collect()
}
