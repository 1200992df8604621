//! The CPU side of Pooling: MAX (remembering each maximum's position for
//! the backward pass) and AVE, with Caffe's windows (height and width
//! each with its own size, stride and padding, clipped to the input).
//!
//! With a stride longer than the window, Caffe's ceil rule can place the
//! last window past the input's end (1x1 windows with stride 4 over 7
//! start at 0, 4 and 8). Such a window holds nothing: it gives 0 and
//! passes no gradient, where Caffe writes -FLT_MAX and, backward, outside
//! its blob.

use blob_kernels::cpu;
use blob_runtime::MathElement;

use crate::f32_view::{as_f32, as_f32_mut};

/// Where Caffe starts each MAX window, -FLT_MAX in f32 and f64 alike: a
/// value is taken only if it is larger, so NaN never wins, and a window
/// of NaN or -inf alone gives -FLT_MAX, as Caffe's does.
const CAFFE_MAX_START: f64 = f32::MIN as f64;

/// A pooling's sizes for one input.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PoolGeometry {
    pub planes: usize,
    pub h: usize,
    pub w: usize,
    pub oh: usize,
    pub ow: usize,
    /// The window's (height, width).
    pub kernel: [usize; 2],
    /// The step between windows, down and across.
    pub stride: [usize; 2],
    /// Zero padding on each side, (rows, columns) (MAX ignores it; AVE
    /// counts it in its divisor, as Caffe does).
    pub pad: [usize; 2],
}

impl PoolGeometry {
    /// The window of output `(r, q)`: rows `h0..h1`, columns `w0..w1`,
    /// clipped to the input (empty when it starts past the input's end).
    pub(crate) fn window(&self, r: usize, q: usize) -> (usize, usize, usize, usize) {
        let span = |a: usize, o: usize, n: usize| {
            let start = (o * self.stride[a]).saturating_sub(self.pad[a]).min(n);
            let end = (o * self.stride[a] + self.kernel[a])
                .saturating_sub(self.pad[a])
                .min(n);
            (start, end.max(start))
        };
        let ((h0, h1), (w0, w1)) = (span(0, r, self.h), span(1, q, self.w));
        (h0, h1, w0, w1)
    }

    /// The 2x2 window at stride 2 over even planes, with a loop of its own.
    fn is_even_2x2(&self) -> bool {
        self.kernel == [2, 2]
            && self.stride == [2, 2]
            && self.pad == [0, 0]
            && self.h.is_multiple_of(2)
            && self.w.is_multiple_of(2)
    }

    /// AVE's divisor for output `(r, q)`: the window clipped to the
    /// padded input, padding counted (Caffe's `pool_size`).
    fn divisor(&self, r: usize, q: usize) -> usize {
        let extent = |a: usize, o: usize, n: usize| {
            let start = o * self.stride[a];
            let end = (start + self.kernel[a]).min(n + 2 * self.pad[a]);
            end.saturating_sub(start)
        };
        extent(0, r, self.h) * extent(1, q, self.w)
    }

    /// How a pass is cut across cores, in whole planes: the input and
    /// output values of one part (at least 1, for chunking). Planes are
    /// independent, so each part is the same pass over fewer planes.
    fn chunks(&self) -> (usize, usize) {
        /// Below this many input values a pass stays on one core (two
        /// threads: O-Net's pool2, 64 planes of 21 x 21, 29 -> 18 µs
        /// split; R-Net's pool1, 28 of 22 x 22, 13.3 -> 11.3 µs).
        const PARALLEL_MIN: usize = 1 << 13;
        let per = if self.planes * self.h * self.w < PARALLEL_MIN {
            self.planes
        } else {
            self.planes.div_ceil(cpu::cores())
        };
        (
            (per * self.h * self.w).max(1),
            (per * self.oh * self.ow).max(1),
        )
    }

    /// The geometry of the part whose output holds `outputs` values.
    fn part(&self, outputs: usize) -> PoolGeometry {
        PoolGeometry {
            planes: outputs / (self.oh * self.ow).max(1),
            ..*self
        }
    }

    /// Calls `f(plane, output index, window)` for every output.
    fn for_each_output(&self, mut f: impl FnMut(usize, usize, (usize, usize, usize, usize))) {
        for pl in 0..self.planes {
            for r in 0..self.oh {
                for q in 0..self.ow {
                    f(pl, (pl * self.oh + r) * self.ow + q, self.window(r, q));
                }
            }
        }
    }
}

