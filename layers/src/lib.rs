//! Caffe's layers on blobflow's blobs, forward and backward: enough to run
//! and train Caffe's LeNet. [`Convolution`], [`MaxPool`], [`InnerProduct`],
//! ReLU, Softmax and SoftmaxWithLoss; [`filler`] (xavier, constant);
//! [`solver`] (SGD with Caffe's arithmetic and `.solverstate` snapshots);
//! [`lenet`] (the net, on typed blobs).
//!
//! Depend on `blobflow` (which re-exports this crate as `blobflow::layers`)
//! unless you want the layers without the facade.
//!
//! ```
//! let mut net = blob_layers::lenet::LeNet::new(4)?;
//! blob_kernels::cpu::set_seed(1);
//! net.init_fillers()?;
//! let mut solver = blob_layers::solver::SgdSolver::lenet();
//! let loss = net.forward_backward(&[0, 1, 2, 3])?;
//! solver.step(&net.params(), &blob_layers::lenet::LR_MULTS)?;
//! assert!(loss > 0.0);
//! # Ok::<(), blob_runtime::BlobError>(())
//! ```

#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod filler;
mod layers;
pub mod lenet;
#[cfg(feature = "cuda")]
pub mod lenet_gpu;
pub mod solver;

pub use layers::{
    Convolution, InnerProduct, MaxPool, relu_backward, relu_forward, softmax, softmax_loss,
};
