//! `todo_write` and `todo_read`: the session's plan.

use std::borrow::Cow;
use std::sync::Mutex;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::context::{ToolContext, ToolEnv};
use crate::error::ToolError;
use crate::tool::Tool;
use crate::util::MutexExt as _;
use crate::vocab::{InterruptBehavior, JsonObject, ToolFlags, ToolOutput};

const DESCRIPTION: &str = include_str!("todo.md");

/// Tasks in one list at most.
const MAX_TODOS: usize = 100;

/// Where a task stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    /// Not started.
    Pending,
    /// Being worked on (one task at most).
    InProgress,
    /// Done.
    Completed,
}

/// How much a task matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TodoPriority {
    /// First.
    High,
    /// Normal.
    Medium,
    /// Last.
    Low,
}

/// One task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Todo {
    /// What to do, in the imperative ("Add tests for the parser").
    pub content: String,
    /// `pending`, `in_progress` or `completed`.
    pub status: TodoStatus,
    /// `high`, `medium` or `low`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    // Absent when unset, never `null` (in the output schema too).
    #[schemars(with = "TodoPriority")]
    pub priority: Option<TodoPriority>,
}

/// Arguments of `todo_write`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TodoWriteArgs {
    /// The whole list, in order; it replaces the previous one.
    pub todos: Vec<Todo>,
}

/// Arguments of `todo_read` (none).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TodoReadArgs {}

/// The session's list.
#[derive(Debug, Default)]
struct TodoList(Mutex<Vec<Todo>>);

/// The `todo_write` tool.
#[derive(Debug, Default, Clone, Copy)]
pub struct TodoWriteTool;

/// The `todo_read` tool.
#[derive(Debug, Default, Clone, Copy)]
pub struct TodoReadTool;

/// Changes nothing outside the session: offered in every mode, never asks.
const FLAGS: ToolFlags = ToolFlags {
    concurrency_safe: false,
    read_only: true,
    destructive: false,
    idempotent: true,
    open_world: false,
    interrupt: InterruptBehavior::Block,
};

/// The structured result of `todo_write` and `todo_read`.
#[derive(Debug, Serialize, JsonSchema)]
struct TodoListResult<'a> {
    /// The whole list, in order.
    todos: &'a [Todo],
}

/// The list as the model and the user see it.
fn render(todos: &[Todo]) -> ToolOutput {
    let count = |s: TodoStatus| todos.iter().filter(|t| t.status == s).count();
    let text = if todos.is_empty() {
        String::from("The todo list is empty.")
    } else {
        let mut text = format!(
            "Todo list: {} task(s), {} completed, {} in progress, {} pending\n",
            todos.len(),
            count(TodoStatus::Completed),
            count(TodoStatus::InProgress),
            count(TodoStatus::Pending)
        );
        for (i, todo) in todos.iter().enumerate() {
            let mark = match todo.status {
                TodoStatus::Completed => "[x]",
                TodoStatus::InProgress => "[>]",
                TodoStatus::Pending => "[ ]",
            };
            let priority = match todo.priority {
                Some(TodoPriority::High) => " (high)",
                Some(TodoPriority::Low) => " (low)",
                Some(TodoPriority::Medium) | None => "",
            };
            text.push_str(&format!("{mark} {}. {}{priority}\n", i + 1, todo.content));
        }
        text
    };
    ToolOutput::text(text.trim_end().to_owned())
        .with_title(format!("{} task(s)", todos.len()))
        .with_structured_of(&TodoListResult { todos })
}

impl Tool for TodoWriteTool {
    type Args = TodoWriteArgs;
    const NAME: &'static str = "todo_write";
    const TITLE: &'static str = "Update the plan";

