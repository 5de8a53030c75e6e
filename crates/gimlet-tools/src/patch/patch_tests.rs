use pretty_assertions::assert_eq;
use proptest::prelude::*;

use super::*;
use crate::text::Document;

fn hunk(anchor: Option<&str>, lines: Vec<HunkLine>, end_of_file: bool, patch_line: usize) -> Hunk {
    Hunk {
        anchor: anchor.map(ToOwned::to_owned),
        lines,
        end_of_file,
        patch_line,
        soft_tail: 0,
    }
}

#[test]
fn parses_every_operation() {
    let patch = parse(
        "*** Begin Patch\n\
         *** Add File: new.txt\n\
         +one\n\
         +two\n\
         *** Update File: src/lib.rs\n\
         *** Move to: src/core.rs\n\
         @@ fn main() {\n \
          keep\n\
         -old\n\
         +new\n\
         \n\
         *** End of File\n\
         *** Delete File: gone.txt\n\
         *** End Patch\n",
    )
    .unwrap();
    assert_eq!(
        patch.ops,
        vec![
            FileOp::Add {
                path: "new.txt".into(),
                content: "one\ntwo\n".into()
            },
            FileOp::Update {
                path: "src/lib.rs".into(),
                move_to: Some("src/core.rs".into()),
                hunks: vec![Hunk {
                    // The blank line lost its space: context if the file has it.
                    soft_tail: 1,
                    ..hunk(
                        Some("fn main() {"),
                        vec![
                            HunkLine::Context("keep".into()),
                            HunkLine::Remove("old".into()),
                            HunkLine::Add("new".into()),
                            HunkLine::Context(String::new()),
                        ],
                        true,
                        7,
                    )
                }],
            },
            FileOp::Delete {
                path: "gone.txt".into()
            },
        ]
    );
}

#[test]
fn tolerates_what_models_do() {
    // A heredoc wrapper, CRLF, a first hunk without `@@`, and `@@ ... @@` anchors.
    let text = "<<'EOF'\r\n*** Begin Patch\r\n*** Update File: a.py\r\n x = 1\r\n-y = 2\r\n+y = 3\r\n@@ def f(): @@\r\n-pass\r\n+return 1\r\n*** End Patch\r\nEOF\r\n";
    let patch = parse(text).unwrap();
    let FileOp::Update { hunks, .. } = &patch.ops[0] else {
        panic!()
    };
    assert_eq!(hunks.len(), 2);
    assert_eq!(hunks[0].anchor, None);
    assert_eq!(hunks[1].anchor.as_deref(), Some("def f():"));
    assert_eq!(hunks[1].old_lines(), vec!["pass"]);
}

#[test]
fn errors_name_the_line_and_the_expectation() {
    let cases = [
        ("", "line 1: a patch starts with `*** Begin Patch`"),
        (
            "*** Begin Patch\n*** Add File: a\n+x\n",
            "line 4: the patch ends without `*** End Patch`",
        ),
        (
            "*** Begin Patch\n*** Add File: a\nx\n*** End Patch",
            "line 3: lines of an added file start with `+`",
        ),
        (
            "*** Begin Patch\n*** Update File: a\n*** End Patch",
            "line 2: `*** Update File: a` has no hunks",
        ),
        (
            "*** Begin Patch\n*** Update File: a\n@@\n*x\n*** End Patch",
            "line 4: hunk lines start with",
        ),
        (
            "*** Begin Patch\n*** Frobnicate: a\n*** End Patch",
            "line 2: expected `*** Add File:`",
        ),
        ("*** Begin Patch\n*** End Patch", "no file operations"),
        (
            "*** Begin Patch\n*** Delete File: \n*** End Patch",
            "line 2: the file path is empty",
        ),
        (
            "*** Begin Patch\n*** Delete File: a\n*** End Patch\nmore",
            "line 4: nothing may follow",
        ),
        (
            "*** Begin Patch\n*** Update File: a\n@@\n@@\n-x\n*** End Patch",
            "line 3: this hunk has no lines",
        ),
    ];
    for (text, expected) in cases {
        let err = parse(text).unwrap_err().to_string();
        assert!(err.contains(expected), "{text:?}: {err}");
    }
}

fn apply(before: &str, patch: &str) -> Result<String, String> {
    let parsed = parse(patch).map_err(|e| e.to_string())?;
    let FileOp::Update { hunks, .. } = &parsed.ops[0] else {
        panic!("not an update")
    };
    apply_hunks(&Document::from_text(before.to_owned()), hunks)
        .map(|(text, _)| text)
        .map_err(|e| e.to_string())
}

