use std::os::unix::fs::PermissionsExt;

use super::*;
use crate::fs::RootSet;
use crate::testutil::TestWorkspace;

fn resolve(ws: &TestWorkspace, path: &str) -> ResolvedPath {
    RootSet::open([ws.root()]).unwrap().resolve(path).unwrap()
}

fn leftovers(ws: &TestWorkspace) -> Vec<String> {
    std::fs::read_dir(ws.root())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".gimlet-"))
        .collect()
}

#[test]
fn replaces_content_and_keeps_the_mode() {
    let ws = TestWorkspace::new();
    let path = ws.write("run.sh", "old");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o751)).unwrap();
    write_atomic(&resolve(&ws, "run.sh"), b"new content", None).unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "new content");
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o7777,
        0o751
    );
    assert!(leftovers(&ws).is_empty());
}

#[test]
fn creates_new_files_and_parents() {
    let ws = TestWorkspace::new();
    let resolved = resolve(&ws, "a/b/c.txt");
    assert_eq!(create_parents(&resolved).unwrap(), 2);
    write_atomic(&resolved, b"x", None).unwrap();
    assert_eq!(
        std::fs::read_to_string(ws.root().join("a/b/c.txt")).unwrap(),
        "x"
    );
}

#[test]
fn refuses_hard_links_fifos_and_directories_leaving_them_alone() {
    let ws = TestWorkspace::new();
    let path = ws.write("linked.txt", "keep");
    std::fs::hard_link(&path, ws.root().join("other.txt")).unwrap();
    let err = write_atomic(&resolve(&ws, "linked.txt"), b"new", None).unwrap_err();
    assert!(
        matches!(err, WriteError::HardLinked { links: 2, .. }),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "keep");
    crate::testutil::make_fifo(&ws.root().join("pipe"));
    let err = write_atomic(&resolve(&ws, "pipe"), b"new", None).unwrap_err();
    assert!(
        matches!(err, WriteError::NotRegular { kind: "FIFO", .. }),
        "{err}"
    );
    ws.mkdir("dir");
    let err = write_atomic(&resolve(&ws, "dir"), b"new", None).unwrap_err();
    assert!(matches!(err, WriteError::Directory { .. }), "{err}");
    assert!(leftovers(&ws).is_empty());
}

#[test]
fn a_failed_write_leaves_the_old_file_and_no_temp_file() {
    let ws = TestWorkspace::new();
    let path = ws.write("ro/file.txt", "old");
    let resolved = resolve(&ws, "ro/file.txt");
    // A read-only directory: the temp file cannot be created (root ignores permissions,
    // so also try a target whose parent vanished).
    std::fs::set_permissions(ws.root().join("ro"), std::fs::Permissions::from_mode(0o555)).unwrap();
    let result = write_atomic(&resolved, b"new", None);
    std::fs::set_permissions(ws.root().join("ro"), std::fs::Permissions::from_mode(0o755)).unwrap();
    if result.is_err() {
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old");
    }
    std::fs::remove_dir_all(ws.root().join("ro")).unwrap();
    assert!(write_atomic(&resolved, b"new", None).is_err());
    assert!(!path.exists());
    assert!(leftovers(&ws).is_empty());
}

#[test]
fn remove_refuses_missing_files() {
    let ws = TestWorkspace::new();
    ws.write("gone.txt", "x");
    remove_file(&resolve(&ws, "gone.txt")).unwrap();
    assert!(matches!(
        remove_file(&resolve(&ws, "gone.txt")),
        Err(WriteError::Path(PathError::NotFound { .. }))
    ));
}

fn expected_of(path: &std::path::Path) -> Expected {
    let meta = std::fs::metadata(path).unwrap();
    Expected::File {
        id: FileId::of(&meta),
        hash: ContentHash::of(&std::fs::read(path).unwrap()),
    }
}

