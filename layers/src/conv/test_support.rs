//! What the CPU paths' tests share: inputs, and a window's geometry.

use super::ConvGeometry;

/// Values in [-1, 1) that differ from seed to seed.
pub(super) fn values(n: usize, seed: u32) -> Vec<f32> {
    let mut state = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    (0..n)
        .map(|_| {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (state >> 8) as f32 / (1u32 << 23) as f32 - 1.0
        })
        .collect()
}

/// A window's sizes, as the tests list them.
pub(super) type Window = (
    usize,
    (usize, usize),
    [usize; 2],
    usize,
    usize,
    [usize; 2],
    [usize; 2],
    [usize; 2],
);

/// The geometry of `(cin, (h, w), kernel, cout, images, stride, pad,
/// dilation)`.
pub(super) fn geometry(
    (cin, (h, w), [kh, kw], cout, images, [sh, sw], [ph, pw], [dh, dw]): Window,
) -> ConvGeometry {
    let size = |i, k, s, p, d| ConvGeometry::output_size(i, k, s, p, d);
    ConvGeometry {
        batch: images,
        channels_in: cin,
        channels_out: cout,
        h,
        w,
        oh: size(h, kh, sh, ph, dh),
        ow: size(w, kw, sw, pw, dw),
        kernel: [kh, kw],
        stride: [sh, sw],
        pad: [ph, pw],
        dilation: [dh, dw],
    }
}
