//! Multi-file changes, all or nothing across crashes.
//!
//! [`commit_all`] prepares every new file as a temporary next to its target (filled, fsynced,
//! owned like the target, locked), then records the intent in the data directory
//! (`<spill dir>/.pending/<id>.json`, fsynced, locked by its writer), and only then swaps the
//! files in one by one, checking each file it replaces against what the change was computed
//! from. Each replaced or removed file waits under a `.NAME.gimlet-<id>.txn` name until every
//! file is in; if one fails (or changed meanwhile), the ones already in are swapped back. When
//! all are in, the old files go and the intent is removed.
//!
//! A step may also put a symbolic link at a path ([`Step::Link`], for `restore`), or replace or
//! remove a link ([`Expected::Link`]). A new link is made under its `.txn` name only when its
//! turn comes (a link cannot wait unnamed as a new file does), and goes in the same way; the
//! intent knows it by its target, not its inode.
//!
//! A server killed in the middle leaves the intent, unlocked. [`recover_pending`], run at the
//! next start, rolls such a change back from the names the intent lists: files already swapped
//! in are swapped back out (unless changed since), temporaries are removed. If every file had
//! gone in and only the clean-up was cut short, it finishes the clean-up instead. A change is
//! thus whole or absent, never half.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FlockOperation, Mode, OFlags};
use serde::{Deserialize, Serialize};

use crate::fs::atomic_write::{
    Expected, FileId, Ownership, TempFile, WriteError, exchange, hash_file, hold_old, id_at,
    is_exist, keep_late_appends, link_target_hash, matches, open_parent_dir, rename_noreplace,
    swap_back, sweep_once, temp_name, unlink_if,
};
use crate::fs::file_state::ContentHash;
use crate::fs::paths::{PathError, ResolvedPath};

/// One file of a multi-file change.
#[derive(Debug, Clone, Copy)]
pub enum Step<'a> {
    /// Write `bytes` at the path (creating or replacing the file).
    Write {
        /// The target.
        resolved: &'a ResolvedPath,
        /// The new content.
        bytes: &'a [u8],
        /// Mode and owner to give it (default: the existing file's, or 0644 minus the umask).
        keep: Option<Ownership>,
        /// What must be there when it goes in.
        expected: Expected,
    },
    /// Remove the file at the path.
    Remove {
        /// The target.
        resolved: &'a ResolvedPath,
        /// What must be there when it goes.
        expected: Expected,
    },
    /// Put a symbolic link to `target` at the path (creating it or replacing what is there).
    /// `resolved` must name the path itself, not where a link there points.
    Link {
        /// The target.
        resolved: &'a ResolvedPath,
        /// Where the link points.
        target: &'a Path,
        /// What must be there when it goes in.
        expected: Expected,
    },
}

impl Step<'_> {
    fn resolved(&self) -> &ResolvedPath {
        match self {
            Self::Write { resolved, .. }
            | Self::Remove { resolved, .. }
            | Self::Link { resolved, .. } => resolved,
        }
    }
}

/// Why a multi-file change did not go in. Nothing was changed.
#[derive(Debug, thiserror::Error)]
#[error("{error}")]
pub struct CommitError {
    /// The step that failed.
    pub index: usize,
    /// How.
    pub error: WriteError,
}

/// One step, prepared.
struct Staged {
    dir: OwnedFd,
    dir_path: PathBuf,
    name: OsString,
    display: String,
    expected: Expected,
    /// The new file, for writes.
    temp: Option<TempFile>,
    /// Where the new file waits (writes).
    new_aside: Option<OsString>,
    /// Where the file that was there goes (replacing writes and removes). The same name as
    /// `new_aside` when the two are swapped.
    old_aside: Option<OsString>,
    /// Where the file that was there goes instead where names cannot be swapped.
    old_fallback: Option<OsString>,
    new_hash: Option<ContentHash>,
    /// Where the new symbolic link points, for links.
    link_target: Option<PathBuf>,
    /// The new link's inode, once made.
    link_ino: Option<u64>,
    /// The file that was there, held (and share-locked) while it waits.
    old: Option<File>,
    old_ino: Option<u64>,
    done: bool,
}

/// The intent, as written to disk. Names are hex-encoded bytes (they need not be UTF-8).
#[derive(Debug, Serialize, Deserialize)]
struct Intent {
    ops: Vec<IntentOp>,
}

#[derive(Debug, Serialize, Deserialize)]
struct IntentOp {
    dir: String,
    name: String,
    new_aside: Option<String>,
    old_aside: Option<String>,
    old_fallback: Option<String>,
    new_ino: Option<u64>,
    new_hash: Option<String>,
    old_ino: Option<u64>,
    /// The new entry is a symbolic link, `new_hash` the hash of its target.
    #[serde(default)]
    new_link: bool,
}

