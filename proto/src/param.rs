//! A message of `caffe.proto` read by its [schema](crate::schema): from a
//! `.prototxt` (every field name, value and repetition checked, errors
//! naming the line) or from a file's bytes (fields the schema does not
//! know kept as they were), answering by field name with Caffe's
//! defaults, and written back as bytes Caffe reads.

use bytes::Buf;
use prost::encoding::{WireType, decode_key, decode_varint, encode_key, encode_varint};

use crate::ProtoError;
use crate::error::decode_at;
use crate::excerpt;
use crate::schema::{FieldDefault, FieldKind, FieldSchema, Label, MessageSchema};
use crate::text::{TextField, TextMessage, TextValue};

/// Messages nested deeper than this are refused (Caffe's reader stops at
/// 100).
const MAX_DEPTH: usize = 100;

/// One value of a [`ParamMessage`] field.
#[derive(Clone, Debug, PartialEq)]
pub enum ParamValue {
    /// A signed integer (`int32`, `int64`).
    Int(i64),
    /// An unsigned integer (`uint32`, `uint64`).
    UInt(u64),
    /// A `float` or `double`.
    Float(f64),
    /// A `bool`.
    Bool(bool),
    /// A `string`.
    Str(String),
    /// `bytes`.
    Bytes(Vec<u8>),
    /// An enum's number.
    Enum(i32),
    /// A nested message.
    Message(ParamMessage),
}

/// One field of a [`ParamMessage`]: the schema's entry and a value; a
/// repeated field is one `ParamField` per value.
#[derive(Clone, Debug, PartialEq)]
pub struct ParamField {
    /// The field as `caffe.proto` declares it.
    pub schema: &'static FieldSchema,
    /// Its value.
    pub value: ParamValue,
    /// The line of a `.prototxt` it was read from (0: from bytes).
    pub line: usize,
}

/// A field the schema does not know, kept as its bytes (key included)
/// and written back unchanged.
#[derive(Clone, Debug, PartialEq)]
pub struct UnknownField {
    /// Its field number.
    pub number: u32,
    /// Its exact bytes, key included.
    pub raw: Vec<u8>,
}

/// A message of `caffe.proto` (a `LayerParameter`, a
/// `ConvolutionParameter`, ...), its fields in the order read.
///
/// ```
/// use blob_proto::{ParamMessage, TextMessage, schema};
/// let text = TextMessage::parse("name: \"conv1\" type: \"Convolution\"\nconvolution_param { num_output: 20 kernel_size: 5 }")?;
/// let layer = ParamMessage::from_text(&schema::LAYER_PARAMETER, &text)?;
/// let conv = layer.message("convolution_param").unwrap();
/// assert_eq!(conv.uint("num_output"), 20);
/// assert_eq!(conv.uints("kernel_size"), [5]);
/// assert!(conv.boolean("bias_term")); // caffe.proto's default
/// let back = ParamMessage::decode(&schema::LAYER_PARAMETER, &layer.encode_to_vec())?;
/// assert_eq!(back.string("name"), "conv1");
///
/// let bad = TextMessage::parse("nmae: \"conv1\"")?;
/// let err = ParamMessage::from_text(&schema::LAYER_PARAMETER, &bad).unwrap_err();
/// assert_eq!(err.to_string(), "line 1, column 1: LayerParameter has no field named nmae");
/// # Ok::<(), blob_proto::ProtoError>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct ParamMessage {
    schema: &'static MessageSchema,
    fields: Vec<ParamField>,
    unknown: Vec<UnknownField>,
}

impl ParamMessage {
    /// An empty message of that type (every field at its default).
    ///
    /// ```
    /// let m = blob_proto::ParamMessage::new(&blob_proto::schema::POOLING);
    /// assert_eq!(m.uint("stride"), 1);
    /// ```
    pub fn new(schema: &'static MessageSchema) -> Self {
        Self {
            schema,
            fields: Vec::new(),
            unknown: Vec::new(),
        }
    }

