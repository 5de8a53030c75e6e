use image::{DynamicImage, ImageFormat, Rgb, RgbImage, Rgba, RgbaImage};
use pretty_assertions::assert_eq;

use super::{
    Change, DEFAULT_MAX_SIDE, Format, ImageRefusal, MAX_ENCODED_BYTES, Prepared, fit, prepare,
};

/// An image encoded in a format.
fn encoded(image: &DynamicImage, format: ImageFormat) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    image.write_to(&mut out, format).unwrap();
    out.into_inner()
}

/// A smooth picture (compresses well), `width` x `height`.
fn gradient(width: u32, height: u32) -> DynamicImage {
    DynamicImage::ImageRgb8(RgbImage::from_fn(width, height, |x, y| {
        Rgb([
            x.to_le_bytes()[0],
            y.to_le_bytes()[0],
            (x + y).to_le_bytes()[0],
        ])
    }))
}

/// Pixels that do not compress (a xorshift sequence).
fn noise(width: u32, height: u32) -> DynamicImage {
    let mut state = 0x9E37_79B9_7F4A_7C15_u64;
    DynamicImage::ImageRgb8(RgbImage::from_fn(width, height, |_, _| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let [a, b, c, ..] = state.to_le_bytes();
        Rgb([a, b, c])
    }))
}

/// The size of an encoded image, decoded again.
fn decoded_size(prepared: &Prepared) -> (u32, u32) {
    let image = image::load_from_memory(&prepared.data).unwrap();
    (image.width(), image.height())
}

fn refusal(data: Vec<u8>, format: Format) -> ImageRefusal {
    prepare(data, format, DEFAULT_MAX_SIDE).unwrap_err()
}

// See: issue 38, item 4 (the three files that went out whole as image/png).
#[test]
fn a_truncated_png_is_refused_as_corrupt() {
    let mut png = encoded(&gradient(64, 64), ImageFormat::Png);
    png.truncate(200);
    let err = refusal(png, Format::Png);
    let ImageRefusal::Corrupt { format, reason } = &err else {
        panic!("{err:?}");
    };
    assert_eq!(*format, "PNG");
    assert!(!reason.is_empty());
    assert!(
        err.to_string().starts_with("is not a valid PNG image: "),
        "{err}"
    );
}

#[test]
fn random_bytes_behind_a_png_header_are_refused_as_corrupt() {
    let mut data = b"\x89PNG\r\n\x1a\n".to_vec();
    let DynamicImage::ImageRgb8(random) = noise(512, 683) else {
        unreachable!()
    };
    data.extend_from_slice(&random.into_raw()[..1024 * 1024 - 8]);
    assert_eq!(data.len(), 1024 * 1024);
    let err = refusal(data, Format::Png);
    assert!(matches!(err, ImageRefusal::Corrupt { .. }), "{err:?}");
    assert!(err.to_string().contains("not a valid PNG image"), "{err}");
}

#[test]
fn a_wide_png_is_scaled_to_the_long_side_and_says_so() {
    let png = encoded(&gradient(9000, 200), ImageFormat::Png);
    let prepared = prepare(png, Format::Png, DEFAULT_MAX_SIDE).unwrap();
    assert_eq!(
        (prepared.format, prepared.width, prepared.height),
        (Format::Png, 1568, 35)
    );
    assert_eq!(prepared.original, (9000, 200));
    assert_eq!(prepared.change, Some(Change::Resized));
    assert_eq!(decoded_size(&prepared), (1568, 35));
    let said = prepared.describe(DEFAULT_MAX_SIDE).unwrap();
    assert!(
        said.starts_with("resized from 9000x200 to 1568x35 (images are sent with a long side"),
        "{said}"
    );
    assert!(said.ends_with(&format!("sent as PNG ({} bytes)", prepared.data.len())));
}

#[test]
fn a_large_jpeg_is_scaled_and_stays_a_jpeg() {
    let jpeg = encoded(&gradient(3000, 2000), ImageFormat::Jpeg);
    let prepared = prepare(jpeg, Format::Jpeg, DEFAULT_MAX_SIDE).unwrap();
    assert_eq!(
        (prepared.format, prepared.width, prepared.height),
        (Format::Jpeg, 1568, 1045)
    );
    assert_eq!(decoded_size(&prepared), (1568, 1045));
}

#[test]
fn an_image_that_fits_goes_out_byte_for_byte() {
    for (format, kind) in [
        (ImageFormat::Png, Format::Png),
        (ImageFormat::Jpeg, Format::Jpeg),
        (ImageFormat::Gif, Format::Gif),
        (ImageFormat::WebP, Format::Webp),
    ] {
        let image = DynamicImage::ImageRgba8(RgbaImage::from_pixel(40, 30, Rgba([9, 8, 7, 255])));
        let image = if format == ImageFormat::Jpeg {
            DynamicImage::ImageRgb8(image.to_rgb8())
        } else {
            image
        };
        let data = encoded(&image, format);
        assert_eq!(Format::sniff(&data), Some(kind), "{format:?}");
        let prepared = prepare(data.clone(), kind, DEFAULT_MAX_SIDE).unwrap();
        assert_eq!(
            prepared,
            Prepared {
                data,
                format: kind,
                width: 40,
                height: 30,
                original: (40, 30),
                change: None,
            }
        );
        assert_eq!(prepared.describe(DEFAULT_MAX_SIDE), None);
    }
}

