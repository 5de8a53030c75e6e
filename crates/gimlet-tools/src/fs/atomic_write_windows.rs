//! Atomic writes on Windows: the old file or the new one, never a mix, never an empty file.
//!
//! The new content goes to a temporary file beside the target (`.NAME.gimlet-<id>.tmp`,
//! created new), is flushed to the disk (`FlushFileBuffers`, through `File::sync_all`), and
//! then takes the target's name in one rename that replaces it (`MoveFileExW` with
//! `MOVEFILE_REPLACE_EXISTING`, or the POSIX-semantics rename of recent Windows, both through
//! `std::fs::rename`). A new file is linked in under its name with a hard link, which fails if
//! the name was taken meanwhile, so a file created by someone else is never overwritten. The
//! folders on the way are pinned ([`Pinned`]) from before the checks until after the rename.
//!
//! What is weaker than on Unix, and why: Windows has no `RENAME_EXCHANGE`, so the file that
//! was there is checked against what the change was computed from just before the rename, not
//! after a swap: a program that writes the file in that instant loses its write (the window is
//! the rename's own duration). Its folder cannot be fsynced (Windows has no such call; NTFS
//! journals the rename itself). The mode is the read-only attribute; there is no owner to keep.

use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::Path;

use super::confine_windows::{Pinned, is_reparse_point, open_in};
use super::file_state::{ContentHash, Hasher};
use super::paths::{Location, PathError, ResolvedPath};
pub(super) use super::write::{Expected, FileId, Ownership, WriteError};

/// A fresh temporary name for `name`: `.name.gimlet-<random>.<kind>`.
pub(super) fn temp_name(name: &std::ffi::OsStr, kind: &str) -> OsString {
    let random =
        crate::util::random_hex().unwrap_or_else(|_| format!("{:012x}", std::process::id()));
    let mut temp = OsString::from(".");
    temp.push(name);
    temp.push(format!(
        ".gimlet-{}.{kind}",
        &random[..12.min(random.len())]
    ));
    temp
}

