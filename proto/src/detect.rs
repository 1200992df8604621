//! Telling Caffe's binary file kinds apart.

use std::collections::BTreeSet;

use prost::encoding::{DecodeContext, WireType, decode_key, skip_field};

use crate::error::{ProtoError, decode_at};

/// The kind of message a Caffe binary file holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileFormat {
    /// A `.caffemodel` with new-format layers (field 100).
    NetParameter,
    /// A `.caffemodel` with V1 (or V0) layers (field 2).
    NetParameterV1,
    /// A `.binaryproto` blob (e.g. a mean image).
    BlobProto,
    /// A `.binaryproto` holding several blobs.
    BlobProtoVector,
    /// A `.solverstate` snapshot.
    SolverState,
}

impl FileFormat {
    /// The message name, as `blobflow inspect --json` prints it.
    ///
    /// ```
    /// assert_eq!(blob_proto::FileFormat::NetParameterV1.name(), "NetParameterV1");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            Self::NetParameter => "NetParameter",
            Self::NetParameterV1 => "NetParameterV1",
            Self::BlobProto => "BlobProto",
            Self::BlobProtoVector => "BlobProtoVector",
            Self::SolverState => "SolverState",
        }
    }
}

/// Guesses what a Caffe binary file holds from the fields at its top
/// level (they differ in number or wire type between the kinds); the file
/// name's extension only breaks the one real tie, a vector of one blob
/// against a net with only a name.
///
/// ```
/// use blob_proto::{detect_format, FileFormat};
/// // SolverState: iter (1, varint) and learned_net (2, string).
/// assert_eq!(detect_format(&[0x08, 0x0a, 0x12, 0x01, b'x'], None).unwrap(), FileFormat::SolverState);
/// // BlobProto: num (1, varint) and packed data (5).
/// assert_eq!(detect_format(&[0x08, 0x01, 0x2a, 0x00], None).unwrap(), FileFormat::BlobProto);
/// ```
pub fn detect_format(bytes: &[u8], file_name: Option<&str>) -> Result<FileFormat, ProtoError> {
    scan(bytes, file_name).or_else(|e| {
        // A damaged file cannot be told by its fields; its extension still
        // says what it should be, and decoding it as that names the field
        // where it breaks.
        match file_name.and_then(|n| n.rsplit('.').next()) {
            Some("caffemodel") => Ok(FileFormat::NetParameter),
            Some("solverstate") => Ok(FileFormat::SolverState),
            Some("binaryproto") => Ok(FileFormat::BlobProto),
            _ => Err(e),
        }
    })
}

fn scan(bytes: &[u8], file_name: Option<&str>) -> Result<FileFormat, ProtoError> {
    let mut seen = BTreeSet::new();
    let mut count_1_len = 0usize;
    let mut buf = bytes;
    while !buf.is_empty() {
        let (tag, wt) = decode_key(&mut buf).map_err(decode_at("not a Caffe protobuf file"))?;
        skip_field(wt, tag, &mut buf, DecodeContext::default())
            .map_err(decode_at("not a Caffe protobuf file"))?;
        if tag == 1 && wt == WireType::LengthDelimited {
            count_1_len += 1;
        }
        seen.insert((tag, wt as u8));
    }
    let has = |tag: u32, wt: WireType| seen.contains(&(tag, wt as u8));
    let len = WireType::LengthDelimited;
    Ok(if has(100, len) {
        FileFormat::NetParameter
    } else if has(1, WireType::Varint) && (has(2, len) || has(3, len)) {
        FileFormat::SolverState
    } else if has(2, len) {
        FileFormat::NetParameterV1
    } else if has(1, len) {
        let blob_file = file_name.is_some_and(|n| n.ends_with(".binaryproto"));
        if count_1_len > 1 || blob_file {
            FileFormat::BlobProtoVector
        } else {
            FileFormat::NetParameter
        }
    } else {
        FileFormat::BlobProto
    })
}
