//! `solver.cu` against the CPU's `SgdSolver::step`: three steps of
//! Caffe's LeNet recipe (weight decay, momentum, the `inv` rate, a
//! bias's lr_mult of 2) on one parameter, data and diff compared after
//! each.

use blob_layers::solver::SgdSolver;
use blob_runtime::Blob;
use cuda_on_cpu as k;

use crate::{assert_close, random};

#[test]
fn sgd_step_matches_the_cpu_solver() {
    let n = 1000;
    let mult = 2.0;
    let start = random(n, 1, -1.0, 1.0);
    let param = Blob::<f32>::new(&[n]).unwrap();
    param.mutable_cpu_data().unwrap().copy_from_slice(&start);
    let mut solver = SgdSolver::lenet();
    let (mut data, mut history) = (start, vec![0.0f32; n]);
    for it in 0..3 {
        let gradient = random(n, 10 + it, -0.1, 0.1);
        param.mutable_cpu_diff().unwrap().copy_from_slice(&gradient);
        let rate = solver.learning_rate() * mult;
        solver.step(&[&param], &[mult]).unwrap();
        let mut diff = gradient;
        // SAFETY: data, diff and history hold n values.
        unsafe {
            k::sgd_step_f32(
                n,
                n as i64,
                solver.weight_decay,
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
