//! `permute.cu` against the CPU Permute built from its `permute_param`,
//! as `permute/cuda.rs` calls the kernels: SSD's NCHW to NHWC, a 3-D
//! order (the top padded with a leading axis) and a partial order.

use cuda_on_cpu as k;

use crate::{CpuRun, assert_close, random, run_dyn_on_cpu};

/// The GPU's calls for a bottom of `shape` permuted by `order` (complete).
fn gpu_calls(shape: &[usize], order: &[usize], x: &[f32], dy: &[f32]) -> CpuRun {
    let mut strides = vec![1usize; shape.len()];
    for a in (0..shape.len() - 1).rev() {
        strides[a] = strides[a + 1] * shape[a + 1];
    }
    let pad = 4 - shape.len();
    let (mut d, mut s) = ([1i64; 4], [0i64; 4]);
    for (i, &a) in order.iter().enumerate() {
        d[pad + i] = shape[a] as i64;
        s[pad + i] = strides[a] as i64;
    }
    let n = x.len();
    let mut y = vec![f32::NAN; n];
    let mut dx = vec![f32::NAN; n];
    // SAFETY: x, y, dy and dx hold n values each, and every index the
    // kernels form is below n.
    unsafe {
        k::permute_f32(
            n, n as i64, d[1], d[2], d[3], s[0], s[1], s[2], s[3], x, &mut y,
        );
        k::unpermute_f32(
            n, n as i64, d[1], d[2], d[3], s[0], s[1], s[2], s[3], dy, &mut dx,
        );
    }
    CpuRun {
        y,
        dx,
        param_diffs: vec![],
    }
}

#[test]
fn permute_matches_cpu() {
    for (shape, given, full) in [
        (
            vec![2, 3, 4, 5],
            "order: 0 order: 2 order: 3 order: 1",
            vec![0, 2, 3, 1],
        ),
        (vec![3, 4, 5], "order: 2 order: 0 order: 1", vec![2, 0, 1]),
        (vec![2, 3, 4, 5], "order: 3 order: 1", vec![3, 1, 0, 2]),
    ] {
        let n: usize = shape.iter().product();
        let (x, dy) = (random(n, 1, -1.0, 1.0), random(n, 2, -1.0, 1.0));
        let top: Vec<usize> = full.iter().map(|&a| shape[a]).collect();
        let text = format!(r#"type: "Permute" permute_param {{ {given} }}"#);
        let want = run_dyn_on_cpu(&text, &[], (&shape, &x), (&top, &dy));
        let got = gpu_calls(&shape, &full, &x, &dy);
        assert_close(&format!("{given}: output"), &got.y, &want.y, 0.0);
        assert_close(&format!("{given}: input gradient"), &got.dx, &want.dx, 0.0);
    }
}
