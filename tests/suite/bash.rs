//! `bash` with real processes: timeouts, leftovers, cancellation, floods, jobs, the sandbox.

use std::time::{Duration, Instant};

use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction};
use serde_json::json;

use crate::common::{
    Gimlet, TestClient, assert_fits_default_limits, err_text, eventually, marker, ok_text,
    processes_with, rss_kib, sandbox_works,
};

#[tokio::test]
async fn output_exit_code_and_duration() {
    let gimlet = Gimlet::start().await;
    let result = gimlet
        .call("bash", json!({"command": "echo out; echo err >&2; exit 3"}))
        .await;
    let text = ok_text(&result);
    assert!(text.starts_with("out\nerr\n"), "{text}");
    assert!(
        text.contains("[exit code 3 (the command failed) · "),
        "{text}"
    );
    let structured = result.structured_content.unwrap();
    assert_eq!(structured["exit_code"], 3);
    assert_eq!(structured["timed_out"], false);
    assert_eq!(structured["background"], false);
    assert_eq!(structured["sandboxed"], sandbox_works());
    let text = ok_text(
        &gimlet
            .call("bash", json!({"command": "pwd", "workdir": "."}))
            .await,
    );
    assert!(
        text.starts_with(&gimlet.root().display().to_string()),
        "{text}"
    );
    let text = err_text(
        &gimlet
            .call("bash", json!({"command": "true", "timeout_ms": 600_001}))
            .await,
    );
    assert!(text.contains("at most 600000"), "{text}");
    let text = err_text(
        &gimlet
            .call("bash", json!({"command": "true", "workdir": "/"}))
            .await,
    );
    assert!(text.contains("outside the root folders"), "{text}");
    std::fs::create_dir(gimlet.root().join("scripts")).unwrap();
    std::fs::write(gimlet.root().join("notes.txt"), "").unwrap();
    let text = err_text(
        &gimlet
            .call("bash", json!({"command": "true", "workdir": "scirpts"}))
            .await,
    );
    assert_eq!(
        text,
        "Error (bash): `workdir`: `scirpts` does not exist; did you mean `scripts`?"
    );
    let text = err_text(
        &gimlet
            .call("bash", json!({"command": "true", "workdir": "notes.txt"}))
            .await,
    );
    assert_eq!(
        text,
        "Error (bash): `workdir` `notes.txt` is a file, not a directory"
    );
    gimlet.stop().await;
}

// See: issue 38, item 5: colour codes arrived with their ESC bytes and `10%\r100%` as
// `10%100%`.
#[tokio::test]
async fn output_is_shown_as_a_terminal_shows_it() {
    let gimlet = Gimlet::start().await;
    let result = gimlet
        .call(
            "bash",
            json!({"command": r"printf 'red \033[31mRED\033[0m\n'; printf '10%%\r100%%\r\n'; printf '\033]0;title\007done'"}),
        )
        .await;
    let text = ok_text(&result);
    assert!(
        text.starts_with("red RED\n100%\ndone\n[exit code 0 · "),
        "{text:?}"
    );
    // The bytes printed, escape sequences and all.
    let structured = result.structured_content.unwrap();
    assert_eq!(structured["output_bytes"], 41);
    // Output that is all control sequences says so, rather than "(no output)".
    let text = ok_text(
        &gimlet
            .call("bash", json!({"command": r"printf '\033[0m\r'"}))
            .await,
    );
    assert!(
        text.starts_with("(no visible output: only control sequences)\n[exit code 0"),
        "{text:?}"
    );
    gimlet.stop().await;
}

