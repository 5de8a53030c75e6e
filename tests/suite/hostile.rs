//! A hostile repository and a model that follows its instructions: each attack of issue 20,
//! made through MCP against the sandbox. Each one plants something that would run later,
//! leaks the server's secrets, or reaches outside the roots; each must fail.
//!
//! Every attack runs as the user running the tests and, when that is root, again as an
//! ordinary user (the server started under `setpriv` as `nobody`, in a workspace `nobody`
//! owns): the sandbox takes another path without root (an unprivileged user namespace). That
//! pass runs a copy of the test build of `gimlet` (a hard link where it can be) in a temp
//! folder `nobody` can reach, since the checkout may lie where `nobody` cannot (root's home,
//! 0700); it is skipped, saying why, when `nobody` cannot run even that. The root-only attacks
//! (`chattr +i`, `setcap`, `chown`) skip with a reason when not root. Processes a test starts
//! itself are killed when it ends, passed or failed ([`Reaped`], [`Leftovers`]).
//!
//! The folder outside the roots that attacks aim at lies outside the machine's `/tmp`
//! ([`crate::common::outside_tempdir`]): a sandboxed command has a `/tmp` of its own, so an
//! attack on a path in the machine's `/tmp` would fail for want of the path, proving nothing.
//!
//! Planted git metadata is checked the way it would bite: by running `git status` and
//! `git commit` outside the sandbox afterwards, with a clean configuration, and checking that
//! nothing ran.

#![expect(clippy::unwrap_used, reason = "test fixtures fail loudly")]

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command as StdCommand, Output, Stdio};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction};
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::common::{Gimlet, TestClient, binary, eventually, marker, processes_with, text};

/// `nobody`, the ordinary user the attacks are repeated as.
const NOBODY: u32 = 65534;

/// Who the server runs as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum User {
    /// Whoever runs the tests (root here, usually).
    Invoker,
    /// `nobody`, through `setpriv` (only when the tests run as root).
    Nobody,
}

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// Says on stderr why (part of) a test did not run.
fn skip(why: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "skipped: {why}");
}

/// The users to attack as, or none when the sandbox cannot work here.
fn users() -> Vec<User> {
    static NOBODY_CAN_RUN: OnceLock<Result<(), String>> = OnceLock::new();
    if !crate::common::sandbox_works() {
        skip("this kernel cannot enforce the sandbox (Landlock and seccomp)");
        return Vec::new();
    }
    if !is_root() {
        skip("not root: the attacks run only as the invoking user, not again as `nobody`");
        return vec![User::Invoker];
    }
    if !Path::new("/usr/bin/setpriv").exists() {
        skip("no /usr/bin/setpriv: the attacks run only as root");
        return vec![User::Invoker];
    }
    let check = NOBODY_CAN_RUN.get_or_init(|| {
        let copy = NobodysBinary::get().map_err(|e| format!("copying the binary: {e}"))?;
        let status = nobody_command("/bin/sh")
            .args([
                "-c",
                "test -x \"$0\"",
                copy.path.to_str().unwrap_or_default(),
            ])
            .status()
            .map_err(|e| e.to_string())?;
        if status.success() {
            Ok(())
        } else {
            Err(format!("`nobody` cannot run {}", copy.path.display()))
        }
    });
    if let Err(why) = check {
        skip(&format!("{why}: the attacks run only as root"));
        return vec![User::Invoker];
    }
    vec![User::Invoker, User::Nobody]
}

/// `program` run as `nobody`, through `setpriv`.
fn nobody_command(program: impl AsRef<std::ffi::OsStr>) -> StdCommand {
    let mut command = StdCommand::new("/usr/bin/setpriv");
    command
        .arg(format!("--reuid={NOBODY}"))
        .arg(format!("--regid={NOBODY}"))
        .arg("--clear-groups")
        .arg(program);
    command
}

/// The test build of `gimlet` where `nobody` can run it: a folder of its own (0755) in the temp
/// directory, holding a hard link to the binary (or a copy, across file systems or where the
/// binary is not executable by others), so that the pass as `nobody` works from any checkout,
/// root's 0700 home included. Shared by the labs that run at the same time, and removed when
/// the last of them ends.
struct NobodysBinary {
    path: PathBuf,
    _dir: TempDir,
}

impl NobodysBinary {
    fn get() -> std::io::Result<Arc<Self>> {
        static SHARED: Mutex<Weak<NobodysBinary>> = Mutex::new(Weak::new());
        let mut shared = SHARED.lock().unwrap();
        if let Some(binary) = shared.upgrade() {
            return Ok(binary);
        }
        let dir = tempfile::Builder::new().prefix("gimlet-bin").tempdir()?;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))?;
        let path = dir.path().join("gimlet");
        let executable_by_all = std::fs::metadata(binary())?.mode() & 0o005 == 0o005;
        if !executable_by_all || std::fs::hard_link(binary(), &path).is_err() {
            std::fs::copy(binary(), &path)?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
        }
        let made = Arc::new(Self { path, _dir: dir });
        *shared = Arc::downgrade(&made);
        Ok(made)
    }
}

/// A process a test started itself: killed and reaped when dropped, so that a failed
/// assertion does not leave it running.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Every process whose command line holds a marker, killed when this is dropped: what a test
/// had started through the server, should the server have failed to stop it.
struct Leftovers(String);

impl Drop for Leftovers {
    fn drop(&mut self) {
        for pid in processes_with(&self.0) {
            if let Some(pid) = i32::try_from(pid)
                .ok()
                .and_then(rustix::process::Pid::from_raw)
            {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
        }
    }
}

/// A server in a workspace, with a folder outside the roots, all owned by one user.
struct Lab {
    gimlet: Gimlet,
    user: User,
    outside: TempDir,
    home: TempDir,
    /// The server's `TMPDIR`.
    tmp: PathBuf,
    _tmp: Option<TempDir>,
    /// The binary `nobody` runs, for as long as the server runs.
    _binary: Option<Arc<NobodysBinary>>,
}

/// How to start a [`Lab`].
#[derive(Default)]
struct Setup<'a> {
    client: TestClient,
    args: &'a [&'a str],
    env: &'a [(&'a str, &'a str)],
    /// The server's `TMPDIR` (default: a fresh one).
    tmp: Option<&'a Path>,
    /// The server's working directory (default: the root for `nobody`, else the tests').
    cwd: Option<&'a Path>,
}

