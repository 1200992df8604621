//! Caffe's recurrent layers, `RNN` and `LSTM` (`RecurrentLayer`), and
//! the one-step `LSTMUnit` Caffe unrolls LSTM into: a sequence `x` (T, N, ...) and its continuation flags
//! `cont` (T, N: 0 where a sequence starts) in, one output per step (T,
//! N, num_output) out, with an optional static input (N, ...) every step
//! sees. Caffe builds them by unrolling a net of InnerProduct, Eltwise
//! and LSTMUnit layers; here each is one layer with the same blobs, in
//! the same order, computing the same formulas in `f64`:
//!
//! - LSTM: gates `W_xc x_t + b_c [+ W_xc_static x_static] + W_hc (cont_t
//!   h_{t-1})` as (i, f, o, g), `c_t = cont_t f c_{t-1} + i g`, `h_t = o
//!   tanh(c_t)`; blobs `W_xc` (4H, I), `b_c` (4H), [`W_xc_static`
//!   (4H, S)], `W_hc` (4H, H).
//! - RNN: `h_t = tanh(W_xh x_t + b_h [+ W_xh_static x_static] + W_hh
//!   (cont_t h_{t-1}))`, `o_t = tanh(W_ho h_t + b_o)`; blobs `W_xh`,
//!   `b_h`, [`W_xh_static`], `W_hh`, `W_ho`, `b_o`.
//!
//! Backward runs through time (no gradient to `cont`, as in Caffe).
//!
//! On a GPU (`f32` blobs on a CUDA device, feature `cuda`) the same
//! passes run there in `f32` (`cuda.rs`), the cells' arithmetic and
//! TanH's gradient in double; the state a pass ends in is carried on the
//! device, as on the host it is carried on the host.
//!
//! The state a pass starts from (`h_0`, and `c_0` for LSTM, each (1, N,
//! num_output)) is, as in Caffe, the state the previous pass ended in
//! (zeros before the first pass): a sequence may run on across batches
//! where `cont` is 1 at their first step. With `expose_hidden`, the
//! starting state is given as extra bottoms after the static input
//! instead, and the final state (`h_T`, and `c_T` for LSTM) comes out as
//! extra tops. No gradient crosses a pass's start or end (Caffe's "we
//! can't backpropagate across batches"): the starting state's bottoms get
//! a zero gradient, and the final state's tops' gradients are not read.

#[cfg(feature = "cuda")]
mod cuda;

#[cfg(feature = "cuda")]
pub(crate) use cuda::{LSTM_UNIT, RECURRENT};

use blob_kernels::cpu::Transpose::{No, Yes};
use blob_kernels::cpu::gemm;
use blob_proto::ParamMessage;
use blob_runtime::{Blob, MathElement};

use crate::dyn_layer::{Arity, DynLayer, TopShape, bad_param, sub_param};
use crate::layer::Result;

#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Cell {
    Lstm,
    Rnn,
}

/// What the last forward pass kept for backward, per step and item.
#[derive(Default)]
struct Trace {
    /// LSTM: the gates after their squashing (i, f, o, g); RNN: the
    /// hidden pre-activations (unread).
    gates: Vec<f64>,
    /// LSTM: the cells c_t; RNN: unused.
    cells: Vec<f64>,
    /// The hidden states h_t.
    hidden: Vec<f64>,
    /// RNN: the outputs o_t.
    outputs: Vec<f64>,
    /// The state the pass started from: h_0 per item, then (LSTM) c_0.
    start: State,
}

impl Trace {
    /// h_{t-1} of `item`: the starting state's at step 0.
    fn previous_hidden(&self, t: usize, item: usize, n: usize, h: usize) -> &[f64] {
        match t.checked_sub(1) {
            Some(p) => &self.hidden[(p * n + item) * h..(p * n + item + 1) * h],
            None => &self.start.hidden[item * h..(item + 1) * h],
        }
    }

    /// c_{t-1} of `item` (LSTM): the starting state's at step 0.
    fn previous_cells(&self, t: usize, item: usize, n: usize, h: usize) -> &[f64] {
        match t.checked_sub(1) {
            Some(p) => &self.cells[(p * n + item) * h..(p * n + item + 1) * h],
            None => &self.start.cells[item * h..(item + 1) * h],
        }
    }

    /// The state after the last of `steps` steps (`size` values a part):
    /// the starting state where there were none.
    fn end(&self, steps: usize, size: usize) -> State {
        let Some(last) = steps.checked_sub(1) else {
            return self.start.clone();
        };
        let cells = if self.start.cells.is_empty() {
            Vec::new()
        } else {
            self.cells[last * size..(last + 1) * size].to_vec()
        };
        State {
            hidden: self.hidden[last * size..(last + 1) * size].to_vec(),
            cells,
        }
    }
}

