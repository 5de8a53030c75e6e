use std::time::{Duration, Instant};

use insta::assert_snapshot;
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::testutil::TestWorkspace;
use crate::{Content, ToolError};

#[tokio::test]
async fn reads_numbered_lines_with_a_footer() {
    let ws = TestWorkspace::new();
    ws.write("src/lib.rs", "fn one() {}\n\nfn two() {}\n");
    assert_snapshot!(ws.text("read", json!({"path": "src/lib.rs"})).await, @"
         1	fn one() {}
         2	
         3	fn two() {}

    [src/lib.rs: lines 1-3 of 3, hash 114fa6375e046658]
    ");
}

#[tokio::test]
async fn offset_and_limit_page_through_a_file_and_say_how_to_continue() {
    let ws = TestWorkspace::new();
    let body: String = (1..=10).map(|i| format!("line {i}\n")).collect();
    ws.write("ten.txt", &body);
    let text = ws
        .text("read", json!({"path": "ten.txt", "offset": 4, "limit": 3}))
        .await;
    assert_snapshot!(text, @"
         4	line 4
         5	line 5
         6	line 6

    [ten.txt: lines 4-6 of 10, hash e71d970d34a50031; use offset=7 to read on]
    ");
    let err = ws
        .error("read", json!({"path": "ten.txt", "offset": 11}))
        .await;
    assert_eq!(
        err,
        "`offset` 11 is past the end of `ten.txt`, which has 10 lines; use an offset from 1 to 10"
    );
    let err = ws
        .error("read", json!({"path": "ten.txt", "limit": 0}))
        .await;
    assert!(err.contains("`limit` must be at least 1"), "{err}");
    // Offset 0 is read as "from the start".
    assert!(
        ws.text("read", json!({"path": "ten.txt", "offset": 0}))
            .await
            .starts_with("     1\tline 1")
    );
    // Quoted and whole-float numbers, as models send them, mean the same page.
    let quoted = ws
        .text(
            "read",
            json!({"path": "ten.txt", "offset": "4", "limit": 3.0}),
        )
        .await;
    assert_eq!(quoted, text);
}

#[tokio::test]
async fn the_default_page_and_its_footer_fit_the_line_limit() {
    // See: issue 38, a host that keeps the first 2000 lines of a result.
    let ws = TestWorkspace::new();
    let body: String = (1..=2500).map(|i| format!("{i}\n")).collect();
    ws.write("long.txt", &body);
    let text = ws.text("read", json!({"path": "long.txt"})).await;
    assert!(text.contains("  1997\t1997\n"), "line 1997 is shown");
    assert!(!text.contains("  1998\t1998"), "line 1998 is not");
    assert!(
        text.ends_with(
            "[long.txt: lines 1-1997 of 2500, hash 8e1d4d46225eda9b; use offset=1998 to read on]"
        ),
        "{}",
        &text[text.len() - 120..]
    );
    assert_eq!(text.lines().count(), 1999);
    // A file of 1997 lines comes whole, with its footer and a note, in 2000 lines.
    let mut bad: Vec<u8> = (1..1997)
        .flat_map(|i| format!("{i}\n").into_bytes())
        .collect();
    bad.extend_from_slice(b"\xff\n");
    ws.write("bad.txt", &bad);
    let text = ws.text("read", json!({"path": "bad.txt"})).await;
    assert!(text.contains("lines 1-1997 of 1997"), "{text}");
    assert_eq!(text.lines().count(), 2000);
    // Under a larger line limit the default page is 2000 lines.
    let ws = TestWorkspace::custom(|b| {
        b.limits(crate::OutputLimits {
            max_lines: 5000,
            ..crate::OutputLimits::DEFAULT
        })
    });
    ws.write("long.txt", &body);
    let text = ws.text("read", json!({"path": "long.txt"})).await;
    assert!(text.ends_with("use offset=2001 to read on]"), "{text}");
}

#[tokio::test]
async fn byte_limit_truncates_and_gives_the_continuing_offset() {
    let ws = TestWorkspace::new();
    let body: String = (1..=2000)
        .map(|i| format!("{i:04} {}\n", "x".repeat(95)))
        .collect();
    ws.write("wide.txt", &body);
    let out = ws
        .call("read", json!({"path": "wide.txt", "offset": 10}))
        .await
        .unwrap();
    let text = out.joined_text();
    let truncation = out.truncated.expect("over 45 KiB");
    let next = 10 + truncation.cut.head_lines;
    assert!(
        text.ends_with(&format!("Use offset={next} to continue.]")),
        "{}",
        &text[text.len() - 200..]
    );
    // The notice counts in the file's lines, and gives the file's length (the footer that
    // said it was cut).
    let notice = text.lines().last().unwrap();
    assert!(
        notice.starts_with(&format!(
            "[Output truncated: showing lines 10-{} of 2000 (45 KiB limit).",
            next - 1
        )),
        "{notice}"
    );
    let last_shown = text.lines().rev().nth(2).unwrap();
    assert!(
        last_shown.starts_with(&format!("{:>6}\t{:04} ", next - 1, next - 1)),
        "{last_shown}"
    );
    assert!(text.len() <= 45 * 1024);
}

#[tokio::test]
async fn long_lines_are_cut_with_a_marker_and_crlf_is_not_shown() {
    let ws = TestWorkspace::new();
    ws.write("wide.txt", format!("{}\r\nshort\r\n", "é".repeat(3000)));
    let text = ws.text("read", json!({"path": "wide.txt"})).await;
    let first = text.lines().next().unwrap();
    assert!(
        first.ends_with("... [line cut: 6002 bytes in all]"),
        "{}",
        &first[first.len() - 60..]
    );
    assert_eq!(first.chars().filter(|&c| c == 'é').count(), 2000);
    assert!(text.contains("     2\tshort\n"));
    assert!(!text.contains('\r'));
}

#[tokio::test]
async fn empty_and_unterminated_files() {
    let ws = TestWorkspace::new();
    ws.write("empty.txt", "");
    ws.write("no_newline.txt", "a\nb");
    assert_snapshot!(ws.text("read", json!({"path": "empty.txt"})).await, @"[empty.txt: empty file (0 bytes), hash e3b0c44298fc1c14]");
    let text = ws.text("read", json!({"path": "no_newline.txt"})).await;
    assert!(
        text.starts_with("     1\ta\n     2\tb\n\n[no_newline.txt: lines 1-2 of 2"),
        "{text}"
    );
}

#[tokio::test]
async fn directories_binaries_and_fifos_get_clear_errors() {
    let ws = TestWorkspace::new();
    ws.mkdir("dir");
    ws.write("prog", b"\x7fELF\x02\x01\x01\0\0\0");
    ws.write("data.bin", b"abc\0def");
    let fifo = ws.root().join("pipe");
    crate::testutil::make_fifo(&fifo);
    assert_eq!(
        ws.error("read", json!({"path": "dir"})).await,
        "`dir` is a directory; use `ls` to list it"
    );
    let err = ws.error("read", json!({"path": "prog"})).await;
    assert!(
        err.contains("is a binary file (an ELF executable, 10 bytes)"),
        "{err}"
    );
    let err = ws.error("read", json!({"path": "data.bin"})).await;
    assert!(err.contains("binary file (it contains NUL bytes"), "{err}");
    let started = Instant::now();
    let err = ws.error("read", json!({"path": "pipe"})).await;
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(
        err,
        "`pipe` is a FIFO, not a regular file; gimlet only reads and writes regular files"
    );
    let err = ws.error("read", json!({"path": "missing.txt"})).await;
    assert_eq!(err, "`missing.txt` does not exist");
    ws.write("notes.txt", "");
    let err = ws.error("read", json!({"path": "notes.md"})).await;
    assert_eq!(err, "`notes.md` does not exist; did you mean `notes.txt`?");
}

/// An image encoded as `format`.
fn encoded(image: &image::DynamicImage, format: image::ImageFormat) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    image.write_to(&mut out, format).unwrap();
    out.into_inner()
}

/// A smooth RGB picture.
fn picture(width: u32, height: u32) -> image::DynamicImage {
    image::DynamicImage::ImageRgb8(image::RgbImage::from_fn(width, height, |x, y| {
        image::Rgb([(x % 251).to_le_bytes()[0], (y % 241).to_le_bytes()[0], 90])
    }))
}

/// The one image block of an output: its bytes decoded, and its MIME type.
fn sent_image(out: &crate::ToolOutput) -> (image::DynamicImage, String) {
    let images: Vec<_> = out
        .content
        .iter()
        .filter_map(|block| match block {
            Content::Image { data, mime_type } => Some((data, mime_type)),
            _ => None,
        })
        .collect();
    assert_eq!(images.len(), 1, "{:?}", out.joined_text());
    let (data, mime_type) = images[0];
    (image::load_from_memory(data).unwrap(), mime_type.clone())
}

#[tokio::test]
async fn images_come_back_as_image_content() {
    let ws = TestWorkspace::new();
    let png = encoded(&picture(3, 2), image::ImageFormat::Png);
    ws.write("pixel.png", &png);
    let out = ws.call("read", json!({"path": "pixel.png"})).await.unwrap();
    match &out.content[0] {
        Content::Image { data, mime_type } => {
            assert_eq!(mime_type, "image/png");
            // A small valid image goes out byte for byte: no needless re-encoding.
            assert_eq!(data.as_slice(), png.as_slice());
        }
        other => panic!("expected an image, got {other:?}"),
    }
    let caption = out.joined_text();
    assert!(
        caption.starts_with(&format!(
            "[pixel.png: PNG image, 3x2, {} bytes, hash ",
            png.len()
        )),
        "{caption}"
    );
    assert!(!caption.contains("resized"), "{caption}");
}

// See: issue 38, item 4: three files that went out whole as `image/png` and would fail every
// later turn of the session.
#[tokio::test]
async fn corrupt_images_are_refused_saying_what_the_file_is() {
    let ws = TestWorkspace::new();
    let mut cut = encoded(&picture(64, 64), image::ImageFormat::Png);
    cut.truncate(200);
    ws.write("shot.png", &cut);
    let mut random = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut state = 0x2545_F491_4F6C_DD1D_u64;
    while random.len() < 1024 * 1024 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        random.extend_from_slice(&state.to_le_bytes());
    }
    random.truncate(1024 * 1024);
    ws.write("noise.png", &random);
    let err = ws.error("read", json!({"path": "shot.png"})).await;
    assert!(
        err.starts_with("`shot.png` is not a valid PNG image: "),
        "{err}"
    );
    assert!(err.ends_with("; it is 200 bytes"), "{err}");
    let err = ws.error("read", json!({"path": "noise.png"})).await;
    assert!(
        err.starts_with("`noise.png` is not a valid PNG image: ")
            && err.ends_with("; it is 1048576 bytes"),
        "{err}"
    );
    // Nothing was recorded as read.
    assert!(
        ws.session
            .files()
            .get(&ws.root().join("shot.png"))
            .is_none()
    );
}

