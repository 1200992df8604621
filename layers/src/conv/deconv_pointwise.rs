//! Caffe's Deconvolution with a 1 x 1 kernel and few channels a group:
//! the Caffe YOLOv3 forks' `upsample` (a 1x1 Deconvolution of stride 2
//! with a group for every output channel, two inputs each). The transposed
//! convolution's gemm and col2im, a call each per group, spent their time
//! in the calls: 512 groups of MobileNet-YOLOv3 lite's 19 x 19 upsample
//! took 0.20 ms. Here each output plane is its group's weighted sum of
//! input planes, scattered to every `stride`-th pixel, the others zero.

use blob_kernels::cpu;
use blob_runtime::MathElement;

use super::cpu::ConvGeometry;

/// The most input channels times output channels a group may have for
/// [`forward`]: its sums run pixel by pixel over the group's inputs, as
/// fast as a gemm only while they are few.
const MOST_WEIGHTS_A_GROUP: usize = 16;

/// Whether [`forward`] takes the transposed convolution `g` (whose
/// input is the Deconvolution's output) over `groups`: a 1 x 1 window,
/// few weights a group.
pub(super) fn suits(g: &ConvGeometry, groups: usize) -> bool {
    let groups = groups.max(1);
    g.kernel == [1, 1]
        && g.channels_in.is_multiple_of(groups)
        && g.channels_out.is_multiple_of(groups)
        && (g.channels_in / groups) * (g.channels_out / groups) <= MOST_WEIGHTS_A_GROUP
}

/// Caffe's Deconvolution forward for a [`suits`] `g`, bias left out:
/// output channel `o` of group `k` at pixel `(r s - p, q s - p)` is the
/// sum over the group's inputs `i`, in order, of `weight[i][o]` times
/// input `i` at `(r, q)`; every other pixel is zero (col2im's sums into
/// a zeroed output, each pixel reached by at most one input pixel). `x`
/// holds the `g.batch` images of the Deconvolution's input (`g.oh x
/// g.ow` planes), `y` its output (`g.h x g.w`).
pub(super) fn forward<T: MathElement>(
    g: &ConvGeometry,
    groups: usize,
    x: &[T],
    weight: &[T],
    y: &mut [T],
) {
    let groups = groups.max(1);
    let (inputs, outputs) = (g.channels_out / groups, g.channels_in / groups);
    let (plane_in, plane_out) = (g.oh * g.ow, g.h * g.w);
    let planes = g.batch * g.channels_in;
    if planes == 0 || plane_out == 0 {
        return;
    }
    let per_part = planes.div_ceil(cpu::cores()).max(1);
    let parts = y[..planes * plane_out]
        .chunks_mut(per_part * plane_out)
        .enumerate();
    cpu::on_cores(parts, |(part, out)| {
        let mut sums = vec![T::ZERO; plane_in];
        for (at, plane) in (part * per_part..).zip(out.chunks_exact_mut(plane_out)) {
            let (image, channel) = (at / g.channels_in, at % g.channels_in);
            let (group, o) = (channel / outputs, channel % outputs);
            sums.fill(T::ZERO);
            for i in 0..inputs {
                let c = group * inputs + i;
                let w = weight[c * outputs + o];
                let input = &x[(image * g.channels_out + c) * plane_in..][..plane_in];
                for (sum, &v) in sums.iter_mut().zip(input) {
                    *sum += w * v;
                }
            }
            plane.fill(T::ZERO);
            for (r, row) in sums.chunks_exact(g.ow.max(1)).enumerate() {
                let Some(yy) = (r * g.stride[0]).checked_sub(g.pad[0]).filter(|&v| v < g.h) else {
                    continue;
                };
                for (q, &sum) in row.iter().enumerate() {
                    if let Some(xx) = (q * g.stride[1]).checked_sub(g.pad[1]).filter(|&v| v < g.w) {
                        plane[yy * g.w + xx] += sum;
                    }
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Caffe's definition: every input pixel's weighted values added
    /// into the output pixel its 1 x 1 window reaches.
    fn reference(g: &ConvGeometry, groups: usize, x: &[f64], weight: &[f64]) -> Vec<f64> {
        let (inputs, outputs) = (g.channels_out / groups, g.channels_in / groups);
        let mut y = vec![0.0; g.batch * g.channels_in * g.h * g.w];
        for n in 0..g.batch {
            for c in 0..g.channels_out {
                let (group, i) = (c / inputs, c % inputs);
                for o in 0..outputs {
                    let out = n * g.channels_in + group * outputs + o;
                    for r in 0..g.oh {
                        for q in 0..g.ow {
                            let yy = (r * g.stride[0]) as isize - g.pad[0] as isize;
                            let xx = (q * g.stride[1]) as isize - g.pad[1] as isize;
                            if yy < 0 || xx < 0 || yy as usize >= g.h || xx as usize >= g.w {
                                continue;
                            }
                            let v = x[((n * g.channels_out + c) * g.oh + r) * g.ow + q];
                            y[(out * g.h + yy as usize) * g.w + xx as usize] +=
                                weight[(group * inputs + i) * outputs + o] * v;
                        }
                    }
                }
            }
        }
        y
    }

    /// Strides 1 to 3, padding that drops the first pixels, a plane the
    /// last input row falls past, groups of one to four inputs and
    /// outputs, two images.
    #[test]
    fn matches_the_definition() {
        // (input h, w, stride, pad, output h, w, channels in, out, groups)
        let cases = [
            (10, 10, [2, 2], [0, 0], 19, 19, 8, 4, 4),
            (5, 7, [1, 1], [0, 0], 5, 7, 6, 6, 3),
            (4, 6, [3, 2], [1, 0], 8, 11, 4, 8, 2),
            (3, 3, [2, 2], [1, 1], 3, 3, 4, 4, 4),
            (6, 5, [2, 3], [0, 2], 11, 9, 2, 2, 1),
        ];
        for (h, w, stride, pad, oh, ow, cin, cout, groups) in cases {
            let g = ConvGeometry {
                batch: 2,
                channels_in: cout,
                channels_out: cin,
                h: oh,
                w: ow,
                oh: h,
                ow: w,
                kernel: [1, 1],
                stride,
                pad,
                dilation: [1, 1],
            };
            assert!(suits(&g, groups));
            let x: Vec<f64> = (0..2 * cin * h * w)
                .map(|v| ((v * 37) % 23) as f64 - 11.0)
                .collect();
            let weight: Vec<f64> = (0..cin * cout / groups)
                .map(|v| (v % 7) as f64 * 0.5 - 1.5)
                .collect();
            let mut y = vec![f64::NAN; 2 * cout * oh * ow];
            forward(&g, groups, &x, &weight, &mut y);
            assert_eq!(
                y,
                reference(&g, groups, &x, &weight),
                "{h} x {w}, stride {stride:?}, pad {pad:?}"
            );
        }
        // Deep groups keep the gemm.
        let deep = ConvGeometry {
            batch: 1,
            channels_in: 32,
            channels_out: 32,
            h: 4,
            w: 4,
            oh: 4,
            ow: 4,
            kernel: [1, 1],
            stride: [1, 1],
            pad: [0, 0],
            dilation: [1, 1],
        };
        assert!(
            !suits(&deep, 1)
                && suits(&deep, 8)
                && !suits(
                    &ConvGeometry {
                        kernel: [2, 2],
                        ..deep
                    },
                    32
                )
        );
    }
}
