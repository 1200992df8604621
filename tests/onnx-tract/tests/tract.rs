//! Every net of `tests/fixtures/nets` that ONNX can express, exported by
//! blobflow (`OnnxExport`, what `blobflow convert NET WEIGHTS OUT.onnx`
//! writes) and run by tract, the ONNX runtime written in Rust, gives
//! blobflow's outputs within 1e-5 of their scale: weights filled at
//! random, inputs drawn at random. Nets ending in a detection output are
//! exported up to it (ONNX has none), as `blobflow convert --outputs`.

use std::path::{Path, PathBuf};

use blobflow::kernels::cpu;
use blobflow::layers::net::{Net, NetState};
use blobflow::layers::onnx::OnnxExport;
use tract_onnx::prelude::*;

#[path = "../../support/random_params.rs"]
mod random_params;

use random_params::randomize_params;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The blobs a detection output reads, where the net ends in one; its
/// outputs otherwise.
fn exported_outputs(net: &Net<f32>) -> Vec<String> {
    let detections: Vec<String> = net
        .layer_names()
        .filter(|l| {
            matches!(
                net.layer_type(l),
                Some("DetectionOutput" | "YoloDetectionOutput" | "Yolov3DetectionOutput")
            )
        })
        .map(str::to_string)
        .collect();
    if detections.is_empty() {
        return net.outputs().iter().map(|s| s.to_string()).collect();
    }
    let mut outputs = Vec::new();
    for layer in detections {
        for bottom in net.layer_bottoms(&layer).unwrap() {
            if !outputs.iter().any(|o| o == bottom) {
                outputs.push(bottom.to_string());
            }
        }
    }
    outputs
}

fn tract_agrees(prototxt: &str, input: &[usize]) {
    tract_agrees_on(prototxt, input, &[]);
}

/// As [`tract_agrees`], the graph's outputs `outputs` where given.
fn tract_agrees_on(prototxt: &str, input: &[usize], outputs: &[&str]) {
    cpu::set_seed(13);
    let mut net = Net::<f32>::builder()
        .state(NetState::test())
        .input_shape("data", input)
        .from_file(root().join(prototxt))
        .unwrap();
    randomize_params(&net);
    let outputs = if outputs.is_empty() {
        exported_outputs(&net)
    } else {
        outputs.iter().map(|s| s.to_string()).collect()
    };
    let onnx = OnnxExport::new()
        .outputs(outputs.clone())
        .to_bytes(&mut net)
        .unwrap();
    let x = {
        let data = net.blob("data").unwrap();
        cpu::uniform(-1.0, 1.0, &mut data.mutable_cpu_data().unwrap()).unwrap();
        data.to_vec().unwrap()
    };
    net.forward().unwrap();
    let model = tract_onnx::onnx()
        .model_for_read(&mut onnx.as_slice())
        .unwrap()
        .with_input_fact(0, f32::fact(input).into())
        .unwrap()
        .into_optimized()
        .unwrap()
        .into_runnable()
        .unwrap();
    let x = tract_ndarray::ArrayD::from_shape_vec(input, x).unwrap();
    let results = model.run(tvec!(Tensor::from(x).into())).unwrap();
    assert_eq!(results.len(), outputs.len(), "{prototxt}");
    for (name, got) in outputs.iter().zip(&results) {
        let want = net.blob(name).unwrap().to_vec().unwrap();
        let got: Vec<f32> = got
            .to_plain_array_view::<f32>()
            .unwrap()
            .iter()
            .copied()
            .collect();
        assert_eq!(got.len(), want.len(), "{prototxt}: output '{name}'");
        let scale = want.iter().fold(0f32, |m, v| m.max(v.abs())).max(1e-30);
        let worst = got
            .iter()
            .zip(&want)
            .map(|(g, w)| (g - w).abs())
            .fold(0f32, f32::max);
        assert!(
            worst <= 1e-5 * scale,
            "{prototxt}: output '{name}' off by {worst:e} of a scale of {scale:e}"
        );
    }
}

#[test]
fn lenet() {
    tract_agrees("models/lenet/lenet.prototxt", &[1, 1, 28, 28]);
}

#[test]
fn mtcnn() {
    tract_agrees("tests/fixtures/nets/mtcnn/det1.prototxt", &[1, 3, 12, 12]);
    tract_agrees("tests/fixtures/nets/mtcnn/det2.prototxt", &[1, 3, 24, 24]);
    tract_agrees("tests/fixtures/nets/mtcnn/det3.prototxt", &[1, 3, 48, 48]);
}

#[test]
fn caffenet() {
    tract_agrees(
        "tests/fixtures/nets/bvlc_reference_caffenet/deploy.prototxt",
        &[1, 3, 227, 227],
    );
}

#[test]
fn squeezenet() {
    tract_agrees(
        "tests/fixtures/nets/squeezenet_v1.1/deploy.prototxt",
        &[1, 3, 227, 227],
    );
}

#[test]
fn googlenet() {
    tract_agrees(
        "tests/fixtures/nets/bvlc_googlenet/deploy.prototxt",
        &[1, 3, 224, 224],
    );
}

#[test]
fn resnet50() {
    tract_agrees(
        "tests/fixtures/nets/resnet50/ResNet-50-deploy.prototxt",
        &[1, 3, 224, 224],
    );
}

#[test]
fn mobilenet_ssd() {
    tract_agrees(
        "tests/fixtures/nets/mobilenet_ssd/MobileNetSSD_deploy.prototxt",
        &[1, 3, 300, 300],
    );
}

#[test]
fn yolov3_tiny() {
    tract_agrees(
        "tests/fixtures/nets/yolo/yolov3-tiny.prototxt",
        &[1, 3, 416, 416],
    );
}

#[test]
fn the_yolo_forks_nets() {
    tract_agrees(
        "tests/fixtures/nets/yolo/darknet19_deploy.prototxt",
        &[1, 3, 224, 224],
    );
    for net in ["mobilenet_yolo_lite_deploy", "mobilenet_yolov3_lite_deploy"] {
        tract_agrees(
            &format!("tests/fixtures/nets/yolo/{net}.prototxt"),
            &[1, 3, 320, 320],
        );
    }
    tract_agrees(
        "tests/fixtures/nets/yolo/yolov3.prototxt",
        &[1, 3, 256, 256],
    );
}

/// The layers no shipped net reaches (LRN within channels, AVE pooling,
/// Caffe's ceil-rounded pooling, Deconvolution, Crop, Eltwise's PROD,
/// Power, Normalize, Permute, Reorg, Upsample...), each one's result
/// compared.
#[test]
fn every_other_layer_the_export_writes() {
    tract_agrees_on(
        "scripts/peer_nets/onnx_layers.prototxt",
        &[2, 3, 21, 21],
        &[
            "lrn_within",
            "ave",
            "max_ceil",
            "deconv",
            "crop",
            "prod",
            "sum",
            "power",
            "norm",
            "concat",
            "ip",
            "softmax",
            "dw",
            "reorg",
            "unreorg",
            "up",
        ],
    );
}
