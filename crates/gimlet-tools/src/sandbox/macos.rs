//! The macOS sandbox of the helper: Seatbelt, through `/usr/bin/sandbox-exec` with the
//! profile of `seatbelt.rs` (as Codex and Claude Code's sandbox runtime do). Only the one in
//! `/usr/bin` is used: one found on `PATH` could be anyone's.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::seatbelt::profile;
use super::tree_unix::{run_command, run_tree};
use super::{HelperPlan, SandboxPlan, Support, shell_invocation};

/// The system's `sandbox-exec`.
const SANDBOX_EXEC: &str = "/usr/bin/sandbox-exec";

/// Runs one command: under `sandbox-exec` when the plan has a sandbox, else as it is.
pub(super) fn run(plan: &HelperPlan) -> i32 {
    let Some(sandbox) = &plan.sandbox else {
        return run_tree(plan);
    };
    let profile = profile(&resolved(sandbox));
    let mut command = Command::new(SANDBOX_EXEC);
    command.arg("-p").arg(&profile.text);
    for (name, path) in &profile.params {
        let mut define = std::ffi::OsString::from(format!("{name}="));
        define.push(path);
        command.arg("-D").arg(define);
    }
    command
        .arg(&plan.shell)
        .args(shell_invocation(&plan.shell, &plan.command));
    run_command(plan, command)
}

/// The plan's paths as Seatbelt sees them: resolved (`/var` is `/private/var`, and a
/// protected path that does not exist yet is resolved through its parent).
fn resolved(plan: &SandboxPlan) -> SandboxPlan {
    let real = |paths: &[PathBuf]| paths.iter().map(|p| real_path(p)).collect();
    SandboxPlan {
        writable: real(&plan.writable),
        read_only: real(&plan.read_only),
        pinned: real(&plan.pinned),
        unix_sockets: real(&plan.unix_sockets),
        ..plan.clone()
    }
}

fn real_path(path: &Path) -> PathBuf {
    if let Ok(real) = std::fs::canonicalize(path) {
        return real;
    }
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => real_path(parent).join(name),
        _ => path.to_owned(),
    }
}

/// Whether Seatbelt works here: `sandbox-exec` runs a program under a permissive profile,
/// and refuses a write under a profile that denies it.
pub(super) fn probe() -> Support {
    let scratch = std::env::temp_dir().join(format!("gimlet-probe-{}", std::process::id()));
    let touch = |profile: &str| {
        let mut define = std::ffi::OsString::from("SCRATCH=");
        define.push(real_path(&std::env::temp_dir()));
        let ran = Command::new(SANDBOX_EXEC)
            .arg("-p")
            .arg(profile)
            .arg("-D")
            .arg(define)
            .arg("/usr/bin/touch")
            .arg(&scratch)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        let made = scratch.exists();
        let _ = std::fs::remove_file(&scratch);
        ran && made
    };
    let runs = touch("(version 1)(allow default)");
    let refuses =
        !touch("(version 1)(allow default)(deny file-write* (subpath (param \"SCRATCH\")))");
    Support {
        seatbelt: runs && refuses,
        ..Support::default()
    }
}
