//! Caffe's LeNet, trained by Caffe, on real MNIST digits: the shipped model
//! and the V1-format one misclassify exactly the digits an independent
//! reference implementation does.

use std::path::PathBuf;

use blobflow::layers::lenet::LeNet;

#[path = "support/digits.rs"]
mod digits;

use digits::{digits, root};

/// 0-based indices among the first `n` digits that `model` gets wrong.
fn misclassified(model: PathBuf, n: usize) -> Vec<usize> {
    let data = digits();
    let batch = 100;
    let mut net = LeNet::load(model, batch).unwrap();
    let mut images = vec![0f32; batch * 784];
    let mut wrong = Vec::new();
    for start in (0..n).step_by(batch) {
        data.scaled_into(start, 0.00390625, &mut images);
        let pred = net.predict(&images).unwrap();
        for (j, &p) in pred.iter().enumerate() {
            if p != data.labels[start + j] {
                wrong.push(start + j);
            }
        }
    }
    wrong
}

#[test]
fn shipped_model_misclassifies_exactly_435_and_939_of_the_first_1000() {
    let wrong = misclassified(
        root().join("models/lenet/lenet_iter_10000.caffemodel"),
        1000,
    );
    assert_eq!(wrong, [435, 939]);
    let data = digits();
    assert_eq!((data.labels[435], data.labels[939]), (5, 9));
}

#[test]
fn v1_model_misclassifies_exactly_its_five_of_the_first_1000() {
    let wrong = misclassified(
        root().join("tests/fixtures/lenet_v1/lenet_iter_10000.caffemodel"),
        1000,
    );
    assert_eq!(wrong, [65, 99, 217, 436, 939]);
}

/// A batch of no digits is a batch: the net classifies none, its loss is
/// 0 with no gradient, and it grows back to a real batch afterwards.
#[test]
fn an_empty_batch_runs_through_the_net() {
    let mut net = LeNet::load(root().join("models/lenet/lenet_iter_10000.caffemodel"), 0).unwrap();
    assert!(net.predict(&[]).unwrap().is_empty());
    assert_eq!(net.forward_backward(&[]).unwrap(), 0.0);
    for p in net.params() {
        assert!(p.diff_to_vec().unwrap().iter().all(|&d| d == 0.0));
    }
    let data = digits();
    let mut images = vec![0f32; 2 * 784];
    data.scaled_into(0, 0.00390625, &mut images);
    assert_eq!(net.predict(&images).unwrap(), data.labels[..2]);
}

/// The digits of `0..n` a `Net` built from `prototxt` with `model`'s
/// weights gets wrong, 100 at a time.
fn misclassified_by_net(prototxt: PathBuf, model: PathBuf, n: usize) -> Vec<usize> {
    use blobflow::layers::net::Net;
    let data = digits();
    let batch = 100;
    let mut net = Net::<f32>::builder()
        .input_shape("data", &[batch, 1, 28, 28])
        .from_file(prototxt)
        .unwrap();
    let report = net
        .copy_from(&blobflow::CaffeModel::open(model).unwrap())
        .unwrap();
    assert_eq!(report.copied, ["conv1", "conv2", "ip1", "ip2"]);
    let out = net.outputs()[0].to_string();
    let mut wrong = Vec::new();
    for start in (0..n).step_by(batch) {
        data.scaled_into(
            start,
            0.00390625,
            &mut net.blob("data").unwrap().mutable_cpu_data().unwrap(),
        );
        net.forward().unwrap();
        let prob = net.blob(&out).unwrap().to_vec().unwrap();
        for (j, row) in prob.chunks_exact(10).enumerate() {
            let best = (0..10).fold(0, |b, c| if row[c] > row[b] { c } else { b });
            if best != usize::from(data.labels[start + j]) {
                wrong.push(start + j);
            }
        }
    }
    wrong
}

/// Caffe's own deploy prototxts through `Net` classify all 10,000 digits
/// as the hand-written LeNet does: the same digits wrong, 99.89% with the
/// shipped model and 99.70% with the V1 one (its prototxt in V1 format
/// too, upgraded on reading).
#[test]
fn caffes_lenet_prototxts_through_net_miss_the_same_digits() {
    for (prototxt, model, accuracy) in [
        (
            "models/lenet/lenet.prototxt",
            "models/lenet/lenet_iter_10000.caffemodel",
            0.9989,
        ),
        (
            "tests/fixtures/lenet_v1/lenet.prototxt",
            "tests/fixtures/lenet_v1/lenet_iter_10000.caffemodel",
            0.9970,
        ),
    ] {
        let by_net = misclassified_by_net(root().join(prototxt), root().join(model), 10_000);
        let by_hand = misclassified(root().join(model), 10_000);
        assert_eq!(by_net, by_hand, "{prototxt}");
        let got = 1.0 - by_net.len() as f64 / 10_000.0;
        assert!((got - accuracy).abs() < 1e-9, "{prototxt}: {got}");
    }
}
