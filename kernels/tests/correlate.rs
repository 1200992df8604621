//! `cpu::correlate` (a shallow convolution read from shifted copies of
//! the image) against im2col and `cpu::gemm`: the same sums in the same
//! order, so the same bits on an AVX-512 machine; and
//! `cpu::correlate_gradient` against the weight gradient summed in f64.
//! Elsewhere both decline.

use blob_kernels::cpu::{self, Isa, Rectifier, Taps, Transpose};

/// A convolution at stride 1: `channels_in` planes of `rows x width`
/// (padding included, as zeros), a `kh x kw` kernel at dilation `d`.
#[derive(Clone, Copy, Debug)]
struct Window {
    channels_in: usize,
    rows: usize,
    width: usize,
    kh: usize,
    kw: usize,
    d: usize,
}

impl Window {
    fn out(&self) -> (usize, usize) {
        (
            self.rows - (self.kh - 1) * self.d,
            self.width - (self.kw - 1) * self.d,
        )
    }

    /// Output `(r, q)`'s input value at tap `(c, i, j)`.
    fn tap(&self, image: &[f32], (c, i, j): (usize, usize, usize), (r, q): (usize, usize)) -> f32 {
        image[(c * self.rows + r + i * self.d) * self.width + q + j * self.d]
    }

    fn taps(&self) -> impl Iterator<Item = (usize, usize, usize)> + '_ {
        (0..self.channels_in)
            .flat_map(move |c| (0..self.kh).flat_map(move |i| (0..self.kw).map(move |j| (c, i, j))))
    }

    /// The image as its shifted copies (copy `(c, j)`: `rows` rows of
    /// `ow` values from column `j * d`) and each tap's offset in them.
    fn shifted(&self, image: &[f32]) -> (Vec<f32>, Vec<usize>) {
        let (_, ow) = self.out();
        let mut copies = Vec::new();
        for c in 0..self.channels_in {
            for j in 0..self.kw {
                for r in 0..self.rows {
                    let row = &image[(c * self.rows + r) * self.width..][..self.width];
                    copies.extend_from_slice(&row[j * self.d..][..ow]);
                }
            }
        }
        let offsets = self
            .taps()
            .map(|(c, i, j)| ((c * self.kw + j) * self.rows + i * self.d) * ow)
            .collect();
        (copies, offsets)
    }
}

fn gaussian(n: usize, sd: f32) -> Vec<f32> {
    let mut v = vec![0.0f32; n];
    cpu::gaussian(0.0, sd, &mut v).unwrap();
    v
}

// LeNet's conv1, MTCNN's (3 channels, 3x3), a dilated 2-channel one;
// channel counts that leave a partial step (13, 7, 3); planes shorter
// than a vector and not a multiple of one; a plane of 2,450 outputs,
// past two of the chunks every block of 32 channels takes in turn.
const CASES: [(Window, usize); 7] = [
    (
        Window {
            channels_in: 3,
            rows: 37,
            width: 72,
            kh: 3,
            kw: 3,
            d: 1,
        },
        32,
    ),
    (
        Window {
            channels_in: 1,
            rows: 28,
            width: 28,
            kh: 5,
            kw: 5,
            d: 1,
        },
        20,
    ),
    (
        Window {
            channels_in: 3,
            rows: 12,
            width: 12,
            kh: 3,
            kw: 3,
            d: 1,
        },
        10,
    ),
    (
        Window {
            channels_in: 2,
            rows: 11,
            width: 9,
            kh: 3,
            kw: 3,
            d: 2,
        },
        13,
    ),
    (
        Window {
            channels_in: 1,
            rows: 7,
            width: 40,
            kh: 2,
            kw: 4,
            d: 1,
        },
        7,
    ),
    (
        Window {
            channels_in: 1,
            rows: 9,
            width: 4,
            kh: 2,
            kw: 2,
            d: 1,
        },
        3,
    ),
    (
        Window {
            channels_in: 2,
            rows: 40,
            width: 1,
            kh: 3,
            kw: 1,
            d: 1,
        },
        9,
    ),
];