#[tokio::test]
async fn a_cut_output_saves_the_bytes_as_printed() {
    let gimlet = Gimlet::start().await;
    let command = r"for i in $(seq 3000); do printf '\033[32mline %d\033[0m\r\n' $i; done";
    let result = gimlet.call("bash", json!({"command": command})).await;
    let text = ok_text(&result);
    assert!(text.starts_with("line 1\nline 2\n"), "{}", &text[..40]);
    assert!(!text.contains('\u{1b}') && !text.contains('\r'));
    assert!(text.contains("lines ("), "the middle is cut");
    // The notice points to the saved log: the raw bytes.
    let path = text
        .split("Full output (")
        .nth(1)
        .and_then(|rest| rest.split(": ").nth(1))
        .and_then(|rest| rest.split(" (gimlet://").next())
        .unwrap_or_else(|| panic!("no saved log in {}", &text[text.len() - 600..]));
    let saved = std::fs::read(path).unwrap();
    let expected: Vec<u8> = (1..=3000)
        .flat_map(|i| format!("\u{1b}[32mline {i}\u{1b}[0m\r\n").into_bytes())
        .collect();
    assert_eq!(saved.len(), expected.len());
    assert!(
        saved == expected,
        "the saved log differs from the bytes printed"
    );
    gimlet.stop().await;
}

#[tokio::test]
async fn a_timeout_kills_a_child_that_ignores_term() {
    let gimlet = Gimlet::start().await;
    let mark = marker();
    let started = Instant::now();
    let command = format!("trap '' TERM; sleep {mark} & wait; echo unreachable");
    let result = gimlet
        .call("bash", json!({"command": command, "timeout_ms": 1000}))
        .await;
    let elapsed = started.elapsed();
    let text = err_text(&result);
    assert!(text.contains("timed out after 1.0 s"), "{text}");
    assert!(elapsed < Duration::from_secs(5), "took {elapsed:?}");
    assert_eq!(result.structured_content.unwrap()["timed_out"], true);
    assert!(
        eventually(Duration::from_secs(3), || processes_with(&mark).is_empty()).await,
        "left {:?}",
        processes_with(&mark)
    );
    gimlet.stop().await;
}

#[tokio::test]
async fn leftovers_do_not_hold_the_call_and_stdin_is_closed() {
    let gimlet = Gimlet::start().await;
    let mark = marker();
    let started = Instant::now();
    let text = ok_text(
        &gimlet
            .call(
                "bash",
                json!({"command": format!("sleep {mark} & echo started")}),
            )
            .await,
    );
    assert!(text.starts_with("started\n"), "{text}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "took {:?}",
        started.elapsed()
    );
    assert!(eventually(Duration::from_secs(3), || processes_with(&mark).is_empty()).await);
    let started = Instant::now();
    let text = ok_text(
        &gimlet
            .call(
                "bash",
                json!({"command": "cat; read line; echo \"eof ok\""}),
            )
            .await,
    );
    assert!(text.starts_with("eof ok"), "{text}");
    assert!(started.elapsed() < Duration::from_secs(3));
    gimlet.stop().await;
}

#[tokio::test]
async fn cancelling_the_call_kills_the_command() {
    let gimlet = Gimlet::start().await;
    let mark = marker();
    let call = gimlet.call("bash", json!({"command": format!("sleep {mark}")}));
    // While the call is pending the command runs; then dropping the call makes the client send
    // notifications/cancelled.
    let (timed_out, was_running) = tokio::join!(
        tokio::time::timeout(Duration::from_millis(1500), call),
        eventually(Duration::from_millis(1200), || !processes_with(&mark)
            .is_empty()),
    );
    assert!(timed_out.is_err() && was_running, "the command never ran");
    assert!(
        eventually(Duration::from_secs(4), || processes_with(&mark).is_empty()).await,
        "still running"
    );
    gimlet.stop().await;
}

