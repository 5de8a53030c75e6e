//! `ask_user`: a question to the user, through the context's asker (MCP elicitation).

use std::borrow::Cow;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::context::ask::{Answer, Question};
use crate::context::{ToolContext, ToolEnv};
use crate::error::ToolError;
use crate::tool::Tool;
use crate::vocab::{InterruptBehavior, JsonObject, ToolFlags, ToolOutput};

const DESCRIPTION: &str = include_str!("ask_user.md");

/// Seconds to wait for an answer by default.
const DEFAULT_TIMEOUT_S: u64 = 300;
/// Seconds to wait at most.
const MAX_TIMEOUT_S: u64 = 3600;
/// Choices at most.
const MAX_OPTIONS: usize = 20;

/// The structured result of `ask_user`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
struct AskResult<'a> {
    /// The answer, or null when there is none.
    answer: Option<&'a str>,
    /// Where the answer came from.
    source: AnswerSource,
}

/// Where an answer came from.
#[derive(Debug, Clone, Copy, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum AnswerSource {
    /// The user answered.
    User,
    /// Nobody answered in time, or nobody could be asked; the `default` applies.
    Default,
    /// The user declined to answer.
    Declined,
    /// The user dismissed the question.
    Cancelled,
}

/// Arguments of `ask_user`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AskUserArgs {
    /// The question, with the context the user needs to answer it.
    pub question: String,
    /// The choices, when the answer is one of a few; without them the answer is free text.
    pub options: Option<Vec<String>>,
    /// The answer used when the user does not answer in time or cannot be asked (one of
    /// `options` when both are given).
    pub default: Option<String>,
    /// Seconds to wait for the answer (default 300, at most 3600).
    pub timeout_s: Option<u64>,
}

/// The `ask_user` tool.
#[derive(Debug, Default, Clone, Copy)]
pub struct AskUserTool;

impl Tool for AskUserTool {
    type Args = AskUserArgs;
    const NAME: &'static str = "ask_user";
    const TITLE: &'static str = "Ask the user";

