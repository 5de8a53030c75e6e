use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use pretty_assertions::assert_eq;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::*;
use crate::context::ask::{BoxFuture, ScriptedAsker};
use crate::context::{AccessKind, ToolEnv};
use crate::permission::{Access, Approval};
use crate::registry::ToolSource;
use crate::testutil::TestWorkspace;
use crate::tool::Tool;
use crate::vocab::{Content, ToolFlags};

/// Arguments of the test tool.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ProbeArgs {
    /// What to do.
    action: String,
    /// A path it touches, if any.
    path: Option<String>,
    /// How long to sleep.
    millis: Option<u64>,
}

/// A tool whose behaviour the arguments choose.
#[derive(Default)]
struct Probe {
    interrupt: InterruptBehavior,
    finished: Arc<AtomicUsize>,
    /// Not offered in this environment.
    disabled: bool,
}

impl Tool for Probe {
    type Args = ProbeArgs;
    const NAME: &'static str = "probe";
    const TITLE: &'static str = "Probe";

    fn description(&self, _env: &ToolEnv) -> Cow<'static, str> {
        "test".into()
    }

    fn enabled(&self, _env: &ToolEnv) -> bool {
        !self.disabled
    }

    fn flags(&self, _args: Option<&ProbeArgs>) -> ToolFlags {
        ToolFlags {
            interrupt: self.interrupt,
            ..ToolFlags::default()
        }
    }

    async fn validate(
        &self,
        mut args: ProbeArgs,
        _ctx: &ToolContext,
    ) -> Result<ProbeArgs, ToolError> {
        if args.action == "invalid" {
            return Err(ToolError::invalid(
                "`action` may not be `invalid`; use `echo`",
            ));
        }
        args.action = args.action.trim().to_owned();
        Ok(args)
    }

    async fn accesses(
        &self,
        args: &ProbeArgs,
        ctx: &ToolContext,
    ) -> Result<Vec<Access>, ToolError> {
        match &args.path {
            Some(path) => Ok(vec![ctx.path_access(path, AccessKind::Write).await?]),
            None => Ok(Vec::new()),
        }
    }

    async fn execute(&self, args: ProbeArgs, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        match args.action.as_str() {
            "panic" => panic!("probe exploded"),
            "sleep" => {
                tokio::time::sleep(Duration::from_millis(args.millis.unwrap_or(0))).await;
                self.finished.fetch_add(1, Ordering::SeqCst);
                Ok(ToolOutput::text("slept"))
            }
            "lines" => Ok(ToolOutput::text("x\n".repeat(5000))),
            // Outputs that report a failure (`is_error`), as `web_fetch` and `bash` make them.
            "fail" => Ok(failed(vec![Content::Text("HTTP 404 Not Found".into())])),
            "fail_long" => Ok(failed(vec![
                Content::Long(crate::output::LongText::complete("out 1\nout 2\n".into())),
                Content::Text("[timed out after 1.0 s]".into()),
            ])),
            "fail_marked" => Ok(failed(vec![Content::Text(
                "Error (probe): said so already".into(),
            )])),
            "fail_image" => Ok(failed(vec![Content::Image {
                data: vec![1],
                mime_type: "image/png".into(),
            }])),
            other => Ok(ToolOutput::text(format!("echo {other}"))),
        }
    }
}

/// An output that reports a failure.
fn failed(content: Vec<Content>) -> ToolOutput {
    ToolOutput {
        content,
        is_error: true,
        ..ToolOutput::default()
    }
}

fn workspace_with(probe: Probe) -> TestWorkspace {
    let mut ws = TestWorkspace::new();
    ws.registry.register(probe, ToolSource::Caller);
    ws
}

#[tokio::test]
async fn unknown_tools_are_protocol_errors_naming_the_alternatives() {
    let ws = TestWorkspace::new();
    let err = run(&ws.registry, "nope", json!({}), &ws.ctx())
        .await
        .unwrap_err();
    let message = err.to_string();
    assert!(
        message.starts_with("unknown tool `nope`; available tools: read, write, edit"),
        "{message}"
    );
}