/// A recurrent state: the hidden values of every item, and for LSTM its
/// cells, each (N, num_output) row-major.
#[derive(Clone, Default)]
struct State {
    hidden: Vec<f64>,
    cells: Vec<f64>,
}

/// Caffe `RNN` or `LSTM`: see the [module](self) documentation.
pub(crate) struct RecurrentLayer<T: MathElement> {
    cell: Cell,
    hidden: usize,
    weight_filler: ParamMessage,
    bias_filler: ParamMessage,
    blobs: Vec<Blob<T>>,
    trace: Trace,
    /// Caffe's `expose_hidden`: the state in and out through blobs.
    expose_hidden: bool,
    /// Where the state is not exposed, the state the last pass ended in.
    carried: State,
    /// The first exposed state bottom, as the last reshape found it.
    state_at: Option<usize>,
    /// The GPU side's trace and carried state, where the passes run on
    /// a GPU.
    #[cfg(feature = "cuda")]
    gpu_trace: cuda::GpuTrace,
}

/// The sizes of one pass.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Dims {
    steps: usize,
    items: usize,
    input: usize,
    /// The static input's size, where there is one.
    fixed: Option<usize>,
    /// The bottom of the first state blob, where the state is exposed.
    state_at: Option<usize>,
}

fn sigmoid(v: f64) -> f64 {
    1.0 / (1.0 + (-v).exp())
}

/// `sums[c] += sum_r m[r, c]` for a row-major `m` of `sums.len()` columns.
fn add_column_sums(m: &[f64], sums: &mut [f64]) {
    for row in m.chunks(sums.len().max(1)) {
        for (s, v) in sums.iter_mut().zip(row) {
            *s += v;
        }
    }
}

impl<T: MathElement> RecurrentLayer<T> {
    pub(crate) fn lstm(layer: &ParamMessage) -> Result<Self> {
        Self::new(layer, Cell::Lstm)
    }

    pub(crate) fn rnn(layer: &ParamMessage) -> Result<Self> {
        Self::new(layer, Cell::Rnn)
    }

    fn new(layer: &ParamMessage, cell: Cell) -> Result<Self> {
        let p = sub_param(layer, "recurrent_param");
        let hidden = p.uint("num_output") as usize;
        let op = if cell == Cell::Lstm {
            "set up LSTM"
        } else {
            "set up RNN"
        };
        if hidden == 0 {
            return Err(bad_param(
                op,
                "recurrent_param.num_output must be set and positive",
            ));
        }
        Ok(Self {
            cell,
            hidden,
            weight_filler: sub_param(&p, "weight_filler"),
            bias_filler: sub_param(&p, "bias_filler"),
            blobs: Vec::new(),
            trace: Trace::default(),
            expose_hidden: p.boolean("expose_hidden"),
            carried: State::default(),
            state_at: None,
            #[cfg(feature = "cuda")]
            gpu_trace: cuda::GpuTrace::default(),
        })
    }

