//! A tiny agent loop with gimlet-tools embedded: the built-in tools, one tool of our own, a
//! hook, and a "model" that decides the next call from the last result.
//!
//! The model here is a script, so the example runs anywhere without an API key; a real agent
//! sends `registry.init(&env)`'s specs to its model as tool definitions and feeds each
//! [`pipeline::run`] result back. Run it with:
//!
//! ```sh
//! cargo run -p gimlet-tools --example agent -- [DIR]
//! ```

#![expect(clippy::print_stdout, reason = "an example prints what it does")]

use std::borrow::Cow;
use std::sync::Arc;

use gimlet_tools::ask::BoxFuture;
use gimlet_tools::pipeline::{self, BeforeHook, Hook, HookCall};
use gimlet_tools::{
    Mode, Policy, Session, Tool, ToolContext, ToolEnv, ToolError, ToolFlags, ToolOutput,
    ToolRegistry, ToolSource,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

/// Arguments of our own tool.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct LineStatsArgs {
    /// The text to measure.
    text: String,
}

/// Our own tool: counts lines and words of a text. It gets the same pipeline as the
/// built-ins (schema, validation, permission, hooks, truncation) for free.
#[derive(Debug, Default)]
struct LineStats;

impl Tool for LineStats {
    type Args = LineStatsArgs;
    const NAME: &'static str = "line_stats";
    const TITLE: &'static str = "Line statistics";

    fn description(&self, _env: &ToolEnv) -> Cow<'static, str> {
        "Counts the lines and words of a text.".into()
    }

    fn flags(&self, _args: Option<&LineStatsArgs>) -> ToolFlags {
        ToolFlags::READ_ONLY
    }

    async fn execute(
        &self,
        args: LineStatsArgs,
        _ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let lines = args.text.lines().count();
        let words = args.text.split_whitespace().count();
        Ok(ToolOutput::text(format!("{lines} lines, {words} words"))
            .with_structured(json!({"lines": lines, "words": words})))
    }
}

/// A hook that keeps the agent out of `target/`.
#[derive(Debug)]
struct NoTarget;

impl Hook for NoTarget {
    fn name(&self) -> &'static str {
        "no-target"
    }

    fn matches(&self, _tool: &str, input: &Value) -> bool {
        input
            .get("path")
            .and_then(Value::as_str)
            .is_some_and(|p| p.starts_with("target/"))
    }

    fn before<'a>(&'a self, _call: &'a HookCall<'a>) -> BoxFuture<'a, Result<BeforeHook, String>> {
        Box::pin(async {
            Ok(BeforeHook::Block(String::from(
                "build output is off limits",
            )))
        })
    }
}

/// The scripted model: given the last result, the next call (or `None` to stop).
fn next_call(step: usize, last: &str) -> Option<(&'static str, Value)> {
    match step {
        0 => Some(("glob", json!({"pattern": "*.toml"}))),
        1 => {
            let first = last.lines().next()?.trim().to_owned();
            Some(("read", json!({"path": first})))
        }
        2 => Some(("line_stats", json!({"text": last}))),
        3 => Some(("read", json!({"path": "target/secret"}))),
        _ => None,
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = std::env::args().nth(1).unwrap_or_else(|| String::from("."));
    let env = Arc::new(
        ToolEnv::builder()
            .root(&root)
            .policy(Policy::new(Mode::ReadOnly))
            .hook(Arc::new(NoTarget))
            .build()?,
    );
    let mut registry = ToolRegistry::builtin();
    registry.register(LineStats, ToolSource::Caller);

    let specs = registry.init(&env).await;
    let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    println!("tools offered to the model: {}", names.join(", "));

    let session = Arc::new(Session::new("example"));
    let mut last = String::new();
    for step in 0.. {
        let Some((tool, args)) = next_call(step, &last) else {
            break;
        };
        let ctx = ToolContext::builder(Arc::clone(&env))
            .session(Arc::clone(&session))
            .call_id(format!("call-{step}"))
            .build();
        let report = pipeline::run(&registry, tool, args.clone(), &ctx).await?;
        last = match report.result {
            Ok(output) => output.joined_text(),
            // What the model reads: `Error (<tool>): <message>`.
            Err(err) => err.to_output(tool).joined_text(),
        };
        let args: String = args.to_string().chars().take(60).collect();
        let preview: String = last.lines().take(2).collect::<Vec<_>>().join(" | ");
        println!("{tool} {args} -> {preview}");
    }
    Ok(())
}