#[tokio::test]
async fn a_tool_that_is_not_offered_does_not_run_when_called_by_name() {
    let finished = Arc::new(AtomicUsize::new(0));
    let ws = workspace_with(Probe {
        finished: Arc::clone(&finished),
        disabled: true,
        ..Probe::default()
    });
    let err = ws
        .error("probe", json!({"action": "sleep", "millis": 1}))
        .await;
    assert!(
        err.starts_with("`probe` is not offered by this server in its current environment"),
        "{err}"
    );
    assert_eq!(finished.load(Ordering::SeqCst), 0);
    // Nor is it named among the alternatives to an unknown tool.
    let err = run(&ws.registry, "nope", json!({}), &ws.ctx())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("read, write") && !err.contains("probe"),
        "{err}"
    );
}

#[tokio::test]
async fn schema_errors_name_the_field_and_validate_can_correct_or_refuse() {
    let ws = workspace_with(Probe::default());
    let err = ws.call("probe", json!({"action": 5})).await.unwrap_err();
    assert!(matches!(err, ToolError::InvalidArguments { .. }));
    let text = err.to_output("probe").joined_text();
    assert!(text.starts_with("Error (probe): invalid arguments: field `action`: invalid type: integer `5`, expected a string"), "{text}");
    assert_eq!(
        ws.text("probe", json!({"action": "  hi  "})).await,
        "echo hi"
    );
    assert_eq!(
        ws.error("probe", json!({"action": "invalid"})).await,
        "`action` may not be `invalid`; use `echo`"
    );
}

#[tokio::test]
async fn a_panicking_tool_becomes_an_error() {
    let ws = workspace_with(Probe::default());
    let err = ws.error("probe", json!({"action": "panic"})).await;
    assert!(
        err.contains("internal error in `probe`: probe exploded"),
        "{err}"
    );
    assert_eq!(
        ws.text("probe", json!({"action": "still alive"})).await,
        "echo still alive"
    );
}

#[tokio::test]
async fn cancel_tools_stop_at_once_and_block_tools_finish() {
    for interrupt in [InterruptBehavior::Cancel, InterruptBehavior::Block] {
        let finished = Arc::new(AtomicUsize::new(0));
        let ws = workspace_with(Probe {
            interrupt,
            finished: Arc::clone(&finished),
            ..Probe::default()
        });
        let ctx = ws.ctx();
        let token = ctx.cancellation().clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            token.cancel();
        });
        let started = std::time::Instant::now();
        let result = ws
            .call_with(&ctx, "probe", json!({"action": "sleep", "millis": 400}))
            .await;
        match interrupt {
            InterruptBehavior::Cancel => {
                assert!(matches!(result, Err(ToolError::Cancelled)));
                assert!(started.elapsed() < Duration::from_millis(350));
                assert_eq!(finished.load(Ordering::SeqCst), 0);
            }
            InterruptBehavior::Block => {
                assert_eq!(result.unwrap().joined_text(), "slept");
                assert_eq!(finished.load(Ordering::SeqCst), 1);
            }
        }
    }
}

