//! [`CommandTool`]: a tool declared in the config file (`[[plugins]]`) that runs a command.
//!
//! The command gets the call's arguments as JSON on stdin and prints the result on stdout.
//! It runs the way `bash` runs a command: in the first root, in the sandbox when there is one,
//! with the same timeout, cancellation, output bounds and credential-free environment. Its
//! stderr is kept apart and shown only when it fails. When the sandbox stopped it, the
//! pipeline asks whether to run it again outside, as for `bash`. The arguments are checked against the
//! declared JSON schema before anything runs.

use std::borrow::Cow;
use std::sync::OnceLock;

use serde_json::Value;

use crate::config::PluginConfig;
use crate::context::ask::BoxFuture;
use crate::context::{SandboxStatus, ToolContext, ToolEnv};
use crate::error::{SandboxDenied, ToolError};
use crate::permission::Access;
use crate::process::Ending;
use crate::registry::{DynTool, ErasedArgs};
use crate::sandbox::denial;
use crate::vocab::{Content, InterruptBehavior, JsonObject, OutputLimits, ToolFlags, ToolOutput};

use crate::run::{CommandRun, command_tmp, run_foreground};

/// A config-declared tool.
pub struct CommandTool {
    name: String,
    title: String,
    description: String,
    command: String,
    schema: JsonObject,
    validator: jsonschema::Validator,
    flags: ToolFlags,
    timeout_s: u64,
    sandbox: OnceLock<SandboxStatus>,
}

impl std::fmt::Debug for CommandTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommandTool")
            .field("name", &self.name)
            .field("command", &self.command)
            .finish_non_exhaustive()
    }
}

/// A `[[plugins]]` entry that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("plugin tool `{name}`: {message}")]
pub struct PluginConfigError {
    name: String,
    message: String,
}

/// The longest timeout a plugin may declare (as `bash`'s maximum).
const MAX_TIMEOUT_S: u64 = 600;

impl CommandTool {
    /// Checks a config entry: the name, the schema (which must compile), the timeout.
    pub fn new(config: &PluginConfig) -> Result<Self, PluginConfigError> {
        let error = |message: String| PluginConfigError {
            name: config.name.clone(),
            message,
        };
        let name_ok = !config.name.is_empty()
            && config.name.len() <= 64
            && config
                .name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !name_ok {
            return Err(error(String::from(
                "the name must be 1 to 64 letters, digits, `_` or `-`",
            )));
        }
        if config.command.trim().is_empty() {
            return Err(error(String::from("the command is empty")));
        }
        if config.timeout_s == 0 || config.timeout_s > MAX_TIMEOUT_S {
            return Err(error(format!(
                "timeout_s must be between 1 and {MAX_TIMEOUT_S}"
            )));
        }
        let schema = match &config.input_schema {
            None => {
                let mut schema = JsonObject::new();
                schema.insert("type".into(), Value::from("object"));
                schema.insert("properties".into(), Value::Object(JsonObject::new()));
                schema
            }
            Some(Value::Object(schema)) => {
                if schema.get("type").and_then(Value::as_str) != Some("object") {
                    return Err(error(String::from(
                        "input_schema must have `type = \"object\"` (MCP tools take an object)",
                    )));
                }
                schema.clone()
            }
            Some(_) => return Err(error(String::from("input_schema must be a table"))),
        };
        let validator = jsonschema::validator_for(&Value::Object(schema.clone()))
            .map_err(|e| error(format!("input_schema is not a valid JSON schema: {e}")))?;
        Ok(Self {
            name: config.name.clone(),
            title: config.title.clone().unwrap_or_else(|| config.name.clone()),
            description: config.description.clone(),
            command: config.command.clone(),
            schema,
            validator,
            flags: ToolFlags {
                concurrency_safe: config.concurrency_safe,
                read_only: config.read_only,
                destructive: config.destructive,
                idempotent: false,
                open_world: config.open_world,
                interrupt: InterruptBehavior::Cancel,
            },
            timeout_s: config.timeout_s,
            sandbox: OnceLock::new(),
        })
    }

