//! Confinement under attack, shared by `confinement.rs` (paths opened as Linux opens them:
//! `openat2`) and `confinement_portable.rs` (as macOS opens them: one `openat(O_NOFOLLOW)` per
//! component, `gimlet_tools::fs::force_portable`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use gimlet_tools::fs::{OpenKind, RootSet};
use gimlet_tools::{ToolContext, ToolEnv, ToolRegistry, pipeline};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use serde_json::json;

const SECRET: &str = "OUTSIDE-SECRET";

/// Swaps `root/d` between a real directory and a symlink to `outside` until told to stop.
fn swapper(root: PathBuf, outside: PathBuf, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let d = root.join("d");
        let link = root.join("d_link");
        std::os::unix::fs::symlink(&outside, &link).unwrap();
        let mut swaps = 0;
        let exchange = || {
            rustix::fs::renameat_with(
                rustix::fs::CWD,
                &d,
                rustix::fs::CWD,
                &link,
                rustix::fs::RenameFlags::EXCHANGE,
            )
            .unwrap();
        };
        // Each exchange is atomic: `d` is always there, a directory or a link out.
        while !stop.load(Ordering::Relaxed) {
            exchange();
            std::thread::yield_now();
            exchange();
            std::thread::yield_now();
            swaps += 1;
        }
        swaps
    })
}

/// Calls race a directory swapped for a symlink: none reads or writes outside.
pub(crate) async fn a_directory_swapped_for_a_symlink_never_lets_a_call_out() {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let spill = tempfile::tempdir().unwrap();
    let root_path = std::fs::canonicalize(root.path()).unwrap();
    let outside_path = std::fs::canonicalize(outside.path()).unwrap();
    std::fs::create_dir(root_path.join("d")).unwrap();
    std::fs::write(root_path.join("d/file.txt"), "inside\n").unwrap();
    std::fs::write(outside_path.join("file.txt"), SECRET).unwrap();

    let env = Arc::new(
        ToolEnv::builder()
            .root(&root_path)
            .spill_dir(spill.path())
            .build()
            .unwrap(),
    );
    let registry = Arc::new(ToolRegistry::builtin());
    let stop = Arc::new(AtomicBool::new(false));
    let swapping = swapper(root_path.clone(), outside_path.clone(), Arc::clone(&stop));

    let mut tasks = Vec::new();
    for worker in 0..8 {
        let env = Arc::clone(&env);
        let registry = Arc::clone(&registry);
        tasks.push(tokio::spawn(async move {
            let mut leaks = Vec::new();
            for i in 0..150 {
                let ctx = ToolContext::builder(Arc::clone(&env)).build();
                let (tool, args) = match i % 4 {
                    0 => ("read", json!({"path": "d/file.txt"})),
                    1 => (
                        "write",
                        json!({"path": format!("d/new-{worker}-{i}.txt"), "content": "x"}),
                    ),
                    2 => ("grep", json!({"pattern": "SECRET", "path": "d"})),
                    _ => ("ls", json!({"path": "d"})),
                };
                let report =
                    pipeline::run_on_worker(Arc::clone(&registry), tool.to_owned(), args, ctx)
                        .await
                        .unwrap();
                if let Ok(output) = report.result {
                    let text = output.joined_text();
                    if text.contains(SECRET) {
                        leaks.push(format!("{tool}: {text}"));
                    }
                }
            }
            leaks
        }));
    }
    let mut leaks = Vec::new();
    for task in tasks {
        leaks.extend(task.await.unwrap());
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = swapping.join().unwrap();
    assert!(swaps > 10, "the swapper must actually race ({swaps} swaps)");
    assert!(leaks.is_empty(), "read outside through the swap: {leaks:?}");
    let outside_names: Vec<_> = std::fs::read_dir(&outside_path)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        outside_names,
        vec![std::ffi::OsString::from("file.txt")],
        "written outside"
    );
    assert_eq!(
        std::fs::read_to_string(outside_path.join("file.txt")).unwrap(),
        SECRET
    );
}

/// A root with a few links in and out, and a file outside.
pub(crate) struct Tree {
    _root: tempfile::TempDir,
    _outside: tempfile::TempDir,
    root: PathBuf,
    outside: PathBuf,
    roots: RootSet,
}

pub(crate) fn tree() -> Tree {
    let root_dir = tempfile::tempdir().unwrap();
    let outside_dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(root_dir.path()).unwrap();
    let outside = std::fs::canonicalize(outside_dir.path()).unwrap();
    std::fs::create_dir_all(root.join("a/b")).unwrap();
    std::fs::write(root.join("a/b/f"), "in").unwrap();
    std::fs::write(outside.join("f"), SECRET).unwrap();
    std::os::unix::fs::symlink(&outside, root.join("out")).unwrap();
    std::os::unix::fs::symlink(root.join("a"), root.join("in")).unwrap();
    std::os::unix::fs::symlink("../..", root.join("a/up")).unwrap();
    std::os::unix::fs::symlink("loop", root.join("loop")).unwrap();
    let roots = RootSet::open([&root]).unwrap();
    Tree {
        _root: root_dir,
        _outside: outside_dir,
        root,
        outside,
        roots,
    }
}

pub(crate) fn component() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::from("..")),
        Just(String::from(".")),
        Just(String::from("a")),
        Just(String::from("b")),
        Just(String::from("f")),
        Just(String::from("out")),
        Just(String::from("in")),
        Just(String::from("up")),
        Just(String::from("loop")),
        Just(String::new()),
        Just(String::from("new")),
        "[a-z.]{1,3}",
    ]
}

fn is_within(path: &Path, base: &Path) -> bool {
    path.starts_with(base)
}

/// Whatever the path, a resolution inside the root names a place inside the root, and opening
/// it reaches only what lies inside; nothing ever opens the outside file.
pub(crate) fn resolver_case(parts: &[String], absolute: u8) -> Result<(), TestCaseError> {
    let tree = tree();
    let rel = parts.join("/");
    let input = match absolute {
        0 => rel,
        1 => format!("{}/{rel}", tree.root.display()),
        _ => format!("{}/{rel}", tree.outside.display()),
    };
    if let Ok(resolved) = tree.roots.resolve(&input) {
        if resolved.is_inside() {
            prop_assert!(
                is_within(&resolved.path, &tree.root),
                "{input} -> {:?}",
                resolved.path
            );
            if let Ok(real) = std::fs::canonicalize(&resolved.path) {
                prop_assert!(is_within(&real, &tree.root), "{input} -> {real:?}");
            }
            if let Ok(mut file) = resolved.open(OpenKind::ReadFile) {
                let mut text = String::new();
                let _ = std::io::Read::read_to_string(&mut file, &mut text);
                prop_assert_ne!(text.as_str(), SECRET, "{}", input);
            }
        } else {
            prop_assert!(
                !is_within(&resolved.path, &tree.root) || resolved.path == tree.root.join(".."),
                "{input} -> {:?} is under the root but called outside",
                resolved.path
            );
        }
    }
    Ok(())
}
