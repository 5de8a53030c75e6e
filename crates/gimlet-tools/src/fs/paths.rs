//! Roots and path confinement: the one module that turns a path argument into something a
//! tool may open.
//!
//! Two steps, and the second cannot be raced:
//! 1. [`RootSet::resolve`] walks the path component by component, following symlinks by
//!    reading them (never by string tricks), and decides containment on the resolved path with
//!    [`Path::starts_with`], which compares whole components (`/ws-evil` is not inside `/ws`).
//!    A path of plain names beneath a root with no symlink on the way is decided by the kernel
//!    instead, in one `openat2(O_PATH, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` from the root's
//!    handle, with the same answer.
//! 2. [`ResolvedPath`] is then opened *relative to the root's directory handle* by its
//!    resolved, symlink-free relative path with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
//!    RESOLVE_NO_MAGICLINKS)` (or, where `openat2` is missing, one `openat(O_NOFOLLOW)` per
//!    component). If anything was swapped for a symlink between the two steps, the open fails
//!    with [`PathError::Changed`]; it never lands outside the root.

use std::ffi::{OsStr, OsString};
#[cfg(windows)]
use std::fs::File;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use super::NameMatching;

/// Longest path argument accepted, in bytes (Linux `PATH_MAX`).
pub const MAX_PATH_BYTES: usize = 4096;
/// Longest single component, in bytes (Linux `NAME_MAX`).
pub const MAX_COMPONENT_BYTES: usize = 255;
/// Whether `path` is in gimlet's own `/proc` entries: `/proc/self`, `/proc/thread-self`, or
/// `/proc/<N>` where `N` is this process or one of its threads. They hold the server's
/// environment (API keys, the HTTP token), its memory and its open files: no tool opens
/// them, whatever the user approves. Other processes' entries are ordinary paths outside the
/// roots.
pub(super) fn own_process_entry(path: &Path) -> bool {
    let mut components = path.components();
    if components.next() != Some(Component::RootDir)
        || components.next() != Some(Component::Normal(OsStr::new("proc")))
    {
        return false;
    }
    let Some(Component::Normal(entry)) = components.next() else {
        return false;
    };
    if entry == "self" || entry == "thread-self" {
        return true;
    }
    let Some(number) = entry
        .to_str()
        .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
    else {
        return false;
    };
    // A thread of this process has an entry in its task list.
    number.parse::<u32>().ok() == Some(std::process::id())
        || Path::new("/proc/self/task").join(number).exists()
}

/// Symlinks followed while resolving one path before it counts as a loop (as Linux `ELOOP`).
const MAX_SYMLINK_HOPS: usize = 40;