/// What `argmax` holds for a window with no input: no position.
pub(crate) const NO_POSITION: u32 = u32::MAX;

/// MAX pooling; `argmax[o]` is the position of output `o`'s maximum in its
/// plane (the first one, as Caffe ranks ties), [`NO_POSITION`] for an
/// empty window. Parts of the planes run on their own cores.
pub(crate) fn max_forward<T: MathElement>(
    g: &PoolGeometry,
    x: &[T],
    y: &mut [T],
    argmax: &mut [u32],
) {
    let (i, o) = g.chunks();
    let items = x[..g.planes * g.h * g.w]
        .chunks(i)
        .zip(y[..g.planes * g.oh * g.ow].chunks_mut(o))
        .zip(argmax.chunks_mut(o));
    cpu::on_cores(items, |((x, y), a)| {
        max_forward_part(&g.part(y.len()), x, y, a)
    });
}

/// MAX pooling, the maxima alone, for a pass no backward follows (a
/// deploy net's): no positions kept, the windows' maxima vectorised.
pub(crate) fn max_values<T: MathElement>(g: &PoolGeometry, x: &[T], y: &mut [T]) {
    forward_in_parts(g, x, y, max_values_part);
}

/// Runs `pass` on each part of the planes, input to output, the parts on
/// their own cores.
fn forward_in_parts<T: MathElement>(
    g: &PoolGeometry,
    x: &[T],
    y: &mut [T],
    pass: impl Fn(&PoolGeometry, &[T], &mut [T]) + Sync,
) {
    let (i, o) = g.chunks();
    let (x, y) = (&x[..g.planes * g.h * g.w], &mut y[..g.planes * g.oh * g.ow]);
    cpu::on_cores(x.chunks(i).zip(y.chunks_mut(o)), |(x, y)| {
        pass(&g.part(y.len()), x, y)
    });
}

/// Routes each output gradient to the input that was the max.
pub(crate) fn max_backward<T: MathElement>(
    g: &PoolGeometry,
    dy: &[T],
    argmax: &[u32],
    dx: &mut [T],
) {
    let (i, o) = g.chunks();
    let items = dy[..g.planes * g.oh * g.ow]
        .chunks(o)
        .zip(argmax.chunks(o))
        .zip(dx[..g.planes * g.h * g.w].chunks_mut(i));
    cpu::on_cores(items, |((dy, a), dx)| {
        max_backward_part(&g.part(dy.len()), dy, a, dx)
    });
}

/// AVE pooling: each output the mean of its (clipped) window.
pub(crate) fn ave_forward<T: MathElement>(g: &PoolGeometry, x: &[T], y: &mut [T]) {
    forward_in_parts(g, x, y, ave_forward_part);
}

/// Spreads each output gradient evenly over its window.
pub(crate) fn ave_backward<T: MathElement>(g: &PoolGeometry, dy: &[T], dx: &mut [T]) {
    let (i, o) = g.chunks();
    let items = dy[..g.planes * g.oh * g.ow]
        .chunks(o)
        .zip(dx[..g.planes * g.h * g.w].chunks_mut(i));
    cpu::on_cores(items, |(dy, dx)| {
        ave_backward_part(&g.part(dy.len()), dy, dx)
    });
}

/// [`max_forward`] on one part.
fn max_forward_part<T: MathElement>(g: &PoolGeometry, x: &[T], y: &mut [T], argmax: &mut [u32]) {
    if g.is_even_2x2() {
        return max_2x2(g, x, y, argmax);
    }
    let (h, w) = (g.h, g.w);
    let neg = T::from_f64(CAFFE_MAX_START);
    // Per output row: each column's maximum over the window's rows first
    // (an element-wise pass the compiler vectorises), then each window's
    // over its columns. Ties go to the first position in row-major order,
    // as Caffe's scan gives them: a column keeps its first row, and of
    // equal columns the smallest position wins.
    let mut colmax = vec![neg; w];
    let mut colrow = vec![0u32; w];
    for pl in 0..g.planes {
        let plane = &x[pl * h * w..][..h * w];
        for r in 0..g.oh {
            let (h0, h1, _, _) = g.window(r, 0);
            colmax.fill(neg);
            colrow.fill(h0 as u32);
            for hh in h0..h1 {
                let row = &plane[hh * w..][..w];
                for ((m, at), &v) in colmax.iter_mut().zip(colrow.iter_mut()).zip(row) {
                    if v > *m {
                        *m = v;
                        *at = hh as u32;
                    }
                }
            }
            let o = (pl * g.oh + r) * g.ow;
            for q in 0..g.ow {
                let (_, _, w0, w1) = g.window(r, q);
                if h0 == h1 || w0 == w1 {
                    y[o + q] = T::ZERO;
                    argmax[o + q] = NO_POSITION;
                    continue;
                }
                let mut best = neg;
                let mut at = h0 * w + w0;
                for ww in w0..w1 {
                    let (v, pos) = (colmax[ww], colrow[ww] as usize * w + ww);
                    if v > best || (v == best && pos < at) {
                        best = v;
                        at = pos;
                    }
                }
                y[o + q] = best;
                argmax[o + q] = at as u32;
            }
        }
    }
}

