//! `cpu::correlate` (a shallow convolution read straight from the image)
//! against im2col and `cpu::gemm`: the same sums in the same order, so
//! the same bits on an AVX-512 machine; elsewhere it declines.

use blob_kernels::cpu::{self, CORRELATE_PAD, Isa, OutputRows, Transpose};

/// A plane of `rows x width` per channel, a `kh x kw` kernel at dilation
/// `d`, stride 1: the outputs by im2col and gemm, at the row length
/// `width` (the columns past the output's width computed too).
fn by_gemm(
    input: &[f32],
    (channels_in, rows, width): (usize, usize, usize),
    (kh, kw, d): (usize, usize, usize),
    weight: &[f32],
    channels: usize,
) -> (Vec<usize>, Vec<f32>, usize) {
    let oh = rows - (kh - 1) * d;
    let ow = width - (kw - 1) * d;
    let positions = (oh - 1) * width + ow;
    let mut offsets = Vec::new();
    for c in 0..channels_in {
        for i in 0..kh {
            for j in 0..kw {
                offsets.push(c * rows * width + i * d * width + j * d);
            }
        }
    }
    let taps = offsets.len();
    let mut col = vec![0.0; taps * positions];
    for (p, &offset) in offsets.iter().enumerate() {
        for t in 0..positions {
            col[p * positions + t] = input[t + offset];
        }
    }
    let mut out = vec![f32::NAN; channels * positions];
    cpu::gemm(
        Transpose::No,
        Transpose::No,
        channels,
        positions,
        taps,
        1.0,
        weight,
        &col,
        0.0,
        &mut out,
    );
    (offsets, out, positions)
}

#[test]
fn correlate_gives_im2col_and_gemms_bits() {
    // LeNet's conv1, MTCNN's (3 channels, 3x3), a dilated 2-channel one;
    // channel counts that leave a partial step (13, 7); rows shorter
    // than a vector, so that one vector lands in 4 and in 16 output rows.
    let cases = [
        ((1, 28, 28), (5, 5, 1), 20),
        ((3, 12, 12), (3, 3, 1), 10),
        ((2, 11, 9), (3, 3, 2), 13),
        ((1, 7, 40), (2, 4, 1), 7),
        ((1, 9, 4), (2, 2, 1), 3),
        ((2, 40, 1), (3, 1, 1), 9),
    ];
    for ((cin, rows, width), kernel, channels) in cases {
        let n = cin * rows * width;
        let mut input = vec![0.0f32; n];
        cpu::set_seed(3);
        cpu::gaussian(0.0, 1.0, &mut input).unwrap();
        let taps = cin * kernel.0 * kernel.1;
        let mut weight = vec![0.0f32; channels * taps];
        cpu::gaussian(0.0, 0.5, &mut weight).unwrap();
        let mut bias = vec![0.0f32; channels];
        cpu::gaussian(0.0, 1.0, &mut bias).unwrap();
        let (offsets, sums, positions) =
            by_gemm(&input, (cin, rows, width), kernel, &weight, channels);
        // The output rows alone, the bias added to each sum (a bias pass).
        let (oh, ow) = (
            positions.div_ceil(width),
            positions - (positions - 1) / width * width,
        );
        let mut want = Vec::new();
        for (c, &b) in bias.iter().enumerate() {
            for r in 0..oh {
                want.extend(
                    sums[c * positions + r * width..][..ow]
                        .iter()
                        .map(|&v| v + b),
                );
            }
        }
        input.resize(n + CORRELATE_PAD, 0.0);
        let at = OutputRows {
            rows: oh,
            cols: ow,
            stride: width,
        };
        let mut got = vec![f32::NAN; channels * oh * ow];
        let ran = cpu::correlate(&input, &offsets, &weight, &bias, channels, at, &mut got);
        assert_eq!(ran, cpu::isa() == Isa::Avx512, "ran on {:?}", cpu::isa());
        if !ran {
            continue;
        }
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(
            bits(&got),
            bits(&want),
            "{cin}x{rows}x{width}, kernel {kernel:?}, {channels} channels"
        );
    }
}

#[test]
#[should_panic(expected = "correlate:")]
fn an_input_without_its_padding_is_refused() {
    let input = vec![0.0f32; 16];
    let mut out = vec![0.0f32; 16];
    let at = OutputRows {
        rows: 1,
        cols: 16,
        stride: 16,
    };
    if !cpu::correlate(&input, &[0], &[1.0], &[0.0], 1, at, &mut out) {
        // No AVX-512: nothing is read; refuse as the kernel would.
        panic!("correlate: declined without AVX-512");
    }
}
