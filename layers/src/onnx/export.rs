//! The net walked layer by layer into an ONNX graph.

use std::collections::{HashMap, HashSet};

use blob_proto::ParamMessage;
use blob_runtime::Result;
use prost::Message;

use super::proto::{
    Attribute, Dimension, DimensionValue, Graph, Model, Node, OperatorSetId, Tensor, TensorShape,
    TensorType, TypeProto, ValueInfo, attribute_type, data_type,
};
use super::refused;
use crate::conv::ConvParam;
use crate::dyn_layer::sub_param;
use crate::net::Net;

/// The operator set written: Softmax along one axis, Clip and Slice
/// with inputs (checked with ONNX Runtime 1.32 and OpenVINO 2026.4 by
/// `scripts/onnx_peer.py`).
const OPSET: i64 = 13;
/// The IR version that goes with opset 13.
const IR_VERSION: i64 = 7;
/// The dynamic first axis of every input.
const BATCH: &str = "N";

/// The model of `net`, up to `outputs` where given.
pub(super) fn model(net: &mut Net<f32>, outputs: Option<&[String]>) -> Result<Vec<u8>> {
    net.forward()?;
    let net = &*net;
    let wanted: Vec<String> = match outputs {
        Some(o) => {
            for blob in o {
                if net.blob(blob).is_none() {
                    return Err(refused(format!(
                        "the output '{blob}' is no blob of the net"
                    )));
                }
            }
            o.to_vec()
        }
        None => net.outputs().iter().map(|s| s.to_string()).collect(),
    };
    let layers = needed_layers(net, &wanted);
    let mut g = GraphBuilder::new(net, &layers);
    for input in net.inputs() {
        let shape = net
            .blob(input)
            .map(|b| b.shape().to_vec())
            .unwrap_or_default();
        g.graph.input.push(value_info(input, &shape, true));
        g.current.insert(input.to_string(), input.to_string());
    }
    for name in &layers {
        g.layer(name)?;
    }
    for blob in &wanted {
        let value = g.read(blob)?;
        let shape = net
            .blob(blob)
            .map(|b| b.shape().to_vec())
            .unwrap_or_default();
        let dynamic = g.batched.contains(blob.as_str());
        if value != *blob {
            // An output read straight from an input, or one a vanished
            // layer (Dropout) only passed on: named the blob all the same.
            g.node("Identity", blob, vec![value], vec![blob.clone()], vec![]);
        }
        g.graph.output.push(value_info(blob, &shape, dynamic));
    }
    name_nodes_apart(&mut g.graph);
    let model = Model {
        ir_version: IR_VERSION,
        producer_name: "blobflow".into(),
        producer_version: env!("CARGO_PKG_VERSION").into(),
        graph: Some(g.graph),
        opset_import: vec![OperatorSetId {
            domain: String::new(),
            version: OPSET,
        }],
    };
    Ok(model.encode_to_vec())
}

/// Gives every node a name no other node and no initializer has: ONNX
/// keeps node and value names apart, but readers that make a node of
/// each initializer (tract) refuse a Scale's `conv1.bias` Add beside its
/// `conv1.bias` weights, and a layer's helper nodes share its name.
fn name_nodes_apart(graph: &mut Graph) {
    let mut taken: HashSet<String> = graph.initializer.iter().map(|t| t.name.clone()).collect();
    for node in &mut graph.node {
        let base = std::mem::take(&mut node.name);
        let mut name = base.clone();
        let mut k = 1;
        while taken.contains(&name) {
            k += 1;
            name = format!("{base}_{k}");
        }
        taken.insert(name.clone());
        node.name = name;
    }
}

/// The layers that the `wanted` blobs need, in the net's order.
fn needed_layers(net: &Net<f32>, wanted: &[String]) -> Vec<String> {
    let names: Vec<&str> = net.layer_names().collect();
    let mut need: HashSet<String> = wanted.iter().cloned().collect();
    let mut keep = Vec::new();
    for name in names.iter().rev() {
        let tops = net.layer_tops(name).unwrap_or_default();
        if tops.iter().any(|t| need.contains(*t)) {
            keep.push(name.to_string());
            for b in net.layer_bottoms(name).unwrap_or_default() {
                need.insert(b.to_string());
            }
        }
    }
    keep.reverse();
    keep
}

