//! Caffe's Dropout layer: in training, each value is kept
//! with probability `1 - ratio` and scaled by `1 / (1 - ratio)`; in testing
//! it passes unchanged. With the Fast R-CNN fork's `scale_train: false`
//! the kept values pass unscaled in training and testing scales every
//! value by `1 - ratio` instead.

#[cfg(feature = "cuda")]
mod cuda;
mod spatial;

use blob_kernels::cpu::{self, AlignedVec};
use blob_runtime::{Blob, BlobError, MathElement};

use crate::layer::{Result, ensure, expect_shape, in_place};
#[cfg(feature = "cuda")]
pub(crate) use cuda::DROPOUT;
pub(crate) use spatial::SpatialDropoutLayer;

/// Dropout's ratio and the mask of its last training pass.
pub(crate) struct DropoutEngine {
    ratio: f64,
    /// `scale_train`: the kept values scaled in training (Caffe), or
    /// every value in testing (the Fast R-CNN fork's `false`).
    scale_train: bool,
    mask: AlignedVec<u32>,
    #[cfg(feature = "cuda")]
    gpu_mask: blob_kernels::cuda::Scratch<u32>,
}

impl DropoutEngine {
    /// `ratio` (the share dropped) must be in `[0, 1)`.
    pub(crate) fn new(ratio: f64, scale_train: bool) -> Result<Self> {
        if !(0.0..1.0).contains(&ratio) {
            return Err(BlobError::InvalidParameter {
                op: "make a dropout layer",
                detail: format!("dropout_ratio {ratio} is not in [0, 1)"),
            });
        }
        Ok(Self {
            ratio,
            scale_train,
            mask: AlignedVec::new(),
            #[cfg(feature = "cuda")]
            gpu_mask: blob_kernels::cuda::Scratch::new(),
        })
    }

    /// What a kept value is multiplied by in training.
    fn scale<T: MathElement>(&self) -> T {
        if self.scale_train {
            T::from_f64(1.0 / (1.0 - self.ratio))
        } else {
            T::ONE
        }
    }

    /// What every value is multiplied by in testing: the fork's
    /// `1 / scale_` with `scale_` in the blob's type.
    fn test_scale<T: MathElement>(&self) -> Option<T> {
        (!self.scale_train)
            .then(|| T::from_f64(1.0 / T::from_f64(1.0 / (1.0 - self.ratio)).to_f64()))
    }

    pub(crate) fn forward<T: MathElement>(
        &mut self,
        train: bool,
        x: &Blob<T>,
        y: &Blob<T>,
    ) -> Result<()> {
        if !in_place(x, y) {
            expect_shape("write dropout output", y, x.shape())?;
        }
        #[cfg(feature = "cuda")]
        if train && let Some(gpu) = crate::gpu::gpu_of_all(&[x, y]) {
            use crate::gpu::as_f32;
            let (keep, scale) = ((1.0 - self.ratio) as f32, self.scale::<f32>());
            return cuda::forward(&gpu, &mut self.gpu_mask, keep, scale, as_f32(x), as_f32(y));
        }
        if !in_place(x, y) {
            y.mutable_cpu_data()?.copy_from_slice(&x.cpu_data()?);
        }
        if !train {
            if let Some(scale) = self.test_scale::<T>() {
                y.mutable_cpu_data()?.iter_mut().for_each(|v| *v *= scale);
            }
            return Ok(());
        }
        let n = y.count();
        ensure(&mut self.mask, n)?;
        cpu::bernoulli(1.0 - self.ratio, &mut self.mask[..n]).map_err(|e| {
            BlobError::InvalidParameter {
                op: "dropout",
                detail: e.to_string(),
            }
        })?;
        let scale = self.scale::<T>();
        for (v, &keep) in y.mutable_cpu_data()?.iter_mut().zip(&self.mask[..n]) {
            *v = if keep == 1 { *v * scale } else { T::ZERO };
        }
        Ok(())
    }

    pub(crate) fn backward<T: MathElement>(
        &mut self,
        train: bool,
        x: &Blob<T>,
        y: &Blob<T>,
    ) -> Result<()> {
        if !in_place(x, y) {
            expect_shape("dropout backward", y, x.shape())?;
        }
        #[cfg(feature = "cuda")]
        if train && let Some(gpu) = crate::gpu::gpu_of_all(&[x, y]) {
            use crate::gpu::as_f32;
            let scale = self.scale::<f32>();
            return cuda::backward(&gpu, &self.gpu_mask, scale, as_f32(x), as_f32(y));
        }
        if !in_place(x, y) {
            let mut dx = x.mutable_cpu_diff()?;
            dx.copy_from_slice(&y.cpu_diff()?);
        }
        if !train {
            if let Some(scale) = self.test_scale::<T>() {
                x.mutable_cpu_diff()?.iter_mut().for_each(|d| *d *= scale);
            }
            return Ok(());
        }
        let n = x.count();
        if self.mask.len() < n {
            return Err(BlobError::CountMismatch {
                op: "dropout backward",
                what: "the forward pass's mask".into(),
                got: self.mask.len(),
                want: n,
            });
        }
        let scale = self.scale::<T>();
        for (d, &keep) in x.mutable_cpu_diff()?.iter_mut().zip(&self.mask[..n]) {
            *d = if keep == 1 { *d * scale } else { T::ZERO };
        }
        Ok(())
    }
}

/// Caffe's `Dropout` as a run-time layer: drops in the TRAIN phase,
/// passes through in TEST.
pub(crate) struct DropoutLayer {
    train: bool,
    engine: DropoutEngine,
}

impl DropoutLayer {
    /// Reads the layer's `dropout_param` and phase.
    pub(crate) fn from_param(layer: &blob_proto::ParamMessage) -> Result<Self> {
        let p = crate::dyn_layer::sub_param(layer, "dropout_param");
        Ok(Self {
            train: crate::dyn_layer::is_train(layer),
            engine: DropoutEngine::new(p.float("dropout_ratio"), p.boolean("scale_train"))?,
        })
    }
}

impl<T: MathElement> crate::dyn_layer::DynLayer<T> for DropoutLayer {
    fn type_name(&self) -> &str {
        "Dropout"
    }

    fn reshape(
        &mut self,
        bottoms: &[&Blob<T>],
        _tops: &[&Blob<T>],
    ) -> Result<Vec<crate::dyn_layer::TopShape>> {
        Ok(crate::dyn_layer::like_first_bottom(bottoms))
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        self.engine.forward(self.train, bottoms[0], tops[0])
    }

    fn backward(
        &mut self,
        tops: &[&Blob<T>],
        propagate_down: &[bool],
        bottoms: &[&Blob<T>],
    ) -> Result<()> {
        if !propagate_down[0] {
            return Ok(());
        }
        self.engine.backward(self.train, bottoms[0], tops[0])
    }
}
