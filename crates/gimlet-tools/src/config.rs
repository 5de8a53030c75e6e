//! The config file (TOML): permissions, tool settings, output limits, budgets, language servers.
//!
//! The user's file (`--config FILE`, default `$XDG_CONFIG_HOME/gimlet/config.toml`) can set
//! anything. A project's file (`.gimlet.toml` at a root) can only tighten: its deny and ask
//! rules apply, its allow rules are ignored, its mode applies only if stricter, and it can
//! disable tools and lower budgets and limits. Nothing a tool does can change either file
//! (`.gimlet.toml` is a protected path, and the user's file lies outside the roots).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::permission::{Mode, Rule, RuleAction};
use crate::vocab::OutputLimits;

/// Settings for the built-in tools (`[tools]` in the config file).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct Settings {
    /// The `bash` tool.
    pub bash: BashSettings,
    /// The `read` tool.
    pub read: ReadSettings,
    /// The `web_fetch` tool.
    pub web_fetch: WebFetchSettings,
    /// The `web_search` tool.
    pub web_search: WebSearchSettings,
}

/// Settings of `read` (`[tools.read]`).
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct ReadSettings {
    /// Images are sent with their long side at most this many pixels (default 1568, what
    /// Anthropic's API scales larger images down to; at most 8000, the API's limit): a larger
    /// image is scaled down and re-encoded, and the result says so.
    pub image_max_side: Option<u32>,
}

impl ReadSettings {
    /// The long side of a sent image at most, in pixels (1 to 8000).
    pub fn image_max_side(&self) -> u32 {
        self.image_max_side
            .unwrap_or(crate::images::DEFAULT_MAX_SIDE)
            .clamp(1, crate::images::API_MAX_SIDE)
    }
}

/// Settings of `web_fetch` (`[tools.web_fetch]`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct WebFetchSettings {
    /// Allow fetches from loopback, private, link-local and other local addresses (off: such
    /// addresses are refused in every spelling and after every redirect, against SSRF).
    pub allow_local: bool,
}

/// Settings of `web_search` (`[tools.web_search]`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct WebSearchSettings {
    /// The Tavily API's base URL (default `https://api.tavily.com`); the tool is offered only
    /// when `TAVILY_API_KEY` is set.
    pub endpoint: Option<String>,
}

/// Settings of the `bash` tool (`[tools.bash]`).
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct BashSettings {
    /// The shell (default: `bash` from `PATH`, else `/bin/sh`).
    pub shell: Option<PathBuf>,
    /// Environment variables left out of commands, as globs on the name (case-insensitive).
    pub env_deny: Vec<String>,
    /// Variables kept although `env_deny` matches them (exact names).
    pub env_allow: Vec<String>,
    /// Whether sandboxed commands may use the network.
    pub network: bool,
}

impl Default for BashSettings {
    fn default() -> Self {
        Self {
            shell: None,
            env_deny: [
                "*TOKEN*",
                "*SECRET*",
                "*KEY*",
                "*PASSWORD*",
                "*PASSWD*",
                "*CREDENTIAL*",
            ]
            .into_iter()
            .map(String::from)
            .collect(),
            env_allow: Vec::new(),
            network: false,
        }
    }
}

/// `[sandbox]`: what sandboxed commands may not change, and what they may reach.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct SandboxConfig {
    /// More protected paths, relative to the top of each root and repository (the built-in
    /// list is in `docs/security.md`): read-only to sandboxed commands, and the file tools ask
    /// before changing them.
    pub protected: Vec<String>,
    /// Unix sockets outside the roots that sandboxed commands may connect to (an SSH agent's,
    /// for example). Every other socket outside the roots is refused.
    pub unix_sockets: Vec<PathBuf>,
}

