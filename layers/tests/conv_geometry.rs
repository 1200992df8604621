//! Convolution with rectangular kernels, strides and pads and with
//! dilation, and Deconvolution, against the sums of Caffe's definitions
//! written out as loops (SPEC-NET §10.18).

use blob_layers::DynLayer;
use blob_layers::registry::LayerRegistry;
use blob_proto::{ParamMessage, TextMessage, schema};
use blob_runtime::Blob;

fn layer(text: &str) -> Box<dyn DynLayer<f64>> {
    let param =
        ParamMessage::from_text(&schema::LAYER_PARAMETER, &TextMessage::parse(text).unwrap())
            .unwrap();
    LayerRegistry::with_caffe_layers()
        .build(param.string("type"), &param)
        .unwrap()
}

/// Values that differ everywhere, from `seed`.
fn values(n: usize, seed: u64) -> Vec<f64> {
    (0..n)
        .map(|i| (((i as u64 + 1) * 2_654_435_761 + seed * 97) % 1000) as f64 / 500.0 - 1.0)
        .collect()
}

/// A forward pass's values: input, weights, bias, output and its shape.
struct Pass {
    x: Vec<f64>,
    w: Vec<f64>,
    b: Vec<f64>,
    y: Vec<f64>,
    dims: Vec<usize>,
}

/// Runs `l` forward on an input of `shape`, its weights and bias set to
/// known values.
fn run(l: &mut dyn DynLayer<f64>, shape: &[usize]) -> Pass {
    let x = Blob::<f64>::new(shape).unwrap();
    let xv = values(x.count(), 1);
    x.mutable_cpu_data().unwrap().copy_from_slice(&xv);
    let mut y = Blob::<f64>::default();
    let dims = l.reshape(&[&x], &[&y]).unwrap()[0].dims.clone();
    y.reshape(&dims).unwrap();
    let w = values(l.blobs()[0].count(), 2);
    let b = values(l.blobs()[1].count(), 3);
    l.blobs()[0].mutable_cpu_data().unwrap().copy_from_slice(&w);
    l.blobs()[1].mutable_cpu_data().unwrap().copy_from_slice(&b);
    l.forward(&[&x], &[&y]).unwrap();
    Pass {
        x: xv,
        w,
        b,
        y: y.to_vec().unwrap(),
        dims,
    }
}

/// Stride, pad and dilation per axis.
struct Window {
    s: [usize; 2],
    p: [usize; 2],
    d: [usize; 2],
}

impl Window {
    /// The input coordinate output `o` reads through kernel tap `t` on
    /// axis `a`, if inside `size`.
    fn at(&self, a: usize, o: usize, t: usize, size: usize) -> Option<usize> {
        (o * self.s[a] + t * self.d[a])
            .checked_sub(self.p[a])
            .filter(|&i| i < size)
    }
}

#[test]
fn convolution_with_rectangular_strided_dilated_windows_and_groups() {
    let win = Window {
        s: [2, 1],
        p: [1, 2],
        d: [2, 3],
    };
    let mut l = layer(
        r#"type: "Convolution" convolution_param { num_output: 4 group: 2 kernel_h: 3 kernel_w: 2
           stride_h: 2 stride_w: 1 pad_h: 1 pad_w: 2 dilation: 2 dilation: 3 }"#,
    );
    let (n, c, h, w) = (2, 6, 9, 8);
    let Pass {
        x,
        w: wt,
        b,
        y,
        dims,
    } = run(l.as_mut(), &[n, c, h, w]);
    // (9 + 2 - 5) / 2 + 1 = 4 rows, (8 + 4 - 4) / 1 + 1 = 9 columns.
    assert_eq!(dims, [n, 4, 4, 9]);
    let (m, oh, ow, cg, mg) = (4, 4, 9, c / 2, 2);
    for img in 0..n {
        for o in 0..m {
            let g = o / mg;
            for r in 0..oh {
                for q in 0..ow {
                    let mut want = b[o];
                    for ci in 0..cg {
                        for ki in 0..3 {
                            for kj in 0..2 {
                                let (Some(ih), Some(iw)) =
                                    (win.at(0, r, ki, h), win.at(1, q, kj, w))
                                else {
                                    continue;
                                };
                                let xi = ((img * c + g * cg + ci) * h + ih) * w + iw;
                                want += wt[((o * cg + ci) * 3 + ki) * 2 + kj] * x[xi];
                            }
                        }
                    }
                    let got = y[((img * m + o) * oh + r) * ow + q];
                    assert!(
                        (got - want).abs() < 1e-12,
                        "y[{img},{o},{r},{q}]: {got} vs {want}"
                    );
                }
            }
        }
    }
}

