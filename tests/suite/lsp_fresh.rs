//! Diagnostics are never stale: a seeded, random script of break-and-fix edits through `edit`,
//! each result's errors compared with the batch compiler's on the same text (basedpyright's
//! CLI, `tsc --noEmit`, `clangd --check`). A report that differs is stale; one that says
//! "no errors" where the compiler finds some is a false clean.
//!
//! Then, against a scripted server (`fake_diagnostics_server.py`): pull diagnostics with
//! `previousResultId`, a report without a version marked as possibly stale, and answers from a
//! server still loading marked partial, an empty one never "none".
//!
//! `GIMLET_FRESHNESS_EDITS` sets the number of edits per server (default 40; the issue's
//! figure is 300), `GIMLET_FRESHNESS_SEED` the seed. A server that is not installed skips.

#![expect(clippy::unwrap_used, reason = "test helpers fail loudly")]

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Value, json};

use super::lsp::{CONFIG, edit, metadata, path_with, servers_dir, skip, start, which};
use crate::common::ok_text;

/// One language's case: a file of independent lines, each with a good and a broken form.
struct Case {
    /// The server looked for on the installed path.
    server: &'static str,
    /// Files that make the project (path, content).
    project: &'static [(&'static str, &'static str)],
    /// The edited file, relative to the root.
    file: &'static str,
    /// Lines before the slots.
    head: &'static str,
    /// (good, broken) forms of each slot line.
    slots: &'static [(&'static str, &'static str)],
    /// Lines after the slots.
    tail: &'static str,
}

const PYTHON: Case = Case {
    server: "basedpyright-langserver",
    project: &[(
        "pyproject.toml",
        "[project]\nname = \"fresh\"\nversion = \"0\"\n\n[tool.pyright]\ntypeCheckingMode = \"standard\"\n",
    )],
    file: "app.py",
    head: "import os\n\n",
    slots: &[
        ("a: int = 1", "a: int = \"one\""),
        ("b = len([1, 2])", "b = len(3)"),
        ("c = os.getcwd()", "c = os.getcwdd()"),
        ("d = 4", "d = undefined_name"),
        ("e: str = str(5)", "e: str = 5"),
        ("f = max(1, 2)", "f = max(1, 2"),
        ("g = \"s\".upper()", "g = \"s\".upper(1)"),
    ],
    tail: "\nprint(a, b, c, d, e, f, g)\n",
};

const TYPESCRIPT: Case = Case {
    server: "typescript-language-server",
    project: &[(
        "tsconfig.json",
        "{\"compilerOptions\": {\"target\": \"es2020\", \"module\": \"commonjs\", \"strict\": true, \"noEmit\": true}, \"include\": [\"src\"]}\n",
    )],
    file: "src/app.ts",
    head: "export {};\n\n",
    slots: &[
        ("const a: number = 1;", "const a: number = \"one\";"),
        ("const b = Math.max(1, 2);", "const b = Math.max(1, \"2\");"),
        ("const c = 3;", "const c = undefinedName;"),
        (
            "const d = \"s\".toUpperCase();",
            "const d = \"s\".toUpperCas();",
        ),
        ("const e: string = String(5);", "const e: string = 5;"),
        // No syntax error here: `tsc` reports only those when a program has one, where tsserver
        // reports the types too.
        ("const f = (1 + 2);", "const f = (1 + true);"),
        ("const g = [1, 2].length;", "const g = [1, 2].lenght;"),
    ],
    tail: "\nconsole.log(a, b, c, d, e, f, g);\n",
};

const C: Case = Case {
    server: "clangd",
    project: &[("compile_flags.txt", "-std=c11\n-Wall\n")],
    file: "main.c",
    head: "#include <stdio.h>\n\nstatic int square(int x) { return x * x; }\n\nint main(void) {\n",
    slots: &[
        ("    int a = 1;", "    int a = ;"),
        ("    int b = square(4);", "    int b = square(4, 5);"),
        ("    int c = 3;", "    int c = undefined_name;"),
        ("    int d = square(2);", "    int d = squar(2);"),
        ("    int e = 5;", "    int e = 5"),
        ("    int f = (1 + 2);", "    int f = (1 + 2;"),
    ],
    tail: "    printf(\"%d %d %d %d %d %d\\n\", a, b, c, d, e, f);\n    return 0;\n}\n",
};