#[test]
fn the_long_side_is_configurable_and_capped_by_the_apis_limit() {
    let png = encoded(&gradient(900, 300), ImageFormat::Png);
    let prepared = prepare(png.clone(), Format::Png, 300).unwrap();
    assert_eq!((prepared.width, prepared.height), (300, 100));
    // A maximum above 8000 px counts as 8000.
    let wide = encoded(&gradient(8100, 10), ImageFormat::Png);
    let prepared = prepare(wide, Format::Png, 20_000).unwrap();
    assert_eq!((prepared.width, prepared.height), (8000, 10));
}

#[test]
fn an_image_too_many_bytes_as_png_goes_out_as_a_jpeg_within_the_limit() {
    // 1500 x 1500 of noise: within the side, 6.75 MB of pixels that PNG cannot shrink.
    let png = encoded(&noise(1500, 1500), ImageFormat::Png);
    assert!(png.len() > MAX_ENCODED_BYTES);
    let prepared = prepare(png, Format::Png, DEFAULT_MAX_SIDE).unwrap();
    assert_eq!(prepared.format, Format::Jpeg);
    assert!(
        prepared.data.len() <= MAX_ENCODED_BYTES,
        "{}",
        prepared.data.len()
    );
    assert_eq!(decoded_size(&prepared), (prepared.width, prepared.height));
    let said = prepared.describe(DEFAULT_MAX_SIDE).unwrap();
    assert!(
        said.contains("sent as JPEG")
            && (said.starts_with("re-encoded") || said.starts_with("resized")),
        "{said}"
    );
}

#[test]
fn transparency_is_laid_over_white_in_a_jpeg() {
    let clear = DynamicImage::ImageRgba8(RgbaImage::from_pixel(2, 1, Rgba([0, 0, 0, 0])));
    assert_eq!(super::flatten(&clear).get_pixel(0, 0).0, [255, 255, 255]);
    let half = DynamicImage::ImageRgba8(RgbaImage::from_pixel(1, 1, Rgba([0, 0, 0, 128])));
    assert_eq!(super::flatten(&half).get_pixel(0, 0).0, [127, 127, 127]);
}

/// CRC-32 (IEEE), for patching a PNG chunk.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0_u32;
    for &byte in bytes {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// A valid 1x1 RGBA PNG whose header says `width` x `height`: a decompression bomb's shape.
fn png_claiming(width: u32, height: u32) -> Vec<u8> {
    let mut png = encoded(
        &DynamicImage::ImageRgba8(RgbaImage::new(1, 1)),
        ImageFormat::Png,
    );
    // Signature (8), IHDR length (4), "IHDR" (4), width (4), height (4), ... , CRC.
    png[16..20].copy_from_slice(&width.to_be_bytes());
    png[20..24].copy_from_slice(&height.to_be_bytes());
    let crc = crc32(&png[12..29]);
    png[29..33].copy_from_slice(&crc.to_be_bytes());
    png
}

#[test]
fn images_past_the_decoding_limits_are_refused_before_their_pixels_are_allocated() {
    let err = refusal(png_claiming(10_000, 10_000), Format::Png);
    assert_eq!(
        err,
        ImageRefusal::TooManyPixels {
            format: "PNG",
            width: 10_000,
            height: 10_000,
            decoded: 400_000_000,
        }
    );
    let text = err.to_string();
    assert!(
        text.starts_with("is a PNG image of 10000x10000 pixels (400000000 bytes decoded)"),
        "{text}"
    );
    assert!(
        text.contains("Make a smaller copy with a command"),
        "{text}"
    );
    let err = refusal(png_claiming(70_000, 1), Format::Png);
    assert!(
        matches!(
            err,
            ImageRefusal::TooManyPixels {
                width: 70_000,
                height: 1,
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn a_file_past_the_input_cap_is_refused_unread() {
    let data = vec![0_u8; usize::try_from(super::MAX_INPUT_BYTES).unwrap() + 1];
    let err = refusal(data, Format::Jpeg);
    assert!(
        matches!(err, ImageRefusal::FileTooLarge { format: "JPEG", .. }),
        "{err:?}"
    );
}

#[test]
fn fit_keeps_the_aspect_ratio_and_never_scales_up() {
    assert_eq!(fit(9000, 200, 1568), (1568, 35));
    assert_eq!(fit(200, 9000, 1568), (35, 1568));
    assert_eq!(fit(1568, 1568, 1568), (1568, 1568));
    assert_eq!(fit(100, 50, 1568), (100, 50));
    assert_eq!(fit(100_000, 1, 1568), (1568, 1));
    assert_eq!(fit(u32::MAX, u32::MAX - 1, 8000), (8000, 8000));
}
