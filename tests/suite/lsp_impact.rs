//! The errors an edit causes in other files (issue 35, item 2): one signature change breaks
//! the callers in five other files, for basedpyright and typescript-language-server; the new
//! errors the batch checker finds in those files (its errors after the edit less those before)
//! must be in the edit's result, at least 90% of them, and nothing that was there before. The
//! edit that mends the signature again reports no new errors elsewhere; a rename breaks the
//! callers again (found by the old name); the cap counts the rest.
//! A server that is not installed skips.

#![expect(clippy::unwrap_used, reason = "test helpers fail loudly")]

use std::path::Path;

use serde_json::{Value, json};

use super::lsp::{CONFIG, edit, metadata, path_with, servers_dir, skip, start, which};
use crate::common::{Gimlet, ok_text};

/// One language's fixture: a library whose function gains a required parameter, and callers.
struct Case {
    server: &'static str,
    /// Files besides the library and the callers.
    project: &'static [(&'static str, &'static str)],
    /// The library (path, text).
    lib: (&'static str, &'static str),
    /// The signature before and after.
    signature: (&'static str, &'static str),
    /// A caller file's path and text, by its number.
    caller: fn(usize) -> (String, String),
    /// A line of the first caller that is an error before any edit.
    pre_existing: &'static str,
}

const PYTHON: Case = Case {
    server: "basedpyright-langserver",
    project: &[(
        "pyproject.toml",
        "[project]\nname = \"impact\"\nversion = \"0\"\n\n[tool.pyright]\ntypeCheckingMode = \"standard\"\n",
    )],
    lib: (
        "lib.py",
        "def area(w: float, h: float) -> float:\n    return w * h\n\n\n\
         def perimeter(w: float, h: float) -> float:\n    return 2 * (w + h)\n",
    ),
    signature: (
        "def area(w: float, h: float) -> float:",
        "def area(w: float, h: float, d: float) -> float:",
    ),
    caller: |i| {
        (
            format!("c{i}.py"),
            format!(
                "from lib import area, perimeter\n\n\
                 a{i} = area(1, 2)\nb{i} = area(3, {i})\np{i} = perimeter(1, 2)\n"
            ),
        )
    },
    pre_existing: "bad: int = \"pre-existing\"\n",
};

const TYPESCRIPT: Case = Case {
    server: "typescript-language-server",
    project: &[(
        "tsconfig.json",
        "{\"compilerOptions\": {\"target\": \"es2020\", \"module\": \"commonjs\", \"strict\": true, \"noEmit\": true}, \"include\": [\"src\"]}\n",
    )],
    lib: (
        "src/lib.ts",
        "export function area(w: number, h: number): number {\n    return w * h;\n}\n\n\
         export function perimeter(w: number, h: number): number {\n    return 2 * (w + h);\n}\n",
    ),
    signature: (
        "export function area(w: number, h: number): number {",
        "export function area(w: number, h: number, d: number): number {",
    ),
    caller: |i| {
        (
            format!("src/c{i}.ts"),
            format!(
                "import {{ area, perimeter }} from \"./lib\";\n\n\
                 export const a{i} = area(1, 2);\nexport const b{i} = area(3, {i});\n\
                 export const p{i} = perimeter(1, 2);\n"
            ),
        )
    },
    pre_existing: "export const bad: number = \"pre-existing\";\n",
};

/// The callers broken by the change.
const CALLERS: usize = 5;

/// Sets the project up and opens the library (read before edit).
async fn project(case: &Case, config: &str) -> Option<(Gimlet, tempfile::TempDir)> {
    let path = path_with(case.server)?;
    let (gimlet, config) = start(&path, "", config).await;
    for (name, content) in case.project {
        gimlet.write(name, content);
    }
    gimlet.write(case.lib.0, case.lib.1);
    for i in 1..=CALLERS {
        let (name, mut text) = (case.caller)(i);
        if i == 1 {
            text.push_str(case.pre_existing);
        }
        gimlet.write(&name, text);
    }
    ok_text(&gimlet.call("read", json!({"path": case.lib.0})).await);
    Some((gimlet, config))
}

