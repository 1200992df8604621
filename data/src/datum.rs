//! One record of a Caffe store (a serialized `Datum`) read into an
//! image of known shape: raw bytes, float values, or an encoded JPEG or
//! PNG decoded as Caffe's OpenCV decodes it (channels in BGR order).

use blob_proto::Datum;
use prost::Message;

/// The values of an [`Example`], as the record stored them.
#[derive(Clone, Debug, PartialEq)]
pub enum Pixels {
    /// `data`: bytes, read as unsigned (Caffe's `uint8_t` cast).
    Bytes(Vec<u8>),
    /// `float_data`.
    Floats(Vec<f32>),
}

/// A record decoded: channels x height x width values in Caffe's C-H-W
/// order, and its label.
#[derive(Clone, Debug, PartialEq)]
pub struct Example {
    /// Channels (1 gray, 3 BGR, 4 BGRA for a decoded image).
    pub channels: usize,
    /// Rows.
    pub height: usize,
    /// Columns.
    pub width: usize,
    /// `channels * height * width` values.
    pub pixels: Pixels,
    /// `label` (0 where the record has none, as Caffe reads it).
    pub label: i32,
}

/// How an encoded image's channels are taken (`transform_param`'s
/// `force_color` / `force_gray`; OpenCV's `imdecode` flags).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ColorMode {
    /// As stored (`IMREAD_UNCHANGED`): gray 1 channel, colour 3 (BGR),
    /// with alpha 4 (BGRA).
    #[default]
    AsStored,
    /// Always 3 channels, BGR (`force_color`).
    Color,
    /// Always 1 channel (`force_gray`).
    Gray,
}

/// The most values one raw record may declare (its bytes must be in the
/// record too): a 16384 x 16384 colour image.
pub(crate) const MOST_VALUES: usize = 3 << 28;

/// The widest and tallest encoded image decoded: an image header
/// claiming more is refused before its pixels are allocated.
pub(crate) const MOST_SIDE: u32 = 16384;

/// The most memory one encoded image may decode into (the decoder's
/// buffers included): 256 MB, a 64-megapixel photo in colour.
const MOST_IMAGE_BYTES: u64 = 256 << 20;

/// Decodes a serialized `Datum` (Caffe's `Datum::ParseFromString`, then
/// `DecodeDatumToCVMat` when it is encoded); the error says what is
/// wrong with it.
///
/// ```
/// use blob_data::{ColorMode, Pixels, decode_datum};
/// use prost::Message;
/// let d = blob_proto::Datum {
///     channels: Some(1), height: Some(2), width: Some(2),
///     data: Some(vec![0, 64, 128, 255]), label: Some(7), ..Default::default()
/// };
/// let e = decode_datum(&d.encode_to_vec(), ColorMode::AsStored)?;
/// assert_eq!((e.channels, e.height, e.width, e.label), (1, 2, 2, 7));
/// assert_eq!(e.pixels, Pixels::Bytes(vec![0, 64, 128, 255]));
/// let short = blob_proto::Datum { data: Some(vec![1, 2, 3]), ..d };
/// let err = decode_datum(&short.encode_to_vec(), ColorMode::AsStored).unwrap_err();
/// assert_eq!(err, "1 x 2 x 2 = 4 values declared but 3 bytes of data stored");
/// # Ok::<(), String>(())
/// ```
pub fn decode_datum(bytes: &[u8], mode: ColorMode) -> Result<Example, String> {
    let datum = Datum::decode(bytes).map_err(|e| format!("not a Caffe Datum record: {e}"))?;
    datum_example(datum, mode)
}

