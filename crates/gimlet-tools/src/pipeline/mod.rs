//! The pipeline: the only path from a call to a tool.
//!
//! [`run`] takes every call through the same stages, in this order:
//!
//! 1. **parse** (`args.rs`): JSON arguments -> the tool's typed arguments. A schema error
//!    names the field, what was expected and what was given.
//! 2. **validate**: the tool's semantic checks ([`crate::Tool::validate`]); may correct input.
//! 3. **permission** (`permission.rs`): the tool's accesses judged by the policy; an `Ask` goes
//!    to `ctx.asker()`; nothing runs before the yes.
//! 4. **before hooks** (`hooks.rs`): may block the call, replace its input (which then goes
//!    through stages 1-3 again) or ask for confirmation.
//! 5. **execute**: the tool runs. A tool that can change files runs between two scans of the
//!    roots (`checkpoint.rs`; the scan before comes ahead of stage 1): what the call changed
//!    becomes its checkpoint. On cancellation a tool whose interrupt behaviour is `Cancel`
//!    is dropped at once; a `Block` tool finishes and its result is discarded by the caller.
//!    A command the sandbox stopped ([`ToolError::SandboxDenied`]) is run again outside it,
//!    or not, in one place (`escalate.rs`): approval by a rule, the user, or a session's
//!    "outside the sandbox" grant; never in the trusted mode.
//! 6. **truncate** (`truncate.rs`): an output over the tool's limits is cut (head, tail or
//!    head+tail), the full text saved to a spill file, and a notice says what to do next. The
//!    limits hold for the whole output as a host shows it: every text block, the notice and
//!    the link to the full text.
//! 7. **diagnostics** ([`crate::lsp`]): when the call changed files a language server serves,
//!    the changes go to the server and its diagnostics are appended, after truncation: stage 6
//!    keeps room for them, and they are cut to what is left. This runs after the call left
//!    its session's lane and its worker slot, and after the tool dropped its path locks: the
//!    wait (up to `[lsp] wait_ms`) holds up no other call, and a change to the same file
//!    meanwhile is simply reported with it.
//! 8. **after hooks**: may replace the output, which is then cut to the limits like any.
//!
//! A panic inside a tool is caught and becomes a [`ToolError`]: a failing tool cannot take
//! the server down. An output that reports a failure (`is_error`) gets the error marker,
//! `Error (<tool>):`, as a first text block of its own ([`ToolOutput::mark_error`]) right
//! after execute, so that it counts against the limits and no cut removes it, and again
//! after the after hooks; a [`ToolError`] gets it where it becomes text
//! ([`ToolError::to_output`]). Tools never truncate, ask or log their results themselves, and never
//! call the permission stage.

mod checkpoint;
mod diagnostics;
mod escalate;
mod hooks;
mod permission;
mod record;
mod truncate;

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;

use crate::context::ToolContext;
use crate::error::ToolError;
use crate::registry::{DynTool, ErasedArgs, ToolRegistry};
use crate::vocab::{InterruptBehavior, ToolOutput};

pub use crate::context::hook::{AfterHook, BeforeHook, Hook, HookCall};
pub use crate::vocab::{Cut, CutBy, Truncation};
pub use truncate::truncate_text;

/// A call that could not be routed to a tool: a protocol fault, not a tool error.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// No tool has this name.
    #[error("unknown tool `{name}`; available tools: {available}")]
    UnknownTool {
        /// The name called.
        name: String,
        /// The tools there are, comma-separated.
        available: String,
    },
}

/// What a finished call reports besides its output, for logs and the audit trail.
#[derive(Debug)]
pub struct CallReport {
    /// The tool's result.
    pub result: Result<ToolOutput, ToolError>,
    /// How long the call took, all stages included.
    pub duration: Duration,
}

/// Runs one call through every stage. `Err` only when no such tool exists.
///
/// Around the stages: the session's budgets are checked first and charged after, and the
/// call is written to the audit log, if the environment has one.
pub async fn run(
    registry: &ToolRegistry,
    name: &str,
    input: Value,
    ctx: &ToolContext,
) -> Result<CallReport, CallError> {
    let Some(tool) = registry.get(name) else {
        return Err(CallError::UnknownTool {
            name: name.to_owned(),
            available: registry
                .offered(ctx.env())
                .map(|t| t.name())
                .collect::<Vec<_>>()
                .join(", "),
        });
    };
    let started_at = SystemTime::now();
    let started = Instant::now();
    let audited = ctx.env().audit().is_some().then(|| input.clone());
    let result = match record::charge(ctx) {
        Err(err) => Err(err),
        Ok(()) => CatchUnwind(Box::pin(run_stages(tool.as_ref(), input, ctx)))
            .await
            .unwrap_or_else(|panic| {
                tracing::error!(tool = name, panic = %panic, "a tool panicked");
                Err(ToolError::failed(format!(
                    "internal error in `{name}`: {panic}. The server is still running; please retry or report this"
                )))
            }),
    };
    let duration = started.elapsed();
    record::spend(ctx, duration);
    if let Some(input) = audited {
        record::audit(ctx, name, &input, started_at, duration, &result).await;
    }
    Ok(CallReport { result, duration })
}

