//! The runtime's errors: [`BlobError`], and the domain errors it carries as
//! sources ([`ShapeError`], [`DeviceError`], I/O and Caffe-file errors).
//! This module depends on nothing in the crate but [`Head`], so every other
//! module can return its errors.

use std::error::Error;
use std::sync::Arc;

use crate::head::Head;

/// Why a blob or memory operation was refused.
///
/// Every message names the operation and, where one is involved, the shapes
/// (in Caffe's `shape_string` form, `2 3 4 5 (120)`) and the axis.
///
/// ```
/// use blob_runtime::{Blob, BlobError};
/// let mut dst = Blob::<f32>::new(&[2, 3, 20]).unwrap();
/// let src = Blob::<f32>::new(&[2, 3, 4, 5]).unwrap();
/// let err = dst.copy_from(&src, false).unwrap_err();
/// assert_eq!(
///     err.to_string(),
///     "cannot copy blob of shape 2 3 4 5 (120) into 2 3 20 (120): shapes differ"
/// );
/// ```
#[derive(Debug, thiserror::Error)]
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
    /// Another library (candle) refused, or holds what a blob cannot.
    #[error("cannot {op}: {detail} ({library})")]
    Interop {
        /// Operation refused.
        op: &'static str,
        /// The library: `candle`.
        library: &'static str,
        /// What it said, or what differs.
        detail: String,
    },
    /// A DLPack tensor that cannot be exported or adopted as asked.
    #[error("cannot {op}: {detail}")]
    Dlpack {
        /// Operation refused.
        op: &'static str,
        /// What differs: the device, the element type, the strides...
        detail: String,
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
        head: Head,
    },
    /// Host allocation failed.
    #[error("{op}: could not allocate {bytes} bytes of host memory")]
    OutOfMemory {
        /// Operation refused.
        op: &'static str,
        /// Size asked for.
        bytes: usize,
    },
    /// An allocation that would take blobs' host memory above
    /// [`host_memory_limit`](crate::host_memory_limit).
    #[error(
        "{op}: {} more host memory would take blobs to {}, above the limit of {} (blob_runtime::set_host_memory_limit)",
        human_bytes(*bytes),
        human_bytes(in_use.saturating_add(*bytes)),
        human_bytes(*limit)
    )]
    HostMemoryLimit {
        /// Operation refused.
        op: &'static str,
        /// Size asked for.
        bytes: usize,
        /// Bytes all blobs held at the time.
        in_use: usize,
        /// The limit.
        limit: usize,
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
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// What the system said.
        source: std::io::Error,
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
    /// A `.safetensors` file (or its bytes) could not be decoded or encoded.
    #[error("{path}: not a valid .safetensors file: {source}")]
    TensorFile {
        /// The file (or `<memory>`).
        path: String,
        /// What the decoder found.
        source: Box<dyn Error + Send + Sync + 'static>,
    },
    /// A tensor asked for by name is not in the file.
    #[error("{path}: no tensor named '{name}' (the file has {available})")]
    TensorNotFound {
        /// The file.
        path: String,
        /// Name asked for.
        name: String,
        /// The names the file has, comma-separated.
        available: String,
    },
    /// A tensor's element type is not the blob's.
    #[error("{path}: tensor '{name}' holds {found}, not {wanted}")]
    TensorElement {
        /// The file.
        path: String,
        /// The tensor.
        name: String,
        /// The file's element type.
        found: String,
        /// The blob's element type.
        wanted: &'static str,
    },
    /// A tensor's shape is not the target's.
    #[error("{path}: tensor '{name}' has shape {found}, but the target is {expected}")]
    TensorShape {
        /// The file.
        path: String,
        /// The tensor.
        name: String,
        /// The tensor's shape.
        found: String,
        /// The target's shape (a typed shape's name and dims).
        expected: String,
    },
    /// A layer or solver parameter outside its range.
    #[error("cannot {op}: {detail}")]
    InvalidParameter {
        /// Operation refused.
        op: &'static str,
        /// Which parameter, its value and its range.
        detail: String,
    },
    /// A layer of a net refused its parameters, its inputs or a pass: the
    /// layer's name and type, and why.
    #[error("layer '{layer}' ({kind}): {source}")]
    Layer {
        /// The layer's name in the net.
        layer: String,
        /// Its Caffe type, e.g. `Convolution`.
        kind: String,
        /// What the layer refused.
        #[source]
        source: Box<BlobError>,
    },
    /// Something refused while reading a file (a net's `.prototxt`):
    /// the file, and what.
    #[error("{path}: {source}")]
    InFile {
        /// The file.
        path: String,
        /// What was refused.
        #[source]
        source: Box<BlobError>,
    },
    /// A net definition Caffe's `Net::Init` would refuse (an unknown
    /// bottom, a top produced twice, an unknown layer type): where, and
    /// why.
    #[error("{at}: {detail}")]
    Net {
        /// The net, file or layer concerned.
        at: String,
        /// What is wrong, in Caffe's words where it has them.
        detail: String,
    },
    /// A typed shape that does not fit a run-time shape.
    #[error(transparent)]
    Shape(#[from] ShapeError),
    /// The device backend failed.
    #[error("{op}: {source}")]
    Device {
        /// Operation refused.
        op: &'static str,
        /// The backend's error.
        source: DeviceError,
    },
}

/// A typed shape and a blob's run-time shape that do not fit together.
///
/// ```
/// use blob_runtime::{Blob, blob};
/// let err = Blob::<f32>::new(&[3, 2]).unwrap()
///     .try_into_static::<(blob_runtime::typed::D<2>, blob_runtime::typed::D<3>)>()
///     .unwrap_err();
/// assert_eq!(err.to_string(), "cannot use a blob of shape 3 2 (6) as 2 3: dim 0 is 3, the type says 2");
/// let err = <blob!(f32; 2, 3)>::with_dynamic(4).unwrap_err();
/// assert_eq!(err.to_string(), "with_dynamic: the shape 2 3 has 0 dynamic dims; it needs exactly 1");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ShapeError {
    /// A run-time shape that differs from the type's static dims.
    #[error("cannot use a blob of shape {found} as {expected}: {detail}")]
    Mismatch {
        /// The blob's shape string.
        found: String,
        /// The shape type, described.
        expected: String,
        /// The first difference.
        detail: String,
    },
    /// An operation on the dynamic dim of a shape without exactly one.
    #[error("{op}: the shape {shape} has {dynamic} dynamic dims; it needs exactly 1")]
    DynamicDims {
        /// The operation.
        op: &'static str,
        /// The shape type, described.
        shape: String,
        /// Its number of dynamic dims.
        dynamic: usize,
    },
}

