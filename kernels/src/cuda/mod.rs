//! The GPU half of Caffe's math (feature `cuda`): cuBLAS for gemm, gemv,
//! axpy, axpby, scal, dot, asum and scale; the element-wise kernels of
//! `kernels/cuda/*.cu`, compiled by NVRTC once per context; cuRAND for
//! the random fills.
//!
//! Everything is loaded at run time: a build with the feature runs on a
//! machine with no CUDA, and [`Gpu::new`] then returns an error that says
//! so instead of panicking.
//!
//! ```no_run
//! use blob_kernels::cuda::Gpu;
//! let gpu = Gpu::new(0)?; // Err(CudaError::NoDriver) where there is no GPU
//! let mut y = gpu.stream().alloc_zeros::<f32>(1000).map_err(blob_kernels::cuda::CudaError::driver)?;
//! gpu.set(2.0f32, &mut y.as_view_mut())?;
//! # Ok::<(), blob_kernels::cuda::CudaError>(())
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::cublas::{CudaBlas, Gemm, GemmConfig, sys as cublas_sys};
use cudarc::curand::CudaRng;
use cudarc::driver::{
    CudaContext, CudaFunction, CudaStream, CudaView, CudaViewMut, DevicePtr, DevicePtrMut,
    LaunchConfig, PushKernelArg,
};
use cudarc::nvrtc::{CompileOptions, Ptx, compile_ptx_with_opts};

use crate::cpu::Transpose;

/// cudarc, re-exported so users can name the buffer and stream types.
pub use cudarc;

/// The kernel sources, compiled by NVRTC at run time: (file name, text).
pub const SOURCES: [(&str, &str); 3] = [
    ("elementwise.cu", include_str!("../../cuda/elementwise.cu")),
    ("rng.cu", include_str!("../../cuda/rng.cu")),
    ("layers.cu", include_str!("../../cuda/layers.cu")),
];

/// Threads per block of the element-wise kernels (Caffe's
/// `CAFFE_CUDA_NUM_THREADS`).
pub const THREADS: u32 = 512;

/// What went wrong on the GPU side.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum CudaError {
    /// No CUDA driver library (libcuda) on this machine.
    #[error("no CUDA driver on this machine (libcuda.so could not be loaded)")]
    NoDriver,
    /// No NVRTC library to compile the kernels.
    #[error("NVRTC (libnvrtc.so.13) could not be loaded: add its directory to LD_LIBRARY_PATH")]
    NoNvrtc,
    /// A driver call failed.
    #[error("CUDA driver: {0}")]
    Driver(String),
    /// A kernel source did not compile.
    #[error("NVRTC could not compile {file}: {log}")]
    Compile {
        /// The source file.
        file: &'static str,
        /// The compiler's log.
        log: String,
    },
    /// A cuBLAS call failed.
    #[error("cuBLAS: {0}")]
    Blas(String),
    /// A cuRAND call failed.
    #[error("cuRAND: {0}")]
    Rand(String),
    /// Arguments that do not fit the operation.
    #[error("{0}")]
    Argument(String),
}

impl CudaError {
    /// Wraps a driver error.
    ///
    /// ```
    /// let e = blob_kernels::cuda::CudaError::driver("out of memory");
    /// assert!(e.to_string().contains("out of memory"));
    /// ```
    pub fn driver(e: impl std::fmt::Debug) -> Self {
        Self::Driver(format!("{e:?}"))
    }
}

fn blas_err(e: impl std::fmt::Debug) -> CudaError {
    CudaError::Blas(format!("{e:?}"))
}

/// Whether the CUDA driver library can be loaded (checked once, without
/// panicking).
///
/// ```
/// let _ = blob_kernels::cuda::driver_available();
/// ```
pub fn driver_available() -> bool {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    // SAFETY: is_culib_present only tries to dlopen the library by name.
    *PRESENT.get_or_init(|| unsafe { cudarc::driver::sys::is_culib_present() })
}

/// Whether NVRTC can be loaded.
///
/// ```
/// let _ = blob_kernels::cuda::nvrtc_available();
/// ```
pub fn nvrtc_available() -> bool {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    // SAFETY: is_culib_present only tries to dlopen the library by name.
    *PRESENT.get_or_init(|| unsafe { cudarc::nvrtc::sys::is_culib_present() })
}