/// Why a path argument was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PathError {
    /// The path is empty.
    #[error("the path is empty; pass a file path, absolute or relative to the first root")]
    Empty,
    /// The path contains a NUL byte.
    #[error("the path contains a NUL byte; remove it")]
    ContainsNul,
    /// The path is longer than the system allows.
    #[error("the path is {len} bytes long; paths may be at most {MAX_PATH_BYTES} bytes")]
    TooLong {
        /// Its length in bytes.
        len: usize,
    },
    /// One component is longer than the system allows.
    #[error(
        "a path component is {len} bytes long; components may be at most {MAX_COMPONENT_BYTES} bytes"
    )]
    ComponentTooLong {
        /// Its length in bytes.
        len: usize,
    },
    /// Symlinks form a loop.
    #[error("`{path}` is a symlink loop (more than {MAX_SYMLINK_HOPS} links followed)")]
    SymlinkLoop {
        /// Where the loop was detected.
        path: String,
    },
    /// The path is one of gimlet's own `/proc` entries: `/proc/self`, `/proc/thread-self`, `/proc/<its pid or a thread id>`.
    #[error(
        "`{path}` is one of gimlet's own /proc entries (its environment, memory and files), \
         which no tool opens"
    )]
    OwnProcess {
        /// The path.
        path: String,
    },
    /// The path goes through a `/proc` magic link (e.g. `/proc/self/root`).
    #[error(
        "`{path}` goes through a /proc magic link, which gimlet never follows; use the real path"
    )]
    MagicLink {
        /// The link.
        path: String,
    },
    /// A Windows path into a device or object namespace (`\\?\GLOBALROOT\...`, `\\.\...`),
    /// where no root can be.
    #[error(
        "`{path}` names a device or an object namespace, not a file on a drive or a share; \
         use a path such as `C:\\...` or `\\\\server\\share\\...`"
    )]
    DeviceNamespace {
        /// The path as given.
        path: String,
    },
    /// A name that the system does not report as a link leads elsewhere (Windows: a Unix
    /// symlink seen through Wine, or a link a file server follows itself).
    #[error(
        "`{path}` leads to `{target}` through a link the system does not report as one (a \
         symbolic link a file server or Wine follows itself); gimlet does not follow it: use \
         the real path"
    )]
    UnreportedLink {
        /// The name that leads elsewhere.
        path: String,
        /// Where it leads.
        target: String,
    },
    /// Nothing exists at the path.
    #[error("`{path}` does not exist{hint}")]
    NotFound {
        /// The path as given.
        path: String,
        /// A suggestion, e.g. similarly named entries.
        hint: String,
    },
    /// The path is outside every root, and the call was not approved for it.
    #[error("`{path}` is outside the allowed folders ({roots}); use a path inside them")]
    OutsideRoots {
        /// The resolved path.
        path: String,
        /// The roots, for the message.
        roots: String,
    },
    /// The file system changed under the call (a component became a symlink).
    #[error(
        "`{path}` changed while it was being opened (a symlink appeared in it); retry the call"
    )]
    Changed {
        /// The path.
        path: String,
    },
    /// A component that should be a directory is not.
    #[error("`{path}` is not a directory")]
    NotADirectory {
        /// The path.
        path: String,
    },
    /// A file was expected, a directory was found.
    #[error("`{path}` is a directory{hint}")]
    IsADirectory {
        /// The path.
        path: String,
        /// What to do instead, e.g. "; use `ls` to list it".
        hint: &'static str,
    },
    /// A regular file was expected, something else was found.
    #[error("`{path}` is a {kind}, not a regular file; gimlet only reads and writes regular files")]
    NotRegular {
        /// The path.
        path: String,
        /// `FIFO`, `socket`, `device` ...
        kind: &'static str,
    },
    /// Any other error from the file system.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: String,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// No root is configured, and the client named none.
    #[error(
        "gimlet has no root folder, so it works on no files: it was started without `--root` \
         and the MCP client named no roots. Tell the user to add `\"--root\", \"/path/to/project\"` \
         to gimlet's `args` in the client's MCP config and restart the client: Claude Desktop \
         `claude_desktop_config.json` (Settings > Developer > Edit Config), Claude Code \
         `claude mcp add gimlet -- gimlet serve --root \"$PWD\"` (or `.mcp.json`), Codex \
         `~/.codex/config.toml` (`args` of `[mcp_servers.gimlet]`), VS Code `.vscode/mcp.json`, \
         Cursor `.cursor/mcp.json`"
    )]
    NoRoots,
}

impl PathError {
    pub(super) fn io(path: &Path, source: io::Error) -> Self {
        Self::Io {
            path: path.display().to_string(),
            source,
        }
    }
}

/// The root gimlet takes when none is given and the client names none: the working directory,
/// unless it is machine-wide. `/`, the home directory and any folder above it are never taken
/// implicitly (Claude Desktop starts servers in `/`, the Claude Code desktop app in the home
/// directory): a root there would open every file of the user to the tools without a question.
pub fn implicit_root(cwd: &Path, home: Option<&Path>) -> Option<PathBuf> {
    let cwd = std::fs::canonicalize(cwd).unwrap_or_else(|_| cwd.to_owned());
    // `/` has no parent: never a root by accident.
    cwd.parent()?;
    if let Some(home) = home {
        let home = std::fs::canonicalize(home).unwrap_or_else(|_| home.to_owned());
        if home.starts_with(&cwd) {
            return None;
        }
    }
    Some(cwd)
}

