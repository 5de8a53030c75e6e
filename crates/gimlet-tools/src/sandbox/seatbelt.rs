//! The macOS command sandbox's profile: Seatbelt's policy language (SBPL), run by
//! `/usr/bin/sandbox-exec -p PROFILE -D NAME=PATH ... shell -c COMMAND` (`macos.rs`).
//!
//! Pure: the profile is a function of the plan, so it is built and checked (golden tests) on
//! every system, although only macOS runs it. Paths go in as parameters (`-D`), never spliced
//! into the text, so no path can change the profile's meaning; the caller passes them
//! resolved (Seatbelt matches the real path: `/private/var/...`, not `/var/...`).
//!
//! The policy, point by point (docs/security.md compares it with Codex's base policy):
//! - closed by default (`deny default`); child processes inherit it;
//! - reads anywhere (`file-read*`), as on Linux; execution and forking allowed;
//! - writes only beneath the writable paths (the roots and the session's temp directory),
//!   except the protected paths (neither the path nor anything beneath it: `mkdir .husky`
//!   is refused too) and the git directories themselves (they cannot be renamed or removed;
//!   what is inside them stays writable, as on Linux), and data writes to `/dev/null`;
//! - no network unless the plan allows it; Unix sockets only beneath the writable paths and
//!   the allowed sockets;
//! - signals and process information only within the sandbox;
//! - what ordinary tools need to start: sysctl reads, user preferences, the user directory
//!   lookup, POSIX semaphores (Python's multiprocessing), pseudo-terminals.

use std::path::PathBuf;

use super::SandboxPlan;

/// A profile and the parameters it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Profile {
    /// The SBPL text, for `sandbox-exec -p`.
    pub(crate) text: String,
    /// `NAME=PATH` pairs, for `sandbox-exec -D`.
    pub(crate) params: Vec<(String, PathBuf)>,
}

/// What every profile starts with.
const BASE: &str = r#"(version 1)
(deny default)

; processes: the command and what it starts inherit this profile
(allow process-exec)
(allow process-fork)
(allow signal (target same-sandbox))
(allow process-info* (target same-sandbox))

; reads anywhere, as on Linux (the roots are where writes go, not a read boundary)
(allow file-read*)
(allow file-write-data (require-all (path "/dev/null") (vnode-type CHARACTER-DEVICE)))

; what ordinary programs need to start
(allow sysctl-read)
(allow user-preference-read)
(allow mach-host*)
(allow mach-lookup (global-name "com.apple.system.opendirectoryd.libinfo"))
(allow ipc-posix-sem)
(allow pseudo-tty)
(allow file-read* file-write* file-ioctl (literal "/dev/ptmx"))
(allow file-write-data file-ioctl
  (require-all (regex #"^/dev/ttys[0-9]+") (vnode-type CHARACTER-DEVICE)))
"#;

/// The profile for a plan.
pub(crate) fn profile(plan: &SandboxPlan) -> Profile {
    let mut text = String::from(BASE);
    let mut params: Vec<(String, PathBuf)> = Vec::new();
    let mut param = |prefix: &str, index: usize, path: &PathBuf| {
        let name = format!("{prefix}_{index}");
        params.push((name.clone(), path.clone()));
        format!("(param \"{name}\")")
    };
    let mut exceptions = Vec::new();
    for (i, path) in plan.read_only.iter().enumerate() {
        let p = param("PROTECTED", i, path);
        exceptions.push(format!(
            "(require-not (literal {p})) (require-not (subpath {p}))"
        ));
    }
    for (i, path) in plan.pinned.iter().enumerate() {
        let p = param("GIT_DIR", i, path);
        exceptions.push(format!("(require-not (literal {p}))"));
    }
    let mut writable = Vec::new();
    for (i, path) in plan.writable.iter().enumerate() {
        writable.push(param("WRITABLE", i, path));
    }
    let mut sockets: Vec<String> = writable
        .iter()
        .map(|root| format!("(subpath {root})"))
        .collect();
    for (i, path) in plan.unix_sockets.iter().enumerate() {
        sockets.push(format!("(literal {})", param("SOCKET", i, path)));
    }

    text.push_str(
        "\n; writes: beneath the roots and the temp directory, not the protected paths\n",
    );
    for root in &writable {
        if exceptions.is_empty() {
            text.push_str(&format!("(allow file-write* (subpath {root}))\n"));
        } else {
            text.push_str(&format!(
                "(allow file-write* (require-all (subpath {root}) {}))\n",
                exceptions.join(" ")
            ));
        }
    }

    if plan.network {
        params.retain(|(name, _)| !name.starts_with("SOCKET"));
        text.push_str("\n; network: allowed\n(allow network* system-socket)\n");
    } else {
        text.push_str("\n; network: off; Unix sockets beneath the writable paths only\n");
        text.push_str("(allow system-socket (socket-domain AF_UNIX))\n");
        for place in sockets {
            text.push_str(&format!(
                "(allow network-bind (local unix-socket {place}))\n\
                 (allow network-outbound (remote unix-socket {place}))\n"
            ));
        }
    }
    Profile { text, params }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(network: bool) -> SandboxPlan {
        SandboxPlan {
            writable: vec![
                PathBuf::from("/Users/me/project"),
                PathBuf::from("/private/var/folders/xy/T/gimlet-tmp-abc"),
            ],
            read_only: vec![
                PathBuf::from("/Users/me/project/.git/hooks"),
                PathBuf::from("/Users/me/project/.vscode"),
            ],
            pinned: vec![PathBuf::from("/Users/me/project/.git")],
            network,
            unix_sockets: vec![PathBuf::from("/private/tmp/ssh-agent.sock")],
            ..SandboxPlan::default()
        }
    }

    #[test]
    fn the_profile_without_network() {
        let profile = profile(&plan(false));
        insta::assert_snapshot!(profile.text);
        insta::assert_debug_snapshot!(profile.params);
    }

    #[test]
    fn the_network_part_with_network() {
        let profile = profile(&plan(true));
        let network = &profile.text[profile.text.find("; network").unwrap()..];
        insta::assert_snapshot!(network);
        assert!(
            !profile
                .params
                .iter()
                .any(|(name, _)| name.starts_with("SOCKET")),
            "no socket exceptions are needed when the network is on"
        );
    }

    #[test]
    fn a_path_is_only_ever_a_parameter() {
        let mut plan = plan(false);
        plan.writable
            .push(PathBuf::from("/tmp/x\") (allow default) (\""));
        let profile = profile(&plan);
        assert!(!profile.text.contains("allow default"), "{}", profile.text);
        assert!(
            profile
                .params
                .iter()
                .any(|(_, p)| p.to_string_lossy().contains("allow default"))
        );
    }

    #[test]
    fn parentheses_balance() {
        let text = profile(&plan(false)).text;
        let code: String = text
            .lines()
            .filter(|l| !l.trim_start().starts_with(';'))
            .collect::<Vec<_>>()
            .join("\n");
        let mut depth = 0i32;
        for c in code.chars() {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                _ => {}
            }
            assert!(depth >= 0, "a closing parenthesis too many:\n{text}");
        }
        assert_eq!(depth, 0, "unbalanced:\n{text}");
    }
}

#[cfg(test)]
#[path = "seatbelt_tests.rs"]
mod attack_tests;
