//! Caffe's `Solver::Solve` over [`Net`]s: the nets a solver prototxt
//! names, built; then iterations of forward, backward and update, with
//! tests every `test_interval`, the loss every `display` and snapshots
//! every `snapshot`, as `caffe train` runs them. The data are yours: a
//! callback fills each net's inputs before its pass.

use std::path::{Path, PathBuf};

use blob_runtime::{BlobError, MathElement, Result};

use super::SolverFile;
use crate::net::{Net, NetState, Phase};

/// What [`solve`] reports as it goes, in Caffe's log's order.
#[derive(Clone, Debug, PartialEq)]
pub enum SolveEvent {
    /// A test net's outputs, each value averaged over its `test_iter`
    /// passes (Caffe's "Test net output #j: accuracy = 0.98").
    Test {
        /// The iteration tested at.
        iter: usize,
        /// Which test net.
        net: usize,
        /// Each output blob's name, loss weight and values (with
        /// `eval_type: "detection"`, each output's mean average precision).
        outputs: Vec<NetOutput>,
        /// With `eval_type: "detection"` and `show_per_class_result`:
        /// each output's classes' average precisions, `(output, label,
        /// AP)` (Caffe's "class1: 0.7").
        per_class: Vec<ClassPrecision>,
        /// With `eval_type: "detection_segmentation"`: each class's
        /// overlap from `SegmentationEvaluate` (output 1), averaged over
        /// the passes (the YOLO fork's "Seg Classes 0 IOU : 0.8"); empty
        /// otherwise.
        segmentation: Vec<f64>,
    },
    /// The loss at an iteration shown (`display`): this iteration's and
    /// the mean of the last `average_loss`, the train net's outputs and
    /// the learning rate of the update that follows (Caffe's "Iteration
    /// 100, loss = 0.2", "Train net output #0: loss = 0.2 (* 1 = 0.2
    /// loss)", "Iteration 100, lr = 0.01").
    Loss {
        /// The iteration.
        iter: usize,
        /// Its loss.
        loss: f64,
        /// The mean of the last `average_loss` iterations' losses.
        smoothed: f64,
        /// Each output blob of the train net: its name, its loss weight
        /// (0 for none) and its values, from the iteration's last pass.
        outputs: Vec<NetOutput>,
        /// The learning rate of this iteration's update.
        lr: f64,
    },
    /// The loss of the extra forward pass Caffe runs after the last
    /// iteration where `display` divides it (Caffe's "Iteration 1020,
    /// loss = 0.02" before "Optimization Done."): no update follows.
    FinalLoss {
        /// The iteration (`max_iter`).
        iter: usize,
        /// The mean of the last `average_loss` losses, this one included.
        smoothed: f64,
    },
    /// Files written by a snapshot.
    Snapshot {
        /// The weights (`PREFIX_iter_N.caffemodel`).
        model: PathBuf,
        /// The solver's state (`PREFIX_iter_N.solverstate`).
        state: PathBuf,
    },
}

/// One output blob of a net as a solver reports it: Caffe's "Test net
/// output #0: loss = 0.1 (* 1 = 0.1 loss)".
#[derive(Clone, Debug, PartialEq)]
pub struct NetOutput {
    /// The blob's name.
    pub name: String,
    /// Its loss weight (0: not a loss).
    pub loss_weight: f64,
    /// Its values.
    pub values: Vec<f64>,
}

