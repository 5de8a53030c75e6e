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
                hunks: vec![hunk(
                    Some("fn main() {"),
                    vec![
                        HunkLine::Context("keep".into()),
                        HunkLine::Remove("old".into()),
                        HunkLine::Add("new".into()),
                        HunkLine::Context(String::new()),
                    ],
                    true,
                    7,
                )],
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
