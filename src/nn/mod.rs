//! A small set of Caffe's layers on blobs, enough to run and train Caffe's
//! LeNet: [`layers`] (Convolution, Pooling, InnerProduct, ReLU, Softmax,
//! SoftmaxWithLoss), [`filler`] (xavier, constant), [`solver`] (SGD with
//! Caffe's arithmetic and `.solverstate` snapshots), [`lenet`] (the net
//! on typed blobs), [`train`] (the training loop) and [`augment`] (optional
//! random translations of training digits).
//!
//! ```
//! let mut net = blobflow::nn::lenet::LeNet::new(4)?;
//! blobflow::kernels::cpu::set_seed(1);
//! net.init_fillers()?;
//! let mut solver = blobflow::nn::solver::SgdSolver::lenet();
//! let loss = net.forward_backward(&[0, 1, 2, 3])?;
//! solver.step(&net.params(), &blobflow::nn::lenet::LR_MULTS)?;
//! assert!(loss > 0.0);
//! # Ok::<(), blobflow::BlobError>(())
//! ```

pub mod augment;
pub mod filler;
pub mod layers;
pub mod lenet;
#[cfg(feature = "cuda")]
pub mod lenet_gpu;
pub mod solver;
pub mod train;
