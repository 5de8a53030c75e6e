//! Images a model can take: every image `read` hands on is decoded first, refused when it is
//! corrupt, and scaled down and re-encoded when it is larger than the model APIs accept.
//!
//! Why: a host keeps a tool result in the conversation, and Anthropic's API fails the whole
//! request for an image it cannot decode, one over 8000 px on a side, or one over 5 MB of
//! base64, so one bad image would fail every later turn of the session. Claude Code's `Read`
//! scales images down the same way (to 2000 px at most, re-encoded as JPEG or PNG) and tells
//! the model the original size, so that it can map coordinates back.
//!
//! What is sent:
//! - an image that decodes and fits (long side within the configured maximum, 1568 px by
//!   default: what Anthropic's API scales larger images down to; encoded within
//!   [`MAX_ENCODED_BYTES`]) goes out as it is on disk, byte for byte;
//! - a larger one is scaled so that its long side is the maximum (never up), with EXIF
//!   orientation applied, and re-encoded: a JPEG as JPEG (quality 85), anything else as PNG,
//!   or as JPEG when the PNG would pass [`MAX_ENCODED_BYTES`] (lower quality, then smaller, until
//!   it fits);
//! - an image past the decoding limits ([`MAX_INPUT_BYTES`] on disk, [`MAX_DECODED_BYTES`] of
//!   pixels, [`MAX_DIMENSION`] a side: what keeps a decompression bomb from eating memory) is
//!   refused, with a command to make a smaller copy.
//!
//! Pure: bytes in, bytes out; the caller reads the file, on the blocking pool (decoding is CPU
//! work).

use std::io::Cursor;

use image::codecs::jpeg::JpegEncoder;
use image::codecs::png::PngEncoder;
use image::imageops::FilterType;
use image::{DynamicImage, ImageDecoder, ImageError, ImageFormat, ImageReader, Limits};

/// The long side of a sent image at most, by default: Anthropic's API scales anything larger
/// down to about this (1.15 megapixels), so more pixels cost tokens and show nothing more.
pub(crate) const DEFAULT_MAX_SIDE: u32 = 1568;
/// No side of a sent image is longer (Anthropic's API refuses longer ones); a configured
/// maximum above it counts as this.
pub(crate) const API_MAX_SIDE: u32 = 8000;
/// A sent image is at most this many bytes: 5 MiB once base64-encoded, the most Anthropic's API
/// takes per image.
pub(crate) const MAX_ENCODED_BYTES: usize = 5 * 1024 * 1024 / 4 * 3;
/// Files larger than this are not decoded.
pub(crate) const MAX_INPUT_BYTES: u64 = 64 * 1024 * 1024;
/// Decoded pixels larger than this are not decoded (an 8192 x 8192 image with alpha).
pub(crate) const MAX_DECODED_BYTES: u64 = 256 * 1024 * 1024;
/// Sides longer than this are not decoded.
pub(crate) const MAX_DIMENSION: u32 = 65_535;
/// JPEG qualities tried in turn when a re-encoded image is too large.
const JPEG_QUALITIES: [u8; 3] = [85, 70, 55];

/// The image formats `read` sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    /// PNG.
    Png,
    /// JPEG.
    Jpeg,
    /// GIF (its first frame is what is checked and scaled).
    Gif,
    /// WebP.
    Webp,
}

impl Format {
    /// The format of a file, by its magic bytes.
    pub(crate) fn sniff(head: &[u8]) -> Option<Self> {
        if head.starts_with(b"\x89PNG\r\n\x1a\n") {
            Some(Self::Png)
        } else if head.starts_with(&[0xFF, 0xD8, 0xFF]) {
            Some(Self::Jpeg)
        } else if head.starts_with(b"GIF87a") || head.starts_with(b"GIF89a") {
            Some(Self::Gif)
        } else if head.len() >= 12 && &head[..4] == b"RIFF" && &head[8..12] == b"WEBP" {
            Some(Self::Webp)
        } else {
            None
        }
    }

