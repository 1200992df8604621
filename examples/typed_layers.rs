//! A net of typed layers with one written by the user: InnerProduct, a
//! learnable per-channel scale (the user's layer, `ChannelScale`), ReLU,
//! InnerProduct and SoftmaxWithLoss, trained with Caffe's SGD solver on a
//! small synthetic problem (three Gaussian clusters in 16 dimensions).
//!
//! Run: `cargo run --release --example typed_layers`; on a GPU,
//! `cargo run --release --features cuda --example typed_layers -- --device cuda`;
//! `-- --check-kernels` compiles the layer's kernel with NVRTC and checks
//! its launcher against the PTX, with no GPU.
//!
//! `ChannelScale` implements the same [`Layer`] trait as the built-in
//! layers: Caffe's Forward and Backward on the blobs, its parameter among
//! `params()`. Like them it has a CPU side and a CUDA side (feature
//! `cuda`): its kernel sits in `channel_scale.cu` beside this file with a
//! typed launcher, and which side runs follows where the blobs live. The
//! typed `forward`/`backward` come with the trait, so wiring it wrongly
//! does not compile; feeding it the logits instead of the hidden layer is
//! refused with
//!
//! ```text
//! error[E0277]: layer ChannelScale<f32, Hidden> reads Hidden, but is fed Logits
//! ```

use std::sync::Arc;

use blobflow::kernels::cpu;
use blobflow::layers::solver::{LrPolicy, ParamSpec, SgdSolver};
use blobflow::layers::{InnerProduct, Labels, Layer, ReLU, SoftmaxWithLoss, accuracy};
use blobflow::prelude::*;
use blobflow::runtime::DeviceBackend;
use blobflow::typed::{DimList, Rank2, Shape};
use clap::{Parser, ValueEnum};

const CLASSES: usize = 3;

blob!(pub shape Input = _, 16);
blob!(pub shape Hidden = _, 32);
blob!(pub shape Logits = _, CLASSES);

/// The user's layer: `y[b, c] = x[b, c] * gamma[c]`, with `gamma`
/// learned (Caffe's Scale layer with one axis, no bias).
struct ChannelScale<T: MathElement, S: Shape>
where
    S::Dims: Rank2,
{
    /// One factor per channel: its type is the shape's channel dim.
    gamma: TypedBlob<T, (<S::Dims as Rank2>::A1,)>,
}

impl<T: MathElement, S: Shape> ChannelScale<T, S>
where
    S::Dims: Rank2,
{
    /// Factors of one: the layer starts as the identity.
    fn new() -> Result<Self, BlobError> {
        let channels = S::Dims::STATIC_DIMS[1].expect("a static channel dim");
        let gamma = TypedBlob::from_shape(&[channels])?;
        gamma.mutable_cpu_data()?.fill(T::ONE);
        Ok(Self { gamma })
    }
}

impl<T: MathElement, S: Shape> Layer for ChannelScale<T, S>
where
    S::Dims: Rank2,
{
    type Elem = T;
    type Input = S;
    type Output = S;
    const TYPE: &'static str = "Scale";

    fn forward_blobs(&mut self, x: &Blob<T>, y: &Blob<T>) -> Result<(), BlobError> {
        #[cfg(feature = "cuda")]
        if let Some((gpu, [x, gamma, y])) = channel_scale_cuda::on_gpu([x, self.gamma.as_dyn(), y])
        {
            return channel_scale_cuda::forward(&gpu, x, gamma, y);
        }
        let gamma = self.gamma.cpu_data()?;
        let xd = x.cpu_data()?;
        let mut yd = y.mutable_cpu_data()?;
        for (out, row) in yd
            .chunks_exact_mut(gamma.len())
            .zip(xd.chunks_exact(gamma.len()))
        {
            for ((o, &v), &g) in out.iter_mut().zip(row).zip(gamma.iter()) {
                *o = v * g;
            }
        }
        Ok(())
    }

    /// `dgamma[c] += sum_b dy[b, c] * x[b, c]`; `dx = dy * gamma`.
    fn backward_blobs(
        &mut self,
        x: &Blob<T>,
        y: &Blob<T>,
        propagate_down: bool,
    ) -> Result<(), BlobError> {
        #[cfg(feature = "cuda")]
        if let Some((gpu, [x, gamma, y])) = channel_scale_cuda::on_gpu([x, self.gamma.as_dyn(), y])
        {
            return channel_scale_cuda::backward(&gpu, x, gamma, y, propagate_down);
        }
        let channels = self.gamma.count();
        let (xd, dy) = (x.cpu_data()?, y.cpu_diff()?);
        {
            let mut dgamma = self.gamma.mutable_cpu_diff()?;
            for (row, grow) in xd.chunks_exact(channels).zip(dy.chunks_exact(channels)) {
                for ((dg, &v), &g) in dgamma.iter_mut().zip(row).zip(grow) {
                    *dg += v * g;
                }
            }
        }
        if propagate_down {
            let gamma = self.gamma.cpu_data()?;
            let mut dx = x.mutable_cpu_diff()?;
            for (drow, grow) in dx.chunks_exact_mut(channels).zip(dy.chunks_exact(channels)) {
                for ((d, &g), &s) in drow.iter_mut().zip(grow).zip(gamma.iter()) {
                    *d = g * s;
                }
            }
        }
        Ok(())
    }

    fn params(&self) -> Vec<&Blob<T>> {
        vec![self.gamma.as_dyn()]
    }
}

