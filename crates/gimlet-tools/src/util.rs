//! Small helpers every room uses: locks that survive a panicking holder, and the system's
//! randomness, whose failure is an error rather than a string of zeros.

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

/// `N` bytes from the system's randomness (`getrandom(2)`), or the error: never zeros.
pub fn random_bytes<const N: usize>() -> io::Result<[u8; N]> {
    let mut bytes = [0u8; N];
    let mut filled = 0;
    while filled < N {
        match rustix::rand::getrandom(&mut bytes[filled..], rustix::rand::GetRandomFlags::empty()) {
            Ok(0) => return Err(io::Error::other("getrandom returned no bytes")),
            Ok(n) => filled += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(err) => return Err(err.into()),
        }
    }
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
