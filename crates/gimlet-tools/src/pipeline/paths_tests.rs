//! Every built-in tool, run both ways a call can go: on the runtime thread ([`run`], as an
//! embedding agent calls it) and on a worker of the blocking pool ([`run_on_worker`], as the
//! servers do, where `ctx.blocking` runs in place). The same script of calls runs in two
//! identical workspaces, one per path, and must give the same results (in the spirit of
//! ripgrep's searcher tester, which runs each search through every way of reading). `bash`,
//! its job tools and `lsp` need the gimlet binary as their helper and are not offered here:
//! both paths refuse them alike, and the integration suite runs them through the server,
//! which takes the worker path.

use std::borrow::Cow;
use std::sync::Arc;

use pretty_assertions::assert_eq;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::*;
use crate::context::ToolEnv;
use crate::registry::ToolSource;
use crate::testutil::TestWorkspace;
use crate::tool::Tool;
use crate::vocab::ToolFlags;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Path {
    Runtime,
    Worker,
}

/// Arguments of `where`.
#[derive(Debug, Deserialize, JsonSchema)]
struct WhereArgs {}

/// Says whether it ran on a call worker, from inside `ctx.blocking`.
struct Where;

impl Tool for Where {
    type Args = WhereArgs;
    const NAME: &'static str = "where";
    const TITLE: &'static str = "Where";

    fn description(&self, _env: &ToolEnv) -> Cow<'static, str> {
        "Says where it runs.".into()
    }

    fn flags(&self, _args: Option<&WhereArgs>) -> ToolFlags {
        ToolFlags::READ_ONLY
    }

    async fn execute(&self, _args: WhereArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let outer = crate::context::on_worker();
        let inner = ctx.blocking(|_| Ok(crate::context::on_worker())).await?;
        Ok(ToolOutput::text(format!(
            "worker {outer}, blocking on worker {inner}"
        )))
    }
}

/// The calls, in order: at least one for every built-in tool.
fn script() -> Vec<(&'static str, Value)> {
    vec![
        ("where", json!({})),
        (
            "write",
            json!({"path": "a.txt", "content": "one\ntwo\nthree\n"}),
        ),
        ("read", json!({"path": "a.txt"})),
        (
            "edit",
            json!({"path": "a.txt", "old_string": "two", "new_string": "TWO"}),
        ),
        (
            "multi_edit",
            json!({"path": "a.txt", "edits": [{"old_string": "one", "new_string": "ONE"}]}),
        ),
        (
            "apply_patch",
            json!({"patch": "*** Begin Patch\n*** Add File: b.txt\n+added\n*** End Patch\n"}),
        ),
        (
            "notebook_edit",
            json!({"path": "n.ipynb", "cell_id": "c1", "new_source": "x = 1", "cell_type": "code", "edit_mode": "insert"}),
        ),
        ("undo", json!({})),
        ("checkpoints", json!({"path": "nothing-here.txt"})),
        ("diff", json!({"checkpoint": 1})),
        ("restore", json!({"checkpoint": 999})),
        (
            "grep",
            json!({"pattern": "TWO|added", "output_mode": "content"}),
        ),
        ("glob", json!({"pattern": "*.txt"})),
        ("ls", json!({"path": "."})),
        ("bash", json!({"command": "echo hello from bash"})),
        ("bash_output", json!({"bash_id": "no-such-job"})),
        ("bash_kill", json!({"shell_id": "no-such-job"})),
        (
            "todo_write",
            json!({"todos": [{"id": "1", "content": "check both paths", "status": "in_progress"}]}),
        ),
        ("todo_read", json!({})),
        (
            "lsp",
            json!({"operation": "document_symbols", "path": "a.txt"}),
        ),
        ("ask_user", json!({"question": "Which one?"})),
        ("web_fetch", json!({"url": "http://127.0.0.1:1/"})),
        ("web_search", json!({"query": "gimlet"})),
    ]
}

/// What a call gave, comparable across workspaces: the root's path masked.
fn outcome(ws: &TestWorkspace, result: Result<ToolOutput, ToolError>) -> String {
    let root = ws.root().display().to_string();
    let text = match result {
        Ok(output) => format!("ok: {}", output.joined_text()),
        Err(err) => format!("error: {err}"),
    };
    text.replace(&root, "<root>")
}

async fn run_script(path: Path) -> Vec<(String, String)> {
    let ws = TestWorkspace::new();
    let mut registry = ToolRegistry::builtin();
    registry.register(Where, ToolSource::Caller);
    let registry = Arc::new(registry);
    let mut outcomes = Vec::new();
    for (tool, args) in script() {
        let ctx = ws.ctx();
        let report = match path {
            Path::Runtime => run(&registry, tool, args, &ctx).await,
            Path::Worker => run_on_worker(Arc::clone(&registry), tool.to_owned(), args, ctx).await,
        };
        let result = report
            .unwrap_or_else(|err| panic!("{tool}: {err:?}"))
            .result;
        outcomes.push((tool.to_owned(), outcome(&ws, result)));
    }
    outcomes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_tool_gives_the_same_result_on_both_paths() {
    let runtime = run_script(Path::Runtime).await;
    let worker = run_script(Path::Worker).await;

    let covered: Vec<&str> = script().iter().map(|(tool, _)| *tool).collect();
    for spec in ToolRegistry::builtin()
        .init(&TestWorkspace::new().env)
        .await
    {
        assert!(
            covered.contains(&spec.name.as_str()),
            "the script does not call `{}`",
            spec.name
        );
    }
    assert_eq!(
        runtime[0].1, "ok: worker false, blocking on worker false",
        "the runtime path"
    );
    assert_eq!(
        worker[0].1, "ok: worker true, blocking on worker true",
        "the worker path: the call and its blocking work run on the worker"
    );
    let ran = |outcomes: &[(String, String)], tool: &str| {
        outcomes
            .iter()
            .find(|(t, _)| t == tool)
            .map(|(_, o)| o.clone())
            .unwrap_or_default()
    };
    assert!(ran(&runtime, "read").contains("three"), "{runtime:?}");
    assert!(ran(&runtime, "undo").contains("b.txt"), "{runtime:?}");
    assert_eq!(runtime[1..], worker[1..]);
}
