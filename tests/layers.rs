//! Every built-in layer against finite differences (in f64, so the check
//! is tight), and against direct definitions of what it computes: Caffe's
//! output-size rules, padding, AVE windows, dropout's mask.

use blobflow::layers::{
    Convolution, Dropout, InnerProduct, Layer, PoolMethod, Pooling, ReLU, Sigmoid, Softmax, TanH,
};
use blobflow::typed::{Shape, TypedBlob};
use blobflow::{Blob, blob};

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

/// The loss `sum(y * r)`: its gradient at `y` is `r`.
fn loss<L: Layer<Elem = f64>>(layer: &mut L, x: &Blob<f64>, y: &Blob<f64>, r: &[f64]) -> f64 {
    layer.forward_blobs(x, y).unwrap();
    y.cpu_data()
        .unwrap()
        .iter()
        .zip(r)
        .map(|(a, b)| a * b)
        .sum()
}

/// Holds the layer's input and parameter gradients to central differences.
fn check_gradients<L: Layer<Elem = f64>>(layer: &mut L, x: &Blob<f64>, y: &Blob<f64>) {
    let r: Vec<f64> = {
        let probe = Blob::<f64>::new(y.shape()).unwrap();
        fill(&probe, 99);
        probe.to_vec().unwrap()
    };
    layer.forward_blobs(x, y).unwrap();
    y.mutable_cpu_diff().unwrap().copy_from_slice(&r);
    for p in layer.params() {
        p.mutable_cpu_diff().unwrap().fill(0.0);
    }
    layer.backward_blobs(x, y, true).unwrap();
    // Which blob: None the input, Some(k) the layer's k-th parameter.
    let mut analytic: Vec<(Option<usize>, Vec<f64>)> = vec![(None, x.diff_to_vec().unwrap())];
    for (k, p) in layer.params().iter().enumerate() {
        analytic.push((Some(k), p.diff_to_vec().unwrap()));
    }
    let eps = 1e-6;
    for (which, grad) in analytic {
        let nudge = |layer: &L, i: usize, delta: f64| {
            let params = layer.params();
            let blob = which.map_or(x, |k| params[k]);
            blob.mutable_cpu_data().unwrap()[i] += delta;
        };
        for i in (0..grad.len()).step_by(grad.len().div_ceil(40).max(1)) {
            nudge(layer, i, eps);
            let up = loss(layer, x, y, &r);
            nudge(layer, i, -2.0 * eps);
            let down = loss(layer, x, y, &r);
            nudge(layer, i, eps);
            let numeric = (up - down) / (2.0 * eps);
            assert!(
                (numeric - grad[i]).abs() <= 1e-6 * (1.0 + numeric.abs()),
                "{} {which:?}[{i}]: analytic {}, numeric {numeric}",
                L::TYPE,
                grad[i]
            );
        }
    }
}

fn blobs<X: Shape, Y: Shape>(
    x_shape: &[usize],
    y_shape: &[usize],
) -> (TypedBlob<f64, X>, TypedBlob<f64, Y>) {
    let x = TypedBlob::from_shape(x_shape).unwrap();
    fill(&x, 1);
    (x, TypedBlob::from_shape(y_shape).unwrap())
}

blob!(shape Image = _, 2, 7, 7);
blob!(shape Strided = _, 3, 4, 4);

