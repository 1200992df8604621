//! ResNet-50, GoogLeNet and SqueezeNet declared typed, with their
//! branches (residual sums, inception and fire concats): each builds the same `Net` as its
//! `.prototxt` in `tests/fixtures/nets`, the same blobs under the same
//! names, and with the same weights gives the same output bit for bit.

use blobflow::kernels::cpu;
use blobflow::layers::net::{Net, NetState};
use blobflow::layers::typed_net::*;
use blobflow::prelude::*;

#[path = "support/digits.rs"]
mod digits;
#[path = "support/random_params.rs"]
mod random_params;

use random_params::randomize_params;

blob!(pub shape Image = _, 3, 224, 224);
blob!(pub shape Image227 = _, 3, 227, 227);

/// Fills every parameter blob of `net` and its input from the seeded
/// generator.
fn randomize(net: &Net<f32>) {
    randomize_params(net);
    cpu::uniform(
        -1.0,
        1.0,
        &mut net.blob("data").unwrap().mutable_cpu_data().unwrap(),
    )
    .unwrap();
}

/// Builds `typed`, gives it the weights of the net read from `prototxt`
/// (filled at random) through a `.caffemodel`, and compares every blob
/// after a forward pass.
fn same_as_prototxt(typed: &NetSpec<f32>, prototxt: &str, output: &str) {
    cpu::set_seed(7);
    let side = if prototxt.contains("squeezenet") {
        227
    } else {
        224
    };
    let mut from_file = Net::<f32>::builder()
        .input_shape("data", &[1, 3, side, side])
        .from_file(digits::root().join(prototxt))
        .unwrap();
    randomize(&from_file);
    let mut net = typed.build(NetState::test()).unwrap();
    let report = net.copy_from(&from_file.to_model().unwrap()).unwrap();
    let learned = from_file
        .layer_names()
        .filter(|l| !from_file.layer_blobs(l).unwrap().is_empty())
        .count();
    assert_eq!(report.copied.len(), learned);
    assert_eq!(net.blob_names(), from_file.blob_names());
    net.blob("data")
        .unwrap()
        .mutable_cpu_data()
        .unwrap()
        .copy_from_slice(&from_file.blob("data").unwrap().cpu_data().unwrap());
    from_file.forward().unwrap();
    net.forward().unwrap();
    for name in from_file.blob_names() {
        assert_eq!(
            net.blob(name).unwrap().shape(),
            from_file.blob(name).unwrap().shape(),
            "{name}"
        );
    }
    let got = net.blob(output).unwrap().to_vec().unwrap();
    assert!(got.iter().all(|v| v.is_finite()));
    assert_eq!(got, from_file.blob(output).unwrap().to_vec().unwrap());
}

/// A convolution without bias, its BatchNorm and Scale, in place (ResNet's
/// unit), named as ResNet-50's prototxt names them.
macro_rules! conv_bn {
    ($n:ident, $x:expr, $tag:literal, $branch:literal, $conv:expr) => {{
        let y = $n.add(
            concat!("res", $tag, "_branch", $branch),
            $x,
            $conv.bias_term(false),
        );
        let bn = BatchNorm::new().use_global_stats(true);
        let y = $n.add(concat!("bn", $tag, "_branch", $branch), y, bn);
        $n.add(
            concat!("scale", $tag, "_branch", $branch),
            y,
            Scale::with_bias(),
        )
    }};
}

/// A bottleneck block: 1x1 (stride `$s`), 3x3, 1x1 to `$out` channels,
/// added to the shortcut (a projection, or the input itself).
macro_rules! bottleneck {
    ($n:ident, $x:ident, $tag:literal, $mid:literal, $out:literal, $s:literal, $shortcut:ident) => {{
        let shortcut = bottleneck!(@shortcut $n, $x, $tag, $out, $s, $shortcut);
        let y = conv_bn!($n, &$x, $tag, "2a", Conv::<$mid, 1, $s>::new());
        let y = $n.add(concat!("res", $tag, "_branch2a_relu"), y, Neuron::relu());
        let y = conv_bn!($n, &y, $tag, "2b", Conv::<$mid, 3, 1, 1>::new());
        let y = $n.add(concat!("res", $tag, "_branch2b_relu"), y, Neuron::relu());
        let y = conv_bn!($n, &y, $tag, "2c", Conv::<$out, 1>::new());
        drop($x);
        let sum = $n.add(concat!("res", $tag), (&shortcut, &y), Eltwise::sum());
        $n.add(concat!("res", $tag, "_relu"), sum, Neuron::relu())
    }};
    (@shortcut $n:ident, $x:ident, $tag:literal, $out:literal, $s:literal, project) => {
        conv_bn!($n, &$x, $tag, "1", Conv::<$out, 1, $s>::new())
    };
    (@shortcut $n:ident, $x:ident, $tag:literal, $out:literal, $s:literal, identity) => {
        $x.clone()
    };
}

