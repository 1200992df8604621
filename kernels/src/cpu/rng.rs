//! Seeded random fills: Caffe's `caffe_rng_uniform`, `caffe_rng_gaussian`
//! and `caffe_rng_bernoulli`.
//!
//! As in Caffe, each thread has its own generator; [`set_seed`] reseeds the
//! calling thread's, so a seeded single-threaded run is reproducible. The
//! generator is ChaCha8, whose stream `rand_chacha` documents as stable.

use std::cell::RefCell;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Bernoulli, Distribution, Normal, Uniform};

use crate::Real;

/// A random fill refused because its parameters are invalid.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RngError {
    /// `uniform` needs `a <= b`, both finite.
    #[error("rng_uniform: range [{a}, {b}] is empty or not finite (need a <= b)")]
    UniformRange {
        /// Lower bound given.
        a: f64,
        /// Upper bound given.
        b: f64,
    },
    /// `gaussian` needs a finite mean and `sigma > 0`.
    #[error("rng_gaussian: sigma must be positive and finite, got {sigma} (mean {mu})")]
    GaussianSigma {
        /// Mean given.
        mu: f64,
        /// Standard deviation given.
        sigma: f64,
    },
    /// `bernoulli` needs `0 <= p <= 1`.
    #[error("rng_bernoulli: probability must lie in [0, 1], got {p}")]
    BernoulliP {
        /// Probability given.
        p: f64,
    },
}

thread_local! {
    static RNG: RefCell<ChaCha8Rng> = RefCell::new(ChaCha8Rng::from_os_rng());
}

fn with_rng<R>(f: impl FnOnce(&mut ChaCha8Rng) -> R) -> R {
    RNG.with(|r| f(&mut r.borrow_mut()))
}

/// Reseeds the calling thread's generator (Caffe `Caffe::set_random_seed`).
///
/// ```
/// use blob_kernels::cpu::{set_seed, uniform};
/// let mut a = [0.0f32; 4];
/// let mut b = [0.0f32; 4];
/// set_seed(1701);
/// uniform(0.0, 1.0, &mut a).unwrap();
/// set_seed(1701);
/// uniform(0.0, 1.0, &mut b).unwrap();
/// assert_eq!(a, b);
/// ```
pub fn set_seed(seed: u64) {
    with_rng(|r| *r = ChaCha8Rng::seed_from_u64(seed));
}

/// Fills `y` uniformly on the closed range `[a, b]` (Caffe
/// `caffe_rng_uniform`).
///
/// ```
/// let mut y = [0.0f64; 100];
/// blob_kernels::cpu::uniform(-7.3, -2.3, &mut y).unwrap();
/// assert!(y.iter().all(|v| (-7.3..=-2.3).contains(v)));
/// assert!(blob_kernels::cpu::uniform(1.0, 0.0, &mut y).is_err());
/// ```
pub fn uniform<T: Real>(a: T, b: T, y: &mut [T]) -> Result<(), RngError> {
    let (af, bf) = (a.to_f64(), b.to_f64());
    let dist = Uniform::new_inclusive(af, bf)
        .ok()
        .filter(|_| af.is_finite() && bf.is_finite())
        .ok_or(RngError::UniformRange { a: af, b: bf })?;
    with_rng(|r| {
        for v in y.iter_mut() {
            // Rounding to f32 can step just past a bound; clamp keeps the
            // closed range Caffe promises.
            let x = T::from_f64(dist.sample(r));
            *v = if x < a {
                a
            } else if x > b {
                b
            } else {
                x
            };
        }
    });
    Ok(())
}

/// Fills `y` from a normal distribution (Caffe `caffe_rng_gaussian`).
///
/// ```
/// let mut y = [0.0f32; 1000];
/// blob_kernels::cpu::gaussian(0.0, 1.0, &mut y).unwrap();
/// assert!(y.iter().any(|&v| v != 0.0));
/// assert!(blob_kernels::cpu::gaussian(0.0, 0.0, &mut y).is_err());
/// ```
pub fn gaussian<T: Real>(mu: T, sigma: T, y: &mut [T]) -> Result<(), RngError> {
    let (m, s) = (mu.to_f64(), sigma.to_f64());
    let dist = Normal::new(m, s)
        .ok()
        .filter(|_| s > 0.0 && s.is_finite() && m.is_finite())
        .ok_or(RngError::GaussianSigma { mu: m, sigma: s })?;
    with_rng(|r| {
        for v in y.iter_mut() {
            *v = T::from_f64(dist.sample(r));
        }
    });
    Ok(())
}

/// An integer element a bernoulli draw can be written to (0 or 1).
pub trait BernoulliTarget: Copy {
    /// The value for a draw.
    fn from_bool(b: bool) -> Self;
}
impl BernoulliTarget for i32 {
    fn from_bool(b: bool) -> Self {
        b as i32
    }
}
impl BernoulliTarget for u32 {
    fn from_bool(b: bool) -> Self {
        b as u32
    }
}

/// Fills `y` with 1 at probability `p`, else 0 (Caffe `caffe_rng_bernoulli`).
///
/// ```
/// let mut y = [5i32; 64];
/// blob_kernels::cpu::bernoulli(1.0, &mut y).unwrap();
/// assert!(y.iter().all(|&v| v == 1));
/// assert!(blob_kernels::cpu::bernoulli(1.5, &mut y).is_err());
/// ```
pub fn bernoulli<I: BernoulliTarget>(p: f64, y: &mut [I]) -> Result<(), RngError> {
    let dist = Bernoulli::new(p).map_err(|_| RngError::BernoulliP { p })?;
    with_rng(|r| {
        for v in y.iter_mut() {
            *v = I::from_bool(dist.sample(r));
        }
    });
    Ok(())
}
