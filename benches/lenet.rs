//! LeNet throughput in images/s, net alone (inputs filled once, before the
//! clock): the forward pass and a training step (forward, backward and
//! Caffe's SGD update: momentum 0.9, weight decay 5e-4) at batch 64 and
//! 1000, on Caffe's own `lenet_train_test.prototxt` built as a `Net`
//! (TRAIN phase), weights from its fillers.
//!
//! The CPU runs on every core, then on one in the same run: the ratio is
//! what the cores add. Each rate is then given in GFLOP/s (the convolutions'
//! and inner products' multiply-adds) against the machine's FMA peak on
//! as many cores, measured in the same run. Built with `--features cuda`,
//! it runs the same net on GPU 0 too, with f32 and then TF32 convolutions,
//! and prints the ratio to the CPU; `scripts/lenet_torch.py` runs the same
//! net in PyTorch on the same machine for a peer figure.
//!
//! Run: `cargo bench --bench lenet` (GPU: `cargo bench --features cuda
//! --bench lenet`).

use blobflow::BlobError;
use blobflow::layers::net::Net;
use blobflow::layers::solver::SgdSolver;
use blobflow_mnist::Trainer;

#[cfg(feature = "cuda")]
#[path = "support/no_gpu.rs"]
mod no_gpu;
#[path = "support/repetitions.rs"]
mod repetitions;

const BATCHES: [usize; 2] = [64, 1000];

/// Multiply-adds of LeNet's forward pass, counted twice (FLOPs) per image:
/// conv1 20 x 576 x 25, conv2 50 x 64 x 500, ip1 500 x 800, ip2 10 x 500.
const FORWARD_FLOPS: f64 =
    2.0 * (20.0 * 576.0 * 25.0 + 50.0 * 64.0 * 500.0 + 500.0 * 800.0 + 10.0 * 500.0);
/// A training step adds the weight gradients (the forward's products
/// again) and the input gradients of conv2, ip1 and ip2 (conv1's input is
/// the data, which needs none).
const TRAIN_FLOPS: f64 =
    2.0 * FORWARD_FLOPS + 2.0 * (50.0 * 64.0 * 500.0 + 500.0 * 800.0 + 10.0 * 500.0);

/// Forward and training-step images/s at each of [`BATCHES`].
#[derive(Clone, Copy, Debug, Default)]
struct Rates {
    forward: [f64; 2],
    train: [f64; 2],
}

/// LeNet's train net for `batch` with Caffe's fillers and a fixed batch
/// of digits and labels.
fn net(batch: usize) -> Result<Net<f32>, BlobError> {
    let net = Trainer::new(batch, 1, 1701)?.net;
    let mut state = 1701u32;
    for v in net
        .blob("data")
        .expect("LeNet's input")
        .mutable_cpu_data()?
        .iter_mut()
    {
        state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        *v = (state >> 8) as f32 / (1u32 << 24) as f32;
    }
    for (i, v) in net
        .blob("label")
        .expect("LeNet's labels")
        .mutable_cpu_data()?
        .iter_mut()
        .enumerate()
    {
        *v = (i % 10) as f32;
    }
    Ok(net)
}

/// Images/s of `step` on `batch` images (see [`repetitions::per_second`]).
fn rate(
    batch: usize,
    step: impl FnMut() -> Result<(), BlobError>,
    finish: impl FnMut() -> Result<(), BlobError>,
) -> Result<f64, BlobError> {
    Ok(repetitions::per_second(step, finish)? * batch as f64)
}

