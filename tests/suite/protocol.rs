//! The wire itself: stdout carries only JSON-RPC, and stdin EOF ends the process.

#![expect(
    deprecated,
    reason = "logging is deprecated in 2026-07-28 but still served"
)]

use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::AsyncReadExt;

use crate::common::{initialize_request, raw_command, write_lines};

#[tokio::test]
async fn stdout_is_only_json_rpc_and_eof_ends_the_process() {
    let root = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("a.txt"), "hello\n").unwrap();
    let mut child = raw_command(data.path(), root.path())
        .env("RUST_LOG", "trace")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let requests = [
        initialize_request("raw"),
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
    write_lines(&mut stdin, &requests).await;
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

#[tokio::test]
async fn log_messages_follow_the_level_the_client_sets() {
    use rmcp::model::{LoggingLevel, SetLevelRequestParams};

    let gimlet = crate::common::Gimlet::start().await;
    gimlet.write("a.txt", "x\n");
    let finished = |gimlet: &crate::common::Gimlet| {
        gimlet
            .handler
            .logs
            .lock()
            .unwrap()
            .iter()
            .filter(|m| m.data["message"] == "call finished")
            .count()
    };
    // Until the client asks, only warnings and errors go out.
    crate::common::ok_text(&gimlet.call("read", json!({"path": "a.txt"})).await);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(finished(&gimlet), 0);

    gimlet
        .client
        .set_level(SetLevelRequestParams::new(LoggingLevel::Debug))
        .await
        .unwrap();
    crate::common::ok_text(&gimlet.call("read", json!({"path": "a.txt"})).await);
    assert!(
        crate::common::eventually(Duration::from_secs(5), || finished(&gimlet) == 1).await,
        "a debug message for the call"
    );
    let logs = gimlet.handler.logs.lock().unwrap().clone();
    let message = logs
        .iter()
        .find(|m| m.data["message"] == "call finished")
        .unwrap();
    assert_eq!(message.level, LoggingLevel::Debug);
    assert_eq!(message.data["tool"], "read");
    assert!(message.logger.as_deref().unwrap().starts_with("gimlet"));

    gimlet
        .client
        .set_level(SetLevelRequestParams::new(LoggingLevel::Error))
        .await
        .unwrap();
    crate::common::ok_text(&gimlet.call("read", json!({"path": "a.txt"})).await);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(finished(&gimlet), 1, "debug is below error");
    gimlet.stop().await;
}

#[cfg_attr(windows, ignore = "SIGHUP and `kill`")]
#[tokio::test]
async fn sighup_reloads_the_config_and_announces_the_new_tool_list() {
    let (gimlet, dir) = crate::common::Gimlet::start_with_config(
        crate::common::TestClient::default(),
        "disabled_tools = []\n",
        &[],
    )
    .await;
    let config = dir.path().join("config.toml");
    let names = |tools: Vec<rmcp::model::Tool>| -> Vec<String> {
        tools.into_iter().map(|t| t.name.to_string()).collect()
    };
    assert!(names(gimlet.client.list_all_tools().await.unwrap()).contains(&"grep".to_owned()));
    crate::common::ok_text(
        &gimlet
            .call("write", json!({"path": "locked/a.txt", "content": "1"}))
            .await,
    );

    std::fs::write(
        &config,
        r#"
        disabled_tools = ["grep"]
        [[permissions.rules]]
        action = "deny"
        tool = "write"
        pattern = "locked/**"
        "#,
    )
    .unwrap();
    let status = std::process::Command::new("kill")
        .args(["-HUP", &gimlet.pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let changed = Arc::clone(&gimlet.handler.tools_changed);
    assert!(
        crate::common::eventually(Duration::from_secs(10), || changed
            .load(std::sync::atomic::Ordering::SeqCst)
            == 1)
        .await,
        "notifications/tools/list_changed"
    );
    let now = names(gimlet.client.list_all_tools().await.unwrap());
    assert!(!now.contains(&"grep".to_owned()), "{now:?}");
    let denied = crate::common::err_text(
        &gimlet
            .call("write", json!({"path": "locked/b.txt", "content": "2"}))
            .await,
    );
    assert!(denied.contains("rule denies"), "{denied}");

    // A broken config is refused and the old one kept.
    std::fs::write(&config, "disabled_tools = [").unwrap();
    std::process::Command::new("kill")
        .args(["-HUP", &gimlet.pid.to_string()])
        .status()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let denied = crate::common::err_text(
        &gimlet
            .call("write", json!({"path": "locked/c.txt", "content": "3"}))
            .await,
    );
    assert!(denied.contains("rule denies"), "{denied}");
    gimlet.stop().await;
}

#[tokio::test]
async fn requests_that_cannot_be_read_are_still_answered_with_their_id() {
    use tokio::io::AsyncBufReadExt;
    let root = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let mut child = raw_command(data.path(), root.path()).spawn().unwrap();
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    let lines = [
        initialize_request("raw").to_string(),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string(),
        // No JSON-RPC 2.0 message.
        json!({"jsonrpc": "1.0", "id": 2, "method": "ping"}).to_string(),
        // Nested deeper than the JSON parser goes.
        format!(
            r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"name":"read","arguments":{{"path":{deep}}}}}}}"#
        ),
        // Longer than the 16 MiB a message may have, its id before the cut.
        format!(
            r#"{{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{{"name":"write","arguments":{{"path":"big.txt","content":"{}"}}}}}}"#,
            "x".repeat(17 << 20)
        ),
        // Garbage, and a notification just as deep: nothing to answer.
        String::from("not json"),
        format!(r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{deep}}}"#),
        json!({"jsonrpc": "2.0", "id": 4, "method": "ping"}).to_string(),
    ];
    let mut stdin = child.stdin.take().unwrap();
    write_lines(&mut stdin, &lines).await;
    let mut stdout = tokio::io::BufReader::new(child.stdout.take().unwrap());
    let mut replies = Vec::new();
    for _ in 0..5 {
        let mut line = String::new();
        tokio::time::timeout(Duration::from_secs(20), stdout.read_line(&mut line))
            .await
            .unwrap_or_else(|_| panic!("a request was left unanswered; got {replies:?}"))
            .unwrap();
        replies.push(serde_json::from_str::<Value>(&line).unwrap());
    }
    drop(stdin);
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).await.unwrap();
    assert_eq!(rest, "", "more answers than requests");
    let by_id = |id: i64| replies.iter().find(|m| m["id"] == id).unwrap();
    assert_eq!(by_id(2)["error"]["code"], -32600);
    assert_eq!(by_id(3)["error"]["code"], -32700);
    let message = by_id(3)["error"]["message"].as_str().unwrap();
    assert!(message.contains("nested more than 128 levels"), "{message}");
    assert_eq!(by_id(4)["result"], json!({}));
    assert_eq!(by_id(5)["error"]["code"], -32600);
    let message = by_id(5)["error"]["message"].as_str().unwrap();
    assert!(message.contains("longer than 16 MiB"), "{message}");
    assert!(!root.path().join("big.txt").exists());
    child.wait().await.unwrap();
}

