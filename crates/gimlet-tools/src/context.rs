//! What a tool sees: [`ToolEnv`] (fixed at init: platform, roots, config) and [`ToolContext`]
//! (one call: session, cancellation, progress, ask, roots, file state).

use crate::util::{MutexExt as _, RwLockExt as _};
use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::ask::{Asker, DenyAsker};
use crate::audit::{AuditLog, Decision};
use crate::config::{Budget, LspConfig, Settings};
use crate::error::ToolError;
use crate::fs::{
    ContentHash, FileStates, PathError, PathLocks, ResolvedPath, Root, RootSet, implicit_root_here,
};
use crate::hook::Hook;
use crate::lsp::{Changed, LanguageServers};
use crate::permission::{Access, Grants, PathAccess, Policy};
use crate::sandbox::{Exec, SandboxSetting};
use crate::spill::SpillStore;
use crate::tool::OutputLimits;

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
    implicit_roots: bool,
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
    lsp: Arc<LanguageServers>,
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
    /// ([`ToolContext::policy`]).
    pub fn policy(&self) -> Arc<Policy> {
        Arc::clone(&self.policy.read_locked())
    }

    /// Replaces the policy (a config reload); calls already running keep theirs.
    pub fn set_policy(&self, policy: Policy) {
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
        let mut roots = RootSet::default();
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
                self.policy
                    .as_ref()
                    .map(|p| p.protected().clone())
                    .unwrap_or_default(),
            ),
            None => LanguageServers::disabled(),
        };
        Ok(ToolEnv {
            roots,
            limits_configured: self.limits.is_some(),
            implicit_roots,
            policy: RwLock::new(Arc::new(self.policy.unwrap_or_default())),
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
        })
    }
}

/// Per-session state: what was read, grants, client roots, and tools' own state.
///
/// One per stdio connection or HTTP session; calls of one session share it.
#[derive(Debug, Default)]
pub struct Session {
    id: String,
    files: FileStates,
    grants: Grants,
    /// Concurrency-safe calls share it; the others hold it alone, in arrival order.
    lane: tokio::sync::RwLock<()>,
    client_roots: RwLock<Vec<Arc<Root>>>,
    /// The most bytes of one result the client shows its model whole, if less than gimlet's
    /// default limit (see [`Session::set_result_budget`]).
    result_budget: std::sync::OnceLock<usize>,
    extensions: Extensions,
}

impl Session {
    /// A new session with an id.
    pub fn new(id: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            ..Self::default()
        }
    }

    /// The session id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The files this session read or wrote.
    pub fn files(&self) -> &FileStates {
        &self.files
    }

    /// "Allow for this session" grants.
    pub fn grants(&self) -> &Grants {
        &self.grants
    }

    /// The session's call lane: concurrency-safe calls take it shared, the others alone.
    /// Tokio's lock is fair, so waiting calls go in the order they arrived.
    pub(crate) fn lane(&self) -> &tokio::sync::RwLock<()> {
        &self.lane
    }

    /// Replaces the roots the client offered (MCP `roots/list`).
    pub fn set_client_roots(&self, roots: Vec<Arc<Root>>) {
        *self.client_roots.write_locked() = roots;
    }

    /// The roots the client offered.
    pub fn client_roots(&self) -> Vec<Arc<Root>> {
        self.client_roots.read_locked().clone()
    }

    /// Says how much of one result the client shows its model whole, where that is less than
    /// gimlet's default limit: Codex, for one, keeps about 12,000 bytes of a tool's text and
    /// cuts the middle out of the rest. Unless the output limits were configured, results of
    /// this session are then truncated (and paged) to fit, so nothing is lost without a
    /// notice saying how to go on. Set once, when the client is known.
    pub fn set_result_budget(&self, bytes: usize) {
        let _ = self.result_budget.set(bytes);
    }

    /// The budget set by [`Session::set_result_budget`].
    pub fn result_budget(&self) -> Option<usize> {
        self.result_budget.get().copied()
    }

    /// A tool's own per-session state, created on first use.
    pub fn state<T: Default + Send + Sync + 'static>(&self) -> Arc<T> {
        self.extensions.get_or_default()
    }
}

/// A map from type to one shared value of that type.
#[derive(Default)]
struct Extensions {
    map: Mutex<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>,
}

impl std::fmt::Debug for Extensions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Extensions").finish_non_exhaustive()
    }
}

