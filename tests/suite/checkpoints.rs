//! Checkpoints (issue 36): what shell commands change is listed, diffed and undone byte for
//! byte, modes and links included; the user's edits between calls are not the agent's; `.git`
//! and ignored trees are left alone; the list survives a restart.

#![expect(clippy::unwrap_used, reason = "test helpers fail loudly")]

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::time::Duration;

use serde_json::json;

use super::crash::send;
use crate::common::{Gimlet, TestClient, err_text, eventually, ok_text};

/// Everything under `root`, `.git` and ignored folders included: kind, content or link
/// target, and mode.
fn tree(root: &Path) -> BTreeMap<String, (char, Vec<u8>, u32)> {
    let mut found = BTreeMap::new();
    let mut stack = vec![root.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let rel = path.strip_prefix(root).unwrap().display().to_string();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let mode = meta.permissions().mode() & 0o7777;
            if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&path).unwrap();
                found.insert(rel, ('l', target.display().to_string().into_bytes(), 0));
            } else if meta.is_dir() {
                found.insert(rel, ('d', Vec::new(), mode));
                stack.push(path);
            } else {
                found.insert(rel, ('f', std::fs::read(&path).unwrap(), mode));
            }
        }
    }
    found
}

/// A small project: files, a script, a link, a repository and an ignored build folder.
fn project(gimlet: &Gimlet) {
    gimlet.write("a.txt", "alpha\nbeta\ngamma\n");
    gimlet.write("run.sh", "#!/bin/sh\necho run\n");
    gimlet.write("dir/c.txt", "see\n");
    gimlet.write(".gitignore", "build/\n");
    gimlet.write("build/out.o", "object");
    gimlet.write(".git/HEAD", "ref: refs/heads/main\n");
    gimlet.write(".git/objects/ab/cdef", "blob");
    std::os::unix::fs::symlink("a.txt", gimlet.root().join("link")).unwrap();
}

/// Checkpoints are on by default on the systems these tests run on; the config says so
/// anyway, so that the tests do not depend on the default.
const ON: &str = "[checkpoints]\nenabled = true\n";

/// gimlet with checkpoints on; the folder holds its config.
async fn start() -> (Gimlet, tempfile::TempDir) {
    Gimlet::start_with_config(TestClient::default(), ON, &[]).await
}

async fn bash(gimlet: &Gimlet, command: &str) -> String {
    ok_text(&gimlet.call("bash", json!({ "command": command })).await)
}

/// The number of the newest checkpoint listed with `tool`.
fn newest(listing: &str, tool: &str) -> u64 {
    listing
        .lines()
        .find_map(|line| {
            let rest = line.trim_start().strip_prefix('#')?;
            let (id, after) = rest.split_once(' ')?;
            after.starts_with(tool).then(|| id.parse().unwrap())
        })
        .unwrap_or_else(|| panic!("no `{tool}` checkpoint in\n{listing}"))
}

#[tokio::test]
async fn shell_changes_are_undone_byte_for_byte() {
    let (gimlet, _config) = start().await;
    project(&gimlet);
    let root = gimlet.root();
    let commands = [
        "sed -i 's/beta/BETA/' a.txt",
        "rm dir/c.txt",
        "mv a.txt moved.txt",
        "chmod +x run.sh",
        "mkdir -p gen/deep && for i in $(seq 1 500); do echo \"file $i\" > gen/deep/f$i.txt; done",
        "ln -sfn run.sh link",
        "rm a.txt && ln -s dir/c.txt a.txt",
        "printf 'x' >> run.sh && chmod 600 run.sh && echo new > dir/new.txt",
    ];
    for command in commands {
        let before = tree(&root);
        bash(&gimlet, command).await;
        assert_ne!(tree(&root), before, "{command} changed nothing");
        let text = ok_text(&gimlet.call("undo", json!({})).await);
        assert!(text.contains("undoing `bash`"), "{command}: {text}");
        assert_eq!(
            tree(&root),
            before,
            "{command} was not undone byte for byte"
        );
    }
    // The list shows each call, and what it did to which path.
    let listing = ok_text(&gimlet.call("checkpoints", json!({"limit": 100})).await);
    for line in [
        "M a.txt +1 -1",
        "D dir/c.txt +0 -1",
        "R a.txt -> moved.txt",
        "M run.sh mode 644 -> 755",
        "A gen/deep/f1.txt +1 -0",
        "and 480 more",
        "L link -> run.sh",
        "L a.txt -> dir/c.txt",
    ] {
        assert!(listing.contains(line), "{line} not in\n{listing}");
    }
    gimlet.stop().await;
}