/// A small seeded generator (xorshift64*), so a failing script can be replayed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let x = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D);
        usize::try_from(x >> 33).unwrap() % n
    }
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

impl Case {
    fn text(&self, broken: &[bool]) -> String {
        let mut text = String::from(self.head);
        for (slot, &is_broken) in self.slots.iter().zip(broken) {
            text.push_str(if is_broken { slot.1 } else { slot.0 });
            text.push('\n');
        }
        text.push_str(self.tail);
        text
    }
}

/// The error lines (1-based, sorted, with repeats) of a diagnostics block for `file`.
fn reported_lines(text: &str, file: &str) -> Vec<usize> {
    let prefix = format!("{file}:");
    let mut lines: Vec<usize> = text
        .lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .filter(|rest| {
            rest.split(' ')
                .nth(1)
                .is_some_and(|severity| severity == "error")
        })
        .map(|rest| rest.split(':').next().unwrap().parse().unwrap())
        .collect();
    lines.sort_unstable();
    lines
}

/// Runs the script on one server; returns the texts seen with what gimlet reported for each.
async fn run_script(case: &Case, edits: u64, seed: u64) -> Option<Vec<(String, String)>> {
    let path = path_with(case.server)?;
    let (gimlet, _config) = start(&path, "", CONFIG).await;
    for (name, content) in case.project {
        gimlet.write(name, content);
    }
    let mut broken = vec![false; case.slots.len()];
    gimlet.write(case.file, case.text(&broken));
    ok_text(&gimlet.call("read", json!({"path": case.file})).await);
    let mut rng = Rng(seed.max(1));
    let mut results = Vec::new();
    for step in 0..edits {
        // Break a line, or (more often, when there is one) fix one: the file is often clean,
        // where a report that missed the last fix would show.
        let fix = broken.iter().any(|&b| b) && (rng.below(10) < 6 || broken.iter().all(|&b| b));
        let candidates: Vec<usize> = (0..broken.len()).filter(|&i| broken[i] == fix).collect();
        let slot = candidates[rng.below(candidates.len())];
        let (good, bad) = case.slots[slot];
        let (old, new) = if broken[slot] {
            (bad, good)
        } else {
            (good, bad)
        };
        broken[slot] = !broken[slot];
        let result = gimlet
            .call(
                "edit",
                json!({"path": case.file, "old_string": old, "new_string": new}),
            )
            .await;
        let text = ok_text(&result);
        let meta = &metadata(&result)["diagnostics"][0];
        assert_eq!(
            meta["outcome"], "reported",
            "{}: step {step} (seed {seed}) got no report: {text}",
            case.server
        );
        results.push((case.text(&broken), text));
    }
    gimlet.stop().await;
    Some(results)
}

