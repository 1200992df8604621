//! The CUDA side of Concat and Slice: each part's slabs moved into or
//! out of their place in the joined blob, one thread a value.

use blob_kernels::cuda::cudarc::driver::{CudaView, CudaViewMut};
use blob_kernels::cuda::{Gpu, launch_config};

use super::Slabs;
use crate::gpu::cuda;
use crate::layer::Result;

blob_kernels::cuda_kernels! {
    /// `concat.cu`: Concat's and Slice's moves, `f32`.
    pub(crate) static CONCAT = "concat.cu";
    /// `joined[place] = part`.
    pub(crate) fn slabs_join_f32(
        n: i64, inner: i64, total: i64, offset: i64, len: i64, part: &CudaView<'_, f32>,
        joined: &mut CudaViewMut<'_, f32>
    );
    /// `part = joined[place]`.
    pub(crate) fn slabs_split_f32(
        n: i64, inner: i64, total: i64, offset: i64, len: i64, joined: &CudaView<'_, f32>,
        part: &mut CudaViewMut<'_, f32>
    );
}

const OP: &str = "Concat or Slice on the GPU";

impl Slabs {
    /// The part's value count, and the kernels' sizes.
    fn gpu_args(&self) -> (usize, [i64; 4]) {
        let n = self.outer * self.len * self.inner;
        let i = |v: usize| v as i64;
        (
            n,
            [i(self.inner), i(self.total), i(self.offset), i(self.len)],
        )
    }

    /// [`join`](Self::join) on the GPU; the views hold the part and the
    /// joined blob.
    pub(crate) fn join_on(
        &self,
        gpu: &Gpu,
        part: &CudaView<'_, f32>,
        joined: &mut CudaViewMut<'_, f32>,
    ) -> Result<()> {
        let (n, [inner, total, offset, len]) = self.gpu_args();
        // SAFETY: the part holds n values and the joined blob reaches
        // every place (the layer's shapes say so).
        unsafe {
            slabs_join_f32(
                gpu,
                launch_config(n),
                n as i64,
                inner,
                total,
                offset,
                len,
                part,
                joined,
            )
        }
        .map_err(|e| cuda(OP, e))
    }

    /// [`split`](Self::split) on the GPU.
    pub(crate) fn split_on(
        &self,
        gpu: &Gpu,
        joined: &CudaView<'_, f32>,
        part: &mut CudaViewMut<'_, f32>,
    ) -> Result<()> {
        let (n, [inner, total, offset, len]) = self.gpu_args();
        // SAFETY: as for join_on.
        unsafe {
            slabs_split_f32(
                gpu,
                launch_config(n),
                n as i64,
                inner,
                total,
                offset,
                len,
                joined,
                part,
            )
        }
        .map_err(|e| cuda(OP, e))
    }
}
