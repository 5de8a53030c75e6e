//! Opening resolved paths on Windows.
//!
//! Windows has no `openat`: a file is opened by its full name. What keeps such an open beneath
//! its root is that no folder on the way can change while it happens ([`Pinned`]): each folder
//! from the root down is opened in turn as itself (`FILE_FLAG_OPEN_REPARSE_POINT`: a symbolic
//! link or junction is seen, never followed, and refused) and without `FILE_SHARE_DELETE`, so
//! that while the handles are held nobody can rename, remove or replace it. The file is then
//! opened by its full name, again as itself, and refused if it is a reparse point. A folder
//! swapped for a junction after [`RootSet::resolve`](super::RootSet::resolve) makes the open
//! fail; it never lands outside. This is the same promise as the Unix walk's, kept by other
//! means (the Bytecode Alliance's `cap-primitives` opens by full name too, checking after).
//!
//! The standard library gives what this needs without `unsafe`: `OpenOptionsExt::share_mode`,
//! `custom_flags` and `access_mode`, and `MetadataExt::file_attributes`.

use std::ffi::{OsStr, OsString};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::windows::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use super::paths::{Location, OpenKind, PathError, ResolvedPath, Root, RootSet};

const FILE_SHARE_READ: u32 = 0x1;
const FILE_SHARE_WRITE: u32 = 0x2;
const FILE_SHARE_DELETE: u32 = 0x4;
/// Needed to open a folder at all.
const FILE_FLAG_BACKUP_SEMANTICS: u32 = 0x0200_0000;
/// Open a reparse point (symbolic link, junction) itself instead of what it points to.
const FILE_FLAG_OPEN_REPARSE_POINT: u32 = 0x0020_0000;
const FILE_ATTRIBUTE_DIRECTORY: u32 = 0x10;
const FILE_ATTRIBUTE_REPARSE_POINT: u32 = 0x400;
/// Enough access to read a file's attributes, and nothing else.
const FILE_READ_ATTRIBUTES: u32 = 0x80;
/// `ERROR_DIRECTORY`: "The directory name is invalid" (a file where a folder was wanted).
const ERROR_DIRECTORY: i32 = 267;

/// The error of an open that met a reparse point (a symbolic link or junction) where a plain
/// name was expected: the path changed since it was resolved.
#[derive(Debug)]
struct ReparsePoint;

impl std::fmt::Display for ReparsePoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a symbolic link or junction appeared in the path")
    }
}

impl std::error::Error for ReparsePoint {}

fn reparse_point() -> io::Error {
    io::Error::other(ReparsePoint)
}

fn is_reparse_error(err: &io::Error) -> bool {
    err.get_ref()
        .is_some_and(<dyn std::error::Error + Send + Sync>::is::<ReparsePoint>)
}

/// A folder opened as itself so that it cannot be renamed, removed or replaced while the
/// handle lives.
fn pin_dir(path: &Path) -> io::Result<File> {
    let dir = OpenOptions::new()
        .access_mode(FILE_READ_ATTRIBUTES)
        .share_mode(FILE_SHARE_READ | FILE_SHARE_WRITE)
        .custom_flags(FILE_FLAG_BACKUP_SEMANTICS | FILE_FLAG_OPEN_REPARSE_POINT)
        .open(path)?;
    let attributes = dir.metadata()?.file_attributes();
    if attributes & FILE_ATTRIBUTE_REPARSE_POINT != 0 {
        return Err(reparse_point());
    }
    if attributes & FILE_ATTRIBUTE_DIRECTORY == 0 {
        return Err(io::Error::from_raw_os_error(ERROR_DIRECTORY));
    }
    Ok(dir)
}

/// The folders from a start to a path, each pinned ([`pin_dir`]), held while a file in the
/// last is opened, created, renamed or removed by its full name.
#[derive(Debug, Clone)]
pub(super) struct Pinned {
    path: PathBuf,
    /// The last folder's real path (links resolved), to which each name opened in it must
    /// lead back ([`beside`]).
    real: PathBuf,
    /// Held for what they keep from happening.
    dirs: Vec<Arc<File>>,
}

/// Checks that `name` in the folder whose real path is `real_parent` is really there: its own
/// real path is in that folder. A name that is no reparse point but leads elsewhere is a link
/// Windows did not report (a Unix symlink seen through Wine, a link an SMB server follows
/// itself), which the open followed. Returns the name's real path.
fn beside(real_parent: &Path, path: &Path) -> io::Result<PathBuf> {
    let real = crate::util::canonical(path)?;
    if real.parent() == Some(real_parent) {
        Ok(real)
    } else {
        // Reported as a link that appeared: the resolve step, which saw the name first,
        // says what it is (`PathError::UnreportedLink`).
        Err(reparse_point())
    }
}

