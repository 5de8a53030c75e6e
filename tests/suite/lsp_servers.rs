//! Language servers that do not pile up (issue 35, item 5): one server per (language, project
//! root) for the whole process, shared by HTTP sessions; shut down when idle; restarted over
//! their memory cap, with a note; none left behind after gimlet is killed with SIGKILL; and a
//! missing or crashed server for one language never failing a call for another.
//!
//! The server is scripted (`fixtures/lsp/fake_lifetime_server.py`): it logs each start, answers
//! `hover` with its pid, starts a grandchild in a session of its own, and does not exit when
//! its stdin closes, so only gimlet's cleanup can stop it. Its processes and the helper's
//! carry a marker in their command line, found in `/proc`.

#![expect(clippy::unwrap_used, reason = "test helpers fail loudly")]

use std::path::{Path, PathBuf};
use std::time::Duration;

use rmcp::model::CallToolResult;
use serde_json::json;

use super::http::{HttpGimlet, call};
use super::lsp::{metadata, skip, start, which};
use crate::common::{
    Gimlet, TestClient, err_text, eventually, marker, ok_text, processes_with, text,
};

/// The `[lsp]` config of the scripted server for `*.life` files, with `extra` settings.
fn config(python: &Path, marker: &str, extra: &str) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("crates/gimlet-tools/fixtures/lsp/fake_lifetime_server.py");
    format!(
        "[lsp]\nwait_ms = 2000\nrequest_timeout_ms = 20000\n{extra}\n\
         [lsp.servers.life]\ncommand = [{python:?}, {script:?}, \"life.log\", {marker:?}]\n\
         extensions = [\"life\"]\n",
        python = python.display().to_string(),
        script = script.display().to_string(),
    )
}

fn python() -> Option<PathBuf> {
    let found = which("python3");
    if found.is_none() {
        skip("no python3 for the scripted server");
    }
    found
}

const HOVER: &str = "a.life";

fn hover(path: &str) -> serde_json::Value {
    json!({"operation": "hover", "path": path, "line": 1})
}

