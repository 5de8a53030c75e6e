//! The change flow, a room of its own above the file system and the call context: the steps
//! every file-changing tool takes, in one place: load the current file, check that
//! the session's view of it is fresh, commit the new content atomically, journal it for `undo`,
//! and remember the new state. Tools call these from `ctx.blocking` while holding the path's
//! lock (`ctx.env().locks()`).

pub(crate) mod edit;
pub(crate) mod restore;

use std::io::{Read, Seek};
use std::time::SystemTime;

use crate::context::ToolContext;
use crate::error::ToolError;
use crate::fs::{
    Before, CommitError, ContentHash, Expected, FileId, FileStamp, Journal, JournalEntry,
    Ownership, PathError, ResolvedPath, Step, WriteError, commit_all, remove_checked,
    write_checked_against,
};

/// Largest file the edit tools load.
pub(crate) const MAX_EDIT_BYTES: u64 = 256 * 1024 * 1024;

/// A file as it is now, before a change.
#[derive(Debug, Clone)]
pub(crate) struct Loaded {
    /// Where it is.
    pub resolved: ResolvedPath,
    /// Its content, or `None` when nothing is there.
    pub bytes: Option<Vec<u8>>,
    /// Mode and owner, when it exists.
    pub ownership: Option<Ownership>,
    /// Its hash, when it exists.
    pub hash: Option<ContentHash>,
    /// Which file it is, as read (the change checks it is still that file when it goes in).
    pub id: Option<FileId>,
}

impl Loaded {
    /// Whether a file is there.
    pub(crate) fn exists(&self) -> bool {
        self.bytes.is_some()
    }

    /// What a change made from this view expects at the path when it goes in.
    pub(crate) fn expected(&self) -> Expected {
        match (self.id, self.hash) {
            (Some(id), Some(hash)) => Expected::File { id, hash },
            _ => Expected::Absent,
        }
    }
}

impl From<WriteError> for ToolError {
    fn from(err: WriteError) -> Self {
        match err {
            WriteError::Path(path) => Self::Path(path),
            changed @ WriteError::Changed { .. } => Self::Stale(changed.to_string()),
            other => Self::Failed(other.to_string()),
        }
    }
}

/// Times a file is read again when it changes while being read.
const LOAD_ATTEMPTS: usize = 5;

