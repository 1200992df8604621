//! `BlobShape` and `BlobProto`, with a bulk path for packed floats.
//!
//! `BlobProto` implements [`prost::Message`] by hand rather than by derive
//! for two reasons: packed `data`/`diff` are decoded by bulk conversion of
//! the payload (memcpy speed, where a per-element loop runs several times
//! slower), and a declared length is checked against the input before any
//! allocation, so a hostile file cannot make the reader reserve more than
//! it holds.

use bytes::{Buf, BufMut};
use prost::encoding::{
    self, DecodeContext, WireType, decode_varint, encode_key, encode_varint, encoded_len_varint,
    key_len,
};
use prost::{DecodeError, Message};

/// Caffe's `BlobShape`: the dims of a blob (`dim`, field 1, packed int64).
///
/// ```
/// use prost::Message;
/// let s = blob_proto::BlobShape { dim: vec![2, 3] };
/// let bytes = s.encode_to_vec();
/// assert_eq!(blob_proto::BlobShape::decode(&bytes[..]).unwrap(), s);
/// ```
#[derive(Clone, PartialEq, Message)]
pub struct BlobShape {
    /// The dims, outermost first.
    #[prost(int64, repeated, packed = "true", tag = "1")]
    pub dim: Vec<i64>,
}

/// NVCaffe's `raw_data_type` (field 10) values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RawDataType {
    /// IEEE double, little-endian.
    Double = 0,
    /// IEEE single, little-endian.
    Float = 1,
    /// IEEE half, little-endian.
    Float16 = 2,
    /// 32-bit signed integer.
    Int = 3,
    /// 32-bit unsigned integer.
    Uint = 4,
}

impl RawDataType {
    /// The type for a field value, if it is one NVCaffe defines.
    ///
    /// ```
    /// use blob_proto::RawDataType;
    /// assert_eq!(RawDataType::from_i32(2), Some(RawDataType::Float16));
    /// assert_eq!(RawDataType::from_i32(9), None);
    /// ```
    pub fn from_i32(v: i32) -> Option<Self> {
        Some(match v {
            0 => Self::Double,
            1 => Self::Float,
            2 => Self::Float16,
            3 => Self::Int,
            4 => Self::Uint,
            _ => return None,
        })
    }

    /// Bytes per element.
    ///
    /// ```
    /// assert_eq!(blob_proto::RawDataType::Float16.size(), 2);
    /// ```
    pub fn size(self) -> usize {
        match self {
            Self::Double => 8,
            Self::Float | Self::Int | Self::Uint => 4,
            Self::Float16 => 2,
        }
    }
}

/// Caffe's `BlobProto`: a blob's shape and values as stored in files.
///
/// Field numbers and proto2 presence follow caffe.proto: legacy `num` (1),
/// `channels` (2), `height` (3), `width` (4) are `Option` so that an explicit
/// 0 is told apart from an absent field; `data` (5), `diff` (6), `shape`
/// (7), `double_data` (8), `double_diff` (9); NVCaffe's `raw_data_type`
/// (10) and `raw_data` (12). Packed and unpacked encodings are both read.
///
/// ```
/// use prost::Message;
/// use blob_proto::{BlobProto, BlobShape};
/// let b = BlobProto {
///     shape: Some(BlobShape { dim: vec![2] }),
///     data: vec![1.0, -2.0],
///     ..Default::default()
/// };
/// let bytes = b.encode_to_vec();
/// assert_eq!(BlobProto::decode(&bytes[..]).unwrap(), b);
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BlobProto {
    /// Legacy 4-D dim 0 (field 1).
    pub num: Option<i32>,
    /// Legacy 4-D dim 1 (field 2).
    pub channels: Option<i32>,
    /// Legacy 4-D dim 2 (field 3).
    pub height: Option<i32>,
    /// Legacy 4-D dim 3 (field 4).
    pub width: Option<i32>,
    /// Float values (field 5).
    pub data: Vec<f32>,
    /// Float gradients (field 6).
    pub diff: Vec<f32>,
    /// N-D shape (field 7); absent for a 0-axis blob written by Caffe.
    pub shape: Option<BlobShape>,
    /// Double values (field 8).
    pub double_data: Vec<f64>,
    /// Double gradients (field 9).
    pub double_diff: Vec<f64>,
    /// NVCaffe's element type of `raw_data` (field 10).
    pub raw_data_type: Option<i32>,
    /// NVCaffe's packed values (field 12).
    pub raw_data: Option<Vec<u8>>,
}