/// The batch checker's errors in the tree now, as `(file, line)` (relative, 1-based), sorted.
fn batch(case: &Case, root: &Path) -> Vec<(String, usize)> {
    let servers = servers_dir();
    let mut found = Vec::new();
    if case.server == "basedpyright-langserver" {
        let out = std::process::Command::new(servers.join("venv/bin/basedpyright"))
            .arg("--outputjson")
            .current_dir(root)
            .output()
            .unwrap();
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        for d in report["generalDiagnostics"].as_array().unwrap() {
            if d["severity"] == "error" {
                let file = Path::new(d["file"].as_str().unwrap());
                let file = file.strip_prefix(root).unwrap_or(file);
                let line = d["range"]["start"]["line"].as_u64().unwrap();
                found.push((
                    file.display().to_string(),
                    usize::try_from(line).unwrap() + 1,
                ));
            }
        }
    } else {
        let out = std::process::Command::new(servers.join("npm/node_modules/.bin/tsc"))
            .args(["--noEmit", "--pretty", "false", "-p", "tsconfig.json"])
            .current_dir(root)
            .output()
            .unwrap();
        // src/c1.ts(3,20): error TS2554: Expected 3 arguments, but got 2.
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let Some((file, rest)) = line.split_once('(') else {
                continue;
            };
            let Some((place, message)) = rest.split_once("): ") else {
                continue;
            };
            if message.starts_with("error ") {
                let line = place.split(',').next().unwrap().parse().unwrap();
                found.push((file.to_owned(), line));
            }
        }
    }
    found.sort();
    found
}

/// The `(file, line)` of each error in a result's other-files block, sorted, and the block.
fn elsewhere(text: &str) -> (Vec<(String, usize)>, String) {
    let Some((_, block)) = text.split_once(", other files:") else {
        return (Vec::new(), String::new());
    };
    let mut found: Vec<(String, usize)> = block
        .lines()
        .filter_map(|l| {
            let (file, rest) = l.split_once(':')?;
            let (line, rest) = rest.split_once(':')?;
            rest.split(' ').nth(1).filter(|s| *s == "error")?;
            Some((file.to_owned(), line.parse().ok()?))
        })
        .collect();
    found.sort();
    (found, block.to_owned())
}

/// `after` less `before` (as multisets), outside `edited`.
fn new_in_others(
    before: &[(String, usize)],
    after: &[(String, usize)],
    edited: &str,
) -> Vec<(String, usize)> {
    let mut left = before.to_vec();
    let mut new = Vec::new();
    for error in after.iter().filter(|(f, _)| f != edited) {
        match left.iter().position(|e| e == error) {
            Some(i) => {
                left.remove(i);
            }
            None => new.push(error.clone()),
        }
    }
    new
}

