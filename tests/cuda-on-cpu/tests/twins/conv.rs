//! `conv.cu` against the CPU Convolution: im2col + gemm + bias (the
//! im2col path of `conv/cuda.rs`), and the bias of the cuDNN path.

use blob_kernels::cpu::{Transpose, gemm};
use blob_kernels::sums::SumLayout;
use cuda_on_cpu as k;

use crate::sums::add_sums;
use crate::{CpuRun, assert_close, random, run_on_cpu};

/// A convolution's sizes, as `ConvGeometry` holds them: per spatial
/// axis (height, width) the kernel, stride, padding and dilation.
#[derive(Clone, Copy)]
struct Geometry {
    batch: usize,
    cin: usize,
    cout: usize,
    h: usize,
    w: usize,
    k: [usize; 2],
    s: [usize; 2],
    pad: [usize; 2],
    d: [usize; 2],
    oh: usize,
    ow: usize,
}

impl Geometry {
    /// A square one over a square image.
    fn new(
        batch: usize,
        cin: usize,
        cout: usize,
        hw: usize,
        k: usize,
        s: usize,
        pad: usize,
    ) -> Self {
        Self::rect(batch, cin, cout, [hw; 2], [k; 2], [s; 2], [pad; 2], [1; 2])
    }

    #[allow(clippy::too_many_arguments)]
    fn rect(
        batch: usize,
        cin: usize,
        cout: usize,
        hw: [usize; 2],
        k: [usize; 2],
        s: [usize; 2],
        pad: [usize; 2],
        d: [usize; 2],
    ) -> Self {
        let out = |a: usize| (hw[a] + 2 * pad[a] - (d[a] * (k[a] - 1) + 1)) / s[a] + 1;
        Self {
            batch,
            cin,
            cout,
            h: hw[0],
            w: hw[1],
            k,
            s,
            pad,
            d,
            oh: out(0),
            ow: out(1),
        }
    }
    fn p(&self) -> usize {
        self.oh * self.ow
    }
    fn ckk(&self) -> usize {
        self.cin * self.k[0] * self.k[1]
    }
    fn cols(&self) -> usize {
        self.batch * self.p()
    }
    fn x_len(&self) -> usize {
        self.batch * self.cin * self.h * self.w
    }
    fn y_len(&self) -> usize {
        self.batch * self.cout * self.p()
    }
    /// `cin, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, batch`.
    fn ints(&self) -> [i32; 14] {
        [
            self.cin,
            self.h,
            self.w,
            self.k[0],
            self.k[1],
            self.s[0],
            self.s[1],
            self.pad[0],
            self.pad[1],
            self.d[0],
            self.d[1],
            self.oh,
            self.ow,
            self.batch,
        ]
        .map(|v| v as i32)
    }
}

fn im2col(g: &Geometry, x: &[f32]) -> Vec<f32> {
    let [cin, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, batch] = g.ints();
    let total = g.ckk() * g.cols();
    let mut col = vec![f32::NAN; total];
    // SAFETY: x holds x_len values, col total.
    unsafe {
        k::im2col_f32(
            total,
            total as i64,
            cin,
            h,
            w,
            kh,
            kw,
            sh,
            sw,
            ph,
            pw,
            dh,
            dw,
            oh,
            ow,
            batch,
            x,
            &mut col,
        )
    };
    col
}

