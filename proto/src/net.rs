//! `NetParameter` and its layers, in all three of Caffe's formats, keeping
//! every field blobflow does not model.
//!
//! A model file is read into an ordered list of fields per message. Layer
//! blobs are decoded into [`BlobProto`]s; every other field (layer
//! parameters, fork extensions such as field 202 of SSD models) is kept as
//! its exact bytes and written back unchanged, in its original place, so a
//! file rewritten after changing some blobs keeps every other byte.
//!
//! | format | layer field | name | type | blobs |
//! |---|---|---|---|---|
//! | new | `layer` 100 | 1 | 2 (string) | 7 |
//! | V1 | `layers` 2 | 4 | 5 (enum) | 6 |
//! | V0 (inside V1's `layer` 1) | — | 1 | 2 (string) | 50 |

use bytes::Buf;
use prost::Message;
use prost::encoding::{
    DecodeContext, WireType, decode_key, decode_varint, encode_key, encode_varint,
    encoded_len_varint, key_len, skip_field,
};

use crate::blob::BlobProto;
use crate::error::{ProtoError, check_writable, decode_at};
use crate::limits::{ReadLimits, over_limit, within_limit};

/// Counts a net's layers and other fields before any is decoded: a
/// million 3-byte layers would otherwise take 15 MB (a hundred thousand
/// of them decoded) before the limit refused the next. Bytes the count
/// cannot walk are left to the decoder, whose error says more.
///
/// The fields inside each layer (its blobs, bottoms, tops, parameters)
/// and inside each blob count too, against one budget for the whole file
/// in proportion to its bytes: an empty blob takes 2 bytes in the file
/// and about 180 in memory, and a 20 MB file of 10 million of them once
/// took 1.8 GB to decode.
fn refuse_over_limits(at: &str, bytes: &[u8]) -> Result<(), ProtoError> {
    let limits = ReadLimits::current();
    let budget = item_budget(bytes.len());
    let (mut layers, mut others, mut items) = (0usize, 0usize, 0usize);
    let mut buf = bytes;
    while let Ok((tag, wt)) = decode_key(&mut buf) {
        if wt == WireType::LengthDelimited && (tag == NEW_LAYER_TAG || tag == V1_LAYER_TAG) {
            let field = if tag == NEW_LAYER_TAG {
                "layer"
            } else {
                "layers"
            };
            if layers >= limits.layers {
                let at = format!("{at}.{field}[{layers}]");
                return within_limit(&at, "layers", layers, limits.layers);
            }
            layers += 1;
            let mut body = buf;
            if let Ok(len) = prost::encoding::decode_varint(&mut body)
                && let Some(layer) = usize::try_from(len).ok().and_then(|n| body.get(..n))
            {
                items += count_items(layer, 1);
            }
        } else {
            within_limit(at, "fields besides its layers", others, limits.fields)?;
            others += 1;
        }
        items += 1;
        if items > budget {
            return Err(ProtoError::Invalid {
                at: at.into(),
                detail: over_limit(
                    budget,
                    &format!(
                        "fields, layers and blobs in all for a file of {} bytes",
                        bytes.len()
                    ),
                ),
            });
        }
        if skip_field(wt, tag, &mut buf, DecodeContext::default()).is_err() || buf.is_empty() {
            break;
        }
    }
    Ok(())
}

/// The most fields, layers and blobs a binary net of `bytes` bytes may
/// hold in all: the text reader's count ([`ReadLimits::text_fields`]),
/// which a prototxt of that many takes, plus one for every 64 bytes, so
/// that what a file decodes into stays within a few times its size.
fn item_budget(bytes: usize) -> usize {
    ReadLimits::current().text_fields.saturating_add(bytes / 64)
}

/// The fields of a message's bytes, and of the messages in them down to
/// `depth` levels (a layer's blobs, a V1 layer's nested V0 layer); a
/// string or a packed array is one. Bytes that do not walk end the count.
fn count_items(bytes: &[u8], depth: usize) -> usize {
    let mut count = 0;
    let mut buf = bytes;
    while let Ok((tag, wt)) = decode_key(&mut buf) {
        count += 1;
        if depth > 0 && wt == WireType::LengthDelimited {
            let mut body = buf;
            if let Ok(len) = prost::encoding::decode_varint(&mut body)
                && let Some(inner) = usize::try_from(len).ok().and_then(|n| body.get(..n))
                && looks_like_message(inner)
            {
                count += count_items(inner, depth - 1);
            }
        }
        if skip_field(wt, tag, &mut buf, DecodeContext::default()).is_err() || buf.is_empty() {
            break;
        }
    }
    count
}