/// The common 2x2, stride 2 window over even planes, without the general
/// loop's bounds: the same maxima and first-maximum ties.
fn max_2x2<T: MathElement>(g: &PoolGeometry, x: &[T], y: &mut [T], argmax: &mut [u32]) {
    let (h, w, oh, ow) = (g.h, g.w, g.oh, g.ow);
    if let (Some(x), Some(y)) = (as_f32(x), as_f32_mut(y))
        && cpu::max_pool_2x2_positions(x, g.planes, h, w, y, argmax)
    {
        return;
    }
    let neg = T::from_f64(CAFFE_MAX_START);
    for pl in 0..g.planes {
        let plane = &x[pl * h * w..][..h * w];
        for r in 0..oh {
            let top = &plane[2 * r * w..][..w];
            let bottom = &plane[(2 * r + 1) * w..][..w];
            let out = &mut y[(pl * oh + r) * ow..][..ow];
            let arg = &mut argmax[(pl * oh + r) * ow..][..ow];
            for q in 0..ow {
                let c = [top[2 * q], top[2 * q + 1], bottom[2 * q], bottom[2 * q + 1]];
                let at = [
                    2 * r * w + 2 * q,
                    2 * r * w + 2 * q + 1,
                    (2 * r + 1) * w + 2 * q,
                    (2 * r + 1) * w + 2 * q + 1,
                ];
                // From -FLT_MAX, as Caffe's scan starts: a NaN never wins.
                let (mut best, mut value) = (0, neg);
                for (i, &v) in c.iter().enumerate() {
                    if v > value {
                        (best, value) = (i, v);
                    }
                }
                out[q] = value;
                arg[q] = at[best] as u32;
            }
        }
    }
}