impl BlobProto {
    /// Whether any legacy num/channels/height/width field is present.
    ///
    /// ```
    /// let b = blob_proto::BlobProto { num: Some(0), ..Default::default() };
    /// assert!(b.has_legacy_dims());
    /// ```
    pub fn has_legacy_dims(&self) -> bool {
        self.num.is_some()
            || self.channels.is_some()
            || self.height.is_some()
            || self.width.is_some()
    }

    /// NVCaffe's `raw_data` decoded to `f64` per `raw_data_type` (FLOAT,
    /// FLOAT16, DOUBLE, INT, UINT), or `None` when the blob has none.
    ///
    /// ```
    /// let b = blob_proto::BlobProto {
    ///     raw_data_type: Some(2), // FLOAT16
    ///     raw_data: Some(vec![0x00, 0x3c, 0x00, 0xc0]), // 1.0, -2.0
    ///     ..Default::default()
    /// };
    /// assert_eq!(b.raw_values().unwrap(), Some(vec![1.0, -2.0]));
    /// ```
    pub fn raw_values(&self) -> Result<Option<Vec<f64>>, crate::ProtoError> {
        let Some(raw) = &self.raw_data else {
            return Ok(None);
        };
        let code = self.raw_data_type.unwrap_or(RawDataType::Double as i32);
        let invalid = |detail: String| crate::ProtoError::Invalid {
            at: "BlobProto.raw_data".into(),
            detail,
        };
        let ty = RawDataType::from_i32(code)
            .ok_or_else(|| invalid(format!("unknown raw_data_type {code}")))?;
        if !raw.len().is_multiple_of(ty.size()) {
            return Err(invalid(format!(
                "{} bytes is not a whole number of {:?} values",
                raw.len(),
                ty
            )));
        }
        let values = raw.chunks_exact(ty.size()).map(|c| match ty {
            RawDataType::Double => f64::from_le_bytes(c.try_into().expect("8 bytes")),
            RawDataType::Float => f64::from(f32::from_le_bytes(c.try_into().expect("4 bytes"))),
            RawDataType::Float16 => {
                f64::from(half::f16::from_le_bytes(c.try_into().expect("2 bytes")).to_f32())
            }
            RawDataType::Int => f64::from(i32::from_le_bytes(c.try_into().expect("4 bytes"))),
            RawDataType::Uint => f64::from(u32::from_le_bytes(c.try_into().expect("4 bytes"))),
        });
        Ok(Some(values.collect()))
    }

    /// The stored values widened to `f64`, from whichever field holds them
    /// (`double_data`, NVCaffe `raw_data`, or `data`), as Caffe's
    /// `FromProto` chooses.
    ///
    /// ```
    /// let b = blob_proto::BlobProto { data: vec![1.5], ..Default::default() };
    /// assert_eq!(b.values_f64().unwrap(), vec![1.5]);
    /// ```
    pub fn values_f64(&self) -> Result<Vec<f64>, crate::ProtoError> {
        if !self.double_data.is_empty() {
            return Ok(self.double_data.clone());
        }
        if let Some(v) = self.raw_values()? {
            return Ok(v);
        }
        Ok(self.data.iter().map(|&v| f64::from(v)).collect())
    }

