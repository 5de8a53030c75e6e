//! `ls`: a directory as a breadth-first tree, walked by handle ([`DirHandle`]).
//!
//! Every directory is opened relative to its parent's handle without following a symlink,
//! starting from the root, so a directory swapped for a symlink mid-walk is simply not
//! entered: the listing cannot reveal a name outside the roots.

use std::borrow::Cow;
use std::collections::{BTreeMap, VecDeque};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use crate::context::{AccessKind, ToolContext, ToolEnv};
use crate::error::ToolError;
use crate::fs::{DirHandle, EntryKind, PathError};
use crate::permission::Access;
use crate::tool::Tool;
use crate::vocab::{ToolFlags, ToolOutput};

const DESCRIPTION: &str = include_str!("ls.md");

/// Entries shown when no `limit` is given.
pub(crate) const DEFAULT_LIMIT: usize = 500;
/// Entries read from one directory at most (a directory with millions of files stays cheap).
const MAX_DIR_ENTRIES: usize = 100_000;
/// Ignore files larger than this are skipped.
const MAX_IGNORE_FILE: u64 = 1024 * 1024;

/// Arguments of `ls`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LsArgs {
    /// The directory to list: absolute, or relative to the first root folder (default: the
    /// first root).
    pub path: Option<String>,
    /// Patterns of entries to leave out, in .gitignore syntax (e.g. `*.log`, `target/`).
    pub ignore: Option<Vec<String>>,
    /// The most entries to show (default 500).
    pub limit: Option<usize>,
}

impl LsArgs {
    fn path(&self) -> &str {
        self.path.as_deref().unwrap_or(".")
    }
}

/// The `ls` tool.
#[derive(Debug, Default, Clone, Copy)]
pub struct LsTool;

impl Tool for LsTool {
    type Args = LsArgs;
    const NAME: &'static str = "ls";
    const TITLE: &'static str = "List directory";

    fn description(&self, _env: &ToolEnv) -> Cow<'static, str> {
        DESCRIPTION.into()
    }

    fn flags(&self, _args: Option<&LsArgs>) -> ToolFlags {
        ToolFlags::READ_ONLY
    }

    async fn validate(&self, args: LsArgs, _ctx: &ToolContext) -> Result<LsArgs, ToolError> {
        if args.limit == Some(0) {
            return Err(ToolError::invalid(
                "`limit` must be at least 1 (it is a number of entries)",
            ));
        }
        if let Some(patterns) = &args.ignore {
            user_ignores(Path::new("/"), patterns)?;
        }
        Ok(args)
    }

    async fn accesses(&self, args: &LsArgs, ctx: &ToolContext) -> Result<Vec<Access>, ToolError> {
        Ok(vec![ctx.path_access(args.path(), AccessKind::Read).await?])
    }

    async fn execute(&self, args: LsArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        ctx.blocking(move |ctx| list(&args, &ctx)).await
    }
}

fn user_ignores(base: &Path, patterns: &[String]) -> Result<Gitignore, ToolError> {
    let mut builder = GitignoreBuilder::new(base);
    for pattern in patterns {
        builder.add_line(None, pattern).map_err(|e| {
            ToolError::invalid(format!("`ignore` pattern `{pattern}` is not valid: {e}"))
        })?;
    }
    builder
        .build()
        .map_err(|e| ToolError::invalid(format!("`ignore` patterns: {e}")))
}

/// One listed entry.
struct Entry {
    name: OsString,
    kind: Kind,
    /// For directories: the entries not shown (read but over the limit), or `None` when the
    /// directory was never read.
    hidden_children: Option<usize>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Dir,
    File,
    Symlink,
    Other,
}

/// A directory waiting to be read: its handle, path below the listed directory, and the
/// ignore files that apply inside it (outermost first).
struct Pending {
    dir: DirHandle,
    rel: PathBuf,
    ignores: Vec<Arc<Gitignore>>,
}