/// Compiles every source of [`SOURCES`] to PTX (no GPU needed, only
/// NVRTC): what CI runs to prove the kernels compile.
///
/// ```no_run
/// let ptx = blob_kernels::cuda::compile_sources()?;
/// assert_eq!(ptx.len(), blob_kernels::cuda::SOURCES.len());
/// # Ok::<(), blob_kernels::cuda::CudaError>(())
/// ```
pub fn compile_sources() -> Result<Vec<(&'static str, Ptx)>, CudaError> {
    if !nvrtc_available() {
        return Err(CudaError::NoNvrtc);
    }
    SOURCES
        .iter()
        .map(|&(file, src)| {
            let opts = CompileOptions {
                use_fast_math: Some(false),
                ..Default::default()
            };
            compile_ptx_with_opts(src, opts)
                .map(|p| (file, p))
                .map_err(|e| CudaError::Compile {
                    file,
                    log: format!("{e:?}"),
                })
        })
        .collect()
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
}

/// `f32` or `f64` on the GPU: kernel suffix and the typed cuBLAS calls.
pub trait GpuReal:
    sealed::Sealed + crate::Real + cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits
{
    /// `"f32"` / `"f64"`, the suffix of the kernel names.
    const SUFFIX: &'static str;
    #[doc(hidden)]
    unsafe fn axpy(
        h: cublas_sys::cublasHandle_t,
        n: i32,
        a: *const Self,
        x: *const Self,
        y: *mut Self,
    ) -> cublas_sys::cublasStatus_t;
    #[doc(hidden)]
    unsafe fn scal(
        h: cublas_sys::cublasHandle_t,
        n: i32,
        a: *const Self,
        x: *mut Self,
    ) -> cublas_sys::cublasStatus_t;
    #[doc(hidden)]
    unsafe fn dot(
        h: cublas_sys::cublasHandle_t,
        n: i32,
        x: *const Self,
        y: *const Self,
        r: *mut Self,
    ) -> cublas_sys::cublasStatus_t;
    #[doc(hidden)]
    unsafe fn asum(
        h: cublas_sys::cublasHandle_t,
        n: i32,
        x: *const Self,
        r: *mut Self,
    ) -> cublas_sys::cublasStatus_t;
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn gemv(
        h: cublas_sys::cublasHandle_t,
        t: cublas_sys::cublasOperation_t,
        m: i32,
        n: i32,
        a: *const Self,
        x: *const Self,
        beta: *const Self,
        y: *mut Self,
        alpha: *const Self,
    ) -> cublas_sys::cublasStatus_t;
}

macro_rules! gpu_real {
    ($t:ty, $suffix:literal, $axpy:ident, $scal:ident, $dot:ident, $asum:ident, $gemv:ident) => {
        impl GpuReal for $t {
            const SUFFIX: &'static str = $suffix;
            unsafe fn axpy(
                h: cublas_sys::cublasHandle_t,
                n: i32,
                a: *const Self,
                x: *const Self,
                y: *mut Self,
            ) -> cublas_sys::cublasStatus_t {
                // SAFETY: forwarded from the caller's contract.
                unsafe { cublas_sys::$axpy(h, n, a, x, 1, y, 1) }
            }
            unsafe fn scal(
                h: cublas_sys::cublasHandle_t,
                n: i32,
                a: *const Self,
                x: *mut Self,
            ) -> cublas_sys::cublasStatus_t {
                // SAFETY: forwarded from the caller's contract.
                unsafe { cublas_sys::$scal(h, n, a, x, 1) }
            }
            unsafe fn dot(
                h: cublas_sys::cublasHandle_t,
                n: i32,
                x: *const Self,
                y: *const Self,
                r: *mut Self,
            ) -> cublas_sys::cublasStatus_t {
                // SAFETY: forwarded from the caller's contract.
                unsafe { cublas_sys::$dot(h, n, x, 1, y, 1, r) }
            }
            unsafe fn asum(
                h: cublas_sys::cublasHandle_t,
                n: i32,
                x: *const Self,
                r: *mut Self,
            ) -> cublas_sys::cublasStatus_t {
                // SAFETY: forwarded from the caller's contract.
                unsafe { cublas_sys::$asum(h, n, x, 1, r) }
            }
            unsafe fn gemv(
                h: cublas_sys::cublasHandle_t,
                t: cublas_sys::cublasOperation_t,
                m: i32,
                n: i32,
                a: *const Self,
                x: *const Self,
                beta: *const Self,
                y: *mut Self,
                alpha: *const Self,
            ) -> cublas_sys::cublasStatus_t {
                // SAFETY: forwarded from the caller's contract.
                unsafe { cublas_sys::$gemv(h, t, m, n, alpha, a, m, x, 1, beta, y, 1) }
            }
        }
    };
}
gpu_real!(
    f32,
    "f32",
    cublasSaxpy_v2,
    cublasSscal_v2,
    cublasSdot_v2,
    cublasSasum_v2,
    cublasSgemv_v2
);
gpu_real!(
    f64,
    "f64",
    cublasDaxpy_v2,
    cublasDscal_v2,
    cublasDdot_v2,
    cublasDasum_v2,
    cublasDgemv_v2
);

