//! stdio: one session over stdin/stdout. Only protocol goes to stdout; logs go to stderr.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use gimlet_tools::Session;
use rmcp::ServiceExt;
use tokio::io::{AsyncRead, ReadBuf};
use tokio_util::sync::CancellationToken;

use crate::ServeError;
use crate::app::App;
use crate::server::GimletServer;
use crate::transport::lines::LineTransport;

/// Serves one client on stdin/stdout until stdin closes or a signal arrives.
///
/// Either way the calls still running are cancelled at once (their commands are stopped,
/// with everything they started), so the server is gone within the commands' grace: a client
/// that closes stdin expects the server to go, and rmcp would otherwise wait up to 5 s for
/// them.
pub(crate) async fn serve(app: Arc<App>) -> Result<(), ServeError> {
    let server = GimletServer::new(app, Arc::new(Session::new(crate::new_id("stdio"))));
    // rmcp's pipe handles (non-blocking on Linux pipes), framed by our line transport.
    let (input, output) = rmcp::transport::stdio_pipes();
    let closed = CancellationToken::new();
    let input = EndOfInput {
        inner: input,
        closed: closed.clone(),
    };
    let running = server
        .serve(LineTransport::new(input, output))
        .await
        .map_err(|e| ServeError::Start(e.to_string()))?;
    let token = running.cancellation_token();
    tokio::spawn(async move {
        tokio::select! {
            () = crate::shutdown_signal() => {}
            () = closed.cancelled() => tracing::debug!("stdin closed"),
        }
        token.cancel();
    });
    let reason = running
        .waiting()
        .await
        .map_err(|e| ServeError::Stopped(e.to_string()))?;
    tracing::info!(?reason, "stdio session ended");
    Ok(())
}

/// A reader that says when its input ended (a read of 0 bytes, or an error).
struct EndOfInput<R> {
    inner: R,
    closed: CancellationToken,
}

impl<R: AsyncRead + Unpin> AsyncRead for EndOfInput<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        match &polled {
            Poll::Ready(Ok(())) if buf.filled().len() == before && buf.remaining() > 0 => {
                self.closed.cancel();
            }
            Poll::Ready(Err(_)) => self.closed.cancel(),
            _ => {}
        }
        polled
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncReadExt;

    use super::*;

    #[tokio::test]
    async fn the_end_of_the_input_is_told() {
        let (mut write, read) = tokio::io::duplex(64);
        let closed = CancellationToken::new();
        let mut input = EndOfInput {
            inner: read,
            closed: closed.clone(),
        };
        tokio::io::AsyncWriteExt::write_all(&mut write, b"line\n")
            .await
            .expect("a write");
        let mut buf = [0u8; 16];
        assert_eq!(input.read(&mut buf).await.expect("a read"), 5);
        assert!(!closed.is_cancelled());
        drop(write);
        assert_eq!(input.read(&mut buf).await.expect("a read"), 0);
        assert!(closed.is_cancelled());
    }
}
