//! Convolution through cuDNN (feature `cudnn`), as Caffe's
//! CuDNNConvolutionLayer: used when the library loads, the im2col + cuBLAS
//! side otherwise. cuDNN picks its algorithms by heuristics, once per
//! geometry, among the deterministic ones: a GPU run repeats bit for bit,
//! so `--resume` continues exactly (Caffe takes whatever the heuristics
//! give, atomics included). The math is f32 throughout unless the layer
//! allows TF32 tensor cores (`Convolution::allow_tf32`). The bias is this
//! crate's kernel.

use std::sync::Arc;

use blob_kernels::cuda::cudarc::cudnn::sys::{
    cudnnConvolutionBwdDataAlgo_t, cudnnConvolutionBwdFilterAlgo_t, cudnnConvolutionFwdAlgo_t,
    cudnnConvolutionMode_t, cudnnMathType_t, cudnnTensorFormat_t,
};
use blob_kernels::cuda::cudarc::cudnn::{
    ConvBackwardData, ConvBackwardFilter, ConvDescriptor, ConvForward, Cudnn, CudnnError,
    FilterDescriptor, TensorDescriptor,
};
use blob_kernels::cuda::cudarc::driver::CudaContext;
use blob_kernels::cuda::{CudaError, Gpu, Scratch, cudnn, launch_config};
use blob_kernels::sums::SumLayout;
use blob_runtime::{BlobError, DeviceError};

use super::ConvGeometry;
use super::cuda::{ConvBlobs, add_channel_bias_f32};
use crate::gpu::{cuda, int, read, write};
use crate::layer::Result;

const OP: &str = "convolve with cuDNN";

/// A call into cuDNN that failed names the way around a cuDNN that loads
/// but does not work: the layer's other path.
const CUDNN_FAILED: &str =
    "convolve with cuDNN (a layer with use_cudnn = false takes im2col + cuBLAS)";

fn err(e: CudnnError) -> BlobError {
    BlobError::Device {
        op: CUDNN_FAILED,
        source: DeviceError::with_source("cuDNN", e),
    }
}

/// A cuDNN handle on the GPU's stream, the plan of the last geometry, and
/// a workspace that grows as algorithms ask.
pub(crate) struct CudnnConv {
    handle: Arc<Cudnn>,
    /// Made current on the calling thread before each use of the handle
    /// and before it is destroyed: the layer may have moved threads.
    context: Arc<CudaContext>,
    plan: Option<Plan>,
    workspace: Scratch<u8>,
}

// SAFETY: cuDNN lets any host thread use a handle as long as no two use it
// at the same time. `CudnnConv` is reached only through `&mut` of its
// layer (it is not `Sync`, so never shared), the handle's `Arc` is not
// cloned out of it (the plan's descriptors hold the only clones, and drop
// with it), and its CUDA context is bound to the thread before every use
// and before the handle is destroyed. Without this, turning on the `cudnn` feature would
// take `Send` away from `Convolution` and every net holding one.
unsafe impl Send for CudnnConv {}

impl Drop for CudnnConv {
    fn drop(&mut self) {
        // Runs before the fields drop: the handle is destroyed with its
        // context current. A failure leaves nothing better to do.
        let _ = self.context.bind_to_thread();
    }
}

/// The descriptors of one geometry.
struct Descriptors {
    x: TensorDescriptor<f32>,
    w: FilterDescriptor<f32>,
    conv: ConvDescriptor<f32>,
    y: TensorDescriptor<f32>,
}

/// A geometry's descriptors and the algorithms cuDNN picked for it, with
/// their workspace sizes, each asked for on first use and kept until the
/// geometry changes (Caffe sets them in `Reshape`): four descriptors and
/// three heuristic queries a training step cost host time that a small
/// batch cannot hide.
struct Plan {
    geometry: ConvGeometry,
    tf32: bool,
    d: Descriptors,
    forward: Option<(cudnnConvolutionFwdAlgo_t, usize)>,
    backward_filter: Option<(cudnnConvolutionBwdFilterAlgo_t, usize)>,
    backward_data: Option<(cudnnConvolutionBwdDataAlgo_t, usize)>,
}

/// The cached pick, or else the heuristic's algorithm with its workspace
/// size, remembered. Where the heuristic fails, or cuDNN refuses its pick
/// for these descriptors (heuristics list algorithms of every math type,
/// and a plan may ask for FMA math only: the workspace query then says
/// NOT_SUPPORTED), `fallback`: deterministic, and taking every 2-D
/// geometry (the implicit gemm forward, ALGO_1 backward).
fn picked<A: Copy>(
    slot: &mut Option<(A, usize)>,
    heuristic: impl FnOnce() -> std::result::Result<A, CudnnError>,
    fallback: A,
    workspace: impl Fn(A) -> std::result::Result<usize, CudnnError>,
) -> Result<(A, usize)> {
    if slot.is_none() {
        let pick = heuristic()
            .ok()
            .and_then(|algo| workspace(algo).ok().map(|bytes| (algo, bytes)));
        *slot = Some(match pick {
            Some(pick) => pick,
            None => (fallback, workspace(fallback).map_err(err)?),
        });
    }
    Ok(slot.expect("picked above"))
}

