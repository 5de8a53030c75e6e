//! [`ToolRegistry`]: name -> tool, merged from built-ins, plugins and the caller's own tools.
//!
//! The typed [`Tool`] trait is erased here, once, by a blanket `impl<T: Tool> DynTool for T`
//! that parses `serde_json::Value` into `T::Args` (as codex erases its `ToolHandler`).

use std::any::Any;
use std::borrow::Cow;
use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::Value;

use crate::context::ask::BoxFuture;
use crate::context::{ToolContext, ToolEnv};
use crate::error::ToolError;
use crate::permission::Access;
use crate::schema::input_schema;
use crate::tool::Tool;
use crate::tools;
use crate::vocab::{JsonObject, OutputLimits, ToolFlags, ToolOutput};

/// Parsed arguments of some tool, behind a type-erased box.
pub struct ErasedArgs(Box<dyn Any + Send + Sync>);

impl std::fmt::Debug for ErasedArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ErasedArgs")
    }
}

impl ErasedArgs {
    pub(crate) fn new<A: Send + Sync + 'static>(args: A) -> Self {
        Self(Box::new(args))
    }

    pub(crate) fn downcast<A: 'static>(self) -> Result<A, ToolError> {
        self.0.downcast::<A>().map(|b| *b).map_err(|_| mismatch())
    }

    fn downcast_ref<A: 'static>(&self) -> Result<&A, ToolError> {
        self.0.downcast_ref::<A>().ok_or_else(mismatch)
    }
}

fn mismatch() -> ToolError {
    ToolError::failed("internal error: arguments of another tool were passed; please report this")
}

/// A tool with its type erased: what the registry stores and the pipeline calls.
///
/// Implemented for every [`Tool`]; plugin tools without a Rust type (config-declared commands)
/// implement it directly.
pub trait DynTool: Send + Sync {
    /// The wire name.
    fn name(&self) -> &str;
    /// The human title.
    fn title(&self) -> &str;
    /// Work done once before listing.
    fn init<'a>(&'a self, env: &'a ToolEnv) -> BoxFuture<'a, ()>;
    /// The description.
    fn description(&self, env: &ToolEnv) -> Cow<'static, str>;
    /// Extra instructions for the server's `instructions`.
    fn instructions(&self, env: &ToolEnv) -> Option<Cow<'static, str>>;
    /// Whether the tool is offered.
    fn enabled(&self, env: &ToolEnv) -> bool;
    /// The input schema.
    fn input_schema(&self) -> JsonObject;
    /// The output schema, if any.
    fn output_schema(&self) -> Option<JsonObject>;
    /// Flags for an input, or the conservative ones for `None`.
    fn flags(&self, args: Option<&ErasedArgs>) -> ToolFlags;
    /// Whether read-only mode offers the tool ([`Tool::offered_read_only`]).
    fn offered_read_only(&self) -> bool {
        self.flags(None).read_only
    }
    /// Whether calls start on the async runtime ([`Tool::inline`]).
    fn inline(&self) -> bool {
        false
    }
    /// Output limits.
    fn output_limits(&self, env: &ToolEnv) -> OutputLimits;
    /// Parses JSON arguments; the error names the field.
    fn parse(&self, args: Value) -> Result<ErasedArgs, ToolError>;
    /// Semantic validation.
    fn validate<'a>(
        &'a self,
        args: ErasedArgs,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<ErasedArgs, ToolError>>;
    /// What the call will touch ([`Tool::accesses`]).
    fn accesses<'a>(
        &'a self,
        args: &'a ErasedArgs,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<Vec<Access>, ToolError>>;
    /// What to show beside a question about the call ([`Tool::ask_detail`]).
    fn ask_detail<'a>(
        &'a self,
        _args: &'a ErasedArgs,
        _ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<Option<String>, ToolError>> {
        Box::pin(async { Ok(None) })
    }
    /// Runs the call.
    fn execute<'a>(
        &'a self,
        args: ErasedArgs,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>>;
}

impl<T: Tool> DynTool for T {
    fn name(&self) -> &str {
        T::NAME
    }

    fn title(&self) -> &str {
        T::TITLE
    }

    fn init<'a>(&'a self, env: &'a ToolEnv) -> BoxFuture<'a, ()> {
        Box::pin(Tool::init(self, env))
    }

