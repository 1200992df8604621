//! A growable buffer whose first value starts on a cache line.
//!
//! A `Vec`'s values start wherever the allocator put them: 16 bytes past
//! a page for the large blocks of a convolution's scratch, so every
//! 64-byte AVX-512 load of a packed panel crossed two cache lines (and
//! every other 32-byte AVX2 one). The product's panels, the packs of a
//! net's weights, the phase copies and column buffers live in these
//! instead.

use std::collections::TryReserveError;
use std::ops::{Deref, DerefMut};

/// The alignment of an [`AlignedVec`]'s first value, in bytes.
pub const CACHE_LINE: usize = 64;

/// A growable run of values whose first starts on a [`CACHE_LINE`]
/// boundary (for any `T` whose size divides it: `f32`, `f64`, the
/// integers), readable as a slice. Growing keeps the values there and
/// fills the new ones with `T::default()`; the buffers of Caffe's
/// layers only ever grow.
///
/// ```
/// use blob_kernels::cpu::{AlignedVec, CACHE_LINE};
/// let mut v = AlignedVec::<f32>::new();
/// v.resize(100);
/// v[99] = 1.5;
/// v.resize(10_000);
/// assert_eq!((v.len(), v[99], v[100]), (10_000, 1.5, 0.0));
/// assert_eq!(v.as_ptr() as usize % CACHE_LINE, 0);
/// ```
#[derive(Debug)]
pub struct AlignedVec<T> {
    /// The allocation: `start` values of padding, the `len` values, and
    /// room up to its end.
    values: Vec<T>,
    start: usize,
    len: usize,
}

impl<T> AlignedVec<T> {
    /// An empty buffer that has allocated nothing.
    pub const fn new() -> Self {
        Self {
            values: Vec::new(),
            start: 0,
            len: 0,
        }
    }

    /// Empties the buffer, keeping its allocation (a later growth fills
    /// with `T::default()`, as after `Vec::clear`).
    ///
    /// ```
    /// let mut v = blob_kernels::cpu::AlignedVec::<u32>::new();
    /// v.resize(4);
    /// v.clear();
    /// assert!(v.is_empty());
    /// ```
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Values of padding an allocation needs to hold `len` values from a
    /// cache line on.
    fn with_padding(len: usize) -> Option<usize> {
        let size = size_of::<T>();
        let padding = if size == 0 {
            0
        } else {
            CACHE_LINE.div_ceil(size) - 1
        };
        len.checked_add(padding)
    }
}

impl<T: Copy + Default> AlignedVec<T> {
    /// Makes the buffer `len` values long: the first `min(len, old)`
    /// kept, new ones `T::default()`. An allocation that fails is an
    /// error, and the buffer is left as it was.
    ///
    /// ```
    /// let mut v = blob_kernels::cpu::AlignedVec::<f64>::new();
    /// assert!(v.try_resize(8).is_ok());
    /// assert!(v.try_resize(usize::MAX / 4).is_err());
    /// assert_eq!(v.len(), 8);
    /// ```
    pub fn try_resize(&mut self, len: usize) -> Result<(), TryReserveError> {
        if self.start + len <= self.values.len() {
            if len > self.len {
                self.values[self.start + self.len..self.start + len].fill(T::default());
            }
            self.len = len;
            return Ok(());
        }
        let mut values: Vec<T> = Vec::new();
        let Some(room) = Self::with_padding(len) else {
            // Past what any allocation can hold: the error Vec gives.
            return values.try_reserve_exact(usize::MAX);
        };
        values.try_reserve_exact(room)?;
        values.resize(room, T::default());
        let start = match values.as_ptr().align_offset(CACHE_LINE) {
            offset if offset < room - len + 1 => offset,
            _ => 0,
        };
        values[start..start + self.len].copy_from_slice(self);
        *self = Self { values, start, len };
        Ok(())
    }

    /// `len` values of `T::default()` (zeros, for numbers).
    ///
    /// ```
    /// let v = blob_kernels::cpu::AlignedVec::<f32>::with_len(3);
    /// assert_eq!(v[..], [0.0; 3]);
    /// ```
    ///
    /// # Panics
    /// If the allocation fails.
    #[track_caller]
    pub fn with_len(len: usize) -> Self {
        let mut v = Self::new();
        v.resize(len);
        v
    }

    /// [`try_resize`](Self::try_resize), panicking where the allocation
    /// fails (as `Vec::resize`).
    ///
    /// # Panics
    /// If the allocation fails.
    #[track_caller]
    pub fn resize(&mut self, len: usize) {
        if let Err(e) = self.try_resize(len) {
            panic!("AlignedVec: cannot hold {len} values: {e}");
        }
    }
}

impl<T> Default for AlignedVec<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Deref for AlignedVec<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        &self.values[self.start..self.start + self.len]
    }
}

impl<T> DerefMut for AlignedVec<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        &mut self.values[self.start..self.start + self.len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every length, grown from every earlier one, starts on a cache line
    /// and keeps its values; shrinking keeps the first ones; growing
    /// again within the allocation gives defaults, not what was there.
    #[test]
    fn grows_aligned_and_keeps_its_values() {
        let mut v = AlignedVec::<f32>::new();
        assert!(v.is_empty());
        for len in (0..2000).step_by(37).chain([1 << 16, 1 << 20]) {
            let before: Vec<f32> = v.to_vec();
            v.resize(len);
            assert_eq!(v.len(), len);
            if len > 0 {
                assert_eq!(v.as_ptr() as usize % CACHE_LINE, 0, "{len}");
            }
            let kept = before.len().min(len);
            assert_eq!(v[..kept], before[..kept]);
            assert!(v[kept..].iter().all(|&x| x == 0.0));
            for (i, x) in v.iter_mut().enumerate() {
                *x = i as f32 + 0.5;
            }
        }
        v.resize(3);
        v.resize(10);
        assert_eq!(v[..], [0.5, 1.5, 2.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
        let mut d = AlignedVec::<f64>::new();
        d.resize(33);
        assert_eq!(d.as_ptr() as usize % CACHE_LINE, 0);
        let mut z = AlignedVec::<()>::new();
        z.resize(5);
        assert_eq!(z.len(), 5);
    }
}
