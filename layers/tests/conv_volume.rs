//! Convolution and Deconvolution over any number of spatial axes
//! (Caffe's `im2col_nd` path): three axes against Caffe's sums written
//! out over coordinates, their gradients against central differences, one axis and a channel
//! axis other than 1 against the planar convolution they equal, and the
//! settings refused for the input's rank.

use blob_layers::DynLayer;
use blob_layers::check::GradientChecker;
use blob_layers::net::{Net, NetState};
use blob_layers::registry::LayerRegistry;
use blob_proto::{ParamMessage, TextMessage, schema};
use blob_runtime::Blob;

fn layer(text: &str) -> Box<dyn DynLayer<f64>> {
    try_layer(text).unwrap()
}

fn try_layer(text: &str) -> blob_runtime::Result<Box<dyn DynLayer<f64>>> {
    let param =
        ParamMessage::from_text(&schema::LAYER_PARAMETER, &TextMessage::parse(text).unwrap())
            .unwrap();
    LayerRegistry::with_caffe_layers().build(param.string("type"), &param)
}

/// Values that differ everywhere, from `seed`.
fn values(n: usize, seed: u64) -> Vec<f64> {
    (0..n)
        .map(|i| (((i as u64 + 1) * 2_654_435_761 + seed * 97) % 1000) as f64 / 500.0 - 1.0)
        .collect()
}

fn blob(shape: &[usize], seed: u64) -> Blob<f64> {
    let b = Blob::new(shape).unwrap();
    b.mutable_cpu_data()
        .unwrap()
        .copy_from_slice(&values(b.count(), seed));
    b
}

/// Reshapes `l` to `x`, sets its weights and bias from seeds 2 and 3, and
/// runs it forward: the output.
fn forward(l: &mut dyn DynLayer<f64>, x: &Blob<f64>) -> Blob<f64> {
    let mut y = Blob::default();
    let dims = l.reshape(&[x], &[&y]).unwrap()[0].dims.clone();
    y.reshape(&dims).unwrap();
    for (i, p) in l.blobs().iter().enumerate() {
        p.mutable_cpu_data()
            .unwrap()
            .copy_from_slice(&values(p.count(), 2 + i as u64));
    }
    l.forward(&[x], &[&y]).unwrap();
    y
}

/// The multi-index of `i` in `dims` (C order).
fn coords(mut i: usize, dims: &[usize]) -> Vec<usize> {
    let mut at = vec![0; dims.len()];
    for a in (0..dims.len()).rev() {
        at[a] = i % dims[a];
        i /= dims[a];
    }
    at
}

fn index(at: &[usize], dims: &[usize]) -> usize {
    at.iter().zip(dims).fold(0, |i, (&v, &d)| i * d + v)
}

#[test]
fn a_convolution_over_three_axes_is_caffes_sum() {
    let (kernel, stride, pad, dilation) = ([2, 3, 2], [1, 2, 1], [1, 0, 1], [1, 1, 2]);
    let mut l = layer(
        r#"type: "Convolution" convolution_param { num_output: 4 group: 2
           kernel_size: 2 kernel_size: 3 kernel_size: 2 stride: 1 stride: 2 stride: 1
           pad: 1 pad: 0 pad: 1 dilation: 1 dilation: 1 dilation: 2 }"#,
    );
    let (n, c, m, input) = (2, 4, 4, [3, 5, 4]);
    let x = blob(&[n, c, input[0], input[1], input[2]], 1);
    let y = forward(l.as_mut(), &x);
    // (3 + 2 - 2) / 1 + 1, (5 - 3) / 2 + 1, (4 + 2 - 3) / 1 + 1.
    let output = [4, 2, 4];
    assert_eq!(y.shape(), [n, m, 4, 2, 4]);
    assert_eq!(l.blobs()[0].shape(), [m, c / 2, 2, 3, 2]);
    let [xv, w, b, yv] = [&x, &l.blobs()[0], &l.blobs()[1], &y].map(|b| b.to_vec().unwrap());
    let (cg, mg) = (c / 2, m / 2);
    let taps: usize = kernel.iter().product();
    let plane: usize = input.iter().product();
    let points: usize = output.iter().product();
    for img in 0..n {
        for o in 0..m {
            let g = o / mg;
            for p in 0..points {
                let out = coords(p, &output);
                let mut want = b[o];
                for ci in 0..cg {
                    for t in 0..taps {
                        let tap = coords(t, &kernel);
                        let at: Option<Vec<usize>> = (0..3)
                            .map(|a| {
                                (out[a] * stride[a] + tap[a] * dilation[a])
                                    .checked_sub(pad[a])
                                    .filter(|&v| v < input[a])
                            })
                            .collect();
                        let Some(at) = at else { continue };
                        let xi = (img * c + g * cg + ci) * plane + index(&at, &input);
                        want += w[(o * cg + ci) * taps + t] * xv[xi];
                    }
                }
                let got = yv[(img * m + o) * points + p];
                assert!(
                    (got - want).abs() < 1e-12,
                    "y[{img}, {o}, {out:?}]: {got} vs {want}"
                );
            }
        }
    }
}

