//! The layers of Caffe's catalogue beyond the classic ones (Im2col, SPP)
//! and of the forks the public models use (Interp, both BNs,
//! ShuffleChannel, both Upsamples and pooling's mask, ROIPooling, Axpy,
//! ReLU6, the depthwise convolutions, `ceil_mode`, Dropout's
//! `scale_train`): their outputs against the forks' and Caffe's
//! arithmetic written out here, their backward passes against central
//! differences.

use blob_layers::DynLayer;
use blob_layers::check::GradientChecker;
use blob_layers::net::{Net, NetState};
use blob_layers::registry::LayerRegistry;
use blob_runtime::Blob;

const CHECKER: GradientChecker = GradientChecker {
    step: 1e-5,
    threshold: 1e-6,
};

fn layer(text: &str) -> Box<dyn DynLayer<f64>> {
    LayerRegistry::with_caffe_layers()
        .build_text(text)
        .unwrap_or_else(|e| panic!("{text}: {e}"))
}

/// Distinct values in `[-1, 1]`, no two equal (MAX ties).
fn input(shape: &[usize], seed: u64) -> Blob<f64> {
    let b = Blob::new(shape).unwrap();
    blob_kernels::cpu::set_seed(seed);
    blob_kernels::cpu::uniform(-1.0, 1.0, &mut b.mutable_cpu_data().unwrap()).unwrap();
    for (i, v) in b.mutable_cpu_data().unwrap().iter_mut().enumerate() {
        *v += i as f64 * 1e-5;
    }
    b
}

fn run(layer: &mut dyn DynLayer<f64>, bottoms: &[&Blob<f64>]) -> Blob<f64> {
    let mut top = Blob::default();
    let shapes = layer.reshape(bottoms, &[&top]).unwrap();
    top.reshape(&shapes[0].dims).unwrap();
    layer.forward(bottoms, &[&top]).unwrap();
    top
}

fn gradients(text: &str, bottoms: &[Blob<f64>]) {
    blob_kernels::cpu::set_seed(11);
    let mut l = layer(text);
    let report = CHECKER
        .check(l.as_mut(), bottoms)
        .unwrap_or_else(|e| panic!("{text}: {e}"));
    assert!(report.checked > 0, "{text}");
}

/// The fork's `caffe_cpu_interp2`, written out for one plane.
fn interp_reference(x: &[f64], (h, w): (usize, usize), (oh, ow): (usize, usize)) -> Vec<f64> {
    let ratio = |from: usize, to: usize| {
        if to > 1 {
            (from - 1) as f32 / (to - 1) as f32
        } else {
            0.0
        }
    };
    let (rh, rw) = (ratio(h, oh), ratio(w, ow));
    let mut out = Vec::new();
    for i in 0..oh {
        let hr = rh * i as f32;
        let h0 = hr as usize;
        let hp = usize::from(h0 < h - 1);
        let hl = f64::from(hr - h0 as f32);
        for j in 0..ow {
            let wr = rw * j as f32;
            let w0 = wr as usize;
            let wp = usize::from(w0 < w - 1);
            let wl = f64::from(wr - w0 as f32);
            let at = |r: usize, c: usize| x[r * w + c];
            out.push(
                (1.0 - hl) * ((1.0 - wl) * at(h0, w0) + wl * at(h0, w0 + wp))
                    + hl * ((1.0 - wl) * at(h0 + hp, w0) + wl * at(h0 + hp, w0 + wp)),
            );
        }
    }
    out
}

#[test]
fn interp_resizes_with_corners_aligned() {
    let x = input(&[2, 3, 4, 5], 1);
    for (text, size) in [
        ("interp_param { height: 9 width: 8 }", (9, 8)),
        ("interp_param { zoom_factor: 3 }", (10, 13)),
        ("interp_param { shrink_factor: 2 }", (2, 3)),
        ("interp_param { height: 1 width: 1 }", (1, 1)),
    ] {
        let mut l = layer(&format!("type: 'Interp' {text}"));
        let y = run(l.as_mut(), &[&x]);
        assert_eq!(y.shape(), [2, 3, size.0, size.1], "{text}");
        let xs = x.to_vec().unwrap();
        let ys = y.to_vec().unwrap();
        for (plane, out) in xs.chunks(20).zip(ys.chunks(size.0 * size.1)) {
            let want = interp_reference(plane, (4, 5), size);
            for (a, b) in out.iter().zip(&want) {
                assert!((a - b).abs() < 1e-12, "{text}: {a} vs {b}");
            }
        }
    }
    // Corners land on corners.
    let mut l = layer("type: 'Interp' interp_param { zoom_factor: 2 }");
    let y = run(l.as_mut(), &[&x]).to_vec().unwrap();
    let xs = x.to_vec().unwrap();
    assert_eq!((y[0], y[6], y[7 * 9 - 1]), (xs[0], xs[3], xs[19]));
    gradients(
        "type: 'Interp' interp_param { height: 7 width: 3 }",
        &[input(&[1, 2, 4, 5], 2)],
    );
    gradients(
        "type: 'Interp' interp_param { zoom_factor: 2 pad_beg: -1 pad_end: -1 }",
        &[input(&[1, 2, 5, 6], 3)],
    );
}

#[test]
fn interp_refuses_two_sizes_and_padding() {
    let x = input(&[1, 1, 4, 4], 1);
    let mut both = layer("type: 'Interp' interp_param { zoom_factor: 2 height: 3 width: 3 }");
    let err = both
        .reshape(&[&x], &[&Blob::default()])
        .unwrap_err()
        .to_string();
    assert!(err.contains("given 2 ways"), "{err}");
    let err = LayerRegistry::<f64>::with_caffe_layers()
        .build_text("type: 'Interp' interp_param { zoom_factor: 2 pad_beg: 1 }")
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("only cropping"), "{err}");
    // A second bottom gives the size.
    let mut like = layer("type: 'Interp'");
    let shapes = like
        .reshape(
            &[&x, &Blob::new(&[1, 7, 6, 9]).unwrap()],
            &[&Blob::default()],
        )
        .unwrap();
    assert_eq!(shapes[0].dims, [1, 1, 6, 9]);
}

