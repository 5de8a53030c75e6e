//! Permission rules: the [`Rule`] a user writes, its [`RuleAction`] and [`RuleOrigin`], the
//! compiled form the policy matches with, and [`RuleError`] for an invalid pattern.
//!
//! A pattern matches a path as the file system compares names ([`NameMatching`]): on macOS
//! and Windows `deny * secrets/**` denies `SECRETS/x` (and on macOS a name in NFD matches a
//! pattern written in NFC). Commands and hosts are matched as written.

use std::path::Path;

use globset::{Glob, GlobBuilder, GlobMatcher};
use serde::{Deserialize, Serialize};

use super::Access;
use crate::fs::NameMatching;

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
    /// The pattern as written: for commands and hosts, and for paths where names are exact.
    matcher: Option<GlobMatcher>,
    /// Where names fold: how, and the pattern folded so, for paths.
    folded: Option<(NameMatching, GlobMatcher)>,
}

impl CompiledRule {
    /// Compiles a rule's pattern; its path matcher folds names as `matching` says.
    pub(super) fn new(
        rule: Rule,
        origin: RuleOrigin,
        matching: NameMatching,
    ) -> Result<Self, RuleError> {
        let matcher = match &rule.pattern {
            None => None,
            Some(pattern) => Some(
                Glob::new(pattern)
                    .map_err(|e| RuleError {
                        tool: rule.tool.clone(),
                        pattern: pattern.clone(),
                        message: e.kind().to_string(),
                    })?
                    .compile_matcher(),
            ),
        };
        let mut compiled = Self {
            rule,
            origin,
            matcher,
            folded: None,
        };
        compiled.set_matching(matching);
        Ok(compiled)
    }

    /// Compiles the path matcher again for `matching`. The folded pattern is the written one
    /// with its names folded ([`NameMatching::fold_pattern`]); should folding turn a valid
    /// pattern into an invalid one (a range such as `[Z-a]` whose ends swap), the written
    /// pattern is matched ignoring ASCII case instead, on the folded path.
    pub(super) fn set_matching(&mut self, matching: NameMatching) {
        self.folded = match &self.rule.pattern {
            Some(pattern) if matching.folds() => {
                let folded = matching.fold_pattern(pattern);
                let glob = Glob::new(&folded)
                    .or_else(|_| GlobBuilder::new(pattern).case_insensitive(true).build());
                glob.ok().map(|glob| (matching, glob.compile_matcher()))
            }
            Some(_) | None => None,
        };
    }

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
            Access::Read(p) | Access::Write(p) => match &self.folded {
                Some((matching, folded)) => {
                    folded.is_match(matching.fold_path(Path::new(&p.display)))
                        || folded.is_match(matching.fold_path(&p.path))
                }
                None => matcher.is_match(&p.display) || matcher.is_match(&p.path),
            },
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
