//! `elementwise.cu` and `rng.cu` against `blob_kernels::cpu`.

use blob_kernels::cpu;

/// Equal, both NaN, or within a relative 1e-6 (the C library and Rust's
/// may round `exp`, `log` and `pow` differently in the last place).
fn same<T: Into<f64> + Copy>(what: &str, got: &[T], want: &[T]) {
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let (g, w) = (g.into(), w.into());
        let ok = g == w || (g.is_nan() && w.is_nan()) || (g - w).abs() <= 1e-6 * w.abs();
        assert!(ok, "{what}[{i}]: kernel {g}, CPU {w}");
        assert_eq!(
            g.is_sign_negative(),
            w.is_sign_negative(),
            "{what}[{i}]: sign of {g} vs {w}"
        );
    }
}

const SPECIAL: [f64; 8] = [
    0.0,
    -0.0,
    1.5,
    -2.25,
    f64::INFINITY,
    -f64::INFINITY,
    f64::NAN,
    -f64::NAN,
];

macro_rules! elementwise_twins {
    (
        $test:ident, $t:ty,
        unary: [$($u:ident => $ucpu:ident),*],
        binary: [$($b:ident => $bcpu:ident),*],
        $set:ident, $add_scalar:ident, $powx:ident
    ) => {
        #[test]
        fn $test() {
            use cuda_on_cpu as k;
            let mut a: Vec<$t> = SPECIAL.iter().map(|&v| v as $t).collect();
            a.extend((0..1100).map(|i| ((i as $t) - 550.0) / 37.0));
            let mut b: Vec<$t> = a.iter().rev().map(|v| v * 0.5 + 0.25).collect();
            b[3] = 0.0;
            let n = a.len();
            let (mut got, mut want) = (vec![0.0 as $t; n], vec![0.0 as $t; n]);
            $(
                // SAFETY: a and got hold n values.
                unsafe { k::$u(n, n as i64, &a, &mut got) };
                cpu::$ucpu(&a, &mut want);
                same(stringify!($u), &got, &want);
            )*
            $(
                // SAFETY: a, b and got hold n values.
                unsafe { k::$b(n, n as i64, &a, &b, &mut got) };
                cpu::$bcpu(&a, &b, &mut want);
                same(stringify!($b), &got, &want);
            )*
            // SAFETY: got holds n values.
            unsafe { k::$set(n, n as i64, 2.5, &mut got) };
            cpu::set(2.5, &mut want);
            same(stringify!($set), &got, &want);
            // SAFETY: got holds n values.
            unsafe { k::$add_scalar(n, n as i64, -0.75, &mut got) };
            cpu::add_scalar(-0.75, &mut want);
            same(stringify!($add_scalar), &got, &want);
            // SAFETY: a and got hold n values.
            unsafe { k::$powx(n, n as i64, &a, 3.0, &mut got) };
            cpu::powx(&a, 3.0, &mut want);
            same(stringify!($powx), &got, &want);
        }
    };
}

elementwise_twins!(
    elementwise_f32_match_cpu, f32,
    unary: [abs_f32 => abs, fabs_f32 => fabs, exp_f32 => exp, log_f32 => log, sqrt_f32 => sqrt,
            sqr_f32 => sqr, sign_f32 => sign, sgnbit_f32 => sgnbit],
    binary: [add_f32 => add, sub_f32 => sub, mul_f32 => mul, div_f32 => div],
    set_f32, add_scalar_f32, powx_f32
);
elementwise_twins!(
    elementwise_f64_match_cpu, f64,
    unary: [abs_f64 => abs, fabs_f64 => fabs, exp_f64 => exp, log_f64 => log, sqrt_f64 => sqrt,
            sqr_f64 => sqr, sign_f64 => sign, sgnbit_f64 => sgnbit],
    binary: [add_f64 => add, sub_f64 => sub, mul_f64 => mul, div_f64 => div],
    set_f64, add_scalar_f64, powx_f64
);

/// cuRAND draws on (0, 1]; the kernels map them as Caffe's
/// `caffe_gpu_rng_uniform` and `caffe_gpu_rng_bernoulli` do.
#[test]
fn rng_maps_match_caffe() {
    use cuda_on_cpu as k;
    let draws: Vec<f32> = (1..=1000).map(|i| i as f32 / 1000.0).collect();
    let mut y = draws.clone();
    // SAFETY: y holds 1000 values.
    unsafe { k::uniform_scale_f32(1000, 1000, -2.0, 3.0, &mut y) };
    for (u, v) in draws.iter().zip(&y) {
        assert_eq!(*v, -2.0 + 5.0 * u);
    }
    let mut y64: Vec<f64> = draws.iter().map(|&u| u as f64).collect();
    // SAFETY: y64 holds 1000 values.
    unsafe { k::uniform_scale_f64(1000, 1000, 1.0, 1.5, &mut y64) };
    assert!(y64.iter().all(|v| *v > 1.0 && *v <= 1.5));
    let mut keep = vec![7u32; 1000];
    // SAFETY: draws and keep hold 1000 values.
    unsafe { k::bernoulli_u32(1000, 1000, 0.25, &draws, &mut keep) };
    // u <= p keeps: exactly the first 250 of the evenly spaced draws.
    assert_eq!(keep.iter().filter(|&&b| b == 1).count(), 250);
    assert!(keep[..250].iter().all(|&b| b == 1) && keep[250..].iter().all(|&b| b == 0));
}
