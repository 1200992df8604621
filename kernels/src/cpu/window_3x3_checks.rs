//! What the tests of the 3 x 3 depthwise windows read in place
//! ([`super::depthwise_3x3_stride2`], [`super::depthwise_3x3_flat`])
//! check them against: the window's definition, and its bits with and
//! without Caffe's `ReLU`.

/// Values in [-0.5, 0.5) from `seed`, the same run every time.
pub(super) fn values(mut seed: u32) -> impl FnMut() -> f32 {
    move || {
        seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        (seed >> 8) as f32 / (1u32 << 24) as f32 - 0.5
    }
}

/// The definition of a 3 x 3 window at `stride` over the `h x w` plane
/// `x` with a row and a column of zeros around it: each output's taps in
/// order, each product rounded and then added, then the bias.
pub(super) fn reference(
    x: &[f32],
    (h, w): (usize, usize),
    stride: usize,
    weights: &[f32],
    bias: f32,
) -> Vec<f32> {
    let mut out = Vec::new();
    for r in 0..(h - 1) / stride + 1 {
        for q in 0..(w - 1) / stride + 1 {
            let mut acc = 0.0f32;
            for ki in 0..3 {
                for kj in 0..3 {
                    let at = (
                        (stride * r + ki).checked_sub(1),
                        (stride * q + kj).checked_sub(1),
                    );
                    let v = match at {
                        (Some(iy), Some(ix)) if iy < h && ix < w => x[iy * w + ix],
                        _ => 0.0,
                    };
                    acc += weights[ki * 3 + kj] * v;
                }
            }
            out.push(acc + bias);
        }
    }
    out
}

/// Runs `kernel(rectify, out)` without and with the `ReLU` into an
/// output of NaNs a few values longer than `want`, and asserts its bits
/// are `want`'s (rectified by [`super::relu`]) and that it wrote nothing
/// past them; returns at once where the kernel did not run.
pub(super) fn assert_bits(
    want: &[f32],
    mut kernel: impl FnMut(bool, &mut [f32]) -> bool,
    what: &str,
) {
    for rectify in [false, true] {
        let mut out = vec![f32::NAN; want.len() + 3];
        if !kernel(rectify, &mut out) {
            return;
        }
        let want: Vec<u32> = want
            .iter()
            .map(|&v| if rectify { super::relu(v) } else { v }.to_bits())
            .collect();
        let got: Vec<u32> = out[..want.len()].iter().map(|v| v.to_bits()).collect();
        assert_eq!(got, want, "{what}, rectify {rectify}");
        assert!(
            out[want.len()..].iter().all(|v| v.is_nan()),
            "{what}: wrote past"
        );
    }
}
