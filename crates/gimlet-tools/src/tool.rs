//! The [`Tool`] trait and the values a tool declares and returns.
//!
//! A tool is one type implementing [`Tool`]: typed arguments with a JSON schema, a description,
//! flags, and `validate` / `accesses` / `ask_detail` / `execute`. The registry erases the type once
//! (`registry.rs`); [`crate::pipeline::run`] is the only caller of these methods.

use std::borrow::Cow;
use std::future::Future;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;

use crate::context::{ToolContext, ToolEnv};
use crate::error::ToolError;
use crate::permission::Access;

pub use crate::vocab::{
    Content, Cut, CutBy, FilePage, InterruptBehavior, JsonObject, OutputLimits, ToolFlags,
    ToolOutput, Truncation, TruncationMode, error_marker,
};

/// A tool: typed arguments, a description, flags, and the three steps the pipeline runs.
///
/// Implementations write `async fn` for the async methods; the trait spells them as
/// `impl Future + Send` so that the futures stay `Send` (as codex's `ToolHandler` does).
///
/// ```
/// use std::borrow::Cow;
/// use gimlet_tools::{Tool, ToolContext, ToolEnv, ToolError, ToolFlags, ToolOutput};
///
/// /// Arguments of `echo`.
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct EchoArgs {
///     /// The text to send back.
///     text: String,
/// }
///
/// struct Echo;
/// impl Tool for Echo {
///     type Args = EchoArgs;
///     const NAME: &'static str = "echo";
///     const TITLE: &'static str = "Echo";
///     fn description(&self, _env: &ToolEnv) -> Cow<'static, str> {
///         "Sends the text back.".into()
///     }
///     fn flags(&self, _args: Option<&EchoArgs>) -> ToolFlags {
///         ToolFlags::READ_ONLY
///     }
///     async fn execute(&self, args: EchoArgs, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
///         Ok(ToolOutput::text(args.text))
///     }
/// }
/// ```
pub trait Tool: Send + Sync + 'static {
    /// The arguments; their schemars schema is the tool's `inputSchema`.
    type Args: DeserializeOwned + JsonSchema + Send + Sync + 'static;

    /// The wire name, e.g. `read`.
    const NAME: &'static str;
    /// A short human title, e.g. `Read file`.
    const TITLE: &'static str;

    /// Work done once before the tool is listed (e.g. detecting the environment).
    fn init(&self, _env: &ToolEnv) -> impl Future<Output = ()> + Send {
        async {}
    }

    /// The description the model reads. May depend on the environment.
    fn description(&self, env: &ToolEnv) -> Cow<'static, str>;

    /// Extra guidance gathered into the server's `instructions`.
    fn instructions(&self, _env: &ToolEnv) -> Option<Cow<'static, str>> {
        None
    }

    /// Whether the tool is offered in this environment.
    fn enabled(&self, _env: &ToolEnv) -> bool {
        true
    }

    /// The JSON schema of [`ToolOutput::structured`], if the tool returns structured data.
    ///
    /// Derive it from the result type, `#[derive(Serialize, JsonSchema)]` with its fields
    /// documented, with [`crate::schema::output_schema`], and build the result with
    /// [`ToolOutput::with_structured_of`]: the schema and the value then cannot disagree.
    fn output_schema(&self) -> Option<JsonObject> {
        None
    }

    /// Flags for a given input; `None` asks for the values that hold for every input
    /// (used for the advertised annotations, so be conservative there).
    fn flags(&self, _args: Option<&Self::Args>) -> ToolFlags {
        ToolFlags::default()
    }

    /// Whether read-only mode offers the tool: some of its uses only read (a use that changes
    /// things is refused there call by call, by its flags). By default what `flags(None)`
    /// says; a tool whose flags without arguments must stay conservative (it changes files
    /// for some inputs) but which mostly reads says `true` here.
    fn offered_read_only(&self) -> bool {
        self.flags(None).read_only
    }

    /// Whether a server starts this tool's calls on the async runtime's thread rather than on
    /// a worker of the blocking pool ([`crate::pipeline::run_on_worker`]). Only for a tool
    /// whose file work all goes through [`ToolContext::nonblocking_first`] (or
    /// [`ToolContext::blocking`]): a small call then finishes without a thread hand-off, and a
    /// step that would wait moves to the blocking pool. Default `false`.
    fn inline(&self) -> bool {
        false
    }

    /// How much output a result may carry before it is truncated. The default is the
    /// environment's limits (2000 lines, 45 KiB unless configured); a tool may change the mode
    /// or the size (its "max result size").
    fn output_limits(&self, env: &ToolEnv) -> OutputLimits {
        env.limits()
    }

    /// Rewords a schema error; the default message already names the field.
    fn format_schema_error(&self, message: String) -> String {
        message
    }

    /// Semantic checks after the schema parsed. May return corrected arguments.
    fn validate(
        &self,
        args: Self::Args,
        _ctx: &ToolContext,
    ) -> impl Future<Output = Result<Self::Args, ToolError>> + Send {
        async { Ok(args) }
    }

    /// What the call will touch: paths, commands, hosts. The permission stage judges these
    /// against the roots, the mode and the rules.
    fn accesses(
        &self,
        _args: &Self::Args,
        _ctx: &ToolContext,
    ) -> impl Future<Output = Result<Vec<Access>, ToolError>> + Send {
        async { Ok(Vec::new()) }
    }

    /// What to show the user beside a question about this call (the diff a change would
    /// make), asked for only when the policy's verdict is Ask. A tool never judges or asks
    /// itself: the permission stage judges [`Tool::accesses`] and puts the question.
    fn ask_detail(
        &self,
        _args: &Self::Args,
        _ctx: &ToolContext,
    ) -> impl Future<Output = Result<Option<String>, ToolError>> + Send {
        async { Ok(None) }
    }

    /// Runs the call.
    fn execute(
        &self,
        args: Self::Args,
        ctx: &ToolContext,
    ) -> impl Future<Output = Result<ToolOutput, ToolError>> + Send;
}
