//! Code intelligence: language servers as managed children, the diagnostics appended after a
//! change, and what the `lsp` tool asks them.
//!
//! - `servers.rs`: which server serves a file (built-ins, the `[lsp]` config, `PATH`), and the
//!   project root it is started for;
//! - `spawn.rs`: starting a server's process, confined like a `bash` command;
//! - `framing.rs`, `client.rs`: the connection (JSON-RPC with `Content-Length` framing), the
//!   answers to the server's requests, the diagnostics and progress it reports;
//!   `client/connection.rs` holds the tasks over the pipes and the handling of each message;
//! - `diagnostics.rs`: the block after a change (new before pre-existing, nearest first);
//!   `impact.rs`: the block of the errors it caused in other files;
//! - `tree.rs`: a server's process tree (`/proc` on Linux, `ps` on macOS, the process list on
//!   Windows): its descendants and their resident memory;
//! - this file: [`LanguageServers`], one per environment (and so one per process: every
//!   session, over stdio or HTTP, shares the environment): a server per (language, project
//!   root), started on first need, restarted once after a crash, reported after a second, shut
//!   down when idle and restarted when over its memory cap (a watcher task per server); and
//!   `after_change`, the pipeline's step after a call that changed files.
//!
//! The wait for diagnostics runs after the call has left its session's lane and dropped its
//! path locks (see `pipeline/mod.rs`): other calls go on meanwhile.

mod client;
pub(crate) mod diagnostics;
mod framing;
pub(crate) mod impact;
pub(crate) mod position;

mod servers;
mod spawn;
mod tree;

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use crate::config::{BashSettings, LspConfig};
use crate::sandbox::Exec;
use crate::sandbox::protected::Protected;
use crate::util::MutexExt as _;

pub(crate) use client::{Client, Plan, Published, Readable, Report, RequestError, Waited, clip};
pub(crate) use diagnostics::{Filter, Status, one_line, severity_name};
pub(crate) use servers::ServerSpec;

/// How long a missing server is remembered as missing before `PATH` is looked at again.
const MISSING_RECHECK: Duration = Duration::from_secs(60);
/// Files of one call whose diagnostics are awaited at most.
pub(crate) const MAX_FILES_PER_CALL: usize = 8;
/// The largest file sent to a server.
const MAX_FILE_BYTES: u64 = 8 * 1024 * 1024;
/// How long a server gets to shut down.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);
/// How often a server's watcher looks at its memory and idle time (more often when the idle
/// time is shorter).
const WATCH_EVERY: Duration = Duration::from_secs(5);

/// A file a call changed, with its content before the change (`None`: it did not exist).
#[derive(Debug, Clone)]
pub struct Changed {
    pub(crate) path: PathBuf,
    pub(crate) before: Option<Vec<u8>>,
}

/// Why no server can answer for a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Unavailable {
    /// No server for this file type (or language servers are off).
    NoServer,
    /// The file lies outside the root folders, where no server is started.
    OutsideRoots,
    /// The language has a server, but it is not installed.
    Missing {
        /// The language.
        language: String,
        /// The commands looked for.
        commands: String,
        /// How to install it.
        hint: String,
    },
    /// Still starting when the wait ended.
    Starting(String),
    /// It could not start, or crashed twice.
    Failed(String),
}

impl Unavailable {
    /// Its name in a result's metadata.
    pub(crate) fn outcome(&self) -> &'static str {
        match self {
            Self::NoServer => "no_server",
            Self::OutsideRoots => "outside_roots",
            Self::Missing { .. } => "not_installed",
            Self::Starting(_) => "starting",
            Self::Failed(_) => "failed",
        }
    }

    /// The sentence for the model.
    pub(crate) fn message(&self) -> String {
        match self {
            Self::NoServer => String::from("no language server serves this file type"),
            Self::OutsideRoots => String::from(
                "language servers serve files inside the root folders only (they may write \
                 there and nowhere else)",
            ),
            Self::Missing {
                language,
                commands,
                hint,
            } => format!(
                "no {language} language server is installed ({commands} not found on PATH); \
                 install one to get diagnostics after edits and the `lsp` tool: {hint}"
            ),
            Self::Starting(name) => format!(
                "{name} is still starting; its diagnostics come with the next change, or ask \
                 the `lsp` tool for `diagnostics`"
            ),
            Self::Failed(message) => message.clone(),
        }
    }
}

