//! Hooks and plugin tools declared in the config file.

#![cfg_attr(unix, expect(clippy::unwrap_used, reason = "test helpers fail loudly"))]

#[cfg(unix)]
use std::path::Path;

use serde_json::json;

use crate::common::{Gimlet, TestClient, assert_fits_default_limits, err_text, ok_text};

/// Starts gimlet with this config file (in the server's config directory).
async fn with_config(config: &str) -> (Gimlet, tempfile::TempDir) {
    Gimlet::start_with_config(TestClient::default(), config, &[]).await
}

#[cfg(unix)]
fn script(dir: &Path, name: &str, body: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}")).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    path.display().to_string()
}

#[cfg(unix)] // Hooks are `#!/bin/sh` scripts.
#[tokio::test]
async fn a_before_hook_blocks_a_call_and_its_message_reaches_the_model() {
    let hooks = tempfile::tempdir().unwrap();
    let seen = hooks.path().join("seen.json");
    let block = script(
        hooks.path(),
        "block.sh",
        &format!(
            "cat > '{}'\necho 'writing secrets.txt is not allowed by team policy' >&2\nexit 2\n",
            seen.display()
        ),
    );
    let config = format!(
        "[[hooks]]\nevent = \"before\"\ntool = \"write\"\npattern = \"secret*\"\ncommand = \"{block}\"\n"
    );
    let (gimlet, _dir) = with_config(&config).await;

    let result = gimlet
        .call("write", json!({"path": "secrets.txt", "content": "x"}))
        .await;
    let message = err_text(&result);
    assert!(
        message.contains("not allowed by team policy"),
        "the hook's stderr reaches the model: {message}"
    );
    assert!(!gimlet.root().join("secrets.txt").exists());
    let payload: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&seen).unwrap()).unwrap();
    assert_eq!(payload["event"], "before");
    assert_eq!(payload["tool"], "write");
    assert_eq!(payload["tool_name"], "write");
    assert_eq!(payload["input"]["path"], "secrets.txt");
    assert_eq!(payload["hook_event_name"], "PreToolUse");

    // The pattern does not match: the hook does not run.
    ok_text(
        &gimlet
            .call("write", json!({"path": "notes.txt", "content": "x"}))
            .await,
    );
    gimlet.stop().await;
}

#[cfg(unix)] // Hooks are `#!/bin/sh` scripts.
#[tokio::test]
async fn hooks_rewrite_input_and_output_and_a_failing_hook_is_not_fatal() {
    let hooks = tempfile::tempdir().unwrap();
    let redirect = script(
        hooks.path(),
        "redirect.sh",
        "echo '{\"hookSpecificOutput\":{\"permissionDecision\":\"allow\",\"updatedInput\":{\"path\":\"b.txt\"}}}'\n",
    );
    let rewrite = script(
        hooks.path(),
        "rewrite.sh",
        "if grep -q 'from b'; then echo '{\"output\":\"the hook saw b\"}'; \
         else echo '{\"output\":\"the hook saw something else\"}'; fi\n",
    );
    let broken = script(hooks.path(), "broken.sh", "echo crashed >&2\nexit 7\n");
    let config = format!(
        "[[hooks]]\nevent = \"before\"\ntool = \"read\"\npattern = \"a.txt\"\ncommand = \"{redirect}\"\n\n\
         [[hooks]]\nevent = \"after\"\ntool = \"read\"\ncommand = \"{rewrite}\"\n\n\
         [[hooks]]\nevent = \"before\"\ntool = \"ls\"\ncommand = \"{broken}\"\n"
    );
    let (gimlet, _dir) = with_config(&config).await;
    gimlet.write("a.txt", "from a\n");
    gimlet.write("b.txt", "from b\n");

    let text = ok_text(&gimlet.call("read", json!({"path": "a.txt"})).await);
    assert!(
        text == "the hook saw b",
        "the before hook redirected the read and the after hook rewrote the output: {text}"
    );
    assert!(!text.contains("from a"), "{text}");

    // A hook that fails is reported, and the call goes on.
    let listing = ok_text(&gimlet.call("ls", json!({})).await);
    assert!(listing.contains("a.txt"), "{listing}");
    gimlet.stop().await;
}

