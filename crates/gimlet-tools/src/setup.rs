//! Assembling a server's tools from the config files: the user's config tightened by each
//! root's `.gimlet.toml` ([`load_config`]), the tool environment ([`environment`]) and the
//! registry of built-in and plugin tools less the disabled ones ([`registry`]). The `gimlet`
//! binary parses its flags into a [`Setup`] and calls these; an agent of one's own can too.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::audit::AuditLog;
use crate::command_hook::CommandHook;
pub use crate::command_hook::HookConfigError;
use crate::config::{ConfigError, ConfigFile, PROJECT_FILE};
use crate::context::{EnvError, ToolEnv};
use crate::permission::{Mode, RuleError};
use crate::plugin::{CommandTool, PluginConfigError};
use crate::registry::{ToolRegistry, ToolSource};
use crate::sandbox::SandboxSetting;

/// What the flags say that the config files do not.
#[derive(Debug, Clone, Default)]
pub struct Setup {
    /// The config file given (`--config`); `None`: the user's default one, if it exists.
    pub config: Option<PathBuf>,
    /// The roots given (`--root`); none: the implicit root (the working directory, where it is
    /// a project's and not `/`, the home folder or above).
    pub roots: Vec<PathBuf>,
    /// The mode given (`--mode`), over the config's.
    pub mode: Option<Mode>,
    /// Whether commands run sandboxed (`--sandbox`).
    pub sandbox: SandboxSetting,
    /// Where the audit log goes (`--audit-log`).
    pub audit_log: Option<PathBuf>,
    /// The program that runs commands (the `gimlet` binary itself); `None`: no commands.
    pub exec_helper: Option<PathBuf>,
}

