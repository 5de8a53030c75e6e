//! `web_fetch` and `web_search` against a server on loopback. Only loopback is ever contacted:
//! the refusal of private, link-local and metadata addresses is tested on the address check
//! itself (unit tests in `gimlet_tools::web`).

#![expect(clippy::unwrap_used, reason = "test helpers fail loudly")]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::common::{Gimlet, TestClient, assert_fits_default_limits, command, err_text, ok_text};

/// A tiny HTTP/1.1 server on loopback; keeps the requests it saw.
struct Site {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Site {
    async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        tokio::spawn(async move {
            loop {
                let Ok((mut stream, _)) = listener.accept().await else {
                    return;
                };
                let log = Arc::clone(&log);
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 64 * 1024];
                    let mut got = 0;
                    // Headers, then the body by Content-Length.
                    let request = loop {
                        let Ok(n) = stream.read(&mut buf[got..]).await else {
                            return;
                        };
                        if n == 0 {
                            return;
                        }
                        got += n;
                        let text = String::from_utf8_lossy(&buf[..got]).into_owned();
                        if let Some(end) = text.find("\r\n\r\n") {
                            let length = text
                                .lines()
                                .find_map(|l| {
                                    l.to_ascii_lowercase()
                                        .strip_prefix("content-length:")
                                        .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                                })
                                .unwrap_or(0);
                            if got >= end + 4 + length {
                                break text;
                            }
                        }
                    };
                    log.lock().unwrap().push(request.clone());
                    let path = request.split_whitespace().nth(1).unwrap_or("/").to_owned();
                    let (status, kind, body, extra) = route(&path, &request).await;
                    let head = format!(
                        "HTTP/1.1 {status}\r\ncontent-type: {kind}\r\ncontent-length: {}\r\nconnection: close\r\n{extra}\r\n",
                        body.len()
                    );
                    let _ = stream.write_all(head.as_bytes()).await;
                    let _ = stream.write_all(&body).await;
                });
            }
        });
        Self { addr, seen }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

async fn route(path: &str, request: &str) -> (&'static str, &'static str, Vec<u8>, String) {
    match path {
        "/page" => (
            "200 OK",
            "text/html; charset=utf-8",
            b"<html><head><title>Doc</title><script>var x = 1;</script></head><body>\
              <h1>Install</h1><p>Run <code>cargo add gimlet</code>, then see the \
              <a href=\"/guide\">guide</a>.</p></body></html>"
                .to_vec(),
            String::new(),
        ),
        "/big" => ("200 OK", "text/plain", vec![b'x'; 200_000], String::new()),
        "/hop" => (
            "302 Found",
            "text/plain",
            Vec::new(),
            String::from("location: /page\r\n"),
        ),
        "/loop" => (
            "302 Found",
            "text/plain",
            Vec::new(),
            String::from("location: /loop\r\n"),
        ),
        "/away" => (
            "301 Moved Permanently",
            "text/plain",
            Vec::new(),
            String::from("location: http://localhost.example/elsewhere\r\n"),
        ),
        "/slow" => {
            tokio::time::sleep(Duration::from_secs(20)).await;
            ("200 OK", "text/plain", b"late".to_vec(), String::new())
        }
        "/missing" => (
            "404 Not Found",
            "text/plain",
            b"no such page".to_vec(),
            String::new(),
        ),
        // `/lines/N`: N numbered lines; `/gone/N`: the same with 404.
        p if p.starts_with("/lines/") || p.starts_with("/gone/") => {
            let n: usize = p.rsplit('/').next().unwrap().parse().unwrap();
            let body: String = (1..=n).map(|i| format!("line {i}\n")).collect();
            let status = if p.starts_with("/gone/") {
                "404 Not Found"
            } else {
                "200 OK"
            };
            (status, "text/plain", body.into_bytes(), String::new())
        }
        "/image" => (
            "200 OK",
            "image/png",
            b"\x89PNG\r\n\x1a\n\0\0".to_vec(),
            String::new(),
        ),
        "/search" => {
            let authorized = request
                .to_ascii_lowercase()
                .contains("authorization: bearer tvly-test-key");
            if !authorized {
                return (
                    "401 Unauthorized",
                    "application/json",
                    b"{}".to_vec(),
                    String::new(),
                );
            }
            let body = json!({
                "query": "gimlet mcp",
                "results": [
                    {"title": "gimlet", "url": "https://example.com/gimlet", "content": "A Rust MCP server.", "score": 0.9},
                    {"title": "MCP", "url": "https://example.com/mcp", "content": "The Model Context Protocol.", "score": 0.8}
                ]
            });
            (
                "200 OK",
                "application/json",
                body.to_string().into_bytes(),
                String::new(),
            )
        }
        _ => ("404 Not Found", "text/plain", Vec::new(), String::new()),
    }
}