    /// How many values the blob stores, and in which field: `double_data`
    /// when present, else NVCaffe's `raw_data`, else `data` (the order
    /// Caffe's and NVCaffe's `FromProto` read them in).
    ///
    /// ```
    /// let b = blob_proto::BlobProto { data: vec![1.0, 2.0], ..Default::default() };
    /// assert_eq!(b.stored_values().unwrap(), ("data", 2));
    /// ```
    pub fn stored_values(&self) -> Result<(&'static str, usize), crate::ProtoError> {
        if !self.double_data.is_empty() {
            return Ok(("double_data", self.double_data.len()));
        }
        if let Some(v) = self.raw_values()? {
            return Ok(("raw_data", v.len()));
        }
        Ok(("data", self.data.len()))
    }

    /// Fails unless the shape is valid (no negative dim, a count that
    /// fits) and the blob stores exactly that many values, as Caffe's
    /// `FromProto` requires. `at` says where the blob is, for the message
    /// (`layer 'conv1' blob 0`).
    ///
    /// ```
    /// use blob_proto::{BlobProto, BlobShape};
    /// let b = BlobProto { shape: Some(BlobShape { dim: vec![2, 3] }), data: vec![0.0; 4], ..Default::default() };
    /// assert_eq!(
    ///     b.check_values("layer 'ip' blob 0").unwrap_err().to_string(),
    ///     "layer 'ip' blob 0: shape 2 3 has 6 values but the file stores 4 (in data)"
    /// );
    /// // No dims and no legacy fields: a scalar, which needs its one value.
    /// assert_eq!(
    ///     BlobProto::default().check_values("mean").unwrap_err().to_string(),
    ///     "mean: shape () (no dims: a scalar) has 1 values but the file stores 0 (in data)"
    /// );
    /// ```
    pub fn check_values(&self, at: &str) -> Result<(), crate::ProtoError> {
        let shape = self.stored_shape();
        let invalid = |detail: String| crate::ProtoError::Invalid {
            at: at.to_string(),
            detail,
        };
        // Caffe's kMaxBlobAxes: Blob::Reshape refuses more (and a
        // million-axis shape would make a message of megabytes).
        if shape.len() > 32 {
            return Err(invalid(format!(
                "{} axes; Caffe's blobs have at most 32",
                shape.len()
            )));
        }
        let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
        let count = shape
            .iter()
            .try_fold(1u64, |acc, &d| {
                u64::try_from(d).ok().and_then(|d| acc.checked_mul(d))
            })
            .ok_or_else(|| {
                invalid(format!(
                    "shape {} has a negative dim or too many values",
                    dims.join(" ")
                ))
            })?;
        let shape_text = || {
            // No dims is a scalar (Caffe's count of an empty shape is 1).
            if dims.is_empty() {
                "() (no dims: a scalar)".into()
            } else {
                dims.join(" ")
            }
        };
        let (field, stored) = self.stored_values()?;
        if count != stored as u64 {
            return Err(crate::ProtoError::ValueCount {
                at: at.to_string(),
                shape: shape_text(),
                count,
                stored,
                field,
            });
        }
        // A diff, where stored, holds a value per data value (Caffe's
        // FromProto checks it as it checks the data).
        for (field, diffs) in [
            ("diff", self.diff.len()),
            ("double_diff", self.double_diff.len()),
        ] {
            if diffs != 0 && diffs as u64 != count {
                return Err(crate::ProtoError::ValueCount {
                    at: at.to_string(),
                    shape: shape_text(),
                    count,
                    stored: diffs,
                    field,
                });
            }
        }
        Ok(())
    }