/// Measures every case, each net first given to `prepare` (which moves
/// it to a device, if any) before the clock starts.
fn measure(prepare: impl Fn(&mut Net<f32>) -> Result<(), BlobError>) -> Result<Rates, BlobError> {
    let mut rates = Rates::default();
    for (i, &batch) in BATCHES.iter().enumerate() {
        let mut n = net(batch)?;
        prepare(&mut n)?;
        let specs = n.param_specs();
        let n = std::cell::RefCell::new(n);
        let finish = || {
            n.borrow()
                .blob("ip2")
                .expect("LeNet's scores")
                .cpu_data()
                .map(drop)
        };
        // The TRAIN net computes its loss too: Caffe's `caffe time` on
        // this file times the same layers.
        let forward = || n.borrow_mut().forward().map(drop);
        rates.forward[i] = rate(batch, forward, finish)?;
        let mut solver = SgdSolver::lenet();
        let train = || {
            let mut n = n.borrow_mut();
            n.clear_param_diffs()?;
            n.forward()?;
            n.backward()?;
            solver.step(&n.param_blobs(), &specs)
        };
        rates.train[i] = rate(batch, train, finish)?;
    }
    Ok(rates)
}

fn print(name: &str, rates: &Rates, reference: Option<(&str, &Rates)>) {
    let cases = [("forward", &rates.forward), ("train step", &rates.train)];
    for (what, values) in cases {
        for (i, batch) in BATCHES.iter().enumerate() {
            let ratio = reference.map_or(String::new(), |(ref_name, r)| {
                let base = if what == "forward" {
                    r.forward[i]
                } else {
                    r.train[i]
                };
                format!("  ratio to {ref_name} {:.2}", values[i] / base)
            });
            println!(
                "{name:<12} {what:<10} batch {batch:>4}  {:>12.0} images/s{ratio}",
                values[i]
            );
        }
    }
}

/// The CPU measurement in a pool of `threads`.
fn on_cores(threads: usize) -> Result<Rates, BlobError> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("a thread pool")
        .install(|| measure(|_| Ok(())))
}

#[cfg(feature = "cuda")]
fn gpu(cpu: &Rates) -> Result<(), BlobError> {
    let backend = match blobflow::runtime::cuda::CudaBackend::new(0) {
        Ok(b) => b,
        Err(e) => {
            no_gpu::no_gpu(e);
            return Ok(());
        }
    };
    println!(
        "device: {}  |  convolutions: {}",
        backend.gpu().name(),
        blobflow::layers::gpu_convolution_path()
    );
    let device: std::sync::Arc<dyn blobflow::runtime::DeviceBackend> = backend;
    let rates = measure(|n| n.to_device(device.clone()))?;
    print("gpu", &rates, Some(("cpu", cpu)));
    // TF32 convolutions, as Caffe and PyTorch run cuDNN by default.
    let tf32 = measure(|n| {
        n.to_device(device.clone())?;
        n.allow_tf32(true);
        Ok(())
    })?;
    print("gpu tf32", &tf32, Some(("gpu", &rates)));
    Ok(())
}

#[cfg(not(feature = "cuda"))]
fn gpu(_cpu: &Rates) -> Result<(), BlobError> {
    println!("gpu: not built (cargo bench --features cuda --bench lenet)");
    Ok(())
}

/// Each rate as GFLOP/s and as a fraction of the FMA peak of `cores`.
fn print_flops(name: &str, rates: &Rates, cores: usize) {
    let peak = blobflow::kernels::cpu::fma_peak(cores);
    println!("{name}: measured peak {peak}");
    let peak = peak.gflops;
    for (what, values, flops) in [
        ("forward", &rates.forward, FORWARD_FLOPS),
        ("train step", &rates.train, TRAIN_FLOPS),
    ] {
        for (i, batch) in BATCHES.iter().enumerate() {
            let achieved = values[i] * flops / 1e9;
            println!(
                "{name:<12} {what:<10} batch {batch:>4}  {achieved:>8.1} GFLOP/s  {:>3.0}% of peak",
                100.0 * achieved / peak
            );
        }
    }
}

fn main() -> Result<(), BlobError> {
    let cores = rayon::current_num_threads();
    let all = on_cores(cores)?;
    let one = on_cores(1)?;
    print(&format!("cpu, {cores} cores"), &all, Some(("1 core", &one)));
    print("cpu, 1 core", &one, None);
    print_flops(&format!("cpu, {cores} cores"), &all, cores);
    print_flops("cpu, 1 core", &one, 1);
    gpu(&all)
}