impl NetOutput {
    /// Each output blob of `net` (Caffe's `output_blobs`, by name) as it
    /// holds now.
    ///
    /// ```
    /// use blob_layers::net::{Net, NetState};
    /// use blob_layers::solver::NetOutput;
    /// let mut net = Net::<f32>::from_prototxt(r#"
    ///     input: "x" input_shape { dim: 2 dim: 3 } input: "y" input_shape { dim: 2 }
    ///     layer { name: "loss" type: "SoftmaxWithLoss" bottom: "x" bottom: "y" top: "loss" }"#,
    ///     NetState::train())?;
    /// net.forward()?;
    /// let outputs = NetOutput::read_all(&net)?;
    /// assert_eq!((outputs[0].name.as_str(), outputs[0].loss_weight), ("loss", 1.0));
    /// assert!((outputs[0].values[0] - 3f64.ln()).abs() < 1e-6);
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub fn read_all<T: MathElement>(net: &Net<T>) -> Result<Vec<NetOutput>> {
        net.outputs()
            .into_iter()
            .map(|name| {
                let values = net.blob(name).expect("an output is a blob").to_vec()?;
                Ok(NetOutput {
                    name: name.to_string(),
                    loss_weight: net.blob_loss_weight(name).unwrap_or(0.0),
                    values: values.into_iter().map(T::to_f64).collect(),
                })
            })
            .collect()
    }

    /// Adds one pass's outputs into `sums` (the first pass's become them):
    /// Caffe's test scores, summed over the passes of a test.
    pub fn accumulate(sums: &mut Vec<NetOutput>, pass: Vec<NetOutput>) {
        if sums.is_empty() {
            *sums = pass;
            return;
        }
        for (sum, out) in sums.iter_mut().zip(pass) {
            for (s, v) in sum.values.iter_mut().zip(out.values) {
                *s += v;
            }
        }
    }
}

/// What a run asks of [`solve_until`] between iterations (Caffe's
/// `SolverAction`, what `caffe train`'s `-sigint_effect` and
/// `-sighup_effect` choose).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SolverAction {
    /// Go on.
    #[default]
    None,
    /// Snapshot now and go on.
    Snapshot,
    /// Stop (after the snapshot Caffe takes at the end).
    Stop,
}

/// Fills a net's inputs before a pass: the net, its phase, and the
/// iteration (train) or the pass of the test (test).
pub type Feed<'a, T> = dyn FnMut(&mut Net<T>, Phase, usize) -> Result<()> + 'a;

fn file_error(what: &str, detail: String) -> BlobError {
    BlobError::Net {
        at: what.to_string(),
        detail,
    }
}

impl<T: MathElement> SolverFile<T> {
    /// The train net's file (`train_net`, else `net`), as the solver
    /// names it.
    pub fn train_net_file(&self) -> Result<&str> {
        self.train_net
            .as_deref()
            .or(self.net.as_deref())
            .ok_or_else(|| file_error("solver", "no net: give net or train_net".into()))
    }

    /// Each test net's file (each `test_net`, else `net` once per
    /// `test_iter`) with its state: its `test_state`, where the file gives
    /// one per test net (Caffe requires as many as there are test nets,
    /// or none), else TEST, level 0, no stages.
    pub fn test_net_files(&self) -> Result<Vec<(&str, NetState)>> {
        let files: Vec<&str> = if self.test_nets.is_empty() {
            self.net
                .iter()
                .cycle()
                .take(self.test_iter.len())
                .map(String::as_str)
                .collect()
        } else {
            self.test_nets.iter().map(String::as_str).collect()
        };
        if files.len() != self.test_iter.len() {
            return Err(file_error(
                "solver",
                format!(
                    "{} test nets but {} test_iter values: give one per test net",
                    files.len(),
                    self.test_iter.len()
                ),
            ));
        }
        let states = match self.test_states.len() {
            0 => vec![NetState::test(); files.len()],
            n if n == files.len() => self.test_states.clone(),
            n => {
                return Err(file_error(
                    "solver",
                    format!(
                        "{n} test_state messages for {} test nets (test_iter values): give one per test net, or none",
                        files.len()
                    ),
                ));
            }
        };
        Ok(files.into_iter().zip(states).collect())
    }

