//! The messages of ONNX's `onnx.proto` that an exported model holds, with
//! ONNX's field numbers (checked against the `onnx` package's descriptors
//! by the export's tests through onnxruntime).

/// `OperatorSetIdProto`: an operator set the model uses.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct OperatorSetId {
    #[prost(string, tag = "1")]
    pub domain: String,
    #[prost(int64, tag = "2")]
    pub version: i64,
}

/// `ModelProto`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Model {
    #[prost(int64, tag = "1")]
    pub ir_version: i64,
    #[prost(string, tag = "2")]
    pub producer_name: String,
    #[prost(string, tag = "3")]
    pub producer_version: String,
    #[prost(message, optional, tag = "7")]
    pub graph: Option<Graph>,
    #[prost(message, repeated, tag = "8")]
    pub opset_import: Vec<OperatorSetId>,
}

/// `GraphProto`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Graph {
    #[prost(message, repeated, tag = "1")]
    pub node: Vec<Node>,
    #[prost(string, tag = "2")]
    pub name: String,
    #[prost(message, repeated, tag = "5")]
    pub initializer: Vec<Tensor>,
    #[prost(message, repeated, tag = "11")]
    pub input: Vec<ValueInfo>,
    #[prost(message, repeated, tag = "12")]
    pub output: Vec<ValueInfo>,
}

/// `NodeProto`: one operator.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Node {
    #[prost(string, repeated, tag = "1")]
    pub input: Vec<String>,
    #[prost(string, repeated, tag = "2")]
    pub output: Vec<String>,
    #[prost(string, tag = "3")]
    pub name: String,
    #[prost(string, tag = "4")]
    pub op_type: String,
    #[prost(message, repeated, tag = "5")]
    pub attribute: Vec<Attribute>,
}

/// `AttributeProto.AttributeType`'s values this export writes.
pub(super) mod attribute_type {
    pub const FLOAT: i32 = 1;
    pub const INT: i32 = 2;
    pub const STRING: i32 = 3;
    pub const INTS: i32 = 7;
}

/// `AttributeProto`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Attribute {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(float, tag = "2")]
    pub f: f32,
    #[prost(int64, tag = "3")]
    pub i: i64,
    #[prost(bytes = "vec", tag = "4")]
    pub s: Vec<u8>,
    #[prost(int64, repeated, tag = "8")]
    pub ints: Vec<i64>,
    #[prost(int32, tag = "20")]
    pub r#type: i32,
}

/// `TensorProto.DataType`'s values this export writes.
pub(super) mod data_type {
    pub const FLOAT: i32 = 1;
    pub const INT64: i32 = 7;
}

/// `TensorProto`: an initializer, its values little-endian in `raw_data`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Tensor {
    #[prost(int64, repeated, tag = "1")]
    pub dims: Vec<i64>,
    #[prost(int32, tag = "2")]
    pub data_type: i32,
    #[prost(string, tag = "8")]
    pub name: String,
    #[prost(bytes = "vec", tag = "9")]
    pub raw_data: Vec<u8>,
}

/// `ValueInfoProto`: a graph input's or output's name and type.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct ValueInfo {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, optional, tag = "2")]
    pub r#type: Option<TypeProto>,
}

/// `TypeProto` holding a tensor type.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct TypeProto {
    #[prost(message, optional, tag = "1")]
    pub tensor_type: Option<TensorType>,
}

/// `TypeProto.Tensor`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct TensorType {
    #[prost(int32, tag = "1")]
    pub elem_type: i32,
    #[prost(message, optional, tag = "2")]
    pub shape: Option<TensorShape>,
}

/// `TensorShapeProto`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct TensorShape {
    #[prost(message, repeated, tag = "1")]
    pub dim: Vec<Dimension>,
}

/// `TensorShapeProto.Dimension`: a size, or a name for a size given at
/// run time.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Dimension {
    #[prost(oneof = "DimensionValue", tags = "1, 2")]
    pub value: Option<DimensionValue>,
}

/// `Dimension`'s `value`.
#[derive(Clone, PartialEq, prost::Oneof)]
pub(super) enum DimensionValue {
    #[prost(int64, tag = "1")]
    DimValue(i64),
    #[prost(string, tag = "2")]
    DimParam(String),
}
