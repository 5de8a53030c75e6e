//! [`CommandHook`]: a [`Hook`] that runs a command from the config file (`[[hooks]]`).
//!
//! The protocol follows Claude Code's hooks, so existing hook scripts work:
//!
//! - stdin: the call as JSON: `event` (`before`/`after`), `tool`, `input`, `session`, `call`,
//!   `cwd`, and for `after` the `output` text; also Claude Code's names for the same things
//!   (`hook_event_name` `PreToolUse`/`PostToolUse`, `tool_name`, `tool_input`,
//!   `tool_response`, `session_id`).
//! - `before`, exit 2: the call is blocked and stderr goes back to the model.
//! - `before`, exit 0 with a JSON object on stdout: `decision` (`block`/`deny`, `ask`, or
//!   `allow`/`approve`) with a `reason`, and/or `input` to replace the call's input. Claude Code's
//!   `hookSpecificOutput.permissionDecision` / `permissionDecisionReason` / `updatedInput` and
//!   `continue: false` / `stopReason` mean the same. An `allow` never skips the permission
//!   stage: a hook can tighten, not loosen. Plain text on stdout is ignored.
//! - `after`, exit 0 with `{"output": "..."}` on stdout: the text replaces the output. Exit 2:
//!   stderr is appended to the output as a note for the model.
//! - Any other exit code, a timeout, or unreadable JSON: the hook failed; this is logged (and
//!   reaches the client as a log message) and the call goes on as if the hook were not there.

use std::time::Duration;

use globset::{Glob, GlobMatcher};
use serde_json::{Value, json};

use crate::config::{HookConfig, HookEvent};
use crate::context::ask::BoxFuture;
use crate::pipeline::{AfterHook, BeforeHook, Hook, HookCall};
use crate::vocab::{Content, ToolOutput};

/// The exit code by which a hook blocks a call (as in Claude Code).
pub(crate) const BLOCK_EXIT_CODE: i32 = 2;

/// A hook declared in the config file.
#[derive(Debug)]
pub(crate) struct CommandHook {
    name: String,
    event: HookEvent,
    tool: GlobMatcher,
    pattern: Option<GlobMatcher>,
    command: String,
    timeout: Duration,
}

/// A `[[hooks]]` entry that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("hook `{command}`: {message}")]
pub struct HookConfigError {
    command: String,
    message: String,
}

impl CommandHook {
    /// Compiles a config entry.
    pub(crate) fn new(config: &HookConfig) -> Result<Self, HookConfigError> {
        let error = |message: String| HookConfigError {
            command: config.command.clone(),
            message,
        };
        let glob = |text: &str| {
            Glob::new(text)
                .map(|g| g.compile_matcher())
                .map_err(|e| error(format!("the glob `{text}` is not valid: {e}")))
        };
        if config.command.trim().is_empty() {
            return Err(error(String::from("the command is empty")));
        }
        if config.timeout_s == 0 {
            return Err(error(String::from("timeout_s must be at least 1")));
        }
        let event = match config.event {
            HookEvent::Before => "before",
            HookEvent::After => "after",
        };
        Ok(Self {
            name: format!("{event} {} `{}`", config.tool, config.command),
            event: config.event,
            tool: glob(&config.tool)?,
            pattern: config.pattern.as_deref().map(glob).transpose()?,
            command: config.command.clone(),
            timeout: Duration::from_secs(config.timeout_s),
        })
    }

    async fn run(&self, call: &HookCall<'_>, output: Option<&ToolOutput>) -> Result<Ran, String> {
        let ctx = call.ctx;
        let cwd = ctx
            .roots()
            .first()
            .map(|r| r.path().to_owned())
            .or_else(|| std::env::current_dir().ok())
            .unwrap_or_else(|| std::path::PathBuf::from("/"));
        let (event, claude_event) = match self.event {
            HookEvent::Before => ("before", "PreToolUse"),
            HookEvent::After => ("after", "PostToolUse"),
        };
        let mut payload = json!({
            "event": event,
            "tool": call.tool,
            "input": call.input,
            "session": ctx.session().id(),
            "call": ctx.call_id(),
            "cwd": cwd,
            "hook_event_name": claude_event,
            "tool_name": call.tool,
            "tool_input": call.input,
            "session_id": ctx.session().id(),
        });
        if let Some(output) = output {
            let text = Value::String(output.joined_text());
            payload["tool_response"] = json!({ "output": text, "structured": output.structured });
            payload["output"] = text;
            payload["is_error"] = Value::Bool(output.is_error);
        }
        let input = serde_json::to_vec(&payload).map_err(|e| e.to_string())?;
        let done =
            crate::external::run(&self.command, input, &cwd, self.timeout, ctx.cancellation())
                .await
                .map_err(|e| format!("cannot start it: {e}"))?;
        if done.timed_out {
            return Err(format!(
                "it did not finish within {} s and was stopped",
                self.timeout.as_secs()
            ));
        }
        match done.code {
            Some(0) => Ok(Ran::Ok(done.stdout)),
            Some(BLOCK_EXIT_CODE) => Ok(Ran::Block(done.stderr.trim().to_owned())),
            Some(code) => Err(format!(
                "it exited with status {code}: {}",
                last_line(&done.stderr)
            )),
            None => Err(String::from("it was stopped (the call was cancelled)")),
        }
    }

