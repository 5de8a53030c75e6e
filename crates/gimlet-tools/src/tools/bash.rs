//! `bash`: run a shell command that returns on time, leaves no process behind, and on Linux
//! runs sandboxed.

use std::borrow::Cow;
use std::sync::OnceLock;

use schemars::JsonSchema;
use serde::Deserialize;

use crate::context::{SandboxStatus, ToolContext, ToolEnv};
use crate::error::{SandboxDenied, ToolError};
use crate::fs::PathError;
use crate::jobs::Jobs;
use crate::permission::{Access, OutsideGrants};
use crate::process::spawn;
use crate::run::{CommandResult, CommandRun, Prepared, place, prepare, run_foreground};
use crate::sandbox::SandboxSetting;
use crate::tool::Tool;
use crate::vocab::{
    InterruptBehavior, JsonObject, OutputLimits, ToolFlags, ToolOutput, TruncationMode,
};

const DESCRIPTION: &str = include_str!("bash.md");

/// The longest timeout allowed.
pub(crate) const MAX_TIMEOUT_MS: u64 = 600_000;

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
            SandboxStatus::Enforced if cfg!(target_os = "macos") => {
                "\n\nCommands run in a sandbox (macOS Seatbelt): they can read anything, but write \
                 only inside the root folders and $TMPDIR (this session's own temp folder, removed \
                 when the session ends; the machine's /tmp is read-only), and have no network. \
                 Files that make git, editors, agents or shells run code later are read-only \
                 (git's config and hooks, `.mcp.json`, `.vscode/`, `.claude/`, `.gitattributes`, \
                 `.envrc`, `.npmrc` ...); `git add`, `commit`, `checkout` and `stash` work. A \
                 command the sandbox blocks says so, and can be run again outside it with the \
                 user's approval."
            }
            SandboxStatus::Enforced => {
                "\n\nCommands run in a sandbox: they can read anything, but write only inside the root \
                 folders and /tmp, and have no network. /tmp (also $TMPDIR) is this session's own: \
                 empty at first, shared by its commands, removed when the session ends; the \
                 machine's /tmp is not visible. Files that make git, editors, agents or \
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
        let shell = shell_note(&crate::process::shell(&env.settings().bash));
        if gaps.is_empty() {
            format!("{DESCRIPTION}{sandbox}{shell}").into()
        } else {
            format!(
                "{DESCRIPTION}{sandbox} On this system: {}.{shell}",
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
        Some(crate::schema::output_schema::<CommandResult>())
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
        let limits = ctx.result_limits(self.output_limits(ctx.env()));
        let mut first = run_foreground(&CommandRun::from(&args), ctx, sandboxed, limits).await?;
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
            rerun: {
                let ctx = ctx.clone();
                Box::new(move || {
                    Box::pin(async move {
                        Ok(
                            run_foreground(&CommandRun::from(&args), &ctx, false, limits)
                                .await?
                                .into_output(),
                        )
                    })
                })
            },
        })))
    }
}

impl From<&BashArgs> for CommandRun {
    fn from(args: &BashArgs) -> Self {
        Self {
            command: args.command.clone(),
            workdir: args.workdir.clone(),
            timeout_ms: args.timeout_ms,
        }
    }
}

async fn start_background(
    args: &BashArgs,
    ctx: &ToolContext,
    sandboxed: bool,
) -> Result<ToolOutput, ToolError> {
    let Prepared {
        helper,
        plan,
        protected,
        env,
        notes,
    } = prepare(&CommandRun::from(args), ctx, sandboxed).await?;
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
    let mut text = format!(
        "Started `{}` in the background as {} ({where_}). Read its output with bash_output {{\"job_id\": \"{}\"}}; \
         stop it with bash_kill. It stops when the session ends.",
        args.command, job.id, job.id
    );
    for note in notes {
        text.push('\n');
        text.push_str(&note);
    }
    Ok(ToolOutput::text(text)
        .with_title(args.command.clone())
        .with_structured_of(&CommandResult {
            exit_code: None,
            timed_out: false,
            duration_ms: 0,
            sandboxed,
            background: true,
            job_id: Some(job.id.clone()),
            output_bytes: 0,
        }))
}

// bash is tested end to end, through a real process and sandbox: tests/suite/bash.rs.
/// What the description says of the shell commands run in: its path, and, for a shell that
/// is not POSIX (PowerShell, `cmd` on Windows), that commands are written in its language.
fn shell_note(shell: &std::path::Path) -> String {
    let name = shell
        .file_stem()
        .map(|s| s.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    let language = match name.as_str() {
        "pwsh" | "powershell" => {
            " It is PowerShell, not bash: write PowerShell commands (`Get-ChildItem`, `;` between \
             commands, `$env:NAME`)."
        }
        "cmd" => " It is cmd.exe, not bash: write cmd commands (`dir`, `&&`, `%NAME%`).",
        _ => "",
    };
    let file = shell.file_name().map_or_else(
        || shell.display().to_string(),
        |f| f.to_string_lossy().into_owned(),
    );
    format!("\n\nCommands run in `{file}`.{language}")
}
