//! The SGD solver against Caffe's `SGDSolver`: each `lr_policy`'s rate by
//! Caffe's formula in Caffe's types, `multistep`'s one-step-at-a-time
//! `current_step` and its trip through a `.solverstate`, `decay_mult`, L1
//! decay, gradient clipping, Nesterov's and Adam's updates, and the
//! refusals of what Caffe's checks refuse, made before anything is
//! stepped.

use blob_layers::solver::{LrPolicy, ParamSpec, Regularization, SgdSolver, SolverType};
use blob_runtime::Blob;

/// A parameter with `data` and `diff`.
fn param(data: &[f32], diff: &[f32]) -> Blob<f32> {
    let p = Blob::from_vec(&[data.len()], data.to_vec()).unwrap();
    p.mutable_cpu_diff().unwrap().copy_from_slice(diff);
    p
}

/// The rates `solver` takes over `iters` steps of a parameter with no
/// gradient.
fn rates(solver: &mut SgdSolver, iters: usize) -> Vec<f32> {
    let p = param(&[0.0], &[0.0]);
    (0..iters)
        .map(|_| {
            let rate = solver.learning_rate().unwrap();
            solver.step(&[&p], &[ParamSpec::default()]).unwrap();
            rate
        })
        .collect()
}

/// Caffe's `pow(float, int)`: through `double`.
fn base_times_pow(base: f32, gamma: f32, n: usize) -> f32 {
    (base as f64 * (gamma as f64).powf(n as f64)) as f32
}

/// Caffe's rate of an iteration, written out.
type CaffeRate = Box<dyn Fn(usize) -> f32>;

#[test]
fn each_policy_gives_caffes_rate() {
    let base = 0.01f32;
    let cases: Vec<(LrPolicy, CaffeRate)> = vec![
        (LrPolicy::Fixed, Box::new(move |_| base)),
        (
            LrPolicy::Step {
                gamma: 0.1,
                stepsize: 100,
            },
            Box::new(move |i| base_times_pow(base, 0.1, i / 100)),
        ),
        (
            LrPolicy::Exp { gamma: 0.999 },
            Box::new(move |i| base_times_pow(base, 0.999, i)),
        ),
        (
            LrPolicy::Inv {
                gamma: 1e-4,
                power: 0.75,
            },
            Box::new(move |i| base * (1.0 + 1e-4 * i as f32).powf(-0.75)),
        ),
        (
            LrPolicy::Poly {
                power: 2.0,
                max_iter: 1000,
            },
            Box::new(move |i| base * (1.0 - i as f32 / 1000.0).powf(2.0)),
        ),
        (
            LrPolicy::Sigmoid {
                gamma: 0.05,
                stepsize: 500,
            },
            Box::new(move |i| base * (1.0 / (1.0 + (-0.05 * (i as f32 - 500.0)).exp()))),
        ),
    ];
    for (policy, caffe) in cases {
        let mut solver = SgdSolver::<f32>::new(base, policy.clone());
        for iter in [0, 1, 99, 100, 101, 250, 499, 500, 999] {
            solver.iter = iter;
            let rate = solver.learning_rate().unwrap();
            assert_eq!(
                rate.to_bits(),
                caffe(iter).to_bits(),
                "{} at iteration {iter}: {rate} against Caffe's {}",
                policy.name(),
                caffe(iter)
            );
        }
    }
    // The policies do move the rate: step's tenth after 100 iterations.
    let mut step = SgdSolver::<f32>::new(
        1.0,
        LrPolicy::Step {
            gamma: 0.1,
            stepsize: 100,
        },
    );
    step.iter = 100;
    assert!((step.learning_rate().unwrap() - 0.1).abs() < 1e-7);
}

#[test]
fn multistep_moves_one_stepvalue_a_step_as_caffe_does() {
    let policy = LrPolicy::MultiStep {
        gamma: 0.5,
        stepvalues: vec![2, 4, 4, 7],
    };
    let mut solver = SgdSolver::new(1.0, policy.clone());
    // Iteration 4 reaches two stepvalues; Caffe moves past one per step.
    let want = [1.0, 1.0, 0.5, 0.5, 0.25, 0.125, 0.125, 0.0625, 0.0625];
    assert_eq!(rates(&mut solver, want.len()), want);
    assert_eq!(solver.current_step, 4);

    // Restored at iteration 6 with current_step 0 (a state from another
    // policy, say), Caffe catches up one stepvalue per step.
    let p = param(&[0.0], &[0.0]);
    let state = blob_proto::SolverState {
        iter: Some(6),
        current_step: Some(0),
        history: vec![p.to_proto(false).unwrap()],
        ..Default::default()
    };
    let mut resumed = SgdSolver::new(1.0, policy);
    resumed.restore(&state, &[&p]).unwrap();
    let mut got = Vec::new();
    for _ in 0..4 {
        got.push(resumed.learning_rate().unwrap());
        resumed.step(&[&p], &[ParamSpec::default()]).unwrap();
    }
    assert_eq!(got, [0.5, 0.25, 0.125, 0.0625]);
}