#[tokio::test]
async fn an_ask_runs_nothing_before_the_yes() {
    let finished = Arc::new(AtomicUsize::new(0));
    let ws = workspace_with(Probe {
        finished: Arc::clone(&finished),
        ..Probe::default()
    });
    let outside = ws.outside().join("f.txt").display().to_string();
    let args = json!({"action": "sleep", "path": outside});

    let denied = Arc::new(ScriptedAsker::approving([Approval::Deny {
        reason: Some("not there".into()),
    }]));
    let err = ws
        .call_with(&ws.ctx_with(denied.clone()), "probe", args.clone())
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "permission denied: the user declined: not there"
    );
    assert_eq!(finished.load(Ordering::SeqCst), 0);
    let asked = denied.asked();
    assert_eq!(asked.len(), 1);
    assert!(
        asked[0].summary.contains("write") && asked[0].summary.contains("f.txt"),
        "{}",
        asked[0].summary
    );

    let once = Arc::new(ScriptedAsker::approving([Approval::Once]));
    assert_eq!(
        ws.call_with(&ws.ctx_with(once), "probe", args.clone())
            .await
            .unwrap()
            .joined_text(),
        "slept"
    );
    // "Once" does not carry over to the next call.
    let err = ws.call("probe", args.clone()).await.unwrap_err();
    assert!(matches!(err, ToolError::PermissionDenied(_)));

    let session = Arc::new(ScriptedAsker::approving([Approval::Session]));
    ws.call_with(&ws.ctx_with(session.clone()), "probe", args.clone())
        .await
        .unwrap();
    // The session grant now covers it: no asker needed.
    ws.call("probe", args).await.unwrap();
    assert_eq!(session.asked().len(), 1);
}

#[derive(Debug)]
struct TestHook {
    before: BeforeHook,
    after: Option<String>,
    fail: bool,
}

impl Hook for TestHook {
    fn name(&self) -> &'static str {
        "test"
    }

    fn matches(&self, tool: &str, _input: &Value) -> bool {
        tool == "probe"
    }

    fn before<'a>(&'a self, _call: &'a HookCall<'a>) -> BoxFuture<'a, Result<BeforeHook, String>> {
        let verdict = if self.fail {
            Err("hook crashed".to_owned())
        } else {
            Ok(self.before.clone())
        };
        Box::pin(async move { verdict })
    }

    fn after<'a>(
        &'a self,
        _call: &'a HookCall<'a>,
        output: &'a ToolOutput,
    ) -> BoxFuture<'a, Result<AfterHook, String>> {
        let verdict = match &self.after {
            Some(prefix) => AfterHook::Replace(Box::new(ToolOutput::text(format!(
                "{prefix}{}",
                output.joined_text()
            )))),
            None => AfterHook::Keep,
        };
        Box::pin(async move { Ok(verdict) })
    }
}

async fn with_hook(hook: TestHook, args: Value) -> Result<ToolOutput, ToolError> {
    let spill = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let env = ToolEnv::builder()
        .root(root.path())
        .spill_dir(spill.path())
        .hook(Arc::new(hook))
        .build()
        .unwrap();
    let mut registry = ToolRegistry::new();
    registry.register(Probe::default(), ToolSource::Caller);
    let ctx = ToolContext::builder(Arc::new(env)).build();
    run(&registry, "probe", args, &ctx).await.unwrap().result
}

#[tokio::test]
async fn hooks_block_replace_input_and_rewrite_output() {
    let block = TestHook {
        before: BeforeHook::Block("no probing on Fridays".into()),
        after: None,
        fail: false,
    };
    let err = with_hook(block, json!({"action": "a"})).await.unwrap_err();
    assert_eq!(err.to_string(), "blocked by hook: no probing on Fridays");

    let replace = TestHook {
        before: BeforeHook::ReplaceInput(json!({"action": "b"})),
        after: Some("after: ".into()),
        fail: false,
    };
    assert_eq!(
        with_hook(replace, json!({"action": "a"}))
            .await
            .unwrap()
            .joined_text(),
        "after: echo b"
    );

    // A replaced input goes through validation again.
    let invalid = TestHook {
        before: BeforeHook::ReplaceInput(json!({"action": "invalid"})),
        after: None,
        fail: false,
    };
    assert!(with_hook(invalid, json!({"action": "a"})).await.is_err());

    // A failing hook is reported, not fatal.
    let failing = TestHook {
        before: BeforeHook::Continue,
        after: None,
        fail: true,
    };
    assert_eq!(
        with_hook(failing, json!({"action": "a"}))
            .await
            .unwrap()
            .joined_text(),
        "echo a"
    );

    // An ask from a hook with nobody to ask denies.
    let ask = TestHook {
        before: BeforeHook::Ask("double-check".into()),
        after: None,
        fail: false,
    };
    assert!(matches!(
        with_hook(ask, json!({"action": "a"})).await,
        Err(ToolError::PermissionDenied(_))
    ));
}

