//! The helper program: sandboxes itself, runs the shell, and leaves no process behind.
//!
//! A small synchronous program (no async runtime): it blocks on purpose. Its roles, by the
//! first argument after [`super::HELPER_ARG`]:
//! - `PLAN` (JSON): run one command, sandboxed as the plan says, as the root of its process
//!   tree; the tree goes when the command ends or the control pipe (stdin) closes.
//! - `--probe`: find what this system enforces, by trying it (the answer is [`Support`]).
//! - Linux only: `--serve PLAN`, a session's sandbox that stays (`pool.rs`); `--init PLAN`,
//!   its PID namespace's init (`init.rs`); `--probe-init`, the probe's part inside the PID
//!   namespace.
//!
//! What each system does is in its own file: `linux.rs` (namespaces, Landlock, seccomp),
//! `macos.rs` (Seatbelt), `windows.rs` (no sandbox); the process tree in `tree_unix.rs` and
//! `tree_windows.rs`.

#![expect(clippy::print_stdout, reason = "the probe reports on stdout")]

use std::ffi::OsString;
use std::time::Duration;

use super::HelperPlan;
#[cfg(target_os = "linux")]
use super::linux as system;
#[cfg(target_os = "macos")]
use super::macos as system;
#[cfg(windows)]
use super::windows as system;

/// Exit code when the sandbox the server asked for could not be put in place.
pub const SANDBOX_FAILED: i32 = 125;
/// How long leftovers get between TERM and KILL once the shell has exited.
#[cfg_attr(windows, expect(dead_code, reason = "a job object ends at once"))]
pub(super) const LEFTOVER_GRACE: Duration = Duration::from_millis(200);

/// The helper's `main`: `args` are the arguments after [`super::HELPER_ARG`]. Returns the exit
/// code: the shell's, or 128 + the signal that ended it.
pub fn helper_main(args: &[OsString]) -> i32 {
    let plan = |json: Option<&OsString>| {
        let json = json.and_then(|a| a.to_str()).unwrap_or_default();
        serde_json::from_str::<HelperPlan>(json).map_err(|err| {
            eprintln_quiet(&format!("gimlet helper: bad plan: {err}"));
            2
        })
    };
    match args.first().and_then(|a| a.to_str()) {
        Some("--probe") => {
            println!(
                "{}",
                serde_json::to_string(&system::probe()).unwrap_or_default()
            );
            0
        }
        #[cfg(target_os = "linux")]
        Some("--probe-init") => {
            println!(
                "{}",
                serde_json::to_string(&system::probe_init()).unwrap_or_default()
            );
            0
        }
        #[cfg(target_os = "linux")]
        Some("--init") => match plan(args.get(1)) {
            Ok(plan) => super::init::main(&plan),
            Err(code) => code,
        },
        #[cfg(target_os = "linux")]
        Some("--serve") => match plan(args.get(1)) {
            Ok(plan) => system::serve(&plan),
            Err(code) => code,
        },
        Some(_) => match plan(args.first()) {
            Ok(plan) => system::run(&plan),
            Err(code) => code,
        },
        None => {
            eprintln_quiet("gimlet helper: no plan given");
            2
        }
    }
}

/// Writes to stderr (the command's output) without panicking on a closed pipe.
pub(super) fn eprintln_quiet(message: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{message}");
}

/// The exit code as shells report it: the code, or 128 + the signal.
#[cfg(unix)]
pub(super) fn exit_code(code: Option<i32>, signal: Option<i32>) -> i32 {
    code.unwrap_or_else(|| 128 + signal.unwrap_or(0))
}