/// The GPU's calls of `conv/cuda.rs`, forward and backward.
fn im2col_path(g: &Geometry, weight: &[f32], bias: &[f32], x: &[f32], dy: &[f32]) -> CpuRun {
    let (ckk, cols, cout) = (g.ckk(), g.cols(), g.cout);
    let (pi, batch, ci) = (g.p() as i32, g.batch as i32, cout as i32);
    let col = im2col(g, x);
    let mut tmp = vec![f32::NAN; cout * cols];
    gemm(
        Transpose::No,
        Transpose::No,
        cout,
        cols,
        ckk,
        1.0,
        weight,
        &col,
        0.0,
        &mut tmp,
    );
    let total = g.y_len();
    let mut y = vec![f32::NAN; total];
    // SAFETY: tmp holds cout*cols, bias cout, y total.
    unsafe { k::scatter_bias_f32(total, total as i64, ci, batch, pi, &tmp, bias, &mut y) };

    let col = im2col(g, x);
    let mut tmp = vec![f32::NAN; cout * cols];
    // SAFETY: dy holds total, tmp cout*cols.
    unsafe { k::gather_f32(total, total as i64, ci, batch, pi, dy, &mut tmp) };
    let mut db = vec![0.0; cout];
    add_sums(&SumLayout::rows_of(cout, cols), &tmp, &mut db);
    let mut dw = vec![0.0; cout * ckk];
    gemm(
        Transpose::No,
        Transpose::Yes,
        cout,
        ckk,
        cols,
        1.0,
        &tmp,
        &col,
        1.0,
        &mut dw,
    );
    let mut dcol = vec![f32::NAN; ckk * cols];
    gemm(
        Transpose::Yes,
        Transpose::No,
        ckk,
        cols,
        cout,
        1.0,
        weight,
        &tmp,
        0.0,
        &mut dcol,
    );
    let [
        cin,
        h,
        w,
        kh,
        kw,
        sh,
        sw,
        ph,
        pw,
        dil_h,
        dil_w,
        oh,
        ow,
        batch,
    ] = g.ints();
    let n = g.x_len();
    let mut dx = vec![f32::NAN; n];
    // SAFETY: dcol holds ckk*cols, dx n.
    unsafe {
        k::col2im_f32(
            n, n as i64, cin, h, w, kh, kw, sh, sw, ph, pw, dil_h, dil_w, oh, ow, batch, &dcol,
            &mut dx,
        )
    };
    CpuRun {
        y,
        dx,
        param_diffs: vec![dw, db],
    }
}

fn check(name: &str, g: Geometry, cpu: impl FnOnce(&[Vec<f32>], &[f32], &[f32]) -> CpuRun) {
    let weight = random(g.cout * g.ckk(), 10, -0.5, 0.5);
    let bias = random(g.cout, 11, -0.5, 0.5);
    let x = random(g.x_len(), 1, -1.0, 1.0);
    let dy = random(g.y_len(), 2, -1.0, 1.0);
    let want = cpu(&[weight.clone(), bias.clone()], &x, &dy);
    let got = im2col_path(&g, &weight, &bias, &x, &dy);
    assert_same_run(name, &got, &want);
}

/// A convolution's output, input, weight and bias gradients within 1e-5
/// of the CPU's.
fn assert_same_run(name: &str, got: &CpuRun, want: &CpuRun) {
    assert_close(&format!("{name}: output"), &got.y, &want.y, 1e-5);
    assert_close(&format!("{name}: input gradient"), &got.dx, &want.dx, 1e-5);
    assert_close(
        &format!("{name}: weight gradient"),
        &got.param_diffs[0],
        &want.param_diffs[0],
        1e-5,
    );
    assert_close(
        &format!("{name}: bias gradient"),
        &got.param_diffs[1],
        &want.param_diffs[1],
        1e-5,
    );
}

/// A square convolution's `LayerParameter` text.
fn conv_text(num_output: usize, kernel: usize, stride: usize, pad: usize) -> String {
    format!(
        r#"type: "Convolution" convolution_param {{ num_output: {num_output} kernel_size: {kernel} stride: {stride} pad: {pad} }}"#
    )
}

#[test]
fn im2col_path_matches_cpu_convolution() {
    let x_shape = [2, 3, 9, 9];
    check(
        "3x3 stride 2 pad 1",
        Geometry::new(2, 3, 4, 9, 3, 2, 1),
        |p, x, dy| {
            run_on_cpu(
                &conv_text(4, 3, 2, 1),
                p,
                (&x_shape, x),
                (&[2, 4, 5, 5], dy),
            )
        },
    );
    check("5x5", Geometry::new(2, 3, 6, 9, 5, 1, 0), |p, x, dy| {
        run_on_cpu(
            &conv_text(6, 5, 1, 0),
            p,
            (&x_shape, x),
            (&[2, 6, 5, 5], dy),
        )
    });
    // A stride that skips input pixels and padding wider than a step.
    check(
        "2x2 stride 3 pad 2",
        Geometry::new(2, 3, 5, 9, 2, 3, 2),
        |p, x, dy| {
            run_on_cpu(
                &conv_text(5, 2, 3, 2),
                p,
                (&x_shape, x),
                (&[2, 5, 4, 4], dy),
            )
        },
    );
}

