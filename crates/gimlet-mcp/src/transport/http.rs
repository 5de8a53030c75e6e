//! Streamable HTTP: the MCP endpoint at `/mcp`, rmcp's `StreamableHttpService` mounted in axum,
//! behind gimlet's own guard.
//!
//! What guards it, outermost first:
//!
//! - the connection: HTTP/1.1, request headers must arrive within [`HttpConfig::header_timeout`];
//! - [`guard`]: the bearer token (401), the cap on concurrent sessions (503), the request body
//!   read in full within [`HttpConfig::body_timeout`] (408) and at most
//!   [`HttpConfig::max_body_bytes`] (413; at once when `Content-Length` says more);
//! - rmcp: the `Host` allowlist and the `Origin` allowlist (403), sessions (`Mcp-Session-Id`,
//!   idle expiry, `DELETE` to end one: 200, as the SDKs' servers answer), the protocol headers.
//!
//! Session clients (`initialize`) get one [`GimletServer`] and one [`gimlet_tools::Session`]
//! per MCP session. 2026-07-28 clients are stateless: each request gets a fresh handler, and the
//! state they need across requests (what was read, grants, background jobs) lives in a session
//! keyed by their credential (see [`App::principal_session`]).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::ServeError;
use crate::app::{App, Principal};
use crate::server::GimletServer;

/// The default address: loopback only.
pub const DEFAULT_HTTP_ADDR: &str = "127.0.0.1:8765";

/// How the HTTP server runs. [`HttpConfig::new`] gives the defaults.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    addr: SocketAddr,
    auth_token: Option<String>,
    allowed_hosts: Vec<String>,
    allowed_origins: Vec<String>,
    max_sessions: usize,
    session_idle: Duration,
    max_body_bytes: usize,
    header_timeout: Duration,
    body_timeout: Duration,
    shutdown_grace: Duration,
}

/// The HTTP server could not be set up as asked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HttpConfigError {
    /// A non-loopback address without a token would let anyone on the network run tools.
    #[error(
        "{addr} is reachable from other machines, so a bearer token is required: pass \
         --auth-token TOKEN (or GIMLET_AUTH_TOKEN), or --auth-token generate for a fresh one"
    )]
    TokenRequired {
        /// The address.
        addr: SocketAddr,
    },
    /// The token is too short to resist guessing.
    #[error("the auth token must be at least 16 characters (use --auth-token generate)")]
    WeakToken,
}

impl HttpConfig {
    /// Serve at `addr` with the defaults: no token (allowed on loopback only), loopback `Host`
    /// and `Origin` values, 64 sessions, 30 minutes idle expiry, 4 MiB bodies, 10 s for the
    /// headers, 30 s for the body, 10 s for running calls to finish on shutdown.
    pub fn new(addr: SocketAddr) -> Self {
        Self {
            addr,
            auth_token: None,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            max_sessions: 64,
            session_idle: Duration::from_secs(30 * 60),
            max_body_bytes: 4 * 1024 * 1024,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            shutdown_grace: Duration::from_secs(10),
        }
    }

    /// Requires `Authorization: Bearer <token>` on every request.
    #[must_use]
    pub fn auth_token(mut self, token: Option<String>) -> Self {
        self.auth_token = token.filter(|t| !t.is_empty());
        self
    }

    /// Accepts these `Host` values too (names or `name:port`), besides the loopback ones.
    #[must_use]
    pub fn allow_hosts(mut self, hosts: impl IntoIterator<Item = String>) -> Self {
        self.allowed_hosts.extend(hosts);
        self
    }

    /// Accepts these browser origins too (`https://app.example.com`, `http://localhost:*`).
    #[must_use]
    pub fn allow_origins(mut self, origins: impl IntoIterator<Item = String>) -> Self {
        self.allowed_origins.extend(origins);
        self
    }

    /// At most this many MCP sessions at once (new ones get 503).
    #[must_use]
    pub fn max_sessions(mut self, max: usize) -> Self {
        self.max_sessions = max.max(1);
        self
    }

    /// A session without traffic for this long is closed.
    #[must_use]
    pub fn session_idle(mut self, idle: Duration) -> Self {
        self.session_idle = idle;
        self
    }

    /// The largest request body (larger: 413).
    #[must_use]
    pub fn max_body_bytes(mut self, max: usize) -> Self {
        self.max_body_bytes = max;
        self
    }

    /// How long a client may take to send a request's headers, and its body.
    #[must_use]
    pub fn timeouts(mut self, headers: Duration, body: Duration) -> Self {
        self.header_timeout = headers;
        self.body_timeout = body;
        self
    }