/// `[lsp]`: language servers, for the diagnostics after a change and the `lsp` tool.
///
/// The built-in servers (rust-analyzer, basedpyright or pyright, typescript-language-server,
/// gopls, clangd) are used when found on `PATH`; `[lsp.servers.NAME]` changes one of them or
/// adds another language.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct LspConfig {
    /// Whether language servers are used at all (default true).
    pub enabled: bool,
    /// How long a change waits for the file's diagnostics, in milliseconds (default 3000). The
    /// wait ends early when the server reports.
    pub wait_ms: u64,
    /// Append warnings too, not only errors (default false).
    pub warnings: bool,
    /// At most this many diagnostics are appended to a change's result (default 20).
    pub max_diagnostics: usize,
    /// At most this many new errors in other files (those a change broke: the callers of a
    /// renamed or re-typed function) are appended after the changed file's (default 20); 0
    /// turns the check of other files off.
    pub max_elsewhere: usize,
    /// How long a request of the `lsp` tool (and a server's start) may take, in milliseconds
    /// (default 30000).
    pub request_timeout_ms: u64,
    /// A server that nobody used (no change sent, no request) for this many seconds is shut
    /// down; the next use starts it again (default 600; 0: never).
    pub idle_shutdown_secs: u64,
    /// A server whose process tree holds more resident memory than this many MiB is restarted,
    /// with a note in the next result that uses it (default 4096; 0: no cap). Checked every 5 s
    /// (on Windows the working set is counted).
    pub max_memory_mb: u64,
    /// Servers by language name (`python`, `rust`, `typescript`, `go`, `c`, or a new one).
    pub servers: BTreeMap<String, LspServerConfig>,
}

impl Default for LspConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            wait_ms: 3000,
            warnings: false,
            max_diagnostics: 20,
            max_elsewhere: 20,
            request_timeout_ms: 30_000,
            idle_shutdown_secs: 600,
            max_memory_mb: 4096,
            servers: BTreeMap::new(),
        }
    }
}

/// `[checkpoints]`: every call that can change files records what it changed under the roots
/// (docs/tools.md, "Checkpoints").
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct CheckpointsConfig {
    /// Whether checkpoints are recorded at all: by default on Linux, macOS and Windows, where a
    /// watcher of the file system's events (inotify, `FSEvents`, `ReadDirectoryChangesW`) keeps
    /// the scans around a call within their targets (docs/performance.md); off elsewhere, where
    /// every scan would walk the roots whole.
    pub enabled: bool,
    /// The store of a root holds at most this many MiB of content (default 512); the oldest
    /// checkpoints go first.
    pub max_store_mb: u64,
    /// At most this many checkpoints are kept per root (default 200); the oldest go first.
    pub max_checkpoints: usize,
    /// Files larger than this many MiB are recorded as changed but not kept, so they cannot be
    /// restored (default 16).
    pub max_file_mb: u64,
    /// Whether a scan may look only where the file system reported changes (default true):
    /// inotify watches on the folders of each root on Linux, one recursive watch per root on
    /// macOS and Windows. False walks every root whole on every scan, as on other systems.
    pub watch: bool,
}

impl CheckpointsConfig {
    /// The defaults, turned on.
    #[must_use]
    pub fn on() -> Self {
        Self {
            enabled: true,
            ..Self::default()
        }
    }
}

impl Default for CheckpointsConfig {
    fn default() -> Self {
        Self {
            enabled: cfg!(any(target_os = "linux", target_os = "macos", windows)),
            max_store_mb: 512,
            max_checkpoints: 200,
            max_file_mb: 16,
            watch: true,
        }
    }
}

