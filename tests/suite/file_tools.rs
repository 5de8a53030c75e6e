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

#[tokio::test]
async fn parallel_edits_of_one_file_all_land() {
    let gimlet = Gimlet::start().await;
    let lines: String = (0..8).map(|i| format!("slot {i}\n")).collect();
    gimlet.write("shared.txt", &lines);
    ok_text(&gimlet.call("read", json!({"path": "shared.txt"})).await);
    // Eight edits sent at once, each replacing its own line, plus reads in between.
    let edits = (0..8).map(|i| {
        gimlet.call(
            "edit",
            json!({"path": "shared.txt", "old_string": format!("slot {i}\n"), "new_string": format!("done {i}\n")}),
        )
    });
    let reads = (0..8).map(|_| gimlet.call("grep", json!({"pattern": "slot|done"})));
    let (edits, reads) = tokio::join!(
        futures_util::future::join_all(edits),
        futures_util::future::join_all(reads)
    );
    for result in &edits {
        ok_text(result);
    }
    for result in &reads {
        ok_text(result);
    }
    let text = std::fs::read_to_string(gimlet.root().join("shared.txt")).unwrap();
    let expected: String = (0..8).map(|i| format!("done {i}\n")).collect();
    assert_eq!(text, expected, "no edit lost another");
    gimlet.stop().await;
}
