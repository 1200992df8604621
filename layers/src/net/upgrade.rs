//! Caffe's `UpgradeNetAsNeeded` on a net read from a file: V0 layers
//! become V1 ([`upgrade_v0`](super::upgrade_v0)), V1 `layers` become
//! `layer`s, legacy `input`/`input_dim`/`input_shape` become an
//! `Input` layer, and BatchNorm's three statistics specs are dropped (the
//! net gives a layer that learns nothing `lr_mult: 0` where it has no spec).

use blob_proto::schema::{self, LAYER_PARAMETER};
use blob_proto::{ParamMessage, ParamValue};
use blob_runtime::{BlobError, Result};

fn net_error(detail: String) -> BlobError {
    BlobError::Net {
        at: "net".into(),
        detail,
    }
}

/// Every upgrade the net needs, in Caffe's order.
pub(crate) fn upgrade(net: &ParamMessage) -> Result<ParamMessage> {
    let mut net = net.clone();
    super::upgrade_v0::upgrade_v0(&mut net)?;
    upgrade_data_transformation(&mut net);
    upgrade_v1(&mut net)?;
    upgrade_inputs(&mut net)?;
    upgrade_batch_norm(&mut net);
    Ok(net)
}

/// Caffe's `UpgradeNetDataTransformation`: a V1 data layer's `scale`,
/// `mean_file`, `crop_size` and `mirror` move from its data parameter
/// into `transform_param`.
fn upgrade_data_transformation(net: &mut ParamMessage) {
    const MOVED: [&str; 4] = ["scale", "mean_file", "crop_size", "mirror"];
    let layers: Vec<ParamMessage> = net.messages("layers").cloned().collect();
    let param_of = |layer: &ParamMessage| match layer.enum_name("type") {
        "DATA" => Some("data_param"),
        "IMAGE_DATA" => Some("image_data_param"),
        "WINDOW_DATA" => Some("window_data_param"),
        _ => None,
    };
    let needs = |layer: &ParamMessage| {
        param_of(layer).is_some_and(|p| {
            layer
                .message(p)
                .is_some_and(|m| MOVED.iter().any(|f| m.has(f)))
        })
    };
    if !layers.iter().any(needs) {
        return;
    }
    net.clear("layers");
    for mut layer in layers {
        if let Some(param) = param_of(&layer).filter(|_| needs(&layer)) {
            let moved: Vec<(&str, ParamValue)> = MOVED
                .iter()
                .filter_map(|f| {
                    let value = layer.message(param)?.field(f)?.value.clone();
                    Some((*f, value))
                })
                .collect();
            for (field, value) in moved {
                layer.message_mut(param).clear(field);
                layer.message_mut("transform_param").set(field, value);
            }
        }
        net.set("layers", ParamValue::Message(layer));
    }
}

/// The new-format type name of a V1 `LayerType`.
fn v2_type(v1: &str) -> Option<&'static str> {
    Some(match v1 {
        "NONE" => "",
        "ABSVAL" => "AbsVal",
        "ACCURACY" => "Accuracy",
        "ARGMAX" => "ArgMax",
        "BNLL" => "BNLL",
        "CONCAT" => "Concat",
        "CONTRASTIVE_LOSS" => "ContrastiveLoss",
        "CONVOLUTION" => "Convolution",
        "DECONVOLUTION" => "Deconvolution",
        "DATA" => "Data",
        "DROPOUT" => "Dropout",
        "DUMMY_DATA" => "DummyData",
        "EUCLIDEAN_LOSS" => "EuclideanLoss",
        "ELTWISE" => "Eltwise",
        "EXP" => "Exp",
        "FLATTEN" => "Flatten",
        "HDF5_DATA" => "HDF5Data",
        "HDF5_OUTPUT" => "HDF5Output",
        "HINGE_LOSS" => "HingeLoss",
        "IM2COL" => "Im2col",
        "IMAGE_DATA" => "ImageData",
        "INFOGAIN_LOSS" => "InfogainLoss",
        "INNER_PRODUCT" => "InnerProduct",
        "LRN" => "LRN",
        "MEMORY_DATA" => "MemoryData",
        "MULTINOMIAL_LOGISTIC_LOSS" => "MultinomialLogisticLoss",
        "MVN" => "MVN",
        "POOLING" => "Pooling",
        "POWER" => "Power",
        "RELU" => "ReLU",
        "SIGMOID" => "Sigmoid",
        "SIGMOID_CROSS_ENTROPY_LOSS" => "SigmoidCrossEntropyLoss",
        "SILENCE" => "Silence",
        "SOFTMAX" => "Softmax",
        "SOFTMAX_LOSS" => "SoftmaxWithLoss",
        "SPLIT" => "Split",
        "SLICE" => "Slice",
        "TANH" => "TanH",
        "WINDOW_DATA" => "WindowData",
        "THRESHOLD" => "Threshold",
        _ => return None,
    })
}

