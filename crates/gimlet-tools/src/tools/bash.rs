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

use crate::context::{ProgressUpdate, SandboxStatus, ToolContext, ToolEnv};
use crate::error::ToolError;
use crate::fs::PathError;
use crate::jobs::Jobs;
use crate::output::OutputBuffer;
use crate::permission::{Access, AskReason, Permission};
use crate::process::{Ending, command_env, shell, spawn};
use crate::sandbox::{HelperPlan, SANDBOX_FAILED, SandboxPlan, SandboxSetting, protected_paths};
use crate::shell::split_command;
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
/// The saved log of one command stops growing here (a flood must not fill the disk).
pub(crate) const MAX_LOG_BYTES: u64 = 64 * 1024 * 1024;

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
                 folders and $TMPDIR, and have no network. `.git/hooks`, `.git/config`, `.mcp.json`, \
                 `.vscode/`, `.claude/` and `.gimlet*` are read-only. A command the sandbox blocks \
                 says so, and can be run again outside it with the user's approval."
            }
            SandboxStatus::Off => "\n\nCommands run without a sandbox (--sandbox off).",
            SandboxStatus::Unavailable => {
                "\n\nCommands run without a sandbox (this system cannot enforce one)."
            }
        };
        format!("{DESCRIPTION}{sandbox}").into()
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
        Ok(vec![Access::Execute {
            command: args.command.clone(),
            parts: split_command(&args.command),
            sandboxed: self.sandboxed(ctx.env()),
        }])
    }

    async fn execute(&self, args: BashArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let sandboxed = self.sandboxed(ctx.env());
        if args.run_in_background.unwrap_or(false) {
            return start_background(&args, ctx, sandboxed).await;
        }
        let first = run_foreground(&args, ctx, sandboxed).await?;
        let Some(cause) = first.blocked_by_sandbox() else {
            return Ok(first.into_output());
        };
        // The sandbox seems to have stopped it: offer to run it again outside, if allowed.
        match rerun_permission(&args, ctx, cause, &first).await {
            Ok(()) => {
                let mut second = run_foreground(&args, ctx, false).await?;
                second.notes.push(format!("It first ran in the sandbox and failed ({cause}); it ran again outside the sandbox, as approved."));
                Ok(second.into_output())
            }
            Err(ToolError::Cancelled) => Err(ToolError::Cancelled),
            Err(refused) => {
                let mut first = first;
                first.notes.push(format!(
                    "This looks blocked by the sandbox ({cause}). Running it outside the sandbox was not approved: {refused}"
                ));
                Ok(first.into_output())
            }
        }
    }
}

/// Asks (through the policy and `ctx.ask`) to run the command again outside the sandbox.
async fn rerun_permission(
    args: &BashArgs,
    ctx: &ToolContext,
    cause: &str,
    first: &Finished,
) -> Result<(), ToolError> {
    let access = Access::Execute {
        command: args.command.clone(),
        parts: split_command(&args.command),
        sandboxed: false,
    };
    let mut permission = ctx.policy().judge(
        BashTool::NAME,
        BashTool::default().flags(None),
        &[access],
        ctx,
    );
    if let Permission::Ask(request) = &mut permission {
        request.reason = AskReason::Unsandboxed;
        request.summary = format!("run `{}` again, outside the sandbox", args.command);
        request.detail = Some(format!(
            "It failed inside the sandbox ({cause}). Its last output:\n{}",
            first.last_lines(8)
        ));
    }
    crate::pipeline::authorize(permission, ctx).await
}

