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

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use globset::{Glob, GlobMatcher};
use serde::{Deserialize, Serialize};

use crate::sandbox::protected::Protected;
use crate::shell::Script;
use crate::util::MutexExt as _;
use crate::vocab::ToolFlags;

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

/// A path a call reads or writes, already resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathAccess {
    /// The resolved absolute path (symlinks followed for the part that exists).
    pub path: PathBuf,
    /// The path as shown to people: relative to its root, or absolute outside the roots.
    pub display: String,
    /// The path is inside one of the roots.
    pub inside_roots: bool,
    /// The path is protected (VCS hooks, editor and agent config, shell rc files).
    pub protected: bool,
}

/// One thing a call touches.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Access {
    /// Reads a file or lists a directory.
    Read(PathAccess),
    /// Creates, changes or deletes a file.
    Write(PathAccess),
    /// Runs a shell command. Made by [`Access::command`].
    Execute {
        /// The whole command line.
        command: String,
        /// What the shell parser found in it: its simple commands and unknowable parts.
        script: Script,
        /// It will run inside the sandbox.
        sandboxed: bool,
    },
    /// Connects to a network host.
    Network {
        /// The host name or address.
        host: String,
    },
}

impl Access {
    /// Running the command line `line`, in the sandbox or not: the one place where an
    /// [`Access::Execute`] is made, so every tool that runs commands is judged alike.
    pub fn command(line: &str, sandboxed: bool) -> Self {
        Self::Execute {
            command: line.to_owned(),
            script: crate::shell::parse(line),
            sandboxed,
        }
    }

    /// The string rules are matched against: a path, a command, or a host.
    pub fn subject(&self) -> &str {
        match self {
            Self::Read(p) | Self::Write(p) => p.display.as_str(),
            Self::Execute { command, .. } => command,
            Self::Network { host } => host,
        }
    }

    /// What a grant "for this session" covers when the user picks it for this access.
    pub fn session_pattern(&self) -> String {
        match self {
            Self::Read(p) | Self::Write(p) => p.path.display().to_string(),
            // One simple command: its first words (`cargo test*`). Anything else: this exact
            // line, since a prefix of one part cannot cover the others.
            Self::Execute {
                command, script, ..
            } => match script.commands.as_slice() {
                [only] if script.unknowns.is_empty() => command_prefix_pattern(&only.written),
                _ => glob_escape(command),
            },
            Self::Network { host } => host.clone(),
        }
    }

    fn verb(&self) -> &'static str {
        match self {
            Self::Read(_) => "read",
            Self::Write(_) => "write",
            Self::Execute { .. } => "run",
            Self::Network { .. } => "connect to",
        }
    }
}

/// A glob that matches exactly `text`.
fn glob_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '{' | '}' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Whether a glob has no wildcard: it matches one string only.
fn is_literal_glob(pattern: &str) -> bool {
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                chars.next();
            }
            '*' | '?' | '[' | '{' => return false,
            _ => {}
        }
    }
    true
}

/// `cargo test --all` -> `cargo test*`: the first two words, then anything.
fn command_prefix_pattern(command: &str) -> String {
    let words: Vec<&str> = command.split_whitespace().take(2).collect();
    let first_is_flag = words.get(1).is_some_and(|w| w.starts_with('-'));
    match (words.as_slice(), first_is_flag) {
        ([one, ..], true) | ([one], false) => format!("{one}*"),
        ([one, two], false) => format!("{one} {two}*"),
        _ => String::from("*"),
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

/// Why the policy wants to ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AskReason {
    /// The call touches a path outside the roots.
    OutsideRoots,
    /// The call touches a protected path.
    ProtectedPath,
    /// The mode asks for this kind of call.
    Mode,
    /// A rule says to ask.
    Rule,
    /// The command runs without the sandbox.
    Unsandboxed,
    /// Part of the command is only known when it runs (`eval "$x"`, `$CMD`, a sourced file);
    /// the question names it.
    UnparsedCommand,
    /// A hook asked for confirmation.
    Hook,
    /// The call reaches the network.
    Network,
}

impl AskReason {
    /// Words for the user.
    pub fn describe(self) -> &'static str {
        match self {
            Self::OutsideRoots => "it touches a path outside the allowed folders",
            Self::ProtectedPath => "it touches a protected path",
            Self::Mode => "the permission mode asks before this kind of call",
            Self::Rule => "a permission rule says to ask",
            Self::Unsandboxed => "the command would run outside the sandbox",
            Self::UnparsedCommand => {
                "part of the command is only known when it runs, so gimlet cannot check it against the rules"
            }
            Self::Hook => "a hook asked for confirmation",
            Self::Network => "it reaches the network",
        }
    }
}

/// A question for the user: may this call go ahead?
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AskRequest {
    /// The tool being called.
    pub tool: String,
    /// What exactly will happen, as a verb phrase: `write src/main.rs`, `run cargo test`.
    pub summary: String,
    /// More detail: the full command, a diff preview.
    pub detail: Option<String>,
    /// Why gimlet asks.
    pub reason: AskReason,
    /// What "allow for this session" would cover; `None` when only "once" is offered
    /// (protected paths).
    pub session_pattern: Option<String>,
    /// The accesses that made the policy ask.
    pub accesses: Vec<Access>,
}

