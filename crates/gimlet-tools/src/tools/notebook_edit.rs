//! `notebook_edit`: one cell of a Jupyter notebook, with the file tools' guarantees
//! (staleness check, atomic write, journal for `undo`).

use std::borrow::Cow;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use crate::change::{check_fresh, commit, load};
use crate::context::{AccessKind, ToolContext, ToolEnv};
use crate::error::ToolError;
use crate::fs::Journal;
use crate::notebook::{CellRef, CellType, Notebook};
use crate::permission::Access;
use crate::tool::Tool;
use crate::vocab::{ToolFlags, ToolOutput};

const DESCRIPTION: &str = include_str!("notebook_edit.md");

/// What `notebook_edit` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum EditMode {
    /// Set the cell's source.
    #[default]
    Replace,
    /// Add a new cell.
    Insert,
    /// Remove the cell.
    Delete,
}

/// Arguments of `notebook_edit`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NotebookEditArgs {
    /// The notebook: absolute, or relative to the first root folder.
    pub path: String,
    /// The cell's id, as `read` shows it.
    pub cell_id: Option<String>,
    /// The cell's 0-based position (when cells have no ids, or to insert at a position).
    pub cell_index: Option<usize>,
    /// The new source of the cell (ignored by `delete`).
    pub new_source: String,
    /// `code`, `markdown` or `raw`: the type of an inserted cell (default `code`), or a new
    /// type for a replaced one.
    pub cell_type: Option<CellType>,
    /// `replace` (default), `insert` or `delete`.
    pub edit_mode: Option<EditMode>,
}

/// The `notebook_edit` tool.
#[derive(Debug, Default, Clone, Copy)]
pub struct NotebookEditTool;

impl Tool for NotebookEditTool {
    type Args = NotebookEditArgs;
    const NAME: &'static str = "notebook_edit";
    const TITLE: &'static str = "Edit notebook cell";

