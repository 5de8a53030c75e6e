//! Opening resolved paths on Linux and macOS: beneath a root's directory handle, following no
//! symlink, so that a component swapped for a symlink after [`RootSet::resolve`] makes the open
//! fail instead of leaving the root.
//!
//! - Linux: `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)`, one call
//!   for the whole path; the kernel also decides the common case of
//!   [`RootSet::resolve`] (`resolve_plain`).
//! - macOS (and Linux without `openat2`): one `openat(O_NOFOLLOW)` per component
//!   ([`open_beneath_walk`]). Tests run the race and escape cases against this walk on Linux
//!   too ([`force_portable`]).

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::fs::{FileType, Mode, OFlags};

use super::paths::{Location, OpenKind, PathError, ResolvedPath, Root, RootSet, own_process_entry};

/// Flags of a handle that only names a file or folder (to `fstat` it, or to open beneath
/// it): `O_PATH` on Linux, which needs no read permission and does nothing to the file. macOS
/// has no `O_PATH`: there it is a read-only open that does not block, so a folder must be
/// readable to be walked, and a FIFO or device met on the way is opened (non-blocking) and
/// closed again.
#[cfg(target_os = "linux")]
pub const NAME_ONLY: OFlags = OFlags::PATH;
/// See the Linux definition.
#[cfg(all(unix, not(target_os = "linux")))]
pub const NAME_ONLY: OFlags = OFlags::RDONLY.union(OFlags::NONBLOCK);

/// Whether paths are opened the portable way (the per-component walk macOS uses) even where
/// `openat2` is there. Always so off Linux.
static PORTABLE: AtomicBool = AtomicBool::new(false);

/// Makes this process open paths as macOS does (the per-component walk, no `openat2`), so
/// that the tests of confinement run against that code on Linux too. Not for production use.
#[doc(hidden)]
pub fn force_portable(on: bool) {
    PORTABLE.store(on, Ordering::Relaxed);
}

/// Whether `openat2` is to be skipped.
fn portable() -> bool {
    cfg!(not(target_os = "linux")) || PORTABLE.load(Ordering::Relaxed)
}

impl Root {
    /// The directory handle of a resolved root path.
    pub(super) fn open_handle(path: &Path) -> Result<OwnedFd, PathError> {
        rustix::fs::open(
            path,
            NAME_ONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| match e {
            rustix::io::Errno::NOTDIR => PathError::NotADirectory {
                path: path.display().to_string(),
            },
            other => PathError::io(path, other.into()),
        })
    }

    /// The directory handle paths are opened beneath.
    pub fn fd(&self) -> &OwnedFd {
        &self.handle
    }
}

/// The common case, decided by the kernel in one call: a path of plain names (no `..`)
/// that exists beneath a root with no symlink on the way. `openat2(O_PATH,
/// RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` from the root's handle succeeds only then, and
/// the resolved path is the root's path joined with the names: what the walk in
/// [`resolve_components`] finds for such a path, without one `lstat` per name. Anything
/// else (a symlink, `..`, a missing name, a path under no root) is left to the walk:
/// `None`. Inside a [`super::nowait::attempt`] the lookup is cache-only, and a lookup that
/// would wait is an error.
#[cfg_attr(
    not(target_os = "linux"),
    expect(clippy::unnecessary_wraps, reason = "only Linux decides here")
)]
pub(super) fn resolve_plain(set: &RootSet, given: &Path) -> Result<Option<PathBuf>, PathError> {
    if portable() {
        return Ok(None);
    }
    let (root, relative) = if given.is_absolute() {
        let Some(root) = set.root_of(given) else {
            return Ok(None);
        };
        (root, given.strip_prefix(root.path()).unwrap_or(given))
    } else {
        let Some(first) = set.first() else {
            return Ok(None);
        };
        (first, given)
    };
    let mut resolved = root.path().to_owned();
    for component in relative.components() {
        match component {
            Component::Normal(name) => resolved.push(name),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                return Ok(None);
            }
        }
    }
    // Not `open_beneath`: its portable fallback opens a final symlink itself under `O_PATH`.
    #[cfg(target_os = "linux")]
    {
        use rustix::fs::ResolveFlags;
        let resolve = ResolveFlags::BENEATH
            | ResolveFlags::NO_SYMLINKS
            | ResolveFlags::NO_MAGICLINKS
            | cached_only();
        let relative = if relative.as_os_str().is_empty() {
            Path::new(".")
        } else {
            relative
        };
        let flags = NAME_ONLY | OFlags::CLOEXEC;
        match rustix::fs::openat2(root.fd(), relative, flags, Mode::empty(), resolve) {
            Ok(_handle) => return Ok(Some(resolved)),
            Err(rustix::io::Errno::AGAIN) if super::nowait::active() => {
                return Err(PathError::io(given, super::nowait::would_block()));
            }
            Err(_) => {}
        }
    }
    Ok(None)
}

