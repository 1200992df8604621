//! `prelu.cu`, `lrn.cu` (across and within channels), and `softmax.cu`
//! over an inner axis, against the
//! CPU sides of the run-time PReLU, LRN and Softmax layers, as a net runs
//! them.

use cuda_on_cpu as k;

use crate::{assert_close, cpu_net, random};

#[test]
fn prelu_matches_cpu() {
    let (n, c, dim) = (2usize, 3usize, 20usize);
    let count = n * c * dim;
    let x = random(count, 11, -2.0, 2.0);
    let dy = random(count, 12, -1.0, 1.0);
    let slope = vec![0.25, -0.5, 1.5];
    let layer = r#"layer { name: "l" type: "PReLU" bottom: "x" top: "y" }"#;
    let (want_y, want_dx, want_dp) =
        cpu_net(layer, &[n, c, 4, 5], &x, &dy, std::slice::from_ref(&slope));

    let mut y = vec![f32::NAN; count];
    // SAFETY: x and y hold count values, slope c.
    unsafe {
        k::prelu_forward_f32(
            count,
            count as i64,
            c as i32,
            dim as i64,
            &x,
            &slope,
            &mut y,
        )
    };
    assert_close("prelu", &y, &want_y, 1e-6);
    let mut dslope = vec![0.0; c];
    // SAFETY: x and dy hold count values, dslope c.
    unsafe { k::prelu_slope_diff_f32(c, c as i32, count as i64, dim as i64, &x, &dy, &mut dslope) };
    assert_close("prelu slope gradient", &dslope, &want_dp[0], 1e-5);
    let mut dx = vec![f32::NAN; count];
    // SAFETY: x, dy and dx hold count values, slope c.
    unsafe {
        k::prelu_backward_f32(
            count,
            count as i64,
            c as i32,
            dim as i64,
            &x,
            &slope,
            &dy,
            &mut dx,
        )
    };
    assert_close("prelu gradient", &dx, &want_dx, 1e-6);
    let mut d = dy.clone();
    // SAFETY: x and d hold count values, slope c.
    unsafe {
        k::prelu_backward_inplace_f32(
            count,
            count as i64,
            c as i32,
            dim as i64,
            &x,
            &slope,
            &mut d,
        )
    };
    assert_close("prelu gradient in place", &d, &want_dx, 1e-6);

    // One shared slope: the kernels see one channel of c * dim values.
    let shared = r#"layer { name: "l" type: "PReLU" bottom: "x" top: "y" prelu_param { channel_shared: true } }"#;
    let (want_y, _, want_dp) = cpu_net(shared, &[n, c, 4, 5], &x, &dy, &[vec![-0.3]]);
    let mut y = vec![f32::NAN; count];
    // SAFETY: as above, with one slope.
    unsafe {
        k::prelu_forward_f32(
            count,
            count as i64,
            1,
            (c * dim) as i64,
            &x,
            &[-0.3],
            &mut y,
        )
    };
    assert_close("shared prelu", &y, &want_y, 1e-6);
    let mut dslope = vec![0.0];
    // SAFETY: as above, with one slope.
    unsafe { k::prelu_slope_diff_f32(1, 1, count as i64, (c * dim) as i64, &x, &dy, &mut dslope) };
    assert_close("shared prelu slope gradient", &dslope, &want_dp[0], 1e-5);
}