    /// The MIME type.
    pub(crate) fn mime_type(self) -> &'static str {
        match self {
            Self::Png => "image/png",
            Self::Jpeg => "image/jpeg",
            Self::Gif => "image/gif",
            Self::Webp => "image/webp",
        }
    }

    /// The name people use.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Png => "PNG",
            Self::Jpeg => "JPEG",
            Self::Gif => "GIF",
            Self::Webp => "WebP",
        }
    }

    fn decoder_format(self) -> ImageFormat {
        match self {
            Self::Png => ImageFormat::Png,
            Self::Jpeg => ImageFormat::Jpeg,
            Self::Gif => ImageFormat::Gif,
            Self::Webp => ImageFormat::WebP,
        }
    }
}

/// An image ready to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Prepared {
    /// The bytes to send: the file's own when nothing had to change.
    pub(crate) data: Vec<u8>,
    /// Their format.
    pub(crate) format: Format,
    /// The sent image's size in pixels.
    pub(crate) width: u32,
    /// The sent image's size in pixels.
    pub(crate) height: u32,
    /// The file's image size in pixels (after its EXIF orientation).
    pub(crate) original: (u32, u32),
    /// What was done to it, if anything.
    pub(crate) change: Option<Change>,
}

/// What was done to an image before it was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Change {
    /// Scaled down (and re-encoded).
    Resized,
    /// Same size, re-encoded: the file's bytes were too many.
    Reencoded,
}

impl Prepared {
    /// What was done, in words for the result ("resized from 9000x200 to 1568x35, sent as PNG
    /// (4321 bytes)"), or `None` when the file went out as it is.
    pub(crate) fn describe(&self, max_side: u32) -> Option<String> {
        let (width, height) = self.original;
        let sent = format!("sent as {} ({} bytes)", self.format.name(), self.data.len());
        match self.change? {
            Change::Resized => Some(format!(
                "resized from {width}x{height} to {}x{} (images are sent with a long side of at \
                 most {max_side} px), {sent}",
                self.width, self.height
            )),
            Change::Reencoded => Some(format!(
                "re-encoded to keep it under {MAX_ENCODED_BYTES} bytes, {sent}"
            )),
        }
    }
}

/// Why an image cannot be sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum ImageRefusal {
    /// The decoder failed: the file is damaged, cut short, or not the image its first bytes say.
    #[error("is not a valid {format} image: {reason}")]
    Corrupt {
        /// What its first bytes say it is.
        format: &'static str,
        /// The decoder's reason.
        reason: String,
    },
    /// The file is larger than [`MAX_INPUT_BYTES`].
    #[error(
        "is a {format} file of {bytes} bytes; `read` decodes images of up to {MAX_INPUT_BYTES} \
         bytes. {SHRINK}"
    )]
    FileTooLarge {
        /// What its first bytes say it is.
        format: &'static str,
        /// Its size.
        bytes: u64,
    },
    /// Its pixels are more than [`MAX_DECODED_BYTES`], or a side passes [`MAX_DIMENSION`].
    #[error(
        "is a {format} image of {width}x{height} pixels ({decoded} bytes decoded); `read` decodes \
         images of up to {MAX_DECODED_BYTES} bytes of pixels (8192x8192 with alpha) and \
         {MAX_DIMENSION} px a side. {SHRINK}"
    )]
    TooManyPixels {
        /// What it is.
        format: &'static str,
        /// Its size in pixels.
        width: u32,
        /// Its size in pixels.
        height: u32,
        /// What its pixels would take in memory.
        decoded: u64,
    },
    /// It could not be made small enough (an encoder failed, or even a small copy was too large).
    #[error("could not be re-encoded small enough to send: {reason}")]
    Unencodable {
        /// Why.
        reason: String,
    },
}

/// The advice of a refusal for size.
const SHRINK: &str = "Make a smaller copy with a command (e.g. ImageMagick's `convert IN -resize \
                      1568x1568 OUT.png`) and read that";