/// V1 `layers` (field 2) to `layer` (field 100), as Caffe's
/// `UpgradeV1Net`: both in one net is an error.
fn upgrade_v1(net: &mut ParamMessage) -> Result<()> {
    let v1: Vec<ParamMessage> = net.messages("layers").cloned().collect();
    if v1.is_empty() {
        return Ok(());
    }
    if net.has("layer") {
        return Err(net_error(
            "the net has both layer and layers (V1) fields; use one".into(),
        ));
    }
    net.clear("layers");
    for (i, old) in v1.iter().enumerate() {
        let new = upgrade_v1_layer(old).map_err(|detail| {
            net_error(format!(
                "V1 layer {i} '{}' cannot be upgraded: {detail}",
                old.string("name")
            ))
        })?;
        net.set("layer", ParamValue::Message(new));
    }
    Ok(())
}

fn upgrade_v1_layer(old: &ParamMessage) -> std::result::Result<ParamMessage, String> {
    if let Some(u) = old.unknown_fields().first() {
        return Err(format!(
            "field {} (a V0 layer, or a fork's field) has no V1 to V2 upgrade",
            u.number
        ));
    }
    let mut layer = ParamMessage::new(&LAYER_PARAMETER);
    let mut specs: Vec<ParamMessage> = Vec::new();
    let mut counters = [0usize; 4];
    for field in old.fields() {
        let name = field.schema.name;
        let slot = ["param", "blob_share_mode", "blobs_lr", "weight_decay"]
            .iter()
            .position(|n| *n == name);
        match (name, slot) {
            ("type", _) => {
                let v1 = old.enum_name("type");
                let v2 = v2_type(v1).ok_or_else(|| format!("unknown V1 type {v1}"))?;
                layer.set("type", ParamValue::Str(v2.into()));
            }
            (_, Some(k)) => {
                let i = counters[k];
                counters[k] += 1;
                let target = ["name", "share_mode", "lr_mult", "decay_mult"][k];
                while specs.len() <= i {
                    specs.push(ParamMessage::new(&schema::PARAM_SPEC));
                }
                specs[i].set(target, field.value.clone());
            }
            _ => layer.set(name, field.value.clone()),
        }
    }
    for s in specs {
        layer.set("param", ParamValue::Message(s));
    }
    Ok(layer)
}

/// `input` with `input_shape` or `input_dim` becomes one `Input` layer
/// named `input`, first in the net (Caffe's `UpgradeNetInput`); names
/// without shapes (old model files) are dropped.
fn upgrade_inputs(net: &mut ParamMessage) -> Result<()> {
    let names: Vec<String> = net.strings("input").map(String::from).collect();
    if names.is_empty() {
        return Ok(());
    }
    let shapes: Vec<ParamMessage> = net.messages("input_shape").cloned().collect();
    let dims = net.ints("input_dim");
    let line = net.line_of("input");
    let mut shaped = Vec::new();
    if !shapes.is_empty() {
        if shapes.len() != names.len() {
            return Err(net_error(format!(
                "line {line}: {} inputs but {} input_shape entries (one each, please)",
                names.len(),
                shapes.len()
            )));
        }
        shaped = shapes;
    } else if !dims.is_empty() {
        if dims.len() != 4 * names.len() {
            return Err(net_error(format!(
                "line {line}: {} inputs need {} input_dim values (4 each), not {}",
                names.len(),
                4 * names.len(),
                dims.len()
            )));
        }
        for four in dims.chunks_exact(4) {
            let mut shape = ParamMessage::new(&schema::BLOB_SHAPE);
            for &d in four {
                shape.set("dim", ParamValue::Int(d));
            }
            shaped.push(shape);
        }
    }
    net.clear("input");
    net.clear("input_shape");
    net.clear("input_dim");
    if shaped.is_empty() {
        return Ok(());
    }
    let mut input = ParamMessage::new(&LAYER_PARAMETER);
    input.set("name", ParamValue::Str("input".into()));
    input.set("type", ParamValue::Str("Input".into()));
    for name in names {
        input.set("top", ParamValue::Str(name));
    }
    let param = input.message_mut("input_param");
    for shape in shaped {
        param.set("shape", ParamValue::Message(shape));
    }
    let layers: Vec<ParamMessage> = net.messages("layer").cloned().collect();
    net.clear("layer");
    net.set("layer", ParamValue::Message(input));
    for l in layers {
        net.set("layer", ParamValue::Message(l));
    }
    Ok(())
}

/// A BatchNorm layer with exactly three `param` specs learns none of its
/// statistics (Caffe's `UpgradeNetBatchNorm`).
fn upgrade_batch_norm(net: &mut ParamMessage) {
    let layers: Vec<ParamMessage> = net.messages("layer").cloned().collect();
    let old =
        |l: &ParamMessage| l.string("type") == "BatchNorm" && l.messages("param").count() == 3;
    if !layers.iter().any(old) {
        return;
    }
    // Caffe's UpgradeNetBatchNorm (BVLC master): the specs go; the layer's
    // statistics are not learned whatever a spec says.
    net.clear("layer");
    for mut l in layers {
        if old(&l) {
            l.clear("param");
        }
        net.set("layer", ParamValue::Message(l));
    }
}
