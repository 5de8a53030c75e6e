//! stdio: one session over stdin/stdout. Only protocol goes to stdout; logs go to stderr.

use std::sync::Arc;

use gimlet_tools::Session;
use rmcp::ServiceExt;

use crate::ServeError;
use crate::server::{App, GimletServer};
use crate::transport::lines::LineTransport;

/// Serves one client on stdin/stdout until stdin closes or a signal arrives.
pub(crate) async fn serve(app: Arc<App>) -> Result<(), ServeError> {
    let server = GimletServer::new(app, Arc::new(Session::new(crate::new_id("stdio"))));
    // rmcp's pipe handles (non-blocking on Linux pipes), framed by our line transport.
    let (input, output) = rmcp::transport::stdio_pipes();
    let running = server
        .serve(LineTransport::new(input, output))
        .await
        .map_err(|e| ServeError::Start(e.to_string()))?;
    let token = running.cancellation_token();
    tokio::spawn(async move {
        crate::shutdown_signal().await;
        token.cancel();
    });
    let reason = running
        .waiting()
        .await
        .map_err(|e| ServeError::Stopped(e.to_string()))?;
    tracing::info!(?reason, "stdio session ended");
    Ok(())
}
