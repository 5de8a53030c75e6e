//! Permission asks through MCP: elicitation on 2025-11-25, input-required rounds on
//! 2026-07-28; modes, config files, client roots and the audit log.

#![expect(clippy::unwrap_used, reason = "test helpers fail loudly")]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ElicitRequestParams, ElicitResult, ElicitationAction,
    ProtocolVersion,
};
use rmcp::service::{ClientLifecycleMode, serve_client_with_lifecycle};
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

use crate::common::{Gimlet, TestClient, command, err_text, ok_text, slashed, text};

fn message(request: &ElicitRequestParams) -> String {
    match request {
        ElicitRequestParams::FormElicitationParams { message, .. } => message.clone(),
        _ => String::new(),
    }
}

fn schema(request: &ElicitRequestParams) -> Value {
    match request {
        ElicitRequestParams::FormElicitationParams {
            requested_schema, ..
        } => serde_json::to_value(requested_schema).unwrap(),
        _ => Value::Null,
    }
}

fn decision(decision: &str) -> Value {
    json!({"decision": decision})
}

fn outside_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("gimlet-outside")
        .tempdir()
        .unwrap()
}

#[tokio::test]
async fn allow_once_shows_the_change_and_runs_it_once() {
    let gimlet = Gimlet::start_with(TestClient::accepting(decision("allow_once")), &[]).await;
    let result = gimlet
        .call(
            "write",
            json!({"path": ".vscode/settings.json", "content": "{\"a\": 1}\n"}),
        )
        .await;
    ok_text(&result);
    assert_eq!(
        std::fs::read_to_string(gimlet.root().join(".vscode/settings.json")).unwrap(),
        "{\"a\": 1}\n"
    );
    let asked = gimlet.handler.elicitations.lock().unwrap().clone();
    assert_eq!(asked.len(), 1);
    let shown = slashed(&message(&asked[0]));
    for part in [
        "`write`",
        ".vscode/settings.json",
        "protected path",
        "{\"a\": 1}",
        "@@",
    ] {
        assert!(shown.contains(part), "{part} missing from: {shown}");
    }
    // A protected path is offered once or deny, never for the whole session.
    let choices = schema(&asked[0])["properties"]["decision"]["oneOf"].to_string();
    assert!(
        choices.contains("allow_once") && choices.contains("deny"),
        "{choices}"
    );
    assert!(!choices.contains("allow_session"), "{choices}");
    // Once means once: the next change asks again.
    gimlet
        .call("read", json!({"path": ".vscode/settings.json"}))
        .await;
    ok_text(
        &gimlet
            .call(
                "write",
                json!({"path": ".vscode/settings.json", "content": "{}\n"}),
            )
            .await,
    );
    assert_eq!(gimlet.handler.elicitations.lock().unwrap().len(), 2);
    gimlet.stop().await;
}

#[tokio::test]
async fn allow_for_the_session_covers_the_next_call() {
    let outside = outside_dir();
    let file = outside.path().join("notes.txt");
    std::fs::write(&file, "outside words\n").unwrap();
    let gimlet = Gimlet::start_with(TestClient::accepting(decision("allow_session")), &[]).await;
    let path = file.display().to_string();
    let first = ok_text(&gimlet.call("read", json!({"path": path})).await);
    assert!(first.contains("outside words"));
    let asked = gimlet.handler.elicitations.lock().unwrap().clone();
    assert_eq!(asked.len(), 1);
    assert!(message(&asked[0]).contains("outside the allowed folders"));
    assert!(schema(&asked[0]).to_string().contains("allow_session"));
    ok_text(&gimlet.call("read", json!({"path": path})).await);
    assert_eq!(
        gimlet.handler.elicitations.lock().unwrap().len(),
        1,
        "the second read must not ask"
    );
    gimlet.stop().await;
}