/// gimlet in trusted mode (no asks) with a config file.
async fn gimlet_with(config: &str) -> (Gimlet, tempfile::TempDir) {
    Gimlet::start_with_config(TestClient::default(), config, &["--mode", "trusted"]).await
}

#[tokio::test]
async fn web_fetch_converts_html_and_holds_its_caps_when_local_fetches_are_allowed() {
    let site = Site::start().await;
    let (gimlet, _dir) = gimlet_with("[tools.web_fetch]\nallow_local = true\n").await;

    let page = gimlet
        .call("web_fetch", json!({"url": site.url("/page")}))
        .await;
    let text = ok_text(&page);
    assert!(text.contains("# Install"), "{text}");
    assert!(text.contains("Run `cargo add gimlet`"), "{text}");
    assert!(text.contains("[guide](/guide)"), "{text}");
    assert!(!text.contains("var x"), "scripts are dropped: {text}");
    assert_eq!(page.structured_content.as_ref().unwrap()["status"], 200);

    let plain = ok_text(
        &gimlet
            .call(
                "web_fetch",
                json!({"url": site.url("/page"), "format": "text"}),
            )
            .await,
    );
    assert!(
        plain.contains("Run cargo add gimlet, then see the guide."),
        "{plain}"
    );
    let raw = ok_text(
        &gimlet
            .call(
                "web_fetch",
                json!({"url": site.url("/page"), "format": "html"}),
            )
            .await,
    );
    assert!(raw.contains("<h1>Install</h1>"), "{raw}");

    // Same-host redirects are followed; a loop is cut; another host is reported, not followed.
    let hopped = gimlet
        .call("web_fetch", json!({"url": site.url("/hop")}))
        .await;
    assert!(ok_text(&hopped).contains("# Install"));
    assert!(
        hopped.structured_content.unwrap()["url"]
            .as_str()
            .unwrap()
            .ends_with("/page")
    );
    let looped = gimlet
        .call("web_fetch", json!({"url": site.url("/loop")}))
        .await;
    assert!(
        err_text(&looped).contains("redirected more than 5 times"),
        "{looped:?}"
    );
    let away = gimlet
        .call("web_fetch", json!({"url": site.url("/away")}))
        .await;
    assert!(ok_text(&away).contains("http://localhost.example/elsewhere"));

    // The size cap.
    let big = gimlet
        .call(
            "web_fetch",
            json!({"url": site.url("/big"), "max_bytes": 1000}),
        )
        .await;
    let structured = big.structured_content.clone().unwrap();
    assert_eq!(structured["bytes"], 1000);
    assert_eq!(structured["truncated"], true);
    assert!(ok_text(&big).contains("longer than max_bytes (1000)"));

    // A slow server: the timeout stops the fetch within a few seconds.
    let started = std::time::Instant::now();
    let slow = gimlet
        .call(
            "web_fetch",
            json!({"url": site.url("/slow"), "timeout_s": 1}),
        )
        .await;
    assert!(err_text(&slow).contains("longer than 1 s"), "{slow:?}");
    assert!(started.elapsed() < Duration::from_secs(10));

    // HTTP errors and binary content.
    let missing = gimlet
        .call("web_fetch", json!({"url": site.url("/missing")}))
        .await;
    // The marker opens the text of a failed output too (issue 38).
    assert!(
        err_text(&missing).starts_with("Error (web_fetch):\nHTTP 404 Not Found from "),
        "{missing:?}"
    );
    let image = gimlet
        .call("web_fetch", json!({"url": site.url("/image")}))
        .await;
    assert!(err_text(&image).contains("not text"), "{image:?}");
    gimlet.stop().await;
}

