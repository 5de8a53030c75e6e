//! The [`Policy`] (a mode, rules and the protected paths) and its [`Judgement`] of a call:
//! `judge` is a pure function of the call's accesses and the session's grants.

use std::path::{Path, PathBuf};

use super::rule::CompiledRule;
use super::{
    Access, AskReason, AskRequest, Grants, Mode, Permission, Rule, RuleAction, RuleError,
    RuleOrigin,
};
use crate::fs::NameMatching;
use crate::sandbox::protected::Protected;
use crate::shell::Script;
use crate::vocab::ToolFlags;

/// What the policy decided about one call, and what follows from it: [`Policy::judge`] returns
/// it and changes nothing; the pipeline's permission stage applies it (records who decided,
/// opens the allowed paths outside the roots for this call, asks on `Ask`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judgement {
    /// The verdict.
    pub permission: Permission,
    /// Who decided (`mode default`, `rule deny bash rm*`, `session grant`), for the audit log;
    /// `None` for `Ask`, where the user decides.
    pub by: Option<String>,
    /// Paths outside the roots that the call may open once it runs: those the verdict allows.
    pub outside: Vec<PathBuf>,
}

impl Judgement {
    fn allow(by: impl Into<String>, outside: Vec<PathBuf>) -> Self {
        Self {
            permission: Permission::Allow,
            by: Some(by.into()),
            outside,
        }
    }

    fn deny(why: String, by: impl Into<String>) -> Self {
        Self {
            permission: Permission::Deny(why),
            by: Some(by.into()),
            outside: Vec::new(),
        }
    }

    fn ask(request: AskRequest) -> Self {
        Self {
            permission: Permission::Ask(request),
            by: None,
            outside: Vec::new(),
        }
    }
}

/// The policy: a mode, rules, grants made during the session, and the protected paths.
#[derive(Debug)]
pub struct Policy {
    mode: Mode,
    rules: Vec<CompiledRule>,
    protected: Protected,
    /// How path names compare, for the rules and the protected list.
    matching: NameMatching,
}

impl Default for Policy {
    fn default() -> Self {
        Self::new(Mode::Default)
    }
}

impl Policy {
    /// A policy with a mode and no rules.
    pub fn new(mode: Mode) -> Self {
        Self {
            mode,
            rules: Vec::new(),
            protected: Protected::default(),
            matching: NameMatching::native(),
        }
    }

    /// Sets the protected list (the built-in one plus the config file's entries): the file
    /// tools ask before changing what it matches, and sandboxed commands cannot change it. It
    /// compares names as the policy does ([`Self::with_name_matching`]).
    #[must_use]
    pub fn with_protected(mut self, protected: Protected) -> Self {
        self.protected = protected.with_matching(self.matching);
        self
    }

    /// Compares path names in rules and in the protected list as `matching` says (default:
    /// this system's, [`NameMatching::native`]); the rules already added follow.
    #[must_use]
    pub fn with_name_matching(mut self, matching: NameMatching) -> Self {
        if matching != self.matching {
            self.matching = matching;
            self.protected = self.protected.with_matching(matching);
            for rule in &mut self.rules {
                rule.set_matching(matching);
            }
        }
        self
    }

    /// How path names compare.
    pub fn name_matching(&self) -> NameMatching {
        self.matching
    }

    /// The protected list.
    pub fn protected(&self) -> &Protected {
        &self.protected
    }

    /// Adds rules. `allow` rules from a [`RuleOrigin::Project`] file are dropped: a project
    /// can only tighten.
    pub fn with_rules(
        mut self,
        rules: impl IntoIterator<Item = Rule>,
        origin: RuleOrigin,
    ) -> Result<Self, RuleError> {
        for rule in rules {
            if origin == RuleOrigin::Project && rule.action == RuleAction::Allow {
                tracing::warn!(tool = %rule.tool, "ignoring an allow rule from a project config");
                continue;
            }
            self.rules
                .push(CompiledRule::new(rule, origin, self.matching)?);
        }
        Ok(self)
    }

