//! Caffe's Crop and ArgMax on the cases of Caffe's own tests (shapes,
//! offsets, ranking and its ties) and the errors Caffe raises.

use blob_layers::net::{Net, NetState};

fn net(text: &str) -> Result<Net<f32>, blob_runtime::BlobError> {
    Net::<f32>::from_prototxt(text, NetState::test())
}

fn arange(net: &Net<f32>, blob: &str) -> Vec<f32> {
    let b = net.blob(blob).unwrap();
    let v: Vec<f32> = (0..b.count()).map(|i| i as f32).collect();
    b.mutable_cpu_data().unwrap().copy_from_slice(&v);
    v
}

#[test]
fn crop_takes_the_window_at_each_axis_offset() {
    let mut n = net(r#"input: "x" input_shape { dim: 2 dim: 3 dim: 4 dim: 5 }
           input: "like" input_shape { dim: 9 dim: 2 dim: 3 dim: 3 }
           layer { name: "c" type: "Crop" bottom: "x" bottom: "like" top: "y"
                   crop_param { axis: 1 offset: 1 offset: 0 offset: 2 } }"#)
    .unwrap();
    let x = arange(&n, "x");
    n.forward().unwrap();
    let y = n.blob("y").unwrap();
    // Axes before `axis` keep the first bottom's size.
    assert_eq!(y.shape(), [2, 2, 3, 3]);
    let y = y.to_vec().unwrap();
    let mut i = 0;
    for b in 0..2 {
        for c in 0..2 {
            for h in 0..3 {
                for w in 0..3 {
                    assert_eq!(y[i], x[((b * 3 + c + 1) * 4 + h) * 5 + w + 2]);
                    i += 1;
                }
            }
        }
    }
}

#[test]
fn crop_with_one_offset_or_none_and_its_gradient_window() {
    // Caffe's default axis 2, one offset for both cropped axes.
    let mut n = net(
        r#"force_backward: true
           input: "x" input_shape { dim: 1 dim: 1 dim: 4 dim: 4 }
           input: "like" input_shape { dim: 1 dim: 1 dim: 2 dim: 2 }
           layer { name: "c" type: "Crop" bottom: "x" bottom: "like" top: "y" crop_param { offset: 1 } }"#,
    )
    .unwrap();
    arange(&n, "x");
    n.forward().unwrap();
    assert_eq!(
        n.blob("y").unwrap().to_vec().unwrap(),
        [5.0, 6.0, 9.0, 10.0]
    );
    n.blob("y")
        .unwrap()
        .mutable_cpu_diff()
        .unwrap()
        .copy_from_slice(&[1.0, 2.0, 3.0, 4.0]);
    n.blob("x").unwrap().mutable_cpu_diff().unwrap().fill(9.0);
    n.backward().unwrap();
    #[rustfmt::skip]
    let want = [
        0.0, 0.0, 0.0, 0.0,
        0.0, 1.0, 2.0, 0.0,
        0.0, 3.0, 4.0, 0.0,
        0.0, 0.0, 0.0, 0.0,
    ];
    assert_eq!(n.blob("x").unwrap().diff_to_vec().unwrap(), want);
    // No offsets: the top-left window.
    let mut n = net(r#"input: "x" input_shape { dim: 1 dim: 1 dim: 4 dim: 4 }
           input: "like" input_shape { dim: 1 dim: 1 dim: 2 dim: 3 }
           layer { name: "c" type: "Crop" bottom: "x" bottom: "like" top: "y" }"#)
    .unwrap();
    arange(&n, "x");
    n.forward().unwrap();
    assert_eq!(
        n.blob("y").unwrap().to_vec().unwrap(),
        [0.0, 1.0, 2.0, 4.0, 5.0, 6.0]
    );
}

#[test]
fn crop_refuses_windows_out_of_bounds_and_odd_offset_counts() {
    let text = |like: &str, param: &str| {
        format!(
            r#"input: "x" input_shape {{ dim: 1 dim: 1 dim: 4 dim: 4 }}
               input: "like" input_shape {{ {like} }}
               layer {{ name: "c" type: "Crop" bottom: "x" bottom: "like" top: "y" crop_param {{ {param} }} }}"#
        )
    };
    for (like, param, says) in [
        ("dim: 1 dim: 1 dim: 3 dim: 3", "offset: 2", "out-of-bounds"),
        (
            "dim: 1 dim: 1 dim: 2 dim: 2",
            "offset: 1 offset: 1 offset: 1",
            "number of offsets",
        ),
        ("dim: 1 dim: 1 dim: 2", "", "number of axes"),
        ("dim: 1 dim: 1 dim: 2 dim: 2", "axis: 4", "axis 4"),
    ] {
        let e = net(&text(like, param))
            .err()
            .unwrap_or_else(|| panic!("accepted {param}"))
            .to_string();
        assert!(e.contains(says) && e.contains("'c'"), "{param}: {e}");
    }
}

#[test]
fn argmax_per_item_with_and_without_values() {
    let values = [
        0.1, 0.7, 0.2, 0.7, // item 0: a tie at 1 and 3
        0.9, 0.1, 0.3, 0.4, // item 1
    ];
    let run = |param: &str| {
        let mut n = net(&format!(
            r#"input: "x" input_shape {{ dim: 2 dim: 1 dim: 2 dim: 2 }}
               layer {{ name: "a" type: "ArgMax" bottom: "x" top: "y" argmax_param {{ {param} }} }}"#
        ))
        .unwrap();
        n.blob("x")
            .unwrap()
            .mutable_cpu_data()
            .unwrap()
            .copy_from_slice(&values);
        n.forward().unwrap();
        let y = n.blob("y").unwrap();
        (y.shape().to_vec(), y.to_vec().unwrap())
    };
    // Ties go to the larger index.
    assert_eq!(run(""), (vec![2, 1, 1, 1], vec![3.0, 0.0]));
    assert_eq!(
        run("top_k: 2"),
        (vec![2, 1, 2, 1], vec![3.0, 1.0, 0.0, 3.0])
    );
    assert_eq!(
        run("top_k: 2 out_max_val: true"),
        (
            vec![2, 2, 2, 1],
            vec![3.0, 1.0, 0.7, 0.7, 0.0, 3.0, 0.9, 0.4]
        )
    );
    // Along an axis: the shape with that axis cut to top_k.
    assert_eq!(run("axis: 2"), (vec![2, 1, 1, 2], vec![1.0, 1.0, 0.0, 1.0]));
    assert_eq!(
        run("axis: 3 out_max_val: true"),
        (vec![2, 1, 2, 1], vec![0.7, 0.7, 0.9, 0.4])
    );
}

#[test]
fn argmax_refuses_a_top_k_beyond_what_it_ranks_and_a_backward_pass() {
    let e = net(
        r#"input: "x" input_shape { dim: 2 dim: 3 }
           layer { name: "a" type: "ArgMax" bottom: "x" top: "y" argmax_param { axis: 1 top_k: 4 } }"#,
    )
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("top_k 4") && e.contains("'a'"), "{e}");
    let e = net(r#"input: "x" input_shape { dim: 2 dim: 3 }
           layer { name: "a" type: "ArgMax" bottom: "x" top: "y" argmax_param { top_k: 0 } }"#)
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("top_k"), "{e}");
    // With force_backward the net still runs backward without reaching
    // into ArgMax's input.
    let mut n = net(
        r#"force_backward: true input: "x" input_shape { dim: 2 dim: 3 }
           layer { name: "a" type: "ArgMax" bottom: "x" top: "y" }"#,
    )
    .unwrap();
    n.forward().unwrap();
    n.backward().unwrap();
}
