//! Attempts that must not wait: file work tried on the async runtime's own thread.
//!
//! Most small calls touch files the kernel has cached: the lookup finds every name in its
//! cache, and the bytes are in the page cache. Such work never sleeps, and handing it to a
//! thread of the blocking pool costs more than the work (two wake-ups and two context
//! switches; about a third of a small `read`'s CPU). [`attempt`] runs file work in place
//! with every open and read told not to wait: `openat2` with `RESOLVE_CACHED` (fails unless
//! the whole lookup is answered from the cache) and `preadv2` with `RWF_NOWAIT` (fails unless
//! the bytes are in the page cache). Whatever would wait fails instead, and the caller
//! ([`crate::ToolContext::nonblocking_first`]) runs the work again on the blocking pool,
//! where it may wait. Network and FUSE file systems, whose lookups revalidate, always take
//! that second path.
//!
//! The flag is per thread and set only for the span of one synchronous closure, so it never
//! leaks into another task.

use std::cell::Cell;
use std::fs::File;
use std::io;

thread_local! {
    static ACTIVE: Cell<bool> = const { Cell::new(false) };
}

/// Whether file work on this thread must not wait (inside [`attempt`]).
pub fn active() -> bool {
    ACTIVE.with(Cell::get)
}

/// Runs `work` with waiting forbidden: opens through [`crate::fs::ResolvedPath`] and path
/// resolution fail rather than wait, and so does [`read_at`].
pub fn attempt<T>(work: impl FnOnce() -> T) -> T {
    /// Clears the flag however `work` ends (a panic included).
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            ACTIVE.with(|flag| flag.set(self.0));
        }
    }
    let _reset = Reset(ACTIVE.with(|flag| flag.replace(true)));
    work()
}

/// The error of a step that would have waited.
pub fn would_block() -> io::Error {
    io::Error::new(
        io::ErrorKind::WouldBlock,
        "the file is not in the kernel's cache; retried where waiting is allowed",
    )
}

/// Reads at `offset` into `buf`. Inside [`attempt`], only bytes already in the page cache
/// are read (`RWF_NOWAIT`); a read that would wait fails with [`would_block`]'s kind.
pub fn read_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    #[cfg(target_os = "linux")]
    if active() {
        use rustix::io::{Errno, ReadWriteFlags, preadv2};
        return match preadv2(
            file,
            &mut [io::IoSliceMut::new(buf)],
            offset,
            ReadWriteFlags::NOWAIT,
        ) {
            Ok(n) => Ok(n),
            // Not cached, or a file system that cannot say (`EOPNOTSUPP`).
            Err(Errno::AGAIN | Errno::OPNOTSUPP) => Err(would_block()),
            Err(err) => Err(err.into()),
        };
    }
    #[cfg(not(target_os = "linux"))]
    if active() {
        return Err(would_block());
    }
    #[cfg(unix)]
    return std::os::unix::fs::FileExt::read_at(file, buf, offset);
    #[cfg(windows)]
    return std::os::windows::fs::FileExt::seek_read(file, buf, offset);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_holds_only_inside_an_attempt() {
        assert!(!active());
        assert!(attempt(active));
        assert!(!active());
        let nested = attempt(|| attempt(active) && active());
        assert!(nested);
        assert!(!active());
    }

    #[test]
    fn the_flag_is_cleared_when_the_work_panics() {
        let caught = std::panic::catch_unwind(|| attempt(|| panic!("boom")));
        assert!(caught.is_err());
        assert!(!active());
    }

    #[test]
    fn cached_bytes_are_read_without_waiting() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.txt");
        std::fs::write(&path, b"hello").unwrap();
        let file = File::open(&path).unwrap();
        let mut buf = [0; 16];
        // Just written: in the page cache.
        let n = attempt(|| read_at(&file, &mut buf, 1)).unwrap();
        assert_eq!(&buf[..n], b"ello");
        let n = read_at(&file, &mut buf, 0).unwrap();
        assert_eq!(&buf[..n], b"hello");
    }
}
