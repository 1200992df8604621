//! Caffe's `Net::Init` rules on small nets: split insertion and its
//! names, in-place wiring, state rules, which layers run backward,
//! parameter sharing, and the errors Caffe gives for bad nets.

use blob_layers::net::{Net, NetState};
use blob_runtime::{Blob, BlobError, CaffeModel};

fn build(text: &str) -> Result<Net<f32>, BlobError> {
    Net::from_prototxt(text, NetState::test())
}

fn error(text: &str) -> String {
    match build(text) {
        Ok(_) => panic!("built a net Caffe refuses:\n{text}"),
        Err(e) => e.to_string(),
    }
}

const IP: &str = r#"inner_product_param { num_output: 3 weight_filler { type: "xavier" } }"#;

fn branching() -> String {
    format!(
        r#"name: "branch"
        input: "data" input_shape {{ dim: 2 dim: 5 }}
        layer {{ name: "ip1" type: "InnerProduct" bottom: "data" top: "ip1" {IP} }}
        layer {{ name: "relu1" type: "ReLU" bottom: "ip1" top: "ip1" }}
        layer {{ name: "a" type: "InnerProduct" bottom: "ip1" top: "a" {IP} }}
        layer {{ name: "b" type: "InnerProduct" bottom: "ip1" top: "b" {IP} }}
        layer {{ name: "c" type: "InnerProduct" bottom: "data" top: "c" {IP} }}"#
    )
}

#[test]
fn splits_are_inserted_and_named_as_caffe_names_them() {
    let net = build(&branching()).unwrap();
    let layers: Vec<&str> = net.layer_names().collect();
    assert_eq!(
        layers,
        [
            "input",
            "data_input_0_split",
            "ip1",
            "relu1",
            "ip1_relu1_0_split",
            "a",
            "b",
            "c"
        ]
    );
    let blobs = net.blob_names();
    for name in [
        "data_input_0_split_0",
        "data_input_0_split_1",
        "ip1_relu1_0_split_0",
        "ip1_relu1_0_split_1",
    ] {
        assert!(blobs.iter().any(|b| b == name), "{name} in {blobs:?}");
    }
    assert_eq!(net.outputs(), ["a", "b", "c"]);
    assert_eq!(net.inputs(), ["data"]);
}

#[test]
fn split_tops_view_the_bottom_and_every_branch_sees_the_same_values() {
    let mut net = build(&branching()).unwrap();
    let data = net.blob("data").unwrap();
    data.mutable_cpu_data()
        .unwrap()
        .iter_mut()
        .enumerate()
        .for_each(|(i, v)| *v = i as f32 * 0.1 - 0.5);
    net.forward().unwrap();
    let relu = net.blob("ip1").unwrap().to_vec().unwrap();
    assert!(relu.iter().all(|&v| v >= 0.0));
    for split in ["ip1_relu1_0_split_0", "ip1_relu1_0_split_1"] {
        assert_eq!(net.blob(split).unwrap().to_vec().unwrap(), relu);
    }
}

#[test]
fn a_deploy_net_runs_no_backward_unless_forced() {
    let net = build(&branching()).unwrap();
    assert_eq!(net.layer_needs_backward("ip1"), Some(false));
    let forced = build(&format!("force_backward: true\n{}", branching())).unwrap();
    assert_eq!(forced.layer_needs_backward("ip1"), Some(true));
    assert_eq!(forced.layer_needs_backward("a"), Some(true));
}

#[test]
fn state_rules_choose_the_layers() {
    let text = format!(
        r#"input: "data" input_shape {{ dim: 1 dim: 5 }}
        layer {{ name: "train_only" type: "InnerProduct" bottom: "data" top: "t" include {{ phase: TRAIN }} {IP} }}
        layer {{ name: "not_deploy" type: "InnerProduct" bottom: "data" top: "d" exclude {{ stage: "deploy" }} {IP} }}
        layer {{ name: "level2" type: "InnerProduct" bottom: "data" top: "l" include {{ min_level: 2 }} {IP} }}"#
    );
    let names = |state: NetState| -> Vec<String> {
        Net::<f32>::from_prototxt(&text, state)
            .unwrap()
            .layer_names()
            .map(String::from)
            .collect()
    };
    assert_eq!(names(NetState::test()), ["input", "not_deploy"]);
    assert_eq!(
        names(NetState::train()),
        ["input", "data_input_0_split", "train_only", "not_deploy"]
    );
    assert_eq!(names(NetState::test().with_stage("deploy")), ["input"]);
    let mut leveled = NetState::test();
    leveled.level = 2;
    assert_eq!(
        names(leveled),
        ["input", "data_input_0_split", "not_deploy", "level2"]
    );
}

