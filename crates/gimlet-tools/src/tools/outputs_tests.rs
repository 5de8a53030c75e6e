//! The structured results of the built-in tools against the output schemas they advertise.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::context::ask::{Answer, ScriptedAsker};
use crate::registry::ToolRegistry;
use crate::testutil::TestWorkspace;
use crate::vocab::JsonObject;

/// Calls that return structured results, with the tool's name: every shape and variant the
/// tools without a process or the network produce (bash, its jobs and the web tools are
/// checked end to end in the integration suite).
async fn structured_results() -> Vec<(String, Value)> {
    let ws = TestWorkspace::new();
    ws.write("src/lib.rs", "pub fn alpha() {}\npub fn beta() {}\n");
    ws.write("src/main.rs", "fn main() { alpha(); }\n");
    ws.write("notes.txt", "one\ntwo\n");
    ws.write("gone.txt", "bye\n");
    ws.write("old.txt", "moving\n");
    let mut calls: Vec<(&str, Value)> = vec![
        ("write", json!({"path": "new.txt", "content": "hello\n"})),
        (
            "write",
            json!({"path": "new.txt", "content": "hello again\n"}),
        ),
        (
            "edit",
            json!({"path": "src/lib.rs", "old_string": "beta", "new_string": "gamma"}),
        ),
        (
            "edit",
            json!({"path": "src/lib.rs", "old_string": "pub fn  alpha() {}", "new_string": "pub fn delta() {}"}),
        ),
        (
            "edit",
            json!({"path": "created.txt", "old_string": "", "new_string": "fresh\n"}),
        ),
        (
            "multi_edit",
            json!({"path": "notes.txt", "edits": [
                {"old_string": "one", "new_string": "1"},
                {"old_string": "two", "new_string": "2"},
            ]}),
        ),
        ("glob", json!({"pattern": "**/*.rs"})),
        ("glob", json!({"pattern": "**/*", "limit": 1})),
        ("grep", json!({"pattern": "fn"})),
        ("grep", json!({"pattern": "fn", "head_limit": 1})),
        ("grep", json!({"pattern": "fn", "output_mode": "content"})),
        (
            "grep",
            json!({"pattern": "fn", "output_mode": "content", "head_limit": 0}),
        ),
        ("grep", json!({"pattern": "fn", "output_mode": "count"})),
        ("grep", json!({"pattern": "nothing_matches_this"})),
        (
            "todo_write",
            json!({"todos": [
                {"content": "Plan", "status": "completed", "priority": "high"},
                {"content": "Build", "status": "in_progress"},
                {"content": "Test", "status": "pending", "priority": "low"},
            ]}),
        ),
        ("todo_read", json!({})),
    ];
    for path in ["src/lib.rs", "notes.txt", "gone.txt", "old.txt"] {
        ws.text("read", json!({"path": path})).await;
    }
    let patch = "*** Begin Patch\n\
                 *** Add File: added.txt\n+added\n\
                 *** Update File: notes.txt\n-1\n+one again\n\
                 *** Delete File: gone.txt\n\
                 *** Update File: old.txt\n*** Move to: moved.txt\n-moving\n+moved\n\
                 *** End Patch\n";
    calls.push(("apply_patch", json!({ "patch": patch })));
    let mut results = Vec::new();
    for (tool, args) in calls {
        let output = ws
            .call(tool, args.clone())
            .await
            .unwrap_or_else(|e| panic!("{tool} {args}: {e}"));
        let structured = output
            .structured
            .unwrap_or_else(|| panic!("{tool} {args}: no structured result"));
        results.push((tool.to_owned(), structured));
    }
    for (answer, args) in [
        (
            Answer::Answered(String::from("blue")),
            json!({"question": "Colour?", "options": ["red", "blue"]}),
        ),
        (Answer::Declined, json!({"question": "Colour?"})),
        (Answer::Cancelled, json!({"question": "Colour?"})),
        (
            Answer::TimedOut,
            json!({"question": "Colour?", "default": "red", "timeout_s": 1}),
        ),
    ] {
        let asker = Arc::new(ScriptedAsker::default().with_answers([answer]));
        let output = ws
            .call_with(&ws.ctx_with(asker), "ask_user", args)
            .await
            .unwrap();
        results.push((String::from("ask_user"), output.structured.unwrap()));
    }
    results
}

