//! `pool.cu` against the CPU Pooling, with Caffe's ceil rule (windows
//! clipped at the input's edge), square and rectangular windows, padded
//! or not, as `pool/cuda.rs` calls the kernels: bit for bit, overlapping
//! windows included (the backward kernels add in the CPU's order).

use blob_layers::PoolMethod;
use cuda_on_cpu as k;

use crate::{CpuRun, assert_close, random, run_on_cpu};

/// A pooling's sizes: planes of `h` x `w` pooled to `oh` x `ow` by
/// windows of `kernel`, `stride` and `pad`, each (height, width).
#[derive(Clone, Copy)]
struct Geometry {
    planes: usize,
    h: usize,
    w: usize,
    oh: usize,
    ow: usize,
    kernel: [usize; 2],
    stride: [usize; 2],
    pad: [usize; 2],
}

/// The GPU's calls, forward then backward.
fn gpu_calls(method: PoolMethod, g: &Geometry, x: &[f32], dy: &[f32]) -> CpuRun {
    let Geometry {
        planes,
        h,
        w,
        oh,
        ow,
        kernel: [kh, kw],
        stride: [sh, sw],
        pad: [ph, pw],
    } = *g;
    let [h, w, oh, ow, kh, kw, sh, sw, ph, pw] =
        [h, w, oh, ow, kh, kw, sh, sw, ph, pw].map(|v| v as i32);
    let (total, n) = (planes * g.oh * g.ow, planes * g.h * g.w);
    let mut y = vec![f32::NAN; total];
    let mut argmax = vec![u32::MAX; total];
    // SAFETY: x holds n values, y and argmax total.
    unsafe {
        match method {
            PoolMethod::Max => k::max_pool_f32(
                total,
                total as i64,
                h,
                w,
                oh,
                ow,
                kh,
                kw,
                sh,
                sw,
                ph,
                pw,
                x,
                &mut y,
                &mut argmax,
            ),
            PoolMethod::Ave => k::ave_pool_f32(
                total,
                total as i64,
                h,
                w,
                oh,
                ow,
                kh,
                kw,
                sh,
                sw,
                ph,
                pw,
                x,
                &mut y,
            ),
        }
    }
    // NaN: a value the kernel does not write shows.
    let mut dx = vec![f32::NAN; n];
    // SAFETY: dy and argmax hold total values, dx n.
    unsafe {
        match method {
            PoolMethod::Max => k::max_unpool_f32(
                n, n as i64, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dy, &argmax, &mut dx,
            ),
            PoolMethod::Ave => k::ave_unpool_f32(
                n, n as i64, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dy, &mut dx,
            ),
        }
    }
    CpuRun {
        y,
        dx,
        param_diffs: vec![],
    }
}

/// Inputs with ties on purpose (MAX keeps the first maximum of a window)
/// and output gradients for `g`.
fn values(g: &Geometry) -> (Vec<f32>, Vec<f32>) {
    let x: Vec<f32> = random(g.planes * g.h * g.w, 1, -1.0, 1.0)
        .iter()
        .map(|v| (v * 4.0).round())
        .collect();
    (x, random(g.planes * g.oh * g.ow, 2, -1.0, 1.0))
}