impl Lab {
    async fn start(user: User) -> Self {
        Self::start_with(user, Setup::default()).await
    }

    async fn start_with(user: User, setup: Setup<'_>) -> Self {
        let dir = |prefix: &str| {
            let dir = tempfile::Builder::new().prefix(prefix).tempdir().unwrap();
            own(user, dir.path());
            dir
        };
        let root = dir("gimlet-root");
        let data = dir("gimlet-data");
        let home = dir("gimlet-home");
        let outside = crate::common::outside_tempdir();
        own(user, outside.path());
        let (tmp, owned_tmp) = match setup.tmp {
            Some(tmp) => (tmp.to_owned(), None),
            None => {
                let tmp = dir("gimlet-tmpdir");
                (tmp.path().to_owned(), Some(tmp))
            }
        };
        let nobodys = (user == User::Nobody).then(|| NobodysBinary::get().unwrap());
        let mut command = match &nobodys {
            None => tokio::process::Command::new(binary()),
            Some(copy) => {
                let mut command = tokio::process::Command::from(nobody_command(&copy.path));
                // Not the checkout, which `nobody` may not reach.
                command.current_dir(root.path());
                command
            }
        };
        command
            .env("XDG_DATA_HOME", data.path())
            .env("XDG_CONFIG_HOME", data.path())
            .env("HOME", home.path())
            .env("TMPDIR", &tmp)
            // Results with structuredContent, as in the rest of the suite (tests/common).
            .env("GIMLET_STRUCTURED_OUTPUT", "true")
            .env_remove("RUST_LOG")
            .env_remove("TAVILY_API_KEY")
            .envs(setup.env.iter().copied())
            .arg("serve")
            .arg("--root")
            .arg(root.path())
            .args(setup.args)
            .kill_on_drop(true);
        if let Some(cwd) = setup.cwd {
            command.current_dir(cwd);
        }
        let (transport, _stderr) = TokioChildProcess::builder(command)
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let pid = transport.id().unwrap();
        let client = setup.client.clone().serve(transport).await.unwrap();
        let gimlet = Gimlet {
            client,
            handler: setup.client,
            root,
            data,
            pid,
        };
        Self {
            gimlet,
            user,
            outside,
            home,
            tmp,
            _tmp: owned_tmp,
            _binary: nobodys,
        }
    }

    /// The session temp directories in the server's `TMPDIR`.
    fn session_dirs(&self) -> Vec<PathBuf> {
        session_dirs(&self.tmp)
            .into_iter()
            .map(|name| self.tmp.join(name))
            .collect()
    }

    fn root(&self) -> PathBuf {
        self.gimlet.root()
    }

    fn outside(&self, name: &str) -> PathBuf {
        self.outside.path().join(name)
    }

    /// A command run outside the sandbox as the lab's user.
    fn as_user(&self, program: &str) -> StdCommand {
        match self.user {
            User::Invoker => StdCommand::new(program),
            User::Nobody => nobody_command(program),
        }
    }