/// One `[lsp.servers.NAME]` entry: every field is optional for a built-in language.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct LspServerConfig {
    /// Whether this language's server is used (default true).
    pub enabled: bool,
    /// The command and its arguments (e.g. `["pyright-langserver", "--stdio"]`); a bare name is
    /// looked up on `PATH`.
    pub command: Option<Vec<String>>,
    /// File extensions, without the dot (e.g. `["py", "pyi"]`).
    pub extensions: Option<Vec<String>>,
    /// Files or directories that mark a project's root (e.g. `["pyproject.toml"]`).
    pub markers: Option<Vec<String>>,
    /// The LSP language id sent with each file (default: the language name).
    pub language_id: Option<String>,
    /// Answers to the server's `workspace/configuration` requests, by section
    /// (e.g. `{ "python.analysis" = { typeCheckingMode = "strict" } }`).
    pub settings: Option<serde_json::Value>,
    /// The `initializationOptions` of the server's `initialize` request.
    pub initialization_options: Option<serde_json::Value>,
    /// What to tell the user when the command is not installed.
    pub install_hint: Option<String>,
}

impl Default for LspServerConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            command: None,
            extensions: None,
            markers: None,
            language_id: None,
            settings: None,
            initialization_options: None,
            install_hint: None,
        }
    }
}

/// `[permissions]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PermissionsConfig {
    /// The mode (`--mode` overrides).
    pub mode: Option<Mode>,
    /// The rules, in any order: deny beats ask beats allow.
    pub rules: Vec<Rule>,
}

/// `[output]`: limits before truncation.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OutputConfig {
    /// Lines (default 2000).
    pub max_lines: Option<usize>,
    /// Bytes (default 46080: under the 50,000 characters above which Claude Code shows the
    /// model only a preview).
    pub max_bytes: Option<usize>,
    /// Give MCP results a `structuredContent` (and tools an `outputSchema`) beside the text
    /// (default false). Claude Code, Codex and VS Code show the model only the structured
    /// part when there is one, so gimlet then repeats the text in it, as `text`; leave this off
    /// unless a client of your own reads the structured fields.
    pub structured: Option<bool>,
}

/// `[budget]`: per-session limits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Budget {
    /// Calls per session at most.
    pub max_calls: Option<u64>,
    /// Seconds of tool time per session at most.
    pub max_tool_seconds: Option<u64>,
}

/// When a hook runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HookEvent {
    /// After the permission stage, before the tool runs: may block, ask, or replace the input.
    Before,
    /// After the tool (and truncation): may replace the output.
    After,
}

/// One `[[hooks]]` entry: a command run around matching calls.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct HookConfig {
    /// `before` or `after`.
    pub event: HookEvent,
    /// A glob on the tool's name (default `*`).
    #[serde(default = "any")]
    pub tool: String,
    /// A glob on what the call touches: its `command`, `path`, `url`, `pattern` or `query`.
    #[serde(default)]
    pub pattern: Option<String>,
    /// The command, run with `sh -c` in the first root; it gets the call as JSON on stdin.
    pub command: String,
    /// Seconds before the command is stopped (default 60).
    #[serde(default = "hook_timeout")]
    pub timeout_s: u64,
}

fn any() -> String {
    String::from("*")
}

fn hook_timeout() -> u64 {
    60
}

/// One `[[plugins]]` entry: a tool that runs a command.
#[derive(Debug, Clone, Deserialize)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "independent flags, as MCP's annotations"
)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct PluginConfig {
    /// The tool's name (`^[a-zA-Z0-9_-]{1,64}$`).
    pub name: String,
    /// A human title (default: the name).
    #[serde(default)]
    pub title: Option<String>,
    /// What the tool does, for the model.
    pub description: String,
    /// The command, run with the shell in the first root; it gets the arguments as JSON on
    /// stdin and prints the result on stdout.
    pub command: String,
    /// The JSON schema of the arguments (an object schema; default: no arguments).
    #[serde(default)]
    pub input_schema: Option<serde_json::Value>,
    /// Changes nothing (runs without asking, also in strict and read-only modes).
    #[serde(default)]
    pub read_only: bool,
    /// May destroy data.
    #[serde(default)]
    pub destructive: bool,
    /// May run side by side with other calls.
    #[serde(default)]
    pub concurrency_safe: bool,
    /// Reaches outside the machine.
    #[serde(default)]
    pub open_world: bool,
    /// Seconds before the command is stopped (default 120).
    #[serde(default = "plugin_timeout")]
    pub timeout_s: u64,
}

