//! The SSD fork's layers (Permute, PriorBox, DetectionOutput, MultiBoxLoss) on the
//! fork's own cases, and MobileNet-SSD folded and unfolded.

use std::path::Path;

use blob_layers::net::{Net, NetState};
use blob_runtime::Blob;

/// A net from `text`, its inputs filled from `values` by name.
fn run(text: &str, values: &[(&str, &[f32])]) -> Result<Net<f32>, blob_runtime::BlobError> {
    let mut net = Net::<f32>::from_prototxt(text, NetState::test())?;
    for (name, v) in values {
        net.blob(name)
            .unwrap()
            .mutable_cpu_data()?
            .copy_from_slice(v);
    }
    net.forward()?;
    Ok(net)
}

fn values(net: &Net<f32>, blob: &str) -> Vec<f32> {
    net.blob(blob).unwrap().to_vec().unwrap()
}

fn assert_near(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: {got:?} vs {want:?}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= 1e-6, "{what}[{i}]: {g} vs {w}\n{got:?}");
    }
}

#[test]
fn permute_reorders_axes_and_appends_the_unlisted_ones() {
    let x: Vec<f32> = (0..24).map(|v| v as f32).collect();
    // NCHW (1, 2, 3, 4) to NHWC: order 0 2 3 1.
    let net = run(
        r#"input: "x" input_shape { dim: 1 dim: 2 dim: 3 dim: 4 }
           layer { name: "p" type: "Permute" bottom: "x" top: "y" permute_param { order: 0 order: 2 order: 3 order: 1 } }"#,
        &[("x", &x)],
    )
    .unwrap();
    assert_eq!(net.blob("y").unwrap().shape(), [1, 3, 4, 2]);
    let y = values(&net, "y");
    for h in 0..3 {
        for w in 0..4 {
            for c in 0..2 {
                assert_eq!(y[(h * 4 + w) * 2 + c], x[(c * 3 + h) * 4 + w]);
            }
        }
    }
    // Only axis 2 first: the rest follow in order (2, 0, 1, 3).
    let net = run(
        r#"input: "x" input_shape { dim: 1 dim: 2 dim: 3 dim: 4 }
           layer { name: "p" type: "Permute" bottom: "x" top: "y" permute_param { order: 2 } }"#,
        &[("x", &x)],
    )
    .unwrap();
    assert_eq!(net.blob("y").unwrap().shape(), [3, 1, 2, 4]);
    assert_eq!(values(&net, "y")[4..8], x[12..16]);
    // No order: the identity, the top a view of the bottom.
    let net = run(
        r#"input: "x" input_shape { dim: 2 dim: 3 }
           layer { name: "p" type: "Permute" bottom: "x" top: "y" }"#,
        &[("x", &x[..6])],
    )
    .unwrap();
    assert_eq!(values(&net, "y"), x[..6]);
}

#[test]
fn permute_refuses_bad_orders_and_in_place_wiring() {
    let text = |order: &str, top: &str| {
        format!(
            r#"input: "x" input_shape {{ dim: 1 dim: 2 dim: 3 }}
               layer {{ name: "p" type: "Permute" bottom: "x" top: "{top}" permute_param {{ {order} }} }}"#
        )
    };
    let err = |t: String| {
        Net::<f32>::from_prototxt(&t, NetState::test())
            .err()
            .unwrap_or_else(|| panic!("accepted: {t}"))
            .to_string()
    };
    let e = err(text("order: 1 order: 1", "y"));
    assert!(e.contains("duplicate") && e.contains('1'), "{e}");
    let e = err(text("order: 3", "y"));
    assert!(
        e.contains("less than the input dimension") && e.contains("3-D"),
        "{e}"
    );
    let e = err(text("order: 0 order: 2 order: 1", "x"));
    assert!(e.contains("in-place") || e.contains("in place"), "{e}");
}

/// A 2 x 2 map over an 8 x 8 image: step 4, centres 2 and 6; sizes 2 and
/// 4 (the max-size square sqrt(8)), ratio 2 flipped.
#[test]
fn prior_box_places_each_cells_boxes_in_the_forks_order() {
    let net = run(
        r#"input: "map" input_shape { dim: 1 dim: 5 dim: 2 dim: 2 }
           input: "image" input_shape { dim: 1 dim: 3 dim: 8 dim: 8 }
           layer { name: "pb" type: "PriorBox" bottom: "map" bottom: "image" top: "pb"
                   prior_box_param { min_size: 2 max_size: 4 aspect_ratio: 2 flip: true
                                     variance: 0.1 variance: 0.1 variance: 0.2 variance: 0.2 } }"#,
        &[],
    )
    .unwrap();
    // 4 cells x (3 ratios + 1 max size) x 4 coordinates.
    assert_eq!(net.blob("pb").unwrap().shape(), [1, 2, 64]);
    let pb = values(&net, "pb");
    let r2 = 2f64.sqrt();
    let corners = |cx: f64, cy: f64, w: f64, h: f64| {
        [
            ((cx - w / 2.0) / 8.0) as f32,
            ((cy - h / 2.0) / 8.0) as f32,
            ((cx + w / 2.0) / 8.0) as f32,
            ((cy + h / 2.0) / 8.0) as f32,
        ]
    };
    let mut want = Vec::new();
    for (cx, cy) in [(2.0, 2.0), (6.0, 2.0), (2.0, 6.0), (6.0, 6.0)] {
        want.extend(corners(cx, cy, 2.0, 2.0));
        want.extend(corners(cx, cy, 8f64.sqrt(), 8f64.sqrt()));
        want.extend(corners(cx, cy, 2.0 * r2, 2.0 / r2));
        want.extend(corners(cx, cy, 2.0 / r2, 2.0 * r2));
    }
    assert_near(&pb[..64], &want, "boxes");
    let variances: Vec<f32> = (0..64).map(|i| [0.1, 0.1, 0.2, 0.2][i % 4]).collect();
    assert_near(&pb[64..], &variances, "variances");

    // Clipped to the image, one variance everywhere, the image size and
    // step given instead of read.
    let net = run(
        r#"input: "map" input_shape { dim: 1 dim: 1 dim: 1 dim: 2 }
           input: "image" input_shape { dim: 1 dim: 3 dim: 5 dim: 7 }
           layer { name: "pb" type: "PriorBox" bottom: "map" bottom: "image" top: "pb"
                   prior_box_param { min_size: 6 clip: true img_size: 8 step: 4 offset: 0 } }"#,
        &[],
    )
    .unwrap();
    let pb = values(&net, "pb");
    assert_near(
        &pb[..8],
        &[0.0, 0.0, 0.375, 0.375, 0.125, 0.0, 0.875, 0.375],
        "clipped",
    );
    assert_near(&pb[8..], &[0.1; 8], "the default variance");
}