    /// The message's schema.
    pub fn schema(&self) -> &'static MessageSchema {
        self.schema
    }

    /// The fields, in the order read.
    pub fn fields(&self) -> &[ParamField] {
        &self.fields
    }

    /// The fields the schema does not know (read from bytes only).
    pub fn unknown_fields(&self) -> &[UnknownField] {
        &self.unknown
    }

    /// Reads a text-format message against its schema: an unknown field
    /// name, a value of the wrong type, an enum name the enum lacks, or a
    /// non-repeated field given twice is an error naming its line.
    pub fn from_text(
        schema: &'static MessageSchema,
        text: &TextMessage,
    ) -> Result<Self, ProtoError> {
        Self::from_text_at(schema, text, 0)
    }

    fn from_text_at(
        schema: &'static MessageSchema,
        text: &TextMessage,
        depth: usize,
    ) -> Result<Self, ProtoError> {
        let mut out = Self::new(schema);
        for field in &text.fields {
            let Some(fs) = schema.field(&field.name) else {
                return Err(field.error(format!(
                    "{} has no field named {}",
                    schema.name,
                    excerpt(&field.name)
                )));
            };
            if fs.label == Label::Optional && out.has(fs.name) {
                return Err(field.error(format!(
                    "{}.{} is not repeated but is given more than once",
                    schema.name, fs.name
                )));
            }
            let value = text_value(fs, field, depth)?;
            out.fields.push(ParamField {
                schema: fs,
                value,
                line: field.line,
            });
        }
        Ok(out)
    }

    /// Reads a message from its bytes; fields the schema does not know are
    /// kept as they are.
    pub fn decode(schema: &'static MessageSchema, bytes: &[u8]) -> Result<Self, ProtoError> {
        Self::decode_at(schema, bytes, 0)
    }

    fn decode_at(
        schema: &'static MessageSchema,
        bytes: &[u8],
        depth: usize,
    ) -> Result<Self, ProtoError> {
        if depth > MAX_DEPTH {
            return Err(ProtoError::Invalid {
                at: schema.name.into(),
                detail: format!("messages nested deeper than {MAX_DEPTH}"),
            });
        }
        let mut out = Self::new(schema);
        let at = schema.name;
        let mut buf = bytes;
        while buf.has_remaining() {
            let start = bytes.len() - buf.len();
            let (number, wire) = decode_key(&mut buf).map_err(decode_at(at))?;
            let fs = schema.field_by_number(number);
            match fs {
                Some(fs) if wire_fits(fs.kind, wire) => {
                    read_wire(fs, wire, &mut buf, &mut out.fields, depth)?;
                }
                Some(fs) if wire == WireType::LengthDelimited && packable(fs) => {
                    let mut body = length_delimited(&mut buf).map_err(decode_at(at))?;
                    let inner = packed_wire(fs.kind);
                    while body.has_remaining() {
                        read_wire(fs, inner, &mut body, &mut out.fields, depth)?;
                    }
                }
                _ => {
                    prost::encoding::skip_field(
                        wire,
                        number,
                        &mut buf,
                        prost::encoding::DecodeContext::default(),
                    )
                    .map_err(decode_at(at))?;
                    out.unknown.push(UnknownField {
                        number,
                        raw: bytes[start..bytes.len() - buf.len()].to_vec(),
                    });
                }
            }
        }
        Ok(out)
    }

    /// The message's bytes as protobuf's C++ writes them (what Caffe's
    /// files hold): known fields in the order of their numbers (a
    /// repeated field's values in theirs, the fields `caffe.proto` marks
    /// `packed` packed), then the unknown ones as they were read.
    pub fn encode_to_vec(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode(&mut out);
        out
    }

    fn encode(&self, out: &mut Vec<u8>) {
        let mut fields: Vec<&ParamField> = self.fields.iter().collect();
        fields.sort_by_key(|f| f.schema.number);
        let mut at = 0;
        while at < fields.len() {
            let schema = fields[at].schema;
            let run = fields[at..]
                .iter()
                .take_while(|f| std::ptr::eq(f.schema, schema))
                .count();
            if packed(self.schema, schema) {
                let mut values = Vec::new();
                for f in &fields[at..at + run] {
                    encode_packed_value(&f.value, schema.kind, &mut values);
                }
                delimited(schema.number, &values, out);
            } else {
                for f in &fields[at..at + run] {
                    encode_value(schema.number, &f.value, schema.kind, out);
                }
            }
            at += run;
        }
        for u in &self.unknown {
            out.extend_from_slice(&u.raw);
        }
    }

    fn schema_field(&self, name: &str) -> &'static FieldSchema {
        self.schema.field(name).unwrap_or_else(|| {
            panic!(
                "{} has no field named {name} (a typo in blobflow's code)",
                self.schema.name
            )
        })
    }

    /// The values of a field, in order (one for an optional field given
    /// once).
    pub fn values<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a ParamValue> + 'a {
        let fs = self.schema_field(name);
        self.fields
            .iter()
            .filter(move |f| std::ptr::eq(f.schema, fs))
            .map(|f| &f.value)
    }

    /// The field, where given (the last value, as protobuf merges).
    pub fn field(&self, name: &str) -> Option<&ParamField> {
        let fs = self.schema_field(name);
        self.fields
            .iter()
            .rev()
            .find(|f| std::ptr::eq(f.schema, fs))
    }

    /// Whether the field is given.
    ///
    /// ```
    /// let m = blob_proto::ParamMessage::new(&blob_proto::schema::PARAM_SPEC);
    /// assert!(!m.has("lr_mult"));
    /// ```
    pub fn has(&self, name: &str) -> bool {
        self.field(name).is_some()
    }

    /// The field's value where the message's schema has the field and
    /// it is given; `None` otherwise, without the panic the other
    /// accessors give for a name the schema lacks. For a field only an
    /// [extension](crate::Schemas) declares, in a message that may have
    /// been read without it.
    ///
    /// ```
    /// let m = blob_proto::ParamMessage::new(&blob_proto::schema::POOLING);
    /// assert_eq!(m.get("ceil_mode"), None);
    /// ```
    pub fn get(&self, name: &str) -> Option<&ParamValue> {
        let fs = self.schema.field(name)?;
        self.fields
            .iter()
            .rev()
            .find(|f| std::ptr::eq(f.schema, fs))
            .map(|f| &f.value)
    }

    fn last(&self, name: &str) -> Option<&ParamValue> {
        self.field(name).map(|f| &f.value)
    }

    fn default_of(&self, name: &str) -> FieldDefault {
        self.schema_field(name).default
    }

    /// A signed integer field (int32, int64, enum), or its default.
    pub fn int(&self, name: &str) -> i64 {
        match self.last(name) {
            Some(v) => as_int(v),
            None => match self.default_of(name) {
                FieldDefault::Int(i) => i,
                _ => 0,
            },
        }
    }

    /// An unsigned integer field, or its default.
    pub fn uint(&self, name: &str) -> u64 {
        self.int(name).max(0) as u64
    }

    /// A float or double field, or its default.
    pub fn float(&self, name: &str) -> f64 {
        match self.last(name) {
            Some(ParamValue::Float(f)) => *f,
            Some(v) => as_int(v) as f64,
            None => match self.default_of(name) {
                FieldDefault::Float(f) => f,
                FieldDefault::Int(i) => i as f64,
                _ => 0.0,
            },
        }
    }

    /// A bool field, or its default.
    pub fn boolean(&self, name: &str) -> bool {
        match self.last(name) {
            Some(ParamValue::Bool(b)) => *b,
            Some(v) => as_int(v) != 0,
            None => matches!(self.default_of(name), FieldDefault::Bool(true)),
        }
    }

    /// A string field, or its default.
    pub fn string(&self, name: &str) -> &str {
        match self.last(name) {
            Some(ParamValue::Str(s)) => s,
            _ => match self.default_of(name) {
                FieldDefault::Str(s) => s,
                _ => "",
            },
        }
    }

    /// An enum field's value name, or its default's (`"?"` for a number
    /// the enum lacks).
    ///
    /// ```
    /// let m = blob_proto::ParamMessage::new(&blob_proto::schema::POOLING);
    /// assert_eq!(m.enum_name("pool"), "MAX");
    /// ```
    pub fn enum_name(&self, name: &str) -> &'static str {
        let FieldKind::Enum(e) = self.schema_field(name).kind else {
            return "?";
        };
        e.name_of(self.int(name) as i32).unwrap_or("?")
    }

    /// A nested message field, where given.
    pub fn message(&self, name: &str) -> Option<&ParamMessage> {
        match self.last(name) {
            Some(ParamValue::Message(m)) => Some(m),
            _ => None,
        }
    }

    /// Every value of a repeated message field.
    pub fn messages<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a ParamMessage> + 'a {
        self.values(name).filter_map(|v| match v {
            ParamValue::Message(m) => Some(m),
            _ => None,
        })
    }

    /// Every value of a repeated string field.
    pub fn strings<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.values(name).filter_map(|v| match v {
            ParamValue::Str(s) => Some(s.as_str()),
            _ => None,
        })
    }

    /// Every value of a repeated integer field.
    pub fn ints(&self, name: &str) -> Vec<i64> {
        self.values(name).map(as_int).collect()
    }

    /// Every value of a repeated unsigned field.
    pub fn uints(&self, name: &str) -> Vec<u64> {
        self.values(name).map(|v| as_int(v).max(0) as u64).collect()
    }

    /// Every value of a repeated float field.
    pub fn floats(&self, name: &str) -> Vec<f64> {
        self.values(name)
            .map(|v| match v {
                ParamValue::Float(f) => *f,
                other => as_int(other) as f64,
            })
            .collect()
    }

    /// Every value of a repeated bool field.
    pub fn bools(&self, name: &str) -> Vec<bool> {
        self.values(name)
            .map(|v| match v {
                ParamValue::Bool(b) => *b,
                other => as_int(other) != 0,
            })
            .collect()
    }

    /// Appends a value to a field (replacing it, for a non-repeated one).
    ///
    /// ```
    /// use blob_proto::{ParamMessage, ParamValue, schema};
    /// let mut spec = ParamMessage::new(&schema::PARAM_SPEC);
    /// spec.set("lr_mult", ParamValue::Float(0.0));
    /// assert_eq!(spec.float("lr_mult"), 0.0);
    /// ```
    pub fn set(&mut self, name: &str, value: ParamValue) {
        let fs = self.schema_field(name);
        if fs.label == Label::Optional {
            self.fields.retain(|f| !std::ptr::eq(f.schema, fs));
        }
        self.fields.push(ParamField {
            schema: fs,
            value,
            line: 0,
        });
    }

    /// Removes every value of a field.
    pub fn clear(&mut self, name: &str) {
        let fs = self.schema_field(name);
        self.fields.retain(|f| !std::ptr::eq(f.schema, fs));
    }

    /// The nested message of a field, made where absent, for editing.
    pub fn message_mut(&mut self, name: &str) -> &mut ParamMessage {
        let fs = self.schema_field(name);
        let FieldKind::Message(inner) = fs.kind else {
            panic!(
                "{}.{name} is not a message (a typo in blobflow's code)",
                self.schema.name
            );
        };
        let at = match self.fields.iter().rposition(|f| std::ptr::eq(f.schema, fs)) {
            Some(at) => at,
            None => {
                self.fields.push(ParamField {
                    schema: fs,
                    value: ParamValue::Message(ParamMessage::new(inner)),
                    line: 0,
                });
                self.fields.len() - 1
            }
        };
        match &mut self.fields[at].value {
            ParamValue::Message(m) => m,
            _ => unreachable!("a message field holds messages"),
        }
    }

    /// The line the field was first given on in a `.prototxt` (0 when
    /// absent or read from bytes).
    pub fn line_of(&self, name: &str) -> usize {
        self.field(name).map_or(0, |f| f.line)
    }
}