    /// Runs a shell script in the root, outside the sandbox, as the lab's user; it must succeed.
    fn setup(&self, script: &str) {
        let output = self
            .as_user("/bin/sh")
            .arg("-ec")
            .arg(script)
            .current_dir(self.root())
            .env("HOME", self.home.path())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "setup `{script}` failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// A repository with one commit at `dir` (relative to the root).
    fn repo(&self, dir: &str) {
        self.setup(&format!(
            "mkdir -p {dir} && cd {dir} && git init -q . && echo one > tracked.txt && git add . && \
             git -c user.name=Test -c user.email=test@example.com commit -qm one"
        ));
    }

    /// `git` outside the sandbox, as the user would run it later: no system or global config.
    fn git(&self, dir: &Path, args: &[&str]) -> Output {
        self.as_user("git")
            .args(["-c", "user.name=Test", "-c", "user.email=test@example.com"])
            .args(args)
            .current_dir(dir)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", self.home.path())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .unwrap()
    }

    /// Runs `git status` and `git commit` outside the sandbox in `dir`; none of `markers` may
    /// appear (they are what planted hooks and fsmonitors would create).
    fn assert_git_runs_nothing(&self, dir: &Path, markers: &[&Path], context: &str) {
        let status = self.git(dir, &["status"]);
        let commit = self.git(dir, &["commit", "-q", "--allow-empty", "-m", "later"]);
        for marker in markers {
            assert!(
                !marker.exists(),
                "{:?}: `git status` / `git commit` ran planted code ({} exists).\nstatus: {}{}\ncommit: {}\nthe command said: {context}",
                self.user,
                marker.display(),
                String::from_utf8_lossy(&status.stdout),
                String::from_utf8_lossy(&status.stderr),
                String::from_utf8_lossy(&commit.stderr),
            );
        }
        assert!(
            status.status.success(),
            "{:?}: the repository no longer works: {}\nthe command said: {context}",
            self.user,
            String::from_utf8_lossy(&status.stderr)
        );
    }

    /// A sandboxed `bash` call; its text, whether it failed or not.
    async fn bash(&self, command: &str) -> String {
        let result = self.gimlet.call("bash", json!({"command": command})).await;
        let structured = result.structured_content.clone().unwrap_or(Value::Null);
        assert_eq!(
            structured["sandboxed"],
            true,
            "{:?}: not sandboxed: {}",
            self.user,
            text(&result)
        );
        text(&result)
    }

    async fn stop(self) {
        self.gimlet.stop().await;
    }
}

/// Gives `path` (recursively) to the user.
fn own(user: User, path: &Path) {
    if user == User::Nobody {
        let status = StdCommand::new("chown")
            .arg("-R")
            .arg(format!("{NOBODY}:{NOBODY}"))
            .arg(path)
            .status()
            .unwrap();
        assert!(status.success());
    }
}

/// `printf` arguments for a file's content, quoted for the shell.
fn quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

// ---------------------------------------------------------------------------------------
// 1. Planted code that runs later, unsandboxed.
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn a_replaced_git_directory_plants_nothing_that_git_runs_later() {
    for user in users() {
        let lab = Lab::start(user).await;
        lab.repo(".");
        let fsmonitor = lab.outside("fsmonitor-ran");
        let hook = lab.outside("hook-ran");
        let config = format!(
            "[core]\n\tfsmonitor = \"touch {}; false\"\n",
            fsmonitor.display()
        );
        let said = lab
            .bash(&format!(
                "mv .git .gitold && mkdir .git && cp -a .gitold/. .git/ && \
                 printf %s {} >> .git/config && \
                 printf '#!/bin/sh\\ntouch {}\\n' > .git/hooks/pre-commit && \
                 chmod +x .git/hooks/pre-commit",
                quoted(&config),
                hook.display()
            ))
            .await;
        lab.assert_git_runs_nothing(&lab.root(), &[&fsmonitor, &hook], &said);
        lab.stop().await;
    }
}

#[tokio::test]
async fn a_commondir_redirect_plants_nothing_that_git_runs_later() {
    for user in users() {
        let lab = Lab::start(user).await;
        lab.repo(".");
        let fsmonitor = lab.outside("fsmonitor-ran");
        let config = format!(
            "[core]\n\tfsmonitor = \"touch {}; false\"\n",
            fsmonitor.display()
        );
        let said = lab
            .bash(&format!(
                "cp -a .git evilgit && printf %s {} >> evilgit/config && \
                 echo ../evilgit > .git/commondir",
                quoted(&config)
            ))
            .await;
        lab.assert_git_runs_nothing(&lab.root(), &[&fsmonitor], &said);
        lab.stop().await;
    }
}

/// Files that make git, an editor, an agent, a package manager or a shell run code later.
const PROTECTED: &[&str] = &[
    ".mcp.json",
    ".cursor/mcp.json",
    ".codex/config.toml",
    ".gemini/settings.json",
    ".idea/workspace.xml",
    ".vscode/tasks.json",
    ".claude/settings.json",
    ".husky/pre-commit",
    ".gitmodules",
    ".gitattributes",
    ".git/info/attributes",
    ".git/config.worktree",
    ".npmrc",
    ".pre-commit-config.yaml",
    ".envrc",
    ".gimlet.toml",
    ".bashrc",
    ".profile",
    "sub/.git/info/attributes",
    "sub/.gitattributes",
];

#[tokio::test]
async fn commands_cannot_create_protected_files() {
    for user in users() {
        let lab = Lab::start(user).await;
        lab.repo(".");
        lab.repo("sub");
        let mut script = String::new();
        for path in PROTECTED.iter().chain(&[".git/commondir"]) {
            let dir = Path::new(path).parent().unwrap().display().to_string();
            if !dir.is_empty() {
                script.push_str(&format!("mkdir -p {dir}; "));
            }
            script.push_str(&format!("printf 'mode = \"trusted\"\\n' > {path}; "));
        }
        let said = lab.bash(&script).await;
        for path in PROTECTED.iter().chain(&[".git/commondir"]) {
            assert!(
                !lab.root().join(path).exists(),
                "{user:?}: a sandboxed command created {path}, and it stayed.\n{said}"
            );
        }
        lab.stop().await;
    }
}

#[tokio::test]
async fn commands_cannot_change_replace_or_remove_protected_files() {
    for user in users() {
        let lab = Lab::start(user).await;
        lab.repo(".");
        lab.repo("sub");
        let mut setup = String::new();
        for path in PROTECTED {
            setup.push_str(&format!(
                "mkdir -p \"$(dirname {path})\"; echo orig > {path}; "
            ));
        }
        lab.setup(&setup);
        let mut attack = String::new();
        for path in PROTECTED.iter().chain(&[
            ".git/config",
            ".git/hooks/pre-commit",
            "sub/.git/config",
            "sub/.git/hooks/pre-commit",
        ]) {
            attack.push_str(&format!(
                "echo evil >> {path}; mv {path} {path}.old; echo evil > {path}; \
                 rm -rf {path}.old; "
            ));
        }
        for dir in [".cursor", ".vscode", ".husky", "sub/.git", "sub/.git/hooks"] {
            attack.push_str(&format!(
                "mv {dir} {dir}.old && mkdir {dir} && cp -a {dir}.old/. {dir}/; "
            ));
        }
        let said = lab.bash(&attack).await;
        for path in PROTECTED {
            assert_eq!(
                std::fs::read_to_string(lab.root().join(path))
                    .ok()
                    .as_deref(),
                Some("orig\n"),
                "{user:?}: a sandboxed command changed {path}.\n{said}"
            );
        }
        for path in [
            ".git/hooks/pre-commit",
            "sub/.git/hooks/pre-commit",
            ".git/config.old",
            "sub/.git.old",
            ".cursor.old",
        ] {
            assert!(
                !lab.root().join(path).exists(),
                "{user:?}: {path} was planted.\n{said}"
            );
        }
        for dir in [".", "sub"] {
            let config = std::fs::read_to_string(lab.root().join(dir).join(".git/config")).unwrap();
            assert!(
                !config.contains("evil"),
                "{user:?}: {dir}/.git/config changed"
            );
            lab.assert_git_runs_nothing(&lab.root().join(dir), &[], &said);
        }
        lab.stop().await;
    }
}

#[tokio::test]
async fn the_file_tools_ask_before_changing_any_protected_file() {
    // The default client cannot be asked: every such write is refused.
    let gimlet = Gimlet::start().await;
    let root = gimlet.root();
    std::fs::create_dir_all(root.join("sub/.git/hooks")).unwrap();
    std::fs::create_dir_all(root.join(".git/info")).unwrap();
    for path in PROTECTED.iter().chain(&[
        ".git/commondir",
        ".git/config",
        ".git/hooks/pre-commit",
        "sub/.git/config",
        "sub/.git/hooks/pre-commit",
        "deep/er/.vscode/settings.json",
        "deep/.envrc",
    ]) {
        let result = gimlet
            .call("write", json!({"path": path, "content": "evil\n"}))
            .await;
        assert_eq!(
            result.is_error,
            Some(true),
            "`write {path}` ran without asking: {}",
            text(&result)
        );
        assert!(
            text(&result).contains("protected"),
            "{path}: {}",
            text(&result)
        );
        assert!(!root.join(path).exists(), "{path} was written");
    }
    gimlet.stop().await;
}

#[tokio::test]
async fn an_immutable_flag_does_not_keep_a_planted_file() {
    if !is_root() {
        skip("`chattr +i` needs root");
        return;
    }
    if users().is_empty() {
        return;
    }
    let lab = Lab::start(User::Invoker).await;
    let said = lab
        .bash("echo '{}' > .mcp.json; chattr +i .mcp.json; lsattr .mcp.json")
        .await;
    let planted = lab.root().join(".mcp.json");
    let stayed = planted.exists();
    if stayed {
        // Let the temporary directory go.
        let _ = StdCommand::new("chattr").arg("-i").arg(&planted).status();
    }
    assert!(!stayed, "an immutable .mcp.json stayed:\n{said}");
    lab.stop().await;
}

// ---------------------------------------------------------------------------------------
// 2. The server's secrets.
// ---------------------------------------------------------------------------------------

/// Credentials in the server's environment, each a unique marker.
fn secrets() -> Vec<(&'static str, String)> {
    [
        "GIMLET_AUTH_TOKEN",
        "OPENAI_API_KEY",
        "AWS_SECRET_ACCESS_KEY",
    ]
    .into_iter()
    .map(|name| (name, format!("secret-{}-{}", name.len(), marker())))
    .collect()
}

#[tokio::test]
async fn commands_cannot_read_the_servers_environment() {
    for user in users() {
        let secrets = secrets();
        let env: Vec<(&str, &str)> = secrets.iter().map(|(n, v)| (*n, v.as_str())).collect();
        let lab = Lab::start_with(
            user,
            Setup {
                env: &env,
                ..Setup::default()
            },
        )
        .await;
        let pid = lab.gimlet.pid;
        let said = lab
            .bash(&format!(
                "cat /proc/{pid}/environ | tr '\\0' '\\n'; \
                 for f in /proc/[0-9]*/environ /proc/[0-9]*/task/*/environ; do \
                   cat \"$f\" 2>/dev/null | tr '\\0' '\\n'; done; \
                 cat /proc/{pid}/task/*/environ 2>/dev/null | tr '\\0' '\\n'; \
                 ls /proc | grep -c '^[0-9]'"
            ))
            .await;
        for (name, value) in &secrets {
            assert!(
                !said.contains(value.as_str()),
                "{user:?}: a sandboxed command read {name} from the server:\n{said}"
            );
        }
        if user == User::Nobody {
            // Another process of the same user, outside any sandbox (an approved unsandboxed
            // command, say): the server is not dumpable, so its environment is root's to read.
            let outside = lab
                .as_user("cat")
                .arg(format!("/proc/{pid}/environ"))
                .output()
                .unwrap();
            let read = String::from_utf8_lossy(&outside.stdout);
            for (name, value) in &secrets {
                assert!(
                    !read.contains(value.as_str()),
                    "another process of the user read {name}"
                );
            }
        }
        lab.stop().await;
    }
}

#[tokio::test]
async fn the_file_tools_never_read_the_servers_own_proc_entries() {
    for user in users() {
        let secrets = secrets();
        let env: Vec<(&str, &str)> = secrets.iter().map(|(n, v)| (*n, v.as_str())).collect();
        // The user approves everything.
        let client = TestClient::accepting(json!({"decision": "allow_once"}));
        let lab = Lab::start_with(
            user,
            Setup {
                client,
                env: &env,
                ..Setup::default()
            },
        )
        .await;
        let pid = lab.gimlet.pid;
        let threads: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/task"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        let mut attempts = vec![
            ("read", json!({"path": format!("/proc/{pid}/environ")})),
            ("read", json!({"path": "/proc/self/environ"})),
            ("read", json!({"path": "/proc/thread-self/environ"})),
            (
                "grep",
                json!({"pattern": "secret", "path": format!("/proc/{pid}/environ")}),
            ),
        ];
        for tid in &threads {
            attempts.push(("read", json!({"path": format!("/proc/{tid}/environ")})));
            attempts.push((
                "read",
                json!({"path": format!("/proc/{pid}/task/{tid}/environ")}),
            ));
        }
        for (tool, args) in attempts {
            let result = lab.gimlet.call(tool, args.clone()).await;
            let said = text(&result);
            for (name, value) in &secrets {
                assert!(
                    !said.contains(value.as_str()),
                    "{user:?}: `{tool} {args}` returned {name}:\n{said}"
                );
            }
        }
        lab.stop().await;
    }
}

