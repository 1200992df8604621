//! `loss.cu` (EuclideanLoss, SigmoidCrossEntropyLoss) against the CPU
//! sides of the layers, called as `layers/src/loss/cuda.rs` calls them:
//! the runs, then their total, then the gradient.

use blob_layers::DynLayer;
use blob_layers::registry::LayerRegistry;
use blob_runtime::Blob;
use cuda_on_cpu as k;

use crate::{assert_close, random};

/// Values a run sums: `layers/src/loss/cuda.rs`'s `RUN`.
const RUN: usize = 256;

/// The layer's loss and its first bottom's gradient at loss weight
/// `weight`, on the CPU.
fn cpu(text: &str, a: &[f32], b: &[f32], shape: &[usize], weight: f32) -> (f32, Vec<f32>) {
    let mut layer: Box<dyn DynLayer<f32>> = LayerRegistry::with_caffe_layers()
        .build_text(text)
        .unwrap_or_else(|e| panic!("{text}: {e}"));
    let a = Blob::from_vec(shape, a.to_vec()).unwrap();
    let b = Blob::from_vec(shape, b.to_vec()).unwrap();
    let mut top = Blob::default();
    let shapes = layer.reshape(&[&a, &b], &[&top]).unwrap();
    top.reshape(&shapes[0].dims).unwrap();
    layer.forward(&[&a, &b], &[&top]).unwrap();
    top.mutable_cpu_diff().unwrap()[0] = weight;
    let labels_take_none = text.contains("SigmoidCrossEntropyLoss");
    layer
        .backward(&[&top], &[true, !labels_take_none], &[&a, &b])
        .unwrap();
    (top.to_vec().unwrap()[0], a.diff_to_vec().unwrap())
}

/// The runs' sums and counts into the loss: `loss_total_f32`.
fn total(sums: &[f64], counts: &[f64], divisor: f64) -> ([f64; 2], f32) {
    let (mut totals, mut loss) = ([f64::NAN; 2], [f32::NAN]);
    // SAFETY: sums and counts hold a value a run, totals two, loss one.
    unsafe {
        k::loss_total_f32(
            1,
            sums.len() as i64,
            sums,
            counts,
            divisor,
            &mut totals,
            &mut loss,
        )
    };
    (totals, loss[0])
}

#[test]
fn euclidean_loss_and_gradient_as_the_cpu() {
    // More values than one run: the runs and their total both count.
    let shape = [6, 100];
    let n = 600;
    let (a, b) = (random(n, 1, -2.0, 2.0), random(n, 2, -2.0, 2.0));
    let (want_loss, want_da) = cpu("type: 'EuclideanLoss'", &a, &b, &shape, 0.5);
    let runs = n.div_ceil(RUN);
    let (mut sums, mut counts) = (vec![f64::NAN; runs], vec![f64::NAN; runs]);
    // SAFETY: a and b hold n values; sums and counts one a run.
    unsafe { k::euclidean_runs_f32(runs, n as i64, RUN as i64, &a, &b, &mut sums, &mut counts) };
    assert_eq!(counts.iter().sum::<f64>(), n as f64);
    let (_, loss) = total(&sums, &counts, 2.0 * 6.0);
    assert_close("loss", &[loss], &[want_loss], 1e-6);
    let mut da = vec![f32::NAN; n];
    // SAFETY: a, b and da hold n values.
    unsafe { k::euclidean_backward_f32(n, n as i64, 0.5 / 6.0, &a, &b, &mut da) };
    assert_close("gradient", &da, &want_da, 1e-6);
}