#[tokio::test]
async fn a_wide_image_is_scaled_down_and_the_result_says_how() {
    let ws = TestWorkspace::new();
    ws.write(
        "wide.png",
        encoded(&picture(9000, 200), image::ImageFormat::Png),
    );
    let out = ws.call("read", json!({"path": "wide.png"})).await.unwrap();
    let (sent, mime_type) = sent_image(&out);
    assert_eq!(
        (sent.width(), sent.height(), mime_type.as_str()),
        (1568, 35, "image/png")
    );
    let caption = out.joined_text();
    assert!(
        caption.contains("PNG image, 9000x200, ")
            && caption.contains("; resized from 9000x200 to 1568x35"),
        "{caption}"
    );
    let structured = out.structured.unwrap();
    assert_eq!(
        (
            &structured["width"],
            &structured["sent_width"],
            &structured["sent_height"]
        ),
        (&json!(9000), &json!(1568), &json!(35))
    );
}

#[tokio::test]
async fn a_large_photo_is_scaled_and_stays_a_jpeg() {
    let ws = TestWorkspace::new();
    ws.write(
        "photo.jpg",
        encoded(&picture(2400, 1800), image::ImageFormat::Jpeg),
    );
    let out = ws.call("read", json!({"path": "photo.jpg"})).await.unwrap();
    let (sent, mime_type) = sent_image(&out);
    assert_eq!(
        (sent.width(), sent.height(), mime_type.as_str()),
        (1568, 1176, "image/jpeg")
    );
}

