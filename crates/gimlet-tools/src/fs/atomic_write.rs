//! Atomic writes: the old file or the new one, never a mix, never an empty file, no debris, and
//! no outside change lost.
//!
//! A write creates its temporary file next to the target as an unnamed file (`O_TMPFILE`), so
//! a crash while it fills leaves nothing behind; where the file system cannot, it falls back to
//! a named `.NAME.gimlet-<id>.tmp` with `O_EXCL`. A replacement takes an unnamed file made
//! ahead of time in the same folder when there is one ([`spares`]). The temporary file gets the
//! target's owner and mode *before* any byte is written (a 0600 file's content is never
//! readable by others), is filled and fsynced, and holds an `flock` for as long as its writer
//! lives. Work that does not need the write done (the hash of the new content, the caller's
//! diff) runs between the write and the fsync, with the writeback already started.
//!
//! It then goes in at the last possible moment with `renameat2(RENAME_EXCHANGE)`: the new file
//! takes the target's name and the file that was there comes out under the temporary name, where
//! it is checked against what the change was computed from (same inode, size and modification
//! time, and the same content: compared with the loaded bytes where the caller has them, by hash
//! otherwise). If another program changed it in the meantime, the two are swapped back
//! and the change is refused as stale: every outside change ends up in the final file or in a
//! refusal. A new file is linked in with no-replace semantics, so a file created meanwhile is
//! never overwritten. The directory is fsynced after.
//!
//! The first write into a directory also sweeps gimlet's own temporaries there whose writer is
//! dead (their `flock` is free): debris from a killed server heals itself.
//!
//! Targets that are not regular files, or that have more than one hard link (a write would
//! silently split them), are refused. Several files change all or nothing with
//! [`commit_all`](super::journal::commit_all), built on the same steps.

use std::collections::HashSet;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::sync::{Mutex, OnceLock};

use rustix::fs::{AtFlags, FileType, FlockOperation, Mode, OFlags, RenameFlags};
use rustix::io::Errno;

use super::confine_unix::{NAME_ONLY, file_kind, open_beneath};
use super::file_state::{ContentHash, Hasher};
use super::paths::{Location, PathError, ResolvedPath};
use super::raw;
#[cfg(target_os = "linux")]
use super::spares;
pub(super) use super::write::{Expected, FileId, Ownership, WriteError};

use crate::util::MutexExt as _;

/// Opens the parent directory of `resolved` for writing into (beneath the root if inside one).
pub(super) fn open_parent_dir(resolved: &ResolvedPath) -> Result<(OwnedFd, OsString), PathError> {
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
                NAME_ONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
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
    name: &OsStr,
    resolved: &ResolvedPath,
) -> Result<Option<rustix::fs::Stat>, WriteError> {
    match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) => {
            let path = resolved.display();
            match raw::file_type(&stat) {
                FileType::RegularFile if raw::links(&stat) > 1 => Err(WriteError::HardLinked {
                    path,
                    links: raw::links(&stat),
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
        Err(Errno::NOENT) => Ok(None),
        Err(e) => Err(WriteError::Io {
            path: resolved.display(),
            source: e.into(),
        }),
    }
}

/// Which file a name in `dir` holds now, without following a symlink.
pub(super) fn id_at(dir: impl AsFd, name: &OsStr) -> std::io::Result<Option<FileId>> {
    match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) => Ok(Some(FileId::of_stat(&stat))),
        Err(Errno::NOENT) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The content hash of an open file, read from its start.
pub(super) fn hash_file(file: &mut File) -> std::io::Result<ContentHash> {
    file.rewind()?;
    let mut hasher = Hasher::default();
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let n = file.read(&mut buffer)?;
        if n == 0 {
            return Ok(hasher.finish());
        }
        hasher.update(&buffer[..n]);
    }
}

/// Whether a name is one of gimlet's temporaries: `.NAME.gimlet-<12 hex>.tmp` (or `.txn` for the
/// files of a multi-file change).
pub(super) fn temp_kind(name: &[u8]) -> Option<&'static str> {
    let kind = if name.ends_with(b".tmp") {
        "tmp"
    } else if name.ends_with(b".txn") {
        "txn"
    } else {
        return None;
    };
    let stem = &name[..name.len() - 4];
    let id = stem.get(stem.len().checked_sub(12)?..)?;
    let marked = stem[..stem.len() - 12].ends_with(b".gimlet-");
    (name.first() == Some(&b'.') && marked && id.iter().all(u8::is_ascii_hexdigit)).then_some(kind)
}