#[test]
fn temporaries_have_the_final_owner_and_mode_before_any_byte() {
    let ws = TestWorkspace::new();
    let (dir, _) = open_parent_dir(&resolve(&ws, "f.txt")).unwrap();
    for mode in [0o600, 0o640, 0o755, 0o4755] {
        let own = Ownership {
            mode,
            uid: rustix::process::getuid().as_raw(),
            gid: rustix::process::getgid().as_raw(),
        };
        let mut temp = TempFile::create(
            &dir,
            OsStr::new("f.txt"),
            b"secret",
            Some(own),
            "tmp",
            &mut || {},
        )
        .unwrap();
        let meta = temp.file.metadata().unwrap();
        assert_eq!(meta.mode() & 0o7777, mode, "{mode:o}");
        assert_eq!(meta.len(), 6);
        temp.discard(&dir);
    }
    // Nothing is left in the directory.
    assert!(leftovers(&ws).is_empty());
}

#[test]
fn an_outside_change_at_the_last_moment_is_kept_and_the_write_refused() {
    let ws = TestWorkspace::new();
    let path = ws.write("log.txt", "one\n");
    let expected = expected_of(&path);
    // Another program appends after the change was computed.
    std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(b"appended\n")
        .unwrap();
    let err = write_checked(&resolve(&ws, "log.txt"), b"ONE\n", None, &expected).unwrap_err();
    assert!(matches!(err, WriteError::Changed { .. }), "{err}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "one\nappended\n");
    // Same size, same name, another file (replaced by rename): refused too.
    let expected = expected_of(&path);
    let other = ws.write("other.txt", "one\nAPPENDED\n");
    std::fs::rename(&other, &path).unwrap();
    let err = write_checked(&resolve(&ws, "log.txt"), b"x\n", None, &expected).unwrap_err();
    assert!(matches!(err, WriteError::Changed { .. }), "{err}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "one\nAPPENDED\n");
    // Unchanged: it goes in.
    let expected = expected_of(&path);
    write_checked(&resolve(&ws, "log.txt"), b"new\n", None, &expected).unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "new\n");
    // A file created where none was expected is not overwritten.
    ws.write("late.txt", "theirs");
    let err =
        write_checked(&resolve(&ws, "late.txt"), b"mine", None, &Expected::Absent).unwrap_err();
    assert!(matches!(err, WriteError::Changed { .. }), "{err}");
    assert_eq!(
        std::fs::read_to_string(ws.root().join("late.txt")).unwrap(),
        "theirs"
    );
    // A removal of a file changed meanwhile leaves it.
    let expected = expected_of(&path);
    std::fs::write(&path, "rewritten\n").unwrap();
    let err = remove_checked(&resolve(&ws, "log.txt"), &expected).unwrap_err();
    assert!(matches!(err, WriteError::Changed { .. }), "{err}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "rewritten\n");
    assert!(leftovers(&ws).is_empty(), "{:?}", leftovers(&ws));
}

#[test]
fn a_rewrite_in_place_with_the_time_put_back_is_caught_by_the_content() {
    let ws = TestWorkspace::new();
    let path = ws.write("same.txt", "one\n");
    let expected = expected_of(&path);
    let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
    // Same file, same size, same modification time: only the content tells.
    let rewrite = |text: &str| {
        let mut file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        file.write_all(text.as_bytes()).unwrap();
        file.set_modified(modified).unwrap();
    };
    rewrite("two\n");
    assert_eq!(
        expected_of(&path),
        match expected {
            Expected::File { id, .. } => Expected::File {
                id,
                hash: ContentHash::of(b"two\n")
            },
            other => other,
        }
    );
    // Checked by hash, and by comparison with the content the caller loaded: both refuse.
    for was in [None, Some(&b"one\n"[..])] {
        let err = write_checked_against(
            &resolve(&ws, "same.txt"),
            b"mine\n",
            None,
            &expected,
            was,
            &mut || {},
        )
        .unwrap_err();
        assert!(matches!(err, WriteError::Changed { .. }), "{err}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "two\n");
    }
    // Given the content, the comparison decides: the right hash with content the file does not
    // hold is refused, the content it holds goes in.
    let expected = expected_of(&path);
    let err = write_checked_against(
        &resolve(&ws, "same.txt"),
        b"x\n",
        None,
        &expected,
        Some(b"TWO\n"),
        &mut || {},
    )
    .unwrap_err();
    assert!(matches!(err, WriteError::Changed { .. }), "{err}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "two\n");
    // What the caller does meanwhile runs once, before the new content is in place.
    let mut seen_meanwhile = Vec::new();
    write_checked_against(
        &resolve(&ws, "same.txt"),
        b"mine\n",
        None,
        &expected,
        Some(b"two\n"),
        &mut || seen_meanwhile.push(std::fs::read_to_string(&path).unwrap()),
    )
    .unwrap();
    assert_eq!(seen_meanwhile, ["two\n"]);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "mine\n");
    assert!(leftovers(&ws).is_empty());
}

#[test]
fn a_sweep_removes_dead_writers_temporaries_and_leaves_live_ones() {
    let ws = TestWorkspace::new();
    let dead = ws.write(".big.txt.gimlet-0123456789ab.tmp", "debris");
    let live = ws.write(".big.txt.gimlet-ba9876543210.tmp", "in use");
    let txn = ws.write(".a.txt.gimlet-00000000000a.txn", "waits for recovery");
    let mine = ws.write(".notes.gimlet-zzz.tmp", "not ours: not hex");
    let holder = File::open(&live).unwrap();
    rustix::fs::flock(&holder, FlockOperation::LockExclusive).unwrap();
    let (dir, _) = open_parent_dir(&resolve(&ws, "x.txt")).unwrap();
    assert_eq!(sweep(&dir), 1);
    assert!(!dead.exists());
    assert!(live.exists() && txn.exists() && mine.exists());
    drop(holder);
    assert_eq!(sweep(&dir), 1);
    assert!(!live.exists() && txn.exists());
    // The first write into a directory sweeps it.
    let sub = ws.write("sub/.f.gimlet-aaaaaaaaaaaa.tmp", "debris");
    write_atomic(&resolve(&ws, "sub/f"), b"x", None).unwrap();
    assert!(!sub.exists());
}

#[test]
fn temporary_names_are_recognised() {
    assert_eq!(temp_kind(b".big.txt.gimlet-0123456789ab.tmp"), Some("tmp"));
    assert_eq!(temp_kind(b".a.gimlet-0123456789ab.txn"), Some("txn"));
    assert_eq!(temp_kind(b"big.txt.gimlet-0123456789ab.tmp"), None);
    assert_eq!(temp_kind(b".big.txt.gimlet-0123456789a.tmp"), None);
    assert_eq!(temp_kind(b".x.gimlet-0123456789ag.tmp"), None);
    let name = temp_name(OsStr::new("big.txt"), "tmp");
    assert_eq!(temp_kind(name.as_bytes()), Some("tmp"), "{name:?}");
}

#[test]
fn named_temporaries_where_files_cannot_be_unnamed() {
    FORCE_NAMED.with(|f| f.set(true));
    let ws = TestWorkspace::new();
    let path = ws.write("a.txt", "one\n");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    let expected = expected_of(&path);
    write_checked(&resolve(&ws, "a.txt"), b"two\n", None, &expected).unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "two\n");
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o7777,
        0o600
    );
    let expected = expected_of(&path);
    std::fs::write(&path, "three\n").unwrap();
    assert!(write_checked(&resolve(&ws, "a.txt"), b"x", None, &expected).is_err());
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "three\n");
    write_checked(&resolve(&ws, "new.txt"), b"n", None, &Expected::Absent).unwrap();
    remove_checked(
        &resolve(&ws, "new.txt"),
        &expected_of(&ws.root().join("new.txt")),
    )
    .unwrap();
    assert!(leftovers(&ws).is_empty(), "{:?}", leftovers(&ws));
    FORCE_NAMED.with(|f| f.set(false));
}

