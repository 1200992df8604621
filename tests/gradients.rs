//! LeNet's backward pass against finite differences of its loss: the
//! gradients the solver applies are the loss's true derivatives. The net
//! is Caffe's own `lenet_train_test.prototxt` (TRAIN phase) built as a
//! `Net`, as the trainer runs it.

use blobflow::layers::net::Net;

/// Forward and backward with fresh parameter gradients; the loss.
fn forward_backward(net: &mut Net<f32>) -> f32 {
    net.clear_param_diffs().unwrap();
    let loss = net.forward().unwrap();
    net.backward().unwrap();
    loss
}

#[test]
fn backward_matches_finite_differences() {
    let mut net = blobflow_mnist::Trainer::new(3, 1, 42).unwrap().net;
    // Non-zero biases so ReLU and pooling take mixed paths.
    for layer in ["conv1", "conv2", "ip1", "ip2"] {
        let bias = &net.layer_blobs(layer).unwrap()[1];
        blobflow::kernels::cpu::uniform(-0.1, 0.1, &mut bias.mutable_cpu_data().unwrap()).unwrap();
    }
    let data = net.blob("data").unwrap();
    blobflow::kernels::cpu::uniform(0.0, 1.0, &mut data.mutable_cpu_data().unwrap()).unwrap();
    net.blob("label")
        .unwrap()
        .mutable_cpu_data()
        .unwrap()
        .copy_from_slice(&[3.0, 7.0, 1.0]);
    forward_backward(&mut net);
    let grads: Vec<Vec<f32>> = net
        .param_blobs()
        .iter()
        .map(|p| p.cpu_diff().unwrap().to_vec())
        .collect();
    assert_eq!(grads.len(), 8);
    let eps = 1e-3f32;
    let mut checked = 0;
    for (pi, grad) in grads.iter().enumerate() {
        // A spread of entries of every parameter blob.
        let n = grad.len();
        for k in 0..6 {
            let i = (k * 7919 + pi * 104729) % n;
            let set = |net: &Net<f32>, v: f32| {
                net.param_blobs()[pi].mutable_cpu_data().unwrap()[i] = v;
            };
            let original = net.param_blobs()[pi].cpu_data().unwrap()[i];
            set(&net, original + eps);
            let up = forward_backward(&mut net);
            set(&net, original - eps);
            let down = forward_backward(&mut net);
            set(&net, original);
            let numeric = (up - down) / (2.0 * eps);
            let analytic = grad[i];
            // f32 loss differences over 2e-3 carry about 1e-4 of rounding,
            // and a step can cross a ReLU or max-pool kink: 5e-4 + 5%.
            let tol = 5e-4 + 0.05 * analytic.abs().max(numeric.abs());
            assert!(
                (numeric - analytic).abs() <= tol,
                "param {pi}[{i}]: analytic {analytic}, numeric {numeric}"
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 48);
}
