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
#[path = "support/small_resnet.rs"]
mod small_resnet;

use digits::digits;

const BATCH: usize = 32;
const TEST_BATCH: usize = 100;

fn resnet(state: NetState, batch: usize) -> Net<f32> {
    small_resnet::resnet(state, batch).unwrap()
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
            let out = outputs.iter().find(|o| o.name == "accuracy").unwrap();
            accuracy.push(out.values[0]);
        }
        SolveEvent::Snapshot { .. } | SolveEvent::FinalLoss { .. } => {}
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
