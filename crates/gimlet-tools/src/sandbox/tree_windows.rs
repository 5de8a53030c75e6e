//! A command's process tree on Windows: the helper puts itself in a new Job Object that kills
//! every process in it when its last handle closes (`JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE`),
//! then starts the shell, which inherits the job, as does everything it starts. When the shell
//! exits, or the control pipe (the helper's stdin) closes because the call ended early or the
//! server died, the helper exits: the handle closes with it and the system kills every process
//! left in the job, at once (Windows has no TERM to send first). A process cannot leave the
//! job: breakaway is not allowed.

use std::io::Read;
use std::os::windows::process::CommandExt as _;
use std::process::{Command, Stdio};

use super::helper::eprintln_quiet;
use super::{HelperPlan, shell_invocation};

/// Runs the plan's shell as the root of a Job Object that dies with this helper.
pub(super) fn run_tree(plan: &HelperPlan) -> i32 {
    match job() {
        // The handle must stay open for as long as the helper lives: closing it would kill
        // the job, the helper included. The system closes it when the helper exits.
        Ok(job) => std::mem::forget(job),
        Err(err) => eprintln_quiet(&format!(
            "gimlet: no job object for the command ({err}); processes it leaves behind may outlive it"
        )),
    }
    let mut command = Command::new(&plan.shell);
    let is_cmd = plan
        .shell
        .file_stem()
        .is_some_and(|stem| stem.eq_ignore_ascii_case("cmd"));
    if is_cmd {
        // std quotes an argument that holds `"` as `\"`, which `cmd` does not read: it would
        // run `echo \"hi\"`. `/s /c "LINE"` makes `cmd` drop the outer quotes and run LINE
        // as written, so the line goes in raw.
        command
            .args(["/d", "/s", "/c"])
            .raw_arg(format!("\"{}\"", plan.command));
    } else {
        command.args(shell_invocation(&plan.shell, &plan.command));
    }
    command.current_dir(&plan.workdir).stdin(if plan.stdio {
        Stdio::inherit()
    } else {
        Stdio::null()
    });
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(err) => {
            eprintln_quiet(&format!(
                "gimlet: cannot start {}: {err}",
                plan.shell.display()
            ));
            return 127;
        }
    };
    if !plan.stdio {
        std::thread::spawn(|| {
            let mut sink = [0u8; 64];
            let mut stdin = std::io::stdin();
            while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
            // The call ended early or the server is gone: everything goes.
            std::process::exit(1);
        });
    }
    match child.wait() {
        Ok(status) => status.code().unwrap_or(1),
        Err(_) => 1,
    }
}

/// Puts this process (the server) in a job that kills its processes when the server ends
/// (see `end_children_with_this_process`).
pub(super) fn join_kill_on_close_job() -> std::io::Result<()> {
    let job = job().map_err(|err| std::io::Error::other(err.to_string()))?;
    // Held until the process ends, when the system closes it and the job kills what is left.
    std::mem::forget(job);
    Ok(())
}

/// A new job that kills its processes when closed, with this process in it.
fn job() -> Result<win32job::Job, win32job::JobError> {
    let mut limits = win32job::ExtendedLimitInfo::new();
    limits.limit_kill_on_job_close();
    let job = win32job::Job::create_with_limit_info(&limits)?;
    job.assign_current_process()?;
    Ok(job)
}
