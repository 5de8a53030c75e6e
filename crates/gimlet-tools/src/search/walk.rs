//! The tree walk shared by `grep` and `glob`.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use ignore::overrides::{Override, OverrideBuilder};
use ignore::types::{Types, TypesBuilder};
use ignore::{WalkBuilder, WalkState};
use tokio_util::sync::CancellationToken;

use crate::error::ToolError;
use crate::util::MutexExt as _;

/// A file found by the walk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Found {
    /// Its path relative to the walked directory.
    pub(crate) rel: PathBuf,
    /// Its modification time (the epoch when unknown).
    pub(crate) modified: SystemTime,
}

/// Which files the walk yields.
#[derive(Debug, Default)]
pub(crate) struct Filters {
    overrides: Option<Override>,
    types: Option<Types>,
}

impl Filters {
    /// Builds the `glob` and `type` filters for a walk of `base`. `globs` is one or more
    /// patterns separated by spaces; a leading `!` excludes.
    pub(crate) fn new(
        base: &Path,
        globs: Option<&str>,
        file_type: Option<&str>,
    ) -> Result<Self, ToolError> {
        let overrides = match globs.map(str::trim).filter(|g| !g.is_empty()) {
            None => None,
            Some(globs) => {
                let mut builder = OverrideBuilder::new(base);
                for glob in globs.split_whitespace() {
                    builder.add(glob).map_err(|e| {
                        ToolError::invalid(format!("`glob` pattern `{glob}` is not valid: {e}"))
                    })?;
                }
                Some(
                    builder
                        .build()
                        .map_err(|e| ToolError::invalid(format!("`glob`: {e}")))?,
                )
            }
        };
        let types = match file_type.map(str::trim).filter(|t| !t.is_empty()) {
            None => None,
            Some(name) => {
                let mut builder = TypesBuilder::new();
                builder.add_defaults();
                let known = builder.definitions().iter().any(|d| d.name() == name);
                if !known {
                    let mut names: Vec<String> = builder
                        .definitions()
                        .iter()
                        .map(|d| d.name().to_owned())
                        .collect();
                    names.sort();
                    let common = [
                        "rust", "py", "js", "ts", "go", "java", "c", "cpp", "md", "json", "toml",
                        "yaml", "sh",
                    ];
                    return Err(ToolError::invalid(format!(
                        "`type` `{name}` is not a known file type; common ones: {} ({} in all, as in `rg --type-list`). Or use `glob`",
                        common.join(", "),
                        names.len()
                    )));
                }
                builder.select(name);
                Some(
                    builder
                        .build()
                        .map_err(|e| ToolError::invalid(format!("`type`: {e}")))?,
                )
            }
        };
        Ok(Self { overrides, types })
    }
}

/// How the walk learns a file's modification time.
#[derive(Clone, Copy)]
pub(crate) enum Stat<'a> {
    /// From the walker (by path); for callers that open each file confined anyway.
    Walker,
    /// By opening the file beneath its root without following symlinks, then `fstat`: files
    /// that do not open that way are left out, so only names inside the roots are returned.
    Confined(&'a crate::fs::ResolvedPath),
}

/// Walks `base` (a directory) in parallel, calling `visit` for every file with the walker
/// thread's own state (made by `init`). Honours ignore files and hidden-file rules as `rg`
/// does, never follows symlinks, and stops early when `cancel` fires.
pub(crate) fn walk_files<S, I, V>(
    base: &Path,
    filters: &Filters,
    cancel: &CancellationToken,
    init: I,
    visit: V,
) -> Result<(), ToolError>
where
    S: Send,
    I: Fn() -> S + Sync,
    V: Fn(&mut S, &ignore::DirEntry, &Path) + Sync,
{
    let mut builder = WalkBuilder::new(base);
    builder.follow_links(false).threads(walk_threads());
    if let Some(overrides) = &filters.overrides {
        builder.overrides(overrides.clone());
    }
    if let Some(types) = &filters.types {
        builder.types(types.clone());
    }
    builder.build_parallel().run(|| {
        let mut state = init();
        let visit = &visit;
        Box::new(move |entry| {
            if cancel.is_cancelled() {
                return WalkState::Quit;
            }
            let Ok(entry) = entry else {
                return WalkState::Continue;
            };
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                return WalkState::Continue;
            }
            if let Ok(rel) = entry.path().strip_prefix(base) {
                visit(&mut state, &entry, rel);
            }
            WalkState::Continue
        })
    });
    if cancel.is_cancelled() {
        return Err(ToolError::Cancelled);
    }
    Ok(())
}

/// Walks `base` and returns the files `keep` accepts, sorted most recently modified first,
/// then by path.
pub(crate) fn collect_files(
    base: &Path,
    filters: &Filters,
    keep: &(dyn Fn(&Path) -> bool + Sync),
    stat: Stat<'_>,
    cancel: &CancellationToken,
) -> Result<Vec<Found>, ToolError> {
    let found: Mutex<Vec<Found>> = Mutex::new(Vec::new());
    let init = || FlushOnDrop {
        local: Vec::new(),
        found: &found,
    };
    walk_files(base, filters, cancel, init, |guard, entry, rel| {
        if !keep(rel) {
            return;
        }
        let modified = match stat {
            Stat::Walker => entry.metadata().ok().and_then(|m| m.modified().ok()),
            Stat::Confined(resolved) => {
                let flags = rustix::fs::OFlags::PATH | rustix::fs::OFlags::CLOEXEC;
                let Ok(fd) = resolved.open_child(rel, flags) else {
                    return;
                };
                rustix::fs::fstat(&fd).ok().map(|s| modified_of(&s))
            }
        };
        let modified = modified.unwrap_or(SystemTime::UNIX_EPOCH);
        guard.local.push(Found {
            rel: rel.to_owned(),
            modified,
        });
    })?;
    let mut found = found
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    found.sort_unstable_by(|a, b| b.modified.cmp(&a.modified).then_with(|| a.rel.cmp(&b.rel)));
    Ok(found)
}

fn modified_of(stat: &rustix::fs::Stat) -> SystemTime {
    let secs = u64::try_from(stat.st_mtime).unwrap_or(0);
    let nanos = u32::try_from(stat.st_mtime_nsec).unwrap_or(0);
    SystemTime::UNIX_EPOCH + std::time::Duration::new(secs, nanos)
}

/// Hands a walker thread's finds to the shared list when the thread is done.
struct FlushOnDrop<'a> {
    local: Vec<Found>,
    found: &'a Mutex<Vec<Found>>,
}

impl Drop for FlushOnDrop<'_> {
    fn drop(&mut self) {
        let mut found = self.found.locked();
        found.append(&mut self.local);
    }
}

/// Threads for walking and searching: the machine's parallelism, at most 12 (as `rg`).
pub(crate) fn walk_threads() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get().min(12))
}
