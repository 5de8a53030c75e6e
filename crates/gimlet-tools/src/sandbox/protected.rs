//! The protected list: what under a root makes git, an editor, an agent, a package manager or a
//! shell run code later, outside any sandbox.
//!
//! A hostile repository (or a model following its instructions) that can write such a file
//! gets its code run the next time the user runs `git status`, opens the folder in an editor,
//! starts an agent, or opens a shell there. So these files are:
//! - read-only to sandboxed commands (bind-mounted read-only in the command's mount
//!   namespace; `.git` itself is a mount point, so it cannot be renamed or replaced), and
//!   removed after a command that created one that did not exist;
//! - changed by the file tools only after the user said yes ([`Protected::matches`] is the
//!   policy's check, [`crate::Policy::is_protected`]).
//!
//! One list serves both. It is extended by the config file (`[sandbox] protected = [...]`, a
//! project's `.gimlet.toml` included: more protection only tightens).
//!
//! Where each entry applies ([`Place`]): at the top of every root and of every repository's
//! working tree found below it ([`Place::Top`]), or inside every git directory: a working
//! tree's `.git`, a linked worktree's private directory, a submodule's directory under
//! `.git/modules` ([`Place::GitDir`]). The file tools match the top-level names at any depth.
//!
//! Names are compared as the file system compares them ([`NameMatching`]): on macOS and
//! Windows `.GIT/HOOKS/pre-commit` and `.Vscode/settings.json` are protected as their
//! lower-case spellings are, since they name the same files; on Linux they are other names.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use globset::{Glob, GlobSet, GlobSetBuilder};

use crate::fs::NameMatching;
use crate::util::MutexExt as _;

/// Where a protected entry applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// At the top of each root and of each repository's working tree.
    Top,
    /// Inside each git directory.
    GitDir,
}

/// One protected entry: a path relative to its [`Place`], and why it is protected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// The relative path (`.mcp.json`, `hooks`, `info/attributes`).
    pub path: &'static str,
    /// Where it applies.
    pub place: Place,
    /// What runs it, for the documentation.
    pub why: &'static str,
}

const fn top(path: &'static str, why: &'static str) -> Entry {
    Entry {
        path,
        place: Place::Top,
        why,
    }
}

const fn git(path: &'static str, why: &'static str) -> Entry {
    Entry {
        path,
        place: Place::GitDir,
        why,
    }
}

/// The built-in list. `docs/security.md` shows it.
pub const BUILTIN: &[Entry] = &[
    git(
        "config",
        "git: core.fsmonitor, core.hooksPath, aliases, filters, pagers run commands",
    ),
    git(
        "config.worktree",
        "git: per-worktree configuration, as `config`",
    ),
    git("hooks", "git: hooks run on commit, checkout, merge, push"),
    git(
        "commondir",
        "git: redirects the configuration and hooks to another directory",
    ),
    git(
        "gitdir",
        "git: a linked worktree's way back to its working tree",
    ),
    git("info/attributes", "git: selects filter and diff drivers"),
    git(
        "objects/info/alternates",
        "git: redirects object lookups to other repositories",
    ),
    top(
        ".gitmodules",
        "git: submodule URLs and paths used by `git submodule`",
    ),
    top(
        ".gitattributes",
        "git: selects filter and diff drivers (checkout, diff, add)",
    ),
    top(".githooks", "git: the usual target of core.hooksPath"),
    top(".husky", "hook manager: runs on every commit"),
    top(".pre-commit-config.yaml", "hook manager: pre-commit"),
    top(".lefthook.yml", "hook manager: lefthook"),
    top("lefthook.yml", "hook manager: lefthook"),
    top(".mcp.json", "agents: project MCP servers (Claude Code)"),
    top(
        ".claude",
        "agents: Claude Code settings, hooks, MCP servers",
    ),
    top(".cursor", "agents: Cursor rules and MCP servers"),
    top(".codex", "agents: Codex configuration"),
    top(".gemini", "agents: Gemini CLI settings and MCP servers"),
    top(
        ".vscode",
        "editors: VS Code tasks, settings, launch configurations",
    ),
    top(".idea", "editors: JetBrains run configurations"),
    top(".zed", "editors: Zed tasks and settings"),
    top(
        ".devcontainer",
        "editors: dev container commands (postCreateCommand)",
    ),
    top(
        ".gimlet.toml",
        "gimlet: the project's own permission config",
    ),
    top(".envrc", "shells: direnv runs it on entering the folder"),
    top(
        "mise.toml",
        "shells: mise runs its hooks on entering the folder",
    ),
    top(".mise.toml", "shells: as mise.toml"),
    top(
        ".npmrc",
        "package managers: npm settings (script-shell, node-options)",
    ),
    top(".yarnrc", "package managers: yarn 1 settings"),
    top(
        ".yarnrc.yml",
        "package managers: yarnPath runs a script on every yarn command",
    ),
    top(".pnpmfile.cjs", "package managers: pnpm install hooks"),
    top(".bashrc", "shells: rc files (when a root is a home folder)"),
    top(".bash_profile", "shells: rc files"),
    top(".bash_login", "shells: rc files"),
    top(".bash_logout", "shells: rc files"),
    top(".profile", "shells: rc files"),
    top(".zshrc", "shells: rc files"),
    top(".zprofile", "shells: rc files"),
    top(".zshenv", "shells: rc files"),
    top(".zlogin", "shells: rc files"),
    top(".zlogout", "shells: rc files"),
    top(".config/fish", "shells: fish configuration"),
    top(
        ".gitconfig",
        "git: the user's configuration (when a root is a home folder)",
    ),
    top(".config/git", "git: the user's configuration"),
    top(
        ".ssh",
        "ssh: config (ProxyCommand), authorized_keys (when a root is a home folder)",
    ),
];

