//! Without the system's randomness the server refuses to start: its keys (the 2026-07-28 state
//! seal, a generated HTTP token) would otherwise be zeros anyone can guess.
//!
//! The server runs under a seccomp filter that fails `getrandom(2)` with `ENOSYS`, as an old
//! kernel or a container's filter would. The filter is installed on a thread of its own that
//! then spawns the server, which inherits it; the test process keeps its randomness.

#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a set-up failure fails the test loudly"
)]

use std::collections::BTreeMap;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common;

/// `getrandom`'s system call number.
#[cfg(target_arch = "x86_64")]
const SYS_GETRANDOM: i64 = 318;
#[cfg(target_arch = "aarch64")]
const SYS_GETRANDOM: i64 = 278;

/// Runs `gimlet args...` with `getrandom` failing, stdin closed, and returns what it did; a
/// server still running after 30 s (it started: the HTTP one would serve for ever) is killed.
fn without_randomness(args: &[&str]) -> Output {
    let data = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let mut command = Command::new(common::binary());
    command
        .args(args)
        .arg("--root")
        .arg(root.path())
        .env("XDG_DATA_HOME", data.path())
        .env("XDG_CONFIG_HOME", data.path())
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    std::thread::spawn(move || {
        let filter = seccompiler::SeccompFilter::new(
            BTreeMap::from([(SYS_GETRANDOM, Vec::new())]),
            seccompiler::SeccompAction::Allow,
            seccompiler::SeccompAction::Errno(38), // ENOSYS
            std::env::consts::ARCH.try_into().unwrap(),
        )
        .unwrap();
        let program: seccompiler::BpfProgram = filter.try_into().unwrap();
        // This thread only: the filter holds for it and for what it spawns.
        seccompiler::apply_filter(&program).unwrap();
        let mut child = command.spawn().expect("gimlet runs");
        let deadline = Instant::now() + Duration::from_secs(30);
        while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
            #[expect(
                clippy::disallowed_methods,
                reason = "a plain thread of this test, not a runtime worker"
            )]
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        child.wait_with_output().unwrap()
    })
    .join()
    .unwrap()
}

#[test]
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn the_server_does_not_start_without_randomness() {
    let output = without_randomness(&["serve"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "started: {stderr}");
    assert!(
        stderr.contains("no system randomness for the server's keys"),
        "{stderr}"
    );
    // Nothing but protocol on stdout, and no answer came.
    assert!(output.stdout.is_empty(), "{:?}", output.stdout);
}

#[test]
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn no_generated_token_without_randomness() {
    let output =
        without_randomness(&["serve", "--http", "127.0.0.1:0", "--auth-token", "generate"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "started: {stderr}");
    assert!(stderr.contains("--auth-token generate"), "{stderr}");
    // No token was printed: not a zero one, not any.
    assert!(output.stdout.is_empty(), "{:?}", output.stdout);
}
