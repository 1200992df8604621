//! Caffe's LRN (local response normalization): across channels,
//! `y = x (k + alpha/n sum_{n channels} x^2)^-beta`, or within each
//! channel over an `n x n` window, `y = x (1 + alpha/n^2 sum x^2)^-beta`
//! (Caffe builds that one from inner layers; `k` does not enter it).

#[cfg(feature = "cuda")]
mod cuda;

use blob_proto::ParamMessage;
use blob_runtime::{Blob, MathElement};

use blob_kernels::cpu::{self, AlignedVec};

use crate::dyn_layer::{DynLayer, TopShape, bad_param, like_first_bottom, sub_param};
use crate::layer::{Result, ensure};
#[cfg(feature = "cuda")]
pub(crate) use cuda::LRN;

/// LRN's parameters.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Lrn {
    size: usize,
    alpha: f64,
    beta: f64,
    k: f64,
    within_channel: bool,
}

/// Caffe `LRN` as a run-time layer, on 4-D inputs, never in place.
pub(crate) struct LrnLayer<T: MathElement> {
    lrn: Lrn,
    /// The forward pass's denominators (before `^-beta`), for backward.
    scale: AlignedVec<T>,
    /// Each channel block's window sums, across channels.
    windows: AlignedVec<f64>,
    #[cfg(feature = "cuda")]
    gpu_scale: blob_kernels::cuda::Scratch<f32>,
}

impl<T: MathElement> LrnLayer<T> {
    /// Reads the layer's `lrn_param`.
    pub(crate) fn from_param(layer: &ParamMessage) -> Result<Self> {
        let p = sub_param(layer, "lrn_param");
        let size = p.uint("local_size") as usize;
        if size.is_multiple_of(2) {
            return Err(bad_param(
                "set up LRN",
                format!("LRN only supports odd values for local_size (got {size})"),
            ));
        }
        Ok(Self {
            lrn: Lrn {
                size,
                alpha: p.float("alpha"),
                beta: p.float("beta"),
                k: p.float("k"),
                within_channel: p.enum_name("norm_region") == "WITHIN_CHANNEL",
            },
            scale: AlignedVec::new(),
            windows: AlignedVec::new(),
            #[cfg(feature = "cuda")]
            gpu_scale: blob_kernels::cuda::Scratch::new(),
        })
    }

    /// `(num, channels, height, width)` of a 4-D input.
    fn dims(x: &Blob<T>) -> Result<[usize; 4]> {
        match *x.shape() {
            [n, c, h, w] => Ok([n, c, h, w]),
            _ => Err(bad_param(
                "LRN",
                format!(
                    "Input must have 4 axes, corresponding to (num, channels, height, width); got {}",
                    x.shape_string()
                ),
            )),
        }
    }

    /// The window sums of squares within each channel, as the scale
    /// before `^-beta` (Caffe builds this one from inner layers; `k` does
    /// not enter it).
    fn fill_scale_within_channel(&mut self, x: &[T], [h, w]: [usize; 2]) -> Result<()> {
        let size = self.lrn.size;
        ensure(&mut self.scale, x.len())?;
        let scale = &mut self.scale[..x.len()];
        let r = (size - 1) / 2;
        let plane = h * w;
        let factor = self.lrn.alpha / (size * size) as f64;
        for (xp, sp) in x.chunks(plane.max(1)).zip(scale.chunks_mut(plane.max(1))) {
            for i in 0..h {
                let (i0, i1) = (i.saturating_sub(r), (i + r).min(h - 1));
                for j in 0..w {
                    let (j0, j1) = (j.saturating_sub(r), (j + r).min(w - 1));
                    let mut sum = 0.0;
                    for a in i0..=i1 {
                        for b in j0..=j1 {
                            let v = xp[a * w + b].to_f64();
                            sum += v * v;
                        }
                    }
                    sp[i * w + j] = T::from_f64(1.0 + factor * sum);
                }
            }
        }
        Ok(())
    }