#[tokio::test]
async fn output_is_truncated_by_the_pipeline() {
    let ws = workspace_with(Probe::default());
    let out = ws.call("probe", json!({"action": "lines"})).await.unwrap();
    let truncation = out.truncated.clone().expect("5000 lines is over the limit");
    assert_eq!(truncation.cut.total_lines, 5000);
    assert!(out.joined_text().lines().count() <= 2000);
}

#[tokio::test]
async fn what_an_after_hook_adds_is_cut_to_the_limits_too() {
    // See: issue 38. An after hook's replacement counts like any output.
    let loud = TestHook {
        before: BeforeHook::Continue,
        after: Some("a hook's note\n".repeat(3000)),
        fail: false,
    };
    let out = with_hook(loud, json!({"action": "lines"})).await.unwrap();
    crate::testutil::assert_fits(&out, crate::OutputLimits::DEFAULT);
    assert!(out.joined_text().starts_with("a hook's note\n"));
    let quiet = TestHook {
        before: BeforeHook::Continue,
        after: Some("a hook's note\n".into()),
        fail: false,
    };
    let out = with_hook(quiet, json!({"action": "a"})).await.unwrap();
    assert_eq!(out.joined_text(), "a hook's note\necho a");
    assert_eq!(out.truncated, None);
}

fn audited(
    budget: crate::config::Budget,
    policy: crate::Policy,
) -> (TestWorkspace, std::path::PathBuf, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    let audit = crate::audit::AuditLog::open(&log).unwrap();
    let mut ws = TestWorkspace::custom(|b| b.budget(budget).audit(audit).policy(policy));
    ws.registry.register(Probe::default(), ToolSource::Caller);
    (ws, log, dir)
}

/// The audit lines.
fn audit_lines(log: &std::path::Path) -> Vec<Value> {
    let text = std::fs::read_to_string(log).unwrap();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test]
async fn every_call_is_audited_with_its_decision_and_redacted_arguments() {
    let policy = crate::Policy::new(crate::Mode::Default)
        .with_rules(
            [crate::Rule {
                action: crate::RuleAction::Deny,
                tool: "probe".into(),
                pattern: Some("secret/**".into()),
            }],
            crate::permission::RuleOrigin::User,
        )
        .unwrap();
    let (ws, log, _dir) = audited(crate::config::Budget::default(), policy);
    let outside = ws.outside().join("f.txt").display().to_string();
    ws.call("probe", json!({"action": "API_TOKEN=abc123456 go"}))
        .await
        .unwrap();
    ws.call("probe", json!({"action": "x", "path": "secret/a"}))
        .await
        .unwrap_err();
    let once = Arc::new(ScriptedAsker::approving([Approval::Once]));
    ws.call_with(
        &ws.ctx_with(once),
        "probe",
        json!({"action": "x", "path": outside}),
    )
    .await
    .unwrap();
    ws.call("probe", json!({"action": "invalid"}))
        .await
        .unwrap_err();

    let lines = audit_lines(&log);
    assert_eq!(lines.len(), 4, "{lines:#?}");
    assert_eq!(lines[0]["tool"], "probe");
    assert_eq!(lines[0]["session"], "test");
    assert_eq!(lines[0]["outcome"], "ok");
    assert_eq!(
        lines[0]["decision"],
        json!({"verdict": "allow", "by": "mode default"})
    );
    assert_eq!(lines[0]["arguments"]["action"], "API_TOKEN=[redacted] go");
    assert_eq!(lines[0]["truncated"], false);
    assert_eq!(
        lines[0]["output_hash"],
        crate::fs::ContentHash::of(b"echo API_TOKEN=abc123456 go\0").to_string()
    );
    assert_eq!(lines[1]["outcome"], "permission_denied");
    assert_eq!(lines[1]["decision"]["verdict"], "deny");
    assert_eq!(
        lines[1]["decision"]["by"],
        "rule deny probe `secret/**` (user config)"
    );
    assert!(lines[1]["error"].as_str().unwrap().contains("rule denies"));
    assert_eq!(
        lines[2]["decision"],
        json!({"verdict": "allow", "by": "user (once)"})
    );
    assert_eq!(lines[3]["outcome"], "invalid");
    assert_eq!(
        lines[3]["decision"],
        Value::Null,
        "refused before the permission stage"
    );
    assert!(lines[0]["time"].as_str().unwrap().ends_with('Z'));
}

