use std::time::{Duration, SystemTime};

use insta::assert_snapshot;
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::ToolError;
use crate::testutil::TestWorkspace;

/// Writes a file with a modification time `age` seconds ago, so the order is deterministic.
fn file(ws: &TestWorkspace, rel: &str, content: &str, age: u64) {
    let path = ws.write(rel, content);
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
    file(
        &ws,
        "src/main.rs",
        "fn main() {\n    let answer = compute();\n    println!(\"{answer}\");\n}\n",
        10,
    );
    file(
        &ws,
        "src/lib.rs",
        "pub fn compute() -> u32 {\n    42\n}\n\npub fn other() {}\n",
        20,
    );
    file(&ws, "README.md", "# Demo\ncompute things\n", 30);
    file(&ws, ".gitignore", "target/\n", 40);
    file(&ws, "target/debug/out.rs", "fn compute() {}\n", 5);
    file(&ws, ".hidden/secret.rs", "fn compute() {}\n", 5);
    ws.write("blob.bin", b"compute\0\x01\x02");
    std::fs::create_dir_all(ws.root().join(".git")).unwrap();
    ws
}

#[tokio::test]
async fn files_with_matches_newest_first_honouring_ignores_and_binaries() {
    let ws = sample();
    assert_snapshot!(ws.text("grep", json!({"pattern": "compute"})).await, @"
    src/main.rs
    src/lib.rs
    README.md
    [files 1-3 of 3, most recently modified first]
    ");
}

#[tokio::test]
async fn content_mode_with_context() {
    let ws = sample();
    let text = ws
        .text(
            "grep",
            json!({"pattern": "compute", "output_mode": "content", "context": 1, "type": "rust"}),
        )
        .await;
    assert_snapshot!(text, @r#"
    src/main.rs-1-fn main() {
    src/main.rs:2:    let answer = compute();
    src/main.rs-3-    println!("{answer}");
    --
    src/lib.rs:1:pub fn compute() -> u32 {
    src/lib.rs-2-    42
    [matching lines 1-2 of 2]
    "#);
}

#[tokio::test]
async fn count_mode() {
    let ws = sample();
    let text = ws
        .text("grep", json!({"pattern": "fn ", "output_mode": "count"}))
        .await;
    assert_snapshot!(text, @"
    src/main.rs:1
    src/lib.rs:2
    [files 1-2 of 2]
    ");
}

#[tokio::test]
async fn pages_are_disjoint_and_complete() {
    let ws = TestWorkspace::new();
    for i in 0..25 {
        file(
            &ws,
            &format!("f{i:02}.txt"),
            &format!("hit {i}\nmiss\nhit {i}b\n"),
            100 - i,
        );
    }
    for (mode, total) in [("files_with_matches", 25), ("content", 50), ("count", 25)] {
        let mut all = Vec::new();
        let mut offset = 0;
        loop {
            let out = ws.call("grep", json!({"pattern": "hit", "output_mode": mode, "head_limit": 7, "offset": offset})).await.unwrap();
            let structured = out.structured.unwrap();
            let key = match mode {
                "files_with_matches" => "files",
                "content" => "matches",
                _ => "counts",
            };
            let page = structured[key].as_array().unwrap().clone();
            assert!(page.len() <= 7);
            all.extend(page);
            match structured["next_offset"].as_u64() {
                Some(next) => offset = usize::try_from(next).unwrap(),
                None => break,
            }
        }
        assert_eq!(all.len(), total, "{mode}");
        let mut unique = all.iter().map(ToString::to_string).collect::<Vec<_>>();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), total, "{mode}: pages overlap");
    }
    let text = ws
        .text("grep", json!({"pattern": "hit", "head_limit": 3}))
        .await;
    assert!(
        text.ends_with(
            "[files 1-3, most recently modified first; more exist: use offset=3 for the next page]"
        ),
        "{text}"
    );
    let text = ws
        .text("grep", json!({"pattern": "hit", "offset": 99}))
        .await;
    assert_eq!(
        text,
        "No files at offset 99: there are 25 in all. Use a smaller offset."
    );
}

#[tokio::test]
async fn long_lines_are_cut_around_the_match() {
    let ws = TestWorkspace::new();
    ws.write(
        "min.js",
        format!("{}NEEDLE{}\n", "a".repeat(5000), "b".repeat(5000)),
    );
    let text = ws
        .text(
            "grep",
            json!({"pattern": "NEEDLE", "output_mode": "content"}),
        )
        .await;
    let line = text.lines().next().unwrap();
    assert!(line.starts_with("min.js:1:[... 4900 chars] "), "{line}");
    assert!(
        line.contains("NEEDLE") && line.ends_with(" [4806 chars ...]"),
        "{line}"
    );
    assert!(line.chars().count() < 400, "{}", line.chars().count());
}

#[tokio::test]
async fn options_filters_and_plain_data() {
    let ws = sample();
    let text = ws
        .text(
            "grep",
            json!({"pattern": "COMPUTE", "case_insensitive": true, "glob": "*.md"}),
        )
        .await;
    assert!(text.starts_with("README.md\n"), "{text}");
    let text = ws
        .text(
            "grep",
            json!({"pattern": "42\\n\\}", "multiline": true, "output_mode": "content"}),
        )
        .await;
    assert!(
        text.starts_with("src/lib.rs:2:    42\nsrc/lib.rs:3:}\n"),
        "{text}"
    );
    let text = ws
        .text("grep", json!({"pattern": "fn (", "fixed_strings": true}))
        .await;
    assert!(text.contains("No matches"), "{text}");
    ws.write("dash.txt", "-v --flag\n");
    let text = ws
        .text(
            "grep",
            json!({"pattern": "-v", "output_mode": "content", "path": "dash.txt"}),
        )
        .await;
    assert!(text.starts_with("dash.txt:1:-v --flag"), "{text}");
    let text = ws
        .text("grep", json!({"pattern": "compute", "glob": "!src/**"}))
        .await;
    assert!(
        text.starts_with("README.md\n") && !text.contains("src/"),
        "{text}"
    );
    let text = ws
        .text("grep", json!({"pattern": "answer", "path": "src"}))
        .await;
    assert!(text.starts_with("src/main.rs\n"), "{text}");
}

#[tokio::test]
async fn errors_are_clear() {
    let ws = sample();
    let err = ws.error("grep", json!({"pattern": "(unclosed"})).await;
    assert!(
        err.starts_with("`pattern` is not a valid regex (for a literal, set `fixed_strings`):")
            && err.contains("unclosed group"),
        "{err}"
    );
    for pattern in [
        json!({"pattern": "a\nb"}),
        json!({"pattern": "a\\nb"}),
        json!({"pattern": "a\nb", "fixed_strings": true}),
    ] {
        let err = ws.error("grep", pattern).await;
        assert!(
            err.contains("set `multiline: true` to match across lines"),
            "{err}"
        );
    }
    // The caret points into the pattern as the caller wrote it.
    let err = ws.error("grep", json!({"pattern": "a[z"})).await;
    assert!(
        err.contains("\n    a[z\n     ^\n") && !err.contains("(?:"),
        "{err}"
    );
    let err = ws
        .error("grep", json!({"pattern": "x", "type": "nonsense"}))
        .await;
    assert!(
        err.contains("`type` `nonsense` is not a known file type; common ones: rust"),
        "{err}"
    );
    let err = ws
        .error("grep", json!({"pattern": "x", "context": 2}))
        .await;
    assert!(err.contains("`output_mode: \"content\"` only"), "{err}");
    let err = ws.error("grep", json!({"pattern": ""})).await;
    assert!(err.contains("`pattern` is empty"), "{err}");
    let err = ws
        .error("grep", json!({"pattern": "x", "path": "missing"}))
        .await;
    assert!(err.contains("does not exist"), "{err}");
    let err = ws
        .call("grep", json!({"pattern": "x", "path": "/etc"}))
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::PermissionDenied(_)), "{err}");
}

#[tokio::test]
async fn unlimited_output_spills_and_stays_bounded() {
    let ws = TestWorkspace::new();
    let body: String = (0..40_000).map(|i| format!("match line {i}\n")).collect();
    ws.write("big.txt", &body);
    let out = ws
        .call(
            "grep",
            json!({"pattern": "match", "output_mode": "content", "head_limit": 0}),
        )
        .await
        .unwrap();
    let truncation = out.truncated.clone().expect("over the limits");
    assert_eq!(truncation.cut.total_lines, 40_000);
    let spill = truncation.spill.expect("saved");
    let saved = std::fs::read_to_string(&spill.path).unwrap();
    assert!(
        saved.starts_with("big.txt:1:match line 0\n")
            && saved.contains("big.txt:40000:match line 39999\n")
    );
    assert!(out.joined_text().len() <= 45 * 1024);
}

#[test]
fn a_cancelled_walk_stops() {
    let ws = sample();
    let token = tokio_util::sync::CancellationToken::new();
    token.cancel();
    let filters = crate::search::walk::Filters::new(&ws.root(), None, None).unwrap();
    let result = crate::search::walk::collect_files(
        &ws.root(),
        &filters,
        &|_| true,
        crate::search::walk::Stat::Walker,
        &token,
    );
    assert!(matches!(result, Err(ToolError::Cancelled)));
}

#[tokio::test]
async fn files_reached_through_a_swapped_symlink_are_not_read() {
    let ws = TestWorkspace::new();
    std::fs::write(ws.outside().join("secret.rs"), "password\n").unwrap();
    ws.symlink(ws.outside(), "link");
    let text = ws.text("grep", json!({"pattern": "password"})).await;
    assert!(text.contains("No matches"), "{text}");
}

#[tokio::test]
async fn direct_and_paged_content_are_the_same_lines() {
    let ws = TestWorkspace::new();
    for i in 0..5 {
        file(
            &ws,
            &format!("f{i}.txt"),
            &"a\nhit\nb\nc\nd\nhit\ne\n".repeat(3),
            10 + i,
        );
    }
    let args = |limit: usize| json!({"pattern": "hit", "output_mode": "content", "context": 1, "head_limit": limit});
    let direct = ws.text("grep", args(0)).await;
    let paged = ws.text("grep", args(1000)).await;
    // Unpaged output comes in walk order, paged output newest first: the same lines either way.
    let body = |text: &str| {
        let mut lines: Vec<String> = text
            .lines()
            .filter(|l| !l.starts_with('['))
            .map(str::to_owned)
            .collect();
        lines.sort();
        lines
    };
    assert_eq!(body(&direct), body(&paged));
    assert!(direct.contains("--\n"), "{direct}");
}

#[derive(Default)]
struct Recorded(std::sync::Mutex<Vec<crate::ProgressUpdate>>);

impl crate::ProgressSink for Recorded {
    fn report(&self, update: crate::ProgressUpdate) {
        self.0.lock().unwrap().push(update);
    }
}

#[tokio::test]
async fn searches_report_progress() {
    let ws = sample();
    for args in [
        json!({"pattern": "compute"}),
        json!({"pattern": "compute", "head_limit": 0}),
    ] {
        let sink = std::sync::Arc::new(Recorded::default());
        let ctx = crate::ToolContext::builder(std::sync::Arc::clone(&ws.env))
            .progress(sink.clone())
            .build();
        ws.call_with(&ctx, "grep", args).await.unwrap();
        let updates = sink.0.lock().unwrap();
        assert!(
            updates.iter().any(|u| u
                .message
                .as_deref()
                .is_some_and(|m| m.starts_with("searching"))),
            "{updates:?}"
        );
    }
}

/// A workspace with these output limits, holding `files` files of `lines` matching lines each.
fn tree_with_limits(limits: crate::OutputLimits, files: usize, lines: usize) -> TestWorkspace {
    let ws = TestWorkspace::custom(move |b| b.limits(limits));
    for f in 0..files {
        let body: String = (0..lines)
            .map(|i| format!("if err != nil {{ return err }} // {f}.{i}\n"))
            .collect();
        ws.write(&format!("pkg{f:04}/some/longer/path/file.go"), &body);
    }
    ws
}

#[tokio::test]
async fn raised_output_limits_are_honoured_in_content_mode() {
    // See issue 22: with 1e8 lines and 1 GiB allowed, content mode stopped after 1 MiB.
    let limits = crate::OutputLimits {
        max_lines: 100_000_000,
        max_bytes: 1 << 30,
        mode: crate::TruncationMode::Head,
    };
    let ws = tree_with_limits(limits, 300, 100); // 30,000 lines, about 2.7 MB
    let out = ws
        .call(
            "grep",
            json!({"pattern": "err != nil", "output_mode": "content", "head_limit": 0}),
        )
        .await
        .unwrap();
    assert!(out.truncated.is_none());
    let text = out.joined_text();
    assert!(text.len() > 2 << 20, "{}", text.len());
    let shown = text
        .lines()
        .filter(|l| l.contains(":if err != nil"))
        .count();
    assert_eq!(shown, 30_000);
    assert!(
        text.ends_with("[matching lines 1-30000 of 30000]"),
        "{}",
        &text[text.len() - 200..]
    );
}

#[tokio::test]
async fn the_notice_names_the_limit_that_cut_and_no_line_is_cut_in_its_path() {
    let by_bytes = crate::OutputLimits {
        max_lines: 100_000_000,
        max_bytes: 1536 * 1024,
        mode: crate::TruncationMode::Head,
    };
    let by_lines = crate::OutputLimits {
        max_lines: 20_000,
        max_bytes: 1 << 30,
        mode: crate::TruncationMode::Head,
    };
    for (limits, limit) in [
        (by_bytes, "(1536 KiB limit)"),
        (by_lines, "(20000 line limit)"),
    ] {
        let ws = tree_with_limits(limits, 300, 100);
        let out = ws
            .call(
                "grep",
                json!({"pattern": "err != nil", "output_mode": "content", "head_limit": 0}),
            )
            .await
            .unwrap();
        let text = out.joined_text();
        let notice = text
            .lines()
            .find(|l| l.starts_with("[Output truncated"))
            .unwrap();
        assert!(notice.contains(limit), "{notice}");
        // Every result line shown is whole: path, line number, text.
        for line in text
            .lines()
            .filter(|l| !l.starts_with('[') && !l.is_empty() && *l != "--")
        {
            assert!(
                line.starts_with("pkg")
                    && line.contains("/file.go:")
                    && line.ends_with(|c: char| c.is_ascii_digit()),
                "{line:?}"
            );
        }
    }
}

#[tokio::test]
async fn multiline_counts_each_match() {
    let ws = TestWorkspace::new();
    ws.write("m.txt", "a\nb\nc\nstart\nend\nstart\nend\nx\n");
    let out = ws
        .text(
            "grep",
            json!({"pattern": "start.end", "multiline": true, "output_mode": "count"}),
        )
        .await;
    assert!(out.starts_with("m.txt:2\n"), "{out}");
    // Without multiline, count stays matching lines.
    let out = ws
        .text(
            "grep",
            json!({"pattern": "start|end", "output_mode": "count"}),
        )
        .await;
    assert!(out.starts_with("m.txt:4\n"), "{out}");
}

#[test]
fn long_lines_are_cut_without_decoding_them_whole() {
    let matcher = grep_regex::RegexMatcher::new("needle").unwrap();
    let line = format!("{}needle{}", "é".repeat(5000), "x".repeat(5000));
    let shown = super::printer::shown_line(line.as_bytes(), &matcher);
    assert!(shown.starts_with("[... 4900 chars] "), "{shown}");
    assert!(shown.ends_with(" [4806 chars ...]"), "{shown}");
    assert!(shown.contains("éneedlex"));
}
