//! A `Net` built from an arbitrary prototxt, in both phases, then run
//! forward and backward: an error or a result, never a panic, and never
//! more memory than the process's host memory limit (128 MiB here, so
//! that a few bytes declaring a billion-value blob are refused, not
//! allocated). Nets whose convolutions and inner products would take more
//! than 20 million multiply-adds are built but not run: they are slow,
//! not wrong. A deploy net whose forward pass repeats its own outputs
//! gives the same bits with its intermediate blobs sharing memory
//! (`Net::reuse_memory`).
#![no_main]

use std::sync::Once;

use blob_layers::net::{Net, NetState};
use libfuzzer_sys::fuzz_target;

const MAX_WORK: u64 = 20_000_000;

fuzz_target!(|data: &[u8]| {
    static LIMIT: Once = Once::new();
    LIMIT.call_once(|| blob_runtime::set_host_memory_limit(128 << 20));
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for state in [NetState::test(), NetState::train()] {
        let deploy = state.phase == blob_layers::net::Phase::Test;
        let mut net = match Net::<f32>::from_prototxt(text, state) {
            Ok(net) => net,
            Err(e) => {
                let message = e.to_string();
                assert!(message.len() <= 4096, "an error of {} bytes", message.len());
                continue;
            }
        };
        let names: Vec<String> = net.layer_names().map(String::from).collect();
        let work: u64 = names
            .iter()
            .filter_map(|l| net.multiply_adds(l))
            .fold(0, u64::saturating_add);
        if work > MAX_WORK {
            continue;
        }
        if deploy {
            same_with_shared_memory(text, &mut net);
        }
        if net.forward().is_ok() {
            let _ = net.backward();
        }
    }
});

/// The outputs of `net` (its fillers' weights) and of the same net with
/// its memory reused, where both run and `net` repeats itself.
fn same_with_shared_memory(text: &str, net: &mut Net<f32>) {
    let outputs = |net: &mut Net<f32>| -> Option<Vec<Vec<u32>>> {
        net.forward().ok()?;
        let names: Vec<String> = net.outputs().iter().map(|s| s.to_string()).collect();
        names
            .iter()
            .map(|n| {
                let values = net.blob(n)?.to_vec().ok()?;
                Some(values.iter().map(|v| v.to_bits()).collect())
            })
            .collect()
    };
    let Some(first) = outputs(net) else { return };
    if outputs(net).as_ref() != Some(&first) {
        return; // a layer that draws at random, or reads what it wrote
    }
    let Ok(mut shared) = Net::<f32>::from_prototxt(text, NetState::test()) else {
        return;
    };
    let Ok(model) = net.to_model() else { return };
    if shared.copy_from(&model).is_err() || shared.reuse_memory().is_err() {
        return;
    }
    if let Some(got) = outputs(&mut shared) {
        assert!(got == first, "reused memory changed the outputs");
    }
}
