//! The `gimlet` binary: parses flags, then serves MCP or runs one command.

mod cli;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// gimlet: the coding-agent tool set as an MCP server.
/// Where this system keeps what gimlet reads, and where the hosts keep their config, shown
/// under `--help`.
#[cfg(target_os = "linux")]
const WHERE: &str = "Config file: ~/.config/gimlet/config.toml (XDG_CONFIG_HOME). Commands run in a \
sandbox (namespaces, Landlock, seccomp).\nHosts: Claude Code `claude mcp add gimlet -- gimlet serve \
--root \"$PWD\"`; Codex ~/.codex/config.toml; Cursor .cursor/mcp.json; VS Code .vscode/mcp.json.";
#[cfg(target_os = "macos")]
const WHERE: &str = "Config file: ~/Library/Application Support/gimlet/config.toml. Commands run in \
a Seatbelt sandbox (sandbox-exec).\nHosts: Claude Desktop ~/Library/Application \
Support/Claude/claude_desktop_config.json (give absolute paths: GUI apps do not inherit your \
PATH); Claude Code `claude mcp add gimlet -- gimlet serve --root \"$PWD\"`; Codex \
~/.codex/config.toml; Cursor .cursor/mcp.json; VS Code .vscode/mcp.json.";
#[cfg(windows)]
const WHERE: &str = "Config file: %APPDATA%\\gimlet\\config.toml. Windows has no command sandbox \
gimlet can use: commands ask first unless a rule allows them (--sandbox on refuses them); they \
run in Git Bash when installed, else PowerShell.\nHosts: Claude Desktop \
%APPDATA%\\Claude\\claude_desktop_config.json; Codex %USERPROFILE%\\.codex\\config.toml; Cursor \
.cursor\\mcp.json; VS Code .vscode\\mcp.json.";
#[cfg(not(any(target_os = "linux", target_os = "macos", windows)))]
const WHERE: &str = "Config file: gimlet/config.toml in the user's config directory.";

#[derive(Debug, Parser)]
#[command(name = "gimlet", version, about, long_about = None, after_help = WHERE)]
struct Args {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    global: cli::GlobalArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve MCP over stdio (the default), or over streamable HTTP with --http.
    Serve(cli::ServeArgs),
    /// List the tools.
    Tools {
        /// Print the `tools/list` result as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Run one tool through the same pipeline as the server and print its result.
    Call {
        /// The tool's name, e.g. `read`.
        tool: String,
        /// The arguments as a JSON object, e.g. '{"path": "README.md"}'.
        #[arg(default_value = "{}")]
        args: String,
        /// Print the whole result as JSON.
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    // No descriptor the server (or the helper) inherited may reach what it starts.
    gimlet_tools::sandbox::close_inherited_on_exec();
    // `gimlet __exec PLAN` is the command helper (see gimlet_tools::sandbox), not the CLI.
    let raw: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if raw
        .get(1)
        .is_some_and(|a| a == gimlet_tools::sandbox::HELPER_ARG)
    {
        let code = gimlet_tools::sandbox::helper_main(&raw[2..]);
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    let args = Args::parse();
    cli::init_logging(args.global.log_level.as_deref());
    // The server's environment holds its credentials: other processes of the user must not
    // read it from /proc (sandboxed commands cannot see the server at all).
    if let Err(err) = gimlet_tools::sandbox::shield_process() {
        tracing::warn!("cannot hide the process from other processes of the user: {err}");
    }
    if let Err(err) = gimlet_tools::sandbox::end_children_with_this_process() {
        tracing::warn!("what gimlet starts may outlive it if it is killed: {err}");
    }
    let command = args
        .command
        .unwrap_or_else(|| Command::Serve(cli::ServeArgs::default()));
    // stdio serves one client: a single-threaded runtime avoids cross-thread hand-offs on every
    // message. HTTP serves many at once, on every core. Blocking work (files, walks, processes)
    // runs on the blocking pool either way; a burst of calls must not grow hundreds of threads.
    let http = matches!(&command, Command::Serve(serve) if serve.http.is_some());
    let mut builder = if http {
        tokio::runtime::Builder::new_multi_thread()
    } else {
        tokio::runtime::Builder::new_current_thread()
    };
    let runtime = match builder.enable_all().max_blocking_threads(64).build() {
        Ok(runtime) => runtime,
        Err(err) => {
            tracing::error!("cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match command {
            Command::Serve(serve) => cli::serve(&args.global, &serve).await,
            Command::Tools { json } => cli::tools(&args.global, json).await,
            Command::Call {
                tool,
                args: input,
                json,
            } => cli::call(&args.global, &tool, &input, json).await,
        }
    });
    match result {
        Ok(code) => code,
        Err(err) => {
            cli::report_error(&err);
            ExitCode::from(2)
        }
    }
}
