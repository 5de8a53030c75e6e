//! gimlet-tools: the coding-agent tool set behind one [`Tool`] trait and one pipeline.
//!
//! Every call goes through [`pipeline::run`]: parse and validate the arguments, check
//! permission (asking the user when the policy says so), run hooks, execute, truncate. Tools
//! are plain types implementing [`Tool`]; [`ToolRegistry::builtin`] has them all. Nothing here
//! knows about MCP: the `gimlet-mcp` crate maps this library onto the protocol, and any Rust
//! program can use it directly.
//!
//! ```no_run
//! use std::sync::Arc;
//! use gimlet_tools::{ToolContext, ToolEnv, ToolRegistry, pipeline};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let env = Arc::new(ToolEnv::builder().root(".").build()?);
//! let registry = ToolRegistry::builtin();
//! let ctx = ToolContext::builder(Arc::clone(&env)).build();
//! let report = pipeline::run(&registry, "read", serde_json::json!({"path": "Cargo.toml"}), &ctx).await?;
//! println!("{}", report.result?.joined_text());
//! # Ok(())
//! # }
//! ```
//!
//! Modules:
//! - [`tool`]: the [`Tool`] trait, flags, output types;
//! - [`context`]: [`ToolEnv`] (fixed at init) and [`ToolContext`] (one call);
//! - [`registry`]: [`ToolRegistry`], the type-erased [`DynTool`];
//! - [`pipeline`]: [`pipeline::run`] and its stages;
//! - [`permission`]: accesses, the policy, asks; [`ask`]: the [`Asker`] trait;
//! - [`fs`]: roots, path confinement, file state; [`spill`]: saved full outputs;
//! - [`lsp`]: language servers: diagnostics after changes, the `lsp` tool's queries;
//! - [`tools`]: the built-in tools.

mod args;
pub mod audit;
mod change;
pub mod checkpoint;
mod command_hook;
pub mod config;
pub mod context;
pub use context::ask;
mod error;
mod external;
pub mod fs;
mod images;
mod jobs;
pub mod lsp;
mod notebook;
pub mod output;
mod patch;
pub mod permission;
pub mod pipeline;
pub mod plugin;
mod process;
pub mod registry;
mod run;
pub mod sandbox;
pub mod schema;
mod search;
pub mod setup;
pub mod shell;
pub mod spill;
mod terminal;
mod text;
pub mod tool;
pub mod tools;
pub mod util;
mod vocab;
pub mod web;

#[cfg(test)]
mod testutil;

#[cfg(test)]
#[path = "layers_tests.rs"]
mod layers_tests;

pub use ask::{Answer, Asker, DenyAsker, Question, ScriptedAsker};
pub use context::{
    AccessKind, ProgressSink, ProgressUpdate, SandboxStatus, Session, ToolContext, ToolEnv,
    ToolEnvBuilder,
};
pub use error::{Rerun, SandboxDenied, ToolError};
pub use permission::{Access, Approval, AskRequest, Mode, Permission, Policy, Rule, RuleAction};
pub use registry::{DynTool, ToolRegistry, ToolSource, ToolSpec};
pub use tool::{
    Content, FilePage, InterruptBehavior, OutputLimits, Tool, ToolFlags, ToolOutput,
    TruncationMode, error_marker,
};
