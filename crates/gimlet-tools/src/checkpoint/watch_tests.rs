use std::fs;
use std::os::unix::fs::{PermissionsExt as _, symlink};
use std::path::{Path, PathBuf};

use pretty_assertions::assert_eq;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

use super::tree::COOKIE_PREFIX;
use super::*;

thread_local! {
    /// Watches this thread may still add (`None`: no limit).
    static WATCHES_LEFT: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
    /// Whether this thread's watchers are the recursive watch of macOS and Windows.
    static TREE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether a new watcher is the recursive watch of macOS and Windows (here over inotify,
/// through `notify`) rather than Linux's own.
pub(super) fn tree_watcher() -> bool {
    TREE.with(std::cell::Cell::get)
}

/// Runs `test` with Linux's watcher, then with the recursive watch of macOS and Windows.
fn with_both(test: impl Fn()) {
    test();
    TREE.with(|tree| tree.set(true));
    test();
    TREE.with(|tree| tree.set(false));
}

/// Whether the next watch is one too many (a test's limit on this thread).
pub(super) fn watch_limit_reached() -> bool {
    WATCHES_LEFT.with(|left| match left.get() {
        None => false,
        Some(0) => true,
        Some(n) => {
            left.set(Some(n - 1));
            false
        }
    })
}

const LIMITS: Limits = Limits {
    max_file: 1 << 20,
    max_store: 1 << 30,
};

/// A root, a store, the cache the watcher keeps and the watcher.
struct Fixture {
    root: tempfile::TempDir,
    _store_dir: tempfile::TempDir,
    store: Store,
    cache: Cache,
    watching: Watching,
}

impl Fixture {
    fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        let store_dir = tempfile::tempdir().unwrap();
        let (store, _, _) = Store::open(store_dir.path(), root.path()).unwrap();
        Self {
            root,
            _store_dir: store_dir,
            store,
            cache: Cache::default(),
            watching: Watching::New,
        }
    }

    fn watcher(&mut self) -> &mut Watcher {
        match &mut self.watching {
            Watching::Active(watcher) => watcher,
            Watching::New | Watching::Off => panic!("no watcher"),
        }
    }

    fn path(&self) -> PathBuf {
        self.root.path().to_owned()
    }

    /// A watcher scan, checked against a full walk from the same cache: same changes, same
    /// cache after. Returns the changes and why the watcher fell back, if it did.
    fn scan(&mut self) -> (Delta, Option<Fallback>) {
        let root = self.path();
        let mut copy = self.cache.clone();
        let (delta, why) = scan(
            &root,
            &mut self.cache,
            &mut self.store,
            LIMITS,
            &mut self.watching,
        );
        let before = copy.entries.clone();
        let full = scan::scan(&root, &mut copy, &mut self.store, LIMITS);
        // What a save writes (the entries each scan says it set or removed) is all that changed.
        for (delta, after) in [(&delta, &self.cache), (&full, &copy)] {
            let mut replayed = before.clone();
            for path in &delta.dirty {
                match after.entries.get(path) {
                    Some(stat) => replayed.insert(path.clone(), stat.clone()),
                    None => replayed.remove(path),
                };
            }
            assert_eq!(replayed, after.entries, "the dirty entries miss a change");
        }
        assert_eq!(
            (&delta.changes, &delta.ignored),
            (&full.changes, &full.ignored),
            "the watcher's changes differ from a full walk's"
        );
        assert_eq!(self.cache.entries, copy.entries, "the caches differ");
        assert_eq!(self.cache.ignored, copy.ignored, "the ignored tops differ");
        (delta, why)
    }
}

fn paths(delta: &Delta) -> Vec<&str> {
    delta.changes.iter().map(|c| c.path.as_str()).collect()
}

/// One change to the tree.
#[derive(Debug, Clone)]
enum Step {
    Write(usize, usize),
    Remove(usize),
    Rename(usize, usize),
    Chmod(usize),
    Symlink(usize, usize),
    Subtree(usize),
    RemoveDir(usize),
    MoveDir(usize, usize),
    Ignore(usize),
    IgnoredWrite(usize),
}

/// Files and folders the steps pick from (indexes wrap).
const FILES: [&str; 8] = [
    "a.txt",
    "src/b.rs",
    "src/deep/c.rs",
    "d/e.txt",
    "d/f/g.txt",
    "n/x.txt",
    "n/m/y.txt",
    "build/out.o",
];
const DIRS: [&str; 5] = ["src", "src/deep", "d", "n", "n/m"];

fn apply(root: &Path, step: &Step) {
    let file = |i: usize| root.join(FILES[i % FILES.len()]);
    let dir = |i: usize| root.join(DIRS[i % DIRS.len()]);
    let parent = |p: &Path| {
        let _ = fs::create_dir_all(p.parent().unwrap());
    };
    match *step {
        Step::Write(i, n) => {
            let path = file(i);
            parent(&path);
            fs::write(&path, "x".repeat(n % 7)).unwrap_or_default();
        }
        Step::Remove(i) => {
            let _ = fs::remove_file(file(i));
        }
        Step::Rename(i, j) => {
            let to = file(j);
            parent(&to);
            if fs::symlink_metadata(&to).is_ok_and(|m| m.is_dir()) {
                return;
            }
            let _ = fs::rename(file(i), to);
        }
        Step::Chmod(i) => {
            if let Ok(meta) = fs::symlink_metadata(file(i))
                && meta.is_file()
            {
                let mode = meta.permissions().mode() ^ 0o111;
                fs::set_permissions(file(i), fs::Permissions::from_mode(mode)).unwrap();
            }
        }
        Step::Symlink(i, j) => {
            // A symlink swapped in for the file: made beside it, renamed over it.
            let path = file(i);
            parent(&path);
            let tmp = path.with_extension("swap");
            let _ = fs::remove_file(&tmp);
            symlink(FILES[j % FILES.len()], &tmp).unwrap();
            if fs::rename(&tmp, &path).is_err() {
                let _ = fs::remove_file(&tmp);
            }
        }
        Step::Subtree(i) => {
            let base = dir(i).join(format!("new{i}"));
            fs::create_dir_all(base.join("inner")).unwrap();
            fs::write(base.join("one"), "1").unwrap();
            fs::write(base.join("inner/two"), "2").unwrap();
        }
        Step::RemoveDir(i) => {
            let _ = fs::remove_dir_all(dir(i));
        }
        Step::MoveDir(i, j) => {
            let (from, to) = (dir(i), dir(j));
            if from != to && !to.starts_with(&from) && !to.exists() {
                parent(&to);
                let _ = fs::rename(from, to);
            }
        }
        Step::Ignore(i) => {
            let text = ["build/\n", "build/\n*.o\n", "build/\nn/\n", ""][i % 4];
            fs::write(root.join(".gitignore"), text).unwrap();
        }
        Step::IgnoredWrite(n) => {
            fs::create_dir_all(root.join("build/sub")).unwrap();
            fs::write(root.join(format!("build/sub/f{}", n % 3)), "o").unwrap();
        }
    }
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0..8usize, 0..20usize).prop_map(|(i, n)| Step::Write(i, n)),
        1 => (0..8usize).prop_map(Step::Remove),
        1 => (0..8usize, 0..8usize).prop_map(|(i, j)| Step::Rename(i, j)),
        1 => (0..8usize).prop_map(Step::Chmod),
        1 => (0..8usize, 0..8usize).prop_map(|(i, j)| Step::Symlink(i, j)),
        1 => (0..5usize).prop_map(Step::Subtree),
        1 => (0..5usize).prop_map(Step::RemoveDir),
        1 => (0..5usize, 0..5usize).prop_map(|(i, j)| Step::MoveDir(i, j)),
        1 => (0..4usize).prop_map(Step::Ignore),
        1 => (0..3usize).prop_map(Step::IgnoredWrite),
    ]
}

