//! A command's process tree on Linux and macOS: the shell in a process group of its own,
//! under a helper that has its own session; when the shell exits, or the control pipe (the
//! helper's stdin) closes because the call ended early or the server died, TERM goes to the
//! group, then KILL after a grace. On Linux the helper is also the child subreaper of
//! everything the command starts, so orphans that left the group (`setsid`, daemons) are
//! found (by their parent, in `/proc`) and stopped too; macOS has no subreaper, so a process
//! that leaves the group there escapes the cleanup.
//!
//! A stdio child (a language server) reads the helper's stdin itself, so no control pipe tells
//! the helper that gimlet is gone: a server that does not exit when its stdin closes would
//! outlive a gimlet killed with SIGKILL, with everything it started. For it the helper watches
//! its own parent instead: when gimlet dies the helper is reparented (its parent id changes),
//! and the tree goes as above.

#![expect(
    clippy::disallowed_methods,
    reason = "the helper is synchronous and may sleep"
)]

use std::io::BufRead;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, WaitOptions};

use super::helper::{LEFTOVER_GRACE, eprintln_quiet, exit_code};
use super::{HelperPlan, KILL_GRACE_MS, shell_invocation};

/// How often the helper of a stdio child looks whether gimlet, its parent, is still there.
const PARENT_CHECK: Duration = Duration::from_millis(200);

/// Runs the plan's shell as this process's child, with this process as the child subreaper
/// of everything it starts (Linux).
pub(super) fn run_tree(plan: &HelperPlan) -> i32 {
    let mut command = Command::new(&plan.shell);
    command.args(shell_invocation(&plan.shell, &plan.command));
    run_command(plan, command)
}

/// Runs `command` (the shell, or a wrapper around it) as the root of the plan's process tree.
pub(super) fn run_command(plan: &HelperPlan, mut command: Command) -> i32 {
    let _ = rustix::process::setsid();
    #[cfg(target_os = "linux")]
    let _ = rustix::process::set_child_subreaper(Some(rustix::process::getpid()));
    command.current_dir(&plan.workdir).stdin(if plan.stdio {
        Stdio::inherit()
    } else {
        Stdio::null()
    });
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
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
    let group = Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
    // The control pipe: it closes when the call ends early (timeout, cancel, kill) or the
    // server dies. Then the whole tree goes. A stdio command reads that pipe itself.
    if let Some(group) = group.filter(|_| !plan.stdio) {
        std::thread::spawn(move || {
            let stdin = std::io::stdin();
            for line in stdin.lock().lines() {
                if line.is_err() {
                    break;
                }
            }
            terminate(group, Duration::from_millis(KILL_GRACE_MS));
        });
    }
    if let Some(group) = group.filter(|_| plan.stdio) {
        std::thread::spawn(move || {
            let parent = rustix::process::getppid();
            while rustix::process::getppid() == parent {
                std::thread::sleep(PARENT_CHECK);
            }
            terminate(group, Duration::from_millis(KILL_GRACE_MS));
        });
    }
    let status = child.wait();
    // Leftovers (`sleep 100 &`, daemons) go with the command.
    if let Some(group) = group {
        terminate(group, LEFTOVER_GRACE);
    }
    reap_all();
    match status {
        Ok(status) => exit_code(
            status.code(),
            std::os::unix::process::ExitStatusExt::signal(&status),
        ),
        Err(_) => 1,
    }
}

/// TERM to the group and every orphan, a grace, then KILL.
fn terminate(group: Pid, grace: Duration) {
    signal_all(group, Signal::TERM);
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if !alive(group) && children().is_empty() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    signal_all(group, Signal::KILL);
}

fn signal_all(group: Pid, signal: Signal) {
    let _ = rustix::process::kill_process_group(group, signal);
    for pid in children() {
        let _ = rustix::process::kill_process_group(pid, signal);
        let _ = rustix::process::kill_process(pid, signal);
    }
}

fn alive(group: Pid) -> bool {
    rustix::process::test_kill_process_group(group).is_ok()
}

/// Processes whose parent is this helper: the shell, and orphans reparented to the subreaper.
fn children() -> Vec<Pid> {
    let me = rustix::process::getpid().as_raw_nonzero().get();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()))
        .filter(|pid| parent_of(*pid) == Some(me))
        .filter_map(Pid::from_raw)
        .collect()
}

fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid ...`; comm may contain spaces and parentheses.
    let after = &stat[stat.rfind(')')? + 2..];
    after.split_whitespace().nth(1)?.parse().ok()
}

/// Reaps every child, killing what is still there, until none are left.
fn reap_all() {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match rustix::process::wait(WaitOptions::NOHANG) {
            Ok(Some(_)) => {}
            Err(_) => return,
            Ok(None) => {
                if Instant::now() > deadline {
                    return;
                }
                for pid in children() {
                    let _ = rustix::process::kill_process(pid, Signal::KILL);
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}
