//! Every vector path this machine has gives the baseline's bits, and the
//! hand-written kernels give the same bits on AVX2 as on AVX-512.
//!
//! One test in its own binary: [`cpu::limit_isa`] is process-wide, and no
//! other test should run while it moves between paths.

use blob_kernels::Real;
use blob_kernels::cpu::{self, Isa, Transpose};

/// Lengths around the lane count, the block size and the parallel cut.
const LENGTHS: [usize; 9] = [0, 1, 31, 33, 100, 4095, 4097, 70_001, (1 << 18) + 3];

fn inputs<T: Real>(n: usize) -> (Vec<T>, Vec<T>) {
    cpu::set_seed(7);
    let mut x = vec![T::ZERO; n];
    let mut y = vec![T::ZERO; n];
    cpu::gaussian(T::ZERO, T::from_f64(3.0), &mut x).unwrap();
    cpu::uniform(T::from_f64(0.5), T::from_f64(2.0), &mut y).unwrap();
    if n > 3 {
        x[1] = T::from_f64(-0.0);
        x[2] = T::from_f64(f64::NAN);
    }
    (x, y)
}

type Binary<T> = fn(&[T], &[T], &mut [T]);
type Unary<T> = fn(&[T], &mut [T]);

/// Every result of every wrapped kernel, as bits, in a fixed order.
fn all_results<T: Real>() -> Vec<u64> {
    let mut out = Vec::new();
    let mut push = |v: &[T]| out.extend(v.iter().map(|t| t.to_f64().to_bits()));
    let a = T::from_f64(0.37);
    let b = T::from_f64(-1.25);
    for n in LENGTHS {
        let (x, y) = inputs::<T>(n);
        let xf: Vec<T> = x
            .iter()
            .map(|&v| if v.is_nan() { T::ONE } else { v })
            .collect();
        push(&[
            cpu::asum(&xf),
            cpu::sum(&xf),
            cpu::sumsq(&xf),
            cpu::dot(&xf, &y),
        ]);
        let mut z = y.clone();
        cpu::axpy(a, &x, &mut z);
        push(&z);
        cpu::axpby(a, &x, b, &mut z);
        push(&z);
        cpu::scal(b, &mut z);
        push(&z);
        cpu::scale(a, &x, &mut z);
        push(&z);
        // Caffe's Eltwise SUM: a zero fill and an axpy a bottom, the
        // same bits as the one pass on every path and length.
        let mut filled = vec![T::ZERO; n];
        cpu::axpy(a, &x, &mut filled);
        cpu::axpy(b, &y, &mut filled);
        cpu::sum_of_scaled(a, &x, b, &y, &mut z);
        assert_eq!(
            z.iter().map(|v| v.to_f64().to_bits()).collect::<Vec<_>>(),
            filled
                .iter()
                .map(|v| v.to_f64().to_bits())
                .collect::<Vec<_>>(),
            "sum_of_scaled of {n}"
        );
        push(&z);
        cpu::add_scalar(b, &mut z);
        push(&z);
        let binary: [Binary<T>; 4] = [cpu::add, cpu::sub, cpu::mul, cpu::div];
        for op in binary {
            op(&x, &y, &mut z);
            push(&z);
        }
        let unary: [Unary<T>; 8] = [
            cpu::sqr,
            cpu::sqrt,
            cpu::exp,
            cpu::log,
            cpu::abs,
            cpu::fabs,
            cpu::sign,
            cpu::sgnbit,
        ];
        for op in unary {
            op(&x, &mut z);
            push(&z);
        }
        let mut w = x.clone();
        cpu::mul_inplace(&mut w, &y);
        cpu::exp_inplace(&mut w);
        push(&w);
    }
    out
}

