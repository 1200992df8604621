//! Borrowed forms of `BlobProto` for the bulk paths: [`BlobProtoView`]
//! parses a blob without copying its values, and [`BlobProtoRef`] writes
//! one straight from slices. A 100M-float blob then costs one copy each
//! way instead of two.

use prost::encoding::{DecodeContext, WireType, decode_key, decode_varint, skip_field};

use crate::blob::{BlobProto, BlobShape, decode_error};
use crate::error::{ProtoError, check_writable, decode_at};

/// Values of one repeated scalar field as they lie in the input: each run
/// is a packed payload or one unpacked element, little-endian.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ScalarRuns<'a> {
    runs: Vec<&'a [u8]>,
    bytes: usize,
}

impl<'a> ScalarRuns<'a> {
    /// Number of bytes of all runs.
    ///
    /// ```
    /// assert_eq!(blob_proto::ScalarRuns::default().byte_len(), 0);
    /// ```
    pub fn byte_len(&self) -> usize {
        self.bytes
    }

    /// The runs, in order.
    ///
    /// ```
    /// assert!(blob_proto::ScalarRuns::default().runs().is_empty());
    /// ```
    pub fn runs(&self) -> &[&'a [u8]] {
        &self.runs
    }

    /// Copies the values into `out` (little-endian bytes of exactly
    /// `byte_len()`).
    ///
    /// ```
    /// let mut out = [0u8; 0];
    /// blob_proto::ScalarRuns::default().copy_to(&mut out);
    /// ```
    pub fn copy_to(&self, out: &mut [u8]) {
        assert_eq!(out.len(), self.bytes, "copy_to: destination size");
        let mut at = 0;
        for r in &self.runs {
            out[at..at + r.len()].copy_from_slice(r);
            at += r.len();
        }
    }

    fn push(
        &mut self,
        wire_type: WireType,
        width: usize,
        buf: &mut &'a [u8],
    ) -> Result<(), prost::DecodeError> {
        let single = if width == 4 {
            WireType::ThirtyTwoBit
        } else {
            WireType::SixtyFourBit
        };
        let len = if wire_type == single {
            width
        } else if wire_type == WireType::LengthDelimited {
            let len = decode_varint(buf)?;
            if len > buf.len() as u64 {
                return Err(decode_error(format!(
                    "declares {len} bytes but only {} remain (truncated file?)",
                    buf.len()
                )));
            }
            len as usize
        } else {
            return Err(decode_error(format!(
                "invalid wire type {wire_type:?} for a repeated {width}-byte field"
            )));
        };
        if !len.is_multiple_of(width) || len > buf.len() {
            return Err(decode_error(format!(
                "{len} bytes is not a whole number of {width}-byte values"
            )));
        }
        let (run, rest) = buf.split_at(len);
        *buf = rest;
        self.runs.push(run);
        self.bytes += len;
        Ok(())
    }
}

/// A `BlobProto` parsed without copying its values (see [`ScalarRuns`]).
///
/// ```
/// use blob_proto::{BlobProto, BlobProtoView, BlobShape, Message};
/// let bytes = BlobProto { shape: Some(BlobShape { dim: vec![2] }), data: vec![1.0, 2.0], ..Default::default() }.encode_to_vec();
/// let view = BlobProtoView::parse(&bytes).unwrap();
/// assert_eq!(view.data.byte_len(), 8);
/// assert_eq!(view.to_owned_proto().data, [1.0, 2.0]);
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BlobProtoView<'a> {
    /// Legacy dims, as in [`BlobProto`].
    pub num: Option<i32>,
    /// Legacy dims, as in [`BlobProto`].
    pub channels: Option<i32>,
    /// Legacy dims, as in [`BlobProto`].
    pub height: Option<i32>,
    /// Legacy dims, as in [`BlobProto`].
    pub width: Option<i32>,
    /// `data` (5), f32.
    pub data: ScalarRuns<'a>,
    /// `diff` (6), f32.
    pub diff: ScalarRuns<'a>,
    /// `shape` (7).
    pub shape: Option<BlobShape>,
    /// `double_data` (8), f64.
    pub double_data: ScalarRuns<'a>,
    /// `double_diff` (9), f64.
    pub double_diff: ScalarRuns<'a>,
    /// NVCaffe `raw_data_type` (10).
    pub raw_data_type: Option<i32>,
    /// NVCaffe `raw_data` (12).
    pub raw_data: Option<&'a [u8]>,
}

