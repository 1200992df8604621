//! Caffe's `math_functions` for blobflow.
//!
//! Every function works on plain slices, so this crate knows nothing of blobs:
//! the runtime (`blob-runtime`) joins these kernels to its buffers. Semantics
//! follow Caffe's `caffe_cpu_*` functions (row-major gemm/gemv with BLAS alpha
//! and beta rules, `sign` giving 0 for ±0 and NaN, ...), with one deliberate
//! difference: an empty input is always a valid no-op.
//!
//! Depend on `blobflow` (which re-exports this crate as `blobflow::kernels`)
//! unless you want the math on slices with no blobs at all.
//!
//! Large products and vectors are split across cores (where Caffe leaves
//! this to a threaded BLAS), the calling thread taking part
//! ([`cpu::on_cores`]). Inside a rayon pool (`pool.install(|| ...)`) the
//! parts go to that pool; from any other thread, to the crate's helper
//! threads, one fewer than `RAYON_NUM_THREADS` (or the cores), which spin
//! briefly between parts so a small net's layers find them awake.
//! `RAYON_NUM_THREADS=1` keeps everything on the calling thread. The
//! vector loops run on the widest instructions the machine has
//! ([`cpu::isa()`]).
//!
//! ```
//! use blob_kernels::cpu;
//! let x = [1.0f32, -2.0, 3.0];
//! let mut y = [10.0f32, 10.0, 10.0];
//! cpu::axpy(2.0, &x, &mut y); // caffe_axpy: y += 2 x
//! assert_eq!(y, [12.0, 6.0, 16.0]);
//! assert_eq!(cpu::asum(&x), 6.0);
//! ```

#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
mod real;
pub mod sums;

pub use real::Real;
