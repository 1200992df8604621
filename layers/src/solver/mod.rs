//! Caffe's SGD solvers (`SGDSolver` and its `NesterovSolver`,
//! `AdaGradSolver`, `RMSPropSolver`, `AdaDeltaSolver`, `AdamSolver`):
//! their learning-rate policies, per-parameter multipliers, weight decay
//! (L2 or L1), gradient clipping and update rules, with a history that
//! snapshots to and restores from a `.solverstate`.

#[cfg(feature = "cuda")]
mod cuda;
mod policy;
mod prototxt;
mod rules;
mod snapshot;
mod solve;

pub use crate::detection_evaluate::{ApVersion, average_precision};
use blob_kernels::cpu;
#[cfg(feature = "cuda")]
pub(crate) use cuda::SOLVER;
pub use policy::LrPolicy;
pub use prototxt::{Evaluation, SolverFile};
pub use rules::SolverType;
use rules::{Scratch, adam_correction, dtype, sgd_in_one_pass, update_value};
pub use snapshot::{
    NewestSnapshot, model_of_state, newest_snapshot, snapshot_paths, write_snapshot,
};
pub use solve::{ClassPrecision, Feed, NetOutput, SolveEvent, SolverAction, solve, solve_until};

/// Caffe's `UpgradeSolverAsNeeded`: a `SolverParameter` whose solver is
/// named by the old `solver_type` enum gets today's `type` string
/// (`NESTEROV` becomes `"Nesterov"`, ...). Both given is an error, as in
/// Caffe; `Ok(None)` says the file needs no upgrade.
///
/// ```
/// use blob_proto::{ParamMessage, TextMessage, schema};
/// let old = TextMessage::parse("base_lr: 0.01 solver_type: NESTEROV")?;
/// let file = ParamMessage::from_text(&schema::SOLVER_PARAMETER, &old)?;
/// let new = blob_layers::solver::upgrade_solver(&file)?.unwrap();
/// assert_eq!(new.to_text(), "base_lr: 0.01\ntype: \"Nesterov\"\n");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn upgrade_solver(
    param: &blob_proto::ParamMessage,
) -> Result<Option<blob_proto::ParamMessage>, BlobError> {
    if !param.has("solver_type") {
        return Ok(None);
    }
    if param.has("type") {
        return Err(BlobError::InvalidParameter {
            op: "upgrade a solver",
            detail: "Failed to upgrade solver: old solver_type field (enum) and new type field \
                     (string) cannot be both specified in solver proto text."
                .into(),
        });
    }
    let name = match param.enum_name("solver_type") {
        "SGD" => "SGD",
        "NESTEROV" => "Nesterov",
        "ADAGRAD" => "AdaGrad",
        "RMSPROP" => "RMSProp",
        "ADADELTA" => "AdaDelta",
        _ => "Adam",
    };
    let mut upgraded = param.clone();
    upgraded.clear("solver_type");
    upgraded.set("type", blob_proto::ParamValue::Str(name.into()));
    Ok(Some(upgraded))
}

use blob_proto::SolverState;
use blob_runtime::{Blob, BlobError, Head, MathElement};

/// What a net says of one learnable parameter (the part of Caffe's
/// `ParamSpec` a solver reads): its multipliers of the learning rate and
/// of the weight decay. Caffe's default is 1 for both.
///
/// ```
/// use blob_layers::solver::ParamSpec;
/// // A bias as many Caffe nets declare it: twice the rate, no decay.
/// let bias = ParamSpec { lr_mult: 2.0, decay_mult: 0.0 };
/// assert_eq!(ParamSpec::default(), ParamSpec { lr_mult: 1.0, decay_mult: 1.0 });
/// # let _ = bias;
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ParamSpec {
    /// `lr_mult`: this parameter's learning rate is the solver's times it.
    pub lr_mult: f32,
    /// `decay_mult`: this parameter's weight decay is the solver's times it.
    pub decay_mult: f32,
}

impl Default for ParamSpec {
    fn default() -> Self {
        Self {
            lr_mult: 1.0,
            decay_mult: 1.0,
        }
    }
}