/// What the f32-only moves write (a convolution's shifted and phase
/// copies, an inner product's turned result and the panels of a weight
/// gradient), and the in-order sums of runs side by side,
/// as bits: runs shorter than a
/// register, whole ones with a tail, and panels of fewer than 16, 16 and
/// more columns over depths with a partial last block of 16.
fn moves() -> Vec<u64> {
    let (x, _) = inputs::<f32>(4096);
    let mut out = Vec::new();
    for (stride, len, rows) in [(28, 24, 28), (12, 8, 12), (40, 33, 5), (3, 1, 7)] {
        let mut dst = vec![f32::NAN; rows * (len + 2)];
        cpu::copy_rows(&x, stride, &mut dst, len + 2, [rows, len]);
        out.extend(dst.iter().map(|v| u64::from(v.to_bits())));
    }
    // Strided picks from a source that ends at the last value read (the
    // loads' masks stop there), into runs whose neighbours must stay: one
    // run, and three whose source runs overlap or lie apart.
    for step in 1..=5 {
        for len in [1, 15, 16, 17, 40] {
            for (rows, src_stride) in [(1, 0), (3, len), (3, 2 * len * step + 3)] {
                let src = &x[..(rows - 1) * src_stride + (len - 1) * step + 1];
                let mut dst = vec![f32::NAN; rows * (len + 2)];
                cpu::copy_strided_rows(src, src_stride, step, &mut dst[1..], len + 2, [rows, len]);
                out.extend(dst.iter().map(|v| u64::from(v.to_bits())));
            }
        }
    }
    for shape in [[60, 64], [17, 33], [1, 5]] {
        let mut dst = vec![f32::NAN; shape[0] * shape[1]];
        cpu::transpose(&x, shape, &mut dst);
        out.extend(dst.iter().map(|v| u64::from(v.to_bits())));
    }
    // Runs side by side and back: fewer than a register's lanes, one
    // AVX2 register's, all 16; lengths with and without a partial block.
    for (count, len) in [(3, 5), (8, 16), (11, 37), (16, 8), (16, 33)] {
        let runs: Vec<&[f32]> = (0..count).map(|l| &x[l * 101..][..len]).collect();
        let mut lanes = vec![f32::NAN; len * cpu::INTERLEAVED_LANES];
        cpu::interleave_runs(&runs, len, &mut lanes);
        out.extend(lanes.iter().map(|v| u64::from(v.to_bits())));
        let mut back = vec![f32::NAN; count * (len + 1)];
        let mut rows: Vec<&mut [f32]> = back.chunks_mut(len + 1).collect();
        cpu::deinterleave_runs(&lanes, len, &mut rows);
        for (l, row) in back.chunks(len + 1).enumerate() {
            let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                bits(&row[..len]),
                bits(runs[l]),
                "run {l} of {count} x {len} came back changed"
            );
            assert!(row[len].is_nan(), "a run's value past {len} was written");
        }
    }
    // Runs added in order side by side: fewer runs than a register, a
    // set of 16 and a partial one after it; lengths with and without a
    // partial block.
    for (count, len) in [(3, 5), (16, 16), (37, 169), (20, 49)] {
        let runs: Vec<&[f32]> = (0..count).map(|l| &x[l * 89..][..len]).collect();
        let mut sums = vec![f32::NAN; count + 1];
        cpu::run_sums(&runs, len, &mut sums);
        assert!(
            sums[count].is_nan(),
            "a sum past the {count} runs was written"
        );
        out.extend(sums.iter().map(|v| u64::from(v.to_bits())));
    }
    for (columns, rows) in [(3, 5), (16, 16), (20, 64), (32, 37)] {
        let cols: Vec<&[f32]> = (0..columns).map(|j| &x[j * 97..][..rows]).collect();
        let mut panel = vec![f32::NAN; rows * cpu::PANEL_COLUMNS];
        cpu::panel_from_columns(&cols, rows, &mut panel);
        out.extend(panel.iter().map(|v| u64::from(v.to_bits())));
    }
    out
}

