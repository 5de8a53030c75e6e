use crate::common::{Gimlet, TestClient};

#[cfg_attr(
    windows,
    ignore = "the descriptions name the system's shell; the snapshot is Linux's"
)]
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

/// Everything in a schema that some client's validator or function-declaration dialect
/// mishandles: `type` arrays, `$ref`/`$defs`, formats JSON Schema does not define, a
/// `required` name with no property.
fn portability_problems(path: &str, schema: &serde_json::Value, problems: &mut Vec<String>) {
    use serde_json::Value;
    match schema {
        Value::Object(map) => {
            if matches!(map.get("type"), Some(Value::Array(_))) {
                problems.push(format!("{path}: a type array"));
            }
            for key in ["$ref", "$defs", "definitions"] {
                if map.contains_key(key) {
                    problems.push(format!("{path}: {key}"));
                }
            }
            if let Some(Value::String(format)) = map.get("format") {
                let known = [
                    "date-time",
                    "date",
                    "time",
                    "duration",
                    "email",
                    "hostname",
                    "ipv4",
                    "ipv6",
                    "uri",
                    "uri-reference",
                    "uuid",
                    "regex",
                ];
                if !known.contains(&format.as_str()) {
                    problems.push(format!("{path}: format {format}"));
                }
            }
            if let (Some(Value::Array(required)), Some(Value::Object(properties))) =
                (map.get("required"), map.get("properties"))
            {
                for name in required {
                    if !name.as_str().is_some_and(|n| properties.contains_key(n)) {
                        problems.push(format!("{path}: required {name} has no property"));
                    }
                }
            }
            for (key, value) in map {
                portability_problems(&format!("{path}.{key}"), value, problems);
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                portability_problems(&format!("{path}[{i}]"), item, problems);
            }
        }
        _ => {}
    }
}

#[tokio::test]
async fn every_schema_is_portable_in_both_shapes() {
    // A plugin tool whose schema uses a type array: gimlet serves it portably too.
    let config = r#"
        [[plugins]]
        name = "echo_plugin"
        description = "Echoes."
        command = "cat"
        input_schema = { type = "object", properties = { note = { type = ["string", "null"] } } }
    "#;
    for args in [
        &["--sandbox", "off"][..],
        &["--sandbox", "off", "--structured-output"],
    ] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, config).unwrap();
        let mut all = vec!["--config", path.to_str().unwrap()];
        all.extend_from_slice(args);
        let gimlet = Gimlet::start_default_shape(TestClient::default(), &all).await;
        let tools = gimlet.client.list_all_tools().await.unwrap();
        assert!(tools.iter().any(|t| t.name == "echo_plugin"));
        let structured = args.contains(&"--structured-output");
        assert_eq!(
            tools.iter().any(|t| t.output_schema.is_some()),
            structured,
            "output schemas only with --structured-output"
        );
        let mut problems = Vec::new();
        for tool in &tools {
            let input = serde_json::Value::Object((*tool.input_schema).clone());
            portability_problems(&format!("{}.inputSchema", tool.name), &input, &mut problems);
            if let Some(output) = &tool.output_schema {
                let output = serde_json::Value::Object((**output).clone());
                portability_problems(
                    &format!("{}.outputSchema", tool.name),
                    &output,
                    &mut problems,
                );
            }
        }
        assert!(problems.is_empty(), "{args:?}: {problems:#?}");
        gimlet.stop().await;
    }
}
