//! The MCP handler: `tools/list` from the registry, `tools/call` through the pipeline.
//!
//! [`App`] (`app.rs`) is shared by every session (registry, tool specs, instructions);
//! [`GimletServer`] is one connection or HTTP session with its own [`Session`] state.

#![expect(
    deprecated,
    reason = "logging is deprecated in 2026-07-28 (SEP-2577) but still served"
)]

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gimlet_tools::fs::Root;
use gimlet_tools::pipeline::{self, CallError};
use gimlet_tools::util::MutexExt as _;
use gimlet_tools::{Content, Session, ToolContext, ToolError};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CompleteRequestMethod, CompleteRequestParams,
    CompleteResult, CustomRequest, CustomResult, Implementation, ListPromptsRequestMethod,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
    LoggingLevel, PaginatedRequestParams, ProtocolVersion, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, Resource, ResourceContents, ResourceTemplate,
    ServerCapabilities, ServerConfig as InitializeResult, SetLevelRequestParams,
    SubscriptionFilter, Tool,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler};
use serde_json::Value;
use tracing::Instrument;

use crate::app::{App, Principal};
use crate::ask::ElicitationAsker;
use crate::logging;
use crate::mapping;
use crate::mrtr::{self, Round};
use crate::progress::ProgressBridge;

/// How long the client may take to list its roots.
const ROOTS_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a call waits for the client's roots before it is judged with what is known.
const ROOTS_WAIT: Duration = Duration::from_secs(2);

/// The client's roots as this session applies them. A client that declares roots is asked for
/// them after `initialized` and again on each `roots/list_changed`; a call waits (at most
/// [`ROOTS_WAIT`]) until the answer to the latest question is applied, so that it is judged
/// against the roots the client meant, not the ones before.
struct RootsSync {
    /// The latest `roots/list` asked for: 1 is the one after `initialized`.
    asked: std::sync::atomic::AtomicU64,
    /// The latest one whose answer was applied (or given up on).
    applied: tokio::sync::watch::Sender<u64>,
}

impl Default for RootsSync {
    fn default() -> Self {
        Self {
            asked: std::sync::atomic::AtomicU64::new(0),
            applied: tokio::sync::watch::Sender::new(0),
        }
    }
}

impl RootsSync {
    /// Marks a new `roots/list` as asked for; returns its number.
    fn ask(&self) -> u64 {
        self.asked.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// Marks question `number` as answered (or given up on).
    fn applied(&self, number: u64) {
        self.applied
            .send_modify(|applied| *applied = (*applied).max(number));
    }

    /// Waits until the roots asked for so far (at least the first question's) are applied, or
    /// [`ROOTS_WAIT`] has passed.
    async fn settled(&self) {
        let target = self.asked.load(Ordering::Acquire).max(1);
        let mut applied = self.applied.subscribe();
        let waited = tokio::time::timeout(ROOTS_WAIT, applied.wait_for(|a| *a >= target)).await;
        if waited.is_err() {
            tracing::warn!(
                "the client's roots did not arrive within {} s; the call goes on with the roots known",
                ROOTS_WAIT.as_secs()
            );
        }
    }
}

/// Opens the folders behind `file://` root URIs; anything else is skipped with a warning.
fn open_client_roots(uris: &[String]) -> Vec<Arc<Root>> {
    let mut roots = Vec::new();
    for uri in uris {
        let Some(path) = gimlet_tools::util::file_uri_path(uri) else {
            tracing::warn!(%uri, "ignoring a client root that is not a local file:// URI");
            continue;
        };
        match Root::open(&path) {
            Ok(root) => roots.push(Arc::new(root)),
            Err(err) => tracing::warn!(%uri, "ignoring a client root: {err}"),
        }
    }
    roots
}

/// The URI of a saved output, before its id.
const OUTPUT_URI: &str = "gimlet://output/";

/// Outputs this session saved, readable back as `gimlet://output/<id>` resources.
#[derive(Default)]
struct SavedOutputs {
    ids: Mutex<Vec<String>>,
}

/// One MCP session.
#[derive(Clone)]
pub struct GimletServer {
    app: Arc<App>,
    session: Arc<Session>,
    /// Over HTTP: stateless requests use their credential's session instead.
    http: bool,
    log_level: Arc<Mutex<LoggingLevel>>,
    /// Sends this session's log messages to its client, once it is initialized.
    log_sink: Arc<Mutex<Option<logging::SinkGuard>>>,
    /// The client's roots: asked for, and applied.
    roots: Arc<RootsSync>,
}

impl GimletServer {
    pub(crate) fn new(app: Arc<App>, session: Arc<Session>) -> Self {
        Self {
            app,
            session,
            http: false,
            log_level: Arc::new(Mutex::new(LoggingLevel::Warning)),
            log_sink: Arc::new(Mutex::new(None)),
            roots: Arc::new(RootsSync::default()),
        }
    }

    /// A handler for one HTTP session (or one stateless request).
    pub(crate) fn for_http(app: Arc<App>) -> Self {
        Self {
            http: true,
            ..Self::new(app, Arc::new(Session::new(crate::new_id("http"))))
        }
    }

