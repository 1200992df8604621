//! Caffe's BatchNorm: `y = (x - mean) / sqrt(var + eps)` per channel,
//! with the running statistics in its three blobs (mean sum, variance
//! sum, and their scale factor) or the batch's own while training; no
//! affine part (a Scale layer follows). Both passes run on the GPU where
//! the blobs live there, with either statistics.

#[cfg(feature = "cuda")]
mod cuda;

use blob_proto::ParamMessage;
use blob_runtime::{Blob, MathElement};

use crate::dyn_layer::{DynLayer, TopShape, bad_param, is_train, sub_param};
use crate::layer::{Result, in_place};
use crate::planes::{map_planes, per_channel, sum_planes, zip_map_planes};

/// Caffe `BatchNorm`, in place or not.
#[cfg(feature = "cuda")]
pub(crate) use cuda::BATCH_NORM;

pub(crate) struct BatchNormLayer<T: MathElement> {
    global_stats: bool,
    moving_average: f64,
    eps: f64,
    blobs: Vec<Blob<T>>,
    /// `1 / sqrt(var + eps)` per channel, for backward.
    inv_std: Vec<f64>,
    /// The normalized output of the last forward pass with batch
    /// statistics (Caffe's `x_norm_`): backward needs it, and in place
    /// the top holds what the layers after this one made of it.
    normalized: Vec<T>,
    /// Statistics on the GPU: the means, then the deviations.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    gpu_stats: Blob<T>,
    /// The normalized output of the last forward pass with batch
    /// statistics on the GPU (`normalized`'s twin).
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    gpu_normalized: Blob<T>,
    #[cfg(feature = "cuda")]
    gpu_scratch: crate::gpu::SumScratch,
}

impl<T: MathElement> BatchNormLayer<T> {
    pub(crate) fn from_param(layer: &ParamMessage) -> Result<Self> {
        let p = sub_param(layer, "batch_norm_param");
        for (i, spec) in layer.messages("param").enumerate() {
            if spec.float("lr_mult") != 0.0 || !spec.has("lr_mult") {
                return Err(bad_param(
                    "set up BatchNorm",
                    format!(
                        "Cannot configure batch normalization statistics as layer parameters (param {i} has lr_mult {})",
                        spec.float("lr_mult")
                    ),
                ));
            }
        }
        Ok(Self {
            global_stats: if p.has("use_global_stats") {
                p.boolean("use_global_stats")
            } else {
                !is_train(layer)
            },
            moving_average: p.float("moving_average_fraction"),
            eps: p.float("eps"),
            blobs: Vec::new(),
            inv_std: Vec::new(),
            normalized: Vec::new(),
            gpu_stats: Blob::default(),
            gpu_normalized: Blob::default(),
            #[cfg(feature = "cuda")]
            gpu_scratch: Default::default(),
        })
    }

    /// `(num, channels, values per channel per item)`.
    fn dims(&self, x: &Blob<T>) -> Result<(usize, usize, usize)> {
        if x.num_axes() < 2 {
            return Err(bad_param(
                "batch norm",
                format!("the input {} has no channel axis", x.shape_string()),
            ));
        }
        let (n, c) = (x.shape()[0], x.shape()[1]);
        if let Some(mean) = self.blobs.first()
            && mean.count() != c
        {
            return Err(bad_param(
                "batch norm",
                format!(
                    "the input {} has {c} channels, the statistics {}",
                    x.shape_string(),
                    mean.count()
                ),
            ));
        }
        Ok((n, c, x.shape()[2..].iter().product()))
    }
}

