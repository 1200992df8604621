//! Depthwise convolution on the CPU (`group` = input channels = output
//! channels, MobileNet's 3x3 layers): each plane convolved with its own
//! kernel directly, tap by tap along output rows, the planes shared
//! across the cores. im2col and a gemm of one row per group would spend
//! their time copying.

use blob_kernels::cpu;
use blob_runtime::MathElement;

use super::cpu::ConvGeometry;

impl ConvGeometry {
    /// One kernel per channel (`groups` = input = output channels).
    pub fn is_depthwise(&self, groups: usize) -> bool {
        groups > 1 && self.channels_in == groups && self.channels_out == groups
    }
}

/// `y = conv(x) + bias` for a depthwise `g` (whole batch), `weight`
/// `(channels, 1, kh, kw)`.
pub(crate) fn forward<T: MathElement>(
    g: &ConvGeometry,
    x: &[T],
    weight: &[T],
    bias: &[T],
    y: &mut [T],
) {
    let (plane_in, plane_out) = (g.h * g.w, g.oh * g.ow);
    let taps = g.kernel[0] * g.kernel[1];
    let channels = g.channels_out;
    if plane_out == 0 {
        return;
    }
    // Planes in one run per core (small planes: a task each would cost
    // more to hand out than to compute).
    let planes = g.batch * channels;
    let per_part = planes.div_ceil(cpu::cores()).max(1);
    let items = y[..planes * plane_out]
        .chunks_mut(per_part * plane_out)
        .enumerate();
    cpu::on_cores(items, |(part, out)| {
        for (i, out) in (part * per_part..).zip(out.chunks_mut(plane_out)) {
            let c = i % channels;
            let xi = &x[i * plane_in..][..plane_in];
            plane(g, xi, &weight[c * taps..][..taps], bias[c], out);
        }
    });
}

/// One channel's plane.
fn plane<T: MathElement>(g: &ConvGeometry, x: &[T], w: &[T], bias: T, y: &mut [T]) {
    let ConvGeometry {
        h,
        w: width,
        ow,
        kernel: [kh, kw],
        stride: [sh, sw],
        pad: [ph, pw],
        dilation: [dh, dw],
        ..
    } = *g;
    y.fill(T::ZERO);
    for (r, row) in y.chunks_exact_mut(ow).enumerate() {
        for ki in 0..kh {
            let Some(ih) = (r * sh + ki * dh).checked_sub(ph).filter(|&ih| ih < h) else {
                continue;
            };
            let line = &x[ih * width..][..width];
            for kj in 0..kw {
                let wv = w[ki * kw + kj];
                let shift = kj * dw;
                // Outputs q reading inside the line: q * sw + shift - pw in [0, width).
                let lo = pw.saturating_sub(shift).div_ceil(sw);
                let hi = (width + pw).saturating_sub(shift).div_ceil(sw).min(ow);
                if lo >= hi {
                    continue;
                }
                let from = lo * sw + shift - pw;
                if sw == 1 {
                    for (o, &v) in row[lo..hi].iter_mut().zip(&line[from..from + (hi - lo)]) {
                        *o += wv * v;
                    }
                } else {
                    for (k, o) in row[lo..hi].iter_mut().enumerate() {
                        *o += wv * line[from + k * sw];
                    }
                }
            }
        }
        for o in row {
            *o += bias;
        }
    }
}
