//! What a call touches: [`Access`] (a read, a write, a command, a host) and [`PathAccess`],
//! with the glob helpers behind the pattern a session grant covers.

use std::path::PathBuf;

use crate::shell::Script;

/// A path a call reads or writes, already resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathAccess {
    /// The resolved absolute path (symlinks followed for the part that exists).
    pub path: PathBuf,
    /// The path as shown to people: relative to its root, or absolute outside the roots.
    pub display: String,
    /// The path is inside one of the roots.
    pub inside_roots: bool,
    /// The path is protected (VCS hooks, editor and agent config, shell rc files).
    pub protected: bool,
}

/// One thing a call touches.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Access {
    /// Reads a file or lists a directory.
    Read(PathAccess),
    /// Creates, changes or deletes a file.
    Write(PathAccess),
    /// Runs a shell command. Made by [`Access::command`].
    Execute {
        /// The whole command line.
        command: String,
        /// What the shell parser found in it: its simple commands and unknowable parts.
        script: Script,
        /// It will run inside the sandbox.
        sandboxed: bool,
    },
    /// Connects to a network host.
    Network {
        /// The host name or address.
        host: String,
    },
}

impl Access {
    /// Running the command line `line`, in the sandbox or not: the one place where an
    /// [`Access::Execute`] is made, so every tool that runs commands is judged alike.
    pub fn command(line: &str, sandboxed: bool) -> Self {
        Self::Execute {
            command: line.to_owned(),
            script: crate::shell::parse(line),
            sandboxed,
        }
    }

    /// The string rules are matched against: a path, a command, or a host.
    pub fn subject(&self) -> &str {
        match self {
            Self::Read(p) | Self::Write(p) => p.display.as_str(),
            Self::Execute { command, .. } => command,
            Self::Network { host } => host,
        }
    }

    /// What a grant "for this session" covers when the user picks it for this access.
    pub fn session_pattern(&self) -> String {
        match self {
            Self::Read(p) | Self::Write(p) => p.path.display().to_string(),
            // One simple command: its first words (`cargo test*`). Anything else: this exact
            // line, since a prefix of one part cannot cover the others.
            Self::Execute {
                command, script, ..
            } => match script.commands.as_slice() {
                [only] if script.unknowns.is_empty() => command_prefix_pattern(&only.written),
                _ => glob_escape(command),
            },
            Self::Network { host } => host.clone(),
        }
    }

    pub(super) fn verb(&self) -> &'static str {
        match self {
            Self::Read(_) => "read",
            Self::Write(_) => "write",
            Self::Execute { .. } => "run",
            Self::Network { .. } => "connect to",
        }
    }
}

/// A glob that matches exactly `text`.
fn glob_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '{' | '}' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Whether a glob has no wildcard: it matches one string only.
pub(super) fn is_literal_glob(pattern: &str) -> bool {
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                chars.next();
            }
            '*' | '?' | '[' | '{' => return false,
            _ => {}
        }
    }
    true
}

/// `cargo test --all` -> `cargo test*`: the first two words, then anything.
fn command_prefix_pattern(command: &str) -> String {
    let words: Vec<&str> = command.split_whitespace().take(2).collect();
    let first_is_flag = words.get(1).is_some_and(|w| w.starts_with('-'));
    match (words.as_slice(), first_is_flag) {
        ([one, ..], true) | ([one], false) => format!("{one}*"),
        ([one, two], false) => format!("{one} {two}*"),
        _ => String::from("*"),
    }
}