/// Decodes an image, checks it, and scales it down and re-encodes it when it is larger than
/// `max_side` on its long side (clamped to 1..=[`API_MAX_SIDE`]) or than
/// [`MAX_ENCODED_BYTES`]. Returns the file's own bytes when nothing had to change.
pub(crate) fn prepare(
    data: Vec<u8>,
    format: Format,
    max_side: u32,
) -> Result<Prepared, ImageRefusal> {
    let max_side = max_side.clamp(1, API_MAX_SIDE);
    if data.len() as u64 > MAX_INPUT_BYTES {
        return Err(ImageRefusal::FileTooLarge {
            format: format.name(),
            bytes: data.len() as u64,
        });
    }
    let mut image = decode(&data, format)?;
    let original = (image.width(), image.height());
    let (width, height) = original;
    let (to_width, to_height) = fit(width, height, max_side);
    let resized = (to_width, to_height) != (width, height);
    if !resized && data.len() <= MAX_ENCODED_BYTES {
        return Ok(Prepared {
            data,
            format,
            width,
            height,
            original,
            change: None,
        });
    }
    drop(data);
    if resized {
        image = image.resize_exact(to_width, to_height, FilterType::CatmullRom);
    }
    let (data, sent_format, image) = encode_within(image, format)?;
    Ok(Prepared {
        data,
        format: sent_format,
        width: image.width(),
        height: image.height(),
        original,
        change: Some(if (image.width(), image.height()) == original {
            Change::Reencoded
        } else {
            Change::Resized
        }),
    })
}

/// The decoded image, its EXIF orientation applied, within the decoding limits.
fn decode(data: &[u8], format: Format) -> Result<DynamicImage, ImageRefusal> {
    let corrupt = |err: &ImageError| ImageRefusal::Corrupt {
        format: format.name(),
        reason: reason(err),
    };
    let mut reader = ImageReader::with_format(Cursor::new(data), format.decoder_format());
    let mut limits = Limits::default();
    limits.max_image_width = Some(MAX_DIMENSION);
    limits.max_image_height = Some(MAX_DIMENSION);
    limits.max_alloc = Some(MAX_DECODED_BYTES);
    reader.limits(limits);
    let too_large = |(width, height): (u32, u32), decoded: u64| ImageRefusal::TooManyPixels {
        format: format.name(),
        width,
        height,
        decoded,
    };
    let mut decoder = match reader.into_decoder() {
        Ok(decoder) => decoder,
        Err(err @ ImageError::Limits(_)) => {
            // The header was read (that is how the limit was found): say how large it is.
            let mut reader = ImageReader::with_format(Cursor::new(data), format.decoder_format());
            reader.no_limits();
            return Err(match reader.into_dimensions() {
                Ok((width, height)) => {
                    too_large((width, height), u64::from(width) * u64::from(height) * 4)
                }
                Err(_) => corrupt(&err),
            });
        }
        Err(err) => return Err(corrupt(&err)),
    };
    let dimensions = decoder.dimensions();
    if decoder.total_bytes() > MAX_DECODED_BYTES {
        return Err(too_large(dimensions, decoder.total_bytes()));
    }
    let orientation = decoder.orientation().ok();
    let mut image = match DynamicImage::from_decoder(decoder) {
        Ok(image) => image,
        Err(ImageError::Limits(_)) => {
            let bytes = u64::from(dimensions.0) * u64::from(dimensions.1) * 4;
            return Err(too_large(dimensions, bytes));
        }
        Err(err) => return Err(corrupt(&err)),
    };
    if let Some(orientation) = orientation {
        image.apply_orientation(orientation);
    }
    Ok(image)
}

/// The decoder's reason, without the "Format error decoding PNG:" every message starts with.
fn reason(err: &ImageError) -> String {
    let text = match err {
        ImageError::IoError(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
            String::from("the data ends early (the file is cut short)")
        }
        ImageError::Decoding(decoding) => match std::error::Error::source(decoding) {
            Some(source) => source.to_string(),
            None => decoding.to_string(),
        },
        other => other.to_string(),
    };
    let text = text.trim().trim_end_matches('.');
    if text.is_empty() {
        String::from("the decoder gave no reason")
    } else {
        text.to_owned()
    }
}

