//! Every known way out of the roots, tried through MCP by a client that cannot approve
//! anything: nothing outside may be read, written or created.

#![expect(clippy::unwrap_used, reason = "test fixtures fail loudly")]

use serde_json::{Value, json};

use crate::common::{Gimlet, text};

const SECRET: &str = "TOP-SECRET-CONTENT";

struct Escape {
    gimlet: Gimlet,
    outside: tempfile::TempDir,
    sibling: std::path::PathBuf,
}

impl Escape {
    async fn start() -> Self {
        let gimlet = Gimlet::start().await;
        let root = gimlet.root();
        let outside = tempfile::Builder::new()
            .prefix("gimlet-outside")
            .tempdir()
            .unwrap();
        std::fs::write(outside.path().join("secret.txt"), SECRET).unwrap();
        // A sibling whose name starts with the root's name: `/tmp/rootX` vs `/tmp/rootX-evil`.
        let sibling = std::path::PathBuf::from(format!("{}-evil", root.display()));
        std::fs::create_dir_all(&sibling).unwrap();
        std::fs::write(sibling.join("secret.txt"), SECRET).unwrap();

        let link = |target: &std::path::Path, name: &str| {
            std::os::unix::fs::symlink(target, root.join(name)).unwrap();
        };
        link(&outside.path().join("secret.txt"), "file_link");
        link(outside.path(), "dir_link");
        link(&outside.path().join("not-yet.txt"), "dangling");
        link(&root.join("loop_b"), "loop_a");
        link(&root.join("loop_a"), "loop_b");
        std::fs::create_dir(root.join("sub")).unwrap();
        std::fs::hard_link(outside.path().join("secret.txt"), root.join("hard.txt")).unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(root.join("fifo"))
            .status()
            .unwrap();
        assert!(made.success());
        Self {
            gimlet,
            outside,
            sibling,
        }
    }

    /// The ways to name something outside, as path arguments.
    fn paths(&self) -> Vec<String> {
        let outside = self.outside.path().display();
        vec![
            String::from("../secret.txt"),
            String::from("sub/../../secret.txt"),
            format!("{outside}/secret.txt"),
            format!("{}/secret.txt", self.sibling.display()),
            String::from("file_link"),
            String::from("dir_link/secret.txt"),
            String::from("sub/../dir_link/secret.txt"),
            String::from("dangling"),
            String::from("loop_a"),
            format!("/proc/self/root{outside}/secret.txt"),
            format!("/proc/{}/root{outside}/secret.txt", self.gimlet.pid),
            String::from("/proc/self/cwd/../secret.txt"),
            String::from("sub/\0/../../secret.txt"),
        ]
    }

    fn outside_untouched(&self) {
        let mut names: Vec<String> = std::fs::read_dir(self.outside.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, vec!["secret.txt"], "nothing new outside the root");
        assert_eq!(
            std::fs::read_to_string(self.outside.path().join("secret.txt")).unwrap(),
            SECRET
        );
        assert_eq!(
            std::fs::read_to_string(self.sibling.join("secret.txt")).unwrap(),
            SECRET
        );
    }
}

impl Drop for Escape {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.sibling);
    }
}

#[tokio::test]
async fn nothing_outside_the_roots_can_be_read() {
    let escape = Escape::start().await;
    for path in escape.paths() {
        for (tool, args) in [
            ("read", json!({"path": path})),
            ("ls", json!({"path": path})),
            ("grep", json!({"pattern": "SECRET", "path": path})),
            ("glob", json!({"pattern": "*", "path": path})),
        ] {
            let result = escape.gimlet.call(tool, args).await;
            let shown = text(&result);
            assert!(
                !shown.contains(SECRET),
                "{tool} {path:?} leaked the secret: {shown}"
            );
            if tool == "read" {
                assert_eq!(result.is_error, Some(true), "read {path:?}: {shown}");
                assert!(!shown.is_empty());
            }
        }
    }
    // A search of the whole root finds the hard link (a file in the root) but follows no
    // link out.
    let found = text(
        &escape
            .gimlet
            .call("grep", json!({"pattern": "SECRET"}))
            .await,
    );
    assert!(found.contains("hard.txt"), "{found}");
    assert!(
        !found.contains("dir_link") && !found.contains("file_link"),
        "{found}"
    );
    let listed = text(&escape.gimlet.call("glob", json!({"pattern": "**/*"})).await);
    assert!(!listed.contains("dir_link/secret.txt"), "{listed}");
}

#[tokio::test]
async fn nothing_outside_the_roots_can_be_written() {
    let escape = Escape::start().await;
    for path in escape.paths() {
        let attempts: Vec<(&str, Value)> = vec![
            ("write", json!({"path": path, "content": "pwned"})),
            (
                "edit",
                json!({"path": path, "old_string": "", "new_string": "pwned"}),
            ),
            (
                "apply_patch",
                json!({"patch": format!("*** Begin Patch\n*** Add File: {path}\n+pwned\n*** End Patch\n")}),
            ),
        ];
        for (tool, args) in attempts {
            let result = escape.gimlet.call(tool, args).await;
            assert_eq!(
                result.is_error,
                Some(true),
                "{tool} {path:?} succeeded: {}",
                text(&result)
            );
        }
        escape.outside_untouched();
    }
}

#[tokio::test]
async fn hard_links_fifos_and_nul_bytes_are_refused_with_reasons() {
    let escape = Escape::start().await;
    let gimlet = &escape.gimlet;
    // A hard link inside the root may be read (it is a file in the root) but never written:
    // the write would change the outside name too.
    let read = text(&gimlet.call("read", json!({"path": "hard.txt"})).await);
    assert!(read.contains(SECRET), "{read}");
    let result = gimlet
        .call("write", json!({"path": "hard.txt", "content": "pwned"}))
        .await;
    assert!(text(&result).contains("hard links"), "{}", text(&result));
    let result = gimlet
        .call(
            "edit",
            json!({"path": "hard.txt", "old_string": "TOP", "new_string": "pwned"}),
        )
        .await;
    assert!(text(&result).contains("hard links"), "{}", text(&result));

    // A FIFO would block a reader forever: refused at once.
    let result = gimlet.call("read", json!({"path": "fifo"})).await;
    assert!(text(&result).contains("FIFO"), "{}", text(&result));
    let result = gimlet
        .call("write", json!({"path": "fifo", "content": "x"}))
        .await;
    assert_eq!(result.is_error, Some(true));
    assert!(text(&result).contains("FIFO"), "{}", text(&result));

    let result = gimlet.call("read", json!({"path": "a\0b"})).await;
    assert!(text(&result).contains("NUL"), "{}", text(&result));
    let result = gimlet.call("read", json!({"path": "loop_a"})).await;
    assert!(
        text(&result).contains("loop") || text(&result).contains("symbolic links"),
        "{}",
        text(&result)
    );
    escape.outside_untouched();
}
