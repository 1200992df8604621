//! Blob <-> `BlobProto` with Caffe's `ToProto`, `FromProto` and
//! `ShapeEquals` semantics, and file-level helpers.
//!
//! Differences from Caffe, on purpose: dims are `int64` in the file and a
//! negative or overflowing one is an error (Caffe narrows silently), and a
//! 0-count blob can be written (Caffe aborts).

use std::path::Path;

use blob_proto::{BlobProto, BlobProtoRef, BlobProtoView, BlobShape, Message, ProtoError};

use crate::blob::{Blob, checked_count, shape_string};
use crate::element::MathElement;
use crate::error::{BlobError, Result};

/// The shape a `BlobProto` gives a blob (Caffe `FromProto` with reshape):
/// `[num, channels, height, width]` when any legacy field is present, else
/// `shape.dim`; each dim must be in `0..=usize::MAX` and the count must fit.
///
/// ```
/// use blob_proto::{BlobProto, BlobShape};
/// let p = BlobProto { shape: Some(BlobShape { dim: vec![2, -1] }), ..Default::default() };
/// let err = blob_runtime::proto_shape(&p).unwrap_err();
/// assert!(err.to_string().contains("negative"), "{err}");
/// ```
pub fn proto_shape(proto: &BlobProto) -> Result<Vec<usize>> {
    let stored = proto.stored_shape();
    let shape = stored
        .iter()
        .map(|&d| {
            usize::try_from(d).map_err(|_| BlobError::InvalidProtoShape {
                shape: stored.clone(),
                detail: format!("dim {d} is negative"),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    checked_count::<f64>("load", &shape).map_err(|e| BlobError::InvalidProtoShape {
        shape: stored.clone(),
        detail: e.to_string(),
    })?;
    Ok(shape)
}

/// Where a blob's values come from in a file, after checking their number
/// against the blob's count; nothing is allocated before this check, so a
/// file's shape cannot make the reader allocate beyond what the file holds.
enum Source<'a> {
    Singles(&'a [f32]),
    Doubles(&'a [f64]),
    Raw(Vec<f64>),
}

impl<'a> Source<'a> {
    fn pick(
        what: &str,
        singles: &'a [f32],
        doubles: &'a [f64],
        raw: Option<Vec<f64>>,
        count: usize,
    ) -> Result<Self> {
        let (field, got, src) = if !doubles.is_empty() {
            (
                format!("double_{what}"),
                doubles.len(),
                Source::Doubles(doubles),
            )
        } else if let Some(raw) = raw {
            ("raw_data".to_string(), raw.len(), Source::Raw(raw))
        } else {
            (what.to_string(), singles.len(), Source::Singles(singles))
        };
        if got != count {
            return Err(BlobError::CountMismatch {
                op: "load blob from proto",
                what: format!("the file's {field} field"),
                got,
                want: count,
            });
        }
        Ok(src)
    }

    fn fill<T: MathElement>(&self, out: &mut [T]) {
        match self {
            Source::Doubles(d) => out
                .iter_mut()
                .zip(*d)
                .for_each(|(o, &v)| *o = T::from_f64(v)),
            Source::Raw(r) => out
                .iter_mut()
                .zip(r)
                .for_each(|(o, &v)| *o = T::from_f64(v)),
            Source::Singles(s) => match bytemuck::try_cast_slice_mut::<T, f32>(out) {
                // Same type: a plain copy, at memory speed.
                Ok(same) if T::PRECISION == crate::Precision::F32 => same.copy_from_slice(s),
                _ => out
                    .iter_mut()
                    .zip(*s)
                    .for_each(|(o, &v)| *o = T::from_f64(f64::from(v))),
            },
        }
    }
}

fn store_values<T: MathElement>(values: &[T], singles: &mut Vec<f32>, doubles: &mut Vec<f64>) {
    match T::PRECISION {
        crate::Precision::F32 => singles.extend_from_slice(bytemuck::cast_slice(values)),
        crate::Precision::F64 => doubles.extend_from_slice(bytemuck::cast_slice(values)),
    }
}

impl<T: MathElement> Blob<T> {
    /// A blob made from a `BlobProto` (Caffe `FromProto` with reshape on a
    /// fresh blob). Float and double files load into either precision.
    ///
    /// ```
    /// use blob_proto::{BlobProto, BlobShape};
    /// let p = BlobProto { shape: Some(BlobShape { dim: vec![2] }), data: vec![1.0, 2.0], ..Default::default() };
    /// let b = blob_runtime::Blob::<f64>::from_proto(&p)?;
    /// assert_eq!(&*b.cpu_data()?, &[1.0, 2.0]);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn from_proto(proto: &BlobProto) -> Result<Self> {
        let mut b = Self::default();
        b.load_proto(proto, true)?;
        Ok(b)
    }

    /// Loads a `BlobProto` into this blob (Caffe `FromProto(proto,
    /// reshape)`). With `reshape`, the blob takes the file's shape; without
    /// it, [`shape_equals`](Self::shape_equals) must hold. The data must
    /// have exactly `count` values (Caffe: `count_ == proto.data_size()`);
    /// the diff is loaded when present and otherwise left as it is.
    ///
    /// ```
    /// use blob_proto::{BlobProto, BlobShape};
    /// let p = BlobProto { shape: Some(BlobShape { dim: vec![3] }), ..Default::default() };
    /// let mut b = blob_runtime::Blob::<f32>::default();
    /// let err = b.load_proto(&p, true).unwrap_err();
    /// assert!(err.to_string().contains("data field has 0 elements but 3"), "{err}");
    /// ```
    pub fn load_proto(&mut self, proto: &BlobProto, reshape: bool) -> Result<()> {
        if reshape {
            let shape = proto_shape(proto)?;
            self.reshape(&shape)?;
        } else if !self.shape_equals(proto) {
            return Err(BlobError::ProtoShapeMismatch {
                src: proto_shape_string(proto),
                dst: self.shape_string(),
            });
        }
        let raw = proto.raw_values().map_err(|source| BlobError::Proto {
            path: "<blob>".into(),
            source,
        })?;
        let count = self.count();
        let data = Source::pick("data", &proto.data, &proto.double_data, raw, count)?;
        let has_diff = !proto.double_diff.is_empty() || !proto.diff.is_empty();
        let diff = has_diff
            .then(|| Source::pick("diff", &proto.diff, &proto.double_diff, None, count))
            .transpose()?;
        data.fill(&mut self.mutable_cpu_data()?);
        if let Some(diff) = diff {
            diff.fill(&mut self.mutable_cpu_diff()?);
        }
        Ok(())
    }

    /// The blob as a `BlobProto` (Caffe `ToProto(proto, write_diff)`):
    /// `shape.dim`, and `data` (+`diff`) for f32 or `double_data`
    /// (+`double_diff`) for f64; never the legacy fields.
    ///
    /// ```
    /// let b = blob_runtime::Blob::<f32>::new(&[2])?;
    /// b.mutable_cpu_data()?.copy_from_slice(&[0.5, 1.0]);
    /// let p = b.to_proto(false)?;
    /// assert_eq!(p.data, [0.5, 1.0]);
    /// assert_eq!(p.shape.unwrap().dim, [2]);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn to_proto(&self, write_diff: bool) -> Result<BlobProto> {
        let mut p = BlobProto::default();
        if self.num_axes() > 0 {
            p.shape = Some(BlobShape {
                dim: self.shape().iter().map(|&d| d as i64).collect(),
            });
        }
        store_values(&self.cpu_data()?, &mut p.data, &mut p.double_data);
        if write_diff {
            store_values(&self.cpu_diff()?, &mut p.diff, &mut p.double_diff);
        }
        Ok(p)
    }

    /// Loads a borrowed [`BlobProtoView`], copying the file's values
    /// straight into the blob's memory when they are stored in this blob's
    /// precision (one copy, at memory speed); other encodings go through
    /// [`load_proto`](Self::load_proto). Same rules as `load_proto`.
    ///
    /// ```
    /// use blob_proto::{BlobProtoRef, BlobProtoView};
    /// let bytes = BlobProtoRef { dims: Some(&[2]), data: &[1.0, 2.0], ..Default::default() }.encode_to_vec().unwrap();
    /// let mut b = blob_runtime::Blob::<f32>::default();
    /// b.load_proto_view(&BlobProtoView::parse(&bytes).unwrap(), true)?;
    /// assert_eq!(&*b.cpu_data()?, &[1.0, 2.0]);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn load_proto_view(&mut self, view: &BlobProtoView<'_>, reshape: bool) -> Result<()> {
        let (values, diffs) = match T::PRECISION {
            crate::Precision::F32 => (&view.data, &view.diff),
            crate::Precision::F64 => (&view.double_data, &view.double_diff),
        };
        let other_fields = match T::PRECISION {
            crate::Precision::F32 => view.double_data.byte_len() + view.double_diff.byte_len(),
            crate::Precision::F64 => view.data.byte_len() + view.diff.byte_len(),
        };
        if cfg!(target_endian = "big") || other_fields > 0 || view.raw_data.is_some() {
            return self.load_proto(&view.to_owned_proto(), reshape);
        }
        let shape_only = BlobProto {
            num: view.num,
            channels: view.channels,
            height: view.height,
            width: view.width,
            shape: view.shape.clone(),
            ..Default::default()
        };
        if reshape {
            self.reshape(&proto_shape(&shape_only)?)?;
        } else if !self.shape_equals(&shape_only) {
            return Err(BlobError::ProtoShapeMismatch {
                src: proto_shape_string(&shape_only),
                dst: self.shape_string(),
            });
        }
        let want = self.count() * size_of::<T>();
        let field = if T::PRECISION == crate::Precision::F32 {
            ""
        } else {
            "double_"
        };
        let mismatch = |what: &str, got: usize| BlobError::CountMismatch {
            op: "load blob from proto",
            what: format!("the file's {field}{what} field"),
            got: got / size_of::<T>(),
            want: want / size_of::<T>(),
        };
        if values.byte_len() != want {
            return Err(mismatch("data", values.byte_len()));
        }
        if diffs.byte_len() != 0 && diffs.byte_len() != want {
            return Err(mismatch("diff", diffs.byte_len()));
        }
        values.copy_to(bytemuck::cast_slice_mut(&mut self.mutable_cpu_data()?));
        if diffs.byte_len() != 0 {
            diffs.copy_to(bytemuck::cast_slice_mut(&mut self.mutable_cpu_diff()?));
        }
        Ok(())
    }

    /// Serializes the blob as a `BlobProto` (Caffe `ToProto` +
    /// `SerializeToString`) straight from its memory, without building an
    /// owned message: the same bytes as `to_proto(..)` then encoding.
    ///
    /// ```
    /// use blob_proto::Message;
    /// let b = blob_runtime::Blob::<f64>::new(&[3])?;
    /// assert_eq!(b.to_proto_bytes(true)?, b.to_proto(true)?.encode_to_vec());
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn to_proto_bytes(&self, write_diff: bool) -> Result<Vec<u8>> {
        let dims: Vec<i64> = self.shape().iter().map(|&d| d as i64).collect();
        let data = self.cpu_data()?;
        let diff = if write_diff {
            Some(self.cpu_diff()?)
        } else {
            None
        };
        let diff_slice: &[T] = diff.as_deref().unwrap_or(&[]);
        let mut r = BlobProtoRef {
            dims: (self.num_axes() > 0).then_some(dims.as_slice()),
            ..Default::default()
        };
        match T::PRECISION {
            crate::Precision::F32 => {
                r.data = bytemuck::cast_slice(&data);
                r.diff = bytemuck::cast_slice(diff_slice);
            }
            crate::Precision::F64 => {
                r.double_data = bytemuck::cast_slice(&data);
                r.double_diff = bytemuck::cast_slice(diff_slice);
            }
        }
        let mut out = Vec::new();
        let bytes = (data.len() + diff_slice.len()) * size_of::<T>() + 64;
        out.reserve(bytes);
        // SAFETY: the Vec owns its `capacity` bytes.
        unsafe { blob_kernels::cpu::advise_huge_pages(out.as_mut_ptr(), out.capacity()) };
        r.encode(&mut out).map_err(|source| BlobError::Proto {
            path: "<blob>".into(),
            source,
        })?;
        Ok(out)
    }

    /// Whether the blob's shape matches a `BlobProto`'s (Caffe
    /// `ShapeEquals`). With any legacy field present (an explicit 0 counts),
    /// the blob must have at most 4 axes and its right-aligned legacy dims
    /// must equal num, channels, height, width: shape (3, 2) equals
    /// 1x1x3x2. Otherwise the dims must be equal.
    ///
    /// ```
    /// let p = blob_proto::BlobProto { num: Some(1), channels: Some(1), height: Some(3), width: Some(2), ..Default::default() };
    /// assert!(blob_runtime::Blob::<f32>::new(&[3, 2]).unwrap().shape_equals(&p));
    /// assert!(!blob_runtime::Blob::<f32>::new(&[2, 3, 2]).unwrap().shape_equals(&p));
    /// ```
    pub fn shape_equals(&self, proto: &BlobProto) -> bool {
        if proto.has_legacy_dims() {
            if self.num_axes() > 4 {
                return false;
            }
            let want = proto.stored_shape();
            return (0..4).all(|i| {
                let got = self.legacy_shape(i as isize - 4).expect("at most 4 axes");
                i64::try_from(got).ok() == Some(want[i])
            });
        }
        let dims = proto
            .shape
            .as_ref()
            .map(|s| s.dim.as_slice())
            .unwrap_or(&[]);
        dims.len() == self.num_axes()
            && dims
                .iter()
                .zip(self.shape())
                .all(|(&d, &s)| i64::try_from(s).ok() == Some(d))
    }
}

/// A proto's shape in Caffe's `shape_string` form, for messages; stored
/// dims are shown as they are when they are not a valid shape.
pub(crate) fn proto_shape_string(proto: &BlobProto) -> String {
    match proto_shape(proto) {
        Ok(s) => shape_string(&s),
        Err(_) => format!("{:?} (invalid)", proto.stored_shape()),
    }
}

/// The most a Caffe file may hold: protobuf's message limit, which Caffe
/// reads with (`kProtoReadBytesLimit`, `INT_MAX` bytes).
pub const FILE_LIMIT: u64 = i32::MAX as u64;

/// Reads `path` whole, refusing a device (`/dev/zero` never ends) and
/// more than [`FILE_LIMIT`] bytes from a pipe: an error naming the
/// limit, not a read until memory runs out.
///
/// ```
/// let err = blob_runtime::read_file("/no/such.caffemodel").unwrap_err();
/// assert!(err.to_string().starts_with("/no/such.caffemodel: "));
/// # #[cfg(unix)]
/// # {
/// let err = blob_runtime::read_file("/dev/zero").unwrap_err();
/// assert!(err.to_string().contains("a device, not a file"), "{err}");
/// # }
/// ```
pub fn read_file(path: impl AsRef<Path>) -> Result<Vec<u8>> {
    use std::io::Read;
    let path = path.as_ref();
    let io = |e: std::io::Error| BlobError::Io {
        path: path.display().to_string(),
        source: e,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        let kind = meta.file_type();
        if kind.is_char_device() || kind.is_block_device() {
            return Err(io(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "is a device, not a file",
            )));
        }
    }
    // A regular file says its size; a pipe says 0.
    let hint = meta.len();
    let mut bytes = Vec::with_capacity(hint.min(FILE_LIMIT) as usize);
    file.take(FILE_LIMIT + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > FILE_LIMIT {
        return Err(io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "holds more than {FILE_LIMIT} bytes, the most a Caffe file (a protobuf message) may"
            ),
        )));
    }
    Ok(bytes)
}