/// [`implicit_root`] of this process: its working directory and its user's home directory.
pub fn implicit_root_here() -> Option<PathBuf> {
    let cwd = std::env::current_dir().ok()?;
    implicit_root(&cwd, dirs::home_dir().as_deref())
}

/// A folder the server may work in, with a handle that paths are opened beneath.
#[derive(Debug)]
pub struct Root {
    path: PathBuf,
    /// A handle on the folder: what paths are opened beneath on Unix; on Windows it keeps the
    /// folder from being renamed or replaced while gimlet runs.
    #[cfg(unix)]
    pub(super) handle: std::os::fd::OwnedFd,
    #[cfg(windows)]
    #[expect(
        dead_code,
        reason = "held for what it keeps from happening, never read"
    )]
    pub(super) handle: File,
}

impl Root {
    /// Opens a root: resolves the path (it must be an existing directory) and keeps a handle.
    pub fn open(path: &Path) -> Result<Self, PathError> {
        let path = crate::util::canonical(path).map_err(|source| match source.kind() {
            io::ErrorKind::NotFound => PathError::NotFound {
                path: path.display().to_string(),
                hint: String::new(),
            },
            _ => PathError::io(path, source),
        })?;
        let handle = Self::open_handle(&path)?;
        Ok(Self { path, handle })
    }

    /// The resolved absolute path of the root.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The roots of one call: the `--root` folders and, later, the client's roots.
#[derive(Debug, Clone, Default)]
pub struct RootSet {
    roots: Vec<Arc<Root>>,
    /// How names compare where a path's typed tail does not exist ([`RootSet::locate`]).
    matching: NameMatching,
}

impl RootSet {
    /// A set of opened roots; the first is where relative paths start.
    pub fn new(roots: Vec<Arc<Root>>) -> Self {
        Self {
            roots,
            matching: NameMatching::native(),
        }
    }

    /// The same roots, a path's names compared with theirs as `matching` says (default: this
    /// system's, [`NameMatching::native`]).
    #[must_use]
    pub fn with_name_matching(mut self, matching: NameMatching) -> Self {
        self.matching = matching;
        self
    }

    /// How a path's names are compared with the roots'.
    pub fn name_matching(&self) -> NameMatching {
        self.matching
    }

    /// The same name matching, no roots.
    #[must_use]
    pub fn emptied(&self) -> Self {
        Self::default().with_name_matching(self.matching)
    }

    /// Opens each path as a root. Duplicates (after resolution) are dropped.
    pub fn open<P: AsRef<Path>>(paths: impl IntoIterator<Item = P>) -> Result<Self, PathError> {
        let mut set = Self::default();
        for path in paths {
            set.push(Arc::new(Root::open(path.as_ref())?));
        }
        Ok(set)
    }

    /// Adds a root unless one with the same path is there.
    pub fn push(&mut self, root: Arc<Root>) {
        if !self.roots.iter().any(|r| r.path == root.path) {
            self.roots.push(root);
        }
    }

    /// The roots, the first being the default.
    pub fn roots(&self) -> &[Arc<Root>] {
        &self.roots
    }

    /// The first root, where relative paths start.
    pub fn first(&self) -> Option<&Arc<Root>> {
        self.roots.first()
    }

    /// The roots as one string, for messages.
    pub fn describe(&self) -> String {
        let names: Vec<String> = self
            .roots
            .iter()
            .map(|r| r.path.display().to_string())
            .collect();
        names.join(", ")
    }