/// The pid the server answered `hover` with.
fn served_by(result: &CallToolResult) -> u32 {
    let text = ok_text(result);
    let at = text
        .find("served by pid ")
        .unwrap_or_else(|| panic!("{text}"))
        + 14;
    text[at..]
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// How many times the server was started in `root`.
fn starts(root: &Path) -> usize {
    std::fs::read_to_string(root.join("life.log"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("started "))
        .count()
}

fn alive(pid: u32) -> bool {
    processes_with("").contains(&pid)
}

async fn stdio(python: &Path, marker: &str, extra: &str) -> (Gimlet, tempfile::TempDir) {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let (gimlet, dir) = start(&path, "", &config(python, marker, extra)).await;
    gimlet.write(HOVER, "something\n");
    (gimlet, dir)
}

#[tokio::test(flavor = "multi_thread")]
async fn two_http_sessions_on_one_root_share_one_server() {
    let Some(python) = python() else { return };
    let tag = marker();
    let config_dir = tempfile::tempdir().unwrap();
    let config_file = config_dir.path().join("config.toml");
    std::fs::write(&config_file, config(&python, &tag, "")).unwrap();
    let server = HttpGimlet::start(&["--config", config_file.to_str().unwrap()]).await;
    std::fs::write(server.root().join(HOVER), "something\n").unwrap();
    std::fs::create_dir_all(server.root().join("sub")).unwrap();
    std::fs::write(server.root().join("sub/b.life"), "other\n").unwrap();
    let first = server.client(TestClient::default()).await;
    let second = server.client(TestClient::default()).await;
    let (one, two) = tokio::join!(
        call(&first, "lsp", hover(HOVER)),
        call(&second, "lsp", hover("sub/b.life"))
    );
    let (one, two) = (served_by(&one), served_by(&two));
    assert_eq!(one, two, "both sessions are served by one server");
    assert_eq!(
        served_by(&call(&second, "lsp", hover(HOVER)).await),
        one,
        "and the second session's next call too"
    );
    assert_eq!(starts(&server.root()), 1, "one server was started");
    let _ = first.cancel().await;
    let _ = second.cancel().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_idle_server_is_shut_down_and_started_again_quietly() {
    let Some(python) = python() else { return };
    let tag = marker();
    let (gimlet, _config) = stdio(&python, &tag, "idle_shutdown_secs = 1").await;
    let first = served_by(&gimlet.call("lsp", hover(HOVER)).await);
    assert!(
        processes_with(&tag).len() >= 3,
        "the helper, the server and its grandchild run: {:?}",
        processes_with(&tag)
    );
    assert!(
        eventually(Duration::from_secs(20), || processes_with(&tag).is_empty()).await,
        "an idle server is shut down with what it started: {:?} left",
        processes_with(&tag)
    );
    let again = gimlet.call("lsp", hover(HOVER)).await;
    let second = served_by(&again);
    assert_ne!(first, second, "the next use starts a new server");
    assert!(
        !text(&again).contains("restarted"),
        "an idle shutdown is no crash: {}",
        text(&again)
    );
    assert_eq!(starts(&gimlet.root()), 2);
    gimlet.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_is_not_shut_down_while_it_is_used() {
    let Some(python) = python() else { return };
    let tag = marker();
    let (gimlet, _config) = stdio(&python, &tag, "idle_shutdown_secs = 2").await;
    let first = served_by(&gimlet.call("lsp", hover(HOVER)).await);
    // Used every half second for twice the idle time: the same server answers throughout.
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(served_by(&gimlet.call("lsp", hover(HOVER)).await), first);
    }
    assert_eq!(starts(&gimlet.root()), 1);
    gimlet.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_over_its_memory_cap_is_restarted_with_a_note() {
    let Some(python) = python() else { return };
    let tag = marker();
    // Any Python holds more than 1 MiB.
    let (gimlet, _config) = stdio(&python, &tag, "max_memory_mb = 1").await;
    let first = served_by(&gimlet.call("lsp", hover(HOVER)).await);
    assert!(
        eventually(Duration::from_secs(30), || !alive(first)).await,
        "the server over its cap is stopped"
    );
    assert!(
        eventually(Duration::from_secs(10), || processes_with(&tag).is_empty()).await,
        "with what it started: {:?} left",
        processes_with(&tag)
    );
    let again = gimlet.call("lsp", hover(HOVER)).await;
    let second = served_by(&again);
    assert_ne!(first, second);
    let said = text(&again);
    assert!(
        said.contains("note: python3") && said.contains(" MB (cap 1 MB) and was restarted."),
        "{said}"
    );
    gimlet.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn no_server_process_remains_after_gimlet_is_killed() {
    let Some(python) = python() else { return };
    let tag = marker();
    let (gimlet, _config) = stdio(&python, &tag, "").await;
    served_by(&gimlet.call("lsp", hover(HOVER)).await);
    let before = processes_with(&tag);
    assert!(
        before.len() >= 3,
        "the helper, the server and its grandchild run: {before:?}"
    );
    let pid = rustix::process::Pid::from_raw(i32::try_from(gimlet.pid).unwrap()).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::KILL).unwrap();
    assert!(
        eventually(Duration::from_secs(20), || processes_with(&tag).is_empty()).await,
        "after SIGKILL of gimlet, left: {:?}",
        processes_with(&tag)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_or_crashing_server_fails_no_call_for_another_language() {
    let Some(python) = python() else { return };
    let tag = marker();
    let extra = format!(
        "[lsp.servers.gone]\ncommand = [\"/nonexistent/gone-langserver\"]\nextensions = \
         [\"gone\"]\n\
         [lsp.servers.dies]\ncommand = [{python:?}, \"-c\", \"import sys; sys.exit(3)\"]\n\
         extensions = [\"dies\"]\n",
        python = python.display().to_string(),
    );
    let (gimlet, _config) = stdio(&python, &tag, &extra).await;
    gimlet.write("x.gone", "x\n");
    gimlet.write("x.dies", "x\n");
    let gone = err_text(&gimlet.call("lsp", hover("x.gone")).await);
    assert!(gone.contains("not found"), "{gone}");
    let dies = err_text(&gimlet.call("lsp", hover("x.dies")).await);
    assert!(dies.contains("could not start"), "{dies}");
    // One call changing files of all three languages succeeds, with a word on each failure.
    let patch = "*** Begin Patch\n*** Update File: x.gone\n@@\n-x\n+y\n\
                 *** Update File: x.dies\n@@\n-x\n+y\n\
                 *** Update File: a.life\n@@\n-something\n+something else\n*** End Patch\n";
    let changed = gimlet.call("apply_patch", json!({"patch": patch})).await;
    let said = ok_text(&changed);
    assert!(said.contains("x.gone: no gone language server"), "{said}");
    assert!(said.contains("x.dies: python3"), "{said}");
    let outcomes: Vec<_> = metadata(&changed)["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["outcome"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert!(
        outcomes.contains(&String::from("not_installed"))
            && outcomes.contains(&String::from("failed")),
        "{outcomes:?}"
    );
    served_by(&gimlet.call("lsp", hover(HOVER)).await);
    gimlet.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_does_not_see_servers_of_roots_only_another_session_named() {
    let Some(python) = python() else { return };
    let tag = marker();
    let config_dir = tempfile::tempdir().unwrap();
    let config_file = config_dir.path().join("config.toml");
    std::fs::write(&config_file, config(&python, &tag, "")).unwrap();
    let server = HttpGimlet::start(&["--config", config_file.to_str().unwrap()]).await;
    // The first session names a root of its own; the second has only the configured one.
    let own = tempfile::tempdir().unwrap();
    let own_root = std::fs::canonicalize(own.path()).unwrap();
    std::fs::write(own_root.join(HOVER), "something\n").unwrap();
    let uris = std::sync::Arc::new(std::sync::Mutex::new(vec![format!(
        "file://{}",
        own_root.display()
    )]));
    let naming = TestClient {
        roots: Some(uris),
        ..TestClient::default()
    };
    let first = server.client(naming).await;
    let second = server.client(TestClient::default()).await;
    let file = own_root.join(HOVER);
    served_by(&call(&first, "lsp", hover(file.to_str().unwrap())).await);
    let query = json!({"operation": "workspace_symbols", "query": "life"});
    let seen = call(&first, "lsp", query.clone()).await;
    assert!(ok_text(&seen).contains("life_symbol"), "{}", text(&seen));
    let unseen = text(&call(&second, "lsp", query).await);
    assert!(
        !unseen.contains("life_symbol") && !unseen.contains(&own_root.display().to_string()),
        "{unseen}"
    );
    let diagnostics = text(&call(&second, "lsp", json!({"operation": "diagnostics"})).await);
    assert!(
        diagnostics.contains("No language server is running yet"),
        "{diagnostics}"
    );
    let _ = first.cancel().await;
    let _ = second.cancel().await;
}