/// Whether `bytes` walk as a message to their end (a string or packed
/// array mostly does not; one that does only makes the count larger).
fn looks_like_message(bytes: &[u8]) -> bool {
    let mut buf = bytes;
    while !buf.is_empty() {
        let Ok((tag, wt)) = decode_key(&mut buf) else {
            return false;
        };
        if skip_field(wt, tag, &mut buf, DecodeContext::default()).is_err() {
            return false;
        }
    }
    true
}

/// Which of Caffe's layer formats a layer is stored in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayerFormat {
    /// `LayerParameter` in `NetParameter.layer` (field 100).
    New,
    /// `V1LayerParameter` in `NetParameter.layers` (field 2).
    V1,
    /// `V0LayerParameter`, nested in a V1 layer's `layer` (field 1).
    V0,
}

struct Tags {
    name: u32,
    kind: u32,
    kind_is_enum: bool,
    blobs: u32,
    nested_v0: Option<u32>,
}

impl LayerFormat {
    fn tags(self) -> Tags {
        match self {
            Self::New => Tags {
                name: 1,
                kind: 2,
                kind_is_enum: false,
                blobs: 7,
                nested_v0: None,
            },
            Self::V1 => Tags {
                name: 4,
                kind: 5,
                kind_is_enum: true,
                blobs: 6,
                nested_v0: Some(1),
            },
            Self::V0 => Tags {
                name: 1,
                kind: 2,
                kind_is_enum: false,
                blobs: 50,
                nested_v0: None,
            },
        }
    }
}

/// The names of `V1LayerParameter.LayerType`, by value.
///
/// ```
/// assert_eq!(blob_proto::v1_layer_type_name(4), Some("CONVOLUTION"));
/// assert_eq!(blob_proto::v1_layer_type_name(99), None);
/// ```
pub fn v1_layer_type_name(value: i32) -> Option<&'static str> {
    Some(match value {
        0 => "NONE",
        1 => "ACCURACY",
        2 => "BNLL",
        3 => "CONCAT",
        4 => "CONVOLUTION",
        5 => "DATA",
        6 => "DROPOUT",
        7 => "EUCLIDEAN_LOSS",
        8 => "FLATTEN",
        9 => "HDF5_DATA",
        10 => "HDF5_OUTPUT",
        11 => "IM2COL",
        12 => "IMAGE_DATA",
        13 => "INFOGAIN_LOSS",
        14 => "INNER_PRODUCT",
        15 => "LRN",
        16 => "MULTINOMIAL_LOGISTIC_LOSS",
        17 => "POOLING",
        18 => "RELU",
        19 => "SIGMOID",
        20 => "SOFTMAX",
        21 => "SOFTMAX_LOSS",
        22 => "SPLIT",
        23 => "TANH",
        24 => "WINDOW_DATA",
        25 => "ELTWISE",
        26 => "POWER",
        27 => "SIGMOID_CROSS_ENTROPY_LOSS",
        28 => "HINGE_LOSS",
        29 => "MEMORY_DATA",
        30 => "ARGMAX",
        31 => "THRESHOLD",
        32 => "DUMMY_DATA",
        33 => "SLICE",
        34 => "MVN",
        35 => "ABSVAL",
        36 => "SILENCE",
        37 => "CONTRASTIVE_LOSS",
        38 => "EXP",
        39 => "DECONVOLUTION",
        _ => return None,
    })
}

#[derive(Clone, Debug, PartialEq)]
enum LayerField {
    /// A field kept as its exact bytes (key included).
    Raw(Vec<u8>),
    /// Where the blobs were; all of them are written here.
    Blobs,
    /// The nested V0 layer of a V1 layer.
    NestedV0,
}

/// One layer of a net file: its name, type and blobs, plus every other
/// field kept byte for byte (Caffe `LayerParameter`, `V1LayerParameter`, or
/// a V1 layer wrapping a `V0LayerParameter`).
///
/// ```
/// use blob_proto::{BlobProto, LayerParameter, NetParameter};
/// let mut net = NetParameter::new("tiny");
/// net.push_layer(LayerParameter::new("ip", "InnerProduct", vec![BlobProto::default()]));
/// let bytes = net.encode_to_vec().unwrap();
/// let back = NetParameter::decode(&bytes).unwrap();
/// assert_eq!(back.layers()[0].name(), "ip");
/// assert_eq!(back.layers()[0].type_name(), "InnerProduct");
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct LayerParameter {
    format: LayerFormat,
    name: Option<String>,
    type_name: Option<String>,
    blobs: Vec<BlobProto>,
    nested: Option<Box<LayerParameter>>,
    fields: Vec<LayerField>,
}