fn check(status: cublas_sys::cublasStatus_t) -> Result<(), CudaError> {
    if status == cublas_sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
        Ok(())
    } else {
        Err(blas_err(status))
    }
}

fn len_i32(n: usize) -> Result<i32, CudaError> {
    i32::try_from(n)
        .map_err(|_| CudaError::Argument(format!("{n} elements exceed cuBLAS's 32-bit lengths")))
}

/// The launch shape of every kernel here: 512 threads per block, enough
/// blocks for `n` elements (grid-stride loops cover the rest).
///
/// ```
/// let c = blob_kernels::cuda::launch_config(1000);
/// assert_eq!((c.grid_dim.0, c.block_dim.0), (2, 512));
/// ```
pub fn launch_config(n: usize) -> LaunchConfig {
    let blocks = n.div_ceil(THREADS as usize).clamp(1, 65_535 * 32) as u32;
    LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// The cuRAND generator, reachable only through the `Mutex` in [`Gpu`].
struct RngCell(CudaRng);

// SAFETY: a cuRAND generator may be used from any thread as long as calls
// are not concurrent; the Mutex around RngCell serialises every use.
unsafe impl Send for RngCell {}

/// One GPU: its context, a stream, a cuBLAS handle, the compiled kernels
/// and a cuRAND generator. Made once per device and shared.
pub struct Gpu {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    blas: CudaBlas,
    rng: Mutex<RngCell>,
    functions: HashMap<String, CudaFunction>,
}

impl std::fmt::Debug for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gpu")
            .field("ordinal", &self.ctx.ordinal())
            .finish()
    }
}

impl Gpu {
    /// Opens GPU `ordinal`, compiles the kernels with NVRTC and loads them.
    /// An error, never a panic, where there is no driver or no such GPU.
    ///
    /// ```
    /// if !blob_kernels::cuda::driver_available() {
    ///     assert_eq!(blob_kernels::cuda::Gpu::new(0).unwrap_err(), blob_kernels::cuda::CudaError::NoDriver);
    /// }
    /// ```
    pub fn new(ordinal: usize) -> Result<Arc<Self>, CudaError> {
        if !driver_available() {
            return Err(CudaError::NoDriver);
        }
        let count = CudaContext::device_count().map_err(CudaError::driver)?;
        if ordinal >= count.max(0) as usize {
            return Err(CudaError::Argument(format!(
                "no GPU {ordinal}: this machine has {count}"
            )));
        }
        let ctx = CudaContext::new(ordinal).map_err(CudaError::driver)?;
        let stream = ctx.default_stream();
        let blas = CudaBlas::new(stream.clone()).map_err(blas_err)?;
        let rng =
            CudaRng::new(1701, stream.clone()).map_err(|e| CudaError::Rand(format!("{e:?}")))?;
        let mut functions = HashMap::new();
        for (file, ptx) in compile_sources()? {
            let module = ctx.load_module(ptx).map_err(CudaError::driver)?;
            for name in kernel_names(file) {
                let f = module.load_function(&name).map_err(CudaError::driver)?;
                functions.insert(name, f);
            }
        }
        Ok(Arc::new(Self {
            ctx,
            stream,
            blas,
            rng: Mutex::new(RngCell(rng)),
            functions,
        }))
    }

