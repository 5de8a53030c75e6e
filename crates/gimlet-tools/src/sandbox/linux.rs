//! The Linux sandbox of the helper: namespaces, a read-only view of the file system
//! (`mounts.rs`), Landlock and seccomp (`confine.rs`), the PID namespace's init (`init.rs`).

use std::process::{Command, Stdio};

use rustix::process::Pid;
use rustix::thread::CapabilitySet;

use super::helper::{SANDBOX_FAILED, eprintln_quiet, exit_code};
use super::tree_unix::run_tree;
use super::{Enforcement, HelperPlan, SandboxPlan, Support, confine, init, mounts};

/// One command, run by this helper: unsandboxed, or sandboxed without a PID namespace of
/// its own (where a sandbox that stays cannot be had, see [`serve`]).
pub(super) fn run(plan: &HelperPlan) -> i32 {
    let Some(sandbox) = &plan.sandbox else {
        return run_tree(plan);
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
    run_tree(plan)
}

/// A sandbox that stays (`--serve`): the namespaces and the file-system view, then the init,
/// which confines itself and runs the commands that come on the control socket (stdin, which
/// it inherits). Waits for the init.
pub(super) fn serve(plan: &HelperPlan) -> i32 {
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

/// Finds what the sandbox can do here by doing it: the namespaces, a read-only view, then
/// (inside a PID namespace, as its init) `/proc`, Landlock, seccomp and dropping capabilities,
/// each checked.
pub(super) fn probe() -> Support {
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
pub(super) fn probe_init() -> Support {
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
        seatbelt: false,
    }
}
