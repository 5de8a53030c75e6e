//! Atomic writes: the old file or the new one, never a mix, never an empty file.
//!
//! A write creates a temporary file next to the target (relative to the parent directory's
//! handle, with `O_EXCL`), writes and fsyncs it, gives it the target's mode (and owner, where
//! allowed), renames it over the target, and fsyncs the directory. Any failure removes the
//! temporary file and leaves the target as it was. Targets that are not regular files, or
//! that have more than one hard link (a write would silently split them), are refused.

use std::fs::File;
use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::MetadataExt;

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

use super::paths::{Location, PathError, ResolvedPath, file_kind, open_beneath};

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
    /// Of existing metadata.
    pub fn of(meta: &std::fs::Metadata) -> Self {
        Self {
            mode: meta.mode() & 0o7777,
            uid: meta.uid(),
            gid: meta.gid(),
        }
    }
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

/// Opens the parent directory of `resolved` for writing into (beneath the root if inside one).
fn open_parent_dir(resolved: &ResolvedPath) -> Result<(OwnedFd, std::ffi::OsString), PathError> {
    let name = resolved
        .path
        .file_name()
        .ok_or_else(|| PathError::IsADirectory {
            path: resolved.display(),
            hint: "",
        })?
        .to_owned();
    let flags = OFlags::RDONLY | OFlags::DIRECTORY;
    let fd = match &resolved.location {
        Location::Inside { root, relative, .. } => {
            let parent = relative.parent().unwrap_or(std::path::Path::new(""));
            open_beneath(root.fd(), parent, flags, Mode::empty())
        }
        Location::Outside => {
            let parent = resolved.path.parent().unwrap_or(std::path::Path::new("/"));
            let root = rustix::fs::open(
                "/",
                OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| resolved.map_open_error(e))?;
            open_beneath(
                &root,
                parent.strip_prefix("/").unwrap_or(parent),
                flags,
                Mode::empty(),
            )
        }
    };
    Ok((fd.map_err(|e| resolved.map_open_error(e))?, name))
}

/// What is at the target now, checked for being writable.
fn inspect_target(
    dir: &OwnedFd,
    name: &std::ffi::OsStr,
    resolved: &ResolvedPath,
) -> Result<Option<rustix::fs::Stat>, WriteError> {
    match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) => {
            let path = resolved.display();
            match FileType::from_raw_mode(stat.st_mode) {
                FileType::RegularFile if stat.st_nlink > 1 => Err(WriteError::HardLinked {
                    path,
                    links: stat.st_nlink,
                }),
                FileType::RegularFile => Ok(Some(stat)),
                FileType::Directory => Err(WriteError::Directory { path }),
                // The resolved final component is never a symlink; one appearing is a race.
                FileType::Symlink => Err(PathError::Changed { path }.into()),
                other => Err(WriteError::NotRegular {
                    path,
                    kind: file_kind(other),
                }),
            }
        }
        Err(rustix::io::Errno::NOENT) => Ok(None),
        Err(e) => Err(WriteError::Io {
            path: resolved.display(),
            source: e.into(),
        }),
    }
}

/// Replaces (or creates) the file at `resolved` with `bytes`, atomically. `keep` gives the mode
/// and owner to apply; without it an existing file keeps its own, and a new file gets 0644
/// minus the umask. Returns the new file's metadata.
pub fn write_atomic(
    resolved: &ResolvedPath,
    bytes: &[u8],
    keep: Option<Ownership>,
) -> Result<std::fs::Metadata, WriteError> {
    let (dir, name) = open_parent_dir(resolved)?;
    let existing = inspect_target(&dir, &name, resolved)?;
    let ownership = keep.or_else(|| {
        existing.map(|s| Ownership {
            mode: s.st_mode & 0o7777,
            uid: s.st_uid,
            gid: s.st_gid,
        })
    });
    let temp_name = temp_name(&name);
    let io = |source: std::io::Error| WriteError::Io {
        path: resolved.display(),
        source,
    };
    let create =
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let temp = rustix::fs::openat(&dir, &temp_name, create, Mode::from_raw_mode(0o644))
        .map_err(|e| io(e.into()))?;
    let result = fill_and_rename(File::from(temp), &dir, &temp_name, &name, bytes, ownership);
    match result {
        Ok(meta) => {
            // The rename is durable once the directory is: a crash after this keeps the new file.
            let _ = rustix::fs::fsync(&dir);
            Ok(meta)
        }
        Err(err) => {
            let _ = rustix::fs::unlinkat(&dir, &temp_name, AtFlags::empty());
            Err(io(err))
        }
    }
}

