//! `ask_user` through elicitation on both protocol revisions, and the per-session plan.

#![expect(clippy::unwrap_used, reason = "test helpers fail loudly")]

use std::time::Duration;

use rmcp::model::{CallToolRequestParams, ElicitRequestParams, ElicitResult, ElicitationAction};
use serde_json::{Value, json};

use crate::common::{Gimlet, TestClient, err_text, ok_text};

fn form(request: &ElicitRequestParams) -> (String, Value) {
    match request {
        ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } => (
            message.clone(),
            serde_json::to_value(requested_schema).unwrap(),
        ),
        _ => (String::new(), Value::Null),
    }
}

#[tokio::test]
async fn ask_user_shows_the_choices_and_returns_the_answer() {
    let client = TestClient::accepting(json!({"answer": "postgres"}));
    let gimlet = Gimlet::start_with(client, &[]).await;
    let result = gimlet
        .call(
            "ask_user",
            json!({"question": "Which database?", "options": ["sqlite", "postgres"]}),
        )
        .await;
    assert_eq!(ok_text(&result), "The user answered: postgres");
    assert_eq!(
        result.structured_content.unwrap(),
        json!({"answer": "postgres", "source": "user", "text": "The user answered: postgres"})
    );
    let asked = gimlet.handler.elicitations.lock().unwrap().clone();
    let (message, schema) = form(&asked[0]);
    assert_eq!(message, "Which database?");
    assert_eq!(
        schema["properties"]["answer"]["enum"],
        json!(["sqlite", "postgres"])
    );
    gimlet.stop().await;
}

#[tokio::test]
async fn ask_user_declined_or_unanswered() {
    let gimlet = Gimlet::start_with(
        TestClient::answering(|_| ElicitResult::new(ElicitationAction::Decline)),
        &[],
    )
    .await;
    let declined = gimlet
        .call("ask_user", json!({"question": "Proceed?"}))
        .await;
    assert!(ok_text(&declined).contains("declined"));
    gimlet.stop().await;

    // The user does not answer in time: the default applies, without it an error says so.
    let slow = TestClient {
        elicit_delay: Some(Duration::from_secs(5)),
        ..TestClient::accepting(json!({"answer": "late"}))
    };
    let gimlet = Gimlet::start_with(slow, &[]).await;
    let defaulted = gimlet
        .call(
            "ask_user",
            json!({"question": "Name?", "default": "main", "timeout_s": 1}),
        )
        .await;
    assert!(
        ok_text(&defaulted).contains("the default applies: main"),
        "{defaulted:?}"
    );
    let failed = gimlet
        .call("ask_user", json!({"question": "Name?", "timeout_s": 1}))
        .await;
    assert!(err_text(&failed).contains("did not answer within 1 s"));
    gimlet.stop().await;

    // A client without elicitation: a clear error, or the default.
    let gimlet = Gimlet::start().await;
    let refused = gimlet.call("ask_user", json!({"question": "Name?"})).await;
    assert!(err_text(&refused).contains("no elicitation"), "{refused:?}");
    let defaulted = gimlet
        .call("ask_user", json!({"question": "Name?", "default": "x"}))
        .await;
    assert!(ok_text(&defaulted).contains("the default applies: x"));
    gimlet.stop().await;
}

#[tokio::test]
async fn ask_user_on_2026_07_28_goes_through_an_input_required_round() {
    let root = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let handler = TestClient::accepting(json!({"answer": "yes"}));
    let client =
        crate::suite::permissions::discover_client(handler.clone(), root.path(), data.path()).await;
    let Value::Object(args) = json!({"question": "Ship it?", "options": ["yes", "no"]}) else {
        unreachable!()
    };
    let result = client
        .call_tool(CallToolRequestParams::new("ask_user").with_arguments(args))
        .await
        .unwrap();
    assert_eq!(ok_text(&result), "The user answered: yes");
    assert_eq!(handler.elicitations.lock().unwrap().len(), 1);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn the_plan_belongs_to_the_session() {
    let gimlet = Gimlet::start().await;
    let written = gimlet
        .call(
            "todo_write",
            json!({"todos": [
                {"content": "Read the code", "status": "completed"},
                {"content": "Fix the bug", "status": "in_progress", "priority": "high"}
            ]}),
        )
        .await;
    assert!(ok_text(&written).contains("[>] 2. Fix the bug (high)"));
    let read = gimlet.call("todo_read", json!({})).await;
    assert_eq!(ok_text(&read), ok_text(&written));
    let two = gimlet
        .call(
            "todo_write",
            json!({"todos": [
                {"content": "a", "status": "in_progress"},
                {"content": "b", "status": "in_progress"}
            ]}),
        )
        .await;
    assert!(err_text(&two).contains("at most one task"));
    gimlet.stop().await;

    let other = Gimlet::start().await;
    assert_eq!(
        ok_text(&other.call("todo_read", json!({})).await),
        "The todo list is empty."
    );
    other.stop().await;
}