/// [`read_file`] as UTF-8 text (a `.prototxt`).
///
/// ```
/// assert!(blob_runtime::read_text_file("/no/such.prototxt").is_err());
/// ```
pub fn read_text_file(path: impl AsRef<Path>) -> Result<String> {
    let path = path.as_ref();
    String::from_utf8(read_file(path)?).map_err(|e| BlobError::Io {
        path: path.display().to_string(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, e.utf8_error()),
    })
}

/// Every Caffe file is written whole or not at all.
pub(crate) fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    crate::write_atomically(path, bytes)
}

pub(crate) fn proto_err(path: &Path) -> impl FnOnce(ProtoError) -> BlobError + '_ {
    move |source| BlobError::Proto {
        path: path.display().to_string(),
        source,
    }
}

/// Reads a `.binaryproto` blob file (e.g. a mean image) into a blob
/// (Caffe `ReadProtoFromBinaryFile` + `FromProto`).
///
/// ```no_run
/// let mean = blob_runtime::read_blob_file::<f32>("imagenet_mean.binaryproto")?;
/// assert_eq!(mean.shape(), &[1, 3, 256, 256]);
/// # Ok::<(), blob_runtime::BlobError>(())
/// ```
pub fn read_blob_file<T: MathElement>(path: impl AsRef<Path>) -> Result<Blob<T>> {
    let path = path.as_ref();
    let bytes = read_file(path)?;
    let view = BlobProtoView::parse(&bytes).map_err(proto_err(path))?;
    let mut blob = Blob::default();
    blob.load_proto_view(&view, true)
        .map(|()| blob)
        .map_err(|e| match e {
            BlobError::Proto { source, .. } => BlobError::Proto {
                path: path.display().to_string(),
                source,
            },
            other => other,
        })
}