#[test]
fn the_layer_phase_drives_dropout() {
    let text = r#"input: "x" input_shape { dim: 1 dim: 1000 }
        layer { name: "drop" type: "Dropout" bottom: "x" top: "y" dropout_param { dropout_ratio: 0.5 } }"#;
    for (state, passes) in [(NetState::test(), true), (NetState::train(), false)] {
        let mut net = Net::<f32>::from_prototxt(text, state).unwrap();
        net.blob("x").unwrap().mutable_cpu_data().unwrap().fill(1.0);
        net.forward().unwrap();
        let y = net.blob("y").unwrap().to_vec().unwrap();
        assert_eq!(y.iter().all(|&v| v == 1.0), passes);
    }
}

#[test]
fn named_params_are_shared_and_checked() {
    let shared = r#"param { name: "w" } param { name: "b" }"#;
    let text = format!(
        r#"input: "x" input_shape {{ dim: 1 dim: 5 }}
        layer {{ name: "p" type: "InnerProduct" bottom: "x" top: "p" {shared} {IP} }}
        layer {{ name: "q" type: "InnerProduct" bottom: "x" top: "q" {shared} {IP} }}"#
    );
    let mut net = build(&text).unwrap();
    assert_eq!(net.params().len(), 2, "shared params are learnable once");
    let (p, q) = (net.layer_blobs("p").unwrap(), net.layer_blobs("q").unwrap());
    assert!(std::sync::Arc::ptr_eq(p[0].data(), q[0].data()));
    assert!(std::sync::Arc::ptr_eq(p[1].diff(), q[1].diff()));
    net.blob("x").unwrap().mutable_cpu_data().unwrap().fill(1.0);
    net.forward().unwrap();
    assert_eq!(
        net.blob("p").unwrap().to_vec().unwrap(),
        net.blob("q").unwrap().to_vec().unwrap()
    );

    let wider = text.replacen("num_output: 3", "num_output: 4", 1);
    let err = error(&wider);
    assert!(
        err.contains("Cannot share param 'w' owned by layer 'p' with layer 'q'; shape mismatch"),
        "{err}"
    );
    let lr = text.replacen(
        r#"param { name: "w" }"#,
        r#"param { name: "w" lr_mult: 1 }"#,
        2,
    );
    let lr = lr.replacen("lr_mult: 1", "lr_mult: 2", 1);
    assert!(error(&lr).contains("Shared param 'w' has mismatched lr_mult."));
}

