//! Per-path locks: mutations of one file are serialised, across calls and sessions.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};

use crate::util::MutexExt as _;

/// One async mutex per resolved path, created on demand and dropped when unused.
#[derive(Debug, Default)]
pub struct PathLocks {
    locks: Mutex<HashMap<PathBuf, Weak<AsyncMutex<()>>>>,
}

/// Held while a file is being changed.
pub type PathGuard = OwnedMutexGuard<()>;

impl PathLocks {
    fn handle(&self, path: &Path) -> Arc<AsyncMutex<()>> {
        let mut locks = self.locks.locked();
        if let Some(lock) = locks.get(path).and_then(Weak::upgrade) {
            return lock;
        }
        if locks.len() > 1024 {
            locks.retain(|_, weak| weak.strong_count() > 0);
        }
        let lock = Arc::new(AsyncMutex::new(()));
        locks.insert(path.to_owned(), Arc::downgrade(&lock));
        lock
    }

    /// Waits for exclusive use of a path.
    pub async fn lock(&self, path: &Path) -> PathGuard {
        self.handle(path).lock_owned().await
    }

    /// Waits for exclusive use of several paths, taken in sorted order so that two calls
    /// locking overlapping sets cannot deadlock.
    pub async fn lock_all(&self, paths: &[PathBuf]) -> Vec<PathGuard> {
        let mut sorted: Vec<&PathBuf> = paths.iter().collect();
        sorted.sort();
        sorted.dedup();
        let mut guards = Vec::with_capacity(sorted.len());
        for path in sorted {
            guards.push(self.lock(path).await);
        }
        guards
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn one_path_is_serialised_and_others_are_not() {
        let locks = Arc::new(PathLocks::default());
        let held = locks.lock(Path::new("/a")).await;
        let waiting = {
            let locks = Arc::clone(&locks);
            tokio::spawn(async move { locks.lock(Path::new("/a")).await })
        };
        // Another path is free.
        let _other = tokio::time::timeout(Duration::from_millis(100), locks.lock(Path::new("/b")))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished());
        drop(held);
        tokio::time::timeout(Duration::from_secs(1), waiting)
            .await
            .unwrap()
            .unwrap();
    }
}
