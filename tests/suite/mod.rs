// Every test runs POSIX shell commands, and most look for their processes in /proc or test
// the Linux sandbox; Windows commands are tested in windows.rs.
#[cfg(target_os = "linux")]
mod bash;
mod binary;
// Shell commands (GNU sed), symbolic links and modes.
#[cfg(target_os = "linux")]
mod checkpoints;
// The watchers of Linux and Windows (macOS's is Windows' code over FSEvents).
#[cfg(any(target_os = "linux", windows))]
mod checkpoints_watch;
mod crash;
mod dist;
mod errors;
// The fixture plants symbolic links, a FIFO and /proc paths; the Windows escapes (drive letters,
// `\\?\` and UNC paths, junctions) are tried in windows.rs.
#[cfg(unix)]
mod escapes;
mod extending;
mod file_tools;
// The attacks of issue 20 on the Linux command sandbox (Landlock, seccomp, namespaces).
#[cfg(target_os = "linux")]
mod hostile;
pub(crate) mod http;
mod initialize;
mod lsp;
#[cfg(unix)] // The servers and the fake server (Python) are run as Unix programs.
mod lsp_fresh;
#[cfg(unix)] // The servers are run as Unix programs.
mod lsp_impact;
#[cfg(unix)] // The scripted server (Python) and the servers are run as Unix programs.
mod lsp_refactor;
// The scripted server and its processes are found in /proc.
#[cfg(target_os = "linux")]
mod lsp_servers;
mod more_tools;
pub(crate) mod permissions;
mod protocol;
mod protocol_details;
// A seccomp filter takes the randomness away.
#[cfg(target_os = "linux")]
mod randomness;
mod read_ls;
mod roots;
mod shape;
mod shell;
mod tools_list;
mod web;
// The Windows session and attacks (run under Wine on Linux: scripts/wine.sh).
#[cfg(windows)]
mod windows;