fn as_int(v: &ParamValue) -> i64 {
    match v {
        ParamValue::Int(i) => *i,
        ParamValue::UInt(u) => *u as i64,
        ParamValue::Enum(e) => i64::from(*e),
        ParamValue::Bool(b) => i64::from(*b),
        ParamValue::Float(f) => *f as i64,
        _ => 0,
    }
}

fn text_value(
    fs: &'static FieldSchema,
    field: &TextField,
    depth: usize,
) -> Result<ParamValue, ProtoError> {
    let scalar = match (&field.value, fs.kind) {
        (TextValue::Message(m), FieldKind::Message(inner)) => {
            if depth >= MAX_DEPTH {
                return Err(field.error(format!("messages nested deeper than {MAX_DEPTH}")));
            }
            return ParamMessage::from_text_at(inner, m, depth + 1).map(ParamValue::Message);
        }
        (_, FieldKind::Message(inner)) => {
            return Err(field.error(format!(
                "{} is a message ({}): write {} {{ ... }}, not {}",
                fs.name,
                inner.name,
                fs.name,
                excerpt(&field.value.to_string())
            )));
        }
        (TextValue::Message(_), _) => {
            return Err(field.error(format!("{} is a value, not a message", fs.name)));
        }
        (TextValue::Str(s), FieldKind::String) => return Ok(ParamValue::Str(s.clone())),
        (TextValue::Str(s), FieldKind::Bytes) => {
            return Ok(ParamValue::Bytes(s.clone().into_bytes()));
        }
        (TextValue::Str(s), _) => {
            return Err(field.error(format!(
                "{} takes {}, not the string \"{}\"",
                fs.name,
                kind_name(fs.kind),
                excerpt(s)
            )));
        }
        (TextValue::Scalar(s), _) => s.as_str(),
    };
    let bad = || {
        field.error(format!(
            "{} takes {}, not {}",
            fs.name,
            kind_name(fs.kind),
            excerpt(scalar)
        ))
    };
    Ok(match fs.kind {
        FieldKind::Int32 => ParamValue::Int(
            parse_int(scalar)
                .filter(|v| i32::try_from(*v).is_ok())
                .ok_or_else(bad)?,
        ),
        FieldKind::Int64 => ParamValue::Int(parse_int(scalar).ok_or_else(bad)?),
        FieldKind::UInt32 => ParamValue::UInt(
            parse_int(scalar)
                .and_then(|v| u32::try_from(v).ok())
                .ok_or_else(bad)?
                .into(),
        ),
        FieldKind::UInt64 => ParamValue::UInt(
            parse_int(scalar)
                .and_then(|v| u64::try_from(v).ok())
                .ok_or_else(bad)?,
        ),
        FieldKind::Float | FieldKind::Double => {
            ParamValue::Float(parse_float(scalar).ok_or_else(bad)?)
        }
        FieldKind::Bool => ParamValue::Bool(match scalar {
            "true" | "True" | "t" | "1" => true,
            "false" | "False" | "f" | "0" => false,
            _ => return Err(bad()),
        }),
        FieldKind::Enum(e) => match e.value(scalar) {
            Some(v) => ParamValue::Enum(v),
            None => match scalar
                .parse::<i32>()
                .ok()
                .filter(|v| e.name_of(*v).is_some())
            {
                Some(v) => ParamValue::Enum(v),
                None => {
                    let names: Vec<&str> = e.values.iter().map(|(n, _)| *n).collect();
                    return Err(field.error(format!(
                        "{} takes one of {} ({}), not {}",
                        fs.name,
                        names.join(", "),
                        e.name,
                        excerpt(scalar)
                    )));
                }
            },
        },
        FieldKind::String | FieldKind::Bytes | FieldKind::Message(_) => {
            return Err(field.error(format!(
                "{} takes a quoted string, not {}",
                fs.name,
                excerpt(scalar)
            )));
        }
    })
}

