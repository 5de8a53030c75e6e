use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use pretty_assertions::assert_eq;
use serde_json::json;

use crate::testutil::TestWorkspace;

/// Every file below `dir`, relative path -> bytes (`.keep` markers left out).
fn tree(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(next) = stack.pop() {
        for entry in std::fs::read_dir(&next).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.file_name().is_some_and(|n| n != ".keep") {
                files.insert(
                    path.strip_prefix(dir).unwrap().to_owned(),
                    std::fs::read(&path).unwrap(),
                );
            }
        }
    }
    files
}

fn copy_tree(from: &Path, to: &Path) {
    for (rel, bytes) in tree(from) {
        let target = to.join(rel);
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::write(target, bytes).unwrap();
    }
}

/// Runs every folder of `fixtures/apply_patch` (`input/`, `patch.txt`, `expected/`, and for
/// refusals `error.txt`): the tree after the call must equal `expected/` byte for byte.
#[tokio::test]
async fn scenarios_on_disk() {
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/apply_patch");
    let mut scenarios: Vec<PathBuf> = std::fs::read_dir(&base)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    scenarios.sort();
    assert!(scenarios.len() >= 15);
    for scenario in scenarios {
        let name = scenario.file_name().unwrap().to_string_lossy().into_owned();
        let ws = TestWorkspace::new();
        copy_tree(&scenario.join("input"), &ws.root());
        let patch = std::fs::read_to_string(scenario.join("patch.txt")).unwrap();
        let result = ws.call("apply_patch", json!({ "patch": patch })).await;
        match (
            result,
            std::fs::read_to_string(scenario.join("error.txt")).ok(),
        ) {
            (Ok(_), None) => {}
            (Err(err), Some(needle)) => {
                assert!(
                    err.to_string().contains(needle.trim()),
                    "{name}: `{err}` lacks `{}`",
                    needle.trim()
                );
            }
            (Ok(out), Some(_)) => panic!("{name}: should have failed, got {}", out.joined_text()),
            (Err(err), None) => panic!("{name}: {err}"),
        }
        assert_eq!(tree(&ws.root()), tree(&scenario.join("expected")), "{name}");
    }
}

#[tokio::test]
async fn a_write_failing_midway_restores_the_files_already_written() {
    let ws = TestWorkspace::new();
    ws.write("a.txt", "alpha\n");
    let b = ws.write("b.txt", "beta\n");
    // A second link makes b.txt unwritable at commit time, after a.txt was written.
    std::fs::hard_link(&b, ws.root().join("b-link.txt")).unwrap();
    let patch = "*** Begin Patch\n*** Update File: a.txt\n-alpha\n+ALPHA\n*** Update File: b.txt\n-beta\n+BETA\n*** End Patch\n";
    let err = ws
        .call("apply_patch", json!({ "patch": patch }))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("hard links") && err.contains("Nothing was changed"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.root().join("a.txt")).unwrap(),
        "alpha\n"
    );
    assert_eq!(std::fs::read_to_string(&b).unwrap(), "beta\n");
    // The failed patch left nothing to undo.
    assert!(
        ws.call("undo", json!({}))
            .await
            .unwrap_err()
            .to_string()
            .contains("nothing to undo")
    );
}

#[tokio::test]
async fn patches_refuse_files_changed_since_read_and_report_each_file() {
    let ws = TestWorkspace::new();
    ws.write("a.txt", "one\n");
    ws.text("read", json!({"path": "a.txt"})).await;
    ws.write("a.txt", "one\ntwo\n");
    let patch = "*** Begin Patch\n*** Update File: a.txt\n-one\n+1\n*** End Patch\n";
    let err = ws
        .call("apply_patch", json!({ "patch": patch }))
        .await
        .unwrap_err();
    assert!(matches!(err, crate::ToolError::Stale(_)), "{err}");
    ws.text("read", json!({"path": "a.txt"})).await;
    let out = ws
        .call("apply_patch", json!({ "patch": patch }))
        .await
        .unwrap();
    insta::assert_snapshot!(out.joined_text(), @"
    Applied the patch: 1 file changed.
    M a.txt (+1 -1)

    --- a.txt
    @@ -1,2 +1,2 @@
    -     1  one
    +     1  1
          2  two
    ");
    assert_eq!(out.structured.unwrap()["files"][0]["action"], "updated");
}

#[tokio::test]
async fn malformed_patches_are_refused_before_anything_runs() {
    let ws = TestWorkspace::new();
    let err = ws
        .error(
            "apply_patch",
            json!({ "patch": "*** Begin Patch\n*** Add File: x\nno plus\n*** End Patch" }),
        )
        .await;
    assert!(
        err.starts_with("invalid patch, line 3: lines of an added file start with `+`"),
        "{err}"
    );
    assert!(!ws.root().join("x").exists());
}
