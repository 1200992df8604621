//! The layers LeNet and its kin use, run on their own, against finite
//! differences (in f64, so the check is tight) and against direct
//! definitions of what they compute: Caffe's output-size rules, padding,
//! AVE windows, dropout's mask.

use blobflow::Blob;
use blobflow::layers::DynLayer;
use blobflow::layers::check::GradientChecker;
use blobflow::layers::registry::LayerRegistry;

fn fill(b: &Blob<f64>, seed: u64) {
    // A fixed, irregular fill: no ties for max pooling, no exact zeros for
    // ReLU.
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    for v in b.mutable_cpu_data().unwrap().iter_mut() {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *v = ((state >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0;
    }
}

/// The layer `text` (a `LayerParameter` in text) describes.
fn layer(text: &str) -> Box<dyn DynLayer<f64>> {
    LayerRegistry::with_caffe_layers()
        .build_text(text)
        .unwrap_or_else(|e| panic!("{text}: {e}"))
}

/// Reshapes `y` to what `layer` makes of `x` (the first time, Caffe's
/// LayerSetUp: the parameters are made) and runs it forward.
fn forward(layer: &mut dyn DynLayer<f64>, x: &Blob<f64>, y: &mut Blob<f64>) {
    let shape = layer.reshape(&[x], &[y]).unwrap().remove(0);
    if !std::ptr::eq(x, y) {
        y.reshape(&shape.dims).unwrap();
    }
    layer.forward(&[x], &[y]).unwrap();
}

/// Holds the layer's input and parameter gradients to central differences
/// (Caffe's GradientChecker, tight in f64).
fn check_gradients(layer: &mut dyn DynLayer<f64>, x: &Blob<f64>) {
    let input = Blob::from_vec(x.shape(), x.to_vec().unwrap()).unwrap();
    let checker = GradientChecker {
        step: 1e-6,
        threshold: 1e-6,
    };
    let report = checker
        .check(layer, &[input])
        .unwrap_or_else(|e| panic!("{}: {e}", layer.type_name()));
    assert!(report.checked > 0);
}

/// An input of `shape`, filled from seed 1.
fn input(shape: &[usize]) -> Blob<f64> {
    let x = Blob::new(shape).unwrap();
    fill(&x, 1);
    x
}

/// LRN across channels (GoogLeNet's and CaffeNet's), against Caffe's
/// definition: channel counts that cut the 16-channel blocks the cores
/// share (windows that reach across a block's edge), windows of 3 and 5,
/// beta 0.75 (square roots) and 0.6, a batch of 1 and of 2; the input
/// gradient by differences; f32 the same bits on 1 and 3 threads.
#[test]
fn lrn_across_channels_matches_the_definition() {
    let cases = [
        (5, 0.75, [1, 37, 3, 5]),
        (3, 0.6, [2, 20, 4, 3]),
        (5, 0.75, [2, 3, 2, 2]),
    ];
    for (size, beta, shape) in cases {
        let (alpha, k) = (0.3, 1.5);
        let text = format!(
            r#"type: "LRN" lrn_param {{ local_size: {size} alpha: {alpha} beta: {beta} k: {k} }}"#
        );
        let mut lrn = layer(&text);
        let (x, mut y) = (input(&shape), Blob::default());
        forward(lrn.as_mut(), &x, &mut y);
        let [_, c, h, w] = shape;
        let (xd, yd) = (x.to_vec().unwrap(), y.to_vec().unwrap());
        let r = (size - 1) / 2;
        let wants: Vec<f64> = (0..yd.len())
            .map(|i| {
                let (ch, at, img) = (i / (h * w) % c, i % (h * w), i / (c * h * w));
                let sum: f64 = (ch.saturating_sub(r)..=(ch + r).min(c - 1))
                    .map(|q| xd[(img * c + q) * h * w + at].powi(2))
                    .sum();
                xd[i] * (k + alpha / size as f64 * sum).powf(-beta)
            })
            .collect();
        for (i, (&got, &want)) in yd.iter().zip(&wants).enumerate() {
            assert!(
                (got - want).abs() < 1e-12,
                "{shape:?} size {size}: y[{i}] {got} vs {want}"
            );
        }
        check_gradients(lrn.as_mut(), &x);
        let on = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            let mut lrn = LayerRegistry::<f32>::with_caffe_layers()
                .build_text(&text)
                .unwrap();
            let x = Blob::<f32>::from_vec(&shape, xd.iter().map(|&v| v as f32).collect()).unwrap();
            let mut y = Blob::<f32>::default();
            let dims = lrn.reshape(&[&x], &[&y]).unwrap().remove(0).dims;
            y.reshape(&dims).unwrap();
            pool.install(|| lrn.forward(&[&x], &[&y])).unwrap();
            y.to_vec()
                .unwrap()
                .iter()
                .map(|v| v.to_bits())
                .collect::<Vec<_>>()
        };
        let f32_bits = on(1);
        assert_eq!(f32_bits, on(3), "{shape:?}: f32 on 1 and 3 threads");
        // f32 computes in f32, as Caffe does: within a few rounding
        // steps of the definition (of the f32 input).
        for (i, (&bits, &want)) in f32_bits.iter().zip(&wants).enumerate() {
            let got = f64::from(f32::from_bits(bits));
            let want = want * f64::from(xd[i] as f32) / xd[i];
            assert!(
                (got - want).abs() <= 4.0 * f64::from(f32::EPSILON) * want.abs(),
                "{shape:?} size {size}: f32 y[{i}] {got} vs {want}"
            );
        }
    }
}

const STRIDED: &str =
    r#"type: "Convolution" convolution_param { num_output: 3 kernel_size: 3 stride: 2 pad: 1 }"#;

#[test]
fn convolution_with_stride_and_padding() {
    // (7 + 2*1 - 3) / 2 + 1 = 4.
    let mut conv = layer(STRIDED);
    let (x, mut y) = (input(&[2, 2, 7, 7]), Blob::default());
    forward(conv.as_mut(), &x, &mut y);
    assert_eq!(y.shape(), [2, 3, 4, 4]);
    fill(&conv.blobs()[0], 2);
    fill(&conv.blobs()[1], 3);
    conv.forward(&[&x], &[&y]).unwrap();
    // An input of other channels than the weights were made for is
    // refused, naming both.
    let other = Blob::<f64>::new(&[2, 5, 7, 7]).unwrap();
    let err = conv.reshape(&[&other], &[&y]).unwrap_err().to_string();
    assert!(err.contains("2 5 7 7") && err.contains("channels"), "{err}");
    // Against the definition, padding reading zero.
    let (xd, w, b, yd) = (
        x.to_vec().unwrap(),
        conv.blobs()[0].to_vec().unwrap(),
        conv.blobs()[1].to_vec().unwrap(),
        y.to_vec().unwrap(),
    );
    for n in 0..2 {
        for co in 0..3 {
            for r in 0..4 {
                for q in 0..4 {
                    let mut sum = b[co];
                    for ci in 0..2 {
                        for ki in 0..3 {
                            for kj in 0..3 {
                                let (ih, iw) =
                                    ((r * 2 + ki) as isize - 1, (q * 2 + kj) as isize - 1);
                                if (0..7).contains(&ih) && (0..7).contains(&iw) {
                                    sum += w[((co * 2 + ci) * 3 + ki) * 3 + kj]
                                        * xd[((n * 2 + ci) * 7 + ih as usize) * 7 + iw as usize];
                                }
                            }
                        }
                    }
                    let got = yd[((n * 3 + co) * 4 + r) * 4 + q];
                    assert!(
                        (got - sum).abs() < 1e-12,
                        "y[{n},{co},{r},{q}] {got} vs {sum}"
                    );
                }
            }
        }
    }
    check_gradients(conv.as_mut(), &x);
}

#[test]
fn an_empty_batch_adds_no_gradient() {
    // A batch of 0 is a valid batch: nothing to compute, and the
    // parameters' gradients stay as they were, including after a batch
    // that filled the layer's per-core buffers.
    let mut conv = layer(STRIDED);
    let mut y = Blob::default();
    for (batch, propagate_down) in [(0, true), (2, true), (0, true), (0, false)] {
        let x = input(&[batch, 2, 7, 7]);
        forward(conv.as_mut(), &x, &mut y);
        fill(&conv.blobs()[0], 2);
        y.mutable_cpu_diff().unwrap().fill(1.0);
        for p in conv.blobs() {
            p.mutable_cpu_diff().unwrap().fill(0.5);
        }
        conv.backward(&[&y], &[propagate_down], &[&x]).unwrap();
        let untouched = conv
            .blobs()
            .iter()
            .all(|p| p.diff_to_vec().unwrap().iter().all(|&d| d == 0.5));
        assert_eq!(untouched, batch == 0, "batch {batch}");
    }
}

#[test]
fn pooling_uses_caffes_ceil_rule_and_clipped_windows() {
    // ceil((7 - 3) / 2) + 1 = 3; with kernel 3 stride 3, ceil(4 / 3) + 1 = 3
    // and the last window is clipped to one column.
    let mut max = layer(r#"type: "Pooling" pooling_param { pool: MAX kernel_size: 3 stride: 2 }"#);
    let (x, mut y) = (input(&[2, 2, 7, 7]), Blob::default());
    forward(max.as_mut(), &x, &mut y);
    assert_eq!(y.shape(), [2, 2, 3, 3]);
    check_gradients(max.as_mut(), &x);
    let mut ave = layer(r#"type: "Pooling" pooling_param { pool: AVE kernel_size: 3 stride: 3 }"#);
    forward(ave.as_mut(), &x, &mut y);
    assert_eq!(y.shape(), [2, 2, 3, 3]);
    let xd = x.to_vec().unwrap();
    // Output (0, 0, 2, 2) averages the clipped window rows 6..7, cols 6..7.
    assert_eq!(y.data_at(&[0, 0, 2, 2]), xd[6 * 7 + 6]);
    let window: f64 = (0..3)
        .flat_map(|r| (6..7).map(move |c| (r, c)))
        .map(|(r, c)| xd[r * 7 + c])
        .sum();
    assert!((y.data_at(&[0, 0, 0, 2]) - window / 3.0).abs() < 1e-12);
    check_gradients(ave.as_mut(), &x);
}

#[test]
fn pooling_windows_past_the_input_hold_nothing() {
    // A 1x1 window with stride 4 over 7: ceil(6 / 4) + 1 = 3 windows, at 0,
    // 4 and 8, the last past the input (Caffe writes -FLT_MAX there, and
    // its backward pass writes outside its blob). Here such a window gives
    // 0 and passes no gradient.
    for method in ["MAX", "AVE"] {
        let mut pool = layer(&format!(
            r#"type: "Pooling" pooling_param {{ pool: {method} kernel_size: 1 stride: 4 }}"#
        ));
        let (x, mut y) = (input(&[2, 2, 7, 7]), Blob::default());
        forward(pool.as_mut(), &x, &mut y);
        assert_eq!(y.shape(), [2, 2, 3, 3]);
        let (xd, yd) = (x.to_vec().unwrap(), y.to_vec().unwrap());
        for plane in 0..4 {
            for r in 0..3 {
                for q in 0..3 {
                    let want = if r == 2 || q == 2 {
                        0.0
                    } else {
                        xd[plane * 49 + 4 * r * 7 + 4 * q]
                    };
                    assert_eq!(
                        yd[(plane * 3 + r) * 3 + q],
                        want,
                        "{method} {plane} {r} {q}"
                    );
                }
            }
        }
        check_gradients(pool.as_mut(), &x);
    }
}

const IP: &str = r#"type: "InnerProduct" inner_product_param { num_output: 5 }"#;

#[test]
fn inner_product_flattens_its_input() {
    let mut ip = layer(IP);
    let (x, mut y) = (input(&[2, 2, 7, 7]), Blob::default());
    forward(ip.as_mut(), &x, &mut y);
    assert_eq!(ip.blobs()[0].shape(), [5, 98]);
    assert_eq!(y.shape(), [2, 5]);
    fill(&ip.blobs()[0], 4);
    fill(&ip.blobs()[1], 5);
    check_gradients(ip.as_mut(), &x);
    // The same layer on the flattened input gives the same output.
    let mut flat = layer(IP);
    let fx = Blob::from_vec(&[2, 98], x.to_vec().unwrap()).unwrap();
    let mut fy = Blob::default();
    forward(flat.as_mut(), &fx, &mut fy);
    for (to, from) in flat.blobs().iter().zip(ip.blobs()) {
        to.mutable_cpu_data()
            .unwrap()
            .copy_from_slice(&from.cpu_data().unwrap());
    }
    forward(ip.as_mut(), &x, &mut y);
    forward(flat.as_mut(), &fx, &mut fy);
    assert_eq!(fy.to_vec().unwrap(), y.to_vec().unwrap());
}

#[test]
fn activations_and_softmax() {
    let x = input(&[3, 5]);
    for kind in ["ReLU", "Sigmoid", "TanH", "Softmax"] {
        check_gradients(layer(&format!(r#"type: "{kind}""#)).as_mut(), &x);
    }
    let mut y = Blob::default();
    forward(layer(r#"type: "Softmax""#).as_mut(), &x, &mut y);
    for row in y.to_vec().unwrap().chunks(5) {
        assert!((row.iter().sum::<f64>() - 1.0).abs() < 1e-12);
    }
    // TanH against the definition.
    forward(layer(r#"type: "TanH""#).as_mut(), &x, &mut y);
    assert_eq!(y.data_at(&[1, 2]), x.data_at(&[1, 2]).tanh());
}

#[test]
fn in_place_activation_backward_matches_the_out_of_place_one() {
    let (x, mut y) = (input(&[3, 5]), Blob::default());
    let mut sigmoid = layer(r#"type: "Sigmoid""#);
    forward(sigmoid.as_mut(), &x, &mut y);
    y.mutable_cpu_diff().unwrap().fill(0.5);
    sigmoid.backward(&[&y], &[true], &[&x]).unwrap();
    let out_of_place = x.diff_to_vec().unwrap();
    let z = Blob::from_vec(&[3, 5], x.to_vec().unwrap()).unwrap();
    sigmoid.forward(&[&z], &[&z]).unwrap();
    z.mutable_cpu_diff().unwrap().fill(0.5);
    sigmoid.backward(&[&z], &[true], &[&z]).unwrap();
    let in_place = z.diff_to_vec().unwrap();
    for (a, b) in in_place.iter().zip(&out_of_place) {
        assert!((a - b).abs() < 1e-15);
    }
}

#[test]
fn dropout_keeps_what_its_mask_keeps_forward_and_backward() {
    let (x, mut y) = (input(&[40, 5]), Blob::default());
    let mut drop = layer(r#"type: "Dropout" dropout_param { dropout_ratio: 0.25 }"#);
    blobflow::kernels::cpu::set_seed(3);
    forward(drop.as_mut(), &x, &mut y);
    y.mutable_cpu_diff().unwrap().fill(1.0);
    drop.backward(&[&y], &[true], &[&x]).unwrap();
    let (xd, yd, dx) = (
        x.to_vec().unwrap(),
        y.to_vec().unwrap(),
        x.diff_to_vec().unwrap(),
    );
    let mut kept = 0;
    for i in 0..xd.len() {
        if dx[i] == 0.0 {
            assert_eq!(yd[i], 0.0);
        } else {
            kept += 1;
            assert!((yd[i] - xd[i] / 0.75).abs() < 1e-12);
            assert!((dx[i] - 1.0 / 0.75).abs() < 1e-12);
        }
    }
    assert!(
        (110..190).contains(&kept),
        "{kept} of 200 kept at ratio 0.25"
    );
    let mut testing = layer(r#"type: "Dropout" phase: TEST dropout_param { dropout_ratio: 0.25 }"#);
    forward(testing.as_mut(), &x, &mut y);
    assert_eq!(y.to_vec().unwrap(), xd);
}

/// A convolution at stride 1 for the definition's sums: the input
/// `shape`, `cout` outputs of a `k x k` kernel, padding and dilation,
/// and the output's plane.
struct Window {
    shape: [usize; 4],
    cout: usize,
    k: usize,
    pad: usize,
    dil: usize,
    out: (usize, usize),
}

impl Window {
    /// Calls `tap(output, input, weight)` with the indices of every
    /// product the convolution sums (taps on padding left out).
    fn for_each_tap(&self, mut tap: impl FnMut(usize, usize, usize)) {
        let ([n, cin, h, w], (oh, ow), k) = (self.shape, self.out, self.k);
        let (pad, dil) = (self.pad as isize, self.dil);
        for o in 0..n * self.cout * oh * ow {
            let (img, co, r, q) = (
                o / (self.cout * oh * ow),
                o / (oh * ow) % self.cout,
                o / ow % oh,
                o % ow,
            );
            for ci in 0..cin {
                for ki in 0..k {
                    for kj in 0..k {
                        let ih = (r + ki * dil) as isize - pad;
                        let iw = (q + kj * dil) as isize - pad;
                        if (0..h as isize).contains(&ih) && (0..w as isize).contains(&iw) {
                            let xi = ((img * cin + ci) * h + ih as usize) * w + iw as usize;
                            tap(o, xi, ((co * cin + ci) * k + ki) * k + kj);
                        }
                    }
                }
            }
        }
    }
}

/// f32 1x1 layers on small planes, whose forward product runs from
/// weights packed once on AVX-512 machines (7 x 7, 3 x 3 and 2 x 2
/// outputs; 93 and 33 channels leave a partial panel): against the
/// definition, then again after the weights are written, which must make
/// the pack again, and after a reshape to another batch.
#[test]
fn f32_1x1_convolutions_on_small_planes_follow_their_weights() {
    for (cin, cout, side) in [(40, 93, 7), (300, 33, 3), (64, 96, 2)] {
        let text = format!(
            r#"type: "Convolution" convolution_param {{ num_output: {cout} kernel_size: 1 }}"#
        );
        let mut conv = LayerRegistry::<f32>::with_caffe_layers()
            .build_text(&text)
            .unwrap();
        let fill32 = |b: &Blob<f32>, seed: u64| {
            let probe = Blob::<f64>::new(b.shape()).unwrap();
            fill(&probe, seed);
            let values: Vec<f32> = probe.to_vec().unwrap().iter().map(|&v| v as f32).collect();
            b.mutable_cpu_data().unwrap().copy_from_slice(&values);
        };
        for (batch, weights_seed) in [(1, 2), (1, 5), (3, 6)] {
            let x = Blob::<f32>::new(&[batch, cin, side, side]).unwrap();
            fill32(&x, 1 + batch as u64);
            let mut y = Blob::<f32>::default();
            let dims = conv.reshape(&[&x], &[&y]).unwrap().remove(0).dims;
            y.reshape(&dims).unwrap();
            fill32(&conv.blobs()[0], weights_seed);
            fill32(&conv.blobs()[1], 3);
            conv.forward(&[&x], &[&y]).unwrap();
            let p = side * side;
            let (xd, wd, bd, yd) = (
                x.to_vec().unwrap(),
                conv.blobs()[0].to_vec().unwrap(),
                conv.blobs()[1].to_vec().unwrap(),
                y.to_vec().unwrap(),
            );
            assert_eq!(yd.len(), batch * cout * p);
            for (i, &got) in yd.iter().enumerate() {
                let (img, co, at) = (i / (cout * p), i / p % cout, i % p);
                let sum: f64 = f64::from(bd[co])
                    + (0..cin)
                        .map(|ci| {
                            f64::from(wd[co * cin + ci]) * f64::from(xd[(img * cin + ci) * p + at])
                        })
                        .sum::<f64>();
                assert!(
                    (f64::from(got) - sum).abs() < 1e-5 * (1.0 + sum.abs()),
                    "{cin} -> {cout} at {side} x {side}, batch {batch}, weights {weights_seed}: \
                     y[{i}] {got} vs {sum}"
                );
            }
        }
    }
}

/// f32 convolutions at stride 1 (the first layers of LeNet and MTCNN,
/// and LeNet's conv2 with and without padding; read from shifted or
/// padded copies of the image on AVX-512 machines), forward, weight,
/// bias and input gradients, against the definition, with padding,
/// dilation, channel counts that leave partial steps (and partial blocks
/// of the input gradient's channels), outputs narrower than a vector,
/// and one output a plane.
#[test]
fn f32_convolutions_at_stride_1_match_the_definition() {
    let cases = [
        // (input, num_output, kernel, pad, dilation)
        ([2, 1, 28, 28], 20, 5, 0, 1),
        ([2, 20, 12, 12], 50, 5, 2, 1),
        ([2, 20, 12, 12], 50, 5, 0, 1),
        ([2, 5, 12, 12], 7, 5, 0, 1),
        ([3, 3, 12, 13], 10, 3, 1, 1),
        ([1, 2, 11, 9], 13, 3, 2, 2),
        ([2, 3, 5, 4], 7, 2, 0, 1),
        // 54 taps, dilated and padded; 72 outputs a plane, so the weight
        // gradient's depth blocks of 512 end inside an image (a core
        // takes 4 images or more on up to 4 cores).
        ([16, 6, 11, 10], 9, 3, 1, 2),
        // Windows over the whole input (MTCNN P-Net's conv3 at 12 x 12),
        // whose forward pass is an inner product: one image (a gemv) and
        // three.
        ([1, 16, 3, 3], 32, 3, 0, 1),
        ([3, 4, 3, 3], 5, 3, 0, 1),
        // Padded windows the shifted copies do not take (540 taps; 360
        // taps onto 4 outputs a plane), whose forward product fills its
        // panels from the padded image.
        ([2, 60, 5, 6], 9, 3, 1, 1),
        ([1, 40, 4, 4], 16, 3, 1, 2),
    ];
    for (shape, cout, k, pad, dil) in cases {
        let text = format!(
            r#"type: "Convolution" convolution_param {{ num_output: {cout} kernel_size: {k} pad: {pad} dilation: {dil} }}"#
        );
        let mut conv = LayerRegistry::<f32>::with_caffe_layers()
            .build_text(&text)
            .unwrap();
        let x = Blob::<f32>::new(&shape).unwrap();
        let fill32 = |b: &Blob<f32>, seed: u64| {
            let probe = Blob::<f64>::new(b.shape()).unwrap();
            fill(&probe, seed);
            let values: Vec<f32> = probe.to_vec().unwrap().iter().map(|&v| v as f32).collect();
            b.mutable_cpu_data().unwrap().copy_from_slice(&values);
        };
        fill32(&x, 1);
        let mut y = Blob::<f32>::default();
        let dims = conv.reshape(&[&x], &[&y]).unwrap().remove(0).dims;
        y.reshape(&dims).unwrap();
        fill32(&conv.blobs()[0], 2);
        fill32(&conv.blobs()[1], 3);
        conv.forward(&[&x], &[&y]).unwrap();
        let n = shape[0];
        let (oh, ow) = (dims[2], dims[3]);
        let (xd, wd, bd, yd) = (
            x.to_vec().unwrap(),
            conv.blobs()[0].to_vec().unwrap(),
            conv.blobs()[1].to_vec().unwrap(),
            y.to_vec().unwrap(),
        );
        let window = Window {
            shape,
            cout,
            k,
            pad,
            dil,
            out: (oh, ow),
        };
        let mut want_y: Vec<f64> = (0..yd.len())
            .map(|i| f64::from(bd[i / (oh * ow) % cout]))
            .collect();
        window.for_each_tap(|o, xi, wi| want_y[o] += f64::from(xd[xi]) * f64::from(wd[wi]));
        for (i, (&got, &sum)) in yd.iter().zip(&want_y).enumerate() {
            assert!(
                (f64::from(got) - sum).abs() < 1e-5 * (1.0 + sum.abs()),
                "{shape:?} k{k} p{pad} d{dil}: y[{i}] {got} vs {sum}"
            );
        }
        assert_eq!(yd.len(), n * cout * oh * ow);
        // The weight and bias gradients (from shifted copies of the image
        // on AVX-512 machines), added onto what the diffs held, and the
        // input gradient.
        fill32(&y, 4);
        let dy = y.to_vec().unwrap();
        y.mutable_cpu_diff().unwrap().copy_from_slice(&dy);
        for p in conv.blobs() {
            p.mutable_cpu_diff().unwrap().fill(0.5);
        }
        conv.backward(&[&y], &[true], &[&x]).unwrap();
        let (dw, db) = (
            conv.blobs()[0].diff_to_vec().unwrap(),
            conv.blobs()[1].diff_to_vec().unwrap(),
        );
        let mut want_dw = vec![0.5f64; dw.len()];
        let mut want_db = vec![0.5f64; db.len()];
        for (i, &g) in dy.iter().enumerate() {
            want_db[i / (oh * ow) % cout] += f64::from(g);
        }
        window.for_each_tap(|o, xi, wi| want_dw[wi] += f64::from(dy[o]) * f64::from(xd[xi]));
        let close = |got: &[f32], want: &[f64], what: &str| {
            for (j, (&g, &w)) in got.iter().zip(want).enumerate() {
                assert!(
                    (f64::from(g) - w).abs() < 1e-4 * (1.0 + w.abs()),
                    "{shape:?} k{k} p{pad} d{dil}: {what}[{j}] {g} vs {w}"
                );
            }
        };
        close(&dw, &want_dw, "weight diff");
        close(&db, &want_db, "bias diff");
        let mut want_dx = vec![0f64; xd.len()];
        window.for_each_tap(|o, xi, wi| want_dx[xi] += f64::from(dy[o]) * f64::from(wd[wi]));
        close(&x.diff_to_vec().unwrap(), &want_dx, "input diff");
    }
}

/// f32 inner products against the definition, forward and every
/// gradient, at batches that fill the gemm kernel's panels (where the
/// weights lead the product and its result is transposed) and at one
/// that does not.
#[test]
fn f32_inner_products_match_the_definition() {
    // (batch, inputs, outputs)
    for (m, k, n) in [(32, 256, 128), (64, 300, 500), (64, 300, 20), (5, 40, 7)] {
        let text = format!(r#"type: "InnerProduct" inner_product_param {{ num_output: {n} }}"#);
        let mut ip = LayerRegistry::<f32>::with_caffe_layers()
            .build_text(&text)
            .unwrap();
        let values = |len: usize, seed: u64| -> Vec<f32> {
            let probe = Blob::<f64>::new(&[len]).unwrap();
            fill(&probe, seed);
            probe.to_vec().unwrap().iter().map(|&v| v as f32).collect()
        };
        let x = Blob::from_vec(&[m, k], values(m * k, 1)).unwrap();
        let mut y = Blob::<f32>::default();
        let dims = ip.reshape(&[&x], &[&y]).unwrap().remove(0).dims;
        y.reshape(&dims).unwrap();
        let (w, b) = (values(n * k, 2), values(n, 3));
        ip.blobs()[0]
            .mutable_cpu_data()
            .unwrap()
            .copy_from_slice(&w);
        ip.blobs()[1]
            .mutable_cpu_data()
            .unwrap()
            .copy_from_slice(&b);
        ip.forward(&[&x], &[&y]).unwrap();
        let dy = values(m * n, 4);
        y.mutable_cpu_diff().unwrap().copy_from_slice(&dy);
        for p in ip.blobs() {
            p.mutable_cpu_diff().unwrap().fill(0.0);
        }
        ip.backward(&[&y], &[true], &[&x]).unwrap();
        let xd = x.to_vec().unwrap();
        let (mut want_y, mut want_dx) = (vec![0f64; m * n], vec![0f64; m * k]);
        let (mut want_dw, mut want_db) = (vec![0f64; n * k], vec![0f64; n]);
        for i in 0..m {
            for o in 0..n {
                want_y[i * n + o] = f64::from(b[o]);
                want_db[o] += f64::from(dy[i * n + o]);
                for p in 0..k {
                    let (xv, wv, g) = (xd[i * k + p], w[o * k + p], dy[i * n + o]);
                    want_y[i * n + o] += f64::from(xv) * f64::from(wv);
                    want_dx[i * k + p] += f64::from(g) * f64::from(wv);
                    want_dw[o * k + p] += f64::from(g) * f64::from(xv);
                }
            }
        }
        let close = |got: &[f32], want: &[f64], what: &str| {
            assert_eq!(got.len(), want.len(), "{m}x{k}x{n} {what}");
            for (j, (&g, &w)) in got.iter().zip(want).enumerate() {
                assert!(
                    (f64::from(g) - w).abs() < 1e-4 * (1.0 + w.abs()),
                    "{m}x{k}x{n}: {what}[{j}] {g} vs {w}"
                );
            }
        };
        close(&y.to_vec().unwrap(), &want_y, "y");
        close(&x.diff_to_vec().unwrap(), &want_dx, "input diff");
        close(
            &ip.blobs()[0].diff_to_vec().unwrap(),
            &want_dw,
            "weight diff",
        );
        close(&ip.blobs()[1].diff_to_vec().unwrap(), &want_db, "bias diff");
    }
}
