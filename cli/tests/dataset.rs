//! `blobflow convert-imageset`, `convert-annoset` and `compute-image-mean`, Caffe's
//! dataset tools, on a few images: the records they write, what they
//! pass over, and a Data layer reading the result with its mean.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use blobflow::data::{Backend, ColorMode, Pixels, StoreReader, decode_datum};
use blobflow::layers::net::{Net, NetState};
use prost::Message;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn blobflow(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_blobflow"))
        .args(args)
        .output()
        .unwrap()
}

/// A folder with a JPEG, two PNGs and a list naming them and a missing
/// image.
fn images(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("blobflow-dataset-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("img")).unwrap();
    std::fs::copy(
        root().join("data/tests/fixtures/astronaut_crop.jpg"),
        dir.join("img/astronaut.jpg"),
    )
    .unwrap();
    image::RgbImage::from_fn(40, 30, |x, y| image::Rgb([x as u8 * 6, y as u8 * 8, 100]))
        .save(dir.join("img/ramp.png"))
        .unwrap();
    image::GrayImage::from_fn(10, 20, |x, y| image::Luma([(x * y) as u8]))
        .save(dir.join("img/gray.png"))
        .unwrap();
    std::fs::write(
        dir.join("list.txt"),
        "astronaut.jpg 3\nramp.png 1\nmissing.png 2\ngray.png 0\n",
    )
    .unwrap();
    dir
}

/// `blobflow convert-imageset FLAGS ROOT/ LIST DB` over an [`images`]
/// folder (`command` spelt as Caffe's `convert_imageset` or not).
fn convert(command: &str, dir: &Path, flags: &[&str], db: &Path) -> Output {
    let root = format!("{}/img/", dir.display());
    let list = dir.join("list.txt").display().to_string();
    let db = db.display().to_string();
    let mut args = vec![command];
    args.extend_from_slice(flags);
    args.extend([root.as_str(), list.as_str(), db.as_str()]);
    blobflow(&args)
}

/// Every record of an LMDB: key and value, as stored.
fn raw_records(store: &Path) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    StoreReader::open(store, Backend::Lmdb)
        .unwrap()
        .cycle(
            &mut |k, v| {
                if out.iter().any(|(key, _)| key == k) {
                    return false;
                }
                out.push((k.to_vec(), v.to_vec()));
                true
            },
            &mut || {},
        )
        .unwrap();
    out
}

/// Every record of a store: key and decoded Datum.
fn records(store: &Path) -> Vec<(String, blobflow::proto::Datum)> {
    raw_records(store)
        .into_iter()
        .map(|(k, v)| {
            (
                String::from_utf8(k).unwrap(),
                blobflow::proto::Datum::decode(v.as_slice()).unwrap(),
            )
        })
        .collect()
}

/// A copy of a store of `tests/fixtures/caffe-cifar-train` (opening an
/// LMDB makes its lock file beside it).
fn caffes_store(name: &str, into: &Path) -> PathBuf {
    let to = into.join(format!("caffe_{name}"));
    std::fs::create_dir_all(&to).unwrap();
    std::fs::copy(
        root()
            .join("tests/fixtures/caffe-cifar-train")
            .join(name)
            .join("data.mdb"),
        to.join("data.mdb"),
    )
    .unwrap();
    to
}