async fn callers_broken_and_mended(case: Case) {
    let Some((gimlet, _config)) = project(&case, CONFIG).await else {
        return;
    };
    let root = gimlet.root();
    let before = tokio::task::block_in_place(|| batch(&case, &root));
    let (old, new) = case.signature;
    let broken = edit(&gimlet, case.lib.0, old, new).await;
    let text = ok_text(&broken);
    let after = tokio::task::block_in_place(|| batch(&case, &root));
    let expected = new_in_others(&before, &after, case.lib.0);
    assert!(
        expected.len() >= 2 * CALLERS,
        "{}: the change breaks every caller: {expected:?}",
        case.server
    );
    let (reported, block) = elsewhere(&text);
    let found = expected.iter().filter(|e| reported.contains(e)).count();
    assert!(
        found * 10 >= expected.len() * 9,
        "{}: {found} of {} new errors in other files reported:\n{text}",
        case.server,
        expected.len()
    );
    // Nothing reported that the batch checker does not see as new (the pre-existing error).
    let extra: Vec<_> = reported.iter().filter(|r| !expected.contains(r)).collect();
    assert!(
        extra.is_empty(),
        "{}: not new: {extra:?}\n{text}",
        case.server
    );
    assert!(
        block.starts_with(" 10 new errors in 5 files caused by this change; please fix:"),
        "{}: {block}",
        case.server
    );
    assert!(text.contains("[complete], other files:"), "{text}");
    let file_meta = &metadata(&broken)["diagnostics"][0];
    let _ = std::io::Write::write_all(
        &mut std::io::stderr(),
        format!(
            "impact {}: {found} of {} new errors reported; whole step {} ms, change to report {} \
             ms, other files after the change {} ms\n",
            case.server,
            expected.len(),
            file_meta["wait_ms"],
            file_meta["report_ms"],
            file_meta["elsewhere"]["wait_ms"]
        )
        .as_bytes(),
    );
    let meta = &file_meta["elsewhere"];
    assert_eq!(
        (&meta["new"], &meta["unchecked"], &meta["completeness"]),
        (&json!(10), &json!(0), &json!("complete")),
        "{meta}"
    );

    // Mended: the callers are fine again, and the pre-existing error is still not new.
    let mended = ok_text(&edit(&gimlet, case.lib.0, new, old).await);
    let (reported, block) = elsewhere(&mended);
    assert_eq!(reported, Vec::new(), "{}: {mended}", case.server);
    assert!(
        block.starts_with(" no new errors in the "),
        "{}: {mended}",
        case.server
    );

    // Renamed: the callers are found by the old name (asked before the change is sent).
    let before = tokio::task::block_in_place(|| batch(&case, &root));
    let renamed = ok_text(&edit(&gimlet, case.lib.0, "perimeter(", "girth(").await);
    let after = tokio::task::block_in_place(|| batch(&case, &root));
    let expected = new_in_others(&before, &after, case.lib.0);
    assert!(
        expected.len() >= CALLERS,
        "{}: the rename breaks every caller: {expected:?}",
        case.server
    );
    let (reported, _) = elsewhere(&renamed);
    let found = expected.iter().filter(|e| reported.contains(e)).count();
    assert!(
        found * 10 >= expected.len() * 9,
        "{}: {found} of {} new errors after the rename reported:\n{renamed}",
        case.server,
        expected.len()
    );
    gimlet.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn python_callers_broken_by_a_signature_change_are_reported() {
    callers_broken_and_mended(PYTHON).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn typescript_callers_broken_by_a_signature_change_are_reported() {
    callers_broken_and_mended(TYPESCRIPT).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_other_files_errors_are_capped_and_the_rest_counted() {
    let config = format!("{CONFIG}max_elsewhere = 4\n");
    let Some((gimlet, _config)) = project(&TYPESCRIPT, &config).await else {
        return;
    };
    let (old, new) = TYPESCRIPT.signature;
    let text = ok_text(&edit(&gimlet, TYPESCRIPT.lib.0, old, new).await);
    let (reported, block) = elsewhere(&text);
    assert_eq!(
        reported,
        vec![
            (String::from("src/c1.ts"), 3),
            (String::from("src/c1.ts"), 4),
            (String::from("src/c2.ts"), 3),
            (String::from("src/c2.ts"), 4),
        ],
        "{text}"
    );
    assert!(
        block.ends_with(
            "\n… and 6 more in 3 files (the `lsp` tool's `diagnostics` with a path lists a file's)"
        ),
        "{block}"
    );
    gimlet.stop().await;
}

/// A file whose diagnostics do not come within the bound is counted, and the block is partial:
/// the scripted server never answers a pull for a file containing `SLOW`.
#[tokio::test(flavor = "multi_thread")]
async fn other_files_without_an_answer_in_time_are_counted_and_the_block_is_partial() {
    let Some(python) = which("python3") else {
        skip("no python3 for the scripted server");
        return;
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("crates/gimlet-tools/fixtures/lsp/fake_diagnostics_server.py");
    let config = format!(
        "[lsp]\nwait_ms = 1500\nrequest_timeout_ms = 20000\n\
         [lsp.servers.fake]\ncommand = [{python:?}, {script:?}, \"pull\", \"fake.log\"]\n\
         extensions = [\"fake\"]\n",
        python = python.display().to_string(),
        script = script.display().to_string(),
    );
    let path = std::env::var_os("PATH").unwrap_or_default();
    let (gimlet, _config) = start(&path, "", &config).await;
    gimlet.write("a.fake", "fine\n");
    gimlet.write("b.fake", "fine\n");
    ok_text(&gimlet.call("read", json!({"path": "a.fake"})).await);
    ok_text(&gimlet.call("read", json!({"path": "b.fake"})).await);
    // b.fake is open at the server after its own change; then it is slow to answer.
    ok_text(&edit(&gimlet, "b.fake", "fine", "SLOW but fine").await);
    let result = edit(&gimlet, "a.fake", "fine", "ERROR here").await;
    let text = ok_text(&result);
    assert!(
        text.contains(
            "python3 [complete] reports 1 error in a.fake, caused by this change; please fix:"
        ),
        "{text}"
    );
    assert!(
        text.ends_with(
            "python3 [partial: 1 of 1 file not checked within 1.5 s], other files: none checked \
             in time."
        ),
        "{text}"
    );
    let meta = &metadata(&result)["diagnostics"][0]["elsewhere"];
    assert_eq!(
        (&meta["unchecked"], &meta["completeness"]),
        (&json!(1), &json!("partial")),
        "{meta}"
    );
    gimlet.stop().await;
}

/// Other files the policy does not let a call read are not checked: their errors would show
/// what the policy hides.
#[tokio::test(flavor = "multi_thread")]
async fn other_files_the_policy_denies_are_not_checked() {
    let config = format!(
        "{CONFIG}[[permissions.rules]]\naction = \"deny\"\ntool = \"*\"\npattern = \"src/c5.ts\"\n"
    );
    let Some((gimlet, _config)) = project(&TYPESCRIPT, &config).await else {
        return;
    };
    let (old, new) = TYPESCRIPT.signature;
    let text = ok_text(&edit(&gimlet, TYPESCRIPT.lib.0, old, new).await);
    let (reported, block) = elsewhere(&text);
    assert!(
        block.starts_with(" 8 new errors in 4 files caused by this change"),
        "{text}"
    );
    assert!(!text.contains("c5.ts"), "{text}");
    assert_eq!(reported.len(), 8, "{text}");
    gimlet.stop().await;
}
