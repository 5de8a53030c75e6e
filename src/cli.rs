//! The commands behind the flags: `serve`, `tools`, `call`.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use gimlet_mcp::Shape;
use gimlet_tools::ask::{Answer, Asker, BoxFuture, Question};
use gimlet_tools::config::ConfigFile;
use gimlet_tools::pipeline::{self, CallError};
use gimlet_tools::sandbox::SandboxSetting;
use gimlet_tools::setup::{self, Setup};
use gimlet_tools::{
    Approval, AskRequest, Content, DenyAsker, Mode, ToolContext, ToolEnv, ToolRegistry,
};
use tracing_subscriber::EnvFilter;

/// Flags every command takes.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct GlobalArgs {
    /// A folder the tools may work in; repeat for more (default: the current directory).
    #[arg(long = "root", value_name = "DIR", global = true)]
    pub(crate) roots: Vec<PathBuf>,
    /// Run commands in a sandbox: auto (where the kernel supports it), on (refuse commands
    /// where it cannot), or off.
    #[arg(long, value_name = "MODE", global = true, default_value = "auto")]
    pub(crate) sandbox: SandboxArg,
    /// Log level on stderr: error, warn, info, debug or trace (`RUST_LOG` overrides it).
    #[arg(long, value_name = "LEVEL", global = true)]
    pub(crate) log_level: Option<String>,
    /// The config file: permission rules, tool settings, limits, budgets (default:
    /// `gimlet/config.toml` in the user's config directory, if it exists).
    #[arg(long, value_name = "FILE", global = true, env = "GIMLET_CONFIG")]
    pub(crate) config: Option<PathBuf>,
    /// The permission mode: default (asks outside the roots and for unsandboxed commands),
    /// strict (every change and command asks), trusted (never asks; roots and deny rules
    /// hold), read-only (only read-only tools). Overrides the config file's.
    #[arg(long, value_name = "MODE", global = true)]
    pub(crate) mode: Option<ModeArg>,
    /// Append one JSON line per call to this file.
    #[arg(long, value_name = "FILE", global = true)]
    pub(crate) audit_log: Option<PathBuf>,
    /// How long a permission question waits for the user, in seconds; no answer is a no.
    #[arg(long, value_name = "SECONDS", global = true, default_value_t = 300)]
    pub(crate) ask_timeout: u64,
    /// Give results a `structuredContent` (and tools an `outputSchema`) beside the text, for
    /// clients of your own that read it. Off by default: Claude Code, Codex and VS Code then
    /// show the model only the structured part (gimlet repeats the text in it as `text`).
    #[arg(
        long,
        global = true,
        env = "GIMLET_STRUCTURED_OUTPUT",
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    pub(crate) structured_output: bool,
}

/// Flags of `gimlet serve`.
#[derive(Debug, Default, clap::Args)]
pub(crate) struct ServeArgs {
    /// Serve streamable HTTP at this address instead of stdio; the endpoint is `/mcp`.
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = gimlet_mcp::DEFAULT_HTTP_ADDR)]
    pub(crate) http: Option<std::net::SocketAddr>,
    /// HTTP: require `Authorization: Bearer TOKEN` (required off loopback); `generate` makes
    /// a fresh one and prints it.
    #[arg(
        long,
        value_name = "TOKEN",
        env = "GIMLET_AUTH_TOKEN",
        hide_env_values = true
    )]
    pub(crate) auth_token: Option<String>,
    /// HTTP: also accept this `Host` (a name, or name:port); repeat for more.
    #[arg(long = "allow-host", value_name = "HOST")]
    pub(crate) allow_hosts: Vec<String>,
    /// HTTP: also accept requests from this browser origin (`https://app.example.com`).
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    pub(crate) allow_origins: Vec<String>,
    /// HTTP: at most this many sessions at once.
    #[arg(long, value_name = "N", default_value_t = 64)]
    pub(crate) max_sessions: usize,
    /// HTTP: close a session after this many seconds without requests.
    #[arg(long, value_name = "SECONDS", default_value_t = 1800)]
    pub(crate) session_idle: u64,
}