/// Reads `.vscode/settings.json` (holding "old") and tries to edit it, answering with `client`.
async fn edit_protected(client: TestClient, args: &[&str]) -> (Gimlet, String) {
    let gimlet = Gimlet::start_with(client, args).await;
    gimlet.write(".vscode/settings.json", "old\n");
    ok_text(
        &gimlet
            .call("read", json!({"path": ".vscode/settings.json"}))
            .await,
    );
    let result = gimlet
        .call(
            "edit",
            json!({"path": ".vscode/settings.json", "old_string": "old", "new_string": "new"}),
        )
        .await;
    let error = err_text(&result);
    assert_eq!(
        std::fs::read_to_string(gimlet.root().join(".vscode/settings.json")).unwrap(),
        "old\n",
        "a refused edit leaves the file as it was"
    );
    (gimlet, error)
}

#[tokio::test]
async fn deny_with_a_reason_reaches_the_model_and_changes_nothing() {
    let client = TestClient::accepting(json!({"decision": "deny", "reason": "use the template"}));
    let (gimlet, error) = edit_protected(client, &[]).await;
    assert!(error.contains("use the template"), "{error}");
    let asked = gimlet.handler.elicitations.lock().unwrap().clone();
    let shown = message(&asked[0]);
    assert!(
        shown.contains("old") && shown.contains("new") && shown.contains("@@"),
        "{shown}"
    );
    gimlet.stop().await;
}

#[tokio::test]
async fn decline_cancel_timeout_and_odd_answers_are_all_no() {
    let decline = TestClient::answering(|_| ElicitResult::new(ElicitationAction::Decline));
    let (gimlet, error) = edit_protected(decline, &[]).await;
    assert!(error.contains("declined"), "{error}");
    gimlet.stop().await;

    let cancel = TestClient::answering(|_| ElicitResult::new(ElicitationAction::Cancel));
    let (gimlet, error) = edit_protected(cancel, &[]).await;
    assert!(error.contains("dismissed"), "{error}");
    gimlet.stop().await;

    let odd = TestClient::accepting(json!({"decision": "yes please"}));
    let (gimlet, error) = edit_protected(odd, &[]).await;
    assert!(error.contains("not one of the offered choices"), "{error}");
    gimlet.stop().await;

    let mut slow = TestClient::accepting(decision("allow_once"));
    slow.elicit_delay = Some(Duration::from_secs(4));
    let (gimlet, error) = edit_protected(slow, &["--ask-timeout", "1"]).await;
    assert!(error.contains("no answer"), "{error}");
    // The late yes changes nothing either.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(
        std::fs::read_to_string(gimlet.root().join(".vscode/settings.json")).unwrap(),
        "old\n"
    );
    gimlet.stop().await;
}

#[tokio::test]
async fn without_elicitation_the_ask_is_denied_naming_what_would_allow_it() {
    let outside = outside_dir();
    let gimlet = Gimlet::start().await;
    let target = outside.path().join("new.txt");
    let result = gimlet
        .call(
            "write",
            json!({"path": target.display().to_string(), "content": "x"}),
        )
        .await;
    let error = err_text(&result);
    assert!(
        error.contains("offers no elicitation") && error.contains("--root"),
        "{error}"
    );
    assert!(!target.exists());
    gimlet.stop().await;

    let (gimlet, error) = edit_protected(TestClient::default(), &["--mode", "trusted"]).await;
    assert!(
        error.contains("protected paths always need a yes"),
        "{error}"
    );
    gimlet.stop().await;

    let gimlet = Gimlet::start_with(TestClient::default(), &["--mode", "strict"]).await;
    let error = err_text(
        &gimlet
            .call("write", json!({"path": "a.txt", "content": "x"}))
            .await,
    );
    assert!(error.contains("--mode default"), "{error}");
    assert!(!gimlet.root().join("a.txt").exists());
    gimlet.stop().await;
}

