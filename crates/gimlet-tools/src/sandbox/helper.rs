//! The helper program: sandboxes itself, runs the shell, and leaves no process behind.
//!
//! A small synchronous program (no async runtime): it blocks on purpose. Its roles, by the
//! first argument after [`super::HELPER_ARG`]:
//! - `--serve PLAN` (JSON): a session's sandbox (`pool.rs`): enter the namespaces, build the
//!   file-system view (`mounts.rs`), start the init (`init.rs`), which runs commands sent on
//!   the control socket, and wait for it.
//! - `--init PLAN`: the PID namespace's init (`init.rs`).
//! - `PLAN`: run one command. Unsandboxed: as its child subreaper. Sandboxed where there is no
//!   PID namespace: enter a mount namespace, build the view, confine itself, and the same.
//! - `--probe`: find what the kernel enforces, by trying it (the answer is [`Support`]);
//!   `--probe-init` is its part inside the PID namespace.

#![expect(
    clippy::disallowed_methods,
    reason = "the helper is synchronous and may sleep"
)]
#![expect(clippy::print_stdout, reason = "the probe reports on stdout")]

use std::ffi::OsString;
use std::io::BufRead;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, WaitOptions};
use rustix::thread::CapabilitySet;

use super::{Enforcement, HelperPlan, KILL_GRACE_MS, SandboxPlan, Support, confine, init, mounts};