impl LayerParameter {
    /// A new-format layer with a name, a type and blobs.
    ///
    /// ```
    /// let l = blob_proto::LayerParameter::new("conv1", "Convolution", vec![]);
    /// assert_eq!(l.format(), blob_proto::LayerFormat::New);
    /// ```
    pub fn new(name: &str, type_name: &str, blobs: Vec<BlobProto>) -> Self {
        let mut raw_name = Vec::new();
        prost::encoding::string::encode(1, &name.to_string(), &mut raw_name);
        let mut raw_type = Vec::new();
        prost::encoding::string::encode(2, &type_name.to_string(), &mut raw_type);
        Self {
            format: LayerFormat::New,
            name: Some(name.into()),
            type_name: Some(type_name.into()),
            blobs,
            nested: None,
            fields: vec![
                LayerField::Raw(raw_name),
                LayerField::Raw(raw_type),
                LayerField::Blobs,
            ],
        }
    }

    /// The format the layer is stored in.
    ///
    /// ```
    /// # let l = blob_proto::LayerParameter::new("a", "ReLU", vec![]);
    /// assert_eq!(l.format(), blob_proto::LayerFormat::New);
    /// ```
    pub fn format(&self) -> LayerFormat {
        self.format
    }

    /// The layer's name (`""` when absent); for a V1 layer wrapping a V0
    /// layer, the inner name if the outer has none.
    ///
    /// ```
    /// # let l = blob_proto::LayerParameter::new("a", "ReLU", vec![]);
    /// assert_eq!(l.name(), "a");
    /// ```
    pub fn name(&self) -> &str {
        self.name
            .as_deref()
            .or_else(|| self.nested.as_ref().map(|n| n.name()))
            .unwrap_or("")
    }

    /// The layer's type: the string of a new or V0 layer, the enum name of
    /// a V1 layer (`"CONVOLUTION"`), or `"UNKNOWN(n)"` for an enum value
    /// Caffe does not define.
    ///
    /// ```
    /// # let l = blob_proto::LayerParameter::new("a", "ReLU", vec![]);
    /// assert_eq!(l.type_name(), "ReLU");
    /// ```
    pub fn type_name(&self) -> &str {
        self.type_name
            .as_deref()
            .or_else(|| self.nested.as_ref().map(|n| n.type_name()))
            .unwrap_or("")
    }

    fn holds_blobs_itself(&self) -> bool {
        match &self.nested {
            Some(n) => {
                self.fields.contains(&LayerField::Blobs) || !n.fields.contains(&LayerField::Blobs)
            }
            None => true,
        }
    }

    /// The layer's blobs (weights, bias, ...), in file order.
    ///
    /// ```
    /// # let l = blob_proto::LayerParameter::new("a", "ReLU", vec![]);
    /// assert!(l.blobs().is_empty());
    /// ```
    pub fn blobs(&self) -> &[BlobProto] {
        match &self.nested {
            Some(n) if !self.holds_blobs_itself() => n.blobs(),
            _ => &self.blobs,
        }
    }

    /// The layer's blobs, to change or replace; written back where they
    /// were read from.
    ///
    /// ```
    /// let mut l = blob_proto::LayerParameter::new("ip", "InnerProduct", vec![]);
    /// l.blobs_mut().push(Default::default());
    /// assert_eq!(l.blobs().len(), 1);
    /// ```
    pub fn blobs_mut(&mut self) -> &mut Vec<BlobProto> {
        if self.holds_blobs_itself() {
            &mut self.blobs
        } else {
            self.nested
                .as_mut()
                .expect("checked by holds_blobs_itself")
                .blobs_mut()
        }
    }