#[test]
fn correlate_gives_im2col_and_gemms_bits() {
    cpu::set_seed(3);
    for (win, channels) in CASES {
        let image = gaussian(win.channels_in * win.rows * win.width, 1.0);
        let taps: Vec<_> = win.taps().collect();
        let weight = gaussian(channels * taps.len(), 0.5);
        let bias = gaussian(channels, 1.0);
        let (oh, ow) = win.out();
        let len = oh * ow;
        let mut col = vec![0.0; taps.len() * len];
        for (p, &tap) in taps.iter().enumerate() {
            for t in 0..len {
                col[p * len + t] = win.tap(&image, tap, (t / ow, t % ow));
            }
        }
        let mut want = vec![f32::NAN; channels * len];
        let k = taps.len();
        cpu::gemm(
            Transpose::No,
            Transpose::No,
            channels,
            len,
            k,
            1.0,
            &weight,
            &col,
            0.0,
            &mut want,
        );
        // The bias added to each sum, as a bias pass does.
        for (plane, &b) in want.chunks_exact_mut(len).zip(&bias) {
            plane.iter_mut().for_each(|v| *v += b);
        }
        let (copies, offsets) = win.shifted(&image);
        let at = Taps {
            offsets: &offsets,
            len,
        };
        assert_eq!(at.reach(), copies.len(), "{win:?}");
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        // Each rectifier folded into the stores gives the bits of the
        // layer's own pass after them.
        for rectifier in [Rectifier::None, Rectifier::Relu, Rectifier::Relu6] {
            let mut got = vec![f32::NAN; channels * len];
            let ran = cpu::correlate(
                &copies,
                at,
                &weight,
                &bias,
                rectifier,
                &mut got.chunks_exact_mut(len).collect::<Vec<_>>(),
            );
            assert_eq!(ran, cpu::isa() >= Isa::Avx2, "ran on {:?}", cpu::isa());
            if !ran {
                break;
            }
            let want: Vec<f32> = want.iter().map(|&v| rectifier.apply(v)).collect();
            assert_eq!(
                bits(&got),
                bits(&want),
                "{win:?}, {channels} channels, {rectifier:?}"
            );
        }
        // Runs of outputs further apart than their length (a band of
        // each plane's rows): each channel's outputs land in its run, and
        // the values after them are left as they were.
        let plane = len + 37;
        let mut spaced = vec![-3.5f32; channels * plane];
        let mut runs: Vec<&mut [f32]> = spaced.chunks_exact_mut(plane).collect();
        if cpu::correlate(&copies, at, &weight, &bias, Rectifier::None, &mut runs) {
            for (c, (want, got)) in want
                .chunks_exact(len)
                .zip(spaced.chunks_exact(plane))
                .enumerate()
            {
                assert_eq!(
                    bits(&got[..len]),
                    bits(want),
                    "{win:?}, channel {c} of {channels}"
                );
                assert!(
                    got[len..].iter().all(|&v| v == -3.5),
                    "{win:?}: channel {c} wrote past its outputs"
                );
            }
        }
    }
}

#[test]
fn correlate_gradient_sums_every_image() {
    cpu::set_seed(4);
    for (win, channels) in CASES {
        let images = 3;
        let plane = win.channels_in * win.rows * win.width;
        let x = gaussian(images * plane, 1.0);
        let (oh, ow) = win.out();
        let len = oh * ow;
        let dy = gaussian(images * channels * len, 1.0);
        let taps: Vec<_> = win.taps().collect();
        let start = gaussian(channels * taps.len(), 1.0);
        let mut want: Vec<f64> = start.iter().map(|&v| v as f64).collect();
        for i in 0..images {
            let image = &x[i * plane..][..plane];
            for c in 0..channels {
                for (p, &tap) in taps.iter().enumerate() {
                    for t in 0..len {
                        let g = dy[(i * channels + c) * len + t] as f64;
                        want[c * taps.len() + p] +=
                            g * win.tap(image, tap, (t / ow, t % ow)) as f64;
                    }
                }
            }
        }
        // Each image's copies, 5 values of slack between them.
        let mut copies = Vec::new();
        let mut offsets = Vec::new();
        for i in 0..images {
            let (c, o) = win.shifted(&x[i * plane..][..plane]);
            copies.extend(c);
            copies.extend([f32::NAN; 5]);
            offsets = o;
        }
        let stride = copies.len() / images;
        copies.truncate(copies.len() - 5);
        let at = Taps {
            offsets: &offsets,
            len,
        };
        let mut got = start.clone();
        let ran = cpu::correlate_gradient(&copies, stride, at, &dy, channels, &mut got);
        assert_eq!(ran, cpu::isa() >= Isa::Avx2, "ran on {:?}", cpu::isa());
        if !ran {
            continue;
        }
        for (k, (&g, &w)) in got.iter().zip(&want).enumerate() {
            let scale = (images * len) as f64;
            assert!(
                (g as f64 - w).abs() <= 1e-6 * scale.sqrt() * (1.0 + w.abs()),
                "{win:?}, {channels} channels: gradient {k} is {g}, want {w}"
            );
        }
    }
}

#[test]
#[should_panic(expected = "correlate:")]
fn an_input_short_of_its_reach_is_refused() {
    let input = vec![0.0f32; 16];
    let mut out = vec![0.0f32; 16];
    let at = Taps {
        offsets: &[0, 1],
        len: 16,
    };
    if !cpu::correlate(
        &input,
        at,
        &[1.0, 1.0],
        &[0.0],
        Rectifier::None,
        &mut [&mut out],
    ) {
        // No AVX-512: nothing is read; refuse as the kernel would.
        panic!("correlate: declined without AVX-512");
    }
}

#[test]
#[should_panic(expected = "correlate_gradient:")]
fn gradients_of_part_of_an_image_are_refused() {
    let input = vec![0.0f32; 64];
    let mut dw = vec![0.0f32; 2];
    let at = Taps {
        offsets: &[0],
        len: 16,
    };
    if !cpu::correlate_gradient(&input, 32, at, &[0.0; 24], 2, &mut dw) {
        panic!("correlate_gradient: declined without AVX-512");
    }
}
