//! `argmax.cu` against the CPU side of Caffe's ArgMax: along an axis and
//! per item, indices and values, with ties and a NaN to rank.

use blob_layers::net::{Net, NetState};
use cuda_on_cpu as k;

use crate::random;

/// The CPU net's ArgMax of `x` (of `shape`) with `param`.
fn cpu_argmax(param: &str, shape: &[usize], x: &[f32]) -> Vec<f32> {
    let dims: String = shape.iter().map(|d| format!("dim: {d} ")).collect();
    let text = format!(
        r#"input: "x" input_shape {{ {dims}}} layer {{ name: "l" type: "ArgMax" bottom: "x" top: "y" argmax_param {{ {param} }} }}"#
    );
    let mut net = Net::<f32>::from_prototxt(&text, NetState::test()).unwrap();
    net.blob("x")
        .unwrap()
        .mutable_cpu_data()
        .unwrap()
        .copy_from_slice(x);
    net.forward().unwrap();
    net.blob("y").unwrap().to_vec().unwrap()
}

#[test]
fn argmax_matches_cpu() {
    let shape = [2usize, 5, 3, 4];
    let mut x = random(120, 61, -1.0, 1.0);
    // Ties (the larger index ranks first) and a NaN (above everything).
    for v in x.iter_mut().step_by(7) {
        *v = 0.5;
    }
    x[13] = f32::NAN;
    // (param, items, span, inner, top_k, out_max_val, along_axis)
    let cases = [
        ("axis: 1", 2, 5, 12, 1, false, true),
        (
            "axis: 1 top_k: 3 out_max_val: true",
            2,
            5,
            12,
            3,
            true,
            true,
        ),
        ("axis: -1 top_k: 2", 30, 4, 1, 2, false, true),
        ("top_k: 4", 2, 60, 1, 4, false, false),
        ("top_k: 3 out_max_val: true", 2, 60, 1, 3, true, false),
    ];
    for (param, items, span, inner, top_k, out_max_val, along_axis) in cases {
        let want = cpu_argmax(param, &shape, &x);
        let mut y = vec![f32::NAN; want.len()];
        let runs = items * inner;
        // SAFETY: x holds items * span * inner values, y the top's count.
        unsafe {
            k::argmax_f32(
                runs,
                runs as i64,
                span,
                inner as i64,
                top_k,
                i32::from(out_max_val),
                i32::from(along_axis),
                &x,
                &mut y,
            )
        };
        let same = y.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits());
        assert!(same, "{param}: {y:?} vs the CPU's {want:?}");
    }
}