    /// The forward pass across channels: `scale` and `y` for `x`. Per
    /// pixel a window sum slides over the channels (Caffe's
    /// `padded_square` walk), a whole plane at once, in blocks of
    /// [`CHANNEL_BLOCK`] channels that start their window afresh: the
    /// blocks go to the cores (one image's channels to both at batch 1)
    /// and the sums do not depend on how many there are.
    fn forward_across_channels(
        &mut self,
        x: &[T],
        y: &mut [T],
        [n, c, h, w]: [usize; 4],
    ) -> Result<()> {
        let Lrn {
            size,
            alpha,
            beta,
            k,
            ..
        } = self.lrn;
        let plane = h * w;
        let len = n * c * plane;
        ensure(&mut self.scale, len)?;
        let blocks = c.div_ceil(CHANNEL_BLOCK);
        ensure(&mut self.windows, n * blocks * plane)?;
        if len == 0 {
            return Ok(());
        }
        let (r, factor) = ((size - 1) / 2, alpha / size as f64);
        // (image, block) units, each with its slices of scale and y and a
        // window buffer.
        let units = channel_blocks(&mut self.scale[..len], [c, plane])
            .zip(channel_blocks(&mut y[..len], [c, plane]))
            .zip(self.windows.chunks_mut(plane));
        cpu::on_cores(units, |(((img, first, scale), (_, _, y)), window)| {
            let x = &x[img * c * plane..][..c * plane];
            let channel = |ch: usize| &x[ch * plane..][..plane];
            let count = scale.len() / plane;
            let add = |window: &mut [f64], ch: usize, sign: f64| {
                for (sum, &v) in window.iter_mut().zip(channel(ch)) {
                    let v = v.to_f64();
                    *sum += sign * v * v;
                }
            };
            cpu::vectorized(
                #[inline(always)]
                || {
                    slide_over_channels(
                        window,
                        (first, count, c, r),
                        add,
                        #[inline(always)]
                        |ch, window| {
                            let at = (ch - first) * plane;
                            let scale = &mut scale[at..][..plane];
                            for (o, &sum) in scale.iter_mut().zip(window) {
                                // Rounding in the sliding sum can leave it a
                                // hair below 0: clamped, but NaN kept.
                                let sum = if sum < 0.0 { 0.0 } else { sum };
                                *o = T::from_f64(k + factor * sum);
                            }
                            scale_by_inverse_power(&mut y[at..][..plane], channel(ch), scale, beta);
                        },
                    );
                },
            );
            // A NaN or infinity that entered the sliding sum stays in it
            // for every later channel of the block (NaN - NaN, inf - inf);
            // the sum is then non-finite at the end. Only then, the
            // block's sums again one window at a time, so a NaN reaches
            // exactly the outputs whose window reads it, as the GPU's
            // kernel gives.
            if window.iter().any(|s| !s.is_finite()) {
                for ch in first..first + count {
                    let at = (ch - first) * plane;
                    let scale = &mut scale[at..][..plane];
                    window.fill(0.0);
                    for q in ch.saturating_sub(r)..(ch + r + 1).min(c) {
                        add(window, q, 1.0);
                    }
                    for (o, &sum) in scale.iter_mut().zip(window.iter()) {
                        *o = T::from_f64(k + factor * sum);
                    }
                    scale_by_inverse_power(&mut y[at..][..plane], channel(ch), scale, beta);
                }
            }
        });
        Ok(())
    }

