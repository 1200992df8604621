//! Element-wise passes and sums whose operation changes from plane to
//! plane (BatchNorm's mean and deviation, Scale's factor and bias per
//! channel, and their gradients' sums per plane), vectorized and shared
//! out over the cores.
//!
//! These layers move a whole activation for a few operations each, so
//! they run at memory speed; on one core, serial, they were an eighth of
//! MobileNet-SSD's two-thread pass. Each value is computed alone, so the
//! bits do not depend on how the planes are shared out.

use blob_kernels::cpu;
use blob_runtime::MathElement;

/// Below this many values a pass stays on one core.
const PARALLEL_MIN: usize = 1 << 15;

/// `out[i] = op(src[i], param(p))` for each value `i` of plane `p`
/// (planes of `plane` values, in order); with `src` `None`, in place
/// over `out`.
pub(crate) fn map_planes<T: MathElement, P: Copy>(
    src: Option<&[T]>,
    out: &mut [T],
    plane: usize,
    param: impl Fn(usize) -> P + Sync,
    op: impl Fn(T, P) -> T + Sync,
) {
    zip_map_planes(src, None, out, plane, param, |v, _, p| op(v, p));
}

/// [`map_planes`] with a second operand: `out[i] = op(src[i], with[i],
/// param(p))` (`with[i]` zero where `None`).
pub(crate) fn zip_map_planes<T: MathElement, P: Copy>(
    src: Option<&[T]>,
    with: Option<&[T]>,
    out: &mut [T],
    plane: usize,
    param: impl Fn(usize) -> P + Sync,
    op: impl Fn(T, T, P) -> T + Sync,
) {
    let plane = plane.max(1);
    let per_part = part_len(out.len(), plane);
    let run = |(first, out): (usize, &mut [T])| {
        let at = first * per_part;
        let src = src.map(|s| &s[at..][..out.len()]);
        let with = with.map(|s| &s[at..][..out.len()]);
        let first_plane = at / plane;
        cpu::vectorized(
            #[inline(always)]
            || {
                for (i, row) in out.chunks_mut(plane).enumerate() {
                    let p = param(first_plane + i);
                    let range = i * plane..i * plane + row.len();
                    match (src, with) {
                        (Some(src), Some(with)) => {
                            let (src, with) = (&src[range.clone()], &with[range]);
                            for ((o, &v), &w) in row.iter_mut().zip(src).zip(with) {
                                *o = op(v, w, p);
                            }
                        }
                        (Some(src), None) => {
                            for (o, &v) in row.iter_mut().zip(&src[range]) {
                                *o = op(v, T::ZERO, p);
                            }
                        }
                        (None, Some(with)) => {
                            for (o, &w) in row.iter_mut().zip(&with[range]) {
                                *o = op(*o, w, p);
                            }
                        }
                        (None, None) => row.iter_mut().for_each(|o| *o = op(*o, T::ZERO, p)),
                    }
                }
            },
        );
    };
    cpu::on_cores(out.chunks_mut(per_part).enumerate(), run);
}

/// Per plane of `a` (planes of `plane` values), the sum of `term(a[i],
/// b[i], param(p))` in f64 (`b[i]` zero where `None`), each taken by
/// [`lane_sum`], so its value does not depend on how the planes are
/// shared out.
pub(crate) fn sum_planes<T: MathElement, P: Copy>(
    a: &[T],
    b: Option<&[T]>,
    plane: usize,
    param: impl Fn(usize) -> P + Sync,
    term: impl Fn(T, T, P) -> f64 + Sync,
) -> Vec<f64> {
    let plane = plane.max(1);
    let mut sums = vec![0.0; a.len() / plane];
    let planes_per_part = (part_len(a.len(), plane) / plane).max(1);
    let run = |(first, sums): (usize, &mut [f64])| {
        let first_plane = first * planes_per_part;
        cpu::vectorized(
            #[inline(always)]
            || {
                for (i, sum) in sums.iter_mut().enumerate() {
                    let p = first_plane + i;
                    let param = param(p);
                    let b = b.map(|b| &b[p * plane..][..plane]);
                    *sum = lane_sum(&a[p * plane..][..plane], b, |x, y| term(x, y, param));
                }
            },
        );
    };
    cpu::on_cores(sums.chunks_mut(planes_per_part).enumerate(), run);
    sums
}

/// Per channel, the sum of its planes' sums (planes in `(n, c)` order,
/// `channels` a cycle), added in plane order.
pub(crate) fn per_channel(planes: &[f64], channels: usize) -> Vec<f64> {
    let mut out = vec![0.0; channels];
    for (p, v) in planes.iter().enumerate() {
        out[p % channels.max(1)] += v;
    }
    out
}

