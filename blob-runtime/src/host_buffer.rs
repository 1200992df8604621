//! Host memory with a matching deallocator: 64-byte aligned and zero-filled
//! when the runtime allocates it, or adopted from a `Vec`.

use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::any::TypeId;
use std::fmt;
use std::ptr::NonNull;

use crate::error::{BlobError, Result};
use crate::host_limit;
use blob_kernels::cpu::{HUGE_PAGE, advise_huge_pages};

/// Alignment of every host buffer: a cache line, and enough for AVX-512.
pub const HOST_ALIGN: usize = 64;

type Release = Box<dyn FnOnce(NonNull<u8>, usize) + Send + Sync>;

/// An owned block of host bytes.
///
/// Made zero-filled and 64-byte aligned by [`HostBuffer::zeroed`], wrapped
/// around memory from another allocator (pinned CUDA memory) by
/// [`HostBuffer::from_raw_parts`], or adopted from a `Vec` by
/// [`HostBuffer::from_vec`] (aligned as the Vec's elements); memory is
/// always freed by the allocator that made it (Caffe issue 3053).
///
/// ```
/// use blob_runtime::HostBuffer;
/// let buf = HostBuffer::zeroed(100).unwrap();
/// assert_eq!(buf.len(), 100);
/// assert!(buf.as_bytes().iter().all(|&b| b == 0));
/// assert_eq!(buf.as_bytes().as_ptr() as usize % 64, 0);
/// ```
pub struct HostBuffer {
    ptr: NonNull<u8>,
    len: usize,
    /// Bytes between the allocation's start and `ptr` (own allocations).
    lead: usize,
    release: Option<Release>,
    /// For a buffer adopted from a `Vec` ([`HostBuffer::from_vec`]): its
    /// element type, length and capacity, so it can be handed back.
    vec_of: Option<(TypeId, usize, usize)>,
}

// SAFETY: a HostBuffer uniquely owns its allocation (like a Box<[u8]>), and
// its release function is itself Send + Sync.
unsafe impl Send for HostBuffer {}
// SAFETY: shared access only hands out `&[u8]`; mutation needs `&mut self`.
unsafe impl Sync for HostBuffer {}

impl HostBuffer {
    /// Allocates `len` zeroed bytes; an allocation failure, or one over
    /// [`host_memory_limit`](crate::host_memory_limit), is an error, not an
    /// abort.
    ///
    /// ```
    /// let b = blob_runtime::HostBuffer::zeroed(0).unwrap();
    /// assert!(b.is_empty());
    /// ```
    pub fn zeroed(len: usize) -> Result<Self> {
        if len == 0 {
            return Ok(Self {
                ptr: dangling_aligned(),
                len: 0,
                lead: 0,
                release: None,
                vec_of: None,
            });
        }
        let layout = layout(len)?;
        host_limit::take("allocate blob memory", len)?;
        // SAFETY: `layout` has a non-zero size (len > 0 checked above).
        let raw = unsafe { alloc_zeroed(layout) };
        let Some(base) = NonNull::new(raw) else {
            host_limit::give_back(len);
            return Err(BlobError::OutOfMemory {
                op: "allocate",
                bytes: len,
            });
        };
        let lead = base.as_ptr().align_offset(start_alignment(len));
        debug_assert!(lead + len <= layout.size());
        // SAFETY: `lead` is less than the start's alignment, which the
        // allocation has spare (`layout`), so `base + lead .. + len`
        // stays inside it.
        let ptr = unsafe { base.add(lead) };
        // SAFETY: `ptr .. + len` is inside the allocation just made.
        unsafe { advise_huge_pages(ptr.as_ptr(), len) };
        Ok(Self {
            ptr,
            len,
            lead,
            release: None,
            vec_of: None,
        })
    }

