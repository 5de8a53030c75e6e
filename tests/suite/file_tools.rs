use serde_json::json;

use crate::common::{Gimlet, err_text, ok_text};

#[tokio::test]
async fn read_edit_undo_through_mcp() {
    let gimlet = Gimlet::start().await;
    let path = gimlet.write(
        "src/main.rs",
        "fn main() {\r\n    println!(\"hi\");\r\n}\r\n",
    );
    let text = err_text(
        &gimlet
            .call(
                "edit",
                json!({"path": "src/main.rs", "old_string": "hi", "new_string": "hello"}),
            )
            .await,
    );
    assert!(text.contains("has not been read in this session"), "{text}");
    ok_text(&gimlet.call("read", json!({"path": "src/main.rs"})).await);
    let result = gimlet
        .call(
            "edit",
            json!({"path": "src/main.rs", "old_string": "\"hi\"", "new_string": "\"hello\""}),
        )
        .await;
    let text = ok_text(&result);
    assert!(text.contains("+     2      println!(\"hello\");"), "{text}");
    let structured = result.structured_content.unwrap();
    assert_eq!(structured["match_levels"], json!(["exact"]));
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "fn main() {\r\n    println!(\"hello\");\r\n}\r\n"
    );
    ok_text(&gimlet.call("undo", json!({})).await);
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "fn main() {\r\n    println!(\"hi\");\r\n}\r\n"
    );
    let add_notes = "*** Begin Patch\n*** Add File: notes.md\n+hello\n*** End Patch\n";
    let text = ok_text(
        &gimlet
            .call("apply_patch", json!({"patch": add_notes}))
            .await,
    );
    assert!(text.contains("A notes.md"), "{text}");
    gimlet.stop().await;
}

#[tokio::test]
async fn grep_and_glob_through_mcp() {
    let gimlet = Gimlet::start().await;
    gimlet.write("src/a.rs", "fn alpha() {}\n");
    gimlet.write("src/b.rs", "fn beta() {}\n");
    gimlet.write("notes.txt", "alpha\n");
    let result = gimlet
        .call(
            "grep",
            json!({"pattern": "fn \\w+", "output_mode": "content", "type": "rust"}),
        )
        .await;
    let text = ok_text(&result);
    assert!(
        text.contains("src/a.rs:1:fn alpha() {}") && text.contains("src/b.rs:1:fn beta() {}"),
        "{text}"
    );
    let structured = result.structured_content.unwrap();
    assert_eq!(structured["mode"], "content");
    assert_eq!(structured["matches"].as_array().unwrap().len(), 2);
    let text = ok_text(
        &gimlet
            .call("grep", json!({"pattern": "nothing-like-this"}))
            .await,
    );
    assert!(text.starts_with("No matches"), "{text}");
    let text = err_text(&gimlet.call("grep", json!({"pattern": "a(b"})).await);
    assert!(text.contains("not a valid regex"), "{text}");
    let result = gimlet.call("glob", json!({"pattern": "**/*.rs"})).await;
    assert_eq!(result.structured_content.unwrap()["total"], 2);
    gimlet.stop().await;
}