#[tokio::test]
async fn params_that_do_not_fit_a_method_are_invalid_params_that_say_why() {
    use rmcp::model::{ClientRequest, CustomRequest};
    let gimlet = crate::common::Gimlet::start().await;
    let cases = [
        (
            "tools/call",
            Some(json!({"name": "read", "arguments": [1]})),
            "invalid params for `tools/call`: invalid type: sequence, expected a map",
        ),
        (
            "tools/call",
            None,
            // (rmcp's client sends `{}` for no params)
            "invalid params for `tools/call`: missing field `name`",
        ),
        (
            "resources/read",
            Some(json!({})),
            "invalid params for `resources/read`: missing field `uri`",
        ),
    ];
    for (method, params, says) in cases {
        let request = ClientRequest::CustomRequest(CustomRequest::new(method, params));
        let err = gimlet.client.send_request(request).await.unwrap_err();
        let rmcp::ServiceError::McpError(error) = err else {
            panic!("not a JSON-RPC error: {err}");
        };
        assert_eq!(
            error.code,
            rmcp::model::ErrorCode::INVALID_PARAMS,
            "{error:?}"
        );
        assert!(error.message.starts_with(says), "{}", error.message);
    }
    // A method that does not exist is still Method not found.
    let request = ClientRequest::CustomRequest(CustomRequest::new("no/such/method", None));
    let err = gimlet.client.send_request(request).await.unwrap_err();
    let rmcp::ServiceError::McpError(error) = err else {
        panic!("not a JSON-RPC error: {err}");
    };
    assert_eq!(error.code, rmcp::model::ErrorCode::METHOD_NOT_FOUND);
    gimlet.stop().await;
}