    fn sandboxed(&self, env: &ToolEnv) -> bool {
        *self.sandbox.get_or_init(|| env.sandbox()) == SandboxStatus::Enforced
    }
}

/// `'text'` for the shell.
fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

impl DynTool for CommandTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn title(&self) -> &str {
        &self.title
    }

    fn init<'a>(&'a self, env: &'a ToolEnv) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            // The sandbox probe runs in the background since start; wait for it off the runtime.
            let _ = self.sandbox.set(env.sandbox_settled().await);
        })
    }

    fn description(&self, _env: &ToolEnv) -> Cow<'static, str> {
        Cow::Owned(self.description.clone())
    }

    fn instructions(&self, _env: &ToolEnv) -> Option<Cow<'static, str>> {
        None
    }

    fn enabled(&self, env: &ToolEnv) -> bool {
        env.exec().helper().is_some()
    }

    fn input_schema(&self) -> JsonObject {
        self.schema.clone()
    }

    fn output_schema(&self) -> Option<JsonObject> {
        None
    }

    fn flags(&self, _args: Option<&ErasedArgs>) -> ToolFlags {
        self.flags
    }

    fn output_limits(&self, env: &ToolEnv) -> OutputLimits {
        env.limits()
    }

    fn parse(&self, args: Value) -> Result<ErasedArgs, ToolError> {
        let problems: Vec<String> = self
            .validator
            .iter_errors(&args)
            .take(5)
            .map(|e| {
                let at = e.instance_path.to_string();
                if at.is_empty() {
                    e.to_string()
                } else {
                    format!("at `{at}`: {e}")
                }
            })
            .collect();
        if problems.is_empty() {
            Ok(ErasedArgs::new(args))
        } else {
            Err(ToolError::InvalidArguments {
                tool: self.name.clone(),
                message: format!(
                    "{}. Fix the arguments to match the tool's input schema",
                    problems.join("; ")
                ),
            })
        }
    }

    fn validate<'a>(
        &'a self,
        args: ErasedArgs,
        _ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<ErasedArgs, ToolError>> {
        Box::pin(async move { Ok(args) })
    }

    fn accesses<'a>(
        &'a self,
        _args: &'a ErasedArgs,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<Vec<Access>, ToolError>> {
        Box::pin(async move {
            // A read-only tool touches nothing; any other runs its command, judged as `bash`
            // judges one (strict mode asks, rules on the tool or its commands apply).
            Ok(if self.flags.read_only {
                Vec::new()
            } else {
                vec![Access::command(&self.command, self.sandboxed(ctx.env()))]
            })
        })
    }

    fn execute<'a>(
        &'a self,
        args: ErasedArgs,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let args = args.downcast::<Value>()?;
            let run = PluginRun {
                name: self.name.clone(),
                title: self.title.clone(),
                command: self.command.clone(),
                timeout_s: self.timeout_s,
                limits: ctx.result_limits(DynTool::output_limits(self, ctx.env())),
            };
            run.run(args, ctx, self.sandboxed(ctx.env())).await
        })
    }
}

/// One call of a plugin tool: what it needs to run (again, outside the sandbox).
#[derive(Debug, Clone)]
struct PluginRun {
    name: String,
    title: String,
    command: String,
    timeout_s: u64,
    /// The limits its result is cut to.
    limits: OutputLimits,
}

