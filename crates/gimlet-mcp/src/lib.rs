//! gimlet-mcp: serves the gimlet-tools registry over the Model Context Protocol.
//!
//! Each tool becomes an MCP tool (`tools/list`), each `tools/call` runs
//! [`gimlet_tools::pipeline::run`], and a tool's permission ask becomes an elicitation. The
//! crate maps; it knows nothing of how a tool works.
//!
//! ```no_run
//! use std::sync::Arc;
//! use gimlet_mcp::{ServerConfig, serve};
//! use gimlet_tools::{ToolEnv, ToolRegistry};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let env = ToolEnv::builder().root(".").build()?;
//! serve(ServerConfig::new(env, ToolRegistry::builtin())).await?;
//! # Ok(())
//! # }
//! ```

mod app;
mod ask;
mod form;
mod hosts;
mod logging;
mod mapping;
mod mrtr;
mod progress;
mod server;
mod transport;

use std::sync::Arc;
use std::time::Duration;

use gimlet_tools::spill::SPILL_MAX_AGE;
use gimlet_tools::{ToolEnv, ToolRegistry};

pub use form::DEFAULT_ASK_TIMEOUT;
pub use logging::client_log_layer;
pub use mapping::Shape;
pub use server::GimletServer;
pub use transport::http::{
    DEFAULT_HTTP_ADDR, HttpConfig, HttpConfigError, HttpServer, generate_token,
};

/// How often old spill files are swept while the server runs.
const SWEEP_EVERY: Duration = Duration::from_secs(60 * 60);

/// What a config reload produces: the new policy and the new tool set.
pub struct Reloaded {
    /// The permission policy.
    pub policy: gimlet_tools::Policy,
    /// The tools (with the disabled ones disabled).
    pub registry: ToolRegistry,
}

/// Reads the configuration again; run off the async runtime.
pub(crate) type Reload = Arc<dyn Fn() -> Result<Reloaded, String> + Send + Sync>;

/// Everything `serve` needs.
pub struct ServerConfig {
    env: Arc<ToolEnv>,
    registry: Arc<ToolRegistry>,
    ask_timeout: Duration,
    reload: Option<Reload>,
    shape: Shape,
}

impl ServerConfig {
    /// A server for these tools in this environment, on stdio.
    pub fn new(env: ToolEnv, registry: ToolRegistry) -> Self {
        Self {
            env: Arc::new(env),
            registry: Arc::new(registry),
            ask_timeout: DEFAULT_ASK_TIMEOUT,
            reload: None,
            shape: Shape::default(),
        }
    }

    /// Whether results carry `structuredContent` beside the text (default: text only, which
    /// every host shows the model whole; see [`Shape`]).
    #[must_use]
    pub fn shape(mut self, shape: Shape) -> Self {
        self.shape = shape;
        self
    }

    /// How to read the configuration again on SIGHUP: the new policy applies to new calls,
    /// and clients are told when the tool list changed.
    #[must_use]
    pub fn on_reload(
        mut self,
        reload: impl Fn() -> Result<Reloaded, String> + Send + Sync + 'static,
    ) -> Self {
        self.reload = Some(Arc::new(reload));
        self
    }

    /// How long a permission question waits for the user (default 5 minutes).
    #[must_use]
    pub fn ask_timeout(mut self, timeout: Duration) -> Self {
        self.ask_timeout = timeout;
        self
    }
}

/// Why the server could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The transport could not start (e.g. the client never initialized).
    #[error("could not start the MCP session: {0}")]
    Start(String),
    /// The session ended with an error.
    #[error("the MCP session failed: {0}")]
    Stopped(String),
    /// The system has no randomness for the server's keys (the 2026-07-28 state seal).
    #[error("no system randomness for the server's keys: {0}")]
    Randomness(std::io::Error),
}

/// Serves until the client goes away or the process is asked to stop.
pub async fn serve(config: ServerConfig) -> Result<(), ServeError> {
    let app = start(config).await?;
    reload_on_hangup(&app);
    transport::stdio::serve(app).await
}

