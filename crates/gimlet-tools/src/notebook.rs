//! Jupyter notebooks (`.ipynb`, nbformat 4): cells shown for `read`, and the cell edits of
//! `notebook_edit`.
//!
//! A notebook is written back the way Jupyter writes it (`nbformat`: keys sorted, one-space
//! indent, non-ASCII kept, a final newline), so an edit changes only the cells it touches.

use serde::Serialize;
use serde_json::{Map, Value, json};

/// Characters of one output shown at most.
const MAX_OUTPUT_CHARS: usize = 2000;

/// A parsed notebook.
#[derive(Debug, Clone)]
pub(crate) struct Notebook {
    root: Map<String, Value>,
}

/// What kind of cell.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum CellType {
    /// Code.
    Code,
    /// Markdown.
    Markdown,
    /// Raw text.
    Raw,
}

impl CellType {
    fn as_str(self) -> &'static str {
        match self {
            Self::Code => "code",
            Self::Markdown => "markdown",
            Self::Raw => "raw",
        }
    }
}

/// Where an edit applies: a cell's id or its 0-based index.
#[derive(Debug, Clone, Copy)]
pub(crate) enum CellRef<'a> {
    /// The cell's `id`.
    Id(&'a str),
    /// The 0-based position.
    Index(usize),
}

impl Notebook {
    /// Parses a notebook; the error says what is wrong.
    pub(crate) fn parse(bytes: &[u8]) -> Result<Self, String> {
        let value: Value =
            serde_json::from_slice(bytes).map_err(|e| format!("it is not valid JSON: {e}"))?;
        let Value::Object(root) = value else {
            return Err(String::from("it is not a JSON object"));
        };
        if !root.get("cells").is_some_and(Value::is_array) {
            return Err(String::from("it has no `cells` list"));
        }
        if root
            .get("nbformat")
            .and_then(Value::as_u64)
            .is_some_and(|v| v < 4)
        {
            return Err(String::from(
                "it is an nbformat 3 (or older) notebook; open and save it with Jupyter to upgrade it",
            ));
        }
        Ok(Self { root })
    }