    fn name(&self) -> &'static str {
        match self.cell {
            Cell::Lstm => "LSTM",
            Cell::Rnn => "RNN",
        }
    }

    /// Blobs a state is made of: h (and c for LSTM), Caffe's
    /// `RecurrentInputBlobNames`.
    fn state_blobs(&self) -> usize {
        match self.cell {
            Cell::Lstm => 2,
            Cell::Rnn => 1,
        }
    }

    /// The extra bottoms and tops `expose_hidden` adds.
    fn exposed(&self) -> usize {
        if self.expose_hidden {
            self.state_blobs()
        } else {
            0
        }
    }

    /// The state this pass starts from: the exposed bottoms', or the last
    /// pass's end (zeros at first, and when the number of items changed).
    fn start_state(&self, d: Dims, bottoms: &[&Blob<T>]) -> Result<State> {
        let size = d.items * self.hidden;
        let Some(at) = d.state_at else {
            if self.carried.hidden.len() == size {
                return Ok(self.carried.clone());
            }
            return Ok(State {
                hidden: vec![0.0; size],
                cells: vec![0.0; if self.cell == Cell::Lstm { size } else { 0 }],
            });
        };
        Ok(State {
            hidden: wide(bottoms[at])?,
            cells: match self.cell {
                Cell::Lstm => wide(bottoms[at + 1])?,
                Cell::Rnn => Vec::new(),
            },
        })
    }

    /// Rows of the input transforms: 4H gates for LSTM, H for RNN.
    fn rows(&self) -> usize {
        match self.cell {
            Cell::Lstm => 4 * self.hidden,
            Cell::Rnn => self.hidden,
        }
    }

    fn dims(&self, bottoms: &[&Blob<T>]) -> Result<Dims> {
        let name = self.name();
        let (x, cont) = (bottoms[0].shape(), bottoms[1].shape());
        if x.len() < 2 || cont != &x[..2] {
            return Err(bad_param(
                name,
                format!(
                    "the input is {} and cont {}; they must be (T, N, ...) and (T, N)",
                    bottoms[0].shape_string(),
                    bottoms[1].shape_string()
                ),
            ));
        }
        // As Caffe counts: a static input is there when the bottoms are
        // more than x, cont and the exposed state.
        let has_fixed = bottoms.len() > 2 + self.exposed();
        let fixed = match bottoms.get(2).filter(|_| has_fixed) {
            Some(s) if s.shape().first() == Some(&x[1]) => Some(s.shape()[1..].iter().product()),
            Some(s) => {
                return Err(bad_param(
                    name,
                    format!(
                        "the static input {} must be (N, ...) with N = {}",
                        s.shape_string(),
                        x[1]
                    ),
                ));
            }
            None => None,
        };
        let state_at = self.expose_hidden.then(|| 2 + usize::from(has_fixed));
        if let Some(at) = state_at {
            let want = [1, x[1], self.hidden];
            for (i, blob) in bottoms[at..].iter().enumerate() {
                if blob.shape() != want {
                    return Err(bad_param(
                        name,
                        format!(
                            "bottom {} (the starting {}) is {}; expose_hidden needs (1, N, \
                             num_output) = {:?}",
                            at + i,
                            if i == 0 {
                                "hidden state h_0"
                            } else {
                                "cell state c_0"
                            },
                            blob.shape_string(),
                            want
                        ),
                    ));
                }
            }
        }
        Ok(Dims {
            steps: x[0],
            items: x[1],
            input: x[2..].iter().product(),
            fixed,
            state_at,
        })
    }

    /// The blobs' shapes, in Caffe's order.
    fn blob_shapes(&self, d: Dims) -> Vec<Vec<usize>> {
        let (rows, h) = (self.rows(), self.hidden);
        let mut shapes = vec![vec![rows, d.input], vec![rows]];
        if let Some(s) = d.fixed {
            shapes.push(vec![rows, s]);
        }
        shapes.push(vec![rows, h]);
        if self.cell == Cell::Rnn {
            shapes.push(vec![h, h]);
            shapes.push(vec![h]);
        }
        shapes
    }

    /// The blobs are the ones `d`'s input needs (a pass given other
    /// shapes than the layer was made for is refused, not run).
    fn check_blobs(&self, d: Dims) -> Result<()> {
        let shapes = self.blob_shapes(d);
        if self.blobs.len() != shapes.len() {
            return Err(bad_param(
                self.name(),
                format!(
                    "the layer has {} blobs; {} blobs with{} a static input",
                    self.blobs.len(),
                    shapes.len(),
                    if d.fixed.is_some() { "" } else { "out" }
                ),
            ));
        }
        match self
            .blobs
            .iter()
            .zip(&shapes)
            .enumerate()
            .find(|(_, (b, want))| b.shape() != want.as_slice())
        {
            Some((i, (b, want))) => Err(bad_param(
                self.name(),
                format!(
                    "blob {i} is {}; this input needs {:?}",
                    b.shape_string(),
                    want
                ),
            )),
            None => Ok(()),
        }
    }

    /// The GPU a pass runs on: the input's, where every other blob of
    /// the layer (bottoms, tops, weights) is there too.
    #[cfg(feature = "cuda")]
    fn gpu(
        &self,
        bottoms: &[&Blob<T>],
        tops: &[&Blob<T>],
    ) -> Result<Option<std::sync::Arc<blob_kernels::cuda::Gpu>>> {
        let mut others: Vec<(&str, &Blob<T>)> = Vec::new();
        others.extend(bottoms[1..].iter().map(|b| ("other inputs", *b)));
        others.extend(tops.iter().map(|t| ("outputs", *t)));
        others.extend(self.blobs.iter().map(|b| ("weights", b)));
        crate::gpu::gpu_for(self.name(), bottoms[0], &others)
    }

    /// This pass's shapes for the GPU side.
    #[cfg(feature = "cuda")]
    fn pass(&self, dims: Dims) -> cuda::Pass {
        cuda::Pass {
            cell: self.cell,
            hidden: self.hidden,
            rows: self.rows(),
            dims,
        }
    }

    fn values(&self) -> Result<Vec<Vec<f64>>> {
        self.blobs
            .iter()
            .map(|b| Ok(b.cpu_data()?.iter().map(|v| v.to_f64()).collect()))
            .collect()
    }
}

