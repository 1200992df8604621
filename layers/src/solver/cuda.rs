//! The CUDA side of the solver: one kernel per parameter and step, where
//! cuBLAS took five calls (weight decay, the momentum's scal and axpy, the
//! copy into the diff, the update).

use blob_kernels::cuda::cudarc::driver::CudaViewMut;
use blob_kernels::cuda::{Gpu, launch_config};
use blob_runtime::{Blob, MathElement};
use std::any::Any;

use super::SolverType;
use crate::gpu::{cuda, gpu_of_all, write};
use crate::layer::Result;

blob_kernels::cuda_kernels! {
    /// `solver.cu`: the solvers' steps, `f32`.
    pub(crate) static SOLVER = "solver.cu";
    /// SGD: weight decay, momentum and update of one parameter.
    pub(crate) fn sgd_step_f32(
        n: i64, decay: f32, l1: i32, rate: f32, momentum: f32,
        data: &mut CudaViewMut<'_, f32>, diff: &mut CudaViewMut<'_, f32>,
        history: &mut CudaViewMut<'_, f32>
    );
    /// Nesterov: weight decay, momentum and update of one parameter.
    pub(crate) fn nesterov_step_f32(
        n: i64, decay: f32, l1: i32, rate: f32, momentum: f32,
        data: &mut CudaViewMut<'_, f32>, diff: &mut CudaViewMut<'_, f32>,
        history: &mut CudaViewMut<'_, f32>
    );
    /// AdaGrad and RMSProp: weight decay, squared-gradient history and
    /// update of one parameter.
    pub(crate) fn adaptive_step_f32(
        n: i64, decay: f32, l1: i32, rate: f32, keep: f32, add: f32, delta: f32,
        data: &mut CudaViewMut<'_, f32>, diff: &mut CudaViewMut<'_, f32>,
        history: &mut CudaViewMut<'_, f32>
    );
    /// AdaDelta: weight decay, both squared averages and update of one parameter.
    pub(crate) fn adadelta_step_f32(
        n: i64, decay: f32, l1: i32, rate: f32, momentum: f32, delta: f32,
        data: &mut CudaViewMut<'_, f32>, diff: &mut CudaViewMut<'_, f32>,
        grads: &mut CudaViewMut<'_, f32>, updates: &mut CudaViewMut<'_, f32>
    );
    /// Adam: weight decay, both moments and update of one parameter.
    pub(crate) fn adam_step_f32(
        n: i64, decay: f32, l1: i32, rate: f32, beta1: f32, beta2: f32, delta: f32,
        data: &mut CudaViewMut<'_, f32>, diff: &mut CudaViewMut<'_, f32>,
        m: &mut CudaViewMut<'_, f32>, v: &mut CudaViewMut<'_, f32>
    );
}

const OP: &str = "solver step on the GPU";

/// One parameter's step: its weight decay (with its multiplier) and
/// whether it is L1, its learning rate (with its multiplier and, for
/// Adam, the bias correction), and the rule's own values.
pub(crate) struct GpuStep {
    pub decay: f32,
    pub l1: bool,
    pub rate: f32,
    pub rule: GpuRule,
}

/// The update rule of [`GpuStep`].
pub(crate) enum GpuRule {
    Sgd {
        momentum: f32,
    },
    Nesterov {
        momentum: f32,
    },
    /// AdaGrad (`keep` and `add` 1) and RMSProp.
    Adaptive {
        keep: f32,
        add: f32,
        delta: f32,
    },
    AdaDelta {
        momentum: f32,
        delta: f32,
    },
    Adam {
        beta1: f32,
        beta2: f32,
        delta: f32,
    },
}

impl GpuRule {
    /// The rule of `solver_type`, with the solver's `momentum`.
    pub(crate) fn of(solver_type: SolverType, momentum: f32) -> Self {
        match solver_type {
            SolverType::Sgd => Self::Sgd { momentum },
            SolverType::Nesterov => Self::Nesterov { momentum },
            SolverType::AdaGrad { delta } => Self::Adaptive {
                keep: 1.0,
                add: 1.0,
                delta,
            },
            SolverType::RmsProp { rms_decay, delta } => Self::Adaptive {
                keep: rms_decay,
                add: 1.0 - rms_decay,
                delta,
            },
            SolverType::AdaDelta { delta } => Self::AdaDelta { momentum, delta },
            SolverType::Adam { momentum2, delta } => Self::Adam {
                beta1: momentum,
                beta2: momentum2,
                delta,
            },
        }
    }
}

/// Steps `p` on the GPU when it and its history are `f32` blobs on one
/// GPU, and says how that went; `None` leaves the step to the CPU (an
/// `f64` solver's too: the kernels are `f32`).
pub(crate) fn step_on_gpu<T: MathElement>(
    step: &GpuStep,
    p: &Blob<T>,
    history: &[&Blob<T>],
) -> Option<Result<()>> {
    let p = (p as &dyn Any).downcast_ref::<Blob<f32>>()?;
    let history: Vec<&Blob<f32>> = history
        .iter()
        .map(|h| (*h as &dyn Any).downcast_ref::<Blob<f32>>())
        .collect::<Option<_>>()?;
    let gpu = gpu_of_all(&[&[p], &history[..]].concat())?;
    Some(run(&gpu, step, p, &history))
}

/// Caffe's `ApplyUpdate` then `Update` for `p` with its `history` (for
/// AdaDelta and Adam, two blobs): afterwards `p`'s diff holds the step
/// taken, as in Caffe.
fn run(gpu: &Gpu, step: &GpuStep, p: &Blob<f32>, history: &[&Blob<f32>]) -> Result<()> {
    let n = p.count();
    let mut data = p.mutable_gpu_data()?;
    let mut diff = p.mutable_gpu_diff()?;
    let (data, diff) = (&mut write(&mut data, n)?, &mut write(&mut diff, n)?);
    let mut first = history[0].mutable_gpu_data()?;
    let first = &mut write(&mut first, n)?;
    let (config, l1) = (launch_config(n), i32::from(step.l1));
    // SAFETY: data, diff and each history blob hold the parameter's n
    // values.
    unsafe {
        match step.rule {
            GpuRule::Sgd { momentum } => sgd_step_f32(
                gpu, config, n as i64, step.decay, l1, step.rate, momentum, data, diff, first,
            ),
            GpuRule::Nesterov { momentum } => nesterov_step_f32(
                gpu, config, n as i64, step.decay, l1, step.rate, momentum, data, diff, first,
            ),
            GpuRule::Adaptive { keep, add, delta } => adaptive_step_f32(
                gpu, config, n as i64, step.decay, l1, step.rate, keep, add, delta, data, diff,
                first,
            ),
            GpuRule::AdaDelta { momentum, delta } => {
                let mut second = history[1].mutable_gpu_data()?;
                let second = &mut write(&mut second, n)?;
                adadelta_step_f32(
                    gpu, config, n as i64, step.decay, l1, step.rate, momentum, delta, data, diff,
                    first, second,
                )
            }
            GpuRule::Adam {
                beta1,
                beta2,
                delta,
            } => {
                let mut second = history[1].mutable_gpu_data()?;
                let second = &mut write(&mut second, n)?;
                adam_step_f32(
                    gpu, config, n as i64, step.decay, l1, step.rate, beta1, beta2, delta, data,
                    diff, first, second,
                )
            }
        }
    }
    .map_err(|e| cuda(OP, e))
}