    fn decode(
        bytes: &[u8],
        format: LayerFormat,
        at: &str,
        ctx: DecodeContext,
    ) -> Result<Self, ProtoError> {
        let tags = format.tags();
        let mut layer = Self {
            format,
            name: None,
            type_name: None,
            blobs: Vec::new(),
            nested: None,
            fields: Vec::new(),
        };
        let mut buf = bytes;
        while buf.has_remaining() {
            let start = bytes.len() - buf.len();
            within_limit(
                at,
                "fields and blobs",
                layer.fields.len() + layer.blobs.len(),
                ReadLimits::current().fields,
            )?;
            let (tag, wt) = decode_key(&mut buf).map_err(decode_at(at))?;
            if wt == WireType::LengthDelimited && (tag == tags.blobs || Some(tag) == tags.nested_v0)
            {
                let body = length_delimited(&mut buf).map_err(decode_at(format!(
                    "{at} \"{}\"",
                    layer.name.as_deref().unwrap_or("")
                )))?;
                if tag == tags.blobs {
                    let where_ = format!("{at}.blobs[{}]", layer.blobs.len());
                    let blob = BlobProto::decode(body).map_err(decode_at(where_))?;
                    if !layer.fields.contains(&LayerField::Blobs) {
                        layer.fields.push(LayerField::Blobs);
                    }
                    layer.blobs.push(blob);
                } else {
                    let inner = ctx.clone();
                    let nested =
                        Self::decode(body, LayerFormat::V0, &format!("{at}.layer"), inner)?;
                    layer.nested = Some(Box::new(nested));
                    layer.fields.push(LayerField::NestedV0);
                }
                continue;
            }
            skip_field(wt, tag, &mut buf, ctx.clone()).map_err(decode_at(at))?;
            let raw = &bytes[start..bytes.len() - buf.len()];
            if tag == tags.name || (tag == tags.kind && !tags.kind_is_enum) {
                let text = string_value(raw, wt, at)?;
                if tag == tags.name {
                    layer.name = Some(text);
                } else {
                    layer.type_name = Some(text);
                }
            } else if tag == tags.kind && wt == WireType::Varint {
                let mut v = &raw[key_len(tag)..];
                let value = decode_varint(&mut v).map_err(decode_at(at))? as i32;
                layer.type_name = Some(match v1_layer_type_name(value) {
                    Some(n) => n.to_string(),
                    None => format!("UNKNOWN({value})"),
                });
            }
            layer.fields.push(LayerField::Raw(raw.to_vec()));
        }
        Ok(layer)
    }

    fn body_len(&self) -> usize {
        let tags = self.format.tags();
        let blobs_len: usize = self
            .blobs
            .iter()
            .map(|b| prost::encoding::message::encoded_len(tags.blobs, b))
            .sum();
        let mut len = 0;
        let mut wrote_blobs = false;
        for f in &self.fields {
            len += match f {
                LayerField::Raw(r) => r.len(),
                LayerField::Blobs if !wrote_blobs => {
                    wrote_blobs = true;
                    blobs_len
                }
                LayerField::Blobs => 0,
                LayerField::NestedV0 => {
                    let n = self.nested.as_ref().map_or(0, |n| n.body_len());
                    key_len(1) + encoded_len_varint(n as u64) + n
                }
            };
        }
        if !wrote_blobs {
            len += blobs_len;
        }
        len
    }

    fn encode_body(&self, out: &mut Vec<u8>) {
        let tags = self.format.tags();
        let put_blobs = |out: &mut Vec<u8>| {
            for b in &self.blobs {
                prost::encoding::message::encode(tags.blobs, b, out);
            }
        };
        let mut wrote_blobs = false;
        for f in &self.fields {
            match f {
                LayerField::Raw(r) => out.extend_from_slice(r),
                LayerField::Blobs if !wrote_blobs => {
                    wrote_blobs = true;
                    put_blobs(out);
                }
                LayerField::Blobs => {}
                LayerField::NestedV0 => {
                    if let Some(n) = &self.nested {
                        encode_key(1, WireType::LengthDelimited, out);
                        encode_varint(n.body_len() as u64, out);
                        n.encode_body(out);
                    }
                }
            }
        }
        if !wrote_blobs {
            put_blobs(out);
        }
    }
}

fn length_delimited<'a>(buf: &mut &'a [u8]) -> Result<&'a [u8], prost::DecodeError> {
    let len = decode_varint(buf)?;
    if len > buf.len() as u64 {
        return Err(crate::blob::decode_error(format!(
            "declares {len} bytes but only {} remain (truncated file?)",
            buf.len()
        )));
    }
    let (body, rest) = buf.split_at(len as usize);
    *buf = rest;
    Ok(body)
}

/// The string value of a raw length-delimited field (key included).
fn string_value(raw: &[u8], wt: WireType, at: &str) -> Result<String, ProtoError> {
    if wt != WireType::LengthDelimited {
        return Err(ProtoError::Invalid {
            at: at.into(),
            detail: format!("a string field has wire type {wt:?}"),
        });
    }
    let mut b = raw;
    decode_key(&mut b).map_err(decode_at(at))?;
    let body = length_delimited(&mut b).map_err(decode_at(at))?;
    String::from_utf8(body.to_vec()).map_err(|_| ProtoError::Invalid {
        at: at.into(),
        detail: "a name or type is not valid UTF-8".into(),
    })
}

