//! `blobflow inspect`: what a Caffe file (or a `.safetensors` file made by
//! `blobflow convert`) holds, as a table or as JSON.

use std::fmt::Write as _;
use std::path::Path;

use blobflow::proto::{BlobProto, BlobProtoVector, FileFormat, NetParameter, SolverState};
use serde_json::{Value, json};

use blobflow::BlobError;

/// One blob's summary: the shape as stored (legacy fields as
/// `[num, channels, height, width]`), count, sum of |x| in f64, and the
/// first five values. A blob whose shape and stored values disagree is an
/// error naming `at` (where the blob is) and both counts, as Caffe's
/// `FromProto` refuses to load it.
pub fn blob_summary(blob: &BlobProto, at: &str) -> Result<Value, blobflow::proto::ProtoError> {
    blob.check_values(at)?;
    let shape = blob.stored_shape();
    let count = shape
        .iter()
        .try_fold(1i64, |a, &d| if d < 0 { None } else { a.checked_mul(d) });
    let values = blob.values_f64()?;
    let sum_abs: f64 = values.iter().map(|v| v.abs()).sum();
    let first5: Vec<f64> = values.iter().take(5).copied().collect();
    Ok(json!({
        "shape": shape,
        "count": count,
        "sum_abs": number(sum_abs),
        "first5": first5.into_iter().map(number).collect::<Vec<_>>(),
    }))
}

/// Summaries of `blobs`, each located as `{at}{index}` in messages.
fn summaries(blobs: &[BlobProto], at: &str) -> Result<Vec<Value>, blobflow::proto::ProtoError> {
    blobs
        .iter()
        .enumerate()
        .map(|(i, b)| blob_summary(b, &format!("{at}{i}")))
        .collect()
}

/// Reads `path` and describes it as one JSON object:
/// `{"format", "name", "layers": [{"name", "type", "blobs": [...]}]}` for a
/// net, `{"format", "blob": {...}}` for a blob, `{"format", "name",
/// "iter", "history": [...]}` for a solver state, `{"format", "blobs"}`
/// for a blob vector; `{"format": "safetensors", "tensors": [{"name",
/// "dtype", "shape", "count", "sum_abs", "first5"}]}` for a `.safetensors`
/// file (sums and values for floating-point tensors); for a `.prototxt`,
/// `{"format": "net prototxt", "name", "input", "input_shape", "layers": [{"name",
/// "type", "bottom", "top", "blobs": []}]}` for a net (read against
/// Caffe's schema) and `{"format": "solver prototxt", "solver":
/// {...}, "max_iter", ...}` for a solver, as `SolverFile` reads it.
pub fn describe(path: &Path) -> Result<Described, BlobError> {
    if path.extension().is_some_and(|e| e == "safetensors") {
        return describe_tensors(path).map(Described::Whole);
    }
    if path.extension().is_some_and(|e| e == "prototxt") {
        return describe_text(path).map(Described::Whole);
    }
    let bytes = blobflow::runtime::read_file(path)?;
    if bytes.is_empty() {
        // Every Caffe message decodes from no bytes (all fields default);
        // an empty file is far more likely a failed write than a model.
        return Err(BlobError::Io {
            path: path.display().to_string(),
            source: std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "the file is empty: no Caffe model, blob or solver state",
            ),
        });
    }
    let name = path.file_name().and_then(|n| n.to_str());
    let perr = |source| BlobError::Proto {
        path: path.display().to_string(),
        source,
    };
    let format = blobflow::proto::detect_format(&bytes, name).map_err(perr)?;
    let value = match format {
        FileFormat::NetParameter | FileFormat::NetParameterV1 => {
            let net = NetParameter::decode(&bytes).map_err(perr)?;
            // Every blob is checked before anything is written: a bad one
            // is an error with no partial output.
            for l in net.iter_layers() {
                for (i, b) in l.blobs().iter().enumerate() {
                    b.check_values(&format!("layer '{}' blob {i}", l.name()))
                        .map_err(perr)?;
                }
            }
            return Ok(Described::Net {
                format: format.name(),
                net,
                path: path.display().to_string(),
            });
        }
        FileFormat::BlobProto => {
            let b: BlobProto =
                blobflow::proto::decode_message("BlobProto", &bytes).map_err(perr)?;
            json!({ "format": format.name(), "blob": blob_summary(&b, "blob").map_err(perr)? })
        }
        FileFormat::BlobProtoVector => {
            let v: BlobProtoVector =
                blobflow::proto::decode_message("BlobProtoVector", &bytes).map_err(perr)?;
            json!({ "format": format.name(), "blobs": summaries(&v.blobs, "blob ").map_err(perr)? })
        }
        FileFormat::SolverState => {
            let s: SolverState =
                blobflow::proto::decode_message("SolverState", &bytes).map_err(perr)?;
            json!({
                "format": format.name(),
                "name": s.learned_net,
                "iter": s.iter,
                "current_step": s.current_step,
                "history": summaries(&s.history, "history blob ").map_err(perr)?,
            })
        }
    };
    Ok(Described::Whole(value))
}