/// Waits up to 5 s for `check` to hold.
fn eventually(mut check: impl FnMut() -> bool) -> bool {
    for _ in 0..500 {
        if check() {
            return true;
        }
        std::thread::park_timeout(std::time::Duration::from_millis(10));
    }
    check()
}

#[test]
fn an_append_to_the_file_just_replaced_is_carried_over() {
    let ws = TestWorkspace::new();
    let path = ws.write("log.txt", "one\n");
    let expected = expected_of(&path);
    // A program opened the file (as `echo >> log.txt` does) just before the swap...
    let mut early = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    write_checked(&resolve(&ws, "log.txt"), b"ONE\n", None, &expected).unwrap();
    // ... and writes just after: into the file that left the name.
    early.write_all(b"late\n").unwrap();
    assert!(
        eventually(|| std::fs::read_to_string(&path).unwrap() == "ONE\nlate\n"),
        "{:?}",
        std::fs::read_to_string(&path)
    );
    // An in-place rewrite of the old file is no append: nothing is carried over.
    let expected = expected_of(&path);
    let mut early = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    write_checked(&resolve(&ws, "log.txt"), b"TWO\n", None, &expected).unwrap();
    early.write_all(b"XXXXXXXXXXXX").unwrap();
    std::thread::park_timeout(std::time::Duration::from_millis(300));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "TWO\n");
}

