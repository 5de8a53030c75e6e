//! Running one command through the helper ([`crate::sandbox`]): spawning it with a clean
//! environment, streaming its output into bounded memory, and stopping it on time.

use std::ffi::{OsStr, OsString};
#[cfg(target_os = "linux")]
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::Stdio;
#[cfg(target_os = "linux")]
use std::sync::Arc;
use std::time::{Duration, Instant};

use globset::{GlobBuilder, GlobSetBuilder};
use tokio::io::AsyncReadExt;
use tokio::process::{Child, ChildStdin};

use crate::config::BashSettings;
#[cfg(target_os = "linux")]
use crate::sandbox::SANDBOX_FAILED;
#[cfg(target_os = "linux")]
use crate::sandbox::pool::{Sandbox, Sandboxes};
#[cfg(target_os = "linux")]
use crate::sandbox::protocol::Request;
use crate::sandbox::{HelperPlan, KILL_GRACE_MS, helper_args};

/// Variables every command gets: nothing waits for a terminal, a pager, or an editor.
pub(crate) const NON_INTERACTIVE: &[(&str, &str)] = &[
    ("GIT_TERMINAL_PROMPT", "0"),
    ("GIT_PAGER", "cat"),
    ("PAGER", "cat"),
    ("MANPAGER", "cat"),
    ("SYSTEMD_PAGER", ""),
    ("GIT_EDITOR", "true"),
    ("EDITOR", "true"),
    ("VISUAL", "true"),
    ("DEBIAN_FRONTEND", "noninteractive"),
    ("TERM", "dumb"),
    ("NO_COLOR", "1"),
    ("CLICOLOR", "0"),
];

/// The server's environment minus credentials, plus [`NON_INTERACTIVE`] and `TMPDIR`.
pub(crate) fn command_env(
    settings: &BashSettings,
    tmpdir: Option<&Path>,
) -> Vec<(OsString, OsString)> {
    env_from(std::env::vars_os(), settings, tmpdir)
}

/// [`command_env`] over given variables.
fn env_from(
    vars: impl Iterator<Item = (OsString, OsString)>,
    settings: &BashSettings,
    tmpdir: Option<&Path>,
) -> Vec<(OsString, OsString)> {
    let mut deny = GlobSetBuilder::new();
    for pattern in &settings.env_deny {
        if let Ok(glob) = GlobBuilder::new(pattern).case_insensitive(true).build() {
            deny.add(glob);
        }
    }
    let deny = deny.build().unwrap_or_else(|_| globset::GlobSet::empty());
    let keep = |name: &OsStr| {
        let text = name.to_string_lossy();
        settings.env_allow.iter().any(|a| *a == text) || !deny.is_match(text.as_ref())
    };
    let mut env: Vec<(OsString, OsString)> = vars
        .filter(|(name, _)| keep(name))
        .filter(|(name, _)| !NON_INTERACTIVE.iter().any(|(n, _)| name == n) && name != "TMPDIR")
        .collect();
    env.extend(
        NON_INTERACTIVE
            .iter()
            .map(|(n, v)| (OsString::from(n), OsString::from(v))),
    );
    if let Some(tmp) = tmpdir {
        env.push((OsString::from("TMPDIR"), tmp.as_os_str().to_owned()));
    }
    env
}

/// The shell: the configured one, else `bash` if it is installed, else the system's own:
/// `/bin/sh`; on Windows `pwsh` (PowerShell 7), else Windows PowerShell (see [`find_shell`]).
pub(crate) fn shell(settings: &BashSettings) -> PathBuf {
    if let Some(shell) = &settings.shell {
        return shell.clone();
    }
    find_shell(
        std::env::var_os("PATH").as_deref(),
        std::env::var_os("ProgramFiles").as_deref(),
        std::env::var_os("SystemRoot").as_deref(),
        cfg!(windows),
    )
}

/// [`shell`] without a configured one, on a system with this `PATH` (and on Windows these
/// `ProgramFiles` and `SystemRoot`). On Windows, Git for Windows' `bash` is looked for where
/// its installer puts it (`Git\bin\bash.exe` under `ProgramFiles`), and on `PATH` only in
/// a `Git` installation's folders, so that WSL's `bash.exe` launcher in `System32` (which
/// runs the command in Linux, outside the roots' Windows paths) is never taken for it.
pub(crate) fn find_shell(
    path: Option<&OsStr>,
    program_files: Option<&OsStr>,
    system_root: Option<&OsStr>,
    windows: bool,
) -> PathBuf {
    let on_path = |name: &str| {
        std::env::split_paths(path.unwrap_or_default())
            .map(|dir| dir.join(name))
            .find(|candidate| candidate.is_file())
    };
    if !windows {
        return on_path("bash").unwrap_or_else(|| PathBuf::from("/bin/sh"));
    }
    let git_bash = program_files
        .map(|dir| Path::new(dir).join("Git").join("bin").join("bash.exe"))
        .filter(|candidate| candidate.is_file())
        .or_else(|| {
            on_path("bash.exe").filter(|found| {
                found
                    .components()
                    .any(|c| c.as_os_str().eq_ignore_ascii_case("git"))
            })
        });
    git_bash
        .or_else(|| on_path("pwsh.exe"))
        .or_else(|| {
            system_root
                .map(|root| {
                    Path::new(root)
                        .join("System32")
                        .join("WindowsPowerShell")
                        .join("v1.0")
                        .join("powershell.exe")
                })
                .filter(|candidate| candidate.is_file())
        })
        .unwrap_or_else(|| PathBuf::from("powershell.exe"))
}

