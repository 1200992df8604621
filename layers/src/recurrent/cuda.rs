//! The CUDA side of LSTMUnit (`lstm_unit.cu`), and of RNN and LSTM: the
//! same passes as the CPU side's (the input's and static input's
//! products for every step at once through cuBLAS, then each step's
//! recurrent product and its cell: LSTMUnit's kernel for LSTM, TanH for
//! RNN), in `f32` where the CPU side sums in `f64`; the state a pass
//! ends in stays on the device for the next.

use blob_kernels::cpu::Transpose::{No, Yes};
use blob_kernels::cuda::cudarc::driver::{CudaView, CudaViewMut};
use blob_kernels::cuda::{CudaError, Gpu, Scratch, launch_config};
use blob_kernels::sums::SumLayout;
use blob_runtime::{Blob, MathElement};

use super::{Cell, Dims};
use crate::activation::cuda::activate_f32;
use crate::gpu::{as_f32, cuda, int, read, write};
use crate::inner_product::cuda::add_bias_rows_f32;
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

blob_kernels::cuda_kernels! {
    /// `recurrent.cu`: the previous hidden state masked by `cont`, `f32`.
    pub(crate) static RECURRENT = "recurrent.cu";
    /// `dst[i] = src[i] * cont[i / h]`.
    pub(crate) fn mask_rows_f32(
        total: i64, h: i64, src: &CudaView<'_, f32>, cont: &CudaView<'_, f32>,
        dst: &mut CudaViewMut<'_, f32>
    );
    /// `y[i] *= cont[i / h]`.
    pub(crate) fn mask_rows_inplace_f32(total: i64, h: i64, cont: &CudaView<'_, f32>, y: &mut CudaViewMut<'_, f32>);
    /// `dx = dy (1 - tanh(x)^2)`, in double.
    pub(crate) fn tanh_backward_from_input_f32(
        n: i64, x: &CudaView<'_, f32>, dy: &CudaView<'_, f32>, dx: &mut CudaViewMut<'_, f32>
    );
}

const OP: &str = "LSTMUnit on the GPU";

/// LSTMUnit's inputs on the device: `c_prev` (N x H), `x` (N x 4H), `cont` (N).
pub(crate) struct StepInputs<'a> {
    pub c_prev: &'a CudaView<'a, f32>,
    pub x: &'a CudaView<'a, f32>,
    pub cont: &'a CudaView<'a, f32>,
}

