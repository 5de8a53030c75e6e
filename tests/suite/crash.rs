//! Killing the server at any moment leaves the old file or the new one, never a mix, never
//! debris, and never half of a multi-file change.

#![expect(clippy::unwrap_used, reason = "test helpers fail loudly")]

use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::common::{initialize_request, raw_command};

fn content(letter: char) -> String {
    let line: String = std::iter::repeat_n(letter, 79)
        .chain(std::iter::once('\n'))
        .collect();
    line.repeat(100_000) // 8 MB
}

pub(super) async fn send(stdin: &mut tokio::process::ChildStdin, message: &Value) {
    // The server may already be dead: a broken pipe is part of the test.
    let _ = stdin.write_all(format!("{message}\n").as_bytes()).await;
    let _ = stdin.flush().await;
}

#[cfg_attr(
    windows,
    ignore = "minutes under Wine; the Windows write is weaker (docs/security.md)"
)]
#[tokio::test]
async fn sigkill_during_large_writes_leaves_old_or_new() {
    let root = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let path = root.path().join("big.txt");
    let (a, b) = (content('a'), content('b'));
    std::fs::write(&path, &a).unwrap();
    let mut saw_new = 0;
    let mut full_write: Option<Duration> = None;
    for round in 0..16u32 {
        let current = std::fs::read_to_string(&path).unwrap();
        let next = if current == a { &b } else { &a };
        let mut child = raw_command(data.path(), root.path()).spawn().unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        send(&mut stdin, &initialize_request("crash")).await;
        send(
            &mut stdin,
            &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        )
        .await;
        send(
            &mut stdin,
            &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "read", "arguments": {"path": "big.txt", "limit": 1}}}),
        )
        .await;
        // Wait for the read, so the write is allowed.
        while let Some(line) = stdout.next_line().await.unwrap() {
            if serde_json::from_str::<Value>(&line).unwrap()["id"] == 2 {
                break;
            }
        }
        let write = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "write", "arguments": {"path": "big.txt", "content": next}}});
        let started = std::time::Instant::now();
        let writer = tokio::spawn(async move {
            send(&mut stdin, &write).await;
            stdin
        });
        match full_write {
            // Round 0 lets the write finish, to learn how long one takes.
            None => {
                while let Some(line) = stdout.next_line().await.unwrap() {
                    if serde_json::from_str::<Value>(&line).unwrap()["id"] == 3 {
                        break;
                    }
                }
                full_write = Some(started.elapsed());
            }
            // Then kill at a different moment each round: while the request streams in, while
            // the server writes, and after.
            Some(duration) => tokio::time::sleep(duration * round / 12).await,
        }
        child.start_kill().unwrap();
        child.wait().await.unwrap();
        drop(writer.await);
        let after = std::fs::read_to_string(&path).unwrap();
        assert!(
            after == a || after == b,
            "round {round}: the file is neither old nor new ({} bytes)",
            after.len()
        );
        if after != current {
            saw_new += 1;
        }
    }
    // Some kills must have come after the write, or the test proves little.
    assert!(
        saw_new > 0,
        "no round completed a write; the kills all came too early"
    );
}

/// Gimlet's temporaries in a directory.
fn temporaries(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".gimlet-"))
        .collect()
}

/// A pseudo-random fraction in [0, 1) for round `round`, different on each run.
pub(super) fn jitter(round: u32) -> f64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let mixed = (u64::from(nanos) ^ (u64::from(round) << 32)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    f64::from(u32::try_from(mixed >> 40).unwrap()) / f64::from(1u32 << 24)
}

/// Starts a raw server on `root`, initializes it, and returns it with its pipes.
async fn raw_server(
    data: &std::path::Path,
    root: &std::path::Path,
) -> (
    tokio::process::Child,
    tokio::process::ChildStdin,
    tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
) {
    let mut child = raw_command(data, root).spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    send(&mut stdin, &initialize_request("crash")).await;
    send(
        &mut stdin,
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    (child, stdin, stdout)
}

/// Sends a tool call and waits for its answer.
pub(super) async fn call(
    stdin: &mut tokio::process::ChildStdin,
    stdout: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    id: u64,
    name: &str,
    arguments: Value,
) -> Value {
    send(
        stdin,
        &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": name, "arguments": arguments}}),
    )
    .await;
    while let Some(line) = stdout.next_line().await.unwrap() {
        let message: Value = serde_json::from_str(&line).unwrap();
        if message["id"] == id {
            return message;
        }
    }
    panic!("the server closed before answering {id}");
}

#[cfg_attr(
    windows,
    ignore = "Windows writes through named temporaries (weaker, docs/security.md)"
)]
#[tokio::test]
async fn a_big_write_killed_at_any_moment_leaves_no_temporary_behind() {
    let root = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let path = root.path().join("big.txt");
    let line = |c: char| -> String { std::iter::repeat_n(c, 119).chain(['\n']).collect() };
    let (a, b) = (line('a').repeat(100_000), line('b').repeat(100_000)); // 12 MB each
    std::fs::write(&path, &a).unwrap();
    let mut full_write: Option<Duration> = None;
    let (mut debris_after_kill, mut debris_after_write) = (0, 0);
    for round in 0..12u32 {
        let current = std::fs::read_to_string(&path).unwrap();
        let next = if current == a { b.clone() } else { a.clone() };
        let (mut child, mut stdin, mut stdout) = raw_server(data.path(), root.path()).await;
        call(
            &mut stdin,
            &mut stdout,
            2,
            "read",
            json!({"path": "big.txt", "limit": 1}),
        )
        .await;
        let write = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "write", "arguments": {"path": "big.txt", "content": next}}});
        let started = std::time::Instant::now();
        let writer = tokio::spawn(async move {
            send(&mut stdin, &write).await;
            stdin
        });
        match full_write {
            None => {
                while let Some(line) = stdout.next_line().await.unwrap() {
                    if serde_json::from_str::<Value>(&line).unwrap()["id"] == 3 {
                        break;
                    }
                }
                full_write = Some(started.elapsed());
            }
            // A random moment of the write, from the request streaming in to just after.
            Some(duration) => tokio::time::sleep(duration.mul_f64(1.2 * jitter(round))).await,
        }
        child.start_kill().unwrap();
        child.wait().await.unwrap();
        drop(writer.await);
        let after = std::fs::read_to_string(&path).unwrap();
        assert!(
            after == a || after == b,
            "round {round}: neither old nor new"
        );
        if !temporaries(root.path()).is_empty() {
            debris_after_kill += 1;
        }
        // The next server's first write in the directory leaves none.
        let (mut child, mut stdin, mut stdout) = raw_server(data.path(), root.path()).await;
        call(
            &mut stdin,
            &mut stdout,
            2,
            "read",
            json!({"path": "big.txt", "limit": 1}),
        )
        .await;
        let answer = call(
            &mut stdin,
            &mut stdout,
            3,
            "write",
            json!({"path": format!("note-{round}.txt"), "content": "later write\n"}),
        )
        .await;
        assert_eq!(answer["result"]["isError"], false, "{answer}");
        if !temporaries(root.path()).is_empty() {
            debris_after_write += 1;
        }
        child.start_kill().unwrap();
        child.wait().await.unwrap();
    }
    // Unnamed temporaries: a kill at a random moment leaves, at most rarely, a name behind, and
    // the next write in the directory sweeps it.
    assert!(
        debris_after_write == 0 && debris_after_kill <= 3,
        "of 11 kills, {debris_after_kill} left a temporary, still there after a later write in \
         {debris_after_write}"
    );
}

