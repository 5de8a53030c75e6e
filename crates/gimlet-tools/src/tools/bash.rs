//! `bash`: run a shell command that returns on time, leaves no process behind, and on Linux
//! runs sandboxed.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::output::MAX_LOG_BYTES;
use crate::context::{ProgressUpdate, SandboxStatus, ToolContext, ToolEnv};
use crate::error::ToolError;
use crate::fs::PathError;
use crate::jobs::Jobs;
use crate::output::OutputBuffer;
use crate::permission::Access;
use crate::process::{Ending, Event, Place, command_env, shell, spawn};
use crate::sandbox::pool::Sandboxes;
use crate::sandbox::protected::{Scan, ScanCache};
use crate::sandbox::tmp::SessionTmp;
use crate::sandbox::{
    HelperPlan, OutsideGrants, SANDBOX_FAILED, SandboxDenied, SandboxPlan, SandboxSetting, denial,
    sockets_to_hide,
};
use crate::tool::{
    Content, InterruptBehavior, JsonObject, OutputLimits, Tool, ToolFlags, ToolOutput,
    TruncationMode,
};

const DESCRIPTION: &str = include_str!("bash.md");

/// Timeout when none is given.
pub(crate) const DEFAULT_TIMEOUT_MS: u64 = 120_000;
/// The longest timeout allowed.
pub(crate) const MAX_TIMEOUT_MS: u64 = 600_000;
/// Output kept in memory at each end; the rest goes to the spill file.
const KEEP_BYTES: usize = 512 * 1024;
/// How often a running command reports progress (elapsed time and its last line), output or
/// not: at least once a second.
const HEARTBEAT: Duration = Duration::from_millis(900);

/// Arguments of `bash`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BashArgs {
    /// The command line, run with `bash -c`.
    pub command: String,
    /// Stop the command after this many milliseconds (default 120000, at most 600000).
    pub timeout_ms: Option<u64>,
    /// The directory to run in, inside the roots (default: the first root).
    pub workdir: Option<String>,
    /// What the command does, in a few words (shown to the user).
    pub description: Option<String>,
    /// Start it in the background and return at once with a job id for `bash_output` and
    /// `bash_kill` (for servers and watchers).
    pub run_in_background: Option<bool>,
}

/// The `bash` tool.
#[derive(Debug, Default)]
pub struct BashTool {
    sandbox: OnceLock<SandboxStatus>,
}

impl BashTool {
    fn sandboxed(&self, env: &ToolEnv) -> bool {
        *self.sandbox.get_or_init(|| env.sandbox()) == SandboxStatus::Enforced
    }
}

impl Tool for BashTool {
    type Args = BashArgs;
    const NAME: &'static str = "bash";
    const TITLE: &'static str = "Run shell command";

    async fn init(&self, env: &ToolEnv) {
        // The sandbox probe runs in the background since start; wait for it off the runtime.
        let _ = self.sandbox.set(env.sandbox_settled().await);
    }

