//! The command's namespaces and its view of the file system.
//!
//! In a private mount namespace (inside a new user namespace unless the helper runs as root):
//! - the roots and the temp directory are bound onto themselves, and then every other mount is
//!   made read-only. Landlock confines writes of content; a read-only mount also refuses what
//!   Landlock does not cover: `chmod`, `chown`, `utime`, extended attributes;
//! - the session's temp directory is mounted at `/tmp`, and the roots and allowed sockets that
//!   lie in the machine's `/tmp` again inside it, at their paths (see [`private_tmp`]);
//! - every git directory is bound onto itself (a mount point cannot be renamed, removed or
//!   replaced), and every existing protected path is a read-only bind mount of itself;
//! - Unix sockets that listen outside the roots (as `/proc/net/unix` lists them, read by the
//!   server for each command: a new one makes a new sandbox) have `/dev/null` mounted over
//!   them, so `connect` is refused. Landlock ABI 9 refuses all of them; below it this is what
//!   there is.
//!
//! Only mounts of this namespace change; the rest of the system sees nothing of it.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;
use rustix::mount::{MountFlags, MountPropagationFlags};
use rustix::thread::UnshareFlags;

use super::{SandboxPlan, TMP};

/// Enters the namespaces (a PID namespace too when `pid`: the helper's next child is its
/// init). Must run while the process has one thread.
pub(super) fn unshare(pid: bool) -> Result<(), String> {
    let uid = rustix::process::getuid();
    let gid = rustix::process::getgid();
    let mut flags = UnshareFlags::NEWNS;
    if !uid.is_root() {
        flags |= UnshareFlags::NEWUSER;
    }
    if pid {
        flags |= UnshareFlags::NEWPID;
    }
    #[expect(
        deprecated,
        reason = "NEWNS, NEWUSER and NEWPID are unshared, not FILES, which is what makes unshare unsafe"
    )]
    rustix::thread::unshare(flags).map_err(|e| format!("unshare: {e}"))?;
    if !uid.is_root() {
        let write = |path: &str, text: String| {
            std::fs::write(path, text).map_err(|e| format!("{path}: {e}"))
        };
        write("/proc/self/setgroups", String::from("deny"))?;
        write("/proc/self/uid_map", format!("{0} {0} 1", uid.as_raw()))?;
        write("/proc/self/gid_map", format!("{0} {0} 1", gid.as_raw()))?;
    }
    rustix::mount::mount_change(
        "/",
        MountPropagationFlags::PRIVATE | MountPropagationFlags::REC,
    )
    .map_err(|e| format!("private mounts: {e}"))
}

/// Builds the command's view of the file system (see the module docs). Call after
/// [`unshare`].
pub(super) fn prepare(plan: &SandboxPlan) -> Result<(), String> {
    let writable: Vec<&PathBuf> = plan.writable.iter().filter(|p| p.is_dir()).collect();
    for dir in &writable {
        rustix::mount::mount_bind_recursive(dir.as_path(), dir.as_path())
            .map_err(|e| format!("bind {}: {e}", dir.display()))?;
    }
    read_only_outside(&writable)?;
    // Before `/tmp` is covered: a socket below the machine's `/tmp` is hidden there too.
    for socket in &plan.hidden_sockets {
        // Gone since `/proc/net/unix` was read, or not reachable by this path: nothing to hide.
        let _ = rustix::mount::mount_bind("/dev/null", socket);
    }
    if let Some(tmp) = &plan.private_tmp {
        private_tmp(tmp, &plan.writable, &plan.unix_sockets)?;
    }
    protect(&plan.pinned, &plan.read_only)?;
    // The init and a command's helper would otherwise keep the server's working directory,
    // which may lie in the machine's `/tmp`, reachable as `/proc/1/cwd`.
    rustix::process::chdir("/").map_err(|e| format!("chdir /: {e}"))
}

