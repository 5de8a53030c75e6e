//! The errors a change causes in other files: which symbols of the edited file it touched
//! (their references say which files to ask about), which of another file's errors are new,
//! and the block that lists them after the edited file's own.
//!
//! Pure functions, tested without a server; `client/impact.rs` asks the servers.

use std::fmt::Write as _;

use lsp_types::{Diagnostic, Position};
use serde_json::Value;

use super::diagnostics::{ChangedLines, Filter, Shown, Status, classify};

/// Symbols of the edited file whose references are looked up, at most.
pub(crate) const MAX_SYMBOLS: usize = 8;

/// Where to ask for the references of the symbols a change touched: the name of each symbol
/// of a `documentSymbol` result (of the old text) whose lines meet the changed ones, at most
/// [`MAX_SYMBOLS`]. A function is taken whole (its parameters and locals are its own); a
/// container (a class, a module, an interface) is looked into, and counts itself only when
/// none of its members was touched (its own line changed).
pub(crate) fn touched_symbols(symbols: &Value, changed: ChangedLines) -> Vec<Position> {
    let mut found = Vec::new();
    if let Some(list) = symbols.as_array() {
        collect_touched(list, changed, &mut found);
    }
    found.truncate(MAX_SYMBOLS);
    found
}

/// Symbol kinds whose members are symbols of their own: module, namespace, package, class,
/// enum, interface, object, struct.
const CONTAINERS: [u64; 8] = [2, 3, 4, 5, 10, 11, 19, 23];

fn collect_touched(list: &[Value], changed: ChangedLines, found: &mut Vec<Position>) {
    // The last old line the change touched; a pure insertion touches the line it went before.
    let last_line = changed.old_end.max(changed.start + 1) - 1;
    for symbol in list {
        // `DocumentSymbol` (range, selectionRange, children) or `SymbolInformation`
        // (location.range: the name's place is not known, the start is the nearest).
        let range = symbol
            .get("range")
            .or_else(|| symbol.pointer("/location/range"));
        let Some(range) =
            range.and_then(|r| serde_json::from_value::<lsp_types::Range>(r.clone()).ok())
        else {
            continue;
        };
        if (range.start.line as usize) > last_line || (range.end.line as usize) < changed.start {
            continue;
        }
        let before = found.len();
        let container = symbol
            .get("kind")
            .and_then(Value::as_u64)
            .is_some_and(|kind| CONTAINERS.contains(&kind));
        if container && let Some(children) = symbol.get("children").and_then(Value::as_array) {
            collect_touched(children, changed, found);
        }
        if found.len() == before {
            let at = symbol
                .get("selectionRange")
                .and_then(|r| serde_json::from_value::<lsp_types::Range>(r.clone()).ok())
                .map_or(range.start, |r| r.start);
            found.push(at);
        }
    }
}

/// The errors of a file the change did not edit that are new: those of `after` that `before`
/// (the same text's report before the change) did not have, by the rule of the edited file's
/// block (the same message, code and severity on the same line is the same problem). Sorted by
/// place.
pub(crate) fn new_errors(
    text: &str,
    before: &[Diagnostic],
    after: &[Diagnostic],
    filter: Filter,
) -> Vec<Shown> {
    let (shown, _) = classify(text, after, Some((text, before)), filter);
    let mut new: Vec<Shown> = shown.into_iter().filter(|s| !s.pre_existing).collect();
    new.sort_by_key(|s| (s.line, s.col));
    new
}

/// One other file's new errors, as shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OtherFile {
    /// The file as the result names it.
    pub(crate) display: String,
    /// Its new errors, in order.
    pub(crate) new: Vec<Shown>,
}

/// What the other-files check found, for [`render`].
#[derive(Debug, Clone)]
pub(crate) struct Found {
    /// The files checked before and after the change, with their new errors (none for most).
    pub(crate) files: Vec<OtherFile>,
    /// Files chosen but not checked: no answer before the bound.
    pub(crate) unchecked: usize,
    /// The bound, for the marker.
    pub(crate) wait_secs: f64,
}