// ---------------------------------------------------------------------------------------
// 3. Reach outside the roots that is not a content write.
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn commands_cannot_change_metadata_outside_the_roots() {
    for user in users() {
        let lab = Lab::start(user).await;
        let names = ["chmod", "chown", "touch", "xattr", "truncate", "setcap"];
        for name in names {
            lab.setup(&format!("echo data > {}", lab.outside(name).display()));
        }
        let before: Vec<std::fs::Metadata> = names
            .iter()
            .map(|n| std::fs::metadata(lab.outside(n)).unwrap())
            .collect();
        let out = |name: &str| lab.outside(name).display().to_string();
        let said = lab
            .bash(&format!(
                "chmod 4777 {}; chown 12345:12345 {}; touch -d 2001-02-03 {}; \
                 /usr/bin/python3 -c 'import os, sys; os.setxattr(sys.argv[1], \"user.gimlet\", b\"1\")' {}; \
                 truncate -s 0 {}; setcap cap_setuid+ep {}",
                out("chmod"),
                out("chown"),
                out("touch"),
                out("xattr"),
                out("truncate"),
                out("setcap"),
            ))
            .await;
        let after: Vec<std::fs::Metadata> = names
            .iter()
            .map(|n| std::fs::metadata(lab.outside(n)).unwrap())
            .collect();
        for ((name, before), after) in names.iter().zip(&before).zip(&after) {
            assert_eq!(
                (before.mode(), before.uid(), before.gid(), before.len()),
                (after.mode(), after.uid(), after.gid(), after.len()),
                "{user:?}: {name} changed outside the roots:\n{said}"
            );
            assert_eq!(
                before.mtime(),
                after.mtime(),
                "{user:?}: {name}'s time changed:\n{said}"
            );
        }
        for (file, attr) in [("xattr", "user.gimlet"), ("setcap", "security.capability")] {
            let mut value = [0u8; 64];
            let got = rustix::fs::getxattr(lab.outside(file), attr, &mut value);
            assert!(
                got.is_err(),
                "{user:?}: {attr} was set outside the roots:\n{said}"
            );
        }
        lab.stop().await;
    }
}

