//! The profile under attack: the operations a hostile command would try, judged by a small
//! evaluator of the Seatbelt language as macOS applies it (`deny default`, the last rule that
//! matches an operation decides, an operation name ending in `*` covers every operation it
//! prefixes, a rule's filters match when any of them does, `subpath` compares whole path
//! components). No Mac runs here, so these tests check the profile gimlet writes against the
//! language's documented meaning: a rule that widened writes, reopened the network or dropped a
//! protected path fails them. Whether Seatbelt itself enforces that meaning is Apple's part and
//! has not run here (docs/security.md, "What has run where").

use std::collections::HashMap;
use std::path::PathBuf;

use super::{Profile, profile};
use crate::sandbox::SandboxPlan;

/// An expression of the profile language.
#[derive(Debug, Clone, PartialEq)]
enum Sx {
    Atom(String),
    Str(String),
    Regex(String),
    List(Vec<Sx>),
}

fn parse(text: &str) -> Vec<Sx> {
    let mut chars = text.chars().peekable();
    let mut stack: Vec<Vec<Sx>> = vec![Vec::new()];
    while let Some(c) = chars.next() {
        match c {
            ';' => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
            }
            '(' => stack.push(Vec::new()),
            ')' => {
                let list = stack.pop().expect("a closing parenthesis too many");
                stack
                    .last_mut()
                    .expect("a closing parenthesis too many")
                    .push(Sx::List(list));
            }
            '"' => {
                let mut s = String::new();
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => s.push(chars.next().expect("an escape at the end")),
                        c => s.push(c),
                    }
                }
                stack.last_mut().unwrap().push(Sx::Str(s));
            }
            '#' if chars.peek() == Some(&'"') => {
                chars.next();
                let mut s = String::new();
                for c in chars.by_ref() {
                    if c == '"' {
                        break;
                    }
                    s.push(c);
                }
                stack.last_mut().unwrap().push(Sx::Regex(s));
            }
            c if c.is_whitespace() => {}
            c => {
                let mut atom = String::from(c);
                while let Some(&c) = chars.peek() {
                    if c.is_whitespace() || c == '(' || c == ')' {
                        break;
                    }
                    atom.push(c);
                    chars.next();
                }
                stack.last_mut().unwrap().push(Sx::Atom(atom));
            }
        }
    }
    assert_eq!(stack.len(), 1, "unbalanced profile");
    stack.pop().unwrap()
}

/// One operation a command attempts.
#[derive(Debug, Default, Clone)]
struct Op {
    name: &'static str,
    path: Option<String>,
    character_device: bool,
    same_sandbox: bool,
    socket_domain: Option<&'static str>,
    local_socket: Option<String>,
    remote_socket: Option<String>,
    remote_ip: Option<&'static str>,
}

fn file(name: &'static str, path: &str) -> Op {
    Op {
        name,
        path: Some(path.to_owned()),
        ..Op::default()
    }
}

struct Evaluator {
    rules: Vec<Sx>,
    params: HashMap<String, String>,
}

impl Evaluator {
    fn new(profile: &Profile) -> Self {
        let params = profile
            .params
            .iter()
            .map(|(name, path)| (name.clone(), path.to_string_lossy().into_owned()))
            .collect();
        Self {
            rules: parse(&profile.text),
            params,
        }
    }

    /// Whether the profile allows `op`.
    fn allows(&self, op: &Op) -> bool {
        let mut verdict = None;
        for rule in &self.rules {
            let Sx::List(items) = rule else {
                panic!("a bare expression at the top: {rule:?}")
            };
            let Some(Sx::Atom(action)) = items.first() else {
                panic!("a rule without an action: {rule:?}")
            };
            let allow = match action.as_str() {
                "version" => continue,
                "allow" => true,
                "deny" => false,
                other => panic!("an action this evaluator does not know: {other}"),
            };
            let mut names = Vec::new();
            let mut filters = Vec::new();
            for item in &items[1..] {
                match item {
                    Sx::Atom(name) => names.push(name.as_str()),
                    Sx::List(_) => filters.push(item),
                    other => panic!("a string where an operation belongs: {other:?}"),
                }
            }
            let covers = names.iter().any(|name| {
                *name == "default"
                    || *name == op.name
                    || name
                        .strip_suffix('*')
                        .is_some_and(|prefix| op.name.starts_with(prefix))
            });
            if covers && (filters.is_empty() || filters.iter().any(|f| self.filter(f, op))) {
                verdict = Some(allow);
            }
        }
        verdict.expect("the profile has no default")
    }

    fn value(&self, sx: &Sx) -> String {
        match sx {
            Sx::Str(s) => s.clone(),
            Sx::List(items) if items.first() == Some(&Sx::Atom("param".into())) => {
                let Some(Sx::Str(name)) = items.get(1) else {
                    panic!("a param without a name")
                };
                self.params
                    .get(name)
                    .unwrap_or_else(|| panic!("the parameter {name} is not passed"))
                    .clone()
            }
            other => panic!("not a path: {other:?}"),
        }
    }