#[test]
fn current_step_goes_through_a_solverstate() {
    let dir = std::env::temp_dir().join(format!("blobflow-solver-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("multistep.solverstate");
    let policy = LrPolicy::MultiStep {
        gamma: 0.1,
        stepvalues: vec![1, 3],
    };
    let p = param(&[1.0, 2.0], &[0.5, 0.5]);
    let mut solver = SgdSolver::new(0.1, policy.clone()).with_momentum(0.9);
    for _ in 0..4 {
        p.mutable_cpu_diff().unwrap().fill(0.5);
        solver.step(&[&p], &[ParamSpec::default()]).unwrap();
    }
    assert_eq!((solver.iter, solver.current_step), (4, 2));
    blob_runtime::write_solver_state(&path, &solver.state("m.caffemodel").unwrap()).unwrap();
    let state = blob_runtime::read_solver_state(&path).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!((state.iter, state.current_step), (Some(4), Some(2)));

    let twin = param(&p.to_vec().unwrap(), &[0.0, 0.0]);
    let mut resumed = SgdSolver::new(0.1, policy).with_momentum(0.9);
    resumed.restore(&state, &[&twin]).unwrap();
    for (s, q) in [(&mut solver, &p), (&mut resumed, &twin)] {
        q.mutable_cpu_diff().unwrap().fill(0.25);
        s.step(&[q], &[ParamSpec::default()]).unwrap();
    }
    assert_eq!(resumed.current_step, solver.current_step);
    assert_eq!(twin.to_vec().unwrap(), p.to_vec().unwrap());

    // Caffe's `step` policy writes the step of the last rate it took.
    let mut stepped = SgdSolver::new(
        0.1,
        LrPolicy::Step {
            gamma: 0.5,
            stepsize: 3,
        },
    );
    rates(&mut stepped, 7);
    assert_eq!(stepped.state("x").unwrap().current_step, Some(6 / 3));
}

#[test]
fn decay_mult_and_l1_decay_and_clipping_follow_caffe() {
    let (rate, decay) = (0.5f32, 0.1f32);
    let weights = param(&[2.0, -3.0, 0.0], &[1.0, 1.0, 1.0]);
    let bias = param(&[4.0], &[2.0]);
    let specs = [
        ParamSpec {
            lr_mult: 1.0,
            decay_mult: 2.0,
        },
        ParamSpec {
            lr_mult: 2.0,
            decay_mult: 0.0,
        },
    ];
    let mut solver = SgdSolver::new(rate, LrPolicy::Fixed)
        .with_weight_decay(decay)
        .with_regularization(Regularization::L1);
    solver.step(&[&weights, &bias], &specs).unwrap();
    // L1: diff + decay * decay_mult * sign(data); no momentum.
    let d = decay * 2.0;
    let want = [
        2.0 - rate * (1.0 + d),
        -3.0 - rate * (1.0 - d),
        0.0 - rate * 1.0,
    ];
    assert_eq!(weights.to_vec().unwrap(), want);
    // decay_mult 0: the bias's gradient is not decayed; lr_mult 2.
    assert_eq!(bias.to_vec().unwrap(), [4.0 - 2.0 * rate * 2.0]);

    // Clipping: diffs (3, 0, 0) and (4) have norm 5; clipped to 1 they
    // are scaled by 1/5 before the step.
    let (a, b) = (param(&[0.0; 3], &[3.0, 0.0, 0.0]), param(&[0.0], &[4.0]));
    let mut clipped = SgdSolver::new(1.0, LrPolicy::Fixed).with_clip_gradients(1.0);
    let plain = [ParamSpec::default(); 2];
    clipped.step(&[&a, &b], &plain).unwrap();
    assert_eq!(a.to_vec().unwrap(), [-3.0 / 5.0, 0.0, 0.0]);
    assert_eq!(b.to_vec().unwrap(), [-4.0 / 5.0]);
    // A norm below the clip is left alone.
    a.mutable_cpu_diff()
        .unwrap()
        .copy_from_slice(&[0.3, 0.0, 0.0]);
    b.mutable_cpu_diff().unwrap().copy_from_slice(&[0.4]);
    clipped.step(&[&a, &b], &plain).unwrap();
    assert_eq!(b.to_vec().unwrap(), [-4.0 / 5.0 - 0.4]);
}

#[test]
fn what_caffe_refuses_is_refused_before_anything_moves() {
    let cases: Vec<(SgdSolver, &str)> = vec![
        (
            SgdSolver::new(
                0.1,
                LrPolicy::Step {
                    gamma: -0.1,
                    stepsize: 10,
                },
            ),
            "lr_policy step needs a finite gamma of at least 0, got -0.1",
        ),
        (
            SgdSolver::new(
                0.1,
                LrPolicy::Sigmoid {
                    gamma: 0.1,
                    stepsize: 0,
                },
            ),
            "lr_policy sigmoid needs a stepsize of at least 1, got 0",
        ),
        (
            SgdSolver::new(
                0.1,
                LrPolicy::Poly {
                    power: 1.0,
                    max_iter: 0,
                },
            ),
            "lr_policy poly needs a max_iter of at least 1, got 0",
        ),
        (
            SgdSolver::new(
                0.1,
                LrPolicy::Inv {
                    gamma: 0.1,
                    power: f32::NAN,
                },
            ),
            "lr_policy inv needs a finite power, got NaN",
        ),
        (
            SgdSolver::new(
                0.1,
                LrPolicy::MultiStep {
                    gamma: 0.1,
                    stepvalues: vec![10, 30, 20],
                },
            ),
            "stepvalue 2 (20) is below stepvalue 1 (30)",
        ),
        (
            SgdSolver::new(f32::INFINITY, LrPolicy::Fixed),
            "base_lr must be finite, got inf",
        ),
        (
            SgdSolver::new(0.1, LrPolicy::Fixed).with_momentum(f32::NAN),
            "momentum must be finite, got NaN",
        ),
        (
            SgdSolver::new(0.1, LrPolicy::Fixed).with_clip_gradients(-1.0),
            "clip_gradients must be finite and at least 0, got -1",
        ),
    ];
    for (mut solver, message) in cases {
        let p = param(&[1.0, 2.0], &[0.5, 0.5]);
        let err = solver
            .step(&[&p], &[ParamSpec::default()])
            .expect_err(message)
            .to_string();
        assert!(err.contains(message), "{err}\nshould say: {message}");
        assert_eq!(p.to_vec().unwrap(), [1.0, 2.0], "{message}: data moved");
        assert_eq!(
            p.diff_to_vec().unwrap(),
            [0.5, 0.5],
            "{message}: diff moved"
        );
        assert_eq!(solver.iter, 0);
    }
    let mut solver = SgdSolver::new(0.1, LrPolicy::Fixed);
    let p = param(&[1.0], &[0.5]);
    let nan_mult = ParamSpec {
        lr_mult: f32::NAN,
        decay_mult: 1.0,
    };
    let err = solver.step(&[&p], &[nan_mult]).unwrap_err().to_string();
    assert!(
        err.contains("lr_mult of parameter 0 must be finite"),
        "{err}"
    );

    // A state with a negative iteration is refused, not read as 0.
    let state = blob_proto::SolverState {
        iter: Some(-3),
        history: vec![p.to_proto(false).unwrap()],
        ..Default::default()
    };
    let err = solver.restore(&state, &[&p]).unwrap_err().to_string();
    assert!(err.contains("iter is -3, below 0"), "{err}");
}

/// Three steps of `solver` on one parameter against `caffe`, Caffe's
/// `ComputeUpdateValue` written out: it takes the step's number (from 1),
/// the gradient and its own history, and returns the update.
fn steps_follow(mut solver: SgdSolver, mut caffe: impl FnMut(usize, f32) -> f32) {
    let start = [0.5f32, -1.0, 2.0];
    let gradients = [[0.1f32, -0.2, 0.3], [-0.05, 0.4, 0.0], [0.2, 0.2, -0.1]];
    let p = param(&start, &[0.0; 3]);
    let mut want = start;
    for (t, g) in gradients.iter().enumerate() {
        p.mutable_cpu_diff().unwrap().copy_from_slice(g);
        solver.step(&[&p], &[ParamSpec::default()]).unwrap();
        for (w, &gi) in want.iter_mut().zip(g) {
            *w -= caffe(t + 1, gi);
        }
        assert_eq!(
            p.to_vec().unwrap(),
            want,
            "{} after step {}",
            solver.solver_type.name(),
            t + 1
        );
    }
}

#[test]
fn nesterov_steps_back_then_over_as_caffe_does() {
    let (rate, momentum) = (0.1f32, 0.9f32);
    let mut history = [0.0f32; 3];
    let mut at = 0;
    let solver = SgdSolver::new(rate, LrPolicy::Fixed)
        .with_type(SolverType::Nesterov)
        .with_momentum(momentum);
    steps_follow(solver, move |_, g| {
        let i = at % 3;
        at += 1;
        let previous = history[i];
        history[i] = momentum * previous + rate * g;
        (1.0 + momentum) * history[i] - momentum * previous
    });
}

#[test]
fn adam_corrects_its_moments_as_caffe_does() {
    let (rate, beta1, beta2, delta) = (0.01f32, 0.9f32, 0.999f32, 1e-8f32);
    let (mut m, mut v) = ([0.0f32; 3], [0.0f32; 3]);
    let mut at = 0;
    let solver = SgdSolver::new(rate, LrPolicy::Fixed)
        .with_type(SolverType::ADAM)
        .with_momentum(beta1);
    steps_follow(solver, move |t, g| {
        let i = at % 3;
        at += 1;
        m[i] = beta1 * m[i] + (1.0 - beta1) * g;
        v[i] = beta2 * v[i] + (1.0 - beta2) * (g * g);
        // Caffe: sqrt(1 - pow(beta2, t)) / (1 - pow(beta1, t)) in double.
        let (b1, b2) = (beta1 as f64, beta2 as f64);
        let correction = ((1.0 - b2.powi(t as i32)).sqrt() / (1.0 - b1.powi(t as i32))) as f32;
        (rate * correction) * (m[i] / (v[i].powf(0.5) + delta))
    });
}

#[test]
fn adams_two_moments_go_through_a_solverstate() {
    let adam = || {
        SgdSolver::new(0.01, LrPolicy::Fixed)
            .with_type(SolverType::ADAM)
            .with_momentum(0.9)
    };
    let p = param(&[1.0, -2.0], &[0.0; 2]);
    let mut solver = adam();
    for g in [[0.3, -0.1], [0.2, 0.5]] {
        p.mutable_cpu_diff().unwrap().copy_from_slice(&g);
        solver.step(&[&p], &[ParamSpec::default()]).unwrap();
    }
    let state = solver.state("adam.caffemodel").unwrap();
    assert_eq!(state.history.len(), 2, "Adam keeps m and v per parameter");

    let twin = param(&p.to_vec().unwrap(), &[0.0; 2]);
    let mut resumed = adam();
    resumed.restore(&state, &[&twin]).unwrap();
    for (s, q) in [(&mut solver, &p), (&mut resumed, &twin)] {
        q.mutable_cpu_diff().unwrap().copy_from_slice(&[-0.4, 0.1]);
        s.step(&[q], &[ParamSpec::default()]).unwrap();
    }
    assert_eq!(twin.to_vec().unwrap(), p.to_vec().unwrap());

    // An SGD state has one history blob per parameter: not Adam's.
    let sgd = SgdSolver::lenet();
    let mut sgd_state = sgd.state("x").unwrap();
    sgd_state.history = vec![p.to_proto(false).unwrap()];
    let err = adam().restore(&sgd_state, &[&p]).unwrap_err().to_string();
    assert!(err.contains("2 per parameter for Adam"), "{err}");

    // Adam without delta divides 0 by 0 where a gradient is 0.
    let mut no_delta = adam().with_type(SolverType::Adam {
        momentum2: 0.999,
        delta: 0.0,
    });
    let err = no_delta
        .step(&[&p], &[ParamSpec::default()])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("Adam's delta must be finite and above 0, got 0"),
        "{err}"
    );

    // A solver steps the parameters it began with, not another net's.
    let err = solver
        .step(&[&p, &twin], &[ParamSpec::default(); 2])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("2 parameters need 4 history blobs for Adam, but the solver holds 2"),
        "{err}"
    );
}

