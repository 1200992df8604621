//! Caffe's test_math_functions.cpp (CPU), test_util_blas.cpp and
//! test_random_number_generator.cpp, plus the edge cases of SPEC §3/§7.

use blob_kernels::Real;
use blob_kernels::cpu::{self, Transpose};

fn gaussian_data<T: Real>(n: usize) -> Vec<T> {
    cpu::set_seed(1701);
    let mut v = vec![T::ZERO; n];
    cpu::gaussian(T::ZERO, T::ONE, &mut v).unwrap();
    v
}

const N: usize = 11 * 17 * 19 * 23;

fn math_functions<T: Real>() {
    let x = gaussian_data::<T>(N);
    // asum within 1e-2 relative, against a plain f64 sum.
    let std_asum: f64 = x.iter().map(|v| v.to_f64().abs()).sum();
    let asum = cpu::asum(&x).to_f64();
    assert!(
        (asum - std_asum).abs() <= 1e-2 * std_asum,
        "{asum} vs {std_asum}"
    );

    let mut y = vec![T::ZERO; N];
    cpu::sign(&x, &mut y);
    for (a, s) in x.iter().zip(&y) {
        let want = if *a > T::ZERO {
            1.0
        } else if *a < T::ZERO {
            -1.0
        } else {
            0.0
        };
        assert_eq!(s.to_f64(), want);
    }
    cpu::sgnbit(&x, &mut y);
    for (a, s) in x.iter().zip(&y) {
        assert_eq!(s.to_f64(), if a.is_sign_negative() { 1.0 } else { 0.0 });
    }
    cpu::fabs(&x, &mut y);
    for (a, s) in x.iter().zip(&y) {
        assert_eq!(*s, a.abs());
    }
    // Caffe's own scale test uses alpha 0 by accident; use a real one.
    let alpha = T::from_f64(2.5);
    cpu::scale(alpha, &x, &mut y);
    for (a, s) in x.iter().zip(&y) {
        assert_eq!(*s, alpha * *a);
    }
    cpu::copy(&x, &mut y);
    assert_eq!(x, y);
}

#[test]
fn math_functions_f32() {
    math_functions::<f32>();
}

#[test]
fn math_functions_f64() {
    math_functions::<f64>();
}

fn gemm_all_cases<T: Real>() {
    let a: Vec<T> = (1..=6).map(|v| T::from_f64(v as f64)).collect();
    let b: Vec<T> = (1..=12).map(|v| T::from_f64(v as f64)).collect();
    let want: Vec<T> = [38., 44., 50., 56., 83., 98., 113., 128.]
        .iter()
        .map(|&v| T::from_f64(v))
        .collect();
    let at: Vec<T> = [1., 4., 2., 5., 3., 6.]
        .iter()
        .map(|&v| T::from_f64(v))
        .collect();
    let bt: Vec<T> = [1., 5., 9., 2., 6., 10., 3., 7., 11., 4., 8., 12.]
        .iter()
        .map(|&v| T::from_f64(v))
        .collect();
    for (ta, tb, a, b) in [
        (Transpose::No, Transpose::No, &a, &b),
        (Transpose::Yes, Transpose::No, &at, &b),
        (Transpose::Yes, Transpose::Yes, &at, &bt),
        (Transpose::No, Transpose::Yes, &a, &bt),
    ] {
        // beta == 0 must not read C: start from NaN.
        let mut c = vec![T::from_f64(f64::NAN); 8];
        cpu::gemm(ta, tb, 2, 4, 3, T::ONE, a, b, T::ZERO, &mut c);
        assert_eq!(c, want, "{ta:?} {tb:?}");
        // beta == 1 accumulates.
        cpu::gemm(ta, tb, 2, 4, 3, T::ONE, a, b, T::ONE, &mut c);
        let twice: Vec<T> = want.iter().map(|&v| v + v).collect();
        assert_eq!(c, twice, "{ta:?} {tb:?} with beta 1");
    }
}

#[test]
fn gemm_f32() {
    gemm_all_cases::<f32>();
}

#[test]
fn gemm_f64() {
    gemm_all_cases::<f64>();
}

#[test]
fn gemm_large_matches_naive() {
    let (m, n, k) = (67, 45, 129);
    cpu::set_seed(3);
    let mut a = vec![0f64; m * k];
    let mut b = vec![0f64; k * n];
    cpu::uniform(-1.0, 1.0, &mut a).unwrap();
    cpu::uniform(-1.0, 1.0, &mut b).unwrap();
    let mut c = vec![0f64; m * n];
    cpu::gemm(
        Transpose::No,
        Transpose::No,
        m,
        n,
        k,
        0.5,
        &a,
        &b,
        0.0,
        &mut c,
    );
    for i in 0..m {
        for j in 0..n {
            let want: f64 = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum::<f64>() * 0.5;
            assert!((c[i * n + j] - want).abs() < 1e-12, "C[{i},{j}]");
        }
    }
}

