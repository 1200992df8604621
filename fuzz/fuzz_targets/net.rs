//! A `Net` built from an arbitrary prototxt, in both phases, then run
//! forward and backward: an error or a result, never a panic, and never
//! more memory than the process's host memory limit (128 MiB here, so
//! that a few bytes declaring a billion-value blob are refused, not
//! allocated). Nets whose convolutions and inner products would take more
//! than 20 million multiply-adds are built but not run: they are slow,
//! not wrong.
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
        if net.forward().is_ok() {
            let _ = net.backward();
        }
    }
});
