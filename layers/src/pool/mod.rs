//! Caffe's Pooling layer: MAX or AVE windows with Caffe's ceil rule for
//! the output size, on the CPU and on a GPU.

mod cpu;
#[cfg(feature = "cuda")]
mod cuda;

mod runtime;

use blob_kernels::cpu::AlignedVec;
use blob_runtime::{Blob, BlobError, MathElement};

use crate::layer::{Result, ensure};

use cpu::PoolGeometry;
#[cfg(feature = "cuda")]
pub(crate) use cuda::POOL;
pub(crate) use runtime::PoolingLayer;

/// What a window gives (Caffe's `PoolingParameter.pool`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolMethod {
    /// The window's maximum (`MAX`).
    Max,
    /// The window's mean (`AVE`).
    Ave,
}

/// The positions of a MAX pass's maxima, kept for its backward pass
/// (unless told no backward follows).
pub(crate) struct PoolEngine {
    argmax: AlignedVec<u32>,
    /// Whether a MAX pass keeps its positions (not in a deploy net).
    pub keep_positions: bool,
    #[cfg(feature = "cuda")]
    gpu_argmax: blob_kernels::cuda::Scratch<u32>,
}

impl Default for PoolEngine {
    fn default() -> Self {
        Self {
            argmax: AlignedVec::new(),
            keep_positions: true,
            #[cfg(feature = "cuda")]
            gpu_argmax: Default::default(),
        }
    }
}

impl PoolEngine {
    fn forward<T: MathElement>(
        &mut self,
        g: &PoolGeometry,
        method: PoolMethod,
        x: &Blob<T>,
        y: &Blob<T>,
    ) -> Result<()> {
        #[cfg(feature = "cuda")]
        if let Some(gpu) = crate::gpu::gpu_for("pool", x, &[("output", y)])? {
            use crate::gpu::as_f32;
            return cuda::forward(g, method, &gpu, &mut self.gpu_argmax, as_f32(x), as_f32(y));
        }
        let (xd, mut yd) = (x.cpu_data()?, y.mutable_cpu_data()?);
        match method {
            PoolMethod::Max if !self.keep_positions => {
                self.argmax.clear();
                cpu::max_values(g, &xd, &mut yd);
            }
            PoolMethod::Max => {
                ensure(&mut self.argmax, yd.len())?;
                cpu::max_forward(g, &xd, &mut yd, &mut self.argmax[..y.count()]);
            }
            PoolMethod::Ave => cpu::ave_forward(g, &xd, &mut yd),
        }
        Ok(())
    }

    fn backward<T: MathElement>(
        &self,
        g: &PoolGeometry,
        method: PoolMethod,
        x: &Blob<T>,
        y: &Blob<T>,
    ) -> Result<()> {
        #[cfg(feature = "cuda")]
        if let Some(gpu) = crate::gpu::gpu_for("pool", x, &[("output", y)])? {
            use crate::gpu::as_f32;
            return cuda::backward(g, method, &gpu, &self.gpu_argmax, as_f32(x), as_f32(y));
        }
        let (dy, mut dx) = (y.cpu_diff()?, x.mutable_cpu_diff()?);
        match method {
            PoolMethod::Max => {
                if self.argmax.len() < y.count() {
                    return Err(BlobError::CountMismatch {
                        op: "pooling backward",
                        what: "positions of the forward pass".into(),
                        got: self.argmax.len(),
                        want: y.count(),
                    });
                }
                cpu::max_backward(g, &dy, &self.argmax[..y.count()], &mut dx);
            }
            PoolMethod::Ave => cpu::ave_backward(g, &dy, &mut dx),
        }
        Ok(())
    }
}
