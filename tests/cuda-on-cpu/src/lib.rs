//! The workspace's CUDA kernels, run on the CPU.
//!
//! The build script compiles every `.cu` file of `kernels/`, `layers/`
//! and `examples/` as C++, with a header standing in for CUDA's built-ins, and writes one
//! launcher per kernel from the parameter list of the source itself. A
//! launcher runs every thread of the grid that
//! `blob_kernels::cuda::launch_config` would launch, one thread after
//! another: the kernels are grid-stride loops without shared memory or
//! barriers or atomics, so this computes what the GPU computes (up to the
//! GPU's fused multiply-adds).
//!
//! The tests beside this crate hold each kernel to the CPU side of its
//! layer: the GPU path's arithmetic, checked on machines without a GPU.
//! The same kernels also make a CPU CUDA driver ([`CPU_DRIVER_DIR`]) on
//! which the GPU suite and the examples' `--device cuda` run whole.
//!
//! ```
//! let x = [1.0f32, -2.0, 3.0];
//! let mut y = [0.0f32; 3];
//! // SAFETY: both slices hold the 3 values the kernel touches.
//! unsafe { cuda_on_cpu::abs_f32(3, 3, &x, &mut y) };
//! assert_eq!(y, [1.0, 2.0, 3.0]);
//! ```

include!(concat!(env!("OUT_DIR"), "/kernels.rs"));

/// The folder of the CPU CUDA driver: `libcuda.so`, `libcublas.so`,
/// `libcurand.so` and `libcudnn.so`, one library that runs the CUDA path
/// on the CPU (see
/// `driver/driver.cpp`). With it first on `LD_LIBRARY_PATH`, a
/// program built with `--features cuda` opens "a GPU" that is the CPU:
/// the GPU suite and the examples' `--device cuda` run their whole CUDA
/// path here, kernels and all (NVRTC must be there to compile them).
///
/// ```
/// assert!(std::path::Path::new(cuda_on_cpu::CPU_DRIVER_DIR).join("libcuda.so").exists());
/// ```
pub const CPU_DRIVER_DIR: &str = env!("CPU_DRIVER_DIR");

/// A kernel of a `.cu` file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Kernel {
    /// The file, e.g. `"conv.cu"`.
    pub file: &'static str,
    /// The `extern "C"` name, e.g. `"im2col_f32"`.
    pub name: &'static str,
}

/// Threads per block, as `blob_kernels::cuda::THREADS`.
pub const THREADS: u32 = 512;

/// The number of blocks `blob_kernels::cuda::launch_config(threads)`
/// launches.
///
/// ```
/// assert_eq!(cuda_on_cpu::blocks(1000), 2);
/// ```
pub fn blocks(threads: usize) -> u32 {
    threads.div_ceil(THREADS as usize).clamp(1, 65_535 * 32) as u32
}

unsafe extern "C" {
    fn cuda_on_cpu_enter(block: u32, thread: u32, block_dim: u32, grid_dim: u32);
}

/// Runs `thread` once for every thread of the grid, each after setting
/// the indices it reads.
fn launch(threads: usize, mut thread: impl FnMut()) {
    let grid = blocks(threads);
    for block in 0..grid {
        for t in 0..THREADS {
            // SAFETY: sets four thread-local values.
            unsafe { cuda_on_cpu_enter(block, t, THREADS, grid) };
            thread();
        }
    }
}
