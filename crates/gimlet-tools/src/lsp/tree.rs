//! A server's process tree: the helper, the server, and what the server started (tsserver runs
//! as a child of typescript-language-server), found by their parents in `/proc`; how much
//! resident memory the tree holds, and the words for it in a note.
//!
//! Linux only. Elsewhere [`descendants`] finds none and [`tree_resident`] answers `None`, so
//! no memory cap is enforced (documented in `docs/architecture.md`, "What differs per system").

/// Every process below `pid` (children, their children ...), parents before children.
/// Blocking (reads `/proc`).
#[cfg(target_os = "linux")]
pub(crate) fn descendants(pid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let parents: Vec<(u32, u32)> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
        .filter_map(|p| parent_of(p).map(|parent| (p, parent)))
        .collect();
    let mut tree = vec![pid];
    let mut next = 0;
    while next < tree.len() {
        let parent = tree[next];
        next += 1;
        for &(child, _) in parents.iter().filter(|(_, p)| *p == parent) {
            if !tree.contains(&child) {
                tree.push(child);
            }
        }
    }
    tree.remove(0);
    tree
}

/// None found on this system (Unix without `/proc`; Windows kills by Job Object).
#[cfg(all(unix, not(target_os = "linux")))]
pub(crate) fn descendants(_pid: u32) -> Vec<u32> {
    Vec::new()
}

/// The resident memory of `pid` and all its descendants, in bytes; `None` where it cannot be
/// measured (not Linux, or the process is gone). Blocking (reads `/proc`).
#[cfg(target_os = "linux")]
pub(crate) fn tree_resident(pid: u32) -> Option<u64> {
    let own = resident_kib(pid)?;
    let rest: u64 = descendants(pid)
        .into_iter()
        .map(|p| resident_kib(p).unwrap_or(0))
        .sum();
    Some((own + rest) * 1024)
}

/// Not measured on this system.
#[cfg(not(target_os = "linux"))]
pub(crate) fn tree_resident(_pid: u32) -> Option<u64> {
    None
}

#[cfg(target_os = "linux")]
fn resident_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    // A zombie or a kernel thread has no `VmRSS` line: it holds nothing.
    Some(
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
    )
}

#[cfg(target_os = "linux")]
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid ...`; comm may contain spaces and parentheses.
    let after = stat.get(stat.rfind(')')? + 2..)?;
    after.split_whitespace().nth(1)?.parse().ok()
}

/// A size for a note: `5.1 GB`, `4 GB`, `700 MB` (binary units, as `max_memory_mb` counts).
pub(crate) fn size(bytes: u64) -> String {
    const MIB: u64 = 1024 * 1024;
    const GIB: u64 = 1024 * MIB;
    if bytes >= GIB {
        let tenths = (bytes * 10 + GIB / 2) / GIB;
        if tenths.is_multiple_of(10) {
            format!("{} GB", tenths / 10)
        } else {
            format!("{}.{} GB", tenths / 10, tenths % 10)
        }
    } else {
        format!("{} MB", (bytes + MIB / 2) / MIB)
    }
}

/// The note a restarted server leaves for the next result that uses it.
pub(crate) fn over_cap_note(server: &str, used: u64, cap: u64) -> String {
    format!(
        "{server} used {} (cap {}) and was restarted",
        size(used),
        size(cap)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_a_person_writes_them() {
        const MIB: u64 = 1024 * 1024;
        assert_eq!(size(4096 * MIB), "4 GB");
        assert_eq!(size(5222 * MIB), "5.1 GB");
        assert_eq!(size(700 * MIB), "700 MB");
        assert_eq!(size(0), "0 MB");
        assert_eq!(
            over_cap_note("typescript-language-server", 5222 * MIB, 4096 * MIB),
            "typescript-language-server used 5.1 GB (cap 4 GB) and was restarted"
        );
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_tree_counts_its_children() {
        // A shell that waits for its `sleep`: two processes, the second a child of the first.
        let mut shell = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & wait"])
            .spawn()
            .unwrap();
        let pid = shell.id();
        let mut sleep = None;
        for _ in 0..100 {
            let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
                .unwrap_or_default();
            sleep = children
                .split_whitespace()
                .next()
                .and_then(|c| c.parse::<u32>().ok())
                // Once it runs `sleep` (between fork and exec it is a copy of the shell).
                .filter(|c| {
                    std::fs::read_to_string(format!("/proc/{c}/comm"))
                        .is_ok_and(|comm| comm.trim() == "sleep")
                });
            if sleep.is_some() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        let sleep = sleep.expect("the shell started its sleep");
        let (own, child) = (resident_kib(pid).unwrap(), resident_kib(sleep).unwrap());
        let tree = tree_resident(pid).unwrap();
        let below = descendants(pid);
        let _ = std::process::Command::new("kill")
            .arg(sleep.to_string())
            .status();
        let _ = shell.kill();
        let _ = shell.wait();
        assert!(child > 0, "the sleep holds memory");
        assert_eq!(below, vec![sleep]);
        assert_eq!(tree, (own + child) * 1024);
        assert_eq!(tree_resident(u32::MAX), None);
    }
}
