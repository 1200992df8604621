//! Caffe's solver types and their `ComputeUpdateValue` on the CPU: how a
//! step turns a parameter's gradient into its update.

use blob_kernels::cpu;
use blob_runtime::{Blob, BlobError, MathElement};

/// Caffe's solver `type`: how a step turns each parameter's gradient
/// (weight decay added) into its update. Every type takes the same
/// learning-rate policies, multipliers, weight decay and clipping: in
/// Caffe they are all `SGDSolver`s, differing in `ComputeUpdateValue`.
///
/// ```
/// use blob_layers::solver::{LrPolicy, SgdSolver, SolverType};
/// // Caffe's lenet_solver_adam.prototxt: base_lr 0.001, momentum 0.9,
/// // momentum2 0.999, lr_policy fixed.
/// let adam: SgdSolver = SgdSolver::new(0.001, LrPolicy::Fixed)
///     .with_type(SolverType::ADAM)
///     .with_momentum(0.9);
/// assert_eq!(adam.solver_type.name(), "Adam");
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum SolverType {
    /// `"SGD"`: `history = momentum * history + rate * diff`; the update
    /// is the history.
    #[default]
    Sgd,
    /// `"Nesterov"`: the history as SGD's; the update steps back from the
    /// previous history and over the new one, `(1 + momentum) * history -
    /// momentum * previous`.
    Nesterov,
    /// `"AdaGrad"`: `history += diff^2`; the update is `rate * diff /
    /// (sqrt(history) + delta)`. Takes no momentum.
    AdaGrad {
        /// `delta`, Caffe's default 1e-8; above 0.
        delta: f32,
    },
    /// `"RMSProp"`: `history = rms_decay * history + (1 - rms_decay) *
    /// diff^2`; the update is `rate * diff / (sqrt(history) + delta)`.
    /// Takes no momentum.
    RmsProp {
        /// `rms_decay`, Caffe's default 0.99; in `[0, 1)`.
        rms_decay: f32,
        /// `delta`, Caffe's default 1e-8; above 0.
        delta: f32,
    },
    /// `"AdaDelta"`: averages of the squared gradients `g2 = momentum *
    /// g2 + (1 - momentum) * diff^2` and of the squared steps; the step
    /// is `diff * sqrt((u2 + delta) / (g2 + delta))`, then `u2 =
    /// momentum * u2 + (1 - momentum) * step^2`, and the update is
    /// `rate * step`.
    AdaDelta {
        /// `delta`, Caffe's default 1e-8; above 0.
        delta: f32,
    },
    /// `"Adam"`: moments `m = momentum * m + (1 - momentum) * diff` and
    /// `v = momentum2 * v + (1 - momentum2) * diff^2`; the update is
    /// `rate * sqrt(1 - momentum2^t) / (1 - momentum^t) * m / (sqrt(v) +
    /// delta)` at step `t = iter + 1`. The solver's `momentum` is Adam's
    /// beta1.
    Adam {
        /// `momentum2` (beta2), Caffe's default 0.999.
        momentum2: f32,
        /// `delta` (epsilon), Caffe's default 1e-8; above 0.
        delta: f32,
    },
}

impl SolverType {
    /// AdaGrad with Caffe's default `delta`, 1e-8.
    pub const ADAGRAD: Self = Self::AdaGrad { delta: 1e-8 };
    /// RMSProp with Caffe's defaults: `rms_decay` 0.99, `delta` 1e-8.
    pub const RMSPROP: Self = Self::RmsProp {
        rms_decay: 0.99,
        delta: 1e-8,
    };
    /// AdaDelta with Caffe's default `delta`, 1e-8.
    pub const ADADELTA: Self = Self::AdaDelta { delta: 1e-8 };
    /// Adam with Caffe's defaults: `momentum2` 0.999, `delta` 1e-8.
    pub const ADAM: Self = Self::Adam {
        momentum2: 0.999,
        delta: 1e-8,
    };