fn fill_and_rename(
    mut temp: File,
    dir: &OwnedFd,
    temp_name: &std::ffi::OsStr,
    name: &std::ffi::OsStr,
    bytes: &[u8],
    ownership: Option<Ownership>,
) -> std::io::Result<std::fs::Metadata> {
    temp.write_all(bytes)?;
    if let Some(own) = ownership {
        // Owner first: chown clears set-id bits, chmod then restores the mode exactly.
        let _ = rustix::fs::fchown(
            temp.as_fd(),
            Some(rustix::fs::Uid::from_raw(own.uid)),
            Some(rustix::fs::Gid::from_raw(own.gid)),
        );
        rustix::fs::fchmod(temp.as_fd(), Mode::from_raw_mode(own.mode))?;
    }
    temp.sync_all()?;
    rustix::fs::renameat(dir, temp_name, dir, name)?;
    temp.metadata()
}

/// `.name.gimlet-<random>.tmp`, next to the target.
fn temp_name(name: &std::ffi::OsStr) -> std::ffi::OsString {
    let random = crate::spill::random_id().unwrap_or_else(|_| format!("{:x}", std::process::id()));
    let mut temp = std::ffi::OsString::from(".");
    temp.push(name);
    temp.push(format!(".gimlet-{}.tmp", &random[..12.min(random.len())]));
    temp
}

/// Removes the file at `resolved` (for deletes and moves). Refuses what `write_atomic` would.
pub fn remove_file(resolved: &ResolvedPath) -> Result<(), WriteError> {
    let (dir, name) = open_parent_dir(resolved)?;
    if inspect_target(&dir, &name, resolved)?.is_none() {
        return Err(PathError::NotFound {
            path: resolved.display(),
            hint: String::new(),
        }
        .into());
    }
    rustix::fs::unlinkat(&dir, &name, AtFlags::empty()).map_err(|e| WriteError::Io {
        path: resolved.display(),
        source: e.into(),
    })?;
    let _ = rustix::fs::fsync(&dir);
    Ok(())
}