#[tokio::test]
async fn a_15_mb_screenshot_is_scaled_rather_than_refused() {
    // Noise does not compress: the PNG is about 15 MB (the old limit refused anything over 5
    // MiB), and even scaled it is too many bytes as PNG, so it goes out as a JPEG.
    let ws = TestWorkspace::new();
    let mut state = 0x9E37_79B9_7F4A_7C15_u64;
    let noise = image::DynamicImage::ImageRgb8(image::RgbImage::from_fn(2600, 1950, |_, _| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let [r, g, b, ..] = state.to_le_bytes();
        image::Rgb([r, g, b])
    }));
    let png = encoded(&noise, image::ImageFormat::Png);
    assert!(png.len() > 15_000_000, "{}", png.len());
    ws.write("screenshot.png", &png);
    let out = ws
        .call("read", json!({"path": "screenshot.png"}))
        .await
        .unwrap();
    let (sent, mime_type) = sent_image(&out);
    assert_eq!(
        (sent.width(), sent.height(), mime_type.as_str()),
        (1568, 1176, "image/jpeg")
    );
    let caption = out.joined_text();
    assert!(
        caption.contains("resized from 2600x1950 to 1568x1176"),
        "{caption}"
    );
    assert!(caption.contains("sent as JPEG"), "{caption}");
}

