//! An AnnotatedData record on arbitrary bytes, through the layer: the
//! record is the store's one, read in a batch of two with settings the
//! first byte picks (the warp alone, SSD's whole augmentation:
//! distortion, expansion, samplers, mirror, or the YOLO fork's label
//! layout with its jitter and two scales, resized by OpenCV's AREA and
//! LANCZOS4, or fitted with its aspect kept and mirrored margins, or with
//! its segmentation labels, a third top, from the record's `seg_label`),
//! or read by the YOLO fork's LaneData as a record of lanes.
//! An error or batches whose label rows are boxes of the batch's items
//! inside the image (or lane points, those inside the crop numbered by
//! their lane) and whose label planes are shares from 0 to 1;
//! never a panic, never more memory than the limit (256 MiB).
#![no_main]

use std::sync::Once;

use blob_data::{Backend, StoreWriter, data_registry};
use blob_layers::net::{Net, NetState};
use libfuzzer_sys::fuzz_target;

const SETTINGS: [&str; 7] = [
    "transform_param { resize_param { height: 6 width: 5 } }",
    r#"transform_param { mirror: true mean_value: 104 mean_value: 117 mean_value: 123
         resize_param { height: 8 width: 8 interp_mode: LINEAR interp_mode: NEAREST interp_mode: CUBIC }
         emit_constraint { emit_type: CENTER }
         distort_param { brightness_prob: 0.5 brightness_delta: 32 contrast_prob: 0.5
           contrast_lower: 0.5 contrast_upper: 1.5 hue_prob: 0.5 hue_delta: 18
           saturation_prob: 0.5 saturation_lower: 0.5 saturation_upper: 1.5 random_order_prob: 0.5 }
         expand_param { prob: 0.5 max_expand_ratio: 4.0 } }
       annotated_data_param {
         batch_sampler { max_sample: 1 max_trials: 1 }
         batch_sampler { sampler { min_scale: 0.3 max_scale: 1.0 min_aspect_ratio: 0.5 max_aspect_ratio: 2.0 }
           sample_constraint { min_jaccard_overlap: 0.5 } max_sample: 1 max_trials: 20 } }"#,
    "transform_param { crop_size: 2 emit_constraint { emit_type: MIN_OVERLAP emit_overlap: 0.3 } }",
    r#"transform_param { mirror: true
         resize_param { prob: 0.5 height: 8 width: 8 interp_mode: AREA interp_mode: LANCZOS4 }
         resize_param { prob: 0.5 height: 4 width: 6 interp_mode: AREA }
         emit_constraint { emit_type: CENTER } expand_param { prob: 0.5 max_expand_ratio: 2.5 } }
       annotated_data_param { yolo_data_type: 1 yolo_data_jitter: 0.7 train_diffcult: false }"#,
    r#"transform_param { resize_param { resize_mode: FIT_LARGE_SIZE_AND_PAD pad_mode: MIRRORED
         height: 7 width: 9 interp_mode: LANCZOS4 interp_mode: AREA } }"#,
    // Segmentation labels: the layer gets a third top.
    r#"transform_param { mirror: true resize_param { height: 8 width: 6 interp_mode: LINEAR } }
       annotated_data_param { yolo_data_type: 1 yolo_data_jitter: 0.5 seg_scales: 2 }"#,
    // LaneData: lanes' points and their lines, a third top.
    r#"transform_param { mirror: true resize_param { height: 8 width: 6 interp_mode: AREA }
         distort_param { brightness_prob: 0.5 brightness_delta: 32 } }
       annotated_data_param { yolo_data_type: 1 yolo_data_jitter: 0.4 seg_scales: 2 }"#,
];

/// The setting that makes segmentation labels.
const SEGMENTATION: usize = 5;
/// The setting read by LaneData.
const LANES: usize = 6;

fuzz_target!(|data: &[u8]| {
    static LIMIT: Once = Once::new();
    LIMIT.call_once(|| blob_runtime::set_host_memory_limit(256 << 20));
    let Some((&knobs, record)) = data.split_first() else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("blobflow-fuzz-annotated-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut store = StoreWriter::create(&dir, Backend::Lmdb).unwrap();
    store.put(b"0", record).unwrap();
    store.finish().unwrap();
    let setting = usize::from(knobs) % SETTINGS.len();
    let text = format!(
        r#"layer {{ name: "data" type: "{}" top: "data" top: "label" {} {}
             data_param {{ source: "{}" batch_size: 2 backend: LMDB }} }}"#,
        if setting == LANES { "LaneData" } else { "AnnotatedData" },
        if setting >= SEGMENTATION { r#"top: "seg""# } else { "" },
        SETTINGS[setting],
        dir.display()
    );
    let Ok(mut net) = Net::<f32>::builder()
        .state(NetState::train())
        .registry(&data_registry())
        .from_prototxt(&text)
    else {
        return;
    };
    for _ in 0..2 {
        if net.forward().is_err() {
            return;
        }
        if let Some(seg) = net.blob("seg") {
            assert_eq!(seg.shape(), [2, 1, 4, 3]);
            let planes = seg.to_vec().unwrap();
            assert!(planes.iter().all(|v| (0.0..=1.0).contains(v)), "{planes:?}");
        }
        let label = net.blob("label").unwrap().to_vec().unwrap();
        if setting == LANES {
            assert_eq!(net.blob("label").unwrap().shape(), [2, 5, 64, 3]);
            for point in label.chunks(3) {
                let inside = (0.0..=1.0).contains(&point[0]) && (0.0..=1.0).contains(&point[1]);
                assert!(
                    point[2] == -1.0 || (inside && (0.0..5.0).contains(&point[2])),
                    "{point:?}"
                );
            }
            continue;
        }
        if net.blob("label").unwrap().shape() == [2, 1, 300, 5] {
            // YOLO's rows: class (the record's label less 1, whatever the
            // record says: the losses refuse those below 0), centre and
            // size inside the image.
            for row in label.chunks(5).filter(|r| r[3] != 0.0) {
                assert!(row[0].fract() == 0.0, "{row:?}");
                for &v in &row[1..] {
                    assert!((0.0..=1.0).contains(&v), "{row:?}");
                }
            }
            continue;
        }
        if label.len() == 2 {
            // Records without annotations: their datum's labels.
            continue;
        }
        assert_eq!(label.len() % 8, 0);
        if label.len() == 8 && label.iter().all(|&v| v == -1.0) {
            continue;
        }
        for row in label.chunks(8) {
            assert!(row[0] == 0.0 || row[0] == 1.0, "{row:?}");
            for &v in &row[3..7] {
                assert!((0.0..=1.0).contains(&v), "{row:?}");
            }
        }
    }
});