/// `--mode` values.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum ModeArg {
    Default,
    Strict,
    Trusted,
    ReadOnly,
}

impl From<ModeArg> for Mode {
    fn from(mode: ModeArg) -> Self {
        match mode {
            ModeArg::Default => Self::Default,
            ModeArg::Strict => Self::Strict,
            ModeArg::Trusted => Self::Trusted,
            ModeArg::ReadOnly => Self::ReadOnly,
        }
    }
}

/// Logs go to stderr: in stdio mode stdout is the protocol. gimlet's own events inside a
/// session also go to that session's client (`notifications/message`).
pub(crate) fn init_logging(level: Option<&str>) {
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(level.unwrap_or("warn")));
    let stderr = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_filter(filter);
    tracing_subscriber::registry()
        .with(stderr)
        .with(gimlet_mcp::client_log_layer())
        .init();
}

/// Reports a fatal error on stderr.
pub(crate) fn report_error(err: &anyhow::Error) {
    let mut stderr = std::io::stderr().lock();
    let _ = writeln!(stderr, "gimlet: {}", error_text(err));
}

/// An error and its causes, `: `-separated, each said once: many errors already include their
/// source in their own message, and anyhow's `{:#}` would repeat it.
fn error_text(err: &anyhow::Error) -> String {
    let mut text = err.to_string();
    for cause in err.chain().skip(1) {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}

/// `--sandbox` values.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum SandboxArg {
    Auto,
    On,
    Off,
}

/// What the flags say, for the library's assembly ([`gimlet_tools::setup`]).
fn flags(global: &GlobalArgs) -> Setup {
    let exec_helper = match std::env::current_exe() {
        Ok(me) => Some(me),
        Err(err) => {
            tracing::warn!(
                "cannot find the gimlet binary to run commands with: {err}; bash is off"
            );
            None
        }
    };
    Setup {
        config: global.config.clone(),
        roots: global.roots.clone(),
        mode: global.mode.map(Mode::from),
        sandbox: match global.sandbox {
            SandboxArg::Auto => SandboxSetting::Auto,
            SandboxArg::On => SandboxSetting::On,
            SandboxArg::Off => SandboxSetting::Off,
        },
        audit_log: global.audit_log.clone(),
        exec_helper,
    }
}

/// The user's config file, tightened by each root's `.gimlet.toml`.
fn config(global: &GlobalArgs) -> anyhow::Result<ConfigFile> {
    Ok(setup::load_config(global.config.as_deref(), &global.roots)?)
}

/// The environment, the tools and the shape of results, from the flags and the config files.
fn setup(global: &GlobalArgs) -> anyhow::Result<(ToolEnv, ToolRegistry, Shape)> {
    let config = config(global)?;
    let shape = if global.structured_output || config.output.structured == Some(true) {
        Shape::Structured
    } else {
        Shape::Text
    };
    let env = setup::environment(&config, &flags(global))?;
    Ok((env, setup::registry(&config)?, shape))
}

/// SIGHUP: the config files again. The mode, rules and disabled tools change; the rest
/// (roots, limits, tool settings, budgets) needs a restart.
fn reload(global: &GlobalArgs) -> Result<gimlet_mcp::Reloaded, String> {
    let config = config(global).map_err(|e| format!("{e:#}"))?;
    let policy = config
        .policy(global.mode.map(Mode::from))
        .map_err(|e| e.to_string())?;
    Ok(gimlet_mcp::Reloaded {
        policy,
        registry: setup::registry(&config).map_err(|e| format!("{e:#}"))?,
    })
}

/// `gimlet serve`: MCP over stdio, or streamable HTTP.
pub(crate) async fn serve(global: &GlobalArgs, args: &ServeArgs) -> anyhow::Result<ExitCode> {
    let (env, registry, shape) = setup(global)?;
    // Language servers outlive the sessions; they are shut down after the server stops.
    let lsp = Arc::clone(env.lsp());
    let served = serve_with(global, args, env, registry, shape).await;
    lsp.shutdown().await;
    served
}

