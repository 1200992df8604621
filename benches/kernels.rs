//! Throughput of the CPU kernels against a memcpy-style copy measured in the
//! same run, gemm GFLOP/s, and the stride-1 MAX pools.
//!
//! For n = 1e3, 1e5, 1e7, 1e8 and f32/f64, each memory-bound op prints GB/s
//! (every byte read and written counted) and its ratio to `copy_from_slice`
//! on the same n. Then gemm (f32, f64) at 256, 1024, 2048. Then Caffe's
//! stride-1 MAX pooling (`max_pool_stride1`: GoogLeNet's 3x3, MobileNet-
//! YOLOv3 lite's 2x2, SPP's windows) on one thread, against copying its
//! input, with the instruction set it ran on (`BLOBFLOW_CPU=avx2` for
//! AVX2 on an AVX-512 machine).
//!
//! Run: `cargo bench --bench kernels` (add `-- quick` to skip n = 1e8).

use std::hint::black_box;
use std::time::Instant;

use blob_kernels::Real;
use blob_kernels::cpu::{self, Transpose};

/// Best of several timed batches, in seconds per call.
fn time_per_call(mut f: impl FnMut()) -> f64 {
    f();
    let t = Instant::now();
    let mut calls = 0u64;
    while t.elapsed().as_secs_f64() < 0.05 || calls < 2 {
        f();
        calls += 1;
    }
    let batch = calls.max(1);
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let t = Instant::now();
        for _ in 0..batch {
            f();
        }
        best = best.min(t.elapsed().as_secs_f64() / batch as f64);
    }
    best
}

fn memory_bound<T: Real>(n: usize) {
    let sz = size_of::<T>() as f64;
    let mut x = vec![T::ZERO; n];
    let mut y = vec![T::ZERO; n];
    cpu::set_seed(1);
    cpu::uniform(T::from_f64(-1.0), T::ONE, &mut x).unwrap();
    cpu::uniform(T::from_f64(-1.0), T::ONE, &mut y).unwrap();
    let a = T::from_f64(0.999);
    let copy_t = time_per_call(|| y.copy_from_slice(black_box(&x)));
    let copy_gbs = 2.0 * n as f64 * sz / copy_t / 1e9;
    println!(
        "{:>4} n={:<9.0e} {:<10} {:>8.2} GB/s  ratio 1.00",
        T::NAME,
        n as f64,
        "memcpy",
        copy_gbs
    );
    let report = |name: &str, streams: f64, t: f64| {
        let gbs = streams * n as f64 * sz / t / 1e9;
        println!(
            "{:>4} n={:<9.0e} {:<10} {:>8.2} GB/s  ratio {:.2}",
            T::NAME,
            n as f64,
            name,
            gbs,
            gbs / copy_gbs
        );
    };
    report(
        "copy",
        2.0,
        time_per_call(|| cpu::copy(black_box(&x), &mut y)),
    );
    report(
        "axpy",
        3.0,
        time_per_call(|| cpu::axpy(a, black_box(&x), &mut y)),
    );
    report(
        "axpby",
        3.0,
        time_per_call(|| cpu::axpby(a, black_box(&x), a, &mut y)),
    );
    report(
        "asum",
        1.0,
        time_per_call(|| {
            black_box(cpu::asum(black_box(&x)));
        }),
    );
    report(
        "dot",
        2.0,
        time_per_call(|| {
            black_box(cpu::dot(black_box(&x), &y));
        }),
    );
    report(
        "scal",
        2.0,
        time_per_call(|| cpu::scal(a, black_box(&mut y))),
    );
    report(
        "scale",
        2.0,
        time_per_call(|| cpu::scale(a, black_box(&x), &mut y)),
    );
    report("set", 1.0, time_per_call(|| cpu::set(a, black_box(&mut y))));
    report(
        "add_scalar",
        2.0,
        time_per_call(|| cpu::add_scalar(a, black_box(&mut y))),
    );
    let mut z = vec![T::ZERO; n];
    report(
        "add",
        3.0,
        time_per_call(|| cpu::add(black_box(&x), &y, &mut z)),
    );
    report(
        "mul",
        3.0,
        time_per_call(|| cpu::mul(black_box(&x), &y, &mut z)),
    );
    report(
        "sign",
        2.0,
        time_per_call(|| cpu::sign(black_box(&x), &mut z)),
    );
    report(
        "abs",
        2.0,
        time_per_call(|| cpu::abs(black_box(&x), &mut z)),
    );
}

fn gemm<T: Real>(n: usize) -> f64 {
    let mut a = vec![T::ZERO; n * n];
    let mut b = vec![T::ZERO; n * n];
    let mut c = vec![T::ZERO; n * n];
    cpu::uniform(T::from_f64(-1.0), T::ONE, &mut a).unwrap();
    cpu::uniform(T::from_f64(-1.0), T::ONE, &mut b).unwrap();
    let t = time_per_call(|| {
        cpu::gemm(
            Transpose::No,
            Transpose::No,
            n,
            n,
            n,
            T::ONE,
            &a,
            &b,
            T::ZERO,
            &mut c,
        )
    });
    let rate = 2.0 * (n as f64).powi(3) / t / 1e9;
    println!("{:>4} gemm {n:>4}x{n}x{n}  {rate:>8.1} GFLOP/s", T::NAME);
    rate
}

/// Caffe's stride-1 MAX pooling of the nets' shapes, and the time to copy
/// each shape's input in the same run.
fn stride1_pools() {
    println!("stride-1 MAX pools on {} (one thread):", cpu::isa());
    // (planes, side, window, padding, output side)
    let shapes = [
        (256, 7, 3, 1, 7),
        (256, 14, 3, 1, 14),
        (256, 28, 3, 1, 28),
        (512, 19, 2, 1, 20),
        (128, 56, 3, 1, 56),
        (256, 13, 5, 2, 13),
        (256, 13, 9, 4, 13),
        (256, 19, 13, 6, 19),
    ];
    for (planes, side, window, pad, out) in shapes {
        let shape = cpu::Stride1Pool {
            planes,
            input: [side, side],
            kernel: [window, window],
            pad: [pad, pad],
            output: [out, out],
        };
        let x: Vec<f32> = (0..planes * side * side)
            .map(|i| ((i * 7919) % 1000) as f32)
            .collect();
        let mut y = vec![0.0f32; planes * out * out];
        let mut copy = vec![0.0f32; x.len()];
        let mut taken = true;
        let pool_t = time_per_call(|| taken &= cpu::max_pool_stride1(black_box(&x), shape, &mut y));
        let copy_t = time_per_call(|| copy.copy_from_slice(black_box(&x)));
        println!(
            "  {planes} planes of {side} x {side}, {window}x{window} pad {pad}: {:.4} ms, {:.2}x its input's copy{}",
            pool_t * 1e3,
            pool_t / copy_t,
            if taken { "" } else { " (general loop)" }
        );
    }
}

fn main() {
    let quick = std::env::args().any(|a| a == "quick");
    let mut sizes = vec![1_000, 100_000, 10_000_000];
    if !quick {
        sizes.push(100_000_000);
    }
    for &n in &sizes {
        memory_bound::<f32>(n);
        memory_bound::<f64>(n);
    }
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let peak = cpu::fma_peak(threads);
    println!("measured f32 peak: {peak}");
    let peak = peak.gflops;
    for n in [256, 1024, 2048] {
        let f32_rate = gemm::<f32>(n);
        println!(
            "      f32 at {n}: {:.0}% of measured peak",
            100.0 * f32_rate / peak
        );
        gemm::<f64>(n);
    }
    stride1_pools();
}