#[tokio::test]
async fn an_output_flood_stays_in_bounded_memory() {
    let gimlet = Gimlet::start().await;
    ok_text(
        &gimlet
            .call("bash", json!({"command": "echo warm-up"}))
            .await,
    );
    let before = rss_kib(gimlet.pid);
    let result = gimlet
        .call("bash", json!({"command": "yes", "timeout_ms": 5000}))
        .await;
    let after = rss_kib(gimlet.pid);
    let text = err_text(&result);
    assert!(
        text.contains("[... ") && text.contains(" lines ("),
        "the middle is cut: {}",
        &text[..200.min(text.len())]
    );
    assert!(
        text.contains("the saved log holds the first 64 MiB"),
        "{}",
        &text[text.len().saturating_sub(400)..]
    );
    assert!(text.len() < 60 * 1024);
    let growth = after.saturating_sub(before);
    assert!(
        growth < 8 * 1024,
        "the server grew by {growth} KiB ({before} -> {after})"
    );
    gimlet.stop().await;
}

#[tokio::test]
async fn killing_the_server_takes_its_commands_with_it() {
    let gimlet = Gimlet::start().await;
    let (fore, back) = (marker(), marker());
    ok_text(
        &gimlet
            .call(
                "bash",
                json!({"command": format!("sleep {back}"), "run_in_background": true}),
            )
            .await,
    );
    let call = gimlet.call("bash", json!({"command": format!("sleep {fore}")}));
    let _ = tokio::time::timeout(Duration::from_millis(500), call).await;
    assert!(eventually(Duration::from_secs(2), || !processes_with(&back).is_empty()).await);
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(i32::try_from(gimlet.pid).unwrap()).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    assert!(
        eventually(Duration::from_secs(4), || processes_with(&fore).is_empty()
            && processes_with(&back).is_empty())
        .await
    );
}