/// What is at `name` in `dir` now, checked for being writable: `None` when nothing is.
fn inspect_target(
    dir: &Pinned,
    name: &std::ffi::OsStr,
    resolved: &ResolvedPath,
) -> Result<Option<std::fs::Metadata>, WriteError> {
    match std::fs::symlink_metadata(dir.path().join(name)) {
        Ok(meta) if is_reparse_point(&meta) => Err(PathError::Changed {
            path: resolved.display(),
        }
        .into()),
        Ok(meta) if meta.is_dir() => Err(WriteError::Directory {
            path: resolved.display(),
        }),
        Ok(meta) if meta.is_file() => Ok(Some(meta)),
        Ok(_) => Err(WriteError::NotRegular {
            path: resolved.display(),
            kind: "special file",
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(WriteError::Io {
            path: resolved.display(),
            source,
        }),
    }
}

/// Whether the file at `name` in `dir` is the one `expected` describes (`was`: its content,
/// when the caller holds it).
pub(super) fn matches(
    dir: &Pinned,
    name: &std::ffi::OsStr,
    expected: &Expected,
    was: Option<&[u8]>,
) -> std::io::Result<bool> {
    let (want_id, want_hash) = match expected {
        Expected::Anything => return Ok(true),
        // Links are not put back on Windows.
        Expected::Link { .. } => return Ok(false),
        Expected::Absent => {
            return Ok(std::fs::symlink_metadata(dir.path().join(name)).is_err());
        }
        Expected::File { id, hash } => (id, hash),
    };
    let mut file = match open_in(dir, name, OpenOptions::new().read(true)) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    if FileId::of(&file.metadata()?) != *want_id {
        return Ok(false);
    }
    let mut content = Vec::new();
    file.read_to_end(&mut content)?;
    Ok(match was {
        Some(was) => content == was,
        None => ContentHash::of(&content) == *want_hash,
    })
}

/// A temporary file filled with `bytes` in `dir`, flushed to the disk. `meanwhile` runs
/// between the write and the flush.
pub(super) fn fill_temp(
    dir: &Pinned,
    name: &std::ffi::OsStr,
    bytes: &[u8],
    kind: &str,
    meanwhile: &mut dyn FnMut(),
) -> std::io::Result<(OsString, File, ContentHash)> {
    let temp = temp_name(name, kind);
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(dir.path().join(&temp))?;
    let filled = file.write_all(bytes).and_then(|()| {
        meanwhile();
        file.sync_all()
    });
    if let Err(err) = filled {
        drop(file);
        let _ = std::fs::remove_file(dir.path().join(&temp));
        return Err(err);
    }
    let mut hasher = Hasher::default();
    hasher.update(bytes);
    Ok((temp, file, hasher.finish()))
}

/// Gives the file the read-only attribute when `own` says it has no write permission.
fn apply_mode(path: &Path, own: Option<Ownership>) -> std::io::Result<()> {
    if let Some(own) = own
        && own.mode & 0o222 == 0
    {
        let mut permissions = std::fs::metadata(path)?.permissions();
        permissions.set_readonly(true);
        std::fs::set_permissions(path, permissions)?;
    }
    Ok(())
}

/// Replaces (or creates) the file at `resolved` with `bytes`, atomically, if it is still as
/// `expected`.
pub fn write_checked(
    resolved: &ResolvedPath,
    bytes: &[u8],
    keep: Option<Ownership>,
    expected: &Expected,
) -> Result<(std::fs::Metadata, ContentHash), WriteError> {
    write_checked_against(resolved, bytes, keep, expected, None, &mut || {})
}

/// [`write_checked`], for a caller that holds the content `expected` describes (`was`);
/// `meanwhile` runs while the new content goes to the disk.
pub fn write_checked_against(
    resolved: &ResolvedPath,
    bytes: &[u8],
    keep: Option<Ownership>,
    expected: &Expected,
    was: Option<&[u8]>,
    meanwhile: &mut dyn FnMut(),
) -> Result<(std::fs::Metadata, ContentHash), WriteError> {
    let (dir, name) = resolved.pin_parent()?;
    let existing = inspect_target(&dir, &name, resolved)?;
    let path = resolved.display();
    let io = |source: std::io::Error| WriteError::Io {
        path: path.clone(),
        source,
    };
    let changed = match (&existing, expected) {
        (_, Expected::Anything) | (None, Expected::Absent) => false,
        (Some(_), Expected::Absent | Expected::Link { .. })
        | (None, Expected::File { .. } | Expected::Link { .. }) => true,
        (Some(meta), Expected::File { id, .. }) => meta.len() != id.size,
    };
    if changed {
        return Err(WriteError::Changed { path });
    }
    let ownership = keep.or_else(|| existing.as_ref().map(Ownership::of));
    let (temp, file, hash) = fill_temp(&dir, &name, bytes, "tmp", meanwhile).map_err(io)?;
    drop(file);
    let temp_path = dir.path().join(&temp);
    let target = dir.path().join(&name);
    let discard = || {
        let _ = std::fs::remove_file(&temp_path);
    };
    let placed = if existing.is_none() && *expected != Expected::Anything {
        // A new file: linked in under its name, never over one created meanwhile.
        match std::fs::hard_link(&temp_path, &target) {
            Ok(()) => {
                discard();
                Ok(())
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                Err(WriteError::Changed { path: path.clone() })
            }
            // A file system without hard links (FAT): check, then rename.
            Err(_) if std::fs::symlink_metadata(&target).is_err() => {
                rename_replacing(&temp_path, &target).map_err(io)
            }
            Err(_) => Err(WriteError::Changed { path: path.clone() }),
        }
    } else {
        match matches(&dir, &name, expected, was) {
            Ok(true) => rename_replacing(&temp_path, &target).map_err(io),
            Ok(false) => Err(WriteError::Changed { path: path.clone() }),
            Err(e) => Err(io(e)),
        }
    };
    if let Err(err) = placed {
        discard();
        return Err(err);
    }
    apply_mode(&target, ownership).map_err(io)?;
    let meta = std::fs::metadata(&target).map_err(io)?;
    Ok((meta, hash))
}

/// `std::fs::rename`, tried again for a moment while the target is held open: Windows refuses
/// to replace a file another process (or gimlet's own reader of it) has open without delete
/// sharing, and where it lacks POSIX rename semantics (before Windows 10 1607; Wine) it refuses
/// while anyone has it open. Antivirus scanners and indexers hold files briefly the same way;
/// git for Windows and npm retry these errors too. Up to about a second, then the error.
#[expect(
    clippy::disallowed_methods,
    reason = "file writes run on blocking threads (ctx.blocking), never on the runtime"
)]
pub(crate) fn rename_replacing(from: &Path, to: &Path) -> std::io::Result<()> {
    /// `ERROR_SHARING_VIOLATION`; `ERROR_ACCESS_DENIED` comes as `PermissionDenied`.
    const SHARING_VIOLATION: i32 = 32;
    let mut wait = std::time::Duration::from_millis(5);
    let mut waited = std::time::Duration::ZERO;
    loop {
        match std::fs::rename(from, to) {
            Err(err)
                if (err.kind() == std::io::ErrorKind::PermissionDenied
                    || err.raw_os_error() == Some(SHARING_VIOLATION))
                    && waited < std::time::Duration::from_secs(1) =>
            {
                std::thread::sleep(wait);
                waited += wait;
                wait = (wait * 2).min(std::time::Duration::from_millis(200));
            }
            other => return other,
        }
    }
}