#[test]
fn adagrad_sums_squared_gradients_as_caffe_does() {
    let (rate, delta) = (0.1f32, 1e-8f32);
    let mut history = [0.0f32; 3];
    let mut at = 0;
    let solver = SgdSolver::new(rate, LrPolicy::Fixed).with_type(SolverType::ADAGRAD);
    steps_follow(solver, move |_, g| {
        let i = at % 3;
        at += 1;
        history[i] += g.powf(2.0);
        rate * (g / (history[i].powf(0.5) + delta))
    });
}

#[test]
fn rmsprop_averages_squared_gradients_as_caffe_does() {
    let (rate, rms_decay, delta) = (0.01f32, 0.99f32, 1e-8f32);
    let mut history = [0.0f32; 3];
    let mut at = 0;
    let solver = SgdSolver::new(rate, LrPolicy::Fixed).with_type(SolverType::RMSPROP);
    steps_follow(solver, move |_, g| {
        let i = at % 3;
        at += 1;
        history[i] = rms_decay * history[i] + (1.0 - rms_decay) * g.powf(2.0);
        rate * (g / (history[i].powf(0.5) + delta))
    });
}

#[test]
fn adadelta_scales_by_both_averages_as_caffe_does() {
    let (rate, momentum, delta) = (1.0f32, 0.95f32, 1e-6f32);
    let (mut grads, mut updates) = ([0.0f32; 3], [0.0f32; 3]);
    let mut at = 0;
    let solver = SgdSolver::new(rate, LrPolicy::Fixed)
        .with_type(SolverType::AdaDelta { delta })
        .with_momentum(momentum);
    steps_follow(solver, move |_, g| {
        let i = at % 3;
        at += 1;
        grads[i] = momentum * grads[i] + (1.0 - momentum) * g.powf(2.0);
        let step = g * ((delta + updates[i]) / (delta + grads[i])).powf(0.5);
        updates[i] = momentum * updates[i] + (1.0 - momentum) * step.powf(2.0);
        rate * step
    });
}

