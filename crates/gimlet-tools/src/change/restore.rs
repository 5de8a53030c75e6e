//! Putting paths back to a checkpoint's state, for `restore` and `undo`: only the paths
//! given, each only if it still holds what the checkpoint left (unless told to overwrite),
//! through the atomic multi-file commit and its intent log ([`commit_files_and`]), all or
//! nothing, across a crash too: files, and symbolic links (put back, replaced or removed) in
//! the same change. A file is removed only where the checkpoint saw it created. Links are not
//! put back on Windows (refused before anything changes).

use std::fmt::Write as _;
use std::path::Path;

use crate::checkpoint::{RootCheckpoints, State};
use crate::context::ToolContext;
use crate::error::ToolError;
use crate::fs::{ContentHash, Expected, FileId, Ownership, ResolvedPath, Step, create_parents};
use crate::text::{DiffStats, Document, render_diff};

use super::{Loaded, NewFile, commit_files_and, load};

/// Whether symbolic links can be put back here.
const LINKS_PUT_BACK: bool = cfg!(unix);

/// One path to put back.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    /// Relative to the root, `/`-separated.
    pub(crate) rel: String,
    /// The state to put back.
    pub(crate) want: State,
    /// The state the path must hold now (what the checkpoint left).
    pub(crate) expect: State,
}

/// What was done to one path.
#[derive(Debug, Clone)]
pub(crate) struct Done {
    /// Relative to the root.
    pub(crate) rel: String,
    /// `restored`, `removed`, `recreated`, `mode restored`, `unchanged`.
    pub(crate) action: &'static str,
    /// The diff from what was there to what is there now.
    pub(crate) diff: String,
}

/// Puts `targets` back under `root`. `what` names the checkpoint in messages. Blocking.
pub(crate) fn put_back(
    ctx: &ToolContext,
    root: &RootCheckpoints,
    targets: &[Target],
    overwrite: bool,
    what: &str,
) -> Result<Vec<Done>, ToolError> {
    let failed = |err: String| ToolError::failed(format!("{err}; nothing was restored"));
    let now = check(root, targets, overwrite, what)?;
    let content = |state: &State| -> Result<Option<Vec<u8>>, ToolError> {
        match state {
            State::File { id, kept: true, .. } => root.content(id).map(Some).map_err(failed),
            State::File { .. } | State::Absent | State::Symlink { .. } => Ok(None),
        }
    };
    let mut wanted = Vec::with_capacity(targets.len());
    for (target, state) in targets.iter().zip(&now) {
        wanted.push(if state.same(&target.want) {
            None
        } else {
            content(&target.want)?
        });
    }
    // Regular files (to, from or between files) through the atomic commit; links by hand.
    let mut files: Vec<(usize, Loaded)> = Vec::new();
    let mut links = Vec::new();
    for (i, (target, state)) in targets.iter().zip(&now).enumerate() {
        if state.same(&target.want) {
            continue;
        }
        let link =
            matches!(state, State::Symlink { .. }) || matches!(target.want, State::Symlink { .. });
        if link {
            links.push(i);
        } else {
            let path = root.root().join(&target.rel);
            let loaded = load(ctx.resolve_allowed(&path.display().to_string())?)?;
            if !matches!(target.want, State::Absent) && !loaded.exists() {
                create_parents(&loaded.resolved)?;
            }
            files.push((i, loaded));
        }
    }
    let entries = link_entries(ctx, root, targets, &now, &links)?;
    let more: Vec<Step<'_>> = entries
        .iter()
        .map(|(i, resolved, expected)| match &targets[*i].want {
            State::Symlink { target } => Step::Link {
                resolved,
                target: Path::new(target),
                expected: *expected,
            },
            State::File { mode, .. } => Step::Write {
                resolved,
                bytes: wanted[*i].as_deref().unwrap_or_default(),
                keep: Some(ownership(*mode, None)),
                expected: *expected,
            },
            State::Absent => Step::Remove {
                resolved,
                expected: *expected,
            },
        })
        .collect();
    let new: Vec<NewFile<'_>> = files
        .iter()
        .map(|(i, loaded)| {
            let keep = match &targets[*i].want {
                State::File { mode, .. } => Some(ownership(*mode, loaded.ownership)),
                State::Absent | State::Symlink { .. } => None,
            };
            (loaded, wanted[*i].as_deref(), keep)
        })
        .collect();
    if !new.is_empty() || !more.is_empty() {
        commit_files_and(ctx, &new, &more)?;
    }
    let mut done = Vec::with_capacity(targets.len());
    for (target, state) in targets.iter().zip(&now) {
        if matches!(target.want, State::Absent) && *state != State::Absent {
            remove_empty_parents(root.root(), &root.root().join(&target.rel));
        }
        let before_text = text_of(root, state);
        let after_text = text_of(root, &target.want);
        let (diff, _) = render_diff(&before_text, &after_text);
        let action = match (state, &target.want) {
            (a, b) if a.same(b) => "unchanged",
            (_, State::Absent) => "removed (the checkpoint saw it created)",
            (State::Absent, _) => "recreated",
            (State::File { id: a, .. }, State::File { id: b, .. }) if a == b => "mode restored",
            _ => "restored",
        };
        done.push(Done {
            rel: target.rel.clone(),
            action,
            diff,
        });
    }
    Ok(done)
}

