//! Edit latency on a 10 MB file, through the whole pipeline (validate, permission, load,
//! match, atomic write with fsync, journal, diff).
//!
//! `cargo bench -p gimlet-tools --bench edit` prints the median and spread over 30 edits, each
//! replacing a unique line in the middle of the file (and the same for a `multi_edit` of
//! three lines, and an `apply_patch` of one hunk).

#![expect(
    clippy::unwrap_used,
    clippy::print_stdout,
    reason = "a benchmark program"
)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use gimlet_tools::{Session, ToolContext, ToolEnv, ToolRegistry, pipeline};
use serde_json::{Value, json};

const ROUNDS: usize = 30;

fn main() {
    let root = tempfile::tempdir().unwrap();
    let spill = tempfile::tempdir().unwrap();
    let lines = 125_000; // 80 bytes each: 10 MB
    let body: String = (0..lines)
        .map(|i| format!("{i:>10} {}\n", "x".repeat(68)))
        .collect();
    std::fs::write(root.path().join("big.txt"), &body).unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let env = Arc::new(
        ToolEnv::builder()
            .root(root.path())
            .spill_dir(spill.path())
            .build()
            .unwrap(),
    );
    let registry = Arc::new(ToolRegistry::builtin());
    let session = Arc::new(Session::new("bench"));
    let call = |name: &str, args: Value| {
        let ctx = ToolContext::builder(Arc::clone(&env))
            .session(Arc::clone(&session))
            .build();
        let registry = Arc::clone(&registry);
        let name = name.to_owned();
        runtime.block_on(async move {
            let started = Instant::now();
            let report = pipeline::run_on_worker(registry, name, args, ctx)
                .await
                .unwrap();
            if let Err(err) = report.result {
                panic!("{err}");
            }
            started.elapsed()
        })
    };
    call("read", json!({"path": "big.txt", "limit": 1}));
    println!(
        "edit latency on a {} MB file ({ROUNDS} rounds each)",
        body.len() / 1_000_000
    );
    println!("| call | median | min | max |");
    println!("|---|---|---|---|");

    let mut times = Vec::new();
    for round in 0..ROUNDS {
        let target = format!("{:>10} ", 60_000 + round);
        times.push(call("edit", json!({"path": "big.txt", "old_string": target, "new_string": format!("{:>10}*", 60_000 + round)})));
    }
    report("edit (one line)", &mut times);

    let mut times = Vec::new();
    for round in 0..ROUNDS {
        let edits: Vec<Value> = (0..3)
            .map(|k| {
                let n = 10_000 + round * 3 + k;
                json!({"old_string": format!("{n:>10} "), "new_string": format!("{n:>10}+")})
            })
            .collect();
        times.push(call(
            "multi_edit",
            json!({"path": "big.txt", "edits": edits}),
        ));
    }
    report("multi_edit (three lines)", &mut times);

    let mut times = Vec::new();
    for round in 0..ROUNDS {
        let n = 100_000 + round * 3;
        let x = "x".repeat(68);
        let patch = format!(
            "*** Begin Patch\n*** Update File: big.txt\n {:>10} {x}\n-{n:>10} {x}\n+{n:>10}#{x}\n {:>10} {x}\n*** End Patch\n",
            n - 1,
            n + 1
        );
        times.push(call("apply_patch", json!({"patch": patch})));
    }
    report("apply_patch (one hunk)", &mut times);
}

fn report(name: &str, times: &mut [Duration]) {
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "| {name} | {:.1} ms | {:.1} ms | {:.1} ms |",
        ms(times[times.len() / 2]),
        ms(times[0]),
        ms(times[times.len() - 1])
    );
}