/// [`max_values`] on one part.
fn max_values_part<T: MathElement>(g: &PoolGeometry, x: &[T], y: &mut [T]) {
    if g.is_even_2x2() {
        return max_values_2x2(g, x, y);
    }
    let stride2 = cpu::Stride2Pool {
        planes: g.planes,
        input: [g.h, g.w],
        kernel: g.kernel,
        output: [g.oh, g.ow],
    };
    if g.stride == [2, 2]
        && g.pad == [0, 0]
        && let (Some(x), Some(y)) = (as_f32(x), as_f32_mut(y))
        && cpu::max_pool_stride2(x, stride2, y)
    {
        return;
    }
    let stride1 = cpu::Stride1Pool {
        planes: g.planes,
        input: [g.h, g.w],
        kernel: g.kernel,
        pad: g.pad,
        output: [g.oh, g.ow],
    };
    if g.stride == [1, 1]
        && let (Some(x), Some(y)) = (as_f32(x), as_f32_mut(y))
        && cpu::max_pool_stride1(x, stride1, y)
    {
        return;
    }
    let (h, w) = (g.h, g.w);
    let neg = T::from_f64(CAFFE_MAX_START);
    let larger = |m: T, v: T| if v > m { v } else { m };
    // Each output column's window, the same for every row and plane.
    let columns: Vec<(usize, usize)> = (0..g.ow)
        .map(|q| {
            let (_, _, w0, w1) = g.window(0, q);
            (w0, w1)
        })
        .collect();
    // The columns whose windows are whole (not clipped) make one run, as
    // the windows move right by the stride.
    let whole = |c: &&(usize, usize)| c.1 - c.0 == g.kernel[1];
    let first_whole = columns.iter().position(|c| whole(&c)).unwrap_or(g.ow);
    let end_whole = first_whole + columns[first_whole..].iter().take_while(whole).count();
    let clipped: Vec<usize> = (0..first_whole).chain(end_whole..g.ow).collect();
    // Per output row: each column's maximum over the window's rows first,
    // then each window's over its columns: the whole windows one offset at
    // a time (each pass a strided loop the compiler vectorises), the
    // clipped ones one by one. Both fold each window left to right.
    // Padded past the row with values no window takes, so that a run of
    // windows at a constant stride reads whole chunks of it.
    let mut colmax = vec![neg; w + STRIDE_PAD];
    cpu::vectorized(
        #[inline(always)]
        || {
            for pl in 0..g.planes {
                let plane = &x[pl * h * w..][..h * w];
                for r in 0..g.oh {
                    let (h0, h1, _, _) = g.window(r, 0);
                    let o = (pl * g.oh + r) * g.ow;
                    let out = &mut y[o..o + g.ow];
                    if h0 == h1 {
                        out.fill(T::ZERO);
                        continue;
                    }
                    // From -FLT_MAX, as Caffe's scan starts: a NaN never wins.
                    colmax[..w].fill(neg);
                    for hh in h0..h1 {
                        cpu::zip_whole_in_place(&mut colmax, &plane[hh * w..][..w], larger);
                    }
                    let run = &mut out[first_whole..end_whole];
                    if let Some(&(first_start, _)) = columns.get(first_whole) {
                        let windows = &colmax[first_start..];
                        match g.stride[1] {
                            1 => whole_windows::<T, 1>(run, windows, g.kernel[1], larger),
                            2 => whole_windows::<T, 2>(run, windows, g.kernel[1], larger),
                            s => {
                                for (q, o) in run.iter_mut().enumerate() {
                                    let window = &windows[q * s..][..g.kernel[1]];
                                    *o = window[1..].iter().fold(window[0], |m, &v| larger(m, v));
                                }
                            }
                        }
                    }
                    for &q in &clipped {
                        let (w0, w1) = columns[q];
                        out[q] = if w0 == w1 {
                            T::ZERO
                        } else {
                            colmax[w0 + 1..w1]
                                .iter()
                                .fold(colmax[w0], |m, &v| larger(m, v))
                        };
                    }
                }
            }
        },
    );
}

/// What [`max_values_part`]'s column maxima hold past the row: enough for
/// the last window's chunk at the strides [`whole_windows`] takes.
const STRIDE_PAD: usize = 2;

/// `run[q]` = the maximum of `windows[q * S..q * S + kernel]`, one offset
/// at a time over every window: at a constant stride each pass is a loop
/// the compiler vectorises (a stride known only at run time makes it a
/// gather, 3-4x slower on MTCNN's 3x3, stride 2 pools). `windows` holds
/// at least `S` values past the last window's start plus `kernel - 1`.
#[inline(always)]
fn whole_windows<T: MathElement, const S: usize>(
    run: &mut [T],
    windows: &[T],
    kernel: usize,
    larger: impl Fn(T, T) -> T,
) {
    assert!(
        windows.len() + 1 >= run.len() * S + kernel,
        "a pooling row's column maxima end before its last window's chunk"
    );
    for (o, chunk) in run.iter_mut().zip(windows.chunks_exact(S)) {
        *o = chunk[0];
    }
    for offset in 1..kernel {
        for (o, chunk) in run.iter_mut().zip(windows[offset..].chunks_exact(S)) {
            *o = larger(*o, chunk[0]);
        }
    }
}

/// [`max_values`] over the common 2x2, stride 2 window of even planes,
/// in the general path's order (each column's maximum over the two rows
/// from -FLT_MAX, then the pair's), so a NaN never wins here either.
fn max_values_2x2<T: MathElement>(g: &PoolGeometry, x: &[T], y: &mut [T]) {
    let (h, w, oh, ow) = (g.h, g.w, g.oh, g.ow);
    if let (Some(x), Some(y)) = (as_f32(x), as_f32_mut(y))
        && cpu::max_pool_2x2(x, g.planes, h, w, y)
    {
        return;
    }
    let neg = T::from_f64(CAFFE_MAX_START);
    let larger = |m: T, v: T| if v > m { v } else { m };
    cpu::vectorized(
        #[inline(always)]
        || {
            for pl in 0..g.planes {
                let plane = &x[pl * h * w..][..h * w];
                for r in 0..oh {
                    let top = &plane[2 * r * w..][..2 * ow];
                    let bottom = &plane[(2 * r + 1) * w..][..2 * ow];
                    let out = &mut y[(pl * oh + r) * ow..][..ow];
                    for ((o, t), b) in out
                        .iter_mut()
                        .zip(top.chunks_exact(2))
                        .zip(bottom.chunks_exact(2))
                    {
                        let left = larger(larger(neg, t[0]), b[0]);
                        let right = larger(larger(neg, t[1]), b[1]);
                        *o = larger(left, right);
                    }
                }
            }
        },
    );
}

