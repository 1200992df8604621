//! The CUDA side of Convolution: im2col + one cuBLAS gemm per group for
//! the whole batch (a group's rows of the column buffer, the weights and
//! the output are each one block), then the bias; backward as the CPU
//! side, with col2im gathering per input pixel. A volume (three or more
//! spatial axes) runs the same passes as a plane of one row, its im2col
//! and col2im reading tables of taps built on the host. A depthwise
//! convolution (a group per channel) takes kernels of its own instead:
//! one launch a pass, not one gemm per channel.

use blob_kernels::cpu::Transpose;
use blob_kernels::cuda::cudarc::driver::{CudaSlice, CudaView, CudaViewMut};
use blob_kernels::cuda::{Gpu, Scratch, launch_config};
use blob_kernels::sums::SumLayout;
use blob_runtime::Blob;

use super::ConvGeometry;
use super::volume::VolumeGeometry;
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
    /// A volume's im2col of a batch, by its taps.
    pub(crate) fn im2col_taps_f32(
        total: i64, cin: i32, plane: i64, kernel_points: i32, points: i64, batch: i32,
        taps: &CudaView<'_, u32>, x: &CudaView<'_, f32>, col: &mut CudaViewMut<'_, f32>
    );
    /// A volume's col2im of a batch, each input point gathering its
    /// entries, overwriting the input gradient.
    pub(crate) fn col2im_taps_f32(
        total: i64, cin: i32, plane: i64, kernel_points: i32, points: i64, batch: i32,
        starts: &CudaView<'_, u32>, entries: &CudaView<'_, u32>, col: &CudaView<'_, f32>,
        dx: &mut CudaViewMut<'_, f32>
    );
    /// A depthwise convolution's output, each pixel summing its taps,
    /// plus the bias.
    pub(crate) fn depthwise_forward_f32(
        total: i64, channels: i32, h: i32, w: i32, kh: i32, kw: i32, sh: i32, sw: i32, ph: i32,
        pw: i32, dh: i32, dw: i32, oh: i32, ow: i32, batch: i32,
        x: &CudaView<'_, f32>, weight: &CudaView<'_, f32>, bias: &CudaView<'_, f32>,
        y: &mut CudaViewMut<'_, f32>
    );
    /// A depthwise convolution's input gradient, overwritten.
    pub(crate) fn depthwise_input_grad_f32(
        total: i64, channels: i32, h: i32, w: i32, kh: i32, kw: i32, sh: i32, sw: i32, ph: i32,
        pw: i32, dh: i32, dw: i32, oh: i32, ow: i32, batch: i32,
        dy: &CudaView<'_, f32>, weight: &CudaView<'_, f32>, dx: &mut CudaViewMut<'_, f32>
    );
    /// A depthwise convolution's weight gradient, added on.
    pub(crate) fn depthwise_weight_grad_f32(
        total: i64, channels: i32, h: i32, w: i32, kh: i32, kw: i32, sh: i32, sw: i32, ph: i32,
        pw: i32, dh: i32, dw: i32, oh: i32, ow: i32, batch: i32,
        x: &CudaView<'_, f32>, dy: &CudaView<'_, f32>, dweight: &mut CudaViewMut<'_, f32>
    );
}

/// Device scratch of a convolution: the column buffer and the gemm's
/// result, grown as the batch grows.
#[derive(Default)]
pub(crate) struct GpuScratch {
    col: Scratch<f32>,
    tmp: Scratch<f32>,
    /// A bias of zeros, for a Deconvolution's input gradient.
    zeros: Scratch<f32>,
    /// The last volume's tables of taps.
    tables: Option<TapTables>,
}

impl GpuScratch {
    /// The column buffer and the gemm's result for `g`, grown to fit,
    /// and the tables of `volume` when `g` is one flattened.
    fn for_geometry(
        &mut self,
        gpu: &Gpu,
        g: &ConvGeometry,
        volume: Option<&VolumeGeometry>,
    ) -> Result<Buffers<'_>> {
        let cols = g.batch * g.oh * g.ow;
        let grow = |e| cuda("allocate convolution scratch", e);
        if let Some(v) = volume
            && self.tables.as_ref().is_none_or(|t| t.geometry != *v)
        {
            self.tables = Some(TapTables::new(gpu, v)?);
        }
        Ok(Buffers {
            col: self.col.grown(gpu, g.patch() * cols).map_err(grow)?,
            tmp: self.tmp.grown(gpu, g.channels_out * cols).map_err(grow)?,
            zeros: self.zeros.grown(gpu, g.channels_out).map_err(grow)?,
            tables: volume.and(self.tables.as_ref()),
        })
    }
}

