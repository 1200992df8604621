//! NaN and infinities through every element-wise layer, MAX pooling,
//! Eltwise MAX and Softmax, against Caffe's CPU formulas as Caffe writes
//! them (`std::max`, `std::min` and comparisons included): a layer that
//! diverged stays visible through the layers after it exactly where
//! Caffe's does, and where Caffe's comparisons pass NaN over, so do ours.

use blob_layers::net::{Net, NetState};

const INPUTS: [f32; 10] = [
    f32::NAN,
    f32::INFINITY,
    f32::NEG_INFINITY,
    -0.0,
    0.0,
    -1.5,
    2.5,
    -1e-3,
    f32::MAX,
    f32::MIN,
];

/// `std::max(a, b)` and `std::min(a, b)` as C++ defines them: NaN in `a`
/// is returned, NaN in `b` is not.
fn std_max(a: f64, b: f64) -> f64 {
    if a < b { b } else { a }
}
fn std_min(a: f64, b: f64) -> f64 {
    if b < a { b } else { a }
}

/// A net of one layer `l` from `x` (of `shape`) into `y`, run forward.
fn forward(layer: &str, shape: &[usize], x: &[f32], bottoms: usize) -> Vec<f32> {
    let dims: String = shape.iter().map(|d| format!("dim: {d} ")).collect();
    let mut text = String::new();
    let mut bottom = String::new();
    for b in 0..bottoms {
        text += &format!("input: \"x{b}\" input_shape {{ {dims}}} ");
        bottom += &format!("bottom: \"x{b}\" ");
    }
    text += &format!("layer {{ name: \"l\" {bottom} top: \"y\" {layer} }}");
    let mut net = Net::<f32>::from_prototxt(&text, NetState::test()).unwrap();
    let per = x.len() / bottoms;
    for b in 0..bottoms {
        net.blob(&format!("x{b}"))
            .unwrap()
            .mutable_cpu_data()
            .unwrap()
            .copy_from_slice(&x[b * per..(b + 1) * per]);
    }
    net.forward().unwrap();
    net.blob("y").unwrap().to_vec().unwrap()
}

/// Equal as Caffe's bits would be: NaN for NaN, and zeros with their sign.
#[track_caller]
fn assert_same(what: &str, got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let same = (g.is_nan() && w.is_nan()) || g.to_bits() == w.to_bits();
        let close = g.is_finite() && w.is_finite() && (g - w).abs() <= 1e-6 * w.abs().max(1.0);
        assert!(
            same || (close && *g != 0.0),
            "{what}: input {} gives {g:?}, Caffe's formula {w:?}",
            INPUTS
                .get(i)
                .map_or(String::from("?"), |v| format!("{v:?}"))
        );
    }
}