/// The boxes are written once per shape: a second pass leaves the top
/// untouched (on a GPU, no upload), a new map size or a write by someone
/// else brings them back.
#[test]
fn prior_box_writes_its_boxes_once_per_shape() {
    let mut net = run(
        r#"input: "map" input_shape { dim: 1 dim: 5 dim: 2 dim: 2 }
           input: "image" input_shape { dim: 1 dim: 3 dim: 8 dim: 8 }
           layer { name: "pb" type: "PriorBox" bottom: "map" bottom: "image" top: "pb"
                   prior_box_param { min_size: 2 } }"#,
        &[],
    )
    .unwrap();
    let first = values(&net, "pb");
    let stamp = |net: &Net<f32>| net.blob("pb").unwrap().data().write_stamp();
    let written = stamp(&net);
    net.forward().unwrap();
    assert_eq!(stamp(&net), written, "the second pass writes nothing");
    net.blob("pb")
        .unwrap()
        .mutable_cpu_data()
        .unwrap()
        .fill(7.0);
    net.forward().unwrap();
    assert_eq!(values(&net, "pb"), first, "a foreign write is undone");
    net.blob_mut("map").unwrap().reshape(&[1, 5, 3, 2]).unwrap();
    net.reshape().unwrap();
    net.forward().unwrap();
    assert_eq!(net.blob("pb").unwrap().shape(), [1, 2, 24]);
    let fresh = run(
        r#"input: "map" input_shape { dim: 1 dim: 5 dim: 3 dim: 2 }
           input: "image" input_shape { dim: 1 dim: 3 dim: 8 dim: 8 }
           layer { name: "pb" type: "PriorBox" bottom: "map" bottom: "image" top: "pb"
                   prior_box_param { min_size: 2 } }"#,
        &[],
    )
    .unwrap();
    assert_eq!(
        values(&net, "pb"),
        values(&fresh, "pb"),
        "the new map's boxes"
    );
    assert_ne!(values(&net, "pb")[..16], first[..16]);
}

#[test]
fn prior_box_refuses_what_the_fork_refuses() {
    for (param, says) in [
        ("aspect_ratio: 2", "min_size"),
        ("min_size: 4 max_size: 3", "greater than min_size"),
        ("min_size: 4 max_size: 8 max_size: 9", "max_size"),
        (
            "min_size: 4 variance: 0.1 variance: 0.1 variance: 0.2",
            "1 or 4",
        ),
        ("min_size: 4 variance: -0.1", "positive"),
        ("min_size: 4 img_size: 8 img_h: 8", "not both"),
        ("min_size: 4 step: 8 step_w: 8", "not both"),
    ] {
        let text = format!(
            r#"input: "m" input_shape {{ dim: 1 dim: 1 dim: 2 dim: 2 }}
               input: "i" input_shape {{ dim: 1 dim: 3 dim: 8 dim: 8 }}
               layer {{ name: "pb" type: "PriorBox" bottom: "m" bottom: "i" top: "pb" prior_box_param {{ {param} }} }}"#
        );
        let e = Net::<f32>::from_prototxt(&text, NetState::test())
            .err()
            .unwrap_or_else(|| panic!("accepted {param}"))
            .to_string();
        assert!(e.contains(says) && e.contains("pb"), "{param}: {e}");
    }
}

/// SSD VGG's `conv4_3_norm`: each pixel's channels divided by their L2
/// norm, then scaled per channel (filled with 20); across space, each
/// image by its own norm.
#[test]
fn normalize_divides_by_each_pixels_or_images_norm() {
    let x = [3.0, 0.0, 1.0, 2.0, 4.0, 0.0, 1.0, 2.0];
    let net = run(
        r#"input: "x" input_shape { dim: 1 dim: 2 dim: 2 dim: 2 }
           layer { name: "n" type: "Normalize" bottom: "x" top: "y"
                   norm_param { across_spatial: false channel_shared: false scale_filler { type: "constant" value: 20 } } }"#,
        &[("x", &x)],
    )
    .unwrap();
    assert_eq!(net.layer_blobs("n").unwrap()[0].shape(), [2]);
    let r = |a: f32, b: f32| (a * a + b * b + 1e-10).sqrt();
    let want: Vec<f32> = (0..8)
        .map(|i| {
            let q = i % 4;
            20.0 * x[i] / r(x[q], x[4 + q])
        })
        .collect();
    assert_near(&values(&net, "y"), &want, "per pixel");
    let net = run(
        r#"input: "x" input_shape { dim: 2 dim: 2 dim: 1 dim: 2 }
           layer { name: "n" type: "Normalize" bottom: "x" top: "y" }"#,
        &[("x", &x)],
    )
    .unwrap();
    assert_eq!(net.layer_blobs("n").unwrap()[0].shape(), [] as [usize; 0]);
    let (a, b) = ((14.0f32 + 1e-10).sqrt(), (21.0f32 + 1e-10).sqrt());
    let want = [
        3.0 / a,
        0.0,
        1.0 / a,
        2.0 / a,
        4.0 / b,
        0.0,
        1.0 / b,
        2.0 / b,
    ];
    assert_near(&values(&net, "y"), &want, "per image");
}

