use pretty_assertions::assert_eq;
use serde_json::json;

use crate::common::{Gimlet, err_text, ok_text, slashed};

#[tokio::test]
async fn read_and_ls_through_mcp() {
    let gimlet = Gimlet::start().await;
    gimlet.write("src/main.rs", "fn main() {\n    println!(\"hi\");\n}\n");
    gimlet.write("README.md", "# demo\n");
    let result = gimlet.call("read", json!({"path": "src/main.rs"})).await;
    let text = ok_text(&result);
    assert!(
        text.starts_with("     1\tfn main() {\n     2\t    println!(\"hi\");\n     3\t}\n"),
        "{text}"
    );
    let structured = result.structured_content.unwrap();
    assert_eq!(structured["total_lines"], 3);
    assert_eq!(slashed(structured["path"].as_str().unwrap()), "src/main.rs");
    let listing = slashed(&ok_text(&gimlet.call("ls", json!({})).await));
    assert_eq!(listing, "./\n  README.md\n  src/\n    main.rs\n");
    gimlet.stop().await;
}

// See: issue 38, item 4: a valid 9000 x 200 PNG went out whole, and Anthropic's API refuses
// an image over 8000 px on a side (and every later request of the session with it).
#[tokio::test]
async fn a_wide_image_reaches_the_client_scaled_and_a_corrupt_one_is_refused() {
    use base64::Engine as _;
    let gimlet = Gimlet::start().await;
    let wide = image::DynamicImage::ImageRgb8(image::RgbImage::from_fn(9000, 200, |x, y| {
        image::Rgb([x.to_le_bytes()[0], y.to_le_bytes()[0], 0])
    }));
    let mut png = std::io::Cursor::new(Vec::new());
    wide.write_to(&mut png, image::ImageFormat::Png).unwrap();
    let png = png.into_inner();
    gimlet.write("wide.png", &png);
    gimlet.write("cut.png", &png[..200]);
    let result = gimlet.call("read", json!({"path": "wide.png"})).await;
    let caption = ok_text(&result);
    assert!(
        caption.contains("resized from 9000x200 to 1568x35"),
        "{caption}"
    );
    let images: Vec<_> = result
        .content
        .iter()
        .filter_map(|block| block.as_image())
        .collect();
    assert_eq!(images.len(), 1);
    assert_eq!(images[0].mime_type, "image/png");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(&images[0].data)
        .unwrap();
    let sent = image::load_from_memory(&bytes).unwrap();
    assert_eq!((sent.width(), sent.height()), (1568, 35));
    let text = err_text(&gimlet.call("read", json!({"path": "cut.png"})).await);
    assert!(
        text.contains("`cut.png` is not a valid PNG image: ")
            && text.ends_with("; it is 200 bytes"),
        "{text}"
    );
    gimlet.stop().await;
}

#[tokio::test]
async fn bad_arguments_are_tool_errors_naming_the_field() {
    let gimlet = Gimlet::start().await;
    let text = err_text(&gimlet.call("read", json!({"path": 42})).await);
    assert!(
        text.contains("field `path`: invalid type: integer `42`, expected a string"),
        "{text}"
    );
    let text = err_text(&gimlet.call("read", json!({})).await);
    assert!(text.contains("missing field `path`"), "{text}");
    let text = err_text(&gimlet.call("read", json!({"file_path": "x"})).await);
    assert!(text.contains("unknown field `file_path`"), "{text}");
    gimlet.stop().await;
}

#[tokio::test]
async fn unknown_tools_are_json_rpc_errors() {
    let gimlet = Gimlet::start().await;
    let err = gimlet.try_call("nope", json!({})).await.unwrap_err();
    let message = err.to_string();
    assert!(message.contains("unknown tool `nope`"), "{message}");
    assert!(message.contains("-32602"), "{message}");
    // The server is still there.
    gimlet.write("a.txt", "a\n");
    ok_text(&gimlet.call("read", json!({"path": "a.txt"})).await);
    gimlet.stop().await;
}

#[tokio::test]
async fn paths_outside_the_root_are_refused_with_a_way_forward() {
    let gimlet = Gimlet::start().await;
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret.txt");
    std::fs::write(&secret, "secret").unwrap();
    let paths = vec![secret.display().to_string(), "../../etc/passwd".to_owned()];
    // Links out on Windows are tried in windows.rs.
    #[cfg(unix)]
    let paths = {
        std::os::unix::fs::symlink(&secret, gimlet.root().join("link")).unwrap();
        [paths, vec!["link".to_owned()]].concat()
    };
    for path in paths {
        let text = err_text(&gimlet.call("read", json!({"path": path})).await);
        assert!(text.contains("outside the allowed folders"), "{text}");
        assert!(text.contains("--root"), "{text}");
        assert!(!text.contains("secret\n"), "{text}");
    }
    let text = err_text(&gimlet.call("ls", json!({"path": outside.path()})).await);
    assert!(text.contains("permission denied"), "{text}");
    gimlet.stop().await;
}
