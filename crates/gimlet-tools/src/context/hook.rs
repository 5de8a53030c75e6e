//! What a hook is: Rust code (or a command, see the config) run around matching calls, which
//! may block a call, replace its input or output, or ask the user. The pipeline runs them
//! (`pipeline/hooks.rs`); the tool environment holds them.

use serde_json::Value;

use crate::context::ToolContext;
use crate::context::ask::BoxFuture;
use crate::vocab::ToolOutput;

/// The call a hook sees.
#[derive(Debug, Clone, Copy)]
pub struct HookCall<'a> {
    /// The tool's name.
    pub tool: &'a str,
    /// The input as JSON.
    pub input: &'a Value,
    /// The call's context.
    pub ctx: &'a ToolContext,
}

/// What a `before` hook decides.
#[derive(Debug, Clone, PartialEq)]
pub enum BeforeHook {
    /// Go on.
    Continue,
    /// Stop the call; the text goes back to the model.
    Block(String),
    /// Go on with this input instead.
    ReplaceInput(Value),
    /// Ask the user first; the text says why.
    Ask(String),
}

/// What an `after` hook decides.
#[derive(Debug, Clone, PartialEq)]
pub enum AfterHook {
    /// Keep the output.
    Keep,
    /// Use this output instead.
    Replace(Box<ToolOutput>),
}

/// A hook: Rust code (or a command, see the config) run around matching calls.
pub trait Hook: Send + Sync + std::fmt::Debug {
    /// A name for logs and error reports.
    fn name(&self) -> &str;

    /// Whether the hook applies to this call.
    fn matches(&self, tool: &str, input: &Value) -> bool;

    /// Runs before the tool. `Err` is reported and ignored.
    fn before<'a>(&'a self, _call: &'a HookCall<'a>) -> BoxFuture<'a, Result<BeforeHook, String>> {
        Box::pin(async { Ok(BeforeHook::Continue) })
    }

    /// Runs after the tool (and truncation). `Err` is reported and ignored.
    fn after<'a>(
        &'a self,
        _call: &'a HookCall<'a>,
        _output: &'a ToolOutput,
    ) -> BoxFuture<'a, Result<AfterHook, String>> {
        Box::pin(async { Ok(AfterHook::Keep) })
    }
}
