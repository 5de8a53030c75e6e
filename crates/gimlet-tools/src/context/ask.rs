//! Asking the user: the [`Asker`] trait behind `ctx.ask`, and two ready-made askers.
//!
//! The MCP layer answers with elicitation; a library user plugs in their own (a terminal
//! prompt, a UI); tests use [`ScriptedAsker`].

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use crate::context::ToolContext;
use crate::permission::{Approval, AskRequest, PendingAsk};
use crate::util::MutexExt as _;

pub use crate::vocab::BoxFuture;

/// A question for the user from the `ask_user` tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    /// The question.
    pub question: String,
    /// Choices; empty for a free-text answer.
    pub options: Vec<String>,
    /// The answer used when nobody answers in time.
    pub default: Option<String>,
    /// How long to wait.
    pub timeout: Duration,
}

/// The user's answer to a [`Question`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// The user answered.
    Answered(String),
    /// The user declined to answer.
    Declined,
    /// The user dismissed the question.
    Cancelled,
    /// Nobody answered in time.
    TimedOut,
    /// Nobody can be asked; the text says why (a reason, e.g. "stdin is not a terminal").
    Unavailable(String),
    /// The transport must end this call and have the client answer first (MCP 2026-07-28).
    Pending(Box<PendingAsk>),
}

/// Answers permission requests and questions for a call.
pub trait Asker: Send + Sync {
    /// Asks whether a call may go ahead.
    fn approve<'a>(
        &'a self,
        request: &'a AskRequest,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Approval>;

    /// Asks the user a question.
    fn question<'a>(
        &'a self,
        question: &'a Question,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Answer>;
}

/// Denies every request: what a caller gets when nobody can be asked.
#[derive(Debug, Clone, Copy)]
pub struct DenyAsker {
    /// Why nobody can be asked, e.g. "the client offers no elicitation".
    pub why: &'static str,
}

impl Default for DenyAsker {
    fn default() -> Self {
        Self {
            why: "no one is there to answer",
        }
    }
}

/// The refusal when an ask cannot be put to anyone: what needed approval, why nobody could be
/// asked, and what setting would allow it.
pub fn unavailable_message(request: &AskRequest, why: &str) -> String {
    use crate::permission::AskReason;
    let rule = format!(
        "a rule in the config file: [[permissions.rules]] action = \"allow\", tool = \"{}\", \
         pattern = \"{}\"",
        request.tool,
        request.session_pattern.as_deref().unwrap_or("*")
    );
    let fix = match request.reason {
        AskReason::OutsideRoots => {
            format!("start gimlet with --root for that folder, or add {rule}")
        }
        AskReason::ProtectedPath => String::from(
            "nothing: protected paths always need a yes from the user; make this change yourself",
        ),
        AskReason::Mode => {
            format!("run gimlet with --mode default (it runs with --mode strict), or add {rule}")
        }
        AskReason::Rule => String::from("change the `ask` rule that matched, in the config file"),
        AskReason::Unsandboxed | AskReason::Network => {
            format!("add {rule}, or run gimlet with --mode trusted")
        }
        AskReason::UnparsedCommand => String::from(
            "write that part out (the command instead of a variable, the code itself instead of \
             eval, source or sh -c of a variable)",
        ),
        AskReason::Hook => String::from("change the hook that asked"),
    };
    format!(
        "`{}` needs approval to {} ({}), and nobody can be asked: {why}. To allow it: {fix}",
        request.tool,
        request.summary,
        request.reason.describe()
    )
}

impl Asker for DenyAsker {
    fn approve<'a>(
        &'a self,
        request: &'a AskRequest,
        _ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Approval> {
        let message = unavailable_message(request, self.why);
        Box::pin(async move { Approval::Unavailable(message) })
    }

    fn question<'a>(
        &'a self,
        _question: &'a Question,
        _ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Answer> {
        let why = self.why.to_owned();
        Box::pin(async move { Answer::Unavailable(why) })
    }
}

/// Answers from a script, in order; for tests and examples.
#[derive(Debug, Default)]
pub struct ScriptedAsker {
    approvals: Mutex<VecDeque<Approval>>,
    answers: Mutex<VecDeque<Answer>>,
    asked: Mutex<Vec<AskRequest>>,
}

impl ScriptedAsker {
    /// An asker that gives these approvals, in order (then denies).
    pub fn approving(approvals: impl IntoIterator<Item = Approval>) -> Self {
        Self {
            approvals: Mutex::new(approvals.into_iter().collect()),
            ..Self::default()
        }
    }

    /// Adds answers to questions.
    #[must_use]
    pub fn with_answers(self, answers: impl IntoIterator<Item = Answer>) -> Self {
        self.answers.locked().extend(answers);
        self
    }

    /// The requests asked so far.
    pub fn asked(&self) -> Vec<AskRequest> {
        self.asked.locked().clone()
    }
}

impl Asker for ScriptedAsker {
    fn approve<'a>(
        &'a self,
        request: &'a AskRequest,
        _ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Approval> {
        self.asked.locked().push(request.clone());
        let next = self.approvals.locked().pop_front();
        Box::pin(async move { next.unwrap_or(Approval::Deny { reason: None }) })
    }

    fn question<'a>(
        &'a self,
        _question: &'a Question,
        _ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Answer> {
        let next = self.answers.locked().pop_front();
        Box::pin(async move { next.unwrap_or(Answer::Declined) })
    }
}
