//! `BN` of the PSPNet and DeepLab forks (hszhao/PSPNet `bn_layer.cpp`):
//! batch normalization and its affine part in one layer, with four blobs
//! (slope, bias, moving mean, moving variance, each (1, C, 1, 1)) and
//! exponential moving averages.

use blob_proto::ParamMessage;
use blob_proto::schema::{FieldDefault, FieldKind, FieldSchema, MessageSchema};
use blob_runtime::{Blob, MathElement};

use crate::dyn_layer::{DynLayer, TopShape, bad_param, is_train};
use crate::layer::Result;

/// The fork's `BNParameter`.
pub(crate) static BN_PARAMETER: MessageSchema = MessageSchema {
    name: "BNParameter",
    fields: &[
        FieldSchema::optional(
            "slope_filler",
            1,
            FieldKind::Message(&blob_proto::schema::FILLER),
        ),
        FieldSchema::optional(
            "bias_filler",
            2,
            FieldKind::Message(&blob_proto::schema::FILLER),
        ),
        FieldSchema::optional("momentum", 3, FieldKind::Float)
            .with_default(FieldDefault::Float(0.9)),
        FieldSchema::optional("eps", 4, FieldKind::Float).with_default(FieldDefault::Float(1e-5)),
        FieldSchema::optional("frozen", 5, FieldKind::Bool),
        FieldSchema::optional("engine", 6, FieldKind::Enum(&blob_proto::schema::ENGINE)),
    ],
};

/// `bn_param`, field 152 as in PSPNet's `caffe.proto`.
pub(crate) const BN_FIELD: FieldSchema =
    FieldSchema::optional("bn_param", 152, FieldKind::Message(&BN_PARAMETER));

/// `y = slope * (x - mean) / sqrt(var + eps) + bias` per channel: the
/// moving statistics in TEST or when `frozen`, the batch's own (and the
/// moving averages updated, `m = momentum * m + (1 - momentum) * batch`)
/// while training.
pub(crate) struct BnLayer<T: MathElement> {
    param: ParamMessage,
    batch_stats: bool,
    blobs: Vec<Blob<T>>,
    /// `1 / sqrt(var + eps)` per channel of the last forward pass.
    inv_std: Vec<f64>,
    /// The normalized input of the last forward pass.
    normalized: Vec<f64>,
}

impl<T: MathElement> BnLayer<T> {
    pub(crate) fn from_param(layer: &ParamMessage) -> Result<Self> {
        let param = crate::fork_layers::fork_param(layer, &BN_FIELD, &BN_PARAMETER);
        let frozen = param.boolean("frozen");
        Ok(Self {
            batch_stats: is_train(layer) && !frozen,
            param,
            blobs: Vec::new(),
            inv_std: Vec::new(),
            normalized: Vec::new(),
        })
    }

    /// `(items, channels, plane)`.
    fn dims(&self, x: &Blob<T>) -> Result<(usize, usize, usize)> {
        let s = x.shape();
        if s.len() < 2 {
            return Err(bad_param(
                "BN",
                format!("the input {} has no channel axis", x.shape_string()),
            ));
        }
        let (n, c) = (s[0], s[1]);
        if let Some(b) = self.blobs.iter().find(|b| b.count() != c) {
            return Err(bad_param(
                "BN",
                format!(
                    "the input {} has {c} channels; the layer's blobs are {}",
                    x.shape_string(),
                    b.shape_string()
                ),
            ));
        }
        Ok((n, c, s[2..].iter().product()))
    }

    fn channel_values(b: &Blob<T>) -> Result<Vec<f64>> {
        Ok(b.cpu_data()?.iter().map(|v| v.to_f64()).collect())
    }
}

impl<T: MathElement> DynLayer<T> for BnLayer<T> {
    fn type_name(&self) -> &str {
        "BN"
    }