/// A blob's values as `f64`.
fn wide<T: MathElement>(b: &Blob<T>) -> Result<Vec<f64>> {
    Ok(b.cpu_data()?.iter().map(|v| v.to_f64()).collect())
}

impl<T: MathElement> DynLayer<T> for RecurrentLayer<T> {
    fn type_name(&self) -> &str {
        self.name()
    }

    /// x and cont, the static input, then the exposed state.
    fn bottoms(&self) -> Arity {
        Arity::range(2 + self.exposed(), 3 + self.exposed())
    }

    /// The outputs, then the exposed final state.
    fn tops(&self) -> Arity {
        Arity::exactly(1 + self.exposed())
    }

    fn reshape(&mut self, bottoms: &[&Blob<T>], _tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        let d = self.dims(bottoms)?;
        self.state_at = d.state_at;
        let shapes = self.blob_shapes(d);
        if self.blobs.is_empty() {
            for shape in &shapes {
                let blob = Blob::new(shape)?;
                let is_bias = shape.len() == 1;
                let filler = if is_bias {
                    &self.bias_filler
                } else {
                    &self.weight_filler
                };
                crate::filler::fill(&blob, filler)?;
                self.blobs.push(blob);
            }
        }
        self.check_blobs(d)?;
        let state = vec![1, d.items, self.hidden];
        let mut tops = vec![TopShape::new(vec![d.steps, d.items, self.hidden])];
        tops.extend((0..self.exposed()).map(|_| TopShape::new(state.clone())));
        Ok(tops)
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        let d = self.dims(bottoms)?;
        self.check_blobs(d)?;
        #[cfg(feature = "cuda")]
        if let Some(gpu) = self.gpu(bottoms, tops)? {
            let pass = self.pass(d);
            return cuda::forward(
                &gpu,
                &pass,
                (bottoms, tops),
                &self.blobs,
                &mut self.gpu_trace,
            );
        }
        let (h, rows, n) = (self.hidden, self.rows(), d.items);
        let positions = d.steps * n;
        let x = wide(bottoms[0])?;
        let cont = wide(bottoms[1])?;
        let fixed = d.fixed.map(|_| wide(bottoms[2])).transpose()?;
        let start = self.start_state(d, bottoms)?;
        let w = self.values()?;
        let (w_x, bias) = (&w[0], &w[1]);
        let w_h = &w[2 + usize::from(d.fixed.is_some())];
        // The input's part of every step's gates at once, and the static
        // input's part once: only the recurrent part waits for the step
        // before.
        let mut gates = vec![0.0; positions * rows];
        gemm(
            No, Yes, positions, rows, d.input, 1.0, &x, w_x, 0.0, &mut gates,
        );
        let fixed_part = match (fixed, d.fixed) {
            (Some(s), Some(size)) => {
                let mut part = vec![0.0; n * rows];
                gemm(No, Yes, n, rows, size, 1.0, &s, &w[2], 0.0, &mut part);
                Some(part)
            }
            _ => None,
        };
        let trace = &mut self.trace;
        trace.cells = vec![0.0; positions * h];
        trace.hidden = vec![0.0; positions * h];
        trace.start = start;
        let mut prev = vec![0.0; n * h];
        for t in 0..d.steps {
            for item in 0..n {
                let keep = cont[t * n + item];
                for (p, &v) in prev[item * h..(item + 1) * h]
                    .iter_mut()
                    .zip(trace.previous_hidden(t, item, n, h))
                {
                    *p = v * keep;
                }
            }
            let step = &mut gates[t * n * rows..(t + 1) * n * rows];
            for (item, pre) in step.chunks_mut(rows).enumerate() {
                for (v, b) in pre.iter_mut().zip(bias) {
                    *v += b;
                }
                if let Some(part) = &fixed_part {
                    for (v, f) in pre.iter_mut().zip(&part[item * rows..(item + 1) * rows]) {
                        *v += f;
                    }
                }
            }
            gemm(No, Yes, n, rows, h, 1.0, &prev, w_h, 1.0, step);
            for (item, pre) in step.chunks_mut(rows).enumerate() {
                let at = t * n + item;
                match self.cell {
                    Cell::Lstm => {
                        for (j, v) in pre.iter_mut().enumerate() {
                            *v = if j < 3 * h { sigmoid(*v) } else { v.tanh() };
                        }
                        let keep = cont[at];
                        for k in 0..h {
                            let (i, f, o, g) = (pre[k], pre[h + k], pre[2 * h + k], pre[3 * h + k]);
                            let prev_c = trace.previous_cells(t, item, n, h)[k];
                            let c = keep * f * prev_c + i * g;
                            trace.cells[at * h + k] = c;
                            trace.hidden[at * h + k] = o * c.tanh();
                        }
                    }
                    Cell::Rnn => {
                        for (hid, v) in trace.hidden[at * h..(at + 1) * h].iter_mut().zip(pre) {
                            *hid = v.tanh();
                        }
                    }
                }
            }
        }
        trace.gates = gates;
        if self.cell == Cell::Rnn {
            // o_t = tanh(W_ho h_t + b_o), every step at once.
            let (w_o, b_o) = (&w[w.len() - 2], &w[w.len() - 1]);
            let mut out = vec![0.0; positions * h];
            gemm(
                No,
                Yes,
                positions,
                h,
                h,
                1.0,
                &trace.hidden,
                w_o,
                0.0,
                &mut out,
            );
            for row in out.chunks_mut(h.max(1)) {
                for (v, b) in row.iter_mut().zip(b_o) {
                    *v = (*v + b).tanh();
                }
            }
            trace.outputs = out;
        }
        let result = match self.cell {
            Cell::Lstm => &trace.hidden,
            Cell::Rnn => &trace.outputs,
        };
        for (y, &v) in tops[0].mutable_cpu_data()?.iter_mut().zip(result) {
            *y = T::from_f64(v);
        }
        let end = trace.end(d.steps, n * h);
        if self.expose_hidden {
            let parts = [&end.hidden, &end.cells];
            for (top, values) in tops[1..].iter().zip(parts) {
                for (y, &v) in top.mutable_cpu_data()?.iter_mut().zip(values) {
                    *y = T::from_f64(v);
                }
            }
        } else {
            self.carried = end;
        }
        Ok(())
    }

