//! The CUDA side of Permute, for tops of up to four axes (SSD's heads):
//! one thread a value, gathering forward and scattering back.

use blob_kernels::cuda::cudarc::driver::{CudaView, CudaViewMut};
use blob_kernels::cuda::{Gpu, launch_config};
use blob_runtime::Blob;

use crate::gpu::{cuda, read, write};
use crate::layer::Result;

blob_kernels::cuda_kernels! {
    /// `permute.cu`: Permute's moves, `f32`.
    pub(crate) static PERMUTE = "permute.cu";
    /// `y = x` with its axes reordered.
    pub(crate) fn permute_f32(
        n: i64, d1: i64, d2: i64, d3: i64, s0: i64, s1: i64, s2: i64, s3: i64,
        x: &CudaView<'_, f32>, y: &mut CudaViewMut<'_, f32>
    );
    /// `dx = dy` back in the bottom's order.
    pub(crate) fn unpermute_f32(
        n: i64, d1: i64, d2: i64, d3: i64, s0: i64, s1: i64, s2: i64, s3: i64,
        dy: &CudaView<'_, f32>, dx: &mut CudaViewMut<'_, f32>
    );
}

const OP: &str = "permute on the GPU";

/// The kernels' `d1, d2, d3, s0, s1, s2, s3` for a top of `dims` that
/// walks the bottom by `strides`; `None` above four axes (the host takes
/// those).
pub(crate) fn sizes(dims: &[usize], strides: &[usize]) -> Option<[i64; 7]> {
    let pad = 4usize.checked_sub(dims.len())?;
    let mut d = [1i64; 4];
    let mut s = [0i64; 4];
    for (a, (&dim, &stride)) in dims.iter().zip(strides).enumerate() {
        d[pad + a] = i64::try_from(dim).ok()?;
        s[pad + a] = i64::try_from(stride).ok()?;
    }
    Some([d[1], d[2], d[3], s[0], s[1], s[2], s[3]])
}

/// The top's values from the bottom's.
pub(crate) fn forward(gpu: &Gpu, sizes: [i64; 7], x: &Blob<f32>, y: &Blob<f32>) -> Result<()> {
    let (xg, mut yg) = (x.gpu_data()?, y.mutable_gpu_data()?);
    let (from, mut to) = (read(&xg, x.count())?, write(&mut yg, y.count())?);
    // SAFETY: y holds its n values, each reading one of x's (the top is a
    // permutation of the bottom).
    unsafe { launch(gpu, permute_f32, sizes, y.count(), &from, &mut to) }
}

/// The bottom's gradient from the top's.
pub(crate) fn backward(gpu: &Gpu, sizes: [i64; 7], y: &Blob<f32>, x: &Blob<f32>) -> Result<()> {
    let (dyg, mut dxg) = (y.gpu_diff()?, x.mutable_gpu_diff()?);
    let (from, mut to) = (read(&dyg, y.count())?, write(&mut dxg, x.count())?);
    // SAFETY: as forward, the other way.
    unsafe { launch(gpu, unpermute_f32, sizes, y.count(), &from, &mut to) }
}

type Kernel = unsafe fn(
    &Gpu,
    blob_kernels::cuda::cudarc::driver::LaunchConfig,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    i64,
    &CudaView<'_, f32>,
    &mut CudaViewMut<'_, f32>,
) -> std::result::Result<(), blob_kernels::cuda::CudaError>;

/// One thread per top value, `kernel` moving it.
///
/// # Safety
/// `from` and `to` hold the bottom and the top (`n` values) of `sizes`.
unsafe fn launch(
    gpu: &Gpu,
    kernel: Kernel,
    sizes: [i64; 7],
    n: usize,
    from: &CudaView<'_, f32>,
    to: &mut CudaViewMut<'_, f32>,
) -> Result<()> {
    let [d1, d2, d3, s0, s1, s2, s3] = sizes;
    // SAFETY: the caller's.
    unsafe {
        kernel(
            gpu,
            launch_config(n),
            n as i64,
            d1,
            d2,
            d3,
            s0,
            s1,
            s2,
            s3,
            from,
            to,
        )
    }
    .map_err(|e| cuda(OP, e))
}
