//! Streamable HTTP: sessions, the guard (Host, Origin, token, size, session cap), progress,
//! cancellation, resources, structured output, stateless clients, graceful shutdown.

#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers fail loudly"
)]

use std::process::Stdio;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ProtocolVersion, ReadResourceRequestParams,
    ResourceContents,
};
use rmcp::service::{ClientLifecycleMode, RunningService, serve_client_with_lifecycle};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;

use crate::common::{TestClient, command, err_text, ok_text, text};
#[cfg(target_os = "linux")]
use crate::common::{eventually, marker, processes_with};

/// `gimlet serve --http 127.0.0.1:0` with a temporary root.
pub(crate) struct HttpGimlet {
    child: tokio::process::Child,
    pub(crate) url: String,
    root: tempfile::TempDir,
    _data: tempfile::TempDir,
}

impl HttpGimlet {
    pub(crate) async fn start(args: &[&str]) -> Self {
        let root = tempfile::Builder::new()
            .prefix("gimlet-root")
            .tempdir()
            .unwrap();
        let data = tempfile::tempdir().unwrap();
        let mut cmd = command(data.path());
        cmd.args([
            "serve",
            "--http",
            "127.0.0.1:0",
            "--mode",
            "trusted",
            "--root",
        ])
        .arg(root.path())
        .args(args)
        .env_remove("GIMLET_AUTH_TOKEN")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let stderr = child.stderr.take().unwrap();
        let mut lines = tokio::io::BufReader::new(stderr).lines();
        let url = loop {
            let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
                .await
                .expect("gimlet did not start in time")
                .unwrap()
                .expect("gimlet exited before serving");
            if let Some(url) = line.strip_prefix("gimlet: serving MCP at ") {
                break url.to_owned();
            }
        };
        // Keep draining stderr so the server never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Self {
            child,
            url,
            root,
            _data: data,
        }
    }

    fn transport(&self, token: Option<&str>) -> StreamableHttpClientTransport<reqwest::Client> {
        let mut config = StreamableHttpClientTransportConfig::with_uri(self.url.clone());
        if let Some(token) = token {
            config = config.auth_header(token);
        }
        StreamableHttpClientTransport::with_client(http_client(), config)
    }

    pub(crate) async fn client(
        &self,
        handler: TestClient,
    ) -> RunningService<RoleClient, TestClient> {
        handler.serve(self.transport(None)).await.unwrap()
    }

    pub(crate) fn root(&self) -> std::path::PathBuf {
        std::fs::canonicalize(self.root.path()).unwrap()
    }
}

/// A client that talks to loopback directly, whatever proxy the environment names.
pub(crate) fn http_client() -> reqwest::Client {
    // reqwest is built with rustls and no default provider (see `install_crypto_provider`).
    gimlet_tools::web::install_crypto_provider();
    reqwest::Client::builder().no_proxy().build().unwrap()
}

fn params(tool: &str, args: Value) -> CallToolRequestParams {
    let Value::Object(args) = args else {
        panic!("arguments must be an object")
    };
    CallToolRequestParams::new(tool.to_owned()).with_arguments(args)
}

pub(crate) async fn call(
    client: &RunningService<RoleClient, TestClient>,
    tool: &str,
    args: Value,
) -> CallToolResult {
    client.call_tool(params(tool, args)).await.unwrap()
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;

/// A raw `initialize` POST with extra headers; returns the status.
async fn raw_initialize(url: &str, headers: &[(&str, &str)], body: String) -> u16 {
    let mut request = http_client()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.unwrap().status().as_u16()
}

#[tokio::test]
async fn sessions_are_separate_and_served_at_once() {
    let server = HttpGimlet::start(&[]).await;
    std::fs::write(server.root().join("a.txt"), "shared\n").unwrap();
    let first = server.client(TestClient::default()).await;
    let second = server.client(TestClient::default()).await;
    assert_eq!(
        first.peer_info().unwrap().server_info.clone().unwrap().name,
        "gimlet",
        "initialize over HTTP"
    );
    ok_text(&call(&first, "read", json!({"path": "a.txt"})).await);
    // The second session has not read the file, so it may not overwrite it.
    let refused = err_text(
        &call(
            &second,
            "write",
            json!({"path": "a.txt", "content": "second\n"}),
        )
        .await,
    );
    assert!(refused.contains("read"), "{refused}");
    ok_text(
        &call(
            &first,
            "write",
            json!({"path": "a.txt", "content": "first\n"}),
        )
        .await,
    );
    // Both at once.
    let (a, b) = tokio::join!(
        call(&first, "ls", json!({})),
        call(&second, "glob", json!({"pattern": "*.txt"}))
    );
    ok_text(&a);
    assert!(ok_text(&b).contains("a.txt"));
    let _ = first.cancel().await;
    let _ = second.cancel().await;
}

#[tokio::test]
async fn foreign_hosts_and_origins_get_403_and_big_bodies_413() {
    let server = HttpGimlet::start(&[]).await;
    let url = &server.url;
    assert_eq!(raw_initialize(url, &[], INITIALIZE.into()).await, 200);
    assert_eq!(
        raw_initialize(url, &[("host", "evil.example")], INITIALIZE.into()).await,
        403
    );
    assert_eq!(
        raw_initialize(
            url,
            &[("origin", "https://evil.example")],
            INITIALIZE.into()
        )
        .await,
        403
    );
    assert_eq!(
        raw_initialize(
            url,
            &[("origin", "http://localhost:3000")],
            INITIALIZE.into()
        )
        .await,
        200,
        "a local page is fine"
    );
    let huge = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"pad":"{}"}}}}"#,
        "x".repeat(5 * 1024 * 1024)
    );
    assert_eq!(raw_initialize(url, &[], huge).await, 413);
}

