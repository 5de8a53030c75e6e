//! The server's own log messages to the client: `logging/setLevel` and `notifications/message`.
//!
//! gimlet logs with `tracing`. [`client_log_layer`] is a `tracing` layer that sends each event
//! made inside a session's span (`log_to = <key>`) to that session's client, when it is at or
//! above the level the client asked for (warning until it asks). Events outside any session
//! (start-up, other sessions) never reach a client: one client never sees another's paths.

#![expect(
    deprecated,
    reason = "logging is deprecated in 2026-07-28 (SEP-2577) but still served"
)]

use gimlet_tools::util::MutexExt as _;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Mutex, OnceLock};

use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
use rmcp::{Peer, RoleServer};
use serde_json::{Map, Value};
use tokio::sync::mpsc;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

/// Where a session's messages go.
struct Sink {
    level: LoggingLevel,
    messages: mpsc::UnboundedSender<LoggingMessageNotificationParam>,
}

fn sinks() -> &'static Mutex<HashMap<String, Sink>> {
    static SINKS: OnceLock<Mutex<HashMap<String, Sink>>> = OnceLock::new();
    SINKS.get_or_init(Mutex::default)
}

/// The [`rank`] of the finest level any sink takes (`u8::MAX` with none): an event below it
/// is dropped by the layer's filter before it is built and dispatched (the answer is cached
/// per callsite), so a call's debug events cost nothing while no client asked for them.
static FINEST: AtomicU8 = AtomicU8::new(u8::MAX);

/// Recomputes [`FINEST`]; called with the sinks' lock held, after every change to them.
/// When it moves, `tracing` asks every callsite again (it caches the layer's answer).
fn refresh_finest(sinks: &HashMap<String, Sink>) {
    let finest = finest(sinks);
    if FINEST.swap(finest, Ordering::Relaxed) != finest {
        tracing::callsite::rebuild_interest_cache();
    }
}

/// The [`rank`] of the finest level in `sinks`, `u8::MAX` if there are none.
fn finest(sinks: &HashMap<String, Sink>) -> u8 {
    sinks
        .values()
        .map(|s| rank(s.level))
        .min()
        .unwrap_or(u8::MAX)
}

/// Whether an event at `level` reaches a sink when the finest level taken ranks `finest`.
fn wanted(level: Level, finest: u8) -> bool {
    rank(mcp_level(level)) >= finest
}

/// Keeps a client's sink registered; dropping it unregisters.
#[derive(Debug)]
pub(crate) struct SinkGuard {
    key: String,
}

impl Drop for SinkGuard {
    fn drop(&mut self) {
        let mut sinks = sinks().locked();
        sinks.remove(&self.key);
        refresh_finest(&sinks);
    }
}

/// Sends the messages logged under `key` at `level` or above to `peer`. Needs a Tokio
/// runtime (a task forwards them).
pub(crate) fn register(key: &str, peer: Peer<RoleServer>, level: LoggingLevel) -> SinkGuard {
    let (messages, mut receiver) = mpsc::unbounded_channel::<LoggingMessageNotificationParam>();
    tokio::spawn(async move {
        while let Some(message) = receiver.recv().await {
            if peer.notify_logging_message(message).await.is_err() {
                break;
            }
        }
    });
    let mut sinks = sinks().locked();
    sinks.insert(key.to_owned(), Sink { level, messages });
    refresh_finest(&sinks);
    SinkGuard {
        key: key.to_owned(),
    }
}

/// Changes a registered sink's level; `false` if there is none.
pub(crate) fn set_level(key: &str, level: LoggingLevel) -> bool {
    let mut sinks = sinks().locked();
    let Some(sink) = sinks.get_mut(key) else {
        return false;
    };
    sink.level = level;
    refresh_finest(&sinks);
    true
}

fn rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