    fn cells(&self) -> &[Value] {
        self.root
            .get("cells")
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice)
    }

    fn cells_mut(&mut self) -> &mut Vec<Value> {
        if !self.root.get("cells").is_some_and(Value::is_array) {
            self.root.insert("cells".into(), Value::Array(Vec::new()));
        }
        match self.root.get_mut("cells") {
            Some(Value::Array(cells)) => cells,
            _ => unreachable!("cells was just made an array"),
        }
    }

    /// How many cells.
    pub(crate) fn len(&self) -> usize {
        self.cells().len()
    }

    /// The kernel's language, if the metadata says.
    pub(crate) fn language(&self) -> Option<&str> {
        let meta = self.root.get("metadata")?;
        meta.pointer("/kernelspec/language")
            .or_else(|| meta.pointer("/language_info/name"))
            .and_then(Value::as_str)
    }

    /// Whether cells carry ids (nbformat 4.5 and later).
    fn has_ids(&self) -> bool {
        let minor = self
            .root
            .get("nbformat_minor")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        minor >= 5 || self.cells().iter().any(|c| c.get("id").is_some())
    }

    /// The index a reference points at, or an error listing what there is.
    pub(crate) fn find(&self, cell: CellRef<'_>) -> Result<usize, String> {
        match cell {
            CellRef::Index(i) if i < self.len() => Ok(i),
            CellRef::Index(i) => Err(format!(
                "there is no cell {i}: the notebook has {} cell(s), numbered from 0",
                self.len()
            )),
            CellRef::Id(id) => self
                .cells()
                .iter()
                .position(|c| c.get("id").and_then(Value::as_str) == Some(id))
                .ok_or_else(|| {
                    let ids: Vec<&str> = self
                        .cells()
                        .iter()
                        .filter_map(|c| c.get("id").and_then(Value::as_str))
                        .take(20)
                        .collect();
                    if ids.is_empty() {
                        format!("no cell has the id `{id}` (this notebook's cells have no ids; use `cell_index`)")
                    } else {
                        format!("no cell has the id `{id}`; the ids are: {}", ids.join(", "))
                    }
                }),
        }
    }

    /// Replaces a cell's source (and its type, if given). A code cell's outputs are cleared:
    /// they belonged to the old code.
    pub(crate) fn replace(&mut self, index: usize, source: &str, cell_type: Option<CellType>) {
        let cell = &mut self.cells_mut()[index];
        let Value::Object(cell) = cell else { return };
        cell.insert("source".into(), source_value(source));
        let old = cell
            .get("cell_type")
            .and_then(Value::as_str)
            .unwrap_or("code")
            .to_owned();
        let new = cell_type.map_or(old.clone(), |t| t.as_str().to_owned());
        cell.insert("cell_type".into(), Value::String(new.clone()));
        if new == "code" {
            cell.insert("outputs".into(), Value::Array(Vec::new()));
            cell.insert("execution_count".into(), Value::Null);
        } else if old == "code" {
            cell.remove("outputs");
            cell.remove("execution_count");
        }
    }

    /// Inserts a new cell at `index`; returns its id, if cells have ids.
    pub(crate) fn insert(
        &mut self,
        index: usize,
        source: &str,
        cell_type: CellType,
    ) -> Option<String> {
        let id = self.has_ids().then(new_cell_id);
        let mut cell = json!({
            "cell_type": cell_type.as_str(),
            "metadata": {},
            "source": source_value(source),
        });
        if cell_type == CellType::Code {
            cell["outputs"] = json!([]);
            cell["execution_count"] = Value::Null;
        }
        if let Some(id) = &id {
            cell["id"] = Value::String(id.clone());
        }
        self.cells_mut().insert(index, cell);
        id
    }

    /// Removes a cell.
    pub(crate) fn delete(&mut self, index: usize) {
        self.cells_mut().remove(index);
    }

    /// A cell's id, if it has one.
    pub(crate) fn id_of(&self, index: usize) -> Option<String> {
        self.cells()
            .get(index)?
            .get("id")
            .and_then(Value::as_str)
            .map(ToOwned::to_owned)
    }

    /// The notebook as Jupyter writes it.
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let formatter = serde_json::ser::PrettyFormatter::with_indent(b" ");
        let mut serializer = serde_json::Serializer::with_formatter(&mut out, formatter);
        // serde_json's map is ordered by key, as nbformat's `sort_keys=True`.
        let _ = self.root.serialize(&mut serializer);
        out.push(b'\n');
        out
    }

    /// The cells as `read` shows them: index, id, type, source and text outputs.
    pub(crate) fn render(&self) -> String {
        let mut text = String::new();
        for (i, cell) in self.cells().iter().enumerate() {
            let kind = cell
                .get("cell_type")
                .and_then(Value::as_str)
                .unwrap_or("code");
            let mut header = format!("── cell {i}");
            if let Some(id) = cell.get("id").and_then(Value::as_str) {
                header.push_str(&format!(" · id {id}"));
            }
            header.push_str(&format!(" · {kind}"));
            if let Some(n) = cell.get("execution_count").and_then(Value::as_u64) {
                header.push_str(&format!(" [{n}]"));
            }
            text.push_str(&header);
            text.push_str(" ──\n");
            let source = source_text(cell.get("source"));
            text.push_str(&source);
            if !source.ends_with('\n') {
                text.push('\n');
            }
            for output in cell
                .get("outputs")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let shown = output_text(output);
                if shown.is_empty() {
                    continue;
                }
                text.push_str("── output ──\n");
                text.push_str(&shown);
                if !shown.ends_with('\n') {
                    text.push('\n');
                }
            }
            text.push('\n');
        }
        text
    }
}

/// Source as nbformat stores it: a list of lines, each but the last ending in a newline.
fn source_value(source: &str) -> Value {
    Value::Array(
        source
            .split_inclusive('\n')
            .map(|line| Value::String(line.to_owned()))
            .collect(),
    )
}

/// A multiline string (a string, or a list of strings).
fn source_text(value: Option<&Value>) -> String {
    match value {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(lines)) => lines.iter().filter_map(Value::as_str).collect(),
        _ => String::new(),
    }
}