/// In place (as SSD nets may write it), Normalize gives the output and
/// gradients it gives out of place: it keeps its input for backward.
#[test]
fn normalize_in_place_matches_out_of_place() {
    let x: Vec<f32> = (0..24).map(|i| (i as f32 * 0.37).sin()).collect();
    let dy: Vec<f32> = (0..24).map(|i| (i as f32 * 0.61).cos()).collect();
    for param in [
        "across_spatial: false",
        "across_spatial: true channel_shared: true",
    ] {
        let pass = |top: &str| {
            let text = format!(
                r#"force_backward: true input: "x" input_shape {{ dim: 2 dim: 3 dim: 2 dim: 2 }}
                   layer {{ name: "n" type: "Normalize" bottom: "x" top: "{top}"
                           norm_param {{ {param} scale_filler {{ type: "constant" value: 3 }} }} }}"#
            );
            let mut net = run(&text, &[("x", &x)]).unwrap();
            let y = values(&net, top);
            net.blob(top)
                .unwrap()
                .mutable_cpu_diff()
                .unwrap()
                .copy_from_slice(&dy);
            net.backward().unwrap();
            let dx = net.blob("x").unwrap().diff_to_vec().unwrap();
            let ds = net.layer_blobs("n").unwrap()[0].diff_to_vec().unwrap();
            (y, dx, ds)
        };
        let (y, dx, ds) = pass("y");
        let (y_in, dx_in, ds_in) = pass("x");
        assert_near(&y_in, &y, &format!("{param}: output"));
        assert_near(&dx_in, &dx, &format!("{param}: input gradient"));
        assert_near(&ds_in, &ds, &format!("{param}: scale gradient"));
        assert!(
            dx.iter().any(|v| v.abs() > 1e-3),
            "{param}: a gradient to compare"
        );
    }
}

/// Three priors, three classes (0 the background), CORNER offsets of 0
/// (boxes are the priors): A and B overlap by IoU 0.78, C stands apart.
fn detect(settings: &str, scores: &[f32]) -> Result<Vec<f32>, blob_runtime::BlobError> {
    let text = format!(
        r#"input: "loc" input_shape {{ dim: 1 dim: 12 }}
           input: "conf" input_shape {{ dim: 1 dim: 9 }}
           input: "prior" input_shape {{ dim: 1 dim: 2 dim: 12 }}
           layer {{ name: "det" type: "DetectionOutput" bottom: "loc" bottom: "conf" bottom: "prior" top: "det"
                   detection_output_param {{ num_classes: 3 {settings} }} }}"#
    );
    let prior = [
        0.0, 0.0, 0.4, 0.4, //
        0.05, 0.0, 0.45, 0.4, //
        0.6, 0.6, 1.0, 1.0, //
        0.1, 0.1, 0.2, 0.2, 0.1, 0.1, 0.2, 0.2, 0.1, 0.1, 0.2, 0.2,
    ];
    let net = run(
        &text,
        &[("loc", &[0.0; 12]), ("conf", scores), ("prior", &prior)],
    )?;
    Ok(values(&net, "det"))
}

const SCORES: [f32; 9] = [
    0.1, 0.8, 0.1, // A
    0.05, 0.7, 0.25, // B
    0.3, 0.2, 0.5, // C
];

#[test]
fn detection_output_suppresses_per_class_and_groups_rows_by_label() {
    let rows = detect(
        "nms_param { nms_threshold: 0.45 } confidence_threshold: 0.15",
        &SCORES,
    )
    .unwrap();
    // Class 1: A kept, B suppressed by A, C kept. Class 2: A under the
    // threshold; C, then B (no overlap).
    #[rustfmt::skip]
    let want = [
        0.0, 1.0, 0.8, 0.0, 0.0, 0.4, 0.4,
        0.0, 1.0, 0.2, 0.6, 0.6, 1.0, 1.0,
        0.0, 2.0, 0.5, 0.6, 0.6, 1.0, 1.0,
        0.0, 2.0, 0.25, 0.05, 0.0, 0.45, 0.4,
    ];
    assert_near(&rows, &want, "rows");

    // keep_top_k: the best 3 over all classes, still grouped by label.
    let rows = detect(
        "nms_param { nms_threshold: 0.45 } confidence_threshold: 0.15 keep_top_k: 3",
        &SCORES,
    )
    .unwrap();
    assert_eq!(
        rows.chunks(7).map(|r| (r[1], r[2])).collect::<Vec<_>>(),
        [(1.0, 0.8), (2.0, 0.5), (2.0, 0.25)]
    );
    // top_k cuts the candidates before suppression: class 1 keeps A only.
    let rows = detect(
        "nms_param { nms_threshold: 0.45 top_k: 1 } confidence_threshold: 0.15",
        &SCORES,
    )
    .unwrap();
    assert_eq!(
        rows.chunks(7).map(|r| (r[1], r[2])).collect::<Vec<_>>(),
        [(1.0, 0.8), (2.0, 0.5)]
    );
    // No threshold given: every score counts; B survives in class 1 when
    // the NMS threshold allows its overlap.
    let rows = detect("nms_param { nms_threshold: 0.8 }", &SCORES).unwrap();
    assert_eq!(rows.len(), 6 * 7);
    // The background class may be another: with none (-1) class 0 is a
    // class like the others.
    let rows = detect(
        "background_label_id: -1 nms_param { nms_threshold: 0.45 } confidence_threshold: 0.25",
        &SCORES,
    )
    .unwrap();
    assert_eq!(
        rows.chunks(7).map(|r| (r[1], r[2])).collect::<Vec<_>>(),
        [(0.0, 0.3), (1.0, 0.8), (2.0, 0.5)]
    );
}