#[tokio::test]
async fn budgets_stop_a_session_with_a_clear_error() {
    let budget = crate::config::Budget {
        max_calls: Some(2),
        max_tool_seconds: None,
    };
    let (ws, _log, _dir) = audited(budget, crate::Policy::default());
    ws.call("probe", json!({"action": "a"})).await.unwrap();
    ws.call("probe", json!({"action": "b"})).await.unwrap();
    let err = ws.call("probe", json!({"action": "c"})).await.unwrap_err();
    assert_eq!(err.kind(), "budget_exceeded");
    assert!(err.to_string().contains("budget of 2 tool calls"), "{err}");
    // Another session has its own budget.
    let other = ToolContext::builder(Arc::clone(&ws.env)).build();
    ws.call_with(&other, "probe", json!({"action": "d"}))
        .await
        .unwrap();

    let budget = crate::config::Budget {
        max_calls: None,
        max_tool_seconds: Some(0),
    };
    let (ws, _log, _dir) = audited(budget, crate::Policy::default());
    let err = ws.call("probe", json!({"action": "a"})).await.unwrap_err();
    assert!(err.to_string().contains("0 s of tool time"), "{err}");
}

#[tokio::test]
async fn read_only_mode_refuses_mutating_tools_even_when_called_by_name() {
    let (ws, log, _dir) = audited(
        crate::config::Budget::default(),
        crate::Policy::new(crate::Mode::ReadOnly),
    );
    let err = ws.call("probe", json!({"action": "a"})).await.unwrap_err();
    assert!(err.to_string().contains("read-only mode"), "{err}");
    let err = ws
        .call("write", json!({"path": "a.txt", "content": "x"}))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("read-only mode"), "{err}");
    assert!(!ws.root().join("a.txt").exists());
    // The alternatives to an unknown tool are the tools offered: no mutating ones.
    let err = run(&ws.registry, "nope", json!({}), &ws.ctx())
        .await
        .unwrap_err()
        .to_string();
    let (_, listed) = err.split_once("available tools: ").expect("a list");
    let listed: Vec<&str> = listed.split(", ").collect();
    assert!(
        listed.contains(&"read") && !listed.contains(&"write") && !listed.contains(&"edit"),
        "{err}"
    );
    let lines = audit_lines(&log);
    assert_eq!(
        lines[1]["decision"],
        json!({"verdict": "deny", "by": "mode read-only"})
    );
}

/// Arguments of the concurrency probe.
#[derive(Debug, Deserialize, JsonSchema)]
struct OverlapArgs {
    /// Whether this call may run beside others.
    safe: bool,
    /// A label recorded when it starts.
    label: u32,
}

/// Counts how many of its calls run at once.
#[derive(Default)]
struct Overlap {
    active: Arc<AtomicUsize>,
    most: Arc<AtomicUsize>,
    /// Whether an unsafe call ever ran beside another.
    collided: Arc<std::sync::atomic::AtomicBool>,
    started: Arc<std::sync::Mutex<Vec<u32>>>,
}

impl Tool for Overlap {
    type Args = OverlapArgs;
    const NAME: &'static str = "overlap";
    const TITLE: &'static str = "Overlap";

