//! Caffe's learning-rate policies (`lr_policy` and the fields each reads),
//! with `SGDSolver::GetLearningRate`'s arithmetic.

use blob_runtime::{BlobError, MathElement};

/// How the learning rate follows the iteration: Caffe's `lr_policy` with
/// the solver fields that policy reads. `rate` below is the rate of
/// iteration `iter`, `base_lr` the solver's.
///
/// ```
/// use blob_layers::solver::{LrPolicy, SgdSolver};
/// // Caffe's `lr_policy: "step" gamma: 0.1 stepsize: 100`.
/// let mut s: SgdSolver = SgdSolver::new(0.01, LrPolicy::Step { gamma: 0.1, stepsize: 100 });
/// s.iter = 250;
/// // Caffe computes a float raised to an int in double.
/// assert_eq!(s.learning_rate()?, (0.01f32 as f64 * (0.1f32 as f64).powi(2)) as f32);
/// // A stepsize of 0 is refused, as Caffe's CHECK refuses it.
/// s.lr_policy = LrPolicy::Step { gamma: 0.1, stepsize: 0 };
/// assert!(s.learning_rate().unwrap_err().to_string().contains("stepsize"));
/// # Ok::<(), blob_runtime::BlobError>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub enum LrPolicy {
    /// `fixed`: `rate = base_lr`.
    Fixed,
    /// `step`: `rate = base_lr * gamma ^ floor(iter / stepsize)`.
    Step {
        /// `gamma`, at least 0.
        gamma: f32,
        /// `stepsize`, at least 1.
        stepsize: usize,
    },
    /// `exp`: `rate = base_lr * gamma ^ iter`.
    Exp {
        /// `gamma`, at least 0.
        gamma: f32,
    },
    /// `inv`: `rate = base_lr * (1 + gamma * iter) ^ (-power)`.
    Inv {
        /// `gamma`, at least 0.
        gamma: f32,
        /// `power`.
        power: f32,
    },
    /// `multistep`: `rate = base_lr * gamma ^ current_step`, where
    /// `current_step` moves on by one at each step whose `iter` has
    /// reached `stepvalue[current_step]`. As in Caffe it moves at most one
    /// value a step, and it is saved in and restored from a
    /// `.solverstate`.
    MultiStep {
        /// `gamma`, at least 0.
        gamma: f32,
        /// `stepvalue`s, in increasing order.
        stepvalues: Vec<usize>,
    },
    /// `poly`: `rate = base_lr * (1 - iter / max_iter) ^ power`.
    Poly {
        /// `power`.
        power: f32,
        /// `max_iter`, at least 1.
        max_iter: usize,
    },
    /// `sigmoid`: `rate = base_lr / (1 + exp(-gamma * (iter - stepsize)))`.
    Sigmoid {
        /// `gamma`, at least 0.
        gamma: f32,
        /// `stepsize`, at least 1.
        stepsize: usize,
    },
    /// `multifixed` (the YOLO fork eric612/MobileNet-YOLO's policy):
    /// `rate = stagelr[s]` for the first stage `s` whose `stageiter` is
    /// at least `iter`, the last stage's rate past them all; `base_lr`
    /// is not read. Its solvers warm up this way (1e-6, 1e-5, ... over
    /// the first few hundred iterations).
    MultiFixed {
        /// `(stageiter, stagelr)` pairs, at least one, in the order given.
        stages: Vec<(usize, f32)>,
    },
}

const OP: &str = "learning rate";

fn invalid(detail: String) -> BlobError {
    BlobError::InvalidParameter { op: OP, detail }
}