    fn blocked_message(&self, reason: &str) -> String {
        if reason.is_empty() {
            format!("the hook {} blocked this call", self.name)
        } else {
            reason.to_owned()
        }
    }
}

enum Ran {
    Ok(String),
    Block(String),
}

fn last_line(text: &str) -> &str {
    text.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("(no message on stderr)")
}

/// What a call touches, for `pattern`: the first of its usual fields.
pub(crate) fn subject(input: &Value) -> Option<&str> {
    ["command", "path", "url", "pattern", "query", "file_path"]
        .iter()
        .find_map(|key| input.get(*key).and_then(Value::as_str))
}

/// Parses what a `before` hook printed.
fn before_verdict(stdout: &str) -> Result<BeforeHook, String> {
    let text = stdout.trim();
    if !text.starts_with('{') {
        return Ok(BeforeHook::Continue);
    }
    let value: Value =
        serde_json::from_str(text).map_err(|e| format!("its output is not valid JSON: {e}"))?;
    let specific = value.get("hookSpecificOutput");
    let field = |key: &str| {
        value
            .get(key)
            .or_else(|| specific.and_then(|s| s.get(key)))
            .and_then(Value::as_str)
    };
    let reason = field("reason")
        .or_else(|| field("permissionDecisionReason"))
        .or_else(|| field("stopReason"))
        .unwrap_or_default()
        .to_owned();
    if value.get("continue") == Some(&Value::Bool(false)) {
        return Ok(BeforeHook::Block(reason));
    }
    match field("decision").or_else(|| field("permissionDecision")) {
        Some("block" | "deny") => return Ok(BeforeHook::Block(reason)),
        Some("ask") => {
            return Ok(BeforeHook::Ask(if reason.is_empty() {
                String::from("a hook asks for confirmation")
            } else {
                reason
            }));
        }
        Some("allow" | "approve") | None => {}
        Some(other) => return Err(format!("unknown decision `{other}`")),
    }
    let replaced = value
        .get("input")
        .or_else(|| specific.and_then(|s| s.get("updatedInput")));
    match replaced {
        Some(input @ Value::Object(_)) => Ok(BeforeHook::ReplaceInput(input.clone())),
        Some(_) => Err(String::from("`input` must be a JSON object")),
        None => Ok(BeforeHook::Continue),
    }
}

/// Parses what an `after` hook printed.
fn after_verdict(stdout: &str, output: &ToolOutput) -> Result<AfterHook, String> {
    let text = stdout.trim();
    if !text.starts_with('{') {
        return Ok(AfterHook::Keep);
    }
    let value: Value =
        serde_json::from_str(text).map_err(|e| format!("its output is not valid JSON: {e}"))?;
    match value.get("output") {
        Some(Value::String(text)) => Ok(AfterHook::Replace(Box::new(ToolOutput {
            title: output.title.clone(),
            content: vec![Content::Text(text.clone())],
            structured: None,
            metadata: output.metadata.clone(),
            is_error: output.is_error,
            ..ToolOutput::default()
        }))),
        Some(_) => Err(String::from("`output` must be a string")),
        None => Ok(AfterHook::Keep),
    }
}

impl Hook for CommandHook {
    fn name(&self) -> &str {
        &self.name
    }

    fn matches(&self, tool: &str, input: &Value) -> bool {
        self.tool.is_match(tool)
            && self
                .pattern
                .as_ref()
                .is_none_or(|p| subject(input).is_some_and(|s| p.is_match(s)))
    }