impl<'a> BlobProtoView<'a> {
    /// Parses a serialized `BlobProto`, borrowing its values from `bytes`.
    ///
    /// ```
    /// assert!(blob_proto::BlobProtoView::parse(&[0x2a, 0x08, 0, 0]).is_err());
    /// ```
    pub fn parse(bytes: &'a [u8]) -> Result<Self, ProtoError> {
        let at = "BlobProto";
        let mut v = Self::default();
        let mut buf = bytes;
        while !buf.is_empty() {
            let (tag, wt) = decode_key(&mut buf).map_err(decode_at(at))?;
            let int = |slot: &mut Option<i32>, buf: &mut &[u8]| -> Result<(), prost::DecodeError> {
                let x = slot.get_or_insert(0);
                prost::encoding::int32::merge(wt, x, buf, DecodeContext::default())
            };
            let field_at = |name: &str| format!("{at}.{name}");
            match tag {
                1 => int(&mut v.num, &mut buf).map_err(decode_at(field_at("num")))?,
                2 => int(&mut v.channels, &mut buf).map_err(decode_at(field_at("channels")))?,
                3 => int(&mut v.height, &mut buf).map_err(decode_at(field_at("height")))?,
                4 => int(&mut v.width, &mut buf).map_err(decode_at(field_at("width")))?,
                5 => v
                    .data
                    .push(wt, 4, &mut buf)
                    .map_err(decode_at(field_at("data")))?,
                6 => v
                    .diff
                    .push(wt, 4, &mut buf)
                    .map_err(decode_at(field_at("diff")))?,
                7 => prost::encoding::message::merge(
                    wt,
                    v.shape.get_or_insert_with(BlobShape::default),
                    &mut buf,
                    DecodeContext::default(),
                )
                .map_err(decode_at(field_at("shape")))?,
                8 => v
                    .double_data
                    .push(wt, 8, &mut buf)
                    .map_err(decode_at(field_at("double_data")))?,
                9 => v
                    .double_diff
                    .push(wt, 8, &mut buf)
                    .map_err(decode_at(field_at("double_diff")))?,
                10 => int(&mut v.raw_data_type, &mut buf)
                    .map_err(decode_at(field_at("raw_data_type")))?,
                12 => {
                    let mut run = ScalarRuns::default();
                    if wt != WireType::LengthDelimited {
                        return Err(decode_at(field_at("raw_data"))(decode_error(
                            "raw_data must be length-delimited",
                        )));
                    }
                    run.push(wt, 1, &mut buf)
                        .map_err(decode_at(field_at("raw_data")))?;
                    v.raw_data = run.runs.first().copied();
                }
                _ => skip_field(wt, tag, &mut buf, DecodeContext::default())
                    .map_err(decode_at(at))?,
            }
        }
        Ok(v)
    }

    /// An owned [`BlobProto`] with the same content.
    ///
    /// ```
    /// assert_eq!(blob_proto::BlobProtoView::default().to_owned_proto(), blob_proto::BlobProto::default());
    /// ```
    pub fn to_owned_proto(&self) -> BlobProto {
        fn collect<T, const W: usize>(r: &ScalarRuns<'_>, f: fn([u8; W]) -> T) -> Vec<T> {
            r.runs
                .iter()
                .flat_map(|run| {
                    run.chunks_exact(W)
                        .map(move |c| f(c.try_into().expect("width")))
                })
                .collect()
        }
        BlobProto {
            num: self.num,
            channels: self.channels,
            height: self.height,
            width: self.width,
            data: collect(&self.data, f32::from_le_bytes),
            diff: collect(&self.diff, f32::from_le_bytes),
            shape: self.shape.clone(),
            double_data: collect(&self.double_data, f64::from_le_bytes),
            double_diff: collect(&self.double_diff, f64::from_le_bytes),
            raw_data_type: self.raw_data_type,
            raw_data: self.raw_data.map(<[u8]>::to_vec),
        }
    }
}

/// A `BlobProto` to write, borrowing its values: what `ToProto` +
/// serialize produce, in Caffe's field order, without building an owned
/// message first.
///
/// ```
/// use blob_proto::{BlobProto, BlobProtoRef, Message};
/// let r = BlobProtoRef { dims: Some(&[2]), data: &[1.0, 2.0], ..Default::default() };
/// let owned = BlobProto { shape: Some(blob_proto::BlobShape { dim: vec![2] }), data: vec![1.0, 2.0], ..Default::default() };
/// assert_eq!(r.encode_to_vec().unwrap(), owned.encode_to_vec());
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct BlobProtoRef<'a> {
    /// `shape.dim`, or `None` to write no shape (a 0-axis blob).
    pub dims: Option<&'a [i64]>,
    /// `data` (5).
    pub data: &'a [f32],
    /// `diff` (6).
    pub diff: &'a [f32],
    /// `double_data` (8).
    pub double_data: &'a [f64],
    /// `double_diff` (9).
    pub double_diff: &'a [f64],
}

impl BlobProtoRef<'_> {
    /// Serializes into `out` (appending), refusing over 2 GiB - 1 bytes.
    ///
    /// ```
    /// let mut out = Vec::new();
    /// blob_proto::BlobProtoRef::default().encode(&mut out).unwrap();
    /// assert!(out.is_empty());
    /// ```
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), ProtoError> {
        let shape = self.dims.map(|d| BlobShape { dim: d.to_vec() });
        let len = crate::blob::packed_len(5, self.data)
            + crate::blob::packed_len(6, self.diff)
            + shape
                .as_ref()
                .map_or(0, |s| prost::encoding::message::encoded_len(7, s))
            + crate::blob::packed_len(8, self.double_data)
            + crate::blob::packed_len(9, self.double_diff);
        check_writable("BlobProto", len)?;
        out.reserve(len);
        crate::blob::put_packed(5, self.data, out, |v| v.to_le_bytes().to_vec());
        crate::blob::put_packed(6, self.diff, out, |v| v.to_le_bytes().to_vec());
        if let Some(s) = &shape {
            prost::encoding::message::encode(7, s, out);
        }
        crate::blob::put_packed(8, self.double_data, out, |v| v.to_le_bytes().to_vec());
        crate::blob::put_packed(9, self.double_diff, out, |v| v.to_le_bytes().to_vec());
        Ok(())
    }

    /// Serializes into a new vector.
    ///
    /// ```
    /// assert!(blob_proto::BlobProtoRef::default().encode_to_vec().unwrap().is_empty());
    /// ```
    pub fn encode_to_vec(&self) -> Result<Vec<u8>, ProtoError> {
        let mut out = Vec::new();
        self.encode(&mut out)?;
        Ok(out)
    }
}