    /// Caffe's name of the type, as the solver's `type` spells it.
    ///
    /// ```
    /// assert_eq!(blob_layers::solver::SolverType::Nesterov.name(), "Nesterov");
    /// ```
    pub fn name(&self) -> &'static str {
        match self {
            Self::Sgd => "SGD",
            Self::Nesterov => "Nesterov",
            Self::AdaGrad { .. } => "AdaGrad",
            Self::RmsProp { .. } => "RMSProp",
            Self::AdaDelta { .. } => "AdaDelta",
            Self::Adam { .. } => "Adam",
        }
    }

    /// History blobs per parameter: AdaDelta and Adam keep two.
    pub(super) fn histories(&self) -> usize {
        match self {
            Self::AdaDelta { .. } | Self::Adam { .. } => 2,
            _ => 1,
        }
    }

    /// The type's `delta`, where it divides by a running average that
    /// starts at 0.
    pub(super) fn delta(&self) -> Option<f32> {
        match *self {
            Self::Sgd | Self::Nesterov => None,
            Self::AdaGrad { delta }
            | Self::RmsProp { delta, .. }
            | Self::AdaDelta { delta }
            | Self::Adam { delta, .. } => Some(delta),
        }
    }
}

/// A solver hyper-parameter (a `float` in Caffe's `SolverParameter`) as
/// the element type, as Caffe's `Dtype(...)` converts it.
pub(super) fn dtype<T: MathElement>(value: f32) -> T {
    T::from_f64(f64::from(value))
}

/// Adam's bias correction of step `t`, `sqrt(1 - momentum2^t) / (1 -
/// momentum^t)`, in Caffe's types: a `Dtype` to an `int` power goes
/// through `double`, and the result is a `Dtype`.
pub(super) fn adam_correction<T: MathElement>(momentum: T, momentum2: T, t: usize) -> T {
    let t = t as f64;
    let (beta1, beta2) = (momentum.to_f64(), momentum2.to_f64());
    T::from_f64((1.0 - beta2.powf(t)).sqrt() / (1.0 - beta1.powf(t)))
}

/// Two work vectors a step reuses (Caffe's `update_` and `temp_`), grown
/// to the largest parameter once rather than allocated for each.
#[derive(Debug, Default)]
pub(super) struct Scratch<T> {
    first: Vec<T>,
    second: Vec<T>,
}

impl<T: MathElement> Scratch<T> {
    /// Both vectors, `n` long.
    pub(super) fn two(&mut self, n: usize) -> (&mut [T], &mut [T]) {
        for v in [&mut self.first, &mut self.second] {
            if v.len() < n {
                v.resize(n, T::ZERO);
            }
        }
        (&mut self.first[..n], &mut self.second[..n])
    }
}