/// Products with one row or one column of C (taken as matrix-vector
/// products), each way the operands can be stored: against the
/// definition, with beta 0 (C never read) and beta 1.5.
#[test]
fn gemm_with_one_row_or_column_matches_naive() {
    for (m, n, k) in [(1, 37, 19), (23, 1, 300), (1, 1, 5), (1, 64, 1)] {
        for ta in [Transpose::No, Transpose::Yes] {
            for tb in [Transpose::No, Transpose::Yes] {
                for beta in [0.0f64, 1.5] {
                    let (a, b, c0) = operands::<f64>(5, m, n, k);
                    let mut c = if beta == 0.0 {
                        vec![f64::NAN; m * n]
                    } else {
                        c0.clone()
                    };
                    cpu::gemm(ta, tb, m, n, k, 0.5, &a, &b, beta, &mut c);
                    let dots = product_by_definition((ta, tb), (m, n, k), &a, &b);
                    for (o, (&got, &dot)) in c.iter().zip(&dots).enumerate() {
                        let added = if beta == 0.0 { 0.0 } else { beta * c0[o] };
                        let want = 0.5 * dot + added;
                        assert!(
                            (got - want).abs() < 1e-12,
                            "{m}x{n}x{k} {ta:?} {tb:?} beta {beta}: C[{o}] = {got}, want {want}"
                        );
                    }
                }
            }
        }
    }
}

/// `op(A) op(B)` by the definition, for A and B stored as `ta` and `tb`
/// say (`m x k` and `k x n` as used).
fn product_by_definition(
    (ta, tb): (Transpose, Transpose),
    (m, n, k): (usize, usize, usize),
    a: &[f64],
    b: &[f64],
) -> Vec<f64> {
    let at = |i: usize, p: usize| match ta {
        Transpose::No => a[i * k + p],
        Transpose::Yes => a[p * m + i],
    };
    let bt = |p: usize, j: usize| match tb {
        Transpose::No => b[p * n + j],
        Transpose::Yes => b[j * k + p],
    };
    (0..m * n)
        .map(|o| (0..k).map(|p| at(o / n, p) * bt(p, o % n)).sum())
        .collect()
}

/// A, B and C of an `m x n` product of depth `k`, uniform in [-1, 1).
fn operands<T: Real>(seed: u64, m: usize, n: usize, k: usize) -> (Vec<T>, Vec<T>, Vec<T>) {
    cpu::set_seed(seed);
    let values = |len: usize| {
        let mut v = vec![T::ZERO; len];
        cpu::uniform(-T::ONE, T::ONE, &mut v).unwrap();
        v
    };
    (values(m * k), values(k * n), values(m * n))
}

/// Products of long dots (A's rows and B's columns adjacent along a deep
/// k, into a small C: a convolution's weight gradient), which AVX-512
/// machines take as dot products: LeNet's conv1, tails in every
/// dimension, C at the largest side taken, a single dot; and C of a few
/// columns over a shallower depth, of any height (a convolution onto 1 x
/// 1 to 3 x 3 pixels: MobileNet-SSD's conv17_2, conv16_2, conv15_2, and
/// tails); beta 0 (C is never read) and 2.
#[test]
fn gemm_of_long_dots_matches_naive() {
    for (m, n, k) in [
        (20, 25, 5184),
        (5, 7, 2051),
        (64, 64, 2048),
        (1, 1, 4096),
        (128, 1, 576),
        (256, 4, 1152),
        (257, 9, 1153),
        (3, 5, 256),
    ] {
        for beta in [0.0f32, 2.0] {
            let (a, b, mut c) = operands::<f32>(11, m, n, k);
            let c0 = c.clone();
            if beta == 0.0 {
                c.fill(f32::NAN);
            }
            cpu::gemm(
                Transpose::No,
                Transpose::Yes,
                m,
                n,
                k,
                0.5,
                &a,
                &b,
                beta,
                &mut c,
            );
            for i in 0..m {
                for j in 0..n {
                    let products =
                        (0..k).map(|p| f64::from(a[i * k + p]) * f64::from(b[j * k + p]));
                    let (dot, size) = products.fold((0.0, 0.0), |(s, z), v| (s + v, z + v.abs()));
                    let want = 0.5 * dot + f64::from(beta * c0[i * n + j]);
                    let got = f64::from(c[i * n + j]);
                    assert!(
                        (got - want).abs() <= 1e-6 * (size + 1.0),
                        "{m}x{n}x{k} beta {beta}: C[{i},{j}] = {got}, want {want}"
                    );
                }
            }
        }
    }
}

