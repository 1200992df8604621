//! Caffe's MVN: each channel (or each item, `across_channels`) shifted to
//! mean 0 and, with `normalize_variance`, scaled to variance 1.

#[cfg(feature = "cuda")]
mod cuda;

#[cfg(feature = "cuda")]
pub(crate) use cuda::MVN;

use blob_proto::ParamMessage;
use blob_runtime::{Blob, MathElement};

use crate::dyn_layer::{DynLayer, TopShape, bad_param, sub_param};
use crate::layer::Result;

/// Caffe `MVN`: `y = (x - mean) / (std + eps)` per group (without
/// `normalize_variance`, `x - mean`), the groups being each item's
/// channels or, `across_channels`, each item.
pub(crate) struct MvnLayer {
    normalize_variance: bool,
    across_channels: bool,
    eps: f64,
}

impl MvnLayer {
    /// Reads `mvn_param` (variance normalized, per channel, eps 1e-9).
    pub(crate) fn from_param(layer: &ParamMessage) -> Self {
        let p = sub_param(layer, "mvn_param");
        Self {
            normalize_variance: p.boolean("normalize_variance"),
            across_channels: p.boolean("across_channels"),
            eps: p.float("eps"),
        }
    }

    /// The values of one group: an item's channel, or a whole item.
    fn group<T: MathElement>(&self, x: &Blob<T>) -> Result<usize> {
        let s = x.shape();
        if s.is_empty() {
            return Err(bad_param("MVN", "the input has no axes"));
        }
        let skip = if self.across_channels { 1 } else { 2 };
        Ok(s.get(skip..).map_or(1, |rest| rest.iter().product()))
    }

    /// Each group's mean and, with the variance normalized, `std + eps`
    /// (1 otherwise): Caffe's `mean_` and `variance_`.
    fn statistics(&self, x: &[f64], dim: usize) -> Vec<(f64, f64)> {
        x.chunks(dim.max(1))
            .map(|g| {
                let n = g.len().max(1) as f64;
                let mean = g.iter().sum::<f64>() / n;
                let scale = if self.normalize_variance {
                    let var = g.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
                    var.sqrt() + self.eps
                } else {
                    1.0
                };
                (mean, scale)
            })
            .collect()
    }
}

impl<T: MathElement> DynLayer<T> for MvnLayer {
    fn type_name(&self) -> &str {
        "MVN"
    }

    fn reshape(&mut self, bottoms: &[&Blob<T>], _tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        self.group(bottoms[0])?;
        Ok(crate::dyn_layer::like_first_bottom(bottoms))
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        let dim = self.group(bottoms[0])?;
        #[cfg(feature = "cuda")]
        if let Some(gpu) = crate::gpu::gpu_for("MVN", bottoms[0], &[("output", tops[0])])? {
            use crate::gpu::{as_f32, read, write};
            let (x, mut y) = (
                as_f32(bottoms[0]).gpu_data()?,
                as_f32(tops[0]).mutable_gpu_data()?,
            );
            let n = bottoms[0].count();
            let groups = (n / dim.max(1), dim);
            let how = (self.normalize_variance, self.eps);
            return cuda::forward(&gpu, groups, how, &read(&x, n)?, &mut write(&mut y, n)?);
        }
        let x: Vec<f64> = bottoms[0].to_vec()?.iter().map(|v| v.to_f64()).collect();
        let stats = self.statistics(&x, dim);
        let mut y = tops[0].mutable_cpu_data()?;
        for ((out, g), (mean, scale)) in y
            .chunks_mut(dim.max(1))
            .zip(x.chunks(dim.max(1)))
            .zip(stats)
        {
            for (o, &v) in out.iter_mut().zip(g) {
                *o = T::from_f64((v - mean) / scale);
            }
        }
        Ok(())
    }

    /// Caffe's backward: `dy - mean(dy)`, and with the variance
    /// normalized `(dy - mean(dy) - y mean(y dy)) / (std + eps)`.
    fn backward(
        &mut self,
        tops: &[&Blob<T>],
        propagate_down: &[bool],
        bottoms: &[&Blob<T>],
    ) -> Result<()> {
        if !propagate_down[0] {
            return Ok(());
        }
        let dim = self.group(bottoms[0])?;
        #[cfg(feature = "cuda")]
        if let Some(gpu) = crate::gpu::gpu_for("MVN", bottoms[0], &[("output", tops[0])])? {
            use crate::gpu::{as_f32, read, write};
            let (x, y, dy, mut dx) = (
                as_f32(bottoms[0]).gpu_data()?,
                as_f32(tops[0]).gpu_data()?,
                as_f32(tops[0]).gpu_diff()?,
                as_f32(bottoms[0]).mutable_gpu_diff()?,
            );
            let n = bottoms[0].count();
            let groups = (n / dim.max(1), dim);
            let how = (self.normalize_variance, self.eps);
            let views = (&read(&x, n)?, &read(&y, n)?, &read(&dy, n)?);
            return cuda::backward(&gpu, groups, how, views, &mut write(&mut dx, n)?);
        }
        let x: Vec<f64> = bottoms[0].to_vec()?.iter().map(|v| v.to_f64()).collect();
        let y: Vec<f64> = tops[0].to_vec()?.iter().map(|v| v.to_f64()).collect();
        let dy: Vec<f64> = tops[0].diff_to_vec()?.iter().map(|v| v.to_f64()).collect();
        let stats = self.statistics(&x, dim);
        let mut dx = bottoms[0].mutable_cpu_diff()?;
        let n = dim.max(1);
        let groups = dx
            .chunks_mut(n)
            .zip(y.chunks(n))
            .zip(dy.chunks(n))
            .zip(stats);
        for (((out, y), dy), (_, scale)) in groups {
            let mean_dy = dy.iter().sum::<f64>() / n as f64;
            let mean_y_dy = if self.normalize_variance {
                y.iter().zip(dy).map(|(a, b)| a * b).sum::<f64>() / n as f64
            } else {
                0.0
            };
            for ((o, &yv), &g) in out.iter_mut().zip(y).zip(dy) {
                *o = T::from_f64((g - mean_dy - yv * mean_y_dy) / scale);
            }
        }
        Ok(())
    }

    fn allows_in_place(&self) -> bool {
        false
    }
}