impl ResolvedPath {
    /// Opens the path. Inside a root, the open is beneath the root handle and follows no
    /// symlink; outside (allowed only when the caller checked approval), it follows none
    /// either, so it opens exactly the path that was approved.
    pub fn open(&self, kind: OpenKind) -> Result<File, PathError> {
        match kind {
            OpenKind::ReadFile => self.open_regular().map(|(file, _)| file),
            OpenKind::Directory => Ok(File::from(
                self.open_raw(OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty())?,
            )),
            OpenKind::Handle => Ok(File::from(self.open_raw(NAME_ONLY, Mode::empty())?)),
        }
    }

    /// Opens the directory a tool was pointed at (`ls`, `glob`, bash's `workdir`). When it does
    /// not exist, the error names similar entries beside it ([`Self::with_similar_names`]).
    pub fn open_existing_dir(&self) -> Result<File, PathError> {
        self.open(OpenKind::Directory)
            .map_err(|err| self.with_similar_names(err))
    }

    /// Opens a regular file for reading and returns it with its metadata. A FIFO, socket or
    /// device is refused without blocking: the open is non-blocking (a flag regular files
    /// ignore), and the type is checked on the open handle.
    pub fn open_regular(&self) -> Result<(File, std::fs::Metadata), PathError> {
        let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY;
        let file = File::from(self.open_raw(flags, Mode::empty())?);
        let meta = file.metadata().map_err(|e| PathError::io(&self.path, e))?;
        let file_type = meta.file_type();
        if file_type.is_file() {
            return Ok((file, meta));
        }
        if file_type.is_dir() {
            return Err(PathError::IsADirectory {
                path: self.display(),
                hint: "; use `ls` to list it",
            });
        }
        let mode = std::os::unix::fs::MetadataExt::mode(&meta);
        Err(PathError::NotRegular {
            path: self.display(),
            kind: file_kind(super::raw::file_type_of_mode(mode)),
        })
    }

    /// Opens with raw flags (`O_CLOEXEC` and no-follow are always added).
    pub fn open_raw(&self, flags: OFlags, mode: Mode) -> Result<OwnedFd, PathError> {
        let result = match &self.location {
            Location::Inside { root, relative, .. } => {
                open_beneath(root.fd(), relative, flags, mode)
            }
            Location::Outside => open_exact(&self.path, flags, mode),
        };
        result.map_err(|e| self.map_open_error(e))
    }

    /// Opens `rel` below this directory (beneath its root when inside one), following no
    /// symlink. Used to open the files a walk found.
    pub fn open_child(&self, rel: &Path, flags: OFlags) -> Result<OwnedFd, rustix::io::Errno> {
        // `join("")` would append a `/`: the empty path is this path itself.
        let join = |base: &Path| {
            if rel.as_os_str().is_empty() {
                base.to_owned()
            } else {
                base.join(rel)
            }
        };
        match &self.location {
            Location::Inside { root, relative, .. } => {
                open_beneath(root.fd(), &join(relative), flags, Mode::empty())
            }
            Location::Outside => open_exact(&join(&self.path), flags, Mode::empty()),
        }
    }