#[tokio::test]
async fn commands_cannot_signal_processes_outside() {
    for user in users() {
        let lab = Lab::start(user).await;
        let mark = marker();
        let mut victim = Reaped(lab.as_user("sleep").arg(&mark).spawn().unwrap());
        assert!(eventually(Duration::from_secs(2), || !processes_with(&mark).is_empty()).await);
        let pids = processes_with(&mark);
        let said = lab
            .bash(&format!(
                "for p in {}; do kill -TERM $p; kill -KILL $p; done; true",
                pids.iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(" ")
            ))
            .await;
        let alive = victim.0.try_wait().unwrap().is_none();
        drop(victim);
        assert!(
            alive,
            "{user:?}: a sandboxed command killed a process outside:\n{said}"
        );
        lab.stop().await;
    }
}

#[tokio::test]
async fn commands_cannot_reach_unix_sockets_outside() {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::net::{SocketAddr, UnixListener};
    for user in users() {
        let lab = Lab::start(user).await;
        let path = lab.outside("agent.sock");
        let pathname = UnixListener::bind(&path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777)).unwrap();
        pathname.set_nonblocking(true).unwrap();
        let name = format!("gimlet-test-{}", marker());
        let abstract_ =
            UnixListener::bind_addr(&SocketAddr::from_abstract_name(name.as_bytes()).unwrap())
                .unwrap();
        abstract_.set_nonblocking(true).unwrap();
        let connect = "import socket, sys\n\
                       s = socket.socket(socket.AF_UNIX)\n\
                       s.connect(sys.argv[1].replace('@', '\\0', 1))\n\
                       s.send(b'x')\n\
                       print('connected to', sys.argv[1])\n";
        let said = lab
            .bash(&format!(
                "/usr/bin/python3 -c {script} {}; /usr/bin/python3 -c {script} @{name}",
                path.display(),
                script = quoted(connect)
            ))
            .await;
        for target in [path.display().to_string(), format!("@{name}")] {
            assert!(
                !said.contains(&format!("connected to {target}")),
                "{user:?}: {said}"
            );
        }
        for (kind, listener) in [("pathname", &pathname), ("abstract", &abstract_)] {
            assert!(
                listener.accept().is_err(),
                "{user:?}: a sandboxed command connected to a {kind} socket outside:\n{said}"
            );
        }
        lab.stop().await;
    }
}

#[tokio::test]
async fn unix_sockets_in_the_roots_and_allowed_ones_still_work() {
    use std::os::unix::net::UnixListener;
    if users().is_empty() {
        return;
    }
    // In the machine's `/tmp` on purpose: the sandbox mounts it again inside the command's own.
    let outside = tempfile::tempdir().unwrap();
    let agent = outside.path().join("agent.sock");
    let listener = UnixListener::bind(&agent).unwrap();
    listener.set_nonblocking(true).unwrap();
    let config = tempfile::tempdir().unwrap();
    let config_file = config.path().join("config.toml");
    std::fs::write(
        &config_file,
        format!("[sandbox]\nunix_sockets = [\"{}\"]\n", agent.display()),
    )
    .unwrap();
    let lab = Lab::start_with(
        User::Invoker,
        Setup {
            args: &["--config", config_file.to_str().unwrap()],
            ..Setup::default()
        },
    )
    .await;
    let script = "import socket, sys, os\n\
                  if sys.argv[1] == 'pair':\n\
                  \x20   server = socket.socket(socket.AF_UNIX); server.bind('inside.sock'); server.listen()\n\
                  \x20   client = socket.socket(socket.AF_UNIX); client.connect('inside.sock')\n\
                  \x20   print('inside works')\n\
                  else:\n\
                  \x20   client = socket.socket(socket.AF_UNIX); client.connect(sys.argv[1])\n\
                  \x20   print('allowed works')\n";
    let said = lab
        .bash(&format!(
            "/usr/bin/python3 -c {script} pair; /usr/bin/python3 -c {script} {}",
            agent.display(),
            script = quoted(script)
        ))
        .await;
    assert!(
        said.contains("inside works") && said.contains("allowed works"),
        "{said}"
    );
    assert!(listener.accept().is_ok(), "no connection arrived");
    lab.stop().await;
}

#[tokio::test]
async fn commands_see_only_their_own_processes() {
    for user in users() {
        let lab = Lab::start(user).await;
        let pid = lab.gimlet.pid;
        let said = lab
            .bash(&format!(
                "ls /proc | grep -c '^[0-9]'; test -e /proc/{pid}/environ && echo server-visible; \
                 ps -e -o pid= | wc -l"
            ))
            .await;
        let counts: Vec<usize> = said
            .lines()
            .take(2)
            .filter_map(|l| l.trim().parse().ok())
            .collect();
        assert!(
            !said.contains("server-visible") && counts.len() == 2 && counts.iter().all(|c| *c < 10),
            "{user:?}: {said}"
        );
        lab.stop().await;
    }
}

