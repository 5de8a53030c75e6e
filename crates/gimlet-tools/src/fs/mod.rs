//! File system access for tools: roots and confinement, file state, atomic writes, path
//! locks, and the undo journal.

mod atomic_write;
mod file_state;
mod journal;
mod locks;
pub mod nowait;
mod paths;
mod spares;
mod suggest;

pub use atomic_write::{
    Expected, FileId, Ownership, WriteError, create_parents, remove_checked, remove_file,
    write_atomic, write_checked, write_checked_against,
};
pub use file_state::{ContentHash, FileStamp, FileStates, Hasher};
pub use journal::{Before, CommitError, Journal, JournalEntry, Step, commit_all, recover_pending};
pub use locks::{PathGuard, PathLocks};
pub use paths::{
    Location, MAX_COMPONENT_BYTES, MAX_PATH_BYTES, OpenKind, PathError, ResolvedPath, Root,
    RootSet, file_kind, implicit_root, implicit_root_here, open_beneath, open_beneath_walk,
};