#[test]
fn bn_uses_its_moving_statistics_in_test_and_batch_statistics_in_train() {
    let x = input(&[2, 3, 2, 2], 4);
    let blobs = |l: &mut Box<dyn DynLayer<f64>>, values: [[f64; 3]; 4]| {
        for (b, v) in l.blobs_mut().iter_mut().zip(values) {
            b.mutable_cpu_data().unwrap().copy_from_slice(&v);
        }
    };
    let stats = [
        [2.0, -1.0, 0.5],
        [0.1, 0.2, 0.3],
        [0.5, -0.5, 0.0],
        [4.0, 1.0, 0.25],
    ];
    let mut test = layer("type: 'BN' phase: TEST bn_param { eps: 0 }");
    run(test.as_mut(), &[&x]);
    assert_eq!(test.blobs().len(), 4);
    assert_eq!(test.blobs()[0].shape(), [1, 3, 1, 1]);
    blobs(&mut test, stats);
    let y = run(test.as_mut(), &[&x]).to_vec().unwrap();
    for (i, (&v, &out)) in x.to_vec().unwrap().iter().zip(&y).enumerate() {
        let c = (i / 4) % 3;
        let want = stats[0][c] * (v - stats[2][c]) / stats[3][c].sqrt() + stats[1][c];
        assert!((out - want).abs() < 1e-12, "{out} vs {want}");
    }
    // Training: the batch's statistics, and the moving ones follow
    // m = 0.9 m + 0.1 batch.
    let mut train = layer(
        "type: 'BN' phase: TRAIN bn_param { eps: 0 slope_filler { type: 'constant' value: 1 } }",
    );
    let y = run(train.as_mut(), &[&x]).to_vec().unwrap();
    let xs = x.to_vec().unwrap();
    for c in 0..3 {
        let values: Vec<f64> = (0..2)
            .flat_map(|n| xs[(n * 3 + c) * 4..][..4].to_vec())
            .collect();
        let mean = values.iter().sum::<f64>() / 8.0;
        let var = values.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / 8.0;
        assert!((train.blobs()[2].to_vec().unwrap()[c] - 0.1 * mean).abs() < 1e-12);
        assert!((train.blobs()[3].to_vec().unwrap()[c] - 0.1 * var).abs() < 1e-12);
        let out = y[c * 4];
        assert!((out - (xs[c * 4] - mean) / var.sqrt()).abs() < 1e-9);
    }
    let filled = "slope_filler { type: 'gaussian' std: 1 } bias_filler { type: 'gaussian' std: 1 }";
    gradients(
        &format!("type: 'BN' phase: TRAIN bn_param {{ {filled} }}"),
        &[input(&[2, 3, 2, 3], 5)],
    );
    let frozen = format!("type: 'BN' phase: TRAIN bn_param {{ frozen: true {filled} }}");
    gradients(&frozen, &[input(&[2, 3, 2, 3], 6)]);
    let frozen = layer(&frozen);
    assert!(!frozen.learns_param(0) && !frozen.learns_param(2));
    assert!(layer("type: 'BN'").learns_param(1) && !layer("type: 'BN'").learns_param(3));
}

#[test]
fn shuffle_channel_transposes_groups() {
    let x = input(&[2, 6, 1, 2], 7);
    let mut l = layer("type: 'ShuffleChannel' shuffle_channel_param { group: 3 }");
    let y = run(l.as_mut(), &[&x]).to_vec().unwrap();
    let xs = x.to_vec().unwrap();
    // Channels (0 1 | 2 3 | 4 5) become (0 2 4 1 3 5).
    for (n, order) in [(0usize, [0usize, 2, 4, 1, 3, 5]), (1, [0, 2, 4, 1, 3, 5])] {
        for (out, &from) in order.iter().enumerate() {
            let at = |c: usize| (n * 6 + c) * 2;
            assert_eq!(y[at(out)..at(out) + 2], xs[at(from)..at(from) + 2]);
        }
    }
    gradients(
        "type: 'ShuffleChannel' shuffle_channel_param { group: 2 }",
        &[input(&[1, 4, 2, 2], 8)],
    );
    let mut odd = layer("type: 'ShuffleChannel' shuffle_channel_param { group: 4 }");
    let err = odd
        .reshape(&[&x], &[&Blob::default()])
        .unwrap_err()
        .to_string();
    assert!(err.contains("divisible by group 4"), "{err}");
}

#[test]
fn upsample_repeats_each_value() {
    let x = Blob::from_vec(&[1, 1, 2, 2], vec![1.0, 2.0, 3.0, 4.0]).unwrap();
    let mut l = layer("type: 'Upsample' upsample_param { scale: 2 }");
    let y = run(l.as_mut(), &[&x]);
    assert_eq!(y.shape(), [1, 1, 4, 4]);
    assert_eq!(
        y.to_vec().unwrap(),
        [
            1., 1., 2., 2., 1., 1., 2., 2., 3., 3., 4., 4., 3., 3., 4., 4.
        ]
    );
    gradients(
        "type: 'Upsample' upsample_param { scale: 3 }",
        &[input(&[1, 2, 2, 3], 9)],
    );
    // Two bottoms make it SegNet's unpooling, which needs a real scale.
    let err = LayerRegistry::<f64>::with_caffe_layers()
        .build_text("type: 'Upsample' bottom: 'x' bottom: 'mask' upsample_param { scale: 1 }")
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("scales above 1"), "{err}");
}

#[test]
fn axpy_gates_and_adds() {
    let a = Blob::from_vec(&[1, 2, 1, 1], vec![2.0, -1.0]).unwrap();
    let x = Blob::from_vec(&[1, 2, 1, 2], vec![1.0, 2.0, 3.0, 4.0]).unwrap();
    let y = Blob::from_vec(&[1, 2, 1, 2], vec![0.5, 0.5, 1.0, 1.0]).unwrap();
    let mut l = layer("type: 'Axpy'");
    let out = run(l.as_mut(), &[&a, &x, &y]);
    assert_eq!(out.to_vec().unwrap(), [2.5, 4.5, -2.0, -3.0]);
    gradients(
        "type: 'Axpy'",
        &[
            input(&[2, 3, 1, 1], 10),
            input(&[2, 3, 2, 2], 11),
            input(&[2, 3, 2, 2], 12),
        ],
    );
}

