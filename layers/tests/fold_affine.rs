//! A Convolution with Caffe's in-place BatchNorm (global statistics),
//! Scale and ReLU after it, as deploy nets write them: the net folds
//! the three into the convolution's weights and bias, and the values are
//! those of the four layers run one after the other (the same net with
//! the BatchNorm writing a blob of its own, which nothing folds) within
//! rounding; the folded weights follow the layers' values as they change.

use blob_layers::net::{Net, NetState};

/// A deploy net of a convolution, BatchNorm, Scale and ReLU, the
/// BatchNorm in place or into `bn_top`.
fn net_of(conv: &str, input: [usize; 4], bn_top: &str, state: NetState) -> Net<f32> {
    let [n, c, h, w] = input;
    let text = format!(
        r#"input: "x" input_shape {{ dim: {n} dim: {c} dim: {h} dim: {w} }}
        layer {{ name: "conv" type: "Convolution" bottom: "x" top: "y"
                 convolution_param {{ {conv} weight_filler {{ type: "gaussian" std: 0.3 }}
                                      bias_filler {{ type: "uniform" min: -0.5 max: 0.5 }} }} }}
        layer {{ name: "bn" type: "BatchNorm" bottom: "y" top: "{bn_top}" }}
        layer {{ name: "scale" type: "Scale" bottom: "{bn_top}" top: "{bn_top}"
                 scale_param {{ bias_term: true filler {{ type: "uniform" min: -2 max: 2 }}
                                bias_filler {{ type: "uniform" min: -1 max: 1 }} }} }}
        layer {{ name: "relu" type: "ReLU" bottom: "{bn_top}" top: "{bn_top}" }}"#
    );
    blob_kernels::cpu::set_seed(5);
    Net::from_prototxt(&text, state).unwrap()
}

/// Running statistics as Caffe keeps them: sums and their factor.
fn set_statistics(net: &Net<f32>, seed: u64) {
    let bn = net.layer_blobs("bn").unwrap();
    blob_kernels::cpu::set_seed(seed);
    blob_kernels::cpu::uniform(-1.0, 1.0, &mut bn[0].mutable_cpu_data().unwrap()).unwrap();
    blob_kernels::cpu::uniform(0.2, 3.0, &mut bn[1].mutable_cpu_data().unwrap()).unwrap();
    bn[2].mutable_cpu_data().unwrap()[0] = 1.5;
}

/// Both nets' outputs on the same input: the folded one's and the
/// layers' apart.
fn outputs(folded: &mut Net<f32>, apart: &mut Net<f32>) -> (Vec<f32>, Vec<f32>) {
    folded.forward().unwrap();
    apart.forward().unwrap();
    (
        folded.blob("y").unwrap().to_vec().unwrap(),
        apart.blob("z").unwrap().to_vec().unwrap(),
    )
}

fn assert_close(what: &str, got: &[f32], want: &[f32]) {
    let scale = want.iter().fold(0f32, |m, v| m.max(v.abs()));
    assert!(
        want.iter().any(|&v| v > 0.0) && want.contains(&0.0),
        "{what}"
    );
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-5 * scale,
            "{what}: value {i} is {g}, the layers apart give {w} (scale {scale})"
        );
    }
}

