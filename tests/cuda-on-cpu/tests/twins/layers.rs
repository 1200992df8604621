//! `inner_product.cu`, `activation.cu` and `dropout.cu` against the CPU
//! InnerProduct, ReLU/Sigmoid/TanH, Dropout and ENet's spatial dropout.

use blob_kernels::cpu::{Transpose, gemm};
use blob_kernels::sums::SumLayout;
use blob_layers::registry::LayerRegistry;
use blob_runtime::Blob;
use cuda_on_cpu as k;

use crate::sums::add_sums;
use crate::{assert_close, random, run_on_cpu};

/// `inner_product/cuda.rs`: y = x W^T + b; dW += dy^T x, db += colsum(dy),
/// dx = dy W.
#[test]
fn inner_product_matches_cpu() {
    let (b, kk, n) = (5, 243, 7);
    let weight = random(n * kk, 10, -0.5, 0.5);
    let bias = random(n, 11, -0.5, 0.5);
    let x = random(b * kk, 1, -1.0, 1.0);
    let dy = random(b * n, 2, -1.0, 1.0);
    let want = run_on_cpu(
        r#"type: "InnerProduct" inner_product_param { num_output: 7 }"#,
        &[weight.clone(), bias.clone()],
        (&[b, 3, 9, 9], &x),
        (&[b, n], &dy),
    );

    let mut y = vec![f32::NAN; b * n];
    gemm(
        Transpose::No,
        Transpose::Yes,
        b,
        n,
        kk,
        1.0,
        &x,
        &weight,
        0.0,
        &mut y,
    );
    // SAFETY: y holds b*n values, bias n.
    unsafe { k::add_bias_rows_f32(b * n, (b * n) as i64, n as i32, &bias, &mut y) };
    assert_close("inner product output", &y, &want.y, 1e-5);
    let mut dw = vec![0.0; n * kk];
    gemm(
        Transpose::Yes,
        Transpose::No,
        n,
        kk,
        b,
        1.0,
        &dy,
        &x,
        1.0,
        &mut dw,
    );
    let mut db = vec![0.0; n];
    add_sums(&SumLayout::columns_of(b, n), &dy, &mut db);
    let mut dx = vec![f32::NAN; b * kk];
    gemm(
        Transpose::No,
        Transpose::No,
        b,
        kk,
        n,
        1.0,
        &dy,
        &weight,
        0.0,
        &mut dx,
    );
    assert_close("inner product input gradient", &dx, &want.dx, 1e-5);
    assert_close(
        "inner product weight gradient",
        &dw,
        &want.param_diffs[0],
        1e-5,
    );
    assert_close(
        "inner product bias gradient",
        &db,
        &want.param_diffs[1],
        1e-5,
    );
}

