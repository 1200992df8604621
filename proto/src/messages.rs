//! The small messages: `BlobProtoVector`, `Datum`, `SolverState`.

use prost::Message;

use crate::blob::BlobProto;

/// Caffe's `BlobProtoVector`: a list of blobs (`blobs`, field 1).
///
/// ```
/// use prost::Message;
/// let v = blob_proto::BlobProtoVector { blobs: vec![Default::default()] };
/// assert_eq!(blob_proto::BlobProtoVector::decode(&v.encode_to_vec()[..]).unwrap(), v);
/// ```
#[derive(Clone, PartialEq, Message)]
pub struct BlobProtoVector {
    /// The blobs.
    #[prost(message, repeated, tag = "1")]
    pub blobs: Vec<BlobProto>,
}

/// Caffe's `Datum`: one stored example of a Caffe database.
///
/// ```
/// use prost::Message;
/// let d = blob_proto::Datum { label: Some(7), ..Default::default() };
/// assert_eq!(blob_proto::Datum::decode(&d.encode_to_vec()[..]).unwrap(), d);
/// ```
#[derive(Clone, PartialEq, Message)]
pub struct Datum {
    /// Channels (field 1).
    #[prost(int32, optional, tag = "1")]
    pub channels: Option<i32>,
    /// Height (field 2).
    #[prost(int32, optional, tag = "2")]
    pub height: Option<i32>,
    /// Width (field 3).
    #[prost(int32, optional, tag = "3")]
    pub width: Option<i32>,
    /// Raw bytes, usually uint8 pixels (field 4).
    #[prost(bytes = "vec", optional, tag = "4")]
    pub data: Option<Vec<u8>>,
    /// Label (field 5).
    #[prost(int32, optional, tag = "5")]
    pub label: Option<i32>,
    /// Float values, not packed (field 6).
    #[prost(float, repeated, packed = "false", tag = "6")]
    pub float_data: Vec<f32>,
    /// Whether `data` is an encoded image (field 7).
    #[prost(bool, optional, tag = "7")]
    pub encoded: Option<bool>,
}

/// Caffe's `SolverState`: what a `.solverstate` snapshot holds (iteration,
/// the matching `.caffemodel`, and the solver's history blobs, e.g. SGD
/// momentum).
///
/// ```
/// use prost::Message;
/// let s = blob_proto::SolverState { iter: Some(10), current_step: Some(0), ..Default::default() };
/// assert_eq!(blob_proto::SolverState::decode(&s.encode_to_vec()[..]).unwrap(), s);
/// ```
#[derive(Clone, PartialEq, Message)]
pub struct SolverState {
    /// Iteration reached (field 1).
    #[prost(int32, optional, tag = "1")]
    pub iter: Option<i32>,
    /// File name of the weights snapshot (field 2).
    #[prost(string, optional, tag = "2")]
    pub learned_net: Option<String>,
    /// One history blob per learnable parameter (field 3).
    #[prost(message, repeated, tag = "3")]
    pub history: Vec<BlobProto>,
    /// Step of a multistep learning-rate policy (field 4).
    #[prost(int32, optional, tag = "4")]
    pub current_step: Option<i32>,
}