/// How deep below a root the sandbox looks for nested repositories.
const NESTED_DEPTH: usize = 4;
/// How many directories it looks at, at most, per root.
const NESTED_BUDGET: usize = 20_000;
/// Directories never searched for nested repositories: large, and generated.
const NOT_SEARCHED: &[&str] = &["node_modules", "target", ".venv", "venv", "__pycache__"];

/// The protected list in force: the built-in entries and the configured ones.
#[derive(Debug, Clone)]
pub struct Protected {
    extra: Vec<String>,
    /// How names compare: the patterns and the paths matched against them are folded so.
    matching: NameMatching,
    /// The patterns compiled on first use, shared by clones: compiling them is a regex build,
    /// which a server that never writes does not need to pay for, or keep, at start.
    globs: std::sync::Arc<std::sync::OnceLock<GlobSet>>,
}

impl Default for Protected {
    fn default() -> Self {
        Self::new(Vec::new())
    }
}

impl Protected {
    /// The built-in list plus `extra` paths, each relative to the top of a root or working
    /// tree (`[sandbox] protected` in the config file). Entries that are empty, absolute or
    /// contain `..` are dropped (with a warning): they cannot name something under a root.
    pub fn new(extra: impl IntoIterator<Item = String>) -> Self {
        let extra: Vec<String> = extra
            .into_iter()
            .map(|e| e.trim_end_matches('/').to_owned())
            .filter(|e| {
                let usable = !e.is_empty()
                    && Path::new(e).is_relative()
                    && !Path::new(e)
                        .components()
                        .any(|c| matches!(c, std::path::Component::ParentDir));
                if !usable {
                    tracing::warn!("ignoring the protected path `{e}`: it must be relative to a root, without `..`");
                }
                usable
            })
            .collect();
        Self {
            extra,
            matching: NameMatching::native(),
            globs: std::sync::Arc::default(),
        }
    }

    /// The same list, its names compared as `matching` says (default: this system's,
    /// [`NameMatching::native`]).
    #[must_use]
    pub fn with_matching(mut self, matching: NameMatching) -> Self {
        if matching != self.matching {
            self.matching = matching;
            self.globs = std::sync::Arc::default();
        }
        self
    }

    /// How names are compared.
    pub fn matching(&self) -> NameMatching {
        self.matching
    }

