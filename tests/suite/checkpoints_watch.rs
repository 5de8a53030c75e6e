//! Checkpoints follow changes through the system's file events (inotify on Linux,
//! `ReadDirectoryChangesW` on Windows, run under Wine by `scripts/wine.sh`; `FSEvents` on macOS
//! shares the Windows code): what a program other than gimlet changes between two calls is
//! listed as not the agent's, and the scans after the first are made from the watcher's
//! events, not by walking the root (the debug messages a client is sent say which).

#![expect(clippy::unwrap_used, reason = "test helpers fail loudly")]
#![expect(
    deprecated,
    reason = "logging is deprecated in 2026-07-28 (SEP-2577) but still served"
)]

use std::io::Write as _;
use std::path::{Path, PathBuf};

use rmcp::model::{LoggingLevel, SetLevelRequestParams};
use serde_json::json;

use crate::common::{Gimlet, TestClient, ok_text};

/// gimlet with checkpoints on, its client sent messages down to debug level.
async fn start_at_debug() -> (Gimlet, tempfile::TempDir) {
    let started = Gimlet::start_with_config(
        TestClient::default(),
        "[checkpoints]\nenabled = true\n",
        &[],
    )
    .await;
    started
        .0
        .client
        .set_level(SetLevelRequestParams::new(LoggingLevel::Debug))
        .await
        .unwrap();
    started
}

/// The messages a client at debug level has been sent so far.
fn messages(gimlet: &Gimlet) -> Vec<String> {
    gimlet
        .handler
        .logs
        .lock()
        .unwrap()
        .iter()
        .filter_map(|m| m.data["message"].as_str().map(str::to_owned))
        .collect()
}

/// Why scans after the `first` message walked the root whole, but for the reason Windows
/// has to (a folder moved or removed: Wine reports some such moves by one name alone).
fn fallbacks(gimlet: &Gimlet, first: usize) -> Vec<String> {
    gimlet
        .handler
        .logs
        .lock()
        .unwrap()
        .iter()
        .skip(first)
        .filter(|m| m.data["message"] == "a full checkpoint scan")
        .map(|m| m.data["fallback"].to_string())
        .filter(|why| !(cfg!(windows) && why.contains("Folder")))
        .collect()
}

/// `rel` (`/`-separated) under `root`, with the system's separators.
fn at(root: &Path, rel: &str) -> PathBuf {
    rel.split('/')
        .fold(root.to_owned(), |path, part| path.join(part))
}

async fn write(gimlet: &Gimlet, path: &str) {
    ok_text(
        &gimlet
            .call("write", json!({"path": path, "content": "w\n"}))
            .await,
    );
}

/// The lines of the listing's newest entry of changes made outside the agent's calls.
fn outside(listing: &str) -> &str {
    let after = listing
        .split("outside (not the agent's")
        .nth(1)
        .unwrap_or_else(|| panic!("no outside changes listed:\n{listing}"));
    after.split("\n#").next().unwrap()
}