impl Pinned {
    /// Pins `start` (an absolute folder) and each folder of `relative` below it. `relative`
    /// holds plain names only (resolved paths never hold `..`).
    pub(super) fn walk(start: &Path, relative: &Path) -> io::Result<Self> {
        let dir = pin_dir(start)?;
        let mut pinned = Self {
            path: start.to_owned(),
            real: crate::util::canonical(start)?,
            dirs: vec![Arc::new(dir)],
        };
        for component in relative.components() {
            match component {
                Component::Normal(name) => pinned = pinned.child(name)?,
                Component::CurDir => {}
                _ => return Err(io::Error::from(io::ErrorKind::InvalidInput)),
            }
        }
        Ok(pinned)
    }

    /// The folder `name` in this one, pinned as well.
    pub(super) fn child(&self, name: &OsStr) -> io::Result<Self> {
        let path = self.path.join(name);
        let dir = pin_dir(&path)?;
        let real = beside(&self.real, &path)?;
        let mut dirs = self.dirs.clone();
        dirs.push(Arc::new(dir));
        Ok(Self { path, real, dirs })
    }

    /// The pinned folder's path.
    pub(super) fn path(&self) -> &Path {
        &self.path
    }
}

/// Opens `name` in a pinned folder as itself, with `options` (to which the no-follow flag is
/// added); refused if it is a reparse point, or a link the system did not report.
pub(super) fn open_in(dir: &Pinned, name: &OsStr, options: &mut OpenOptions) -> io::Result<File> {
    let path = dir.path().join(name);
    let file = options
        .custom_flags(FILE_FLAG_BACKUP_SEMANTICS | FILE_FLAG_OPEN_REPARSE_POINT)
        .open(&path)?;
    if file.metadata()?.file_attributes() & FILE_ATTRIBUTE_REPARSE_POINT != 0 {
        return Err(reparse_point());
    }
    beside(&dir.real, &path)?;
    Ok(file)
}

/// Whether `meta` (read without following) is a symbolic link, junction or other reparse
/// point.
pub(super) fn is_reparse_point(meta: &std::fs::Metadata) -> bool {
    meta.file_attributes() & FILE_ATTRIBUTE_REPARSE_POINT != 0
}

impl Root {
    /// The handle a root keeps for as long as gimlet runs: shared with deletion, so that the
    /// user can still rename or remove the folder; each open pins it again for its duration.
    pub(super) fn open_handle(path: &Path) -> Result<File, PathError> {
        let handle = OpenOptions::new()
            .access_mode(FILE_READ_ATTRIBUTES)
            .share_mode(FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE)
            .custom_flags(FILE_FLAG_BACKUP_SEMANTICS)
            .open(path)
            .map_err(|e| PathError::io(path, e))?;
        let meta = handle.metadata().map_err(|e| PathError::io(path, e))?;
        if !meta.is_dir() {
            return Err(PathError::NotADirectory {
                path: path.display().to_string(),
            });
        }
        Ok(handle)
    }
}

/// Windows decides every path by the walk.
#[expect(clippy::unnecessary_wraps, reason = "the Unix version can fail")]
pub(super) fn resolve_plain(_set: &RootSet, _given: &Path) -> Result<Option<PathBuf>, PathError> {
    Ok(None)
}

/// There is no cache-only lookup on Windows: nothing to check.
#[expect(clippy::unnecessary_wraps, reason = "the Unix version can fail")]
pub(super) fn check_cached(_base: &Root, _given: &Path) -> Result<(), PathError> {
    Ok(())
}

/// `candidate` as the file system spells it: names on Windows volumes ignore case, and a
/// folder may also be named by its short 8.3 name (`PROGRA~1`). The real path of a name that is
/// no reparse point, in a folder already resolved, is that folder joined with the name as
/// stored. A real path in another folder than the parent's own real one means a link that
/// Windows did not report as a reparse point (a Unix symlink seen through Wine, a link an SMB
/// server follows itself): refused, since the open would follow it too.
pub(super) fn as_stored(parent: &Path, candidate: PathBuf) -> Result<PathBuf, PathError> {
    let Ok(real) = crate::util::canonical(&candidate) else {
        return Ok(candidate);
    };
    if real.parent() == Some(parent) {
        return Ok(real);
    }
    let Some(name) = real.file_name() else {
        return Ok(candidate);
    };
    // The parent spelled otherwise (a `subst` or mapped drive): compare real with real.
    match crate::util::canonical(parent) {
        Ok(real_parent) if real.parent() == Some(real_parent.as_path()) => Ok(parent.join(name)),
        Ok(_) => Err(PathError::UnreportedLink {
            path: candidate.display().to_string(),
            target: real.display().to_string(),
        }),
        Err(_) => Ok(candidate),
    }
}

