//! OpenCV's Caffe-importer layer tests (opencv_extra `testdata/dnn/layers`,
//! the prototxts, models, inputs and outputs real Caffe and its forks
//! wrote; `tests/fixtures/opencv-layers`), each at OpenCV's own tolerances:
//! the mean absolute difference within 1e-5 and the largest within 1e-4
//! (`normAssert`'s defaults), the same calls OpenCV's test makes.

use std::path::{Path, PathBuf};

use blob_layers::net::{Net, NetState};
use blob_runtime::{Blob, CaffeModel, npy};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/opencv-layers")
        .join(name)
}

/// OpenCV's `normAssert(ref, out, "", 1e-5, 1e-4)`.
fn norm_assert(what: &str, want: &[f32], got: &[f32]) {
    assert_eq!(want.len(), got.len(), "{what}: sizes");
    let diffs: Vec<f64> = want
        .iter()
        .zip(got)
        .map(|(a, b)| f64::from(a - b).abs())
        .collect();
    let l1 = diffs.iter().sum::<f64>() / diffs.len() as f64;
    let linf = diffs.iter().copied().fold(0.0, f64::max);
    assert!(
        l1 <= 1e-5 && linf <= 1e-4,
        "{what}: l1 {l1:e}, lInf {linf:e}"
    );
}

/// The net of `name.prototxt` (with `name.caffemodel`'s weights),
/// built at the inputs' shapes, run on the inputs.
fn run(name: &str, weights: bool, inputs: &[(&str, &Blob<f32>)]) -> Net<f32> {
    let mut builder = Net::<f32>::builder().state(NetState::test());
    for (blob, value) in inputs {
        builder = builder.input_shape(blob, value.shape());
    }
    let mut net = builder
        .from_file(fixture(&format!("{name}.prototxt")))
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    if weights {
        let model = CaffeModel::open(fixture(&format!("{name}.caffemodel"))).unwrap();
        let report = net.copy_from(&model).unwrap();
        // Caffe copies weights by layer name, so of two layers named
        // alike (shared_weights' two "conv"s) only the last takes the
        // model's blobs; the first keeps its fillers, as in Caffe.
        let duplicated = |layer: &String| net.layer_names().filter(|n| n == layer).count() > 1;
        assert!(
            report.missing.iter().all(duplicated),
            "{name}: no weights for {:?}",
            report.missing
        );
    }
    for (blob, value) in inputs {
        let input = net
            .blob(blob)
            .unwrap_or_else(|| panic!("{name}: no blob {blob}"));
        input
            .mutable_cpu_data()
            .unwrap()
            .copy_from_slice(&value.cpu_data().unwrap());
    }
    net.forward().unwrap_or_else(|e| panic!("{name}: {e}"));
    net
}

/// OpenCV's `testLayerUsingCaffeModels(name, use_model, common_input)`.
fn layer_test(name: &str, use_model: bool, common_input: bool) {
    let input_file = if common_input {
        "blob.npy".to_string()
    } else {
        format!("{name}.input.npy")
    };
    let input: Blob<f32> = npy::read(fixture(&input_file)).unwrap();
    let want: Blob<f32> = npy::read(fixture(&format!("{name}.npy"))).unwrap();
    let net = run(name, use_model, &[("input", &input)]);
    let out = net.blob("output").unwrap();
    assert_eq!(
        out.count(),
        want.count(),
        "{name}: {:?} vs {:?}",
        out.shape(),
        want.shape()
    );
    norm_assert(name, &want.to_vec().unwrap(), &out.to_vec().unwrap());
}

#[test]
fn softmax() {
    layer_test("layer_softmax", false, true);
}

#[test]
fn lrn() {
    layer_test("layer_lrn_spatial", false, true);
    layer_test("layer_lrn_channels", false, true);
}

#[test]
fn convolution() {
    layer_test("layer_convolution", true, true);
}

#[test]
fn deconvolution() {
    layer_test("layer_deconvolution", true, false);
}

#[test]
fn inner_product() {
    layer_test("layer_inner_product", true, true);
}

#[test]
fn pooling() {
    layer_test("layer_pooling_max", false, true);
    layer_test("layer_pooling_ave", false, true);
}

#[test]
fn mvn() {
    layer_test("layer_mvn", false, true);
}

#[test]
fn batch_norm() {
    layer_test("layer_batch_norm", true, true);
    layer_test("layer_batch_norm_local_stats", true, false);
}

#[test]
fn relu_and_dropout() {
    layer_test("layer_relu", false, true);
    layer_test("layer_dropout", false, true);
}