#[tokio::test]
async fn git_and_ignored_trees_are_left_alone_and_a_change_there_is_said() {
    let (gimlet, _config) = start().await;
    project(&gimlet);
    let root = gimlet.root();
    bash(&gimlet, "echo one > a.txt").await;
    let text = bash(&gimlet, "echo more > build/more.o && echo x > .git/x").await;
    assert!(
        text.contains("changed ignored files under `build`"),
        "{text}"
    );
    let git_before = tree(&root.join(".git"));
    let build_before = tree(&root.join("build"));
    // Undo steps back to the call that changed a captured file; .git and build/ stay.
    let text = ok_text(&gimlet.call("undo", json!({})).await);
    assert!(text.contains("`a.txt` restored"), "{text}");
    assert_eq!(tree(&root.join(".git")), git_before);
    assert_eq!(tree(&root.join("build")), build_before);
    let listing = ok_text(&gimlet.call("checkpoints", json!({})).await);
    // No path in `.git` is listed (the label of #3 names one).
    assert!(
        !listing
            .lines()
            .any(|l| l.starts_with("    ") && l.contains(".git/")),
        "{listing}"
    );
    assert!(listing.contains("? build/ (ignored"), "{listing}");
    gimlet.stop().await;
}

#[tokio::test]
async fn an_edit_between_calls_is_not_the_agents_and_undo_leaves_it() {
    let (gimlet, _config) = start().await;
    gimlet.write("keep.txt", "k\n");
    bash(&gimlet, "echo one > a.txt").await;
    // The user's editor, between two calls.
    let ide = gimlet.write("ide.txt", "typed by the user\n");
    bash(&gimlet, "echo two > c.txt").await;
    let listing = ok_text(&gimlet.call("checkpoints", json!({})).await);
    assert!(listing.contains("outside (not the agent's"), "{listing}");
    let outside = listing
        .split("outside (not the agent's")
        .nth(1)
        .unwrap()
        .lines()
        .nth(1)
        .unwrap();
    assert!(outside.contains("A ide.txt +1"), "{listing}");
    ok_text(&gimlet.call("undo", json!({})).await);
    ok_text(&gimlet.call("undo", json!({})).await);
    let text = err_text(&gimlet.call("undo", json!({})).await);
    assert!(text.contains("nothing to undo"), "{text}");
    assert!(!gimlet.root().join("a.txt").exists());
    assert!(!gimlet.root().join("c.txt").exists());
    assert_eq!(std::fs::read_to_string(ide).unwrap(), "typed by the user\n");
    gimlet.stop().await;
}

