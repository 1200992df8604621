//! Strided moves on the GPU, for tops whose walk takes four axes or
//! fewer once axes of one value are dropped and axes that walk as one
//! are merged: Permute's (SSD's heads) and Crop's (FCN's), one thread a
//! value, gathering forward and scattering back.

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

/// The same walk as `(dims, strides)` over as few axes as it takes:
/// axes of one value dropped, and each axis merged into the one before
/// it where the two walk as one (the outer's stride is the inner's
/// times its length). A 5-D Permute that keeps two neighbours together
/// walks in four axes or fewer.
fn merged(dims: &[usize], strides: &[usize]) -> Vec<(usize, usize)> {
    let mut axes: Vec<(usize, usize)> = Vec::with_capacity(dims.len());
    for (&dim, &stride) in dims.iter().zip(strides) {
        if dim == 1 {
            continue;
        }
        match axes.last_mut() {
            Some(outer) if outer.1 == dim.saturating_mul(stride) => {
                *outer = (outer.0 * dim, stride);
            }
            _ => axes.push((dim, stride)),
        }
    }
    axes
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
    /// `None` where the walk needs more than four axes (the host takes
    /// those).
    pub(crate) fn new(dims: &[usize], strides: &[usize], base: usize) -> Option<Self> {
        let axes = merged(dims, strides);
        let pad = 4usize.checked_sub(axes.len())?;
        let mut d = [1i64; 4];
        let mut s = [0i64; 4];
        for (a, &(dim, stride)) in axes.iter().enumerate() {
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

#[cfg(test)]
mod tests {
    use super::merged;

    #[test]
    fn walks_merge_where_axes_walk_as_one() {
        // Permute (0, 1, 3, 4, 2) of a (2, 2, 3, 6, 6) bottom: the first
        // two axes, and the two spatial ones, walk as one each.
        let (dims, strides) = ([2, 2, 6, 6, 3], [216, 108, 6, 1, 36]);
        assert_eq!(merged(&dims, &strides), [(4, 108), (36, 1), (3, 36)]);
        // Axes of one value go; nothing else merges in a transposition.
        assert_eq!(merged(&[1, 3, 1, 4], &[12, 1, 5, 3]), [(3, 1), (4, 3)]);
        // An identity walk is one axis.
        assert_eq!(merged(&[2, 3, 4, 5, 6], &[360, 120, 30, 6, 1]), [(720, 1)]);
        // Every source of the merged walk is the original's.
        let source = |axes: &[(usize, usize)], mut i: usize| {
            axes.iter().rev().fold(0, |at, &(d, s)| {
                let a = i % d;
                i /= d;
                at + a * s
            })
        };
        let original: Vec<_> = dims.iter().copied().zip(strides).collect();
        let m = merged(&dims, &strides);
        assert!((0..432).all(|i| source(&original, i) == source(&m, i)));
    }
}