/// The read end of a command's output pipe, as the runtime reads it: a pipe the reactor
/// watches on Unix; on Windows, where anonymous pipes cannot be waited on, a file whose
/// reads run on the blocking pool.
#[cfg(unix)]
type OutputPipe = tokio::net::unix::pipe::Receiver;
#[cfg(windows)]
type OutputPipe = tokio::fs::File;

#[cfg_attr(
    windows,
    expect(clippy::unnecessary_wraps, reason = "Unix can fail here")
)]
fn output_pipe(reader: std::io::PipeReader) -> std::io::Result<OutputPipe> {
    #[cfg(unix)]
    return tokio::net::unix::pipe::Receiver::from_owned_fd(std::os::fd::OwnedFd::from(reader));
    #[cfg(windows)]
    return Ok(tokio::fs::File::from_std(std::fs::File::from(
        std::os::windows::io::OwnedHandle::from(reader),
    )));
}

/// A command running under a helper.
pub(crate) struct Running {
    runner: Runner,
    output: OutputPipe,
    started: Instant,
}

/// What runs a command.
enum Runner {
    /// A helper started for this command alone (unsandboxed, or sandboxed where no sandbox can
    /// stay); it exits with the command.
    Helper {
        child: Child,
        /// Dropping this makes the helper stop the command and everything it started.
        control: Option<ChildStdin>,
    },
    /// One of the session's sandboxes, which stays for the next command
    /// ([`crate::sandbox::pool`]). `None` once it was given up (it then stops everything).
    #[cfg(target_os = "linux")]
    Sandbox {
        sandbox: Option<Sandbox>,
        pool: Arc<Sandboxes>,
    },
}

impl std::fmt::Debug for Running {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut out = f.debug_struct("Running");
        #[allow(irrefutable_let_patterns, reason = "one kind of runner outside Linux")]
        if let Runner::Helper { child, .. } = &self.runner {
            out.field("pid", &child.id());
        }
        out.finish_non_exhaustive()
    }
}

/// Where a command runs: a helper of its own, or one of the session's sandboxes.
pub(crate) enum Place<'a> {
    /// A helper started for it (`plan` says unsandboxed, or a one-time sandbox).
    Helper(&'a HelperPlan),
    /// A sandbox of the session that stays: the plan's sandbox, from `pool` or new (Linux).
    #[cfg(target_os = "linux")]
    Sandbox {
        /// The command and its sandbox.
        plan: &'a HelperPlan,
        /// The session's idle sandboxes.
        pool: Arc<Sandboxes>,
    },
}

/// Starts a command. Its stdout and stderr are one pipe (combined output).
pub(crate) async fn spawn(
    helper: &Path,
    place: Place<'_>,
    env: &[(OsString, OsString)],
) -> std::io::Result<Running> {
    // Close-on-exec (Unix) and not inheritable (Windows): only the helper gets the write end.
    let (reader, writer) = std::io::pipe()?;
    let output = output_pipe(reader)?;
    let runner = match place {
        Place::Helper(plan) => {
            let writer_err = writer.try_clone()?;
            let mut command = tokio::process::Command::new(helper);
            command
                .args(helper_args(plan))
                .env_clear()
                .envs(env.iter().map(|(k, v)| (k, v)))
                .stdin(Stdio::piped())
                .stdout(Stdio::from(writer))
                .stderr(Stdio::from(writer_err));
            let mut child = command.spawn()?;
            // Our copies of the write end must close, or the pipe never reaches end-of-file.
            drop(command);
            let control = child.stdin.take();
            Runner::Helper { child, control }
        }
        #[cfg(target_os = "linux")]
        Place::Sandbox { plan, pool } => {
            let Some(sandbox_plan) = &plan.sandbox else {
                return Err(std::io::Error::other("a sandbox needs a sandbox plan"));
            };
            let request = Request {
                shell: plan.shell.clone(),
                command: plan.command.clone(),
                workdir: plan.workdir.clone(),
                env: Request::env_from(env),
            };
            // An idle sandbox may have gone meanwhile (killed from outside): then a new one.
            let sandbox = match pool.take(sandbox_plan) {
                Some(mut idle) => match idle.send(request.clone(), writer.as_fd()).await {
                    Ok(()) => idle,
                    Err(_) => {
                        let mut fresh = Sandbox::start(helper, sandbox_plan)?;
                        fresh.send(request, writer.as_fd()).await?;
                        fresh
                    }
                },
                None => {
                    let mut fresh = Sandbox::start(helper, sandbox_plan)?;
                    fresh.send(request, writer.as_fd()).await?;
                    fresh
                }
            };
            // The sandbox has its own copy now; ours must close for end-of-file.
            drop(writer);
            Runner::Sandbox {
                sandbox: Some(sandbox),
                pool,
            }
        }
    };
    Ok(Running {
        runner,
        output,
        started: Instant::now(),
    })
}