#[test]
fn what_caffe_refuses_of_the_adaptive_solvers_is_refused() {
    let cases = [
        (
            SgdSolver::new(0.1, LrPolicy::Fixed)
                .with_type(SolverType::ADAGRAD)
                .with_momentum(0.9),
            "momentum cannot be used with AdaGrad, got 0.9",
        ),
        (
            SgdSolver::new(0.1, LrPolicy::Fixed).with_type(SolverType::RmsProp {
                rms_decay: 1.0,
                delta: 1e-8,
            }),
            "RMSProp's rms_decay must be at least 0 and below 1, got 1",
        ),
        (
            SgdSolver::new(0.1, LrPolicy::Fixed).with_type(SolverType::AdaDelta { delta: 0.0 }),
            "AdaDelta's delta must be finite and above 0, got 0",
        ),
    ];
    for (mut solver, message) in cases {
        let p = param(&[1.0], &[0.5]);
        let err = solver
            .step(&[&p], &[ParamSpec::default()])
            .expect_err(message)
            .to_string();
        assert!(err.contains(message), "{err}\nshould say: {message}");
        assert_eq!(p.to_vec().unwrap(), [1.0], "{message}: data moved");
    }
}

#[test]
fn an_f64_solver_computes_in_double_as_caffes_does() {
    let inv = LrPolicy::Inv {
        gamma: 1e-4,
        power: 0.75,
    };
    let mut solver = SgdSolver::<f64>::new(0.01, inv.clone())
        .with_momentum(0.9)
        .with_weight_decay(5e-4);
    solver.iter = 5000;
    // Caffe's SGDSolver<double>: gamma * iter in float, the rest in double.
    let rate = f64::from(0.01f32) * (1.0 + f64::from(1e-4f32 * 5000.0)).powf(-f64::from(0.75f32));
    assert_eq!(solver.learning_rate().unwrap(), rate);
    let mut single = SgdSolver::<f32>::new(0.01, inv);
    single.iter = 5000;
    assert_ne!(
        f64::from(single.learning_rate().unwrap()),
        rate,
        "f32 rounds the rate"
    );

    let (w, g) = (0.7f64, -0.3f64);
    let p = Blob::<f64>::from_vec(&[1], vec![w]).unwrap();
    p.mutable_cpu_diff().unwrap()[0] = g;
    solver.step(&[&p], &[ParamSpec::default()]).unwrap();
    let decayed = g + f64::from(5e-4f32) * w;
    assert_eq!(p.to_vec().unwrap(), [w - rate * decayed]);

    // Its state holds doubles and resumes exactly.
    let state = solver.state("double.caffemodel").unwrap();
    assert!(!state.history[0].double_data.is_empty() && state.history[0].data.is_empty());
    let twin = Blob::<f64>::from_vec(&[1], p.to_vec().unwrap()).unwrap();
    let mut resumed = SgdSolver::<f64>::new(0.01, solver.lr_policy.clone())
        .with_momentum(0.9)
        .with_weight_decay(5e-4);
    resumed.restore(&state, &[&twin]).unwrap();
    for (s, q) in [(&mut solver, &p), (&mut resumed, &twin)] {
        q.mutable_cpu_diff().unwrap()[0] = 0.125;
        s.step(&[q], &[ParamSpec::default()]).unwrap();
    }
    assert_eq!(twin.to_vec().unwrap(), p.to_vec().unwrap());
}