    /// Resolves a path argument: checks it, follows symlinks, and says where it lands.
    /// Blocking: call it from `spawn_blocking`.
    pub fn resolve(&self, input: &str) -> Result<ResolvedPath, PathError> {
        check_argument(input)?;
        let first = self.first().ok_or(PathError::NoRoots)?;
        let given = Path::new(input);
        let expanded;
        let home_relative = input
            .strip_prefix("~/")
            .or_else(|| cfg!(windows).then(|| input.strip_prefix("~\\")).flatten());
        let given = if let Some(rest) = home_relative {
            expanded = dirs::home_dir().unwrap_or_default().join(rest);
            expanded.as_path()
        } else {
            given
        };
        if let Some(resolved) = super::confine::resolve_plain(self, given)? {
            return Ok(self.locate(input, resolved, 0));
        }
        super::confine::check_cached(first, given)?;
        let (resolved, missing) =
            resolve_components(first.path(), given).map_err(|err| match err {
                // Said as the caller writes paths: relative to the first root when inside it.
                PathError::NotADirectory { path } => PathError::NotADirectory {
                    path: self.display(Path::new(&path)),
                },
                other => other,
            })?;
        if own_process_entry(&resolved) {
            return Err(PathError::OwnProcess {
                path: resolved.display().to_string(),
            });
        }
        Ok(self.locate(input, resolved, missing))
    }

    /// Where an already resolved absolute path lies, its last `missing` names not existing
    /// (0: it exists). What exists is spelled as stored ([`RootSet::resolve`] asks the file
    /// system), so it is compared with the roots name for name, as [`Path::starts_with`]
    /// does. The names past it are as the caller typed them: where a root's own names fall
    /// among those, they are compared as the file system compares names ([`NameMatching`];
    /// on macOS and Windows `/USERS/me/proj/new` is in the root `/Users/me/Proj`), and the
    /// path is then spelled as its root is.
    pub fn locate(&self, input: &str, resolved: PathBuf, missing: usize) -> ResolvedPath {
        let mut resolved = resolved;
        let found = match self.root_of(&resolved) {
            Some(root) => {
                let relative = resolved
                    .strip_prefix(&root.path)
                    .unwrap_or(Path::new(""))
                    .to_owned();
                Some((root, relative))
            }
            None => self
                .root_of_typed(&resolved, missing)
                .inspect(|(root, relative)| {
                    resolved = root.path.join(relative);
                }),
        };
        let location = match found {
            Some((root, relative)) => {
                let is_first = self.first().is_some_and(|f| Arc::ptr_eq(f, root));
                Location::Inside {
                    root: Arc::clone(root),
                    relative,
                    is_first,
                }
            }
            None => Location::Outside,
        };
        ResolvedPath {
            input: input.to_owned(),
            path: resolved,
            exists: missing == 0,
            location,
        }
    }

    /// The root an absolute path lies in, by its components; the most specific one when roots
    /// nest.
    pub(super) fn root_of(&self, path: &Path) -> Option<&Arc<Root>> {
        self.roots
            .iter()
            .filter(|r| path.starts_with(&r.path))
            .max_by_key(|r| r.path.components().count())
    }

    /// The root whose names reach into the last `missing` names of `path` (typed, not found),
    /// those compared as the file system compares names and the ones before them exactly;
    /// with the path below it. `None` where names are exact or nothing is missing.
    fn root_of_typed(&self, path: &Path, missing: usize) -> Option<(&Arc<Root>, PathBuf)> {
        if !self.matching.folds() || missing == 0 {
            return None;
        }
        let existing = path.components().count().saturating_sub(missing);
        self.roots
            .iter()
            .filter_map(|root| {
                let mut given = path.components();
                let mut names = root.path.components();
                for _ in 0..existing {
                    // A root that ends in what exists was decided name for name.
                    if names.next()? != given.next()? {
                        return None;
                    }
                }
                let below = self
                    .matching
                    .strip_prefix(given.as_path(), names.as_path())?;
                Some((root, below.to_owned()))
            })
            .max_by_key(|(root, _)| root.path.components().count())
    }

    /// Whether an absolute, resolved path lies inside one of the roots.
    pub fn contains(&self, resolved: &Path) -> bool {
        self.roots.iter().any(|r| resolved.starts_with(&r.path))
    }