async fn serve_with(
    global: &GlobalArgs,
    args: &ServeArgs,
    env: ToolEnv,
    registry: ToolRegistry,
    shape: Shape,
) -> anyhow::Result<ExitCode> {
    let again = global.clone();
    let config = gimlet_mcp::ServerConfig::new(env, registry)
        .shape(shape)
        .ask_timeout(std::time::Duration::from_secs(global.ask_timeout))
        .on_reload(move || reload(&again));
    let Some(addr) = args.http else {
        gimlet_mcp::serve(config).await?;
        return Ok(ExitCode::SUCCESS);
    };
    let token = match args.auth_token.as_deref() {
        Some("generate") => {
            let token = gimlet_mcp::generate_token().context("--auth-token generate")?;
            writeln!(std::io::stdout().lock(), "{token}")?;
            Some(token)
        }
        other => other.map(ToOwned::to_owned),
    };
    let http = gimlet_mcp::HttpConfig::new(addr)
        .auth_token(token)
        .allow_hosts(args.allow_hosts.iter().cloned())
        .allow_origins(args.allow_origins.iter().cloned())
        .max_sessions(args.max_sessions)
        .session_idle(std::time::Duration::from_secs(args.session_idle));
    let server = gimlet_mcp::HttpServer::bind(http).await?;
    if let Some(local) = server.local_addr() {
        let mut stderr = std::io::stderr().lock();
        writeln!(stderr, "gimlet: serving MCP at http://{local}/mcp")?;
        if !local.ip().is_loopback() && args.allow_hosts.is_empty() {
            writeln!(
                stderr,
                "gimlet: clients that reach this machine by name or address need --allow-host NAME"
            )?;
        }
    }
    gimlet_mcp::serve_http(config, server).await?;
    Ok(ExitCode::SUCCESS)
}

