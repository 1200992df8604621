//! `Net::reuse_memory` on real nets (branches, splits, concats, in-place
//! layers, detection outputs, residual adds folded into convolutions):
//! the outputs of a net whose intermediate blobs share memory are the
//! bits of the same net with its own, pass after pass with new inputs,
//! and the memory it holds is smaller.

use blobflow::kernels::cpu;
use blobflow::layers::net::{LayerTime, Net, NetState};

#[path = "support/digits.rs"]
mod digits;
#[path = "support/random_params.rs"]
mod random_params;

use random_params::randomize_params;

fn fill_inputs(a: &mut Net<f32>, b: &mut Net<f32>) {
    let inputs: Vec<String> = a.inputs().iter().map(|s| s.to_string()).collect();
    for name in inputs {
        let values = {
            let blob = a.blob(&name).unwrap();
            cpu::uniform(-1.0, 1.0, &mut blob.mutable_cpu_data().unwrap()).unwrap();
            blob.to_vec().unwrap()
        };
        b.blob_mut(&name)
            .unwrap()
            .mutable_cpu_data()
            .unwrap()
            .copy_from_slice(&values);
    }
}

fn same_outputs_with_shared_memory(prototxt: &str, input: &[usize]) {
    let path = digits::root().join(prototxt);
    let text = std::fs::read_to_string(&path).unwrap();
    same_outputs_of_text(prototxt, &text, input);
}

fn same_outputs_of_text(prototxt: &str, text: &str, input: &[usize]) -> (Net<f32>, Net<f32>) {
    cpu::set_seed(11);
    let build = || {
        let mut builder = Net::<f32>::builder().state(NetState::test());
        if !input.is_empty() {
            builder = builder.input_shape("data", input);
        }
        builder.from_prototxt(text).unwrap()
    };
    let mut own = build();
    randomize_params(&own);
    let mut shared = build();
    shared.copy_from(&own.to_model().unwrap()).unwrap();
    let before = shared.memory_bytes();
    let reuse = shared.reuse_memory().unwrap();
    assert!(reuse.blobs > 0, "{prototxt}: no blob shares memory");
    assert!(
        reuse.bytes_after < reuse.bytes_before,
        "{prototxt}: {reuse:?}"
    );
    assert!(shared.memory_bytes() <= before, "{prototxt}");
    for pass in 0..2 {
        same_outputs_of_pass(&mut own, &mut shared, &format!("{prototxt}, pass {pass}"));
    }
    (own, shared)
}

/// Fills both nets' inputs alike, runs both, and compares every output
/// bit for bit.
fn same_outputs_of_pass(own: &mut Net<f32>, shared: &mut Net<f32>, what: &str) {
    fill_inputs(own, shared);
    own.forward().unwrap();
    shared.forward().unwrap();
    for name in own.outputs() {
        let (want, got) = (
            own.blob(name).unwrap().to_vec().unwrap(),
            shared.blob(name).unwrap().to_vec().unwrap(),
        );
        let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        assert!(bits(&want) == bits(&got), "{what}: output '{name}' differs");
    }
}

/// Each layer `keep` keeps, by name, with the layer `time` says its
/// forward is folded into.
fn folded_into(
    net: &mut Net<f32>,
    keep: impl Fn(&LayerTime) -> bool,
) -> Vec<(String, Option<String>)> {
    let timing = net.time(1).unwrap();
    timing
        .layers
        .into_iter()
        .filter(|l| keep(l))
        .map(|l| (l.name, l.folded_into))
        .collect()
}

/// Both nets' input reshaped to `shape`, then two passes compared.
fn same_outputs_reshaped(own: &mut Net<f32>, shared: &mut Net<f32>, shape: &[usize]) {
    for net in [&mut *own, &mut *shared] {
        net.blob_mut("data").unwrap().reshape(shape).unwrap();
    }
    for pass in 0..2 {
        same_outputs_of_pass(own, shared, &format!("reshaped to {shape:?}, pass {pass}"));
    }
}

#[test]
fn lenet() {
    same_outputs_with_shared_memory("models/lenet/lenet.prototxt", &[]);
}

#[test]
fn mtcnn_cascade() {
    for net in ["det1", "det2", "det3"] {
        same_outputs_with_shared_memory(&format!("tests/fixtures/nets/mtcnn/{net}.prototxt"), &[]);
    }
}

#[test]
fn squeezenet_fire_concats() {
    same_outputs_with_shared_memory(
        "tests/fixtures/nets/squeezenet_v1.1/deploy.prototxt",
        &[1, 3, 227, 227],
    );
}

#[test]
fn googlenet_inception_branches() {
    same_outputs_with_shared_memory(
        "tests/fixtures/nets/bvlc_googlenet/deploy.prototxt",
        &[1, 3, 224, 224],
    );
}

