//! Layers and nets can move to another thread (a data loader's, a
//! server's worker) whatever features are on: a feature that took `Send`
//! away would break code that compiles without it.

use blob_layers::net::{Net, NetState};
use blob_layers::solver::SgdSolver;

fn sendable<T: Send>() {}

#[test]
fn a_net_and_its_solver_are_send() {
    sendable::<Net<f32>>();
    sendable::<Net<f64>>();
    sendable::<SgdSolver>();
    let net = Net::<f32>::from_prototxt(
        r#"input: "x" input_shape { dim: 2 dim: 3 }
           layer { name: "ip" type: "InnerProduct" bottom: "x" top: "y" inner_product_param { num_output: 4 } }"#,
        NetState::test(),
    )
    .unwrap();
    let shape = std::thread::spawn(move || net.blob("y").unwrap().shape().to_vec())
        .join()
        .unwrap();
    assert_eq!(shape, [2, 4]);
}