#[test]
fn iter_size_divides_the_accumulated_gradient() {
    let p = param(&[1.0, 1.0], &[0.5, -0.25]);
    let mut solver = SgdSolver::new(1.0, LrPolicy::Fixed).with_iter_size(2);
    solver.step(&[&p], &[ParamSpec::default()]).unwrap();
    assert_eq!(p.to_vec().unwrap(), [1.0 - 0.25, 1.0 + 0.125]);
    let err = SgdSolver::new(1.0, LrPolicy::Fixed)
        .with_iter_size(0)
        .step(&[&p], &[ParamSpec::default()])
        .unwrap_err()
        .to_string();
    assert!(err.contains("iter_size must be at least 1, got 0"), "{err}");
}

#[test]
fn a_solver_file_names_the_line_of_what_it_refuses() {
    use blob_layers::solver::SolverFile;
    let read = |text: &str| SolverFile::<f32>::parse(text).map(|f| f.solver);
    let error = |text: &str| read(text).unwrap_err().to_string();
    let base = "base_lr: 0.1\nlr_policy: \"fixed\"\n";
    assert_eq!(
        error(&format!("{base}  bas_lr: 1")),
        "<text>: line 3, column 3: SolverParameter has no field named bas_lr"
    );
    assert_eq!(
        error(&format!("{base}base_lr: 0.2")),
        "<text>: line 3, column 1: base_lr is given twice; it takes one value"
    );
    assert_eq!(
        error(&format!("{base}momentum: fast")),
        "<text>: line 3, column 1: momentum must be a number, not fast"
    );
    assert_eq!(
        error(&format!("{base}stepsize: -5")),
        "<text>: line 3, column 1: stepsize must be at least 0, not -5"
    );
    // Counts are int32 in caffe.proto: Caffe's reader refuses more.
    assert_eq!(
        error(&format!("{base}max_iter: 99999999999")),
        "<text>: line 3, column 1: max_iter is an int32 field: 99999999999 is above its largest value, 2147483647"
    );
    assert_eq!(
        error(&format!("{base}test_iter: 2147483648")),
        "<text>: line 3, column 1: test_iter is an int32 field: 2147483648 is above its largest value, 2147483647"
    );
    assert!(
        blob_layers::solver::SolverFile::<f32>::parse(&format!("{base}max_iter: 2147483647"))
            .is_ok()
    );
    assert_eq!(
        error(&format!("{base}type: \"Adam\"\nsolver_type: ADAM")),
        "<text>: line 3, column 1: type and the older solver_type are both given; Caffe takes one"
    );
    assert_eq!(
        error(&format!("{base}type: \"adam\"")),
        "<text>: line 3, column 1: unknown solver type \"adam\" (Caffe's are SGD, Nesterov, AdaGrad, RMSProp, AdaDelta, Adam)"
    );
    assert_eq!(
        error("lr_policy: \"fixed\""),
        "<text>: SolverParameter: no base_lr: a solver needs its learning rate"
    );
    assert_eq!(
        error(&format!("{base}regularization_type: \"L3\"")),
        "<text>: line 3, column 1: unknown regularization_type \"L3\" (L1 or L2)"
    );
    assert!(
        error("base_lr: 0.1 {").contains("line 1, column 14: expected a field name, found '{'")
    );

    // What Caffe's files say, each field where it belongs.
    let adam = read("base_lr: 0.001\nlr_policy: \"fixed\"\nsolver_type: ADAM\nmomentum: 0.9\nmomentum2: 0.99\ndelta: 1e-6").unwrap();
    assert_eq!(
        adam.solver_type,
        SolverType::Adam {
            momentum2: 0.99,
            delta: 1e-6
        }
    );
    assert_eq!(adam.momentum, 0.9);
    let rms =
        read("base_lr: 0.01\nlr_policy: \"fixed\"\ntype: \"RMSProp\"\nrms_decay: 0.98").unwrap();
    assert_eq!(
        rms.solver_type,
        SolverType::RmsProp {
            rms_decay: 0.98,
            delta: 1e-8
        }
    );
    let steps = read(
        "base_lr: 0.1 lr_policy: \"multistep\" gamma: 0.1 stepvalue: 100 stepvalue: 200\n\
         regularization_type: \"L1\" clip_gradients: 10 iter_size: 2 weight_decay: 5e-4f",
    )
    .unwrap();
    assert_eq!(
        steps.lr_policy,
        LrPolicy::MultiStep {
            gamma: 0.1,
            stepvalues: vec![100, 200]
        }
    );
    assert_eq!(
        (
            steps.regularization,
            steps.clip_gradients,
            steps.iter_size,
            steps.weight_decay
        ),
        (Regularization::L1, Some(10.0), 2, 5e-4)
    );
    // Caffe's -1 clips nothing; fields about nets and tests are left out.
    let plain = read(&format!(
        "{base}clip_gradients: -1\ntest_initialization: false\ndebug_info: true"
    ))
    .unwrap();
    assert_eq!(plain.clip_gradients, None);
}