/// Products large enough to be cut into one piece per core, in a pool of 3
/// (uneven pieces, whatever the machine's cores): tall C cut by rows, wide
/// C by columns, each operand transposed or not, and beta adding into C.
#[test]
fn gemm_cut_across_cores_matches_naive() {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(3)
        .build()
        .unwrap();
    for (m, n, k) in [(301, 67, 129), (45, 517, 101)] {
        for (ta, tb) in [
            (Transpose::No, Transpose::No),
            (Transpose::Yes, Transpose::No),
            (Transpose::No, Transpose::Yes),
            (Transpose::Yes, Transpose::Yes),
        ] {
            let (a, b, mut c) = operands::<f64>(5, m, n, k);
            let c0 = c.clone();
            pool.install(|| cpu::gemm(ta, tb, m, n, k, 0.5, &a, &b, 2.0, &mut c));
            let dots = product_by_definition((ta, tb), (m, n, k), &a, &b);
            for (o, (&got, &dot)) in c.iter().zip(&dots).enumerate() {
                let want = 0.5 * dot + 2.0 * c0[o];
                assert!(
                    (got - want).abs() < 1e-11,
                    "{m}x{n}x{k} {ta:?} {tb:?}: C[{o}] = {got}, want {want}"
                );
            }
        }
    }
}

#[test]
fn gemm_with_zero_k_scales_c() {
    let mut c = [1.0f32, 2.0];
    cpu::gemm(
        Transpose::No,
        Transpose::No,
        1,
        2,
        0,
        1.0,
        &[],
        &[],
        3.0,
        &mut c,
    );
    assert_eq!(c, [3.0, 6.0]);
    let mut c = [f32::NAN; 2];
    cpu::gemm(
        Transpose::No,
        Transpose::No,
        1,
        2,
        0,
        1.0,
        &[],
        &[],
        0.0,
        &mut c,
    );
    assert_eq!(c, [0.0, 0.0]);
}

fn gemv_cases<T: Real>() {
    let a: Vec<T> = (1..=6).map(|v| T::from_f64(v as f64)).collect();
    let f = |v: &[f64]| v.iter().map(|&x| T::from_f64(x)).collect::<Vec<T>>();
    let mut y = f(&[f64::NAN, f64::NAN]);
    cpu::gemv(
        Transpose::No,
        2,
        3,
        T::ONE,
        &a,
        &f(&[1., 2., 3.]),
        T::ZERO,
        &mut y,
    );
    assert_eq!(y, f(&[14., 32.]));
    let mut y = f(&[f64::NAN; 3]);
    cpu::gemv(
        Transpose::Yes,
        2,
        3,
        T::ONE,
        &a,
        &f(&[1., 2.]),
        T::ZERO,
        &mut y,
    );
    assert_eq!(y, f(&[9., 12., 15.]));
    let mut y = f(&[1., 1., 1.]);
    cpu::gemv(
        Transpose::Yes,
        2,
        3,
        T::from_f64(2.0),
        &a,
        &f(&[1., 2.]),
        T::ONE,
        &mut y,
    );
    assert_eq!(y, f(&[19., 25., 31.]));
}

#[test]
fn gemv_f32() {
    gemv_cases::<f32>();
}

#[test]
fn gemv_f64() {
    gemv_cases::<f64>();
}

/// `A x` row by row against sums written out, on shapes that leave rows
/// over a group of eight and values over the lanes, and on a matrix large
/// enough to be cut across cores. Small integers: every sum is exact.
#[test]
fn gemv_rows_in_groups_and_tails() {
    for (m, n) in [
        (1, 1),
        (3, 15),
        (4, 16),
        (5, 17),
        (7, 40),
        (8, 8),
        (9, 100),
        (15, 33),
        (17, 7),
        (257, 300),
    ] {
        let a: Vec<f32> = (0..m * n).map(|i| ((i * 3) % 7) as f32 - 3.0).collect();
        let x: Vec<f32> = (0..n).map(|i| ((i * 2) % 5) as f32 - 2.0).collect();
        let want: Vec<f32> = (0..m)
            .map(|r| {
                let dot: f32 = (0..n).map(|c| a[r * n + c] * x[c]).sum();
                2.0 * dot + 0.5 * r as f32
            })
            .collect();
        let mut y: Vec<f32> = (0..m).map(|r| r as f32).collect();
        cpu::gemv(Transpose::No, m, n, 2.0, &a, &x, 0.5, &mut y);
        assert_eq!(y, want, "{m} x {n}");
    }
}

