//! The built-in tools, one file each.

mod ls;
mod read;

pub use ls::{LsArgs, LsTool};
pub use read::{ReadArgs, ReadTool};

use crate::registry::{ToolRegistry, ToolSource};

/// Registers every built-in tool, in the order `tools/list` shows them.
pub(crate) fn register_builtins(registry: &mut ToolRegistry) {
    registry.register(ReadTool, ToolSource::Builtin);
    registry.register(LsTool, ToolSource::Builtin);
}