#[test]
fn hunks_apply_in_order_with_anchors_and_end_of_file() {
    let before = "fn a() {\n    x\n}\nfn b() {\n    x\n}\n";
    let patch = "*** Begin Patch\n*** Update File: f\n@@ fn b() {\n-    x\n+    y\n*** End Patch";
    assert_eq!(
        apply(before, patch).unwrap(),
        "fn a() {\n    x\n}\nfn b() {\n    y\n}\n"
    );
    let patch =
        "*** Begin Patch\n*** Update File: f\n@@\n }\n+// end\n*** End of File\n*** End Patch";
    assert_eq!(
        apply(before, patch).unwrap(),
        "fn a() {\n    x\n}\nfn b() {\n    x\n}\n// end\n"
    );
    // Pure addition at the end of a file without a final newline.
    let patch = "*** Begin Patch\n*** Update File: f\n@@\n+last\n*** End Patch";
    assert_eq!(apply("a", patch).unwrap(), "a\nlast");
    // CRLF files stay CRLF.
    let patch = "*** Begin Patch\n*** Update File: f\n a\n-b\n+B\n*** End Patch";
    assert_eq!(apply("a\r\nb\r\nc\r\n", patch).unwrap(), "a\r\nB\r\nc\r\n");
}

#[test]
fn hunks_that_do_not_fit_are_refused() {
    let before = "one\ntwo\nthree\n";
    let err = apply(
        before,
        "*** Begin Patch\n*** Update File: f\n one\n-tow\n+2\n*** End Patch",
    )
    .unwrap_err();
    assert!(
        err.contains("hunk 1 (patch line 3)")
            && err.contains("not found")
            && err.contains("lines 1-2"),
        "{err}"
    );
    let err = apply(
        before,
        "*** Begin Patch\n*** Update File: f\n@@ nope\n-two\n*** End Patch",
    )
    .unwrap_err();
    assert!(err.contains("`@@ nope` line was not found"), "{err}");
    let err = apply(
        before,
        "*** Begin Patch\n*** Update File: f\n@@\n-one\n*** End of File\n*** End Patch",
    )
    .unwrap_err();
    assert!(err.contains("at the end of the file"), "{err}");
    // Out of order.
    let err = apply(
        before,
        "*** Begin Patch\n*** Update File: f\n@@\n-three\n@@\n-one\n*** End Patch",
    )
    .unwrap_err();
    assert!(err.contains("not found after line 3"), "{err}");
}

/// Parses and applies a one-file patch; the text after, or the error.
fn patched(before: &str, patch: &str) -> Result<String, String> {
    apply(before, patch)
}

#[test]
fn the_envelope_codex_accepts() {
    let plain = "*** Begin Patch\n*** Update File: f\n@@\n-one\n+two\n*** End Patch";
    let wrapped = [
        // Whitespace around the markers.
        " *** Begin Patch\n  *** Update File: f\n@@\n-one\n+two\n*** End Patch  \n",
        "*** Begin Patch \n*** Update File: f\n@@\n-one\n+two\n *** End Patch\n",
        // Blank lines before `*** End Patch`, around operations, after `*** End of File`.
        "\n\n*** Begin Patch\n\n*** Update File: f\n\n@@\n-one\n+two\n\n\n*** End Patch\n\n",
        "*** Begin Patch\n*** Update File: f\n@@\n-one\n+two\n*** End of File\n\n*** End Patch",
        // Here-doc wrappers, including the quote forms Codex refuses.
        "apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: f\n@@\n-one\n+two\n*** End Patch\nEOF\n",
        "cat <<\"EOF\"\n*** Begin Patch\n*** Update File: f\n@@\n-one\n+two\n*** End Patch\nEOF",
        "<<\"EOF'\n*** Begin Patch\n*** Update File: f\n@@\n-one\n+two\n*** End Patch\nEOF",
        "<<PATCH\n*** Begin Patch\n*** Update File: f\n@@\n-one\n+two\n*** End Patch\n",
        "cat <<'EOF' | apply_patch\n*** Begin Patch\n*** Update File: f\n@@\n-one\n+two\n*** End Patch\nEOF\n",
    ];
    let expected = patched("one\n", plain).unwrap();
    assert_eq!(expected, "two\n");
    for text in wrapped {
        assert_eq!(patched("one\n", text), Ok(expected.clone()), "{text:?}");
    }
    // A wrapper that does more than pass the patch on is refused, with the reason.
    let err = parse(
        "cd sub && apply_patch <<'EOF'\n*** Begin Patch\n*** Delete File: x\n*** End Patch\nEOF",
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("line 1") && err.contains("a `cd` in a wrapper is not applied"),
        "{err}"
    );
}

#[test]
fn blank_lines_inside_hunks_and_added_files() {
    // Blank lines between hunks are dropped when the file does not have them there.
    let patch = "*** Begin Patch\n*** Update File: f\n@@\n-a\n+A\n\n@@\n-c\n+C\n\n*** End Patch";
    assert_eq!(patched("a\nb\nc\n", patch).unwrap(), "A\nb\nC\n");
    // ... and kept as context where it has them.
    let patch = "*** Begin Patch\n*** Update File: f\n@@\n-a\n+A\n\n*** End Patch";
    assert_eq!(patched("x\n\na\n\nb\n", patch).unwrap(), "x\n\nA\n\nb\n");
    // An added file keeps its inner blank lines and drops the trailing ones.
    let parsed = parse("*** Begin Patch\n*** Add File: n\n+a\n\n+b\n\n\n*** End Patch").unwrap();
    assert_eq!(
        parsed.ops,
        vec![FileOp::Add {
            path: "n".into(),
            content: "a\n\nb\n".into()
        }]
    );
}