/// Caffe's `regularization_type`: what the weight decay adds to a
/// parameter's gradient.
///
/// ```
/// assert_eq!(blob_layers::solver::Regularization::default(), blob_layers::solver::Regularization::L2);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Regularization {
    /// `"L2"`: `diff += decay * data`.
    #[default]
    L2,
    /// `"L1"`: `diff += decay * sign(data)`.
    L1,
}

/// Caffe's SGD solvers (`SGDSolver` and, by [`SolverType`], its
/// `NesterovSolver`, `AdaGradSolver`, `RMSPropSolver`, `AdaDeltaSolver`
/// and `AdamSolver`), computed as Caffe computes them: the learning rate
/// of [`LrPolicy`], scaled per parameter by [`ParamSpec`]; gradient
/// clipping; weight decay; the update of the type; then `Update`. The
/// parameters are stepped where they live, CPU or GPU.
///
/// The element type is `f32` unless named: `SgdSolver<f64>` steps `f64`
/// parameters in Caffe's `SGDSolver<double>` arithmetic (on the CPU; the
/// GPU kernels are `f32`). The hyper-parameters are `f32` either way, as
/// Caffe's `SolverParameter` holds them.
///
/// ```
/// use blob_layers::solver::{LrPolicy, ParamSpec, SgdSolver};
/// use blob_runtime::Blob;
/// let w = Blob::<f32>::new(&[2])?;
/// w.mutable_cpu_data()?.fill(1.0);
/// w.mutable_cpu_diff()?.fill(0.5);
/// // Caffe's cifar10_quick_solver: base_lr 0.001, fixed, momentum 0.9, weight_decay 0.004.
/// let mut solver = SgdSolver::new(0.001, LrPolicy::Fixed)
///     .with_momentum(0.9)
///     .with_weight_decay(0.004);
/// solver.step(&[&w], &[ParamSpec::default()])?;
/// assert_eq!(solver.iter, 1);
/// assert!(w.data_at(&[0]) < 1.0);
/// # Ok::<(), blob_runtime::BlobError>(())
/// ```
#[derive(Debug)]
pub struct SgdSolver<T: MathElement = f32> {
    /// `type`: SGD, Nesterov, AdaGrad, RMSProp, AdaDelta or Adam.
    pub solver_type: SolverType,
    /// `base_lr`.
    pub base_lr: f32,
    /// `lr_policy` with the fields it reads.
    pub lr_policy: LrPolicy,
    /// `momentum`.
    pub momentum: f32,
    /// `weight_decay`.
    pub weight_decay: f32,
    /// `regularization_type`.
    pub regularization: Regularization,
    /// `clip_gradients`: when the L2 norm of all the parameters' diffs
    /// exceeds it, they are scaled down to it. `None` (Caffe's -1) clips
    /// nothing.
    pub clip_gradients: Option<f32>,
    /// `iter_size`: how many forward and backward passes accumulate into
    /// the diffs before a step; the step divides them by it (Caffe's
    /// `Normalize`). At least 1.
    pub iter_size: usize,
    /// Iterations done.
    pub iter: usize,
    /// Caffe's `current_step_`: how many steps of the `step` or
    /// `multistep` policy the rate has taken.
    pub current_step: usize,
    /// Caffe's `history_`: one blob per parameter (AdaDelta and Adam:
    /// one per parameter, then a second per parameter).
    history: Vec<Blob<T>>,
    scratch: Scratch<T>,
}

const OP: &str = "solver step";

fn invalid(detail: String) -> BlobError {
    BlobError::InvalidParameter { op: OP, detail }
}

fn check_finite(what: &str, value: f32) -> Result<(), BlobError> {
    if value.is_finite() {
        return Ok(());
    }
    Err(invalid(format!("{what} must be finite, got {value}")))
}