/// `detect`'s net, with `save_output_param { save }` and its files in
/// `dir`: two images of 100 x 200 and 50 x 50 pixels, classes 1 "cat"
/// and 2 "dog".
fn saving_net(dir: &Path, save: &str) -> Result<Net<f32>, blob_runtime::BlobError> {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("sizes.txt"), "img1 100 200\nimg2 50 50\n").unwrap();
    std::fs::write(
        dir.join("labels.prototxt"),
        "item { name: 'background' label: 0 } item { name: 'cat' label: 1 } item { name: 'dog' label: 2 }",
    )
    .unwrap();
    let save = save
        .replace("LABELS", &dir.join("labels.prototxt").display().to_string())
        .replace("SIZES", &dir.join("sizes.txt").display().to_string())
        .replace("OUT", &dir.join("out").display().to_string());
    let text = format!(
        r#"input: "loc" input_shape {{ dim: 1 dim: 12 }}
           input: "conf" input_shape {{ dim: 1 dim: 9 }}
           input: "prior" input_shape {{ dim: 1 dim: 2 dim: 12 }}
           layer {{ name: "det" type: "DetectionOutput" bottom: "loc" bottom: "conf" bottom: "prior" top: "det"
                   detection_output_param {{ num_classes: 3 nms_param {{ nms_threshold: 0.45 }}
                     confidence_threshold: 0.15 save_output_param {{ {save} }} }} }}"#
    );
    let net = Net::<f32>::from_prototxt(&text, NetState::test())?;
    let prior = [
        0.0, 0.0, 0.4, 0.4, //
        0.05, 0.0, 0.45, 0.4, //
        0.6, 0.6, 1.0, 1.0, //
        0.1, 0.1, 0.2, 0.2, 0.1, 0.1, 0.2, 0.2, 0.1, 0.1, 0.2, 0.2,
    ];
    net.blob("conf")
        .unwrap()
        .mutable_cpu_data()?
        .copy_from_slice(&SCORES);
    net.blob("prior")
        .unwrap()
        .mutable_cpu_data()?
        .copy_from_slice(&prior);
    Ok(net)
}