fn mcp_level(level: Level) -> LoggingLevel {
    match level {
        Level::ERROR => LoggingLevel::Error,
        Level::WARN => LoggingLevel::Warning,
        Level::INFO => LoggingLevel::Info,
        _ => LoggingLevel::Debug,
    }
}

/// The session key a span carries.
struct LogTo(String);

/// Collects an event's fields: `message` as text, the rest as JSON.
#[derive(Default)]
struct Fields {
    message: String,
    rest: Map<String, Value>,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message.push_str(value);
        } else {
            self.rest
                .insert(field.name().to_owned(), Value::String(value.to_owned()));
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.message, "{value:?}");
        } else {
            self.rest
                .insert(field.name().to_owned(), Value::String(format!("{value:?}")));
        }
    }
}

/// Finds the `log_to` field of a new span.
struct FindKey(Option<String>);

impl Visit for FindKey {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "log_to" {
            self.0 = Some(value.to_owned());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "log_to" {
            self.0 = Some(format!("{value:?}").trim_matches('"').to_owned());
        }
    }
}

/// The layer that carries gimlet's log events to the client of the session they belong to.
struct ClientLogLayer;

impl<S> Layer<S> for ClientLogLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut key = FindKey(None);
        attrs.record(&mut key);
        if let (Some(key), Some(span)) = (key.0, ctx.span(id)) {
            span.extensions_mut().insert(LogTo(key));
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let Some(scope) = ctx.event_scope(event) else {
            return;
        };
        let Some(key) = scope
            .into_iter()
            .find_map(|span| span.extensions().get::<LogTo>().map(|k| k.0.clone()))
        else {
            return;
        };
        let level = mcp_level(*event.metadata().level());
        let sinks = sinks().locked();
        let Some(sink) = sinks.get(&key) else {
            return;
        };
        if rank(level) < rank(sink.level) {
            return;
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        let mut data = fields.rest;
        data.insert(String::from("message"), Value::String(fields.message));
        let message = LoggingMessageNotificationParam::new(level, Value::Object(data))
            .with_logger(event.metadata().target());
        let _ = sink.messages.send(message);
    }
}

/// A `tracing` layer for the binary's subscriber: gimlet's events inside a session go to that
/// session's client (see the module docs). Only `gimlet*` targets, debug and above; events
/// only at a level some client takes (spans always: they carry the session key).
pub fn client_log_layer<S>() -> impl Layer<S> + Send + Sync + 'static
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    ClientLogLayer.with_filter(tracing_subscriber::filter::filter_fn(|meta| {
        meta.target().starts_with("gimlet")
            && *meta.level() <= Level::DEBUG
            && (meta.is_span() || wanted(*meta.level(), FINEST.load(Ordering::Relaxed)))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_rank_like_syslog() {
        assert!(rank(LoggingLevel::Debug) < rank(LoggingLevel::Info));
        assert!(rank(LoggingLevel::Warning) < rank(LoggingLevel::Error));
        assert_eq!(mcp_level(Level::TRACE), LoggingLevel::Debug);
        assert_eq!(mcp_level(Level::WARN), LoggingLevel::Warning);
    }

    #[test]
    fn events_are_wanted_down_to_the_finest_level_a_sink_takes() {
        let sink = |level| {
            let (messages, _) = mpsc::unbounded_channel();
            Sink { level, messages }
        };
        let mut sinks = HashMap::new();
        assert!(!wanted(Level::ERROR, finest(&sinks)));
        sinks.insert(String::from("a"), sink(LoggingLevel::Warning));
        assert!(wanted(Level::WARN, finest(&sinks)));
        assert!(!wanted(Level::INFO, finest(&sinks)));
        sinks.insert(String::from("b"), sink(LoggingLevel::Debug));
        assert!(wanted(Level::DEBUG, finest(&sinks)));
        sinks.remove("b");
        assert!(!wanted(Level::DEBUG, finest(&sinks)));
        assert!(wanted(Level::ERROR, finest(&sinks)));
    }
}
