//! The steps every file-changing tool takes, in one place: load the current file, check that
//! the session's view of it is fresh, commit the new content atomically, journal it for `undo`,
//! and remember the new state. Tools call these from `ctx.blocking` while holding the path's
//! lock (`ctx.env().locks()`).

use std::io::Read;
use std::time::SystemTime;

use super::atomic_write::{Ownership, WriteError, remove_file, write_atomic};
use super::file_state::{ContentHash, FileStamp};
use super::journal::{Journal, JournalEntry};
use super::paths::{PathError, ResolvedPath};
use crate::context::ToolContext;
use crate::error::ToolError;

/// Largest file the edit tools load.
pub const MAX_EDIT_BYTES: u64 = 256 * 1024 * 1024;

/// A file as it is now, before a change.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// Where it is.
    pub resolved: ResolvedPath,
    /// Its content, or `None` when nothing is there.
    pub bytes: Option<Vec<u8>>,
    /// Mode and owner, when it exists.
    pub ownership: Option<Ownership>,
    /// Its hash, when it exists.
    pub hash: Option<ContentHash>,
}

impl Loaded {
    /// Whether a file is there.
    pub fn exists(&self) -> bool {
        self.bytes.is_some()
    }
}

impl From<WriteError> for ToolError {
    fn from(err: WriteError) -> Self {
        match err {
            WriteError::Path(path) => Self::Path(path),
            other => Self::Failed(other.to_string()),
        }
    }
}

/// Loads the file at `resolved` (nothing there is fine; a directory or special file is not).
pub fn load(resolved: ResolvedPath) -> Result<Loaded, ToolError> {
    let (mut file, meta) = match resolved.open_regular() {
        Ok(opened) => opened,
        Err(PathError::NotFound { .. }) => {
            return Ok(Loaded {
                resolved,
                bytes: None,
                ownership: None,
                hash: None,
            });
        }
        Err(PathError::IsADirectory { path, .. }) => {
            return Err(ToolError::invalid(format!(
                "`{path}` is a directory; give a file path"
            )));
        }
        Err(other) => return Err(other.into()),
    };
    if meta.len() > MAX_EDIT_BYTES {
        return Err(ToolError::failed(format!(
            "`{}` is {} bytes; the file tools change files up to {MAX_EDIT_BYTES} bytes",
            resolved.display(),
            meta.len()
        )));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.read_to_end(&mut bytes)
        .map_err(|e| ToolError::io(format!("reading {}", resolved.display()), e))?;
    let hash = ContentHash::of(&bytes);
    Ok(Loaded {
        ownership: Some(Ownership::of(&meta)),
        hash: Some(hash),
        bytes: Some(bytes),
        resolved,
    })
}

/// Fails unless the change is made from a fresh view of the file: `expected_hash` matches,
/// or the session read (or wrote) the file and it has not changed since. A file that does not
/// exist needs no view. When the user approved a preview, the file must still be as previewed.
pub fn check_fresh(
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
pub fn check_not_stale(ctx: &ToolContext, loaded: &Loaded) -> Result<(), ToolError> {
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
pub fn commit(
    ctx: &ToolContext,
    tool: &str,
    change: u64,
    loaded: &Loaded,
    new: Option<&[u8]>,
) -> Result<Option<ContentHash>, ToolError> {
    let path = &loaded.resolved.path;
    ctx.record_change(path, loaded.bytes.as_deref());
    let after = match new {
        Some(bytes) => {
            let meta = write_atomic(&loaded.resolved, bytes, loaded.ownership)?;
            let hash = ContentHash::of(bytes);
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
            remove_file(&loaded.resolved)?;
            ctx.session().files().forget(path);
            None
        }
    };
    ctx.session().state::<Journal>().record(JournalEntry {
        change,
        tool: tool.to_owned(),
        path: path.clone(),
        display: loaded.resolved.display(),
        before: loaded.bytes.clone(),
        ownership: loaded.ownership,
        after,
    });
    Ok(after)
}