impl Extensions {
    fn get_or_default<T: Default + Send + Sync + 'static>(&self) -> Arc<T> {
        let mut map = self.map.locked();
        let entry = map
            .entry(TypeId::of::<T>())
            .or_insert_with(|| Arc::new(T::default()) as Arc<dyn Any + Send + Sync>);
        Arc::clone(entry)
            .downcast::<T>()
            .unwrap_or_else(|_| Arc::new(T::default()))
    }
}

/// A progress update from a running call.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProgressUpdate {
    /// What is happening now (e.g. the last line of output).
    pub message: Option<String>,
    /// Work done so far, if countable.
    pub progress: Option<f64>,
    /// Work in all, if known.
    pub total: Option<f64>,
    /// A new title for the call.
    pub title: Option<String>,
    /// Extra metadata.
    pub metadata: Option<Value>,
}

impl ProgressUpdate {
    /// "`done` of `total`" progress with a message.
    #[expect(
        clippy::cast_precision_loss,
        reason = "progress counts are far below 2^52"
    )]
    pub fn counted(message: impl Into<String>, done: usize, total: usize) -> Self {
        Self {
            message: Some(message.into()),
            progress: Some(done as f64),
            total: Some(total as f64),
            ..Self::default()
        }
    }
}

/// Receives progress updates. The MCP layer turns them into `notifications/progress`.
pub trait ProgressSink: Send + Sync {
    /// Reports one update. Must not block.
    fn report(&self, update: ProgressUpdate);
}

/// A [`ProgressSink`] that drops everything.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoProgress;

impl ProgressSink for NoProgress {
    fn report(&self, _update: ProgressUpdate) {}
}

/// Everything one call needs. Cheap to clone (one `Arc`).
#[derive(Clone)]
pub struct ToolContext {
    inner: Arc<ContextInner>,
}

struct ContextInner {
    env: Arc<ToolEnv>,
    policy: Arc<Policy>,
    session: Arc<Session>,
    call_id: String,
    cancel: CancellationToken,
    progress: Arc<dyn ProgressSink>,
    asker: Arc<dyn Asker>,
    roots: RootSet,
    approved: Mutex<Vec<PathBuf>>,
    resolved: Mutex<Vec<(String, ResolvedPath)>>,
    previews: Mutex<Vec<(PathBuf, Option<ContentHash>)>>,
    decision: Mutex<Option<Decision>>,
    changed: Mutex<Vec<Changed>>,
}

impl std::fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolContext")
            .field("session", &self.inner.session.id())
            .field("call_id", &self.inner.call_id)
            .finish_non_exhaustive()
    }
}

impl ToolContext {
    /// Starts building a context for one call.
    pub fn builder(env: Arc<ToolEnv>) -> ToolContextBuilder {
        ToolContextBuilder {
            env,
            session: None,
            call_id: None,
            cancel: None,
            progress: None,
            asker: None,
        }
    }

    /// The environment.
    pub fn env(&self) -> &Arc<ToolEnv> {
        &self.inner.env
    }

    /// The session this call belongs to.
    pub fn session(&self) -> &Arc<Session> {
        &self.inner.session
    }

    /// This call's id.
    pub fn call_id(&self) -> &str {
        &self.inner.call_id
    }

    /// The call's cancellation token.
    pub fn cancellation(&self) -> &CancellationToken {
        &self.inner.cancel
    }

