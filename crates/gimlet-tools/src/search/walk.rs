//! The tree walk shared by `grep` and `glob`.

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime};

use ignore::overrides::{Override, OverrideBuilder};
use ignore::types::{Types, TypesBuilder};
use ignore::{WalkBuilder, WalkState};
use tokio_util::sync::CancellationToken;

use crate::error::ToolError;
use crate::search::ordered::{Flow, map_in_order};
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

/// A walk lists at most this many entries (folders and files) on the calling thread before it
/// hands the rest of the tree to walker threads ([`walk_files`]).
const SERIAL_ENTRIES: usize = 1000;

/// ... and spends at most this long on the listing: a tree of many small folders costs about
/// ten system calls per folder.
const SERIAL_TIME: Duration = Duration::from_micros(500);

/// Files of a listing visited on the calling thread; more go to worker threads.
const INLINE_FILES: usize = 32;

/// Walks `base` (a directory), calling `visit` for every file with the walker thread's own
/// state (made by `init`). Honours ignore files and hidden-file rules as `rg` does, never
/// follows symlinks, and stops early when `cancel` fires.
///
/// The tree is first listed on the calling thread, within a budget ([`SERIAL_ENTRIES`],
/// [`SERIAL_TIME`]). The files listed are visited there, or by worker threads when there are
/// more than [`INLINE_FILES`]. What the listing did not reach is then walked by `ignore`'s
/// parallel walker, which skips the folders listed to the end and the files listed, so every
/// file is visited once. A folder whose tree outgrew the listing is remembered
/// ([`Sizes`]) and walked in parallel from the start next time, until a walk finds it small.
///
/// Small trees are walked often (a search of one folder), and the parallel walker's start and
/// end cost more than walking them: two thread starts, and an idle walker polls for work in
/// 1 ms sleeps (a parallel walk of two files took 1.7 ms, 0.4 ms this way). Large trees gain
/// from both cores from the start: a listing that runs out costs them its budget.
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
    let budget = Budget {
        entries: SERIAL_ENTRIES,
        time: SERIAL_TIME,
    };
    walk_within(base, filters, cancel, budget, init, visit).map(|_| ())
}

/// How much of a tree is listed on the calling thread.
#[derive(Clone, Copy)]
struct Budget {
    entries: usize,
    time: Duration,
}

/// A parallel walk that saw at most this many entries makes its folder a candidate for the
/// listing again.
const SMALL_AGAIN: usize = 100;

/// Folders whose tree outgrew the listing when last walked ([`walk_files`]): shared by every
/// session of the process, a hint only (a wrong one costs time, never results).
struct Sizes {
    large: Mutex<BTreeSet<PathBuf>>,
}

/// At most this many folders are remembered; past it, the memory starts over.
const SIZES_KEPT: usize = 256;

static SIZES: Sizes = Sizes {
    large: Mutex::new(BTreeSet::new()),
};

impl Sizes {
    fn is_large(&self, base: &Path) -> bool {
        self.large.locked().contains(base)
    }

    fn learn(&self, base: &Path, large: bool) {
        let mut sizes = self.large.locked();
        if !large {
            sizes.remove(base);
        } else if !sizes.contains(base) {
            if sizes.len() >= SIZES_KEPT {
                sizes.clear();
            }
            sizes.insert(base.to_owned());
        }
    }
}

/// How a walk went ([`walk_within`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Walked {
    /// The tree was listed on the calling thread first.
    listed: bool,
    /// The parallel walker walked (the rest of) it.
    parallel: bool,
}

/// [`walk_files`] with the listing's budget given.
fn walk_within<S, I, V>(
    base: &Path,
    filters: &Filters,
    cancel: &CancellationToken,
    budget: Budget,
    init: I,
    visit: V,
) -> Result<Walked, ToolError>
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
    let listed = !SIZES.is_large(base);
    let listing = if listed {
        list(&builder, budget, cancel)?
    } else {
        Listing::default()
    };
    // Files are visited by their path beneath `base`, listed or walked.
    let visit_file = |state: &mut S, entry: &ignore::DirEntry| {
        if let Ok(rel) = entry.path().strip_prefix(base) {
            visit(state, entry, rel);
        }
    };
    let threads = if listing.files.len() > INLINE_FILES {
        walk_threads()
    } else {
        1
    };
    map_in_order(
        &listing.files,
        threads,
        &init,
        |state, entry| {
            if !cancel.is_cancelled() {
                visit_file(state, entry);
            }
        },
        |()| {
            if cancel.is_cancelled() {
                Flow::Stop
            } else {
                Flow::Continue
            }
        },
    );
    let parallel = !listing.finished;
    if parallel && !cancel.is_cancelled() {
        let files: HashSet<PathBuf> = listing.files.iter().map(|e| e.path().to_owned()).collect();
        let finished = listing.finished_folders;
        builder.filter_entry(move |entry| {
            !finished.contains(entry.path()) && !files.contains(entry.path())
        });
        let seen = AtomicUsize::new(listing.entries);
        builder.build_parallel().run(|| {
            let mut state = init();
            let visit_file = &visit_file;
            let seen = &seen;
            Box::new(move |entry| {
                if cancel.is_cancelled() {
                    return WalkState::Quit;
                }
                let Ok(entry) = entry else {
                    return WalkState::Continue;
                };
                seen.fetch_add(1, Ordering::Relaxed);
                if entry.file_type().is_some_and(|t| t.is_file()) {
                    visit_file(&mut state, &entry);
                }
                WalkState::Continue
            })
        });
        if !cancel.is_cancelled() {
            SIZES.learn(base, seen.into_inner() > SMALL_AGAIN);
        }
    }
    if cancel.is_cancelled() {
        return Err(ToolError::Cancelled);
    }
    Ok(Walked { listed, parallel })
}

