//! `bash` commands judged by their real structure, over MCP: everyday shell syntax runs in the
//! sandbox without a question, and a deny rule holds through any syntax.

#![expect(clippy::expect_used, reason = "test helpers fail loudly")]

use std::process::Command;
use std::sync::{Arc, Mutex};

use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction};
use serde_json::json;

use crate::common::{Gimlet, TestClient, err_text, ok_text, sandbox_works};

/// A client that can be asked, says yes, and remembers every question.
fn recording_client() -> (TestClient, Arc<Mutex<Vec<String>>>) {
    let asked = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&asked);
    let client = TestClient::answering(move |request| {
        if let ElicitRequestParams::FormElicitationParams { message, .. } = request {
            seen.lock().expect("lock").push(message.clone());
        }
        ElicitResult::new(ElicitationAction::Accept).with_content(json!({"decision": "allow_once"}))
    });
    (client, asked)
}

fn skip(why: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "skipped: {why}");
}

fn git(root: &std::path::Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .current_dir(root)
        .args(args)
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

const DENY_GIT_PUSH: &str = r#"
[[permissions.rules]]
action = "deny"
tool = "bash"
pattern = "git push*"
"#;

/// The four commands of issue 21: substitution, arithmetic, a here-document into a file and
/// the here-document commit message, in default mode with the sandbox, with no question.
#[tokio::test]
async fn everyday_shell_syntax_runs_in_the_sandbox_without_asking() {
    if !sandbox_works() {
        skip("this kernel cannot enforce the sandbox (Landlock and seccomp)");
        return;
    }
    let (client, asked) = recording_client();
    let gimlet = Gimlet::start_with(client, &[]).await;
    let root = gimlet.root();

    let text = ok_text(&gimlet.call("bash", json!({"command": "echo $(pwd)"})).await);
    assert!(text.starts_with(&format!("{}\n", root.display())), "{text}");
    let text = ok_text(
        &gimlet
            .call("bash", json!({"command": "echo $((1+2))"}))
            .await,
    );
    assert!(text.starts_with("3\n"), "{text}");

    let write_notes = "cat > notes.txt <<'EOF'\nfirst line\n$(rm -rf /) stays text\nEOF";
    ok_text(&gimlet.call("bash", json!({"command": write_notes})).await);
    assert_eq!(
        std::fs::read_to_string(root.join("notes.txt")).expect("notes.txt"),
        "first line\n$(rm -rf /) stays text\n"
    );

    git(&root, &["init", "-q"]);
    git(&root, &["config", "user.name", "Gimlet Test"]);
    git(&root, &["config", "user.email", "test@example.com"]);
    let commit = "git add notes.txt && git commit -q -m \"$(cat <<'EOF'\nAdd the notes\n\nWritten with a here-document.\nEOF\n)\"";
    let text = ok_text(&gimlet.call("bash", json!({"command": commit})).await);
    assert!(text.contains("exit code 0"), "{text}");
    assert_eq!(
        git(&root, &["log", "-1", "--format=%B"]),
        "Add the notes\n\nWritten with a here-document.\n\n"
    );

    assert!(
        asked.lock().expect("lock").is_empty(),
        "nothing should ask: {:?}",
        asked.lock().expect("lock")
    );
    gimlet.stop().await;
}

/// With `deny git push*`, the push is refused however it is written, before anything runs.
#[cfg_attr(
    windows,
    ignore = "needs a POSIX shell (plugins, hooks or commands are sh)"
)]
#[tokio::test]
async fn a_deny_rule_holds_through_any_syntax() {
    let (client, asked) = recording_client();
    let (gimlet, _config) = Gimlet::start_with_config(client, DENY_GIT_PUSH, &[]).await;
    let root = gimlet.root();
    for (i, command) in [
        "touch ran0 && bash -c \"git push\"",
        "touch ran1 && echo $(git push)",
        "touch ran2 && eval 'git push'",
        "touch ran3 && sh <<'EOF'\ngit push origin main\nEOF",
        "touch ran4; echo x | xargs git push",
        "touch ran5; env GIT_TRACE=1 /usr/bin/git push",
    ]
    .into_iter()
    .enumerate()
    {
        let error = err_text(&gimlet.call("bash", json!({"command": command})).await);
        assert!(error.contains("denies `git push"), "{command}: {error}");
        assert!(
            !root.join(format!("ran{i}")).exists(),
            "{command}: nothing may run"
        );
    }
    // Quoted text and here-document bodies are data: they run.
    let text = ok_text(
        &gimlet
            .call(
                "bash",
                json!({"command": "echo \"git push\"; cat <<'EOF'\ngit push\nEOF"}),
            )
            .await,
    );
    assert!(text.starts_with("git push\ngit push\n"), "{text}");
    assert!(asked.lock().expect("lock").is_empty());
    gimlet.stop().await;
}

/// A part that cannot be known before it runs, where a deny rule could hide in it, asks; the
/// question names the part. Without anyone to ask, it is refused, naming it too.
#[tokio::test]
async fn an_unknowable_part_asks_where_a_rule_could_hide_in_it() {
    if !sandbox_works() {
        skip("this kernel cannot enforce the sandbox (Landlock and seccomp)");
        return;
    }
    let (client, asked) = recording_client();
    let (gimlet, _config) = Gimlet::start_with_config(client, DENY_GIT_PUSH, &[]).await;
    let text = ok_text(
        &gimlet
            .call("bash", json!({"command": "CMD='echo hi'; eval \"$CMD\""}))
            .await,
    );
    assert!(text.starts_with("hi\n"), "{text}");
    let questions = asked.lock().expect("lock").clone();
    assert_eq!(questions.len(), 1, "{questions:?}");
    assert!(
        questions[0].contains("gimlet cannot see the code `eval \"$CMD\"` runs"),
        "{}",
        questions[0]
    );
    gimlet.stop().await;

    let (gimlet, _config) =
        Gimlet::start_with_config(TestClient::default(), DENY_GIT_PUSH, &[]).await;
    let error = err_text(
        &gimlet
            .call("bash", json!({"command": "source ./env.sh && make"}))
            .await,
    );
    assert!(
        error.contains("the commands of the file `source ./env.sh` runs")
            && error.contains("nobody can be asked"),
        "{error}"
    );
    // With no rule to hide from, the sandbox is enough: it runs.
    gimlet.stop().await;
    let gimlet = Gimlet::start().await;
    let text = ok_text(
        &gimlet
            .call("bash", json!({"command": "CMD='echo hi'; eval \"$CMD\""}))
            .await,
    );
    assert!(text.starts_with("hi\n"), "{text}");
    gimlet.stop().await;
}