#[test]
fn resnet50_residual_splits_and_folds() {
    same_outputs_with_shared_memory(
        "tests/fixtures/nets/resnet50/ResNet-50-deploy.prototxt",
        &[1, 3, 224, 224],
    );
}

/// MobileNet-SSD's chains of 1x1 and depthwise layers hand their blobs
/// on in channel blocks, and the detections are the bits of the net in
/// Caffe's layout, whether the net runs whole or layer by layer as
/// `time` runs it (each block then left in its blob between calls).
#[test]
fn mobilenet_ssd_detections() {
    let prototxt = "tests/fixtures/nets/mobilenet_ssd/MobileNetSSD_deploy.prototxt";
    let text = std::fs::read_to_string(digits::root().join(prototxt)).unwrap();
    let (own, mut shared) = same_outputs_of_text(prototxt, &text, &[]);
    let blocked = shared.blobs_in_channel_blocks();
    if cpu::isa() >= cpu::Isa::Avx2 {
        // conv0 writes blocks from the image's three planes.
        for blob in [
            "conv0",
            "conv1/dw",
            "conv1",
            "conv2/dw",
            "conv10",
            "conv11/dw",
        ] {
            assert!(blocked.contains(&blob), "{blob} not in blocks: {blocked:?}");
        }
        // conv11's top goes to a Split, the heads read it in Caffe's layout.
        assert!(!blocked.contains(&"conv11"), "{blocked:?}");
    } else {
        assert!(blocked.is_empty(), "{blocked:?}");
    }
    shared.time(1).unwrap();
    for name in own.outputs() {
        let bits = |net: &Net<f32>| {
            let values = net.blob(name).unwrap().to_vec().unwrap();
            values.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        };
        assert!(
            bits(&own) == bits(&shared),
            "layer by layer: output '{name}' differs"
        );
    }
}

#[test]
fn yolov3_tiny_upsample_and_route() {
    same_outputs_with_shared_memory("tests/fixtures/nets/yolo/yolov3-tiny.prototxt", &[]);
}

#[test]
fn yolov3_shortcuts_after_3x3_layers() {
    same_outputs_with_shared_memory(
        "tests/fixtures/nets/yolo/yolov3.prototxt",
        &[1, 3, 160, 160],
    );
}

/// Residual blocks: a 1x1 branch through BatchNorm and Scale into a sum
/// with the shortcut as its second bottom, and a 3x3 one (not added as
/// the product stores) with it first; a sum of a blob with itself, and
/// a sum whose branch another layer reads too, are left alone.
const RESIDUAL_BLOCKS: &str = "
    input: 'data' input_shape { dim: 2 dim: 8 dim: 6 dim: 6 }
    layer { name: 'short' type: 'Convolution' bottom: 'data' top: 'short'
            convolution_param { num_output: 16 kernel_size: 1 } }
    layer { name: 'branch' type: 'Convolution' bottom: 'data' top: 'branch'
            convolution_param { num_output: 16 kernel_size: 1 } }
    layer { name: 'bn' type: 'BatchNorm' bottom: 'branch' top: 'branch' }
    layer { name: 'scale' type: 'Scale' bottom: 'branch' top: 'branch' scale_param { bias_term: true } }
    layer { name: 'sum' type: 'Eltwise' bottom: 'short' bottom: 'branch' top: 'sum' }
    layer { name: 'relu' type: 'ReLU' bottom: 'sum' top: 'sum' }
    layer { name: 'wide' type: 'Convolution' bottom: 'sum' top: 'wide'
            convolution_param { num_output: 16 kernel_size: 3 pad: 1 } }
    layer { name: 'sum2' type: 'Eltwise' bottom: 'wide' bottom: 'sum' top: 'sum2' }
    layer { name: 'relu2' type: 'ReLU' bottom: 'sum2' top: 'sum2' }
    layer { name: 'twice' type: 'Convolution' bottom: 'sum2' top: 'twice'
            convolution_param { num_output: 16 kernel_size: 1 } }
    layer { name: 'sum3' type: 'Eltwise' bottom: 'twice' bottom: 'twice' top: 'sum3' }
    layer { name: 'read' type: 'Convolution' bottom: 'sum3' top: 'read'
            convolution_param { num_output: 16 kernel_size: 1 } }
    layer { name: 'sum4' type: 'Eltwise' bottom: 'sum3' bottom: 'read' top: 'sum4' }
    layer { name: 'also' type: 'AbsVal' bottom: 'read' top: 'also' }";

