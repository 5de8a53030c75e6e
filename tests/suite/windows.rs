//! Windows: an MCP session through `gimlet.exe` with every file tool, the paths a Windows
//! attacker would try (`..\..`, drive letters, `\\?\` paths, junctions and symbolic links out,
//! differently cased protected names) and the Job Object that takes a command's grandchildren
//! with it. On Linux these run under Wine (`scripts/wine.sh`); each prints one line per check,
//! `tool | what | outcome`, so the run shows the table.

use std::io::Write as _;
use std::path::Path;
use std::time::Duration;

use rmcp::model::{ElicitResult, ElicitationAction};
use serde_json::{Value, json};

use crate::common::{Gimlet, TestClient, err_text, eventually, ok_text, text};

/// One row of the table: `tool | what | outcome`.
fn row(tool: &str, what: &str, outcome: &str) {
    let _ = writeln!(std::io::stderr(), "| {tool} | {what} | {outcome} |");
}

/// Calls `tool`, asserts it succeeded, prints the row and returns the text.
async fn allowed(gimlet: &Gimlet, tool: &str, what: &str, args: Value) -> String {
    let text = ok_text(&gimlet.call(tool, args).await);
    row(tool, what, "ok");
    text
}

/// Calls `tool`, asserts it was refused as outside the roots, prints the row.
async fn outside(gimlet: &Gimlet, tool: &str, path: &str, args: Value) {
    let text = err_text(&gimlet.call(tool, args).await);
    assert!(
        text.contains("outside the allowed folders"),
        "{tool} {path}: {text}"
    );
    row(tool, path, "refused: outside the roots");
}

#[tokio::test]
async fn a_session_through_every_file_tool() {
    let gimlet = Gimlet::start().await;
    let root = gimlet.root();
    allowed(
        &gimlet,
        "write",
        r"src\main.rs",
        json!({"path": r"src\main.rs", "content": "fn main() {\r\n    println!(\"hi\");\r\n}\r\n"}),
    )
    .await;
    let text = allowed(
        &gimlet,
        "read",
        r"src\main.rs",
        json!({"path": "src/main.rs"}),
    )
    .await;
    assert!(text.contains("println!(\"hi\")"), "{text}");
    allowed(
        &gimlet,
        "edit",
        r"src\main.rs",
        json!({"path": r"src\main.rs", "old_string": "\"hi\"", "new_string": "\"hello\""}),
    )
    .await;
    let main = root.join("src").join("main.rs");
    // CRLF endings stay CRLF.
    assert_eq!(
        std::fs::read_to_string(&main).unwrap(),
        "fn main() {\r\n    println!(\"hello\");\r\n}\r\n"
    );
    allowed(
        &gimlet,
        "multi_edit",
        r"src\main.rs",
        json!({"path": "src/main.rs", "edits": [
            {"old_string": "hello", "new_string": "hey"},
            {"old_string": "fn main", "new_string": "pub fn main"},
        ]}),
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(&main).unwrap(),
        "pub fn main() {\r\n    println!(\"hey\");\r\n}\r\n"
    );
    let patch = "*** Begin Patch\n*** Add File: notes.md\n+hello\n*** Update File: src/main.rs\n@@\n-    println!(\"hey\");\n+    println!(\"patched\");\n*** End Patch\n";
    allowed(
        &gimlet,
        "apply_patch",
        "add + update",
        json!({"patch": patch}),
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(root.join("notes.md")).unwrap(),
        "hello\n"
    );
    assert!(
        std::fs::read_to_string(&main)
            .unwrap()
            .contains("println!(\"patched\");\r\n")
    );
    allowed(&gimlet, "undo", "the patch", json!({})).await;
    assert!(!root.join("notes.md").exists());
    assert_eq!(
        std::fs::read_to_string(&main).unwrap(),
        "pub fn main() {\r\n    println!(\"hey\");\r\n}\r\n"
    );
    let text = allowed(
        &gimlet,
        "grep",
        "hey",
        json!({"pattern": "hey", "output_mode": "content"}),
    )
    .await;
    assert!(text.contains("main.rs:2:"), "{text}");
    let text = allowed(&gimlet, "glob", "**/*.rs", json!({"pattern": "**/*.rs"})).await;
    assert!(text.contains("main.rs"), "{text}");
    let text = allowed(&gimlet, "ls", r"src", json!({"path": "src"})).await;
    assert!(text.contains("main.rs"), "{text}");
    gimlet.stop().await;
}