/// Caffe's `ComputeUpdateValue` on the CPU: the update of `solver_type`
/// from the regularized gradient in `diff`, written into `diff`, with the
/// parameter's `history` blobs (two for AdaDelta and Adam); `rate`
/// carries the parameter's `lr_mult` (and Adam's correction). Each step
/// is the vector operation Caffe's CPU code makes, in its order.
pub(super) fn update_value<T: MathElement>(
    solver_type: SolverType,
    momentum: T,
    rate: T,
    history: &[&Blob<T>],
    diff: &mut [T],
    scratch: &mut Scratch<T>,
) -> Result<(), BlobError> {
    let (one, two, half) = (T::ONE, T::from_f64(2.0), T::from_f64(0.5));
    let mut hist = history[0].mutable_cpu_data()?;
    let (update, temp) = scratch.two(diff.len());
    match solver_type {
        SolverType::Sgd => {
            cpu::axpby(rate, diff, momentum, &mut hist);
            cpu::copy(&hist, diff);
        }
        SolverType::Nesterov => {
            cpu::copy(&hist, update);
            cpu::axpby(rate, diff, momentum, &mut hist);
            cpu::axpby(one + momentum, &hist, -momentum, update);
            cpu::copy(update, diff);
        }
        SolverType::AdaGrad { delta } => {
            adaptive(
                rate,
                [one, one],
                dtype(delta),
                &mut hist,
                diff,
                [update, temp],
            );
        }
        SolverType::RmsProp { rms_decay, delta } => {
            // Caffe's Dtype(1 - rms_decay): the difference in float.
            let (keep, add) = (dtype(rms_decay), dtype(1.0 - rms_decay));
            adaptive(
                rate,
                [keep, add],
                dtype(delta),
                &mut hist,
                diff,
                [update, temp],
            );
        }
        SolverType::AdaDelta { delta } => {
            let mut updates = history[1].mutable_cpu_data()?;
            cpu::powx(diff, two, update);
            cpu::axpby(one - momentum, update, momentum, &mut hist);
            // sqrt((updates + delta) / (grads + delta)), as Caffe's set,
            // add, div and powx compute it.
            cpu::set(dtype(delta), temp);
            cpu::add(temp, &updates, update);
            cpu::add_inplace(temp, &hist);
            cpu::div_inplace(update, temp);
            cpu::powx(update, half, temp);
            cpu::mul_inplace(diff, temp);
            cpu::powx(diff, two, update);
            cpu::axpby(one - momentum, update, momentum, &mut updates);
            cpu::scal(rate, diff);
        }
        SolverType::Adam { momentum2, delta } => {
            let momentum2 = dtype::<T>(momentum2);
            let mut v = history[1].mutable_cpu_data()?;
            // The moments: m from the gradient, v from its square.
            cpu::axpby(one - momentum, diff, momentum, &mut hist);
            cpu::mul(diff, diff, temp);
            cpu::axpby(one - momentum2, temp, momentum2, &mut v);
            // rate * m / (sqrt(v) + delta), as Caffe's powx, add_scalar,
            // div and scale compute it.
            cpu::powx(&v, half, temp);
            cpu::add_scalar(dtype(delta), temp);
            cpu::div(&hist, temp, diff);
            cpu::scal(rate, diff);
        }
    }
    Ok(())
}

/// Caffe's SGD step on the CPU in one pass over the parameter, as the
/// GPU's `sgd_step` kernel makes it: the weight decay (`l1`: its sign
/// instead of the weight) added to the gradient, `history = momentum *
/// history + rate * gradient`, the update (the history) written to
/// `diff` and taken from `data`. Each value goes through the operations
/// of Caffe's separate passes (axpy, axpby, copy, and `Update`'s axpy by
/// -1), in their order, so the bits are theirs; the parameter and its
/// history are read and written once instead of four times. For a
/// parameter whose data is on the host: one a device holds too takes the
/// passes, its `Update` on the device, as Caffe's on a SYNCED head.
pub(super) fn sgd_in_one_pass<T: MathElement>(
    (decay, l1): (T, bool),
    momentum: T,
    rate: T,
    data: &mut [T],
    diff: &mut [T],
    history: &mut [T],
) {
    // Cut as the vector operations it replaces cut their slices.
    let len = cpu::part_len_for(data.len());
    let items = data
        .chunks_mut(len)
        .zip(diff.chunks_mut(len))
        .zip(history.chunks_mut(len));
    cpu::on_cores(items, |((data, diff), history)| {
        cpu::vectorized(
            #[inline(always)]
            || match (decay != T::ZERO, l1) {
                (false, _) => sgd_values(data, diff, history, momentum, rate, |_, g| g),
                (true, false) => {
                    sgd_values(data, diff, history, momentum, rate, |w, g| g + decay * w)
                }
                (true, true) => sgd_values(data, diff, history, momentum, rate, |w, g| {
                    let pos = if T::ZERO < w { T::ONE } else { T::ZERO };
                    let neg = if w < T::ZERO { T::ONE } else { T::ZERO };
                    g + decay * (pos - neg)
                }),
            },
        )
    });
}

