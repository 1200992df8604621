//! Sums of strided values: a matrix's row or column sums, or a 4-D
//! gradient's per-channel sums (a bias's gradient, Caffe's gemv against a
//! `bias_multiplier` of ones).
//!
//! [`SumLayout`] says where each sum's values lie. The GPU adds them in
//! two passes (`Gpu::add_sums`, feature `cuda`): many threads per sum
//! each add every `lanes`-th value, so neighbouring threads read
//! neighbouring values, then one thread per sum adds its lanes in order;
//! the order is fixed, so a run repeats bit for bit. [`SumLayout::add_on_cpu`]
//! is the same arithmetic on the CPU.
//!
//! ```
//! use blob_kernels::sums::SumLayout;
//! let m = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]; // 2 x 3
//! let mut sums = [0.0f32; 3];
//! SumLayout::columns_of(2, 3).add_on_cpu(&m, &mut sums);
//! assert_eq!(sums, [5.0, 7.0, 9.0]);
//! ```

use crate::Real;

/// Where the values of each of `sums` sums lie: value `t` (of `len`) of
/// sum `r` is element `r * sum_stride + (t / run) * run_stride + t % run`
/// of the summed buffer, values coming in runs of `run` neighbours.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SumLayout {
    /// How many sums.
    pub sums: usize,
    /// How many values each sum adds.
    pub len: usize,
    /// How many neighbouring values make one run (at least 1).
    pub run: usize,
    /// From the first value of one sum to that of the next.
    pub sum_stride: usize,
    /// From one run of a sum to its next.
    pub run_stride: usize,
}

impl SumLayout {
    /// The row sums of a row-major `rows x cols` matrix.
    ///
    /// ```
    /// let mut sums = [0.0f32; 2];
    /// blob_kernels::sums::SumLayout::rows_of(2, 3).add_on_cpu(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &mut sums);
    /// assert_eq!(sums, [6.0, 15.0]);
    /// ```
    pub const fn rows_of(rows: usize, cols: usize) -> Self {
        Self {
            sums: rows,
            len: cols,
            run: if cols == 0 { 1 } else { cols },
            sum_stride: cols,
            run_stride: cols,
        }
    }

    /// The column sums of a row-major `rows x cols` matrix (InnerProduct's
    /// bias gradient).
    ///
    /// ```
    /// let l = blob_kernels::sums::SumLayout::columns_of(4, 3);
    /// assert_eq!((l.sums, l.len), (3, 4));
    /// ```
    pub const fn columns_of(rows: usize, cols: usize) -> Self {
        Self {
            sums: cols,
            len: rows,
            run: 1,
            sum_stride: 1,
            run_stride: cols,
        }
    }

    /// The per-channel sums of a `(batch, channels, plane)` buffer
    /// (Convolution's bias gradient from its output's).
    ///
    /// ```
    /// let dy = [1.0f32, 1.0, 2.0, 2.0, 10.0, 10.0, 20.0, 20.0]; // (2, 2, 2)
    /// let mut db = [0.0f32; 2];
    /// blob_kernels::sums::SumLayout::channels_of(2, 2, 2).add_on_cpu(&dy, &mut db);
    /// assert_eq!(db, [22.0, 44.0]);
    /// ```
    pub const fn channels_of(batch: usize, channels: usize, plane: usize) -> Self {
        Self {
            sums: channels,
            len: batch * plane,
            run: if plane == 0 { 1 } else { plane },
            sum_stride: plane,
            run_stride: channels * plane,
        }
    }

    /// Where value `t` of sum `r` lies.
    ///
    /// ```
    /// let l = blob_kernels::sums::SumLayout::channels_of(2, 3, 4);
    /// assert_eq!(l.index(1, 5), 1 * 4 + 1 * 12 + 1);
    /// ```
    pub const fn index(&self, r: usize, t: usize) -> usize {
        r * self.sum_stride + (t / self.run) * self.run_stride + t % self.run
    }

    /// How many elements the summed buffer must hold: one past the last
    /// value (0 when there is nothing to add; a layout with values but
    /// runs of 0 reaches no element and spans 0, which
    /// [`add_on_cpu`](Self::add_on_cpu) and `Gpu::add_sums` refuse).
    ///
    /// ```
    /// assert_eq!(blob_kernels::sums::SumLayout::columns_of(4, 3).span(), 12);
    /// ```
    pub const fn span(&self) -> usize {
        if self.sums == 0 || self.len == 0 || self.run == 0 {
            0
        } else {
            self.index(self.sums - 1, self.len - 1) + 1
        }
    }

    /// How many partial sums the GPU's first pass makes per sum: one per
    /// 256 values, at most 1024.
    ///
    /// ```
    /// use blob_kernels::sums::SumLayout;
    /// assert_eq!(SumLayout::rows_of(20, 576_000).lanes(), 1024);
    /// assert_eq!(SumLayout::rows_of(20, 100).lanes(), 1);
    /// ```
    pub const fn lanes(&self) -> usize {
        let lanes = self.len.div_ceil(256);
        if lanes == 0 {
            1
        } else if lanes > 1024 {
            1024
        } else {
            lanes
        }
    }

    /// `sums[r] += ` the values of sum `r` of `m`, added as the GPU adds
    /// them (lane by lane, then the lanes in order).
    ///
    /// # Panics
    /// If `m` is shorter than [`span`](Self::span), `sums` than
    /// [`sums`](Self::sums), or values come in runs of 0.
    ///
    /// ```
    /// let mut sums = [1.0f64; 1];
    /// blob_kernels::sums::SumLayout::rows_of(1, 3).add_on_cpu(&[1.0, 2.0, 3.0], &mut sums);
    /// assert_eq!(sums, [7.0]);
    /// ```
    #[track_caller]
    pub fn add_on_cpu<T: Real>(&self, m: &[T], sums: &mut [T]) {
        assert!(
            m.len() >= self.span() && sums.len() >= self.sums && (self.run > 0 || self.len == 0),
            "{self:?} needs {} values and {} sums, got {} and {}",
            self.span(),
            self.sums,
            m.len(),
            sums.len()
        );
        let lanes = self.lanes();
        for (r, sum) in sums[..self.sums].iter_mut().enumerate() {
            let mut total = T::ZERO;
            for lane in 0..lanes {
                let mut partial = T::ZERO;
                for t in (lane..self.len).step_by(lanes) {
                    partial += m[self.index(r, t)];
                }
                total += partial;
            }
            *sum += total;
        }
    }
}
