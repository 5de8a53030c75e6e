//! What checkpoints add to a call that can change files, on a generated 25,000-file tree.
//!
//! `cargo bench -p gimlet-tools --bench checkpoint` runs a caller-provided mutating tool (it
//! writes `count` files, or none) through the whole pipeline with checkpoints on and off, and
//! prints the medians: the difference is the scan before and after the call. The baseline
//! (the first scan, which copies the tree into the store) is built before timing.

#![expect(
    clippy::unwrap_used,
    clippy::print_stdout,
    reason = "a benchmark program"
)]

use std::borrow::Cow;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gimlet_tools::config::CheckpointsConfig;
use gimlet_tools::{
    Session, Tool, ToolContext, ToolEnv, ToolError, ToolFlags, ToolOutput, ToolRegistry,
    ToolSource, pipeline,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

const FILES: usize = 25_000;
const ROUNDS: usize = 15;

/// Writes `count` files of the tree (round `round`), or nothing.
struct Touch;

#[derive(Debug, Deserialize, JsonSchema)]
struct TouchArgs {
    count: usize,
    round: usize,
}

impl Tool for Touch {
    type Args = TouchArgs;
    const NAME: &'static str = "touch";
    const TITLE: &'static str = "Touch";

    fn description(&self, _env: &gimlet_tools::ToolEnv) -> Cow<'static, str> {
        "writes files".into()
    }

    fn flags(&self, _args: Option<&TouchArgs>) -> ToolFlags {
        ToolFlags::MUTATING
    }

    async fn execute(&self, args: TouchArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let root = ctx.roots().roots()[0].path().to_owned();
        ctx.blocking(move |_| {
            for i in 0..args.count {
                let path = root.join(format!("d{:03}/f{i:03}.txt", i % 250));
                std::fs::write(path, format!("round {} file {i}\n", args.round)).unwrap();
            }
            Ok(ToolOutput::text("done"))
        })
        .await
    }
}

fn tree(root: &Path) {
    for i in 0..FILES {
        let dir = root.join(format!("d{:03}", i % 250));
        if i < 250 {
            std::fs::create_dir_all(&dir).unwrap();
        }
        let line = format!("fn item_{i}() -> usize {{ {i} }}\n");
        std::fs::write(dir.join(format!("f{:03}.txt", i / 250)), line.repeat(8)).unwrap();
    }
    std::fs::write(root.join(".gitignore"), "target/\n").unwrap();
}

fn median(times: &mut [Duration]) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn main() {
    let root = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    tree(root.path());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut registry = ToolRegistry::builtin();
    registry.register(Touch, ToolSource::Caller);
    let registry = Arc::new(registry);
    let env_with = |enabled: bool| {
        Arc::new(
            ToolEnv::builder()
                .root(root.path())
                .spill_dir(data.path().join("spill"))
                .checkpoint_dir(data.path().join("checkpoints"))
                .checkpoints(if enabled {
                    CheckpointsConfig::on()
                } else {
                    let mut off = CheckpointsConfig::default();
                    off.enabled = false;
                    off
                })
                .build()
                .unwrap(),
        )
    };
    let session = Arc::new(Session::new("bench"));
    let time = |env: &Arc<ToolEnv>, count: usize, round: usize| {
        let ctx = ToolContext::builder(Arc::clone(env))
            .session(Arc::clone(&session))
            .build();
        let registry = Arc::clone(&registry);
        runtime.block_on(async move {
            let started = Instant::now();
            let report = pipeline::run_on_worker(
                registry,
                "touch".into(),
                json!({"count": count, "round": round}),
                ctx,
            )
            .await
            .unwrap();
            report.result.unwrap();
            started.elapsed()
        })
    };
    let on = env_with(true);
    let off = env_with(false);
    let started = Instant::now();
    time(&on, 0, 0);
    println!(
        "baseline of {FILES} files (first call, waits for it): {:.0} ms",
        started.elapsed().as_secs_f64() * 1000.0
    );
    println!("| call | checkpoints off | on | added |");
    println!("|---|---|---|---|");
    let mut round = 1;
    for count in [0, 100] {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            a.push(time(&off, count, round));
            round += 1;
            b.push(time(&on, count, round));
            round += 1;
        }
        let (a, b) = (median(&mut a), median(&mut b));
        println!(
            "| writes {count} files | {:.1} ms | {:.1} ms | {:.1} ms |",
            a.as_secs_f64() * 1000.0,
            b.as_secs_f64() * 1000.0,
            (b.saturating_sub(a)).as_secs_f64() * 1000.0
        );
    }
}