/// A pass's views of the scratch: the column buffer `(ckk, batch P)`,
/// the gemm's result `(cout, batch P)`, `cout` values for zeros, and a
/// volume's tables.
struct Buffers<'a> {
    col: CudaViewMut<'a, f32>,
    tmp: CudaViewMut<'a, f32>,
    zeros: CudaViewMut<'a, f32>,
    tables: Option<&'a TapTables>,
}

/// A volume's im2col as tables on the device, built on the host once per
/// geometry: for kernel offset `k` and output point `p`, the input point
/// at `k P + p` (`u32::MAX` for padding); and the inverse, each input
/// point's `k P + p`s in increasing order (`entries[starts[q]..starts[q
/// + 1]]`), which col2im gathers in the order the CPU adds them.
pub(crate) struct TapTables {
    geometry: VolumeGeometry,
    taps: CudaSlice<u32>,
    starts: CudaSlice<u32>,
    entries: CudaSlice<u32>,
}

impl TapTables {
    fn new(gpu: &Gpu, g: &VolumeGeometry) -> Result<Self> {
        const WHAT: &str = "a volume's im2col tables";
        let mut taps = blob_kernels::cpu::AlignedVec::new();
        g.taps(&mut taps)?;
        let plane = g.input_points();
        let narrow = |v: usize| u32::try_from(v).map_err(|_| crate::gpu::too_big(WHAT, v));
        // u32::MAX marks padding: no real tap or entry may reach it.
        narrow(taps.len().max(plane).saturating_add(1))?;
        let mut starts = vec![0u32; plane + 1];
        for &tap in taps.iter().filter(|&&t| t != usize::MAX) {
            starts[tap + 1] += 1;
        }
        for q in 0..plane {
            starts[q + 1] += starts[q];
        }
        let mut next: Vec<u32> = starts[..plane].to_vec();
        let mut entries = vec![0u32; starts[plane] as usize];
        for (kp, &tap) in taps.iter().enumerate() {
            if tap != usize::MAX {
                entries[next[tap] as usize] = kp as u32;
                next[tap] += 1;
            }
        }
        let taps: Vec<u32> = taps
            .iter()
            .map(|&t| if t == usize::MAX { u32::MAX } else { t as u32 })
            .collect();
        let upload = |v: &[u32]| {
            // An empty table still needs a buffer to view.
            let v = if v.is_empty() { &[0u32][..] } else { v };
            gpu.stream()
                .clone_htod(v)
                .map_err(|e| cuda(WHAT, blob_kernels::cuda::CudaError::driver("copy")(e)))
        };
        Ok(Self {
            geometry: g.clone(),
            taps: upload(&taps)?,
            starts: upload(&starts)?,
            entries: upload(&entries)?,
        })
    }
}

