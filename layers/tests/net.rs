//! Caffe's `Net` built from real deploy prototxts: MTCNN's three nets
//! with their trained weights give the reference outputs (computed by
//! OpenCV's Caffe importer, cross-checked by a NumPy forward), and P-Net
//! reshaped over an image pyramid keeps its memory.

use std::path::{Path, PathBuf};

use blob_layers::net::{Net, NetState};
use blob_runtime::{Blob, CaffeModel, npy};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/nets/mtcnn")
        .join(name)
}

fn mtcnn(net: &str) -> Net<f32> {
    let mut n = Net::from_file(fixture(&format!("{net}.prototxt")), NetState::test()).unwrap();
    let model = CaffeModel::open(fixture(&format!("{net}.caffemodel"))).unwrap();
    let report = n.copy_from(&model).unwrap();
    assert!(
        report.missing.is_empty(),
        "{net}: no weights for {:?}",
        report.missing
    );
    n
}

/// `got` within 1e-4 of `want`, relative to max(1, |want|).
fn assert_close(what: &str, got: &Blob<f32>, want: &Blob<f32>) {
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    let (g, w) = (got.to_vec().unwrap(), want.to_vec().unwrap());
    let worst = g
        .iter()
        .zip(&w)
        .map(|(a, b)| (a - b).abs() / b.abs().max(1.0))
        .fold(0.0f32, f32::max);
    assert!(worst <= 1e-4, "{what}: off by {worst:e}");
}

fn run(net: &mut Net<f32>, input: &str, outputs: &[(&str, &str)]) {
    let x: Blob<f32> = npy::read(fixture(input)).unwrap();
    let data = net.blob_mut("data").unwrap();
    data.reshape(x.shape()).unwrap();
    data.copy_from(&x, false).unwrap();
    net.forward().unwrap();
    for (blob, file) in outputs {
        let want: Blob<f32> = npy::read(fixture(file)).unwrap();
        assert_close(
            &format!("{input} -> {blob}"),
            net.blob(blob).unwrap(),
            &want,
        );
    }
}

#[test]
fn rnet_and_onet_give_the_reference_outputs() {
    let mut rnet = mtcnn("det2");
    assert_eq!(rnet.inputs(), ["data"]);
    assert_eq!(rnet.outputs(), ["conv5-2", "prob1"]);
    run(
        &mut rnet,
        "det2_input.npy",
        &[
            ("conv5-2", "det2_out_conv5-2.npy"),
            ("prob1", "det2_out_prob1.npy"),
        ],
    );
    let mut onet = mtcnn("det3");
    assert_eq!(onet.outputs(), ["conv6-2", "conv6-3", "prob1"]);
    run(
        &mut onet,
        "det3_input.npy",
        &[
            ("conv6-2", "det3_out_conv6-2.npy"),
            ("conv6-3", "det3_out_conv6-3.npy"),
            ("prob1", "det3_out_prob1.npy"),
        ],
    );
}

#[test]
fn pnet_reshapes_to_each_input_size() {
    let mut pnet = mtcnn("det1");
    assert_eq!(pnet.blob("data").unwrap().shape(), [1, 3, 12, 12]);
    run(
        &mut pnet,
        "det1_12x12_input.npy",
        &[
            ("conv4-2", "det1_12x12_out_conv4-2.npy"),
            ("prob1", "det1_12x12_out_prob1.npy"),
        ],
    );
    run(
        &mut pnet,
        "det1_60x80_input.npy",
        &[
            ("conv4-2", "det1_60x80_out_conv4-2.npy"),
            ("prob1", "det1_60x80_out_prob1.npy"),
        ],
    );
    // Back to the small size: the same outputs, and no memory given back.
    let held = pnet.memory_bytes();
    run(
        &mut pnet,
        "det1_12x12_input.npy",
        &[
            ("conv4-2", "det1_12x12_out_conv4-2.npy"),
            ("prob1", "det1_12x12_out_prob1.npy"),
        ],
    );
    assert_eq!(pnet.memory_bytes(), held);
}

