//! The YOLO forks' layers (eric612/MobileNet-YOLO): `Reorg` against
//! darknet's `reorg_cpu` written out, and its backward pass against
//! central differences; `YoloDetectionOutput` and `Yolov3DetectionOutput`
//! against the fork's forward passes written out (its swap blobs, its
//! `class_index_and_score`, its pooled sort and `ApplyNms`), and against
//! boxes worked out by hand; the `Yolov3` and `RegionLoss` training
//! losses against deltas worked out by hand from the fork's
//! `yolov3_layer.cpp` and `region_loss_layer.cpp`, the overlap losses,
//! and their refusals; the segmentation head's `YoloSeg` and
//! `SegmentationEvaluate`, and `AssistedExcitation` along its schedule,
//! against values worked out by hand.

use blob_layers::DynLayer;
use blob_layers::check::GradientChecker;
use blob_layers::registry::LayerRegistry;
use blob_runtime::Blob;

fn layer<T: blob_runtime::MathElement>(text: &str) -> Box<dyn DynLayer<T>> {
    LayerRegistry::with_caffe_layers()
        .build_text(text)
        .unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn refused(text: &str, bottoms: &[&[usize]]) -> String {
    let built = LayerRegistry::<f32>::with_caffe_layers().build_text(text);
    let mut l = match built {
        Err(e) => return e.to_string(),
        Ok(l) => l,
    };
    let blobs: Vec<Blob<f32>> = bottoms.iter().map(|s| Blob::new(s).unwrap()).collect();
    let refs: Vec<&Blob<f32>> = blobs.iter().collect();
    match l.reshape(&refs, &[&Blob::default()]) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("{text} took {bottoms:?}"),
    }
}

/// Uniform values in `[lo, hi)` from a small LCG (the tests' own stream).
fn values(n: usize, seed: u64, lo: f32, hi: f32) -> Vec<f32> {
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            lo + (hi - lo) * ((state >> 40) as f32 / (1u64 << 24) as f32)
        })
        .collect()
}

fn run<T: blob_runtime::MathElement>(l: &mut dyn DynLayer<T>, bottoms: &[&Blob<T>]) -> Blob<T> {
    let mut top = Blob::default();
    let shapes = l.reshape(bottoms, &[&top]).unwrap();
    top.reshape(&shapes[0].dims).unwrap();
    l.forward(bottoms, &[&top]).unwrap();
    top
}

/// Darknet's `reorg_cpu` as the fork's header has it (`forward` is the
/// layer's `reverse`), over the input's dims.
fn reorg_cpu(
    x: &[f32],
    (b_n, b_c, b_h, b_w): (usize, usize, usize, usize),
    stride: usize,
    forward: bool,
) -> Vec<f32> {
    let mut top = vec![f32::NAN; x.len()];
    let t_c = b_c / (stride * stride);
    let (t_w, t_h) = (b_w * stride, b_h * stride);
    for n in 0..b_n {
        for c in 0..b_c {
            for h in 0..b_h {
                for w in 0..b_w {
                    let bottom_index = w + b_w * (h + b_h * (c + b_c * n));
                    let c2 = c % t_c;
                    let offset = c / t_c;
                    let w2 = w * stride + offset % stride;
                    let h2 = h * stride + offset / stride;
                    let top_index = w2 + t_w * (h2 + t_h * (c2 + t_c * n));
                    if forward {
                        top[top_index] = x[bottom_index];
                    } else {
                        top[bottom_index] = x[top_index];
                    }
                }
            }
        }
    }
    top
}

#[test]
fn reorg_moves_values_as_darknet_does_both_ways() {
    let dims = (2, 8, 4, 6);
    let x = values(2 * 8 * 4 * 6, 1, -1.0, 1.0);
    let bottom = Blob::from_vec(&[2, 8, 4, 6], x.clone()).unwrap();
    let mut l = layer::<f32>("type: 'Reorg' reorg_param { stride: 2 }");
    let top = run(l.as_mut(), &[&bottom]);
    assert_eq!(top.shape(), [2, 32, 2, 3]);
    assert_eq!(top.to_vec().unwrap(), reorg_cpu(&x, dims, 2, false));

    let mut back = layer::<f32>("type: 'Reorg' reorg_param { stride: 2 reverse: true }");
    let top = run(back.as_mut(), &[&bottom]);
    assert_eq!(top.shape(), [2, 2, 8, 12]);
    assert_eq!(top.to_vec().unwrap(), reorg_cpu(&x, dims, 2, true));

    // Reverse undoes forward: the pairs are the same.
    let there = run(l.as_mut(), &[&bottom]);
    let again = run(
        back.as_mut(),
        &[&Blob::from_vec(&[2, 8, 4, 6], there.to_vec().unwrap()).unwrap()],
    );
    assert_eq!(again.to_vec().unwrap(), x);
}

#[test]
fn reorg_gradients_go_back_where_the_values_came_from() {
    let checker = GradientChecker {
        step: 1e-5,
        threshold: 1e-6,
    };
    for (text, shape) in [
        ("type: 'Reorg' reorg_param { stride: 2 }", [2, 8, 4, 6]),
        (
            "type: 'Reorg' reorg_param { stride: 2 reverse: true }",
            [2, 8, 3, 5],
        ),
        ("type: 'Reorg' reorg_param { stride: 3 }", [1, 9, 3, 6]),
    ] {
        let n = shape.iter().product();
        let x: Vec<f64> = values(n, 2, -1.0, 1.0).into_iter().map(f64::from).collect();
        let mut l = layer::<f64>(text);
        let report = checker
            .check(l.as_mut(), &[Blob::from_vec(&shape, x).unwrap()])
            .unwrap_or_else(|e| panic!("{text}: {e}"));
        assert!(report.checked > 0, "{text}");
    }
}

#[test]
fn reorg_refuses_what_darknet_would_read_past() {
    let msg = refused("type: 'Reorg' reorg_param { stride: 2 }", &[&[1, 6, 4, 4]]);
    assert!(
        msg.contains("6 channels are not a multiple of stride² = 4"),
        "{msg}"
    );
    let msg = refused("type: 'Reorg' reorg_param { stride: 2 }", &[&[1, 8, 5, 4]]);
    assert!(
        msg.contains("5 x 4 plane is not a multiple of stride 2"),
        "{msg}"
    );
    let msg = refused("type: 'Reorg'", &[&[1, 8, 4, 4]]);
    assert!(msg.contains("reorg_param.stride must be given"), "{msg}");
    // Reverse needs no divisible plane.
    let mut l = layer::<f32>("type: 'Reorg' reorg_param { stride: 2 reverse: true }");
    let top = run(l.as_mut(), &[&Blob::new(&[1, 8, 5, 3]).unwrap()]);
    assert_eq!(top.shape(), [1, 2, 10, 6]);
}

