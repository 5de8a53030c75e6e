//! The session's answers: [`Grants`] ("allow for this session") and [`OutsideGrants`]
//! ("allow outside the sandbox for this session"), kept apart.

use std::path::Path;
use std::sync::Mutex;

use globset::Glob;

use super::Access;
use super::access::is_literal_glob;
use crate::util::MutexExt as _;

/// "Allow for this session" answers: (tool, pattern) pairs.
#[derive(Debug, Default)]
pub struct Grants {
    granted: Mutex<Vec<(String, String)>>,
}

impl Grants {
    /// Records a grant.
    pub fn add(&self, tool: &str, pattern: String) {
        let mut granted = self.granted.locked();
        if !granted.iter().any(|(t, p)| t == tool && *p == pattern) {
            granted.push((tool.to_owned(), pattern));
        }
    }

    /// Whether a grant covers this access.
    pub fn covers(&self, tool: &str, access: &Access) -> bool {
        let granted = self.granted.locked();
        granted.iter().any(|(t, pattern)| {
            t == tool
                && match access {
                    Access::Read(p) | Access::Write(p) => Path::new(pattern) == p.path,
                    // Every simple command matches the pattern, or the pattern is this exact
                    // line ("allow for this session" on a compound or unknowable command).
                    Access::Execute {
                        command, script, ..
                    } => {
                        let Ok(glob) = Glob::new(pattern) else {
                            return false;
                        };
                        let m = glob.compile_matcher();
                        (is_literal_glob(pattern) && m.is_match(command))
                            || (script.unknowns.is_empty()
                                && !script.commands.is_empty()
                                && script.commands.iter().all(|c| m.is_match(&c.written)))
                    }
                    Access::Network { host } => host == pattern,
                }
        })
    }
}

/// "Allow outside the sandbox for this session" answers: (tool, command pattern) pairs, apart
/// from the ordinary session grants (an ordinary grant lets a command run without asking; it
/// does not let it leave the sandbox).
#[derive(Debug, Default)]
pub struct OutsideGrants(Grants);

impl OutsideGrants {
    /// Records a grant.
    pub fn add(&self, tool: &str, pattern: String) {
        self.0.add(tool, pattern);
    }

    /// Whether a grant covers running `access` (an [`Access::Execute`]) outside the sandbox,
    /// matched as a session grant is ([`Grants::covers`]): every simple command matches the
    /// pattern, and nothing in the line is unknowable.
    pub fn covers(&self, tool: &str, access: &Access) -> bool {
        self.0.covers(tool, access)
    }
}