/// What [`describe`] found. A net's layers are summarised one at a time
/// as they are written, so a file of many layers is never held as a
/// whole tree of summaries (100,000 layers made one of about 180 MB).
pub enum Described {
    /// Everything, summarised.
    Whole(Value),
    /// A binary net, every blob checked, summarised layer by layer.
    Net {
        /// `NetParameter` or `NetParameterV1`.
        format: &'static str,
        /// The decoded net.
        net: NetParameter,
        /// The file, for messages.
        path: String,
    },
}

/// One layer of a binary net, as `--json` writes it.
fn layer_value(l: &blobflow::proto::LayerParameter) -> Result<Value, blobflow::proto::ProtoError> {
    Ok(json!({
        "name": l.name(),
        "type": l.type_name(),
        "blobs": summaries(l.blobs(), &format!("layer '{}' blob ", l.name()))?,
    }))
}

/// Why a description could not be written out.
pub enum WriteError {
    /// The output refused the bytes (a closed pipe, a full disk).
    Output(std::io::Error),
    /// A layer could not be summarised.
    Summary(BlobError),
}

fn written(e: std::io::Error) -> WriteError {
    WriteError::Output(e)
}

fn summary(path: &str) -> impl FnOnce(blobflow::proto::ProtoError) -> WriteError + '_ {
    move |source| {
        WriteError::Summary(BlobError::Proto {
            path: path.to_string(),
            source,
        })
    }
}

impl Described {
    /// The description as one JSON object (compact, keys sorted), written
    /// as it is made.
    pub fn write_json(&self, out: &mut impl std::io::Write) -> Result<(), WriteError> {
        let (format, net, path) = match self {
            Described::Whole(v) => return writeln!(out, "{v}").map_err(written),
            Described::Net { format, net, path } => (format, net, path),
        };
        let text = |v: &Value| v.to_string();
        write!(out, "{{\"format\":{},\"layers\":[", text(&json!(format))).map_err(written)?;
        for (i, l) in net.iter_layers().enumerate() {
            let v = layer_value(l).map_err(summary(path))?;
            let comma = if i == 0 { "" } else { "," };
            write!(out, "{comma}{v}").map_err(written)?;
        }
        writeln!(out, "],\"name\":{}}}", text(&json!(net.name()))).map_err(written)
    }

    /// The description as the human-readable table, written as it is
    /// made.
    pub fn write_table(&self, out: &mut impl std::io::Write) -> Result<(), WriteError> {
        let (format, net, path) = match self {
            Described::Whole(v) => return out.write_all(table(v).as_bytes()).map_err(written),
            Described::Net { format, net, path } => (format, net, path),
        };
        let mut text = String::new();
        table_head(&mut text, format, net.name(), None);
        blob_header(&mut text);
        out.write_all(text.as_bytes()).map_err(written)?;
        for l in net.iter_layers() {
            let v = layer_value(l).map_err(summary(path))?;
            text.clear();
            layer_rows(&mut text, &v);
            out.write_all(text.as_bytes()).map_err(written)?;
        }
        Ok(())
    }
}