    fn description(&self, _env: &ToolEnv) -> Cow<'static, str> {
        "test".into()
    }

    fn flags(&self, args: Option<&OverlapArgs>) -> ToolFlags {
        ToolFlags {
            concurrency_safe: args.is_some_and(|a| a.safe),
            ..ToolFlags::default()
        }
    }

    async fn execute(
        &self,
        args: OverlapArgs,
        _ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        self.started.lock().unwrap().push(args.label);
        let now = self.active.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        if !args.safe && now > 1 {
            self.collided.store(true, Ordering::SeqCst);
        }
        tokio::time::sleep(Duration::from_millis(30)).await;
        if !args.safe && self.active.load(Ordering::SeqCst) > 1 {
            self.collided.store(true, Ordering::SeqCst);
        }
        self.active.fetch_sub(1, Ordering::SeqCst);
        Ok(ToolOutput::text("done"))
    }
}

async fn overlap_run(ws: &TestWorkspace, calls: &[(bool, u32)]) {
    let ctx = ws.ctx();
    let futures = calls
        .iter()
        .map(|(safe, label)| ws.call_with(&ctx, "overlap", json!({"safe": safe, "label": label})));
    for result in futures_util::future::join_all(futures).await {
        result.unwrap();
    }
}

#[tokio::test]
async fn safe_calls_overlap_and_the_others_run_alone_in_order() {
    let overlap = Overlap::default();
    let (most, collided, started) = (
        Arc::clone(&overlap.most),
        Arc::clone(&overlap.collided),
        Arc::clone(&overlap.started),
    );
    let mut ws = TestWorkspace::new();
    ws.registry.register(overlap, ToolSource::Caller);

    overlap_run(&ws, &(0..8).map(|i| (true, i)).collect::<Vec<_>>()).await;
    assert!(
        most.load(Ordering::SeqCst) >= 4,
        "safe calls ran side by side"
    );

    most.store(0, Ordering::SeqCst);
    started.lock().unwrap().clear();
    overlap_run(&ws, &(0..6).map(|i| (false, i)).collect::<Vec<_>>()).await;
    assert_eq!(
        most.load(Ordering::SeqCst),
        1,
        "unsafe calls ran one at a time"
    );
    assert_eq!(
        *started.lock().unwrap(),
        vec![0, 1, 2, 3, 4, 5],
        "in arrival order"
    );

    // Mixed: an unsafe call never overlaps anything.
    let mixed: Vec<(bool, u32)> = (0..12).map(|i| (i % 3 != 0, i)).collect();
    overlap_run(&ws, &mixed).await;
    assert!(
        !collided.load(Ordering::SeqCst),
        "an unsafe call ran beside another"
    );
}

#[tokio::test]
async fn the_worker_limit_bounds_parallel_calls() {
    let overlap = Overlap::default();
    let most = Arc::clone(&overlap.most);
    let mut ws = TestWorkspace::custom(|b| b.max_parallel_calls(2));
    ws.registry.register(overlap, ToolSource::Caller);
    overlap_run(&ws, &(0..8).map(|i| (true, i)).collect::<Vec<_>>()).await;
    assert_eq!(most.load(Ordering::SeqCst), 2);
}

/// A hook that keeps the inputs its `before` saw.
#[derive(Debug, Default)]
struct Witness {
    seen: std::sync::Mutex<Vec<Value>>,
}

impl Hook for Witness {
    fn name(&self) -> &'static str {
        "witness"
    }

    fn matches(&self, _tool: &str, _input: &Value) -> bool {
        true
    }

    fn before<'a>(&'a self, call: &'a HookCall<'a>) -> BoxFuture<'a, Result<BeforeHook, String>> {
        self.seen.lock().unwrap().push(call.input.clone());
        Box::pin(async { Ok(BeforeHook::Continue) })
    }

    fn after<'a>(
        &'a self,
        _call: &'a HookCall<'a>,
        _output: &'a ToolOutput,
    ) -> BoxFuture<'a, Result<AfterHook, String>> {
        Box::pin(async { Ok(AfterHook::Keep) })
    }
}