#[tokio::test]
async fn commands_inherit_no_handle_of_the_server() {
    // A descriptor the server inherits, not close-on-exec, as from a host that leaks them.
    let leaked = rustix::io::dup(std::fs::File::open("/dev/null").unwrap()).unwrap();
    for user in users() {
        let lab = Lab::start(user).await;
        // Edits leave the server holding files in the root: spare temporaries, the replaced
        // files watched for late appends, the folders they are in.
        lab.setup("printf 'one\\n' > edited.txt");
        let read = lab.gimlet.call("read", json!({"path": "edited.txt"})).await;
        assert_ne!(read.is_error, Some(true), "{user:?}: {}", text(&read));
        for (from, to) in [("one", "two"), ("two", "three")] {
            let edit = lab
                .gimlet
                .call(
                    "edit",
                    json!({"path": "edited.txt", "old_string": from, "new_string": to}),
                )
                .await;
            assert_ne!(edit.is_error, Some(true), "{user:?}: {}", text(&edit));
        }
        // Every descriptor the command's shell has (listed by `ls`, which it waits for): only
        // its standard streams.
        let said = lab.bash("ls -l /proc/$$/fd; true").await;
        let held: Vec<&str> = said
            .lines()
            .filter(|l| l.contains(" -> "))
            .filter_map(|l| l.split(" -> ").next()?.split_whitespace().last())
            .filter(|fd| fd.parse::<u32>().is_ok())
            .collect();
        assert!(
            held == ["0", "1", "2"],
            "{user:?}: the command holds the server's handles: {said}"
        );
        lab.stop().await;
    }
    drop(leaked);
}

// ---------------------------------------------------------------------------------------
// 4. Trusted mode keeps the roots.
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn trusted_mode_does_not_rerun_a_blocked_command_outside_the_sandbox() {
    for user in users() {
        let lab = Lab::start_with(
            user,
            Setup {
                args: &["--mode", "trusted"],
                ..Setup::default()
            },
        )
        .await;
        let target = lab.outside("t.txt");
        let result = lab
            .gimlet
            .call(
                "bash",
                json!({"command": format!("echo run >> runs.txt; echo x > {}", target.display())}),
            )
            .await;
        let said = text(&result);
        assert!(
            !target.exists(),
            "{user:?}: trusted mode wrote outside the roots:\n{said}"
        );
        assert_eq!(
            std::fs::read_to_string(lab.root().join("runs.txt")).unwrap(),
            "run\n",
            "{user:?}: the command ran more than once:\n{said}"
        );
        assert!(said.contains("blocked by the sandbox"), "{user:?}: {said}");
        lab.stop().await;
    }
}

// ---------------------------------------------------------------------------------------
// 5. Smaller leaks.
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn the_session_temp_dir_is_private_and_the_umask_unchanged() {
    for user in users() {
        let lab = Lab::start(user).await;
        let umask = String::from_utf8(
            lab.as_user("/bin/sh")
                .args(["-c", "umask"])
                .output()
                .unwrap()
                .stdout,
        )
        .unwrap();
        let said = lab
            .bash("stat -c %a \"$TMPDIR\"; umask; touch \"$TMPDIR/f\"; stat -c %a \"$TMPDIR/f\"")
            .await;
        let lines: Vec<&str> = said.lines().take(3).collect();
        let file_mode = format!(
            "{:o}",
            0o666 & !u32::from_str_radix(umask.trim(), 8).unwrap()
        );
        assert_eq!(
            lines,
            ["700", umask.trim(), file_mode.as_str()],
            "{user:?}: {said}"
        );
        lab.stop().await;
    }
}

/// The session temp directories under `tmp`.
fn session_dirs(tmp: &Path) -> Vec<String> {
    std::fs::read_dir(tmp)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("gimlet-tmp-"))
        .collect()
}

#[tokio::test]
async fn temp_dirs_of_killed_sessions_are_swept_at_start() {
    for user in users() {
        let tmp = tempfile::tempdir().unwrap();
        own(user, tmp.path());
        let setup = || Setup {
            tmp: Some(tmp.path()),
            ..Setup::default()
        };
        let killed = Lab::start_with(user, setup()).await;
        killed.bash("touch \"$TMPDIR/left\"").await;
        let left = session_dirs(tmp.path());
        assert_eq!(left.len(), 1, "{left:?}");
        rustix::process::kill_process(
            rustix::process::Pid::from_raw(i32::try_from(killed.gimlet.pid).unwrap()).unwrap(),
            rustix::process::Signal::KILL,
        )
        .unwrap();
        // A live session's directory stays.
        let alive = Lab::start_with(user, setup()).await;
        alive.bash("true").await;
        let live: Vec<String> = session_dirs(tmp.path())
            .into_iter()
            .filter(|d| !left.contains(d))
            .collect();
        assert_eq!(live.len(), 1, "{live:?}");
        let next = Lab::start_with(user, setup()).await;
        next.bash("true").await;
        let now = session_dirs(tmp.path());
        assert!(
            !now.contains(&left[0]),
            "{user:?}: the killed session's temp dir stayed: {now:?}"
        );
        assert!(
            now.contains(&live[0]),
            "{user:?}: a live session's temp dir was swept: {now:?}"
        );
        alive.stop().await;
        next.stop().await;
    }
}

#[tokio::test]
async fn the_audit_log_is_private_and_credentials_are_redacted() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    let gimlet = Gimlet::start_with(
        TestClient::default(),
        &["--audit-log", log.to_str().unwrap()],
    )
    .await;
    let secrets = [
        "pa55word",
        "s3cretpw",
        "h1ddenpw",
        "V3rySecretAwsKey",
        "k3yk3yk3y",
        "eyJzdWIiOiIxMjM0NTY3ODkwIn0",
        "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ",
    ];
    let command = ": curl -u alice:s3cretpw https://bob:pa55word@example.com/x -H 'X-Api-Key: k3yk3yk3y'; \
         : mysql -uroot -ph1ddenpw; : aws configure set aws_secret_access_key V3rySecretAwsKey; \
         : eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U; \
         : '-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n-----END OPENSSH PRIVATE KEY-----'";
    gimlet.call("bash", json!({"command": command})).await;
    gimlet.stop().await;
    let mode = std::fs::metadata(&log).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the audit log is {mode:o}");
    let written = std::fs::read_to_string(&log).unwrap();
    for secret in secrets {
        assert!(!written.contains(secret), "{secret} leaked: {written}");
    }
}