    /// The CUDA context.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// The stream every operation runs on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// The device's name, e.g. `"NVIDIA H100 80GB HBM3"`.
    pub fn name(&self) -> String {
        self.ctx.name().unwrap_or_else(|_| "unknown GPU".into())
    }

    /// Waits for all work on the stream.
    pub fn synchronize(&self) -> Result<(), CudaError> {
        self.stream.synchronize().map_err(CudaError::driver)
    }

    /// A compiled kernel by its `extern "C"` name (e.g. `"im2col_batch_f32"`),
    /// for layers that launch their own.
    pub fn kernel(&self, name: &str) -> Result<&CudaFunction, CudaError> {
        self.functions
            .get(name)
            .ok_or_else(|| CudaError::Argument(format!("no kernel {name}")))
    }

    fn function(&self, op: &str, suffix: &str) -> Result<&CudaFunction, CudaError> {
        let name = format!("{op}_{suffix}");
        self.functions
            .get(&name)
            .ok_or_else(|| CudaError::Argument(format!("no kernel {name}")))
    }

    fn check_len(op: &str, got: usize, want: usize) -> Result<(), CudaError> {
        if got == want {
            Ok(())
        } else {
            Err(CudaError::Argument(format!(
                "{op}: {got} elements where {want} are needed"
            )))
        }
    }

    /// Launches `<op>_<T>(long long n, T alpha, T* y)`, which rewrites
    /// `y[0..n]` from `alpha` (and `y`).
    fn scalar_kernel<T: GpuReal>(
        &self,
        op: &str,
        alpha: T,
        y: &mut CudaViewMut<'_, T>,
    ) -> Result<(), CudaError> {
        let n = y.len();
        if n == 0 {
            return Ok(());
        }
        let f = self.function(op, T::SUFFIX)?;
        let n64 = n as i64;
        let mut b = self.stream.launch_builder(f);
        b.arg(&n64).arg(&alpha).arg(y);
        // SAFETY: every `<op>_<T>(long long n, T alpha, T* y)` kernel of
        // elementwise.cu touches exactly y[0..n], and y holds n elements.
        unsafe { b.launch(launch_config(n)) }
            .map(|_| ())
            .map_err(CudaError::driver)
    }

    /// `y[i] = alpha` (Caffe `caffe_gpu_set`).
    pub fn set<T: GpuReal>(&self, alpha: T, y: &mut CudaViewMut<'_, T>) -> Result<(), CudaError> {
        self.scalar_kernel("set", alpha, y)
    }

    /// `y[i] += alpha` (Caffe `caffe_gpu_add_scalar`).
    pub fn add_scalar<T: GpuReal>(
        &self,
        alpha: T,
        y: &mut CudaViewMut<'_, T>,
    ) -> Result<(), CudaError> {
        self.scalar_kernel("add_scalar", alpha, y)
    }

    /// `y = op(a)` for `op` in abs, fabs, exp, log, sqrt, sqr, sign,
    /// sgnbit (Caffe `caffe_gpu_<op>`).
    pub fn unary<T: GpuReal>(
        &self,
        op: UnaryOp,
        a: &CudaView<'_, T>,
        y: &mut CudaViewMut<'_, T>,
    ) -> Result<(), CudaError> {
        let n = y.len();
        Self::check_len(op.name(), a.len(), n)?;
        if n == 0 {
            return Ok(());
        }
        let f = self.function(op.name(), T::SUFFIX)?;
        let n64 = n as i64;
        let mut b = self.stream.launch_builder(f);
        b.arg(&n64).arg(a).arg(y);
        // SAFETY: <op>_<T>(n, a, y) reads a[0..n] and writes y[0..n]; both
        // hold n elements.
        unsafe { b.launch(launch_config(n)) }
            .map(|_| ())
            .map_err(CudaError::driver)
    }