    /// The mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The configured rules, in order.
    pub fn rules(&self) -> impl Iterator<Item = (&Rule, RuleOrigin)> {
        self.rules.iter().map(|r| (&r.rule, r.origin))
    }

    /// Whether a root-relative path is protected ([`Protected::matches`]).
    pub fn is_protected(&self, relative: &Path) -> bool {
        self.protected.matches(relative)
    }

    fn strongest_rule(&self, tool: &str, access: &Access) -> Option<&CompiledRule> {
        self.rules
            .iter()
            .filter(|r| r.applies(tool, access))
            .max_by_key(|r| r.rule.action)
    }

    /// Judges one call: the base decision of the mode for each access, moved by the rules and
    /// the session's `grants`. Pure: the [`Judgement`] says what to apply.
    pub fn judge(
        &self,
        tool: &str,
        flags: ToolFlags,
        accesses: &[Access],
        grants: &Grants,
    ) -> Judgement {
        let mut asks: Vec<(AskReason, &Access)> = Vec::new();
        let mut allowed_by: Vec<String> = Vec::new();
        let mut outside: Vec<PathBuf> = Vec::new();
        for access in accesses {
            let (verdict, by) = self.judge_one(tool, flags, access);
            match verdict {
                Verdict::Allow => {
                    outside.extend(outside_path(access));
                    allowed_by.push(by);
                }
                Verdict::Deny(why) => return Judgement::deny(why, by),
                Verdict::Ask(reason) => {
                    if reason != AskReason::ProtectedPath && grants.covers(tool, access) {
                        outside.extend(outside_path(access));
                        allowed_by.push(String::from("session grant"));
                        continue;
                    }
                    asks.push((reason, access));
                }
            }
        }
        let Some(&(reason, _)) = asks.first() else {
            allowed_by.dedup();
            let by = if allowed_by.is_empty() {
                format!("mode {}", self.mode)
            } else {
                allowed_by.join(", ")
            };
            return Judgement::allow(by, outside);
        };
        let summary = asks
            .iter()
            .map(|(reason, a)| match a {
                // Name the part that cannot be seen.
                Access::Execute { script, .. } if *reason == AskReason::UnparsedCommand => {
                    format!(
                        "{} {} (gimlet cannot see {})",
                        a.verb(),
                        a.subject(),
                        script.describe_unknowns()
                    )
                }
                _ => format!("{} {}", a.verb(), a.subject()),
            })
            .collect::<Vec<_>>()
            .join(", ");
        let protected = asks.iter().any(|(r, _)| *r == AskReason::ProtectedPath);
        let session_pattern = match asks.as_slice() {
            [(_, only)] if !protected => Some(only.session_pattern()),
            _ => None,
        };
        Judgement::ask(AskRequest {
            tool: tool.to_owned(),
            summary,
            detail: None,
            reason,
            session_pattern,
            accesses: asks.into_iter().map(|(_, a)| a.clone()).collect(),
        })
    }

    /// Judges running a command again outside the sandbox, after the sandbox stopped it: the
    /// mode and the rules decide as for any unsandboxed command, but the session's ordinary
    /// grants do not count (letting a command run without asking is not letting it leave the
    /// sandbox; those answers are kept apart, see [`OutsideGrants`](super::OutsideGrants)). The
    /// trusted mode never asks, so it never leaves the sandbox: the roots hold.
    pub fn judge_escalation(&self, tool: &str, flags: ToolFlags, access: &Access) -> Judgement {
        if self.mode == Mode::Trusted {
            return Judgement::deny(
                String::from(
                    "the trusted mode never runs a command outside the sandbox, so the roots \
                     hold; run gimlet with --mode default to be asked instead",
                ),
                "mode trusted",
            );
        }
        match self.judge_one(tool, flags, access) {
            (Verdict::Allow, by) => {
                Judgement::allow(by, outside_path(access).into_iter().collect())
            }
            (Verdict::Deny(why), by) => Judgement::deny(why, by),
            (Verdict::Ask(reason), _) => Judgement::ask(AskRequest {
                tool: tool.to_owned(),
                summary: format!("{} {}", access.verb(), access.subject()),
                detail: None,
                reason,
                session_pattern: Some(access.session_pattern()),
                accesses: vec![access.clone()],
            }),
        }
    }