// --- The detection outputs, the fork's forward passes written out ---

#[derive(Clone, Copy, Debug)]
struct Prediction {
    x: f32,
    y: f32,
    w: f32,
    h: f32,
    class: usize,
    confidence: f32,
}

fn sigmoid(x: f32) -> f32 {
    (1.0 / (1.0 + f64::from(-x).exp())) as f32
}

fn box_iou(a: &Prediction, b: &Prediction) -> f32 {
    let overlap = |x1: f32, w1: f32, x2: f32, w2: f32| {
        let l1 = x1 - w1 / 2.0;
        let l2 = x2 - w2 / 2.0;
        let left = if l1 > l2 { l1 } else { l2 };
        let r1 = x1 + w1 / 2.0;
        let r2 = x2 + w2 / 2.0;
        let right = if r1 < r2 { r1 } else { r2 };
        right - left
    };
    let w = overlap(a.x, a.w, b.x, b.w);
    let h = overlap(a.y, a.h, b.y, b.h);
    let i = if w < 0.0 || h < 0.0 { 0.0 } else { w * h };
    i / (a.w * a.h + b.w * b.h - i)
}

/// The fork's sort (stable here) and `ApplyNms` with its `idx_map`,
/// then its rows.
fn fork_rows(mut predicts: Vec<Prediction>, nms: f32, images: usize) -> Vec<[f32; 7]> {
    predicts.sort_by(|a, b| b.confidence.total_cmp(&a.confidence));
    let mut suppressed = vec![false; predicts.len()];
    for i in 0..predicts.len().saturating_sub(1) {
        if suppressed[i] {
            continue;
        }
        for j in i + 1..predicts.len() {
            if !suppressed[j] && box_iou(&predicts[i], &predicts[j]) >= nms {
                suppressed[j] = true;
            }
        }
    }
    let kept: Vec<&Prediction> = predicts
        .iter()
        .zip(&suppressed)
        .filter(|(_, s)| !**s)
        .map(|(p, _)| p)
        .collect();
    if kept.is_empty() {
        return (0..images)
            .map(|i| [i as f32, -1., -1., -1., -1., -1., -1.])
            .collect();
    }
    kept.iter()
        .map(|p| {
            let (x, y, w, h) = (
                f64::from(p.x),
                f64::from(p.y),
                f64::from(p.w),
                f64::from(p.h),
            );
            [
                0.0,
                (p.class + 1) as f32,
                p.confidence,
                (x - w / 2.) as f32,
                (y - h / 2.) as f32,
                (x + w / 2.) as f32,
                (y + h / 2.) as f32,
            ]
        })
        .collect()
}

/// `YoloDetectionOutputLayer::Forward_cpu` at batch 1 on square maps:
/// each bottom copied into its (hw, box, field) swap, then read.
fn fork_v2(
    bottoms: &[(&[usize], &[f32])],
    classes: usize,
    boxes: usize,
    biases: &[f32],
    threshold: f32,
) -> Vec<Prediction> {
    let mut predicts = Vec::new();
    for &(shape, x) in bottoms {
        let (c, h, w) = (shape[1], shape[2], shape[3]);
        let side = w;
        let mut swap = Vec::with_capacity(x.len());
        for hh in 0..h {
            for ww in 0..w {
                for cc in 0..c {
                    swap.push(x[(cc * h + hh) * w + ww]);
                }
            }
        }
        let per = c / boxes;
        for j in 0..side {
            for i in 0..side {
                for n in 0..boxes {
                    let index = (j * side + i) * boxes * per + n * per;
                    let input = &swap[index + 5..index + 5 + classes];
                    let large = input.iter().copied().fold(input[0], f32::max);
                    let e: Vec<f32> = input.iter().map(|v| (v - large).exp()).collect();
                    let sum: f32 = e.iter().sum();
                    let probs: Vec<f32> = e.iter().map(|v| v / sum).collect();
                    let (mut class, mut best) = (0, probs[0]);
                    for (k, &p) in probs.iter().enumerate() {
                        if p > best {
                            (class, best) = (k, p);
                        }
                    }
                    let confidence = sigmoid(swap[index + 4]) * best;
                    if confidence >= threshold {
                        predicts.push(Prediction {
                            x: (i as f32 + sigmoid(swap[index])) / side as f32,
                            y: (j as f32 + sigmoid(swap[index + 1])) / side as f32,
                            w: swap[index + 2].exp() * biases[2 * n] / side as f32,
                            h: swap[index + 3].exp() * biases[2 * n + 1] / side as f32,
                            class,
                            confidence,
                        });
                    }
                }
            }
        }
    }
    predicts
}

struct V3<'a> {
    classes: usize,
    boxes: usize,
    biases: &'a [f32],
    mask: &'a [usize],
    anchors_scale: &'a [usize],
    gaussian: bool,
}

/// `Yolov3DetectionOutputLayer::Forward_cpu` at batch 1: the sigmoids
/// into its swap and class scores, `get_region_box` /
/// `get_gaussian_yolo_box`, `correct_yolo_boxes` (relative).
fn fork_v3(bottoms: &[(&[usize], &[f32])], p: &V3, threshold: f32) -> Vec<Prediction> {
    let len = if p.gaussian { 8 } else { 4 } + p.classes + 1;
    let groups_num = p.mask.len() / bottoms.len();
    let mut mask_offset = 0;
    let mut predicts = Vec::new();
    for (t, &(shape, input)) in bottoms.iter().enumerate() {
        let (side_h, side_w) = (shape[2], shape[3]);
        let stride = side_w * side_h;
        let mut swap = vec![0.0f32; input.len()];
        let (nw, nh) = (side_w * p.anchors_scale[t], side_h * p.anchors_scale[t]);
        let mut class_score = vec![0.0f32; p.classes];
        for s in 0..stride {
            for n in 0..p.boxes {
                let index = n * len * stride + s;
                for c in 0..len {
                    let index2 = c * stride + index;
                    let raw = if p.gaussian {
                        c == 4 || c == 6
                    } else {
                        c == 2 || c == 3
                    };
                    let first_class = if p.gaussian { 9 } else { 5 };
                    if raw {
                        swap[index2] = input[index2];
                    } else if c >= first_class {
                        class_score[c - first_class] = sigmoid(input[index2]);
                    } else {
                        swap[index2] = sigmoid(input[index2]);
                    }
                }
                let (y2, x2) = (s / side_w, s % side_w);
                let obj_score = if p.gaussian {
                    let uc = 4.0
                        - f64::from(swap[index + stride])
                        - f64::from(swap[index + 3 * stride])
                        - f64::from(swap[index + 5 * stride])
                        - f64::from(swap[index + 7 * stride]);
                    (f64::from(swap[index + 8 * stride]) * uc / 4.0) as f32
                } else {
                    swap[index + 4 * stride]
                };
                let m = p.mask[n + mask_offset];
                let (bx, by, bw, bh) = if p.gaussian {
                    (0, 2, 4, 6)
                } else {
                    (0, 1, 2, 3)
                };
                for (c, score) in class_score.iter_mut().enumerate() {
                    *score *= obj_score;
                    if *score > threshold {
                        predicts.push(Prediction {
                            x: (x2 as f32 + swap[index + bx * stride]) / side_w as f32,
                            y: (y2 as f32 + swap[index + by * stride]) / side_h as f32,
                            w: swap[index + bw * stride].exp() * p.biases[2 * m] / nw as f32,
                            h: swap[index + bh * stride].exp() * p.biases[2 * m + 1] / nh as f32,
                            class: c,
                            confidence: *score,
                        });
                    }
                }
            }
        }
        mask_offset += groups_num;
    }
    predicts
}