/// A graph input's or output's type: f32 of `shape`, its first axis the
/// dynamic batch where `dynamic`.
fn value_info(name: &str, shape: &[usize], dynamic: bool) -> ValueInfo {
    let dim = shape
        .iter()
        .enumerate()
        .map(|(a, &d)| Dimension {
            value: Some(if a == 0 && dynamic {
                DimensionValue::DimParam(BATCH.into())
            } else {
                DimensionValue::DimValue(d as i64)
            }),
        })
        .collect();
    ValueInfo {
        name: name.into(),
        r#type: Some(TypeProto {
            tensor_type: Some(TensorType {
                elem_type: data_type::FLOAT,
                shape: Some(TensorShape { dim }),
            }),
        }),
    }
}

fn ints(name: &str, v: impl IntoIterator<Item = usize>) -> Attribute {
    Attribute {
        name: name.into(),
        ints: v.into_iter().map(|x| x as i64).collect(),
        r#type: attribute_type::INTS,
        ..Default::default()
    }
}

fn int(name: &str, v: i64) -> Attribute {
    Attribute {
        name: name.into(),
        i: v,
        r#type: attribute_type::INT,
        ..Default::default()
    }
}

fn string(name: &str, v: &str) -> Attribute {
    Attribute {
        name: name.into(),
        s: v.as_bytes().to_vec(),
        r#type: attribute_type::STRING,
        ..Default::default()
    }
}

fn float(name: &str, v: f64) -> Attribute {
    Attribute {
        name: name.into(),
        f: v as f32,
        r#type: attribute_type::FLOAT,
        ..Default::default()
    }
}

/// A (height, width) setting of a `pooling_param`: `name`, or its `_h`
/// and `_w` pair, or `default`.
fn pool_pair(p: &ParamMessage, name: &str, default: usize) -> [usize; 2] {
    if p.has(name) {
        [p.uint(name) as usize; 2]
    } else if p.has(&format!("{name}_h")) {
        [
            p.uint(&format!("{name}_h")) as usize,
            p.uint(&format!("{name}_w")) as usize,
        ]
    } else {
        [default; 2]
    }
}

/// The graph under construction and the names of the net's values.
struct GraphBuilder<'n> {
    net: &'n Net<f32>,
    graph: Graph,
    /// Each blob's latest value's name.
    current: HashMap<String, String>,
    /// How many layers still write each blob (the last one names it).
    writes_left: HashMap<String, usize>,
    /// Blobs whose first axis is the batch (all but constants).
    batched: HashSet<String>,
    /// Names of values made here (initializers and helper outputs).
    made: HashSet<String>,
}

impl<'n> GraphBuilder<'n> {
    fn new(net: &'n Net<f32>, layers: &[String]) -> Self {
        let mut writes_left: HashMap<String, usize> = HashMap::new();
        // Layers that vanish (they pass their bottom on) write nothing.
        let writers = layers
            .iter()
            .filter(|l| !matches!(net.layer_type(l), Some("Split" | "Dropout" | "Silence")));
        for name in writers {
            for t in net.layer_tops(name).unwrap_or_default() {
                *writes_left.entry(t.to_string()).or_default() += 1;
            }
        }
        let batched = net.inputs().iter().map(|s| s.to_string()).collect();
        Self {
            net,
            graph: Graph {
                name: net.name().to_string(),
                ..Default::default()
            },
            current: HashMap::new(),
            writes_left,
            batched,
            made: HashSet::new(),
        }
    }

    /// The name of blob `blob`'s value now.
    fn read(&self, blob: &str) -> Result<String> {
        self.current.get(blob).cloned().ok_or_else(|| {
            refused(format!(
                "the blob '{blob}' is read before any layer writes it"
            ))
        })
    }

    /// A fresh name for a new value of `blob`: the blob's own for its
    /// last writer, `blob#k` before.
    fn write(&mut self, blob: &str) -> String {
        let left = self.writes_left.entry(blob.to_string()).or_insert(1);
        *left = left.saturating_sub(1);
        let name = if *left == 0 {
            blob.to_string()
        } else {
            let mut k = 1;
            while self.made.contains(&format!("{blob}#{k}")) {
                k += 1;
            }
            format!("{blob}#{k}")
        };
        self.made.insert(name.clone());
        self.current.insert(blob.to_string(), name.clone());
        name
    }

    /// A helper value's name, unique in the graph.
    fn fresh(&mut self, base: &str) -> String {
        let mut name = base.to_string();
        let mut k = 1;
        while self.made.contains(&name) || self.current.contains_key(&name) {
            k += 1;
            name = format!("{base}_{k}");
        }
        self.made.insert(name.clone());
        name
    }

    fn node(
        &mut self,
        op: &str,
        name: &str,
        input: Vec<String>,
        output: Vec<String>,
        attribute: Vec<Attribute>,
    ) {
        self.graph.node.push(Node {
            input,
            output,
            name: name.into(),
            op_type: op.into(),
            attribute,
        });
    }