    /// The backward pass across channels: `dx = dy scale^-beta - 2 alpha
    /// beta / n x sum_window(dy y / scale)`, the window sums sliding over
    /// the channels in the forward pass's blocks, on the cores.
    fn backward_across_channels(
        &mut self,
        (x, y, dy): (&[T], &[T], &[T]),
        dx: &mut [T],
        [n, c, h, w]: [usize; 4],
    ) -> Result<()> {
        let Lrn {
            size, alpha, beta, ..
        } = self.lrn;
        let plane = h * w;
        let len = n * c * plane;
        ensure(&mut self.windows, n * c.div_ceil(CHANNEL_BLOCK) * plane)?;
        if len == 0 {
            return Ok(());
        }
        let (r, coefficient) = ((size - 1) / 2, 2.0 * alpha * beta / size as f64);
        let scale = &self.scale[..len];
        let units = channel_blocks(&mut dx[..len], [c, plane]).zip(self.windows.chunks_mut(plane));
        cpu::on_cores(units, |((img, first, dx), window)| {
            let at = |ch: usize| (img * c + ch) * plane..(img * c + ch + 1) * plane;
            let count = dx.len() / plane;
            let add = |window: &mut [f64], ch: usize, sign: f64| {
                let terms = dy[at(ch)].iter().zip(&y[at(ch)]).zip(&scale[at(ch)]);
                for (sum, ((&g, &o), &s)) in window.iter_mut().zip(terms) {
                    *sum += sign * g.to_f64() * o.to_f64() / s.to_f64();
                }
            };
            cpu::vectorized(
                #[inline(always)]
                || {
                    slide_over_channels(
                        window,
                        (first, count, c, r),
                        add,
                        #[inline(always)]
                        |ch, window| {
                            let dx = &mut dx[(ch - first) * plane..][..plane];
                            let values = dy[at(ch)].iter().zip(&scale[at(ch)]).zip(&x[at(ch)]);
                            for ((d, ((&g, &s), &v)), &sum) in dx.iter_mut().zip(values).zip(window)
                            {
                                let g = g.to_f64() * inverse_power(s.to_f64(), beta);
                                *d = T::from_f64(g - coefficient * v.to_f64() * sum);
                            }
                        },
                    );
                },
            );
        });
        Ok(())
    }
}

/// Slides a window of channels over channels `first..first + count` of
/// an image's `c`: `add(window, q, sign)` adds channel `q`'s terms (or
/// takes them away), and `visit(ch, window)` sees channel `ch`'s window,
/// channels `ch - r..=ch + r` that exist. The first window starts afresh
/// (so a block's sums do not depend on the blocks before it). Callers run
/// it inside `cpu::vectorized` with `add` made outside that call and
/// `visit` handed in marked `#[inline(always)]`: otherwise their loops
/// were not vectorized and ran 3x slower.
#[inline(always)]
fn slide_over_channels(
    window: &mut [f64],
    (first, count, c, r): (usize, usize, usize, usize),
    add: impl Fn(&mut [f64], usize, f64),
    mut visit: impl FnMut(usize, &[f64]),
) {
    window.fill(0.0);
    for q in first.saturating_sub(r)..(first + r).min(c) {
        add(window, q, 1.0);
    }
    for ch in first..first + count {
        if ch + r < c {
            add(window, ch + r, 1.0);
        }
        if ch > first && ch > r {
            add(window, ch - r - 1, -1.0);
        }
        visit(ch, window);
    }
}

/// `values` (images of `c` planes of `plane` values) cut into blocks of
/// [`CHANNEL_BLOCK`] channels: (image, first channel, the block's values).
fn channel_blocks<T>(
    values: &mut [T],
    [c, plane]: [usize; 2],
) -> impl Iterator<Item = (usize, usize, &mut [T])> {
    values
        .chunks_mut((c * plane).max(1))
        .enumerate()
        .flat_map(move |(img, image)| {
            image
                .chunks_mut((CHANNEL_BLOCK * plane).max(1))
                .enumerate()
                .map(move |(b, block)| (img, b * CHANNEL_BLOCK, block))
        })
}

/// Channels whose window sums slide from one start, on one core.
const CHANNEL_BLOCK: usize = 16;

/// `y = x s^-beta`, element by element.
#[inline(always)]
fn scale_by_inverse_power<T: MathElement>(y: &mut [T], x: &[T], s: &[T], beta: f64) {
    let values = y.iter_mut().zip(x).zip(s);
    if beta == 0.75 {
        // In T, as Caffe computes: the f64 square roots and division
        // were this loop's time (GoogLeNet's norm2 0.57 -> 0.34 ms).
        for ((o, &v), &s) in values {
            *o = v * inverse_three_quarters(s);
        }
    } else {
        for ((o, &v), &s) in values {
            *o = T::from_f64(v.to_f64() * s.to_f64().powf(-beta));
        }
    }
}

/// `s^-0.75` by square roots (a power is several times slower, and this
/// is the layer's hot loop).
#[inline(always)]
fn inverse_three_quarters<T: blob_kernels::Real>(s: T) -> T {
    let root = s.sqrt();
    T::ONE / (root * root.sqrt())
}

