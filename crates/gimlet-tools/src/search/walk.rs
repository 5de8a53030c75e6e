//! The tree walk shared by `grep` and `glob`.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use ignore::overrides::{Override, OverrideBuilder};
use ignore::types::{Types, TypesBuilder};
use ignore::{WalkBuilder, WalkState};
use tokio_util::sync::CancellationToken;

use crate::error::ToolError;

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

/// Walks `base` (a directory) in parallel and returns its files, sorted most recently
/// modified first, then by path. Honours ignore files and hidden-file rules as `rg` does, and
/// never follows symlinks. Stops early when `cancel` fires.
pub(crate) fn collect_files(
    base: &Path,
    filters: &Filters,
    keep: &(dyn Fn(&Path) -> bool + Sync),
    cancel: &CancellationToken,
) -> Result<Vec<Found>, ToolError> {
    let mut builder = WalkBuilder::new(base);
    builder.follow_links(false).threads(walk_threads());
    if let Some(overrides) = &filters.overrides {
        builder.overrides(overrides.clone());
    }
    if let Some(types) = &filters.types {
        builder.types(types.clone());
    }
    let found: Mutex<Vec<Found>> = Mutex::new(Vec::new());
    builder.build_parallel().run(|| {
        let mut guard = FlushOnDrop {
            local: Vec::new(),
            found: &found,
        };
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
            let Ok(rel) = entry.path().strip_prefix(base) else {
                return WalkState::Continue;
            };
            if !keep(rel) {
                return WalkState::Continue;
            }
            let modified = entry
                .metadata()
                .ok()
                .and_then(|m| m.modified().ok())
                .unwrap_or(SystemTime::UNIX_EPOCH);
            guard.local.push(Found {
                rel: rel.to_owned(),
                modified,
            });
            WalkState::Continue
        })
    });
    if cancel.is_cancelled() {
        return Err(ToolError::Cancelled);
    }
    let mut found = found
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    found.sort_unstable_by(|a, b| b.modified.cmp(&a.modified).then_with(|| a.rel.cmp(&b.rel)));
    Ok(found)
}

/// Hands a walker thread's finds to the shared list when the thread is done.
struct FlushOnDrop<'a> {
    local: Vec<Found>,
    found: &'a Mutex<Vec<Found>>,
}

impl Drop for FlushOnDrop<'_> {
    fn drop(&mut self) {
        let mut found = self
            .found
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        found.append(&mut self.local);
    }
}

/// Threads for walking and searching: the machine's parallelism, at most 12 (as `rg`).
pub(crate) fn walk_threads() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get().min(12))
}