    /// A node `name` of `op` computing one intermediate value, named as
    /// the node is (made unique); returns the value's name.
    fn helper(
        &mut self,
        op: &str,
        name: &str,
        input: Vec<String>,
        attribute: Vec<Attribute>,
    ) -> String {
        let out = self.fresh(name);
        self.node(op, name, input, vec![out.clone()], attribute);
        out
    }

    /// An f32 initializer of `dims` holding `values`; returns its name.
    fn constant(&mut self, name: &str, dims: &[usize], values: &[f32]) -> String {
        let name = self.fresh(name);
        self.graph.initializer.push(Tensor {
            dims: dims.iter().map(|&d| d as i64).collect(),
            data_type: data_type::FLOAT,
            name: name.clone(),
            raw_data: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        });
        name
    }

    /// An int64 initializer (a shape, Slice's bounds); returns its name.
    fn constant_i64(&mut self, name: &str, values: &[i64]) -> String {
        let name = self.fresh(name);
        self.graph.initializer.push(Tensor {
            dims: vec![values.len() as i64],
            data_type: data_type::INT64,
            name: name.clone(),
            raw_data: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        });
        name
    }

    /// The `index`-th learned blob of layer `layer`, as an initializer
    /// named `layer.what`, reshaped to `dims` (its own shape if `None`).
    fn learned(
        &mut self,
        layer: &str,
        index: usize,
        what: &str,
        dims: Option<&[usize]>,
    ) -> Result<String> {
        let blobs = self.net.layer_blobs(layer).unwrap_or(&[]);
        let blob = blobs.get(index).ok_or_else(|| {
            refused(format!(
                "layer '{layer}' has no learned blob {index} ({what})"
            ))
        })?;
        let values = blob.cpu_data()?.to_vec();
        let shape = blob.shape().to_vec();
        let dims = dims.map_or(shape, <[usize]>::to_vec);
        Ok(self.constant(&format!("{layer}.{what}"), &dims, &values))
    }

    fn shape_of(&self, blob: &str) -> Vec<usize> {
        self.net
            .blob(blob)
            .map(|b| b.shape().to_vec())
            .unwrap_or_default()
    }

