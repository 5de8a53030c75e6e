//! The built-in tools, one file each.

mod apply_patch;
mod ask_user;
mod bash;
mod bash_kill;
mod bash_output;
mod checkpoints;
mod diff;
mod edit;
mod glob;
mod grep;
mod ls;
mod lsp;
mod multi_edit;
mod notebook_edit;
mod read;
mod restore;
mod todo;
mod undo;
mod web_fetch;
mod web_search;
mod write;

pub use apply_patch::{ApplyPatchArgs, ApplyPatchTool};
pub use ask_user::{AskUserArgs, AskUserTool};
pub use bash::{BashArgs, BashTool};
pub use bash_kill::{BashKillArgs, BashKillTool};
pub use bash_output::{BashOutputArgs, BashOutputTool};
pub use checkpoints::{CheckpointsArgs, CheckpointsTool};
pub use diff::{DiffArgs, DiffTool};
pub use edit::{EditArgs, EditTool};
pub use glob::{GlobArgs, GlobTool};
pub use grep::{GrepArgs, GrepTool, OutputMode};
pub use ls::{LsArgs, LsTool};
pub use lsp::{LspArgs, LspOperation, LspTool};
pub use multi_edit::{MultiEditArgs, MultiEditTool, OneEdit};
pub use notebook_edit::{EditMode, NotebookEditArgs, NotebookEditTool};
pub use read::{ReadArgs, ReadTool};
pub use restore::{RestoreArgs, RestoreTool};
pub use todo::{
    Todo, TodoPriority, TodoReadArgs, TodoReadTool, TodoStatus, TodoWriteArgs, TodoWriteTool,
};
pub use undo::{UndoArgs, UndoTool};
pub use web_fetch::{FetchFormat, WebFetchArgs, WebFetchTool};
pub use web_search::{WebSearchArgs, WebSearchTool};
pub use write::{WriteArgs, WriteTool};

#[cfg(test)]
mod fit_tests;
#[cfg(test)]
mod outputs_tests;
#[cfg(test)]
mod utf16_tests;