fn list(args: &LsArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
    let resolved = ctx.resolve_allowed(args.path())?;
    let dir = resolved.open_existing_dir().map_err(|err| match err {
        PathError::NotADirectory { path } => ToolError::invalid(format!(
            "`{path}` is a file, not a directory; use `read` to read it"
        )),
        other => other.into(),
    })?;
    let limit = args.limit.unwrap_or(DEFAULT_LIMIT);
    let user = Arc::new(user_ignores(
        &resolved.path,
        args.ignore.as_deref().unwrap_or(&[]),
    )?);
    let inherited = inherited_ignores(ctx, &resolved.path);
    let mut tree: BTreeMap<PathBuf, Vec<Entry>> = BTreeMap::new();
    let mut queue = VecDeque::from([Pending {
        dir: DirHandle::from_file(dir, &resolved),
        rel: PathBuf::new(),
        ignores: inherited,
    }]);
    let mut shown = 0usize;
    let mut left_out = 0usize;
    let mut stopped = false;
    while let Some(pending) = queue.pop_front() {
        if ctx.is_cancelled() {
            return Err(ToolError::Cancelled);
        }
        if shown >= limit {
            stopped = true;
            break;
        }
        let abs = resolved.path.join(&pending.rel);
        let mut ignores = pending.ignores;
        if let Some(local) = local_ignores(&pending.dir, &abs) {
            ignores.push(Arc::new(local));
        }
        let (mut entries, skipped) = read_entries(&pending.dir, &abs, &ignores, &user)?;
        left_out += skipped;
        entries.sort_by(|a, b| a.name.as_encoded_bytes().cmp(b.name.as_encoded_bytes()));
        let room = limit - shown;
        let hidden = entries.len().saturating_sub(room);
        entries.truncate(room);
        shown += entries.len();
        for entry in &mut entries {
            if entry.kind != Kind::Dir {
                continue;
            }
            if let Some(dir) = pending.dir.subdir(&entry.name) {
                queue.push_back(Pending {
                    dir,
                    rel: pending.rel.join(&entry.name),
                    ignores: ignores.clone(),
                });
            }
        }
        if hidden > 0 {
            stopped = true;
            mark_hidden(&mut tree, &pending.rel, hidden);
        } else {
            mark_hidden(&mut tree, &pending.rel, 0);
        }
        tree.insert(pending.rel, entries);
    }
    stopped |= !queue.is_empty();
    let display = resolved.display();
    let text = render(&display, &tree, shown, left_out, limit, stopped);
    Ok(ToolOutput::text(text)
        .with_title(display.clone())
        .with_structured(json!({"path": display, "entries": shown, "truncated": stopped})))
}

/// Records, on a directory's entry in its parent, how many of its children were not shown.
fn mark_hidden(tree: &mut BTreeMap<PathBuf, Vec<Entry>>, rel: &Path, hidden: usize) {
    let (Some(parent), Some(name)) = (rel.parent(), rel.file_name()) else {
        return;
    };
    if let Some(entry) = tree
        .get_mut(parent)
        .and_then(|es| es.iter_mut().find(|e| e.name == name))
    {
        entry.hidden_children = Some(hidden);
    }
}

/// Ignore files between the root and the listed directory (the root's own included).
fn inherited_ignores(ctx: &ToolContext, listed: &Path) -> Vec<Arc<Gitignore>> {
    let Some(root) = ctx
        .roots()
        .roots()
        .iter()
        .find(|r| listed.starts_with(r.path()))
    else {
        return Vec::new();
    };
    let mut ignores = Vec::new();
    let mut dir = root.path().to_owned();
    let rel = listed.strip_prefix(root.path()).unwrap_or(Path::new(""));
    let mut components = rel.components();
    loop {
        if dir == listed {
            break;
        }
        let rel_dir = dir.strip_prefix(root.path()).unwrap_or(Path::new(""));
        if let Some(handle) = DirHandle::beneath(root, rel_dir)
            && let Some(ignore) = local_ignores(&handle, &dir)
        {
            ignores.push(Arc::new(ignore));
        }
        match components.next() {
            Some(c) => dir.push(c),
            None => break,
        }
    }
    ignores
}

/// The `.gitignore` and `.ignore` rules of one directory, read through its handle.
fn local_ignores(dir: &DirHandle, abs: &Path) -> Option<Gitignore> {
    let mut builder = GitignoreBuilder::new(abs);
    let mut any = false;
    for name in [".gitignore", ".ignore"] {
        let Some(text) = dir.read_small(name.as_ref(), MAX_IGNORE_FILE) else {
            continue;
        };
        for line in text.lines() {
            let _ = builder.add_line(Some(abs.join(name)), line);
            any = true;
        }
    }
    if !any {
        return None;
    }
    builder.build().ok()
}