fn plugin_timeout() -> u64 {
    120
}

/// The whole config file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct ConfigFile {
    /// `[permissions]`.
    pub permissions: PermissionsConfig,
    /// `[tools]`.
    pub tools: Settings,
    /// `[output]`.
    pub output: OutputConfig,
    /// Tools not offered.
    pub disabled_tools: Vec<String>,
    /// `[budget]`.
    pub budget: Budget,
    /// `[[hooks]]`: commands run before or after matching calls.
    pub hooks: Vec<HookConfig>,
    /// `[[plugins]]`: tools that run a command.
    pub plugins: Vec<PluginConfig>,
    /// `[sandbox]`.
    pub sandbox: SandboxConfig,
    /// `[lsp]`: language servers.
    pub lsp: LspConfig,
    /// `[checkpoints]`: what each call changed, kept to be listed, diffed and restored.
    pub checkpoints: CheckpointsConfig,
    /// Deny and ask rules from project files (see [`ConfigFile::tighten_with`]).
    #[serde(skip)]
    pub project_rules: Vec<Rule>,
    /// The strictest mode a project file asked for: it applies when stricter than the user's.
    #[serde(skip)]
    pub project_mode: Option<Mode>,
}

/// A config file that could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// It could not be read.
    #[error("cannot read the config file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// It is not valid.
    #[error("the config file {path} is not valid: {message}")]
    Invalid {
        /// The file.
        path: String,
        /// What is wrong, with the line.
        message: String,
    },
}

/// The name of a project's config file, at a root.
pub const PROJECT_FILE: &str = ".gimlet.toml";

impl ConfigFile {
    /// `$XDG_CONFIG_HOME/gimlet/config.toml` (or the platform's config directory).
    pub fn default_path() -> Option<PathBuf> {
        dirs::config_dir().map(|d| d.join("gimlet").join("config.toml"))
    }