/// A `float` of a prototxt as the file wrote it (0.01, not the nearest
/// double to the float 0.01); not finite: null.
fn num(x: f32) -> Value {
    x.to_string().parse::<f64>().map_or(Value::Null, number)
}

/// A number as JSON holds it; JSON has no infinity or NaN, which would
/// become `null` (lost): they are the strings "inf", "-inf" and "nan".
fn number(x: f64) -> Value {
    match serde_json::Number::from_f64(x) {
        Some(n) => Value::Number(n),
        None if x.is_nan() => Value::from("nan"),
        None if x > 0.0 => Value::from("inf"),
        None => Value::from("-inf"),
    }
}

/// A net (it has `layer`s, or V1 `layers`) or a solver prototxt.
fn describe_text(path: &Path) -> Result<Value, BlobError> {
    use blobflow::layers::solver::SolverFile;
    use blobflow::proto::{ParamMessage, TextMessage};
    let name = path.display().to_string();
    let text = blobflow::runtime::read_text_file(path)?;
    let message = TextMessage::parse(&text).map_err(|source| BlobError::Proto {
        path: name.clone(),
        source,
    })?;
    // A net's top-level fields; a solver has none of them.
    const NET_FIELDS: [&str; 6] = [
        "layer",
        "layers",
        "input",
        "input_shape",
        "input_dim",
        "state",
    ];
    if message
        .fields
        .iter()
        .any(|f| NET_FIELDS.contains(&f.name.as_str()))
    {
        // Caffe refuses a net of both formats rather than upgrade it.
        let first = |key: &str| message.fields.iter().find(|f| f.name == key);
        if let (Some(new), Some(v1)) = (first("layer"), first("layers")) {
            return Err(BlobError::Proto {
                path: name.clone(),
                source: v1.error(format!(
                    "the net has both layer (first at line {}) and V1 layers fields; Caffe reads \
                     only one kind: use one",
                    new.line
                )),
            });
        }
        let schemas = crate::schemas();
        let net = ParamMessage::from_text(schemas.net_parameter(), &message).map_err(|source| {
            BlobError::Proto {
                path: name.clone(),
                source,
            }
        })?;
        let strings = |m: &ParamMessage, key: &str| -> Vec<String> {
            m.strings(key).map(String::from).collect()
        };
        let layers: Vec<Value> = net
            .messages("layer")
            .map(|l| (l.string("type").to_string(), l))
            .chain(
                net.messages("layers")
                    .map(|l| (l.enum_name("type").to_string(), l)),
            )
            .map(|(kind, l)| {
                json!({
                    "name": l.string("name"),
                    "type": kind,
                    "bottom": strings(l, "bottom"),
                    "top": strings(l, "top"),
                    "blobs": [],
                })
            })
            .collect();
        // Each input's shape as declared: an `input_shape`, or four
        // `input_dim`s (the old form); none where the file gives none.
        let dims: Vec<i64> = net.ints("input_dim");
        let shapes: Vec<Value> = net
            .messages("input_shape")
            .map(|s| json!(s.ints("dim")))
            .chain(dims.chunks(4).map(|d| json!(d)))
            .collect();
        return Ok(json!({
            "format": "net prototxt",
            "name": net.string("name"),
            "input": strings(&net, "input"),
            "input_shape": shapes,
            "layers": layers,
        }));
    }
    let file = SolverFile::<f32>::open(path)?;
    let s = &file.solver;
    let mut solver = json!({
        "type": s.solver_type.name(),
        "base_lr": num(s.base_lr),
        "lr_policy": s.lr_policy.name(),
        "momentum": num(s.momentum),
        "weight_decay": num(s.weight_decay),
        "regularization_type": format!("{:?}", s.regularization),
        "clip_gradients": s.clip_gradients.map(num),
        "iter_size": s.iter_size,
    });
    use blobflow::layers::solver::{LrPolicy, SolverType};
    let extra = match &s.lr_policy {
        LrPolicy::Fixed => json!({}),
        LrPolicy::Step { gamma, stepsize } | LrPolicy::Sigmoid { gamma, stepsize } => {
            json!({ "gamma": num(*gamma), "stepsize": stepsize })
        }
        LrPolicy::Exp { gamma } => json!({ "gamma": num(*gamma) }),
        LrPolicy::Inv { gamma, power } => json!({ "gamma": num(*gamma), "power": num(*power) }),
        LrPolicy::MultiStep { gamma, stepvalues } => {
            json!({ "gamma": num(*gamma), "stepvalue": stepvalues })
        }
        LrPolicy::Poly { power, max_iter } => json!({ "power": num(*power), "max_iter": max_iter }),
        LrPolicy::MultiFixed { stages } => json!({
            "stageiter": stages.iter().map(|s| s.0).collect::<Vec<_>>(),
            "stagelr": stages.iter().map(|s| num(s.1)).collect::<Vec<_>>(),
        }),
    };
    let rule = match s.solver_type {
        SolverType::Sgd | SolverType::Nesterov => json!({}),
        SolverType::AdaGrad { delta } | SolverType::AdaDelta { delta } => {
            json!({ "delta": num(delta) })
        }
        SolverType::RmsProp { rms_decay, delta } => {
            json!({ "rms_decay": num(rms_decay), "delta": num(delta) })
        }
        SolverType::Adam { momentum2, delta } => {
            json!({ "momentum2": num(momentum2), "delta": num(delta) })
        }
    };
    for (key, value) in extra
        .as_object()
        .into_iter()
        .chain(rule.as_object())
        .flatten()
    {
        solver[key] = value.clone();
    }
    Ok(json!({
        "format": "solver prototxt",
        "name": file.net,
        "solver": solver,
        "max_iter": file.max_iter,
        "snapshot": file.snapshot,
        "snapshot_prefix": file.snapshot_prefix,
        "display": file.display,
        "random_seed": file.random_seed,
        "test_iter": file.test_iter,
        "test_interval": file.test_interval,
        "solver_mode": file.solver_mode,
    }))
}

