//! Tool settings: the parts of the config file that tools read.

use serde::Deserialize;

/// Settings for the built-in tools. Every field has a default; the config file overrides.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct Settings {}