impl SgdSolver<f32> {
    /// Caffe's `examples/mnist/lenet_solver.prototxt`: base_lr 0.01,
    /// momentum 0.9, weight_decay 5e-4, lr_policy inv, gamma 1e-4, power
    /// 0.75.
    ///
    /// ```
    /// assert_eq!(blob_layers::solver::SgdSolver::lenet().learning_rate()?, 0.01);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn lenet() -> Self {
        Self::new(
            0.01,
            LrPolicy::Inv {
                gamma: 0.0001,
                power: 0.75,
            },
        )
        .with_momentum(0.9)
        .with_weight_decay(0.0005)
    }

    /// Caffe's `examples/mnist/lenet_solver_adam.prototxt`: type Adam,
    /// base_lr 0.001, momentum 0.9, momentum2 0.999, lr_policy fixed, no
    /// weight decay.
    ///
    /// ```
    /// let adam = blob_layers::solver::SgdSolver::lenet_adam();
    /// assert_eq!((adam.solver_type.name(), adam.learning_rate()?), ("Adam", 0.001));
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn lenet_adam() -> Self {
        Self::new(0.001, LrPolicy::Fixed)
            .with_type(SolverType::ADAM)
            .with_momentum(0.9)
    }
}

impl<T: MathElement> SgdSolver<T> {
    /// Caffe's solver with its defaults beside `base_lr` and
    /// `lr_policy`: type SGD, no momentum, no weight decay (L2 when set),
    /// no clipping.
    ///
    /// ```
    /// use blob_layers::solver::{LrPolicy, SgdSolver};
    /// let s: SgdSolver = SgdSolver::new(0.1, LrPolicy::Fixed); // f32 by default
    /// assert_eq!((s.momentum, s.weight_decay, s.clip_gradients), (0.0, 0.0, None));
    /// // For a net of f64 blobs:
    /// let double = SgdSolver::<f64>::new(0.1, LrPolicy::Fixed);
    /// assert_eq!(double.learning_rate()?, 0.1f32 as f64);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn new(base_lr: f32, lr_policy: LrPolicy) -> Self {
        Self {
            solver_type: SolverType::Sgd,
            base_lr,
            lr_policy,
            momentum: 0.0,
            weight_decay: 0.0,
            regularization: Regularization::L2,
            clip_gradients: None,
            iter_size: 1,
            iter: 0,
            current_step: 0,
            history: Vec::new(),
            scratch: Scratch::default(),
        }
    }

    /// Sets the solver `type`.
    ///
    /// ```
    /// # use blob_layers::solver::{LrPolicy, SgdSolver, SolverType};
    /// let s: SgdSolver = SgdSolver::new(0.1, LrPolicy::Fixed).with_type(SolverType::Nesterov);
    /// assert_eq!(s.solver_type, SolverType::Nesterov);
    /// ```
    pub fn with_type(mut self, solver_type: SolverType) -> Self {
        self.solver_type = solver_type;
        self
    }

    /// Sets `momentum` (Adam's beta1).
    ///
    /// ```
    /// # use blob_layers::solver::{LrPolicy, SgdSolver};
    /// assert_eq!(SgdSolver::<f32>::new(0.1, LrPolicy::Fixed).with_momentum(0.9).momentum, 0.9);
    /// ```
    pub fn with_momentum(mut self, momentum: f32) -> Self {
        self.momentum = momentum;
        self
    }

    /// Sets `weight_decay`.
    ///
    /// ```
    /// # use blob_layers::solver::{LrPolicy, SgdSolver};
    /// assert_eq!(SgdSolver::<f32>::new(0.1, LrPolicy::Fixed).with_weight_decay(5e-4).weight_decay, 5e-4);
    /// ```
    pub fn with_weight_decay(mut self, weight_decay: f32) -> Self {
        self.weight_decay = weight_decay;
        self
    }

    /// Sets `regularization_type`.
    ///
    /// ```
    /// # use blob_layers::solver::{LrPolicy, Regularization, SgdSolver};
    /// let s: SgdSolver = SgdSolver::new(0.1, LrPolicy::Fixed).with_regularization(Regularization::L1);
    /// assert_eq!(s.regularization, Regularization::L1);
    /// ```
    pub fn with_regularization(mut self, regularization: Regularization) -> Self {
        self.regularization = regularization;
        self
    }

    /// Sets `clip_gradients`.
    ///
    /// ```
    /// # use blob_layers::solver::{LrPolicy, SgdSolver};
    /// assert_eq!(SgdSolver::<f32>::new(0.1, LrPolicy::Fixed).with_clip_gradients(10.0).clip_gradients, Some(10.0));
    /// ```
    pub fn with_clip_gradients(mut self, clip_gradients: f32) -> Self {
        self.clip_gradients = Some(clip_gradients);
        self
    }

    /// Sets `iter_size`.
    ///
    /// ```
    /// # use blob_layers::solver::{LrPolicy, SgdSolver};
    /// assert_eq!(SgdSolver::<f32>::new(0.1, LrPolicy::Fixed).with_iter_size(4).iter_size, 4);
    /// ```
    pub fn with_iter_size(mut self, iter_size: usize) -> Self {
        self.iter_size = iter_size;
        self
    }

    /// The learning rate the next step takes (Caffe
    /// `SGDSolver::GetLearningRate`), before each parameter's `lr_mult`.
    /// An `lr_policy` Caffe's checks refuse is an error naming the field.
    ///
    /// ```
    /// let mut s = blob_layers::solver::SgdSolver::lenet();
    /// s.iter = 10000;
    /// assert!((s.learning_rate()? - 0.01 * 2f32.powf(-0.75)).abs() < 1e-9);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn learning_rate(&self) -> Result<T, BlobError> {
        self.lr_policy.check()?;
        check_finite("base_lr", self.base_lr)?;
        let step = self.lr_policy.next_step(self.iter, self.current_step);
        Ok(self.lr_policy.rate(self.base_lr, self.iter, step))
    }

    /// Refuses hyper-parameters that would write non-finite values into
    /// every parameter.
    fn check(&self, specs: &[ParamSpec]) -> Result<(), BlobError> {
        check_finite("momentum", self.momentum)?;
        check_finite("weight_decay", self.weight_decay)?;
        let name = self.solver_type.name();
        // With no delta a gradient of 0 divides 0 by 0.
        if let Some(delta) = self.solver_type.delta()
            && !(delta > 0.0 && delta.is_finite())
        {
            return Err(invalid(format!(
                "{name}'s delta must be finite and above 0, got {delta}"
            )));
        }
        match self.solver_type {
            SolverType::AdaGrad { .. } | SolverType::RmsProp { .. } if self.momentum != 0.0 => {
                return Err(invalid(format!(
                    "momentum cannot be used with {name}, got {}",
                    self.momentum
                )));
            }
            SolverType::RmsProp { rms_decay, .. } if !(0.0..1.0).contains(&rms_decay) => {
                return Err(invalid(format!(
                    "RMSProp's rms_decay must be at least 0 and below 1, got {rms_decay}"
                )));
            }
            SolverType::Adam { momentum2, .. } => check_finite("momentum2", momentum2)?,
            _ => {}
        }
        if self.iter_size == 0 {
            return Err(invalid("iter_size must be at least 1, got 0".into()));
        }
        if let Some(clip) = self.clip_gradients
            && !(clip >= 0.0 && clip.is_finite())
        {
            return Err(invalid(format!(
                "clip_gradients must be finite and at least 0, got {clip}"
            )));
        }
        for (i, spec) in specs.iter().enumerate() {
            check_finite(&format!("lr_mult of parameter {i}"), spec.lr_mult)?;
            check_finite(&format!("decay_mult of parameter {i}"), spec.decay_mult)?;
        }
        Ok(())
    }

    /// The history blobs (Caffe's `history_`) for `params`, made on the
    /// first step where each parameter lives, checked on the later ones.
    fn ensure_history(&mut self, params: &[&Blob<T>]) -> Result<(), BlobError> {
        let want = params.len() * self.solver_type.histories();
        if self.history.is_empty() {
            self.history = params
                .iter()
                .cycle()
                .take(want)
                .map(|p| {
                    let h = match p.device() {
                        Some(device) => Blob::with_device(p.shape(), device.clone())?,
                        None => Blob::new(p.shape())?,
                    };
                    h.mutable_cpu_data()?;
                    Ok(h)
                })
                .collect::<Result<_, BlobError>>()?;
        }
        // The history is of the parameters the solver was made or
        // restored for; another net's would be stepped out of bounds.
        if self.history.len() != want {
            return Err(invalid(format!(
                "{} parameters need {want} history blobs for {}, but the solver holds {}: a solver steps the parameters it began with",
                params.len(),
                self.solver_type.name(),
                self.history.len()
            )));
        }
        for (k, h) in self.history.iter_mut().enumerate() {
            let (i, p) = (k % params.len(), params[k % params.len()]);
            if h.shape() != p.shape() {
                return Err(invalid(format!(
                    "parameter {i} is {}, but its history is {}: a solver steps the parameters it began with",
                    p.shape_string(),
                    h.shape_string()
                )));
            }
            // A history restored on the host follows its parameter to a device.
            if let (None, Some(device)) = (h.device(), p.device()) {
                h.move_to(device.clone())?;
            }
        }
        Ok(())
    }

    /// Caffe's `ClipGradients`: when the L2 norm of every parameter's diff
    /// together exceeds `clip_gradients`, all diffs are scaled down to it.
    fn clip(&self, params: &[&Blob<T>]) -> Result<(), BlobError> {
        let Some(clip) = self.clip_gradients else {
            return Ok(());
        };
        let clip = dtype::<T>(clip);
        let mut sumsq = T::ZERO;
        for p in params {
            sumsq += p.sumsq_diff()?;
        }
        let norm = sumsq.sqrt();
        if norm > clip {
            let factor = clip / norm;
            for p in params {
                p.scale_diff(factor)?;
            }
        }
        Ok(())
    }

    /// One update of every parameter from its diff (Caffe `ApplyUpdate`
    /// then `Net::Update`): the rate of [`Self::learning_rate`]; the
    /// diffs clipped; then for each parameter its diff divided by
    /// `iter_size`, the weight decay added (`weight_decay` times its
    /// `decay_mult`, times `data` for L2 or `sign(data)` for L1), the
    /// update of [`SolverType`] at the rate times its `lr_mult` written
    /// into the diff, and `data -= diff`.
    ///
    /// ```
    /// # use blob_layers::solver::{ParamSpec, SgdSolver};
    /// # use blob_runtime::Blob;
    /// let w = Blob::<f32>::new(&[1])?;
    /// w.mutable_cpu_data()?;
    /// let mut s = SgdSolver::lenet();
    /// assert!(s.step(&[&w], &[]).is_err()); // one ParamSpec per parameter
    /// s.step(&[&w], &[ParamSpec::default()])?;
    /// // Another parameter of another shape: refused, not stepped.
    /// let other = Blob::<f32>::new(&[3])?;
    /// let err = s.step(&[&other], &[ParamSpec::default()]).unwrap_err();
    /// assert!(err.to_string().contains("parameter 0 is 3 (3), but its history is 1 (1)"), "{err}");
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn step(&mut self, params: &[&Blob<T>], specs: &[ParamSpec]) -> Result<(), BlobError> {
        (crate::per_element::compiled::<T>().solver_step)(self, params, specs)
    }

    pub(crate) fn step_here(
        &mut self,
        params: &[&Blob<T>],
        specs: &[ParamSpec],
    ) -> Result<(), BlobError> {
        if specs.len() != params.len() {
            return Err(BlobError::CountMismatch {
                op: OP,
                what: "ParamSpecs".into(),
                got: specs.len(),
                want: params.len(),
            });
        }
        self.check(specs)?;
        let rate = self.learning_rate()?;
        self.ensure_history(params)?;
        self.clip(params)?;
        let momentum = dtype::<T>(self.momentum);
        let correction = match self.solver_type {
            SolverType::Adam { momentum2, .. } => {
                adam_correction(momentum, dtype(momentum2), self.iter + 1)
            }
            _ => T::ONE,
        };
        for (i, (p, spec)) in params.iter().zip(specs).enumerate() {
            let history: Vec<&Blob<T>> = self.history[i..].iter().step_by(params.len()).collect();
            // Caffe's Dtype arithmetic: weight_decay * decay_mult, then
            // rate * lr_mult (* Adam's correction).
            let decay = dtype::<T>(self.weight_decay) * dtype(spec.decay_mult);
            let rate = rate * dtype(spec.lr_mult) * correction;
            if self.iter_size > 1 {
                p.scale_diff(T::ONE / T::from_f64(self.iter_size as f64))?;
            }
            #[cfg(feature = "cuda")]
            {
                let step = cuda::GpuStep {
                    decay: decay.to_f64() as f32,
                    l1: self.regularization == Regularization::L1,
                    rate: rate.to_f64() as f32,
                    rule: cuda::GpuRule::of(self.solver_type, self.momentum),
                };
                if let Some(done) = cuda::step_on_gpu(&step, p, &history) {
                    done?;
                    continue;
                }
            }
            if self.solver_type == SolverType::Sgd && p.data_head() == Head::AtCpu {
                let mut data = p.mutable_cpu_data()?;
                let mut diff = p.mutable_cpu_diff()?;
                let mut history = history[0].mutable_cpu_data()?;
                let l1 = self.regularization == Regularization::L1;
                sgd_in_one_pass(
                    (decay, l1),
                    momentum,
                    rate,
                    &mut data,
                    &mut diff,
                    &mut history,
                );
                continue;
            }
            {
                let data = p.cpu_data()?;
                let mut diff = p.mutable_cpu_diff()?;
                // Caffe regularizes only where the decay is not 0.
                if decay != T::ZERO {
                    match self.regularization {
                        Regularization::L2 => cpu::axpy(decay, &data, &mut diff),
                        Regularization::L1 => {
                            let (sign, _) = self.scratch.two(data.len());
                            cpu::sign(&data, sign);
                            cpu::axpy(decay, sign, &mut diff);
                        }
                    }
                }
                update_value(
                    self.solver_type,
                    momentum,
                    rate,
                    &history,
                    &mut diff,
                    &mut self.scratch,
                )?;
            }
            p.update()?;
        }
        self.current_step = self.lr_policy.next_step(self.iter, self.current_step);
        self.iter += 1;
        Ok(())
    }

    /// The `.solverstate` of this solver (Caffe
    /// `SnapshotSolverStateToBinaryProto`): iteration, `current_step` and
    /// history (AdaDelta's and Adam's: two blobs per parameter).
    ///
    /// ```
    /// let s = blob_layers::solver::SgdSolver::lenet();
    /// let st = s.state("lenet_iter_0.caffemodel")?;
    /// assert_eq!((st.iter, st.current_step), (Some(0), Some(0)));
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn state(&self, learned_net: &str) -> Result<SolverState, BlobError> {
        let int = |what: &str, value: usize| {
            i32::try_from(value).map_err(|_| {
                invalid(format!(
                    "{what} {value} does not fit the .solverstate's int32 field"
                ))
            })
        };
        Ok(SolverState {
            iter: Some(int("iter", self.iter)?),
            learned_net: Some(learned_net.to_string()),
            history: self
                .history
                .iter()
                .map(|h| h.to_proto(false))
                .collect::<Result<_, _>>()?,
            current_step: Some(int("current_step", self.current_step)?),
        })
    }

    /// Continues from a `.solverstate` (Caffe `RestoreSolverStateFromBinaryProto`):
    /// iteration, `current_step` and history (AdaDelta's and Adam's: two
    /// blobs per parameter), checked against the parameters. The hyper-parameters are the solver's own, as in
    /// Caffe, where they come from the solver prototxt.
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
    pub fn restore(&mut self, state: &SolverState, params: &[&Blob<T>]) -> Result<(), BlobError> {
        let want = params.len() * self.solver_type.histories();
        if state.history.len() != want {
            return Err(BlobError::CountMismatch {
                op: "restore solver state",
                what: format!(
                    "history blobs in the file ({} per parameter for {})",
                    self.solver_type.histories(),
                    self.solver_type.name()
                ),
                got: state.history.len(),
                want,
            });
        }
        let count = |what: &str, value: Option<i32>| {
            usize::try_from(value.unwrap_or(0)).map_err(|_| BlobError::InvalidParameter {
                op: "restore solver state",
                detail: format!("{what} is {}, below 0", value.unwrap_or(0)),
            })
        };
        let iter = count("iter", state.iter)?;
        let current_step = count("current_step", state.current_step)?;
        let mut history = Vec::with_capacity(params.len());
        for (proto, p) in state.history.iter().zip(params.iter().cycle()) {
            let mut h = Blob::new(p.shape())?;
            h.load_proto(proto, false)?;
            history.push(h);
        }
        self.history = history;
        self.iter = iter;
        self.current_step = current_step;
        Ok(())
    }
}