fn assert_rows(what: &str, got: &[f32], want: &[[f32; 7]]) {
    assert_eq!(
        got.len(),
        want.len() * 7,
        "{what}: {} rows, the fork {}",
        got.len() / 7,
        want.len()
    );
    for (r, (g, w)) in got.chunks(7).zip(want).enumerate() {
        for (k, (a, b)) in g.iter().zip(w).enumerate() {
            assert!(
                (a - b).abs() <= 1e-6 * b.abs().max(1.0),
                "{what}: row {r} value {k}: {a} against the fork's {b}"
            );
        }
    }
}

#[test]
fn yolov2_detection_output_is_the_forks_on_one_and_two_maps() {
    let biases = [1.08f32, 1.19, 3.42, 4.41, 6.63, 11.38];
    let (classes, boxes) = (4, 3);
    let channels = boxes * (5 + classes);
    let big = values(channels * 13 * 13, 3, -3.0, 3.0);
    let small = values(channels * 7 * 7, 4, -3.0, 3.0);
    let text = "type: 'YoloDetectionOutput' yolo_detection_output_param { num_classes: 4 num_box: 3 \
                confidence_threshold: 0.3 nms_threshold: 0.45 \
                biases: 1.08 biases: 1.19 biases: 3.42 biases: 4.41 biases: 6.63 biases: 11.38 }";
    let (s13, s7) = ([1, channels, 13, 13], [1, channels, 7, 7]);
    for bottoms in [
        vec![(&s13[..], &big[..])],
        vec![(&s13[..], &big[..]), (&s7[..], &small[..])],
    ] {
        let want = fork_rows(fork_v2(&bottoms, classes, boxes, &biases, 0.3), 0.45, 1);
        assert!(
            want.len() > 5,
            "the case should keep several boxes, kept {}",
            want.len()
        );
        let blobs: Vec<Blob<f32>> = bottoms
            .iter()
            .map(|(s, v)| Blob::from_vec(s, v.to_vec()).unwrap())
            .collect();
        let refs: Vec<&Blob<f32>> = blobs.iter().collect();
        let mut l = layer::<f32>(text);
        let top = run(l.as_mut(), &refs);
        assert_eq!(top.shape()[..3], [1, 1, want.len()]);
        assert_rows(
            &format!("{} maps", bottoms.len()),
            &top.to_vec().unwrap(),
            &want,
        );
    }
}

#[test]
fn yolov3_detection_output_is_the_forks_with_and_without_gaussian_boxes() {
    let biases = [
        10.0f32, 14., 23., 27., 37., 58., 81., 82., 135., 169., 344., 319.,
    ];
    let mask = [3usize, 4, 5, 0, 1, 2];
    let scales = [32usize, 16];
    // The fork's default threshold passes every class of every box; an
    // nms_threshold above 1 suppresses nothing.
    for (gaussian, confidence, nms) in [
        (false, 0.4, 0.45),
        (true, 0.4, 0.45),
        (false, 0.01, 0.45),
        (true, 0.01, 0.3),
        (false, 0.4, 1.5),
    ] {
        let p = V3 {
            classes: 3,
            boxes: 3,
            biases: &biases,
            mask: &mask,
            anchors_scale: &scales,
            gaussian,
        };
        let len = if gaussian { 9 } else { 5 } + p.classes;
        // A wide map, to hold the two sides apart.
        let (s0, s1) = ([1, 3 * len, 5, 8], [1, 3 * len, 10, 16]);
        let (a, b) = (
            values(3 * len * 40, 5, -3.0, 3.0),
            values(3 * len * 160, 6, -3.0, 3.0),
        );
        let bottoms = [(&s0[..], &a[..]), (&s1[..], &b[..])];
        let want = fork_rows(fork_v3(&bottoms, &p, confidence), nms, 1);
        assert!(want.len() > 5, "gaussian {gaussian}: kept {}", want.len());
        let text = format!(
            "type: 'Yolov3DetectionOutput' yolov3_detection_output_param {{ num_classes: 3 \
             confidence_threshold: {confidence} nms_threshold: {nms} gaussian_box: {gaussian} \
             {} anchors_scale: 32 anchors_scale: 16 mask_group_num: 2 {} }}",
            biases
                .iter()
                .map(|b| format!("biases: {b} "))
                .collect::<String>(),
            mask.iter()
                .map(|m| format!("mask: {m} "))
                .collect::<String>(),
        );
        let blobs = [
            Blob::from_vec(&s0, a.clone()).unwrap(),
            Blob::from_vec(&s1, b.clone()).unwrap(),
        ];
        let mut l = layer::<f32>(&text);
        let top = run(l.as_mut(), &[&blobs[0], &blobs[1]]);
        let what = format!("gaussian {gaussian}, confidence {confidence}, nms {nms}");
        assert_rows(&what, &top.to_vec().unwrap(), &want);
    }
}

