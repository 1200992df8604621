//! Every vector path this machine has gives the baseline's bits.
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
/// gradient),
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
    // loads' masks stop there), into a run whose neighbours must stay.
    for stride in 1..=5 {
        for len in [1, 15, 16, 17, 40] {
            let src = &x[..(len - 1) * stride + 1];
            let mut dst = vec![f32::NAN; len + 2];
            cpu::copy_strided(src, stride, &mut dst[1..=len]);
            out.extend(dst.iter().map(|v| u64::from(v.to_bits())));
        }
    }
    for shape in [[60, 64], [17, 33], [1, 5]] {
        let mut dst = vec![f32::NAN; shape[0] * shape[1]];
        cpu::transpose(&x, shape, &mut dst);
        out.extend(dst.iter().map(|v| u64::from(v.to_bits())));
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
        // panels, two depth blocks.
        (70, 300, 260),
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

#[test]
fn every_available_path_matches_the_baseline_bit_for_bit() {
    let widest = cpu::isa();
    cpu::limit_isa(Isa::Baseline);
    gemm_matches_reference(Isa::Baseline);
    let baseline = (all_results::<f32>(), all_results::<f64>(), moves());
    let mut compared = Vec::new();
    for isa in Isa::ALL
        .into_iter()
        .filter(|i| *i > Isa::Baseline && i.is_available())
    {
        assert_eq!(cpu::limit_isa(isa), isa);
        gemm_matches_reference(isa);
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