#[test]
fn a_convolution_over_three_axes_passes_the_gradient_check() {
    let mut l = layer(
        r#"type: "Convolution" convolution_param { num_output: 4 group: 2
           kernel_size: 2 kernel_size: 2 kernel_size: 3 stride: 2 stride: 1 stride: 1 pad: 1
           dilation: 1 dilation: 2 dilation: 1
           weight_filler { type: "gaussian" } bias_filler { type: "gaussian" } }"#,
    );
    let x = blob(&[2, 2, 3, 4, 4], 5);
    let report = GradientChecker {
        step: 1e-4,
        threshold: 1e-7,
    }
    .check(l.as_mut(), &[x])
    .unwrap();
    // Inputs, weights (4 x 1 x 2 x 2 x 3) and bias.
    assert_eq!(report.checked, 2 * 2 * 3 * 4 * 4 + 4 * 2 * 2 * 3 + 4);
}

#[test]
fn one_spatial_axis_and_a_later_channel_axis_are_the_planar_convolution() {
    // (N, C, L) with a 3-wide kernel is (N, C, 1, L) with a 1 x 3 one.
    let mut line = layer(
        r#"type: "Convolution" convolution_param { num_output: 3 kernel_size: 3 stride: 2 pad: 1 }"#,
    );
    let mut plane = layer(
        r#"type: "Convolution" convolution_param { num_output: 3 kernel_h: 1 kernel_w: 3
           stride_h: 1 stride_w: 2 pad_h: 0 pad_w: 1 }"#,
    );
    let a = forward(line.as_mut(), &blob(&[2, 4, 9], 1));
    let b = forward(plane.as_mut(), &blob(&[2, 4, 1, 9], 1));
    assert_eq!(a.shape(), [2, 3, 5]);
    assert_eq!(line.blobs()[0].shape(), [3, 4, 3]);
    assert_eq!(a.to_vec().unwrap(), b.to_vec().unwrap());

    // Channels on axis 2 of (2, 3, C, H, W): six images of (C, H, W).
    let mut late =
        layer(r#"type: "Convolution" convolution_param { num_output: 2 kernel_size: 3 axis: 2 }"#);
    let mut usual =
        layer(r#"type: "Convolution" convolution_param { num_output: 2 kernel_size: 3 }"#);
    let a = forward(late.as_mut(), &blob(&[2, 3, 4, 5, 5], 7));
    let b = forward(usual.as_mut(), &blob(&[6, 4, 5, 5], 7));
    assert_eq!(a.shape(), [2, 3, 2, 3, 3]);
    assert_eq!(a.to_vec().unwrap(), b.to_vec().unwrap());
}

#[test]
fn a_deconvolution_over_three_axes_scatters_each_input_point_through_the_kernel() {
    let (kernel, stride, pad) = ([2, 3, 2], [2, 1, 2], [0, 1, 1]);
    let mut l = layer(
        r#"type: "Deconvolution" convolution_param { num_output: 4 group: 2
           kernel_size: 2 kernel_size: 3 kernel_size: 2 stride: 2 stride: 1 stride: 2
           pad: 0 pad: 1 pad: 1 }"#,
    );
    let (n, c, m, input) = (2, 4, 4, [2, 3, 3]);
    let x = blob(&[n, c, input[0], input[1], input[2]], 1);
    let y = forward(l.as_mut(), &x);
    // stride (in - 1) + kernel - 2 pad: 2 + 2, 2 + 3 - 2, 4 + 2 - 2.
    let output = [4, 3, 4];
    assert_eq!(y.shape(), [n, m, 4, 3, 4]);
    assert_eq!(l.blobs()[0].shape(), [c, m / 2, 2, 3, 2]);
    let [xv, w, b, yv] = [&x, &l.blobs()[0], &l.blobs()[1], &y].map(|b| b.to_vec().unwrap());
    let (cg, mg) = (c / 2, m / 2);
    let taps: usize = kernel.iter().product();
    let plane: usize = input.iter().product();
    let points: usize = output.iter().product();
    let mut want = vec![0.0; n * m * points];
    for (i, v) in want.iter_mut().enumerate() {
        *v = b[(i / points) % m];
    }
    for img in 0..n {
        for ci in 0..c {
            let g = ci / cg;
            for p in 0..plane {
                let at = coords(p, &input);
                for t in 0..taps {
                    let tap = coords(t, &kernel);
                    let out: Option<Vec<usize>> = (0..3)
                        .map(|a| {
                            (at[a] * stride[a] + tap[a])
                                .checked_sub(pad[a])
                                .filter(|&v| v < output[a])
                        })
                        .collect();
                    let Some(out) = out else { continue };
                    for mo in 0..mg {
                        let o = g * mg + mo;
                        want[(img * m + o) * points + index(&out, &output)] +=
                            w[(ci * mg + mo) * taps + t] * xv[(img * c + ci) * plane + p];
                    }
                }
            }
        }
    }
    for (i, (got, want)) in yv.iter().zip(&want).enumerate() {
        assert!((got - want).abs() < 1e-12, "y[{i}]: {got} vs {want}");
    }
    let report = GradientChecker {
        step: 1e-4,
        threshold: 1e-7,
    }
    .check(l.as_mut(), &[x])
    .unwrap();
    assert_eq!(report.checked, n * c * plane + c * mg * taps + m);
}