#[test]
fn concat() {
    layer_test("layer_concat", false, true);
    layer_test("layer_concat_optim", true, false);
    layer_test("layer_concat_shared_input", true, false);
}

#[test]
fn eltwise() {
    layer_test("layer_eltwise", false, true);
}

#[test]
fn prelu() {
    layer_test("layer_prelu", true, true);
    layer_test("layer_prelu_fc", true, false);
}

/// DeepLab's `Interp`, output written by the fork.
#[test]
fn interp() {
    layer_test("layer_interp", false, false);
}

/// Fast R-CNN's `ROIPooling`, output written by rbgirshick's fork.
#[test]
fn roi_pooling() {
    let input: Blob<f32> = npy::read(fixture("net_roi_pooling.input.npy")).unwrap();
    let rois: Blob<f32> = npy::read(fixture("net_roi_pooling.rois.npy")).unwrap();
    let want: Blob<f32> = npy::read(fixture("net_roi_pooling.npy")).unwrap();
    let net = run(
        "net_roi_pooling",
        false,
        &[("input", &input), ("rois", &rois)],
    );
    let out = net.blob("output").unwrap();
    assert_eq!(out.shape(), want.shape());
    norm_assert(
        "net_roi_pooling",
        &want.to_vec().unwrap(),
        &out.to_vec().unwrap(),
    );
}

#[test]
fn split_and_slice_give_back_their_input() {
    let input = Blob::<f32>::new(&[6, 12]).unwrap();
    blob_kernels::cpu::set_seed(0);
    blob_kernels::cpu::uniform(-1.0, 1.0, &mut input.mutable_cpu_data().unwrap()).unwrap();
    let net = run("reshape_and_slice_routines", false, &[("input", &input)]);
    norm_assert(
        "reshape_and_slice_routines",
        &input.to_vec().unwrap(),
        &net.blob("output").unwrap().to_vec().unwrap(),
    );
}

#[test]
fn old_and_new_inputs_in_one_net() {
    let image = |seed: u64| {
        let b = Blob::<f32>::new(&[1, 3, 10, 11]).unwrap();
        blob_kernels::cpu::set_seed(seed);
        blob_kernels::cpu::uniform(0.0, 255.0, &mut b.mutable_cpu_data().unwrap()).unwrap();
        b.to_vec().unwrap()
    };
    let (first, second) = (image(1), image(2));
    let part = |v: &[f32], channels: std::ops::Range<usize>| {
        let b = Blob::<f32>::new(&[1, channels.len(), 10, 11]).unwrap();
        b.mutable_cpu_data()
            .unwrap()
            .copy_from_slice(&v[channels.start * 110..channels.end * 110]);
        b
    };
    let inputs = [
        ("old_style_input_blue_green", part(&first, 0..2)),
        ("different_name_for_red", part(&first, 2..3)),
        ("input_layer_blue_green", part(&second, 0..2)),
        ("old_style_input_red", part(&second, 2..3)),
    ];
    let refs: Vec<(&str, &Blob<f32>)> = inputs.iter().map(|(n, b)| (*n, b)).collect();
    let net = run("net_input", false, &refs);
    let want: Vec<f32> = first.iter().zip(&second).map(|(a, b)| a + b).collect();
    norm_assert(
        "net_input",
        &want,
        &net.blob("output").unwrap().to_vec().unwrap(),
    );
}

#[test]
fn shared_weights() {
    let a = Blob::from_vec(&[1, 1, 2, 2], vec![0.0f32, 2.0, 4.0, 6.0]).unwrap();
    let b = Blob::from_vec(&[1, 1, 2, 2], vec![1.0f32, 3.0, 5.0, 7.0]).unwrap();
    let net = run("shared_weights", true, &[("input_1", &a), ("input_2", &b)]);
    let out = net.outputs()[0];
    let sum = net.blob(out).unwrap().to_vec().unwrap();
    assert_eq!(sum[..2], [12.0, 16.0]);
}

