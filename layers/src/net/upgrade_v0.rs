//! Caffe's V0 to V1 upgrade (`UpgradeV0Net`): 2014 files nest one flat
//! `V0LayerParameter` in each `layers` entry, its type a lower-case
//! string and its settings spread over one message for every type.
//! `padding` layers fold into the convolution or pooling they feed; each
//! other setting moves into the typed parameter of its layer's type, and
//! one its type does not take is an error naming both.

use blob_proto::schema::{FieldKind, V1_LAYER_PARAMETER};
use blob_proto::{ParamMessage, ParamValue};
use blob_runtime::{BlobError, Result};

fn v0_error(layer: &str, detail: String) -> BlobError {
    BlobError::Net {
        at: format!("V0 layer '{}'", blob_proto::excerpt(layer)),
        detail,
    }
}

/// The V1 `LayerType` of a V0 type string (Caffe's `UpgradeV0LayerType`).
fn v1_type(v0: &str) -> Option<&'static str> {
    Some(match v0 {
        "accuracy" => "ACCURACY",
        "bnll" => "BNLL",
        "concat" => "CONCAT",
        "conv" => "CONVOLUTION",
        "data" => "DATA",
        "dropout" => "DROPOUT",
        "euclidean_loss" => "EUCLIDEAN_LOSS",
        "flatten" => "FLATTEN",
        "hdf5_data" => "HDF5_DATA",
        "hdf5_output" => "HDF5_OUTPUT",
        "im2col" => "IM2COL",
        "images" => "IMAGE_DATA",
        "infogain_loss" => "INFOGAIN_LOSS",
        "innerproduct" => "INNER_PRODUCT",
        "lrn" => "LRN",
        "multinomial_logistic_loss" => "MULTINOMIAL_LOGISTIC_LOSS",
        "pool" => "POOLING",
        "relu" => "RELU",
        "sigmoid" => "SIGMOID",
        "softmax" => "SOFTMAX",
        "softmax_loss" => "SOFTMAX_LOSS",
        "split" => "SPLIT",
        "tanh" => "TANH",
        "window_data" => "WINDOW_DATA",
        _ => return None,
    })
}