    /// Maps an error from opening this path to a [`PathError`] that says what to do.
    pub fn map_open_error(&self, err: rustix::io::Errno) -> PathError {
        match err {
            rustix::io::Errno::LOOP | rustix::io::Errno::XDEV => PathError::Changed {
                path: self.display(),
            },
            rustix::io::Errno::NOENT => PathError::NotFound {
                path: self.display(),
                hint: String::new(),
            },
            rustix::io::Errno::NOTDIR => PathError::NotADirectory {
                path: self.display(),
            },
            rustix::io::Errno::ISDIR => PathError::IsADirectory {
                path: self.display(),
                hint: "",
            },
            other => PathError::io(&self.path, other.into()),
        }
    }

    /// Opens the parent directory (beneath the root when inside one) and returns it with the
    /// final component's name, for `*at` calls that create, rename or remove.
    pub fn open_parent(&self) -> Result<(OwnedFd, OsString), PathError> {
        let name = self
            .path
            .file_name()
            .ok_or_else(|| PathError::IsADirectory {
                path: self.display(),
                hint: "",
            })?
            .to_owned();
        let parent = self.path.parent().unwrap_or(Path::new("/"));
        let flags = NAME_ONLY | OFlags::DIRECTORY;
        let fd = match &self.location {
            Location::Inside { root, relative, .. } => {
                let rel_parent = relative.parent().unwrap_or(Path::new(""));
                open_beneath(root.fd(), rel_parent, flags, Mode::empty())
            }
            Location::Outside => open_exact(parent, flags, Mode::empty()),
        };
        let fd = fd.map_err(|e| self.map_open_error(e))?;
        Ok((fd, name))
    }

    /// Opens `rel` below this directory for reading: a regular file, without blocking on a
    /// FIFO (the caller checks the type on the handle).
    pub fn open_child_read(&self, rel: &Path) -> std::io::Result<File> {
        let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
        Ok(File::from(self.open_child(rel, flags)?))
    }

    /// The metadata of `rel` below this directory, not following a final symlink.
    pub fn child_metadata(&self, rel: &Path) -> std::io::Result<std::fs::Metadata> {
        let fd = self.open_child(rel, NAME_ONLY | OFlags::CLOEXEC)?;
        File::from(fd).metadata()
    }
}

/// A name for a non-regular file type, for messages.
pub fn file_kind(kind: FileType) -> &'static str {
    match kind {
        FileType::RegularFile => "regular file",
        FileType::Directory => "directory",
        FileType::Symlink => "symlink",
        FileType::Fifo => "FIFO",
        FileType::Socket => "socket",
        FileType::CharacterDevice => "character device",
        FileType::BlockDevice => "block device",
        FileType::Unknown => "special file",
    }
}

/// Opens `relative` beneath `root` without following any symlink and without leaving `root`.
pub fn open_beneath(
    root: impl AsFd,
    relative: &Path,
    flags: OFlags,
    mode: Mode,
) -> Result<OwnedFd, rustix::io::Errno> {
    let relative = if relative.as_os_str().is_empty() {
        Path::new(".")
    } else {
        relative
    };
    #[cfg(target_os = "linux")]
    if !portable() {
        use rustix::fs::ResolveFlags;
        let resolve = ResolveFlags::BENEATH
            | ResolveFlags::NO_SYMLINKS
            | ResolveFlags::NO_MAGICLINKS
            | cached_only();
        match rustix::fs::openat2(&root, relative, flags | OFlags::CLOEXEC, mode, resolve) {
            Err(rustix::io::Errno::NOSYS) => {}
            other => return other,
        }
    }
    if super::nowait::active() {
        // The walk cannot promise not to wait.
        return Err(rustix::io::Errno::AGAIN);
    }
    open_beneath_walk(root, relative, flags, mode)
}

/// The portable form of [`open_beneath`]: one `openat(O_NOFOLLOW)` per component. Used where
/// `openat2` is missing; `relative` must not contain `..` (resolved paths never do).
pub fn open_beneath_walk(
    root: impl AsFd,
    relative: &Path,
    flags: OFlags,
    mode: Mode,
) -> Result<OwnedFd, rustix::io::Errno> {
    let names: Vec<&OsStr> = relative
        .components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(Ok(name)),
            Component::CurDir => None,
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                Some(Err(rustix::io::Errno::XDEV))
            }
        })
        .collect::<Result<_, _>>()?;
    let step = NAME_ONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let Some((last, dirs)) = names.split_last() else {
        return rustix::fs::openat(&root, ".", flags | OFlags::CLOEXEC, mode);
    };
    let mut dir: Option<OwnedFd> = None;
    for name in dirs {
        let next = match &dir {
            Some(fd) => rustix::fs::openat(fd, *name, step, Mode::empty())?,
            None => rustix::fs::openat(&root, *name, step, Mode::empty())?,
        };
        dir = Some(next);
    }
    let last_flags = flags | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    match &dir {
        Some(fd) => rustix::fs::openat(fd, *last, last_flags, mode),
        None => rustix::fs::openat(&root, *last, last_flags, mode),
    }
}

