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
}

impl GpuScratch {
    /// The column buffer and the gemm's result for `g`, grown to fit.
    fn for_geometry(
        &mut self,
        gpu: &Gpu,
        g: &ConvGeometry,
    ) -> Result<(CudaViewMut<'_, f32>, CudaViewMut<'_, f32>)> {
        let cols = g.batch * g.oh * g.ow;
        let grow = |e| cuda("allocate convolution scratch", e);
        Ok((
            self.col.grown(gpu, g.patch() * cols).map_err(grow)?,
            self.tmp.grown(gpu, g.channels_out * cols).map_err(grow)?,
        ))
    }
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

/// One group's blocks: its rows of the weights `(cout, ckk)`, of the
/// column buffer `(ckk, cols)` and of the gemm's output `(cout, cols)`,
/// each as (start, length) for `g` cut into `groups`.
struct GroupBlocks {
    cout: usize,
    ckk: usize,
    cols: usize,
}

impl GroupBlocks {
    fn of(g: &ConvGeometry, groups: usize) -> Self {
        Self {
            cout: g.channels_out / groups,
            ckk: g.patch() / groups,
            cols: g.batch * g.oh * g.ow,
        }
    }

    fn weights(&self, group: usize) -> std::ops::Range<usize> {
        let n = self.cout * self.ckk;
        group * n..(group + 1) * n
    }

    fn col(&self, group: usize) -> std::ops::Range<usize> {
        let n = self.ckk * self.cols;
        group * n..(group + 1) * n
    }

    fn out(&self, group: usize) -> std::ops::Range<usize> {
        let n = self.cout * self.cols;
        group * n..(group + 1) * n
    }
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
    let (cout, p) = (g.channels_out, g.oh * g.ow);
    let b = GroupBlocks::of(g, groups);
    let (mut col, mut tmp) = scratch.for_geometry(gpu, g)?;
    let (xg, wg, bg) = (x.gpu_data()?, weight.gpu_data()?, bias.gpu_data()?);
    let mut yg = y.mutable_gpu_data()?;
    im2col(gpu, g, &read(&xg, x.count())?, &mut col)?;
    let wv = read(&wg, weight.count())?;
    for group in 0..groups {
        gpu.gemm(
            Transpose::No,
            Transpose::No,
            b.cout,
            b.cols,
            b.ckk,
            1.0,
            &wv.slice(b.weights(group)),
            &col.slice(b.col(group)),
            0.0,
            &mut tmp.slice_mut(b.out(group)),
        )
        .map_err(|e| cuda("convolution gemm", e))?;
    }
    let total = y.count();
    // SAFETY: tmp holds cout*batch*P, bias cout, y batch*cout*P = total.
    unsafe {
        scatter_bias_f32(
            gpu,
            launch_config(total),
            total as i64,
            int(OP, cout)?,
            int(OP, g.batch)?,
            int(OP, p)?,
            &tmp.as_view(),
            &read(&bg, cout)?,
            &mut write(&mut yg, total)?,
        )
    }
    .map_err(|e| cuda("convolution bias", e))?;
    Ok(())
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
    let (cout, p) = (g.channels_out, g.oh * g.ow);
    let b = GroupBlocks::of(g, groups);
    let cols = b.cols;
    let (mut col, mut tmp) = scratch.for_geometry(gpu, g)?;
    let (xg, dyg, wg) = (x.gpu_data()?, y.gpu_diff()?, weight.gpu_data()?);
    im2col(gpu, g, &read(&xg, x.count())?, &mut col)?;
    let total = y.count();
    // SAFETY: dy holds batch*cout*P = total, tmp cout*batch*P.
    unsafe {
        gather_f32(
            gpu,
            launch_config(total),
            total as i64,
            int(OP, cout)?,
            int(OP, g.batch)?,
            int(OP, p)?,
            &read(&dyg, total)?,
            &mut tmp,
        )
    }
    .map_err(|e| cuda("convolution gradient layout", e))?;
    {
        let mut dbg = bias.mutable_gpu_diff()?;
        gpu.add_sums(
            &SumLayout::rows_of(cout, cols),
            &tmp.as_view(),
            &mut write(&mut dbg, cout)?,
        )
        .map_err(|e| cuda("convolution bias gradient", e))?;
        let mut dwg = weight.mutable_gpu_diff()?;
        let mut dw = write(&mut dwg, weight.count())?;
        for group in 0..groups {
            gpu.gemm(
                Transpose::No,
                Transpose::Yes,
                b.cout,
                b.ckk,
                cols,
                1.0,
                &tmp.slice(b.out(group)),
                &col.slice(b.col(group)),
                1.0,
                &mut dw.slice_mut(b.weights(group)),
            )
            .map_err(|e| cuda("convolution weight gradient", e))?;
        }
    }
    if propagate_down {
        // dcol = W^T dy into the column buffer, then col2im into dx.
        let wv = read(&wg, weight.count())?;
        for group in 0..groups {
            gpu.gemm(
                Transpose::Yes,
                Transpose::No,
                b.ckk,
                cols,
                b.cout,
                1.0,
                &wv.slice(b.weights(group)),
                &tmp.slice(b.out(group)),
                0.0,
                &mut col.slice_mut(b.col(group)),
            )
            .map_err(|e| cuda("convolution input gradient", e))?;
        }
        let [cin, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, batch] = ints(g)?;
        let n = x.count();
        let mut dxg = x.mutable_gpu_diff()?;
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
                &col.as_view(),
                &mut write(&mut dxg, n)?,
            )
        }
        .map_err(|e| cuda("col2im", e))?;
    }
    Ok(())
}
