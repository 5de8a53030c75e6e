//! When the sandbox stopped a command: how a tool tells ([`denial`]) and the session's "outside
//! the sandbox" approvals. The typed outcome a tool returns is [`crate::error::SandboxDenied`].
//!
//! A tool that runs commands (`bash`, the plugin tools) never asks anyone. When its sandboxed
//! run failed because of the sandbox, it returns [`crate::ToolError::SandboxDenied`] with what
//! it would have shown and a way to run again outside the sandbox. The pipeline's escalation
//! step (`pipeline/escalate.rs`) decides: it asks the user (or a rule answers), then runs it
//! again or shows the first result with why it was not.

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
}