/// Drive letters, `..`, verbatim and UNC paths: nothing outside the root is read or written.
#[tokio::test]
async fn windows_paths_out_of_the_root_are_refused() {
    let gimlet = Gimlet::start().await;
    let root = gimlet.root().display().to_string();
    let drive = &root[..2];
    let reads = [
        r"..\..\windows\win.ini".to_owned(),
        r"C:\windows\win.ini".to_owned(),
        r"c:\WINDOWS\win.ini".to_owned(),
        "C:/windows/win.ini".to_owned(),
        r"\\?\C:\windows\win.ini".to_owned(),
        r"\\localhost\C$\windows\win.ini".to_owned(),
        format!(r"{drive}..\..\windows\win.ini"),
        format!(r"{root}\..\outside.txt"),
        format!(r"\\?\{root}\..\outside.txt"),
    ];
    for path in &reads {
        outside(&gimlet, "read", path, json!({"path": path})).await;
    }
    for path in [r"..\written.txt", r"C:\windows\gimlet.txt"] {
        outside(
            &gimlet,
            "write",
            path,
            json!({"path": path, "content": "x"}),
        )
        .await;
    }
    assert!(!Path::new(r"C:\windows\gimlet.txt").exists());
    assert!(!gimlet.root().parent().unwrap().join("written.txt").exists());
    // An NT object path or a device path is refused, saying what it is.
    for device in [
        r"\\?\GLOBALROOT\Device\HarddiskVolume1\windows\win.ini",
        r"\\.\C:\windows\win.ini",
    ] {
        let text = err_text(&gimlet.call("read", json!({"path": device})).await);
        assert!(text.contains("names a device"), "{text}");
        row("read", device, "refused: names a device");
    }
    outside(&gimlet, "ls", r"C:\", json!({"path": r"C:\"})).await;
    outside(
        &gimlet,
        "grep",
        r"C:\windows",
        json!({"pattern": "x", "path": r"C:\windows"}),
    )
    .await;
    outside(
        &gimlet,
        "glob",
        r"C:\windows",
        json!({"pattern": "*.ini", "path": r"C:\windows"}),
    )
    .await;
    gimlet.stop().await;
}

/// Makes a link at `link` to `target` the way a user's tools would: a junction with
/// `mklink /J` for a folder, a symbolic link otherwise. `None` where the system cannot (Wine 8
/// reports success and makes nothing).
fn link(link: &Path, target: &Path, junction: bool) -> Option<()> {
    if junction {
        let _ = std::process::Command::new("cmd")
            .arg("/c")
            .arg("mklink")
            .arg("/J")
            .arg(link)
            .arg(target)
            .output();
    } else if target.is_dir() {
        let _ = std::os::windows::fs::symlink_dir(target, link);
    } else {
        let _ = std::os::windows::fs::symlink_file(target, link);
    }
    std::fs::symlink_metadata(link).is_ok().then_some(())
}

/// Junctions and symbolic links that point out of the root are not followed.
#[tokio::test]
async fn junctions_and_symlinks_out_are_refused() {
    let gimlet = Gimlet::start().await;
    let outside_dir = tempfile::tempdir().unwrap();
    std::fs::write(outside_dir.path().join("secret.txt"), SECRET).unwrap();
    let root = gimlet.root();
    let cases = [
        (
            "junction",
            true,
            outside_dir.path().to_owned(),
            r"junction\secret.txt",
        ),
        (
            "dirlink",
            false,
            outside_dir.path().to_owned(),
            r"dirlink\secret.txt",
        ),
        (
            "filelink",
            false,
            outside_dir.path().join("secret.txt"),
            "filelink",
        ),
    ];
    let mut made = 0;
    for (name, junction, target, path) in cases {
        if link(&root.join(name), &target, junction).is_none() {
            row("read", path, "skipped: this system cannot make the link");
            continue;
        }
        made += 1;
        let text = err_text(&gimlet.call("read", json!({"path": path})).await);
        assert!(!text.contains(SECRET), "{path}: {text}");
        row("read", path, "refused");
        let text = err_text(
            &gimlet
                .call("write", json!({"path": path, "content": "planted"}))
                .await,
        );
        assert!(!text.is_empty(), "{path}");
        assert_eq!(
            std::fs::read_to_string(outside_dir.path().join("secret.txt")).unwrap(),
            SECRET
        );
        row("write", path, "refused");
    }
    let _ = writeln!(
        std::io::stderr(),
        "links made and tried: {made} of 3 (Wine 8 cannot make junctions or symbolic links)"
    );
    gimlet.stop().await;
}

/// What the files outside the root hold: never in a result.
const SECRET: &str = "TOP-SECRET-CONTENT";

/// Links Windows does not report as reparse points: Unix symbolic links seen through Wine
/// (as a file server that follows links itself shows them). `scripts/wine.sh` plants them
/// from the Unix side, where the test cannot, and names the folder in
/// `GIMLET_WINE_UNIX_LINKS`: `root\dirlink` -> `..\out`, `root\filelink` ->
/// `..\out\secret.txt`, `root\abslink` -> the absolute `out`. Each is refused by name,
/// nothing is written through it, inside the root or out, grep finds nothing through them and
/// ls does not enter them.
#[tokio::test]
async fn links_the_system_does_not_report_are_refused() {
    let Some(links) = std::env::var_os("GIMLET_WINE_UNIX_LINKS") else {
        row(
            "read",
            "unreported links",
            "skipped: not under scripts/wine.sh",
        );
        return;
    };
    let links = Path::new(&links);
    let root = links.join("root");
    let secret = links.join("out").join("secret.txt");
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), SECRET);
    let gimlet =
        Gimlet::start_with(TestClient::default(), &["--root", root.to_str().unwrap()]).await;
    for name in [r"dirlink\secret.txt", "filelink", r"abslink\secret.txt"] {
        let path = root.join(name);
        let path = path.to_str().unwrap();
        let text = err_text(&gimlet.call("read", json!({"path": path})).await);
        assert!(!text.contains(SECRET), "{name}: {text}");
        assert!(text.contains("does not report"), "{name}: {text}");
        row("read", name, "refused: a link the system does not report");
        let text = err_text(
            &gimlet
                .call("write", json!({"path": path, "content": "planted"}))
                .await,
        );
        assert!(text.contains("does not report"), "{name}: {text}");
        row("write", name, "refused: a link the system does not report");
    }
    // The walks: grep opens every file it searches as `read` does; ls does not go in.
    let root_arg = root.to_str().unwrap();
    let grep = gimlet
        .call(
            "grep",
            json!({"pattern": "TOP-SECRET", "path": root_arg, "output_mode": "content"}),
        )
        .await;
    let text = serde_json::to_string(&grep.content).unwrap();
    assert!(!text.contains(SECRET), "{text}");
    row("grep", "content through the links", "nothing found");
    let text = ok_text(&gimlet.call("ls", json!({"path": root_arg})).await);
    assert!(!text.contains("secret.txt"), "{text}");
    row("ls", "the root", "the linked folders not entered");
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), SECRET);
    assert!(!root.join("out").exists(), "nothing was made in the root");
    assert!(
        !root.join("secret.txt").exists(),
        "nothing was made in the root"
    );
    gimlet.stop().await;
}

