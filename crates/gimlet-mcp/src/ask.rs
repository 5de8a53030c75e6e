//! `ctx.ask` over MCP: permission requests and `ask_user` questions as elicitations.
//!
//! Session clients (protocol 2025-11-25 and older) get an `elicitation/create` request during
//! the call, bounded by a timeout and by the call's cancellation. A client that declared no
//! elicitation capability cannot be asked: the answer is "unavailable", with a message saying
//! which rule or flag would allow the call. Decline, cancel, timeout and a malformed answer all
//! mean no.

use std::sync::Arc;
use std::time::Duration;

use gimlet_tools::ask::{Answer, Asker, BoxFuture, Question};
use gimlet_tools::{Approval, AskRequest, ToolContext};
use rmcp::model::{
    CancelledNotificationParam, ClientResult, ElicitRequest, ElicitRequestParams, ElicitResult,
    ElicitationSchema, RequestId, ServerRequest,
};
use rmcp::service::{PeerRequestOptions, RequestContext};
use rmcp::{Peer, RoleServer};
use serde_json::Value;

use crate::form::{answer_of, approval_of, approval_schema, question_schema};
use crate::mrtr::{Round, Sealer};

/// Answers asks by eliciting from the MCP client of one request.
pub(crate) struct ElicitationAsker {
    rc: RequestContext<RoleServer>,
    timeout: Duration,
    /// On 2026-07-28: the answers the call brought back, and how to seal the next question.
    round: Option<(Arc<Sealer>, Round)>,
}

impl ElicitationAsker {
    /// An asker for one request; `round` when the client speaks 2026-07-28.
    pub(crate) fn new(
        rc: RequestContext<RoleServer>,
        timeout: Duration,
        round: Option<(Arc<Sealer>, Round)>,
    ) -> Self {
        Self { rc, timeout, round }
    }

    fn can_elicit(&self) -> bool {
        self.rc
            .client_capabilities()
            .is_some_and(|caps| caps.elicitation.is_some())
    }

    /// Sends one form elicitation; `None` on timeout, cancellation or transport failure.
    async fn elicit(
        &self,
        message: String,
        schema: Value,
        timeout: Duration,
    ) -> Option<ElicitResult> {
        let Value::Object(schema) = schema else {
            return None;
        };
        let schema = match ElicitationSchema::from_json_schema(schema) {
            Ok(schema) => schema,
            Err(err) => {
                tracing::error!("invalid elicitation schema: {err}");
                return None;
            }
        };
        let params = ElicitRequestParams::FormElicitationParams {
            meta: None,
            message,
            requested_schema: schema,
        };
        let request = ServerRequest::ElicitRequest(ElicitRequest::new(params));
        let options = PeerRequestOptions::with_timeout(timeout);
        let handle = match self
            .rc
            .peer
            .send_request_with_option(request, options)
            .await
        {
            Ok(handle) => handle,
            Err(err) => {
                tracing::info!("cannot send the question: {err}");
                return None;
            }
        };
        // Until the client answers, the question is open on its side: if the call ends first
        // (cancelled, or the future dropped), the client is told to close it.
        let mut open = OpenQuestion {
            peer: self.rc.peer.clone(),
            id: Some(handle.id.clone()),
        };
        let answer = tokio::select! {
            biased;
            () = self.rc.ct.cancelled() => return None,
            answer = handle.await_response() => answer,
        };
        // Answered, or ended by rmcp (which tells the client itself on a timeout).
        open.id = None;
        match answer {
            Ok(ClientResult::ElicitResult(answer)) => Some(answer),
            Ok(other) => {
                tracing::info!("the client answered a question with something else: {other:?}");
                None
            }
            Err(err) => {
                tracing::info!("elicitation ended without an answer: {err}");
                None
            }
        }
    }
}

/// A question sent to the client and not answered yet. Dropped while open (the call was
/// cancelled, ended or dropped), it sends `notifications/cancelled` for the question, so the
/// client's dialog does not stay up for a call that is gone.
struct OpenQuestion {
    peer: Peer<RoleServer>,
    id: Option<RequestId>,
}

impl Drop for OpenQuestion {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let peer = self.peer.clone();
        runtime.spawn(async move {
            let params = CancelledNotificationParam::new(
                Some(id),
                Some(String::from("the call that asked has ended")),
            );
            if let Err(err) = peer.notify_cancelled(params).await {
                tracing::debug!("cannot withdraw a question: {err}");
            }
        });
    }
}