/// An activation's output and input gradient on host blobs, in place
/// (output and gradient in the input's blob) or not.
fn activation_on_cpu(kind: &str, x: &[f32], dy: &[f32], in_place: bool) -> (Vec<f32>, Vec<f32>) {
    let mut layer = LayerRegistry::<f32>::with_caffe_layers()
        .build_text(&format!(r#"type: "{kind}""#))
        .unwrap();
    let xb = Blob::<f32>::new(&[4, 20]).unwrap();
    xb.mutable_cpu_data().unwrap().copy_from_slice(x);
    let yb = Blob::<f32>::new(&[4, 20]).unwrap();
    let y = if in_place { &xb } else { &yb };
    layer.forward(&[&xb], &[y]).unwrap();
    let out = y.to_vec().unwrap();
    y.mutable_cpu_diff().unwrap().copy_from_slice(dy);
    layer.backward(&[y], &[true], &[&xb]).unwrap();
    (out, xb.diff_to_vec().unwrap())
}

/// `activation/cuda.rs` for each kind (0 ReLU, 1 Sigmoid, 2 TanH), out of
/// place and in place, against the CPU layer run the same way.
#[test]
fn activations_match_cpu() {
    let n = 4 * 20;
    let mut x = random(n, 1, -3.0, 3.0);
    x[0] = 0.0; // ReLU's slope at 0 is Caffe's 0
    let dy = random(n, 2, -1.0, 1.0);
    let cpu = |kind: i32, in_place: bool| match kind {
        0 => activation_on_cpu("ReLU", &x, &dy, in_place),
        1 => activation_on_cpu("Sigmoid", &x, &dy, in_place),
        _ => activation_on_cpu("TanH", &x, &dy, in_place),
    };
    for kind in 0..3 {
        let (want_y, want_dx) = cpu(kind, false);
        let mut y = vec![f32::NAN; n];
        // SAFETY: x and y hold n values.
        unsafe { k::activate_f32(n, n as i64, kind, &x, &mut y) };
        let mut dx = vec![f32::NAN; n];
        // SAFETY: x, y, dy and dx hold n values.
        unsafe { k::activate_backward_f32(n, n as i64, kind, &x, &y, &dy, &mut dx) };
        assert_close(&format!("activation {kind}: output"), &y, &want_y, 1e-6);
        assert_close(&format!("activation {kind}: gradient"), &dx, &want_dx, 1e-6);

        let (want_y, want_dx) = cpu(kind, true);
        let mut y = x.clone();
        // SAFETY: y holds n values.
        unsafe { k::activate_inplace_f32(n, n as i64, kind, &mut y) };
        let mut d = dy.clone();
        // SAFETY: y and d hold n values.
        unsafe { k::activate_backward_inplace_f32(n, n as i64, kind, &y, &mut d) };
        assert_close(
            &format!("in-place activation {kind}: output"),
            &y,
            &want_y,
            1e-6,
        );
        assert_close(
            &format!("in-place activation {kind}: gradient"),
            &d,
            &want_dx,
            1e-6,
        );
    }
}

/// `dropout/cuda.rs` with the mask the CPU layer drew (read back from
/// which outputs it kept): the same outputs and gradients.
#[test]
fn dropout_matches_cpu() {
    let n = 1000;
    let x = random(n, 1, 0.5, 1.5); // never 0, so a 0 output is a drop
    let dy = random(n, 2, -1.0, 1.0);
    let drop = r#"type: "Dropout" dropout_param { dropout_ratio: 0.25 }"#;
    let want = run_on_cpu(drop, &[], (&[n], &x), (&[n], &dy));
    let keep: Vec<u32> = want.y.iter().map(|&v| u32::from(v != 0.0)).collect();
    let kept = keep.iter().filter(|&&b| b == 1).count();
    assert!(
        (650..850).contains(&kept),
        "{kept} of {n} kept at ratio 0.25"
    );
    let scale = 1.0 / 0.75;
    let mut y = vec![f32::NAN; n];
    // SAFETY: keep, x and y hold n values.
    unsafe { k::dropout_f32(n, n as i64, &keep, scale, &x, &mut y) };
    assert_close("dropout output", &y, &want.y, 1e-6);
    let mut dx = dy.clone();
    // SAFETY: keep and dx hold n values.
    unsafe { k::dropout_inplace_f32(n, n as i64, &keep, scale, &mut dx) };
    assert_close("dropout gradient", &dx, &want.dx, 1e-6);
}

/// `dropout/cuda.rs`'s spatial dropout with the maps the CPU layer kept
/// (read back from its outputs): the same bits, -0 for a dropped negative
/// value included, in and out of place.
#[test]
fn spatial_dropout_matches_cpu() {
    let (planes, plane) = (2 * 24, 35);
    let n = planes * plane;
    let x = random(n, 3, -1.5, 1.5);
    let dy = random(n, 4, -1.0, 1.0);
    let text = r#"type: "Python" python_param { module: "spatial_dropout"
        layer: "SpatialDropoutLayer" param_str: "{'phase': 'TRAIN', 'p': '0.3'}" }"#;
    let want = run_on_cpu(text, &[], (&[2, 24, 5, 7], &x), (&[2, 24, 5, 7], &dy));
    let keep: Vec<u32> = want
        .y
        .chunks(plane)
        .map(|map| u32::from(map.iter().any(|&v| v != 0.0)))
        .collect();
    let kept = keep.iter().filter(|&&b| b == 1).count();
    assert!(
        (20..45).contains(&kept),
        "{kept} of {planes} maps kept at p 0.3"
    );
    let scale = (1.0f64 / 0.7) as f32;
    let mut y = vec![f32::NAN; n];
    // SAFETY: x and y hold n values, keep one a map of `plane`.
    unsafe { k::spatial_dropout_f32(n, n as i64, plane as i64, &keep, scale, &x, &mut y) };
    let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&y), bits(&want.y), "spatial dropout output");
    let mut dx = dy.clone();
    // SAFETY: dx holds n values, keep one a map of `plane`.
    unsafe { k::spatial_dropout_inplace_f32(n, n as i64, plane as i64, &keep, scale, &mut dx) };
    assert_eq!(bits(&dx), bits(&want.dx), "spatial dropout gradient");
}

