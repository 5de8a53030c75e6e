//! Permission vocabulary and policy: what a call touches ([`Access`]), the verdict
//! ([`Permission`]), the question put to the user ([`AskRequest`]) and the [`Policy`] that
//! judges accesses under a [`Mode`] and [`Rule`]s.
//!
//! Order of precedence, in one place: the roots and the mode give a base decision per access;
//! rules can only move it as written here: a matching `deny` rule denies, a matching `ask` rule
//! asks, a matching `allow` rule allows what the mode would have asked. Protected paths always
//! ask, whatever the rules say. Across all accesses of a call, deny beats ask beats allow.
//!
//! A command is judged by its simple commands ([`crate::shell`]): a `deny` or `ask` rule that
//! matches any of them (or the whole line) applies; an `allow` rule allows only when every one
//! is allowed and no part is unknowable. An unknowable part (`eval "$x"`) asks where the
//! sandbox is not enforced, or where an `ask` or `deny` rule exists that it could hide.
//!
//! - `access.rs`: what a call touches ([`Access`], [`PathAccess`]) and the patterns a session
//!   grant covers;
//! - `ask.rs`: the question put to the user ([`AskRequest`], [`AskReason`]), its answer
//!   ([`Approval`]) and [`visible`];
//! - `rule.rs`: the user's [`Rule`]s and their compiled form;
//! - `policy.rs`: the [`Policy`] and its [`Judgement`] of a call;
//! - `grants.rs`: the session's "allow for this session" answers ([`Grants`], [`OutsideGrants`]);
//! - this file: the [`Mode`] and the [`Permission`] verdict.

use std::fmt;

use serde::{Deserialize, Serialize};

mod access;
mod ask;
mod grants;
mod policy;
mod rule;

pub use access::{Access, PathAccess};
pub use ask::{Approval, AskReason, AskRequest, PendingAsk, visible};
pub use grants::{Grants, OutsideGrants};
pub use policy::{Judgement, Policy};
pub use rule::{Rule, RuleAction, RuleError, RuleOrigin};

/// How much the server may do without asking. Set once, by the user (`--mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Reads and writes inside the roots and sandboxed commands are allowed; anything outside
    /// the roots or unsandboxed asks.
    #[default]
    Default,
    /// Every mutation and every command asks.
    Strict,
    /// Nothing asks (but protected paths); the roots and deny rules still hold.
    Trusted,
    /// Only read-only tools are offered.
    ReadOnly,
}

impl Mode {
    /// The name used on the command line and in config files.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Default => "default",
            Self::Strict => "strict",
            Self::Trusted => "trusted",
            Self::ReadOnly => "read-only",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The verdict of the permission stage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Permission {
    /// Go ahead.
    Allow,
    /// Refuse, with a reason that says what would allow it.
    Deny(String),
    /// Ask the user first.
    Ask(AskRequest),
}

#[cfg(test)]
mod tests;

#[cfg(test)]
#[path = "names_tests.rs"]
mod names_tests;
