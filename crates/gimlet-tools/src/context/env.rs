//! [`ToolEnv`]: what tools are initialised with, fixed for the life of a server (platform,
//! roots, config, policy, the asker, hooks, language servers), and its builder.

use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use crate::audit::AuditLog;
use crate::checkpoint::Checkpoints;
use crate::config::{Budget, CheckpointsConfig, LspConfig, Settings};
use crate::context::hook::Hook;
use crate::fs::{NameMatching, PathError, PathLocks, Root, RootSet, implicit_root_here};
use crate::lsp::LanguageServers;
use crate::permission::Policy;
use crate::sandbox::{Exec, SandboxSetting};
use crate::spill::SpillStore;
use crate::util::RwLockExt as _;
use crate::vocab::OutputLimits;

/// Whether a path is read or written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccessKind {
    /// Read or listed.
    Read,
    /// Created, changed or removed.
    Write,
}

/// Whether commands can run in a sandbox here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SandboxStatus {
    /// The sandbox is enforced for every command.
    Enforced,
    /// The sandbox was turned off by the user.
    Off,
    /// The kernel cannot enforce it; commands run unsandboxed.
    #[default]
    Unavailable,
}

/// What the sandbox does for commands, once the probe has answered (it may block until then).
fn sandbox_status(exec: &Exec) -> SandboxStatus {
    match exec.setting() {
        SandboxSetting::Off => SandboxStatus::Off,
        SandboxSetting::Auto | SandboxSetting::On if exec.sandboxed() => SandboxStatus::Enforced,
        SandboxSetting::Auto | SandboxSetting::On => SandboxStatus::Unavailable,
    }
}

/// The environment tools are initialised with: fixed for the life of a server.
#[derive(Debug)]
pub struct ToolEnv {
    roots: RootSet,
    limits_configured: bool,
    /// The roots were not given but taken from the working directory: a client's roots
    /// replace them.
    pub(super) implicit_roots: bool,
    policy: RwLock<Arc<Policy>>,
    limits: OutputLimits,
    spill: SpillStore,
    exec: Arc<Exec>,
    client_name: Option<String>,
    settings: Arc<Settings>,
    hooks: Vec<Arc<dyn Hook>>,
    locks: Arc<PathLocks>,
    budget: Budget,
    audit: Option<Arc<AuditLog>>,
    workers: Arc<tokio::sync::Semaphore>,
    pub(super) lsp: Arc<LanguageServers>,
    checkpoints: Arc<Checkpoints>,
}

/// Calls that may run at once across all sessions, by default.
pub const DEFAULT_MAX_PARALLEL_CALLS: usize = 16;

impl ToolEnv {
    /// Starts building an environment.
    pub fn builder() -> ToolEnvBuilder {
        ToolEnvBuilder::default()
    }

    /// The configured roots (`--root`), or the implicit one (see [`ToolEnvBuilder::root`]).
    pub fn roots(&self) -> &RootSet {
        &self.roots
    }

    /// Whether the roots were taken implicitly (no `--root` given): a client's roots then
    /// replace them for its session.
    pub fn implicit_roots(&self) -> bool {
        self.implicit_roots
    }

    /// The permission policy now. A call keeps the one it started with
    /// ([`crate::ToolContext::policy`]).
    pub fn policy(&self) -> Arc<Policy> {
        Arc::clone(&self.policy.read_locked())
    }

    /// Replaces the policy (a config reload); calls already running keep theirs. It compares
    /// names as the environment does ([`ToolEnvBuilder::name_matching`]).
    pub fn set_policy(&self, policy: Policy) {
        let policy = policy.with_name_matching(self.roots.name_matching());
        *self.policy.write_locked() = Arc::new(policy);
    }

    /// Default output limits (a tool's own limits are capped by these).
    pub fn limits(&self) -> OutputLimits {
        self.limits
    }

