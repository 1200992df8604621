//! A typed net with a layer of the user's own that runs on a GPU too:
//! InnerProduct, the user's learned per-channel scale (`ChannelScale`,
//! `scale.rs`), ReLU, InnerProduct and SoftmaxWithLoss, declared with
//! `NetSpec` and trained with Caffe's SGD solver on a small synthetic
//! problem (three Gaussian clusters in 16 dimensions).
//!
//! Run: `cargo run --release --example user_layer`; on a GPU,
//! `cargo run --release --features cuda --example user_layer -- --device cuda`;
//! `-- --check-kernels` compiles the layer's kernel with NVRTC and checks
//! its launcher against the PTX, with no GPU.
//!
//! The user's layer is a `TypedLayer`: it declares its bottom `(_, C)`,
//! its top `(_, C)` and its parameter `(C,)` as types, and its passes
//! read the net's blobs through typed views with compile-time strides.
//! A CPU side and a CUDA side are chosen by where its blobs live; the
//! net moves its blobs, the layer's `gamma` among them, with
//! `Net::to_device`. The typed net checks its bottom at compile time:
//! declared after the logits of another width, or on an image batch, the
//! net does not compile; and it needs no registration.

mod scale;

use std::sync::Arc;

use blobflow::kernels::cpu;
use blobflow::layers::check::GradientChecker;
use blobflow::layers::net::{Net, NetState};
use blobflow::layers::solver::{LrPolicy, SgdSolver};
use blobflow::layers::typed_layer::DynTyped;
use blobflow::layers::typed_net::*;
use blobflow::runtime::DeviceBackend;
use blobflow::{Blob, BlobError, blob};
use clap::{Parser, ValueEnum};

const CLASSES: usize = 3;
const BATCH: usize = 60;

blob!(pub shape Features = _, 16);
blob!(pub shape Classes = _);

#[derive(Clone, Copy, Debug, PartialEq, ValueEnum)]
enum Device {
    Cpu,
    Cuda,
}

#[derive(Parser)]
#[command(about = "Train a small typed net with a layer of the user's own, on the CPU or a GPU")]
struct Args {
    /// Where to run
    #[arg(long, value_enum, default_value_t = Device::Cpu)]
    device: Device,
    /// Only compile the user layer's kernel with NVRTC and check its
    /// launcher against the PTX (needs NVRTC and `--features cuda`, no GPU)
    #[arg(long)]
    check_kernels: bool,
}

/// The net, declared: each layer reads the handle of the one before.
fn declare() -> NetSpec<f32> {
    let gaussian = || Filler::gaussian(0.0, 0.25);
    let mut n = NetSpec::<f32>::new("user_layer");
    let x = n.input::<Features>("data");
    let label = n.input::<Classes>("label");
    let h = n.add("ip1", &x, Fc::<32>::new().weight_filler(gaussian()));
    let scaled = n.add_typed("scale", &h, scale::ChannelScale::<32>);
    let scaled = n.add("relu", scaled, Neuron::relu());
    let logits = n.add(
        "ip2",
        &scaled,
        Fc::<CLASSES>::new().weight_filler(gaussian()),
    );
    let _accuracy = n.add("accuracy", (&logits, &label), Accuracy::top(1));
    let _loss = n.add("loss", (&logits, &label), SoftmaxLoss::new());
    n.batch(BATCH);
    n
}

/// Each class shifts its own coordinate of Gaussian noise.
fn feed(net: &Net<f32>, step: u64) -> Result<(), BlobError> {
    let data = net.blob("data").expect("declared");
    cpu::set_seed(1000 + step);
    cpu::gaussian(0.0, 0.6, &mut data.mutable_cpu_data()?).expect("sigma > 0");
    let mut x = data.mutable_cpu_data()?;
    let mut labels = net.blob("label").expect("declared").mutable_cpu_data()?;
    for (i, (row, label)) in x.chunks_exact_mut(16).zip(labels.iter_mut()).enumerate() {
        let class = i % CLASSES;
        *label = class as f32;
        row[class * 5] += 2.0;
    }
    Ok(())
}

/// The user's layer against central differences.
fn check_user_layer() -> Result<(), BlobError> {
    let x = Blob::<f32>::new(&[3, 4])?;
    for (i, v) in x.mutable_cpu_data()?.iter_mut().enumerate() {
        *v = (i as f32 - 5.5) / 4.0;
    }
    let mut layer = DynTyped::new(scale::ChannelScale::<4>)?;
    let report = GradientChecker::default().check(&mut layer, &[x])?;
    println!(
        "{}: {} gradients within {:.1e} of central differences",
        scale::TYPE,
        report.checked,
        report.worst
    );
    Ok(())
}

#[cfg(feature = "cuda")]
fn check_kernels() -> Result<(), BlobError> {
    scale::cuda::check_kernels()
}

#[cfg(not(feature = "cuda"))]
fn check_kernels() -> Result<(), BlobError> {
    Err(no_cuda("user_layer --check-kernels"))
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
    Err(no_cuda("user_layer --device cuda"))
}

#[cfg(not(feature = "cuda"))]
fn no_cuda(op: &'static str) -> BlobError {
    BlobError::Device {
        op,
        source: blobflow::runtime::DeviceError::new(
            "this build has no CUDA; rebuild with --features cuda",
        ),
    }
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
    check_user_layer()?;
    cpu::set_seed(7);
    let mut net = declare().build(NetState::train())?;
    if args.device == Device::Cuda {
        net.to_device(gpu()?)?;
    }
    // Caffe's SGD at a fixed rate; every parameter, the user's layer's
    // too, at Caffe's default multipliers.
    let mut solver = SgdSolver::new(0.2, LrPolicy::Fixed);
    for step in 0..200 {
        feed(&net, step)?;
        net.clear_param_diffs()?;
        // The loss is read only when shown: on a GPU the steps between
        // run without the host waiting for the device.
        net.forward_unread()?;
        net.backward()?;
        solver.step(&net.param_blobs(), &net.param_specs())?;
        if step % 40 == 0 || step == 199 {
            println!(
                "step {step:>3}: loss {:.4}, batch accuracy {:.0}%",
                net.loss()?,
                100.0 * net.blob("accuracy").expect("declared").cpu_data()?[0]
            );
        }
    }
    let gamma = net.layer_blobs("scale").expect("declared")[0].to_vec()?;
    println!(
        "learned scales: min {:.3}, max {:.3}",
        gamma.iter().copied().fold(f32::INFINITY, f32::min),
        gamma.iter().copied().fold(f32::NEG_INFINITY, f32::max)
    );
    Ok(())
}
