//! A small residual net (convolutions without bias, BatchNorm with its
//! moving averages, Scale with bias, Eltwise sums) trained on the shipped
//! digits by Caffe's loop (`solve`): its loss falls, and a run resumed
//! from its own snapshot repeats the uninterrupted run bit for bit,
//! weights and BatchNorm statistics included.

use blobflow::CaffeModel;
use blobflow::layers::net::{Net, NetState};
use blobflow::layers::solver::{SolveEvent, SolverFile, solve};

#[path = "support/digits.rs"]
mod digits;

use digits::digits;

/// conv -> BN -> Scale -> ReLU, then a residual block of two such
/// convolutions summed with its input, then a downsampling block with a
/// projection shortcut, global average pooling and the classifier.
const RESNET: &str = r#"name: "small-resnet"
layer { name: "data" type: "Data" top: "data" top: "label" }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  convolution_param { num_output: 8 kernel_size: 3 pad: 1 stride: 2 bias_term: false weight_filler { type: "msra" } } }
layer { name: "bn1" type: "BatchNorm" bottom: "conv1" top: "conv1"
  batch_norm_param { moving_average_fraction: 0.9 } }
layer { name: "scale1" type: "Scale" bottom: "conv1" top: "conv1" scale_param { bias_term: true } }
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
layer { name: "res2a" type: "Convolution" bottom: "conv1" top: "res2a"
  convolution_param { num_output: 8 kernel_size: 3 pad: 1 bias_term: false weight_filler { type: "msra" } } }
layer { name: "bn2a" type: "BatchNorm" bottom: "res2a" top: "res2a"
  batch_norm_param { moving_average_fraction: 0.9 } }
layer { name: "scale2a" type: "Scale" bottom: "res2a" top: "res2a" scale_param { bias_term: true } }
layer { name: "relu2a" type: "ReLU" bottom: "res2a" top: "res2a" }
layer { name: "res2b" type: "Convolution" bottom: "res2a" top: "res2b"
  convolution_param { num_output: 8 kernel_size: 3 pad: 1 bias_term: false weight_filler { type: "msra" } } }
layer { name: "bn2b" type: "BatchNorm" bottom: "res2b" top: "res2b"
  batch_norm_param { moving_average_fraction: 0.9 } }
layer { name: "scale2b" type: "Scale" bottom: "res2b" top: "res2b" scale_param { bias_term: true } }
layer { name: "res2" type: "Eltwise" bottom: "conv1" bottom: "res2b" top: "res2" }
layer { name: "relu2" type: "ReLU" bottom: "res2" top: "res2" }
layer { name: "res3a" type: "Convolution" bottom: "res2" top: "res3a"
  convolution_param { num_output: 16 kernel_size: 3 pad: 1 stride: 2 bias_term: false weight_filler { type: "msra" } } }
layer { name: "bn3a" type: "BatchNorm" bottom: "res3a" top: "res3a"
  batch_norm_param { moving_average_fraction: 0.9 } }
layer { name: "scale3a" type: "Scale" bottom: "res3a" top: "res3a" scale_param { bias_term: true } }
layer { name: "relu3a" type: "ReLU" bottom: "res3a" top: "res3a" }
layer { name: "res3b" type: "Convolution" bottom: "res3a" top: "res3b"
  convolution_param { num_output: 16 kernel_size: 3 pad: 1 bias_term: false weight_filler { type: "msra" } } }
layer { name: "bn3b" type: "BatchNorm" bottom: "res3b" top: "res3b"
  batch_norm_param { moving_average_fraction: 0.9 } }
layer { name: "scale3b" type: "Scale" bottom: "res3b" top: "res3b" scale_param { bias_term: true } }
layer { name: "proj3" type: "Convolution" bottom: "res2" top: "proj3"
  convolution_param { num_output: 16 kernel_size: 1 stride: 2 bias_term: false weight_filler { type: "msra" } } }
layer { name: "bn3p" type: "BatchNorm" bottom: "proj3" top: "proj3"
  batch_norm_param { moving_average_fraction: 0.9 } }