    /// Whether the output limits were set ([`ToolEnvBuilder::limits`]) rather than left at
    /// their defaults: a session's result budget only lowers default limits.
    pub fn limits_configured(&self) -> bool {
        self.limits_configured
    }

    /// Where truncated outputs are saved.
    pub fn spill(&self) -> &SpillStore {
        &self.spill
    }

    /// The checkpoints of the roots.
    pub fn checkpoints(&self) -> &Arc<Checkpoints> {
        &self.checkpoints
    }

    /// The command helper and the sandbox.
    pub fn exec(&self) -> &Arc<Exec> {
        &self.exec
    }

    /// Whether commands run sandboxed. Blocking the first time (it waits for the sandbox probe
    /// started at build time, usually done by then).
    pub fn sandbox(&self) -> SandboxStatus {
        sandbox_status(&self.exec)
    }

    /// [`ToolEnv::sandbox`] for async code: waits for the probe on the blocking pool.
    pub async fn sandbox_settled(&self) -> SandboxStatus {
        let exec = Arc::clone(&self.exec);
        tokio::task::spawn_blocking(move || sandbox_status(&exec))
            .await
            .unwrap_or(SandboxStatus::Unavailable)
    }

    /// The connected client's name, when known.
    pub fn client_name(&self) -> Option<&str> {
        self.client_name.as_deref()
    }

    /// The operating system (`linux`, `macos` ...).
    pub fn platform(&self) -> &'static str {
        std::env::consts::OS
    }

    /// Tool settings from the config file.
    pub fn settings(&self) -> &Arc<Settings> {
        &self.settings
    }

    /// The hooks every call passes through.
    pub fn hooks(&self) -> &[Arc<dyn Hook>] {
        &self.hooks
    }

    /// Slots for running calls: at most this many execute at once, across sessions.
    pub(crate) fn workers(&self) -> &tokio::sync::Semaphore {
        &self.workers
    }

    /// The per-session budgets.
    pub fn budget(&self) -> Budget {
        self.budget
    }

    /// The audit log, if there is one.
    pub fn audit(&self) -> Option<&AuditLog> {
        self.audit.as_deref()
    }

    /// The locks that serialise changes to one path.
    pub fn locks(&self) -> &PathLocks {
        &self.locks
    }

    /// The language servers (none unless [`ToolEnvBuilder::lsp`] was given a config).
    pub fn lsp(&self) -> &Arc<LanguageServers> {
        &self.lsp
    }

    /// A copy for one client: same roots and config, that client's name.
    #[must_use]
    pub fn for_client(&self, client_name: Option<String>) -> Self {
        Self {
            roots: self.roots.clone(),
            limits_configured: self.limits_configured,
            implicit_roots: self.implicit_roots,
            policy: RwLock::new(self.policy()),
            limits: self.limits,
            spill: self.spill.clone(),
            exec: Arc::clone(&self.exec),
            client_name,
            settings: Arc::clone(&self.settings),
            hooks: self.hooks.clone(),
            locks: Arc::clone(&self.locks),
            budget: self.budget,
            audit: self.audit.clone(),
            workers: Arc::clone(&self.workers),
            lsp: Arc::clone(&self.lsp),
            checkpoints: Arc::clone(&self.checkpoints),
        }
    }
}

/// Builds a [`ToolEnv`]; `build` checks it.
#[derive(Default)]
pub struct ToolEnvBuilder {
    roots: Vec<PathBuf>,
    policy: Option<Policy>,
    limits: Option<OutputLimits>,
    spill_dir: Option<PathBuf>,
    sandbox: SandboxSetting,
    exec_helper: Option<PathBuf>,
    unix_sockets: Vec<PathBuf>,
    client_name: Option<String>,
    settings: Option<Settings>,
    hooks: Vec<Arc<dyn Hook>>,
    budget: Budget,
    audit: Option<Arc<AuditLog>>,
    max_parallel: Option<usize>,
    lsp: Option<LspConfig>,
    name_matching: Option<NameMatching>,
    checkpoints: CheckpointsConfig,
    checkpoint_dir: Option<PathBuf>,
}

