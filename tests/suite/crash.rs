//! Killing the server at any moment leaves the old file or the new one, never a mix.

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

async fn send(stdin: &mut tokio::process::ChildStdin, message: &Value) {
    // The server may already be dead: a broken pipe is part of the test.
    let _ = stdin.write_all(format!("{message}\n").as_bytes()).await;
    let _ = stdin.flush().await;
}

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
