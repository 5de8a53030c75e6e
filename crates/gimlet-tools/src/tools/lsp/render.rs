//! The `lsp` tool's results as text: places as `path:line:col: source line`, paged like
//! grep's; symbols as an outline; hover text; a rename's edits.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use lsp_types::{Position, Range};
use serde_json::Value;

use crate::context::ToolContext;
use crate::fs::RootSet;
use crate::lsp::position::{human, line_at, path_of};

/// A place a server pointed at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Place {
    pub(crate) path: PathBuf,
    pub(crate) start: Position,
    /// What is there (a symbol's kind and name), when known.
    pub(crate) label: Option<String>,
    /// The symbol's name, when it is one.
    pub(crate) name: Option<String>,
    /// Nesting depth, for outlines.
    pub(crate) depth: usize,
}

/// Source texts of files inside the roots, read once each, where the policy lets the call
/// read them without asking. Other files (outside the roots, denied, protected) are never
/// opened: their places are shown without a source line.
pub(crate) struct Sources {
    roots: RootSet,
    /// A context of the call's session to judge reads with: the call's own context keeps the
    /// decision that let it run (for the audit log), so it is not asked again.
    judge: Option<ToolContext>,
    texts: HashMap<PathBuf, Option<String>>,
}

impl Sources {
    /// Texts for the files a call may read. Blocking (it reads files).
    pub(crate) fn new(ctx: &ToolContext) -> Self {
        let judge = ctx.session_judge();
        Self {
            roots: ctx.roots().clone(),
            judge: Some(judge),
            texts: HashMap::new(),
        }
    }

    /// Texts for any file beneath `roots`, without a policy (tests).
    #[cfg(test)]
    fn unjudged(roots: RootSet) -> Self {
        Self {
            roots,
            judge: None,
            texts: HashMap::new(),
        }
    }

    /// Seeds a file's text (one already read).
    pub(crate) fn seed(&mut self, path: &Path, text: String) {
        self.texts.insert(path.to_owned(), Some(text));
    }

    /// The text of `path`, if it lies beneath a root, the policy allows reading it, and it
    /// reads as text.
    pub(crate) fn text(&mut self, path: &Path) -> Option<&str> {
        let roots = &self.roots;
        let judge = self.judge.as_ref();
        self.texts
            .entry(path.to_owned())
            .or_insert_with(|| {
                match judge {
                    Some(judge) if !judge.reads_unasked(roots, "lsp", path) => return None,
                    // Tests: any file beneath the roots.
                    None if !roots
                        .resolve(&path.display().to_string())
                        .is_ok_and(|r| r.is_inside() && r.path == path) =>
                    {
                        return None;
                    }
                    _ => {}
                }
                crate::lsp::read_text(path)
            })
            .as_deref()
    }

    fn display(&self, path: &Path) -> String {
        self.roots.display(path)
    }
}

/// Places from a `definition`/`references` result (`Location`, `Location[]`, `LocationLink[]`).
pub(crate) fn places(result: &Value) -> Vec<Place> {
    let items: Vec<&Value> = match result {
        Value::Array(items) => items.iter().collect(),
        Value::Null => Vec::new(),
        one => vec![one],
    };
    items
        .into_iter()
        .filter_map(|item| {
            let (uri, range) = if let Some(uri) = item.get("targetUri") {
                (
                    uri,
                    item.get("targetSelectionRange")
                        .or(item.get("targetRange"))?,
                )
            } else {
                (item.get("uri")?, item.get("range")?)
            };
            let uri: lsp_types::Uri = serde_json::from_value(uri.clone()).ok()?;
            let range: Range = serde_json::from_value(range.clone()).ok()?;
            Some(Place {
                path: path_of(&uri)?,
                start: range.start,
                label: None,
                name: None,
                depth: 0,
            })
        })
        .collect()
}

