//! Putting paths back to a checkpoint's state, for `restore` and `undo`: only the paths
//! given, each only if it still holds what the checkpoint left (unless told to overwrite),
//! files through the atomic multi-file commit and its intent log ([`commit_files`]), all or
//! nothing. Symbolic links are put back by a rename of a new link over the path (not covered by
//! the intent log). A file is removed only where the checkpoint saw it created.

use std::fmt::Write as _;
use std::path::Path;

use crate::checkpoint::{RootCheckpoints, State};
use crate::context::ToolContext;
use crate::error::ToolError;
use crate::fs::{Ownership, create_parents};
use crate::text::{DiffStats, Document, render_diff};

use super::{Loaded, NewFile, commit_files, load};

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
    for &i in &links {
        let path = root.root().join(&targets[i].rel);
        if let Some(parent) = path.parent() {
            ctx.resolve_allowed(&parent.display().to_string())?;
        }
    }
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
    if !new.is_empty() {
        commit_files(ctx, &new)?;
    }
    for &i in &links {
        put_link(
            &root.root().join(&targets[i].rel),
            &targets[i].want,
            wanted[i].as_deref(),
        )
        .map_err(|err| {
            ToolError::failed(format!(
                "`{}` could not be put back: {err}; the files before it in the list were",
                targets[i].rel
            ))
        })?;
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

/// Puts a symlink (or a file where a symlink is) at `path`, by a rename over it.
#[cfg(unix)]
fn put_link(path: &Path, want: &State, bytes: Option<&[u8]>) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    let parent = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent)?;
    let tmp = parent.join(format!(".gimlet-restore-{}", crate::util::random_hex()?));
    match want {
        State::Absent => return std::fs::remove_file(path),
        State::Symlink { target } => std::os::unix::fs::symlink(target, &tmp)?,
        State::File { mode, .. } => {
            std::fs::write(&tmp, bytes.unwrap_or_default())?;
            std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(*mode))?;
        }
    }
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// Symbolic links are not put back on Windows.
#[cfg(windows)]
fn put_link(_path: &Path, _want: &State, _bytes: Option<&[u8]>) -> std::io::Result<()> {
    Err(std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "symbolic links are not restored on Windows",
    ))
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
