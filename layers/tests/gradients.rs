//! Every run-time layer's backward pass against central differences of
//! its forward pass (Caffe's `GradientChecker`), in `f64`.

use blob_layers::check::GradientChecker;
use blob_layers::registry::LayerRegistry;
use blob_proto::{ParamMessage, TextMessage, schema};
use blob_runtime::Blob;

const CHECKER: GradientChecker = GradientChecker {
    step: 1e-5,
    threshold: 1e-6,
};

fn layer(text: &str) -> Box<dyn blob_layers::DynLayer<f64>> {
    // Read against the registry's tables: the forks' fields too.
    let registry = LayerRegistry::with_caffe_layers();
    let schema = registry.schemas().layer_parameter();
    let param = ParamMessage::from_text(schema, &TextMessage::parse(text).unwrap()).unwrap();
    registry.build(param.string("type"), &param).unwrap()
}

/// Values in `[-1, -0.1] U [0.1, 1]` from `seed`: away from ReLU's and
/// PReLU's kink at 0, and without ties for MAX pooling.
fn input(shape: &[usize], seed: u64) -> Blob<f64> {
    let b = Blob::new(shape).unwrap();
    blob_kernels::cpu::set_seed(seed);
    blob_kernels::cpu::uniform(0.1, 1.0, &mut b.mutable_cpu_data().unwrap()).unwrap();
    for (i, v) in b.mutable_cpu_data().unwrap().iter_mut().enumerate() {
        if i % 3 == 1 {
            *v = -*v;
        }
        *v += i as f64 * 1e-4;
    }
    b
}

fn check(text: &str, shapes: &[&[usize]]) -> usize {
    blob_kernels::cpu::set_seed(7);
    let mut l = layer(text);
    let bottoms: Vec<Blob<f64>> = shapes
        .iter()
        .enumerate()
        .map(|(i, s)| input(s, i as u64 + 1))
        .collect();
    let report = CHECKER
        .check(l.as_mut(), &bottoms)
        .unwrap_or_else(|e| panic!("{text}: {e}"));
    assert!(report.checked > 0);
    report.checked
}

const FILLED: &str =
    r#"weight_filler { type: "gaussian" std: 0.5 } bias_filler { type: "gaussian" std: 0.5 }"#;

#[test]
fn convolution() {
    let n = check(
        &format!(
            r#"type: "Convolution" convolution_param {{ num_output: 3 kernel_size: 3 stride: 2 pad: 1 {FILLED} }}"#
        ),
        &[&[2, 2, 5, 5]],
    );
    assert_eq!(n, 100 + 3 * 2 * 9 + 3);
}

#[test]
fn pooling() {
    check(
        r#"type: "Pooling" pooling_param { pool: MAX kernel_size: 3 stride: 2 }"#,
        &[&[2, 3, 7, 6]],
    );
    check(
        r#"type: "Pooling" pooling_param { pool: AVE kernel_size: 3 stride: 2 }"#,
        &[&[2, 3, 7, 6]],
    );
    check(
        r#"type: "Pooling" pooling_param { pool: AVE global_pooling: true }"#,
        &[&[2, 3, 5, 5]],
    );
}

