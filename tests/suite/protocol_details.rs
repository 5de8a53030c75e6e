//! Protocol details hosts and the conformance suite check: methods the 2026-07-28 revision
//! removed, capabilities gimlet does not declare, and what a resource-not-found error says.

#![expect(clippy::unwrap_used, reason = "test helpers fail loudly")]

use rmcp::model::{ClientRequest, CustomRequest, ReadResourceRequestParams};
use serde_json::{Value, json};

use crate::common::Gimlet;
use crate::suite::http::{HttpGimlet, http_client};

/// A 2026-07-28 request: the revision's header and the `_meta` every request carries.
async fn post_2026(url: &str, method: &str, params: Value) -> (u16, Value) {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
    });
    let body = json!({"jsonrpc": "2.0", "id": 77, "method": method, "params": params});
    let response = http_client()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    // An SSE answer carries the JSON in its `data:` line.
    let json = text
        .lines()
        .find_map(|l| l.strip_prefix("data:"))
        .unwrap_or(&text)
        .trim()
        .to_owned();
    (status, serde_json::from_str(&json).unwrap_or(Value::Null))
}

#[tokio::test]
async fn methods_the_2026_revision_removed_are_404_method_not_found() {
    let server = HttpGimlet::start(&[]).await;
    for (method, params) in [
        (
            "initialize",
            json!({"protocolVersion": "2026-07-28", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}),
        ),
        ("logging/setLevel", json!({"level": "debug"})),
        ("resources/subscribe", json!({"uri": "gimlet://output/x"})),
        ("resources/unsubscribe", json!({"uri": "gimlet://output/x"})),
    ] {
        let (status, answer) = post_2026(&server.url, method, params).await;
        assert_eq!(status, 404, "{method}: {answer}");
        assert_eq!(answer["error"]["code"], -32601, "{method}: {answer}");
        assert_eq!(answer["id"], 77, "{method}: {answer}");
    }
    // What the revision keeps is still served.
    let (status, answer) = post_2026(&server.url, "tools/list", json!({})).await;
    assert_eq!(status, 200, "{answer}");
    assert!(answer["result"]["tools"].as_array().unwrap().len() > 5);
}

#[tokio::test]
async fn undeclared_capabilities_are_not_answered() {
    let gimlet = Gimlet::start().await;
    let info = gimlet.client.peer_info().unwrap();
    assert!(info.capabilities.prompts.is_none());
    assert!(info.capabilities.completions.is_none());
    for (method, params) in [
        ("prompts/list", json!({})),
        (
            "completion/complete",
            json!({"ref": {"type": "ref/prompt", "name": "x"}, "argument": {"name": "a", "value": "b"}}),
        ),
    ] {
        let request = ClientRequest::CustomRequest(CustomRequest::new(method, Some(params)));
        let err = gimlet.client.send_request(request).await.unwrap_err();
        assert!(err.to_string().contains("-32601"), "{method}: {err}");
    }
    gimlet.stop().await;
}

#[tokio::test]
async fn a_missing_resource_names_its_uri_in_the_error_data() {
    let gimlet = Gimlet::start().await;
    let uri = "gimlet://output/0123456789abcdef";
    let err = gimlet
        .client
        .read_resource(ReadResourceRequestParams::new(uri))
        .await
        .unwrap_err();
    let rmcp::ServiceError::McpError(data) = err else {
        panic!("not an MCP error: {err}");
    };
    assert_eq!(data.code, rmcp::model::ErrorCode::RESOURCE_NOT_FOUND);
    assert_eq!(data.data, Some(json!({"uri": uri})));
    gimlet.stop().await;
}
