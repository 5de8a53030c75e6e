//! The helper program: sandboxes itself, runs the shell, and leaves no process behind.
//!
//! A small synchronous program (no async runtime): it blocks on purpose.

#![expect(
    clippy::disallowed_methods,
    reason = "the helper is synchronous and may sleep"
)]
#![expect(clippy::print_stdout, reason = "the probe reports on stdout")]

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::BufRead;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, WaitOptions};

use super::{Enforcement, HelperPlan, KILL_GRACE_MS, SandboxPlan, Support};

/// Exit code when the sandbox the server asked for could not be put in place.
pub const SANDBOX_FAILED: i32 = 125;
/// How long leftovers get between TERM and KILL once the shell has exited.
const LEFTOVER_GRACE: Duration = Duration::from_millis(200);

/// The helper's `main`: `args` are the arguments after [`super::HELPER_ARG`]. Returns the exit
/// code: the shell's, or 128 + the signal that ended it.
pub fn helper_main(args: &[OsString]) -> i32 {
    match args.first().and_then(|a| a.to_str()) {
        Some("--probe") => {
            let support = probe();
            println!("{}", serde_json::to_string(&support).unwrap_or_default());
            0
        }
        Some(json) => match serde_json::from_str::<HelperPlan>(json) {
            Ok(plan) => run(&plan),
            Err(err) => {
                eprintln_quiet(&format!("gimlet helper: bad plan: {err}"));
                2
            }
        },
        None => {
            eprintln_quiet("gimlet helper: no plan given");
            2
        }
    }
}

/// Writes to stderr (the command's output) without panicking on a closed pipe.
fn eprintln_quiet(message: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{message}");
}

fn run(plan: &HelperPlan) -> i32 {
    // Namespaces first: unsharing a user namespace needs a single-threaded process.
    // Where this fails, protected paths are guarded by the server's check after the command.
    if let Some(sandbox) = &plan.sandbox
        && !sandbox.read_only.is_empty()
    {
        let _ = enter_mount_namespace(&sandbox.read_only);
    }
    let _ = rustix::process::setsid();
    let _ = rustix::process::set_child_subreaper(Some(rustix::process::getpid()));
    if let Some(sandbox) = &plan.sandbox
        && let Err(err) = confine(sandbox)
    {
        eprintln_quiet(&format!("gimlet: the sandbox could not be enforced: {err}"));
        return SANDBOX_FAILED;
    }
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
        Ok(status) => status.code().unwrap_or_else(|| {
            128 + std::os::unix::process::ExitStatusExt::signal(&status).unwrap_or(0)
        }),
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
        match rustix::process::waitpid(None, WaitOptions::NOHANG) {
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

/// A private mount namespace where `read_only` paths are read-only bind mounts of themselves.
fn enter_mount_namespace(read_only: &[std::path::PathBuf]) -> Result<(), String> {
    use rustix::mount::{
        MountFlags, MountPropagationFlags, mount_bind, mount_change, mount_remount,
    };
    use rustix::thread::UnshareFlags;
    let uid = rustix::process::getuid();
    let gid = rustix::process::getgid();
    let flags = if uid.is_root() {
        UnshareFlags::NEWNS
    } else {
        UnshareFlags::NEWUSER | UnshareFlags::NEWNS
    };
    #[expect(
        deprecated,
        reason = "only NEWNS/NEWUSER are unshared, not FILES, which is what makes unshare unsafe"
    )]
    rustix::thread::unshare(flags).map_err(|e| format!("unshare: {e}"))?;
    if !uid.is_root() {
        let write = |path: &str, text: String| {
            std::fs::write(path, text).map_err(|e| format!("{path}: {e}"))
        };
        write("/proc/self/setgroups", String::from("deny"))?;
        write("/proc/self/uid_map", format!("{0} {0} 1", uid.as_raw()))?;
        write("/proc/self/gid_map", format!("{0} {0} 1", gid.as_raw()))?;
    }
    mount_change(
        "/",
        MountPropagationFlags::PRIVATE | MountPropagationFlags::REC,
    )
    .map_err(|e| format!("private mounts: {e}"))?;
    for path in read_only {
        if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
            continue;
        }
        mount_bind(path, path).map_err(|e| format!("bind {}: {e}", path.display()))?;
        mount_remount(path, MountFlags::BIND | MountFlags::RDONLY, "")
            .map_err(|e| format!("read-only {}: {e}", path.display()))?;
    }
    Ok(())
}