/// [`max_backward`] on one part.
fn max_backward_part<T: MathElement>(g: &PoolGeometry, dy: &[T], argmax: &[u32], dx: &mut [T]) {
    let (plane_in, plane_out) = (g.h * g.w, g.oh * g.ow);
    // The 2x2 forward's positions lie in their own windows: each input
    // written once, with no pass to zero them first (LeNet's pool1, 2.9
    // MB of input gradient a batch of 64).
    if g.is_even_2x2()
        && let (Some(dy), Some(dx)) = (as_f32(dy), as_f32_mut(dx))
        && cpu::max_unpool_2x2(dy, argmax, g.planes, g.h, g.w, dx)
    {
        return;
    }
    dx.fill(T::ZERO);
    if plane_in == 0 || plane_out == 0 {
        return;
    }
    // Plane by plane: finding each value's plane by division cost ~15
    // cycles a value, most of LeNet's pool1 backward.
    let planes = dy.chunks(plane_out).zip(argmax.chunks(plane_out));
    for (dx, (dy, argmax)) in dx.chunks_mut(plane_in).zip(planes) {
        for (&d, &at) in dy.iter().zip(argmax) {
            if at != NO_POSITION {
                dx[at as usize] += d;
            }
        }
    }
}

/// [`ave_forward`] on one part.
fn ave_forward_part<T: MathElement>(g: &PoolGeometry, x: &[T], y: &mut [T]) {
    if let (Some(x), Some(y)) = (as_f32(x), as_f32_mut(y)) {
        if !ave_forward_global(g, x, y) {
            ave_forward_side_by_side(g, x, y);
        }
        return;
    }
    let (h, w) = (g.h, g.w);
    g.for_each_output(|pl, o, (h0, h1, w0, w1)| {
        let size = g.divisor((o / g.ow) % g.oh, o % g.ow);
        if size == 0 || h0 == h1 || w0 == w1 {
            y[o] = T::ZERO;
            return;
        }
        let plane = &x[pl * h * w..][..h * w];
        let mut sum = T::ZERO;
        for hh in h0..h1 {
            for &v in &plane[hh * w + w0..hh * w + w1] {
                sum += v;
            }
        }
        y[o] = sum / T::from_f64(size as f64);
    });
}

/// [`ave_forward_part`] for f32 where one window covers each whole plane
/// (a global pool: SqueezeNet's pool10, GoogLeNet's and ResNet-50's
/// pool5): each plane's sum in Caffe's order ([`cpu::run_sums`], the
/// planes turned side by side in registers, not in memory), over the
/// divisor. Says whether the shape was one; nothing is written if not.
fn ave_forward_global(g: &PoolGeometry, x: &[f32], y: &mut [f32]) -> bool {
    let plane = g.h * g.w;
    let whole = g.oh * g.ow == 1 && g.window(0, 0) == (0, g.h, 0, g.w);
    if !whole || g.divisor(0, 0) == 0 {
        return false;
    }
    let size = g.divisor(0, 0) as f32;
    let planes: Vec<&[f32]> = x.chunks(plane).take(g.planes).collect();
    let y = &mut y[..g.planes];
    cpu::run_sums(&planes, plane, y);
    for out in y {
        *out /= size;
    }
    true
}

thread_local! {
    /// [`ave_forward_side_by_side`]'s planes and outputs, 16 side by
    /// side, kept between passes.
    static SIDE_BY_SIDE: std::cell::RefCell<(cpu::AlignedVec<f32>, cpu::AlignedVec<f32>)> =
        const { std::cell::RefCell::new((cpu::AlignedVec::new(), cpu::AlignedVec::new())) };
}

