//! Pooling against Caffe's `Forward_cpu` written out as it is in
//! `pooling_layer.cpp`: square and rectangular windows, strides and pads
//! per axis, the ceil rule and its padding correction, and global
//! pooling over planes that are not square.

use blob_layers::DynLayer;
use blob_layers::registry::LayerRegistry;
use blob_proto::{ParamMessage, TextMessage, schema};
use blob_runtime::Blob;

fn layer(text: &str) -> Box<dyn DynLayer<f64>> {
    let param =
        ParamMessage::from_text(&schema::LAYER_PARAMETER, &TextMessage::parse(text).unwrap())
            .unwrap();
    LayerRegistry::with_caffe_layers()
        .build("Pooling", &param)
        .unwrap()
}

/// Caffe's settings: kernel, stride and pad per axis (height, width).
#[derive(Clone, Copy)]
struct Caffe {
    k: [usize; 2],
    s: [usize; 2],
    p: [usize; 2],
}

impl Caffe {
    /// `pooled_height_`/`pooled_width_` as `Reshape` computes them.
    fn pooled(&self, h: usize, w: usize) -> [usize; 2] {
        let mut out = [0; 2];
        for (a, n) in [h, w].into_iter().enumerate() {
            // static_cast<int>(ceil(static_cast<float>(span) / stride)) + 1
            let span = (n + 2 * self.p[a]) as f64 - self.k[a] as f64;
            let ceil = (span / self.s[a] as f64).ceil() as usize + 1;
            out[a] = ceil;
            if (self.p[a] > 0 || self.p[1 - a] > 0) && (ceil - 1) * self.s[a] >= n + self.p[a] {
                out[a] -= 1;
            }
        }
        out
    }

    /// `Forward_cpu`'s MAX or AVE loops for one plane.
    fn forward(&self, max: bool, x: &[f64], h: usize, w: usize) -> Vec<f64> {
        let [oh, ow] = self.pooled(h, w);
        let mut y = Vec::new();
        for ph in 0..oh {
            for pw in 0..ow {
                let hstart = (ph * self.s[0]) as isize - self.p[0] as isize;
                let wstart = (pw * self.s[1]) as isize - self.p[1] as isize;
                let hend = (hstart + self.k[0] as isize).min((h + self.p[0]) as isize);
                let wend = (wstart + self.k[1] as isize).min((w + self.p[1]) as isize);
                let pool_size = ((hend - hstart) * (wend - wstart)) as f64;
                let (hs, ws) = (hstart.max(0) as usize, wstart.max(0) as usize);
                let (he, we) = (hend.min(h as isize) as usize, wend.min(w as isize) as usize);
                let values = (hs..he).flat_map(|r| (ws..we).map(move |q| x[r * w + q]));
                y.push(if max {
                    values.fold(f64::MIN, f64::max)
                } else {
                    values.sum::<f64>() / pool_size
                });
            }
        }
        y
    }
}