/// One cell's box on a 4 x 4 map with the rest silent: where it lands
/// is worked out from the fork's formulas by hand.
#[test]
fn a_lone_yolov3_box_lands_where_its_cell_and_anchor_put_it() {
    let (len, plane) = (6, 16);
    // One box a cell, one class; logits -20 (nothing) everywhere.
    let mut x = vec![-20.0f32; 2 * len * plane];
    // Image 1, cell (row 2, col 1): tx = ty = 0 (centre of the cell),
    // tw = ln 2, th = 0, objectness and class logit 20.
    let cell = 2 * 4 + 1;
    let at = |k: usize| len * plane + k * plane + cell;
    for (k, v) in [
        (0, 0.0),
        (1, 0.0),
        (2, 2f32.ln()),
        (3, 0.0),
        (4, 20.0),
        (5, 20.0),
    ] {
        x[at(k)] = v;
    }
    let bottom = Blob::from_vec(&[2, len, 4, 4], x).unwrap();
    let mut l = layer::<f32>(
        "type: 'Yolov3DetectionOutput' yolov3_detection_output_param { num_classes: 1 num_box: 1 \
         mask_group_num: 1 mask: 1 biases: 1 biases: 1 biases: 16 biases: 8 anchors_scale: 8 }",
    );
    let top = run(l.as_mut(), &[&bottom]).to_vec().unwrap();
    // Centre (1.5 / 4, 2.5 / 4); the anchor 16 x 8 px of a 32 x 32 px
    // input, its width doubled: 1 x 0.25.
    let want = [
        1.0,
        1.0,
        1.0,
        0.375 - 0.5,
        0.625 - 0.125,
        0.375 + 0.5,
        0.625 + 0.125,
    ];
    assert_eq!(top.len(), 7);
    for (g, w) in top.iter().zip(want) {
        assert!((g - w).abs() < 1e-6, "{top:?}");
    }

    // Nothing passes: one empty row per image, as the fork writes them.
    let silent = Blob::from_vec(&[2, len, 4, 4], vec![-20.0; 2 * len * plane]).unwrap();
    let top = run(l.as_mut(), &[&silent]).to_vec().unwrap();
    assert_eq!(
        top,
        [
            0., -1., -1., -1., -1., -1., -1., 1., -1., -1., -1., -1., -1., -1.
        ]
    );
}

#[test]
fn yolo_detection_outputs_name_what_they_cannot_read() {
    let v3 = "type: 'Yolov3DetectionOutput' yolov3_detection_output_param { num_classes: 2 \
              num_box: 1 mask_group_num: 1 mask: 0 biases: 1 biases: 2 anchors_scale: 32 }";
    let msg = refused(v3, &[&[1, 8, 4, 4]]);
    assert!(
        msg.contains(
            "bottom 0 has shape 1 8 4 4, but 1 boxes of 5 + 2 classes a cell makes it 1 x 7 x H x W"
        ),
        "{msg}"
    );
    let msg = refused(&v3.replace("mask: 0", "mask: 1"), &[&[1, 7, 4, 4]]);
    assert!(
        msg.contains("mask 1 names anchor 1, but the 2 biases hold 1 anchors"),
        "{msg}"
    );
    let msg = refused(&v3.replace("anchors_scale: 32", ""), &[&[1, 7, 4, 4]]);
    assert!(
        msg.contains("each of the 1 bottoms needs a positive scale"),
        "{msg}"
    );
    let msg = refused(&v3.replace("num_classes: 2", ""), &[&[1, 7, 4, 4]]);
    assert!(msg.contains("must give num_classes"), "{msg}");
    let v2 = "type: 'YoloDetectionOutput' yolo_detection_output_param { num_classes: 2 num_box: 2 biases: 1 biases: 1 }";
    let msg = refused(v2, &[&[1, 14, 4, 4]]);
    assert!(msg.contains("2 biases for 2 boxes"), "{msg}");
}

// --- ChenYingpeng/caffe-yolov3's pooling sizes ---

/// The fork's `PoolingLayer::Reshape` and `Forward_cpu` (MAX, AVE)
/// written out for one plane of `h x w`, no padding.
fn fork_pooling(
    x: &[f32],
    (h, w): (usize, usize),
    k: usize,
    s: usize,
    max: bool,
) -> (Vec<f32>, [usize; 2]) {
    let pooled = |n: usize| {
        let mut p = ((n as f32 - k as f32) / s as f32).ceil() as i64 + 1;
        if (k as i64 - s as i64) % 2 == 1 {
            p += 1;
        }
        p as usize
    };
    let (ph_n, pw_n) = (pooled(h), pooled(w));
    let mut top = Vec::new();
    for ph in 0..ph_n {
        for pw in 0..pw_n {
            let (hstart, wstart) = (ph * s, pw * s);
            let (hend, wend) = ((hstart + k).min(h), (wstart + k).min(w));
            if hstart >= h || wstart >= w {
                // A window past the input's end (3 x 3 at stride 2 over
                // an even size): the fork writes -FLT_MAX or 0 / 0;
                // blobflow 0, as for Caffe's own (pool/cpu.rs).
                top.push(0.0);
            } else if max {
                let mut m = -f32::MAX;
                for hh in hstart..hend {
                    for ww in wstart..wend {
                        if x[hh * w + ww] > m {
                            m = x[hh * w + ww];
                        }
                    }
                }
                top.push(m);
            } else {
                // pool_size from the window clipped to the input (no pad).
                let size = ((hend - hstart) * (wend - wstart)) as f32;
                let mut sum = 0.0f32;
                for hh in hstart..hend {
                    for ww in wstart..wend {
                        sum += x[hh * w + ww];
                    }
                }
                top.push(sum / size);
            }
        }
    }
    (top, [ph_n, pw_n])
}