/// Per channel, the mean and (biased) variance of `x`, `(n, c, spatial)`,
/// summed in f64.
fn batch_statistics<T: MathElement>(x: &[T], c: usize, spatial: usize) -> (Vec<f64>, Vec<f64>) {
    let count = (x.len() / c.max(1)).max(1) as f64;
    let sums = sum_planes(x, None, spatial, |_| (), |v, _, ()| v.to_f64());
    let m: Vec<f64> = per_channel(&sums, c).iter().map(|s| s / count).collect();
    let squares = sum_planes(
        x,
        None,
        spatial,
        |p| m[p % c.max(1)],
        |v, _, mean| {
            let d = v.to_f64() - mean;
            d * d
        },
    );
    let v = per_channel(&squares, c).iter().map(|s| s / count).collect();
    (m, v)
}

#[cfg(feature = "cuda")]
impl<T: MathElement> BatchNormLayer<T> {
    /// The forward pass with batch statistics on `gpu`: the statistics
    /// and the running sums on the device, the normalized output kept
    /// for the backward pass.
    fn forward_batch_on(
        &mut self,
        gpu: &blob_kernels::cuda::Gpu,
        dims: cuda::Dims,
        x: &Blob<T>,
        y: &Blob<T>,
    ) -> Result<()> {
        use crate::gpu::as_f32;
        let (_, c, spatial) = dims;
        crate::softmax::place_with(&mut self.gpu_stats, x, &[2, c])?;
        let [mean, var, factor] = [&self.blobs[0], &self.blobs[1], &self.blobs[2]].map(as_f32);
        cuda::batch_statistics(
            gpu,
            dims,
            (self.eps, self.moving_average),
            as_f32(x),
            as_f32(&self.gpu_stats),
            [mean, var, factor],
            &mut self.gpu_scratch,
        )?;
        let input = (!in_place(x, y)).then(|| as_f32(x));
        cuda::forward(gpu, (c, spatial), input, as_f32(&self.gpu_stats), as_f32(y))?;
        self.normalized.clear();
        crate::softmax::place_with(&mut self.gpu_normalized, y, y.shape())?;
        self.gpu_normalized.copy_from(y, false)
    }

    /// Both backward passes on `gpu`, from the statistics the forward
    /// pass left there.
    fn backward_on(
        &mut self,
        gpu: &blob_kernels::cuda::Gpu,
        dims: cuda::Dims,
        x: &Blob<T>,
        y: &Blob<T>,
    ) -> Result<()> {
        use crate::gpu::as_f32;
        let kept = if self.global_stats {
            self.gpu_stats.count() == 2 * dims.1
        } else {
            self.gpu_normalized.count() == y.count() && self.gpu_stats.count() == 2 * dims.1
        };
        if !kept {
            return Err(bad_param(
                "batch norm",
                "backward before a forward pass of this size on the GPU",
            ));
        }
        let normalized = (!self.global_stats).then(|| as_f32(&self.gpu_normalized));
        cuda::backward(
            gpu,
            dims,
            normalized,
            as_f32(&self.gpu_stats),
            (as_f32(x), as_f32(y)),
            &mut self.gpu_scratch,
        )
    }
}

impl<T: MathElement> DynLayer<T> for BatchNormLayer<T> {
    fn type_name(&self) -> &str {
        "BatchNorm"
    }

    /// With global statistics: `(x - mean) / sqrt(var + eps)`, the
    /// running sums divided by their scale factor as the pass divides
    /// them.
    fn channel_affine(&self) -> Option<crate::ChannelAffine> {
        if !self.global_stats || self.blobs.len() != 3 {
            return None;
        }
        let read = |b: &Blob<T>| -> Option<Vec<f64>> {
            Some(b.cpu_data().ok()?.iter().map(|v| v.to_f64()).collect())
        };
        let s = *read(&self.blobs[2])?.first()?;
        let factor = if s == 0.0 { 0.0 } else { 1.0 / s };
        let (mean, var) = (read(&self.blobs[0])?, read(&self.blobs[1])?);
        let mul: Vec<f64> = var
            .iter()
            .map(|v| 1.0 / (v * factor + self.eps).sqrt())
            .collect();
        let add = mean
            .iter()
            .zip(&mul)
            .map(|(m, k)| -m * factor * k)
            .collect();
        Some(crate::ChannelAffine { mul, add })
    }