/// A decoded `Datum`'s image (decoding it where it is encoded).
pub(crate) fn datum_example(datum: Datum, mode: ColorMode) -> Result<Example, String> {
    let label = datum.label.unwrap_or(0);
    if datum.encoded == Some(true) {
        let data = datum.data.unwrap_or_default();
        return decode_image(&data, mode).map(|(channels, height, width, pixels)| Example {
            channels,
            height,
            width,
            pixels: Pixels::Bytes(pixels),
            label,
        });
    }
    let dim = |name: &str, v: Option<i32>| -> Result<usize, String> {
        let v = v.unwrap_or(0);
        usize::try_from(v).map_err(|_| format!("{name} {v} is negative"))
    };
    let channels = dim("channels", datum.channels)?;
    let height = dim("height", datum.height)?;
    let width = dim("width", datum.width)?;
    if channels == 0 {
        // Caffe: CHECK_GT(datum_channels, 0).
        return Err("a record with 0 channels (Caffe requires at least 1)".into());
    }
    if height == 0 || width == 0 {
        return Err(format!(
            "a record of {channels} x {height} x {width}: an image with no pixels"
        ));
    }
    let count = channels
        .checked_mul(height)
        .and_then(|n| n.checked_mul(width))
        .filter(|&n| n <= MOST_VALUES)
        .ok_or_else(|| {
            format!("{channels} x {height} x {width} values is more than a record may hold")
        })?;
    let declared = format!("{channels} x {height} x {width} = {count} values declared");
    let pixels = match datum.data {
        Some(data) if !data.is_empty() => {
            if data.len() != count {
                return Err(format!(
                    "{declared} but {} bytes of data stored",
                    data.len()
                ));
            }
            Pixels::Bytes(data)
        }
        _ => {
            if datum.float_data.len() != count {
                return Err(format!(
                    "{declared} but {} float_data values stored",
                    datum.float_data.len()
                ));
            }
            Pixels::Floats(datum.float_data)
        }
    };
    Ok(Example {
        channels,
        height,
        width,
        pixels,
        label,
    })
}

/// Decodes a JPEG or PNG into C-H-W bytes with OpenCV's channel order
/// (B, G, R, A) and OpenCV's gray weights, as Caffe's `imdecode` gives
/// them: `(channels, height, width, bytes)`.
pub(crate) fn decode_image(
    data: &[u8],
    mode: ColorMode,
) -> Result<(usize, usize, usize, Vec<u8>), String> {
    use image::{DynamicImage, ImageReader};
    let reader = ImageReader::new(std::io::Cursor::new(data))
        .with_guessed_format()
        .map_err(|e| format!("an encoded image that cannot be read: {e}"))?;
    let Some(format) = reader.format() else {
        return Err(format!(
            "an encoded image of no format read here ({} bytes; JPEG and PNG are)",
            data.len()
        ));
    };
    let mut limits = image::Limits::default();
    limits.max_image_width = Some(MOST_SIDE);
    limits.max_image_height = Some(MOST_SIDE);
    limits.max_alloc = Some(MOST_IMAGE_BYTES);
    let mut reader = reader;
    reader.limits(limits);
    let decoded = reader.decode().map_err(|e| match e {
        image::ImageError::Limits(_) => format!(
            "an encoded {format:?} image larger than a record may hold ({MOST_SIDE} pixels a side, {} MB decoded)",
            MOST_IMAGE_BYTES >> 20
        ),
        e => format!("an encoded {format:?} image that cannot be decoded: {e}"),
    })?;
    let (w, h) = (decoded.width(), decoded.height());
    let (width, height) = (w as usize, h as usize);
    let plane = width * height;
    let stored_channels = match &decoded {
        DynamicImage::ImageLuma8(_) | DynamicImage::ImageLuma16(_) => 1,
        DynamicImage::ImageLumaA8(_) | DynamicImage::ImageLumaA16(_) => 2,
        DynamicImage::ImageRgb8(_) | DynamicImage::ImageRgb16(_) => 3,
        _ => 4,
    };
    if !matches!(
        decoded,
        DynamicImage::ImageLuma8(_)
            | DynamicImage::ImageLumaA8(_)
            | DynamicImage::ImageRgb8(_)
            | DynamicImage::ImageRgba8(_)
    ) {
        return Err(format!(
            "an encoded {format:?} image of {:?} samples: Caffe's transformer takes 8-bit images",
            decoded.color()
        ));
    }
    let channels = match mode {
        ColorMode::Color => 3,
        ColorMode::Gray => 1,
        // OpenCV has no gray + alpha: IMREAD_UNCHANGED gives 4 channels.
        ColorMode::AsStored if stored_channels == 2 => 4,
        ColorMode::AsStored => stored_channels,
    };
    let mut out = vec![0u8; channels * plane];
    // 8-bit samples, interleaved: gray, gray + alpha, RGB or RGBA.
    let samples = decoded.as_bytes();
    for (i, px) in samples.chunks_exact(stored_channels).enumerate() {
        let (r, g, b, a) = match *px {
            [v] => (v, v, v, 255),
            [v, a] => (v, v, v, a),
            [r, g, b] => (r, g, b, 255),
            [r, g, b, a, ..] => (r, g, b, a),
            [] => unreachable!("chunks are never empty"),
        };
        match channels {
            1 if stored_channels <= 2 => out[i] = r,
            1 => out[i] = opencv_gray(r, g, b),
            _ => {
                out[i] = b;
                out[plane + i] = g;
                out[2 * plane + i] = r;
                if channels == 4 {
                    out[3 * plane + i] = a;
                }
            }
        }
    }
    Ok((channels, height, width, out))
}

