//! Running commands: the helper processes and the Linux sandbox.
//!
//! Every command runs under a helper: the `gimlet` binary re-executed as `gimlet __exec PLAN`
//! ([`helper_main`]). For a sandboxed command, where the kernel allows (see [`Support`]):
//! 1. the helper enters a user namespace (unless it runs as root), a private mount namespace
//!    and a new PID namespace;
//! 2. it makes every mount read-only but the roots and the command's temp directory
//!    (`mounts.rs`): outside them not even `chmod`, `chown`, `touch`, xattrs or truncation
//!    work; it hides Unix sockets that listen outside the roots; it mounts the session's temp
//!    directory at `/tmp` (the roots and allowed sockets below the machine's `/tmp` again
//!    inside it); it bind-mounts the existing protected paths ([`protected`]) read-only over
//!    themselves and every git directory onto itself, so that `.git` cannot be renamed; and it
//!    moves to `/`;
//! 3. it starts itself again as the namespace's init, PID 1 (`init.rs`), which mounts a fresh
//!    `/proc` (showing only the command's processes), applies a seccomp filter (no sockets but
//!    Unix ones, no `io_uring`) and Landlock (read anywhere; write only beneath the roots, the
//!    temp directory and `/dev/null`; no TCP; on newer kernels no signals and no abstract Unix
//!    sockets beyond the sandbox, and no pathname sockets outside the roots), and drops every
//!    capability, the bounding set included, even as root;
//! 4. the init runs the shell in its own process group, stdin from `/dev/null`;
//! 5. when the shell exits, or when the control pipe (the helper's stdin) closes because the
//!    call ended, timed out, was cancelled or the server died, it sends TERM to everything in
//!    the namespace, waits a short grace, sends KILL, reaps them all, and exits with the
//!    shell's code. When the init ends, the kernel kills whatever is left in the namespace.
//!
//! Without a PID namespace the helper confines itself and is the command's child subreaper
//! instead. An unsandboxed command gets only the process hygiene: a new session, a child
//! subreaper, the same stop and cleanup.
//!
//! Library users who embed gimlet-tools call [`helper_main`] from their own `main` when the
//! first argument is [`HELPER_ARG`], and point [`crate::ToolEnvBuilder::exec_helper`] at their
//! binary.

#[cfg(target_os = "linux")]
mod confine;
mod denied;
mod helper;
#[cfg(target_os = "linux")]
mod init;
#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "macos")]
mod macos;
#[cfg(target_os = "linux")]
mod mounts;
#[cfg(target_os = "linux")]
pub(crate) mod pool;
pub mod protected;
#[cfg(target_os = "linux")]
pub(crate) mod protocol;
#[cfg(any(target_os = "macos", test))]
mod seatbelt;
pub(crate) mod tmp;
#[cfg(unix)]
mod tree_unix;
#[cfg(windows)]
mod tree_windows;
#[cfg(windows)]
mod windows;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::thread::JoinHandle;

use serde::{Deserialize, Serialize};

use crate::util::MutexExt as _;

pub use denied::denial;
pub use helper::{SANDBOX_FAILED, helper_main};
#[cfg(target_os = "linux")]
pub(crate) use mounts::sockets_to_hide;

/// Unix sockets listening outside the writable paths, to hide from commands: only Linux hides
/// them (by mounting over them); Seatbelt refuses them by its rules, and Windows has no sandbox.
#[cfg(not(target_os = "linux"))]
pub(crate) fn sockets_to_hide(_writable: &[PathBuf], _allowed: &[PathBuf]) -> Vec<PathBuf> {
    Vec::new()
}

/// The first argument that runs the helper instead of the server.
pub const HELPER_ARG: &str = "__exec";

/// How long the helper waits between TERM and KILL.
pub const KILL_GRACE_MS: u64 = 1000;

/// `--sandbox`: whether commands run sandboxed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SandboxSetting {
    /// Sandboxed where the kernel supports it, unsandboxed elsewhere.
    #[default]
    Auto,
    /// Always sandboxed; commands are refused where that is impossible.
    On,
    /// Never sandboxed.
    Off,
}

/// How much Landlock the kernel enforced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Enforcement {
    /// Every requested restriction.
    Full,
    /// Some (an older kernel); writes are still confined.
    Partial,
    /// None.
    #[default]
    None,
}

/// What the sandbox can do on this machine, found by running the helper once.
#[allow(
    clippy::struct_excessive_bools,
    reason = "each is one mechanism that works here or not"
)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Support {
    /// Landlock file-system rules.
    pub landlock: Enforcement,
    /// The kernel's Landlock ABI version (0: none).
    #[serde(default)]
    pub landlock_abi: u8,
    /// The seccomp network filter.
    pub seccomp: bool,
    /// Private mount namespaces: read-only protected paths, everything outside the roots
    /// read-only.
    pub mounts: bool,
    /// A PID namespace of the command's own, with a fresh `/proc`.
    #[serde(default)]
    pub pid_namespace: bool,
    /// macOS: Seatbelt (`sandbox-exec`) confines writes and the network.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub seatbelt: bool,
}

