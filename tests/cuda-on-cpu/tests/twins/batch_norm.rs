//! `batch_norm.cu` against the CPU side of the run-time BatchNorm layer,
//! with global statistics and the batch's, out of place and in place.

use blob_layers::net::{Net, NetState};
use cuda_on_cpu as k;

use crate::{assert_close, random};

/// A net of one BatchNorm over `x` (2, 3, 2, 2), its running sums set
/// to `mean_sum`, `var_sum` and a factor of 4, run forward.
fn forward_on_cpu(global: bool, x: &[f32], mean_sum: &[f32], var_sum: &[f32]) -> Net<f32> {
    let mut net = Net::<f32>::from_prototxt(
        &format!(
            r#"input: "x" input_shape {{ dim: 2 dim: 3 dim: 2 dim: 2 }}
               force_backward: true
               layer {{ name: "l" type: "BatchNorm" bottom: "x" top: "y"
                       batch_norm_param {{ use_global_stats: {global} eps: 0.001 moving_average_fraction: 0.9 }} }}"#
        ),
        NetState::train(),
    )
    .unwrap();
    let blobs = net.layer_blobs("l").unwrap();
    blobs[0]
        .mutable_cpu_data()
        .unwrap()
        .copy_from_slice(mean_sum);
    blobs[1]
        .mutable_cpu_data()
        .unwrap()
        .copy_from_slice(var_sum);
    blobs[2].mutable_cpu_data().unwrap()[0] = 4.0;
    net.blob("x")
        .unwrap()
        .mutable_cpu_data()
        .unwrap()
        .copy_from_slice(x);
    net.forward().unwrap();
    net
}

#[test]
fn batch_norm_with_global_statistics_matches_cpu() {
    let (n, c, spatial) = (2usize, 3usize, 4usize);
    let count = n * c * spatial;
    let x = random(count, 1, -2.0, 2.0);
    let (mean_sum, var_sum) = (random(c, 2, -1.0, 1.0), random(c, 3, 0.5, 2.0));
    let net = forward_on_cpu(true, &x, &mean_sum, &var_sum);
    let want = net.blob("y").unwrap().to_vec().unwrap();

    // The layer's statistics: the sums over the factor, the deviation
    // sqrt(var + eps), as the host computes them before the launch.
    let mut stats: Vec<f32> = mean_sum
        .iter()
        .map(|m| (f64::from(*m) / 4.0) as f32)
        .collect();
    stats.extend(
        var_sum
            .iter()
            .map(|v| (f64::from(*v) / 4.0 + 0.001).sqrt() as f32),
    );
    let mut y = vec![f32::NAN; count];
    // SAFETY: x and y hold count values, stats 2c.
    unsafe {
        k::batch_norm_global_f32(
            count,
            count as i64,
            c as i32,
            spatial as i64,
            &x,
            &stats,
            &mut y,
        )
    };
    assert_close("batch norm", &y, &want, 1e-6);
    let mut in_place = x.clone();
    // SAFETY: in_place holds count values, stats 2c.
    unsafe {
        k::batch_norm_global_inplace_f32(
            count,
            count as i64,
            c as i32,
            spatial as i64,
            &stats,
            &mut in_place,
        )
    };
    assert_close("batch norm in place", &in_place, &want, 1e-6);
}