    fn description(&self, env: &ToolEnv) -> Cow<'static, str> {
        let sandbox = match self.sandbox.get().copied().unwrap_or_else(|| env.sandbox()) {
            SandboxStatus::Enforced => {
                "\n\nCommands run in a sandbox: they can read anything, but write only inside the root \
                 folders and $TMPDIR, and have no network. Files that make git, editors, agents or \
                 shells run code later are read-only (git's config and hooks, `.mcp.json`, \
                 `.vscode/`, `.claude/`, `.gitattributes`, `.envrc`, `.npmrc` ...); `git add`, \
                 `commit`, `checkout` and `stash` work. A command the sandbox blocks says so, and \
                 can be run again outside it with the user's approval."
            }
            SandboxStatus::Off => "\n\nCommands run without a sandbox (--sandbox off).",
            SandboxStatus::Unavailable => {
                "\n\nCommands run without a sandbox (this system cannot enforce one)."
            }
        };
        let status = self.sandbox.get().copied().unwrap_or_else(|| env.sandbox());
        let gaps = if status == SandboxStatus::Enforced {
            env.exec().support().gaps()
        } else {
            Vec::new()
        };
        if gaps.is_empty() {
            format!("{DESCRIPTION}{sandbox}").into()
        } else {
            format!(
                "{DESCRIPTION}{sandbox} On this system: {}.",
                gaps.join("; ")
            )
            .into()
        }
    }

    fn enabled(&self, env: &ToolEnv) -> bool {
        env.exec().helper().is_some()
    }

    fn flags(&self, _args: Option<&BashArgs>) -> ToolFlags {
        ToolFlags {
            concurrency_safe: false,
            read_only: false,
            destructive: true,
            idempotent: false,
            open_world: true,
            interrupt: InterruptBehavior::Cancel,
        }
    }

    fn output_limits(&self, env: &ToolEnv) -> OutputLimits {
        OutputLimits {
            mode: TruncationMode::HeadTail,
            ..env.limits()
        }
    }

    fn output_schema(&self) -> Option<JsonObject> {
        Some(crate::schema::object(json!({
            "type": "object",
            "properties": {
                "exit_code": {"type": ["integer", "null"], "description": "null while running in the background or after a timeout"},
                "timed_out": {"type": "boolean"},
                "duration_ms": {"type": "integer"},
                "sandboxed": {"type": "boolean"},
                "background": {"type": "boolean"},
                "job_id": {"type": ["string", "null"]},
                "output_bytes": {"type": "integer"},
            },
            "required": ["exit_code", "timed_out", "duration_ms", "sandboxed", "background", "job_id", "output_bytes"],
        })))
    }

    async fn validate(&self, args: BashArgs, ctx: &ToolContext) -> Result<BashArgs, ToolError> {
        if args.command.trim().is_empty() {
            return Err(ToolError::invalid("`command` is empty"));
        }
        match args.timeout_ms {
            Some(0) => return Err(ToolError::invalid("`timeout_ms` must be at least 1")),
            Some(ms) if ms > MAX_TIMEOUT_MS => {
                return Err(ToolError::invalid(format!(
                    "`timeout_ms` may be at most {MAX_TIMEOUT_MS} (10 minutes); for longer commands use \
                     `run_in_background` and read the output with `bash_output`"
                )));
            }
            _ => {}
        }
        if let Some(workdir) = &args.workdir {
            let workdir = workdir.clone();
            ctx.blocking(move |ctx| {
                let resolved = ctx.resolve(&workdir)?;
                if !resolved.is_inside() {
                    return Err(ToolError::invalid(format!(
                        "`workdir` `{workdir}` is outside the root folders ({}); commands run inside them",
                        ctx.roots().describe()
                    )));
                }
                match resolved.open_existing_dir() {
                    Ok(_) => Ok(()),
                    Err(PathError::NotADirectory { .. }) => Err(ToolError::invalid(format!(
                        "`workdir` `{workdir}` is a file, not a directory"
                    ))),
                    Err(err) => Err(ToolError::invalid(format!("`workdir`: {err}"))),
                }
            })
            .await?;
        }
        if ctx.env().exec().setting() == SandboxSetting::On && !self.sandboxed(ctx.env()) {
            return Err(ToolError::failed(
                "the sandbox cannot be enforced on this system (it needs Landlock and seccomp) and gimlet \
                 runs with --sandbox on, so commands are refused; use --sandbox auto to run them unsandboxed",
            ));
        }
        Ok(args)
    }

    async fn accesses(&self, args: &BashArgs, ctx: &ToolContext) -> Result<Vec<Access>, ToolError> {
        Ok(vec![Access::command(
            &args.command,
            self.sandboxed(ctx.env()),
        )])
    }

    async fn execute(&self, args: BashArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let mut sandboxed = self.sandboxed(ctx.env());
        let mut note = None;
        if sandboxed
            && ctx
                .session()
                .state::<OutsideGrants>()
                .covers(Self::NAME, &Access::command(&args.command, false))
        {
            // The user allowed this command outside the sandbox for the session.
            sandboxed = false;
            note = Some(String::from(
                "It ran outside the sandbox, as the user allowed for this session.",
            ));
        }
        if args.run_in_background.unwrap_or(false) {
            return start_background(&args, ctx, sandboxed).await;
        }
        let mut first = run_foreground(&args, ctx, sandboxed).await?;
        first.notes.extend(note);
        let Some(cause) = first.blocked_by_sandbox() else {
            return Ok(first.into_output());
        };
        // The sandbox seems to have stopped it: the pipeline decides whether it runs again
        // outside.
        let last_lines = first.last_lines(8);
        Err(ToolError::SandboxDenied(Box::new(SandboxDenied {
            command: args.command.clone(),
            access: Access::command(&args.command, false),
            cause,
            last_lines,
            output: first.into_output(),
            rerun: Box::new(move |ctx| {
                Box::pin(async move { Ok(run_foreground(&args, ctx, false).await?.into_output()) })
            }),
        })))
    }
}