#[test]
fn roi_pooling_takes_each_bins_maximum() {
    let x = input(&[2, 2, 6, 5], 13);
    // Item 1, x 1..3, y 0..4 at scale 1/2: pixels (0..2, 0..2) of the map.
    let rois = Blob::from_vec(
        &[2, 5],
        vec![1.0, 1.0, 0.0, 3.0, 4.0, 0.0, -40.0, -40.0, -30.0, -30.0],
    )
    .unwrap();
    let mut l = layer(
        "type: 'ROIPooling' roi_pooling_param { pooled_h: 2 pooled_w: 2 spatial_scale: 0.5 }",
    );
    let y = run(l.as_mut(), &[&x, &rois]);
    assert_eq!(y.shape(), [2, 2, 2, 2]);
    let xs = x.to_vec().unwrap();
    let ys = y.to_vec().unwrap();
    // round(0.5) = 1 (half away from zero): columns 1..2, rows 0..2,
    // 2 x 3 pixels in 2 x 2 bins: rows {0,1}, {1,2}; columns {1}, {2}.
    let at = |c: usize, r: usize, col: usize| xs[((2 + c) * 6 + r) * 5 + col];
    for c in 0..2 {
        let max = |rows: [usize; 2], col: usize| at(c, rows[0], col).max(at(c, rows[1], col));
        assert_eq!(
            ys[c * 4..c * 4 + 4],
            [
                max([0, 1], 1),
                max([0, 1], 2),
                max([1, 2], 1),
                max([1, 2], 2)
            ]
        );
    }
    // A region outside the map pools nothing: zeros.
    assert!(ys[8..].iter().all(|&v| v == 0.0));
    let rois = Blob::from_vec(&[1, 5], vec![0.0, 0.0, 0.0, 8.0, 9.0]).unwrap();
    gradients(
        "type: 'ROIPooling' roi_pooling_param { pooled_h: 3 pooled_w: 2 spatial_scale: 1 }",
        &[input(&[1, 2, 6, 5], 14), rois],
    );
    let bad = Blob::from_vec(&[1, 5], vec![2.0, 0.0, 0.0, 1.0, 1.0]).unwrap();
    let mut l = layer("type: 'ROIPooling' roi_pooling_param { pooled_h: 1 pooled_w: 1 }");
    let mut top = Blob::default();
    let shapes = l.reshape(&[&x, &bad], &[&top]).unwrap();
    top.reshape(&shapes[0].dims).unwrap();
    let err = l.forward(&[&x, &bad], &[&top]).unwrap_err().to_string();
    assert!(
        err.contains("region 0 names item 2; the features hold 2"),
        "{err}"
    );
}

#[test]
fn relu6_and_depthwise_convolution_are_caffes_clip_and_grouped_convolution() {
    let x = Blob::from_vec(&[1, 4], vec![-1.0, 3.0, 6.5, 6.0]).unwrap();
    let y = run(layer("type: 'ReLU6'").as_mut(), &[&x]);
    assert_eq!(y.to_vec().unwrap(), [0.0, 3.0, 6.0, 6.0]);
    let x = input(&[1, 3, 4, 4], 15);
    let filled =
        "weight_filler { type: 'gaussian' std: 1 } bias_filler { type: 'gaussian' std: 1 }";
    for kind in ["DepthwiseConvolution", "ConvolutionDepthwise"] {
        blob_kernels::cpu::set_seed(3);
        let mut depthwise = layer(&format!(
            "type: '{kind}' convolution_param {{ num_output: 3 kernel_size: 3 pad: 1 {filled} }}"
        ));
        let a = run(depthwise.as_mut(), &[&x]).to_vec().unwrap();
        assert_eq!(depthwise.blobs()[0].shape(), [3, 1, 3, 3], "{kind}");
        blob_kernels::cpu::set_seed(3);
        let mut grouped = layer(&format!(
            "type: 'Convolution' convolution_param {{ num_output: 3 group: 3 kernel_size: 3 pad: 1 {filled} }}"
        ));
        assert_eq!(a, run(grouped.as_mut(), &[&x]).to_vec().unwrap(), "{kind}");
    }
}

#[test]
fn ceil_mode_false_rounds_the_pooled_size_down() {
    let x = input(&[1, 1, 6, 6], 16);
    for (text, size) in [("", 3), ("ceil_mode: true", 3), ("ceil_mode: false", 2)] {
        let mut l = layer(&format!(
            "type: 'Pooling' pooling_param {{ kernel_size: 3 stride: 2 {text} }}"
        ));
        let y = run(l.as_mut(), &[&x]);
        assert_eq!(y.shape(), [1, 1, size, size], "{text}");
    }
}

#[test]
fn a_net_of_fork_layers_reads_its_prototxt_and_round_trips_its_bytes() {
    let text = "
        input: 'x' input_shape { dim: 1 dim: 4 dim: 3 dim: 3 }
        layer { name: 'up' type: 'Upsample' bottom: 'x' top: 'up' upsample_param { scale: 2 } }
        layer { name: 'shuffle' type: 'ShuffleChannel' bottom: 'up' top: 'sh' shuffle_channel_param { group: 2 } }
        layer { name: 'interp' type: 'Interp' bottom: 'sh' top: 'y' interp_param { shrink_factor: 2 } }
        layer { name: 'pool' type: 'Pooling' bottom: 'y' top: 'p' pooling_param { kernel_size: 2 stride: 2 ceil_mode: false } }";
    let net = Net::<f32>::from_prototxt(text, NetState::test()).unwrap();
    assert_eq!(net.blob("y").unwrap().shape(), [1, 4, 3, 3]);
    assert_eq!(net.blob("p").unwrap().shape(), [1, 4, 1, 1]);
    let schemas = LayerRegistry::<f32>::with_caffe_layers().schemas().clone();
    let tree = blob_proto::TextMessage::parse(text).unwrap();
    let param = blob_proto::ParamMessage::from_text(schemas.net_parameter(), &tree).unwrap();
    let back =
        blob_proto::ParamMessage::decode(schemas.net_parameter(), &param.encode_to_vec()).unwrap();
    assert_eq!(back.encode_to_vec(), param.encode_to_vec());
    let interp = back
        .messages("layer")
        .nth(2)
        .unwrap()
        .message("interp_param")
        .unwrap()
        .int("shrink_factor");
    assert_eq!(interp, 2);
    // A misspelt fork field names its line and column.
    let err = Net::<f32>::from_prototxt(&text.replace("shrink_factor", "shrink"), NetState::test())
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("line 5") && err.contains("InterpParameter has no field named shrink"),
        "{err}"
    );
    // An unknown type names its line.
    let err = Net::<f32>::from_prototxt(&text.replace("'Interp'", "'Interpp'"), NetState::test())
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("line 5, layer 'interp'") && err.contains("nearest known: Interp"),
        "{err}"
    );
}