    /// The path as shown to the model: relative to the first root, absolute elsewhere.
    pub fn display(&self, resolved: &Path) -> String {
        match self.first() {
            Some(first) if resolved.starts_with(&first.path) => {
                let rel = resolved.strip_prefix(&first.path).unwrap_or(resolved);
                if rel.as_os_str().is_empty() {
                    String::from(".")
                } else {
                    rel.display().to_string()
                }
            }
            _ => resolved.display().to_string(),
        }
    }
}

fn check_argument(input: &str) -> Result<(), PathError> {
    if input.is_empty() {
        return Err(PathError::Empty);
    }
    if input.contains('\0') {
        return Err(PathError::ContainsNul);
    }
    if input.len() > MAX_PATH_BYTES {
        return Err(PathError::TooLong { len: input.len() });
    }
    // Only Windows parses a prefix; `\\?\C:\` and `\\?\UNC\` are drives and shares, and stay.
    if let Some(Component::Prefix(prefix)) = Path::new(input).components().next()
        && matches!(
            prefix.kind(),
            std::path::Prefix::Verbatim(_) | std::path::Prefix::DeviceNS(_)
        )
    {
        return Err(PathError::DeviceNamespace {
            path: input.to_owned(),
        });
    }
    if let Some(long) = Path::new(input).components().find_map(|c| match c {
        Component::Normal(name) if name.len() > MAX_COMPONENT_BYTES => Some(name.len()),
        _ => None,
    }) {
        return Err(PathError::ComponentTooLong { len: long });
    }
    Ok(())
}

/// Resolves `given` (absolute, or relative to `base`) to an absolute path without symlinks in
/// its existing part. Components after the first missing one are appended as written (with
/// `..` applied lexically). Returns the path and how many names at its end do not exist (0:
/// it exists).
fn resolve_components(base: &Path, given: &Path) -> Result<(PathBuf, usize), PathError> {
    let mut pending: Vec<OsString> = Vec::new();
    let mut current = start(base, given);
    push_components(&mut pending, given);
    let mut exists = true;
    // Components appended as written after the first missing one: `..` over all of them
    // returns to resolved ground, where symlinks must be followed again (`gone/../link`).
    let mut missing = 0usize;
    let mut hops = 0;
    // `pending` is a stack: the next component is at the end.
    while let Some(component) = pending.pop() {
        if component == ".." {
            current.pop();
            if !exists {
                missing -= 1;
                exists = missing == 0;
            }
            continue;
        }
        let candidate = current.join(&component);
        if !exists {
            missing += 1;
            current = candidate;
            continue;
        }
        match std::fs::symlink_metadata(&candidate) {
            Ok(meta) if meta.file_type().is_symlink() => {
                if current.starts_with("/proc") {
                    return Err(PathError::MagicLink {
                        path: candidate.display().to_string(),
                    });
                }
                hops += 1;
                if hops > MAX_SYMLINK_HOPS {
                    return Err(PathError::SymlinkLoop {
                        path: candidate.display().to_string(),
                    });
                }
                let target = std::fs::read_link(&candidate)
                    .map_err(|source| PathError::io(&candidate, source))?;
                current = start(&current, &target);
                push_components(&mut pending, &target);
            }
            Ok(meta) => {
                if !meta.is_dir() && !pending.is_empty() && pending.iter().any(|c| c != "..") {
                    return Err(PathError::NotADirectory {
                        path: candidate.display().to_string(),
                    });
                }
                // As the file system spells it: on a volume that ignores case (macOS's
                // default, Windows) `.GIT` is `.git`, and the rules and the protected list
                // must see `.git`.
                current = super::confine::as_stored(&current, candidate)?;
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                exists = false;
                missing = 1;
                current = candidate;
            }
            Err(e) if e.kind() == io::ErrorKind::NotADirectory => {
                return Err(PathError::NotADirectory {
                    path: current.display().to_string(),
                });
            }
            Err(e) if e.kind() == io::ErrorKind::InvalidFilename => {
                return Err(PathError::TooLong {
                    len: candidate.as_os_str().len(),
                });
            }
            Err(source) => return Err(PathError::io(&candidate, source)),
        }
    }
    Ok((current, missing))
}

/// Where the walk of `given` starts: `base` for a relative path; the root of an absolute one
/// (`/`; on Windows its drive or share, `C:\\` or `\\\\server\\share\\`); on Windows, the root of
/// `base`'s drive for a path that names the root but no drive (`\\Windows`), and the root of
/// the drive it names for one that names a drive only (`D:x`).
fn start(base: &Path, given: &Path) -> PathBuf {
    let anchor = |path: &Path| -> PathBuf {
        let mut anchor: PathBuf = path
            .components()
            .take_while(|c| matches!(c, Component::Prefix(_) | Component::RootDir))
            .collect();
        if !anchor.has_root() {
            anchor.push(std::path::MAIN_SEPARATOR_STR);
        }
        anchor
    };
    if given.is_absolute() {
        return anchor(given);
    }
    match given.components().next() {
        Some(Component::Prefix(_)) => anchor(given),
        Some(Component::RootDir) => anchor(base),
        _ => base.to_owned(),
    }
}

/// Pushes the components of `path` onto the stack so that the first is popped first.
fn push_components(stack: &mut Vec<OsString>, path: &Path) {
    let parts: Vec<OsString> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(name.to_owned()),
            Component::ParentDir => Some(OsString::from("..")),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
        })
        .collect();
    stack.extend(parts.into_iter().rev());
}

