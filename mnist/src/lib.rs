//! MNIST for blobflow's examples, tests and benchmarks: the IDX reader
//! ([`Mnist`], gzip or not), LeNet's training loop with Caffe's solver and
//! snapshots ([`Trainer`]), and optional random translations of training
//! digits ([`augment`]).
//!
//! Not published: a library user who wants these copies them from here.
//! It keeps gzip and a random-number crate out of the library crates.
//!
//! ```no_run
//! let digits = blobflow_mnist::Mnist::open("images-idx3-ubyte.gz", "labels-idx1-ubyte.gz")?;
//! let mut trainer = blobflow_mnist::Trainer::new(64, 8000, 1701)?;
//! let loss = trainer.step(&digits)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod augment;
mod idx;
mod train;

pub use idx::{Mnist, MnistError};
pub use train::{INPUT_SCALE, LENET_TRAIN_TEST, Trainer};
