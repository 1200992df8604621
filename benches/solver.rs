//! One solver step over LeNet's 431,080 parameters, for each of Caffe's
//! solver types: steps/s, the bytes a step reads and writes per second,
//! and the ratio to SGD measured in the same run (the machines are
//! shared; only ratios compare across runs). Built with `--features
//! cuda`, the same steps run on GPU 0 too, with the ratio to the CPU.
//!
//! Run: `cargo bench --bench solver` (`SOLVER=Adam` for one type; GPU:
//! `cargo bench --features cuda --bench solver`).

use blobflow::BlobError;
use blobflow::layers::net::Net;
use blobflow::layers::solver::{LrPolicy, SgdSolver, SolverType};

#[cfg(feature = "cuda")]
#[path = "support/no_gpu.rs"]
mod no_gpu;
#[path = "support/repetitions.rs"]
mod repetitions;

/// Each type with a momentum it takes, and its history blobs per
/// parameter.
fn cases() -> Vec<(&'static str, SgdSolver, usize)> {
    let solver = |t: SolverType, momentum: f32| {
        SgdSolver::new(0.01, LrPolicy::Fixed)
            .with_type(t)
            .with_momentum(momentum)
            .with_weight_decay(5e-4)
    };
    let only = std::env::var("SOLVER").ok();
    [
        ("SGD", solver(SolverType::Sgd, 0.9), 1),
        ("Nesterov", solver(SolverType::Nesterov, 0.9), 1),
        ("AdaGrad", solver(SolverType::ADAGRAD, 0.0), 1),
        ("RMSProp", solver(SolverType::RMSPROP, 0.0), 1),
        ("AdaDelta", solver(SolverType::ADADELTA, 0.95), 2),
        ("Adam", solver(SolverType::ADAM, 0.9), 2),
    ]
    .into_iter()
    .filter(|(name, _, _)| only.as_deref().is_none_or(|o| o == *name))
    .collect()
}

/// LeNet with Caffe's fillers and a small gradient in every diff. Each
/// step writes its update into the diffs, which the next step takes as
/// its gradient (they stay small), so no host work sits between steps.
fn net() -> Result<Net<f32>, BlobError> {
    let net = blobflow_mnist::Trainer::new(1, 1, 1701)?.net;
    for p in net.param_blobs() {
        p.mutable_cpu_diff()?.fill(1e-3);
    }
    Ok(net)
}

/// Steps/s of `solver` on `net`'s parameters; each run ends with a read
/// of a parameter, which waits for a device.
fn steps_per_second(net: &Net<f32>, mut solver: SgdSolver) -> Result<f64, BlobError> {
    let params = net.param_blobs();
    let specs = net.param_specs();
    repetitions::per_second(
        || solver.step(&params, &specs),
        || params[0].cpu_data().map(drop),
    )
}

/// Measures every case on `net` and prints a row each, with ratios to
/// SGD and, where given, to `reference` (steps/s by name).
fn run(
    place: &str,
    net: &Net<f32>,
    reference: Option<&[(&str, f64)]>,
) -> Result<Vec<(&'static str, f64)>, BlobError> {
    let count: usize = net.param_blobs().iter().map(|p| p.count()).sum();
    let mut rates = Vec::new();
    for (name, solver, histories) in cases() {
        let rate = steps_per_second(net, solver)?;
        let sgd = rates.first().map_or(rate, |&(_, r)| r);
        // Data and diff, and each history blob, read and written.
        let bytes = (count * 4 * 2 * (2 + histories)) as f64;
        let against = reference
            .and_then(|r| r.iter().find(|(n, _)| *n == name))
            .map_or(String::new(), |(_, r)| {
                format!("  ratio to cpu {:.2}", rate / r)
            });
        println!(
            "{place:<4} {name:<9} {rate:>8.0} steps/s  {:>6.1} GB/s  ratio to SGD {:.2}{against}",
            rate * bytes / 1e9,
            rate / sgd
        );
        rates.push((name, rate));
    }
    Ok(rates)
}

#[cfg(feature = "cuda")]
fn gpu(cpu: &[(&str, f64)]) -> Result<(), BlobError> {
    let backend = match blobflow::runtime::cuda::CudaBackend::new(0) {
        Ok(b) => b,
        Err(e) => {
            no_gpu::no_gpu(e);
            return Ok(());
        }
    };
    println!("device: {}", backend.gpu().name());
    let mut net = net()?;
    net.to_device(backend)?;
    run("gpu", &net, Some(cpu)).map(drop)
}

#[cfg(not(feature = "cuda"))]
fn gpu(_cpu: &[(&str, f64)]) -> Result<(), BlobError> {
    println!("gpu: not built (cargo bench --features cuda --bench solver)");
    Ok(())
}

fn main() -> Result<(), BlobError> {
    let net = net()?;
    let count: usize = net.param_blobs().iter().map(|p| p.count()).sum();
    println!("{count} parameters, f32");
    let cpu = run("cpu", &net, None)?;
    gpu(&cpu)
}