/// One slot: the server of one language for one project root.
#[derive(Default)]
struct Slot {
    inner: Mutex<SlotInner>,
    ready: tokio::sync::Notify,
}

#[derive(Default)]
struct SlotInner {
    state: Option<SlotState>,
    crashes: u32,
    /// Said once, by the next use: the server was restarted after a crash.
    note: Option<String>,
}

enum SlotState {
    Starting,
    Running(Arc<Client>),
    Missing(Instant),
    Failed(String),
}

/// The language servers of an environment (see the module docs).
pub struct LanguageServers {
    specs: Vec<Arc<ServerSpec>>,
    wait: Duration,
    filter: Filter,
    /// At most this many errors of other files after a change (0: other files are not checked).
    max_elsewhere: usize,
    request_timeout: Duration,
    /// Unused this long, a server is shut down (`None`: never).
    idle_shutdown: Option<Duration>,
    /// Over this many bytes resident, a server is restarted (`None`: no cap).
    max_memory: Option<u64>,
    exec: Option<Arc<Exec>>,
    bash: BashSettings,
    roots: Vec<PathBuf>,
    /// What servers, like commands, may not change (read-only in their sandbox).
    protected: Protected,
    cache: Option<PathBuf>,
    search_path: Option<OsString>,
    slots: Mutex<HashMap<(String, PathBuf), Arc<Slot>>>,
}