/// A `write` of `path` that asks exactly one question, and is declined.
#[expect(clippy::unwrap_used, reason = "a test helper fails loudly")]
async fn write_is_asked_and_declined(gimlet: &Gimlet, path: &str) {
    let before = gimlet.handler.elicitations.lock().unwrap().len();
    let text = err_text(
        &gimlet
            .call("write", json!({"path": path, "content": "planted\n"}))
            .await,
    );
    assert!(text.contains("declined"), "{path}: {text}");
    let asked = gimlet.handler.elicitations.lock().unwrap().len();
    assert_eq!(asked, before + 1, "{path}: no question was asked");
}

/// A protected path spelled with other capitals (`.GIT\config`, `.Vscode\settings.json`) asks
/// as `.git/config` does; declined, nothing is written.
#[tokio::test]
async fn differently_cased_protected_paths_ask() {
    let client = TestClient::answering(|_| {
        ElicitResult::new(ElicitationAction::Accept).with_content(json!({"decision": "deny"}))
    });
    let gimlet = Gimlet::start_with(client, &[]).await;
    gimlet.write(".git/config", "[core]\n");
    gimlet.write(".vscode/settings.json", "{}\n");
    gimlet.write(".git/hooks/pre-commit", "exit 0\n");
    for (path, on_disk) in [
        (r".GIT\config", ".git/config"),
        (r".Git\CONFIG", ".git/config"),
        (r".Vscode\settings.json", ".vscode/settings.json"),
        (r".VSCODE\Settings.JSON", ".vscode/settings.json"),
        (r".git\HOOKS\pre-commit", ".git/hooks/pre-commit"),
    ] {
        // Read first, as an edit must; a read of these is not asked about.
        ok_text(&gimlet.call("read", json!({"path": path})).await);
        write_is_asked_and_declined(&gimlet, path).await;
        let content = std::fs::read_to_string(gimlet.root().join(on_disk)).unwrap_or_default();
        assert!(!content.contains("planted"), "{path}: {content}");
        row("write", path, "asked (protected), declined, unchanged");
    }
    // New files: no spelling on disk to take, so only the folded comparison catches them.
    for path in [r".HUSKY\pre-commit", ".Mcp.JSON"] {
        write_is_asked_and_declined(&gimlet, path).await;
        assert!(!gimlet.root().join(path).exists(), "{path}");
        row(
            "write",
            path,
            "new: asked (protected), declined, not created",
        );
    }
    gimlet.stop().await;
}

