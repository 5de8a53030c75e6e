use std::collections::HashMap;
use std::path::{Path, PathBuf};

use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;

fn edit(range: (u32, u32, u32, u32), text: &str) -> lsp_types::TextEdit {
    lsp_types::TextEdit {
        range: lsp_types::Range::new(
            lsp_types::Position::new(range.0, range.1),
            lsp_types::Position::new(range.2, range.3),
        ),
        new_text: text.to_owned(),
    }
}

fn apply(text: &[u8], edits: &[lsp_types::TextEdit]) -> Result<Vec<u8>, EditError> {
    apply_text_edits(text, edits, "f.py")
}

#[test]
fn utf16_positions_land_after_non_ascii_text() {
    // `é` is one unit, the emoji two: `x` is at unit 4 of line 1 (`é😀x`).
    let text = "first\né😀x = 1\n".as_bytes();
    let out = apply(text, &[edit((1, 3, 1, 4), "renamed")]).unwrap();
    assert_eq!(String::from_utf8(out).unwrap(), "first\né😀renamed = 1\n");
    let inside = apply(text, &[edit((1, 2, 1, 3), "")]).unwrap_err();
    assert!(
        matches!(
            inside,
            EditError::Position {
                why: "inside a character",
                ..
            }
        ),
        "{inside:?}"
    );
}

#[test]
fn edits_are_sorted_and_applied_back_to_front() {
    let text = b"aaa bbb ccc\nddd\n";
    // Given out of order; each edit's range is on the original text.
    let edits = [
        edit((1, 0, 1, 3), "D"),
        edit((0, 0, 0, 3), "A"),
        edit((0, 8, 0, 11), "C"),
        edit((0, 4, 0, 7), "B"),
    ];
    assert_eq!(apply(text, &edits).unwrap(), b"A B C\nD\n");
    // Two inserts at one place keep the server's order.
    let inserts = [edit((0, 0, 0, 0), "1"), edit((0, 0, 0, 0), "2")];
    assert_eq!(apply(b"x", &inserts).unwrap(), b"12x");
    // An insert at the end of a replaced range is not an overlap.
    let touching = [edit((0, 0, 0, 1), "y"), edit((0, 1, 0, 1), "z")];
    assert_eq!(apply(b"xw", &touching).unwrap(), b"yzw");
}

#[test]
fn overlapping_edits_are_refused() {
    let text = b"one two three\n";
    let err = apply(text, &[edit((0, 0, 0, 7), "x"), edit((0, 4, 0, 9), "y")]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the server's edits to `f.py` overlap (at lines 1 and 1); nothing was changed"
    );
}

#[test]
fn line_endings_bom_and_positions_past_the_end() {
    // CRLF: the new text's line breaks become CRLF; the BOM stays and does not count.
    let text = "\u{feff}a\r\nb\r\n".as_bytes();
    let out = apply(text, &[edit((1, 0, 1, 1), "x\ny")]).unwrap();
    assert_eq!(out, "\u{feff}a\r\nx\r\ny\r\n".as_bytes());
    // A character past the line's end means its end (before the CR).
    let out = apply(b"ab\r\ncd\r\n", &[edit((0, 99, 0, 99), "!")]).unwrap();
    assert_eq!(out, b"ab!\r\ncd\r\n");
    // The line after the last one, column 0, is the end of the text.
    assert_eq!(
        apply(b"a\n", &[edit((1, 0, 1, 0), "b\n")]).unwrap(),
        b"a\nb\n"
    );
    let past = apply(b"a\n", &[edit((5, 0, 5, 0), "b")]).unwrap_err();
    assert!(matches!(past, EditError::Position { .. }), "{past:?}");
    let not_text = apply(b"\xff\xfe\x00", &[edit((0, 0, 0, 0), "b")]).unwrap_err();
    assert!(
        matches!(not_text, EditError::NotText { .. }),
        "{not_text:?}"
    );
}