fn unhex(text: &str) -> Option<OsString> {
    let bytes = (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect::<Option<Vec<u8>>>()?;
    Some(OsString::from_vec(bytes))
}

/// Makes every step, or none: see the module docs. With `pending` (the data directory's
/// `.pending`) and more than one step, the intent is recorded there first, so that a crash is
/// rolled back by [`recover_pending`]. Returns the metadata of each written file.
pub fn commit_all(
    steps: &[Step<'_>],
    pending: Option<&Path>,
) -> Result<Vec<Option<std::fs::Metadata>>, CommitError> {
    let mut staged: Vec<Staged> = Vec::with_capacity(steps.len());
    for (index, step) in steps.iter().enumerate() {
        match stage(step) {
            Ok(s) => staged.push(s),
            Err(error) => {
                discard(&mut staged);
                return Err(CommitError { index, error });
            }
        }
    }
    let intent = match pending.filter(|_| steps.len() > 1) {
        Some(dir) => match record(dir, &staged) {
            Ok(intent) => Some(intent),
            Err(err) => {
                tracing::warn!(
                    "cannot record a multi-file change in {}: {err}; a crash while it goes in \
                     would not be rolled back",
                    dir.display()
                );
                None
            }
        },
        None => None,
    };
    go_in(staged, intent)
}

/// Swaps the prepared steps in, in order; on a failure swaps back the ones already in. Removes
/// the intent at the end either way.
fn go_in(
    mut staged: Vec<Staged>,
    intent: Option<(PathBuf, File)>,
) -> Result<Vec<Option<std::fs::Metadata>>, CommitError> {
    let mut failed = None;
    for (index, s) in staged.iter_mut().enumerate() {
        if let Err(error) = put_in(s) {
            failed = Some(CommitError { index, error });
            break;
        }
        s.done = true;
    }
    match failed {
        Some(err) => {
            for s in staged.iter_mut().rev().filter(|s| s.done) {
                take_out(s);
            }
            discard(&mut staged);
            forget(intent);
            Err(err)
        }
        None => {
            let mut metas = Vec::with_capacity(staged.len());
            for s in &mut staged {
                if let Some(old) = &s.old_aside {
                    match s.old_ino {
                        Some(ino) => unlink_if(&s.dir, old, ino),
                        None => {
                            let _ = rustix::fs::unlinkat(&s.dir, old, AtFlags::empty());
                        }
                    }
                }
                if let (Some(_), Some(old), Expected::File { id, hash }) =
                    (&s.temp, s.old.take(), s.expected)
                {
                    keep_late_appends(&s.dir, &s.name, old, id.size, hash);
                }
                let _ = rustix::fs::fsync(&s.dir);
                metas.push(s.temp.as_ref().and_then(|t| t.file.metadata().ok()));
            }
            forget(intent);
            Ok(metas)
        }
    }
}

/// Opens, checks and prepares one step: a write's new file is filled and waits unnamed (or
/// under its `.txn` name where files cannot be unnamed).
fn stage(step: &Step<'_>) -> Result<Staged, WriteError> {
    let resolved = step.resolved();
    let display = resolved.display();
    let io = |source: std::io::Error| WriteError::Io {
        path: display.clone(),
        source,
    };
    let (dir, name) = open_parent_dir(resolved)?;
    let dir_path = resolved
        .path
        .parent()
        .unwrap_or(Path::new("/"))
        .to_path_buf();
    let now = id_at(&dir, &name).map_err(io)?;
    let expected = match step {
        Step::Write { expected, .. }
        | Step::Remove { expected, .. }
        | Step::Link { expected, .. } => *expected,
    };
    let changed = match (&now, &expected) {
        (_, Expected::Anything) | (None, Expected::Absent) => false,
        (Some(_), Expected::Absent) | (None, Expected::File { .. } | Expected::Link { .. }) => true,
        (Some(now), Expected::File { id, .. } | Expected::Link { id, .. }) => now != id,
    };
    if changed {
        return Err(WriteError::Changed { path: display });
    }
    sweep_once(&dir, &dir_path);
    let mut staged = Staged {
        dir,
        dir_path,
        name,
        display: display.clone(),
        expected,
        temp: None,
        new_aside: None,
        old_aside: None,
        old_fallback: None,
        new_hash: None,
        link_target: None,
        link_ino: None,
        old: None,
        old_ino: now.map(|id| id.ino),
        done: false,
    };
    let replaces_link = matches!(expected, Expected::Link { .. });
    match step {
        Step::Write { bytes, keep, .. } => {
            if now.is_some() && !replaces_link {
                check_writable(&staged, resolved)?;
            }
            // A link's own mode is no file's.
            let ownership = keep.or_else(|| {
                (!replaces_link)
                    .then(|| existing_ownership(&staged))
                    .flatten()
            });
            let temp = TempFile::create(
                &staged.dir,
                &staged.name,
                bytes,
                ownership,
                "txn",
                &mut || {},
            )
            .map_err(io)?;
            let aside = temp
                .name
                .clone()
                .unwrap_or_else(|| temp_name(&staged.name, "txn"));
            staged.new_aside = Some(aside.clone());
            if now.is_some() {
                staged.old_aside = Some(aside);
                staged.old_fallback = Some(temp_name(&staged.name, "txn"));
            }
            // Hashed once, as it was written.
            staged.new_hash = Some(temp.hash);
            staged.temp = Some(temp);
        }
        Step::Remove { .. } => {
            if now.is_none() {
                return Err(PathError::NotFound {
                    path: display,
                    hint: String::new(),
                }
                .into());
            }
            if !replaces_link {
                check_writable(&staged, resolved)?;
            }
            staged.old_aside = Some(temp_name(&staged.name, "txn"));
        }
        Step::Link { target, .. } => {
            if now.is_some() && !replaces_link {
                check_writable(&staged, resolved)?;
            }
            stage_link(&mut staged, target, now.is_some());
        }
    }
    Ok(staged)
}

/// Prepares a link step: its names and the hash of its target (the link is made in
/// [`put_in`]). `replaces`: something is at the path.
fn stage_link(staged: &mut Staged, target: &Path, replaces: bool) {
    let aside = temp_name(&staged.name, "txn");
    staged.link_target = Some(target.to_path_buf());
    staged.new_hash = Some(ContentHash::of(target.as_os_str().as_bytes()));
    staged.new_aside = Some(aside.clone());
    if replaces {
        staged.old_aside = Some(aside);
        staged.old_fallback = Some(temp_name(&staged.name, "txn"));
    }
}

/// Refuses what single writes refuse: a directory, a special file, a hard-linked file.
fn check_writable(staged: &Staged, resolved: &ResolvedPath) -> Result<(), WriteError> {
    let stat =
        rustix::fs::statat(&staged.dir, &staged.name, AtFlags::SYMLINK_NOFOLLOW).map_err(|e| {
            WriteError::Io {
                path: staged.display.clone(),
                source: e.into(),
            }
        })?;
    let path = resolved.display();
    match crate::fs::raw::file_type(&stat) {
        rustix::fs::FileType::RegularFile if crate::fs::raw::links(&stat) > 1 => {
            Err(WriteError::HardLinked {
                path,
                links: crate::fs::raw::links(&stat),
            })
        }
        rustix::fs::FileType::RegularFile => Ok(()),
        rustix::fs::FileType::Directory => Err(WriteError::Directory { path }),
        other => Err(WriteError::NotRegular {
            path,
            kind: crate::fs::file_kind(other),
        }),
    }
}

fn existing_ownership(staged: &Staged) -> Option<Ownership> {
    let stat = rustix::fs::statat(&staged.dir, &staged.name, AtFlags::SYMLINK_NOFOLLOW).ok()?;
    Some(Ownership {
        mode: crate::fs::raw::mode(&stat) & 0o7777,
        uid: stat.st_uid,
        gid: stat.st_gid,
    })
}

/// Writes the intent and fsyncs it; the returned file holds its lock while the change goes in.
fn record(dir: &Path, staged: &[Staged]) -> std::io::Result<(PathBuf, File)> {
    std::fs::create_dir_all(dir)?;
    let ops = staged
        .iter()
        .map(|s| IntentOp {
            dir: crate::util::hex(s.dir_path.as_os_str().as_bytes()),
            name: crate::util::hex(s.name.as_bytes()),
            new_aside: s.new_aside.as_ref().map(|n| crate::util::hex(n.as_bytes())),
            old_aside: s.old_aside.as_ref().map(|n| crate::util::hex(n.as_bytes())),
            old_fallback: s
                .old_fallback
                .as_ref()
                .map(|n| crate::util::hex(n.as_bytes())),
            new_ino: s.temp.as_ref().map(|t| t.id.ino),
            new_hash: s.new_hash.map(|h| h.to_string()),
            old_ino: s.old_ino,
            new_link: s.link_target.is_some(),
        })
        .collect();
    let text = serde_json::to_vec(&Intent { ops })?;
    let id = crate::util::random_hex()?;
    let path = dir.join(format!("{id}.json"));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)?;
    rustix::fs::flock(&file, FlockOperation::LockExclusive)?;
    file.write_all(&text)?;
    file.sync_all()?;
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok((path, file))
}

/// Removes the intent once nothing is left to roll back.
fn forget(intent: Option<(PathBuf, File)>) {
    if let Some((path, file)) = intent {
        let _ = std::fs::remove_file(&path);
        if let Some(dir) = path.parent()
            && let Ok(d) = File::open(dir)
        {
            let _ = d.sync_all();
        }
        drop(file);
    }
}

/// Swaps one prepared step in, checking the file it replaces.
fn put_in(s: &mut Staged) -> Result<(), WriteError> {
    let display = s.display.clone();
    let io = |source: std::io::Error| WriteError::Io {
        path: display.clone(),
        source,
    };
    let changed = || WriteError::Changed {
        path: s.display.clone(),
    };
    if let (Some(temp), Some(aside)) = (s.temp.as_mut(), s.new_aside.clone())
        && temp.name.is_none()
    {
        temp.link_as(&s.dir, &aside).map_err(io)?;
    }
    if let (Some(target), Some(aside), None) = (&s.link_target, &s.new_aside, s.link_ino) {
        rustix::fs::symlinkat(target, &s.dir, aside).map_err(|e| io(e.into()))?;
        s.link_ino = id_at(&s.dir, aside).map_err(io)?.map(|id| id.ino);
    }
    match (&s.new_aside, &s.old_aside) {
        // A new file.
        (Some(new), None) => match rename_noreplace(&s.dir, new, &s.name) {
            Ok(()) => Ok(()),
            Err(e) if is_exist(&e) => Err(changed()),
            Err(e) => Err(io(e)),
        },
        // A replaced file.
        (Some(new), Some(_)) => {
            let new = new.clone();
            s.old = hold_old(&s.dir, &s.name);
            if exchange(&s.dir, &new, &s.name).map_err(io)? {
                if matches(&s.dir, &new, &s.expected, s.old.as_mut(), None).map_err(io)? {
                    return Ok(());
                }
                match &s.temp {
                    Some(temp) => swap_back(&s.dir, &s.name, &new, temp),
                    // A link: nothing can have been written into it.
                    None => {
                        let _ = exchange(&s.dir, &new, &s.name);
                    }
                }
                return Err(changed());
            }
            // No exchange here: the old file moves aside under a name of its own first.
            let old_aside = s
                .old_fallback
                .clone()
                .unwrap_or_else(|| temp_name(&s.name, "txn"));
            rename_noreplace(&s.dir, &s.name, &old_aside).map_err(io)?;
            s.old_aside = Some(old_aside.clone());
            if !matches(&s.dir, &old_aside, &s.expected, s.old.as_mut(), None).map_err(io)? {
                let _ = rename_noreplace(&s.dir, &old_aside, &s.name);
                return Err(changed());
            }
            if let Err(e) = rename_noreplace(&s.dir, &new, &s.name) {
                let _ = rename_noreplace(&s.dir, &old_aside, &s.name);
                return Err(if is_exist(&e) { changed() } else { io(e) });
            }
            Ok(())
        }
        // A removed file.
        (None, Some(old_aside)) => {
            let old_aside = old_aside.clone();
            s.old = hold_old(&s.dir, &s.name);
            rename_noreplace(&s.dir, &s.name, &old_aside).map_err(io)?;
            if matches(&s.dir, &old_aside, &s.expected, s.old.as_mut(), None).map_err(io)? {
                return Ok(());
            }
            let _ = rename_noreplace(&s.dir, &old_aside, &s.name);
            Err(changed())
        }
        (None, None) => Ok(()),
    }
}

/// Undoes a step that went in.
fn take_out(s: &mut Staged) {
    let new_ino = s.temp.as_ref().map(|t| t.id.ino).or(s.link_ino);
    match (&s.new_aside, &s.old_aside) {
        (Some(new), None) => {
            // Created: it goes back to waiting, to be discarded.
            if let Some(ino) = new_ino
                && id_at(&s.dir, &s.name)
                    .ok()
                    .flatten()
                    .is_some_and(|id| id.ino == ino)
            {
                let _ = rename_noreplace(&s.dir, &s.name, new);
            }
        }
        (Some(new), Some(old)) if new == old => {
            let _ = exchange(&s.dir, new, &s.name);
        }
        (Some(new), Some(old)) => {
            let _ = rename_noreplace(&s.dir, &s.name, new);
            let _ = rename_noreplace(&s.dir, old, &s.name);
        }
        (None, Some(old)) => {
            let _ = rename_noreplace(&s.dir, old, &s.name);
        }
        (None, None) => {}
    }
    s.done = false;
}

/// Removes the prepared new files that did not go in.
fn discard(staged: &mut [Staged]) {
    for s in staged {
        if let (Some(ino), Some(aside)) = (s.link_ino, &s.new_aside) {
            unlink_if(&s.dir, aside, ino);
        }
        if let Some(temp) = &mut s.temp {
            if let Some(aside) = &s.new_aside
                && temp.name.is_some()
            {
                unlink_if(&s.dir, aside, temp.id.ino);
            }
            temp.name = None;
        }
    }
}

/// Rolls back the multi-file changes whose writer died in the middle (their intent is still in
/// `pending` and unlocked). Run at start. Returns how many were rolled back.
pub fn recover_pending(pending: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(pending) else {
        return 0;
    };
    let mut recovered = 0;
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let Ok(file) = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
        else {
            continue;
        };
        if rustix::fs::flock(&file, FlockOperation::NonBlockingLockExclusive).is_err() {
            continue; // Its writer is alive.
        }
        let intent: Option<Intent> = std::fs::read(&path)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok());
        // An intent cut short was never complete, so nothing went in after it.
        if let Some(intent) = intent {
            let complete = intent.ops.iter().all(|op| went_in(op).unwrap_or(false));
            for op in intent.ops.iter().rev() {
                // Every file went in: only the clean-up was cut short; finish it. Otherwise
                // put every file back.
                let result = if complete { finish(op) } else { roll_back(op) };
                if let Err(err) = result {
                    tracing::warn!("recovering an interrupted change: {err}");
                }
            }
            recovered += 1;
        }
        let _ = std::fs::remove_file(&path);
    }
    if recovered > 0 {
        tracing::info!("rolled back {recovered} multi-file change(s) interrupted by a crash");
    }
    recovered
}