#[test]
fn a_net_of_volumes_runs_forward_and_backward() {
    // A 3-D encoder step and its upsampling back, as in a 3-D U-Net.
    let mut net = Net::<f32>::from_prototxt(
        r#"input: "scan" input_shape { dim: 1 dim: 1 dim: 6 dim: 8 dim: 8 }
           force_backward: true
           layer { name: "conv" type: "Convolution" bottom: "scan" top: "features"
                   convolution_param { num_output: 2 kernel_size: 3 pad: 1
                                       weight_filler { type: "constant" value: 1 } } }
           layer { name: "down" type: "Convolution" bottom: "features" top: "coarse"
                   convolution_param { num_output: 2 kernel_size: 2 stride: 2
                                       weight_filler { type: "constant" value: 1 } } }
           layer { name: "up" type: "Deconvolution" bottom: "coarse" top: "up"
                   convolution_param { num_output: 1 kernel_size: 2 stride: 2
                                       weight_filler { type: "constant" value: 1 } } }"#,
        NetState::test(),
    )
    .unwrap();
    net.blob("scan")
        .unwrap()
        .mutable_cpu_data()
        .unwrap()
        .fill(1.0);
    net.forward().unwrap();
    let y = net.blob("features").unwrap();
    assert_eq!(y.shape(), [1, 2, 6, 8, 8]);
    let yv = y.to_vec().unwrap();
    // An inner point sees all 27 ones; a corner 8.
    assert_eq!(yv[(3 * 8 + 3) * 8 + 3], 27.0);
    assert_eq!(yv[0], 8.0);
    assert_eq!(net.blob("coarse").unwrap().shape(), [1, 2, 3, 4, 4]);
    assert_eq!(net.blob("up").unwrap().shape(), [1, 1, 6, 8, 8]);
    net.blob("up")
        .unwrap()
        .mutable_cpu_diff()
        .unwrap()
        .fill(1.0);
    net.backward().unwrap();
    // d up / d coarse: each coarse point feeds 8 up points through 1s.
    let dc = net.blob("coarse").unwrap().diff_to_vec().unwrap();
    assert!(dc.iter().all(|&v| v == 8.0), "{dc:?}");
    let dx = net.blob("scan").unwrap().diff_to_vec().unwrap();
    // Each features point feeds one coarse point per channel (8 x 2),
    // and each inner scan point 27 features points of each channel.
    assert_eq!(dx[(3 * 8 + 3) * 8 + 3], 27.0 * 2.0 * 2.0 * 8.0);
}

#[test]
fn settings_that_do_not_fit_the_inputs_rank_are_refused() {
    let x4 = Blob::<f64>::new(&[1, 1, 6, 6]).unwrap();
    let x5 = Blob::<f64>::new(&[1, 1, 4, 6, 6]).unwrap();
    let refused = |text: &str, x: &Blob<f64>| {
        let mut l = layer(text);
        l.reshape(&[x], &[&Blob::default()])
            .map(drop)
            .expect_err("refused")
            .to_string()
    };
    let x3d = Blob::<f64>::new(&[1, 1, 3, 6, 6]).unwrap();
    for (param, x, says) in [
        (
            "kernel_size: 3 kernel_size: 3 kernel_size: 3",
            &x4,
            "once per spatial dimension (3 given for 2)",
        ),
        (
            "kernel_h: 3 kernel_w: 3",
            &x5,
            "can only be used for 2D convolution, not over 3",
        ),
        (
            "kernel_size: 3 axis: 4",
            &x4,
            "axis 4 is not an axis of the input 1 1 6 6 (36)",
        ),
        (
            "kernel_size: 5",
            &x3d,
            "is 3 along axis 2, where the kernel",
        ),
    ] {
        let e = refused(
            &format!(r#"type: "Convolution" convolution_param {{ num_output: 2 {param} }}"#),
            x,
        );
        assert!(e.contains(says), "{param}: {e}");
    }
    // A zero is refused when the layer is made, whatever the rank.
    let e = try_layer(
        r#"type: "Convolution" convolution_param { num_output: 2 kernel_size: 3 kernel_size: 0 kernel_size: 3 }"#,
    )
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("kernel (3 x 0 x 3)"), "{e}");
}