    fn reshape(&mut self, bottoms: &[&Blob<T>], _tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        if self.blobs.is_empty() {
            let c = bottoms[0].shape().get(1).copied().unwrap_or(1);
            self.blobs = vec![Blob::new(&[c])?, Blob::new(&[c])?, Blob::new(&[1])?];
            for b in &self.blobs {
                b.mutable_cpu_data()?.fill(T::ZERO);
            }
        }
        self.dims(bottoms[0])?;
        Ok(crate::dyn_layer::like_first_bottom(bottoms))
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        let (n, c, spatial) = self.dims(bottoms[0])?;
        #[cfg(feature = "cuda")]
        if !self.global_stats
            && let Some(gpu) =
                crate::gpu::gpu_for("batch norm", bottoms[0], &[("output", tops[0])])?
        {
            return self.forward_batch_on(&gpu, (n, c, spatial), bottoms[0], tops[0]);
        }
        let (mean, var) = if self.global_stats {
            let s = self.blobs[2].cpu_data()?[0].to_f64();
            let factor = if s == 0.0 { 0.0 } else { 1.0 / s };
            let scaled = |b: &Blob<T>| -> Result<Vec<f64>> {
                Ok(b.cpu_data()?.iter().map(|v| v.to_f64() * factor).collect())
            };
            (scaled(&self.blobs[0])?, scaled(&self.blobs[1])?)
        } else {
            let (m, v) = batch_statistics(&bottoms[0].cpu_data()?, c, spatial);
            // The running sums: scale factor, mean and unbiased variance.
            let maf = self.moving_average;
            let mut factor = self.blobs[2].mutable_cpu_data()?;
            factor[0] = T::from_f64(factor[0].to_f64() * maf + 1.0);
            let total = (n * c * spatial) as f64 / c as f64;
            let bias = if total > 1.0 {
                total / (total - 1.0)
            } else {
                1.0
            };
            for (s, &mv) in self.blobs[0].mutable_cpu_data()?.iter_mut().zip(&m) {
                *s = T::from_f64(mv + maf * s.to_f64());
            }
            for (s, &vv) in self.blobs[1].mutable_cpu_data()?.iter_mut().zip(&v) {
                *s = T::from_f64(bias * vv + maf * s.to_f64());
            }
            (m, v)
        };
        self.inv_std = var.iter().map(|v| 1.0 / (v + self.eps).sqrt()).collect();
        // Caffe's arithmetic in the element type: subtract the mean,
        // divide by the deviation.
        let mean: Vec<T> = mean.iter().map(|&m| T::from_f64(m)).collect();
        let std: Vec<T> = var
            .iter()
            .map(|&v| T::from_f64((v + self.eps).sqrt()))
            .collect();
        #[cfg(feature = "cuda")]
        if self.global_stats
            && let Some(gpu) =
                crate::gpu::gpu_for("batch norm", bottoms[0], &[("output", tops[0])])?
        {
            use crate::gpu::as_f32;
            crate::softmax::place_with(&mut self.gpu_stats, bottoms[0], &[2, c])?;
            {
                let mut stats = self.gpu_stats.mutable_cpu_data()?;
                stats[..c].copy_from_slice(&mean);
                stats[c..].copy_from_slice(&std);
            }
            self.normalized.clear();
            let x = (!in_place(bottoms[0], tops[0])).then(|| as_f32(bottoms[0]));
            return cuda::forward(
                &gpu,
                (c, spatial),
                x,
                as_f32(&self.gpu_stats),
                as_f32(tops[0]),
            );
        }
        // (v - mean) / deviation, the channel's pair taken once a plane.
        let pair = |plane: usize| (mean[plane % c], std[plane % c]);
        let normalize = |v: T, (m, s): (T, T)| (v - m) / s;
        if in_place(bottoms[0], tops[0]) {
            map_planes(
                None,
                &mut tops[0].mutable_cpu_data()?,
                spatial,
                pair,
                normalize,
            );
        } else {
            let x = bottoms[0].cpu_data()?;
            map_planes(
                Some(&x),
                &mut tops[0].mutable_cpu_data()?,
                spatial,
                pair,
                normalize,
            );
        }
        self.normalized.clear();
        if !self.global_stats {
            self.normalized.extend_from_slice(&tops[0].cpu_data()?);
        }
        Ok(())
    }