    /// Parses TOML text; `path` is for messages.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError::Invalid {
            path: path.display().to_string(),
            message: e.to_string(),
        })
    }

    /// Reads a file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// Reads a file if it exists.
    pub fn load_if_present(path: &Path) -> Result<Option<Self>, ConfigError> {
        match std::fs::read_to_string(path) {
            Ok(text) => Self::parse(&text, path).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(ConfigError::Read {
                path: path.display().to_string(),
                source,
            }),
        }
    }

    /// Applies a project's file: only what tightens. Returns what was ignored, for a warning.
    pub fn tighten_with(&mut self, project: ConfigFile) -> Vec<String> {
        let mut ignored = Vec::new();
        let allows = project
            .permissions
            .rules
            .iter()
            .filter(|r| r.action == RuleAction::Allow)
            .count();
        if allows > 0 {
            ignored.push(format!("{allows} allow rule(s)"));
        }
        self.project_rules.extend(
            project
                .permissions
                .rules
                .into_iter()
                .filter(|r| r.action != RuleAction::Allow),
        );
        if let Some(mode) = project.permissions.mode {
            self.project_mode = Some(stricter(self.project_mode, mode));
        }
        self.disabled_tools.extend(project.disabled_tools);
        // More protection only tightens; reaching more sockets would loosen.
        self.sandbox.protected.extend(project.sandbox.protected);
        if !project.sandbox.unix_sockets.is_empty() {
            ignored.push(String::from("[sandbox] unix_sockets"));
        }
        self.budget.max_calls = min_some(self.budget.max_calls, project.budget.max_calls);
        self.budget.max_tool_seconds = min_some(
            self.budget.max_tool_seconds,
            project.budget.max_tool_seconds,
        );
        self.output.max_lines = min_some(self.output.max_lines, project.output.max_lines);
        self.output.max_bytes = min_some(self.output.max_bytes, project.output.max_bytes);
        if project.output.structured.is_some() {
            // How results are shaped is the user's client's business, not a project's.
            ignored.push(String::from("[output] structured"));
        }
        if project.tools.bash.network
            || project.tools.bash.shell.is_some()
            || !project.tools.bash.env_allow.is_empty()
        {
            ignored.push(String::from("[tools.bash] settings"));
        }
        // Smaller images only tighten.
        self.tools.read.image_max_side = min_some(
            self.tools.read.image_max_side,
            project.tools.read.image_max_side,
        );
        if project.tools.web_fetch.allow_local || project.tools.web_search.endpoint.is_some() {
            ignored.push(String::from(
                "[tools.web_fetch] and [tools.web_search] settings",
            ));
        }
        // Hooks and plugins run commands: a checked-out repository must not bring its own.
        if !project.hooks.is_empty() {
            ignored.push(format!("{} hook(s)", project.hooks.len()));
        }
        if !project.plugins.is_empty() {
            ignored.push(format!("{} plugin tool(s)", project.plugins.len()));
        }
        ignored.extend(self.lsp.tighten_with(project.lsp));
        ignored
    }

    /// The mode: `mode` (the command line) or the file's, unless a project asked for a
    /// stricter one.
    pub fn mode(&self, mode: Option<Mode>) -> Mode {
        let user = mode.or(self.permissions.mode).unwrap_or_default();
        match self.project_mode {
            Some(project) => stricter(Some(user), project),
            None => user,
        }
    }

    /// The permission policy: [`ConfigFile::mode`], the user's rules, the projects' rules.
    pub fn policy(
        &self,
        mode: Option<Mode>,
    ) -> Result<crate::permission::Policy, crate::permission::RuleError> {
        use crate::permission::{Policy, RuleOrigin};
        Policy::new(self.mode(mode))
            .with_protected(crate::sandbox::protected::Protected::new(
                self.sandbox.protected.iter().cloned(),
            ))
            .with_rules(self.permissions.rules.iter().cloned(), RuleOrigin::User)?
            .with_rules(self.project_rules.iter().cloned(), RuleOrigin::Project)
    }

    /// The output limits this file sets.
    pub fn limits(&self) -> OutputLimits {
        OutputLimits {
            max_lines: self
                .output
                .max_lines
                .unwrap_or(OutputLimits::DEFAULT.max_lines),
            max_bytes: self
                .output
                .max_bytes
                .unwrap_or(OutputLimits::DEFAULT.max_bytes),
            ..OutputLimits::DEFAULT
        }
    }
}

impl LspConfig {
    /// A project's `[lsp]`: it may turn servers off and shorten the wait, but not name
    /// commands or settings (a checked-out repository must not choose what runs). Returns
    /// what was ignored.
    fn tighten_with(&mut self, project: LspConfig) -> Vec<String> {
        let mut ignored = Vec::new();
        self.enabled &= project.enabled;
        self.wait_ms = self.wait_ms.min(project.wait_ms);
        for (name, server) in project.servers {
            if !server.enabled {
                self.servers.entry(name.clone()).or_default().enabled = false;
            }
            if server.command.is_some()
                || server.settings.is_some()
                || server.initialization_options.is_some()
                || server.extensions.is_some()
                || server.markers.is_some()
            {
                ignored.push(format!("[lsp.servers.{name}] settings"));
            }
        }
        ignored
    }
}

/// How strict a mode is, for "a project may only tighten".
fn strictness(mode: Mode) -> u8 {
    match mode {
        Mode::Trusted => 0,
        Mode::Default => 1,
        Mode::Strict => 2,
        Mode::ReadOnly => 3,
    }
}

fn stricter(a: Option<Mode>, b: Mode) -> Mode {
    match a {
        Some(a) if strictness(a) >= strictness(b) => a,
        _ => b,
    }
}