    /// One access: the verdict and who decided it (`mode default`, `rule deny bash rm*` ...).
    fn judge_one(&self, tool: &str, flags: ToolFlags, access: &Access) -> (Verdict, String) {
        let mode = || format!("mode {}", self.mode);
        let base = self.base(flags, access);
        if let Verdict::Deny(_) = base {
            return (base, mode());
        }
        if let Access::Execute {
            command,
            script,
            sandboxed,
        } = access
        {
            return self.judge_command(tool, command, script, *sandboxed, base);
        }
        let strongest = self.strongest_rule(tool, access);
        let rule = strongest.map_or_else(mode, CompiledRule::describe);
        match strongest.map(|r| r.rule.action) {
            Some(RuleAction::Deny) => (
                Verdict::Deny(format!(
                    "a permission rule denies `{tool}` on `{}`; change the call or the rule in the config file",
                    access.subject()
                )),
                rule,
            ),
            Some(RuleAction::Ask) => (self.ask_or_deny(AskReason::Rule, access.subject()), rule),
            _ if matches!(base, Verdict::Ask(AskReason::ProtectedPath)) => (base, mode()),
            Some(RuleAction::Allow) => (Verdict::Allow, rule),
            None => (base, mode()),
        }
    }

    /// A command line: rules apply to each of its simple commands, the strictest winning.
    fn judge_command(
        &self,
        tool: &str,
        line: &str,
        script: &Script,
        sandboxed: bool,
        base: Verdict,
    ) -> (Verdict, String) {
        let mode = || format!("mode {}", self.mode);
        let applicable = || {
            self.rules
                .iter()
                .filter(move |r| r.rule.tool == "*" || r.rule.tool == tool)
        };
        // The strictest `deny` or `ask` rule matching the line or any of its simple commands,
        // with what it matched.
        let mut strictest: Option<(&CompiledRule, &str)> = None;
        for rule in applicable().filter(|r| r.rule.action != RuleAction::Allow) {
            let matched = if rule.matches(line) {
                Some(line)
            } else {
                script
                    .commands
                    .iter()
                    .find(|c| rule.matches(&c.text) || rule.matches(&c.written))
                    .map(|c| c.text.as_str())
            };
            if let Some(matched) = matched
                && strictest.is_none_or(|(r, _)| r.rule.action < rule.rule.action)
            {
                strictest = Some((rule, matched));
            }
        }
        let unknown = !script.unknowns.is_empty();
        match strictest {
            Some((rule, matched)) if rule.rule.action == RuleAction::Deny => {
                let within = if matched == line {
                    String::new()
                } else {
                    format!(", which `{}` runs", crate::shell::shorten(line))
                };
                return (
                    Verdict::Deny(format!(
                        "the permission {} denies `{}`{within}; change the call or the rule in the config file",
                        rule.describe(),
                        crate::shell::shorten(matched)
                    )),
                    rule.describe(),
                );
            }
            Some((rule, _)) => {
                return (self.ask_or_deny(AskReason::Rule, line), rule.describe());
            }
            None => {}
        }
        if unknown {
            let restricting = self.has_restricting_rules(tool);
            if self.mode == Mode::Trusted && restricting {
                return (
                    Verdict::Deny(format!(
                        "gimlet cannot see {} in `{}`, so the deny and ask rules cannot be \
                         checked against it, and the trusted mode never asks; write that part out",
                        script.describe_unknowns(),
                        crate::shell::shorten(line)
                    )),
                    mode(),
                );
            }
            // Where the sandbox holds and no rule could be hidden, syntax alone never asks.
            if self.mode != Mode::Trusted
                && (restricting || !sandboxed || self.mode == Mode::Strict)
            {
                return (Verdict::Ask(AskReason::UnparsedCommand), mode());
            }
            return (base, mode());
        }
        // `allow` needs every simple command allowed, each by the name it is written with.
        let mut allowed_by: Vec<String> = Vec::new();
        let all_allowed = !script.commands.is_empty()
            && script.commands.iter().all(|command| {
                let allow = applicable()
                    .filter(|r| r.rule.action == RuleAction::Allow)
                    .find(|r| r.matches(&command.written));
                if let Some(allow) = allow {
                    let by = allow.describe();
                    if !allowed_by.contains(&by) {
                        allowed_by.push(by);
                    }
                }
                allow.is_some()
            });
        if all_allowed {
            return (Verdict::Allow, allowed_by.join(", "));
        }
        (base, mode())
    }

