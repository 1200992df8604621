//! The CPU's Winograd path for 3x3 and 5x5 convolutions, through the run-time
//! layer: within 1e-5 of Caffe's own engine (`engine: CAFFE`, im2col)
//! on the same weights, grouped or not, and following the weights when
//! they change between passes, as a solver's update or a weight load
//! changes them.

use blob_layers::DynLayer;
use blob_layers::registry::LayerRegistry;
use blob_proto::{ParamMessage, TextMessage, schema};
use blob_runtime::Blob;

/// A convolution of `outputs` channels in `group` groups, `kernel x
/// kernel` padded to keep the plane, in the net phase `phase`.
fn layer(
    (engine, phase): (&str, &str),
    outputs: usize,
    group: usize,
    kernel: usize,
) -> Box<dyn DynLayer<f32>> {
    let pad = kernel / 2;
    let text = format!(
        "name: 'conv' type: 'Convolution' phase: {phase} convolution_param {{ \
         num_output: {outputs} kernel_size: {kernel} pad: {pad} group: {group} engine: {engine} }}"
    );
    let param = ParamMessage::from_text(
        &schema::LAYER_PARAMETER,
        &TextMessage::parse(&text).unwrap(),
    )
    .unwrap();
    LayerRegistry::with_caffe_layers()
        .build("Convolution", &param)
        .unwrap()
}

/// Values spread evenly over [-1, 1), each a hash of its index and
/// `seed` (SplitMix64's finaliser). Values stepping through a residue
/// ring (`i * 761 mod 1000`, as this once was) make inputs and weights
/// ramps that cancel in the sums, which shrinks the outputs' largest
/// and inflates every rounding gap measured against it.
fn values(n: usize, seed: u64) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let mut z = (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
                ^ seed.wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            (z >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

/// Sets `l`'s weights and bias from `seed`.
fn set_weights(l: &dyn DynLayer<f32>, seed: u64) {
    for (i, p) in l.blobs().iter().enumerate() {
        p.mutable_cpu_data()
            .unwrap()
            .copy_from_slice(&values(p.count(), seed + i as u64));
    }
}

/// Reshapes `l` and `y` to `x`.
fn reshape(l: &mut dyn DynLayer<f32>, x: &Blob<f32>, y: &mut Blob<f32>) {
    let dims = l.reshape(&[x], &[&*y]).unwrap()[0].dims.clone();
    y.reshape(&dims).unwrap();
}

fn forward(l: &mut dyn DynLayer<f32>, x: &Blob<f32>, y: &Blob<f32>) -> Vec<f32> {
    l.forward(&[x], &[y]).unwrap();
    y.cpu_data().unwrap().to_vec()
}

/// The largest difference between `a` and `b` over the largest of `b`.
fn relative_gap(a: &[f32], b: &[f32]) -> f32 {
    let scale = b.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    a.iter()
        .zip(b)
        .fold(0.0f32, |m, (x, y)| m.max((x - y).abs()))
        / scale
}

#[test]
fn a_training_net_keeps_to_f4x4_3x3() {
    // F(4x4, 5x5) and F(6x6, 3x3) round ten times as coarsely as im2col:
    // the TRAIN phase (a layer's default) keeps Caffe's sums for 5x5
    // layers and F(4x4, 3x3) for 3x3 ones, which the TEST phase takes
    // in 6x6 tiles on a 21 x 21 plane (16 tiles against 36).
    let x = Blob::new(&[1, 16, 21, 21]).unwrap();
    x.mutable_cpu_data()
        .unwrap()
        .copy_from_slice(&values(x.count(), 1));
    let run = |engine: &str, phase: &str, kernel: usize| {
        let mut l = layer((engine, phase), 16, 1, kernel);
        let mut y = Blob::default();
        reshape(&mut *l, &x, &mut y);
        set_weights(&*l, 10);
        forward(&mut *l, &x, &y)
    };
    for kernel in [5, 3] {
        let caffe = run("CAFFE", "TRAIN", kernel);
        let (train, test) = (
            run("DEFAULT", "TRAIN", kernel),
            run("DEFAULT", "TEST", kernel),
        );
        assert_eq!(train == caffe, kernel == 5, "{kernel}x{kernel} in TRAIN");
        assert_ne!(
            train, test,
            "{kernel}x{kernel}: TEST takes the 8-point transform"
        );
        for (phase, y) in [("TRAIN", &train), ("TEST", &test)] {
            let gap = relative_gap(y, &caffe);
            assert!(
                gap < 1e-5,
                "{kernel}x{kernel} in {phase}: {gap:e} off im2col"
            );
        }
    }
}

#[test]
fn winograd_matches_caffes_engine_and_follows_new_weights() {
    // 2 images of 21 x 26: outputs 21 x 26, in 4 x 5 tiles of 6 x 6
    // each (3x3 windows) or 6 x 7 of 4 x 4 (5x5), the last row and
    // column of tiles partly outside; 16 channels in and 24 out,
    // and 2 groups of 16 in and out (CaffeNet's conv4 and conv5 are
    // grouped); 5x5 windows, CaffeNet's conv2's 2 groups among them, in
    // a TEST-phase net as a deployed one runs.
    for kernel in [3, 5] {
        for (channels, outputs, group) in [(16, 24, 1), (32, 32, 2)] {
            matches_caffes_engine(channels, outputs, group, kernel);
        }
    }
}

fn matches_caffes_engine(channels: usize, outputs: usize, group: usize, kernel: usize) {
    let x = Blob::new(&[2, channels, 21, 26]).unwrap();
    x.mutable_cpu_data()
        .unwrap()
        .copy_from_slice(&values(x.count(), 1));
    let (mut fast, mut caffe) = (
        layer(("DEFAULT", "TEST"), outputs, group, kernel),
        layer(("CAFFE", "TEST"), outputs, group, kernel),
    );
    let (mut y_fast, mut y_caffe) = (Blob::default(), Blob::default());
    reshape(&mut *fast, &x, &mut y_fast);
    reshape(&mut *caffe, &x, &mut y_caffe);
    let mut passes = Vec::new();
    for seed in [10, 20] {
        // The second pass changes the weights after a pass with others.
        set_weights(&*fast, seed);
        set_weights(&*caffe, seed);
        let a = forward(&mut *fast, &x, &y_fast);
        let b = forward(&mut *caffe, &x, &y_caffe);
        let gap = relative_gap(&a, &b);
        assert!(
            gap < 1e-5,
            "{kernel}x{kernel}, groups {group}, weights {seed}: Winograd is {gap:e} off im2col"
        );
        // The two engines do round differently: the fast one did run.
        assert_ne!(
            a, b,
            "{kernel}x{kernel}, groups {group}, weights {seed}: the same bits as im2col"
        );
        passes.push(a);
    }
    assert!(relative_gap(&passes[0], &passes[1]) > 0.1);
}
