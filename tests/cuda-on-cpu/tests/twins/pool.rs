//! `pool.cu` against the CPU Pooling, with Caffe's ceil rule (windows
//! clipped at the input's edge), as `pool/cuda.rs` calls the kernels:
//! bit for bit, overlapping windows included (the backward kernels add in
//! the CPU's order).

use blob_layers::{PoolMethod, Pooling};
use blob_runtime::blob;
use cuda_on_cpu as k;

use crate::{CpuRun, assert_close, random, run_on_cpu};

blob!(shape Image = _, 3, 9, 9);

/// A pooling's sizes: planes of `hw` x `hw` pooled to `o` x `o` by
/// `kernel`/`stride` windows.
#[derive(Clone, Copy)]
struct Geometry {
    planes: usize,
    hw: usize,
    o: usize,
    kernel: usize,
    stride: usize,
}

/// The GPU's calls, forward then backward.
fn gpu_calls(method: PoolMethod, g: &Geometry, x: &[f32], dy: &[f32]) -> CpuRun {
    let Geometry {
        planes,
        hw,
        o,
        kernel,
        stride,
    } = *g;
    let [h, w, oh, ow, kk, s] = [hw, hw, o, o, kernel, stride].map(|v| v as i32);
    let (total, n) = (planes * o * o, planes * hw * hw);
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
                kk,
                s,
                x,
                &mut y,
                &mut argmax,
            ),
            PoolMethod::Ave => k::ave_pool_f32(total, total as i64, h, w, oh, ow, kk, s, x, &mut y),
        }
    }
    // NaN: a value the kernel does not write shows.
    let mut dx = vec![f32::NAN; n];
    // SAFETY: dy and argmax hold total values, dx n.
    unsafe {
        match method {
            PoolMethod::Max => {
                k::max_unpool_f32(n, n as i64, h, w, oh, ow, kk, s, dy, &argmax, &mut dx)
            }
            PoolMethod::Ave => k::ave_unpool_f32(n, n as i64, h, w, oh, ow, kk, s, dy, &mut dx),
        }
    }
    CpuRun {
        y,
        dx,
        param_diffs: vec![],
    }
}

fn check<const K: usize, const S: usize>(method: PoolMethod, o: usize)
where
    Image: blob_layers::shapes::PoolShape<K, S>,
{
    let planes = 2 * 3;
    // Ties on purpose: MAX keeps the first maximum of a window.
    let x: Vec<f32> = random(planes * 81, 1, -1.0, 1.0)
        .iter()
        .map(|v| (v * 4.0).round())
        .collect();
    let dy = random(planes * o * o, 2, -1.0, 1.0);
    let mut pool = Pooling::<f32, Image, K, S>::new(method);
    let want = run_on_cpu(&mut pool, &[], (&[2, 3, 9, 9], &x), (&[2, 3, o, o], &dy));
    let g = Geometry {
        planes,
        hw: 9,
        o,
        kernel: K,
        stride: S,
    };
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