/// The names in the folder `relative` beneath `root` (at most `limit`).
pub(super) fn names_beneath(
    root: &Root,
    relative: &Path,
    limit: usize,
) -> io::Result<Vec<OsString>> {
    let dir = Pinned::walk(root.path(), relative)?;
    Ok(std::fs::read_dir(dir.path())?
        .filter_map(Result::ok)
        .map(|entry| entry.file_name())
        .take(limit)
        .collect())
}

/// Where a resolved path's folders are pinned from, and the names below it: its root and
/// its path relative to it; for a path outside the roots (approved), its drive or share.
fn start_of(resolved: &ResolvedPath) -> (PathBuf, PathBuf) {
    match &resolved.location {
        Location::Inside { root, relative, .. } => (root.path().to_owned(), relative.clone()),
        Location::Outside => {
            let anchor: PathBuf = resolved
                .path
                .components()
                .take_while(|c| matches!(c, Component::Prefix(_) | Component::RootDir))
                .collect();
            let rest = resolved
                .path
                .strip_prefix(&anchor)
                .unwrap_or(&resolved.path)
                .to_owned();
            (anchor, rest)
        }
    }
}

impl ResolvedPath {
    /// The folder holding this path, pinned, and the final name.
    pub(super) fn pin_parent(&self) -> Result<(Pinned, OsString), PathError> {
        let (start, relative) = start_of(self);
        let name = relative
            .file_name()
            .ok_or_else(|| PathError::IsADirectory {
                path: self.display(),
                hint: "",
            })?
            .to_owned();
        let parent = relative.parent().unwrap_or(Path::new(""));
        let pinned = Pinned::walk(&start, parent).map_err(|e| self.map_io_error(e))?;
        Ok((pinned, name))
    }

    /// Opens the path: every folder on the way pinned, the last name opened as itself.
    pub fn open(&self, kind: OpenKind) -> Result<File, PathError> {
        match kind {
            OpenKind::ReadFile => self.open_regular().map(|(file, _)| file),
            OpenKind::Directory => {
                let (start, relative) = start_of(self);
                let pinned = Pinned::walk(&start, &relative).map_err(|e| self.map_io_error(e))?;
                OpenOptions::new()
                    .read(true)
                    .custom_flags(FILE_FLAG_BACKUP_SEMANTICS)
                    .open(pinned.path())
                    .map_err(|e| self.map_io_error(e))
            }
            OpenKind::Handle => {
                let (start, relative) = start_of(self);
                if relative.as_os_str().is_empty() {
                    return Pinned::walk(&start, Path::new(""))
                        .and_then(|p| File::open(p.path()).or_else(|_| pin_dir(p.path())))
                        .map_err(|e| self.map_io_error(e));
                }
                let (dir, name) = self.pin_parent()?;
                open_in(
                    &dir,
                    &name,
                    OpenOptions::new().access_mode(FILE_READ_ATTRIBUTES),
                )
                .map_err(|e| self.map_io_error(e))
            }
        }
    }

    /// Opens the directory a tool was pointed at; when it does not exist, the error names
    /// similar entries beside it.
    pub fn open_existing_dir(&self) -> Result<File, PathError> {
        self.open(OpenKind::Directory)
            .map_err(|err| self.with_similar_names(err))
    }

    /// Opens a regular file for reading and returns it with its metadata.
    pub fn open_regular(&self) -> Result<(File, std::fs::Metadata), PathError> {
        let (dir, name) = self.pin_parent()?;
        let file = open_in(&dir, &name, OpenOptions::new().read(true))
            .map_err(|e| self.map_io_error(e))?;
        let meta = file.metadata().map_err(|e| PathError::io(&self.path, e))?;
        if meta.is_file() {
            return Ok((file, meta));
        }
        if meta.is_dir() {
            return Err(PathError::IsADirectory {
                path: self.display(),
                hint: "; use `ls` to list it",
            });
        }
        Err(PathError::NotRegular {
            path: self.display(),
            kind: "special file",
        })
    }

