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

#[test]
fn softmax_loss_matches_cpu() {
    let (rows, classes) = (6, 10);
    let n = rows * classes;
    let x = random(n, 5, -3.0, 3.0);
    let labels = [0.0, 9.0, 3.0, 3.0, 7.0, 1.0];
    let mut net = Net::<f32>::from_prototxt(
        r#"input: "x" input_shape { dim: 6 dim: 10 } input: "label" input_shape { dim: 6 }
           force_backward: true
           layer { name: "loss" type: "SoftmaxWithLoss" bottom: "x" bottom: "label" top: "loss" }"#,
        NetState::train(),
    )
    .unwrap();
    let (logits, label_blob) = (net.blob("x").unwrap(), net.blob("label").unwrap());
    logits.mutable_cpu_data().unwrap().copy_from_slice(&x);
    label_blob
        .mutable_cpu_data()
        .unwrap()
        .copy_from_slice(&labels);
    let want_loss = net.forward().unwrap();
    net.backward().unwrap();
    let want_dx = net.blob("x").unwrap().diff_to_vec().unwrap();

    let mut prob = vec![f32::NAN; n];
    // SAFETY: x and prob hold rows*classes values.
    unsafe { k::softmax_rows_f32(rows, rows as i64, classes as i32, 1, &x, &mut prob) };
    let mut terms = vec![f32::NAN; rows];
    // SAFETY: prob holds rows*classes values, labels and terms rows.
    unsafe {
        k::softmax_loss_rows_f32(
            rows,
            rows as i64,
            classes as i32,
            &prob,
            &labels,
            &mut terms,
        )
    };
    let mut loss = [f32::NAN];
    // SAFETY: terms holds rows values, loss one.
    unsafe { k::softmax_loss_mean_f32(1, rows as i64, &terms, &mut loss) };
    assert_close("loss", &loss, &[want_loss], 1e-6);
    let mut dx = vec![f32::NAN; n];
    // SAFETY: prob and dx hold n values, labels rows.
    unsafe {
        k::softmax_loss_backward_f32(
            n,
            n as i64,
            classes as i32,
            &prob,
            &labels,
            1.0 / rows as f32,
            &mut dx,
        )
    };
    assert_close("loss gradient", &dx, &want_dx, 1e-6);
}
