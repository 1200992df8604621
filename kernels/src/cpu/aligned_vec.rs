//! A growable buffer whose first value starts on a cache line, and
//! whose large allocations lie on huge pages.
//!
//! A `Vec`'s values start wherever the allocator put them: 16 bytes past
//! a page for the large blocks of a convolution's scratch, so every
//! 64-byte AVX-512 load of a packed panel crossed two cache lines (and
//! every other 32-byte AVX2 one). The product's panels, the packs of a
//! net's weights, the phase copies and column buffers live in these
//! instead.
//!
//! From [`HUGE_PAGE`] bytes on, the values start on a huge page's
//! boundary and the kernel is asked to back them with huge pages (where
//! transparent huge pages are in `madvise` mode, the default of many
//! distributions): a net's packed weights (MobileNet-SSD's conv13, 4 MB)
//! on 4 KiB pages span more pages than the TLB holds, and each pass
//! walked the page tables for them. One Zen 5 core, medians of 10-12
//! alternating runs in the nets: that layer 0.82-0.83 -> 0.80 ms, conv12
//! 0.42 -> 0.41, ResNet-50's res4c_branch2b 0.676 -> 0.625.

use std::alloc::{Layout, alloc, dealloc};
use std::collections::TryReserveError;
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

/// The alignment of an [`AlignedVec`]'s first value, in bytes.
pub const CACHE_LINE: usize = 64;

/// The size of an x86-64 huge page: an [`AlignedVec`] of at least this
/// many bytes starts on one.
pub const HUGE_PAGE: usize = 2 << 20;

/// A growable run of values whose first starts on a [`CACHE_LINE`]
/// boundary (on a [`HUGE_PAGE`] one from that size on), for any `T` whose
/// alignment divides it (`f32`, `f64`, the integers), readable as a
/// slice. Growing keeps the values there and fills the new ones with
/// `T::default()`; the buffers of Caffe's layers only ever grow.
///
/// ```
/// use blob_kernels::cpu::{AlignedVec, CACHE_LINE, HUGE_PAGE};
/// let mut v = AlignedVec::<f32>::new();
/// v.resize(100);
/// v[99] = 1.5;
/// v.resize(10_000);
/// assert_eq!((v.len(), v[99], v[100]), (10_000, 1.5, 0.0));
/// assert_eq!(v.as_ptr() as usize % CACHE_LINE, 0);
/// v.resize(HUGE_PAGE);
/// assert_eq!((v[99], v[HUGE_PAGE - 1]), (1.5, 0.0));
/// assert_eq!(v.as_ptr() as usize % HUGE_PAGE, 0);
/// ```
pub struct AlignedVec<T> {
    /// The allocation, `capacity` values from a [`Self::alignment`]
    /// boundary (dangling where nothing is allocated); its first `len`
    /// values are initialised.
    ptr: NonNull<T>,
    len: usize,
    capacity: usize,
}

// SAFETY: an AlignedVec owns its values as a Vec does.
unsafe impl<T: Send> Send for AlignedVec<T> {}
// SAFETY: shared access only hands out `&[T]`.
unsafe impl<T: Sync> Sync for AlignedVec<T> {}

