//! The GPU half of Caffe's math (feature `cuda`): cuBLAS for gemm, gemv,
//! axpy, axpby, scal, dot, asum and scale; element-wise kernels in `.cu`
//! files beside their typed launchers, compiled by NVRTC once per GPU; cuRAND
//! for the random fills; strided sums for biases' gradients.
//!
//! Everything is loaded at run time: a build with the feature runs on a
//! machine with no CUDA, and [`Gpu::new`] then returns an error that says
//! so instead of panicking. Kernel sources compile with NVRTC alone, so
//! [`KernelSource::check_ptx`] holds every launcher against the PTX on
//! machines without a GPU.
//!
//! ```no_run
//! use blob_kernels::cuda::{CudaError, Gpu};
//! let gpu = Gpu::new(0)?; // Err(CudaError::NoDriver) where there is no GPU
//! let mut y = gpu.stream().alloc_zeros::<f32>(1000).map_err(CudaError::driver("alloc"))?;
//! gpu.set(2.0f32, &mut y.as_view_mut())?;
//! # Ok::<(), CudaError>(())
//! ```

mod blas;
mod cudnn;
mod elementwise;
mod error;
mod launch;
mod rng;
mod scratch;
mod sums;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use cudarc::cublas::CudaBlas;
use cudarc::curand::CudaRng;
use cudarc::driver::sys::CUresult;
use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaStream, CudaViewMut};
use cudarc::nvrtc::Ptx;

pub use blas::GpuReal;
pub use cudnn::{CUDNN_FUNCTIONS, CUDNN_MAJOR, CudnnUnavailable, CudnnVersion, cudnn};
pub use elementwise::{BinaryOp, ELEMENTWISE, UnaryOp};
pub use error::CudaError;
use launch::ptx_isa;
pub use launch::{
    KernelArg, KernelSig, KernelSource, PtxEntry, PtxType, THREADS, launch_config, ptx_entries,
};
pub use rng::RNG;
pub use scratch::Scratch;
pub use sums::SUMS;

/// cudarc, re-exported so users can name the buffer and stream types.
pub use cudarc;

/// The kernel sources of this crate, for checks over all of them.
pub const SOURCES: [&KernelSource; 3] = [&ELEMENTWISE, &RNG, &SUMS];

/// Whether the CUDA driver library can be loaded (checked once, without
/// panicking).
///
/// ```
/// let _ = blob_kernels::cuda::driver_available();
/// ```
pub fn driver_available() -> bool {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    *PRESENT.get_or_init(|| library_loads("cuda"))
}

/// Whether NVRTC can be loaded.
///
/// ```
/// let _ = blob_kernels::cuda::nvrtc_available();
/// ```
pub fn nvrtc_available() -> bool {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    *PRESENT.get_or_init(|| library_loads("nvrtc"))
}

/// Whether CUDA's library `name` loads under one of the file names
/// cudarc's run-time loading looks for. cudarc's own check exists only
/// where it loads the libraries at run time; where the final binary
/// links them instead (candle's choice), they are loaded already and this
/// finds them as well.
fn library_loads(name: &str) -> bool {
    use std::env::consts::{DLL_PREFIX, DLL_SUFFIX};
    let bits = usize::BITS;
    let mut names = vec![
        format!("{DLL_PREFIX}{name}{DLL_SUFFIX}"),
        format!("{DLL_PREFIX}{name}{bits}{DLL_SUFFIX}"),
        format!("{DLL_PREFIX}{name}{DLL_SUFFIX}.1"),
    ];
    for major in [13, 12, 11, 10] {
        names.push(format!("{DLL_PREFIX}{name}{DLL_SUFFIX}.{major}"));
        names.push(format!("{DLL_PREFIX}{name}{bits}_{major}{DLL_SUFFIX}"));
        names.push(format!("{DLL_PREFIX}{name}{bits}_{major}0_0{DLL_SUFFIX}"));
    }
    names.iter().any(|file| {
        // SAFETY: loading a CUDA library runs only its initialisers, as
        // cudarc's loading of it would; it is unloaded at once.
        unsafe { libloading::Library::new(file) }.is_ok()
    })
}