#[tokio::test]
async fn outside_changes_are_followed_through_the_watcher() {
    let (gimlet, _config) = start_at_debug().await;
    let root = gimlet.root();
    gimlet.write("src/deep/a.txt", "one\n");
    gimlet.write("old/b.txt", "bee\n");
    gimlet.write("gone.txt", "bye\n");
    write(&gimlet, "w1.txt").await;
    // Another program, between two calls: a file deep down, a removal, a folder renamed and
    // a new folder with files.
    std::fs::write(at(&root, "src/deep/a.txt"), "one\ntwo\n").unwrap();
    std::fs::remove_file(at(&root, "gone.txt")).unwrap();
    std::fs::rename(at(&root, "old"), at(&root, "new")).unwrap();
    std::fs::create_dir_all(at(&root, "made/inner")).unwrap();
    std::fs::write(at(&root, "made/inner/c.txt"), "sea\n").unwrap();
    write(&gimlet, "w2.txt").await;
    let listing = ok_text(&gimlet.call("checkpoints", json!({})).await);
    let said = outside(&listing);
    for line in [
        "M src/deep/a.txt +1 -0",
        "D gone.txt",
        "R old/b.txt -> new/b.txt",
        "A made/inner/c.txt",
    ] {
        assert!(said.contains(line), "{line:?} not in\n{listing}");
    }
    // A file of the renamed folder changed in place: its new name is watched (on Windows the
    // scan after the rename set up a new watch: Wine reports nothing from inside a renamed
    // folder).
    std::fs::write(at(&root, "new/b.txt"), "bee\nbuzz\n").unwrap();
    write(&gimlet, "w3.txt").await;
    let listing = ok_text(&gimlet.call("checkpoints", json!({})).await);
    assert!(outside(&listing).contains("M new/b.txt +1 -0"), "{listing}");
    let said = messages(&gimlet);
    let from_events = said
        .iter()
        .filter(|m| *m == "a checkpoint scan from the watcher's events")
        .count();
    // The scans before and after each write but the first.
    assert!(from_events >= 4, "{said:#?}");
    let fallbacks = fallbacks(&gimlet, 0);
    assert!(fallbacks.is_empty(), "{fallbacks:?}");
    gimlet.stop().await;
}

/// Everything under `root` (`/`-separated names): a file's content, `None` for a folder.
pub(super) fn snapshot(root: &Path) -> std::collections::BTreeMap<String, Option<Vec<u8>>> {
    let mut found = std::collections::BTreeMap::new();
    let mut stack = vec![root.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_str()
                .unwrap()
                .replace('\\', "/");
            if path.is_dir() {
                found.insert(rel, None);
                stack.push(path);
            } else {
                found.insert(rel, Some(std::fs::read(&path).unwrap()));
            }
        }
    }
    found
}

/// Every file under `root` with its content, the ignored `build` folder left out (no cookie is
/// left between calls: none is).
fn files(root: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    snapshot(root)
        .into_iter()
        .filter(|(rel, _)| rel != "build" && !rel.starts_with("build/"))
        .filter_map(|(rel, content)| Some((rel, content?)))
        .collect()
}

/// The paths the entry of changes made outside calls just before the checkpoint of
/// `write: <name>` lists (none when there is no such entry).
fn outside_before(listing: &str, name: &str) -> std::collections::BTreeSet<String> {
    let mut lines = listing
        .lines()
        .skip_while(|line| !line.ends_with(&format!("write: {name} (0s ago)")));
    lines
        .next()
        .unwrap_or_else(|| panic!("no {name} in\n{listing}"));
    let mut lines = lines.skip_while(|line| !line.trim_start().starts_with('#'));
    let mut paths = std::collections::BTreeSet::new();
    if !lines
        .next()
        .is_some_and(|header| header.contains("outside (not the agent's"))
    {
        return paths;
    }
    for line in lines.take_while(|line| !line.trim_start().starts_with('#')) {
        let line = line.trim_start();
        let Some((kind, rest)) = line.split_once(' ') else {
            continue;
        };
        let rest = rest.split(" +").next().unwrap();
        match kind {
            "A" | "D" | "M" => {
                paths.insert(rest.to_owned());
            }
            "R" => {
                let (from, to) = rest.split_once(" -> ").unwrap();
                paths.insert(from.to_owned());
                paths.insert(to.to_owned());
            }
            _ => {}
        }
    }
    paths
}

/// Files and folders the random changes pick from.
const FILES: [&str; 7] = [
    "a.txt",
    "src/b.rs",
    "src/deep/c.rs",
    "d/e.txt",
    "d/f/g.txt",
    "n/x.txt",
    "n/m/y.txt",
];
const DIRS: [&str; 5] = ["src", "src/deep", "d", "n", "n/m"];

/// A small random number source (xorshift): the same rounds on every system.
struct Dice(u64);

impl Dice {
    fn roll(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        usize::try_from(self.0 % n as u64).unwrap()
    }
}