    fn description(&self, env: &ToolEnv) -> Cow<'static, str> {
        Tool::description(self, env)
    }

    fn instructions(&self, env: &ToolEnv) -> Option<Cow<'static, str>> {
        Tool::instructions(self, env)
    }

    fn enabled(&self, env: &ToolEnv) -> bool {
        Tool::enabled(self, env)
    }

    fn input_schema(&self) -> JsonObject {
        input_schema::<T::Args>()
    }

    fn output_schema(&self) -> Option<JsonObject> {
        Tool::output_schema(self)
    }

    fn flags(&self, args: Option<&ErasedArgs>) -> ToolFlags {
        let args = args.and_then(|a| a.downcast_ref::<T::Args>().ok());
        Tool::flags(self, args)
    }

    fn offered_read_only(&self) -> bool {
        Tool::offered_read_only(self)
    }

    fn inline(&self) -> bool {
        Tool::inline(self)
    }

    fn output_limits(&self, env: &ToolEnv) -> OutputLimits {
        Tool::output_limits(self, env)
    }

    fn parse(&self, args: Value) -> Result<ErasedArgs, ToolError> {
        crate::args::parse_args::<T::Args>(T::NAME, args)
            .map(ErasedArgs::new)
            .map_err(|message| ToolError::InvalidArguments {
                tool: T::NAME.to_owned(),
                message: self.format_schema_error(message),
            })
    }

    fn validate<'a>(
        &'a self,
        args: ErasedArgs,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<ErasedArgs, ToolError>> {
        Box::pin(async move {
            let args = args.downcast::<T::Args>()?;
            Tool::validate(self, args, ctx).await.map(ErasedArgs::new)
        })
    }

    fn accesses<'a>(
        &'a self,
        args: &'a ErasedArgs,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<Vec<Access>, ToolError>> {
        Box::pin(async move {
            let args = args.downcast_ref::<T::Args>()?;
            Tool::accesses(self, args, ctx).await
        })
    }

    fn ask_detail<'a>(
        &'a self,
        args: &'a ErasedArgs,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<Option<String>, ToolError>> {
        Box::pin(async move {
            let args = args.downcast_ref::<T::Args>()?;
            Tool::ask_detail(self, args, ctx).await
        })
    }

    fn execute<'a>(
        &'a self,
        args: ErasedArgs,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let args = args.downcast::<T::Args>()?;
            Tool::execute(self, args, ctx).await
        })
    }
}

/// Where a tool came from; on a name clash the later source wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ToolSource {
    /// Shipped with gimlet.
    Builtin,
    /// Declared in the config file.
    Plugin,
    /// Registered by the program embedding gimlet-tools.
    Caller,
}

/// What `tools/list` shows of one tool, produced once at init.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    /// The wire name.
    pub name: String,
    /// The human title.
    pub title: String,
    /// The description.
    pub description: String,
    /// The input schema.
    pub input_schema: JsonObject,
    /// The output schema, if any.
    pub output_schema: Option<JsonObject>,
    /// Flags that hold for every input (for the annotations).
    pub flags: ToolFlags,
    /// Extra instructions for the server's `instructions`.
    pub instructions: Option<String>,
}

struct Entry {
    tool: Arc<dyn DynTool>,
    source: ToolSource,
}