    /// How long running calls may take to finish once shutdown starts.
    #[must_use]
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.shutdown_grace = grace;
        self
    }

    /// The address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Refuses what would be unsafe: no token on a non-loopback address, a short token.
    pub fn check(&self) -> Result<(), HttpConfigError> {
        match &self.auth_token {
            None if !self.addr.ip().is_loopback() => {
                Err(HttpConfigError::TokenRequired { addr: self.addr })
            }
            Some(token) if token.len() < 16 => Err(HttpConfigError::WeakToken),
            _ => Ok(()),
        }
    }

    pub(crate) fn session_idle_time(&self) -> Duration {
        self.session_idle
    }

    pub(crate) fn session_cap(&self) -> usize {
        self.max_sessions
    }

    /// The `Host` allowlist: loopback names (any port), plus the configured ones.
    fn hosts(&self) -> Vec<String> {
        let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "::1", "[::1]"]
            .into_iter()
            .map(String::from)
            .collect();
        hosts.extend(self.allowed_hosts.iter().cloned());
        hosts
    }

    /// The `Origin` allowlist: loopback pages (any port), plus the configured ones.
    fn origins(&self) -> Vec<String> {
        let mut origins: Vec<String> = [
            "http://localhost:*",
            "http://127.0.0.1:*",
            "http://[::1]:*",
            "https://localhost:*",
            "https://127.0.0.1:*",
        ]
        .into_iter()
        .map(String::from)
        .collect();
        origins.extend(self.allowed_origins.iter().cloned());
        origins
    }
}

/// A fresh random token for `--auth-token generate`: 32 hex digits (128 bits), or the error
/// when the system has no randomness (never a token anyone could guess).
pub fn generate_token() -> std::io::Result<String> {
    gimlet_tools::util::random_hex()
}

/// What the guard needs.
#[derive(Clone)]
struct Guard {
    token: Option<Arc<str>>,
    sessions: Arc<LocalSessionManager>,
    max_sessions: usize,
    max_body_bytes: usize,
    body_timeout: Duration,
}

/// Compares without leaking, through timing, how much of the token was right.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn refuse(status: StatusCode, message: &str) -> Response {
    (status, format!("{message}\n")).into_response()
}

/// Authentication, the session cap and the body limits, before rmcp sees the request.
async fn guard(State(guard): State<Guard>, mut request: Request, next: Next) -> Response {
    let principal = match &guard.token {
        Some(token) => {
            let presented = request
                .headers()
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "));
            match presented {
                Some(given) if same(given.trim().as_bytes(), token.as_bytes()) => {
                    Principal(String::from("token"))
                }
                _ => {
                    let mut response = refuse(
                        StatusCode::UNAUTHORIZED,
                        "a valid bearer token is required (Authorization: Bearer <token>)",
                    );
                    response
                        .headers_mut()
                        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
                    return response;
                }
            }
        }
        None => Principal(String::from("anonymous")),
    };
    request.extensions_mut().insert(principal);

    if request.method() == Method::POST && starts_a_session(&request) {
        let open = guard.sessions.sessions.read().await.len();
        if open >= guard.max_sessions {
            let mut response = refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                "too many MCP sessions are open; close one or try again later",
            );
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("30"));
            return response;
        }
    }

    if request.method() == Method::POST {
        // A body declared too large is refused before any of it is read: waiting for 10 MiB
        // that may never come would hold the connection for the whole body timeout.
        let declared = request
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        if declared.is_some_and(|len| len > guard.max_body_bytes as u64) {
            // What does come is read on (and dropped) meanwhile, up to four times the limit,
            // so that a client still sending sees the 413 rather than a broken pipe.
            let body = request.into_body();
            let (limit, timeout) = (guard.max_body_bytes.saturating_mul(4), guard.body_timeout);
            tokio::spawn(async move {
                let _ = tokio::time::timeout(timeout, read_body(body, limit)).await;
            });
            return refuse(
                StatusCode::PAYLOAD_TOO_LARGE,
                &format!(
                    "the request body is larger than {} bytes",
                    guard.max_body_bytes
                ),
            );
        }
        let (parts, body) = request.into_parts();
        let read = read_body(body, guard.max_body_bytes);
        let bytes = match tokio::time::timeout(guard.body_timeout, read).await {
            Err(_) => {
                return refuse(
                    StatusCode::REQUEST_TIMEOUT,
                    "the request body did not arrive in time",
                );
            }
            Ok(Err(BodyError::TooLarge)) => {
                return refuse(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    &format!(
                        "the request body is larger than {} bytes",
                        guard.max_body_bytes
                    ),
                );
            }
            Ok(Err(BodyError::Broken)) => {
                return refuse(
                    StatusCode::BAD_REQUEST,
                    "the request body could not be read",
                );
            }
            Ok(Ok(bytes)) => bytes,
        };
        if let Some(response) = removed_method(&parts.headers, &bytes) {
            return response;
        }
        request = Request::from_parts(parts, Body::from(bytes));
    }
    let ending_a_session = request.method() == Method::DELETE;
    let mut response = next.run(request).await;
    if ending_a_session && response.status() == StatusCode::ACCEPTED {
        // rmcp answers a DELETE that ends a session with 202. The SDKs' own servers answer
        // 200, and the Python SDK's client logs anything but 200 or 204 as a failed end.
        *response.status_mut() = StatusCode::OK;
    }
    response
}