    /// `y = a op b` for `op` in add, sub, mul, div (Caffe `caffe_gpu_<op>`).
    pub fn binary<T: GpuReal>(
        &self,
        op: BinaryOp,
        a: &CudaView<'_, T>,
        b_in: &CudaView<'_, T>,
        y: &mut CudaViewMut<'_, T>,
    ) -> Result<(), CudaError> {
        let n = y.len();
        Self::check_len(op.name(), a.len(), n)?;
        Self::check_len(op.name(), b_in.len(), n)?;
        if n == 0 {
            return Ok(());
        }
        let f = self.function(op.name(), T::SUFFIX)?;
        let n64 = n as i64;
        let mut b = self.stream.launch_builder(f);
        b.arg(&n64).arg(a).arg(b_in).arg(y);
        // SAFETY: <op>_<T>(n, a, b, y) reads a and b and writes y, each of n
        // elements.
        unsafe { b.launch(launch_config(n)) }
            .map(|_| ())
            .map_err(CudaError::driver)
    }

    /// `y = a^p` (Caffe `caffe_gpu_powx`).
    pub fn powx<T: GpuReal>(
        &self,
        a: &CudaView<'_, T>,
        p: T,
        y: &mut CudaViewMut<'_, T>,
    ) -> Result<(), CudaError> {
        let n = y.len();
        Self::check_len("powx", a.len(), n)?;
        if n == 0 {
            return Ok(());
        }
        let f = self.function("powx", T::SUFFIX)?;
        let n64 = n as i64;
        let mut b = self.stream.launch_builder(f);
        b.arg(&n64).arg(a).arg(&p).arg(y);
        // SAFETY: powx_<T>(n, a, p, y) reads a[0..n] and writes y[0..n].
        unsafe { b.launch(launch_config(n)) }
            .map(|_| ())
            .map_err(CudaError::driver)
    }

    fn handle(&self) -> cublas_sys::cublasHandle_t {
        *self.blas.handle()
    }

    /// `y += alpha x` (cuBLAS axpy; Caffe `caffe_gpu_axpy`).
    pub fn axpy<T: GpuReal>(
        &self,
        alpha: T,
        x: &CudaView<'_, T>,
        y: &mut CudaViewMut<'_, T>,
    ) -> Result<(), CudaError> {
        let n = y.len();
        Self::check_len("axpy", x.len(), n)?;
        if n == 0 {
            return Ok(());
        }
        let n = len_i32(n)?;
        let (xp, _rx) = x.device_ptr(&self.stream);
        let (yp, _ry) = y.device_ptr_mut(&self.stream);
        // SAFETY: x and y hold n elements on this stream's device; alpha is
        // a host scalar (cuBLAS's default pointer mode).
        check(unsafe { T::axpy(self.handle(), n, &alpha, xp as *const T, yp as *mut T) })
    }

    /// `x *= alpha` (cuBLAS scal; Caffe `caffe_gpu_scal`).
    pub fn scal<T: GpuReal>(&self, alpha: T, x: &mut CudaViewMut<'_, T>) -> Result<(), CudaError> {
        let n = x.len();
        if n == 0 {
            return Ok(());
        }
        let n = len_i32(n)?;
        let (xp, _rx) = x.device_ptr_mut(&self.stream);
        // SAFETY: x holds n elements; alpha is a host scalar.
        check(unsafe { T::scal(self.handle(), n, &alpha, xp as *mut T) })
    }

    /// `y = alpha x + beta y` (Caffe `caffe_gpu_axpby`: scal then axpy).
    pub fn axpby<T: GpuReal>(
        &self,
        alpha: T,
        x: &CudaView<'_, T>,
        beta: T,
        y: &mut CudaViewMut<'_, T>,
    ) -> Result<(), CudaError> {
        self.scal(beta, y)?;
        self.axpy(alpha, x, y)
    }

    /// `y = alpha x` (Caffe `caffe_gpu_scale`: copy then scal).
    pub fn scale<T: GpuReal>(
        &self,
        alpha: T,
        x: &CudaView<'_, T>,
        y: &mut CudaViewMut<'_, T>,
    ) -> Result<(), CudaError> {
        Self::check_len("scale", x.len(), y.len())?;
        if y.is_empty() {
            return Ok(());
        }
        self.stream.memcpy_dtod(x, y).map_err(CudaError::driver)?;
        self.scal(alpha, y)
    }