#[tokio::test]
async fn an_approval_is_bound_to_the_file_as_it_was_shown() {
    let root_cell: Arc<Mutex<Option<std::path::PathBuf>>> = Arc::default();
    let cell = Arc::clone(&root_cell);
    // While the question is on screen, someone else changes the file; then the user says yes.
    let client = TestClient::answering(move |_| {
        let root = cell.lock().unwrap().clone().unwrap();
        std::fs::write(root.join(".vscode/settings.json"), "changed meanwhile\n").unwrap();
        ElicitResult::new(ElicitationAction::Accept).with_content(decision("allow_once"))
    });
    let gimlet = Gimlet::start_with(client, &[]).await;
    *root_cell.lock().unwrap() = Some(gimlet.root());
    gimlet.write(".vscode/settings.json", "old\n");
    ok_text(
        &gimlet
            .call("read", json!({"path": ".vscode/settings.json"}))
            .await,
    );
    let error = err_text(
        &gimlet
            .call(
                "edit",
                json!({"path": ".vscode/settings.json", "old_string": "old", "new_string": "new"}),
            )
            .await,
    );
    assert!(error.contains("changed"), "{error}");
    assert_eq!(
        std::fs::read_to_string(gimlet.root().join(".vscode/settings.json")).unwrap(),
        "changed meanwhile\n"
    );
    gimlet.stop().await;
}

/// A 2026-07-28 client (no `initialize`) for the binary, with `--root root`.
pub(crate) async fn discover_client(
    handler: TestClient,
    root: &std::path::Path,
    data: &std::path::Path,
) -> rmcp::service::RunningService<rmcp::RoleClient, TestClient> {
    let mut cmd = command(data);
    cmd.arg("serve").arg("--root").arg(root);
    let transport = TokioChildProcess::builder(cmd)
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .unwrap()
        .0;
    let mode = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    serve_client_with_lifecycle(handler, transport, mode)
        .await
        .unwrap()
}

fn write_params(path: &str, content: &str) -> CallToolRequestParams {
    let Value::Object(args) = json!({"path": path, "content": content}) else {
        unreachable!()
    };
    CallToolRequestParams::new("write").with_arguments(args)
}

#[tokio::test]
async fn input_required_round_trips_on_2026_07_28_and_refuses_tampered_state() {
    let root = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let handler = TestClient::accepting(decision("allow_once"));
    let client = discover_client(handler.clone(), root.path(), data.path()).await;
    assert_eq!(
        client.peer_info().unwrap().protocol_version,
        ProtocolVersion::V_2026_07_28
    );

    // The SDK drives the rounds: input required, the elicitation, the retry.
    let done = client
        .call_tool(write_params(".vscode/a.json", "1\n"))
        .await
        .unwrap();
    ok_text(&done);
    assert_eq!(
        std::fs::read_to_string(root.path().join(".vscode/a.json")).unwrap(),
        "1\n"
    );
    assert_eq!(handler.elicitations.lock().unwrap().len(), 1);

    // By hand: the first round returns the question and a sealed state; nothing runs.
    let params = write_params(".vscode/b.json", "2\n");
    let CallToolResponse::InputRequired(pending) =
        client.call_tool_once(params.clone()).await.unwrap()
    else {
        panic!("expected an input-required result")
    };
    assert!(!root.path().join(".vscode/b.json").exists());
    let asks = pending.input_requests.unwrap();
    let ask = serde_json::to_value(&asks["gimlet_ask"]).unwrap();
    assert!(
        slashed(&ask.to_string().replace("\\\\", "\\")).contains(".vscode/b.json"),
        "the question names the file: {ask}"
    );
    let state = pending.request_state.unwrap();
    let answer = serde_json::to_value(
        ElicitResult::new(ElicitationAction::Accept).with_content(decision("allow_once")),
    )
    .unwrap();
    let retry = |state: String, params: CallToolRequestParams| {
        let mut params = params;
        params.input_responses = Some([("gimlet_ask".to_owned(), answer.clone())].into());
        params.request_state = Some(state);
        params
    };

    // A tampered state is refused and nothing runs.
    let mut tampered = state.clone().into_bytes();
    let at = tampered.len() / 2;
    tampered[at] = if tampered[at] == b'x' { b'y' } else { b'x' };
    let tampered = String::from_utf8(tampered).unwrap();
    let CallToolResponse::Complete(refused) = client
        .call_tool_once(retry(tampered, params.clone()))
        .await
        .unwrap()
    else {
        panic!("expected a final result")
    };
    assert!(err_text(&refused).contains("not valid for this call"));
    // The same state for other arguments is refused too.
    let CallToolResponse::Complete(refused) = client
        .call_tool_once(retry(
            state.clone(),
            write_params(".vscode/b.json", "evil\n"),
        ))
        .await
        .unwrap()
    else {
        panic!("expected a final result")
    };
    assert!(err_text(&refused).contains("not valid for this call"));
    assert!(!root.path().join(".vscode/b.json").exists());

    // The genuine answer runs the call, once.
    let CallToolResponse::Complete(done) = client
        .call_tool_once(retry(state.clone(), params.clone()))
        .await
        .unwrap()
    else {
        panic!("expected a final result")
    };
    ok_text(&done);
    assert_eq!(
        std::fs::read_to_string(root.path().join(".vscode/b.json")).unwrap(),
        "2\n"
    );
    std::fs::remove_file(root.path().join(".vscode/b.json")).unwrap();
    let CallToolResponse::Complete(replayed) =
        client.call_tool_once(retry(state, params)).await.unwrap()
    else {
        panic!("expected a final result")
    };
    let error = err_text(&replayed);
    assert!(error.contains("already used"), "{error}");
    assert!(!root.path().join(".vscode/b.json").exists());
    let _ = client.cancel().await;
}

