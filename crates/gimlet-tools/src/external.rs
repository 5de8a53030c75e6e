//! Running a user-declared command (a hook): JSON on its stdin, its stdout and stderr kept
//! apart and bounded, a timeout that stops it and everything it started.
//!
//! Hooks are the user's own programs, declared in their own config file (never a project's),
//! so they run unsandboxed, like Claude Code's hooks, in a process group of their own with a
//! non-interactive environment. On Windows they run in the shell `bash` would use (Git
//! Bash, else PowerShell) and only the hook's own process is stopped on timeout: there is no
//! process group to signal.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

use crate::process::{NON_INTERACTIVE, code_of};

/// At most this much of each stream is kept.
const KEEP: usize = 1024 * 1024;
/// After the command exits, how long its output may still take to arrive.
const DRAIN: Duration = Duration::from_millis(250);

/// How an external command ended.
#[derive(Debug)]
pub(crate) struct Finished {
    /// Its exit code (128 + the signal when a signal ended it); `None` when it was stopped.
    pub(crate) code: Option<i32>,
    /// Its standard output (the first [`KEEP`] bytes).
    pub(crate) stdout: String,
    /// Its standard error (the first [`KEEP`] bytes).
    pub(crate) stderr: String,
    /// It ran out of time and was stopped.
    pub(crate) timed_out: bool,
}

/// Runs `sh -c command` in `workdir` with `input` on stdin, until it exits, `timeout` passes or
/// `cancel` fires (then its whole process group is killed).
pub(crate) async fn run(
    command_line: &str,
    input: Vec<u8>,
    workdir: &Path,
    timeout: Duration,
    cancel: &CancellationToken,
) -> std::io::Result<Finished> {
    #[cfg(unix)]
    let mut command = {
        let mut command = tokio::process::Command::new("/bin/sh");
        command.arg("-c").arg(command_line).process_group(0);
        command
    };
    #[cfg(windows)]
    let mut command = {
        let shell = crate::process::shell(&crate::config::BashSettings::default());
        let mut command = tokio::process::Command::new(&shell);
        command.args(crate::sandbox::shell_invocation(&shell, command_line));
        command
    };
    let mut child = command
        .current_dir(workdir)
        .envs(NON_INTERACTIVE.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    #[cfg(unix)]
    let group = child
        .id()
        .and_then(|id| rustix::process::Pid::from_raw(id.cast_signed()));
    // A command that does not read its input must not block us: write in the background.
    if let Some(mut stdin) = child.stdin.take() {
        tokio::spawn(async move {
            let _ = stdin.write_all(&input).await;
        });
    }
    let stdout = tokio::spawn(keep(child.stdout.take()));
    let stderr = tokio::spawn(keep(child.stderr.take()));
    let kill_group = || {
        #[cfg(unix)]
        if let Some(group) = group {
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        }
    };
    let (code, timed_out) = tokio::select! {
        status = child.wait() => (Some(code_of(status.ok())), false),
        () = tokio::time::sleep(timeout) => (None, true),
        () = cancel.cancelled() => (None, false),
    };
    if code.is_none() {
        kill_group();
        let _ = child.wait().await;
    }
    // Whatever it left running (`sleep 100 &`) may hold the pipes open: wait a little, then
    // stop the group.
    let collect = async { (stdout.await, stderr.await) };
    let (stdout, stderr) = match tokio::time::timeout(DRAIN, collect).await {
        Ok((out, err)) => (out.unwrap_or_default(), err.unwrap_or_default()),
        Err(_) => {
            kill_group();
            (String::new(), String::new())
        }
    };
    kill_group();
    Ok(Finished {
        code,
        stdout,
        stderr,
        timed_out,
    })
}

/// Reads a stream to its end, keeping the first [`KEEP`] bytes.
async fn keep(stream: Option<impl AsyncRead + Unpin>) -> String {
    let Some(mut stream) = stream else {
        return String::new();
    };
    let mut kept = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = KEEP.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
    String::from_utf8_lossy(&kept).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn input_goes_in_and_the_streams_come_out_apart() {
        let dir = tempfile::tempdir().unwrap();
        let done = run(
            "cat; echo oops >&2; exit 3",
            b"hello".to_vec(),
            dir.path(),
            Duration::from_secs(10),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
        assert_eq!(done.code, Some(3));
        assert_eq!(done.stdout, "hello");
        assert_eq!(done.stderr, "oops\n");
        assert!(!done.timed_out);
    }

    #[tokio::test]
    async fn a_command_that_hangs_is_stopped_with_what_it_started() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("survived");
        let command = format!("(sleep 2; touch '{}') & sleep 100", marker.display());
        let started = std::time::Instant::now();
        let done = run(
            &command,
            Vec::new(),
            dir.path(),
            Duration::from_millis(300),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
        assert!(done.timed_out);
        assert_eq!(done.code, None);
        assert!(started.elapsed() < Duration::from_secs(5));
        tokio::time::sleep(Duration::from_millis(2500)).await;
        assert!(
            !marker.exists(),
            "the background child was killed with the group"
        );
    }
}