/// A finished foreground run.
pub(super) struct Finished {
    command: String,
    pub(super) output: crate::output::LongText,
    pub(super) ending: Ending,
    duration: Duration,
    sandboxed: bool,
    timeout: Duration,
    notes: Vec<String>,
}

impl Finished {
    /// Why the sandbox probably stopped it, if it did.
    pub(super) fn blocked_by_sandbox(&self) -> Option<&'static str> {
        let Ending::Exited(code) = self.ending else {
            return None;
        };
        if !self.sandboxed {
            return None;
        }
        denial(code, &format!("{}{}", self.output.head, self.output.tail))
    }

    pub(super) fn last_lines(&self, n: usize) -> String {
        let text = if self.output.tail.is_empty() {
            &self.output.head
        } else {
            &self.output.tail
        };
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }

    fn into_output(self) -> ToolOutput {
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
        if self.output.spill.is_some() && self.output.saved < self.output.total_bytes {
            let _ = write!(
                footer,
                "\n[The command printed {} bytes; the saved log holds the first {} MiB.]",
                self.output.total_bytes,
                MAX_LOG_BYTES / (1024 * 1024)
            );
        }
        for note in &self.notes {
            let _ = write!(footer, "\n[{note}]");
        }
        let bytes = self.output.total_bytes;
        let mut content = Vec::with_capacity(2);
        if bytes > 0 {
            content.push(Content::Long(self.output));
        } else {
            footer.insert_str(0, "(no output)\n");
        }
        content.push(Content::Text(footer));
        ToolOutput {
            title: Some(self.command.clone()),
            content,
            structured: Some(json!({
                "exit_code": exit_code,
                "timed_out": timed_out,
                "duration_ms": u64::try_from(self.duration.as_millis()).unwrap_or(u64::MAX),
                "sandboxed": self.sandboxed,
                "background": false,
                "job_id": Value::Null,
                "output_bytes": bytes,
            })),
            is_error: timed_out,
            ..ToolOutput::default()
        }
    }
}