/// Creates the missing parent directories of `resolved`, each relative to the one before
/// (never following a symlink). Returns how many were created.
pub fn create_parents(resolved: &ResolvedPath) -> Result<usize, WriteError> {
    let (start, components): (OwnedFd, Vec<std::ffi::OsString>) = match &resolved.location {
        Location::Inside { root, relative, .. } => {
            let fd = rustix::fs::openat(
                root.fd(),
                ".",
                OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| resolved.map_open_error(e))?;
            let parent = relative.parent().unwrap_or(std::path::Path::new(""));
            (fd, parent.iter().map(ToOwned::to_owned).collect())
        }
        Location::Outside => {
            let fd = rustix::fs::open(
                "/",
                OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| resolved.map_open_error(e))?;
            let parent = resolved.path.parent().unwrap_or(std::path::Path::new("/"));
            (
                fd,
                parent
                    .iter()
                    .filter(|c| *c != "/")
                    .map(ToOwned::to_owned)
                    .collect(),
            )
        }
    };
    let mut dir = start;
    let mut created = 0;
    for component in components {
        match rustix::fs::mkdirat(&dir, &component, Mode::from_raw_mode(0o777)) {
            Ok(()) => created += 1,
            Err(rustix::io::Errno::EXIST) => {}
            Err(e) => {
                return Err(WriteError::Io {
                    path: resolved.display(),
                    source: e.into(),
                });
            }
        }
        dir = rustix::fs::openat(
            &dir,
            &component,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| match e {
            rustix::io::Errno::NOTDIR => WriteError::Path(PathError::NotADirectory {
                path: component.to_string_lossy().into_owned(),
            }),
            other => WriteError::Path(resolved.map_open_error(other)),
        })?;
    }
    Ok(created)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;
    use crate::fs::RootSet;
    use crate::testutil::TestWorkspace;

    fn resolve(ws: &TestWorkspace, path: &str) -> ResolvedPath {
        RootSet::open([ws.root()]).unwrap().resolve(path).unwrap()
    }

    fn leftovers(ws: &TestWorkspace) -> Vec<String> {
        std::fs::read_dir(ws.root())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".gimlet-"))
            .collect()
    }

    #[test]
    fn replaces_content_and_keeps_the_mode() {
        let ws = TestWorkspace::new();
        let path = ws.write("run.sh", "old");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o751)).unwrap();
        write_atomic(&resolve(&ws, "run.sh"), b"new content", None).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new content");
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o7777,
            0o751
        );
        assert!(leftovers(&ws).is_empty());
    }

    #[test]
    fn creates_new_files_and_parents() {
        let ws = TestWorkspace::new();
        let resolved = resolve(&ws, "a/b/c.txt");
        assert_eq!(create_parents(&resolved).unwrap(), 2);
        write_atomic(&resolved, b"x", None).unwrap();
        assert_eq!(
            std::fs::read_to_string(ws.root().join("a/b/c.txt")).unwrap(),
            "x"
        );
    }

    #[test]
    fn refuses_hard_links_fifos_and_directories_leaving_them_alone() {
        let ws = TestWorkspace::new();
        let path = ws.write("linked.txt", "keep");
        std::fs::hard_link(&path, ws.root().join("other.txt")).unwrap();
        let err = write_atomic(&resolve(&ws, "linked.txt"), b"new", None).unwrap_err();
        assert!(
            matches!(err, WriteError::HardLinked { links: 2, .. }),
            "{err}"
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "keep");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            ws.root().join("pipe"),
            FileType::Fifo,
            Mode::from(0o600),
            0,
        )
        .unwrap();
        let err = write_atomic(&resolve(&ws, "pipe"), b"new", None).unwrap_err();
        assert!(
            matches!(err, WriteError::NotRegular { kind: "FIFO", .. }),
            "{err}"
        );
        ws.mkdir("dir");
        let err = write_atomic(&resolve(&ws, "dir"), b"new", None).unwrap_err();
        assert!(matches!(err, WriteError::Directory { .. }), "{err}");
        assert!(leftovers(&ws).is_empty());
    }

    #[test]
    fn a_failed_write_leaves_the_old_file_and_no_temp_file() {
        let ws = TestWorkspace::new();
        let path = ws.write("ro/file.txt", "old");
        let resolved = resolve(&ws, "ro/file.txt");
        // A read-only directory: the temp file cannot be created (root ignores permissions,
        // so also try a target whose parent vanished).
        std::fs::set_permissions(ws.root().join("ro"), std::fs::Permissions::from_mode(0o555))
            .unwrap();
        let result = write_atomic(&resolved, b"new", None);
        std::fs::set_permissions(ws.root().join("ro"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        if result.is_err() {
            assert_eq!(std::fs::read_to_string(&path).unwrap(), "old");
        }
        std::fs::remove_dir_all(ws.root().join("ro")).unwrap();
        assert!(write_atomic(&resolved, b"new", None).is_err());
        assert!(!path.exists());
        assert!(leftovers(&ws).is_empty());
    }

    #[test]
    fn remove_refuses_missing_files() {
        let ws = TestWorkspace::new();
        ws.write("gone.txt", "x");
        remove_file(&resolve(&ws, "gone.txt")).unwrap();
        assert!(matches!(
            remove_file(&resolve(&ws, "gone.txt")),
            Err(WriteError::Path(PathError::NotFound { .. }))
        ));
    }
}