/// `ChannelScale`'s CUDA side: its kernel, and blobflow's own GPU math
/// (an element-wise product, strided sums) for `gamma`'s gradient. What a
/// layer of your own needs is all public: the launcher macro, the blob's
/// device memory as cudarc views, and the GPU its blobs live on.
#[cfg(feature = "cuda")]
mod channel_scale_cuda {
    use std::any::Any;
    use std::sync::Arc;

    use blobflow::kernels::cuda::cudarc::driver::{CudaView, CudaViewMut};
    use blobflow::kernels::cuda::{BinaryOp, CudaError, Gpu, launch_config};
    use blobflow::kernels::sums::SumLayout;
    use blobflow::prelude::*;
    use blobflow::runtime::DeviceError;
    use blobflow::runtime::cuda::{CudaBackend, view, view_mut};

    blobflow::kernels::cuda_kernels! {
        /// `channel_scale.cu`, beside this file.
        static CHANNEL_SCALE = "channel_scale.cu";
        /// `y[b, c] = x[b, c] * gamma[c]`.
        fn scale_channels_f32(
            total: i64, channels: i32, x: &CudaView<'_, f32>, gamma: &CudaView<'_, f32>,
            y: &mut CudaViewMut<'_, f32>
        );
    }

    const OP: &str = "channel scale on the GPU";

    /// Compiles `channel_scale.cu` with NVRTC and holds the launcher's
    /// name and parameter types to the PTX: the check a kernel of your
    /// own can have in CI, where there is NVRTC but no GPU.
    pub fn check_kernels() -> Result<(), BlobError> {
        let ptx = CHANNEL_SCALE.compile().map_err(cuda)?;
        CHANNEL_SCALE.check_ptx(&ptx).map_err(cuda)?;
        println!("{}: the launcher matches the PTX", CHANNEL_SCALE.file);
        Ok(())
    }

    fn cuda(e: CudaError) -> BlobError {
        BlobError::Device {
            op: OP,
            source: DeviceError::with_source("CUDA", e),
        }
    }

    fn device(source: DeviceError) -> BlobError {
        BlobError::Device { op: OP, source }
    }

    /// The blobs as `f32` and the GPU they live on, when they are `f32`
    /// blobs of one CUDA device; `None` sends the layer to its CPU side.
    pub fn on_gpu<T: MathElement, const N: usize>(
        blobs: [&Blob<T>; N],
    ) -> Option<(Arc<Gpu>, [&Blob<f32>; N])> {
        let mut typed = [None; N];
        let mut gpu: Option<Arc<Gpu>> = None;
        for (slot, blob) in typed.iter_mut().zip(blobs) {
            let blob = (blob as &dyn Any).downcast_ref::<Blob<f32>>()?;
            let here = blob.device().and_then(CudaBackend::of)?.gpu();
            // One GPU for all: a kernel cannot read another GPU's memory.
            match &gpu {
                Some(g) if g.context().ordinal() != here.context().ordinal() => return None,
                Some(_) => {}
                None => gpu = Some(here.clone()),
            }
            *slot = Some(blob);
        }
        Some((gpu?, typed.map(|b| b.expect("filled above"))))
    }

    /// `y = x * gamma` per channel over the views, launched safely: the
    /// lengths the kernel relies on are checked first.
    fn scale(
        gpu: &Gpu,
        x: &CudaView<'_, f32>,
        gamma: &CudaView<'_, f32>,
        y: &mut CudaViewMut<'_, f32>,
    ) -> Result<(), BlobError> {
        let (n, c) = (y.len(), gamma.len());
        if x.len() != n || c == 0 || n % c != 0 {
            return Err(BlobError::InvalidParameter {
                op: OP,
                detail: format!(
                    "{} inputs, {n} outputs and {c} channels do not fit",
                    x.len()
                ),
            });
        }
        let channels = i32::try_from(c).map_err(|_| BlobError::InvalidParameter {
            op: OP,
            detail: format!("{c} channels do not fit the kernel's int"),
        })?;
        // SAFETY: x and y hold n values and gamma c (checked above); the
        // kernel reads x[i], gamma[i % c] and writes y[i] for i < n.
        unsafe { scale_channels_f32(gpu, launch_config(n), n as i64, channels, x, gamma, y) }
            .map_err(cuda)
    }