    /// Global statistics: `dx = dy / sqrt(var + eps)`. The batch's:
    /// `dx = (dy - mean(dy) - y mean(dy y)) / sqrt(var + eps)`, means per
    /// channel.
    fn backward(
        &mut self,
        tops: &[&Blob<T>],
        propagate_down: &[bool],
        bottoms: &[&Blob<T>],
    ) -> Result<()> {
        if !propagate_down[0] {
            return Ok(());
        }
        let (n, c, spatial) = self.dims(bottoms[0])?;
        #[cfg(feature = "cuda")]
        if let Some(gpu) = crate::gpu::gpu_for("batch norm", bottoms[0], &[("output", tops[0])])? {
            return self.backward_on(&gpu, (n, c, spatial), bottoms[0], tops[0]);
        }
        let (x, y) = (bottoms[0], tops[0]);
        let through = in_place(x, y);
        let inv_std = &self.inv_std;
        let channel = |p: usize| p % c.max(1);
        if self.global_stats {
            let scaled = |g: T, _: T, k: f64| T::from_f64(g.to_f64() * k);
            let factor = |p: usize| inv_std[channel(p)];
            if through {
                zip_map_planes(
                    None,
                    None,
                    &mut x.mutable_cpu_diff()?,
                    spatial,
                    factor,
                    scaled,
                );
            } else {
                let dy = y.cpu_diff()?;
                zip_map_planes(
                    Some(&dy),
                    None,
                    &mut x.mutable_cpu_diff()?,
                    spatial,
                    factor,
                    scaled,
                );
            }
            return Ok(());
        }
        let normalized = &self.normalized;
        if normalized.len() != y.count() {
            return Err(bad_param(
                "batch norm",
                "backward before a forward pass with batch statistics of this size",
            ));
        }
        let count = (n * spatial).max(1) as f64;
        let (mean_dy, mean_dyy) = {
            let dy = y.cpu_diff()?;
            let sum_dy = sum_planes(&dy, None, spatial, |_| (), |g, _, ()| g.to_f64());
            let sum_dyy = sum_planes(
                &dy,
                Some(normalized),
                spatial,
                |_| (),
                |g, o, ()| g.to_f64() * o.to_f64(),
            );
            let mean = |sums: &[f64]| -> Vec<f64> {
                per_channel(sums, c).iter().map(|s| s / count).collect()
            };
            (mean(&sum_dy), mean(&sum_dyy))
        };
        let per_plane = |p: usize| {
            let ch = channel(p);
            (mean_dy[ch], mean_dyy[ch], inv_std[ch])
        };
        let gradient = |g: T, o: T, (m, mo, k): (f64, f64, f64)| {
            T::from_f64((g.to_f64() - m - o.to_f64() * mo) * k)
        };
        if through {
            zip_map_planes(
                None,
                Some(normalized),
                &mut x.mutable_cpu_diff()?,
                spatial,
                per_plane,
                gradient,
            );
        } else {
            let dy = y.cpu_diff()?;
            zip_map_planes(
                Some(&dy),
                Some(normalized),
                &mut x.mutable_cpu_diff()?,
                spatial,
                per_plane,
                gradient,
            );
        }
        Ok(())
    }

    fn blobs(&self) -> &[Blob<T>] {
        &self.blobs
    }

    fn blobs_mut(&mut self) -> &mut [Blob<T>] {
        &mut self.blobs
    }

    fn learns_param(&self, _index: usize) -> bool {
        false
    }
}
