//! `bash_output`: new output and status of a background job.

use std::borrow::Cow;

use schemars::JsonSchema;
use serde::Deserialize;

use crate::context::{ToolContext, ToolEnv};
use crate::error::ToolError;
use crate::jobs::{JobReport, find, report};
use crate::tool::Tool;
use crate::vocab::{JsonObject, OutputLimits, ToolFlags, ToolOutput, TruncationMode};

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

    fn output_schema(&self) -> Option<JsonObject> {
        Some(crate::schema::output_schema::<JobReport>())
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