#[test]
fn detection_output_saves_a_test_sets_detections_in_each_images_pixels() {
    let dir = std::env::temp_dir().join(format!("blobflow-save-output-{}", std::process::id()));
    let voc = "output_directory: 'OUT' output_name_prefix: 'comp4_det_test_' output_format: 'VOC' \
               label_map_file: 'LABELS' name_size_file: 'SIZES'";
    let mut net = saving_net(&dir, voc).unwrap();
    net.forward().unwrap();
    // One image of two: nothing written yet.
    assert!(!dir.join("out/comp4_det_test_cat.txt").exists());
    net.forward().unwrap();
    let read = |f: &str| std::fs::read_to_string(dir.join("out").join(f)).unwrap();
    assert_eq!(
        read("comp4_det_test_cat.txt"),
        "img1 0.8 0 0 80 40\nimg1 0.2 120 60 200 100\nimg2 0.8 0 0 20 20\nimg2 0.2 30 30 50 50\n"
    );
    // The fork's right edge is the truncated left plus the truncated
    // width: 2.5 + 20 gives 22.
    assert_eq!(
        read("comp4_det_test_dog.txt"),
        "img1 0.5 120 60 200 100\nimg1 0.25 10 0 90 40\nimg2 0.5 30 30 50 50\nimg2 0.25 2 0 22 20\n"
    );
    // A third image starts the set over: the files stay until it is whole.
    net.forward().unwrap();
    assert!(read("comp4_det_test_dog.txt").starts_with("img1 0.5"));

    let coco = voc
        .replace("'VOC'", "'COCO'")
        .replace("comp4_det_test_", "detections")
        + " num_test_image: 1";
    let mut net = saving_net(&dir, &coco).unwrap();
    net.forward().unwrap();
    let json = read("detections.json");
    assert!(json.starts_with("[\n    {\"image_id\": \"img1\", \"category_id\": \"cat\", \"bbox\": [0, 0, 80, 40], \"score\": 0.8},"), "{json}");
    assert!(
        json.ends_with("\"bbox\": [10, 0, 80, 40], \"score\": 0.25}\n]\n"),
        "{json}"
    );

    for (save, says) in [
        (voc.replace("'VOC'", "'XML'"), "output_format \"XML\""),
        (
            voc.replace("label_map_file: 'LABELS'", ""),
            "no label_map_file",
        ),
        (voc.to_string() + " num_test_image: 3", "num_test_image 3"),
        (voc.replace("'SIZES'", "'LABELS'"), "line 1"),
    ] {
        let err = saving_net(&dir, &save).err().unwrap().to_string();
        assert!(err.contains(says), "{save}: {err}");
    }
    let escaping = dir.join("escaping.prototxt");
    std::fs::write(
        &escaping,
        "item { name: 'background' label: 0 } item { name: '../cat' label: 1 } item { name: 'dog' label: 2 }",
    )
    .unwrap();
    let err = saving_net(
        &dir,
        &voc.replace("LABELS", &escaping.display().to_string()),
    )
    .err()
    .unwrap()
    .to_string();
    assert!(err.contains("cannot name a result file"), "{err}");
    let short = dir.join("short.prototxt");
    std::fs::write(&short, "item { name: 'cat' label: 1 }").unwrap();
    let err = saving_net(&dir, &voc.replace("LABELS", &short.display().to_string()))
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("class 2 has no name"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn detection_output_with_nothing_found_gives_one_empty_row_per_image() {
    let rows = detect("confidence_threshold: 0.9", &SCORES).unwrap();
    assert_eq!(rows, [0.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0]);
}

#[test]
fn detection_output_decodes_center_size_offsets() {
    let text = r#"input: "loc" input_shape { dim: 1 dim: 4 }
        input: "conf" input_shape { dim: 1 dim: 2 }
        input: "prior" input_shape { dim: 1 dim: 2 dim: 4 }
        layer { name: "det" type: "DetectionOutput" bottom: "loc" bottom: "conf" bottom: "prior" top: "det"
                detection_output_param { num_classes: 2 code_type: CENTER_SIZE } }"#;
    let loc = [1.0, -1.0, 0.0, 2f32.ln() / 0.2];
    let prior = [0.2, 0.2, 0.6, 0.6, 0.1, 0.1, 0.2, 0.2];
    let net = run(
        text,
        &[("loc", &loc), ("conf", &[0.1, 0.9]), ("prior", &prior)],
    )
    .unwrap();
    // Centre (0.4 + 0.1 * 0.4, 0.4 - 0.1 * 0.4), width 0.4, height 0.8:
    // not clipped.
    assert_near(
        &values(&net, "det"),
        &[0.0, 1.0, 0.9, 0.24, -0.04, 0.64, 0.76],
        "decoded",
    );
}

#[test]
fn detection_output_refuses_mismatched_inputs_and_empty_priors() {
    let text = r#"input: "loc" input_shape { dim: 1 dim: 8 }
        input: "conf" input_shape { dim: 1 dim: 3 }
        input: "prior" input_shape { dim: 1 dim: 2 dim: 12 }
        layer { name: "det" type: "DetectionOutput" bottom: "loc" bottom: "conf" bottom: "prior" top: "det"
                detection_output_param { num_classes: 3 } }"#;
    let e = Net::<f32>::from_prototxt(text, NetState::test())
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("Number of priors must match number of location predictions")
            && e.contains("det"),
        "{e}"
    );
    let e = Net::<f32>::from_prototxt(&text.replace("num_classes: 3", ""), NetState::test())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("num_classes"), "{e}");
    // A prior box of no width cannot be decoded by size: said at forward.
    let text = r#"input: "loc" input_shape { dim: 1 dim: 4 }
        input: "conf" input_shape { dim: 1 dim: 2 }
        input: "prior" input_shape { dim: 1 dim: 2 dim: 4 }
        layer { name: "det" type: "DetectionOutput" bottom: "loc" bottom: "conf" bottom: "prior" top: "det"
                detection_output_param { num_classes: 2 code_type: CENTER_SIZE } }"#;
    let e = run(text, &[("conf", &[0.1, 0.9])])
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("prior box of width 0") && e.contains("det"),
        "{e}"
    );
}