#[test]
fn a_python_layer_other_than_py_faster_rcnns_proposals_is_refused_by_name() {
    let err = LayerRegistry::<f64>::with_caffe_layers()
        .build_text("type: 'Python' python_param { module: 'my.data' layer: 'Loader' }")
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("my.data.Loader") && err.contains("rpn.proposal_layer"),
        "{err}"
    );
    let err = LayerRegistry::<f64>::with_caffe_layers()
        .build_text("type: 'Python' python_param { module: 'rpn.proposal_layer' layer: 'ProposalLayer' param_str: \"'feat_strid': 16\" }")
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("'feat_strid'"), "{err}");
}

/// ENet's `spatial_dropout.SpatialDropoutLayer` (a Python layer):
/// whole maps kept and scaled by 1 / (1 - p) or zeroed, in training as
/// `param_str`'s phase says; the same maps in the backward pass; any
/// other phase scales every value (the fork's layer does).
#[test]
fn enets_spatial_dropout_drops_whole_maps() {
    let python = |param_str: &str| {
        format!(
            "type: 'Python' python_param {{ module: 'spatial_dropout' \
             layer: 'SpatialDropoutLayer' param_str: \"{param_str}\" }}"
        )
    };
    let x = input(&[2, 16, 3, 3], 5);
    let mut train = layer(&python("{'phase': 'TRAIN', 'p': '0.5'}"));
    blob_kernels::cpu::set_seed(3);
    let y = run(train.as_mut(), &[&x]);
    let (xs, ys) = (x.to_vec().unwrap(), y.to_vec().unwrap());
    let mut kept = 0;
    for (plane, (xp, yp)) in xs.chunks(9).zip(ys.chunks(9)).enumerate() {
        let scaled: Vec<f64> = xp.iter().map(|v| v * 2.0).collect();
        if yp == scaled.as_slice() {
            kept += 1;
        } else {
            assert!(yp.iter().all(|&v| v == 0.0), "map {plane}: {yp:?}");
        }
    }
    assert!(kept > 4 && kept < 28, "{kept} of 32 maps kept");
    // The backward pass drops the maps the forward pass dropped.
    y.mutable_cpu_diff().unwrap().fill(1.0);
    train.backward(&[&y], &[true], &[&x]).unwrap();
    let dx = x.cpu_diff().unwrap().to_vec();
    for (yp, dp) in ys.chunks(9).zip(dx.chunks(9)) {
        let want = if yp.iter().all(|&v| v == 0.0) {
            0.0
        } else {
            2.0
        };
        assert!(dp.iter().all(|&d| d == want), "{dp:?}");
    }
    let mut test = layer(&python("{'phase': 'TEST', 'p': '0.2'}"));
    let y = run(test.as_mut(), &[&x]);
    let want: Vec<f64> = xs.iter().map(|v| v * 1.25).collect();
    assert_eq!(y.to_vec().unwrap(), want);
    gradients(&python("{'phase': 'TEST', 'p': 0.2}"), &[x]);
    for (param_str, what) in [
        ("{'phase': 'TRAIN', 'p': '1'}", "between 0 and 1"),
        ("{'phase': 'TRAIN'}", "must give 'phase' and 'p'"),
        ("{'phase': 'TRAIN', 'p': 0.1, 'q': 2}", "names 'q'"),
        ("'phase': 'TRAIN'", "is not a Python dict"),
    ] {
        let err = LayerRegistry::<f64>::with_caffe_layers()
            .build_text(&python(param_str))
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains(what), "{param_str}: {err}");
    }
}

#[test]
fn dropout_without_scale_train_scales_in_test_not_in_train() {
    let x = input(&[4, 50], 17);
    let text = "dropout_param { dropout_ratio: 0.25 scale_train: false }";
    let test = run(
        layer(&format!("type: 'Dropout' phase: TEST {text}")).as_mut(),
        &[&x],
    );
    for (y, v) in test.to_vec().unwrap().iter().zip(x.to_vec().unwrap()) {
        assert!((y - v * 0.75).abs() < 1e-12, "{y} vs {v}");
    }
    let train = run(
        layer(&format!("type: 'Dropout' phase: TRAIN {text}")).as_mut(),
        &[&x],
    );
    let (mut kept, xs) = (0, x.to_vec().unwrap());
    for (y, v) in train.to_vec().unwrap().iter().zip(&xs) {
        assert!(*y == 0.0 || y == v, "{y} vs {v}");
        kept += usize::from(y == v);
    }
    assert!((100..200).contains(&kept), "{kept} of 200 kept");
}

#[test]
fn max_pooling_masks_unpool_back_where_the_maxima_were() {
    let x = Blob::from_vec(
        &[1, 1, 4, 4],
        vec![
            1., 5., 2., 0., //
            3., 4., 8., 1., //
            0., 9., 6., 7., //
            2., 1., 3., 6.,
        ],
    )
    .unwrap();
    let mut pool = layer("type: 'Pooling' pooling_param { pool: MAX kernel_size: 2 stride: 2 }");
    let (top, mask) = (Blob::default(), Blob::default());
    let shapes = pool.reshape(&[&x], &[&top, &mask]).unwrap();
    assert_eq!(shapes.len(), 2);
    let (mut top, mut mask) = (top, mask);
    top.reshape(&shapes[0].dims).unwrap();
    mask.reshape(&shapes[1].dims).unwrap();
    pool.forward(&[&x], &[&top, &mask]).unwrap();
    assert_eq!(top.to_vec().unwrap(), [5., 8., 9., 7.]);
    assert_eq!(mask.to_vec().unwrap(), [1., 6., 9., 11.]);
    // SegNet's unpooling puts each value back, zeros elsewhere.
    let mut unpool =
        layer("type: 'Upsample' bottom: 'x' bottom: 'mask' upsample_param { scale: 2 }");
    let y = run(unpool.as_mut(), &[&top, &mask]);
    assert_eq!(
        y.to_vec().unwrap(),
        [
            0., 5., 0., 0., 0., 0., 8., 0., 0., 9., 0., 7., 0., 0., 0., 0.
        ]
    );
    let mut fixed = layer(
        "type: 'Upsample' bottom: 'x' bottom: 'mask' upsample_param { upsample_h: 5 upsample_w: 4 }",
    );
    assert_eq!(run(fixed.as_mut(), &[&top, &mask]).shape(), [1, 1, 5, 4]);
    let mut padded = layer(
        "type: 'Upsample' bottom: 'x' bottom: 'mask' upsample_param { scale: 2 pad_out_h: true }",
    );
    assert_eq!(run(padded.as_mut(), &[&top, &mask]).shape(), [1, 1, 3, 4]);
    // A mask beyond the output is refused, not written past it.
    let far = Blob::from_vec(&[1, 1, 2, 2], vec![1., 6., 9., 99.]).unwrap();
    let mut l = layer("type: 'Upsample' bottom: 'x' bottom: 'mask' upsample_param { scale: 2 }");
    let out = Blob::default();
    let shapes = l.reshape(&[&top, &far], &[&out]).unwrap();
    let mut out = out;
    out.reshape(&shapes[0].dims).unwrap();
    let err = l.forward(&[&top, &far], &[&out]).unwrap_err().to_string();
    assert!(err.contains("upsample top index 99 out of range"), "{err}");
    gradients(
        "type: 'Upsample' bottom: 'x' bottom: 'mask' upsample_param { scale: 2 }",
        &[input(&[1, 1, 2, 2], 18), mask],
    );
}