    /// The train net in the TRAIN phase (its `train_state`), its path
    /// relative to `dir` (where the solver prototxt is), with the input
    /// shapes its data layers need.
    pub fn train_net(&self, dir: &Path, inputs: &[(&str, &[usize])]) -> Result<Net<T>> {
        build(
            dir.join(self.train_net_file()?),
            self.train_state.clone(),
            inputs,
        )
    }

    /// The test nets ([`test_net_files`](Self::test_net_files)) in their
    /// states.
    pub fn test_nets(&self, dir: &Path, inputs: &[(&str, &[usize])]) -> Result<Vec<Net<T>>> {
        self.test_net_files()?
            .into_iter()
            .map(|(f, state)| build(dir.join(f), state, inputs))
            .collect()
    }
}

fn build<T: MathElement>(
    path: PathBuf,
    state: NetState,
    inputs: &[(&str, &[usize])],
) -> Result<Net<T>> {
    let mut builder = Net::builder().state(state);
    for (name, dims) in inputs {
        builder = builder.input_shape(name, dims);
    }
    builder.from_file(path)
}

/// Caffe's `Solver::Solve` from the solver's iteration to `max_iter`:
/// each iteration clears the parameters' gradients, tells the train
/// net's layers the iteration ([`Net::set_iteration`]), runs `iter_size`
/// forward and backward passes of `train` (each after `feed(train,
/// Phase::Train, iter)` fills its inputs) and updates; the test nets
/// (sharing the train net's weights) run every `test_interval`
/// iterations, `test_iter` passes each; the loss is reported every
/// `display` and the weights and state written every `snapshot`
/// iterations (to `snapshot_prefix` + `_iter_N`), and at the end
/// (unless `snapshot_after_train: false`).
/// The test nets are made to share the train net's weights
/// ([`Net::share_weights_with`]).
///
/// ```
/// use blob_layers::net::{Net, NetState};
/// use blob_layers::solver::{SolveEvent, SolverFile, solve};
/// let mut file = SolverFile::<f32>::parse("base_lr: 0.5 lr_policy: \"fixed\" max_iter: 20 display: 1")?;
/// file.snapshot_prefix = Some(std::env::temp_dir().join("blobflow-solve-doc").display().to_string());
/// // Class 0 always: the loss falls as the inner product learns it.
/// let mut net = Net::<f32>::builder().state(NetState::train()).from_prototxt(r#"
///     layer { name: "d" type: "DummyData" top: "x" top: "y"
///             dummy_data_param { shape { dim: 8 dim: 3 } shape { dim: 8 } data_filler { type: "constant" value: 1 } } }
///     layer { name: "ip" type: "InnerProduct" bottom: "x" top: "s" inner_product_param { num_output: 2 } }
///     layer { name: "loss" type: "SoftmaxWithLoss" bottom: "s" bottom: "y" top: "loss" }"#)?;
/// let mut losses = Vec::new();
/// solve(&mut file, &mut net, &mut [], &mut |_, _, _| Ok(()), &mut |e| {
///     if let SolveEvent::Loss { loss, .. } = e {
///         losses.push(loss);
///     }
/// })?;
/// assert_eq!(losses.len(), 20);
/// assert!((losses[0] - std::f64::consts::LN_2).abs() < 1e-6 && losses[19] < 0.05);
/// # Ok::<(), blob_runtime::BlobError>(())
/// ```
pub fn solve<T: MathElement>(
    file: &mut SolverFile<T>,
    train: &mut Net<T>,
    tests: &mut [Net<T>],
    feed: &mut Feed<'_, T>,
    report: &mut dyn FnMut(SolveEvent),
) -> Result<()> {
    solve_until(file, train, tests, feed, report, &mut || SolverAction::None).map(|_| ())
}