#[cfg_attr(
    windows,
    ignore = "needs a POSIX shell (plugins, hooks or commands are sh)"
)]
#[tokio::test]
async fn a_config_declared_tool_is_listed_validated_and_callable() {
    let config = r#"
[[plugins]]
name = "word_count"
title = "Count words"
description = "Counts the words of a text."
command = "wc -w | tr -d ' '"
read_only = true
concurrency_safe = true
input_schema = { type = "object", properties = { text = { type = "string", description = "The text" } }, required = ["text"] }

[[plugins]]
name = "fails"
description = "Always fails."
command = "echo partial; echo 'went wrong' >&2; exit 4"
"#;
    let (gimlet, _dir) = with_config(config).await;
    let tools = gimlet.client.list_all_tools().await.unwrap();
    let tool = tools.iter().find(|t| t.name == "word_count").unwrap();
    assert_eq!(
        tool.description.as_deref(),
        Some("Counts the words of a text.")
    );
    assert_eq!(tool.input_schema["required"], json!(["text"]));
    assert_eq!(
        tool.annotations.as_ref().unwrap().read_only_hint,
        Some(true)
    );

    let result = gimlet
        .call("word_count", json!({"text": "one two three"}))
        .await;
    assert_eq!(ok_text(&result).trim(), "3");

    let bad = err_text(&gimlet.call("word_count", json!({"txt": "x"})).await);
    assert!(
        bad.contains("text"),
        "the schema error names the field: {bad}"
    );

    let failed = err_text(&gimlet.call("fails", json!({})).await);
    assert!(failed.contains("exit status 4"), "{failed}");
    assert!(failed.contains("went wrong"), "stderr is shown: {failed}");
    assert!(failed.contains("partial"), "stdout is shown: {failed}");
    gimlet.stop().await;
}

#[tokio::test]
async fn a_project_file_cannot_bring_hooks_or_tools() {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(
        root.path().join(".gimlet.toml"),
        "[[plugins]]\nname = \"evil\"\ndescription = \"x\"\ncommand = \"true\"\n\n\
         [[hooks]]\nevent = \"before\"\ncommand = \"exit 2\"\n",
    )
    .unwrap();
    let data = tempfile::tempdir().unwrap();
    let mut command = crate::common::command(data.path());
    command.arg("serve").arg("--root").arg(root.path());
    let (transport, _) = rmcp::transport::TokioChildProcess::builder(command)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let client = rmcp::ServiceExt::serve(TestClient::default(), transport)
        .await
        .unwrap();
    let tools = client.list_all_tools().await.unwrap();
    assert!(!tools.iter().any(|t| t.name == "evil"));
    let result = client
        .call_tool(rmcp::model::CallToolRequestParams::new("ls"))
        .await
        .unwrap();
    assert_ne!(
        result.is_error,
        Some(true),
        "the project's hook did not block"
    );
    client.cancel().await.unwrap();
}

#[cfg_attr(
    windows,
    ignore = "needs a POSIX shell (plugins, hooks or commands are sh)"
)]
#[tokio::test]
async fn plugin_permissions_follow_the_mode_and_a_slow_plugin_times_out() {
    let config = r#"
[[plugins]]
name = "lookup"
description = "Reads something."
command = "echo looked up"
read_only = true

[[plugins]]
name = "deploy"
description = "Changes something."
command = "echo deployed"

[[plugins]]
name = "slow"
description = "Takes too long."
command = "sleep 30"
read_only = true
timeout_s = 1
"#;
    // Strict mode, and a client that cannot be asked: a read-only plugin runs, the other is refused.
    let (gimlet, _dir) =
        Gimlet::start_with_config(TestClient::default(), config, &["--mode", "strict"]).await;
    assert_eq!(
        ok_text(&gimlet.call("lookup", json!({})).await).trim(),
        "looked up"
    );
    let refused = err_text(&gimlet.call("deploy", json!({})).await);
    assert!(refused.contains("permission denied"), "{refused}");

    let started = std::time::Instant::now();
    let slow = err_text(&gimlet.call("slow", json!({})).await);
    assert!(slow.contains("did not finish within 1 s"), "{slow}");
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    gimlet.stop().await;
}

#[cfg_attr(
    windows,
    ignore = "needs a POSIX shell (plugins, hooks or commands are sh)"
)]
#[tokio::test]
async fn a_plugin_tools_output_at_and_over_the_limits_fits_them() {
    // See: issue 38. A plugin's output is cut from its head, like `read`'s.
    let config = r#"
[[plugins]]
name = "numbers"
description = "Prints numbers."
command = "seq 1 \"$(cat | sed 's/[^0-9]//g')\""
read_only = true
input_schema = { type = "object", properties = { n = { type = "integer" } }, required = ["n"] }
"#;
    let (gimlet, _dir) = with_config(config).await;
    for n in [1999, 2000, 2001, 5000, 200_000] {
        let result = gimlet.call("numbers", json!({"n": n})).await;
        assert_fits_default_limits(&result);
        let text = ok_text(&result);
        assert!(
            text.starts_with("1\n2\n"),
            "{n}: {}",
            &text[..50.min(text.len())]
        );
        assert_eq!(text.contains("[Output truncated: "), n > 2000, "{n}");
    }
    gimlet.stop().await;
}
