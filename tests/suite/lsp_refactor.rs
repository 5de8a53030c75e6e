//! `lsp` refactors applied as one change (issue 35, item 4): `rename` and `code_actions` with a
//! scripted server (`fake_refactor_server.py`, which renames a file as part of a rename and
//! applies a command's edit through `workspace/applyEdit`) and with basedpyright.

#![expect(clippy::unwrap_used, reason = "test helpers fail loudly")]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;

use super::lsp::{CONFIG, path_with, skip, start, which};
use crate::common::{Gimlet, err_text, eventually, ok_text};

/// Files the scripted rename goes through (one more is renamed as a file).
const FILES: usize = 210;

/// `gimlet serve` with the scripted refactoring server for `.fake` files, and `extra` config.
async fn start_fake(extra: &str) -> Option<(Gimlet, tempfile::TempDir)> {
    let Some(python) = which("python3") else {
        skip("no python3 for the scripted server");
        return None;
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("crates/gimlet-tools/fixtures/lsp/fake_refactor_server.py");
    let path = std::env::var_os("PATH").unwrap_or_default();
    // The server never reports diagnostics: the wait after a change is kept short.
    let config = format!(
        "[lsp]\nwait_ms = 300\nrequest_timeout_ms = 60000\n\
         [lsp.servers.fake]\ncommand = [{python:?}, {script:?}, \"fake.log\"]\n\
         extensions = [\"fake\"]\n{extra}",
        python = python.display().to_string(),
        script = script.display().to_string(),
    );
    Some(start(&path, "", &config).await)
}

/// The project: `FILES` modules using `total` (after non-ASCII text, some with CRLF endings,
/// one in a subfolder), and the module `total.fake` itself.
fn project(gimlet: &Gimlet) -> BTreeMap<PathBuf, Vec<u8>> {
    for i in 0..FILES {
        let ending = if i % 7 == 3 { "\r\n" } else { "\n" };
        let text = format!(
            "import total{ending}é😀 = total(1) + subtotal # total of {i}{ending}ü = \"total\"{ending}"
        );
        let name = if i == 5 {
            format!("sub/m{i}.fake")
        } else {
            format!("m{i}.fake")
        };
        gimlet.write(&name, text);
    }
    gimlet.write("total.fake", "def total(x):\n    return x\n");
    gimlet.write("notes.txt", "total stays here\n");
    tree(&gimlet.root())
}

/// Every file under `root` but the server's log, by path.
fn tree(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut dirs = vec![root.to_owned()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.file_name().is_some_and(|n| n != "fake.log") {
                files.insert(path.clone(), std::fs::read(&path).unwrap());
            }
        }
    }
    files
}

/// Asserts that `root` holds exactly `expected`, naming the files that differ.
fn assert_tree(root: &Path, expected: &BTreeMap<PathBuf, Vec<u8>>, what: &str) {
    let now = tree(root);
    let differ: Vec<String> = expected
        .keys()
        .chain(now.keys())
        .filter(|p| now.get(*p) != expected.get(*p))
        .map(|p| p.strip_prefix(root).unwrap_or(p).display().to_string())
        .collect();
    assert!(differ.is_empty(), "{what}; these differ: {differ:?}");
}

