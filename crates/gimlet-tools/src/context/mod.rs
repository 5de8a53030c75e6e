//! What a tool sees: [`ToolEnv`] (fixed at init: platform, roots, config) and [`ToolContext`]
//! (one call: session, cancellation, progress, ask, roots, file state).
//!
//! The room below every tool and the pipeline: `env` (fixed at start), `session` (per
//! client session), `call` (one call), and what the environment holds that takes a call's
//! context: the asker ([`ask`]) and the hooks (`hook`).

pub mod ask;
mod call;
mod env;
pub(crate) mod hook;
mod session;

pub use call::*;
pub use env::*;
pub use session::*;