    /// Dot product, returned to the host (Caffe `caffe_gpu_dot`).
    pub fn dot<T: GpuReal>(
        &self,
        x: &CudaView<'_, T>,
        y: &CudaView<'_, T>,
    ) -> Result<T, CudaError> {
        Self::check_len("dot", y.len(), x.len())?;
        if x.is_empty() {
            return Ok(T::ZERO);
        }
        let n = len_i32(x.len())?;
        let (xp, _rx) = x.device_ptr(&self.stream);
        let (yp, _ry) = y.device_ptr(&self.stream);
        let mut r = T::ZERO;
        // SAFETY: x and y hold n elements; the result goes to a host scalar,
        // which cuBLAS writes before returning in host pointer mode.
        check(unsafe { T::dot(self.handle(), n, xp as *const T, yp as *const T, &mut r) })?;
        Ok(r)
    }

    /// Sum of `|x|`, returned to the host (Caffe `caffe_gpu_asum`).
    pub fn asum<T: GpuReal>(&self, x: &CudaView<'_, T>) -> Result<T, CudaError> {
        if x.is_empty() {
            return Ok(T::ZERO);
        }
        let n = len_i32(x.len())?;
        let (xp, _rx) = x.device_ptr(&self.stream);
        let mut r = T::ZERO;
        // SAFETY: x holds n elements; the result goes to a host scalar.
        check(unsafe { T::asum(self.handle(), n, xp as *const T, &mut r) })?;
        Ok(r)
    }

    /// Row-major `C = alpha op(A) op(B) + beta C` (Caffe `caffe_gpu_gemm`,
    /// which swaps the operands for column-major cuBLAS).
    #[allow(clippy::too_many_arguments)]
    pub fn gemm<T: GpuReal>(
        &self,
        trans_a: Transpose,
        trans_b: Transpose,
        m: usize,
        n: usize,
        k: usize,
        alpha: T,
        a: &CudaView<'_, T>,
        b: &CudaView<'_, T>,
        beta: T,
        c: &mut CudaViewMut<'_, T>,
    ) -> Result<(), CudaError>
    where
        CudaBlas: Gemm<T>,
    {
        if a.len() < m * k || b.len() < k * n || c.len() < m * n {
            return Err(CudaError::Argument(format!(
                "gemm: {m}x{k} * {k}x{n} needs larger operands"
            )));
        }
        if m == 0 || n == 0 {
            return Ok(());
        }
        let op = |t: Transpose| match t {
            Transpose::No => cublas_sys::cublasOperation_t::CUBLAS_OP_N,
            Transpose::Yes => cublas_sys::cublasOperation_t::CUBLAS_OP_T,
        };
        let lda = if trans_a == Transpose::No { k } else { m };
        let ldb = if trans_b == Transpose::No { n } else { k };
        let cfg = GemmConfig {
            transa: op(trans_b),
            transb: op(trans_a),
            m: len_i32(n)?,
            n: len_i32(m)?,
            k: len_i32(k)?,
            alpha,
            lda: len_i32(ldb)?,
            ldb: len_i32(lda)?,
            beta,
            ldc: len_i32(n)?,
        };
        // SAFETY: the operands hold at least the elements their dims reach
        // (checked above); B and A are swapped for column-major storage.
        unsafe { self.blas.gemm(cfg, b, a, c) }.map_err(blas_err)
    }

