//! `concat.cu` against the CPU sides of the run-time Concat and Slice
//! layers, as a net runs them: the same slabs moved the same way.

use blob_layers::net::{Net, NetState};
use cuda_on_cpu as k;

use crate::{assert_close, random};

/// Concat of a (2, 2, 3) and a (2, 4, 3) along axis 1, forward and
/// backward on the CPU, against the kernels moving each part.
#[test]
fn slabs_join_and_split_match_cpu_concat() {
    let (a, b) = (random(12, 1, -1.0, 1.0), random(24, 2, -1.0, 1.0));
    let dy = random(36, 3, -1.0, 1.0);
    let mut net = Net::<f32>::from_prototxt(
        r#"force_backward: true
           input: "a" input_shape { dim: 2 dim: 2 dim: 3 }
           input: "b" input_shape { dim: 2 dim: 4 dim: 3 }
           layer { name: "c" type: "Concat" bottom: "a" bottom: "b" top: "y" }"#,
        NetState::test(),
    )
    .unwrap();
    net.blob("a")
        .unwrap()
        .mutable_cpu_data()
        .unwrap()
        .copy_from_slice(&a);
    net.blob("b")
        .unwrap()
        .mutable_cpu_data()
        .unwrap()
        .copy_from_slice(&b);
    net.forward().unwrap();
    let want_y = net.blob("y").unwrap().to_vec().unwrap();
    net.blob("y")
        .unwrap()
        .mutable_cpu_diff()
        .unwrap()
        .copy_from_slice(&dy);
    net.backward().unwrap();
    let want_da = net.blob("a").unwrap().diff_to_vec().unwrap();
    let want_db = net.blob("b").unwrap().diff_to_vec().unwrap();

    // (inner, total, offset, len) of each part.
    let parts = [(&a, 12, (3i64, 6i64, 0i64, 2i64)), (&b, 24, (3, 6, 2, 4))];
    let mut y = vec![f32::NAN; 36];
    for &(x, n, (inner, total, offset, len)) in &parts {
        // SAFETY: x holds n values, y every place.
        unsafe { k::slabs_join_f32(n, n as i64, inner, total, offset, len, x, &mut y) };
    }
    assert_close("joined", &y, &want_y, 0.0);
    for (&(_, n, (inner, total, offset, len)), want) in parts.iter().zip([&want_da, &want_db]) {
        let mut dx = vec![f32::NAN; n];
        // SAFETY: dy holds every place, dx n values.
        unsafe { k::slabs_split_f32(n, n as i64, inner, total, offset, len, &dy, &mut dx) };
        assert_close("split", &dx, want, 0.0);
    }
}
