//! The data layers in nets: Data over LMDBs written here, ImageData over
//! image lists, transform_param in both phases, and the errors a user's
//! bad store or list gets.

use std::path::{Path, PathBuf};

use blob_data::{Backend, StoreWriter, data_registry};
use blob_layers::net::{Net, NetState};
use blob_runtime::BlobError;
use prost::Message;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("blobflow-data-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn datum(c: i32, h: i32, w: i32, first: u8, label: i32) -> Vec<u8> {
    let n = (c * h * w) as usize;
    blob_proto::Datum {
        channels: Some(c),
        height: Some(h),
        width: Some(w),
        data: Some((0..n).map(|i| first.wrapping_add(i as u8)).collect()),
        label: Some(label),
        ..Default::default()
    }
    .encode_to_vec()
}

/// An LMDB of `records` (key `%08d`), each the bytes given.
fn store(dir: &Path, records: &[Vec<u8>]) -> PathBuf {
    let path = dir.join("store_lmdb");
    let mut w = StoreWriter::create(&path, Backend::Lmdb).unwrap();
    for (i, r) in records.iter().enumerate() {
        w.put(format!("{i:08}").as_bytes(), r).unwrap();
    }
    w.finish().unwrap();
    path
}

fn data_net(
    source: &Path,
    transform: &str,
    batch: usize,
    state: NetState,
) -> Result<Net<f32>, BlobError> {
    let text = format!(
        r#"layer {{ name: "data" type: "Data" top: "data" top: "label"
            transform_param {{ {transform} }}
            data_param {{ source: "{}" batch_size: {batch} backend: LMDB }} }}"#,
        source.display()
    );
    Net::builder()
        .state(state)
        .registry(&data_registry())
        .from_prototxt(&text)
}

