//! MobileNet's 3 x 3 depthwise window (padding 1, stride 1 or 2) over
//! one block of 16 channels laid side by side, one pixel a 16-lane
//! vector, read where it lies: the padding is never copied in, the
//! outputs at the border read zeros in its place and sum them as the
//! padded plane's would, so the bits are [`depthwise_interleaved`]'s.

#[cfg(target_arch = "x86_64")]
use super::depthwise::{finish, window_row};
#[cfg(doc)]
use super::depthwise_interleaved;
#[cfg(target_arch = "x86_64")]
use super::lanes::{Lanes, on_lanes};

const L16: usize = super::INTERLEAVED_LANES;

/// One block's plane for [`depthwise_3x3_blocked`]: its input's height
/// and width, and the window's stride (1 or 2) along both.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockedPlane {
    /// Input rows.
    pub height: usize,
    /// Input columns.
    pub width: usize,
    /// The window's step, 1 or 2.
    pub stride: usize,
}

impl BlockedPlane {
    /// Output rows and columns: `(n + 2 - 3) / stride + 1` of each.
    ///
    /// ```
    /// use blob_kernels::cpu::BlockedPlane;
    /// assert_eq!(BlockedPlane { height: 19, width: 10, stride: 2 }.output(), (10, 5));
    /// ```
    pub fn output(&self) -> (usize, usize) {
        let side = |n: usize| {
            if n == 0 {
                0
            } else {
                (n - 1) / self.stride.max(1) + 1
            }
        };
        (side(self.height), side(self.width))
    }
}

/// Outputs of a row summed together where their window lies inside the
/// plane.
#[cfg(target_arch = "x86_64")]
const PIXELS: usize = 4;

/// Caffe's depthwise `Convolution` of `kernel_size: 3`, `pad: 1`,
/// `stride` 1 or 2, over one block of 16 channels: `input[p * 16 + l]`
/// is channel `l` of pixel `p` (row-major), `weights[t * 16 + l]` tap `t`
/// (row of the window, then column) of channel `l`, and `out[o * 16 +
/// l]` becomes `bias[l]` plus the sum over the nine taps in order of
/// weight times input (0 past the border), each product rounded and then
/// added, the bias last: the bits of [`depthwise_interleaved`] over the
/// padded plane. With `rectify`, Caffe's `ReLU` after. Says whether it
/// ran (`false`: neither AVX-512 nor AVX2, nothing written).
///
/// ```
/// use blob_kernels::cpu::{BlockedPlane, depthwise_3x3_blocked};
/// // A 2 x 2 plane of ones, every weight 1: a corner's window holds all four.
/// let plane = BlockedPlane { height: 2, width: 2, stride: 1 };
/// let mut out = vec![0.0f32; 4 * 16];
/// if depthwise_3x3_blocked(&[1.0; 64], plane, &[1.0; 144], &[0.5; 16], false, &mut out) {
///     assert_eq!(out[0], 4.5);
/// }
/// ```
///
/// # Panics
/// With a stride other than 1 or 2, `input` shorter than the plane's
/// pixels, fewer than 144 weights, or `out` shorter than the outputs.
#[track_caller]
pub fn depthwise_3x3_blocked(
    input: &[f32],
    plane: BlockedPlane,
    weights: &[f32],
    bias: &[f32; 16],
    rectify: bool,
    out: &mut [f32],
) -> bool {
    check_sizes("depthwise_3x3_blocked", (input, plane), weights, out);
    let input = input.as_ptr();
    let row_at = |y: usize| input.wrapping_add(y * plane.width * L16);
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the assert above proves the plane's rows inside `input`.
    return unsafe { on_rows(row_at, plane, (weights, bias, rectify), out) };
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (row_at, rectify);
        false
    }
}

