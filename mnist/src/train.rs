//! Training LeNet as Caffe's `caffe train` does with lenet_solver: Caffe's
//! own `lenet_train_test.prototxt` built as a [`Net`], batches taken in
//! order with wrap-around, SGD with Caffe's arithmetic, and snapshots
//! (`.caffemodel` + `.solverstate`) that Caffe reads and that resume
//! exactly.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use blob_layers::net::{Net, NetState};
use blob_layers::solver::{ParamSpec, SgdSolver};
use blob_runtime::{BlobError, CaffeModel, DeviceBackend};

use crate::Mnist;
use crate::augment;

type Result<T> = std::result::Result<T, BlobError>;

/// Caffe's MNIST input scale (1/256).
pub const INPUT_SCALE: f32 = 0.00390625;

/// Caffe's `examples/mnist/lenet_train_test.prototxt`: its Data layers
/// become the inputs `data` and `label`, which [`Trainer`] fills.
///
/// ```
/// use blob_layers::net::{Net, NetState};
/// let net = Net::<f32>::builder()
///     .state(NetState::test())
///     .input_shape("data", &[2, 1, 28, 28])
///     .input_shape("label", &[2])
///     .from_prototxt(blobflow_mnist::LENET_TRAIN_TEST)?;
/// assert_eq!(net.outputs(), ["accuracy", "loss"]);
/// # Ok::<(), blob_runtime::BlobError>(())
/// ```
pub const LENET_TRAIN_TEST: &str = include_str!("../nets/lenet_train_test.prototxt");

/// Digits per forward pass of the test net.
const TEST_CHUNK: usize = 500;

/// LeNet's input is one 28 x 28 channel; other IDX files are refused
/// rather than read across image boundaries.
fn check_digit_size(data: &Mnist, op: &'static str) -> Result<()> {
    if (data.rows, data.cols) == (28, 28) {
        return Ok(());
    }
    Err(BlobError::CountMismatch {
        op,
        what: format!("a {} x {} image", data.rows, data.cols),
        got: data.rows * data.cols,
        want: 784,
    })
}

/// LeNet (Caffe's `lenet_train_test.prototxt` in its TRAIN phase), its
/// solver, and a TEST-phase twin sharing its weights for
/// [`accuracy`](Trainer::accuracy).
///
/// ```no_run
/// use blobflow_mnist::{Mnist, Trainer};
/// let digits = Mnist::open("images.gz", "labels.gz")?;
/// let mut t = Trainer::new(64, 8000, 1701)?;
/// for _ in 0..100 {
///     let loss = t.step(&digits)?;
/// }
/// t.snapshot("out", "lenet")?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Trainer {
    /// The net being trained (TRAIN phase; inputs `data` and `label`).
    pub net: Net<f32>,
    /// The solver (its `iter` is the iteration count).
    pub solver: SgdSolver,
    /// Images per iteration.
    pub batch: usize,
    /// Train on digits `0..train_count`.
    pub train_count: usize,
    /// Move each training digit by up to this many pixels in each
    /// direction ([`augment`]); 0, the default, is
    /// Caffe's recipe. Not stored in snapshots: pass it again on resume.
    pub shift: usize,
    test: Net<f32>,
    specs: Vec<ParamSpec>,
}

/// A training batch holds at least one digit: with none, every
/// iteration would learn nothing and report a loss of 0.
fn check_batch(batch: usize) -> Result<()> {
    if batch == 0 {
        return Err(BlobError::InvalidParameter {
            op: "train LeNet",
            detail: "a batch of 0 digits; training needs at least one per iteration".into(),
        });
    }
    Ok(())
}

/// LeNet in `state` for batches of `batch` digits.
fn lenet(state: NetState, batch: usize) -> Result<Net<f32>> {
    Net::builder()
        .state(state)
        .input_shape("data", &[batch, 1, 28, 28])
        .input_shape("label", &[batch])
        .from_prototxt(LENET_TRAIN_TEST)
}

