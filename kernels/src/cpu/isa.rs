//! Which vector instructions the CPU loops use, chosen once at run time.
//!
//! The crates are compiled for the baseline of their target (SSE2 on
//! x86-64), so one binary runs on every machine. A hot loop wrapped in
//! [`vectorized`] is compiled a second and third time with AVX2+FMA and
//! with AVX-512 enabled, and each call runs the widest copy the machine
//! has. Nothing else changes between the copies: no loop of ours fuses a
//! multiply and an add unless it says so, and reductions keep the same
//! accumulators in the same order, so every path gives the same bits as
//! the baseline (the `isa_paths` test checks each path the machine has).
//!
//! `BLOBFLOW_CPU=baseline|avx2|avx512` in the environment, read once, caps
//! the choice (to compare paths, or to rule one out); [`limit_isa`] does the
//! same from code.
//!
//! ```
//! use blob_kernels::cpu::{self, Isa};
//! println!("CPU loops run on {}", cpu::isa());
//! let x = [1.0f32, -2.0, 3.0];
//! // Any loop can be vectorized the same way:
//! let total: f32 = cpu::vectorized(|| x.iter().map(|v| v.abs()).sum());
//! assert_eq!(total, 6.0);
//! assert!(cpu::isa() >= Isa::Baseline);
//! ```

use std::fmt;
use std::sync::atomic::{AtomicU8, Ordering};

/// A family of vector instructions a CPU loop can be compiled for, from
/// narrowest to widest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Isa {
    /// The target's baseline (SSE2 on x86-64; NEON on aarch64).
    Baseline,
    /// AVX2 with FMA (x86-64, since 2013).
    Avx2,
    /// AVX-512 F/BW/DQ/VL (x86-64 servers since 2017, AMD Zen 4 on).
    Avx512,
}

impl Isa {
    /// Every family, narrowest first.
    pub const ALL: [Isa; 3] = [Isa::Baseline, Isa::Avx2, Isa::Avx512];

    /// The name `BLOBFLOW_CPU` takes for it.
    ///
    /// ```
    /// assert_eq!(blob_kernels::cpu::Isa::Avx2.name(), "avx2");
    /// ```
    pub const fn name(self) -> &'static str {
        match self {
            Isa::Baseline => "baseline",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
        }
    }

    /// Whether this machine can run code compiled for it.
    ///
    /// ```
    /// assert!(blob_kernels::cpu::Isa::Baseline.is_available());
    /// ```
    pub fn is_available(self) -> bool {
        match self {
            Isa::Baseline => true,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => {
                std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")
            }
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => {
                Isa::Avx2.is_available()
                    && std::arch::is_x86_feature_detected!("avx512f")
                    && std::arch::is_x86_feature_detected!("avx512bw")
                    && std::arch::is_x86_feature_detected!("avx512dq")
                    && std::arch::is_x86_feature_detected!("avx512vl")
            }
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }

    fn from_name(name: &str) -> Option<Isa> {
        Isa::ALL.into_iter().find(|i| i.name() == name.trim())
    }
}

impl fmt::Display for Isa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// 0: not chosen yet; otherwise 1 + the index in [`Isa::ALL`].
static CHOSEN: AtomicU8 = AtomicU8::new(0);

fn widest_available() -> Isa {
    let cap = std::env::var("BLOBFLOW_CPU")
        .ok()
        .and_then(|v| Isa::from_name(&v))
        .unwrap_or(Isa::Avx512);
    Isa::ALL
        .into_iter()
        .rev()
        .find(|i| *i <= cap && i.is_available())
        .unwrap_or(Isa::Baseline)
}

/// The instructions [`vectorized`] loops run on: the widest this machine
/// has, at most what `BLOBFLOW_CPU` or [`limit_isa`] allow.
///
/// ```
/// let isa = blob_kernels::cpu::isa();
/// assert!(isa.is_available());
/// ```
#[inline]
pub fn isa() -> Isa {
    match CHOSEN.load(Ordering::Relaxed) {
        0 => {
            let isa = widest_available();
            CHOSEN.store(isa as u8 + 1, Ordering::Relaxed);
            isa
        }
        n => Isa::ALL[usize::from(n - 1)],
    }
}

/// Runs every later [`vectorized`] loop on at most `cap` (the widest the
/// machine has below it), process-wide, and returns the family now used.
/// Results are the same bits on every path; this is for benchmarks and
/// tests that compare them.
///
/// ```
/// use blob_kernels::cpu::{self, Isa};
/// let before = cpu::isa();
/// assert_eq!(cpu::limit_isa(Isa::Baseline), Isa::Baseline);
/// cpu::limit_isa(before);
/// ```
pub fn limit_isa(cap: Isa) -> Isa {
    let isa = Isa::ALL
        .into_iter()
        .rev()
        .find(|i| *i <= cap && i.is_available())
        .unwrap_or(Isa::Baseline);
    CHOSEN.store(isa as u8 + 1, Ordering::Relaxed);
    isa
}

/// Runs `f` compiled for the widest instructions [`isa`] allows (Caffe
/// leaves this to its BLAS; here any loop can have it). `f` is inlined
/// into one copy per [`Isa`], so keep the loop itself inside `f` (helpers
/// it calls should be `#[inline(always)]` or small enough to inline).
///
/// ```
/// let x = vec![0.5f32; 1000];
/// let mut y = vec![1.0f32; 1000];
/// blob_kernels::cpu::vectorized(|| {
///     for (y, x) in y.iter_mut().zip(&x) {
///         *y += 2.0 * x;
///     }
/// });
/// assert!(y.iter().all(|&v| v == 2.0));
/// ```
#[inline(always)]
pub fn vectorized<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    match isa() {
        // SAFETY: `isa` returns a family only when `is_available` found
        // every feature these copies are compiled with.
        Isa::Avx512 => unsafe { x86::avx512(f) },
        // SAFETY: as above.
        Isa::Avx2 => unsafe { x86::avx2(f) },
        Isa::Baseline => f(),
    }
    #[cfg(not(target_arch = "x86_64"))]
    f()
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,bmi1,bmi2,lzcnt,popcnt")]
    #[inline]
    pub(crate) unsafe fn avx512<R>(f: impl FnOnce() -> R) -> R {
        f()
    }

    #[target_feature(enable = "avx2,fma,bmi1,bmi2,lzcnt,popcnt")]
    #[inline]
    pub(crate) unsafe fn avx2<R>(f: impl FnOnce() -> R) -> R {
        f()
    }
}