/// Symbols from a `documentSymbol` result (hierarchical or flat) in `file`, as an outline.
pub(crate) fn document_symbols(result: &Value, file: &Path) -> Vec<Place> {
    let mut out = Vec::new();
    if let Ok(nested) = serde_json::from_value::<Vec<lsp_types::DocumentSymbol>>(result.clone()) {
        fn walk(
            symbols: &[lsp_types::DocumentSymbol],
            file: &Path,
            depth: usize,
            out: &mut Vec<Place>,
        ) {
            for symbol in symbols {
                out.push(Place {
                    path: file.to_owned(),
                    start: symbol.selection_range.start,
                    label: Some(format!("{} {}", kind_name(symbol.kind), symbol.name)),
                    name: Some(symbol.name.clone()),
                    depth,
                });
                if let Some(children) = &symbol.children {
                    walk(children, file, depth + 1, out);
                }
            }
        }
        walk(&nested, file, 0, &mut out);
        return out;
    }
    flat_symbols(result)
}

/// Symbols from a `workspace/symbol` (or flat `documentSymbol`) result.
pub(crate) fn flat_symbols(result: &Value) -> Vec<Place> {
    let Value::Array(items) = result else {
        return Vec::new();
    };
    items
        .iter()
        .filter_map(|item| {
            let name = item.get("name")?.as_str()?;
            let kind: lsp_types::SymbolKind =
                serde_json::from_value(item.get("kind")?.clone()).ok()?;
            let location = item.get("location")?;
            let uri: lsp_types::Uri = serde_json::from_value(location.get("uri")?.clone()).ok()?;
            // A workspace symbol may come without a range (resolved later): its file's top.
            let start = location
                .get("range")
                .and_then(|r| serde_json::from_value::<Range>(r.clone()).ok())
                .map_or_else(Position::default, |r| r.start);
            let container = item
                .get("containerName")
                .and_then(Value::as_str)
                .filter(|c| !c.is_empty())
                .map(|c| format!(" (in {c})"))
                .unwrap_or_default();
            Some(Place {
                path: path_of(&uri)?,
                start,
                label: Some(format!("{} {name}{container}", kind_name(kind))),
                name: Some(name.to_owned()),
                depth: 0,
            })
        })
        .collect()
}

/// A page of places: `path:line:col` and the label or the source line, then a footer when
/// there are more.
pub(crate) fn render_places(
    places: &[Place],
    sources: &mut Sources,
    offset: usize,
    limit: usize,
    noun: (&str, &str),
) -> String {
    let total = places.len();
    let mut text = String::new();
    for place in places.iter().skip(offset).take(limit) {
        let display = sources.display(&place.path);
        let source = sources.text(&place.path);
        let (line, col) = human(source, place.start);
        let indent = "  ".repeat(place.depth);
        let _ = write!(text, "{indent}{display}:{line}:{col}");
        if let Some(label) = &place.label {
            let _ = write!(text, " {label}");
        } else if let Some(source_line) = source.and_then(|t| line_at(t, line - 1)) {
            let _ = write!(text, ": {}", crate::lsp::clip(source_line.trim(), 200));
        } else if !sources.roots.contains(&place.path) {
            text.push_str(" (outside the roots)");
        }
        text.push('\n');
    }
    let shown_end = total.min(offset + limit);
    if total == 0 {
        let _ = writeln!(text, "No {}.", noun.1);
    } else if offset > 0 || shown_end < total {
        let _ = write!(
            text,
            "({} in all; showing {}-{}",
            crate::text::counted(total, noun.0, noun.1),
            (offset + 1).min(total),
            shown_end
        );
        if shown_end < total {
            let _ = write!(text, "; pass offset={shown_end} for more");
        }
        text.push_str(")\n");
    }
    text
}

