//! The CPU layers cut a batch (convolution), one image's output channels
//! (convolution) or its planes (pooling) into one part per core; the
//! results must not depend on how many cores there are. Each layer runs forward and backward in a pool of 1 thread and of
//! 3 (uneven parts), on inputs large enough to be cut.

use blob_layers::{Convolution, Layer, PoolMethod, Pooling};
use blob_runtime::{Blob, blob};

blob!(shape Images = _, 8, 48, 48);

const BATCH: usize = 5;

fn fill(b: &Blob<f64>, seed: u64) {
    let mut state = seed;
    for v in b.mutable_cpu_data().unwrap().iter_mut() {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *v = ((state >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0;
    }
}

/// Forward and backward of a layer from `make` on fixed data in a pool of
/// `threads`: the output, the input gradient and every parameter gradient.
fn run<L: Layer<Elem = f64>>(
    make: &(impl Fn() -> L + Sync),
    (batch, y_dims): (usize, &[usize]),
    threads: usize,
) -> Vec<Vec<f64>> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    pool.install(|| {
        let mut layer = make();
        let x = Blob::<f64>::new(&[batch, 8, 48, 48]).unwrap();
        let y = Blob::<f64>::new(&[batch, y_dims[0], y_dims[1], y_dims[2]]).unwrap();
        fill(&x, 1);
        for p in layer.params() {
            p.mutable_cpu_diff().unwrap().fill(0.5);
        }
        layer.forward_blobs(&x, &y).unwrap();
        // The gradient arriving at y: fixed, whatever the forward gave.
        let dy: Vec<f64> = (0..y.count())
            .map(|i| ((i * 7) % 13) as f64 - 6.0)
            .collect();
        y.mutable_cpu_diff().unwrap().copy_from_slice(&dy);
        layer.backward_blobs(&x, &y, true).unwrap();
        let mut out = vec![y.to_vec().unwrap(), x.diff_to_vec().unwrap()];
        out.extend(layer.params().iter().map(|p| p.diff_to_vec().unwrap()));
        out
    })
}

/// Runs a fresh layer from `make` on 1 core and on 3 and compares every
/// result.
fn same_on_one_core_and_three<L: Layer<Elem = f64>>(
    what: &str,
    make: impl Fn() -> L + Sync,
    shape: (usize, &[usize]),
) -> Vec<Vec<f64>> {
    let one = run(&make, shape, 1);
    let three = run(&make, shape, 3);
    assert_eq!(one.len(), three.len());
    for (k, (a, b)) in one.iter().zip(&three).enumerate() {
        assert_eq!(a.len(), b.len());
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            assert!(
                (x - y).abs() <= 1e-12 * (1.0 + x.abs()),
                "{what}, result {k}[{i}]: {x} on 1 core, {y} on 3"
            );
        }
    }
    one
}

#[test]
fn convolution_gives_the_same_on_one_core_and_three() {
    let make = || {
        let conv = Convolution::<f64, Images, 4, 3, 1, 1>::new().unwrap();
        fill(&conv.weight, 3);
        fill(&conv.bias, 4);
        conv
    };
    let results = same_on_one_core_and_three("convolution", make, (BATCH, &[4, 48, 48]));
    // Weight and bias gradients accumulate onto what was there (0.5).
    assert!(
        results[2].iter().all(|&g| g != 0.5),
        "weight gradient untouched"
    );
}

#[test]
fn one_images_channels_give_the_same_on_one_core_and_three() {
    // 40 output channels on 3 cores: parts of 16, 16 and 8.
    let make = || {
        let conv = Convolution::<f64, Images, 40, 3, 1, 1>::new().unwrap();
        fill(&conv.weight, 5);
        fill(&conv.bias, 6);
        conv
    };
    let results = same_on_one_core_and_three("one image's convolution", make, (1, &[40, 48, 48]));
    assert!(results[0].iter().all(|v| v.is_finite() && *v != 0.0));
}

#[test]
fn pooling_gives_the_same_on_one_core_and_three() {
    let max = || Pooling::<f64, Images, 2, 2>::new(PoolMethod::Max);
    same_on_one_core_and_three("max pooling", max, (BATCH, &[8, 24, 24]));
    let ave = || Pooling::<f64, Images, 3, 3>::new(PoolMethod::Ave);
    same_on_one_core_and_three("average pooling", ave, (BATCH, &[8, 16, 16]));
}
