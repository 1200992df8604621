//! HDF5Data over files h5py wrote (as Caffe's own HDF5 example writes
//! them; float, double and integer datasets), HDF5Output's files read
//! back, and the errors a user's bad list or file gets.
#![cfg(feature = "hdf5")]

use std::path::{Path, PathBuf};

use blob_data::data_registry;
use blob_layers::net::{Net, NetState};
use blob_runtime::BlobError;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/hdf5")
        .join(name)
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("blobflow-hdf5-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A list file naming `files` (fixtures) in `dir`.
fn list(dir: &Path, files: &[&str]) -> PathBuf {
    let path = dir.join("list.txt");
    let lines: Vec<String> = files
        .iter()
        .map(|f| fixture(f).display().to_string())
        .collect();
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

fn hdf5_net(source: &Path, batch: usize, extra: &str) -> Result<Net<f32>, BlobError> {
    let text = format!(
        r#"layer {{ name: "data" type: "HDF5Data" top: "data" top: "label"
            hdf5_data_param {{ source: "{}" batch_size: {batch} {extra} }} }}"#,
        source.display()
    );
    Net::builder()
        .state(NetState::train())
        .registry(&data_registry())
        .from_prototxt(&text)
}

#[test]
fn rows_come_file_after_file_and_wrap_around() {
    let dir = scratch("rows");
    let mut net = hdf5_net(&list(&dir, &["train_a.h5", "train_b.h5"]), 4, "").unwrap();
    assert_eq!(net.blob("data").unwrap().shape(), [4, 2, 3]);
    assert_eq!(net.blob("label").unwrap().shape(), [4]);
    // File a's 6 rows, then b's 4 (double data, integer labels), then a's.
    let mut labels = Vec::new();
    let mut firsts = Vec::new();
    for _ in 0..4 {
        net.forward().unwrap();
        labels.extend(net.blob("label").unwrap().to_vec().unwrap());
        let data = net.blob("data").unwrap().to_vec().unwrap();
        firsts.extend(data.chunks(6).map(|row| row[0]));
    }
    assert_eq!(
        labels,
        [
            0., 1., 2., 3., 4., 5., 10., 11., 12., 13., 0., 1., 2., 3., 4., 5.
        ]
    );
    assert_eq!(firsts[..7], [0.0, 0.6, 1.2, 1.8, 2.4, 3.0, 100.0]);
    assert_eq!(firsts[9], 118.0);
}

#[test]
fn shuffle_reorders_rows_and_keeps_every_one() {
    let dir = scratch("shuffle");
    blob_kernels::cpu::set_seed(3);
    let mut net = hdf5_net(&list(&dir, &["train_a.h5"]), 3, "shuffle: true").unwrap();
    let mut labels = Vec::new();
    for _ in 0..2 {
        net.forward().unwrap();
        labels.extend(net.blob("label").unwrap().to_vec().unwrap());
    }
    let mut sorted = labels.clone();
    sorted.sort_by(f32::total_cmp);
    assert_eq!(sorted, [0., 1., 2., 3., 4., 5.]);
    assert_ne!(labels, sorted, "seed 3 leaves the rows in order");
}

#[test]
fn hdf5_output_writes_data_and_label_whole() {
    let dir = scratch("output");
    let out = dir.join("out.h5");
    let text = format!(
        r#"input: "x" input_shape {{ dim: 3 dim: 2 dim: 2 }}
           input: "y" input_shape {{ dim: 3 }}
           layer {{ name: "save" type: "HDF5Output" bottom: "x" bottom: "y"
                    hdf5_output_param {{ file_name: "{}" }} }}"#,
        out.display()
    );
    let mut net = Net::<f32>::builder()
        .registry(&data_registry())
        .from_prototxt(&text)
        .unwrap();
    let x: Vec<f32> = (0..12).map(|v| v as f32 * 0.5).collect();
    net.blob("x")
        .unwrap()
        .mutable_cpu_data()
        .unwrap()
        .copy_from_slice(&x);
    net.blob("y")
        .unwrap()
        .mutable_cpu_data()
        .unwrap()
        .copy_from_slice(&[7.0, 8.0, 9.0]);
    net.forward().unwrap();
    // Read back as HDF5Data reads: Caffe's 4-D shapes.
    let list = dir.join("list.txt");
    std::fs::write(&list, format!("{}\n", out.display())).unwrap();
    let mut back = hdf5_net(&list, 3, "").unwrap();
    assert_eq!(back.blob("data").unwrap().shape(), [3, 2, 2, 1]);
    assert_eq!(back.blob("label").unwrap().shape(), [3, 1, 1, 1]);
    back.forward().unwrap();
    assert_eq!(back.blob("data").unwrap().to_vec().unwrap(), x);
    assert_eq!(
        back.blob("label").unwrap().to_vec().unwrap(),
        [7.0, 8.0, 9.0]
    );
    // No partial file is left beside it.
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.contains("partial")), "{names:?}");
}

#[test]
fn bad_lists_and_files_are_named() {
    let dir = scratch("bad");
    let err = hdf5_net(&dir.join("missing.txt"), 2, "")
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("Failed to open source file") && err.contains("missing.txt"),
        "{err}"
    );
    let empty = dir.join("empty.txt");
    std::fs::write(&empty, "\n").unwrap();
    let err = hdf5_net(&empty, 2, "").err().unwrap().to_string();
    assert!(err.contains("at least 1 HDF5 filename"), "{err}");
    let err = hdf5_net(&list(&dir, &["no_label.h5"]), 2, "")
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("no_label.h5") && err.contains("dataset label"),
        "{err}"
    );
    let err = hdf5_net(&list(&dir, &["no_rows.h5"]), 2, "")
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("no_rows.h5: dataset data has no rows"),
        "{err}"
    );
    let err = hdf5_net(&list(&dir, &["not_there.h5"]), 2, "")
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("Failed opening HDF5 file") && err.contains("not_there.h5"),
        "{err}"
    );
    // A JPEG is not an HDF5 file.
    let jpeg = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/astronaut_crop.jpg");
    let l = dir.join("jpeg.txt");
    std::fs::write(&l, format!("{}\n", jpeg.display())).unwrap();
    let err = hdf5_net(&l, 2, "").err().unwrap().to_string();
    assert!(err.contains("Failed opening HDF5 file"), "{err}");
}
