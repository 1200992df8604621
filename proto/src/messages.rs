//! The small messages: `BlobProtoVector`, `Datum`, `SolverState`, and the
//! SSD fork's `AnnotatedDatum` with its boxes.

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
    /// The YOLO fork's segmentation label image, encoded (PNG), its
    /// pixels the classes of the image's pixels (field 8,
    /// eric612/MobileNet-YOLO).
    #[prost(bytes = "vec", optional, tag = "8")]
    pub seg_label: Option<Vec<u8>>,
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

/// The SSD fork's `NormalizedBBox`: a box in image-relative coordinates
/// (0 to 1), as `AnnotatedDatum` stores it.
#[derive(Clone, PartialEq, Message)]
pub struct NormalizedBBox {
    /// Left (field 1).
    #[prost(float, optional, tag = "1")]
    pub xmin: Option<f32>,
    /// Top (field 2).
    #[prost(float, optional, tag = "2")]
    pub ymin: Option<f32>,
    /// Right (field 3).
    #[prost(float, optional, tag = "3")]
    pub xmax: Option<f32>,
    /// Bottom (field 4).
    #[prost(float, optional, tag = "4")]
    pub ymax: Option<f32>,
    /// Label (field 5).
    #[prost(int32, optional, tag = "5")]
    pub label: Option<i32>,
    /// Marked difficult (field 6).
    #[prost(bool, optional, tag = "6")]
    pub difficult: Option<bool>,
    /// Score (field 7).
    #[prost(float, optional, tag = "7")]
    pub score: Option<f32>,
    /// Size (field 8).
    #[prost(float, optional, tag = "8")]
    pub size: Option<f32>,
}

/// The YOLO fork's `LaneInfo`: one point of a lane (TuSimple's), in
/// image-relative coordinates (0 to 1; a point the lane does not reach
/// lies outside).
///
/// ```
/// use prost::Message;
/// let p = blob_proto::LaneInfo { x: Some(0.25), y: Some(0.5), id: None };
/// assert_eq!(blob_proto::LaneInfo::decode(&p.encode_to_vec()[..]).unwrap(), p);
/// ```
#[derive(Clone, PartialEq, Message)]
pub struct LaneInfo {
    /// Across (field 1).
    #[prost(float, optional, tag = "1")]
    pub x: Option<f32>,
    /// Down (field 2).
    #[prost(float, optional, tag = "2")]
    pub y: Option<f32>,
    /// The fork declares it and never writes it (field 3).
    #[prost(int32, optional, tag = "3")]
    pub id: Option<i32>,
}

/// The SSD fork's `Annotation`: one object (its box), or in the YOLO
/// fork's lane records one point of a lane.
#[derive(Clone, PartialEq, Message)]
pub struct Annotation {
    /// The object's instance (field 1); a lane point's place in its lane.
    #[prost(int32, optional, tag = "1")]
    pub instance_id: Option<i32>,
    /// Its box (field 2).
    #[prost(message, optional, tag = "2")]
    pub bbox: Option<NormalizedBBox>,
    /// The YOLO fork's lane point (field 3).
    #[prost(message, optional, tag = "3")]
    pub lanes: Option<LaneInfo>,
}

/// The SSD fork's `AnnotationGroup`: the objects of one label.
#[derive(Clone, PartialEq, Message)]
pub struct AnnotationGroup {
    /// Their label (field 1).
    #[prost(int32, optional, tag = "1")]
    pub group_label: Option<i32>,
    /// The objects (field 2).
    #[prost(message, repeated, tag = "2")]
    pub annotation: Vec<Annotation>,
}

/// The SSD fork's `AnnotatedDatum`: a `Datum` with its objects' boxes,
/// the records of an SSD training store (its `create_annoset`).
///
/// ```
/// use prost::Message;
/// use blob_proto::{AnnotatedDatum, Annotation, AnnotationGroup, NormalizedBBox};
/// let bbox = NormalizedBBox { xmin: Some(0.1), ymin: Some(0.2), xmax: Some(0.5), ymax: Some(0.9), ..Default::default() };
/// let d = AnnotatedDatum {
///     r#type: Some(0),
///     annotation_group: vec![AnnotationGroup {
///         group_label: Some(3),
///         annotation: vec![Annotation { instance_id: Some(0), bbox: Some(bbox), lanes: None }],
///     }],
///     ..Default::default()
/// };
/// assert_eq!(AnnotatedDatum::decode(&d.encode_to_vec()[..]).unwrap(), d);
/// ```
#[derive(Clone, PartialEq, Message)]
pub struct AnnotatedDatum {
    /// The image (field 1).
    #[prost(message, optional, tag = "1")]
    pub datum: Option<Datum>,
    /// `AnnotationType` (field 2: 0 `BBOX`, the YOLO fork's 1 `BBOXandSeg`
    /// and 2 `LANE`).
    #[prost(int32, optional, tag = "2")]
    pub r#type: Option<i32>,
    /// The objects, grouped by label (field 3).
    #[prost(message, repeated, tag = "3")]
    pub annotation_group: Vec<AnnotationGroup>,
}