/// Landlock (writes only to `writable` and `/dev/null`) and, without network, seccomp.
fn confine(plan: &SandboxPlan) -> Result<Enforcement, String> {
    let enforcement = landlock(&plan.writable, plan.network)?;
    if enforcement == Enforcement::None {
        return Err(String::from("Landlock is not available in this kernel"));
    }
    if !plan.network {
        no_network()?;
    }
    Ok(enforcement)
}

fn landlock(writable: &[std::path::PathBuf], network: bool) -> Result<Enforcement, String> {
    use landlock::{
        ABI, Access, AccessFs, AccessNet, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus,
        path_beneath_rules,
    };
    let abi = ABI::V5;
    let mut ruleset = Ruleset::default()
        .handle_access(AccessFs::from_all(abi))
        .map_err(|e| e.to_string())?;
    if !network {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(abi))
            .map_err(|e| e.to_string())?;
    }
    let status = ruleset
        .create()
        .map_err(|e| e.to_string())?
        .add_rules(path_beneath_rules(["/"], AccessFs::from_read(abi)))
        .map_err(|e| e.to_string())?
        .add_rules(path_beneath_rules(writable, AccessFs::from_all(abi)))
        .map_err(|e| e.to_string())?
        .add_rules(path_beneath_rules(["/dev/null"], AccessFs::from_all(abi)))
        .map_err(|e| e.to_string())?
        .restrict_self()
        .map_err(|e| e.to_string())?;
    Ok(match status.ruleset {
        RulesetStatus::FullyEnforced => Enforcement::Full,
        RulesetStatus::PartiallyEnforced => Enforcement::Partial,
        RulesetStatus::NotEnforced => Enforcement::None,
    })
}

/// seccomp: `socket()` fails with EPERM for every family but `AF_UNIX`; `io_uring` (which can
/// open sockets around the filter) is off.
fn no_network() -> Result<(), String> {
    use seccompiler::{
        BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule,
    };
    let not_unix = SeccompCondition::new(
        0,
        SeccompCmpArgLen::Dword,
        SeccompCmpOp::Ne,
        libc::AF_UNIX as u64,
    )
    .map_err(|e| e.to_string())?;
    let mut rules = BTreeMap::new();
    rules.insert(
        libc::SYS_socket,
        vec![SeccompRule::new(vec![not_unix]).map_err(|e| e.to_string())?],
    );
    rules.insert(libc::SYS_io_uring_setup, Vec::new());
    let arch =
        seccompiler::TargetArch::try_from(std::env::consts::ARCH).map_err(|e| e.to_string())?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(|e| e.to_string())?;
    let program: BpfProgram = filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| e.to_string())?;
    seccompiler::apply_filter(&program).map_err(|e| e.to_string())
}

/// Sandboxes this process and checks what holds. Mounts come first: a Landlock-restricted
/// process may not change mounts.
fn probe() -> Support {
    let mounts = enter_mount_namespace(&[]).is_ok();
    let landlock = landlock(&[], false).unwrap_or(Enforcement::None);
    let seccomp = no_network().is_ok() && std::net::TcpListener::bind("127.0.0.1:0").is_err();
    // A write outside the (empty) writable set must fail for the rules to count.
    let scratch = std::env::temp_dir().join(format!("gimlet-probe-{}", std::process::id()));
    let landlock = match std::fs::write(&scratch, b"x") {
        Err(_) => landlock,
        Ok(()) => {
            let _ = std::fs::remove_file(&scratch);
            Enforcement::None
        }
    };
    Support {
        landlock,
        seccomp,
        mounts,
    }
}