    /// `y = x * gamma` per channel.
    pub fn forward(
        gpu: &Gpu,
        x: &Blob<f32>,
        gamma: &Blob<f32>,
        y: &Blob<f32>,
    ) -> Result<(), BlobError> {
        let (n, c) = (x.count(), gamma.count());
        let (xg, gg, mut yg) = (x.gpu_data()?, gamma.gpu_data()?, y.mutable_gpu_data()?);
        scale(
            gpu,
            &view(&xg, n).map_err(device)?,
            &view(&gg, c).map_err(device)?,
            &mut view_mut(&mut yg, n).map_err(device)?,
        )
    }

    /// `dgamma += column sums of dy * x`; `dx = dy * gamma` when asked.
    pub fn backward(
        gpu: &Gpu,
        x: &Blob<f32>,
        gamma: &Blob<f32>,
        y: &Blob<f32>,
        propagate_down: bool,
    ) -> Result<(), BlobError> {
        let (n, c) = (x.count(), gamma.count());
        let (xg, dyg) = (x.gpu_data()?, y.gpu_diff()?);
        let dy = view(&dyg, n).map_err(device)?;
        let mut products = gpu
            .stream()
            .alloc_zeros::<f32>(n.max(1))
            .map_err(|e| cuda(CudaError::driver("allocate products")(e)))?;
        let mut products = products.slice_mut(..n);
        gpu.binary(
            BinaryOp::Mul,
            &dy,
            &view(&xg, n).map_err(device)?,
            &mut products,
        )
        .map_err(cuda)?;
        {
            let mut dg = gamma.mutable_gpu_diff()?;
            let layout = SumLayout::columns_of(n / c.max(1), c);
            gpu.add_sums(
                &layout,
                &products.as_view(),
                &mut view_mut(&mut dg, c).map_err(device)?,
            )
            .map_err(cuda)?;
        }
        if propagate_down {
            let (gg, mut dxg) = (gamma.gpu_data()?, x.mutable_gpu_diff()?);
            scale(
                gpu,
                &dy,
                &view(&gg, c).map_err(device)?,
                &mut view_mut(&mut dxg, n).map_err(device)?,
            )?;
        }
        Ok(())
    }
}

/// The net: every layer's input and output named, checked when this
/// example compiles.
struct Net {
    ip1: InnerProduct<f32, Input, 32>,
    scale: ChannelScale<f32, Hidden>,
    relu: ReLU<f32, Hidden>,
    ip2: InnerProduct<f32, Hidden, CLASSES>,
    loss: SoftmaxWithLoss<f32, Logits>,
}

impl Net {
    /// Every learnable blob, in the order of the layers.
    fn params(&self) -> Vec<&Blob<f32>> {
        [self.ip1.params(), self.scale.params(), self.ip2.params()].concat()
    }

    /// Puts every parameter on `device` (values kept).
    fn move_to(&mut self, device: &Arc<dyn DeviceBackend>) -> Result<(), BlobError> {
        for blob in [
            self.ip1.weight.as_dyn_mut(),
            self.ip1.bias.as_dyn_mut(),
            self.scale.gamma.as_dyn_mut(),
            self.ip2.weight.as_dyn_mut(),
            self.ip2.bias.as_dyn_mut(),
        ] {
            blob.move_to(device.clone())?;
        }
        Ok(())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, ValueEnum)]
enum Device {
    Cpu,
    Cuda,
}

#[derive(Parser)]
#[command(about = "Train a small net of typed layers, one of them the user's own")]
struct Args {
    /// Where to run
    #[arg(long, value_enum, default_value_t = Device::Cpu)]
    device: Device,
    /// Only compile the user layer's kernel with NVRTC and check its
    /// launcher against the PTX (needs NVRTC and `--features cuda`, no GPU)
    #[arg(long)]
    check_kernels: bool,
}

#[cfg(feature = "cuda")]
fn check_kernels() -> Result<(), BlobError> {
    channel_scale_cuda::check_kernels()
}

#[cfg(not(feature = "cuda"))]
fn check_kernels() -> Result<(), BlobError> {
    Err(BlobError::Device {
        op: "typed_layers --check-kernels",
        source: blobflow::runtime::DeviceError::new(
            "this build has no CUDA; rebuild with --features cuda",
        ),
    })
}

/// GPU 0, when built with `--features cuda`.
#[cfg(feature = "cuda")]
fn gpu() -> Result<Arc<dyn DeviceBackend>, BlobError> {
    let gpu = blobflow::runtime::cuda::CudaBackend::new(0)?;
    println!("device: {}", gpu.gpu().name());
    Ok(gpu)
}