/// Methods the 2026-07-28 revision removed (sessions, and their setup, are gone).
const REMOVED_IN_2026_07_28: [&str; 4] = [
    "initialize",
    "logging/setLevel",
    "resources/subscribe",
    "resources/unsubscribe",
];

/// A 2026-07-28 request for a method that revision removed: 404 with Method not found, as the
/// revision says, and the request's id.
fn removed_method(headers: &http::HeaderMap, body: &[u8]) -> Option<Response> {
    #[derive(serde::Deserialize)]
    struct Outline {
        id: Option<serde_json::Value>,
        method: Option<String>,
    }
    let version = headers.get("mcp-protocol-version")?.to_str().ok()?;
    // Revisions are dates: they order as strings.
    if version < "2026-07-28" {
        return None;
    }
    let outline: Outline = serde_json::from_slice(body).ok()?;
    let method = outline.method?;
    if !REMOVED_IN_2026_07_28.contains(&method.as_str()) {
        return None;
    }
    let answer = serde_json::json!({
        "jsonrpc": "2.0",
        "id": outline.id,
        "error": {
            "code": -32601,
            "message": format!("Method not found: `{method}` was removed in MCP {version}"),
        },
    });
    Some(
        (
            StatusCode::NOT_FOUND,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            answer.to_string(),
        )
            .into_response(),
    )
}

enum BodyError {
    TooLarge,
    Broken,
}

/// Reads a body of at most `max` bytes. A larger one is read on (and dropped) up to four
/// times the limit, so the client gets its 413 instead of a reset connection.
async fn read_body(mut body: Body, max: usize) -> Result<bytes::Bytes, BodyError> {
    use http_body_util::BodyExt;
    let mut kept = bytes::BytesMut::new();
    let mut seen = 0usize;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|_| BodyError::Broken)?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        seen = seen.saturating_add(data.len());
        if seen > max.saturating_mul(4) {
            return Err(BodyError::TooLarge);
        }
        if seen <= max {
            kept.extend_from_slice(&data);
        }
    }
    if seen > max {
        return Err(BodyError::TooLarge);
    }
    Ok(kept.freeze())
}

/// A POST that would open a new session: no session id, and an `initialize` (or a client
/// that does not name its method).
fn starts_a_session(request: &Request) -> bool {
    let headers = request.headers();
    !headers.contains_key("mcp-session-id")
        && headers
            .get("mcp-method")
            .and_then(|v| v.to_str().ok())
            .is_none_or(|method| method == "initialize")
}

/// A bound HTTP server, not yet serving.
pub struct HttpServer {
    listener: TcpListener,
    config: HttpConfig,
}

impl HttpServer {
    /// Binds the address.
    pub async fn bind(config: HttpConfig) -> Result<Self, ServeError> {
        config
            .check()
            .map_err(|e| ServeError::Start(e.to_string()))?;
        let listener = TcpListener::bind(config.addr)
            .await
            .map_err(|e| ServeError::Start(format!("cannot listen on {}: {e}", config.addr)))?;
        Ok(Self { listener, config })
    }

    /// Its configuration.
    pub fn config(&self) -> &HttpConfig {
        &self.config
    }

    /// The address it listens on (with the real port when 0 was asked).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }

    /// Serves until SIGINT or SIGTERM, then shuts down gracefully.
    pub(crate) async fn run(self, app: Arc<App>) -> Result<(), ServeError> {
        let config = self.config;
        let shutdown = CancellationToken::new();
        let mut manager = LocalSessionManager::default();
        manager.session_config.keep_alive = Some(config.session_idle);
        let sessions = Arc::new(manager);
        let rmcp_config = StreamableHttpServerConfig::default()
            .with_allowed_hosts(config.hosts())
            .with_allowed_origins(config.origins())
            .with_cancellation_token(shutdown.child_token())
            .with_max_request_body_bytes(config.max_body_bytes);
        let factory_app = Arc::clone(&app);
        let service = StreamableHttpService::new(
            move || Ok(GimletServer::for_http(Arc::clone(&factory_app))),
            Arc::clone(&sessions),
            rmcp_config,
        );
        let guard_state = Guard {
            token: config.auth_token.as_deref().map(Arc::from),
            sessions,
            max_sessions: config.max_sessions,
            max_body_bytes: config.max_body_bytes,
            body_timeout: config.body_timeout,
        };
        let router = Router::new()
            .nest_service("/mcp", service)
            .layer(middleware::from_fn_with_state(guard_state, guard));

        let graceful = GracefulShutdown::new();
        let mut http = hyper::server::conn::http1::Builder::new();
        http.timer(TokioTimer::new())
            .header_read_timeout(config.header_timeout);
        let signal = crate::shutdown_signal();
        tokio::pin!(signal);
        loop {
            tokio::select! {
                () = &mut signal => break,
                accepted = self.listener.accept() => {
                    let (stream, _) = match accepted {
                        Ok(accepted) => accepted,
                        Err(err) => {
                            tracing::warn!("accept failed: {err}");
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            continue;
                        }
                    };
                    let service = TowerToHyperService::new(router.clone());
                    let connection = http.serve_connection(TokioIo::new(stream), service);
                    let connection = graceful.watch(connection);
                    tokio::spawn(async move {
                        if let Err(err) = connection.await {
                            tracing::debug!("connection ended: {err}");
                        }
                    });
                }
            }
        }
        drop(self.listener);
        tracing::info!("shutting down: waiting for running calls");
        let deadline = tokio::time::Instant::now() + config.shutdown_grace;
        while app.running_calls() > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // Ends every session: handlers drop, and with them their sessions' background jobs.
        shutdown.cancel();
        app.drop_principal_sessions();
        if tokio::time::timeout(Duration::from_secs(2), graceful.shutdown())
            .await
            .is_err()
        {
            tracing::debug!("some connections did not close in time");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use gimlet_tools::{ToolEnv, ToolRegistry};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;
    use crate::ServerConfig;

    /// Serves on a free loopback port with these timeouts; the address.
    async fn serve(headers: Duration, body: Duration) -> (SocketAddr, tempfile::TempDir) {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let env = ToolEnv::builder()
            .root(dir.path())
            .spill_dir(dir.path().join("spill"))
            .build()
            .expect("an environment");
        let config = HttpConfig::new(SocketAddr::from(([127, 0, 0, 1], 0))).timeouts(headers, body);
        let server = HttpServer::bind(config).await.expect("a bound port");
        let addr = server.local_addr().expect("an address");
        let app = ServerConfig::new(env, ToolRegistry::builtin());
        tokio::spawn(crate::serve_http(app, server));
        (addr, dir)
    }

    #[tokio::test]
    async fn a_body_that_does_not_arrive_in_time_gets_408() {
        let (addr, _dir) = serve(Duration::from_secs(10), Duration::from_millis(300)).await;
        let mut stream = tokio::net::TcpStream::connect(addr)
            .await
            .expect("a connection");
        // The headers promise 100 bytes; 10 come, then nothing.
        stream
            .write_all(
                b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
                  Accept: application/json, text/event-stream\r\nContent-Length: 100\r\n\r\n\
                  {\"jsonrpc\"",
            )
            .await
            .expect("a write");
        let started = Instant::now();
        let mut answer = vec![0; 512];
        let read = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut answer))
            .await
            .expect("an answer before the header timeout")
            .expect("a read");
        let answer = String::from_utf8_lossy(&answer[..read]);
        assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
        assert!(
            started.elapsed() >= Duration::from_millis(250),
            "answered by the timeout, not at once"
        );
    }

    #[tokio::test]
    async fn a_declared_length_over_the_limit_gets_413_at_once() {
        // A body that would take the whole body timeout to not arrive: the declared length
        // alone decides.
        let (addr, _dir) = serve(Duration::from_secs(10), Duration::from_secs(30)).await;
        let mut stream = tokio::net::TcpStream::connect(addr)
            .await
            .expect("a connection");
        stream
            .write_all(
                b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
                  Accept: application/json, text/event-stream\r\nContent-Length: 10485760\r\n\r\n{",
            )
            .await
            .expect("a write");
        let mut answer = vec![0; 512];
        let read = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut answer))
            .await
            .expect("an answer long before the body timeout")
            .expect("a read");
        let answer = String::from_utf8_lossy(&answer[..read]);
        assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    }
}