/// What each target holds now, after checking that every one can be put back: it holds what
/// the checkpoint left (or `overwrite`), and what it should hold again was kept.
fn check(
    root: &RootCheckpoints,
    targets: &[Target],
    overwrite: bool,
    what: &str,
) -> Result<Vec<State>, ToolError> {
    let failed = |err: String| ToolError::failed(format!("{err}; nothing was restored"));
    // Check everything first: nothing changes unless every path can be put back.
    let mut now = Vec::with_capacity(targets.len());
    let mut changed = Vec::new();
    let mut unkept = Vec::new();
    for target in targets {
        let state = root.state_now(&target.rel).map_err(failed)?;
        if !state.same(&target.want) {
            if !overwrite && !state.same(&target.expect) {
                changed.push(format!("`{}`", target.rel));
            }
            if !target.want.restorable() {
                unkept.push(format!("`{}`", target.rel));
            }
        }
        now.push(state);
    }
    if !changed.is_empty() {
        return Err(ToolError::Stale(format!(
            "{} changed since {what}; nothing was restored, so that work is not lost. Look at \
             them (`diff` shows the changes since the checkpoint), or pass `overwrite: true` to \
             put them back anyway",
            changed.join(", ")
        )));
    }
    if !unkept.is_empty() {
        return Err(ToolError::failed(format!(
            "{} cannot be put back: the content was over `[checkpoints] max_file_mb` or the \
             store's size limit when it was seen, so it was not kept; nothing was restored",
            unkept.join(", ")
        )));
    }
    Ok(now)
}

/// The mode `mode` with the owner of what is there now, or this process's.
fn ownership(mode: u32, now: Option<Ownership>) -> Ownership {
    match now {
        Some(own) => Ownership { mode, ..own },
        #[cfg(unix)]
        None => Ownership {
            mode,
            uid: rustix::process::getuid().as_raw(),
            gid: rustix::process::getgid().as_raw(),
        },
        #[cfg(windows)]
        None => Ownership {
            mode,
            uid: 0,
            gid: 0,
        },
    }
}

