//! [`Session`]: per-session state (what was read, grants, client roots, tools' own state).

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

use crate::fs::{FileStates, Root};
use crate::permission::Grants;
use crate::util::{MutexExt as _, RwLockExt as _};

/// Per-session state: what was read, grants, client roots, and tools' own state.
///
/// One per stdio connection or HTTP session; calls of one session share it.
#[derive(Debug, Default)]
pub struct Session {
    id: String,
    files: FileStates,
    grants: Grants,
    /// Concurrency-safe calls share it; the others hold it alone, in arrival order.
    lane: tokio::sync::RwLock<()>,
    client_roots: RwLock<Vec<Arc<Root>>>,
    /// The most bytes of one result the client shows its model whole, if less than gimlet's
    /// default limit (see [`Session::set_result_budget`]).
    result_budget: std::sync::OnceLock<usize>,
    extensions: Extensions,
}

impl Session {
    /// A new session with an id.
    pub fn new(id: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            ..Self::default()
        }
    }

    /// The session id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The files this session read or wrote.
    pub fn files(&self) -> &FileStates {
        &self.files
    }

    /// "Allow for this session" grants.
    pub fn grants(&self) -> &Grants {
        &self.grants
    }

    /// The session's call lane: concurrency-safe calls take it shared, the others alone.
    /// Tokio's lock is fair, so waiting calls go in the order they arrived.
    pub(crate) fn lane(&self) -> &tokio::sync::RwLock<()> {
        &self.lane
    }

    /// Replaces the roots the client offered (MCP `roots/list`).
    pub fn set_client_roots(&self, roots: Vec<Arc<Root>>) {
        *self.client_roots.write_locked() = roots;
    }

    /// The roots the client offered.
    pub fn client_roots(&self) -> Vec<Arc<Root>> {
        self.client_roots.read_locked().clone()
    }

    /// Says how much of one result the client shows its model whole, where that is less than
    /// gimlet's default limit: Codex, for one, keeps about 12,000 bytes of a tool's text and
    /// cuts the middle out of the rest. Unless the output limits were configured, results of
    /// this session are then truncated (and paged) to fit, so nothing is lost without a
    /// notice saying how to go on. Set once, when the client is known.
    pub fn set_result_budget(&self, bytes: usize) {
        let _ = self.result_budget.set(bytes);
    }

    /// The budget set by [`Session::set_result_budget`].
    pub fn result_budget(&self) -> Option<usize> {
        self.result_budget.get().copied()
    }

    /// A tool's own per-session state, created on first use.
    pub fn state<T: Default + Send + Sync + 'static>(&self) -> Arc<T> {
        self.extensions.get_or_default()
    }
}

/// A map from type to one shared value of that type.
#[derive(Default)]
struct Extensions {
    map: Mutex<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>,
}

impl std::fmt::Debug for Extensions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Extensions").finish_non_exhaustive()
    }
}

impl Extensions {
    fn get_or_default<T: Default + Send + Sync + 'static>(&self) -> Arc<T> {
        let mut map = self.map.locked();
        let entry = map
            .entry(TypeId::of::<T>())
            .or_insert_with(|| Arc::new(T::default()) as Arc<dyn Any + Send + Sync>);
        Arc::clone(entry)
            .downcast::<T>()
            .unwrap_or_else(|_| Arc::new(T::default()))
    }
}