#[test]
fn watched_files_move_through_their_checks_in_order_and_are_bounded() {
    let ws = TestWorkspace::new();
    let path = ws.write("w.txt", "one\n");
    let dir = File::open(ws.root()).unwrap();
    let start = std::time::Instant::now();
    let watched = |age_ms: u64| Watched {
        dir: rustix::io::dup(&dir).unwrap(),
        name: OsString::from("w.txt"),
        file: File::open(&path).unwrap(),
        len: 4,
        hash: ContentHash::of(b"one\n"),
        copied: 4,
        since: start
            .checked_sub(std::time::Duration::from_millis(age_ms))
            .unwrap(),
        checks: 1,
    };
    let mut queues = WatchQueues::default();
    // Oldest first, as they arrive: one due for its 20 ms check, one not yet.
    queues.push(watched(50));
    queues.push(watched(5));
    assert_eq!(
        queues.next_due(),
        start.checked_sub(std::time::Duration::from_millis(30))
    );
    queues.run_due(start);
    assert_eq!(queues.queues[1].len(), 1);
    assert_eq!(queues.queues[2].len(), 1);
    // Every check done two seconds on: nothing is left.
    queues.run_due(start + std::time::Duration::from_secs(3));
    assert_eq!(queues.len(), 0);
    assert_eq!(queues.next_due(), None);
    // A burst beyond the limit keeps the newest.
    for _ in 0..MAX_WATCHED + 10 {
        queues.push(watched(0));
    }
    assert_eq!(queues.len(), MAX_WATCHED);
}

#[test]
fn the_watcher_is_woken_only_when_it_would_look_too_late() {
    let now = std::time::Instant::now();
    let soon = now + std::time::Duration::from_millis(20);
    let later = now + std::time::Duration::from_secs(2);
    let state = |awake, deadline| InboxState {
        arrived: Vec::new(),
        awake,
        deadline,
    };
    // Working: it takes the file before it waits again.
    assert!(!state(true, None).must_wake_for(Some(soon)));
    // Waiting for an earlier check (a run of edits): it looks in time by itself.
    assert!(!state(false, Some(now)).must_wake_for(Some(soon)));
    // Waiting for nothing, or for a check due after this file's.
    assert!(state(false, None).must_wake_for(Some(soon)));
    assert!(state(false, Some(later)).must_wake_for(Some(soon)));
}

/// Spare temporaries are shared by the whole process: their tests take turns.
static SPARE_TESTS: Mutex<()> = Mutex::new(());

fn open_dir(path: &std::path::Path) -> OwnedFd {
    rustix::fs::open(path, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty()).unwrap()
}

fn ino(path: &std::path::Path) -> u64 {
    std::fs::metadata(path).unwrap().ino()
}

/// A workspace whose folder has spare temporaries: `a.txt` (mode 0640) written once, then the
/// watcher's work done (here called directly). Holds the spare tests' turn; this thread's
/// writes use spares until it goes.
struct SpareLab {
    ws: TestWorkspace,
    dir: OwnedFd,
    path: std::path::PathBuf,
    spares: Vec<u64>,
    _turn: std::sync::MutexGuard<'static, ()>,
}