/// `algo`, unless it adds with atomics in an order that changes from run
/// to run (cuDNN's ALGO_0 and ALGO_3): then ALGO_1, an implicit gemm that
/// is deterministic and takes every 2-D geometry.
fn deterministic_filter_algorithm(
    algo: cudnnConvolutionBwdFilterAlgo_t,
) -> cudnnConvolutionBwdFilterAlgo_t {
    use cudnnConvolutionBwdFilterAlgo_t as A;
    match algo {
        A::CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 | A::CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3 => {
            A::CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1
        }
        other => other,
    }
}

/// `algo`, unless it is cuDNN's non-deterministic ALGO_0: then ALGO_1.
fn deterministic_data_algorithm(
    algo: cudnnConvolutionBwdDataAlgo_t,
) -> cudnnConvolutionBwdDataAlgo_t {
    use cudnnConvolutionBwdDataAlgo_t as A;
    match algo {
        A::CUDNN_CONVOLUTION_BWD_DATA_ALGO_0 => A::CUDNN_CONVOLUTION_BWD_DATA_ALGO_1,
        other => other,
    }
}

/// The plan of `g` (with TF32 allowed or not) in `slot`, made anew when
/// either changed.
fn plan_for<'a>(
    handle: &Arc<Cudnn>,
    slot: &'a mut Option<Plan>,
    g: &ConvGeometry,
    tf32: bool,
) -> Result<&'a mut Plan> {
    if slot
        .as_ref()
        .is_none_or(|p| p.geometry != *g || p.tf32 != tf32)
    {
        *slot = Some(Plan {
            geometry: *g,
            tf32,
            d: descriptors(handle, g, tf32)?,
            forward: None,
            backward_filter: None,
            backward_data: None,
        });
    }
    Ok(slot.as_mut().expect("made above"))
}

fn descriptors(handle: &Arc<Cudnn>, g: &ConvGeometry, tf32: bool) -> Result<Descriptors> {
    let i = |v: usize| int(OP, v);
    let nchw = cudnnTensorFormat_t::CUDNN_TENSOR_NCHW;
    let (n, cin, cout) = (i(g.batch)?, i(g.channels_in)?, i(g.channels_out)?);
    let (h, w, oh, ow) = (i(g.h)?, i(g.w)?, i(g.oh)?, i(g.ow)?);
    let pair = |v: [usize; 2]| -> Result<[i32; 2]> { Ok([i(v[0])?, i(v[1])?]) };
    let (kernel, pad, stride, dilation) = (
        pair(g.kernel)?,
        pair(g.pad)?,
        pair(g.stride)?,
        pair(g.dilation)?,
    );
    Ok(Descriptors {
        x: handle.create_4d_tensor(nchw, [n, cin, h, w]).map_err(err)?,
        w: handle
            .create_4d_filter(nchw, [cout, cin, kernel[0], kernel[1]])
            .map_err(err)?,
        conv: {
            let mut conv = handle
                .create_conv2d(
                    pad,
                    stride,
                    dilation,
                    // Caffe's convolution does not flip the kernel.
                    cudnnConvolutionMode_t::CUDNN_CROSS_CORRELATION,
                )
                .map_err(err)?;
            // cuDNN's default math lets Ampere and later GPUs convolve f32
            // through TF32 tensor cores (a 10-bit mantissa, about 1e-3 off
            // f32); FMA math keeps the layer f32, as the CPU side, unless
            // the layer allows TF32.
            conv.set_math_type(if tf32 {
                cudnnMathType_t::CUDNN_DEFAULT_MATH
            } else {
                cudnnMathType_t::CUDNN_FMA_MATH
            })
            .map_err(err)?;
            conv
        },
        y: handle
            .create_4d_tensor(nchw, [n, cout, oh, ow])
            .map_err(err)?,
    })
}

impl CudnnConv {
    /// cuDNN on `gpu`'s stream, or `None` where no usable library loads
    /// ([`cudnn`] says why).
    pub(crate) fn open(gpu: &Gpu) -> Result<Option<Self>> {
        if cudnn().is_err() {
            return Ok(None);
        }
        let handle = Cudnn::new(gpu.stream().clone()).map_err(err)?;
        Ok(Some(Self {
            handle,
            context: gpu.context().clone(),
            plan: None,
            workspace: Scratch::new(),
        }))
    }