#[test]
fn a_pyramid_largest_first_allocates_once_and_matches_fresh_nets() {
    let mut pnet = mtcnn("det1");
    let scales: Vec<(usize, usize)> = (0..9)
        .map(|i| {
            let s = 0.709f64.powi(i);
            ((200.0 * s) as usize, (260.0 * s) as usize)
        })
        .collect();
    assert!(scales.last().unwrap().0 >= 12);
    let mut held = None;
    for &(h, w) in &scales {
        let values: Vec<f32> = (0..3 * h * w)
            .map(|i| ((i * 7919) % 255) as f32 / 255.0)
            .collect();
        let x = Blob::from_vec(&[1, 3, h, w], values).unwrap();
        let data = pnet.blob_mut("data").unwrap();
        data.reshape(x.shape()).unwrap();
        data.copy_from(&x, false).unwrap();
        pnet.forward().unwrap();
        let bytes = pnet.memory_bytes();
        assert_eq!(
            *held.get_or_insert(bytes),
            bytes,
            "scale {h}x{w} grew the net's memory"
        );

        let mut fresh = mtcnn("det1");
        let data = fresh.blob_mut("data").unwrap();
        data.reshape(x.shape()).unwrap();
        data.copy_from(&x, false).unwrap();
        fresh.forward().unwrap();
        for out in ["conv4-2", "prob1"] {
            let (a, b) = (pnet.blob(out).unwrap(), fresh.blob(out).unwrap());
            assert_eq!(a.shape(), b.shape());
            assert_eq!(a.to_vec().unwrap(), b.to_vec().unwrap(), "{out} at {h}x{w}");
        }
    }
}

/// The deploy nets without weights build from their prototxts and run
/// forward at batch 1 with random weights: every probability finite and
/// each item's summing to 1. (Their outputs against OpenCV's are
/// `scripts/opencv_peer.py`'s, in CI.)
#[test]
fn the_public_deploy_nets_build_and_run() {
    let nets = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/nets");
    for (file, classes) in [
        ("bvlc_reference_caffenet/deploy.prototxt", 1000),
        ("squeezenet_v1.1/deploy.prototxt", 1000),
        ("bvlc_googlenet/deploy.prototxt", 1000),
        ("resnet50/ResNet-50-deploy.prototxt", 1000),
        ("se_resnet50/SE-ResNet-50.prototxt", 1000),
    ] {
        blob_kernels::cpu::set_seed(1);
        let mut net = Net::<f32>::builder()
            .from_file(nets.join(file))
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        let data = net.blob_mut("data").unwrap();
        let mut shape = data.shape().to_vec();
        shape[0] = 1;
        data.reshape(&shape).unwrap();
        blob_kernels::cpu::uniform(-1.0, 1.0, &mut data.mutable_cpu_data().unwrap()).unwrap();
        for p in net.param_blobs() {
            if p.num_axes() >= 2 {
                blob_kernels::cpu::uniform(-0.05, 0.05, &mut p.mutable_cpu_data().unwrap())
                    .unwrap();
            } else {
                // BatchNorm's statistics and factor, Scale's and the
                // biases: 1, not 0. A variance of 0 scales each BatchNorm
                // by 1/sqrt(eps), and ResNet-50 overflowed to inf, which
                // its ReLUs turn to NaN, as Caffe's do.
                p.mutable_cpu_data().unwrap().fill(1.0);
            }
        }
        net.forward().unwrap_or_else(|e| panic!("{file}: {e}"));
        let out = net.outputs()[0].to_string();
        let prob = net.blob(&out).unwrap().to_vec().unwrap();
        assert_eq!(prob.len(), classes, "{file}");
        assert!(prob.iter().all(|p| p.is_finite() && *p >= 0.0), "{file}");
        assert!((prob.iter().sum::<f32>() - 1.0).abs() < 1e-4, "{file}");
    }
}

/// SqueezeNet pools globally: one net runs at any input size, a
/// landscape photo's included.
#[test]
fn squeezenet_reshapes_to_another_size() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/nets/squeezenet_v1.1/deploy.prototxt");
    let mut net = Net::<f32>::from_file(file, NetState::test()).unwrap();
    for (h, w) in [(227, 227), (131, 131), (227, 303)] {
        net.blob_mut("data")
            .unwrap()
            .reshape(&[1, 3, h, w])
            .unwrap();
        net.forward().unwrap();
        assert_eq!(
            net.blob("prob").unwrap().shape(),
            [1, 1000, 1, 1],
            "at {h} x {w}"
        );
    }
}

