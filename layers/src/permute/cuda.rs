//! Strided moves on the GPU: Permute's (SSD's heads) and Crop's (FCN's),
//! one thread a value, gathering forward and scattering back. Axes of one
//! value are dropped and axes that walk as one merged; a walk still of
//! more than four axes runs as blocks of its innermost four.

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

/// Where each value of a top lies in its bottom: the innermost four axes
/// of the walk as the kernels take them (`d1, d2, d3, s0, s1, s2, s3`),
/// and the axes outside them, `(dim, stride)`, which the host steps
/// through launch by launch (a walk of five or more axes after merging:
/// rare, and each launch still moves a block of values).
#[derive(Clone)]
pub(crate) struct Walk {
    inner_n: usize,
    inner: [i64; 7],
    outer: Vec<(usize, usize)>,
    base: usize,
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
    /// `None` where an offset does not fit the kernels' 64 bits.
    pub(crate) fn new(dims: &[usize], strides: &[usize], base: usize) -> Option<Self> {
        let mut axes = merged(dims, strides);
        let outer = axes.drain(..axes.len().saturating_sub(4)).collect();
        let pad = 4 - axes.len();
        let mut d = [1i64; 4];
        let mut s = [0i64; 4];
        for (a, &(dim, stride)) in axes.iter().enumerate() {
            d[pad + a] = i64::try_from(dim).ok()?;
            s[pad + a] = i64::try_from(stride).ok()?;
        }
        let count: usize = dims.iter().product();
        // The largest offset a kernel computes must fit too.
        let last = dims.iter().zip(strides).try_fold(base, |at, (&d, &s)| {
            at.checked_add(d.saturating_sub(1).checked_mul(s)?)
        })?;
        i64::try_from(last.max(count)).ok()?;
        Some(Self {
            inner_n: axes.iter().map(|a| a.0).product(),
            inner: [d[1], d[2], d[3], s[0], s[1], s[2], s[3]],
            outer,
            base,
        })
    }

    /// Each block of the walk: where its top values start and the source
    /// of its first one, the outer axes stepped in the top's order.
    fn blocks(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        let blocks: usize = self.outer.iter().map(|a| a.0).product();
        (0..blocks).map(move |b| {
            let (mut rest, mut source) = (b, self.base);
            for &(dim, stride) in self.outer.iter().rev() {
                source += rest % dim * stride;
                rest /= dim;
            }
            (b * self.inner_n, source)
        })
    }

    /// The top's values from the bottom's.
    pub(crate) fn gather(
        &self,
        gpu: &Gpu,
        what: &'static str,
        x: &CudaView<'_, f32>,
        y: &mut CudaViewMut<'_, f32>,
    ) -> Result<()> {
        if self.inner_n == 0 {
            return Ok(());
        }
        for (at, source) in self.blocks() {
            let mut block = y.slice_mut(at..at + self.inner_n);
            // SAFETY: the block holds inner_n values and each source lies
            // in x (the layer's shapes say so).
            unsafe { self.launch(gpu, what, gather_strided_f32, source, x, &mut block) }?;
        }
        Ok(())
    }

    /// The top's gradient put back at the sources in the bottom's.
    pub(crate) fn scatter(
        &self,
        gpu: &Gpu,
        what: &'static str,
        dy: &CudaView<'_, f32>,
        dx: &mut CudaViewMut<'_, f32>,
    ) -> Result<()> {
        if self.inner_n == 0 {
            return Ok(());
        }
        for (at, source) in self.blocks() {
            let block = dy.slice(at..at + self.inner_n);
            // SAFETY: as gather, the other way.
            unsafe { self.launch(gpu, what, scatter_strided_f32, source, &block, dx) }?;
        }
        Ok(())
    }

    /// One thread per value of a block of the top, `kernel` moving it,
    /// the block's first source at `base`.
    ///
    /// # Safety
    /// The top's view holds the block's values and every source lies in
    /// the bottom's view.
    unsafe fn launch(
        &self,
        gpu: &Gpu,
        what: &'static str,
        kernel: Kernel,
        base: usize,
        from: &CudaView<'_, f32>,
        to: &mut CudaViewMut<'_, f32>,
    ) -> Result<()> {
        let [d1, d2, d3, s0, s1, s2, s3] = self.inner;
        let n = self.inner_n;
        // SAFETY: the caller's; base fits (checked in new).
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
                base as i64,
                from,
                to,
            )
        }
        .map_err(|e| cuda(what, e))
    }
}

#[cfg(test)]
mod tests {
    use super::{Walk, merged};

    #[test]
    fn walks_of_more_than_four_axes_run_as_blocks_of_the_same_sources() {
        // Permute (0, 5, 3, 1, 4, 2) of a (2, 2, 3, 2, 3, 6) bottom: no two
        // neighbours walk as one, so six axes.
        let (dims, strides) = ([2, 6, 2, 2, 3, 3], [216, 1, 18, 108, 6, 36]);
        assert_eq!(merged(&dims, &strides).len(), 6);
        let base = 5;
        let walk = Walk::new(&dims, &strides, base).unwrap();
        let original = |mut i: usize| {
            dims.iter().zip(&strides).rev().fold(base, |at, (&d, &s)| {
                let a = i % d;
                i /= d;
                at + a * s
            })
        };
        let [d1, d2, d3, s0, s1, s2, s3] = walk.inner.map(|v| v as usize);
        let mut seen = 0;
        for (at, first) in walk.blocks() {
            for i in 0..walk.inner_n {
                let (a3, r) = (i % d3, i / d3);
                let (a2, r) = (r % d2, r / d2);
                let (a1, a0) = (r % d1, r / d1);
                let source = first + a0 * s0 + a1 * s1 + a2 * s2 + a3 * s3;
                assert_eq!(source, original(at + i), "top value {}", at + i);
                seen += 1;
            }
        }
        assert_eq!(seen, 432, "every top value once");
    }

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