impl Asker for ElicitationAsker {
    fn approve<'a>(
        &'a self,
        request: &'a AskRequest,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Approval> {
        Box::pin(async move {
            if !self.can_elicit() {
                let deny = gimlet_tools::DenyAsker {
                    why: "the MCP client offers no elicitation",
                };
                return deny.approve(request, ctx).await;
            }
            if let Some((sealer, round)) = &self.round {
                return round.approve(request, sealer, |answer| approval_of(answer, request));
            }
            let answer = self
                .elicit(request.message(), approval_schema(request), self.timeout)
                .await;
            approval_of(answer, request)
        })
    }

    fn question<'a>(
        &'a self,
        question: &'a Question,
        _ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Answer> {
        Box::pin(async move {
            if !self.can_elicit() {
                return Answer::Unavailable(String::from("the MCP client offers no elicitation"));
            }
            if let Some((sealer, round)) = &self.round {
                return round.question(question, sealer);
            }
            let answer = self
                .elicit(
                    gimlet_tools::permission::visible(&question.question).into_owned(),
                    question_schema(question),
                    question.timeout,
                )
                .await;
            answer_of(answer, question)
        })
    }
}

#[cfg(test)]
mod tests {
    use gimlet_tools::permission::AskReason;
    use pretty_assertions::assert_eq;
    use rmcp::model::ElicitationAction;
    use serde_json::json;

    use crate::form::DEFAULT_ASK_TIMEOUT;

    use super::*;

    fn request(session_pattern: Option<&str>) -> AskRequest {
        AskRequest {
            tool: "bash".into(),
            summary: "bash: run cargo test".into(),
            detail: None,
            reason: AskReason::Unsandboxed,
            session_pattern: session_pattern.map(ToOwned::to_owned),
            accesses: Vec::new(),
        }
    }

    #[expect(
        clippy::unnecessary_wraps,
        reason = "reads as the answer the asker receives"
    )]
    fn accept(content: Value) -> Option<ElicitResult> {
        Some(ElicitResult::new(ElicitationAction::Accept).with_content(content))
    }

    #[test]
    fn the_approval_form_is_a_valid_elicitation_schema() {
        for pattern in [Some("cargo test*"), None] {
            let Value::Object(schema) = approval_schema(&request(pattern)) else {
                panic!()
            };
            ElicitationSchema::from_json_schema(schema).unwrap();
        }
        let Value::Object(schema) = question_schema(&Question {
            question: "q".into(),
            options: vec!["a".into(), "b".into()],
            default: None,
            timeout: DEFAULT_ASK_TIMEOUT,
        }) else {
            panic!()
        };
        ElicitationSchema::from_json_schema(schema).unwrap();
    }

    #[test]
    fn answers_map_to_approvals_and_anything_odd_is_a_no() {
        let with_session = request(Some("cargo test*"));
        assert_eq!(
            approval_of(accept(json!({"decision": "allow_once"})), &with_session),
            Approval::Once
        );
        assert_eq!(
            approval_of(accept(json!({"decision": "allow_session"})), &with_session),
            Approval::Session
        );
        assert_eq!(
            approval_of(
                accept(json!({"decision": "deny", "reason": "use nextest"})),
                &with_session
            ),
            Approval::Deny {
                reason: Some("use nextest".into())
            }
        );
        // Session was not offered, so it cannot be chosen.
        assert!(matches!(
            approval_of(accept(json!({"decision": "allow_session"})), &request(None)),
            Approval::Deny { .. }
        ));
        assert!(matches!(
            approval_of(accept(json!({"decision": 1})), &with_session),
            Approval::Deny { .. }
        ));
        assert!(matches!(
            approval_of(accept(json!("yes")), &with_session),
            Approval::Deny { .. }
        ));
        assert_eq!(
            approval_of(
                Some(ElicitResult::new(ElicitationAction::Decline)),
                &with_session
            ),
            Approval::Deny { reason: None }
        );
        assert!(matches!(
            approval_of(
                Some(ElicitResult::new(ElicitationAction::Cancel)),
                &with_session
            ),
            Approval::Deny { .. }
        ));
        assert!(matches!(
            approval_of(None, &with_session),
            Approval::Deny { .. }
        ));
    }
}
