//! The stat cache on disk: `stat.json` (the whole cache, with a generation number) and
//! `stat.log`, one JSON line per save with only the entries that save changed, so that a call
//! that changes 100 files writes 100 entries, not the whole cache (25,000 entries took 25 to
//! 45 ms to write as JSON, 100,000 took 140 to 370 ms).
//!
//! A line applies to the generation it names; when the log holds more records than a quarter
//! of the cache (at least [`MIN_COMPACT`]), the next save writes `stat.json` whole under the
//! next generation (a temporary file renamed over the old one) and then removes the log. A
//! crash between the two leaves lines of the old generation, which the next load skips. A
//! line cut short by a crash ends the replay there (the entries after it are older than the
//! files: the next scan reads those files again), and the next save compacts, so that no line
//! is appended after a broken one.
//!
//! What a stale cache costs is a file read again, or a change recorded again as made while
//! gimlet was not running; never a change missed, as the scan compares stats with it.

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, BufRead as _, Write as _};
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::scan::{Cache, Stat};
use super::store;

/// Below this many records the log is never compacted.
const MIN_COMPACT: usize = 1024;

/// What was written of a cache: its generation, and the records in the log since.
#[derive(Debug, Default)]
pub(super) struct Persisted {
    generation: u64,
    /// Entries written to the log since `stat.json`; `usize::MAX` forces the next save to
    /// write `stat.json` (none yet, or a damaged log).
    records: usize,
}

/// `stat.json` (before the log, it held the cache alone: read as generation 0).
#[derive(Serialize, Deserialize)]
struct Whole<C> {
    generation: u64,
    cache: C,
}

/// One line of `stat.log`.
#[derive(Serialize, Deserialize)]
struct Line<S, D, I> {
    /// The generation of `stat.json` it applies to.
    g: u64,
    /// The scan's start (`Cache::scanned_ns`).
    ns: i128,
    /// Entries set.
    set: S,
    /// Entries removed.
    del: D,
    /// The ignored entries at the top of the root (few: written whole).
    ignored: I,
}

fn whole_path(dir: &Path) -> std::path::PathBuf {
    dir.join("stat.json")
}

fn log_path(dir: &Path) -> std::path::PathBuf {
    dir.join("stat.log")
}

/// Reads the cache saved in `dir`: `stat.json` and the lines of `stat.log` of its generation.
/// `None` when there is no readable `stat.json`.
pub(super) fn load(dir: &Path) -> Option<(Cache, Persisted)> {
    let bytes = fs::read(whole_path(dir)).ok()?;
    let Whole {
        generation,
        mut cache,
    } = serde_json::from_slice::<Whole<Cache>>(&bytes)
        .ok()
        .or_else(|| {
            let cache = serde_json::from_slice::<Cache>(&bytes).ok()?;
            Some(Whole {
                generation: 0,
                cache,
            })
        })?;
    let mut persisted = Persisted {
        generation,
        records: 0,
    };
    let Ok(file) = fs::File::open(log_path(dir)) else {
        return Some((cache, persisted));
    };
    for line in io::BufReader::new(file).split(b'\n') {
        let parsed = line.ok().and_then(|line| {
            serde_json::from_slice::<
                Line<BTreeMap<String, Stat>, Vec<String>, BTreeMap<String, i128>>,
            >(&line)
            .ok()
        });
        let Some(line) = parsed else {
            // Cut short: nothing after it is trusted, and nothing may be appended after it.
            persisted.records = usize::MAX;
            break;
        };
        if line.g != generation {
            continue;
        }
        persisted.records += line.set.len() + line.del.len();
        cache.scanned_ns = line.ns;
        cache.ignored = line.ignored;
        for path in line.del {
            cache.entries.remove(&path);
        }
        cache.entries.extend(line.set);
    }
    Some((cache, persisted))
}