#[tokio::test]
async fn a_background_jobs_writes_are_attributed_to_it_and_undone() {
    let (gimlet, _config) = start().await;
    gimlet.write("data.txt", "original\n");
    // The file written above is found as the user's by this call's scan before.
    bash(&gimlet, "true").await;
    let before = tree(&gimlet.root());
    ok_text(
        &gimlet
            .call(
                "bash",
                json!({"command": "sleep 0.3; echo job > job.txt; echo changed > data.txt; chmod 700 job.txt", "run_in_background": true}),
            )
            .await,
    );
    let job = gimlet.root().join("job.txt");
    assert!(
        eventually(Duration::from_secs(10), || {
            std::fs::metadata(&job).is_ok_and(|m| m.permissions().mode() & 0o777 == 0o700)
        })
        .await
    );
    let mut ended = false;
    for _ in 0..50 {
        let text = ok_text(&gimlet.call("bash_output", json!({"job_id": "job-1"})).await);
        if !text.contains("running") {
            ended = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(ended);
    let listing = ok_text(&gimlet.call("checkpoints", json!({})).await);
    let job = listing
        .split("bash (job-1) (background job)")
        .nth(1)
        .unwrap_or_else(|| panic!("{listing}"));
    let job = job.split("\n  #").next().unwrap();
    assert!(job.contains("A job.txt +1 -0"), "{listing}");
    assert!(job.contains("M data.txt +1 -1"), "{listing}");
    // Nothing of the job's is the user's.
    for outside in listing.split("outside (not the agent's").skip(1) {
        let outside = outside.split("\n  #").next().unwrap();
        assert!(!outside.contains("job.txt"), "{listing}");
    }
    let text = ok_text(&gimlet.call("undo", json!({})).await);
    assert!(text.contains("`job.txt` removed"), "{text}");
    assert_eq!(tree(&gimlet.root()), before);
    gimlet.stop().await;
}

#[tokio::test]
async fn a_restore_is_refused_when_the_file_changed_since_and_is_itself_undone() {
    let (gimlet, _config) = start().await;
    let path = gimlet.write("a.txt", "old\n");
    bash(&gimlet, "echo new > a.txt && echo made > made.txt").await;
    let listing = ok_text(&gimlet.call("checkpoints", json!({})).await);
    let id = newest(&listing, "bash");
    let diff = ok_text(&gimlet.call("diff", json!({"checkpoint": id})).await);
    assert!(diff.contains("--- a/a.txt\n+++ b/a.txt\n"), "{diff}");
    assert!(diff.contains("--- /dev/null\n+++ b/made.txt\n"), "{diff}");
    // The user changes the file afterwards.
    std::fs::write(&path, "mine\n").unwrap();
    let text = err_text(&gimlet.call("restore", json!({"checkpoint": id})).await);
    assert!(text.contains("`a.txt` changed since checkpoint"), "{text}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "mine\n");
    assert!(
        gimlet.root().join("made.txt").exists(),
        "refused means nothing changed"
    );
    let since = ok_text(
        &gimlet
            .call("diff", json!({"checkpoint": id, "since": true}))
            .await,
    );
    assert!(since.contains("+mine") || since.contains("mine"), "{since}");
    // Chosen paths only, with overwrite.
    let text = ok_text(
        &gimlet
            .call(
                "restore",
                json!({"checkpoint": id, "paths": ["a.txt"], "overwrite": true}),
            )
            .await,
    );
    assert!(text.contains("`a.txt` restored"), "{text}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "old\n");
    assert!(gimlet.root().join("made.txt").exists());
    // The restore is a checkpoint: undo reverts it.
    ok_text(&gimlet.call("undo", json!({})).await);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "mine\n");
    gimlet.stop().await;
}

#[tokio::test]
async fn the_list_survives_a_restart() {
    let root = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let config = data.path().join("config.toml");
    std::fs::write(&config, ON).unwrap();
    let same = |command: &mut tokio::process::Command| {
        command
            .env("XDG_DATA_HOME", data.path())
            .arg("--root")
            .arg(root.path())
            .arg("--config")
            .arg(&config);
    };
    let first = Gimlet::start_adjusted(TestClient::default(), &[], same).await;
    let file = root.path().join("kept.txt");
    std::fs::write(&file, "before\n").unwrap();
    let command = format!("echo after > {}", file.display());
    bash(&first, &command).await;
    first.stop().await;
    // Changed while no gimlet ran: the next one lists it as outside.
    std::fs::write(root.path().join("offline.txt"), "x").unwrap();
    let second = Gimlet::start_adjusted(TestClient::default(), &[], same).await;
    let listing = ok_text(&second.call("checkpoints", json!({})).await);
    assert!(listing.contains(&format!("bash: {command}")), "{listing}");
    assert!(listing.contains("A offline.txt"), "{listing}");
    let id = newest(&listing, "bash");
    ok_text(&second.call("restore", json!({"checkpoint": id})).await);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "before\n");
    second.stop().await;
}

#[tokio::test]
async fn damaged_content_is_reported_and_never_written() {
    let (gimlet, _config) = start().await;
    let path = gimlet.write("a.txt", "old\n");
    bash(&gimlet, "echo new > a.txt").await;
    let listing = ok_text(&gimlet.call("checkpoints", json!({})).await);
    let id = newest(&listing, "bash");
    // Every kept content in the data folder cut short.
    let mut stack = vec![gimlet.data.path().join("gimlet/checkpoints")];
    let mut damaged = 0;
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap().path();
            if entry.is_dir() {
                stack.push(entry);
            } else if entry.parent().unwrap().parent().unwrap().ends_with("blobs") {
                std::fs::write(&entry, "x").unwrap();
                damaged += 1;
            }
        }
    }
    assert!(damaged > 0);
    let text = err_text(&gimlet.call("restore", json!({"checkpoint": id})).await);
    assert!(text.contains("does not match its hash"), "{text}");
    assert!(text.contains("nothing was restored"), "{text}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "new\n");
    let listing = ok_text(&gimlet.call("checkpoints", json!({})).await);
    assert!(
        listing.contains("[damage: the checkpoint store is damaged"),
        "{listing}"
    );
    gimlet.stop().await;
}

/// A raw server (JSON-RPC lines) with checkpoints on, on `root` with its data in `data`.
async fn raw_server(
    data: &Path,
    root: &Path,
) -> (
    tokio::process::Child,
    tokio::process::ChildStdin,
    tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
) {
    use tokio::io::AsyncBufReadExt as _;
    let config = data.join("checkpoints-on.toml");
    std::fs::write(&config, ON).unwrap();
    let mut child = crate::common::raw_command(data, root)
        .arg("--config")
        .arg(&config)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    send(&mut stdin, &crate::common::initialize_request("restore")).await;
    send(
        &mut stdin,
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    (child, stdin, stdout)
}

/// The text of a raw call's answer, and whether it is an error.
fn answer_text(answer: &serde_json::Value) -> (String, bool) {
    let result = &answer["result"];
    let text = result["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n");
    (text, result["isError"] == true)
}

/// Names of gimlet's temporaries anywhere under `root`.
fn debris(root: &Path) -> Vec<String> {
    tree(root)
        .into_keys()
        .filter(|rel| rel.contains(".gimlet-"))
        .collect()
}

/// Runs `script` with `sh` in `root`, as a user would.
async fn sh(root: &Path, script: &str) {
    let status = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(root)
        .status()
        .await
        .unwrap();
    assert!(status.success(), "{script}");
}

/// Files for a restore to put back: four big files (4 MB each, so that a restore takes long
/// enough to be killed in the middle), a file the command deletes, a script, and a link.
/// Returns the command that changes them all: every big file rewritten, one deleted, one
/// created, a mode changed, a link swapped.
fn many_changes(root: &Path) -> &'static str {
    let line = |c: char| -> String { std::iter::repeat_n(c, 99).chain(['\n']).collect() };
    for i in 0..4 {
        std::fs::write(root.join(format!("big{i}.txt")), line('a').repeat(40_000)).unwrap();
    }
    std::fs::create_dir_all(root.join("dir")).unwrap();
    std::fs::write(root.join("dir/gone.txt"), "deleted by the command\n").unwrap();
    std::fs::write(root.join("run.sh"), "#!/bin/sh\necho run\n").unwrap();
    std::fs::write(root.join("other.txt"), "the link's other target\n").unwrap();
    std::os::unix::fs::symlink("run.sh", root.join("link")).unwrap();
    "for i in 0 1 2 3; do yes bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb \
        | head -n 40000 > big$i.txt; done; rm dir/gone.txt; echo made > dir/made.txt; \
        chmod +x run.sh; ln -sfn other.txt link"
}

/// Starts gimlet on `root`, sends `restore` of checkpoint `id`, and kills gimlet: when the
/// answer comes the first time (`full_call` learns how long a restore takes), then at a
/// random moment of the call (its commit comes late in it, after the checks and reads).
async fn restore_and_kill(
    data: &Path,
    root: &Path,
    id: u64,
    full_call: &mut Option<Duration>,
    round: u32,
) {
    use super::crash::{call, jitter};
    let (mut child, mut stdin, mut stdout) = raw_server(data, root).await;
    // The baseline is built before the restore is sent, so that the kill lands in it.
    call(&mut stdin, &mut stdout, 2, "checkpoints", json!({})).await;
    let request = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "restore", "arguments": {"checkpoint": id}}});
    let started = std::time::Instant::now();
    send(&mut stdin, &request).await;
    match *full_call {
        // Round 0 lets the restore finish, to learn how long one takes.
        None => {
            while let Some(line) = stdout.next_line().await.unwrap() {
                let message: serde_json::Value = serde_json::from_str(&line).unwrap();
                if message["id"] == 3 {
                    let (text, error) = answer_text(&message);
                    assert!(!error, "{text}");
                    break;
                }
            }
            *full_call = Some(started.elapsed());
        }
        Some(duration) => tokio::time::sleep(duration.mul_f64(0.9 * jitter(round))).await,
    }
    child.start_kill().unwrap();
    child.wait().await.unwrap();
}