#[test]
fn segnets_bn_learns_from_the_batch_and_infers_from_its_blobs() {
    let x = input(&[2, 3, 2, 2], 19);
    let fillers =
        "scale_filler { type: 'constant' value: 2 } shift_filler { type: 'constant' value: 0.5 }";
    let mut inference = layer(&format!(
        "type: 'BN' bn_param {{ bn_mode: INFERENCE {fillers} }}"
    ));
    let y = run(inference.as_mut(), &[&x]);
    assert_eq!(inference.blobs().len(), 2);
    for (out, v) in y.to_vec().unwrap().iter().zip(x.to_vec().unwrap()) {
        assert!((out - (2.0 * v + 0.5)).abs() < 1e-12);
    }
    // LEARN normalizes by the batch in TEST too, eps 1e-9.
    let mut learn = layer(&format!("type: 'BN' phase: TEST bn_param {{ {fillers} }}"));
    let y = run(learn.as_mut(), &[&x]).to_vec().unwrap();
    let xs = x.to_vec().unwrap();
    let values: Vec<f64> = (0..2)
        .flat_map(|n| xs[n * 12..n * 12 + 4].to_vec())
        .collect();
    let mean = values.iter().sum::<f64>() / 8.0;
    let var = values.iter().map(|v| v * v).sum::<f64>() / 8.0 - mean * mean;
    assert!((y[0] - (2.0 * (xs[0] - mean) / (var + 1e-9).sqrt() + 0.5)).abs() < 1e-9);
    let random =
        "scale_filler { type: 'gaussian' std: 1 } shift_filler { type: 'gaussian' std: 1 }";
    gradients(
        &format!("type: 'BN' bn_param {{ {random} }}"),
        &[input(&[2, 3, 2, 3], 20)],
    );
    gradients(
        &format!("type: 'BN' bn_param {{ bn_mode: INFERENCE {random} }}"),
        &[input(&[2, 3, 2, 3], 21)],
    );
    assert!(layer("type: 'BN' bn_param { bn_mode: LEARN }").learns_param(1));
}

/// Caffe's `im2col_cpu`, written out.
fn im2col_reference(
    x: &[f64],
    (c, h, w): (usize, usize, usize),
    k: [usize; 2],
    s: [usize; 2],
    p: [usize; 2],
    d: [usize; 2],
) -> Vec<f64> {
    let oh = (h + 2 * p[0] - (d[0] * (k[0] - 1) + 1)) / s[0] + 1;
    let ow = (w + 2 * p[1] - (d[1] * (k[1] - 1) + 1)) / s[1] + 1;
    let mut out = Vec::new();
    for ch in 0..c {
        for ki in 0..k[0] {
            for kj in 0..k[1] {
                for r in 0..oh {
                    for q in 0..ow {
                        let ih = (r * s[0] + ki * d[0]) as i64 - p[0] as i64;
                        let iw = (q * s[1] + kj * d[1]) as i64 - p[1] as i64;
                        let inside = (0..h as i64).contains(&ih) && (0..w as i64).contains(&iw);
                        out.push(if inside {
                            x[(ch * h + ih as usize) * w + iw as usize]
                        } else {
                            0.0
                        });
                    }
                }
            }
        }
    }
    out
}

#[test]
fn im2col_lays_each_window_out_as_caffe_does() {
    let x = input(&[2, 3, 5, 6], 22);
    let xs = x.to_vec().unwrap();
    for (text, k, s, p, d) in [
        ("kernel_size: 3", [3, 3], [1, 1], [0, 0], [1, 1]),
        (
            "kernel_size: 3 stride: 2 pad: 1",
            [3, 3],
            [2, 2],
            [1, 1],
            [1, 1],
        ),
        (
            "kernel_h: 2 kernel_w: 3 stride_h: 1 stride_w: 2 pad_h: 1 pad_w: 0",
            [2, 3],
            [1, 2],
            [1, 0],
            [1, 1],
        ),
        (
            "kernel_size: 2 dilation: 2 pad: 1",
            [2, 2],
            [1, 1],
            [1, 1],
            [2, 2],
        ),
        // A strided 1x1 window (ResNet's), and a step of 3 with a window
        // whose last run ends at the image's last value.
        ("kernel_size: 1 stride: 2", [1, 1], [2, 2], [0, 0], [1, 1]),
        (
            "kernel_h: 1 kernel_w: 3 stride: 3",
            [1, 3],
            [3, 3],
            [0, 0],
            [1, 1],
        ),
    ] {
        let mut l = layer(&format!("type: 'Im2col' convolution_param {{ {text} }}"));
        let y = run(l.as_mut(), &[&x]);
        let ys = y.to_vec().unwrap();
        let per = ys.len() / 2;
        for img in 0..2 {
            let want = im2col_reference(&xs[img * 90..(img + 1) * 90], (3, 5, 6), k, s, p, d);
            assert_eq!(ys[img * per..(img + 1) * per], want[..], "{text}");
        }
        assert_eq!(y.shape()[1], 3 * k[0] * k[1], "{text}");
    }
    gradients(
        "type: 'Im2col' convolution_param { kernel_size: 3 stride: 2 pad: 1 }",
        &[input(&[2, 2, 4, 5], 23)],
    );
}