#[tokio::test]
async fn mistyped_arguments_are_converted_once_and_hooks_see_the_converted_input() {
    let spill = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let witness = Arc::new(Witness::default());
    let env = ToolEnv::builder()
        .root(root.path())
        .spill_dir(spill.path())
        .hook(witness.clone())
        .build()
        .unwrap();
    let mut registry = ToolRegistry::new();
    registry.register(Probe::default(), ToolSource::Caller);
    let ctx = ToolContext::builder(Arc::new(env)).build();
    let output = run(
        &registry,
        "probe",
        json!({"action": "sleep", "millis": "1"}),
        &ctx,
    )
    .await
    .unwrap()
    .result
    .unwrap();
    assert_eq!(output.joined_text(), "slept");
    // A hook that checks `millis` sees the number the tool ran with, not the string sent:
    // a policy written against the schema cannot be slipped past by quoting a value.
    assert_eq!(
        *witness.seen.lock().unwrap(),
        vec![json!({"action": "sleep", "millis": 1})]
    );
    // Input that no conversion mends keeps its first error.
    let err = run(
        &registry,
        "probe",
        json!({"action": "sleep", "millis": "soon"}),
        &ctx,
    )
    .await
    .unwrap()
    .result
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("field `millis`: invalid type: string \"soon\""),
        "{err}"
    );
}

/// Arguments of [`Whereabouts`].
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct WhereaboutsArgs {
    /// Fail the attempt without waiting, so the work runs again on the blocking pool.
    #[serde(default)]
    would_block: bool,
}

/// Says on which thread its call ran, and how its file work went.
struct Whereabouts {
    inline: bool,
}

impl Tool for Whereabouts {
    type Args = WhereaboutsArgs;
    const NAME: &'static str = "whereabouts";
    const TITLE: &'static str = "Whereabouts";

    fn description(&self, _env: &ToolEnv) -> Cow<'static, str> {
        "test".into()
    }

    fn inline(&self) -> bool {
        self.inline
    }

    async fn execute(
        &self,
        args: WhereaboutsArgs,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let call_thread = std::thread::current().id();
        let attempts = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&attempts);
        let (work_thread, nowait) = ctx
            .nonblocking_first(move |_ctx| {
                counted.fetch_add(1, Ordering::SeqCst);
                let nowait = crate::fs::nowait::active();
                if nowait && args.would_block {
                    return Err(ToolError::io("probing", crate::fs::nowait::would_block()));
                }
                Ok((std::thread::current().id(), nowait))
            })
            .await?;
        Ok(ToolOutput::text(format!(
            "{call_thread:?} {work_thread:?} nowait={nowait} attempts={}",
            attempts.load(Ordering::SeqCst)
        )))
    }
}

async fn whereabouts(inline: bool, args: Value) -> String {
    let mut ws = TestWorkspace::new();
    ws.registry
        .register(Whereabouts { inline }, ToolSource::Caller);
    let registry = Arc::new(std::mem::take(&mut ws.registry));
    let report = run_on_worker(registry, "whereabouts".into(), args, ws.ctx())
        .await
        .unwrap();
    report.result.unwrap().joined_text()
}

#[tokio::test(flavor = "current_thread")]
async fn inline_tools_run_on_the_runtime_and_move_to_a_worker_only_when_they_would_wait() {
    let here = format!("{:?}", std::thread::current().id());
    // An inline tool's call and its file work stay on this thread, tried without waiting.
    let text = whereabouts(true, json!({})).await;
    assert_eq!(text, format!("{here} {here} nowait=true attempts=1"));
    // Work that would wait runs again on a worker, where it may.
    let text = whereabouts(true, json!({"would_block": true})).await;
    let (call, rest) = text.split_once(' ').unwrap();
    assert_eq!(call, here);
    assert!(!rest.starts_with(&here), "{text}");
    assert!(rest.ends_with(" nowait=false attempts=2"), "{text}");
    // Other tools' calls run wholly on a worker, with nothing tried first.
    let text = whereabouts(false, json!({})).await;
    let (call, rest) = text.split_once(' ').unwrap();
    assert_ne!(call, here);
    assert_eq!(rest, format!("{call} nowait=false attempts=1"));
}

