//! `BN`, one type name in two forks' `caffe.proto`s:
//!
//! - PSPNet's and DeepLab's (hszhao/PSPNet `bn_layer.cpp`): batch
//!   normalization and its affine part in one layer, four blobs (slope,
//!   bias, moving mean, moving variance, each (1, C, 1, 1)), the moving
//!   statistics in TEST or when `frozen`, exponential moving averages
//!   updated while training.
//! - SegNet's and ENet's (alexgkendall/caffe-segnet `bn_layer.cpp`): two
//!   blobs (scale, shift); `bn_mode: LEARN` normalizes by the batch's own
//!   statistics in every phase (variance `E(x^2) - E(x)^2`, eps 1e-9),
//!   `bn_mode: INFERENCE` is `scale * x + shift` (the statistics folded
//!   into the blobs by SegNet's `compute_bn_statistics.py`).
//!
//! A `bn_param` naming SegNet's fields (`bn_mode`, `scale_filler`,
//! `shift_filler`) is SegNet's; otherwise PSPNet's.

#[cfg(feature = "cuda")]
mod cuda;

use blob_proto::ParamMessage;
use blob_proto::schema::{EnumSchema, FieldDefault, FieldKind, FieldSchema, MessageSchema};
use blob_runtime::{Blob, MathElement};

use crate::dyn_layer::{DynLayer, TopShape, bad_param, is_train};
use crate::layer::Result;

#[cfg(feature = "cuda")]
pub(crate) use cuda::BN;

/// SegNet's `BNParameter.BNMode`.
static BN_MODE: EnumSchema = EnumSchema {
    name: "BNMode",
    values: &[("LEARN", 0), ("INFERENCE", 1)],
};

/// `BNParameter`: PSPNet's fields at PSPNet's numbers, SegNet's beside
/// them (SegNet numbers its own 1 to 3, which PSPNet's take; a
/// `.prototxt` names them and never sees the numbers).
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
        FieldSchema::optional(
            "scale_filler",
            1001,
            FieldKind::Message(&blob_proto::schema::FILLER),
        ),
        FieldSchema::optional(
            "shift_filler",
            1002,
            FieldKind::Message(&blob_proto::schema::FILLER),
        ),
        FieldSchema::optional("bn_mode", 1003, FieldKind::Enum(&BN_MODE)),
    ],
};

/// `bn_param`, field 152 as in PSPNet's `caffe.proto`.
pub(crate) const BN_FIELD: FieldSchema =
    FieldSchema::optional("bn_param", 152, FieldKind::Message(&BN_PARAMETER));

/// What each channel is normalized by.
#[derive(Clone, Copy, Debug)]
enum Statistics {
    /// The batch's own; PSPNet's also update the moving averages with
    /// this momentum.
    Batch { eps: f64, momentum: Option<f64> },
    /// PSPNet's moving mean and variance (blobs 2 and 3).
    Moving { eps: f64 },
    /// None: SegNet's INFERENCE, `scale * x + shift`.
    Folded,
}

/// The BN forks' layer: see the [module](self) documentation.
pub(crate) struct BnLayer<T: MathElement> {
    param: ParamMessage,
    statistics: Statistics,
    /// SegNet's two blobs, or PSPNet's four.
    segnet: bool,
    frozen: bool,
    /// Whether the net runs backward through the layer (then forward
    /// keeps the normalized input, on the host).
    backward_runs: bool,
    blobs: Vec<Blob<T>>,
    /// `1 / sqrt(var + eps)` per channel of the last forward pass.
    inv_std: Vec<f64>,
    /// The normalized input of the last forward pass.
    normalized: Vec<f64>,
}