impl std::fmt::Debug for LanguageServers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LanguageServers")
            .field(
                "languages",
                &self.specs.iter().map(|s| &s.language).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl LanguageServers {
    /// Language servers as `config` says, started through `exec` (the command helper and its
    /// sandbox), writing only beneath `roots` and their cache directory.
    pub fn new(
        config: &LspConfig,
        exec: Arc<Exec>,
        bash: BashSettings,
        roots: Vec<PathBuf>,
        protected: Protected,
    ) -> Self {
        Self {
            specs: servers::specs(config),
            wait: Duration::from_millis(config.wait_ms),
            filter: Filter {
                warnings: config.warnings,
                max: config.max_diagnostics.max(1),
            },
            max_elsewhere: config.max_elsewhere,
            request_timeout: Duration::from_millis(config.request_timeout_ms.max(100)),
            idle_shutdown: (config.idle_shutdown_secs > 0)
                .then(|| Duration::from_secs(config.idle_shutdown_secs)),
            max_memory: (config.max_memory_mb > 0)
                .then(|| config.max_memory_mb.saturating_mul(1024 * 1024)),
            exec: Some(exec),
            bash,
            roots,
            protected,
            cache: dirs::cache_dir(),
            search_path: std::env::var_os("PATH"),
            slots: Mutex::new(HashMap::new()),
        }
    }

    /// No language servers.
    pub fn disabled() -> Self {
        Self {
            specs: Vec::new(),
            wait: Duration::ZERO,
            filter: Filter {
                warnings: false,
                max: 20,
            },
            max_elsewhere: 0,
            request_timeout: Duration::from_secs(30),
            idle_shutdown: None,
            max_memory: None,
            exec: None,
            bash: BashSettings::default(),
            roots: Vec::new(),
            protected: Protected::default(),
            cache: None,
            search_path: None,
            slots: Mutex::new(HashMap::new()),
        }
    }

    /// Whether any language has a server configured.
    pub fn enabled(&self) -> bool {
        !self.specs.is_empty()
    }

    /// Whether a file's type has a server configured (installed or not). Cheap: it looks at
    /// the extension only.
    pub fn covers(&self, path: &Path) -> bool {
        !self.specs.is_empty() && servers::for_path(&self.specs, path).is_some()
    }

    /// How long a change waits for diagnostics.
    pub(crate) fn wait(&self) -> Duration {
        self.wait
    }

    /// Which diagnostics a change shows.
    pub(crate) fn filter(&self) -> Filter {
        self.filter
    }

    /// At most this many errors of other files are shown after a change; 0: other files are
    /// not checked.
    pub(crate) fn max_elsewhere(&self) -> usize {
        self.max_elsewhere
    }

    /// How long an `lsp` request may take.
    pub(crate) fn request_timeout(&self) -> Duration {
        self.request_timeout
    }

    /// The servers running now.
    pub(crate) fn running(&self) -> Vec<Arc<Client>> {
        let slots: Vec<Arc<Slot>> = self.slots.locked().values().cloned().collect();
        slots
            .iter()
            .filter_map(|slot| match &slot.inner.locked().state {
                Some(SlotState::Running(client)) if client.alive() => Some(Arc::clone(client)),
                _ => None,
            })
            .collect()
    }

    /// The servers running now for project roots inside `roots` (a call's): servers are shared
    /// by every session, and a session does not see those another session's roots started.
    pub(crate) fn running_within(&self, roots: &crate::fs::RootSet) -> Vec<Arc<Client>> {
        self.running()
            .into_iter()
            .filter(|client| {
                roots
                    .roots()
                    .iter()
                    .any(|r| client.root.starts_with(r.path()))
            })
            .collect()
    }

    /// Shuts every server down (`shutdown`, `exit`, then a kill after a grace).
    pub async fn shutdown(&self) {
        let clients = self.running();
        let mut waits = tokio::task::JoinSet::new();
        for client in clients {
            waits.spawn(async move { client.shutdown(SHUTDOWN_GRACE).await });
        }
        while waits.join_next().await.is_some() {}
        self.slots.locked().clear();
    }

    /// The server for a file under `roots` (the call's), started if need be; waits for a start
    /// until `deadline`. The note, when there is one, says the server was restarted.
    pub(crate) async fn client_for(
        &self,
        file: &Path,
        roots: &crate::fs::RootSet,
        deadline: tokio::time::Instant,
    ) -> Result<(Arc<Client>, Option<String>), Unavailable> {
        let spec = servers::for_path(&self.specs, file).ok_or(Unavailable::NoServer)?;
        // Servers work for the roots only: they may write there, nowhere else.
        let root = roots
            .roots()
            .iter()
            .map(|r| r.path())
            .filter(|r| file.starts_with(r))
            .max_by_key(|r| r.as_os_str().len())
            .ok_or(Unavailable::OutsideRoots)?
            .to_owned();
        let project = servers::project_root(spec, file, &root);
        let slot = {
            let mut slots = self.slots.locked();
            Arc::clone(
                slots
                    .entry((spec.language.clone(), project.clone()))
                    .or_default(),
            )
        };
        loop {
            let notified = slot.ready.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut guard = slot.inner.locked();
                let inner = &mut *guard;
                match inner.state.take() {
                    Some(SlotState::Running(client)) if client.stopped_by_us() => {
                        inner.state = Some(SlotState::Running(Arc::clone(&client)));
                        return Err(Unavailable::Failed(format!(
                            "{} was shut down (gimlet is stopping)",
                            client.name
                        )));
                    }
                    Some(SlotState::Running(client)) if client.alive() => {
                        // Used from now: the watcher does not shut it down under this call.
                        client.touch();
                        inner.state = Some(SlotState::Running(Arc::clone(&client)));
                        return Ok((client, inner.note.take()));
                    }
                    Some(SlotState::Running(client)) => {
                        let reason = client
                            .exit_reason()
                            .unwrap_or_else(|| format!("{} stopped", client.name));
                        inner.crashes += 1;
                        if inner.crashes >= 2 {
                            inner.state = Some(SlotState::Failed(format!(
                                "{reason}, the second time in this session, so it is not \
                                 restarted (diagnostics and the `lsp` tool are off for this \
                                 project until gimlet restarts); its last output: {}",
                                or_none(&client.stderr_tail())
                            )));
                            continue;
                        }
                        inner.note = Some(format!(
                            "{reason} unexpectedly and was restarted (once: after another crash \
                             it stays off)"
                        ));
                        inner.state = Some(SlotState::Starting);
                        self.launch(&slot, spec, &project);
                    }
                    Some(SlotState::Starting) => inner.state = Some(SlotState::Starting),
                    Some(SlotState::Failed(message)) => {
                        inner.state = Some(SlotState::Failed(message.clone()));
                        return Err(Unavailable::Failed(message));
                    }
                    Some(SlotState::Missing(at)) if at.elapsed() < MISSING_RECHECK => {
                        inner.state = Some(SlotState::Missing(at));
                        return Err(missing(spec));
                    }
                    Some(SlotState::Missing(_)) | None => {
                        inner.state = Some(SlotState::Starting);
                        self.launch(&slot, spec, &project);
                    }
                }
            }
            tokio::select! {
                () = &mut notified => {}
                () = tokio::time::sleep_until(deadline) => {
                    return Err(Unavailable::Starting(
                        spec.commands
                            .first()
                            .map_or_else(|| spec.language.clone(), |c| ServerSpec::name_of(c)),
                    ));
                }
            }
        }
    }

    /// Starts the server of a slot in the background; the slot says when it is up.
    fn launch(&self, slot: &Arc<Slot>, spec: &Arc<ServerSpec>, project: &Path) {
        let slot = Arc::clone(slot);
        let spec = Arc::clone(spec);
        let project = project.to_owned();
        let exec = self.exec.clone();
        let bash = self.bash.clone();
        let mut roots = self.roots.clone();
        if !roots.iter().any(|r| project.starts_with(r)) {
            roots.push(project.clone());
        }
        let protected = self.protected.clone();
        let cache = self.cache.clone();
        let search_path = self.search_path.clone();
        let timeout = self.request_timeout;
        let (idle, cap) = (self.idle_shutdown, self.max_memory);
        tokio::spawn(async move {
            let state = start(
                spec,
                project,
                exec,
                bash,
                roots,
                protected,
                cache,
                search_path,
                timeout,
            )
            .await;
            let client = match &state {
                SlotState::Running(client) => Some(Arc::downgrade(client)),
                _ => None,
            };
            slot.inner.locked().state = Some(state);
            slot.ready.notify_waiters();
            if let Some(client) = client {
                watch(Arc::downgrade(&slot), client, idle, cap).await;
            }
        });
    }
}