/// Mounts the session's temp directory `session` (already a writable mount, bound onto itself)
/// at [`TMP`], and mounts again, at their own paths inside it, the roots and allowed sockets
/// that lie below the machine's `/tmp` (`keep`: each is opened before `/tmp` is covered, and
/// mounted from that handle). Their mount points are made in the session's directory, which
/// commands write: each name on the way is opened without following links, a file or link in
/// the way is removed, and the mount goes onto the handle of the point made, never onto a
/// path looked up again.
fn private_tmp(session: &Path, writable: &[PathBuf], sockets: &[PathBuf]) -> Result<(), String> {
    let tmp = Path::new(TMP);
    let mut below: Vec<&PathBuf> = writable
        .iter()
        .chain(sockets)
        .filter(|p| p.starts_with(tmp) && p.as_path() != tmp && p.as_path() != session)
        .collect();
    below.sort();
    let mut keep: Vec<(&Path, OwnedFd, bool)> = Vec::new();
    for path in below {
        // Inside one kept already: it comes along (the roots are bound recursively).
        if keep
            .iter()
            .any(|(kept, _, dir)| *dir && path.starts_with(kept))
        {
            continue;
        }
        let Ok(fd) = rustix::fs::open(path, OFlags::PATH | OFlags::CLOEXEC, Mode::empty()) else {
            // Gone since the plan was made: nothing to keep.
            continue;
        };
        let dir =
            rustix::fs::fstat(&fd).is_ok_and(|st| FileType::from_raw_mode(st.st_mode).is_dir());
        keep.push((path.as_path(), fd, dir));
    }
    rustix::mount::mount_bind(session, tmp)
        .map_err(|e| format!("mounting {} at {TMP}: {e}", session.display()))?;
    let top = rustix::fs::open(
        tmp,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| format!("{TMP}: {e}"))?;
    for (path, fd, dir) in keep {
        let relative = path.strip_prefix(tmp).unwrap_or(path);
        let point = match mount_point(&top, relative, dir) {
            Ok(point) => point,
            // A socket whose place a command has filled with a folder is not reachable.
            Err(_) if !dir => continue,
            Err(e) => {
                return Err(format!(
                    "a mount point for {} in {TMP}: {e}",
                    path.display()
                ));
            }
        };
        let source = format!("/proc/self/fd/{}", fd.as_raw_fd());
        let target = format!("/proc/self/fd/{}", point.as_raw_fd());
        let mounted = if dir {
            rustix::mount::mount_bind_recursive(source.as_str(), target.as_str())
        } else {
            rustix::mount::mount_bind(source.as_str(), target.as_str())
        };
        mounted.map_err(|e| format!("mounting {} again in {TMP}: {e}", path.display()))?;
    }
    Ok(())
}

/// Makes `relative` below the directory `top` (a directory when `dir`, else an empty file)
/// without following links, and opens it (`O_PATH`). Whatever is in the way and is not a
/// directory (a file, a link a command planted) is removed first; a directory in the way
/// stays, and is mounted over.
fn mount_point(top: &OwnedFd, relative: &Path, dir: bool) -> rustix::io::Result<OwnedFd> {
    let names: Vec<_> = relative.components().collect();
    let mut parent = rustix::io::fcntl_dupfd_cloexec(top, 0)?;
    for (i, name) in names.iter().enumerate() {
        let name = name.as_os_str();
        let last = i + 1 == names.len();
        let want_dir = dir || !last;
        let open = |parent: &OwnedFd| {
            let kind = if want_dir {
                OFlags::DIRECTORY
            } else {
                OFlags::empty()
            };
            rustix::fs::openat(
                parent,
                name,
                OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC | kind,
                Mode::empty(),
            )
        };
        let make = |parent: &OwnedFd| {
            if want_dir {
                rustix::fs::mkdirat(parent, name, Mode::from_raw_mode(0o700))
            } else {
                rustix::fs::openat(
                    parent,
                    name,
                    OFlags::CREATE
                        | OFlags::EXCL
                        | OFlags::WRONLY
                        | OFlags::NOFOLLOW
                        | OFlags::CLOEXEC,
                    Mode::from_raw_mode(0o600),
                )
                .map(drop)
            }
        };
        let opened = match open(&parent) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => {
                make(&parent)?;
                open(&parent)?
            }
            // A link, or a file where a directory goes (or the reverse): not ours to follow.
            Err(Errno::NOTDIR | Errno::LOOP) if want_dir => {
                rustix::fs::unlinkat(&parent, name, AtFlags::empty())?;
                make(&parent)?;
                open(&parent)?
            }
            Err(err) => return Err(err),
        };
        // A socket's point must be a file: a link there was opened as itself (`O_PATH` and
        // `O_NOFOLLOW`), and goes.
        let opened = if !want_dir
            && rustix::fs::fstat(&opened)
                .is_ok_and(|st| !FileType::from_raw_mode(st.st_mode).is_file())
        {
            rustix::fs::unlinkat(&parent, name, AtFlags::empty())?;
            make(&parent)?;
            open(&parent)?
        } else {
            opened
        };
        parent = opened;
    }
    Ok(parent)
}

