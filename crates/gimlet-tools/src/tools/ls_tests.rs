use insta::assert_snapshot;
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::ToolError;
use crate::testutil::TestWorkspace;

fn sample() -> TestWorkspace {
    let ws = TestWorkspace::new();
    ws.write("Cargo.toml", "");
    ws.write("src/main.rs", "");
    ws.write("src/tools/read.rs", "");
    ws.write("src/tools/ls.rs", "");
    ws.write(".gitignore", "target/\n*.log\n!keep.log\n");
    ws.write("target/debug/app", "");
    ws.write("debug.log", "");
    ws.write("keep.log", "");
    ws.write(".env", "");
    ws.write(".git/HEAD", "");
    ws.write("docs/.ignore", "draft.md\n");
    ws.write("docs/draft.md", "");
    ws.write("docs/guide.md", "");
    ws.symlink("src", "source");
    ws
}

#[tokio::test]
async fn lists_a_sorted_tree_honouring_ignore_files() {
    let ws = sample();
    assert_snapshot!(ws.text("ls", json!({})).await, @r"
    ./
      .env
      .gitignore
      Cargo.toml
      docs/
        .ignore
        guide.md
      keep.log
      source@
      src/
        main.rs
        tools/
          ls.rs
          read.rs
    ");
}

#[tokio::test]
async fn ignore_patterns_and_subdirectories() {
    let ws = sample();
    let text = ws
        .text("ls", json!({"path": "src", "ignore": ["tools/", "*.toml"]}))
        .await;
    assert_snapshot!(text, @r"
    src/
      main.rs
    ");
    // Ignore files above the listed directory still apply.
    ws.write("src/app.log", "");
    let text = ws.text("ls", json!({"path": "src"})).await;
    assert!(!text.contains("app.log"), "{text}");
}

#[tokio::test]
async fn the_limit_fills_top_levels_first_and_says_where_it_stopped() {
    let ws = sample();
    let text = ws.text("ls", json!({"limit": 8})).await;
    assert_snapshot!(text, @r"
    ./
      .env
      .gitignore
      Cargo.toml
      docs/ ... (1 more entry)
        .ignore
      keep.log
      source@
      src/ ...

    [Listing stopped at 8 entries; directories marked `...` were not listed in full. Call `ls` on a subdirectory, or raise `limit`.]
    ");
}

#[tokio::test]
async fn errors_are_clear() {
    let ws = sample();
    assert_eq!(
        ws.error("ls", json!({"path": "Cargo.toml"})).await,
        "`Cargo.toml` is a file, not a directory; use `read` to read it"
    );
    assert_eq!(
        ws.error("ls", json!({"path": "nope"})).await,
        "`nope` does not exist"
    );
    assert_eq!(
        ws.error("ls", json!({"path": "SRC"})).await,
        "`SRC` does not exist; did you mean `src`?"
    );
    assert!(
        ws.error("ls", json!({"limit": 0}))
            .await
            .contains("at least 1")
    );
    let empty = ws.mkdir("empty");
    assert!(empty.exists());
    assert_eq!(
        ws.text("ls", json!({"path": "empty"})).await,
        "empty/\n  (empty directory)\n"
    );
}

#[tokio::test]
async fn a_directory_whose_entries_are_all_ignored_is_not_called_empty() {
    let ws = sample();
    assert_eq!(
        ws.text("ls", json!({"path": "src/tools", "ignore": ["*.rs"]}))
            .await,
        "src/tools/\n  (nothing to show: 2 entries ignored by .gitignore, .ignore or the \
         `ignore` patterns)\n"
    );
    ws.write("logs/debug.log", "");
    assert_eq!(
        ws.text("ls", json!({"path": "logs"})).await,
        "logs/\n  (nothing to show: 1 entry ignored by .gitignore, .ignore or the `ignore` \
         patterns)\n"
    );
    let text = ws.text("ls", json!({"limit": 1})).await;
    assert!(text.contains("[Listing stopped at 1 entry;"), "{text}");
}

#[tokio::test]
async fn listing_never_leaves_the_roots() {
    let ws = sample();
    std::fs::write(ws.outside().join("secret-name.txt"), "").unwrap();
    ws.symlink(ws.outside(), "escape");
    let text = ws.text("ls", json!({})).await;
    assert!(
        text.contains("escape@") && !text.contains("secret-name"),
        "{text}"
    );
    let err = ws.call("ls", json!({"path": "escape"})).await.unwrap_err();
    assert!(matches!(err, ToolError::PermissionDenied(_)), "{err}");
    let err = ws.call("ls", json!({"path": ".."})).await.unwrap_err();
    assert!(matches!(err, ToolError::PermissionDenied(_)), "{err}");
}