/// Makes change `step` of round `round` under `root` (whose files were `before`), as another
/// program would; returns whether it moved a folder.
fn change(
    root: &Path,
    round: usize,
    step: usize,
    dice: &mut Dice,
    before: &std::collections::BTreeMap<String, Vec<u8>>,
) -> bool {
    let file = |i: usize| at(root, FILES[i]);
    let dir = |i: usize| at(root, DIRS[i]);
    match step {
        0 => {
            let path = file(dice.roll(FILES.len()));
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, format!("{round}\n").repeat(dice.roll(3))).unwrap();
        }
        1 => {
            // Any file there is, moved folders' included.
            let existing: Vec<&String> = before.keys().collect();
            let path = at(root, existing[dice.roll(existing.len())]);
            std::fs::write(&path, format!("{round}\n")).unwrap();
        }
        2 => {
            let _ = std::fs::remove_file(file(dice.roll(FILES.len())));
        }
        3 => {
            let to = file(dice.roll(FILES.len()));
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            let _ = std::fs::rename(file(dice.roll(FILES.len())), to);
        }
        4 => {
            let base = dir(dice.roll(DIRS.len())).join(format!("new{round}"));
            std::fs::create_dir_all(base.join("inner")).unwrap();
            std::fs::write(base.join("one"), "1").unwrap();
            std::fs::write(base.join("inner").join("two"), "2").unwrap();
        }
        5 => {
            // A folder moved to a new name, at the top or into another folder.
            let from = dir(dice.roll(DIRS.len()));
            let into = dir(dice.roll(DIRS.len()));
            let parent = if into.is_dir() && !into.starts_with(&from) {
                into
            } else {
                root.to_owned()
            };
            if from.is_dir() {
                std::fs::rename(&from, parent.join(format!("moved{round}"))).unwrap();
                return true;
            }
        }
        _ => {
            std::fs::create_dir_all(at(root, "build/sub")).unwrap();
            std::fs::write(at(root, &format!("build/sub/f{round}")), "o").unwrap();
        }
    }
    false
}

/// Random changes by another program, each followed by a call: the entry before the call
/// lists exactly the files whose content changed, came or went (the full walk's answer,
/// computed here from the tree itself).
#[tokio::test]
async fn random_outside_changes_are_each_listed_exactly() {
    let (gimlet, _config) = start_at_debug().await;
    let root = gimlet.root();
    gimlet.write(".gitignore", "build/\n");
    for (i, file) in FILES.iter().enumerate() {
        gimlet.write(file, format!("{i}\n"));
    }
    write(&gimlet, "w0.txt").await;
    // (That call's scan before walked the root: the .gitignore was new.)
    let first = messages(&gimlet).len();
    let mut dice = Dice(0x9E37_79B9_7F4A_7C15);
    let mut moves = 0;
    for round in 1..=60 {
        let before = files(&root);
        let step = dice.roll(7);
        moves += usize::from(change(&root, round, step, &mut dice, &before));
        let after = files(&root);
        let expected: std::collections::BTreeSet<String> = before
            .keys()
            .chain(after.keys())
            .filter(|path| before.get(*path) != after.get(*path))
            .cloned()
            .collect();
        let name = format!("w{round}.txt");
        write(&gimlet, &name).await;
        let listing = ok_text(&gimlet.call("checkpoints", json!({"limit": 4})).await);
        assert_eq!(
            outside_before(&listing, &name),
            expected,
            "round {round}, step {step}:\n{listing}"
        );
    }
    // The watcher never lost track (on Windows a folder moved or removed makes the scan walk
    // the root and set up a new watch).
    let said = messages(&gimlet).split_off(first);
    let count = |what: &str| said.iter().filter(|m| *m == what).count();
    let (events, setups) = (
        count("a checkpoint scan from the watcher's events"),
        count("a full checkpoint scan, setting up the watcher"),
    );
    let fallbacks = fallbacks(&gimlet, first);
    assert!(fallbacks.is_empty(), "{fallbacks:?}");
    assert!(events > 100, "{events} scans from events, {setups} set-ups");
    let _ = writeln!(
        std::io::stderr(),
        "{events} scans from events, {setups} with a new watcher, {moves} folders moved"
    );
    assert!(moves > 0, "the changes moved no folder");
    gimlet.stop().await;
}
