//! Which folders are roots: `--root`, the implicit one (never `/` or the home directory), the
//! client's MCP roots (applied before the first call is judged), and no root at all. And
//! questions withdrawn when the call that asked ends.

#![expect(clippy::unwrap_used, reason = "test helpers fail loudly")]

use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

use crate::common::{Gimlet, TestClient, command, err_text, eventually, ok_text, text};

/// A server started as a host starts it: in `cwd`, with `HOME` set, and no `--root` unless
/// `args` has one.
struct Hosted {
    client: RunningService<RoleClient, TestClient>,
    handler: TestClient,
    _data: tempfile::TempDir,
}

impl Hosted {
    async fn start(cwd: &Path, home: &Path, handler: TestClient, args: &[&str]) -> Self {
        let data = tempfile::tempdir().unwrap();
        let mut command = command(data.path());
        command
            .arg("serve")
            .args(args)
            .current_dir(cwd)
            .env("HOME", home);
        let (transport, _stderr) = TokioChildProcess::builder(command)
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let client = handler.clone().serve(transport).await.unwrap();
        Self {
            client,
            handler,
            _data: data,
        }
    }

    async fn call(&self, tool: &str, args: Value) -> rmcp::model::CallToolResult {
        let Value::Object(args) = args else {
            panic!("arguments must be an object")
        };
        self.client
            .call_tool(
                rmcp::model::CallToolRequestParams::new(tool.to_owned()).with_arguments(args),
            )
            .await
            .unwrap()
    }

    fn asked(&self) -> usize {
        self.handler.elicitations.lock().unwrap().len()
    }

    async fn stop(self) {
        let _ = self.client.cancel().await;
    }
}

/// A client that names `roots` (answering `roots/list` after `delay`) and records, but
/// declines, every question.
fn client_with_roots(roots: &[&Path], delay: Duration) -> (TestClient, Arc<Mutex<Vec<String>>>) {
    let uris = Arc::new(Mutex::new(
        roots
            .iter()
            .map(|r| format!("file://{}", r.display()))
            .collect(),
    ));
    let client = TestClient {
        roots: Some(Arc::clone(&uris)),
        roots_delay: Some(delay),
        ..TestClient::answering(|_| {
            rmcp::model::ElicitResult::new(rmcp::model::ElicitationAction::Decline)
        })
    };
    (client, uris)
}

fn dir_with(file: &str, content: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(file), content).unwrap();
    dir
}

#[track_caller]
fn assert_no_root_hint(message: &str) {
    assert!(
        message.contains("no root folder") && message.contains("--root"),
        "{message}"
    );
    assert!(message.contains("claude_desktop_config.json"), "{message}");
}

#[cfg_attr(
    windows,
    ignore = "commands ask on Windows (no sandbox); the test expects a sandboxed run"
)]
#[tokio::test]
async fn started_in_slash_without_root_it_has_none_and_says_how_to_add_one() {
    let home = tempfile::tempdir().unwrap();
    let elsewhere = dir_with("f.txt", "x\n");
    let gimlet = Hosted::start(Path::new("/"), home.path(), TestClient::default(), &[]).await;
    let absolute = elsewhere.path().join("f.txt").display().to_string();
    for (tool, args) in [
        ("read", json!({"path": "etc/hostname"})),
        ("read", json!({"path": absolute})),
        ("ls", json!({})),
        ("grep", json!({"pattern": "x"})),
        ("glob", json!({"pattern": "*"})),
        ("write", json!({"path": absolute, "content": "y\n"})),
        ("bash", json!({"command": "echo hi"})),
    ] {
        let message = err_text(&gimlet.call(tool, args).await);
        assert_no_root_hint(&message);
    }
    assert_eq!(std::fs::read_to_string(&absolute).unwrap(), "x\n");
    gimlet.stop().await;
}

#[cfg_attr(windows, ignore = "a Unix home layout")]
#[tokio::test]
async fn the_home_directory_and_above_are_never_implicit_roots() {
    let top = tempfile::tempdir().unwrap();
    let home = top.path().join("home");
    std::fs::create_dir(&home).unwrap();
    std::fs::write(home.join("notes.txt"), "private\n").unwrap();
    for cwd in [home.as_path(), top.path()] {
        let gimlet = Hosted::start(cwd, &home, TestClient::default(), &[]).await;
        let message = err_text(&gimlet.call("read", json!({"path": "home/notes.txt"})).await);
        assert_no_root_hint(&message);
        let message = err_text(&gimlet.call("read", json!({"path": "notes.txt"})).await);
        assert_no_root_hint(&message);
        gimlet.stop().await;
    }
}

#[tokio::test]
async fn a_project_folder_is_the_implicit_root() {
    let home = tempfile::tempdir().unwrap();
    let project = home.path().join("project");
    std::fs::create_dir(&project).unwrap();
    std::fs::write(project.join("main.rs"), "fn main() {}\n").unwrap();
    let gimlet = Hosted::start(&project, home.path(), TestClient::default(), &[]).await;
    let read = ok_text(&gimlet.call("read", json!({"path": "main.rs"})).await);
    assert!(read.contains("fn main"), "{read}");
    gimlet.stop().await;
}

