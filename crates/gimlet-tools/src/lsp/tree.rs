//! A server's process tree: the helper, the server, and what the server started (tsserver runs
//! as a child of typescript-language-server), found by their parents; how much resident memory
//! the tree holds, and the words for it in a note.
//!
//! Where the processes are read from (the table in `docs/architecture.md`, "What differs per
//! system"):
//! - Linux: `/proc` (each process's parent in `stat`, its `VmRSS` in `status`);
//! - macOS, and Linux without `/proc` mounted: one `ps -A -o pid=,ppid=,rss=` (BSD's and
//!   procps' `ps` both read it so), parsed and summed here ([`parse_ps`], [`tree_sum`]);
//! - Windows: the system's process list (the `sysinfo` crate: each process's parent and working
//!   set), summed by the same [`tree_sum`]. [`descendants`] is not needed there: a server's
//!   tree dies with its helper, whose kill-on-close Job Object holds it, so [`end`] ends the
//!   helper alone.
//!
//! A Job Object's own memory limit (`JOB_OBJECT_LIMIT_JOB_MEMORY`) would let Windows stop the
//! tree by itself, but `win32job` does not set it and setting it directly takes `unsafe` code,
//! which the workspace forbids; measuring as on the other systems keeps one rule (resident
//! memory, checked every 5 s, the same note) on all three.

use std::collections::HashMap;

/// One process of a table: its id, its parent's, and the bytes it holds resident.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Row {
    pid: u32,
    parent: u32,
    resident: u64,
}

/// Every process below `pid` in a table of (process, parent) pairs (children, their children
/// ...), parents before children.
fn below(parents: &[(u32, u32)], pid: u32) -> Vec<u32> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for &(child, parent) in parents {
        // A process is not its own child (on macOS `launchd`, pid 1, has parent 0; the
        // kernel task, pid 0, has parent 0).
        if child != parent {
            children.entry(parent).or_default().push(child);
        }
    }
    let mut tree = vec![pid];
    let mut next = 0;
    while next < tree.len() {
        let parent = tree[next];
        next += 1;
        for &child in children.get(&parent).map_or(&[][..], Vec::as_slice) {
            if !tree.contains(&child) {
                tree.push(child);
            }
        }
    }
    tree.remove(0);
    tree
}

/// The resident bytes of `pid` and every process below it in `table`; `None` when `pid` is not
/// in it (gone).
fn tree_sum(table: &[Row], pid: u32) -> Option<u64> {
    let own = table.iter().find(|row| row.pid == pid)?.resident;
    let parents: Vec<(u32, u32)> = table.iter().map(|row| (row.pid, row.parent)).collect();
    let resident: HashMap<u32, u64> = table.iter().map(|row| (row.pid, row.resident)).collect();
    let rest: u64 = below(&parents, pid)
        .iter()
        .map(|p| resident.get(p).copied().unwrap_or(0))
        .sum();
    Some(own + rest)
}

/// The table in the output of `ps -A -o pid=,ppid=,rss=`: a line per process, three numbers
/// (the resident size in KiB). A line that is not so is skipped; a size that is not a number
/// (`-`, as some systems print for a zombie) counts as 0.
#[cfg(any(unix, test))]
fn parse_ps(output: &str) -> Vec<Row> {
    output
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let pid = fields.next()?.parse().ok()?;
            let parent = fields.next()?.parse().ok()?;
            let kib: u64 = fields.next()?.parse().unwrap_or(0);
            fields.next().is_none().then_some(Row {
                pid,
                parent,
                resident: kib * 1024,
            })
        })
        .collect()
}

/// Every process, from one run of `ps`; `None` if it cannot run. Blocking.
#[cfg(unix)]
fn ps_table() -> Option<Vec<Row>> {
    // Where macOS and most Linux systems keep it; else whichever `ps` is on `PATH`.
    let ps = ["/bin/ps", "/usr/bin/ps"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .unwrap_or("ps");
    let out = std::process::Command::new(ps)
        .args(["-A", "-o", "pid=,ppid=,rss="])
        .env("LC_ALL", "C")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| parse_ps(&String::from_utf8_lossy(&out.stdout)))
}

/// Every process below `pid` (children, their children ...), parents before children. Blocking
/// (reads `/proc`, or runs `ps` where there is none).
#[cfg(unix)]
pub(crate) fn descendants(pid: u32) -> Vec<u32> {
    #[cfg(target_os = "linux")]
    if let Some(parents) = proc_parents() {
        return below(&parents, pid);
    }
    ps_table().map_or_else(Vec::new, |table| {
        let parents: Vec<(u32, u32)> = table.iter().map(|row| (row.pid, row.parent)).collect();
        below(&parents, pid)
    })
}

/// The resident memory of `pid` and all its descendants, in bytes; `None` where it cannot be
/// measured (Windows, or the process is gone). Blocking (reads `/proc`, or runs `ps`).
#[cfg(unix)]
pub(crate) fn tree_resident(pid: u32) -> Option<u64> {
    #[cfg(target_os = "linux")]
    if let Some(parents) = proc_parents() {
        let own = resident_kib(pid)?;
        let rest: u64 = below(&parents, pid)
            .into_iter()
            .map(|p| resident_kib(p).unwrap_or(0))
            .sum();
        return Some((own + rest) * 1024);
    }
    tree_sum(&ps_table()?, pid)
}