/// Panics, naming `kernel`, unless the stride is 1 or 2, `input` holds
/// the plane's 16 channels, `weights` nine taps of 16 and `out` the
/// outputs.
#[track_caller]
fn check_sizes(kernel: &str, (input, plane): (&[f32], BlockedPlane), weights: &[f32], out: &[f32]) {
    let (oh, ow) = plane.output();
    let pixels = plane.height * plane.width;
    assert!(
        matches!(plane.stride, 1 | 2)
            && input.len() >= pixels * L16
            && weights.len() >= 9 * L16
            && out.len() >= oh * ow * L16,
        "{kernel}: a {} x {} plane of 16 channels at stride {} (1 or 2) needs {} input values, \
         {} weights and {} output values; got {}, {} and {}",
        plane.height,
        plane.width,
        plane.stride,
        pixels * L16,
        9 * L16,
        oh * ow * L16,
        input.len(),
        weights.len(),
        out.len()
    );
}

/// The largest block of 16 planes (in bytes) that
/// [`depthwise_3x3_planes_to_blocked`] lays in blocks whole before its
/// window reads it, rather than a row at a time: a whole block this
/// size stays in L2, and the layout's calls a row cost more than the
/// rows' reuse saved over narrow planes.
///
/// One Zen 3 core (AVX2, 2026-12-07, the layers alone, the fastest of
/// 300 alternating passes over three inputs in turn, ms, the planes' own
/// kernels / a row at a time / whole): 512 x 26 x 26 0.22 / 0.24 / 0.20,
/// 1024 x 13 x 13 0.129 / 0.174 / 0.127, 256 x 38 x 38 0.36 / 0.33 /
/// 0.27; 128 x 75 x 75 0.79 / 0.66 / 0.55 and 32 x 150 x 150 0.79 / 0.58
/// / 0.52 alone, but in MobileNet-SSD, where the block laid whole (1.4
/// MB) passed L2 between the layer before and the 1x1 layer after,
/// conv1/dw ran 0.84 -> 0.93 ms laid whole against 0.86 -> 0.62 a row
/// at a time (first quartiles of 10-12 alternating runs of the builds
/// before and after).
pub const WHOLE_BLOCK_MAX_BYTES: usize = 256 << 10;