#[tokio::test]
async fn the_long_side_of_sent_images_is_configurable() {
    let ws = TestWorkspace::custom(|env| {
        let mut settings = crate::config::Settings::default();
        settings.read.image_max_side = Some(100);
        env.settings(settings)
    });
    ws.write(
        "small.png",
        encoded(&picture(300, 150), image::ImageFormat::Png),
    );
    let out = ws.call("read", json!({"path": "small.png"})).await.unwrap();
    let (sent, _) = sent_image(&out);
    assert_eq!((sent.width(), sent.height()), (100, 50));
    assert!(out.joined_text().contains("a long side of at most 100 px"));
}

#[tokio::test]
async fn invalid_utf8_is_shown_with_a_note() {
    let ws = TestWorkspace::new();
    ws.write("latin1.txt", b"caf\xe9\n");
    let text = ws.text("read", json!({"path": "latin1.txt"})).await;
    assert!(text.starts_with("     1\tcaf\u{fffd}\n"), "{text}");
    assert!(
        text.contains("not valid UTF-8 (first bad byte at offset 3)"),
        "{text}"
    );
}

#[tokio::test]
async fn reading_records_the_file_state() {
    let ws = TestWorkspace::new();
    let path = ws.write("a.txt", "hello\n");
    ws.text("read", json!({"path": "a.txt", "limit": 1})).await;
    let stamp = ws.session.files().get(&path).expect("recorded");
    assert_eq!(stamp.hash, crate::fs::ContentHash::of(b"hello\n"));
    assert_eq!(stamp.size, 6);
}

#[tokio::test]
async fn files_around_the_first_read_size_are_read_whole() {
    // The first read takes up to 8 KiB and, for a smaller file, one byte more than its size,
    // to see the end at once; every size around those bounds must come out whole.
    let ws = TestWorkspace::new();
    for size in [0, 1, 2, 8190, 8191, 8192, 8193, 8194, 70_000] {
        let body: Vec<u8> = b"abcdefghi\n".iter().copied().cycle().take(size).collect();
        let name = format!("f{size}.txt");
        let path = ws.write(&name, std::str::from_utf8(&body).unwrap());
        let text = ws.text("read", json!({"path": name})).await;
        let lines = body
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .count();
        if size > 0 {
            assert!(
                text.contains(&format!("of {lines}, hash")),
                "{size}: {text}"
            );
        }
        let stamp = ws.session.files().get(&path).expect("recorded");
        assert_eq!(stamp.hash, crate::fs::ContentHash::of(&body), "size {size}");
        assert_eq!(stamp.size, u64::try_from(size).unwrap());
    }
}

#[tokio::test]
async fn a_file_whose_size_is_unknown_is_read_to_its_end() {
    // Kernel files report a size of 0 and have content.
    let ws = TestWorkspace::new();
    let approve = std::sync::Arc::new(crate::ScriptedAsker::approving([crate::Approval::Once]));
    let output = ws
        .call_with(
            &ws.ctx_with(approve),
            "read",
            json!({"path": "/proc/version"}),
        )
        .await
        .unwrap();
    let text = output.joined_text();
    assert!(text.contains("     1\tLinux version"), "{text}");
    assert!(text.contains("lines 1-1 of 1"), "{text}");
}