/// The unfolded MobileNet-SSD (convolutions without bias, then BatchNorm
/// and Scale) with random weights, and the folded file with those layers
/// merged into each convolution by hand: the same detections.
#[test]
fn mobilenet_ssd_folded_and_unfolded_detect_the_same() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/nets/mobilenet_ssd");
    // Random weights score every class near 1/21: a lower threshold
    // leaves detections to compare.
    let read = |f: &str| {
        std::fs::read_to_string(dir.join(f))
            .unwrap()
            .replace("confidence_threshold: 0.25", "confidence_threshold: 0.02")
    };
    let mut unfolded =
        Net::<f32>::from_prototxt(&read("deploy.prototxt"), NetState::test()).unwrap();
    let mut folded =
        Net::<f32>::from_prototxt(&read("MobileNetSSD_deploy.prototxt"), NetState::test()).unwrap();
    let uniform = |b: &Blob<f32>, lo: f32, hi: f32, seed: u64| {
        blob_kernels::cpu::set_seed(seed);
        blob_kernels::cpu::uniform(lo, hi, &mut b.mutable_cpu_data().unwrap()).unwrap();
    };
    let layers: Vec<String> = unfolded.layer_names().map(str::to_string).collect();
    let mut seed = 1;
    let mut folds = 0;
    for name in &layers {
        if unfolded.layer_type(name) != Some("Convolution") {
            continue;
        }
        seed += 1;
        let conv = unfolded.layer_blobs(name).unwrap();
        let fan_in = conv[0].count() / conv[0].shape()[0];
        let bound = (3.0 / fan_in as f32).sqrt();
        uniform(&conv[0], -bound, bound, seed);
        if let Some(bias) = conv.get(1) {
            uniform(bias, -0.1, 0.1, seed + 1000);
        }
        let target = folded.layer_blobs(name).unwrap();
        let (w, b) = (
            conv[0].to_vec().unwrap(),
            conv.get(1).map(|b| b.to_vec().unwrap()),
        );
        let (Some(bn), Some(scale)) = (
            unfolded.layer_blobs(&format!("{name}/bn")),
            unfolded.layer_blobs(&format!("{name}/scale")),
        ) else {
            target[0].mutable_cpu_data().unwrap().copy_from_slice(&w);
            target[1]
                .mutable_cpu_data()
                .unwrap()
                .copy_from_slice(&b.unwrap());
            continue;
        };
        uniform(&bn[0], -0.1, 0.1, seed + 2000);
        uniform(&bn[1], 0.5, 1.5, seed + 3000);
        bn[2].mutable_cpu_data().unwrap()[0] = 1.0;
        uniform(&scale[0], 0.5, 1.5, seed + 4000);
        uniform(&scale[1], -0.1, 0.1, seed + 5000);
        let (mean, var) = (bn[0].to_vec().unwrap(), bn[1].to_vec().unwrap());
        let (gamma, beta) = (scale[0].to_vec().unwrap(), scale[1].to_vec().unwrap());
        let per = w.len() / mean.len();
        let mut fw = target[0].mutable_cpu_data().unwrap();
        let mut fb = target[1].mutable_cpu_data().unwrap();
        for o in 0..mean.len() {
            let k = gamma[o] / (var[o] + 1e-5).sqrt();
            for i in 0..per {
                fw[o * per + i] = w[o * per + i] * k;
            }
            fb[o] = (b.as_ref().map_or(0.0, |b| b[o]) - mean[o]) * k + beta[o];
        }
        folds += 1;
    }
    assert_eq!(folds, 35, "every BatchNorm and Scale pair folded");
    for net in [&mut unfolded, &mut folded] {
        uniform(net.blob("data").unwrap(), 0.0, 1.0, 77);
        net.forward().unwrap();
    }
    let rows = |net: &Net<f32>| -> Vec<[f32; 7]> {
        let mut rows: Vec<[f32; 7]> = values(net, "detection_out")
            .chunks(7)
            .map(|r| r.try_into().unwrap())
            .collect();
        rows.sort_by(|a, b| (a[1], -a[2]).partial_cmp(&(b[1], -b[2])).unwrap());
        rows
    };
    let (a, b) = (rows(&unfolded), rows(&folded));
    assert!(
        a.len() > 10 && a[0][1] >= 0.0,
        "detections to compare: {a:?}"
    );
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x[1], y[1], "labels");
        assert!((x[2] - y[2]).abs() <= 1e-5, "scores {x:?} vs {y:?}");
    }
    // Boxes of rows whose score no other row of the label shares (tied
    // scores may keep different boxes of equal score).
    let untied = |rows: &[[f32; 7]], r: &[f32; 7]| {
        rows.iter()
            .filter(|o| o[1] == r[1] && (o[2] - r[2]).abs() <= 1e-5)
            .count()
            == 1
    };
    let mut compared = 0;
    for (x, y) in a.iter().zip(&b) {
        if untied(&a, x) && untied(&b, y) {
            assert_near(&x[3..], &y[3..], "box");
            compared += 1;
        }
    }
    assert!(compared > 0, "some untied rows: {a:?}");
}

/// One image, priors in its four quadrants (CENTER_SIZE, variances 0.1
/// 0.1 0.2 0.2), one class-1 box over the first: MultiBoxLoss with
/// `settings`, the loss and the net.
fn multibox(settings: &str, truth: &[f32]) -> Result<Net<f32>, blob_runtime::BlobError> {
    let text = format!(
        r#"input: "loc" input_shape {{ dim: 1 dim: 16 }}
           input: "conf" input_shape {{ dim: 1 dim: 8 }}
           input: "priors" input_shape {{ dim: 1 dim: 2 dim: 16 }}
           input: "label" input_shape {{ dim: 1 dim: 1 dim: {} dim: 8 }}
           force_backward: true
           layer {{ name: "loss" type: "MultiBoxLoss" bottom: "loc" bottom: "conf" bottom: "priors"
                    bottom: "label" top: "loss" {settings} }}"#,
        truth.len() / 8
    );
    let mut loc = vec![0.7; 16];
    loc[..4].copy_from_slice(&[0.1, -0.2, 0.3, 2.0]);
    let conf = [0.2, 0.5, 1.0, 0.0, -0.5, 1.5, 0.3, 0.1];
    let mut priors = vec![
        0.0, 0.0, 0.5, 0.5, 0.5, 0.0, 1.0, 0.5, 0.0, 0.5, 0.5, 1.0, 0.5, 0.5, 1.0, 1.0,
    ];
    for _ in 0..4 {
        priors.extend([0.1, 0.1, 0.2, 0.2]);
    }
    run(
        &text,
        &[
            ("loc", &loc),
            ("conf", &conf),
            ("priors", &priors),
            ("label", truth),
        ],
    )
}

const ONE_BOX: [f32; 8] = [0.0, 1.0, 0.0, 0.05, 0.05, 0.45, 0.5, 0.0];

