//! What the release artifacts promise about themselves (`server.json`, the README's install
//! lines): checked on every test run, since `scripts/dist-test.sh` runs only before releases.

#![expect(
    clippy::unwrap_used,
    reason = "a missing or malformed file fails the test loudly"
)]

use std::path::Path;

fn repo_file(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).unwrap()
}

fn server_json() -> serde_json::Value {
    serde_json::from_str(&repo_file("server.json")).unwrap()
}

/// The MCP Registry takes `server.json` only if it is valid against its schema.
#[test]
fn server_json_is_valid_against_the_registry_schema() {
    let schema: serde_json::Value = serde_json::from_str(&repo_file(
        "tests/data/mcp-registry-server.schema.2025-12-11.json",
    ))
    .unwrap();
    let validator = jsonschema::options()
        .should_validate_formats(true)
        .build(&schema)
        .unwrap();
    let server = server_json();
    let errors: Vec<String> = validator
        .iter_errors(&server)
        .map(|e| format!("{}: {e}", e.instance_path))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
}

/// The server and every package it lists are at the workspace's version (the registry rejects a
/// package version it cannot find, and hosts would install another build).
#[test]
fn server_json_versions_are_the_workspaces() {
    let server = server_json();
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(server["version"], version);
    let packages = server["packages"].as_array().unwrap();
    let kinds: Vec<&str> = packages
        .iter()
        .map(|p| p["registryType"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["npm", "pypi"]);
    for package in packages {
        assert_eq!(package["version"], version, "{package}");
    }
}

/// The registry checks a `PyPI` package's ownership by a `mcp-name: <name>` line in its
/// description (the wheel's is the README), and npm's by `mcpName` (`packaging/dist.py` copies
/// it from `server.json`); the README's one-liners run the packages `server.json` lists.
#[test]
fn the_readme_names_the_server_and_its_packages() {
    let server = server_json();
    let readme = repo_file("README.md");
    let name = server["name"].as_str().unwrap();
    assert!(
        readme
            .lines()
            .any(|l| l.trim() == format!("mcp-name: {name}")),
        "README.md has no line `mcp-name: {name}`"
    );
    for (kind, runner) in [("npm", "npx -y"), ("pypi", "uvx")] {
        let package = server["packages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["registryType"] == kind)
            .unwrap();
        let line = format!(
            "{runner} {} serve --root",
            package["identifier"].as_str().unwrap()
        );
        assert!(readme.contains(&line), "README.md does not show `{line}`");
    }
}