/// Opens an absolute path that must contain no symlink at all (approved paths outside roots).
fn open_exact(path: &Path, flags: OFlags, mode: Mode) -> Result<OwnedFd, rustix::io::Errno> {
    if own_process_entry(path) {
        return Err(rustix::io::Errno::ACCESS);
    }
    #[cfg(target_os = "linux")]
    if !portable() {
        use rustix::fs::ResolveFlags;
        let resolve = ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS | cached_only();
        match rustix::fs::openat2(
            rustix::fs::CWD,
            path,
            flags | OFlags::CLOEXEC,
            mode,
            resolve,
        ) {
            Err(rustix::io::Errno::NOSYS) => {}
            other => return other,
        }
    }
    if super::nowait::active() {
        return Err(rustix::io::Errno::AGAIN);
    }
    let root = rustix::fs::open(
        "/",
        NAME_ONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let relative = path.strip_prefix("/").unwrap_or(path);
    open_beneath_walk(root, relative, flags, mode)
}

/// `RESOLVE_CACHED` inside a [`super::nowait::attempt`]: the lookup fails with `EAGAIN`
/// unless the kernel's cache answers all of it (and with `EINVAL` before Linux 5.12).
#[cfg(target_os = "linux")]
fn cached_only() -> rustix::fs::ResolveFlags {
    if super::nowait::active() {
        rustix::fs::ResolveFlags::CACHED
    } else {
        rustix::fs::ResolveFlags::empty()
    }
}

/// Inside a [`super::nowait::attempt`]: fails unless every name on the way to `given`
/// (absolute, or relative to `base`), symlinks followed, is in the kernel's lookup cache. The
/// resolution that follows (one `lstat` per name) then finds them there and does not wait.
/// It decides nothing about where the path lands; the walk does.
pub(super) fn check_cached(base: &Root, given: &Path) -> Result<(), PathError> {
    if !super::nowait::active() {
        return Ok(());
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (base, given);
    #[cfg(target_os = "linux")]
    {
        use rustix::fs::ResolveFlags;
        let flags = NAME_ONLY | OFlags::CLOEXEC;
        let cached = ResolveFlags::CACHED | ResolveFlags::NO_MAGICLINKS;
        let dir = if given.is_absolute() {
            rustix::fs::CWD
        } else {
            base.fd().as_fd()
        };
        let probe = rustix::fs::openat2(dir, given, flags, Mode::empty(), cached);
        if probe.is_ok() {
            return Ok(());
        }
    }
    Err(PathError::io(given, super::nowait::would_block()))
}

/// `candidate` (a name in the symlink-free folder `parent`, which exists and is no symlink) as
/// the file system spells it. On Linux as given: its file systems tell names apart by case. On
/// macOS, whose default volumes ignore case, the name as stored (`F_GETPATH` on the file),
/// when that names it in `parent`: a hard-linked file could report another of its names.
#[expect(
    clippy::unnecessary_wraps,
    reason = "one signature for every system: Windows refuses links it did not report"
)]
pub(super) fn as_stored(parent: &Path, candidate: PathBuf) -> Result<PathBuf, PathError> {
    #[cfg(target_os = "macos")]
    {
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        if let Ok(fd) = rustix::fs::open(&candidate, flags, Mode::empty())
            && let Ok(stored) = rustix::fs::getpath(&fd)
        {
            let stored = PathBuf::from(std::ffi::OsStr::from_bytes(stored.to_bytes()));
            let same_place = stored.parent().is_some_and(|p| {
                p.as_os_str().len() == parent.as_os_str().len()
                    && p.to_string_lossy()
                        .eq_ignore_ascii_case(&parent.to_string_lossy())
            });
            if same_place && let Some(name) = stored.file_name() {
                return Ok(parent.join(name));
            }
        }
    }
    #[cfg(not(target_os = "macos"))]
    let _ = parent;
    Ok(candidate)
}

