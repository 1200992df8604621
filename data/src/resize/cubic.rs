//! OpenCV's `INTER_CUBIC` of 8-bit images: four taps a side of Keys'
//! cubic with `A = -0.75` (`interpolateCubic`), weights rounded to
//! multiples of 1/2048, rows summed in integers (`HResizeCubic`), edges
//! repeated. Down the columns OpenCV's x86 build sums in float for all
//! but the last few values of each interleaved row
//! (`VResizeCubicVec_32s8u`, eight values at a time) and in integers for
//! those (`VResizeCubic`), which round differently: both are kept.

use super::{kernel_taps, trivial};

/// OpenCV's `interpolateCubic`: the four weights of a position `x` (0 to
/// 1) past a source pixel, in float.
fn cubic(x: f32) -> [f32; 4] {
    const A: f32 = -0.75;
    let c0 = ((A * (x + 1.0) - 5.0 * A) * (x + 1.0) + 8.0 * A) * (x + 1.0) - 4.0 * A;
    let c1 = ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0;
    let c2 = ((A + 2.0) * (1.0 - x) - (A + 3.0)) * (1.0 - x) * (1.0 - x) + 1.0;
    [c0, c1, c2, 1.0 - c0 - c1 - c2]
}

/// One output value down a column from four row sums `s` and the
/// column weights `b`: OpenCV's float sum (`vector`) or its integer one.
fn vertical(s: [i32; 4], b: [i32; 4], vector: bool) -> u8 {
    if vector {
        // b·2^-22 in float, summed from the last tap as v_muladd nests,
        // each product and sum rounded (the SSE3 baseline has no FMA),
        // then rounded to even and saturated.
        let scale = 1.0f32 / (2048.0 * 2048.0);
        let term = |k: usize| s[k] as f32 * (b[k] as f32 * scale);
        let sum = term(0) + (term(1) + (term(2) + term(3)));
        return sum.round_ties_even().clamp(0.0, 255.0) as u8;
    }
    // FixedPtCast: round off 22 bits, then saturate.
    let sum: i64 = s
        .iter()
        .zip(b)
        .map(|(&v, w)| i64::from(v) * i64::from(w))
        .sum();
    ((sum + (1 << 21)) >> 22).clamp(0, 255) as u8
}

/// Resizes C-H-W planes of `channels` x `height` x `width` bytes to
/// `new_height` x `new_width` as `cv::resize(..., INTER_CUBIC)` does in
/// OpenCV's own code on x86 (the bytes OpenCV 4.14 gives with IPP off,
/// held to it in this crate's tests): the SSD and YOLO forks'
/// `interp_mode: CUBIC`.
///
/// ```
/// // A flat image stays flat; a step overshoots past its edges (OpenCV's
/// // bytes for the same call).
/// assert_eq!(blob_data::resize_cubic(&[7; 12], 1, 3, 4, 5, 6), [7; 30]);
/// let step = blob_data::resize_cubic(&[0, 0, 200, 200], 1, 1, 4, 1, 8);
/// assert_eq!(step, [0, 0, 0, 45, 155, 221, 207, 200]);
/// ```
pub fn resize_cubic(
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
    let xs = kernel_taps(width, new_width, cubic);
    let ys = kernel_taps(height, new_height, cubic);
    let clamp = |i: i64, n: usize| i.clamp(0, n as i64 - 1) as usize;
    // OpenCV interleaves the channels: value `x * channels + c` of an
    // output row is summed in float when it lies before the row's last
    // whole group of eight.
    let vector_end = (new_width * channels) / 8 * 8;
    let mut out = Vec::with_capacity(channels * new_height * new_width);
    let mut rows = vec![0i32; height * new_width];
    for (c, plane) in planes
        .chunks_exact(height * width)
        .take(channels)
        .enumerate()
    {
        for (line, row) in plane
            .chunks_exact(width)
            .zip(rows.chunks_exact_mut(new_width))
        {
            for (v, &(first, w)) in row.iter_mut().zip(&xs) {
                *v = (0..4).fold(0i32, |acc, j| {
                    acc + i32::from(line[clamp(first + j as i64, width)]) * w[j]
                });
            }
        }
        for &(first, b) in &ys {
            let at = |k: usize| clamp(first + k as i64, height) * new_width;
            let (r0, r1, r2, r3) = (at(0), at(1), at(2), at(3));
            for x in 0..new_width {
                let s = [rows[r0 + x], rows[r1 + x], rows[r2 + x], rows[r3 + x]];
                out.push(vertical(s, b, x * channels + c < vector_end));
            }
        }
    }
    out
}
