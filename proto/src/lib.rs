//! Caffe's protobuf messages, wire-compatible with `caffe.proto`, built
//! without protoc.
//!
//! - [`BlobProto`], [`BlobShape`]: blobs as stored in every Caffe file,
//!   including NVCaffe's `raw_data`.
//! - [`NetParameter`], [`LayerParameter`]: `.caffemodel` files in the new,
//!   V1 and V0 formats; fields blobflow does not model are kept byte for
//!   byte, so rewriting a model loses nothing.
//! - [`SolverState`], [`BlobProtoVector`], [`Datum`], the SSD fork's
//!   [`AnnotatedDatum`] and [`LabelMap`].
//! - [`detect_format`]: which of these a file holds.
//! - [`TextMessage`]: a message in text format (a `.prototxt`), with the
//!   line of each field.
//! - [`ParamMessage`]: any message of `caffe.proto` (a net, a layer and
//!   its parameters), read from text or bytes against its [`schema`] and
//!   answering by field name with Caffe's defaults.
//!
//! Depend on `blobflow` (re-exported as `blobflow::proto`) to read Caffe
//! files into blobs; this crate alone decodes and encodes the messages.
//!
//! Readers accept packed and unpacked repeated scalars, skip unknown fields,
//! and never allocate more than the input could hold. Writers refuse
//! messages over 2 GiB - 1 bytes, which Caffe cannot read.
//!
//! ```
//! use blob_proto::{BlobProto, BlobShape};
//! use prost::Message;
//! let blob = BlobProto { shape: Some(BlobShape { dim: vec![3] }), data: vec![1.0, 2.0, 3.0], ..Default::default() };
//! let bytes = blob.encode_to_vec();
//! assert_eq!(BlobProto::decode(&bytes[..]).unwrap(), blob);
//! ```

mod blob;
mod detect;
mod error;
mod extend;
mod label_map;
mod limits;
mod messages;
mod net;
mod param;
mod param_text;
pub mod schema;
mod text;
mod view;

pub use blob::{BlobProto, BlobShape, RawDataType};
pub use detect::{FileFormat, detect_format};
pub use error::{CAFFE_MAX_MESSAGE_BYTES, ProtoError};
pub use extend::{Extension, Schemas};
pub use label_map::{LabelItem, LabelMap};
pub use limits::{MAX_FIELDS, MAX_LAYERS, MAX_TEXT_FIELDS, ReadLimits};
pub use messages::{
    AnnotatedDatum, Annotation, AnnotationGroup, BlobProtoVector, Datum, LaneInfo, NormalizedBBox,
    SolverState,
};
pub use net::{LayerFormat, LayerParameter, NetFormat, NetParameter, v1_layer_type_name};
pub use param::{ParamField, ParamMessage, ParamValue, UnknownField};
pub use param_text::format_g;
pub use prost::Message;
pub use text::{TextField, TextMessage, TextValue};
pub use view::{BlobProtoRef, BlobProtoView, ScalarRuns};

/// Decodes a message, naming it in the error (`BlobProto: buffer underflow`).
///
/// ```
/// let b: blob_proto::BlobProto = blob_proto::decode_message("BlobProto", &[0x2a, 0x00]).unwrap();
/// assert!(b.data.is_empty());
/// assert!(blob_proto::decode_message::<blob_proto::BlobProto>("BlobProto", &[0x2a, 0x09]).is_err());
/// ```
pub fn decode_message<M: Message + Default>(
    what: &'static str,
    bytes: &[u8],
) -> Result<M, ProtoError> {
    let decode_error = |source| ProtoError::Decode {
        at: what.into(),
        source,
    };
    // Each length-delimited field (a message, a string, a packed array)
    // becomes an allocation of its own: a 20 MB solver state of ten
    // million empty history blobs would take 1.8 GB. Count them first;
    // bytes the count cannot walk are left to the decoder, whose error
    // says more.
    let mut buf = bytes;
    let mut held = 0usize;
    let max = ReadLimits::current().fields;
    while let Ok((tag, wire_type)) = prost::encoding::decode_key(&mut buf) {
        if wire_type == prost::encoding::WireType::LengthDelimited {
            limits::within_limit(what, "messages, strings and arrays", held, max)?;
            held += 1;
        }
        let skipped = prost::encoding::skip_field(
            wire_type,
            tag,
            &mut buf,
            prost::encoding::DecodeContext::default(),
        );
        if skipped.is_err() || buf.is_empty() {
            break;
        }
    }
    M::decode(bytes).map_err(decode_error)
}

/// Encodes a message, refusing one over 2 GiB - 1 bytes that Caffe could
/// not read.
///
/// ```
/// let bytes = blob_proto::encode_message("BlobProto", &blob_proto::BlobProto::default()).unwrap();
/// assert!(bytes.is_empty());
/// ```
pub fn encode_message<M: Message>(what: &'static str, msg: &M) -> Result<Vec<u8>, ProtoError> {
    error::check_writable(what, msg.encoded_len())?;
    Ok(msg.encode_to_vec())
}

/// A name or value from a file as an error message quotes it: at most 60
/// characters, control characters escaped (a hostile file's token may be
/// 100 MB long, or hold a terminal escape sequence).
///
/// ```
/// assert_eq!(blob_proto::excerpt("conv1"), "conv1");
/// assert_eq!(blob_proto::excerpt("a\nb"), "a\\nb");
/// assert_eq!(blob_proto::excerpt(&"x".repeat(1000)).len(), 60);
/// ```
pub fn excerpt(text: &str) -> String {
    let escaped = |c: char| -> Vec<char> {
        if c.is_control() {
            c.escape_default().collect()
        } else {
            vec![c]
        }
    };
    let all: Vec<char> = text.chars().flat_map(escaped).collect();
    if all.len() <= 60 {
        return all.into_iter().collect();
    }
    let mut head: String = all[..57].iter().collect();
    head.push_str("...");
    head
}