/// Caffe's text format reads `inf` and `-inf` as it reads `infinity`
/// (the float suffix `f` was stripped first, leaving "in"), and `0.5f` as
/// 0.5.
#[test]
fn solver_files_read_inf_and_suffixed_floats() {
    use blob_layers::solver::SolverFile;
    for (text, want) in [
        ("clip_gradients: inf", Some(f32::INFINITY)),
        // Negative: no clipping, as in Caffe.
        ("clip_gradients: -inf", None),
        ("clip_gradients: Infinity", Some(f32::INFINITY)),
        ("clip_gradients: 0.5f", Some(0.5)),
        ("clip_gradients: 2", Some(2.0)),
    ] {
        let file = SolverFile::<f32>::parse(&format!("base_lr: 0.1 lr_policy: \"fixed\" {text}"))
            .unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(file.solver.clip_gradients, want, "{text}");
    }
    let e = SolverFile::<f32>::parse("base_lr: 0.1 lr_policy: \"fixed\" clip_gradients: in")
        .err()
        .unwrap();
    assert!(e.to_string().contains("must be a number, not in"), "{e}");
}

#[test]
fn multifixed_takes_each_stages_rate_as_the_yolo_fork_does() {
    use blob_layers::solver::SolverFile;
    // MobileNet-YOLO's solver: a warm-up over the first stages.
    let text = "base_lr: 0.005 lr_policy: \"multifixed\" stagelr: 0.001 stagelr: 0.01 \
                stagelr: 0.1 stageiter: 2 stageiter: 4 stageiter: 5";
    let mut solver = SolverFile::<f32>::parse(text).unwrap().solver;
    assert_eq!(
        solver.lr_policy,
        LrPolicy::MultiFixed {
            stages: vec![(2, 0.001), (4, 0.01), (5, 0.1)]
        }
    );
    // Iteration 2 is still in the first stage (`iter <= stageiter`);
    // past the last stage the last rate holds.
    let want = [0.001, 0.001, 0.001, 0.01, 0.01, 0.1, 0.1, 0.1];
    assert_eq!(rates(&mut solver, want.len()), want);

    let unpaired = SolverFile::<f32>::parse(
        "base_lr: 0.005 lr_policy: \"multifixed\" stagelr: 0.001 stageiter: 2 stageiter: 4",
    )
    .unwrap_err()
    .to_string();
    assert!(
        unpaired.contains("line 1") && unpaired.contains("2 stageiter and 1 stagelr"),
        "{unpaired}"
    );
    let none = SgdSolver::<f32>::new(0.1, LrPolicy::MultiFixed { stages: vec![] });
    let e = none.learning_rate().unwrap_err().to_string();
    assert!(e.contains("at least one stagelr"), "{e}");
}