/// Rectangular kernels, strides and pads with dilation, against the
/// run-time Convolution built from its `convolution_param`.
#[test]
fn im2col_path_matches_rectangular_dilated_convolution() {
    let g = Geometry::rect(2, 3, 4, [9, 11], [3, 2], [2, 1], [1, 0], [2, 3]);
    check("3x2 stride 2x1 pad 1x0 dilation 2x3", g, |p, x, dy| {
        run_on_cpu(
            r#"type: "Convolution" convolution_param { num_output: 4 kernel_h: 3 kernel_w: 2
               stride_h: 2 stride_w: 1 pad_h: 1 pad_w: 0 dilation: 2 dilation: 3 }"#,
            p,
            (&[2, 3, 9, 11], x),
            (&[2, 4, g.oh, g.ow], dy),
        )
    });
}

/// The cuDNN path's bias: cuDNN convolves, the kernels add the bias and
/// sum its gradient.
#[test]
fn cudnn_bias_kernels_match_cpu_convolution() {
    let g = Geometry::new(2, 3, 4, 9, 3, 2, 1);
    let weight = random(g.cout * g.ckk(), 10, -0.5, 0.5);
    let bias = random(g.cout, 11, -0.5, 0.5);
    let x = random(g.x_len(), 1, -1.0, 1.0);
    let dy = random(g.y_len(), 2, -1.0, 1.0);
    let run = |b: &[f32]| {
        run_on_cpu(
            &conv_text(4, 3, 2, 1),
            &[weight.clone(), b.to_vec()],
            (&[2, 3, 9, 9], &x),
            (&[2, 4, 5, 5], &dy),
        )
    };
    let (unbiased, want) = (run(&vec![0.0; g.cout]), run(&bias));
    let mut y = unbiased.y.clone();
    let total = g.y_len();
    // SAFETY: y holds total values, bias cout.
    unsafe {
        k::add_channel_bias_f32(
            total,
            total as i64,
            g.cout as i32,
            g.p() as i32,
            &bias,
            &mut y,
        )
    };
    assert_close("biased output", &y, &want.y, 1e-6);
    let mut db = vec![0.0; g.cout];
    add_sums(
        &SumLayout::channels_of(g.batch, g.cout, g.p()),
        &dy,
        &mut db,
    );
    assert_close("bias gradient", &db, &want.param_diffs[1], 1e-5);
}

/// A volume's taps, worked out here from Caffe's `im2col_nd` definition:
/// for kernel offset `k` and output point `p` (each in C order), the
/// input point read, or `u32::MAX` in the padding; and the inverse
/// tables `conv/cuda.rs` builds (each input point's `k P + p`s, in order).
fn volume_tables(
    input: [usize; 3],
    output: [usize; 3],
    [kernel, stride, pad, dilation]: [[usize; 3]; 4],
) -> (Vec<u32>, Vec<u32>, Vec<u32>) {
    let index = |at: [usize; 3], dims: [usize; 3]| (at[0] * dims[1] + at[1]) * dims[2] + at[2];
    let points = output.iter().product::<usize>();
    let mut taps = vec![u32::MAX; kernel.iter().product::<usize>() * points];
    for k in 0..kernel.iter().product() {
        let ko = [
            k / (kernel[1] * kernel[2]),
            k / kernel[2] % kernel[1],
            k % kernel[2],
        ];
        for p in 0..points {
            let po = [
                p / (output[1] * output[2]),
                p / output[2] % output[1],
                p % output[2],
            ];
            let mut at = [0; 3];
            let inside = (0..3).all(|a| {
                let pos = (po[a] * stride[a] + ko[a] * dilation[a]) as isize - pad[a] as isize;
                at[a] = pos.max(0) as usize;
                pos >= 0 && (pos as usize) < input[a]
            });
            if inside {
                taps[k * points + p] = index(at, input) as u32;
            }
        }
    }
    let plane = input.iter().product::<usize>();
    let (mut starts, mut entries) = (vec![0u32], Vec::new());
    for q in 0..plane as u32 {
        entries.extend((0..taps.len() as u32).filter(|&e| taps[e as usize] == q));
        starts.push(entries.len() as u32);
    }
    (taps, starts, entries)
}