/// The pieces of [`multibox`]'s loss, from the fork's formulas: the
/// first prior's smooth L1 against the box's code, and the softmax
/// losses of (prior, class) pairs.
fn multibox_parts() -> (f64, impl Fn(usize, usize) -> f64, [f64; 4]) {
    let pred = [0.1f64, -0.2, 0.3, 2.0];
    let target = [
        0.0,
        0.025 / 0.5 / 0.1,
        (0.4f64 / 0.5).ln() / 0.2,
        (0.45f64 / 0.5).ln() / 0.2,
    ];
    let mut loc = 0.0;
    let mut grad = [0.0; 4];
    for k in 0..4 {
        let d = pred[k] - target[k];
        loc += if d.abs() < 1.0 {
            0.5 * d * d
        } else {
            d.abs() - 0.5
        };
        grad[k] = d.clamp(-1.0, 1.0);
    }
    let conf = [[0.2f64, 0.5], [1.0, 0.0], [-0.5, 1.5], [0.3, 0.1]];
    let softmax = move |p: usize, c: usize| {
        let e = conf[p].map(f64::exp);
        -(e[c] / (e[0] + e[1])).ln()
    };
    (loc, softmax, grad)
}

#[test]
fn multibox_loss_matches_mines_and_normalizes_as_the_fork() {
    let (loc, conf, loc_grad) = multibox_parts();
    // One match (prior 0, IoU 0.72); with a ratio of 1, the one
    // negative scoring worst as background: prior 2.
    let settings = "multibox_loss_param { num_classes: 2 code_type: CENTER_SIZE neg_pos_ratio: 1 }";
    let mut net = multibox(settings, &ONE_BOX).unwrap();
    let want = loc + conf(0, 1) + conf(2, 0);
    let got = f64::from(values(&net, "loss")[0]);
    assert!((got - want).abs() < 1e-5, "{got} vs {want}");
    net.backward().unwrap();
    let d_loc = net.blob("loc").unwrap().diff_to_vec().unwrap();
    let want_loc: Vec<f32> = loc_grad
        .iter()
        .map(|&g| g as f32)
        .chain([0.0; 12])
        .collect();
    assert_near(&d_loc, &want_loc, "location gradient");
    let d_conf = net.blob("conf").unwrap().diff_to_vec().unwrap();
    let p = |p: usize, c: usize| (-conf(p, c)).exp() as f32;
    let want_conf = [
        p(0, 0),
        p(0, 1) - 1.0,
        0.0,
        0.0,
        p(2, 0) - 1.0,
        p(2, 1),
        0.0,
        0.0,
    ];
    assert_near(&d_conf, &want_conf, "confidence gradient");

    // SSD's ratio of 3: every other prior is a negative; the location
    // loss weighed; normalized by the batch (1) or by every prior (4).
    for (extra, divisor) in [("", 1.0), ("loss_param { normalization: FULL }", 4.0)] {
        let settings = format!(
            "multibox_loss_param {{ num_classes: 2 code_type: CENTER_SIZE loc_weight: 2 }} {extra}"
        );
        let net = multibox(&settings, &ONE_BOX).unwrap();
        let want = (2.0 * loc + conf(0, 1) + conf(1, 0) + conf(2, 0) + conf(3, 0)) / divisor;
        let got = f64::from(values(&net, "loss")[0]);
        assert!((got - want).abs() < 1e-5, "{settings}: {got} vs {want}");
    }

    // HARD_EXAMPLE: the priors of highest loss (the match's location
    // loss added to its confidence loss), positives and negatives alike:
    // prior 0 (3.7), then 2 (2.1), 3 (0.60), 1 (0.31).
    for (sample_size, negatives) in [(1, &[][..]), (2, &[2][..]), (3, &[2, 3][..])] {
        let settings = format!(
            "multibox_loss_param {{ num_classes: 2 code_type: CENTER_SIZE mining_type: HARD_EXAMPLE \
             sample_size: {sample_size} }}"
        );
        let net = multibox(&settings, &ONE_BOX).unwrap();
        let want = loc + conf(0, 1) + negatives.iter().map(|&p| conf(p, 0)).sum::<f64>();
        let got = f64::from(values(&net, "loss")[0]);
        assert!((got - want).abs() < 1e-5, "{settings}: {got} vs {want}");
    }
    // Suppression before mining over the priors (the four quadrants
    // overlap not at all) or the decoded predictions (all of prior 1 to
    // 3's offsets are 0.7: the same shift, no overlap either): every
    // negative is still there.
    for nms in ["use_prior_for_nms: true", ""] {
        let settings = format!(
            "multibox_loss_param {{ num_classes: 2 code_type: CENTER_SIZE \
             nms_param {{ nms_threshold: 0.5 top_k: -1 }} {nms} }}"
        );
        let net = multibox(&settings, &ONE_BOX).unwrap();
        let want = loc + conf(0, 1) + conf(1, 0) + conf(2, 0) + conf(3, 0);
        let got = f64::from(values(&net, "loss")[0]);
        assert!((got - want).abs() < 1e-5, "{settings}: {got} vs {want}");
    }

    // propagate_down leaves the location's loss out of the sum.
    let conf_only = "propagate_down: false propagate_down: true propagate_down: false \
        propagate_down: false multibox_loss_param { num_classes: 2 code_type: CENTER_SIZE neg_pos_ratio: 1 }";
    let net = multibox(conf_only, &ONE_BOX).unwrap();
    let got = f64::from(values(&net, "loss")[0]);
    assert!((got - (conf(0, 1) + conf(2, 0))).abs() < 1e-5, "{got}");

    // A difficult box left out, or padding alone: nothing matches, no
    // negative is mined, the loss is 0.
    let mut difficult = ONE_BOX;
    difficult[7] = 1.0;
    let padding = [-1.0; 8];
    for (truth, what) in [(&difficult, "difficult"), (&padding, "padding")] {
        let net = multibox(
            "multibox_loss_param { num_classes: 2 code_type: CENTER_SIZE use_difficult_gt: false }",
            truth,
        )
        .unwrap();
        assert_eq!(values(&net, "loss"), [0.0], "{what}");
    }
}