#[cfg_attr(windows, ignore = "`/` is not a drive's root on Windows")]
#[tokio::test]
async fn an_explicit_root_of_slash_still_works() {
    let home = tempfile::tempdir().unwrap();
    let elsewhere = dir_with("f.txt", "anywhere\n");
    let gimlet = Hosted::start(
        home.path(),
        home.path(),
        TestClient::default(),
        &["--root", "/"],
    )
    .await;
    let path = elsewhere.path().join("f.txt").display().to_string();
    let read = ok_text(&gimlet.call("read", json!({"path": path})).await);
    assert!(read.contains("anywhere"), "{read}");
    assert_eq!(gimlet.asked(), 0);
    gimlet.stop().await;
}

#[cfg_attr(windows, ignore = "builds file:// URIs and outside paths as on Unix")]
#[tokio::test]
async fn the_first_call_waits_for_the_clients_roots() {
    // The client answers roots/list late: a call sent right after `initialized` must still be
    // judged with its roots, not asked about (or refused) and then allowed the second time.
    let home = tempfile::tempdir().unwrap();
    let client_root = dir_with("f.txt", "from the client root\n");
    let (client, _) = client_with_roots(&[client_root.path()], Duration::from_millis(400));
    let gimlet = Hosted::start(Path::new("/"), home.path(), client, &[]).await;
    let path = client_root.path().join("f.txt").display().to_string();
    for _ in 0..3 {
        let read = ok_text(&gimlet.call("read", json!({"path": path})).await);
        assert!(read.contains("from the client root"), "{read}");
    }
    assert_eq!(gimlet.asked(), 0, "nothing was asked");
    gimlet.stop().await;
}

#[cfg_attr(windows, ignore = "builds file:// URIs and outside paths as on Unix")]
#[tokio::test]
async fn client_roots_replace_the_implicit_root_and_follow_list_changed() {
    let home = tempfile::tempdir().unwrap();
    let project = home.path().join("project");
    std::fs::create_dir(&project).unwrap();
    std::fs::write(project.join("p.txt"), "project\n").unwrap();
    let first = dir_with("a.txt", "first root\n");
    let second = dir_with("b.txt", "second root\n");
    let (client, uris) = client_with_roots(&[first.path()], Duration::from_millis(300));
    let gimlet = Hosted::start(&project, home.path(), client, &[]).await;
    let a = first.path().join("a.txt").display().to_string();
    let b = second.path().join("b.txt").display().to_string();
    ok_text(&gimlet.call("read", json!({"path": a})).await);
    // The working directory was only the implicit root: the client's roots replace it.
    let p = project.join("p.txt").display().to_string();
    let refused = err_text(&gimlet.call("read", json!({"path": p})).await);
    assert!(refused.contains("declined"), "{refused}");
    assert_eq!(gimlet.asked(), 1);

    *uris.lock().unwrap() = vec![format!("file://{}", second.path().display())];
    gimlet.client.notify_roots_list_changed().await.unwrap();
    // The next call is judged with the new roots, although the client answers late.
    let read = ok_text(&gimlet.call("read", json!({"path": b})).await);
    assert!(read.contains("second root"), "{read}");
    assert_eq!(gimlet.asked(), 1, "the new root was not asked about");
    gimlet.stop().await;
}

#[tokio::test]
async fn a_call_that_ends_withdraws_its_question() {
    let outside = dir_with("secret.txt", "s\n");
    let client = TestClient {
        elicit_delay: Some(Duration::from_secs(30)),
        ..TestClient::accepting(json!({"decision": "allow_once"}))
    };
    let gimlet = Gimlet::start_with(client, &[]).await;
    let path = outside.path().join("secret.txt").display().to_string();
    // The call asks, and is dropped (the client sends notifications/cancelled) while the
    // question is open.
    let call = gimlet.call("read", json!({"path": path}));
    assert!(
        tokio::time::timeout(Duration::from_millis(800), call)
            .await
            .is_err()
    );
    let ids = gimlet.handler.elicitation_ids.lock().unwrap().clone();
    assert_eq!(ids.len(), 1, "the call asked once");
    let withdrawn = eventually(Duration::from_secs(3), || {
        gimlet
            .handler
            .cancelled
            .lock()
            .unwrap()
            .iter()
            .any(|c| c.request_id.as_ref() == Some(&ids[0]))
    })
    .await;
    assert!(
        withdrawn,
        "no notifications/cancelled for the question: {:?}",
        gimlet.handler.cancelled.lock().unwrap()
    );
    // The server is still there.
    gimlet.write("a.txt", "a\n");
    assert!(text(&gimlet.call("read", json!({"path": "a.txt"})).await).contains('a'));
    gimlet.stop().await;
}
