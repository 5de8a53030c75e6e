//! Small helpers every room uses: locks that survive a panicking holder, the system's
//! randomness, whose failure is an error rather than a string of zeros, and the common ends of
//! two byte strings.

use std::io;
use std::sync::{Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// [`Mutex::lock`] that takes the data even when a holder panicked: gimlet's locks guard
/// plain maps and counters that a panic cannot leave half-changed in a way that matters more
/// than stopping every later call.
pub trait MutexExt<T> {
    /// The guard, poisoned or not.
    fn locked(&self) -> MutexGuard<'_, T>;
}

impl<T> MutexExt<T> for Mutex<T> {
    fn locked(&self) -> MutexGuard<'_, T> {
        self.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// [`RwLock`] guards, poisoned or not (see [`MutexExt`]).
pub trait RwLockExt<T> {
    /// A read guard.
    fn read_locked(&self) -> RwLockReadGuard<'_, T>;
    /// A write guard.
    fn write_locked(&self) -> RwLockWriteGuard<'_, T>;
}

impl<T> RwLockExt<T> for RwLock<T> {
    fn read_locked(&self) -> RwLockReadGuard<'_, T> {
        self.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write_locked(&self) -> RwLockWriteGuard<'_, T> {
        self.write().unwrap_or_else(PoisonError::into_inner)
    }
}

/// `N` bytes from the system's randomness (`getrandom(2)` on Linux, `getentropy` on macOS,
/// `ProcessPrng` on Windows, through the `getrandom` crate), or the error: never zeros.
pub fn random_bytes<const N: usize>() -> io::Result<[u8; N]> {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes)
        .map_err(|err| io::Error::other(format!("no system randomness: {err}")))?;
    Ok(bytes)
}

/// 128 random bits as 32 lowercase hex digits.
pub fn random_hex() -> io::Result<String> {
    random_bytes::<16>().map(|bytes| hex(&bytes))
}

/// Bytes as lowercase hex digits.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    out
}

/// Bytes at the start of `a` and `b` that are the same, compared a block at a time.
pub fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    const BLOCK: usize = 64;
    let n = a.len().min(b.len());
    let mut at = 0;
    while at + BLOCK <= n && a[at..at + BLOCK] == b[at..at + BLOCK] {
        at += BLOCK;
    }
    while at < n && a[at] == b[at] {
        at += 1;
    }
    at
}

/// Bytes at the end of `a` and `b` that are the same.
pub fn common_suffix(a: &[u8], b: &[u8]) -> usize {
    const BLOCK: usize = 64;
    let n = a.len().min(b.len());
    let (a, b) = (&a[a.len() - n..], &b[b.len() - n..]);
    let mut shared = 0;
    while shared + BLOCK <= n
        && a[n - shared - BLOCK..n - shared] == b[n - shared - BLOCK..n - shared]
    {
        shared += BLOCK;
    }
    while shared < n && a[n - shared - 1] == b[n - shared - 1] {
        shared += 1;
    }
    shared
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poisoned_lock_still_gives_its_data() {
        let mutex = std::sync::Arc::new(Mutex::new(1));
        let rw = std::sync::Arc::new(RwLock::new(2));
        let (m, r) = (mutex.clone(), rw.clone());
        let _ = std::thread::spawn(move || {
            let _a = m.lock().unwrap();
            let _b = r.write().unwrap();
            panic!("poison both");
        })
        .join();
        assert!(mutex.is_poisoned() && rw.is_poisoned());
        *mutex.locked() += 1;
        *rw.write_locked() += 1;
        assert_eq!((*mutex.locked(), *rw.read_locked()), (2, 3));
    }

    #[test]
    fn common_ends() {
        let long = "abc".repeat(100);
        let (a, b) = (format!("{long}X{long}"), format!("{long}YZ{long}"));
        assert_eq!(common_prefix(a.as_bytes(), b.as_bytes()), 300);
        assert_eq!(common_suffix(a.as_bytes(), b.as_bytes()), 300);
        assert_eq!(common_prefix(b"same", b"same"), 4);
        assert_eq!(common_suffix(b"", b"x"), 0);
        assert_eq!(common_suffix(b"ab", b"b"), 1);
    }

    #[test]
    fn hex_and_randomness() {
        assert_eq!(hex(&[0x00, 0x0f, 0xa5, 0xff]), "000fa5ff");
        let (a, b) = (random_hex().unwrap(), random_hex().unwrap());
        assert_eq!(a.len(), 32);
        assert!(
            a.bytes()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        assert_ne!(a, b);
        assert_ne!(random_bytes::<32>().unwrap(), [0u8; 32]);
    }
}