/// What the listing on the calling thread found.
#[derive(Default)]
struct Listing {
    /// The files listed.
    files: Vec<ignore::DirEntry>,
    /// Folders listed to the end, with everything beneath them.
    finished_folders: HashSet<PathBuf>,
    /// Entries listed (folders and files, the walked folder included).
    entries: usize,
    /// Whether the whole tree was listed.
    finished: bool,
}

/// Lists the walk `builder` makes on this thread, until it ends or `budget` runs out.
///
/// The walk goes depth first, so a folder is listed to the end, with everything beneath it,
/// once an entry at its depth or above follows it.
fn list(
    builder: &WalkBuilder,
    budget: Budget,
    cancel: &CancellationToken,
) -> Result<Listing, ToolError> {
    let started = Instant::now();
    let mut listing = Listing::default();
    // Folders begun and not known to be finished, outermost first, with their depths.
    let mut open: Vec<(usize, PathBuf)> = Vec::new();
    for (seen, entry) in builder.build().enumerate() {
        if seen == budget.entries || started.elapsed() > budget.time {
            return Ok(listing);
        }
        if cancel.is_cancelled() {
            return Err(ToolError::Cancelled);
        }
        // As in the parallel walk, an entry that cannot be read is left out.
        let Ok(entry) = entry else { continue };
        listing.entries += 1;
        while let Some((depth, _)) = open.last()
            && *depth >= entry.depth()
        {
            if let Some((_, folder)) = open.pop() {
                listing.finished_folders.insert(folder);
            }
        }
        match entry.file_type() {
            Some(kind) if kind.is_dir() => open.push((entry.depth(), entry.into_path())),
            Some(kind) if kind.is_file() => listing.files.push(entry),
            _ => {}
        }
    }
    listing.finished = true;
    Ok(listing)
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
                let Ok(meta) = resolved.child_metadata(rel) else {
                    return;
                };
                meta.modified().ok()
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
/// Learned once: the standard library reads the cgroup's CPU quota on every ask.
pub(crate) fn walk_threads() -> usize {
    static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *THREADS.get_or_init(|| std::thread::available_parallelism().map_or(2, |n| n.get().min(12)))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// Walks `base` with no filters and the listing's budget of entries (time is ample: tests
    /// run unoptimised); each file's path and whether it was visited on the calling thread.
    fn visited(base: &Path) -> BTreeMap<PathBuf, Vec<bool>> {
        let caller = std::thread::current().id();
        let seen = Mutex::new(BTreeMap::<PathBuf, Vec<bool>>::new());
        let budget = Budget {
            entries: SERIAL_ENTRIES,
            time: Duration::from_secs(60),
        };
        walk_within(
            base,
            &Filters::default(),
            &CancellationToken::new(),
            budget,
            || (),
            |(), _entry, rel| {
                let here = std::thread::current().id() == caller;
                seen.locked().entry(rel.to_owned()).or_default().push(here);
            },
        )
        .expect("the walk");
        seen.into_inner().expect("not poisoned")
    }

    /// A tree with `files` files in four folders, one hidden file and one ignored folder.
    fn tree(files: usize) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("a temporary folder");
        for i in 0..files {
            let folder = dir.path().join(format!("d{}", i % 4));
            std::fs::create_dir_all(&folder).expect("a folder");
            std::fs::write(folder.join(format!("f{i}.txt")), "x").expect("a file");
        }
        std::fs::write(dir.path().join(".hidden"), "x").expect("a hidden file");
        std::fs::create_dir(dir.path().join("skipped")).expect("a folder");
        std::fs::write(dir.path().join("skipped/f.txt"), "x").expect("a file");
        std::fs::write(dir.path().join(".ignore"), "skipped/\n").expect("an ignore file");
        dir
    }

    fn expected(files: usize) -> Vec<PathBuf> {
        let mut paths: Vec<PathBuf> = (0..files)
            .map(|i| PathBuf::from(format!("d{}/f{i}.txt", i % 4)))
            .collect();
        paths.sort();
        paths
    }

    #[test]
    fn a_small_tree_is_walked_on_the_calling_thread() {
        let dir = tree(INLINE_FILES);
        let seen = visited(dir.path());
        assert_eq!(
            seen.keys().cloned().collect::<Vec<_>>(),
            expected(INLINE_FILES)
        );
        assert!(seen.values().all(|on| on == &[true]), "{seen:?}");
    }

    #[test]
    fn a_listed_tree_with_more_files_is_visited_by_workers() {
        let dir = tree(INLINE_FILES + 1);
        let seen = visited(dir.path());
        assert_eq!(
            seen.keys().cloned().collect::<Vec<_>>(),
            expected(INLINE_FILES + 1)
        );
        // (On a machine of one CPU there is one worker: the calling thread.)
        let by_workers = walk_threads() > 1;
        assert!(seen.values().all(|on| on == &[!by_workers]), "{seen:?}");
    }

    /// Every file of a nested tree once, wherever the listing stops.
    #[test]
    fn the_parallel_walk_goes_on_where_the_listing_stopped() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let mut files = Vec::new();
        for folder in ["", "a", "a/b", "a/b/c", "a/d", "e", "e/f/g"] {
            let at = dir.path().join(folder);
            std::fs::create_dir_all(&at).expect("a folder");
            for name in ["1.txt", "2.txt"] {
                std::fs::write(at.join(name), "x").expect("a file");
                files.push(Path::new(folder).join(name));
            }
        }
        std::fs::write(dir.path().join("a/.ignore"), "2.txt\n").expect("an ignore file");
        files.retain(|f| !(f.starts_with("a") && f.ends_with("2.txt")));
        files.sort();
        // 8 folders (the walked one included) and 10 files: each budget from nothing to all.
        for entries in 0..=19 {
            let (seen, _) = files_walked(dir.path(), entries);
            assert_eq!(seen, files, "listing stopped after {entries} entries");
        }
    }

    /// Walks `base` listing at most `entries` entries first: the files visited, sorted, and
    /// how the walk went.
    fn files_walked(base: &Path, entries: usize) -> (Vec<PathBuf>, Walked) {
        let budget = Budget {
            entries,
            time: Duration::from_secs(60),
        };
        let seen = Mutex::new(Vec::new());
        let walked = walk_within(
            base,
            &Filters::default(),
            &CancellationToken::new(),
            budget,
            || (),
            |(), _entry, rel| seen.locked().push(rel.to_owned()),
        )
        .expect("the walk");
        let mut seen = seen.into_inner().expect("not poisoned");
        seen.sort();
        (seen, walked)
    }

    #[test]
    fn a_large_tree_is_walked_in_parallel_and_each_file_visited_once() {
        let files = SERIAL_ENTRIES + 100;
        let dir = tree(files);
        let seen = visited(dir.path());
        assert_eq!(seen.keys().cloned().collect::<Vec<_>>(), expected(files));
        let by_workers = walk_threads() > 1;
        assert!(
            seen.values().all(|on| on == &[!by_workers]),
            "visited here or twice"
        );
    }

    #[test]
    fn a_folder_that_outgrew_the_listing_is_walked_in_parallel_until_it_is_small() {
        let dir = tree(150);
        let walk = |files: usize| {
            let (seen, walked) = files_walked(dir.path(), 50);
            assert_eq!(seen, expected(files));
            walked
        };
        let both = Walked {
            listed: true,
            parallel: true,
        };
        let parallel = Walked {
            listed: false,
            parallel: true,
        };
        let listed = Walked {
            listed: true,
            parallel: false,
        };
        assert_eq!(walk(150), both, "listed, then the rest in parallel");
        assert_eq!(walk(150), parallel, "remembered: no listing");
        for i in 10..150 {
            let file = format!("d{}/f{i}.txt", i % 4);
            std::fs::remove_file(dir.path().join(file)).expect("a removal");
        }
        assert_eq!(walk(10), parallel, "still remembered as large");
        assert_eq!(walk(10), listed, "found small: listed again");
    }

    #[test]
    fn the_listing_stops_when_its_budget_runs_out() {
        let dir = tree(3);
        let builder = WalkBuilder::new(dir.path());
        let cancel = CancellationToken::new();
        let budget = |entries, time| Budget { entries, time };
        let ample = Duration::from_secs(60);
        // The folder itself, d0 to d2 and their three files (hidden and ignored ones are not
        // yielded): seven entries.
        let all = list(&builder, budget(7, ample), &cancel).expect("no error");
        assert!(all.finished);
        assert_eq!(all.files.len(), 3);
        let cut = list(&builder, budget(6, ample), &cancel).expect("no error");
        assert!(!cut.finished);
        // Out of time.
        let late = list(&builder, budget(7, Duration::ZERO), &cancel).expect("no error");
        assert!(!late.finished && late.files.is_empty());
    }
}