    fn backward(
        &mut self,
        tops: &[&Blob<T>],
        propagate_down: &[bool],
        bottoms: &[&Blob<T>],
    ) -> Result<()> {
        let d = self.dims(bottoms)?;
        self.check_blobs(d)?;
        #[cfg(feature = "cuda")]
        if let Some(gpu) = self.gpu(bottoms, tops)? {
            if !self.gpu_trace.traced(d.steps, d.items) {
                return Err(bad_param(
                    self.name(),
                    format!(
                        "backward needs the GPU forward pass of this input ({}) first",
                        bottoms[0].shape_string()
                    ),
                ));
            }
            let pass = self.pass(d);
            let passes = (tops, propagate_down, bottoms);
            return cuda::backward(&gpu, &pass, passes, &self.blobs, &mut self.gpu_trace);
        }
        let (h, rows, n) = (self.hidden, self.rows(), d.items);
        let positions = d.steps * n;
        let x = wide(bottoms[0])?;
        let cont = wide(bottoms[1])?;
        let fixed = d.fixed.map(|_| wide(bottoms[2])).transpose()?;
        let forwarded = self.trace.hidden.len() == positions * h
            && self.trace.gates.len() == positions * rows
            && self.trace.start.hidden.len() == n * h;
        if !forwarded {
            return Err(bad_param(
                self.name(),
                format!(
                    "backward needs the forward pass of this input ({}) first",
                    bottoms[0].shape_string()
                ),
            ));
        }
        let dy: Vec<f64> = tops[0].cpu_diff()?.iter().map(|v| v.to_f64()).collect();
        let w = self.values()?;
        let mut dw: Vec<Vec<f64>> = w.iter().map(|b| vec![0.0; b.len()]).collect();
        let h_at = 2 + usize::from(d.fixed.is_some());
        let trace = &self.trace;
        // What reaches each step's hidden state from above: the output's
        // gradient (LSTM), or through o_t = tanh(W_ho h_t + b_o) (RNN).
        let from_above = match self.cell {
            Cell::Lstm => dy,
            Cell::Rnn => {
                let (who, bo) = (w.len() - 2, w.len() - 1);
                let d_out: Vec<f64> = dy
                    .iter()
                    .zip(&trace.outputs)
                    .map(|(g, o)| g * (1.0 - o * o))
                    .collect();
                gemm(
                    Yes,
                    No,
                    h,
                    h,
                    positions,
                    1.0,
                    &d_out,
                    &trace.hidden,
                    1.0,
                    &mut dw[who],
                );
                add_column_sums(&d_out, &mut dw[bo]);
                let mut dh = vec![0.0; positions * h];
                gemm(No, No, positions, h, h, 1.0, &d_out, &w[who], 0.0, &mut dh);
                dh
            }
        };
        // Each step's gradient to its gates' inputs, from the last step
        // back; with the (cont-masked) previous state each step read.
        let mut dgates = vec![0.0; positions * rows];
        let mut prevs = vec![0.0; positions * h];
        let mut dh_next = vec![0.0; n * h];
        let mut dc_next = vec![0.0; n * h];
        for t in (0..d.steps).rev() {
            for item in 0..n {
                let at = t * n + item;
                let keep = cont[at];
                for (p, &v) in prevs[at * h..(at + 1) * h]
                    .iter_mut()
                    .zip(trace.previous_hidden(t, item, n, h))
                {
                    *p = v * keep;
                }
                let dpre = &mut dgates[at * rows..(at + 1) * rows];
                let next = &dh_next[item * h..(item + 1) * h];
                let above = &from_above[at * h..(at + 1) * h];
                match self.cell {
                    Cell::Lstm => {
                        let gates = &trace.gates[at * rows..(at + 1) * rows];
                        for k in 0..h {
                            let dh = next[k] + above[k];
                            let (i, f, o, g) =
                                (gates[k], gates[h + k], gates[2 * h + k], gates[3 * h + k]);
                            let tc = trace.cells[at * h + k].tanh();
                            let dc = dh * o * (1.0 - tc * tc) + dc_next[item * h + k];
                            let prev_c = trace.previous_cells(t, item, n, h)[k];
                            dpre[k] = dc * g * i * (1.0 - i);
                            dpre[h + k] = dc * keep * prev_c * f * (1.0 - f);
                            dpre[2 * h + k] = dh * tc * o * (1.0 - o);
                            dpre[3 * h + k] = dc * i * (1.0 - g * g);
                            dc_next[item * h + k] = dc * keep * f;
                        }
                    }
                    Cell::Rnn => {
                        let hid = &trace.hidden[at * h..(at + 1) * h];
                        for k in 0..h {
                            dpre[k] = (next[k] + above[k]) * (1.0 - hid[k] * hid[k]);
                        }
                    }
                }
            }
            // The gradient to the previous step's state; the starting
            // state's (step 0's) passes on to nothing.
            if t > 0 {
                let step = &dgates[t * n * rows..(t + 1) * n * rows];
                gemm(No, No, n, h, rows, 1.0, step, &w[h_at], 0.0, &mut dh_next);
                for (item, back) in dh_next.chunks_mut(h.max(1)).enumerate() {
                    let keep = cont[t * n + item];
                    back.iter_mut().for_each(|v| *v *= keep);
                }
            }
        }
        // The products every step shares, over all steps at once.
        gemm(
            Yes, No, rows, d.input, positions, 1.0, &dgates, &x, 1.0, &mut dw[0],
        );
        add_column_sums(&dgates, &mut dw[1]);
        gemm(
            Yes,
            No,
            rows,
            h,
            positions,
            1.0,
            &dgates,
            &prevs,
            1.0,
            &mut dw[h_at],
        );
        let mut dx = vec![0.0; x.len()];
        gemm(
            No, No, positions, d.input, rows, 1.0, &dgates, &w[0], 0.0, &mut dx,
        );
        let mut d_fixed = Vec::new();
        if let (Some(s), Some(size)) = (&fixed, d.fixed) {
            // Every step adds the same static product: its gradient is the
            // steps' gates' gradients summed.
            let mut summed = vec![0.0; n * rows];
            for step in dgates.chunks(n * rows) {
                for (a, g) in summed.iter_mut().zip(step) {
                    *a += g;
                }
            }
            gemm(Yes, No, rows, size, n, 1.0, &summed, s, 1.0, &mut dw[2]);
            d_fixed = vec![0.0; n * size];
            gemm(
                No,
                No,
                n,
                size,
                rows,
                1.0,
                &summed,
                &w[2],
                0.0,
                &mut d_fixed,
            );
        }
        for (blob, grad) in self.blobs.iter().zip(&dw) {
            for (d, &g) in blob.mutable_cpu_diff()?.iter_mut().zip(grad) {
                *d += T::from_f64(g);
            }
        }
        if propagate_down[0] {
            for (d, v) in bottoms[0].mutable_cpu_diff()?.iter_mut().zip(dx) {
                *d = T::from_f64(v);
            }
        }
        if d.fixed.is_some() && propagate_down.get(2) == Some(&true) {
            for (d, v) in bottoms[2].mutable_cpu_diff()?.iter_mut().zip(d_fixed) {
                *d = T::from_f64(v);
            }
        }
        if let Some(at) = d.state_at {
            for (blob, &down) in bottoms[at..].iter().zip(&propagate_down[at..]) {
                if down {
                    blob.mutable_cpu_diff()?.fill(T::from_f64(0.0));
                }
            }
        }
        Ok(())
    }

