//! OpenCV's `cv::resize` of 8-bit images, in its own arithmetic:
//! bilinear (`INTER_LINEAR`, what Caffe's `ReadImageToCVMat` does to an
//! image given `new_height` / `new_width`: `convert_imageset
//! --resize_height/--resize_width`, `ImageData`), nearest, and the SSD
//! and YOLO forks' `interp_mode`s AREA (in [`area`]), CUBIC (in
//! [`cubic`]) and LANCZOS4 (in [`lanczos`]).

mod area;
mod cubic;
mod lanczos;

pub use area::resize_area;
pub use cubic::resize_cubic;
pub use lanczos::resize_lanczos4;

/// OpenCV's `INTER_RESIZE_COEF_BITS`: weights are multiples of 1/2048.
const COEF_BITS: u32 = 11;
const COEF_SCALE: i32 = 1 << COEF_BITS;

/// Checks `planes` against their sizes, and gives what every resize
/// gives where there is nothing to interpolate: zeros for an empty
/// image, a copy at the same size.
fn trivial(
    planes: &[u8],
    channels: usize,
    (height, width): (usize, usize),
    (new_height, new_width): (usize, usize),
) -> Option<Vec<u8>> {
    assert_eq!(
        planes.len(),
        channels * height * width,
        "planes of the size given"
    );
    if height == 0 || width == 0 || new_height == 0 || new_width == 0 {
        return Some(vec![0u8; channels * new_height * new_width]);
    }
    ((height, width) == (new_height, new_width)).then(|| planes.to_vec())
}

/// For each output position of `src` to `dst` along one axis, as
/// `cv::resize` computes it for a kernel of `K` taps (CUBIC's 4,
/// LANCZOS4's 8): the first source index (`K / 2 - 1` before the
/// position's pixel) and the `weights` of the position's fraction in
/// 1/2048ths, each rounded and held to a 16-bit integer.
fn kernel_taps<const K: usize>(
    src: usize,
    dst: usize,
    weights: fn(f32) -> [f32; K],
) -> Vec<(i64, [i32; K])> {
    let scale = 1.0 / (dst as f64 / src as f64);
    (0..dst)
        .map(|d| {
            let f = ((d as f64 + 0.5) * scale - 0.5) as f32;
            let s = f.floor();
            let w = weights(f - s).map(|w| {
                (w * COEF_SCALE as f32)
                    .round_ties_even()
                    .clamp(f32::from(i16::MIN), f32::from(i16::MAX)) as i32
            });
            (s as i64 - (K / 2 - 1) as i64, w)
        })
        .collect()
}

/// One output position's two source indices and their weights.
type Tap = (usize, usize, i32, i32);

/// For each output position along one axis: the first source index,
/// the second and the two weights. OpenCV holds the edge along a row
/// (`hold_edge`: position and weight clamped) but only clamps the rows
/// themselves along a column, keeping the weights: the two rounded
/// halves of an edge row's sum then differ from the row by up to 1.
fn taps(src: usize, dst: usize, hold_edge: bool) -> Vec<Tap> {
    let scale = src as f64 / dst as f64;
    (0..dst)
        .map(|d| {
            // OpenCV computes the position in double and keeps it as float.
            let f = ((d as f64 + 0.5) * scale - 0.5) as f32;
            let mut s = f.floor() as i64;
            let mut frac = f - s as f32;
            if !hold_edge {
                let a0 = ((1.0 - frac) * COEF_SCALE as f32).round_ties_even() as i32;
                let row = |i: i64| i.clamp(0, src as i64 - 1) as usize;
                return (row(s), row(s + 1), a0, COEF_SCALE - a0);
            }
            if s < 0 {
                s = 0;
                frac = 0.0;
            }
            if s >= src as i64 - 1 {
                s = src as i64 - 1;
                frac = 0.0;
            }
            let s = s as usize;
            // saturate_cast<short>(x * 2048): rounded to nearest.
            let a0 = ((1.0 - frac) * COEF_SCALE as f32).round_ties_even() as i32;
            (s, (s + 1).min(src - 1), a0, COEF_SCALE - a0)
        })
        .collect()
}