/// [`depthwise_3x3_blocked`] from Caffe's planes: `input` holds the
/// block's 16 channels one plane after another (`input[l * height *
/// width + y * width + x]` is channel `l` of pixel `(y, x)`), and `out`
/// becomes the same block of outputs, 16 channels a pixel, with the same
/// bits. The block is laid side by side into `scratch` first: whole
/// where it is at most [`WHOLE_BLOCK_MAX_BYTES`], else a row at a time
/// into a ring of the window's three rows, which stays in L1, as the
/// window reaches each row. The first depthwise layer of a MobileNet so
/// writes the blocks that its 1x1 layer reads, from the planes of the 3
/// x 3 layer before it. Says whether it ran.
///
/// ```
/// use blob_kernels::cpu::{BlockedPlane, depthwise_3x3_planes_to_blocked};
/// // Channel l's 2 x 2 plane holds l everywhere; every weight 1: a
/// // corner's window sums four of them.
/// let input: Vec<f32> = (0..16).flat_map(|l| [l as f32; 4]).collect();
/// let plane = BlockedPlane { height: 2, width: 2, stride: 1 };
/// let (mut out, mut scratch) = (vec![0.0f32; 4 * 16], Vec::new());
/// let weights = [1.0; 144];
/// if depthwise_3x3_planes_to_blocked(&input, plane, &weights, &[0.5; 16], false, &mut out, &mut scratch) {
///     assert_eq!(out[3], 4.0 * 3.0 + 0.5); // pixel 0, channel 3
/// }
/// ```
///
/// # Panics
/// As [`depthwise_3x3_blocked`].
#[track_caller]
pub fn depthwise_3x3_planes_to_blocked(
    input: &[f32],
    plane: BlockedPlane,
    weights: &[f32],
    bias: &[f32; 16],
    rectify: bool,
    out: &mut [f32],
    scratch: &mut Vec<f32>,
) -> bool {
    check_sizes(
        "depthwise_3x3_planes_to_blocked",
        (input, plane),
        weights,
        out,
    );
    let pixels = plane.height * plane.width;
    let planes: [&[f32]; L16] = std::array::from_fn(|l| &input[l * pixels..][..pixels]);
    if pixels * L16 * size_of::<f32>() <= WHOLE_BLOCK_MAX_BYTES {
        scratch.resize(pixels * L16, 0.0);
        super::interleave_runs(&planes, pixels, scratch);
        return depthwise_3x3_blocked(scratch, plane, weights, bias, rectify, out);
    }
    #[cfg(target_arch = "x86_64")]
    return row_by_row(planes, plane, (weights, bias, rectify), out, scratch);
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// [`depthwise_3x3_planes_to_blocked`] a row at a time: row y of the
/// planes laid in blocks into slot y % 3 of a ring in `scratch` (a
/// window's three rows never share one) when the window first reaches
/// it.
#[cfg(target_arch = "x86_64")]
fn row_by_row(
    planes: [&[f32]; L16],
    plane: BlockedPlane,
    taps: (&[f32], &[f32; 16], bool),
    out: &mut [f32],
    scratch: &mut Vec<f32>,
) -> bool {
    let width = plane.width;
    scratch.resize(3 * width * L16, 0.0);
    let ring = scratch.as_mut_ptr();
    let mut held = [usize::MAX; 3];
    let row_at = move |y: usize| {
        let slot = y % 3;
        // SAFETY: slot `slot` of the ring holds `width * 16` values
        // (resized above).
        unsafe {
            let to = std::slice::from_raw_parts_mut(ring.add(slot * width * L16), width * L16);
            if held[slot] != y {
                let runs: [&[f32]; L16] = std::array::from_fn(|l| &planes[l][y * width..][..width]);
                super::interleave_runs(&runs, width, to);
                held[slot] = y;
            }
            to.as_ptr()
        }
    };
    // SAFETY: each row the kernel reads is a slot of the ring, `width`
    // pixels; the caller checked the weights, biases and outputs.
    unsafe { on_rows(row_at, plane, taps, out) }
}

/// [`block`] on the widest family here (a pixel in one register of 16
/// lanes or two of 8), its rows from `row_at`; says whether one ran.
///
/// # Safety
/// `row_at(y)`, for each of the plane's rows `y`, points at its `width`
/// pixels of 16 values; `taps` holds nine taps of 16 weights; `out` holds
/// the outputs.
#[cfg(target_arch = "x86_64")]
unsafe fn on_rows(
    row_at: impl FnMut(usize) -> *const f32,
    plane: BlockedPlane,
    (weights, bias, rectify): (&[f32], &[f32; 16], bool),
    out: &mut [f32],
) -> bool {
    let args = (row_at, plane, weights.as_ptr(), bias.as_ptr());
    let out = out.as_mut_ptr();
    on_lanes!(|L| {
        // SAFETY: as the caller promises.
        unsafe {
            match (L::N == L16, rectify) {
                (true, true) => block::<L, 1, true>(args, out),
                (true, false) => block::<L, 1, false>(args, out),
                (false, true) => block::<L, 2, true>(args, out),
                (false, false) => block::<L, 2, false>(args, out),
            }
        }
    })
    .is_some()
}

/// [`depthwise_3x3_blocked`] in registers of `L`, a pixel in `P` of them:
/// each row's first and last outputs (and any whose window passes the
/// plane's right edge) one at a time with the border's zeros, the
/// others [`PIXELS`] at a time reading each window row's pixels once.
///
/// # Safety
/// `L`'s instructions are enabled; `P * L::N == 16`; the pointers are
/// as [`depthwise_3x3_blocked`] checks its slices.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn block<L: Lanes, const P: usize, const RECTIFY: bool>(
    (mut row_at, plane, weights, bias): (
        impl FnMut(usize) -> *const f32,
        BlockedPlane,
        *const f32,
        *const f32,
    ),
    out: *mut f32,
) {
    let BlockedPlane {
        height,
        width,
        stride,
    } = plane;
    let (oh, ow) = plane.output();
    // SAFETY: as the caller promises: nine taps of 16 weights, 16 biases.
    let (w, bias) = unsafe {
        let w: [[L::V; P]; 9] = std::array::from_fn(|t| {
            std::array::from_fn(|i| L::load(weights.add(t * L16 + i * L::N)))
        });
        let bias: [L::V; P] = std::array::from_fn(|i| L::load(bias.add(i * L::N)));
        (w, bias)
    };
    for r in 0..oh {
        // The window's rows; null where the padding lies.
        let rows: [*const f32; 3] = std::array::from_fn(|ki| {
            let y = (r * stride + ki).wrapping_sub(1);
            if y < height {
                row_at(y)
            } else {
                std::ptr::null()
            }
        });
        let out_row = out.wrapping_add(r * ow * L16);
        let mut q = 0;
        // SAFETY: each output's reads are rows of the plane (or none) and
        // columns inside them; its write is inside row r.
        unsafe {
            while q < ow {
                // The window's columns q s - 1 ..= (q + PIXELS - 1) s + 1.
                let inside = q > 0 && (q + PIXELS - 1) * stride + 1 < width;
                if inside {
                    if stride == 1 {
                        strip::<L, P, 1, RECTIFY>(rows, (q, width), (&w, bias), out_row);
                    } else {
                        strip::<L, P, 2, RECTIFY>(rows, (q, width), (&w, bias), out_row);
                    }
                    q += PIXELS;
                } else {
                    edge::<L, P, RECTIFY>(rows, (q, width, stride), (&w, bias), out_row);
                    q += 1;
                }
            }
        }
    }
}