/// gemm on this path against a sum in f64, for shapes on both sides of
/// each kernel's tile and depth block, every transpose, and `beta == 0`
/// over a C of NaN (never read).
fn gemm_matches_reference(isa: Isa) {
    let shapes = [
        (1, 1, 1),
        (7, 33, 5),
        (9, 31, 300),
        (20, 576, 25),
        (63, 65, 127),
        (70, 100, 129),
        // Large enough for matrixmultiply before the own kernel took
        // products up to a million values of C: partial tiles and
        // panels, one depth block of 600.
        (70, 300, 600),
        // Few rows of a deep, wide product: B read in place, chunks of
        // columns on AVX-512, a panel at a time by all of C's rows on
        // AVX2; a partial panel; 1,200 deep: three depth blocks.
        (16, 1100, 600),
        (16, 1100, 1200),
        // A shallow B under a C of more than 2^19 values on each of two
        // cores: packed a chunk at a time where the tiles are narrow
        // (AVX2, or a beta), read in place by AVX-512's wide tiles; the
        // last chunk and panel partial.
        (40, 26_400, 40),
        // MobileNet's conv1 (64 rows, 32 deep), its B packed a chunk at a
        // time on AVX2, in tiles of 5 and 6 rows.
        (64, 8_300, 32),
        // B packed whole, its 200 rows one depth block, passed by two
        // groups of rows (120 and 110), each wide pairs then a last
        // partial panel.
        (230, 90, 200),
        // B packed several panels at a time (seven of 130 rows), the
        // last group partial, its last panel too.
        (40, 600, 130),
        // B read in place a chunk of columns at a time, each band's
        // panels in one call (with beta, where AVX-512 has no wide
        // tiles): on AVX-512 bands of 10 rows, the last 9 rows of C; on
        // AVX2 a panel at a time by all 29 rows.
        (29, 1000, 64),
        // All of C's rows one band, read in place with no read-ahead,
        // its panels after the first in one call: on AVX-512 bands of 11
        // and 9 rows, which no tile is exactly as tall as.
        (11, 195, 30),
        (9, 130, 40),
        // On AVX-512, A's rows 4 KB apart (or 8): the columns after C's
        // pairs of panels in the wide tiles' bands too, in tiles of as
        // many registers as they fill (45 columns in three, 48 whole,
        // 56 in four, 6 in one; 40 with no pair before them).
        (26, 109, 1024),
        (20, 112, 1024),
        (20, 120, 1024),
        (22, 70, 1024),
        (21, 40, 1024),
        (24, 80, 2048),
    ];
    for (m, n, k) in shapes {
        let (a, _) = inputs::<f32>(m * k);
        let (b, _) = inputs::<f32>(k * n);
        let a: Vec<f32> = a
            .iter()
            .map(|v| if v.is_nan() { 0.5 } else { *v })
            .collect();
        let b: Vec<f32> = b
            .iter()
            .map(|v| if v.is_nan() { 0.5 } else { *v })
            .collect();
        for ta in [Transpose::No, Transpose::Yes] {
            for tb in [Transpose::No, Transpose::Yes] {
                for beta in [0.0f32, 0.75] {
                    let c0: Vec<f32> = (0..m * n).map(|i| (i % 7) as f32 - 3.0).collect();
                    let mut c = if beta == 0.0 {
                        vec![f32::NAN; m * n]
                    } else {
                        c0.clone()
                    };
                    cpu::gemm(ta, tb, m, n, k, 1.5, &a, &b, beta, &mut c);
                    for i in 0..m {
                        for j in 0..n {
                            let mut exact = 0.0f64;
                            let mut magnitude = 0.0f64;
                            for p in 0..k {
                                let av = if ta == Transpose::No {
                                    a[i * k + p]
                                } else {
                                    a[p * m + i]
                                };
                                let bv = if tb == Transpose::No {
                                    b[p * n + j]
                                } else {
                                    b[j * k + p]
                                };
                                exact += f64::from(av) * f64::from(bv);
                                magnitude += (f64::from(av) * f64::from(bv)).abs();
                            }
                            let want = 1.5 * exact + f64::from(beta) * f64::from(c0[i * n + j]);
                            let got = f64::from(c[i * n + j]);
                            assert!(
                                (got - want).abs() <= 1e-5 * (1.5 * magnitude + 3.0),
                                "{isa}: gemm {ta:?} {tb:?} {m}x{n}x{k} beta {beta}: C[{i}][{j}] = {got}, want {want}"
                            );
                        }
                    }
                }
            }
        }
    }
}