    fn blobs(&self) -> &[Blob<T>] {
        &self.blobs
    }

    fn blobs_mut(&mut self) -> &mut [Blob<T>] {
        &mut self.blobs
    }

    /// The continuation flags take no gradient, as in Caffe, and nor does
    /// an exposed starting state.
    fn allow_force_backward(&self, bottom: usize) -> bool {
        bottom != 1 && self.state_at.is_none_or(|at| bottom < at)
    }

    fn allows_in_place(&self) -> bool {
        false
    }
}

/// Caffe `LSTMUnit`: one LSTM step, what Caffe's unrolled LSTM is made
/// of. Bottoms `c_prev` (1, N, H), the gates' inputs `x` (1, N, 4H) as
/// (i, f, o, g), `cont` (1, N); tops `c` and `h` (1, N, H).
pub(crate) struct LstmUnitLayer;

impl LstmUnitLayer {
    /// `(items, hidden)`, the shapes checked.
    fn dims<T: MathElement>(bottoms: &[&Blob<T>]) -> Result<(usize, usize)> {
        let (c, x, cont) = (bottoms[0].shape(), bottoms[1].shape(), bottoms[2].shape());
        let fits = c.len() == 3
            && c[0] == 1
            && x.len() == 3
            && x[..2] == c[..2]
            && x[2] == 4 * c[2]
            && cont == &c[..2];
        if !fits {
            return Err(bad_param(
                "LSTMUnit",
                format!(
                    "the bottoms are {}, {} and {}; LSTMUnit needs c_prev (1, N, H), gate inputs \
                     (1, N, 4H) and cont (1, N)",
                    bottoms[0].shape_string(),
                    bottoms[1].shape_string(),
                    bottoms[2].shape_string()
                ),
            ));
        }
        Ok((c[1], c[2]))
    }