    fn description(&self, _env: &ToolEnv) -> Cow<'static, str> {
        DESCRIPTION.into()
    }

    fn flags(&self, _args: Option<&NotebookEditArgs>) -> ToolFlags {
        ToolFlags::MUTATING
    }

    async fn validate(
        &self,
        args: NotebookEditArgs,
        _ctx: &ToolContext,
    ) -> Result<NotebookEditArgs, ToolError> {
        if !std::path::Path::new(&args.path)
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("ipynb"))
        {
            return Err(ToolError::invalid(format!(
                "`{}` is not a notebook (.ipynb); edit other files with `edit`",
                args.path
            )));
        }
        let mode = args.edit_mode.unwrap_or_default();
        if args.cell_id.is_some() && args.cell_index.is_some() {
            return Err(ToolError::invalid(
                "give `cell_id` or `cell_index`, not both",
            ));
        }
        if mode != EditMode::Insert && args.cell_id.is_none() && args.cell_index.is_none() {
            return Err(ToolError::invalid(
                "say which cell: `cell_id` (as `read` shows it) or `cell_index` (0-based)",
            ));
        }
        Ok(args)
    }

    async fn accesses(
        &self,
        args: &NotebookEditArgs,
        ctx: &ToolContext,
    ) -> Result<Vec<Access>, ToolError> {
        Ok(vec![ctx.path_access(&args.path, AccessKind::Write).await?])
    }

    async fn execute(
        &self,
        args: NotebookEditArgs,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let resolved = {
            let path = args.path.clone();
            ctx.blocking(move |ctx| Ok(ctx.resolve_allowed(&path)?))
                .await?
        };
        let _guard = ctx.env().locks().lock(&resolved.path).await;
        ctx.blocking(move |ctx| {
            let loaded = load(resolved)?;
            let display = loaded.resolved.display();
            let Some(bytes) = &loaded.bytes else {
                return Err(ToolError::invalid(format!(
                    "`{display}` does not exist; create a notebook with `write` first"
                )));
            };
            check_fresh(&ctx, &loaded, None)?;
            let mut notebook = Notebook::parse(bytes).map_err(|why| {
                ToolError::invalid(format!("`{display}` is not a notebook: {why}"))
            })?;
            let mode = args.edit_mode.unwrap_or_default();
            let target = match (&args.cell_id, args.cell_index) {
                (Some(id), _) => Some(notebook.find(CellRef::Id(id))),
                (None, Some(i)) if mode == EditMode::Insert => {
                    (i <= notebook.len()).then_some(Ok(i)).or(Some(Err(format!(
                        "cannot insert at {i}: the notebook has {} cell(s); insert at 0 to {}",
                        notebook.len(),
                        notebook.len()
                    ))))
                }
                (None, Some(i)) => Some(notebook.find(CellRef::Index(i))),
                (None, None) => None,
            }
            .transpose()
            .map_err(ToolError::invalid)?;
            let (summary, index, id) = match mode {
                EditMode::Replace => {
                    let index = target.unwrap_or_default();
                    notebook.replace(index, &args.new_source, args.cell_type);
                    (String::from("Replaced"), index, notebook.id_of(index))
                }
                EditMode::Insert => {
                    let index = match (&args.cell_id, target) {
                        (Some(_), Some(after)) => after + 1,
                        (None, Some(at)) => at,
                        (_, None) => notebook.len(),
                    };
                    let kind = args.cell_type.unwrap_or(CellType::Code);
                    let id = notebook.insert(index, &args.new_source, kind);
                    (String::from("Inserted"), index, id)
                }
                EditMode::Delete => {
                    let index = target.unwrap_or_default();
                    let id = notebook.id_of(index);
                    notebook.delete(index);
                    (String::from("Deleted"), index, id)
                }
            };
            let change = ctx.session().state::<Journal>().begin();
            let new = notebook.to_bytes();
            let hash = commit(&ctx, NotebookEditTool::NAME, change, &loaded, Some(&new))?
                .map(|h| h.to_string())
                .unwrap_or_default();
            let named = id.as_deref().map_or_else(
                || format!("cell {index}"),
                |id| format!("cell {index} (id {id})"),
            );
            Ok(ToolOutput::text(format!(
                "{summary} {named} in `{display}`; it now has {} cells. New hash {hash}.",
                notebook.len()
            ))
            .with_title(display.clone())
            .with_structured(json!({
                "path": display,
                "hash": hash,
                "cell_index": index,
                "cell_id": id,
                "cells": notebook.len(),
            })))
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::testutil::TestWorkspace;

    const NOTEBOOK: &str = "{\n \"cells\": [\n  {\n   \"cell_type\": \"code\",\n   \"execution_count\": 3,\n   \"id\": \"a1\",\n   \"metadata\": {},\n   \"outputs\": [\n    {\n     \"name\": \"stdout\",\n     \"output_type\": \"stream\",\n     \"text\": [\n      \"hi\\n\"\n     ]\n    }\n   ],\n   \"source\": [\n    \"print('hi')\"\n   ]\n  }\n ],\n \"metadata\": {},\n \"nbformat\": 4,\n \"nbformat_minor\": 5\n}\n";

    #[tokio::test]
    async fn read_shows_cells_and_edits_land_atomically_and_undo() {
        let ws = TestWorkspace::new();
        let path = ws.write("nb.ipynb", NOTEBOOK);
        let refused = ws
            .error(
                "notebook_edit",
                json!({"path": "nb.ipynb", "cell_id": "a1", "new_source": "x"}),
            )
            .await;
        assert!(
            refused.contains("read"),
            "an unread notebook is not edited: {refused}"
        );

        let shown = ws.text("read", json!({"path": "nb.ipynb"})).await;
        assert!(
            shown.contains("── cell 0 · id a1 · code [3] ──\nprint('hi')\n── output ──\nhi"),
            "{shown}"
        );

        let done = ws
            .text(
                "notebook_edit",
                json!({"path": "nb.ipynb", "cell_id": "a1", "new_source": "print('bye')"}),
            )
            .await;
        assert!(done.starts_with("Replaced cell 0 (id a1)"), "{done}");
        let after = std::fs::read_to_string(&path).unwrap();
        assert!(after.contains("\"print('bye')\""), "{after}");
        assert!(!after.contains("\"hi\\n\""), "outputs cleared: {after}");

        ws.text(
            "notebook_edit",
            json!({"path": "nb.ipynb", "edit_mode": "insert", "cell_type": "markdown", "new_source": "# Notes"}),
        )
        .await;
        let shown = ws.text("read", json!({"path": "nb.ipynb"})).await;
        assert!(shown.contains("2 cells"), "{shown}");
        assert!(shown.contains("markdown ──\n# Notes"), "{shown}");

        ws.text("undo", json!({"path": "nb.ipynb"})).await;
        ws.text("undo", json!({"path": "nb.ipynb"})).await;
        assert_eq!(std::fs::read_to_string(&path).unwrap(), NOTEBOOK);
    }

    #[tokio::test]
    async fn bad_edits_are_refused_and_leave_the_file() {
        let ws = TestWorkspace::new();
        let path = ws.write("nb.ipynb", NOTEBOOK);
        ws.text("read", json!({"path": "nb.ipynb"})).await;
        for (args, needle) in [
            (
                json!({"path": "nb.ipynb", "cell_id": "zz", "new_source": ""}),
                "the ids are: a1",
            ),
            (
                json!({"path": "nb.ipynb", "cell_index": 4, "new_source": "", "edit_mode": "delete"}),
                "1 cell(s)",
            ),
            (
                json!({"path": "nb.ipynb", "new_source": "x"}),
                "say which cell",
            ),
            (
                json!({"path": "a.py", "cell_index": 0, "new_source": "x"}),
                "not a notebook",
            ),
        ] {
            let err = ws.error("notebook_edit", args).await;
            assert!(err.contains(needle), "{err}");
        }
        assert_eq!(std::fs::read_to_string(&path).unwrap(), NOTEBOOK);
        ws.write("broken.ipynb", "{ not json");
        ws.text("read", json!({"path": "broken.ipynb"})).await;
        let err = ws
            .error(
                "notebook_edit",
                json!({"path": "broken.ipynb", "cell_index": 0, "new_source": "x"}),
            )
            .await;
        assert!(err.contains("is not a notebook"), "{err}");
    }
}