/// The helper plan of one call, and for a sandboxed one what it protects (to undo what the
/// command planted, after it). Blocking.
fn plan(
    args: &BashArgs,
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
        let mut writable = roots;
        writable.push(session_tmp(ctx)?);
        let support = ctx.env().exec().support();
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

/// Where a command of this plan runs: in one of the session's sandboxes, which stay from
/// command to command, where the kernel gives them a PID namespace of their own; else in a
/// helper of its own.
fn place<'a>(plan: &'a HelperPlan, ctx: &ToolContext) -> Place<'a> {
    match &plan.sandbox {
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
pub(super) fn session_tmp(ctx: &ToolContext) -> Result<PathBuf, ToolError> {
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

pub(super) async fn run_foreground(
    args: &BashArgs,
    ctx: &ToolContext,
    sandboxed: bool,
) -> Result<Finished, ToolError> {
    let helper = ctx
        .env()
        .exec()
        .helper()
        .map(std::path::Path::to_owned)
        .ok_or_else(|| ToolError::failed("no command helper configured"))?;
    let (plan, protected, env, mut notes) = {
        let args = args.clone();
        ctx.blocking(move |ctx| {
            // What running background jobs planted goes first: the scan must not take it for
            // the user's own.
            let notes = ctx.session().state::<Jobs>().undo_planted();
            let (plan, protected) = plan(&args, &ctx, sandboxed)?;
            let tmp = if sandboxed {
                Some(session_tmp(&ctx)?)
            } else {
                None
            };
            let env = command_env(&ctx.env().settings().bash, tmp.as_deref());
            Ok((plan, protected, env, notes))
        })
        .await?
    };
    let timeout = Duration::from_millis(args.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS));
    let mut running = spawn(&helper, place(&plan, ctx), &env)
        .await
        .map_err(|e| ToolError::io(format!("starting `{}`", args.command), e))?;
    let mut output = OutputBuffer::new(ctx.env().spill(), KEEP_BYTES).with_max_spill(MAX_LOG_BYTES);
    let mut last_line = String::new();
    let started = Instant::now();
    let outcome = running
        .run(
            Some(Instant::now() + timeout),
            ctx.cancellation(),
            Some(HEARTBEAT),
            |event| match event {
                Event::Output(bytes) => {
                    output.push_bytes(bytes);
                    if let Some(line) = String::from_utf8_lossy(bytes)
                        .lines()
                        .rev()
                        .find(|l| !l.trim().is_empty())
                    {
                        last_line = line.chars().take(200).collect();
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
    let output = output.finish();
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
        ending: outcome.ending,
        duration: outcome.duration,
        sandboxed,
        timeout,
        notes,
    })
}

async fn start_background(
    args: &BashArgs,
    ctx: &ToolContext,
    sandboxed: bool,
) -> Result<ToolOutput, ToolError> {
    let helper = ctx
        .env()
        .exec()
        .helper()
        .map(std::path::Path::to_owned)
        .ok_or_else(|| ToolError::failed("no command helper configured"))?;
    let (plan, protected, env) = {
        let args = args.clone();
        ctx.blocking(move |ctx| {
            let (plan, protected) = plan(&args, &ctx, sandboxed)?;
            let tmp = if sandboxed {
                Some(session_tmp(&ctx)?)
            } else {
                None
            };
            Ok((
                plan,
                protected,
                command_env(&ctx.env().settings().bash, tmp.as_deref()),
            ))
        })
        .await?
    };
    let running = spawn(&helper, place(&plan, ctx), &env)
        .await
        .map_err(|e| ToolError::io(format!("starting `{}`", args.command), e))?;
    let jobs = ctx.session().state::<Jobs>();
    let job = jobs.start(running, args.command.clone(), protected, ctx.env().spill());
    let where_ = if sandboxed {
        "sandboxed"
    } else {
        "not sandboxed"
    };
    let text = format!(
        "Started `{}` in the background as {} ({where_}). Read its output with bash_output {{\"job_id\": \"{}\"}}; \
         stop it with bash_kill. It stops when the session ends.",
        args.command, job.id, job.id
    );
    Ok(ToolOutput::text(text)
        .with_title(args.command.clone())
        .with_structured(json!({
            "exit_code": Value::Null,
            "timed_out": false,
            "duration_ms": 0,
            "sandboxed": sandboxed,
            "background": true,
            "job_id": job.id,
            "output_bytes": 0,
        })))
}

// bash is tested end to end, through a real process and sandbox: tests/suite/bash.rs.