#[test]
fn deconvolution_scatters_each_input_pixel_through_the_kernel() {
    let win = Window {
        s: [2, 3],
        p: [1, 0],
        d: [1, 2],
    };
    let mut l = layer(
        r#"type: "Deconvolution" convolution_param { num_output: 4 group: 2 kernel_h: 3 kernel_w: 4
           stride_h: 2 stride_w: 3 pad_h: 1 dilation: 1 dilation: 2 }"#,
    );
    let (n, c, h, w) = (2, 2, 3, 4);
    let Pass {
        x,
        w: wt,
        b,
        y,
        dims,
    } = run(l.as_mut(), &[n, c, h, w]);
    // 2 (3 - 1) + 3 - 2 = 5 rows, 3 (4 - 1) + 7 - 0 = 16 columns.
    let (m, oh, ow) = (4, 5, 16);
    assert_eq!(dims, [n, m, oh, ow]);
    assert_eq!(
        l.blobs()[0].shape(),
        [2, 2, 3, 4],
        "weights (C, num_output / group, kh, kw)"
    );
    let (cg, mg) = (1, 2);
    let mut want = vec![0.0; n * m * oh * ow];
    for img in 0..n {
        for ci in 0..c {
            let g = ci / cg;
            for r in 0..h {
                for q in 0..w {
                    let v = x[((img * c + ci) * h + r) * w + q];
                    for mo in 0..mg {
                        for ki in 0..3 {
                            for kj in 0..4 {
                                let (Some(oy), Some(ox)) =
                                    (win.at(0, r, ki, oh), win.at(1, q, kj, ow))
                                else {
                                    continue;
                                };
                                let o = g * mg + mo;
                                want[((img * m + o) * oh + oy) * ow + ox] +=
                                    wt[((ci * mg + mo) * 3 + ki) * 4 + kj] * v;
                            }
                        }
                    }
                }
            }
        }
    }
    for (i, (got, want)) in y.iter().zip(&want).enumerate() {
        let want = want + b[(i / (oh * ow)) % m];
        assert!((got - want).abs() < 1e-12, "y[{i}]: {got} vs {want}");
    }
}

#[test]
fn bad_windows_are_refused_by_name() {
    for (param, says) in [
        (
            "num_output: 2 kernel_size: 3 kernel_h: 3 kernel_w: 3",
            "not both",
        ),
        ("num_output: 2 kernel_h: 3", "kernel (3 x 0)"),
        (
            "num_output: 2 kernel_size: 3 dilation: 0",
            "must be positive",
        ),
        (
            "num_output: 2 kernel_size: 3 stride_h: 0 stride_w: 1",
            "must be positive",
        ),
    ] {
        let text = format!(r#"type: "Convolution" convolution_param {{ {param} }}"#);
        let p = ParamMessage::from_text(
            &schema::LAYER_PARAMETER,
            &TextMessage::parse(&text).unwrap(),
        )
        .unwrap();
        let e = LayerRegistry::<f32>::with_caffe_layers()
            .build("Convolution", &p)
            .err()
            .unwrap_or_else(|| panic!("accepted {param}"))
            .to_string();
        assert!(e.contains(says), "{param}: {e}");
    }
    // A dilated kernel wider than the padded input.
    let mut l = layer(
        r#"type: "Convolution" convolution_param { num_output: 2 kernel_size: 3 dilation: 4 }"#,
    );
    let x = Blob::<f64>::new(&[1, 1, 8, 8]).unwrap();
    let e = l
        .reshape(&[&x], &[&Blob::default()])
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("at least 9"), "{e}");
}