#[test]
fn batch_norm_scale_and_relu_folded_give_the_layers_values() {
    // Each path a convolution takes on the CPU, as in fold_relu.rs.
    let cases: [(&str, [usize; 4]); 7] = [
        ("num_output: 24 kernel_size: 1", [1, 32, 9, 9]),
        ("num_output: 32 kernel_size: 3 pad: 1", [1, 16, 20, 20]),
        ("num_output: 16 kernel_size: 3 stride: 2", [1, 3, 31, 31]),
        (
            "num_output: 8 kernel_size: 5 bias_term: false",
            [1, 1, 16, 16],
        ),
        (
            "num_output: 12 kernel_size: 3 stride: 2 pad: 1",
            [2, 10, 11, 11],
        ),
        ("num_output: 8 kernel_size: 3 group: 2", [1, 4, 10, 10]),
        (
            "num_output: 8 kernel_size: 3 group: 8 pad: 1",
            [1, 8, 12, 12],
        ),
    ];
    for (conv, input) in cases {
        let mut folded = net_of(conv, input, "y", NetState::test());
        let mut apart = net_of(conv, input, "z", NetState::test());
        set_statistics(&folded, 9);
        apart.share_weights_with(&folded).unwrap();
        let x = folded.blob("x").unwrap();
        blob_kernels::cpu::uniform(-1.0, 1.0, &mut x.mutable_cpu_data().unwrap()).unwrap();
        let values = x.to_vec().unwrap();
        apart
            .blob("x")
            .unwrap()
            .mutable_cpu_data()
            .unwrap()
            .copy_from_slice(&values);
        let (got, want) = outputs(&mut folded, &mut apart);
        assert_close(conv, &got, &want);
        assert!(folds(&mut folded), "{conv}");

        // New statistics, a new scale and new weights reach the next pass.
        set_statistics(&folded, 10);
        let scale = folded.layer_blobs("scale").unwrap();
        scale[0].mutable_cpu_data().unwrap()[0] = -0.75;
        let weights = folded.layer_blobs("conv").unwrap();
        weights[0].mutable_cpu_data().unwrap()[0] += 1.0;
        let (got, want) = outputs(&mut folded, &mut apart);
        assert_close(&format!("{conv}, changed"), &got, &want);
    }
}

#[test]
fn the_folded_layers_are_named_in_caffe_time_and_a_pass_stopping_among_them_runs_them() {
    let conv = "num_output: 8 kernel_size: 3";
    let mut folded = net_of(conv, [1, 4, 10, 10], "y", NetState::test());
    set_statistics(&folded, 3);
    let timing = folded.time(2).unwrap();
    for name in ["bn", "scale", "relu"] {
        let layer = timing.layers.iter().find(|l| l.name == name).unwrap();
        assert_eq!(layer.folded_into.as_deref(), Some("conv"), "{name}");
    }
    // ForwardFromTo(conv, bn): the convolution alone, then BatchNorm.
    blob_kernels::cpu::uniform(
        -1.0,
        1.0,
        &mut folded.blob("x").unwrap().mutable_cpu_data().unwrap(),
    )
    .unwrap();
    let mut apart = net_of(conv, [1, 4, 10, 10], "z", NetState::test());
    apart.share_weights_with(&folded).unwrap();
    let x = folded.blob("x").unwrap().to_vec().unwrap();
    apart
        .blob("x")
        .unwrap()
        .mutable_cpu_data()
        .unwrap()
        .copy_from_slice(&x);
    let bn = folded.layer_names().position(|n| n == "bn").unwrap();
    folded.forward_from_to(0, bn).unwrap();
    apart.forward_from_to(0, bn).unwrap();
    let (got, want) = (
        folded.blob("y").unwrap().to_vec().unwrap(),
        apart.blob("z").unwrap().to_vec().unwrap(),
    );
    assert!(
        got.iter().any(|&v| v < 0.0),
        "BatchNorm's output, not yet rectified"
    );
    assert_eq!(got, want, "the same layers ran, unfolded");
}

#[test]
fn nothing_is_folded_where_a_backward_pass_runs_through_batch_norm() {
    let text = r#"force_backward: true
        input: "x" input_shape { dim: 2 dim: 3 dim: 6 dim: 6 }
        layer { name: "conv" type: "Convolution" bottom: "x" top: "y"
                convolution_param { num_output: 4 kernel_size: 3 weight_filler { type: "xavier" } } }
        layer { name: "bn" type: "BatchNorm" bottom: "y" top: "y"
                batch_norm_param { use_global_stats: true } }
        layer { name: "scale" type: "Scale" bottom: "y" top: "y" scale_param { bias_term: true } }"#;
    let mut net = Net::<f32>::from_prototxt(text, NetState::test()).unwrap();
    assert!(!folds(&mut net), "BatchNorm's backward needs its input");
    // In TRAIN, BatchNorm takes the batch's statistics: no map to fold.
    let mut train = net_of(
        "num_output: 4 kernel_size: 3",
        [2, 3, 6, 6],
        "y",
        NetState::train(),
    );
    assert!(!folds(&mut train));
}

/// Whether `caffe time` finds BatchNorm folded into the convolution.
fn folds(net: &mut Net<f32>) -> bool {
    let timing = net.time(1).unwrap();
    timing
        .layers
        .iter()
        .any(|l| l.name == "bn" && l.folded_into.as_deref() == Some("conv"))
}