    /// Whether the call was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancel.is_cancelled()
    }

    /// Reports progress.
    pub fn progress(&self, update: ProgressUpdate) {
        self.inner.progress.report(update);
    }

    /// Reports a progress message.
    pub fn progress_message(&self, message: impl Into<String>) {
        self.progress(ProgressUpdate {
            message: Some(message.into()),
            ..ProgressUpdate::default()
        });
    }

    /// Who answers questions for this call.
    pub fn asker(&self) -> &Arc<dyn Asker> {
        &self.inner.asker
    }

    /// The permission policy, as it was when the call started.
    pub fn policy(&self) -> &Policy {
        &self.inner.policy
    }

    /// This call's roots: the configured ones, then the client's.
    pub fn roots(&self) -> &RootSet {
        &self.inner.roots
    }

    /// Resolves a path argument against this call's roots. Blocking.
    ///
    /// A call resolves each argument once: the permission stage judges the resolution and the
    /// tool opens the same one (beneath its root, so a change on disk in between makes the
    /// open fail rather than land elsewhere).
    pub fn resolve(&self, input: &str) -> Result<ResolvedPath, PathError> {
        let cached = self.inner.resolved.locked();
        if let Some((_, resolved)) = cached.iter().find(|(i, _)| i == input) {
            return Ok(resolved.clone());
        }
        drop(cached);
        let resolved = self.inner.roots.resolve(input)?;
        let mut cached = self.inner.resolved.locked();
        cached.push((input.to_owned(), resolved.clone()));
        Ok(resolved)
    }

    /// Forgets this call's resolutions (after the call itself changed the file system, e.g.
    /// created a directory the path goes through).
    pub fn forget_resolutions(&self) {
        self.inner.resolved.locked().clear();
    }

    /// Resolves a path argument and checks that the call may open it: inside a root, or
    /// outside but approved by the permission stage. Blocking.
    pub fn resolve_allowed(&self, input: &str) -> Result<ResolvedPath, PathError> {
        let resolved = self.resolve(input)?;
        self.check_allowed(&resolved)?;
        Ok(resolved)
    }

    /// Fails unless the path is inside a root or was approved for this call.
    pub fn check_allowed(&self, resolved: &ResolvedPath) -> Result<(), PathError> {
        if resolved.is_inside() || self.is_approved(&resolved.path) {
            return Ok(());
        }
        Err(PathError::OutsideRoots {
            path: resolved.path.display().to_string(),
            roots: self.inner.roots.describe(),
        })
    }

    /// Records that the user (or a rule) approved a path outside the roots for this call.
    pub fn approve_path(&self, path: &Path) {
        self.inner.approved.locked().push(path.to_owned());
    }

    /// Records the state of a file as it was shown to the user in a permission preview; the
    /// change must then find it unchanged ([`crate::fs::check_fresh`]).
    pub fn bind_preview(&self, path: &Path, hash: Option<ContentHash>) {
        let mut previews = self.inner.previews.locked();
        previews.retain(|(p, _)| p != path);
        previews.push((path.to_owned(), hash));
    }

    /// The state a file had when its change was previewed, if it was.
    pub fn preview_of(&self, path: &Path) -> Option<Option<ContentHash>> {
        let previews = self.inner.previews.locked();
        previews.iter().find(|(p, _)| p == path).map(|(_, h)| *h)
    }

    /// Records who decided this call's permission (the policy does; so does the ask stage).
    /// A later record replaces an earlier one: the last word decides.
    pub fn record_decision(&self, allowed: bool, by: impl Into<String>) {
        *self.inner.decision.locked() = Some(Decision {
            verdict: if allowed { "allow" } else { "deny" },
            by: by.into(),
        });
    }

    /// Who decided this call's permission, if anyone did yet.
    pub fn decision(&self) -> Option<Decision> {
        self.inner.decision.locked().clone()
    }

    /// Records that this call changed the file at `path` (resolved), which held `before`
    /// (`None`: nothing). After the call, the pipeline sends the change to the file's language
    /// server and appends its diagnostics. Costs nothing for a file no server serves.
    pub fn record_change(&self, path: &Path, before: Option<&[u8]>) {
        if !self.inner.env.lsp.covers(path) {
            return;
        }
        self.inner.changed.locked().push(Changed {
            path: path.to_owned(),
            before: before.map(<[u8]>::to_vec),
        });
    }

    /// The changes recorded so far, taken.
    pub(crate) fn take_changes(&self) -> Vec<Changed> {
        std::mem::take(&mut *self.inner.changed.locked())
    }

    fn is_approved(&self, path: &Path) -> bool {
        let approved = self.inner.approved.locked();
        approved.iter().any(|p| p == path)
    }

    /// The access a path argument means, resolved against this call's roots (off the
    /// runtime). Tools return it from [`crate::Tool::accesses`].
    pub async fn path_access(&self, input: &str, kind: AccessKind) -> Result<Access, ToolError> {
        let input = input.to_owned();
        self.nonblocking_first(move |ctx| Ok(ctx.access_of(&ctx.resolve(&input)?, kind)))
            .await
    }

    /// The access of an already resolved path.
    pub fn access_of(&self, resolved: &ResolvedPath, kind: AccessKind) -> Access {
        let protected = resolved
            .relative()
            .is_some_and(|rel| self.policy().is_protected(rel));
        // Saved outputs may be read back without asking (never written).
        let saved_output =
            kind == AccessKind::Read && self.inner.env.spill().contains(&resolved.path);
        if saved_output {
            self.approve_path(&resolved.path);
        }
        let path = PathAccess {
            path: resolved.path.clone(),
            display: resolved.display(),
            inside_roots: resolved.is_inside() || saved_output,
            protected,
        };
        match kind {
            AccessKind::Read => Access::Read(path),
            AccessKind::Write => Access::Write(path),
        }
    }

    /// Runs blocking work (file system, walks) off the async runtime: in place when the call
    /// already runs on a worker thread ([`crate::pipeline::run_on_worker`]), otherwise on the
    /// blocking pool.
    pub async fn blocking<T, F>(&self, work: F) -> Result<T, ToolError>
    where
        T: Send + 'static,
        F: FnOnce(ToolContext) -> Result<T, ToolError> + Send + 'static,
    {
        let ctx = self.clone();
        if on_worker() {
            return work(ctx);
        }
        tokio::task::spawn_blocking(move || work(ctx)).await?
    }

    /// Like [`Self::blocking`], but first tries `work` in place with waiting forbidden
    /// ([`crate::fs::nowait`]): opens and reads through [`crate::fs`] fail rather than wait
    /// for the disk or the network. If the attempt fails in any way, its result is dropped
    /// and `work` runs again on the blocking pool, so it must not change anything before it
    /// can fail (a `read` records the file state last). Most small reads of cached files
    /// finish in the attempt, without a thread hand-off.
    ///
    /// `work` may only touch files through [`crate::fs`] (its opens and
    /// [`crate::fs::nowait::read_at`]), and must check [`crate::fs::nowait::active`] before any
    /// other step that could wait (and fail instead).
    pub async fn nonblocking_first<T, F>(&self, work: F) -> Result<T, ToolError>
    where
        T: Send + 'static,
        F: Fn(&ToolContext) -> Result<T, ToolError> + Send + 'static,
    {
        if !on_worker()
            && let Ok(done) = crate::fs::nowait::attempt(|| work(self))
        {
            return Ok(done);
        }
        self.blocking(move |ctx| work(&ctx)).await
    }
}

