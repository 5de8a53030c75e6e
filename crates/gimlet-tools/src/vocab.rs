//! The vocabulary every layer speaks: what a tool declares about itself (flags, output limits)
//! and what it returns (output, content blocks, what truncation did). It imports nothing above
//! the output buffers; [`crate::tool`] re-exports it beside the [`crate::Tool`] trait.

use std::future::Future;
use std::pin::Pin;

use serde_json::{Map, Value};

/// A boxed, `Send` future, as trait objects return them.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A JSON object, as used for schemas and structured output.
pub type JsonObject = Map<String, Value>;

/// What a running call does when it is cancelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InterruptBehavior {
    /// Stop at once: kill processes, stop walks, return [`crate::ToolError::Cancelled`].
    Cancel,
    /// Finish the work (it must not be left half done); the result is dropped.
    #[default]
    Block,
}

/// Properties of a call, as a function of its input (see [`crate::Tool::flags`]).
///
/// The defaults are the conservative ones: not concurrency-safe, not read-only, not
/// destructive, not idempotent, closed-world, interrupt behaviour [`InterruptBehavior::Block`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "independent flags, as MCP's annotations"
)]
pub struct ToolFlags {
    /// May run side by side with other calls of the same session.
    pub concurrency_safe: bool,
    /// Changes nothing outside the server.
    pub read_only: bool,
    /// May destroy or overwrite data.
    pub destructive: bool,
    /// Calling twice with the same input has the effect of calling once.
    pub idempotent: bool,
    /// Reaches outside the machine (web, APIs).
    pub open_world: bool,
    /// What a cancellation does to a running call.
    pub interrupt: InterruptBehavior,
}

impl ToolFlags {
    /// Reads only, can run in parallel, and stops at once when cancelled.
    pub const READ_ONLY: Self = Self {
        concurrency_safe: true,
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: false,
        interrupt: InterruptBehavior::Cancel,
    };

    /// Changes files; runs alone and finishes what it started.
    pub const MUTATING: Self = Self {
        concurrency_safe: false,
        read_only: false,
        destructive: true,
        idempotent: false,
        open_world: false,
        interrupt: InterruptBehavior::Block,
    };
}

/// Where truncation keeps text when an output is over its limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TruncationMode {
    /// Keep the beginning (file content, search results).
    #[default]
    Head,
    /// Keep the end (logs).
    Tail,
    /// Keep the beginning and the end, cut the middle (command output).
    HeadTail,
}

/// How much text a result may carry before the pipeline truncates it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputLimits {
    /// At most this many lines.
    pub max_lines: usize,
    /// At most this many bytes (UTF-8).
    pub max_bytes: usize,
    /// Which part to keep.
    pub mode: TruncationMode,
}

impl OutputLimits {
    /// 2000 lines and 45 KiB, keeping the head. Claude Code saves an MCP result of more than
    /// 50,000 characters to a file and shows the model a 2 KB preview instead: 45 KiB keeps a
    /// whole page, its notice and a command's status footer under that.
    pub const DEFAULT: Self = Self {
        max_lines: 2000,
        max_bytes: 45 * 1024,
        mode: TruncationMode::Head,
    };

    /// Whether `text` is within both limits (the truncation stage leaves it whole).
    pub fn fits(&self, text: &str) -> bool {
        text.len() <= self.max_bytes && crate::output::count_lines(text) <= self.max_lines
    }
}

impl Default for OutputLimits {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// Which limit cut an output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CutBy {
    /// The line limit.
    Lines,
    /// The byte limit.
    Bytes,
    /// Neither: only part of a large output was kept in memory (the rest is in its spill file).
    Memory,
}

/// What [`crate::pipeline::truncate_text`] removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cut {
    /// Lines in the full text.
    pub total_lines: usize,
    /// Bytes in the full text.
    pub total_bytes: usize,
    /// Lines kept at the start (the last may be partial, see `partial_line`).
    pub head_lines: usize,
    /// Lines kept at the end.
    pub tail_lines: usize,
    /// Bytes kept (head and tail).
    pub kept_bytes: usize,
    /// The last head line was cut inside the line.
    pub partial_line: bool,
    /// The limit that cut.
    pub by: CutBy,
}

/// What the truncation stage did to an output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Truncation {
    /// Which part was kept.
    pub mode: TruncationMode,
    /// What was cut.
    pub cut: Cut,
    /// Where the full output is, if it could be saved.
    pub spill: Option<crate::spill::SpillFile>,
}

/// One block of a tool's output.
#[derive(Debug, Clone, PartialEq)]
pub enum Content {
    /// Text for the model.
    Text(String),
    /// An image: raw bytes and a MIME type such as `image/png`.
    Image {
        /// The encoded image.
        data: Vec<u8>,
        /// Its MIME type.
        mime_type: String,
    },
    /// Text that may be larger than memory (see [`crate::output`]); the truncation stage turns
    /// it into [`Content::Text`].
    Long(crate::output::LongText),
    /// A link to a resource the client can read back (e.g. a spilled full output).
    ResourceLink {
        /// The resource's URI, e.g. `gimlet://output/<id>`.
        uri: String,
        /// A short name.
        name: String,
        /// Size in bytes, if known.
        size: Option<u64>,
    },
}