    /// One layer's nodes.
    fn layer(&mut self, name: &str) -> Result<()> {
        let net = self.net;
        let kind = net.layer_type(name).unwrap_or("").to_string();
        let bottoms: Vec<String> = net
            .layer_bottoms(name)
            .unwrap_or_default()
            .into_iter()
            .map(String::from)
            .collect();
        let tops: Vec<String> = net
            .layer_tops(name)
            .unwrap_or_default()
            .into_iter()
            .map(String::from)
            .collect();
        let param = net
            .layer_param(name)
            .cloned()
            .ok_or_else(|| refused(format!("no layer '{name}'")))?;
        let inputs: Vec<String> = bottoms
            .iter()
            .map(|b| self.read(b))
            .collect::<Result<_>>()?;
        // Every top of a layer that reads a batched blob is batched.
        if bottoms.iter().any(|b| self.batched.contains(b)) {
            for t in &tops {
                self.batched.insert(t.clone());
            }
        }
        let first = || {
            inputs
                .first()
                .cloned()
                .ok_or_else(|| refused(format!("layer '{name}' has no bottom")))
        };
        let one_top = |tops: &[String]| {
            tops.first()
                .cloned()
                .ok_or_else(|| refused(format!("layer '{name}' has no top")))
        };
        match kind.as_str() {
            "Input" => {
                // Declared by `input:` or an Input layer: graph inputs.
                let fresh: Vec<String> = tops
                    .iter()
                    .filter(|t| !self.current.contains_key(*t))
                    .cloned()
                    .collect();
                for t in &fresh {
                    let shape = self.shape_of(t);
                    self.graph.input.push(value_info(t, &shape, true));
                    self.current.insert(t.clone(), t.clone());
                    self.batched.insert(t.clone());
                }
            }
            "Split" | "Dropout" => {
                let x = first()?;
                for t in &tops {
                    self.current.insert(t.clone(), x.clone());
                }
            }
            "Silence" => {}
            "Convolution" | "Deconvolution" => {
                self.convolution(name, &kind, &param, first()?, one_top(&tops)?)?
            }
            "Reorg" => {
                let reorg = crate::reorg::ReorgLayer::from_param(&param)?;
                let dims = reorg.dims_of(&self.shape_of(&bottoms[0]))?;
                let (six, order, out) = reorg.as_reshapes(dims);
                let six = self.constant_i64(&format!("{name}.6d"), &six);
                let viewed = self.helper(
                    "Reshape",
                    &format!("{name}/6d"),
                    vec![first()?, six],
                    vec![],
                );
                let moved = self.helper(
                    "Transpose",
                    &format!("{name}/moved"),
                    vec![viewed],
                    vec![ints("perm", order.to_vec())],
                );
                let out = self.constant_i64(&format!("{name}.shape"), &out);
                let y = self.write(&one_top(&tops)?);
                self.node("Reshape", name, vec![moved, out], vec![y], vec![]);
            }
            "Upsample" => {
                let scales = crate::upsample::UpsampleLayer::from_param(&param)?
                    .nearest_scales()
                    .ok_or_else(|| {
                        refused(format!(
                            "layer '{name}': SegNet's unpooling Upsample has no ONNX form"
                        ))
                    })?;
                // Nearest at integer scales, asymmetric and rounded down:
                // each value repeated, as YOLO's fork repeats it.
                let roi = self.constant(&format!("{name}.roi"), &[0], &[]);
                let factors = [1.0, 1.0, scales[0] as f32, scales[1] as f32];
                let factors = self.constant(&format!("{name}.scales"), &[4], &factors);
                let y = self.write(&one_top(&tops)?);
                self.node(
                    "Resize",
                    name,
                    vec![first()?, roi, factors],
                    vec![y],
                    vec![
                        string("mode", "nearest"),
                        string("coordinate_transformation_mode", "asymmetric"),
                        string("nearest_mode", "floor"),
                    ],
                );
            }
            "Pooling" => self.pooling(name, &param, first()?, &bottoms[0], one_top(&tops)?)?,
            "InnerProduct" => self.inner_product(name, &param, first()?, one_top(&tops)?)?,
            "ReLU" => {
                let slope = sub_param(&param, "relu_param").float("negative_slope");
                let y = self.write(&one_top(&tops)?);
                if slope == 0.0 {
                    self.node("Relu", name, vec![first()?], vec![y], vec![]);
                } else {
                    self.node(
                        "LeakyRelu",
                        name,
                        vec![first()?],
                        vec![y],
                        vec![float("alpha", slope)],
                    );
                }
            }
            "ReLU6" => {
                let lo = self.constant(&format!("{name}.min"), &[], &[0.0]);
                let hi = self.constant(&format!("{name}.max"), &[], &[6.0]);
                let y = self.write(&one_top(&tops)?);
                self.node("Clip", name, vec![first()?, lo, hi], vec![y], vec![]);
            }
            "Sigmoid" | "TanH" | "AbsVal" | "BNLL" => {
                let op = match kind.as_str() {
                    "Sigmoid" => "Sigmoid",
                    "TanH" => "Tanh",
                    "AbsVal" => "Abs",
                    _ => "Softplus",
                };
                let y = self.write(&one_top(&tops)?);
                self.node(op, name, vec![first()?], vec![y], vec![]);
            }
            "ELU" => {
                let alpha = sub_param(&param, "elu_param").float("alpha");
                let y = self.write(&one_top(&tops)?);
                self.node(
                    "Elu",
                    name,
                    vec![first()?],
                    vec![y],
                    vec![float("alpha", alpha)],
                );
            }
            "Power" => self.power(name, &param, first()?, one_top(&tops)?)?,
            "PReLU" => {
                let rank = self.shape_of(&bottoms[0]).len();
                let slope = &net.layer_blobs(name).unwrap_or(&[])[0];
                let mut dims = slope.shape().to_vec();
                dims.resize(rank.saturating_sub(1).max(dims.len()), 1);
                let s = self.learned(name, 0, "slope", Some(&dims))?;
                let y = self.write(&one_top(&tops)?);
                self.node("PRelu", name, vec![first()?, s], vec![y], vec![]);
            }
            "Softmax" => {
                let axis = sub_param(&param, "softmax_param").int("axis");
                let y = self.write(&one_top(&tops)?);
                self.node(
                    "Softmax",
                    name,
                    vec![first()?],
                    vec![y],
                    vec![int("axis", axis)],
                );
            }
            "Concat" => {
                let p = sub_param(&param, "concat_param");
                let axis = if p.has("concat_dim") {
                    p.uint("concat_dim") as i64
                } else {
                    p.int("axis")
                };
                let y = self.write(&one_top(&tops)?);
                self.node(
                    "Concat",
                    name,
                    inputs.clone(),
                    vec![y],
                    vec![int("axis", axis)],
                );
            }
            "Eltwise" => self.eltwise(name, &param, &inputs, one_top(&tops)?)?,
            "LRN" => self.lrn(name, &param, first()?, one_top(&tops)?)?,
            "BatchNorm" => self.batch_norm(name, &param, first()?, one_top(&tops)?)?,
            "Scale" | "Bias" => {
                self.scale(name, &kind, &param, &inputs, &bottoms[0], one_top(&tops)?)?
            }
            "Flatten" | "Reshape" => {
                let top = one_top(&tops)?;
                let mut shape: Vec<i64> = self.shape_of(&top).iter().map(|&d| d as i64).collect();
                if self.batched.contains(&top) && !shape.is_empty() {
                    // The batch stays the input's, whatever its size.
                    shape[0] = 0;
                }
                let s = self.constant_i64(&format!("{name}.shape"), &shape);
                let y = self.write(&top);
                self.node("Reshape", name, vec![first()?, s], vec![y], vec![]);
            }
            "Permute" => {
                let rank = self.shape_of(&bottoms[0]).len();
                let mut order: Vec<usize> = sub_param(&param, "permute_param")
                    .uints("order")
                    .into_iter()
                    .map(|o| o as usize)
                    .collect();
                for a in 0..rank {
                    if !order.contains(&a) {
                        order.push(a);
                    }
                }
                let y = self.write(&one_top(&tops)?);
                self.node(
                    "Transpose",
                    name,
                    vec![first()?],
                    vec![y],
                    vec![ints("perm", order)],
                );
            }
            "Crop" => self.crop(name, &param, &inputs, &bottoms, one_top(&tops)?)?,
            "Normalize" => self.normalize(name, &param, first()?, one_top(&tops)?)?,
            "PriorBox" => {
                // Its values depend on the shapes alone: a constant.
                let top = one_top(&tops)?;
                let blob = net
                    .blob(&top)
                    .ok_or_else(|| refused(format!("no blob '{top}'")))?;
                let (dims, values) = (blob.shape().to_vec(), blob.cpu_data()?.to_vec());
                let c = self.constant(&format!("{name}.priors"), &dims, &values);
                let y = self.write(&top);
                self.node("Identity", name, vec![c], vec![y], vec![]);
                self.batched.remove(&top);
            }
            other => {
                return Err(refused(format!(
                    "layer '{name}' (type {other}) has no ONNX form; export up to its bottoms \
                     with the outputs option (`--outputs` of `blobflow convert`)"
                )));
            }
        }
        Ok(())
    }