/// `gimlet tools`: the tool list.
pub(crate) async fn tools(global: &GlobalArgs, json: bool) -> anyhow::Result<ExitCode> {
    let (env, registry, shape) = setup(global)?;
    let mut out = std::io::stdout().lock();
    if json {
        let list = gimlet_mcp::tools_json(&env, &registry, shape).await;
        writeln!(out, "{}", serde_json::to_string_pretty(&list)?)?;
    } else {
        for spec in registry.init(&env).await {
            let first_line = spec.description.lines().next().unwrap_or_default();
            writeln!(out, "{:<14} {first_line}", spec.name)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `gimlet call TOOL JSON`: one call through the pipeline. Exit code 1 when the tool failed.
pub(crate) async fn call(
    global: &GlobalArgs,
    tool: &str,
    input: &str,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let input: serde_json::Value = serde_json::from_str(input)
        .with_context(|| format!("the arguments are not valid JSON: {input}"))?;
    let (env, registry, _shape) = setup(global)?;
    let env = Arc::new(env);
    let asker: Arc<dyn Asker> = if std::io::stdin().is_terminal() {
        Arc::new(TerminalAsker)
    } else {
        Arc::new(DenyAsker {
            why: "stdin is not a terminal",
        })
    };
    let ctx = ToolContext::builder(Arc::clone(&env)).asker(asker).build();
    let report = pipeline::run(&registry, tool, input, &ctx).await;
    env.lsp().shutdown().await;
    let report = match report {
        Ok(report) => report,
        Err(err @ CallError::UnknownTool { .. }) => anyhow::bail!(err),
    };
    let mut out = std::io::stdout().lock();
    match report.result {
        Ok(output) if json => {
            let value = serde_json::json!({
                "content": output.content.iter().map(content_json).collect::<Vec<_>>(),
                "structured": output.structured,
                "is_error": output.is_error,
            });
            writeln!(out, "{value}")?;
            Ok(if output.is_error {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            })
        }
        Ok(output) => {
            for content in &output.content {
                match content {
                    Content::Text(text) => out.write_all(text.as_bytes())?,
                    Content::Long(long) => out.write_all(long.head.as_bytes())?,
                    Content::Image { data, mime_type } => {
                        write!(out, "[{mime_type} image, {} bytes]", data.len())?;
                    }
                    Content::ResourceLink { .. } => continue,
                }
                if !matches!(content, Content::Text(t) if t.ends_with('\n'))
                    && !matches!(content, Content::Long(l) if l.head.ends_with('\n'))
                {
                    writeln!(out)?;
                }
            }
            Ok(if output.is_error {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            })
        }
        // The error as the model reads it: `Error (<tool>): <message>`.
        Err(err) if json => {
            let text = err.to_output(tool).joined_text();
            writeln!(
                out,
                "{}",
                serde_json::json!({"error": text, "is_error": true})
            )?;
            Ok(ExitCode::FAILURE)
        }
        Err(err) => {
            drop(out);
            let mut stderr = std::io::stderr().lock();
            writeln!(stderr, "{}", err.to_output(tool).joined_text())?;
            Ok(ExitCode::FAILURE)
        }
    }
}

fn content_json(content: &Content) -> serde_json::Value {
    match content {
        Content::Text(text) => serde_json::json!({"type": "text", "text": text}),
        Content::Long(long) => serde_json::json!({"type": "text", "text": long.head}),
        Content::Image { data, mime_type } => {
            serde_json::json!({"type": "image", "mimeType": mime_type, "bytes": data.len()})
        }
        Content::ResourceLink { uri, name, size } => {
            serde_json::json!({"type": "resource_link", "uri": uri, "name": name, "size": size})
        }
    }
}

/// Asks on the terminal: the question on stderr, the answer from stdin.
struct TerminalAsker;

impl TerminalAsker {
    async fn prompt(text: String) -> Option<String> {
        tokio::task::spawn_blocking(move || {
            let mut stderr = std::io::stderr().lock();
            let _ = write!(stderr, "{text}");
            let _ = stderr.flush();
            let mut line = String::new();
            std::io::stdin().read_line(&mut line).ok()?;
            Some(line.trim().to_owned())
        })
        .await
        .ok()
        .flatten()
    }
}

impl Asker for TerminalAsker {
    fn approve<'a>(
        &'a self,
        request: &'a AskRequest,
        _ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Approval> {
        Box::pin(async move {
            let choices = if request.session_pattern.is_some() {
                "[o]nce / [s]ession / [N]o"
            } else {
                "[o]nce / [N]o"
            };
            let answer = Self::prompt(format!("{}\nAllow? {choices} ", request.message())).await;
            match answer.as_deref().map(str::to_ascii_lowercase).as_deref() {
                Some("o" | "once" | "y" | "yes") => Approval::Once,
                Some("s" | "session") if request.session_pattern.is_some() => Approval::Session,
                _ => Approval::Deny { reason: None },
            }
        })
    }

    fn question<'a>(
        &'a self,
        question: &'a Question,
        _ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Answer> {
        Box::pin(async move {
            let options = if question.options.is_empty() {
                String::new()
            } else {
                format!(" ({})", question.options.join(" / "))
            };
            let text = gimlet_tools::permission::visible(&question.question);
            match Self::prompt(format!("{text}{options}\n> ")).await {
                Some(answer) if !answer.is_empty() => Answer::Answered(answer),
                _ => Answer::Declined,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use gimlet_tools::context::EnvError;
    use gimlet_tools::fs::PathError;

    use super::error_text;

    #[test]
    fn each_cause_is_said_once() {
        // The error a missing --root gives: each level names its source in its own message.
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such directory");
        let source = PathError::Io {
            path: String::from("/x"),
            source: io,
        };
        let err = anyhow::Error::new(EnvError::Root {
            path: String::from("/x"),
            source,
        });
        assert_eq!(
            error_text(&err),
            "cannot use root `/x`: /x: no such directory; a root must be an existing directory"
        );
        let err = anyhow::anyhow!("disk on fire").context("cannot start");
        assert_eq!(error_text(&err), "cannot start: disk on fire");
    }
}
