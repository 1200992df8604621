//! Strided moves on the GPU, for tops of up to four axes: Permute's
//! (SSD's heads) and Crop's (FCN's), one thread a value, gathering
//! forward and scattering back.

use blob_kernels::cuda::cudarc::driver::{CudaView, CudaViewMut};
use blob_kernels::cuda::{Gpu, launch_config};

use crate::gpu::cuda;
use crate::layer::Result;

blob_kernels::cuda_kernels! {
    /// `permute.cu`: strided moves, `f32`.
    pub(crate) static PERMUTE = "permute.cu";
    /// `y[i] = x[source(i)]`.
    pub(crate) fn gather_strided_f32(
        n: i64, d1: i64, d2: i64, d3: i64, s0: i64, s1: i64, s2: i64, s3: i64, base: i64,
        x: &CudaView<'_, f32>, y: &mut CudaViewMut<'_, f32>
    );
    /// `dx[source(i)] = dy[i]`.
    pub(crate) fn scatter_strided_f32(
        n: i64, d1: i64, d2: i64, d3: i64, s0: i64, s1: i64, s2: i64, s3: i64, base: i64,
        dy: &CudaView<'_, f32>, dx: &mut CudaViewMut<'_, f32>
    );
}

/// Where each value of a top lies in its bottom: the top's count, and
/// `d1, d2, d3, s0, s1, s2, s3, base` as the kernels take them.
#[derive(Clone, Copy)]
pub(crate) struct Walk {
    n: usize,
    args: [i64; 8],
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
    i64,
    &CudaView<'_, f32>,
    &mut CudaViewMut<'_, f32>,
) -> std::result::Result<(), blob_kernels::cuda::CudaError>;

impl Walk {
    /// A top of `dims` walking the bottom by `strides` from `base`;
    /// `None` above four axes (the host takes those).
    pub(crate) fn new(dims: &[usize], strides: &[usize], base: usize) -> Option<Self> {
        let pad = 4usize.checked_sub(dims.len())?;
        let mut d = [1i64; 4];
        let mut s = [0i64; 4];
        for (a, (&dim, &stride)) in dims.iter().zip(strides).enumerate() {
            d[pad + a] = i64::try_from(dim).ok()?;
            s[pad + a] = i64::try_from(stride).ok()?;
        }
        let base = i64::try_from(base).ok()?;
        Some(Self {
            n: dims.iter().product(),
            args: [d[1], d[2], d[3], s[0], s[1], s[2], s[3], base],
        })
    }

    /// The top's `n` values from the bottom's.
    pub(crate) fn gather(
        self,
        gpu: &Gpu,
        what: &'static str,
        x: &CudaView<'_, f32>,
        y: &mut CudaViewMut<'_, f32>,
    ) -> Result<()> {
        // SAFETY: y holds n values and each source lies in x (the
        // layer's shapes say so).
        unsafe { self.launch(gpu, what, gather_strided_f32, x, y) }
    }

    /// The top's gradient put back at the sources in the bottom's.
    pub(crate) fn scatter(
        self,
        gpu: &Gpu,
        what: &'static str,
        dy: &CudaView<'_, f32>,
        dx: &mut CudaViewMut<'_, f32>,
    ) -> Result<()> {
        // SAFETY: as gather, the other way.
        unsafe { self.launch(gpu, what, scatter_strided_f32, dy, dx) }
    }

    /// One thread per top value, `kernel` moving it.
    ///
    /// # Safety
    /// The top's view holds its values and every source lies in the
    /// bottom's view.
    unsafe fn launch(
        self,
        gpu: &Gpu,
        what: &'static str,
        kernel: Kernel,
        from: &CudaView<'_, f32>,
        to: &mut CudaViewMut<'_, f32>,
    ) -> Result<()> {
        let [d1, d2, d3, s0, s1, s2, s3, base] = self.args;
        let n = self.n;
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
                base,
                from,
                to,
            )
        }
        .map_err(|e| cuda(what, e))
    }
}