/// Output that suggests the sandbox stopped a command, and what it probably stopped.
const SANDBOX_SIGNS: &[(&str, &str)] = &[
    ("Read-only file system", "a write to a protected path"),
    ("Could not resolve host", "a network connection"),
    (
        "Temporary failure in name resolution",
        "a network connection",
    ),
    ("Network is unreachable", "a network connection"),
    (
        "Operation not permitted",
        "a write outside the root folders or a network connection",
    ),
    ("Permission denied", "a write outside the root folders"),
];

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
    fn blocked_by_sandbox(&self) -> Option<&'static str> {
        if !self.sandboxed || !matches!(self.ending, Ending::Exited(code) if code != 0) {
            return None;
        }
        let text = format!("{}{}", self.output.head, self.output.tail);
        SANDBOX_SIGNS
            .iter()
            .find(|(sign, _)| text.contains(sign))
            .map(|(_, cause)| *cause)
    }

    fn last_lines(&self, n: usize) -> String {
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

/// The helper plan of one call, and the protected paths that did not exist before it.
fn plan(
    args: &BashArgs,
    ctx: &ToolContext,
    sandboxed: bool,
) -> Result<(HelperPlan, Vec<PathBuf>), ToolError> {
    let workdir = match &args.workdir {
        Some(dir) => ctx.resolve(dir)?.path,
        None => ctx
            .roots()
            .first()
            .map(|r| r.path().to_owned())
            .ok_or_else(|| ToolError::failed("no root folder"))?,
    };
    let settings = &ctx.env().settings().bash;
    let mut missing = Vec::new();
    let sandbox = if sandboxed {
        let mut writable: Vec<PathBuf> = ctx
            .roots()
            .roots()
            .iter()
            .map(|r| r.path().to_owned())
            .collect();
        writable.push(session_tmp(ctx)?);
        let mut read_only = Vec::new();
        for root in ctx.roots().roots() {
            let (existing, absent) = protected_paths(root.path());
            read_only.extend(existing);
            missing.extend(absent);
        }
        Some(SandboxPlan {
            writable,
            read_only,
            network: settings.network,
        })
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
    Ok((plan, missing))
}

/// The session's private temp directory (removed with the session).
pub(super) fn session_tmp(ctx: &ToolContext) -> Result<PathBuf, ToolError> {
    #[derive(Default)]
    struct SessionTmp(OnceLock<Option<tempfile::TempDir>>);
    let tmp = ctx.session().state::<SessionTmp>();
    tmp.0
        .get_or_init(|| {
            tempfile::Builder::new()
                .prefix("gimlet-tmp-")
                .tempdir()
                .ok()
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
    let (plan, missing, env) = {
        let args = args.clone();
        ctx.blocking(move |ctx| {
            let (plan, missing) = plan(&args, &ctx, sandboxed)?;
            let tmp = if sandboxed {
                Some(session_tmp(&ctx)?)
            } else {
                None
            };
            let env = command_env(&ctx.env().settings().bash, tmp.as_deref());
            Ok((plan, missing, env))
        })
        .await?
    };
    let timeout = Duration::from_millis(args.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS));
    let mut running = spawn(&helper, &plan, &env)
        .map_err(|e| ToolError::io(format!("starting `{}`", args.command), e))?;
    let mut output = OutputBuffer::new(ctx.env().spill(), KEEP_BYTES).with_max_spill(MAX_LOG_BYTES);
    let mut last_line = String::new();
    let mut last_progress = Instant::now();
    let started = Instant::now();
    let outcome = running
        .run(
            Some(Instant::now() + timeout),
            ctx.cancellation(),
            |bytes| {
                output.push_bytes(bytes);
                if let Some(line) = String::from_utf8_lossy(bytes)
                    .lines()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                {
                    last_line = line.chars().take(200).collect();
                }
                if last_progress.elapsed() >= Duration::from_secs(1) {
                    last_progress = Instant::now();
                    ctx.progress(ProgressUpdate {
                        message: Some(format!("{}s: {last_line}", started.elapsed().as_secs())),
                        ..ProgressUpdate::default()
                    });
                }
            },
        )
        .await;
    if outcome.ending == Ending::Cancelled {
        return Err(ToolError::Cancelled);
    }
    let mut notes = Vec::new();
    if sandboxed {
        notes.extend(ctx.blocking(move |_| Ok(remove_created(&missing))).await?);
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

/// Protected paths may not be created by sandboxed commands: those that appeared are removed.
fn remove_created(missing: &[PathBuf]) -> Vec<String> {
    let mut notes = Vec::new();
    for path in missing {
        let Ok(meta) = std::fs::symlink_metadata(path) else {
            continue;
        };
        let removed = if meta.is_dir() {
            std::fs::remove_dir_all(path)
        } else {
            std::fs::remove_file(path)
        };
        notes.push(match removed {
            Ok(()) => format!("The command created {}, a protected path that sandboxed commands may not create; it was removed", path.display()),
            Err(err) => format!("The command created {}, a protected path; removing it failed: {err}", path.display()),
        });
    }
    notes
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
    let (plan, env) = {
        let args = args.clone();
        ctx.blocking(move |ctx| {
            let (plan, _) = plan(&args, &ctx, sandboxed)?;
            let tmp = if sandboxed {
                Some(session_tmp(&ctx)?)
            } else {
                None
            };
            Ok((
                plan,
                command_env(&ctx.env().settings().bash, tmp.as_deref()),
            ))
        })
        .await?
    };
    let running = spawn(&helper, &plan, &env)
        .map_err(|e| ToolError::io(format!("starting `{}`", args.command), e))?;
    let jobs = ctx.session().state::<Jobs>();
    let job = jobs.start(running, args.command.clone(), sandboxed, ctx.env().spill());
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