    /// A layer's cuDNN, opened on first use, when `wanted` and present.
    pub(crate) fn for_layer<'a>(
        slot: &'a mut Option<Self>,
        wanted: bool,
        gpu: &Gpu,
    ) -> Result<Option<&'a mut Self>> {
        if !wanted {
            return Ok(None);
        }
        if slot.is_none() {
            *slot = Self::open(gpu)?;
        }
        if let Some(conv) = slot.as_ref() {
            conv.context
                .bind_to_thread()
                .map_err(|e| cuda(OP, CudaError::driver("bind the CUDA context")(e)))?;
        }
        Ok(slot.as_mut())
    }

    /// `y = conv(x) + bias`, through TF32 tensor cores when `tf32`.
    pub(crate) fn forward(
        &mut self,
        gpu: &Gpu,
        g: &ConvGeometry,
        tf32: bool,
        blobs: ConvBlobs<'_>,
    ) -> Result<()> {
        let ConvBlobs { x, weight, bias, y } = blobs;
        let Self {
            handle,
            plan,
            workspace,
            ..
        } = self;
        let Plan { d, forward, .. } = plan_for(handle, plan, g, tf32)?;
        let op = ConvForward {
            conv: &d.conv,
            x: &d.x,
            w: &d.w,
            y: &d.y,
        };
        let (algo, bytes) = picked(
            forward,
            || op.pick_algorithm(),
            cudnnConvolutionFwdAlgo_t::CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
            |algo| op.get_workspace_size(algo),
        )?;
        let mut workspace = workspace.grown(gpu, bytes).map_err(|e| cuda(OP, e))?;
        let (xg, wg, bg) = (x.gpu_data()?, weight.gpu_data()?, bias.gpu_data()?);
        let mut yg = y.mutable_gpu_data()?;
        let total = y.count();
        let mut yv = write(&mut yg, total)?;
        // SAFETY: the views hold the element counts the descriptors
        // describe (x, the weights, y), all f32 NCHW.
        unsafe {
            op.launch(
                algo,
                Some(&mut workspace),
                (1.0, 0.0),
                &read(&xg, x.count())?,
                &read(&wg, weight.count())?,
                &mut yv,
            )
        }
        .map_err(err)?;
        let p = g.oh * g.ow;
        // SAFETY: y holds total values, bias cout.
        unsafe {
            add_channel_bias_f32(
                gpu,
                launch_config(total),
                total as i64,
                int(OP, g.channels_out)?,
                int(OP, p)?,
                &read(&bg, g.channels_out)?,
                &mut yv,
            )
        }
        .map_err(|e| cuda(OP, e))
    }

    /// Weight and bias gradients (accumulated), and the input's when asked.
    pub(crate) fn backward(
        &mut self,
        gpu: &Gpu,
        g: &ConvGeometry,
        tf32: bool,
        blobs: ConvBlobs<'_>,
        propagate_down: bool,
    ) -> Result<()> {
        let ConvBlobs { x, weight, bias, y } = blobs;
        let Self {
            handle,
            plan,
            workspace: ws,
            ..
        } = self;
        let Plan {
            d,
            backward_filter,
            backward_data,
            ..
        } = plan_for(handle, plan, g, tf32)?;
        let (xg, dyg) = (x.gpu_data()?, y.gpu_diff()?);
        let dy = read(&dyg, y.count())?;
        {
            let mut dbg = bias.mutable_gpu_diff()?;
            gpu.add_sums(
                &SumLayout::channels_of(g.batch, g.channels_out, g.oh * g.ow),
                &dy,
                &mut write(&mut dbg, g.channels_out)?,
            )
            .map_err(|e| cuda(OP, e))?;
        }
        let filter = ConvBackwardFilter {
            conv: &d.conv,
            x: &d.x,
            dw: &d.w,
            dy: &d.y,
        };
        let (algo, bytes) = picked(
            backward_filter,
            || filter.pick_algorithm().map(deterministic_filter_algorithm),
            cudnnConvolutionBwdFilterAlgo_t::CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1,
            |algo| filter.get_workspace_size(algo),
        )?;
        {
            let mut workspace = ws.grown(gpu, bytes).map_err(|e| cuda(OP, e))?;
            let mut dwg = weight.mutable_gpu_diff()?;
            // SAFETY: as in forward; beta 1 accumulates into the diff.
            unsafe {
                filter.launch(
                    algo,
                    Some(&mut workspace),
                    (1.0, 1.0),
                    &read(&xg, x.count())?,
                    &mut write(&mut dwg, weight.count())?,
                    &dy,
                )
            }
            .map_err(err)?;
        }
        if propagate_down {
            let data = ConvBackwardData {
                conv: &d.conv,
                dx: &d.x,
                w: &d.w,
                dy: &d.y,
            };
            let (algo, bytes) = picked(
                backward_data,
                || data.pick_algorithm().map(deterministic_data_algorithm),
                cudnnConvolutionBwdDataAlgo_t::CUDNN_CONVOLUTION_BWD_DATA_ALGO_1,
                |algo| data.get_workspace_size(algo),
            )?;
            let mut workspace = ws.grown(gpu, bytes).map_err(|e| cuda(OP, e))?;
            let wg = weight.gpu_data()?;
            let mut dxg = x.mutable_gpu_diff()?;
            // SAFETY: as in forward; beta 0 overwrites the input's diff.
            unsafe {
                data.launch(
                    algo,
                    Some(&mut workspace),
                    (1.0, 0.0),
                    &mut write(&mut dxg, x.count())?,
                    &read(&wg, weight.count())?,
                    &dy,
                )
            }
            .map_err(err)?;
        }
        Ok(())
    }
}
