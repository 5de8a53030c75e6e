//! File system access for tools: roots and confinement, file state, atomic writes, path
//! locks, and the undo journal.

#[cfg(unix)]
mod atomic_write;
#[cfg(windows)]
#[path = "atomic_write_windows.rs"]
mod atomic_write;
#[cfg(unix)]
mod confine_unix;
#[cfg(windows)]
mod confine_windows;
mod file_state;
mod journal;
mod locks;
mod names;
pub mod nowait;
mod paths;
#[cfg(unix)]
mod raw;
#[cfg(target_os = "linux")]
mod spares;
mod suggest;
mod write;

pub use atomic_write::{
    create_parents, remove_checked, remove_file, write_atomic, write_checked, write_checked_against,
};
pub use confine::{DirHandle, EntryKind};
#[cfg(unix)]
use confine_unix as confine;
#[cfg(unix)]
pub use confine_unix::{NAME_ONLY, file_kind, force_portable, open_beneath, open_beneath_walk};
#[cfg(windows)]
use confine_windows as confine;
pub use file_state::{ContentHash, FileStamp, FileStates, Hasher};
pub use journal::{Before, CommitError, Journal, JournalEntry, Step, commit_all, recover_pending};
pub use locks::{PathGuard, PathLocks};
pub use names::NameMatching;
pub use paths::{
    Location, MAX_COMPONENT_BYTES, MAX_PATH_BYTES, OpenKind, PathError, ResolvedPath, Root,
    RootSet, implicit_root, implicit_root_here,
};
pub use write::{Expected, FileId, Ownership, WriteError};