#[test]
fn convolution_with_stride_and_padding() {
    // (7 + 2*1 - 3) / 2 + 1 = 4.
    let mut conv = Convolution::<f64, Image, 3, 3, 2, 1>::new().unwrap();
    fill(&conv.weight, 2);
    fill(&conv.bias, 3);
    let (x, y) = blobs::<Image, Strided>(&[2, 2, 7, 7], &[2, 3, 4, 4]);
    conv.forward(&x, &y).unwrap();
    // The run-time entry refuses an input that is not (N, 2, H, W), with
    // H and W at least the kernel less the padding.
    let flat = Blob::<f64>::new(&[2, 98]).unwrap();
    let err = conv.forward_blobs(&flat, &y).unwrap_err().to_string();
    assert!(err.contains("(N, 2, >= 1, >= 1)"), "{err}");
    // Against the definition, padding reading zero.
    let (xd, w, b, yd) = (
        x.to_vec().unwrap(),
        conv.weight.to_vec().unwrap(),
        conv.bias.to_vec().unwrap(),
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
    check_gradients(&mut conv, &x, &y);
}

#[test]
fn an_empty_batch_adds_no_gradient() {
    // A batch of 0 is a valid batch: nothing to compute, and the
    // parameters' gradients stay as they were, including after a batch
    // that filled the layer's per-core buffers.
    let mut conv = Convolution::<f64, Image, 3, 3, 2, 1>::new().unwrap();
    fill(&conv.weight, 2);
    for (batch, propagate_down) in [(0, true), (2, true), (0, true), (0, false)] {
        let (x, y) = blobs::<Image, Strided>(&[batch, 2, 7, 7], &[batch, 3, 4, 4]);
        conv.forward(&x, &y).unwrap();
        y.mutable_cpu_diff().unwrap().fill(1.0);
        conv.weight.mutable_cpu_diff().unwrap().fill(0.5);
        conv.bias.mutable_cpu_diff().unwrap().fill(0.5);
        conv.backward(&x, &y, propagate_down).unwrap();
        if batch == 0 {
            assert!(conv.weight.diff_to_vec().unwrap().iter().all(|&d| d == 0.5));
            assert!(conv.bias.diff_to_vec().unwrap().iter().all(|&d| d == 0.5));
        }
    }
}

blob!(shape Pooled = _, 2, 3, 3);

#[test]
fn pooling_uses_caffes_ceil_rule_and_clipped_windows() {
    // ceil((7 - 3) / 2) + 1 = 3; with kernel 3 stride 3, ceil(4 / 3) + 1 = 3
    // and the last window is clipped to one column.
    let mut max = Pooling::<f64, Image, 3, 2>::new(PoolMethod::Max);
    let (x, y) = blobs::<Image, Pooled>(&[2, 2, 7, 7], &[2, 2, 3, 3]);
    max.forward(&x, &y).unwrap();
    check_gradients(&mut max, &x, &y);
    let mut ave = Pooling::<f64, Image, 3, 3>::new(PoolMethod::Ave);
    ave.forward(&x, &y).unwrap();
    let xd = x.to_vec().unwrap();
    // Output (0, 0, 2, 2) averages the clipped window rows 6..7, cols 6..7.
    assert_eq!(y.data_at([0, 0, 2, 2]), xd[6 * 7 + 6]);
    let window: f64 = (0..3)
        .flat_map(|r| (6..7).map(move |c| (r, c)))
        .map(|(r, c)| xd[r * 7 + c])
        .sum();
    assert!((y.data_at([0, 0, 0, 2]) - window / 3.0).abs() < 1e-12);
    check_gradients(&mut ave, &x, &y);
}

#[test]
fn pooling_windows_past_the_input_hold_nothing() {
    // A 1x1 window with stride 4 over 7: ceil(6 / 4) + 1 = 3 windows, at 0,
    // 4 and 8, the last past the input (Caffe writes -FLT_MAX there, and
    // its backward pass writes outside its blob). Here such a window gives
    // 0 and passes no gradient.
    for method in [PoolMethod::Max, PoolMethod::Ave] {
        let mut pool = Pooling::<f64, Image, 1, 4>::new(method);
        let (x, y) = blobs::<Image, Pooled>(&[2, 2, 7, 7], &[2, 2, 3, 3]);
        pool.forward(&x, &y).unwrap();
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
                        "{method:?} {plane} {r} {q}"
                    );
                }
            }
        }
        check_gradients(&mut pool, &x, &y);
    }
}

blob!(shape Flat = _, 98);
blob!(shape Hidden = _, 5);