    /// The built-in entries and the configured ones as one set of patterns, folded as
    /// `matching` compares names (the built-in ones are lower-case ASCII already).
    fn compile(extra: &[String], matching: NameMatching) -> GlobSet {
        let mut builder = GlobSetBuilder::new();
        let mut add = |pattern: String| {
            if let Ok(glob) = Glob::new(&pattern) {
                builder.add(glob);
            }
        };
        // A `.git` that is a file points at the git directory: writing one redirects it.
        add(String::from("**/.git"));
        for entry in BUILTIN {
            let path = escape_glob(entry.path);
            match entry.place {
                Place::Top => {
                    add(format!("**/{path}"));
                    add(format!("**/{path}/**"));
                }
                Place::GitDir => {
                    for dir in ["**/.git", "**/.git/worktrees/*", "**/.git/modules/**"] {
                        add(format!("{dir}/{path}"));
                        add(format!("{dir}/{path}/**"));
                    }
                }
            }
        }
        for path in extra {
            let path = escape_glob(&matching.fold_pattern(path));
            add(format!("**/{path}"));
            add(format!("**/{path}/**"));
        }
        builder.build().unwrap_or_else(|_| GlobSet::empty())
    }

    /// The configured entries beyond the built-in ones.
    pub fn extra(&self) -> &[String] {
        &self.extra
    }

    /// Whether a path relative to a root is protected (for the file tools: top-level names
    /// count at any depth), its names compared as [`Self::matching`] says.
    pub fn matches(&self, relative: &Path) -> bool {
        self.globs
            .get_or_init(|| Self::compile(&self.extra, self.matching))
            .is_match(self.matching.fold_path(relative))
    }

    fn top_entries(&self) -> impl Iterator<Item = &str> {
        BUILTIN
            .iter()
            .filter(|e| e.place == Place::Top)
            .map(|e| e.path)
            .chain(self.extra.iter().map(String::as_str))
    }

    /// Finds what to protect under `roots` for a sandboxed command. Blocking: it looks at the
    /// file system (a bounded search for nested repositories included).
    pub fn scan(&self, roots: &[PathBuf]) -> Scan {
        let mut scan = Scan::default();
        for root in roots {
            let mut tops = vec![root.clone()];
            tops.extend(nested_repositories(root));
            for top in &tops {
                self.scan_top(top, roots, &mut scan);
            }
        }
        scan.normalize();
        scan
    }

    fn scan_top(&self, top: &Path, roots: &[PathBuf], scan: &mut Scan) {
        for name in self.top_entries() {
            scan.add(&top.join(name), roots);
        }
        let dot_git = top.join(".git");
        match std::fs::symlink_metadata(&dot_git) {
            Ok(meta) if meta.is_dir() => {
                scan.pinned.push(dot_git.clone());
                scan_git_dir(&dot_git, roots, scan);
            }
            Ok(meta) if meta.is_file() => {
                // A linked worktree or a submodule: `.git` names the git directory.
                scan.read_only.push(dot_git.clone());
                if let Some(dir) = pointed_git_dir(&dot_git) {
                    if inside(&dir, roots) {
                        scan_git_dir(&dir, roots, scan);
                    }
                    if let Some(common) = common_dir(&dir)
                        && inside(&common, roots)
                    {
                        scan_git_dir(&common, roots, scan);
                    }
                }
            }
            Ok(_) => scan.add(&dot_git, roots),
            Err(_) => {
                // No repository yet: `git init` may make one, but a `.git` file (a pointer) may
                // not appear, and neither may the dangerous parts of a new git directory.
                scan.missing.push(dot_git.clone());
                for entry in BUILTIN.iter().filter(|e| e.place == Place::GitDir) {
                    scan.missing.push(dot_git.join(entry.path));
                }
            }
        }
    }
}

/// `?`, `*`, `[`, `{` in a configured name are meant literally.
fn escape_glob(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for c in path.chars() {
        if matches!(c, '?' | '*' | '[' | ']' | '{' | '}') {
            out.push('[');
            out.push(c);
            out.push(']');
        } else {
            out.push(c);
        }
    }
    out
}