#[test]
fn empty_inputs_are_no_ops() {
    let e: [f32; 0] = [];
    let mut m: [f32; 0] = [];
    assert_eq!(cpu::asum(&e), 0.0);
    assert_eq!(cpu::dot(&e, &e), 0.0);
    assert_eq!(cpu::strided_dot(0, &e, 1, &e, 1), 0.0);
    cpu::axpy(1.0, &e, &mut m);
    cpu::axpby(1.0, &e, 2.0, &mut m);
    cpu::scal(2.0, &mut m);
    cpu::exp(&e, &mut m);
    cpu::add(&e, &e, &mut m);
    cpu::powx(&e, 2.0, &mut m);
    cpu::gemm(
        Transpose::No,
        Transpose::No,
        0,
        0,
        0,
        1.0,
        &e,
        &e,
        0.0,
        &mut m,
    );
    cpu::gemv(Transpose::No, 0, 0, 1.0, &e, &e, 0.0, &mut m);
    cpu::uniform(0.0, 1.0, &mut m).unwrap();
}

#[test]
fn sign_sgnbit_fabs_special_values() {
    let x = [
        0.0f32,
        -0.0,
        f32::NAN,
        -f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        1e-45,
        -1e-45,
    ];
    let mut y = [9.0f32; 8];
    cpu::sign(&x, &mut y);
    assert_eq!(&y[..2], &[0.0, 0.0]);
    assert_eq!(y[2], 0.0, "sign(NaN) = 0");
    assert_eq!(y[3], 0.0);
    assert_eq!(&y[4..], &[1.0, -1.0, 1.0, -1.0]);
    cpu::sgnbit(&x, &mut y);
    assert_eq!(y, [0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0]);
    cpu::fabs(&x, &mut y);
    assert!(y[1] == 0.0 && y[1].is_sign_positive());
    assert!(y[2].is_nan() && y[3].is_nan() && y[3].is_sign_positive());
    assert_eq!(y[5], f32::INFINITY);
}

#[test]
fn axpby_with_zero_beta_keeps_nan_like_caffe() {
    let mut y = [f64::NAN, 1.0];
    cpu::axpby(1.0, &[1.0, 1.0], 0.0, &mut y);
    assert!(y[0].is_nan());
    assert_eq!(y[1], 1.0);
}

#[test]
fn strided_dot_uses_strides() {
    let x: Vec<f32> = (0..10).map(|v| v as f32).collect();
    let y: Vec<f32> = (0..10).map(|v| (v * 10) as f32).collect();
    // x[0], x[3], x[6] with y[0], y[2], y[4]
    assert_eq!(
        cpu::strided_dot(3, &x, 3, &y, 2),
        0.0 * 0.0 + 3.0 * 20.0 + 6.0 * 40.0
    );
}

#[test]
#[should_panic(expected = "need 7 and 5 elements")]
fn strided_dot_checks_reach() {
    cpu::strided_dot(3, &[0.0f32; 6], 3, &[0.0f32; 5], 2);
}

#[test]
fn reductions_of_1e7_are_accurate() {
    let n = 10_000_000;
    cpu::set_seed(9);
    let mut x = vec![0f32; n];
    let mut y = vec![0f32; n];
    cpu::uniform(-1.0, 1.0, &mut x).unwrap();
    cpu::uniform(0.0, 2.0, &mut y).unwrap();
    let asum_ref: f64 = x.iter().map(|&v| (v as f64).abs()).sum();
    let dot_ref: f64 = x.iter().zip(&y).map(|(&a, &b)| a as f64 * b as f64).sum();
    let asum = cpu::asum(&x) as f64;
    let dot = cpu::dot(&x, &y) as f64;
    assert!(
        (asum - asum_ref).abs() <= 1e-6 * asum_ref,
        "asum {asum} vs {asum_ref}"
    );
    // A sum of values of both signs: within 1e-6 of their absolute sum.
    let sum_ref: f64 = x.iter().map(|&v| v as f64).sum();
    let sum = cpu::sum(&x) as f64;
    assert!(
        (sum - sum_ref).abs() <= 1e-6 * asum_ref,
        "sum {sum} vs {sum_ref}"
    );
    assert!(
        (dot - dot_ref).abs() <= 1e-6 * dot_ref.abs(),
        "dot {dot} vs {dot_ref}"
    );
}

#[test]
fn elementwise_values() {
    let a = [1.0f64, 4.0, 9.0];
    let b = [2.0f64, 2.0, 3.0];
    let mut y = [0.0f64; 3];
    cpu::sub(&a, &b, &mut y);
    assert_eq!(y, [-1.0, 2.0, 6.0]);
    cpu::div(&a, &b, &mut y);
    assert_eq!(y, [0.5, 2.0, 3.0]);
    cpu::sqrt(&a, &mut y);
    assert_eq!(y, [1.0, 2.0, 3.0]);
    cpu::powx(&a, 0.5, &mut y);
    assert_eq!(y, [1.0, 2.0, 3.0]);
    cpu::sqr(&b, &mut y);
    assert_eq!(y, [4.0, 4.0, 9.0]);
    cpu::log(&[1.0, std::f64::consts::E, 1.0], &mut y);
    assert_eq!(y, [0.0, 1.0, 0.0]);
    let mut z = [1.0f64, 2.0, 3.0];
    cpu::mul_inplace(&mut z, &b);
    assert_eq!(z, [2.0, 4.0, 9.0]);
    cpu::exp_inplace(&mut z[..1]);
    assert_eq!(z[0], 2.0f64.exp());
    let mut s = [1i32, 2];
    cpu::set(0, &mut s);
    assert_eq!(s, [0, 0]);
}