#[test]
fn windows_of_every_shape_pool_as_caffes_loops() {
    let cases = [
        (
            "kernel_size: 3 stride: 2",
            Caffe {
                k: [3, 3],
                s: [2, 2],
                p: [0, 0],
            },
        ),
        (
            "kernel_size: 3 stride: 2 pad: 1",
            Caffe {
                k: [3, 3],
                s: [2, 2],
                p: [1, 1],
            },
        ),
        (
            "kernel_h: 3 kernel_w: 2 stride_h: 2 stride_w: 1",
            Caffe {
                k: [3, 2],
                s: [2, 1],
                p: [0, 0],
            },
        ),
        (
            "kernel_h: 2 kernel_w: 4 stride_h: 1 stride_w: 3 pad_h: 1 pad_w: 0",
            Caffe {
                k: [2, 4],
                s: [1, 3],
                p: [1, 0],
            },
        ),
        (
            "kernel_h: 1 kernel_w: 3 stride: 2 pad_h: 0 pad_w: 2",
            Caffe {
                k: [1, 3],
                s: [2, 2],
                p: [0, 2],
            },
        ),
    ];
    for (h, w) in [(7, 9), (6, 5), (4, 11)] {
        for (param, caffe) in cases {
            for pool in ["MAX", "AVE"] {
                let mut l = layer(&format!(
                    r#"type: "Pooling" pooling_param {{ pool: {pool} {param} }}"#
                ));
                let x = Blob::<f64>::new(&[2, 3, h, w]).unwrap();
                let xv: Vec<f64> = (0..x.count())
                    .map(|i| ((i * 7919) % 113) as f64 / 10.0 - 5.0)
                    .collect();
                x.mutable_cpu_data().unwrap().copy_from_slice(&xv);
                let mut y = Blob::default();
                let dims = l.reshape(&[&x], &[&y]).unwrap()[0].dims.clone();
                let [oh, ow] = caffe.pooled(h, w);
                assert_eq!(dims, [2, 3, oh, ow], "{param} over {h} x {w}");
                y.reshape(&dims).unwrap();
                l.forward(&[&x], &[&y]).unwrap();
                let got = y.to_vec().unwrap();
                for plane in 0..6 {
                    let want = caffe.forward(pool == "MAX", &xv[plane * h * w..][..h * w], h, w);
                    let got = &got[plane * oh * ow..][..oh * ow];
                    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                        assert!(
                            (g - w).abs() < 1e-12,
                            "{pool} {param}: y[{plane}][{i}] {g} vs {w}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn global_pooling_takes_the_whole_plane_whatever_its_shape() {
    let mut l = layer(r#"type: "Pooling" pooling_param { pool: AVE global_pooling: true }"#);
    let x = Blob::<f64>::from_vec(&[1, 2, 2, 3], (0..12).map(f64::from).collect()).unwrap();
    let mut y = Blob::default();
    let dims = l.reshape(&[&x], &[&y]).unwrap()[0].dims.clone();
    assert_eq!(dims, [1, 2, 1, 1]);
    y.reshape(&dims).unwrap();
    l.forward(&[&x], &[&y]).unwrap();
    assert_eq!(y.to_vec().unwrap(), [2.5, 8.5]);
}

/// A window larger than its input (OpenPose's 2 x 2 pools of 1 x 1
/// maps): Caffe's arithmetic gives one output per axis whose span is
/// above -stride, its window clipped to the input, AVE dividing by the
/// clipped size; beyond that there is no output and it is refused.
#[test]
fn a_window_larger_than_its_input_gives_caffes_one_output() {
    for (param, caffe, [h, w]) in [
        (
            "kernel_size: 2 stride: 2",
            Caffe {
                k: [2, 2],
                s: [2, 2],
                p: [0, 0],
            },
            [1, 1],
        ),
        (
            "kernel_size: 3 stride: 2",
            Caffe {
                k: [3, 3],
                s: [2, 2],
                p: [0, 0],
            },
            [2, 3],
        ),
        (
            "kernel_h: 5 kernel_w: 2 stride_h: 4 stride_w: 1",
            Caffe {
                k: [5, 2],
                s: [4, 1],
                p: [0, 0],
            },
            [2, 3],
        ),
    ] {
        let x: Vec<f64> = (0..h * w).map(|i| (i as f64 * 0.7).sin()).collect();
        for pool in ["MAX", "AVE"] {
            let mut l = layer(&format!(
                r#"type: "Pooling" pooling_param {{ pool: {pool} {param} }}"#
            ));
            let input = Blob::from_vec(&[1, 1, h, w], x.clone()).unwrap();
            let mut top = Blob::<f64>::default();
            let shape = l.reshape(&[&input], &[&top]).unwrap().remove(0);
            assert_eq!(shape.dims[2..], caffe.pooled(h, w), "{pool} {param}");
            top.reshape(&shape.dims).unwrap();
            l.forward(&[&input], &[&top]).unwrap();
            let want = caffe.forward(pool == "MAX", &x, h, w);
            let got = top.to_vec().unwrap();
            for (g, w) in got.iter().zip(&want) {
                assert!((g - w).abs() < 1e-12, "{pool} {param}: {got:?} vs {want:?}");
            }
        }
    }
    let mut l = layer(r#"type: "Pooling" pooling_param { pool: MAX kernel_size: 4 stride: 1 }"#);
    let input = Blob::<f64>::new(&[1, 1, 1, 1]).unwrap();
    let err = l
        .reshape(&[&input], &[&Blob::default()])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("too small for the 4 x 4 window at stride 1 x 1"),
        "{err}"
    );
}

#[test]
fn half_a_pair_and_a_pad_as_wide_as_the_window_are_refused() {
    for (param, says) in [
        ("kernel_h: 3", "both kernel_h and kernel_w are required"),
        (
            "kernel_size: 3 kernel_w: 2",
            "kernel_size OR kernel_h and kernel_w",
        ),
        (
            "kernel_h: 3 kernel_w: 2 pad_w: 2 pad_h: 0",
            "pad 0 x 2 must be smaller than the kernel 3 x 2",
        ),
    ] {
        let param = ParamMessage::from_text(
            &schema::LAYER_PARAMETER,
            &TextMessage::parse(&format!(r#"type: "Pooling" pooling_param {{ {param} }}"#))
                .unwrap(),
        )
        .unwrap();
        let e = LayerRegistry::<f64>::with_caffe_layers()
            .build("Pooling", &param)
            .err()
            .expect("refused")
            .to_string();
        assert!(e.contains(says), "{e}");
    }
}