/// Replaces (or creates) the file at `resolved` with `bytes`, atomically, whatever is there.
pub fn write_atomic(
    resolved: &ResolvedPath,
    bytes: &[u8],
    keep: Option<Ownership>,
) -> Result<std::fs::Metadata, WriteError> {
    write_checked(resolved, bytes, keep, &Expected::Anything).map(|(meta, _)| meta)
}

/// Removes the file at `resolved` if it is still as `expected`: it is moved aside first,
/// checked there, and only then removed; a file that changed meanwhile is put back.
pub fn remove_checked(resolved: &ResolvedPath, expected: &Expected) -> Result<(), WriteError> {
    let (dir, name) = resolved.pin_parent()?;
    let path = resolved.display();
    if inspect_target(&dir, &name, resolved)?.is_none() {
        return Err(PathError::NotFound {
            path,
            hint: String::new(),
        }
        .into());
    }
    let io = |source: std::io::Error| WriteError::Io {
        path: path.clone(),
        source,
    };
    let aside = temp_name(&name, "tmp");
    std::fs::rename(dir.path().join(&name), dir.path().join(&aside)).map_err(io)?;
    if !matches(&dir, &aside, expected, None).map_err(io)? {
        // Put back unless the name was taken meanwhile.
        if std::fs::symlink_metadata(dir.path().join(&name)).is_err() {
            let _ = std::fs::rename(dir.path().join(&aside), dir.path().join(&name));
        }
        return Err(WriteError::Changed { path });
    }
    std::fs::remove_file(dir.path().join(&aside)).map_err(io)
}

/// Removes the file at `resolved`, whatever it holds.
pub fn remove_file(resolved: &ResolvedPath) -> Result<(), WriteError> {
    remove_checked(resolved, &Expected::Anything)
}

/// Creates the missing parent folders of `resolved`, each in the one before, pinned, so that
/// none is created through a link. Returns how many were created.
pub fn create_parents(resolved: &ResolvedPath) -> Result<usize, WriteError> {
    let (start, relative) = match &resolved.location {
        Location::Inside { root, relative, .. } => (root.path().to_owned(), relative.clone()),
        Location::Outside => {
            let anchor: std::path::PathBuf = resolved
                .path
                .components()
                .take_while(|c| {
                    matches!(
                        c,
                        std::path::Component::Prefix(_) | std::path::Component::RootDir
                    )
                })
                .collect();
            let rest = resolved
                .path
                .strip_prefix(&anchor)
                .unwrap_or(&resolved.path)
                .to_owned();
            (anchor, rest)
        }
    };
    let io = |source: std::io::Error| WriteError::Io {
        path: resolved.display(),
        source,
    };
    let mut dir = Pinned::walk(&start, Path::new("")).map_err(io)?;
    let mut created = 0;
    for component in relative.parent().unwrap_or(Path::new("")) {
        match std::fs::create_dir(dir.path().join(component)) {
            Ok(()) => created += 1,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io(e)),
        }
        dir = dir
            .child(component)
            .map_err(|e| WriteError::Path(resolved.map_io_error(e)))?;
    }
    Ok(created)
}