/// A fresh temporary name for `name`: `.name.gimlet-<random>.<kind>`.
pub(super) fn temp_name(name: &OsStr, kind: &str) -> OsString {
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

/// A temporary file being prepared next to its target.
#[derive(Debug)]
pub(super) struct TempFile {
    pub(super) file: File,
    /// Its name, once it has one (always, for the named fallback).
    pub(super) name: Option<OsString>,
    /// Which file it is.
    pub(super) id: FileId,
    /// What was written into it.
    pub(super) hash: ContentHash,
}

#[cfg(test)]
thread_local! {
    /// Makes this thread's writes use named temporaries, as where files cannot be unnamed.
    pub(super) static FORCE_NAMED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

#[cfg(test)]
thread_local! {
    /// Makes this thread's writes use (and note folders for) spare temporaries; off in the
    /// other tests, which would otherwise share the few folders kept.
    pub(super) static USE_SPARES: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether writes use spare temporaries ([`spares`]).
#[cfg(target_os = "linux")]
fn spares_enabled() -> bool {
    #[cfg(test)]
    return USE_SPARES.with(std::cell::Cell::get);
    #[cfg(not(test))]
    true
}

/// Whether `/proc/self/fd` is there to give an unnamed file a name.
fn proc_fd_available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(|| std::path::Path::new("/proc/self/fd").is_dir())
}

impl TempFile {
    /// Creates, owns, fills and fsyncs a temporary file in `dir` for `target`. `own` is the
    /// final owner and mode (`None` for a new file: 0644 minus the umask). `kind` names the
    /// fallback (`tmp` or `txn`). `meanwhile` runs while the bytes go to the disk.
    pub(super) fn create(
        dir: &OwnedFd,
        target: &OsStr,
        bytes: &[u8],
        own: Option<Ownership>,
        kind: &str,
        meanwhile: &mut dyn FnMut(),
    ) -> std::io::Result<Self> {
        // An existing file's temporary starts private, and gets its final owner and mode before
        // any byte goes in; a new file's starts with its final mode.
        let create_mode = if own.is_some() { 0o600 } else { 0o644 };
        #[cfg(test)]
        let named_only = FORCE_NAMED.with(std::cell::Cell::get);
        #[cfg(not(test))]
        let named_only = false;
        let unnamed = if !proc_fd_available() || named_only {
            None
        } else {
            unnamed_temp(dir, own.is_some(), create_mode)?
        };
        let (fd, name) = match unnamed {
            Some(fd) => (fd, None),
            None => {
                let name = temp_name(target, kind);
                let flags = OFlags::WRONLY
                    | OFlags::CREATE
                    | OFlags::EXCL
                    | OFlags::NOFOLLOW
                    | OFlags::CLOEXEC;
                let fd = rustix::fs::openat(dir, &name, flags, raw::permissions(create_mode))?;
                (fd, Some(name))
            }
        };
        // Held until the writer ends: a sweep leaves a locked temporary alone.
        rustix::fs::flock(&fd, FlockOperation::LockExclusive)?;
        let mut file = File::from(fd);
        // The hash of what is written is computed while it is written.
        let mut hash = None;
        let filled = fill(&mut file, bytes, own, &mut || {
            hash = Some(ContentHash::of_written(bytes));
            meanwhile();
        });
        if let (Err(err), Some(name)) = (&filled, &name) {
            let _ = rustix::fs::unlinkat(dir, name, AtFlags::empty());
            return Err(std::io::Error::new(err.kind(), err.to_string()));
        }
        filled?;
        let id = FileId::of(&file.metadata()?);
        Ok(Self {
            file,
            name,
            id,
            hash: hash.unwrap_or_else(|| ContentHash::of_written(bytes)),
        })
    }

    /// Gives the file the name `name` in `dir` (an unnamed one is linked, a named one renamed),
    /// never replacing anything there. `EEXIST` when the name is taken.
    pub(super) fn link_as(&mut self, dir: &OwnedFd, name: &OsStr) -> std::io::Result<()> {
        match &self.name {
            None => {
                let proc_path = format!("/proc/self/fd/{}", self.file.as_raw_fd());
                rustix::fs::linkat(
                    rustix::fs::CWD,
                    proc_path.as_str(),
                    dir,
                    name,
                    AtFlags::SYMLINK_FOLLOW,
                )?;
            }
            Some(current) => rename_noreplace(dir, current, name)?,
        }
        self.name = Some(name.to_owned());
        Ok(())
    }

    /// Removes its name, if it has one.
    pub(super) fn discard(&mut self, dir: &OwnedFd) {
        if let Some(name) = self.name.take() {
            unlink_if(dir, &name, self.id.ino);
        }
    }
}

/// An unnamed temporary in `dir` (Linux's `O_TMPFILE`): a spare made ahead when `replacing`
/// a file, else a new one. `None` where the file system has none.
#[cfg(target_os = "linux")]
fn unnamed_temp(dir: &OwnedFd, replacing: bool, mode: u32) -> std::io::Result<Option<OwnedFd>> {
    if let Some(spare) = (replacing && spares_enabled())
        .then(|| spares::take(dir))
        .flatten()
    {
        // Replacing a file: a spare made ahead in this folder saves finding an inode now.
        return Ok(Some(spare));
    }
    match rustix::fs::openat(
        dir,
        ".",
        OFlags::WRONLY | OFlags::TMPFILE | OFlags::CLOEXEC,
        raw::permissions(mode),
    ) {
        Ok(fd) => Ok(Some(fd)),
        // The file system (or kernel) has no unnamed files.
        Err(Errno::OPNOTSUPP | Errno::ISDIR | Errno::INVAL | Errno::NOENT) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Other systems have no unnamed files: temporaries are named.
#[cfg(not(target_os = "linux"))]
#[expect(clippy::unnecessary_wraps, reason = "the Linux version can fail")]
fn unnamed_temp(_dir: &OwnedFd, _replacing: bool, _mode: u32) -> std::io::Result<Option<OwnedFd>> {
    Ok(None)
}

/// Files up to this size get their writeback started before [`fill`]'s `meanwhile` runs.
const STARTED_WRITEBACK_MAX: usize = 1024 * 1024;

/// Owner and mode first (chown clears set-id bits), then the bytes, then the set-id bits again
/// (a write clears them), then fsync. `meanwhile` runs between the write and the fsync, while
/// the bytes go to the disk: the kernel is asked to start writing them back at once
/// (`POSIX_FADV_DONTNEED`, which starts the writeback of dirty pages and drops only clean ones:
/// pages under writeback stay), so the work done meanwhile no longer adds to the fsync's wait.
/// A file system without writeback (a memory one) ignores the advice.
fn fill(
    file: &mut File,
    bytes: &[u8],
    own: Option<Ownership>,
    meanwhile: &mut dyn FnMut(),
) -> std::io::Result<()> {
    if let Some(own) = own {
        let _ = rustix::fs::fchown(
            file.as_fd(),
            Some(rustix::fs::Uid::from_raw(own.uid)),
            Some(rustix::fs::Gid::from_raw(own.gid)),
        );
        rustix::fs::fchmod(file.as_fd(), raw::permissions(own.mode & 0o1777))?;
    }
    file.write_all(bytes)?;
    if bytes.len() <= STARTED_WRITEBACK_MAX {
        // A hint: whatever it does, the fsync below makes the file durable.
        #[cfg(target_os = "linux")]
        let _ = rustix::fs::fadvise(file.as_fd(), 0, None, rustix::fs::Advice::DontNeed);
    }
    meanwhile();
    if let Some(own) = own
        && own.mode & 0o6000 != 0
    {
        rustix::fs::fchmod(file.as_fd(), raw::permissions(own.mode))?;
    }
    file.sync_all()
}

/// Whether an error is `EEXIST`.
pub(super) fn is_exist(err: &std::io::Error) -> bool {
    err.raw_os_error() == Some(Errno::EXIST.raw_os_error())
}

/// Renames `from` to `to` in `dir` unless `to` exists (`EEXIST` then). Where the file system has
/// no `RENAME_NOREPLACE`, checks first (a tiny window remains there).
pub(super) fn rename_noreplace(dir: &OwnedFd, from: &OsStr, to: &OsStr) -> std::io::Result<()> {
    match rustix::fs::renameat_with(dir, from, dir, to, RenameFlags::NOREPLACE) {
        Ok(()) => Ok(()),
        Err(Errno::INVAL | Errno::NOSYS | Errno::OPNOTSUPP) => {
            if id_at(dir, to)?.is_some() {
                return Err(Errno::EXIST.into());
            }
            Ok(rustix::fs::renameat(dir, from, dir, to)?)
        }
        Err(e) => Err(e.into()),
    }
}

/// Swaps two names in `dir`. `Ok(false)` when the file system cannot.
pub(super) fn exchange(dir: &OwnedFd, a: &OsStr, b: &OsStr) -> std::io::Result<bool> {
    match rustix::fs::renameat_with(dir, a, dir, b, RenameFlags::EXCHANGE) {
        Ok(()) => Ok(true),
        Err(Errno::INVAL | Errno::NOSYS | Errno::OPNOTSUPP) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Removes `name` from `dir` if it is still the file `ino`.
pub(super) fn unlink_if(dir: &OwnedFd, name: &OsStr, ino: u64) {
    if id_at(dir, name)
        .ok()
        .flatten()
        .is_some_and(|id| id.ino == ino)
    {
        let _ = rustix::fs::unlinkat(dir, name, AtFlags::empty());
    }
}

/// Whether the file now named `name` in `dir` is the one `expected` describes. `old` is a handle
/// opened on the target before it moved, used to read it when it is the same file. `was` is
/// the content `expected` describes, when the caller holds it: the file is then compared with
/// it byte for byte instead of hashed.
pub(super) fn matches(
    dir: &OwnedFd,
    name: &OsStr,
    expected: &Expected,
    old: Option<&mut File>,
    was: Option<&[u8]>,
) -> std::io::Result<bool> {
    let (want_id, want_hash) = match expected {
        Expected::Anything => return Ok(true),
        Expected::Absent => return Ok(id_at(dir, name)?.is_none()),
        Expected::Link { id, target } => {
            return Ok(
                id_at(dir, name)? == Some(*id) && link_target_hash(dir, name).ok() == Some(*target)
            );
        }
        Expected::File { id, hash } => (id, hash),
    };
    let Some(now) = id_at(dir, name)? else {
        return Ok(false);
    };
    if now != *want_id {
        return Ok(false);
    }
    let mut opened;
    let file = match old {
        Some(file) if FileId::of(&file.metadata()?).ino == now.ino => file,
        _ => {
            let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
            opened = File::from(rustix::fs::openat(dir, name, flags, Mode::empty())?);
            &mut opened
        }
    };
    match was {
        Some(was) => holds(file, was),
        None => Ok(hash_file(file)? == *want_hash),
    }
}

/// The hash of where the symbolic link `name` in `dir` points.
pub(super) fn link_target_hash(dir: &OwnedFd, name: &OsStr) -> std::io::Result<ContentHash> {
    let target = rustix::fs::readlinkat(dir, name, Vec::new())?;
    Ok(ContentHash::of(target.as_bytes()))
}

/// Whether an open file holds exactly `content`, read from its start.
fn holds(file: &mut File, content: &[u8]) -> std::io::Result<bool> {
    file.rewind()?;
    let mut buffer = vec![0u8; 64 * 1024];
    let mut at = 0;
    loop {
        let n = file.read(&mut buffer)?;
        if n == 0 {
            return Ok(at == content.len());
        }
        if content.get(at..at + n) != Some(&buffer[..n]) {
            return Ok(false);
        }
        at += n;
    }
}

/// A read handle on the file at `name`, share-locked so that no sweep takes it while it sits
/// under a temporary name. `None` when it cannot be opened.
pub(super) fn hold_old(dir: &OwnedFd, name: &OsStr) -> Option<File> {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(dir, name, flags, Mode::empty()).ok()?;
    let _ = rustix::fs::flock(&fd, FlockOperation::NonBlockingLockShared);
    Some(File::from(fd))
}

/// Replaces (or creates) the file at `resolved` with `bytes`, atomically, if it is still as
/// `expected`. `keep` gives the mode and owner to apply; without it an existing file keeps its
/// own, and a new file gets 0644 minus the umask. Returns the new file's metadata and content
/// hash.
pub fn write_checked(
    resolved: &ResolvedPath,
    bytes: &[u8],
    keep: Option<Ownership>,
    expected: &Expected,
) -> Result<(std::fs::Metadata, ContentHash), WriteError> {
    write_checked_against(resolved, bytes, keep, expected, None, &mut || {})
}

/// [`write_checked`], for a caller that holds the content `expected` describes (`was`, the
/// file as it was loaded): the file that comes out of the swap is compared with it byte for
/// byte, which is faster than hashing it again. `meanwhile` is run while the new content goes
/// to the disk, before it is in place: work for the answer that does not need the write done
/// (a diff) costs no time there. It runs once, or not at all if the write fails before.
pub fn write_checked_against(
    resolved: &ResolvedPath,
    bytes: &[u8],
    keep: Option<Ownership>,
    expected: &Expected,
    was: Option<&[u8]>,
    meanwhile: &mut dyn FnMut(),
) -> Result<(std::fs::Metadata, ContentHash), WriteError> {
    let (dir, name) = open_parent_dir(resolved)?;
    let existing = inspect_target(&dir, &name, resolved)?;
    let path = resolved.display();
    let io = |source: std::io::Error| WriteError::Io {
        path: path.clone(),
        source,
    };
    check_early(existing.as_ref(), expected, &path)?;
    sweep_once(
        &dir,
        resolved.path.parent().unwrap_or(std::path::Path::new("/")),
    );
    let ownership = keep.or_else(|| {
        existing.map(|s| Ownership {
            mode: raw::mode(&s) & 0o7777,
            uid: s.st_uid,
            gid: s.st_gid,
        })
    });
    let mut temp = TempFile::create(&dir, &name, bytes, ownership, "tmp", meanwhile).map_err(io)?;
    let result = if existing.is_none() {
        // A new file: linked in under its name, never over one created meanwhile.
        match temp.link_as(&dir, &name) {
            Ok(()) => {
                temp.name = None;
                Ok(())
            }
            Err(e) if is_exist(&e) && *expected == Expected::Anything => {
                swap_in(&dir, &name, &mut temp, expected, was, &path)
            }
            Err(e) if is_exist(&e) => Err(WriteError::Changed { path: path.clone() }),
            Err(e) => Err(io(e)),
        }
    } else {
        swap_in(&dir, &name, &mut temp, expected, was, &path)
    };
    match result {
        Ok(()) => {
            // The rename is durable once the directory is: a crash after this keeps the new file.
            let _ = rustix::fs::fsync(&dir);
            Ok((temp.file.metadata().map_err(io)?, temp.hash))
        }
        Err(err) => {
            temp.discard(&dir);
            Err(err)
        }
    }
}

/// Refuses early what cannot go in: a file where none was expected, or none where one was.
fn check_early(
    existing: Option<&rustix::fs::Stat>,
    expected: &Expected,
    path: &str,
) -> Result<(), WriteError> {
    let changed = match (existing, expected) {
        (_, Expected::Anything) | (None, Expected::Absent) => false,
        (Some(_), Expected::Absent | Expected::Link { .. })
        | (None, Expected::File { .. } | Expected::Link { .. }) => true,
        (Some(stat), Expected::File { id, .. }) => {
            u64::try_from(stat.st_size).ok() != Some(id.size)
        }
    };
    if changed {
        return Err(WriteError::Changed {
            path: path.to_owned(),
        });
    }
    Ok(())
}

/// Puts the filled temporary file in place of `name`: swapped in, the file that comes out
/// checked against `expected` (and `was`, its content, if known), swapped back out if it is not
/// that file. The temporary name goes too.
fn swap_in(
    dir: &OwnedFd,
    name: &OsStr,
    temp: &mut TempFile,
    expected: &Expected,
    was: Option<&[u8]>,
    path: &str,
) -> Result<(), WriteError> {
    let io = |source: std::io::Error| WriteError::Io {
        path: path.to_owned(),
        source,
    };
    let mut old = hold_old(dir, name);
    let temp_name = match &temp.name {
        Some(named) => named.clone(),
        None => {
            let named = temp_name(name, "tmp");
            temp.link_as(dir, &named).map_err(io)?;
            named
        }
    };
    if exchange(dir, &temp_name, name).map_err(io)? {
        // The file that was there is now under the temporary name.
        let same = matches(dir, &temp_name, expected, old.as_mut(), was).map_err(io)?;
        if !same {
            swap_back(dir, name, &temp_name, temp);
            return Err(WriteError::Changed {
                path: path.to_owned(),
            });
        }
        if let Some(old) = old {
            unlink_if(
                dir,
                &temp_name,
                FileId::of(&old.metadata().map_err(io)?).ino,
            );
            if let Expected::File { id, hash } = expected {
                keep_late_appends(dir, name, old, id.size, *hash);
            }
        } else {
            let _ = rustix::fs::unlinkat(dir, &temp_name, AtFlags::empty());
        }
        temp.name = None;
        return Ok(());
    }
    // No exchange here: check, then rename over (a short window remains).
    if !matches(dir, name, expected, old.as_mut(), was).map_err(io)? {
        return Err(WriteError::Changed {
            path: path.to_owned(),
        });
    }
    rustix::fs::renameat(dir, &temp_name, dir, name).map_err(|e| io(e.into()))?;
    temp.name = None;
    Ok(())
}

/// Puts the file that was at `name` (now under `temp_name`) back after a refused swap, unless
/// another program replaced the name meanwhile (its file then stays). Anything written into the
/// new file while it was in is carried over.
pub(super) fn swap_back(dir: &OwnedFd, name: &OsStr, temp_name: &OsStr, temp: &TempFile) {
    let ours = id_at(dir, name)
        .ok()
        .flatten()
        .is_some_and(|id| id.ino == temp.id.ino);
    if !ours {
        return;
    }
    let reader = {
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        rustix::fs::openat(dir, name, flags, Mode::empty())
            .ok()
            .map(File::from)
    };
    if matches!(exchange(dir, temp_name, name), Ok(true))
        && let Some(reader) = reader
    {
        keep_late_appends(dir, name, reader, temp.id.size, temp.hash);
    }
}

/// How long after a swap a file that left its name is watched for late appends.
const LATE_APPEND_CHECKS: [std::time::Duration; 4] = [
    std::time::Duration::ZERO,
    std::time::Duration::from_millis(20),
    std::time::Duration::from_millis(200),
    std::time::Duration::from_secs(2),
];

/// Carries over what programs append to a file after it left its name: a program that opened
/// the file just before the swap (as `echo >> file` does) writes into it just after. Whatever
/// grows past `len` bytes, while the first `len` bytes still hash to `hash`, is appended to the
/// file now at `name`. Checked at once, then for two seconds by one background thread that
/// watches every such file.
pub(super) fn keep_late_appends(
    dir: &OwnedFd,
    name: &OsStr,
    file: File,
    len: u64,
    hash: ContentHash,
) {
    let Ok(dir) = rustix::io::fcntl_dupfd_cloexec(dir, 0) else {
        return;
    };
    let mut watched = Watched {
        dir,
        name: name.to_owned(),
        file,
        len,
        hash,
        copied: len,
        since: std::time::Instant::now(),
        checks: 1,
    };
    if watched.check().is_err() {
        return;
    }
    let inbox = WATCHER.get_or_init(|| {
        let inbox = std::sync::Arc::new(Inbox::default());
        let shared = std::sync::Arc::clone(&inbox);
        std::thread::Builder::new()
            .name("gimlet-late-appends".into())
            .spawn(move || watch_late_appends(&shared))
            .ok()
            .map(|_| inbox)
    });
    if let Some(inbox) = inbox {
        inbox.post(watched);
    }
}

/// The inbox of the one thread that watches files for late appends (`None` if it could not
/// start).
static WATCHER: OnceLock<Option<std::sync::Arc<Inbox>>> = OnceLock::new();

/// Files handed to the watcher, and when it will next look at them.
#[derive(Default)]
struct Inbox {
    state: Mutex<InboxState>,
    wake: std::sync::Condvar,
}

#[derive(Default)]
struct InboxState {
    /// Files not yet taken by the watcher.
    arrived: Vec<Watched>,
    /// The watcher is working and takes `arrived` before it waits again.
    awake: bool,
    /// When the waiting watcher wakes by itself (`None`: only when woken).
    deadline: Option<std::time::Instant>,
}

impl Inbox {
    /// Hands a file to the watcher, waking it only if it would not look before the file's next
    /// check is due: in a run of edits it is already waiting for an earlier file's check, and
    /// waking a sleeping thread would cost the edit more than the check.
    fn post(&self, file: Watched) {
        let due = file.due();
        let mut state = self.state.locked();
        state.arrived.push(file);
        let wake = state.must_wake_for(due);
        drop(state);
        if wake {
            self.wake.notify_one();
        }
    }
}

impl InboxState {
    /// Whether the watcher must be woken for a file whose next check is `due`: not while it
    /// works (it takes new files before it waits), nor while it waits for a check due first.
    fn must_wake_for(&self, due: Option<std::time::Instant>) -> bool {
        !self.awake
            && !matches!((self.deadline, due), (Some(deadline), Some(due)) if deadline <= due)
    }
}

/// A file that left its name, watched for late appends.
struct Watched {
    dir: OwnedFd,
    name: OsString,
    file: File,
    len: u64,
    hash: ContentHash,
    copied: u64,
    since: std::time::Instant,
    /// Checks done, of [`LATE_APPEND_CHECKS`].
    checks: usize,
}

impl Watched {
    fn due(&self) -> Option<std::time::Instant> {
        LATE_APPEND_CHECKS
            .get(self.checks)
            .map(|wait| self.since + *wait)
    }

    fn check(&mut self) -> std::io::Result<()> {
        carry_over(
            &self.dir,
            &self.name,
            &self.file,
            self.len,
            self.hash,
            &mut self.copied,
        )
    }
}

/// Files watched at most; the oldest go first beyond.
const MAX_WATCHED: usize = 1024;

/// The files being watched, one queue per check still to come. Files arrive in the order
/// they were swapped (to within the moment two writers race) and every file waits the same
/// times, so each queue is in the order its files are due: the next file due is at the front
/// of one of them, and a burst of changes costs the watcher a constant amount of work per
/// file, not a scan of all of them.
#[derive(Default)]
struct WatchQueues {
    /// `queues[k]`: files whose next check is `LATE_APPEND_CHECKS[k]` after their swap.
    queues: [std::collections::VecDeque<Watched>; LATE_APPEND_CHECKS.len()],
}

impl WatchQueues {
    fn len(&self) -> usize {
        self.queues
            .iter()
            .map(std::collections::VecDeque::len)
            .sum()
    }

    /// Adds a file after its first check, dropping the one watched longest beyond the limit.
    fn push(&mut self, new: Watched) {
        if self.len() >= MAX_WATCHED
            && let Some(oldest) = self.queues.iter_mut().rev().find(|q| !q.is_empty())
        {
            oldest.pop_front();
        }
        if let Some(queue) = self.queues.get_mut(new.checks) {
            queue.push_back(new);
        }
    }

    /// When the next check is due, if any.
    fn next_due(&self) -> Option<std::time::Instant> {
        self.queues
            .iter()
            .filter_map(|q| q.front().and_then(Watched::due))
            .min()
    }

    /// What the watcher does whenever it is awake: the checks due, then the spare temporaries
    /// the last writes took (awake anyway, it makes them again now). Returns when the folders
    /// kept for spares are next due to go.
    fn tend(&mut self) -> Option<std::time::Instant> {
        let now = std::time::Instant::now();
        self.run_due(now);
        #[cfg(target_os = "linux")]
        return spares::top_up(now);
        #[cfg(not(target_os = "linux"))]
        None
    }

    /// Runs every check due by `now`; a file goes to the next queue, or away after its last.
    fn run_due(&mut self, now: std::time::Instant) {
        for stage in 0..self.queues.len() {
            while self.queues[stage]
                .front()
                .and_then(Watched::due)
                .is_some_and(|due| due <= now)
            {
                let Some(mut watched) = self.queues[stage].pop_front() else {
                    break;
                };
                watched.checks += 1;
                if let Err(err) = watched.check() {
                    tracing::debug!("watching for late appends: {err}");
                    continue;
                }
                if let Some(next) = self.queues.get_mut(watched.checks) {
                    next.push_back(watched);
                }
            }
        }
    }
}

/// The watcher thread: checks each file when due, drops it after its last check.
fn watch_late_appends(inbox: &Inbox) {
    let mut watched = WatchQueues::default();
    // When the folders kept for spare temporaries are next due to go.
    let mut spares_due = None;
    let mut state = inbox.state.locked();
    loop {
        let arrived = std::mem::take(&mut state.arrived);
        if !arrived.is_empty() {
            state.awake = true;
            drop(state);
            for file in arrived {
                watched.push(file);
            }
            spares_due = watched.tend();
            state = inbox.state.locked();
            continue;
        }
        // Nothing new: wait for the next check due, or for a file.
        state.awake = false;
        state.deadline = match (watched.next_due(), spares_due) {
            (Some(check), Some(spares)) => Some(check.min(spares)),
            (check, spares) => check.or(spares),
        };
        state = match state.deadline {
            Some(deadline) => {
                let wait = deadline.saturating_duration_since(std::time::Instant::now());
                inbox
                    .wake
                    .wait_timeout(state, wait)
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .0
            }
            None => inbox
                .wake
                .wait(state)
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        };
        state.awake = true;
        state.deadline = None;
        drop(state);
        spares_due = watched.tend();
        state = inbox.state.locked();
    }
}

/// One check of [`keep_late_appends`].
fn carry_over(
    dir: &OwnedFd,
    name: &OsStr,
    file: &File,
    len: u64,
    hash: ContentHash,
    copied: &mut u64,
) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let size = file.metadata()?.len();
    if size <= *copied {
        return Ok(());
    }
    // Only appends are carried over: the part that was checked must be as it was.
    let mut prefix = Hasher::default();
    let mut buffer = vec![0u8; 64 * 1024];
    let mut at = 0;
    while at < len {
        let want = usize::try_from((len - at).min(buffer.len() as u64)).unwrap_or(buffer.len());
        let n = file.read_at(&mut buffer[..want], at)?;
        if n == 0 {
            return Ok(());
        }
        prefix.update(&buffer[..n]);
        at += n as u64;
    }
    if prefix.finish() != hash {
        return Ok(());
    }
    let flags =
        OFlags::WRONLY | OFlags::APPEND | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let mut target = File::from(rustix::fs::openat(dir, name, flags, Mode::empty())?);
    if !target.metadata()?.is_file() {
        return Ok(());
    }
    // In pieces of the buffer: what was appended may be large.
    let start = *copied;
    while *copied < size {
        let want =
            usize::try_from((size - *copied).min(buffer.len() as u64)).unwrap_or(buffer.len());
        let n = file.read_at(&mut buffer[..want], *copied)?;
        if n == 0 {
            break;
        }
        target.write_all(&buffer[..n])?;
        *copied += n as u64;
    }
    tracing::info!(
        "carried {} bytes appended to {} just as it was replaced",
        *copied - start,
        name.to_string_lossy()
    );
    Ok(())
}

/// Replaces (or creates) the file at `resolved` with `bytes`, whatever is there now. For
/// restores that check by themselves (`undo`).
pub fn write_atomic(
    resolved: &ResolvedPath,
    bytes: &[u8],
    keep: Option<Ownership>,
) -> Result<std::fs::Metadata, WriteError> {
    write_checked(resolved, bytes, keep, &Expected::Anything).map(|(meta, _)| meta)
}

/// Removes the file at `resolved` if it is still as `expected` (for deletes and moves). It is
/// moved aside first, checked, and only then unlinked; a file that changed meanwhile is put
/// back. Refuses what `write_checked` would.
pub fn remove_checked(resolved: &ResolvedPath, expected: &Expected) -> Result<(), WriteError> {
    let (dir, name) = open_parent_dir(resolved)?;
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
    sweep_once(
        &dir,
        resolved.path.parent().unwrap_or(std::path::Path::new("/")),
    );
    let mut old = hold_old(&dir, &name);
    let aside = temp_name(&name, "tmp");
    rename_noreplace(&dir, &name, &aside).map_err(io)?;
    if !matches(&dir, &aside, expected, old.as_mut(), None).map_err(io)? {
        // Put it back, unless a new file took the name meanwhile (then both stay).
        let _ = rename_noreplace(&dir, &aside, &name);
        return Err(WriteError::Changed { path });
    }
    rustix::fs::unlinkat(&dir, &aside, AtFlags::empty()).map_err(|e| io(e.into()))?;
    let _ = rustix::fs::fsync(&dir);
    Ok(())
}

/// Removes the file at `resolved`, whatever it holds.
pub fn remove_file(resolved: &ResolvedPath) -> Result<(), WriteError> {
    remove_checked(resolved, &Expected::Anything)
}

/// Directories swept in this process, by path, device and inode.
static SWEPT: Mutex<Option<HashSet<(std::path::PathBuf, u64, u64)>>> = Mutex::new(None);
/// Directories remembered at most; beyond, the memory starts over (a second sweep is harmless).
const MAX_SWEPT: usize = 10_000;

/// Sweeps `dir` (at `path`) the first time this process writes there.
pub(super) fn sweep_once(dir: &OwnedFd, path: &std::path::Path) {
    let Ok(stat) = rustix::fs::fstat(dir) else {
        return;
    };
    let key = (path.to_path_buf(), raw::device(&stat), stat.st_ino);
    let first = {
        let mut swept = SWEPT.locked();
        let swept = swept.get_or_insert_with(HashSet::new);
        if swept.len() >= MAX_SWEPT {
            swept.clear();
        }
        swept.insert(key)
    };
    if first {
        sweep(dir);
    }
}

/// How old an unlocked temporary of a multi-file change must be before a sweep takes it
/// (younger ones wait for the recovery that reads its intent).
const TXN_SWEEP_AGE: std::time::Duration = std::time::Duration::from_secs(24 * 60 * 60);

/// Removes gimlet's temporaries in `dir` whose writer is dead (their lock is free). Temporaries
/// of a multi-file change (`.txn`) are left to the recovery that reads its intent, unless a day
/// old. Returns how many went.
pub(super) fn sweep(dir: &OwnedFd) -> usize {
    let Ok(entries) = rustix::fs::Dir::read_from(dir) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = OsStr::from_bytes(entry.file_name().to_bytes()).to_owned();
        let Some(kind) = temp_kind(name.as_bytes()) else {
            continue;
        };
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let Ok(fd) = rustix::fs::openat(dir, &name, flags, Mode::empty()) else {
            continue;
        };
        if rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive).is_err() {
            continue; // Its writer is alive.
        }
        let Ok(meta) = File::from(fd).metadata() else {
            continue;
        };
        let old_enough = meta
            .modified()
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age >= TXN_SWEEP_AGE);
        if !meta.is_file() || (kind == "txn" && !old_enough) {
            continue;
        }
        unlink_if(dir, &name, meta.ino());
        removed += 1;
    }
    removed
}

/// Creates the missing parent directories of `resolved`, each relative to the one before
/// (never following a symlink). Returns how many were created.
pub fn create_parents(resolved: &ResolvedPath) -> Result<usize, WriteError> {
    let (start, components): (OwnedFd, Vec<OsString>) = match &resolved.location {
        Location::Inside { root, relative, .. } => {
            let fd = rustix::fs::openat(
                root.fd(),
                ".",
                NAME_ONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| resolved.map_open_error(e))?;
            let parent = relative.parent().unwrap_or(std::path::Path::new(""));
            (fd, parent.iter().map(ToOwned::to_owned).collect())
        }
        Location::Outside => {
            let fd = rustix::fs::open(
                "/",
                NAME_ONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
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
        match rustix::fs::mkdirat(&dir, &component, raw::permissions(0o777)) {
            Ok(()) => created += 1,
            Err(Errno::EXIST) => {}
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
            NAME_ONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| match e {
            Errno::NOTDIR => WriteError::Path(PathError::NotADirectory {
                path: component.to_string_lossy().into_owned(),
            }),
            other => WriteError::Path(resolved.map_open_error(other)),
        })?;
    }
    Ok(created)
}

#[cfg(test)]
#[path = "atomic_write_tests.rs"]
mod tests;
