//! The question put to the user: [`AskRequest`] and why it is asked ([`AskReason`]), the
//! answer ([`Approval`], [`PendingAsk`]), and [`visible`], which writes out what could hide
//! part of the question.

use serde::{Deserialize, Serialize};

use super::Access;

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
