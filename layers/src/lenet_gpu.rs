//! LeNet's forward pass on a GPU (feature `cuda`): the same layers as
//! [`super::lenet::LeNet`], with im2col, pooling, ReLU and biases as the
//! kernels of `kernels/cuda/layers.cu` and every product a cuBLAS gemm.
//! Weights come from a loaded CPU net, so both run the same model.

use std::sync::Arc;

use blob_kernels::cpu::Transpose;
use blob_kernels::cuda::cudarc::driver::CudaSlice;
use blob_kernels::cuda::{self as kernels, CudaError, Gpu, launch_config};

use super::lenet::LeNet;
use blob_runtime::{Blob, BlobError};

fn err(e: CudaError) -> BlobError {
    BlobError::Device {
        op: "LeNet on the GPU",
        source: blob_runtime::DeviceError::with_source("CUDA", e),
    }
}

fn drv(e: kernels::cudarc::driver::DriverError) -> BlobError {
    err(CudaError::driver("LeNet on the GPU")(e))
}

/// A convolution's weights on the GPU and its geometry.
struct GpuConv {
    weight: CudaSlice<f32>,
    bias: CudaSlice<f32>,
    cin: usize,
    cout: usize,
    k: usize,
}

/// LeNet with weights on the GPU; activations are reused between batches.
///
/// ```no_run
/// use blob_layers::{lenet::LeNet, lenet_gpu::LeNetGpu};
/// let cpu = LeNet::load("lenet_iter_10000.caffemodel", 64)?;
/// let gpu = blob_kernels::cuda::Gpu::new(0)?;
/// let mut net = LeNetGpu::new(&cpu, gpu)?;
/// let labels = net.predict(&vec![0.0; 64 * 784])?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct LeNetGpu {
    gpu: Arc<Gpu>,
    conv1: GpuConv,
    conv2: GpuConv,
    ip1: (CudaSlice<f32>, CudaSlice<f32>),
    ip2: (CudaSlice<f32>, CudaSlice<f32>),
    scratch: Vec<CudaSlice<f32>>,
    batch: usize,
}

impl LeNetGpu {
    /// Uploads `net`'s weights to `gpu`.
    pub fn new(net: &LeNet, gpu: Arc<Gpu>) -> Result<Self, BlobError> {
        let up = |b: &Blob<f32>| -> Result<CudaSlice<f32>, BlobError> {
            gpu.stream()
                .clone_htod(&b.cpu_data()?.to_vec())
                .map_err(drv)
        };
        // Weights (cout, cin, k, k) and bias, as the CPU net holds them.
        let conv = |weight: &Blob<f32>, bias: &Blob<f32>| -> Result<GpuConv, BlobError> {
            let s = weight.shape();
            Ok(GpuConv {
                weight: up(weight)?,
                bias: up(bias)?,
                cin: s[1],
                cout: s[0],
                k: s[2],
            })
        };
        Ok(Self {
            conv1: conv(&net.conv1.weight, &net.conv1.bias)?,
            conv2: conv(&net.conv2.weight, &net.conv2.bias)?,
            ip1: (up(&net.ip1.weight)?, up(&net.ip1.bias)?),
            ip2: (up(&net.ip2.weight)?, up(&net.ip2.bias)?),
            gpu,
            scratch: Vec::new(),
            batch: 0,
        })
    }

    fn ensure_scratch(&mut self, batch: usize) -> Result<(), BlobError> {
        if batch <= self.batch {
            return Ok(());
        }
        // input, col1, tmp1, conv1, pool1, col2, tmp2, conv2, pool2, ip1, ip2
        let sizes = [
            784,
            25 * 576,
            20 * 576,
            20 * 576,
            20 * 144,
            500 * 64,
            50 * 64,
            50 * 64,
            800,
            500,
            10,
        ];
        self.scratch = sizes
            .iter()
            .map(|&n| self.gpu.stream().alloc_zeros::<f32>(n * batch).map_err(drv))
            .collect::<Result<_, _>>()?;
        self.batch = batch;
        Ok(())
    }

