//! The YOLO fork's lane set-up (eric612/MobileNet-YOLO's
//! `models/tusimple`): `convert_annoset --anno_type lane_detection`
//! stores TuSimple's JSON lanes, and `LaneData` gives each record's
//! points in its crop and the lanes drawn a pixel wide, following the
//! image through the jitter crop, warp and mirror.

use std::path::{Path, PathBuf};

use blob_data::{AnnotationKind, Backend, ImageSetOptions, convert_annoset, data_registry};
use blob_layers::net::{Net, NetState};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("blobflow-lanes-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Image height and width, the TuSimple file's `h_samples`.
const HEIGHT: u32 = 80;
const WIDTH: u32 = 120;
const SAMPLES: [i64; 8] = [24, 32, 40, 48, 56, 64, 72, 79];

/// Record `i`'s lane `l` at height `y` (pixels), or `None` above where
/// it starts: the left lane short and near the left edge, the right one
/// slanting right as it comes down, each record's a little apart (so a
/// mirror image of one lies on neither).
fn lane_x(i: u32, l: usize, y: f64) -> Option<f64> {
    let t = (y - 24.0) / 55.0;
    let shift = f64::from(i % 3) * 4.0;
    match l {
        0 if y >= 40.0 => Some(30.0 - shift - 10.0 * t),
        0 => None,
        _ => Some(70.0 + shift + 30.0 * t),
    }
}

/// Six records as a user writes them (JPEG images with the lanes
/// painted 9 pixels wide in white on black, TuSimple JSON files, a
/// list of pairs) and converted.
fn lane_store(dir: &Path) -> PathBuf {
    let mut list = String::new();
    for i in 0..6u32 {
        let image = image::RgbImage::from_fn(WIDTH, HEIGHT, |x, y| {
            let on = (0..2).any(|l| {
                lane_x(i, l, f64::from(y)).is_some_and(|c| (f64::from(x) - c).abs() <= 4.5)
            });
            image::Rgb(if on && y >= 20 { [255; 3] } else { [0; 3] })
        });
        image.save(dir.join(format!("{i}.jpg"))).unwrap();
        let lanes: Vec<Vec<i64>> = (0..2)
            .map(|l| {
                SAMPLES
                    .iter()
                    .map(|&y| lane_x(i, l, y as f64).map_or(-2, |x| x.round() as i64))
                    .collect()
            })
            .collect();
        std::fs::write(
            dir.join(format!("{i}.json")),
            format!(
                r#"{{"lanes": {lanes:?}, "h_samples": {SAMPLES:?}, "raw_file": "clips/{i}.jpg"}}"#
            ),
        )
        .unwrap();
        list.push_str(&format!("{i}.jpg {i}.json\n"));
    }
    std::fs::write(dir.join("list.txt"), list).unwrap();
    let db = dir.join("db");
    let options = ImageSetOptions {
        encoded: true,
        ..Default::default()
    };
    let stored = convert_annoset(
        &format!("{}/", dir.display()),
        &dir.join("list.txt"),
        &db,
        Backend::Lmdb,
        &options,
        AnnotationKind::LaneDetection,
        None,
        false,
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(stored, 6);
    db
}

/// The tusimple prototxt's data layer, at 64 x 64 with the lanes at a
/// quarter of it.
fn lane_data(db: &Path, extra_transform: &str, extra_param: &str) -> String {
    format!(
        r#"layer {{ name: "data" type: "LaneData" top: "data" top: "label" top: "seg_label"
             include {{ phase: TRAIN }}
             transform_param {{ mirror: true {extra_transform}
               resize_param {{ prob: 1 resize_mode: WARP height: 64 width: 64
                 interp_mode: LINEAR interp_mode: AREA interp_mode: LANCZOS4 }}
               distort_param {{ brightness_prob: 0.5 brightness_delta: 32 }} }}
             data_param {{ source: "{}" batch_size: 3 backend: LMDB }}
             annotated_data_param {{ yolo_data_type: 1 yolo_data_jitter: 0.3 seg_scales: 4
               label_map_file: "data/VOC0712/labelmap_voc.prototxt" {extra_param} }} }}"#,
        db.display()
    )
}