/// Shorthand for the runtime's results.
pub type Result<T, E = BlobError> = std::result::Result<T, E>;

/// A failure reported by a device backend: what failed, in words, and the
/// backend's own error (a cudarc error, say) as its [`Error::source`], which
/// the message quotes once.
///
/// ```
/// use std::error::Error;
/// let io = std::io::Error::other("out of memory");
/// let e = blob_runtime::DeviceError::with_source("cudaMalloc of 4 GiB", io);
/// assert_eq!(e.to_string(), "cudaMalloc of 4 GiB: out of memory");
/// assert_eq!(e.source().unwrap().to_string(), "out of memory");
/// ```
#[derive(Debug, Clone)]
pub struct DeviceError {
    message: String,
    source: Option<Arc<dyn Error + Send + Sync + 'static>>,
}

impl std::fmt::Display for DeviceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.source {
            Some(source) => write!(f, "{}: {source}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl Error for DeviceError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.source.as_deref().map(|e| e as &(dyn Error + 'static))
    }
}

impl DeviceError {
    /// An error with this message and no underlying cause.
    ///
    /// ```
    /// let e = blob_runtime::DeviceError::new("not a buffer of this device");
    /// assert_eq!(e.message(), "not a buffer of this device");
    /// ```
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            source: None,
        }
    }

    /// What failed (`message`), caused by the backend's `source`.
    ///
    /// ```
    /// let e = blob_runtime::DeviceError::with_source("upload", std::io::Error::other("bus"));
    /// assert!(std::error::Error::source(&e).is_some());
    /// ```
    pub fn with_source(
        message: impl Into<String>,
        source: impl Error + Send + Sync + 'static,
    ) -> Self {
        Self {
            message: message.into(),
            source: Some(Arc::new(source)),
        }
    }

    /// What failed, without the cause.
    ///
    /// ```
    /// assert_eq!(blob_runtime::DeviceError::new("x").message(), "x");
    /// ```
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// `bytes` as a person reads it: `512 B`, `3.2 MiB`, `8.0 GiB`.
fn human_bytes(bytes: usize) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::human_bytes;

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(3 << 20 | 1 << 18), "3.2 MiB");
        assert_eq!(human_bytes(8 << 30), "8.0 GiB");
    }
}
