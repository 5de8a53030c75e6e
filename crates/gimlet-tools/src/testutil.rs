//! Test harness: a temporary workspace and calls through the real pipeline.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;
use tempfile::TempDir;

use crate::context::ask::Asker;
use crate::context::{Session, ToolContext, ToolEnv, ToolEnvBuilder};
use crate::error::ToolError;
use crate::permission::Policy;
use crate::pipeline;
use crate::registry::ToolRegistry;
use crate::vocab::{Content, OutputLimits, ToolOutput};

/// A root folder, a folder outside it, and an environment rooted at the first.
pub(crate) struct TestWorkspace {
    root: TempDir,
    outside: TempDir,
    _spill: TempDir,
    pub(crate) env: Arc<ToolEnv>,
    pub(crate) session: Arc<Session>,
    pub(crate) registry: ToolRegistry,
}

impl TestWorkspace {
    pub(crate) fn new() -> Self {
        Self::build(Policy::default(), None)
    }

    fn build(policy: Policy, limits: Option<OutputLimits>) -> Self {
        Self::custom(move |mut builder| {
            builder = builder.policy(policy);
            if let Some(limits) = limits {
                builder = builder.limits(limits);
            }
            builder
        })
    }

    /// A workspace whose environment `configure` finishes (root and spill dir are set).
    pub(crate) fn custom(configure: impl FnOnce(ToolEnvBuilder) -> ToolEnvBuilder) -> Self {
        let root = tempfile::Builder::new().prefix("ws").tempdir().unwrap();
        let outside = tempfile::Builder::new()
            .prefix("outside")
            .tempdir()
            .unwrap();
        let spill = tempfile::tempdir().unwrap();
        let builder = ToolEnv::builder()
            .root(root.path())
            .spill_dir(spill.path())
            .checkpoint_dir(spill.path().join("checkpoints"));
        let env = Arc::new(configure(builder).build().unwrap());
        Self {
            root,
            outside,
            _spill: spill,
            env,
            session: Arc::new(Session::new("test")),
            registry: ToolRegistry::builtin(),
        }
    }

    /// The resolved root.
    pub(crate) fn root(&self) -> PathBuf {
        std::fs::canonicalize(self.root.path()).unwrap()
    }

    /// A folder outside the root.
    pub(crate) fn outside(&self) -> PathBuf {
        std::fs::canonicalize(self.outside.path()).unwrap()
    }

    /// Writes a file below the root, creating parents.
    pub(crate) fn write(&self, rel: &str, content: impl AsRef<[u8]>) -> PathBuf {
        let path = self.root().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, content).unwrap();
        path
    }

    /// Creates a directory below the root.
    pub(crate) fn mkdir(&self, rel: &str) -> PathBuf {
        let path = self.root().join(rel);
        std::fs::create_dir_all(&path).unwrap();
        path
    }

    /// Creates a symlink below the root.
    pub(crate) fn symlink(&self, target: impl AsRef<Path>, rel: &str) -> PathBuf {
        let link = self.root().join(rel);
        std::os::unix::fs::symlink(target, &link).unwrap();
        link
    }

    pub(crate) fn ctx(&self) -> ToolContext {
        ToolContext::builder(Arc::clone(&self.env))
            .session(Arc::clone(&self.session))
            .build()
    }

    pub(crate) fn ctx_with(&self, asker: Arc<dyn Asker>) -> ToolContext {
        ToolContext::builder(Arc::clone(&self.env))
            .session(Arc::clone(&self.session))
            .asker(asker)
            .build()
    }

    /// Calls a tool through the pipeline with a fresh context.
    pub(crate) async fn call(&self, tool: &str, args: Value) -> Result<ToolOutput, ToolError> {
        self.call_with(&self.ctx(), tool, args).await
    }

    pub(crate) async fn call_with(
        &self,
        ctx: &ToolContext,
        tool: &str,
        args: Value,
    ) -> Result<ToolOutput, ToolError> {
        pipeline::run(&self.registry, tool, args, ctx)
            .await
            .unwrap()
            .result
    }

    /// Calls a tool and returns its text, panicking on error.
    pub(crate) async fn text(&self, tool: &str, args: Value) -> String {
        match self.call(tool, args).await {
            Ok(output) => output.joined_text(),
            Err(err) => panic!("{tool} failed: {err}"),
        }
    }

    /// Calls a tool that must fail and returns the error message.
    pub(crate) async fn error(&self, tool: &str, args: Value) -> String {
        match self.call(tool, args).await {
            Ok(output) => panic!("{tool} succeeded: {}", output.joined_text()),
            Err(err) => err.to_string(),
        }
    }
}

/// Makes a FIFO at `path` (`mknod` on Linux; `mkfifo(1)` elsewhere, where the crates gimlet
/// uses have no call for it).
#[cfg(unix)]
pub(crate) fn make_fifo(path: &Path) {
    #[cfg(target_os = "linux")]
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from(0o600),
        0,
    )
    .unwrap();
    #[cfg(not(target_os = "linux"))]
    assert!(
        std::process::Command::new("mkfifo")
            .arg(path)
            .status()
            .unwrap()
            .success()
    );
}

/// The text a client shows the model for an output: its text blocks joined by line breaks,
/// and a resource link as a line of its name and URI with room for a host's words around
/// them (32 bytes).
pub(crate) fn shown_text(output: &ToolOutput) -> String {
    let blocks: Vec<String> = output
        .content
        .iter()
        .filter_map(|block| match block {
            Content::Text(text) => Some(text.clone()),
            Content::Long(long) => Some(format!("{}{}", long.head, long.tail)),
            Content::ResourceLink { uri, name, .. } => {
                Some(format!("{name}{uri}{}", " ".repeat(32)))
            }
            Content::Image { .. } => None,
        })
        .collect();
    blocks.join("\n")
}

/// Asserts that an output as a client shows it ([`shown_text`]) fits the limits, in lines and
/// in bytes.
#[track_caller]
pub(crate) fn assert_fits(output: &ToolOutput, limits: OutputLimits) {
    let text = shown_text(output);
    let lines = text.lines().count();
    assert!(
        lines <= limits.max_lines && text.len() <= limits.max_bytes,
        "{lines} lines, {} bytes, over {} lines or {} bytes; it ends:\n{}",
        text.len(),
        limits.max_lines,
        limits.max_bytes,
        text.lines().rev().take(6).collect::<Vec<_>>().join("\n")
    );
}
