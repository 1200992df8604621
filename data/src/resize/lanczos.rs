//! OpenCV's `INTER_LANCZOS4` of 8-bit images: eight taps a side, the
//! Lanczos window of 4 (`interpolateLanczos4`), weights rounded to
//! multiples of 1/2048 and summed in integers (`HResizeLanczos4`,
//! `VResizeLanczos4`), edges repeated.

use std::f64::consts::PI;

use super::{kernel_taps, trivial};

/// OpenCV's `interpolateLanczos4`: the eight weights of a position `x`
/// (0 to 1) past a source pixel, normalized to sum to 1, in its mix of
/// double and float.
fn lanczos4(x: f32) -> [f32; 8] {
    const S45: f64 = std::f64::consts::FRAC_1_SQRT_2;
    const CS: [[f64; 2]; 8] = [
        [1.0, 0.0],
        [-S45, -S45],
        [0.0, 1.0],
        [S45, -S45],
        [-1.0, 0.0],
        [S45, S45],
        [0.0, -1.0],
        [-S45, S45],
    ];
    let y0 = -f64::from(x + 3.0) * PI * 0.25;
    let (s0, c0) = (y0.sin(), y0.cos());
    let mut c = [0.0f32; 8];
    let mut sum = 0.0f32;
    for (i, (v, cs)) in c.iter_mut().zip(CS).enumerate() {
        let at = x + 3.0 - i as f32;
        *v = if at.abs() >= 1e-6 {
            let y = -f64::from(at) * PI * 0.25;
            ((cs[0] * s0 + cs[1] * c0) / (y * y)) as f32
        } else {
            // On a source pixel: that pixel alone, once normalized.
            1e30
        };
        sum += *v;
    }
    let inverse = 1.0 / sum;
    c.map(|v| v * inverse)
}

/// Resizes C-H-W planes of `channels` x `height` x `width` bytes to
/// `new_height` x `new_width` as `cv::resize(..., INTER_LANCZOS4)` does
/// in OpenCV's own code (the bytes OpenCV 4.14 gives with IPP off, held
/// to it in this crate's tests): the SSD and YOLO forks' `interp_mode:
/// LANCZOS4`.
///
/// ```
/// // A flat image stays flat; a step rings past its edges (OpenCV's
/// // bytes for the same call).
/// assert_eq!(blob_data::resize_lanczos4(&[7; 12], 1, 3, 4, 5, 6), [7; 30]);
/// let step = blob_data::resize_lanczos4(&[0, 0, 200, 200], 1, 1, 4, 1, 8);
/// assert_eq!(step, [8, 0, 0, 44, 156, 222, 213, 192]);
/// ```
pub fn resize_lanczos4(
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
    let xs = kernel_taps(width, new_width, lanczos4);
    let ys = kernel_taps(height, new_height, lanczos4);
    let clamp = |i: i64, n: usize| i.clamp(0, n as i64 - 1) as usize;
    let mut out = Vec::with_capacity(channels * new_height * new_width);
    let mut rows = vec![0i32; height * new_width];
    for plane in planes.chunks_exact(height * width).take(channels) {
        // Every source row across: OpenCV's int sums of 16-bit weights.
        for (line, row) in plane
            .chunks_exact(width)
            .zip(rows.chunks_exact_mut(new_width))
        {
            for (v, &(first, w)) in row.iter_mut().zip(&xs) {
                *v = (0..8).fold(0i32, |acc, j| {
                    acc.wrapping_add(
                        i32::from(line[clamp(first + j as i64, width)]).wrapping_mul(w[j]),
                    )
                });
            }
        }
        for &(first, w) in &ys {
            for x in 0..new_width {
                let v = (0..8).fold(0i32, |acc, k| {
                    let row = clamp(first + k as i64, height);
                    acc.wrapping_add(rows[row * new_width + x].wrapping_mul(w[k]))
                });
                // FixedPtCast: round off 22 bits, then saturate.
                out.push((v.wrapping_add(1 << 21) >> 22).clamp(0, 255) as u8);
            }
        }
    }
    out
}
