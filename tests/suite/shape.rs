//! What a host hands the model: by default every result carries its whole payload in the text
//! content and has no `structuredContent`, because Claude Code, Codex and VS Code show only
//! the structured part when there is one. With `--structured-output` the structured part
//! repeats the text, so those hosts still give the model the payload.

#![expect(clippy::unwrap_used, reason = "test helpers fail loudly")]

use rmcp::model::CallToolResult;
use serde_json::{Value, json};

use crate::common::{Gimlet, TestClient, slashed, text};

/// What Claude Code and Codex give the model: the JSON of `structuredContent` when there is
/// one, else the text blocks.
fn seen_by_structured_hosts(result: &CallToolResult) -> String {
    match &result.structured_content {
        Some(value) => serde_json::to_string(value).unwrap(),
        None => text(result),
    }
}

/// Calls that cover each kind of payload, with a string each must show the model.
async fn payloads(gimlet: &Gimlet) -> Vec<(&'static str, CallToolResult, Vec<String>)> {
    let long: String = (1..=2500).map(|i| format!("row {i}\n")).collect();
    gimlet.write("big.txt", long);
    gimlet.write(
        "src/lib.rs",
        "pub fn marker_alpha() {}\npub fn other() {}\n",
    );
    let mut calls = Vec::new();
    let read = gimlet.call("read", json!({"path": "src/lib.rs"})).await;
    calls.push((
        "read",
        read,
        vec!["     1\tpub fn marker_alpha() {}".into()],
    ));
    let grep = gimlet
        .call(
            "grep",
            json!({"pattern": "marker_alpha", "output_mode": "content"}),
        )
        .await;
    calls.push((
        "grep",
        grep,
        vec!["src/lib.rs".into(), "marker_alpha".into()],
    ));
    let ls = gimlet.call("ls", json!({})).await;
    calls.push(("ls", ls, vec!["big.txt".into(), "lib.rs".into()]));
    let glob = gimlet.call("glob", json!({"pattern": "**/*.rs"})).await;
    calls.push(("glob", glob, vec!["src/lib.rs".into()]));
    let bash = gimlet
        .call("bash", json!({"command": "echo bash_marker_42; exit 3"}))
        .await;
    calls.push((
        "bash",
        bash,
        vec!["bash_marker_42".into(), "exit code 3".into()],
    ));
    let write = gimlet
        .call(
            "write",
            json!({"path": "notes.md", "content": "written_marker\n"}),
        )
        .await;
    calls.push(("write", write, vec!["notes.md".into()]));
    let edit = gimlet
        .call(
            "edit",
            json!({"path": "src/lib.rs", "old_string": "other", "new_string": "edited_marker"}),
        )
        .await;
    calls.push(("edit", edit, vec!["edited_marker".into()]));
    let multi_edit = gimlet
        .call(
            "multi_edit",
            json!({"path": "src/lib.rs", "edits": [
                {"old_string": "edited_marker", "new_string": "multi_marker"},
            ]}),
        )
        .await;
    calls.push(("multi_edit", multi_edit, vec!["multi_marker".into()]));
    let patch = "*** Begin Patch\n*** Add File: patched.txt\n+patched_marker\n*** End Patch\n";
    let apply_patch = gimlet.call("apply_patch", json!({ "patch": patch })).await;
    calls.push(("apply_patch", apply_patch, vec!["patched.txt".into()]));
    let count = gimlet
        .call("grep", json!({"pattern": "marker", "output_mode": "count"}))
        .await;
    calls.push(("grep (count)", count, vec!["src/lib.rs".into()]));
    let todo = gimlet
        .call(
            "todo_write",
            json!({"todos": [{"content": "todo_marker", "status": "pending"}]}),
        )
        .await;
    calls.push(("todo_write", todo, vec!["todo_marker".into()]));
    let background = gimlet
        .call(
            "bash",
            json!({"command": "sleep 30", "run_in_background": true}),
        )
        .await;
    calls.push(("bash (background)", background, vec!["job-1".into()]));
    let output = gimlet.call("bash_output", json!({"job_id": "job-1"})).await;
    calls.push(("bash_output", output, vec!["job-1 is running".into()]));
    let kill = gimlet.call("bash_kill", json!({"job_id": "job-1"})).await;
    calls.push(("bash_kill", kill, vec!["job-1 was stopped".into()]));
    let truncated = gimlet.call("read", json!({"path": "big.txt"})).await;
    calls.push((
        "read (truncated)",
        truncated,
        vec!["row 1997".into(), "offset".into()],
    ));
    let error = gimlet.call("read", json!({"path": "missing.txt"})).await;
    calls.push(("read (error)", error, vec!["missing.txt".into()]));
    calls
}