#[test]
fn caffe_yolov3_pooling_keeps_darknets_sizes_only_when_asked() {
    let mut fork = LayerRegistry::<f32>::with_caffe_layers();
    fork.use_fork(blob_layers::Fork::CaffeYolov3);
    // YOLOv3-tiny's 2 x 2 at stride 1 (13 -> 13), a 3 x 3 at stride 2
    // (odd too), a 2 x 2 at stride 2 (unchanged), on planes of several
    // sizes: the vectorised paths and the plain loop.
    for (k, s) in [(2, 1), (3, 2), (2, 2)] {
        for (h, w) in [(13, 13), (26, 20), (7, 40)] {
            for max in [true, false] {
                let planes = 3;
                let x = values(planes * h * w, (h * 31 + w + k) as u64, -1.0, 1.0);
                let text = format!(
                    "type: 'Pooling' pooling_param {{ pool: {} kernel_size: {k} stride: {s} }}",
                    if max { "MAX" } else { "AVE" }
                );
                let mut l = fork.build_text(&text).unwrap();
                let top = run(
                    l.as_mut(),
                    &[&Blob::from_vec(&[1, planes, h, w], x.clone()).unwrap()],
                );
                let mut want = Vec::new();
                let mut dims = [0, 0];
                for plane in x.chunks(h * w) {
                    let (t, d) = fork_pooling(plane, (h, w), k, s, max);
                    want.extend(t);
                    dims = d;
                }
                let what = format!("{text} on {h} x {w}");
                assert_eq!(top.shape(), [1, planes, dims[0], dims[1]], "{what}");
                for (i, (g, w)) in top.to_vec().unwrap().iter().zip(&want).enumerate() {
                    assert!(
                        (g - w).abs() <= 1e-6,
                        "{what}: value {i} is {g}, the fork's {w}"
                    );
                }
            }
        }
    }
    // Backward through the extra row and column, on f64.
    let mut fork64 = LayerRegistry::<f64>::with_caffe_layers();
    fork64.use_fork(blob_layers::Fork::CaffeYolov3);
    let checker = GradientChecker {
        step: 1e-5,
        threshold: 1e-6,
    };
    for pool in ["MAX", "AVE"] {
        let text =
            format!("type: 'Pooling' pooling_param {{ pool: {pool} kernel_size: 2 stride: 1 }}");
        let mut l = fork64.build_text(&text).unwrap();
        let x: Vec<f64> = values(2 * 5 * 5, 9, -1.0, 1.0)
            .into_iter()
            .map(f64::from)
            .collect();
        let report = checker
            .check(l.as_mut(), &[Blob::from_vec(&[1, 2, 5, 5], x).unwrap()])
            .unwrap_or_else(|e| panic!("{text}: {e}"));
        assert!(report.checked > 0, "{text}");
    }
    // Caffe's own, without the fork: 13 -> 12.
    let mut caffe =
        layer::<f32>("type: 'Pooling' pooling_param { pool: MAX kernel_size: 2 stride: 1 }");
    let top = run(caffe.as_mut(), &[&Blob::new(&[1, 1, 13, 13]).unwrap()]);
    assert_eq!(top.shape(), [1, 1, 12, 12]);
}

/// A `Yolov3` loss of one class and one box a cell over a 2 x 2 map,
/// anchors 4 x 4 and 12 x 12 pixels of a 16 x 16 input (0.25 and 0.75 of
/// it), this scale's box taking anchor `mask`; `thresh` 0.6 unless
/// `settings` gives one.
fn yolov3(settings: &str) -> Box<dyn DynLayer<f32>> {
    let thresh = if settings.contains(" thresh:") {
        ""
    } else {
        "thresh: 0.6"
    };
    layer(&format!(
        r#"name: "loss" type: "Yolov3" bottom: "pred" bottom: "label" top: "loss"
           yolov3_param {{ num_class: 1 num: 1 anchors_scale: 8 coord_scale: 1 {thresh}
             biases: 4 biases: 4 biases: 12 biases: 12 {settings} }}"#
    ))
}

/// Image 0's labels: `rows` of class, x, y, w, h, the rest zeros.
fn yolo_labels(images: usize, rows: &[[f32; 5]]) -> Blob<f32> {
    let mut v = vec![0.0; images * 300 * 5];
    for (r, row) in rows.iter().enumerate() {
        v[r * 5..r * 5 + 5].copy_from_slice(row);
    }
    Blob::from_vec(&[images, 1, 300, 5], v).unwrap()
}

#[test]
fn yolov3_loss_gives_a_true_box_to_its_cell_and_best_anchor() {
    let mut l = yolov3("mask: 0");
    // Zero predictions: x, y, objectness and class 0.5, w and h exp(0).
    let pred = Blob::<f32>::new(&[1, 6, 2, 2]).unwrap();
    // A class-0 box centred in cell (0, 1), 0.2 x 0.3 of the image:
    // anchor 0 overlaps its shape by 0.69, anchor 1 by 0.11.
    let label = yolo_labels(1, &[[0.0, 0.3, 0.7, 0.2, 0.3]]);
    let top = run(l.as_mut(), &[&pred, &label]);
    top.mutable_cpu_diff().unwrap()[0] = 1.0;
    l.backward(&[&top], &[true, false], &[&pred, &label])
        .unwrap();
    let diff = pred.cpu_diff().unwrap().to_vec();
    let at = |channel: usize, cell: usize| diff[channel * 4 + cell];
    // darknet's box codes in cell (0, 1) = cell 2, scaled by 2 - w·h.
    let scale = 2.0 - 0.2 * 0.3;
    let codes = [
        0.6 - 0.5,
        0.4 - 0.5,
        (0.2f32 * 16.0 / 4.0).ln(),
        (0.3f32 * 16.0 / 4.0).ln(),
    ];
    for (k, code) in codes.iter().enumerate() {
        let want = -scale * code;
        assert!(
            (at(k, 2) - want).abs() < 1e-6,
            "channel {k}: {} against {want}",
            at(k, 2)
        );
    }
    // Objectness towards 1; the class towards 0.95 (label smoothing 0.1).
    assert!((at(4, 2) + 0.5).abs() < 1e-6);
    assert!((at(5, 2) + 0.45).abs() < 1e-6);
    // The other cells: "no object" (0.5 towards 0); the cell's predicted
    // box overlaps the true box by 0.47, below thresh 0.6 but not its own.
    for cell in [0, 1, 3] {
        assert_eq!(at(4, cell), 0.5, "cell {cell}");
        for k in [0, 1, 2, 3, 5] {
            assert_eq!(at(k, cell), 0.0);
        }
    }
    let squares: f32 = codes.iter().map(|c| (scale * c).powi(2)).sum::<f32>() + 0.25 + 0.2025;
    let loss = top.cpu_data().unwrap()[0];
    assert!((loss - (squares + 3.0 * 0.25)).abs() < 1e-5, "{loss}");

    // With thresh 0.4 the true box's own cell's box is near enough: no
    // "no object" there, and the rest as before.
    let mut l = yolov3("mask: 0 thresh: 0.4");
    let top = run(l.as_mut(), &[&pred, &label]);
    assert!((top.cpu_data().unwrap()[0] - loss).abs() < 1e-5);

    // The same box at batch 2 (the second image has none): the second
    // image's boxes learn "no object", the loss and gradient halve.
    let mut l = yolov3("mask: 0");
    let pred2 = Blob::<f32>::new(&[2, 6, 2, 2]).unwrap();
    let label2 = yolo_labels(2, &[[0.0, 0.3, 0.7, 0.2, 0.3]]);
    let top = run(l.as_mut(), &[&pred2, &label2]);
    top.mutable_cpu_diff().unwrap()[0] = 1.0;
    l.backward(&[&top], &[true, false], &[&pred2, &label2])
        .unwrap();
    let two = top.cpu_data().unwrap()[0];
    assert!((two - (loss + 4.0 * 0.25) / 2.0).abs() < 1e-5, "{two}");
    let diff2 = pred2.cpu_diff().unwrap().to_vec();
    assert!((diff2[2] - at(0, 2) / 2.0).abs() < 1e-6);
    assert_eq!(diff2[24 + 16 + 2], 0.25);
}