    fn path_filter(&self, kind: &str, arg: &Sx, path: &str) -> bool {
        match kind {
            "literal" | "path" => path == self.value(arg),
            "subpath" => {
                let base = self.value(arg);
                path == base
                    || path
                        .strip_prefix(base.as_str())
                        .is_some_and(|rest| rest.starts_with('/'))
            }
            "regex" => {
                let Sx::Regex(pattern) = arg else {
                    panic!("regex takes #\"...\"")
                };
                regex_matches(pattern, path)
            }
            other => panic!("a path filter this evaluator does not know: {other}"),
        }
    }

    fn filter(&self, sx: &Sx, op: &Op) -> bool {
        let Sx::List(items) = sx else {
            panic!("a filter must be a list: {sx:?}")
        };
        let Some(Sx::Atom(kind)) = items.first() else {
            panic!("a filter without a name: {sx:?}")
        };
        let args = &items[1..];
        match kind.as_str() {
            "require-all" => args.iter().all(|f| self.filter(f, op)),
            "require-any" => args.iter().any(|f| self.filter(f, op)),
            "require-not" => !self.filter(&args[0], op),
            "literal" | "path" | "subpath" | "regex" => op
                .path
                .as_deref()
                .is_some_and(|path| self.path_filter(kind, &args[0], path)),
            "vnode-type" => {
                assert_eq!(args[0], Sx::Atom("CHARACTER-DEVICE".into()));
                op.character_device
            }
            "target" => {
                assert_eq!(args[0], Sx::Atom("same-sandbox".into()));
                op.same_sandbox
            }
            "global-name" => false,
            "socket-domain" => {
                let Sx::Atom(domain) = &args[0] else {
                    panic!("socket-domain takes a name")
                };
                op.socket_domain == Some(domain.as_str())
            }
            "local" | "remote" => {
                let socket = if kind == "local" {
                    &op.local_socket
                } else {
                    &op.remote_socket
                };
                match &args[0] {
                    Sx::Atom(what) if what == "unix-socket" => {
                        let Sx::List(inner) = &args[1] else {
                            panic!("unix-socket takes a path filter")
                        };
                        let Some(Sx::Atom(path_kind)) = inner.first() else {
                            panic!("a path filter without a name")
                        };
                        socket
                            .as_deref()
                            .is_some_and(|path| self.path_filter(path_kind, &inner[1], path))
                    }
                    Sx::Atom(what) if what == "ip" => op.remote_ip.is_some(),
                    other => panic!("an address this evaluator does not know: {other:?}"),
                }
            }
            other => panic!("a filter this evaluator does not know: {other}"),
        }
    }
}

/// The regular expressions the profile uses: `^`, literal characters, `[0-9]` and `+`.
fn regex_matches(pattern: &str, text: &str) -> bool {
    let pattern = pattern
        .strip_prefix('^')
        .expect("the profile's regexes are anchored");
    let (literal, rest) = pattern
        .split_once("[0-9]+")
        .expect("the profile's one regex form: a prefix and digits");
    assert!(rest.is_empty(), "more than this evaluator reads: {pattern}");
    text.strip_prefix(literal)
        .is_some_and(|digits| digits.chars().next().is_some_and(|c| c.is_ascii_digit()))
}

const ROOT: &str = "/Users/me/project";
const TMP: &str = "/private/var/folders/xy/T/gimlet-tmp-abc";

fn plan(network: bool) -> SandboxPlan {
    SandboxPlan {
        writable: vec![PathBuf::from(ROOT), PathBuf::from(TMP)],
        read_only: vec![
            PathBuf::from(format!("{ROOT}/.git/hooks")),
            PathBuf::from(format!("{ROOT}/.git/config")),
            PathBuf::from(format!("{ROOT}/.vscode")),
        ],
        pinned: vec![PathBuf::from(format!("{ROOT}/.git"))],
        network,
        unix_sockets: vec![PathBuf::from("/private/tmp/ssh-agent.sock")],
        ..SandboxPlan::default()
    }
}

fn offline() -> Evaluator {
    Evaluator::new(&profile(&plan(false)))
}

#[test]
fn writes_outside_the_roots_are_denied() {
    let sandbox = offline();
    for path in [
        "/Users/me/.zshrc",
        "/Users/me/Library/LaunchAgents/evil.plist",
        "/Users/me/project-evil/x",
        "/Users/me/projectx",
        "/Users/me",
        "/private/tmp/x",
        "/private/var/folders/xy/T/gimlet-tmp-abcd/x",
        "/etc/hosts",
    ] {
        for name in ["file-write-create", "file-write-data", "file-write-unlink"] {
            assert!(!sandbox.allows(&file(name, path)), "{name} {path} allowed");
        }
    }
}

