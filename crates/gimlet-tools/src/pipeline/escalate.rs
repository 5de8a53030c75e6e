//! Part of stage 5: a command the sandbox stopped, run again outside it, or not.
//!
//! The one place where "sandboxed run -> the sandbox denied something -> ask -> run again
//! unsandboxed" happens, for every tool that runs commands (`bash`, the plugin tools). The tool
//! returns [`ToolError::SandboxDenied`] and never asks; here:
//! 1. an earlier "allow outside the sandbox for this session" for the same command pattern
//!    ([`OutsideGrants`]) runs it again at once;
//! 2. else the policy judges the unsandboxed run ([`crate::Policy::judge_escalation`]): a deny
//!    rule refuses, an allow rule runs it, the trusted mode refuses (it never asks, so the
//!    roots hold), and otherwise the user is asked, with the reason and the end of the output;
//! 3. a yes runs it again (the result says so); "for this session" also remembers the
//!    pattern; a no, or nobody to ask, shows the sandboxed result with why it was not re-run.

use crate::context::ToolContext;
use crate::error::{SandboxDenied, ToolError};
use crate::permission::{AskReason, OutsideGrants, Permission};
use crate::vocab::{Content, ToolFlags, ToolOutput};

use super::permission::{Yes, apply, ask_user, resolve};

/// Decides what becomes of a command the sandbox stopped (see the module docs).
pub(super) async fn escalate(
    tool: &str,
    flags: ToolFlags,
    denied: SandboxDenied,
    ctx: &ToolContext,
) -> Result<ToolOutput, ToolError> {
    let SandboxDenied {
        command,
        access,
        cause,
        last_lines,
        output,
        rerun,
    } = denied;
    let grants = ctx.session().state::<OutsideGrants>();
    let approved = if grants.covers(tool, &access) {
        ctx.record_decision(true, "session grant (outside the sandbox)");
        Ok(())
    } else {
        match apply(ctx.policy().judge_escalation(tool, flags, &access), ctx) {
            Permission::Ask(mut request) => {
                request.reason = AskReason::Unsandboxed;
                request.summary = format!("run `{command}` again, outside the sandbox");
                request.detail = Some(format!(
                    "It failed inside the sandbox ({cause}). Its last output:\n{last_lines}"
                ));
                match ask_user(&request, ctx).await {
                    Ok(Yes::ForTheSession) => {
                        if let Some(pattern) = request.session_pattern.clone() {
                            grants.add(tool, pattern);
                        }
                        Ok(())
                    }
                    Ok(Yes::Once) => Ok(()),
                    Err(err) => Err(err),
                }
            }
            other => resolve(other, ctx).await,
        }
    };
    match approved {
        Ok(()) => {
            let mut again = rerun().await?;
            again.content.push(Content::Text(format!(
                "[It first ran in the sandbox and failed ({cause}); it ran again outside the \
                 sandbox, as approved.]"
            )));
            Ok(again)
        }
        Err(err @ (ToolError::Cancelled | ToolError::InputRequired(_))) => Err(err),
        Err(refused) => {
            let mut output = output;
            output.content.push(Content::Text(format!(
                "[This looks blocked by the sandbox ({cause}). It was not run again outside \
                 the sandbox: {refused}]"
            )));
            Ok(output)
        }
    }
}