/// Where a V0 setting of a layer of V0 type `ty` goes: the V1 typed
/// parameter and its field (`None` for the V1 layer's own field).
fn target(field: &str, ty: &str) -> Option<(Option<&'static str>, &'static str)> {
    const DATA_LIKE: [&str; 3] = ["data", "images", "window_data"];
    let typed = |param: &'static str, name: &'static str| Some((Some(param), name));
    match (field, ty) {
        ("blobs", _) => Some((None, "blobs")),
        ("blobs_lr", _) => Some((None, "blobs_lr")),
        ("weight_decay", _) => Some((None, "weight_decay")),
        ("num_output", "conv") => typed("convolution_param", "num_output"),
        ("num_output", "innerproduct") => typed("inner_product_param", "num_output"),
        ("biasterm", "conv") => typed("convolution_param", "bias_term"),
        ("biasterm", "innerproduct") => typed("inner_product_param", "bias_term"),
        ("weight_filler", "conv") => typed("convolution_param", "weight_filler"),
        ("weight_filler", "innerproduct") => typed("inner_product_param", "weight_filler"),
        ("bias_filler", "conv") => typed("convolution_param", "bias_filler"),
        ("bias_filler", "innerproduct") => typed("inner_product_param", "bias_filler"),
        ("pad", "conv") => typed("convolution_param", "pad"),
        ("pad", "pool") => typed("pooling_param", "pad"),
        ("kernelsize", "conv") => typed("convolution_param", "kernel_size"),
        ("kernelsize", "pool") => typed("pooling_param", "kernel_size"),
        ("group", "conv") => typed("convolution_param", "group"),
        ("stride", "conv") => typed("convolution_param", "stride"),
        ("stride", "pool") => typed("pooling_param", "stride"),
        ("pool", "pool") => typed("pooling_param", "pool"),
        ("dropout_ratio", "dropout") => typed("dropout_param", "dropout_ratio"),
        ("local_size", "lrn") => typed("lrn_param", "local_size"),
        ("alpha", "lrn") => typed("lrn_param", "alpha"),
        ("beta", "lrn") => typed("lrn_param", "beta"),
        ("k", "lrn") => typed("lrn_param", "k"),
        ("source", "data") => typed("data_param", "source"),
        ("source", "hdf5_data") => typed("hdf5_data_param", "source"),
        ("source", "images") => typed("image_data_param", "source"),
        ("source", "window_data") => typed("window_data_param", "source"),
        ("source", "infogain_loss") => typed("infogain_loss_param", "source"),
        ("batchsize", "data") => typed("data_param", "batch_size"),
        ("batchsize", "hdf5_data") => typed("hdf5_data_param", "batch_size"),
        ("batchsize", "images") => typed("image_data_param", "batch_size"),
        ("batchsize", "window_data") => typed("window_data_param", "batch_size"),
        ("scale", t) if DATA_LIKE.contains(&t) => typed("transform_param", "scale"),
        ("meanfile", t) if DATA_LIKE.contains(&t) => typed("transform_param", "mean_file"),
        ("cropsize", t) if DATA_LIKE.contains(&t) => typed("transform_param", "crop_size"),
        ("mirror", t) if DATA_LIKE.contains(&t) => typed("transform_param", "mirror"),
        ("rand_skip", "data") => typed("data_param", "rand_skip"),
        ("rand_skip", "images") => typed("image_data_param", "rand_skip"),
        ("shuffle_images", "images") => typed("image_data_param", "shuffle"),
        ("new_height", "images") => typed("image_data_param", "new_height"),
        ("new_width", "images") => typed("image_data_param", "new_width"),
        ("concat_dim", "concat") => typed("concat_param", "concat_dim"),
        ("det_fg_threshold", "window_data") => typed("window_data_param", "fg_threshold"),
        ("det_bg_threshold", "window_data") => typed("window_data_param", "bg_threshold"),
        ("det_fg_fraction", "window_data") => typed("window_data_param", "fg_fraction"),
        ("det_context_pad", "window_data") => typed("window_data_param", "context_pad"),
        ("det_crop_mode", "window_data") => typed("window_data_param", "crop_mode"),
        _ => None,
    }
}

/// `value` as the field of `kind` holds it (V0 and V1 differ in the sign
/// of some integers).
fn as_kind(value: &ParamValue, kind: FieldKind) -> ParamValue {
    let int = match value {
        ParamValue::Int(v) => Some(*v),
        ParamValue::UInt(v) => i64::try_from(*v).ok(),
        _ => None,
    };
    match (kind, int) {
        (FieldKind::Int32 | FieldKind::Int64, Some(v)) => ParamValue::Int(v),
        (FieldKind::UInt32 | FieldKind::UInt64, Some(v)) => ParamValue::UInt(v.max(0) as u64),
        _ => value.clone(),
    }
}

/// A V1 layer from the V0 layer `v0` nested in `entry` (whose bottoms,
/// tops and other V1 fields it keeps).
fn upgrade_layer(entry: &ParamMessage, v0: &ParamMessage) -> Result<ParamMessage> {
    let name = v0.string("name").to_string();
    let ty = v0.string("type");
    let mut v1 = ParamMessage::new(&V1_LAYER_PARAMETER);
    for field in entry.fields().iter().filter(|f| f.schema.name != "layer") {
        v1.set(field.schema.name, field.value.clone());
    }
    if v0.has("name") {
        v1.set("name", ParamValue::Str(name.clone()));
    }
    if v0.has("type") {
        let t = v1_type(ty)
            .ok_or_else(|| v0_error(&name, format!("Unknown layer name: type \"{ty}\"")))?;
        let number = V1_LAYER_PARAMETER
            .field("type")
            .and_then(|f| match f.kind {
                FieldKind::Enum(e) => e.value(t),
                _ => None,
            })
            .expect("V1LayerParameter.type lists every V0 type");
        v1.set("type", ParamValue::Enum(number));
    }
    for field in v0.fields() {
        let field_name = field.schema.name;
        if matches!(field_name, "name" | "type") {
            continue;
        }
        let Some((param, target_name)) = target(field_name, ty) else {
            return Err(v0_error(
                &name,
                format!("a {ty} layer takes no {field_name}; the upgrade to V1 cannot place it"),
            ));
        };
        let message = match param {
            Some(p) => v1.message_mut(p),
            None => &mut v1,
        };
        let kind = message
            .schema()
            .field(target_name)
            .map(|f| f.kind)
            .expect("the targets are fields of caffe.proto");
        message.set(target_name, as_kind(&field.value, kind));
    }
    Ok(v1)
}