/// A volume as a plane of one row, for the planar passes: its points in
/// a row, its kernel's offsets a row of `K` (the tables say where each
/// reads).
pub(crate) fn flattened(v: &VolumeGeometry) -> ConvGeometry {
    ConvGeometry {
        batch: v.batch,
        channels_in: v.channels_in,
        channels_out: v.channels_out,
        h: 1,
        w: v.input_points(),
        oh: 1,
        ow: v.output_points(),
        kernel: [1, v.kernel_points()],
        stride: [1, 1],
        pad: [0, 0],
        dilation: [1, 1],
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
    tables: Option<&TapTables>,
    x: &CudaView<'_, f32>,
    col: &mut CudaViewMut<'_, f32>,
) -> GpuResult<()> {
    if let Some(t) = tables {
        let total = g.patch() * g.batch * g.ow;
        // SAFETY: x holds batch*cin*w values (the volume's points), col
        // total, the taps K*P (K = kw, P = ow) below `w` or the mark.
        return unsafe {
            im2col_taps_f32(
                gpu,
                launch_config(total),
                total as i64,
                int(OP, g.channels_in)?,
                g.w as i64,
                int(OP, g.kernel[1])?,
                g.ow as i64,
                int(OP, g.batch)?,
                &t.taps.as_view(),
                x,
                col,
            )
        }
        .map_err(|e| cuda("im2col", e));
    }
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
    tables: Option<&TapTables>,
    col: &CudaView<'_, f32>,
    dx: &mut CudaViewMut<'_, f32>,
) -> Result<()> {
    if let Some(t) = tables {
        let n = g.batch * g.channels_in * g.w;
        // SAFETY: col holds ckk*cols, dx n; starts holds w + 1 values
        // and the entries it bounds are below K*P.
        return unsafe {
            col2im_taps_f32(
                gpu,
                launch_config(n),
                n as i64,
                int(OP, g.channels_in)?,
                g.w as i64,
                int(OP, g.kernel[1])?,
                g.ow as i64,
                int(OP, g.batch)?,
                &t.starts.as_view(),
                &t.entries.as_view(),
                col,
                dx,
            )
        }
        .map_err(|e| cuda("col2im", e));
    }
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

/// Caffe's Im2col layer on the GPU: each image's columns, `(cin kh kw,
/// oh ow)`, into its own part of `to` (`backward: false`, `from` the
/// input), or each image's input gradient from its columns (`backward`,
/// `from` the columns' gradient): the convolution's im2col and col2im a
/// batch of one at a time.
pub(crate) fn im2col_images(
    gpu: &Gpu,
    g: &ConvGeometry,
    backward: bool,
    from: &CudaView<'_, f32>,
    to: &mut CudaViewMut<'_, f32>,
) -> Result<()> {
    let one = ConvGeometry { batch: 1, ..*g };
    let image = g.channels_in * g.h * g.w;
    let columns = g.patch() * g.oh * g.ow;
    let (from_len, to_len) = if backward {
        (columns, image)
    } else {
        (image, columns)
    };
    for i in 0..g.batch {
        let from = from.slice(i * from_len..(i + 1) * from_len);
        let mut to = to.slice_mut(i * to_len..(i + 1) * to_len);
        if backward {
            col2im(gpu, &one, None, &from, &mut to)?;
        } else {
            im2col(gpu, &one, None, &from, &mut to)?;
        }
    }
    Ok(())
}

/// `y = conv(x) + bias` on the GPU, the channels cut into `groups`;
/// `g` is `volume` flattened where there is one.
pub(crate) fn forward(
    (g, volume): (&ConvGeometry, Option<&VolumeGeometry>),
    groups: usize,
    scratch: &mut GpuScratch,
    gpu: &Gpu,
    blobs: ConvBlobs<'_>,
) -> Result<()> {
    let ConvBlobs { x, weight, bias, y } = blobs;
    let b = GroupBlocks::of(g, groups);
    let Buffers {
        mut col,
        mut tmp,
        tables,
        ..
    } = scratch.for_geometry(gpu, g, volume)?;
    let (xg, wg, bg) = (x.gpu_data()?, weight.gpu_data()?, bias.gpu_data()?);
    let mut yg = y.mutable_gpu_data()?;
    im2col(gpu, g, tables, &read(&xg, x.count())?, &mut col)?;
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
    (g, volume): (&ConvGeometry, Option<&VolumeGeometry>),
    groups: usize,
    scratch: &mut GpuScratch,
    gpu: &Gpu,
    blobs: ConvBlobs<'_>,
    propagate_down: bool,
) -> Result<()> {
    let ConvBlobs { x, weight, bias, y } = blobs;
    let b = GroupBlocks::of(g, groups);
    let Buffers {
        mut col,
        mut tmp,
        tables,
        ..
    } = scratch.for_geometry(gpu, g, volume)?;
    let (xg, dyg, wg) = (x.gpu_data()?, y.gpu_diff()?, weight.gpu_data()?);
    im2col(gpu, g, tables, &read(&xg, x.count())?, &mut col)?;
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
        col2im(
            gpu,
            g,
            tables,
            &col.as_view(),
            &mut write(&mut dxg, x.count())?,
        )?;
    }
    Ok(())
}

/// Launches depthwise kernel `$kernel` over `$n` threads: `$g`'s sizes
/// (channels, h, w, kernel, stride, pad, dilation, oh, ow, batch, as every
/// depthwise kernel takes them), then the buffers.
macro_rules! launch_depthwise {
    ($kernel:ident, $gpu:expr, $n:expr, $g:expr, $($buffer:expr),+) => {{
        let [c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, batch] = ints($g)?;
        $kernel(
            $gpu, launch_config($n), $n as i64, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow,
            batch, $($buffer),+
        )
    }};
}

/// A depthwise convolution's output on the GPU (`g.is_depthwise`): one
/// kernel, each output pixel summing its own taps.
pub(crate) fn depthwise_forward(g: &ConvGeometry, gpu: &Gpu, blobs: ConvBlobs<'_>) -> Result<()> {
    let ConvBlobs { x, weight, bias, y } = blobs;
    let (xg, wg, bg) = (x.gpu_data()?, weight.gpu_data()?, bias.gpu_data()?);
    let (xv, wv) = (read(&xg, x.count())?, read(&wg, weight.count())?);
    let bv = read(&bg, g.channels_out)?;
    let n = y.count();
    let mut yg = y.mutable_gpu_data()?;
    let mut yv = write(&mut yg, n)?;
    // SAFETY: y holds batch*channels*oh*ow = n values, x batch*channels*h*w,
    // the weights channels*kh*kw, the bias channels.
    unsafe { launch_depthwise!(depthwise_forward_f32, gpu, n, g, &xv, &wv, &bv, &mut yv) }
        .map_err(|e| cuda("depthwise convolution", e))
}

/// A depthwise convolution's weight and bias gradients (added on), and
/// its input's (overwritten) when `propagate_down`, on the GPU.
pub(crate) fn depthwise_backward(
    g: &ConvGeometry,
    gpu: &Gpu,
    blobs: ConvBlobs<'_>,
    propagate_down: bool,
) -> Result<()> {
    let ConvBlobs { x, weight, bias, y } = blobs;
    let (xg, dyg, wg) = (x.gpu_data()?, y.gpu_diff()?, weight.gpu_data()?);
    let (xv, dy) = (read(&xg, x.count())?, read(&dyg, y.count())?);
    {
        let mut dbg = bias.mutable_gpu_diff()?;
        gpu.add_sums(
            &SumLayout::channels_of(g.batch, g.channels_out, g.oh * g.ow),
            &dy,
            &mut write(&mut dbg, g.channels_out)?,
        )
        .map_err(|e| cuda("depthwise convolution bias gradient", e))?;
        let n = weight.count();
        let mut dwg = weight.mutable_gpu_diff()?;
        let mut dw = write(&mut dwg, n)?;
        // SAFETY: the weights hold channels*kh*kw = n values, x
        // batch*channels*h*w, dy batch*channels*oh*ow.
        unsafe { launch_depthwise!(depthwise_weight_grad_f32, gpu, n, g, &xv, &dy, &mut dw) }
            .map_err(|e| cuda("depthwise convolution weight gradient", e))?;
    }
    if !propagate_down {
        return Ok(());
    }
    let wv = read(&wg, weight.count())?;
    let n = x.count();
    let mut dxg = x.mutable_gpu_diff()?;
    let mut dx = write(&mut dxg, n)?;
    // SAFETY: x holds batch*channels*h*w = n values, dy and the weights
    // as above.
    unsafe { launch_depthwise!(depthwise_input_grad_f32, gpu, n, g, &dy, &wv, &mut dx) }
        .map_err(|e| cuda("depthwise convolution input gradient", e))
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
    (g, volume): (&ConvGeometry, Option<&VolumeGeometry>),
    groups: usize,
    scratch: &mut GpuScratch,
    gpu: &Gpu,
    (x, weight, bias, y): DeconvBlobs<'_>,
) -> Result<()> {
    let b = GroupBlocks::of(g, groups);
    let Buffers {
        mut col,
        mut tmp,
        tables,
        ..
    } = scratch.for_geometry(gpu, g, volume)?;
    let (xg, wg) = (x.gpu_data()?, weight.gpu_data()?);
    gather(gpu, g, &read(&xg, x.count())?, &mut tmp)?;
    b.column_gradient(gpu, &read(&wg, weight.count())?, &tmp.as_view(), &mut col)?;
    let n = y.count();
    let mut yg = y.mutable_gpu_data()?;
    let mut yv = write(&mut yg, n)?;
    col2im(gpu, g, tables, &col.as_view(), &mut yv)?;
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
    (g, volume): (&ConvGeometry, Option<&VolumeGeometry>),
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
        tables,
    } = scratch.for_geometry(gpu, g, volume)?;
    let (xg, dyg, wg) = (x.gpu_data()?, y.gpu_diff()?, weight.gpu_data()?);
    let dy = read(&dyg, y.count())?;
    im2col(gpu, g, tables, &dy, &mut col)?;
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
