//! [`SumLayout`]'s sums on the GPU: the two passes of `sums.cu`.

use cudarc::driver::{CudaView, CudaViewMut};

use super::{CudaError, Gpu, launch_config, len_i64};
use crate::sums::SumLayout;

crate::cuda_kernels! {
    /// `sums.cu`: strided sums in two passes, `f32`.
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
        let lanes = layout.lanes();
        let total = layout.sums * lanes;
        // lanes is at most 1024.
        let lanes_i32 = lanes as i32;
        self.with_scratch(total, |partial| {
            // SAFETY: partial_sums reads m below span (checked above) and
            // writes partial[0..total].
            unsafe {
                partial_sums_f32(
                    self,
                    launch_config(total),
                    len_i64(total),
                    lanes_i32,
                    len_i64(layout.len),
                    len_i64(layout.run),
                    len_i64(layout.sum_stride),
                    len_i64(layout.run_stride),
                    m,
                    partial,
                )
            }?;
            // SAFETY: partial holds sums * lanes values and sums at least
            // sums.
            unsafe {
                add_partial_sums_f32(
                    self,
                    launch_config(layout.sums),
                    len_i64(layout.sums),
                    lanes_i32,
                    &partial.as_view(),
                    sums,
                )
            }
        })
    }
}