/// Caffe's `UpgradeV0PaddingLayers`: a `padding` layer is dropped, its
/// `pad` set on the convolution or pooling it feeds, which then reads the
/// padding layer's input.
fn fold_padding(entries: Vec<ParamMessage>) -> Result<Vec<ParamMessage>> {
    // Top blob -> (padding layer's bottom, its pad).
    let mut padded: Vec<(String, String, ParamValue)> = Vec::new();
    let mut out = Vec::with_capacity(entries.len());
    for mut entry in entries {
        let Some(v0) = entry.message("layer").cloned() else {
            out.push(entry);
            continue;
        };
        let name = v0.string("name").to_string();
        if v0.string("type") == "padding" {
            let (bottoms, tops): (Vec<_>, Vec<_>) = (
                entry.strings("bottom").collect(),
                entry.strings("top").collect(),
            );
            if bottoms.len() != 1 || tops.len() != 1 {
                return Err(v0_error(
                    &name,
                    "a padding layer takes one bottom and one top".into(),
                ));
            }
            let pad = v0
                .fields()
                .iter()
                .find(|f| f.schema.name == "pad")
                .map_or(ParamValue::UInt(0), |f| f.value.clone());
            padded.push((tops[0].to_string(), bottoms[0].to_string(), pad));
            continue;
        }
        let bottoms: Vec<String> = entry.strings("bottom").map(String::from).collect();
        for (j, bottom) in bottoms.iter().enumerate() {
            let Some((_, source, pad)) = padded.iter().find(|(top, _, _)| top == bottom) else {
                continue;
            };
            let ty = v0.string("type");
            if ty != "conv" && ty != "pool" {
                return Err(v0_error(
                    &name,
                    format!(
                        "Padding layer input to non-convolutional / non-pooling layer type {ty}"
                    ),
                ));
            }
            if bottoms.len() != 1 {
                return Err(v0_error(
                    &name,
                    "Conv Layer takes a single blob as input.".into(),
                ));
            }
            let mut v0 = v0.clone();
            v0.set("pad", pad.clone());
            entry.set("layer", ParamValue::Message(v0));
            let mut renamed = bottoms.clone();
            renamed[j] = source.clone();
            entry.clear("bottom");
            for b in renamed {
                entry.set("bottom", ParamValue::Str(b));
            }
            break;
        }
        out.push(entry);
    }
    Ok(out)
}

/// Every `layers` entry holding a V0 layer becomes a V1 layer (the V1 to
/// V2 upgrade then runs as for any V1 file).
pub(crate) fn upgrade_v0(net: &mut ParamMessage) -> Result<()> {
    let entries: Vec<ParamMessage> = net.messages("layers").cloned().collect();
    if !entries.iter().any(|e| e.has("layer")) {
        return Ok(());
    }
    let entries = fold_padding(entries)?;
    net.clear("layers");
    for entry in entries {
        let v1 = match entry.message("layer") {
            Some(v0) => upgrade_layer(&entry, v0)?,
            None => entry,
        };
        net.set("layers", ParamValue::Message(v1));
    }
    Ok(())
}