/// The text of a `hover` result.
pub(crate) fn hover_text(result: &Value) -> Option<String> {
    let contents = result.get("contents")?;
    let part = |v: &Value| -> Option<String> {
        match v {
            Value::String(s) => Some(s.clone()),
            Value::Object(o) => o.get("value").and_then(Value::as_str).map(|value| {
                match o.get("language").and_then(Value::as_str) {
                    Some(language) => format!("```{language}\n{value}\n```"),
                    None => value.to_owned(),
                }
            }),
            _ => None,
        }
    };
    let text = match contents {
        Value::Array(parts) => parts
            .iter()
            .filter_map(part)
            .collect::<Vec<_>>()
            .join("\n\n"),
        one => part(one)?,
    };
    let text = text.trim().to_owned();
    (!text.is_empty()).then_some(text)
}

/// The edits of a rename (`WorkspaceEdit`), one changed line per entry: `path:line:col` and
/// the line after the edit. Returns the text and the number of edits.
pub(crate) fn rename_edits(result: &Value, sources: &mut Sources) -> (String, usize) {
    let mut by_file: Vec<(PathBuf, Vec<lsp_types::TextEdit>)> = Vec::new();
    let mut add = |uri: &Value, edits: &Value| {
        let (Ok(uri), Ok(edits)) = (
            serde_json::from_value::<lsp_types::Uri>(uri.clone()),
            serde_json::from_value::<Vec<lsp_types::TextEdit>>(edits.clone()),
        ) else {
            return;
        };
        if let Some(path) = path_of(&uri) {
            by_file.push((path, edits));
        }
    };
    if let Some(Value::Object(changes)) = result.get("changes") {
        for (uri, edits) in changes {
            add(&Value::String(uri.clone()), edits);
        }
    }
    if let Some(Value::Array(changes)) = result.get("documentChanges") {
        for change in changes {
            if let (Some(doc), Some(edits)) = (change.get("textDocument"), change.get("edits")) {
                add(doc.get("uri").unwrap_or(&Value::Null), edits);
            }
        }
    }
    by_file.sort_by(|a, b| a.0.cmp(&b.0));
    let mut text = String::new();
    let mut count = 0;
    for (path, mut edits) in by_file {
        edits.sort_by_key(|e| (e.range.start.line, e.range.start.character));
        let display = sources.display(&path);
        let source = sources.text(&path).map(ToOwned::to_owned);
        for edit in &edits {
            count += 1;
            let (line, col) = human(source.as_deref(), edit.range.start);
            let _ = write!(text, "{display}:{line}:{col}");
            match source.as_deref().and_then(|s| line_at(s, line - 1)) {
                Some(old) if edit.range.start.line == edit.range.end.line => {
                    let from = crate::lsp::position::char_of_utf16(old, edit.range.start.character);
                    let to = crate::lsp::position::char_of_utf16(old, edit.range.end.character);
                    let new: String = old
                        .chars()
                        .take(from)
                        .chain(edit.new_text.chars())
                        .chain(old.chars().skip(to))
                        .collect();
                    let _ = write!(text, ": {}\n  -> {}", old.trim(), new.trim());
                }
                _ => {
                    let _ = write!(text, ": replace with `{}`", edit.new_text);
                }
            }
            text.push('\n');
        }
    }
    (text, count)
}