#[tokio::test]
async fn read_only_mode_offers_only_read_only_tools() {
    let gimlet = Gimlet::start_with(TestClient::default(), &["--mode", "read-only"]).await;
    let tools = gimlet.client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert!(
        names.contains(&"read") && names.contains(&"grep"),
        "{names:?}"
    );
    for mutating in ["write", "edit", "apply_patch", "bash", "undo"] {
        assert!(!names.contains(&mutating), "{mutating} offered: {names:?}");
    }
    let error = err_text(
        &gimlet
            .call("write", json!({"path": "a.txt", "content": "x"}))
            .await,
    );
    assert!(error.contains("read-only mode"), "{error}");
    assert!(!gimlet.root().join("a.txt").exists());
    gimlet.stop().await;
}

#[cfg_attr(
    windows,
    ignore = "does not finish under Wine 8 (over five minutes; not yet understood): run it on Windows"
)]
#[tokio::test]
async fn config_rules_apply_and_a_project_file_only_tightens() {
    let config_dir = tempfile::tempdir().unwrap();
    let config = config_dir.path().join("config.toml");
    std::fs::write(
        &config,
        r#"
        [[permissions.rules]]
        action = "deny"
        tool = "write"
        pattern = "secrets/**"

        [[permissions.rules]]
        action = "allow"
        tool = "write"
        pattern = ".vscode/**"
        "#,
    )
    .unwrap();
    let root = tempfile::Builder::new()
        .prefix("gimlet-root")
        .tempdir()
        .unwrap();
    std::fs::write(
        root.path().join(".gimlet.toml"),
        r#"
        disabled_tools = ["bash"]
        [permissions]
        mode = "trusted"
        [[permissions.rules]]
        action = "allow"
        tool = "*"
        [[permissions.rules]]
        action = "deny"
        tool = "write"
        pattern = "generated/**"
        "#,
    )
    .unwrap();
    let data = tempfile::tempdir().unwrap();
    let mut cmd = command(data.path());
    cmd.arg("serve")
        .arg("--root")
        .arg(root.path())
        .arg("--config")
        .arg(&config);
    let transport = TokioChildProcess::builder(cmd)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
        .0;
    let client = TestClient::default().serve(transport).await.unwrap();
    let call = |path: &str| {
        let Value::Object(args) = json!({"path": path, "content": "x"}) else {
            unreachable!()
        };
        client.call_tool(CallToolRequestParams::new("write").with_arguments(args))
    };
    let denied = err_text(&call("secrets/key").await.unwrap());
    assert!(denied.contains("rule denies"), "{denied}");
    let denied = err_text(&call("generated/a.rs").await.unwrap());
    assert!(
        denied.contains("rule denies"),
        "project deny applies: {denied}"
    );
    // The user's allow rule cannot open protected paths; the project's allow-all is ignored.
    let asked = err_text(&call(".vscode/x.json").await.unwrap());
    assert!(asked.contains("protected"), "{asked}");
    ok_text(&call("src/ok.rs").await.unwrap());
    let names: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    assert!(!names.contains(&String::from("bash")), "{names:?}");
    assert!(!root.path().join("secrets/key").exists());
    let _ = client.cancel().await;
}

