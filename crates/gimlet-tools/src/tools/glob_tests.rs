use std::time::{Duration, SystemTime};

use insta::assert_snapshot;
use serde_json::json;

use crate::testutil::TestWorkspace;

fn file(ws: &TestWorkspace, rel: &str, age: u64) {
    let path = ws.write(rel, "x");
    let when = SystemTime::now() - Duration::from_secs(age);
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(when)
        .unwrap();
}

fn sample() -> TestWorkspace {
    let ws = TestWorkspace::new();
    file(&ws, "Cargo.toml", 50);
    file(&ws, "src/main.rs", 10);
    file(&ws, "src/lib.rs", 20);
    file(&ws, "src/tools/read.rs", 5);
    file(&ws, "docs/guide.md", 30);
    file(&ws, "target/build.rs", 1);
    file(&ws, ".gitignore", 60);
    std::fs::write(ws.root().join(".gitignore"), "target/\n").unwrap();
    std::fs::create_dir_all(ws.root().join(".git")).unwrap();
    ws
}

#[tokio::test]
async fn recursive_patterns_newest_first() {
    let ws = sample();
    assert_snapshot!(ws.text("glob", json!({"pattern": "**/*.rs"})).await, @"
    src/tools/read.rs
    src/main.rs
    src/lib.rs
    [3 files matching `**/*.rs`, most recently modified first]
    ");
}

#[tokio::test]
async fn star_does_not_cross_directories_and_limits_say_so() {
    let ws = sample();
    assert_snapshot!(ws.text("glob", json!({"pattern": "*.toml"})).await, @"
    Cargo.toml
    [1 file matching `*.toml`, most recently modified first]
    ");
    assert_snapshot!(ws.text("glob", json!({"pattern": "src/**/*.{rs,md}", "limit": 2})).await, @"
    src/tools/read.rs
    src/main.rs
    [2 of 3 files matching `src/**/*.{rs,md}`, most recently modified first; raise `limit` or narrow the pattern to see more]
    ");
    assert_snapshot!(ws.text("glob", json!({"pattern": "*.py"})).await, @"No files match `*.py` in `.`.");
    assert_eq!(
        ws.error("glob", json!({"pattern": "*.rs", "path": "nowhere"}))
            .await,
        "`nowhere` does not exist"
    );
    assert_eq!(
        ws.error("glob", json!({"pattern": "*.rs", "path": "Cargo.toml"}))
            .await,
        "`Cargo.toml` is a file, not a directory; give `path` a directory to search in"
    );
    let text = ws
        .text("glob", json!({"pattern": "*.rs", "path": "src/tools"}))
        .await;
    assert!(text.starts_with("src/tools/read.rs\n"), "{text}");
}

#[tokio::test]
async fn bad_patterns_are_refused() {
    let ws = sample();
    assert!(
        ws.error("glob", json!({"pattern": "a[b"}))
            .await
            .contains("not a valid glob")
    );
    assert!(
        ws.error("glob", json!({"pattern": "/etc/*"}))
            .await
            .contains("is absolute")
    );
    assert!(
        ws.error("glob", json!({"pattern": ""}))
            .await
            .contains("is empty")
    );
    assert!(
        ws.error("glob", json!({"pattern": "*", "limit": 0}))
            .await
            .contains("at least 1")
    );
}

#[tokio::test]
async fn a_big_listing_keeps_every_path_in_the_text_and_the_first_thousand_in_structure() {
    let ws = TestWorkspace::new();
    for i in 0..1005 {
        ws.write(&format!("many/f{i:04}.txt"), "x");
    }
    let output = ws
        .call("glob", json!({"pattern": "**/*.txt", "limit": 5000}))
        .await
        .unwrap();
    let structured = output.structured.clone().unwrap();
    assert_eq!(structured["files"].as_array().unwrap().len(), 1000);
    assert_eq!(structured["total"], 1005);
    assert_eq!(structured["truncated"], false);
    let text = output.joined_text();
    assert_eq!(
        text.lines().filter(|l| l.starts_with("many/f")).count(),
        1005
    );
}
