//! Tool settings: the parts of the config file that tools read.

use std::path::PathBuf;

use serde::Deserialize;

/// Settings for the built-in tools. Every field has a default; the config file overrides.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct Settings {
    /// The `bash` tool.
    pub bash: BashSettings,
}

/// Settings of the `bash` tool.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct BashSettings {
    /// The shell (default: `bash` from `PATH`, else `/bin/sh`).
    pub shell: Option<PathBuf>,
    /// Environment variables left out of commands, as globs on the name (case-insensitive).
    pub env_deny: Vec<String>,
    /// Variables kept although `env_deny` matches them (exact names).
    pub env_allow: Vec<String>,
    /// Whether sandboxed commands may use the network.
    pub network: bool,
}

impl Default for BashSettings {
    fn default() -> Self {
        Self {
            shell: None,
            env_deny: [
                "*TOKEN*",
                "*SECRET*",
                "*KEY*",
                "*PASSWORD*",
                "*PASSWD*",
                "*CREDENTIAL*",
            ]
            .into_iter()
            .map(String::from)
            .collect(),
            env_allow: Vec::new(),
            network: false,
        }
    }
}