/// [`solve`], asking `action` after each iteration whether to snapshot
/// or stop (Caffe's `GetRequestedAction`, which `caffe train` wires to
/// SIGINT and SIGHUP). A stop ends the run after the snapshot Caffe
/// takes at the end, without the final pass and test; the result says
/// whether the run stopped early.
///
/// ```
/// use blob_layers::net::{Net, NetState};
/// use blob_layers::solver::{SolveEvent, SolverAction, SolverFile, solve_until};
/// let mut file = SolverFile::<f32>::parse("base_lr: 0.1 lr_policy: \"fixed\" max_iter: 100")?;
/// file.snapshot_prefix = Some(std::env::temp_dir().join("blobflow-solve-until-doc").display().to_string());
/// let mut net = Net::<f32>::builder().state(NetState::train()).from_prototxt(r#"
///     layer { name: "d" type: "DummyData" top: "x" top: "y"
///             dummy_data_param { shape { dim: 4 dim: 3 } shape { dim: 4 } } }
///     layer { name: "ip" type: "InnerProduct" bottom: "x" top: "s" inner_product_param { num_output: 2 } }
///     layer { name: "loss" type: "SoftmaxWithLoss" bottom: "s" bottom: "y" top: "loss" }"#)?;
/// let mut asked = 0;
/// let mut snapshots = Vec::new();
/// let stopped = solve_until(&mut file, &mut net, &mut [], &mut |_, _, _| Ok(()),
///     &mut |e| if let SolveEvent::Snapshot { model, .. } = e { snapshots.push(model) },
///     &mut || { asked += 1; if asked == 3 { SolverAction::Stop } else { SolverAction::None } })?;
/// assert!(stopped);
/// assert_eq!(file.solver.iter, 3);
/// assert!(snapshots[0].ends_with("blobflow-solve-until-doc_iter_3.caffemodel"));
/// # Ok::<(), blob_runtime::BlobError>(())
/// ```
pub fn solve_until<T: MathElement>(
    file: &mut SolverFile<T>,
    train: &mut Net<T>,
    tests: &mut [Net<T>],
    feed: &mut Feed<'_, T>,
    report: &mut dyn FnMut(SolveEvent),
    action: &mut dyn FnMut() -> SolverAction,
) -> Result<bool> {
    for test in tests.iter_mut() {
        test.share_weights_with(train)?;
    }
    let specs = train.param_specs();
    let iter_size = file.solver.iter_size.max(1);
    let mut recent: Vec<f64> = Vec::new();
    let mut stopped = false;
    let smooth = |recent: &mut Vec<f64>, loss: f64, keep: usize| {
        recent.push(loss);
        if recent.len() > keep.max(1) {
            recent.remove(0);
        }
        recent.iter().sum::<f64>() / recent.len() as f64
    };
    while file.solver.iter < file.max_iter {
        let iter = file.solver.iter;
        if file.test_interval > 0
            && iter.is_multiple_of(file.test_interval)
            && (iter > 0 || file.test_initialization)
        {
            test_all(file, tests, iter, feed, report)?;
        }
        train.clear_param_diffs()?;
        train.set_iteration(iter, file.max_iter);
        let mut loss = 0.0;
        for _ in 0..iter_size {
            feed(train, Phase::Train, iter)?;
            loss += train.forward()?.to_f64();
            train.backward()?;
        }
        loss /= iter_size as f64;
        let smoothed = smooth(&mut recent, loss, file.average_loss);
        if file.display > 0 && iter.is_multiple_of(file.display) {
            report(SolveEvent::Loss {
                iter,
                loss,
                smoothed,
                outputs: NetOutput::read_all(train)?,
                lr: file.solver.learning_rate()?.to_f64(),
            });
        }
        file.solver.step(&train.param_blobs(), &specs)?;
        let request = action();
        if (file.snapshot > 0 && file.solver.iter.is_multiple_of(file.snapshot))
            || request == SolverAction::Snapshot
        {
            report(snapshot(file, train)?);
        }
        if request == SolverAction::Stop {
            stopped = true;
            break;
        }
    }
    if file.snapshot_after_train
        && (file.snapshot == 0 || !file.solver.iter.is_multiple_of(file.snapshot))
    {
        report(snapshot(file, train)?);
    }
    if stopped {
        return Ok(true);
    }
    let iter = file.solver.iter;
    if file.display > 0 && iter.is_multiple_of(file.display) {
        feed(train, Phase::Train, iter)?;
        let loss = train.forward()?.to_f64();
        let smoothed = smooth(&mut recent, loss, file.average_loss);
        report(SolveEvent::FinalLoss { iter, smoothed });
    }
    if file.test_interval > 0 && iter.is_multiple_of(file.test_interval) {
        test_all(file, tests, iter, feed, report)?;
    }
    Ok(false)
}

