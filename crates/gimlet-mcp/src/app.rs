//! What every session of a server shares: the tool environment, the registry and its
//! `tools/list` entries, the instructions, the connected peers (for list-changed notices),
//! the 2026-07-28 state seal, the running-call count, and the HTTP principals. A config reload
//! replaces the registry here.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use gimlet_tools::util::{MutexExt as _, RwLockExt as _};
use gimlet_tools::{Session, ToolEnv, ToolRegistry, ToolSpec};
use rmcp::model::Tool;
use rmcp::service::SubscriptionSink;
use rmcp::{Peer, RoleServer};

use crate::mapping;
use crate::mrtr::Sealer;

/// What every session shares. Its fields are its own: sessions read them through the methods
/// below, so that what a reload replaces and what is counted stays in one place.
pub(crate) struct App {
    env: Arc<ToolEnv>,
    /// The tools; replaced on a config reload.
    registry: RwLock<Arc<ToolRegistry>>,
    /// The `tools/list` entries of the registry.
    tools: RwLock<Arc<Vec<Tool>>>,
    instructions: String,
    /// Session clients, for `notifications/tools/list_changed`.
    peers: Mutex<Vec<Peer<RoleServer>>>,
    /// 2026-07-28 clients listening for list changes (`subscriptions/listen`).
    listeners: Mutex<Vec<SubscriptionSink>>,
    /// Reads the config again (SIGHUP; Windows has none).
    #[cfg_attr(windows, allow(dead_code))]
    reload: Option<crate::Reload>,
    ask_timeout: Duration,
    /// Whether results carry `structuredContent`.
    shape: mapping::Shape,
    /// Seals the request state of 2026-07-28 questions.
    sealer: Arc<Sealer>,
    /// Calls running now, for a graceful shutdown.
    running_calls: AtomicUsize,
    /// Sessions of stateless (2026-07-28 over HTTP) clients, by credential.
    principals: Mutex<HashMap<String, (Arc<Session>, Instant)>>,
    /// How long a stateless client's session lives without calls, and how many there may be.
    principal_limits: PrincipalLimits,
}

/// How long a stateless client's session lives without calls, and how many there may be.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PrincipalLimits {
    pub(crate) idle: Duration,
    pub(crate) cap: usize,
}

impl Default for PrincipalLimits {
    fn default() -> Self {
        Self {
            idle: Duration::from_secs(30 * 60),
            cap: 64,
        }
    }
}

/// What the server was configured with, beside its tools.
pub(crate) struct Settings {
    pub(crate) ask_timeout: Duration,
    pub(crate) shape: mapping::Shape,
    pub(crate) sealer: Sealer,
    pub(crate) reload: Option<crate::Reload>,
    pub(crate) principal_limits: PrincipalLimits,
}

/// Who a stateless HTTP request comes from: set by the HTTP guard from the credential.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Principal(pub(crate) String);

/// Counts a running call for as long as it lives ([`App::running`]).
pub(crate) struct Running<'a>(&'a AtomicUsize);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl App {
    /// Runs every tool's `init` and prepares the tool list.
    pub(crate) async fn start(
        env: Arc<ToolEnv>,
        registry: Arc<ToolRegistry>,
        settings: Settings,
    ) -> Self {
        let specs = registry.init(&env).await;
        let tools = specs
            .iter()
            .map(|s| mapping::tool(s, settings.shape))
            .collect();
        let instructions = instructions(&env, &specs);
        Self {
            env,
            registry: RwLock::new(registry),
            tools: RwLock::new(Arc::new(tools)),
            instructions,
            peers: Mutex::new(Vec::new()),
            listeners: Mutex::new(Vec::new()),
            reload: settings.reload,
            ask_timeout: settings.ask_timeout,
            shape: settings.shape,
            sealer: Arc::new(settings.sealer),
            running_calls: AtomicUsize::new(0),
            principals: Mutex::new(HashMap::new()),
            principal_limits: settings.principal_limits,
        }
    }

    /// The tool environment every session's calls run in.
    pub(crate) fn env(&self) -> &Arc<ToolEnv> {
        &self.env
    }

    /// The server's `instructions`.
    pub(crate) fn instructions(&self) -> &str {
        &self.instructions
    }

    /// How long a question waits for the user.
    pub(crate) fn ask_timeout(&self) -> Duration {
        self.ask_timeout
    }

    /// Whether results carry `structuredContent`.
    pub(crate) fn shape(&self) -> mapping::Shape {
        self.shape
    }

    /// The seal of 2026-07-28 request states.
    pub(crate) fn sealer(&self) -> &Arc<Sealer> {
        &self.sealer
    }

    /// Whether the config can be read again (a reload was configured).
    #[cfg_attr(windows, allow(dead_code))]
    pub(crate) fn reloads(&self) -> bool {
        self.reload.is_some()
    }

