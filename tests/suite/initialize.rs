use pretty_assertions::assert_eq;

use crate::common::Gimlet;

#[tokio::test]
async fn initialize_reports_gimlet_and_its_instructions() {
    let gimlet = Gimlet::start().await;
    let info = gimlet.client.peer_info().expect("initialized");
    let server = info.server_info.clone().expect("serverInfo");
    assert_eq!(server.name, "gimlet");
    assert_eq!(server.version, env!("CARGO_PKG_VERSION"));
    let caps = &info.capabilities;
    assert!(caps.tools.is_some() && caps.resources.is_some() && caps.logging.is_some());
    let instructions = info.instructions.clone().unwrap_or_default();
    assert!(
        instructions.contains(&gimlet.root().display().to_string()),
        "{instructions}"
    );
    gimlet.stop().await;
}

#[tokio::test]
async fn a_missing_root_stops_the_server_with_one_clear_line() {
    let data = tempfile::tempdir().unwrap();
    let missing = data.path().join("no-such-dir");
    let output = crate::common::command(data.path())
        .arg("serve")
        .arg("--root")
        .arg(&missing)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    assert!(!output.status.success());
    assert!(output.stdout.is_empty(), "nothing but protocol on stdout");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        stderr.trim_end(),
        format!(
            "gimlet: cannot use root `{0}`: `{0}` does not exist; a root must be an existing \
             directory",
            missing.display()
        )
    );
    // A file is no root either, and it is the root that is named, not a config file in it.
    let file = data.path().join("file.txt");
    std::fs::write(&file, "").unwrap();
    let output = crate::common::command(data.path())
        .arg("serve")
        .arg("--root")
        .arg(&file)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.starts_with(&format!(
            "gimlet: cannot use root `{0}`: `{0}` is not a directory",
            file.display()
        )),
        "{stderr}"
    );
}