/// `s^-beta`, by square roots for LRN's usual beta of 0.75.
fn inverse_power(s: f64, beta: f64) -> f64 {
    if beta == 0.75 {
        inverse_three_quarters(s)
    } else {
        s.powf(-beta)
    }
}

impl<T: MathElement> DynLayer<T> for LrnLayer<T> {
    fn type_name(&self) -> &str {
        "LRN"
    }

    fn reshape(&mut self, bottoms: &[&Blob<T>], _tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        Self::dims(bottoms[0])?;
        Ok(like_first_bottom(bottoms))
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        let (x, y) = (bottoms[0], tops[0]);
        let dims = Self::dims(x)?;
        #[cfg(feature = "cuda")]
        if let Some(gpu) = crate::gpu::gpu_for("LRN", x, &[("output", y)])? {
            use crate::gpu::as_f32;
            return cuda::forward(
                &gpu,
                &self.lrn,
                dims,
                &mut self.gpu_scale,
                as_f32(x),
                as_f32(y),
            );
        }
        let xd = x.cpu_data()?;
        let mut yd = y.mutable_cpu_data()?;
        if !self.lrn.within_channel {
            return self.forward_across_channels(&xd, &mut yd, dims);
        }
        self.fill_scale_within_channel(&xd, [dims[2], dims[3]])?;
        let len = xd.len();
        scale_by_inverse_power(&mut yd[..len], &xd, &self.scale[..len], self.lrn.beta);
        Ok(())
    }

    /// `dx = dy scale^-beta - 2 alpha beta / n' x sum_window(dy y / scale)`,
    /// `n'` = n across channels, n^2 within.
    fn backward(
        &mut self,
        tops: &[&Blob<T>],
        propagate_down: &[bool],
        bottoms: &[&Blob<T>],
    ) -> Result<()> {
        if !propagate_down[0] {
            return Ok(());
        }
        let (x, y) = (bottoms[0], tops[0]);
        let [n, c, h, w] = Self::dims(x)?;
        #[cfg(feature = "cuda")]
        if let Some(gpu) = crate::gpu::gpu_for("LRN", x, &[("output", y)])? {
            use crate::gpu::as_f32;
            return cuda::backward(
                &gpu,
                &self.lrn,
                [n, c, h, w],
                &mut self.gpu_scale,
                as_f32(x),
                as_f32(y),
            );
        }
        let (xd, yd, dy) = (x.cpu_data()?, y.cpu_data()?, y.cpu_diff()?);
        let mut dx = x.mutable_cpu_diff()?;
        if !self.lrn.within_channel {
            return self.backward_across_channels((&xd, &yd, &dy), &mut dx, [n, c, h, w]);
        }
        // Within each channel: `n'` = n^2.
        let Lrn {
            size, alpha, beta, ..
        } = self.lrn;
        let scale = &self.scale[..xd.len()];
        let ratio: Vec<f64> = dy
            .iter()
            .zip(yd.iter())
            .zip(scale)
            .map(|((&g, &o), &s)| g.to_f64() * o.to_f64() / s.to_f64())
            .collect();
        let r = (size - 1) / 2;
        let plane = h * w;
        let window_sum = |img: usize, ch: usize, i: usize, j: usize| -> f64 {
            let base = (img * c + ch) * plane;
            let mut sum = 0.0;
            for a in i.saturating_sub(r)..=(i + r).min(h - 1) {
                for b in j.saturating_sub(r)..=(j + r).min(w - 1) {
                    sum += ratio[base + a * w + b];
                }
            }
            sum
        };
        let norm = (size * size) as f64;
        for img in 0..n {
            for ch in 0..c {
                for i in 0..h {
                    for j in 0..w {
                        let at = ((img * c + ch) * h + i) * w + j;
                        let v = dy[at].to_f64() * inverse_power(scale[at].to_f64(), beta)
                            - 2.0 * alpha * beta / norm
                                * xd[at].to_f64()
                                * window_sum(img, ch, i, j);
                        dx[at] = T::from_f64(v);
                    }
                }
            }
        }
        Ok(())
    }

    fn allows_in_place(&self) -> bool {
        false
    }
}