#[derive(Clone, Debug, PartialEq)]
enum NetField {
    Raw(Vec<u8>),
    Layer(usize),
}

/// Which of Caffe's net formats a file uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NetFormat {
    /// Layers in `layer` (field 100).
    New,
    /// Layers in V1 `layers` (field 2).
    V1,
    /// V1 layers wrapping V0 layers.
    V0,
}

/// Caffe's `NetParameter`, as stored in `.caffemodel` files: the net's name
/// and its layers, every unmodeled field kept byte for byte.
///
/// ```
/// use blob_proto::{BlobProto, LayerParameter, NetParameter};
/// let mut net = NetParameter::new("LeNet");
/// net.push_layer(LayerParameter::new("ip1", "InnerProduct", vec![BlobProto::default()]));
/// let bytes = net.encode_to_vec().unwrap();
/// let mut back = NetParameter::decode(&bytes).unwrap();
/// assert_eq!(back.name(), Some("LeNet"));
/// back.layer_mut("ip1").unwrap().blobs_mut()[0].data = vec![1.0];
/// assert_eq!(back.layer("ip1").unwrap().blobs()[0].data, [1.0]);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct NetParameter {
    name: Option<String>,
    layers: Vec<(u32, LayerParameter)>,
    fields: Vec<NetField>,
}

const NEW_LAYER_TAG: u32 = 100;
const V1_LAYER_TAG: u32 = 2;

impl NetParameter {
    /// An empty net with a name.
    ///
    /// ```
    /// assert_eq!(blob_proto::NetParameter::new("n").layers().len(), 0);
    /// ```
    pub fn new(name: &str) -> Self {
        let mut raw = Vec::new();
        prost::encoding::string::encode(1, &name.to_string(), &mut raw);
        Self {
            name: Some(name.into()),
            layers: Vec::new(),
            fields: vec![NetField::Raw(raw)],
        }
    }

    /// Reads a net from the bytes of a `.caffemodel` (any of the formats).
    ///
    /// ```
    /// assert!(blob_proto::NetParameter::decode(&[0xff]).is_err());
    /// ```
    pub fn decode(bytes: &[u8]) -> Result<Self, ProtoError> {
        let at = "NetParameter";
        refuse_over_limits(at, bytes)?;
        let limits = ReadLimits::current();
        let ctx = DecodeContext::default();
        let mut net = Self {
            name: None,
            layers: Vec::new(),
            fields: Vec::new(),
        };
        let mut buf = bytes;
        while buf.has_remaining() {
            let start = bytes.len() - buf.len();
            let (tag, wt) = decode_key(&mut buf).map_err(decode_at(at))?;
            if wt == WireType::LengthDelimited && (tag == NEW_LAYER_TAG || tag == V1_LAYER_TAG) {
                let (format, field) = if tag == NEW_LAYER_TAG {
                    (LayerFormat::New, "layer")
                } else {
                    (LayerFormat::V1, "layers")
                };
                let where_ = format!("{at}.{field}[{}]", net.layers.len());
                within_limit(&where_, "layers", net.layers.len(), limits.layers)?;
                let body = length_delimited(&mut buf).map_err(decode_at(where_.clone()))?;
                let layer = LayerParameter::decode(body, format, &where_, ctx.clone())?;
                net.fields.push(NetField::Layer(net.layers.len()));
                net.layers.push((tag, layer));
                continue;
            }
            within_limit(
                at,
                "fields besides its layers",
                net.fields.len() - net.layers.len(),
                limits.fields,
            )?;
            skip_field(wt, tag, &mut buf, ctx.clone()).map_err(decode_at(at))?;
            let raw = &bytes[start..bytes.len() - buf.len()];
            if tag == 1 {
                net.name = Some(string_value(raw, wt, at)?);
            }
            net.fields.push(NetField::Raw(raw.to_vec()));
        }
        Ok(net)
    }