/// Every test net, `test_iter` passes each, outputs averaged.
fn test_all<T: MathElement>(
    file: &SolverFile<T>,
    tests: &mut [Net<T>],
    iter: usize,
    feed: &mut Feed<'_, T>,
    report: &mut dyn FnMut(SolveEvent),
) -> Result<()> {
    for (k, (net, &passes)) in tests.iter_mut().zip(&file.test_iter).enumerate() {
        let scored = match file.evaluation {
            super::Evaluation::Classification => None,
            super::Evaluation::Detection {
                ap_version,
                per_class,
            } => Some((ap_version, per_class, false)),
            super::Evaluation::DetectionSegmentation {
                ap_version,
                per_class,
            } => Some((ap_version, per_class, true)),
        };
        if let Some((ap_version, per_class, segmentation)) = scored {
            let tested = test_detection(net, k, passes, ap_version, segmentation, feed)?;
            report(SolveEvent::Test {
                iter,
                net: k,
                outputs: tested.outputs,
                per_class: if per_class {
                    tested.classes
                } else {
                    Vec::new()
                },
                segmentation: tested.segmentation,
            });
            continue;
        }
        let mut outputs: Vec<NetOutput> = Vec::new();
        for pass in 0..passes {
            feed(net, Phase::Test, pass)?;
            net.forward()?;
            NetOutput::accumulate(&mut outputs, NetOutput::read_all(net)?);
        }
        for out in &mut outputs {
            out.values
                .iter_mut()
                .for_each(|v| *v /= passes.max(1) as f64);
        }
        report(SolveEvent::Test {
            iter,
            net: k,
            outputs,
            per_class: Vec::new(),
            segmentation: Vec::new(),
        });
    }
    Ok(())
}

/// A class's average precision in a detection test: `(output, label,
/// AP)`.
pub type ClassPrecision = (usize, i64, f64);

/// Each class's `(score, true positive)` detections and its count of
/// ground truth, over a test's passes, per output.
#[derive(Default)]
struct DetectionTally {
    detections: std::collections::BTreeMap<i64, Vec<(f32, bool)>>,
    positives: std::collections::BTreeMap<i64, usize>,
}

/// What a detection test found: each output's mean average precision,
/// each class's, and with segmentation each class's mean overlap.
struct DetectionTest {
    outputs: Vec<NetOutput>,
    classes: Vec<ClassPrecision>,
    segmentation: Vec<f64>,
}