impl Runner {
    /// Resolves when the command has ended: its exit code, and what the sandbox said if it
    /// ended instead of answering (it could not be set up). Cancel-safe.
    async fn exited(&mut self) -> (i32, Option<String>) {
        match self {
            Self::Helper { child, .. } => (code_of(child.wait().await.ok()), None),
            #[cfg(target_os = "linux")]
            Self::Sandbox { sandbox, .. } => {
                let Some(running) = sandbox.as_mut() else {
                    return (-1, None);
                };
                match running.reply().await {
                    Ok(reply) => (reply.code, None),
                    Err(_) => {
                        let words = match sandbox.take() {
                            Some(gone) => gone.last_words().await,
                            None => String::new(),
                        };
                        (SANDBOX_FAILED, Some(words))
                    }
                }
            }
        }
    }

    /// Asks for the command to stop: TERM to everything it started, a grace, then KILL.
    fn stop(&mut self) {
        match self {
            Self::Helper { control, .. } => {
                control.take();
            }
            #[cfg(target_os = "linux")]
            Self::Sandbox { sandbox, .. } => {
                if sandbox.as_ref().is_some_and(|s| !s.stop()) {
                    // Giving the sandbox up stops everything in it too.
                    sandbox.take();
                }
            }
        }
    }

    /// The command did not stop in time: ends it outright.
    fn kill(&mut self) {
        match self {
            Self::Helper { child, .. } => {
                let _ = child.start_kill();
            }
            #[cfg(target_os = "linux")]
            Self::Sandbox { sandbox, .. } => {
                sandbox.take();
            }
        }
    }

    /// The command ended and the sandbox answered: it may serve the next one.
    #[cfg_attr(
        not(target_os = "linux"),
        expect(clippy::unused_self, reason = "only Linux keeps sandboxes")
    )]
    fn release(&mut self) {
        #[cfg(target_os = "linux")]
        if let Self::Sandbox { sandbox, pool } = self
            && let Some(sandbox) = sandbox.take()
        {
            pool.put(sandbox);
        }
    }
}

/// What [`Running::run`] hands its sink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Event<'a> {
    /// Output (stdout and stderr, in the order they came).
    Output(&'a [u8]),
    /// Time passed (see `tick`).
    Tick,
}

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    /// It exited (the code, or 128 + the signal that ended it).
    Exited(i32),
    /// It ran out of time and was stopped.
    TimedOut,
    /// The call was cancelled (or the job stopped) and it was stopped.
    Cancelled,
}

/// What a run leaves behind.
#[derive(Debug)]
pub(crate) struct Outcome {
    pub(crate) ending: Ending,
    pub(crate) duration: Duration,
}

/// After the command exits, how long output still in flight may take to arrive.
const DRAIN: Duration = Duration::from_millis(250);
/// After asking the helper to stop, how long before it is killed outright.
const STOP_DEADLINE: Duration = Duration::from_millis(KILL_GRACE_MS + 2000);

impl Running {
    /// When it started.
    pub(crate) fn started(&self) -> Instant {
        self.started
    }

    /// Stops the command: TERM to everything it started, a grace, then KILL (the helper does it).
    pub(crate) fn stop(&mut self) {
        self.runner.stop();
    }

