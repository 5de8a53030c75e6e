//! What a write of one file expects and how it fails: the vocabulary shared by the atomic
//! writes of each system (`atomic_write.rs` on Unix, `atomic_write_windows.rs`) and the
//! multi-file changes built on them.

use super::file_state::ContentHash;
use super::paths::PathError;
#[cfg(unix)]
use super::raw;

/// What the file had before, for keeping its mode and owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ownership {
    /// Permission bits.
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
}

impl Ownership {
    /// Of existing metadata. On Windows the mode is 0o644, or 0o444 for a read-only file, and
    /// there is no owner to keep (a new file takes the folder's access list).
    pub fn of(meta: &std::fs::Metadata) -> Self {
        #[cfg(unix)]
        return Self {
            mode: std::os::unix::fs::MetadataExt::mode(meta) & 0o7777,
            uid: std::os::unix::fs::MetadataExt::uid(meta),
            gid: std::os::unix::fs::MetadataExt::gid(meta),
        };
        #[cfg(windows)]
        return Self {
            mode: if meta.permissions().readonly() {
                0o444
            } else {
                0o644
            },
            uid: 0,
            gid: 0,
        };
    }
}

/// Which file a path held, and as it was: enough to tell whether it changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileId {
    /// Device.
    pub dev: u64,
    /// Inode.
    pub ino: u64,
    /// Size in bytes.
    pub size: u64,
    /// Modification time (seconds, nanoseconds).
    pub mtime: (i64, i64),
}

impl FileId {
    /// Of existing metadata. On Windows, whose file index the standard library does not
    /// give, the creation time stands in for the device and 0 for the inode: a file replaced
    /// by another is still told apart by its creation and modification times and its size.
    pub fn of(meta: &std::fs::Metadata) -> Self {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            Self {
                dev: meta.dev(),
                ino: meta.ino(),
                size: meta.size(),
                mtime: (meta.mtime(), meta.mtime_nsec()),
            }
        }
        #[cfg(windows)]
        {
            use std::os::windows::fs::MetadataExt;
            // 100-nanosecond intervals since 1601.
            let written = meta.last_write_time();
            Self {
                dev: meta.creation_time(),
                ino: 0,
                size: meta.file_size(),
                mtime: (
                    i64::try_from(written / 10_000_000).unwrap_or(i64::MAX),
                    i64::try_from(written % 10_000_000).unwrap_or(0) * 100,
                ),
            }
        }
    }

    /// Of a `stat`, as [`FileId::of`] reads the same file's metadata.
    #[cfg(unix)]
    pub(crate) fn of_stat(stat: &rustix::fs::Stat) -> Self {
        Self {
            dev: raw::device(stat),
            ino: stat.st_ino,
            size: u64::try_from(stat.st_size).unwrap_or(0),
            mtime: raw::mtime(stat),
        }
    }
}

/// What a change expects at its target when it goes in: the file it was computed from, or
/// nothing. A different file there (another program wrote it meanwhile) refuses the change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expected {
    /// No file.
    Absent,
    /// This file with this content.
    File {
        /// Which file, as it was.
        id: FileId,
        /// Its content hash.
        hash: ContentHash,
    },
    /// This symbolic link, pointing where it did (multi-file changes only: `restore` puts
    /// links back; the single-file writes never replace a link).
    Link {
        /// Which link, as it was.
        id: FileId,
        /// The hash of its target, as [`std::fs::read_link`] gives it.
        target: ContentHash,
    },
    /// Whatever is there (undo's restores and rollbacks, which check by themselves).
    Anything,
}

/// Why a write was refused or failed. The target is unchanged in every case.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WriteError {
    /// The path could not be opened safely.
    #[error(transparent)]
    Path(#[from] PathError),
    /// The target has other hard links.
    #[error(
        "`{path}` has {links} hard links; writing it would split them, so gimlet refuses. Change it with a command if you mean to"
    )]
    HardLinked {
        /// The path.
        path: String,
        /// How many links.
        links: u64,
    },
    /// The target is a directory.
    #[error("`{path}` is a directory; give a file path")]
    Directory {
        /// The path.
        path: String,
    },
    /// The target exists but is not a regular file.
    #[error("`{path}` is a {kind}; gimlet only writes regular files")]
    NotRegular {
        /// The path.
        path: String,
        /// What it is.
        kind: &'static str,
    },
    /// Another program changed the target while the change was being made.
    #[error(
        "`{path}` was changed by another program while this change was being written, so nothing \
         was changed (its changes are kept). Read it again and retry"
    )]
    Changed {
        /// The path.
        path: String,
    },
    /// Writing failed; the target is unchanged.
    #[error("writing `{path}` failed, the file is unchanged: {source}")]
    Io {
        /// The path.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}
