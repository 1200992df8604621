//! `softmax.cu` against the CPU Softmax and SoftmaxWithLoss, as
//! `softmax/cuda.rs` calls the kernels (the loss's terms summed in order
//! by one thread).

use blob_layers::{Softmax, SoftmaxWithLoss};
use blob_runtime::typed::{Dyn, TypedBlob};
use blob_runtime::{Blob, blob};
use cuda_on_cpu as k;

use crate::{assert_close, random, run_on_cpu};

blob!(shape Scores = _, 10);

#[test]
fn softmax_matches_cpu() {
    let (rows, classes) = (6, 10);
    let n = rows * classes;
    let x = random(n, 1, -3.0, 3.0);
    let dprob = random(n, 2, -1.0, 1.0);
    let want = run_on_cpu(
        &mut Softmax::<f32, Scores>::new(),
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
    let logits: TypedBlob<f32, Scores> = Blob::new(&[rows, classes])
        .unwrap()
        .try_into_static()
        .unwrap();
    logits.mutable_cpu_data().unwrap().copy_from_slice(&x);
    let label_blob: TypedBlob<f32, (Dyn,)> = Blob::new(&[rows]).unwrap().try_into_static().unwrap();
    label_blob
        .mutable_cpu_data()
        .unwrap()
        .copy_from_slice(&labels);
    let mut loss_layer = SoftmaxWithLoss::<f32, Scores>::new();
    loss_layer.forward(&logits, &label_blob).unwrap();
    loss_layer.backward(&logits, &label_blob).unwrap();
    let want_loss = loss_layer.value().unwrap();

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
    assert_close("loss gradient", &dx, &logits.diff_to_vec().unwrap(), 1e-6);
}