/// The tools a server offers, in a fixed order (registration order; a replacement keeps the
/// place of the tool it replaces).
#[derive(Default)]
pub struct ToolRegistry {
    entries: Vec<Entry>,
    disabled: BTreeSet<String>,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.entries.iter().map(|e| (e.tool.name(), e.source)))
            .finish()
    }
}

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// A registry with every built-in tool.
    pub fn builtin() -> Self {
        let mut registry = Self::new();
        register_builtins(&mut registry);
        registry
    }

    /// Adds a typed tool from a source.
    pub fn register<T: Tool>(&mut self, tool: T, source: ToolSource) -> &mut Self {
        self.register_dyn(Arc::new(tool), source)
    }

    /// Adds a type-erased tool from a source. On a name clash the higher source wins
    /// (built-in < plugin < caller); an equal source replaces.
    pub fn register_dyn(&mut self, tool: Arc<dyn DynTool>, source: ToolSource) -> &mut Self {
        match self
            .entries
            .iter_mut()
            .find(|e| e.tool.name() == tool.name())
        {
            Some(existing) if existing.source > source => {
                tracing::debug!(tool = tool.name(), "kept the higher-priority tool");
            }
            Some(existing) => *existing = Entry { tool, source },
            None => self.entries.push(Entry { tool, source }),
        }
        self
    }

    /// Hides a tool by name.
    pub fn disable(&mut self, name: &str) -> &mut Self {
        self.disabled.insert(name.to_owned());
        self
    }

    /// The tool of a name, unless disabled.
    pub fn get(&self, name: &str) -> Option<Arc<dyn DynTool>> {
        if self.disabled.contains(name) {
            return None;
        }
        self.entries
            .iter()
            .find(|e| e.tool.name() == name)
            .map(|e| Arc::clone(&e.tool))
    }

    /// The source of a tool.
    pub fn source(&self, name: &str) -> Option<ToolSource> {
        self.entries
            .iter()
            .find(|e| e.tool.name() == name)
            .map(|e| e.source)
    }

    /// The tools not disabled by name, in order (whether their environment offers them is
    /// [`DynTool::enabled`]).
    pub fn tools(&self) -> impl Iterator<Item = &Arc<dyn DynTool>> {
        self.entries
            .iter()
            .map(|e| &e.tool)
            .filter(|t| !self.disabled.contains(t.name()))
    }

    /// The tools a client is offered in this environment, in order: not disabled, enabled
    /// ([`DynTool::enabled`]), and read-only in read-only mode. Exactly the tools of
    /// `tools/list` (after [`ToolRegistry::init`]).
    pub fn offered<'a>(&'a self, env: &'a ToolEnv) -> impl Iterator<Item = &'a Arc<dyn DynTool>> {
        let read_only_mode = env.policy().mode() == crate::Mode::ReadOnly;
        self.tools()
            .filter(move |t| t.enabled(env) && (!read_only_mode || t.offered_read_only()))
    }

    /// Names of the tools, enabled or not, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tools().map(|t| t.name())
    }

    /// Runs every tool's `init`, then returns the specs of the enabled ones, in order.
    pub async fn init(&self, env: &ToolEnv) -> Vec<ToolSpec> {
        let mut specs = Vec::new();
        for tool in self.tools() {
            tool.init(env).await;
        }
        for tool in self.offered(env) {
            specs.push(ToolSpec {
                name: tool.name().to_owned(),
                title: tool.title().to_owned(),
                description: tool.description(env).into_owned(),
                input_schema: tool.input_schema(),
                output_schema: tool.output_schema(),
                flags: tool.flags(None),
                instructions: tool.instructions(env).map(Cow::into_owned),
            });
        }
        specs
    }
}

/// Registers every built-in tool, in the order `tools/list` shows them.
fn register_builtins(registry: &mut ToolRegistry) {
    registry.register(tools::ReadTool, ToolSource::Builtin);
    registry.register(tools::WriteTool, ToolSource::Builtin);
    registry.register(tools::EditTool, ToolSource::Builtin);
    registry.register(tools::MultiEditTool, ToolSource::Builtin);
    registry.register(tools::ApplyPatchTool, ToolSource::Builtin);
    registry.register(tools::NotebookEditTool, ToolSource::Builtin);
    registry.register(tools::UndoTool, ToolSource::Builtin);
    registry.register(tools::CheckpointsTool, ToolSource::Builtin);
    registry.register(tools::DiffTool, ToolSource::Builtin);
    registry.register(tools::RestoreTool, ToolSource::Builtin);
    registry.register(tools::GrepTool, ToolSource::Builtin);
    registry.register(tools::GlobTool, ToolSource::Builtin);
    registry.register(tools::LsTool, ToolSource::Builtin);
    registry.register(tools::LspTool, ToolSource::Builtin);
    registry.register(tools::BashTool::default(), ToolSource::Builtin);
    registry.register(tools::BashOutputTool, ToolSource::Builtin);
    registry.register(tools::BashKillTool, ToolSource::Builtin);
    registry.register(tools::WebFetchTool::default(), ToolSource::Builtin);
    registry.register(tools::WebSearchTool::default(), ToolSource::Builtin);
    registry.register(tools::AskUserTool, ToolSource::Builtin);
    registry.register(tools::TodoWriteTool, ToolSource::Builtin);
    registry.register(tools::TodoReadTool, ToolSource::Builtin);
}
