use super::*;

fn touched(display: &str, edits: usize, how: How) -> Touched {
    Touched {
        display: display.to_owned(),
        edits,
        how,
    }
}

#[test]
fn the_summary_counts_files_edits_and_file_operations() {
    let text = summary(
        "Renamed to `sum_areas`",
        &[
            touched("app.py", 2, How::Edited),
            touched(
                "shapes.py",
                1,
                How::Renamed {
                    to: String::from("geometry.py"),
                },
            ),
            touched("geometry.py", 1, How::Created),
            touched("new_module.py", 0, How::Created),
            touched("stale.py", 0, How::Deleted),
        ],
    );
    insta::assert_snapshot!(text);
}

#[test]
fn a_rename_onto_a_file_it_replaces_is_one_file() {
    let text = summary(
        "Applied `Move`",
        &[
            touched(
                "a.py",
                0,
                How::Renamed {
                    to: String::from("b.py"),
                },
            ),
            touched("b.py", 0, How::Edited),
        ],
    );
    assert_eq!(
        text,
        "Applied `Move`: 1 file changed (0 edits), 1 renamed. One `undo` reverts it all.\n\
         R a.py -> b.py\n"
    );
}

#[test]
fn actions_are_listed_numbered_with_their_kind() {
    let actions = vec![
        json!({"title": "Add import \"os\"", "kind": "quickfix", "isPreferred": true}),
        json!({"title": "Organize imports", "kind": "source.organizeImports"}),
        json!({"title": "Run the fixer", "command": "fixer.run", "arguments": []}),
        json!({"title": "Extract function", "kind": "refactor.extract", "disabled": {"reason": "select an expression"}}),
    ];
    insta::assert_snapshot!(list_actions("app.py:3:1-4:2", &actions));
    assert_eq!(
        list_actions("app.py:1:1", &[]),
        "The server offers no code actions at app.py:1:1.\n"
    );
}
