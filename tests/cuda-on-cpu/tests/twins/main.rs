//! Each CUDA kernel, run on the CPU (see the crate's docs), against the
//! CPU side of its op: the same calls in the same order as the layer's
//! `cuda.rs` makes them, cuBLAS's gemms done by the CPU's gemm.

mod argmax;
mod batch_norm;
mod concat;
mod conv;
mod coverage;
mod elementwise;
mod eltwise;
mod forks;
mod layers;
mod loss;
mod mainline;
mod neuron;
mod normalize;
mod permute;
mod pool;
mod prelu;
mod scale;
mod softmax;
mod solver;
mod sums;

use blob_kernels::cpu;
use blob_runtime::Blob;

/// `n` values uniform on `[lo, hi]` from `seed`.
pub fn random(n: usize, seed: u64, lo: f32, hi: f32) -> Vec<f32> {
    let mut v = vec![0.0; n];
    cpu::set_seed(seed);
    cpu::uniform(lo, hi, &mut v).expect("lo <= hi");
    v
}

/// Fails unless every value of `got` is within `rel` of the scale of
/// `want` (its largest magnitude) from `want`.
#[track_caller]
pub fn assert_close(what: &str, got: &[f32], want: &[f32], rel: f32) {
    assert_eq!(got.len(), want.len(), "{what}: lengths differ");
    let scale = want.iter().fold(0f32, |m, v| m.max(v.abs())).max(1e-30);
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= rel * scale,
            "{what}: element {i} is {g}, the CPU's {w} (scale {scale})"
        );
    }
}

/// A net of one layer reading `x` of `shape` into `y`, run forward and
/// backward (from `dy`) on the CPU: `y`, `x`'s diff and the parameters'
/// diffs, with the parameters set to `params`.
pub fn cpu_net(
    layer: &str,
    shape: &[usize],
    x: &[f32],
    dy: &[f32],
    params: &[Vec<f32>],
) -> (Vec<f32>, Vec<f32>, Vec<Vec<f32>>) {
    let dims: String = shape.iter().map(|d| format!("dim: {d} ")).collect();
    let text = format!("force_backward: true input: \"x\" input_shape {{ {dims}}} {layer}");
    let mut net =
        blob_layers::net::Net::<f32>::from_prototxt(&text, blob_layers::net::NetState::test())
            .unwrap();
    for (blob, values) in net.layer_blobs("l").unwrap().iter().zip(params) {
        blob.mutable_cpu_data().unwrap().copy_from_slice(values);
    }
    net.blob("x")
        .unwrap()
        .mutable_cpu_data()
        .unwrap()
        .copy_from_slice(x);
    net.forward().unwrap();
    let y = net.blob("y").unwrap().to_vec().unwrap();
    net.blob("y")
        .unwrap()
        .mutable_cpu_diff()
        .unwrap()
        .copy_from_slice(dy);
    net.backward().unwrap();
    let dx = net.blob("x").unwrap().diff_to_vec().unwrap();
    let dp = net
        .layer_blobs("l")
        .unwrap()
        .iter()
        .map(|b| b.diff_to_vec().unwrap())
        .collect();
    (y, dx, dp)
}

/// What a layer computed on the CPU: the output, the input's gradient and
/// each parameter's gradient.
pub struct CpuRun {
    /// The output's data.
    pub y: Vec<f32>,
    /// The input's diff.
    pub dx: Vec<f32>,
    /// Each parameter's diff, in the layer's order.
    pub param_diffs: Vec<Vec<f32>>,
}

/// Runs the layer that `text` (a `LayerParameter` in text) describes
/// forward on `x` and backward from `dy` on host blobs, its blobs set to
/// `params` and their diffs zeroed first: the CPU side the kernels of its
/// `cuda.rs` must match.
pub fn run_on_cpu(
    text: &str,
    params: &[Vec<f32>],
    (x_shape, x): (&[usize], &[f32]),
    (y_shape, dy): (&[usize], &[f32]),
) -> CpuRun {
    let mut layer = blob_layers::registry::LayerRegistry::<f32>::with_caffe_layers()
        .build_text(text)
        .unwrap();
    let xb = Blob::<f32>::new(x_shape).unwrap();
    xb.mutable_cpu_data().unwrap().copy_from_slice(x);
    let mut yb = Blob::<f32>::default();
    let shapes = layer.reshape(&[&xb], &[&yb]).unwrap();
    assert_eq!(shapes[0].dims, y_shape, "{text}");
    yb.reshape(y_shape).unwrap();
    for (blob, values) in layer.blobs().iter().zip(params) {
        blob.mutable_cpu_data().unwrap().copy_from_slice(values);
        blob.mutable_cpu_diff().unwrap().fill(0.0);
    }
    layer.forward(&[&xb], &[&yb]).unwrap();
    let y = yb.to_vec().unwrap();
    yb.mutable_cpu_diff().unwrap().copy_from_slice(dy);
    layer.backward(&[&yb], &[true], &[&xb]).unwrap();
    CpuRun {
        y,
        dx: xb.diff_to_vec().unwrap(),
        param_diffs: layer
            .blobs()
            .iter()
            .map(|b| b.diff_to_vec().unwrap())
            .collect(),
    }
}