    /// Class of each of a batch of scaled images (`n * 784` values): the
    /// first maximum of the logits, as the CPU net ranks them.
    pub fn predict(&mut self, images: &[f32]) -> Result<Vec<u8>, BlobError> {
        if images.is_empty() || !images.len().is_multiple_of(784) {
            return Err(BlobError::CountMismatch {
                op: "predict on the GPU",
                what: "image values".into(),
                got: images.len(),
                want: 784,
            });
        }
        let b = images.len() / 784;
        self.ensure_scratch(b)?;
        let gpu = self.gpu.clone();
        let stream = gpu.stream().clone();
        let [input, col1, tmp1, c1, p1, col2, tmp2, c2, p2, f1, f2] = &mut self.scratch[..] else {
            unreachable!("eleven scratch buffers");
        };
        stream
            .memcpy_htod(images, &mut input.slice_mut(..b * 784))
            .map_err(drv)?;
        conv_forward(&gpu, &self.conv1, b, 28, input, col1, tmp1, c1)?;
        pool(&gpu, b * 20, 24, c1, p1)?;
        conv_forward(&gpu, &self.conv2, b, 12, p1, col2, tmp2, c2)?;
        pool(&gpu, b * 50, 8, c2, p2)?;
        inner_product(&gpu, b, 800, 500, &self.ip1, p2, f1)?;
        let n = b * 500;
        // SAFETY: relu_f32 rewrites y[0..n]; f1 holds b * 500.
        unsafe { kernels::relu_f32(&gpu, launch_config(n), n as i64, &mut f1.slice_mut(..n)) }
            .map_err(err)?;
        inner_product(&gpu, b, 500, 10, &self.ip2, f1, f2)?;
        let logits = stream.clone_dtoh(&f2.slice(..b * 10)).map_err(drv)?;
        Ok(super::lenet::first_max_classes(&logits, 10))
    }
}

#[allow(clippy::too_many_arguments)]
fn conv_forward(
    gpu: &Gpu,
    c: &GpuConv,
    b: usize,
    h: usize,
    x: &CudaSlice<f32>,
    col: &mut CudaSlice<f32>,
    tmp: &mut CudaSlice<f32>,
    y: &mut CudaSlice<f32>,
) -> Result<(), BlobError> {
    let oh = h - c.k + 1;
    let p = oh * oh;
    let ckk = c.cin * c.k * c.k;
    let cols = b * p;
    let total = (ckk * cols) as i64;
    let (cin, hh, k, s, ohi, bi) = (
        c.cin as i32,
        h as i32,
        c.k as i32,
        1i32,
        oh as i32,
        b as i32,
    );
    // SAFETY: im2col_batch_f32 writes col[0..total] reading x within
    // (b, cin, h, h); both buffers were sized for this batch.
    unsafe {
        kernels::im2col_batch_f32(
            gpu,
            launch_config(total as usize),
            total,
            cin,
            hh,
            hh,
            k,
            s,
            ohi,
            ohi,
            bi,
            &x.as_view(),
            &mut col.as_view_mut(),
        )
    }
    .map_err(err)?;
    gpu.gemm(
        Transpose::No,
        Transpose::No,
        c.cout,
        cols,
        ckk,
        1.0f32,
        &c.weight.as_view(),
        &col.slice(..ckk * cols),
        0.0,
        &mut tmp.slice_mut(..c.cout * cols),
    )
    .map_err(err)?;
    let total = (b * c.cout * p) as i64;
    let (co, pi) = (c.cout as i32, p as i32);
    // SAFETY: scatter_bias_f32 reads tmp (cout, b*p) and bias (cout) and
    // writes y[0..b*cout*p], all sized for this batch.
    unsafe {
        kernels::scatter_bias_f32(
            gpu,
            launch_config(total as usize),
            total,
            co,
            bi,
            pi,
            &tmp.as_view(),
            &c.bias.as_view(),
            &mut y.as_view_mut(),
        )
    }
    .map_err(err)
}

fn pool(
    gpu: &Gpu,
    planes: usize,
    h: usize,
    x: &CudaSlice<f32>,
    y: &mut CudaSlice<f32>,
) -> Result<(), BlobError> {
    let oh = h / 2;
    let total = (planes * oh * oh) as i64;
    let (hh, ohi, k, s) = (h as i32, oh as i32, 2i32, 2i32);
    // SAFETY: maxpool_f32 writes y[0..planes*oh*oh] reading x within
    // (planes, h, h).
    unsafe {
        kernels::maxpool_f32(
            gpu,
            launch_config(total as usize),
            total,
            hh,
            hh,
            ohi,
            ohi,
            k,
            s,
            &x.as_view(),
            &mut y.as_view_mut(),
        )
    }
    .map_err(err)
}

fn inner_product(
    gpu: &Gpu,
    b: usize,
    k: usize,
    n: usize,
    (w, bias): &(CudaSlice<f32>, CudaSlice<f32>),
    x: &CudaSlice<f32>,
    y: &mut CudaSlice<f32>,
) -> Result<(), BlobError> {
    gpu.gemm(
        Transpose::No,
        Transpose::Yes,
        b,
        n,
        k,
        1.0f32,
        &x.slice(..b * k),
        &w.as_view(),
        0.0,
        &mut y.slice_mut(..b * n),
    )
    .map_err(err)?;
    let total = (b * n) as i64;
    let ni = n as i32;
    // SAFETY: add_bias_rows_f32 rewrites y[0..b*n] reading bias[0..n].
    unsafe {
        kernels::add_bias_rows_f32(
            gpu,
            launch_config(total as usize),
            total,
            ni,
            &bias.as_view(),
            &mut y.as_view_mut(),
        )
    }
    .map_err(err)
}