#[tokio::test]
async fn web_fetch_refuses_local_addresses_by_default() {
    let site = Site::start().await;
    let (gimlet, _dir) = gimlet_with("").await;
    let port = site.addr.port();
    for url in [
        site.url("/page"),
        format!("http://2130706433:{port}/page"),
        format!("http://0x7f.1:{port}/page"),
        format!("http://[::ffff:127.0.0.1]:{port}/page"),
        format!("http://localhost:{port}/page"),
    ] {
        let refused = gimlet.call("web_fetch", json!({"url": url})).await;
        let message = err_text(&refused);
        assert!(message.contains("allow_local"), "{url}: {message}");
    }
    // A redirect from an allowed host is checked again: not testable without a public host, so
    // the hop check is covered by the same function as the first URL (`check_literal`).
    assert!(
        site.seen.lock().unwrap().is_empty(),
        "nothing reached the server"
    );
    let file = gimlet
        .call("web_fetch", json!({"url": "file:///etc/passwd"}))
        .await;
    assert!(err_text(&file).contains("only http:// and https://"));
    gimlet.stop().await;
}

#[tokio::test]
async fn web_fetch_asks_per_host_in_the_default_mode() {
    let site = Site::start().await;
    let (gimlet, _dir) = Gimlet::start_with_config(
        TestClient::accepting(json!({"decision": "allow_session"})),
        "[tools.web_fetch]\nallow_local = true\n",
        &[],
    )
    .await;
    ok_text(
        &gimlet
            .call("web_fetch", json!({"url": site.url("/page")}))
            .await,
    );
    ok_text(
        &gimlet
            .call("web_fetch", json!({"url": site.url("/hop")}))
            .await,
    );
    let asked = gimlet.handler.elicitations.lock().unwrap().len();
    assert_eq!(
        asked, 1,
        "one ask for the host, then the session grant covers it"
    );
    gimlet.stop().await;
}

#[tokio::test]
async fn web_search_is_offered_only_with_a_key_and_talks_to_the_configured_endpoint() {
    let site = Site::start().await;
    let (gimlet, _dir) = gimlet_with("").await;
    let tools = gimlet.client.list_all_tools().await.unwrap();
    assert!(
        !tools.iter().any(|t| t.name == "web_search"),
        "no key, no tool"
    );
    gimlet.stop().await;

    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!("[tools.web_search]\nendpoint = \"{}\"\n", site.url("")),
    )
    .unwrap();
    let root = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let mut cmd = command(data.path());
    cmd.env("TAVILY_API_KEY", "tvly-test-key")
        .arg("serve")
        .arg("--root")
        .arg(root.path())
        .arg("--config")
        .arg(&config)
        .args(["--mode", "trusted"]);
    let (transport, _) = rmcp::transport::TokioChildProcess::builder(cmd)
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .unwrap();
    let client = rmcp::ServiceExt::serve(TestClient::default(), transport)
        .await
        .unwrap();
    let serde_json::Value::Object(args) = json!({"query": "gimlet mcp", "max_results": 2}) else {
        unreachable!()
    };
    let result = client
        .call_tool(rmcp::model::CallToolRequestParams::new("web_search").with_arguments(args))
        .await
        .unwrap();
    let text = ok_text(&result);
    assert!(
        text.contains("1. gimlet\n   https://example.com/gimlet"),
        "{text}"
    );
    assert_eq!(
        result.structured_content.unwrap()["results"][1]["url"],
        "https://example.com/mcp"
    );
    let request = site.seen.lock().unwrap()[0].clone();
    assert!(request.starts_with("POST /search"), "{request}");
    assert!(request.contains("\"max_results\":2"), "{request}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn web_fetch_results_at_and_over_the_limits_fit_them() {
    // See: issue 38. A page is cut from its head; an error page keeps its marker.
    let site = Site::start().await;
    let (gimlet, _dir) = gimlet_with("[tools.web_fetch]\nallow_local = true\n").await;
    // `web_fetch` trims the body: N lines are N lines.
    for n in [1999, 2000, 2001, 5000] {
        let page = gimlet
            .call(
                "web_fetch",
                json!({"url": site.url(&format!("/lines/{n}"))}),
            )
            .await;
        assert_fits_default_limits(&page);
        let text = ok_text(&page);
        assert!(text.starts_with("line 1\n"), "{n}");
        assert_eq!(text.contains("[Output truncated: "), n > 2000, "{n}");
        let gone = gimlet
            .call("web_fetch", json!({"url": site.url(&format!("/gone/{n}"))}))
            .await;
        assert_fits_default_limits(&gone);
        let text = err_text(&gone);
        assert!(
            text.starts_with("Error (web_fetch):\nHTTP 404 Not Found from "),
            "{n}"
        );
    }
    gimlet.stop().await;
}