// test_random_number_generator.cpp: 10000 samples, seed 1701, the sample
// mean within 3.8 sigma / sqrt(n) of the true mean.
const SAMPLES: usize = 10_000;
const MAX_Z: f64 = 3.8;

fn mean_var(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let m = v.iter().sum::<f64>() / n;
    (m, v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / n)
}

fn check_mean(sample: &[f64], mu: f64, sigma: f64) {
    let (m, _) = mean_var(sample);
    let bound = MAX_Z * sigma / (sample.len() as f64).sqrt();
    assert!((m - mu).abs() <= bound, "mean {m}, want {mu} +- {bound}");
}

#[test]
fn rng_gaussian() {
    for (mu, sigma) in [(0.0, 1.0), (-2.0, 3.0)] {
        cpu::set_seed(1701);
        let mut v = vec![0f32; SAMPLES];
        cpu::gaussian(mu as f32, sigma as f32, &mut v).unwrap();
        let s: Vec<f64> = v.iter().map(|&x| x as f64).collect();
        check_mean(&s, mu, sigma);
        let (_, var) = mean_var(&s);
        assert!(
            (var.sqrt() - sigma).abs() < 0.05 * sigma,
            "std {}",
            var.sqrt()
        );
    }
    assert!(cpu::gaussian(0.0f32, -1.0, &mut [0.0]).is_err());
}

#[test]
fn rng_uniform() {
    for (a, b) in [(0.0, 1.0), (-7.3, -2.3)] {
        cpu::set_seed(1701);
        let mut v = vec![0f64; SAMPLES];
        cpu::uniform(a, b, &mut v).unwrap();
        assert!(v.iter().all(|x| !x.is_nan() && (a..=b).contains(x)));
        let sigma = (b - a) / 12f64.sqrt();
        check_mean(&v, (a + b) / 2.0, sigma);
    }
    let err = cpu::uniform(2.0f32, 1.0, &mut [0.0]).unwrap_err();
    assert!(err.to_string().contains("[2, 1]"), "{err}");
}

#[test]
fn rng_bernoulli() {
    for p in [0.3, 0.9] {
        cpu::set_seed(1701);
        let mut v = vec![0i32; SAMPLES];
        cpu::bernoulli(p, &mut v).unwrap();
        assert!(v.iter().all(|&x| x == 0 || x == 1));
        let s: Vec<f64> = v.iter().map(|&x| x as f64).collect();
        check_mean(&s, p, (p * (1.0 - p)).sqrt());
        let mut u = vec![0u32; SAMPLES];
        cpu::bernoulli(p, &mut u).unwrap();
        assert!(u.iter().all(|&x| x <= 1));
    }
}

#[test]
fn rng_is_reproducible_per_seed() {
    let draw = |seed| {
        cpu::set_seed(seed);
        let mut v = [0f32; 16];
        cpu::gaussian(0.0, 1.0, &mut v).unwrap();
        v
    };
    assert_eq!(draw(5), draw(5));
    assert_ne!(draw(5), draw(6));
}

/// Above the size where they split across cores, the element-wise kernels
/// give exactly what one pass over the elements gives, including the
/// ragged last chunk.
#[test]
fn parallel_elementwise_kernels_match_one_pass() {
    let n = (1 << 20) + 12345;
    let x: Vec<f32> = gaussian_data(n);
    let y0: Vec<f32> = gaussian_data(n)
        .iter()
        .map(|v: &f32| v * 0.5 + 1.0)
        .collect();
    let (alpha, beta) = (0.37f32, -1.25f32);
    let mut y = y0.clone();
    cpu::axpy(alpha, &x, &mut y);
    assert!(
        y.iter()
            .zip(&y0)
            .zip(&x)
            .all(|((r, &b), &a)| *r == b + alpha * a)
    );
    let mut y = y0.clone();
    cpu::axpby(alpha, &x, beta, &mut y);
    assert!(
        y.iter()
            .zip(&y0)
            .zip(&x)
            .all(|((r, &b), &a)| *r == beta * b + alpha * a)
    );
    let mut y = y0.clone();
    cpu::scal(alpha, &mut y);
    assert!(y.iter().zip(&y0).all(|(r, &b)| *r == b * alpha));
    let mut y = vec![0.0f32; n];
    cpu::scale(alpha, &x, &mut y);
    assert!(y.iter().zip(&x).all(|(r, &a)| *r == alpha * a));
}

