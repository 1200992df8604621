//! The CUDA side of Convolution: im2col + one cuBLAS gemm per group for
//! the whole batch (a group's rows of the column buffer, the weights and
//! the output are each one block), then the bias; backward as the CPU
//! side, with col2im gathering per input pixel.

use blob_kernels::cpu::Transpose;
use blob_kernels::cuda::cudarc::driver::{CudaView, CudaViewMut};
use blob_kernels::cuda::{Gpu, Scratch, launch_config};
use blob_kernels::sums::SumLayout;
use blob_runtime::Blob;

use super::ConvGeometry;
use crate::gpu::{GpuResult, cuda, int, read, write};
use crate::layer::Result;

blob_kernels::cuda_kernels! {
    /// `conv.cu`: Convolution's kernels, `f32`.
    pub(crate) static CONV = "conv.cu";
    /// im2col of a batch, with kernel, stride, padding and dilation per
    /// axis.
    pub(crate) fn im2col_f32(
        total: i64, cin: i32, h: i32, w: i32, kh: i32, kw: i32, sh: i32, sw: i32, ph: i32, pw: i32,
        dh: i32, dw: i32, oh: i32, ow: i32, batch: i32,
        x: &CudaView<'_, f32>, col: &mut CudaViewMut<'_, f32>
    );
    /// col2im of a batch, overwriting the input gradient.
    pub(crate) fn col2im_f32(
        total: i64, cin: i32, h: i32, w: i32, kh: i32, kw: i32, sh: i32, sw: i32, ph: i32, pw: i32,
        dh: i32, dw: i32, oh: i32, ow: i32, batch: i32,
        col: &CudaView<'_, f32>, dx: &mut CudaViewMut<'_, f32>
    );
    /// `(cout, batch*P)` to `(batch, cout, P)`, adding the bias.
    pub(crate) fn scatter_bias_f32(
        total: i64, cout: i32, batch: i32, p: i32,
        tmp: &CudaView<'_, f32>, bias: &CudaView<'_, f32>, y: &mut CudaViewMut<'_, f32>
    );
    /// `(batch, cout, P)` to `(cout, batch*P)`.
    pub(crate) fn gather_f32(
        total: i64, cout: i32, batch: i32, p: i32,
        dy: &CudaView<'_, f32>, tmp: &mut CudaViewMut<'_, f32>
    );
    /// `y[image, co, p] += bias[co]`.
    pub(crate) fn add_channel_bias_f32(total: i64, cout: i32, p: i32, bias: &CudaView<'_, f32>, y: &mut CudaViewMut<'_, f32>);
}

/// Device scratch of a convolution: the column buffer and the gemm's
/// result, grown as the batch grows.
#[derive(Default)]
pub(crate) struct GpuScratch {
    col: Scratch<f32>,
    tmp: Scratch<f32>,
    /// A bias of zeros, for a Deconvolution's input gradient.
    zeros: Scratch<f32>,
}

impl GpuScratch {
    /// The column buffer and the gemm's result for `g`, grown to fit.
    fn for_geometry(&mut self, gpu: &Gpu, g: &ConvGeometry) -> Result<Buffers<'_>> {
        let cols = g.batch * g.oh * g.ow;
        let grow = |e| cuda("allocate convolution scratch", e);
        Ok(Buffers {
            col: self.col.grown(gpu, g.patch() * cols).map_err(grow)?,
            tmp: self.tmp.grown(gpu, g.channels_out * cols).map_err(grow)?,
            zeros: self.zeros.grown(gpu, g.channels_out).map_err(grow)?,
        })
    }
}

/// A pass's views of the scratch: the column buffer `(ckk, batch P)`,
/// the gemm's result `(cout, batch P)`, and `cout` values for zeros.
struct Buffers<'a> {
    col: CudaViewMut<'a, f32>,
    tmp: CudaViewMut<'a, f32>,
    zeros: CudaViewMut<'a, f32>,
}

const OP: &str = "convolve on the GPU";