/// A layer that keeps the iterations a solver tells it.
struct IterationSpy(std::sync::Arc<std::sync::Mutex<Vec<(usize, usize)>>>);

impl blob_layers::DynLayer<f32> for IterationSpy {
    fn type_name(&self) -> &str {
        "IterationSpy"
    }

    fn reshape(
        &mut self,
        bottoms: &[&Blob<f32>],
        _tops: &[&Blob<f32>],
    ) -> blob_runtime::Result<Vec<blob_layers::TopShape>> {
        Ok(vec![blob_layers::TopShape::new(
            bottoms[0].shape().to_vec(),
        )])
    }

    fn forward(&mut self, bottoms: &[&Blob<f32>], tops: &[&Blob<f32>]) -> blob_runtime::Result<()> {
        tops[0]
            .mutable_cpu_data()?
            .copy_from_slice(&bottoms[0].cpu_data()?);
        Ok(())
    }

    fn backward(
        &mut self,
        tops: &[&Blob<f32>],
        down: &[bool],
        bottoms: &[&Blob<f32>],
    ) -> blob_runtime::Result<()> {
        if down[0] {
            bottoms[0]
                .mutable_cpu_diff()?
                .copy_from_slice(&tops[0].cpu_diff()?);
        }
        Ok(())
    }

