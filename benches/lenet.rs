//! LeNet throughput in images/s: the forward pass and a training step
//! (forward, backward and Caffe's SGD update: momentum 0.9, weight decay
//! 5e-4) at batch 64 and 1000, weights from Caffe's fillers.
//!
//! The CPU runs on every core, then on one in the same run: the ratio is
//! what the cores add. Built with `--features cuda`, it runs the same net
//! on GPU 0 too and prints the ratio to the CPU; with `--features cudnn`
//! also with TF32 convolutions (`gpu tf32`, PyTorch's default for
//! convolutions); `scripts/lenet_torch.py` runs the same net in PyTorch on
//! the same machine for a peer figure.
//!
//! Run: `cargo bench --bench lenet` (GPU: `cargo bench --features cuda
//! --bench lenet`).

use blobflow::BlobError;
use blobflow::layers::lenet::{LeNet, PARAM_SPECS};
use blobflow::layers::solver::SgdSolver;

#[cfg(feature = "cuda")]
#[path = "support/no_gpu.rs"]
mod no_gpu;
#[path = "support/repetitions.rs"]
mod repetitions;

const BATCHES: [usize; 2] = [64, 1000];

/// Forward and training-step images/s at each of [`BATCHES`].
#[derive(Clone, Copy, Debug, Default)]
struct Rates {
    forward: [f64; 2],
    train: [f64; 2],
}

/// A net of `batch` with Caffe's fillers and a fixed batch of digits.
fn net(batch: usize) -> Result<(LeNet, Vec<u8>), BlobError> {
    let mut net = LeNet::new(batch)?;
    net.init_fillers()?;
    let mut state = 1701u32;
    for v in net.input().mutable_cpu_data()?.iter_mut() {
        state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        *v = (state >> 8) as f32 / (1u32 << 24) as f32;
    }
    let labels = (0..batch).map(|i| (i % 10) as u8).collect();
    Ok((net, labels))
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
fn measure(prepare: impl Fn(&mut LeNet) -> Result<(), BlobError>) -> Result<Rates, BlobError> {
    let mut rates = Rates::default();
    for (i, &batch) in BATCHES.iter().enumerate() {
        let (mut n, labels) = net(batch)?;
        prepare(&mut n)?;
        let n = std::cell::RefCell::new(n);
        let finish = || n.borrow().prob().cpu_data().map(drop);
        rates.forward[i] = rate(batch, || n.borrow_mut().forward(), finish)?;
        let mut solver = SgdSolver::lenet();
        let train = || {
            let mut n = n.borrow_mut();
            // The loss is not read: PyTorch's peer step does not read
            // its loss either; `finish` waits for the work at the end.
            n.backprop(&labels)?;
            solver.step(&n.params(), &PARAM_SPECS)
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
    #[cfg(feature = "cudnn")]
    {
        let rates = measure(|n| {
            n.conv1.allow_tf32 = true;
            n.conv2.allow_tf32 = true;
            n.to_device(device.clone())
        })?;
        print("gpu tf32", &rates, Some(("cpu", cpu)));
    }
    Ok(())
}

#[cfg(not(feature = "cuda"))]
fn gpu(_cpu: &Rates) -> Result<(), BlobError> {
    println!("gpu: not built (cargo bench --features cuda --bench lenet)");
    Ok(())
}

fn main() -> Result<(), BlobError> {
    let cores = rayon::current_num_threads();
    let all = on_cores(cores)?;
    let one = on_cores(1)?;
    print(&format!("cpu, {cores} cores"), &all, Some(("1 core", &one)));
    print("cpu, 1 core", &one, None);
    gpu(&all)
}