#[test]
fn residual_adds_folded_into_the_convolutions() {
    let (mut own, mut shared) = same_outputs_of_text("residual blocks", RESIDUAL_BLOCKS, &[]);
    let folded = |net: &mut Net<f32>| {
        folded_into(net, |l| {
            (l.name.starts_with("sum") || l.name.starts_with("relu")) && !l.name.ends_with("split")
        })
    };
    let into = |layer: &str| Some(layer.to_string());
    assert_eq!(
        folded(&mut shared),
        [
            ("sum".to_string(), into("branch")),
            ("relu".to_string(), into("branch")),
            ("sum2".to_string(), into("wide")),
            ("relu2".to_string(), into("wide")),
            ("sum3".to_string(), None),
            ("sum4".to_string(), None),
        ]
    );
    assert_eq!(folded(&mut own)[0], ("sum".to_string(), None));
    assert_eq!(folded(&mut own)[1], ("relu".to_string(), into("sum")));
    // A new input shape: the first pass reshapes the sums after the
    // layers that add them, and runs them apart.
    same_outputs_reshaped(&mut own, &mut shared, &[1, 8, 5, 7]);
}

/// Two Concats along the channels: one of three Convolutions (one with
/// its BatchNorm, Scale and ReLU folded, one 3x3, one grouped), which
/// they write into, and one of a Convolution and a pooling, which stays a
/// pass of its own; a Concat along the height, which stays too.
const CONCATS: &str = "
    input: 'data' input_shape { dim: 2 dim: 4 dim: 9 dim: 9 }
    layer { name: 'a' type: 'Convolution' bottom: 'data' top: 'a'
            convolution_param { num_output: 3 kernel_size: 1 } }
    layer { name: 'a_bn' type: 'BatchNorm' bottom: 'a' top: 'a' }
    layer { name: 'a_scale' type: 'Scale' bottom: 'a' top: 'a' scale_param { bias_term: true } }
    layer { name: 'a_relu' type: 'ReLU' bottom: 'a' top: 'a' }
    layer { name: 'b' type: 'Convolution' bottom: 'data' top: 'b'
            convolution_param { num_output: 5 kernel_size: 3 pad: 1 } }
    layer { name: 'c' type: 'Convolution' bottom: 'data' top: 'c'
            convolution_param { num_output: 4 kernel_size: 3 pad: 1 group: 2 } }
    layer { name: 'c_relu' type: 'ReLU' bottom: 'c' top: 'c' }
    layer { name: 'joined' type: 'Concat' bottom: 'b' bottom: 'a' bottom: 'c' top: 'joined' }
    layer { name: 'd' type: 'Convolution' bottom: 'joined' top: 'd'
            convolution_param { num_output: 6 kernel_size: 3 pad: 1 } }
    layer { name: 'pool' type: 'Pooling' bottom: 'joined' top: 'pool'
            pooling_param { pool: MAX kernel_size: 3 stride: 1 pad: 1 } }
    layer { name: 'mixed' type: 'Concat' bottom: 'd' bottom: 'pool' top: 'mixed' }
    layer { name: 'e' type: 'Convolution' bottom: 'mixed' top: 'e'
            convolution_param { num_output: 2 kernel_size: 1 } }
    layer { name: 'f' type: 'Convolution' bottom: 'mixed' top: 'f'
            convolution_param { num_output: 2 kernel_size: 1 } }
    layer { name: 'rows' type: 'Concat' bottom: 'e' bottom: 'f' top: 'rows'
            concat_param { axis: 2 } }";

#[test]
fn concats_written_by_the_convolutions_before_them() {
    let (mut own, mut shared) = same_outputs_of_text("concats", CONCATS, &[]);
    let folded = |net: &mut Net<f32>| folded_into(net, |l| l.kind == "Concat");
    assert_eq!(
        folded(&mut shared),
        [
            ("joined".to_string(), Some("b, a, c".to_string())),
            ("mixed".to_string(), None),
            ("rows".to_string(), None),
        ]
    );
    assert!(folded(&mut own).iter().all(|(_, into)| into.is_none()));
    // `time` runs the layers a pass at a time: the same bits.
    for name in own.outputs() {
        let (want, got) = (
            own.blob(name).unwrap().to_vec().unwrap(),
            shared.blob(name).unwrap().to_vec().unwrap(),
        );
        assert_eq!(want, got, "after time: output '{name}'");
    }
    // A new input shape: the first pass finds the Concat's top of the old
    // one and joins apart; the next writes into it again.
    same_outputs_reshaped(&mut own, &mut shared, &[3, 4, 7, 11]);
}

#[test]
fn nets_that_run_backward_are_refused() {
    let mut net = Net::<f32>::from_prototxt(
        "input: 'x' input_shape { dim: 2 dim: 3 } input: 'label' input_shape { dim: 2 }
         layer { name: 'ip' type: 'InnerProduct' bottom: 'x' top: 'ip'
                 inner_product_param { num_output: 2 } }
         layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip' bottom: 'label' top: 'loss' }",
        NetState::train(),
    )
    .unwrap();
    let err = net.reuse_memory().unwrap_err().to_string();
    assert!(err.contains("layer 'ip' runs backward"), "{err}");
}
