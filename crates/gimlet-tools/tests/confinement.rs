//! Confinement under attack: a directory swapped for a symlink while calls run, and property
//! tests of the path resolver and the shell parser.

#![expect(clippy::unwrap_used, reason = "tests fail loudly")]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use gimlet_tools::fs::{OpenKind, RootSet};
use gimlet_tools::shell;
use gimlet_tools::{ToolContext, ToolEnv, ToolRegistry, pipeline};
use proptest::prelude::*;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_directory_swapped_for_a_symlink_never_lets_a_call_out() {
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
struct Tree {
    _root: tempfile::TempDir,
    _outside: tempfile::TempDir,
    root: PathBuf,
    outside: PathBuf,
    roots: RootSet,
}

fn tree() -> Tree {
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

fn component() -> impl Strategy<Value = String> {
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

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 512,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Whatever the path, a resolution inside the root names a place inside the root, and
    /// opening it reaches only what lies inside; nothing ever opens the outside file.
    #[test]
    fn the_resolver_never_places_outside_paths_inside(
        parts in prop::collection::vec(component(), 1..7),
        absolute in prop_oneof![Just(0u8), Just(1u8), Just(2u8)],
    ) {
        let tree = tree();
        let rel = parts.join("/");
        let input = match absolute {
            0 => rel,
            1 => format!("{}/{rel}", tree.root.display()),
            _ => format!("{}/{rel}", tree.outside.display()),
        };
        if let Ok(resolved) = tree.roots.resolve(&input) {
            if resolved.is_inside() {
                prop_assert!(is_within(&resolved.path, &tree.root), "{input} -> {:?}", resolved.path);
                if let Ok(real) = std::fs::canonicalize(&resolved.path) {
                    prop_assert!(is_within(&real, &tree.root), "{input} -> {real:?}");
                }
                if let Ok(mut file) = resolved.open(OpenKind::ReadFile) {
                    let mut text = String::new();
                    let _ = std::io::Read::read_to_string(&mut file, &mut text);
                    prop_assert_ne!(text.as_str(), SECRET, "{}", input);
                }
            } else {
                prop_assert!(!is_within(&resolved.path, &tree.root) || resolved.path == tree.root.join(".."),
                    "{input} -> {:?} is under the root but called outside", resolved.path);
            }
        }
    }

    /// Commands joined by operators split back into exactly those commands.
    #[test]
    fn simple_commands_split_back_exactly(
        commands in prop::collection::vec(
            prop::collection::vec("[a-z][a-z0-9_.=-]{0,8}", 1..4), 1..5),
        operators in prop::collection::vec(
            prop_oneof![Just("&&"), Just("||"), Just(";"), Just("|"), Just("\n")], 4),
    ) {
        // Reserved words and programs that run their arguments (`env x`, `eval x`) are not
        // plain simple commands.
        const SPECIAL: &[&str] = &[
            "if", "then", "else", "elif", "fi", "do", "done", "case", "esac", "while", "until",
            "for", "in", "function", "select", "time", "coproc", "eval", "source", ".", "sh",
            "bash", "zsh", "dash", "ksh", "mksh", "ash", "yash", "posh", "fish", "rbash", "env",
            "command", "builtin", "exec", "nohup", "timeout", "nice", "stdbuf", "setsid", "sudo",
            "doas", "xargs", "find", "trap", "watch", "su",
        ];
        prop_assume!(commands.iter().flatten().all(|w| !SPECIAL.contains(&w.as_str())));
        let words: Vec<String> = commands.iter().map(|c| c.join(" ")).collect();
        let mut line = words[0].clone();
        for (i, command) in words.iter().enumerate().skip(1) {
            line.push_str(&format!(" {} ", operators[i - 1]));
            line.push_str(command);
        }
        // Leading `NAME=value` words are assignments, which do not name the command.
        let assignment = |w: &str| {
            w.split_once('=').is_some_and(|(name, _)| {
                !name.is_empty()
                    && !name.starts_with(|c: char| c.is_ascii_digit())
                    && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            })
        };
        let expected: Vec<String> = commands
            .iter()
            .map(|c| c.iter().skip_while(|w| assignment(w)).cloned().collect::<Vec<_>>().join(" "))
            .filter(|c| !c.is_empty())
            .collect();
        let script = shell::parse(&line);
        let found: Vec<String> = script.commands.into_iter().map(|c| c.text).collect();
        prop_assert_eq!(found, expected, "{}", line);
        prop_assert!(script.unknowns.is_empty(), "{}", line);
    }

    /// A command hidden in a substitution, a process substitution, `eval`, `bash -c`, a pipe
    /// into `xargs` or a here-document fed to a shell is found: a rule on it applies.
    #[test]
    fn hidden_commands_are_found(
        before in "[a-z ]{0,10}",
        hidden in prop_oneof![
            Just("$(rm -rf x)"), Just("`rm -rf x`"), Just("<(rm -rf x)"), Just("; eval 'rm -rf x'"),
            Just("\"$(rm -rf x)\""), Just("&& bash -c 'rm -rf x'"), Just("| xargs rm -rf x"),
            Just("; sh <<EOF\nrm -rf x\nEOF\n"),
        ],
        after in "[a-z ]{0,10}",
    ) {
        let line = format!("echo {before} {hidden}\necho {after}");
        let script = shell::parse(&line);
        prop_assert!(
            script.commands.iter().any(|c| c.name == "rm" && c.text.starts_with("rm -rf x")),
            "{} -> {:?}", line, script
        );
    }

    /// Any input at all: no panic.
    #[test]
    fn the_splitter_takes_anything(line in any::<String>()) {
        let _ = shell::parse(&line);
    }
}