/// A symbol kind's name (`function`, `class` ...).
pub(crate) fn kind_name(kind: lsp_types::SymbolKind) -> &'static str {
    const NAMES: [&str; 26] = [
        "file",
        "module",
        "namespace",
        "package",
        "class",
        "method",
        "property",
        "field",
        "constructor",
        "enum",
        "interface",
        "function",
        "variable",
        "constant",
        "string",
        "number",
        "boolean",
        "array",
        "object",
        "key",
        "null",
        "enum member",
        "struct",
        "event",
        "operator",
        "type parameter",
    ];
    let index: i32 = serde_json::to_value(kind)
        .ok()
        .and_then(|v| v.as_i64())
        .and_then(|n| i32::try_from(n).ok())
        .unwrap_or(0);
    usize::try_from(index - 1)
        .ok()
        .and_then(|i| NAMES.get(i))
        .copied()
        .unwrap_or("symbol")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn places_come_from_locations_and_links() {
        let result = json!([
            {"uri": "file:///r/a.py", "range": {"start": {"line": 2, "character": 4}, "end": {"line": 2, "character": 5}}},
            {"targetUri": "file:///r/b.py",
             "targetRange": {"start": {"line": 0, "character": 0}, "end": {"line": 9, "character": 0}},
             "targetSelectionRange": {"start": {"line": 3, "character": 6}, "end": {"line": 3, "character": 9}}},
        ]);
        let got = places(&result);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].path, Path::new("/r/a.py"));
        assert_eq!(
            got[1].start,
            Position::new(3, 6),
            "the selection, not the whole range"
        );
        assert!(places(&Value::Null).is_empty());
        let one = json!({"uri": "file:///r/c.py", "range": {"start": {"line": 1, "character": 0}, "end": {"line": 1, "character": 1}}});
        assert_eq!(places(&one).len(), 1);
    }

    #[test]
    fn pages_say_how_to_go_on_and_outside_files_are_not_opened() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::write(root.join("a.py"), "x = 1\ny = x + 1\n").unwrap();
        let roots = RootSet::open([&root]).unwrap();
        let mut sources = Sources::unjudged(roots);
        let places: Vec<Place> = (0..3)
            .map(|i| Place {
                path: root.join("a.py"),
                start: Position::new(i % 2, 0),
                label: None,
                name: None,
                depth: 0,
            })
            .chain(std::iter::once(Place {
                path: PathBuf::from("/usr/lib/python3/typing.py"),
                start: Position::new(9, 2),
                label: None,
                name: None,
                depth: 0,
            }))
            .collect();
        let text = render_places(&places, &mut sources, 0, 2, ("reference", "references"));
        assert_eq!(
            text,
            "a.py:1:1: x = 1\na.py:2:1: y = x + 1\n(4 references in all; showing 1-2; pass offset=2 for more)\n"
        );
        let text = render_places(&places, &mut sources, 3, 2, ("reference", "references"));
        assert_eq!(
            text,
            "/usr/lib/python3/typing.py:10:3 (outside the roots)\n(4 references in all; showing 4-4)\n"
        );
        assert_eq!(
            render_places(&[], &mut sources, 0, 10, ("reference", "references")),
            "No references.\n"
        );
    }

    #[test]
    fn hover_contents_in_every_shape() {
        assert_eq!(
            hover_text(&json!({"contents": {"kind": "markdown", "value": "**x**: int"}})).unwrap(),
            "**x**: int"
        );
        assert_eq!(
            hover_text(&json!({"contents": [{"language": "python", "value": "x: int"}, "doc"]}))
                .unwrap(),
            "```python\nx: int\n```\n\ndoc"
        );
        assert_eq!(hover_text(&json!({"contents": ""})), None);
        assert_eq!(hover_text(&Value::Null), None);
    }

    #[test]
    fn a_rename_shows_each_line_before_and_after() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::write(root.join("m.py"), "def old(): pass\nold()\n").unwrap();
        let roots = RootSet::open([&root]).unwrap();
        let mut sources = Sources::unjudged(roots);
        let uri = crate::lsp::position::uri_of(&root.join("m.py"));
        let edit = |line: u32| json!({"range": {"start": {"line": line, "character": if line == 0 {4} else {0}}, "end": {"line": line, "character": if line == 0 {7} else {3}}}, "newText": "new"});
        let result = json!({"changes": {uri.as_str(): [edit(1), edit(0)]}});
        let (text, count) = rename_edits(&result, &mut sources);
        assert_eq!(count, 2);
        assert_eq!(
            text,
            "m.py:1:5: def old(): pass\n  -> def new(): pass\nm.py:2:1: old()\n  -> new()\n"
        );
    }

    #[test]
    fn symbol_kinds_have_names() {
        assert_eq!(kind_name(lsp_types::SymbolKind::FUNCTION), "function");
        assert_eq!(
            kind_name(lsp_types::SymbolKind::TYPE_PARAMETER),
            "type parameter"
        );
    }
}