#[test]
fn yolov3_loss_leaves_a_box_whose_anchor_is_another_scales() {
    // The box's best anchor is 0; this scale holds anchor 1 alone, which
    // overlaps it by 0.11 < iou_thresh: nothing learns it here.
    let mut l = yolov3("mask: 1");
    let pred = Blob::<f32>::new(&[1, 6, 2, 2]).unwrap();
    let label = yolo_labels(1, &[[0.0, 0.3, 0.7, 0.2, 0.3]]);
    let top = run(l.as_mut(), &[&pred, &label]);
    // Every box: "no object" alone (its predicted box, 0.75 wide, is
    // far from the true box's overlap of 0.6).
    assert!((top.cpu_data().unwrap()[0] - 4.0 * 0.25).abs() < 1e-6);
    // iou_thresh 0.1 lets anchor 1 learn it too.
    let mut l = yolov3("mask: 1 iou_thresh: 0.1");
    let top = run(l.as_mut(), &[&pred, &label]);
    assert!(top.cpu_data().unwrap()[0] > 1.5);
}

#[test]
fn yolov3_overlap_losses_and_logistic_gradient() {
    let pred = Blob::from_vec(&[1, 6, 2, 2], values(24, 3, -1.0, 1.0)).unwrap();
    let label = yolo_labels(1, &[[0.0, 0.3, 0.7, 0.2, 0.3], [0.0, 0.8, 0.2, 0.3, 0.3]]);
    for loss in ["IOU", "GIOU", "DIOU", "CIOU"] {
        let mut l = yolov3(&format!("mask: 0 iou_loss: {loss}"));
        let top = run(l.as_mut(), &[&pred, &label]);
        top.mutable_cpu_diff().unwrap()[0] = 1.0;
        l.backward(&[&top], &[true, false], &[&pred, &label])
            .unwrap();
        let value = top.cpu_data().unwrap()[0];
        let diff = pred.cpu_diff().unwrap().to_vec();
        assert!(value.is_finite() && value > 0.0, "{loss}: {value}");
        assert!(diff.iter().all(|d| d.is_finite()), "{loss}: {diff:?}");
        // The box deltas are the overlap's gradient (times
        // iou_normalizer 0.25), clipped to max_delta 10.
        let coords: Vec<f32> = diff[..16].to_vec();
        assert!(coords.iter().any(|&d| d != 0.0), "{loss}");
        assert!(
            coords.iter().all(|d| d.abs() <= 10.0 * 0.25 + 1e-6),
            "{loss}"
        );
    }
    // use_logic_gradient: the deltas of x, y, objectness and classes
    // through the sigmoid, w's and h's as they are.
    let mut plain = yolov3("mask: 0");
    let mut logic = yolov3("mask: 0 use_logic_gradient: true object_scale: 1");
    let grads: Vec<Vec<f32>> = [&mut plain, &mut logic]
        .into_iter()
        .map(|l| {
            let top = run(l.as_mut(), &[&pred, &label]);
            top.mutable_cpu_diff().unwrap()[0] = 1.0;
            l.backward(&[&top], &[true, false], &[&pred, &label])
                .unwrap();
            pred.cpu_diff().unwrap().to_vec()
        })
        .collect();
    let x = pred.cpu_data().unwrap().to_vec();
    for (i, (&p, &g)) in grads[0].iter().zip(&grads[1]).enumerate() {
        let channel = i / 4;
        let want = if channel == 2 || channel == 3 {
            p
        } else {
            let s = 1.0 / (1.0 + (-x[i]).exp());
            p * s * (1.0 - s)
        };
        assert!((g - want).abs() < 1e-6, "value {i}: {g} against {want}");
    }
}

#[test]
fn yolov3_loss_refuses_what_it_cannot_read() {
    let text = |settings: &str| {
        format!(
            r#"name: "loss" type: "Yolov3" bottom: "p" bottom: "l" top: "loss"
               yolov3_param {{ num_class: 2 num: 2 biases: 4 biases: 4 biases: 8 biases: 8 {settings} }}"#
        )
    };
    let e = refused(&text("mask: 0"), &[&[1, 14, 2, 2], &[1, 1, 300, 5]]);
    assert!(
        e.contains("mask names one anchor for each of the num (2)"),
        "{e}"
    );
    let e = refused(&text("mask: 0 mask: 2"), &[&[1, 14, 2, 2], &[1, 1, 300, 5]]);
    assert!(e.contains("mask 2 names no anchor: biases hold 2"), "{e}");
    let e = refused(&text("mask: 0 mask: 1"), &[&[1, 12, 2, 2], &[1, 1, 300, 5]]);
    assert!(
        e.contains("N x 14 x H x W (2 boxes of 5 + 2 classes a cell)"),
        "{e}"
    );
    let e = refused(&text("mask: 0 mask: 1"), &[&[1, 14, 2, 2], &[1, 1, 3, 8]]);
    assert!(
        e.contains("yolo_data_type: 1") && e.contains("1 x 1 x 300 x 5"),
        "{e}"
    );
    // A class beyond num_class, or the background's -1, names the row.
    let mut l = yolov3("mask: 0");
    let pred = Blob::<f32>::new(&[1, 6, 2, 2]).unwrap();
    for class in [1.0, -1.0] {
        let label = yolo_labels(1, &[[0.0, 0.5, 0.5, 0.2, 0.2], [class, 0.3, 0.7, 0.2, 0.3]]);
        let mut top = Blob::default();
        let shapes = l.reshape(&[&pred, &label], &[&top]).unwrap();
        top.reshape(&shapes[0].dims).unwrap();
        let e = l
            .forward(&[&pred, &label], &[&top])
            .unwrap_err()
            .to_string();
        assert!(e.contains("image 0's label row 1 has class"), "{e}");
    }
}