#[tokio::test]
async fn approval_questions_show_control_characters_escaped() {
    let handler = TestClient::answering(|_| ElicitResult::new(ElicitationAction::Decline));
    let gimlet = Gimlet::start_with(handler, &["--mode", "strict"]).await;
    let command = "echo ok \u{1b}[2K\u{1b}[1A\u{1b}[32mharmless\u{1b}[0m; rm -rf important \u{202e}txt.exe\rcover";
    gimlet.call("bash", json!({"command": command})).await;
    let asked = gimlet.handler.elicitations.lock().unwrap().clone();
    assert!(!asked.is_empty(), "strict mode did not ask");
    for request in asked {
        let ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } = request
        else {
            panic!("a form was expected");
        };
        let shown = format!(
            "{message}{}",
            serde_json::to_string(&requested_schema).unwrap()
        );
        for raw in ['\u{1b}', '\u{202e}', '\r'] {
            assert!(
                !message.contains(raw) && !shown.contains(raw),
                "{raw:?} is shown raw: {message:?}"
            );
        }
        for visible in [r"\x1b[2K", r"\u{202e}", r"\r", "rm -rf important"] {
            assert!(message.contains(visible), "{visible} missing: {message}");
        }
    }
    gimlet.stop().await;
}

// ---------------------------------------------------------------------------------------
// 6. Bounds.
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn stdin_closing_ends_the_server_and_its_commands_quickly() {
    use tokio::io::AsyncBufReadExt;
    let root = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let mut child = crate::common::raw_command(data.path(), root.path())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mark = marker();
    let _leftovers = Leftovers(mark.clone());
    crate::common::write_lines(
        &mut stdin,
        &[
            crate::common::initialize_request("eof"),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "bash", "arguments": {"command": format!("sleep {mark}")}}}),
        ],
    )
    .await;
    stdout.next_line().await.unwrap();
    assert!(eventually(Duration::from_secs(5), || !processes_with(&mark).is_empty()).await);
    drop(stdin);
    let started = std::time::Instant::now();
    let exited = tokio::time::timeout(Duration::from_secs(10), child.wait()).await;
    let took = started.elapsed();
    assert!(exited.is_ok(), "the server did not exit after stdin closed");
    // rmcp alone waits 5 s for running handlers; gimlet cancels them (about 4 ms here). The
    // bound leaves room for a loaded machine.
    assert!(
        took < Duration::from_secs(4),
        "the server took {took:?} to exit after stdin closed"
    );
    assert!(
        eventually(Duration::from_secs(2), || processes_with(&mark).is_empty()).await,
        "the command outlived the server"
    );
}

// ---------------------------------------------------------------------------------------
// 7. The session's own /tmp.
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn scratch_files_in_tmp_work_without_asking_and_stay_out_of_the_machines_tmp() {
    // See: issue 38, item 6. The lab's client cannot be asked: a question would refuse it.
    for user in users() {
        let lab = Lab::start(user).await;
        let mark = marker();
        let said = lab
            .bash(&format!(
                "echo 'print(42)' > /tmp/scratch-{mark}.py && /usr/bin/python3 /tmp/scratch-{mark}.py \
                 && echo \"TMPDIR=$TMPDIR\" && pwd && touch in-root"
            ))
            .await;
        let root = lab.root();
        assert!(
            said.starts_with(&format!("42\nTMPDIR=/tmp\n{}\n", root.display()))
                && said.contains("exit code 0"),
            "{user:?}: {said}"
        );
        assert!(root.join("in-root").exists(), "{user:?}: {said}");
        let machines = PathBuf::from(format!("/tmp/scratch-{mark}.py"));
        assert!(
            !machines.exists(),
            "{user:?}: it reached the machine's /tmp"
        );
        let sessions = lab.session_dirs();
        assert_eq!(sessions.len(), 1, "{user:?}: {sessions:?}");
        assert_eq!(
            std::fs::read_to_string(sessions[0].join(format!("scratch-{mark}.py"))).unwrap(),
            "print(42)\n",
            "{user:?}: the file lives in the session's temp directory"
        );
        lab.stop().await;
        assert!(
            eventually(Duration::from_secs(5), || !sessions[0].exists()).await,
            "{user:?}: the session's temp directory outlived the session"
        );
    }
}

#[tokio::test]
async fn sessions_do_not_see_each_others_tmp() {
    for user in users() {
        // Two servers with the same TMPDIR, as two sessions on one machine.
        let tmp = tempfile::tempdir().unwrap();
        own(user, tmp.path());
        let setup = || Setup {
            tmp: Some(tmp.path()),
            ..Setup::default()
        };
        let first = Lab::start_with(user, setup()).await;
        let second = Lab::start_with(user, setup()).await;
        let mark = marker();
        first
            .bash(&format!("echo secret > /tmp/first-{mark}"))
            .await;
        let theirs = first.session_dirs();
        let said = second
            .bash(&format!(
                "ls -A /tmp; cat /tmp/first-{mark}; cat {dir}/gimlet-tmp-*/first-{mark}; \
                 echo mine > /tmp/first-{mark}; echo x > {dir}/planted-{mark}",
                dir = tmp.path().display()
            ))
            .await;
        assert!(!said.contains("secret"), "{user:?}: {said}");
        assert!(
            !tmp.path().join(format!("planted-{mark}")).exists(),
            "{user:?}: {said}"
        );
        // Each keeps its own file of the same name.
        let again = first.bash(&format!("cat /tmp/first-{mark}")).await;
        assert!(again.starts_with("secret\n"), "{user:?}: {again}");
        assert_eq!(theirs.len(), 1);
        assert_eq!(
            std::fs::read_to_string(theirs[0].join(format!("first-{mark}"))).unwrap(),
            "secret\n"
        );
        first.stop().await;
        second.stop().await;
    }
}