/// The working set of `pid` and all its descendants, in bytes; `None` when the process is
/// gone. Blocking (reads the system's process list).
#[cfg(windows)]
pub(crate) fn tree_resident(pid: u32) -> Option<u64> {
    tree_sum(&system_table(), pid)
}

/// Every process, with its parent and working set, from the system. Blocking.
#[cfg(windows)]
fn system_table() -> Vec<Row> {
    use sysinfo::{ProcessRefreshKind, ProcessesToUpdate, System};
    let mut system = System::new();
    system.refresh_processes_specifics(
        ProcessesToUpdate::All,
        true,
        ProcessRefreshKind::nothing().with_memory(),
    );
    system
        .processes()
        .iter()
        .map(|(id, process)| Row {
            pid: id.as_u32(),
            parent: process.parent().map_or(0, sysinfo::Pid::as_u32),
            resident: process.memory(),
        })
        .collect()
}

/// Ends the process `pid` (a server's helper: its Job Object, which dies with it, takes every
/// process the server started). Blocking.
#[cfg(windows)]
pub(crate) fn end(pid: u32) {
    use sysinfo::{Pid, ProcessRefreshKind, ProcessesToUpdate, System};
    let pid = Pid::from_u32(pid);
    let mut system = System::new();
    system.refresh_processes_specifics(
        ProcessesToUpdate::Some(&[pid]),
        true,
        ProcessRefreshKind::nothing(),
    );
    if let Some(process) = system.process(pid) {
        process.kill();
    }
}

/// Every process with its parent, from `/proc`; `None` when `/proc` is not mounted.
#[cfg(target_os = "linux")]
fn proc_parents() -> Option<Vec<(u32, u32)>> {
    let entries = std::fs::read_dir("/proc").ok()?;
    let parents: Vec<(u32, u32)> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
        .filter_map(|p| parent_of(p).map(|parent| (p, parent)))
        .collect();
    // An empty `/proc` (a mount point with nothing on it) has no process, not even this one.
    (!parents.is_empty()).then_some(parents)
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
        let found = descendants(pid);
        // The way macOS finds them, here: one `ps` for the whole table.
        let table = ps_table().expect("ps runs");
        let _ = std::process::Command::new("kill")
            .arg(sleep.to_string())
            .status();
        let _ = shell.kill();
        let _ = shell.wait();
        assert!(child > 0, "the sleep holds memory");
        assert_eq!(found, vec![sleep]);
        assert_eq!(tree, (own + child) * 1024);
        assert_eq!(tree_resident(u32::MAX), None);
        let parents: Vec<(u32, u32)> = table.iter().map(|row| (row.pid, row.parent)).collect();
        assert_eq!(below(&parents, pid), vec![sleep]);
        // `ps` reads the same counters a moment apart: the two idle processes hold the same
        // pages, give or take.
        let by_ps = tree_sum(&table, pid).unwrap();
        assert!(by_ps > 0, "ps counts the tree's memory");
        assert!(
            by_ps.abs_diff(tree) <= tree / 10 + 256 * 1024,
            "ps says {by_ps} bytes, /proc {tree}"
        );
        assert_eq!(tree_sum(&table, u32::MAX), None);
    }

    /// `ps -A -o pid=,ppid=,rss=` as macOS prints it (right-aligned, `launchd` the child of the
    /// kernel task), with a zombie's size as `-` and lines that are not rows.
    const PS: &str = "    0     0      0\n    1     0  12345\n  400     1   2048\n  401   400   1024\n\
                      402   401    512\n  403   401      -\n  500     1   9999\n\
                      garbage here\n  404   402  7 extra\n\n";

    #[test]
    fn ps_output_is_read_as_a_table() {
        let table = parse_ps(PS);
        assert_eq!(table.len(), 7, "{table:?}");
        assert_eq!(
            table[2],
            Row {
                pid: 400,
                parent: 1,
                resident: 2048 * 1024
            }
        );
        assert_eq!(table[5].resident, 0, "a zombie holds nothing");
        assert!(!table.iter().any(|row| row.pid == 404));
    }

    #[test]
    fn a_tree_sums_its_descendants_and_nothing_else() {
        let table = parse_ps(PS);
        let parents: Vec<(u32, u32)> = table.iter().map(|row| (row.pid, row.parent)).collect();
        assert_eq!(below(&parents, 400), vec![401, 402, 403]);
        assert_eq!(below(&parents, 402), Vec::<u32>::new());
        assert_eq!(tree_sum(&table, 400), Some((2048 + 1024 + 512) * 1024));
        assert_eq!(tree_sum(&table, 402), Some(512 * 1024));
        assert_eq!(tree_sum(&table, 404), None, "not in the table: gone");
        // The kernel task is its own parent: no loop, and everything is below it.
        assert_eq!(below(&parents, 0), vec![1, 400, 500, 401, 402, 403]);
    }
}
