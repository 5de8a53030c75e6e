//! Windows has no command sandbox gimlet can put in place without `unsafe` code or an
//! installed service (Codex's Windows sandbox needs both): the probe reports none, so in the
//! default mode every command asks unless a rule allows it, and `--sandbox on` refuses
//! commands. What stays is the process tree: every command runs in a Job Object that dies
//! with the call (`tree_windows.rs`).

use super::helper::{SANDBOX_FAILED, eprintln_quiet};
use super::tree_windows::run_tree;
use super::{HelperPlan, Support};

/// Runs one command, unsandboxed; a plan asking for a sandbox is refused.
pub(super) fn run(plan: &HelperPlan) -> i32 {
    if plan.sandbox.is_some() {
        eprintln_quiet("gimlet: commands cannot be sandboxed on Windows");
        return SANDBOX_FAILED;
    }
    run_tree(plan)
}

/// Nothing to enforce.
pub(super) fn probe() -> Support {
    Support::default()
}
