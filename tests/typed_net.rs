//! Typed nets declared in Rust build the same `Net` as Caffe's prototxts:
//! LeNet with Caffe's trained weights classifies the shipped digits as
//! the prototxt does, bit for bit; cifar10_quick, declared typed with a
//! PReLU, trains with Caffe's solver and survives a save and load; the
//! mistakes only a run can see are errors naming the layer or blob.

use blobflow::CaffeModel;
use blobflow::layers::net::{Net, NetState, Phase};
use blobflow::layers::solver::SgdSolver;
use blobflow::layers::typed_net::*;
use blobflow::prelude::*;

#[path = "support/digits.rs"]
mod digits;
#[path = "../examples/typed_net/slope.rs"]
mod slope;

use digits::{digits, root};

blob!(pub shape Digits = _, 1, 28, 28);
blob!(pub shape Images = _, 3, 32, 32);
blob!(pub shape Classes = _);

/// Caffe's `lenet.prototxt` (deploy), declared typed: the same layer and
/// blob names, so a `.caffemodel` loads by name.
fn lenet(batch: usize) -> (NetSpec<f32>, Top<f32, (Dyn, D<10>)>) {
    let mut n = NetSpec::<f32>::new("LeNet");
    let data = n.input::<Digits>("data");
    let x = n.add("conv1", &data, Conv::<20, 5>::new());
    let x = n.add("pool1", &x, Pool::<2, 2>::max());
    let x = n.add("conv2", &x, Conv::<50, 5>::new());
    let x = n.add("pool2", &x, Pool::<2, 2>::max());
    let x = n.add("ip1", &x, Fc::<500>::new());
    let x = n.add("relu1", x, Neuron::relu());
    let x = n.add("ip2", &x, Fc::<10>::new());
    let prob = n.add("prob", &x, Prob);
    n.batch(batch);
    (n, prob)
}

#[test]
fn typed_lenet_gives_the_prototxts_probabilities_bit_for_bit() {
    let model = CaffeModel::open(root().join("models/lenet/lenet_iter_10000.caffemodel")).unwrap();
    let batch = 100;
    let (spec, prob) = lenet(batch);
    let mut typed = spec.build(NetState::test()).unwrap();
    let report = typed.copy_from(&model).unwrap();
    assert_eq!(report.copied, ["conv1", "conv2", "ip1", "ip2"]);
    let mut from_file = Net::<f32>::builder()
        .input_shape("data", &[batch, 1, 28, 28])
        .from_file(root().join("models/lenet/lenet.prototxt"))
        .unwrap();
    from_file.copy_from(&model).unwrap();
    // In place as the prototxt: relu1 writes over ip1.
    assert_eq!(typed.layer_tops("relu1").unwrap(), ["ip1"]);
    assert_eq!(typed.blob_names(), from_file.blob_names());

    let data = digits();
    let mut wrong = Vec::new();
    for start in (0..1000).step_by(batch) {
        for net in [&mut typed, &mut from_file] {
            data.scaled_into(
                start,
                0.00390625,
                &mut net.blob("data").unwrap().mutable_cpu_data().unwrap(),
            );
            net.forward().unwrap();
        }
        let got = prob.blob(&typed).unwrap().to_vec().unwrap();
        assert_eq!(got, from_file.blob("prob").unwrap().to_vec().unwrap());
        for (j, row) in got.chunks_exact(10).enumerate() {
            let best = (0..10).fold(0, |b, c| if row[c] > row[b] { c } else { b });
            if best != usize::from(data.labels[start + j]) {
                wrong.push(start + j);
            }
        }
    }
    // The digits the shipped model misses (tests/lenet.rs).
    assert_eq!(wrong, [435, 939]);
}

