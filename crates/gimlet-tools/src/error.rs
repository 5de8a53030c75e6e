//! [`ToolError`]: every way a tool call can fail, typed where it starts.
//!
//! A `ToolError` is something the model can read and act on: the MCP layer turns it into a
//! `CallToolResult` with `isError: true`. Protocol faults (an unknown tool) are not tool errors;
//! see [`crate::pipeline::CallError`].
//!
//! Every error result's text starts with a marker naming the tool, `Error (read): `, because
//! some hosts forward a result's text but not its `isError` flag: the model then still reads
//! that the call failed, and which one. [`ToolError::to_output`] is the one place a
//! `ToolError` becomes text for the model; a tool's own failed output (`is_error`) is marked by
//! the pipeline with [`ToolOutput::mark_error`], from the same [`crate::error_marker`].

use std::fmt;
use std::io;

use crate::fs::PathError;
use crate::permission::{Access, PendingAsk};
use crate::vocab::{BoxFuture, Content, ToolOutput, marked};

/// Why a tool call failed. Each message says what was wrong and what to do instead.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// The arguments did not match the tool's JSON schema. (The tool is not in the message:
    /// the marker in front of it names it.)
    #[error("invalid arguments: {message}")]
    InvalidArguments {
        /// The tool that was called.
        tool: String,
        /// What was wrong, naming the field, what was expected and what was given.
        message: String,
    },
    /// The arguments parsed but make no sense (`validate` rejected them).
    #[error("{0}")]
    Invalid(String),
    /// A path argument was rejected or could not be resolved.
    #[error(transparent)]
    Path(#[from] PathError),
    /// The permission stage refused the call.
    #[error("permission denied: {0}")]
    PermissionDenied(String),
    /// A `before` hook blocked the call; the message is the hook's own words.
    #[error("blocked by hook: {0}")]
    Blocked(String),
    /// The file changed since the session last saw it (or was never read); read it again.
    #[error("{0}")]
    Stale(String),
    /// The call was cancelled by the client or the caller.
    #[error("the call was cancelled")]
    Cancelled,
    /// A file system or process operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, e.g. `reading src/main.rs`.
        context: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The permission stage needs an answer the transport can only get by ending this call
    /// and having the client call again (MCP 2026-07-28 "input required").
    #[error("this call needs the user's answer before it can run")]
    InputRequired(Box<PendingAsk>),
    /// The session used up a budget (`[budget]` in the config).
    #[error("{0}")]
    BudgetExceeded(String),
    /// The sandbox stopped a command (`bash`, a plugin tool). The pipeline decides whether it
    /// runs again outside the sandbox ([`crate::error::SandboxDenied`]); it never reaches
    /// the caller of [`crate::pipeline::run`].
    #[error("{0}")]
    SandboxDenied(Box<SandboxDenied>),
    /// Any other failure, with a message for the model.
    #[error("{0}")]
    Failed(String),
}

impl ToolError {
    /// A [`ToolError::Io`] with a description of what was being done.
    pub fn io(context: impl Into<String>, source: io::Error) -> Self {
        Self::Io {
            context: context.into(),
            source,
        }
    }

    /// A [`ToolError::Failed`] from any message.
    pub fn failed(message: impl Into<String>) -> Self {
        Self::Failed(message.into())
    }

    /// A [`ToolError::Invalid`] from any message.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::Invalid(message.into())
    }

    /// The error as the model reads it: one text block, `Error (<tool>): <message>`, and
    /// `is_error`. Every consumer of [`crate::pipeline::run`] (the MCP server, `gimlet call`,
    /// a program using the library) turns an error into a result through this, so all show
    /// the same text.
    pub fn to_output(&self, tool: &str) -> ToolOutput {
        ToolOutput {
            content: vec![Content::Text(marked(tool, &self.to_string()))],
            is_error: true,
            ..ToolOutput::default()
        }
    }

    /// A short, stable name of the variant, for logs and the audit trail.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::InvalidArguments { .. } => "invalid_arguments",
            Self::Invalid(_) => "invalid",
            Self::Path(_) => "path",
            Self::PermissionDenied(_) => "permission_denied",
            Self::Blocked(_) => "blocked",
            Self::Stale(_) => "stale",
            Self::Cancelled => "cancelled",
            Self::Io { .. } => "io",
            Self::InputRequired(_) => "input_required",
            Self::BudgetExceeded(_) => "budget_exceeded",
            Self::SandboxDenied(_) => "sandbox_denied",
            Self::Failed(_) => "failed",
        }
    }
}

impl From<tokio::task::JoinError> for ToolError {
    fn from(err: tokio::task::JoinError) -> Self {
        if err.is_cancelled() {
            Self::Cancelled
        } else {
            Self::Failed(format!(
                "internal error: a worker task failed ({err}); please retry"
            ))
        }
    }
}

/// Runs the same call again, outside the sandbox.
/// It holds what it needs (the call's context among it), so that this vocabulary depends on
/// no context.
pub type Rerun =
    Box<dyn FnOnce() -> BoxFuture<'static, Result<ToolOutput, ToolError>> + Send + Sync>;

/// A sandboxed run that the sandbox stopped.
pub struct SandboxDenied {
    /// The command, as judged by the permission rules (and shown in the question).
    pub command: String,
    /// The access the re-run outside the sandbox means ([`crate::Access::command`]).
    pub access: Access,
    /// What the sandbox probably stopped ([`crate::sandbox::denial`]).
    pub cause: &'static str,
    /// The end of the command's output, for the question.
    pub last_lines: String,
    /// What the tool shows if it is not run again.
    pub output: ToolOutput,
    /// Runs it again outside the sandbox.
    pub rerun: Rerun,
}

impl fmt::Debug for SandboxDenied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SandboxDenied")
            .field("command", &self.command)
            .field("cause", &self.cause)
            .finish_non_exhaustive()
    }
}

impl fmt::Display for SandboxDenied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}` looks blocked by the sandbox ({})",
            self.command, self.cause
        )
    }
}
