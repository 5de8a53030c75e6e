//! The forms gimlet puts to the user through elicitation, and what an answer means: shared by
//! the in-call questions of session clients (`ask.rs`) and the answers a 2026-07-28 client
//! brings back with its retried call (`mrtr.rs`), so that neither imports the other.

use std::time::Duration;

use gimlet_tools::ask::{Answer, Question};
use gimlet_tools::{Approval, AskRequest};
use rmcp::model::{ElicitResult, ElicitationAction};
use serde_json::{Value, json};

/// How long a question waits for the user by default.
pub const DEFAULT_ASK_TIMEOUT: Duration = Duration::from_secs(300);

/// The form shown for a permission request.
pub(crate) fn approval_schema(request: &AskRequest) -> Value {
    let mut choices = vec![json!({"const": "allow_once", "title": "Allow once"})];
    if let Some(pattern) = &request.session_pattern {
        choices.push(json!({
            "const": "allow_session",
            "title": format!(
                "Allow for this session: {} {}",
                request.tool,
                gimlet_tools::permission::visible(pattern)
            ),
        }));
    }
    choices.push(json!({"const": "deny", "title": "Deny"}));
    json!({
        "type": "object",
        "properties": {
            "decision": {"type": "string", "title": "Decision", "oneOf": choices},
            "reason": {
                "type": "string",
                "title": "Reason",
                "description": "Optional; on deny it is passed back to the model",
            },
        },
        "required": ["decision"],
    })
}

/// What an elicitation answer means for a permission request.
pub(crate) fn approval_of(answer: Option<ElicitResult>, request: &AskRequest) -> Approval {
    let Some(answer) = answer else {
        return Approval::Deny {
            reason: Some(String::from(
                "no answer from the user (timed out or cancelled)",
            )),
        };
    };
    match answer.action {
        ElicitationAction::Accept => {}
        ElicitationAction::Decline => return Approval::Deny { reason: None },
        // Cancel, and any action a newer protocol adds, is not a yes.
        _ => {
            return Approval::Deny {
                reason: Some(String::from("the user dismissed the question")),
            };
        }
    }
    let content = answer.content.unwrap_or(Value::Null);
    let reason = content
        .get("reason")
        .and_then(Value::as_str)
        .map(str::to_owned);
    match content.get("decision").and_then(Value::as_str) {
        Some("allow_once") => Approval::Once,
        Some("allow_session") if request.session_pattern.is_some() => Approval::Session,
        Some("deny") => Approval::Deny { reason },
        _ => Approval::Deny {
            reason: Some(String::from(
                "the answer was not one of the offered choices",
            )),
        },
    }
}

/// The form shown for an `ask_user` question.
pub(crate) fn question_schema(question: &Question) -> Value {
    let answer = if question.options.is_empty() {
        json!({"type": "string", "title": "Answer"})
    } else {
        json!({"type": "string", "title": "Answer", "enum": question.options})
    };
    json!({"type": "object", "properties": {"answer": answer}, "required": ["answer"]})
}

/// What an elicitation answer means for a question.
pub(crate) fn answer_of(answer: Option<ElicitResult>, question: &Question) -> Answer {
    let Some(answer) = answer else {
        return Answer::TimedOut;
    };
    match answer.action {
        ElicitationAction::Accept => {}
        ElicitationAction::Decline => return Answer::Declined,
        _ => return Answer::Cancelled,
    }
    let text = answer
        .content
        .as_ref()
        .and_then(|c| c.get("answer"))
        .and_then(Value::as_str);
    match text {
        Some(text) if question.options.is_empty() || question.options.iter().any(|o| o == text) => {
            Answer::Answered(text.to_owned())
        }
        _ => Answer::Declined,
    }
}
