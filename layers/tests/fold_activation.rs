//! A Convolution with an in-place activation after it (Caffe's ReLU,
//! its leaky form, the forks' ReLU6): the net folds the activation into
//! the convolution's pass over its output, and the values, bit for bit,
//! and the gradients are those of the two layers run one after the other
//! (the same net with the activation writing a blob of its own, which
//! nothing folds).

use blob_layers::net::{Net, NetState};

/// The activations a net folds, as layer text.
const ACTIVATIONS: [&str; 3] = [
    r#"type: "ReLU""#,
    r#"type: "ReLU" relu_param { negative_slope: 0.1 }"#,
    r#"type: "ReLU6""#,
];

/// A net of one convolution and a ReLU, in place or into `relu_top`.
fn net(conv: &str, input: [usize; 4], relu_top: &str) -> Net<f32> {
    net_with(conv, input, ACTIVATIONS[0], relu_top)
}

/// A net of one convolution and `activation`, in place or into
/// `relu_top`.
fn net_with(conv: &str, input: [usize; 4], activation: &str, relu_top: &str) -> Net<f32> {
    let [n, c, h, w] = input;
    let text = format!(
        r#"force_backward: true
        input: "x" input_shape {{ dim: {n} dim: {c} dim: {h} dim: {w} }}
        layer {{ name: "conv" type: "Convolution" bottom: "x" top: "y"
                 convolution_param {{ {conv} weight_filler {{ type: "gaussian" std: 0.3 }}
                                      bias_filler {{ type: "uniform" min: -0.5 max: 0.5 }} }} }}
        layer {{ name: "relu" {activation} bottom: "y" top: "{relu_top}" }}"#
    );
    blob_kernels::cpu::set_seed(5);
    Net::from_prototxt(&text, NetState::train()).unwrap()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|v| v.to_bits()).collect()
}

#[test]
fn a_folded_activation_gives_the_two_layers_values_and_gradients() {
    // Each path a convolution takes on the CPU: a 1x1 layer, Winograd
    // (3x3, 16 channels and more), a first layer at stride 2 (phase
    // copies), a shallow direct one, im2col at batch 2, groups,
    // depthwise.
    let cases: [(&str, [usize; 4]); 7] = [
        ("num_output: 24 kernel_size: 1", [1, 32, 9, 9]),
        ("num_output: 32 kernel_size: 3 pad: 1", [1, 16, 20, 20]),
        ("num_output: 16 kernel_size: 3 stride: 2", [1, 3, 31, 31]),
        ("num_output: 8 kernel_size: 5", [1, 1, 16, 16]),
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
    for ((conv, input), activation) in cases
        .into_iter()
        .flat_map(|case| ACTIVATIONS.map(|a| (case, a)))
    {
        let mut folded = net_with(conv, input, activation, "y");
        let mut apart = net_with(conv, input, activation, "z");
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
        folded.forward().unwrap();
        apart.forward().unwrap();
        let (got, want) = (
            folded.blob("y").unwrap().to_vec().unwrap(),
            apart.blob("z").unwrap().to_vec().unwrap(),
        );
        let clamped = if activation.contains("negative_slope") {
            want.iter().any(|&v| v < 0.0)
        } else {
            want.contains(&0.0)
        };
        assert!(
            want.iter().any(|&v| v > 0.0) && clamped,
            "{conv}, {activation}"
        );
        assert_eq!(
            bits(&got),
            bits(&want),
            "{conv}, {activation}: folded values"
        );
        // The same gradient from above; every weight's and the input's
        // gradients agree.
        for (net, top) in [(&mut folded, "y"), (&mut apart, "z")] {
            let top = net.blob(top).unwrap();
            let ones: Vec<f32> = (0..top.count()).map(|i| (i % 7) as f32 - 3.0).collect();
            top.mutable_cpu_diff().unwrap().copy_from_slice(&ones);
            net.clear_param_diffs().unwrap();
            net.backward().unwrap();
        }
        let diff =
            |net: &Net<f32>, blob: &str| net.blob(blob).unwrap().cpu_diff().unwrap().to_vec();
        assert_eq!(
            bits(&diff(&folded, "x")),
            bits(&diff(&apart, "x")),
            "{conv}, {activation}: input gradient"
        );
        for (a, b) in folded.param_blobs().iter().zip(apart.param_blobs()) {
            let (a, b) = (
                a.cpu_diff().unwrap().to_vec(),
                b.cpu_diff().unwrap().to_vec(),
            );
            assert_eq!(
                bits(&a),
                bits(&b),
                "{conv}, {activation}: parameter gradient"
            );
        }
    }
}

#[test]
fn a_pass_that_stops_at_the_convolution_leaves_its_output_unrectified() {
    let mut folded = net("num_output: 32 kernel_size: 3 pad: 1", [1, 16, 12, 12], "y");
    let x = folded.blob("x").unwrap();
    blob_kernels::cpu::uniform(-1.0, 1.0, &mut x.mutable_cpu_data().unwrap()).unwrap();
    // Caffe's ForwardFromTo(conv, conv): the ReLU has not run.
    let conv = folded.layer_names().position(|n| n == "conv").unwrap();
    folded.forward_from_to(0, conv).unwrap();
    let before = folded.blob("y").unwrap().to_vec().unwrap();
    assert!(before.iter().any(|&v| v < 0.0));
    // And then the ReLU alone, as Caffe would run it.
    folded.forward_from_to(conv + 1, conv + 1).unwrap();
    let after = folded.blob("y").unwrap().to_vec().unwrap();
    let rectified: Vec<f32> = before.iter().map(|&v| v.max(0.0)).collect();
    assert_eq!(bits(&after), bits(&rectified));
}

#[test]
fn caffe_time_counts_a_folded_relu_in_its_convolution() {
    let mut folded = net("num_output: 8 kernel_size: 3", [1, 4, 10, 10], "y");
    let timing = folded.time(2).unwrap();
    let relu = timing.layers.iter().find(|l| l.name == "relu").unwrap();
    assert_eq!(relu.folded_into.as_deref(), Some("conv"));
    assert_eq!(relu.forward_ms, 0.0);
    let mut apart = net("num_output: 8 kernel_size: 3", [1, 4, 10, 10], "z");
    let timing = apart.time(2).unwrap();
    assert!(timing.layers.iter().all(|l| l.folded_into.is_none()));
}