/// The CUDA version the driver implements, e.g. `"12.4"`.
fn driver_cuda_version() -> String {
    let mut version = 0;
    // SAFETY: cuDriverGetVersion writes one int and needs no context; the
    // driver is loaded, since a context exists.
    let status = unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut version) };
    if status == CUresult::CUDA_SUCCESS {
        format!("{}.{}", version / 1000, version % 1000 / 10)
    } else {
        "of unknown version".into()
    }
}

/// The cuRAND generator, reachable only through the `Mutex` in [`Gpu`].
struct RngCell(CudaRng);

// SAFETY: a cuRAND generator may be used from any thread as long as calls
// are not concurrent; the Mutex around RngCell serialises every use.
unsafe impl Send for RngCell {}

/// A compiled source on one GPU: every `.entry` of its PTX.
struct LoadedModule {
    functions: HashMap<String, CudaFunction>,
    _module: Arc<CudaModule>,
}

/// One GPU: its context, a stream, a cuBLAS handle, a cuRAND generator,
/// and the kernel modules compiled so far. Open it once per device and
/// share the `Arc`; everything is released when the last one drops.
pub struct Gpu {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    blas: CudaBlas,
    rng: Mutex<RngCell>,
    /// Keyed by the address of the `static` [`KernelSource`].
    modules: Mutex<HashMap<usize, Arc<LoadedModule>>>,
    /// What an op needs between two of its launches (partial sums, draws
    /// to map): kept, so that a training step allocates nothing.
    scratch: Mutex<Scratch<f32>>,
}

impl std::fmt::Debug for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gpu")
            .field("ordinal", &self.ctx.ordinal())
            .finish()
    }
}

