//! Sums of strided values: a matrix's row or column sums, or a 4-D
//! gradient's per-channel sums (a bias's gradient, Caffe's gemv against a
//! `bias_multiplier` of ones).
//!
//! [`SumLayout`] says where each sum's values lie. The GPU adds them in
//! passes (`Gpu::add_sums`, feature `cuda`): many threads per sum each
//! add every `lanes`-th value, so neighbouring threads read neighbouring
//! values; a second such pass adds those partial sums where they are
//! many ([`SumLayout::passes`]); then one thread per sum adds the last
//! partial sums in order. The order is fixed, so a run repeats bit for
//! bit. [`SumLayout::add_on_cpu`]
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

/// Values each lane of a GPU pass adds, where the lanes allow
/// ([`SumLayout::lanes`]).
pub const VALUES_PER_LANE: usize = 64;

/// The most lanes a pass makes per sum ([`SumLayout::lanes`]).
pub const MAX_LANES: usize = 8192;

/// The most partial sums per sum that the last pass may leave to one
/// thread per sum ([`SumLayout::passes`]).
pub const FINAL_LANES: usize = 256;

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

    /// How many partial sums a pass of the GPU makes per sum: one per
    /// [`VALUES_PER_LANE`] values, at most [`MAX_LANES`]. Many short lanes
    /// keep every multiprocessor loading: LeNet's conv1 bias gradient at
    /// batch 1000 (20 sums of 576,000) read at 240 GB/s on an H200 with
    /// 1,024 lanes of 562 values, 20,480 threads in all.
    ///
    /// ```
    /// use blob_kernels::sums::SumLayout;
    /// assert_eq!(SumLayout::rows_of(20, 576_000).lanes(), 8192);
    /// assert_eq!(SumLayout::rows_of(20, 100).lanes(), 2);
    /// ```
    pub const fn lanes(&self) -> usize {
        let lanes = self.len.div_ceil(VALUES_PER_LANE);
        if lanes == 0 {
            1
        } else if lanes > MAX_LANES {
            MAX_LANES
        } else {
            lanes
        }
    }

    /// The GPU's passes over this layout: each the layout it reads and
    /// the lanes it makes per sum. The first reads the values; while a
    /// pass leaves more than [`FINAL_LANES`] partial sums per sum, the
    /// next adds those (`rows_of(sums, lanes)`). One thread per sum then
    /// adds the last pass's partial sums in order. The passes are fixed
    /// by the layout, so a run repeats bit for bit.
    ///
    /// ```
    /// use blob_kernels::sums::SumLayout;
    /// let passes = SumLayout::rows_of(20, 576_000).passes();
    /// assert_eq!(passes.len(), 2);
    /// assert_eq!(passes[1], (SumLayout::rows_of(20, 8192), 128));
    /// assert_eq!(SumLayout::columns_of(1000, 500).passes().len(), 1);
    /// ```
    pub fn passes(&self) -> Vec<(SumLayout, usize)> {
        let mut passes = vec![(*self, self.lanes())];
        while let Some(&(layout, lanes)) = passes.last()
            && lanes > FINAL_LANES
        {
            let next = SumLayout::rows_of(layout.sums, lanes);
            passes.push((next, next.lanes()));
        }
        passes
    }

    /// Partial sum `lane` of each sum: every `lanes`-th value from `lane`
    /// on, as one thread of a GPU pass adds them.
    fn partial_sums<T: Real>(&self, lanes: usize, m: &[T]) -> Vec<T> {
        let mut partial = vec![T::ZERO; self.sums * lanes];
        for (i, p) in partial.iter_mut().enumerate() {
            let (r, lane) = (i / lanes, i % lanes);
            for t in (lane..self.len).step_by(lanes) {
                *p += m[self.index(r, t)];
            }
        }
        partial
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
        let passes = self.passes();
        let (first, lanes) = passes[0];
        let mut partial = first.partial_sums(lanes, m);
        for &(layout, lanes) in &passes[1..] {
            partial = layout.partial_sums(lanes, &partial);
        }
        let lanes = passes.last().map_or(1, |&(_, lanes)| lanes);
        for (sum, row) in sums[..self.sums]
            .iter_mut()
            .zip(partial.chunks_exact(lanes))
        {
            let mut total = T::ZERO;
            for &p in row {
                total += p;
            }
            *sum += total;
        }
    }
}