#[test]
fn bad_nets_get_caffes_errors_with_the_layer_named() {
    let cases: [(String, &str); 9] = [
        (
            r#"layer { name: "ip" type: "InnerProduct" bottom: "nothing" top: "y" }"#.into(),
            "layer 'ip': Unknown bottom blob 'nothing' (layer 'ip', bottom index 0)",
        ),
        (
            format!(r#"input: "x" input_shape {{ dim: 1 dim: 2 }}
            layer {{ name: "a" type: "InnerProduct" bottom: "x" top: "y" {IP} }}
            layer {{ name: "b" type: "InnerProduct" bottom: "y" top: "y2" {IP} }}
            layer {{ name: "c" type: "InnerProduct" bottom: "y2" top: "y" {IP} }}"#),
            "layer 'c' (InnerProduct): Top blob 'y' produced by multiple sources.",
        ),
        (
            r#"input: "x" input_shape { dim: 1 dim: 1 dim: 4 dim: 4 }
            layer { name: "pool" type: "Pooling" bottom: "x" top: "x" pooling_param { kernel_size: 2 } }"#.into(),
            "layer 'pool' (Pooling): Pooling Layer does not allow in-place computation (top 'x' is its bottom)",
        ),
        (
            r#"input: "x" input_shape { dim: 1 dim: 2 }
            layer { name: "s" type: "Sofmax" bottom: "x" top: "y" }"#.into(),
            "layer 's': Unknown layer type: Sofmax (nearest known: Softmax, ",
        ),
        (
            r#"input: "x" input_shape { dim: 1 dim: 2 }
            layer { name: "s" type: "Softmax" bottom: "x" bottom: "x" top: "y" }"#.into(),
            "Softmax Layer takes 1 bottom blob(s) as input, not 2",
        ),
        (
            r#"layer { name: "s" tpye: "Softmax" }"#.into(),
            "<prototxt>: line 1, column 19: LayerParameter has no field named tpye",
        ),
        (
            r#"input: "x" input_dim: 1 input_dim: 2"#.into(),
            "1 inputs need 4 input_dim values (4 each), not 2",
        ),
        (
            r#"input: "x" input_shape { dim: 1 dim: 2 }
            layer { name: "s" type: "Softmax" bottom: "x" top: "y" include { phase: TEST } exclude { phase: TRAIN } }"#.into(),
            "layer 's': Specify either include rules or exclude rules; not both.",
        ),
        (
            format!(r#"input: "x" input_shape {{ dim: 1 dim: 2 }}
            layer {{ name: "ip" type: "InnerProduct" bottom: "x" top: "y" param {{ }} param {{ }} param {{ }} {IP} }}"#),
            "Too many params specified for layer ip: 3 param specs for 2 blobs",
        ),
    ];
    for (text, want) in cases {
        let got = error(&text);
        assert!(got.contains(want), "{got}\n  should contain\n{want}");
    }
}

#[test]
fn a_reshape_that_breaks_a_trained_layer_names_it() {
    let text = r#"input: "x" input_shape { dim: 1 dim: 3 dim: 8 dim: 8 }
        layer { name: "conv" type: "Convolution" bottom: "x" top: "y"
                convolution_param { num_output: 2 kernel_size: 3 } }
        layer { name: "ip" type: "InnerProduct" bottom: "y" top: "z" inner_product_param { num_output: 2 } }"#;
    let mut net = build(text).unwrap();
    net.blob_mut("x").unwrap().reshape(&[1, 4, 8, 8]).unwrap();
    let err = net.forward().unwrap_err().to_string();
    assert!(
        err.starts_with("layer 'conv' (Convolution): ")
            && err.contains("Input size incompatible with convolution kernel: the input 1 4 8 8 (256) has 4 channels, the weights 3"),
        "{err}"
    );
    net.blob_mut("x").unwrap().reshape(&[1, 3, 9, 9]).unwrap();
    let err = net.forward().unwrap_err().to_string();
    assert!(
        err.starts_with("layer 'ip' (InnerProduct): ")
            && err.contains("Input size incompatible with inner product parameters"),
        "{err}"
    );
}

#[test]
fn weights_of_another_shape_are_refused_with_caffes_words() {
    let text = |n: usize| {
        format!(
            r#"input: "x" input_shape {{ dim: 1 dim: 4 }}
            layer {{ name: "ip" type: "InnerProduct" bottom: "x" top: "y" inner_product_param {{ num_output: {n} }} }}"#
        )
    };
    let saved = build(&text(3)).unwrap().to_model().unwrap();
    let mut other = build(&text(2)).unwrap();
    let err = other.copy_from(&saved).unwrap_err().to_string();
    assert!(
        err.contains("Cannot copy param 0 weights from layer 'ip'; shape mismatch."),
        "{err}"
    );
}

#[test]
fn a_saved_net_reloads_into_the_same_outputs() {
    blob_kernels::cpu::set_seed(3);
    let mut net = build(&branching()).unwrap();
    let x: Vec<f32> = (0..10).map(|i| (i as f32 - 4.0) / 3.0).collect();
    net.blob("data")
        .unwrap()
        .mutable_cpu_data()
        .unwrap()
        .copy_from_slice(&x);
    net.forward().unwrap();
    let bytes = net.to_model().unwrap().to_bytes().unwrap();

    blob_kernels::cpu::set_seed(4);
    let mut again = build(&branching()).unwrap();
    let report = again
        .copy_from(&CaffeModel::from_bytes(&bytes).unwrap())
        .unwrap();
    assert!(report.missing.is_empty(), "{report:?}");
    assert_eq!(report.copied, ["ip1", "a", "b", "c"]);
    again
        .blob("data")
        .unwrap()
        .mutable_cpu_data()
        .unwrap()
        .copy_from_slice(&x);
    again.forward().unwrap();
    for out in ["a", "b", "c"] {
        let want: &Blob<f32> = net.blob(out).unwrap();
        assert_eq!(
            again.blob(out).unwrap().to_vec().unwrap(),
            want.to_vec().unwrap(),
            "{out}"
        );
    }
}

#[test]
fn v1_layers_are_upgraded() {
    let v1 = r#"name: "old"
        input: "data" input_dim: 1 input_dim: 1 input_dim: 6 input_dim: 6
        layers { name: "conv" type: CONVOLUTION bottom: "data" top: "conv"
                 blobs_lr: 1 blobs_lr: 2 weight_decay: 1 weight_decay: 0
                 convolution_param { num_output: 2 kernel_size: 3 } }
        layers { name: "relu" type: RELU bottom: "conv" top: "conv" }
        layers { name: "pool" type: POOLING bottom: "conv" top: "pool" pooling_param { pool: MAX kernel_size: 2 stride: 2 } }"#;
    let mut net = build(v1).unwrap();
    assert_eq!(net.layer_type("relu"), Some("ReLU"));
    let specs: Vec<(f64, f64)> = net
        .params()
        .iter()
        .map(|p| (p.lr_mult, p.decay_mult))
        .collect();
    assert_eq!(specs, [(1.0, 1.0), (2.0, 0.0)]);
    net.forward().unwrap();
    assert_eq!(net.blob("pool").unwrap().shape(), [1, 2, 2, 2]);
}

/// V0 files (2014): flat `layer` messages nested in `layers`, lower-case
/// types, `padding` layers folded into the convolution they feed.
#[test]
fn v0_layers_are_upgraded_through_v1() {
    let v0 = r#"name: "older"
        input: "data" input_dim: 1 input_dim: 1 input_dim: 4 input_dim: 4
        layers { layer { name: "pad" type: "padding" pad: 1 } bottom: "data" top: "padded" }
        layers { layer { name: "conv" type: "conv" num_output: 2 kernelsize: 3 biasterm: false
                         weight_filler { type: "constant" value: 1 } blobs_lr: 3 weight_decay: 0 }
                 bottom: "padded" top: "conv" }
        layers { layer { name: "pool" type: "pool" pool: AVE kernelsize: 2 stride: 2 } bottom: "conv" top: "pool" }
        layers { layer { name: "drop" type: "dropout" dropout_ratio: 0.25 } bottom: "pool" top: "pool" }"#;
    let mut net = build(v0).unwrap();
    assert_eq!(
        net.layer_names().collect::<Vec<_>>(),
        ["input", "conv", "pool", "drop"],
        "the padding layer is gone"
    );
    assert_eq!(net.layer_type("pool"), Some("Pooling"));
    assert_eq!(net.layer_blobs("conv").unwrap().len(), 1, "no bias");
    let specs: Vec<(f64, f64)> = net
        .params()
        .iter()
        .map(|p| (p.lr_mult, p.decay_mult))
        .collect();
    assert_eq!(specs, [(3.0, 0.0)]);
    net.blob("data")
        .unwrap()
        .mutable_cpu_data()
        .unwrap()
        .fill(1.0);
    net.forward().unwrap();
    // The padding moved into the convolution: a 4 x 4 output whose corner
    // sums 4 ones of the 3 x 3 window.
    assert_eq!(net.blob("conv").unwrap().shape(), [1, 2, 4, 4]);
    assert_eq!(net.blob("conv").unwrap().to_vec().unwrap()[0], 4.0);
    assert_eq!(net.blob("pool").unwrap().shape(), [1, 2, 2, 2]);
}

#[test]
fn v0_layers_that_cannot_be_upgraded_say_why() {
    let net = |layers: &str| {
        format!(r#"input: "data" input_dim: 1 input_dim: 1 input_dim: 4 input_dim: 4 {layers}"#)
    };
    for (layers, says) in [
        (
            r#"layers { layer { name: "x" type: "magic" } bottom: "data" top: "x" }"#,
            "Unknown layer name",
        ),
        (
            r#"layers { layer { name: "r" type: "relu" num_output: 3 } bottom: "data" top: "r" }"#,
            "a relu layer takes no num_output",
        ),
        (
            r#"layers { layer { name: "pad" type: "padding" pad: 1 } bottom: "data" top: "p" }
               layers { layer { name: "ip" type: "innerproduct" num_output: 2 } bottom: "p" top: "ip" }"#,
            "non-convolutional / non-pooling",
        ),
    ] {
        let e = error(&net(layers));
        assert!(e.contains(says), "{layers}: {e}");
    }
}

#[test]
fn dummy_data_fills_its_tops_and_is_no_input() {
    let text = r#"layer { name: "d" type: "DummyData" top: "a" top: "b"
            dummy_data_param { shape { dim: 2 dim: 3 } shape { dim: 4 }
                               data_filler { type: "constant" value: 1.5 } data_filler { type: "uniform" min: 2 max: 3 } } }
        layer { name: "ip" type: "InnerProduct" bottom: "a" top: "y" inner_product_param { num_output: 1 } }"#;
    let mut net = build(text).unwrap();
    assert!(net.inputs().is_empty());
    net.forward().unwrap();
    assert_eq!(net.blob("a").unwrap().to_vec().unwrap(), [1.5; 6]);
    let b = net.blob("b").unwrap().to_vec().unwrap();
    assert!(
        b.len() == 4 && b.iter().all(|v| (2.0..=3.0).contains(v)),
        "{b:?}"
    );
    let err = error(
        r#"layer { name: "d" type: "DummyData" top: "a" top: "b" top: "c"
        dummy_data_param { shape { dim: 1 } shape { dim: 2 } } }"#,
    );
    assert!(err.contains("2 shapes for 3 tops"), "{err}");
}

#[test]
fn a_data_layer_without_shapes_says_who_must_give_them() {
    let err = error(r#"layer { name: "mnist" type: "Data" top: "data" top: "label" }"#);
    assert!(
        err.contains("layer 'mnist' (Data)")
            && err.contains("filled by the caller, who must give its shape"),
        "{err}"
    );
}

/// Every net definition the repository carries reads against the
/// messages the layer registry knows (Caffe's and the forks' parameter
/// fields), round-trips through its bytes with nothing unknown, and the
/// BVLC-only ones read against Caffe's own tables too; a training
/// set-up's solver reads as a solver.
#[test]
fn every_shipped_net_reads_against_the_registrys_schema() {
    use blob_proto::{ParamMessage, TextMessage, schema};
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/nets");
    let mut files = Vec::new();
    for dir in std::fs::read_dir(&root).unwrap() {
        let dir = dir.unwrap().path();
        if !dir.is_dir() {
            continue;
        }
        for f in std::fs::read_dir(&dir).unwrap() {
            let f = f.unwrap().path();
            if f.extension().is_some_and(|e| e == "prototxt" || e == "pt") {
                files.push(f);
            }
        }
    }
    files.sort();
    assert!(files.len() >= 15, "{files:?}");
    let schemas = blob_layers::registry::LayerRegistry::<f32>::with_caffe_layers()
        .schemas()
        .clone();
    let mut caffe_only = 0;
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        if file.to_string_lossy().ends_with("_solver.prototxt") {
            // A training set-up's solver (MobileNet-YOLO's multifixed one).
            blob_layers::solver::SolverFile::<f32>::parse(&text)
                .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            continue;
        }
        if file.to_string_lossy().contains("labelmap") {
            // A label map (the YOLO fork's segmentation classes).
            continue;
        }
        let tree = TextMessage::parse(&text).unwrap();
        let net = ParamMessage::from_text(schemas.net_parameter(), &tree)
            .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let layers = net.messages("layer").count();
        assert!(layers >= 10, "{}: {layers} layers", file.display());
        let bytes = net.encode_to_vec();
        let back = ParamMessage::decode(schemas.net_parameter(), &bytes).unwrap();
        assert_eq!(back.encode_to_vec(), bytes, "{}", file.display());
        assert!(back.unknown_fields().is_empty());
        if ParamMessage::from_text(&schema::NET_PARAMETER, &tree).is_ok() {
            caffe_only += 1;
        }
    }
    // The BVLC and SSD nets; the forks' (PSPNet's BN and Interp) need
    // their fields.
    assert!(caffe_only >= 9, "{caffe_only}");
}
