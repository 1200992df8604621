//! The CPU layers cut a batch (convolution), one image's output channels
//! (convolution) or its planes (pooling) into one part per core; the
//! results must not depend on how many cores there are. Each layer runs
//! forward and backward in a pool of 1 thread and of 3 (uneven parts), on
//! inputs large enough to be cut. Softmax cuts its rows.

use blob_layers::DynLayer;
use blob_layers::registry::LayerRegistry;
use blob_runtime::Blob;

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

/// `f` in a rayon pool of `threads`.
fn in_pool<R: Send>(threads: usize, f: impl FnOnce() -> R + Send) -> R {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap()
        .install(f)
}

/// Forward and backward of the layer `text` describes on fixed data in a
/// pool of `threads`: the output, the input gradient and every parameter
/// gradient.
fn run(text: &str, batch: usize, threads: usize) -> Vec<Vec<f64>> {
    in_pool(threads, || {
        let mut layer: Box<dyn DynLayer<f64>> =
            LayerRegistry::with_caffe_layers().build_text(text).unwrap();
        let x = Blob::<f64>::new(&[batch, 8, 48, 48]).unwrap();
        let mut y = Blob::<f64>::default();
        // The first reshape makes the parameters (Caffe's LayerSetUp).
        let shape = layer.reshape(&[&x], &[&y]).unwrap().remove(0);
        y.reshape(&shape.dims).unwrap();
        fill(&x, 1);
        for (k, p) in layer.blobs().iter().enumerate() {
            fill(p, 3 + k as u64);
            p.mutable_cpu_diff().unwrap().fill(0.5);
        }
        layer.forward(&[&x], &[&y]).unwrap();
        // The gradient arriving at y: fixed, whatever the forward gave.
        let dy: Vec<f64> = (0..y.count())
            .map(|i| ((i * 7) % 13) as f64 - 6.0)
            .collect();
        y.mutable_cpu_diff().unwrap().copy_from_slice(&dy);
        layer.backward(&[&y], &[true], &[&x]).unwrap();
        let mut out = vec![y.to_vec().unwrap(), x.diff_to_vec().unwrap()];
        out.extend(layer.blobs().iter().map(|p| p.diff_to_vec().unwrap()));
        out
    })
}

/// Runs the layer `text` describes on 1 core and on 3 and compares every
/// result.
fn same_on_one_core_and_three(what: &str, text: &str, batch: usize) -> Vec<Vec<f64>> {
    let one = run(text, batch, 1);
    let three = run(text, batch, 3);
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
    let conv = r#"type: "Convolution" convolution_param { num_output: 4 kernel_size: 3 pad: 1 }"#;
    let results = same_on_one_core_and_three("convolution", conv, BATCH);
    assert_eq!(results[0].len(), BATCH * 4 * 48 * 48);
    // Weight and bias gradients accumulate onto what was there (0.5).
    assert!(
        results[2].iter().all(|&g| g != 0.5),
        "weight gradient untouched"
    );
}

#[test]
fn one_images_channels_give_the_same_on_one_core_and_three() {
    // 40 output channels on 3 cores: parts of 16, 16 and 8.
    let conv = r#"type: "Convolution" convolution_param { num_output: 40 kernel_size: 3 pad: 1 }"#;
    let results = same_on_one_core_and_three("one image's convolution", conv, 1);
    assert!(results[0].iter().all(|v| v.is_finite() && *v != 0.0));
}

#[test]
fn pooling_gives_the_same_on_one_core_and_three() {
    let max = r#"type: "Pooling" pooling_param { pool: MAX kernel_size: 2 stride: 2 }"#;
    let pooled = same_on_one_core_and_three("max pooling", max, BATCH);
    assert_eq!(pooled[0].len(), BATCH * 8 * 24 * 24);
    let ave = r#"type: "Pooling" pooling_param { pool: AVE kernel_size: 3 stride: 3 }"#;
    let pooled = same_on_one_core_and_three("average pooling", ave, BATCH);
    assert_eq!(pooled[0].len(), BATCH * 8 * 16 * 16);
}

#[test]
fn softmax_over_rows_gives_the_same_on_one_core_and_three() {
    // Rows of 48 adjacent values (the last axis), 1,920 of them: cut into
    // one run of rows a core.
    let softmax = r#"type: "Softmax" softmax_param { axis: 3 }"#;
    let results = same_on_one_core_and_three("softmax over rows", softmax, BATCH);
    assert_eq!(results[0].len(), BATCH * 8 * 48 * 48);
    for (r, row) in results[0].chunks_exact(48).enumerate() {
        let sum: f64 = row.iter().sum();
        assert!((sum - 1.0).abs() < 1e-12, "row {r} sums to {sum}");
    }
}

/// Forward of the `f32` layer `text` describes over one `shape` image
/// in a pool of `threads`.
fn forward_f32(text: &str, shape: &[usize], threads: usize) -> Vec<f32> {
    in_pool(threads, || {
        let mut layer: Box<dyn DynLayer<f32>> =
            LayerRegistry::with_caffe_layers().build_text(text).unwrap();
        let x = Blob::<f32>::new(shape).unwrap();
        let mut y = Blob::<f32>::default();
        let top = layer.reshape(&[&x], &[&y]).unwrap().remove(0);
        y.reshape(&top.dims).unwrap();
        let fill32 = |b: &Blob<f32>, seed: u64| {
            let wide = Blob::<f64>::new(b.shape()).unwrap();
            fill(&wide, seed);
            let values = wide.to_vec().unwrap();
            for (v, w) in b.mutable_cpu_data().unwrap().iter_mut().zip(values) {
                *v = w as f32;
            }
        };
        fill32(&x, 5);
        for (k, p) in layer.blobs().iter().enumerate() {
            fill32(p, 7 + k as u64);
        }
        layer.forward(&[&x], &[&y]).unwrap();
        y.to_vec().unwrap()
    })
}

#[test]
fn one_images_rows_give_the_same_bits_on_one_core_and_three() {
    // A net's first layer (3 x 3 at stride 2, as MobileNet's and
    // SqueezeNet's), taken directly on AVX2 and AVX-512: one image's 23
    // output rows cut into bands of 8, 8 and 7, each core shifting its
    // own band's copies; and a 5 x 5 window at stride 1 over 16
    // channels (GoogLeNet's 5x5 layers), whose bands overlap by 4 rows.
    for (text, shape) in [
        (
            r#"type: "Convolution" convolution_param { num_output: 32 kernel_size: 3 stride: 2 }"#,
            [1, 3, 48, 48],
        ),
        (
            r#"type: "Convolution" convolution_param { num_output: 24 kernel_size: 5 pad: 2 }"#,
            [1, 16, 29, 31],
        ),
    ] {
        let one = forward_f32(text, &shape, 1);
        let three = forward_f32(text, &shape, 3);
        assert!(one.iter().all(|v| v.is_finite()) && one.iter().any(|&v| v != 0.0));
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&one), bits(&three), "{text}");
    }
}