/// OpenCV's 8-bit `RGB2GRAY`: 0.299 R + 0.587 G + 0.114 B in 14-bit fixed
/// point, rounded.
fn opencv_gray(r: u8, g: u8, b: u8) -> u8 {
    const SHIFT: u32 = 14;
    let y = 4899 * u32::from(r) + 9617 * u32::from(g) + 1868 * u32::from(b) + (1 << (SHIFT - 1));
    (y >> SHIFT) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png(img: image::DynamicImage) -> Vec<u8> {
        let mut bytes = Vec::new();
        img.write_to(
            &mut std::io::Cursor::new(&mut bytes),
            image::ImageFormat::Png,
        )
        .unwrap();
        bytes
    }

    #[test]
    fn an_encoded_colour_png_decodes_to_bgr_planes_and_to_opencv_gray() {
        let mut rgb = image::RgbImage::new(2, 1);
        rgb.put_pixel(0, 0, image::Rgb([200, 100, 50]));
        rgb.put_pixel(1, 0, image::Rgb([0, 255, 10]));
        let datum = Datum {
            encoded: Some(true),
            data: Some(png(rgb.into())),
            label: Some(3),
            ..Default::default()
        }
        .encode_to_vec();
        let e = decode_datum(&datum, ColorMode::AsStored).unwrap();
        assert_eq!((e.channels, e.height, e.width, e.label), (3, 1, 2, 3));
        assert_eq!(e.pixels, Pixels::Bytes(vec![50, 10, 100, 255, 200, 0]));
        let gray = decode_datum(&datum, ColorMode::Gray).unwrap();
        // OpenCV: (4899*200 + 9617*100 + 1868*50 + 8192) >> 14 = 124.
        assert_eq!(gray.pixels, Pixels::Bytes(vec![124, 151]));
    }

    #[test]
    fn a_gray_png_forced_to_colour_repeats_its_plane() {
        let gray = image::GrayImage::from_raw(2, 1, vec![7, 9]).unwrap();
        let datum = Datum {
            encoded: Some(true),
            data: Some(png(gray.into())),
            ..Default::default()
        }
        .encode_to_vec();
        let e = decode_datum(&datum, ColorMode::Color).unwrap();
        assert_eq!(e.pixels, Pixels::Bytes(vec![7, 9, 7, 9, 7, 9]));
        assert_eq!(
            decode_datum(&datum, ColorMode::AsStored).unwrap().channels,
            1
        );
    }

    #[test]
    fn bad_records_are_refused_with_what_is_wrong() {
        let err = |d: Datum| decode_datum(&d.encode_to_vec(), ColorMode::AsStored).unwrap_err();
        assert_eq!(
            decode_datum(b"\xff\xff\xff", ColorMode::AsStored).unwrap_err()[..25],
            *"not a Caffe Datum record:"
        );
        let base = Datum {
            channels: Some(1),
            height: Some(2),
            width: Some(2),
            ..Default::default()
        };
        assert_eq!(
            err(base.clone()),
            "1 x 2 x 2 = 4 values declared but 0 float_data values stored"
        );
        assert_eq!(
            err(Datum {
                channels: Some(0),
                ..base.clone()
            }),
            "a record with 0 channels (Caffe requires at least 1)"
        );
        assert_eq!(
            err(Datum {
                height: Some(-2),
                ..base.clone()
            }),
            "height -2 is negative"
        );
        assert!(
            err(Datum {
                width: Some(i32::MAX),
                height: Some(i32::MAX),
                ..base.clone()
            })
            .contains("more than a record may hold")
        );
        let not_image = Datum {
            encoded: Some(true),
            data: Some(b"GIF89a....".to_vec()),
            ..Default::default()
        };
        assert!(err(not_image).starts_with("an encoded"), "GIF is not read");
        let cut = Datum {
            encoded: Some(true),
            data: Some(png(image::GrayImage::new(4, 4).into())[..30].to_vec()),
            ..Default::default()
        };
        assert!(err(cut).contains("cannot be"));
    }
}