impl SpareLab {
    fn new() -> Self {
        let turn = SPARE_TESTS.locked();
        USE_SPARES.with(|s| s.set(true));
        let ws = TestWorkspace::new();
        let dir = open_dir(&ws.root());
        let path = ws.write("a.txt", "one\n");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        // The first write notes the folder; the watcher makes spares.
        write_checked(&resolve(&ws, "a.txt"), b"two\n", None, &expected_of(&path)).unwrap();
        spares::top_up(std::time::Instant::now());
        let spares = spares::held(&dir);
        assert!(!spares.is_empty());
        Self {
            ws,
            dir,
            path,
            spares,
            _turn: turn,
        }
    }
}

impl Drop for SpareLab {
    fn drop(&mut self) {
        USE_SPARES.with(|s| s.set(false));
    }
}

#[test]
fn a_replacement_takes_a_spare_made_ahead_in_its_folder() {
    let lab = SpareLab::new();
    let (ws, dir, path, spares_before) = (&lab.ws, &lab.dir, &lab.path, &lab.spares);
    write_checked(&resolve(ws, "a.txt"), b"three\n", None, &expected_of(path)).unwrap();
    // The file is now one of the spares, with its content, mode and no debris.
    assert!(spares_before.contains(&ino(path)), "{spares_before:?}");
    assert!(!spares::held(dir).contains(&ino(path)));
    assert_eq!(std::fs::read_to_string(path).unwrap(), "three\n");
    assert_eq!(
        std::fs::metadata(path).unwrap().permissions().mode() & 0o7777,
        0o640
    );
    assert!(leftovers(ws).is_empty(), "{:?}", leftovers(ws));
    // A stale write still refuses, and the spare it took does not show.
    let expected = expected_of(path);
    std::fs::write(path, "outside\n").unwrap();
    spares::top_up(std::time::Instant::now());
    assert!(write_checked(&resolve(ws, "a.txt"), b"x", None, &expected).is_err());
    assert_eq!(std::fs::read_to_string(path).unwrap(), "outside\n");
    assert!(leftovers(ws).is_empty(), "{:?}", leftovers(ws));
}

#[test]
fn spares_serve_only_replacements_in_their_own_folder_and_go_when_unused() {
    let lab = SpareLab::new();
    let (ws, dir, spares_before) = (&lab.ws, &lab.dir, &lab.spares);
    let other = ws.write("sub/b.txt", "one\n");
    // A new file starts with its own mode and is made for it; another folder has its own.
    write_checked(&resolve(ws, "new.txt"), b"n", None, &Expected::Absent).unwrap();
    write_checked(
        &resolve(ws, "sub/b.txt"),
        b"two\n",
        None,
        &expected_of(&other),
    )
    .unwrap();
    assert!(!spares_before.contains(&ino(&ws.root().join("new.txt"))));
    assert!(!spares_before.contains(&ino(&other)));
    assert_eq!(&spares::held(dir), spares_before);
    // A folder not written for a while lets its spares go.
    spares::top_up(std::time::Instant::now() + spares::KEEP);
    assert!(spares::held(dir).is_empty());
}

#[test]
fn the_handles_a_write_keeps_close_on_exec() {
    let ws = TestWorkspace::new();
    let path = ws.write("a.txt", "one\n");
    write_checked(&resolve(&ws, "a.txt"), b"two\n", None, &expected_of(&path)).unwrap();
    // The late-append watcher now holds the folder and the replaced file for two seconds; a
    // program the server starts meanwhile (a hook, a language server) must not get them.
    let root = std::fs::canonicalize(ws.root()).unwrap();
    let mut held = Vec::new();
    for entry in std::fs::read_dir("/proc/self/fd").unwrap() {
        let entry = entry.unwrap();
        let Ok(target) = std::fs::read_link(entry.path()) else {
            continue;
        };
        if !target.starts_with(&root) {
            continue;
        }
        let info = std::fs::read_to_string(format!(
            "/proc/self/fdinfo/{}",
            entry.file_name().to_string_lossy()
        ))
        .unwrap_or_default();
        let Some(flags) = info
            .lines()
            .find_map(|l| l.strip_prefix("flags:"))
            .and_then(|f| u32::from_str_radix(f.trim(), 8).ok())
        else {
            continue;
        };
        held.push((target, flags & 0o2_000_000 != 0));
    }
    assert!(!held.is_empty(), "the watcher holds nothing here");
    assert!(held.iter().all(|(_, cloexec)| *cloexec), "{held:?}");
}