impl Gpu {
    /// Opens GPU `ordinal` with a stream, cuBLAS and cuRAND. An error,
    /// never a panic, where there is no driver or no such GPU. Kernel
    /// sources are compiled when first launched.
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
        let count = CudaContext::device_count().map_err(CudaError::driver("count GPUs"))?;
        let count = usize::try_from(count).unwrap_or(0);
        if ordinal >= count {
            return Err(CudaError::NoSuchDevice { ordinal, count });
        }
        let ctx = CudaContext::new(ordinal).map_err(CudaError::driver("open CUDA context"))?;
        // cudarc would otherwise give every buffer two events and, once a
        // second stream exists (a loader's, for async pushes), record and
        // wait on them around every launch and copy: some six driver calls
        // an op. Every op here runs in order on the one stream below; work
        // on another stream is ordered by whoever queues it
        // (`CudaBackend::upload_async` waits for this stream first, and
        // the pusher synchronises its stream before the data is read or
        // dropped, as Caffe's prefetching does).
        // SAFETY: no buffer of this context exists yet; the orderings
        // above are what cudarc's tracking would have provided.
        unsafe { ctx.disable_event_tracking() };
        Self::with_stream(ctx.default_stream())
    }

    /// The GPU of an existing stream, with every op queued on that stream:
    /// blobflow's work runs in order with the work its owner (candle, a
    /// user's cudarc code) queues there, and memory moves between them
    /// without a copy or a synchronisation. The context keeps its event
    /// tracking as its owner set it.
    ///
    /// ```no_run
    /// let ctx = cudarc::driver::CudaContext::new(0)?;
    /// let gpu = blob_kernels::cuda::Gpu::with_stream(ctx.new_stream()?)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_stream(stream: Arc<CudaStream>) -> Result<Arc<Self>, CudaError> {
        let ctx = stream.context().clone();
        let blas = CudaBlas::new(stream.clone()).map_err(CudaError::blas("cublasCreate"))?;
        let rng =
            CudaRng::new(1701, stream.clone()).map_err(CudaError::rand("curandCreateGenerator"))?;
        Ok(Arc::new(Self {
            ctx,
            stream,
            blas,
            rng: Mutex::new(RngCell(rng)),
            modules: Mutex::new(HashMap::new()),
            scratch: Mutex::new(Scratch::new()),
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
        self.stream
            .synchronize()
            .map_err(CudaError::driver("synchronize"))
    }

    /// Runs `op` with `n` elements of the GPU's own scratch memory. The
    /// lock is held while `op` queues its work: every op runs on the one
    /// stream, so the next holder's use comes after this one's on the
    /// GPU too.
    fn with_scratch<R>(
        &self,
        n: usize,
        op: impl FnOnce(&mut CudaViewMut<'_, f32>) -> Result<R, CudaError>,
    ) -> Result<R, CudaError> {
        let mut scratch = self.scratch.lock().unwrap_or_else(PoisonError::into_inner);
        op(&mut scratch.grown(self, n)?)
    }

    /// Compiles and loads `source` unless done already. Every `.entry` of
    /// the PTX is loaded, after holding the launchers' declarations against
    /// it ([`KernelSource::check_ptx`]).
    fn module(&self, source: &'static KernelSource) -> Result<Arc<LoadedModule>, CudaError> {
        let key = source as *const KernelSource as usize;
        let mut modules = self.modules.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(m) = modules.get(&key) {
            return Ok(m.clone());
        }
        let ptx = source.compile()?;
        source.check_ptx(&ptx)?;
        let entries = ptx_entries(&ptx);
        let ptx_isa = ptx_isa(&ptx);
        let module = self
            .ctx
            .load_module(Ptx::from_src(ptx))
            .map_err(|e| match e.0 {
                CUresult::CUDA_ERROR_UNSUPPORTED_PTX_VERSION => CudaError::PtxTooNew {
                    file: source.file,
                    ptx_isa,
                    driver: driver_cuda_version(),
                },
                _ => CudaError::driver("load kernel module")(e),
            })?;
        let mut functions = HashMap::new();
        for entry in entries {
            let f = module
                .load_function(&entry.name)
                .map_err(CudaError::driver("load kernel"))?;
            functions.insert(entry.name, f);
        }
        let loaded = Arc::new(LoadedModule {
            functions,
            _module: module,
        });
        modules.insert(key, loaded.clone());
        Ok(loaded)
    }

    /// The loaded kernel `name` of `source`, compiling the source on first
    /// use. Launchers made by [`cuda_kernels!`](crate::cuda_kernels) call
    /// this; layer code calls the launchers.
    pub fn function(
        &self,
        source: &'static KernelSource,
        name: &str,
    ) -> Result<CudaFunction, CudaError> {
        self.module(source)?
            .functions
            .get(name)
            .cloned()
            .ok_or_else(|| CudaError::NoSuchKernel {
                file: source.file,
                name: name.to_string(),
            })
    }

    /// Compiles and loads `source` now rather than at its first launch, so
    /// a program can fail early (or time the compile apart).
    ///
    /// ```no_run
    /// let gpu = blob_kernels::cuda::Gpu::new(0)?;
    /// gpu.preload(&blob_kernels::cuda::ELEMENTWISE)?;
    /// # Ok::<(), blob_kernels::cuda::CudaError>(())
    /// ```
    pub fn preload(&self, source: &'static KernelSource) -> Result<(), CudaError> {
        self.module(source).map(drop)
    }
}

/// Fails unless `got == want`, naming the operand.
fn check_len(
    op: &'static str,
    what: &'static str,
    got: usize,
    want: usize,
) -> Result<(), CudaError> {
    if got == want {
        Ok(())
    } else {
        Err(CudaError::Length {
            op,
            what,
            got,
            want,
        })
    }
}

/// `n` as the 64-bit element count the kernels take.
fn len_i64(n: usize) -> i64 {
    // A slice's length never exceeds isize::MAX.
    n as i64
}
