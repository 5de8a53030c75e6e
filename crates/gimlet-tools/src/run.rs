//! Running one command for a tool (`bash`, the plugin tools): the helper plan (sandboxed where
//! the sandbox is on: the roots and the session's temp directory writable, protected paths
//! read-only, git directories pinned), the run in the foreground with heartbeats, the undoing
//! of what it planted, and the result. A room of its own, so that no tool imports another.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::Serialize;

use crate::context::{ProgressUpdate, ToolContext};
use crate::error::ToolError;
use crate::fs::PathError;
use crate::jobs::Jobs;
use crate::output::{CommandOutput, MAX_LOG_BYTES};
use crate::process::{Ending, Event, Place, command_env, shell, spawn};
#[cfg(target_os = "linux")]
use crate::sandbox::pool::Sandboxes;
use crate::sandbox::protected::{Scan, ScanCache};
use crate::sandbox::tmp::SessionTmp;
use crate::sandbox::{HelperPlan, SANDBOX_FAILED, SandboxPlan, TMP, denial, sockets_to_hide};
use crate::vocab::{Content, OutputLimits, ToolOutput};

/// Timeout when none is given.
pub(crate) const DEFAULT_TIMEOUT_MS: u64 = 120_000;
/// Output kept in memory at each end (of the text shown, and of the bytes printed before they
/// go to the spill file).
const KEEP_BYTES: usize = 512 * 1024;
/// How often a running command reports progress (elapsed time and its last line), output or
/// not: at least once a second.
const HEARTBEAT: Duration = Duration::from_millis(900);

/// One command a tool runs: the line, where, and for how long.
#[derive(Debug, Clone)]
pub(crate) struct CommandRun {
    /// The command line, run with the configured shell's `-c`.
    pub(crate) command: String,
    /// The directory to run in, inside the roots (default: the first root).
    pub(crate) workdir: Option<String>,
    /// Stop it after this many milliseconds (default [`DEFAULT_TIMEOUT_MS`]).
    pub(crate) timeout_ms: Option<u64>,
}

/// The structured result of `bash`: a finished command, or one started in the background.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub(crate) struct CommandResult {
    /// The exit code; null while running in the background or after a timeout.
    pub(crate) exit_code: Option<i32>,
    /// It ran out of time and was stopped.
    pub(crate) timed_out: bool,
    /// How long it ran (0 for a command started in the background).
    pub(crate) duration_ms: u64,
    /// It ran in the sandbox.
    pub(crate) sandboxed: bool,
    /// It was started in the background (see `job_id`).
    pub(crate) background: bool,
    /// The background job's id, for `bash_output` and `bash_kill`; null for a finished command.
    pub(crate) job_id: Option<String>,
    /// Bytes the command printed (0 for a command started in the background).
    pub(crate) output_bytes: u64,
}

/// A finished foreground run.
pub(crate) struct Finished {
    command: String,
    /// The text shown (as a terminal shows the output); its spill file, if it will be cut,
    /// holds the bytes printed.
    pub(crate) output: crate::output::LongText,
    /// Bytes the command printed.
    printed: u64,
    pub(crate) ending: Ending,
    duration: Duration,
    sandboxed: bool,
    timeout: Duration,
    pub(crate) notes: Vec<String>,
}

