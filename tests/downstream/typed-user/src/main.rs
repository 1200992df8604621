//! A user's program: a typed layer of its own (`Gain<C>`, a learned
//! gain per channel) in a 20-layer typed net (cifar10_quick's trunk, an
//! inception block, a residual block), trained a few steps on a
//! synthetic batch. It prints the loss before and after, and exits
//! non-zero if training did not lower it. `--time` instead prints the
//! forward and forward + backward milliseconds of a pass at batch 100,
//! for `benches/debug_build.py`, which also times this crate's rebuild
//! after a one-line edit.

mod gain;

use blobflow::layers::net::NetState;
use blobflow::layers::solver::{LrPolicy, SgdSolver};
use blobflow::layers::typed_net::*;
use blobflow::{BlobError, blob};
use std::time::Instant;

blob!(pub shape Images = _, 3, 32, 32);
blob!(pub shape Classes = _);

/// The net: 20 layers.
fn declare() -> NetSpec<f32> {
    let xavier = Filler::xavier;
    let mut n = NetSpec::<f32>::new("typed-user");
    let data = n.input::<Images>("data");
    let label = n.input::<Classes>("label");
    let x = n.add(
        "conv1",
        &data,
        Conv::<32, 5, 1, 2>::new().weight_filler(xavier()),
    );
    let x = n.add("pool1", &x, Pool::<3, 2>::max());
    let x = n.add("relu1", x, Neuron::relu());
    let x = n.add(
        "conv2",
        &x,
        Conv::<32, 5, 1, 2>::new().weight_filler(xavier()),
    );
    let x = n.add("relu2", x, Neuron::relu());
    let x = n.add("pool2", &x, Pool::<3, 2>::ave());
    // An inception block: a 1x1 and a 3x3 branch, joined on channels.
    let a = n.add(
        "incep_1x1",
        &x,
        Conv::<16, 1>::new().weight_filler(xavier()),
    );
    let b = n.add(
        "incep_3x3",
        &x,
        Conv::<16, 3, 1, 1>::new().weight_filler(xavier()),
    );
    let x = n.add("incep_join", (&a, &b), Concat);
    let x = n.add("incep_relu", x, Neuron::relu());
    // A residual block: two 3x3 convolutions added to their input.
    let r = n.add(
        "res_a",
        &x,
        Conv::<32, 3, 1, 1>::new().weight_filler(xavier()),
    );
    let r = n.add("res_a_relu", r, Neuron::relu());
    let r = n.add(
        "res_b",
        &r,
        Conv::<32, 3, 1, 1>::new().weight_filler(xavier()),
    );
    let x = n.add("res_sum", (&x, &r), Eltwise::sum());
    let x = n.add("pool3", &x, Pool::<3, 2>::ave());
    let x = n.add("ip1", &x, Fc::<64>::new().weight_filler(xavier()));
    let x = n.add_typed("gain", &x, gain::Gain::<64>);
    let x = n.add("relu_ip1", x, Neuron::relu());
    let scores = n.add("ip2", &x, Fc::<10>::new().weight_filler(xavier()));
    let _loss = n.add("loss", (&scores, &label), SoftmaxLoss::new());
    n
}

/// Milliseconds of a forward pass and of a forward + backward pass at
/// batch 100, the mean of 5 after one untimed.
fn time() -> Result<(), BlobError> {
    let mut spec = declare();
    let mut net = spec.batch(100).build(NetState::train())?;
    net.forward()?;
    let passes = 5;
    let t = Instant::now();
    for _ in 0..passes {
        net.forward()?;
    }
    let forward = t.elapsed().as_secs_f64() / passes as f64;
    let t = Instant::now();
    for _ in 0..passes {
        net.forward()?;
        net.backward()?;
    }
    let both = t.elapsed().as_secs_f64() / passes as f64;
    println!("{:.2} {:.2}", forward * 1e3, both * 1e3);
    Ok(())
}

fn main() -> Result<(), BlobError> {
    if std::env::args().any(|a| a == "--time") {
        return time();
    }
    // Caffe's fillers draw from one generator: seeded, the same run.
    blobflow::kernels::cpu::set_seed(1);
    let mut spec = declare();
    let mut net = spec.batch(8).build(NetState::train())?;
    for (i, v) in net
        .blob("data")
        .expect("declared")
        .mutable_cpu_data()?
        .iter_mut()
        .enumerate()
    {
        *v = ((i % 97) as f32 / 48.0 - 1.0) * if (i / 3072) % 2 == 0 { 1.0 } else { -1.0 };
    }
    for (i, l) in net
        .blob("label")
        .expect("declared")
        .mutable_cpu_data()?
        .iter_mut()
        .enumerate()
    {
        *l = (i % 2) as f32;
    }
    let mut solver = SgdSolver::new(0.01, LrPolicy::Fixed);
    let first = net.forward()?;
    for _ in 0..10 {
        net.clear_param_diffs()?;
        net.forward()?;
        net.backward()?;
        solver.step(&net.param_blobs(), &net.param_specs())?;
    }
    let last = net.forward()?;
    println!("loss {first:.4} -> {last:.4} after 10 steps");
    if last >= first {
        return Err(BlobError::InvalidParameter {
            op: "train the typed user net",
            detail: format!("the loss rose from {first} to {last}"),
        });
    }
    Ok(())
}