#[test]
fn element_wise_layers_follow_caffes_formulas_on_non_finite_values() {
    type Formula = fn(f64) -> f64;
    let cases: [(&str, Formula); 15] = [
        // relu_layer.cpp: max(x, 0) + negative_slope * min(x, 0).
        (r#"type: "ReLU""#, |x| {
            std_max(x, 0.0) + 0.0 * std_min(x, 0.0)
        }),
        (r#"type: "ReLU" relu_param { negative_slope: 0.1 }"#, |x| {
            std_max(x, 0.0) + 0.1 * std_min(x, 0.0)
        }),
        // sigmoid_layer.cpp and tanh_layer.cpp.
        (r#"type: "Sigmoid""#, |x| 1.0 / (1.0 + (-x).exp())),
        (r#"type: "TanH""#, f64::tanh),
        (r#"type: "AbsVal""#, f64::abs),
        // elu_layer.cpp: max(x, 0) + alpha * (exp(min(x, 0)) - 1).
        (r#"type: "ELU" elu_param { alpha: 0.5 }"#, |x| {
            std_max(x, 0.0) + 0.5 * (std_min(x, 0.0).exp() - 1.0)
        }),
        // bnll_layer.cpp.
        (r#"type: "BNLL""#, |x| {
            if x > 0.0 {
                x + (1.0 + (-x).exp()).ln()
            } else {
                (1.0 + x.exp()).ln()
            }
        }),
        // threshold_layer.cpp: (x > threshold) ? 1 : 0.
        (
            r#"type: "Threshold" threshold_param { threshold: 0.2 }"#,
            |x| f64::from(u8::from(x > 0.2)),
        ),
        // clip_layer.cpp: std::max(min, std::min(x, max)).
        (r#"type: "Clip" clip_param { min: -1 max: 2 }"#, |x| {
            std_max(-1.0, std_min(x, 2.0))
        }),
        // The forks' relu6_layer.cpp: std::min(std::max(x, 0), 6).
        (r#"type: "ReLU6""#, |x| std_min(std_max(x, 0.0), 6.0)),
        // power_layer.cpp: (shift + scale * x) ^ power.
        (
            r#"type: "Power" power_param { power: 2 scale: 0.5 shift: 1 }"#,
            |x| (1.0 + 0.5 * x).powi(2),
        ),
        (
            r#"type: "Power" power_param { power: 1 scale: -2 shift: 0 }"#,
            |x| -2.0 * x,
        ),
        // swish_layer.cpp: x * sigmoid(beta x).
        (r#"type: "Swish""#, |x| x * (1.0 / (1.0 + (-x).exp()))),
        // exp_layer.cpp and log_layer.cpp (base e).
        (r#"type: "Exp""#, f64::exp),
        (r#"type: "Log" log_param { shift: 2 }"#, |x| (2.0 + x).ln()),
    ];
    for (layer, formula) in cases {
        let got = forward(layer, &[INPUTS.len()], &INPUTS, 1);
        let want: Vec<f32> = INPUTS
            .iter()
            .map(|&x| formula(f64::from(x)) as f32)
            .collect();
        assert_same(layer, &got, &want);
    }
}

#[test]
fn relu_keeps_nan_in_place_too() {
    let text = "input: \"x\" input_shape { dim: 10 } \
                layer { name: \"r\" type: \"ReLU\" bottom: \"x\" top: \"x\" }";
    let mut net = Net::<f32>::from_prototxt(text, NetState::test()).unwrap();
    net.blob("x")
        .unwrap()
        .mutable_cpu_data()
        .unwrap()
        .copy_from_slice(&INPUTS);
    net.forward().unwrap();
    let got = net.blob("x").unwrap().to_vec().unwrap();
    assert!(got[0].is_nan() && got[2].is_nan(), "{got:?}");
    assert_eq!(got[3].to_bits(), (-0.0f32).to_bits());
    assert_eq!(got[5].to_bits(), 0.0f32.to_bits());
}

/// pooling_layer.cpp: each window starts at -FLT_MAX and takes a value
/// only if `value > max`, so NaN is passed over and a window of NaN or
/// -inf alone gives -FLT_MAX.
#[test]
fn max_pooling_passes_nan_over_as_caffes_comparison_does() {
    let x = [
        f32::NAN,
        f32::NAN,
        f32::NAN,
        f32::NAN, // window 0
        f32::NAN,
        1.0,
        f32::NEG_INFINITY,
        0.5, // window 1
        f32::INFINITY,
        f32::NAN,
        -2.0,
        3.0, // window 2
        f32::NEG_INFINITY,
        f32::NEG_INFINITY,
        f32::NEG_INFINITY,
        f32::NEG_INFINITY, // window 3
    ];
    // One channel 2 x 8 as four 2 x 2 windows: lay the windows out.
    let mut plane = [0f32; 16];
    for (w, window) in x.chunks(4).enumerate() {
        plane[2 * w] = window[0];
        plane[2 * w + 1] = window[1];
        plane[8 + 2 * w] = window[2];
        plane[8 + 2 * w + 1] = window[3];
    }
    let got = forward(
        r#"type: "Pooling" pooling_param { pool: MAX kernel_size: 2 stride: 2 }"#,
        &[1, 1, 2, 8],
        &plane,
        1,
    );
    assert_same(
        "MAX pooling",
        &got,
        &[f32::MIN, 1.0, f32::INFINITY, f32::MIN],
    );
}

/// eltwise_layer.cpp: `a > b ? a : b` for the first two, then
/// `b > top ? b : top`: order decides where NaN stands.
#[test]
fn eltwise_max_takes_nan_where_caffes_comparisons_do() {
    let a = [f32::NAN, 1.0, f32::NAN, f32::INFINITY];
    let b = [1.0, f32::NAN, f32::NAN, f32::NAN];
    let x: Vec<f32> = a.iter().chain(&b).copied().collect();
    let got = forward(
        r#"type: "Eltwise" eltwise_param { operation: MAX }"#,
        &[4],
        &x,
        2,
    );
    let want: Vec<f32> = a
        .iter()
        .zip(&b)
        .map(|(&a, &b)| if a > b { a } else { b })
        .collect();
    assert_same("Eltwise MAX", &got, &want);
}

/// softmax_layer.cpp: subtract the channel maximum, exponentiate, divide
/// by the sum: a NaN or +inf in a group makes the whole group NaN, -inf
/// gives 0.
#[test]
fn softmax_spreads_nan_over_its_group_as_caffe_does() {
    let x = [
        1.0,
        f32::NAN,
        2.0, // group 0
        f32::INFINITY,
        0.0,
        1.0, // group 1
        f32::NEG_INFINITY,
        0.0,
        0.0, // group 2
    ];
    let got = forward(r#"type: "Softmax""#, &[3, 3], &x, 1);
    assert!(got[..6].iter().all(|v| v.is_nan()), "{got:?}");
    assert_same("Softmax with -inf", &got[6..], &[0.0, 0.5, 0.5]);
}

/// The one-layer net `layer` over `x` (of `shape`), its parameters all
/// 0.5: which of its outputs are NaN.
fn nan_mask(layer: &str, shape: &[usize], x: &[f32]) -> Vec<bool> {
    let dims: String = shape.iter().map(|d| format!("dim: {d} ")).collect();
    let text = format!(
        "input: \"x\" input_shape {{ {dims}}} layer {{ name: \"l\" bottom: \"x\" top: \"y\" {layer} }}"
    );
    let mut net = Net::<f32>::from_prototxt(&text, NetState::test()).unwrap();
    for p in net.layer_blobs("l").unwrap() {
        p.mutable_cpu_data().unwrap().fill(0.5);
    }
    net.blob("x")
        .unwrap()
        .mutable_cpu_data()
        .unwrap()
        .copy_from_slice(x);
    net.forward().unwrap();
    let y = net.blob("y").unwrap().to_vec().unwrap();
    assert!(
        y.iter().all(|v| v.is_nan() || v.is_finite()),
        "{layer}: {y:?}"
    );
    y.iter().map(|v| v.is_nan()).collect()
}

/// A NaN in the input reaches exactly the outputs whose sums read it, as
/// Caffe's arithmetic carries it: no layer drops it by a comparison or
/// spreads it to outputs that do not read it.
#[test]
fn arithmetic_layers_carry_nan_to_exactly_the_outputs_that_read_it() {
    // One 8 x 8 plane, NaN at row 4, column 4.
    let (h, w) = (8, 8);
    let mut plane = vec![0.25f32; h * w];
    plane[4 * w + 4] = f32::NAN;
    let near = |r: usize, c: usize, reach: usize| r.abs_diff(4) <= reach && c.abs_diff(4) <= reach;

    // Convolution 3x3, pad 1, Caffe's own im2col: the 3 x 3 around it.
    let got = nan_mask(
        r#"type: "Convolution" convolution_param { num_output: 2 kernel_size: 3 pad: 1 engine: CAFFE }"#,
        &[1, 1, h, w],
        &plane,
    );
    let want: Vec<bool> = (0..2 * h * w)
        .map(|i| near(i % (h * w) / w, i % w, 1))
        .collect();
    assert_eq!(got, want, "Convolution");

    // AVE pooling 2 x 2, stride 2: the one window that holds it.
    let got = nan_mask(
        r#"type: "Pooling" pooling_param { pool: AVE kernel_size: 2 stride: 2 }"#,
        &[1, 1, h, w],
        &plane,
    );
    let want: Vec<bool> = (0..16).map(|i| i == 2 * 4 + 2).collect();
    assert_eq!(got, want, "AVE pooling");

    // InnerProduct: every output of its item, none of the other's.
    let mut items = vec![0.25f32; 2 * 4];
    items[1] = f32::NAN;
    let got = nan_mask(
        r#"type: "InnerProduct" inner_product_param { num_output: 3 }"#,
        &[2, 4],
        &items,
    );
    assert_eq!(got, [true, true, true, false, false, false], "InnerProduct");

    // LRN across 3 channels: the same pixel of its channel and the two
    // beside it (Caffe's running sum keeps the NaN for every later
    // channel too, an artifact of its sliding window; the GPU's kernel
    // and ours give the outputs whose window reads it).
    let mut channels = vec![0.25f32; 5 * 4];
    channels[2 * 4 + 1] = f32::NAN;
    let got = nan_mask(
        r#"type: "LRN" lrn_param { local_size: 3 }"#,
        &[1, 5, 2, 2],
        &channels,
    );
    let want: Vec<bool> = (0..20)
        .map(|i| i % 4 == 1 && (1..=3).contains(&(i / 4)))
        .collect();
    assert_eq!(got, want, "LRN");

    // Element by element: Scale with its bias, BatchNorm with its stored
    // statistics, Power, Dropout at test time.
    for layer in [
        r#"type: "Scale" scale_param { bias_term: true }"#,
        r#"type: "BatchNorm" batch_norm_param { use_global_stats: true }"#,
        r#"type: "Dropout""#,
    ] {
        let got = nan_mask(layer, &[1, 1, h, w], &plane);
        let want: Vec<bool> = (0..h * w).map(|i| i == 4 * w + 4).collect();
        assert_eq!(got, want, "{layer}");
    }
}

/// power_layer.cpp scales, then shifts, each rounded in the blob's type
/// (`caffe_scal`, `caffe_add_scalar`), then raises to the power: a
/// Power of 1 (an input's normalisation, `x * 0.017 - 1.8`) gives those
/// bits, not the once-rounded `x * 0.017 + (-1.8)` of double.
#[test]
fn power_scales_then_shifts_in_the_blobs_type() {
    let x: Vec<f32> = (0..4096).map(|i| (i as f32 * 0.37).sin() * 300.0).collect();
    let (scale, shift) = (0.017f32, -1.8f32);
    for power in [1.0f32, 2.0] {
        let layer =
            format!(r#"type: "Power" power_param {{ power: {power} scale: 0.017 shift: -1.8 }}"#);
        let got = forward(&layer, &[x.len()], &x, 1);
        let caffe: Vec<f32> = x.iter().map(|&v| (v * scale + shift).powf(power)).collect();
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        if power == 1.0 {
            assert_eq!(bits(&got), bits(&caffe), "{layer}");
            let once: Vec<f32> = x
                .iter()
                .map(|&v| (f64::from(v) * f64::from(scale) + f64::from(shift)) as f32)
                .collect();
            assert_ne!(
                bits(&once),
                bits(&caffe),
                "the inputs tell the roundings apart"
            );
        } else {
            for (g, c) in got.iter().zip(&caffe) {
                assert!(
                    (g - c).abs() <= 1e-6 * c.abs().max(1.0),
                    "{layer}: {g} vs {c}"
                );
            }
        }
    }
}
