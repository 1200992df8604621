//! The machine's f32 multiply-add peak, measured: the ceiling that gemm
//! and the nets' GFLOP/s are compared against. Measured rather than taken
//! from a datasheet, because a VM's clock and its cores' vector units are
//! not known from inside it.

use std::fmt;
use std::hint::black_box;
use std::time::Instant;

use super::Isa;

/// What [`fma_peak`] measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FmaPeak {
    /// Billions of f32 operations a second (a multiply-add counts two),
    /// all threads together.
    pub gflops: f64,
    /// The instructions it ran: those blobflow's loops run on.
    pub isa: Isa,
    /// The threads it ran on at once.
    pub threads: usize,
}

impl fmt::Display for FmaPeak {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.isa {
            Isa::Avx512 => "AVX-512 FMA",
            Isa::Avx2 => "AVX2 FMA",
            Isa::Baseline => "baseline multiply and add",
        };
        let s = if self.threads == 1 { "" } else { "s" };
        write!(
            f,
            "{:.1} GFLOP/s ({what}, {} thread{s})",
            self.gflops, self.threads
        )
    }
}

/// Independent chains a probe thread keeps in flight: enough to cover the
/// multiply-add's latency on both of a core's vector pipes.
const CHAINS: usize = 12;

/// Rounds of one multiply-add a chain: about 70 ms on an AVX-512 core.
const ROUNDS: usize = 20_000_000;

/// This machine's f32 multiply-add peak on `threads` threads at once (one
/// a core: pass at most the cores you have): twelve independent chains
/// of the widest multiply-add blobflow's loops run on ([`super::isa()`]:
/// the widest the CPU has, or what `BLOBFLOW_CPU` caps it to, so the
/// AVX2 path of an AVX-512 machine is held to the AVX2 peak). Takes
/// about 70 ms with AVX-512, longer on narrower vectors. What a net or a
/// product reaches, divided by this, is how close it runs to the limit
/// of the instructions it ran.
///
/// ```
/// let peak = blob_kernels::cpu::fma_peak(1);
/// assert!(peak.gflops > 0.0 && peak.threads == 1);
/// println!("one core: {peak}");
/// ```
pub fn fma_peak(threads: usize) -> FmaPeak {
    let threads = threads.max(1);
    let isa = super::isa();
    let t = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(move || black_box(probe::run(isa, black_box(ROUNDS))));
        }
    });
    let seconds = t.elapsed().as_secs_f64().max(1e-9);
    let flops = (threads * ROUNDS * CHAINS * probe::flops_a_step(isa)) as f64;
    FmaPeak {
        gflops: flops / seconds / 1e9,
        isa,
        threads,
    }
}

#[cfg(target_arch = "x86_64")]
mod probe {
    use std::arch::x86_64::*;

    use super::{CHAINS, Isa};

    /// f32 operations one chain does a round.
    pub(super) fn flops_a_step(isa: Isa) -> usize {
        match isa {
            Isa::Avx512 => 16 * 2,
            Isa::Avx2 => 8 * 2,
            // A multiply and an add on 4 lanes.
            Isa::Baseline => 4 * 2,
        }
    }

    pub(super) fn run(isa: Isa, rounds: usize) -> f32 {
        match isa {
            // SAFETY: `fma_peak` passes a family the CPU has.
            Isa::Avx512 => unsafe { avx512(rounds) },
            // SAFETY: as above.
            Isa::Avx2 => unsafe { avx2(rounds) },
            // SAFETY: SSE2 is part of every x86-64 CPU.
            Isa::Baseline => unsafe { baseline(rounds) },
        }
    }

    #[target_feature(enable = "avx512f")]
    fn avx512(rounds: usize) -> f32 {
        let (a, b) = (_mm512_set1_ps(0.999_999), _mm512_set1_ps(1e-7));
        let mut acc = [_mm512_set1_ps(1.0); CHAINS];
        for _ in 0..rounds {
            for v in acc.iter_mut() {
                *v = _mm512_fmadd_ps(*v, a, b);
            }
        }
        acc.iter().map(|&v| _mm512_reduce_add_ps(v)).sum()
    }

    #[target_feature(enable = "avx2,fma")]
    fn avx2(rounds: usize) -> f32 {
        let (a, b) = (_mm256_set1_ps(0.999_999), _mm256_set1_ps(1e-7));
        let mut acc = [_mm256_set1_ps(1.0); CHAINS];
        for _ in 0..rounds {
            for v in acc.iter_mut() {
                *v = _mm256_fmadd_ps(*v, a, b);
            }
        }
        let total = acc
            .iter()
            .fold(_mm256_setzero_ps(), |s, &v| _mm256_add_ps(s, v));
        let mut out = [0f32; 8];
        // SAFETY: `out` holds exactly the 8 f32 of one __m256.
        unsafe { _mm256_storeu_ps(out.as_mut_ptr(), total) };
        out.iter().sum()
    }

    #[target_feature(enable = "sse2")]
    fn baseline(rounds: usize) -> f32 {
        let (a, b) = (_mm_set1_ps(0.999_999), _mm_set1_ps(1e-7));
        let mut acc = [_mm_set1_ps(1.0); CHAINS];
        for _ in 0..rounds {
            for v in acc.iter_mut() {
                *v = _mm_add_ps(_mm_mul_ps(*v, a), b);
            }
        }
        let total = acc.iter().fold(_mm_setzero_ps(), |s, &v| _mm_add_ps(s, v));
        let mut out = [0f32; 4];
        // SAFETY: `out` holds exactly the 4 f32 of one __m128.
        unsafe { _mm_storeu_ps(out.as_mut_ptr(), total) };
        out.iter().sum()
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod probe {
    use super::{CHAINS, Isa};

    /// f32 operations one chain does a round: a multiply and an add.
    pub(super) fn flops_a_step(_: Isa) -> usize {
        2
    }

    pub(super) fn run(_: Isa, rounds: usize) -> f32 {
        let mut acc = [1.0f32; CHAINS];
        for _ in 0..rounds {
            for v in acc.iter_mut() {
                *v = *v * 0.999_999 + 1e-7;
            }
        }
        acc.iter().sum()
    }
}