fn kind_name(kind: FieldKind) -> &'static str {
    match kind {
        FieldKind::Int32 => "an int32",
        FieldKind::Int64 => "an int64",
        FieldKind::UInt32 => "a uint32",
        FieldKind::UInt64 => "a uint64",
        FieldKind::Float => "a float",
        FieldKind::Double => "a double",
        FieldKind::Bool => "true or false",
        FieldKind::String => "a quoted string",
        FieldKind::Bytes => "quoted bytes",
        FieldKind::Enum(_) => "an enum name",
        FieldKind::Message(_) => "a message",
    }
}

/// A decimal, hex (`0x`) or octal (leading `0`) integer, as protobuf's
/// text format writes them.
fn parse_int(s: &str) -> Option<i64> {
    let (negative, digits) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    let magnitude = if let Some(hex) = digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        i128::from_str_radix(hex, 16).ok()?
    } else if digits.len() > 1 && digits.starts_with('0') {
        i128::from_str_radix(&digits[1..], 8).ok()?
    } else {
        digits.parse::<i128>().ok()?
    };
    let value = if negative { -magnitude } else { magnitude };
    i64::try_from(value).ok()
}

/// A float as protobuf's text format writes one: decimal or exponent
/// form, an optional `f` suffix, `inf`, `infinity`, `nan` (any case).
fn parse_float(s: &str) -> Option<f64> {
    let lower = s.to_ascii_lowercase();
    let (negative, body) = match lower.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, lower.as_str()),
    };
    let magnitude = match body {
        "inf" | "infinity" => f64::INFINITY,
        "nan" => f64::NAN,
        _ => {
            let digits = body.strip_suffix('f').unwrap_or(body);
            if digits.is_empty() || !digits.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
                return None;
            }
            digits.parse::<f64>().ok()?
        }
    };
    Some(if negative { -magnitude } else { magnitude })
}

