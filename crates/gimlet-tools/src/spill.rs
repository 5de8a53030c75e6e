//! Spill files: the full text of outputs that truncation cut, kept for 7 days.

use std::fs;
use std::io::{self, Write};
#[cfg(unix)]
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// How long spill files are kept.
pub const SPILL_MAX_AGE: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// A directory of spill files, one per truncated output, named by a random id.
#[derive(Debug, Clone)]
pub struct SpillStore {
    dir: PathBuf,
}

/// One saved output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpillFile {
    /// The random id (32 hex digits), also the resource name `gimlet://output/<id>`.
    pub id: String,
    /// Where the file is.
    pub path: PathBuf,
    /// Its size in bytes.
    pub size: u64,
}

impl SpillFile {
    /// The MCP resource URI of this output.
    pub fn uri(&self) -> String {
        format!("gimlet://output/{}", self.id)
    }
}

impl SpillStore {
    /// `$XDG_DATA_HOME/gimlet/output` (or the platform's data directory), falling back to the
    /// temp directory.
    pub fn default_dir() -> PathBuf {
        dirs::data_dir()
            .unwrap_or_else(std::env::temp_dir)
            .join("gimlet")
            .join("output")
    }

    /// Creates the directory (private to the user) if needed.
    pub fn open(dir: &Path) -> io::Result<Self> {
        let mut builder = fs::DirBuilder::new();
        builder.recursive(true);
        // On Windows the folder inherits the access list of the user's data folder.
        #[cfg(unix)]
        builder.mode(0o700);
        builder.create(dir)?;
        Ok(Self {
            dir: crate::util::canonical(dir)?,
        })
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Saves a full output and returns where it went.
    pub fn save(&self, text: &str) -> io::Result<SpillFile> {
        let (mut file, mut spill) = self.create()?;
        file.write_all(text.as_bytes())?;
        spill.size = text.len() as u64;
        Ok(spill)
    }

    /// Creates an empty spill file to stream into; the caller sets `size` when done.
    pub fn create(&self) -> io::Result<(fs::File, SpillFile)> {
        let id = crate::util::random_hex()?;
        let path = self.dir.join(format!("{id}.txt"));
        let mut options = fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        options.mode(0o600);
        let file = options.open(&path)?;
        Ok((file, SpillFile { id, path, size: 0 }))
    }

    /// The file of an id, if the id is well-formed and the file exists.
    pub fn get(&self, id: &str) -> Option<SpillFile> {
        if id.len() != 32 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let path = self.dir.join(format!("{id}.txt"));
        let size = fs::metadata(&path).ok()?.len();
        Some(SpillFile {
            id: id.to_owned(),
            path,
            size,
        })
    }

    /// Whether a resolved path is a file of this store (reading it needs no approval).
    pub fn contains(&self, path: &Path) -> bool {
        path.parent() == Some(self.dir.as_path())
    }

    /// Removes files older than `max_age`; returns how many went.
    pub fn sweep(&self, max_age: Duration) -> usize {
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return 0;
        };
        let now = SystemTime::now();
        let mut removed = 0;
        for entry in entries.flatten() {
            let is_spill = entry.path().extension().is_some_and(|e| e == "txt");
            let old = entry
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| now.duration_since(t).unwrap_or_default() >= max_age);
            if is_spill && old && fs::remove_file(entry.path()).is_ok() {
                removed += 1;
            }
        }
        removed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saves_reads_back_and_sweeps_old_files() {
        let dir = tempfile::tempdir().unwrap();
        let store = SpillStore::open(&dir.path().join("out")).unwrap();
        let file = store.save("full output").unwrap();
        assert_eq!(file.id.len(), 32);
        assert_eq!(fs::read_to_string(&file.path).unwrap(), "full output");
        assert_eq!(store.get(&file.id), Some(file.clone()));
        assert!(store.contains(&file.path));
        assert_eq!(store.get("../etc/passwd"), None);
        assert_eq!(store.sweep(SPILL_MAX_AGE), 0, "a fresh file stays");
        assert_eq!(store.sweep(Duration::ZERO), 1, "an old one goes");
        assert_eq!(store.get(&file.id), None);
    }

    #[test]
    fn ids_differ() {}
}