#[test]
fn reductions_give_the_same_bits_on_any_number_of_cores() {
    let n = (1 << 20) + 12_345;
    let mut x = vec![0f32; n];
    let mut y = vec![0f32; n];
    cpu::set_seed(11);
    cpu::gaussian(0.0, 1.0, &mut x).unwrap();
    cpu::uniform(-1.0, 1.0, &mut y).unwrap();
    let on = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            [
                cpu::asum(&x),
                cpu::sum(&x),
                cpu::sumsq(&x),
                cpu::dot(&x, &y),
            ]
            .map(f32::to_bits)
        })
    };
    let one = on(1);
    assert_eq!(on(2), one);
    assert_eq!(on(3), one);
}

#[test]
fn gemm_panels_gives_gemms_bits() {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(3)
        .build()
        .unwrap();
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    // Winograd's products: few rows (tiles) by many columns (outputs),
    // a last panel cut short, one panel, a depth of several blocks.
    for (m, n, k) in [(16, 256, 256), (49, 80, 96), (3, 7, 5), (16, 1024, 600)] {
        let a: Vec<f32> = gaussian_data(m * k);
        let b: Vec<f32> = gaussian_data::<f32>(k * n + 1)[1..].to_vec();
        let want = gemm_of(m, n, k, &a, &b);
        let mut panels = vec![f32::NAN; cpu::panels_len(k, n)];
        cpu::pack_panels(&b, k, n, &mut panels);
        let mut got = vec![f32::NAN; m * n];
        cpu::gemm_panels(m, n, k, &a, (&panels, None), &mut got);
        // Off the kernels' machines, matrixmultiply sums in its own
        // order, by panel or whole.
        if cpu::isa() >= cpu::Isa::Avx2 {
            assert_eq!(bits(&got), bits(&want), "{m}x{n}x{k}");
        } else {
            for (g, w) in got.iter().zip(&want) {
                assert!((g - w).abs() <= 1e-4 * (k as f32).sqrt(), "{m}x{n}x{k}");
            }
        }
        // Asking for the next pack (here another copy) as it ends
        // changes no value.
        let next = panels.clone();
        let mut pieces = vec![f32::NAN; m * n];
        pool.install(|| cpu::gemm_panels(m, n, k, &a, (&panels, Some(&next)), &mut pieces));
        assert_eq!(bits(&pieces), bits(&got), "{m}x{n}x{k} in 3 pieces");
    }
    // A next pack shorter than the product's is refused.
    let short = std::panic::catch_unwind(|| {
        let (panels, next) = (vec![0.0; cpu::panels_len(8, 40)], vec![0.0; 8]);
        cpu::gemm_panels(
            4,
            40,
            8,
            &[0.0; 32],
            (&panels, Some(&next)),
            &mut [0.0; 160],
        );
    });
    assert!(short.is_err());
}

/// Products of a wide, shallow B (a 1x1 convolution's image over few
/// channels: MobileNet's 32 x 22,500), which the kernels read a chunk of
/// columns at a time for one tile's rows of C after another: the same
/// bits as C's rows taken 4 at a time (one tile, read panel by panel;
/// never one row alone, which is a matrix-vector product),
/// near the definition; beta 0 and 1.5, a chunk cut short at B's end, a
/// last panel of 8 columns.
#[test]
fn gemm_of_a_wide_shallow_b_gives_the_bits_of_its_rows() {
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    for (m, n, k) in [(40, 3000, 20), (64, 5000, 32), (38, 4000, 9)] {
        for beta in [0.0f32, 1.5] {
            let (a, b, c0) = operands::<f32>(11, m, n, k);
            let mut whole = c0.clone();
            cpu::gemm(
                Transpose::No,
                Transpose::No,
                m,
                n,
                k,
                1.0,
                &a,
                &b,
                beta,
                &mut whole,
            );
            let mut by_rows = c0.clone();
            for first in (0..m).step_by(4) {
                let rows = 4.min(m - first);
                cpu::gemm(
                    Transpose::No,
                    Transpose::No,
                    rows,
                    n,
                    k,
                    1.0,
                    &a[first * k..][..rows * k],
                    &b,
                    beta,
                    &mut by_rows[first * n..][..rows * n],
                );
            }
            if cpu::isa() >= cpu::Isa::Avx2 {
                assert_eq!(bits(&whole), bits(&by_rows), "{m}x{n}x{k} beta {beta}");
            }
            for (o, &got) in whole.iter().enumerate() {
                let (i, j) = (o / n, o % n);
                let dot: f64 = (0..k)
                    .map(|p| a[i * k + p] as f64 * b[p * n + j] as f64)
                    .sum();
                let want = dot + beta as f64 * c0[o] as f64;
                assert!(
                    (got as f64 - want).abs() < 1e-5 * k as f64,
                    "{m}x{n}x{k} C[{i},{j}]"
                );
            }
        }
    }
}