#[tokio::test]
async fn paths_outside_the_roots_are_refused_without_an_asker() {
    let ws = TestWorkspace::new();
    let secret = ws.outside().join("secret.txt");
    std::fs::write(&secret, "secret").unwrap();
    ws.symlink(&secret, "link.txt");
    for path in [
        secret.display().to_string(),
        "link.txt".into(),
        "../x".into(),
    ] {
        let err = ws.call("read", json!({"path": path})).await.unwrap_err();
        assert!(
            matches!(err, ToolError::PermissionDenied(_)),
            "{path}: {err}"
        );
        assert!(
            err.to_string().contains("outside the allowed folders"),
            "{err}"
        );
    }
    let err = ws
        .error("read", json!({"path": "/proc/self/root/etc/passwd"}))
        .await;
    assert!(err.contains("magic link"), "{err}");
    let err = ws.error("read", json!({"path": "a\u{0}b"})).await;
    assert!(err.contains("NUL byte"), "{err}");
}

#[tokio::test(flavor = "current_thread")]
async fn small_cached_text_files_are_read_without_waiting_and_the_rest_where_it_may_wait() {
    let ws = TestWorkspace::new();
    ws.write("small.txt", "one\ntwo\n");
    ws.write("big.txt", "line\n".repeat(5000));
    ws.write("a.ipynb", "not a notebook\n");
    std::fs::write(ws.root().join("dot.png"), b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR").unwrap();
    let ctx = ws.ctx();
    for path in ["small.txt", "big.txt", "a.ipynb", "dot.png"] {
        ctx.resolve(path).unwrap();
        let args = super::ReadArgs {
            path: path.to_owned(),
            offset: None,
            limit: None,
        };
        let attempt = crate::fs::nowait::attempt(|| super::read_blocking(&args, &ctx));
        match path {
            "small.txt" => {
                let text = attempt.unwrap().joined_text();
                assert!(text.starts_with("     1\tone\n     2\ttwo\n"), "{text}");
            }
            // Past the first read, a notebook or an image: left to the blocking pool.
            _ => {
                let err = attempt.unwrap_err().to_string();
                assert!(err.contains("not in the kernel's cache"), "{path}: {err}");
            }
        }
    }
    // The pipeline reads each one whole all the same.
    let text = ws.text("read", json!({"path": "big.txt"})).await;
    assert!(text.contains("  1997\tline\n"), "{text}");
    let text = ws.text("read", json!({"path": "a.ipynb"})).await;
    assert!(text.contains("     1\tnot a notebook\n"), "{text}");
}

#[test]
fn a_large_page_grows_at_once_past_the_allocators_mapping_ceiling() {
    use super::{LARGE_FROM, LARGE_TEXT, reserve};
    // Small texts grow as usual.
    let mut small = String::with_capacity(16);
    reserve(&mut small, 1000);
    assert!(small.capacity() < LARGE_FROM);
    // Past LARGE_FROM, one reservation over 32 MiB, and nothing more until it is full.
    let mut large = "x".repeat(LARGE_FROM);
    reserve(&mut large, 100);
    assert!(large.capacity() >= LARGE_TEXT, "{}", large.capacity());
    const { assert!(LARGE_TEXT > 32 << 20) };
    let capacity = large.capacity();
    large.push_str(&"y".repeat(1 << 20));
    reserve(&mut large, 100);
    assert_eq!(large.capacity(), capacity);
}

#[tokio::test]
async fn a_page_over_a_mebibyte_reads_whole_and_exact() {
    let ws = TestWorkspace::custom(|env| {
        env.limits(crate::OutputLimits {
            max_lines: 100_000,
            max_bytes: 8 << 20,
            ..crate::OutputLimits::DEFAULT
        })
    });
    let body: String = (1..=40_000)
        .map(|i| format!("line number {i:08}\n"))
        .collect();
    ws.write("big.txt", &body);
    let text = ws
        .text("read", json!({"path": "big.txt", "limit": 40_000}))
        .await;
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "     1\tline number 00000001");
    assert_eq!(lines[39_999], " 40000\tline number 00040000");
    assert!(lines[40_001].starts_with("[big.txt: lines 1-40000 of 40000"));
}

#[test]
fn line_numbers_are_written_as_cat_n_writes_them() {
    for number in [
        0,
        1,
        9,
        10,
        99_999,
        999_999,
        1_000_000,
        123_456_789,
        usize::MAX,
    ] {
        let mut text = String::from("x");
        super::push_number(&mut text, number);
        assert_eq!(text, format!("x{number:>6}\t"));
    }
}