/// The kernels' sizes: `cin, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh,
/// ow, batch`.
fn ints(g: &ConvGeometry) -> GpuResult<[i32; 14]> {
    let i = |v: usize| int(OP, v);
    Ok([
        i(g.channels_in)?,
        i(g.h)?,
        i(g.w)?,
        i(g.kernel[0])?,
        i(g.kernel[1])?,
        i(g.stride[0])?,
        i(g.stride[1])?,
        i(g.pad[0])?,
        i(g.pad[1])?,
        i(g.dilation[0])?,
        i(g.dilation[1])?,
        i(g.oh)?,
        i(g.ow)?,
        i(g.batch)?,
    ])
}

fn im2col(
    gpu: &Gpu,
    g: &ConvGeometry,
    x: &CudaView<'_, f32>,
    col: &mut CudaViewMut<'_, f32>,
) -> GpuResult<()> {
    let [cin, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, batch] = ints(g)?;
    let total = g.patch() * g.batch * g.oh * g.ow;
    // SAFETY: x holds batch*cin*h*w values and col total, checked by the
    // views' lengths below the caller.
    unsafe {
        im2col_f32(
            gpu,
            launch_config(total),
            total as i64,
            cin,
            h,
            w,
            kh,
            kw,
            sh,
            sw,
            ph,
            pw,
            dh,
            dw,
            oh,
            ow,
            batch,
            x,
            col,
        )
    }
    .map_err(|e| cuda("im2col", e))
}

/// The blobs of one pass: input, weights, bias, output.
pub(crate) struct ConvBlobs<'a> {
    pub x: &'a Blob<f32>,
    pub weight: &'a Blob<f32>,
    pub bias: &'a Blob<f32>,
    pub y: &'a Blob<f32>,
}

impl<'a> ConvBlobs<'a> {
    /// The blobs of a layer on `T`, as the `f32` that `gpu_for` found.
    pub(crate) fn of<T: blob_runtime::MathElement>(
        x: &'a Blob<T>,
        weight: &'a Blob<T>,
        bias: &'a Blob<T>,
        y: &'a Blob<T>,
    ) -> Self {
        use crate::gpu::as_f32;
        Self {
            x: as_f32(x),
            weight: as_f32(weight),
            bias: as_f32(bias),
            y: as_f32(y),
        }
    }
}

/// A convolution cut into `groups`: each group's rows of the weights
/// `(cout, ckk)`, of the column buffer `(ckk, cols)` and of the gemm's
/// output `(cout, cols)` are one block of each, so a pass is one gemm
/// per group on its blocks.
struct GroupBlocks {
    groups: usize,
    cout: usize,
    ckk: usize,
    cols: usize,
}

/// Which of a group's blocks an operand is.
#[derive(Clone, Copy)]
enum Block {
    Weights,
    Col,
    Out,
}

impl GroupBlocks {
    fn of(g: &ConvGeometry, groups: usize) -> Self {
        Self {
            groups,
            cout: g.channels_out / groups,
            ckk: g.patch() / groups,
            cols: g.batch * g.oh * g.ow,
        }
    }

    fn range(&self, block: Block, group: usize) -> std::ops::Range<usize> {
        let n = match block {
            Block::Weights => self.cout * self.ckk,
            Block::Col => self.ckk * self.cols,
            Block::Out => self.cout * self.cols,
        };
        group * n..(group + 1) * n
    }