#[test]
fn typed_resnet50_is_its_prototxt() {
    let mut n = NetSpec::<f32>::new("ResNet-50");
    let data = n.input::<Image>("data");
    let x = n.add("conv1", &data, Conv::<64, 7, 2, 3>::new());
    let x = n.add("bn_conv1", x, BatchNorm::new().use_global_stats(true));
    let x = n.add("scale_conv1", x, Scale::with_bias());
    let x = n.add("conv1_relu", x, Neuron::relu());
    let x = n.add("pool1", &x, Pool::<3, 2>::max());
    let x = bottleneck!(n, x, "2a", 64, 256, 1, project);
    let x = bottleneck!(n, x, "2b", 64, 256, 1, identity);
    let x = bottleneck!(n, x, "2c", 64, 256, 1, identity);
    let x = bottleneck!(n, x, "3a", 128, 512, 2, project);
    let x = bottleneck!(n, x, "3b", 128, 512, 1, identity);
    let x = bottleneck!(n, x, "3c", 128, 512, 1, identity);
    let x = bottleneck!(n, x, "3d", 128, 512, 1, identity);
    let x = bottleneck!(n, x, "4a", 256, 1024, 2, project);
    let x = bottleneck!(n, x, "4b", 256, 1024, 1, identity);
    let x = bottleneck!(n, x, "4c", 256, 1024, 1, identity);
    let x = bottleneck!(n, x, "4d", 256, 1024, 1, identity);
    let x = bottleneck!(n, x, "4e", 256, 1024, 1, identity);
    let x = bottleneck!(n, x, "4f", 256, 1024, 1, identity);
    let x = bottleneck!(n, x, "5a", 512, 2048, 2, project);
    let x = bottleneck!(n, x, "5b", 512, 2048, 1, identity);
    let x = bottleneck!(n, x, "5c", 512, 2048, 1, identity);
    let x: Top<f32, (Dyn, D<2048>, D<7>, D<7>)> = x;
    let x = n.add("pool5", &x, Pool::<7, 1>::ave());
    let x = n.add("fc1000", &x, Fc::<1000>::new());
    let prob: Top<f32, (Dyn, D<1000>)> = n.add("prob", &x, Prob);
    same_as_prototxt(
        n.batch(1),
        "tests/fixtures/nets/resnet50/ResNet-50-deploy.prototxt",
        prob.name(),
    );
}

/// A 1x1 or `K` x `K` convolution with its in-place ReLU, named as
/// GoogLeNet's prototxt names them (`inception_3a/3x3`,
/// `inception_3a/relu_3x3`).
macro_rules! conv_relu {
    ($n:ident, $x:expr, $tag:literal, $what:literal, $conv:expr) => {{
        let y = $n.add(concat!($tag, "/", $what), $x, $conv);
        $n.add(concat!($tag, "/relu_", $what), y, Neuron::relu())
    }};
}

/// An inception module: 1x1, 1x1 then 3x3, 1x1 then 5x5, and 3x3 max
/// pooling then 1x1, joined on channels.
macro_rules! inception {
    ($n:ident, $x:ident, $tag:literal, $c1:literal, $r3:literal, $c3:literal, $r5:literal, $c5:literal, $cp:literal) => {{
        let a = conv_relu!($n, &$x, $tag, "1x1", Conv::<$c1, 1>::new());
        let b = conv_relu!($n, &$x, $tag, "3x3_reduce", Conv::<$r3, 1>::new());
        let b = conv_relu!($n, &b, $tag, "3x3", Conv::<$c3, 3, 1, 1>::new());
        let c = conv_relu!($n, &$x, $tag, "5x5_reduce", Conv::<$r5, 1>::new());
        let c = conv_relu!($n, &c, $tag, "5x5", Conv::<$c5, 5, 1, 2>::new());
        let d = $n.add(concat!($tag, "/pool"), &$x, Pool::<3, 1, 1>::max());
        let d = conv_relu!($n, &d, $tag, "pool_proj", Conv::<$cp, 1>::new());
        $n.add(concat!($tag, "/output"), (&a, &b, &c, &d), Concat)
    }};
}