fn check<const K: usize, const S: usize>(method: PoolMethod, o: usize) {
    let g = Geometry {
        planes: 2 * 3,
        h: 9,
        w: 9,
        oh: o,
        ow: o,
        kernel: [K, K],
        stride: [S, S],
        pad: [0, 0],
    };
    let (mut x, dy) = values(&g);
    if matches!(method, PoolMethod::Max) {
        // NaN and -inf among the values, and a first window of NaN alone:
        // Caffe's -FLT_MAX start passes them over on both sides alike.
        for (i, v) in x.iter_mut().enumerate() {
            match i % 13 {
                0 => *v = f32::NAN,
                5 => *v = f32::NEG_INFINITY,
                _ => {}
            }
        }
        for r in 0..K {
            x[r * 9..r * 9 + K].fill(f32::NAN);
        }
    }
    let pool = match method {
        PoolMethod::Max => "MAX",
        PoolMethod::Ave => "AVE",
    };
    let text =
        format!(r#"type: "Pooling" pooling_param {{ pool: {pool} kernel_size: {K} stride: {S} }}"#);
    let want = run_on_cpu(&text, &[], (&[2, 3, 9, 9], &x), (&[2, 3, o, o], &dy));
    let got = gpu_calls(method, &g, &x, &dy);
    let name = format!("{method:?} {K}/{S}");
    assert_close(&format!("{name}: output"), &got.y, &want.y, 0.0);
    assert_close(&format!("{name}: input gradient"), &got.dx, &want.dx, 0.0);
}

#[test]
fn pooling_matches_cpu() {
    check::<3, 2>(PoolMethod::Max, 4);
    check::<2, 2>(PoolMethod::Max, 5); // the last window hangs over the edge
    check::<3, 2>(PoolMethod::Ave, 4);
    check::<2, 2>(PoolMethod::Ave, 5);
    check::<4, 3>(PoolMethod::Ave, 3);
    check::<4, 3>(PoolMethod::Max, 3);
    check::<3, 1>(PoolMethod::Max, 7); // up to nine windows hold a value
    check::<3, 3>(PoolMethod::Ave, 3);
    // Windows at 0, 3, 6 and 9: the last past the input, empty.
    check::<1, 3>(PoolMethod::Max, 4);
    check::<1, 3>(PoolMethod::Ave, 4);
}

/// Rectangular and padded windows, against the run-time Pooling built
/// from its `pooling_param` (AVE counts the padding in its divisor).
#[test]
fn padded_and_rectangular_pooling_matches_cpu() {
    for (param, g) in [
        (
            "kernel_size: 3 stride: 2 pad: 1",
            ([3, 3], [2, 2], [1, 1], [5, 6]),
        ),
        (
            "kernel_size: 3 stride: 1 pad: 1",
            ([3, 3], [1, 1], [1, 1], [9, 11]),
        ),
        (
            "kernel_h: 3 kernel_w: 2 stride_h: 2 stride_w: 1 pad_h: 1 pad_w: 0",
            ([3, 2], [2, 1], [1, 0], [5, 10]),
        ),
        (
            "kernel_h: 2 kernel_w: 4 stride_h: 1 stride_w: 3 pad_h: 0 pad_w: 2",
            ([2, 4], [1, 3], [0, 2], [8, 5]),
        ),
    ] {
        let (kernel, stride, pad, [oh, ow]) = g;
        let g = Geometry {
            planes: 2 * 3,
            h: 9,
            w: 11,
            oh,
            ow,
            kernel,
            stride,
            pad,
        };
        for (method, pool) in [(PoolMethod::Max, "MAX"), (PoolMethod::Ave, "AVE")] {
            let (x, dy) = values(&g);
            let text = format!(r#"type: "Pooling" pooling_param {{ pool: {pool} {param} }}"#);
            let want = run_on_cpu(&text, &[], (&[2, 3, 9, 11], &x), (&[2, 3, oh, ow], &dy));
            let got = gpu_calls(method, &g, &x, &dy);
            assert_close(&format!("{pool} {param}: output"), &got.y, &want.y, 0.0);
            assert_close(
                &format!("{pool} {param}: input gradient"),
                &got.dx,
                &want.dx,
                0.0,
            );
        }
    }
}

/// A window larger than its input (OpenPose's 2 x 2 pools of 1 x 1
/// maps, and a 3 x 3 window over 2 x 3): one output, its window clipped.
#[test]
fn a_window_larger_than_its_input_matches_cpu() {
    for ([h, w], k, s) in [([1, 1], 2, 2), ([2, 3], 3, 2)] {
        let g = Geometry {
            planes: 4,
            h,
            w,
            oh: 1,
            ow: 1,
            kernel: [k, k],
            stride: [s, s],
            pad: [0, 0],
        };
        for (method, pool) in [(PoolMethod::Max, "MAX"), (PoolMethod::Ave, "AVE")] {
            let (x, dy) = values(&g);
            let text = format!(
                r#"type: "Pooling" pooling_param {{ pool: {pool} kernel_size: {k} stride: {s} }}"#
            );
            let want = run_on_cpu(&text, &[], (&[1, 4, h, w], &x), (&[1, 4, 1, 1], &dy));
            let got = gpu_calls(method, &g, &x, &dy);
            assert_close(&format!("{pool} {h}x{w}: output"), &got.y, &want.y, 0.0);
            assert_close(&format!("{pool} {h}x{w}: gradient"), &got.dx, &want.dx, 0.0);
        }
    }
}
