//! Around every call: the session's budgets (checked before, charged after) and the audit
//! line (written after).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use serde_json::Value;

use crate::audit::{self, AuditRecord};
use crate::context::ToolContext;
use crate::error::ToolError;
use crate::fs::Hasher;
use crate::vocab::{Content, ToolOutput};

/// What a session has used of its budgets.
#[derive(Debug, Default)]
struct Usage {
    calls: AtomicU64,
    tool_ms: AtomicU64,
}

/// Counts the call against the session's budgets; `Err` when one is used up.
pub(super) fn charge(ctx: &ToolContext) -> Result<(), ToolError> {
    let budget = ctx.env().budget();
    if budget.max_calls.is_none() && budget.max_tool_seconds.is_none() {
        return Ok(());
    }
    let usage = ctx.session().state::<Usage>();
    if let Some(max) = budget.max_calls {
        let calls = usage.calls.fetch_add(1, Ordering::Relaxed) + 1;
        if calls > max {
            return Err(ToolError::BudgetExceeded(format!(
                "this session has used its budget of {max} tool calls (`max_calls` in the \
                 config's [budget]); no more calls run in it. Tell the user; a new session or \
                 a higher limit lifts it"
            )));
        }
    }
    if let Some(max) = budget.max_tool_seconds {
        let used = Duration::from_millis(usage.tool_ms.load(Ordering::Relaxed));
        if used >= Duration::from_secs(max) {
            return Err(ToolError::BudgetExceeded(format!(
                "this session has used its budget of {max} s of tool time (`max_tool_seconds` \
                 in the config's [budget]; used {:.1} s); no more calls run in it. Tell the \
                 user; a new session or a higher limit lifts it",
                used.as_secs_f64()
            )));
        }
    }
    Ok(())
}

/// Adds a finished call's time to the session's tool time.
pub(super) fn spend(ctx: &ToolContext, elapsed: Duration) {
    if ctx.env().budget().max_tool_seconds.is_some() {
        let ms = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX);
        ctx.session()
            .state::<Usage>()
            .tool_ms
            .fetch_add(ms, Ordering::Relaxed);
    }
}

/// Writes the call's audit line, if there is an audit log, before the result goes back.
pub(super) async fn audit(
    ctx: &ToolContext,
    tool: &str,
    input: &Value,
    started: SystemTime,
    elapsed: Duration,
    result: &Result<ToolOutput, ToolError>,
) {
    if ctx.env().audit().is_none() {
        return;
    }
    let (outcome, error, truncated, output_hash) = match result {
        Ok(output) => (
            if output.is_error { "tool_error" } else { "ok" },
            output.is_error.then(|| output.joined_text()),
            output.truncated.is_some(),
            Some(hash(output)),
        ),
        Err(err) => (err.kind(), Some(err.to_string()), false, None),
    };
    let record = AuditRecord {
        time: audit::rfc3339(started),
        session: ctx.session().id().to_owned(),
        call: ctx.call_id().to_owned(),
        tool: tool.to_owned(),
        arguments: audit::redact(input),
        decision: ctx.decision(),
        duration_ms: u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
        outcome: outcome.to_owned(),
        error,
        truncated,
        output_hash,
    };
    let written = ctx
        .blocking(move |ctx| {
            if let Some(log) = ctx.env().audit() {
                log.record(&record)
                    .map_err(|e| ToolError::io("writing the audit log", e))?;
            }
            Ok(())
        })
        .await;
    if let Err(err) = written {
        tracing::error!("{err}");
    }
}

/// The hash of everything the output shows: text, images, links.
fn hash(output: &ToolOutput) -> String {
    let mut hasher = Hasher::default();
    for content in &output.content {
        match content {
            Content::Text(text) => hasher.update(text.as_bytes()),
            Content::Long(long) => {
                hasher.update(long.head.as_bytes());
                hasher.update(long.tail.as_bytes());
            }
            Content::Image { data, .. } => hasher.update(data),
            Content::ResourceLink { uri, .. } => hasher.update(uri.as_bytes()),
        }
        hasher.update(&[0]);
    }
    hasher.finish().to_string()
}
