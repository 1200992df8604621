//! What the layers' CUDA sides share (feature `cuda`): finding the GPU a
//! blob lives on, viewing its device memory as `f32`, and errors that keep
//! cudarc's as their source.
//!
//! A layer runs on the GPU when its input blob was made `with_device` on a
//! CUDA backend and its elements are `f32`; otherwise on the CPU. Either
//! way the blobs' heads move the bytes, as Caffe's SyncedMemory does, so
//! a layer without a CUDA side (a user's, or `accuracy`) still runs
//! correctly between two that have one.

use std::any::Any;
use std::sync::Arc;

use blob_kernels::cuda::cudarc::driver::{CudaView, CudaViewMut};
use blob_kernels::cuda::{CudaError, Gpu};
use blob_runtime::cuda::CudaBackend;
use blob_runtime::{Blob, BlobError, DeviceError, DeviceRead, DeviceWrite, MathElement};

use crate::layer::Result;

/// A layer's GPU step's result.
pub(crate) type GpuResult<T> = Result<T>;

/// The CUDA backend `blob` lives on, when it is one and `T` is `f32`.
fn cuda_of<T: MathElement>(blob: &Blob<T>) -> Option<&CudaBackend> {
    (blob as &dyn Any).downcast_ref::<Blob<f32>>()?;
    blob.device().and_then(CudaBackend::of)
}

/// The GPU `blob` lives on, when it is a CUDA device and `T` is `f32`.
pub(crate) fn gpu_of<T: MathElement>(blob: &Blob<T>) -> Option<Arc<Gpu>> {
    cuda_of(blob).map(|cuda| cuda.gpu().clone())
}

/// The ordinal of the CUDA device `blob` lives on, if it is `f32` there
/// (a check on every layer call: no handle cloned for it).
fn cuda_ordinal<T: MathElement>(blob: &Blob<T>) -> Option<usize> {
    cuda_of(blob).map(|cuda| cuda.gpu().context().ordinal())
}

/// The GPU every one of `blobs` lives on, when all are `f32` on one CUDA
/// device: a layer that writes a blob of its own (a loss's
/// probabilities) runs on the GPU only if that blob is there too, and
/// blobs on two GPUs run the CPU side (the heads move the bytes).
pub(crate) fn gpu_of_all<T: MathElement>(blobs: &[&Blob<T>]) -> Option<Arc<Gpu>> {
    let (first, rest) = blobs.split_first()?;
    let gpu = gpu_of(first)?;
    let ordinal = gpu.context().ordinal();
    rest.iter()
        .all(|b| cuda_ordinal(b) == Some(ordinal))
        .then_some(gpu)
}

/// Where `blob` lives, for messages: its device's name, or the host.
fn place<T: MathElement>(blob: &Blob<T>) -> String {
    blob.device()
        .map_or_else(|| "the host".to_string(), |d| d.name())
}

/// The GPU a layer runs `op` on: the one its input `x` lives on, when `x`
/// is an `f32` blob on a CUDA device (`None`: the CPU side runs). Its
/// other blobs (output, parameters) must live on that same GPU: a layer
/// does not mix devices, and the error names both places (a kernel handed
/// another GPU's memory would fault and poison the GPU's context).
pub(crate) fn gpu_for<T: MathElement>(
    op: &'static str,
    x: &Blob<T>,
    others: &[(&str, &Blob<T>)],
) -> Result<Option<Arc<Gpu>>> {
    let Some(gpu) = gpu_of(x) else {
        return Ok(None);
    };
    let ordinal = gpu.context().ordinal();
    for &(what, blob) in others {
        if cuda_ordinal(blob) != Some(ordinal) {
            return Err(BlobError::Device {
                op,
                source: DeviceError::new(format!(
                    "the input is on {}, its {what} on {}; move the layer's blobs to one device",
                    place(x),
                    place(blob)
                )),
            });
        }
    }
    Ok(Some(gpu))
}

/// [`gpu_for`] a layer with an output, weights and a bias.
pub(crate) fn gpu_for_learned<T: MathElement>(
    op: &'static str,
    x: &Blob<T>,
    y: &Blob<T>,
    weight: &Blob<T>,
    bias: &Blob<T>,
) -> Result<Option<Arc<Gpu>>> {
    gpu_for(op, x, &[("output", y), ("weights", weight), ("bias", bias)])
}

/// The blob as `f32`, which [`gpu_of`] has checked it is.
pub(crate) fn as_f32<T: MathElement>(blob: &Blob<T>) -> &Blob<f32> {
    (blob as &dyn std::any::Any)
        .downcast_ref::<Blob<f32>>()
        .expect("gpu_of admits f32 blobs only")
}

/// A failed CUDA call of `op`, keeping the error as its source.
pub(crate) fn cuda(op: &'static str, e: CudaError) -> BlobError {
    BlobError::Device {
        op,
        source: DeviceError::with_source("CUDA", e),
    }
}

/// A size a kernel's `int` parameters cannot hold.
pub(crate) fn too_big(op: &'static str, v: usize) -> BlobError {
    BlobError::Device {
        op,
        source: DeviceError::new(format!("{v} does not fit the kernel's 32-bit int")),
    }
}

/// `v` as a kernel's `int`.
pub(crate) fn int(op: &'static str, v: usize) -> Result<i32> {
    i32::try_from(v).map_err(|_| too_big(op, v))
}

/// The first `n` `f32`s under a read guard.
pub(crate) fn read<'a>(guard: &'a DeviceRead<'_>, n: usize) -> Result<CudaView<'a, f32>> {
    blob_runtime::cuda::view(guard, n).map_err(|source| BlobError::Device {
        op: "view GPU memory",
        source,
    })
}

/// The first `n` `f32`s under a write guard.
pub(crate) fn write<'a>(guard: &'a mut DeviceWrite<'_>, n: usize) -> Result<CudaViewMut<'a, f32>> {
    blob_runtime::cuda::view_mut(guard, n).map_err(|source| BlobError::Device {
        op: "view GPU memory",
        source,
    })
}

/// Device buffers for per-channel sums (`Gpu::add_sums`) and one value
/// per input value for their terms, kept between passes (grow-only):
/// BatchNorm's statistics and gradients, Scale's factor gradient.
#[derive(Default)]
pub(crate) struct SumScratch {
    pub sums: blob_kernels::cuda::Scratch<f32>,
    pub terms: blob_kernels::cuda::Scratch<f32>,
}