    /// A zeroed buffer holding a copy of `bytes`.
    ///
    /// ```
    /// let b = blob_runtime::HostBuffer::from_bytes(&[1, 2, 3]).unwrap();
    /// assert_eq!(b.as_bytes(), &[1, 2, 3]);
    /// ```
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let mut b = Self::zeroed(bytes.len())?;
        b.as_bytes_mut().copy_from_slice(bytes);
        Ok(b)
    }

    /// A buffer holding a copy of `values`' bytes, e.g. for
    /// [`crate::Blob::set_cpu_data`].
    ///
    /// ```
    /// let b = blob_runtime::HostBuffer::from_slice(&[1.0f32, 2.0]).unwrap();
    /// assert_eq!(b.len(), 8);
    /// ```
    pub fn from_slice<T: bytemuck::Pod>(values: &[T]) -> Result<Self> {
        Self::from_bytes(bytemuck::cast_slice(values))
    }

    /// Adopts `values`' allocation without copying; it is freed as the
    /// `Vec` it was, and counts toward
    /// [`host_memory_in_use`](crate::host_memory_in_use) meanwhile. The bytes are aligned as `T` (not to [`HOST_ALIGN`]),
    /// which is all a [`crate::Blob`] of `T` needs.
    ///
    /// ```
    /// let v = vec![1.0f32, 2.0, 3.0];
    /// let at = v.as_ptr() as usize;
    /// let b = blob_runtime::HostBuffer::from_vec(v);
    /// assert_eq!(b.len(), 12);
    /// assert_eq!(b.as_bytes().as_ptr() as usize, at); // the same memory
    /// ```
    pub fn from_vec<T: bytemuck::Pod + Send + Sync>(values: Vec<T>) -> Self {
        let bytes = std::mem::size_of_val(values.as_slice());
        if bytes == 0 {
            return Self {
                ptr: dangling_aligned(),
                len: 0,
                lead: 0,
                release: None,
                vec_of: None,
            };
        }
        host_limit::count(bytes);
        let mut values = std::mem::ManuallyDrop::new(values);
        let (len, capacity) = (values.len(), values.capacity());
        let ptr = NonNull::new(values.as_mut_ptr())
            .expect("a Vec with elements has a non-null pointer")
            .cast::<u8>();
        Self {
            ptr,
            len: bytes,
            lead: 0,
            release: Some(Box::new(move |ptr: NonNull<u8>, _| {
                // SAFETY: `ptr` is the Vec's own pointer (drop hands back
                // `self.ptr`, set above), with its length and capacity; the
                // buffer is gone, so nothing else uses it. Rebuilding the Vec
                // frees the allocation with the layout it was made with.
                drop(unsafe { Vec::from_raw_parts(ptr.as_ptr().cast::<T>(), len, capacity) });
            })),
            vec_of: Some((TypeId::of::<T>(), len, capacity)),
        }
    }

    /// The `Vec<T>` this buffer adopted ([`HostBuffer::from_vec`]) handed
    /// back without a copy; the buffer itself where it holds other memory
    /// or another element type.
    ///
    /// ```
    /// use blob_runtime::HostBuffer;
    /// let v = vec![1.0f32, 2.0];
    /// let at = v.as_ptr();
    /// let back: Vec<f32> = HostBuffer::from_vec(v).into_vec().unwrap();
    /// assert_eq!((back.as_ptr(), back), (at, vec![1.0, 2.0]));
    /// assert!(HostBuffer::zeroed(8).unwrap().into_vec::<f32>().is_err());
    /// ```
    pub fn into_vec<T: bytemuck::Pod>(self) -> std::result::Result<Vec<T>, Self> {
        let Some((kind, len, capacity)) = self.vec_of else {
            return Err(self);
        };
        if kind != TypeId::of::<T>() {
            return Err(self);
        }
        let mut me = std::mem::ManuallyDrop::new(self);
        host_limit::give_back(me.len);
        // The release would free the Vec: it is rebuilt instead.
        drop(me.release.take());
        // SAFETY: `ptr` is the pointer of a Vec<T> of `len` elements and
        // `capacity` (`from_vec` recorded them with T's TypeId, checked
        // above); the buffer is forgotten, so nothing else frees or uses
        // the allocation.
        Ok(unsafe { Vec::from_raw_parts(me.ptr.as_ptr().cast::<T>(), len, capacity) })
    }

    /// Wraps memory from another allocator; `release(ptr, len)` frees it
    /// when the buffer is dropped. It counts toward
    /// [`host_memory_in_use`](crate::host_memory_in_use) but, being
    /// allocated already, is never refused: ask
    /// [`check_host_room`](crate::check_host_room) before allocating it.
    ///
    /// # Safety
    /// `ptr` must be 64-byte aligned, valid for reads and writes of `len`
    /// bytes, initialized, not used elsewhere while this buffer lives, and
    /// `release` must be the matching way to free it.
    pub unsafe fn from_raw_parts(
        ptr: NonNull<u8>,
        len: usize,
        release: impl FnOnce(NonNull<u8>, usize) + Send + Sync + 'static,
    ) -> Self {
        debug_assert_eq!(ptr.as_ptr() as usize % HOST_ALIGN, 0);
        // SAFETY: the caller's promise, with more alignment than needed.
        unsafe { Self::borrowed_from_owner(ptr, len, release) }
    }

    /// Wraps memory another library owns, aligned only as the elements
    /// it holds (a DLPack tensor's): `release` gives it back when the
    /// buffer is dropped.
    ///
    /// # Safety
    /// As [`from_raw_parts`](Self::from_raw_parts), except that `ptr` need
    /// only be aligned for the element type of the blob it will back.
    pub(crate) unsafe fn borrowed_from_owner(
        ptr: NonNull<u8>,
        len: usize,
        release: impl FnOnce(NonNull<u8>, usize) + Send + Sync + 'static,
    ) -> Self {
        host_limit::count(len);
        Self {
            ptr,
            len,
            lead: 0,
            release: Some(Box::new(release)),
            vec_of: None,
        }
    }

    /// Size in bytes.
    ///
    /// ```
    /// assert_eq!(blob_runtime::HostBuffer::zeroed(3).unwrap().len(), 3);
    /// ```
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer holds no bytes.
    ///
    /// ```
    /// assert!(!blob_runtime::HostBuffer::zeroed(3).unwrap().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes.
    ///
    /// ```
    /// assert_eq!(blob_runtime::HostBuffer::zeroed(2).unwrap().as_bytes(), &[0, 0]);
    /// ```
    pub fn as_bytes(&self) -> &[u8] {
        // SAFETY: ptr is valid for `len` initialized bytes for as long as
        // self lives (zeroed or caller-guaranteed in from_raw_parts).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The bytes, writable.
    ///
    /// ```
    /// let mut b = blob_runtime::HostBuffer::zeroed(2).unwrap();
    /// b.as_bytes_mut()[1] = 9;
    /// assert_eq!(b.as_bytes(), &[0, 9]);
    /// ```
    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in as_bytes, and `&mut self` makes the access unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    pub(crate) fn as_ptr(&self) -> NonNull<u8> {
        self.ptr
    }
}

