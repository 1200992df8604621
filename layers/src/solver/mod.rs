//! Caffe's SGD solver arithmetic (`SGDSolver::ApplyUpdate`), with momentum
//! history that snapshots to and restores from a `.solverstate`.

#[cfg(feature = "cuda")]
mod cuda;

use blob_kernels::cpu;
#[cfg(feature = "cuda")]
pub(crate) use cuda::SOLVER;

use blob_proto::SolverState;
use blob_runtime::{Blob, BlobError};

/// SGD with momentum, L2 weight decay and the `inv` learning-rate policy,
/// computed as Caffe computes it.
///
/// ```
/// use blob_layers::solver::SgdSolver;
/// use blob_runtime::Blob;
/// let w = Blob::<f32>::new(&[2])?;
/// w.mutable_cpu_data()?.fill(1.0);
/// w.mutable_cpu_diff()?.fill(0.5);
/// let mut solver = SgdSolver::lenet();
/// solver.step(&[&w], &[1.0])?;
/// assert_eq!(solver.iter, 1);
/// assert!(w.data_at(&[0]) < 1.0);
/// # Ok::<(), blob_runtime::BlobError>(())
/// ```
#[derive(Debug)]
pub struct SgdSolver {
    /// `base_lr`.
    pub base_lr: f32,
    /// `momentum`.
    pub momentum: f32,
    /// `weight_decay` (L2).
    pub weight_decay: f32,
    /// `gamma` of the `inv` policy.
    pub gamma: f32,
    /// `power` of the `inv` policy.
    pub power: f32,
    /// Iterations done.
    pub iter: usize,
    history: Vec<Blob<f32>>,
}

impl SgdSolver {
    /// Caffe's `examples/mnist/lenet_solver.prototxt`: base_lr 0.01,
    /// momentum 0.9, weight_decay 5e-4, lr_policy inv, gamma 1e-4, power
    /// 0.75.
    ///
    /// ```
    /// assert_eq!(blob_layers::solver::SgdSolver::lenet().learning_rate(), 0.01);
    /// ```
    pub fn lenet() -> Self {
        Self {
            base_lr: 0.01,
            momentum: 0.9,
            weight_decay: 0.0005,
            gamma: 0.0001,
            power: 0.75,
            iter: 0,
            history: Vec::new(),
        }
    }

    /// Caffe's `inv` policy: `base_lr * (1 + gamma * iter)^(-power)`.
    ///
    /// ```
    /// let mut s = blob_layers::solver::SgdSolver::lenet();
    /// s.iter = 10000;
    /// assert!((s.learning_rate() - 0.01 * 2f32.powf(-0.75)).abs() < 1e-9);
    /// ```
    pub fn learning_rate(&self) -> f32 {
        self.base_lr * (1.0 + self.gamma * self.iter as f32).powf(-self.power)
    }

    fn ensure_history(&mut self, params: &[&Blob<f32>]) -> Result<(), BlobError> {
        if self.history.len() != params.len() {
            self.history = params
                .iter()
                .map(|p| {
                    // The history lives where its parameter does.
                    let h = match p.device() {
                        Some(device) => Blob::with_device(p.shape(), device.clone())?,
                        None => Blob::new(p.shape())?,
                    };
                    h.mutable_cpu_data()?;
                    Ok(h)
                })
                .collect::<Result<_, BlobError>>()?;
        }
        for (i, (h, p)) in self.history.iter_mut().zip(params).enumerate() {
            // The history is of the parameters the solver was made or
            // restored for; another net's would be stepped out of bounds.
            if h.shape() != p.shape() {
                return Err(BlobError::InvalidParameter {
                    op: "solver step",
                    detail: format!(
                        "parameter {i} is {}, but its momentum history is {}: a solver steps the parameters it began with",
                        p.shape_string(),
                        h.shape_string()
                    ),
                });
            }
            // A history restored on the host follows its parameter to a device.
            if let (None, Some(device)) = (h.device(), p.device()) {
                h.move_to(device.clone())?;
            }
        }
        Ok(())
    }