/// The block after the edited file's: a header with the server and its marker, then the new
/// errors by file and place, at most `max`, and a count of the rest. `None` when no other
/// file was chosen (nothing to say).
pub(crate) fn render(
    server: &str,
    status: &Status,
    found: &Found,
    filter: Filter,
    max: usize,
) -> Option<String> {
    let checked = found.files.len();
    if checked == 0 && found.unchecked == 0 {
        return None;
    }
    let mut partial = Vec::new();
    if status.partial() {
        partial.push(format!("still busy: {}", status.busy.join("; ")));
    }
    if found.unchecked > 0 {
        partial.push(format!(
            "{} of {} not checked within {:.1} s",
            found.unchecked,
            crate::text::counted(checked + found.unchecked, "file", "files"),
            found.wait_secs
        ));
    }
    let marker = if partial.is_empty() {
        String::from("[complete]")
    } else {
        format!("[partial: {}]", partial.join("; "))
    };
    let (one, many) = if filter.warnings {
        ("problem", "problems")
    } else {
        ("error", "errors")
    };
    let mut files: Vec<&OtherFile> = found.files.iter().filter(|f| !f.new.is_empty()).collect();
    files.sort_by(|a, b| a.display.cmp(&b.display));
    let total: usize = files.iter().map(|f| f.new.len()).sum();
    let head = format!("{server} {marker}, other files:");
    if checked == 0 {
        return Some(format!("{head} none checked in time."));
    }
    if total == 0 {
        let so_far = if partial.is_empty() { "" } else { " so far" };
        return Some(format!(
            "{head} no new {many} in the {} checked{so_far}.",
            crate::text::counted(checked, "file", "files")
        ));
    }
    let mut text = format!(
        "{head} {} in {} caused by this change; please fix:",
        crate::text::counted(total, &format!("new {one}"), &format!("new {many}")),
        crate::text::counted(files.len(), "file", "files")
    );
    let mut shown = 0;
    let mut rest_files = 0;
    for file in &files {
        let room = max.saturating_sub(shown);
        for one in file.new.iter().take(room) {
            text.push('\n');
            text.push_str(&one.render(&file.display));
        }
        shown += room.min(file.new.len());
        if file.new.len() > room {
            rest_files += 1;
        }
    }
    if total > shown {
        let _ = write!(
            text,
            "\n… and {} more in {} (the `lsp` tool's `diagnostics` with a path lists a file's)",
            total - shown,
            crate::text::counted(rest_files, "file", "files")
        );
    }
    Some(text)
}

#[cfg(test)]
mod tests {
    use lsp_types::{DiagnosticSeverity, NumberOrString, Range};
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    fn diag(line: u32, message: &str, severity: DiagnosticSeverity) -> Diagnostic {
        Diagnostic {
            range: Range::new(Position::new(line, 4), Position::new(line, 8)),
            severity: Some(severity),
            code: Some(NumberOrString::String(String::from("reportCallIssue"))),
            message: message.to_owned(),
            ..Diagnostic::default()
        }
    }

    const ERR: DiagnosticSeverity = DiagnosticSeverity::ERROR;
    const FILTER: Filter = Filter {
        warnings: false,
        max: 20,
    };
    const DONE: Status = Status {
        busy: Vec::new(),
        basis: None,
    };
    const TEXT: &str = "import lib\nx = lib.area(1, 2)\ny = lib.area(3, 4)\nz: int = 'a'\n";

    #[test]
    fn only_errors_the_file_did_not_have_before_are_new() {
        let before = [diag(3, "pre-existing", ERR)];
        let after = [
            diag(3, "pre-existing", ERR),
            diag(2, "Argument missing for parameter \"d\"", ERR),
            diag(1, "Argument missing for parameter \"d\"", ERR),
            diag(1, "a warning", DiagnosticSeverity::WARNING),
        ];
        let new = new_errors(TEXT, &before, &after, FILTER);
        let lines: Vec<String> = new.iter().map(|s| s.render("c1.py")).collect();
        assert_eq!(
            lines,
            vec![
                "c1.py:2:5 error reportCallIssue Argument missing for parameter \"d\"",
                "c1.py:3:5 error reportCallIssue Argument missing for parameter \"d\"",
            ]
        );
        // The same problem on another line is new; nothing at all after: nothing new.
        let moved = [diag(2, "pre-existing", ERR)];
        assert_eq!(new_errors(TEXT, &before, &moved, FILTER).len(), 1);
        assert_eq!(new_errors(TEXT, &before, &[], FILTER), Vec::new());
        // Warnings count with `[lsp] warnings` only.
        let warnings = Filter {
            warnings: true,
            max: 20,
        };
        assert_eq!(new_errors(TEXT, &before, &after, warnings).len(), 3);
    }

    fn file(display: &str, lines: &[u32]) -> OtherFile {
        let after: Vec<Diagnostic> = lines.iter().map(|&l| diag(l, "broken", ERR)).collect();
        OtherFile {
            display: display.to_owned(),
            new: new_errors(TEXT, &[], &after, FILTER),
        }
    }