impl Finished {
    /// Why the sandbox probably stopped it, if it did.
    pub(crate) fn blocked_by_sandbox(&self) -> Option<&'static str> {
        let Ending::Exited(code) = self.ending else {
            return None;
        };
        if !self.sandboxed {
            return None;
        }
        denial(code, &format!("{}{}", self.output.head, self.output.tail))
    }

    pub(crate) fn last_lines(&self, n: usize) -> String {
        let text = if self.output.tail.is_empty() {
            &self.output.head
        } else {
            &self.output.tail
        };
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }

    pub(crate) fn into_output(self) -> ToolOutput {
        let seconds = self.duration.as_secs_f64();
        let where_ = if self.sandboxed {
            "sandboxed"
        } else {
            "not sandboxed"
        };
        let (status, exit_code, timed_out) = match self.ending {
            Ending::Exited(0) => (
                format!("exit code 0 · {seconds:.1} s · {where_}"),
                Some(0),
                false,
            ),
            Ending::Exited(code) if code > 128 && code < 128 + 65 => (
                format!(
                    "exit code {code} (ended by signal {}) · {seconds:.1} s · {where_}",
                    code - 128
                ),
                Some(code),
                false,
            ),
            Ending::Exited(code) => (
                format!("exit code {code} (the command failed) · {seconds:.1} s · {where_}"),
                Some(code),
                false,
            ),
            Ending::TimedOut | Ending::Cancelled => (
                format!(
                    "timed out after {:.1} s and was stopped, with everything it started · {where_}; \
                     raise `timeout_ms` or use `run_in_background`",
                    self.timeout.as_secs_f64()
                ),
                None,
                true,
            ),
        };
        let mut footer = format!("[{status}]");
        if self.output.spill.is_some() && self.output.saved < self.printed {
            let _ = write!(
                footer,
                "\n[The command printed {} bytes; the saved log holds the first {} MiB.]",
                self.printed,
                MAX_LOG_BYTES / (1024 * 1024)
            );
        }
        for note in &self.notes {
            let _ = write!(footer, "\n[{note}]");
        }
        let bytes = self.printed;
        let mut content = Vec::with_capacity(2);
        if self.output.total_bytes > 0 {
            content.push(Content::Long(self.output));
        } else if bytes > 0 {
            footer.insert_str(0, "(no visible output: only control sequences)\n");
        } else {
            footer.insert_str(0, "(no output)\n");
        }
        content.push(Content::Text(footer));
        ToolOutput {
            title: Some(self.command.clone()),
            content,
            is_error: timed_out,
            ..ToolOutput::default()
        }
        .with_structured_of(&CommandResult {
            exit_code,
            timed_out,
            duration_ms: u64::try_from(self.duration.as_millis()).unwrap_or(u64::MAX),
            sandboxed: self.sandboxed,
            background: false,
            job_id: None,
            output_bytes: bytes,
        })
    }
}

/// The helper plan of one call, and for a sandboxed one what it protects (to undo what the
/// command planted, after it). Blocking.
pub(crate) fn plan(
    args: &CommandRun,
    ctx: &ToolContext,
    sandboxed: bool,
) -> Result<(HelperPlan, Option<Scan>), ToolError> {
    let workdir = match &args.workdir {
        Some(dir) => ctx.resolve(dir)?.path,
        None => ctx
            .roots()
            .first()
            .map(|r| r.path().to_owned())
            .ok_or(PathError::NoRoots)?,
    };
    let settings = &ctx.env().settings().bash;
    let mut protected = None;
    let sandbox = if sandboxed {
        let roots: Vec<PathBuf> = ctx
            .roots()
            .roots()
            .iter()
            .map(|r| r.path().to_owned())
            .collect();
        let scan = ctx
            .session()
            .state::<ScanCache>()
            .get(ctx.policy().protected(), &roots);
        let tmp = session_tmp(ctx)?;
        let support = ctx.env().exec().support();
        let private_tmp = private_tmp(ctx, sandboxed).then(|| tmp.clone());
        let mut writable = roots;
        writable.push(tmp);
        let unix_sockets = ctx.env().exec().unix_sockets().to_vec();
        // Below Landlock ABI 9 the sockets that listen now are hidden; a new one makes a new
        // sandbox (the plan differs).
        let hidden_sockets = if support.mounts && !support.unix_socket_rules() {
            sockets_to_hide(&writable, &unix_sockets)
        } else {
            Vec::new()
        };
        let plan = SandboxPlan {
            writable,
            read_only: scan.read_only.clone(),
            pinned: scan.pinned.clone(),
            network: settings.network,
            unix_sockets,
            hidden_sockets,
            support,
            private_tmp,
        };
        protected = Some(scan);
        Some(plan)
    } else {
        None
    };
    let plan = HelperPlan {
        shell: shell(settings),
        command: args.command.clone(),
        workdir,
        sandbox,
        stdio: false,
    };
    Ok((plan, protected))
}