/// The hand-written kernels' results, as bits, or `None` where this path
/// runs none of them (the baseline): gemm's own kernel (tiles of every
/// height, partial panels, three depth blocks, a transposed B), the filled
/// and the packed products, the product of a B packed in panels, the
/// products finished by each rectifier, the shallow correlation,
/// depthwise planes (a window at stride 1, and at 2 along its rows; the
/// 3 x 3 window at stride 2 read in place, and at stride 1 along a
/// plane's run) and 16 channels of one side by side, and MAX pooling 2x2 (with
/// positions), at stride 2 and at stride 1.
/// AVX2 and AVX-512 add the same products in the same order, so they
/// give the same bits.
fn own_kernels() -> Option<Vec<u64>> {
    let (x, _) = inputs::<f32>(1 << 16);
    let x: Vec<f32> = x
        .iter()
        .map(|v| if v.is_nan() { 0.5 } else { *v })
        .collect();
    let mut out = Vec::new();
    let mut push = |v: &[f32]| out.extend(v.iter().map(|v| u64::from(v.to_bits())));
    // From 20 rows, AVX-512 writes C afresh in wide tiles (bands of 5 and
    // 6 rows over two panels): 23 rows are a band of 5 and three of 6.
    for (m, n, k) in [
        (20, 576, 25),
        (50, 70, 600),
        (7, 33, 300),
        (12, 100, 64),
        (23, 200, 40),
        // B packed whole and passed by two groups of rows, each in wide
        // tiles and then a partial panel; 1,100 deep: three depth blocks.
        (230, 90, 200),
        (20, 40, 1100),
        // A shallow B under more than 2^19 values of C, packed a chunk
        // at a time (with beta; AVX-512's wide tiles read it in place
        // where C is written afresh): each band's whole panels after the
        // first in one call, the last band of a tiled A 2 rows high.
        (38, 14_000, 4),
        // A's rows 4 KB apart: on AVX-512, 40 columns in tiles of three
        // registers, 60 in tiles of four.
        (21, 40, 1024),
        (20, 60, 1024),
    ] {
        for tb in [Transpose::No, Transpose::Yes] {
            let mut c = vec![0.25f32; m * n];
            cpu::gemm(
                Transpose::No,
                tb,
                m,
                n,
                k,
                1.5,
                &x[..m * k],
                &x[7..][..k * n],
                0.5,
                &mut c,
            );
            push(&c);
        }
        let mut c = vec![f32::NAN; m * n];
        let fill =
            |rows: std::ops::Range<usize>, cols: std::ops::Range<usize>, panel: &mut [f32]| {
                for (i, p) in rows.enumerate() {
                    for (j, q) in cols.clone().enumerate() {
                        panel[i * cpu::PANEL_COLUMNS + j] = x[3 + p * n + q];
                    }
                }
            };
        if !cpu::gemm_filled(m, n, k, &x[..m * k], fill, 0.0, &mut c) {
            return None;
        }
        push(&c);
        let mut packed = vec![0.0; cpu::gemm_packed_len(m, k)];
        assert!(cpu::pack_for_gemm_packed(&x[..m * k], m, k, &mut packed));
        assert!(cpu::gemm_packed(m, n, k, &packed, &x[5..][..k * n], &mut c));
        push(&c);
        let mut panels = vec![0.0; cpu::panels_len(k, n)];
        cpu::pack_panels(&x[5..][..k * n], k, n, &mut panels);
        cpu::gemm_panels(m, n, k, &x[..m * k], (&panels, None), &mut c);
        push(&c);
        finished_products((m, n, k), &x, &mut push);
    }
    let offsets: Vec<usize> = (0..27).map(|p| p * 61).collect();
    let taps = cpu::Taps {
        offsets: &offsets,
        len: 150,
    };
    let mut y = vec![0.0f32; 10 * 150];
    assert!(cpu::correlate(
        &x,
        taps,
        &x[9000..][..270],
        &x[..10],
        cpu::Rectifier::Relu,
        &mut y.chunks_exact_mut(150).collect::<Vec<_>>()
    ));
    push(&y);
    let offsets: Vec<usize> = (0..3)
        .flat_map(|i| (0..3).map(move |j| i * 60 + j))
        .collect();
    let taps = cpu::DepthwiseTaps {
        offsets: &offsets,
        row_step: 120,
        rows: 20,
        columns: 37,
    };
    let mut y = vec![0.0f32; 20 * 37];
    assert!(cpu::depthwise_plane(&x, taps, &x[..9], 0.5, false, &mut y));
    push(&y);
    assert!(cpu::depthwise_plane(&x, taps, &x[..9], 0.5, true, &mut y));
    push(&y);
    // At stride 1 along both axes, the 3 x 3 window's own loop: rows past
    // its blocks of rows, a strip and a masked register past its strips.
    let taps = cpu::DepthwiseTaps {
        row_step: 60,
        rows: 23,
        columns: 45,
        ..taps
    };
    let mut y = vec![0.0f32; 23 * 45];
    for rectify in [false, true] {
        assert!(cpu::depthwise_plane(
            &x,
            taps,
            &x[..9],
            0.5,
            rectify,
            &mut y
        ));
        push(&y);
    }
    // The strided 3 x 3 window read in place: an odd plane, so a last
    // output row of its own and a masked register past the whole ones.
    let mut y = vec![0.0f32; 11 * 38];
    for rectify in [false, true] {
        assert!(cpu::depthwise_3x3_stride2(
            &x,
            (21, 75),
            &x[..9],
            0.5,
            rectify,
            &mut y
        ));
        push(&y);
    }
    // The unstrided 3 x 3 window along a run of planes: rows shorter
    // than a register, runs of four registers and a masked one past them.
    let mut y = vec![0.0f32; 2 * 9 * 19];
    for rectify in [false, true] {
        assert!(cpu::depthwise_3x3_flat(
            &x,
            (9, 19),
            &x[300..][..18],
            &x[400..][..2],
            rectify,
            &mut y
        ));
        push(&y);
    }
    let taps = cpu::InterleavedTaps {
        offsets: &offsets,
        row_step: 120,
        column_step: 2,
        rows: 9,
        columns: 13,
    };
    let bias: [f32; 16] = x[100..116].try_into().expect("16 values");
    let mut y = vec![0.0f32; 9 * 13 * 16];
    assert!(cpu::depthwise_interleaved(
        &x,
        taps,
        &x[200..][..9 * 16],
        &bias,
        true,
        &mut y
    ));
    push(&y);
    let mut y = vec![0.0f32; 3 * 11 * 19];
    let mut at = vec![0u32; y.len()];
    assert!(cpu::max_pool_2x2(&x, 3, 22, 38, &mut y));
    push(&y);
    assert!(cpu::max_pool_2x2_positions(&x, 3, 22, 38, &mut y, &mut at));
    push(&y);
    out.extend(at.iter().map(|&a| u64::from(a)));
    let shape = cpu::Stride2Pool {
        planes: 3,
        input: [22, 37],
        kernel: [3, 3],
        output: [11, 18],
    };
    let mut y = vec![0.0f32; 3 * 11 * 18];
    assert!(cpu::max_pool_stride2(&x, shape, &mut y));
    out.extend(y.iter().map(|v| u64::from(v.to_bits())));
    let shape = cpu::Stride1Pool {
        planes: 3,
        input: [40, 40],
        kernel: [3, 3],
        pad: [1, 1],
        output: [40, 40],
    };
    let mut y = vec![0.0f32; 3 * 40 * 40];
    assert!(cpu::max_pool_stride1(&x, shape, &mut y));
    out.extend(y.iter().map(|v| u64::from(v.to_bits())));
    Some(out)
}