#[tokio::test]
async fn background_jobs_and_later_commands_share_the_sessions_tmp() {
    for user in users() {
        let lab = Lab::start(user).await;
        let mark = marker();
        lab.bash(&format!("echo first > /tmp/{mark}-1")).await;
        let started = lab
            .gimlet
            .call(
                "bash",
                json!({
                    "command": format!("cat /tmp/{mark}-1; echo from-job > /tmp/{mark}-2"),
                    "run_in_background": true,
                }),
            )
            .await;
        let job = started.structured_content.clone().unwrap()["job_id"]
            .as_str()
            .unwrap()
            .to_owned();
        let mut output = String::new();
        for _ in 0..100 {
            let read = lab.gimlet.call("bash_output", json!({"job_id": job})).await;
            output.push_str(&text(&read));
            if output.contains("exited with code") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(
            output.contains("first\n") && output.contains("exited with code 0"),
            "{user:?}: {output}"
        );
        let said = lab.bash(&format!("cat /tmp/{mark}-2")).await;
        assert!(said.starts_with("from-job\n"), "{user:?}: {said}");
        lab.stop().await;
    }
}

#[tokio::test]
async fn links_planted_in_tmp_reach_nothing_outside_and_go_with_the_session() {
    for user in users() {
        let lab = Lab::start(user).await;
        lab.repo(".");
        lab.setup(&format!(
            "echo keep > {target} && mkdir {dir} && echo keep > {dir}/inside",
            target = lab.outside("target").display(),
            dir = lab.outside("dir").display()
        ));
        let config = std::fs::read_to_string(lab.root().join(".git/config")).unwrap();
        let said = lab
            .bash(&format!(
                "ln -s {target} /tmp/file-link; echo evil > /tmp/file-link; \
                 ln -s {dir} /tmp/dir-link; echo evil > /tmp/dir-link/inside; \
                 rm -rf /tmp/dir-link/; ln -s {root}/.git/config /tmp/config-link; \
                 echo '[core] fsmonitor = evil' >> /tmp/config-link; \
                 ln -s {root}/.git/hooks /tmp/hooks; echo evil > /tmp/hooks/pre-commit; \
                 chmod +x /tmp/hooks/pre-commit; ls -l /tmp",
                target = lab.outside("target").display(),
                dir = lab.outside("dir").display(),
                root = lab.root().display(),
            ))
            .await;
        let check = |when: &str| {
            for file in ["target", "dir/inside"] {
                assert_eq!(
                    std::fs::read_to_string(lab.outside(file)).ok().as_deref(),
                    Some("keep\n"),
                    "{user:?}: {file} changed through a link in /tmp ({when}):\n{said}"
                );
            }
            assert_eq!(
                std::fs::read_to_string(lab.root().join(".git/config")).unwrap(),
                config,
                "{user:?}: {said}"
            );
            assert!(
                !lab.root().join(".git/hooks/pre-commit").exists(),
                "{user:?}: {said}"
            );
        };
        check("after the command");
        let sessions = lab.session_dirs();
        let outside = lab.outside.path().to_owned();
        lab.gimlet.stop().await;
        assert!(
            eventually(Duration::from_secs(5), || !sessions[0].exists()).await,
            "{user:?}: the session's temp directory stayed"
        );
        // Removing the session's directory followed none of the links.
        for file in ["target", "dir/inside"] {
            assert!(
                outside.join(file).exists(),
                "{user:?}: {file} went with the session"
            );
        }
    }
}

#[tokio::test]
async fn commands_cannot_reach_the_machines_tmp() {
    for user in users() {
        // The server works in a folder of the machine's /tmp, which its helpers would inherit.
        let cwd = tempfile::tempdir().unwrap();
        own(user, cwd.path());
        let mark = marker();
        std::fs::write(cwd.path().join(format!("host-{mark}")), "machine\n").unwrap();
        own(user, cwd.path());
        let lab = Lab::start_with(
            user,
            Setup {
                cwd: Some(cwd.path()),
                ..Setup::default()
            },
        )
        .await;
        let host = cwd.path().join(format!("host-{mark}"));
        let said = lab
            .bash(&format!(
                "cat {host}; for p in /proc/[0-9]*; do cat $p/cwd/host-{mark} $p/root{host}; \
                 echo x > $p/cwd/written-{mark}; done 2>/dev/null; \
                 ls -A /proc/1/cwd/ | grep -c host-; true",
                host = host.display()
            ))
            .await;
        assert!(!said.contains("machine"), "{user:?}: {said}");
        assert!(
            !cwd.path().join(format!("written-{mark}")).exists(),
            "{user:?}: {said}"
        );
        lab.stop().await;
    }
}

#[tokio::test]
async fn a_command_run_again_outside_the_sandbox_is_told_which_tmp_it_sees() {
    if users().is_empty() {
        return;
    }
    let client = TestClient::accepting(json!({"decision": "allow_once"}));
    let lab = Lab::start_with(
        User::Invoker,
        Setup {
            client,
            ..Setup::default()
        },
    )
    .await;
    let mark = marker();
    lab.bash(&format!("echo scratch > /tmp/{mark}")).await;
    let result = lab
        .gimlet
        .call(
            "bash",
            json!({"command": format!(
                "cat /tmp/{mark}; echo x > {}",
                lab.outside("written").display()
            )}),
        )
        .await;
    let said = text(&result);
    assert!(
        said.contains("ran again outside the sandbox") && said.contains("the machine's /tmp"),
        "{said}"
    );
    assert!(!said.starts_with("scratch"), "{said}");
    lab.stop().await;
}

// ---------------------------------------------------------------------------------------
// What still works.
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn everyday_git_work_runs_in_the_sandbox() {
    for user in users() {
        let lab = Lab::start(user).await;
        lab.repo(".");
        let said = lab
            .bash(
                "set -e; export GIT_AUTHOR_NAME=T GIT_AUTHOR_EMAIL=t@example.com \
                 GIT_COMMITTER_NAME=T GIT_COMMITTER_EMAIL=t@example.com; \
                 echo two >> tracked.txt; git add tracked.txt; git commit -qm two; \
                 git checkout -qb feature; echo three >> tracked.txt; git stash -q; \
                 git stash pop -q; git commit -qam three; git log --oneline | wc -l; \
                 git branch --show-current",
            )
            .await;
        assert!(said.starts_with("3\nfeature\n"), "{user:?}: {said}");
        lab.stop().await;
    }
}
