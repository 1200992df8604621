//! A [`ParamMessage`] written in protobuf's text format, as Caffe's
//! `WriteProtoToTextFile` writes it: what `upgrade_net_proto_text`
//! leaves in its output file.

use std::fmt::Write;

use crate::param::{ParamMessage, ParamValue};
use crate::schema::FieldKind;

impl ParamMessage {
    /// The message in text format as Caffe's `PrintToString` writes it:
    /// two spaces a level, fields in the order of their numbers (a
    /// repeated field's values in theirs); fields the schema does not
    /// know, kept from bytes, have no text and are left out.
    ///
    /// ```
    /// use blob_proto::{ParamMessage, TextMessage, schema};
    /// let text = "name: \"conv1\"\ntype: \"Convolution\"\nconvolution_param {\n  num_output: 20\n  weight_filler {\n    type: \"xavier\"\n  }\n}\n";
    /// let layer = ParamMessage::from_text(&schema::LAYER_PARAMETER, &TextMessage::parse(text)?)?;
    /// assert_eq!(layer.to_text(), text);
    /// let pool = ParamMessage::from_text(&schema::POOLING, &TextMessage::parse("stride: 2 pool: AVE")?)?;
    /// assert_eq!(pool.to_text(), "pool: AVE\nstride: 2\n");
    /// # Ok::<(), blob_proto::ProtoError>(())
    /// ```
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        write_message(&mut out, self, 0);
        out
    }
}

fn write_message(out: &mut String, message: &ParamMessage, depth: usize) {
    let indent = "  ".repeat(depth);
    let mut fields: Vec<_> = message.fields().iter().collect();
    fields.sort_by_key(|f| f.schema.number);
    for field in fields {
        let name = field.schema.name;
        match &field.value {
            ParamValue::Message(inner) => {
                let _ = writeln!(out, "{indent}{name} {{");
                write_message(out, inner, depth + 1);
                let _ = writeln!(out, "{indent}}}");
            }
            value => {
                let _ = writeln!(out, "{indent}{name}: {}", scalar(value, &field.schema.kind));
            }
        }
    }
}

fn scalar(value: &ParamValue, kind: &FieldKind) -> String {
    match value {
        ParamValue::Int(v) => v.to_string(),
        ParamValue::UInt(v) => v.to_string(),
        ParamValue::Float(v) => float(*v, matches!(kind, FieldKind::Float)),
        ParamValue::Bool(v) => v.to_string(),
        ParamValue::Str(s) => quoted(s.as_bytes()),
        ParamValue::Bytes(b) => quoted(b),
        ParamValue::Enum(number) => match kind {
            FieldKind::Enum(e) => e
                .values
                .iter()
                .find(|(_, n)| n == number)
                .map_or_else(|| number.to_string(), |(name, _)| name.to_string()),
            _ => number.to_string(),
        },
        ParamValue::Message(_) => unreachable!("messages are written as blocks"),
    }
}

/// A number as protobuf's text format prints it (`SimpleFtoa`,
/// `SimpleDtoa`): `%g` at the type's guaranteed digits (6 for a `float`,
/// 15 for a `double`), or at enough to read back the same value (9, 17)
/// where those do not.
fn float(v: f64, single: bool) -> String {
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf" } else { "-inf" }.into();
    }
    if single {
        // The value a float field holds (text read in double is rounded).
        let held = v as f32;
        let short = format_g(f64::from(held), 6);
        if short.parse::<f32>().ok() == Some(held) {
            short
        } else {
            format_g(f64::from(held), 9)
        }
    } else {
        let short = format_g(v, 15);
        if short.parse::<f64>().ok() == Some(v) {
            short
        } else {
            format_g(v, 17)
        }
    }
}

/// A number as C's `printf("%.*g", precision, x)` prints it: what
/// Caffe's text files and its logs (C++ streams print `%.6g`) hold.
///
/// ```
/// use blob_proto::format_g;
/// assert_eq!(format_g(0.0105728, 6), "0.0105728");
/// assert_eq!(format_g(1234567.0, 6), "1.23457e+06");
/// assert_eq!(format_g(0.00001234, 6), "1.234e-05");
/// assert_eq!(format_g(f64::from(0.0039215684f32), 9), "0.00392156839");
/// assert_eq!(format_g(1.0, 6), "1");
/// ```
pub fn format_g(x: f64, precision: usize) -> String {
    let precision = precision.max(1);
    if x == 0.0 {
        return if x.is_sign_negative() { "-0" } else { "0" }.into();
    }
    if !x.is_finite() {
        return if x.is_nan() {
            "nan".into()
        } else if x > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        };
    }
    let exponent_form = format!("{x:.*e}", precision - 1);
    let (mantissa, power) = exponent_form.split_once('e').expect("an exponent");
    let power: i32 = power.parse().expect("a number");
    let trim = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    if power < -4 || power >= precision as i32 {
        let sign = if power < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trim(mantissa), power.abs())
    } else {
        let decimals = (precision as i32 - 1 - power).max(0) as usize;
        trim(&format!("{x:.decimals$}"))
    }
}

/// A C-escaped, double-quoted string, as protobuf's `CEscape` writes it.
fn quoted(bytes: &[u8]) -> String {
    let mut out = String::from("\"");
    for &b in bytes {
        match b {
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            b'"' => out.push_str("\\\""),
            b'\'' => out.push_str("\\'"),
            b'\\' => out.push_str("\\\\"),
            0x20..=0x7e => out.push(char::from(b)),
            _ => {
                let _ = write!(out, "\\{b:03o}");
            }
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use crate::schema;
    use crate::{ParamMessage, TextMessage};

    #[test]
    fn text_written_reads_back_to_the_same_message() {
        let text = r#"name: "tricky \"quoted\"\n\001 name"
layer { name: "d" type: "Data" top: "data"
  transform_param { scale: 0.00390625 mean_value: 104 mean_value: 117.5 mirror: true }
  data_param { source: "x" batch_size: 64 backend: LMDB }
  include { phase: TRAIN stage: "a" } }
layer { name: "c" type: "Convolution" bottom: "data" top: "c"
  param { lr_mult: 0.1 } convolution_param { num_output: 3 kernel_size: 3 pad: 1 }
  loss_weight: 1e-5 }"#;
        let net =
            ParamMessage::from_text(&schema::NET_PARAMETER, &TextMessage::parse(text).unwrap())
                .unwrap();
        let written = net.to_text();
        let again = ParamMessage::from_text(
            &schema::NET_PARAMETER,
            &TextMessage::parse(&written).unwrap(),
        )
        .unwrap();
        assert_eq!(again.encode_to_vec(), net.encode_to_vec(), "{written}");
        assert!(
            written.contains("  param {\n    lr_mult: 0.1\n  }\n"),
            "{written}"
        );
        assert!(written.contains("backend: LMDB"), "{written}");
    }
}