#[test]
fn multibox_loss_refuses_what_the_fork_refuses_and_bad_ground_truth() {
    let plain = "multibox_loss_param { num_classes: 2 code_type: CENTER_SIZE }";
    let error =
        |settings: &str, truth: &[f32]| multibox(settings, truth).err().unwrap().to_string();
    let mut background = ONE_BOX;
    background[1] = 0.0;
    assert!(error(plain, &background).contains("Found background label"));
    let mut beyond = ONE_BOX;
    beyond[1] = 2.0;
    assert!(error(plain, &beyond).contains("label 2"));
    let mut elsewhere = ONE_BOX;
    elsewhere[0] = 1.0;
    assert!(error(plain, &elsewhere).contains("item 1"));
    for (settings, words) in [
        (
            "multibox_loss_param { code_type: CENTER_SIZE }",
            "num_classes",
        ),
        (
            "multibox_loss_param { num_classes: 2 mining_type: HARD_EXAMPLE sample_size: 0 }",
            "sample_size must be positive",
        ),
        (
            "multibox_loss_param { num_classes: 2 nms_param { nms_threshold: 0.5 } }",
            "needs a top_k",
        ),
        (
            "multibox_loss_param { num_classes: 2 share_location: false }",
            "share_location",
        ),
        (
            "multibox_loss_param { num_classes: 2 background_label_id: 2 }",
            "background_label_id",
        ),
        // Eight offsets per prior with share_location: false and 2
        // classes; the input has four.
        (
            "multibox_loss_param { num_classes: 2 share_location: false mining_type: NONE }",
            "location predictions",
        ),
    ] {
        let e = error(settings, &ONE_BOX);
        assert!(e.contains(words), "{settings}: {e}");
    }
}

/// A small SSD: one feature map, two priors a cell, loc and conf heads
/// permuted and flattened as SSD's are, MultiBoxLoss over two images'
/// boxes. SGD brings the loss down, with and without the prototxt's
/// `propagate_down` (without it the priors, whose PriorBox reads a
/// learned map, would ask the loss for a gradient Caffe refuses).
#[test]
fn a_small_ssd_trains_with_multibox_loss() {
    use blob_layers::solver::{LrPolicy, SgdSolver};
    let head = |name: &str, outputs: usize| {
        format!(
            r#"layer {{ name: "{name}" type: "Convolution" bottom: "conv" top: "{name}"
                 convolution_param {{ num_output: {outputs} kernel_size: 3 pad: 1
                   weight_filler {{ type: "gaussian" std: 0.1 }} }} }}
               layer {{ name: "{name}_perm" type: "Permute" bottom: "{name}" top: "{name}_perm"
                 permute_param {{ order: 0 order: 2 order: 3 order: 1 }} }}
               layer {{ name: "{name}_flat" type: "Flatten" bottom: "{name}_perm" top: "{name}_flat" }}"#
        )
    };
    for down in [
        "",
        "propagate_down: true propagate_down: true propagate_down: false propagate_down: false",
    ] {
        let text = format!(
            r#"input: "data" input_shape {{ dim: 2 dim: 3 dim: 8 dim: 8 }}
               input: "label" input_shape {{ dim: 1 dim: 1 dim: 2 dim: 8 }}
               layer {{ name: "conv" type: "Convolution" bottom: "data" top: "conv"
                 convolution_param {{ num_output: 8 kernel_size: 3 pad: 1 stride: 2
                   weight_filler {{ type: "gaussian" std: 0.1 }} }} }}
               layer {{ name: "relu" type: "ReLU" bottom: "conv" top: "conv" }}
               {} {}
               layer {{ name: "priors" type: "PriorBox" bottom: "conv" bottom: "data" top: "priors"
                 prior_box_param {{ min_size: 3 max_size: 6 variance: 0.1 variance: 0.1
                   variance: 0.2 variance: 0.2 }} }}
               layer {{ name: "loss" type: "MultiBoxLoss" bottom: "loc_flat" bottom: "conf_flat"
                 bottom: "priors" bottom: "label" top: "loss" {down}
                 multibox_loss_param {{ num_classes: 3 code_type: CENTER_SIZE }} }}"#,
            head("loc", 8),
            head("conf", 6)
        );
        let mut net = Net::<f32>::from_prototxt(&text, NetState::train()).unwrap();
        for (i, v) in net
            .blob("data")
            .unwrap()
            .mutable_cpu_data()
            .unwrap()
            .iter_mut()
            .enumerate()
        {
            *v = ((i * 37) % 17) as f32 / 17.0 - 0.5;
        }
        net.blob("label")
            .unwrap()
            .mutable_cpu_data()
            .unwrap()
            .copy_from_slice(&[
                0.0, 1.0, 0.0, 0.1, 0.1, 0.5, 0.6, 0.0, //
                1.0, 2.0, 0.0, 0.4, 0.3, 0.9, 0.8, 0.0,
            ]);
        let specs = net.param_specs();
        let mut solver = SgdSolver::new(0.05, LrPolicy::Fixed).with_momentum(0.9);
        let mut losses = Vec::new();
        for _ in 0..60 {
            net.clear_param_diffs().unwrap();
            losses.push(net.forward().unwrap());
            net.backward().unwrap();
            solver.step(&net.param_blobs(), &specs).unwrap();
        }
        let (first, last) = (losses[0], losses[losses.len() - 1]);
        assert!(
            last.is_finite() && last < 0.5 * first,
            "{down}: {first} -> {last}"
        );
    }
}