/// What the model reads for a call: the output's text, or the error's ([`ToolError::to_output`]),
/// which must say it failed.
async fn model_reads(ws: &TestWorkspace, ctx: &ToolContext, tool: &str, args: Value) -> String {
    let report = run(&ws.registry, tool, args, ctx).await.unwrap();
    let output = match report.result {
        Ok(output) => output,
        Err(err) => err.to_output(tool),
    };
    assert!(
        output.is_error,
        "{tool} did not fail: {}",
        output.joined_text()
    );
    output.joined_text()
}

#[tokio::test]
async fn every_kind_of_error_starts_with_the_marker_naming_the_tool() {
    // See: issue 38, hosts that forward a result's text without its isError flag.
    let mut seen = Vec::new();
    let mut say = |kind: &str, text: String| seen.push(format!("## {kind}\n{text}"));

    let ws = workspace_with(Probe::default());
    let ctx = ws.ctx();
    let call = |tool: &'static str, args: Value| model_reads(&ws, &ctx, tool, args);
    say(
        "invalid arguments",
        call("probe", json!({"action": 5})).await,
    );
    say(
        "validation",
        call("probe", json!({"action": "invalid"})).await,
    );
    say(
        "unknown path",
        call("read", json!({"path": "nope.txt"})).await,
    );
    say(
        "the tool's own failure",
        call("grep", json!({"pattern": "a("})).await,
    );
    say(
        "a panicking tool",
        call("probe", json!({"action": "panic"})).await,
    );
    say(
        "a failed output",
        call("probe", json!({"action": "fail"})).await,
    );
    say(
        "a failed command output",
        call("probe", json!({"action": "fail_long"})).await,
    );
    say(
        "already marked",
        call("probe", json!({"action": "fail_marked"})).await,
    );
    say(
        "no text",
        call("probe", json!({"action": "fail_image"})).await,
    );
    let outside_dir = ws.outside().display().to_string();
    let outside = ws.outside().join("f.txt").display().to_string();
    say(
        "path outside the roots, declined",
        call("probe", json!({"action": "x", "path": outside})).await,
    );
    let cancelled = ws.ctx();
    cancelled.cancellation().cancel();
    say(
        "cancelled",
        model_reads(&ws, &cancelled, "probe", json!({"action": "sleep"})).await,
    );

    let block = TestHook {
        before: BeforeHook::Block("no probing on Fridays".into()),
        after: None,
        fail: false,
    };
    let err = with_hook(block, json!({"action": "a"})).await.unwrap_err();
    say("hook block", err.to_output("probe").joined_text());

    let budget = crate::config::Budget {
        max_calls: Some(0),
        max_tool_seconds: None,
    };
    let (ws, _log, _dir) = audited(budget, crate::Policy::default());
    say(
        "budget",
        model_reads(&ws, &ws.ctx(), "probe", json!({"action": "a"})).await,
    );

    let (ws, _log, _dir) = audited(
        crate::config::Budget::default(),
        crate::Policy::new(crate::Mode::ReadOnly),
    );
    say(
        "read-only mode",
        model_reads(&ws, &ws.ctx(), "probe", json!({"action": "a"})).await,
    );

    let ws = workspace_with(Probe {
        disabled: true,
        ..Probe::default()
    });
    say(
        "not offered",
        model_reads(&ws, &ws.ctx(), "probe", json!({"action": "a"})).await,
    );

    insta::with_settings!({filters => vec![(outside_dir.as_str(), "[OUTSIDE]")]}, {
        insta::assert_snapshot!(seen.join("\n\n"));
    });
}