    /// The shape as stored: `[num, channels, height, width]` (absent ones 0)
    /// when a legacy field is present, else `shape.dim`.
    ///
    /// ```
    /// let b = blob_proto::BlobProto { num: Some(1), width: Some(5), ..Default::default() };
    /// assert_eq!(b.stored_shape(), vec![1, 0, 0, 5]);
    /// ```
    pub fn stored_shape(&self) -> Vec<i64> {
        if self.has_legacy_dims() {
            [self.num, self.channels, self.height, self.width]
                .iter()
                .map(|d| i64::from(d.unwrap_or(0)))
                .collect()
        } else {
            self.shape
                .as_ref()
                .map(|s| s.dim.clone())
                .unwrap_or_default()
        }
    }
}

/// A decode error with our own message. prost marks `DecodeError::new`
/// deprecated without offering another public constructor, and a
/// hand-written `Message::merge_field` must return a `DecodeError`; this is
/// the one place that calls it.
#[allow(deprecated)]
pub(crate) fn decode_error(msg: impl Into<String>) -> DecodeError {
    DecodeError::new(msg.into())
}

pub(crate) fn underflow() -> DecodeError {
    decode_error("buffer underflow: a length runs past the end of the input")
}

/// Appends one repeated scalar field occurrence: a packed run or a single
/// unpacked element.
fn merge_scalars<T: bytemuck::Pod, const W: usize>(
    wire_type: WireType,
    values: &mut Vec<T>,
    buf: &mut impl Buf,
    from_le: fn([u8; W]) -> T,
) -> Result<(), DecodeError> {
    let single = if W == 4 {
        WireType::ThirtyTwoBit
    } else {
        WireType::SixtyFourBit
    };
    if wire_type == single {
        if buf.remaining() < W {
            return Err(underflow());
        }
        let mut b = [0u8; W];
        buf.copy_to_slice(&mut b);
        values.push(from_le(b));
        return Ok(());
    }
    if wire_type != WireType::LengthDelimited {
        return Err(decode_error(format!(
            "invalid wire type {wire_type:?} for a repeated {W}-byte field"
        )));
    }
    let len = decode_varint(buf)?;
    if len > buf.remaining() as u64 {
        return Err(decode_error(format!(
            "declares {len} bytes but only {} remain (truncated file?)",
            buf.remaining()
        )));
    }
    let len = len as usize;
    if !len.is_multiple_of(W) {
        return Err(decode_error(format!(
            "packed length {len} is not a multiple of {W}"
        )));
    }
    let start = values.len();
    values.reserve(len / W);
    if cfg!(target_endian = "little") {
        // The wire's little-endian bytes are the values' bytes: one copy
        // (the source may be unaligned, the vector is not).
        values.resize(start + len / W, T::zeroed());
        buf.copy_to_slice(bytemuck::cast_slice_mut(&mut values[start..]));
        return Ok(());
    }
    let mut left = len;
    while left > 0 {
        let chunk = buf.chunk();
        let take = chunk.len().min(left) / W * W;
        if take == 0 {
            // An element split across two chunks of a non-contiguous Buf.
            let mut b = [0u8; W];
            buf.copy_to_slice(&mut b);
            values.push(from_le(b));
            left -= W;
            continue;
        }
        values.extend(
            chunk[..take]
                .chunks_exact(W)
                .map(|c| from_le(c.try_into().expect("exact chunk"))),
        );
        buf.advance(take);
        left -= take;
    }
    Ok(())
}

pub(crate) fn put_packed<T: bytemuck::Pod>(
    tag: u32,
    values: &[T],
    buf: &mut impl BufMut,
    to_le: fn(T) -> Vec<u8>,
) {
    if values.is_empty() {
        return;
    }
    encode_key(tag, WireType::LengthDelimited, buf);
    encode_varint(size_of_val(values) as u64, buf);
    if cfg!(target_endian = "little") {
        buf.put_slice(bytemuck::cast_slice(values));
    } else {
        for &v in values {
            buf.put_slice(&to_le(v));
        }
    }
}

pub(crate) fn packed_len<T>(tag: u32, values: &[T]) -> usize {
    if values.is_empty() {
        0
    } else {
        let bytes = size_of_val(values);
        key_len(tag) + encoded_len_varint(bytes as u64) + bytes
    }
}