    fn description(&self, _env: &ToolEnv) -> Cow<'static, str> {
        DESCRIPTION.into()
    }

    fn flags(&self, _args: Option<&AskUserArgs>) -> ToolFlags {
        // One question at a time: two forms at once would confuse the user.
        ToolFlags {
            concurrency_safe: false,
            read_only: true,
            destructive: false,
            idempotent: false,
            open_world: false,
            interrupt: InterruptBehavior::Cancel,
        }
    }

    fn output_schema(&self) -> Option<JsonObject> {
        Some(crate::schema::output_schema::<AskResult<'static>>())
    }

    async fn validate(
        &self,
        mut args: AskUserArgs,
        _ctx: &ToolContext,
    ) -> Result<AskUserArgs, ToolError> {
        args.question = args.question.trim().to_string();
        if args.question.is_empty() {
            return Err(ToolError::invalid(
                "`question` is empty; write the question to ask",
            ));
        }
        if let Some(options) = &mut args.options {
            *options = options.iter().map(|o| o.trim().to_string()).collect();
            if options.is_empty() {
                return Err(ToolError::invalid(
                    "`options` is empty; give at least one choice, or leave `options` out for a free answer",
                ));
            }
            if options.len() > MAX_OPTIONS {
                return Err(ToolError::invalid(format!(
                    "{} options is too many to choose from; give {MAX_OPTIONS} at most",
                    options.len()
                )));
            }
            if options.iter().any(String::is_empty) {
                return Err(ToolError::invalid(
                    "an option is empty; every choice needs a text",
                ));
            }
            let mut seen = std::collections::BTreeSet::new();
            if let Some(twice) = options.iter().find(|o| !seen.insert(o.as_str())) {
                return Err(ToolError::invalid(format!(
                    "the option `{twice}` is given twice; make every choice distinct"
                )));
            }
            if let Some(default) = &args.default
                && !options.contains(default)
            {
                return Err(ToolError::invalid(format!(
                    "the default `{default}` is not one of the options ({}); make it one of them",
                    options.join(", ")
                )));
            }
        }
        match args.timeout_s {
            Some(0) => Err(ToolError::invalid("`timeout_s` must be at least 1")),
            Some(t) if t > MAX_TIMEOUT_S => Err(ToolError::invalid(format!(
                "`timeout_s` is {t}; wait {MAX_TIMEOUT_S} seconds at most"
            ))),
            _ => Ok(args),
        }
    }

    async fn execute(&self, args: AskUserArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let timeout = args.timeout_s.unwrap_or(DEFAULT_TIMEOUT_S);
        let question = Question {
            question: args.question.clone(),
            options: args.options.clone().unwrap_or_default(),
            default: args.default.clone(),
            timeout: Duration::from_secs(timeout),
        };
        let answer = tokio::select! {
            biased;
            () = ctx.cancellation().cancelled() => return Err(ToolError::Cancelled),
            answer = ctx.asker().question(&question, ctx) => answer,
        };
        let result = |text: String, answer: Option<&str>, source: AnswerSource| {
            ToolOutput::text(text)
                .with_title(args.question.clone())
                .with_structured_of(&AskResult { answer, source })
        };
        Ok(match answer {
            Answer::Answered(text) => result(
                format!("The user answered: {text}"),
                Some(&text),
                AnswerSource::User,
            ),
            Answer::Declined => result(
                String::from(
                    "The user declined to answer. Do not ask the same again; go on with your best judgement, or stop and explain what you need.",
                ),
                None,
                AnswerSource::Declined,
            ),
            Answer::Cancelled => result(
                String::from(
                    "The user dismissed the question without answering. Do not ask the same again.",
                ),
                None,
                AnswerSource::Cancelled,
            ),
            Answer::TimedOut => match &args.default {
                Some(default) => result(
                    format!(
                        "The user did not answer within {timeout} s; the default applies: {default}"
                    ),
                    Some(default),
                    AnswerSource::Default,
                ),
                None => {
                    return Err(ToolError::failed(format!(
                        "the user did not answer within {timeout} s. Go on without the answer, or ask again \
                         with a `default` to use when nobody answers"
                    )));
                }
            },
            Answer::Unavailable(why) => match &args.default {
                Some(default) => result(
                    format!(
                        "The user cannot be asked here ({why}); the default applies: {default}"
                    ),
                    Some(default),
                    AnswerSource::Default,
                ),
                None => {
                    return Err(ToolError::failed(format!(
                        "cannot ask the user: {why}. Ask your question in your reply instead, or pass a \
                         `default` to go on with when nobody can answer"
                    )));
                }
            },
            Answer::Pending(pending) => return Err(ToolError::InputRequired(pending)),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use crate::context::ask::{Answer, ScriptedAsker};
    use crate::testutil::TestWorkspace;

    async fn ask(
        answer: Answer,
        args: serde_json::Value,
    ) -> Result<crate::ToolOutput, crate::ToolError> {
        let ws = TestWorkspace::new();
        let asker = Arc::new(ScriptedAsker::default().with_answers([answer]));
        let ctx = ws.ctx_with(asker);
        ws.call_with(&ctx, "ask_user", args).await
    }

    #[tokio::test]
    async fn answers_defaults_and_refusals() {
        let answered = ask(
            Answer::Answered(String::from("blue")),
            json!({"question": "Which colour?", "options": ["red", "blue"]}),
        )
        .await
        .unwrap();
        assert_eq!(answered.joined_text(), "The user answered: blue");
        assert_eq!(
            answered.structured.unwrap(),
            json!({"answer": "blue", "source": "user"})
        );

        let timed_out = ask(
            Answer::TimedOut,
            json!({"question": "Which colour?", "options": ["red", "blue"], "default": "red", "timeout_s": 1}),
        )
        .await
        .unwrap();
        assert!(timed_out.joined_text().contains("the default applies: red"));

        let no_client = ask(
            Answer::Unavailable(String::from("no elicitation")),
            json!({"question": "Name?"}),
        )
        .await
        .unwrap_err()
        .to_string();
        assert!(no_client.contains("cannot ask the user"), "{no_client}");
        // Nobody to ask at all (e.g. `gimlet call` without a terminal): the reason, said once.
        let ws = TestWorkspace::new();
        let nobody = crate::context::ask::DenyAsker {
            why: "stdin is not a terminal",
        };
        let err = ws
            .call_with(
                &ws.ctx_with(Arc::new(nobody)),
                "ask_user",
                json!({"question": "Name?"}),
            )
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("cannot ask the user: stdin is not a terminal. Ask your question"),
            "{err}"
        );
        let with_default = ask(
            Answer::Unavailable(String::from("no elicitation")),
            json!({"question": "Name?", "default": "x"}),
        )
        .await
        .unwrap();
        assert_eq!(with_default.structured.unwrap()["source"], "default");

        let declined = ask(Answer::Declined, json!({"question": "Name?"}))
            .await
            .unwrap();
        assert_eq!(declined.structured.unwrap()["source"], "declined");
    }

    #[tokio::test]
    async fn bad_questions_are_refused_before_asking() {
        for (args, needle) in [
            (json!({"question": " "}), "empty"),
            (
                json!({"question": "q", "options": []}),
                "at least one choice",
            ),
            (
                json!({"question": "q", "options": ["a", "a"]}),
                "given twice",
            ),
            (
                json!({"question": "q", "options": ["a", "b"], "default": "c"}),
                "not one of the options",
            ),
            (json!({"question": "q", "timeout_s": 0}), "at least 1"),
        ] {
            let err = ask(Answer::Answered(String::from("a")), args)
                .await
                .unwrap_err()
                .to_string();
            assert!(err.contains(needle), "{err}");
        }
    }
}