/// Every built-in tool with an output schema, and the schema.
fn output_schemas() -> Vec<(String, JsonObject)> {
    ToolRegistry::builtin()
        .tools()
        .filter_map(|tool| Some((tool.name().to_owned(), tool.output_schema()?)))
        .collect()
}

/// `$ref`s, `$defs` and Rust number formats anywhere in a schema.
fn leftovers(path: &str, value: &Value, found: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for key in ["$ref", "$defs", "definitions", "$schema", "title"] {
                if map.contains_key(key) && !path.ends_with(".properties") {
                    found.push(format!("{path}: {key}"));
                }
            }
            if let Some(Value::String(format)) = map.get("format") {
                found.push(format!("{path}: format {format}"));
            }
            for (key, inner) in map {
                leftovers(&format!("{path}.{key}"), inner, found);
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                leftovers(&format!("{path}[{i}]"), item, found);
            }
        }
        _ => {}
    }
}

#[test]
fn output_schemas_are_inlined_object_schemas() {
    let schemas = output_schemas();
    let names: Vec<&str> = schemas.iter().map(|(name, _)| name.as_str()).collect();
    for expected in [
        "apply_patch",
        "ask_user",
        "bash",
        "bash_kill",
        "bash_output",
        "edit",
        "glob",
        "grep",
        "multi_edit",
        "todo_read",
        "todo_write",
        "web_fetch",
        "web_search",
        "write",
    ] {
        assert!(names.contains(&expected), "{expected} has no output schema");
    }
    for (name, schema) in schemas {
        assert_eq!(schema.get("type"), Some(&json!("object")), "{name}");
        let Some(Value::Object(properties)) = schema.get("properties") else {
            panic!("{name}: no properties");
        };
        let Some(Value::Array(required)) = schema.get("required") else {
            panic!("{name}: no required");
        };
        assert!(!required.is_empty(), "{name}");
        for key in required {
            let key = key.as_str().unwrap();
            assert!(
                properties.contains_key(key),
                "{name}: {key} required, not a property"
            );
        }
        let mut found = Vec::new();
        leftovers(&name, &Value::Object(schema.clone()), &mut found);
        assert!(found.is_empty(), "{found:?}");
        assert!(
            jsonschema::meta::is_valid(&Value::Object(schema.clone())),
            "{name}: not a valid JSON schema"
        );
    }
}

/// The keys of `value` (an object, at any depth) that `schema` does not declare.
fn undeclared(path: &str, value: &Value, schema: &Value, found: &mut Vec<String>) {
    match value {
        Value::Object(fields) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            for (key, inner) in fields {
                match properties.and_then(|p| p.get(key)) {
                    Some(declared) => undeclared(&format!("{path}.{key}"), inner, declared, found),
                    None => found.push(format!("{path}.{key}")),
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    undeclared(&format!("{path}[{i}]"), item, item_schema, found);
                }
            }
        }
        _ => {}
    }
}

#[tokio::test]
async fn structured_results_match_their_output_schemas() {
    let schemas: std::collections::HashMap<String, JsonObject> =
        output_schemas().into_iter().collect();
    for (tool, structured) in structured_results().await {
        let schema = Value::Object(schemas[&tool].clone());
        let validator = jsonschema::validator_for(&schema).unwrap();
        let errors: Vec<String> = validator
            .iter_errors(&structured)
            .map(|e| e.to_string())
            .collect();
        assert!(errors.is_empty(), "{tool}: {errors:?}\n{structured:#}");
        let mut found = Vec::new();
        undeclared(&tool, &structured, &schema, &mut found);
        assert!(found.is_empty(), "undeclared: {found:?}\n{structured:#}");
    }
}