/// Whether a command sees the session's temp directory as its `/tmp`
/// ([`SandboxPlan::private_tmp`]): it is sandboxed where mount namespaces work, the machine's
/// `/tmp` is a directory, and no root is `/tmp` or holds it (`--root /`), whose `/tmp` is then
/// the root's own, shared and writable as the rest of it. Roots below `/tmp` are no obstacle:
/// the helper mounts them again inside the private `/tmp`. Blocking.
fn private_tmp(ctx: &ToolContext, sandboxed: bool) -> bool {
    let tmp = std::path::Path::new(TMP);
    sandboxed
        && ctx.env().exec().support().mounts
        && std::fs::symlink_metadata(tmp).is_ok_and(|m| m.is_dir())
        && !ctx
            .roots()
            .roots()
            .iter()
            .any(|root| tmp.starts_with(root.path()))
}

/// For a command that runs outside the sandbox (approved after a denial, or for the session)
/// while this session's sandboxed commands have a `/tmp` of their own, and that names `/tmp`:
/// what it sees there is the machine's `/tmp`, and where the files the sandboxed commands left
/// in theirs are. Blocking.
fn machines_tmp_note(
    command: &str,
    ctx: &ToolContext,
    sandboxed: bool,
) -> Result<Option<String>, ToolError> {
    if sandboxed
        || !command.contains(TMP)
        || !ctx.env().exec().sandboxed()
        || !private_tmp(ctx, true)
    {
        return Ok(None);
    }
    Ok(Some(format!(
        "It ran outside the sandbox, where /tmp is the machine's /tmp: what this session's \
         sandboxed commands wrote to their /tmp is in {}.",
        session_tmp(ctx)?.display()
    )))
}

/// Where a command finds the session's temp directory (its `TMPDIR`), and that directory as
/// the server sees it: `/tmp` inside a sandbox that mounts it there, else the same. Blocking.
pub(crate) fn command_tmp(
    ctx: &ToolContext,
    sandboxed: bool,
) -> Result<(PathBuf, PathBuf), ToolError> {
    let dir = session_tmp(ctx)?;
    let seen = if private_tmp(ctx, sandboxed) {
        PathBuf::from(TMP)
    } else {
        dir.clone()
    };
    Ok((seen, dir))
}

/// Where a command of this plan runs: in one of the session's sandboxes, which stay from
/// command to command, where the kernel gives them a PID namespace of their own; else in a
/// helper of its own.
pub(crate) fn place<'a>(plan: &'a HelperPlan, ctx: &ToolContext) -> Place<'a> {
    #[cfg(not(target_os = "linux"))]
    let _ = ctx;
    match &plan.sandbox {
        #[cfg(target_os = "linux")]
        Some(sandbox) if sandbox.support.mounts && sandbox.support.pid_namespace => {
            Place::Sandbox {
                plan,
                pool: ctx.session().state::<Sandboxes>(),
            }
        }
        _ => Place::Helper(plan),
    }
}

/// The session's private temp directory (0700, removed with the session; see
/// [`crate::sandbox::tmp`]). Blocking.
pub(crate) fn session_tmp(ctx: &ToolContext) -> Result<PathBuf, ToolError> {
    #[derive(Default)]
    struct Tmp(OnceLock<Option<SessionTmp>>);
    let tmp = ctx.session().state::<Tmp>();
    tmp.0
        .get_or_init(|| match SessionTmp::create() {
            Ok(tmp) => Some(tmp),
            Err(err) => {
                tracing::warn!("cannot create the session's temp directory: {err}");
                None
            }
        })
        .as_ref()
        .map(|dir| dir.path().to_owned())
        .ok_or_else(|| ToolError::failed("cannot create the session's temp directory"))
}

/// A command ready to start.
pub(crate) struct Prepared {
    /// The program that runs it.
    pub(crate) helper: PathBuf,
    /// How it runs.
    pub(crate) plan: HelperPlan,
    /// What the sandbox protects, to undo what the command planted, after it.
    pub(crate) protected: Option<Scan>,
    /// Its environment.
    pub(crate) env: Vec<(OsString, OsString)>,
    /// What was undone before it (what running background jobs planted).
    pub(crate) notes: Vec<String>,
}