/// Like [`run`], but the whole call runs on one thread of the blocking pool, driven there with
/// `Handle::block_on`. The call's file work ([`ToolContext::blocking`]) then runs in place: one
/// thread hand-off per call instead of one per blocking step, and never blocking work on the
/// async runtime. Servers use this; it needs a Tokio runtime.
///
/// A tool that says it is [`crate::Tool::inline`] (`read`) runs here instead, on the caller's
/// thread: its file work is first tried without waiting ([`ToolContext::nonblocking_first`]),
/// and only a step that would wait moves to the blocking pool.
pub async fn run_on_worker(
    registry: std::sync::Arc<ToolRegistry>,
    name: String,
    input: Value,
    ctx: ToolContext,
) -> Result<CallReport, CallError> {
    if registry.get(&name).is_some_and(|tool| tool.inline()) {
        return run(&registry, &name, input, &ctx).await;
    }
    let handle = tokio::runtime::Handle::current();
    // The caller's span (e.g. the session the call belongs to) stays current on the worker.
    let span = tracing::Span::current();
    let worker = tokio::task::spawn_blocking(move || {
        let _span = span.enter();
        crate::context::set_on_worker(true);
        let report = handle.block_on(run(&registry, &name, input, &ctx));
        crate::context::set_on_worker(false);
        report
    });
    match worker.await {
        Ok(report) => report,
        Err(err) => Ok(CallReport {
            result: Err(ToolError::from(err)),
            duration: Duration::ZERO,
        }),
    }
}

async fn run_stages(
    tool: &dyn DynTool,
    input: Value,
    ctx: &ToolContext,
) -> Result<ToolOutput, ToolError> {
    if !tool.enabled(ctx.env()) {
        // Not in tools/list (e.g. web_search without its API key): called by name anyway.
        return Err(ToolError::Failed(format!(
            "`{}` is not offered by this server in its current environment, so it is not in \
             tools/list; docs/tools.md says what enables it. Use one of the listed tools",
            tool.name()
        )));
    }
    if ctx.policy().mode() == crate::Mode::ReadOnly && !tool.offered_read_only() {
        ctx.record_decision(false, "mode read-only");
        return Err(ToolError::PermissionDenied(format!(
            "the server runs in read-only mode and `{}` changes things; it is not offered. \
             Restart gimlet with another --mode to use it",
            tool.name()
        )));
    }
    // The checkpoint's scan before: ahead of the permission stage, so that `undo` and
    // `restore` are judged on a list that includes what changed meanwhile.
    let begun = checkpoint::before(tool, &input, ctx).await;
    let mut input = input;
    let mut args = match prepare(tool, input.clone(), ctx).await {
        // Arguments that do not parse as given get one more try with mistyped values
        // converted (`"10"` for 10; validate.rs). The converted input is the call's input from
        // here on: hooks see what the tool runs with.
        Err(err @ ToolError::InvalidArguments { .. }) => {
            let schema = Value::Object(tool.input_schema());
            let Some(converted) = crate::args::coerced(&input, &schema) else {
                return Err(err);
            };
            input = converted;
            prepare(tool, input.clone(), ctx).await?
        }
        prepared => prepared?,
    };
    let hooks = ctx.env().hooks();
    let call = HookCall {
        tool: tool.name(),
        input: &input,
        ctx,
    };
    let verdict = hooks::before(hooks, &call).await?;
    if let Some(replaced) = verdict.input {
        input = replaced;
        args = prepare(tool, input.clone(), ctx).await?;
    }
    if let Some(reason) = verdict.ask {
        permission::confirm_for_hook(tool.name(), &input, reason, ctx).await?;
    }
    let result = execute(tool, args, ctx).await;
    let result = match begun {
        Some(begun) => begun.after(result, ctx).await,
        None => result,
    };
    let mut output = result?;
    // Marked before truncation, so that the marker counts against the limits.
    output.mark_error(tool.name());
    let changes = ctx.take_changes();
    let limits = limits_for(tool, ctx);
    // The diagnostics of changed files come after truncation: room is kept for them.
    let reserve = if changes.is_empty() {
        truncate::Reserve::default()
    } else {
        diagnostics::reserve(limits)
    };
    let output = fit(output, limits, reserve, ctx).await?;
    let output = if changes.is_empty() {
        output
    } else {
        diagnostics::after_change(ctx, changes, output, limits).await
    };
    let call = HookCall {
        tool: tool.name(),
        input: &input,
        ctx,
    };
    if hooks.is_empty() {
        return Ok(output);
    }
    let mut output = hooks::after(hooks, &call, output).await;
    // An after hook may have replaced the output, failed it or added to it: marked and cut
    // like any.
    output.mark_error(tool.name());
    fit(output, limits, truncate::Reserve::default(), ctx).await
}

