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

#[test]
fn a_typed_nets_trained_weights_export_under_its_layer_names() {
    use crate::solver::SgdSolver;
    use crate::typed_net::*;
    blob_runtime::blob!(pub shape Digits = _, 1, 12, 12);
    blob_runtime::blob!(pub shape Classes = _);
    // Declared typed, trained a step, saved as a .caffemodel, loaded into
    // the deploy net of the same declaration, exported.
    let declare = |train: bool| {
        let mut n = NetSpec::<f32>::new("typed");
        let data = n.input::<Digits>("data");
        let x = n.add(
            "conv",
            &data,
            Conv::<4, 3>::new().weight_filler(Filler::xavier()),
        );
        let x = n.add("pool", &x, Pool::<2, 2>::max());
        let x = n.add("relu", x, Neuron::relu());
        let scores = n.add("ip", &x, Fc::<3>::new().weight_filler(Filler::xavier()));
        if train {
            let label = n.input::<Classes>("label");
            let _loss = n.add("loss", (&scores, &label), SoftmaxLoss::new());
        } else {
            let _prob = n.add("prob", &scores, Prob);
        }
        n.batch(2);
        n
    };
    let mut train = declare(true).build(NetState::train()).unwrap();
    train
        .blob("data")
        .unwrap()
        .mutable_cpu_data()
        .unwrap()
        .fill(0.5);
    train.clear_param_diffs().unwrap();
    train.forward().unwrap();
    train.backward().unwrap();
    SgdSolver::lenet()
        .step(&train.param_blobs(), &train.param_specs())
        .unwrap();
    let model =
        blob_runtime::CaffeModel::from_bytes(&train.to_model().unwrap().to_bytes().unwrap())
            .unwrap();
    let mut deploy = declare(false).build(NetState::test()).unwrap();
    assert_eq!(deploy.copy_from(&model).unwrap().copied, ["conv", "ip"]);
    let onnx = Model::decode(OnnxExport::new().to_bytes(&mut deploy).unwrap().as_slice()).unwrap();
    let graph = onnx.graph.as_ref().unwrap();
    let ops: Vec<&str> = graph.node.iter().map(|n| n.op_type.as_str()).collect();
    assert_eq!(
        ops,
        ["Conv", "MaxPool", "Relu", "Flatten", "Gemm", "Softmax"]
    );
    let weights = train.layer_blobs("conv").unwrap()[0].to_vec().unwrap();
    let exported: Vec<f32> = graph.initializer[0]
        .raw_data
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(graph.initializer[0].name, "conv.weight");
    assert_eq!(exported, weights);
}

#[test]
fn the_yolo_forks_layers_become_reshapes_a_resize_and_a_grouped_conv() {
    let yolo = r#"
name: "yolo"
input: "data" input_shape { dim: 1 dim: 8 dim: 4 dim: 6 }
layer { name: "dw" type: "DepthwiseConvolution" bottom: "data" top: "dw"
        convolution_param { num_output: 8 kernel_size: 3 pad: 1 weight_filler { type: "xavier" } } }
layer { name: "reorg" type: "Reorg" bottom: "dw" top: "reorg" reorg_param { stride: 2 } }
layer { name: "up" type: "Upsample" bottom: "reorg" top: "up" upsample_param { scale: 2 } }
layer { name: "out" type: "Yolov3DetectionOutput" bottom: "up" top: "out"
        yolov3_detection_output_param { num_classes: 27 num_box: 1 mask_group_num: 1 mask: 0
        biases: 1 biases: 1 anchors_scale: 8 } }
"#;
    let e = exported(yolo, &OnnxExport::new()).unwrap_err().to_string();
    assert!(
        e.contains("'out'") && e.contains("Yolov3DetectionOutput"),
        "{e}"
    );
    let model = exported(yolo, &OnnxExport::new().outputs(["up"])).unwrap();
    let graph = model.graph.as_ref().unwrap();
    let ops: Vec<&str> = graph.node.iter().map(|n| n.op_type.as_str()).collect();
    assert_eq!(ops, ["Conv", "Reshape", "Transpose", "Reshape", "Resize"]);
    let group = node(&model, "dw")
        .attribute
        .iter()
        .find(|a| a.name == "group")
        .unwrap()
        .i;
    assert_eq!(
        group, 8,
        "a depthwise convolution is grouped by its outputs"
    );
    // 8 x 4 x 6 read as 2 x (4, 2) x (6, 2), (oy, ox) put first.
    let constant = |name: &str| -> Vec<i64> {
        let t = graph.initializer.iter().find(|t| t.name == name).unwrap();
        t.raw_data
            .chunks(8)
            .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
            .collect()
    };
    assert_eq!(constant("reorg.6d"), [0, 2, 4, 2, 6, 2]);
    assert_eq!(
        ints(node(&model, "reorg/moved"), "perm"),
        [0, 3, 5, 1, 2, 4]
    );
    assert_eq!(constant("reorg.shape"), [0, 32, 2, 3]);
    let resize = node(&model, "up");
    let text = |name: &str| {
        let a = resize.attribute.iter().find(|a| a.name == name).unwrap();
        String::from_utf8(a.s.clone()).unwrap()
    };
    assert_eq!(text("mode"), "nearest");
    assert_eq!(text("coordinate_transformation_mode"), "asymmetric");
    assert_eq!(text("nearest_mode"), "floor");
}