/// Prepares a command to start, in the foreground or the background: what running background
/// jobs planted is undone first (the protection scan must not take it for the user's own),
/// then the plan, the session's temp directory and the environment. Off the runtime.
pub(crate) async fn prepare(
    run: &CommandRun,
    ctx: &ToolContext,
    sandboxed: bool,
) -> Result<Prepared, ToolError> {
    let helper = ctx
        .env()
        .exec()
        .helper()
        .map(std::path::Path::to_owned)
        .ok_or_else(|| ToolError::failed("no command helper configured"))?;
    let run = run.clone();
    ctx.blocking(move |ctx| {
        let mut notes = ctx.session().state::<Jobs>().undo_planted();
        notes.extend(machines_tmp_note(&run.command, &ctx, sandboxed)?);
        let (plan, protected) = plan(&run, &ctx, sandboxed)?;
        // `TMPDIR` is where the command finds the session's temp directory: `/tmp` where that
        // is mounted there.
        let tmp = match &plan.sandbox {
            Some(sandbox) if sandbox.private_tmp.is_some() => Some(PathBuf::from(TMP)),
            Some(_) => Some(session_tmp(&ctx)?),
            None => None,
        };
        let env = command_env(&ctx.env().settings().bash, tmp.as_deref());
        Ok(Prepared {
            helper,
            plan,
            protected,
            env,
            notes,
        })
    })
    .await
}

/// Runs a command in the foreground. Its output is shown as a terminal would show it
/// ([`crate::terminal`]); `limits` are the ones its result will be cut to
/// ([`ToolContext::result_limits`]), so that when it will be, the bytes it printed are saved
/// for the truncation notice to point to.
pub(crate) async fn run_foreground(
    args: &CommandRun,
    ctx: &ToolContext,
    sandboxed: bool,
    limits: OutputLimits,
) -> Result<Finished, ToolError> {
    let Prepared {
        helper,
        plan,
        protected,
        env,
        mut notes,
    } = prepare(args, ctx, sandboxed).await?;
    let timeout = Duration::from_millis(args.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS));
    let mut running = spawn(&helper, place(&plan, ctx), &env)
        .await
        .map_err(|e| ToolError::io(format!("starting `{}`", args.command), e))?;
    let mut output = CommandOutput::new(ctx.env().spill(), KEEP_BYTES, MAX_LOG_BYTES);
    let mut last_line = String::new();
    let started = Instant::now();
    let outcome = running
        .run(
            Some(Instant::now() + timeout),
            ctx.cancellation(),
            Some(HEARTBEAT),
            |event| match event {
                Event::Output(bytes) => {
                    output.push(bytes);
                    // The last line with text, as a terminal shows it.
                    if let Some(line) = bytes
                        .split(|&b| b == b'\n')
                        .rev()
                        .map(crate::terminal::render)
                        .find(|l| !l.trim().is_empty())
                    {
                        last_line = line.trim_end().chars().take(200).collect();
                    }
                }
                // A heartbeat, output or not: hosts that time out a call without progress
                // (and HTTP sessions' idle timers) keep waiting, and the user sees it live.
                Event::Tick => {
                    let elapsed = started.elapsed();
                    let message = if last_line.is_empty() {
                        format!("running for {} s", elapsed.as_secs())
                    } else {
                        format!("running for {} s: {last_line}", elapsed.as_secs())
                    };
                    ctx.progress(ProgressUpdate {
                        progress: Some(elapsed.as_secs_f64()),
                        message: Some(message),
                        ..ProgressUpdate::default()
                    });
                }
            },
        )
        .await;
    if outcome.ending == Ending::Cancelled {
        return Err(ToolError::Cancelled);
    }
    if let Some(protected) = protected {
        notes.extend(ctx.blocking(move |_| Ok(protected.undo_planted())).await?);
    }
    let (output, printed) = output.finish(|text| limits.fits(text));
    if let Ending::Exited(code) = outcome.ending
        && code == SANDBOX_FAILED
        && output
            .head
            .starts_with("gimlet: the sandbox could not be enforced")
    {
        return Err(ToolError::failed(output.head.trim().to_owned()));
    }
    Ok(Finished {
        command: args.command.clone(),
        output,
        printed,
        ending: outcome.ending,
        duration: outcome.duration,
        sandboxed,
        timeout,
        notes,
    })
}
