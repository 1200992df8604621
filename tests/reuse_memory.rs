//! `Net::reuse_memory` on real nets (branches, splits, concats, in-place
//! layers, detection outputs): the outputs of a net whose intermediate
//! blobs share memory are the bits of the same net with its own, pass
//! after pass with new inputs, and the memory it holds is smaller.

use blobflow::kernels::cpu;
use blobflow::layers::net::{Net, NetState};

#[path = "support/digits.rs"]
mod digits;
#[path = "support/random_params.rs"]
mod random_params;

use random_params::randomize_params;

fn fill_inputs(a: &mut Net<f32>, b: &mut Net<f32>) {
    let inputs: Vec<String> = a.inputs().iter().map(|s| s.to_string()).collect();
    for name in inputs {
        let values = {
            let blob = a.blob(&name).unwrap();
            cpu::uniform(-1.0, 1.0, &mut blob.mutable_cpu_data().unwrap()).unwrap();
            blob.to_vec().unwrap()
        };
        b.blob_mut(&name)
            .unwrap()
            .mutable_cpu_data()
            .unwrap()
            .copy_from_slice(&values);
    }
}

fn same_outputs_with_shared_memory(prototxt: &str, input: &[usize]) {
    cpu::set_seed(11);
    let path = digits::root().join(prototxt);
    let build = || {
        let mut builder = Net::<f32>::builder().state(NetState::test());
        if !input.is_empty() {
            builder = builder.input_shape("data", input);
        }
        builder.from_file(&path).unwrap()
    };
    let mut own = build();
    randomize_params(&own);
    let mut shared = build();
    shared.copy_from(&own.to_model().unwrap()).unwrap();
    let before = shared.memory_bytes();
    let reuse = shared.reuse_memory().unwrap();
    assert!(reuse.blobs > 0, "{prototxt}: no blob shares memory");
    assert!(
        reuse.bytes_after < reuse.bytes_before,
        "{prototxt}: {reuse:?}"
    );
    assert!(shared.memory_bytes() <= before, "{prototxt}");
    for pass in 0..2 {
        fill_inputs(&mut own, &mut shared);
        own.forward().unwrap();
        shared.forward().unwrap();
        for name in own.outputs() {
            let (want, got) = (
                own.blob(name).unwrap().to_vec().unwrap(),
                shared.blob(name).unwrap().to_vec().unwrap(),
            );
            let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert!(
                bits(&want) == bits(&got),
                "{prototxt}, pass {pass}: output '{name}' differs"
            );
        }
    }
}

#[test]
fn lenet() {
    same_outputs_with_shared_memory("models/lenet/lenet.prototxt", &[]);
}

#[test]
fn mtcnn_cascade() {
    for net in ["det1", "det2", "det3"] {
        same_outputs_with_shared_memory(&format!("tests/fixtures/nets/mtcnn/{net}.prototxt"), &[]);
    }
}

#[test]
fn squeezenet_fire_concats() {
    same_outputs_with_shared_memory(
        "tests/fixtures/nets/squeezenet_v1.1/deploy.prototxt",
        &[1, 3, 227, 227],
    );
}

#[test]
fn googlenet_inception_branches() {
    same_outputs_with_shared_memory(
        "tests/fixtures/nets/bvlc_googlenet/deploy.prototxt",
        &[1, 3, 224, 224],
    );
}

#[test]
fn resnet50_residual_splits_and_folds() {
    same_outputs_with_shared_memory(
        "tests/fixtures/nets/resnet50/ResNet-50-deploy.prototxt",
        &[1, 3, 224, 224],
    );
}

#[test]
fn mobilenet_ssd_detections() {
    same_outputs_with_shared_memory(
        "tests/fixtures/nets/mobilenet_ssd/MobileNetSSD_deploy.prototxt",
        &[],
    );
}

#[test]
fn yolov3_tiny_upsample_and_route() {
    same_outputs_with_shared_memory("tests/fixtures/nets/yolo/yolov3-tiny.prototxt", &[]);
}

#[test]
fn nets_that_run_backward_are_refused() {
    let mut net = Net::<f32>::from_prototxt(
        "input: 'x' input_shape { dim: 2 dim: 3 } input: 'label' input_shape { dim: 2 }
         layer { name: 'ip' type: 'InnerProduct' bottom: 'x' top: 'ip'
                 inner_product_param { num_output: 2 } }
         layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip' bottom: 'label' top: 'loss' }",
        NetState::train(),
    )
    .unwrap();
    let err = net.reuse_memory().unwrap_err().to_string();
    assert!(err.contains("layer 'ip' runs backward"), "{err}");
}