fn put_i32(tag: u32, v: Option<i32>, buf: &mut impl BufMut) {
    if let Some(v) = v {
        encoding::int32::encode(tag, &v, buf);
    }
}

fn i32_len(tag: u32, v: Option<i32>) -> usize {
    v.map_or(0, |v| encoding::int32::encoded_len(tag, &v))
}

impl Message for BlobProto {
    fn encode_raw(&self, buf: &mut impl BufMut) {
        put_i32(1, self.num, buf);
        put_i32(2, self.channels, buf);
        put_i32(3, self.height, buf);
        put_i32(4, self.width, buf);
        put_packed(5, &self.data, buf, |v| v.to_le_bytes().to_vec());
        put_packed(6, &self.diff, buf, |v| v.to_le_bytes().to_vec());
        if let Some(s) = &self.shape {
            encoding::message::encode(7, s, buf);
        }
        put_packed(8, &self.double_data, buf, |v| v.to_le_bytes().to_vec());
        put_packed(9, &self.double_diff, buf, |v| v.to_le_bytes().to_vec());
        put_i32(10, self.raw_data_type, buf);
        if let Some(r) = &self.raw_data {
            encoding::bytes::encode(12, r, buf);
        }
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl Buf,
        ctx: DecodeContext,
    ) -> Result<(), DecodeError> {
        let int = |slot: &mut Option<i32>, buf: &mut _| {
            let v = slot.get_or_insert(0);
            encoding::int32::merge(wire_type, v, buf, DecodeContext::default())
        };
        let r = match tag {
            1 => int(&mut self.num, buf),
            2 => int(&mut self.channels, buf),
            3 => int(&mut self.height, buf),
            4 => int(&mut self.width, buf),
            5 => merge_scalars(wire_type, &mut self.data, buf, f32::from_le_bytes),
            6 => merge_scalars(wire_type, &mut self.diff, buf, f32::from_le_bytes),
            7 => encoding::message::merge(
                wire_type,
                self.shape.get_or_insert_with(BlobShape::default),
                buf,
                ctx,
            ),
            8 => merge_scalars(wire_type, &mut self.double_data, buf, f64::from_le_bytes),
            9 => merge_scalars(wire_type, &mut self.double_diff, buf, f64::from_le_bytes),
            10 => int(&mut self.raw_data_type, buf),
            12 => encoding::bytes::merge(
                wire_type,
                self.raw_data.get_or_insert_with(Vec::new),
                buf,
                ctx,
            ),
            _ => return encoding::skip_field(wire_type, tag, buf, ctx),
        };
        r.map_err(|mut e| {
            e.push("BlobProto", field_name(tag));
            e
        })
    }

    fn encoded_len(&self) -> usize {
        i32_len(1, self.num)
            + i32_len(2, self.channels)
            + i32_len(3, self.height)
            + i32_len(4, self.width)
            + packed_len(5, &self.data)
            + packed_len(6, &self.diff)
            + self
                .shape
                .as_ref()
                .map_or(0, |s| encoding::message::encoded_len(7, s))
            + packed_len(8, &self.double_data)
            + packed_len(9, &self.double_diff)
            + i32_len(10, self.raw_data_type)
            + self
                .raw_data
                .as_ref()
                .map_or(0, |r| encoding::bytes::encoded_len(12, r))
    }

    fn clear(&mut self) {
        *self = Self::default();
    }
}

fn field_name(tag: u32) -> &'static str {
    match tag {
        1 => "num",
        2 => "channels",
        3 => "height",
        4 => "width",
        5 => "data",
        6 => "diff",
        7 => "shape",
        8 => "double_data",
        9 => "double_diff",
        10 => "raw_data_type",
        12 => "raw_data",
        _ => "unknown",
    }
}