/// `A B` by `gemm` (`A` of `m x k`, `B` of `k x n`, both as stored): the
/// bits the other products of f32 are held to.
fn gemm_of(m: usize, n: usize, k: usize, a: &[f32], b: &[f32]) -> Vec<f32> {
    let mut c = vec![f32::NAN; m * n];
    cpu::gemm(
        Transpose::No,
        Transpose::No,
        m,
        n,
        k,
        1.0,
        a,
        b,
        0.0,
        &mut c,
    );
    c
}

#[test]
fn gemm_filled_gives_gemms_bits() {
    // LeNet's conv2 round (50 x 256 x 500), one 600 deep (one depth
    // block), one 1100 deep (three blocks), a product
    // whose last panel is partial (n = 70), one row short of a tile.
    for (m, n, k) in [
        (50, 256, 500),
        (50, 256, 600),
        (50, 256, 1100),
        (20, 70, 25),
        (9, 33, 300),
    ] {
        let a: Vec<f32> = gaussian_data(m * k);
        let b: Vec<f32> = gaussian_data(k * n);
        let want = gemm_of(m, n, k, &a, &b);
        let mut got = vec![f32::NAN; m * n];
        let mut asked = vec![0u32; k * n];
        let ran = cpu::gemm_filled(
            m,
            n,
            k,
            &a,
            |rows, cols, panel| {
                assert!(cols.len() <= cpu::PANEL_COLUMNS, "{cols:?}");
                for (i, p) in rows.enumerate() {
                    for (j, q) in cols.clone().enumerate() {
                        panel[i * cpu::PANEL_COLUMNS + j] = b[p * n + q];
                        asked[p * n + q] += 1;
                    }
                }
            },
            0.0,
            &mut got,
        );
        assert_eq!(ran, cpu::isa() >= cpu::Isa::Avx2, "{m}x{n}x{k}");
        if !ran {
            continue;
        }
        assert!(
            asked.iter().all(|&times| times == 1),
            "{m}x{n}x{k}: each value of B asked for once"
        );
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&got), bits(&want), "{m}x{n}x{k}");
    }
}

/// `gemm_packed` against `gemm` of the unpacked A, bit for bit: C with
/// few columns (49, 9, 4, 100), A's rows not a whole number of panels,
/// depths across blocks of 256 and shorter than a vector, on this
/// machine's cores and cut into 3 pieces.
#[test]
fn gemm_packed_gives_gemms_bits() {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(3)
        .build()
        .unwrap();
    for (m, n, k) in [(512, 49, 600), (70, 9, 300), (100, 4, 13), (33, 100, 513)] {
        let a: Vec<f32> = gaussian_data(m * k);
        let b: Vec<f32> = gaussian_data::<f32>(k * n + 1)[1..].to_vec();
        let want = gemm_of(m, n, k, &a, &b);
        let mut packed = vec![f32::NAN; cpu::gemm_packed_len(m, k)];
        let packs = cpu::pack_for_gemm_packed(&a, m, k, &mut packed);
        assert_eq!(packs, cpu::isa() >= cpu::Isa::Avx2, "{m}x{n}x{k}");
        if !packs {
            continue;
        }
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        let mut got = vec![f32::NAN; m * n];
        assert!(cpu::gemm_packed(m, n, k, &packed, &b, &mut got));
        assert_eq!(bits(&got), bits(&want), "{m}x{n}x{k}");
        let mut got = vec![f32::NAN; m * n];
        assert!(pool.install(|| cpu::gemm_packed(m, n, k, &packed, &b, &mut got)));
        assert_eq!(bits(&got), bits(&want), "{m}x{n}x{k} in 3 pieces");
    }
    // Where the transpose fills its tiles a fifth better, it is the path.
    assert_eq!(
        cpu::gemm_packed_suits(512, 49, 2048),
        cpu::isa() >= cpu::Isa::Avx2
    );
    // Deep and tall, where it fills any more of them (YOLO's 1x1 layers
    // at 13 x 13), but for AVX-512, whose wide tiles take C's two pairs
    // of panels as they are; one pair and a rest (10 x 10) is still
    // transposed there.
    assert_eq!(
        cpu::gemm_packed_suits(1024, 169, 512),
        cpu::isa() == cpu::Isa::Avx2
    );
    assert_eq!(
        cpu::gemm_packed_suits(1024, 100, 512),
        cpu::isa() >= cpu::Isa::Avx2
    );
    // From 256 rows, 512 deep, on AVX-512 against the wide tiles too
    // below 512 rows (ResNet-50's res4 1x1 layers at 14 x 14); fewer
    // rows keep C as it is.
    assert_eq!(
        cpu::gemm_packed_suits(256, 196, 1024),
        cpu::isa() >= cpu::Isa::Avx2
    );
    assert!(!cpu::gemm_packed_suits(128, 196, 1024));
    assert!(!cpu::gemm_packed_suits(512, 300, 1024));
    // On AVX2 from 256 deep (ResNet-50's res4 branch2c layers, 256 ->
    // 1024 at 14 x 14); AVX-512's wide tiles keep them.
    assert_eq!(
        cpu::gemm_packed_suits(1024, 196, 256),
        cpu::isa() == cpu::Isa::Avx2
    );
    assert!(!cpu::gemm_packed_suits(1024, 196, 128));
}

