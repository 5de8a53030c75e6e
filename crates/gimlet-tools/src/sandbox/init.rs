//! The init of a sandbox's PID namespace: PID 1, started by the helper after it entered the
//! namespaces (`gimlet __exec --init PLAN`).
//!
//! It mounts a fresh `/proc` (commands see their own processes only: nothing of the server or
//! anything else), confines itself once (seccomp, Landlock, no capabilities; every command
//! inherits it), then runs the commands the server sends on its control socket, one at a
//! time ([`super::protocol`]), and leaves nothing behind: while a command runs, every other
//! process of the namespace is the command's, so once the shell exits everything left is a
//! leftover, signalled with one `kill(-1)` (which, from a namespace's init, reaches every
//! process of the namespace but the init). When the socket closes it clears the namespace
//! and exits; the kernel kills whatever might still be there.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags};
use rustix::io::Errno;
use rustix::process::{Pid, Signal, WaitOptions, WaitStatus};

use super::helper::{LEFTOVER_GRACE, SANDBOX_FAILED, eprintln_quiet, exit_code};
use super::protocol::{FrameReader, Message, Reply, Request, send_blocking};
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

/// The init's `main`: confines itself once, then runs the commands that come on the control
/// socket (its stdin), one at a time, until the socket closes. Returns the exit code.
pub(super) fn main(plan: &HelperPlan) -> i32 {
    let Some(sandbox) = &plan.sandbox else {
        eprintln_quiet("gimlet helper: the init needs a sandbox plan");
        return 2;
    };
    if let Err(err) = mount_proc().and_then(|()| confine::confine(sandbox).map(|_| ())) {
        eprintln_quiet(&format!("gimlet: the sandbox could not be enforced: {err}"));
        return SANDBOX_FAILED;
    }
    let control = std::io::stdin();
    let socket = control.as_fd();
    let mut reader = FrameReader::default();
    while let Some((body, fds)) = reader.next(socket) {
        // A `Stop` that came after its command ended has nothing left to stop.
        let Ok(Message::Run(request)) = serde_json::from_slice::<Message>(&body) else {
            continue;
        };
        let Some(code) = run(&request, fds.into_iter().next(), socket, &mut reader) else {
            // The server is gone: so is everything.
            return 0;
        };
        let reply = serde_json::to_vec(&Reply { code }).unwrap_or_default();
        if send_blocking(socket, &reply, None).is_err() {
            return 0;
        }
    }
    clear_namespace(None, Duration::from_millis(KILL_GRACE_MS));
    0
}

/// Runs one command with its output to `output`, and clears the namespace after it. The
/// shell's code; `None` when the control socket closed meanwhile.
fn run(
    request: &Request,
    output: Option<OwnedFd>,
    socket: BorrowedFd<'_>,
    reader: &mut FrameReader,
) -> Option<i32> {
    let stdio = |output: &Option<OwnedFd>| {
        output
            .as_ref()
            .and_then(|fd| fd.try_clone().ok())
            .map_or_else(Stdio::null, Stdio::from)
    };
    let (stdout, stderr) = (stdio(&output), stdio(&output));
    let mut command = Command::new(&request.shell);
    command
        .arg("-c")
        .arg(&request.command)
        .current_dir(&request.workdir)
        .env_clear()
        .envs(request.env_pairs())
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr);
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let spawned = command.spawn();
    drop(command);
    let shell = match spawned {
        Ok(child) => child,
        Err(err) => {
            if let Some(output) = &output {
                let message = format!("gimlet: cannot start {}: {err}\n", request.shell.display());
                let _ = rustix::io::write(output, message.as_bytes());
            }
            return Some(127);
        }
    };
    // Only the command holds the output now: the server sees its end when the command ends.
    drop(output);
    let shell = Pid::from_raw(i32::try_from(shell.id()).unwrap_or(i32::MAX))?;
    let (status, control) = supervise(shell, socket, reader);
    let grace = match (status, control) {
        // Leftovers (`sleep 100 &`, daemons) go with the command.
        (Some(_), None) => LEFTOVER_GRACE,
        _ => Duration::from_millis(KILL_GRACE_MS),
    };
    let left = clear_namespace(Some(shell), grace);
    if control == Some(Control::Closed) {
        return None;
    }
    Some(status.or(left).unwrap_or(1))
}

/// What came on the control socket while a command ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Control {
    /// `Stop`.
    Stop,
    /// End-of-file: the server closed the socket (or died).
    Closed,
}

/// Waits for the shell to exit, or for a word on the control socket.
fn supervise(
    shell: Pid,
    socket: BorrowedFd<'_>,
    reader: &mut FrameReader,
) -> (Option<i32>, Option<Control>) {
    let exited = rustix::process::pidfd_open(shell, rustix::process::PidfdFlags::empty()).ok();
    loop {
        let mut fds = vec![PollFd::from_borrowed_fd(socket, PollFlags::IN)];
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
            Err(_) => return (None, Some(Control::Closed)),
        }
        let control_ready = !fds[0].revents().is_empty();
        drop(fds);
        if let Some(code) = reap(shell, WaitOptions::NOHANG) {
            return (Some(code), None);
        }
        if control_ready {
            match reader.read_some(socket) {
                Some(true) if reader.ready() => return (None, Some(Control::Stop)),
                Some(true) => {}
                Some(false) | None => return (None, Some(Control::Closed)),
            }
        }
    }
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
fn clear_namespace(shell: Option<Pid>, grace: Duration) -> Option<i32> {
    let mut shell_code = None;
    let mut record = |pid: Pid, status: WaitStatus| {
        if Some(pid) == shell {
            shell_code = Some(code_of(status));
        }
    };
    // Nothing left: no signal at all.
    match rustix::process::wait(WaitOptions::NOHANG) {
        Err(_) => return shell_code,
        Ok(Some((pid, status))) => record(pid, status),
        Ok(None) => {}
    }
    let all = Pid::INIT;
    let _ = rustix::process::kill_process_group(all, Signal::TERM);
    let deadline = Instant::now() + grace;
    loop {
        match rustix::process::wait(WaitOptions::NOHANG) {
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
    while let Ok(Some((pid, status))) = rustix::process::wait(WaitOptions::empty()) {
        record(pid, status);
    }
    shell_code
}
