//! File system access for tools: roots and confinement, the file-state store.

mod file_state;
mod paths;

pub use file_state::{ContentHash, FileStamp, FileStates, Hasher};
pub use paths::{
    Location, MAX_COMPONENT_BYTES, MAX_PATH_BYTES, OpenKind, PathError, ResolvedPath, Root,
    RootSet, file_kind, open_beneath, open_beneath_walk,
};