fn output_text(output: &Value) -> String {
    let text = match output.get("output_type").and_then(Value::as_str) {
        Some("stream") => source_text(output.get("text")),
        Some("execute_result" | "display_data") => {
            let data = output.get("data");
            match data.and_then(|d| d.get("text/plain")) {
                Some(plain) => source_text(Some(plain)),
                None => data
                    .and_then(Value::as_object)
                    .map(|d| {
                        let kinds: Vec<&str> = d.keys().map(String::as_str).collect();
                        format!("[{} output]", kinds.join(", "))
                    })
                    .unwrap_or_default(),
            }
        }
        Some("error") => {
            let name = output
                .get("ename")
                .and_then(Value::as_str)
                .unwrap_or("Error");
            let value = output
                .get("evalue")
                .and_then(Value::as_str)
                .unwrap_or_default();
            format!("{name}: {}", strip_ansi(value))
        }
        _ => String::new(),
    };
    if text.chars().count() > MAX_OUTPUT_CHARS {
        let cut: String = text.chars().take(MAX_OUTPUT_CHARS).collect();
        format!("{cut}\n[... output cut at {MAX_OUTPUT_CHARS} characters]")
    } else {
        text
    }
}

fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// A fresh cell id (8 hex digits, as Jupyter makes them).
fn new_cell_id() -> String {
    crate::util::random_hex().map_or_else(|_| String::from("00000000"), |id| id[..8].to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) const NOTEBOOK: &str = r##"{
 "cells": [
  {
   "cell_type": "markdown",
   "id": "intro",
   "metadata": {},
   "source": [
    "# Title\n",
    "Some text — with a dash"
   ]
  },
  {
   "cell_type": "code",
   "execution_count": 1,
   "id": "calc",
   "metadata": {},
   "outputs": [
    {
     "name": "stdout",
     "output_type": "stream",
     "text": [
      "2\n"
     ]
    },
    {
     "data": {
      "image/png": "iVBOR",
      "text/plain": [
       "<Figure>"
      ]
     },
     "metadata": {},
     "output_type": "display_data"
    }
   ],
   "source": [
    "print(1 + 1)"
   ]
  }
 ],
 "metadata": {
  "kernelspec": {
   "display_name": "Python 3",
   "language": "python",
   "name": "python3"
  }
 },
 "nbformat": 4,
 "nbformat_minor": 5
}
"##;

    #[test]
    fn a_notebook_is_written_back_byte_for_byte_as_jupyter_writes_it() {
        let notebook = Notebook::parse(NOTEBOOK.as_bytes()).unwrap();
        assert_eq!(String::from_utf8(notebook.to_bytes()).unwrap(), NOTEBOOK);
    }

    #[test]
    fn cells_render_with_ids_types_and_outputs() {
        let notebook = Notebook::parse(NOTEBOOK.as_bytes()).unwrap();
        insta::assert_snapshot!(notebook.render(), @r"
        ── cell 0 · id intro · markdown ──
        # Title
        Some text — with a dash

        ── cell 1 · id calc · code [1] ──
        print(1 + 1)
        ── output ──
        2
        ── output ──
        <Figure>
        ");
    }

    #[test]
    fn edits_replace_insert_and_delete() {
        let mut notebook = Notebook::parse(NOTEBOOK.as_bytes()).unwrap();
        let calc = notebook.find(CellRef::Id("calc")).unwrap();
        notebook.replace(calc, "print(2 + 2)\nx = 1", None);
        let rendered = notebook.render();
        assert!(
            rendered.contains("── cell 1 · id calc · code ──\nprint(2 + 2)\nx = 1\n"),
            "{rendered}"
        );
        assert!(
            !rendered.contains("── output"),
            "outputs of old code are cleared: {rendered}"
        );
        let id = notebook.insert(1, "## Part 2", CellType::Markdown).unwrap();
        assert_eq!(id.len(), 8);
        assert_eq!(notebook.find(CellRef::Id(&id)).unwrap(), 1);
        notebook.delete(0);
        assert_eq!(notebook.len(), 2);
        let again = Notebook::parse(&notebook.to_bytes()).unwrap();
        assert_eq!(again.render(), notebook.render());
        assert!(
            notebook
                .find(CellRef::Id("intro"))
                .unwrap_err()
                .contains("calc")
        );
        assert!(
            notebook
                .find(CellRef::Index(5))
                .unwrap_err()
                .contains("2 cell(s)")
        );
    }

    #[test]
    fn not_a_notebook() {
        assert!(
            Notebook::parse(b"{")
                .unwrap_err()
                .contains("not valid JSON")
        );
        assert!(
            Notebook::parse(b"{\"a\": 1}")
                .unwrap_err()
                .contains("no `cells`")
        );
    }
}
