//! Starting a language server's process, confined like a `bash` command.
//!
//! This is the one place that knows how: through the command helper (`gimlet __exec PLAN`,
//! [`crate::sandbox`]) with a plan whose `stdio` flag hands the helper's stdin to the server,
//! so the server speaks LSP on the helper's stdin and stdout. Where the sandbox is on, the
//! plan confines it as it confines commands, but never with the network, and with writes only
//! beneath the roots and the server's cache directory. Without a helper (a library user who
//! set none), the server runs directly, in its own process group, and only where the sandbox
//! is not required.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout};

use crate::config::BashSettings;
use crate::sandbox::protected::Protected;
use crate::sandbox::{
    Exec, HelperPlan, SandboxPlan, SandboxSetting, Support, helper_args, sockets_to_hide,
};

/// A started server process.
#[derive(Debug)]
pub(crate) struct Process {
    pub(crate) child: Child,
    pub(crate) stdin: ChildStdin,
    pub(crate) stdout: ChildStdout,
    pub(crate) stderr: ChildStderr,
    /// Whether it runs in the sandbox.
    pub(crate) sandboxed: bool,
}

/// Where and how a server runs.
#[derive(Debug, Clone)]
pub(crate) struct Launch {
    /// The command and its arguments (the program resolved to a path).
    pub(crate) command: Vec<String>,
    /// The project root: the working directory.
    pub(crate) workdir: PathBuf,
    /// Every root of the environment: writable in the sandbox.
    pub(crate) roots: Vec<PathBuf>,
    /// What may not change beneath the roots (the policy's protected list).
    pub(crate) protected: Protected,
    /// The server's cache directory (also its `XDG_CACHE_HOME` and, below, its `TMPDIR`).
    pub(crate) cache: PathBuf,
}

/// Starts a server. Blocking (it may wait for the sandbox probe and looks at the roots).
pub(crate) fn start(exec: &Exec, bash: &BashSettings, launch: &Launch) -> Result<Process, String> {
    let tmp = launch.cache.join("tmp");
    std::fs::create_dir_all(&tmp).map_err(|e| format!("cannot create {}: {e}", tmp.display()))?;
    let mut env = crate::process::command_env(bash, Some(&tmp));
    env.retain(|(name, _)| name != "XDG_CACHE_HOME");
    env.push((
        OsString::from("XDG_CACHE_HOME"),
        launch.cache.clone().into(),
    ));
    let sandboxed = exec.sandboxed();
    if exec.setting() == SandboxSetting::On && !sandboxed {
        return Err(String::from(
            "the sandbox is on (--sandbox on) but cannot be enforced here, so no language \
             server is started",
        ));
    }
    let mut command = match exec.helper() {
        Some(helper) => {
            let plan = plan(launch, sandboxed.then(|| exec.support()));
            let mut command = tokio::process::Command::new(helper);
            command.args(helper_args(&plan));
            command
        }
        None => {
            let mut command = tokio::process::Command::new(&launch.command[0]);
            command
                .args(&launch.command[1..])
                .current_dir(&launch.workdir);
            #[cfg(unix)]
            command.process_group(0);
            command
        }
    };
    command
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = command
        .spawn()
        .map_err(|e| format!("cannot start `{}`: {e}", launch.command.join(" ")))?;
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(String::from("the server's pipes could not be set up"));
    };
    Ok(Process {
        child,
        stdin,
        stdout,
        stderr,
        sandboxed: sandboxed && exec.helper().is_some(),
    })
}