/// `text` with the word `from` replaced by `to` where it is a whole word.
fn replace_word(text: &str, from: &str, to: &str) -> String {
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find(from) {
        let before = rest[..at].chars().next_back().or(out.chars().next_back());
        let after = rest[at + from.len()..].chars().next();
        out.push_str(&rest[..at]);
        if before.is_some_and(is_word) || after.is_some_and(is_word) {
            out.push_str(from);
        } else {
            out.push_str(to);
        }
        rest = &rest[at + from.len()..];
    }
    out.push_str(rest);
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rename_across_hundreds_of_files_is_one_change_that_one_undo_reverts() {
    let Some((gimlet, _config)) = start_fake("").await else {
        return;
    };
    let before = project(&gimlet);
    // The agent read one of the files: its read state follows the change.
    ok_text(&gimlet.call("read", json!({"path": "m1.fake"})).await);
    let renamed = ok_text(
        &gimlet
            .call(
                "lsp",
                json!({"operation": "rename", "path": "m0.fake", "line": 2, "symbol": "total", "new_name": "sum_all"}),
            )
            .await,
    );
    assert!(
        renamed.starts_with(&format!(
            "Renamed to `sum_all`: {} files changed ({} edits), 1 renamed. One `undo` reverts it all.\n",
            FILES + 1,
            FILES * 4 + 1
        )),
        "{renamed}"
    );
    assert!(
        renamed.contains("\nR total.fake -> sum_all.fake (1 edit)\n"),
        "{renamed}"
    );
    assert!(renamed.contains("\nM sub/m5.fake (4 edits)\n"), "{renamed}");

    // Every file is as expected: 0 dropped edits.
    let after = tree(&gimlet.root());
    let mut expected = BTreeMap::new();
    for (path, bytes) in &before {
        let text = String::from_utf8(bytes.clone()).unwrap();
        let path = if path.file_name().unwrap() == "total.fake" {
            gimlet.root().join("sum_all.fake")
        } else {
            path.clone()
        };
        let new = if path.extension().unwrap() == "fake" {
            replace_word(&text, "total", "sum_all")
        } else {
            text
        };
        expected.insert(path, new.into_bytes());
    }
    assert_eq!(after.len(), expected.len());
    let wrong: Vec<_> = expected
        .iter()
        .filter(|(path, bytes)| after.get(*path) != Some(*bytes))
        .map(|(path, _)| path.display().to_string())
        .collect();
    assert!(wrong.is_empty(), "files not as expected: {wrong:?}");
    assert!(
        String::from_utf8(after[&gimlet.root().join("m3.fake")].clone())
            .unwrap()
            .contains("sum_all(1) + subtotal # sum_all of 3\r\n"),
        "CRLF kept"
    );

    // The session saw its own change: editing a file it read goes on without a new read.
    let edited = gimlet
        .call(
            "edit",
            json!({"path": "m1.fake", "old_string": "of 1", "new_string": "of one"}),
        )
        .await;
    ok_text(&edited);
    ok_text(&gimlet.call("undo", json!({})).await);

    // One undo restores every file byte for byte, the renamed one under its old name.
    let undone = ok_text(&gimlet.call("undo", json!({})).await);
    assert!(undone.contains("undoing `lsp`"), "{undone}");
    assert_tree(&gimlet.root(), &before, "one undo restores the whole tree");
    gimlet.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rename_touching_a_denied_path_changes_nothing_and_says_why() {
    let rule = "[[permissions.rules]]\naction = \"deny\"\ntool = \"*\"\npattern = \"m150.fake\"\n";
    let Some((gimlet, _config)) = start_fake(rule).await else {
        return;
    };
    let before = project(&gimlet);
    let refused = err_text(
        &gimlet
            .call(
                "lsp",
                json!({"operation": "rename", "path": "m0.fake", "line": 2, "symbol": "total", "new_name": "sum_all"}),
            )
            .await,
    );
    assert!(
        refused.contains("the server's edit changes `m150.fake`")
            && refused.contains("a permission rule denies")
            && refused.contains("Nothing was changed"),
        "{refused}"
    );
    assert_tree(&gimlet.root(), &before, "nothing changed");
    gimlet.stop().await;

    // So does a protected path (it would need the user's approval).
    let Some((gimlet, _config)) = start_fake("").await else {
        return;
    };
    project(&gimlet);
    gimlet.write(".githooks/total.fake", "total\n");
    let before = tree(&gimlet.root());
    let protected = err_text(
        &gimlet
            .call(
                "lsp",
                json!({"operation": "rename", "path": "m0.fake", "line": 2, "symbol": "total", "new_name": "sum_all"}),
            )
            .await,
    );
    assert!(
        protected.contains("`.githooks/total.fake`") && protected.contains("protected"),
        "{protected}"
    );
    assert_tree(&gimlet.root(), &before, "nothing changed");
    gimlet.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn read_only_mode_offers_the_questions_and_refuses_a_rename() {
    let Some((gimlet, _config)) = start_fake("[permissions]\nmode = \"read-only\"\n").await else {
        return;
    };
    let tools = gimlet.client.list_all_tools().await.unwrap();
    let lsp = tools.iter().find(|t| t.name == "lsp").expect("lsp offered");
    // What the annotations say holds for every input: some operations change files.
    let hints = lsp.annotations.as_ref().unwrap();
    assert_eq!(hints.read_only_hint, Some(false), "{hints:?}");
    assert_eq!(hints.destructive_hint, Some(true), "{hints:?}");
    let before = project(&gimlet);
    let refused = err_text(
        &gimlet
            .call(
                "lsp",
                json!({"operation": "rename", "path": "m0.fake", "line": 2, "symbol": "total", "new_name": "sum_all"}),
            )
            .await,
    );
    assert!(refused.contains("read-only mode"), "{refused}");
    assert_tree(&gimlet.root(), &before, "nothing changed");
    gimlet.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_edit_that_does_not_fit_the_text_changes_nothing() {
    let Some((gimlet, _config)) = start_fake("").await else {
        return;
    };
    gimlet.write("overlap.fake", "word one\n");
    gimlet.write("stale.fake", "word two\n");
    let before = tree(&gimlet.root());
    let rename =
        |path: &str| json!({"operation": "rename", "path": path, "line": 1, "new_name": "other"});
    let overlap = err_text(&gimlet.call("lsp", rename("overlap.fake")).await);
    assert!(
        overlap.contains("the server's edits to `overlap.fake` overlap (at lines 1 and 1)"),
        "{overlap}"
    );
    let stale = err_text(&gimlet.call("lsp", rename("stale.fake")).await);
    assert!(
        stale.contains("is for version 2 of it, but gimlet sent version 1"),
        "{stale}"
    );
    assert_tree(&gimlet.root(), &before, "nothing changed");
    gimlet.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_commands_edit_is_applied_only_while_gimlet_applies_its_action() {
    let Some((gimlet, _config)) = start_fake("").await else {
        return;
    };
    gimlet.write("a.fake", "one\ntwo\n");
    let listed = ok_text(
        &gimlet
            .call(
                "lsp",
                json!({"operation": "code_actions", "path": "a.fake", "line": 1}),
            )
            .await,
    );
    assert!(
        listed.starts_with("1 code action at a.fake:1:1:\n1. [command] Mark fixed\n"),
        "{listed}"
    );
    let applied = ok_text(
        &gimlet
            .call(
                "lsp",
                json!({"operation": "code_actions", "path": "a.fake", "line": 1, "action": 1}),
            )
            .await,
    );
    assert!(
        applied.starts_with(
            "Applied `Mark fixed`: 1 file changed (1 edit). One `undo` reverts it all.\nM a.fake (1 edit)\n"
        ),
        "{applied}"
    );
    let a = gimlet.root().join("a.fake");
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "one\ntwo\n# fixed\n");
    ok_text(&gimlet.call("undo", json!({})).await);
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "one\ntwo\n");

    // An edit the server sends on its own (here: when a file opens) is refused.
    ok_text(
        &gimlet
            .call("write", json!({"path": "rogue.fake", "content": "mine\n"}))
            .await,
    );
    let log = gimlet.root().join("fake.log");
    let refused = |text: &str| {
        text.lines().any(|l| {
            l.contains("\"id\": \"rogue\"")
                && l.contains("\"applied\": false")
                && l.contains("only while it applies a code action")
        })
    };
    assert!(
        eventually(Duration::from_secs(20), || refused(
            &std::fs::read_to_string(&log).unwrap_or_default()
        ))
        .await,
        "{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    assert_eq!(
        std::fs::read_to_string(gimlet.root().join("rogue.fake")).unwrap(),
        "mine\n"
    );
    gimlet.stop().await;
}

#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread")]
async fn basedpyright_renames_and_applies_a_quick_fix_each_undone_at_once() {
    let Some(path) = path_with("basedpyright-langserver") else {
        return;
    };
    let (gimlet, _config) = start(&path, "python", CONFIG).await;
    let before = tree(&gimlet.root());
    let app = gimlet.root().join("app.py");
    let shapes = gimlet.root().join("shapes.py");

    let renamed = ok_text(
        &gimlet
            .call(
                "lsp",
                json!({"operation": "rename", "path": "shapes.py", "symbol": "total_area", "new_name": "sum_areas"}),
            )
            .await,
    );
    assert!(
        renamed.starts_with("Renamed to `sum_areas`: 2 files changed (3 edits)."),
        "{renamed}"
    );
    let text = std::fs::read_to_string(&app).unwrap();
    assert!(
        text.starts_with("from shapes import Circle, sum_areas\n")
            && text.contains("print(sum_areas([small, big]))"),
        "{text}"
    );
    assert!(
        std::fs::read_to_string(&shapes)
            .unwrap()
            .contains("def sum_areas")
    );
    ok_text(&gimlet.call("undo", json!({})).await);
    assert_tree(&gimlet.root(), &before, "one undo reverts the rename");

    // A quick fix for the type error on line 7.
    let at = json!({"operation": "code_actions", "path": "app.py", "line": 7, "end_line": 7});
    let listed = ok_text(&gimlet.call("lsp", at.clone()).await);
    let number = listed
        .lines()
        .find(|l| l.contains("[quickfix]") && l.contains("reportAssignmentType"))
        .and_then(|l| l.split('.').next())
        .unwrap_or_else(|| panic!("no quick fix offered: {listed}"))
        .parse::<usize>()
        .unwrap();
    let mut apply = at;
    apply["action"] = json!(number);
    let applied = ok_text(&gimlet.call("lsp", apply).await);
    assert!(
        applied.contains("1 file changed") && applied.contains("M app.py"),
        "{applied}"
    );
    let fixed = std::fs::read_to_string(&app).unwrap();
    assert!(
        fixed.contains("legacy: int = \"not a number\"  # pyright: ignore[reportAssignmentType]")
            || fixed.contains("# pyright: ignore[reportAssignmentType]"),
        "{fixed}"
    );
    ok_text(&gimlet.call("undo", json!({})).await);
    assert_tree(&gimlet.root(), &before, "one undo reverts the quick fix");
    gimlet.stop().await;
}

#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread")]
async fn typescript_organizes_imports_and_one_undo_reverts_it() {
    let Some(path) = path_with("typescript-language-server") else {
        return;
    };
    let (gimlet, _config) = start(&path, "typescript", CONFIG).await;
    gimlet.write(
        "src/extra.ts",
        "export const zeta = 1;\nexport const alpha = 2;\n",
    );
    let original = "import { zeta, alpha } from \"./extra\";\nimport { add } from \"./math\";\n\nconsole.log(add(alpha, zeta));\n";
    let file = gimlet.write("src/tidy.ts", original);
    let at = json!({"operation": "code_actions", "path": "src/tidy.ts", "line": 1, "kind": "source.organizeImports"});
    let listed = ok_text(&gimlet.call("lsp", at.clone()).await);
    let number = listed
        .lines()
        .find(|l| l.contains("[source.organizeImports"))
        .and_then(|l| l.split('.').next())
        .unwrap_or_else(|| panic!("no organize imports offered: {listed}"))
        .parse::<usize>()
        .unwrap();
    let mut apply = at;
    apply["action"] = json!(number);
    let applied = ok_text(&gimlet.call("lsp", apply).await);
    assert!(
        applied.contains("1 file changed") && applied.contains("M src/tidy.ts"),
        "{applied}"
    );
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "import { alpha, zeta } from \"./extra\";\nimport { add } from \"./math\";\n\nconsole.log(add(alpha, zeta));\n"
    );
    ok_text(&gimlet.call("undo", json!({})).await);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), original);
    gimlet.stop().await;
}
