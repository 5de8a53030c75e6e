//! `bash_kill`: stop a background job and everything it started.

use std::borrow::Cow;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

use crate::context::{ToolContext, ToolEnv};
use crate::error::ToolError;
use crate::jobs::{JobReport, find, report};
use crate::sandbox::KILL_GRACE_MS;
use crate::tool::Tool;
use crate::vocab::{JsonObject, ToolFlags, ToolOutput};

const DESCRIPTION: &str = include_str!("bash_kill.md");

/// Arguments of `bash_kill`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BashKillArgs {
    /// The job id `bash` returned (e.g. `job-1`).
    pub job_id: String,
}

/// The `bash_kill` tool.
#[derive(Debug, Default, Clone, Copy)]
pub struct BashKillTool;

impl Tool for BashKillTool {
    type Args = BashKillArgs;
    const NAME: &'static str = "bash_kill";
    const TITLE: &'static str = "Stop background job";

    fn description(&self, _env: &ToolEnv) -> Cow<'static, str> {
        DESCRIPTION.into()
    }

    fn enabled(&self, env: &ToolEnv) -> bool {
        env.exec().helper().is_some()
    }

    fn flags(&self, _args: Option<&BashKillArgs>) -> ToolFlags {
        ToolFlags {
            idempotent: true,
            ..ToolFlags::MUTATING
        }
    }

    fn output_schema(&self) -> Option<JsonObject> {
        Some(crate::schema::output_schema::<JobReport>())
    }

    async fn execute(
        &self,
        args: BashKillArgs,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let job = find(&args.job_id, ctx)?;
        let stopped = job.kill(Duration::from_millis(KILL_GRACE_MS + 3000)).await;
        if !stopped {
            return Err(ToolError::failed(format!(
                "{} did not stop in time; it may still be running",
                job.id
            )));
        }
        Ok(report(&job, &job.take()))
    }
}