/// The SSD fork's `Solver::TestDetection`: `passes` forward passes of a
/// test net whose outputs are DetectionEvaluate's rows, tallied per
/// class; each output's mean average precision (over every class the
/// rows count ground truth for, as the fork divides), and each class's.
/// With `segmentation` (the YOLO fork's `TestDetectionSeg`), output 0
/// alone is scored so and output 1 holds each class's overlap, averaged.
fn test_detection<T: MathElement>(
    net: &mut Net<T>,
    k: usize,
    passes: usize,
    ap_version: super::ApVersion,
    segmentation: bool,
    feed: &mut Feed<'_, T>,
) -> Result<DetectionTest> {
    let mut names: Vec<String> = net.outputs().iter().map(|s| s.to_string()).collect();
    let overlaps = if segmentation {
        if names.len() < 2 {
            return Err(BlobError::InvalidParameter {
                op: "test detection and segmentation",
                detail: format!(
                    "test net #{k} has {} output(s): eval_type \"detection_segmentation\" reads \
                     DetectionEvaluate's rows from the first and SegmentationEvaluate's overlaps \
                     from the second",
                    names.len()
                ),
            });
        }
        names.truncate(2);
        names.pop()
    } else {
        None
    };
    // Each class's overlaps summed, and how many passes gave one.
    let mut overlap_sums: Vec<(f64, usize)> = Vec::new();
    let mut tallies: Vec<DetectionTally> =
        names.iter().map(|_| DetectionTally::default()).collect();
    for pass in 0..passes {
        feed(net, Phase::Test, pass)?;
        net.forward()?;
        if let Some(name) = &overlaps {
            let values = net.blob(name).expect("an output is a blob").to_vec()?;
            overlap_sums.resize(values.len(), (0.0, 0));
            for (sum, v) in overlap_sums.iter_mut().zip(values) {
                // The fork's -1: a class with no pixel to compare.
                if v.to_f64() >= 0.0 {
                    *sum = (sum.0 + v.to_f64(), sum.1 + 1);
                }
            }
        }
        for (name, tally) in names.iter().zip(&mut tallies) {
            let blob = net.blob(name).expect("an output is a blob");
            if blob.shape().last() != Some(&5) {
                return Err(BlobError::InvalidParameter {
                    op: "test detection",
                    detail: format!(
                        "test net #{k}'s output {name} is {}, not DetectionEvaluate's rows of 5 \
                         (eval_type: \"detection\" reads them)",
                        blob.shape_string()
                    ),
                });
            }
            let values: Vec<f64> = blob.to_vec()?.into_iter().map(T::to_f64).collect();
            for row in values.chunks_exact(5) {
                let (item, label) = (row[0] as i64, row[1] as i64);
                if item == -1 {
                    *tally.positives.entry(label).or_default() += row[2] as usize;
                    continue;
                }
                let (tp, fp) = (row[3] as i64, row[4] as i64);
                if tp == 0 && fp == 0 {
                    // Matched a difficult box not evaluated.
                    continue;
                }
                tally
                    .detections
                    .entry(label)
                    .or_default()
                    .push((row[2] as f32, tp != 0));
            }
        }
    }
    let mut outputs = Vec::new();
    let mut classes = Vec::new();
    for (j, (name, tally)) in names.iter().zip(&tallies).enumerate() {
        let mut sum = 0.0f32;
        for (&label, &positives) in &tally.positives {
            // The fork passes over a class with no detection, but still
            // divides by it.
            let Some(found) = tally.detections.get(&label) else {
                continue;
            };
            let ap = super::average_precision(found, positives, ap_version);
            classes.push((j, label, f64::from(ap)));
            sum += ap;
        }
        let map = sum / tally.positives.len().max(1) as f32;
        outputs.push(NetOutput {
            name: name.clone(),
            loss_weight: 0.0,
            values: vec![f64::from(map)],
        });
    }
    let segmentation = overlap_sums
        .iter()
        .map(|&(sum, n)| if n > 0 { sum / n as f64 } else { 0.0 })
        .collect();
    Ok(DetectionTest {
        outputs,
        classes,
        segmentation,
    })
}

/// Writes `PREFIX_iter_N.caffemodel` and `.solverstate` (Caffe's
/// `Snapshot`).
fn snapshot<T: MathElement>(file: &SolverFile<T>, train: &Net<T>) -> Result<SolveEvent> {
    let prefix = file.snapshot_prefix.clone().unwrap_or_default();
    let (model, state) = super::write_snapshot(train, &file.solver, prefix)?;
    Ok(SolveEvent::Snapshot { model, state })
}