#[test]
fn softmax_over_channels_matches_cpu() {
    let (n, c, h, w) = (2usize, 3usize, 4usize, 5usize);
    let count = n * c * h * w;
    let x = random(count, 21, -3.0, 3.0);
    let dy = random(count, 22, -1.0, 1.0);
    let layer = r#"layer { name: "l" type: "Softmax" bottom: "x" top: "y" }"#;
    let (want_y, want_dx, _) = cpu_net(layer, &[n, c, h, w], &x, &dy, &[]);
    let positions = n * h * w;
    let mut prob = vec![f32::NAN; count];
    // SAFETY: x and prob hold n*c*h*w values.
    unsafe {
        k::softmax_rows_f32(
            positions,
            positions as i64,
            c as i32,
            (h * w) as i64,
            &x,
            &mut prob,
        )
    };
    assert_close("softmax over channels", &prob, &want_y, 1e-6);
    let mut dx = vec![f32::NAN; count];
    // SAFETY: prob, dy and dx hold n*c*h*w values.
    unsafe {
        k::softmax_backward_f32(
            positions,
            positions as i64,
            c as i32,
            (h * w) as i64,
            &prob,
            &dy,
            &mut dx,
        )
    };
    assert_close("softmax over channels gradient", &dx, &want_dx, 1e-5);
}

#[test]
fn lrn_across_channels_matches_cpu() {
    let (n, c, h, w) = (2usize, 7usize, 3usize, 4usize);
    let count = n * c * h * w;
    let plane = h * w;
    let x = random(count, 31, -2.0, 2.0);
    let dy = random(count, 32, -1.0, 1.0);
    let (size, alpha, beta, offset) = (5, 0.3f32, 0.75f32, 2.0f32);
    let layer = format!(
        r#"layer {{ name: "l" type: "LRN" bottom: "x" top: "y" lrn_param {{ local_size: {size} alpha: {alpha} beta: {beta} k: {offset} }} }}"#
    );
    let (want_y, want_dx, _) = cpu_net(&layer, &[n, c, h, w], &x, &dy, &[]);
    let (mut scale, mut y) = (vec![f32::NAN; count], vec![f32::NAN; count]);
    // SAFETY: x, scale and y hold count values.
    unsafe {
        k::lrn_forward_f32(
            count,
            count as i64,
            c as i32,
            plane as i64,
            size,
            alpha,
            beta,
            offset,
            &x,
            &mut scale,
            &mut y,
        )
    };
    assert_close("lrn", &y, &want_y, 1e-6);
    let mut dx = vec![f32::NAN; count];
    // SAFETY: every buffer holds count values.
    unsafe {
        k::lrn_backward_f32(
            count,
            count as i64,
            c as i32,
            plane as i64,
            size,
            alpha,
            beta,
            &x,
            &y,
            &scale,
            &dy,
            &mut dx,
        )
    };
    assert_close("lrn gradient", &dx, &want_dx, 1e-5);
}

#[test]
fn lrn_within_a_channel_matches_cpu() {
    // 5 x 6 planes: a 3 x 3 window is clipped on every side.
    let (n, c, h, w) = (2usize, 3usize, 5usize, 6usize);
    let count = n * c * h * w;
    let x = random(count, 33, -2.0, 2.0);
    let dy = random(count, 34, -1.0, 1.0);
    let (size, alpha, beta) = (3, 0.4f32, 0.75f32);
    let layer = format!(
        r#"layer {{ name: "l" type: "LRN" bottom: "x" top: "y" lrn_param {{ local_size: {size} alpha: {alpha} beta: {beta} norm_region: WITHIN_CHANNEL }} }}"#
    );
    let (want_y, want_dx, _) = cpu_net(&layer, &[n, c, h, w], &x, &dy, &[]);
    let (mut scale, mut y) = (vec![f32::NAN; count], vec![f32::NAN; count]);
    // SAFETY: x, scale and y hold count values.
    unsafe {
        k::lrn_within_forward_f32(
            count,
            count as i64,
            h as i64,
            w as i64,
            size,
            alpha,
            beta,
            &x,
            &mut scale,
            &mut y,
        )
    };
    assert_close("lrn within", &y, &want_y, 1e-6);
    let mut dx = vec![f32::NAN; count];
    // SAFETY: every buffer holds count values.
    unsafe {
        k::lrn_within_backward_f32(
            count,
            count as i64,
            h as i64,
            w as i64,
            size,
            alpha,
            beta,
            &x,
            &y,
            &scale,
            &dy,
            &mut dx,
        )
    };
    assert_close("lrn within gradient", &dx, &want_dx, 1e-5);
}
