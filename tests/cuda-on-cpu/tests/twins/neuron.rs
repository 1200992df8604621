//! `neuron.cu` against the CPU's element-wise layers built from their
//! parameters, as `neuron/cuda.rs` calls the kernels; in place against
//! out of place for the layers that allow it.

use cuda_on_cpu as k;

use crate::{CpuRun, assert_close, random, run_on_cpu};

/// The kernels' calls for `kind` with parameters `p`, out of place.
fn gpu_calls(kind: i32, p: [f64; 3], x: &[f32], dy: &[f32]) -> CpuRun {
    let n = x.len();
    let [a, b, c] = p;
    let mut y = vec![f32::NAN; n];
    let mut dx = vec![f32::NAN; n];
    // SAFETY: every buffer holds n values.
    unsafe {
        k::neuron_f32(n, n as i64, kind, a, b, c, x, &mut y);
        k::neuron_grad_f32(n, n as i64, kind, a, b, c, x, &y, dy, &mut dx);
    }
    CpuRun {
        y,
        dx,
        param_diffs: vec![],
    }
}

/// The same in place: the output over the input, the gradient over the
/// output's.
fn gpu_calls_in_place(kind: i32, p: [f64; 3], x: &[f32], dy: &[f32]) -> CpuRun {
    let n = x.len();
    let [a, b, c] = p;
    let mut y = x.to_vec();
    let mut d = dy.to_vec();
    // SAFETY: every buffer holds n values.
    unsafe {
        k::neuron_inplace_f32(n, n as i64, kind, a, b, c, &mut y);
        k::neuron_grad_inplace_f32(n, n as i64, kind, a, b, c, &y, &mut d);
    }
    CpuRun {
        y,
        dx: d,
        param_diffs: vec![],
    }
}

#[test]
fn element_wise_layers_with_parameters_match_cpu() {
    let ln2 = 2f64.ln();
    // (layer, kernel kind and parameters, input range, in place allowed)
    let cases: [(&str, i32, [f64; 3], f32, bool); 12] = [
        (r#"type: "AbsVal""#, 0, [0.0; 3], 2.0, false),
        (
            r#"type: "Power" power_param { power: 2 scale: 0.5 shift: 3 }"#,
            1,
            [2.0, 0.5, 3.0],
            2.0,
            false,
        ),
        (
            r#"type: "Power" power_param { power: 0.5 scale: 1 shift: 3 }"#,
            1,
            [0.5, 1.0, 3.0],
            2.0,
            false,
        ),
        (
            r#"type: "ELU" elu_param { alpha: 0.7 }"#,
            2,
            [0.7, 0.0, 0.0],
            3.0,
            true,
        ),
        (r#"type: "BNLL""#, 3, [0.0; 3], 60.0, false),
        (
            r#"type: "Exp" exp_param { base: 2 scale: 0.5 shift: 0.1 }"#,
            4,
            [ln2, 0.5, 0.1],
            3.0,
            true,
        ),
        (
            r#"type: "Log" log_param { base: 2 scale: 1 shift: 3 }"#,
            5,
            [ln2, 1.0, 3.0],
            2.0,
            false,
        ),
        (
            r#"type: "Clip" clip_param { min: -0.5 max: 0.5 }"#,
            7,
            [-0.5, 0.5, 0.0],
            1.0,
            false,
        ),
        (
            r#"type: "ReLU" relu_param { negative_slope: 0.1 }"#,
            8,
            [0.1, 0.0, 0.0],
            1.0,
            true,
        ),
        (
            r#"type: "Swish" swish_param { beta: 1.5 }"#,
            9,
            [1.5, 0.0, 0.0],
            4.0,
            false,
        ),
        (r#"type: "ReLU6""#, 10, [0.0; 3], 8.0, true),
        (
            r#"type: "Threshold" threshold_param { threshold: 0.2 }"#,
            6,
            [0.2, 0.0, 0.0],
            1.0,
            false,
        ),
    ];
    let special = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -0.0, 0.0];
    for (text, kind, p, range, inplace) in cases {
        let (x, dy) = (random(60, 1, -range, range), random(60, 2, -1.0, 1.0));
        check_non_finite(text, kind, p, &special, &x);
        let got = gpu_calls(kind, p, &x, &dy);
        if kind == 6 {
            // Threshold has no backward pass: the forward alone.
            let want = run_threshold_forward(text, &x);
            assert_close(&format!("{text}: output"), &got.y, &want, 0.0);
            continue;
        }
        let want = run_on_cpu(text, &[], (&[3, 20], &x), (&[3, 20], &dy));
        assert_close(&format!("{text}: output"), &got.y, &want.y, 0.0);
        assert_close(&format!("{text}: input gradient"), &got.dx, &want.dx, 0.0);
        if inplace {
            let again = gpu_calls_in_place(kind, p, &x, &dy);
            assert_close(&format!("{text} in place: output"), &again.y, &want.y, 0.0);
            assert_close(
                &format!("{text} in place: gradient"),
                &again.dx,
                &want.dx,
                0.0,
            );
        }
    }
}

/// Threshold's forward pass on the CPU.
fn run_threshold_forward(text: &str, x: &[f32]) -> Vec<f32> {
    let param = blob_proto::ParamMessage::from_text(
        &blob_proto::schema::LAYER_PARAMETER,
        &blob_proto::TextMessage::parse(text).unwrap(),
    )
    .unwrap();
    let mut layer = blob_layers::registry::LayerRegistry::<f32>::with_caffe_layers()
        .build("Threshold", &param)
        .unwrap();
    let xb = blob_runtime::Blob::<f32>::from_vec(&[x.len()], x.to_vec()).unwrap();
    let yb = blob_runtime::Blob::<f32>::new(&[x.len()]).unwrap();
    layer.forward(&[&xb], &[&yb]).unwrap();
    yb.to_vec().unwrap()
}

/// The forward pass of `kind` on NaN, infinities and signed zeros (each
/// value of `special` beside `x`'s), as the CPU layer `text` gives them:
/// NaN for NaN, zeros with their sign.
fn check_non_finite(text: &str, kind: i32, p: [f64; 3], special: &[f32], x: &[f32]) {
    let mut x = x.to_vec();
    for (i, &v) in special.iter().enumerate() {
        x[3 * i] = v;
    }
    let got = gpu_calls(kind, p, &x, &vec![0.0; x.len()]).y;
    let want = if kind == 6 {
        run_threshold_forward(text, &x)
    } else {
        run_on_cpu(text, &[], (&[3, 20], &x), (&[3, 20], &vec![0.0; x.len()])).y
    };
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!(
            (g.is_nan() && w.is_nan()) || g.to_bits() == w.to_bits(),
            "{text}: {} gives {g:?}, the CPU's {w:?}",
            x[i]
        );
    }
}