impl AskRequest {
    /// The message shown to the user, with control characters made visible ([`visible`]).
    pub fn message(&self) -> String {
        let mut text = format!(
            "The `{}` tool wants to {}.\nAsking because {}.",
            self.tool,
            self.summary,
            self.reason.describe()
        );
        if let Some(detail) = &self.detail {
            text.push_str("\n\n");
            text.push_str(detail);
        }
        visible(&text).into_owned()
    }
}

/// Text for a question to the user, with every character that could hide or disguise part
/// of it written out as an escape: terminal controls (`\x1b[2K` erasing a line, `\x1b[1A`
/// moving up, colours), a bare carriage return (`\r`, which lets later text overwrite the
/// start of the line), other C0 and C1 controls, and the Unicode characters that reorder or
/// hide text (bidirectional overrides and isolates U+202A-U+202E and U+2066-U+2069, marks,
/// zero-width characters, line and paragraph separators). Newlines and tabs stay as they are.
pub fn visible(text: &str) -> std::borrow::Cow<'_, str> {
    fn hidden(c: char) -> bool {
        (c.is_control() && c != '\n' && c != '\t')
            || matches!(
                c,
                '\u{061c}'
                    | '\u{200b}'..='\u{200f}'
                    | '\u{2028}'..='\u{202e}'
                    | '\u{2060}'..='\u{2069}'
                    | '\u{feff}'
            )
    }
    if !text.chars().any(hidden) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '\r' => out.push_str("\\r"),
            c if hidden(c) && u32::from(c) < 0x100 => {
                out.push_str(&format!("\\x{:02x}", u32::from(c)));
            }
            c if hidden(c) => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// The user's answer to an [`AskRequest`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Approval {
    /// Allow this call only.
    Once,
    /// Allow this call and later calls covered by the request's session pattern.
    Session,
    /// Refuse; the reason, if any, goes back to the model.
    Deny {
        /// The user's words.
        reason: Option<String>,
    },
    /// Nobody could be asked; the text says why and what would allow the call.
    Unavailable(String),
    /// The transport must end this call and have the client answer first (MCP 2026-07-28).
    Pending(Box<PendingAsk>),
    /// The user answered a question about an earlier state of the files: what the call would
    /// do now is not what was shown. The call is refused as stale.
    Outdated(String),
}

/// A question that must go back to the client before the call can run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingAsk {
    /// What the user will be shown.
    pub message: String,
    /// Transport-specific data: what the transport needs to put the question to the client,
    /// and what the retried call must carry back.
    pub state: serde_json::Value,
}

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
struct CompiledRule {
    rule: Rule,
    origin: RuleOrigin,
    matcher: Option<GlobMatcher>,
}

impl CompiledRule {
    /// `rule deny bash "rm *" (user config)`, for the audit log.
    fn describe(&self) -> String {
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
    fn matches(&self, text: &str) -> bool {
        self.matcher.as_ref().is_none_or(|m| m.is_match(text))
    }

    fn applies(&self, tool: &str, access: &Access) -> bool {
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

/// The policy: a mode, rules, grants made during the session, and the protected paths.
#[derive(Debug)]
pub struct Policy {
    mode: Mode,
    rules: Vec<CompiledRule>,
    protected: Protected,
}

/// A rule whose pattern is not a valid glob.
#[derive(Debug, thiserror::Error)]
#[error("permission rule for `{tool}` has an invalid pattern `{pattern}`: {message}")]
pub struct RuleError {
    tool: String,
    pattern: String,
    message: String,
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
        }
    }

    /// Sets the protected list (the built-in one plus the config file's entries): the file
    /// tools ask before changing what it matches, and sandboxed commands cannot change it.
    #[must_use]
    pub fn with_protected(mut self, protected: Protected) -> Self {
        self.protected = protected;
        self
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
            self.rules.push(CompiledRule {
                rule,
                origin,
                matcher,
            });
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
    /// sandbox; those answers are kept apart, see [`OutsideGrants`]). The
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

/// "Allow for this session" answers: (tool, pattern) pairs.
#[derive(Debug, Default)]
pub struct Grants {
    granted: Mutex<Vec<(String, String)>>,
}

impl Grants {
    /// Records a grant.
    pub fn add(&self, tool: &str, pattern: String) {
        let mut granted = self.granted.locked();
        if !granted.iter().any(|(t, p)| t == tool && *p == pattern) {
            granted.push((tool.to_owned(), pattern));
        }
    }

    /// Whether a grant covers this access.
    pub fn covers(&self, tool: &str, access: &Access) -> bool {
        let granted = self.granted.locked();
        granted.iter().any(|(t, pattern)| {
            t == tool
                && match access {
                    Access::Read(p) | Access::Write(p) => Path::new(pattern) == p.path,
                    // Every simple command matches the pattern, or the pattern is this exact
                    // line ("allow for this session" on a compound or unknowable command).
                    Access::Execute {
                        command, script, ..
                    } => {
                        let Ok(glob) = Glob::new(pattern) else {
                            return false;
                        };
                        let m = glob.compile_matcher();
                        (is_literal_glob(pattern) && m.is_match(command))
                            || (script.unknowns.is_empty()
                                && !script.commands.is_empty()
                                && script.commands.iter().all(|c| m.is_match(&c.written)))
                    }
                    Access::Network { host } => host == pattern,
                }
        })
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
#[path = "permission_tests.rs"]
mod tests;
