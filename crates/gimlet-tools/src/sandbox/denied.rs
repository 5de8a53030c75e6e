//! When the sandbox stopped a command: the typed outcome a tool returns ([`SandboxDenied`]),
//! how a tool tells ([`denial`]), and the session's "outside the sandbox" approvals.
//!
//! A tool that runs commands (`bash`, the plugin tools) never asks anyone. When its sandboxed
//! run failed because of the sandbox, it returns [`crate::ToolError::SandboxDenied`] with what
//! it would have shown and a way to run again outside the sandbox. The pipeline's escalation
//! step (`pipeline/escalate.rs`) decides: it asks the user (or a rule answers), then runs it
//! again or shows the first result with why it was not.

use std::fmt;

use crate::ask::BoxFuture;
use crate::context::ToolContext;
use crate::error::ToolError;
use crate::permission::{Access, Grants};
use crate::tool::ToolOutput;

/// Output that suggests the sandbox stopped a command, and what it probably stopped.
const SANDBOX_SIGNS: &[(&str, &str)] = &[
    (
        "Read-only file system",
        "a change outside the root folders or to a protected path",
    ),
    ("Could not resolve host", "a network connection"),
    (
        "Temporary failure in name resolution",
        "a network connection",
    ),
    ("Network is unreachable", "a network connection"),
    (
        "Operation not permitted",
        "a write outside the root folders or a network connection",
    ),
    ("Permission denied", "a write outside the root folders"),
];

/// Why a sandboxed command probably failed because of the sandbox, if it looks so: it
/// exited with an error and its output carries a sign of a refused write or connection.
pub fn denial(exit_code: i32, output: &str) -> Option<&'static str> {
    if exit_code == 0 {
        return None;
    }
    SANDBOX_SIGNS
        .iter()
        .find(|(sign, _)| output.contains(sign))
        .map(|(_, cause)| *cause)
}

/// Runs the same call again, outside the sandbox.
pub type Rerun = Box<
    dyn for<'a> FnOnce(&'a ToolContext) -> BoxFuture<'a, Result<ToolOutput, ToolError>>
        + Send
        + Sync,
>;

/// A sandboxed run that the sandbox stopped.
pub struct SandboxDenied {
    /// The command, as judged by the permission rules (and shown in the question).
    pub command: String,
    /// The access the re-run outside the sandbox means ([`Access::command`]).
    pub access: Access,
    /// What the sandbox probably stopped ([`denial`]).
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

/// "Allow outside the sandbox for this session" answers: (tool, command pattern) pairs, apart
/// from the ordinary session grants (an ordinary grant lets a command run without asking; it
/// does not let it leave the sandbox).
#[derive(Debug, Default)]
pub struct OutsideGrants(Grants);

impl OutsideGrants {
    /// Records a grant.
    pub fn add(&self, tool: &str, pattern: String) {
        self.0.add(tool, pattern);
    }

    /// Whether a grant covers running `access` (an [`Access::Execute`]) outside the sandbox,
    /// matched as a session grant is ([`Grants::covers`]): every simple command matches the
    /// pattern, and nothing in the line is unknowable.
    pub fn covers(&self, tool: &str, access: &Access) -> bool {
        self.0.covers(tool, access)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_with_a_sign_is_a_denial() {
        assert_eq!(
            denial(1, "touch: /etc/x: Read-only file system"),
            Some("a change outside the root folders or to a protected path")
        );
        assert_eq!(denial(0, "Read-only file system"), None, "it succeeded");
        assert_eq!(denial(2, "error: expected `;`"), None);
    }

    #[test]
    fn outside_grants_match_every_part() {
        let grants = OutsideGrants::default();
        grants.add("bash", String::from("npm install*"));
        let access = |command: &str| Access::command(command, false);
        assert!(grants.covers("bash", &access("npm install left-pad")));
        assert!(!grants.covers("bash", &access("npm install x && rm -rf ~")));
        assert!(!grants.covers("other", &access("npm install")));
        assert!(!grants.covers("bash", &access("npm publish")));
    }
}