/// Why a [`ToolEnv`] could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EnvError {
    /// A root could not be opened.
    #[error("cannot use root `{path}`: {source}; a root must be an existing directory")]
    Root {
        /// The root as given.
        path: String,
        /// Why.
        #[source]
        source: PathError,
    },
    /// The spill directory could not be created.
    #[error("cannot create the output directory `{path}`: {source}")]
    SpillDir {
        /// The directory.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

impl ToolEnvBuilder {
    /// Adds a root folder. Without any, the current directory is the root unless it is `/`,
    /// the home directory or above it ([`crate::fs::implicit_root`]); a client's MCP roots
    /// replace that implicit root, and without either the environment has no root (path tools
    /// then say how to add one).
    #[must_use]
    pub fn root(mut self, path: impl Into<PathBuf>) -> Self {
        self.roots.push(path.into());
        self
    }

    /// Compares file names as `matching` says, for root containment, the permission rules
    /// and the protected list (default: this system's, [`NameMatching::native`]: case ignored
    /// on macOS and Windows). Tests run macOS's and Windows's rules on Linux with it.
    #[must_use]
    pub fn name_matching(mut self, matching: NameMatching) -> Self {
        self.name_matching = Some(matching);
        self
    }

    /// Sets the permission policy (default: [`crate::Mode::Default`], no rules).
    #[must_use]
    pub fn policy(mut self, policy: Policy) -> Self {
        self.policy = Some(policy);
        self
    }

    /// Sets the default output limits.
    #[must_use]
    pub fn limits(mut self, limits: OutputLimits) -> Self {
        self.limits = Some(limits);
        self
    }

    /// Sets where truncated outputs are saved (default: the user's data directory).
    #[must_use]
    pub fn spill_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.spill_dir = Some(dir.into());
        self
    }

    /// Configures the checkpoints (`[checkpoints]`; default off).
    #[must_use]
    pub fn checkpoints(mut self, config: CheckpointsConfig) -> Self {
        self.checkpoints = config;
        self
    }

    /// Sets where the checkpoint stores are kept (default: `checkpoints` beside the spill
    /// directory, in the user's data directory).
    #[must_use]
    pub fn checkpoint_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.checkpoint_dir = Some(dir.into());
        self
    }

    /// Sets the sandbox setting (`--sandbox`; default `auto`).
    #[must_use]
    pub fn sandbox(mut self, sandbox: SandboxSetting) -> Self {
        self.sandbox = sandbox;
        self
    }

    /// The program that runs commands: a binary that calls [`crate::sandbox::helper_main`]
    /// when its first argument is [`crate::sandbox::HELPER_ARG`] (the `gimlet` binary does).
    /// Without one, `bash` is not offered.
    #[must_use]
    pub fn exec_helper(mut self, path: impl Into<PathBuf>) -> Self {
        self.exec_helper = Some(path.into());
        self
    }

    /// Unix sockets outside the roots that sandboxed commands may connect to (an SSH
    /// agent's); every other one outside the roots is refused.
    #[must_use]
    pub fn unix_sockets(mut self, sockets: impl IntoIterator<Item = PathBuf>) -> Self {
        self.unix_sockets.extend(sockets);
        self
    }

    /// Sets the client name.
    #[must_use]
    pub fn client_name(mut self, name: impl Into<String>) -> Self {
        self.client_name = Some(name.into());
        self
    }

    /// Sets the tool settings.
    #[must_use]
    pub fn settings(mut self, settings: Settings) -> Self {
        self.settings = Some(settings);
        self
    }

    /// Adds a hook.
    #[must_use]
    pub fn hook(mut self, hook: Arc<dyn Hook>) -> Self {
        self.hooks.push(hook);
        self
    }

    /// Sets per-session budgets (default: none).
    #[must_use]
    pub fn budget(mut self, budget: Budget) -> Self {
        self.budget = budget;
        self
    }

    /// How many calls may execute at once, across sessions (default
    /// [`DEFAULT_MAX_PARALLEL_CALLS`]).
    #[must_use]
    pub fn max_parallel_calls(mut self, max: usize) -> Self {
        self.max_parallel = Some(max.max(1));
        self
    }

    /// Uses language servers as `config` says (the `[lsp]` section): diagnostics after
    /// changes and the `lsp` tool. Without this, none are started.
    #[must_use]
    pub fn lsp(mut self, config: LspConfig) -> Self {
        self.lsp = Some(config);
        self
    }

    /// Writes one line per call to this audit log.
    #[must_use]
    pub fn audit(mut self, log: AuditLog) -> Self {
        self.audit = Some(Arc::new(log));
        self
    }

    /// Opens the roots and the spill directory.
    pub fn build(self) -> Result<ToolEnv, EnvError> {
        let mut paths = self.roots;
        let implicit_roots = paths.is_empty();
        if implicit_roots {
            match implicit_root_here() {
                Some(root) => paths.push(root),
                None => tracing::warn!(
                    "no --root given and the working directory is machine-wide (/ or the home \
                     directory), so gimlet starts with no root: only roots the MCP client names \
                     are usable; pass --root DIR in the client's config"
                ),
            }
        }
        let matching = self.name_matching.unwrap_or_default();
        let policy = self.policy.unwrap_or_default().with_name_matching(matching);
        let mut roots = RootSet::default().with_name_matching(matching);
        for path in paths {
            let root = Root::open(&path).map_err(|source| EnvError::Root {
                path: path.display().to_string(),
                source,
            })?;
            roots.push(Arc::new(root));
        }
        let spill_dir = self.spill_dir.unwrap_or_else(SpillStore::default_dir);
        let spill = SpillStore::open(&spill_dir).map_err(|source| EnvError::SpillDir {
            path: spill_dir.display().to_string(),
            source,
        })?;
        // Multi-file changes a crash interrupted are rolled back before anything else runs.
        crate::fs::recover_pending(&spill.dir().join(".pending"));
        let exec = Arc::new(
            Exec::with_cache(
                self.exec_helper,
                self.sandbox,
                Some(spill_dir.join(".sandbox-probe.json")),
            )
            .with_unix_sockets(self.unix_sockets),
        );
        let settings = self.settings.unwrap_or_default();
        let lsp = match &self.lsp {
            Some(config) => LanguageServers::new(
                config,
                Arc::clone(&exec),
                settings.bash.clone(),
                roots.roots().iter().map(|r| r.path().to_owned()).collect(),
                policy.protected().clone(),
            ),
            None => LanguageServers::disabled(),
        };
        let checkpoint_dir = self.checkpoint_dir.unwrap_or_else(|| {
            spill.dir().parent().map_or_else(
                || spill.dir().join("checkpoints"),
                |p| p.join("checkpoints"),
            )
        });
        let checkpoints = Arc::new(Checkpoints::new(checkpoint_dir, self.checkpoints));
        checkpoints.start_baselines(
            &roots
                .roots()
                .iter()
                .map(|r| r.path().to_owned())
                .collect::<Vec<_>>(),
        );
        Ok(ToolEnv {
            roots,
            limits_configured: self.limits.is_some(),
            implicit_roots,
            policy: RwLock::new(Arc::new(policy)),
            limits: self.limits.unwrap_or_default(),
            spill,
            exec,
            client_name: self.client_name,
            settings: Arc::new(settings),
            hooks: self.hooks,
            locks: Arc::new(PathLocks::default()),
            budget: self.budget,
            audit: self.audit,
            workers: Arc::new(tokio::sync::Semaphore::new(
                self.max_parallel.unwrap_or(DEFAULT_MAX_PARALLEL_CALLS),
            )),
            lsp: Arc::new(lsp),
            checkpoints,
        })
    }
}