    /// One update of every parameter from its diff (Caffe `ApplyUpdate`
    /// then `Net::Update`): `diff += weight_decay * data`, `history =
    /// momentum * history + rate * lr_mult * diff`, `data -= history`.
    ///
    /// ```
    /// # use blob_layers::solver::SgdSolver;
    /// # use blob_runtime::Blob;
    /// let w = Blob::<f32>::new(&[1])?;
    /// w.mutable_cpu_data()?;
    /// let mut s = SgdSolver::lenet();
    /// assert!(s.step(&[&w], &[]).is_err()); // one lr_mult per parameter
    /// s.step(&[&w], &[1.0])?;
    /// // Another parameter of another shape: refused, not stepped.
    /// let other = Blob::<f32>::new(&[3])?;
    /// let err = s.step(&[&other], &[1.0]).unwrap_err();
    /// assert!(err.to_string().contains("parameter 0 is 3 (3), but its momentum history is 1 (1)"), "{err}");
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn step(&mut self, params: &[&Blob<f32>], lr_mults: &[f32]) -> Result<(), BlobError> {
        if lr_mults.len() != params.len() {
            return Err(BlobError::CountMismatch {
                op: "solver step",
                what: "lr_mults".into(),
                got: lr_mults.len(),
                want: params.len(),
            });
        }
        self.ensure_history(params)?;
        let rate = self.learning_rate();
        for ((p, h), &mult) in params.iter().zip(&self.history).zip(lr_mults) {
            #[cfg(feature = "cuda")]
            if let Some(gpu) = crate::gpu::gpu_of_all(&[*p, h]) {
                let rates = cuda::SgdRates {
                    decay: self.weight_decay,
                    rate: rate * mult,
                    momentum: self.momentum,
                };
                cuda::step(&gpu, &rates, p, h)?;
                continue;
            }
            {
                let data = p.cpu_data()?;
                let mut diff = p.mutable_cpu_diff()?;
                cpu::axpy(self.weight_decay, &data, &mut diff);
                let mut hist = h.mutable_cpu_data()?;
                cpu::axpby(rate * mult, &diff, self.momentum, &mut hist);
                cpu::copy(&hist, &mut diff);
            }
            p.update()?;
        }
        self.iter += 1;
        Ok(())
    }

    /// The `.solverstate` of this solver (Caffe
    /// `SnapshotSolverStateToBinaryProto`).
    ///
    /// ```
    /// let s = blob_layers::solver::SgdSolver::lenet();
    /// let st = s.state("lenet_iter_0.caffemodel")?;
    /// assert_eq!(st.iter, Some(0));
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn state(&self, learned_net: &str) -> Result<SolverState, BlobError> {
        Ok(SolverState {
            iter: Some(self.iter as i32),
            learned_net: Some(learned_net.to_string()),
            history: self
                .history
                .iter()
                .map(|h| h.to_proto(false))
                .collect::<Result<_, _>>()?,
            current_step: Some(0),
        })
    }

    /// Continues from a `.solverstate` (Caffe `RestoreSolverStateFromBinaryProto`):
    /// iteration and momentum history, checked against the parameters.
    ///
    /// ```
    /// # use blob_layers::solver::SgdSolver;
    /// # use blob_runtime::Blob;
    /// let w = Blob::<f32>::new(&[2])?;
    /// let mut s = SgdSolver::lenet();
    /// let st = blob_proto::SolverState { iter: Some(5), ..Default::default() };
    /// assert!(s.restore(&st, &[&w]).is_err()); // no history for w
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn restore(&mut self, state: &SolverState, params: &[&Blob<f32>]) -> Result<(), BlobError> {
        if state.history.len() != params.len() {
            return Err(BlobError::CountMismatch {
                op: "restore solver state",
                what: "history blobs in the file".into(),
                got: state.history.len(),
                want: params.len(),
            });
        }
        let mut history = Vec::with_capacity(params.len());
        for (proto, p) in state.history.iter().zip(params) {
            let mut h = Blob::new(p.shape())?;
            h.load_proto(proto, false)?;
            history.push(h);
        }
        self.history = history;
        self.iter = state.iter.unwrap_or(0).max(0) as usize;
        Ok(())
    }
}