#[test]
fn sigmoid_cross_entropy_with_ignored_targets_as_the_cpu() {
    let shape = [4, 150];
    let n = 600;
    let x = random(n, 3, -6.0, 6.0);
    // Targets 0 and 1, every seventh the ignored label 2.
    let t: Vec<f32> = random(n, 4, 0.0, 1.0)
        .iter()
        .enumerate()
        .map(|(i, v)| if i % 7 == 0 { 2.0 } else { v.round() })
        .collect();
    let valid = t.iter().filter(|&&v| v != 2.0).count();
    for (normalization, divisor) in [("VALID", 0.0), ("BATCH_SIZE", 4.0)] {
        let text = format!(
            "type: 'SigmoidCrossEntropyLoss' loss_param {{ ignore_label: 2 normalization: {normalization} }}"
        );
        let (want_loss, want_dx) = cpu(&text, &x, &t, &shape, 2.0);
        let runs = n.div_ceil(RUN);
        let (mut sums, mut counts) = (vec![f64::NAN; runs], vec![f64::NAN; runs]);
        // SAFETY: x and t hold n values; sums and counts one a run.
        unsafe {
            k::sigmoid_cross_entropy_runs_f32(
                runs,
                n as i64,
                RUN as i64,
                &x,
                &t,
                1,
                2,
                &mut sums,
                &mut counts,
            )
        };
        let (totals, loss) = total(&sums, &counts, divisor);
        assert_eq!(totals[1], valid as f64, "{normalization}");
        assert_close(normalization, &[loss], &[want_loss], 1e-6);
        let mut dx = vec![f32::NAN; n];
        // SAFETY: x, t and dx hold n values, totals two.
        unsafe {
            k::sigmoid_cross_entropy_backward_f32(
                n, n as i64, &x, &t, 1, 2, 2.0, divisor, &totals, &mut dx,
            )
        };
        assert_close(normalization, &dx, &want_dx, 1e-6);
    }
}

#[test]
fn contrastive_loss_and_gradients_as_the_cpu() {
    let (pairs, channels) = (9, 5);
    let n = pairs * channels;
    let (a, b) = (random(n, 5, -1.0, 1.0), random(n, 6, -1.0, 1.0));
    // Similar, dissimilar, and 0.5 (Caffe truncates it: dissimilar).
    let y: Vec<f32> = (0..pairs).map(|j| [1.0, 0.0, 0.5][j % 3]).collect();
    for legacy in [false, true] {
        let text = format!(
            "type: 'ContrastiveLoss' contrastive_loss_param {{ margin: 1.5 legacy_version: {legacy} }}"
        );
        let mut layer: Box<dyn DynLayer<f32>> = LayerRegistry::with_caffe_layers()
            .build_text(&text)
            .unwrap();
        let blobs = [
            Blob::from_vec(&[pairs, channels, 1, 1], a.clone()).unwrap(),
            Blob::from_vec(&[pairs, channels, 1, 1], b.clone()).unwrap(),
            Blob::from_vec(&[pairs, 1, 1, 1], y.clone()).unwrap(),
        ];
        let bottoms: Vec<&Blob<f32>> = blobs.iter().collect();
        let mut top = Blob::default();
        let shapes = layer.reshape(&bottoms, &[&top]).unwrap();
        top.reshape(&shapes[0].dims).unwrap();
        layer.forward(&bottoms, &[&top]).unwrap();
        top.mutable_cpu_diff().unwrap()[0] = 3.0;
        layer
            .backward(&[&top], &[true, true, false], &bottoms)
            .unwrap();

        let (mut terms, mut counts) = (vec![f64::NAN; pairs], vec![f64::NAN; pairs]);
        let legacy = i32::from(legacy);
        // SAFETY: a and b hold `channels` values a pair, y and the terms
        // and counts one.
        unsafe {
            k::contrastive_pairs_f32(
                pairs,
                pairs as i64,
                channels as i64,
                &a,
                &b,
                &y,
                1.5,
                legacy,
                &mut terms,
                &mut counts,
            )
        };
        let (_, loss) = total(&terms, &counts, 2.0 * pairs as f64);
        assert_close(&text, &[loss], &[top.to_vec().unwrap()[0]], 1e-6);
        for (i, sign) in [(0, 1.0), (1, -1.0)] {
            let mut dx = vec![f32::NAN; n];
            let alpha = sign * 3.0 / pairs as f64;
            // SAFETY: as above; dx holds n values.
            unsafe {
                k::contrastive_backward_f32(
                    pairs,
                    pairs as i64,
                    channels as i64,
                    &a,
                    &b,
                    &y,
                    1.5,
                    legacy,
                    alpha,
                    &mut dx,
                )
            };
            assert_close(&text, &dx, &blobs[i].diff_to_vec().unwrap(), 1e-6);
        }
    }
}