#[test]
fn typed_googlenet_is_its_prototxt() {
    let mut n = NetSpec::<f32>::new("GoogleNet");
    let data = n.input::<Image>("data");
    let x = conv_relu!(n, &data, "conv1", "7x7_s2", Conv::<64, 7, 2, 3>::new());
    let x = n.add("pool1/3x3_s2", &x, Pool::<3, 2>::max());
    let lrn = || LRN::across_channels(5, 0.0001, 0.75);
    let x = n.add("pool1/norm1", &x, lrn());
    let x = conv_relu!(n, &x, "conv2", "3x3_reduce", Conv::<64, 1>::new());
    let x = conv_relu!(n, &x, "conv2", "3x3", Conv::<192, 3, 1, 1>::new());
    let x = n.add("conv2/norm2", &x, lrn());
    let x = n.add("pool2/3x3_s2", &x, Pool::<3, 2>::max());
    let x = inception!(n, x, "inception_3a", 64, 96, 128, 16, 32, 32);
    let x = inception!(n, x, "inception_3b", 128, 128, 192, 32, 96, 64);
    let x = n.add("pool3/3x3_s2", &x, Pool::<3, 2>::max());
    let x = inception!(n, x, "inception_4a", 192, 96, 208, 16, 48, 64);
    let x = inception!(n, x, "inception_4b", 160, 112, 224, 24, 64, 64);
    let x = inception!(n, x, "inception_4c", 128, 128, 256, 24, 64, 64);
    let x = inception!(n, x, "inception_4d", 112, 144, 288, 32, 64, 64);
    let x = inception!(n, x, "inception_4e", 256, 160, 320, 32, 128, 128);
    let x = n.add("pool4/3x3_s2", &x, Pool::<3, 2>::max());
    let x = inception!(n, x, "inception_5a", 256, 160, 320, 32, 128, 128);
    let x = inception!(n, x, "inception_5b", 384, 192, 384, 48, 128, 128);
    let x: Top<f32, (Dyn, D<1024>, D<7>, D<7>)> = x;
    let x = n.add("pool5/7x7_s1", &x, Pool::<7, 1>::ave());
    let x = n.add("pool5/drop_7x7_s1", x, Neuron::dropout(0.4));
    let x = n.add("loss3/classifier", &x, Fc::<1000>::new());
    let prob = n.add("prob", &x, Prob);
    same_as_prototxt(
        n.batch(1),
        "tests/fixtures/nets/bvlc_googlenet/deploy.prototxt",
        prob.name(),
    );
}

/// A fire module: a 1x1 squeeze, then 1x1 and 3x3 expands joined on
/// channels, each convolution with its in-place ReLU.
macro_rules! fire {
    ($n:ident, $x:ident, $tag:literal, $s:literal, $e:literal) => {{
        let s = conv_relu!($n, &$x, $tag, "squeeze1x1", Conv::<$s, 1>::new());
        let a = conv_relu!($n, &s, $tag, "expand1x1", Conv::<$e, 1>::new());
        let b = conv_relu!($n, &s, $tag, "expand3x3", Conv::<$e, 3, 1, 1>::new());
        $n.add(concat!($tag, "/concat"), (&a, &b), Concat)
    }};
}

#[test]
fn typed_squeezenet_is_its_prototxt() {
    let mut n = NetSpec::<f32>::new("squeezenet");
    let data = n.input::<Image227>("data");
    let x = n.add("conv1", &data, Conv::<64, 3, 2>::new());
    let x = n.add("relu_conv1", x, Neuron::relu());
    let x = n.add("pool1", &x, Pool::<3, 2>::max());
    let x = fire!(n, x, "fire2", 16, 64);
    let x = fire!(n, x, "fire3", 16, 64);
    let x = n.add("pool3", &x, Pool::<3, 2>::max());
    let x = fire!(n, x, "fire4", 32, 128);
    let x = fire!(n, x, "fire5", 32, 128);
    let x = n.add("pool5", &x, Pool::<3, 2>::max());
    let x = fire!(n, x, "fire6", 48, 192);
    let x = fire!(n, x, "fire7", 48, 192);
    let x = fire!(n, x, "fire8", 64, 256);
    let x = fire!(n, x, "fire9", 64, 256);
    let x: Top<f32, (Dyn, D<512>, D<14>, D<14>)> = x;
    let x = n.add("drop9", x, Neuron::dropout(0.5));
    let x = n.add("conv10", &x, Conv::<1000, 1>::new());
    let x = n.add("relu_conv10", x, Neuron::relu());
    let x = n.add("pool10", &x, GlobalPool::ave());
    let prob: Top<f32, (Dyn, D<1000>, D<1>, D<1>)> = n.add("prob", &x, Prob);
    same_as_prototxt(
        n.batch(1),
        "tests/fixtures/nets/squeezenet_v1.1/deploy.prototxt",
        prob.name(),
    );
}