    fn convolution(
        &mut self,
        name: &str,
        kind: &str,
        param: &ParamMessage,
        x: String,
        top: String,
    ) -> Result<()> {
        let p = ConvParam::from_layer(param)?;
        let bottom = self
            .net
            .layer_bottoms(name)
            .and_then(|b| b.first().map(|b| self.shape_of(b)))
            .unwrap_or_default();
        let rank = if bottom.is_empty() { 4 } else { bottom.len() };
        // The group the layer was built with: the depthwise forks' types,
        // built as convolutions of group num_output where the prototxt
        // gives none, keep their parameters with group's default filled.
        let per_group = self
            .net
            .layer_blobs(name)
            .and_then(|b| b.first().and_then(|w| w.shape().get(1).copied()));
        let group = match (kind, bottom.get(1), per_group) {
            ("Convolution", Some(&channels), Some(per_group)) if per_group > 0 => {
                channels / per_group
            }
            _ => p.group,
        };
        let axes = rank.saturating_sub(2);
        let w = p.window(axes)?;
        let weight = self.learned(name, 0, "weight", None)?;
        let mut input = vec![x, weight];
        if p.bias_term {
            input.push(self.learned(name, 1, "bias", None)?);
        }
        let pads: Vec<usize> = w.pad.iter().chain(&w.pad).copied().collect();
        let attributes = vec![
            ints("kernel_shape", w.kernel.clone()),
            ints("strides", w.stride.clone()),
            ints("pads", pads),
            ints("dilations", w.dilation.clone()),
            int("group", group as i64),
        ];
        let op = if kind == "Convolution" {
            "Conv"
        } else {
            "ConvTranspose"
        };
        let y = self.write(&top);
        self.node(op, name, input, vec![y], attributes);
        Ok(())
    }