/// Exit code when the sandbox the server asked for could not be put in place.
pub const SANDBOX_FAILED: i32 = 125;
/// How long leftovers get between TERM and KILL once the shell has exited.
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
            println!("{}", serde_json::to_string(&probe()).unwrap_or_default());
            0
        }
        Some("--probe-init") => {
            println!(
                "{}",
                serde_json::to_string(&probe_init()).unwrap_or_default()
            );
            0
        }
        Some("--init") => match plan(args.get(1)) {
            Ok(plan) => init::main(&plan),
            Err(code) => code,
        },
        Some("--serve") => match plan(args.get(1)) {
            Ok(plan) => serve(&plan),
            Err(code) => code,
        },
        Some(_) => match plan(args.first()) {
            Ok(plan) => run(&plan),
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
pub(super) fn exit_code(code: Option<i32>, signal: Option<i32>) -> i32 {
    code.unwrap_or_else(|| 128 + signal.unwrap_or(0))
}

/// One command, run by this helper: unsandboxed, or sandboxed without a PID namespace of
/// its own (where a sandbox that stays cannot be had, see [`serve`]).
fn run(plan: &HelperPlan) -> i32 {
    let Some(sandbox) = &plan.sandbox else {
        return run_as_subreaper(plan);
    };
    // Namespaces first: unsharing a user namespace needs a single-threaded process.
    if sandbox.support.mounts
        && let Err(err) = mounts::unshare(false).and_then(|()| mounts::prepare(sandbox))
    {
        eprintln_quiet(&format!("gimlet: the sandbox could not be enforced: {err}"));
        return SANDBOX_FAILED;
    }
    if let Err(err) = confine::confine(sandbox) {
        eprintln_quiet(&format!("gimlet: the sandbox could not be enforced: {err}"));
        return SANDBOX_FAILED;
    }
    run_as_subreaper(plan)
}

/// A sandbox that stays (`--serve`): the namespaces and the file-system view, then the init,
/// which confines itself and runs the commands that come on the control socket (stdin, which
/// it inherits). Waits for the init.
fn serve(plan: &HelperPlan) -> i32 {
    let Some(sandbox) = &plan.sandbox else {
        eprintln_quiet("gimlet helper: --serve needs a sandbox plan");
        return 2;
    };
    if let Err(err) = mounts::unshare(true).and_then(|()| mounts::prepare(sandbox)) {
        eprintln_quiet(&format!("gimlet: the sandbox could not be enforced: {err}"));
        return SANDBOX_FAILED;
    }
    start_init(plan)
}

/// Starts the PID namespace's init (this program again, `--init`) and waits for it. The init
/// inherits the control socket and stderr.
fn start_init(plan: &HelperPlan) -> i32 {
    let spawned = this_program().and_then(|mut me| {
        // Outside root, a user-namespace process that is not uid 0 there loses its capabilities
        // at `exec`: the init needs these two to mount `/proc` and drop its bounding set.
        if !rustix::process::getuid().is_root() {
            confine::pass_on(CapabilitySet::SYS_ADMIN | CapabilitySet::SETPCAP)
                .map_err(std::io::Error::other)?;
        }
        me.arg(super::HELPER_ARG)
            .arg("--init")
            .arg(serde_json::to_string(plan).unwrap_or_default())
            .spawn()
    });
    match spawned.and_then(|mut init| init.wait()) {
        Ok(status) => exit_code(
            status.code(),
            std::os::unix::process::ExitStatusExt::signal(&status),
        ),
        Err(err) => {
            eprintln_quiet(&format!(
                "gimlet: the sandbox could not be enforced: starting its init: {err}"
            ));
            SANDBOX_FAILED
        }
    }
}

/// A command that runs this program again, by `/proc/self/exe` rather than its path: in the
/// command's mount namespace the path may be hidden (a binary in the machine's `/tmp`, covered
/// by the session's own). Its `argv[0]` stays the path, for `ps`.
fn this_program() -> std::io::Result<Command> {
    let me = std::env::current_exe()?;
    let mut command = Command::new("/proc/self/exe");
    std::os::unix::process::CommandExt::arg0(&mut command, me);
    Ok(command)
}

/// Runs the shell as this process's child, with this process as the child subreaper of
/// everything it starts.
fn run_as_subreaper(plan: &HelperPlan) -> i32 {
    let _ = rustix::process::setsid();
    let _ = rustix::process::set_child_subreaper(Some(rustix::process::getpid()));
    let mut command = Command::new(&plan.shell);
    command
        .arg("-c")
        .arg(&plan.command)
        .current_dir(&plan.workdir)
        .stdin(if plan.stdio {
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

/// Finds what the sandbox can do here by doing it: the namespaces, a read-only view, then
/// (inside a PID namespace, as its init) `/proc`, Landlock, seccomp and dropping capabilities,
/// each checked.
fn probe() -> Support {
    let with_pid = mounts::unshare(true).is_ok();
    let mounts = with_pid || mounts::unshare(false).is_ok();
    let scratch = std::env::temp_dir();
    let plan = SandboxPlan {
        writable: vec![scratch.clone()],
        ..SandboxPlan::default()
    };
    let mounts = mounts && mounts::prepare(&plan).is_ok();
    // Everything but the temp directory is read-only now: `/` must refuse a new file.
    let mounts = mounts && std::fs::File::create("/.gimlet-probe").is_err();
    if !(mounts && with_pid) {
        let mut support = probe_init();
        support.mounts = mounts;
        support.pid_namespace = false;
        return support;
    }
    let init = this_program().and_then(|mut me| {
        if !rustix::process::getuid().is_root() {
            confine::pass_on(CapabilitySet::SYS_ADMIN | CapabilitySet::SETPCAP)
                .map_err(std::io::Error::other)?;
        }
        me.arg(super::HELPER_ARG)
            .arg("--probe-init")
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
    });
    let mut support = init
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| serde_json::from_slice::<Support>(&o.stdout).ok())
        .unwrap_or_default();
    support.mounts = mounts;
    support
}

/// The probe's part inside the namespaces: `/proc` (when this is a PID namespace's init),
/// Landlock and seccomp, checked by trying what they must refuse.
fn probe_init() -> Support {
    let pid_namespace = rustix::process::getpid() == Pid::INIT && init::mount_proc().is_ok();
    let confined = confine::landlock(&[], &[], false).ok();
    let seccomp =
        confine::no_network().is_ok() && std::net::TcpListener::bind("127.0.0.1:0").is_err();
    let capabilities = confine::drop_capabilities().is_ok();
    // A write outside the (empty) writable set must fail for the rules to count.
    let scratch = std::env::temp_dir().join(format!("gimlet-probe-{}", std::process::id()));
    let landlock = match (std::fs::write(&scratch, b"x"), confined) {
        (Err(_), Some(confined)) if capabilities => confined.landlock,
        (Ok(()), _) => {
            let _ = std::fs::remove_file(&scratch);
            Enforcement::None
        }
        _ => Enforcement::None,
    };
    Support {
        landlock,
        landlock_abi: confined.map_or(0, |c| c.abi),
        seccomp,
        mounts: false,
        pid_namespace,
    }
}