    /// Row-major `y = alpha op(A) x + beta y` with `A` stored `m x n`
    /// (Caffe `caffe_gpu_gemv`, which flips the op for column-major).
    #[allow(clippy::too_many_arguments)]
    pub fn gemv<T: GpuReal>(
        &self,
        trans: Transpose,
        m: usize,
        n: usize,
        alpha: T,
        a: &CudaView<'_, T>,
        x: &CudaView<'_, T>,
        beta: T,
        y: &mut CudaViewMut<'_, T>,
    ) -> Result<(), CudaError> {
        let (xn, yn) = if trans == Transpose::No {
            (n, m)
        } else {
            (m, n)
        };
        if a.len() < m * n || x.len() != xn || y.len() != yn {
            return Err(CudaError::Argument(format!(
                "gemv: A {m}x{n} does not fit x {} and y {}",
                x.len(),
                y.len()
            )));
        }
        if m == 0 || n == 0 {
            return self.scal(beta, y);
        }
        let op = if trans == Transpose::No {
            cublas_sys::cublasOperation_t::CUBLAS_OP_T
        } else {
            cublas_sys::cublasOperation_t::CUBLAS_OP_N
        };
        let (ap, _ra) = a.device_ptr(&self.stream);
        let (xp, _rx) = x.device_ptr(&self.stream);
        let (yp, _ry) = y.device_ptr_mut(&self.stream);
        // SAFETY: A is m x n (row-major, so n x m column-major with lda n),
        // x and y have the lengths op(A) needs; scalars are on the host.
        check(unsafe {
            T::gemv(
                self.handle(),
                op,
                len_i32(n)?,
                len_i32(m)?,
                ap as *const T,
                xp as *const T,
                &beta,
                yp as *mut T,
                &alpha,
            )
        })
    }

    fn rng(&self) -> RngGuard<'_> {
        RngGuard(
            self.rng
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }

    /// Reseeds the GPU generator (Caffe `Caffe::set_random_seed`).
    pub fn set_seed(&self, seed: u64) -> Result<(), CudaError> {
        self.rng()
            .set_seed(seed)
            .map_err(|e| CudaError::Rand(format!("{e:?}")))
    }

    fn scale_uniform<T: GpuReal>(
        &self,
        a: T,
        b: T,
        y: &mut CudaViewMut<'_, T>,
    ) -> Result<(), CudaError> {
        let n = y.len();
        let f = self.function("uniform_scale", T::SUFFIX)?;
        let n64 = n as i64;
        let mut l = self.stream.launch_builder(f);
        l.arg(&n64).arg(&a).arg(&b).arg(y);
        // SAFETY: uniform_scale_<T>(n, a, b, y) rewrites y[0..n] in place.
        unsafe { l.launch(launch_config(n)) }
            .map(|_| ())
            .map_err(CudaError::driver)
    }
}

struct RngGuard<'a>(std::sync::MutexGuard<'a, RngCell>);

impl std::ops::Deref for RngGuard<'_> {
    type Target = CudaRng;
    fn deref(&self) -> &CudaRng {
        &self.0.0
    }
}

impl std::ops::DerefMut for RngGuard<'_> {
    fn deref_mut(&mut self) -> &mut CudaRng {
        &mut self.0.0
    }
}

/// Uniform, gaussian and bernoulli fills (Caffe `caffe_gpu_rng_*`).
impl Gpu {
    /// Uniform on `(a, b]` (cuRAND's range, as in Caffe).
    pub fn uniform_f32(
        &self,
        a: f32,
        b: f32,
        y: &mut CudaViewMut<'_, f32>,
    ) -> Result<(), CudaError> {
        if a > b || !a.is_finite() || !b.is_finite() {
            return Err(CudaError::Argument(format!(
                "rng_uniform: range [{a}, {b}] is empty or not finite"
            )));
        }
        if y.is_empty() {
            return Ok(());
        }
        self.rng()
            .fill_with_uniform(y)
            .map_err(|e| CudaError::Rand(format!("{e:?}")))?;
        self.scale_uniform(a, b, y)
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
            return Err(CudaError::Argument(format!(
                "rng_gaussian: sigma must be positive and finite, got {sigma}"
            )));
        }
        let n = y.len();
        if n == 0 {
            return Ok(());
        }
        if n % 2 == 0 {
            return self
                .rng()
                .fill_with_normal(y, mu, sigma)
                .map_err(|e| CudaError::Rand(format!("{e:?}")));
        }
        let mut tmp = self
            .stream
            .alloc_zeros::<f32>(n + 1)
            .map_err(CudaError::driver)?;
        self.rng()
            .fill_with_normal(&mut tmp, mu, sigma)
            .map_err(|e| CudaError::Rand(format!("{e:?}")))?;
        self.stream
            .memcpy_dtod(&tmp.slice(..n), y)
            .map_err(CudaError::driver)
    }

    /// 1 with probability `p`, else 0 (Caffe `caffe_gpu_rng_bernoulli`).
    pub fn bernoulli(&self, p: f32, y: &mut CudaViewMut<'_, u32>) -> Result<(), CudaError> {
        if !(0.0..=1.0).contains(&p) {
            return Err(CudaError::Argument(format!(
                "rng_bernoulli: probability must lie in [0, 1], got {p}"
            )));
        }
        let n = y.len();
        if n == 0 {
            return Ok(());
        }
        let mut u = self
            .stream
            .alloc_zeros::<f32>(n)
            .map_err(CudaError::driver)?;
        self.rng()
            .fill_with_uniform(&mut u)
            .map_err(|e| CudaError::Rand(format!("{e:?}")))?;
        let f = self
            .functions
            .get("bernoulli_u32")
            .ok_or_else(|| CudaError::Argument("no kernel bernoulli_u32".into()))?;
        let n64 = n as i64;
        let mut l = self.stream.launch_builder(f);
        l.arg(&n64).arg(&p).arg(&u).arg(y);
        // SAFETY: bernoulli_u32(n, p, u, y) reads u[0..n], writes y[0..n].
        unsafe { l.launch(launch_config(n)) }
            .map(|_| ())
            .map_err(CudaError::driver)
    }
}