/// The `user_layer` example's own kernel (its user layer's CUDA side)
/// against what that layer's CPU side computes: `y[b, c] = x[b, c] *
/// gamma[c]`, used for the output and for the input's gradient.
#[test]
fn user_layer_kernel_matches_its_cpu_side() {
    let (batch, channels) = (7, 32);
    let n = batch * channels;
    let x = random(n, 1, -1.0, 1.0);
    let gamma = random(channels, 2, 0.5, 1.5);
    let mut y = vec![f32::NAN; n];
    // SAFETY: x and y hold n values, gamma channels.
    unsafe { k::scale_channels_f32(n, n as i64, channels as i32, &x, &gamma, &mut y) };
    let want: Vec<f32> = x
        .chunks_exact(channels)
        .flat_map(|row| row.iter().zip(&gamma).map(|(v, g)| v * g))
        .collect();
    assert_eq!(y, want);
}

/// NaN, infinities and signed zeros through `activation.cu` as through
/// the CPU layer (NaN for NaN, zeros with their sign): ReLU keeps NaN and
/// makes -inf NaN, as Caffe's sum does.
#[test]
fn activations_keep_non_finite_values_as_the_cpu() {
    let special = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -0.0, 0.0];
    let n = 4 * 20;
    let x: Vec<f32> = random(n, 3, -3.0, 3.0)
        .iter()
        .enumerate()
        .map(|(i, &v)| if i % 3 == 0 { special[i / 3 % 5] } else { v })
        .collect();
    let dy = random(n, 4, -1.0, 1.0);
    for (kind, name) in [(0, "ReLU"), (1, "Sigmoid"), (2, "TanH")] {
        let (want_y, want_dx) = activation_on_cpu(name, &x, &dy, false);
        let mut y = vec![0.5; n];
        // SAFETY: x and y hold n values.
        unsafe { k::activate_f32(n, n as i64, kind, &x, &mut y) };
        let mut dx = vec![0.5; n];
        // SAFETY: x, y, dy and dx hold n values.
        unsafe { k::activate_backward_f32(n, n as i64, kind, &x, &y, &dy, &mut dx) };
        for (what, got, want) in [("output", &y, &want_y), ("gradient", &dx, &want_dx)] {
            for (i, (g, w)) in got.iter().zip(want).enumerate() {
                // Finite non-zero values within an f32 rounding (the GPU's
                // tanhf and expf are not the CPU's); the rest to the bit.
                let near = w.is_finite() && *w != 0.0 && (g - w).abs() <= 1e-6 * w.abs().max(1.0);
                assert!(
                    (g.is_nan() && w.is_nan()) || g.to_bits() == w.to_bits() || near,
                    "{name} {what} at {}: {g:?}, the CPU's {w:?}",
                    x[i]
                );
            }
        }
    }
    assert!(activation_on_cpu("ReLU", &x, &dy, false).0[0].is_nan());
}