impl<T: MathElement> BnLayer<T> {
    pub(crate) fn from_param(layer: &ParamMessage) -> Result<Self> {
        let param = crate::fork_layers::fork_param(layer, &BN_FIELD, &BN_PARAMETER);
        let segnet = ["bn_mode", "scale_filler", "shift_filler"]
            .iter()
            .any(|f| param.has(f));
        let frozen = param.boolean("frozen");
        let eps = param.float("eps");
        let statistics = if segnet {
            match param.enum_name("bn_mode") {
                "INFERENCE" => Statistics::Folded,
                _ => Statistics::Batch {
                    eps: 1e-9,
                    momentum: None,
                },
            }
        } else if is_train(layer) && !frozen {
            Statistics::Batch {
                eps,
                momentum: Some(param.float("momentum")),
            }
        } else {
            Statistics::Moving { eps }
        };
        Ok(Self {
            param,
            statistics,
            segnet,
            frozen,
            backward_runs: true,
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
        let wanted = if self.segnet { 2 } else { 4 };
        if !self.blobs.is_empty() && self.blobs.len() != wanted {
            return Err(bad_param(
                "BN",
                format!(
                    "the layer has {} blobs; {}'s BN has {wanted}",
                    self.blobs.len(),
                    if self.segnet { "SegNet" } else { "PSPNet" }
                ),
            ));
        }
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

    fn filler(&self, name: &str) -> ParamMessage {
        self.param
            .message(name)
            .cloned()
            .unwrap_or_else(|| ParamMessage::new(&blob_proto::schema::FILLER))
    }

    /// Forward with fixed statistics where no backward pass follows, on
    /// the cores, in place or not, nothing kept: each value in double,
    /// rounded once, as the record-keeping path and bn.cu compute it.
    fn forward_fixed(&self, c: usize, plane: usize, x: &Blob<T>, y: &Blob<T>) -> Result<()> {
        let (mean, var, eps) = match self.statistics {
            Statistics::Moving { eps } => (
                Self::channel_values(&self.blobs[2])?,
                Self::channel_values(&self.blobs[3])?,
                eps,
            ),
            _ => (vec![0.0; c], vec![1.0; c], 0.0),
        };
        let stats = matches!(self.statistics, Statistics::Moving { .. });
        let slope = Self::channel_values(&self.blobs[0])?;
        let bias = Self::channel_values(&self.blobs[1])?;
        let channel: Vec<[f64; 4]> = (0..c)
            .map(|k| {
                let inv = if stats {
                    1.0 / (var[k] + eps).sqrt()
                } else {
                    1.0
                };
                [mean[k], inv, slope[k], bias[k]]
            })
            .collect();
        let op = |v: T, [m, inv, a, b]: [f64; 4]| T::from_f64((v.to_f64() - m) * inv * a + b);
        let of_plane = |p: usize| channel[p % c];
        if crate::layer::in_place(x, y) {
            crate::planes::map_planes(None, &mut y.mutable_cpu_data()?, plane, of_plane, op);
        } else {
            let (xs, mut ys) = (x.cpu_data()?, y.mutable_cpu_data()?);
            crate::planes::map_planes(Some(&xs), &mut ys, plane, of_plane, op);
        }
        Ok(())
    }

    /// Each channel's mean and variance over the batch (divided by the
    /// count, as both forks divide).
    fn batch_statistics(x: &[f64], c: usize, plane: usize, count: f64) -> (Vec<f64>, Vec<f64>) {
        let mut mean = vec![0.0; c];
        let mut var = vec![0.0; c];
        for (i, chunk) in x.chunks(plane).enumerate() {
            mean[i % c] += chunk.iter().sum::<f64>() / count;
        }
        for (i, chunk) in x.chunks(plane).enumerate() {
            let m = mean[i % c];
            var[i % c] += chunk.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / count;
        }
        (mean, var)
    }
}

#[cfg(feature = "cuda")]
impl<T: MathElement> BnLayer<T> {
    /// Forward with fixed statistics on the GPU, for nets without a
    /// backward pass through the layer.
    fn forward_on(
        &mut self,
        gpu: &blob_kernels::cuda::Gpu,
        c: usize,
        plane: usize,
        bottom: &Blob<T>,
        top: &Blob<T>,
    ) -> Result<()> {
        use crate::gpu::{as_f32, read, write};
        let n = bottom.count();
        let (eps, stats) = match self.statistics {
            Statistics::Moving { eps } => (eps, true),
            _ => (0.0, false),
        };
        let (s, b) = (&self.blobs[0], &self.blobs[1]);
        let (m, v) = if stats {
            (&self.blobs[2], &self.blobs[3])
        } else {
            (s, b)
        };
        for blob in [m, v] {
            if crate::gpu::gpu_of(blob).is_none() {
                return Err(crate::dyn_layer::bad_param(
                    "BN on the GPU",
                    "the moving statistics are on the host, the input on the GPU: move the \
                     layer's blobs to one device",
                ));
            }
        }
        let (xg, sg, bg, mg, vg) = (
            as_f32(bottom).gpu_data()?,
            as_f32(s).gpu_data()?,
            as_f32(b).gpu_data()?,
            as_f32(m).gpu_data()?,
            as_f32(v).gpu_data()?,
        );
        let mut yg = as_f32(top).mutable_gpu_data()?;
        // SAFETY: x and y hold n values of planes of `plane`; the four
        // per-channel blobs hold c values.
        unsafe {
            cuda::bn_forward_f32(
                gpu,
                blob_kernels::cuda::launch_config(n),
                n as i64,
                c as i64,
                plane as i64,
                &read(&xg, n)?,
                &read(&sg, c)?,
                &read(&bg, c)?,
                &read(&mg, c)?,
                &read(&vg, c)?,
                eps,
                i32::from(stats),
                &mut write(&mut yg, n)?,
            )
        }
        .map_err(|e| crate::gpu::cuda("BN on the GPU", e))
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
            if self.segnet {
                self.blobs = vec![fresh()?, fresh()?];
                crate::filler::fill(&self.blobs[0], &self.filler("scale_filler"))?;
                crate::filler::fill(&self.blobs[1], &self.filler("shift_filler"))?;
            } else {
                self.blobs = vec![fresh()?, fresh()?, fresh()?, fresh()?];
                crate::filler::fill(&self.blobs[0], &self.filler("slope_filler"))?;
                crate::filler::fill(&self.blobs[1], &self.filler("bias_filler"))?;
                self.blobs[2].mutable_cpu_data()?.fill(T::ZERO);
                let var = if self.frozen { T::ONE } else { T::ZERO };
                self.blobs[3].mutable_cpu_data()?.fill(var);
            }
        }
        self.dims(bottoms[0])?;
        Ok(crate::dyn_layer::like_first_bottom(bottoms))
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        let (n, c, plane) = self.dims(bottoms[0])?;
        let plane = plane.max(1);
        // Fixed statistics on the GPU where no backward pass follows
        // (which reads the normalized input this keeps on the host); the
        // rest on the host, the blobs' heads moving the values.
        #[cfg(feature = "cuda")]
        if !self.backward_runs
            && !matches!(self.statistics, Statistics::Batch { .. })
            && let Some(gpu) = crate::gpu::gpu_for(
                "BN",
                bottoms[0],
                &[
                    ("output", tops[0]),
                    ("slope", &self.blobs[0]),
                    ("bias", &self.blobs[1]),
                ],
            )?
        {
            return self.forward_on(&gpu, c, plane, bottoms[0], tops[0]);
        }
        if !self.backward_runs && !matches!(self.statistics, Statistics::Batch { .. }) {
            return self.forward_fixed(c, plane, bottoms[0], tops[0]);
        }
        let x: Vec<f64> = bottoms[0].cpu_data()?.iter().map(|v| v.to_f64()).collect();
        let (mean, var, eps) = match self.statistics {
            Statistics::Batch { eps, momentum } => {
                let (mean, var) = Self::batch_statistics(&x, c, plane, (n * plane) as f64);
                if let Some(momentum) = momentum {
                    for (blob, batch) in [(&self.blobs[2], &mean), (&self.blobs[3], &var)] {
                        for (m, &b) in blob.mutable_cpu_data()?.iter_mut().zip(batch.iter()) {
                            *m = T::from_f64((1.0 - momentum) * b + momentum * m.to_f64());
                        }
                    }
                }
                (mean, var, eps)
            }
            Statistics::Moving { eps } => (
                Self::channel_values(&self.blobs[2])?,
                Self::channel_values(&self.blobs[3])?,
                eps,
            ),
            Statistics::Folded => (vec![0.0; c], vec![1.0; c], 0.0),
        };
        self.inv_std = var.iter().map(|v| 1.0 / (v + eps).sqrt()).collect();
        let slope = Self::channel_values(&self.blobs[0])?;
        let bias = Self::channel_values(&self.blobs[1])?;
        self.normalized.resize(x.len(), 0.0);
        let mut y = tops[0].mutable_cpu_data()?;
        for (i, (xs, (norm, ys))) in x
            .chunks(plane)
            .zip(self.normalized.chunks_mut(plane).zip(y.chunks_mut(plane)))
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
        if self.normalized.len() != bottoms[0].count() {
            return Err(bad_param(
                "BN backward",
                "no forward pass on the host kept the normalized input; run forward first",
            ));
        }
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
        let batch = matches!(self.statistics, Statistics::Batch { .. });
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
                *d = T::from_f64(if batch {
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

    fn backward_will_run(&mut self, will: bool) {
        self.backward_runs = will;
    }

    /// PSPNet's moving statistics are never learned, nor anything of a
    /// frozen layer (its `LayerSetUp` sets their `lr_mult` to 0);
    /// SegNet's scale and shift always are.
    fn learns_param(&self, index: usize) -> bool {
        self.segnet || (index < 2 && !self.frozen)
    }

    fn allows_in_place(&self) -> bool {
        // Backward reads the normalized input it kept, never the bottom.
        true
    }
}