/// [`ave_forward_part`] for f32: 16 planes at once, laid side by side
/// ([`cpu::interleave_runs`]), each lane summing its own plane's window
/// in Caffe's order, so the same bits as the plane-by-plane loop. That
/// loop is one chain of dependent additions per window, waiting on each
/// (SqueezeNet's global pool10, 1000 planes of 13 x 13, took 0.09 ms).
fn ave_forward_side_by_side(g: &PoolGeometry, x: &[f32], y: &mut [f32]) {
    const LANES: usize = cpu::INTERLEAVED_LANES;
    let (plane, out_plane) = (g.h * g.w, g.oh * g.ow);
    SIDE_BY_SIDE.with(|buffers| {
        let (inputs, outputs) = &mut *buffers.borrow_mut();
        inputs.resize(plane * LANES);
        outputs.resize(out_plane * LANES);
        for p0 in (0..g.planes).step_by(LANES) {
            let n = LANES.min(g.planes - p0);
            let mut runs: [&[f32]; LANES] = [&[]; LANES];
            for (l, run) in runs.iter_mut().enumerate().take(n) {
                *run = &x[(p0 + l) * plane..][..plane];
            }
            cpu::interleave_runs(&runs[..n], plane, inputs);
            cpu::vectorized(
                #[inline(always)]
                || {
                    for r in 0..g.oh {
                        for q in 0..g.ow {
                            let (h0, h1, w0, w1) = g.window(r, q);
                            let size = g.divisor(r, q);
                            let mut sum = [0.0f32; LANES];
                            if size != 0 {
                                for hh in h0..h1 {
                                    for at in hh * g.w + w0..hh * g.w + w1 {
                                        let v = &inputs[at * LANES..][..LANES];
                                        for (s, &v) in sum.iter_mut().zip(v) {
                                            *s += v;
                                        }
                                    }
                                }
                                let size = size as f32;
                                for s in &mut sum {
                                    *s /= size;
                                }
                            }
                            let at = (r * g.ow + q) * LANES;
                            outputs[at..at + LANES].copy_from_slice(&sum);
                        }
                    }
                },
            );
            let mut outs: [&mut [f32]; LANES] = std::array::from_fn(|_| <&mut [f32]>::default());
            for (out, y) in outs
                .iter_mut()
                .zip(y[p0 * out_plane..].chunks_mut(out_plane))
            {
                *out = y;
            }
            cpu::deinterleave_runs(outputs, out_plane, &mut outs[..n]);
        }
    });
}

/// [`ave_backward`] on one part.
fn ave_backward_part<T: MathElement>(g: &PoolGeometry, dy: &[T], dx: &mut [T]) {
    let (h, w) = (g.h, g.w);
    dx.fill(T::ZERO);
    g.for_each_output(|pl, o, (h0, h1, w0, w1)| {
        let size = g.divisor((o / g.ow) % g.oh, o % g.ow);
        if size == 0 || h0 == h1 || w0 == w1 {
            return;
        }
        let share = dy[o] / T::from_f64(size as f64);
        let plane = &mut dx[pl * h * w..][..h * w];
        for hh in h0..h1 {
            for v in &mut plane[hh * w + w0..hh * w + w1] {
                *v += share;
            }
        }
    });
}

#[cfg(test)]
mod max_tests {
    use super::*;

    /// Caffe's scan: rows, then columns, the first strict maximum.
    fn scan(g: &PoolGeometry, x: &[f32]) -> (Vec<f32>, Vec<u32>) {
        let (mut y, mut a) = (
            vec![0.0; g.planes * g.oh * g.ow],
            vec![0; g.planes * g.oh * g.ow],
        );
        g.for_each_output(|pl, o, (h0, h1, w0, w1)| {
            if h0 == h1 || w0 == w1 {
                a[o] = NO_POSITION;
                return;
            }
            let (mut best, mut at) = (f32::MIN, h0 * g.w + w0);
            for hh in h0..h1 {
                for ww in w0..w1 {
                    let v = x[pl * g.h * g.w + hh * g.w + ww];
                    if v > best {
                        best = v;
                        at = hh * g.w + ww;
                    }
                }
            }
            y[o] = best;
            a[o] = at as u32;
        });
        (y, a)
    }

