//! Every learned blob of a net from the seeded generator, scaled by its
//! fan-in (BatchNorm's variances positive, its scale factor 1): weights
//! that keep a deep net's values in range, for comparing two ways of
//! running the same net.

use blobflow::kernels::cpu;
use blobflow::layers::net::Net;

/// Fills every parameter blob of `net` from the seeded generator.
pub fn randomize_params(net: &Net<f32>) {
    let names: Vec<String> = net.layer_names().map(str::to_string).collect();
    for name in names {
        let batch_norm = net.layer_type(&name) == Some("BatchNorm");
        for (i, blob) in net.layer_blobs(&name).unwrap().iter().enumerate() {
            let mut data = blob.mutable_cpu_data().unwrap();
            match (batch_norm, i) {
                (true, 1) => cpu::uniform(0.5, 1.5, &mut data).unwrap(),
                (true, 2) => data.fill(1.0),
                _ => {
                    let fan_in = blob.count() / blob.shape().first().copied().unwrap_or(1).max(1);
                    let scale = (3.0 / fan_in.max(1) as f32).sqrt();
                    cpu::uniform(-scale, scale, &mut data).unwrap();
                }
            }
        }
    }
}