#[test]
fn the_watcher_finds_what_a_full_walk_finds() {
    with_both(the_watcher_finds_what_a_full_walk_finds_with);
}

fn the_watcher_finds_what_a_full_walk_finds_with() {
    let mut runner = TestRunner::new(Config {
        cases: 48,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&prop::collection::vec(step(), 1..24), |steps| {
            let mut fx = Fixture::new();
            let root = fx.path();
            fs::write(root.join(".gitignore"), "build/\n").unwrap();
            for i in 0..FILES.len() {
                apply(&root, &Step::Write(i, i));
            }
            let (_, why) = fx.scan();
            assert!(
                matches!(fx.watching, Watching::Active(_)),
                "no watcher after the first scan"
            );
            assert_eq!(why, None);
            for step in &steps {
                apply(&root, step);
                let (_, why) = fx.scan();
                // Only a change of the rules is a reason to walk the root whole.
                if !matches!(step, Step::Ignore(_)) {
                    assert_eq!(why, None, "after {step:?}");
                }
            }
            Ok(())
        })
        .unwrap();
}

#[test]
fn a_scan_with_events_looks_only_where_they_are() {
    with_both(a_scan_with_events_looks_only_where_they_are_with);
}

fn a_scan_with_events_looks_only_where_they_are_with() {
    let mut fx = Fixture::new();
    let root = fx.path();
    fs::create_dir_all(root.join("a/b")).unwrap();
    fs::write(root.join("a/b/one"), "1").unwrap();
    fs::write(root.join("top"), "t").unwrap();
    fx.scan();
    // Nothing changed: no event, nothing listed, nothing found.
    let (delta, why) = fx.scan();
    assert_eq!((paths(&delta), why), (vec![], None));
    // A folder moved within the root keeps its watch under its new name: a change in it
    // afterwards is found at the new name.
    fs::rename(root.join("a"), root.join("z")).unwrap();
    let (delta, why) = fx.scan();
    assert_eq!((paths(&delta), why), (vec!["a/b/one", "z/b/one"], None));
    fs::write(root.join("z/b/one"), "changed").unwrap();
    let (delta, why) = fx.scan();
    assert_eq!((paths(&delta), why), (vec!["z/b/one"], None));
}

#[test]
fn a_lost_event_queue_falls_back_to_a_full_walk() {
    with_both(a_lost_event_queue_falls_back_to_a_full_walk_with);
}

fn a_lost_event_queue_falls_back_to_a_full_walk_with() {
    let mut fx = Fixture::new();
    let root = fx.path();
    fs::write(root.join("a"), "1").unwrap();
    let (_, why) = fx.scan();
    assert_eq!(why, None);
    fs::write(root.join("a"), "22").unwrap();
    fx.watcher().inject_overflow();
    let (delta, why) = fx.scan();
    assert_eq!((paths(&delta), why), (vec!["a"], Some(Fallback::Overflow)));
    // The watches were set up again by that walk.
    fs::write(root.join("b"), "new").unwrap();
    let (delta, why) = fx.scan();
    assert_eq!((paths(&delta), why), (vec!["b"], None));
}

#[test]
fn a_change_of_the_ignore_rules_falls_back_to_a_full_walk() {
    with_both(a_change_of_the_ignore_rules_falls_back_to_a_full_walk_with);
}

fn a_change_of_the_ignore_rules_falls_back_to_a_full_walk_with() {
    let mut fx = Fixture::new();
    let root = fx.path();
    fs::create_dir_all(root.join("sub/gen")).unwrap();
    fs::write(root.join("sub/gen/x"), "x").unwrap();
    fs::create_dir_all(root.join(".git/info")).unwrap();
    fx.scan();
    // A .gitignore deep in the tree now hides a folder the watcher watches.
    fs::write(root.join("sub/.gitignore"), "gen/\n").unwrap();
    let (delta, why) = fx.scan();
    assert_eq!(
        (paths(&delta), why),
        (vec!["sub/.gitignore", "sub/gen/x"], Some(Fallback::Rules))
    );
    // .git/info/exclude is not watched; its stat is compared on each scan.
    fs::write(root.join(".git/info/exclude"), "sub/\n").unwrap();
    let (delta, why) = fx.scan();
    assert_eq!(
        (paths(&delta), why),
        (vec!["sub/.gitignore"], Some(Fallback::Rules))
    );
}

#[test]
fn an_event_for_an_unknown_watch_falls_back_to_a_full_walk() {
    let mut fx = Fixture::new();
    let root = fx.path();
    fs::create_dir_all(root.join("d")).unwrap();
    fx.scan();
    // Forget the folder's watch, as if it had been lost.
    let watcher = fx.watcher();
    let wd = watcher.by_path.remove("d").unwrap();
    watcher.dirs.remove(&wd);
    fs::write(root.join("d/new"), "x").unwrap();
    let (delta, why) = fx.scan();
    assert_eq!(
        (paths(&delta), why),
        (vec!["d/new"], Some(Fallback::UnknownWatch))
    );
}

#[test]
fn when_watches_run_out_scans_walk_the_root_whole() {
    let mut fx = Fixture::new();
    let root = fx.path();
    fs::create_dir_all(root.join("a/b")).unwrap();
    fs::write(root.join("a/b/one"), "1").unwrap();
    // Room for the root's and a's watches, not b's.
    WATCHES_LEFT.with(|left| left.set(Some(2)));
    fx.scan();
    assert!(matches!(fx.watching, Watching::Off));
    // b is not watched, and still its change is found: by a full walk.
    fs::write(root.join("a/b/one"), "2").unwrap();
    let (delta, _) = fx.scan();
    assert_eq!(paths(&delta), vec!["a/b/one"]);
    assert!(matches!(fx.watching, Watching::Off));
    // A watcher that runs out while it walks a new folder is given up too.
    WATCHES_LEFT.with(|left| left.set(None));
    let mut fx = Fixture::new();
    let root = fx.path();
    fx.scan();
    WATCHES_LEFT.with(|left| left.set(Some(1)));
    fs::create_dir_all(root.join("x/y/z")).unwrap();
    fs::write(root.join("x/y/z/f"), "f").unwrap();
    let (delta, _) = fx.scan();
    assert_eq!(paths(&delta), vec!["x/y/z/f"]);
    assert!(matches!(fx.watching, Watching::Off));
    WATCHES_LEFT.with(|left| left.set(None));
}

#[test]
fn the_recursive_watch_syncs_on_a_cookie_it_removes_and_hides_nothing() {
    TREE.with(|tree| tree.set(true));
    let mut fx = Fixture::new();
    let root = fx.path();
    fs::create_dir_all(root.join("src")).unwrap();
    fs::create_dir_all(root.join(".git/objects")).unwrap();
    fs::write(root.join("src/a.rs"), "a").unwrap();
    fx.scan();
    assert!(matches!(fx.watcher().source, Source::Tree { .. }));
    // Many changes just before the scan: all of them have arrived once the cookie's has.
    for i in 0..200 {
        fs::write(root.join(format!("src/gen{i}.rs")), "g").unwrap();
    }
    let (delta, why) = fx.scan();
    assert_eq!((delta.changes.len(), why), (200, None));
    // A repository's own writes inside `.git` are nothing to list and no reason to walk.
    fs::write(root.join(".git/index"), "index").unwrap();
    fs::write(root.join(".git/objects/ab"), "object").unwrap();
    let (delta, why) = fx.scan();
    assert_eq!((paths(&delta), why), (vec![], None));
    // No cookie is left behind, and a file named like one (by a command, or another gimlet's
    // left behind) is captured as any other: the name is no hiding place.
    let names: Vec<_> = fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(
        names.iter().all(|n| !n.starts_with(COOKIE_PREFIX)),
        "{names:?}"
    );
    let planted = format!("{COOKIE_PREFIX}{}-{}", std::process::id(), 1);
    fs::write(root.join(&planted), "hidden?").unwrap();
    let (delta, why) = fx.scan();
    assert_eq!((paths(&delta), why), (vec![planted.as_str()], None));
    // Without the watch's events the cookie never comes back: a full walk with a new watch.
    if let Source::Tree { tree, .. } = &mut fx.watcher().source {
        tree.unwatch();
    }
    fs::write(root.join("src/a.rs"), "changed").unwrap();
    let (delta, why) = fx.scan();
    assert_eq!(
        (paths(&delta), why),
        (vec!["src/a.rs"], Some(Fallback::Sync))
    );
    fs::write(root.join("src/a.rs"), "again").unwrap();
    let (delta, why) = fx.scan();
    assert_eq!((paths(&delta), why), (vec!["src/a.rs"], None));
    TREE.with(|tree| tree.set(false));
}
