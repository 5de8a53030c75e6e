//! Stage 3: the permission decision, and asking when the policy says so.

use serde_json::Value;

use crate::context::ToolContext;
use crate::error::ToolError;
use crate::permission::{Access, Approval, AskReason, AskRequest, Judgement, Permission};
use crate::registry::{DynTool, ErasedArgs};

/// Judges the call and, on `Ask`, asks (with the tool's detail). `Ok` means the call may run.
pub(super) async fn check(
    tool: &dyn DynTool,
    args: &ErasedArgs,
    ctx: &ToolContext,
) -> Result<(), ToolError> {
    let accesses = tool.accesses(args, ctx).await?;
    let judgement = ctx.policy().judge(
        tool.name(),
        tool.flags(Some(args)),
        &accesses,
        ctx.session().grants(),
    );
    let permission = match apply(judgement, ctx) {
        Permission::Ask(mut request) => {
            request.detail = tool.ask_detail(args, ctx).await?;
            Permission::Ask(request)
        }
        other => other,
    };
    resolve(permission, ctx).await
}

/// Applies what the policy decided to the call: who decided (when it did), and the paths
/// outside the roots it allowed, which this call may now open. The verdict is left to
/// [`resolve`].
pub(super) fn apply(judgement: Judgement, ctx: &ToolContext) -> Permission {
    let Judgement {
        permission,
        by,
        outside,
    } = judgement;
    if let Some(by) = by {
        ctx.record_decision(matches!(permission, Permission::Allow), by);
    }
    for path in outside {
        ctx.approve_path(&path);
    }
    permission
}

/// Turns a verdict into go / no-go, asking the user for an `Ask`.
pub(super) async fn resolve(permission: Permission, ctx: &ToolContext) -> Result<(), ToolError> {
    match permission {
        Permission::Allow => Ok(()),
        Permission::Deny(why) => Err(ToolError::PermissionDenied(why)),
        Permission::Ask(request) => ask(&request, ctx).await,
    }
}

async fn ask(request: &AskRequest, ctx: &ToolContext) -> Result<(), ToolError> {
    if ask_user(request, ctx).await? == Yes::ForTheSession
        && let Some(pattern) = &request.session_pattern
    {
        ctx.session().grants().add(&request.tool, pattern.clone());
    }
    approve_paths(request, ctx);
    Ok(())
}

/// A yes, and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Yes {
    /// This call.
    Once,
    /// This call and later ones the request's session pattern covers.
    ForTheSession,
}

/// Puts the question to the user and records who decided. `Ok` is a yes (the caller keeps
/// a session grant where it belongs); any other answer is the error the call ends with.
pub(super) async fn ask_user(request: &AskRequest, ctx: &ToolContext) -> Result<Yes, ToolError> {
    let approval = tokio::select! {
        biased;
        () = ctx.cancellation().cancelled() => return Err(ToolError::Cancelled),
        approval = ctx.asker().approve(request, ctx) => approval,
    };
    let by = match &approval {
        Approval::Once => Some((true, "user (once)")),
        Approval::Session => Some((true, "user (for the session)")),
        Approval::Deny { .. } => Some((false, "user")),
        Approval::Unavailable(_) => Some((false, "no one to ask")),
        Approval::Outdated(_) => Some((false, "user (outdated answer)")),
        Approval::Pending(_) => None,
    };
    if let Some((allowed, by)) = by {
        ctx.record_decision(allowed, by);
    }
    match approval {
        Approval::Session if request.session_pattern.is_some() => Ok(Yes::ForTheSession),
        // "For the session" where none was offered counts once.
        Approval::Once | Approval::Session => Ok(Yes::Once),
        Approval::Deny { reason } => Err(ToolError::PermissionDenied(match reason {
            Some(reason) if !reason.trim().is_empty() => {
                format!("the user declined: {}", reason.trim())
            }
            _ => String::from(
                "the user declined this call; do not retry it as is, ask the user what to do instead",
            ),
        })),
        Approval::Unavailable(why) => Err(ToolError::PermissionDenied(why)),
        Approval::Pending(pending) => Err(ToolError::InputRequired(pending)),
        Approval::Outdated(why) => Err(ToolError::Stale(why)),
    }
}

/// After a yes, paths outside the roots become openable for this call only.
fn approve_paths(request: &AskRequest, ctx: &ToolContext) {
    for access in &request.accesses {
        if let Access::Read(p) | Access::Write(p) = access {
            ctx.approve_path(&p.path);
        }
    }
}

/// A `before` hook asked for confirmation: ask the user with the hook's reason.
pub(super) async fn confirm_for_hook(
    tool: &str,
    input: &Value,
    reason: String,
    ctx: &ToolContext,
) -> Result<(), ToolError> {
    let request = AskRequest {
        tool: tool.to_owned(),
        summary: format!("run with {input}"),
        detail: Some(reason),
        reason: AskReason::Hook,
        session_pattern: None,
        accesses: Vec::new(),
    };
    ask(&request, ctx).await
}