/// [`cpu::gemm_finished`] with each rectifier, without a shortcut and
/// with one (first bottom or second, -0 among its values), gives the
/// bits of [`cpu::gemm`] and then [`cpu::RowFinish::apply`] on each
/// value, with -inf, +inf and NaN in C (A's first row holds -inf, its
/// second NaN) and values past 6; each result pushed.
fn finished_products((m, n, k): (usize, usize, usize), x: &[f32], push: &mut impl FnMut(&[f32])) {
    let mut a = x[..m * k].to_vec();
    a[0] = f32::NEG_INFINITY;
    a[k] = f32::NAN;
    let a: Vec<f32> = a
        .iter()
        .enumerate()
        .map(|(i, v)| if i % 5 == 0 { v * 4.0 } else { *v })
        .collect();
    let b = &x[11..][..k * n];
    let bias: Vec<f32> = x[40_000..][..m].to_vec();
    let mut plain = vec![0.0f32; m * n];
    cpu::gemm(
        Transpose::No,
        Transpose::No,
        m,
        n,
        k,
        1.0,
        &a,
        b,
        0.0,
        &mut plain,
    );
    let shortcut: Vec<f32> = (0..m * n)
        .map(|at| {
            if at % 7 == 3 {
                -0.0
            } else {
                x[at % 30_000] * 3.0
            }
        })
        .collect();
    let shortcuts = [
        None,
        Some(cpu::Shortcut {
            values: &shortcut,
            first: true,
        }),
        Some(cpu::Shortcut {
            values: &shortcut,
            first: false,
        }),
    ];
    for (rectifier, shortcut) in [
        cpu::Rectifier::None,
        cpu::Rectifier::Relu,
        cpu::Rectifier::Relu6,
    ]
    .into_iter()
    .flat_map(|r| shortcuts.map(|s| (r, s)))
    {
        let finish = cpu::RowFinish {
            bias: &bias,
            shortcut,
            rectifier,
        };
        let mut c = vec![f32::NAN; m * n];
        assert!(
            cpu::gemm_finished(m, n, k, &a, b, finish, &mut c),
            "{m} x {n} x {k} runs the kernel"
        );
        let want: Vec<u32> = plain
            .iter()
            .enumerate()
            .map(|(at, &v)| finish.apply(at / n, at, std::hint::black_box(v)).to_bits())
            .collect();
        let got: Vec<u32> = c.iter().map(|v| v.to_bits()).collect();
        if let Some(at) = (0..got.len()).find(|&at| got[at] != want[at]) {
            panic!(
                "{rectifier:?} finish (shortcut first: {:?}) of {m} x {n} x {k} differs at row {}, \
                 column {}: {} vs {}",
                shortcut.map(|s| s.first),
                at / n,
                at % n,
                c[at],
                f32::from_bits(want[at])
            );
        }
        assert!(c.iter().any(|v| v.is_nan()) && c.iter().any(|&v| v > 0.0));
        push(&c);
    }
}