/// `bash` runs `cmd`, and every command is allowed by a rule.
const CMD_ALLOWED: &str = r#"
[tools.bash]
shell = 'C:\windows\system32\cmd.exe'

[[permissions.rules]]
action = "allow"
tool = "bash"
pattern = "*"
"#;

/// `cmd`, without a sandbox, allowed by a rule; a `bash` call starts a grandchild that appends
/// to a file every second and outlives the shell. When the call returns, the Job Object has
/// killed it: the file stops growing.
#[tokio::test]
async fn the_job_object_kills_a_grandchild_that_outlives_the_shell() {
    let config = CMD_ALLOWED;
    let (gimlet, _config) =
        Gimlet::start_with_config(TestClient::default(), config, &["--sandbox", "off"]).await;
    // `cmd` gets the line as written: quotes stay quotes.
    let text = ok_text(
        &gimlet
            .call("bash", json!({"command": "echo \"a  b\""}))
            .await,
    );
    assert!(text.starts_with("\"a  b\""), "{text}");
    row("bash", "echo \"a  b\" (cmd)", "ok, quotes kept");
    let beat = gimlet.root().join("beat.txt");
    let command = "start /b cmd /c \"for /l %i in (1,1,60) do (echo x>>beat.txt & ping -n 2 127.0.0.1 >nul)\" & ping -n 3 127.0.0.1 >nul";
    let text = ok_text(&gimlet.call("bash", json!({"command": command})).await);
    assert!(text.contains("exit code 0"), "{text}");
    let size = || std::fs::metadata(&beat).map_or(0, |m| m.len());
    assert!(size() > 0, "the grandchild never ran: {text}");
    // Alive, it appends every second; give it four chances to show it is.
    let after_call = size();
    let grew = eventually(Duration::from_secs(4), || size() > after_call).await;
    assert!(
        !grew,
        "the grandchild outlived the call: {after_call} bytes, then {}",
        size()
    );
    row(
        "bash",
        "start /b a grandchild (cmd, --sandbox off)",
        "killed with the call",
    );
    gimlet.stop().await;
}