impl PluginRun {
    /// Runs the command with the arguments on stdin. When the sandbox stopped it, the
    /// pipeline gets to decide whether it runs again outside ([`ToolError::SandboxDenied`]).
    fn run(
        self,
        args: Value,
        ctx: &ToolContext,
        sandboxed: bool,
    ) -> BoxFuture<'_, Result<ToolOutput, ToolError>> {
        Box::pin(self.run_inner(args, ctx, sandboxed))
    }

    async fn run_inner(
        self,
        args: Value,
        ctx: &ToolContext,
        sandboxed: bool,
    ) -> Result<ToolOutput, ToolError> {
        let json = serde_json::to_vec(&args).map_err(|e| ToolError::failed(e.to_string()))?;
        let call = ctx.call_id().to_owned();
        // The files are written and read here, and named in the command as the command sees
        // the session's temp directory (`/tmp` in a sandbox that mounts it there).
        let (input, errors, seen) = ctx
            .blocking(move |ctx| {
                let (seen, dir) = command_tmp(&ctx, sandboxed)?;
                let input = dir.join(format!("plugin-{call}.json"));
                let errors = dir.join(format!("plugin-{call}.err"));
                std::fs::write(&input, json)
                    .map_err(|e| ToolError::io("writing the plugin's input", e))?;
                Ok((input, errors, seen))
            })
            .await?;
        let name = |path: &std::path::Path| {
            let file = path.file_name().unwrap_or_default();
            quote(&seen.join(file).to_string_lossy())
        };
        let command = CommandRun {
            command: format!(
                "{{ {}\n}} < {} 2> {}",
                self.command,
                name(&input),
                name(&errors)
            ),
            timeout_ms: Some(self.timeout_s * 1000),
            workdir: None,
        };
        let finished = run_foreground(&command, ctx, sandboxed, self.limits).await;
        let stderr = ctx
            .blocking(move |_| {
                let text = std::fs::read(&errors).unwrap_or_default();
                let _ = std::fs::remove_file(&input);
                let _ = std::fs::remove_file(&errors);
                // As a terminal would show it, as the command's output is.
                Ok(crate::terminal::render(&text[..text.len().min(64 * 1024)]))
            })
            .await?;
        let finished = finished?;
        if finished.ending == Ending::Exited(0) {
            let mut output = ToolOutput::default().with_title(self.title.clone());
            output.content.push(Content::Long(finished.output));
            return Ok(output);
        }
        let stdout = if finished.output.tail.is_empty() {
            finished.output.head.clone()
        } else {
            format!("{}\n[...]\n{}", finished.output.head, finished.output.tail)
        };
        let failure = match finished.ending {
            Ending::Exited(code) => ToolError::failed(format!(
                "`{}` failed with exit status {code}.{}{}",
                self.name,
                labelled("stderr", &stderr),
                labelled("stdout", &stdout),
            )),
            Ending::TimedOut => {
                return Err(ToolError::failed(format!(
                    "`{}` did not finish within {} s and was stopped.{}",
                    self.name,
                    self.timeout_s,
                    labelled("stderr", &stderr)
                )));
            }
            Ending::Cancelled => return Err(ToolError::Cancelled),
        };
        let cause = match finished.ending {
            Ending::Exited(code) if sandboxed => denial(code, &format!("{stderr}{stdout}")),
            _ => None,
        };
        let Some(cause) = cause else {
            return Err(failure);
        };
        let text = failure.to_string();
        let last_lines = text.lines().rev().take(8).collect::<Vec<_>>();
        let last_lines = last_lines.into_iter().rev().collect::<Vec<_>>().join("\n");
        let mut output = ToolOutput::text(text).with_title(self.title.clone());
        output.is_error = true;
        Err(ToolError::SandboxDenied(Box::new(SandboxDenied {
            command: self.command.clone(),
            access: Access::command(&self.command, false),
            cause,
            last_lines,
            output,
            rerun: {
                let ctx = ctx.clone();
                Box::new(move || Box::pin(async move { self.run(args, &ctx, false).await }))
            },
        })))
    }
}

fn labelled(label: &str, text: &str) -> String {
    let text = text.trim();
    if text.is_empty() {
        String::new()
    } else {
        format!("\n{label}:\n{text}")
    }
}
