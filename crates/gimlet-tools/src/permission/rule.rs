//! Permission rules: the [`Rule`] a user writes, its [`RuleAction`] and [`RuleOrigin`], the
//! compiled form the policy matches with, and [`RuleError`] for an invalid pattern.

use globset::GlobMatcher;
use serde::{Deserialize, Serialize};

use super::Access;

/// A user-configured permission rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// What the rule does.
    pub action: RuleAction,
    /// The tool it applies to, or `*` for all.
    #[serde(default = "any_tool")]
    pub tool: String,
    /// A glob on what the call touches: a path (relative to its root, or absolute), a
    /// command (`git status*`), or a host (`*.example.com`). Absent: everything.
    #[serde(default)]
    pub pattern: Option<String>,
}

fn any_tool() -> String {
    String::from("*")
}

/// What a [`Rule`] does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RuleAction {
    /// Allow without asking.
    Allow,
    /// Ask first.
    Ask,
    /// Refuse.
    Deny,
}

impl RuleAction {
    /// `allow`, `ask` or `deny`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Ask => "ask",
            Self::Deny => "deny",
        }
    }
}

/// Where a rule came from. A project's own config can only tighten.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleOrigin {
    /// The user's config file or the command line.
    User,
    /// A config file inside a project (root); its `allow` rules are ignored.
    Project,
}

#[derive(Debug)]
pub(super) struct CompiledRule {
    pub(super) rule: Rule,
    pub(super) origin: RuleOrigin,
    pub(super) matcher: Option<GlobMatcher>,
}

impl CompiledRule {
    /// `rule deny bash "rm *" (user config)`, for the audit log.
    pub(super) fn describe(&self) -> String {
        let action = self.rule.action.as_str();
        let origin = match self.origin {
            RuleOrigin::User => "user config",
            RuleOrigin::Project => "project config",
        };
        match &self.rule.pattern {
            Some(pattern) => format!("rule {action} {} `{pattern}` ({origin})", self.rule.tool),
            None => format!("rule {action} {} ({origin})", self.rule.tool),
        }
    }

    /// Whether the pattern matches this text (no pattern: everything).
    pub(super) fn matches(&self, text: &str) -> bool {
        self.matcher.as_ref().is_none_or(|m| m.is_match(text))
    }

    pub(super) fn applies(&self, tool: &str, access: &Access) -> bool {
        if self.rule.tool != "*" && self.rule.tool != tool {
            return false;
        }
        let Some(matcher) = &self.matcher else {
            return true;
        };
        match access {
            Access::Read(p) | Access::Write(p) => {
                matcher.is_match(&p.display) || matcher.is_match(&p.path)
            }
            Access::Execute { .. } | Access::Network { .. } => matcher.is_match(access.subject()),
        }
    }
}

/// A rule whose pattern is not a valid glob.
#[derive(Debug, thiserror::Error)]
#[error("permission rule for `{tool}` has an invalid pattern `{pattern}`: {message}")]
pub struct RuleError {
    pub(super) tool: String,
    pub(super) pattern: String,
    pub(super) message: String,
}