#[test]
fn region_loss_gives_a_true_box_to_its_cell_and_best_anchor() {
    // Two classes, two boxes a cell over a 2 x 2 map, anchors of 0.5
    // and 1.5 cells (0.25 and 0.75 of the image).
    let mut l = layer::<f32>(
        r#"name: "loss" type: "RegionLoss" bottom: "pred" bottom: "label" top: "loss"
           region_loss_param { num_class: 2 num: 2 thresh: 0.6 object_scale: 5 noobject_scale: 1
             class_scale: 1 coord_scale: 1 biases: 0.5 biases: 0.5 biases: 1.5 biases: 1.5 }"#,
    );
    // Zeros: objectness and x, y sigmoids 0.5, class probabilities 0.5.
    let pred = Blob::<f32>::new(&[1, 14, 2, 2]).unwrap();
    let label = yolo_labels(1, &[[1.0, 0.3, 0.7, 0.2, 0.3]]);
    let top = run(l.as_mut(), &[&pred, &label]);
    top.mutable_cpu_diff().unwrap()[0] = 1.0;
    l.backward(&[&top], &[true, false], &[&pred, &label])
        .unwrap();
    let diff = pred.cpu_diff().unwrap().to_vec();
    // Box n's channel c of cell `cell`.
    let at = |n: usize, c: usize, cell: usize| diff[(n * 7 + c) * 4 + cell];
    // No box's prediction overlaps the true box by 0.6: "no object"
    // everywhere but where the box is given, 0.5 · 0.25.
    for n in 0..2 {
        for cell in 0..4 {
            if (n, cell) != (0, 2) {
                assert_eq!(at(n, 4, cell), 0.125, "box {n} cell {cell}");
            }
        }
    }
    // Anchor 0 in cell (0, 1): x and y through the sigmoid, rescore.
    let codes = [
        -(0.6 - 0.5) * 0.25,
        -(0.4 - 0.5) * 0.25,
        -(0.8f32).ln(),
        -(1.2f32).ln(),
    ];
    for (k, want) in codes.iter().enumerate() {
        assert!((at(0, k, 2) - want).abs() < 1e-6, "{k}: {}", at(0, k, 2));
    }
    // Objectness towards the predicted box's overlap, 0.0394 / 0.0831.
    let iou = 0.039375f32 / 0.083125;
    let obj = -5.0 * (iou - 0.5) * 0.25;
    assert!((at(0, 4, 2) - obj).abs() < 1e-6, "{}", at(0, 4, 2));
    assert_eq!([at(0, 5, 2), at(0, 6, 2)], [0.5, -0.5]);
    let squares =
        7.0 * 0.125f32.powi(2) + codes.iter().map(|c| c * c).sum::<f32>() + obj * obj + 0.5;
    let loss = top.cpu_data().unwrap()[0];
    assert!((loss - squares).abs() < 1e-5, "{loss} against {squares}");
}

#[test]
fn region_loss_refuses_what_it_cannot_read() {
    let text = |settings: &str| {
        format!(
            r#"name: "loss" type: "RegionLoss" bottom: "p" bottom: "l" top: "loss"
               region_loss_param {{ num_class: 2 num: 2 {settings} }}"#
        )
    };
    let anchors = "biases: 1 biases: 1 biases: 2 biases: 2";
    let e = refused(
        &text("biases: 1 biases: 1"),
        &[&[1, 14, 2, 2], &[1, 1, 300, 5]],
    );
    assert!(
        e.contains("each of the num (2) anchors, not 2 values"),
        "{e}"
    );
    let e = refused(
        &text(&format!("coords: 5 {anchors}")),
        &[&[1, 14, 2, 2], &[1, 1, 300, 5]],
    );
    assert!(e.contains("coords 5"), "{e}");
    let e = refused(&text(anchors), &[&[1, 14, 2, 3], &[1, 1, 300, 5]]);
    assert!(
        e.contains("N x 14 x S x S") && e.contains("a square map"),
        "{e}"
    );
    let e = refused(&text(anchors), &[&[2, 14, 2, 2], &[1, 1, 300, 5]]);
    assert!(e.contains("2 x 1 x 300 x 5"), "{e}");
}

fn logit(p: f32) -> f32 {
    (p / (1.0 - p)).ln()
}

fn filled(shape: &[usize], values: &[f32]) -> Blob<f32> {
    let b = Blob::<f32>::new(shape).unwrap();
    b.mutable_cpu_data().unwrap().copy_from_slice(values);
    b
}

#[test]
fn yoloseg_deltas_are_the_scaled_sigmoid_errors() {
    let mut l = layer::<f32>(
        r#"name: "seg" type: "YoloSeg" bottom: "pred" bottom: "seg_label" top: "loss"
           yolo_seg_param { object_scale: 0.2 }"#,
    );
    // Two images, one class, two pixels.
    let x = filled(&[2, 1, 1, 2], &[logit(0.75), logit(0.5), logit(0.25), 0.0]);
    let y = filled(&[2, 1, 1, 2], &[1.0, 0.0, 0.0, 1.0]);
    let top = run(l.as_mut(), &[&x, &y]);
    let deltas = [0.2 * -0.25, 0.2 * 0.5, 0.2 * 0.25, 0.2 * -0.5];
    let loss: f32 = deltas.iter().map(|d| d * d).sum::<f32>() / 2.0;
    assert!((top.to_vec().unwrap()[0] - loss).abs() < 1e-6);
    top.mutable_cpu_diff().unwrap()[0] = 3.0;
    l.backward(&[&top], &[true, false], &[&x, &y]).unwrap();
    for (g, d) in x.cpu_diff().unwrap().iter().zip(deltas) {
        // Not through the sigmoid: the delta times the top's gradient
        // over the batch.
        assert!((g - 1.5 * d).abs() < 1e-6, "{g} {d}");
    }
    let e = l
        .backward(&[&top], &[true, true], &[&x, &y])
        .unwrap_err()
        .to_string();
    assert!(e.contains("cannot backpropagate to label inputs"), "{e}");
}

