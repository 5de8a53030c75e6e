//! Multi-file changes on Windows: all or nothing while gimlet runs.
//!
//! [`commit_all`] prepares every new file as a flushed temporary beside its target, then puts
//! the files in one by one, each checked against what the change was computed from: a file
//! replaced or removed first moves aside under a `.NAME.gimlet-<id>.txn` name, and if a later
//! step fails (or its file changed meanwhile), the steps already in are undone in reverse. When
//! every file is in, the set-aside files go.
//!
//! Weaker than on Unix: no intent is recorded on disk, so a server killed in the middle of a
//! change leaves it half in, with the set-aside files (`.txn`) beside their targets, and
//! [`recover_pending`] has nothing to roll back.

use std::ffi::OsString;
use std::path::Path;

use crate::fs::atomic_write::{fill_temp, matches, temp_name};
use crate::fs::confine_windows::Pinned;
use crate::fs::file_state::ContentHash;
use crate::fs::paths::ResolvedPath;
use crate::fs::write::{Expected, Ownership, WriteError};

/// One file of a multi-file change.
#[derive(Debug, Clone, Copy)]
pub enum Step<'a> {
    /// Write `bytes` at the path (creating or replacing the file).
    Write {
        /// The target.
        resolved: &'a ResolvedPath,
        /// The new content.
        bytes: &'a [u8],
        /// Mode to give it (default: the existing file's).
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
    /// Put a symbolic link to `target` at the path: refused on Windows (before anything
    /// changes), where links are not put back.
    Link {
        /// The target.
        resolved: &'a ResolvedPath,
        /// Where the link points.
        target: &'a Path,
        /// What must be there when it goes in.
        expected: Expected,
    },
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
    dir: Pinned,
    name: OsString,
    display: String,
    expected: Expected,
    /// The new file's temporary name (writes), and its hash.
    temp: Option<(OsString, ContentHash)>,
    /// Where the file that was there went, once it did.
    aside: Option<OsString>,
    done: bool,
}

impl Staged {
    fn io(&self, source: std::io::Error) -> WriteError {
        WriteError::Io {
            path: self.display.clone(),
            source,
        }
    }
}

/// Makes every step, or none (see the module docs). Returns the metadata of each written file.
pub fn commit_all(
    steps: &[Step<'_>],
    _pending: Option<&Path>,
) -> Result<Vec<Option<std::fs::Metadata>>, CommitError> {
    let mut staged: Vec<Staged> = Vec::with_capacity(steps.len());
    for (index, step) in steps.iter().enumerate() {
        match stage(step) {
            Ok(s) => staged.push(s),
            Err(error) => {
                discard(&staged);
                return Err(CommitError { index, error });
            }
        }
    }
    for index in 0..staged.len() {
        if let Err(error) = put_in(&mut staged[index]) {
            for s in staged.iter_mut().rev().filter(|s| s.done) {
                take_out(s);
            }
            discard(&staged);
            return Err(CommitError { index, error });
        }
        staged[index].done = true;
    }
    let mut metas = Vec::with_capacity(staged.len());
    for s in &staged {
        if let Some(aside) = &s.aside {
            let _ = std::fs::remove_file(s.dir.path().join(aside));
        }
        metas.push(
            s.temp
                .as_ref()
                .and_then(|_| std::fs::metadata(s.dir.path().join(&s.name)).ok()),
        );
    }
    Ok(metas)
}

fn stage(step: &Step<'_>) -> Result<Staged, WriteError> {
    let (resolved, expected) = match step {
        Step::Write {
            resolved, expected, ..
        }
        | Step::Remove { resolved, expected } => (*resolved, *expected),
        Step::Link { resolved, .. } => {
            return Err(WriteError::Io {
                path: resolved.display(),
                source: std::io::Error::new(
                    std::io::ErrorKind::Unsupported,
                    "symbolic links are not put back on Windows",
                ),
            });
        }
    };
    let (dir, name) = resolved.pin_parent()?;
    let mut staged = Staged {
        dir,
        name,
        display: resolved.display(),
        expected,
        temp: None,
        aside: None,
        done: false,
    };
    if let Step::Write { bytes, .. } = step {
        let (temp, file, hash) = fill_temp(&staged.dir, &staged.name, bytes, "txn", &mut || {})
            .map_err(|e| staged.io(e))?;
        drop(file);
        staged.temp = Some((temp, hash));
    }
    Ok(staged)
}

/// Puts one prepared step in: the file there checked and moved aside, the new one renamed in.
fn put_in(s: &mut Staged) -> Result<(), WriteError> {
    if !matches(&s.dir, &s.name, &s.expected, None).map_err(|e| s.io(e))? {
        return Err(WriteError::Changed {
            path: s.display.clone(),
        });
    }
    let target = s.dir.path().join(&s.name);
    if std::fs::symlink_metadata(&target).is_ok() {
        let aside = temp_name(&s.name, "txn");
        crate::fs::atomic_write::rename_replacing(&target, &s.dir.path().join(&aside))
            .map_err(|e| s.io(e))?;
        s.aside = Some(aside);
    }
    if let Some((temp, _)) = &s.temp
        && let Err(err) =
            crate::fs::atomic_write::rename_replacing(&s.dir.path().join(temp), &target)
    {
        // Back as it was before returning the error.
        if let Some(aside) = s.aside.take() {
            let _ = std::fs::rename(s.dir.path().join(aside), &target);
        }
        return Err(s.io(err));
    }
    Ok(())
}

/// Undoes a step that went in: its new file goes, the file that was there comes back.
fn take_out(s: &mut Staged) {
    let target = s.dir.path().join(&s.name);
    if s.temp.is_some() {
        let _ = std::fs::remove_file(&target);
    }
    if let Some(aside) = s.aside.take() {
        let _ = std::fs::rename(s.dir.path().join(aside), &target);
    }
    s.done = false;
}

/// Removes the temporaries of steps that did not go in.
fn discard(staged: &[Staged]) {
    for s in staged.iter().filter(|s| !s.done) {
        if let Some((temp, _)) = &s.temp {
            let _ = std::fs::remove_file(s.dir.path().join(temp));
        }
    }
}

/// Nothing is recorded on Windows, so nothing is recovered.
pub fn recover_pending(_pending: &Path) -> usize {
    0
}