// See: issue 36 ("a kill -9 during a restore leaves every file whole (the intent log)").
#[tokio::test]
async fn a_restore_killed_at_any_moment_is_all_or_nothing_and_can_be_done_again() {
    use super::crash::call;
    let root_dir = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(root_dir.path()).unwrap();
    let command = many_changes(&root);
    let before = tree(&root);
    let (mut child, mut stdin, mut stdout) = raw_server(data.path(), &root).await;
    let (text, error) = answer_text(
        &call(
            &mut stdin,
            &mut stdout,
            2,
            "bash",
            json!({"command": command}),
        )
        .await,
    );
    assert!(!error, "{text}");
    let after = tree(&root);
    assert_ne!(after, before);
    let (listing, _) =
        answer_text(&call(&mut stdin, &mut stdout, 3, "checkpoints", json!({})).await);
    let id = newest(&listing, "bash");
    child.start_kill().unwrap();
    child.wait().await.unwrap();
    let mut full_call: Option<Duration> = None;
    let (mut torn_before_recovery, mut done, mut not_done) = (0, 0, 0);
    for round in 0..14u32 {
        assert_eq!(
            tree(&root),
            after,
            "round {round} starts from the after state"
        );
        restore_and_kill(data.path(), &root, id, &mut full_call, round).await;
        let killed = tree(&root);
        let clean = |t: &BTreeMap<_, _>| {
            let mut t: BTreeMap<String, _> = t.clone();
            t.retain(|rel, _| !rel.contains(".gimlet-"));
            t
        };
        if clean(&killed) != before && clean(&killed) != after {
            torn_before_recovery += 1;
        }
        // The next start rolls an interrupted restore back (or finishes one that went in).
        let (mut child, mut stdin, mut stdout) = raw_server(data.path(), &root).await;
        let (listing, error) =
            answer_text(&call(&mut stdin, &mut stdout, 2, "checkpoints", json!({})).await);
        assert!(
            !error && !listing.contains("[damage"),
            "round {round}: {listing}"
        );
        assert_eq!(debris(&root), Vec::<String>::new(), "round {round}");
        let now = tree(&root);
        if now == before {
            done += 1;
        } else {
            assert!(
                now == after,
                "round {round}: neither all before nor all after: {}",
                mixed(&now, &before, &after)
            );
            not_done += 1;
        }
        // Done again, the restore leaves the before state exactly.
        let (text, error) = answer_text(
            &call(
                &mut stdin,
                &mut stdout,
                3,
                "restore",
                json!({"checkpoint": id}),
            )
            .await,
        );
        assert!(!error, "round {round}: {text}");
        assert_eq!(tree(&root), before, "round {round}: {text}");
        child.start_kill().unwrap();
        child.wait().await.unwrap();
        // The user runs the command again, for the next round.
        sh(&root, command).await;
    }
    // Round 0 went in; some kill must come before the restore went in, or the test proves
    // little.
    assert!(
        not_done > 0,
        "kills must land both before and after the restore went in ({done} after, {not_done} \
         before; {torn_before_recovery} left it torn until the next start)"
    );
    let pending = data.path().join("gimlet/output/.pending");
    let left: Vec<_> = std::fs::read_dir(&pending)
        .map(|entries| entries.map(|e| e.unwrap().file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "intents left: {left:?}");
}

/// Which paths of `now` hold the `before` state, which the `after` state, which neither.
fn mixed(
    now: &BTreeMap<String, (char, Vec<u8>, u32)>,
    before: &BTreeMap<String, (char, Vec<u8>, u32)>,
    after: &BTreeMap<String, (char, Vec<u8>, u32)>,
) -> String {
    let mut paths: Vec<&String> = now
        .keys()
        .chain(before.keys())
        .chain(after.keys())
        .collect();
    paths.sort();
    paths.dedup();
    paths
        .into_iter()
        .map(|p| {
            let (n, b, a) = (now.get(p), before.get(p), after.get(p));
            let which = if n == b && n == a {
                "same"
            } else if n == b {
                "before"
            } else if n == a {
                "after"
            } else {
                "neither"
            };
            format!("{p}: {which}")
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[tokio::test]
async fn a_call_whose_content_does_not_fit_the_store_says_so() {
    let config = "[checkpoints]\nenabled = true\nmax_store_mb = 1\n";
    let (gimlet, _config) = Gimlet::start_with_config(TestClient::default(), config, &[]).await;
    gimlet.write("small.txt", "small\n");
    let text = bash(&gimlet, "echo changed > small.txt").await;
    assert!(!text.contains("store is full"), "{text}");
    // 2 MB: under the file limit (16 MiB), over the whole store's.
    let text = bash(&gimlet, "head -c 2000000 /dev/urandom > big.bin").await;
    assert!(
        text.contains("the checkpoint store is full") && text.contains("`big.bin`"),
        "{text}"
    );
    gimlet.stop().await;
}

/// A regression test: the scan after a call runs when the client cancels it or it times out
/// (the call finishes on its worker thread either way), so its changes are its own.
#[tokio::test]
async fn a_cancelled_calls_changes_are_its_own() {
    let (gimlet, _config) = start().await;
    gimlet.write("keep.txt", "k\n");
    bash(&gimlet, "true").await;
    let written = gimlet.root().join("written.txt");
    // The client gives up on the call (notifications/cancelled) after it wrote its file.
    let call = gimlet.call(
        "bash",
        json!({"command": "echo by the call > written.txt; sleep 30"}),
    );
    let (timed_out, wrote) = tokio::join!(
        tokio::time::timeout(Duration::from_secs(2), call),
        eventually(Duration::from_millis(1800), || written.exists()),
    );
    assert!(timed_out.is_err() && wrote, "the command never wrote");
    // A call that runs out of time, too.
    let text = err_text(
        &gimlet
            .call(
                "bash",
                json!({"command": "echo late > timed.txt; sleep 30", "timeout_ms": 1000}),
            )
            .await,
    );
    assert!(
        text.contains("timed out") || text.contains("timeout"),
        "{text}"
    );
    // Each is listed with its change; neither change is outside (the user's).
    let listing = ok_text(&gimlet.call("checkpoints", json!({})).await);
    for (label, change) in [
        ("bash: echo by the call", "A written.txt"),
        ("bash: echo late", "A timed.txt"),
    ] {
        let own = listing
            .split(label)
            .nth(1)
            .unwrap_or_else(|| panic!("no checkpoint `{label}` in\n{listing}"));
        let own = own.split("\n  #").next().unwrap();
        assert!(own.contains(change), "{listing}");
    }
    for outside in listing.split("outside (not the agent's").skip(1) {
        let outside = outside.split("\n  #").next().unwrap();
        assert!(
            !outside.contains("written.txt") && !outside.contains("timed.txt"),
            "{listing}"
        );
    }
    // Undo reverts each as a call's.
    let text = ok_text(&gimlet.call("undo", json!({})).await);
    assert!(text.contains("`timed.txt` removed"), "{text}");
    let text = ok_text(&gimlet.call("undo", json!({})).await);
    assert!(text.contains("`written.txt` removed"), "{text}");
    assert!(!written.exists());
    gimlet.stop().await;
}