/// Faster R-CNN's proposals, written by py-faster-rcnn's Python layer:
/// as OpenCV's test, the reference rows first (OpenCV pads with zero
/// rows; blobflow gives exactly the proposals), then the same net with
/// the prototxt's commented-out `type: "Python"` layer.
#[test]
fn faster_rcnn_proposal() {
    let scores: Blob<f32> = npy::read(fixture("net_faster_rcnn_proposal.scores.npy")).unwrap();
    let deltas: Blob<f32> = npy::read(fixture("net_faster_rcnn_proposal.deltas.npy")).unwrap();
    let info = Blob::from_vec(&[1, 3], vec![600.0f32, 800.0, 1.6]).unwrap();
    let inputs = [
        ("rpn_cls_prob_reshape", &scores),
        ("rpn_bbox_pred", &deltas),
        ("im_info", &info),
    ];
    let check = |net: &Net<f32>| {
        for (top, file) in [("rois", "out_rois"), ("scores", "out_scores")] {
            let want: Blob<f32> =
                npy::read(fixture(&format!("net_faster_rcnn_proposal.{file}.npy"))).unwrap();
            let got = net.blob(top).unwrap();
            assert_eq!(got.shape(), want.shape(), "{top}");
            norm_assert(top, &want.to_vec().unwrap(), &got.to_vec().unwrap());
        }
    };
    check(&run("net_faster_rcnn_proposal", false, &inputs));

    let text = std::fs::read_to_string(fixture("net_faster_rcnn_proposal.prototxt")).unwrap();
    let start = text
        .rfind("layer {\n  name: 'output'\n  type: 'Proposal'")
        .unwrap();
    let python = format!(
        "{}layer {{ name: 'output' type: 'Python' bottom: 'rpn_cls_prob_reshape' \
         bottom: 'rpn_bbox_pred' bottom: 'im_info' top: 'rois' top: 'scores' \
         python_param {{ module: 'rpn.proposal_layer' layer: 'ProposalLayer' \
         param_str: \"'feat_stride': 9\" }} }}",
        &text[..start]
    );
    let mut builder = Net::<f32>::builder().state(NetState::test());
    for (blob, value) in &inputs {
        builder = builder.input_shape(blob, value.shape());
    }
    let mut net = builder.from_prototxt(&python).unwrap();
    for (blob, value) in &inputs {
        net.blob(blob)
            .unwrap()
            .mutable_cpu_data()
            .unwrap()
            .copy_from_slice(&value.cpu_data().unwrap());
    }
    net.forward().unwrap();
    check(&net);
}

/// Caffe's LSTM and RNN, blobs and outputs as Caffe wrote them (OpenCV
/// tests its own recurrent layers against these): 12 steps of 2 items of
/// 1332 values, 17 hidden units, every sequence continuing.
#[test]
fn lstm_and_rnn() {
    let x: Blob<f32> = npy::read(fixture("recurrent.input.npy")).unwrap();
    let steps = Blob::from_vec(&[12, 2, 1332], x.to_vec().unwrap()).unwrap();
    let mut cont = vec![1.0f32; 24];
    cont[..2].fill(0.0);
    let cont = Blob::from_vec(&[12, 2], cont).unwrap();
    for (kind, files) in [("LSTM", 3), ("RNN", 5)] {
        let stem = kind.to_lowercase();
        let text = format!(
            "input: 'x' input_shape {{ dim: 12 dim: 2 dim: 1332 }} input: 'cont' input_shape {{ dim: 12 dim: 2 }}
             layer {{ name: 'r' type: '{kind}' bottom: 'x' bottom: 'cont' top: 'h' recurrent_param {{ num_output: 17 }} }}"
        );
        let mut net = Net::<f32>::from_prototxt(&text, NetState::test()).unwrap();
        // OpenCV's files name Caffe's blobs w_0, w_1, ...: LSTM's W_xc,
        // b_c, W_hc; RNN's W_xh, b_h, W_hh, W_ho, b_o.
        let layer = net.layer_blobs("r").unwrap();
        assert_eq!(layer.len(), files, "{kind}");
        for (i, blob) in layer.iter().enumerate() {
            let w: Blob<f32> = npy::read(fixture(&format!("{stem}.prototxt.w_{i}.npy"))).unwrap();
            assert_eq!(blob.shape(), w.shape(), "{kind} blob {i}");
            blob.mutable_cpu_data()
                .unwrap()
                .copy_from_slice(&w.cpu_data().unwrap());
        }
        net.blob("x")
            .unwrap()
            .mutable_cpu_data()
            .unwrap()
            .copy_from_slice(&steps.cpu_data().unwrap());
        net.blob("cont")
            .unwrap()
            .mutable_cpu_data()
            .unwrap()
            .copy_from_slice(&cont.cpu_data().unwrap());
        net.forward().unwrap();
        let want: Blob<f32> = npy::read(fixture(&format!("{stem}.prototxt.h_1.npy"))).unwrap();
        norm_assert(
            kind,
            &want.to_vec().unwrap(),
            &net.blob("h").unwrap().to_vec().unwrap(),
        );
    }
}