#[test]
fn inner_product_flattens_its_input() {
    let mut ip = InnerProduct::<f64, Image, 5>::new().unwrap();
    assert_eq!(ip.weight.shape(), &[5, 98]);
    fill(&ip.weight, 4);
    fill(&ip.bias, 5);
    let (x, y) = blobs::<Image, Hidden>(&[2, 2, 7, 7], &[2, 5]);
    check_gradients(&mut ip, &x, &y);
    // The same layer on the flattened input gives the same output.
    let mut flat = InnerProduct::<f64, Flat, 5>::new().unwrap();
    flat.weight
        .mutable_cpu_data()
        .unwrap()
        .copy_from_slice(&ip.weight.cpu_data().unwrap());
    flat.bias
        .mutable_cpu_data()
        .unwrap()
        .copy_from_slice(&ip.bias.cpu_data().unwrap());
    let fx: TypedBlob<f64, Flat> = Blob::from_vec(&[2, 98], x.to_vec().unwrap())
        .unwrap()
        .try_into_static()
        .unwrap();
    let fy = TypedBlob::<f64, Hidden>::with_dynamic(2).unwrap();
    ip.forward(&x, &y).unwrap();
    flat.forward(&fx, &fy).unwrap();
    assert_eq!(fy.to_vec().unwrap(), y.to_vec().unwrap());
}

#[test]
fn activations_and_softmax() {
    let (x, y) = blobs::<Hidden, Hidden>(&[3, 5], &[3, 5]);
    check_gradients(&mut ReLU::<f64, Hidden>::new(), &x, &y);
    check_gradients(&mut Sigmoid::<f64, Hidden>::new(), &x, &y);
    check_gradients(&mut TanH::<f64, Hidden>::new(), &x, &y);
    let mut softmax = Softmax::<f64, Hidden>::new();
    check_gradients(&mut softmax, &x, &y);
    softmax.forward(&x, &y).unwrap();
    for row in y.to_vec().unwrap().chunks(5) {
        assert!((row.iter().sum::<f64>() - 1.0).abs() < 1e-12);
    }
    // TanH against the definition.
    TanH::<f64, Hidden>::new().forward(&x, &y).unwrap();
    assert_eq!(y.data_at([1, 2]), x.data_at([1, 2]).tanh());
}

#[test]
fn in_place_activation_backward_matches_the_out_of_place_one() {
    let (x, y) = blobs::<Hidden, Hidden>(&[3, 5], &[3, 5]);
    let mut sigmoid = Sigmoid::<f64, Hidden>::new();
    sigmoid.forward(&x, &y).unwrap();
    fill(y.as_dyn(), 0);
    y.mutable_cpu_diff().unwrap().fill(0.5);
    sigmoid.forward(&x, &y).unwrap();
    sigmoid.backward(&x, &y, true).unwrap();
    let out_of_place = x.diff_to_vec().unwrap();
    let z = TypedBlob::<f64, Hidden>::with_dynamic(3).unwrap();
    z.mutable_cpu_data()
        .unwrap()
        .copy_from_slice(&x.cpu_data().unwrap());
    sigmoid.forward(&z, &z).unwrap();
    z.mutable_cpu_diff().unwrap().fill(0.5);
    sigmoid.backward(&z, &z, true).unwrap();
    let in_place = z.diff_to_vec().unwrap();
    for (a, b) in in_place.iter().zip(&out_of_place) {
        assert!((a - b).abs() < 1e-15);
    }
}

#[test]
fn dropout_keeps_what_its_mask_keeps_forward_and_backward() {
    let (x, y) = blobs::<Hidden, Hidden>(&[40, 5], &[40, 5]);
    let mut drop = Dropout::<f64, Hidden>::new(0.25).unwrap();
    blobflow::kernels::cpu::set_seed(3);
    drop.forward(&x, &y).unwrap();
    y.mutable_cpu_diff().unwrap().fill(1.0);
    drop.backward(&x, &y, true).unwrap();
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
    drop.train = false;
    drop.forward(&x, &y).unwrap();
    assert_eq!(y.to_vec().unwrap(), xd);
}