    /// The GPU the step runs on: `c_prev`'s, where every other blob is
    /// there too.
    #[cfg(feature = "cuda")]
    fn gpu<T: MathElement>(
        bottoms: &[&Blob<T>],
        tops: &[&Blob<T>],
    ) -> Result<Option<std::sync::Arc<blob_kernels::cuda::Gpu>>> {
        crate::gpu::gpu_for(
            "LSTMUnit",
            bottoms[0],
            &[
                ("gate inputs", bottoms[1]),
                ("cont", bottoms[2]),
                ("c", tops[0]),
                ("h", tops[1]),
            ],
        )
    }

    /// The squashed gates (i, f, o, g) of item `n`.
    fn gates(x: &[f64], n: usize, h: usize) -> Vec<f64> {
        x[n * 4 * h..(n + 1) * 4 * h]
            .iter()
            .enumerate()
            .map(|(j, &v)| if j < 3 * h { sigmoid(v) } else { v.tanh() })
            .collect()
    }
}

impl<T: MathElement> DynLayer<T> for LstmUnitLayer {
    fn type_name(&self) -> &str {
        "LSTMUnit"
    }

    fn bottoms(&self) -> Arity {
        Arity::exactly(3)
    }

    fn tops(&self) -> Arity {
        Arity::exactly(2)
    }

    fn reshape(&mut self, bottoms: &[&Blob<T>], _tops: &[&Blob<T>]) -> Result<Vec<TopShape>> {
        Self::dims(bottoms)?;
        let shape = bottoms[0].shape().to_vec();
        Ok(vec![TopShape::new(shape.clone()), TopShape::new(shape)])
    }

