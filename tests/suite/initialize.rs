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
