//! The data crate's image steps against OpenCV 4.14's own output
//! (`tests/fixtures/make_opencv_fixtures.py`): a JPEG record decoded as
//! Caffe's `imdecode` decodes it, and resized as `cv::resize` bilinear
//! resizes it for `convert_imageset` and `ImageData`, and as its AREA,
//! CUBIC and LANCZOS4 resize it for the SSD and YOLO forks' `interp_mode`s.

use std::path::PathBuf;

use blob_data::{
    ColorMode, Pixels, decode_datum, resize_area, resize_cubic, resize_lanczos4, resize_linear,
};
use prost::Message;

fn fixture(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn an_encoded_jpeg_decodes_within_three_levels_of_opencv() {
    let datum = blob_proto::Datum {
        encoded: Some(true),
        data: Some(fixture("astronaut_crop.jpg")),
        label: Some(5),
        ..Default::default()
    };
    let e = decode_datum(&datum.encode_to_vec(), ColorMode::AsStored).unwrap();
    assert_eq!((e.channels, e.height, e.width, e.label), (3, 48, 64, 5));
    let Pixels::Bytes(ours) = e.pixels else {
        panic!("bytes expected")
    };
    let opencv = fixture("astronaut_crop.bgr");
    let diffs: Vec<u8> = ours
        .iter()
        .zip(&opencv)
        .map(|(a, b)| a.abs_diff(*b))
        .collect();
    let worst = diffs.iter().copied().max().unwrap();
    let mean = diffs.iter().map(|&d| f64::from(d)).sum::<f64>() / diffs.len() as f64;
    // Two JPEG decoders (libjpeg-turbo's and zune-jpeg's) round their
    // inverse DCTs and chroma upsampling differently; a swapped channel
    // or a wrong plane order is off by tens.
    assert!(worst <= 3 && mean < 0.25, "worst {worst}, mean {mean}");
}

#[test]
fn bilinear_resizes_are_opencvs_bytes() {
    let decoded = fixture("astronaut_crop.bgr");
    for (h, w) in [(32, 32), (96, 128), (24, 32), (20, 40), (31, 50), (7, 5)] {
        let ours = resize_linear(&decoded, 3, 48, 64, h, w);
        let opencv = fixture(&format!("resize_{h}x{w}.bgr"));
        let differing = ours.iter().zip(&opencv).filter(|(a, b)| a != b).count();
        assert_eq!(
            differing,
            0,
            "{h} x {w}: {differing} of {} bytes differ",
            ours.len()
        );
    }
}

/// A resize of planes: channels, height, width, new height, new width.
type Resize = fn(&[u8], usize, usize, usize, usize, usize) -> Vec<u8>;

/// `name`'s OpenCV fixtures of `sizes` against `resize`.
fn same_bytes_as_opencv(name: &str, sizes: &[(usize, usize)], resize: Resize) {
    let decoded = fixture("astronaut_crop.bgr");
    for &(h, w) in sizes {
        let ours = resize(&decoded, 3, 48, 64, h, w);
        let opencv = fixture(&format!("{name}_{h}x{w}.bgr"));
        assert_eq!(ours.len(), opencv.len());
        let differing = ours.iter().zip(&opencv).filter(|(a, b)| a != b).count();
        assert_eq!(
            differing,
            0,
            "{name} {h} x {w}: {differing} of {} bytes differ",
            ours.len()
        );
    }
}

#[test]
fn area_resizes_are_opencvs_bytes() {
    // Exact halving, whole blocks (3 x 4), fractional shrinks, enlarging,
    // and one axis each way.
    same_bytes_as_opencv(
        "area",
        &[
            (24, 32),
            (16, 16),
            (32, 32),
            (20, 40),
            (31, 50),
            (7, 5),
            (96, 128),
            (100, 90),
            (30, 100),
        ],
        resize_area,
    );
}

#[test]
fn lanczos4_resizes_are_opencvs_bytes() {
    same_bytes_as_opencv(
        "lanczos4",
        &[(96, 128), (32, 32), (31, 50), (7, 5), (60, 20)],
        resize_lanczos4,
    );
}

#[test]
fn cubic_resizes_are_opencvs_bytes() {
    // Rows of B, G, R values that end in a part group of eight (OpenCV
    // sums those last values in integers, the rest in float) and ones
    // that do not; enlarging and shrinking.
    same_bytes_as_opencv(
        "cubic",
        &[
            (96, 128),
            (32, 32),
            (31, 50),
            (7, 5),
            (60, 20),
            (45, 67),
            (1, 3),
        ],
        resize_cubic,
    );
}