    fn pooling(
        &mut self,
        name: &str,
        param: &ParamMessage,
        x: String,
        bottom: &str,
        top: String,
    ) -> Result<()> {
        let p = sub_param(param, "pooling_param");
        let max = match p.enum_name("pool") {
            "MAX" => true,
            "AVE" => false,
            other => {
                return Err(refused(format!(
                    "layer '{name}': pool {other} has no ONNX form"
                )));
            }
        };
        let y = self.write(&top);
        if p.boolean("global_pooling") {
            let op = if max {
                "GlobalMaxPool"
            } else {
                "GlobalAveragePool"
            };
            self.node(op, name, vec![x], vec![y], vec![]);
            return Ok(());
        }
        let (input, output) = (self.shape_of(bottom), self.shape_of(&top));
        let kernel = pool_pair(&p, "kernel_size", 0);
        let stride = pool_pair(&p, "stride", 1);
        let pad = pool_pair(&p, "pad", 0);
        // Caffe rounds the output up; ONNX readers differ on how they
        // clip a window starting in the padding, so the windows Caffe
        // adds are given as padding at the end and rounded down.
        let extra: Vec<usize> = (0..2)
            .map(|a| {
                let reach = (output[2 + a].saturating_sub(1)) * stride[a] + kernel[a];
                reach.saturating_sub(input[2 + a] + 2 * pad[a])
            })
            .collect();
        let pads = vec![pad[0], pad[1], pad[0] + extra[0], pad[1] + extra[1]];
        let mut attributes = vec![
            ints("kernel_shape", kernel),
            ints("strides", stride),
            ints("pads", pads),
        ];
        if max {
            self.node("MaxPool", name, vec![x], vec![y], attributes);
            return Ok(());
        }
        // Caffe divides by the window clipped to the padded input: the
        // padding counts, what lies past it does not.
        let has_pad = pad != [0, 0];
        if has_pad && extra.iter().any(|&e| e > 0) {
            return Err(refused(format!(
                "layer '{name}': AVE pooling with padding whose last window runs past it \
                 divides as no ONNX AveragePool does"
            )));
        }
        attributes.push(int("count_include_pad", i64::from(has_pad)));
        self.node("AveragePool", name, vec![x], vec![y], attributes);
        Ok(())
    }

    fn inner_product(
        &mut self,
        name: &str,
        param: &ParamMessage,
        x: String,
        top: String,
    ) -> Result<()> {
        let p = sub_param(param, "inner_product_param");
        let axis = p.int("axis");
        let flat = self.helper(
            "Flatten",
            &format!("{name}.flatten"),
            vec![x],
            vec![int("axis", axis)],
        );
        let weight = self.learned(name, 0, "weight", None)?;
        let mut input = vec![flat, weight];
        if p.boolean("bias_term") {
            input.push(self.learned(name, 1, "bias", None)?);
        }
        let trans_b = i64::from(!p.boolean("transpose"));
        let y = self.write(&top);
        self.node("Gemm", name, input, vec![y], vec![int("transB", trans_b)]);
        Ok(())
    }

    fn power(&mut self, name: &str, param: &ParamMessage, x: String, top: String) -> Result<()> {
        let p = sub_param(param, "power_param");
        let (power, scale, shift) = (p.float("power"), p.float("scale"), p.float("shift"));
        let mut v = x;
        if scale != 1.0 {
            let s = self.constant(&format!("{name}.scale"), &[], &[scale as f32]);
            let out = self.helper("Mul", &format!("{name}.scale"), vec![v, s], vec![]);
            v = out;
        }
        if shift != 0.0 {
            let s = self.constant(&format!("{name}.shift"), &[], &[shift as f32]);
            let out = self.helper("Add", &format!("{name}.shift"), vec![v, s], vec![]);
            v = out;
        }
        let y = self.write(&top);
        let e = self.constant(&format!("{name}.power"), &[], &[power as f32]);
        self.node("Pow", name, vec![v, e], vec![y], vec![]);
        Ok(())
    }

    fn eltwise(
        &mut self,
        name: &str,
        param: &ParamMessage,
        inputs: &[String],
        top: String,
    ) -> Result<()> {
        let p = sub_param(param, "eltwise_param");
        let coeffs = p.floats("coeff");
        let op = p.enum_name("operation");
        let mut terms = inputs.to_vec();
        if op == "SUM" && !coeffs.is_empty() && coeffs.iter().any(|&c| c != 1.0) {
            for (i, (t, &c)) in terms.iter_mut().zip(&coeffs).enumerate() {
                let k = self.constant(&format!("{name}.coeff{i}"), &[], &[c as f32]);
                let out = self.helper(
                    "Mul",
                    &format!("{name}.coeff{i}"),
                    vec![t.clone(), k],
                    vec![],
                );
                *t = out;
            }
        }
        let onnx = match op {
            "SUM" => "Sum",
            "PROD" => "Mul",
            "MAX" => "Max",
            other => {
                return Err(refused(format!(
                    "layer '{name}': operation {other} has no ONNX form"
                )));
            }
        };
        let y = self.write(&top);
        if onnx == "Mul" {
            // Mul takes two: a chain.
            let mut acc = terms[0].clone();
            for (i, t) in terms.iter().enumerate().skip(1) {
                let out = if i + 1 == terms.len() {
                    y.clone()
                } else {
                    self.fresh(&format!("{name}.product{i}"))
                };
                self.node(
                    "Mul",
                    &format!("{name}.{i}"),
                    vec![acc, t.clone()],
                    vec![out.clone()],
                    vec![],
                );
                acc = out;
            }
            return Ok(());
        }
        self.node(onnx, name, terms, vec![y], vec![]);
        Ok(())
    }