/// The names of one step, decoded, and its directory.
struct OpNames {
    dir: OwnedFd,
    name: OsString,
    new_aside: Option<OsString>,
    old_aside: Option<OsString>,
    old_fallback: Option<OsString>,
}

fn open_op(op: &IntentOp) -> std::io::Result<OpNames> {
    let bad = || std::io::Error::new(std::io::ErrorKind::InvalidData, "bad intent");
    let dir_path = PathBuf::from(unhex(&op.dir).ok_or_else(bad)?);
    let dir: OwnedFd = rustix::fs::open(
        &dir_path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    Ok(OpNames {
        dir,
        name: unhex(&op.name).ok_or_else(bad)?,
        new_aside: op.new_aside.as_deref().map(unhex).transpose_ok(bad)?,
        old_aside: op.old_aside.as_deref().map(unhex).transpose_ok(bad)?,
        old_fallback: op.old_fallback.as_deref().map(unhex).transpose_ok(bad)?,
    })
}

/// Whether a step of an interrupted change had gone in: its new file under the name, or (for
/// a removal) no file there.
fn went_in(op: &IntentOp) -> std::io::Result<bool> {
    let names = open_op(op)?;
    if op.new_link {
        return Ok(is_our_link(op, &names.dir, &names.name));
    }
    let at_name = id_at(&names.dir, &names.name)?.map(|id| id.ino);
    Ok(match op.new_ino {
        Some(ino) => at_name == Some(ino),
        None => at_name.is_none(),
    })
}

/// Whether `name` is the symbolic link a step of an interrupted change made (by its target).
fn is_our_link(op: &IntentOp, dir: &OwnedFd, name: &OsStr) -> bool {
    op.new_link
        && link_target_hash(dir, name)
            .is_ok_and(|now| op.new_hash.as_deref().and_then(ContentHash::parse) == Some(now))
}

/// Completes one step of a change whose files all went in: the old files go.
fn finish(op: &IntentOp) -> std::io::Result<()> {
    let names = open_op(op)?;
    if let Some(old_ino) = op.old_ino {
        for old in [&names.old_aside, &names.old_fallback]
            .into_iter()
            .flatten()
        {
            unlink_if(&names.dir, old, old_ino);
        }
    }
    let _ = rustix::fs::fsync(&names.dir);
    Ok(())
}

/// Puts one step of an interrupted change back as it was, from what its names hold now.
fn roll_back(op: &IntentOp) -> std::io::Result<()> {
    let OpNames {
        dir,
        name,
        new_aside,
        old_aside,
        old_fallback,
    } = open_op(op)?;
    let ino_at = |n: &OsStr| id_at(&dir, n).ok().flatten().map(|id: FileId| id.ino);
    let at_name = ino_at(&name);
    // Where the file that was there waits, if anywhere.
    let old_at = [&old_aside, &old_fallback]
        .into_iter()
        .flatten()
        .find(|n| op.old_ino.is_some() && ino_at(n) == op.old_ino)
        .cloned();
    let went_in = (op.new_ino.is_some() && at_name == op.new_ino) || is_our_link(op, &dir, &name);
    if went_in {
        // Our new file is in. Take it out unless someone changed it since.
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let hash = if op.new_link {
            link_target_hash(&dir, &name).ok()
        } else {
            rustix::fs::openat(&dir, &name, flags, Mode::empty())
                .ok()
                .and_then(|fd| hash_file(&mut File::from(fd)).ok())
        };
        let unchanged = match (&op.new_hash, hash) {
            (Some(want), Some(now)) => ContentHash::parse(want) == Some(now),
            _ => false,
        };
        if !unchanged {
            return Ok(());
        }
        match &old_at {
            Some(old) if new_aside.as_ref() == Some(old) => {
                exchange(&dir, old, &name)?;
            }
            Some(old) => rustix::fs::renameat(&dir, old, &dir, &name)?,
            // It was created by the change.
            None if op.old_ino.is_none() => rustix::fs::unlinkat(&dir, &name, AtFlags::empty())?,
            // What was there is gone: leave the new file rather than nothing.
            None => return Ok(()),
        }
    } else if at_name.is_none()
        && let Some(old) = &old_at
    {
        // A removed (or moved-aside) file whose replacement never came: it goes back.
        rename_noreplace(&dir, old, &name)?;
    }
    if let (Some(new), Some(ino)) = (&new_aside, op.new_ino) {
        unlink_if(&dir, new, ino);
    }
    if let Some(new) = &new_aside
        && is_our_link(op, &dir, new)
    {
        let _ = rustix::fs::unlinkat(&dir, new, AtFlags::empty());
    }
    let _ = rustix::fs::fsync(&dir);
    Ok(())
}

/// `Option<Option<T>>` from a fallible decode, as `Result<Option<T>, E>`.
trait TransposeOk<T> {
    fn transpose_ok<E>(self, err: impl Fn() -> E) -> Result<Option<T>, E>;
}

impl<T> TransposeOk<T> for Option<Option<T>> {
    fn transpose_ok<E>(self, err: impl Fn() -> E) -> Result<Option<T>, E> {
        match self {
            None => Ok(None),
            Some(Some(v)) => Ok(Some(v)),
            Some(None) => Err(err()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt;

    use super::*;
    use crate::fs::RootSet;
    use crate::testutil::TestWorkspace;

    fn resolve(ws: &TestWorkspace, path: &str) -> ResolvedPath {
        RootSet::open([ws.root()]).unwrap().resolve(path).unwrap()
    }

    fn expected(ws: &TestWorkspace, path: &str) -> Expected {
        let path = ws.root().join(path);
        match std::fs::metadata(&path) {
            Ok(meta) => Expected::File {
                id: FileId::of(&meta),
                hash: ContentHash::of(&std::fs::read(&path).unwrap()),
            },
            Err(_) => Expected::Absent,
        }
    }

    /// Every file below the root, temporaries included.
    fn files(ws: &TestWorkspace) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = std::fs::read_dir(ws.root())
            .unwrap()
            .map(|e| e.unwrap())
            .filter(|e| e.file_type().unwrap().is_file())
            .map(|e| {
                (
                    e.file_name().to_string_lossy().into_owned(),
                    std::fs::read_to_string(e.path()).unwrap(),
                )
            })
            .collect();
        out.sort();
        out
    }

    /// A patch-like change: `a` and `b` rewritten, `c` created, `d` removed.
    fn scenario(ws: &TestWorkspace) -> Vec<(ResolvedPath, Option<&'static str>, Expected)> {
        ws.write("a", "a0\n");
        ws.write("b", "b0\n");
        ws.write("d", "d0\n");
        vec![
            (resolve(ws, "a"), Some("a1\n"), expected(ws, "a")),
            (resolve(ws, "b"), Some("b1\n"), expected(ws, "b")),
            (resolve(ws, "c"), Some("c1\n"), Expected::Absent),
            (resolve(ws, "d"), None, expected(ws, "d")),
        ]
    }

    fn steps<'a>(plan: &'a [(ResolvedPath, Option<&'static str>, Expected)]) -> Vec<Step<'a>> {
        plan.iter()
            .map(|(resolved, new, expected)| match new {
                Some(text) => Step::Write {
                    resolved,
                    bytes: text.as_bytes(),
                    keep: None,
                    expected: *expected,
                },
                None => Step::Remove {
                    resolved,
                    expected: *expected,
                },
            })
            .collect()
    }

    fn before() -> Vec<(String, String)> {
        ["a0", "b0", "d0"]
            .iter()
            .map(|c| (c[..1].to_owned(), format!("{c}\n")))
            .collect()
    }

    #[test]
    fn all_or_nothing_in_process() {
        let ws = TestWorkspace::new();
        let pending = ws.root().join("../pending-in-process");
        let plan = scenario(&ws);
        commit_all(&steps(&plan), Some(&pending)).unwrap();
        assert_eq!(
            files(&ws),
            vec![
                ("a".into(), "a1\n".into()),
                ("b".into(), "b1\n".into()),
                ("c".into(), "c1\n".into())
            ]
        );
        assert_eq!(std::fs::read_dir(&pending).unwrap().count(), 0);
        // The last file changed meanwhile: nothing is changed, nothing is left.
        let ws = TestWorkspace::new();
        let plan = scenario(&ws);
        std::fs::write(ws.root().join("d"), "d changed\n").unwrap();
        let err = commit_all(&steps(&plan), Some(&pending)).unwrap_err();
        assert_eq!(err.index, 3);
        assert!(matches!(err.error, WriteError::Changed { .. }), "{err}");
        let mut want = before();
        want[2].1 = "d changed\n".into();
        assert_eq!(files(&ws), want);
        // ... also when the change comes after the files were prepared, at the last moment:
        // the files already in are swapped back out.
        for (changed, index) in [("d", 3), ("b", 1)] {
            let ws = TestWorkspace::new();
            let plan = scenario(&ws);
            let staged: Vec<Staged> = steps(&plan).iter().map(|s| stage(s).unwrap()).collect();
            let intent = record(&pending, &staged).unwrap();
            std::fs::write(ws.root().join(changed), "late\n").unwrap();
            let err = go_in(staged, Some(intent)).unwrap_err();
            assert_eq!(err.index, index);
            let mut want = before();
            let i = want.iter().position(|(n, _)| n == changed).unwrap();
            want[i].1 = "late\n".into();
            assert_eq!(files(&ws), want, "{changed}");
            assert_eq!(std::fs::read_dir(&pending).unwrap().count(), 0);
        }
    }

    /// Runs a change and stops it after `steps_in` files went in, as a crash would: nothing is
    /// cleaned up, every lock is released.
    fn crash_after(plan: &[Step<'_>], pending: &Path, steps_in: usize) {
        let mut staged: Vec<Staged> = plan.iter().map(|s| stage(s).unwrap()).collect();
        let intent = record(pending, &staged).unwrap();
        for s in staged.iter_mut().take(steps_in) {
            put_in(s).unwrap();
        }
        drop(intent);
        drop(staged);
    }

    #[test]
    fn a_crash_at_any_step_is_undone_or_completed_at_the_next_start() {
        for named in [false, true] {
            crate::fs::atomic_write::FORCE_NAMED.with(|f| f.set(named));
            for steps_in in 0..=4 {
                let ws = TestWorkspace::new();
                let pending = ws.root().join(format!("../pending-{steps_in}"));
                let plan = scenario(&ws);
                crash_after(&steps(&plan), &pending, steps_in);
                assert_eq!(recover_pending(&pending), 1);
                // Whole or absent: back as before, or (every file in) kept as the change made it.
                let want = if steps_in < 4 {
                    before()
                } else {
                    vec![
                        ("a".into(), "a1\n".into()),
                        ("b".into(), "b1\n".into()),
                        ("c".into(), "c1\n".into()),
                    ]
                };
                assert_eq!(
                    files(&ws),
                    want,
                    "crash after {steps_in} steps (named {named})"
                );
                assert_eq!(std::fs::read_dir(&pending).unwrap().count(), 0);
            }
        }
        crate::fs::atomic_write::FORCE_NAMED.with(|f| f.set(false));
    }

    #[test]
    fn a_crash_after_every_file_went_in_keeps_the_change() {
        let ws = TestWorkspace::new();
        let pending = ws.root().join("../pending-complete");
        let plan = scenario(&ws);
        let mut staged: Vec<Staged> = steps(&plan).iter().map(|s| stage(s).unwrap()).collect();
        let intent = record(&pending, &staged).unwrap();
        for s in &mut staged {
            put_in(s).unwrap();
        }
        // The clean-up had removed one old file when the crash came.
        let old = staged[0].old_aside.clone().unwrap();
        rustix::fs::unlinkat(&staged[0].dir, &old, AtFlags::empty()).unwrap();
        drop(intent);
        drop(staged);
        assert_eq!(recover_pending(&pending), 1);
        assert_eq!(
            files(&ws),
            vec![
                ("a".into(), "a1\n".into()),
                ("b".into(), "b1\n".into()),
                ("c".into(), "c1\n".into())
            ]
        );
    }

    #[test]
    fn recovery_leaves_a_live_change_and_a_file_changed_since() {
        let ws = TestWorkspace::new();
        let pending = ws.root().join("../pending-live");
        let plan = scenario(&ws);
        let mut staged: Vec<Staged> = steps(&plan).iter().map(|s| stage(s).unwrap()).collect();
        let intent = record(&pending, &staged).unwrap();
        put_in(&mut staged[0]).unwrap();
        // Its writer holds the intent's lock: another server's recovery leaves it.
        assert_eq!(recover_pending(&pending), 0);
        assert_eq!(
            std::fs::read_to_string(ws.root().join("a")).unwrap(),
            "a1\n"
        );
        drop(intent);
        drop(staged);
        // After the crash, someone edits `a`: the rollback keeps their edit.
        std::fs::write(ws.root().join("a"), "edited after\n").unwrap();
        assert_eq!(recover_pending(&pending), 1);
        let mut want = before();
        want[0].1 = "edited after\n".into();
        let got: Vec<_> = files(&ws)
            .into_iter()
            .filter(|(n, _)| !n.starts_with('.'))
            .collect();
        assert_eq!(got, want);
        let meta = std::fs::metadata(ws.root().join("b")).unwrap();
        assert_eq!(meta.nlink(), 1);
    }

    /// Every entry of the root, temporaries included: a file's content or a link's target.
    fn entries(ws: &TestWorkspace) -> Vec<(String, char, String)> {
        let mut out: Vec<_> = std::fs::read_dir(ws.root())
            .unwrap()
            .map(|e| e.unwrap())
            .map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                if e.file_type().unwrap().is_symlink() {
                    let target = std::fs::read_link(e.path()).unwrap();
                    (name, 'l', target.display().to_string())
                } else {
                    (name, 'f', std::fs::read_to_string(e.path()).unwrap())
                }
            })
            .collect();
        out.sort();
        out
    }

    fn link_expected(ws: &TestWorkspace, name: &str) -> Expected {
        let path = ws.root().join(name);
        let target = std::fs::read_link(&path).unwrap();
        Expected::Link {
            id: FileId::of(&std::fs::symlink_metadata(&path).unwrap()),
            target: ContentHash::of(target.as_os_str().as_bytes()),
        }
    }

    /// The entry `name` of the root, as itself (not where a link there points).
    fn entry(ws: &TestWorkspace, name: &str) -> ResolvedPath {
        resolve(ws, ".").entry(OsStr::new(name))
    }

    /// The steps of [`links_go_in_all_or_nothing_across_a_crash`].
    fn link_plan<'a>(names: &'a [ResolvedPath; 5], expected: &[Expected; 5]) -> Vec<Step<'a>> {
        vec![
            Step::Link {
                resolved: &names[0],
                target: Path::new("b"),
                expected: expected[0],
            },
            Step::Link {
                resolved: &names[1],
                target: Path::new("a"),
                expected: expected[1],
            },
            Step::Write {
                resolved: &names[2],
                bytes: b"w1\n",
                keep: None,
                expected: expected[2],
            },
            Step::Remove {
                resolved: &names[3],
                expected: expected[3],
            },
            Step::Link {
                resolved: &names[4],
                target: Path::new("z"),
                expected: expected[4],
            },
        ]
    }

    /// A restore-like change of links: one repointed, a file made a link, a link made a
    /// file, a link removed, one created.
    #[test]
    fn links_go_in_all_or_nothing_across_a_crash() {
        let setup = |ws: &TestWorkspace| {
            std::os::unix::fs::symlink("a", ws.root().join("l1")).unwrap();
            ws.write("f", "f0\n");
            std::os::unix::fs::symlink("x", ws.root().join("l2")).unwrap();
            std::os::unix::fs::symlink("y", ws.root().join("l3")).unwrap();
            let names = ["l1", "f", "l2", "l3", "l4"].map(|n| entry(ws, n));
            let expected = [
                link_expected(ws, "l1"),
                expected(ws, "f"),
                link_expected(ws, "l2"),
                link_expected(ws, "l3"),
                Expected::Absent,
            ];
            (names, expected, entries(ws))
        };
        let after: Vec<(String, char, String)> = [
            ("f", 'l', "a"),
            ("l1", 'l', "b"),
            ("l2", 'f', "w1\n"),
            ("l4", 'l', "z"),
        ]
        .iter()
        .map(|(n, k, c)| ((*n).to_owned(), *k, (*c).to_owned()))
        .collect();
        // In one go.
        let ws = TestWorkspace::new();
        let pending = ws.root().join("../pending-links");
        let (names, expected, _) = setup(&ws);
        commit_all(&link_plan(&names, &expected), Some(&pending)).unwrap();
        assert_eq!(entries(&ws), after);
        // A link repointed after the change was computed: nothing changes, nothing is left.
        let ws = TestWorkspace::new();
        let (names, expected, _) = setup(&ws);
        std::fs::remove_file(ws.root().join("l3")).unwrap();
        std::os::unix::fs::symlink("elsewhere", ws.root().join("l3")).unwrap();
        let before = entries(&ws);
        let err = commit_all(&link_plan(&names, &expected), Some(&pending)).unwrap_err();
        assert_eq!(err.index, 3);
        assert_eq!(entries(&ws), before);
        // Killed after any step: the next start puts every link back, or keeps them all.
        for named in [false, true] {
            crate::fs::atomic_write::FORCE_NAMED.with(|f| f.set(named));
            for steps_in in 0..=5 {
                let ws = TestWorkspace::new();
                let pending = ws.root().join(format!("../pending-links-{steps_in}"));
                let (names, expected, before) = setup(&ws);
                crash_after(&link_plan(&names, &expected), &pending, steps_in);
                assert_eq!(recover_pending(&pending), 1);
                let want = if steps_in < 5 { &before } else { &after };
                assert_eq!(
                    &entries(&ws),
                    want,
                    "crash after {steps_in} (named {named})"
                );
                assert_eq!(std::fs::read_dir(&pending).unwrap().count(), 0);
            }
        }
        crate::fs::atomic_write::FORCE_NAMED.with(|f| f.set(false));
    }
}