#[tokio::test]
async fn background_jobs_from_start_to_kill() {
    let gimlet = Gimlet::start().await;
    let mark = marker();
    let command = format!("echo first; sleep 0.3; echo second; exec sleep {mark}");
    let result = gimlet
        .call(
            "bash",
            json!({"command": command, "run_in_background": true}),
        )
        .await;
    let job = result.structured_content.as_ref().unwrap()["job_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(ok_text(&result).contains(&job));
    tokio::time::sleep(Duration::from_millis(800)).await;
    let text = ok_text(&gimlet.call("bash_output", json!({"job_id": job})).await);
    assert!(
        text.starts_with("first\nsecond\n") && text.contains(&format!("[{job} is running")),
        "{text}"
    );
    let text = ok_text(&gimlet.call("bash_output", json!({"job_id": job})).await);
    assert!(text.starts_with("(no new output)"), "{text}");
    let text = ok_text(&gimlet.call("bash_kill", json!({"job_id": job})).await);
    assert!(text.contains("was stopped"), "{text}");
    assert!(eventually(Duration::from_secs(2), || processes_with(&mark).is_empty()).await);
    let text = err_text(
        &gimlet
            .call("bash_output", json!({"job_id": "job-99"}))
            .await,
    );
    assert!(
        text.contains("no background job `job-99`") && text.contains(&format!("{job} (killed")),
        "{text}"
    );
    let done = gimlet
        .call(
            "bash",
            json!({"command": "echo quick", "run_in_background": true}),
        )
        .await;
    let done_id = done.structured_content.unwrap()["job_id"]
        .as_str()
        .unwrap()
        .to_owned();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let text = ok_text(&gimlet.call("bash_output", json!({"job_id": done_id})).await);
    assert!(
        text.starts_with("quick\n") && text.contains("exited with code 0"),
        "{text}"
    );
    // A job's output is shown as a terminal shows it too, its unfinished line as it stands.
    let command = r"printf '\033[1mbold\033[0m\n'; for i in $(seq 100); do printf '\r%d%%' $i; done; touch printed; while [ ! -e go ]; do sleep 0.05; done; printf ' done'";
    let job = gimlet
        .call(
            "bash",
            json!({"command": command, "run_in_background": true}),
        )
        .await;
    let job = job.structured_content.unwrap()["job_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let printed = gimlet.root().join("printed");
    assert!(eventually(Duration::from_secs(10), || printed.exists()).await);
    let text = ok_text(&gimlet.call("bash_output", json!({"job_id": job})).await);
    assert!(text.starts_with("bold\n100%\n["), "{text:?}");
    std::fs::write(gimlet.root().join("go"), "").unwrap();
    let mut looks = Vec::new();
    for _ in 0..200 {
        let text = ok_text(&gimlet.call("bash_output", json!({"job_id": job})).await);
        let exited = text.contains("exited with code 0");
        looks.push(text);
        if exited {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        looks.last().unwrap().contains("exited with code 0"),
        "{looks:?}"
    );
    // Only what was added to the line shown before, once.
    let seen = looks.concat();
    assert_eq!(seen.matches(" done\n[").count(), 1, "{looks:?}");
    assert!(!seen.contains("100%"), "{looks:?}");
    gimlet.stop().await;
}

#[tokio::test]
async fn the_sandbox_confines_writes_and_the_network() {
    if !sandbox_works() {
        skip("this kernel cannot enforce the sandbox (Landlock and seccomp)");
        return;
    }
    let gimlet = Gimlet::start().await;
    let outside = crate::common::outside_tempdir();
    let target = outside.path().join("escaped.txt");
    let text = ok_text(
        &gimlet
            .call(
                "bash",
                json!({"command": format!("echo x > {}", target.display())}),
            )
            .await,
    );
    assert!(
        text.contains("Read-only file system") && text.contains("looks blocked by the sandbox"),
        "{text}"
    );
    assert!(!target.exists());
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let text = ok_text(
        &gimlet
            .call(
                "bash",
                json!({"command": format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected")}),
            )
            .await,
    );
    assert!(!text.contains("connected\n"), "{text}");
    assert!(text.contains("Operation not permitted"), "{text}");
    let text = ok_text(&gimlet.call("bash", json!({"command": "mkdir -p sub && echo inside > sub/file.txt && cat sub/file.txt"})).await);
    assert!(
        text.starts_with("inside\n") && text.contains("sandboxed]"),
        "{text}"
    );
    std::fs::create_dir_all(gimlet.root().join(".git")).unwrap();
    std::fs::write(gimlet.root().join(".git/config"), "[core]\n").unwrap();
    let text = ok_text(
        &gimlet
            .call(
                "bash",
                json!({"command": "echo evil >> .git/config; touch .mcp.json; mkdir -p .vscode"}),
            )
            .await,
    );
    assert_eq!(
        std::fs::read_to_string(gimlet.root().join(".git/config")).unwrap(),
        "[core]\n",
        "{text}"
    );
    assert!(
        !gimlet.root().join(".mcp.json").exists() && !gimlet.root().join(".vscode").exists(),
        "{text}"
    );
    assert!(text.contains(".mcp.json, a protected path"), "{text}");
    gimlet.stop().await;
}

#[tokio::test]
async fn a_blocked_command_runs_again_outside_the_sandbox_when_the_user_approves() {
    if !sandbox_works() {
        skip("this kernel cannot enforce the sandbox (Landlock and seccomp)");
        return;
    }
    let client = TestClient::answering(|request: &ElicitRequestParams| {
        let ElicitRequestParams::FormElicitationParams { message, .. } = request else {
            return ElicitResult::new(ElicitationAction::Decline);
        };
        assert!(message.contains("outside the sandbox"), "{message}");
        ElicitResult::new(ElicitationAction::Accept).with_content(json!({"decision": "allow_once"}))
    });
    let gimlet = Gimlet::start_with(client, &[]).await;
    let outside = crate::common::outside_tempdir();
    let target = outside.path().join("approved.txt");
    let text = ok_text(&gimlet.call("bash", json!({"command": format!("echo ok > {} && cat {}", target.display(), target.display())})).await);
    assert!(
        text.contains("ran again outside the sandbox") && text.contains("not sandboxed"),
        "{text}"
    );
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "ok\n");
    assert_eq!(gimlet.handler.elicitations.lock().unwrap().len(), 1);
    gimlet.stop().await;
}

#[tokio::test]
async fn a_silent_command_sends_a_heartbeat() {
    let gimlet = Gimlet::start().await;
    let result = gimlet.call("bash", json!({"command": "sleep 3"})).await;
    ok_text(&result);
    let progress = gimlet.handler.progress.lock().unwrap().clone();
    assert!(
        progress.len() >= 2,
        "{} progress notifications: {progress:?}",
        progress.len()
    );
    assert!(
        progress.iter().all(|p| p
            .message
            .as_deref()
            .is_some_and(|m| m.starts_with("running for "))),
        "{progress:?}"
    );
    // And the last line, once there is output.
    gimlet
        .call("bash", json!({"command": "echo compiling widget; sleep 2"}))
        .await;
    let progress = gimlet.handler.progress.lock().unwrap().clone();
    assert!(
        progress.iter().any(|p| p
            .message
            .as_deref()
            .is_some_and(|m| m.ends_with(": compiling widget"))),
        "{progress:?}"
    );
    gimlet.stop().await;
}

#[tokio::test]
async fn the_sandbox_stays_between_commands_starts_each_clean_and_follows_new_protected_files() {
    if !sandbox_works() {
        skip("this kernel cannot enforce the sandbox (Landlock and seccomp)");
        return;
    }
    let gimlet = Gimlet::start().await;
    let namespace = |text: &str| text.lines().next().unwrap_or_default().to_owned();
    let mark = marker();
    let first = ok_text(
        &gimlet
            .call(
                "bash",
                json!({"command": format!("readlink /proc/self/ns/pid; sleep {mark} &")}),
            )
            .await,
    );
    // The same sandbox (PID namespace) runs the next command, and nothing of the last one
    // is left in it.
    let second = ok_text(
        &gimlet
            .call(
                "bash",
                json!({"command": "readlink /proc/self/ns/pid; ps -e -o comm= | grep -cx sleep"}),
            )
            .await,
    );
    assert_eq!(namespace(&first), namespace(&second), "{first}\n{second}");
    assert!(second.lines().nth(1) == Some("0"), "{second}");
    assert!(processes_with(&mark).is_empty());
    // A protected file that appears between commands is protected from the next one on (a
    // new sandbox is made for it).
    std::fs::write(gimlet.root().join(".envrc"), "export A=1\n").unwrap();
    let third = ok_text(
        &gimlet
            .call(
                "bash",
                json!({"command": "readlink /proc/self/ns/pid; echo evil >> .envrc"}),
            )
            .await,
    );
    assert_ne!(namespace(&first), namespace(&third), "{third}");
    assert_eq!(
        std::fs::read_to_string(gimlet.root().join(".envrc")).unwrap(),
        "export A=1\n",
        "{third}"
    );
    gimlet.stop().await;
}

/// The `decision` a test client gives: `allow_session` to the mode's questions, `outside` to
/// the question about running a command again outside the sandbox.
fn answering_outside(outside: &'static str) -> TestClient {
    TestClient::answering(move |request: &ElicitRequestParams| {
        let ElicitRequestParams::FormElicitationParams { message, .. } = request else {
            return ElicitResult::new(ElicitationAction::Decline);
        };
        let decision = if message.contains("outside the sandbox") {
            outside
        } else {
            "allow_session"
        };
        ElicitResult::new(ElicitationAction::Accept).with_content(json!({"decision": decision}))
    })
}

#[tokio::test]
async fn allow_outside_the_sandbox_for_the_session_covers_the_next_such_command() {
    if !sandbox_works() {
        skip("this kernel cannot enforce the sandbox (Landlock and seccomp)");
        return;
    }
    let gimlet = Gimlet::start_with(answering_outside("allow_session"), &[]).await;
    let outside = crate::common::outside_tempdir();
    let first = outside.path().join("one");
    let text = ok_text(
        &gimlet
            .call(
                "bash",
                json!({"command": format!("mkdir -p {}", first.display())}),
            )
            .await,
    );
    assert!(
        text.contains("ran again outside the sandbox") && first.is_dir(),
        "{text}"
    );
    assert_eq!(gimlet.handler.elicitations.lock().unwrap().len(), 1);
    // `mkdir*` outside the sandbox is allowed for the session: no question, no sandboxed try.
    let second = outside.path().join("two");
    let result = gimlet
        .call(
            "bash",
            json!({"command": format!("mkdir -p {}", second.display())}),
        )
        .await;
    let text = ok_text(&result);
    assert!(
        text.contains("as the user allowed for this session") && second.is_dir(),
        "{text}"
    );
    assert_eq!(result.structured_content.unwrap()["sandboxed"], false);
    assert_eq!(gimlet.handler.elicitations.lock().unwrap().len(), 1);
    // Another command is judged afresh.
    let third = outside.path().join("three");
    ok_text(
        &gimlet
            .call(
                "bash",
                json!({"command": format!("touch {}", third.display())}),
            )
            .await,
    );
    assert_eq!(gimlet.handler.elicitations.lock().unwrap().len(), 2);
    gimlet.stop().await;
}

#[tokio::test]
async fn a_session_grant_to_run_without_asking_does_not_let_a_command_leave_the_sandbox() {
    if !sandbox_works() {
        skip("this kernel cannot enforce the sandbox (Landlock and seccomp)");
        return;
    }
    // Strict mode asks before every command; the user allows `touch*` for the session, and
    // declines running it outside the sandbox.
    let gimlet = Gimlet::start_with(answering_outside("deny"), &["--mode", "strict"]).await;
    let outside = crate::common::outside_tempdir();
    let target = outside.path().join("t");
    for round in 1..=2 {
        let text = ok_text(
            &gimlet
                .call(
                    "bash",
                    json!({"command": format!("touch {}", target.display())}),
                )
                .await,
        );
        assert!(
            text.contains("looks blocked by the sandbox") && !target.exists(),
            "{text}"
        );
        let asked = gimlet.handler.elicitations.lock().unwrap().len();
        // Round 1: the mode's question and the one about leaving the sandbox; round 2: only
        // the latter (the grant covers the first).
        assert_eq!(asked, if round == 1 { 2 } else { 3 });
    }
    gimlet.stop().await;
}

#[tokio::test]
async fn a_plugin_the_sandbox_stopped_is_run_again_outside_when_approved() {
    if !sandbox_works() {
        skip("this kernel cannot enforce the sandbox (Landlock and seccomp)");
        return;
    }
    let outside = crate::common::outside_tempdir();
    let target = outside.path().join("plugin.txt");
    let config = format!(
        "[[plugins]]\nname = \"outside\"\ndescription = \"writes outside\"\n\
         command = \"echo done > {}\"\n",
        target.display()
    );
    // Nobody to ask: the first result stays, saying why.
    let (gimlet, _dir) = Gimlet::start_with_config(TestClient::default(), &config, &[]).await;
    let text = err_text(&gimlet.call("outside", json!({})).await);
    assert!(
        text.contains("looks blocked by the sandbox") && !target.exists(),
        "{text}"
    );
    gimlet.stop().await;
    let (gimlet, _dir) =
        Gimlet::start_with_config(answering_outside("allow_once"), &config, &[]).await;
    let text = ok_text(&gimlet.call("outside", json!({})).await);
    assert!(text.contains("ran again outside the sandbox"), "{text}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "done\n");
    gimlet.stop().await;
}

/// Says on stderr why a test did not run.
fn skip(why: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "skipped: {why}");
}

/// A background job that plants a protected file (here `.mcp.json`, which did not exist) while
/// it runs: the next command of the session, started in the foreground or in the background,
/// first removes it and says so, so that its own protection scan does not take the planted
/// file for the user's.
#[tokio::test]
async fn the_next_command_undoes_what_a_running_job_planted() {
    if !sandbox_works() {
        skip("this kernel cannot enforce the sandbox (Landlock and seccomp)");
        return;
    }
    let gimlet = Gimlet::start().await;
    let planted = gimlet.root().join(".mcp.json");
    for background in [false, true] {
        let mark = marker();
        let plant = format!("echo '{{}}' > .mcp.json; exec sleep {mark}");
        ok_text(
            &gimlet
                .call("bash", json!({"command": plant, "run_in_background": true}))
                .await,
        );
        assert!(
            eventually(Duration::from_secs(5), || planted.exists()).await,
            "the job planted nothing"
        );
        let next = ok_text(
            &gimlet
                .call(
                    "bash",
                    json!({"command": "echo next", "run_in_background": background}),
                )
                .await,
        );
        assert!(!planted.exists(), "background {background}: {next}");
        assert!(
            next.contains(".mcp.json"),
            "background {background}: {next}"
        );
    }
    gimlet.stop().await;
}

#[tokio::test]
async fn output_at_and_over_the_limits_fits_them_with_its_footer() {
    // See: issue 38: `seq 1 2000` came to 2001 lines with the footer, and a host that keeps
    // the first 2000 lines of a result dropped the footer.
    let gimlet = Gimlet::start().await;
    // 1998 lines, the line break that joins the footer, and the footer: 2000 lines exactly.
    for n in [1998, 1999, 2000, 2001, 5000, 300_000] {
        let result = gimlet
            .call("bash", json!({"command": format!("seq 1 {n}")}))
            .await;
        assert_fits_default_limits(&result);
        let text = ok_text(&result);
        assert!(text.contains("[exit code 0 · "), "{n}: no footer");
        assert_eq!(text.contains("[Output truncated: "), n > 1998, "{n}");
        assert!(text.starts_with("1\n"), "{n}: the head is kept");
    }
    // Lines of 100 bytes: the byte limit (46080) comes first, at 460 lines with the footer.
    for n in [458, 459, 460, 461, 462, 5000] {
        let command = format!("yes {} | head -n {n}", "x".repeat(99));
        let result = gimlet.call("bash", json!({"command": command})).await;
        assert_fits_default_limits(&result);
        assert!(
            ok_text(&result).contains("[exit code 0 · "),
            "{n}: no footer"
        );
    }
    // A command that timed out: the marker, the cut output and the status line all fit.
    let result = gimlet
        .call(
            "bash",
            json!({"command": "seq 1 100000; sleep 5", "timeout_ms": 1000}),
        )
        .await;
    assert_fits_default_limits(&result);
    let text = err_text(&result);
    assert!(text.starts_with("Error (bash):\n1\n2\n"), "{text}");
    assert!(text.contains("[timed out after 1.0 s"), "{text}");
    gimlet.stop().await;
}

#[tokio::test]
async fn background_output_at_and_over_the_limits_fits_them_with_its_status() {
    let gimlet = Gimlet::start().await;
    for n in [1998, 1999, 2000, 2001, 50_000] {
        let started = gimlet
            .call(
                "bash",
                json!({"command": format!("seq 1 {n}"), "run_in_background": true}),
            )
            .await;
        let job = started.structured_content.unwrap()["job_id"]
            .as_str()
            .unwrap()
            .to_owned();
        let mut result = None;
        for _ in 0..100 {
            let report = gimlet.call("bash_output", json!({"job_id": job})).await;
            let done = ok_text(&report).contains("exited with code 0");
            if done {
                result = Some(report);
                break;
            }
            assert_fits_default_limits(&report);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let result = result.expect("the job ends");
        assert_fits_default_limits(&result);
        // Tail mode: the status line, last, is kept.
        let text = ok_text(&result);
        assert!(
            text.contains(&format!("[{job} exited with code 0")),
            "{n}: {}",
            &text[text.len().saturating_sub(300)..]
        );
    }
    gimlet.stop().await;
}
