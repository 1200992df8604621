//! Random fills (Caffe `caffe_gpu_rng_*`): cuRAND draws, mapped in place by
//! the kernels of `rng.cu`.

use std::sync::PoisonError;

use cudarc::curand::CudaRng;
use cudarc::driver::{CudaView, CudaViewMut};

use super::{CudaError, Gpu, launch_config, len_i64};

crate::cuda_kernels! {
    /// `rng.cu`: the maps from cuRAND's `(0, 1]` draws.
    pub static RNG = "rng.cu";
    fn uniform_scale<T>(n: i64, a: T, b: T, y: &mut CudaViewMut<'_, T>);
    fn bernoulli_u32(n: i64, p: f32, u: &CudaView<'_, f32>, y: &mut CudaViewMut<'_, u32>);
}

impl Gpu {
    fn with_rng<R>(
        &self,
        op: &'static str,
        f: impl FnOnce(&mut CudaRng) -> Result<R, cudarc::curand::result::CurandError>,
    ) -> Result<R, CudaError> {
        let mut cell = self.rng.lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut cell.0).map_err(CudaError::rand(op))
    }

    /// Reseeds the GPU generator (Caffe `Caffe::set_random_seed`).
    pub fn set_seed(&self, seed: u64) -> Result<(), CudaError> {
        self.with_rng("curandSetPseudoRandomGeneratorSeed", |r| r.set_seed(seed))
    }

    /// Uniform on `(a, b]` (cuRAND's range, as in Caffe).
    pub fn uniform_f32(
        &self,
        a: f32,
        b: f32,
        y: &mut CudaViewMut<'_, f32>,
    ) -> Result<(), CudaError> {
        if a > b || !a.is_finite() || !b.is_finite() {
            return Err(CudaError::Argument {
                op: "rng_uniform",
                detail: format!("range [{a}, {b}] is empty or not finite"),
            });
        }
        let n = y.len();
        if n == 0 {
            return Ok(());
        }
        self.with_rng("curandGenerateUniform", |r| r.fill_with_uniform(y))?;
        // SAFETY: uniform_scale rewrites y[0..n] in place; y holds n.
        unsafe { uniform_scale(self, launch_config(n), len_i64(n), a, b, y) }
    }

    /// Gaussian fill, for any length: cuRAND's pseudo generators need an
    /// even count, so an odd one draws one extra value into scratch.
    pub fn gaussian_f32(
        &self,
        mu: f32,
        sigma: f32,
        y: &mut CudaViewMut<'_, f32>,
    ) -> Result<(), CudaError> {
        if !(sigma > 0.0 && sigma.is_finite() && mu.is_finite()) {
            return Err(CudaError::Argument {
                op: "rng_gaussian",
                detail: format!("sigma must be positive and finite, got {sigma}"),
            });
        }
        let n = y.len();
        if n == 0 {
            return Ok(());
        }
        if n % 2 == 0 {
            return self.with_rng("curandGenerateNormal", |r| r.fill_with_normal(y, mu, sigma));
        }
        self.with_scratch(n + 1, |tmp| {
            self.with_rng("curandGenerateNormal", |r| {
                r.fill_with_normal(tmp, mu, sigma)
            })?;
            self.stream
                .memcpy_dtod(&tmp.slice(..n), y)
                .map_err(CudaError::driver("copy gaussian draws"))
        })
    }

    /// 1 with probability `p`, else 0 (Caffe `caffe_gpu_rng_bernoulli`).
    pub fn bernoulli(&self, p: f32, y: &mut CudaViewMut<'_, u32>) -> Result<(), CudaError> {
        if !(0.0..=1.0).contains(&p) {
            return Err(CudaError::Argument {
                op: "rng_bernoulli",
                detail: format!("probability must lie in [0, 1], got {p}"),
            });
        }
        let n = y.len();
        if n == 0 {
            return Ok(());
        }
        self.with_scratch(n, |u| {
            self.with_rng("curandGenerateUniform", |r| r.fill_with_uniform(u))?;
            // SAFETY: bernoulli_u32 reads u[0..n] and writes y[0..n]; both
            // hold n.
            unsafe { bernoulli_u32(self, launch_config(n), len_i64(n), p, &u.as_view(), y) }
        })
    }
}