/// Whether the probe server (`ping -n 61 127.0.0.1`) runs: under Wine from the Unix
/// processes' command lines (`Z:\\proc`; Wine 8's `tasklist` lists nothing), on Windows from
/// `tasklist`.
fn probe_runs() -> bool {
    let proc = Path::new(r"Z:\proc");
    if proc.is_dir() {
        return std::fs::read_dir(proc).is_ok_and(|entries| {
            entries.flatten().any(|entry| {
                std::fs::read(entry.path().join("cmdline")).is_ok_and(|line| {
                    let line = String::from_utf8_lossy(&line).to_ascii_lowercase();
                    line.contains("ping") && line.contains("61")
                })
            })
        });
    }
    std::process::Command::new("tasklist")
        .output()
        .is_ok_and(|out| {
            String::from_utf8_lossy(&out.stdout)
                .to_ascii_lowercase()
                .contains("ping.exe")
        })
}

/// What gimlet starts ends with it even when it is killed: a language server that never reads
/// its input (`ping`, so the end of its input does not stop it) is gone once gimlet is (the
/// server's kill-on-close Job Object; before, the helper waited for the server and both
/// outlived gimlet).
#[tokio::test]
async fn a_server_that_ignores_its_input_dies_with_a_killed_gimlet() {
    let config = "[lsp]\nwait_ms = 300\n[lsp.servers.probe]\n\
                  command = [\"ping\", \"-n\", \"61\", \"127.0.0.1\"]\nextensions = [\"probe\"]\n";
    let (gimlet, _config) = Gimlet::start_with_config(TestClient::default(), config, &[]).await;
    assert!(!probe_runs(), "a probe runs before the test");
    gimlet
        .call("write", json!({"path": "a.probe", "content": "x\n"}))
        .await;
    assert!(
        eventually(Duration::from_secs(10), probe_runs).await,
        "the server did not start"
    );
    let _ = std::process::Command::new("taskkill")
        .args(["/F", "/PID", &gimlet.pid.to_string()])
        .output();
    let gone = eventually(Duration::from_secs(10), || !probe_runs()).await;
    assert!(gone, "the server outlived gimlet");
    row(
        "lsp",
        "a server ignoring its input, gimlet killed",
        "gone with it",
    );
}