/// cifar10_quick (Caffe's `examples/cifar10`), with a PReLU where Caffe
/// has relu1, declared in the lines a user writes.
fn cifar10_quick(batch: usize) -> NetSpec<f32> {
    let (w, b) = (Mult::new(1.0, 1.0), Mult::new(2.0, 0.0));
    let conv_filler = |std| Filler::gaussian(0.0, std);
    let mut n = NetSpec::<f32>::new("CIFAR10_quick");
    let data = n.input::<Images>("data");
    let label = n.input::<Classes>("label");
    let conv = Conv::<32, 5, 1, 2>::new().mults(w, b);
    let x = n.add("conv1", &data, conv.weight_filler(conv_filler(1e-4)));
    let x = n.add("pool1", &x, Pool::<3, 2>::max());
    let x = n.add("prelu1", x, PReLU::new());
    let x = n.add(
        "conv2",
        &x,
        Conv::<32, 5, 1, 2>::new().weight_filler(conv_filler(0.01)),
    );
    let x = n.add("relu2", x, Neuron::relu());
    let x = n.add("pool2", &x, Pool::<3, 2>::ave());
    let x = n.add(
        "conv3",
        &x,
        Conv::<64, 5, 1, 2>::new().weight_filler(conv_filler(0.01)),
    );
    let x = n.add("relu3", x, Neuron::relu());
    let x = n.add("pool3", &x, Pool::<3, 2>::ave());
    let ip = Fc::<64>::new().mults(w, b);
    let x = n.add("ip1", &x, ip.weight_filler(Filler::gaussian(0.0, 0.1)));
    let ip = Fc::<10>::new().mults(w, b);
    let scores = n.add("ip2", &x, ip.weight_filler(Filler::gaussian(0.0, 0.1)));
    let _accuracy = n.add_in(Phase::Test, "accuracy", (&scores, &label), Accuracy::top(1));
    let _loss = n.add("loss", (&scores, &label), SoftmaxLoss::new());
    n.batch(batch);
    n
}

