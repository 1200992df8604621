//! What `tests/fixtures/caffe-lenet-train` records of Caffe's own LeNet
//! run: the losses it printed for iterations 1000..1020 and its weights
//! at 1020, for the tests that retrace it.

// Each test file that includes this module uses a part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use blobflow::CaffeModel;

/// The fixture's folder, from the repository's root.
pub fn fixture(root: &Path) -> PathBuf {
    root.join("tests/fixtures/caffe-lenet-train")
}

/// The losses Caffe printed for iterations 1000..1020.
pub fn caffe_losses(root: &Path) -> Vec<(usize, f32)> {
    let losses: Vec<(usize, f32)> = std::fs::read_to_string(fixture(root).join("caffe_losses.txt"))
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let (it, loss) = l.split_once(' ').unwrap();
            (it.parse().unwrap(), loss.parse().unwrap())
        })
        .collect();
    assert_eq!(losses.len(), 20);
    losses
}

/// Asserts that every weight of `ours` is within 1e-6 of Caffe's at
/// iteration 1020: summation order differs from OpenBLAS by rounding
/// only, while a solver term gone wrong (no weight decay, say) moves
/// weights by about 1e-4.
pub fn assert_caffes_weights_at_1020(root: &Path, ours: &CaffeModel) {
    let theirs = CaffeModel::open(fixture(root).join("lenet_iter_1020.caffemodel")).unwrap();
    for layer in ["conv1", "conv2", "ip1", "ip2"] {
        for (a, b) in ours
            .layer_blobs::<f32>(layer)
            .unwrap()
            .iter()
            .zip(theirs.layer_blobs::<f32>(layer).unwrap())
        {
            let worst = a
                .to_vec()
                .unwrap()
                .iter()
                .zip(b.to_vec().unwrap())
                .map(|(x, y)| (x - y).abs())
                .fold(0f32, f32::max);
            assert!(worst <= 1e-6, "{layer}: {worst:e} from Caffe's weights");
        }
    }
}