/// The Unix sockets to hide from a sandbox: those listed in `/proc/net/unix` (bound in the
/// server's network namespace, which sandboxes share) outside `writable`, but `allowed`.
pub(crate) fn sockets_to_hide(writable: &[PathBuf], allowed: &[PathBuf]) -> Vec<PathBuf> {
    let mut sockets = listening_sockets();
    sockets.retain(|s| !writable.iter().any(|w| s.starts_with(w)) && !allowed.contains(s));
    sockets
}

/// Makes every mount read-only but those at or below a writable path.
fn read_only_outside(writable: &[&PathBuf]) -> Result<(), String> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("/proc/self/mountinfo: {e}"))?;
    for mount in mountinfo.lines().filter_map(Mount::parse) {
        if writable.iter().any(|w| mount.target.starts_with(w)) {
            continue;
        }
        let flags = mount.flags | MountFlags::BIND | MountFlags::RDONLY;
        // The root mount must be read-only; others may be hidden under later mounts or gone,
        // and then cannot be written through either.
        if let Err(err) = rustix::mount::mount_remount(&mount.target, flags, "")
            && mount.target == Path::new("/")
        {
            return Err(format!("read-only /: {err}"));
        }
    }
    Ok(())
}

/// Pins git directories and makes protected paths read-only. Parents are mounted before their
/// children, so that a later mount never hides an earlier one.
fn protect(pinned: &[PathBuf], read_only: &[PathBuf]) -> Result<(), String> {
    let mut mounts: Vec<(&PathBuf, bool)> = pinned
        .iter()
        .map(|p| (p, false))
        .chain(read_only.iter().map(|p| (p, true)))
        .collect();
    mounts.sort_by_key(|(path, read_only)| (path.components().count(), *read_only));
    for (path, read_only) in mounts {
        match std::fs::symlink_metadata(path) {
            // A link cannot be mounted over (mount follows it); the server puts it back.
            Ok(meta) if meta.file_type().is_symlink() => continue,
            Ok(_) => {}
            // Gone since the scan: the server's check after the command covers it.
            Err(_) => continue,
        }
        match rustix::mount::mount_bind(path, path) {
            Ok(()) => {}
            Err(Errno::NOENT) => continue,
            Err(err) => return Err(format!("bind {}: {err}", path.display())),
        }
        if read_only {
            rustix::mount::mount_remount(path, MountFlags::BIND | MountFlags::RDONLY, "")
                .map_err(|e| format!("read-only {}: {e}", path.display()))?;
        }
    }
    Ok(())
}

/// The paths of Unix sockets bound in this network namespace (`/proc/net/unix`), those that
/// exist as sockets now.
fn listening_sockets() -> Vec<PathBuf> {
    use std::os::unix::fs::FileTypeExt;
    let Ok(table) = std::fs::read("/proc/net/unix") else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = table
        .split(|b| *b == b'\n')
        .skip(1)
        .filter_map(|line| {
            // `Num RefCount Protocol Flags Type St Inode Path`: the path may hold spaces.
            let mut rest = line;
            for _ in 0..7 {
                let at = rest.iter().position(|b| *b != b' ')?;
                rest = &rest[at..];
                let end = rest.iter().position(|b| *b == b' ')?;
                rest = &rest[end..];
            }
            let path = rest.strip_prefix(b" ")?;
            path.starts_with(b"/")
                .then(|| PathBuf::from(OsString::from_vec(path.to_vec())))
        })
        .collect();
    paths.retain(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_socket()));
    let mut paths: Vec<PathBuf> = paths
        .into_iter()
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .collect();
    paths.sort();
    paths.dedup();
    paths
}

/// One line of `/proc/self/mountinfo`: where the mount is, and the flags a remount must keep
/// (in a user namespace, a remount that drops a locked flag is refused).
#[derive(Debug, PartialEq, Eq)]
struct Mount {
    target: PathBuf,
    flags: MountFlags,
}

