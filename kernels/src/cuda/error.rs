//! What can go wrong on the GPU side, with cudarc's own errors kept as
//! sources.

use cudarc::cublas::result::CublasError;
use cudarc::curand::result::CurandError;
use cudarc::driver::DriverError;
use cudarc::nvrtc::CompileError;

/// What went wrong on the GPU side. Each message names the operation; the
/// library's own error (driver, cuBLAS, cuRAND, NVRTC) is kept as the
/// [`source`](std::error::Error::source).
///
/// ```
/// use blob_kernels::cuda::CudaError;
/// let e = CudaError::Length { op: "axpy", what: "x", got: 3, want: 4 };
/// assert_eq!(e.to_string(), "axpy: x has 3 elements where 4 are needed");
/// ```
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum CudaError {
    /// No CUDA driver library (libcuda) on this machine.
    #[error("no CUDA driver on this machine (libcuda.so could not be loaded)")]
    NoDriver,
    /// No NVRTC library to compile the kernels.
    #[error("NVRTC (libnvrtc.so.13) could not be loaded: add its directory to LD_LIBRARY_PATH")]
    NoNvrtc,
    /// The GPU asked for does not exist.
    #[error("no GPU {ordinal}: this machine has {count}")]
    NoSuchDevice {
        /// The ordinal asked for.
        ordinal: usize,
        /// GPUs present.
        count: usize,
    },
    /// A driver call failed.
    #[error("{op}: {source}")]
    Driver {
        /// What was being done.
        op: &'static str,
        /// The driver's error.
        source: DriverError,
    },
    /// A kernel source did not compile.
    #[error("NVRTC could not compile {file}:\n{log}")]
    Compile {
        /// The source file.
        file: &'static str,
        /// The compiler's log.
        log: String,
        /// NVRTC's error.
        source: CompileError,
    },
    /// The compiled PTX does not define the kernels its launchers expect.
    #[error("{file}: the compiled PTX does not match its launchers: {detail}")]
    KernelMismatch {
        /// The source file.
        file: &'static str,
        /// Every difference, one per line.
        detail: String,
    },
    /// The driver cannot load the PTX NVRTC emitted: NVRTC is of a newer
    /// CUDA than the driver (each driver JIT-compiles PTX up to its own
    /// CUDA version).
    #[error(
        "{file}: NVRTC emitted PTX ISA {ptx_isa}, which the CUDA {driver} driver cannot load: \
         put an NVRTC of CUDA {driver} or older first on LD_LIBRARY_PATH, or update the driver"
    )]
    PtxTooNew {
        /// The source file.
        file: &'static str,
        /// The PTX's `.version`, e.g. `"9.1"`.
        ptx_isa: String,
        /// The driver's CUDA version, e.g. `"13.0"`.
        driver: String,
    },
    /// A kernel name that no launcher of this source declares.
    #[error("{file} has no kernel {name}")]
    NoSuchKernel {
        /// The source file.
        file: &'static str,
        /// The name asked for.
        name: String,
    },
    /// A kernel launch failed.
    #[error("launch {kernel}: {source}")]
    Launch {
        /// The kernel.
        kernel: &'static str,
        /// The driver's error.
        source: DriverError,
    },
    /// A cuBLAS call failed.
    #[error("{op}: {source}")]
    Blas {
        /// The cuBLAS routine.
        op: &'static str,
        /// cuBLAS's error.
        source: CublasError,
    },
    /// A cuRAND call failed.
    #[error("{op}: {source}")]
    Rand {
        /// The cuRAND routine.
        op: &'static str,
        /// cuRAND's error.
        source: CurandError,
    },
    /// A buffer of the wrong length.
    #[error("{op}: {what} has {got} elements where {want} are needed")]
    Length {
        /// The operation.
        op: &'static str,
        /// Which operand.
        what: &'static str,
        /// Its length.
        got: usize,
        /// The length needed.
        want: usize,
    },
    /// A size beyond what the CUDA library takes (cuBLAS lengths are
    /// 32-bit).
    #[error("{op}: {n} exceeds the 32-bit sizes {library} takes")]
    TooLarge {
        /// The operation.
        op: &'static str,
        /// The size.
        n: usize,
        /// The library with the limit.
        library: &'static str,
    },
    /// An argument outside the operation's domain.
    #[error("{op}: {detail}")]
    Argument {
        /// The operation.
        op: &'static str,
        /// What is wrong.
        detail: String,
    },
}

impl CudaError {
    /// A driver error of operation `op`, for `map_err`.
    ///
    /// ```
    /// use blob_kernels::cuda::{CudaError, cudarc::driver::{DriverError, sys::CUresult}};
    /// let e = CudaError::driver("allocate")(DriverError(CUresult::CUDA_ERROR_OUT_OF_MEMORY));
    /// assert!(matches!(e, CudaError::Driver { op: "allocate", .. }));
    /// ```
    pub fn driver(op: &'static str) -> impl FnOnce(DriverError) -> Self {
        move |source| Self::Driver { op, source }
    }

    /// A cuBLAS error of routine `op`, for `map_err`.
    pub(crate) fn blas(op: &'static str) -> impl FnOnce(CublasError) -> Self {
        move |source| Self::Blas { op, source }
    }

    /// A cuRAND error of routine `op`, for `map_err`.
    pub(crate) fn rand(op: &'static str) -> impl FnOnce(CurandError) -> Self {
        move |source| Self::Rand { op, source }
    }
}