/// [`PIXELS`] outputs of a row from output `q`, `S` pixels apart, each
/// window row's `(PIXELS - 1) S + 3` pixels loaded once (zeros for a
/// row of the padding); the taps in order, product rounded, then added.
///
/// # Safety
/// As [`block`]; the outputs' windows lie inside the plane's columns.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn strip<L: Lanes, const P: usize, const S: usize, const RECTIFY: bool>(
    rows: [*const f32; 3],
    (q, _width): (usize, usize),
    (w, bias): (&[[L::V; P]; 9], [L::V; P]),
    out_row: *mut f32,
) {
    const MOST: usize = (PIXELS - 1) * 2 + 3;
    let reach = (PIXELS - 1) * S + 3;
    // SAFETY: as the caller promises.
    unsafe {
        let mut acc = [[L::zero(); P]; PIXELS];
        for (ki, &row) in rows.iter().enumerate() {
            let first = row.wrapping_add((q * S - 1) * L16);
            for i in 0..P {
                let mut pixels = [L::zero(); MOST];
                if !row.is_null() {
                    for (x, pixel) in pixels.iter_mut().take(reach).enumerate() {
                        *pixel = L::load(first.add(x * L16 + i * L::N));
                    }
                }
                window_row::<L, P, PIXELS, MOST>(&mut acc, &pixels, &w[ki * 3..][..3], (i, S));
            }
        }
        for (j, acc) in acc.iter().enumerate() {
            let o = out_row.add((q + j) * L16);
            for (i, acc) in acc.iter().enumerate() {
                L::store(o.add(i * L::N), finish::<L, RECTIFY>(*acc, bias[i]));
            }
        }
    }
}

