//! The one error type of the runtime.

use crate::device::DeviceError;

/// Why a blob or memory operation was refused.
///
/// Every message names the operation and, where one is involved, the shapes
/// (in Caffe's `shape_string` form, `2 3 4 5 (120)`) and the axis.
///
/// ```
/// use blob_runtime::{Blob, BlobError};
/// let mut dst = Blob::<f32>::new(&[2, 3, 20]).unwrap();
/// let src = Blob::<f32>::new(&[2, 3, 4, 5]).unwrap();
/// let err = dst.copy_from(&src, false, false).unwrap_err();
/// assert_eq!(
///     err.to_string(),
///     "cannot copy blob of shape 2 3 4 5 (120) into 2 3 20 (120): shapes differ"
/// );
/// ```
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum BlobError {
    /// More axes than Caffe's `kMaxBlobAxes` (32).
    #[error("cannot {op} to shape {shape:?}: {axes} axes exceed the maximum of 32")]
    TooManyAxes {
        /// Operation refused.
        op: &'static str,
        /// Shape asked for.
        shape: Vec<usize>,
        /// Its number of axes.
        axes: usize,
    },
    /// The product of the dims does not fit in `usize` (bytes included).
    #[error("cannot {op} to shape {shape:?}: element count overflows usize")]
    CountOverflow {
        /// Operation refused.
        op: &'static str,
        /// Shape asked for.
        shape: Vec<usize>,
    },
    /// An axis index outside `-rank..rank` (Caffe `CanonicalAxisIndex`).
    #[error("axis {axis} out of range for {rank}-D blob with shape {shape}")]
    AxisOutOfRange {
        /// Axis given.
        axis: isize,
        /// Number of axes of the blob.
        rank: usize,
        /// The blob's shape string.
        shape: String,
    },
    /// `count(start, end)` with a range that is reversed or past the axes.
    #[error("count: axis range [{start}, {end}) invalid for {rank}-D blob with shape {shape}")]
    AxisRange {
        /// First axis.
        start: usize,
        /// One past the last axis.
        end: usize,
        /// Number of axes of the blob.
        rank: usize,
        /// The blob's shape string.
        shape: String,
    },
    /// Legacy num/channels/height/width accessors on a blob of over 4 axes,
    /// or a legacy index outside `-4..4`.
    #[error("{op}: cannot use legacy accessors on blob with shape {shape} ({detail})")]
    Legacy {
        /// Operation refused.
        op: &'static str,
        /// The blob's shape string.
        shape: String,
        /// What is wrong.
        detail: String,
    },
    /// An index tuple outside the shape.
    #[error("{op}: index {index:?} out of bounds for blob with shape {shape}")]
    IndexOutOfBounds {
        /// Operation refused.
        op: &'static str,
        /// Index given.
        index: Vec<usize>,
        /// The blob's shape string.
        shape: String,
    },
    /// Two blobs whose shapes must be equal are not.
    #[error("cannot {op} blob of shape {src} into {dst}: shapes differ")]
    ShapeMismatch {
        /// Operation refused.
        op: &'static str,
        /// Source shape string.
        src: String,
        /// Destination shape string.
        dst: String,
    },
    /// Two blobs or buffers whose element counts must be equal are not.
    #[error("cannot {op}: {what} has {got} elements but {want} are needed")]
    CountMismatch {
        /// Operation refused.
        op: &'static str,
        /// What had the wrong count.
        what: String,
        /// Count found.
        got: usize,
        /// Count needed.
        want: usize,
    },
    /// A guard on the same memory is still alive (run-time borrow rules).
    #[error("{op}: the memory is already borrowed ({held}); drop that guard first")]
    Borrowed {
        /// Operation refused.
        op: &'static str,
        /// What holds the memory.
        held: &'static str,
    },
    /// Caffe's fatal "Syncedmem not initialized." as an error.
    #[error("{op}: memory not initialized (nothing was ever written or read)")]
    Uninitialized {
        /// Operation refused.
        op: &'static str,
    },
    /// A GPU accessor on memory that has no device.
    #[error("{op}: no GPU device is attached to this memory; create it with a device")]
    NoDevice {
        /// Operation refused.
        op: &'static str,
    },
    /// `async_gpu_push` needs the head at CPU.
    #[error("{op}: needs the head at CPU, found {head:?}")]
    WrongHead {
        /// Operation refused.
        op: &'static str,
        /// Head found.
        head: crate::Head,
    },
    /// Host allocation failed.
    #[error("{op}: could not allocate {bytes} bytes of host memory")]
    OutOfMemory {
        /// Operation refused.
        op: &'static str,
        /// Size asked for.
        bytes: usize,
    },
    /// A shape in a file that no blob can have (negative or overflowing).
    #[error("invalid blob shape {shape:?} in file: {detail}")]
    InvalidProtoShape {
        /// The dims as stored.
        shape: Vec<i64>,
        /// What is wrong.
        detail: String,
    },
    /// `from_proto` without reshape on a blob whose shape differs.
    #[error("cannot load blob of shape {src} into {dst}: shape mismatch (reshape not set)")]
    ProtoShapeMismatch {
        /// Shape in the file.
        src: String,
        /// Shape of the blob.
        dst: String,
    },
    /// A file could not be read or written.
    #[error("{path}: {message}")]
    Io {
        /// The file.
        path: String,
        /// What the system said.
        message: String,
    },
    /// A file's bytes are not the message they should be.
    #[error("{path}: {source}")]
    Proto {
        /// The file (or `<bytes>`).
        path: String,
        /// What the decoder or encoder found.
        source: blob_proto::ProtoError,
    },
    /// Caffe's "Incompatible number of blobs for layer X".
    #[error(
        "Incompatible number of blobs for layer {layer}: the file has {source_count}, the target has {target_count}"
    )]
    IncompatibleBlobCount {
        /// Layer name.
        layer: String,
        /// Blobs in the file.
        source_count: usize,
        /// Blobs in the target.
        target_count: usize,
    },
    /// Caffe's weight-loading shape mismatch, with Caffe's words.
    #[error(
        "Cannot copy param {param} weights from layer '{layer}'; shape mismatch.  Source param shape is {source_shape}; target param shape is {target_shape}. To learn this layer's parameters from scratch rather than copying from a saved net, rename the layer."
    )]
    WeightShapeMismatch {
        /// Layer name.
        layer: String,
        /// Blob index within the layer.
        param: usize,
        /// Shape in the file.
        source_shape: String,
        /// Shape of the target blob.
        target_shape: String,
    },
    /// A layer asked for by name is not in the file.
    #[error("{path}: no layer named '{layer}'")]
    LayerNotFound {
        /// The file.
        path: String,
        /// Name asked for.
        layer: String,
    },
    /// The device backend failed.
    #[error("{op}: {source}")]
    Device {
        /// Operation refused.
        op: &'static str,
        /// The backend's error.
        source: DeviceError,
    },
}

/// Shorthand for the runtime's results.
pub type Result<T, E = BlobError> = std::result::Result<T, E>;