/// A language server whose tree holds more than `[lsp] max_memory_mb` is ended (its helper,
/// and with it the helper's Job Object) and started again on its next use, whose result says
/// so in the words Linux uses. The tree's size is read from the system's process list; the
/// server (`scripts/wine/fake_lsp_server.c`, built by `scripts/wine.sh`, which names it in
/// `GIMLET_WINE_FAKE_LSP`) holds 64 MiB at its first start, and little after. That the first
/// server's processes are gone is not checked here: under Wine the tree's figure is far above
/// what the server holds (541 MB for these 64 MiB; not explained yet: Wine's working-set
/// figures, or processes Wine starts under the helper), so the second server may be ended in
/// its turn, and the processes left cannot be told apart.
#[tokio::test]
async fn a_server_over_its_memory_cap_is_restarted_with_a_note() {
    let Some(server) = std::env::var_os("GIMLET_WINE_FAKE_LSP") else {
        row(
            "lsp",
            "a server over max_memory_mb",
            "skipped: not under scripts/wine.sh (it builds the server)",
        );
        return;
    };
    let config = format!(
        "[lsp]\nwait_ms = 2000\nrequest_timeout_ms = 20000\nmax_memory_mb = 40\n\
         [lsp.servers.fake]\ncommand = [{:?}]\nextensions = [\"fake\"]\n",
        server.to_string_lossy()
    );
    let (gimlet, _config) = Gimlet::start_with_config(TestClient::default(), &config, &[]).await;
    gimlet
        .call("write", json!({"path": "a.fake", "content": "x\n"}))
        .await;
    let hover = json!({"operation": "hover", "path": "a.fake", "line": 1});
    let served_by = |text: &str| {
        text.split("served by pid ")
            .nth(1)
            .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|pid| pid.parse::<u32>().ok())
    };
    // Under Wine a server takes seconds to start, so the first call may still wait for its
    // answer when the 5 s check ends the server (that call fails: it "exited"). Calls go on
    // until one is answered with the note.
    let (mut first, mut restarted) = (None, None);
    for _ in 0..80 {
        let result = gimlet.call("lsp", hover.clone()).await;
        let said = text(&result);
        if result.is_error != Some(true) {
            if said.contains("and was restarted") {
                restarted = Some(said);
                break;
            }
            first = first.or_else(|| served_by(&said));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let said = restarted.expect("the server over its cap was restarted within 40 s");
    assert!(
        said.contains(" MB (cap 40 MB) and was restarted."),
        "{said}"
    );
    let second = served_by(&said);
    assert!(second.is_some(), "{said}");
    if first.is_some() {
        assert_ne!(second, first, "{said}");
    }
    row(
        "lsp",
        "a server over max_memory_mb (64 MiB, cap 40 MB)",
        &format!(
            "ended and restarted: {}",
            said.lines().find(|l| l.contains("restarted")).unwrap_or("")
        ),
    );
    gimlet.stop().await;
}

/// Checkpoints on Windows (on by default): what a `cmd` command changed (a file rewritten,
/// one deleted, one moved, 50 generated in a new folder) is listed and undone byte for byte;
/// a restore is refused when the file changed since, and with `overwrite` goes through.
#[tokio::test]
async fn a_commands_changes_are_listed_undone_and_restored() {
    let config = CMD_ALLOWED;
    let (gimlet, _config) =
        Gimlet::start_with_config(TestClient::default(), config, &["--sandbox", "off"]).await;
    let root = gimlet.root();
    gimlet.write("a.txt", "alpha\r\n");
    gimlet.write("b.txt", "bee\r\n");
    gimlet.write("c.txt", "sea\r\n");
    gimlet.write(r"dir\d.txt", "dee\r\n");
    // A generator (a batch file: the command line itself is checked against the rules, and a
    // `%i` there cannot be).
    gimlet.write(
        "gen.cmd",
        "@mkdir gen\r\n@for /l %%i in (1,1,50) do @echo %%i> gen\\f%%i.txt\r\n",
    );
    ok_text(&gimlet.call("ls", json!({})).await);
    let before = super::checkpoints_watch::snapshot(&root);
    let command = "echo changed> a.txt & del b.txt & move c.txt moved.txt >nul & gen.cmd";
    let text = ok_text(&gimlet.call("bash", json!({"command": command})).await);
    assert!(text.contains("exit code 0"), "{text}");
    let listing = allowed(&gimlet, "checkpoints", "after a cmd command", json!({})).await;
    for line in [
        "M a.txt +1 -1",
        "D b.txt",
        "R c.txt -> moved.txt",
        "A gen/f1.txt +1",
        "A gen/f19.txt +1",
    ] {
        assert!(listing.contains(line), "{line:?} not in\n{listing}");
    }
    allowed(&gimlet, "undo", "the cmd command", json!({})).await;
    assert_eq!(
        super::checkpoints_watch::snapshot(&root),
        before,
        "undo did not put the tree back"
    );
    row("undo", "a cmd command's 53 changes", "byte for byte");
    // Again, then the user edits the file, and the restore is refused.
    let text = ok_text(
        &gimlet
            .call("bash", json!({"command": "echo again> a.txt"}))
            .await,
    );
    assert!(text.contains("exit code 0"), "{text}");
    let listing = ok_text(&gimlet.call("checkpoints", json!({})).await);
    let id = listing
        .lines()
        .find_map(|line| {
            let rest = line.trim_start().strip_prefix('#')?;
            let (id, after) = rest.split_once(' ')?;
            after.starts_with("bash").then(|| id.to_owned())
        })
        .unwrap();
    std::fs::write(root.join("a.txt"), "mine\r\n").unwrap();
    let id: u64 = id.parse().unwrap();
    let text = err_text(&gimlet.call("restore", json!({"checkpoint": id})).await);
    assert!(text.contains("`a.txt` changed since checkpoint"), "{text}");
    assert_eq!(std::fs::read(root.join("a.txt")).unwrap(), b"mine\r\n");
    row(
        "restore",
        "a file the user changed since",
        "refused, nothing written",
    );
    let text = ok_text(
        &gimlet
            .call("restore", json!({"checkpoint": id, "overwrite": true}))
            .await,
    );
    assert!(text.contains("`a.txt` restored"), "{text}");
    assert_eq!(std::fs::read(root.join("a.txt")).unwrap(), b"alpha\r\n");
    row("restore", "with overwrite", "restored");
    gimlet.stop().await;
}
