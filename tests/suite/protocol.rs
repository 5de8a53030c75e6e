//! The wire itself: stdout carries only JSON-RPC, and stdin EOF ends the process.

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::command;

#[tokio::test]
async fn stdout_is_only_json_rpc_and_eof_ends_the_process() {
    let root = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("a.txt"), "hello\n").unwrap();
    let mut child = command(data.path())
        .args(["--root"])
        .arg(root.path())
        .env("RUST_LOG", "trace")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let requests = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "read", "arguments": {"path": "a.txt"}}}),
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "missing", "arguments": {}}}),
        json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "read", "arguments": {"path": []}}}),
    ];
    // Drain stderr as it comes: trace logging would otherwise fill the pipe and block the server.
    let mut stderr_pipe = child.stderr.take().unwrap();
    let stderr_task = tokio::spawn(async move {
        let mut text = String::new();
        let _ = stderr_pipe.read_to_string(&mut text).await;
        text
    });
    let mut stdin = child.stdin.take().unwrap();
    for request in &requests {
        stdin
            .write_all(format!("{request}\n").as_bytes())
            .await
            .unwrap();
    }
    stdin.flush().await.unwrap();
    let mut stdout = child.stdout.take().unwrap();
    // Read until the last response has arrived, then close stdin.
    let mut output = String::new();
    let mut buf = [0u8; 8192];
    let deadline = Instant::now() + Duration::from_secs(20);
    while output.lines().filter(|l| !l.is_empty()).count() < 5 && Instant::now() < deadline {
        let n = tokio::time::timeout(Duration::from_secs(20), stdout.read(&mut buf))
            .await
            .unwrap()
            .unwrap();
        if n == 0 {
            break;
        }
        output.push_str(std::str::from_utf8(&buf[..n]).unwrap());
    }
    drop(stdin);
    let closed = Instant::now();
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("exits after EOF")
        .unwrap();
    assert!(status.success(), "{status}");
    assert!(
        closed.elapsed() < Duration::from_secs(6),
        "took {:?}",
        closed.elapsed()
    );
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).await.unwrap();
    output.push_str(&rest);

    let messages: Vec<Value> = output
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")))
        .collect();
    assert!(messages.iter().all(|m| m["jsonrpc"] == "2.0"), "{output}");
    let by_id = |id: i64| {
        messages
            .iter()
            .find(|m| m["id"] == id)
            .unwrap_or_else(|| panic!("no reply {id}: {output}"))
    };
    assert_eq!(by_id(1)["result"]["serverInfo"]["name"], "gimlet");
    assert!(by_id(2)["result"]["tools"].as_array().unwrap().len() >= 2);
    assert_eq!(by_id(3)["result"]["isError"], false);
    assert_eq!(by_id(4)["error"]["code"], -32602);
    assert_eq!(by_id(5)["result"]["isError"], true);
    // With trace logging on, the logs went to stderr, not stdout.
    let stderr = stderr_task.await.unwrap();
    assert!(!stderr.is_empty());
}