#[tokio::test]
async fn a_broken_config_file_stops_the_server_with_its_place() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "[permissions]\nmood = \"strict\"\n").unwrap();
    let out = std::process::Command::new(crate::common::binary())
        .arg("tools")
        .arg("--config")
        .arg(&config)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("config.toml") && stderr.contains("mood"),
        "{stderr}"
    );
}

#[cfg_attr(windows, ignore = "builds file:// URIs and outside paths as on Unix")]
#[tokio::test]
async fn client_roots_join_and_follow_list_changed() {
    let extra = outside_dir();
    std::fs::write(extra.path().join("shared.txt"), "from the client root\n").unwrap();
    let uri = format!("file://{}", extra.path().display());
    let roots = Arc::new(Mutex::new(vec![uri]));
    let client = TestClient {
        roots: Some(Arc::clone(&roots)),
        ..TestClient::default()
    };
    let gimlet = Gimlet::start_with(client, &[]).await;
    let path = extra.path().join("shared.txt").display().to_string();
    // The server fetches the roots after `initialized`, in the background.
    let mut read = String::new();
    for _ in 0..100 {
        let result = gimlet.call("read", json!({"path": path})).await;
        read = text(&result);
        if result.is_error == Some(false) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(read.contains("from the client root"), "{read}");

    roots.lock().unwrap().clear();
    gimlet.client.notify_roots_list_changed().await.unwrap();
    let mut error = String::new();
    for _ in 0..100 {
        let result = gimlet.call("read", json!({"path": path})).await;
        if result.is_error == Some(true) {
            error = text(&result);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(error.contains("outside"), "{error}");
    gimlet.stop().await;
}

#[tokio::test]
async fn the_audit_log_has_one_line_per_call_with_who_decided() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    let log_arg = log.display().to_string();
    let gimlet = Gimlet::start_with(
        TestClient::accepting(decision("allow_once")),
        &["--audit-log", &log_arg],
    )
    .await;
    gimlet.write("a.txt", "hello\n");
    ok_text(&gimlet.call("read", json!({"path": "a.txt"})).await);
    ok_text(
        &gimlet
            .call(
                "write",
                json!({"path": ".vscode/s.json", "content": "password=hunter2\n"}),
            )
            .await,
    );
    err_text(&gimlet.call("read", json!({"path": "missing.txt"})).await);
    gimlet.stop().await;
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert_eq!(lines[0]["tool"], "read");
    assert_eq!(lines[0]["decision"]["by"], "mode default");
    assert_eq!(lines[0]["outcome"], "ok");
    assert_eq!(lines[0]["output_hash"].as_str().unwrap().len(), 16);
    assert!(lines[0]["session"].as_str().unwrap().starts_with("stdio-"));
    assert_eq!(lines[1]["decision"]["by"], "user (once)");
    assert!(
        !text.contains("hunter2"),
        "credentials are redacted: {text}"
    );
    assert_eq!(lines[2]["outcome"], "path");
}
