//! The init of a command's PID namespace: PID 1, started by the helper after it entered the
//! namespaces (`gimlet __exec --init PLAN`).
//!
//! It mounts a fresh `/proc` (the command sees its own processes only: nothing of the server
//! or anything else), confines itself (seccomp, Landlock, no capabilities), runs the shell,
//! and leaves nothing behind: every process of the namespace is the command's, so once the
//! shell exits everything else left is a leftover, signalled with one `kill(-1)` (which, from
//! a namespace's init, reaches every process of the namespace but the init). When the init
//! exits, the kernel kills whatever might still be there.

use std::os::fd::AsFd;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags};
use rustix::io::Errno;
use rustix::process::{Pid, Signal, WaitOptions, WaitStatus};

use super::helper::{LEFTOVER_GRACE, SANDBOX_FAILED, eprintln_quiet, exit_code};
use super::{HelperPlan, KILL_GRACE_MS, confine};

/// Mounts a fresh, read-only `/proc` for this PID namespace.
pub(super) fn mount_proc() -> Result<(), String> {
    use rustix::mount::MountFlags;
    rustix::mount::mount(
        "proc",
        "/proc",
        "proc",
        MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC | MountFlags::RDONLY,
        None,
    )
    .map_err(|e| format!("mounting /proc: {e}"))
}

/// The init's `main`: the shell's exit code, or 128 + the signal that ended it.
pub(super) fn main(plan: &HelperPlan) -> i32 {
    let Some(sandbox) = &plan.sandbox else {
        eprintln_quiet("gimlet helper: the init needs a sandbox plan");
        return 2;
    };
    if let Err(err) = mount_proc().and_then(|()| confine::confine(sandbox).map(|_| ())) {
        eprintln_quiet(&format!("gimlet: the sandbox could not be enforced: {err}"));
        return SANDBOX_FAILED;
    }
    let mut command = Command::new(&plan.shell);
    command
        .arg("-c")
        .arg(&plan.command)
        .current_dir(&plan.workdir)
        .stdin(Stdio::null());
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let shell = match command.spawn() {
        Ok(child) => child,
        Err(err) => {
            eprintln_quiet(&format!(
                "gimlet: cannot start {}: {err}",
                plan.shell.display()
            ));
            return 127;
        }
    };
    let Some(shell) = Pid::from_raw(i32::try_from(shell.id()).unwrap_or(i32::MAX)) else {
        return 1;
    };
    supervise(shell)
}

/// Waits for the shell, or for the control pipe (stdin) to close; then clears the namespace.
fn supervise(shell: Pid) -> i32 {
    let control = std::io::stdin();
    let exited = rustix::process::pidfd_open(shell, rustix::process::PidfdFlags::empty()).ok();
    let mut status = None;
    let mut buf = [0u8; 64];
    loop {
        let mut fds = vec![PollFd::new(&control, PollFlags::IN)];
        if let Some(pidfd) = &exited {
            fds.push(PollFd::from_borrowed_fd(pidfd.as_fd(), PollFlags::IN));
        }
        // Without a pidfd (an old kernel), look for the shell's exit every 20 ms.
        let timeout = exited.is_none().then_some(rustix::event::Timespec {
            tv_sec: 0,
            tv_nsec: 20_000_000,
        });
        match rustix::event::poll(&mut fds, timeout.as_ref()) {
            Ok(_) | Err(Errno::INTR) => {}
            Err(_) => break,
        }
        let control_ready = !fds[0].revents().is_empty();
        drop(fds);
        if let Some(code) = reap(shell, WaitOptions::NOHANG) {
            status = Some(code);
            break;
        }
        if control_ready {
            // Anything but end-of-file is ignored; end-of-file means stop.
            match rustix::io::read(&control, &mut buf) {
                Ok(0) => break,
                Ok(_) | Err(Errno::INTR | Errno::AGAIN) => {}
                Err(_) => break,
            }
        }
    }
    let grace = if status.is_some() {
        // Leftovers (`sleep 100 &`, daemons) go with the command.
        LEFTOVER_GRACE
    } else {
        Duration::from_millis(KILL_GRACE_MS)
    };
    let left = clear_namespace(shell, grace);
    status.or(left).unwrap_or(1)
}

/// Reaps the shell if it has exited; its exit code.
fn reap(shell: Pid, options: WaitOptions) -> Option<i32> {
    match rustix::process::waitpid(Some(shell), options) {
        Ok(Some((_, status))) => Some(code_of(status)),
        _ => None,
    }
}

fn code_of(status: WaitStatus) -> i32 {
    exit_code(status.exit_status(), status.terminating_signal())
}

/// TERM to every process of the namespace, a grace, KILL, and every one reaped. The shell's
/// code, if it was among them.
fn clear_namespace(shell: Pid, grace: Duration) -> Option<i32> {
    let mut shell_code = None;
    let mut record = |pid: Pid, status: WaitStatus| {
        if pid == shell {
            shell_code = Some(code_of(status));
        }
    };
    // Nothing left: no signal at all.
    match rustix::process::waitpid(None, WaitOptions::NOHANG) {
        Err(_) => return shell_code,
        Ok(Some((pid, status))) => record(pid, status),
        Ok(None) => {}
    }
    let all = Pid::INIT;
    let _ = rustix::process::kill_process_group(all, Signal::TERM);
    let deadline = Instant::now() + grace;
    loop {
        match rustix::process::waitpid(None, WaitOptions::NOHANG) {
            Ok(Some((pid, status))) => record(pid, status),
            Err(_) => return shell_code,
            Ok(None) if Instant::now() >= deadline => break,
            #[expect(
                clippy::disallowed_methods,
                reason = "the init is synchronous and may sleep"
            )]
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
        }
    }
    let _ = rustix::process::kill_process_group(all, Signal::KILL);
    while let Ok(Some((pid, status))) = rustix::process::waitpid(None, WaitOptions::empty()) {
        record(pid, status);
    }
    shell_code
}