#[test]
fn inner_product_from_any_axis() {
    check(
        &format!(r#"type: "InnerProduct" inner_product_param {{ num_output: 4 {FILLED} }}"#),
        &[&[3, 2, 5]],
    );
    check(
        &format!(
            r#"type: "InnerProduct" inner_product_param {{ num_output: 2 axis: 2 {FILLED} }}"#
        ),
        &[&[2, 3, 4]],
    );
}

#[test]
fn activations() {
    for kind in ["ReLU", "Sigmoid", "TanH"] {
        check(&format!(r#"type: "{kind}""#), &[&[2, 3, 4]]);
    }
}

#[test]
fn prelu_per_channel_and_shared() {
    check(
        r#"type: "PReLU" prelu_param { filler { type: "uniform" min: -0.5 max: 0.5 } }"#,
        &[&[2, 3, 2, 2]],
    );
    check(
        r#"type: "PReLU" prelu_param { channel_shared: true }"#,
        &[&[2, 3, 4]],
    );
}

#[test]
fn softmax_over_an_axis() {
    check(r#"type: "Softmax""#, &[&[2, 5]]);
    check(r#"type: "Softmax""#, &[&[2, 3, 2, 2]]);
    check(
        r#"type: "Softmax" softmax_param { axis: -1 }"#,
        &[&[2, 3, 4]],
    );
}

#[test]
fn dropout_in_test_passes_gradients_through() {
    check(r#"type: "Dropout" phase: TEST"#, &[&[2, 6]]);
}

#[test]
fn split_sums_its_tops_gradients() {
    let mut l = layer(r#"type: "Split""#);
    let x = input(&[2, 3], 1);
    let report = CHECKER.check_with_tops(l.as_mut(), &[x], 3).unwrap();
    assert_eq!(report.checked, 6);
}

#[test]
fn a_wrong_backward_is_caught() {
    /// Forward doubles; backward claims the slope is 3.
    struct Wrong;
    impl blob_layers::DynLayer<f64> for Wrong {
        fn type_name(&self) -> &str {
            "Wrong"
        }
        fn reshape(
            &mut self,
            bottoms: &[&Blob<f64>],
            _tops: &[&Blob<f64>],
        ) -> blob_runtime::Result<Vec<blob_layers::TopShape>> {
            Ok(vec![blob_layers::TopShape::new(
                bottoms[0].shape().to_vec(),
            )])
        }
        fn forward(&mut self, b: &[&Blob<f64>], t: &[&Blob<f64>]) -> blob_runtime::Result<()> {
            let x = b[0].to_vec()?;
            t[0].mutable_cpu_data()?
                .iter_mut()
                .zip(x)
                .for_each(|(y, x)| *y = 2.0 * x);
            Ok(())
        }
        fn backward(
            &mut self,
            t: &[&Blob<f64>],
            _d: &[bool],
            b: &[&Blob<f64>],
        ) -> blob_runtime::Result<()> {
            let dy = t[0].diff_to_vec()?;
            b[0].mutable_cpu_diff()?
                .iter_mut()
                .zip(dy)
                .for_each(|(d, g)| *d = 3.0 * g);
            Ok(())
        }
    }
    let err = CHECKER
        .check(&mut Wrong, &[input(&[4], 1)])
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("cannot check gradients: bottom 0 value 0: backward gives"),
        "{err}"
    );
}

#[test]
fn rectangular_dilated_convolutions_and_deconvolutions() {
    check(
        &format!(
            r#"type: "Convolution" convolution_param {{ num_output: 4 group: 2 kernel_h: 3 kernel_w: 2
               stride_h: 2 stride_w: 1 pad_h: 1 pad_w: 2 dilation: 2 dilation: 1 {FILLED} }}"#
        ),
        &[&[2, 4, 7, 5]],
    );
    check(
        &format!(
            r#"type: "Deconvolution" convolution_param {{ num_output: 4 group: 2 kernel_h: 3 kernel_w: 2
               stride_h: 2 stride_w: 3 pad_h: 1 dilation: 1 dilation: 2 {FILLED} }}"#
        ),
        &[&[2, 2, 3, 4]],
    );
    check(
        &format!(
            r#"type: "Deconvolution" convolution_param {{ num_output: 3 kernel_size: 4 stride: 2 pad: 1 bias_term: false {FILLED} }}"#
        ),
        &[&[1, 2, 3, 3]],
    );
}

#[test]
fn normalize_across_space_or_channels_shared_or_not() {
    for param in [
        "",
        "across_spatial: false",
        "channel_shared: false scale_filler { type: \"gaussian\" std: 1 }",
        "across_spatial: false channel_shared: false scale_filler { type: \"gaussian\" std: 1 }",
    ] {
        check(
            &format!(r#"type: "Normalize" norm_param {{ {param} }}"#),
            &[&[2, 3, 2, 2]],
        );
    }
}

#[test]
fn grouped_and_biasless_convolutions() {
    check(
        &format!(
            r#"type: "Convolution" convolution_param {{ num_output: 4 group: 2 kernel_size: 3 pad: 1 {FILLED} }}"#
        ),
        &[&[2, 4, 4, 5]],
    );
    let n = check(
        r#"type: "Convolution" convolution_param { num_output: 3 group: 3 kernel_size: 3 bias_term: false weight_filler { type: "gaussian" } }"#,
        &[&[1, 3, 5, 5]],
    );
    assert_eq!(n, 75 + 3 * 9, "no bias to check");
}

#[test]
fn lrn_both_regions() {
    check(
        r#"type: "LRN" lrn_param { local_size: 3 alpha: 0.5 beta: 0.75 k: 2 }"#,
        &[&[2, 5, 3, 2]],
    );
    check(
        r#"type: "LRN" lrn_param { local_size: 3 alpha: 0.5 beta: 0.75 norm_region: WITHIN_CHANNEL }"#,
        &[&[2, 2, 4, 5]],
    );
}

/// Labels of `classes` classes for `count` positions, some `ignored`.
fn labels(count: usize, classes: usize, ignored: Option<f64>) -> Blob<f64> {
    let b = Blob::new(&[count]).unwrap();
    for (i, v) in b.mutable_cpu_data().unwrap().iter_mut().enumerate() {
        *v = match ignored {
            Some(ig) if i % 4 == 3 => ig,
            _ => ((i * 7) % classes) as f64,
        };
    }
    b
}

#[test]
fn softmax_with_loss_each_normalization() {
    for norm in ["FULL", "VALID", "BATCH_SIZE", "NONE"] {
        let mut l = layer(&format!(
            r#"type: "SoftmaxWithLoss" loss_param {{ ignore_label: -1 normalization: {norm} }}"#
        ));
        let scores = input(&[2, 3, 2, 2], 5);
        let report = CHECKER
            .check(l.as_mut(), &[scores, labels(8, 3, Some(-1.0))])
            .unwrap_or_else(|e| panic!("{norm}: {e}"));
        assert_eq!(report.checked, 24, "the scores alone");
    }
    let mut plain = layer(r#"type: "SoftmaxWithLoss""#);
    CHECKER
        .check(plain.as_mut(), &[input(&[4, 5], 6), labels(4, 5, None)])
        .unwrap();
}

/// SegNet's class weighting: gradients of the weighted loss, with an
/// ignored label, and its value against the fork's sum.
#[test]
fn softmax_with_loss_weights_each_class_as_segnet() {
    let text = r#"type: "SoftmaxWithLoss" loss_param { weight_by_label_freqs: true
        ignore_label: -1 class_weighting: 0.25 class_weighting: 2 class_weighting: 1.5 }"#;
    let mut l = layer(text);
    CHECKER
        .check(
            l.as_mut(),
            &[input(&[2, 3, 2, 2], 7), labels(8, 3, Some(-1.0))],
        )
        .unwrap();
    // Two positions of two classes, logits 0 and ln 3: p = 1/4 and 3/4.
    let scores = Blob::<f64>::from_vec(&[2, 2], vec![0.0, 3f64.ln(), 0.0, 3f64.ln()]).unwrap();
    let labels = Blob::<f64>::from_vec(&[2], vec![0.0, 1.0]).unwrap();
    let weighted = r#"type: "SoftmaxWithLoss" loss_param { weight_by_label_freqs: true
        class_weighting: 0.5 class_weighting: 3 }"#;
    let got = loss_of(weighted, &[scores.clone(), labels.clone()]);
    // (0.5 (-ln 1/4) + 3 (-ln 3/4)) over the 2 positions counted.
    let want = (0.5 * 4f64.ln() + 3.0 * (4.0f64 / 3.0).ln()) / 2.0;
    assert!((got - want).abs() < 1e-12, "{got} vs {want}");
    let plain = loss_of(
        r#"type: "SoftmaxWithLoss""#,
        &[scores.clone(), labels.clone()],
    );
    assert!((plain - (4f64.ln() + (4.0f64 / 3.0).ln()) / 2.0).abs() < 1e-12);
    // As many weights as classes, or a clear refusal.
    let mut short = layer(
        r#"type: "SoftmaxWithLoss" loss_param { weight_by_label_freqs: true class_weighting: 1 }"#,
    );
    let top = Blob::<f64>::default();
    let err = short
        .reshape(&[&scores, &labels], &[&top])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("gives 1 class_weighting values for the 2 classes"),
        "{err}"
    );
}

#[test]
fn softmax_with_loss_values_as_caffe_normalizes_them() {
    // Two positions of two classes, logits equal: each loss ln 2; the
    // second ignored.
    let run = |norm: &str| -> f64 {
        let mut l = layer(&format!(
            r#"type: "SoftmaxWithLoss" loss_param {{ ignore_label: 9 normalization: {norm} }}"#
        ));
        let scores = Blob::<f64>::new(&[2, 2]).unwrap();
        let labels = Blob::<f64>::from_vec(&[2], vec![1.0, 9.0]).unwrap();
        let mut top = Blob::<f64>::default();
        let shapes = l.reshape(&[&scores, &labels], &[&top]).unwrap();
        top.reshape(&shapes[0].dims).unwrap();
        l.forward(&[&scores, &labels], &[&top]).unwrap();
        top.cpu_data().unwrap()[0]
    };
    let ln2 = std::f64::consts::LN_2;
    assert!((run("VALID") - ln2).abs() < 1e-12);
    assert!((run("FULL") - ln2 / 2.0).abs() < 1e-12);
    assert!((run("BATCH_SIZE") - ln2 / 2.0).abs() < 1e-12);
    assert!((run("NONE") - ln2).abs() < 1e-12);
}

/// The loss `text` gives for `bottoms` (its forward pass alone).
fn loss_of(text: &str, bottoms: &[Blob<f64>]) -> f64 {
    let mut l = layer(text);
    let refs: Vec<&Blob<f64>> = bottoms.iter().collect();
    let mut top = Blob::<f64>::default();
    let shapes = l.reshape(&refs, &[&top]).unwrap();
    top.reshape(&shapes[0].dims).unwrap();
    l.forward(&refs, &[&top]).unwrap();
    top.cpu_data().unwrap()[0]
}

fn values(shape: &[usize], v: Vec<f64>) -> Blob<f64> {
    Blob::from_vec(shape, v).unwrap()
}

fn copy(b: &Blob<f64>) -> Blob<f64> {
    values(b.shape(), b.to_vec().unwrap())
}

#[test]
fn euclidean_loss_to_both_inputs() {
    let mut l = layer(r#"type: "EuclideanLoss""#);
    let report = CHECKER
        .check(l.as_mut(), &[input(&[2, 3, 2], 1), input(&[2, 6], 2)])
        .unwrap();
    assert_eq!(report.checked, 24, "both inputs take a gradient");
    // ||(1, 2) - (0, 0)||^2 / 2 over one item; then over two items.
    let loss = loss_of(
        r#"type: "EuclideanLoss""#,
        &[
            values(&[1, 2], vec![1.0, 2.0]),
            values(&[1, 2], vec![0.0; 2]),
        ],
    );
    assert!((loss - 2.5).abs() < 1e-12);
    let loss = loss_of(
        r#"type: "EuclideanLoss""#,
        &[
            values(&[2, 1], vec![1.0, 2.0]),
            values(&[2, 1], vec![0.0; 2]),
        ],
    );
    assert!((loss - 1.25).abs() < 1e-12);
}

#[test]
fn sigmoid_cross_entropy_loss_each_normalization() {
    // Targets in [0, 1], every fourth the ignored label where one is set.
    let targets = |ignored: Option<f64>| {
        let t: Vec<f64> = (0..12)
            .map(|i| match ignored {
                Some(ig) if i % 4 == 3 => ig,
                _ => (i % 5) as f64 / 4.0,
            })
            .collect();
        values(&[2, 6], t)
    };
    for norm in [
        "",
        "normalization: FULL",
        "normalization: VALID",
        "normalization: BATCH_SIZE",
        "normalization: NONE",
        "normalize: true",
    ] {
        for ignore in [None, Some(-1.0)] {
            let text = match ignore {
                Some(ig) => format!(
                    r#"type: "SigmoidCrossEntropyLoss" loss_param {{ ignore_label: {ig} {norm} }}"#
                ),
                None => format!(r#"type: "SigmoidCrossEntropyLoss" loss_param {{ {norm} }}"#),
            };
            let mut l = layer(&text);
            let report = CHECKER
                .check(l.as_mut(), &[input(&[2, 3, 2], 5), targets(ignore)])
                .unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(report.checked, 12, "{text}: the scores alone");
        }
    }
    // x = 0, t = 1: ln 2 each; two items of two, the second target
    // ignored. Caffe's default divides by the batch (2).
    let x = values(&[2, 2], vec![0.0; 4]);
    let t = values(&[2, 2], vec![1.0, 7.0, 1.0, 1.0]);
    let ln2 = std::f64::consts::LN_2;
    for (param, want) in [
        ("", 3.0 * ln2 / 2.0),
        ("normalization: VALID", ln2),
        ("normalization: FULL", 3.0 * ln2 / 4.0),
        ("normalization: NONE", 3.0 * ln2),
    ] {
        let text =
            format!(r#"type: "SigmoidCrossEntropyLoss" loss_param {{ ignore_label: 7 {param} }}"#);
        let got = loss_of(&text, &[copy(&x), copy(&t)]);
        assert!((got - want).abs() < 1e-12, "{param}: {got} vs {want}");
    }
    // Large scores stay finite (the stable form): x = 800, t = 0.
    let big = loss_of(
        r#"type: "SigmoidCrossEntropyLoss""#,
        &[values(&[1], vec![800.0]), values(&[1], vec![0.0])],
    );
    assert!((big - 800.0).abs() < 1e-9, "{big}");
}

#[test]
fn hinge_loss_l1_and_l2() {
    // Scores within (-1, 1) and away from the margins' kinks at -1 and 1.
    let scores = || {
        let b = input(&[3, 4], 3);
        b.mutable_cpu_data()
            .unwrap()
            .iter_mut()
            .for_each(|v| *v *= 0.5);
        b
    };
    for norm in ["L1", "L2"] {
        let text = format!(r#"type: "HingeLoss" hinge_loss_param {{ norm: {norm} }}"#);
        let mut l = layer(&text);
        let report = CHECKER
            .check(l.as_mut(), &[scores(), labels(3, 4, None)])
            .unwrap_or_else(|e| panic!("{norm}: {e}"));
        assert_eq!(report.checked, 12);
    }
    // Class 0 scored 0.5, class 1 -0.2: margins 0.5 and 0.8.
    let x = || values(&[1, 2], vec![0.5, -0.2]);
    let label = || values(&[1], vec![0.0]);
    let l1 = loss_of(r#"type: "HingeLoss""#, &[x(), label()]);
    let l2 = loss_of(
        r#"type: "HingeLoss" hinge_loss_param { norm: L2 }"#,
        &[x(), label()],
    );
    assert!(
        (l1 - 1.3).abs() < 1e-12 && (l2 - 0.89).abs() < 1e-12,
        "{l1} {l2}"
    );
}

#[test]
fn contrastive_loss_similar_and_dissimilar_pairs() {
    let similar = || values(&[4, 1, 1, 1], vec![1.0, 0.0, 0.0, 1.0]);
    for legacy in [false, true] {
        // A margin the pairs' distances fall on both sides of.
        let text = format!(
            r#"type: "ContrastiveLoss" contrastive_loss_param {{ margin: 1.5 legacy_version: {legacy} }}"#
        );
        let mut l = layer(&text);
        // Caffe's gradient divides by d + 1e-4, not d: off from the exact
        // one by about 1e-5 of its size where d is about 1.
        let checker = GradientChecker {
            threshold: if legacy { CHECKER.threshold } else { 1e-4 },
            ..CHECKER
        };
        let report = checker
            .check(
                l.as_mut(),
                &[input(&[4, 3, 1, 1], 1), input(&[4, 3, 1, 1], 2), similar()],
            )
            .unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(report.checked, 24, "{text}: both features");
    }
    // A similar pair at distance 3 (d^2 = 9) and a dissimilar one at
    // distance 0.5 under margin 1: (9 + 0.25) / 2 / 2.
    let a = values(&[2, 2, 1, 1], vec![3.0, 0.0, 0.5, 0.0]);
    let b = values(&[2, 2, 1, 1], vec![0.0; 4]);
    let y = values(&[2, 1, 1, 1], vec![1.0, 0.0]);
    let got = loss_of(
        r#"type: "ContrastiveLoss""#,
        &[copy(&a), copy(&b), copy(&y)],
    );
    assert!((got - 9.25 / 4.0).abs() < 1e-12, "{got}");
    // Legacy: max(margin - d^2, 0) = 0.75, not squared.
    let got = loss_of(
        r#"type: "ContrastiveLoss" contrastive_loss_param { legacy_version: true }"#,
        &[a, b, y],
    );
    assert!((got - 9.75 / 4.0).abs() < 1e-12, "{got}");
}

#[test]
fn multinomial_logistic_loss_over_probabilities() {
    let probabilities = || {
        let b = input(&[3, 4], 4);
        b.mutable_cpu_data()
            .unwrap()
            .iter_mut()
            .for_each(|v| *v = v.abs());
        b
    };
    let mut l = layer(r#"type: "MultinomialLogisticLoss""#);
    let report = CHECKER
        .check(l.as_mut(), &[probabilities(), labels(3, 4, None)])
        .unwrap();
    assert_eq!(report.checked, 12);
    // -ln 0.5 and -ln(1e-20) (a zero probability is floored).
    let p = values(&[2, 2], vec![0.5, 0.5, 0.0, 1.0]);
    let got = loss_of(
        r#"type: "MultinomialLogisticLoss""#,
        &[p, values(&[2], vec![0.0, 0.0])],
    );
    let want = (std::f64::consts::LN_2 + 20.0 * std::f64::consts::LN_10) / 2.0;
    assert!((got - want).abs() < 1e-9, "{got} vs {want}");
}

#[test]
fn infogain_loss_with_h_as_a_bottom_or_a_file() {
    // H: positive, not symmetric; labels with an ignored one.
    let h = || {
        values(
            &[1, 1, 3, 3],
            (0..9).map(|i| 0.2 + (i * 5 % 7) as f64 / 7.0).collect(),
        )
    };
    for norm in ["FULL", "VALID", "BATCH_SIZE", "NONE"] {
        let text = format!(
            r#"type: "InfogainLoss" loss_param {{ ignore_label: -1 normalization: {norm} }}"#
        );
        let mut l = layer(&text);
        let report = CHECKER
            .check(
                l.as_mut(),
                &[input(&[2, 3, 2], 5), labels(4, 3, Some(-1.0)), h()],
            )
            .unwrap_or_else(|e| panic!("{norm}: {e}"));
        assert_eq!(report.checked, 12, "{norm}: the scores alone");
    }
    // The identity makes it SoftmaxWithLoss, from a file as from a bottom.
    let path = std::env::temp_dir().join(format!("infogain-{}.binaryproto", std::process::id()));
    let identity = values(
        &[1, 1, 3, 3],
        (0..9).map(|i| f64::from(u8::from(i % 4 == 0))).collect(),
    );
    blob_runtime::write_blob_file(&path, &identity, false).unwrap();
    let scores = || input(&[4, 3], 6);
    let softmax = loss_of(
        r#"type: "SoftmaxWithLoss""#,
        &[scores(), labels(4, 3, None)],
    );
    let from_file = loss_of(
        &format!(
            r#"type: "InfogainLoss" infogain_loss_param {{ source: "{}" }}"#,
            path.display()
        ),
        &[scores(), labels(4, 3, None)],
    );
    let from_bottom = loss_of(
        r#"type: "InfogainLoss""#,
        &[scores(), labels(4, 3, None), copy(&identity)],
    );
    std::fs::remove_file(&path).unwrap();
    assert!((from_file - softmax).abs() < 1e-12 && (from_bottom - softmax).abs() < 1e-12);
    // Without H: said, as Caffe's check says it.
    let mut l = layer(r#"type: "InfogainLoss""#);
    let (x, y) = (scores(), labels(4, 3, None));
    let mut top = Blob::<f64>::default();
    let shapes = l.reshape(&[&x, &y], &[&top]).unwrap();
    top.reshape(&shapes[0].dims).unwrap();
    let err = l.forward(&[&x, &y], &[&top]).unwrap_err().to_string();
    assert!(
        err.contains("Infogain matrix source must be specified"),
        "{err}"
    );
}

#[test]
fn losses_refuse_a_gradient_to_their_labels_and_bad_labels() {
    let x = values(&[1, 2], vec![0.5, 0.5]);
    let out_of_range = values(&[1], vec![2.0]);
    for text in [r#"type: "HingeLoss""#, r#"type: "MultinomialLogisticLoss""#] {
        let mut l = layer(text);
        let mut top = Blob::<f64>::default();
        let shapes = l.reshape(&[&x, &out_of_range], &[&top]).unwrap();
        top.reshape(&shapes[0].dims).unwrap();
        let err = l
            .forward(&[&x, &out_of_range], &[&top])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("label 0 is 2, not a class index below 2"),
            "{text}: {err}"
        );
        let labels = values(&[1], vec![1.0]);
        l.forward(&[&x, &labels], &[&top]).unwrap();
        let err = l
            .backward(&[&top], &[true, true], &[&x, &labels])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("cannot backpropagate to label inputs"),
            "{text}: {err}"
        );
    }
    let err = layer(r#"type: "EuclideanLoss""#)
        .reshape(&[&x, &values(&[1, 3], vec![0.0; 3])], &[&Blob::default()])
        .unwrap_err()
        .to_string();
    assert!(err.contains("Inputs must have the same dimension"), "{err}");
}

#[test]
fn tile_reduction_mvn() {
    check(r#"type: "Tile" tile_param { tiles: 3 }"#, &[&[2, 3, 2]]);
    check(
        r#"type: "Tile" tile_param { axis: -1 tiles: 2 }"#,
        &[&[2, 3, 2]],
    );
    for op in ["SUM", "ASUM", "SUMSQ", "MEAN"] {
        for axis in [0, 1, 2] {
            check(
                &format!(
                    r#"type: "Reduction" reduction_param {{ operation: {op} axis: {axis} coeff: 0.7 }}"#
                ),
                &[&[2, 3, 2]],
            );
        }
    }
    for param in [
        "",
        "across_channels: true",
        "normalize_variance: false",
        "normalize_variance: false across_channels: true",
    ] {
        check(
            &format!(r#"type: "MVN" mvn_param {{ {param} }}"#),
            &[&[2, 3, 2, 2]],
        );
    }
}

#[test]
fn tile_reduction_mvn_values_as_caffe_computes_them() {
    let run = |text: &str, x: Blob<f64>| -> (Vec<usize>, Vec<f64>) {
        let mut l = layer(text);
        let mut top = Blob::<f64>::default();
        let shapes = l.reshape(&[&x], &[&top]).unwrap();
        top.reshape(&shapes[0].dims).unwrap();
        l.forward(&[&x], &[&top]).unwrap();
        (top.shape().to_vec(), top.to_vec().unwrap())
    };
    let x = || values(&[2, 2], vec![1.0, -2.0, 3.0, 4.0]);
    assert_eq!(
        run(r#"type: "Tile" tile_param { tiles: 2 }"#, x()),
        (vec![2, 4], vec![1.0, -2.0, 1.0, -2.0, 3.0, 4.0, 3.0, 4.0])
    );
    assert_eq!(
        run(r#"type: "Tile" tile_param { axis: 0 tiles: 2 }"#, x()),
        (vec![4, 2], vec![1.0, -2.0, 3.0, 4.0, 1.0, -2.0, 3.0, 4.0])
    );
    assert_eq!(run(r#"type: "Reduction""#, x()), (vec![], vec![6.0]));
    assert_eq!(
        run(
            r#"type: "Reduction" reduction_param { operation: ASUM axis: 1 coeff: 2 }"#,
            x()
        ),
        (vec![2], vec![6.0, 14.0])
    );
    assert_eq!(
        run(
            r#"type: "Reduction" reduction_param { operation: MEAN axis: 1 }"#,
            x()
        ),
        (vec![2], vec![-0.5, 3.5])
    );
    // One channel of 1, -2, 3, 4: mean 1.5, variance 5.25.
    let (_, y) = run(
        r#"type: "MVN" mvn_param { eps: 0 }"#,
        values(&[1, 1, 2, 2], vec![1.0, -2.0, 3.0, 4.0]),
    );
    let sd = 5.25f64.sqrt();
    for (g, w) in y.iter().zip([-0.5 / sd, -3.5 / sd, 1.5 / sd, 2.5 / sd]) {
        assert!((g - w).abs() < 1e-12, "{y:?}");
    }
}

#[test]
fn silence_takes_any_bottoms_and_passes_zero_gradients() {
    let mut l = layer(r#"type: "Silence""#);
    let (a, b) = (input(&[2, 3], 1), input(&[4], 2));
    assert!(l.reshape(&[&a, &b], &[]).unwrap().is_empty());
    l.forward(&[&a, &b], &[]).unwrap();
    a.mutable_cpu_diff().unwrap().fill(5.0);
    b.mutable_cpu_diff().unwrap().fill(5.0);
    l.backward(&[], &[true, false], &[&a, &b]).unwrap();
    assert!(a.diff_to_vec().unwrap().iter().all(|&d| d == 0.0));
    assert!(b.diff_to_vec().unwrap().iter().all(|&d| d == 5.0));
    // In a net: the blob it silences is no output.
    let net = blob_layers::net::Net::<f32>::from_prototxt(
        r#"input: "x" input_shape { dim: 2 }
           layer { name: "a" type: "AbsVal" bottom: "x" top: "y" }
           layer { name: "s" type: "Silence" bottom: "y" }"#,
        blob_layers::net::NetState::test(),
    )
    .unwrap();
    assert!(net.outputs().is_empty(), "{:?}", net.outputs());
}

#[test]
fn embed_batch_reindex_parameter() {
    // Embed: indices in, rows of the weights (and the bias) out; the
    // weights and the bias take the gradients, the indices none.
    let indices = || values(&[2, 3], vec![0.0, 4.0, 2.0, 4.0, 1.0, 0.0]);
    let mut l = layer(&format!(
        r#"type: "Embed" embed_param {{ num_output: 3 input_dim: 5 {FILLED} }}"#
    ));
    let report = CHECKER.check(l.as_mut(), &[indices()]).unwrap();
    assert_eq!(report.checked, 5 * 3 + 3, "the weights and the bias");
    let mut top = Blob::<f64>::default();
    let x = indices();
    let shapes = l.reshape(&[&x], &[&top]).unwrap();
    assert_eq!(shapes[0].dims, [2, 3, 3]);
    top.reshape(&shapes[0].dims).unwrap();
    l.forward(&[&x], &[&top]).unwrap();
    let (w, b) = (
        l.blobs()[0].to_vec().unwrap(),
        l.blobs()[1].to_vec().unwrap(),
    );
    assert_eq!(
        top.to_vec().unwrap()[3..6],
        [w[12] + b[0], w[13] + b[1], w[14] + b[2]],
        "row 4"
    );
    let bad = values(&[1], vec![5.0]);
    let err = l.forward(&[&bad], &[&top]).unwrap_err().to_string();
    assert!(
        err.contains("input 0 is 5, not an index below input_dim 5"),
        "{err}"
    );

    // BatchReindex: items repeated and reordered; gradients add up.
    let mut l = layer(r#"type: "BatchReindex""#);
    let report = CHECKER
        .check(
            l.as_mut(),
            &[input(&[3, 2, 2], 4), values(&[4], vec![2.0, 0.0, 2.0, 1.0])],
        )
        .unwrap();
    assert_eq!(report.checked, 12);

    // Parameter: its blob is its top.
    let mut l = layer(r#"type: "Parameter" parameter_param { shape { dim: 2 dim: 3 } }"#);
    let mut top = Blob::<f64>::default();
    let shapes = l.reshape(&[], &[&top]).unwrap();
    assert_eq!(shapes[0].dims, [2, 3]);
    top.reshape(&shapes[0].dims).unwrap();
    l.blobs()[0]
        .mutable_cpu_data()
        .unwrap()
        .copy_from_slice(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    l.forward(&[], &[&top]).unwrap();
    assert_eq!(top.to_vec().unwrap(), [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let report = CHECKER.check(l.as_mut(), &[]).unwrap();
    assert_eq!(report.checked, 6);
}

#[test]
fn filter_keeps_the_selected_items() {
    let param = ParamMessage::from_text(
        &schema::LAYER_PARAMETER,
        &TextMessage::parse(r#"type: "Filter" bottom: "a" bottom: "b" bottom: "sel""#).unwrap(),
    )
    .unwrap();
    let build = || {
        LayerRegistry::<f64>::with_caffe_layers()
            .build("Filter", &param)
            .unwrap()
    };
    let selector = || values(&[4, 1], vec![1.0, 0.0, 1.0, 1.0]);
    let mut l = build();
    let report = CHECKER
        .check_with_tops(
            l.as_mut(),
            &[input(&[4, 3], 1), input(&[4, 2, 2], 2), selector()],
            2,
        )
        .unwrap();
    assert_eq!(
        report.checked,
        12 + 16,
        "both data bottoms, not the selector"
    );
    assert!(!l.allow_force_backward(2) && l.allow_force_backward(1));
    let a = values(&[4, 1], vec![10.0, 20.0, 30.0, 40.0]);
    let (b, s) = (copy(&a), selector());
    let (mut ta, mut tb) = (Blob::<f64>::default(), Blob::<f64>::default());
    let shapes = l.reshape(&[&a, &b, &s], &[&ta, &tb]).unwrap();
    assert_eq!(shapes[0].dims, [3, 1]);
    ta.reshape(&shapes[0].dims).unwrap();
    tb.reshape(&shapes[1].dims).unwrap();
    l.forward(&[&a, &b, &s], &[&ta, &tb]).unwrap();
    assert_eq!(ta.to_vec().unwrap(), [10.0, 30.0, 40.0]);
}

#[test]
fn accuracy_top_k_ties_and_ignored_labels() {
    let mut l = layer(r#"type: "Accuracy" accuracy_param { top_k: 2 ignore_label: 7 }"#);
    let scores = Blob::<f64>::from_vec(
        &[4, 3],
        vec![
            0.1, 0.5, 0.4, // label 2: second best, right at top 2
            0.3, 0.3, 0.3, // label 0: all tied, right
            0.9, 0.5, 0.1, // label 2: third, wrong
            0.0, 0.0, 1.0, // ignored
        ],
    )
    .unwrap();
    let labels = Blob::<f64>::from_vec(&[4], vec![2.0, 0.0, 2.0, 7.0]).unwrap();
    let mut top = Blob::<f64>::default();
    let shapes = l.reshape(&[&scores, &labels], &[&top]).unwrap();
    top.reshape(&shapes[0].dims).unwrap();
    l.forward(&[&scores, &labels], &[&top]).unwrap();
    assert!((top.cpu_data().unwrap()[0] - 2.0 / 3.0).abs() < 1e-12);
    // A second top: each class's share of its own positions (class 1
    // has none: 0), as Caffe's per-class accuracy.
    let (mut all, mut per_class) = (Blob::<f64>::default(), Blob::<f64>::default());
    let shapes = l.reshape(&[&scores, &labels], &[&all, &per_class]).unwrap();
    all.reshape(&shapes[0].dims).unwrap();
    per_class.reshape(&shapes[1].dims).unwrap();
    l.forward(&[&scores, &labels], &[&all, &per_class]).unwrap();
    assert_eq!(per_class.shape(), [3]);
    assert_eq!(per_class.to_vec().unwrap(), [1.0, 0.0, 0.5]);
    // A label that is no class (SegNet's void 11 of 11, not ignored)
    // is a miss: 2 right of 4.
    let void = Blob::<f64>::from_vec(&[4], vec![2.0, 0.0, 2.0, 3.0]).unwrap();
    l.forward(&[&scores, &void], &[&all, &per_class]).unwrap();
    assert!((all.cpu_data().unwrap()[0] - 0.5).abs() < 1e-12);
    assert_eq!(per_class.to_vec().unwrap(), [1.0, 0.0, 0.5]);
}

#[test]
fn concat_slice_flatten_permute_reshape() {
    let mut l = layer(r#"type: "Concat" concat_param { axis: 1 }"#);
    let bottoms = [input(&[2, 2, 3], 1), input(&[2, 3, 3], 2)];
    assert_eq!(
        CHECKER.check(l.as_mut(), &bottoms).unwrap().checked,
        12 + 18
    );
    let mut l = layer(r#"type: "Slice" slice_param { axis: 2 slice_point: 1 slice_point: 3 }"#);
    assert_eq!(
        CHECKER
            .check_with_tops(l.as_mut(), &[input(&[2, 2, 4], 3)], 3)
            .unwrap()
            .checked,
        16
    );
    check(r#"type: "Flatten""#, &[&[2, 3, 2, 2]]);
    check(
        r#"type: "Permute" permute_param { order: 0 order: 2 order: 3 order: 1 }"#,
        &[&[2, 3, 2, 4]],
    );
    check(
        r#"type: "Permute" permute_param { order: 1 }"#,
        &[&[2, 3, 4]],
    );
    check(
        r#"type: "Reshape" reshape_param { shape { dim: 0 dim: -1 dim: 2 } }"#,
        &[&[2, 3, 4]],
    );
}

#[test]
fn eltwise_each_operation() {
    for op in ["SUM", "PROD", "MAX"] {
        let coeffs = if op == "SUM" {
            " coeff: 0.5 coeff: -2 coeff: 1"
        } else {
            ""
        };
        let mut l = layer(&format!(
            r#"type: "Eltwise" bottom: "a" bottom: "b" bottom: "c" eltwise_param {{ operation: {op}{coeffs} }}"#
        ));
        let bottoms = [input(&[2, 5], 1), input(&[2, 5], 2), input(&[2, 5], 3)];
        CHECKER
            .check(l.as_mut(), &bottoms)
            .unwrap_or_else(|e| panic!("{op}: {e}"));
    }
    let mut unstable =
        layer(r#"type: "Eltwise" eltwise_param { operation: PROD stable_prod_grad: false }"#);
    CHECKER
        .check(unstable.as_mut(), &[input(&[3, 2], 4), input(&[3, 2], 5)])
        .unwrap();
}

#[test]
fn batch_norm_with_batch_and_global_statistics() {
    check(
        r#"type: "BatchNorm" batch_norm_param { use_global_stats: false }"#,
        &[&[3, 2, 2, 2]],
    );
    // Global statistics from the blobs: mean 1, variance 4 (sums over a
    // factor of 2).
    let mut l = layer(r#"type: "BatchNorm" batch_norm_param { use_global_stats: true eps: 0 }"#);
    let x = Blob::<f64>::from_vec(&[1, 1, 2], vec![3.0, -1.0]).unwrap();
    let mut y = Blob::<f64>::default();
    let shapes = l.reshape(&[&x], &[&y]).unwrap();
    y.reshape(&shapes[0].dims).unwrap();
    l.blobs()[0].mutable_cpu_data().unwrap()[0] = 2.0;
    l.blobs()[1].mutable_cpu_data().unwrap()[0] = 8.0;
    l.blobs()[2].mutable_cpu_data().unwrap()[0] = 2.0;
    l.forward(&[&x], &[&y]).unwrap();
    assert_eq!(y.to_vec().unwrap(), [1.0, -1.0]);
    CHECKER.check(l.as_mut(), &[x]).unwrap();
}

#[test]
fn scale_and_bias_learned_and_given() {
    check(
        r#"type: "Scale" scale_param { bias_term: true filler { type: "gaussian" } bias_filler { type: "gaussian" } }"#,
        &[&[2, 3, 2]],
    );
    let mut given = layer(r#"type: "Scale" scale_param { axis: 0 }"#);
    let report = CHECKER
        .check(given.as_mut(), &[input(&[2, 3], 1), input(&[2, 3], 2)])
        .unwrap();
    assert_eq!(report.checked, 12, "both bottoms");
    check(
        r#"type: "Bias" bias_param { filler { type: "gaussian" } }"#,
        &[&[2, 3, 2]],
    );
    // A bias given as a second bottom (it once panicked looking for a
    // learned one that such a layer does not have).
    let mut given = layer(r#"type: "Bias" bias_param { axis: 0 }"#);
    let report = CHECKER
        .check(given.as_mut(), &[input(&[2, 3], 1), input(&[2, 3], 2)])
        .unwrap();
    assert_eq!(report.checked, 12, "both bottoms");
}

#[test]
fn padded_pooling() {
    check(
        r#"type: "Pooling" pooling_param { pool: MAX kernel_size: 3 stride: 1 pad: 1 }"#,
        &[&[1, 2, 4, 5]],
    );
    check(
        r#"type: "Pooling" pooling_param { pool: AVE kernel_size: 3 stride: 2 pad: 1 }"#,
        &[&[1, 2, 5, 5]],
    );
    for pool in ["MAX", "AVE"] {
        check(
            &format!(
                r#"type: "Pooling" pooling_param {{ pool: {pool} kernel_h: 3 kernel_w: 2
                   stride_h: 1 stride_w: 2 pad_h: 1 pad_w: 0 }}"#
            ),
            &[&[1, 2, 5, 6]],
        );
    }
    check(
        r#"type: "Pooling" pooling_param { pool: AVE global_pooling: true }"#,
        &[&[2, 3, 4, 7]],
    );
}

#[test]
fn element_wise_layers_with_parameters() {
    for text in [
        r#"type: "AbsVal""#,
        r#"type: "Power" power_param { power: 2 scale: 0.5 shift: 3 }"#,
        r#"type: "Power" power_param { power: 0.5 scale: 1 shift: 2 }"#,
        r#"type: "ELU" elu_param { alpha: 0.7 }"#,
        r#"type: "BNLL""#,
        r#"type: "Exp" exp_param { base: 2 scale: 0.5 shift: 0.1 }"#,
        r#"type: "Exp""#,
        r#"type: "Log" log_param { base: 10 scale: 1 shift: 2 }"#,
        r#"type: "Clip" clip_param { min: -0.5 max: 0.5 }"#,
        r#"type: "ReLU" relu_param { negative_slope: 0.1 }"#,
        r#"type: "Swish""#,
        r#"type: "Swish" swish_param { beta: 1.7 }"#,
    ] {
        check(text, &[&[2, 3, 2]]);
    }
}

#[test]
fn element_wise_values_as_caffe_defines_them() {
    let run = |text: &str, x: Vec<f64>| -> Vec<f64> {
        let mut l = layer(text);
        let x = Blob::from_vec(&[x.len()], x).unwrap();
        let mut y = Blob::<f64>::default();
        let shapes = l.reshape(&[&x], &[&y]).unwrap();
        y.reshape(&shapes[0].dims).unwrap();
        l.forward(&[&x], &[&y]).unwrap();
        y.to_vec().unwrap()
    };
    assert_eq!(
        run(
            r#"type: "Threshold" threshold_param { threshold: 0.5 }"#,
            vec![0.5, 0.6, -1.0]
        ),
        [0.0, 1.0, 0.0]
    );
    assert_eq!(
        run(
            r#"type: "Clip" clip_param { min: 0 max: 6 }"#,
            vec![-1.0, 3.0, 7.0]
        ),
        [0.0, 3.0, 6.0]
    );
    // power * scale == 0: the input is ignored.
    assert_eq!(
        run(
            r#"type: "Power" power_param { power: 2 scale: 0 shift: 3 }"#,
            vec![5.0]
        ),
        [9.0]
    );
    assert_eq!(
        run(r#"type: "Power" power_param { power: 0 }"#, vec![5.0]),
        [1.0]
    );
    assert_eq!(
        run(
            r#"type: "ReLU" relu_param { negative_slope: 0.5 }"#,
            vec![-2.0, 2.0]
        ),
        [-1.0, 2.0]
    );
}

/// A whole net's gradients against central differences of its loss: an
/// in-place chain BatchNorm -> Scale -> ReLU, where BatchNorm's backward
/// must use the output it normalized, not what the layers after it left
/// in the shared top (Caffe keeps `x_norm_` for this).
#[test]
fn in_place_batch_norm_scale_relu_chain_in_a_net() {
    use blob_layers::net::{Net, NetState};
    let text = r#"force_backward: true
        input: "data" input_shape { dim: 3 dim: 2 dim: 3 dim: 3 }
        input: "label" input_shape { dim: 3 }
        layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
                convolution_param { num_output: 4 kernel_size: 2 weight_filler { type: "gaussian" std: 0.5 } } }
        layer { name: "bn" type: "BatchNorm" bottom: "conv" top: "conv" }
        layer { name: "scale" type: "Scale" bottom: "conv" top: "conv"
                scale_param { bias_term: true filler { type: "gaussian" std: 1 } bias_filler { type: "gaussian" std: 0.5 } } }
        layer { name: "relu" type: "ReLU" bottom: "conv" top: "conv" }
        layer { name: "ip" type: "InnerProduct" bottom: "conv" top: "ip"
                inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.5 } } }
        layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }"#;
    blob_kernels::cpu::set_seed(3);
    let mut net = Net::<f64>::from_prototxt(text, NetState::train()).unwrap();
    let x = input(&[3, 2, 3, 3], 5).to_vec().unwrap();
    net.blob("data")
        .unwrap()
        .mutable_cpu_data()
        .unwrap()
        .copy_from_slice(&x);
    net.blob("label")
        .unwrap()
        .mutable_cpu_data()
        .unwrap()
        .copy_from_slice(&[0.0, 2.0, 1.0]);
    net.clear_param_diffs().unwrap();
    net.forward().unwrap();
    net.backward().unwrap();
    let analytic = net.blob("data").unwrap().diff_to_vec().unwrap();
    let gamma = net.layer_blobs("scale").unwrap()[0].diff_to_vec().unwrap();
    let step = 1e-5;
    // The blob a value lives in: the input, or the scale's gamma.
    fn target<'n>(net: &'n Net<f64>, which: &str) -> &'n blob_runtime::Blob<f64> {
        match which {
            "data" => net.blob("data").unwrap(),
            _ => &net.layer_blobs("scale").unwrap()[0],
        }
    }
    let mut checked = 0;
    for (which, grads) in [("data", &analytic), ("scale", &gamma)] {
        for (i, &want) in grads.iter().enumerate() {
            let v = target(&net, which).cpu_data().unwrap()[i];
            let mut loss_at = |value: f64| {
                target(&net, which).mutable_cpu_data().unwrap()[i] = value;
                net.forward().unwrap()
            };
            let (plus, minus) = (loss_at(v + step), loss_at(v - step));
            loss_at(v);
            let numeric = (plus - minus) / (2.0 * step);
            assert!(
                (numeric - want).abs() <= 1e-6 * want.abs().max(1.0),
                "{which}[{i}]: backward {want}, central differences {numeric}"
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 54 + 4);
}

/// Six priors tiling the image 3 x 2 (variances 0.1 0.1 0.2 0.2) as
/// PriorBox's top, and two images' ground truth as AnnotatedData's:
/// image 0 a class-1 box over prior 0, image 1 a difficult class-2 box
/// between priors 4 and 5, and a padding row.
fn ssd_inputs() -> (Blob<f64>, Blob<f64>) {
    let mut priors = Vec::new();
    for k in 0..6 {
        let (col, row) = ((k % 3) as f64, (k / 3) as f64);
        priors.extend([col / 3.0, row / 2.0, (col + 1.0) / 3.0, (row + 1.0) / 2.0]);
    }
    for _ in 0..6 {
        priors.extend([0.1, 0.1, 0.2, 0.2]);
    }
    let truth = vec![
        0.0, 1.0, 0.0, 0.0, 0.0, 0.3, 0.45, 0.0, //
        1.0, 2.0, 0.0, 0.4, 0.5, 0.95, 1.0, 1.0, //
        -1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
    ];
    (values(&[1, 2, 24], priors), values(&[1, 1, 3, 8], truth))
}

/// SSD's MultiBoxLoss: the location and confidence gradients for each
/// loss, matching, mining and normalization (the priors and the ground
/// truth take none).
#[test]
fn multibox_loss_each_loss_matching_mining_and_normalization() {
    let (priors, truth) = ssd_inputs();
    let cases = [
        // SSD's own settings (smooth L1, softmax, MAX_NEGATIVE, VALID).
        ("num_classes: 3 code_type: CENTER_SIZE", "", 1),
        (
            "num_classes: 3 code_type: CENTER_SIZE neg_pos_ratio: 1",
            "loss_param { normalization: FULL }",
            1,
        ),
        (
            "num_classes: 3 code_type: CORNER loc_weight: 2.5 match_type: BIPARTITE",
            "loss_param { normalization: BATCH_SIZE }",
            1,
        ),
        (
            "num_classes: 3 loc_loss_type: L2 conf_loss_type: LOGISTIC mining_type: NONE \
             share_location: false code_type: CORNER_SIZE",
            "loss_param { normalization: NONE }",
            3,
        ),
        (
            "num_classes: 3 mining_type: NONE use_difficult_gt: false \
             map_object_to_agnostic: false code_type: CENTER_SIZE",
            "",
            1,
        ),
    ];
    for (param, loss_param, loc_classes) in cases {
        let text =
            format!(r#"type: "MultiBoxLoss" multibox_loss_param {{ {param} }} {loss_param}"#);
        let mut l = layer(&text);
        let bottoms = [
            input(&[2, 6 * loc_classes * 4], 3),
            input(&[2, 6 * 3], 4),
            copy(&priors),
            copy(&truth),
        ];
        let report = CHECKER
            .check(l.as_mut(), &bottoms)
            .unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(
            report.checked,
            2 * 6 * loc_classes * 4 + 2 * 6 * 3,
            "{text}: location and confidence alone"
        );
        // Something reached each: matched offsets and classified scores.
        for (b, what) in [(0, "location"), (1, "confidence")] {
            let diff = bottoms[b].diff_to_vec().unwrap();
            assert!(diff.iter().any(|&d| d != 0.0), "{text}: no {what} gradient");
        }
    }
}