/// [`sgd_in_one_pass`] over one part, with the decay's term chosen
/// before the loop so the loop stays one vectorizable shape.
#[inline(always)]
fn sgd_values<T: MathElement>(
    data: &mut [T],
    diff: &mut [T],
    history: &mut [T],
    momentum: T,
    rate: T,
    regularized: impl Fn(T, T) -> T,
) {
    let n = data.len();
    let (diff, history) = (&mut diff[..n], &mut history[..n]);
    for i in 0..n {
        let w = data[i];
        let h = momentum * history[i] + rate * regularized(w, diff[i]);
        history[i] = h;
        diff[i] = h;
        data[i] = w + -T::ONE * h;
    }
}

/// AdaGrad's and RMSProp's update, as Caffe's powx, axpby (AdaGrad:
/// add), powx, add_scalar, div and axpby compute it: `history = keep *
/// history + add * diff^2` (AdaGrad keeps and adds all: `1 * h + 1 * u`
/// is `h + u` exactly), `diff = rate * diff / (sqrt(history) + delta)`.
fn adaptive<T: MathElement>(
    rate: T,
    [keep, add]: [T; 2],
    delta: T,
    history: &mut [T],
    diff: &mut [T],
    [update, root]: [&mut [T]; 2],
) {
    cpu::powx(diff, T::from_f64(2.0), update);
    cpu::axpby(add, update, keep, history);
    cpu::powx(history, T::from_f64(0.5), root);
    cpu::add_scalar(delta, root);
    cpu::div(diff, root, update);
    cpu::axpby(rate, update, T::ZERO, diff);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Caffe's separate passes, as the solver makes them for a parameter
    /// a device holds (there `Update`'s axpy runs on the device).
    fn by_passes(
        (decay, l1): (f32, bool),
        momentum: f32,
        rate: f32,
        data: &mut [f32],
        diff: &mut [f32],
        history: &mut [f32],
    ) {
        if decay != 0.0 {
            let mut penalty = data.to_vec();
            if l1 {
                cpu::sign(data, &mut penalty);
            }
            cpu::axpy(decay, &penalty, diff);
        }
        let hist = Blob::<f32>::from_vec(&[history.len()], history.to_vec()).unwrap();
        let mut scratch = Scratch::default();
        update_value(
            SolverType::Sgd,
            momentum,
            rate,
            &[&hist],
            diff,
            &mut scratch,
        )
        .unwrap();
        history.copy_from_slice(&hist.to_vec().unwrap());
        cpu::axpy(-1.0, diff, data);
    }

    #[test]
    fn one_pass_gives_the_separate_passes_bits() {
        // Below and above the size shared across cores; L2, L1 and no
        // decay; signed zeros and a NaN among the weights.
        for n in [37, (1 << 18) + 5] {
            for decay in [(5e-4f32, false), (5e-4, true), (0.0, false)] {
                let values = |seed: u64| {
                    let mut v = vec![0.0f32; n];
                    cpu::set_seed(seed);
                    cpu::gaussian(0.0, 1.0, &mut v).unwrap();
                    v
                };
                let mut data = values(1);
                data[..3].copy_from_slice(&[0.0, -0.0, f32::NAN]);
                let (diff, history) = (values(2), values(3));
                let (mut want, mut got) = (
                    (data.clone(), diff.clone(), history.clone()),
                    (data, diff, history),
                );
                by_passes(decay, 0.9, 0.01, &mut want.0, &mut want.1, &mut want.2);
                sgd_in_one_pass(decay, 0.9, 0.01, &mut got.0, &mut got.1, &mut got.2);
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                for (got, want, what) in [
                    (&got.0, &want.0, "data"),
                    (&got.1, &want.1, "diff"),
                    (&got.2, &want.2, "history"),
                ] {
                    assert_eq!(bits(got), bits(want), "{what}, n {n}, decay {decay:?}");
                }
            }
        }
    }
}
