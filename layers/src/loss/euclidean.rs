//! Caffe's `EuclideanLoss`: `sum((a - b)^2) / num / 2`, with a gradient
//! to both inputs.

use blob_runtime::{Blob, MathElement};

use super::{Loss, difference, num, same_count};
use crate::layer::Result;

/// Caffe `EuclideanLoss`: two inputs of the same count per item (a
/// prediction and a target; Caffe's autoencoder example), the loss
/// `||a - b||^2 / (2 num)`; both inputs take a gradient.
pub(crate) struct EuclideanLoss;

impl Loss for EuclideanLoss {
    const TYPE: &'static str = "EuclideanLoss";
    const BOTTOMS: usize = 2;
    const LABELS: Option<(usize, &'static str)> = None;

    fn check_shapes<T: MathElement>(&self, bottoms: &[&Blob<T>]) -> Result<()> {
        same_count(
            Self::TYPE,
            "Inputs must have the same dimension",
            bottoms[0],
            bottoms[1],
        )
    }

    fn loss<T: MathElement>(&self, bottoms: &[&Blob<T>]) -> Result<f64> {
        let diff = difference(bottoms[0], bottoms[1])?;
        let dot: f64 = diff.iter().map(|d| d * d).sum();
        Ok(dot / num(bottoms[0]) as f64 / 2.0)
    }

    fn gradients<T: MathElement>(
        &self,
        bottoms: &[&Blob<T>],
        weight: f64,
        down: &[bool],
    ) -> Result<()> {
        let diff = difference(bottoms[0], bottoms[1])?;
        for (i, sign) in [(0, 1.0), (1, -1.0)] {
            if !down[i] {
                continue;
            }
            let alpha = sign * weight / num(bottoms[i]) as f64;
            for (g, d) in bottoms[i].mutable_cpu_diff()?.iter_mut().zip(&diff) {
                *g = T::from_f64(alpha * d);
            }
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
        let terms = super::cuda::Terms::Squares {
            a: bottoms[0],
            b: bottoms[1],
        };
        // Caffe's `dot / num / 2`: halving is exact, so one divisor.
        let divisor = 2.0 * num(bottoms[0]) as f64;
        Some(super::cuda::loss(gpu, scratch, terms, divisor, top))
    }

    #[cfg(feature = "cuda")]
    fn gradients_on_gpu(
        &self,
        gpu: &blob_kernels::cuda::Gpu,
        _scratch: &super::cuda::LossScratch,
        bottoms: &[&Blob<f32>],
        weight: f64,
        down: &[bool],
    ) -> Option<Result<()>> {
        Some(super::cuda::signed_gradients(
            bottoms,
            weight,
            down,
            |alpha, into| super::cuda::euclidean_backward(gpu, alpha, bottoms[0], bottoms[1], into),
        ))
    }
}