/// Why a watcher takes a server out of its slot.
enum Release {
    /// Nobody used it for this long.
    Idle(Duration),
    /// It held too much memory: the note for the next use.
    OverCap(String),
}

/// Watches one running server until it is gone: shuts it down when nobody used it for `idle`,
/// kills it when its process tree holds more than `cap` bytes (the next use starts it again,
/// with a note). Holds neither the slot nor the client, so it keeps nothing alive; a runtime
/// shutting down drops it while it sleeps.
async fn watch(slot: Weak<Slot>, client: Weak<Client>, idle: Option<Duration>, cap: Option<u64>) {
    if idle.is_none() && cap.is_none() {
        return;
    }
    let every = idle.map_or(WATCH_EVERY, |idle| {
        (idle / 2).clamp(Duration::from_millis(100), WATCH_EVERY)
    });
    loop {
        tokio::time::sleep(every).await;
        let (Some(slot), Some(client)) = (slot.upgrade(), client.upgrade()) else {
            return;
        };
        if !client.alive() || client.stopped_by_us() {
            return;
        }
        if let (Some(cap), Some(pid)) = (cap, client.pid()) {
            let used = tokio::task::spawn_blocking(move || tree::tree_resident(pid))
                .await
                .ok()
                .flatten();
            if let Some(used) = used.filter(|used| *used > cap) {
                let note = tree::over_cap_note(&client.name, used, cap);
                tracing::info!(server = %client.name, root = %client.root.display(), "{note}");
                if release(&slot, &client, Release::OverCap(note)) {
                    // Killing reads `/proc` for the whole tree, off the runtime (`kill`).
                    client.kill();
                }
                return;
            }
        }
        if let Some(idle) = idle
            && release(&slot, &client, Release::Idle(idle))
        {
            tracing::debug!(server = %client.name, root = %client.root.display(), "shutting down an idle language server");
            client.shutdown(SHUTDOWN_GRACE).await;
            return;
        }
    }
}

/// Empties `slot` if it still holds `client` and `why` holds (decided under the slot's lock,
/// where `client_for` marks a server used): the next use starts a new server, quietly after
/// an idle shutdown, with a note after a restart over the memory cap.
fn release(slot: &Slot, client: &Arc<Client>, why: Release) -> bool {
    let mut inner = slot.inner.locked();
    match &inner.state {
        Some(SlotState::Running(held)) if Arc::ptr_eq(held, client) => {}
        _ => return false,
    }
    match why {
        Release::Idle(idle) => {
            if client.idle_for().is_none_or(|unused| unused < idle) {
                return false;
            }
        }
        Release::OverCap(note) => inner.note = Some(note),
    }
    inner.state = None;
    true
}

impl Drop for LanguageServers {
    fn drop(&mut self) {
        // Servers not shut down in order (a library user who never called `shutdown`) are
        // killed; their pipes close either way.
        for client in self.running() {
            client.kill();
        }
    }
}