/// The training pass: batch statistics (the sums as `Gpu::add_sums` makes
/// them, on the CPU here), the running sums updated, the output, then the
/// input's gradient, out of place and in place; and the gradient with
/// global statistics.
#[test]
fn batch_norm_with_batch_statistics_matches_cpu() {
    use blob_kernels::sums::SumLayout;
    let (n, c, spatial) = (2usize, 3usize, 4usize);
    let count = n * c * spatial;
    let x = random(count, 1, -2.0, 2.0);
    let dy = random(count, 4, -1.0, 1.0);
    let (mean_sum, var_sum) = (random(c, 2, -1.0, 1.0), random(c, 3, 0.5, 2.0));
    let mut net = forward_on_cpu(false, &x, &mean_sum, &var_sum);
    let want_y = net.blob("y").unwrap().to_vec().unwrap();
    let want_running: Vec<Vec<f32>> = net
        .layer_blobs("l")
        .unwrap()
        .iter()
        .map(|b| b.to_vec().unwrap())
        .collect();
    net.blob("y")
        .unwrap()
        .mutable_cpu_diff()
        .unwrap()
        .copy_from_slice(&dy);
    net.backward().unwrap();
    let want_dx = net.blob("x").unwrap().diff_to_vec().unwrap();

    // batch_norm/cuda.rs's calls.
    let layout = SumLayout::channels_of(n, c, spatial);
    let per_channel = (n * spatial) as f32;
    let ci = c as i32;
    let mut sums = vec![0.0f32; 2 * c];
    layout.add_on_cpu(&x, &mut sums[..c]);
    let mut stats = vec![f32::NAN; 2 * c];
    let mut terms = vec![f32::NAN; count];
    let (mut run_mean, mut run_var, mut run_factor) =
        (mean_sum.clone(), var_sum.clone(), vec![4.0f32]);
    let correction = f64::from(per_channel) / (f64::from(per_channel) - 1.0);
    // SAFETY: every buffer holds what its kernel reads and writes.
    unsafe {
        k::batch_norm_means_f32(c, ci, per_channel, &sums[..c], &mut stats);
        k::batch_norm_square_dev_f32(
            count,
            count as i64,
            ci,
            spatial as i64,
            &x,
            &stats,
            &mut terms,
        );
    }
    sums[..c].fill(0.0);
    layout.add_on_cpu(&terms, &mut sums[..c]);
    // SAFETY: as above.
    unsafe {
        k::batch_norm_finish_f32(
            c,
            ci,
            per_channel,
            0.001,
            0.9,
            correction,
            &sums[..c],
            &mut stats,
            &mut run_mean,
            &mut run_var,
            &mut run_factor,
        );
    }
    let mut y = vec![f32::NAN; count];
    // SAFETY: as above.
    unsafe {
        k::batch_norm_global_f32(count, count as i64, ci, spatial as i64, &x, &stats, &mut y)
    };
    assert_close("normalized", &y, &want_y, 1e-5);
    assert_close("running means", &run_mean, &want_running[0], 1e-5);
    assert_close("running variances", &run_var, &want_running[1], 1e-5);
    assert_close("running factor", &run_factor, &want_running[2], 1e-6);

    sums.fill(0.0);
    for ((t, d), v) in terms.iter_mut().zip(&dy).zip(&y) {
        *t = d * v; // Gpu::binary's Mul
    }
    layout.add_on_cpu(&dy, &mut sums[..c]);
    layout.add_on_cpu(&terms, &mut sums[c..]);
    let mut dx = vec![f32::NAN; count];
    let mut in_place = dy.clone();
    // SAFETY: as above.
    unsafe {
        k::batch_norm_backward_f32(
            count,
            count as i64,
            ci,
            spatial as i64,
            per_channel,
            &dy,
            &y,
            &sums,
            &stats,
            &mut dx,
        );
        k::batch_norm_backward_inplace_f32(
            count,
            count as i64,
            ci,
            spatial as i64,
            per_channel,
            &y,
            &sums,
            &stats,
            &mut in_place,
        );
    }
    assert_close("input gradient", &dx, &want_dx, 1e-5);
    assert_close("input gradient in place", &in_place, &want_dx, 1e-5);

    // Global statistics: dy over the deviations.
    let mut global = dy.clone();
    // SAFETY: as above.
    unsafe {
        k::batch_norm_backward_global_f32(
            count,
            count as i64,
            ci,
            spatial as i64,
            &stats,
            &mut global,
        )
    };
    for (i, (g, d)) in global.iter().zip(&dy).enumerate() {
        let want = d / stats[c + (i / spatial) % c];
        assert_eq!(*g, want, "global gradient [{i}]");
    }
}