#[tokio::test]
async fn a_token_protected_server_refuses_without_the_token() {
    let token = "0123456789abcdef0123456789abcdef";
    let server = HttpGimlet::start(&["--auth-token", token]).await;
    let url = &server.url;
    assert_eq!(raw_initialize(url, &[], INITIALIZE.into()).await, 401);
    assert_eq!(
        raw_initialize(
            url,
            &[("authorization", "Bearer wrong-token-wrong-token")],
            INITIALIZE.into()
        )
        .await,
        401
    );
    let with_token = format!("Bearer {token}");
    assert_eq!(
        raw_initialize(url, &[("authorization", &with_token)], INITIALIZE.into()).await,
        200
    );
    let client = TestClient::default()
        .serve(server.transport(Some(token)))
        .await
        .unwrap();
    ok_text(&call(&client, "ls", json!({})).await);
    let _ = client.cancel().await;
}

#[cfg_attr(
    windows,
    ignore = "hung under Wine 8 in a fresh prefix (passed in an older one; not yet understood): run it on Windows"
)]
#[tokio::test]
async fn off_loopback_a_token_is_required_and_sessions_are_capped() {
    let data = tempfile::tempdir().unwrap();
    let out = command(data.path())
        .args(["serve", "--http", "0.0.0.0:0"])
        .env_remove("GIMLET_AUTH_TOKEN")
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--auth-token"), "{stderr}");

    let server = HttpGimlet::start(&["--max-sessions", "1"]).await;
    let first = server.client(TestClient::default()).await;
    assert_eq!(
        raw_initialize(&server.url, &[], INITIALIZE.into()).await,
        503
    );
    let _ = first.cancel().await;
}