impl Support {
    /// Whether writes and the network can be confined.
    pub fn enforceable(self) -> bool {
        (self.landlock != Enforcement::None && self.seccomp) || self.seatbelt
    }

    /// Whether Landlock scopes signals and abstract Unix sockets to the sandbox (ABI 6).
    pub fn scopes(self) -> bool {
        self.landlock_abi >= 6
    }

    /// Whether Landlock refuses pathname Unix sockets outside the roots (ABI 9).
    pub fn unix_socket_rules(self) -> bool {
        self.landlock_abi >= 9
    }

    /// What this system's sandbox lacks, in words, for the tool description and the log.
    pub fn gaps(self) -> Vec<&'static str> {
        let mut gaps = Vec::new();
        if self.seatbelt {
            // macOS: what Seatbelt leaves to the other layers (docs/security.md, "macOS").
            gaps.push(
                "macOS: commands see the other processes of the system, and a process that \
                 leaves the command's process group is not stopped with it",
            );
            return gaps;
        }
        if !self.mounts {
            gaps.push(
                "no mount namespaces: protected files and everything outside the roots are \
                 guarded only against content writes, and /tmp is the machine's, read-only \
                 (write scratch files to $TMPDIR)",
            );
        }
        if !self.pid_namespace {
            gaps.push("no PID namespace: commands see the other processes of the system");
        }
        if !self.scopes() {
            gaps.push(
                "Landlock below ABI 6: signals and abstract Unix sockets are not confined to the sandbox",
            );
        }
        if !self.unix_socket_rules() {
            gaps.push(
                "Landlock below ABI 9: Unix sockets outside the roots are refused only when they \
                 listen as the command starts",
            );
        }
        gaps
    }
}

/// What the helper is to run, passed to it as JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HelperPlan {
    /// The shell (`bash`, or `sh` where there is no bash).
    pub shell: PathBuf,
    /// The command line, given to `shell -c`.
    pub command: String,
    /// Where it runs.
    pub workdir: PathBuf,
    /// The sandbox, or `None` to run unsandboxed.
    pub sandbox: Option<SandboxPlan>,
    /// A long-lived stdio child (a language server): the command gets the helper's stdin
    /// instead of `/dev/null`, and the helper's stdin is then no control pipe. The command is
    /// stopped by closing its stdin (it exits on end of input) or by killing it; its leftovers
    /// go when it exits, as always.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stdio: bool,
}

/// The sandbox of one command.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct SandboxPlan {
    /// Directories (and files) that may be written: the roots and the private temp directory.
    pub writable: Vec<PathBuf>,
    /// Existing protected paths, bind-mounted read-only where mount namespaces work.
    pub read_only: Vec<PathBuf>,
    /// Git directories, bound onto themselves so that they cannot be renamed or replaced.
    #[serde(default)]
    pub pinned: Vec<PathBuf>,
    /// Whether network sockets are allowed.
    pub network: bool,
    /// Unix sockets outside the writable paths that commands may still connect to.
    #[serde(default)]
    pub unix_sockets: Vec<PathBuf>,
    /// Unix sockets listening outside the writable paths, hidden from commands (where Landlock
    /// cannot refuse them, below ABI 9).
    #[serde(default)]
    pub hidden_sockets: Vec<PathBuf>,
    /// What the kernel can enforce (the probe's answer): the helper refuses to run a command
    /// when any of it fails.
    #[serde(default)]
    pub support: Support,
    /// The session's temp directory (one of `writable`), mounted at [`TMP`] in the command's
    /// mount namespace, so that `/tmp` is the session's own: writable, shared by its commands,
    /// and nothing of the machine's `/tmp` or of another session's. Roots and allowed sockets
    /// below the machine's `/tmp` are mounted again at their paths inside it. Only where mount
    /// namespaces work ([`Support::mounts`]); the helper fails rather than run without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub private_tmp: Option<PathBuf>,
}

/// Where a sandboxed command finds its session's private temp directory
/// ([`SandboxPlan::private_tmp`]), and its `TMPDIR` there.
pub const TMP: &str = "/tmp";

/// The helper binary, the sandbox setting, and what the sandbox can do here.
#[derive(Debug)]
pub struct Exec {
    helper: Option<PathBuf>,
    setting: SandboxSetting,
    unix_sockets: Vec<PathBuf>,
    probe: Mutex<Option<JoinHandle<Support>>>,
    support: OnceLock<Support>,
}

