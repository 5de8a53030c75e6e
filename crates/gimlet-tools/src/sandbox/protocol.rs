//! What the server and a session's sandbox (its init, `init.rs`) say to each other over their
//! Unix stream socket: frames of a 4-byte little-endian length and a JSON body. A request
//! carries the write end of the command's output pipe with it (`SCM_RIGHTS`), so the command
//! writes straight to the server and nothing is copied on the way.
//!
//! - server -> init: [`Message::Run`] (with the output pipe), then, while it runs, possibly
//!   [`Message::Stop`]. Closing the socket means: stop everything and exit.
//! - init -> server: [`Reply`] when the command and everything it started are gone.

use std::ffi::OsString;
use std::io::{IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;

use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};
use serde::{Deserialize, Serialize};

/// The largest frame either side accepts (a command line with a long here-document fits).
pub(crate) const MAX_FRAME: usize = 64 * 1024 * 1024;

/// A message from the server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Message {
    /// Run a command; its stdout and stderr are the pipe sent with this message.
    Run(Request),
    /// Stop the running command and everything it started (TERM, a grace, KILL).
    Stop,
}

/// One command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Request {
    /// The shell.
    pub(crate) shell: PathBuf,
    /// The command line, given to `shell -c`.
    pub(crate) command: String,
    /// Where it runs.
    pub(crate) workdir: PathBuf,
    /// Its whole environment, as `NAME=value` bytes.
    pub(crate) env: Vec<Vec<u8>>,
}

impl Request {
    /// The environment as `(name, value)` pairs.
    pub(crate) fn env_pairs(&self) -> impl Iterator<Item = (OsString, OsString)> + '_ {
        self.env.iter().filter_map(|entry| {
            let at = entry.iter().position(|b| *b == b'=')?;
            Some((
                OsString::from_vec(entry[..at].to_vec()),
                OsString::from_vec(entry[at + 1..].to_vec()),
            ))
        })
    }

    /// `env` from `(name, value)` pairs.
    pub(crate) fn env_from(pairs: &[(OsString, OsString)]) -> Vec<Vec<u8>> {
        pairs
            .iter()
            .map(|(name, value)| {
                let mut entry = name.as_bytes().to_vec();
                entry.push(b'=');
                entry.extend_from_slice(value.as_bytes());
                entry
            })
            .collect()
    }
}

/// How a command ended: the shell's exit code, or 128 + the signal that ended it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Reply {
    /// The code.
    pub(crate) code: i32,
}

/// A frame's bytes: the length, then the body.
pub(crate) fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 4);
    out.extend_from_slice(&u32::try_from(body.len()).unwrap_or(u32::MAX).to_le_bytes());
    out.extend_from_slice(body);
    out
}

/// Sends a whole frame, blocking, with `fd` attached to its first bytes.
pub(crate) fn send_blocking(
    socket: BorrowedFd<'_>,
    body: &[u8],
    fd: Option<BorrowedFd<'_>>,
) -> std::io::Result<()> {
    let bytes = frame(body);
    let mut sent = 0;
    let mut fd = fd;
    while sent < bytes.len() {
        sent += send_some(socket, &bytes[sent..], fd.take())?;
    }
    Ok(())
}

/// One `sendmsg`: as much of `bytes` as the socket takes, with `fd` if given. `EINTR` is
/// retried; `EAGAIN` is the caller's to wait out.
pub(crate) fn send_some(
    socket: BorrowedFd<'_>,
    bytes: &[u8],
    fd: Option<BorrowedFd<'_>>,
) -> std::io::Result<usize> {
    let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let fds: Vec<BorrowedFd<'_>> = fd.into_iter().collect();
    loop {
        let mut control = SendAncillaryBuffer::new(&mut space);
        if !fds.is_empty() && !control.push(SendAncillaryMessage::ScmRights(&fds)) {
            return Err(std::io::Error::other("no room to pass a file descriptor"));
        }
        match rustix::net::sendmsg(
            socket,
            &[IoSlice::new(bytes)],
            &mut control,
            SendFlags::NOSIGNAL,
        ) {
            Err(rustix::io::Errno::INTR) => {}
            other => return other.map_err(Into::into),
        }
    }
}

/// What the buffered bytes hold.
enum Frame {
    /// A whole frame's body.
    Whole(Vec<u8>),
    /// The start of one: more bytes are needed.
    Partial,
    /// A frame longer than [`MAX_FRAME`]: the peer is not speaking this protocol.
    Malformed,
}

/// Reads frames from a blocking socket, with the descriptors that came with them.
#[derive(Debug, Default)]
pub(crate) struct FrameReader {
    buffered: Vec<u8>,
    fds: Vec<OwnedFd>,
}