impl Trainer {
    /// A fresh net (the prototxt's fillers, xavier weights drawn from
    /// `seed`, zero biases) and solver.
    ///
    /// ```
    /// let t = blobflow_mnist::Trainer::new(8, 100, 1701)?;
    /// assert_eq!(t.solver.iter, 0);
    /// assert!(blobflow_mnist::Trainer::new(0, 100, 1701).is_err());
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn new(batch: usize, train_count: usize, seed: u64) -> Result<Self> {
        check_batch(batch)?;
        blob_kernels::cpu::set_seed(seed);
        let net = lenet(NetState::train(), batch)?;
        Self::with_net(net, SgdSolver::lenet(), batch, train_count)
    }

    fn with_net(
        net: Net<f32>,
        solver: SgdSolver,
        batch: usize,
        train_count: usize,
    ) -> Result<Self> {
        let mut test = lenet(NetState::test(), TEST_CHUNK)?;
        test.share_weights_with(&net)?;
        Ok(Self {
            specs: net.param_specs(),
            net,
            test,
            solver,
            batch,
            train_count: train_count.max(1),
            shift: 0,
        })
    }

    /// Continues from a `.solverstate` and the `.caffemodel` it names,
    /// exactly where the snapshot left off. The model is looked up beside
    /// the state file (Caffe's `learned_net` is relative to the directory
    /// Caffe ran in, so the path itself is often stale); states written by
    /// `caffe train` resume here as well as ours.
    ///
    /// ```
    /// assert!(blobflow_mnist::Trainer::resume("/no/x.solverstate", 64, 8000).is_err());
    /// ```
    pub fn resume(solverstate: impl AsRef<Path>, batch: usize, train_count: usize) -> Result<Self> {
        Self::resume_with(solverstate, SgdSolver::lenet(), batch, train_count)
    }

    /// [`Trainer::resume`] with `solver`'s settings (its type, rate
    /// policy, decay), as Caffe resumes with the solver prototxt it is
    /// given: the state holds only the iteration and the history, which
    /// must be of `solver`'s type.
    ///
    /// ```
    /// use blob_layers::solver::SgdSolver;
    /// let adam = SgdSolver::lenet_adam();
    /// assert!(blobflow_mnist::Trainer::resume_with("/no/x.solverstate", adam, 64, 8000).is_err());
    /// ```
    pub fn resume_with(
        solverstate: impl AsRef<Path>,
        mut solver: SgdSolver,
        batch: usize,
        train_count: usize,
    ) -> Result<Self> {
        check_batch(batch)?;
        let path = solverstate.as_ref();
        let state = blob_runtime::read_solver_state(path)?;
        let model_path = blob_layers::solver::model_of_state(path, &state)?;
        let mut net = lenet(NetState::train(), batch)?;
        let report = net.copy_from(&CaffeModel::open(&model_path)?)?;
        if let Some(layer) = report.missing.first() {
            return Err(BlobError::Net {
                at: model_path.display().to_string(),
                detail: format!("resuming LeNet: the model has no weights for layer {layer:?}"),
            });
        }
        solver.restore(&state, &net.param_blobs())?;
        Self::with_net(net, solver, batch, train_count)
    }

    /// Puts both nets (and so the solver's history, made on the next
    /// step) on `device`.
    ///
    /// ```
    /// let mut t = blobflow_mnist::Trainer::new(2, 100, 1)?;
    /// t.to_device(blob_runtime::host_device::HostDevice::new())?;
    /// assert!(t.net.blob("data").unwrap().device().is_some());
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn to_device(&mut self, device: Arc<dyn DeviceBackend>) -> Result<()> {
        self.net.to_device(device.clone())?;
        self.test.to_device(device)?;
        self.test.share_weights_with(&self.net)
    }

