//! Element-wise passes whose operation changes from plane to plane
//! (BatchNorm's mean and deviation, Scale's factor and bias per channel),
//! vectorized and shared out over the cores.
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
    let plane = plane.max(1);
    let planes = out.len() / plane;
    let parts = if out.len() < PARALLEL_MIN {
        1
    } else {
        cpu::cores()
    };
    let per_part = planes.div_ceil(parts).max(1) * plane;
    let run = |(first, out): (usize, &mut [T])| {
        let src = src.map(|s| &s[first * per_part..][..out.len()]);
        let first_plane = first * per_part / plane;
        cpu::vectorized(
            #[inline(always)]
            || {
                for (i, row) in out.chunks_mut(plane).enumerate() {
                    let p = param(first_plane + i);
                    match src {
                        Some(src) => {
                            let from = &src[i * plane..][..row.len()];
                            for (o, &v) in row.iter_mut().zip(from) {
                                *o = op(v, p);
                            }
                        }
                        None => row.iter_mut().for_each(|o| *o = op(*o, p)),
                    }
                }
            },
        );
    };
    cpu::on_cores(out.chunks_mut(per_part).enumerate(), run);
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
}
