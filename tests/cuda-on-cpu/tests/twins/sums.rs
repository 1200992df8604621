//! `sums.cu` as `Gpu::add_sums` calls it, against `SumLayout::add_on_cpu`
//! (bit for bit) and a plain sum in `f64`.

use blob_kernels::sums::SumLayout;
use cuda_on_cpu as k;

use crate::random;

/// `Gpu::add_sums`'s launches: a partial-sums pass per
/// `SumLayout::passes`, each reading the one before, then the final add.
pub fn add_sums(layout: &SumLayout, m: &[f32], sums: &mut [f32]) {
    assert!(m.len() >= layout.span() && sums.len() >= layout.sums);
    let mut input = m.to_vec();
    let mut lanes = 1;
    for (pass, pass_lanes) in layout.passes() {
        let total = pass.sums * pass_lanes;
        let mut partial = vec![f32::NAN; total];
        // SAFETY: input holds the pass's span, partial total values.
        unsafe {
            k::partial_sums_f32(
                total,
                total as i64,
                pass_lanes as i32,
                pass.len as i64,
                pass.run as i64,
                pass.sum_stride as i64,
                pass.run_stride as i64,
                &input,
                &mut partial,
            )
        };
        (input, lanes) = (partial, pass_lanes);
    }
    let l = lanes as i32;
    // SAFETY: input holds sums * lanes values, sums at least sums.
    unsafe { k::add_partial_sums_f32(layout.sums, layout.sums as i64, l, &input, sums) };
}

#[test]
fn strided_sums_match_cpu() {
    let layouts = [
        SumLayout::rows_of(3, 1000),
        SumLayout::rows_of(2, 70_001), // lanes of uneven length, two passes
        SumLayout::rows_of(3, 600_000), // the most lanes, then 128
        SumLayout::rows_of(4, 1),
        SumLayout::columns_of(300, 7),
        SumLayout::columns_of(1, 5),
        SumLayout::channels_of(5, 3, 49), // lanes longer than a run
        SumLayout::channels_of(64, 20, 576),
        SumLayout::channels_of(1000, 20, 576), // LeNet's conv1 at batch 1000
        SumLayout::channels_of(3, 4, 1),
    ];
    for layout in layouts {
        let m = random(layout.span(), 3, -1.0, 1.0);
        let start = random(layout.sums, 4, -1.0, 1.0);
        let mut gpu = start.clone();
        add_sums(&layout, &m, &mut gpu);
        let mut cpu = start.clone();
        layout.add_on_cpu(&m, &mut cpu);
        assert_eq!(gpu, cpu, "{layout:?}: kernels and add_on_cpu differ");
        for (r, (&got, &s0)) in gpu.iter().zip(&start).enumerate() {
            let want: f64 = s0 as f64
                + (0..layout.len)
                    .map(|t| m[layout.index(r, t)] as f64)
                    .sum::<f64>();
            assert!(
                (got as f64 - want).abs() <= 1e-4 * (layout.len as f64).sqrt().max(1.0),
                "{layout:?}: sum {r} is {got}, {want} in f64"
            );
        }
    }
}