/// The element-wise unary kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnaryOp {
    /// `|a|`
    Abs,
    /// `|a|` (Caffe `fabs`)
    Fabs,
    /// `e^a`
    Exp,
    /// `ln a`
    Log,
    /// `sqrt a`
    Sqrt,
    /// `a^2`
    Sqr,
    /// `sign(a)`, 0 for ±0 and NaN
    Sign,
    /// `signbit(a)` as 0 or 1
    Sgnbit,
}

impl UnaryOp {
    fn name(self) -> &'static str {
        match self {
            Self::Abs => "abs",
            Self::Fabs => "fabs",
            Self::Exp => "exp",
            Self::Log => "log",
            Self::Sqrt => "sqrt",
            Self::Sqr => "sqr",
            Self::Sign => "sign",
            Self::Sgnbit => "sgnbit",
        }
    }
}

/// The element-wise binary kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinaryOp {
    /// `a + b`
    Add,
    /// `a - b`
    Sub,
    /// `a * b`
    Mul,
    /// `a / b`
    Div,
}

impl BinaryOp {
    fn name(self) -> &'static str {
        match self {
            Self::Add => "add",
            Self::Sub => "sub",
            Self::Mul => "mul",
            Self::Div => "div",
        }
    }
}

/// Every `extern "C" __global__` function name of a source, found in its
/// text, so a kernel added to a `.cu` file is loaded without listing it
/// again here.
fn kernel_names(file: &str) -> Vec<String> {
    let src = SOURCES.iter().find(|s| s.0 == file).map_or("", |s| s.1);
    let mut names = Vec::new();
    for line in src.lines() {
        let Some(rest) = line
            .trim_start()
            .strip_prefix("extern \"C\" __global__ void ")
        else {
            continue;
        };
        if let Some(name) = rest.split('(').next() {
            names.push(name.trim().to_string());
        }
    }
    // Kernels defined through the UNARY/BINARY macros.
    for line in src.lines() {
        for (mac, _) in [("UNARY(", ()), ("BINARY(", ())] {
            if let Some(rest) = line.strip_prefix(mac) {
                let op = rest.split(',').next().unwrap_or("").trim();
                names.push(format!("{op}_f32"));
                names.push(format!("{op}_f64"));
            }
        }
    }
    names
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_kernel_name_is_found_in_the_sources() {
        let names = super::kernel_names("elementwise.cu");
        for op in [
            "abs",
            "fabs",
            "exp",
            "log",
            "sqrt",
            "sqr",
            "sign",
            "sgnbit",
            "add",
            "sub",
            "mul",
            "div",
            "set",
            "add_scalar",
            "powx",
        ] {
            for s in ["f32", "f64"] {
                assert!(
                    names.contains(&format!("{op}_{s}")),
                    "{op}_{s} in {names:?}"
                );
            }
        }
        let rng = super::kernel_names("rng.cu");
        assert_eq!(
            rng,
            ["uniform_scale_f32", "uniform_scale_f64", "bernoulli_u32"]
        );
    }
}
