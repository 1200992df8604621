//! `solver.cu` against the CPU's `SgdSolver::step`: three steps of
//! Caffe's LeNet recipe (weight decay, momentum, the `inv` rate, a
//! bias's lr_mult of 2) on one parameter, and three of L1 decay with a
//! decay_mult, data and diff compared after each.

use blob_layers::solver::{ParamSpec, Regularization, SgdSolver};
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

fn steps_match(mut solver: SgdSolver, spec: ParamSpec) {
    let n = 1000;
    let l1 = solver.regularization == Regularization::L1;
    let start = random(n, 1, -1.0, 1.0);
    let param = Blob::<f32>::new(&[n]).unwrap();
    param.mutable_cpu_data().unwrap().copy_from_slice(&start);
    let (mut data, mut history) = (start, vec![0.0f32; n]);
    for it in 0..3 {
        let gradient = random(n, 10 + it, -0.1, 0.1);
        param.mutable_cpu_diff().unwrap().copy_from_slice(&gradient);
        let rate = solver.learning_rate().unwrap() * spec.lr_mult;
        let decay = solver.weight_decay * spec.decay_mult;
        solver.step(&[&param], &[spec]).unwrap();
        let mut diff = gradient;
        // SAFETY: data, diff and history hold n values.
        unsafe {
            k::sgd_step_f32(
                n,
                n as i64,
                decay,
                i32::from(l1),
                rate,
                solver.momentum,
                &mut data,
                &mut diff,
                &mut history,
            )
        };
        assert_close(&format!("step {it}: history"), &history, &diff, 0.0);
        assert_close(
            &format!("step {it}: diff"),
            &diff,
            &param.diff_to_vec().unwrap(),
            1e-6,
        );
        assert_close(
            &format!("step {it}: data"),
            &data,
            &param.to_vec().unwrap(),
            1e-6,
        );
    }
}