#[cfg_attr(
    windows,
    ignore = "no crash recovery of multi-file changes on Windows (weaker, docs/security.md)"
)]
#[tokio::test]
async fn a_patch_over_six_files_killed_at_any_moment_is_all_or_nothing() {
    let root = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let body: String = (0..15_000).map(|i| format!("line {i:>60}\n")).collect(); // ~1 MB
    let files: Vec<String> = (0..6).map(|i| format!("f{i}.txt")).collect();
    for name in &files {
        std::fs::write(root.path().join(name), format!("version 0\n{body}")).unwrap();
    }
    let versions = || -> Vec<String> {
        files
            .iter()
            .map(|n| {
                let text = std::fs::read_to_string(root.path().join(n)).unwrap();
                text.lines().next().unwrap().to_owned()
            })
            .collect()
    };
    let mut full_call: Option<Duration> = None;
    let (mut torn_before_recovery, mut torn_after_restart, mut debris) = (0, 0, 0);
    let mut version = 0;
    for round in 0..60u32 {
        let patch: String = std::iter::once("*** Begin Patch\n".to_owned())
            .chain(files.iter().map(|n| {
                format!(
                    "*** Update File: {n}\n@@\n-version {version}\n+version {}\n",
                    version + 1
                )
            }))
            .chain(std::iter::once("*** End Patch\n".to_owned()))
            .collect();
        let (mut child, mut stdin, mut stdout) = raw_server(data.path(), root.path()).await;
        let request = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "apply_patch", "arguments": {"patch": patch}}});
        let started = std::time::Instant::now();
        send(&mut stdin, &request).await;
        match full_call {
            None => {
                while let Some(line) = stdout.next_line().await.unwrap() {
                    if serde_json::from_str::<Value>(&line).unwrap()["id"] == 2 {
                        break;
                    }
                }
                full_call = Some(started.elapsed());
            }
            Some(duration) => tokio::time::sleep(duration.mul_f64(1.2 * jitter(round))).await,
        }
        child.start_kill().unwrap();
        child.wait().await.unwrap();
        let seen = versions();
        if seen.iter().any(|v| *v != seen[0]) {
            torn_before_recovery += 1;
        }
        // The next start rolls an interrupted patch back.
        let (mut child, mut stdin, mut stdout) = raw_server(data.path(), root.path()).await;
        call(&mut stdin, &mut stdout, 2, "ls", json!({})).await;
        let seen = versions();
        if seen.iter().any(|v| *v != seen[0]) {
            torn_after_restart += 1;
        }
        if !temporaries(root.path()).is_empty() {
            debris += 1;
        }
        version = seen
            .iter()
            .map(|v| v["version ".len()..].parse().unwrap())
            .max()
            .unwrap();
        // Carry on from a consistent state whatever happened.
        for name in &files {
            let file = root.path().join(name);
            let text = std::fs::read_to_string(&file).unwrap();
            let rest = &text[text.find('\n').unwrap()..];
            std::fs::write(&file, format!("version {version}{rest}")).unwrap();
        }
        child.start_kill().unwrap();
        child.wait().await.unwrap();
    }
    let pending = data.path().join("gimlet/output/.pending");
    assert_eq!(
        std::fs::read_dir(&pending).map_or(0, Iterator::count),
        0,
        "no intent is left"
    );
    // Some kills must land after the patch went in, or the test proves little.
    assert!(version > 0, "no round completed the patch");
    assert!(
        torn_after_restart == 0 && debris == 0,
        "of 59 kills, {torn_before_recovery} left the files half changed, {torn_after_restart} \
         still after the next start; {debris} left temporaries"
    );
}
