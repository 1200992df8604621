//! The YOLO fork's detection-with-segmentation set-up
//! (eric612/MobileNet-YOLO's cityscapes prototxts): `convert_annoset
//! --anno_type detection_with_segmentation` stores each image's label
//! image, `AnnotatedData`'s third top turns it into a plane a class that
//! follows the image through the jitter crop, warp and mirror, and the
//! fork's `YoloSeg` loss learns from it through the pixel counts two
//! `Reduction`s make.

use std::path::{Path, PathBuf};

use blob_data::{AnnotationKind, Backend, ImageSetOptions, convert_annoset, data_registry};
use blob_layers::net::{Net, NetState};
use blob_layers::solver::{LrPolicy, SgdSolver};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("blobflow-seg-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

const GRAY: [u8; 3] = [120, 120, 120];
const RED: [u8; 3] = [220, 30, 30];
const BLUE: [u8; 3] = [30, 30, 220];

/// Record `i`'s scene, 96 x 64: a blue band on the left (class 2), a red
/// car (class 1) whose place moves from record to record, gray
/// elsewhere (background); each pixel's colour and class value.
fn scene(i: u32, x: u32, y: u32) -> ([u8; 3], u8) {
    let (left, top) = (40 + 6 * (i % 4), 10 + 5 * (i % 3));
    if x < 20 {
        (BLUE, 2)
    } else if (left..left + 40).contains(&x) && (top..top + 32).contains(&y) {
        (RED, 1)
    } else {
        (GRAY, 0)
    }
}

/// Eight records written as a user writes them (JPEG images, VOC XML
/// annotations, PNG label images, a list of triples) and converted.
fn segmentation_store(dir: &Path) -> PathBuf {
    let mut list = String::new();
    for i in 0..8u32 {
        let image = image::RgbImage::from_fn(96, 64, |x, y| image::Rgb(scene(i, x, y).0));
        image.save(dir.join(format!("{i}.jpg"))).unwrap();
        let label = image::GrayImage::from_fn(96, 64, |x, y| image::Luma([scene(i, x, y).1]));
        label.save(dir.join(format!("{i}_label.png"))).unwrap();
        let (left, top) = (40 + 6 * (i % 4), 10 + 5 * (i % 3));
        std::fs::write(
            dir.join(format!("{i}.xml")),
            format!(
                "<annotation><size><width>96</width><height>64</height></size>\
                 <object><name>car</name><difficult>0</difficult><bndbox><xmin>{left}</xmin>\
                 <ymin>{top}</ymin><xmax>{}</xmax><ymax>{}</ymax></bndbox></object></annotation>",
                left + 40,
                top + 32
            ),
        )
        .unwrap();
        list.push_str(&format!("{i}.jpg {i}.xml {i}_label.png\n"));
    }
    std::fs::write(dir.join("list.txt"), list).unwrap();
    std::fs::write(
        dir.join("labelmap.prototxt"),
        r#"item { name: "none_of_the_above" label: 0 } item { name: "car" label: 1 }"#,
    )
    .unwrap();
    std::fs::write(
        dir.join("labelmap_seg.prototxt"),
        r#"item { name: "unlabeled" label: 0 label_id: 0 }
           item { name: "car" label: 1 label_id: 1 }
           item { name: "sky" label: 2 label_id: 2 r: 70 g: 130 b: 180 }"#,
    )
    .unwrap();
    let root = format!("{}/", dir.display());
    let options = ImageSetOptions {
        encoded: true,
        ..Default::default()
    };
    let db = dir.join("db");
    let stored = convert_annoset(
        &root,
        &dir.join("list.txt"),
        &db,
        Backend::Lmdb,
        &options,
        AnnotationKind::DetectionWithSegmentation,
        Some(&dir.join("labelmap.prototxt")),
        true,
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(stored, 8);
    db
}

fn data_layer(db: &Path, dir: &Path, phase: &str) -> String {
    format!(
        r#"layer {{ name: "data" type: "AnnotatedData" top: "data" top: "label" top: "seg_label"
             include {{ phase: {phase} }}
             transform_param {{ mirror: {mirror}
               resize_param {{ prob: 1 resize_mode: WARP height: 64 width: 64
                 interp_mode: LINEAR interp_mode: AREA interp_mode: LANCZOS4 }} }}
             data_param {{ source: "{}" batch_size: 4 backend: LMDB }}
             annotated_data_param {{ yolo_data_type: 1 single_class: false seg_scales: 8
               label_map_file: "{}" }} }}"#,
        db.display(),
        dir.join("labelmap_seg.prototxt").display(),
        mirror = phase == "TRAIN",
    )
}

