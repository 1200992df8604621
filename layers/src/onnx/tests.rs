//! The export's graph, read back from its bytes. The values it computes
//! are held to blobflow's by `scripts/onnx_peer.py`, through ONNX
//! Runtime and OpenVINO, on every shipped net.

use prost::Message;

use super::OnnxExport;
use super::proto::{DimensionValue, Model, Node};
use crate::net::{Net, NetState};

const NET: &str = r#"
name: "small"
input: "data" input_shape { dim: 2 dim: 3 dim: 9 dim: 9 }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
        convolution_param { num_output: 4 kernel_size: 3 pad: 1 group: 1 weight_filler { type: "xavier" } } }
layer { name: "relu" type: "ReLU" bottom: "conv" top: "conv" }
layer { name: "pool" type: "Pooling" bottom: "conv" top: "pool"
        pooling_param { pool: MAX kernel_size: 3 stride: 2 } }
layer { name: "drop" type: "Dropout" bottom: "pool" top: "pool" }
layer { name: "ip" type: "InnerProduct" bottom: "pool" top: "ip"
        inner_product_param { num_output: 5 weight_filler { type: "xavier" } } }
layer { name: "prob" type: "Softmax" bottom: "ip" top: "prob" }
"#;

fn exported(text: &str, export: &OnnxExport) -> blob_runtime::Result<Model> {
    let mut net = Net::<f32>::from_prototxt(text, NetState::test())?;
    let bytes = export.to_bytes(&mut net)?;
    Ok(Model::decode(bytes.as_slice()).expect("the export decodes as a ModelProto"))
}

fn node<'m>(model: &'m Model, name: &str) -> &'m Node {
    let graph = model.graph.as_ref().unwrap();
    graph
        .node
        .iter()
        .find(|n| n.name == name)
        .unwrap_or_else(|| panic!("no node {name}"))
}

fn ints(node: &Node, attribute: &str) -> Vec<i64> {
    node.attribute
        .iter()
        .find(|a| a.name == attribute)
        .unwrap_or_else(|| panic!("{} has no {attribute}", node.name))
        .ints
        .clone()
}

#[test]
fn a_net_becomes_opset_13_with_its_blob_names_and_a_dynamic_batch() {
    let model = exported(NET, &OnnxExport::new()).unwrap();
    assert_eq!(model.opset_import[0].version, 13);
    let graph = model.graph.as_ref().unwrap();
    let names =
        |v: &[super::proto::ValueInfo]| v.iter().map(|i| i.name.clone()).collect::<Vec<_>>();
    assert_eq!(names(&graph.input), ["data"]);
    assert_eq!(names(&graph.output), ["prob"]);
    let dims = &graph.input[0]
        .r#type
        .as_ref()
        .unwrap()
        .tensor_type
        .as_ref()
        .unwrap();
    let dims = &dims.shape.as_ref().unwrap().dim;
    assert_eq!(dims[0].value, Some(DimensionValue::DimParam("N".into())));
    assert_eq!(dims[1].value, Some(DimensionValue::DimValue(3)));
    let ops: Vec<&str> = graph.node.iter().map(|n| n.op_type.as_str()).collect();
    assert_eq!(
        ops,
        ["Conv", "Relu", "MaxPool", "Flatten", "Gemm", "Softmax"]
    );
    // The in-place ReLU writes the blob's last value; the convolution's
    // comes before it under another name.
    assert_eq!(node(&model, "conv").output, ["conv#1"]);
    assert_eq!(node(&model, "relu").input, ["conv#1"]);
    assert_eq!(node(&model, "relu").output, ["conv"]);
    // Dropout vanished: the inner product reads the pool.
    assert_eq!(node(&model, "ip.flatten").input, ["pool"]);
    // Learned blobs as initializers with the layers' names.
    let init: Vec<&str> = graph.initializer.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(init, ["conv.weight", "conv.bias", "ip.weight", "ip.bias"]);
    assert_eq!(graph.initializer[0].dims, [4, 3, 3, 3]);
    assert_eq!(graph.initializer[0].raw_data.len(), 4 * 4 * 27);
}

#[test]
fn caffes_rounding_up_of_pooling_becomes_padding_at_the_end() {
    // 9 -> (9 - 3) / 2 + 1 = 4 rounded down, 4 up: the same; 10 -> 4.5:
    // Caffe's 5 needs one more column of padding at the end.
    let model = exported(NET, &OnnxExport::new()).unwrap();
    assert_eq!(ints(node(&model, "pool"), "pads"), [0, 0, 0, 0]);
    let ten = NET.replace("dim: 9 dim: 9", "dim: 10 dim: 10");
    let model = exported(&ten, &OnnxExport::new()).unwrap();
    assert_eq!(ints(node(&model, "pool"), "pads"), [0, 0, 1, 1]);
    assert_eq!(ints(node(&model, "pool"), "kernel_shape"), [3, 3]);
}

#[test]
fn a_layer_onnx_cannot_express_is_refused_by_name_unless_left_out() {
    let with_argmax =
        format!(r#"{NET} layer {{ name: "best" type: "ArgMax" bottom: "prob" top: "best" }}"#);
    let e = exported(&with_argmax, &OnnxExport::new())
        .unwrap_err()
        .to_string();
    assert!(e.contains("'best'") && e.contains("ArgMax"), "{e}");
    let model = exported(&with_argmax, &OnnxExport::new().outputs(["prob"])).unwrap();
    let outputs = &model.graph.as_ref().unwrap().output;
    assert_eq!(outputs.len(), 1);
    assert_eq!(outputs[0].name, "prob");
    let e = exported(NET, &OnnxExport::new().outputs(["nowhere"]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("'nowhere'"), "{e}");
}

#[test]
fn an_output_taken_early_keeps_only_the_layers_it_needs() {
    let model = exported(NET, &OnnxExport::new().outputs(["pool"])).unwrap();
    let ops: Vec<&str> = model
        .graph
        .as_ref()
        .unwrap()
        .node
        .iter()
        .map(|n| n.op_type.as_str())
        .collect();
    assert_eq!(ops, ["Conv", "Relu", "MaxPool"]);
}

#[test]
fn save_writes_the_model_whole() {
    let dir = std::env::temp_dir().join(format!("onnx-save-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("small.onnx");
    let mut net = Net::<f32>::from_prototxt(NET, NetState::test()).unwrap();
    OnnxExport::new().save(&mut net, &path).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    assert!(Model::decode(bytes.as_slice()).is_ok());
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
    std::fs::remove_dir_all(&dir).unwrap();
}
