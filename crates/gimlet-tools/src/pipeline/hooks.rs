//! Stages 4 and 8: running the hooks that watch, veto or rewrite calls.
//!
//! A [`Hook`] ([`crate::context::hook`]) is matched by tool name (and whatever else it checks
//! on the input). `before` hooks run after the permission stage: they can block the call,
//! replace its input (the new input is parsed, validated and judged again) or ask the user.
//! `after` hooks can replace the output. A hook that fails is logged and skipped: hooks are reported, never fatal.

use serde_json::Value;

use crate::context::hook::{AfterHook, BeforeHook, Hook, HookCall};
use crate::error::ToolError;
use crate::vocab::ToolOutput;

/// The combined verdict of the `before` hooks that did not block.
#[derive(Debug, Default)]
pub(super) struct Before {
    /// The input to use instead, if a hook replaced it.
    pub(super) input: Option<Value>,
    /// Why the user must confirm, if a hook asked.
    pub(super) ask: Option<String>,
}

/// Runs the matching `before` hooks in order; a replaced input is what later hooks see.
pub(super) async fn before(
    hooks: &[std::sync::Arc<dyn Hook>],
    call: &HookCall<'_>,
) -> Result<Before, ToolError> {
    let mut replaced: Option<Value> = None;
    let mut asks: Vec<String> = Vec::new();
    for hook in hooks {
        let input = replaced.as_ref().unwrap_or(call.input);
        if !hook.matches(call.tool, input) {
            continue;
        }
        let this = HookCall { input, ..*call };
        match hook.before(&this).await {
            Ok(BeforeHook::Continue) => {}
            Ok(BeforeHook::Block(reason)) => {
                call.ctx
                    .record_decision(false, format!("hook {}", hook.name()));
                return Err(ToolError::Blocked(reason));
            }
            Ok(BeforeHook::ReplaceInput(value)) => replaced = Some(value),
            Ok(BeforeHook::Ask(reason)) => asks.push(reason),
            Err(err) => tracing::warn!(
                hook = hook.name(),
                tool = call.tool,
                "before hook failed: {err}"
            ),
        }
    }
    Ok(Before {
        input: replaced,
        ask: (!asks.is_empty()).then(|| asks.join("\n")),
    })
}

/// Runs the matching `after` hooks in order; each sees the output of the one before.
pub(super) async fn after(
    hooks: &[std::sync::Arc<dyn Hook>],
    call: &HookCall<'_>,
    mut output: ToolOutput,
) -> ToolOutput {
    for hook in hooks {
        if !hook.matches(call.tool, call.input) {
            continue;
        }
        match hook.after(call, &output).await {
            Ok(AfterHook::Keep) => {}
            Ok(AfterHook::Replace(replacement)) => output = *replacement,
            Err(err) => tracing::warn!(
                hook = hook.name(),
                tool = call.tool,
                "after hook failed: {err}"
            ),
        }
    }
    output
}