/// Builds a [`ToolContext`].
pub struct ToolContextBuilder {
    env: Arc<ToolEnv>,
    session: Option<Arc<Session>>,
    call_id: Option<String>,
    cancel: Option<CancellationToken>,
    progress: Option<Arc<dyn ProgressSink>>,
    asker: Option<Arc<dyn Asker>>,
}

impl ToolContextBuilder {
    /// The session (default: a new one).
    #[must_use]
    pub fn session(mut self, session: Arc<Session>) -> Self {
        self.session = Some(session);
        self
    }

    /// The call id (default: a counter).
    #[must_use]
    pub fn call_id(mut self, id: impl Into<String>) -> Self {
        self.call_id = Some(id.into());
        self
    }

    /// The cancellation token (default: a fresh one).
    #[must_use]
    pub fn cancellation(mut self, token: CancellationToken) -> Self {
        self.cancel = Some(token);
        self
    }

    /// The progress sink (default: none).
    #[must_use]
    pub fn progress(mut self, sink: Arc<dyn ProgressSink>) -> Self {
        self.progress = Some(sink);
        self
    }

    /// Who answers questions (default: deny every ask).
    #[must_use]
    pub fn asker(mut self, asker: Arc<dyn Asker>) -> Self {
        self.asker = Some(asker);
        self
    }

    /// Builds the context; the call's roots are the environment's plus the session's.
    pub fn build(self) -> ToolContext {
        static NEXT_CALL: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let session = self.session.unwrap_or_default();
        let client_roots = session.client_roots();
        // A root taken from the working directory gives way to the roots the client names.
        let mut roots = if self.env.implicit_roots && !client_roots.is_empty() {
            RootSet::default()
        } else {
            self.env.roots().clone()
        };
        for root in client_roots {
            roots.push(root);
        }
        let call_id = self.call_id.unwrap_or_else(|| {
            NEXT_CALL
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                .to_string()
        });
        ToolContext {
            inner: Arc::new(ContextInner {
                policy: self.env.policy(),
                env: self.env,
                session,
                call_id,
                cancel: self.cancel.unwrap_or_default(),
                progress: self.progress.unwrap_or_else(|| Arc::new(NoProgress)),
                asker: self.asker.unwrap_or_else(|| Arc::new(DenyAsker::default())),
                roots,
                approved: Mutex::new(Vec::new()),
                resolved: Mutex::new(Vec::new()),
                previews: Mutex::new(Vec::new()),
                decision: Mutex::new(None),
                changed: Mutex::new(Vec::new()),
            }),
        }
    }
}

thread_local! {
    /// Set while a call runs on a worker thread of the blocking pool.
    static ON_WORKER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the current thread is a call worker ([`crate::pipeline::run_on_worker`]): there,
/// [`ToolContext::blocking`] runs its work in place.
pub(crate) fn on_worker() -> bool {
    ON_WORKER.with(std::cell::Cell::get)
}

/// Marks the current thread as a call worker, or no longer one.
pub(crate) fn set_on_worker(on: bool) {
    ON_WORKER.with(|flag| flag.set(on));
}
