//! What checkpoints add to a call that can change files, on a generated tree (25,000 files in
//! 250 folders; `GIMLET_BENCH_FILES=100000` for 100,000 in 1,000).
//!
//! `cargo bench -p gimlet-tools --bench checkpoint --profile measure` runs a caller-provided
//! mutating tool (it writes `count` files, or none) through the whole pipeline with
//! checkpoints off, on (with the system's watcher) and on with a full walk
//! for every scan (`[checkpoints] watch = false`), and prints the medians: the difference is
//! the scan before and after the call. Each baseline (the first scan, which copies the tree
//! into the store) is built before timing.

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

const ROUNDS: usize = 15;

/// Files in the tree: `GIMLET_BENCH_FILES`, or 25,000.
fn files() -> usize {
    std::env::var("GIMLET_BENCH_FILES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(25_000)
}

/// Folders: 100 files in each.
fn dirs() -> usize {
    (files() / 100).max(1)
}

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
                let path = root.join(format!("d{:03}/f{i:03}.txt", i % dirs()));
                std::fs::write(path, format!("round {} file {i}\n", args.round)).unwrap();
            }
            Ok(ToolOutput::text("done"))
        })
        .await
    }
}

fn tree(root: &Path) {
    let dirs = dirs();
    for i in 0..files() {
        let dir = root.join(format!("d{:03}", i % dirs));
        if i < dirs {
            std::fs::create_dir_all(&dir).unwrap();
        }
        let line = format!("fn item_{i}() -> usize {{ {i} }}\n");
        std::fs::write(dir.join(format!("f{:03}.txt", i / dirs)), line.repeat(8)).unwrap();
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
    let env_with = |name: &str, config: CheckpointsConfig| {
        Arc::new(
            ToolEnv::builder()
                .root(root.path())
                .spill_dir(data.path().join("spill"))
                .checkpoint_dir(data.path().join(name))
                .checkpoints(config)
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
    let mut off = CheckpointsConfig::on();
    off.enabled = false;
    let mut walk = CheckpointsConfig::on();
    walk.watch = false;
    let off = env_with("off", off);
    let modes = [
        ("on", env_with("watch", CheckpointsConfig::on())),
        ("on, full walk", env_with("walk", walk)),
    ];
    let files = files();
    for (mode, env) in &modes {
        let started = Instant::now();
        time(env, 0, 0);
        println!(
            "baseline of {files} files, {mode} (first call, waits for it): {:.0} ms",
            started.elapsed().as_secs_f64() * 1000.0
        );
    }
    println!("| call | checkpoints | off | on | added |");
    println!("|---|---|---|---|---|");
    let mut round = 1;
    for (mode, on) in &modes {
        for count in [0, 100] {
            // Off first, then on: the calls with checkpoints off change the same tree, and
            // what they wrote would otherwise be found (as outside changes) by every scan
            // before an on call. Only the first on call finds them; the median leaves it out.
            let (mut a, mut b) = (Vec::new(), Vec::new());
            for _ in 0..ROUNDS {
                a.push(time(&off, count, round));
                round += 1;
            }
            for _ in 0..ROUNDS {
                b.push(time(on, count, round));
                round += 1;
            }
            let (a, b) = (median(&mut a), median(&mut b));
            println!(
                "| writes {count} files | {mode} | {:.1} ms | {:.1} ms | {:.1} ms |",
                a.as_secs_f64() * 1000.0,
                b.as_secs_f64() * 1000.0,
                (b.saturating_sub(a)).as_secs_f64() * 1000.0
            );
        }
    }
}
