//! CPU math: Caffe's `caffe_cpu_*` and `caffe_*` functions on slices.
//!
//! One module per math family: [`blas`] (gemm, gemv), [`vector`] (BLAS level
//! 1: axpy, dot, asum, ...), [`elementwise`] (add, exp, sign, ...) and
//! [`rng`] (seeded uniform, gaussian, bernoulli). All are re-exported here.
//!
//! Slices of mismatched lengths are a caller bug and panic with both lengths,
//! as `copy_from_slice` does; every function accepts empty slices.

mod aligned_vec;
pub mod blas;
mod col2im;
pub mod cores;
mod correlate;
mod depthwise;
mod depthwise_blocked;
mod depthwise_flat;
mod depthwise_in_place;
pub mod elementwise;
mod exp;
mod finish;
mod interleave;
pub mod isa;
#[cfg(target_arch = "x86_64")]
pub(crate) mod lanes;
mod peak;
mod pointwise_blocked;
mod pool2x2;
mod pool_stride1;
mod pool_stride2;
pub mod rng;
#[cfg(target_arch = "x86_64")]
pub(crate) mod sgemm;
#[cfg(target_arch = "x86_64")]
mod shallow_blocked;
mod shallow_panels;
pub mod vector;
#[cfg(test)]
mod window_3x3_checks;

pub use aligned_vec::{AlignedVec, CACHE_LINE, HUGE_PAGE, advise_huge_pages};
pub use blas::{
    PANEL_COLUMNS, Transpose, gemm, gemm_few_columns_as_dots, gemm_filled, gemm_filled_into,
    gemm_filled_suits, gemm_finished, gemm_packed, gemm_packed_len, gemm_packed_suits, gemm_panels,
    gemv, pack_for_gemm_packed, pack_panels, panel_from_columns, panels_len,
};
pub use col2im::{DenseWindow, col2im_dense};
pub use cores::{cores, on_cores};
pub use correlate::{Taps, correlate, correlate_gradient};
pub use depthwise::{DepthwiseTaps, InterleavedTaps, depthwise_interleaved, depthwise_plane};
pub use depthwise_blocked::{
    BlockedPlane, WHOLE_BLOCK_MAX_BYTES, depthwise_3x3_blocked, depthwise_3x3_planes_to_blocked,
};
pub use depthwise_flat::depthwise_3x3_flat;
pub use depthwise_in_place::{depthwise_3x3_stride1, depthwise_3x3_stride2};
pub use elementwise::*;
pub use exp::exp_f32;
pub use finish::{Rectifier, RowFinish, Shortcut, relu};
pub use interleave::{
    INTERLEAVED_LANES, deinterleave_runs, interleave_rows, interleave_runs, run_sums,
};
pub use isa::{Isa, isa, limit_isa, vectorized};
pub use peak::{FmaPeak, fma_peak};
pub use pointwise_blocked::{
    POINTWISE_BLOCKED_MAX_DEPTH, PointwiseShape, block_pointwise_weights, pointwise_blocked,
};
pub use pool_stride1::{Stride1Pool, max_pool_stride1};
pub use pool_stride2::{Stride2Pool, max_pool_stride2};
pub use pool2x2::{max_pool_2x2, max_pool_2x2_positions, max_unpool_2x2};
pub use rng::{RngError, SeededRng, bernoulli, gaussian, rng_rand, set_seed, uniform};
pub use shallow_blocked::{SHALLOW_BLOCKED_MAX_CHANNELS, ShallowWindow, shallow_3x3_to_blocked};
pub use vector::*;

#[track_caller]
#[inline]
pub(crate) fn check_len(op: &str, what: &str, got: usize, want: usize) {
    assert!(
        got == want,
        "{op}: {what} has {got} elements but {want} were expected"
    );
}