    #[test]
    fn the_block_lists_by_file_and_line_up_to_the_cap_and_counts_the_rest() {
        let found = Found {
            files: vec![
                file("c3.py", &[1, 2]),
                file("c1.py", &[2, 1]),
                file("clean.py", &[]),
                file("c2.py", &[1, 2, 3]),
            ],
            unchecked: 0,
            wait_secs: 3.0,
        };
        assert_eq!(
            render("srv", &DONE, &found, FILTER, 3).unwrap(),
            "srv [complete], other files: 7 new errors in 3 files caused by this change; please \
             fix:\n\
             c1.py:2:5 error reportCallIssue broken\n\
             c1.py:3:5 error reportCallIssue broken\n\
             c2.py:2:5 error reportCallIssue broken\n\
             … and 4 more in 2 files (the `lsp` tool's `diagnostics` with a path lists a file's)"
        );
        let all = render("srv", &DONE, &found, FILTER, 20).unwrap();
        assert_eq!(all.lines().count(), 8, "{all}");
        assert!(!all.contains("more in"), "{all}");
    }

    #[test]
    fn the_block_reads_as_snapshotted() {
        let found = Found {
            files: vec![
                file("src/c2.ts", &[1, 2]),
                file("src/c1.ts", &[1, 2]),
                file("src/c3.ts", &[1]),
            ],
            unchecked: 1,
            wait_secs: 3.0,
        };
        insta::assert_snapshot!(
            render("typescript-language-server", &DONE, &found, FILTER, 4).unwrap()
        );
    }

    #[test]
    fn no_new_errors_is_said_with_the_files_checked_and_partial_when_cut() {
        let clean = Found {
            files: vec![file("a.py", &[]), file("b.py", &[])],
            unchecked: 0,
            wait_secs: 3.0,
        };
        assert_eq!(
            render("srv", &DONE, &clean, FILTER, 20).unwrap(),
            "srv [complete], other files: no new errors in the 2 files checked."
        );
        let cut = Found {
            unchecked: 3,
            ..clean.clone()
        };
        assert_eq!(
            render("srv", &DONE, &cut, FILTER, 20).unwrap(),
            "srv [partial: 3 of 5 files not checked within 3.0 s], other files: no new errors \
             in the 2 files checked so far."
        );
        let busy = Status {
            busy: vec![String::from("Indexing")],
            basis: None,
        };
        assert!(
            render("srv", &busy, &clean, FILTER, 20)
                .unwrap()
                .starts_with("srv [partial: still busy: Indexing], other files")
        );
        let none = Found {
            files: Vec::new(),
            unchecked: 0,
            wait_secs: 3.0,
        };
        assert_eq!(render("srv", &DONE, &none, FILTER, 20), None);
        let late = Found {
            unchecked: 2,
            ..none
        };
        assert_eq!(
            render("srv", &DONE, &late, FILTER, 20).unwrap(),
            "srv [partial: 2 of 2 files not checked within 3.0 s], other files: none checked in \
             time."
        );
    }

    #[test]
    fn the_touched_symbols_are_those_on_the_changed_lines_inside_containers() {
        let symbol = |name: &str, kind: u8, start: u32, end: u32, children: Value| {
            json!({
                "name": name, "kind": kind,
                "range": {"start": {"line": start, "character": 0}, "end": {"line": end, "character": 1}},
                "selectionRange": {"start": {"line": start, "character": 4}, "end": {"line": start, "character": 8}},
                "children": children,
            })
        };
        let parameter = symbol("w", 13, 0, 0, json!([]));
        let symbols = json!([
            symbol("area", 12, 0, 2, json!([parameter])),
            symbol(
                "Shape",
                5,
                4,
                9,
                json!([
                    symbol("grow", 6, 5, 6, json!([])),
                    symbol("shrink", 6, 7, 8, json!([]))
                ])
            ),
        ]);
        let at = |start: usize, old_end: usize| {
            touched_symbols(
                &symbols,
                ChangedLines {
                    start,
                    old_end,
                    new_end: old_end,
                },
            )
            .into_iter()
            .map(|p| p.line)
            .collect::<Vec<_>>()
        };
        assert_eq!(
            at(0, 1),
            vec![0],
            "the signature of `area`, not its parameter"
        );
        assert_eq!(at(7, 8), vec![7], "a method, not its class");
        assert_eq!(at(4, 5), vec![4], "the class line itself");
        assert_eq!(at(2, 6), vec![0, 5], "a change across two symbols");
        assert_eq!(at(3, 3), Vec::<u32>::new(), "between symbols: none");
        // `SymbolInformation` has only the whole range.
        let flat = json!([{"name": "f", "kind": 12, "location": {"uri": "file:///a.py",
            "range": {"start": {"line": 1, "character": 0}, "end": {"line": 3, "character": 0}}}}]);
        let found = touched_symbols(
            &flat,
            ChangedLines {
                start: 2,
                old_end: 3,
                new_end: 3,
            },
        );
        assert_eq!(found, vec![Position::new(1, 0)]);
    }
}
