//! The CUDA side of LSTMUnit: `lstm_unit.cu`.

use blob_kernels::cuda::cudarc::driver::{CudaView, CudaViewMut};
use blob_kernels::cuda::{Gpu, launch_config};

use crate::gpu::cuda;
use crate::layer::Result;

blob_kernels::cuda_kernels! {
    /// `lstm_unit.cu`: LSTMUnit's step and its gradients, `f32` in double.
    pub(crate) static LSTM_UNIT = "lstm_unit.cu";
    /// `c` and `h` of the `units` (items x hidden) from `c_prev`, the
    /// gates' inputs `x` and `cont`.
    pub(crate) fn lstm_unit_forward_f32(
        units: i64, h: i64, c_prev: &CudaView<'_, f32>, x: &CudaView<'_, f32>,
        cont: &CudaView<'_, f32>, c: &mut CudaViewMut<'_, f32>, hidden: &mut CudaViewMut<'_, f32>
    );
    /// The gradients of `c_prev` and of the gates' inputs.
    pub(crate) fn lstm_unit_backward_f32(
        units: i64, h: i64, c_prev: &CudaView<'_, f32>, x: &CudaView<'_, f32>,
        cont: &CudaView<'_, f32>, dc_top: &CudaView<'_, f32>, dh_top: &CudaView<'_, f32>,
        dc_prev: &mut CudaViewMut<'_, f32>, dx: &mut CudaViewMut<'_, f32>
    );
}

const OP: &str = "LSTMUnit on the GPU";

/// LSTMUnit's inputs on the device: `c_prev` (N x H), `x` (N x 4H), `cont` (N).
pub(crate) struct StepInputs<'a> {
    pub c_prev: &'a CudaView<'a, f32>,
    pub x: &'a CudaView<'a, f32>,
    pub cont: &'a CudaView<'a, f32>,
}

/// The forward step over `items` x `hidden` units.
pub(crate) fn forward(
    gpu: &Gpu,
    (items, hidden): (usize, usize),
    inputs: StepInputs<'_>,
    c: &mut CudaViewMut<'_, f32>,
    h: &mut CudaViewMut<'_, f32>,
) -> Result<()> {
    let units = items * hidden;
    if units == 0 {
        return Ok(());
    }
    let StepInputs { c_prev, x, cont } = inputs;
    // SAFETY: c_prev, c and h hold units values, x 4 units, cont items.
    unsafe {
        lstm_unit_forward_f32(
            gpu,
            launch_config(units),
            units as i64,
            hidden as i64,
            c_prev,
            x,
            cont,
            c,
            h,
        )
    }
    .map_err(|e| cuda(OP, e))
}

/// The backward step: `c_prev`'s and the gates' gradients from `c`'s and `h`'s.
pub(crate) fn backward(
    gpu: &Gpu,
    (items, hidden): (usize, usize),
    inputs: StepInputs<'_>,
    (dc_top, dh_top): (&CudaView<'_, f32>, &CudaView<'_, f32>),
    dc_prev: &mut CudaViewMut<'_, f32>,
    dx: &mut CudaViewMut<'_, f32>,
) -> Result<()> {
    let units = items * hidden;
    if units == 0 {
        return Ok(());
    }
    let StepInputs { c_prev, x, cont } = inputs;
    // SAFETY: as for forward; dc_top, dh_top and dc_prev hold units
    // values, dx 4 units.
    unsafe {
        lstm_unit_backward_f32(
            gpu,
            launch_config(units),
            units as i64,
            hidden as i64,
            c_prev,
            x,
            cont,
            dc_top,
            dh_top,
            dc_prev,
            dx,
        )
    }
    .map_err(|e| cuda(OP, e))
}