/// The protected entries inside a git directory, its submodules' and its linked worktrees'.
fn scan_git_dir(dir: &Path, roots: &[PathBuf], scan: &mut Scan) {
    for entry in BUILTIN.iter().filter(|e| e.place == Place::GitDir) {
        scan.add(&dir.join(entry.path), roots);
    }
    // Linked worktrees keep `commondir`, `gitdir` and `config.worktree` under `worktrees/*`.
    if let Ok(entries) = std::fs::read_dir(dir.join("worktrees")) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                for name in ["commondir", "gitdir", "config.worktree", "hooks"] {
                    scan.add(&entry.path().join(name), roots);
                }
            }
        }
    }
    // Submodules' git directories live under `modules/`, nested by name.
    let mut pending = vec![dir.join("modules")];
    let mut seen = 0;
    while let Some(next) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&next) else {
            continue;
        };
        for entry in entries.flatten() {
            seen += 1;
            if seen > NESTED_BUDGET || !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let path = entry.path();
            if path.join("HEAD").is_file() {
                for git in BUILTIN.iter().filter(|e| e.place == Place::GitDir) {
                    scan.add(&path.join(git.path), roots);
                }
                pending.push(path.join("modules"));
            } else {
                pending.push(path);
            }
        }
    }
}

/// The git directory a `.git` file points at (`gitdir: ../.git/worktrees/x`).
fn pointed_git_dir(dot_git: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(dot_git).ok()?;
    let target = text.lines().next()?.strip_prefix("gitdir:")?.trim();
    let target = Path::new(target);
    let full = if target.is_absolute() {
        target.to_owned()
    } else {
        dot_git.parent()?.join(target)
    };
    std::fs::canonicalize(full).ok()
}

/// The common git directory a worktree's git directory names in `commondir`.
fn common_dir(git_dir: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(git_dir.join("commondir")).ok()?;
    std::fs::canonicalize(git_dir.join(text.trim())).ok()
}

fn inside(path: &Path, roots: &[PathBuf]) -> bool {
    roots.iter().any(|r| path.starts_with(r))
}

/// Repositories below a root (directories holding a `.git`), breadth first, bounded in
/// depth and in the number of directories looked at. Large generated trees are skipped.
fn nested_repositories(root: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut level = vec![root.to_owned()];
    let mut budget = NESTED_BUDGET;
    for _ in 0..NESTED_DEPTH {
        let mut next = Vec::new();
        for dir in &level {
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue;
            };
            for entry in entries.flatten() {
                if budget == 0 {
                    tracing::debug!(root = %root.display(), "stopped looking for nested repositories");
                    return found;
                }
                if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                    continue;
                }
                let name = entry.file_name();
                if name == ".git" || NOT_SEARCHED.iter().any(|n| name == *n) {
                    continue;
                }
                budget -= 1;
                let path = entry.path();
                if std::fs::symlink_metadata(path.join(".git")).is_ok() {
                    found.push(path.clone());
                }
                next.push(path);
            }
        }
        level = next;
    }
    found
}

/// What to protect for one sandboxed command, found by [`Protected::scan`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scan {
    /// Existing protected files and directories: bind-mounted read-only.
    pub read_only: Vec<PathBuf>,
    /// Git directories: bound onto themselves, so that they cannot be renamed or replaced.
    pub pinned: Vec<PathBuf>,
    /// Protected paths that do not exist: a command that creates one has it removed after.
    pub missing: Vec<PathBuf>,
    /// Protected paths that are symbolic links, with their targets: the link cannot be
    /// mounted over, so it is put back as it was if a command changed it. Its target, when
    /// inside a root, is read-only.
    pub links: Vec<(PathBuf, PathBuf)>,
}

impl Scan {
    fn add(&mut self, path: &Path, roots: &[PathBuf]) {
        match std::fs::symlink_metadata(path) {
            Ok(meta) if meta.file_type().is_symlink() => {
                if let Ok(target) = std::fs::read_link(path) {
                    self.links.push((path.to_owned(), target));
                }
                if let Ok(real) = std::fs::canonicalize(path)
                    && inside(&real, roots)
                {
                    self.read_only.push(real);
                }
            }
            Ok(_) => self.read_only.push(path.to_owned()),
            Err(_) => self.missing.push(path.to_owned()),
        }
    }

    fn normalize(&mut self) {
        for list in [&mut self.read_only, &mut self.pinned, &mut self.missing] {
            let set: BTreeSet<PathBuf> = list.drain(..).collect();
            list.extend(set);
        }
        self.links.sort();
        self.links.dedup();
    }