/// The names in the folder `relative` beneath `root` (at most `limit`; `.` and `..` left out),
/// opened as every path is: beneath the root's handle, following no symlink.
pub(super) fn names_beneath(
    root: &Root,
    relative: &Path,
    limit: usize,
) -> std::io::Result<Vec<OsString>> {
    let dir = open_beneath(
        root.fd(),
        relative,
        OFlags::RDONLY | OFlags::DIRECTORY,
        Mode::empty(),
    )?;
    let reader = rustix::fs::Dir::read_from(&dir)?;
    Ok(reader
        .filter_map(Result::ok)
        .map(|entry| OsStr::from_bytes(entry.file_name().to_bytes()).to_owned())
        .filter(|name| name != "." && name != "..")
        .take(limit)
        .collect())
}

/// What a folder entry is, as a listing tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// A folder.
    Dir,
    /// A regular file.
    File,
    /// A symbolic link (never followed).
    Symlink,
    /// Anything else: a FIFO, a socket, a device.
    Other,
}

impl EntryKind {
    fn of(file_type: FileType) -> Self {
        match file_type {
            FileType::Directory => Self::Dir,
            FileType::RegularFile => Self::File,
            FileType::Symlink => Self::Symlink,
            _ => Self::Other,
        }
    }
}

/// An open folder that listings walk from: its entries, and folders and small files in it,
/// each opened relative to it without following a symlink, so a walk that starts beneath a
/// root stays there whatever is swapped meanwhile.
#[derive(Debug)]
pub struct DirHandle {
    fd: OwnedFd,
}

impl DirHandle {
    /// The folder `resolved`, which [`ResolvedPath::open_existing_dir`] opened as `dir`.
    pub fn from_file(dir: File, _resolved: &ResolvedPath) -> Self {
        Self { fd: dir.into() }
    }

    /// The folder `relative` beneath `root` (read-only handle), or `None`.
    pub fn beneath(root: &Root, relative: &Path) -> Option<Self> {
        open_beneath(
            root.fd(),
            relative,
            NAME_ONLY | OFlags::DIRECTORY,
            Mode::empty(),
        )
        .ok()
        .map(|fd| Self { fd })
    }

    /// The folder `name` in this one, unless it is a symlink or no folder.
    pub fn subdir(&self, name: &OsStr) -> Option<Self> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        rustix::fs::openat(&self.fd, name, flags, Mode::empty())
            .ok()
            .map(|fd| Self { fd })
    }

    /// The entries (`.` and `..` left out), each with its kind, read as they are taken.
    pub fn entries(&self) -> std::io::Result<impl Iterator<Item = (OsString, EntryKind)> + '_> {
        let reader = rustix::fs::Dir::read_from(&self.fd)?;
        Ok(reader.filter_map(Result::ok).filter_map(move |item| {
            let name = OsStr::from_bytes(item.file_name().to_bytes()).to_owned();
            if name == "." || name == ".." {
                return None;
            }
            let kind = match item.file_type() {
                FileType::Unknown => rustix::fs::statat(
                    &self.fd,
                    name.as_os_str(),
                    rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
                )
                .map_or(EntryKind::Other, |s| {
                    EntryKind::of(super::raw::file_type(&s))
                }),
                known => EntryKind::of(known),
            };
            Some((name, kind))
        }))
    }

    /// The text of the regular file `name` in this folder, if it is one of at most `max`
    /// bytes (no symlink followed, no FIFO waited on).
    pub fn read_small(&self, name: &OsStr, max: u64) -> Option<String> {
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let mut file = File::from(rustix::fs::openat(&self.fd, name, flags, Mode::empty()).ok()?);
        let meta = file.metadata().ok()?;
        if !meta.is_file() || meta.len() > max {
            return None;
        }
        let mut text = String::new();
        std::io::Read::read_to_string(&mut file, &mut text).ok()?;
        Some(text)
    }
}