#[test]
fn yoloseg_weighs_a_class_by_its_share_of_the_pixels() {
    let mut l = layer::<f32>(
        r#"name: "seg" type: "YoloSeg" bottom: "pred" bottom: "seg_label" bottom: "counts"
           top: "loss" yolo_seg_param { object_scale: 1 }"#,
    );
    // One image, two classes of four pixels; class 0 covers one pixel
    // (its share r = 1 / 3 of the others), class 1 none.
    let x = filled(&[1, 2, 2, 2], &[0.0; 8]);
    let y = filled(&[1, 2, 2, 2], &[1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
    let counts = filled(&[1, 2], &[1.0, 0.0]);
    let top = run(l.as_mut(), &[&x, &y, &counts]);
    top.mutable_cpu_diff().unwrap()[0] = 1.0;
    l.backward(&[&top], &[true, false, false], &[&x, &y, &counts])
        .unwrap();
    let g = x.cpu_diff().unwrap().to_vec();
    // The class's pixel: (0.5 - 1) * (2 - 1/3); the others 0.5 * 1.
    assert!((g[0] - (-0.5 * (2.0 - 1.0 / 3.0))).abs() < 1e-6, "{g:?}");
    assert!(g[1..].iter().all(|&v| (v - 0.5).abs() < 1e-6), "{g:?}");
    let loss = (0.5f32 * (2.0 - 1.0 / 3.0)).powi(2) + 7.0 * 0.25;
    assert!((top.to_vec().unwrap()[0] - loss).abs() < 1e-5);
    let e = refused(
        r#"name: "seg" type: "YoloSeg" bottom: "p" bottom: "l" bottom: "c" top: "loss""#,
        &[&[1, 2, 2, 2], &[1, 2, 2, 2], &[1, 3]],
    );
    assert!(e.contains("1 x 2, not [1, 3]"), "{e}");
    let e = refused(
        r#"name: "seg" type: "YoloSeg" bottom: "p" bottom: "l" top: "loss""#,
        &[&[1, 2, 2, 2], &[1, 2, 4, 4]],
    );
    assert!(
        e.contains("the label planes are [1, 2, 4, 4] but the predictions [1, 2, 2, 2]"),
        "{e}"
    );
}

#[test]
fn segmentation_evaluate_gives_each_class_its_overlap() {
    let mut l = layer::<f32>(
        r#"name: "eval" type: "SegmentationEvaluate" bottom: "sigmoid" bottom: "seg_label"
           top: "eval" segmentation_evaluate_param { num_classes: 2 threshold: 0.3 }"#,
    );
    // Class 0: truth at pixels 0 and 1, found at 1 and 2 (0.3 is not
    // above the threshold): 1 / 3. Class 1: truth at 3, nothing found.
    let p = filled(&[1, 2, 2, 2], &[0.1, 0.9, 0.31, 0.3, 0.0, 0.0, 0.0, 0.2]);
    let y = filled(&[1, 2, 2, 2], &[1.0, 0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]);
    let top = run(l.as_mut(), &[&p, &y]);
    assert_eq!(top.shape(), [1, 1, 1, 2]);
    assert_eq!(top.to_vec().unwrap(), [1.0 / 3.0, 0.0]);
    // A second image adds its pixels to each class's counts.
    let p2 = filled(
        &[2, 2, 2, 2],
        &[[0.1, 0.9, 0.31, 0.3, 0.0, 0.0, 0.0, 0.2], [0.9; 8]].concat(),
    );
    let y2 = filled(
        &[2, 2, 2, 2],
        &[[1.0, 0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0], [1.0; 8]].concat(),
    );
    let top = run(l.as_mut(), &[&p2, &y2]);
    assert_eq!(top.to_vec().unwrap(), [5.0 / 7.0, 4.0 / 5.0]);
    let e = LayerRegistry::<f32>::with_caffe_layers()
        .build_text(r#"name: "eval" type: "SegmentationEvaluate" bottom: "a" bottom: "b" top: "e""#)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("Must provide num_classes"), "{e}");
}

#[test]
fn assisted_excitation_adds_the_map_under_the_boxes_along_its_schedule() {
    let mut l = layer::<f32>(
        r#"name: "AE" type: "AssistedExcitation" bottom: "f" bottom: "label" bottom: "mean"
           top: "AE""#,
    );
    // Two images of two channels over a 4 x 4 map. Image 0's box covers
    // x 0.25..0.75 (cells 1 and 2; 3 * 0.75 + 0.95 truncates to 3) and
    // y 0..0.5 (cells 0 and 1); image 1's a sliver at (0.9, 0.5): column
    // 3, and row 1 (its top edge, 0.495 * 4, truncates to 1; its bottom,
    // 0.505 * 4 + 0.95, to 2).
    let features = filled(&[2, 2, 4, 4], &values(64, 7, -1.0, 1.0));
    let mut rows = vec![[0.0f32; 5]; 600];
    rows[0] = [0.0, 0.5, 0.25, 0.5, 0.5];
    rows[300] = [0.0, 0.9, 0.5, 0.01, 0.01];
    let labels = filled(&[2, 1, 300, 5], rows.as_flattened());
    let map = filled(&[2, 4, 4], &values(32, 8, 0.0, 2.0));
    let covered = |b: usize, cell: usize| {
        let (y, x) = (cell / 4, cell % 4);
        match b {
            0 => (1..3).contains(&x) && y < 2,
            _ => x == 3 && y == 1,
        }
    };
    let expect = |alpha: f32| -> Vec<f32> {
        let (f, m) = (features.to_vec().unwrap(), map.to_vec().unwrap());
        (0..64)
            .map(|i| {
                let (b, cell) = (i / 32, i % 16);
                f[i] + if covered(b, cell) {
                    alpha * m[b * 16 + cell]
                } else {
                    0.0
                }
            })
            .collect()
    };
    // Outside a solver: iteration 0's excitation, alpha 1.
    let top = run(l.as_mut(), &[&features, &labels, &map]);
    assert_eq!(top.to_vec().unwrap(), expect(1.0));
    // A third of the way through training: cos(pi/2 * 1/3 / 0.75).
    l.set_iteration(100, 300);
    let top = run(l.as_mut(), &[&features, &labels, &map]);
    let alpha = ((100.0f32 / 225.0) as f64 * std::f64::consts::PI / 2.0).cos() as f32;
    for (got, want) in top.to_vec().unwrap().iter().zip(expect(alpha)) {
        assert!((got - want).abs() < 1e-6, "{got} {want}");
    }
    // Past three quarters, none.
    l.set_iteration(250, 300);
    let top = run(l.as_mut(), &[&features, &labels, &map]);
    assert_eq!(top.to_vec().unwrap(), features.to_vec().unwrap());
    // The gradient passes to the features alone.
    top.mutable_cpu_diff()
        .unwrap()
        .copy_from_slice(&values(64, 9, -1.0, 1.0));
    map.mutable_cpu_diff().unwrap().fill(5.0);
    l.backward(&[&top], &[true, false, true], &[&features, &labels, &map])
        .unwrap();
    assert_eq!(
        features.cpu_diff().unwrap().to_vec(),
        values(64, 9, -1.0, 1.0)
    );
    assert!(map.cpu_diff().unwrap().iter().all(|&v| v == 0.0));
    let e = refused(
        r#"name: "AE" type: "AssistedExcitation" bottom: "f" bottom: "l" bottom: "m" top: "AE""#,
        &[&[2, 2, 4, 4], &[2, 1, 300, 5], &[2, 4, 3]],
    );
    assert!(
        e.contains("one value a cell of each image, 2 x 4 x 4, not [2, 4, 3]"),
        "{e}"
    );
}