#[test]
fn writes_in_the_roots_and_the_temp_folder_are_allowed() {
    let sandbox = offline();
    for path in [
        format!("{ROOT}/src/main.rs"),
        format!("{ROOT}/.gitignore"),
        format!("{ROOT}/.git/index"),
        format!("{ROOT}/.git/objects/ab/cdef"),
        format!("{TMP}/scratch.py"),
    ] {
        for name in ["file-write-create", "file-write-data", "file-write-unlink"] {
            assert!(sandbox.allows(&file(name, &path)), "{name} {path} denied");
        }
    }
    assert!(sandbox.allows(&file("file-read-data", "/etc/hosts")));
}

#[test]
fn protected_paths_and_what_lies_beneath_them_are_denied() {
    let sandbox = offline();
    for path in [
        format!("{ROOT}/.git/hooks"),
        format!("{ROOT}/.git/hooks/pre-commit"),
        format!("{ROOT}/.git/config"),
        format!("{ROOT}/.vscode"),
        format!("{ROOT}/.vscode/tasks.json"),
    ] {
        for name in [
            "file-write-create",
            "file-write-data",
            "file-write-unlink",
            "file-write-mode",
        ] {
            assert!(!sandbox.allows(&file(name, &path)), "{name} {path} allowed");
        }
    }
    // The git directory itself cannot be renamed or removed; what is inside it stays writable.
    assert!(!sandbox.allows(&file("file-write-unlink", &format!("{ROOT}/.git"))));
    assert!(sandbox.allows(&file("file-write-data", &format!("{ROOT}/.git/HEAD"))));
}

#[test]
fn devices_other_than_null_and_terminals_are_denied() {
    let sandbox = offline();
    let device = |path: &str| Op {
        character_device: true,
        ..file("file-write-data", path)
    };
    assert!(sandbox.allows(&device("/dev/null")));
    assert!(sandbox.allows(&device("/dev/ttys003")));
    assert!(!sandbox.allows(&device("/dev/disk0")));
    assert!(!sandbox.allows(&device("/dev/ttys")));
    // A regular file named like a device is not one.
    assert!(!sandbox.allows(&file("file-write-data", "/dev/null")));
}

#[test]
fn the_network_is_closed_unless_the_plan_opens_it() {
    let connect = Op {
        name: "network-outbound",
        remote_ip: Some("93.184.216.34:443"),
        ..Op::default()
    };
    let inet = Op {
        name: "system-socket",
        socket_domain: Some("AF_INET"),
        ..Op::default()
    };
    let docker = Op {
        name: "network-outbound",
        remote_socket: Some("/private/var/run/docker.sock".into()),
        ..Op::default()
    };
    let agent = Op {
        remote_socket: Some("/private/tmp/ssh-agent.sock".into()),
        ..docker.clone()
    };
    let own = Op {
        name: "network-bind",
        local_socket: Some(format!("{ROOT}/.cache/server.sock")),
        ..Op::default()
    };

    let sandbox = offline();
    assert!(!sandbox.allows(&connect), "an outbound connection");
    assert!(!sandbox.allows(&inet), "an internet socket");
    assert!(!sandbox.allows(&docker), "the Docker socket");
    assert!(sandbox.allows(&agent), "an allowed socket");
    assert!(sandbox.allows(&own), "a socket in the root");

    let online = Evaluator::new(&profile(&plan(true)));
    assert!(online.allows(&connect));
    assert!(online.allows(&inet));
    assert!(
        !online.allows(&file("file-write-data", "/Users/me/.zshrc")),
        "the network does not open writes"
    );
}

#[test]
fn other_processes_cannot_be_signalled_or_inspected() {
    let sandbox = offline();
    for name in ["signal", "process-info-pidinfo"] {
        let outside = Op {
            name,
            ..Op::default()
        };
        let inside = Op {
            same_sandbox: true,
            ..outside.clone()
        };
        assert!(!sandbox.allows(&outside), "{name} outside the sandbox");
        assert!(sandbox.allows(&inside), "{name} inside the sandbox");
    }
    assert!(sandbox.allows(&Op {
        name: "process-exec",
        ..Op::default()
    }));
}

#[test]
fn the_evaluator_sees_a_widened_profile() {
    // The checks above would pass a profile that allows nothing; this one shows they catch a
    // profile that allows too much.
    let mut widened = profile(&plan(false));
    widened
        .text
        .push_str("(allow file-write*)\n(allow network*)\n");
    let sandbox = Evaluator::new(&widened);
    assert!(sandbox.allows(&file("file-write-data", "/Users/me/.zshrc")));
    assert!(sandbox.allows(&Op {
        name: "network-outbound",
        remote_ip: Some("93.184.216.34:443"),
        ..Op::default()
    }));
}