/// Resizes C-H-W planes of `channels` x `height` x `width` bytes to
/// `new_height` x `new_width` as OpenCV 4's `cv::resize(..., INTER_LINEAR)`
/// does on x86, in its vector rounding: the bytes OpenCV 4.14 gives
/// (held to it in this crate's tests).
///
/// ```
/// // A 2 x 2 gray image to 4 x 4: bilinear, edges held.
/// let out = blob_data::resize_linear(&[0, 100, 200, 255], 1, 2, 2, 4, 4);
/// assert_eq!(&out[..4], &[0, 25, 75, 100]);
/// assert_eq!(&out[12..], &[200, 214, 241, 255]);
/// ```
pub fn resize_linear(
    planes: &[u8],
    channels: usize,
    height: usize,
    width: usize,
    new_height: usize,
    new_width: usize,
) -> Vec<u8> {
    if let Some(out) = trivial(planes, channels, (height, width), (new_height, new_width)) {
        return out;
    }
    if width == 2 * new_width && height == 2 * new_height {
        // OpenCV takes INTER_AREA's 2x2 means for an exact halving.
        return area::whole_blocks(planes, channels, (height, width), (2, 2));
    }
    let xs = taps(width, new_width, true);
    let ys = taps(height, new_height, false);
    two_taps(planes, channels, (height, width), (&xs, &ys))
}

/// OpenCV's separable two-tap resize of 8-bit planes (`resizeGeneric_`
/// with `HResizeLinear` and `VResizeLinear`): each output value from two
/// source columns `xs` of two source rows `ys`, with weights that are
/// multiples of 1/2048; bilinear's taps and AREA's when it enlarges.
fn two_taps(
    planes: &[u8],
    channels: usize,
    (height, width): (usize, usize),
    (xs, ys): (&[Tap], &[Tap]),
) -> Vec<u8> {
    let (new_height, new_width) = (ys.len(), xs.len());
    let mut out = vec![0u8; channels * new_height * new_width];
    let mut row0 = vec![0i32; new_width];
    let mut row1 = vec![0i32; new_width];
    for c in 0..channels {
        let plane = &planes[c * height * width..(c + 1) * height * width];
        let horizontal = |y: usize, row: &mut [i32]| {
            let line = &plane[y * width..(y + 1) * width];
            for (value, &(s0, s1, a0, a1)) in row.iter_mut().zip(xs) {
                *value = i32::from(line[s0]) * a0 + i32::from(line[s1]) * a1;
            }
        };
        for (y, &(s0, s1, b0, b1)) in ys.iter().enumerate() {
            horizontal(s0, &mut row0);
            horizontal(s1, &mut row1);
            let dst = &mut out[(c * new_height + y) * new_width..][..new_width];
            for ((d, &v0), &v1) in dst.iter_mut().zip(&row0).zip(&row1) {
                // OpenCV's v_mul_hi on 16-bit lanes, then a rounding shift
                // by 2 (`VResizeLinearVec_32s8u`).
                let value = (((b0 * (v0 >> 4)) >> 16) + ((b1 * (v1 >> 4)) >> 16) + 2) >> 2;
                *d = value.clamp(0, 255) as u8;
            }
        }
    }
    out
}

/// Resizes C-H-W planes as OpenCV's `cv::resize(..., INTER_NEAREST)`:
/// output column `x` takes source column `floor(x / (new_width /
/// width))`, the ratio and its inverse in double as OpenCV computes
/// them, clamped to the last column (rows alike). SegNet's
/// `DenseImageData` resizes its label images so: every value is one of
/// the labels.
pub(crate) fn resize_nearest(
    planes: &[u8],
    channels: usize,
    (height, width): (usize, usize),
    (new_height, new_width): (usize, usize),
) -> Vec<u8> {
    debug_assert_eq!(planes.len(), channels * height * width);
    let source = |new: usize, old: usize| -> Vec<usize> {
        let inverse = 1.0 / (new as f64 / old as f64);
        (0..new)
            .map(|d| ((d as f64 * inverse).floor() as usize).min(old.saturating_sub(1)))
            .collect()
    };
    let (xs, ys) = (source(new_width, width), source(new_height, height));
    let mut out = Vec::with_capacity(channels * new_height * new_width);
    for plane in planes.chunks_exact((height * width).max(1)).take(channels) {
        for &y in &ys {
            let row = &plane[y * width..][..width];
            out.extend(xs.iter().map(|&x| row[x]));
        }
    }
    out
}