    fn lrn(&mut self, name: &str, param: &ParamMessage, x: String, top: String) -> Result<()> {
        let p = sub_param(param, "lrn_param");
        let size = p.uint("local_size") as usize;
        let (alpha, beta, k) = (p.float("alpha"), p.float("beta"), p.float("k"));
        let y = self.write(&top);
        if p.enum_name("norm_region") != "WITHIN_CHANNEL" {
            let attributes = vec![
                int("size", size as i64),
                float("alpha", alpha),
                float("beta", beta),
                float("bias", k),
            ];
            self.node("LRN", name, vec![x], vec![y], attributes);
            return Ok(());
        }
        // Caffe's within-channel LRN: x (1 + alpha * mean over the
        // size x size window, padding counted, of x^2)^-beta.
        let sq = self.helper(
            "Mul",
            &format!("{name}.square"),
            vec![x.clone(), x.clone()],
            vec![],
        );
        let pad = (size - 1) / 2;
        let mean = self.helper(
            "AveragePool",
            &format!("{name}.mean"),
            vec![sq],
            vec![
                ints("kernel_shape", [size, size]),
                ints("pads", [pad, pad, pad, pad]),
                int("count_include_pad", 1),
            ],
        );
        let a = self.constant(&format!("{name}.alpha"), &[], &[alpha as f32]);
        let one = self.constant(&format!("{name}.one"), &[], &[1.0]);
        let nb = self.constant(&format!("{name}.beta"), &[], &[-beta as f32]);
        let scaled = self.helper("Mul", &format!("{name}.alpha"), vec![mean, a], vec![]);
        let shifted = self.helper("Add", &format!("{name}.one"), vec![scaled, one], vec![]);
        let factor = self.helper("Pow", &format!("{name}.beta"), vec![shifted, nb], vec![]);
        self.node("Mul", name, vec![x, factor], vec![y], vec![]);
        Ok(())
    }

    fn batch_norm(
        &mut self,
        name: &str,
        param: &ParamMessage,
        x: String,
        top: String,
    ) -> Result<()> {
        let eps = sub_param(param, "batch_norm_param").float("eps");
        let blobs = self.net.layer_blobs(name).unwrap_or(&[]);
        if blobs.len() < 3 {
            return Err(refused(format!(
                "layer '{name}' has {} of BatchNorm's 3 blobs",
                blobs.len()
            )));
        }
        // Caffe keeps the sums and their weight: the statistics are the
        // quotients (0 where the weight is 0).
        let factor = blobs[2].cpu_data()?.first().copied().unwrap_or(0.0);
        let factor = if factor == 0.0 { 0.0 } else { 1.0 / factor };
        let mean: Vec<f32> = blobs[0].cpu_data()?.iter().map(|v| v * factor).collect();
        let var: Vec<f32> = blobs[1].cpu_data()?.iter().map(|v| v * factor).collect();
        let c = mean.len();
        let mean = self.constant(&format!("{name}.running_mean"), &[c], &mean);
        let var = self.constant(&format!("{name}.running_var"), &[c], &var);
        let scale = self.constant(&format!("{name}.weight"), &[c], &vec![1.0; c]);
        let bias = self.constant(&format!("{name}.bias"), &[c], &vec![0.0; c]);
        let y = self.write(&top);
        self.node(
            "BatchNormalization",
            name,
            vec![x, scale, bias, mean, var],
            vec![y],
            vec![float("epsilon", eps)],
        );
        Ok(())
    }