    fn set_iteration(&mut self, iter: usize, max_iter: usize) {
        self.0.lock().unwrap().push((iter, max_iter));
    }
}

/// The solver tells every layer the iteration before each one's passes
/// and the iteration it trains to (the YOLO fork's `set_iter`, which
/// its AssistedExcitation schedules by), resumed runs included.
#[test]
fn the_solver_tells_each_layer_its_iteration() {
    use blob_layers::net::{Net, NetState};
    use blob_layers::solver::{SolverFile, solve};
    let told = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut registry = blob_layers::registry::LayerRegistry::<f32>::with_caffe_layers();
    let spy = told.clone();
    registry.register("IterationSpy", move |_| {
        Ok(Box::new(IterationSpy(spy.clone())))
    });
    let mut net = Net::<f32>::builder()
        .registry(&registry)
        .state(NetState::train())
        .from_prototxt(
            r#"layer { name: "d" type: "DummyData" top: "x" top: "y"
                 dummy_data_param { shape { dim: 2 dim: 3 } shape { dim: 2 } } }
               layer { name: "ip" type: "InnerProduct" bottom: "x" top: "s"
                 inner_product_param { num_output: 2 } }
               layer { name: "spy" type: "IterationSpy" bottom: "s" top: "t" }
               layer { name: "loss" type: "SoftmaxWithLoss" bottom: "t" bottom: "y" top: "loss" }"#,
        )
        .unwrap();
    let mut file = SolverFile::<f32>::parse(
        "base_lr: 0.1 lr_policy: \"fixed\" max_iter: 3 iter_size: 2 snapshot_after_train: false",
    )
    .unwrap();
    solve(
        &mut file,
        &mut net,
        &mut [],
        &mut |_, _, _| Ok(()),
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(*told.lock().unwrap(), [(0, 3), (1, 3), (2, 3)]);
    file.max_iter = 5;
    solve(
        &mut file,
        &mut net,
        &mut [],
        &mut |_, _, _| Ok(()),
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(told.lock().unwrap()[3..], [(3, 5), (4, 5)]);
}

/// The YOLO fork's `eval_type: "detection_segmentation"` reads
/// DetectionEvaluate's rows from a test net's first output and
/// SegmentationEvaluate's overlaps from its second: a test net of one
/// output is refused with both named.
#[test]
fn detection_segmentation_tests_want_two_outputs() {
    use blob_layers::net::{Net, NetState};
    use blob_layers::solver::{ApVersion, Evaluation, SolverFile, solve};
    let mut file = SolverFile::<f32>::parse(
        r#"base_lr: 0.1 lr_policy: "fixed" max_iter: 1 test_iter: 1 test_interval: 1
           eval_type: "detection_segmentation" ap_version: "11point" snapshot_after_train: false"#,
    )
    .unwrap();
    assert_eq!(
        file.evaluation,
        Evaluation::DetectionSegmentation {
            ap_version: ApVersion::ElevenPoint,
            per_class: false
        }
    );
    let text = r#"layer { name: "d" type: "DummyData" top: "x" top: "y"
                    dummy_data_param { shape { dim: 2 dim: 3 } shape { dim: 2 } } }
                  layer { name: "ip" type: "InnerProduct" bottom: "x" top: "s"
                    inner_product_param { num_output: 2 } }
                  layer { name: "loss" type: "SoftmaxWithLoss" bottom: "s" bottom: "y" top: "loss" }"#;
    let build = |state| {
        Net::<f32>::builder()
            .state(state)
            .from_prototxt(text)
            .unwrap()
    };
    let mut train = build(NetState::train());
    let mut tests = [build(NetState::test())];
    let e = solve(
        &mut file,
        &mut train,
        &mut tests,
        &mut |_, _, _| Ok(()),
        &mut |_| {},
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("test net #0 has 1 output(s)") && e.contains("SegmentationEvaluate's overlaps"),
        "{e}"
    );
}
