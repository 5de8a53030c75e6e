//! What the model reads of every kind of error, through the binary: the text of each error
//! result starts with `Error (<tool>):`, for hosts that forward a result's text without its
//! `isError` flag (issue 38), and the flag stays.

#[cfg(unix)]
use serde_json::{Value, json};

#[cfg(unix)]
use crate::common::{Gimlet, TestClient, err_text, ok_text};

#[cfg(unix)]
/// Calls a tool that must fail and returns `## <kind>` and the error text.
async fn failure(gimlet: &Gimlet, kind: &str, tool: &str, args: Value) -> String {
    let text = err_text(&gimlet.call(tool, args).await);
    format!("## {kind}\n{text}")
}

// The hook is a `#!/bin/sh` script and the plugin and commands are POSIX shell.
#[cfg(unix)]
#[tokio::test]
async fn every_kind_of_error_starts_with_the_marker_naming_the_tool() {
    let outside = tempfile::tempdir().unwrap();
    let hooks = tempfile::tempdir().unwrap();
    let block = hooks.path().join("block.sh");
    std::fs::write(&block, "#!/bin/sh\necho 'not on Fridays' >&2\nexit 2\n").unwrap();
    std::fs::set_permissions(&block, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let config = format!(
        r#"
[[permissions.rules]]
action = "deny"
tool = "read"
pattern = "secrets/**"

[[hooks]]
event = "before"
tool = "write"
pattern = "blocked*"
command = "{}"

[[plugins]]
name = "widget"
description = "Fails."
command = "echo 'no such widget' >&2; exit 3"
read_only = true

[budget]
max_calls = 12
"#,
        block.display()
    );
    let (gimlet, _dir) = Gimlet::start_with_config(TestClient::default(), &config, &[]).await;
    gimlet.write("a.txt", "a\n");
    let mut seen = vec![
        failure(&gimlet, "invalid arguments", "read", json!({"path": 42})).await,
        failure(
            &gimlet,
            "validation",
            "read",
            json!({"path": "a.txt", "limit": 0}),
        )
        .await,
        failure(&gimlet, "unknown path", "read", json!({"path": "nope.txt"})).await,
        failure(
            &gimlet,
            "path outside the roots",
            "read",
            json!({"path": outside.path().join("f.txt")}),
        )
        .await,
        failure(
            &gimlet,
            "permission denied",
            "read",
            json!({"path": "secrets/key.txt"}),
        )
        .await,
        failure(
            &gimlet,
            "hook block",
            "write",
            json!({"path": "blocked.txt", "content": "x"}),
        )
        .await,
        failure(
            &gimlet,
            "the tool's own failure",
            "grep",
            json!({"pattern": "a("}),
        )
        .await,
        failure(&gimlet, "plugin error", "widget", json!({})).await,
        failure(
            &gimlet,
            "timeout",
            "bash",
            json!({"command": "sleep 5", "timeout_ms": 300}),
        )
        .await,
    ];
    // A command that exits non-zero is a result, not an error: no marker, no flag.
    let failed = ok_text(&gimlet.call("bash", json!({"command": "exit 3"})).await);
    assert!(failed.starts_with("(no output)\n[exit code 3"), "{failed}");
    // Calls 11 and 12 of the budget; the 13th is refused.
    ok_text(&gimlet.call("read", json!({"path": "a.txt"})).await);
    ok_text(&gimlet.call("read", json!({"path": "a.txt"})).await);
    seen.push(failure(&gimlet, "budget", "read", json!({"path": "a.txt"})).await);
    gimlet.stop().await;

    let gimlet = Gimlet::start_with(TestClient::default(), &["--mode", "read-only"]).await;
    seen.push(
        failure(
            &gimlet,
            "read-only mode",
            "write",
            json!({"path": "b.txt", "content": "x"}),
        )
        .await,
    );
    gimlet.stop().await;

    let text = seen
        .join("\n\n")
        .replace(&outside.path().display().to_string(), "[OUTSIDE]")
        .replace(" · not sandboxed", " · [where]")
        .replace(" · sandboxed", " · [where]");
    insta::assert_snapshot!(text);
}