/// Where a buffer of `len` bytes starts: on a cache line, or from
/// [`HUGE_PAGE`] bytes on at a huge page's start, so that all its whole
/// 2 MiB blocks can be huge pages ([`advise_huge_pages`]). Where the
/// allocator put it, a 2.9 MB blob (MobileNet-SSD's largest images) held
/// a whole aligned 2 MiB block 44% of the time, and its pages on 4 KiB
/// pages spanned more of the TLB.
fn start_alignment(len: usize) -> usize {
    if len >= HUGE_PAGE {
        HUGE_PAGE
    } else {
        HOST_ALIGN
    }
}

fn dangling_aligned() -> NonNull<u8> {
    NonNull::new(std::ptr::without_provenance_mut(HOST_ALIGN)).expect("non-zero")
}

/// The allocation behind `len` usable bytes. It asks for 16-byte alignment
/// plus spare bytes for the start's ([`start_alignment`]), because the
/// system allocator serves that with calloc, whose large blocks are fresh zero pages: a 64-byte aligned
/// request would go through posix_memalign + memset, paying for zeroing
/// twice on first touch.
fn layout(len: usize) -> Result<Layout> {
    len.checked_add(start_alignment(len))
        .and_then(|size| Layout::from_size_align(size, 16).ok())
        .ok_or(BlobError::OutOfMemory {
            op: "allocate",
            bytes: len,
        })
}

impl Drop for HostBuffer {
    fn drop(&mut self) {
        host_limit::give_back(self.len);
        if let Some(release) = self.release.take() {
            release(self.ptr, self.len);
        } else if self.len > 0 {
            let layout = layout(self.len).expect("layout was valid at allocation");
            // SAFETY: `ptr - lead` is the pointer alloc_zeroed returned for
            // this same layout.
            unsafe { dealloc(self.ptr.as_ptr().sub(self.lead), layout) }
        }
    }
}

impl fmt::Debug for HostBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostBuffer")
            .field("len", &self.len)
            .field("custom_allocator", &self.release.is_some())
            .finish()
    }
}