fn describe_tensors(path: &Path) -> Result<Value, BlobError> {
    let file = blobflow::TensorFile::open(path)?;
    let tensors = file
        .info()
        .into_iter()
        .map(|t| {
            let values: Option<Vec<f64>> = match t.dtype.as_str() {
                "F32" => Some(
                    file.blob::<f32>(&t.name)?
                        .to_vec()?
                        .into_iter()
                        .map(f64::from)
                        .collect(),
                ),
                "F64" => Some(file.blob::<f64>(&t.name)?.to_vec()?),
                _ => None,
            };
            Ok(json!({
                "name": t.name,
                "dtype": t.dtype,
                "count": t.shape.iter().product::<usize>(),
                "shape": t.shape,
                "sum_abs": values.as_ref().map(|v| number(v.iter().map(|x| x.abs()).sum::<f64>())),
                "first5": values.map(|v| v.into_iter().take(5).map(number).collect::<Vec<_>>()),
            }))
        })
        .collect::<Result<Vec<_>, BlobError>>()?;
    Ok(json!({ "format": "safetensors", "tensors": tensors }))
}

/// A name from the file as the table prints it: control characters (a
/// newline faking a row, an escape sequence retitling the terminal)
/// escaped, as `--json` escapes them.
fn shown(name: &str) -> String {
    name.chars()
        .flat_map(|c| {
            let escaped: Vec<char> = if c.is_control() {
                c.escape_default().collect()
            } else {
                vec![c]
            };
            escaped
        })
        .collect()
}

fn blob_row(out: &mut String, layer: &str, kind: &str, blob: &Value) {
    let (layer, kind) = (shown(layer), shown(kind));
    let shape: Vec<String> = blob["shape"]
        .as_array()
        .map(|a| a.iter().map(|d| d.to_string()).collect())
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "{layer:<24} {kind:<18} {:<20} {:>10} {:>16.6}",
        if shape.is_empty() {
            "(scalar)".to_string()
        } else {
            shape.join("x")
        },
        blob["count"].to_string(),
        blob["sum_abs"]
            .as_f64()
            .or_else(|| blob["sum_abs"].as_str().and_then(|s| s.parse().ok()))
            .unwrap_or(f64::NAN)
    );
}

