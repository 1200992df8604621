//! [`SumLayout`]'s sums on the GPU: the passes of `sums.cu`.

use cudarc::driver::{CudaView, CudaViewMut};

use super::{CudaError, Gpu, launch_config, len_i64};
use crate::sums::SumLayout;

crate::cuda_kernels! {
    /// `sums.cu`: strided sums in passes, `f32`.
    pub static SUMS = "sums.cu";
    fn partial_sums_f32(
        total: i64, lanes: i32, len: i64, run: i64, sum_stride: i64, run_stride: i64,
        m: &CudaView<'_, f32>, partial: &mut CudaViewMut<'_, f32>
    );
    fn add_partial_sums_f32(sums: i64, lanes: i32, partial: &CudaView<'_, f32>, out: &mut CudaViewMut<'_, f32>);
}

impl Gpu {
    /// `sums[r] +=` the values of sum `r` of `m` as `layout` places them
    /// (a bias's gradient: Caffe's gemv against a vector of ones). The
    /// result is what [`SumLayout::add_on_cpu`] gives, bit for bit.
    ///
    /// ```no_run
    /// use blob_kernels::{cuda::{CudaError, Gpu}, sums::SumLayout};
    /// let gpu = Gpu::new(0)?;
    /// let m = gpu.stream().clone_htod(&[1.0f32, 2.0, 3.0, 4.0]).map_err(CudaError::driver("copy"))?;
    /// let mut sums = gpu.stream().alloc_zeros::<f32>(2).map_err(CudaError::driver("alloc"))?;
    /// gpu.add_sums(&SumLayout::columns_of(2, 2), &m.as_view(), &mut sums.as_view_mut())?;
    /// # Ok::<(), CudaError>(())
    /// ```
    pub fn add_sums(
        &self,
        layout: &SumLayout,
        m: &CudaView<'_, f32>,
        sums: &mut CudaViewMut<'_, f32>,
    ) -> Result<(), CudaError> {
        if m.len() < layout.span()
            || sums.len() < layout.sums
            || (layout.run == 0 && layout.len > 0)
        {
            return Err(CudaError::Argument {
                op: "add_sums",
                detail: format!(
                    "{layout:?} needs {} values and {} sums, got {} and {}",
                    layout.span(),
                    layout.sums,
                    m.len(),
                    sums.len()
                ),
            });
        }
        if layout.sums == 0 || layout.len == 0 {
            return Ok(());
        }
        let passes = layout.passes();
        let sizes: Vec<usize> = passes.iter().map(|(l, lanes)| l.sums * lanes).collect();
        self.with_scratch(sizes.iter().sum(), |scratch| {
            // Each pass writes the region after the one it reads.
            let mut start = 0;
            for (k, (&(pass, lanes), &size)) in passes.iter().zip(&sizes).enumerate() {
                let (before, mut after) = scratch.split_at_mut(start);
                let input = if k == 0 {
                    m.slice(..)
                } else {
                    before.slice(start - sizes[k - 1]..)
                };
                // SAFETY: the first pass reads m below the layout's span
                // (checked above), a later one the sums * lanes partial
                // sums before it; each writes size = sums * lanes values.
                unsafe {
                    partial_sums_f32(
                        self,
                        launch_config(size),
                        len_i64(size),
                        lanes as i32,
                        len_i64(pass.len),
                        len_i64(pass.run),
                        len_i64(pass.sum_stride),
                        len_i64(pass.run_stride),
                        &input,
                        &mut after.slice_mut(..size),
                    )
                }?;
                start += size;
            }
            let last = sizes[sizes.len() - 1];
            let lanes = passes[passes.len() - 1].1;
            // SAFETY: the last region holds sums * lanes values and sums
            // at least sums.
            unsafe {
                add_partial_sums_f32(
                    self,
                    launch_config(layout.sums),
                    len_i64(layout.sums),
                    lanes as i32,
                    &scratch.slice(start - last..start),
                    sums,
                )
            }
        })
    }
}