#[expect(clippy::too_many_arguments, reason = "one start, its whole setting")]
async fn start(
    spec: Arc<ServerSpec>,
    project: PathBuf,
    exec: Option<Arc<Exec>>,
    bash: BashSettings,
    roots: Vec<PathBuf>,
    protected: Protected,
    cache: Option<PathBuf>,
    search_path: Option<OsString>,
    timeout: Duration,
) -> SlotState {
    let Some(exec) = exec else {
        return SlotState::Failed(String::from("language servers are off"));
    };
    let spawned = {
        let spec = Arc::clone(&spec);
        let project = project.clone();
        tokio::task::spawn_blocking(move || {
            let command = servers::find_command(&spec, search_path.as_deref())?;
            let launch = spawn::Launch {
                command,
                workdir: project,
                roots,
                protected,
                cache: spawn::cache_dir(cache.as_deref(), &spec.language),
            };
            Some(spawn::start(&exec, &bash, &launch).map(|p| (p, launch.command)))
        })
        .await
    };
    let (process, command) = match spawned {
        Ok(None) => return SlotState::Missing(Instant::now()),
        Ok(Some(Ok(started))) => started,
        Ok(Some(Err(message))) => return SlotState::Failed(message),
        Err(err) => return SlotState::Failed(format!("starting the server failed: {err}")),
    };
    let name = ServerSpec::name_of(&command);
    tracing::debug!(server = %name, root = %project.display(), sandboxed = process.sandboxed, "starting a language server");
    match Client::start(Arc::clone(&spec), project, name.clone(), process, timeout).await {
        Ok(client) => SlotState::Running(client),
        Err(message) => SlotState::Failed(format!(
            "{name} could not start: {message}. Install or repair it ({}), or turn it off with \
             `[lsp.servers.{}] enabled = false`",
            spec.install_hint, spec.language
        )),
    }
}

fn missing(spec: &ServerSpec) -> Unavailable {
    Unavailable::Missing {
        language: spec.language.clone(),
        commands: spec
            .commands
            .iter()
            .map(|c| format!("`{}`", ServerSpec::name_of(c)))
            .collect::<Vec<_>>()
            .join(" or "),
        hint: spec.install_hint.clone(),
    }
}

fn or_none(text: &str) -> &str {
    if text.is_empty() { "none" } else { text }
}

/// Reads a file for a server: its text, or `None` when it is gone, too large or not UTF-8.
/// Blocking.
pub(crate) fn read_text(path: &Path) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() > MAX_FILE_BYTES {
        return None;
    }
    String::from_utf8(std::fs::read(path).ok()?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::RootSet;
    use crate::sandbox::SandboxSetting;

    fn servers(root: &Path, search: &Path) -> LanguageServers {
        let mut lsp = LanguageServers::new(
            &LspConfig::default(),
            Arc::new(Exec::new(None, SandboxSetting::Off)),
            BashSettings::default(),
            vec![root.to_owned()],
            Protected::default(),
        );
        lsp.search_path = Some(search.as_os_str().to_owned());
        lsp
    }

    #[tokio::test]
    async fn no_server_is_started_outside_the_roots_or_for_unknown_types() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir_all(&root).unwrap();
        let roots = RootSet::open([&root]).unwrap();
        let lsp = servers(&root, dir.path());
        let soon = tokio::time::Instant::now() + Duration::from_secs(5);
        let outside = lsp.client_for(&dir.path().join("x.py"), &roots, soon).await;
        assert_eq!(outside.unwrap_err(), Unavailable::OutsideRoots);
        let notes = lsp.client_for(&root.join("notes.md"), &roots, soon).await;
        assert_eq!(notes.unwrap_err(), Unavailable::NoServer);
        assert!(lsp.covers(&root.join("a.py")) && !lsp.covers(&root.join("notes.md")));
        assert!(!LanguageServers::disabled().covers(&root.join("a.py")));
    }

    #[tokio::test]
    async fn a_missing_server_is_remembered_with_its_hint() {
        let dir = tempfile::tempdir().unwrap();
        let roots = RootSet::open([dir.path()]).unwrap();
        let empty = tempfile::tempdir().unwrap();
        let lsp = servers(dir.path(), empty.path());
        let soon = tokio::time::Instant::now() + Duration::from_secs(30);
        for _ in 0..2 {
            let missing = lsp.client_for(&dir.path().join("a.py"), &roots, soon).await;
            let Err(Unavailable::Missing { language, hint, .. }) = missing else {
                panic!("{missing:?}");
            };
            assert_eq!(language, "python");
            assert!(hint.contains("pip install basedpyright"), "{hint}");
        }
        assert!(lsp.running().is_empty());
    }
}