#[cfg_attr(
    windows,
    ignore = "the payloads include a `bash` call, which asks on Windows (no sandbox)"
)]
#[tokio::test]
async fn by_default_every_host_sees_the_whole_payload_as_text() {
    let gimlet = Gimlet::start_default_shape(TestClient::default(), &[]).await;
    let tools = gimlet.client.list_all_tools().await.unwrap();
    for tool in &tools {
        assert!(
            tool.output_schema.is_none(),
            "{} declares an output schema",
            tool.name
        );
    }
    for (name, result, wanted) in payloads(&gimlet).await {
        assert_eq!(
            result.structured_content, None,
            "{name}: no structuredContent by default"
        );
        let seen = seen_by_structured_hosts(&result);
        assert_eq!(seen, text(&result), "{name}");
        // Claude Code shows the model only a 2 KB preview of a result whose text blocks hold
        // more than 50,000 characters (UTF-16 units, as JavaScript counts them).
        let characters: usize = seen.encode_utf16().count();
        assert!(characters <= 50_000, "{name}: {characters} characters");
        let seen = slashed(&seen);
        for want in wanted {
            assert!(seen.contains(&want), "{name}: {want:?} not in {seen}");
        }
    }
    gimlet.stop().await;
}

#[cfg_attr(
    windows,
    ignore = "the payloads include a `bash` call, which asks on Windows (no sandbox)"
)]
#[tokio::test]
async fn structured_results_repeat_the_text_for_hosts_that_show_only_them() {
    let gimlet = Gimlet::start_default_shape(TestClient::default(), &["--structured-output"]).await;
    let tools = gimlet.client.list_all_tools().await.unwrap();
    let schemas: std::collections::HashMap<String, Value> = tools
        .iter()
        .filter_map(|t| {
            let schema = t.output_schema.as_ref()?;
            Some((t.name.to_string(), Value::Object((**schema).clone())))
        })
        .collect();
    assert!(schemas.contains_key("bash"), "{:?}", schemas.keys());
    for (name, result, wanted) in payloads(&gimlet).await {
        // What those hosts show, parsed back: the payload must be in it.
        let seen = match serde_json::from_str::<Value>(&seen_by_structured_hosts(&result)) {
            Ok(Value::Object(fields)) => fields["text"].as_str().unwrap_or_default().to_owned(),
            _ => text(&result),
        };
        let seen = slashed(&seen);
        for want in &wanted {
            assert!(
                seen.contains(want.as_str()),
                "{name}: {want:?} not in {seen}"
            );
        }
        let Some(structured) = &result.structured_content else {
            continue;
        };
        assert_eq!(structured["text"], text(&result), "{name}");
        let tool = name.split(' ').next().unwrap();
        let Some(schema) = schemas.get(tool) else {
            continue;
        };
        let validator = jsonschema::validator_for(schema).unwrap();
        let errors: Vec<String> = validator
            .iter_errors(structured)
            .map(|e| e.to_string())
            .collect();
        assert!(errors.is_empty(), "{name}: {errors:?}\n{structured:#}");
    }
    gimlet.stop().await;
}

#[tokio::test]
async fn codex_gets_pages_it_shows_whole_unless_limits_are_configured() {
    // Codex keeps about 12,000 bytes of a tool's text and cuts the middle out of the rest: a
    // 45 KiB page would lose lines without the model knowing where to go on.
    let codex = TestClient {
        name: Some("codex-mcp-client"),
        ..TestClient::default()
    };
    let big: String = (1..=3000)
        .map(|i| format!("line {i:04} with some padding\n"))
        .collect();
    let gimlet = Gimlet::start_default_shape(codex.clone(), &[]).await;
    gimlet.write("big.txt", &big);
    let page = text(&gimlet.call("read", json!({"path": "big.txt"})).await);
    assert!(page.len() <= 11 * 1024, "{} bytes", page.len());
    assert!(page.contains("Use offset="), "{page}");
    gimlet.stop().await;

    // Limits the user set are theirs: no lowering.
    let (gimlet, _config) =
        Gimlet::start_with_config(codex, "[output]\nmax_bytes = 30000\n", &[]).await;
    gimlet.write("big.txt", &big);
    let page = text(&gimlet.call("read", json!({"path": "big.txt"})).await);
    assert!(page.len() > 20_000, "{} bytes", page.len());
    gimlet.stop().await;

    // Other hosts get the default page.
    let gimlet = Gimlet::start_default_shape(TestClient::default(), &[]).await;
    gimlet.write("big.txt", &big);
    let page = text(&gimlet.call("read", json!({"path": "big.txt"})).await);
    assert!(page.len() > 40_000, "{} bytes", page.len());
    gimlet.stop().await;
}
