//! sfzhang15/FaceBoxes' PriorBox, asked for by name
//! ([`Fork::FaceBoxes`]): its `prior_box_layer.cpp` written out, and the
//! SSD fork's PriorBox kept where it is not asked for.

use blob_layers::Fork;
use blob_layers::registry::LayerRegistry;
use blob_runtime::Blob;

/// The fork's `Forward_cpu` for min sizes without max sizes or other
/// ratios, no clip: its boxes, cell by cell.
fn fork_boxes(
    min_sizes: &[i32],
    (h, w): (usize, usize),
    (img_w, img_h): (usize, usize),
    step: f32,
) -> Vec<f32> {
    let offset = 0.5f32;
    let mut out = Vec::new();
    let mut push = |v: f64| out.push(v as f32);
    for y in 0..h {
        for x in 0..w {
            let center_x = (x as f32 + offset) * step;
            let center_y = (y as f32 + offset) * step;
            for &min in min_sizes {
                let box_width = min as f32;
                let (n, apart) = match min {
                    32 => (4, 8),
                    64 => (2, 16),
                    _ => (1, 0),
                };
                for i in -(n / 2)..n - n / 2 {
                    for j in -(n / 2)..n - n / 2 {
                        // float + int, then the double's (size - 1) / 2.
                        let cx = f64::from(center_x + (j * apart) as f32);
                        let cy = f64::from(center_y + (i * apart) as f32);
                        let half = (f64::from(box_width) - 1.0) / 2.0;
                        push((cx - half) / img_w as f64);
                        push((cy - half) / img_h as f64);
                        push((cx + half) / img_w as f64);
                        push((cy + half) / img_h as f64);
                    }
                }
            }
        }
    }
    out
}

fn prior_boxes(
    registry: &LayerRegistry<f32>,
    param: &str,
    map: [usize; 2],
    image: [usize; 2],
) -> Blob<f32> {
    let mut l = registry
        .build_text(&format!("type: 'PriorBox' prior_box_param {{ {param} }}"))
        .unwrap();
    let (feature, img) = (
        Blob::new(&[1, 8, map[0], map[1]]).unwrap(),
        Blob::new(&[1, 3, image[0], image[1]]).unwrap(),
    );
    let mut top = Blob::default();
    let shapes = l.reshape(&[&feature, &img], &[&top]).unwrap();
    top.reshape(&shapes[0].dims).unwrap();
    l.forward(&[&feature, &img], &[&top]).unwrap();
    top
}

#[test]
fn faceboxes_tiles_its_small_boxes_about_each_centre() {
    let mut registry = LayerRegistry::<f32>::with_caffe_layers();
    registry.use_fork(Fork::FaceBoxes);
    let variances = "variance: 0.1 variance: 0.1 variance: 0.2 variance: 0.2";
    // Its three layers: 32, 64, 128 at stride 32 (21 boxes a cell), 256
    // at 64, 512 at 128; an image of 96 x 128 (rows, columns).
    for (sizes, step, map) in [
        (vec![32, 64, 128], 32.0, [3, 4]),
        (vec![256], 64.0, [2, 2]),
        (vec![512], 128.0, [1, 1]),
    ] {
        let param = format!(
            "{} {variances} step: {step} offset: 0.5",
            sizes
                .iter()
                .map(|s| format!("min_size: {s} "))
                .collect::<String>()
        );
        let top = prior_boxes(&registry, &param, map, [96, 128]);
        let want = fork_boxes(&sizes, (map[0], map[1]), (128, 96), step);
        let per_cell: usize = sizes
            .iter()
            .map(|&s| match s {
                32 => 16,
                64 => 4,
                _ => 1,
            })
            .sum();
        assert_eq!(
            top.shape(),
            [1, 2, map[0] * map[1] * per_cell * 4],
            "{param}"
        );
        let values = top.to_vec().unwrap();
        let (boxes, variance) = values.split_at(want.len());
        assert_eq!(boxes, want.as_slice(), "{param}");
        assert!(
            variance.chunks(4).all(|v| v == [0.1, 0.1, 0.2, 0.2]),
            "{param}"
        );
    }
    // Boxes the fork would size its top wrongly for are refused.
    let e = registry
        .build_text(
            "type: 'PriorBox' prior_box_param { min_size: 32 min_size: 64 aspect_ratio: 2 }",
        )
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("writes 24 boxes a cell for min sizes [32, 64], but sizes its top for 6"),
        "{e}"
    );
}

#[test]
fn without_the_fork_prior_box_is_the_ssd_forks() {
    let registry = LayerRegistry::<f32>::with_caffe_layers();
    let top = prior_boxes(
        &registry,
        "min_size: 32 min_size: 64 min_size: 128 step: 32 offset: 0.5",
        [1, 1],
        [32, 32],
    );
    // Three squares a cell, sides 32, 64 and 128, centred at 16.
    assert_eq!(top.shape(), [1, 2, 12]);
    let boxes = &top.to_vec().unwrap()[..12];
    assert_eq!(
        boxes,
        [
            0.0, 0.0, 1.0, 1.0, -0.5, -0.5, 1.5, 1.5, -1.5, -1.5, 2.5, 2.5
        ]
    );
}

#[test]
fn faceboxes_deploy_net_runs_with_its_fork_and_is_refused_without() {
    use blob_layers::net::{Net, NetState};
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/nets/faceboxes/deploy.prototxt"),
    )
    .unwrap();
    // 256 x 192: maps of 8 x 6, 4 x 3 and 2 x 2 (rows, columns).
    let build = |registry: &LayerRegistry<f32>| {
        Net::<f32>::builder()
            .state(NetState::test())
            .registry(registry)
            .input_shape("data", &[1, 3, 256, 192])
            .from_prototxt(&text)
    };
    let caffe = LayerRegistry::<f32>::with_caffe_layers();
    let e = build(&caffe).err().unwrap().to_string();
    assert!(e.contains("detection_out") && e.contains("priors"), "{e}");
    let mut fork = LayerRegistry::<f32>::with_caffe_layers();
    fork.use_fork(Fork::FaceBoxes);
    let mut net = build(&fork).unwrap();
    net.forward().unwrap();
    let first = net
        .blob("inception_a3_concat_mbox_priorbox")
        .unwrap()
        .to_vec()
        .unwrap();
    let want = fork_boxes(&[32, 64, 128], (8, 6), (192, 256), 32.0);
    assert_eq!(&first[..want.len()], want.as_slice());
    let rows = net.blob("detection_out").unwrap();
    assert_eq!(rows.shape()[3], 7);
}
