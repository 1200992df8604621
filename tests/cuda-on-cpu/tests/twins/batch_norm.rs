//! `batch_norm.cu` against the CPU side of the run-time BatchNorm layer
//! with global statistics, out of place and in place.

use blob_layers::net::{Net, NetState};
use cuda_on_cpu as k;

use crate::{assert_close, random};

#[test]
fn batch_norm_with_global_statistics_matches_cpu() {
    let (n, c, spatial) = (2usize, 3usize, 4usize);
    let count = n * c * spatial;
    let x = random(count, 1, -2.0, 2.0);
    let (mean_sum, var_sum) = (random(c, 2, -1.0, 1.0), random(c, 3, 0.5, 2.0));
    let factor = 4.0f32;
    let mut net = Net::<f32>::from_prototxt(
        r#"input: "x" input_shape { dim: 2 dim: 3 dim: 2 dim: 2 }
           layer { name: "l" type: "BatchNorm" bottom: "x" top: "y" batch_norm_param { use_global_stats: true eps: 0.001 } }"#,
        NetState::test(),
    )
    .unwrap();
    let blobs = net.layer_blobs("l").unwrap();
    blobs[0]
        .mutable_cpu_data()
        .unwrap()
        .copy_from_slice(&mean_sum);
    blobs[1]
        .mutable_cpu_data()
        .unwrap()
        .copy_from_slice(&var_sum);
    blobs[2].mutable_cpu_data().unwrap()[0] = factor;
    net.blob("x")
        .unwrap()
        .mutable_cpu_data()
        .unwrap()
        .copy_from_slice(&x);
    net.forward().unwrap();
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