#[cfg(not(feature = "cuda"))]
fn gpu() -> Result<Arc<dyn DeviceBackend>, BlobError> {
    Err(BlobError::Device {
        op: "typed_layers --device cuda",
        source: blobflow::runtime::DeviceError::new(
            "this build has no CUDA; rebuild with --features cuda",
        ),
    })
}

/// A blob of the net moved to `device`, when there is one.
fn placed<S: Shape>(
    mut blob: TypedBlob<f32, S>,
    device: Option<&Arc<dyn DeviceBackend>>,
) -> Result<TypedBlob<f32, S>, BlobError> {
    if let Some(d) = device {
        blob.move_to(d.clone())?;
    }
    Ok(blob)
}

/// A batch of inputs and their labels.
type Batch = (TypedBlob<f32, Input>, TypedBlob<f32, Labels<Logits>>);

fn synthetic_batch(batch: usize, step: u64) -> Result<Batch, BlobError> {
    let x = TypedBlob::<f32, Input>::with_dynamic(batch)?;
    cpu::set_seed(1000 + step);
    cpu::gaussian(0.0, 0.6, &mut x.mutable_cpu_data()?).expect("sigma > 0");
    let labels = TypedBlob::<f32, Labels<Logits>>::with_dynamic(batch)?;
    {
        let mut data = x.mutable_cpu_data()?;
        let mut l = labels.mutable_cpu_data()?;
        for (i, (row, label)) in data.chunks_exact_mut(16).zip(l.iter_mut()).enumerate() {
            let class = i % CLASSES;
            *label = class as f32;
            row[class * 5] += 2.0; // each class shifts its own coordinate
        }
    }
    Ok((x, labels))
}

fn main() -> std::process::ExitCode {
    match train(Args::parse()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn train(args: Args) -> Result<(), BlobError> {
    if args.check_kernels {
        return check_kernels();
    }
    let device = match args.device {
        Device::Cpu => None,
        Device::Cuda => Some(gpu()?),
    };
    let device = device.as_ref();
    let mut net = Net {
        ip1: InnerProduct::new()?,
        scale: ChannelScale::new()?,
        relu: ReLU::new(),
        ip2: InnerProduct::new()?,
        loss: SoftmaxWithLoss::new(),
    };
    cpu::set_seed(7);
    cpu::gaussian(0.0, 0.25, &mut net.ip1.weight.mutable_cpu_data()?).expect("sigma > 0");
    cpu::gaussian(0.0, 0.25, &mut net.ip2.weight.mutable_cpu_data()?).expect("sigma > 0");
    if let Some(d) = device {
        net.move_to(d)?;
    }
    let batch = 60;
    let (h, scaled) = (
        placed(TypedBlob::<f32, Hidden>::with_dynamic(batch)?, device)?,
        placed(TypedBlob::<f32, Hidden>::with_dynamic(batch)?, device)?,
    );
    let logits = placed(TypedBlob::<f32, Logits>::with_dynamic(batch)?, device)?;

    // Caffe's SGD at a fixed rate; every parameter, the user's layer's
    // too, at Caffe's default multipliers.
    let mut solver = SgdSolver::new(0.2, LrPolicy::Fixed);
    let specs = vec![ParamSpec::default(); net.params().len()];
    for step in 0..200 {
        let (x, labels) = synthetic_batch(batch, step)?;
        let (x, labels) = (placed(x, device)?, placed(labels, device)?);
        net.ip1.forward(&x, &h)?;
        net.scale.forward(&h, &scaled)?;
        net.relu.forward(&scaled, &scaled)?;
        net.ip2.forward(&scaled, &logits)?;
        net.loss.forward(&logits, &labels)?;
        for p in net.params() {
            p.clear_diff()?;
        }
        net.loss.backward(&logits, &labels)?;
        net.ip2.backward(&scaled, &logits, true)?;
        net.relu.backward(&scaled, &scaled, true)?;
        net.scale.backward(&h, &scaled, true)?;
        net.ip1.backward(&x, &h, false)?;
        solver.step(&net.params(), &specs)?;
        // Read only when shown: on a GPU the steps between run without
        // the host waiting for the device.
        if step % 40 == 0 || step == 199 {
            println!(
                "step {step:>3}: loss {:.4}, batch accuracy {:.0}%",
                net.loss.value()?,
                100.0 * accuracy(&logits, &labels)?
            );
        }
    }
    let gamma = net.scale.gamma.to_vec()?;
    println!(
        "learned scales: min {:.3}, max {:.3}",
        gamma.iter().copied().fold(f32::INFINITY, f32::min),
        gamma.iter().copied().fold(f32::NEG_INFINITY, f32::max)
    );
    Ok(())
}