    /// Whether the file system still looks as it did at the scan: every read-only path is
    /// still there (as the same file), every missing one still missing, every link the same.
    /// When it is not, the scan is stale: scan again.
    pub fn still_holds(&self, before: &Identities) -> bool {
        self.read_only
            .iter()
            .chain(&self.pinned)
            .zip(&before.0)
            .all(|(path, id)| identity(path) == *id)
            && self
                .missing
                .iter()
                .all(|p| std::fs::symlink_metadata(p).is_err())
            && self
                .links
                .iter()
                .all(|(link, target)| std::fs::read_link(link).is_ok_and(|t| t == *target))
    }

    /// The identities of the read-only and pinned paths now, for [`Scan::still_holds`].
    pub fn identities(&self) -> Identities {
        Identities(
            self.read_only
                .iter()
                .chain(&self.pinned)
                .map(|p| identity(p))
                .collect(),
        )
    }

    /// After a command: removes the protected paths it created and puts back the links it
    /// changed. Returns a note per path, for the result.
    pub fn undo_planted(&self) -> Vec<String> {
        let mut notes = Vec::new();
        for path in &self.missing {
            let Ok(meta) = std::fs::symlink_metadata(path) else {
                continue;
            };
            // A new `.git` directory is the command's own repository (`git init`): only its
            // dangerous parts (also on the missing list) go.
            if path.file_name().is_some_and(|n| n == ".git") && meta.is_dir() {
                continue;
            }
            notes.push(match remove(path, meta.is_dir()) {
                Ok(()) => format!(
                    "The command created {}, a protected path that sandboxed commands may not create; it was removed",
                    path.display()
                ),
                Err(err) => format!(
                    "The command created {}, a protected path; removing it failed: {err}",
                    path.display()
                ),
            });
        }
        for (link, target) in &self.links {
            if std::fs::read_link(link).is_ok_and(|t| t == *target) {
                continue;
            }
            let restored = std::fs::symlink_metadata(link)
                .map_or(Ok(()), |meta| remove(link, meta.is_dir()))
                .and_then(|()| symlink(target, link));
            notes.push(match restored {
                Ok(()) => format!(
                    "The command replaced {}, a protected symbolic link; it was put back",
                    link.display()
                ),
                Err(err) => format!(
                    "The command replaced {}, a protected symbolic link; putting it back failed: {err}",
                    link.display()
                ),
            });
        }
        notes
    }
}

/// Makes a symbolic link (on Windows a file or folder link, as the target is).
fn symlink(target: &Path, link: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    return std::os::unix::fs::symlink(target, link);
    #[cfg(windows)]
    {
        let resolved = link
            .parent()
            .map_or_else(|| target.to_owned(), |p| p.join(target));
        if resolved.is_dir() {
            std::os::windows::fs::symlink_dir(target, link)
        } else {
            std::os::windows::fs::symlink_file(target, link)
        }
    }
}

/// The identity of a path: (device, inode, kind), or `None` when it is gone. On Windows,
/// where the standard library does not give a file's index, the modification time and size
/// stand in for device and inode.
fn identity(path: &Path) -> Option<(u64, u64, bool)> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    #[cfg(unix)]
    let id = {
        use std::os::unix::fs::MetadataExt;
        (meta.dev(), meta.ino())
    };
    #[cfg(windows)]
    let id = {
        let modified = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        (modified, meta.len())
    };
    Some((id.0, id.1, meta.is_dir()))
}

/// The identities of a [`Scan`]'s existing paths when it was made.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Identities(Vec<Option<(u64, u64, bool)>>);

/// How long a scan is trusted without looking again for nested repositories (it is checked
/// on every use: a scan that no longer holds is made again at once).
const SCAN_MAX_AGE: std::time::Duration = std::time::Duration::from_secs(60);

/// A session's last [`Scan`], reused while it still holds: one `lstat` per protected path per
/// command instead of a search of the roots.
#[derive(Debug, Default)]
pub(crate) struct ScanCache(std::sync::Mutex<Option<CachedScan>>);