impl Exec {
    /// Starts probing the sandbox in the background (unless it is off or there is no helper).
    pub fn new(helper: Option<PathBuf>, setting: SandboxSetting) -> Self {
        Self::with_cache(helper, setting, None)
    }

    /// Like [`Exec::new`], remembering the probe's answer in `cache` for as long as the same
    /// helper binary runs on the same boot of the same kernel: later starts skip the probe.
    /// A stale answer cannot weaken anything: a command the helper cannot sandbox fails.
    pub fn with_cache(
        helper: Option<PathBuf>,
        setting: SandboxSetting,
        cache: Option<PathBuf>,
    ) -> Self {
        let probe = match (&helper, setting) {
            (Some(helper), SandboxSetting::Auto | SandboxSetting::On) => {
                let helper = helper.clone();
                Some(std::thread::spawn(move || {
                    cached_probe(&helper, cache.as_deref())
                }))
            }
            _ => None,
        };
        Self {
            helper,
            setting,
            unix_sockets: Vec::new(),
            probe: Mutex::new(probe),
            support: OnceLock::new(),
        }
    }

    /// Unix sockets outside the roots that sandboxed commands may connect to (`[sandbox]
    /// unix_sockets`). Paths that do not resolve are dropped.
    #[must_use]
    pub fn with_unix_sockets(mut self, sockets: impl IntoIterator<Item = PathBuf>) -> Self {
        self.unix_sockets = sockets
            .into_iter()
            .filter_map(|p| std::fs::canonicalize(&p).ok())
            .collect();
        self
    }

    /// The Unix sockets outside the roots that sandboxed commands may connect to.
    pub fn unix_sockets(&self) -> &[PathBuf] {
        &self.unix_sockets
    }

    /// The helper binary, if commands can run here at all.
    pub fn helper(&self) -> Option<&Path> {
        self.helper.as_deref()
    }

    /// The `--sandbox` setting.
    pub fn setting(&self) -> SandboxSetting {
        self.setting
    }

    /// What the sandbox can do (waits for the probe the first time). Blocking.
    pub fn support(&self) -> Support {
        *self.support.get_or_init(|| {
            let handle = self.probe.locked().take();
            let support = handle.and_then(|h| h.join().ok()).unwrap_or_default();
            if support.enforceable() {
                for gap in support.gaps() {
                    tracing::info!("sandbox: {gap}");
                }
            }
            support
        })
    }

    /// Whether commands will run sandboxed. Blocking (see [`Exec::support`]).
    pub fn sandboxed(&self) -> bool {
        self.setting != SandboxSetting::Off && self.helper.is_some() && self.support().enforceable()
    }
}

/// What a cached probe answer is valid for: this boot, this kernel, this helper binary.
#[cfg(target_os = "linux")]
fn probe_key(helper: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let meta = std::fs::metadata(helper).ok()?;
    let uname = rustix::system::uname();
    let key = format!(
        "{}|{}|{}|{}|{}|{}|{}",
        boot.trim(),
        uname.release().to_string_lossy(),
        helper.display(),
        meta.len(),
        meta.mtime(),
        meta.mtime_nsec(),
        meta.ino()
    );
    Some(crate::fs::ContentHash::of(key.as_bytes()).to_string())
}

/// Elsewhere there is no boot id to bind an answer to: the probe runs at every start (on
/// macOS one `sandbox-exec` run, on Windows nothing).
#[cfg(not(target_os = "linux"))]
fn probe_key(_helper: &Path) -> Option<String> {
    None
}

/// The probe's answer from the cache when it is still valid, else a fresh probe (saved).
fn cached_probe(helper: &Path, cache: Option<&Path>) -> Support {
    #[derive(Serialize, Deserialize)]
    struct Cached {
        key: String,
        support: Support,
    }
    let key = probe_key(helper);
    if let (Some(cache), Some(key)) = (cache, &key)
        && let Ok(text) = std::fs::read(cache)
        && let Ok(cached) = serde_json::from_slice::<Cached>(&text)
        && cached.key == *key
    {
        return cached.support;
    }
    let support = probe(helper);
    if let (Some(cache), Some(key)) = (cache, key)
        && let Some(dir) = cache.parent()
        && let Ok(mut file) = tempfile::NamedTempFile::new_in(dir)
        && let Ok(text) = serde_json::to_vec(&Cached { key, support })
        && std::io::Write::write_all(&mut file, &text).is_ok()
    {
        let _ = file.persist(cache);
    }
    support
}

/// Runs the helper's probe: it sandboxes itself and reports what held.
fn probe(helper: &Path) -> Support {
    let output = std::process::Command::new(helper)
        .arg(HELPER_ARG)
        .arg("--probe")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output();
    match output {
        Ok(output) if output.status.success() => {
            serde_json::from_slice(&output.stdout).unwrap_or_default()
        }
        Ok(output) => {
            tracing::warn!(status = ?output.status, "the sandbox probe failed; commands run unsandboxed");
            Support::default()
        }
        Err(err) => {
            tracing::warn!("cannot run the command helper {}: {err}", helper.display());
            Support::default()
        }
    }
}

