//! The steps of Caffe's `Net::Init` that rewrite the layer list before
//! any layer is built: `FilterNet` (which layers the state includes) and
//! `InsertSplits` (a Split wherever one top feeds several bottoms).

use std::collections::HashMap;

use blob_proto::{ParamMessage, ParamValue, schema};
use blob_runtime::{BlobError, Result};

/// Caffe's `Phase`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// `TRAIN`: dropout drops, batch norm learns its statistics.
    Train,
    /// `TEST`: deploy behaviour.
    Test,
}

impl Phase {
    /// Caffe's name, `TRAIN` or `TEST`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Train => "TRAIN",
            Self::Test => "TEST",
        }
    }
}

/// Caffe's `NetState`: the phase, level and stages that `include` and
/// `exclude` rules test.
///
/// ```
/// use blob_layers::net::{NetState, Phase};
/// let s = NetState::train().with_stage("deploy");
/// assert_eq!(s.phase, Phase::Train);
/// assert_eq!(s.stages, ["deploy"]);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetState {
    /// The phase; a layer with no `phase` of its own takes it.
    pub phase: Phase,
    /// The level (`min_level`/`max_level` rules).
    pub level: i32,
    /// The stages (`stage`/`not_stage` rules), appended to the file's.
    pub stages: Vec<String>,
}

impl NetState {
    /// The TEST phase, level 0, no stages (Caffe's default).
    pub fn test() -> Self {
        Self {
            phase: Phase::Test,
            level: 0,
            stages: Vec::new(),
        }
    }

    /// The TRAIN phase, level 0, no stages.
    pub fn train() -> Self {
        Self {
            phase: Phase::Train,
            ..Self::test()
        }
    }

    /// The same state with one more stage.
    pub fn with_stage(mut self, stage: &str) -> Self {
        self.stages.push(stage.to_string());
        self
    }
}

fn layer_error(layer: &ParamMessage, detail: String) -> BlobError {
    BlobError::Net {
        at: format!("layer '{}'", blob_proto::excerpt(layer.string("name"))),
        detail,
    }
}

/// Caffe's `StateMeetsRule`.
fn rule_met(rule: &ParamMessage, state: &NetState) -> bool {
    (!rule.has("phase") || rule.enum_name("phase") == state.phase.name())
        && (!rule.has("min_level") || i64::from(state.level) >= rule.int("min_level"))
        && (!rule.has("max_level") || i64::from(state.level) <= rule.int("max_level"))
        && rule
            .strings("stage")
            .all(|s| state.stages.iter().any(|t| t == s))
        && !rule
            .strings("not_stage")
            .any(|s| state.stages.iter().any(|t| t == s))
}

/// Caffe's `FilterNet`: the layers `state` includes, each with the net's
/// phase where it has none of its own.
pub(crate) fn filter(net: &ParamMessage, state: &NetState) -> Result<Vec<ParamMessage>> {
    let mut kept = Vec::new();
    for layer in net.messages("layer") {
        let include: Vec<&ParamMessage> = layer.messages("include").collect();
        let exclude: Vec<&ParamMessage> = layer.messages("exclude").collect();
        if !include.is_empty() && !exclude.is_empty() {
            return Err(layer_error(
                layer,
                "Specify either include rules or exclude rules; not both.".into(),
            ));
        }
        let included = if include.is_empty() {
            !exclude.iter().any(|r| rule_met(r, state))
        } else {
            include.iter().any(|r| rule_met(r, state))
        };
        if included {
            let mut layer = layer.clone();
            if !layer.has("phase") {
                let phase = schema::PHASE
                    .value(state.phase.name())
                    .expect("TRAIN and TEST are Phase values");
                layer.set("phase", ParamValue::Enum(phase));
            }
            kept.push(layer);
        }
    }
    Ok(kept)
}

/// An unknown bottom that a layer left out by its rules would have made
/// (a data layer for another phase or stage) gets a note saying so: the
/// net's state is the likelier mistake than the wiring.
pub(crate) fn explain_left_out(
    error: BlobError,
    net: &ParamMessage,
    state: &NetState,
) -> BlobError {
    let BlobError::Net { at, detail } = error else {
        return error;
    };
    let Some(blob) = detail
        .strip_prefix("Unknown bottom blob '")
        .and_then(|rest| rest.split_once('\''))
        .map(|(blob, _)| blob.to_string())
    else {
        return BlobError::Net { at, detail };
    };
    let maker = filter(net, state).ok().and_then(|kept| {
        net.messages("layer").find(|layer| {
            layer.strings("top").any(|t| t == blob)
                && !kept.iter().any(|k| {
                    k.string("name") == layer.string("name") && k.strings("top").any(|t| t == blob)
                })
        })
    });
    let Some(maker) = maker else {
        return BlobError::Net { at, detail };
    };
    let stages = if state.stages.is_empty() {
        "no stages".to_string()
    } else {
        format!("stages {}", state.stages.join(", "))
    };
    BlobError::Net {
        at,
        detail: format!(
            "{detail}; layer '{}' ({}) makes it but its include/exclude rules leave it out of \
             this net ({}, level {}, {stages}): build the net in the state it is for \
             (blobflow test --stage, a solver's test_state)",
            blob_proto::excerpt(maker.string("name")),
            blob_proto::excerpt(maker.string("type")),
            state.phase.name(),
            state.level
        ),
    }
}

