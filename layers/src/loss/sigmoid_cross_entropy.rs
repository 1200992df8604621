//! Caffe's `SigmoidCrossEntropyLoss`: the cross-entropy of `sigmoid(x)`
//! against targets in [0, 1], computed stably from `x`, with
//! `LossParameter`'s normalization and ignored label.

use blob_proto::ParamMessage;
use blob_runtime::{Blob, MathElement};

use super::{Loss, Normalization, loss_settings, num, same_count};
use crate::layer::Result;

/// Caffe `SigmoidCrossEntropyLoss`: scores and targets of one count,
/// `-sum(t log p + (1 - t) log(1 - p))` with `p = sigmoid(x)`, divided
/// as `loss_param` says (the batch by default).
pub(crate) struct SigmoidCrossEntropyLoss {
    settings: (Normalization, Option<i64>),
}

impl SigmoidCrossEntropyLoss {
    /// Reads `loss_param`.
    pub(crate) fn from_param(layer: &ParamMessage) -> Self {
        Self {
            settings: loss_settings(layer, Normalization::BatchSize),
        }
    }

    /// Whether target `t` is the ignored label (compared as Caffe
    /// does, truncated to an integer).
    fn ignored(&self, t: f64) -> bool {
        self.settings.1.is_some_and(|ig| t.trunc() == ig as f64)
    }

    /// The divisor for `x` with `valid` positions not ignored.
    fn divisor<T: MathElement>(&self, x: &Blob<T>, valid: usize) -> f64 {
        let outer = num(x);
        let inner = x.count() / outer.max(1);
        self.settings.0.divisor(outer, inner, valid)
    }
}

impl Loss for SigmoidCrossEntropyLoss {
    const TYPE: &'static str = "SigmoidCrossEntropyLoss";
    const BOTTOMS: usize = 2;
    const LABELS: Option<(usize, &'static str)> = Some((1, "label"));

    fn check_shapes<T: MathElement>(&self, bottoms: &[&Blob<T>]) -> Result<()> {
        same_count(
            Self::TYPE,
            "SIGMOID_CROSS_ENTROPY_LOSS layer inputs must have the same count",
            bottoms[0],
            bottoms[1],
        )
    }

    fn loss<T: MathElement>(&self, bottoms: &[&Blob<T>]) -> Result<f64> {
        let (x, t) = (bottoms[0].cpu_data()?, bottoms[1].cpu_data()?);
        let (mut loss, mut valid) = (0.0f64, 0usize);
        for (&x, &t) in x.iter().zip(t.iter()) {
            let (x, t) = (x.to_f64(), t.to_f64());
            if self.ignored(t) {
                continue;
            }
            // log(1 + e^-|x|) keeps the exponent at or below 0.
            let positive = f64::from(u8::from(x >= 0.0));
            loss -= x * (t - positive) - (1.0 + (x - 2.0 * x * positive).exp()).ln();
            valid += 1;
        }
        Ok(loss / self.divisor(bottoms[0], valid))
    }

    fn gradients<T: MathElement>(
        &self,
        bottoms: &[&Blob<T>],
        weight: f64,
        _down: &[bool],
    ) -> Result<()> {
        let targets = bottoms[1].cpu_data()?;
        let valid = targets.iter().filter(|t| !self.ignored(t.to_f64())).count();
        let scale = weight / self.divisor(bottoms[0], valid);
        let x = bottoms[0].cpu_data()?.to_vec();
        let mut dx = bottoms[0].mutable_cpu_diff()?;
        for ((g, &x), &t) in dx.iter_mut().zip(&x).zip(targets.iter()) {
            let t = t.to_f64();
            *g = if self.ignored(t) {
                T::ZERO
            } else {
                let p = 1.0 / (1.0 + (-x.to_f64()).exp());
                T::from_f64((p - t) * scale)
            };
        }
        Ok(())
    }

    #[cfg(feature = "cuda")]
    fn loss_on_gpu(
        &self,
        gpu: &blob_kernels::cuda::Gpu,
        scratch: &mut super::cuda::LossScratch,
        bottoms: &[&Blob<f32>],
        top: &Blob<f32>,
    ) -> Option<Result<()>> {
        let terms = super::cuda::Terms::CrossEntropy {
            x: bottoms[0],
            t: bottoms[1],
            ignore: self.settings.1,
        };
        let divisor = self.gpu_divisor(bottoms[0]);
        Some(super::cuda::loss(gpu, scratch, terms, divisor, top))
    }

    #[cfg(feature = "cuda")]
    fn gradients_on_gpu(
        &self,
        gpu: &blob_kernels::cuda::Gpu,
        scratch: &super::cuda::LossScratch,
        bottoms: &[&Blob<f32>],
        weight: f64,
        _down: &[bool],
    ) -> Option<Result<()>> {
        let blobs = (bottoms[0], bottoms[1], self.settings.1);
        let divisor = self.gpu_divisor(bottoms[0]);
        Some(super::cuda::sigmoid_cross_entropy_backward(
            gpu, scratch, blobs, weight, divisor,
        ))
    }
}

#[cfg(feature = "cuda")]
impl SigmoidCrossEntropyLoss {
    /// The divisor as the CUDA side takes it: 0 for VALID, whose count of
    /// targets not ignored the GPU makes.
    fn gpu_divisor(&self, x: &Blob<f32>) -> f64 {
        match self.settings.0 {
            Normalization::Valid => 0.0,
            _ => self.divisor(x, 0),
        }
    }
}
