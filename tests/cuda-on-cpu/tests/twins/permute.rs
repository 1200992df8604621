//! `permute.cu`'s strided moves against the CPU Permute built from its
//! `permute_param` (SSD's NCHW to NHWC, a 3-D order, the top padded with
//! a leading axis, and a partial order), and against Crop's window.

use cuda_on_cpu as k;

use crate::{CpuRun, assert_close, random, run_on_cpu};

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
    let (y, dx) = strided_moves((d, s, 0), x, dy, x.len());
    CpuRun {
        y,
        dx,
        param_diffs: vec![],
    }
}

/// The kernels' gather of `dy.len()` top values and their scatter back
/// into a bottom of `bottom` values (zeros where no top value goes).
fn strided_moves(
    (d, s, base): ([i64; 4], [i64; 4], i64),
    x: &[f32],
    dy: &[f32],
    bottom: usize,
) -> (Vec<f32>, Vec<f32>) {
    let n = dy.len();
    let (mut y, mut dx) = (vec![f32::NAN; n], vec![0.0f32; bottom]);
    // SAFETY: y and dy hold n values; every source the caller's sizes
    // form lies in x and dx.
    unsafe {
        k::gather_strided_f32(
            n, n as i64, d[1], d[2], d[3], s[0], s[1], s[2], s[3], base, x, &mut y,
        );
        k::scatter_strided_f32(
            n, n as i64, d[1], d[2], d[3], s[0], s[1], s[2], s[3], base, dy, &mut dx,
        );
    }
    (y, dx)
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
        let want = run_on_cpu(&text, &[], (&shape, &x), (&top, &dy));
        let got = gpu_calls(&shape, &full, &x, &dy);
        assert_close(&format!("{given}: output"), &got.y, &want.y, 0.0);
        assert_close(&format!("{given}: input gradient"), &got.dx, &want.dx, 0.0);
    }
}

/// Crop's window of (2, 3, 5, 6) at offsets (0, 1, 1, 2), 2 x 2 x 3 x 4,
/// as `crop/mod.rs` walks it on the GPU: the bottom's strides from the
/// window's corner.
#[test]
fn a_crop_window_is_a_strided_move_from_its_corner() {
    let (bottom, top, offsets) = ([2usize, 3, 5, 6], [2usize, 2, 3, 4], [0usize, 1, 1, 2]);
    let strides = [90usize, 30, 6, 1];
    let base: usize = offsets.iter().zip(&strides).map(|(o, s)| o * s).sum();
    let x = random(bottom.iter().product(), 1, -1.0, 1.0);
    let n: usize = top.iter().product();
    let dy = random(n, 2, -1.0, 1.0);
    let [d, s] = [top, strides].map(|v| v.map(|a| a as i64));
    let (y, dx) = strided_moves((d, s, base as i64), &x, &dy, x.len());
    let mut i = 0;
    for a in 0..2 {
        for b in 0..2 {
            for c in 0..3 {
                for e in 0..4 {
                    let from = a * 90 + (b + 1) * 30 + (c + 1) * 6 + e + 2;
                    assert_eq!(y[i], x[from], "window value {i}");
                    assert_eq!(dx[from], dy[i], "gradient at {from}");
                    i += 1;
                }
            }
        }
    }
    let inside = dx.iter().filter(|&&v| v != 0.0).count();
    assert_eq!(inside, n, "nothing written outside the window");
}