#[test]
fn spp_pools_a_pyramid_of_bins_and_concatenates_them() {
    let x = input(&[2, 3, 13, 11], 24);
    let mut spp = layer("type: 'SPP' spp_param { pyramid_height: 3 pool: MAX }");
    let y = run(spp.as_mut(), &[&x]);
    assert_eq!(y.shape(), [2, 3 * (1 + 4 + 16)]);
    let ys = y.to_vec().unwrap();
    // Level l is Caffe's GetPoolingParam pooling: window ceil(size / 2^l),
    // the same stride, padding ceil((window * 2^l - size) / 2).
    let mut offset = 0;
    for (bins, (kh, ph), (kw, pw)) in [
        (1, (13, 0), (11, 0)),
        (2, (7, 1), (6, 1)),
        (4, (4, 2), (3, 1)),
    ] {
        let mut pool = layer(&format!(
            "type: 'Pooling' pooling_param {{ pool: MAX kernel_h: {kh} kernel_w: {kw} stride_h: {kh} stride_w: {kw} pad_h: {ph} pad_w: {pw} }}"
        ));
        let level = run(pool.as_mut(), &[&x]);
        assert_eq!(level.shape(), [2, 3, bins, bins]);
        let per = 3 * bins * bins;
        let lv = level.to_vec().unwrap();
        for item in 0..2 {
            assert_eq!(
                ys[item * 63 + offset..item * 63 + offset + per],
                lv[item * per..(item + 1) * per]
            );
        }
        offset += per;
    }
    // One level is the pooling alone, still 4-D.
    let one = run(
        layer("type: 'SPP' spp_param { pyramid_height: 1 pool: AVE }").as_mut(),
        &[&x],
    );
    assert_eq!(one.shape(), [2, 3, 1, 1]);
    gradients(
        "type: 'SPP' spp_param { pyramid_height: 2 pool: MAX }",
        &[input(&[2, 2, 5, 6], 25)],
    );
    gradients(
        "type: 'SPP' spp_param { pyramid_height: 3 pool: AVE }",
        &[input(&[1, 2, 9, 8], 26)],
    );
}

#[test]
fn lstm_and_rnn_backward_through_time() {
    // 4 steps of 2 items; item 1 starts a new sequence at step 2.
    let flags = || Blob::from_vec(&[4, 2], vec![0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 1.0, 1.0]).unwrap();
    let cont = flags();
    let filled =
        "weight_filler { type: 'gaussian' std: 0.5 } bias_filler { type: 'gaussian' std: 0.5 }";
    for kind in ["LSTM", "RNN"] {
        let text = format!("type: '{kind}' recurrent_param {{ num_output: 3 {filled} }}");
        gradients(&text, &[input(&[4, 2, 5], 27), flags()]);
        // With a static input every step sees.
        gradients(&text, &[input(&[4, 2, 5], 28), flags(), input(&[2, 3], 29)]);
        let mut l = layer(&text);
        let y = run(l.as_mut(), &[&input(&[4, 2, 5], 30), &cont]);
        assert_eq!(y.shape(), [4, 2, 3], "{kind}");
        let blobs = l.blobs().len();
        assert_eq!(blobs, if kind == "LSTM" { 3 } else { 5 }, "{kind}");
    }
    // A new sequence forgets the old: item 1's step 2 equals a fresh
    // sequence's first step on the same input.
    let x = input(&[4, 2, 5], 31);
    blob_kernels::cpu::set_seed(5);
    let mut l = layer(&format!(
        "type: 'LSTM' recurrent_param {{ num_output: 3 {filled} }}"
    ));
    let y = run(l.as_mut(), &[&x, &cont]).to_vec().unwrap();
    let xs = x.to_vec().unwrap();
    let first = Blob::from_vec(&[1, 1, 5], xs[25..30].to_vec()).unwrap();
    let fresh = run(
        l.as_mut(),
        &[&first, &Blob::from_vec(&[1, 1], vec![0.0]).unwrap()],
    )
    .to_vec()
    .unwrap();
    for (a, b) in y[15..18].iter().zip(&fresh) {
        assert!((a - b).abs() < 1e-12, "{a} vs {b}");
    }
}

/// Runs a layer with as many tops as it makes, and returns them.
fn run_all(layer: &mut dyn DynLayer<f64>, bottoms: &[&Blob<f64>]) -> Vec<Blob<f64>> {
    let count = layer.tops().min;
    let mut tops: Vec<Blob<f64>> = (0..count).map(|_| Blob::default()).collect();
    let shapes = {
        let refs: Vec<&Blob<f64>> = tops.iter().collect();
        layer.reshape(bottoms, &refs).unwrap()
    };
    for (top, shape) in tops.iter_mut().zip(&shapes) {
        top.reshape(&shape.dims).unwrap();
    }
    let refs: Vec<&Blob<f64>> = tops.iter().collect();
    layer.forward(bottoms, &refs).unwrap();
    tops
}

/// Steps `from..to` of a (T, N, ...) blob.
fn steps_of(blob: &Blob<f64>, from: usize, to: usize) -> Blob<f64> {
    let per: usize = blob.shape()[1..].iter().product();
    let mut shape = blob.shape().to_vec();
    shape[0] = to - from;
    Blob::from_vec(
        &shape,
        blob.to_vec().unwrap()[from * per..to * per].to_vec(),
    )
    .unwrap()
}

fn assert_close(what: &str, a: &[f64], b: &[f64]) {
    assert_eq!(a.len(), b.len(), "{what}");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!((x - y).abs() < 1e-12, "{what} value {i}: {x} vs {y}");
    }
}

#[test]
fn lstm_and_rnn_carry_their_state_from_one_pass_to_the_next() {
    // Caffe's own recurrent test: a whole sequence in one pass gives what
    // its steps give one pass each, each starting from where the last
    // ended (cont 1 after the first step).
    let filled =
        "weight_filler { type: 'gaussian' std: 0.5 } bias_filler { type: 'gaussian' std: 0.5 }";
    let mut flags = vec![1.0; 8];
    flags[..2].fill(0.0);
    let cont = Blob::from_vec(&[4, 2], flags).unwrap();
    let x = input(&[4, 2, 5], 40);
    for kind in ["LSTM", "RNN"] {
        blob_kernels::cpu::set_seed(6);
        let mut l = layer(&format!(
            "type: '{kind}' recurrent_param {{ num_output: 3 {filled} }}"
        ));
        let whole = run(l.as_mut(), &[&x, &cont]).to_vec().unwrap();
        for t in 0..4 {
            let y = run(
                l.as_mut(),
                &[&steps_of(&x, t, t + 1), &steps_of(&cont, t, t + 1)],
            );
            assert_close(
                &format!("{kind} step {t}"),
                &y.to_vec().unwrap(),
                &whole[t * 6..(t + 1) * 6],
            );
        }
    }
}

