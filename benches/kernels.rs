//! Throughput of the CPU kernels against a memcpy-style copy measured in the
//! same run, and gemm GFLOP/s.
//!
//! For n = 1e3, 1e5, 1e7, 1e8 and f32/f64, each memory-bound op prints GB/s
//! (every byte read and written counted) and its ratio to `copy_from_slice`
//! on the same n. Then gemm (f32, f64) at 256, 1024, 2048.
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

/// This machine's measured f32 FMA peak, all cores: independent chains of
/// the widest FMA the CPU has (AVX-512 or AVX2), one thread per core. This
/// is the ceiling gemm is compared against, measured rather than taken
/// from a datasheet because a VM's clock is not known.
fn fma_peak_gflops() -> (f64, &'static str) {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let iters = 20_000_000usize;
    let (flops_per_iter, name): (f64, &str) = fma_probe::kind();
    let t = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| black_box(fma_probe::run(iters)));
        }
    });
    let secs = t.elapsed().as_secs_f64();
    (
        threads as f64 * iters as f64 * flops_per_iter / secs / 1e9,
        name,
    )
}

#[cfg(target_arch = "x86_64")]
mod fma_probe {
    use std::arch::x86_64::*;

    const CHAINS: usize = 12;

    pub fn kind() -> (f64, &'static str) {
        if is_x86_feature_detected!("avx512f") {
            ((CHAINS * 16 * 2) as f64, "AVX-512 FMA")
        } else if is_x86_feature_detected!("fma") {
            ((CHAINS * 8 * 2) as f64, "AVX2 FMA")
        } else {
            ((CHAINS * 4) as f64, "SSE mul+add")
        }
    }

    pub fn run(iters: usize) -> f32 {
        if is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU supports AVX-512F (checked just above).
            unsafe { avx512(iters) }
        } else if is_x86_feature_detected!("fma") {
            // SAFETY: the CPU supports AVX2 and FMA (checked just above).
            unsafe { avx2(iters) }
        } else {
            0.0
        }
    }

    #[target_feature(enable = "avx512f")]
    fn avx512(iters: usize) -> f32 {
        let a = _mm512_set1_ps(0.999_999);
        let b = _mm512_set1_ps(1e-7);
        let mut acc = [_mm512_set1_ps(1.0); CHAINS];
        for _ in 0..iters {
            for v in acc.iter_mut() {
                *v = _mm512_fmadd_ps(*v, a, b);
            }
        }
        acc.iter().map(|&v| _mm512_reduce_add_ps(v)).sum()
    }

    #[target_feature(enable = "avx2,fma")]
    fn avx2(iters: usize) -> f32 {
        let a = _mm256_set1_ps(0.999_999);
        let b = _mm256_set1_ps(1e-7);
        let mut acc = [_mm256_set1_ps(1.0); CHAINS];
        for _ in 0..iters {
            for v in acc.iter_mut() {
                *v = _mm256_fmadd_ps(*v, a, b);
            }
        }
        let mut out = [0f32; 8];
        let total = acc
            .iter()
            .fold(_mm256_setzero_ps(), |s, &v| _mm256_add_ps(s, v));
        // SAFETY: `out` holds exactly 8 f32, the width of one __m256.
        unsafe { _mm256_storeu_ps(out.as_mut_ptr(), total) };
        out.iter().sum()
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod fma_probe {
    pub fn kind() -> (f64, &'static str) {
        (1.0, "scalar")
    }
    pub fn run(iters: usize) -> f32 {
        (0..iters).map(|i| i as f32).sum()
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
    let (peak, how) = fma_peak_gflops();
    println!("measured f32 peak: {peak:.1} GFLOP/s ({how}, all cores)");
    for n in [256, 1024, 2048] {
        let f32_rate = gemm::<f32>(n);
        println!(
            "      f32 at {n}: {:.0}% of measured peak",
            100.0 * f32_rate / peak
        );
        gemm::<f64>(n);
    }
}