impl<T> AlignedVec<T> {
    /// An empty buffer that has allocated nothing.
    pub const fn new() -> Self {
        Self {
            ptr: NonNull::dangling(),
            len: 0,
            capacity: 0,
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

    /// Frees the allocation, if any; the values stored are `Copy`, with
    /// nothing to drop.
    fn release(&mut self) {
        if self.capacity > 0 && size_of::<T>() > 0 {
            let layout = Self::layout(self.capacity).expect("the layout it was made with");
            // SAFETY: `ptr` was allocated with this layout.
            unsafe { dealloc(self.ptr.as_ptr().cast(), layout) };
        }
    }

    /// The layout of an allocation of `capacity` values, or `None` past
    /// what an allocation can hold.
    fn layout(capacity: usize) -> Option<Layout> {
        let bytes = capacity.checked_mul(size_of::<T>())?;
        let alignment = if bytes >= HUGE_PAGE {
            HUGE_PAGE
        } else {
            CACHE_LINE
        };
        Layout::from_size_align(bytes, alignment.max(align_of::<T>())).ok()
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
        if len > self.capacity && size_of::<T>() > 0 {
            self.grow(len)?;
        } else if len > self.capacity {
            self.capacity = len;
        }
        if len > self.len {
            // SAFETY: values len..new len are inside the allocation
            // (grown above), and `T: Copy` has no drop to skip.
            unsafe {
                let fresh = std::slice::from_raw_parts_mut(
                    self.ptr
                        .as_ptr()
                        .add(self.len)
                        .cast::<std::mem::MaybeUninit<T>>(),
                    len - self.len,
                );
                fresh.fill(std::mem::MaybeUninit::new(T::default()));
            }
        }
        self.len = len;
        Ok(())
    }

    /// Moves the values into an allocation of `capacity`, asking for huge
    /// pages before any of it is touched.
    fn grow(&mut self, capacity: usize) -> Result<(), TryReserveError> {
        let Some(layout) = Self::layout(capacity) else {
            return Err(too_large());
        };
        // SAFETY: the layout's size is not zero (`capacity` > 0 values of
        // a type with a size).
        let raw = unsafe { alloc(layout) }.cast::<T>();
        let Some(ptr) = NonNull::new(raw) else {
            return Err(refused());
        };
        // SAFETY: the allocation just made is this buffer's, and untouched.
        unsafe { advise_huge_pages(ptr.as_ptr().cast(), layout.size()) };
        // SAFETY: both hold the first `len` values, and do not overlap.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.as_ptr(), ptr.as_ptr(), self.len) };
        self.release();
        (self.ptr, self.capacity) = (ptr, capacity);
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

/// The error of a size past what any allocation can hold, as `Vec`
/// gives it (its kinds cannot be made outside the standard library).
fn too_large() -> TryReserveError {
    Vec::<u8>::new()
        .try_reserve_exact(usize::MAX)
        .expect_err("more than isize::MAX bytes is never allowed")
}

/// An allocator's refusal, as `Vec` gives it: asked for as many bytes as
/// an allocation may have, which no machine holds; should one grant
/// them, [`too_large`] still says no.
fn refused() -> TryReserveError {
    Vec::<u8>::new()
        .try_reserve_exact(isize::MAX as usize)
        .err()
        .unwrap_or_else(too_large)
}

/// Asks the kernel to back the whole 2 MiB blocks inside the `len` bytes
/// at `ptr` (an allocation the caller owns, best untouched yet) with huge
/// pages. Where transparent huge pages are in `madvise` mode, first touch
/// of a big buffer takes one fault per 2 MiB instead of per 4 KiB, and
/// each pass over it one TLB entry per 2 MiB. Advice only: a kernel that
/// declines changes nothing but speed; elsewhere than Linux it does
/// nothing.
///
/// ```
/// let mut buffer = vec![0u8; 5 << 20];
/// // SAFETY: the Vec owns its `len` bytes.
/// unsafe { blob_kernels::cpu::advise_huge_pages(buffer.as_mut_ptr(), buffer.len()) };
/// assert!(buffer.iter().all(|&b| b == 0));
/// ```
///
/// # Safety
/// `ptr .. ptr + len` lies inside one allocation the caller owns (no
/// memory is read or written, but the kernel's advice covers whatever
/// pages the range names).
pub unsafe fn advise_huge_pages(ptr: *mut u8, len: usize) {
    #[cfg(all(target_os = "linux", not(miri)))]
    {
        let start = ptr.align_offset(HUGE_PAGE);
        let span = len.saturating_sub(start) / HUGE_PAGE * HUGE_PAGE;
        if span == 0 {
            return;
        }
        // SAFETY: madvise only changes how the kernel backs pages inside
        // `ptr .. ptr + len`, an allocation the caller owns (as it
        // promises); the range is inside it and page-aligned.
        unsafe {
            libc::madvise(ptr.add(start).cast(), span, libc::MADV_HUGEPAGE);
        }
    }
    #[cfg(not(all(target_os = "linux", not(miri))))]
    let _ = (ptr, len);
}

impl<T> Drop for AlignedVec<T> {
    fn drop(&mut self) {
        self.release();
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
        // SAFETY: the first `len` values are initialised and ours.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T> DerefMut for AlignedVec<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref`, and `&mut self` makes the access unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T> fmt::Debug for AlignedVec<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AlignedVec")
            .field("len", &self.len)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every length, grown from every earlier one, starts on a cache line
    /// and keeps its values; shrinking keeps the first ones; growing
    /// again within the allocation gives defaults, not what was there.
    /// A buffer grown past a huge page starts on one, holds its earlier
    /// values and defaults after them, and frees what it held before.
    #[test]
    fn grows_onto_a_huge_page() {
        let last = HUGE_PAGE / size_of::<u64>();
        let mut v = AlignedVec::<u64>::new();
        v.resize(3);
        v.copy_from_slice(&[7, 8, 9]);
        v.resize(last + 1);
        assert_eq!(v.as_ptr() as usize % HUGE_PAGE, 0);
        assert_eq!((v[..4].to_vec(), v[last]), (vec![7, 8, 9, 0], 0));
        v[last] = 5;
        v.resize(2);
        v.resize(last + 1);
        assert_eq!((v[1], v[2], v[last]), (8, 0, 0));
        v.clear();
        assert!(v.is_empty());
    }

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
            if len * size_of::<f32>() >= HUGE_PAGE {
                assert_eq!(v.as_ptr() as usize % HUGE_PAGE, 0, "{len}");
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
