//! `eltwise.cu` against the CPU side of the run-time Eltwise layer (SUM
//! with coefficients, PROD with both gradients, MAX), as a net runs it.

use blob_layers::net::{Net, NetState};
use cuda_on_cpu as k;

use crate::{assert_close, random};

const N: usize = 2 * 3 * 4;

/// The CPU net's output and each bottom's diff, for three bottoms.
fn cpu(param: &str, xs: &[Vec<f32>; 3], dy: &[f32]) -> (Vec<f32>, Vec<Vec<f32>>) {
    let text = format!(
        r#"force_backward: true
           input: "a" input_shape {{ dim: 2 dim: 3 dim: 4 }}
           input: "b" input_shape {{ dim: 2 dim: 3 dim: 4 }}
           input: "c" input_shape {{ dim: 2 dim: 3 dim: 4 }}
           layer {{ name: "l" type: "Eltwise" bottom: "a" bottom: "b" bottom: "c" top: "y" eltwise_param {{ {param} }} }}"#
    );
    let mut net = Net::<f32>::from_prototxt(&text, NetState::test()).unwrap();
    for (name, x) in ["a", "b", "c"].iter().zip(xs) {
        net.blob(name)
            .unwrap()
            .mutable_cpu_data()
            .unwrap()
            .copy_from_slice(x);
    }
    net.forward().unwrap();
    let y = net.blob("y").unwrap().to_vec().unwrap();
    net.blob("y")
        .unwrap()
        .mutable_cpu_diff()
        .unwrap()
        .copy_from_slice(dy);
    net.backward().unwrap();
    let dxs = ["a", "b", "c"]
        .iter()
        .map(|n| net.blob(n).unwrap().diff_to_vec().unwrap())
        .collect();
    (y, dxs)
}

fn inputs() -> ([Vec<f32>; 3], Vec<f32>) {
    // Away from 0 (PROD divides by its inputs), with ties for MAX.
    let mut xs = [1, 2, 3].map(|s| random(N, s, 0.5, 2.0));
    let tied = xs[1][..4].to_vec();
    xs[2][..4].copy_from_slice(&tied);
    (xs, random(N, 4, -1.0, 1.0))
}

#[test]
fn eltwise_sum_with_coefficients_matches_cpu() {
    let (xs, dy) = inputs();
    let coeffs = [0.5f32, -2.0, 3.0];
    let (want_y, want_dx) = cpu("operation: SUM coeff: 0.5 coeff: -2 coeff: 3", &xs, &dy);
    let mut y = vec![f32::NAN; N];
    // SAFETY: every buffer holds N values.
    unsafe {
        k::eltwise_scale_f32(N, N as i64, coeffs[0], &xs[0], &mut y);
        k::eltwise_add_scaled_f32(N, N as i64, coeffs[1], &xs[1], &mut y);
        k::eltwise_add_scaled_f32(N, N as i64, coeffs[2], &xs[2], &mut y);
    }
    assert_close("sum", &y, &want_y, 1e-6);
    for (i, want) in want_dx.iter().enumerate() {
        let mut dx = vec![f32::NAN; N];
        // SAFETY: dy and dx hold N values.
        unsafe { k::eltwise_scale_f32(N, N as i64, coeffs[i], &dy, &mut dx) };
        assert_close("sum gradient", &dx, want, 1e-6);
    }
}

#[test]
fn eltwise_prod_both_gradients_match_cpu() {
    let (xs, dy) = inputs();
    for stable in [true, false] {
        let (want_y, want_dx) = cpu(
            &format!("operation: PROD stable_prod_grad: {stable}"),
            &xs,
            &dy,
        );
        let mut y = vec![f32::NAN; N];
        // SAFETY: every buffer holds N values.
        unsafe {
            k::eltwise_scale_f32(N, N as i64, 1.0, &xs[0], &mut y);
            k::eltwise_multiply_f32(N, N as i64, &xs[1], &mut y);
            k::eltwise_multiply_f32(N, N as i64, &xs[2], &mut y);
        }
        assert_close("prod", &y, &want_y, 1e-6);
        for (i, want) in want_dx.iter().enumerate() {
            let mut dx = vec![f32::NAN; N];
            // SAFETY: every buffer holds N values.
            unsafe {
                if stable {
                    k::eltwise_scale_f32(N, N as i64, 1.0, &dy, &mut dx);
                    for (j, x) in xs.iter().enumerate() {
                        if j != i {
                            k::eltwise_multiply_f32(N, N as i64, x, &mut dx);
                        }
                    }
                } else {
                    k::eltwise_prod_grad_f32(N, N as i64, &dy, &y, &xs[i], &mut dx);
                }
            }
            assert_close("prod gradient", &dx, want, 1e-5);
        }
    }
}

#[test]
fn eltwise_max_and_its_gradient_match_cpu() {
    let (xs, dy) = inputs();
    let (want_y, want_dx) = cpu("operation: MAX", &xs, &dy);
    let (mut y, mut mask) = (vec![f32::NAN; N], vec![f32::NAN; N]);
    // SAFETY: every buffer holds N values.
    unsafe {
        k::eltwise_max_first_f32(N, N as i64, &xs[0], &xs[1], &mut y, &mut mask);
        k::eltwise_max_next_f32(N, N as i64, 2, &xs[2], &mut y, &mut mask);
    }
    assert_close("max", &y, &want_y, 0.0);
    for (i, want) in want_dx.iter().enumerate() {
        let mut dx = vec![f32::NAN; N];
        // SAFETY: every buffer holds N values.
        unsafe { k::eltwise_max_grad_f32(N, N as i64, i as i32, &dy, &mask, &mut dx) };
        assert_close(
            "max gradient (ties to the earlier bottom but 0 and 1)",
            &dx,
            want,
            0.0,
        );
    }
}
