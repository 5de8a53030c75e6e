//! A session's private temp directory (the commands' `$TMPDIR`, and their `/tmp` where the
//! sandbox mounts it there: [`super::SandboxPlan::private_tmp`]), and the sweep of those left
//! by sessions that are gone.
//!
//! The directory is `gimlet-tmp-XXXXXX` in the system's temp directory, mode 0700 (the
//! commands' umask is left alone: their files are private because the directory is). The
//! server holds an exclusive `flock` on it for as long as the session lives; the lock goes
//! with the process, however it ends (a `SIGKILL` included). So a directory whose lock can be
//! taken belongs to a session that is gone, and the first session of a later server removes
//! it.

use std::path::{Path, PathBuf};
use std::sync::Once;

/// The name every session temp directory starts with.
const PREFIX: &str = "gimlet-tmp-";

/// A session's temp directory: removed when dropped (the session ends).
#[derive(Debug)]
pub(crate) struct SessionTmp {
    dir: tempfile::TempDir,
    _lock: Lock,
}

impl SessionTmp {
    /// Creates one (sweeping those of gone sessions first, once per process). Blocking.
    pub(crate) fn create() -> std::io::Result<Self> {
        static SWEPT: Once = Once::new();
        let parent = std::env::temp_dir();
        SWEPT.call_once(|| {
            let removed = sweep(&parent);
            if removed > 0 {
                tracing::debug!(removed, "removed temp directories of gone sessions");
            }
        });
        let mut builder = tempfile::Builder::new();
        builder.prefix(PREFIX);
        // On Windows the user's temp folder is private to them already.
        #[cfg(unix)]
        builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700));
        let dir = builder.tempdir_in(&parent)?;
        let lock = Lock::take(dir.path())?;
        Ok(Self { dir, _lock: lock })
    }

    /// The directory.
    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// Removes the session temp directories in `parent` that belong to this user and to no live
/// session (nobody holds their lock). Returns how many went.
pub(crate) fn sweep(parent: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        if !entry.file_name().to_string_lossy().starts_with(PREFIX) {
            continue;
        }
        let path: PathBuf = entry.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if !meta.is_dir() || !mine(&meta) {
            continue;
        }
        // Held: a live session's. Taken: its session is gone (the lock went with it).
        let Ok(lock) = Lock::take(&path) else {
            continue;
        };
        drop(lock);
        if std::fs::remove_dir_all(&path).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// Whether a folder belongs to this user (on Windows the temp folder is the user's own).
fn mine(meta: &std::fs::Metadata) -> bool {
    #[cfg(unix)]
    return std::os::unix::fs::MetadataExt::uid(meta) == rustix::process::geteuid().as_raw();
    #[cfg(windows)]
    {
        let _ = meta;
        true
    }
}

/// The exclusive lock a live session holds on its temp directory: an `flock` on the folder
/// (Unix); on Windows, a `.lock` file in it opened without sharing, which nobody else can open
/// while the session lives. Either goes with the process, however it ends.
#[derive(Debug)]
struct Lock {
    #[cfg(unix)]
    _fd: std::os::fd::OwnedFd,
    #[cfg(windows)]
    _file: std::fs::File,
}

impl Lock {
    /// Takes the lock of `dir`, or fails at once when someone holds it.
    fn take(dir: &Path) -> std::io::Result<Self> {
        #[cfg(unix)]
        {
            use rustix::fs::{FlockOperation, Mode, OFlags};
            let fd = rustix::fs::open(
                dir,
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            )?;
            rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive)?;
            Ok(Self { _fd: fd })
        }
        #[cfg(windows)]
        {
            use std::os::windows::fs::OpenOptionsExt;
            let file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .share_mode(0)
                .open(dir.join(".lock"))?;
            Ok(Self { _file: file })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustix::fs::{FlockOperation, Mode, OFlags};
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn a_live_sessions_directory_stays_and_a_gone_ones_is_swept() {
        let parent = tempfile::tempdir().unwrap();
        let live = tempfile::Builder::new()
            .prefix(PREFIX)
            .tempdir_in(parent.path())
            .unwrap();
        let lock = rustix::fs::open(
            live.path(),
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .unwrap();
        rustix::fs::flock(&lock, FlockOperation::NonBlockingLockExclusive).unwrap();
        let gone = parent.path().join(format!("{PREFIX}gone"));
        std::fs::create_dir_all(gone.join("sub")).unwrap();
        std::fs::write(gone.join("sub/file"), "x").unwrap();
        let other = parent.path().join("not-ours");
        std::fs::create_dir(&other).unwrap();
        // A link named like a session directory is left alone, and so is what it points at.
        std::os::unix::fs::symlink(&other, parent.path().join(format!("{PREFIX}link"))).unwrap();

        assert_eq!(sweep(parent.path()), 1);
        assert!(!gone.exists());
        assert!(live.path().exists());
        assert!(other.exists());
        drop(lock);
        assert_eq!(sweep(parent.path()), 1, "its lock went with it");
        assert!(!live.path().exists());
    }

    #[test]
    fn a_session_directory_is_private() {
        let tmp = SessionTmp::create().unwrap();
        let mode = std::fs::metadata(tmp.path()).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o700);
        let path = tmp.path().to_owned();
        drop(tmp);
        assert!(!path.exists());
    }
}