#[derive(Debug)]
struct CachedScan {
    roots: Vec<PathBuf>,
    extra: Vec<String>,
    scan: Scan,
    identities: Identities,
    made: std::time::Instant,
}

impl ScanCache {
    /// The scan of `roots` under `protected`: the cached one if it still holds. Blocking.
    pub(crate) fn get(&self, protected: &Protected, roots: &[PathBuf]) -> Scan {
        let mut cached = self.0.locked();
        if let Some(c) = cached.as_ref()
            && c.roots == roots
            && c.extra == protected.extra
            && c.made.elapsed() < SCAN_MAX_AGE
            && c.scan.still_holds(&c.identities)
        {
            return c.scan.clone();
        }
        let scan = protected.scan(roots);
        *cached = Some(CachedScan {
            roots: roots.to_owned(),
            extra: protected.extra.clone(),
            identities: scan.identities(),
            scan: scan.clone(),
            made: std::time::Instant::now(),
        });
        scan
    }
}

/// Removes a file or a tree. Where an immutable or append-only flag is in the way (set by a
/// command, as root), the flags are cleared and the removal tried again.
fn remove(path: &Path, dir: bool) -> std::io::Result<()> {
    let attempt = || {
        if dir {
            std::fs::remove_dir_all(path)
        } else {
            std::fs::remove_file(path)
        }
    };
    match attempt() {
        Err(err) if err.kind() == std::io::ErrorKind::PermissionDenied => {
            clear_flags(path);
            attempt()
        }
        other => other,
    }
}

/// Clears the immutable and append-only flags of a path and everything under it (Linux's
/// `chattr` flags; macOS's `chflags` ones have no call in the crates gimlet uses, and Seatbelt
/// refuses them outside the roots only).
#[cfg(not(target_os = "linux"))]
fn clear_flags(_path: &Path) {}