#[test]
fn every_available_path_matches_the_baseline_bit_for_bit() {
    let widest = cpu::isa();
    cpu::limit_isa(Isa::Baseline);
    gemm_matches_reference(Isa::Baseline);
    assert_eq!(
        own_kernels(),
        None,
        "the baseline runs no hand-written kernel"
    );
    let baseline = (all_results::<f32>(), all_results::<f64>(), moves());
    let mut kernels: Option<(Isa, Vec<u64>)> = None;
    let mut compared = Vec::new();
    for isa in Isa::ALL
        .into_iter()
        .filter(|i| *i > Isa::Baseline && i.is_available())
    {
        assert_eq!(cpu::limit_isa(isa), isa);
        gemm_matches_reference(isa);
        let own = own_kernels().expect("AVX2 and AVX-512 run the hand-written kernels");
        match &kernels {
            Some((first, bits)) => {
                assert_eq!(bits.len(), own.len());
                if let Some(i) = (0..own.len()).find(|&i| bits[i] != own[i]) {
                    panic!("{isa}'s kernels differ from {first}'s at result {i}");
                }
            }
            None => kernels = Some((isa, own)),
        }
        let got = (all_results::<f32>(), all_results::<f64>(), moves());
        let pairs = [
            ("f32", &baseline.0, &got.0),
            ("f64", &baseline.1, &got.1),
            ("f32 moves", &baseline.2, &got.2),
        ];
        for (name, base, got) in pairs {
            assert_eq!(base.len(), got.len());
            if let Some(i) = (0..base.len()).find(|&i| base[i] != got[i]) {
                panic!(
                    "{isa} differs from the baseline for {name} at result {i}: {} vs {}",
                    f64::from_bits(got[i]),
                    f64::from_bits(base[i])
                );
            }
        }
        compared.push(isa);
    }
    cpu::limit_isa(widest);
    println!("compared with the baseline: {compared:?}");
    if std::env::var_os("BLOBFLOW_CPU").is_none() {
        // Unless told otherwise, the widest path the machine has is the default.
        assert_eq!(compared.last().copied().unwrap_or(Isa::Baseline), widest);
    }
}