#[test]
fn changes_and_document_changes_parse_in_order() {
    let changes = json!({"changes": {
        "file:///p/b.py": [{"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 1}}, "newText": "B"}],
        "file:///p/a.py": [],
    }});
    let ops = parse(&changes).unwrap();
    assert_eq!(ops.len(), 2);
    assert_eq!(ops[0].paths(), vec![Path::new("/p/a.py")]);
    let document = json!({"documentChanges": [
        {"textDocument": {"uri": "file:///p/a.py", "version": 3}, "edits": []},
        {"kind": "create", "uri": "file:///p/new.py", "options": {"ignoreIfExists": true}},
        {"kind": "rename", "oldUri": "file:///p/a.py", "newUri": "file:///p/c%20d.py", "options": {"overwrite": true}},
        {"kind": "delete", "uri": "file:///p/gone.py", "options": {"ignoreIfNotExists": true, "recursive": false}},
    ], "changes": {"file:///p/ignored.py": []}});
    assert_eq!(
        parse(&document).unwrap(),
        vec![
            FileOp::Edit {
                path: PathBuf::from("/p/a.py"),
                version: Some(3),
                edits: Vec::new()
            },
            FileOp::Create {
                path: PathBuf::from("/p/new.py"),
                overwrite: false,
                ignore_if_exists: true
            },
            FileOp::Rename {
                from: PathBuf::from("/p/a.py"),
                to: PathBuf::from("/p/c d.py"),
                overwrite: true,
                ignore_if_exists: false
            },
            FileOp::Delete {
                path: PathBuf::from("/p/gone.py"),
                ignore_if_not_exists: true
            },
        ]
    );
    let bad = parse(&json!({"documentChanges": [{"kind": "chmod", "uri": "file:///x"}]}));
    assert!(matches!(bad, Err(EditError::Malformed(_))), "{bad:?}");
    let remote = parse(&json!({"changes": {"https://example.com/a.py": []}}));
    assert!(matches!(remote, Err(EditError::Malformed(_))), "{remote:?}");
}

/// Runs a plan over an in-memory tree.
fn run(
    tree: &[(&str, &str)],
    ops: &[FileOp],
    sent: &[(&str, i32)],
) -> Result<Vec<PlannedFile>, EditError> {
    let files: HashMap<PathBuf, Vec<u8>> = tree
        .iter()
        .map(|(p, t)| (PathBuf::from(p), t.as_bytes().to_vec()))
        .collect();
    let sent: HashMap<PathBuf, i32> = sent.iter().map(|(p, v)| (PathBuf::from(p), *v)).collect();
    plan(
        ops,
        &mut |p| Ok(files.get(p).cloned()),
        &|p| sent.get(p).copied(),
        &|p| p.display().to_string(),
    )
}

fn after(planned: &[PlannedFile], path: &str) -> Option<String> {
    planned
        .iter()
        .find(|f| f.path == Path::new(path))
        .unwrap_or_else(|| panic!("{path} not planned: {planned:?}"))
        .after
        .as_ref()
        .map(|b| String::from_utf8(b.clone()).unwrap())
}

#[test]
fn a_rename_moves_the_edited_content_and_edits_after_it_follow_the_new_name() {
    let ops = [
        FileOp::Edit {
            path: PathBuf::from("/p/old.py"),
            version: Some(2),
            edits: vec![edit((0, 4, 0, 7), "new")],
        },
        FileOp::Rename {
            from: PathBuf::from("/p/old.py"),
            to: PathBuf::from("/p/new.py"),
            overwrite: false,
            ignore_if_exists: false,
        },
        FileOp::Edit {
            path: PathBuf::from("/p/new.py"),
            version: None,
            edits: vec![edit((1, 0, 1, 0), "# moved\n")],
        },
    ];
    let planned = run(
        &[("/p/old.py", "def old(): pass\n")],
        &ops,
        &[("/p/old.py", 2)],
    )
    .unwrap();
    assert_eq!(after(&planned, "/p/old.py"), None);
    assert_eq!(
        after(&planned, "/p/new.py").as_deref(),
        Some("def new(): pass\n# moved\n")
    );
    assert_eq!(
        planned[0].renamed_to.as_deref(),
        Some(Path::new("/p/new.py"))
    );
    assert_eq!(
        planned[1].renamed_from.as_deref(),
        Some(Path::new("/p/old.py"))
    );
    assert_eq!((planned[0].edits, planned[1].edits), (1, 1));

    // A version other than the one gimlet sent is refused.
    let stale = run(
        &[("/p/old.py", "def old(): pass\n")],
        &ops,
        &[("/p/old.py", 3)],
    );
    assert_eq!(
        stale.unwrap_err(),
        EditError::Version {
            path: String::from("/p/old.py"),
            edit: 2,
            sent: 3
        }
    );
}

#[test]
fn create_rename_and_delete_options() {
    let tree = [("/p/a", "A"), ("/p/b", "B")];
    let create = |overwrite, ignore_if_exists| FileOp::Create {
        path: PathBuf::from("/p/a"),
        overwrite,
        ignore_if_exists,
    };
    let exists = run(&tree, &[create(false, false)], &[]).unwrap_err();
    assert_eq!(
        exists,
        EditError::Exists {
            path: String::from("/p/a")
        }
    );
    let kept = run(&tree, &[create(false, true)], &[]).unwrap();
    assert!(kept[0].unchanged());
    // `overwrite` wins over `ignoreIfExists`.
    let emptied = run(&tree, &[create(true, true)], &[]).unwrap();
    assert_eq!(after(&emptied, "/p/a").as_deref(), Some(""));
    let fresh = run(
        &tree,
        &[FileOp::Create {
            path: PathBuf::from("/p/c"),
            overwrite: false,
            ignore_if_exists: false,
        }],
        &[],
    )
    .unwrap();
    assert_eq!(
        (fresh[0].before.clone(), after(&fresh, "/p/c")),
        (None, Some(String::new()))
    );

    let rename = |overwrite, ignore_if_exists| FileOp::Rename {
        from: PathBuf::from("/p/a"),
        to: PathBuf::from("/p/b"),
        overwrite,
        ignore_if_exists,
    };
    let onto = run(&tree, &[rename(false, false)], &[]).unwrap_err();
    assert_eq!(
        onto,
        EditError::Exists {
            path: String::from("/p/b")
        }
    );
    let skipped = run(&tree, &[rename(false, true)], &[]).unwrap();
    assert!(skipped.iter().all(PlannedFile::unchanged), "{skipped:?}");
    let replaced = run(&tree, &[rename(true, false)], &[]).unwrap();
    assert_eq!(
        (
            after(&replaced, "/p/a"),
            after(&replaced, "/p/b").as_deref()
        ),
        (None, Some("A"))
    );

    let delete = |path: &str, ignore_if_not_exists| FileOp::Delete {
        path: PathBuf::from(path),
        ignore_if_not_exists,
    };
    let deleted = run(&tree, &[delete("/p/a", false)], &[]).unwrap();
    assert_eq!(after(&deleted, "/p/a"), None);
    let missing = run(&tree, &[delete("/p/zz", false)], &[]).unwrap_err();
    assert!(
        matches!(
            missing,
            EditError::Missing {
                what: "deletes",
                ..
            }
        ),
        "{missing:?}"
    );
    let ignored = run(&tree, &[delete("/p/zz", true)], &[]).unwrap();
    assert!(ignored[0].unchanged());
}