impl Mount {
    fn parse(line: &str) -> Option<Self> {
        let mut fields = line.split(' ');
        let target = unescape(fields.nth(4)?);
        let options = fields.next()?;
        let mut flags = MountFlags::empty();
        let mut atime = MountFlags::STRICTATIME;
        for option in options.split(',') {
            match option {
                "nosuid" => flags |= MountFlags::NOSUID,
                "nodev" => flags |= MountFlags::NODEV,
                "noexec" => flags |= MountFlags::NOEXEC,
                "nodiratime" => flags |= MountFlags::NODIRATIME,
                "noatime" => atime = MountFlags::NOATIME,
                "relatime" => atime = MountFlags::RELATIME,
                _ => {}
            }
        }
        Some(Self {
            target,
            flags: flags | atime,
        })
    }
}

/// `/proc/self/mountinfo` writes space, tab, newline and backslash as `\040`-style octal.
fn unescape(field: &str) -> PathBuf {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && bytes
                .get(i + 1..i + 4)
                .is_some_and(|d| d.iter().all(u8::is_ascii_digit))
            && let Ok(byte) = u8::from_str_radix(&field[i + 1..i + 4], 8)
        {
            out.push(byte);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    PathBuf::from(OsString::from_vec(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_lines_give_the_target_and_the_flags_to_keep() {
        let line =
            "36 35 98:0 /mnt1 /mnt\\040two rw,nosuid,nodev,noatime master:1 - ext3 /dev/root rw";
        assert_eq!(
            Mount::parse(line),
            Some(Mount {
                target: PathBuf::from("/mnt two"),
                flags: MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOATIME,
            })
        );
        let line = "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw";
        assert_eq!(Mount::parse(line).unwrap().flags, MountFlags::RELATIME);
        let line = "27 1 254:0 / /x rw - ext4 /dev/vda rw";
        assert_eq!(Mount::parse(line).unwrap().flags, MountFlags::STRICTATIME);
        assert_eq!(Mount::parse("garbage"), None);
    }

    #[test]
    fn mount_points_are_made_without_following_what_a_command_left_in_the_way() {
        use std::os::unix::fs::symlink;
        let top = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("file"), "keep").unwrap();
        let open_top = || {
            rustix::fs::open(
                top.path(),
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .unwrap()
        };
        let is_real_dir = |p: &Path| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir());

        // Nothing there: the folders are made.
        mount_point(&open_top(), Path::new("a/b"), true).unwrap();
        assert!(is_real_dir(&top.path().join("a/b")));
        // A link on the way to a folder outside goes; nothing is made out there.
        symlink(outside.path(), top.path().join("link")).unwrap();
        mount_point(&open_top(), Path::new("link/root"), true).unwrap();
        assert!(is_real_dir(&top.path().join("link/root")));
        assert!(!outside.path().join("root").exists());
        // A file in the way goes; a folder in the way stays, with what it holds.
        std::fs::write(top.path().join("file"), "x").unwrap();
        mount_point(&open_top(), Path::new("file"), true).unwrap();
        assert!(is_real_dir(&top.path().join("file")));
        std::fs::write(top.path().join("a/b/kept"), "x").unwrap();
        mount_point(&open_top(), Path::new("a/b"), true).unwrap();
        assert!(top.path().join("a/b/kept").exists());
        // A socket's point is a file: a link there to a file outside goes, the file stays.
        symlink(outside.path().join("file"), top.path().join("agent.sock")).unwrap();
        let point = mount_point(&open_top(), Path::new("agent.sock"), false).unwrap();
        assert!(
            rustix::fs::fstat(&point).is_ok_and(|st| FileType::from_raw_mode(st.st_mode).is_file())
        );
        assert!(
            std::fs::symlink_metadata(top.path().join("agent.sock")).is_ok_and(|m| m.is_file())
        );
        assert_eq!(
            std::fs::read_to_string(outside.path().join("file")).unwrap(),
            "keep"
        );
    }

    #[test]
    fn the_socket_table_gives_existing_sockets() {
        // Whatever this machine has: every path listed exists as a socket.
        for path in listening_sockets() {
            assert!(path.is_absolute(), "{}", path.display());
        }
    }
}