#[test]
fn expose_hidden_takes_the_starting_state_and_gives_the_final_one() {
    let filled =
        "weight_filler { type: 'gaussian' std: 0.5 } bias_filler { type: 'gaussian' std: 0.5 }";
    let mut flags = vec![1.0; 10];
    flags[..2].fill(0.0);
    flags[7] = 0.0; // item 1 starts anew at step 3
    let cont = Blob::from_vec(&[5, 2], flags).unwrap();
    let x = input(&[5, 2, 4], 41);
    for (kind, states) in [("LSTM", 2), ("RNN", 1)] {
        let text = format!(
            "type: '{kind}' recurrent_param {{ num_output: 3 expose_hidden: true {filled} }}"
        );
        blob_kernels::cpu::set_seed(7);
        let mut l = layer(&text);
        assert_eq!(l.tops().min, 1 + states, "{kind}");
        let zeros: Vec<Blob<f64>> = (0..states)
            .map(|_| Blob::new(&[1, 2, 3]).unwrap())
            .collect();
        let mut bottoms = vec![&x, &cont];
        bottoms.extend(zeros.iter());
        let whole = run_all(l.as_mut(), &bottoms);
        assert_eq!(whole.len(), 1 + states);
        for top in &whole[1..] {
            assert_eq!(top.shape(), [1, 2, 3], "{kind}");
        }
        // The final hidden state is the last step's output for LSTM.
        let y = whole[0].to_vec().unwrap();
        if kind == "LSTM" {
            assert_close(kind, &whole[1].to_vec().unwrap(), &y[24..30]);
        }
        // Two passes, the second starting from the first's final state,
        // give the whole pass's outputs and final state.
        let (x1, c1) = (steps_of(&x, 0, 2), steps_of(&cont, 0, 2));
        let mut first_bottoms = vec![&x1, &c1];
        first_bottoms.extend(zeros.iter());
        let first = run_all(l.as_mut(), &first_bottoms);
        let (x2, c2) = (steps_of(&x, 2, 5), steps_of(&cont, 2, 5));
        let mut second_bottoms = vec![&x2, &c2];
        second_bottoms.extend(first[1..].iter());
        let second = run_all(l.as_mut(), &second_bottoms);
        assert_close(kind, &first[0].to_vec().unwrap(), &y[..12]);
        assert_close(kind, &second[0].to_vec().unwrap(), &y[12..]);
        for (a, b) in second[1..].iter().zip(&whole[1..]) {
            assert_close(kind, &a.to_vec().unwrap(), &b.to_vec().unwrap());
        }
        // Gradients to the input and weights, the starting state
        // continued into step 0, with and without a static input.
        let starts: Vec<Blob<f64>> = (0..states)
            .map(|s| input(&[1, 2, 3], 42 + s as u64))
            .collect();
        let ones = Blob::from_vec(&[5, 2], vec![1.0; 10]).unwrap();
        for fixed in [None, Some(input(&[2, 2], 44))] {
            let mut bottoms = vec![input(&[5, 2, 4], 45), ones.clone()];
            bottoms.extend(fixed);
            bottoms.extend(starts.iter().cloned());
            blob_kernels::cpu::set_seed(11);
            let report = CHECKER
                .check_with_tops(layer(&text).as_mut(), &bottoms, 1)
                .unwrap_or_else(|e| panic!("{kind}: {e}"));
            assert!(report.checked > 0);
        }
        // A starting state of another shape is named.
        let wrong = Blob::new(&[1, 2, 4]).unwrap();
        let mut bottoms = vec![&x, &cont, &wrong];
        bottoms.extend(zeros.iter().skip(1));
        let err = l
            .reshape(&bottoms, &[&Blob::default()])
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("h_0") && err.contains("1 2 4"), "{err}");
    }
}

#[test]
fn lstm_unit_is_one_step_of_lstm() {
    let cont = Blob::from_vec(&[1, 3], vec![1.0, 0.0, 1.0]).unwrap();
    let (c_prev, x) = (input(&[1, 3, 2], 32), input(&[1, 3, 8], 33));
    let mut unit = layer("type: 'LSTMUnit'");
    let (c, h) = (Blob::default(), Blob::default());
    let shapes = unit.reshape(&[&c_prev, &x, &cont], &[&c, &h]).unwrap();
    let (mut c, mut h) = (c, h);
    c.reshape(&shapes[0].dims).unwrap();
    h.reshape(&shapes[1].dims).unwrap();
    unit.forward(&[&c_prev, &x, &cont], &[&c, &h]).unwrap();
    let (xs, cp) = (x.to_vec().unwrap(), c_prev.to_vec().unwrap());
    let sig = |v: f64| 1.0 / (1.0 + (-v).exp());
    for item in 0..3 {
        for k in 0..2 {
            let g = |j: usize| xs[item * 8 + j * 2 + k];
            let keep = [1.0, 0.0, 1.0][item];
            let cell = keep * sig(g(1)) * cp[item * 2 + k] + sig(g(0)) * g(3).tanh();
            assert!((c.to_vec().unwrap()[item * 2 + k] - cell).abs() < 1e-12);
            assert!((h.to_vec().unwrap()[item * 2 + k] - sig(g(2)) * cell.tanh()).abs() < 1e-12);
        }
    }
    blob_kernels::cpu::set_seed(11);
    let report = CHECKER
        .check_with_tops(
            layer("type: 'LSTMUnit'").as_mut(),
            &[input(&[1, 3, 2], 34), input(&[1, 3, 8], 35), cont],
            2,
        )
        .unwrap();
    assert!(report.checked > 0);
}

