//! Errors of decoding and encoding Caffe files.

/// A file or message that could not be read or written.
///
/// Decode errors say where in the message tree the problem was found
/// (`NetParameter.layer[3] "conv1".blobs[0]: BlobProto.data: ...`).
///
/// ```
/// let err = blob_proto::NetParameter::decode(&[0x0a, 0x05, b'a']).unwrap_err();
/// assert!(err.to_string().contains("NetParameter"), "{err}");
/// ```
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtoError {
    /// The bytes are not a valid encoding of the message.
    #[error("{at}: {source}")]
    Decode {
        /// Where in the message tree.
        at: String,
        /// What the wire-format reader found.
        source: prost::DecodeError,
    },
    /// Valid wire format, invalid content (e.g. a name that is not UTF-8).
    #[error("{at}: {detail}")]
    Invalid {
        /// Where in the message tree.
        at: String,
        /// What is wrong.
        detail: String,
    },
    /// A blob whose shape and stored values disagree (Caffe's `FromProto`
    /// refuses it).
    #[error("{at}: shape {shape} has {count} values but the file stores {stored} (in {field})")]
    ValueCount {
        /// Where the blob is.
        at: String,
        /// The dims as stored.
        shape: String,
        /// The shape's element count.
        count: u64,
        /// Values stored.
        stored: usize,
        /// The field that holds them.
        field: &'static str,
    },
    /// Text that is not a message in protobuf's text format (a
    /// `.prototxt`).
    #[error("line {line}, column {column}: {detail}")]
    Text {
        /// The line, from 1.
        line: usize,
        /// The column, in bytes from 1.
        column: usize,
        /// What was expected and what was found.
        detail: String,
    },
    /// A message too large for Caffe to read back (2 GiB - 1 bytes).
    #[error("cannot write {what}: {bytes} bytes exceed the {limit} bytes Caffe can read")]
    TooLarge {
        /// What was being written.
        what: &'static str,
        /// Its encoded size.
        bytes: usize,
        /// The limit.
        limit: usize,
    },
}

/// Largest message Caffe's reader accepts (`INT_MAX`).
pub const CAFFE_MAX_MESSAGE_BYTES: usize = i32::MAX as usize;

pub(crate) fn decode_at(at: impl Into<String>) -> impl FnOnce(prost::DecodeError) -> ProtoError {
    let at = at.into();
    move |source| ProtoError::Decode { at, source }
}

/// Refuses messages Caffe could not read back.
pub(crate) fn check_writable(what: &'static str, bytes: usize) -> Result<(), ProtoError> {
    if bytes > CAFFE_MAX_MESSAGE_BYTES {
        return Err(ProtoError::TooLarge {
            what,
            bytes,
            limit: CAFFE_MAX_MESSAGE_BYTES,
        });
    }
    Ok(())
}