    /// Opens `rel` below this folder for reading (the caller checks the type).
    pub fn open_child_read(&self, rel: &Path) -> io::Result<File> {
        let (dir, name) = self.pin_child_parent(rel)?;
        open_in(&dir, &name, OpenOptions::new().read(true))
    }

    /// The metadata of `rel` below this folder, not following a final link.
    pub fn child_metadata(&self, rel: &Path) -> io::Result<std::fs::Metadata> {
        let (dir, name) = self.pin_child_parent(rel)?;
        std::fs::symlink_metadata(dir.path().join(name))
    }

    fn pin_child_parent(&self, rel: &Path) -> io::Result<(Pinned, OsString)> {
        let (start, relative) = start_of(self);
        let full = relative.join(rel);
        let name = full
            .file_name()
            .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?
            .to_owned();
        let dir = Pinned::walk(&start, full.parent().unwrap_or(Path::new("")))?;
        Ok((dir, name))
    }

    /// Maps an error from opening this path to a [`PathError`] that says what to do.
    pub(super) fn map_io_error(&self, err: io::Error) -> PathError {
        if is_reparse_error(&err) {
            return PathError::Changed {
                path: self.display(),
            };
        }
        match err.kind() {
            io::ErrorKind::NotFound => PathError::NotFound {
                path: self.display(),
                hint: String::new(),
            },
            io::ErrorKind::NotADirectory => PathError::NotADirectory {
                path: self.display(),
            },
            _ if err.raw_os_error() == Some(ERROR_DIRECTORY) => PathError::NotADirectory {
                path: self.display(),
            },
            io::ErrorKind::IsADirectory => PathError::IsADirectory {
                path: self.display(),
                hint: "",
            },
            _ => PathError::io(&self.path, err),
        }
    }
}

/// What a folder entry is, as a listing tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// A folder.
    Dir,
    /// A regular file.
    File,
    /// A symbolic link or junction (never followed).
    Symlink,
    /// Anything else.
    Other,
}

/// An open folder that listings walk from, pinned with every folder above it up to where the
/// walk started, so that a walk beneath a root stays there whatever is swapped meanwhile.
#[derive(Debug)]
pub struct DirHandle {
    pinned: Pinned,
}

impl DirHandle {
    /// The folder `resolved`, which [`ResolvedPath::open_existing_dir`] opened as `dir`:
    /// pinned again, from its root down.
    pub fn from_file(dir: File, resolved: &ResolvedPath) -> Self {
        drop(dir);
        let (start, relative) = start_of(resolved);
        let pinned = Pinned::walk(&start, &relative).unwrap_or_else(|_| Pinned {
            path: resolved.path.clone(),
            real: resolved.path.clone(),
            dirs: Vec::new(),
        });
        Self { pinned }
    }

    /// The folder `relative` beneath `root`, or `None`.
    pub fn beneath(root: &Root, relative: &Path) -> Option<Self> {
        Pinned::walk(root.path(), relative)
            .ok()
            .map(|pinned| Self { pinned })
    }

    /// The folder `name` in this one, unless it is a link or no folder.
    pub fn subdir(&self, name: &OsStr) -> Option<Self> {
        self.pinned.child(name).ok().map(|pinned| Self { pinned })
    }

    /// The entries, each with its kind.
    pub fn entries(&self) -> io::Result<impl Iterator<Item = (OsString, EntryKind)> + '_> {
        Ok(std::fs::read_dir(self.pinned.path())?
            .filter_map(Result::ok)
            .map(|entry| {
                let kind = match entry.file_type() {
                    Ok(t) if t.is_symlink() => EntryKind::Symlink,
                    Ok(t) if t.is_dir() => EntryKind::Dir,
                    Ok(t) if t.is_file() => EntryKind::File,
                    _ => EntryKind::Other,
                };
                (entry.file_name(), kind)
            }))
    }

    /// The text of the regular file `name` in this folder, if it is one of at most `max`
    /// bytes (no link followed).
    pub fn read_small(&self, name: &OsStr, max: u64) -> Option<String> {
        let mut file = open_in(&self.pinned, name, OpenOptions::new().read(true)).ok()?;
        let meta = file.metadata().ok()?;
        if !meta.is_file() || meta.len() > max {
            return None;
        }
        let mut text = String::new();
        io::Read::read_to_string(&mut file, &mut text).ok()?;
        Some(text)
    }
}
