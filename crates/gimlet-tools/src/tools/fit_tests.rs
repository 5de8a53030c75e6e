//! Every tool that can return more than the limits: the whole result, as a client shows it to
//! the model (its notice, footer and link included), fits the configured line and byte
//! limits at the limit, one over and far over. See: issue 38, a host that keeps only the
//! first 2000 lines of a result. `bash`, `bash_output`, plugin tools and `web_fetch` run
//! through the binary (`tests/suite/bash.rs`, `web.rs`, `extending.rs`).

use serde_json::{Value, json};

use crate::testutil::{TestWorkspace, assert_fits};
use crate::vocab::{OutputLimits, TruncationMode};

/// Small limits, so that the cases stay small; the notice and the link still fit beside.
const LIMITS: OutputLimits = OutputLimits {
    max_lines: 40,
    max_bytes: 3000,
    mode: TruncationMode::Head,
};

fn workspace() -> TestWorkspace {
    TestWorkspace::custom(|b| b.limits(LIMITS))
}

/// Counts around the line limit (at it, one under and one over, a few either side) and far
/// over it.
fn around_the_line_limit() -> impl Iterator<Item = usize> {
    (LIMITS.max_lines - 6..=LIMITS.max_lines + 2).chain([LIMITS.max_lines * 10])
}

/// Counts of 100-byte lines around the byte limit, and far over it.
fn around_the_byte_limit() -> impl Iterator<Item = usize> {
    let at = LIMITS.max_bytes / 100;
    (at - 3..=at + 1).chain([at * 10])
}

/// Calls `tool` and asserts that the result fits; returns whether it was cut.
async fn fits(ws: &TestWorkspace, tool: &str, args: Value) -> bool {
    let output = ws.call(tool, args.clone()).await.unwrap();
    assert_fits(&output, LIMITS);
    output.truncated.is_some()
}

/// `line i`, or `line i` padded to 100 bytes with its line break.
fn line(i: usize, long: bool) -> String {
    if long {
        format!("{:<99}\n", format!("line {i}"))
    } else {
        format!("line {i}\n")
    }
}

#[tokio::test]
async fn read_fits_the_limits_with_its_footer() {
    let ws = workspace();
    let mut cut = false;
    for (counts, long) in [
        (around_the_line_limit().collect::<Vec<_>>(), false),
        (around_the_byte_limit().collect(), true),
    ] {
        for n in counts {
            let text: String = (1..=n).map(|i| line(i, long)).collect();
            ws.write("f.txt", text);
            cut |= fits(&ws, "read", json!({"path": "f.txt"})).await;
            // A page asked for past the limits is cut by the pipeline, counting file lines.
            cut |= fits(&ws, "read", json!({"path": "f.txt", "limit": n})).await;
            cut |= fits(&ws, "read", json!({"path": "f.txt", "offset": 2})).await;
        }
    }
    assert!(cut, "some of these were cut");
}

#[tokio::test]
async fn grep_fits_the_limits_in_every_output_mode() {
    let ws = workspace();
    let mut cut = false;
    for (counts, long) in [
        (around_the_line_limit().collect::<Vec<_>>(), false),
        (around_the_byte_limit().collect(), true),
    ] {
        for n in counts {
            let text: String = (1..=n).map(|i| line(i, long)).collect();
            ws.write("a.txt", text);
            for args in [
                json!({"pattern": "line", "output_mode": "content", "head_limit": 0}),
                json!({"pattern": "line", "output_mode": "content", "head_limit": n}),
            ] {
                cut |= fits(&ws, "grep", args).await;
            }
        }
    }
    // Many files: the file list and the counts.
    for n in around_the_line_limit() {
        let ws = workspace();
        for i in 0..n {
            ws.write(&format!("d/f{i:04}.txt"), "line\n");
        }
        for mode in ["files_with_matches", "count"] {
            let args = json!({"pattern": "line", "output_mode": mode, "head_limit": 0});
            cut |= fits(&ws, "grep", args).await;
        }
    }
    assert!(cut, "some of these were cut");
}

#[tokio::test]
async fn glob_and_ls_fit_the_limits_with_their_footers() {
    let mut cut = false;
    for n in around_the_line_limit() {
        let ws = workspace();
        for i in 0..n {
            ws.write(&format!("d/f{i:04}.txt"), "");
        }
        cut |= fits(
            &ws,
            "glob",
            json!({"pattern": "**/*.txt", "limit": 100_000}),
        )
        .await;
        cut |= fits(&ws, "ls", json!({"limit": 100_000})).await;
    }
    // Long names reach the byte limit first.
    for n in around_the_byte_limit() {
        let ws = workspace();
        for i in 0..n {
            ws.write(&format!("d/{}{i:04}.txt", "n".repeat(90)), "");
        }
        cut |= fits(
            &ws,
            "glob",
            json!({"pattern": "**/*.txt", "limit": 100_000}),
        )
        .await;
        cut |= fits(&ws, "ls", json!({"limit": 100_000})).await;
    }
    assert!(cut, "some of these were cut");
}