#[tokio::test]
async fn a_delete_ends_the_session_with_200_and_frees_its_place() {
    let server = HttpGimlet::start(&["--max-sessions", "1"]).await;
    let client = http_client();
    let opened = client
        .post(&server.url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(INITIALIZE)
        .send()
        .await
        .unwrap();
    assert_eq!(opened.status().as_u16(), 200);
    let session = opened.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        raw_initialize(&server.url, &[], INITIALIZE.into()).await,
        503,
        "the one place is taken"
    );

    let ended = client
        .delete(&server.url)
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-06-18")
        .send()
        .await
        .unwrap();
    // What the SDKs' own servers answer; the Python client logs 202 as a failed end.
    assert_eq!(ended.status().as_u16(), 200);
    let ping = client
        .post(&server.url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-06-18")
        .body(r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(ping.status().as_u16(), 404, "the session is gone");
    assert_eq!(
        raw_initialize(&server.url, &[], INITIALIZE.into()).await,
        200,
        "its place is free again"
    );
}

#[cfg(target_os = "linux")] // A POSIX `sleep`, found again in /proc.
#[tokio::test]
async fn long_commands_report_progress_and_cancelling_kills_them() {
    let server = HttpGimlet::start(&[]).await;
    let handler = TestClient::default();
    let client = server.client(handler.clone()).await;
    let result = call(
        &client,
        "bash",
        json!({"command": "for i in 1 2 3 4; do echo step $i; sleep 0.7; done"}),
    )
    .await;
    assert!(ok_text(&result).contains("step 4"));
    assert!(
        !handler.progress.lock().unwrap().is_empty(),
        "progress notifications during the command"
    );

    let tag = marker();
    let slow = client.call_tool(params("bash", json!({"command": format!("sleep {tag}")})));
    let started = eventually(Duration::from_secs(10), || !processes_with(&tag).is_empty());
    let raced = tokio::select! {
        _ = slow => false,
        running = started => running,
    };
    assert!(raced, "the command started");
    // Dropping the call sent notifications/cancelled; the command dies with it.
    assert!(
        eventually(Duration::from_secs(10), || processes_with(&tag).is_empty()).await,
        "the cancelled command is gone"
    );
    let _ = client.cancel().await;
}

#[cfg_attr(
    windows,
    ignore = "needs a POSIX shell (plugins, hooks or commands are sh)"
)]
#[tokio::test]
async fn truncated_output_is_readable_as_a_resource_and_structured_content_validates() {
    let server = HttpGimlet::start(&[]).await;
    let big: String = (1..=5000).map(|i| format!("line {i}\n")).collect();
    std::fs::write(server.root().join("big.txt"), &big).unwrap();
    let client = server.client(TestClient::default()).await;
    let result = call(&client, "bash", json!({"command": "cat big.txt"})).await;
    let link = result
        .content
        .iter()
        .find_map(|c| c.as_resource_link().map(|l| l.uri.clone()))
        .expect("a truncated result links its full output");
    let read = client
        .read_resource(ReadResourceRequestParams::new(link.clone()))
        .await
        .unwrap();
    let ResourceContents::TextResourceContents { text: full, .. } = &read.contents[0] else {
        panic!("text contents expected")
    };
    assert!(full.contains("line 1\n") && full.contains("line 5000\n"));
    let listed = client.list_all_resources().await.unwrap();
    assert!(listed.iter().any(|r| r.uri == link), "listed: {listed:?}");

    // Structured content validates against the declared output schema.
    std::fs::write(server.root().join("src.rs"), "fn a() {}\nfn b() {}\n").unwrap();
    let tools = client.list_all_tools().await.unwrap();
    let schema_of = |name: &str| -> Value {
        let tool = tools.iter().find(|t| t.name == name).unwrap();
        Value::Object((*tool.output_schema.clone().expect("an output schema")).clone())
    };
    for (tool, args) in [
        ("bash", json!({"command": "echo hi; exit 3"})),
        ("grep", json!({"pattern": "fn ", "output_mode": "count"})),
        ("grep", json!({"pattern": "fn ", "output_mode": "content"})),
        ("glob", json!({"pattern": "*.rs"})),
        (
            "edit",
            json!({"path": "new.rs", "old_string": "", "new_string": "fn c() {}\n"}),
        ),
    ] {
        let result = call(&client, tool, args).await;
        let structured = result
            .structured_content
            .clone()
            .unwrap_or_else(|| panic!("{tool}: no structured content: {}", text(&result)));
        let schema = schema_of(tool);
        let validator = jsonschema::validator_for(&schema).unwrap();
        let errors: Vec<String> = validator
            .iter_errors(&structured)
            .map(|e| e.to_string())
            .collect();
        assert!(errors.is_empty(), "{tool}: {errors:?}\n{structured:#}");
    }
    let _ = client.cancel().await;
}

#[tokio::test]
async fn stateless_2026_clients_keep_their_state_between_requests() {
    let server = HttpGimlet::start(&[]).await;
    std::fs::write(server.root().join("a.txt"), "one\n").unwrap();
    let mode = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    let client = serve_client_with_lifecycle(TestClient::default(), server.transport(None), mode)
        .await
        .unwrap();
    assert_eq!(
        client.peer_info().unwrap().protocol_version,
        ProtocolVersion::V_2026_07_28
    );
    ok_text(&call(&client, "read", json!({"path": "a.txt"})).await);
    // The read is remembered although each request is handled on its own.
    ok_text(
        &call(
            &client,
            "edit",
            json!({"path": "a.txt", "old_string": "one", "new_string": "two"}),
        )
        .await,
    );
    assert_eq!(
        std::fs::read_to_string(server.root().join("a.txt")).unwrap(),
        "two\n"
    );
    let _ = client.cancel().await;
}

#[cfg_attr(windows, ignore = "SIGTERM and a POSIX shell")]
#[tokio::test]
async fn sigterm_lets_running_calls_finish_then_exits() {
    let mut server = HttpGimlet::start(&[]).await;
    let client = server.client(TestClient::default()).await;
    let running = client.call_tool(params(
        "bash",
        json!({"command": "sleep 1.5; echo finished"}),
    ));
    let pid = server.child.id().unwrap();
    let terminate = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status();
    };
    let (result, ()) = tokio::join!(running, terminate);
    assert!(ok_text(&result.unwrap()).contains("finished"));
    let status = tokio::time::timeout(Duration::from_secs(20), server.child.wait())
        .await
        .expect("the server exits after the call")
        .unwrap();
    assert!(status.success(), "{status:?}");
}

#[tokio::test]
async fn a_client_that_never_finishes_its_headers_is_cut_off() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let server = HttpGimlet::start(&[]).await;
    let addr = server
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    let mut stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
    stream
        .write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .await
        .unwrap();
    let started = std::time::Instant::now();
    let mut buf = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(30), stream.read_to_end(&mut buf)).await;
    assert!(
        read.is_ok(),
        "the server must close a connection stuck in its headers"
    );
    assert!(
        started.elapsed() >= Duration::from_secs(5),
        "closed by the timeout, not at once"
    );
}