fn split_layer_name(blob: &str, layer: &str, top: usize) -> String {
    format!("{blob}_{layer}_{top}_split")
}

fn split_blob_name(blob: &str, layer: &str, top: usize, k: usize) -> String {
    format!("{blob}_{layer}_{top}_split_{k}")
}

fn set_strings(layer: &mut ParamMessage, field: &str, values: &[String]) {
    layer.clear(field);
    for v in values {
        layer.set(field, ParamValue::Str(v.clone()));
    }
}

/// Caffe's `InsertSplits`: every top read by more than one bottom (a top
/// with a loss weight counts one read more) gets a Split layer right
/// after its producer, and its readers read the Split's tops in order.
pub(crate) fn insert_splits(layers: Vec<ParamMessage>) -> Result<Vec<ParamMessage>> {
    type Top = (usize, usize);
    let mut last_producer: HashMap<String, Top> = HashMap::new();
    let mut bottom_source: HashMap<(usize, usize), Top> = HashMap::new();
    let mut uses: HashMap<Top, usize> = HashMap::new();
    let mut loss_weight: HashMap<Top, f64> = HashMap::new();
    for (i, layer) in layers.iter().enumerate() {
        for (j, bottom) in layer.strings("bottom").enumerate() {
            let Some(&source) = last_producer.get(bottom) else {
                return Err(layer_error(
                    layer,
                    format!(
                        "Unknown bottom blob '{}' (layer '{}', bottom index {j})",
                        blob_proto::excerpt(bottom),
                        blob_proto::excerpt(layer.string("name"))
                    ),
                ));
            };
            bottom_source.insert((i, j), source);
            *uses.entry(source).or_default() += 1;
        }
        for (j, top) in layer.strings("top").enumerate() {
            last_producer.insert(top.to_string(), (i, j));
        }
        let tops = layer.strings("top").count();
        for (j, w) in layer
            .floats("loss_weight")
            .into_iter()
            .enumerate()
            .take(tops)
        {
            if w != 0.0 {
                loss_weight.insert((i, j), w);
                *uses.entry((i, j)).or_default() += 1;
            }
        }
    }
    let names: Vec<String> = layers
        .iter()
        .map(|l| l.string("name").to_string())
        .collect();
    let mut next_split: HashMap<Top, usize> = HashMap::new();
    let mut out = Vec::with_capacity(layers.len());
    for (i, mut layer) in layers.into_iter().enumerate() {
        let name = layer.string("name").to_string();
        let mut bottoms: Vec<String> = layer.strings("bottom").map(String::from).collect();
        for (j, bottom) in bottoms.iter_mut().enumerate() {
            let source = bottom_source[&(i, j)];
            if uses[&source] > 1 {
                let k = next_split.entry(source).or_default();
                *bottom = split_blob_name(bottom, &names[source.0], source.1, *k);
                *k += 1;
            }
        }
        set_strings(&mut layer, "bottom", &bottoms);
        let tops: Vec<String> = layer.strings("top").map(String::from).collect();
        let mut splits = Vec::new();
        for (j, top) in tops.iter().enumerate() {
            let count = uses.get(&(i, j)).copied().unwrap_or(0);
            if count <= 1 {
                continue;
            }
            let mut split = ParamMessage::new(&schema::LAYER_PARAMETER);
            split.set("name", ParamValue::Str(split_layer_name(top, &name, j)));
            split.set("type", ParamValue::Str("Split".into()));
            split.set("bottom", ParamValue::Str(top.clone()));
            if layer.has("phase") {
                split.set("phase", ParamValue::Enum(layer.int("phase") as i32));
            }
            let weight = loss_weight.get(&(i, j)).copied();
            for k in 0..count {
                split.set("top", ParamValue::Str(split_blob_name(top, &name, j, k)));
                if let Some(w) = weight {
                    split.set(
                        "loss_weight",
                        ParamValue::Float(if k == 0 { w } else { 0.0 }),
                    );
                }
            }
            if weight.is_some() {
                layer.clear("loss_weight");
                *next_split.entry((i, j)).or_default() = 1;
            }
            splits.push(split);
        }
        out.push(layer);
        out.extend(splits);
    }
    Ok(out)
}