/// The path of each of `links` (targets that are or become symbolic links) as itself (a link
/// there is not followed), its missing parents made, with what the change must find there.
fn link_entries(
    ctx: &ToolContext,
    root: &RootCheckpoints,
    targets: &[Target],
    now: &[State],
    links: &[usize],
) -> Result<Vec<(usize, ResolvedPath, Expected)>, ToolError> {
    if !links.is_empty() && !LINKS_PUT_BACK {
        return Err(ToolError::failed(format!(
            "{} involve symbolic links, which are not put back on this system; nothing was restored",
            links
                .iter()
                .map(|&i| format!("`{}`", targets[i].rel))
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    let mut entries = Vec::with_capacity(links.len());
    for &i in links {
        let path = root.root().join(&targets[i].rel);
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return Err(ToolError::failed(format!(
                "`{}` is not a file's path; nothing was restored",
                targets[i].rel
            )));
        };
        let resolved = ctx
            .resolve_allowed(&parent.display().to_string())?
            .entry(name);
        if !matches!(targets[i].want, State::Absent) {
            create_parents(&resolved)?;
        }
        let expected = expected_now(&resolved, &now[i], &targets[i].rel)?;
        entries.push((i, resolved, expected));
    }
    Ok(entries)
}

/// What the change must find at `resolved` when it goes in: what the check found there (`now`),
/// as the file system names it. A link that points elsewhere by now refuses the restore.
fn expected_now(resolved: &ResolvedPath, now: &State, rel: &str) -> Result<Expected, ToolError> {
    let changed = || {
        ToolError::Stale(format!(
            "`{rel}` changed while it was being restored; nothing was restored. Try again"
        ))
    };
    match now {
        State::Absent => Ok(Expected::Absent),
        State::File { .. } => Ok(load(resolved.clone())?.expected()),
        State::Symlink { target } => {
            let io = |err| ToolError::io(format!("reading the link {rel}"), err);
            let meta = std::fs::symlink_metadata(&resolved.path).map_err(io)?;
            let points = std::fs::read_link(&resolved.path).map_err(io)?;
            if !meta.file_type().is_symlink() || points.to_string_lossy() != target.as_str() {
                return Err(changed());
            }
            Ok(Expected::Link {
                id: FileId::of(&meta),
                target: ContentHash::of(points.as_os_str().as_encoded_bytes()),
            })
        }
    }
}

/// Removes the folders a removal left empty, up to the root.
fn remove_empty_parents(root: &Path, path: &Path) {
    let mut dir = path.parent();
    while let Some(d) = dir {
        if d == root || !d.starts_with(root) || std::fs::remove_dir(d).is_err() {
            break;
        }
        dir = d.parent();
    }
}

/// A state as text for a diff: a file's decoded content, a link's target.
fn text_of(root: &RootCheckpoints, state: &State) -> String {
    match state {
        State::Absent => String::new(),
        State::Symlink { target } => format!("symlink -> {target}\n"),
        State::File { id, kept: true, .. } => root
            .content(id)
            .ok()
            .and_then(|bytes| Document::decode(bytes).ok())
            .map(|d| d.normalized().to_owned())
            .unwrap_or_default(),
        State::File { size, .. } => format!("(a file of {size} bytes, not kept)\n"),
    }
}

/// The diff of one path from `before` to `after`, for `diff` and `checkpoints`.
pub(crate) fn diff_states(
    root: &RootCheckpoints,
    before: &State,
    after: &State,
) -> (String, DiffStats) {
    let mut heading = String::new();
    if let (State::File { mode: a, id: x, .. }, State::File { mode: b, id: y, .. }) =
        (before, after)
        && a != b
    {
        let _ = writeln!(heading, "mode {a:o} -> {b:o}");
        if x == y {
            return (heading, DiffStats::default());
        }
    }
    let (diff, stats) = render_diff(&text_of(root, before), &text_of(root, after));
    (heading + &diff, stats)
}

/// One line per path of a checkpoint's changes, for listings: created (`A`), deleted (`D`),
/// modified (`M`) with lines added and removed, renamed (`R`: the same content gone from one
/// path and come at another), mode changes, symlinks (`L`). At most `shown` lines (the rest
/// are not read), and how many there are in all.
pub(crate) fn describe(
    root: &RootCheckpoints,
    changes: &[crate::checkpoint::PathChange],
    shown: usize,
) -> (Vec<String>, usize) {
    let mut lines = Vec::new();
    let mut paired = vec![false; changes.len()];
    for (i, gone) in changes.iter().enumerate() {
        let (State::File { id, .. }, State::Absent) = (&gone.before, &gone.after) else {
            continue;
        };
        if let Some(j) = changes.iter().enumerate().position(|(j, came)| {
            !paired[j]
                && matches!((&came.before, &came.after),
                    (State::Absent, State::File { id: new, .. }) if new == id)
        }) {
            paired[i] = true;
            paired[j] = true;
            lines.push(format!("R {} -> {}", gone.path, changes[j].path));
        }
    }
    let renamed = lines.len();
    let total = changes.len() - renamed;
    for (change, paired) in changes.iter().zip(paired) {
        if paired {
            continue;
        }
        if lines.len() >= shown {
            break;
        }
        let (_, stats) = diff_states(root, &change.before, &change.after);
        let counts = format!("+{} -{}", stats.added, stats.removed);
        let line = match (&change.before, &change.after) {
            (_, State::Symlink { target }) => format!("L {} -> {target}", change.path),
            (State::Symlink { target }, State::File { .. }) => {
                format!(
                    "M {} +{} (a file again, was a link to {target})",
                    change.path, stats.added
                )
            }
            (State::Absent, _) => format!("A {} {counts}", change.path),
            (_, State::Absent) => format!("D {} {counts}", change.path),
            (State::File { mode: a, id: x, .. }, State::File { mode: b, id: y, .. })
                if a != b && x == y =>
            {
                format!("M {} mode {a:o} -> {b:o}", change.path)
            }
            (State::File { mode: a, .. }, State::File { mode: b, .. }) if a != b => {
                format!("M {} {counts}, mode {a:o} -> {b:o}", change.path)
            }
            _ => format!("M {} {counts}", change.path),
        };
        lines.push(line);
    }
    (lines, total)
}