/// A convolution's weight gradient: `C += A B` with B's columns read
/// where they lie (`panel_from_columns`), against `gemm` of the stored
/// transpose, beta 1 onto the same C.
#[test]
fn gemm_filled_adds_panels_of_columns_as_gemm_does() {
    for (m, n, k) in [(50, 500, 256), (20, 70, 300), (9, 33, 17)] {
        let a: Vec<f32> = gaussian_data(m * k);
        let bt: Vec<f32> = gaussian_data(n * k);
        let c0: Vec<f32> = gaussian_data(m * n);
        let mut want = c0.clone();
        cpu::gemm(
            Transpose::No,
            Transpose::Yes,
            m,
            n,
            k,
            1.0,
            &a,
            &bt,
            1.0,
            &mut want,
        );
        let mut got = c0.clone();
        let fill =
            |rows: std::ops::Range<usize>, cols: std::ops::Range<usize>, panel: &mut [f32]| {
                let columns: Vec<&[f32]> = cols
                    .map(|q| &bt[q * k + rows.start..][..rows.len()])
                    .collect();
                cpu::panel_from_columns(&columns, rows.len(), panel);
            };
        if !cpu::gemm_filled(m, n, k, &a, fill, 1.0, &mut got) {
            assert_eq!(cpu::isa(), cpu::Isa::Baseline, "{m}x{n}x{k}");
            continue;
        }
        for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
            assert!(
                (g - w).abs() <= 1e-4 * (1.0 + w.abs()),
                "{m}x{n}x{k}: c[{i}] {g} vs {w}"
            );
        }
    }
}

#[test]
fn a_gemv_read_ahead_gives_the_same_bits_as_one_in_cache() {
    // 2100 x 1003 f32 is 8.4 MB: read ahead of its rows (as CaffeNet's fc
    // layers are); its first and last rows alone are a matrix small
    // enough to be read plainly. Each row's dot is the same sum.
    let (m, n) = (2100, 1003);
    let (a, x, y0) = operands::<f32>(9, m, 1, n);
    let mut y = y0.clone();
    cpu::gemv(Transpose::No, m, n, 0.5, &a, &x, 1.5, &mut y);
    for rows in [0..7, m - 9..m] {
        let part = &a[rows.start * n..rows.end * n];
        let mut want = y0[rows.clone()].to_vec();
        cpu::gemv(Transpose::No, rows.len(), n, 0.5, part, &x, 1.5, &mut want);
        let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&y[rows.clone()]), bits(&want), "rows {rows:?}");
    }
}

/// The whole-store maps give each value `f`'s result, blocks and tails
/// alike (lengths around the 16-value block), and leave `x` past `y`'s
/// end alone.
#[test]
fn whole_store_maps_match_plain_loops() {
    let relu = |v: f32| if v > 0.0 { v } else { 0.0 };
    let larger = |a: f32, b: f32| if b > a { b } else { a };
    for len in [0, 1, 15, 16, 17, 33, 40] {
        let x: Vec<f32> = (0..len).map(|i| ((i * 7) % 11) as f32 - 5.0).collect();
        let y: Vec<f32> = (0..len).map(|i| ((i * 5) % 9) as f32 - 4.0).collect();
        let mut mapped = x.clone();
        cpu::map_whole_in_place(&mut mapped, relu);
        assert_eq!(
            mapped,
            x.iter().map(|&v| relu(v)).collect::<Vec<_>>(),
            "{len}"
        );
        let mut zipped = x.clone();
        zipped.push(9.0);
        cpu::zip_whole_in_place(&mut zipped, &y, larger);
        let mut want: Vec<f32> = x.iter().zip(&y).map(|(&a, &b)| larger(a, b)).collect();
        want.push(9.0);
        assert_eq!(zipped, want, "{len}");
    }
}