/// Every label pixel that is wholly one class sits on that class's
/// colour in the image: the planes were cut, warped and mirrored as the
/// image was.
#[test]
fn segmentation_planes_follow_the_image_through_crop_warp_and_mirror() {
    let dir = scratch("planes");
    let db = segmentation_store(&dir);
    let text = data_layer(&db, &dir, "TRAIN");
    blob_kernels::cpu::set_seed(5);
    let mut net = Net::<f32>::builder()
        .registry(&data_registry())
        .state(NetState::train())
        .from_prototxt(&text)
        .unwrap();
    // Label pixels wholly of each class; images with the band on the
    // left and on the right.
    let (mut whole, mut sides) = ([0usize; 3], [0usize; 2]);
    for _ in 0..6 {
        net.forward().unwrap();
        let seg = net.blob("seg_label").unwrap();
        assert_eq!(seg.shape(), [4, 2, 8, 8]);
        let (seg, data) = (
            seg.to_vec().unwrap(),
            net.blob("data").unwrap().to_vec().unwrap(),
        );
        for item in 0..4 {
            let image = &data[item * 3 * 64 * 64..][..3 * 64 * 64];
            let planes = &seg[item * 2 * 64..][..2 * 64];
            // The colour at a label pixel's centre (B, G, R planes).
            let colour = |y: usize, x: usize| {
                let at = |c: usize| {
                    let p = &image[c * 64 * 64..];
                    (p[(8 * y + 3) * 64 + 8 * x + 3]
                        + p[(8 * y + 4) * 64 + 8 * x + 4]
                        + p[(8 * y + 3) * 64 + 8 * x + 4]
                        + p[(8 * y + 4) * 64 + 8 * x + 3])
                        / 4.0
                };
                [at(2), at(1), at(0)]
            };
            let near = |got: [f32; 3], want: [u8; 3]| {
                got.iter()
                    .zip(want)
                    .all(|(g, w)| (g - f32::from(w)).abs() < 40.0)
            };
            for y in 0..8 {
                for x in 0..8 {
                    let (car, sky) = (planes[y * 8 + x], planes[64 + y * 8 + x]);
                    assert!((0.0..=1.0).contains(&car) && (0.0..=1.0).contains(&sky));
                    let c = colour(y, x);
                    let (want, class) = match (car, sky) {
                        (1.0, 0.0) => (RED, 1),
                        (0.0, 1.0) => (BLUE, 2),
                        (0.0, 0.0) => (GRAY, 0),
                        _ => continue,
                    };
                    whole[class] += 1;
                    assert!(
                        near(c, want),
                        "item {item} ({y}, {x}): {c:?} under class {class}"
                    );
                }
            }
            // The band is on the left unless the image was mirrored (or
            // the crop cut it off).
            let band_left = (0..8).any(|y| planes[64 + y * 8] == 1.0);
            let band_right = (0..8).any(|y| planes[64 + y * 8 + 7] == 1.0);
            assert!(!(band_left && band_right), "item {item}");
            sides[usize::from(band_right)] += usize::from(band_left || band_right);
        }
    }
    assert!(whole.iter().all(|&n| n > 20), "{whole:?}");
    assert!(sides.iter().all(|&n| n > 2), "{sides:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The cityscapes prototxt's segmentation head, scaled down: a
/// convolution of stride 8 trained by `YoloSeg` with its pixel counts
/// learns the classes (its loss falls), and `SegmentationEvaluate`
/// reports each class's overlap in the test net.
#[test]
fn yoloseg_trains_a_segmentation_head_and_the_test_net_scores_it() {
    let dir = scratch("train");
    let db = segmentation_store(&dir);
    let text = format!(
        r#"{train} {test}
           layer {{ name: "conv" type: "Convolution" bottom: "data" top: "conv"
             convolution_param {{ num_output: 2 kernel_size: 8 stride: 8
               weight_filler {{ type: "gaussian" std: 0.001 }} }} }}
           layer {{ name: "reduction_h" type: "Reduction" bottom: "seg_label" top: "reduction_h"
             include {{ phase: TRAIN }} reduction_param {{ axis: 3 }} }}
           layer {{ name: "reduction_w" type: "Reduction" bottom: "reduction_h" top: "reduction_w"
             include {{ phase: TRAIN }} reduction_param {{ axis: 2 }} }}
           layer {{ name: "seg_loss" type: "YoloSeg" bottom: "conv" bottom: "seg_label"
             bottom: "reduction_w" top: "seg_loss" include {{ phase: TRAIN }}
             yolo_seg_param {{ object_scale: 0.2 }} }}
           layer {{ name: "sigmoid" type: "Sigmoid" bottom: "conv" top: "sigmoid"
             include {{ phase: TEST }} }}
           layer {{ name: "segmentation_eval" type: "SegmentationEvaluate" bottom: "sigmoid"
             bottom: "seg_label" top: "segmentation_eval" include {{ phase: TEST }}
             segmentation_evaluate_param {{ num_classes: 2 threshold: 0.3 }} }}"#,
        train = data_layer(&db, &dir, "TRAIN"),
        test = data_layer(&db, &dir, "TEST"),
    );
    blob_kernels::cpu::set_seed(3);
    let registry = data_registry();
    let build = |state| {
        Net::<f32>::builder()
            .registry(&registry)
            .state(state)
            .from_prototxt(&text)
            .unwrap()
    };
    let mut net = build(NetState::train());
    let specs = net.param_specs();
    let mut solver = SgdSolver::new(1e-5, LrPolicy::Fixed).with_momentum(0.9);
    let mut losses = Vec::new();
    for _ in 0..40 {
        net.clear_param_diffs().unwrap();
        losses.push(net.forward().unwrap());
        net.backward().unwrap();
        solver.step(&net.param_blobs(), &specs).unwrap();
    }
    let (first, last) = (
        losses[..5].iter().sum::<f32>() / 5.0,
        losses[35..].iter().sum::<f32>() / 5.0,
    );
    assert!(last < 0.5 * first, "{losses:?}");
    let mut test = build(NetState::test());
    test.share_weights_with(&net).unwrap();
    test.forward().unwrap();
    let scores = test.blob("segmentation_eval").unwrap();
    assert_eq!(scores.shape(), [1, 1, 1, 2]);
    let scores = scores.to_vec().unwrap();
    assert!(scores.iter().all(|&s| s > 0.5 && s <= 1.0), "{scores:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// What the segmentation labels cannot follow is refused at set-up, and
/// a record without its label image at the batch that reads it.
#[test]
fn segmentation_labels_refuse_what_would_not_match_the_image() {
    let dir = scratch("refusals");
    let db = segmentation_store(&dir);
    let build = |extra_transform: &str, extra_param: &str| {
        let text = format!(
            r#"layer {{ name: "data" type: "AnnotatedData" top: "data" top: "label" top: "seg"
                 transform_param {{ {extra_transform} }}
                 data_param {{ source: "{}" batch_size: 2 backend: LMDB }}
                 annotated_data_param {{ yolo_data_type: 1 {extra_param} }} }}"#,
            db.display()
        );
        Net::<f32>::builder()
            .registry(&data_registry())
            .from_prototxt(&text)
            .and_then(|mut n| n.forward().map(|_| ()))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    // The converter's refusals: records it would write unreadable.
    let convert = |list: &str, encoded: bool| {
        std::fs::write(dir.join("other.txt"), list).unwrap();
        let options = ImageSetOptions {
            encoded,
            ..Default::default()
        };
        convert_annoset(
            &format!("{}/", dir.display()),
            &dir.join("other.txt"),
            &dir.join("other_db"),
            Backend::Lmdb,
            &options,
            AnnotationKind::DetectionWithSegmentation,
            Some(&dir.join("labelmap.prototxt")),
            false,
            &mut |_| {},
        )
        .unwrap_err()
    };
    let e = convert("0.jpg 0.xml 0_label.png\n", false);
    assert!(e.contains("stores encoded images alone (--encoded)"), "{e}");
    let e = convert("0.jpg 0.xml 1.jpg\n", true);
    assert!(
        e.contains("other.txt, line 1:") && e.contains("1.jpg is not a PNG"),
        "{e}"
    );
    let e = convert("0.jpg 0.xml\n", true);
    assert!(
        e.contains("is not 3 names (each line is `IMAGE ANNOTATION LABEL_IMAGE`)"),
        "{e}"
    );
    assert!(!dir.join("other_db").exists());
    // A record without its label image.
    let plain = dir.join("plain");
    let mut store = blob_data::StoreWriter::create(&plain, Backend::Lmdb).unwrap();
    let jpeg = std::fs::read(dir.join("0.jpg")).unwrap();
    let record = blob_proto::AnnotatedDatum {
        datum: Some(blob_proto::Datum {
            data: Some(jpeg),
            encoded: Some(true),
            ..Default::default()
        }),
        r#type: Some(0),
        annotation_group: Vec::new(),
    };
    store
        .put(b"0", &prost::Message::encode_to_vec(&record))
        .unwrap();
    store.finish().unwrap();
    let text = format!(
        r#"layer {{ name: "data" type: "AnnotatedData" top: "data" top: "label" top: "seg"
             transform_param {{ resize_param {{ height: 16 width: 16 }} }}
             data_param {{ source: "{}" batch_size: 1 backend: LMDB }} }}"#,
        plain.display()
    );
    let e = Net::<f32>::builder()
        .registry(&data_registry())
        .from_prototxt(&text)
        .and_then(|mut n| n.forward().map(|_| ()))
        .unwrap_err()
        .to_string();
    assert!(e.contains("key \"0\": it has no seg_label"), "{e}");
    for (transform, param, words) in [
        (
            "expand_param { prob: 0.5 max_expand_ratio: 2 }",
            "",
            "with expand_param",
        ),
        (
            "resize_param { resize_mode: FIT_LARGE_SIZE_AND_PAD height: 32 width: 32 }",
            "",
            "a resize_param that keeps the aspect",
        ),
        ("crop_size: 32", "", "with crop_size"),
        (
            "",
            "single_class: false",
            "single_class is false: the classes of the segmentation labels come from a \
             label_map_file, and none is given",
        ),
        ("", "seg_scales: 0", "seg_scales 0"),
        ("", "seg_scales: 100", "seg_scales is larger than the image"),
        (
            "",
            "seg_resize_height: 100000 seg_resize_width: 4",
            "100000 x 4: each at most 16384",
        ),
    ] {
        let e = build(transform, param);
        assert!(e.contains(words), "{transform} {param}: {e}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
