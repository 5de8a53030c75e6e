//! A session's sandboxes: helpers that are confined once and then run one command after
//! another, so that a command costs a `fork` and `exec` of the shell, not a new helper with
//! its namespaces, mounts, Landlock rules and filters.
//!
//! A [`Sandbox`] is the helper (`gimlet __exec --serve PLAN`), which enters the namespaces
//! and builds the file-system view, and its init (PID 1 of the new PID namespace, `init.rs`),
//! which confines itself and then serves requests on a Unix socket ([`super::protocol`]).
//! Everything the guarantees rest on is set up before the first command and is inherited by
//! each one; between commands the namespace is empty (the init clears it after each).
//!
//! A sandbox serves one command at a time. [`Sandboxes`] keeps the idle ones of a session
//! for the next command with the same [`SandboxPlan`]: when the plan changes (a protected
//! path appeared or was replaced, a socket started listening, the roots changed) a new one is
//! made and the old ones go. A sandbox goes when its socket closes: with the session, when it
//! is dropped, or when the server dies.

use std::os::fd::{AsFd, BorrowedFd};
use std::path::Path;
use std::process::Stdio;
use std::sync::Mutex;

use rustix::net::{AddressFamily, SocketFlags, SocketType};
use tokio::io::{AsyncReadExt, Interest};
use tokio::net::UnixStream;
use tokio::process::{Child, ChildStderr};

use super::protocol::{self, Message, Reply, Request};
use super::{HELPER_ARG, SandboxPlan};

use crate::util::MutexExt as _;

/// How many idle sandboxes a session keeps.
const MAX_IDLE: usize = 2;

/// The idle sandboxes of a session.
#[derive(Debug, Default)]
pub(crate) struct Sandboxes {
    idle: Mutex<Vec<Sandbox>>,
}

impl Sandboxes {
    /// An idle sandbox made for `plan`, if there is one. Idle ones made for another plan are
    /// stale: they go.
    pub(crate) fn take(&self, plan: &SandboxPlan) -> Option<Sandbox> {
        let mut idle = self.idle.locked();
        idle.retain(|s| *s.plan == *plan);
        idle.pop()
    }

    /// Keeps a sandbox whose command has finished for the next one.
    pub(crate) fn put(&self, sandbox: Sandbox) {
        let mut idle = self.idle.locked();
        idle.retain(|s| s.plan == sandbox.plan);
        if idle.len() < MAX_IDLE {
            idle.push(sandbox);
        }
    }
}

/// A helper confined for one plan, ready to run commands.
#[derive(Debug)]
pub(crate) struct Sandbox {
    /// Boxed: a running command holds its sandbox, and the plan is most of it.
    plan: Box<SandboxPlan>,
    /// The helper; its init is its only child.
    helper: Child,
    socket: UnixStream,
    /// Bytes read from the socket and not yet a whole reply.
    buffered: Vec<u8>,
    stderr: Option<ChildStderr>,
}

impl Sandbox {
    /// Starts a helper for `plan`. It sets itself up while the first request is on its way.
    pub(crate) fn start(helper: &Path, plan: &SandboxPlan) -> std::io::Result<Self> {
        let (ours, theirs) = rustix::net::socketpair(
            AddressFamily::UNIX,
            SocketType::STREAM,
            SocketFlags::CLOEXEC,
            None,
        )?;
        let plan_json = serde_json::to_string(&super::HelperPlan {
            shell: std::path::PathBuf::new(),
            command: String::new(),
            workdir: std::path::PathBuf::new(),
            sandbox: Some(plan.clone()),
            stdio: false,
        })
        .map_err(std::io::Error::other)?;
        let mut command = tokio::process::Command::new(helper);
        command
            .arg(HELPER_ARG)
            .arg("--serve")
            .arg(plan_json)
            .env_clear()
            .stdin(Stdio::from(theirs))
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = command.spawn()?;
        drop(command);
        let stderr = child.stderr.take();
        let socket = std::os::unix::net::UnixStream::from(ours);
        socket.set_nonblocking(true)?;
        Ok(Self {
            plan: Box::new(plan.clone()),
            helper: child,
            socket: UnixStream::from_std(socket)?,
            buffered: Vec::new(),
            stderr,
        })
    }

    /// Sends a command to run, its output going to `output` (the write end of a pipe).
    pub(crate) async fn send(
        &mut self,
        request: Request,
        output: BorrowedFd<'_>,
    ) -> std::io::Result<()> {
        let body = serde_json::to_vec(&Message::Run(request)).map_err(std::io::Error::other)?;
        let bytes = protocol::frame(&body);
        let mut sent = 0;
        let mut fd = Some(output);
        while sent < bytes.len() {
            let socket = &self.socket;
            let chunk = &bytes[sent..];
            let with = fd;
            let n = socket
                .async_io(Interest::WRITABLE, || {
                    protocol::send_some(socket.as_fd(), chunk, with)
                })
                .await?;
            fd = None;
            sent += n;
        }
        Ok(())
    }

    /// Asks the running command to stop (TERM to everything, a grace, KILL). Never waits: a
    /// frame this small always fits; if it did not, the caller drops the sandbox, which stops
    /// everything too.
    pub(crate) fn stop(&self) -> bool {
        let body = serde_json::to_vec(&Message::Stop).unwrap_or_default();
        let bytes = protocol::frame(&body);
        matches!(self.socket.try_write(&bytes), Ok(n) if n == bytes.len())
    }

    /// The reply: the command and everything it started are gone. Cancel-safe. An error when
    /// the sandbox ended instead (it could not be set up, or it died).
    pub(crate) async fn reply(&mut self) -> std::io::Result<Reply> {
        loop {
            if self.buffered.len() >= 4 {
                let mut header = [0u8; 4];
                header.copy_from_slice(&self.buffered[..4]);
                let len = usize::try_from(u32::from_le_bytes(header)).unwrap_or(usize::MAX);
                if len > protocol::MAX_FRAME {
                    return Err(std::io::Error::other("the sandbox sent a malformed reply"));
                }
                if self.buffered.len() >= 4 + len {
                    let reply = serde_json::from_slice(&self.buffered[4..4 + len])
                        .map_err(std::io::Error::other);
                    self.buffered.drain(..4 + len);
                    return reply;
                }
            }
            let mut chunk = [0u8; 256];
            let n = self.socket.read(&mut chunk).await?;
            if n == 0 {
                return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof));
            }
            self.buffered.extend_from_slice(&chunk[..n]);
        }
    }

    /// What the helper said before it ended (why the sandbox could not be set up). Closes
    /// the socket first: a helper still running then stops and exits.
    pub(crate) async fn last_words(mut self) -> String {
        let _ = rustix::net::shutdown(self.socket.as_fd(), rustix::net::Shutdown::Both);
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), self.helper.wait()).await;
        let mut bytes = Vec::new();
        if let Some(mut stderr) = self.stderr.take() {
            let _ = tokio::time::timeout(
                std::time::Duration::from_secs(1),
                stderr.read_to_end(&mut bytes),
            )
            .await;
        }
        String::from_utf8_lossy(&bytes[..bytes.len().min(64 * 1024)]).into_owned()
    }
}