    /// The net's name (field 1).
    ///
    /// ```
    /// assert_eq!(blob_proto::NetParameter::new("a").name(), Some("a"));
    /// ```
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// The format of the layers: new, V1, or V0 inside V1.
    ///
    /// ```
    /// assert_eq!(blob_proto::NetParameter::new("a").format(), blob_proto::NetFormat::New);
    /// ```
    pub fn format(&self) -> NetFormat {
        let v1 = self.layers.iter().filter(|(t, _)| *t == V1_LAYER_TAG);
        let mut any_v1 = false;
        for (_, l) in v1 {
            any_v1 = true;
            if l.nested.is_some() {
                return NetFormat::V0;
            }
        }
        if any_v1 && !self.layers.iter().any(|(t, _)| *t == NEW_LAYER_TAG) {
            NetFormat::V1
        } else {
            NetFormat::New
        }
    }

    /// The layers in file order.
    ///
    /// ```
    /// assert!(blob_proto::NetParameter::new("a").layers().is_empty());
    /// ```
    pub fn layers(&self) -> Vec<&LayerParameter> {
        self.layers.iter().map(|(_, l)| l).collect()
    }

    /// Iterates the layers in file order.
    ///
    /// ```
    /// assert_eq!(blob_proto::NetParameter::new("a").iter_layers().count(), 0);
    /// ```
    pub fn iter_layers(&self) -> impl Iterator<Item = &LayerParameter> {
        self.layers.iter().map(|(_, l)| l)
    }

    /// Iterates the layers mutably, in file order.
    ///
    /// ```
    /// let mut n = blob_proto::NetParameter::new("a");
    /// assert_eq!(n.iter_layers_mut().count(), 0);
    /// ```
    pub fn iter_layers_mut(&mut self) -> impl Iterator<Item = &mut LayerParameter> {
        self.layers.iter_mut().map(|(_, l)| l)
    }

    /// The first layer named `name`.
    ///
    /// ```
    /// assert!(blob_proto::NetParameter::new("a").layer("conv1").is_none());
    /// ```
    pub fn layer(&self, name: &str) -> Option<&LayerParameter> {
        self.iter_layers().find(|l| l.name() == name)
    }

    /// The first layer named `name`, mutably.
    ///
    /// ```
    /// assert!(blob_proto::NetParameter::new("a").layer_mut("conv1").is_none());
    /// ```
    pub fn layer_mut(&mut self, name: &str) -> Option<&mut LayerParameter> {
        self.iter_layers_mut().find(|l| l.name() == name)
    }

    /// Appends a layer (written as `layer` 100, or `layers` 2 for V1).
    ///
    /// ```
    /// let mut n = blob_proto::NetParameter::new("a");
    /// n.push_layer(blob_proto::LayerParameter::new("r", "ReLU", vec![]));
    /// assert_eq!(n.layers().len(), 1);
    /// ```
    pub fn push_layer(&mut self, layer: LayerParameter) {
        let tag = match layer.format {
            LayerFormat::New => NEW_LAYER_TAG,
            LayerFormat::V1 | LayerFormat::V0 => V1_LAYER_TAG,
        };
        self.fields.push(NetField::Layer(self.layers.len()));
        self.layers.push((tag, layer));
    }

    /// The encoded size in bytes.
    ///
    /// ```
    /// assert_eq!(blob_proto::NetParameter::new("a").encoded_len(), 3);
    /// ```
    pub fn encoded_len(&self) -> usize {
        self.fields
            .iter()
            .map(|f| match f {
                NetField::Raw(r) => r.len(),
                NetField::Layer(i) => {
                    let (tag, l) = &self.layers[*i];
                    let n = l.body_len();
                    key_len(*tag) + encoded_len_varint(n as u64) + n
                }
            })
            .sum()
    }

    /// Writes the net; unchanged parts come out byte for byte as read.
    /// Refuses a net over 2 GiB - 1 bytes, which Caffe could not read.
    ///
    /// ```
    /// let bytes = blob_proto::NetParameter::new("a").encode_to_vec().unwrap();
    /// assert_eq!(bytes, [0x0a, 0x01, b'a']);
    /// ```
    pub fn encode_to_vec(&self) -> Result<Vec<u8>, ProtoError> {
        let len = self.encoded_len();
        check_writable("NetParameter", len)?;
        let mut out = Vec::with_capacity(len);
        for f in &self.fields {
            match f {
                NetField::Raw(r) => out.extend_from_slice(r),
                NetField::Layer(i) => {
                    let (tag, l) = &self.layers[*i];
                    encode_key(*tag, WireType::LengthDelimited, &mut out);
                    encode_varint(l.body_len() as u64, &mut out);
                    l.encode_body(&mut out);
                }
            }
        }
        debug_assert_eq!(out.len(), len);
        Ok(out)
    }
}