    /// Whether a request comes from a stateless (2026-07-28 over HTTP) client.
    fn stateless(&self, rc: &RequestContext<RoleServer>) -> bool {
        self.http
            && rc
                .protocol_version()
                .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28)
    }

    /// The session a request belongs to.
    fn session_for(&self, rc: &RequestContext<RoleServer>) -> Arc<Session> {
        if !self.stateless(rc) {
            return Arc::clone(&self.session);
        }
        let principal = rc
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Principal>())
            .map_or("anonymous", |p| p.0.as_str());
        self.app.principal_session(principal)
    }

    fn context(
        &self,
        rc: &RequestContext<RoleServer>,
        params: &CallToolRequestParams,
    ) -> ToolContext {
        let round = rc
            .protocol_version()
            .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28)
            .then(|| {
                let sealer = Arc::clone(self.app.sealer());
                let round = Round::new(params, &sealer);
                (sealer, round)
            });
        let session = self.session_for(rc);
        if let Some(budget) = rc
            .peer
            .peer_info()
            .and_then(|info| crate::hosts::result_budget(&info.client_info.name))
        {
            session.set_result_budget(budget);
        }
        let mut builder = ToolContext::builder(Arc::clone(self.app.env()))
            .session(session)
            .call_id(rc.id.to_string())
            .cancellation(rc.ct.clone())
            .asker(Arc::new(ElicitationAsker::new(
                rc.clone(),
                self.app.ask_timeout(),
                round,
            )));
        if let Some(bridge) = ProgressBridge::start(rc.peer.clone(), rc.meta.get_progress_token()) {
            builder = builder.progress(Arc::new(bridge));
        }
        builder.build()
    }

    /// Whether the client declared the roots capability.
    fn declares_roots(peer: &Peer<RoleServer>) -> bool {
        peer.peer_info()
            .is_some_and(|info| info.capabilities.roots.is_some())
    }

    /// Asks the client for its roots (if it has any) and makes them this session's. Calls
    /// that arrive meanwhile wait for the answer ([`RootsSync`]).
    async fn refresh_roots(&self, peer: &Peer<RoleServer>) {
        if !Self::declares_roots(peer) {
            return;
        }
        // Counted before anything waits: a call that comes after this question waits for it.
        let number = self.roots.ask();
        self.fetch_roots(peer).await;
        self.roots.applied(number);
    }

    async fn fetch_roots(&self, peer: &Peer<RoleServer>) {
        let uris = match tokio::time::timeout(ROOTS_TIMEOUT, peer.list_roots()).await {
            Ok(Ok(result)) => result.roots.into_iter().map(|root| root.uri),
            Ok(Err(err)) => {
                tracing::warn!("roots/list failed: {err}");
                return;
            }
            Err(_) => {
                tracing::warn!("the client did not answer roots/list in time");
                return;
            }
        };
        let uris: Vec<String> = uris.collect();
        let roots = tokio::task::spawn_blocking(move || open_client_roots(&uris))
            .await
            .unwrap_or_default();
        tracing::info!(count = roots.len(), "client roots");
        self.session.set_client_roots(roots);
    }

    /// Starts sending this session's log messages to its client.
    fn start_logging(&self, peer: &Peer<RoleServer>) {
        let level = *self.log_level.locked();
        let guard = logging::register(self.session.id(), peer.clone(), level);
        *self.log_sink.locked() = Some(guard);
    }

    /// Where a call's log messages go: its session's client, or, for a stateless request that
    /// asked for a level in `_meta`, that request's stream (registered for the call).
    fn log_target(
        &self,
        rc: &RequestContext<RoleServer>,
        session: &Session,
    ) -> (String, Option<logging::SinkGuard>) {
        if session.id() == self.session.id() {
            return (self.session.id().to_owned(), None);
        }
        let key = format!("{}/{}", session.id(), rc.id);
        let guard = rc
            .meta
            .log_level()
            .map(|level| logging::register(&key, rc.peer.clone(), level));
        (key, guard)
    }

    fn saved_outputs(session: &Session) -> Vec<String> {
        let saved = session.state::<SavedOutputs>();
        let ids = saved.ids.locked();
        ids.clone()
    }
}

impl ServerHandler for GimletServer {
    fn get_info(&self) -> InitializeResult {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_resources()
            .enable_logging()
            .build();
        InitializeResult::new(capabilities)
            .with_server_info(
                Implementation::new("gimlet", env!("CARGO_PKG_VERSION")).with_title("gimlet"),
            )
            .with_instructions(self.app.instructions().to_owned())
    }

    async fn list_tools(
        &self,
        _page: Option<PaginatedRequestParams>,
        _rc: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.app.tools().to_vec()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.app.tools().iter().find(|t| t.name == name).cloned()
    }