    #[test]
    fn columns_first_gives_caffes_maxima_and_ties() {
        for (h, w, k, s, p) in [
            (7, 9, 3, 2, 0),
            (6, 5, 2, 1, 0),
            (7, 7, 1, 4, 0),
            (5, 8, 3, 3, 0),
            (4, 4, 4, 1, 0),
            // 2x2 at stride 2 over even planes: a loop (and an AVX-512
            // kernel) of their own; rows of 4, 8, 40 (two vectors) inputs.
            (6, 4, 2, 2, 0),
            (4, 8, 2, 2, 0),
            (2, 40, 2, 2, 0),
            // Stride 1, padded (GoogLeNet's inception pools) or not: an
            // AVX-512 kernel of their own; rows of 14 and 37.
            (14, 14, 3, 1, 1),
            (5, 37, 3, 1, 1),
            (6, 7, 2, 1, 1),
        ] {
            let g = PoolGeometry {
                planes: 3,
                h,
                w,
                oh: (h + 2 * p - k).div_ceil(s) + 1,
                ow: (w + 2 * p - k).div_ceil(s) + 1,
                kernel: [k, k],
                stride: [s, s],
                pad: [p, p],
            };
            // Few distinct values: many ties, some NaN.
            let x: Vec<f32> = (0..3 * h * w)
                .map(|i| match (i * 7919) % 11 {
                    10 => f32::NAN,
                    v => (v % 4) as f32,
                })
                .collect();
            let (want_y, want_a) = scan(&g, &x);
            let (mut y, mut a) = (vec![9.0; want_y.len()], vec![7; want_a.len()]);
            max_forward_part(&g, &x, &mut y, &mut a);
            assert_eq!(a, want_a, "{h}x{w} k{k} s{s} p{p}");
            assert_eq!(y, want_y, "{h}x{w} k{k} s{s} p{p}");
            let mut values = vec![9.0; want_y.len()];
            max_values_part(&g, &x, &mut values);
            assert_eq!(values, want_y, "values alone: {h}x{w} k{k} s{s} p{p}");
            // f64 takes the loops that f32 leaves to AVX-512 kernels.
            let x: Vec<f64> = x.iter().map(|&v| v.into()).collect();
            let want_y: Vec<f64> = want_y.iter().map(|&v| v.into()).collect();
            let (mut y, mut a) = (vec![9.0; want_y.len()], vec![7; want_a.len()]);
            max_forward_part(&g, &x, &mut y, &mut a);
            assert_eq!(
                (a, y),
                (want_a, want_y.clone()),
                "f64: {h}x{w} k{k} s{s} p{p}"
            );
            let mut values = vec![9.0; want_y.len()];
            max_values_part(&g, &x, &mut values);
            assert_eq!(values, want_y, "f64 values alone: {h}x{w} k{k} s{s} p{p}");
        }
    }
}

#[cfg(test)]
mod ave_tests {
    use super::*;

    #[test]
    fn side_by_side_sums_give_caffes_bits() {
        // Planes fewer than, equal to and past a group of 16; global,
        // padded, ceil-rounded windows and one past the input's end.
        for (planes, h, w, k, s, p) in [
            (3, 13, 13, 13, 1, 0),
            (16, 7, 9, 3, 2, 1),
            (19, 8, 8, 2, 2, 0),
            (21, 7, 7, 1, 4, 0),
            (33, 5, 6, 3, 1, 1),
        ] {
            let g = PoolGeometry {
                planes,
                h,
                w,
                oh: (h + 2 * p - k).div_ceil(s) + 1,
                ow: (w + 2 * p - k).div_ceil(s) + 1,
                kernel: [k, k],
                stride: [s, s],
                pad: [p, p],
            };
            let x: Vec<f32> = (0..planes * h * w)
                .map(|i| ((i * 7919 % 1013) as f32 - 506.0) / 37.0)
                .collect();
            // Caffe's loop: each window summed in row-major order, then
            // divided by its padded size.
            let mut want = vec![0.0f32; planes * g.oh * g.ow];
            g.for_each_output(|pl, o, (h0, h1, w0, w1)| {
                let size = g.divisor((o / g.ow) % g.oh, o % g.ow);
                let mut sum = 0.0f32;
                for hh in h0..h1 {
                    for ww in w0..w1 {
                        sum += x[pl * h * w + hh * w + ww];
                    }
                }
                want[o] = if size == 0 { 0.0 } else { sum / size as f32 };
            });
            let mut got = vec![f32::NAN; want.len()];
            ave_forward(&g, &x, &mut got);
            let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                bits(&got),
                bits(&want),
                "{planes} planes of {h} x {w}, {k}/{s}/{p}"
            );
        }
    }
}