/// Writes a blob to a `.binaryproto` file Caffe reads (Caffe `ToProto` +
/// `WriteProtoToBinaryFile`).
///
/// ```no_run
/// let b = blob_runtime::Blob::<f32>::new(&[1, 3, 4, 5])?;
/// blob_runtime::write_blob_file("blob.binaryproto", &b, true)?;
/// # Ok::<(), blob_runtime::BlobError>(())
/// ```
pub fn write_blob_file<T: MathElement>(
    path: impl AsRef<Path>,
    blob: &Blob<T>,
    write_diff: bool,
) -> Result<()> {
    let path = path.as_ref();
    let bytes = blob.to_proto_bytes(write_diff)?;
    write_file(path, &bytes)
}

/// Encodes any Caffe message to bytes, refusing one over Caffe's 2 GiB - 1
/// limit with an error naming it.
///
/// ```
/// let bytes = blob_runtime::encode_proto("BlobProto", &blob_proto::BlobProto::default()).unwrap();
/// assert!(bytes.is_empty());
/// ```
pub fn encode_proto<M: Message>(what: &'static str, msg: &M) -> Result<Vec<u8>> {
    blob_proto::encode_message(what, msg).map_err(|source| BlobError::Proto {
        path: "<bytes>".into(),
        source,
    })
}