impl LrPolicy {
    /// Caffe's name of the policy, as `lr_policy` spells it.
    ///
    /// ```
    /// assert_eq!(blob_layers::solver::LrPolicy::Fixed.name(), "fixed");
    /// ```
    pub fn name(&self) -> &'static str {
        match self {
            Self::Fixed => "fixed",
            Self::Step { .. } => "step",
            Self::Exp { .. } => "exp",
            Self::Inv { .. } => "inv",
            Self::MultiStep { .. } => "multistep",
            Self::Poly { .. } => "poly",
            Self::Sigmoid { .. } => "sigmoid",
            Self::MultiFixed { .. } => "multifixed",
        }
    }

    /// Refuses what Caffe's `CHECK`s refuse (a negative `gamma`, a
    /// `stepsize` of 0) and what would make every rate meaningless: a
    /// value that is not finite, a `max_iter` of 0, `stepvalue`s out of
    /// order.
    pub(crate) fn check(&self) -> Result<(), BlobError> {
        let policy = self.name();
        let gamma = match self {
            Self::Fixed => None,
            Self::Step { gamma, .. }
            | Self::Exp { gamma }
            | Self::Inv { gamma, .. }
            | Self::MultiStep { gamma, .. }
            | Self::Sigmoid { gamma, .. } => Some(*gamma),
            Self::Poly { .. } | Self::MultiFixed { .. } => None,
        };
        if let Some(gamma) = gamma
            && !(gamma >= 0.0 && gamma.is_finite())
        {
            return Err(invalid(format!(
                "lr_policy {policy} needs a finite gamma of at least 0, got {gamma}"
            )));
        }
        if let Self::Inv { power, .. } | Self::Poly { power, .. } = self
            && !power.is_finite()
        {
            return Err(invalid(format!(
                "lr_policy {policy} needs a finite power, got {power}"
            )));
        }
        match self {
            Self::Step { stepsize: 0, .. } | Self::Sigmoid { stepsize: 0, .. } => Err(invalid(
                format!("lr_policy {policy} needs a stepsize of at least 1, got 0"),
            )),
            Self::Poly { max_iter: 0, .. } => Err(invalid(
                "lr_policy poly needs a max_iter of at least 1, got 0".into(),
            )),
            Self::MultiStep { stepvalues, .. } => {
                match stepvalues.windows(2).position(|w| w[1] < w[0]) {
                    Some(i) => Err(invalid(format!(
                        "lr_policy multistep needs its stepvalues in increasing order, but stepvalue {} ({}) is below stepvalue {} ({})",
                        i + 1,
                        stepvalues[i + 1],
                        i,
                        stepvalues[i]
                    ))),
                    None => Ok(()),
                }
            }
            Self::MultiFixed { stages } if stages.is_empty() => Err(invalid(
                "lr_policy multifixed needs at least one stagelr and stageiter".into(),
            )),
            Self::MultiFixed { stages } => match stages.iter().find(|(_, lr)| !lr.is_finite()) {
                Some((_, lr)) => Err(invalid(format!(
                    "lr_policy multifixed needs finite stagelr values, got {lr}"
                ))),
                None => Ok(()),
            },
            _ => Ok(()),
        }
    }

    /// Caffe's `current_step_` after computing the rate of iteration
    /// `iter`, from its value `current_step` before: `step` recomputes it,
    /// `multistep` moves it on by at most one, the rest leave it.
    pub(crate) fn next_step(&self, iter: usize, current_step: usize) -> usize {
        match self {
            Self::Step { stepsize, .. } => iter / stepsize,
            Self::MultiStep { stepvalues, .. } => match stepvalues.get(current_step) {
                Some(&value) if iter >= value => current_step + 1,
                _ => current_step,
            },
            _ => current_step,
        }
    }

    /// The rate of iteration `iter` with Caffe's `current_step_` at
    /// `current_step` (already moved on by [`Self::next_step`]), computed
    /// in Caffe's types for a `Dtype` of `T`: the solver's fields are
    /// `float`s, a `float` raised to an `int` goes through `double`, and
    /// the rest is `Dtype` arithmetic.
    pub(crate) fn rate<T: MathElement>(&self, base_lr: f32, iter: usize, current_step: usize) -> T {
        let dtype = |v: f32| T::from_f64(f64::from(v));
        let powi = |gamma: f32, n: usize| {
            T::from_f64(f64::from(base_lr) * f64::from(gamma).powf(n as f64))
        };
        let iter_t = T::from_f64(iter as f64);
        match *self {
            Self::Fixed => dtype(base_lr),
            Self::Step { gamma, .. } | Self::MultiStep { gamma, .. } => powi(gamma, current_step),
            Self::Exp { gamma } => powi(gamma, iter),
            // gamma * iter is float * int: a float.
            Self::Inv { gamma, power } => {
                dtype(base_lr) * (T::ONE + dtype(gamma * iter as f32)).powf(-dtype(power))
            }
            Self::Poly { power, max_iter } => {
                dtype(base_lr) * (T::ONE - iter_t / T::from_f64(max_iter as f64)).powf(dtype(power))
            }
            Self::Sigmoid { gamma, stepsize } => {
                let shifted = iter_t - T::from_f64(stepsize as f64);
                dtype(base_lr) * (T::ONE / (T::ONE + (-dtype(gamma) * shifted).exp()))
            }
            Self::MultiFixed { ref stages } => {
                let stage = stages
                    .iter()
                    .find(|&&(until, _)| iter <= until)
                    .or(stages.last());
                dtype(stage.map_or(base_lr, |&(_, lr)| lr))
            }
        }
    }
}
