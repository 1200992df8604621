//! What the layers share: their result type, grow-only scratch and the
//! run-time checks of their blobs.

use blob_kernels::cpu::AlignedVec;
use blob_runtime::{Blob, BlobError, MathElement};

/// The result of a layer's pass.
pub type Result<T> = std::result::Result<T, BlobError>;

/// Grows `buf` to `n` elements without shrinking (Caffe's grow-only
/// buffers): layers allocate nothing once the batch size is known. The
/// values start on a cache line ([`AlignedVec`]), so the kernels' vector
/// loads from them never straddle two. Scratch is not a blob, but must
/// fit in the room blobs leave under [`blob_runtime::host_memory_limit`]:
/// a convolution's column buffer can be hundreds of times its input.
pub(crate) fn ensure<T: Copy + Default>(buf: &mut AlignedVec<T>, n: usize) -> Result<()> {
    if buf.len() < n {
        let more = n - buf.len();
        let bytes = more.saturating_mul(size_of::<T>());
        blob_runtime::check_host_room("grow a layer's scratch buffer", bytes)?;
        buf.try_resize(n).map_err(|_| BlobError::OutOfMemory {
            op: "grow a layer's scratch buffer",
            bytes,
        })?;
    }
    Ok(())
}

/// The run-time check of a dynamic entry point: `blob` has `want`'s shape.
pub(crate) fn expect_shape<T: MathElement>(
    op: &'static str,
    blob: &Blob<T>,
    want: &[usize],
) -> Result<()> {
    if blob.shape() == want {
        return Ok(());
    }
    Err(BlobError::ShapeMismatch {
        op,
        src: blob_runtime::shape_string(want),
        dst: blob.shape_string(),
    })
}

/// Whether `bottom` and `top` are the same blob (an in-place layer, as
/// Caffe runs ReLU and Dropout).
pub(crate) fn in_place<T: MathElement>(bottom: &Blob<T>, top: &Blob<T>) -> bool {
    std::ptr::eq(bottom, top)
}