#[test]
fn convert_imageset_and_compute_image_mean_write_what_caffes_tools_wrote() {
    let fixture = root().join("tests/fixtures/caffe-cifar-train");
    let dir = std::env::temp_dir().join(format!("blobflow-dataset-{}-caffe", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let images = format!("{}/images/", fixture.display());
    let list = |name: &str| fixture.join(name).display().to_string();
    let ours = |name: &str| dir.join(name).display().to_string();
    let resize = ["--resize_height=32", "--resize_width=32"];
    // Raw records (40 x 40 PNGs resized to 32 x 32 by OpenCV's bilinear
    // resize): Caffe's bytes, keys and values.
    let mut args = vec!["convert-imageset"];
    args.extend(resize);
    let (train_list, train_db) = (list("train.txt"), ours("train_lmdb"));
    args.extend([images.as_str(), train_list.as_str(), train_db.as_str()]);
    let run = blobflow(&args);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let caffes = raw_records(&caffes_store("cifar_train_lmdb", &dir));
    assert_eq!(caffes.len(), 200);
    assert!(
        raw_records(&dir.join("train_lmdb")) == caffes,
        "records differ from Caffe's"
    );
    // Encoded records: the PNG encoders differ, the images they hold not.
    let mut args = vec!["convert-imageset", "--encoded", "--encode_type=png"];
    args.extend(resize);
    let (test_list, test_db) = (list("test.txt"), ours("test_lmdb"));
    args.extend([images.as_str(), test_list.as_str(), test_db.as_str()]);
    let run = blobflow(&args);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let caffes = records(&caffes_store("cifar_test_lmdb", &dir));
    let ours_test = records(&dir.join("test_lmdb"));
    assert_eq!(caffes.len(), 100);
    assert_eq!(ours_test.len(), 100);
    for ((key, a), (caffe_key, b)) in ours_test.iter().zip(&caffes) {
        assert_eq!(key, caffe_key);
        assert_eq!((a.label, a.encoded), (b.label, Some(true)), "{key}");
        let decode = |d: &blobflow::proto::Datum| {
            decode_datum(&d.encode_to_vec(), ColorMode::AsStored).unwrap()
        };
        assert_eq!(decode(a), decode(b), "{key}");
    }
    // The mean of Caffe's training LMDB: Caffe's file, byte for byte.
    let mean = ours("mean.binaryproto");
    let caffe_train = caffes_store("cifar_train_lmdb", &dir.join("again"));
    let run = blobflow(&[
        "compute-image-mean",
        caffe_train.to_str().unwrap(),
        mean.as_str(),
    ]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(
        std::fs::read(&mean).unwrap() == std::fs::read(fixture.join("mean.binaryproto")).unwrap(),
        "the mean differs from Caffe's"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn convert_imageset_resizes_into_caffes_records_and_passes_over_what_it_cannot_read() {
    let dir = images("resize");
    let db = dir.join("train_lmdb");
    let run = convert(
        "convert-imageset",
        &dir,
        &["--resize_height=16", "--resize_width=24"],
        &db,
    );
    let log = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{log}");
    assert!(log.contains("] A total of 4 images."), "{log}");
    assert!(
        log.contains("] line 3: Could not open or find file"),
        "{log}"
    );
    assert!(log.contains("] Processed 3 files."), "{log}");
    assert!(log.contains("1 images could not be read"), "{log}");
    let stored = records(&db);
    let keys: Vec<&str> = stored.iter().map(|(k, _)| k.as_str()).collect();
    // Caffe's keys: the line's index in the list (the missing one's too).
    assert_eq!(
        keys,
        [
            "00000000_astronaut.jpg",
            "00000001_ramp.png",
            "00000003_gray.png"
        ]
    );
    for ((_, d), label) in stored.iter().zip([3, 1, 0]) {
        // A gray image is read in colour, as Caffe's IMREAD_COLOR reads it.
        assert_eq!(
            (d.channels, d.height, d.width),
            (Some(3), Some(16), Some(24))
        );
        assert_eq!((d.label, d.encoded), (Some(label), Some(false)));
        assert_eq!(d.data.as_ref().unwrap().len(), 3 * 16 * 24);
    }
    // The ramp's blue plane is its constant 100; red runs along x.
    let ramp = stored[1].1.data.as_ref().unwrap();
    assert!(ramp[..16 * 24].iter().all(|&b| b == 100));
    // The mean, and a Data layer subtracting it from each record.
    let mean = dir.join("mean.binaryproto");
    let run = blobflow(&[
        "compute-image-mean",
        &db.display().to_string(),
        &mean.display().to_string(),
    ]);
    let log = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{log}");
    assert!(log.contains("] Number of channels: 3"), "{log}");
    assert!(log.contains("] mean_value channel [0]: "), "{log}");
    let proto = blobflow::proto::BlobProto::decode(&std::fs::read(&mean).unwrap()[..]).unwrap();
    assert_eq!(
        (proto.num, proto.channels, proto.height, proto.width),
        (Some(1), Some(3), Some(16), Some(24))
    );
    assert!(
        proto.shape.is_none(),
        "Caffe's tool writes the legacy dims only"
    );
    for (i, &m) in proto.data.iter().enumerate() {
        let sum: f32 = stored
            .iter()
            .map(|(_, d)| f32::from(d.data.as_ref().unwrap()[i]))
            .sum();
        assert_eq!(m, sum / 3.0);
    }
    let text = format!(
        r#"layer {{ name: "d" type: "Data" top: "data" top: "label"
            transform_param {{ mean_file: "{}" }}
            data_param {{ source: "{}" batch_size: 3 backend: LMDB }} }}"#,
        mean.display(),
        db.display()
    );
    let mut net = Net::<f32>::builder()
        .state(NetState::test())
        .registry(&blobflow::data::data_registry())
        .from_prototxt(&text)
        .unwrap();
    net.forward().unwrap();
    let batch = net.blob("data").unwrap().to_vec().unwrap();
    let per_pixel: Vec<f32> = (0..proto.data.len())
        .map(|i| (0..3).map(|k| batch[k * proto.data.len() + i]).sum())
        .collect();
    assert!(
        per_pixel.iter().all(|s| s.abs() < 1e-3),
        "the mean subtracted leaves sums of 0"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn encoded_stores_keep_each_files_bytes_and_gray_reads_one_channel() {
    let dir = images("encoded");
    let db = dir.join("encoded_lmdb");
    let run = convert("convert_imageset", &dir, &["-encoded"], &db);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let stored = records(&db);
    assert_eq!(stored.len(), 3);
    let jpeg = std::fs::read(dir.join("img/astronaut.jpg")).unwrap();
    assert_eq!(
        stored[0].1.data.as_deref(),
        Some(&jpeg[..]),
        "Caffe's ReadFileToDatum"
    );
    assert_eq!(stored[0].1.encoded, Some(true));
    let example = decode_datum(&stored[0].1.encode_to_vec(), ColorMode::AsStored).unwrap();
    assert_eq!(
        (example.channels, example.height, example.width),
        (3, 48, 64)
    );
    // The gray PNG read in colour is re-encoded (3 channels, as stored 1).
    let gray = decode_datum(&stored[2].1.encode_to_vec(), ColorMode::AsStored).unwrap();
    assert_eq!(gray.channels, 3);
    let db = dir.join("gray_lmdb");
    let run = convert("convert-imageset", &dir, &["--gray"], &db);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let stored = records(&db);
    let gray = decode_datum(&stored[2].1.encode_to_vec(), ColorMode::AsStored).unwrap();
    let Pixels::Bytes(pixels) = gray.pixels else {
        panic!("bytes")
    };
    assert_eq!((gray.channels, gray.height, gray.width), (1, 20, 10));
    assert_eq!(pixels[3 * 10 + 7], 21, "x * y at x 7, y 3");
    // An existing store is not written over.
    let run = convert("convert-imageset", &dir, &[], &db);
    assert!(!run.status.success());
    assert!(String::from_utf8_lossy(&run.stderr).contains("exists already"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The SSD fork's `convert_annoset`: images and their VOC XML boxes into
/// AnnotatedDatum records (a missing image passed over, a missing
/// annotation a record without objects, the log lines Caffe's), which
/// AnnotatedData then reads into MultiBoxLoss's rows.
#[test]
fn convert_annoset_writes_the_records_annotated_data_reads() {
    let dir = images("annoset");
    std::fs::create_dir_all(dir.join("img/anno")).unwrap();
    let voc = |w: u32, h: u32, objects: &[(&str, u8, [u32; 4])]| {
        let objects: String = objects
            .iter()
            .map(|(name, difficult, b)| {
                format!(
                    "<object><name>{name}</name><difficult>{difficult}</difficult><bndbox>\
                     <xmin>{}</xmin><ymin>{}</ymin><xmax>{}</xmax><ymax>{}</ymax></bndbox></object>",
                    b[0], b[1], b[2], b[3]
                )
            })
            .collect();
        format!(
            "<annotation><size><width>{w}</width><height>{h}</height><depth>3</depth></size>\
             {objects}</annotation>"
        )
    };
    std::fs::write(
        dir.join("img/anno/ramp.xml"),
        voc(
            40,
            30,
            &[
                ("dog", 0, [4, 3, 20, 30]),
                ("cat", 1, [10, 0, 40, 15]),
                ("dog", 0, [0, 0, 40, 30]),
            ],
        ),
    )
    .unwrap();
    std::fs::write(dir.join("img/anno/missing.xml"), voc(1, 1, &[])).unwrap();
    std::fs::write(
        dir.join("list.txt"),
        "ramp.png anno/ramp.xml\nmissing.png anno/missing.xml\nastronaut.jpg anno/none.xml\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("labelmap.prototxt"),
        r#"item { name: "none_of_the_above" label: 0 display_name: "background" }
           item { name: "dog" label: 1 display_name: "dog" }
           item { name: "cat" label: 2 display_name: "cat" }"#,
    )
    .unwrap();
    let db = dir.join("annoset_lmdb");
    let map = format!(
        "--label_map_file={}",
        dir.join("labelmap.prototxt").display()
    );
    let out = convert(
        "convert_annoset",
        &dir,
        &["--anno_type=detection", &map, "--encoded"],
        &db,
    );
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    assert!(log.contains("A total of 3 images."), "{log}");
    assert!(log.contains("line 2: Could not open or find file"), "{log}");
    assert!(log.contains("Processed 2 files."), "{log}");

    let stored = raw_records(&db);
    let keys: Vec<String> = stored
        .iter()
        .map(|(k, _)| String::from_utf8(k.clone()).unwrap())
        .collect();
    assert_eq!(keys, ["00000000_ramp.png", "00000002_astronaut.jpg"]);
    let ramp = blobflow::proto::AnnotatedDatum::decode(stored[0].1.as_slice()).unwrap();
    assert_eq!(ramp.r#type, Some(0));
    let groups: Vec<(i32, usize)> = ramp
        .annotation_group
        .iter()
        .map(|g| (g.group_label.unwrap(), g.annotation.len()))
        .collect();
    assert_eq!(groups, [(1, 2), (2, 1)]);
    let astronaut = blobflow::proto::AnnotatedDatum::decode(stored[1].1.as_slice()).unwrap();
    assert!(astronaut.annotation_group.is_empty());

    let text = format!(
        r#"layer {{ name: "data" type: "AnnotatedData" top: "data" top: "label"
             transform_param {{ resize_param {{ height: 15 width: 20 }} }}
             data_param {{ source: "{}" batch_size: 2 backend: LMDB }} }}"#,
        db.display()
    );
    let mut net = Net::<f32>::builder()
        .state(NetState::test())
        .registry(&blobflow::data::data_registry())
        .from_prototxt(&text)
        .unwrap();
    net.forward().unwrap();
    assert_eq!(net.blob("data").unwrap().shape(), [2, 3, 15, 20]);
    let label = net.blob("label").unwrap().to_vec().unwrap();
    let want = [
        [0.0, 1.0, 0.0, 0.1, 0.1, 0.5, 1.0, 0.0],
        [0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 1.0, 0.0],
        [0.0, 2.0, 0.0, 0.25, 0.0, 1.0, 0.5, 1.0],
    ];
    assert_eq!(label.len(), 24);
    for (row, want) in label.chunks(8).zip(want) {
        for (g, w) in row.iter().zip(want) {
            assert!((g - w).abs() < 1e-6, "{row:?} vs {want:?}");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
