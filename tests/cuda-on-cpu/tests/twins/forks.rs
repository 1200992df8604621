//! The forks' kernels (`shuffle_channel.cu`, `upsample.cu`, `axpy.cu`,
//! `bn.cu`, `interp.cu`, `reorg.cu`) against the CPU sides of their layers.

use blob_layers::DynLayer;
use blob_layers::registry::LayerRegistry;
use blob_runtime::Blob;
use cuda_on_cpu as k;

use crate::{assert_close, random};

fn layer(text: &str) -> Box<dyn DynLayer<f32>> {
    LayerRegistry::with_caffe_layers()
        .build_text(text)
        .unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn blob(shape: &[usize], values: &[f32]) -> Blob<f32> {
    Blob::from_vec(shape, values.to_vec()).unwrap()
}

/// The layer's output and its bottoms' gradients from `dy`, on the CPU.
fn cpu(
    l: &mut dyn DynLayer<f32>,
    bottoms: &[&Blob<f32>],
    dy: Option<&[f32]>,
) -> (Vec<f32>, Vec<Vec<f32>>) {
    let mut top = Blob::default();
    let shapes = l.reshape(bottoms, &[&top]).unwrap();
    top.reshape(&shapes[0].dims).unwrap();
    l.forward(bottoms, &[&top]).unwrap();
    let y = top.to_vec().unwrap();
    let Some(dy) = dy else {
        return (y, Vec::new());
    };
    top.mutable_cpu_diff().unwrap().copy_from_slice(dy);
    let down = vec![true; bottoms.len()];
    l.backward(&[&top], &down, bottoms).unwrap();
    (
        y,
        bottoms.iter().map(|b| b.diff_to_vec().unwrap()).collect(),
    )
}

#[test]
fn shuffle_channel_moves_planes_as_the_cpu() {
    let x = random(2 * 6 * 5, 1, -1.0, 1.0);
    let dy = random(60, 2, -1.0, 1.0);
    let (want_y, want_dx) = cpu(
        layer("type: 'ShuffleChannel' shuffle_channel_param { group: 3 }").as_mut(),
        &[&blob(&[2, 6, 1, 5], &x)],
        Some(&dy),
    );
    let (mut y, mut dx) = (vec![f32::NAN; 60], vec![f32::NAN; 60]);
    // SAFETY: x, y, dy and dx hold 2 items of 6 planes of 5.
    unsafe {
        k::shuffle_channel_f32(60, 60, 6, 3, 5, &x, &mut y);
        k::unshuffle_channel_f32(60, 60, 6, 3, 5, &dy, &mut dx);
    }
    assert_close("shuffled", &y, &want_y, 0.0);
    assert_close("gradient", &dx, &want_dx[0], 0.0);
}

#[test]
fn upsample_repeats_and_unpools_as_the_cpu() {
    // YOLO's nearest, 2 x 3.
    let x = random(2 * 3 * 4, 3, -1.0, 1.0);
    let dy = random(2 * 6 * 12, 4, -1.0, 1.0);
    let (want_y, want_dx) = cpu(
        layer("type: 'Upsample' upsample_param { scale_h: 2 scale_w: 3 }").as_mut(),
        &[&blob(&[1, 2, 3, 4], &x)],
        Some(&dy),
    );
    let (mut y, mut dx) = (vec![f32::NAN; 144], vec![f32::NAN; 24]);
    // SAFETY: 2 planes of 3 x 4 in, of 6 x 12 out.
    unsafe {
        k::upsample_nearest_f32(144, 144, 3, 4, 2, 3, &x, &mut y);
        k::upsample_nearest_backward_f32(24, 24, 3, 4, 2, 3, &dy, &mut dx);
    }
    assert_close("repeated", &y, &want_y, 0.0);
    assert_close("summed", &dx, &want_dx[0], 0.0);

    // SegNet's unpooling: a 2 x 2 MAX pooling's values and mask.
    let values = random(2 * 4, 5, -1.0, 1.0);
    let mask: Vec<f32> = vec![1., 6., 9., 15., 0., 3., 12., 14.];
    let dy = random(2 * 16, 6, -1.0, 1.0);
    let (v, m) = (blob(&[1, 2, 2, 2], &values), blob(&[1, 2, 2, 2], &mask));
    let (want_y, want_dx) = cpu(
        layer("type: 'Upsample' bottom: 'x' bottom: 'mask' upsample_param { scale: 2 }").as_mut(),
        &[&v, &m],
        Some(&dy),
    );
    let (mut y, mut dx) = (vec![f32::NAN; 32], vec![f32::NAN; 8]);
    // SAFETY: 2 planes of 4 in, of 16 out; every position below 16.
    unsafe {
        k::upsample_zero_f32(32, 32, &mut y);
        k::unpool_f32(8, 8, 4, 16, &values, &mask, &mut y);
        k::unpool_backward_f32(8, 8, 4, 16, &dy, &mask, &mut dx);
    }
    assert_close("unpooled", &y, &want_y, 0.0);
    assert_close("unpooled gradient", &dx, &want_dx[0], 0.0);
}

#[test]
fn axpy_matches_the_cpu() {
    let (a, x, y) = (
        random(6, 7, 0.0, 1.0),
        random(24, 8, -1.0, 1.0),
        random(24, 9, -1.0, 1.0),
    );
    let dy = random(24, 10, -1.0, 1.0);
    let (want, grads) = cpu(
        layer("type: 'Axpy'").as_mut(),
        &[
            &blob(&[2, 3, 1, 1], &a),
            &blob(&[2, 3, 2, 2], &x),
            &blob(&[2, 3, 2, 2], &y),
        ],
        Some(&dy),
    );
    let (mut out, mut dx, mut da) = (vec![f32::NAN; 24], vec![f32::NAN; 24], vec![f32::NAN; 6]);
    // SAFETY: 6 planes of 4 values, one gate each.
    unsafe {
        k::axpy_f32(24, 24, 4, &a, &x, &y, &mut out);
        k::axpy_backward_x_f32(24, 24, 4, &a, &dy, &mut dx);
        k::axpy_backward_a_f32(6, 6, 4, &x, &dy, &mut da);
    }
    assert_close("a x + y", &out, &want, 0.0);
    assert_close("gate gradient", &da, &grads[0], 0.0);
    assert_close("x gradient", &dx, &grads[1], 0.0);
    assert_close("y gradient", &dy, &grads[2], 0.0);
}

#[test]
fn bn_with_fixed_statistics_matches_the_cpu() {
    let x = random(2 * 3 * 5, 11, -2.0, 2.0);
    let (slope, bias) = (random(3, 12, 0.5, 1.5), random(3, 13, -0.5, 0.5));
    let (mean, var) = (random(3, 14, -0.5, 0.5), random(3, 15, 0.5, 1.5));
    for (text, stats) in [
        ("type: 'BN' phase: TEST bn_param { eps: 0.001 }", true),
        ("type: 'BN' bn_param { bn_mode: INFERENCE }", false),
    ] {
        let mut l = layer(text);
        let xb = blob(&[2, 3, 1, 5], &x);
        let shapes = l.reshape(&[&xb], &[&Blob::default()]).unwrap();
        assert_eq!(shapes[0].dims, [2, 3, 1, 5]);
        let values = [&slope, &bias, &mean, &var];
        for (b, v) in l.blobs_mut().iter_mut().zip(values) {
            b.mutable_cpu_data().unwrap().copy_from_slice(v);
        }
        let (want, _) = cpu(l.as_mut(), &[&xb], None);
        let mut y = vec![f32::NAN; 30];
        let (m, v) = if stats {
            (&mean, &var)
        } else {
            (&slope, &bias)
        };
        // SAFETY: 2 items of 3 channels of 5, one value a channel each.
        unsafe {
            k::bn_forward_f32(
                30,
                30,
                3,
                5,
                &x,
                &slope,
                &bias,
                m,
                v,
                0.001,
                i32::from(stats),
                &mut y,
            )
        };
        assert_close(text, &y, &want, 0.0);
    }
}

#[test]
fn interp_matches_the_cpu() {
    let x = random(2 * 5 * 6, 16, -1.0, 1.0);
    for (text, crop, (h, w), (oh, ow)) in [
        ("interp_param { height: 9 width: 4 }", 0, (5, 6), (9, 4)),
        ("interp_param { zoom_factor: 3 }", 0, (5, 6), (13, 16)),
        (
            "interp_param { shrink_factor: 2 pad_beg: -1 pad_end: -1 }",
            1,
            (3, 4),
            (2, 2),
        ),
        ("interp_param { height: 5 width: 6 }", 0, (5, 6), (5, 6)),
    ] {
        let (want, _) = cpu(
            layer(&format!("type: 'Interp' {text}")).as_mut(),
            &[&blob(&[1, 2, 5, 6], &x)],
            None,
        );
        let n = 2 * oh * ow;
        let mut y = vec![f32::NAN; n];
        // SAFETY: 2 planes of 5 x 6 in, of oh x ow out.
        unsafe {
            k::interp_f32(
                n, n as i64, 5, 6, crop, h, w, oh as i64, ow as i64, &x, &mut y,
            );
        }
        // The sums in double on both sides; a GPU may fuse one product
        // into its add, a last-bit difference at most.
        assert_close(text, &y, &want, 1e-7);
    }
}

#[test]
fn reorg_moves_values_and_gradients_as_the_cpu_both_ways() {
    let x = random(2 * 8 * 4 * 6, 5, -1.0, 1.0);
    let dy = random(2 * 8 * 4 * 6, 6, -1.0, 1.0);
    for reverse in [false, true] {
        let (want_y, want_dx) = cpu(
            layer(&format!(
                "type: 'Reorg' reorg_param {{ stride: 2 reverse: {reverse} }}"
            ))
            .as_mut(),
            &[&blob(&[2, 8, 4, 6], &x)],
            Some(&dy),
        );
        let (mut y, mut dx) = (vec![f32::NAN; 384], vec![f32::NAN; 384]);
        // SAFETY: x, y, dy and dx hold 2 items of 8 x 4 x 6; forward
        // gathers unless reversed, backward the other way.
        unsafe {
            k::reorg_f32(384, 384, 8, 4, 6, 2, i32::from(!reverse), &x, &mut y);
            k::reorg_f32(384, 384, 8, 4, 6, 2, i32::from(reverse), &dy, &mut dx);
        }
        assert_close(&format!("reorg reverse {reverse}"), &y, &want_y, 0.0);
        assert_close(
            &format!("gradient reverse {reverse}"),
            &dx,
            &want_dx[0],
            0.0,
        );
    }
}
