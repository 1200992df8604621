//! The machine's measured f32 multiply-add peak, for benches that print
//! their GFLOP/s as a fraction of it.

use std::hint::black_box;
use std::time::Instant;

/// This machine's measured f32 FMA peak on `threads` cores: independent
/// chains of the widest FMA the CPU has (AVX-512 or AVX2), one thread per
/// core. This is the ceiling gemm and the nets are compared against,
/// measured rather than taken from a datasheet because a VM's clock is
/// not known.
pub fn gflops(threads: usize) -> (f64, &'static str) {
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
