//! A call's progress updates -> `notifications/progress`, rate-limited, with a heartbeat.
//!
//! Tools report as often as they like; one forwarder task per call sends at most one
//! notification per [`MIN_INTERVAL`] (the latest message wins) and, while the call runs, a
//! heartbeat every [`HEARTBEAT`] so that clients which reset their timeout on progress, and
//! HTTP sessions, keep waiting. Nothing is sent when the request carried no progress token.

use std::time::Duration;

use gimlet_tools::{ProgressSink, ProgressUpdate};
use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::{Peer, RoleServer};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// The shortest time between two progress notifications of one call.
pub(crate) const MIN_INTERVAL: Duration = Duration::from_millis(500);
/// How often a running call sends progress when the tool reports nothing.
pub(crate) const HEARTBEAT: Duration = Duration::from_secs(10);

/// The sink handed to the tool; dropping it (when the call ends) stops the forwarder.
pub(crate) struct ProgressBridge {
    tx: mpsc::UnboundedSender<ProgressUpdate>,
}

impl ProgressSink for ProgressBridge {
    fn report(&self, update: ProgressUpdate) {
        let _ = self.tx.send(update);
    }
}

impl ProgressBridge {
    /// Starts a forwarder for one call, or returns `None` when there is no token.
    pub(crate) fn start(peer: Peer<RoleServer>, token: Option<ProgressToken>) -> Option<Self> {
        let token = token?;
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(forward(peer, token, rx));
        Some(Self { tx })
    }
}

async fn forward(
    peer: Peer<RoleServer>,
    token: ProgressToken,
    mut rx: mpsc::UnboundedReceiver<ProgressUpdate>,
) {
    let started = Instant::now();
    let mut last_progress = 0.0f64;
    let mut last_sent = Instant::now() - MIN_INTERVAL;
    let mut pending: Option<ProgressUpdate> = None;
    loop {
        let deadline = if pending.is_some() {
            last_sent + MIN_INTERVAL
        } else {
            last_sent + HEARTBEAT
        };
        tokio::select! {
            update = rx.recv() => match update {
                Some(update) => {
                    pending = Some(update);
                    if Instant::now() < last_sent + MIN_INTERVAL {
                        continue;
                    }
                }
                None => return,
            },
            () = tokio::time::sleep_until(deadline) => {}
        }
        let update = pending.take().unwrap_or_else(|| ProgressUpdate {
            message: Some(format!("still running ({}s)", started.elapsed().as_secs())),
            ..ProgressUpdate::default()
        });
        // MCP requires `progress` to increase with each notification.
        let progress = match update.progress {
            Some(p) if p > last_progress => p,
            _ => last_progress + 1.0,
        };
        last_progress = progress;
        let mut param = ProgressNotificationParam::new(token.clone(), progress);
        if let Some(total) = update.total {
            param = param.with_total(total.max(progress));
        }
        if let Some(message) = update.message {
            param = param.with_message(message);
        }
        if peer.notify_progress(param).await.is_err() {
            return;
        }
        last_sent = Instant::now();
    }
}