    /// `c = op(a) op(b) + beta c` on each group's blocks, `op(a)` being
    /// `m x k` and `op(b)` `k x n`.
    #[allow(clippy::too_many_arguments)]
    fn gemm(
        &self,
        gpu: &Gpu,
        (trans_a, trans_b): (Transpose, Transpose),
        (m, n, k): (usize, usize, usize),
        (a, a_block): (&CudaView<'_, f32>, Block),
        (b, b_block): (&CudaView<'_, f32>, Block),
        (beta, c, c_block): (f32, &mut CudaViewMut<'_, f32>, Block),
        what: &'static str,
    ) -> Result<()> {
        for group in 0..self.groups {
            gpu.gemm(
                trans_a,
                trans_b,
                m,
                n,
                k,
                1.0,
                &a.slice(self.range(a_block, group)),
                &b.slice(self.range(b_block, group)),
                beta,
                &mut c.slice_mut(self.range(c_block, group)),
            )
            .map_err(|e| cuda(what, e))?;
        }
        Ok(())
    }

    /// `tmp = W col`: the convolution's output as `(cout, batch P)`.
    fn weights_times_columns(
        &self,
        gpu: &Gpu,
        w: &CudaView<'_, f32>,
        col: &CudaView<'_, f32>,
        tmp: &mut CudaViewMut<'_, f32>,
    ) -> Result<()> {
        let shape = (self.cout, self.cols, self.ckk);
        let (w, col) = ((w, Block::Weights), (col, Block::Col));
        let out = (0.0, tmp, Block::Out);
        let no = (Transpose::No, Transpose::No);
        self.gemm(gpu, no, shape, w, col, out, "convolution gemm")
    }

    /// `dW += tmp col^T`: the weights' gradient from the output's (`tmp`,
    /// `(cout, batch P)`) and the input's columns.
    fn weight_gradient(
        &self,
        gpu: &Gpu,
        tmp: &CudaView<'_, f32>,
        col: &CudaView<'_, f32>,
        dw: &mut CudaViewMut<'_, f32>,
    ) -> Result<()> {
        let shape = (self.cout, self.ckk, self.cols);
        let (tmp, col) = ((tmp, Block::Out), (col, Block::Col));
        let out = (1.0, dw, Block::Weights);
        let t = (Transpose::No, Transpose::Yes);
        self.gemm(gpu, t, shape, tmp, col, out, "convolution weight gradient")
    }

    /// `col = W^T tmp`: the columns' gradient from the output's.
    fn column_gradient(
        &self,
        gpu: &Gpu,
        w: &CudaView<'_, f32>,
        tmp: &CudaView<'_, f32>,
        col: &mut CudaViewMut<'_, f32>,
    ) -> Result<()> {
        let shape = (self.ckk, self.cols, self.cout);
        let (w, tmp) = ((w, Block::Weights), (tmp, Block::Out));
        let out = (0.0, col, Block::Col);
        let t = (Transpose::Yes, Transpose::No);
        self.gemm(gpu, t, shape, w, tmp, out, "convolution input gradient")
    }
}

/// `(batch, cout, P)` to `tmp`'s `(cout, batch P)`.
fn gather(
    gpu: &Gpu,
    g: &ConvGeometry,
    from: &CudaView<'_, f32>,
    tmp: &mut CudaViewMut<'_, f32>,
) -> Result<()> {
    let (cout, p) = (g.channels_out, g.oh * g.ow);
    let total = g.batch * cout * p;
    // SAFETY: from holds batch*cout*P = total values, tmp as many.
    unsafe {
        gather_f32(
            gpu,
            launch_config(total),
            total as i64,
            int(OP, cout)?,
            int(OP, g.batch)?,
            int(OP, p)?,
            from,
            tmp,
        )
    }
    .map_err(|e| cuda("convolution gradient layout", e))
}

/// `tmp`'s `(cout, batch P)` to `(batch, cout, P)`, plus `bias`.
fn scatter(
    gpu: &Gpu,
    g: &ConvGeometry,
    tmp: &CudaView<'_, f32>,
    bias: &CudaView<'_, f32>,
    to: &mut CudaViewMut<'_, f32>,
) -> Result<()> {
    let (cout, p) = (g.channels_out, g.oh * g.ow);
    let total = g.batch * cout * p;
    // SAFETY: tmp and to hold total values, bias cout.
    unsafe {
        scatter_bias_f32(
            gpu,
            launch_config(total),
            total as i64,
            int(OP, cout)?,
            int(OP, g.batch)?,
            int(OP, p)?,
            tmp,
            bias,
            to,
        )
    }
    .map_err(|e| cuda("convolution bias", e))
}

/// col2im of `col` into `dx` (overwritten).
fn col2im(
    gpu: &Gpu,
    g: &ConvGeometry,
    col: &CudaView<'_, f32>,
    dx: &mut CudaViewMut<'_, f32>,
) -> Result<()> {
    let [cin, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, batch] = ints(g)?;
    let n = g.batch * g.channels_in * g.h * g.w;
    // SAFETY: col holds ckk*cols, dx batch*cin*h*w = n.
    unsafe {
        col2im_f32(
            gpu,
            launch_config(n),
            n as i64,
            cin,
            h,
            w,
            kh,
            kw,
            sh,
            sw,
            ph,
            pw,
            dh,
            dw,
            oh,
            ow,
            batch,
            col,
            dx,
        )
    }
    .map_err(|e| cuda("col2im", e))
}

/// `y = conv(x) + bias` on the GPU, the channels cut into `groups`.
pub(crate) fn forward(
    g: &ConvGeometry,
    groups: usize,
    scratch: &mut GpuScratch,
    gpu: &Gpu,
    blobs: ConvBlobs<'_>,
) -> Result<()> {
    let ConvBlobs { x, weight, bias, y } = blobs;
    let b = GroupBlocks::of(g, groups);
    let Buffers {
        mut col, mut tmp, ..
    } = scratch.for_geometry(gpu, g)?;
    let (xg, wg, bg) = (x.gpu_data()?, weight.gpu_data()?, bias.gpu_data()?);
    let mut yg = y.mutable_gpu_data()?;
    im2col(gpu, g, &read(&xg, x.count())?, &mut col)?;
    let wv = read(&wg, weight.count())?;
    b.weights_times_columns(gpu, &wv, &col.as_view(), &mut tmp)?;
    scatter(
        gpu,
        g,
        &tmp.as_view(),
        &read(&bg, g.channels_out)?,
        &mut write(&mut yg, y.count())?,
    )
}

/// Weight and bias gradients, and the input's when asked, on the GPU,
/// the channels cut into `groups`.
pub(crate) fn backward(
    g: &ConvGeometry,
    groups: usize,
    scratch: &mut GpuScratch,
    gpu: &Gpu,
    blobs: ConvBlobs<'_>,
    propagate_down: bool,
) -> Result<()> {
    let ConvBlobs { x, weight, bias, y } = blobs;
    let b = GroupBlocks::of(g, groups);
    let Buffers {
        mut col, mut tmp, ..
    } = scratch.for_geometry(gpu, g)?;
    let (xg, dyg, wg) = (x.gpu_data()?, y.gpu_diff()?, weight.gpu_data()?);
    im2col(gpu, g, &read(&xg, x.count())?, &mut col)?;
    gather(gpu, g, &read(&dyg, y.count())?, &mut tmp)?;
    {
        let mut dbg = bias.mutable_gpu_diff()?;
        gpu.add_sums(
            &SumLayout::rows_of(g.channels_out, b.cols),
            &tmp.as_view(),
            &mut write(&mut dbg, g.channels_out)?,
        )
        .map_err(|e| cuda("convolution bias gradient", e))?;
        let mut dwg = weight.mutable_gpu_diff()?;
        let mut dw = write(&mut dwg, weight.count())?;
        b.weight_gradient(gpu, &tmp.as_view(), &col.as_view(), &mut dw)?;
    }
    if propagate_down {
        let wv = read(&wg, weight.count())?;
        b.column_gradient(gpu, &wv, &tmp.as_view(), &mut col)?;
        let mut dxg = x.mutable_gpu_diff()?;
        col2im(gpu, g, &col.as_view(), &mut write(&mut dxg, x.count())?)?;
    }
    Ok(())
}

/// A Deconvolution's blobs: input, weights, bias (if any), output.
pub(crate) type DeconvBlobs<'a> = (
    &'a Blob<f32>,
    &'a Blob<f32>,
    Option<&'a Blob<f32>>,
    &'a Blob<f32>,
);

/// Caffe's Deconvolution forward on the GPU: the convolution `g` (whose
/// input is the deconvolution's output `y`, whose output is its input
/// `x`) run backward to its input, then the bias per output channel.
pub(crate) fn deconv_forward(
    g: &ConvGeometry,
    groups: usize,
    scratch: &mut GpuScratch,
    gpu: &Gpu,
    (x, weight, bias, y): DeconvBlobs<'_>,
) -> Result<()> {
    let b = GroupBlocks::of(g, groups);
    let Buffers {
        mut col, mut tmp, ..
    } = scratch.for_geometry(gpu, g)?;
    let (xg, wg) = (x.gpu_data()?, weight.gpu_data()?);
    gather(gpu, g, &read(&xg, x.count())?, &mut tmp)?;
    b.column_gradient(gpu, &read(&wg, weight.count())?, &tmp.as_view(), &mut col)?;
    let n = y.count();
    let mut yg = y.mutable_gpu_data()?;
    let mut yv = write(&mut yg, n)?;
    col2im(gpu, g, &col.as_view(), &mut yv)?;
    let Some(bias) = bias else {
        return Ok(());
    };
    let bg = bias.gpu_data()?;
    // SAFETY: y holds n = batch * channels_in * h * w values, the bias
    // channels_in.
    unsafe {
        add_channel_bias_f32(
            gpu,
            launch_config(n),
            n as i64,
            int(OP, g.channels_in)?,
            int(OP, g.h * g.w)?,
            &read(&bg, g.channels_in)?,
            &mut yv,
        )
    }
    .map_err(|e| cuda("deconvolution bias", e))
}

/// Caffe's Deconvolution backward on the GPU: the weight gradient (the
/// convolution's, `y`'s diff its input and `x` its output's gradient),
/// the bias gradient, and `x`'s diff (the convolution of `y`'s diff)
/// when `propagate_down`.
pub(crate) fn deconv_backward(
    g: &ConvGeometry,
    groups: usize,
    scratch: &mut GpuScratch,
    gpu: &Gpu,
    (x, weight, bias, y): DeconvBlobs<'_>,
    propagate_down: bool,
) -> Result<()> {
    let b = GroupBlocks::of(g, groups);
    let Buffers {
        mut col,
        mut tmp,
        mut zeros,
    } = scratch.for_geometry(gpu, g)?;
    let (xg, dyg, wg) = (x.gpu_data()?, y.gpu_diff()?, weight.gpu_data()?);
    let dy = read(&dyg, y.count())?;
    im2col(gpu, g, &dy, &mut col)?;
    gather(gpu, g, &read(&xg, x.count())?, &mut tmp)?;
    {
        let mut dwg = weight.mutable_gpu_diff()?;
        let mut dw = write(&mut dwg, weight.count())?;
        b.weight_gradient(gpu, &tmp.as_view(), &col.as_view(), &mut dw)?;
    }
    if let Some(bias) = bias {
        let mut dbg = bias.mutable_gpu_diff()?;
        gpu.add_sums(
            &SumLayout::channels_of(g.batch, g.channels_in, g.h * g.w),
            &dy,
            &mut write(&mut dbg, g.channels_in)?,
        )
        .map_err(|e| cuda("deconvolution bias gradient", e))?;
    }
    if propagate_down {
        b.weights_times_columns(gpu, &read(&wg, weight.count())?, &col.as_view(), &mut tmp)?;
        gpu.set(0.0, &mut zeros)
            .map_err(|e| cuda("deconvolution input gradient", e))?;
        let mut dxg = x.mutable_gpu_diff()?;
        scatter(
            gpu,
            g,
            &tmp.as_view(),
            &zeros.as_view(),
            &mut write(&mut dxg, x.count())?,
        )?;
    }
    Ok(())
}
