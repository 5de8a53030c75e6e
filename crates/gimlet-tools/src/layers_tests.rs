//! The layers, checked: the import graph of this crate's top-level rooms (a folder, or a file
//! at the top) has no loop, no tool imports another tool, and `gimlet-mcp`'s files import each
//! other without a loop. Read from the source as written (`crate::room` paths and `use crate::{..}`
//! groups), comments and test files left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every `.rs` file below `dir`, test files left out.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let name = path.file_name().unwrap().to_string_lossy();
                if !name.ends_with("tests.rs") && name != "testutil.rs" {
                    found.push(path);
                }
            }
        }
    }
    found.sort();
    found
}

/// The code of a file: comments and inline test modules left out.
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let text = text
        .split("#[cfg(test)]\nmod tests")
        .next()
        .unwrap_or_default();
    text.lines()
        .map(|line| match line.trim_start() {
            l if l.starts_with("//") => "",
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The rooms a file's code names: `crate::room` anywhere, and `room` in `use crate::{room, ..}`.
fn named_rooms(code: &str) -> BTreeSet<String> {
    let word = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
            .collect()
    };
    let mut rooms = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let group = &group[..group.find('}').unwrap_or(group.len())];
            // Top-level names of the group only: after a `{` or a `,` at depth 0.
            let mut depth = 0;
            let mut start = true;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => start = true,
                    c if c.is_whitespace() => {}
                    _ if start && depth == 0 => {
                        rooms.insert(word(&group[i..]));
                        start = false;
                    }
                    _ => {}
                }
            }
        } else {
            rooms.insert(word(rest));
        }
    }
    rooms.retain(|r| !r.is_empty());
    rooms
}

/// The room of a file under `src`: its top folder, or its own name for a file at the top.
fn room_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap();
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy();
    first.trim_end_matches(".rs").to_owned()
}

/// Room -> the rooms it imports.
fn graph(src: &Path, room: impl Fn(&Path, &Path) -> String) -> BTreeMap<String, BTreeSet<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in sources(src) {
        let from = room(src, &file);
        if from == "lib" || from == "main" {
            continue;
        }
        let to = named_rooms(&code(&file));
        let entry = graph.entry(from.clone()).or_default();
        entry.extend(to.into_iter().filter(|r| *r != from && r != "testutil"));
    }
    graph
}

/// The loops of a graph: its strongly connected parts with more than one room (Tarjan).
fn loops(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Walk<'a> {
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        loops: Vec<Vec<String>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, v: &'a str) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            for w in self.graph.get(v).into_iter().flatten() {
                let w = w.as_str();
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w]);
                    self.low.insert(v, low);
                } else if self.stack.contains(&w) {
                    let low = self.low[v].min(self.index[w]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut part = Vec::new();
                while let Some(w) = self.stack.pop() {
                    part.push(w.to_owned());
                    if w == v {
                        break;
                    }
                }
                if part.len() > 1 {
                    part.sort();
                    self.loops.push(part);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        loops: Vec::new(),
    };
    for v in graph.keys() {
        if !walk.index.contains_key(v.as_str()) {
            walk.visit(v);
        }
    }
    walk.loops
}

fn crate_src(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(name)
        .join("src")
}

#[test]
fn no_import_loop_spans_two_rooms() {
    let src = crate_src("gimlet-tools");
    let graph = graph(&src, room_of);
    assert!(graph.contains_key("context") && graph["tools"].contains("context"));
    assert_eq!(loops(&graph), Vec::<Vec<String>>::new(), "{graph:#?}");
}

#[test]
fn the_bottom_rooms_import_nothing_above_them() {
    let graph = graph(&crate_src("gimlet-tools"), room_of);
    let allowed: &[(&str, &[&str])] = &[
        ("util", &[]),
        ("spill", &["util"]),
        ("terminal", &[]),
        ("output", &["spill", "util", "terminal"]),
        ("vocab", &["output", "spill"]),
        ("fs", &["util"]),
        // The store and the scan know the config and nothing of calls, tools or the pipeline.
        ("checkpoint", &["config", "util"]),
    ];
    for (room, may) in allowed {
        let extra: Vec<&String> = graph[*room]
            .iter()
            .filter(|r| !may.contains(&r.as_str()))
            .collect();
        assert!(extra.is_empty(), "{room} imports {extra:?}");
    }
}

#[test]
fn no_tool_imports_another_tool() {
    let tools = crate_src("gimlet-tools").join("tools");
    let names: BTreeSet<String> = sources(&tools)
        .iter()
        .map(|f| room_of(&tools, f))
        .filter(|n| n != "mod")
        .collect();
    for file in sources(&tools) {
        let own = room_of(&tools, &file);
        let code = code(&file);
        for other in &names {
            if *other == own {
                continue;
            }
            for path in [
                format!("super::{other}::"),
                format!("crate::tools::{other}::"),
            ] {
                assert!(
                    !code.contains(&path),
                    "{} imports the tool `{other}` ({path})",
                    file.display()
                );
            }
        }
    }
}

#[test]
fn the_mcp_files_import_each_other_without_a_loop() {
    let src = crate_src("gimlet-mcp");
    let graph = graph(&src, |src, file| {
        let rel = file.strip_prefix(src).unwrap().with_extension("");
        rel.to_string_lossy().replace("/mod", "").replace('/', "::")
    });
    // Files in a folder are named by their path; `crate::transport` names the folder's mod.rs.
    assert!(graph.contains_key("ask") && graph.contains_key("mrtr"));
    assert_eq!(loops(&graph), Vec::<Vec<String>>::new(), "{graph:#?}");
}

#[test]
fn rooms_are_read_from_paths_and_groups() {
    let rooms = named_rooms(
        "use crate::fs::{A, b::C};\nuse crate::{error::ToolError, tool::{Tool, X}};\nlet x = crate::util::hex(&y);",
    );
    assert_eq!(
        rooms.into_iter().collect::<Vec<_>>(),
        ["error", "fs", "tool", "util"]
    );
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec!["a"]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.into_iter().map(String::from).collect()))
    .collect();
    assert_eq!(loops(&graph), vec![vec!["a", "b", "c"]]);
}