/// Saves `cache`, of which the entries `dirty` changed since the last save: a line in the log,
/// or `stat.json` whole when the log has grown past a quarter of the cache.
pub(super) fn save(
    dir: &Path,
    cache: &Cache,
    persisted: &mut Persisted,
    dirty: &[String],
) -> io::Result<()> {
    let records = persisted.records.saturating_add(dirty.len());
    if records > MIN_COMPACT.max(cache.entries.len() / 4) {
        return compact(dir, cache, persisted);
    }
    let (mut set, mut del) = (BTreeMap::new(), Vec::new());
    for path in dirty {
        match cache.entries.get(path) {
            Some(stat) => {
                set.insert(path, stat);
            }
            None => del.push(path),
        }
    }
    let line = Line {
        g: persisted.generation,
        ns: cache.scanned_ns,
        set,
        del,
        ignored: &cache.ignored,
    };
    let mut bytes = serde_json::to_vec(&line).map_err(io::Error::other)?;
    bytes.push(b'\n');
    let mut options = fs::OpenOptions::new();
    options.append(true).create(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let appended = options
        .open(log_path(dir))
        .and_then(|mut file| file.write_all(&bytes));
    match appended {
        Ok(()) => {
            persisted.records = records;
            Ok(())
        }
        // Perhaps part of the line went out: the next save writes the whole cache.
        Err(err) => {
            persisted.records = usize::MAX;
            Err(err)
        }
    }
}

/// Writes `stat.json` whole under the next generation, then removes the log.
fn compact(dir: &Path, cache: &Cache, persisted: &mut Persisted) -> io::Result<()> {
    let generation = persisted.generation + 1;
    let bytes = serde_json::to_vec(&Whole { generation, cache }).map_err(io::Error::other)?;
    store::write_atomic(&whole_path(dir), &bytes, false)?;
    *persisted = Persisted {
        generation,
        records: 0,
    };
    match fs::remove_file(log_path(dir)) {
        Err(err) if err.kind() != io::ErrorKind::NotFound => Err(err),
        _ => Ok(()),
    }
}

/// Forces the next save to write the whole cache (none was saved yet).
pub(super) fn unsaved() -> Persisted {
    Persisted {
        generation: 0,
        records: usize::MAX,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::store::State;

    fn stat(size: u64) -> Stat {
        Stat {
            size,
            mtime_ns: 1,
            ctime_ns: 2,
            ino: 3,
            mode: 0o644,
            state: State::Absent,
        }
    }

    fn cache(n: u64) -> Cache {
        let mut cache = Cache::default();
        for i in 0..n {
            cache.entries.insert(format!("f{i}"), stat(i));
        }
        cache
    }

    #[test]
    fn saves_append_the_changed_entries_and_a_load_replays_them() {
        let dir = tempfile::tempdir().unwrap();
        let mut cache = cache(5000);
        let mut persisted = unsaved();
        save(dir.path(), &cache, &mut persisted, &[]).unwrap();
        assert!(!log_path(dir.path()).exists());
        let whole = fs::metadata(whole_path(dir.path())).unwrap().len();
        // A change of 100 entries and a removal: one short line, stat.json untouched.
        let mut dirty = Vec::new();
        for i in 0..100 {
            cache.entries.insert(format!("f{i}"), stat(i + 1_000_000));
            dirty.push(format!("f{i}"));
        }
        cache.entries.remove("f4999");
        dirty.push(String::from("f4999"));
        cache.scanned_ns = 42;
        cache.ignored.insert(String::from("target"), 7);
        save(dir.path(), &cache, &mut persisted, &dirty).unwrap();
        let log = fs::metadata(log_path(dir.path())).unwrap().len();
        assert!(log * 20 < whole, "{log} bytes appended, {whole} whole");
        assert_eq!(fs::metadata(whole_path(dir.path())).unwrap().len(), whole);
        let (loaded, again) = load(dir.path()).unwrap();
        assert_eq!(loaded, cache);
        assert_eq!(again.records, 101);
    }

    #[test]
    fn a_long_log_is_compacted_and_old_lines_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let mut cache = cache(100);
        let mut persisted = unsaved();
        save(dir.path(), &cache, &mut persisted, &[]).unwrap();
        let mut round: usize = 0;
        while log_path(dir.path()).exists() || round == 0 {
            round += 1;
            cache
                .entries
                .insert(format!("f{}", round % 100), stat(round as u64));
            save(
                dir.path(),
                &cache,
                &mut persisted,
                &[format!("f{}", round % 100)],
            )
            .unwrap();
            assert_eq!(load(dir.path()).unwrap().0, cache, "round {round}");
            assert!(round <= MIN_COMPACT + 1, "never compacted");
        }
        assert_eq!(round, MIN_COMPACT + 1);
        // A crash after stat.json was written and before the log was removed: its lines are
        // of the old generation.
        let stale = Line {
            g: persisted.generation - 1,
            ns: 0,
            set: BTreeMap::from([("f1", stat(999))]),
            del: vec!["f2"],
            ignored: BTreeMap::<String, i128>::new(),
        };
        let mut bytes = serde_json::to_vec(&stale).unwrap();
        bytes.push(b'\n');
        fs::write(log_path(dir.path()), bytes).unwrap();
        assert_eq!(load(dir.path()).unwrap().0, cache);
    }

    #[test]
    fn a_line_cut_short_ends_the_replay_and_the_next_save_is_whole() {
        let dir = tempfile::tempdir().unwrap();
        let mut cache = cache(10);
        let mut persisted = unsaved();
        save(dir.path(), &cache, &mut persisted, &[]).unwrap();
        cache.entries.insert(String::from("f1"), stat(11));
        save(dir.path(), &cache, &mut persisted, &[String::from("f1")]).unwrap();
        let kept = cache.clone();
        cache.entries.insert(String::from("f2"), stat(22));
        save(dir.path(), &cache, &mut persisted, &[String::from("f2")]).unwrap();
        // The last line loses its end.
        let log = fs::read(log_path(dir.path())).unwrap();
        fs::write(log_path(dir.path()), &log[..log.len() - 10]).unwrap();
        let (loaded, mut persisted) = load(dir.path()).unwrap();
        assert_eq!(loaded, kept);
        assert_eq!(persisted.records, usize::MAX);
        save(dir.path(), &cache, &mut persisted, &[String::from("f2")]).unwrap();
        assert!(!log_path(dir.path()).exists());
        assert_eq!(load(dir.path()).unwrap().0, cache);
    }

    #[test]
    fn a_stat_json_of_before_the_log_loads() {
        let dir = tempfile::tempdir().unwrap();
        let cache = cache(3);
        fs::write(whole_path(dir.path()), serde_json::to_vec(&cache).unwrap()).unwrap();
        let (loaded, persisted) = load(dir.path()).unwrap();
        assert_eq!((loaded, persisted.generation), (cache, 0));
    }
}