fn min_some<T: Ord>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    const USER: &str = r#"
        disabled_tools = ["web_fetch"]

        [permissions]
        mode = "default"

        [[permissions.rules]]
        action = "allow"
        tool = "bash"
        pattern = "cargo test*"

        [[permissions.rules]]
        action = "deny"
        tool = "write"
        pattern = "secrets/**"

        [tools.bash]
        network = true
        env_allow = ["GITHUB_TOKEN"]

        [output]
        max_lines = 500

        [budget]
        max_calls = 1000
    "#;

    #[test]
    fn parses_the_documented_format() {
        let config = ConfigFile::parse(USER, Path::new("config.toml")).unwrap();
        assert_eq!(config.permissions.mode, Some(Mode::Default));
        assert_eq!(config.permissions.rules.len(), 2);
        assert_eq!(
            config.permissions.rules[0].pattern.as_deref(),
            Some("cargo test*")
        );
        assert!(config.tools.bash.network);
        assert_eq!(config.limits().max_lines, 500);
        assert_eq!(config.limits().max_bytes, 46_080);
        assert_eq!(config.budget.max_calls, Some(1000));
        assert_eq!(config.disabled_tools, vec!["web_fetch"]);
    }

    #[test]
    fn mistakes_are_reported_with_their_place() {
        let err = ConfigFile::parse("[permissions]\nmood = \"strict\"\n", Path::new("c.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("c.toml") && err.contains("mood"), "{err}");
        let err = ConfigFile::parse(
            "[[permissions.rules]]\naction = \"maybe\"\n",
            Path::new("c.toml"),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("maybe"), "{err}");
    }

    #[test]
    fn a_project_file_only_tightens() {
        let mut config = ConfigFile::parse(USER, Path::new("config.toml")).unwrap();
        let project = ConfigFile::parse(
            r#"
            disabled_tools = ["bash"]
            [permissions]
            mode = "trusted"
            [[permissions.rules]]
            action = "allow"
            tool = "*"
            [[permissions.rules]]
            action = "ask"
            tool = "edit"
            pattern = "migrations/**"
            [tools.bash]
            network = true
            [budget]
            max_calls = 50
            [output]
            max_lines = 5000
            "#,
            Path::new(".gimlet.toml"),
        )
        .unwrap();
        let ignored = config.tighten_with(project);
        assert_eq!(
            config.permissions.mode,
            Some(Mode::Default),
            "trusted is looser"
        );
        assert_eq!(config.project_rules.len(), 1);
        assert_eq!(config.project_rules[0].action, RuleAction::Ask);
        assert_eq!(config.disabled_tools, vec!["web_fetch", "bash"]);
        assert_eq!(config.budget.max_calls, Some(50));
        assert_eq!(
            config.limits().max_lines,
            500,
            "the user's lower limit stays"
        );
        assert_eq!(ignored, vec!["1 allow rule(s)", "[tools.bash] settings"]);
        let mut strict = ConfigFile::default();
        let project =
            ConfigFile::parse("[permissions]\nmode = \"strict\"\n", Path::new("p")).unwrap();
        assert!(strict.tighten_with(project).is_empty());
        assert_eq!(strict.mode(None), Mode::Strict);
        assert_eq!(
            strict.mode(Some(Mode::Trusted)),
            Mode::Strict,
            "--mode cannot loosen a project"
        );
        assert_eq!(strict.mode(Some(Mode::ReadOnly)), Mode::ReadOnly);
    }

    #[test]
    fn the_sandbox_section_extends_the_protected_list_and_a_project_cannot_open_sockets() {
        let mut config = ConfigFile::parse(
            "[sandbox]\nprotected = [\"Makefile.local\"]\nunix_sockets = [\"/run/agent.sock\"]\n",
            Path::new("config.toml"),
        )
        .unwrap();
        let project = ConfigFile::parse(
            "[sandbox]\nprotected = [\"deploy\"]\nunix_sockets = [\"/run/docker.sock\"]\n",
            Path::new(".gimlet.toml"),
        )
        .unwrap();
        let ignored = config.tighten_with(project);
        assert_eq!(ignored, vec!["[sandbox] unix_sockets"]);
        assert_eq!(
            config.sandbox.unix_sockets,
            [PathBuf::from("/run/agent.sock")]
        );
        let policy = config.policy(None).unwrap();
        for path in ["Makefile.local", "deploy/run.sh", ".mcp.json"] {
            assert!(policy.is_protected(Path::new(path)), "{path}");
        }
    }

    #[test]
    fn the_read_section_sets_the_image_side_and_a_project_can_only_lower_it() {
        assert_eq!(ConfigFile::default().tools.read.image_max_side(), 1568);
        let mut config = ConfigFile::parse(
            "[tools.read]\nimage_max_side = 3000\n",
            Path::new("config.toml"),
        )
        .unwrap();
        assert_eq!(config.tools.read.image_max_side(), 3000);
        // A project file without the setting leaves it; one with a larger value too.
        let ignored = config.tighten_with(ConfigFile::default());
        assert!(ignored.is_empty(), "{ignored:?}");
        assert_eq!(config.tools.read.image_max_side(), 3000);
        let project = |side: u32| {
            ConfigFile::parse(
                &format!("[tools.read]\nimage_max_side = {side}\n"),
                Path::new(".gimlet.toml"),
            )
            .unwrap()
        };
        config.tighten_with(project(5000));
        assert_eq!(config.tools.read.image_max_side(), 3000);
        config.tighten_with(project(800));
        assert_eq!(config.tools.read.image_max_side(), 800);
        // Past the APIs' limit it counts as 8000; 0 as 1.
        let huge =
            ConfigFile::parse("[tools.read]\nimage_max_side = 99999\n", Path::new("c")).unwrap();
        assert_eq!(huge.tools.read.image_max_side(), 8000);
        let zero = ConfigFile::parse("[tools.read]\nimage_max_side = 0\n", Path::new("c")).unwrap();
        assert_eq!(zero.tools.read.image_max_side(), 1);
    }

    #[test]
    fn lsp_section_parses_with_defaults() {
        let config = ConfigFile::parse(
            r#"
            [lsp]
            wait_ms = 500
            [lsp.servers.python]
            command = ["pyright-langserver", "--stdio"]
            settings = { "python.analysis" = { typeCheckingMode = "strict" } }
            [lsp.servers.go]
            enabled = false
            "#,
            Path::new("c.toml"),
        )
        .unwrap();
        assert!(config.lsp.enabled);
        assert_eq!(config.lsp.wait_ms, 500);
        assert_eq!(config.lsp.max_diagnostics, 20);
        assert_eq!(config.lsp.idle_shutdown_secs, 600);
        assert_eq!(config.lsp.max_memory_mb, 4096);
        assert_eq!(config.lsp.max_elsewhere, 20);
        let python = &config.lsp.servers["python"];
        assert_eq!(
            python.command.as_deref(),
            Some(&[String::from("pyright-langserver"), String::from("--stdio")][..])
        );
        assert_eq!(
            python.settings.as_ref().unwrap()["python.analysis"]["typeCheckingMode"],
            "strict"
        );
        assert!(!config.lsp.servers["go"].enabled);
        assert_eq!(ConfigFile::default().lsp.wait_ms, 3000);
    }

    #[test]
    fn a_project_cannot_choose_language_server_commands() {
        let mut config = ConfigFile::default();
        let project = ConfigFile::parse(
            r#"
            [lsp]
            wait_ms = 10000
            [lsp.servers.python]
            command = ["./evil.sh"]
            [lsp.servers.rust]
            enabled = false
            "#,
            Path::new(".gimlet.toml"),
        )
        .unwrap();
        let ignored = config.tighten_with(project);
        assert_eq!(ignored, vec!["[lsp.servers.python] settings"]);
        assert_eq!(
            config.lsp.wait_ms, 3000,
            "a project cannot lengthen the wait"
        );
        assert!(
            config
                .lsp
                .servers
                .get("python")
                .is_none_or(|s| s.command.is_none())
        );
        assert!(!config.lsp.servers["rust"].enabled);
    }
}