/// LSTMUnit's forward step over `items` x `hidden` units.
pub(crate) fn unit_forward(
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

/// LSTMUnit's backward step: `c_prev`'s and the gates' gradients from `c`'s and `h`'s.
pub(crate) fn unit_backward(
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

const RECURRENT_OP: &str = "RNN / LSTM on the GPU";

/// The activation kernels' TanH.
const TANH: i32 = 2;

/// What a GPU pass of RNN or LSTM keeps: its trace for the backward pass
/// (the gates' inputs, cells, hidden states, the masked previous states
/// each step read, the inputs of RNN's output TanH, the starting state), the state it
/// ended in for the next pass, and the backward pass's buffers.
#[derive(Default)]
pub(crate) struct GpuTrace {
    gates: Scratch<f32>,
    cells: Scratch<f32>,
    hidden: Scratch<f32>,
    prevs: Scratch<f32>,
    outputs: Scratch<f32>,
    start_h: Scratch<f32>,
    start_c: Scratch<f32>,
    fixed_part: Scratch<f32>,
    /// The state the last pass ended in, and for how many items.
    carried_h: Scratch<f32>,
    carried_c: Scratch<f32>,
    carried_items: Option<usize>,
    /// (steps, items) of the last forward pass.
    traced: Option<(usize, usize)>,
    dgates: Scratch<f32>,
    dh: Scratch<f32>,
    dh_next: Scratch<f32>,
    dc_next: Scratch<f32>,
    dc_prev: Scratch<f32>,
    above: Scratch<f32>,
    summed: Scratch<f32>,
}

fn failed(e: CudaError) -> blob_runtime::BlobError {
    cuda(RECURRENT_OP, e)
}

/// `y = src * cont` row by row (`h` values an item).
fn mask(
    gpu: &Gpu,
    h: usize,
    src: &CudaView<'_, f32>,
    cont: &CudaView<'_, f32>,
    dst: &mut CudaViewMut<'_, f32>,
) -> Result<()> {
    let total = dst.len();
    if total == 0 {
        return Ok(());
    }
    // SAFETY: src and dst hold `total` values, cont total / h.
    unsafe {
        mask_rows_f32(
            gpu,
            launch_config(total),
            total as i64,
            h as i64,
            src,
            cont,
            dst,
        )
    }
    .map_err(failed)
}

/// `y[i] += part[i % width]` over all of `y`.
fn add_rows(gpu: &Gpu, part: &CudaView<'_, f32>, y: &mut CudaViewMut<'_, f32>) -> Result<()> {
    let total = y.len();
    if total == 0 {
        return Ok(());
    }
    // SAFETY: y holds `total` values, part its width.
    unsafe {
        add_bias_rows_f32(
            gpu,
            launch_config(total),
            total as i64,
            int(RECURRENT_OP, part.len())?,
            part,
            y,
        )
    }
    .map_err(failed)
}

/// `y = tanh(x)`.
fn tanh(gpu: &Gpu, x: &CudaView<'_, f32>, y: &mut CudaViewMut<'_, f32>) -> Result<()> {
    let n = y.len();
    if n == 0 {
        return Ok(());
    }
    // SAFETY: x and y hold n values.
    unsafe { activate_f32(gpu, launch_config(n), n as i64, TANH, x, y) }.map_err(failed)
}

/// `dx = dy (1 - tanh(x)^2)`, TanH's gradient from its input `x`, in
/// double as the CPU side computes it (from an `f32` output, `1 - y^2`
/// keeps few digits where a unit saturates).
fn tanh_backward(
    gpu: &Gpu,
    x: &CudaView<'_, f32>,
    dy: &CudaView<'_, f32>,
    dx: &mut CudaViewMut<'_, f32>,
) -> Result<()> {
    let n = dx.len();
    if n == 0 {
        return Ok(());
    }
    // SAFETY: x, dy and dx hold n values.
    unsafe { tanh_backward_from_input_f32(gpu, launch_config(n), n as i64, x, dy, dx) }
        .map_err(failed)
}

fn zero(gpu: &Gpu, y: &mut CudaViewMut<'_, f32>) -> Result<()> {
    if y.is_empty() {
        return Ok(());
    }
    gpu.stream()
        .memset_zeros(y)
        .map_err(CudaError::driver("zero GPU memory"))
        .map_err(failed)
}

/// `x`'s first `y.len()` values into `y`, on the device.
fn copy(gpu: &Gpu, x: &CudaView<'_, f32>, y: &mut CudaViewMut<'_, f32>) -> Result<()> {
    gpu.copy(&x.slice(..y.len()), y).map_err(failed)
}

/// The layer's shapes for one pass.
pub(crate) struct Pass {
    pub cell: Cell,
    pub hidden: usize,
    /// The gates' inputs an item has a step: 4 H for LSTM, H for RNN.
    pub rows: usize,
    pub dims: Dims,
}

impl Pass {
    /// Where W_hc / W_hh sits among the blobs.
    fn recurrent_blob(&self) -> usize {
        2 + usize::from(self.dims.fixed.is_some())
    }
}

/// RNN's or LSTM's forward pass on `gpu`: see the [module](self)
/// documentation.
pub(crate) fn forward<T: MathElement>(
    gpu: &Gpu,
    pass: &Pass,
    (bottoms, tops): (&[&Blob<T>], &[&Blob<T>]),
    blobs: &[Blob<T>],
    trace: &mut GpuTrace,
) -> Result<()> {
    let d = pass.dims;
    let (h, rows, n) = (pass.hidden, pass.rows, d.items);
    let positions = d.steps * n;
    let lstm = pass.cell == Cell::Lstm;
    let (xg, contg) = (
        as_f32(bottoms[0]).gpu_data()?,
        as_f32(bottoms[1]).gpu_data()?,
    );
    let (x, cont) = (read(&xg, positions * d.input)?, read(&contg, positions)?);
    let w: Vec<_> = blobs
        .iter()
        .map(|b| as_f32(b).gpu_data())
        .collect::<std::result::Result<_, _>>()?;
    let view = |i: usize| read(&w[i], blobs[i].count());
    // The starting state: the exposed bottoms', the last pass's end, or
    // zeros.
    {
        let mut start_h = trace.start_h.grown(gpu, n * h).map_err(failed)?;
        let mut start_c = trace.start_c.grown(gpu, n * h).map_err(failed)?;
        if let Some(at) = d.state_at {
            let hg = as_f32(bottoms[at]).gpu_data()?;
            copy(gpu, &read(&hg, n * h)?, &mut start_h)?;
            if lstm {
                let cg = as_f32(bottoms[at + 1]).gpu_data()?;
                copy(gpu, &read(&cg, n * h)?, &mut start_c)?;
            }
        } else if trace.carried_items == Some(n) {
            let carried_h = trace.carried_h.view(n * h).expect("carried");
            copy(gpu, &carried_h, &mut start_h)?;
            let carried_c = trace.carried_c.view(n * h).expect("carried");
            copy(gpu, &carried_c, &mut start_c)?;
        } else {
            zero(gpu, &mut start_h)?;
            zero(gpu, &mut start_c)?;
        }
    }
    let mut gates = trace.gates.grown(gpu, positions * rows).map_err(failed)?;
    gpu.gemm(
        No,
        Yes,
        positions,
        rows,
        d.input,
        1.0,
        &x,
        &view(0)?,
        0.0,
        &mut gates,
    )
    .map_err(failed)?;
    add_rows(gpu, &view(1)?, &mut gates)?;
    if let Some(size) = d.fixed {
        let sg = as_f32(bottoms[2]).gpu_data()?;
        let mut part = trace.fixed_part.grown(gpu, n * rows).map_err(failed)?;
        gpu.gemm(
            No,
            Yes,
            n,
            rows,
            size,
            1.0,
            &read(&sg, n * size)?,
            &view(2)?,
            0.0,
            &mut part,
        )
        .map_err(failed)?;
        add_rows(gpu, &part.as_view(), &mut gates)?;
    }
    let w_h = view(pass.recurrent_blob())?;
    let mut cells = trace.cells.grown(gpu, positions * h).map_err(failed)?;
    let mut hidden = trace.hidden.grown(gpu, positions * h).map_err(failed)?;
    let mut prevs = trace.prevs.grown(gpu, positions * h).map_err(failed)?;
    let start_h = trace.start_h.view(n * h).expect("grown above");
    let start_c = trace.start_c.view(n * h).expect("grown above");
    let (state, step_gates) = (n * h, n * rows);
    for t in 0..d.steps {
        let cont_t = cont.slice(t * n..(t + 1) * n);
        {
            let mut prev = prevs.slice_mut(t * state..(t + 1) * state);
            if t == 0 {
                mask(gpu, h, &start_h, &cont_t, &mut prev)?;
            } else {
                let before = hidden.slice((t - 1) * state..t * state);
                mask(gpu, h, &before, &cont_t, &mut prev)?;
            }
        }
        let mut g = gates.slice_mut(t * step_gates..(t + 1) * step_gates);
        let prev = prevs.slice(t * state..(t + 1) * state);
        gpu.gemm(No, Yes, n, rows, h, 1.0, &prev, &w_h, 1.0, &mut g)
            .map_err(failed)?;
        let mut out = hidden.slice_mut(t * state..(t + 1) * state);
        match pass.cell {
            Cell::Lstm => {
                let (done, mut now) = cells.split_at_mut(t * state);
                let c_prev = if t == 0 {
                    start_c.slice(..)
                } else {
                    done.slice((t - 1) * state..)
                };
                let mut c = now.slice_mut(..state);
                let inputs = StepInputs {
                    c_prev: &c_prev,
                    x: &g.as_view(),
                    cont: &cont_t,
                };
                unit_forward(gpu, (n, h), inputs, &mut c, &mut out)?;
            }
            Cell::Rnn => tanh(gpu, &g.as_view(), &mut out)?,
        }
    }
    let mut top = as_f32(tops[0]).mutable_gpu_data()?;
    let mut top = write(&mut top, positions * h)?;
    if lstm {
        copy(gpu, &hidden.as_view(), &mut top)?;
    } else {
        // o_t = tanh(W_ho h_t + b_o), every step at once; its input kept
        // for backward.
        let mut outputs = trace.outputs.grown(gpu, positions * h).map_err(failed)?;
        let who = blobs.len() - 2;
        gpu.gemm(
            No,
            Yes,
            positions,
            h,
            h,
            1.0,
            &hidden.as_view(),
            &view(who)?,
            0.0,
            &mut outputs,
        )
        .map_err(failed)?;
        add_rows(gpu, &view(who + 1)?, &mut outputs)?;
        tanh(gpu, &outputs.as_view(), &mut top)?;
    }
    trace.traced = Some((d.steps, n));
    // The state the pass ended in (its last step's, the starting state's
    // where it had none) to the exposed tops, or kept for the next pass.
    let (end_h, end_c) = match d.steps.checked_sub(1) {
        Some(last) => (
            hidden.slice(last * state..(last + 1) * state),
            cells.slice(last * state..(last + 1) * state),
        ),
        None => (start_h.slice(..), start_c.slice(..)),
    };
    if d.state_at.is_some() {
        let mut top = as_f32(tops[1]).mutable_gpu_data()?;
        copy(gpu, &end_h, &mut write(&mut top, state)?)?;
        if lstm {
            let mut top = as_f32(tops[2]).mutable_gpu_data()?;
            copy(gpu, &end_c, &mut write(&mut top, state)?)?;
        }
        return Ok(());
    }
    copy(
        gpu,
        &end_h,
        &mut trace.carried_h.grown(gpu, state).map_err(failed)?,
    )?;
    copy(
        gpu,
        &end_c,
        &mut trace.carried_c.grown(gpu, state).map_err(failed)?,
    )?;
    trace.carried_items = Some(n);
    Ok(())
}

/// RNN's or LSTM's backward pass on `gpu`, through time from the last
/// step, after a [`forward`] of the same shapes: the weights' gradients
/// added to, the input's (and static input's) written where asked, the
/// exposed starting state's zero.
pub(crate) fn backward<T: MathElement>(
    gpu: &Gpu,
    pass: &Pass,
    (tops, propagate_down, bottoms): (&[&Blob<T>], &[bool], &[&Blob<T>]),
    blobs: &[Blob<T>],
    trace: &mut GpuTrace,
) -> Result<()> {
    let d = pass.dims;
    let (h, rows, n) = (pass.hidden, pass.rows, d.items);
    let (positions, state, step_gates) = (d.steps * n, n * h, n * rows);
    let contg = as_f32(bottoms[1]).gpu_data()?;
    let cont = read(&contg, positions)?;
    let dyg = as_f32(tops[0]).gpu_diff()?;
    let dy = read(&dyg, positions * h)?;
    let w: Vec<_> = blobs
        .iter()
        .map(|b| as_f32(b).gpu_data())
        .collect::<std::result::Result<_, _>>()?;
    let view = |i: usize| read(&w[i], blobs[i].count());
    let w_h = view(pass.recurrent_blob())?;
    let gates = traced(&trace.gates, positions * rows);
    let hidden = traced(&trace.hidden, positions * h);
    let cells = traced(&trace.cells, positions * h);
    let prevs = traced(&trace.prevs, positions * h);
    let start_c = traced(&trace.start_c, state);
    let mut dgates = trace.dgates.grown(gpu, positions * rows).map_err(failed)?;
    let mut dh = trace.dh.grown(gpu, state).map_err(failed)?;
    let mut dh_next = trace.dh_next.grown(gpu, state).map_err(failed)?;
    zero(gpu, &mut dh_next)?;
    // What reaches each step's hidden state from above: the output's
    // gradient (LSTM), or through o_t = tanh(W_ho h_t + b_o) (RNN).
    let above = match pass.cell {
        Cell::Lstm => dy,
        Cell::Rnn => {
            let who = blobs.len() - 2;
            {
                let outputs = traced(&trace.outputs, positions * h);
                let mut both = trace.above.grown(gpu, 2 * positions * h).map_err(failed)?;
                let (mut d_out, mut through) = both.split_at_mut(positions * h);
                tanh_backward(gpu, &outputs, &dy, &mut d_out)?;
                let d_out = d_out.as_view();
                let (mut dwo, mut dbo) = (
                    as_f32(&blobs[who]).mutable_gpu_diff()?,
                    as_f32(&blobs[who + 1]).mutable_gpu_diff()?,
                );
                let mut dwo = write(&mut dwo, h * h)?;
                gpu.gemm(
                    Yes, No, h, h, positions, 1.0, &d_out, &hidden, 1.0, &mut dwo,
                )
                .map_err(failed)?;
                let columns = SumLayout::columns_of(positions, h);
                gpu.add_sums(&columns, &d_out, &mut write(&mut dbo, h)?)
                    .map_err(failed)?;
                gpu.gemm(
                    No,
                    No,
                    positions,
                    h,
                    h,
                    1.0,
                    &d_out,
                    &view(who)?,
                    0.0,
                    &mut through,
                )
                .map_err(failed)?;
            }
            traced(&trace.above, 2 * positions * h).slice(positions * h..)
        }
    };
    let mut dc_next = trace.dc_next.grown(gpu, state).map_err(failed)?;
    let mut dc_prev = trace.dc_prev.grown(gpu, state).map_err(failed)?;
    zero(gpu, &mut dc_next)?;
    for t in (0..d.steps).rev() {
        let cont_t = cont.slice(t * n..(t + 1) * n);
        // dh = the gradient from above plus the next step's.
        copy(gpu, &above.slice(t * state..(t + 1) * state), &mut dh)?;
        gpu.axpy(1.0, &dh_next.as_view(), &mut dh).map_err(failed)?;
        let mut dg = dgates.slice_mut(t * step_gates..(t + 1) * step_gates);
        match pass.cell {
            Cell::Lstm => {
                let c_prev = if t == 0 {
                    start_c.slice(..)
                } else {
                    cells.slice((t - 1) * state..t * state)
                };
                let g = gates.slice(t * step_gates..(t + 1) * step_gates);
                let inputs = StepInputs {
                    c_prev: &c_prev,
                    x: &g,
                    cont: &cont_t,
                };
                let tops_diff = (&dc_next.as_view(), &dh.as_view());
                unit_backward(gpu, (n, h), inputs, tops_diff, &mut dc_prev, &mut dg)?;
                std::mem::swap(&mut dc_next, &mut dc_prev);
            }
            Cell::Rnn => {
                let g = gates.slice(t * step_gates..(t + 1) * step_gates);
                tanh_backward(gpu, &g, &dh.as_view(), &mut dg)?;
            }
        }
        // The gradient to the previous step's state; the starting state
        // (step 0's) passes it on to nothing.
        if t > 0 {
            gpu.gemm(
                No,
                No,
                n,
                h,
                rows,
                1.0,
                &dg.as_view(),
                &w_h,
                0.0,
                &mut dh_next,
            )
            .map_err(failed)?;
            // SAFETY: dh_next holds n h values, cont_t n.
            unsafe {
                mask_rows_inplace_f32(
                    gpu,
                    launch_config(state),
                    state as i64,
                    h as i64,
                    &cont_t,
                    &mut dh_next,
                )
            }
            .map_err(failed)?;
        }
    }
    let dgates = dgates.as_view();
    // The products every step shares, over all steps at once.
    let xg = as_f32(bottoms[0]).gpu_data()?;
    let x = read(&xg, positions * d.input)?;
    let diff = |i: usize| as_f32(&blobs[i]).mutable_gpu_diff();
    gpu.gemm(
        Yes,
        No,
        rows,
        d.input,
        positions,
        1.0,
        &dgates,
        &x,
        1.0,
        &mut write(&mut diff(0)?, rows * d.input)?,
    )
    .map_err(failed)?;
    gpu.add_sums(
        &SumLayout::columns_of(positions, rows),
        &dgates,
        &mut write(&mut diff(1)?, rows)?,
    )
    .map_err(failed)?;
    let at = pass.recurrent_blob();
    gpu.gemm(
        Yes,
        No,
        rows,
        h,
        positions,
        1.0,
        &dgates,
        &prevs,
        1.0,
        &mut write(&mut diff(at)?, rows * h)?,
    )
    .map_err(failed)?;
    if propagate_down[0] {
        let mut dxg = as_f32(bottoms[0]).mutable_gpu_diff()?;
        gpu.gemm(
            No,
            No,
            positions,
            d.input,
            rows,
            1.0,
            &dgates,
            &view(0)?,
            0.0,
            &mut write(&mut dxg, positions * d.input)?,
        )
        .map_err(failed)?;
    }
    if let Some(size) = d.fixed {
        // Every step adds the same static product: its gradient is the
        // steps' gates' gradients summed.
        let mut summed = trace.summed.grown(gpu, step_gates).map_err(failed)?;
        zero(gpu, &mut summed)?;
        gpu.add_sums(
            &SumLayout::columns_of(d.steps, step_gates),
            &dgates,
            &mut summed,
        )
        .map_err(failed)?;
        let sg = as_f32(bottoms[2]).gpu_data()?;
        gpu.gemm(
            Yes,
            No,
            rows,
            size,
            n,
            1.0,
            &summed.as_view(),
            &read(&sg, n * size)?,
            1.0,
            &mut write(&mut diff(2)?, rows * size)?,
        )
        .map_err(failed)?;
        if propagate_down.get(2) == Some(&true) {
            let mut dsg = as_f32(bottoms[2]).mutable_gpu_diff()?;
            gpu.gemm(
                No,
                No,
                n,
                size,
                rows,
                1.0,
                &summed.as_view(),
                &view(2)?,
                0.0,
                &mut write(&mut dsg, n * size)?,
            )
            .map_err(failed)?;
        }
    }
    if let Some(at) = d.state_at {
        for (blob, &down) in bottoms[at..].iter().zip(&propagate_down[at..]) {
            if down {
                let mut dg = as_f32(blob).mutable_gpu_diff()?;
                zero(gpu, &mut write(&mut dg, state)?)?;
            }
        }
    }
    Ok(())
}

/// What the forward pass left in `s`: its first `len` values.
fn traced(s: &Scratch<f32>, len: usize) -> CudaView<'_, f32> {
    s.view(len).expect("the forward pass made it")
}

impl GpuTrace {
    /// Whether the last forward pass on the GPU had these steps and items.
    pub(crate) fn traced(&self, steps: usize, items: usize) -> bool {
        self.traced == Some((steps, items))
    }
}
