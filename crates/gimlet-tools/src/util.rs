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

/// `N` bytes from the system's randomness, or the error: never zeros. On Linux `getrandom(2)`
/// itself, with no fallback to `/dev/urandom` (a system that refuses the call is one to refuse
/// to make keys on); elsewhere through the `getrandom` crate (`getentropy` on macOS,
/// `ProcessPrng` on Windows).
pub fn random_bytes<const N: usize>() -> io::Result<[u8; N]> {
    let mut bytes = [0u8; N];
    #[cfg(target_os = "linux")]
    {
        let mut filled = 0;
        while filled < N {
            match rustix::rand::getrandom(
                &mut bytes[filled..],
                rustix::rand::GetRandomFlags::empty(),
            ) {
                Ok(0) => return Err(io::Error::other("getrandom returned no bytes")),
                Ok(n) => filled += n,
                Err(rustix::io::Errno::INTR) => {}
                Err(err) => return Err(err.into()),
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
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

/// The path of a `file://` URI, percent-decoded (`file:///a%20b` is `/a b`; on Windows
/// `file:///C:/a` is `C:\a`). `None` for another scheme, a host other than `localhost`, a
/// malformed escape, or an escaped NUL. A query or fragment ends the path. Client roots and
/// language servers' locations both come through here.
pub fn file_uri_path(uri: &str) -> Option<std::path::PathBuf> {
    let rest = uri.strip_prefix("file://")?;
    let rest = rest.strip_prefix("localhost").unwrap_or(rest);
    if !rest.starts_with('/') {
        return None;
    }
    let bytes = rest.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'?' | b'#' => break,
            byte => {
                out.push(byte);
                i += 1;
            }
        }
    }
    if out.contains(&0) {
        return None;
    }
    #[cfg(unix)]
    return Some(std::path::PathBuf::from(
        <std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(out),
    ));
    #[cfg(windows)]
    {
        let text = String::from_utf8(out).ok()?;
        let text = match text.as_bytes() {
            [b'/', drive, b':', ..] if drive.is_ascii_alphabetic() => &text[1..],
            _ => text.as_str(),
        };
        Some(std::path::PathBuf::from(text.replace('/', "\\")))
    }
}

/// A path made absolute with every symlink resolved, as [`std::fs::canonicalize`] does; on
/// Windows without the `\\?\` prefix where the path means the same without it (`C:\x`,
/// `\\server\share\x`), so that it reads as users write paths.
pub fn canonical(path: &std::path::Path) -> io::Result<std::path::PathBuf> {
    let real = std::fs::canonicalize(path)?;
    #[cfg(windows)]
    return Ok(simplified(real));
    #[cfg(not(windows))]
    Ok(real)
}

/// A path without the `\\?\` prefix where it means the same without it: `\\?\C:\x` is
/// `C:\x`, `\\?\UNC\server\share\x` is `\\server\share\x`. Paths that need the prefix (past
/// the old length limit, or with names Windows would otherwise read as devices or trim) keep
/// it.
#[cfg(windows)]
pub(crate) fn simplified(path: std::path::PathBuf) -> std::path::PathBuf {
    let mut components = path.components();
    let Some(std::path::Component::Prefix(prefix)) = components.next() else {
        return path;
    };
    let rest: std::path::PathBuf = components.collect();
    let plain = match prefix.kind() {
        std::path::Prefix::VerbatimDisk(drive) => {
            std::path::PathBuf::from(format!("{}:\\", char::from(drive))).join(&rest)
        }
        std::path::Prefix::VerbatimUNC(server, share) => {
            let mut unc = std::ffi::OsString::from(r"\\");
            unc.push(server);
            unc.push(r"\");
            unc.push(share);
            unc.push(r"\");
            std::path::PathBuf::from(unc).join(&rest)
        }
        _ => return path,
    };
    let awkward = rest.components().any(|c| match c {
        std::path::Component::Normal(name) => {
            let name = name.to_string_lossy();
            name.ends_with('.') || name.ends_with(' ') || is_device_name(&name)
        }
        _ => false,
    });
    if awkward || plain.as_os_str().len() >= 260 {
        return path;
    }
    plain
}

/// Whether a name is one Windows reads as a device (`NUL`, `con.txt`, `COM1` ...).
#[cfg(windows)]
fn is_device_name(name: &str) -> bool {
    let stem = name.split('.').next().unwrap_or_default().trim_end();
    let upper = stem.to_ascii_uppercase();
    matches!(
        upper.as_str(),
        "CON" | "PRN" | "AUX" | "NUL" | "CONIN$" | "CONOUT$"
    ) || ((upper.starts_with("COM") || upper.starts_with("LPT"))
        && upper.len() == 4
        && upper.as_bytes()[3].is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(unix)]
    fn file_uris_become_paths() {
        use std::path::Path;
        assert_eq!(
            file_uri_path("file:///home/a%20b/c").as_deref(),
            Some(Path::new("/home/a b/c"))
        );
        assert_eq!(
            file_uri_path("file:///x/%c3%bc.py").as_deref(),
            Some(Path::new("/x/ü.py"))
        );
        assert_eq!(
            file_uri_path("file://localhost/srv").as_deref(),
            Some(Path::new("/srv"))
        );
        assert_eq!(
            file_uri_path("file:///x?y").as_deref(),
            Some(Path::new("/x"))
        );
        for bad in [
            "https://example.com/x",
            "untitled:Untitled-1",
            "file://server/share",
            "file:///a%00b",
            "file:///a%zz",
            "file:///a%2",
        ] {
            assert_eq!(file_uri_path(bad), None, "{bad}");
        }
    }

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