/// The batch compiler's error lines for each distinct text, by text.
fn batch(case: &Case, texts: &[&String]) -> BTreeMap<String, Vec<usize>> {
    let dir = tempfile::tempdir().unwrap();
    for (name, content) in case.project {
        std::fs::write(dir.path().join(name), content).unwrap();
    }
    let ext = Path::new(case.file).extension().unwrap().to_str().unwrap();
    let sub = Path::new(case.file).parent().unwrap();
    std::fs::create_dir_all(dir.path().join(sub)).unwrap();
    let name = |i: usize| sub.join(format!("s{i}.{ext}"));
    for (i, text) in texts.iter().enumerate() {
        std::fs::write(dir.path().join(name(i)), text).unwrap();
    }
    let servers = servers_dir();
    let mut lines: Vec<Vec<usize>> = vec![Vec::new(); texts.len()];
    let index_of = |file: &str| -> Option<usize> {
        let stem = Path::new(file).file_stem()?.to_str()?;
        stem.strip_prefix('s')?.parse().ok()
    };
    match case.server {
        "basedpyright-langserver" => {
            let out = std::process::Command::new(servers.join("venv/bin/basedpyright"))
                .arg("--outputjson")
                .current_dir(dir.path())
                .output()
                .unwrap();
            let report: Value = serde_json::from_slice(&out.stdout).unwrap();
            for d in report["generalDiagnostics"].as_array().unwrap() {
                if d["severity"] == "error"
                    && let Some(i) = index_of(d["file"].as_str().unwrap())
                {
                    lines[i].push(
                        usize::try_from(d["range"]["start"]["line"].as_u64().unwrap()).unwrap() + 1,
                    );
                }
            }
        }
        "typescript-language-server" => {
            let out = std::process::Command::new(servers.join("npm/node_modules/.bin/tsc"))
                .args(["--noEmit", "--pretty", "false", "-p", "tsconfig.json"])
                .current_dir(dir.path())
                .output()
                .unwrap();
            // src/s3.ts(4,19): error TS2322: ...
            for line in String::from_utf8_lossy(&out.stdout).lines() {
                let Some((file, rest)) = line.split_once('(') else {
                    continue;
                };
                let Some((place, message)) = rest.split_once("): ") else {
                    continue;
                };
                if let (Some(i), true) = (index_of(file), message.starts_with("error ")) {
                    lines[i].push(place.split(',').next().unwrap().parse().unwrap());
                }
            }
        }
        _ => {
            for (i, found) in lines.iter_mut().enumerate() {
                let out = std::process::Command::new(servers.join("venv/bin/clangd"))
                    .arg(format!("--check={}", name(i).display()))
                    .current_dir(dir.path())
                    .output()
                    .unwrap();
                // E[12:00:00.000] [code] Line 6: message
                for line in String::from_utf8_lossy(&out.stderr).lines() {
                    if line.starts_with("E[")
                        && let Some((_, rest)) = line.split_once("] Line ")
                    {
                        found.push(rest.split(':').next().unwrap().parse().unwrap());
                    }
                }
            }
        }
    }
    texts
        .iter()
        .zip(lines)
        .map(|(text, mut found)| {
            found.sort_unstable();
            ((*text).clone(), found)
        })
        .collect()
}

async fn fresh(case: Case) {
    let edits = env_number("GIMLET_FRESHNESS_EDITS", 40);
    let seed = env_number("GIMLET_FRESHNESS_SEED", 35);
    let Some(results) = run_script(&case, edits, seed).await else {
        return;
    };
    let mut distinct: Vec<&String> = results.iter().map(|(text, _)| text).collect();
    distinct.sort();
    distinct.dedup();
    let expected = tokio::task::block_in_place(|| batch(&case, &distinct));
    let (mut stale, mut false_clean, mut marked) = (Vec::new(), 0, 0);
    for (step, (text, result)) in results.iter().enumerate() {
        let want = &expected[text];
        let got = reported_lines(result, case.file);
        if result.contains("may be stale") || result.contains("[partial") {
            marked += 1;
        }
        if &got != want {
            if got.is_empty() && result.contains("]: no errors in") {
                false_clean += 1;
            }
            stale.push(format!(
                "step {step}: gimlet {got:?}, compiler {want:?}\n{result}"
            ));
        }
    }
    let clean = results.len()
        - results
            .iter()
            .map(|(t, _)| usize::from(!expected[t].is_empty()))
            .sum::<usize>();
    let errors: usize = results
        .iter()
        .map(|(t, _)| usize::from(!expected[t].is_empty()))
        .sum();
    let _ = std::io::Write::write_all(
        &mut std::io::stderr(),
        format!(
            "freshness {}: {} edits (seed {seed}), {} texts with errors, {clean} clean, {} \
             distinct texts; {} stale, {false_clean} false clean, {marked} marked partial or \
             possibly stale\n",
            case.server,
            results.len(),
            errors,
            distinct.len(),
            stale.len()
        )
        .as_bytes(),
    );
    assert!(errors > 0 && clean > 0, "the script breaks and fixes");
    assert_eq!(false_clean, 0, "false clean reports");
    assert!(
        stale.is_empty(),
        "{} stale reports:\n{}",
        stale.len(),
        stale.join("\n\n")
    );
    assert_eq!(marked, 0, "every report was complete and fresh");
}

