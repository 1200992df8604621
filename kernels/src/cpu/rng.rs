//! Seeded random fills: Caffe's `caffe_rng_uniform`, `caffe_rng_gaussian`
//! and `caffe_rng_bernoulli`.
//!
//! As in Caffe, each thread has its own generator; [`set_seed`] reseeds the
//! calling thread's, so a seeded single-threaded run is reproducible. The
//! generator is xoshiro256++ seeded through SplitMix64 (both public-domain
//! algorithms, written out here: its stream is this crate's to keep
//! stable); an unseeded thread starts from the hasher keys the standard
//! library draws from the operating system.

use std::cell::RefCell;
use std::hash::{BuildHasher, Hasher};

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

/// xoshiro256++ (Blackman and Vigna): 256 bits of state, period 2^256 - 1,
/// fast and statistically strong for simulation (not for secrets).
struct Xoshiro256 {
    s: [u64; 4],
}

impl Xoshiro256 {
    /// The state SplitMix64 expands `seed` into, as the authors recommend.
    fn seed_from_u64(mut seed: u64) -> Self {
        let mut next = || {
            seed = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = seed;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        Self {
            s: [next(), next(), next(), next()],
        }
    }

    fn from_os_entropy() -> Self {
        // RandomState's keys come from the operating system's generator.
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(0x626c_6f62_666c_6f77);
        Self::seed_from_u64(h.finish())
    }

    fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform on `[0, 1)` with 53 random bits.
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform on `(0, 1]`, safe to take the logarithm of.
    fn unit_open_below(&mut self) -> f64 {
        ((self.next_u64() >> 11) + 1) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A standard normal draw (Box-Muller; the second value is dropped so
    /// that each draw depends only on the generator's state).
    fn standard_normal(&mut self) -> f64 {
        let r = (-2.0 * self.unit_open_below().ln()).sqrt();
        r * (std::f64::consts::TAU * self.unit()).cos()
    }
}

thread_local! {
    static RNG: RefCell<Xoshiro256> = RefCell::new(Xoshiro256::from_os_entropy());
}

fn with_rng<R>(f: impl FnOnce(&mut Xoshiro256) -> R) -> R {
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
    with_rng(|r| *r = Xoshiro256::seed_from_u64(seed));
}

/// A generator of its own, seeded: for work split across threads that
/// must draw the same numbers whichever thread does it (each item of a
/// batch its own generator, seeded in item order).
///
/// ```
/// use blob_kernels::cpu::SeededRng;
/// let (mut a, mut b) = (SeededRng::new(7), SeededRng::new(7));
/// assert_eq!(a.next_u32(), b.next_u32());
/// ```
pub struct SeededRng(Xoshiro256);

impl SeededRng {
    /// A generator from `seed` (SplitMix64-expanded, as [`set_seed`]).
    pub fn new(seed: u64) -> Self {
        Self(Xoshiro256::seed_from_u64(seed))
    }

    /// The next 32 random bits (what [`rng_rand`] gives from a thread's).
    pub fn next_u32(&mut self) -> u32 {
        (self.0.next_u64() >> 32) as u32
    }
}

/// A random 32-bit value from the calling thread's generator (Caffe
/// `caffe_rng_rand`): what seeds a worker thread's generator, and what
/// Caffe's `DataTransformer::Rand(n)` takes the remainder of.
///
/// ```
/// use blob_kernels::cpu::{rng_rand, set_seed};
/// set_seed(1701);
/// let a = rng_rand();
/// set_seed(1701);
/// assert_eq!(rng_rand(), a);
/// ```
pub fn rng_rand() -> u32 {
    with_rng(|r| (r.next_u64() >> 32) as u32)
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
    if !(af <= bf && af.is_finite() && bf.is_finite()) {
        return Err(RngError::UniformRange { a: af, b: bf });
    }
    let width = bf - af;
    with_rng(|r| {
        for v in y.iter_mut() {
            // Rounding to f32 can step just past a bound; clamp keeps the
            // closed range Caffe promises.
            let x = T::from_f64(af + width * r.unit());
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
    if !(s > 0.0 && s.is_finite() && m.is_finite()) {
        return Err(RngError::GaussianSigma { mu: m, sigma: s });
    }
    with_rng(|r| {
        for v in y.iter_mut() {
            *v = T::from_f64(m + s * r.standard_normal());
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
    if !(0.0..=1.0).contains(&p) {
        return Err(RngError::BernoulliP { p });
    }
    with_rng(|r| {
        for v in y.iter_mut() {
            *v = I::from_bool(r.unit() < p);
        }
    });
    Ok(())
}
