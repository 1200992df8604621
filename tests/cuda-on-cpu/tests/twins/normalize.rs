//! `normalize.cu` against the CPU side of the SSD fork's Normalize: each
//! norm (an image's or a pixel's) and factor (one or one per channel), out
//! of place and in place, in the order `normalize/cuda.rs` launches them.

use blob_kernels::sums::SumLayout;
use cuda_on_cpu as k;

use crate::{assert_close, cpu_net, random};

/// Each norm's sum of `terms`, as `cuda.rs`'s `sum_per_norm` makes it.
fn sum_per_norm(across: bool, (n, c, p): (usize, usize, usize), terms: &[f32]) -> Vec<f32> {
    if across {
        let mut sums = vec![0.0; n];
        SumLayout::rows_of(n, c * p).add_on_cpu(terms, &mut sums);
        return sums;
    }
    let mut sums = vec![f32::NAN; n * p];
    // SAFETY: terms holds n * c * p values, sums n * p.
    unsafe {
        k::normalize_channel_sums_f32(n * p, (n * p) as i64, c as i32, p as i64, terms, &mut sums)
    };
    sums
}

#[test]
fn normalize_matches_cpu() {
    let (n, c, h, w) = (2usize, 3usize, 4usize, 5usize);
    let (p, count) = (h * w, n * c * h * w);
    let dims = (n, c, p);
    let x = random(count, 41, -2.0, 2.0);
    let dy = random(count, 42, -1.0, 1.0);
    let eps = 1e-3f32;
    for across in [false, true] {
        for shared in [false, true] {
            let what = format!("normalize (across_spatial {across}, channel_shared {shared})");
            let scale = if shared {
                vec![1.7]
            } else {
                random(c, 43, 0.5, 2.0)
            };
            let layer = format!(
                r#"layer {{ name: "l" type: "Normalize" bottom: "x" top: "y" norm_param {{ across_spatial: {across} channel_shared: {shared} eps: {eps} }} }}"#
            );
            let (want_y, want_dx, want_dp) =
                cpu_net(&layer, &[n, c, h, w], &x, &dy, std::slice::from_ref(&scale));
            let (across_i, shared_i) = (i32::from(across), i32::from(shared));

            let squares: Vec<f32> = x.iter().map(|v| v * v).collect();
            let mut norms = sum_per_norm(across, dims, &squares);
            // SAFETY: norms holds its own length.
            unsafe { k::normalize_root_f32(norms.len(), norms.len() as i64, eps, &mut norms) };
            let mut y = vec![f32::NAN; count];
            // SAFETY: x and y hold count values, norms one per norm, scale
            // one or c.
            unsafe {
                k::normalize_forward_f32(
                    count,
                    count as i64,
                    c as i32,
                    p as i64,
                    across_i,
                    shared_i,
                    &x,
                    &norms,
                    &scale,
                    &mut y,
                )
            };
            assert_close(&what, &y, &want_y, 1e-5);
            let mut in_place = x.clone();
            // SAFETY: as above, in_place holding x.
            unsafe {
                k::normalize_forward_inplace_f32(
                    count,
                    count as i64,
                    c as i32,
                    p as i64,
                    across_i,
                    shared_i,
                    &norms,
                    &scale,
                    &mut in_place,
                )
            };
            assert_close(&format!("{what} in place"), &in_place, &want_y, 1e-5);

            let mut terms = vec![f32::NAN; count];
            // SAFETY: x, dy and terms hold count values, scale one or c.
            unsafe {
                k::normalize_dot_terms_f32(
                    count,
                    count as i64,
                    c as i32,
                    p as i64,
                    shared_i,
                    &x,
                    &dy,
                    &scale,
                    &mut terms,
                )
            };
            let dots = sum_per_norm(across, dims, &terms);
            // SAFETY: x, dy and terms hold count values, norms one per norm.
            unsafe {
                k::normalize_scale_terms_f32(
                    count,
                    count as i64,
                    c as i32,
                    p as i64,
                    across_i,
                    &x,
                    &dy,
                    &norms,
                    &mut terms,
                )
            };
            let mut dscale = vec![0.0; scale.len()];
            let layout = if shared {
                SumLayout::rows_of(1, count)
            } else {
                SumLayout::channels_of(n, c, p)
            };
            layout.add_on_cpu(&terms, &mut dscale);
            assert_close(
                &format!("{what} factor gradient"),
                &dscale,
                &want_dp[0],
                1e-5,
            );
            let mut dx = vec![f32::NAN; count];
            // SAFETY: x, dy and dx hold count values, norms and dots one
            // per norm, scale one or c.
            unsafe {
                k::normalize_backward_f32(
                    count,
                    count as i64,
                    c as i32,
                    p as i64,
                    across_i,
                    shared_i,
                    &x,
                    &dy,
                    &scale,
                    &norms,
                    &dots,
                    &mut dx,
                )
            };
            assert_close(&format!("{what} gradient"), &dx, &want_dx, 1e-5);
        }
    }
}