layer { name: "scale3p" type: "Scale" bottom: "proj3" top: "proj3" scale_param { bias_term: true } }
layer { name: "res3" type: "Eltwise" bottom: "proj3" bottom: "res3b" top: "res3" }
layer { name: "relu3" type: "ReLU" bottom: "res3" top: "res3" }
layer { name: "pool" type: "Pooling" bottom: "res3" top: "pool" pooling_param { pool: AVE global_pooling: true } }
layer { name: "fc" type: "InnerProduct" bottom: "pool" top: "fc"
  inner_product_param { num_output: 10 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "fc" bottom: "label" top: "loss" }
layer { name: "accuracy" type: "Accuracy" bottom: "fc" bottom: "label" top: "accuracy" include { phase: TEST } }
"#;

const BATCH: usize = 32;
const TEST_BATCH: usize = 100;

fn resnet(state: NetState, batch: usize) -> Net<f32> {
    Net::<f32>::builder()
        .state(state)
        .input_shape("data", &[batch, 1, 28, 28])
        .input_shape("label", &[batch])
        .from_prototxt(RESNET)
        .unwrap()
}

fn solver_file(dir: &std::path::Path, max_iter: usize) -> SolverFile<f32> {
    let mut file = SolverFile::parse(&format!(
        r#"base_lr: 0.05 momentum: 0.9 weight_decay: 0.0005 lr_policy: "fixed"
           max_iter: {max_iter} display: 1 snapshot: 30 test_interval: 30 test_iter: 4"#
    ))
    .unwrap();
    file.snapshot_prefix = Some(dir.join("resnet").display().to_string());
    file
}

/// The losses and test accuracies of `solve` over `train` and `test`.
fn run(
    file: &mut SolverFile<f32>,
    train: &mut Net<f32>,
    test: Net<f32>,
) -> (Vec<(usize, f64)>, Vec<f64>) {
    let data = digits();
    let mut feed = |net: &mut _, phase, step| digits::feed_split(&data, net, phase, step);
    let (mut losses, mut accuracy) = (Vec::new(), Vec::new());
    solve(file, train, &mut [test], &mut feed, &mut |e| match e {
        SolveEvent::Loss { iter, loss, .. } => losses.push((iter, loss)),
        SolveEvent::Test { outputs, .. } => {
            let (_, v) = outputs.iter().find(|(n, _)| n == "accuracy").unwrap();
            accuracy.push(v[0]);
        }
        SolveEvent::Snapshot { .. } => {}
    })
    .unwrap();
    (losses, accuracy)
}

#[test]
fn a_small_resnet_trains_and_resumes_exactly() {
    let dir = std::env::temp_dir().join(format!("blobflow-resnet-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    blobflow::kernels::cpu::set_seed(1701);
    let mut train = resnet(NetState::train(), BATCH);
    let test = resnet(NetState::test(), TEST_BATCH);
    assert_eq!(train.layer_type("accuracy"), None);
    let mut file = solver_file(&dir, 60);
    let (losses, accuracy) = run(&mut file, &mut train, test);
    assert_eq!(losses.len(), 60);
    let mean =
        |r: std::ops::Range<usize>| r.clone().map(|i| losses[i].1).sum::<f64>() / r.len() as f64;
    assert!(
        mean(55..60) < 0.85 * mean(0..5),
        "the loss falls: {losses:?}"
    );
    // Tested at 0, 30 and 60, on held-out digits: from chance to well
    // above it.
    assert_eq!(accuracy.len(), 3);
    assert!(
        accuracy[0] < 0.2 && accuracy[2] > 0.3,
        "accuracy {accuracy:?}"
    );

    // From the iteration-30 snapshot, nets whose fillers drew other
    // values: the weights, the BatchNorm statistics and the momentum all
    // come from the files.
    blobflow::kernels::cpu::set_seed(99);
    let mut resumed = resnet(NetState::train(), BATCH);
    let model = CaffeModel::open(dir.join("resnet_iter_30.caffemodel")).unwrap();
    let report = resumed.copy_from(&model).unwrap();
    assert!(report.missing.is_empty(), "{report:?}");
    assert!(report.copied.iter().any(|l| l == "bn2a"));
    let mut file = solver_file(&dir.join("again"), 60);
    std::fs::create_dir_all(dir.join("again")).unwrap();
    let state =
        blobflow::runtime::read_solver_state(dir.join("resnet_iter_30.solverstate")).unwrap();
    file.solver.restore(&state, &resumed.param_blobs()).unwrap();
    assert_eq!(file.solver.iter, 30);
    let (again, _) = run(
        &mut file,
        &mut resumed,
        resnet(NetState::test(), TEST_BATCH),
    );
    let bits = |l: &[(usize, f64)]| l.iter().map(|(i, v)| (*i, v.to_bits())).collect::<Vec<_>>();
    assert_eq!(bits(&again), bits(&losses[30..]), "resumed losses");
    for (a, b) in train.param_blobs().iter().zip(resumed.param_blobs()) {
        assert_eq!(a.to_vec().unwrap(), b.to_vec().unwrap());
    }
    let _ = std::fs::remove_dir_all(&dir);
}