/// Two classes of 3 x 32 x 32 images a net can tell apart: bright on top
/// or bright below, with noise.
fn feed_halves(net: &Net<f32>, step: usize) {
    let batch = net.blob("label").unwrap().count();
    let mut images = net.blob("data").unwrap().mutable_cpu_data().unwrap();
    let mut labels = net.blob("label").unwrap().mutable_cpu_data().unwrap();
    let mut state = (step as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    for (j, image) in images.chunks_exact_mut(3 * 32 * 32).enumerate() {
        let class = (step + j) % 2;
        labels[j] = class as f32;
        for (i, v) in image.iter_mut().enumerate() {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let noise = (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
            let top = (i % 1024) < 512;
            *v = if top == (class == 0) { 1.0 } else { 0.0 } + noise;
        }
    }
    assert_eq!(batch, labels.len());
}

/// 60 steps of SGD (rate 0.01, momentum 0.9) on [`feed_halves`]: the
/// mean loss of the first 10 steps and of the last 10.
fn train_on_halves(net: &mut Net<f32>) -> (f32, f32) {
    let mut solver = SgdSolver::lenet();
    solver.base_lr = 0.01;
    let mut losses = Vec::new();
    for step in 0..60 {
        feed_halves(net, step);
        net.clear_param_diffs().unwrap();
        losses.push(net.forward().unwrap());
        net.backward().unwrap();
        solver.step(&net.param_blobs(), &net.param_specs()).unwrap();
    }
    let mean = |l: &[f32]| l.iter().sum::<f32>() / l.len() as f32;
    (mean(&losses[..10]), mean(&losses[50..]))
}

#[test]
fn typed_cifar10_quick_with_a_prelu_trains_and_round_trips_its_weights() {
    blobflow::kernels::cpu::set_seed(1701);
    let spec = cifar10_quick(8);
    let mut net = spec.build(NetState::train()).unwrap();
    // The layers of the train net: accuracy is the test net's.
    let layers: Vec<&str> = net.layer_names().collect();
    assert!(!layers.contains(&"accuracy"), "{layers:?}");
    assert_eq!(net.blob("pool3").unwrap().shape(), [8, 64, 4, 4]);
    assert_eq!(net.layer_blobs("prelu1").unwrap()[0].shape(), [32]);
    // The mults declared beside conv1 and ip1/ip2 reach the solver; the
    // PReLU slope and conv2/conv3 take Caffe's defaults.
    let lr: Vec<f32> = net.param_specs().iter().map(|s| s.lr_mult).collect();
    assert_eq!(lr, [1.0, 2.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 2.0, 1.0, 2.0]);

    let (first, last) = train_on_halves(&mut net);
    assert!(last < 0.5 * first, "loss {first} -> {last}");

    // The test net, its weights from a save and load of the train net's.
    let model = CaffeModel::from_bytes(&net.to_model().unwrap().to_bytes().unwrap()).unwrap();
    let mut test = spec.build(NetState::test()).unwrap();
    test.copy_from(&model).unwrap();
    let mut right = 0.0;
    for step in 100..110 {
        feed_halves(&test, step);
        test.forward().unwrap();
        right += test.blob("accuracy").unwrap().cpu_data().unwrap()[0];
    }
    assert!(right / 10.0 > 0.9, "test accuracy {}", right / 10.0);
    // The weights came back bit for bit.
    for (trained, loaded) in net.param_blobs().iter().zip(test.param_blobs()) {
        assert_eq!(trained.to_vec().unwrap(), loaded.to_vec().unwrap());
    }
    feed_halves(&net, 200);
    feed_halves(&test, 200);
    net.forward().unwrap();
    test.forward().unwrap();
    // The test net's 5x5 layers go through Winograd's F(4x4, 5x5), the
    // train net's through im2col (TRAIN keeps Caffe's sums for them):
    // the same outputs to within F(4x4, 5x5)'s rounding, 1e-5 of their
    // largest.
    let (trained, tested) = (
        net.blob("ip2").unwrap().to_vec().unwrap(),
        test.blob("ip2").unwrap().to_vec().unwrap(),
    );
    let scale = trained.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    for (a, b) in trained.iter().zip(&tested) {
        assert!(
            (a - b).abs() <= 1e-5 * scale,
            "ip2 {a} (train) against {b} (test)"
        );
    }
}

#[test]
fn a_typed_net_takes_another_batch_at_run_time() {
    let (spec, prob) = lenet(2);
    let mut net = spec.build(NetState::test()).unwrap();
    net.blob_mut("data")
        .unwrap()
        .reshape(&[5, 1, 28, 28])
        .unwrap();
    net.reshape().unwrap();
    net.forward().unwrap();
    assert_eq!(prob.blob(&net).unwrap().shape(), [5, 10]);
}

#[test]
fn a_read_blob_is_not_overwritten_in_place() {
    blob!(pub shape Row = _, 4);
    let mut n = NetSpec::<f32>::new("fan-out");
    let x = n.input::<Row>("x");
    let shortcut = x.clone();
    let relu = n.add("relu", x, Neuron::relu());
    let sum = n.add("sum", (&shortcut, &relu), Eltwise::sum());
    let net = n.batch(1).build(NetState::test()).unwrap();
    assert_eq!(relu.name(), "relu");
    net.blob("x")
        .unwrap()
        .mutable_cpu_data()
        .unwrap()
        .copy_from_slice(&[-1.0, 2.0, -3.0, 4.0]);
    let mut net = net;
    net.forward().unwrap();
    // x + relu(x), x unchanged by the ReLU.
    assert_eq!(
        sum.blob(&net).unwrap().to_vec().unwrap(),
        [-1.0, 4.0, -3.0, 8.0]
    );
}

#[test]
fn what_only_a_run_can_see_is_an_error_naming_it() {
    blob!(pub shape Row = _, 4);
    let message = |spec: &NetSpec<f32>| spec.build(NetState::test()).err().unwrap().to_string();

    let mut twice = NetSpec::<f32>::new("twice");
    let x = twice.input::<Row>("x");
    let _ = twice.add("a", &x, Neuron::relu());
    let _ = twice.add("a", &x, Neuron::sigmoid());
    twice.batch(1);
    let err = message(&twice);
    assert!(
        err.contains("layer 'a'") && err.contains("declared already"),
        "{err}"
    );

    let mut other = NetSpec::<f32>::new("other");
    let foreign = other.input::<Row>("y");
    let mut n = NetSpec::<f32>::new("n");
    n.input::<Row>("x");
    let _ = n.add("relu", &foreign, Neuron::relu());
    n.batch(1);
    let err = message(&n);
    assert!(err.contains("'y' is a handle of another NetSpec"), "{err}");

    let mut unbatched = NetSpec::<f32>::new("unbatched");
    unbatched.input::<Row>("x");
    let err = message(&unbatched);
    assert!(
        err.contains("input 'x'") && err.contains("NetSpec::batch"),
        "{err}"
    );

    // A layer the registry does not know is Net's own error.
    struct Unknown;
    impl LayerFields for Unknown {
        fn type_name(&self) -> &str {
            "NoSuchLayer"
        }
        fn write_fields(&self, _: &mut String) {}
    }
    impl<X: blobflow::typed::Shape> LayerSpec<One<X>> for Unknown {
        type Out = X;
    }
    let mut n = NetSpec::<f32>::new("n");
    let x = n.input::<Row>("x");
    let _ = n.add("mine", &x, Unknown);
    let err = message(n.batch(1));
    assert!(err.contains("Unknown layer type: NoSuchLayer"), "{err}");
}

#[test]
fn names_with_quotes_survive_the_text() {
    blob!(pub shape Row = _, 2);
    let mut n = NetSpec::<f32>::new("q\"uo\\te");
    let x = n.input::<Row>("in \"x\"");
    let y = n.add("re\"lu", &x, Neuron::relu());
    let net = n.batch(3).build(NetState::test()).unwrap();
    assert_eq!(net.name(), "q\"uo\\te");
    assert_eq!(y.blob(&net).unwrap().shape(), [3, 2]);
    assert!(net.blob("in \"x\"").is_some());
}

/// The net of `n` at `batch`, run forward on `values` in its input "x".
fn forward_on(n: &mut NetSpec<f32>, batch: usize, values: &[f32]) -> Net<f32> {
    let mut net = n.batch(batch).build(NetState::test()).unwrap();
    net.blob("x")
        .unwrap()
        .mutable_cpu_data()
        .unwrap()
        .copy_from_slice(values);
    net.forward().unwrap();
    net
}

#[test]
fn a_slice_and_a_concat_give_the_blob_back() {
    blob!(pub shape Maps = _, 5, 2, 2);
    let mut n = NetSpec::<f32>::new("slice");
    let x = n.input::<Maps>("x");
    let (a, b) = n.slice::<2, _>("split", &x, ["first", "rest"]);
    let a: Top<f32, (Dyn, D<2>, D<2>, D<2>)> = a;
    let b: Top<f32, (Dyn, D<3>, D<2>, D<2>)> = b;
    let joined: Top<f32, Maps> = n.add("join", (&a, &b), Concat).named();
    let values: Vec<f32> = (0..40).map(|v| v as f32).collect();
    let net = forward_on(&mut n, 2, &values);
    assert_eq!(a.blob(&net).unwrap().to_vec().unwrap()[..8], values[..8]);
    assert_eq!(b.blob(&net).unwrap().to_vec().unwrap()[..12], values[8..20]);
    assert_eq!(joined.blob(&net).unwrap().to_vec().unwrap(), values);
    assert_eq!(net.layer_tops("split").unwrap(), ["first", "rest"]);
}

/// VGG16's classifier: fc6 reads (N, 512, 7, 7), K = 25088, above the
/// 4096 of compile-time dim arithmetic; the output shape needs no K.
#[test]
fn vgg_fc6_is_typed_above_4096() {
    blob!(pub shape Pool5 = _, 512, 7, 7);
    let mut n = NetSpec::<f32>::new("VGG16 head");
    let x = n.input::<Pool5>("pool5");
    let x = n.add(
        "fc6",
        &x,
        Fc::<4096>::new().weight_filler(Filler::gaussian(0.0, 0.005)),
    );
    let x = n.add("relu6", x, Neuron::relu());
    let x = n.add("drop6", x, Neuron::dropout(0.5));
    let x = n.add(
        "fc7",
        &x,
        Fc::<4096>::new().weight_filler(Filler::gaussian(0.0, 0.005)),
    );
    let x = n.add("relu7", x, Neuron::relu());
    let scores: Top<f32, (Dyn, D<1000>)> = n.add("fc8", &x, Fc::<1000>::new());
    let mut net = n.batch(1).build(NetState::test()).unwrap();
    assert_eq!(net.layer_blobs("fc6").unwrap()[0].shape(), [4096, 25088]);
    net.forward().unwrap();
    assert_eq!(scores.blob(&net).unwrap().shape(), [1, 1000]);
}

/// Caffe's cifar10_full: LRN within channels after the first two
/// poolings, the last layer's weights decayed 250 times harder.
#[test]
fn typed_cifar10_full_trains() {
    blobflow::kernels::cpu::set_seed(11);
    let g = |std| Filler::gaussian(0.0, std);
    let lrn = || LRN::within_channel(3, 5e-5, 0.75);
    let mut n = NetSpec::<f32>::new("CIFAR10_full");
    let data = n.input::<Images>("data");
    let label = n.input::<Classes>("label");
    let x = n.add(
        "conv1",
        &data,
        Conv::<32, 5, 1, 2>::new().weight_filler(g(1e-4)),
    );
    let x = n.add("pool1", &x, Pool::<3, 2>::max());
    let x = n.add("relu1", x, Neuron::relu());
    let x = n.add("norm1", &x, lrn());
    let x = n.add(
        "conv2",
        &x,
        Conv::<32, 5, 1, 2>::new().weight_filler(g(0.01)),
    );
    let x = n.add("relu2", x, Neuron::relu());
    let x = n.add("pool2", &x, Pool::<3, 2>::ave());
    let x = n.add("norm2", &x, lrn());
    let x = n.add(
        "conv3",
        &x,
        Conv::<64, 5, 1, 2>::new().weight_filler(g(0.01)),
    );
    let x = n.add("relu3", x, Neuron::relu());
    let x = n.add("pool3", &x, Pool::<3, 2>::ave());
    let fc = Fc::<10>::new().mults(Mult::new(1.0, 250.0), Mult::new(2.0, 0.0));
    let scores = n.add("ip1", &x, fc.weight_filler(g(0.01)));
    let _loss = n.add("loss", (&scores, &label), SoftmaxLoss::new());
    let mut net = n.batch(8).build(NetState::train()).unwrap();
    assert_eq!(net.layer_type("norm1"), Some("LRN"));
    let decay: Vec<f32> = net.param_specs().iter().map(|s| s.decay_mult).collect();
    assert_eq!(decay[6..], [250.0, 0.0]);
    let (first, last) = train_on_halves(&mut net);
    assert!(last < 0.5 * first, "loss {first} -> {last}");
}

/// Rectangular kernels, strides, pads and dilations per axis: the run-time layer
/// computes the shape the type says.
#[test]
fn rectangular_convolutions_have_the_typed_shapes() {
    blob!(pub shape Grid = _, 8, 17, 17);
    let mut n = NetSpec::<f32>::new("factorized");
    let x = n.input::<Grid>("x");
    let y: Top<f32, (Dyn, D<4>, D<17>, D<17>)> =
        n.add("1x7", &x, ConvHW::<4, 1, 7, 1, 1, 0, 3>::new());
    let z: Top<f32, (Dyn, D<6>, D<9>, D<17>)> =
        n.add("3x1/2", &y, ConvHW::<6, 3, 1, 2, 1, 1, 0>::new().group(2));
    let atrous: Top<f32, (Dyn, D<3>, D<13>, D<17>)> =
        n.add("atrous", &y, ConvHW::<3, 3, 3, 1, 1, 0, 2, 2, 2>::new());
    let mut net = n.batch(2).build(NetState::test()).unwrap();
    net.forward().unwrap();
    assert_eq!(atrous.blob(&net).unwrap().shape(), [2, 3, 13, 17]);
    assert_eq!(y.blob(&net).unwrap().shape(), [2, 4, 17, 17]);
    assert_eq!(z.blob(&net).unwrap().shape(), [2, 6, 9, 17]);
    assert_eq!(net.layer_blobs("3x1/2").unwrap()[0].shape(), [6, 2, 3, 1]);
}

/// The `typed_net` example's own layer: held to central differences,
/// declared in a typed net, built through the registry, and learning.
#[test]
fn a_users_layer_in_a_typed_net_checks_builds_and_learns() {
    use blobflow::layers::check::GradientChecker;
    use blobflow::layers::registry::LayerRegistry;
    let x = blobflow::Blob::<f32>::new(&[2, 3, 2, 2]).unwrap();
    for (i, v) in x.mutable_cpu_data().unwrap().iter_mut().enumerate() {
        *v = (i as f32 - 11.5) / 4.0;
    }
    let report = GradientChecker::default()
        .check(&mut slope::ChannelSlope::new(), &[x])
        .unwrap();
    assert_eq!(report.checked, 24 + 3);

    blob!(pub shape Maps = _, 3, 4, 4);
    let mut n = NetSpec::<f32>::new("slopes");
    let x = n.input::<Maps>("x");
    let y = n.add("slope", &x, slope::Slope);
    let ip = n.add("ip", &y, Fc::<2>::new().weight_filler(Filler::xavier()));
    let label = n.input::<Classes>("label");
    let _loss = n.add("loss", (&ip, &label), SoftmaxLoss::new());
    n.batch(2);
    // Unregistered, the type is Net's error naming it.
    let err = n.build(NetState::train()).err().unwrap().to_string();
    assert!(err.contains("Unknown layer type: ChannelSlope"), "{err}");
    let mut registry = LayerRegistry::<f32>::with_caffe_layers();
    registry.register(slope::TYPE, |_| Ok(Box::new(slope::ChannelSlope::new())));
    let mut net = n.build_with(NetState::train(), &registry).unwrap();
    net.blob("x")
        .unwrap()
        .mutable_cpu_data()
        .unwrap()
        .iter_mut()
        .enumerate()
        .for_each(|(i, v)| *v = if i % 2 == 0 { -1.0 } else { 0.5 });
    net.clear_param_diffs().unwrap();
    net.forward().unwrap();
    net.backward().unwrap();
    SgdSolver::lenet()
        .step(&net.param_blobs(), &net.param_specs())
        .unwrap();
    let slopes = net.layer_blobs("slope").unwrap()[0].to_vec().unwrap();
    assert_eq!(slopes.len(), 3);
    assert!(slopes.iter().all(|&a| a != 0.25), "{slopes:?}");
}

/// A layer on its own (outside a net) loads its blobs from a `.caffemodel`
/// by layer name and saves them back.
#[test]
fn a_layer_loads_and_saves_its_blobs_by_name() {
    use blobflow::layers::registry::LayerRegistry;
    let mut model =
        CaffeModel::open(root().join("models/lenet/lenet_iter_10000.caffemodel")).unwrap();
    let mut conv1 = LayerRegistry::<f32>::with_caffe_layers()
        .build_text(r#"type: "Convolution" convolution_param { num_output: 20 kernel_size: 5 }"#)
        .unwrap();
    // Its first reshape makes its blobs, as Caffe's LayerSetUp.
    let digits = Blob::<f32>::new(&[1, 1, 28, 28]).unwrap();
    conv1.reshape(&[&digits], &[&Blob::default()]).unwrap();
    let params: Vec<&Blob<f32>> = conv1.blobs().iter().collect();
    model.load_layer("conv1", &params).unwrap();
    let stored = model.layer_blobs::<f32>("conv1").unwrap();
    for (loaded, stored) in params.iter().zip(&stored) {
        assert_eq!(loaded.to_vec().unwrap(), stored.to_vec().unwrap());
    }
    // The wrong layer's blobs are refused by shape, naming the layer.
    let err = model.load_layer("conv2", &params).unwrap_err().to_string();
    assert!(err.contains("conv2"), "{err}");
    params[1].mutable_cpu_data().unwrap().fill(0.5);
    model.set_layer_blobs("conv1", &params, false).unwrap();
    assert_eq!(
        model.layer_blobs::<f32>("conv1").unwrap()[1]
            .to_vec()
            .unwrap(),
        [0.5; 20]
    );
}

/// A typed net is timed as `blobflow time` times a prototxt: per layer,
/// with its multiply-adds.
#[test]
fn a_typed_net_times_its_layers() {
    let (spec, _) = lenet(4);
    let mut net = spec.build(NetState::test()).unwrap();
    let timing = net.time(2).unwrap();
    let names: Vec<&str> = timing.layers.iter().map(|l| l.name.as_str()).collect();
    // The inputs are Caffe's `Input` layer, first, as `caffe time` lists it.
    assert_eq!(
        names,
        [
            "input", "conv1", "pool1", "conv2", "pool2", "ip1", "relu1", "ip2", "prob"
        ]
    );
    assert!(timing.forward_ms() > 0.0);
    // conv1: 4 x 20 x 24 x 24 outputs of 25 multiply-adds each.
    assert_eq!(net.multiply_adds("conv1"), Some(4 * 20 * 24 * 24 * 25));
    assert_eq!(net.multiply_adds("pool1"), None);
}

/// Concat joins (N, C) blobs too, and Eltwise takes four bottoms.
#[test]
fn flat_concats_and_four_way_sums() {
    blob!(pub shape Row = _, 3);
    let mut n = NetSpec::<f32>::new("flat");
    let x = n.input::<Row>("x");
    let y = n.add(
        "ip",
        &x,
        Fc::<5>::new().weight_filler(Filler::constant(1.0)),
    );
    let joined: Top<f32, (Dyn, D<8>)> = n.add("join", (&x, &y), Concat);
    let sum = n.add(
        "sum",
        (&x, &x, &x, &x),
        Eltwise::weighted_sum(&[1.0, 2.0, 3.0, 4.0]),
    );
    let mut net = n.batch(1).build(NetState::test()).unwrap();
    net.blob("x")
        .unwrap()
        .mutable_cpu_data()
        .unwrap()
        .copy_from_slice(&[1.0, 2.0, 3.0]);
    net.forward().unwrap();
    assert_eq!(
        joined.blob(&net).unwrap().to_vec().unwrap(),
        [1.0, 2.0, 3.0, 6.0, 6.0, 6.0, 6.0, 6.0]
    );
    assert_eq!(
        sum.blob(&net).unwrap().to_vec().unwrap(),
        [10.0, 20.0, 30.0]
    );
}

/// Concat on other axes: SSD's prior boxes, `(1, 2, K)` each, on axis 2;
/// two run-time batches on axis 0 make a run-time batch; the joined
/// blobs hold their bottoms' values in Caffe's order.
#[test]
fn concats_on_any_axis_join_the_blobs_caffe_joins() {
    blob!(pub shape Near = 1, 2, 3);
    blob!(pub shape Far = 1, 2, 1);
    blob!(pub shape Image = _, 2, 2, 2);
    let mut n = NetSpec::<f32>::new("axes");
    let (near, far) = (n.input::<Near>("near"), n.input::<Far>("far"));
    let priors: Top<f32, (D<1>, D<2>, D<4>)> = n.add("priors", (&near, &far), ConcatAxis::<2>);
    let x = n.input::<Image>("x");
    let twice: Top<f32, (Dyn, D<2>, D<2>, D<2>)> = n.add("twice", (&x, &x), ConcatAxis::<0>);
    let rows: Top<f32, (Dyn, D<2>, D<4>, D<2>)> = n.add("rows", (&x, &x), ConcatAxis::<2>);
    let mut net = n.batch(1).build(NetState::test()).unwrap();
    let fill = |name: &str, values: &[f32]| {
        net.blob(name)
            .unwrap()
            .mutable_cpu_data()
            .unwrap()
            .copy_from_slice(values)
    };
    fill("near", &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    fill("far", &[7.0, 8.0]);
    let image: Vec<f32> = (0..8).map(|v| v as f32).collect();
    fill("x", &image);
    net.forward().unwrap();
    assert_eq!(
        priors.blob(&net).unwrap().to_vec().unwrap(),
        [1.0, 2.0, 3.0, 7.0, 4.0, 5.0, 6.0, 8.0]
    );
    assert_eq!(twice.blob(&net).unwrap().shape(), [2, 2, 2, 2]);
    assert_eq!(
        twice.blob(&net).unwrap().to_vec().unwrap(),
        [image.clone(), image.clone()].concat()
    );
    assert_eq!(rows.blob(&net).unwrap().shape(), [1, 2, 4, 2]);
    assert_eq!(
        rows.blob(&net).unwrap().to_vec().unwrap(),
        [
            0.0, 1.0, 2.0, 3.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 4.0, 5.0, 6.0, 7.0
        ]
    );
}

/// Slice on another axis: rows of an image split at row 1, the parts
/// holding the rows Caffe gives them.
#[test]
fn a_slice_on_the_rows_splits_them() {
    blob!(pub shape Image = _, 2, 3, 2);
    let mut n = NetSpec::<f32>::new("rows");
    let x = n.input::<Image>("x");
    let (top, rest) = n.slice_axis::<2, 1, _>("split", &x, ["top", "rest"]);
    let top: Top<f32, (Dyn, D<2>, D<1>, D<2>)> = top;
    let rest: Top<f32, (Dyn, D<2>, D<2>, D<2>)> = rest;
    let values: Vec<f32> = (0..12).map(|v| v as f32).collect();
    let net = forward_on(&mut n, 1, &values);
    assert_eq!(
        top.blob(&net).unwrap().to_vec().unwrap(),
        [0.0, 1.0, 6.0, 7.0]
    );
    assert_eq!(
        rest.blob(&net).unwrap().to_vec().unwrap(),
        [2.0, 3.0, 4.0, 5.0, 8.0, 9.0, 10.0, 11.0]
    );
}

/// Every neuron layer of Caffe's through the typed front end, against the
/// formula it computes; those Caffe may run in place do, given their
/// bottom by value.
#[test]
fn every_neuron_layer_computes_its_formula() {
    blob!(pub shape Row = _, 4);
    let inputs = [-2.0f32, -0.5, 0.5, 3.0];
    type Formula = fn(f32) -> f32;
    let cases: Vec<(Neuron, Formula, bool)> = vec![
        (Neuron::relu(), |x| x.max(0.0), true),
        (
            Neuron::leaky_relu(0.1),
            |x| if x > 0.0 { x } else { 0.1 * x },
            true,
        ),
        (Neuron::sigmoid(), |x| 1.0 / (1.0 + (-x).exp()), true),
        (Neuron::tanh(), f32::tanh, true),
        (
            Neuron::elu(1.0),
            |x| if x > 0.0 { x } else { x.exp() - 1.0 },
            true,
        ),
        (
            Neuron::power(2.0, 0.5, 1.0),
            |x| (1.0 + 0.5 * x).powi(2),
            false,
        ),
        (Neuron::abs_val(), f32::abs, false),
        (Neuron::bnll(), |x| (1.0 + x.exp()).ln(), false),
        (Neuron::exp(-1.0, 1.0, 0.0), f32::exp, true),
        (Neuron::log(-1.0, 1.0, 3.0), |x| (3.0 + x).ln(), false),
        (
            Neuron::threshold(0.0),
            |x| if x > 0.0 { 1.0 } else { 0.0 },
            true,
        ),
        (Neuron::clip(0.0, 1.0), |x| x.clamp(0.0, 1.0), false),
    ];
    for (layer, formula, in_place) in cases {
        let kind = layer.type_name().to_string();
        let mut n = NetSpec::<f32>::new("neuron");
        let x = n.input::<Row>("x");
        let y = n.add("y", x, layer);
        assert_eq!(y.name() == "x", in_place, "{kind}");
        let mut net = n.batch(1).build(NetState::test()).unwrap();
        net.blob("x")
            .unwrap()
            .mutable_cpu_data()
            .unwrap()
            .copy_from_slice(&inputs);
        net.forward().unwrap();
        let got = y.blob(&net).unwrap().to_vec().unwrap();
        for (g, &x) in got.iter().zip(&inputs) {
            assert!((g - formula(x)).abs() < 1e-5, "{kind}({x}) = {g}");
        }
    }
}

/// A flatten past 4096 (VGG's pool5 is 512 x 7 x 7 = 25088) and a Concat
/// past it: the compiler computes both dims, which print in thousands
/// (`Thousands<D<4>, D<608>>`), and the built net agrees with them.
#[test]
fn flatten_and_concat_past_4096_are_typed() {
    blob!(pub shape Pool5 = _, 128, 6, 6);
    blob!(pub shape Wide = _, 4608);
    let mut n = NetSpec::<f32>::new("wide");
    let x = n.input::<Pool5>("x");
    let flat: Top<f32, Wide> = n.add("flat", &x, Flatten).named();
    let joined = n.add("join", (&flat, &flat), Concat);
    let joined: Top<f32, (Dyn, blobflow::typed::Thousands<D<9>, D<216>>)> = joined;
    let _scores = n.add("fc", &joined, Fc::<3>::new());
    let values: Vec<f32> = (0..2 * 4608).map(|v| v as f32).collect();
    let net = forward_on(&mut n, 2, &values);
    assert_eq!(flat.blob(&net).unwrap().shape(), [2, 4608]);
    let both = joined.blob(&net).unwrap().to_vec().unwrap();
    assert_eq!(joined.blob(&net).unwrap().shape(), [2, 9216]);
    assert_eq!(both[4608..9216], values[..4608]);
}