    fn scale(
        &mut self,
        name: &str,
        kind: &str,
        param: &ParamMessage,
        inputs: &[String],
        bottom: &str,
        top: String,
    ) -> Result<()> {
        let p = sub_param(
            param,
            if kind == "Scale" {
                "scale_param"
            } else {
                "bias_param"
            },
        );
        let rank = self.shape_of(bottom).len();
        let axis = p.int("axis");
        let axis = if axis < 0 { rank as i64 + axis } else { axis } as usize;
        // The factor's shape, padded with trailing 1s so that it
        // broadcasts from `axis` on.
        let broadcast = |shape: &[usize]| {
            let mut dims = shape.to_vec();
            dims.resize(rank.saturating_sub(axis).max(dims.len()), 1);
            dims
        };
        let mut v = inputs[0].clone();
        let y = self.write(&top);
        let (factor, bias) = if inputs.len() > 1 {
            // The factor (or bias) from a second bottom.
            let second = self.net.layer_bottoms(name).unwrap_or_default()[1].to_string();
            let shape = broadcast(&self.shape_of(&second));
            let dims: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
            let s = self.constant_i64(&format!("{name}.shape"), &dims);
            let shaped = self.helper(
                "Reshape",
                &format!("{name}.second"),
                vec![inputs[1].clone(), s],
                vec![],
            );
            if kind == "Scale" {
                (Some(shaped), None)
            } else {
                (None, Some(shaped))
            }
        } else {
            let blobs = self.net.layer_blobs(name).unwrap_or(&[]);
            let first = blobs.first().map(|b| broadcast(b.shape()));
            match kind {
                "Scale" => {
                    let f = self.learned(name, 0, "weight", first.as_deref())?;
                    let b = if p.boolean("bias_term") {
                        let dims = blobs.get(1).map(|b| broadcast(b.shape()));
                        Some(self.learned(name, 1, "bias", dims.as_deref())?)
                    } else {
                        None
                    };
                    (Some(f), b)
                }
                _ => (None, Some(self.learned(name, 0, "bias", first.as_deref())?)),
            }
        };
        if let Some(f) = factor {
            let out = if bias.is_some() {
                self.fresh(&format!("{name}.scaled"))
            } else {
                y.clone()
            };
            self.node("Mul", name, vec![v, f], vec![out.clone()], vec![]);
            v = out;
        }
        if let Some(b) = bias {
            self.node("Add", &format!("{name}.bias"), vec![v, b], vec![y], vec![]);
        }
        Ok(())
    }

    fn crop(
        &mut self,
        name: &str,
        param: &ParamMessage,
        inputs: &[String],
        bottoms: &[String],
        top: String,
    ) -> Result<()> {
        let p = sub_param(param, "crop_param");
        let shape = self.shape_of(&bottoms[0]);
        // The cropped sizes are the top's (the reference's, from `axis`).
        let cropped = self.shape_of(&top);
        let rank = shape.len() as i64;
        let axis = p.int("axis");
        let axis = if axis < 0 { rank + axis } else { axis } as usize;
        let offsets = p.uints("offset");
        let (mut starts, mut ends, mut axes) = (vec![], vec![], vec![]);
        for (a, &size) in cropped.iter().enumerate().skip(axis) {
            let o = match offsets.len() {
                0 => 0,
                1 => offsets[0],
                _ => offsets.get(a - axis).copied().unwrap_or(0),
            } as i64;
            starts.push(o);
            ends.push(o + size as i64);
            axes.push(a as i64);
        }
        let s = self.constant_i64(&format!("{name}.starts"), &starts);
        let e = self.constant_i64(&format!("{name}.ends"), &ends);
        let a = self.constant_i64(&format!("{name}.axes"), &axes);
        let y = self.write(&top);
        self.node(
            "Slice",
            name,
            vec![inputs[0].clone(), s, e, a],
            vec![y],
            vec![],
        );
        Ok(())
    }

    fn normalize(
        &mut self,
        name: &str,
        param: &ParamMessage,
        x: String,
        top: String,
    ) -> Result<()> {
        let p = sub_param(param, "norm_param");
        let eps = p.float("eps");
        let axes: Vec<usize> = if p.boolean("across_spatial") {
            vec![1, 2, 3]
        } else {
            vec![1]
        };
        let sum = self.helper(
            "ReduceSumSquare",
            &format!("{name}.sum"),
            vec![x.clone()],
            vec![ints("axes", axes), int("keepdims", 1)],
        );
        let e = self.constant(&format!("{name}.eps"), &[], &[eps as f32]);
        let padded = self.helper("Add", &format!("{name}.eps"), vec![sum, e], vec![]);
        let norm = self.helper("Sqrt", &format!("{name}.norm"), vec![padded], vec![]);
        let unit = self.helper("Div", &format!("{name}.unit"), vec![x, norm], vec![]);
        let blobs = self.net.layer_blobs(name).unwrap_or(&[]);
        let c = blobs.first().map_or(1, |b| b.count());
        let dims = if p.boolean("channel_shared") {
            vec![1]
        } else {
            vec![c, 1, 1]
        };
        let s = self.learned(name, 0, "weight", Some(&dims))?;
        let y = self.write(&top);
        self.node("Mul", name, vec![unit, s], vec![y], vec![]);
        Ok(())
    }
}