#[test]
fn psroi_pooling_averages_each_bins_own_channel() {
    let x = input(&[1, 8, 6, 6], 36);
    // One region over the whole map at scale 1: rows and columns 0..6 in
    // 2 x 2 bins of 3 x 3; output channel k, bin (i, j) reads channel
    // (k * 2 + i) * 2 + j.
    let rois = Blob::from_vec(&[1, 5], vec![0.0, 0.0, 0.0, 5.0, 5.0]).unwrap();
    let mut l = layer(
        "type: 'PSROIPooling' psroi_pooling_param { spatial_scale: 1 output_dim: 2 group_size: 2 }",
    );
    let y = run(l.as_mut(), &[&x, &rois]);
    assert_eq!(y.shape(), [1, 2, 2, 2]);
    let (xs, ys) = (x.to_vec().unwrap(), y.to_vec().unwrap());
    for k in 0..2 {
        for i in 0..2 {
            for j in 0..2 {
                let c = (k * 2 + i) * 2 + j;
                let mut sum = 0.0;
                for r in 3 * i..3 * i + 3 {
                    for q in 3 * j..3 * j + 3 {
                        sum += xs[c * 36 + r * 6 + q];
                    }
                }
                assert!((ys[(k * 2 + i) * 2 + j] - sum / 9.0).abs() < 1e-12);
            }
        }
    }
    let rois = Blob::from_vec(
        &[2, 5],
        vec![0.0, 1.0, 0.0, 4.0, 5.0, 0.0, 2.0, 2.0, 3.0, 3.0],
    )
    .unwrap();
    gradients(
        "type: 'PSROIPooling' psroi_pooling_param { spatial_scale: 1 output_dim: 2 group_size: 2 }",
        &[input(&[1, 8, 6, 6], 37), rois],
    );
    let err = LayerRegistry::<f64>::with_caffe_layers()
        .build_text("type: 'PSROIPooling' psroi_pooling_param { output_dim: 2 }")
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("spatial_scale, group_size"), "{err}");
}

#[test]
fn bn_without_backward_gives_the_same_values_in_place_or_not() {
    for text in [
        "type: 'BN' phase: TEST bn_param { eps: 0.001 }",
        "type: 'BN' bn_param { bn_mode: INFERENCE }",
    ] {
        let x = input(&[2, 3, 4, 5], 38);
        let mut kept = layer(text);
        run(kept.as_mut(), &[&x]);
        // Slopes, biases, means and variances of a trained net.
        for (k, b) in kept.blobs_mut().iter_mut().enumerate() {
            let v = input(b.shape(), 40 + k as u64).to_vec().unwrap();
            let v: Vec<f64> = v
                .iter()
                .map(|x| if k == 3 { x.abs() + 0.5 } else { *x })
                .collect();
            b.mutable_cpu_data().unwrap().copy_from_slice(&v);
        }
        let want = run(kept.as_mut(), &[&x]).to_vec().unwrap();
        assert!(want.iter().any(|v| v.abs() > 0.1), "{text}");
        let values: Vec<Vec<f64>> = kept.blobs().iter().map(|b| b.to_vec().unwrap()).collect();
        let mut quick = layer(text);
        quick.backward_will_run(false);
        run(quick.as_mut(), &[&x]);
        for (b, v) in quick.blobs_mut().iter_mut().zip(&values) {
            b.mutable_cpu_data().unwrap().copy_from_slice(v);
        }
        assert_eq!(run(quick.as_mut(), &[&x]).to_vec().unwrap(), want, "{text}");
        // In place.
        let same = input(&[2, 3, 4, 5], 38);
        quick.forward(&[&same], &[&same]).unwrap();
        assert_eq!(same.to_vec().unwrap(), want, "{text} in place");
    }
}

#[test]
fn a_net_chains_exposed_lstm_states_and_trains_through_them() {
    // Two LSTMs, the second starting where the first ended, under a loss:
    // the net wires the extra bottoms and tops, and backward runs.
    let text = "force_backward: true
        input: 'x' input_shape { dim: 3 dim: 2 dim: 4 }
        input: 'cont' input_shape { dim: 3 dim: 2 }
        input: 'h0' input_shape { dim: 1 dim: 2 dim: 5 }
        input: 'c0' input_shape { dim: 1 dim: 2 dim: 5 }
        layer { name: 'a' type: 'LSTM' bottom: 'x' bottom: 'cont' bottom: 'h0' bottom: 'c0'
                top: 'ya' top: 'ha' top: 'ca'
                recurrent_param { num_output: 5 expose_hidden: true
                  weight_filler { type: 'uniform' min: -0.3 max: 0.3 } } }
        layer { name: 'b' type: 'LSTM' bottom: 'x' bottom: 'cont' bottom: 'ha' bottom: 'ca'
                top: 'yb' top: 'hb' top: 'cb'
                recurrent_param { num_output: 5 expose_hidden: true
                  weight_filler { type: 'uniform' min: -0.3 max: 0.3 } } }
        layer { name: 'loss' type: 'EuclideanLoss' bottom: 'ya' bottom: 'yb' top: 'loss' }
        layer { name: 'out' type: 'Silence' bottom: 'hb' bottom: 'cb' }";
    let mut net = Net::<f32>::from_prototxt(text, NetState::train()).unwrap();
    assert_eq!(net.blob("hb").unwrap().shape(), [1, 2, 5]);
    blob_kernels::cpu::set_seed(3);
    blob_kernels::cpu::uniform(
        -1.0f32,
        1.0,
        &mut net.blob("x").unwrap().mutable_cpu_data().unwrap(),
    )
    .unwrap();
    net.blob("cont")
        .unwrap()
        .mutable_cpu_data()
        .unwrap()
        .fill(1.0);
    let loss = net.forward().unwrap();
    assert!(loss > 0.0, "{loss}");
    net.backward().unwrap();
    let grads = net.layer_blobs("b").unwrap()[0].diff_to_vec().unwrap();
    assert!(grads.iter().any(|g| *g != 0.0));
    // The exposed states take no gradient.
    assert!(
        net.blob("ha")
            .unwrap()
            .diff_to_vec()
            .unwrap()
            .iter()
            .all(|g| *g == 0.0)
    );
}

#[test]
fn a_recurrent_pass_that_does_not_fit_is_refused() {
    let mut l = layer("type: 'LSTM' recurrent_param { num_output: 3 }");
    let cont = Blob::from_vec(&[4, 2], vec![0.0; 8]).unwrap();
    let (x, y) = (input(&[4, 2, 5], 50), Blob::default());
    let shapes = l.reshape(&[&x, &cont], &[&y]).unwrap();
    let mut y = y;
    y.reshape(&shapes[0].dims).unwrap();
    // Backward before any forward pass.
    let err = l
        .backward(&[&y], &[true, false], &[&x, &cont])
        .unwrap_err()
        .to_string();
    assert!(err.contains("forward pass"), "{err}");
    // An input of another size than the weights were made for.
    let wider = input(&[4, 2, 6], 51);
    let err = l.forward(&[&wider, &cont], &[&y]).unwrap_err().to_string();
    assert!(err.contains("blob 0") && err.contains("12 5"), "{err}");
}