/// Clears the immutable and append-only flags of a path and everything under it.
#[cfg(target_os = "linux")]
fn clear_flags(path: &Path) {
    use rustix::fs::{IFlags, Mode, OFlags};
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    if let Ok(fd) = rustix::fs::open(path, flags, Mode::empty())
        && let Ok(current) = rustix::fs::ioctl_getflags(&fd)
        && current.intersects(IFlags::IMMUTABLE | IFlags::APPEND)
    {
        let _ = rustix::fs::ioctl_setflags(&fd, current - (IFlags::IMMUTABLE | IFlags::APPEND));
    }
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir())
        && let Ok(entries) = std::fs::read_dir(path)
    {
        for entry in entries.flatten() {
            clear_flags(&entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_tools_see_every_entry_at_any_depth() {
        let protected = Protected::new([String::from("Makefile.local")]);
        for path in [
            ".git",
            ".git/hooks/pre-commit",
            ".git/config",
            ".git/commondir",
            ".git/info/attributes",
            ".git/config.worktree",
            ".git/worktrees/x/gitdir",
            ".git/modules/a/b/config",
            ".git/modules/a/hooks/post-checkout",
            "sub/.git/config",
            "sub/.git",
            ".mcp.json",
            ".cursor/mcp.json",
            ".vscode/settings.json",
            ".claude/x",
            ".gimlet.toml",
            "sub/.bashrc",
            "deep/er/.envrc",
            ".config/fish/config.fish",
            "Makefile.local",
            "sub/Makefile.local",
        ] {
            assert!(protected.matches(Path::new(path)), "{path}");
        }
        for plain in [
            "src/main.rs",
            ".gitignore",
            ".git/HEAD",
            ".git/objects/ab/cdef",
            ".git/index",
            "mcp.json",
            "hooks/x",
            "config",
        ] {
            assert!(!protected.matches(Path::new(plain)), "{plain}");
        }
    }

    /// Spellings of protected paths that name them on a volume that ignores case.
    const CASED: &[&str] = &[
        ".GIT/HOOKS/pre-commit",
        ".Git/config",
        ".git/Hooks/post-checkout",
        "sub/.GIT/CONFIG",
        ".VSCODE/settings.json",
        ".Vscode",
        ".Husky/pre-commit",
        ".GITMODULES",
        ".Gimlet.toml",
        "deep/.ENVRC",
        ".Claude/settings.json",
        ".GIT/worktrees/x/GITDIR",
        ".git/MODULES/a/Config",
        "Makefile.LOCAL",
    ];

    #[test]
    fn where_names_ignore_case_every_spelling_of_an_entry_is_protected() {
        let extra = || [String::from("Makefile.local")];
        for matching in [NameMatching::MacOs, NameMatching::Windows] {
            let protected = Protected::new(extra()).with_matching(matching);
            for path in CASED {
                assert!(protected.matches(Path::new(path)), "{matching:?} {path}");
            }
            for plain in [
                ".GIT/HEAD",
                "SRC/main.rs",
                ".GITIGNORE",
                "Hooks/x",
                "CONFIG",
            ] {
                assert!(!protected.matches(Path::new(plain)), "{matching:?} {plain}");
            }
        }
        // On Linux `.GIT` is another name than `.git` (and git looks for `.git` only).
        let exact = Protected::new(extra()).with_matching(NameMatching::Exact);
        for path in CASED {
            assert!(!exact.matches(Path::new(path)), "{path}");
        }
    }

    #[test]
    fn names_the_win32_layer_or_hfs_plus_open_as_an_entry_are_protected() {
        let windows = Protected::default().with_matching(NameMatching::Windows);
        let macos = Protected::default().with_matching(NameMatching::MacOs);
        let exact = Protected::default().with_matching(NameMatching::Exact);
        let windows_only = [
            ".vscode./settings.json",
            ".Gimlet.toml::$DATA",
            ".git /hooks/x",
            ".gıt/config",
        ];
        for path in windows_only.iter().chain(&[".huſky/x"]) {
            assert!(windows.matches(Path::new(path)), "{path}");
            assert!(!exact.matches(Path::new(path)), "{path}");
        }
        for path in [".g\u{200c}it/hooks/x", ".mcp\u{feff}.json", ".huſky/x"] {
            assert!(macos.matches(Path::new(path)), "{path}");
            assert!(!exact.matches(Path::new(path)), "{path}");
        }
    }

    #[test]
    fn a_configured_entry_matches_in_either_normalisation_on_macos_only() {
        let nfc = "caf\u{e9}";
        let nfd = "cafe\u{301}";
        for (entry, path) in [(nfc, nfd), (nfd, nfc)] {
            let path = format!("{path}/notes.txt");
            let macos = Protected::new([entry.to_owned()]).with_matching(NameMatching::MacOs);
            assert!(macos.matches(Path::new(&path)), "{entry:?} {path:?}");
            assert!(macos.matches(Path::new(&path.to_uppercase())), "{path:?}");
            // NTFS and Linux keep the two forms apart: two files.
            for other in [NameMatching::Windows, NameMatching::Exact] {
                let protected = Protected::new([entry.to_owned()]).with_matching(other);
                assert!(!protected.matches(Path::new(&path)), "{other:?} {path:?}");
                assert!(
                    protected.matches(Path::new(&format!("{entry}/x"))),
                    "{other:?}"
                );
            }
        }
    }

    #[test]
    fn the_built_in_entries_are_spelled_as_they_fold() {
        for entry in BUILTIN {
            for matching in [NameMatching::MacOs, NameMatching::Windows] {
                assert_eq!(
                    matching.fold_path(Path::new(entry.path)),
                    Path::new(entry.path)
                );
            }
        }
    }

    #[test]
    fn the_security_docs_list_every_entry() {
        let docs = include_str!("../../../../docs/security.md");
        for entry in BUILTIN {
            assert!(
                docs.contains(&format!("`{}`", entry.path))
                    || docs.contains(&format!("`{}/`", entry.path)),
                "docs/security.md does not list `{}`",
                entry.path
            );
        }
    }

    #[test]
    fn the_patterns_are_compiled_on_first_use_and_shared_by_clones() {
        let protected = Protected::new(vec![String::from("secrets")]);
        assert!(protected.globs.get().is_none(), "compiled at construction");
        let clone = protected.clone();
        assert!(clone.matches(Path::new("app/secrets/key")));
        assert!(clone.matches(Path::new(".git/config")));
        assert!(!clone.matches(Path::new("src/main.rs")));
        assert!(protected.globs.get().is_some(), "not shared with the clone");
    }

    #[test]
    fn unusable_configured_entries_are_dropped() {
        let protected = Protected::new(
            ["", "/etc/passwd", "../up", "ok/", "a*b"]
                .into_iter()
                .map(String::from),
        );
        assert_eq!(protected.extra(), ["ok", "a*b"]);
        assert!(protected.matches(Path::new("a*b")));
        assert!(!protected.matches(Path::new("aXb")), "globs are literal");
    }

    #[test]
    fn a_scan_finds_repositories_worktrees_and_missing_names() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
        std::fs::write(root.join(".git/config"), "").unwrap();
        std::fs::create_dir_all(root.join(".git/worktrees/wt")).unwrap();
        std::fs::write(root.join(".git/worktrees/wt/commondir"), "../..").unwrap();
        std::fs::create_dir_all(root.join(".git/modules/lib/hooks")).unwrap();
        std::fs::write(root.join(".git/modules/lib/HEAD"), "ref: x").unwrap();
        std::fs::create_dir_all(root.join("a/b/.git/hooks")).unwrap();
        std::fs::create_dir_all(root.join("node_modules/x/.git/hooks")).unwrap();
        std::fs::create_dir_all(root.join("wt")).unwrap();
        std::fs::write(root.join("wt/.git"), "gitdir: ../.git/worktrees/wt\n").unwrap();
        std::fs::write(root.join(".gimlet.toml"), "").unwrap();
        std::os::unix::fs::symlink("elsewhere.json", root.join(".mcp.json")).unwrap();
        std::fs::write(root.join("elsewhere.json"), "{}").unwrap();

        let scan = Protected::default().scan(std::slice::from_ref(&root));
        for path in [
            ".git/hooks",
            ".git/config",
            ".git/worktrees/wt/commondir",
            ".git/modules/lib/hooks",
            "a/b/.git/hooks",
            "wt/.git",
            ".gimlet.toml",
            "elsewhere.json",
        ] {
            assert!(
                scan.read_only.contains(&root.join(path)),
                "{path}: {scan:#?}"
            );
        }
        assert!(scan.pinned.contains(&root.join(".git")));
        assert!(scan.pinned.contains(&root.join("a/b/.git")));
        for path in [
            ".git/commondir",
            ".envrc",
            ".git/info/attributes",
            "a/b/.gitattributes",
        ] {
            assert!(scan.missing.contains(&root.join(path)), "{path}: {scan:#?}");
        }
        assert!(
            !scan.pinned.contains(&root.join("node_modules/x/.git")),
            "node_modules is not searched"
        );
        assert_eq!(
            scan.links,
            [(root.join(".mcp.json"), PathBuf::from("elsewhere.json"))]
        );

        let ids = scan.identities();
        assert!(scan.still_holds(&ids));
        std::fs::write(root.join(".envrc"), "").unwrap();
        assert!(!scan.still_holds(&ids), "a missing name appeared");
        std::fs::remove_file(root.join(".envrc")).unwrap();
        std::fs::rename(root.join(".git/config"), root.join("c")).unwrap();
        std::fs::write(root.join(".git/config"), "").unwrap();
        assert!(!scan.still_holds(&ids), "a protected file was replaced");
    }

    #[test]
    fn planted_paths_are_removed_and_links_put_back() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::write(root.join("real.json"), "{}").unwrap();
        std::os::unix::fs::symlink("real.json", root.join(".mcp.json")).unwrap();
        let scan = Protected::default().scan(std::slice::from_ref(&root));
        std::fs::create_dir_all(root.join(".cursor")).unwrap();
        std::fs::write(root.join(".cursor/mcp.json"), "{}").unwrap();
        std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
        std::fs::write(root.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::remove_file(root.join(".mcp.json")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", root.join(".mcp.json")).unwrap();
        let notes = scan.undo_planted();
        assert!(!root.join(".cursor").exists());
        assert!(!root.join(".git/hooks").exists());
        assert!(root.join(".git/HEAD").exists(), "the new repository stays");
        assert_eq!(
            std::fs::read_link(root.join(".mcp.json")).unwrap(),
            Path::new("real.json")
        );
        assert_eq!(notes.len(), 3, "{notes:?}");
    }
}
