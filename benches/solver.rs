//! One solver step over LeNet's 431,080 parameters, for each of Caffe's
//! solver types, on the CPU: steps/s, the bytes a step reads and writes
//! per second, and the ratio to SGD measured in the same run (the
//! machines are shared; only ratios compare across runs).
//!
//! Run: `cargo bench --bench solver` (`SOLVER=Adam` for one type).

use std::time::{Duration, Instant};

use blobflow::BlobError;
use blobflow::layers::lenet::{LeNet, PARAM_SPECS};
use blobflow::layers::solver::{LrPolicy, SgdSolver, SolverType};

/// Steps/s of `solver` on `net`'s parameters: repetitions for at least
/// 0.3 s after two warm-up steps, best of three runs.
fn steps_per_second(net: &LeNet, mut solver: SgdSolver) -> Result<f64, BlobError> {
    let params = net.params();
    let mut step = || -> Result<(), BlobError> {
        // A fresh gradient each step, as a backward pass leaves one.
        for p in &params {
            p.mutable_cpu_diff()?.fill(1e-3);
        }
        solver.step(&params, &PARAM_SPECS)
    };
    step()?;
    step()?;
    let mut best = 0f64;
    for _ in 0..3 {
        let t = Instant::now();
        let mut reps = 0u32;
        while reps < 3 || t.elapsed() < Duration::from_millis(300) {
            step()?;
            reps += 1;
        }
        best = best.max(f64::from(reps) / t.elapsed().as_secs_f64());
    }
    Ok(best)
}

fn main() -> Result<(), BlobError> {
    let mut net = LeNet::new(1)?;
    net.init_fillers()?;
    let count: usize = net.params().iter().map(|p| p.count()).sum();
    let solver = |t: SolverType, momentum: f32| {
        SgdSolver::new(0.01, LrPolicy::Fixed)
            .with_type(t)
            .with_momentum(momentum)
            .with_weight_decay(5e-4)
    };
    // Data and diff read and written, each history blob read and
    // written; the gradient's fill is counted too (one write).
    let cases = [
        ("SGD", solver(SolverType::Sgd, 0.9), 1),
        ("Nesterov", solver(SolverType::Nesterov, 0.9), 1),
        ("AdaGrad", solver(SolverType::ADAGRAD, 0.0), 1),
        ("RMSProp", solver(SolverType::RMSPROP, 0.0), 1),
        ("AdaDelta", solver(SolverType::ADADELTA, 0.95), 2),
        ("Adam", solver(SolverType::ADAM, 0.9), 2),
    ];
    println!("{count} parameters, f32, on the CPU");
    let mut sgd = None;
    let only = std::env::var("SOLVER").ok();
    for (name, s, histories) in cases {
        if only.as_deref().is_some_and(|o| o != name) {
            continue;
        }
        let rate = steps_per_second(&net, s)?;
        let base = *sgd.get_or_insert(rate);
        let bytes = (count * 4 * (5 + 2 * histories)) as f64;
        println!(
            "{name:<9} {rate:>8.0} steps/s  {:>6.1} GB/s  ratio to SGD {:.2}",
            rate * bytes / 1e9,
            rate / base
        );
    }
    Ok(())
}