/// Serves streamable HTTP on a bound server until SIGINT or SIGTERM, then shuts down
/// gracefully: no new connections, running calls get a grace period, sessions end.
pub async fn serve_http(config: ServerConfig, server: HttpServer) -> Result<(), ServeError> {
    let limits = app::PrincipalLimits {
        idle: server.config().session_idle_time(),
        cap: server.config().session_cap(),
    };
    let app = Arc::new(start_app(config, limits).await?);
    reload_on_hangup(&app);
    server.run(app).await
}

async fn start(config: ServerConfig) -> Result<Arc<app::App>, ServeError> {
    start_app(config, app::PrincipalLimits::default())
        .await
        .map(Arc::new)
}

/// The shared state, and the hourly sweep of old saved outputs.
async fn start_app(
    config: ServerConfig,
    principal_limits: app::PrincipalLimits,
) -> Result<app::App, ServeError> {
    let sealer = mrtr::Sealer::new().map_err(ServeError::Randomness)?;
    let spill = config.env.spill().clone();
    tokio::spawn(async move {
        let mut every = tokio::time::interval(SWEEP_EVERY);
        loop {
            every.tick().await;
            let dir = spill.clone();
            let removed = tokio::task::spawn_blocking(move || dir.sweep(SPILL_MAX_AGE)).await;
            tracing::debug!(?removed, "swept old outputs");
        }
    });
    let settings = app::Settings {
        ask_timeout: config.ask_timeout,
        shape: config.shape,
        sealer,
        reload: config.reload,
        principal_limits,
    };
    Ok(app::App::start(config.env, config.registry, settings).await)
}

/// Windows has no SIGHUP: the config is read at start only.
#[cfg(windows)]
fn reload_on_hangup(_app: &Arc<app::App>) {}

/// Reloads the config on every SIGHUP, for as long as the app lives.
#[cfg(unix)]
fn reload_on_hangup(app: &Arc<app::App>) {
    use tokio::signal::unix::{SignalKind, signal};
    if !app.reloads() {
        return;
    }
    let Ok(mut hangups) = signal(SignalKind::hangup()) else {
        return;
    };
    let app = Arc::downgrade(app);
    tokio::spawn(async move {
        while hangups.recv().await.is_some() {
            let Some(app) = app.upgrade() else {
                break;
            };
            app.reload().await;
        }
    });
}

/// The `tools/list` result for these tools, as JSON (what `gimlet tools --json` prints).
pub async fn tools_json(env: &ToolEnv, registry: &ToolRegistry, shape: Shape) -> serde_json::Value {
    let specs = registry.init(env).await;
    let tools: Vec<rmcp::model::Tool> = specs.iter().map(|s| mapping::tool(s, shape)).collect();
    serde_json::json!({ "tools": tools })
}

/// A fresh id with a prefix, e.g. `stdio-3f9a0c12d4e5b6a7`: random, or, where the system has
/// no randomness, this process's id and a count (unique, not secret: ids here name, they do
/// not authorize; the keys that do refuse to start without randomness).
pub(crate) fn new_id(prefix: &str) -> String {
    static COUNT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    match gimlet_tools::util::random_bytes::<8>() {
        Ok(bytes) => format!("{prefix}-{}", gimlet_tools::util::hex(&bytes)),
        Err(_) => {
            let n = COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            format!("{prefix}-p{:x}n{n:x}", std::process::id())
        }
    }
}

/// Resolves on Ctrl+C, Ctrl+Break, the console closing or the system shutting down.
#[cfg(windows)]
pub(crate) async fn shutdown_signal() {
    use tokio::signal::windows::{ctrl_break, ctrl_close, ctrl_shutdown};
    let ctrl_c = tokio::signal::ctrl_c();
    let (Ok(mut brk), Ok(mut close), Ok(mut shutdown)) =
        (ctrl_break(), ctrl_close(), ctrl_shutdown())
    else {
        let _ = ctrl_c.await;
        return;
    };
    tokio::select! {
        _ = ctrl_c => {}
        _ = brk.recv() => {}
        _ = close.recv() => {}
        _ = shutdown.recv() => {}
    }
}

/// Resolves on SIGINT or SIGTERM.
#[cfg(unix)]
pub(crate) async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let ctrl_c = tokio::signal::ctrl_c();
    let Ok(mut term) = signal(SignalKind::terminate()) else {
        let _ = ctrl_c.await;
        return;
    };
    tokio::select! {
        _ = ctrl_c => {}
        _ = term.recv() => {}
    }
}
