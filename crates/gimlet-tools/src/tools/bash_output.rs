//! `bash_output`: new output and status of a background job.

use std::borrow::Cow;
use std::fmt::Write as _;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use crate::context::{ToolContext, ToolEnv};
use crate::error::ToolError;
use crate::jobs::{Job, JobStatus, Jobs, Snapshot};
use crate::tool::{OutputLimits, Tool, ToolFlags, ToolOutput, TruncationMode};

const DESCRIPTION: &str = include_str!("bash_output.md");

/// Arguments of `bash_output`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BashOutputArgs {
    /// The job id `bash` returned (e.g. `job-1`).
    pub job_id: String,
}

/// The `bash_output` tool.
#[derive(Debug, Default, Clone, Copy)]
pub struct BashOutputTool;

impl Tool for BashOutputTool {
    type Args = BashOutputArgs;
    const NAME: &'static str = "bash_output";
    const TITLE: &'static str = "Background job output";

    fn description(&self, _env: &ToolEnv) -> Cow<'static, str> {
        DESCRIPTION.into()
    }

    fn enabled(&self, env: &ToolEnv) -> bool {
        env.exec().helper().is_some()
    }

    fn flags(&self, _args: Option<&BashOutputArgs>) -> ToolFlags {
        ToolFlags {
            idempotent: false,
            ..ToolFlags::READ_ONLY
        }
    }

    fn output_limits(&self, env: &ToolEnv) -> OutputLimits {
        OutputLimits {
            mode: TruncationMode::Tail,
            ..env.limits()
        }
    }

    async fn execute(
        &self,
        args: BashOutputArgs,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let job = find(&args.job_id, ctx)?;
        Ok(report(&job, &job.take()))
    }
}

/// The job of an id, or an error listing the jobs there are.
pub(crate) fn find(id: &str, ctx: &ToolContext) -> Result<std::sync::Arc<Job>, ToolError> {
    let jobs = ctx.session().state::<Jobs>();
    jobs.get(id.trim())
        .ok_or_else(|| ToolError::invalid(format!("no background job `{id}`; {}", jobs.describe())))
}

/// Output since the last look, then a status line.
pub(crate) fn report(job: &Job, snapshot: &Snapshot) -> ToolOutput {
    let mut text = String::new();
    if snapshot.dropped > 0 {
        let _ = writeln!(text, "[... {} earlier bytes not shown]", snapshot.dropped);
    }
    text.push_str(&snapshot.output);
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    if snapshot.output.is_empty() && snapshot.dropped == 0 {
        text.push_str("(no new output)\n");
    }
    let seconds = snapshot.elapsed.as_secs_f64();
    let (status, code) = match snapshot.status {
        JobStatus::Running => (
            format!("{} is running ({seconds:.0} s so far)", job.id),
            None,
        ),
        JobStatus::Exited(code) => (
            format!("{} exited with code {code} after {seconds:.1} s", job.id),
            Some(code),
        ),
        JobStatus::Killed => (format!("{} was stopped after {seconds:.1} s", job.id), None),
    };
    let log = snapshot
        .log
        .as_ref()
        .map(|f| format!("; full log: {}", f.path.display()))
        .unwrap_or_default();
    let sandbox = if job.sandboxed {
        "sandboxed"
    } else {
        "not sandboxed"
    };
    let _ = write!(text, "[{status} · {sandbox}{log}]");
    let state = match snapshot.status {
        JobStatus::Running => "running",
        JobStatus::Exited(_) => "exited",
        JobStatus::Killed => "killed",
    };
    ToolOutput::text(text)
        .with_title(job.command.clone())
        .with_structured(json!({
            "job_id": job.id,
            "status": state,
            "exit_code": code,
            "elapsed_ms": u64::try_from(snapshot.elapsed.as_millis()).unwrap_or(u64::MAX),
        }))
}