/// Where a resolved path lies.
#[derive(Debug, Clone)]
pub enum Location {
    /// Inside a root.
    Inside {
        /// The root.
        root: Arc<Root>,
        /// The path relative to the root, without symlinks; empty for the root itself.
        relative: PathBuf,
        /// The root is the first one (relative paths start there).
        is_first: bool,
    },
    /// Outside every root.
    Outside,
}

/// A path argument after [`RootSet::resolve`].
#[derive(Debug, Clone)]
pub struct ResolvedPath {
    /// The argument as given.
    pub input: String,
    /// The resolved absolute path.
    pub path: PathBuf,
    /// Something existed at the path when it was resolved.
    pub exists: bool,
    /// Where it lies.
    pub location: Location,
}

/// What [`ResolvedPath::open`] should open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenKind {
    /// A regular file, for reading. FIFOs, sockets and devices are refused without blocking.
    ReadFile,
    /// A directory, for listing.
    Directory,
    /// A path-only handle to anything (for `stat` and as a base for `*at` calls).
    Handle,
}

impl ResolvedPath {
    /// Whether the path lies inside a root.
    pub fn is_inside(&self) -> bool {
        matches!(self.location, Location::Inside { .. })
    }

    /// The path relative to its root, if inside one.
    pub fn relative(&self) -> Option<&Path> {
        match &self.location {
            Location::Inside { relative, .. } => Some(relative),
            Location::Outside => None,
        }
    }

    /// The entry `name` in this folder, as itself: a symbolic link there is not followed (for
    /// changes that put back or replace a link).
    #[must_use]
    pub fn entry(&self, name: &std::ffi::OsStr) -> ResolvedPath {
        let path = self.path.join(name);
        let location = match &self.location {
            Location::Inside {
                root,
                relative,
                is_first,
            } => Location::Inside {
                root: Arc::clone(root),
                relative: relative.join(name),
                is_first: *is_first,
            },
            Location::Outside => Location::Outside,
        };
        ResolvedPath {
            input: path.display().to_string(),
            exists: std::fs::symlink_metadata(&path).is_ok(),
            path,
            location,
        }
    }

    /// The path as shown to the model: relative to the first root, absolute elsewhere (a
    /// relative path would not name the same file when given back).
    pub fn display(&self) -> String {
        match &self.location {
            Location::Inside {
                relative,
                is_first: true,
                ..
            } if relative.as_os_str().is_empty() => String::from("."),
            Location::Inside {
                relative,
                is_first: true,
                ..
            } => relative.display().to_string(),
            Location::Inside { .. } | Location::Outside => self.path.display().to_string(),
        }
    }
}

#[cfg(test)]
#[path = "paths_tests.rs"]
mod tests;