#[tokio::test(flavor = "multi_thread")]
async fn python_diagnostics_match_the_batch_checker_after_every_edit() {
    fresh(PYTHON).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn typescript_diagnostics_match_tsc_after_every_edit() {
    fresh(TYPESCRIPT).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn c_diagnostics_match_clangd_check_after_every_edit() {
    fresh(C).await;
}

/// `gimlet serve` with the scripted server in `mode` for `*.fake` files.
async fn scripted(mode: &str) -> Option<(crate::common::Gimlet, tempfile::TempDir)> {
    let Some(python) = which("python3") else {
        skip("no python3 for the scripted server");
        return None;
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("crates/gimlet-tools/fixtures/lsp/fake_diagnostics_server.py");
    let config = format!(
        "[lsp]\nwait_ms = 20000\nrequest_timeout_ms = 20000\n\
         [lsp.servers.fake]\ncommand = [{python:?}, {script:?}, {mode:?}, \"fake.log\"]\n\
         extensions = [\"fake\"]\n",
        python = python.display().to_string(),
        script = script.display().to_string(),
    );
    let path = std::env::var_os("PATH").unwrap_or_default();
    let (gimlet, config) = start(&path, "", &config).await;
    gimlet.write("a.fake", "fine\n");
    ok_text(&gimlet.call("read", json!({"path": "a.fake"})).await);
    Some((gimlet, config))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_registers_pull_diagnostics_late_is_asked() {
    // It registers them only when the file changes, after gimlet began waiting for a
    // publication that will never come (basedpyright registers them after it starts).
    let Some((gimlet, _config)) = scripted("late").await else {
        return;
    };
    let broken = edit(&gimlet, "a.fake", "fine", "ERROR here").await;
    let text = ok_text(&broken);
    assert!(
        text.contains(
            "python3 [complete] reports 1 error in a.fake, caused by this change; please fix:\n\
             a.fake:1:1 error scripted error"
        ),
        "{text}"
    );
    assert_eq!(
        metadata(&broken)["diagnostics"][0]["freshness"],
        json!("pull")
    );
    // The report before the change was asked for too, once the registration came, rather
    // than waited for until the bound (it would never be published).
    let log = std::fs::read_to_string(gimlet.root().join("fake.log")).unwrap();
    let pulls = log
        .lines()
        .filter(|l| l.starts_with("textDocument/diagnostic "))
        .count();
    assert_eq!(pulls, 2, "{log}");
    gimlet.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn pulled_diagnostics_are_for_the_text_sent_and_loading_answers_are_partial() {
    let Some((gimlet, _config)) = scripted("pull").await else {
        return;
    };
    let broken = edit(&gimlet, "a.fake", "fine", "ERROR here").await;
    let text = ok_text(&broken);
    assert!(
        text.contains(
            "python3 [complete] reports 1 error in a.fake, caused by this change; please fix:\n\
             a.fake:1:1 error scripted error"
        ),
        "{text}"
    );
    let meta = &metadata(&broken)["diagnostics"][0];
    assert_eq!(
        (&meta["freshness"], &meta["fresh"], &meta["completeness"]),
        (&json!("pull"), &json!(true), &json!("complete")),
        "{meta}"
    );
    let every = ok_text(
        &gimlet
            .call("lsp", json!({"operation": "diagnostics"}))
            .await,
    );
    assert_eq!(
        every.trim(),
        "python3 [complete]: 1 problem\na.fake:1:1 error scripted error"
    );
    let fixed = ok_text(&edit(&gimlet, "a.fake", "ERROR here", "fine again").await);
    assert!(
        fixed.contains("python3 [complete]: no errors in a.fake (1 error fixed by this change)."),
        "{fixed}"
    );
    // Asked again with nothing changed: the last result id goes along, the server says
    // `unchanged`, and the answer is the same.
    let again = ok_text(
        &gimlet
            .call("lsp", json!({"operation": "diagnostics", "path": "a.fake"}))
            .await,
    );
    assert_eq!(again.trim(), "python3 [complete]: no problems in a.fake.");
    let log = std::fs::read_to_string(gimlet.root().join("fake.log")).unwrap();
    assert!(
        log.lines()
            .filter(|l| l.starts_with("textDocument/diagnostic "))
            .any(|l| l.contains("\"previousResultId\"")),
        "{log}"
    );

    // While the server loads, an empty answer is "so far", and every answer says partial.
    let loading = edit(&gimlet, "a.fake", "fine again", "LOADING").await;
    let text = ok_text(&loading);
    assert!(
        text.contains(
            "python3 [partial: still busy: Loading project: 3/40 files (7%)]: no errors in \
             a.fake so far; it may report more when it is done"
        ),
        "{text}"
    );
    assert_eq!(
        metadata(&loading)["diagnostics"][0]["completeness"],
        "partial"
    );
    let references = gimlet
        .call(
            "lsp",
            json!({"operation": "references", "path": "a.fake", "line": 1}),
        )
        .await;
    let text = ok_text(&references);
    assert_eq!(
        text.trim(),
        "No references so far.\npython3 [partial: still busy: Loading project: 3/40 files (7%)]: \
         the answer may be incomplete; ask again when it is done."
    );
    assert_eq!(metadata(&references)["completeness"], "partial");
    let every = gimlet
        .call("lsp", json!({"operation": "diagnostics"}))
        .await;
    assert_eq!(
        ok_text(&every).trim(),
        "No problems in the files the language servers have seen so far.\npython3 [partial: \
         still busy: Loading project: 3/40 files (7%)]: it may report more when it is done."
    );
    assert_eq!(metadata(&every)["completeness"], "partial");

    // Done loading: complete again, and an empty answer is "none".
    ok_text(&edit(&gimlet, "a.fake", "LOADING", "loaded").await);
    let references = ok_text(
        &gimlet
            .call(
                "lsp",
                json!({"operation": "references", "path": "a.fake", "line": 1}),
            )
            .await,
    );
    assert_eq!(references.trim(), "No references.\npython3 [complete]");
    gimlet.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_report_without_a_version_is_marked_as_possibly_stale() {
    let Some((gimlet, _config)) = scripted("unversioned").await else {
        return;
    };
    let broken = edit(&gimlet, "a.fake", "fine", "ERROR here").await;
    let text = ok_text(&broken);
    assert!(
        text.contains(
            "python3 [complete; may be stale: the server did not say which version of the file \
             it checked] reports 1 error in a.fake"
        ),
        "{text}"
    );
    let meta = &metadata(&broken)["diagnostics"][0];
    assert_eq!(
        (&meta["freshness"], &meta["fresh"]),
        (&json!("published"), &json!(false)),
        "{meta}"
    );
    gimlet.stop().await;
}

#[test]
fn reported_lines_are_the_errors_of_the_file() {
    let block = "clangd [complete] reports 2 errors in main.c, caused by this change; please fix:\n\
                 main.c:6:13 error expected_expression expected expression\n\
                 main.c:3:1 warning -Wx careful\n\
                 other.c:1:1 error elsewhere\n\
                 main.c:2:5 error undeclared thing (pre-existing)";
    assert_eq!(reported_lines(block, "main.c"), vec![2, 6]);
    assert_eq!(Rng(35).below(7), Rng(35).below(7), "seeded");
}