    fn description(&self, _env: &ToolEnv) -> Cow<'static, str> {
        DESCRIPTION.into()
    }

    fn flags(&self, _args: Option<&TodoWriteArgs>) -> ToolFlags {
        FLAGS
    }

    fn output_schema(&self) -> Option<JsonObject> {
        Some(crate::schema::output_schema::<TodoListResult<'static>>())
    }

    async fn validate(
        &self,
        mut args: TodoWriteArgs,
        _ctx: &ToolContext,
    ) -> Result<TodoWriteArgs, ToolError> {
        if args.todos.len() > MAX_TODOS {
            return Err(ToolError::invalid(format!(
                "the list has {} tasks; keep it to {MAX_TODOS} at most by merging small steps",
                args.todos.len()
            )));
        }
        for (i, todo) in args.todos.iter_mut().enumerate() {
            todo.content = todo.content.trim().to_string();
            if todo.content.is_empty() {
                return Err(ToolError::invalid(format!(
                    "task {} has an empty `content`; say what the task is",
                    i + 1
                )));
            }
        }
        let in_progress: Vec<usize> = args
            .todos
            .iter()
            .enumerate()
            .filter(|(_, t)| t.status == TodoStatus::InProgress)
            .map(|(i, _)| i + 1)
            .collect();
        if in_progress.len() > 1 {
            return Err(ToolError::invalid(format!(
                "tasks {in_progress:?} are all `in_progress`; at most one task may be in progress. \
                 Mark the others `pending` (or `completed` if done)"
            )));
        }
        Ok(args)
    }

    async fn execute(
        &self,
        args: TodoWriteArgs,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let list = ctx.session().state::<TodoList>();
        let mut todos = list.0.locked();
        *todos = args.todos;
        Ok(render(&todos))
    }
}

impl Tool for TodoReadTool {
    type Args = TodoReadArgs;
    const NAME: &'static str = "todo_read";
    const TITLE: &'static str = "Read the plan";

    fn description(&self, _env: &ToolEnv) -> Cow<'static, str> {
        "Shows this session's todo list (see `todo_write`).".into()
    }

    fn flags(&self, _args: Option<&TodoReadArgs>) -> ToolFlags {
        ToolFlags {
            concurrency_safe: true,
            ..FLAGS
        }
    }

    fn output_schema(&self) -> Option<JsonObject> {
        Some(crate::schema::output_schema::<TodoListResult<'static>>())
    }

    async fn execute(
        &self,
        _args: TodoReadArgs,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let list = ctx.session().state::<TodoList>();
        let todos = list.0.locked();
        Ok(render(&todos))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use std::sync::Arc;

    use crate::context::{Session, ToolContext};
    use crate::testutil::TestWorkspace;

    #[tokio::test]
    async fn the_plan_is_kept_per_session_and_shown_whole() {
        let fx = TestWorkspace::new();
        let empty = fx.call("todo_read", json!({})).await.unwrap();
        assert_eq!(empty.joined_text(), "The todo list is empty.");
        let written = fx
            .call(
                "todo_write",
                json!({"todos": [
                    {"content": "Write the parser", "status": "completed"},
                    {"content": "Test it", "status": "in_progress", "priority": "high"},
                    {"content": "Document it", "status": "pending", "priority": "low"}
                ]}),
            )
            .await
            .unwrap();
        insta::assert_snapshot!(written.joined_text(), @r"
        Todo list: 3 task(s), 1 completed, 1 in progress, 1 pending
        [x] 1. Write the parser
        [>] 2. Test it (high)
        [ ] 3. Document it (low)
        ");
        let read = fx.call("todo_read", json!({})).await.unwrap();
        assert_eq!(read.joined_text(), written.joined_text());
        assert_eq!(
            read.structured.unwrap()["todos"][1]["status"],
            "in_progress"
        );
        let other_session = ToolContext::builder(Arc::clone(&fx.env))
            .session(Arc::new(Session::new("other")))
            .build();
        let other = fx
            .call_with(&other_session, "todo_read", json!({}))
            .await
            .unwrap();
        assert_eq!(other.joined_text(), "The todo list is empty.");
    }

    #[tokio::test]
    async fn two_tasks_in_progress_or_an_empty_task_are_refused() {
        let fx = TestWorkspace::new();
        let err = fx
            .call(
                "todo_write",
                json!({"todos": [
                    {"content": "a", "status": "in_progress"},
                    {"content": "b", "status": "in_progress"}
                ]}),
            )
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("at most one task may be in progress"), "{err}");
        let err = fx
            .call(
                "todo_write",
                json!({"todos": [{"content": " ", "status": "pending"}]}),
            )
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("empty `content`"), "{err}");
        let err = fx
            .call(
                "todo_write",
                json!({"todos": [{"content": "a", "status": "started"}]}),
            )
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("status"), "{err}");
    }
}
