//! The data layers in nets: Data and AnnotatedData over LMDBs written here, ImageData over
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

/// The data and labels of `forwards` passes of the net `build` makes,
/// decoded on `threads` threads, the generator seeded with `seed`.
fn batches_on(
    threads: usize,
    seed: u64,
    forwards: usize,
    build: impl Fn() -> Net<f32>,
) -> Vec<(Vec<f32>, Vec<f32>)> {
    blob_data::set_decoding_threads(threads);
    blob_kernels::cpu::set_seed(seed);
    let mut net = build();
    let out = (0..forwards)
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
        batches_on(threads, 5, 4, || {
            data_net(
                &source,
                "crop_size: 12 mirror: true scale: 0.5",
                8,
                NetState::train(),
            )
            .unwrap()
        })
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

/// An `AnnotatedDatum` record: a `w x h` JPEG of gray with one coloured
/// rectangle (red for label 1, blue for label 2) at `rect` (relative
/// corners), and its box.
fn annotated(w: u32, h: u32, label: i32, rect: [f32; 4]) -> Vec<u8> {
    let inside = |x: u32, y: u32| {
        let (fx, fy) = (x as f32 / w as f32, y as f32 / h as f32);
        fx >= rect[0] && fx < rect[2] && fy >= rect[1] && fy < rect[3]
    };
    let img = image::RgbImage::from_fn(w, h, |x, y| match (inside(x, y), label) {
        (true, 1) => image::Rgb([220, 30, 30]),
        (true, _) => image::Rgb([30, 30, 220]),
        _ => image::Rgb([120, 120, 120]),
    });
    let mut jpeg = Vec::new();
    img.write_to(
        &mut std::io::Cursor::new(&mut jpeg),
        image::ImageFormat::Jpeg,
    )
    .unwrap();
    let bbox = blob_proto::NormalizedBBox {
        xmin: Some(rect[0]),
        ymin: Some(rect[1]),
        xmax: Some(rect[2]),
        ymax: Some(rect[3]),
        difficult: Some(false),
        ..Default::default()
    };
    blob_proto::AnnotatedDatum {
        datum: Some(blob_proto::Datum {
            data: Some(jpeg),
            encoded: Some(true),
            ..Default::default()
        }),
        r#type: Some(0),
        annotation_group: vec![blob_proto::AnnotationGroup {
            group_label: Some(label),
            annotation: vec![blob_proto::Annotation {
                instance_id: Some(0),
                bbox: Some(bbox),
                lanes: None,
            }],
        }],
    }
    .encode_to_vec()
}

/// Sixteen annotated records: objects of either label at places that
/// move from record to record.
fn annotated_store(dir: &Path) -> PathBuf {
    let records: Vec<Vec<u8>> = (0..16)
        .map(|i| {
            let (x, y) = ((i % 4) as f32 * 0.15, (i / 4) as f32 * 0.12);
            annotated(48, 40, 1 + (i % 2), [x + 0.05, y + 0.1, x + 0.45, y + 0.5])
        })
        .collect();
    store(dir, &records)
}

/// SSD's own data layer (ssd_pascal.py's settings, scaled down to 32 x
/// 32 images): distortion, expansion, its seven batch samplers, the
/// warp with its five interpolations, mirror and mean.
const SSD_TRANSFORM: &str = r#"
    transform_param {
      mirror: true mean_value: 104 mean_value: 117 mean_value: 123
      resize_param { prob: 1 resize_mode: WARP height: 32 width: 32
        interp_mode: LINEAR interp_mode: AREA interp_mode: NEAREST interp_mode: CUBIC interp_mode: LANCZOS4 }
      emit_constraint { emit_type: CENTER }
      distort_param { brightness_prob: 0.5 brightness_delta: 32 contrast_prob: 0.5
        contrast_lower: 0.5 contrast_upper: 1.5 hue_prob: 0.5 hue_delta: 18
        saturation_prob: 0.5 saturation_lower: 0.5 saturation_upper: 1.5 random_order_prob: 0.0 }
      expand_param { prob: 0.5 max_expand_ratio: 4.0 }
    }
    annotated_data_param {
      batch_sampler { max_sample: 1 max_trials: 1 }
      batch_sampler { sampler { min_scale: 0.3 max_scale: 1.0 min_aspect_ratio: 0.5 max_aspect_ratio: 2.0 }
        sample_constraint { min_jaccard_overlap: 0.1 } max_sample: 1 max_trials: 50 }
      batch_sampler { sampler { min_scale: 0.3 max_scale: 1.0 min_aspect_ratio: 0.5 max_aspect_ratio: 2.0 }
        sample_constraint { min_jaccard_overlap: 0.3 } max_sample: 1 max_trials: 50 }
      batch_sampler { sampler { min_scale: 0.3 max_scale: 1.0 min_aspect_ratio: 0.5 max_aspect_ratio: 2.0 }
        sample_constraint { min_jaccard_overlap: 0.5 } max_sample: 1 max_trials: 50 }
      batch_sampler { sampler { min_scale: 0.3 max_scale: 1.0 min_aspect_ratio: 0.5 max_aspect_ratio: 2.0 }
        sample_constraint { min_jaccard_overlap: 0.7 } max_sample: 1 max_trials: 50 }
      batch_sampler { sampler { min_scale: 0.3 max_scale: 1.0 min_aspect_ratio: 0.5 max_aspect_ratio: 2.0 }
        sample_constraint { min_jaccard_overlap: 0.9 } max_sample: 1 max_trials: 50 }
      batch_sampler { sampler { min_scale: 0.3 max_scale: 1.0 min_aspect_ratio: 0.5 max_aspect_ratio: 2.0 }
        sample_constraint { max_jaccard_overlap: 1.0 } max_sample: 1 max_trials: 50 }
      label_map_file: "labelmap_voc.prototxt"
    }"#;

/// Every row of an AnnotatedData label top is a box of a batch item
/// inside the image, or the one row of -1 of a batch without boxes.
fn check_label_rows(label: &[f32], batch: usize) -> usize {
    assert_eq!(label.len() % 8, 0);
    if label == [-1.0; 8] {
        return 0;
    }
    for row in label.chunks(8) {
        assert!(row[0] >= 0.0 && (row[0] as usize) < batch, "{row:?}");
        assert!(row[1] == 1.0 || row[1] == 2.0, "{row:?}");
        assert!(row[3] >= 0.0 && row[3] < row[5] && row[5] <= 1.0, "{row:?}");
        assert!(row[4] >= 0.0 && row[4] < row[6] && row[6] <= 1.0, "{row:?}");
        assert_eq!(row[7], 0.0);
    }
    label.len() / 8
}

/// SSD trains on an LMDB of annotated JPEGs as ssd_pascal.py sets it up:
/// AnnotatedData with every augmentation feeding MultiBoxLoss through a
/// small net. Every label row is a valid box, the batches do not depend
/// on the decoding threads, and the loss falls.
#[test]
fn annotated_data_feeds_multibox_loss_and_a_small_ssd_trains() {
    use blob_layers::solver::{LrPolicy, SgdSolver};
    let dir = scratch("annotated");
    let source = annotated_store(&dir);
    let head = |name: &str, outputs: usize| {
        format!(
            r#"layer {{ name: "{name}" type: "Convolution" bottom: "conv2" top: "{name}"
                 convolution_param {{ num_output: {outputs} kernel_size: 3 pad: 1
                   weight_filler {{ type: "xavier" }} }} }}
               layer {{ name: "{name}_perm" type: "Permute" bottom: "{name}" top: "{name}_perm"
                 permute_param {{ order: 0 order: 2 order: 3 order: 1 }} }}
               layer {{ name: "{name}_flat" type: "Flatten" bottom: "{name}_perm" top: "{name}_flat" }}"#
        )
    };
    let text = format!(
        r#"layer {{ name: "data" type: "AnnotatedData" top: "data" top: "label" {SSD_TRANSFORM}
             data_param {{ source: "{}" batch_size: 4 backend: LMDB }} }}
           layer {{ name: "scale" type: "Power" bottom: "data" top: "scaled" power_param {{ scale: 0.01 }} }}
           layer {{ name: "conv1" type: "Convolution" bottom: "scaled" top: "conv1"
             convolution_param {{ num_output: 16 kernel_size: 3 pad: 1 stride: 2 weight_filler {{ type: "xavier" }} }} }}
           layer {{ name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }}
           layer {{ name: "conv2" type: "Convolution" bottom: "conv1" top: "conv2"
             convolution_param {{ num_output: 16 kernel_size: 3 pad: 1 stride: 2 weight_filler {{ type: "xavier" }} }} }}
           layer {{ name: "relu2" type: "ReLU" bottom: "conv2" top: "conv2" }}
           {} {}
           layer {{ name: "priors" type: "PriorBox" bottom: "conv2" bottom: "data" top: "priors"
             prior_box_param {{ min_size: 12 max_size: 24 aspect_ratio: 2 flip: true
               variance: 0.1 variance: 0.1 variance: 0.2 variance: 0.2 }} }}
           layer {{ name: "loss" type: "MultiBoxLoss" bottom: "loc_flat" bottom: "conf_flat"
             bottom: "priors" bottom: "label" top: "loss"
             propagate_down: true propagate_down: true propagate_down: false propagate_down: false
             loss_param {{ normalization: VALID }}
             multibox_loss_param {{ num_classes: 3 code_type: CENTER_SIZE overlap_threshold: 0.5
               neg_pos_ratio: 3 neg_overlap: 0.5 }} }}"#,
        source.display(),
        head("loc", 4 * 4),
        head("conf", 4 * 3),
    );
    let build = || {
        Net::<f32>::builder()
            .state(NetState::train())
            .registry(&data_registry())
            .from_prototxt(&text)
            .unwrap()
    };
    // The same batches on one decoding thread and on four.
    assert!(
        batches_on(1, 9, 3, build) == batches_on(4, 9, 3, build),
        "the threads changed the batches"
    );

    blob_kernels::cpu::set_seed(1);
    let mut net = build();
    let specs = net.param_specs();
    let mut solver = SgdSolver::new(0.01, LrPolicy::Fixed).with_momentum(0.9);
    let (mut losses, mut boxes) = (Vec::new(), 0);
    for _ in 0..100 {
        net.clear_param_diffs().unwrap();
        let loss = net.forward().unwrap();
        assert_eq!(net.blob("data").unwrap().shape(), [4, 3, 32, 32]);
        boxes += check_label_rows(&net.blob("label").unwrap().to_vec().unwrap(), 4);
        losses.push(loss);
        net.backward().unwrap();
        solver.step(&net.param_blobs(), &specs).unwrap();
    }
    assert!(
        boxes > 200,
        "most objects survive the crops: {boxes} of 400"
    );
    let mean = |l: &[f32]| l.iter().sum::<f32>() / l.len() as f32;
    let (first, last) = (mean(&losses[..10]), mean(&losses[90..]));
    assert!(last.is_finite() && last < 0.7 * first, "{first} -> {last}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Without augmentation (SSD's test net: the warp alone) the boxes are
/// the stored ones, item by item, and the images are the records warped.
#[test]
fn annotated_data_in_test_keeps_each_records_boxes() {
    let dir = scratch("annotated-test");
    let source = annotated_store(&dir);
    let text = format!(
        r#"layer {{ name: "data" type: "AnnotatedData" top: "data" top: "label"
             transform_param {{ resize_param {{ height: 20 width: 24 }} }}
             data_param {{ source: "{}" batch_size: 3 backend: LMDB }} }}"#,
        source.display()
    );
    let mut net = Net::<f32>::builder()
        .state(NetState::test())
        .registry(&data_registry())
        .from_prototxt(&text)
        .unwrap();
    net.forward().unwrap();
    assert_eq!(net.blob("data").unwrap().shape(), [3, 3, 20, 24]);
    let label = net.blob("label").unwrap().to_vec().unwrap();
    assert_eq!(check_label_rows(&label, 3), 3);
    for (i, row) in label.chunks(8).enumerate() {
        let (x, y) = ((i % 4) as f32 * 0.15, (i / 4) as f32 * 0.12);
        let want = [
            i as f32,
            (1 + i % 2) as f32,
            0.0,
            x + 0.05,
            y + 0.1,
            x + 0.45,
            y + 0.5,
            0.0,
        ];
        for (g, w) in row.iter().zip(want) {
            assert!((g - w).abs() < 1e-6, "{row:?} vs {want:?}");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn annotated_data_refuses_what_it_does_not_do() {
    let dir = scratch("annotated-refusals");
    let source = annotated_store(&dir);
    let build = |kind: &str, extra: &str| {
        let text = format!(
            r#"layer {{ name: "data" type: "{kind}" top: "data" top: "label" {extra}
                 data_param {{ source: "{}" batch_size: 2 backend: LMDB }} }}"#,
            source.display()
        );
        Net::<f32>::builder()
            .registry(&data_registry())
            .from_prototxt(&text)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    for (kind, extra, words) in [
        (
            "AnnotatedData",
            "transform_param { resize_param { resize_mode: FIT_SMALL_SIZE height: 0 width: 8 } }",
            "resize_param 0 wants a height and a width from 1 to 16384, not 0 x 8",
        ),
        (
            "AnnotatedData",
            "transform_param { noise_param { prob: 0.5 } }",
            "noise_param",
        ),
        (
            "AnnotatedData",
            "transform_param { expand_param { max_expand_ratio: 0.5 } }",
            "max_expand_ratio",
        ),
        (
            "AnnotatedData",
            "annotated_data_param { batch_sampler { sampler { min_scale: 0 } } }",
            "batch_sampler 0",
        ),
        (
            "Data",
            "transform_param { resize_param { height: 8 width: 8 } }",
            "AnnotatedData",
        ),
        (
            "AnnotatedData",
            "transform_param { resize_param { prob: 0.5 height: 8 width: 8 } \
             resize_param { prob: 0.4 height: 16 width: 16 } }",
            "probs add up to 0.9, not 1",
        ),
        (
            "AnnotatedData",
            "annotated_data_param { yolo_data_type: 2 }",
            "yolo_data_type 2: 0 (SSD's rows) or 1 (YOLO's)",
        ),
        (
            "AnnotatedData",
            "annotated_data_param { yolo_data_type: 1 difficult_label_warmup: true }",
            "difficult_label_warmup",
        ),
        (
            "AnnotatedData",
            "annotated_data_param { yolo_data_type: 1 yolo_data_jitter: 1.5 }",
            "yolo_data_jitter 1.5",
        ),
    ] {
        let e = build(kind, extra);
        assert!(e.contains(words), "{kind} {extra}: {e}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The YOLO fork's AnnotatedData (eric612/MobileNet-YOLO's training
/// prototxts): its multi-scale training draws one of its `resize_param`s
/// for each ten batches, its crop jitter replaces the samplers, and its
/// label top holds each image's boxes by class (from 0), centre and
/// size, what `Yolov3` reads.
#[test]
fn annotated_data_in_yolos_layout_draws_its_scales_and_feeds_yolov3() {
    let dir = scratch("annotated-yolo");
    let source = annotated_store(&dir);
    let size = |s: u32| {
        format!(
            "resize_param {{ prob: 0.3334 resize_mode: WARP height: {s} width: {s} \
             interp_mode: LINEAR interp_mode: AREA interp_mode: LANCZOS4 }}"
        )
    };
    let text = format!(
        r#"layer {{ name: "data" type: "AnnotatedData" top: "data" top: "label"
             transform_param {{ scale: 0.007843 mirror: true mean_value: 127.5 {} {} {}
               emit_constraint {{ emit_type: CENTER }} }}
             data_param {{ source: "{}" batch_size: 2 backend: LMDB }}
             annotated_data_param {{ yolo_data_type: 1 yolo_data_jitter: 0.3 }} }}
           layer {{ name: "conv" type: "Convolution" bottom: "data" top: "conv"
             convolution_param {{ num_output: 14 kernel_size: 8 stride: 8
               weight_filler {{ type: "xavier" }} }} }}
           layer {{ name: "loss" type: "Yolov3" bottom: "conv" bottom: "label" top: "loss"
             yolov3_param {{ num_class: 2 num: 2 anchors_scale: 8 thresh: 0.6
               biases: 8 biases: 10 biases: 16 biases: 18 mask: 0 mask: 1 }} }}"#,
        size(16),
        size(24),
        size(32),
        source.display()
    );
    blob_kernels::cpu::set_seed(1701);
    let mut net = Net::<f32>::builder()
        .registry(&data_registry())
        .from_prototxt(&text)
        .unwrap();
    let mut sizes = Vec::new();
    for _ in 0..60 {
        net.forward().unwrap();
        let shape = net.blob("data").unwrap().shape().to_vec();
        assert!(
            [16, 24, 32].contains(&shape[2]) && shape[2] == shape[3],
            "{shape:?}"
        );
        sizes.push(shape[2]);
        let loss = net.blob("loss").unwrap().to_vec().unwrap()[0];
        assert!(loss.is_finite() && loss > 0.0, "{loss}");
        let label = net.blob("label").unwrap();
        assert_eq!(label.shape(), [2, 1, 300, 5]);
        let label = label.to_vec().unwrap();
        for image in label.chunks(1500) {
            // The record's one box (jitter's crops keep its centre), then
            // zeros.
            let row = &image[..5];
            assert!(row[0] == 0.0 || row[0] == 1.0, "{row:?}");
            assert!(
                (0.0..=1.0).contains(&row[1]) && (0.0..=1.0).contains(&row[2]),
                "{row:?}"
            );
            assert!(
                row[3] > 0.0 && row[3] <= 1.0 && row[4] > 0.0 && row[4] <= 1.0,
                "{row:?}"
            );
            assert!(image[5..].iter().all(|&v| v == 0.0));
        }
    }
    // One size for each ten batches, and more than one size in six draws.
    for ten in sizes.chunks(10) {
        assert!(ten.iter().all(|&s| s == ten[0]), "{sizes:?}");
    }
    let mut drawn: Vec<usize> = sizes.iter().step_by(10).copied().collect();
    drawn.dedup();
    assert!(drawn.len() > 1, "{sizes:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// SSD's aspect-keeping resizes: FIT_LARGE_SIZE_AND_PAD fits the longer
/// side and pads the other (the boxes move into the padded image),
/// FIT_SMALL_SIZE fits the shorter side, each image at a size of its
/// own (so one a batch).
#[test]
fn annotated_data_keeps_the_aspect_where_asked() {
    let dir = scratch("annotated-fit");
    let source = annotated_store(&dir);
    let net = |resize: &str, batch: usize| {
        let text = format!(
            r#"layer {{ name: "data" type: "AnnotatedData" top: "data" top: "label"
                 transform_param {{ resize_param {{ {resize} }} }}
                 data_param {{ source: "{}" batch_size: {batch} backend: LMDB }} }}"#,
            source.display()
        );
        Net::<f32>::builder()
            .state(NetState::test())
            .registry(&data_registry())
            .from_prototxt(&text)
            .unwrap()
    };
    // The records are 48 x 40: 32 wide, floor(32 / 1.2) = 26 high, three
    // rows of 200 above and three below.
    let mut large = net(
        "resize_mode: FIT_LARGE_SIZE_AND_PAD height: 32 width: 32 pad_value: 200",
        2,
    );
    large.forward().unwrap();
    assert_eq!(large.blob("data").unwrap().shape(), [2, 3, 32, 32]);
    let data = large.blob("data").unwrap().to_vec().unwrap();
    assert!(data[..3 * 32].iter().all(|&v| v == 200.0));
    assert!(data[29 * 32..32 * 32].iter().all(|&v| v == 200.0));
    let label = large.blob("label").unwrap().to_vec().unwrap();
    assert_eq!(check_label_rows(&label, 2), 2);
    // The first record's box, 0.1 to 0.5 of the height, in the 32 rows:
    // the fork's float padding of (32 - 32 / 1.2) / 2.
    let padding = (32.0 - 32.0 / 1.2f32) / 2.0;
    let want = (padding + 0.1 * 40.0 * (32.0 - 2.0 * padding) / 40.0) / 32.0;
    assert!(
        (label[4] - want).abs() < 1e-6,
        "{} against {want}",
        label[4]
    );
    // FIT_SMALL_SIZE: 20 high, floor(1.2 * 20) = 24 wide.
    let mut small = net("resize_mode: FIT_SMALL_SIZE height: 20 width: 20", 1);
    small.forward().unwrap();
    assert_eq!(small.blob("data").unwrap().shape(), [1, 3, 20, 24]);
    std::fs::remove_dir_all(&dir).unwrap();
}