#[test]
fn an_addition_at_the_end_may_come_before_earlier_hunks() {
    let patch =
        "*** Begin Patch\n*** Update File: f\n@@\n+tail\n@@\n-line2\n+changed\n*** End Patch";
    assert_eq!(
        patched("line1\nline2\nline3\n", patch).unwrap(),
        "line1\nchanged\nline3\ntail\n"
    );
}

#[test]
fn context_indented_differently_line_by_line() {
    let before = "fn f() {\n\tif x {\n\t\ty();\n\t}\n}\n";
    // The model's context uses spaces, with its own idea of the depth of each line.
    let patch = "*** Begin Patch\n*** Update File: f\n@@\n if x {\n-      y();\n+      z();\n+      w();\n   }\n*** End Patch";
    assert_eq!(
        patched(before, patch).unwrap(),
        "fn f() {\n\tif x {\n\t\tz();\n\t\tw();\n\t}\n}\n"
    );
    // Still only when the place is unique.
    let before = "if x {\n  y();\n}\nif x {\n\ty();\n}\n";
    let patch =
        "*** Begin Patch\n*** Update File: f\n@@\n if x {\n-    y();\n+    z();\n*** End Patch";
    let err = patched(before, patch).unwrap_err();
    assert!(err.contains("match several places"), "{err}");
}

#[test]
fn mixed_line_endings_are_kept_line_by_line() {
    // Codex's result, byte for byte: each untouched line keeps its own ending.
    let patch =
        "*** Begin Patch\n*** Update File: f\n one\n two\n-three\n+THREE\n four\n*** End Patch";
    assert_eq!(
        patched("one\r\ntwo\nthree\r\nfour\n", patch).unwrap(),
        "one\r\ntwo\nTHREE\r\nfour\n"
    );
    // Added lines take the dominant ending; removed lines take theirs with them.
    let patch = "*** Begin Patch\n*** Update File: f\n a\n-b\n+B\n+B2\n c\n-d\n*** End Patch";
    assert_eq!(
        patched("a\r\nb\r\nc\nd\r\ne\n", patch).unwrap(),
        "a\r\nB\r\nB2\r\nc\ne\n"
    );
}

#[test]
fn context_lines_keep_their_own_ending_beside_equal_lines() {
    // Codex's `test_apply_patch_cli_preserves_repeated_context_line_ending`: the `-` line is the
    // first `same` and the context line the second, whose `\n` stays.
    let cases = [
        ("same\r\nsame\n", "-same\n same", "same\n"),
        ("same\nsame\r\n", " same\n-same", "same\n"),
        // The middle one goes; the outer two keep their CRLF.
        (
            "same\r\nsame\nsame\r\n",
            " same\n-same\n same",
            "same\r\nsame\r\n",
        ),
        // The changed line keeps its own ending, the context line after it its own.
        ("same\r\nsame\n", "-same\n+new\n same", "new\r\nsame\n"),
        // Lines the model removes and adds back unchanged keep their bytes too.
        (
            "a\r\nsame\nsame\r\n",
            "-a\n-same\n+b\n+same\n same",
            "b\r\nsame\nsame\r\n",
        ),
    ];
    for (before, body, after) in cases {
        let patch = format!("*** Begin Patch\n*** Update File: f\n@@\n{body}\n*** End Patch");
        assert_eq!(
            patched(before, &patch).unwrap(),
            after,
            "{before:?} with {body:?}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn the_parser_never_panics(text in "(?s)(\\*\\*\\* (Begin|End) Patch\n|\\*\\*\\* (Add|Update|Delete) File: [a-z]{0,3}\n|\\*\\*\\* (Move to|End of File)[: a-z]{0,3}\n|@@[ a-z]{0,5}\n|[ +-][a-z]{0,5}\n|<<'EOF'\n|EOF\n|\n){0,20}") {
        let _ = parse(&text);
    }

    #[test]
    fn applying_never_panics(file in "(?s)[ab \n\r]{0,60}", lines in proptest::collection::vec("[ +-][ab ]{0,4}", 1..10), anchor in proptest::option::of("[ab]{1,2}"), eof in any::<bool>()) {
        let mut patch = String::from("*** Begin Patch\n*** Update File: f\n@@");
        if let Some(anchor) = anchor {
            patch.push(' ');
            patch.push_str(&anchor);
        }
        patch.push('\n');
        for line in lines {
            patch.push_str(&line);
            patch.push('\n');
        }
        if eof {
            patch.push_str("*** End of File\n");
        }
        patch.push_str("*** End Patch\n");
        if let Ok(parsed) = parse(&patch)
            && let FileOp::Update { hunks, .. } = &parsed.ops[0]
        {
            let _ = apply_hunks(&Document::from_text(file), hunks);
        }
    }
}