/// Loads the file at `resolved` (nothing there is fine; a directory or special file is not).
/// The content and the file's identity are taken together: a file that changes while it is
/// read is read again.
pub(crate) fn load(resolved: ResolvedPath) -> Result<Loaded, ToolError> {
    let (mut file, meta) = match resolved.open_regular() {
        Ok(opened) => opened,
        Err(PathError::NotFound { .. }) => {
            return Ok(Loaded {
                resolved,
                bytes: None,
                ownership: None,
                hash: None,
                id: None,
            });
        }
        Err(PathError::IsADirectory { path, .. }) => {
            return Err(ToolError::invalid(format!(
                "`{path}` is a directory; give a file path"
            )));
        }
        Err(other) => return Err(other.into()),
    };
    let too_big = |len: u64| {
        ToolError::failed(format!(
            "`{}` is {len} bytes; the file tools change files up to {MAX_EDIT_BYTES} bytes",
            resolved.display(),
        ))
    };
    let read_error = |e| ToolError::io(format!("reading {}", resolved.display()), e);
    let mut before = meta;
    for _ in 0..LOAD_ATTEMPTS {
        if before.len() > MAX_EDIT_BYTES {
            return Err(too_big(before.len()));
        }
        let mut bytes = Vec::with_capacity(usize::try_from(before.len()).unwrap_or(0));
        file.rewind().map_err(read_error)?;
        (&mut file)
            .take(MAX_EDIT_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(read_error)?;
        let after = file.metadata().map_err(read_error)?;
        if FileId::of(&after) == FileId::of(&before) && bytes.len() as u64 == after.len() {
            let hash = ContentHash::of_loaded(&bytes);
            return Ok(Loaded {
                ownership: Some(Ownership::of(&after)),
                hash: Some(hash),
                id: Some(FileId::of(&after)),
                bytes: Some(bytes),
                resolved,
            });
        }
        before = after;
    }
    Err(ToolError::Stale(format!(
        "`{}` kept changing while it was read; try again when it is quiet",
        resolved.display()
    )))
}

/// Fails unless the change is made from a fresh view of the file: `expected_hash` matches,
/// or the session read (or wrote) the file and it has not changed since. A file that does not
/// exist needs no view. When the user approved a preview, the file must still be as previewed.
pub(crate) fn check_fresh(
    ctx: &ToolContext,
    loaded: &Loaded,
    expected_hash: Option<&str>,
) -> Result<(), ToolError> {
    let display = loaded.resolved.display();
    if let Some(previewed) = ctx.preview_of(&loaded.resolved.path)
        && previewed != loaded.hash
    {
        return Err(ToolError::Stale(format!(
            "`{display}` changed while the user was deciding; the approved change no longer \
             applies. Read the file again and retry"
        )));
    }
    if let Some(expected) = expected_hash {
        let expected = ContentHash::parse(expected).ok_or_else(|| {
            ToolError::invalid(format!(
                "`expected_hash` `{expected}` is not a content hash; use the 16 hex digits that `read` reports"
            ))
        })?;
        return match loaded.hash {
            Some(now) if now == expected => Ok(()),
            Some(now) => Err(ToolError::Stale(format!(
                "`{display}` changed: its hash is {now}, not the expected {expected}. Read it again \
                 and retry with the new hash"
            ))),
            None => Err(ToolError::Stale(format!(
                "`{display}` does not exist, but an `expected_hash` was given; read the path again"
            ))),
        };
    }
    let Some(now) = loaded.hash else {
        return Ok(());
    };
    match ctx.session().files().get(&loaded.resolved.path) {
        None => Err(ToolError::Stale(format!(
            "`{display}` has not been read in this session; read it first (so that nothing is \
             overwritten unseen), or pass the `expected_hash` from an earlier read"
        ))),
        Some(stamp) if stamp.hash != now => Err(ToolError::Stale(format!(
            "`{display}` changed on disk since this session read it (hash {} then, {now} now); \
             read it again and retry",
            stamp.hash
        ))),
        Some(_) => Ok(()),
    }
}

/// The rule for patches: a file this session read must be unchanged since (and a previewed
/// one unchanged since the preview); a file it never read may be patched, the patch's context
/// lines being the check.
pub(crate) fn check_not_stale(ctx: &ToolContext, loaded: &Loaded) -> Result<(), ToolError> {
    let display = loaded.resolved.display();
    if let Some(previewed) = ctx.preview_of(&loaded.resolved.path)
        && previewed != loaded.hash
    {
        return Err(ToolError::Stale(format!(
            "`{display}` changed while the user was deciding; read it again and retry"
        )));
    }
    match (
        ctx.session().files().get(&loaded.resolved.path),
        loaded.hash,
    ) {
        (Some(stamp), Some(now)) if stamp.hash != now => Err(ToolError::Stale(format!(
            "`{display}` changed on disk since this session read it; read it again and retry"
        ))),
        _ => Ok(()),
    }
}

/// Writes `new` over the loaded file (or removes it for `None`), journals the change, and
/// records the new state. Returns the new hash.
pub(crate) fn commit(
    ctx: &ToolContext,
    tool: &str,
    change: u64,
    loaded: &Loaded,
    new: Option<&[u8]>,
) -> Result<Option<ContentHash>, ToolError> {
    commit_meanwhile(ctx, tool, change, loaded, new, &mut || {})
}

/// [`commit`], running `meanwhile` while the new content goes to the disk (see
/// [`write_checked_against`]): the caller's diff, for one, costs no time there.
pub(crate) fn commit_meanwhile(
    ctx: &ToolContext,
    tool: &str,
    change: u64,
    loaded: &Loaded,
    new: Option<&[u8]>,
    meanwhile: &mut dyn FnMut(),
) -> Result<Option<ContentHash>, ToolError> {
    let path = &loaded.resolved.path;
    ctx.record_change(path, loaded.bytes.as_deref());
    // What the journal keeps of the old content, also worked out while the new one is written.
    let mut before = None;
    let after = match new {
        Some(bytes) => {
            // The hash of what was written, computed once, as it was written.
            let (meta, hash) = write_checked_against(
                &loaded.resolved,
                bytes,
                loaded.ownership,
                &loaded.expected(),
                loaded.bytes.as_deref(),
                &mut || {
                    before = loaded.bytes.as_deref().map(|b| Before::new(b, new));
                    meanwhile();
                },
            )?;
            ctx.session().files().record(
                path,
                FileStamp {
                    hash,
                    size: bytes.len() as u64,
                    modified: meta.modified().ok(),
                    seen_at: SystemTime::now(),
                },
            );
            Some(hash)
        }
        None => {
            remove_checked(&loaded.resolved, &loaded.expected())?;
            ctx.session().files().forget(path);
            None
        }
    };
    ctx.session().state::<Journal>().record(JournalEntry {
        change,
        tool: tool.to_owned(),
        path: path.clone(),
        display: loaded.resolved.display(),
        before: before.or_else(|| loaded.bytes.as_deref().map(|b| Before::new(b, new))),
        ownership: loaded.ownership,
        after,
    });
    Ok(after)
}

/// The data directory's folder for the intents of multi-file changes.
pub(crate) fn pending_dir(ctx: &ToolContext) -> std::path::PathBuf {
    ctx.env().spill().dir().join(".pending")
}

/// One file of [`commit_files`]: as loaded, its new content (`None` to remove it), and the mode
/// and owner to give it instead of the loaded ones.
pub(crate) type NewFile<'a> = (&'a Loaded, Option<&'a [u8]>, Option<Ownership>);

/// Writes (or, for `None`, removes) several files all or nothing, each only if it is still as
/// it was loaded, and records the new states. `keep` overrides the mode and owner to give.
/// Returns the new hashes. On failure nothing was changed, and the error names the file.
pub(crate) fn commit_files(
    ctx: &ToolContext,
    files: &[NewFile<'_>],
) -> Result<Vec<Option<ContentHash>>, ToolError> {
    commit_files_and(ctx, files, &[])
}

/// [`commit_files`] with `more` steps in the same all-or-nothing change, after the files (the
/// symbolic links `restore` puts back, and the files it puts where links are).
pub(crate) fn commit_files_and(
    ctx: &ToolContext,
    files: &[NewFile<'_>],
    more: &[Step<'_>],
) -> Result<Vec<Option<ContentHash>>, ToolError> {
    let mut steps: Vec<Step<'_>> = files
        .iter()
        .map(|(loaded, new, keep)| match new {
            Some(bytes) => Step::Write {
                resolved: &loaded.resolved,
                bytes,
                keep: keep.or(loaded.ownership),
                expected: loaded.expected(),
            },
            None => Step::Remove {
                resolved: &loaded.resolved,
                expected: loaded.expected(),
            },
        })
        .collect();
    steps.extend_from_slice(more);
    let metas =
        commit_all(&steps, Some(&pending_dir(ctx))).map_err(|CommitError { error, .. }| {
            match ToolError::from(error) {
                ToolError::Failed(message) if steps.len() > 1 => {
                    ToolError::Failed(format!("{message}. Nothing was changed"))
                }
                other => other,
            }
        })?;
    let mut hashes = Vec::with_capacity(files.len());
    for ((loaded, new, _), meta) in files.iter().zip(metas) {
        let path = &loaded.resolved.path;
        ctx.record_change(path, loaded.bytes.as_deref());
        match new {
            Some(bytes) => {
                // The last file written is remembered with its hash: no second hashing.
                let hash = ContentHash::of_loaded(bytes);
                ctx.session().files().record(
                    path,
                    FileStamp {
                        hash,
                        size: bytes.len() as u64,
                        modified: meta.and_then(|m| m.modified().ok()),
                        seen_at: SystemTime::now(),
                    },
                );
                hashes.push(Some(hash));
            }
            None => {
                ctx.session().files().forget(path);
                hashes.push(None);
            }
        }
    }
    for step in more {
        let (Step::Write { resolved, .. }
        | Step::Remove { resolved, .. }
        | Step::Link { resolved, .. }) = step;
        ctx.record_change(&resolved.path, None);
        ctx.session().files().forget(&resolved.path);
    }
    Ok(hashes)
}

/// [`commit_files`] for one tool call, journaled for `undo` under the call's change id.
pub(crate) fn commit_many(
    ctx: &ToolContext,
    tool: &str,
    change: u64,
    files: &[(&Loaded, Option<&[u8]>)],
) -> Result<Vec<Option<ContentHash>>, ToolError> {
    let with_keep: Vec<_> = files.iter().map(|(l, b)| (*l, *b, None)).collect();
    let hashes = commit_files(ctx, &with_keep)?;
    let journal = ctx.session().state::<Journal>();
    for ((loaded, new), after) in files.iter().zip(&hashes) {
        journal.record(JournalEntry {
            change,
            tool: tool.to_owned(),
            path: loaded.resolved.path.clone(),
            display: loaded.resolved.display(),
            before: loaded.bytes.as_deref().map(|b| Before::new(b, *new)),
            ownership: loaded.ownership,
            after: *after,
        });
    }
    Ok(hashes)
}
