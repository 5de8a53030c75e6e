use crate::common::{Gimlet, TestClient};

#[tokio::test]
async fn tools_list_matches_the_snapshot() {
    // The bash description depends on the sandbox; `off` makes it the same on every kernel.
    let gimlet = Gimlet::start_default_shape(TestClient::default(), &["--sandbox", "off"]).await;
    let tools = gimlet.client.list_all_tools().await.unwrap();
    for tool in &tools {
        let schema = serde_json::to_string(&tool.input_schema).unwrap();
        assert!(!schema.contains("$ref"), "{}: {schema}", tool.name);
        assert_eq!(
            tool.input_schema.get("type").and_then(|t| t.as_str()),
            Some("object")
        );
    }
    insta::assert_json_snapshot!("tools_list", tools);
    gimlet.stop().await;
}