fn is_ignored(ignores: &[Arc<Gitignore>], user: &Gitignore, path: &Path, is_dir: bool) -> bool {
    if user.matched(path, is_dir).is_ignore() {
        return true;
    }
    // The innermost file with an opinion decides, as in git.
    for ignore in ignores.iter().rev() {
        match ignore.matched(path, is_dir) {
            Match::Ignore(_) => return true,
            Match::Whitelist(_) => return false,
            Match::None => {}
        }
    }
    false
}

/// A directory's entries, and how many of them the ignore rules left out.
fn read_entries(
    dir: &DirHandle,
    abs: &Path,
    ignores: &[Arc<Gitignore>],
    user: &Gitignore,
) -> Result<(Vec<Entry>, usize), ToolError> {
    let items = dir
        .entries()
        .map_err(|e| ToolError::io(format!("listing {}", abs.display()), e))?;
    let mut entries = Vec::new();
    let mut left_out = 0;
    for (name, kind) in items {
        if name == ".git" {
            continue;
        }
        let kind = kind_of(kind);
        let path = abs.join(&name);
        if is_ignored(ignores, user, &path, kind == Kind::Dir) {
            left_out += 1;
            continue;
        }
        entries.push(Entry {
            name,
            kind,
            hidden_children: None,
        });
        if entries.len() >= MAX_DIR_ENTRIES {
            break;
        }
    }
    Ok((entries, left_out))
}

fn kind_of(kind: EntryKind) -> Kind {
    match kind {
        EntryKind::Dir => Kind::Dir,
        EntryKind::File => Kind::File,
        EntryKind::Symlink => Kind::Symlink,
        EntryKind::Other => Kind::Other,
    }
}

fn render(
    display: &str,
    tree: &BTreeMap<PathBuf, Vec<Entry>>,
    shown: usize,
    left_out: usize,
    limit: usize,
    stopped: bool,
) -> String {
    let mut out = String::new();
    let header = if display.ends_with('/') {
        display.to_owned()
    } else {
        format!("{display}/")
    };
    out.push_str(&header);
    out.push('\n');
    render_dir(&mut out, tree, Path::new(""), 1);
    if shown == 0 && left_out == 0 {
        out.push_str("  (empty directory)\n");
    } else if shown == 0 {
        // Not "empty": the entries are there, the ignore rules hid them.
        out.push_str(&format!(
            "  (nothing to show: {left_out} {} ignored by .gitignore, .ignore or the `ignore` \
             patterns)\n",
            entries_word(left_out)
        ));
    }
    if stopped {
        out.push_str(&format!(
            "\n[Listing stopped at {limit} {}; directories marked `...` were not listed in \
             full. Call `ls` on a subdirectory, or raise `limit`.]\n",
            entries_word(limit)
        ));
    }
    out
}

fn render_dir(out: &mut String, tree: &BTreeMap<PathBuf, Vec<Entry>>, rel: &Path, depth: usize) {
    let Some(entries) = tree.get(rel) else { return };
    let indent = "  ".repeat(depth);
    for entry in entries {
        let name = entry.name.to_string_lossy();
        let (suffix, more) = match (entry.kind, entry.hidden_children) {
            (Kind::Dir, None) => ("/", String::from(" ...")),
            (Kind::Dir, Some(0)) => ("/", String::new()),
            (Kind::Dir, Some(n)) => ("/", format!(" ... ({n} more {})", entries_word(n))),
            (Kind::Symlink, _) => ("@", String::new()),
            (Kind::File | Kind::Other, _) => ("", String::new()),
        };
        out.push_str(&format!("{indent}{name}{suffix}{more}\n"));
        if entry.kind == Kind::Dir {
            render_dir(out, tree, &rel.join(&entry.name), depth + 1);
        }
    }
}

/// "entry" or "entries", for a count of `n`.
fn entries_word(n: usize) -> &'static str {
    if n == 1 { "entry" } else { "entries" }
}

#[cfg(test)]
#[path = "ls_tests.rs"]
mod tests;
