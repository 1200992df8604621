//! Device memory a layer keeps between calls.

use cudarc::driver::{CudaSlice, CudaView, CudaViewMut, DeviceRepr, ValidAsZeroBits};

use super::{CudaError, Gpu};

/// Device memory an op keeps from call to call (a column buffer,
/// pooling's positions, dropout's mask, cuDNN's workspace): allocated
/// zero-filled on first use, grown when a call needs more, never shrunk.
/// Layers hold these instead of cudarc buffers.
///
/// ```no_run
/// use blob_kernels::cuda::{CudaError, Gpu, Scratch};
/// let gpu = Gpu::new(0)?;
/// let mut mask = Scratch::<u32>::new();
/// let mut keep = mask.grown(&gpu, 1000)?; // 1000 elements, zeroed
/// gpu.bernoulli(0.5, &mut keep)?;
/// assert!(mask.view(1000).is_some() && mask.view(1001).is_none());
/// # Ok::<(), CudaError>(())
/// ```
#[derive(Debug)]
pub struct Scratch<T> {
    buffer: Option<CudaSlice<T>>,
}

impl<T> Default for Scratch<T> {
    fn default() -> Self {
        Self { buffer: None }
    }
}

impl<T: DeviceRepr + ValidAsZeroBits> Scratch<T> {
    /// Empty: nothing allocated until [`grown`](Self::grown).
    ///
    /// ```
    /// assert_eq!(blob_kernels::cuda::Scratch::<f32>::new().len(), 0);
    /// ```
    pub const fn new() -> Self {
        Self { buffer: None }
    }

    /// How many elements are allocated.
    ///
    /// ```
    /// assert!(blob_kernels::cuda::Scratch::<u8>::new().is_empty());
    /// ```
    pub fn len(&self) -> usize {
        self.buffer.as_ref().map_or(0, CudaSlice::len)
    }

    /// Whether nothing is allocated.
    ///
    /// ```
    /// assert!(blob_kernels::cuda::Scratch::<u32>::new().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The first `n` elements, writable, after growing to at least `n`
    /// on `gpu` (a fresh allocation is zero-filled; what a smaller one
    /// held is not kept).
    pub fn grown(&mut self, gpu: &Gpu, n: usize) -> Result<CudaViewMut<'_, T>, CudaError> {
        if self.len() < n || self.buffer.is_none() {
            let fresh = gpu
                .stream()
                .alloc_zeros::<T>(n.max(1))
                .map_err(CudaError::driver("allocate GPU scratch"))?;
            self.buffer = Some(fresh);
        }
        let buffer = self.buffer.as_mut().expect("allocated above");
        Ok(buffer.slice_mut(..n))
    }

    /// The first `n` elements, when that many are allocated: what an
    /// earlier call left for this one (pooling's positions for its
    /// backward pass).
    pub fn view(&self, n: usize) -> Option<CudaView<'_, T>> {
        self.buffer
            .as_ref()
            .filter(|b| b.len() >= n)
            .map(|b| b.slice(..n))
    }
}