/// Caffe's mnist_autoencoder's losses (SigmoidCrossEntropyLoss on the
/// logits, EuclideanLoss on the sigmoid with loss_weight 0, as its
/// prototxt has them) and mnist_siamese's ContrastiveLoss build into
/// nets that SGD trains: each loss falls.
#[test]
fn nets_with_caffes_other_losses_train() {
    use blob_layers::solver::{LrPolicy, SgdSolver};
    let autoencoder = r#"
        input: "data" input_shape { dim: 8 dim: 6 }
        layer { name: "encode" type: "InnerProduct" bottom: "data" top: "encode"
                inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.5 } } }
        layer { name: "decode" type: "InnerProduct" bottom: "encode" top: "decode"
                inner_product_param { num_output: 6 weight_filler { type: "gaussian" std: 0.5 } } }
        layer { name: "decode_neuron" type: "Sigmoid" bottom: "decode" top: "decode_neuron" }
        layer { name: "loss" type: "SigmoidCrossEntropyLoss" bottom: "decode" bottom: "data" top: "cross_entropy_loss" }
        layer { name: "l2" type: "EuclideanLoss" bottom: "decode_neuron" bottom: "data" top: "l2_error" loss_weight: 0 }"#;
    let siamese = r#"
        input: "a" input_shape { dim: 8 dim: 6 }
        input: "b" input_shape { dim: 8 dim: 6 }
        input: "sim" input_shape { dim: 8 }
        layer { name: "feat_a" type: "InnerProduct" bottom: "a" top: "fa"
                param { name: "w" } param { name: "bias" }
                inner_product_param { num_output: 2 weight_filler { type: "gaussian" std: 0.5 } } }
        layer { name: "feat_b" type: "InnerProduct" bottom: "b" top: "fb"
                param { name: "w" } param { name: "bias" }
                inner_product_param { num_output: 2 weight_filler { type: "gaussian" std: 0.5 } } }
        layer { name: "loss" type: "ContrastiveLoss" bottom: "fa" bottom: "fb" bottom: "sim" top: "loss"
                contrastive_loss_param { margin: 1 } }"#;
    for (text, inputs) in [(autoencoder, &["data"][..]), (siamese, &["a", "b"][..])] {
        blob_kernels::cpu::set_seed(11);
        let mut net = Net::<f32>::from_prototxt(text, NetState::train()).unwrap();
        for (k, name) in inputs.iter().enumerate() {
            // Values in [0, 1]: targets of the cross-entropy too.
            let values: Vec<f32> = (0..48)
                .map(|i| ((i * 7 + k * 5) % 11) as f32 / 10.0)
                .collect();
            net.blob(name)
                .unwrap()
                .mutable_cpu_data()
                .unwrap()
                .copy_from_slice(&values);
        }
        if let Some(sim) = net.blob("sim") {
            sim.mutable_cpu_data()
                .unwrap()
                .copy_from_slice(&[1., 0., 1., 0., 0., 1., 1., 0.]);
        }
        let specs = net.param_specs();
        let mut solver = SgdSolver::new(0.1, LrPolicy::Fixed).with_momentum(0.9);
        let mut losses = Vec::new();
        for _ in 0..60 {
            net.clear_param_diffs().unwrap();
            losses.push(net.forward().unwrap());
            net.backward().unwrap();
            solver.step(&net.param_blobs(), &specs).unwrap();
        }
        let (first, last) = (losses[0], losses[losses.len() - 1]);
        assert!(
            last.is_finite() && last < 0.9 * first,
            "{text}: {first} -> {last}"
        );
    }
}

/// A convolution over no input channel gives its bias, forward and
/// backward, on every product path (the direct and phase-copy paths once
/// read taps from an empty image; the net fuzzer found it).
#[test]
fn a_convolution_over_no_channel_gives_its_bias() {
    for window in [
        "kernel_size: 3 pad: 1",
        "kernel_size: 3 pad: 1 stride: 2",
        "kernel_size: 1",
        "kernel_size: 5 pad: 2 dilation: 2",
    ] {
        let text = format!(
            r#"force_backward: true input: "x" input_shape {{ dim: 2 dim: 0 dim: 6 dim: 6 }}
               layer {{ name: "c" type: "Convolution" bottom: "x" top: "y"
                       convolution_param {{ num_output: 3 {window}
                                            bias_filler {{ type: "constant" value: 0.5 }} }} }}"#
        );
        let mut net = Net::<f32>::from_prototxt(&text, NetState::train()).unwrap();
        net.forward().unwrap_or_else(|e| panic!("{window}: {e}"));
        let y = net.blob("y").unwrap();
        let count = y.count();
        assert!(count > 0, "{window}");
        assert!(y.to_vec().unwrap().iter().all(|&v| v == 0.5), "{window}");
        y.mutable_cpu_diff().unwrap().fill(1.0);
        net.backward().unwrap_or_else(|e| panic!("{window}: {e}"));
        let bias_grad = net.layer_blobs("c").unwrap()[1].diff_to_vec().unwrap();
        let per_channel = (count / 3) as f32;
        assert!(
            bias_grad.iter().all(|&g| g == per_channel),
            "{window}: {bias_grad:?}"
        );
    }
}

