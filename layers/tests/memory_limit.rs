//! Nets whose few bytes of prototxt declare more memory than the machine
//! has: each is refused at the allocation, under the process's host
//! memory limit, with the layer and the sizes, and nothing stays counted
//! once the net is gone. The limit is one for the whole process, so this
//! file is its own test binary and its tests take turns.

use std::sync::Mutex;

use blob_layers::net::{Net, NetState};
use blob_runtime::{host_memory_in_use, set_host_memory_limit};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

const LIMIT: usize = 64 << 20;

/// Builds `prototxt` and runs it forward under a 64 MiB limit; the error,
/// whichever step gave it.
fn refusal(prototxt: &str) -> String {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let before = host_memory_in_use();
    set_host_memory_limit(before + LIMIT);
    let outcome = Net::<f32>::from_prototxt(prototxt, NetState::test())
        .and_then(|mut net| net.forward().map(drop));
    set_host_memory_limit(0);
    assert_eq!(host_memory_in_use(), before, "memory stays counted");
    let err = outcome.expect_err("over the limit").to_string();
    eprintln!("{err}");
    err
}

#[test]
fn a_weight_over_the_limit_is_refused_at_the_layer_that_declares_it() {
    // 100,000 x 1,000 weights: 400 MB from a 200-byte file.
    let err = refusal(
        r#"input: "x" input_shape { dim: 1 dim: 1000 }
           layer { name: "ip" type: "InnerProduct" bottom: "x" top: "y"
                   inner_product_param { num_output: 100000 } }"#,
    );
    assert!(err.starts_with("layer 'ip' (InnerProduct): "), "{err}");
    assert!(err.contains("381.5 MiB more host memory"), "{err}");
    assert!(err.contains("above the limit of"), "{err}");
}

#[test]
fn an_input_over_the_limit_is_refused_when_first_written() {
    // 3 x 100,000 x 100,000 floats: 120 GB, more than the machine has.
    let err = refusal(
        r#"layer { name: "data" type: "Input" top: "data"
                   input_param { shape { dim: 1 dim: 3 dim: 100000 dim: 100000 } } }
           layer { name: "relu" type: "ReLU" bottom: "data" top: "out" }"#,
    );
    assert!(err.starts_with("layer 'relu' (ReLU): "), "{err}");
    assert!(err.contains("111.8 GiB more host memory"), "{err}");
}

#[test]
fn a_column_buffer_over_the_limit_is_refused_before_any_core_starts() {
    // A 1 MiB input and a 256 x 256 kernel: the column buffer would be
    // 256^2 x 257^2 floats, 16 GiB.
    let err = refusal(
        r#"input: "x" input_shape { dim: 1 dim: 1 dim: 512 dim: 512 }
           layer { name: "conv" type: "Convolution" bottom: "x" top: "y"
                   convolution_param { num_output: 1 kernel_size: 256 } }"#,
    );
    assert!(err.starts_with("layer 'conv' (Convolution): "), "{err}");
    assert!(err.contains("grow a layer's scratch buffer"), "{err}");
}

#[test]
fn under_the_limit_the_same_kind_of_net_runs() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let before = host_memory_in_use();
    set_host_memory_limit(before + LIMIT);
    let run = || -> blob_runtime::Result<Vec<f32>> {
        let mut net = Net::<f32>::from_prototxt(
            r#"input: "x" input_shape { dim: 1 dim: 1 dim: 64 dim: 64 }
               layer { name: "conv" type: "Convolution" bottom: "x" top: "y"
                       convolution_param { num_output: 2 kernel_size: 5
                                           weight_filler { type: "constant" value: 1 } } }"#,
            NetState::test(),
        )?;
        net.blob("x").unwrap().mutable_cpu_data()?.fill(1.0);
        net.forward()?;
        assert!(host_memory_in_use() > before);
        net.blob("y").unwrap().to_vec()
    };
    let outcome = run();
    set_host_memory_limit(0);
    assert_eq!(host_memory_in_use(), before);
    let y = outcome.unwrap();
    assert_eq!(y.len(), 2 * 60 * 60);
    assert!(y.iter().all(|&v| v == 25.0));
}
