//! `scale.cu` against the CPU sides of the run-time Scale layer, with and
//! without its bias, and of Bias (no factor), out of place and in place.

use blob_layers::net::{Net, NetState};
use cuda_on_cpu as k;

use crate::{assert_close, random};

#[test]
fn scale_forward_matches_cpu() {
    let (n, c, inner) = (2usize, 3usize, 5usize);
    let count = n * c * inner;
    let x = random(count, 1, -2.0, 2.0);
    let (factor, shift) = (random(c, 2, -1.5, 1.5), random(c, 3, -0.5, 0.5));
    // (has a factor, has a bias): Scale with and without its bias, Bias.
    for (has_scale, bias_term) in [(true, true), (true, false), (false, true)] {
        let layer = if has_scale {
            format!(r#"type: "Scale" scale_param {{ bias_term: {bias_term} }}"#)
        } else {
            r#"type: "Bias""#.to_string()
        };
        let mut net = Net::<f32>::from_prototxt(
            &format!(
                r#"input: "x" input_shape {{ dim: 2 dim: 3 dim: 5 }}
                   layer {{ name: "l" {layer} bottom: "x" top: "y" }}"#
            ),
            NetState::test(),
        )
        .unwrap();
        let blobs = net.layer_blobs("l").unwrap();
        if has_scale {
            blobs[0]
                .mutable_cpu_data()
                .unwrap()
                .copy_from_slice(&factor);
        }
        if bias_term {
            blobs[usize::from(has_scale)]
                .mutable_cpu_data()
                .unwrap()
                .copy_from_slice(&shift);
        }
        net.blob("x")
            .unwrap()
            .mutable_cpu_data()
            .unwrap()
            .copy_from_slice(&x);
        net.forward().unwrap();
        let want = net.blob("y").unwrap().to_vec().unwrap();

        let (scaled, has) = (i32::from(has_scale), i32::from(bias_term));
        let mut y = vec![f32::NAN; count];
        // SAFETY: x and y hold count values, factor and shift c.
        unsafe {
            k::scale_forward_f32(
                count,
                count as i64,
                c as i64,
                inner as i64,
                &x,
                &factor,
                scaled,
                &shift,
                has,
                &mut y,
            )
        };
        assert_close("scale", &y, &want, 1e-6);
        let mut in_place = x.clone();
        // SAFETY: in_place holds count values, factor and shift c.
        unsafe {
            k::scale_forward_inplace_f32(
                count,
                count as i64,
                c as i64,
                inner as i64,
                &factor,
                scaled,
                &shift,
                has,
                &mut in_place,
            )
        };
        assert_close("scale in place", &in_place, &want, 1e-6);
    }
}