    /// Feeds output to `sink` until the command ends: it exits (plus a short drain), `deadline`
    /// passes, or `cancel` fires. On timeout or cancel the command is stopped first. With a
    /// `tick`, `sink` also gets [`Event::Tick`] that often while the command runs, output or
    /// not (for progress heartbeats).
    pub(crate) async fn run(
        &mut self,
        deadline: Option<Instant>,
        cancel: &tokio_util::sync::CancellationToken,
        tick: Option<Duration>,
        mut sink: impl FnMut(Event<'_>),
    ) -> Outcome {
        let mut buf = vec![0u8; 64 * 1024];
        let mut ending: Option<Ending> = None;
        let mut exited: Option<i32> = None;
        let mut drain_until: Option<tokio::time::Instant> = None;
        let mut stop_until: Option<tokio::time::Instant> = None;
        let mut answered = false;
        let far = tokio::time::Instant::now() + Duration::from_secs(365 * 24 * 3600);
        let deadline = deadline.map_or(far, tokio::time::Instant::from_std);
        let mut ticks = tick.map(|every| {
            let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            ticks
        });
        loop {
            tokio::select! {
                _ = async { ticks.as_mut()?.tick().await; Some(()) }, if ticks.is_some() && exited.is_none() => {
                    sink(Event::Tick);
                }
                read = self.output.read(&mut buf) => match read {
                    Ok(0) | Err(_) => {
                        if exited.is_some() {
                            break;
                        }
                        // The output closed before the command was over: wait for the end.
                        drain_until.get_or_insert(tokio::time::Instant::now() + STOP_DEADLINE);
                        if let Ok((code, words)) = tokio::time::timeout(STOP_DEADLINE, self.runner.exited()).await {
                            if let Some(words) = words {
                                sink(Event::Output(words.as_bytes()));
                            }
                            answered = true;
                            exited = Some(code);
                        }
                        break;
                    }
                    Ok(n) => sink(Event::Output(&buf[..n])),
                },
                (code, words) = self.runner.exited(), if exited.is_none() => {
                    if let Some(words) = words {
                        sink(Event::Output(words.as_bytes()));
                    }
                    answered = true;
                    exited = Some(code);
                    drain_until = Some(tokio::time::Instant::now() + DRAIN);
                }
                () = tokio::time::sleep_until(drain_until.unwrap_or(far)), if drain_until.is_some() => break,
                () = tokio::time::sleep_until(deadline), if ending.is_none() && exited.is_none() => {
                    ending = Some(Ending::TimedOut);
                    self.stop();
                    stop_until = Some(tokio::time::Instant::now() + STOP_DEADLINE);
                }
                () = cancel.cancelled(), if ending.is_none() && exited.is_none() => {
                    ending = Some(Ending::Cancelled);
                    self.stop();
                    stop_until = Some(tokio::time::Instant::now() + STOP_DEADLINE);
                }
                () = tokio::time::sleep_until(stop_until.unwrap_or(far)), if stop_until.is_some() && exited.is_none() => {
                    // The helper did not stop in time: kill it; its output pipe then closes.
                    self.runner.kill();
                    stop_until = None;
                }
            }
        }
        if answered {
            self.runner.release();
        }
        let ending = ending.unwrap_or(Ending::Exited(exited.unwrap_or(-1)));
        Outcome {
            ending,
            duration: self.started.elapsed(),
        }
    }
}

/// The exit code, or 128 + the signal that ended the process (as shells report it).
pub(crate) fn code_of(status: Option<std::process::ExitStatus>) -> i32 {
    status.map_or(-1, |s| {
        #[cfg(unix)]
        return s.code().unwrap_or_else(|| {
            128 + std::os::unix::process::ExitStatusExt::signal(&s).unwrap_or(0)
        });
        #[cfg(not(unix))]
        s.code().unwrap_or(-1)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_left_out_and_prompts_switched_off() {
        let vars = [
            ("PATH", "/usr/bin"),
            ("GITHUB_TOKEN", "t"),
            ("aws_secret_access_key", "s"),
            ("OPENAI_API_KEY", "k"),
            ("DB_PASSWORD", "p"),
            ("KEEP_THIS_KEY", "kept"),
            ("PAGER", "less"),
            ("TMPDIR", "/elsewhere"),
        ];
        let vars = vars
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v)));
        let settings = BashSettings {
            env_allow: vec![String::from("KEEP_THIS_KEY")],
            ..BashSettings::default()
        };
        let env = env_from(vars, &settings, Some(Path::new("/tmp/x")));
        let get = |name: &str| {
            env.iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.to_string_lossy().into_owned())
        };
        assert_eq!(get("PATH").as_deref(), Some("/usr/bin"));
        assert_eq!(get("KEEP_THIS_KEY").as_deref(), Some("kept"));
        for gone in [
            "GITHUB_TOKEN",
            "aws_secret_access_key",
            "OPENAI_API_KEY",
            "DB_PASSWORD",
        ] {
            assert_eq!(get(gone), None, "{gone}");
        }
        assert_eq!(get("PAGER").as_deref(), Some("cat"));
        assert_eq!(get("TMPDIR").as_deref(), Some("/tmp/x"));
        for (name, value) in NON_INTERACTIVE {
            assert_eq!(get(name).as_deref(), Some(*value), "{name}");
        }
    }
}