/// A page of a file's lines, as a text output shows it: the output starts with line `first`
/// and its lines up to `last` are the file's, one output line each (a footer may follow).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FilePage {
    /// The file's line shown first (1-based).
    pub first: usize,
    /// The file's line shown last.
    pub last: usize,
    /// The lines in the file.
    pub total: usize,
}

/// The result of a successful call.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolOutput {
    /// A short human title for the result (e.g. `src/main.rs`).
    pub title: Option<String>,
    /// The blocks shown to the model.
    pub content: Vec<Content>,
    /// Structured data matching the tool's output schema, if it has one.
    pub structured: Option<Value>,
    /// Free-form metadata for clients and hooks (not shown to the model).
    pub metadata: JsonObject,
    /// The output reports a failure the model should notice (e.g. a command that exited
    /// non-zero) although the call itself worked.
    pub is_error: bool,
    /// For an output that shows a page of a file's lines (`read`): where the page sits in
    /// the file. When the pipeline cuts a head, it counts in file lines and says which
    /// `offset` continues.
    pub page: Option<FilePage>,
    /// Set by the truncation stage when it cut anything.
    pub truncated: Option<Truncation>,
}

impl ToolOutput {
    /// An output with one text block.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            content: vec![Content::Text(text.into())],
            ..Self::default()
        }
    }

    /// Sets the title.
    #[must_use]
    pub fn with_title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    /// Sets the structured content.
    #[must_use]
    pub fn with_structured(mut self, value: Value) -> Self {
        self.structured = Some(value);
        self
    }

    /// Sets the structured content from a result type, the one the tool's output schema is
    /// derived from (see [`crate::Tool::output_schema`]). Should serializing fail (a map with
    /// non-string keys, a failing `Serialize` impl), the output goes without structured content
    /// and a warning is logged.
    #[must_use]
    pub fn with_structured_of<T: serde::Serialize + ?Sized>(mut self, value: &T) -> Self {
        match serde_json::to_value(value) {
            Ok(value) => self.structured = Some(value),
            Err(err) => {
                tracing::warn!(
                    "a structured result could not be serialized and is left out: {err}"
                );
            }
        }
        self
    }

    /// Adds one metadata entry.
    #[must_use]
    pub fn with_metadata(mut self, key: &str, value: Value) -> Self {
        self.metadata.insert(key.to_owned(), value);
        self
    }

    /// Marks a failed output (`is_error`) for hosts that drop the flag: a first text block of
    /// its own, `tool`'s [`crate::error_marker`], so that the output starts on the line after
    /// it. Being a block of its own, the marker stays whole when the truncation stage cuts the
    /// output (even from its start, in tail mode), and the output and its saved copy stay as
    /// the tool made them. An output already marked (its first text starts with the marker),
    /// or not failed, is left alone; one with no text gets a block saying it failed.
    pub fn mark_error(&mut self, tool: &str) {
        if !self.is_error {
            return;
        }
        let marker = error_marker(tool);
        let first = self.content.iter().find_map(|c| match c {
            Content::Text(text) => Some(text.as_str()),
            Content::Long(long) => Some(long.head.as_str()),
            Content::Image { .. } | Content::ResourceLink { .. } => None,
        });
        match first {
            Some(text) if text.starts_with(&marker) => {}
            Some(_) => self.content.insert(0, Content::Text(marker)),
            None => self.content.insert(
                0,
                Content::Text(format!("{marker} the tool reported a failure")),
            ),
        }
    }

    /// All text blocks joined by newlines.
    pub fn joined_text(&self) -> String {
        let texts: Vec<&str> = self
            .content
            .iter()
            .filter_map(|c| match c {
                Content::Text(t) => Some(t.as_str()),
                Content::Long(long) => Some(long.head.as_str()),
                Content::Image { .. } | Content::ResourceLink { .. } => None,
            })
            .collect();
        texts.join("\n")
    }
}

/// What every error result's text starts with: `Error (<tool>):`, then a space and the message
/// (or, before a tool's own failed output, a line break). Some hosts forward a result's text
/// but not its `isError` flag; this tells the model all the same that the call failed, and
/// which.
pub fn error_marker(tool: &str) -> String {
    format!("Error ({tool}):")
}

/// `text` with `tool`'s error marker and a space in front, unless it already starts with the
/// marker.
pub(crate) fn marked(tool: &str, text: &str) -> String {
    let marker = error_marker(tool);
    if text.starts_with(&marker) {
        text.to_owned()
    } else {
        format!("{marker} {text}")
    }
}