    fn before<'a>(&'a self, call: &'a HookCall<'a>) -> BoxFuture<'a, Result<BeforeHook, String>> {
        Box::pin(async move {
            if self.event != HookEvent::Before {
                return Ok(BeforeHook::Continue);
            }
            match self.run(call, None).await? {
                Ran::Ok(stdout) => match before_verdict(&stdout)? {
                    BeforeHook::Block(reason) => {
                        Ok(BeforeHook::Block(self.blocked_message(&reason)))
                    }
                    other => Ok(other),
                },
                Ran::Block(stderr) => Ok(BeforeHook::Block(self.blocked_message(&stderr))),
            }
        })
    }

    fn after<'a>(
        &'a self,
        call: &'a HookCall<'a>,
        output: &'a ToolOutput,
    ) -> BoxFuture<'a, Result<AfterHook, String>> {
        Box::pin(async move {
            if self.event != HookEvent::After {
                return Ok(AfterHook::Keep);
            }
            match self.run(call, Some(output)).await? {
                Ran::Ok(stdout) => after_verdict(&stdout, output),
                Ran::Block(stderr) if stderr.is_empty() => Ok(AfterHook::Keep),
                Ran::Block(stderr) => {
                    let mut noted = output.clone();
                    noted
                        .content
                        .push(Content::Text(format!("Note from a hook: {stderr}")));
                    Ok(AfterHook::Replace(Box::new(noted)))
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn before_output_in_both_dialects() {
        assert_eq!(before_verdict("").unwrap(), BeforeHook::Continue);
        assert_eq!(
            before_verdict("checked, fine\n").unwrap(),
            BeforeHook::Continue
        );
        assert_eq!(
            before_verdict(r#"{"decision":"block","reason":"no pushes on Fridays"}"#).unwrap(),
            BeforeHook::Block(String::from("no pushes on Fridays"))
        );
        assert_eq!(
            before_verdict(
                r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"nope"}}"#
            )
            .unwrap(),
            BeforeHook::Block(String::from("nope"))
        );
        assert_eq!(
            before_verdict(r#"{"decision":"ask","reason":"touches prod"}"#).unwrap(),
            BeforeHook::Ask(String::from("touches prod"))
        );
        assert_eq!(
            before_verdict(r#"{"continue":false,"stopReason":"stop"}"#).unwrap(),
            BeforeHook::Block(String::from("stop"))
        );
        assert_eq!(
            before_verdict(r#"{"input":{"command":"ls"}}"#).unwrap(),
            BeforeHook::ReplaceInput(json!({"command": "ls"}))
        );
        assert_eq!(
            before_verdict(
                r#"{"hookSpecificOutput":{"permissionDecision":"allow","updatedInput":{"path":"a"}}}"#
            )
            .unwrap(),
            BeforeHook::ReplaceInput(json!({"path": "a"}))
        );
        assert!(before_verdict("{not json").is_err());
        assert!(before_verdict(r#"{"decision":"maybe"}"#).is_err());
        assert!(before_verdict(r#"{"input":"ls"}"#).is_err());
    }

    #[test]
    fn after_output_replaces_the_text_only_when_asked() {
        let output = ToolOutput::text("original").with_title("t");
        assert_eq!(after_verdict("", &output).unwrap(), AfterHook::Keep);
        assert_eq!(after_verdict("{}", &output).unwrap(), AfterHook::Keep);
        let AfterHook::Replace(replaced) =
            after_verdict(r#"{"output":"rewritten"}"#, &output).unwrap()
        else {
            panic!("expected a replacement");
        };
        assert_eq!(replaced.joined_text(), "rewritten");
        assert_eq!(replaced.title.as_deref(), Some("t"));
    }

    #[test]
    fn matching_by_tool_glob_and_subject_pattern() {
        let config: HookConfig = toml::from_str(
            "event = \"before\"\ntool = \"ba*\"\npattern = \"git push*\"\ncommand = \"true\"",
        )
        .unwrap();
        let hook = CommandHook::new(&config).unwrap();
        assert!(hook.matches("bash", &json!({"command": "git push origin"})));
        assert!(!hook.matches("bash", &json!({"command": "git status"})));
        assert!(!hook.matches("read", &json!({"command": "git push"})));
        let config: HookConfig = toml::from_str("event = \"after\"\ncommand = \"true\"").unwrap();
        assert!(
            CommandHook::new(&config)
                .unwrap()
                .matches("read", &json!({}))
        );
        let bad: HookConfig =
            toml::from_str("event = \"after\"\ntool = \"[\"\ncommand = \"true\"").unwrap();
        assert!(CommandHook::new(&bad).is_err());
    }
}