#[test]
fn volume_taps_match_cpu_convolution() {
    let (batch, cin, cout) = (2usize, 2usize, 3usize);
    let input = [4usize, 5, 6];
    let window = [[3usize, 2, 3], [1, 2, 1], [1, 0, 1], [1, 1, 2]];
    let output = [4usize, 2, 4];
    let (plane, points) = (120usize, 32usize);
    let kernel_points = 18usize;
    let (ckk, cols) = (cin * kernel_points, batch * points);
    let x = random(batch * cin * plane, 51, -1.0, 1.0);
    let dy = random(batch * cout * points, 52, -1.0, 1.0);
    let weight = random(cout * ckk, 53, -0.5, 0.5);
    let bias = random(cout, 54, -0.5, 0.5);
    let axes = |v: [usize; 3], name: &str| -> String {
        v.iter().map(|d| format!("{name}: {d} ")).collect()
    };
    let layer = format!(
        r#"layer {{ name: "l" type: "Convolution" bottom: "x" top: "y" convolution_param {{ num_output: {cout} {}{}{}{} }} }}"#,
        axes(window[0], "kernel_size"),
        axes(window[1], "stride"),
        axes(window[2], "pad"),
        axes(window[3], "dilation"),
    );
    let shape = [batch, cin, input[0], input[1], input[2]];
    let (want_y, want_dx, want_dp) =
        crate::cpu_net(&layer, &shape, &x, &dy, &[weight.clone(), bias.clone()]);
    let (taps, starts, entries) = volume_tables(input, output, window);
    let (ki, pl, pt, bi) = (
        kernel_points as i32,
        plane as i64,
        points as i64,
        batch as i32,
    );

    let mut col = vec![f32::NAN; ckk * cols];
    // SAFETY: x holds batch*cin*plane values, col ckk*cols, taps K*P
    // below plane or the mark.
    unsafe {
        k::im2col_taps_f32(
            col.len(),
            col.len() as i64,
            cin as i32,
            pl,
            ki,
            pt,
            bi,
            &taps,
            &x,
            &mut col,
        )
    };
    let mut tmp = vec![f32::NAN; cout * cols];
    gemm(
        Transpose::No,
        Transpose::No,
        cout,
        cols,
        ckk,
        1.0,
        &weight,
        &col,
        0.0,
        &mut tmp,
    );
    let total = batch * cout * points;
    let mut y = vec![f32::NAN; total];
    let (ci, pi) = (cout as i32, points as i32);
    // SAFETY: tmp holds cout*cols, bias cout, y total.
    unsafe { k::scatter_bias_f32(total, total as i64, ci, bi, pi, &tmp, &bias, &mut y) };
    assert_close("volume convolution", &y, &want_y, 1e-5);

    // SAFETY: dy holds total, tmp cout*cols.
    unsafe { k::gather_f32(total, total as i64, ci, bi, pi, &dy, &mut tmp) };
    let mut dw = vec![0.0; cout * ckk];
    gemm(
        Transpose::No,
        Transpose::Yes,
        cout,
        ckk,
        cols,
        1.0,
        &tmp,
        &col,
        1.0,
        &mut dw,
    );
    assert_close("volume weight gradient", &dw, &want_dp[0], 1e-5);
    let mut dcol = vec![f32::NAN; ckk * cols];
    gemm(
        Transpose::Yes,
        Transpose::No,
        ckk,
        cols,
        cout,
        1.0,
        &weight,
        &tmp,
        0.0,
        &mut dcol,
    );
    let n = batch * cin * plane;
    let mut dx = vec![f32::NAN; n];
    // SAFETY: dcol holds ckk*cols, dx n, starts plane + 1 bounding
    // entries below K*P.
    unsafe {
        k::col2im_taps_f32(
            n, n as i64, cin as i32, pl, ki, pt, bi, &starts, &entries, &dcol, &mut dx,
        )
    };
    assert_close("volume input gradient", &dx, &want_dx, 1e-5);
}

