//! Running commands: the helper process and the Linux sandbox.
//!
//! Every command runs under a helper: the `gimlet` binary re-executed as `gimlet __exec PLAN`
//! ([`helper_main`]). The helper
//! 1. enters a private mount namespace (where the kernel allows) and bind-mounts the existing
//!    protected paths read-only over themselves;
//! 2. starts a new session and becomes a child subreaper, so every process the command starts,
//!    daemons included, stays its descendant;
//! 3. applies Landlock (read anywhere; write only beneath the roots, a private temp directory
//!    and `/dev/null`) and a seccomp filter (no sockets but Unix ones, no `io_uring`);
//! 4. runs the shell in its own process group, stdin from `/dev/null`;
//! 5. when the shell exits, or when its control pipe (its stdin) closes because the call ended,
//!    timed out, was cancelled or the server died, it sends TERM to the group and every
//!    orphan, waits a short grace, sends KILL, reaps them all, and exits with the shell's code.
//!
//! Library users who embed gimlet-tools call [`helper_main`] from their own `main` when the
//! first argument is [`HELPER_ARG`], and point [`crate::ToolEnvBuilder::exec_helper`] at their
//! binary.

mod helper;

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::thread::JoinHandle;

use serde::{Deserialize, Serialize};

pub use helper::{SANDBOX_FAILED, helper_main};

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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Support {
    /// Landlock file-system rules.
    pub landlock: Enforcement,
    /// The seccomp network filter.
    pub seccomp: bool,
    /// Private mount namespaces (read-only protected paths).
    pub mounts: bool,
}

impl Support {
    /// Whether writes and the network can be confined.
    pub fn enforceable(self) -> bool {
        self.landlock != Enforcement::None && self.seccomp
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
    /// Whether network sockets are allowed.
    pub network: bool,
}

/// The helper binary, the sandbox setting, and what the sandbox can do here.
#[derive(Debug)]
pub struct Exec {
    helper: Option<PathBuf>,
    setting: SandboxSetting,
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
            probe: Mutex::new(probe),
            support: OnceLock::new(),
        }
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
            let handle = self
                .probe
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            handle.and_then(|h| h.join().ok()).unwrap_or_default()
        })
    }

    /// Whether commands will run sandboxed. Blocking (see [`Exec::support`]).
    pub fn sandboxed(&self) -> bool {
        self.setting != SandboxSetting::Off && self.helper.is_some() && self.support().enforceable()
    }
}

/// What a cached probe answer is valid for: this boot, this kernel, this helper binary.
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

/// Protected names at a root's top level.
const PROTECTED_TOP: &[&str] = &[
    ".mcp.json",
    ".vscode",
    ".claude",
    ".bashrc",
    ".bash_profile",
    ".profile",
    ".zshrc",
    ".zprofile",
    ".zshenv",
];
/// Protected names inside a root's `.git`.
const PROTECTED_GIT: &[&str] = &["hooks", "config"];

/// The protected paths of a root: those that exist (to mount read-only), and those that do
/// not (to check for after the command).
pub fn protected_paths(root: &Path) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let mut candidates: BTreeSet<PathBuf> = PROTECTED_TOP.iter().map(|n| root.join(n)).collect();
    candidates.extend(PROTECTED_GIT.iter().map(|n| root.join(".git").join(n)));
    if let Ok(entries) = std::fs::read_dir(root) {
        for entry in entries.flatten() {
            if entry.file_name().to_string_lossy().starts_with(".gimlet") {
                candidates.insert(entry.path());
            }
        }
    }
    candidates
        .into_iter()
        .partition(|p| std::fs::symlink_metadata(p).is_ok())
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
    fn protected_paths_split_into_existing_and_missing() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".git/hooks")).unwrap();
        std::fs::write(dir.path().join(".gimlet.toml"), "").unwrap();
        let (existing, missing) = protected_paths(dir.path());
        assert!(existing.contains(&dir.path().join(".git/hooks")));
        assert!(existing.contains(&dir.path().join(".gimlet.toml")));
        assert!(missing.contains(&dir.path().join(".mcp.json")));
        assert!(missing.contains(&dir.path().join(".git/config")));
    }

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