impl FrameReader {
    /// The next whole frame and the descriptors received since the last one, or `None` at
    /// end-of-file (or when the peer sends something that is not a frame).
    pub(crate) fn next(&mut self, socket: BorrowedFd<'_>) -> Option<(Vec<u8>, Vec<OwnedFd>)> {
        loop {
            match self.take_frame() {
                Frame::Whole(body) => return Some((body, std::mem::take(&mut self.fds))),
                Frame::Malformed => return None,
                Frame::Partial => {}
            }
            if !self.read_some(socket)? {
                return None;
            }
        }
    }

    /// Whether a whole frame is already buffered.
    pub(crate) fn ready(&self) -> bool {
        self.buffered.len() >= 4
            && self.buffered.len()
                >= 4 + usize::try_from(u32::from_le_bytes(self.header())).unwrap_or(usize::MAX)
    }

    fn header(&self) -> [u8; 4] {
        let mut header = [0u8; 4];
        header.copy_from_slice(&self.buffered[..4]);
        header
    }

    fn take_frame(&mut self) -> Frame {
        if self.buffered.len() < 4 {
            return Frame::Partial;
        }
        let len = usize::try_from(u32::from_le_bytes(self.header())).unwrap_or(usize::MAX);
        if len > MAX_FRAME {
            return Frame::Malformed;
        }
        if self.buffered.len() < 4 + len {
            return Frame::Partial;
        }
        let body = self.buffered[4..4 + len].to_vec();
        self.buffered.drain(..4 + len);
        Frame::Whole(body)
    }

    /// One `recvmsg`; `Some(false)` at end-of-file, `None` on an error.
    pub(crate) fn read_some(&mut self, socket: BorrowedFd<'_>) -> Option<bool> {
        let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(4))];
        let mut chunk = vec![0u8; 64 * 1024];
        loop {
            let mut control = RecvAncillaryBuffer::new(&mut space);
            let received = rustix::net::recvmsg(
                socket.as_fd(),
                &mut [IoSliceMut::new(&mut chunk)],
                &mut control,
                RecvFlags::CMSG_CLOEXEC,
            );
            match received {
                Err(rustix::io::Errno::INTR) => {}
                Err(_) => return None,
                Ok(message) => {
                    for message in control.drain() {
                        if let RecvAncillaryMessage::ScmRights(fds) = message {
                            self.fds.extend(fds);
                        }
                    }
                    if message.bytes == 0 {
                        return Some(false);
                    }
                    self.buffered.extend_from_slice(&chunk[..message.bytes]);
                    return Some(true);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsFd;

    use rustix::net::{AddressFamily, SocketFlags, SocketType};

    use super::*;

    #[test]
    fn frames_carry_their_descriptor_across() {
        let (a, b) = rustix::net::socketpair(
            AddressFamily::UNIX,
            SocketType::STREAM,
            SocketFlags::CLOEXEC,
            None,
        )
        .unwrap();
        let (read, write) = rustix::pipe::pipe().unwrap();
        let request = Message::Run(Request {
            shell: PathBuf::from("/bin/sh"),
            command: "x".repeat(300_000),
            workdir: PathBuf::from("/"),
            env: Request::env_from(&[(OsString::from("A"), OsString::from("b=c"))]),
        });
        let body = serde_json::to_vec(&request).unwrap();
        let sender = std::thread::spawn(move || {
            send_blocking(a.as_fd(), &body, Some(write.as_fd())).unwrap();
            send_blocking(
                a.as_fd(),
                &serde_json::to_vec(&Message::Stop).unwrap(),
                None,
            )
            .unwrap();
        });
        let mut reader = FrameReader::default();
        let (body, fds) = reader.next(b.as_fd()).unwrap();
        let got: Message = serde_json::from_slice(&body).unwrap();
        assert_eq!(got, request);
        let Message::Run(run) = got else {
            unreachable!()
        };
        assert_eq!(
            run.env_pairs().collect::<Vec<_>>(),
            [(OsString::from("A"), OsString::from("b=c"))]
        );
        assert_eq!(fds.len(), 1);
        rustix::io::write(&fds[0], b"through").unwrap();
        let mut buf = [0u8; 16];
        assert_eq!(rustix::io::read(&read, &mut buf).unwrap(), 7);
        let (body, fds) = reader.next(b.as_fd()).unwrap();
        assert_eq!(
            serde_json::from_slice::<Message>(&body).unwrap(),
            Message::Stop
        );
        assert!(fds.is_empty());
        sender.join().unwrap();
        assert!(reader.next(b.as_fd()).is_none(), "end-of-file");
    }
}
