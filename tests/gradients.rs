//! LeNet's backward pass against finite differences of its loss: the
//! gradients the solver applies are the loss's true derivatives.

use blobflow::layers::lenet::LeNet;

#[test]
fn backward_matches_finite_differences() {
    let mut net = LeNet::new(3).unwrap();
    blobflow::kernels::cpu::set_seed(42);
    net.init_fillers().unwrap();
    // Non-zero biases so ReLU and pooling take mixed paths.
    for b in [
        net.conv1.bias.as_dyn(),
        net.conv2.bias.as_dyn(),
        net.ip1.bias.as_dyn(),
        net.ip2.bias.as_dyn(),
    ] {
        blobflow::kernels::cpu::uniform(-0.1, 0.1, &mut b.mutable_cpu_data().unwrap()).unwrap();
    }
    blobflow::kernels::cpu::uniform(0.0, 1.0, &mut net.input().mutable_cpu_data().unwrap())
        .unwrap();
    let labels = [3u8, 7, 1];
    net.forward_backward(&labels).unwrap();
    let grads: Vec<Vec<f32>> = net
        .params()
        .iter()
        .map(|p| p.cpu_diff().unwrap().to_vec())
        .collect();
    let eps = 1e-3f32;
    let mut checked = 0;
    for (pi, grad) in grads.iter().enumerate() {
        // A spread of entries of every parameter blob.
        let n = grad.len();
        for k in 0..6 {
            let i = (k * 7919 + pi * 104729) % n;
            let original = net.params()[pi].cpu_data().unwrap()[i];
            net.params()[pi].mutable_cpu_data().unwrap()[i] = original + eps;
            let up = net.forward_backward(&labels).unwrap();
            net.params()[pi].mutable_cpu_data().unwrap()[i] = original - eps;
            let down = net.forward_backward(&labels).unwrap();
            net.params()[pi].mutable_cpu_data().unwrap()[i] = original;
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
