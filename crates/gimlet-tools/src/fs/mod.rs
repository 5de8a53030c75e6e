//! File system access for tools: roots and confinement, file state, atomic writes, path
//! locks, and the undo journal.

mod atomic_write;
mod change;
mod file_state;
mod journal;
mod locks;
pub mod nowait;
mod paths;

pub use atomic_write::{Ownership, WriteError, create_parents, remove_file, write_atomic};
pub use change::{Loaded, MAX_EDIT_BYTES, check_fresh, check_not_stale, commit, load};
pub use file_state::{ContentHash, FileStamp, FileStates, Hasher};
pub use journal::{Journal, JournalEntry};
pub use locks::{PathGuard, PathLocks};
pub use paths::{
    Location, MAX_COMPONENT_BYTES, MAX_PATH_BYTES, OpenKind, PathError, ResolvedPath, Root,
    RootSet, file_kind, implicit_root, implicit_root_here, open_beneath, open_beneath_walk,
};