/// The depthwise kernels (`conv/cuda.rs` takes them where the group is
/// the channel count), forward, input, weight and bias gradients,
/// against the run-time Convolution with `group` = channels on the CPU:
/// MobileNet's 3x3 at strides 1 and 2, and a rectangular, dilated one
/// with uneven padding.
#[test]
fn depthwise_kernels_match_cpu_grouped_convolution() {
    let cases = [
        ("3x3 stride 1 pad 1", Geometry::new(2, 4, 4, 9, 3, 1, 1), ""),
        ("3x3 stride 2 pad 1", Geometry::new(2, 4, 4, 9, 3, 2, 1), ""),
        (
            "3x2 stride 2x1 pad 1x0 dilation 2x3",
            Geometry::rect(2, 3, 3, [9, 11], [3, 2], [2, 1], [1, 0], [2, 3]),
            "kernel_h: 3 kernel_w: 2 stride_h: 2 stride_w: 1 pad_h: 1 pad_w: 0 dilation: 2 dilation: 3",
        ),
    ];
    for (name, g, geometry) in cases {
        let geometry = if geometry.is_empty() {
            format!(
                "kernel_size: {} stride: {} pad: {}",
                g.k[0], g.s[0], g.pad[0]
            )
        } else {
            geometry.to_string()
        };
        let taps = g.k[0] * g.k[1];
        let weight = random(g.cin * taps, 10, -0.5, 0.5);
        let bias = random(g.cin, 11, -0.5, 0.5);
        let x = random(g.x_len(), 1, -1.0, 1.0);
        let dy = random(g.y_len(), 2, -1.0, 1.0);
        let want = run_on_cpu(
            &format!(
                r#"type: "Convolution" convolution_param {{ num_output: {} group: {} {geometry} }}"#,
                g.cin, g.cin
            ),
            &[weight.clone(), bias.clone()],
            (&[g.batch, g.cin, g.h, g.w], &x),
            (&[g.batch, g.cin, g.oh, g.ow], &dy),
        );
        let [c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, batch] = g.ints();
        let n = g.y_len();
        let mut y = vec![f32::NAN; n];
        // SAFETY: y holds n values, x x_len, the weights c*kh*kw, the bias c.
        unsafe {
            k::depthwise_forward_f32(
                n, n as i64, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, batch, &x, &weight,
                &bias, &mut y,
            )
        };
        let n = g.x_len();
        let mut dx = vec![f32::NAN; n];
        // SAFETY: dx holds n values, dy y_len, the weights c*kh*kw.
        unsafe {
            k::depthwise_input_grad_f32(
                n, n as i64, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, batch, &dy, &weight,
                &mut dx,
            )
        };
        let n = weight.len();
        // Added on, as Caffe accumulates: start from a value.
        let mut wgrad = vec![0.25; n];
        // SAFETY: wgrad holds c*kh*kw = n values, x x_len, dy y_len.
        unsafe {
            k::depthwise_weight_grad_f32(
                n, n as i64, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, batch, &x, &dy,
                &mut wgrad,
            )
        };
        wgrad.iter_mut().for_each(|v| *v -= 0.25);
        let mut dbias = vec![0.0; g.cin];
        add_sums(
            &SumLayout::channels_of(g.batch, g.cin, g.p()),
            &dy,
            &mut dbias,
        );
        let got = CpuRun {
            y,
            dx,
            param_diffs: vec![wgrad, dbias],
        };
        assert_same_run(name, &got, &want);
    }
}