/// Every drawn lane pixel lies on the painted lane in the image, and
/// every point inside the crop lands on it too: lanes, points and image
/// were cropped, warped and mirrored alike. The left lane (the one that
/// starts low) is seen on both sides.
#[test]
fn drawn_lanes_and_points_follow_the_image_through_crop_warp_and_mirror() {
    let dir = scratch("follow");
    let db = lane_store(&dir);
    blob_kernels::cpu::set_seed(3);
    let mut net = Net::<f32>::builder()
        .registry(&data_registry())
        .state(NetState::train())
        .from_prototxt(&lane_data(&db, "", ""))
        .unwrap();
    let (mut drawn, mut points, mut sides) = (0usize, 0usize, [0usize; 2]);
    for _ in 0..6 {
        net.forward().unwrap();
        let data = net.blob("data").unwrap().to_vec().unwrap();
        let label = net.blob("label").unwrap();
        assert_eq!(label.shape(), [3, 5, 64, 3]);
        let label = label.to_vec().unwrap();
        let seg = net.blob("seg_label").unwrap();
        assert_eq!(seg.shape(), [3, 1, 16, 16]);
        let seg = seg.to_vec().unwrap();
        for item in 0..3 {
            let image = &data[item * 3 * 64 * 64..][..64 * 64];
            // The brightest of the pixels within a lane pixel of (x, y)
            // (the fork truncates each point to its lane pixel, and the
            // line between two is drawn from those), from 0 to 255.
            let bright = |x: usize, y: usize| {
                let mut best = 0.0f32;
                for yy in y.saturating_sub(4)..(y + 5).min(64) {
                    for xx in x.saturating_sub(4)..(x + 5).min(64) {
                        best = best.max(image[yy * 64 + xx]);
                    }
                }
                best
            };
            let plane = &seg[item * 256..][..256];
            for (at, &v) in plane.iter().enumerate() {
                assert!(v == 0.0 || v == 1.0, "{v}");
                if v == 1.0 {
                    let (x, y) = (at % 16 * 4 + 2, at / 16 * 4 + 2);
                    assert!(
                        bright(x, y) > 100.0,
                        "item {item} lane pixel ({x}, {y}) is dark"
                    );
                    drawn += 1;
                }
            }
            let rows = &label[item * 5 * 64 * 3..][..5 * 64 * 3];
            for lane in 0..5 {
                for p in 0..64 {
                    let [x, y, id] = [0, 1, 2].map(|k| rows[(lane * 64 + p) * 3 + k]);
                    if lane >= 2 || p >= SAMPLES.len() {
                        assert_eq!([x, y, id], [0.0, 0.0, -1.0]);
                        continue;
                    }
                    let inside = (0.0..=1.0).contains(&x) && (0.0..=1.0).contains(&y);
                    assert_eq!(id, if inside { lane as f32 } else { -1.0 });
                    if inside {
                        let (px, py) = ((x * 63.0).round() as usize, (y * 63.0).round() as usize);
                        assert!(bright(px, py) > 100.0, "item {item} lane {lane} point {p}");
                        points += 1;
                    }
                }
                // The left lane's first point (its lowest) is left of the
                // right one's unless the image was mirrored.
                if lane == 0 {
                    let (left, right) = (rows[0], rows[64 * 3]);
                    sides[usize::from(left > right)] += 1;
                }
            }
        }
    }
    assert!(drawn > 100 && points > 100, "{drawn} {points}");
    assert!(sides.iter().all(|&n| n > 2), "{sides:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The set-ups whose lanes would not match the image are refused, and
/// so are records LaneData cannot read.
#[test]
fn lane_data_refuses_what_would_not_match_the_image() {
    let dir = scratch("refusals");
    let db = lane_store(&dir);
    let build = |text: &str| {
        Net::<f32>::builder()
            .registry(&data_registry())
            .state(NetState::train())
            .from_prototxt(text)
            .and_then(|mut n| n.forward().map(|_| ()))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    for (transform, param, words) in [
        (
            "expand_param { prob: 0.5 max_expand_ratio: 2 }",
            "",
            "set up LaneData: lane labels (LaneData) with expand_param",
        ),
        ("crop_size: 32", "", "with crop_size"),
        (
            "",
            "seg_resize_height: 100000 seg_resize_width: 4",
            "100000 x 4: each at most 16384",
        ),
    ] {
        let e = build(&lane_data(&db, transform, param));
        assert!(e.contains(words), "{transform} {param}: {e}");
    }
    // A store of boxes is not one of lanes.
    let boxes = dir.join("boxes");
    {
        use prost::Message;
        let mut store = blob_data::StoreWriter::create(&boxes, Backend::Lmdb).unwrap();
        let datum = blob_proto::Datum {
            channels: Some(1),
            height: Some(4),
            width: Some(4),
            data: Some(vec![0; 16]),
            ..Default::default()
        };
        let record = blob_proto::AnnotatedDatum {
            datum: Some(datum),
            r#type: Some(0),
            annotation_group: vec![blob_proto::AnnotationGroup {
                group_label: Some(1),
                annotation: vec![blob_proto::Annotation {
                    instance_id: Some(0),
                    bbox: Some(Default::default()),
                    lanes: None,
                }],
            }],
        };
        store.put(b"0", &record.encode_to_vec()).unwrap();
        store.finish().unwrap();
    }
    let e = build(&format!(
        r#"layer {{ name: "data" type: "LaneData" top: "data" top: "label"
             data_param {{ source: "{}" batch_size: 1 backend: LMDB }} }}"#,
        boxes.display()
    ));
    assert!(
        e.contains("run LaneData") && e.contains("an annotation without a lane point"),
        "{e}"
    );
    // The converter refuses files that are not TuSimple's, or more
    // lanes than the label top holds, naming the file.
    let convert = |json: &str| {
        std::fs::write(dir.join("bad.json"), json).unwrap();
        std::fs::write(dir.join("bad.txt"), "0.jpg bad.json\n").unwrap();
        convert_annoset(
            &format!("{}/", dir.display()),
            &dir.join("bad.txt"),
            &dir.join("bad_db"),
            Backend::Lmdb,
            &ImageSetOptions::default(),
            AnnotationKind::LaneDetection,
            None,
            false,
            &mut |_| {},
        )
        .unwrap_err()
    };
    for (json, words) in [
        ("{\"lanes\": [[1, 2]]}", "no \"h_samples\" array"),
        (
            "{\"lanes\": [[1, 2]], \"h_samples\": [5]}",
            "lane 0 has 2 points for 1 h_samples",
        ),
        (
            "{\"lanes\": [[1.5]], \"h_samples\": [5]}",
            "lane 0's point 1.5 is not a whole number",
        ),
        (
            "{\"lanes\": [[1], [1], [1], [1], [1], [1]], \"h_samples\": [5]}",
            "6 lanes, more than the 5",
        ),
        ("{\"lanes\": ", "bad.json: EOF"),
    ] {
        let e = convert(json);
        assert!(e.contains("line 1") && e.contains(words), "{json}: {e}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