/// The forks' public nets build from their own prototxts: PSPNet-50
/// (the BN and Interp forks' layers) at its 473 x 473 input, and
/// py-faster-rcnn's ZF test net (its Python proposal layer, ROIPooling,
/// the fork's Dropout without scale_train) and py-R-FCN's (PSROIPooling)
/// run: proposals inside the image, each region's class probabilities
/// summing to 1; the SSDLite and Pelee detectors run. (Their outputs
/// against OpenCV's and a NumPy port of the proposal layer are
/// `scripts/opencv_peer.py`'s.)
#[test]
fn the_forks_public_nets_build_and_run() {
    let nets = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/nets");
    let psp = Net::<f32>::from_file(
        nets.join("pspnet50_ade20k/pspnet50_ADE20K_473.prototxt"),
        NetState::test(),
    )
    .unwrap();
    assert_eq!(
        psp.blob("conv6_interp").unwrap().shape(),
        [1, 150, 473, 473]
    );
    assert_eq!(
        psp.blob("conv5_3_pool1_interp").unwrap().shape(),
        [1, 512, 60, 60]
    );

    // py-faster-rcnn's ZF (21 class-specific boxes) and py-R-FCN's
    // ResNet-50 (PSROIPooling, class-agnostic boxes).
    for (file, boxes) in [
        ("faster_rcnn_zf/faster_rcnn_test.pt", 84),
        ("rfcn_resnet50/test_agnostic.prototxt", 8),
    ] {
        blob_kernels::cpu::set_seed(3);
        let mut det = Net::<f32>::from_file(nets.join(file), NetState::test()).unwrap();
        blob_kernels::cpu::uniform(
            -1.0,
            1.0,
            &mut det.blob("data").unwrap().mutable_cpu_data().unwrap(),
        )
        .unwrap();
        det.blob("im_info")
            .unwrap()
            .mutable_cpu_data()
            .unwrap()
            .copy_from_slice(&[224.0, 224.0, 1.0]);
        for p in det.param_blobs() {
            let (lo, hi) = if p.num_axes() >= 2 {
                (-0.05, 0.05)
            } else {
                (0.5, 1.0)
            };
            blob_kernels::cpu::uniform(lo, hi, &mut p.mutable_cpu_data().unwrap()).unwrap();
        }
        det.forward().unwrap_or_else(|e| panic!("{file}: {e}"));
        let rois = det.blob("rois").unwrap();
        let count = rois.shape()[0];
        assert!(
            (1..=300).contains(&count) && rois.shape()[1] == 5,
            "{file}: {:?}",
            rois.shape()
        );
        for roi in rois.to_vec().unwrap().chunks(5) {
            assert_eq!(roi[0], 0.0);
            assert!(
                roi[1..].iter().all(|v| (0.0..=223.0).contains(v)),
                "{roi:?}"
            );
            assert!(roi[1] <= roi[3] && roi[2] <= roi[4], "{roi:?}");
        }
        let prob = det.blob("cls_prob").unwrap();
        assert_eq!(prob.count(), count * 21, "{file}");
        for row in prob.to_vec().unwrap().chunks(21) {
            assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-4, "{file}");
        }
        assert_eq!(
            det.blob("bbox_pred").unwrap().count(),
            count * boxes,
            "{file}"
        );
    }

    // MobileNetV2-SSDLite (ReLU6, Silence) and Pelee (fractional prior
    // sizes) detect with random weights.
    for file in [
        "mobilenetv2_ssdlite/deploy.prototxt",
        "pelee_ssd/deploy_merged.prototxt",
    ] {
        blob_kernels::cpu::set_seed(4);
        let mut net = Net::<f32>::from_file(nets.join(file), NetState::test()).unwrap();
        blob_kernels::cpu::uniform(
            0.0,
            1.0,
            &mut net.blob("data").unwrap().mutable_cpu_data().unwrap(),
        )
        .unwrap();
        for p in net.param_blobs() {
            let (lo, hi) = if p.num_axes() >= 2 {
                (-0.05, 0.05)
            } else {
                (0.5, 1.0)
            };
            blob_kernels::cpu::uniform(lo, hi, &mut p.mutable_cpu_data().unwrap()).unwrap();
        }
        net.forward().unwrap_or_else(|e| panic!("{file}: {e}"));
        let out = net.blob("detection_out").unwrap();
        assert_eq!(out.shape()[3], 7, "{file}");
        assert!(
            out.to_vec().unwrap().iter().all(|v| v.is_finite()),
            "{file}"
        );
    }
}
