//! OpenCV's `INTER_AREA` of 8-bit images: a shrink by whole factors
//! averages blocks (`resizeAreaFast_`), any other shrink weighs each
//! source pixel by the share of it an output pixel covers (`resizeArea_`,
//! in float), and an enlargement is bilinear with AREA's own weights.

use super::{Tap, trivial, two_taps};

/// Resizes C-H-W planes of `channels` x `height` x `width` bytes to
/// `new_height` x `new_width` as `cv::resize(..., INTER_AREA)` does
/// (the bytes OpenCV 4.14 gives, held to it in this crate's tests): the
/// SSD and YOLO forks' `interp_mode: AREA`.
///
/// ```
/// // A 3 x 3 block's mean, rounded to even: (1 + 2 + ... + 9) / 9 = 5.
/// let out = blob_data::resize_area(&[1, 2, 3, 4, 5, 6, 7, 8, 9], 1, 3, 3, 1, 1);
/// assert_eq!(out, [5]);
/// ```
pub fn resize_area(
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
    // cv::resize's scales: the inverse of new over old, in double.
    let scale_x = 1.0 / (new_width as f64 / width as f64);
    let scale_y = 1.0 / (new_height as f64 / height as f64);
    if scale_x >= 1.0 && scale_y >= 1.0 {
        let (ix, iy) = (scale_x.round_ties_even(), scale_y.round_ties_even());
        if (scale_x - ix).abs() < f64::EPSILON && (scale_y - iy).abs() < f64::EPSILON {
            return whole_blocks(
                planes,
                channels,
                (height, width),
                (iy as usize, ix as usize),
            );
        }
        return decimate(
            planes,
            channels,
            (height, width),
            (new_height, new_width),
            (scale_y, scale_x),
        );
    }
    let xs = enlarging_taps(width, new_width, true);
    let ys = enlarging_taps(height, new_height, false);
    two_taps(planes, channels, (height, width), (&xs, &ys))
}

/// `resizeAreaFast_`: each output the mean of a `by_y` x `by_x` block,
/// `(sum + 2) >> 2` for 2 x 2 blocks of 1, 3 or 4 channels (its vector
/// path), else the sum times `1 / area` in float, rounded to even.
pub(super) fn whole_blocks(
    planes: &[u8],
    channels: usize,
    (height, width): (usize, usize),
    (by_y, by_x): (usize, usize),
) -> Vec<u8> {
    let (new_height, new_width) = (height / by_y, width / by_x);
    let area = by_y * by_x;
    let halving = (by_y, by_x) == (2, 2) && channels != 2;
    let scale = 1.0f32 / area as f32;
    let mut out = Vec::with_capacity(channels * new_height * new_width);
    for plane in planes.chunks_exact(height * width).take(channels) {
        for y in 0..new_height {
            for x in 0..new_width {
                let mut sum = 0u32;
                for row in plane[y * by_y * width..].chunks(width).take(by_y) {
                    sum += row[x * by_x..][..by_x]
                        .iter()
                        .map(|&v| u32::from(v))
                        .sum::<u32>();
                }
                out.push(if halving {
                    ((sum + 2) >> 2) as u8
                } else {
                    (sum as f32 * scale).round_ties_even().clamp(0.0, 255.0) as u8
                });
            }
        }
    }
    out
}

/// One source pixel's share of an output pixel (OpenCV's
/// `DecimateAlpha`): output index, source index, weight.
type Share = (usize, usize, f32);

/// OpenCV's `computeResizeAreaTab`: the shares of each output pixel
/// along one axis, `scale` source pixels an output pixel.
fn shares(src: usize, dst: usize, scale: f64) -> Vec<Share> {
    let mut tab = Vec::with_capacity(2 * src);
    for d in 0..dst {
        let fs1 = d as f64 * scale;
        let fs2 = fs1 + scale;
        let cell = scale.min(src as f64 - fs1);
        let mut s1 = fs1.ceil() as i64;
        let s2 = (fs2.floor() as i64).min(src as i64 - 1);
        s1 = s1.min(s2);
        if s1 as f64 - fs1 > 1e-3 {
            tab.push((d, (s1 - 1) as usize, ((s1 as f64 - fs1) / cell) as f32));
        }
        for s in s1..s2 {
            tab.push((d, s as usize, (1.0 / cell) as f32));
        }
        if fs2 - s2 as f64 > 1e-3 {
            let part = (fs2 - s2 as f64).min(1.0).min(cell);
            tab.push((d, s2 as usize, (part / cell) as f32));
        }
    }
    tab
}

/// `resizeArea_` (float sums): each source row's shares summed into a
/// row, the rows' shares summed into the output row, rounded to even.
fn decimate(
    planes: &[u8],
    channels: usize,
    (height, width): (usize, usize),
    (new_height, new_width): (usize, usize),
    (scale_y, scale_x): (f64, f64),
) -> Vec<u8> {
    let xs = shares(width, new_width, scale_x);
    let ys = shares(height, new_height, scale_y);
    let mut out = vec![0u8; channels * new_height * new_width];
    let mut buf = vec![0.0f32; new_width];
    let mut sum = vec![0.0f32; new_width];
    for (plane, dst) in planes
        .chunks_exact(height * width)
        .zip(out.chunks_exact_mut(new_height * new_width))
    {
        sum.fill(0.0);
        let mut row = ys.first().map_or(0, |y| y.0);
        let emit = |dst: &mut [u8], row: usize, sum: &[f32]| {
            for (d, &v) in dst[row * new_width..][..new_width].iter_mut().zip(sum) {
                *d = v.round_ties_even().clamp(0.0, 255.0) as u8;
            }
        };
        for &(dy, sy, beta) in &ys {
            buf.fill(0.0);
            let line = &plane[sy * width..][..width];
            for &(dx, sx, alpha) in &xs {
                buf[dx] += f32::from(line[sx]) * alpha;
            }
            if dy != row {
                emit(dst, row, &sum);
                for (s, &b) in sum.iter_mut().zip(&buf) {
                    *s = beta * b;
                }
                row = dy;
            } else {
                for (s, &b) in sum.iter_mut().zip(&buf) {
                    *s += beta * b;
                }
            }
        }
        emit(dst, row, &sum);
    }
    out
}

/// AREA's bilinear taps where it enlarges (OpenCV's `area_mode`): output
/// `d` starts at source `floor(d · scale)`, weighted by how far the next
/// source pixel's edge is inside it. Along a row the last column is
/// held; rows are clamped where they are read.
fn enlarging_taps(src: usize, dst: usize, hold_edge: bool) -> Vec<Tap> {
    let inverse = dst as f64 / src as f64;
    let scale = 1.0 / inverse;
    (0..dst)
        .map(|d| {
            let mut s = (d as f64 * scale).floor() as i64;
            let f = ((d + 1) as f64 - (s + 1) as f64 * inverse) as f32;
            let mut f = if f <= 0.0 { 0.0 } else { f - f.floor() };
            if hold_edge && s >= src as i64 - 1 {
                (s, f) = (src as i64 - 1, 0.0);
            }
            let weight = |v: f32| (v * 2048.0).round_ties_even() as i32;
            let row = |i: i64| i.clamp(0, src as i64 - 1) as usize;
            (row(s), row(s + 1), weight(1.0 - f), weight(f))
        })
        .collect()
}