/// The size that fits `max_side` on the long side, keeping the aspect ratio (never scaled up;
/// no side below 1 px).
pub(crate) fn fit(width: u32, height: u32, max_side: u32) -> (u32, u32) {
    let long = width.max(height);
    if long <= max_side {
        return (width, height);
    }
    let scale = |side: u32| -> u32 {
        let scaled =
            (u64::from(side) * u64::from(max_side) + u64::from(long) / 2) / u64::from(long);
        u32::try_from(scaled).unwrap_or(max_side).max(1)
    };
    (scale(width), scale(height))
}

/// Encodes `image` within [`MAX_ENCODED_BYTES`]: a JPEG as JPEG, anything else as PNG first;
/// then JPEG at lower qualities; then smaller, by halves, until it fits.
fn encode_within(
    mut image: DynamicImage,
    from: Format,
) -> Result<(Vec<u8>, Format, DynamicImage), ImageRefusal> {
    loop {
        if from != Format::Jpeg {
            let png = encode_png(&image)?;
            if png.len() <= MAX_ENCODED_BYTES {
                return Ok((png, Format::Png, image));
            }
        }
        let rgb = DynamicImage::ImageRgb8(flatten(&image));
        for quality in JPEG_QUALITIES {
            let jpeg = encode_jpeg(&rgb, quality)?;
            if jpeg.len() <= MAX_ENCODED_BYTES {
                return Ok((jpeg, Format::Jpeg, rgb));
            }
        }
        let (width, height) = (image.width(), image.height());
        if width.max(height) <= 16 {
            return Err(ImageRefusal::Unencodable {
                reason: format!("even at {width}x{height} it takes over {MAX_ENCODED_BYTES} bytes"),
            });
        }
        let (width, height) = fit(width, height, width.max(height) / 2);
        image = image.resize_exact(width, height, FilterType::Triangle);
    }
}

fn encode_png(image: &DynamicImage) -> Result<Vec<u8>, ImageRefusal> {
    // PNG takes 8- and 16-bit grey and RGB(A); other pixel types are written as 8-bit RGBA.
    let mut out = Vec::new();
    let encoder = PngEncoder::new(&mut out);
    let written = match image {
        DynamicImage::ImageLuma8(_)
        | DynamicImage::ImageLumaA8(_)
        | DynamicImage::ImageRgb8(_)
        | DynamicImage::ImageRgba8(_) => image.write_with_encoder(encoder),
        _ if image.color().has_alpha() => {
            DynamicImage::ImageRgba8(image.to_rgba8()).write_with_encoder(encoder)
        }
        _ => DynamicImage::ImageRgb8(image.to_rgb8()).write_with_encoder(encoder),
    };
    written.map_err(|err| ImageRefusal::Unencodable {
        reason: err.to_string(),
    })?;
    Ok(out)
}

fn encode_jpeg(rgb: &DynamicImage, quality: u8) -> Result<Vec<u8>, ImageRefusal> {
    let mut out = Vec::new();
    rgb.write_with_encoder(JpegEncoder::new_with_quality(&mut out, quality))
        .map_err(|err| ImageRefusal::Unencodable {
            reason: err.to_string(),
        })?;
    Ok(out)
}

/// The image as 8-bit RGB, transparent parts laid over white (JPEG has no alpha; white is what
/// most viewers show behind a transparent screenshot or diagram).
fn flatten(image: &DynamicImage) -> image::RgbImage {
    if !image.color().has_alpha() {
        return image.to_rgb8();
    }
    let rgba = image.to_rgba8();
    image::RgbImage::from_fn(rgba.width(), rgba.height(), |x, y| {
        let [red, green, blue, alpha] = rgba.get_pixel(x, y).0;
        let over = |channel: u8| {
            let mixed = u16::from(channel) * u16::from(alpha) + 255 * (255 - u16::from(alpha));
            u8::try_from((mixed + 127) / 255).unwrap_or(u8::MAX)
        };
        image::Rgb([over(red), over(green), over(blue)])
    })
}

#[cfg(test)]
#[path = "images_tests.rs"]
mod tests;
