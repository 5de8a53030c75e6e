//! [`ToolContext`]: everything one call needs (its session, cancellation, progress, roots,
//! the permission stage's record), and the threading helpers (`blocking`, the worker flag).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::{AccessKind, Session, ToolEnv};
use crate::audit::Decision;
use crate::context::ask::{Asker, DenyAsker};
use crate::error::ToolError;
use crate::fs::{ContentHash, PathError, ResolvedPath, RootSet};
use crate::lsp::Changed;
use crate::permission::{Access, PathAccess, Policy};
use crate::util::MutexExt as _;
use crate::vocab::OutputLimits;

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
    /// change must then find it unchanged (`change::check_fresh`).
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

    /// A context of this call's session without the call's decisions, to judge further paths
    /// with ([`Self::reads_unasked`]) while the call's own decision stands for the audit log.
    pub(crate) fn session_judge(&self) -> ToolContext {
        ToolContext::builder(Arc::clone(self.env()))
            .session(Arc::clone(self.session()))
            .build()
    }

    /// Whether `tool`, reading only, may read `path` without asking: it lies beneath one of
    /// `roots` as itself (not reached through a link from elsewhere) and the policy allows the
    /// read outright (not denied, not protected, not to be asked). For what a tool reads
    /// beyond the paths it was given (the source lines of places the `lsp` tool shows, the
    /// other files the diagnostics check looks at). Judge on a context of the call's session,
    /// ([`Self::session_judge`]). Blocking (resolves).
    pub(crate) fn reads_unasked(&self, roots: &RootSet, tool: &str, path: &Path) -> bool {
        let Ok(resolved) = roots.resolve(&path.display().to_string()) else {
            return false;
        };
        if !resolved.is_inside() || resolved.path != path {
            return false;
        }
        let access = self.access_of(&resolved, AccessKind::Read);
        let judgement = self.policy().judge(
            tool,
            crate::vocab::ToolFlags::READ_ONLY,
            &[access],
            self.session().grants(),
        );
        matches!(judgement.permission, crate::permission::Permission::Allow)
    }

    /// The limits a result of a tool with `limits` is cut to in this call: lowered to what the
    /// session's client shows its model whole ([`Session::set_result_budget`]) unless the
    /// limits were configured. The truncation stage cuts to these; a tool may ask them to know
    /// beforehand whether its result will be cut.
    pub fn result_limits(&self, limits: OutputLimits) -> OutputLimits {
        let mut limits = limits;
        if !self.env().limits_configured()
            && let Some(budget) = self.session().result_budget()
        {
            limits.max_bytes = limits.max_bytes.min(budget);
        }
        limits
    }

    /// Runs blocking work (file system, walks) off the async runtime: in place when the call
    /// already runs on a worker thread ([`crate::pipeline::run_on_worker`]), otherwise on the
    /// blocking pool, inside the caller's span (so that its log events still belong to the
    /// session).
    pub async fn blocking<T, F>(&self, work: F) -> Result<T, ToolError>
    where
        T: Send + 'static,
        F: FnOnce(ToolContext) -> Result<T, ToolError> + Send + 'static,
    {
        let ctx = self.clone();
        if on_worker() {
            return work(ctx);
        }
        let span = tracing::Span::current();
        tokio::task::spawn_blocking(move || span.in_scope(|| work(ctx))).await?
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
            self.env.roots().emptied()
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