/// Stage 6 on an output: truncated to the limits less `reserve`, with the full text saved
/// to a spill file off the runtime when anything is cut.
async fn fit(
    output: ToolOutput,
    limits: crate::OutputLimits,
    reserve: truncate::Reserve,
    ctx: &ToolContext,
) -> Result<ToolOutput, ToolError> {
    if truncate::saves(&output, limits, reserve) {
        ctx.blocking(move |ctx| Ok(truncate::apply(output, limits, ctx.env().spill(), reserve)))
            .await
    } else {
        Ok(truncate::apply(output, limits, ctx.env().spill(), reserve))
    }
}

/// The tool's output limits, lowered to what the session's client shows its model whole
/// ([`crate::Session::set_result_budget`]) unless the limits were configured.
fn limits_for(tool: &dyn DynTool, ctx: &ToolContext) -> crate::OutputLimits {
    ctx.result_limits(tool.output_limits(ctx.env()))
}

/// Stages 1-3: parse, validate, permission.
async fn prepare(
    tool: &dyn DynTool,
    input: Value,
    ctx: &ToolContext,
) -> Result<ErasedArgs, ToolError> {
    let args = tool.parse(input)?;
    let args = tool.validate(args, ctx).await?;
    permission::check(tool, &args, ctx).await?;
    Ok(args)
}

async fn execute(
    tool: &dyn DynTool,
    args: ErasedArgs,
    ctx: &ToolContext,
) -> Result<ToolOutput, ToolError> {
    if ctx.is_cancelled() {
        return Err(ToolError::Cancelled);
    }
    let flags = tool.flags(Some(&args));
    // Concurrency-safe calls run side by side; the others alone in their session, in the
    // order they came. At most the worker limit run at once overall.
    let slots = async {
        let lane = ctx.session().lane();
        let lane = if flags.concurrency_safe {
            Lane::Shared {
                _guard: lane.read().await,
            }
        } else {
            Lane::Alone {
                _guard: lane.write().await,
            }
        };
        let worker = ctx.env().workers().acquire().await;
        (lane, worker)
    };
    let _slots = tokio::select! {
        biased;
        () = ctx.cancellation().cancelled() => return Err(ToolError::Cancelled),
        slots = slots => slots,
    };
    let interrupt = flags.interrupt;
    let work = async {
        match tool.execute(args, ctx).await {
            Err(ToolError::SandboxDenied(denied)) => {
                escalate::escalate(tool.name(), flags, *denied, ctx).await
            }
            other => other,
        }
    };
    match interrupt {
        InterruptBehavior::Cancel => tokio::select! {
            biased;
            () = ctx.cancellation().cancelled() => Err(ToolError::Cancelled),
            result = work => result,
        },
        InterruptBehavior::Block => work.await,
    }
}

/// A call's hold on its session's lane.
enum Lane<'a> {
    Shared {
        _guard: tokio::sync::RwLockReadGuard<'a, ()>,
    },
    Alone {
        _guard: tokio::sync::RwLockWriteGuard<'a, ()>,
    },
}

/// Polls a future, turning a panic into `Err(message)`.
struct CatchUnwind<F>(Pin<Box<F>>);

impl<F: Future> Future for CatchUnwind<F> {
    type Output = Result<F::Output, String>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = self.0.as_mut();
        match std::panic::catch_unwind(AssertUnwindSafe(|| inner.poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(value)) => Poll::Ready(Ok(value)),
            Err(payload) => {
                let message = payload
                    .downcast_ref::<&str>()
                    .map(ToString::to_string)
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| String::from("a panic"));
                Poll::Ready(Err(message))
            }
        }
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
#[path = "paths_tests.rs"]
mod paths_tests;