/// `sum of term(a[i], b[i])` in f64 (`b[i]` zero where `None`), in eight
/// interleaved partial sums (a chain of dependent adds would wait on
/// each one), added in order at the end. Inline it into a
/// [`cpu::vectorized`] caller to have it vectorized for the machine.
#[inline(always)]
pub(crate) fn lane_sum<T: MathElement>(
    a: &[T],
    b: Option<&[T]>,
    term: impl Fn(T, T) -> f64,
) -> f64 {
    const LANES: usize = 8;
    let mut acc = [0.0f64; LANES];
    let ac = a.chunks_exact(LANES);
    let tail: f64 = match b {
        Some(b) => {
            let b = &b[..a.len()];
            let bc = b.chunks_exact(LANES);
            let tail = ac
                .remainder()
                .iter()
                .zip(bc.remainder())
                .map(|(&x, &y)| term(x, y))
                .sum();
            for (x, y) in ac.zip(bc) {
                for l in 0..LANES {
                    acc[l] += term(x[l], y[l]);
                }
            }
            tail
        }
        None => {
            let tail = ac.remainder().iter().map(|&x| term(x, T::ZERO)).sum();
            for x in ac {
                for l in 0..LANES {
                    acc[l] += term(x[l], T::ZERO);
                }
            }
            tail
        }
    };
    acc.iter().sum::<f64>() + tail
}

/// Values in each core's part of a pass over `len` values in planes of
/// `plane`: whole planes, one part below [`PARALLEL_MIN`].
fn part_len(len: usize, plane: usize) -> usize {
    let planes = len / plane;
    let parts = if len < PARALLEL_MIN { 1 } else { cpu::cores() };
    planes.div_ceil(parts).max(1) * plane
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_plane_takes_its_own_parameter_on_one_core_or_several() {
        // Planes of 7 values (a partial last part), then 40,000 planes of
        // 3 (past the parallel cut), in place and from a source.
        for (planes, plane) in [(9, 7), (40_000, 3)] {
            let src: Vec<f32> = (0..planes * plane)
                .map(|v| v as f32 * 0.37 - 11.0)
                .collect();
            let param = |p: usize| ((p % 5) as f32 - 2.0, (p % 3) as f32 + 0.5);
            let op = |v: f32, (m, s): (f32, f32)| (v - m) / s;
            let want: Vec<f32> = src
                .iter()
                .enumerate()
                .map(|(i, &v)| op(v, param(i / plane)))
                .collect();
            let mut out = vec![f32::NAN; src.len()];
            map_planes(Some(&src), &mut out, plane, param, op);
            assert_eq!(out, want, "{planes} planes of {plane}");
            let mut in_place = src.clone();
            map_planes(None, &mut in_place, plane, param, op);
            assert_eq!(in_place, want, "in place, {planes} planes of {plane}");
        }
    }

    #[test]
    fn plane_sums_and_two_operand_passes_do_not_depend_on_the_cores() {
        // 9 planes of 13 (one part, a tail past the lanes), then 20,000
        // of 3 (past the parallel cut, all tail) and 600 of 100.
        for (planes, plane) in [(9, 13), (20_000, 3), (600, 100)] {
            let a: Vec<f32> = (0..planes * plane)
                .map(|v| (v % 97) as f32 * 0.25 - 7.0)
                .collect();
            let b: Vec<f32> = (0..planes * plane)
                .map(|v| (v % 31) as f32 * 0.5 - 3.0)
                .collect();
            let sums = sum_planes(
                &a,
                Some(&b),
                plane,
                |p| p as f64,
                |x, y, k| f64::from(x) * f64::from(y) + k,
            );
            assert_eq!(sums.len(), planes);
            for (p, &got) in sums.iter().enumerate() {
                let want: f64 = (0..plane)
                    .map(|i| f64::from(a[p * plane + i]) * f64::from(b[p * plane + i]) + p as f64)
                    .sum();
                assert!(
                    (got - want).abs() <= 1e-9 * want.abs().max(1.0),
                    "plane {p}: {got} vs {want}"
                );
                let alone = lane_sum(
                    &a[p * plane..][..plane],
                    Some(&b[p * plane..][..plane]),
                    |x, y| f64::from(x) * f64::from(y) + p as f64,
                );
                assert_eq!(got, alone, "plane {p}: the same sum on any core");
            }
            let op = |v: f32, w: f32, k: f32| v * w + k;
            let param = |p: usize| (p % 7) as f32;
            let want: Vec<f32> = (0..a.len())
                .map(|i| op(a[i], b[i], param(i / plane)))
                .collect();
            let mut out = vec![f32::NAN; a.len()];
            zip_map_planes(Some(&a), Some(&b), &mut out, plane, param, op);
            assert_eq!(out, want, "{planes} planes of {plane}");
            let mut in_place = a.clone();
            zip_map_planes(None, Some(&b), &mut in_place, plane, param, op);
            assert_eq!(in_place, want, "in place, {planes} planes of {plane}");
        }
    }
}