    /// Counts a call as running until the guard drops.
    pub(crate) fn running(&self) -> Running<'_> {
        self.running_calls.fetch_add(1, Ordering::AcqRel);
        Running(&self.running_calls)
    }

    /// How many calls run now.
    pub(crate) fn running_calls(&self) -> usize {
        self.running_calls.load(Ordering::Acquire)
    }

    /// Remembers a session's client, to tell it when the tool list changes.
    pub(crate) fn add_peer(&self, peer: Peer<RoleServer>) {
        self.peers.locked().push(peer);
    }

    /// Remembers a 2026-07-28 listener, to tell it when the tool list changes.
    pub(crate) fn add_listener(&self, sink: SubscriptionSink) {
        self.listeners.locked().push(sink);
    }

    /// The tools now.
    pub(crate) fn registry(&self) -> Arc<ToolRegistry> {
        Arc::clone(&self.registry.read_locked())
    }

    /// The `tools/list` entries now.
    pub(crate) fn tools(&self) -> Arc<Vec<Tool>> {
        Arc::clone(&self.tools.read_locked())
    }

    /// Reads the config again: the new policy applies to calls that start from now on, and
    /// when the tool list changed, every client is told (`notifications/tools/list_changed`).
    #[cfg_attr(windows, allow(dead_code))]
    pub(crate) async fn reload(&self) {
        let Some(reload) = &self.reload else {
            return;
        };
        let reload = Arc::clone(reload);
        let fresh = match tokio::task::spawn_blocking(move || reload()).await {
            Ok(Ok(fresh)) => fresh,
            Ok(Err(err)) => {
                tracing::error!("config reload failed, keeping the old one: {err}");
                return;
            }
            Err(err) => {
                tracing::error!("config reload failed: {err}");
                return;
            }
        };
        self.env.set_policy(fresh.policy);
        let registry = Arc::new(fresh.registry);
        let tools: Vec<Tool> = registry
            .init(&self.env)
            .await
            .iter()
            .map(|s| mapping::tool(s, self.shape))
            .collect();
        let changed = *self.tools() != tools;
        *self.registry.write_locked() = registry;
        *self.tools.write_locked() = Arc::new(tools);
        tracing::info!(tools_changed = changed, "config reloaded");
        if changed {
            self.notify_tools_changed().await;
        }
    }

    /// Tells every client that the tool list changed.
    #[cfg_attr(windows, allow(dead_code))]
    async fn notify_tools_changed(&self) {
        let peers: Vec<Peer<RoleServer>> = {
            let mut peers = self.peers.locked();
            peers.retain(|p| !p.is_transport_closed());
            peers.clone()
        };
        for peer in peers {
            let _ = peer.notify_tool_list_changed().await;
        }
        let listeners: Vec<SubscriptionSink> = self.listeners.locked().clone();
        let mut gone = Vec::new();
        for (i, listener) in listeners.iter().enumerate() {
            if listener.notify_tool_list_changed().await.is_err() {
                gone.push(i);
            }
        }
        if !gone.is_empty() {
            let mut listeners = self.listeners.locked();
            let mut i = 0;
            listeners.retain(|_| {
                let keep = !gone.contains(&i);
                i += 1;
                keep
            });
        }
    }

    /// The session of a stateless client: one per credential, so what it read, its grants
    /// and its background jobs carry from one request to the next. Idle ones expire; past the
    /// cap the least recently used goes.
    pub(crate) fn principal_session(&self, principal: &str) -> Arc<Session> {
        let now = Instant::now();
        let mut principals = self.principals.locked();
        principals.retain(|_, (_, used)| now.duration_since(*used) < self.principal_limits.idle);
        if let Some((session, used)) = principals.get_mut(principal) {
            *used = now;
            return Arc::clone(session);
        }
        if principals.len() >= self.principal_limits.cap
            && let Some(oldest) = principals
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(key, _)| key.clone())
        {
            principals.remove(&oldest);
        }
        let session = Arc::new(Session::new(crate::new_id("http")));
        principals.insert(principal.to_owned(), (Arc::clone(&session), now));
        session
    }

    /// Ends the stateless clients' sessions (and their background jobs).
    pub(crate) fn drop_principal_sessions(&self) {
        self.principals.locked().clear();
    }
}

/// The server's `instructions`: where the roots are, then each tool's own guidance.
fn instructions(env: &ToolEnv, specs: &[ToolSpec]) -> String {
    let confined = if env.roots().roots().is_empty() {
        String::from("the folders the client names as roots (none was given on the command line)")
    } else if env.implicit_roots() {
        format!(
            "the folders the client names as roots, or else {}",
            env.roots().describe()
        )
    } else {
        format!("these folders: {}", env.roots().describe())
    };
    let mut text = format!(
        "gimlet: file, search and shell tools confined to {confined}. Relative paths start at \
         the first root. Read a file before editing it. Outputs over the limits are cut with a \
         notice saying how to see the rest."
    );
    for spec in specs {
        if let Some(extra) = &spec.instructions {
            text.push_str("\n\n");
            text.push_str(extra);
        }
    }
    text
}