    fn has_restricting_rules(&self, tool: &str) -> bool {
        self.rules.iter().any(|r| {
            (r.rule.tool == tool || r.rule.tool == "*") && r.rule.action != RuleAction::Allow
        })
    }

    /// In trusted mode nothing asks: what would ask is denied if it is outside the roots,
    /// allowed otherwise.
    fn ask_or_deny(&self, reason: AskReason, subject: &str) -> Verdict {
        if self.mode != Mode::Trusted {
            return Verdict::Ask(reason);
        }
        match reason {
            AskReason::OutsideRoots => Verdict::Deny(format!(
                "`{subject}` is outside the allowed folders and the trusted mode never asks; \
                 add the folder with --root"
            )),
            AskReason::Rule => Verdict::Deny(format!(
                "a permission rule would ask before `{}`, and the trusted mode never asks; \
                 change the rule or use --mode default",
                crate::shell::shorten(subject)
            )),
            AskReason::ProtectedPath => Verdict::Ask(reason),
            AskReason::Mode
            | AskReason::Unsandboxed
            | AskReason::UnparsedCommand
            | AskReason::Hook
            | AskReason::Network => Verdict::Allow,
        }
    }

    #[expect(
        clippy::match_same_arms,
        reason = "one arm per case reads as the policy table"
    )]
    fn base(&self, flags: ToolFlags, access: &Access) -> Verdict {
        let strict = self.mode == Mode::Strict;
        match access {
            Access::Write(_) if self.mode == Mode::ReadOnly => Verdict::Deny(String::from(
                "the server runs in read-only mode; nothing may be changed",
            )),
            Access::Read(p) | Access::Write(p) if !p.inside_roots => {
                self.ask_or_deny(AskReason::OutsideRoots, access.subject())
            }
            Access::Read(_) => Verdict::Allow,
            Access::Write(p) if p.protected => Verdict::Ask(AskReason::ProtectedPath),
            Access::Write(_) if strict => Verdict::Ask(AskReason::Mode),
            Access::Write(_) => Verdict::Allow,
            Access::Execute { .. } if self.mode == Mode::ReadOnly && !flags.read_only => {
                Verdict::Deny(String::from(
                    "the server runs in read-only mode; commands are off",
                ))
            }
            Access::Execute { .. } if strict => Verdict::Ask(AskReason::Mode),
            Access::Execute {
                sandboxed: false, ..
            } => self.ask_or_deny(AskReason::Unsandboxed, access.subject()),
            Access::Execute { .. } => Verdict::Allow,
            Access::Network { .. } => self.ask_or_deny(AskReason::Network, access.subject()),
        }
    }
}

/// A path outside the roots that a rule or grant allowed becomes openable for this call.
/// The path outside the roots that allowing `access` opens, if it is one.
fn outside_path(access: &Access) -> Option<PathBuf> {
    match access {
        Access::Read(p) | Access::Write(p) if !p.inside_roots => Some(p.path.clone()),
        _ => None,
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Verdict {
    Allow,
    Ask(AskReason),
    Deny(String),
}