    async fn call_tool(
        &self,
        params: CallToolRequestParams,
        rc: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let _running = self.app.running();
        if !self.stateless(&rc) && Self::declares_roots(&rc.peer) {
            // The call is judged against the roots the client has named by now.
            self.roots.settled().await;
        }
        let ctx = self.context(&rc, &params);
        let session = Arc::clone(ctx.session());
        let (log_to, _call_sink) = self.log_target(&rc, &session);
        let span = tracing::info_span!("call", log_to = log_to.as_str(), tool = &*params.name);
        let input = params.arguments.map_or(Value::Null, Value::Object);
        let registry = self.app.registry();
        let run = pipeline::run_on_worker(registry, params.name.to_string(), input, ctx);
        let report = match run.instrument(span.clone()).await {
            Ok(report) => report,
            Err(err @ CallError::UnknownTool { .. }) => return Err(mapping::call_error(&err)),
        };
        tracing::debug!(
            parent: &span,
            tool = %params.name,
            duration_ms = report.duration.as_millis(),
            ok = report.result.is_ok(),
            "call finished"
        );
        match report.result {
            Ok(output) => {
                // Every saved output the result links (an output with more than one large
                // block may have more than one).
                let links = output.content.iter().filter_map(|c| match c {
                    Content::ResourceLink { uri, .. } => uri.strip_prefix(OUTPUT_URI),
                    _ => None,
                });
                let ids: Vec<String> = links.map(str::to_owned).collect();
                if !ids.is_empty() {
                    session.state::<SavedOutputs>().ids.locked().extend(ids);
                }
                Ok(mapping::success(output, self.app.shape()).into())
            }
            Err(ToolError::InputRequired(pending)) => match mrtr::input_required(&pending.state) {
                Ok(result) => Ok(result.into()),
                Err(err) => {
                    tracing::error!("cannot put a question to the client: {err}");
                    Ok(mapping::failure(
                        &params.name,
                        &ToolError::PermissionDenied(String::from(
                            "the question for the user could not be sent; nothing was run",
                        )),
                    )
                    .into())
                }
            },
            Err(err) => Ok(mapping::failure(&params.name, &err).into()),
        }
    }

    // Prompts and completions are not declared capabilities: not answered either (rmcp's
    // defaults answer an empty list), so a client cannot take gimlet for a prompt server.
    async fn list_prompts(
        &self,
        _page: Option<PaginatedRequestParams>,
        _rc: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Err(ErrorData::method_not_found::<ListPromptsRequestMethod>())
    }

    async fn complete(
        &self,
        _request: CompleteRequestParams,
        _rc: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        Err(ErrorData::method_not_found::<CompleteRequestMethod>())
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _rc: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        Err(mapping::unmatched_request(&request))
    }

    async fn on_initialized(&self, cx: NotificationContext<RoleServer>) {
        self.app.add_peer(cx.peer.clone());
        self.start_logging(&cx.peer);
        let span = tracing::info_span!("roots", log_to = %self.session.id());
        self.refresh_roots(&cx.peer).instrument(span).await;
    }

    async fn on_roots_list_changed(&self, cx: NotificationContext<RoleServer>) {
        let span = tracing::info_span!("roots", log_to = %self.session.id());
        self.refresh_roots(&cx.peer).instrument(span).await;
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        rc: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        *self.log_level.locked() = request.level;
        if !logging::set_level(self.session.id(), request.level) {
            self.start_logging(&rc.peer);
        }
        Ok(())
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(requested.clone())
    }

    async fn listen(&self, cx: SubscriptionContext) -> Result<(), ErrorData> {
        self.app.add_listener(cx.sink().clone());
        cx.cancelled().await;
        Ok(())
    }

    async fn list_resources(
        &self,
        _page: Option<PaginatedRequestParams>,
        rc: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let spill = self.app.env().spill();
        let resources = Self::saved_outputs(&self.session_for(&rc))
            .iter()
            .filter_map(|id| spill.get(id))
            .map(|file| {
                Resource::new(file.uri(), format!("output-{}", &file.id[..8]))
                    .with_title("Full output of a truncated tool call")
                    .with_mime_type("text/plain")
                    .with_size(file.size)
            })
            .collect();
        Ok(ListResourcesResult::with_all_items(resources))
    }

    async fn list_resource_templates(
        &self,
        _page: Option<PaginatedRequestParams>,
        _rc: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let template = ResourceTemplate::new("gimlet://output/{id}", "output")
            .with_title("Full output of a truncated tool call")
            .with_mime_type("text/plain");
        Ok(ListResourceTemplatesResult::with_all_items(vec![template]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        rc: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let not_found = || {
            ErrorData::resource_not_found(
                format!(
                    "no saved output `{}` in this session (outputs expire after 7 days)",
                    request.uri
                ),
                Some(serde_json::json!({"uri": request.uri})),
            )
        };
        let id = request.uri.strip_prefix(OUTPUT_URI).ok_or_else(not_found)?;
        if !Self::saved_outputs(&self.session_for(&rc))
            .iter()
            .any(|saved| saved == id)
        {
            return Err(not_found());
        }
        let file = self.app.env().spill().get(id).ok_or_else(not_found)?;
        let text = tokio::fs::read_to_string(&file.path)
            .await
            .map_err(|_| not_found())?;
        let contents =
            ResourceContents::text(text, request.uri.clone()).with_mime_type("text/plain");
        Ok(ReadResourceResult::new(vec![contents]).into())
    }
}