fn varint(number: u32, value: u64, out: &mut Vec<u8>) {
    encode_key(number, WireType::Varint, out);
    encode_varint(value, out);
}

fn delimited(number: u32, bytes: &[u8], out: &mut Vec<u8>) {
    encode_key(number, WireType::LengthDelimited, out);
    encode_varint(bytes.len() as u64, out);
    out.extend_from_slice(bytes);
}

/// The wire type a single value of `kind` is written with.
fn packed_wire(kind: FieldKind) -> WireType {
    match kind {
        FieldKind::Float => WireType::ThirtyTwoBit,
        FieldKind::Double => WireType::SixtyFourBit,
        FieldKind::String | FieldKind::Bytes | FieldKind::Message(_) => WireType::LengthDelimited,
        _ => WireType::Varint,
    }
}

fn wire_fits(kind: FieldKind, wire: WireType) -> bool {
    packed_wire(kind) == wire
}

/// A repeated scalar, which may come packed.
fn packable(fs: &FieldSchema) -> bool {
    fs.label == Label::Repeated && packed_wire(fs.kind) != WireType::LengthDelimited
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

fn read_wire(
    fs: &'static FieldSchema,
    wire: WireType,
    buf: &mut &[u8],
    fields: &mut Vec<ParamField>,
    depth: usize,
) -> Result<(), ProtoError> {
    let at = || fs.name.to_string();
    let value = match wire {
        WireType::ThirtyTwoBit => {
            if buf.remaining() < 4 {
                return Err(decode_at(at())(crate::blob::decode_error(
                    "a float runs past the end of its message",
                )));
            }
            ParamValue::Float(f64::from(buf.get_f32_le()))
        }
        WireType::SixtyFourBit => {
            if buf.remaining() < 8 {
                return Err(decode_at(at())(crate::blob::decode_error(
                    "a double runs past the end of its message",
                )));
            }
            ParamValue::Float(buf.get_f64_le())
        }
        WireType::Varint => {
            let v = decode_varint(buf).map_err(decode_at(at()))?;
            match fs.kind {
                FieldKind::Int32 => ParamValue::Int(i64::from(v as i32)),
                FieldKind::Int64 => ParamValue::Int(v as i64),
                FieldKind::UInt32 => ParamValue::UInt(u64::from(v as u32)),
                FieldKind::Bool => ParamValue::Bool(v != 0),
                FieldKind::Enum(_) => ParamValue::Enum(v as i32),
                _ => ParamValue::UInt(v),
            }
        }
        _ => {
            let body = length_delimited(buf).map_err(decode_at(at()))?;
            match fs.kind {
                FieldKind::Message(inner) => {
                    let m =
                        ParamMessage::decode_at(inner, body, depth + 1).map_err(|e| match e {
                            ProtoError::Decode {
                                at: inner_at,
                                source,
                            } => ProtoError::Decode {
                                at: format!("{}.{inner_at}", fs.name),
                                source,
                            },
                            other => other,
                        })?;
                    ParamValue::Message(m)
                }
                FieldKind::String => {
                    ParamValue::Str(String::from_utf8(body.to_vec()).map_err(|_| {
                        ProtoError::Invalid {
                            at: at(),
                            detail: "a string is not valid UTF-8".into(),
                        }
                    })?)
                }
                _ => ParamValue::Bytes(body.to_vec()),
            }
        }
    };
    fields.push(ParamField {
        schema: fs,
        value,
        line: 0,
    });
    Ok(())
}

/// The repeated fields `caffe.proto` declares `[packed = true]`: a blob's
/// values and its shape's dims.
fn packed(message: &MessageSchema, field: &FieldSchema) -> bool {
    matches!(
        (message.name, field.name),
        ("BlobProto", "data" | "diff" | "double_data" | "double_diff") | ("BlobShape", "dim")
    )
}

/// One field's value with its key.
fn encode_value(number: u32, value: &ParamValue, kind: FieldKind, out: &mut Vec<u8>) {
    match (value, kind) {
        (ParamValue::Float(v), FieldKind::Float) => {
            encode_key(number, WireType::ThirtyTwoBit, out);
            out.extend_from_slice(&(*v as f32).to_le_bytes());
        }
        (ParamValue::Float(v), _) => {
            encode_key(number, WireType::SixtyFourBit, out);
            out.extend_from_slice(&v.to_le_bytes());
        }
        (ParamValue::Int(v), _) => varint(number, *v as u64, out),
        (ParamValue::UInt(v), _) => varint(number, *v, out),
        (ParamValue::Bool(v), _) => varint(number, u64::from(*v), out),
        (ParamValue::Enum(v), _) => varint(number, i64::from(*v) as u64, out),
        (ParamValue::Str(s), _) => delimited(number, s.as_bytes(), out),
        (ParamValue::Bytes(b), _) => delimited(number, b, out),
        (ParamValue::Message(m), _) => delimited(number, &m.encode_to_vec(), out),
    }
}

/// One value of a packed field, without a key.
fn encode_packed_value(value: &ParamValue, kind: FieldKind, out: &mut Vec<u8>) {
    match (value, kind) {
        (ParamValue::Float(v), FieldKind::Float) => {
            out.extend_from_slice(&(*v as f32).to_le_bytes())
        }
        (ParamValue::Float(v), _) => out.extend_from_slice(&v.to_le_bytes()),
        (ParamValue::Int(v), _) => encode_varint(*v as u64, out),
        (ParamValue::UInt(v), _) => encode_varint(*v, out),
        (ParamValue::Bool(v), _) => encode_varint(u64::from(*v), out),
        (ParamValue::Enum(v), _) => encode_varint(i64::from(*v) as u64, out),
        (other, _) => unreachable!("a packed field holds numbers, not {other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema;

    fn layer(text: &str) -> Result<ParamMessage, ProtoError> {
        ParamMessage::from_text(&schema::LAYER_PARAMETER, &TextMessage::parse(text)?)
    }

    #[test]
    fn text_and_bytes_agree() {
        let l = layer(
            "name: \"p\" type: \"Pooling\" bottom: \"a\" top: \"b\" loss_weight: -1.5 \
             pooling_param { pool: AVE kernel_size: 3 stride: 2 } param { lr_mult: 0 } \
             include { phase: TRAIN } blobs { shape { dim: 2 dim: -3 } data: 1 data: 2 }",
        )
        .unwrap();
        let back = ParamMessage::decode(&schema::LAYER_PARAMETER, &l.encode_to_vec()).unwrap();
        assert_eq!(back.encode_to_vec(), l.encode_to_vec());
        assert_eq!(back.floats("loss_weight"), [-1.5]);
        let p = back.message("pooling_param").unwrap();
        assert_eq!(p.enum_name("pool"), "AVE");
        assert_eq!((p.uint("kernel_size"), p.uint("stride")), (3, 2));
        assert_eq!(back.messages("param").next().unwrap().float("lr_mult"), 0.0);
        let blob = back.messages("blobs").next().unwrap();
        assert_eq!(blob.message("shape").unwrap().ints("dim"), [2, -3]);
        assert_eq!(blob.floats("data"), [1.0, 2.0]);
    }

    #[test]
    fn packed_repeated_values_are_read() {
        // BlobShape.dim packed: field 1, length 2, values 3 and 4.
        let m = ParamMessage::decode(&schema::BLOB_SHAPE, &[0x0a, 0x02, 3, 4]).unwrap();
        assert_eq!(m.ints("dim"), [3, 4]);
    }

    #[test]
    fn unknown_fields_survive_bytes() {
        // Field 999 (varint 7) is no LayerParameter field.
        let bytes = [0xb8, 0x3e, 0x07, 0x0a, 0x01, b'x'];
        let m = ParamMessage::decode(&schema::LAYER_PARAMETER, &bytes).unwrap();
        assert_eq!(m.string("name"), "x");
        assert_eq!(m.unknown_fields()[0].number, 999);
        let mut again = m.encode_to_vec();
        again.rotate_left(3);
        assert_eq!(again, bytes);
    }

    #[test]
    fn bad_text_names_line_and_field() {
        let cases = [
            (
                "tpye: \"Data\"",
                "line 1, column 1: LayerParameter has no field named tpye",
            ),
            (
                "name: \"a\"\nname: \"b\"",
                "line 2, column 1: LayerParameter.name is not repeated but is given more than once",
            ),
            (
                "pooling_param { pool: MEAN }",
                "line 1, column 17: pool takes one of MAX, AVE, STOCHASTIC (PoolMethod), not MEAN",
            ),
            (
                "convolution_param { num_output: -1 }",
                "line 1, column 21: num_output takes a uint32, not -1",
            ),
            (
                "convolution_param: 5",
                "line 1, column 1: convolution_param is a message (ConvolutionParameter): write convolution_param { ... }, not 5",
            ),
            (
                "name { }",
                "line 1, column 1: name is a value, not a message",
            ),
            (
                "loss_weight: \"1\"",
                "line 1, column 1: loss_weight takes a float, not the string \"1\"",
            ),
            (
                "type: Convolution",
                "line 1, column 1: type takes a quoted string, not Convolution",
            ),
        ];
        for (text, want) in cases {
            assert_eq!(layer(text).unwrap_err().to_string(), want, "{text}");
        }
    }

    #[test]
    fn numbers_as_text_format_writes_them() {
        assert_eq!(parse_float("inf"), Some(f64::INFINITY));
        assert_eq!(parse_float("-Infinity"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_float("1e-3f"), Some(1e-3));
        assert_eq!(parse_float(".5"), Some(0.5));
        assert!(parse_float("nan").unwrap().is_nan());
        assert_eq!(parse_float("in"), None);
        assert_eq!(parse_float("f"), None);
        assert_eq!(parse_int("0x1F"), Some(31));
        assert_eq!(parse_int("-12"), Some(-12));
        assert_eq!(parse_int("1.5"), None);
    }

    #[test]
    fn defaults_come_from_the_schema() {
        let l = layer("convolution_param { }").unwrap();
        let c = l.message("convolution_param").unwrap();
        assert_eq!(c.uint("group"), 1);
        assert!(c.boolean("bias_term"));
        assert_eq!(c.int("axis"), 1);
        assert_eq!(l.enum_name("phase"), "TRAIN");
        let f = ParamMessage::new(&schema::FILLER);
        assert_eq!(f.string("type"), "constant");
    }
}