    /// One iteration on the next batch (digits taken in order, wrapping
    /// at `train_count`): forward, loss, backward, SGD update. Returns the
    /// loss before the update.
    ///
    /// ```
    /// let d = blobflow_mnist::Mnist { pixels: vec![0; 4 * 784], labels: vec![0, 1, 2, 3], rows: 28, cols: 28 };
    /// let mut t = blobflow_mnist::Trainer::new(2, 4, 1)?;
    /// let loss = t.step(&d)?;
    /// assert!(loss > 0.0 && t.solver.iter == 1);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn step(&mut self, data: &Mnist) -> Result<f32> {
        check_digit_size(data, "train LeNet")?;
        let n = self.train_count.min(data.len());
        if n == 0 {
            return Err(BlobError::CountMismatch {
                op: "train",
                what: "digits".into(),
                got: 0,
                want: self.batch,
            });
        }
        let moves = augment::offsets(self.solver.iter, self.batch, self.shift);
        {
            let (images, labels) = (self.input("data")?, self.input("label")?);
            let mut images = images.mutable_cpu_data()?;
            let mut labels = labels.mutable_cpu_data()?;
            let mut unmoved = [0f32; 784];
            for (j, (slot, &by)) in images.chunks_exact_mut(784).zip(&moves).enumerate() {
                let item = (self.solver.iter * self.batch + j) % n;
                if by == (0, 0) {
                    data.scaled_into(item, INPUT_SCALE, slot);
                } else {
                    data.scaled_into(item, INPUT_SCALE, &mut unmoved);
                    augment::translate(&unmoved, 28, 28, by, slot);
                }
                labels[j] = f32::from(data.labels[item]);
            }
        }
        self.net.clear_param_diffs()?;
        self.net.forward_unread()?;
        self.net.backward()?;
        self.solver.step(&self.net.param_blobs(), &self.specs)?;
        // Read once the update is queued too: on a GPU the host has
        // queued the whole step before its one wait, so the device does
        // not idle while the host queues the update. The loss blob is
        // the forward pass's; backward and the update do not touch it.
        self.net.loss()
    }

    /// The train net's input blob `name`.
    fn input(&self, name: &str) -> Result<&blob_runtime::Blob<f32>> {
        self.net.blob(name).ok_or_else(|| BlobError::Net {
            at: "LeNet".into(),
            detail: format!("no input blob {name:?}"),
        })
    }

    /// Fraction of `range` classified correctly.
    ///
    /// ```
    /// let d = blobflow_mnist::Mnist { pixels: vec![0; 2 * 784], labels: vec![0, 0], rows: 28, cols: 28 };
    /// let mut t = blobflow_mnist::Trainer::new(2, 2, 1)?;
    /// assert!(t.accuracy(&d, 0..2)? <= 1.0);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn accuracy(&mut self, data: &Mnist, range: std::ops::Range<usize>) -> Result<f64> {
        check_digit_size(data, "test LeNet")?;
        let (start, end) = (range.start, range.end.min(data.len()));
        let mut correct = 0;
        for s in (start..end).step_by(TEST_CHUNK) {
            let m = TEST_CHUNK.min(end - s);
            let test = &mut self.test;
            for (name, dims) in [("data", &[m, 1, 28, 28][..]), ("label", &[m][..])] {
                let blob = test.blob_mut(name).ok_or_else(|| BlobError::Net {
                    at: "LeNet".into(),
                    detail: format!("no input blob {name:?}"),
                })?;
                if blob.shape() != dims {
                    blob.reshape(dims)?;
                }
            }
            {
                let mut images = test.blob("data").expect("checked").mutable_cpu_data()?;
                data.scaled_into(s, INPUT_SCALE, &mut images);
                let mut labels = test.blob("label").expect("checked").mutable_cpu_data()?;
                for (l, &d) in labels.iter_mut().zip(&data.labels[s..s + m]) {
                    *l = f32::from(d);
                }
            }
            test.forward()?;
            // Accuracy is the fraction right in this chunk, exact in f32
            // for a chunk this size.
            let fraction = test.blob("accuracy").expect("a TEST layer").to_vec()?[0];
            correct += (f64::from(fraction) * m as f64).round() as usize;
        }
        Ok(correct as f64 / (end - start).max(1) as f64)
    }

    /// Writes `{prefix}_iter_{iter}.caffemodel` and `.solverstate` into
    /// `dir` (Caffe's snapshot names) and returns their paths.
    ///
    /// ```no_run
    /// # let t = blobflow_mnist::Trainer::new(8, 100, 1)?;
    /// let (model, state) = t.snapshot("out", "lenet")?;
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn snapshot(&self, dir: impl AsRef<Path>, prefix: &str) -> Result<(PathBuf, PathBuf)> {
        let dir = dir.as_ref();
        std::fs::create_dir_all(dir).map_err(|e| BlobError::Io {
            path: dir.display().to_string(),
            source: e,
        })?;
        blob_layers::solver::write_snapshot(&self.net, &self.solver, dir.join(prefix))
    }
}