    fn forward(&mut self, bottoms: &[&Blob<T>], tops: &[&Blob<T>]) -> Result<()> {
        let (n, h) = Self::dims(bottoms)?;
        #[cfg(feature = "cuda")]
        if let Some(gpu) = Self::gpu(bottoms, tops)? {
            use crate::gpu::{as_f32, read, write};
            let (c_prev, x, cont) = (
                as_f32(bottoms[0]).gpu_data()?,
                as_f32(bottoms[1]).gpu_data()?,
                as_f32(bottoms[2]).gpu_data()?,
            );
            let (mut c, mut hid) = (
                as_f32(tops[0]).mutable_gpu_data()?,
                as_f32(tops[1]).mutable_gpu_data()?,
            );
            let (c_prev, x, cont) = (read(&c_prev, n * h)?, read(&x, 4 * n * h)?, read(&cont, n)?);
            let inputs = cuda::StepInputs {
                c_prev: &c_prev,
                x: &x,
                cont: &cont,
            };
            let (mut c, mut hid) = (write(&mut c, n * h)?, write(&mut hid, n * h)?);
            return cuda::unit_forward(&gpu, (n, h), inputs, &mut c, &mut hid);
        }
        let (c_prev, x, cont) = (wide(bottoms[0])?, wide(bottoms[1])?, wide(bottoms[2])?);
        let mut c = tops[0].mutable_cpu_data()?;
        let mut hid = tops[1].mutable_cpu_data()?;
        for item in 0..n {
            let g = Self::gates(&x, item, h);
            for k in 0..h {
                let cell = cont[item] * g[h + k] * c_prev[item * h + k] + g[k] * g[3 * h + k];
                c[item * h + k] = T::from_f64(cell);
                hid[item * h + k] = T::from_f64(g[2 * h + k] * cell.tanh());
            }
        }
        Ok(())
    }

    fn backward(
        &mut self,
        tops: &[&Blob<T>],
        propagate_down: &[bool],
        bottoms: &[&Blob<T>],
    ) -> Result<()> {
        let (n, h) = Self::dims(bottoms)?;
        #[cfg(feature = "cuda")]
        if let Some(gpu) = Self::gpu(bottoms, tops)? {
            if !propagate_down[0] && !propagate_down[1] {
                return Ok(());
            }
            use crate::gpu::{as_f32, read, write};
            let (c_prev, x, cont, dc_top, dh_top) = (
                as_f32(bottoms[0]).gpu_data()?,
                as_f32(bottoms[1]).gpu_data()?,
                as_f32(bottoms[2]).gpu_data()?,
                as_f32(tops[0]).gpu_diff()?,
                as_f32(tops[1]).gpu_diff()?,
            );
            // Both gradients are written, as Caffe's LSTMUnit writes them.
            let (mut dc_prev, mut dx) = (
                as_f32(bottoms[0]).mutable_gpu_diff()?,
                as_f32(bottoms[1]).mutable_gpu_diff()?,
            );
            let (c_prev, x, cont) = (read(&c_prev, n * h)?, read(&x, 4 * n * h)?, read(&cont, n)?);
            let inputs = cuda::StepInputs {
                c_prev: &c_prev,
                x: &x,
                cont: &cont,
            };
            let tops_diff = (&read(&dc_top, n * h)?, &read(&dh_top, n * h)?);
            let (mut dc_prev, mut dx) = (write(&mut dc_prev, n * h)?, write(&mut dx, 4 * n * h)?);
            return cuda::unit_backward(&gpu, (n, h), inputs, tops_diff, &mut dc_prev, &mut dx);
        }
        let (c_prev, x, cont) = (wide(bottoms[0])?, wide(bottoms[1])?, wide(bottoms[2])?);
        let dc_top: Vec<f64> = tops[0].cpu_diff()?.iter().map(|v| v.to_f64()).collect();
        let dh_top: Vec<f64> = tops[1].cpu_diff()?.iter().map(|v| v.to_f64()).collect();
        let mut d_prev = vec![0.0; n * h];
        let mut dx = vec![0.0; n * 4 * h];
        for (item, &keep) in cont.iter().enumerate().take(n) {
            let g = Self::gates(&x, item, h);
            for k in 0..h {
                let at = item * h + k;
                let (i, f, o, gg) = (g[k], g[h + k], g[2 * h + k], g[3 * h + k]);
                let cell = keep * f * c_prev[at] + i * gg;
                let tc = cell.tanh();
                let dc = dc_top[at] + dh_top[at] * o * (1.0 - tc * tc);
                let base = item * 4 * h;
                dx[base + k] = dc * gg * i * (1.0 - i);
                dx[base + h + k] = dc * keep * c_prev[at] * f * (1.0 - f);
                dx[base + 2 * h + k] = dh_top[at] * tc * o * (1.0 - o);
                dx[base + 3 * h + k] = dc * i * (1.0 - gg * gg);
                d_prev[at] = dc * keep * f;
            }
        }
        if propagate_down[0] {
            for (d, v) in bottoms[0].mutable_cpu_diff()?.iter_mut().zip(d_prev) {
                *d = T::from_f64(v);
            }
        }
        if propagate_down[1] {
            for (d, v) in bottoms[1].mutable_cpu_diff()?.iter_mut().zip(dx) {
                *d = T::from_f64(v);
            }
        }
        Ok(())
    }

    fn allow_force_backward(&self, bottom: usize) -> bool {
        bottom != 2
    }

    fn allows_in_place(&self) -> bool {
        false
    }
}
