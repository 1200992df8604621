//! Caffe's LRN (local response normalization): across channels,
//! `y = x (k + alpha/n sum_{n channels} x^2)^-beta`, or within each
//! channel over an `n x n` window, `y = x (1 + alpha/n^2 sum x^2)^-beta`
//! (Caffe builds that one from inner layers; `k` does not enter it).

#[cfg(feature = "cuda")]
mod cuda;

use blob_proto::ParamMessage;
use blob_runtime::{Blob, MathElement};

use blob_kernels::cpu;

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
    scale: Vec<T>,
    /// Each channel block's window sums, across channels.
    windows: Vec<f64>,
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
            scale: Vec::new(),
            windows: Vec::new(),
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
        let block_len = CHANNEL_BLOCK * plane;
        // (image, block) units, each with its slices of scale, y and the
        // window buffers.
        let images = self.scale[..len]
            .chunks_mut(c * plane)
            .zip(y[..len].chunks_mut(c * plane));
        let units = images
            .flat_map(|(scale, y)| scale.chunks_mut(block_len).zip(y.chunks_mut(block_len)))
            .zip(self.windows.chunks_mut(plane))
            .enumerate()
            .map(|(u, ((scale, y), window))| {
                (u / blocks, u % blocks * CHANNEL_BLOCK, scale, y, window)
            });
        cpu::on_cores(units, |(img, first, scale, y, window)| {
            let x = &x[img * c * plane..][..c * plane];
            let square_into = |window: &mut [f64], ch: usize, sign: f64| {
                for (sum, &v) in window.iter_mut().zip(&x[ch * plane..][..plane]) {
                    let v = v.to_f64();
                    *sum += sign * v * v;
                }
            };
            cpu::vectorized(
                #[inline(always)]
                || {
                    // The window of channel `first` but its last channel.
                    window.fill(0.0);
                    for ch in first.saturating_sub(r)..(first + r).min(c) {
                        square_into(window, ch, 1.0);
                    }
                    let planes = scale.chunks_exact_mut(plane).zip(y.chunks_exact_mut(plane));
                    for (ch, (scale, y)) in (first..).zip(planes) {
                        if ch + r < c {
                            square_into(window, ch + r, 1.0);
                        }
                        // The block's first window holds no channel before it.
                        if ch > first && ch > r {
                            square_into(window, ch - r - 1, -1.0);
                        }
                        for (o, &sum) in scale.iter_mut().zip(&*window) {
                            *o = T::from_f64(k + factor * sum.max(0.0));
                        }
                        let x = &x[ch * plane..][..plane];
                        scale_by_inverse_power(y, x, scale, beta);
                    }
                },
            );
        });
        Ok(())
    }
}

/// Channels whose window sums slide from one start, on one core.
const CHANNEL_BLOCK: usize = 16;

/// `y = x s^-beta`, element by element.
#[inline(always)]
fn scale_by_inverse_power<T: MathElement>(y: &mut [T], x: &[T], s: &[T], beta: f64) {
    let values = y.iter_mut().zip(x).zip(s);
    if beta == 0.75 {
        for ((o, &v), &s) in values {
            *o = T::from_f64(v.to_f64() * inverse_three_quarters(s.to_f64()));
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
fn inverse_three_quarters(s: f64) -> f64 {
    let root = s.sqrt();
    1.0 / (root * root.sqrt())
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
        let Lrn {
            size,
            alpha,
            beta,
            within_channel,
            ..
        } = self.lrn;
        let (xd, yd, dy) = (x.cpu_data()?, y.cpu_data()?, y.cpu_diff()?);
        let scale = &self.scale[..xd.len()];
        let ratio: Vec<f64> = dy
            .iter()
            .zip(yd.iter())
            .zip(scale)
            .map(|((&g, &o), &s)| g.to_f64() * o.to_f64() / s.to_f64())
            .collect();
        let r = (size - 1) / 2;
        let plane = h * w;
        let mut dx = x.mutable_cpu_diff()?;
        let window_sum = |img: usize, ch: usize, i: usize, j: usize| -> f64 {
            if within_channel {
                let base = (img * c + ch) * plane;
                let mut sum = 0.0;
                for a in i.saturating_sub(r)..=(i + r).min(h - 1) {
                    for b in j.saturating_sub(r)..=(j + r).min(w - 1) {
                        sum += ratio[base + a * w + b];
                    }
                }
                sum
            } else {
                let base = img * c * plane + i * w + j;
                (ch.saturating_sub(r)..=(ch + r).min(c - 1))
                    .map(|q| ratio[base + q * plane])
                    .sum()
            }
        };
        let norm = if within_channel {
            (size * size) as f64
        } else {
            size as f64
        };
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