#[test]
fn train_crops_are_random_but_seeded_and_test_crops_are_central() {
    let dir = scratch("crops");
    let records: Vec<Vec<u8>> = (0..8).map(|i| datum(1, 4, 4, 16 * i, i as i32)).collect();
    let source = store(&dir, &records);
    let batches = |seed: u64| {
        blob_kernels::cpu::set_seed(seed);
        let mut net = data_net(&source, "crop_size: 2 mirror: true", 4, NetState::train()).unwrap();
        (0..4)
            .map(|_| {
                net.forward().unwrap();
                net.blob("data").unwrap().to_vec().unwrap()
            })
            .collect::<Vec<_>>()
    };
    let (a, b, c) = (batches(1), batches(1), batches(2));
    assert_eq!(a, b, "the same seed gives the same crops and mirrors");
    assert_ne!(a, c, "another seed gives others");
    // Every 2 x 2 crop is a window of its 4 x 4 record, mirrored or not.
    for (k, batch) in a.iter().enumerate() {
        for item in 0..4 {
            let first = (16 * ((4 * k + item) % 8)) as f32;
            let v = &batch[item * 4..item * 4 + 4];
            let (top_left, top_right) = (v[0].min(v[1]), v[0].max(v[1]));
            let (row, col) = (
                (top_left - first) as usize / 4,
                (top_left - first) as usize % 4,
            );
            assert!(row <= 2 && col <= 2, "crop at {row},{col}");
            assert_eq!(top_right, top_left + 1.0);
            assert_eq!(v[2].min(v[3]), top_left + 4.0);
        }
    }
    // TEST crops the centre (a mirror would still be drawn, as in Caffe).
    let mut test = data_net(&source, "crop_size: 2", 2, NetState::test()).unwrap();
    test.forward().unwrap();
    // The centre of record 0 (values 0..16): rows 1..3, columns 1..3.
    assert_eq!(
        test.blob("data").unwrap().to_vec().unwrap()[..4],
        [5.0, 6.0, 9.0, 10.0]
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn mean_files_subtract_and_records_of_another_size_are_named() {
    let dir = scratch("mean");
    let mean =
        blob_runtime::Blob::<f32>::from_vec(&[1, 1, 2, 2], vec![1.0, 2.0, 3.0, 4.0]).unwrap();
    let mean_path = dir.join("mean.binaryproto");
    blob_runtime::write_blob_file(&mean_path, &mean, false).unwrap();
    let source = store(
        &dir,
        &[
            datum(1, 2, 2, 10, 0),
            datum(1, 2, 2, 20, 1),
            datum(1, 3, 3, 0, 2),
        ],
    );
    let transform = format!("mean_file: \"{}\" scale: 2", mean_path.display());
    let mut net = data_net(&source, &transform, 2, NetState::test()).unwrap();
    net.forward().unwrap();
    assert_eq!(
        net.blob("data").unwrap().to_vec().unwrap(),
        [18.0, 18.0, 18.0, 18.0, 38.0, 38.0, 38.0, 38.0]
    );
    let err = net.forward().unwrap_err().to_string();
    assert!(
        err.contains("store_lmdb, key \"00000002\": the mean_file's image is 1 x 2 x 2 but the record is 1 x 3 x 3"),
        "{err}"
    );
    // Without a mean: the second batch begins with the 3 x 3 record, and
    // the store starts over with a 2 x 2 one.
    let mut net = data_net(&source, "", 2, NetState::test()).unwrap();
    net.forward().unwrap();
    let err = net.forward().unwrap_err().to_string();
    assert!(
        err.contains(
            "key \"00000000\": its image is 1 x 2 x 2 but the batch's first was 1 x 3 x 3"
        ),
        "{err}"
    );
    // With batch 1, each batch takes its record's size.
    let mut net = data_net(&source, "", 1, NetState::test()).unwrap();
    let shapes: Vec<Vec<usize>> = (0..3)
        .map(|_| {
            net.forward().unwrap();
            net.blob("data").unwrap().shape().to_vec()
        })
        .collect();
    assert_eq!(
        shapes,
        [vec![1, 1, 2, 2], vec![1, 1, 2, 2], vec![1, 1, 3, 3]]
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn stores_that_are_not_lmdbs_are_refused_with_what_they_are() {
    let dir = scratch("not-lmdb");
    std::fs::create_dir_all(dir.join("leveldb")).unwrap();
    std::fs::write(dir.join("leveldb/CURRENT"), "MANIFEST-000001\n").unwrap();
    let err = data_net(&dir.join("leveldb"), "", 1, NetState::test())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("a LevelDB store, not an LMDB (set `backend: LEVELDB`)"),
        "{err}"
    );
    let err = data_net(&dir.join("missing"), "", 1, NetState::test())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("missing: no such folder") && err.contains("layer 'data' (Data)"),
        "{err}"
    );
    let empty = store(&dir, &[]);
    let err = data_net(&empty, "", 1, NetState::test())
        .unwrap_err()
        .to_string();
    assert!(err.contains("the LMDB holds no records"), "{err}");
    let source = store(&scratch("crop-big"), &[datum(1, 2, 2, 0, 0)]);
    let err = data_net(&source, "crop_size: 3", 1, NetState::train())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("key \"00000000\": crop_size 3 is larger than the 2 x 2 image"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_net_dropped_while_its_thread_waits_on_a_full_queue_stops_it() {
    let dir = scratch("drop");
    let records: Vec<Vec<u8>> = (0..4).map(|i| datum(1, 8, 8, i, 0)).collect();
    let source = store(&dir, &records);
    let threads = || {
        std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines().find_map(|l| {
                    l.strip_prefix("Threads:")
                        .map(|n| n.trim().parse::<usize>().unwrap())
                })
            })
    };
    let before = threads();
    for _ in 0..20 {
        let net = data_net(&source, "", 1, NetState::test()).unwrap();
        // Let the thread fill its queue of 4 and block on the 5th.
        std::thread::sleep(std::time::Duration::from_millis(5));
        drop(net);
    }
    if let (Some(before), Some(after)) = (before, threads()) {
        // Other tests run beside this one; 20 leaked threads stand out.
        assert!(
            after < before + 10,
            "{before} threads before, {after} after"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A folder of PNGs and a list naming them.
fn image_list(dir: &Path, list: &str) -> PathBuf {
    for (name, value) in [("a.png", 10u8), ("b.png", 20), ("c.png", 30)] {
        image::RgbImage::from_fn(4, 2, |x, y| {
            image::Rgb([value, value + x as u8, value + y as u8])
        })
        .save(dir.join(name))
        .unwrap();
    }
    let path = dir.join("list.txt");
    std::fs::write(&path, list).unwrap();
    path
}

fn image_net(dir: &Path, list: &Path, extra: &str) -> Result<Net<f32>, BlobError> {
    let text = format!(
        r#"layer {{ name: "images" type: "ImageData" top: "data" top: "label"
            image_data_param {{ source: "{}" root_folder: "{}/" batch_size: 2 {extra} }} }}"#,
        list.display(),
        dir.display()
    );
    Net::builder()
        .state(NetState::train())
        .registry(&data_registry())
        .from_prototxt(&text)
}

#[test]
fn image_lists_read_in_order_as_bgr_planes_and_start_over() {
    let dir = scratch("list");
    let list = image_list(&dir, "a.png 0\nb.png 1\n\nc.png 2\n");
    let mut net = image_net(&dir, &list, "").unwrap();
    net.forward().unwrap();
    assert_eq!(net.blob("data").unwrap().shape(), [2, 3, 2, 4]);
    let data = net.blob("data").unwrap().to_vec().unwrap();
    // Item 0's planes: blue (10 + y), green (10 + x), red (10).
    assert_eq!(data[..8], [10.0, 10.0, 10.0, 10.0, 11.0, 11.0, 11.0, 11.0]);
    assert_eq!(data[8..12], [10.0, 11.0, 12.0, 13.0]);
    assert_eq!(data[16..24], [10.0; 8]);
    let mut labels = net.blob("label").unwrap().to_vec().unwrap();
    net.forward().unwrap();
    labels.extend(net.blob("label").unwrap().to_vec().unwrap());
    assert_eq!(labels, [0.0, 1.0, 2.0, 0.0]);
    let mut gray = image_net(&dir, &list, "is_color: false new_height: 4 new_width: 8").unwrap();
    gray.forward().unwrap();
    assert_eq!(gray.blob("data").unwrap().shape(), [2, 1, 4, 8]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_shuffled_list_gives_every_image_once_a_pass() {
    let dir = scratch("shuffle");
    let list = image_list(&dir, "a.png 0\nb.png 1\nc.png 2\na.png 3\n");
    let mut net = image_net(&dir, &list, "shuffle: true").unwrap();
    let mut labels = Vec::new();
    for _ in 0..4 {
        net.forward().unwrap();
        labels.extend(net.blob("label").unwrap().to_vec().unwrap());
    }
    for pass in labels.chunks(4) {
        let mut sorted = pass.to_vec();
        sorted.sort_by(f32::total_cmp);
        assert_eq!(sorted, [0.0, 1.0, 2.0, 3.0], "{labels:?}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_lists_and_missing_images_are_named_with_their_line() {
    let dir = scratch("bad-list");
    let list = image_list(&dir, "a.png 0\nb.png\n");
    let err = image_net(&dir, &list, "").unwrap_err().to_string();
    assert!(
        err.contains("list.txt, line 2: \"b.png\" has no label"),
        "{err}"
    );
    std::fs::write(&list, "a.png 0\nb.png one\n").unwrap();
    let err = image_net(&dir, &list, "").unwrap_err().to_string();
    assert!(
        err.contains("line 2: the label \"one\" is not a whole number"),
        "{err}"
    );
    std::fs::write(&list, "a.png 0\nb.png 1\nmissing.png 2\nc.png 3\n").unwrap();
    let mut net = image_net(&dir, &list, "").unwrap();
    let err = net
        .forward()
        .and_then(|_| net.forward())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("list.txt, line 3 (missing.png): Could not load"),
        "{err}"
    );
    assert!(err.contains("missing.png"), "{err}");
    let err = image_net(&dir, &list, "new_height: 4")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("new_height and new_width must be given together"),
        "{err}"
    );
    let err = image_net(&dir, &list, "new_height: 4000000 new_width: 4000000")
        .unwrap_err()
        .to_string();
    assert!(err.contains("more than the 16384 pixels a side"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn leveldb_is_caffes_default_backend() {
    let dir = scratch("leveldb");
    let path = dir.join("pairs_leveldb");
    let mut w = StoreWriter::create(&path, Backend::LevelDb).unwrap();
    for i in 0..5u8 {
        w.put(
            format!("{i:08}").as_bytes(),
            &datum(2, 2, 2, 10 * i, i32::from(i % 2)),
        )
        .unwrap();
    }
    assert_eq!(w.finish().unwrap(), 5);
    // No `backend`: LEVELDB, as in Caffe's siamese example.
    let text = format!(
        r#"layer {{ name: "pair_data" type: "Data" top: "pair_data" top: "sim"
            data_param {{ source: "{}" batch_size: 3 }} }}"#,
        path.display()
    );
    let mut net = Net::<f32>::builder()
        .state(NetState::train())
        .registry(&data_registry())
        .from_prototxt(&text)
        .unwrap();
    let mut labels = Vec::new();
    for _ in 0..2 {
        net.forward().unwrap();
        labels.extend(net.blob("sim").unwrap().to_vec().unwrap());
    }
    assert_eq!(net.blob("pair_data").unwrap().shape(), [3, 2, 2, 2]);
    assert_eq!(labels, [0.0, 1.0, 0.0, 1.0, 0.0, 0.0]);
    // The same store named as an LMDB is refused with what it is.
    let lmdb = text.replace("batch_size: 3", "batch_size: 3 backend: LMDB");
    let err = Net::<f32>::builder()
        .registry(&data_registry())
        .from_prototxt(&lmdb)
        .unwrap_err()
        .to_string();
    assert!(err.contains("a LevelDB store, not an LMDB"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn jpeg_batches_are_the_same_on_one_decoding_thread_and_on_four() {
    let dir = scratch("threads");
    let records: Vec<Vec<u8>> = (0..24u32)
        .map(|i| {
            let img = image::RgbImage::from_fn(20, 16, |x, y| {
                image::Rgb([(x * 12 + i) as u8, (y * 15) as u8, (i * 9) as u8])
            });
            let mut jpeg = Vec::new();
            img.write_to(
                &mut std::io::Cursor::new(&mut jpeg),
                image::ImageFormat::Jpeg,
            )
            .unwrap();
            blob_proto::Datum {
                data: Some(jpeg),
                encoded: Some(true),
                label: Some(i as i32),
                ..Default::default()
            }
            .encode_to_vec()
        })
        .collect();
    let source = store(&dir, &records);
    let batches = |threads: usize| {
        blob_data::set_decoding_threads(threads);
        blob_kernels::cpu::set_seed(5);
        let mut net = data_net(
            &source,
            "crop_size: 12 mirror: true scale: 0.5",
            8,
            NetState::train(),
        )
        .unwrap();
        let out: Vec<(Vec<f32>, Vec<f32>)> = (0..4)
            .map(|_| {
                net.forward().unwrap();
                (
                    net.blob("data").unwrap().to_vec().unwrap(),
                    net.blob("label").unwrap().to_vec().unwrap(),
                )
            })
            .collect();
        blob_data::set_decoding_threads(0);
        out
    };
    let (one, four) = (batches(1), batches(4));
    assert_eq!(one[0].0.len(), 8 * 3 * 12 * 12);
    assert_eq!(one[3].1, [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]);
    assert!(one == four, "the threads changed the batches");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn memory_data_serves_what_the_program_hands_it() {
    use blob_data::MemoryDataLayer;
    let text = r#"layer { name: "in" type: "MemoryData" top: "data" top: "label"
        transform_param { scale: 0.5 }
        memory_data_param { batch_size: 2 channels: 1 height: 2 width: 2 } }"#;
    let mut net = Net::<f32>::builder()
        .registry(&data_registry())
        .from_prototxt(text)
        .unwrap();
    assert_eq!(net.blob("data").unwrap().shape(), [2, 1, 2, 2]);
    let err = net.forward().unwrap_err().to_string();
    assert!(
        err.contains("needs to be initialized by calling Reset"),
        "{err}"
    );
    // Records go through transform_param (scale 0.5), and their labels.
    let records: Vec<Vec<u8>> = (0..4).map(|i| datum(1, 2, 2, 10 * i as u8, i)).collect();
    let feed = net.layer_mut::<MemoryDataLayer<f32>>("in").unwrap();
    feed.add_datum_vector(&records).unwrap();
    let err = feed.add_datum_vector(&records).unwrap_err().to_string();
    assert!(
        err.contains("until current data has been consumed"),
        "{err}"
    );
    let err = feed.set_batch_size(1).unwrap_err().to_string();
    assert!(
        err.contains("until current data has been consumed"),
        "{err}"
    );
    net.forward().unwrap();
    assert_eq!(
        net.blob("data").unwrap().to_vec().unwrap(),
        [0., 0.5, 1., 1.5, 5., 5.5, 6., 6.5]
    );
    assert_eq!(net.blob("label").unwrap().shape(), [2, 1, 1, 1]);
    assert_eq!(net.blob("label").unwrap().to_vec().unwrap(), [0., 1.]);
    net.forward().unwrap();
    assert_eq!(net.blob("label").unwrap().to_vec().unwrap(), [2., 3.]);
    // All served: new arrays may come, as they are (no transform).
    let feed = net.layer_mut::<MemoryDataLayer<f32>>("in").unwrap();
    let err = feed
        .reset(&[0.0; 12], &[0.0; 3], 3)
        .unwrap_err()
        .to_string();
    assert!(err.contains("multiple of batch size"), "{err}");
    let err = feed.reset(&[0.0; 7], &[0.0; 2], 2).unwrap_err().to_string();
    assert!(
        err.contains("need 8 values and 2 labels, not 7 and 2"),
        "{err}"
    );
    feed.reset(&[9.0; 8], &[4.0, 5.0], 2).unwrap();
    net.forward().unwrap();
    assert_eq!(net.blob("data").unwrap().to_vec().unwrap(), [9.0; 8]);
    // A record of another shape is refused, naming it.
    let feed = net.layer_mut::<MemoryDataLayer<f32>>("in").unwrap();
    let err = feed
        .add_datum_vector(&[datum(1, 2, 2, 0, 0), datum(1, 3, 2, 0, 0)])
        .unwrap_err()
        .to_string();
    assert!(err.contains("record 1 becomes [1, 3, 2]"), "{err}");
}