/// The table's first lines: format, name and iteration where known.
fn table_head(out: &mut String, format: &str, name: Option<&str>, iter: Option<i64>) {
    let _ = writeln!(out, "format: {format}");
    if let Some(name) = name {
        let _ = writeln!(out, "name:   {}", shown(name));
    }
    if let Some(iter) = iter {
        let _ = writeln!(out, "iter:   {iter}");
    }
}

/// The column titles of a table of blobs.
fn blob_header(out: &mut String) {
    let _ = writeln!(
        out,
        "{:<24} {:<18} {:<20} {:>10} {:>16}",
        "layer", "type", "shape", "count", "sum |x|"
    );
}

/// One layer's rows: one per blob, or a dash for a layer without.
fn layer_rows(out: &mut String, l: &Value) {
    let name = shown(l["name"].as_str().unwrap_or(""));
    let kind = shown(l["type"].as_str().unwrap_or(""));
    match l["blobs"].as_array() {
        Some(blobs) if !blobs.is_empty() => {
            for b in blobs {
                blob_row(out, &name, &kind, b);
            }
        }
        _ => {
            let _ = writeln!(out, "{name:<24} {kind:<18} -");
        }
    }
}

/// The human-readable table for a whole [`describe`] value.
pub fn table(v: &Value) -> String {
    let mut out = String::new();
    let solver = v["solver"].as_object();
    table_head(
        &mut out,
        v["format"].as_str().unwrap_or("?"),
        // A solver's "name" is the net file it trains: labelled so.
        v["name"].as_str().filter(|_| solver.is_none()),
        v["iter"].as_i64(),
    );
    if let Some(solver) = solver {
        if let Some(net) = v["name"].as_str() {
            let _ = writeln!(out, "net:    {}", shown(net));
        }
        for (key, value) in solver {
            let _ = writeln!(out, "{:<20} {}", shown(key), shown(&value.to_string()));
        }
        for key in [
            "max_iter",
            "snapshot",
            "snapshot_prefix",
            "display",
            "random_seed",
        ] {
            let _ = writeln!(out, "{key:<20} {}", v[key]);
        }
        return out;
    }
    let empty = Vec::new();
    let shapes = v["input_shape"].as_array().unwrap_or(&empty);
    for (i, input) in v["input"].as_array().unwrap_or(&empty).iter().enumerate() {
        let shape = shapes.get(i).and_then(Value::as_array).map_or_else(
            || "(shape not declared)".to_string(),
            |d| d.iter().map(Value::to_string).collect::<Vec<_>>().join("x"),
        );
        let _ = writeln!(
            out,
            "input:  {} {shape}",
            shown(input.as_str().unwrap_or(""))
        );
    }
    blob_header(&mut out);
    for l in v["layers"].as_array().unwrap_or(&empty) {
        layer_rows(&mut out, l);
    }
    if v.get("blob").is_some() {
        blob_row(&mut out, "-", "blob", &v["blob"]);
    }
    for t in v["tensors"].as_array().unwrap_or(&empty) {
        blob_row(
            &mut out,
            t["name"].as_str().unwrap_or(""),
            t["dtype"].as_str().unwrap_or(""),
            t,
        );
    }
    for key in ["blobs", "history"] {
        for (i, b) in v[key].as_array().unwrap_or(&empty).iter().enumerate() {
            blob_row(&mut out, &format!("{key}[{i}]"), "blob", b);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use blobflow::proto::{BlobProto, BlobShape};

    #[test]
    fn a_summary_holds_count_sum_and_first_values_and_refuses_a_short_blob() {
        let b = BlobProto {
            data: vec![-1.0, 2.0],
            shape: Some(BlobShape { dim: vec![2] }),
            ..Default::default()
        };
        let s = super::blob_summary(&b, "blob").unwrap();
        assert_eq!(s["count"], 2);
        assert_eq!(s["sum_abs"], 3.0);
        assert!(
            super::table(&serde_json::json!({"format": "BlobProto", "blob": s}))
                .contains("BlobProto")
        );
        let short = BlobProto {
            data: vec![1.0],
            ..b
        };
        assert!(super::blob_summary(&short, "blob").is_err());
    }
}
