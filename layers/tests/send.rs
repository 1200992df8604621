//! Layers and nets can move to another thread (a data loader's, a
//! server's worker) whatever features are on: a feature that took `Send`
//! away would break code that compiles without it.

use blob_layers::lenet::LeNet;
use blob_layers::solver::SgdSolver;

fn sendable<T: Send>() {}

#[test]
fn lenet_and_its_solver_are_send() {
    sendable::<LeNet>();
    sendable::<SgdSolver>();
    let net = LeNet::new(2).unwrap();
    let batch = std::thread::spawn(move || net.batch()).join().unwrap();
    assert_eq!(batch, 2);
}