    fn reshape(&mut self, bottoms: &[&Blob<T>], _tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        if self.blobs.is_empty() {
            let c = bottoms[0].shape().get(1).copied().unwrap_or(1);
            let fresh = || Blob::new(&[1, c, 1, 1]);
            self.blobs = vec![fresh()?, fresh()?, fresh()?, fresh()?];
            let filler = |name: &str| {
                self.param
                    .message(name)
                    .cloned()
                    .unwrap_or_else(|| ParamMessage::new(&blob_proto::schema::FILLER))
            };
            crate::filler::fill(&self.blobs[0], &filler("slope_filler"))?;
            crate::filler::fill(&self.blobs[1], &filler("bias_filler"))?;
            self.blobs[2].mutable_cpu_data()?.fill(T::ZERO);
            let var = if self.param.boolean("frozen") {
                T::ONE
            } else {
                T::ZERO
            };
            self.blobs[3].mutable_cpu_data()?.fill(var);
        }
        self.dims(bottoms[0])?;
        Ok(crate::dyn_layer::like_first_bottom(bottoms))
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        let (n, c, plane) = self.dims(bottoms[0])?;
        let x: Vec<f64> = bottoms[0].cpu_data()?.iter().map(|v| v.to_f64()).collect();
        let eps = self.param.float("eps");
        let (mean, var) = if self.batch_stats {
            let count = (n * plane).max(1) as f64;
            let mut mean = vec![0.0; c];
            let mut var = vec![0.0; c];
            for (i, chunk) in x.chunks(plane.max(1)).enumerate() {
                mean[i % c] += chunk.iter().sum::<f64>() / count;
            }
            for (i, chunk) in x.chunks(plane.max(1)).enumerate() {
                let m = mean[i % c];
                var[i % c] += chunk.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / count;
            }
            let momentum = self.param.float("momentum");
            for (blob, batch) in [(&self.blobs[2], &mean), (&self.blobs[3], &var)] {
                for (m, &b) in blob.mutable_cpu_data()?.iter_mut().zip(batch.iter()) {
                    *m = T::from_f64((1.0 - momentum) * b + momentum * m.to_f64());
                }
            }
            (mean, var)
        } else {
            (
                Self::channel_values(&self.blobs[2])?,
                Self::channel_values(&self.blobs[3])?,
            )
        };
        self.inv_std = var.iter().map(|v| 1.0 / (v + eps).sqrt()).collect();
        let slope = Self::channel_values(&self.blobs[0])?;
        let bias = Self::channel_values(&self.blobs[1])?;
        self.normalized.resize(x.len(), 0.0);
        let mut y = tops[0].mutable_cpu_data()?;
        for (i, (xs, (norm, ys))) in x
            .chunks(plane.max(1))
            .zip(
                self.normalized
                    .chunks_mut(plane.max(1))
                    .zip(y.chunks_mut(plane.max(1))),
            )
            .enumerate()
        {
            let ch = i % c;
            for ((&v, nv), yv) in xs.iter().zip(norm.iter_mut()).zip(ys.iter_mut()) {
                *nv = (v - mean[ch]) * self.inv_std[ch];
                *yv = T::from_f64(*nv * slope[ch] + bias[ch]);
            }
        }
        Ok(())
    }

    fn backward(
        &mut self,
        tops: &[&Blob<T>],
        propagate_down: &[bool],
        bottoms: &[&Blob<T>],
    ) -> Result<()> {
        let (n, c, plane) = self.dims(bottoms[0])?;
        let plane = plane.max(1);
        let dy: Vec<f64> = tops[0].cpu_diff()?.iter().map(|v| v.to_f64()).collect();
        let mut d_slope = vec![0.0; c];
        let mut d_bias = vec![0.0; c];
        for (i, (g, norm)) in dy
            .chunks(plane)
            .zip(self.normalized.chunks(plane))
            .enumerate()
        {
            d_slope[i % c] += g.iter().zip(norm).map(|(g, x)| g * x).sum::<f64>();
            d_bias[i % c] += g.iter().sum::<f64>();
        }
        for (blob, grad) in [(&self.blobs[0], &d_slope), (&self.blobs[1], &d_bias)] {
            for (d, &g) in blob.mutable_cpu_diff()?.iter_mut().zip(grad.iter()) {
                *d += T::from_f64(g);
            }
        }
        if !propagate_down[0] {
            return Ok(());
        }
        let slope = Self::channel_values(&self.blobs[0])?;
        let count = (n * plane) as f64;
        let mut dx = bottoms[0].mutable_cpu_diff()?;
        for (i, ((d, g), norm)) in dx
            .chunks_mut(plane)
            .zip(dy.chunks(plane))
            .zip(self.normalized.chunks(plane))
            .enumerate()
        {
            let ch = i % c;
            let k = slope[ch] * self.inv_std[ch];
            for ((d, &g), &x) in d.iter_mut().zip(g).zip(norm) {
                *d = T::from_f64(if self.batch_stats {
                    k * (g - d_bias[ch] / count - x * d_slope[ch] / count)
                } else {
                    k * g
                });
            }
        }
        Ok(())
    }

    fn blobs(&self) -> &[Blob<T>] {
        &self.blobs
    }

    fn blobs_mut(&mut self) -> &mut [Blob<T>] {
        &mut self.blobs
    }

    /// The moving statistics are never learned, nor anything of a frozen
    /// layer (the fork's `LayerSetUp` sets their `lr_mult` to 0).
    fn learns_param(&self, index: usize) -> bool {
        index < 2 && !self.param.boolean("frozen")
    }

    fn allows_in_place(&self) -> bool {
        // Backward reads the normalized input it kept, never the bottom.
        true
    }
}