/// Why the tools could not be assembled. Each message names the file or setting at fault.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SetupError {
    /// A config file could not be read or parsed.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A permission rule does not compile.
    #[error(transparent)]
    Rule(#[from] RuleError),
    /// A hook of the config is wrong.
    #[error(transparent)]
    Hook(#[from] HookConfigError),
    /// A plugin tool of the config is wrong.
    #[error(transparent)]
    Plugin(#[from] PluginConfigError),
    /// The audit log cannot be opened.
    #[error("cannot open the audit log {}: {source}", path.display())]
    AuditLog {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The environment is not consistent (a root that does not exist, ...).
    #[error(transparent)]
    Env(#[from] EnvError),
}

/// The user's config file (the one given, else the default one if it exists), tightened by the
/// `.gimlet.toml` of each root gimlet will use (the roots given, else the implicit one). A
/// project file can only tighten; what it tried to loosen is logged and ignored.
pub fn load_config(config: Option<&Path>, roots: &[PathBuf]) -> Result<ConfigFile, SetupError> {
    let mut file = match config {
        Some(path) => ConfigFile::load(path)?,
        None => match ConfigFile::default_path() {
            Some(path) => ConfigFile::load_if_present(&path)?.unwrap_or_default(),
            None => ConfigFile::default(),
        },
    };
    let roots: Vec<PathBuf> = if roots.is_empty() {
        crate::fs::implicit_root_here().into_iter().collect()
    } else {
        roots.to_vec()
    };
    for root in roots {
        if !root.is_dir() {
            // Not a usable root: opening the roots says so, clearly, right after this.
            continue;
        }
        let path = root.join(PROJECT_FILE);
        if let Some(project) = ConfigFile::load_if_present(&path)? {
            let ignored = file.tighten_with(project);
            if !ignored.is_empty() {
                tracing::warn!(
                    "{}: a project config can only tighten; ignored {}",
                    path.display(),
                    ignored.join(", ")
                );
            }
        }
    }
    Ok(file)
}

/// The tool environment of a config and the flags.
pub fn environment(config: &ConfigFile, setup: &Setup) -> Result<ToolEnv, SetupError> {
    let mut builder = ToolEnv::builder()
        .sandbox(setup.sandbox)
        .policy(config.policy(setup.mode)?)
        .settings(config.tools.clone())
        .unix_sockets(config.sandbox.unix_sockets.clone())
        .lsp(config.lsp.clone())
        .checkpoints(config.checkpoints)
        .budget(config.budget);
    if config.output.max_lines.is_some() || config.output.max_bytes.is_some() {
        // Limits left at their defaults may be lowered for a client that shows its model less.
        builder = builder.limits(config.limits());
    }
    if let Some(path) = &setup.audit_log {
        let log = AuditLog::open(path).map_err(|source| SetupError::AuditLog {
            path: path.clone(),
            source,
        })?;
        builder = builder.audit(log);
    }
    if let Some(helper) = &setup.exec_helper {
        builder = builder.exec_helper(helper.clone());
    }
    for root in &setup.roots {
        builder = builder.root(root);
    }
    for hook in &config.hooks {
        builder = builder.hook(Arc::new(CommandHook::new(hook)?));
    }
    Ok(builder.build()?)
}

/// The built-in tools and the config's plugin tools, less those the config disables (a name
/// that is no tool is logged).
pub fn registry(config: &ConfigFile) -> Result<ToolRegistry, SetupError> {
    let mut registry = ToolRegistry::builtin();
    for plugin in &config.plugins {
        registry.register_dyn(Arc::new(CommandTool::new(plugin)?), ToolSource::Plugin);
    }
    for name in &config.disabled_tools {
        if registry.get(name).is_none() {
            tracing::warn!("the config disables `{name}`, but there is no such tool");
        }
        registry.disable(name);
    }
    Ok(registry)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn a_project_file_tightens_the_user_config_and_cannot_loosen_it() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("project");
        std::fs::create_dir(&root).unwrap();
        let user = dir.path().join("config.toml");
        write(
            &user,
            "disabled_tools = [\"web_search\"]\n[permissions]\nmode = \"trusted\"\n\
             [[permissions.rules]]\naction = \"allow\"\ntool = \"bash\"\npattern = \"make *\"\n",
        );
        write(
            &root.join(PROJECT_FILE),
            "[permissions]\nmode = \"strict\"\n[[permissions.rules]]\naction = \"deny\"\n\
             tool = \"bash\"\npattern = \"git push*\"\n",
        );
        let config = load_config(Some(&user), std::slice::from_ref(&root)).unwrap();
        let setup = Setup {
            roots: vec![root.clone()],
            sandbox: SandboxSetting::Off,
            ..Setup::default()
        };
        let env = environment(&config, &setup).unwrap();
        assert_eq!(
            env.policy().mode(),
            Mode::Strict,
            "a project may tighten the mode"
        );
        let origins: Vec<String> = env
            .policy()
            .rules()
            .map(|(rule, origin)| format!("{:?} {:?} {origin:?}", rule.action, rule.pattern))
            .collect();
        assert_eq!(
            origins,
            [
                "Allow Some(\"make *\") User",
                "Deny Some(\"git push*\") Project"
            ]
        );
        let tools = registry(&config).unwrap();
        assert!(tools.get("web_search").is_none(), "disabled by the config");
        assert!(tools.get("read").is_some());

        // A project asking for a looser mode than the user's is not obeyed.
        write(&user, "[permissions]\nmode = \"strict\"\n");
        write(
            &root.join(PROJECT_FILE),
            "[permissions]\nmode = \"trusted\"\n",
        );
        let config = load_config(Some(&user), std::slice::from_ref(&root)).unwrap();
        let env = environment(&config, &setup).unwrap();
        assert_eq!(env.policy().mode(), Mode::Strict);
    }

    #[test]
    fn errors_name_what_is_wrong() {
        let dir = tempfile::tempdir().unwrap();
        let user = dir.path().join("config.toml");
        write(&user, "[permissions]\nmode = \"sideways\"\n");
        let err = load_config(Some(&user), &[]).unwrap_err();
        assert!(matches!(err, SetupError::Config(_)), "{err}");

        write(
            &user,
            "[[plugins]]\nname = \"x y\"\ndescription = \"d\"\ncommand = \"true\"\n",
        );
        let config = load_config(Some(&user), &[]).unwrap();
        assert!(matches!(
            registry(&config).unwrap_err(),
            SetupError::Plugin(_)
        ));

        let setup = Setup {
            roots: vec![dir.path().to_owned()],
            audit_log: Some(dir.path().join("no/such/folder/audit.log")),
            sandbox: SandboxSetting::Off,
            ..Setup::default()
        };
        let err = environment(&ConfigFile::default(), &setup).unwrap_err();
        assert!(
            err.to_string().starts_with("cannot open the audit log "),
            "{err}"
        );

        let setup = Setup {
            roots: vec![dir.path().join("missing")],
            sandbox: SandboxSetting::Off,
            ..Setup::default()
        };
        assert!(matches!(
            environment(&ConfigFile::default(), &setup).unwrap_err(),
            SetupError::Env(_)
        ));
    }
}