/// The helper plan: the command run with `exec` (so the server is the helper's child and
/// keeps the pipes), and, given what the kernel supports, the sandbox of a command without
/// network: the protected paths read-only, git directories pinned, no Unix socket outside.
/// A long-lived server runs in a helper of its own (no PID namespace of its own: a sandbox
/// that stays serves commands, not stdio servers); gimlet itself is not dumpable, so its
/// environment stays unreadable to it all the same.
/// On Windows there is no `/bin/sh`: the helper runs the server through `cmd /d /s /c`, which
/// also runs npm's `.cmd` shims, each word in double quotes.
fn plan(launch: &Launch, support: Option<Support>) -> HelperPlan {
    #[cfg(not(windows))]
    let (shell, command) = (
        PathBuf::from("/bin/sh"),
        std::iter::once(String::from("exec"))
            .chain(launch.command.iter().map(|arg| quoted(arg)))
            .collect::<Vec<_>>()
            .join(" "),
    );
    #[cfg(windows)]
    let (shell, command) = (
        PathBuf::from("cmd.exe"),
        launch
            .command
            .iter()
            .map(|arg| format!("\"{}\"", arg.replace('"', "\"\"")))
            .collect::<Vec<_>>()
            .join(" "),
    );
    let sandbox = support.map(|support| {
        let mut writable = launch.roots.clone();
        writable.push(launch.cache.clone());
        let scan = launch.protected.scan(&launch.roots);
        let hidden_sockets = if support.mounts && !support.unix_socket_rules() {
            sockets_to_hide(&writable, &[])
        } else {
            Vec::new()
        };
        SandboxPlan {
            writable,
            read_only: scan.read_only,
            pinned: scan.pinned,
            network: false,
            unix_sockets: Vec::new(),
            hidden_sockets,
            support,
            private_tmp: None,
        }
    });
    HelperPlan {
        shell,
        command,
        workdir: launch.workdir.clone(),
        sandbox,
        stdio: true,
    }
}

/// A word for `sh`: in single quotes, a quote inside as `'\''`.
#[cfg(not(windows))]
fn quoted(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// Kills a server's helper; its kill-on-close Job Object takes the server and whatever it
/// started (before, nothing was killed here, and a server that ignored the end of its input
/// outlived a kill at the memory cap or after the shutdown grace).
#[cfg(windows)]
pub(crate) fn kill_tree(pid: u32) {
    super::tree::end(pid);
}

/// Kills a server and whatever it started: every process below it (found by their parents, so
/// that a grandchild in a session of its own goes too: killed with its parent, it would be left
/// to init) with the group each leads (the helper's child leads the server's group), and the
/// helper; or, without a helper, the server's own group.
#[cfg(unix)]
pub(crate) fn kill_tree(pid: u32) {
    use rustix::process::{Pid, Signal, kill_process, kill_process_group};
    let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) else {
        return;
    };
    let below = super::tree::descendants(pid.as_raw_nonzero().get().unsigned_abs());
    for process in below
        .into_iter()
        .filter_map(|p| i32::try_from(p).ok().and_then(Pid::from_raw))
    {
        // Most lead no group: nothing to signal there.
        let _ = kill_process_group(process, Signal::KILL);
        let _ = kill_process(process, Signal::KILL);
    }
    let _ = kill_process_group(pid, Signal::KILL);
    let _ = kill_process(pid, Signal::KILL);
}

/// The cache directory of a language's server: `$XDG_CACHE_HOME/gimlet/lsp/<language>`.
pub(crate) fn cache_dir(base: Option<&Path>, language: &str) -> PathBuf {
    base.map_or_else(std::env::temp_dir, Path::to_owned)
        .join("gimlet")
        .join("lsp")
        .join(language)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_runs_the_server_with_its_pipes_and_no_network() {
        let launch = Launch {
            command: vec![String::from("/opt/it's/server"), String::from("--stdio")],
            workdir: PathBuf::from("/work/project"),
            roots: vec![PathBuf::from("/work/project")],
            protected: Protected::default(),
            cache: PathBuf::from("/cache/gimlet/lsp/python"),
        };
        let plan = plan(&launch, Some(Support::default()));
        assert!(plan.stdio);
        assert_eq!(plan.command, r"exec '/opt/it'\''s/server' '--stdio'");
        let sandbox = plan.sandbox.unwrap();
        assert!(!sandbox.network);
        assert_eq!(
            sandbox.writable,
            vec![
                PathBuf::from("/work/project"),
                PathBuf::from("/cache/gimlet/lsp/python")
            ]
        );
        assert!(super::plan(&launch, None).sandbox.is_none());
    }
}
