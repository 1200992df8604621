//! `solver.cu` against the CPU's `SgdSolver::step`: three steps of
//! Caffe's LeNet recipe (weight decay, momentum, the `inv` rate, a
//! bias's lr_mult of 2) on one parameter, three of L1 decay with a
//! decay_mult, and three of each other solver type, data and diff
//! compared after each.

use blob_layers::solver::{LrPolicy, ParamSpec, Regularization, SgdSolver, SolverType};
use blob_runtime::Blob;
use cuda_on_cpu as k;

use crate::{assert_close, random};

#[test]
fn sgd_step_matches_the_cpu_solver() {
    let bias = ParamSpec {
        lr_mult: 2.0,
        decay_mult: 1.0,
    };
    steps_match(SgdSolver::lenet(), bias);
}

#[test]
fn l1_decay_matches_the_cpu_solver() {
    let spec = ParamSpec {
        lr_mult: 1.0,
        decay_mult: 3.0,
    };
    steps_match(
        SgdSolver::lenet()
            .with_weight_decay(0.01)
            .with_regularization(Regularization::L1),
        spec,
    );
}

#[test]
fn nesterov_step_matches_the_cpu_solver() {
    steps_match(
        SgdSolver::lenet().with_type(SolverType::Nesterov),
        ParamSpec::default(),
    );
}

#[test]
fn adagrad_step_matches_the_cpu_solver() {
    let adagrad = SgdSolver::new(0.01, LrPolicy::Fixed)
        .with_type(SolverType::ADAGRAD)
        .with_weight_decay(0.0005);
    steps_match(adagrad, ParamSpec::default());
}

#[test]
fn rmsprop_step_matches_the_cpu_solver() {
    let rmsprop = SgdSolver::new(0.01, LrPolicy::Fixed)
        .with_type(SolverType::RMSPROP)
        .with_weight_decay(0.0005);
    steps_match(rmsprop, ParamSpec::default());
}

#[test]
fn adadelta_step_matches_the_cpu_solver() {
    let adadelta = SgdSolver::new(1.0, LrPolicy::Fixed)
        .with_type(SolverType::AdaDelta { delta: 1e-6 })
        .with_momentum(0.95)
        .with_weight_decay(0.0005);
    steps_match(adadelta, ParamSpec::default());
}

#[test]
fn adam_step_matches_the_cpu_solver() {
    let adam = SgdSolver::new(0.001, LrPolicy::Fixed)
        .with_type(SolverType::ADAM)
        .with_momentum(0.9)
        .with_weight_decay(0.0005);
    steps_match(adam, ParamSpec::default());
}

fn steps_match(mut solver: SgdSolver, spec: ParamSpec) {
    let n = 1000;
    let l1 = i32::from(solver.regularization == Regularization::L1);
    let start = random(n, 1, -1.0, 1.0);
    let param = Blob::<f32>::new(&[n]).unwrap();
    param.mutable_cpu_data().unwrap().copy_from_slice(&start);
    let (mut data, mut first, mut second) = (start, vec![0.0f32; n], vec![0.0f32; n]);
    for it in 0..3 {
        let gradient = random(n, 10 + it, -0.1, 0.1);
        param.mutable_cpu_diff().unwrap().copy_from_slice(&gradient);
        let rate = solver.learning_rate().unwrap() * spec.lr_mult;
        let decay = solver.weight_decay * spec.decay_mult;
        let momentum = solver.momentum;
        let t = (solver.iter + 1) as i32;
        solver.step(&[&param], &[spec]).unwrap();
        let mut diff = gradient;
        // SAFETY: data, diff and both histories hold n values.
        unsafe {
            match solver.solver_type {
                SolverType::Sgd => k::sgd_step_f32(
                    n, n as i64, decay, l1, rate, momentum, &mut data, &mut diff, &mut first,
                ),
                SolverType::Nesterov => k::nesterov_step_f32(
                    n, n as i64, decay, l1, rate, momentum, &mut data, &mut diff, &mut first,
                ),
                SolverType::AdaGrad { delta } => k::adaptive_step_f32(
                    n, n as i64, decay, l1, rate, 1.0, 1.0, delta, &mut data, &mut diff, &mut first,
                ),
                SolverType::RmsProp { rms_decay, delta } => k::adaptive_step_f32(
                    n,
                    n as i64,
                    decay,
                    l1,
                    rate,
                    rms_decay,
                    1.0 - rms_decay,
                    delta,
                    &mut data,
                    &mut diff,
                    &mut first,
                ),
                SolverType::AdaDelta { delta } => k::adadelta_step_f32(
                    n,
                    n as i64,
                    decay,
                    l1,
                    rate,
                    momentum,
                    delta,
                    &mut data,
                    &mut diff,
                    &mut first,
                    &mut second,
                ),
                SolverType::Adam { momentum2, delta } => {
                    let (b1, b2) = (momentum as f64, momentum2 as f64);
                    let correction = (1.0 - b2.powi(t)).sqrt() / (1.0 - b1.powi(t));
                    k::adam_step_f32(
                        n,
                        n as i64,
                        decay,
                        l1,
                        rate * correction as f32,
                        momentum,
                        momentum2,
                        delta,
                        &mut data,
                        &mut diff,
                        &mut first,
                        &mut second,
                    )
                }
            }
        };
        let name = solver.solver_type.name();
        assert_close(
            &format!("{name} step {it}: diff"),
            &diff,
            &param.diff_to_vec().unwrap(),
            1e-6,
        );
        assert_close(
            &format!("{name} step {it}: data"),
            &data,
            &param.to_vec().unwrap(),
            1e-6,
        );
    }
}