/// Keeps this process's secrets from other processes of the same user: its `/proc/<pid>`
/// entries (the environment with its API keys and tokens, memory, open files) become
/// readable by root only, and it cannot be traced (`PR_SET_DUMPABLE` 0; no core dumps
/// either). The server calls this at start.
///
/// Removing the secrets from the environment instead would not do: `std::env::remove_var` is
/// unsafe while other threads may read the environment, and `/proc/<pid>/environ` shows the
/// environment the process started with whatever it changes later. Sandboxed commands cannot
/// see the server at all (their own PID namespace, no capabilities); this covers the rest:
/// an unsandboxed command, or another program of the user.
///
/// On macOS and Windows this does nothing: neither has a call for it that needs no `unsafe`
/// (macOS's `PT_DENY_ATTACH` is a `ptrace` request), and both already keep a process's
/// environment from other users; other processes of the same user can read it there.
pub fn shield_process() -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)?;
    Ok(())
}

/// Makes everything the server starts end with it, however it ends (a `kill -9`, Task
/// Manager's End task). On Windows the server joins a Job Object that kills its processes when
/// its last handle closes: the server's own, which the system closes when the server ends; a
/// helper makes a job of its own inside it (nested jobs). Unix gets this from the helper (a
/// subreaper that watches its parent). Call it once, in the server, before anything starts.
///
/// # Errors
///
/// When the job cannot be made or joined; what the server starts then depends on its helper.
pub fn end_children_with_this_process() -> std::io::Result<()> {
    #[cfg(windows)]
    tree_windows::join_kill_on_close_job()?;
    Ok(())
}

/// Marks every file descriptor this process inherited, beyond the standard three, to close on
/// `exec`, so that none reaches a command, a hook or a language server. Whatever started the
/// server may have left some open (a host's pipes, a build tool's job server); gimlet's own
/// are all opened close-on-exec. Call it first thing in `main`, before any thread starts.
/// On Windows a handle is inherited only when it was made inheritable and the spawn asks for
/// it; there is nothing to do.
pub fn close_inherited_on_exec() {
    #[cfg(unix)]
    close_fds::set_fds_cloexec_threadsafe(3, &[]);
}

/// The arguments that make `shell` run `command`: `-c COMMAND` for the POSIX shells;
/// PowerShell (`pwsh`, `powershell`) gets `-NoProfile -NonInteractive -Command COMMAND` and
/// `cmd` gets `/d /s /c COMMAND`.
pub fn shell_invocation(shell: &Path, command: &str) -> Vec<OsString> {
    let name = shell
        .file_stem()
        .map(|s| s.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    let flags: &[&str] = match name.as_str() {
        "pwsh" | "powershell" => &["-NoProfile", "-NonInteractive", "-Command"],
        "cmd" => &["/d", "/s", "/c"],
        _ => &["-c"],
    };
    flags
        .iter()
        .map(OsString::from)
        .chain([OsString::from(command)])
        .collect()
}

/// The helper's arguments for a plan.
pub fn helper_args(plan: &HelperPlan) -> Vec<OsString> {
    vec![
        OsString::from(HELPER_ARG),
        OsString::from(serde_json::to_string(plan).unwrap_or_default()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_answer_is_cached_until_the_helper_changes() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let count = dir.path().join("count");
        let helper = dir.path().join("helper");
        let script = format!(
            "#!/bin/sh\necho x >> '{}'\necho '{{\"landlock\":\"none\",\"seccomp\":true,\"mounts\":false}}'\n",
            count.display()
        );
        std::fs::write(&helper, &script).unwrap();
        std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o755)).unwrap();
        let cache = dir.path().join("probe.json");
        let runs = || {
            std::fs::read_to_string(&count)
                .unwrap_or_default()
                .lines()
                .count()
        };

        let first = cached_probe(&helper, Some(&cache));
        assert!(first.seccomp, "the helper's answer is used: {first:?}");
        assert_eq!(runs(), 1);
        assert_eq!(cached_probe(&helper, Some(&cache)), first);
        assert_eq!(runs(), 1, "the second start reads the cache");

        // A new helper binary (a rebuild, an upgrade) probes again.
        std::fs::write(&helper, format!("{script}# rebuilt\n")).unwrap();
        assert_eq!(cached_probe(&helper, Some(&cache)), first);
        assert_eq!(runs(), 2);
        // Without a cache every call probes.
        cached_probe(&helper, None);
        assert_eq!(runs(), 3);
    }
}