/// Output `q` of a row alone, each tap's pixel loaded where it lies in
/// the plane and zero in the padding.
///
/// # Safety
/// As [`block`].
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn edge<L: Lanes, const P: usize, const RECTIFY: bool>(
    rows: [*const f32; 3],
    (q, width, stride): (usize, usize, usize),
    (w, bias): (&[[L::V; P]; 9], [L::V; P]),
    out_row: *mut f32,
) {
    // SAFETY: as the caller promises; a column is read only inside the
    // plane's width, a row only where it is one of the plane's.
    unsafe {
        let mut acc = [L::zero(); P];
        for (ki, &row) in rows.iter().enumerate() {
            for kj in 0..3 {
                let x = (q * stride + kj).wrapping_sub(1);
                for (i, acc) in acc.iter_mut().enumerate() {
                    let v = if row.is_null() || x >= width {
                        L::zero()
                    } else {
                        L::load(row.add(x * L16 + i * L::N))
                    };
                    *acc = L::add(*acc, L::mul(w[ki * 3 + kj][i], v));
                }
            }
        }
        let o = out_row.add(q * L16);
        for (i, acc) in acc.iter().enumerate() {
            L::store(o.add(i * L::N), finish::<L, RECTIFY>(*acc, bias[i]));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::{InterleavedTaps, depthwise_interleaved};

    fn values(len: usize, seed: u32) -> Vec<f32> {
        let mut state = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
        (0..len)
            .map(|_| {
                state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (state >> 8) as f32 / (1u32 << 23) as f32 - 1.0
            })
            .collect()
    }

    /// Planes wide and narrow, square and not, odd and even, at both
    /// strides, with and without ReLU, and some -0 and negative inputs:
    /// the bits of [`depthwise_interleaved`] over the plane padded with
    /// zeros, from blocks and from Caffe's planes (laid whole, and a row
    /// at a time). Reading a pixel of the wrong column or row, or leaving
    /// a padding tap out of a border output's sum, fails.
    #[test]
    fn blocks_in_place_give_the_padded_planes_bits() {
        // 75 x 75 (360 KB a block) passes WHOLE_BLOCK_MAX_BYTES: its
        // rows are laid in a ring.
        assert!(75 * 75 * L16 * size_of::<f32>() > WHOLE_BLOCK_MAX_BYTES);
        for (n, (height, width)) in [
            (1, 1),
            (2, 3),
            (5, 5),
            (10, 10),
            (19, 19),
            (7, 24),
            (38, 38),
            (75, 75),
        ]
        .into_iter()
        .enumerate()
        {
            let mut input = values(height * width * L16, 1 + n as u32);
            input.iter_mut().step_by(7).for_each(|v| *v = -0.0);
            let weights = values(9 * L16, 20 + n as u32);
            let bias: [f32; 16] = values(L16, 40 + n as u32).try_into().unwrap();
            // The same block as Caffe's 16 planes.
            let mut planes = vec![0.0f32; height * width * L16];
            for (p, pixel) in input.chunks_exact(L16).enumerate() {
                for (l, &v) in pixel.iter().enumerate() {
                    planes[l * height * width + p] = v;
                }
            }
            let (hp, wp) = (height + 2, width + 2);
            let mut padded = vec![0.0f32; hp * wp * L16];
            for y in 0..height {
                padded[((y + 1) * wp + 1) * L16..][..width * L16]
                    .copy_from_slice(&input[y * width * L16..][..width * L16]);
            }
            let offsets: Vec<usize> = (0..3)
                .flat_map(|ki| (0..3).map(move |kj| ki * wp + kj))
                .collect();
            for stride in [1, 2] {
                let plane = BlockedPlane {
                    height,
                    width,
                    stride,
                };
                let (oh, ow) = plane.output();
                let taps = InterleavedTaps {
                    offsets: &offsets,
                    row_step: stride * wp,
                    column_step: stride,
                    rows: oh,
                    columns: ow,
                };
                for rectify in [false, true] {
                    let mut want = vec![f32::NAN; oh * ow * L16];
                    let mut got = want.clone();
                    let ran =
                        depthwise_interleaved(&padded, taps, &weights, &bias, rectify, &mut want);
                    assert_eq!(
                        depthwise_3x3_blocked(&input, plane, &weights, &bias, rectify, &mut got),
                        ran
                    );
                    let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                    assert!(
                        bits(&want) == bits(&got),
                        "{height} x {width}, stride {stride}, rectify {rectify}"
                    );
                    let mut from_planes = vec![f32::NAN; oh * ow * L16];
                    let mut scratch = Vec::new();
                    let laid = depthwise_3x3_planes_to_blocked(
                        &planes,
                        plane,
                        &weights,
                        &bias,
                        rectify,
                        &mut from_planes,
                        &mut scratch,
                    );
                    assert_eq!(laid, ran);
                    assert!(
                        bits(&want) == bits(&from_planes),
                        "from planes: {height} x {width}, stride {stride}, rectify {rectify}"
                    );
                }
            }
        }
    }
}
