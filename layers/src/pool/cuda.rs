//! The CUDA side of Pooling: one thread per output forward, one per input
//! backward, each input gathering the gradients of the windows that hold
//! it in the CPU side's order (no atomics: a GPU run repeats bit for bit
//! and its gradients equal the CPU's).

use blob_kernels::cuda::cudarc::driver::{CudaView, CudaViewMut};
use blob_kernels::cuda::{Gpu, Scratch, launch_config};
use blob_runtime::Blob;

use super::PoolMethod;
use super::cpu::PoolGeometry;
use crate::gpu::{cuda, int, read, write};
use crate::layer::Result;

blob_kernels::cuda_kernels! {
    /// `pool.cu`: Pooling's kernels, `f32`.
    pub(crate) static POOL = "pool.cu";
    /// MAX pooling, with each maximum's position.
    pub(crate) fn max_pool_f32(
        total: i64, h: i32, w: i32, oh: i32, ow: i32, kh: i32, kw: i32, sh: i32, sw: i32,
        ph: i32, pw: i32,
        x: &CudaView<'_, f32>, y: &mut CudaViewMut<'_, f32>, argmax: &mut CudaViewMut<'_, u32>
    );
    /// MAX pooling's input gradient.
    pub(crate) fn max_unpool_f32(
        n: i64, h: i32, w: i32, oh: i32, ow: i32, kh: i32, kw: i32, sh: i32, sw: i32,
        ph: i32, pw: i32,
        dy: &CudaView<'_, f32>, argmax: &CudaView<'_, u32>, dx: &mut CudaViewMut<'_, f32>
    );
    /// AVE pooling.
    pub(crate) fn ave_pool_f32(
        total: i64, h: i32, w: i32, oh: i32, ow: i32, kh: i32, kw: i32, sh: i32, sw: i32,
        ph: i32, pw: i32,
        x: &CudaView<'_, f32>, y: &mut CudaViewMut<'_, f32>
    );
    /// AVE pooling's input gradient.
    pub(crate) fn ave_unpool_f32(
        n: i64, h: i32, w: i32, oh: i32, ow: i32, kh: i32, kw: i32, sh: i32, sw: i32,
        ph: i32, pw: i32,
        dy: &CudaView<'_, f32>, dx: &mut CudaViewMut<'_, f32>
    );
}

const OP: &str = "pool on the GPU";

/// `h, w, oh, ow, kh, kw, sh, sw, ph, pw` as the kernels take them.
fn dims(g: &PoolGeometry) -> Result<[i32; 10]> {
    let [kh, kw] = g.kernel;
    let [sh, sw] = g.stride;
    let [ph, pw] = g.pad;
    let mut out = [0; 10];
    for (o, v) in out
        .iter_mut()
        .zip([g.h, g.w, g.oh, g.ow, kh, kw, sh, sw, ph, pw])
    {
        *o = int(OP, v)?;
    }
    Ok(out)
}

/// The pooled output; MAX keeps each maximum's position in `argmax`.
pub(crate) fn forward(
    g: &PoolGeometry,
    method: PoolMethod,
    gpu: &Gpu,
    argmax: &mut Scratch<u32>,
    x: &Blob<f32>,
    y: &Blob<f32>,
) -> Result<()> {
    let [h, w, oh, ow, kh, kw, sh, sw, ph, pw] = dims(g)?;
    let total = y.count();
    let (xg, mut yg) = (x.gpu_data()?, y.mutable_gpu_data()?);
    let (xv, mut yv) = (read(&xg, x.count())?, write(&mut yg, total)?);
    let config = launch_config(total);
    match method {
        PoolMethod::Max => {
            let mut positions = argmax
                .grown(gpu, total)
                .map_err(|e| cuda("allocate pooling positions", e))?;
            // SAFETY: x holds planes*h*w, y and positions total outputs.
            unsafe {
                max_pool_f32(
                    gpu,
                    config,
                    total as i64,
                    h,
                    w,
                    oh,
                    ow,
                    kh,
                    kw,
                    sh,
                    sw,
                    ph,
                    pw,
                    &xv,
                    &mut yv,
                    &mut positions,
                )
            }
        }
        // SAFETY: as above, without positions.
        PoolMethod::Ave => unsafe {
            ave_pool_f32(
                gpu,
                config,
                total as i64,
                h,
                w,
                oh,
                ow,
                kh,
                kw,
                sh,
                sw,
                ph,
                pw,
                &xv,
                &mut yv,
            )
        },
    }
    .map_err(|e| cuda(OP, e))
}

/// The input's gradient (pooling learns nothing).
pub(crate) fn backward(
    g: &PoolGeometry,
    method: PoolMethod,
    gpu: &Gpu,
    argmax: &Scratch<u32>,
    x: &Blob<f32>,
    y: &Blob<f32>,
) -> Result<()> {
    let [h, w, oh, ow, kh, kw, sh, sw, ph, pw] = dims(g)?;
    let (total, n) = (y.count(), x.count());
    let dyg = y.gpu_diff()?;
    let mut dxg = x.mutable_gpu_diff()?;
    let (dy, mut dx) = (read(&dyg, total)?, write(&mut dxg, n)?);
    let config = launch_config(n);
    match method {
        PoolMethod::Max => {
            let positions = argmax
                .view(total)
                .ok_or(blob_runtime::BlobError::CountMismatch {
                    op: "pooling backward on the GPU",
                    what: "positions of the forward pass".into(),
                    got: argmax.len(),
                    want: total,
                })?;
            // SAFETY: dy and positions hold total = planes*oh*ow values,
            // dx n = planes*h*w.
            unsafe {
                max_unpool_f32(
                    gpu, config, n as i64, h, w, oh, ow, kh, kw, sh, sw, ph, pw, &dy, &positions,
                    &mut dx,
                )
            }
        }
        // SAFETY: dy holds planes*oh*ow, dx n = planes*h*w.
        PoolMethod::Ave => unsafe {
            ave_unpool_f32(
                gpu, config, n as i64, h, w, oh, ow, kh, kw, sh, sw, ph, pw, &dy, &mut dx,
            )
        },
    }
    .map_err(|e| cuda(OP, e))
}
