//! `softmax.cu` against the CPU Softmax and SoftmaxWithLoss, as
//! `softmax/cuda.rs` calls the kernels (the loss's terms summed in order
//! by one thread).

use blob_layers::net::{Net, NetState};
use cuda_on_cpu as k;

use crate::{assert_close, random, run_on_cpu};

#[test]
fn softmax_matches_cpu() {
    let (rows, classes) = (6, 10);
    let n = rows * classes;
    let x = random(n, 1, -3.0, 3.0);
    let dprob = random(n, 2, -1.0, 1.0);
    let want = run_on_cpu(
        r#"type: "Softmax""#,
        &[],
        (&[rows, classes], &x),
        (&[rows, classes], &dprob),
    );
    let mut prob = vec![f32::NAN; n];
    // SAFETY: x and prob hold rows*classes values.
    unsafe { k::softmax_rows_f32(rows, rows as i64, classes as i32, 1, &x, &mut prob) };
    let mut dx = vec![f32::NAN; n];
    // SAFETY: prob, dprob and dx hold rows*classes values.
    unsafe {
        k::softmax_backward_f32(rows, rows as i64, classes as i32, 1, &prob, &dprob, &mut dx)
    };
    assert_close("softmax", &prob, &want.y, 1e-6);
    assert_close("softmax gradient", &dx, &want.dx, 1e-5);
}

/// The loss of `net_text`'s SoftmaxWithLoss on the CPU, and the kernels'
/// as `softmax/cuda.rs` runs them: the same loss and logits' gradient.
fn loss_matches_cpu(
    net_text: &str,
    (outer, classes, inner): (usize, usize, usize),
    labels: &[f32],
    (ignore, weights): (Option<i64>, &[f32]),
    divisor: f32,
) {
    let n = outer * classes * inner;
    let positions = outer * inner;
    let x = random(n, 5, -3.0, 3.0);
    let mut net = Net::<f32>::from_prototxt(net_text, NetState::train()).unwrap();
    let (logits, label_blob) = (net.blob("x").unwrap(), net.blob("label").unwrap());
    logits.mutable_cpu_data().unwrap().copy_from_slice(&x);
    label_blob
        .mutable_cpu_data()
        .unwrap()
        .copy_from_slice(labels);
    let want_loss = net.forward().unwrap();
    net.backward().unwrap();
    let want_dx = net.blob("x").unwrap().diff_to_vec().unwrap();

    let mut prob = vec![f32::NAN; n];
    // SAFETY: x and prob hold n values.
    unsafe {
        k::softmax_rows_f32(
            positions,
            positions as i64,
            classes as i32,
            inner as i64,
            &x,
            &mut prob,
        )
    };
    let (has_ignore, ignore) = (i32::from(ignore.is_some()), ignore.unwrap_or(0));
    let mut terms = vec![f32::NAN; positions];
    // SAFETY: prob holds n values, labels and terms one a position,
    // weights one a class.
    unsafe {
        k::softmax_loss_terms_f32(
            positions,
            positions as i64,
            classes as i32,
            inner as i64,
            &prob,
            labels,
            has_ignore,
            ignore,
            weights,
            &mut terms,
        )
    };
    let mut loss = [f32::NAN];
    // SAFETY: terms holds a value a position, loss one.
    unsafe { k::softmax_loss_sum_f32(1, positions as i64, &terms, divisor, &mut loss) };
    assert_close("loss", &loss, &[want_loss], 1e-6);
    let mut dx = vec![f32::NAN; n];
    // SAFETY: prob and dx hold n values, labels one a position, weights
    // one a class.
    unsafe {
        k::softmax_loss_backward_f32(
            n,
            n as i64,
            classes as i32,
            inner as i64,
            &prob,
            labels,
            has_ignore,
            ignore,
            weights,
            1.0 / divisor,
            &mut dx,
        )
    };
    assert_close("loss gradient", &dx, &want_dx, 1e-6);
}

#[test]
fn softmax_loss_matches_cpu() {
    loss_matches_cpu(
        r#"input: "x" input_shape { dim: 6 dim: 10 } input: "label" input_shape { dim: 6 }
           force_backward: true
           layer { name: "loss" type: "SoftmaxWithLoss" bottom: "x" bottom: "label" top: "loss" }"#,
        (6, 10, 1),
        &[0.0, 9.0, 3.0, 3.0, 7.0, 1.0],
        (None, &[1.0; 10]),
        6.0,
    );
}

/// SegNet's spatial loss: a label map, class weights, an ignored label
/// (VALID counts the 13 positions not ignored).
#[test]
fn weighted_spatial_softmax_loss_matches_cpu() {
    let weights = [0.5f32, 2.0, 1.25, 0.75];
    let labels: Vec<f32> = (0..16).map(|i| ((i * 7 + 3) % 5) as f32).collect();
    let ignored = labels.iter().filter(|&&l| l == 4.0).count();
    assert_eq!(ignored, 3);
    loss_matches_cpu(
        r#"input: "x" input_shape { dim: 2 dim: 4 dim: 2 dim: 4 }
           input: "label" input_shape { dim: 2 dim: 1 dim: 2 dim: 4 }
           force_backward: true
           layer { name: "loss" type: "SoftmaxWithLoss" bottom: "x" bottom: "label" top: "loss"
                   loss_param { ignore_label: 4 weight_by_label_freqs: true
                                class_weighting: 0.5 class_weighting: 2.0
                                class_weighting: 1.25 class_weighting: 0.75 } }"#,
        (2, 4, 8),
        &labels,
        (Some(4), &weights),
        13.0,
    );
}
