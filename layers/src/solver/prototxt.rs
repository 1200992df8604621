//! Caffe's solver prototxt (a `SolverParameter` in text format) read into
//! a solver and the settings of the training loop around it.

use std::path::Path;

use blob_proto::{ProtoError, TextField, TextMessage, TextValue, excerpt};
use blob_runtime::{BlobError, MathElement};

use super::{ApVersion, LrPolicy, Regularization, SgdSolver, SolverType};
use crate::net::NetState;

/// A solver prototxt as `caffe train --solver` reads it: the solver (its
/// type, rate policy, momentum, decay, clipping, `iter_size`) and the
/// fields that drive the training loop, which are the caller's to follow.
///
/// The nets it names are built by [`train_net`](Self::train_net) and
/// [`test_nets`](Self::test_nets), and [`solve`](super::solve) runs
/// Caffe's loop over them. Fields about nets given inline (`net_param`,
/// ...), states (`test_state`) and logging (`debug_info`) are read and
/// left out; a field Caffe does not
/// know is an error naming it and its line, as in Caffe. A missing
/// `base_lr` (Caffe takes 0 and learns nothing) or `lr_policy` (Caffe
/// aborts) is an error too.
///
/// ```
/// use blob_layers::solver::{LrPolicy, SolverFile};
/// let text = r#"
///     net: "lenet_train_test.prototxt"
///     base_lr: 0.01  momentum: 0.9  weight_decay: 0.0005
///     lr_policy: "inv"  gamma: 0.0001  power: 0.75
///     max_iter: 10000  snapshot: 5000  snapshot_prefix: "lenet"
///     solver_mode: CPU
/// "#;
/// let file = SolverFile::<f32>::parse(text)?;
/// assert_eq!(file.solver.lr_policy, LrPolicy::Inv { gamma: 0.0001, power: 0.75 });
/// assert_eq!((file.max_iter, file.snapshot), (10000, 5000));
///
/// let err = SolverFile::<f32>::parse("base_lr: 0.01\nlr_policy: \"fixd\"").unwrap_err();
/// assert_eq!(err.to_string(), "<text>: line 2, column 1: unknown lr_policy \"fixd\" (Caffe's are fixed, step, exp, inv, multistep, poly, sigmoid; the YOLO fork's multifixed)");
/// # Ok::<(), blob_runtime::BlobError>(())
/// ```
#[derive(Debug)]
pub struct SolverFile<T: MathElement = f32> {
    /// The solver the file describes, at iteration 0.
    pub solver: SgdSolver<T>,
    /// `net`: the net's prototxt, as written (the train net, and each
    /// test net unless `test_net` names them).
    pub net: Option<String>,
    /// `train_net`: the train net's prototxt, where it is not `net`.
    pub train_net: Option<String>,
    /// `test_net`: the test nets' prototxts, one per `test_iter`.
    pub test_nets: Vec<String>,
    /// `test_initialization` (default true): test before the first
    /// iteration too.
    pub test_initialization: bool,
    /// `snapshot_after_train` (default true): snapshot at the end where
    /// the last iteration took none.
    pub snapshot_after_train: bool,
    /// `train_state`: the train net's level and stages (its phase is
    /// TRAIN whatever the file says, as in Caffe).
    pub train_state: NetState,
    /// `test_state`: each test net's level and stages, one per test net
    /// (TEST, level 0, no stages where the file gives none).
    ///
    /// ```
    /// use blob_layers::solver::SolverFile;
    /// let file = SolverFile::<f32>::parse(r#"net: "ae.prototxt" base_lr: 0.01 lr_policy: "fixed"
    ///     test_state: { stage: 'test-on-train' } test_iter: 500
    ///     test_state: { stage: 'test-on-test' level: 2 } test_iter: 100
    ///     snapshot_after_train: false"#)?;
    /// let tests = file.test_net_files()?;
    /// assert_eq!(tests[1].1.stages, ["test-on-test"]);
    /// assert_eq!((tests[1].1.level, file.snapshot_after_train), (2, false));
    /// let err = SolverFile::<f32>::parse("base_lr: 1 lr_policy: \"fixed\" test_state { stag: 'x' }").unwrap_err();
    /// assert!(err.to_string().contains("line 1"), "{err}");
    /// # Ok::<(), blob_runtime::BlobError>(())
    /// ```
    pub test_states: Vec<NetState>,
    /// `average_loss` (default 1): the displayed loss is the mean of the
    /// last this many iterations'.
    pub average_loss: usize,
    /// `max_iter`: the iteration to stop at (0 if not given).
    pub max_iter: usize,
    /// `display`: print the loss every this many iterations (0: never).
    pub display: usize,
    /// `snapshot`: snapshot every this many iterations (0: at the end
    /// only).
    pub snapshot: usize,
    /// `snapshot_prefix`.
    pub snapshot_prefix: Option<String>,
    /// `random_seed` (Caffe's -1, the default, is `None`: a random seed).
    pub random_seed: Option<u64>,
    /// `test_iter`, one per test net.
    pub test_iter: Vec<usize>,
    /// `test_interval` (0: no tests).
    pub test_interval: usize,
    /// `solver_mode`, `CPU` or `GPU`.
    pub solver_mode: Option<String>,
    /// `device_id`: the GPU `solver_mode: GPU` trains on (0 by default).
    pub device_id: usize,
    /// How a test scores its net (the SSD fork's `eval_type`,
    /// `ap_version` and `show_per_class_result`).
    pub evaluation: Evaluation,
}

/// How a test scores a test net's outputs (the SSD fork's `eval_type`).
///
/// ```
/// use blob_layers::solver::{ApVersion, Evaluation, SolverFile};
/// let file = SolverFile::<f32>::parse(r#"base_lr: 0.001 lr_policy: "fixed"
///     eval_type: "detection" ap_version: "11point""#)?;
/// assert_eq!(file.evaluation, Evaluation::Detection { ap_version: ApVersion::ElevenPoint, per_class: false });
/// # Ok::<(), blob_runtime::BlobError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Evaluation {
    /// Each output averaged over the test's passes (Caffe's, the fork's
    /// `"classification"`).
    Classification,
    /// Each output holds DetectionEvaluate's rows: the test reports
    /// their mean average precision over the classes (the fork's
    /// `"detection"`), and each class's with `per_class`.
    Detection {
        /// How each class's average precision is taken.
        ap_version: ApVersion,
        /// `show_per_class_result`.
        per_class: bool,
    },
    /// The YOLO fork's `"detection_segmentation"`: output 0 holds
    /// DetectionEvaluate's rows (scored as `Detection` scores them),
    /// output 1 `SegmentationEvaluate`'s overlap of each class, averaged
    /// over the test's passes (its "Seg Classes 0 IOU" and "Seg mIOU").
    DetectionSegmentation {
        /// How each class's average precision is taken.
        ap_version: ApVersion,
        /// `show_per_class_result`.
        per_class: bool,
    },
}

/// The fields of Caffe's `SolverParameter` this reader accepts and leaves
/// out: how nets are built and tested, what is logged, which device.
const LEFT_OUT: &[&str] = &[
    "net_param",
    "train_net_param",
    "test_net_param",
    "test_compute_loss",
    "snapshot_diff",
    "snapshot_format",
    "debug_info",
    "layer_wise_reduce",
    "weights",
];

/// Caffe's repeated fields of `SolverParameter` among those read.
const REPEATED: &[&str] = &[
    "stepvalue",
    "stagelr",
    "stageiter",
    "test_iter",
    "test_net",
    "test_state",
    "weights",
];

fn text_error(path: &str, source: ProtoError) -> BlobError {
    BlobError::Proto {
        path: path.to_string(),
        source,
    }
}

/// The fields of one message, looked up by name, each non-repeated field
/// at most once.
struct Fields<'a> {
    path: &'a str,
    message: &'a TextMessage,
}

impl<'a> Fields<'a> {
    fn error(&self, field: &TextField, detail: String) -> BlobError {
        text_error(self.path, field.error(detail))
    }

    fn one(&self, name: &str) -> Option<&'a TextField> {
        self.message.fields.iter().find(|f| f.name == name)
    }

    fn scalar(&self, field: &'a TextField) -> Result<&'a str, BlobError> {
        match &field.value {
            TextValue::Scalar(s) => Ok(s),
            other => Err(self.error(
                field,
                format!(
                    "{} must be a number, not {}",
                    field.name,
                    excerpt(&other.to_string())
                ),
            )),
        }
    }

    fn float(&self, name: &str, default: f32) -> Result<f32, BlobError> {
        match self.one(name) {
            Some(field) => self.float_of(field),
            None => Ok(default),
        }
    }

    fn float_of(&self, field: &'a TextField) -> Result<f32, BlobError> {
        let name = &field.name;
        let token = self.scalar(field)?;
        match token.to_ascii_lowercase().as_str() {
            "inf" | "infinity" => Ok(f32::INFINITY),
            "-inf" | "-infinity" => Ok(f32::NEG_INFINITY),
            "nan" => Ok(f32::NAN),
            // Text format allows a float suffix: 0.5f (but "inf" is not
            // "in" with one).
            n => n
                .strip_suffix('f')
                .filter(|t| !t.is_empty())
                .unwrap_or(n)
                .parse::<f32>()
                .map_err(|_| {
                    self.error(
                        field,
                        format!("{name} must be a number, not {}", excerpt(token)),
                    )
                }),
        }
    }

    fn int(&self, field: &TextField) -> Result<i64, BlobError> {
        let token = self.scalar(field)?;
        token.parse::<i64>().map_err(|_| {
            self.error(
                field,
                format!("{} must be an integer, not {}", field.name, excerpt(token)),
            )
        })
    }

    /// A count: an `int32` field of Caffe's `SolverParameter` (every
    /// count is), so at most 2^31 - 1, as Caffe's reader refuses more.
    fn count(&self, field: &TextField) -> Result<usize, BlobError> {
        let value = self.int(field)?;
        if value > i64::from(i32::MAX) {
            return Err(self.error(
                field,
                format!(
                    "{} is an int32 field: {value} is above its largest value, {}",
                    field.name,
                    i32::MAX
                ),
            ));
        }
        usize::try_from(value).map_err(|_| {
            self.error(
                field,
                format!("{} must be at least 0, not {value}", field.name),
            )
        })
    }

    fn count_or(&self, name: &str, default: usize) -> Result<usize, BlobError> {
        self.one(name).map_or(Ok(default), |f| self.count(f))
    }

    fn string(&self, name: &str) -> Result<Option<(&'a TextField, &'a str)>, BlobError> {
        let Some(field) = self.one(name) else {
            return Ok(None);
        };
        match &field.value {
            TextValue::Str(s) => Ok(Some((field, s))),
            other => Err(self.error(
                field,
                format!(
                    "{name} must be a quoted string, not {}",
                    excerpt(&other.to_string())
                ),
            )),
        }
    }

    /// A `bool` field, `default` where absent.
    fn boolean_or(&self, name: &str, default: bool) -> Result<bool, BlobError> {
        match self.enum_name(name)? {
            None => Ok(default),
            Some((_, "true")) => Ok(true),
            Some((_, "false")) => Ok(false),
            Some((field, other)) => Err(self.error(
                field,
                format!("{name} is true or false, not {}", excerpt(other)),
            )),
        }
    }

    /// A `NetState` message (`train_state`, `test_state`): its level and
    /// stages over `base`, whose phase it keeps.
    fn net_state(&self, field: &TextField, base: NetState) -> Result<NetState, BlobError> {
        let TextValue::Message(message) = &field.value else {
            return Err(self.error(
                field,
                format!(
                    "{} must be a message {{ stage: \"...\" level: N }}",
                    field.name
                ),
            ));
        };
        let state = blob_proto::ParamMessage::from_text(&blob_proto::schema::NET_STATE, message)
            .map_err(|source| text_error(self.path, source))?;
        Ok(NetState {
            level: i32::try_from(state.int("level")).unwrap_or(0),
            stages: state.strings("stage").map(String::from).collect(),
            ..base
        })
    }

    fn enum_name(&self, name: &str) -> Result<Option<(&'a TextField, &'a str)>, BlobError> {
        let Some(field) = self.one(name) else {
            return Ok(None);
        };
        match &field.value {
            TextValue::Scalar(s) => Ok(Some((field, s))),
            other => Err(self.error(
                field,
                format!("{name} must be a name, not {}", excerpt(&other.to_string())),
            )),
        }
    }
}

impl<T: MathElement> SolverFile<T> {
    /// Reads the solver prototxt at `path`; errors name the file, the
    /// line and the field.
    ///
    /// ```
    /// let err = blob_layers::solver::SolverFile::<f32>::open("/no/solver.prototxt").unwrap_err();
    /// assert!(err.to_string().starts_with("/no/solver.prototxt: "), "{err}");
    /// ```
    pub fn open(path: impl AsRef<Path>) -> Result<Self, BlobError> {
        let path = path.as_ref();
        let name = path.display().to_string();
        let text = blob_runtime::read_text_file(path)?;
        Self::read(&name, &text)
    }

    /// Reads a solver prototxt from `text` (errors name it `<text>`).
    pub fn parse(text: &str) -> Result<Self, BlobError> {
        Self::read("<text>", text)
    }

    fn read(path: &str, text: &str) -> Result<Self, BlobError> {
        let message = TextMessage::parse(text).map_err(|e| text_error(path, e))?;
        let f = Fields {
            path,
            message: &message,
        };
        check_names(&f)?;
        let solver = solver_of(&f)?;
        let seed = f.one("random_seed").map(|s| f.int(s)).transpose()?;
        let mut test_iter = Vec::new();
        for field in message.all("test_iter") {
            test_iter.push(f.count(field)?);
        }
        let mut test_nets = Vec::new();
        for field in message.all("test_net") {
            match &field.value {
                TextValue::Str(s) => test_nets.push(s.clone()),
                other => {
                    return Err(f.error(
                        field,
                        format!(
                            "test_net must be a quoted string, not {}",
                            excerpt(&other.to_string())
                        ),
                    ));
                }
            }
        }
        let test_initialization = f.boolean_or("test_initialization", true)?;
        let snapshot_after_train = f.boolean_or("snapshot_after_train", true)?;
        let train_state = match f.one("train_state") {
            Some(field) => f.net_state(field, NetState::train())?,
            None => NetState::train(),
        };
        let test_states = f
            .message
            .fields
            .iter()
            .filter(|field| field.name == "test_state")
            .map(|field| f.net_state(field, NetState::test()))
            .collect::<Result<Vec<_>, _>>()?;
        let solver_mode = f.enum_name("solver_mode")?;
        if let Some((field, mode)) = solver_mode
            && !matches!(mode, "CPU" | "GPU")
        {
            return Err(f.error(field, format!("unknown solver_mode {mode} (CPU or GPU)")));
        }
        Ok(Self {
            solver,
            net: f.string("net")?.map(|(_, s)| s.to_string()),
            train_net: f.string("train_net")?.map(|(_, s)| s.to_string()),
            test_nets,
            test_initialization,
            snapshot_after_train,
            train_state,
            test_states,
            average_loss: f.count_or("average_loss", 1)?.max(1),
            max_iter: f.count_or("max_iter", 0)?,
            display: f.count_or("display", 0)?,
            snapshot: f.count_or("snapshot", 0)?,
            snapshot_prefix: f.string("snapshot_prefix")?.map(|(_, s)| s.to_string()),
            // Caffe: a negative seed means "pick one".
            random_seed: seed.and_then(|s| u64::try_from(s).ok()),
            test_iter,
            test_interval: f.count_or("test_interval", 0)?,
            solver_mode: solver_mode.map(|(_, m)| m.to_string()),
            device_id: f.count_or("device_id", 0)?,
            evaluation: evaluation_of(&f)?,
        })
    }
}

/// `eval_type`, `ap_version` and `show_per_class_result` (the SSD
/// fork's).
fn evaluation_of(f: &Fields<'_>) -> Result<Evaluation, BlobError> {
    let per_class = f.boolean_or("show_per_class_result", false)?;
    let ap_version = match f.string("ap_version")? {
        None => ApVersion::Integral,
        Some((field, name)) => ApVersion::from_name(name).ok_or_else(|| {
            f.error(
                field,
                format!(
                    "Unknown ap_version: {} (11point, MaxIntegral or Integral)",
                    excerpt(name)
                ),
            )
        })?,
    };
    match f.string("eval_type")? {
        None | Some((_, "classification")) => Ok(Evaluation::Classification),
        Some((_, "detection")) => Ok(Evaluation::Detection {
            ap_version,
            per_class,
        }),
        Some((_, "detection_segmentation")) => Ok(Evaluation::DetectionSegmentation {
            ap_version,
            per_class,
        }),
        Some((field, other)) => Err(f.error(
            field,
            format!(
                "Unknown evaluation type: {} (classification, detection or \
                 detection_segmentation)",
                excerpt(other)
            ),
        )),
    }
}

/// Every field is one of `SolverParameter`'s, and a non-repeated field is
/// given once.
fn check_names(f: &Fields<'_>) -> Result<(), BlobError> {
    const READ: &[&str] = &[
        "net",
        "base_lr",
        "lr_policy",
        "gamma",
        "power",
        "stepsize",
        "stepvalue",
        "stagelr",
        "stageiter",
        "max_iter",
        "momentum",
        "momentum2",
        "delta",
        "rms_decay",
        "weight_decay",
        "regularization_type",
        "clip_gradients",
        "type",
        "solver_type",
        "iter_size",
        "display",
        "snapshot",
        "snapshot_prefix",
        "random_seed",
        "test_iter",
        "test_interval",
        "solver_mode",
        "device_id",
        "train_net",
        "test_net",
        "test_initialization",
        "average_loss",
        "snapshot_after_train",
        "train_state",
        "test_state",
        "eval_type",
        "ap_version",
        "show_per_class_result",
    ];
    for (i, field) in f.message.fields.iter().enumerate() {
        let name = field.name.as_str();
        if !READ.contains(&name) && !LEFT_OUT.contains(&name) {
            return Err(f.error(field, format!("SolverParameter has no field named {name}")));
        }
        let again = f.message.fields[..i].iter().any(|g| g.name == name);
        if again && !REPEATED.contains(&name) {
            return Err(f.error(field, format!("{name} is given twice; it takes one value")));
        }
    }
    Ok(())
}

/// An error about the whole message: a field it lacks.
fn missing(f: &Fields<'_>, detail: &str) -> BlobError {
    text_error(
        f.path,
        ProtoError::Invalid {
            at: "SolverParameter".into(),
            detail: detail.into(),
        },
    )
}

/// The solver of Caffe's fields.
fn solver_of<T: MathElement>(f: &Fields<'_>) -> Result<SgdSolver<T>, BlobError> {
    const POLICIES: &str =
        "Caffe's are fixed, step, exp, inv, multistep, poly, sigmoid; the YOLO fork's multifixed";
    if f.one("base_lr").is_none() {
        return Err(missing(f, "no base_lr: a solver needs its learning rate"));
    }
    let base_lr = f.float("base_lr", 0.0)?;
    let gamma = f.float("gamma", 0.0)?;
    let power = f.float("power", 0.0)?;
    let stepsize = f.count_or("stepsize", 0)?;
    let lr_policy = match f.string("lr_policy")? {
        None => return Err(missing(f, &format!("no lr_policy ({POLICIES})"))),
        Some((_, "fixed")) => LrPolicy::Fixed,
        Some((_, "step")) => LrPolicy::Step { gamma, stepsize },
        Some((_, "exp")) => LrPolicy::Exp { gamma },
        Some((_, "inv")) => LrPolicy::Inv { gamma, power },
        Some((_, "multistep")) => {
            let mut stepvalues = Vec::new();
            for field in f.message.all("stepvalue") {
                stepvalues.push(f.count(field)?);
            }
            LrPolicy::MultiStep { gamma, stepvalues }
        }
        Some((_, "poly")) => LrPolicy::Poly {
            power,
            max_iter: f.count_or("max_iter", 0)?,
        },
        Some((_, "sigmoid")) => LrPolicy::Sigmoid { gamma, stepsize },
        Some((field, "multifixed")) => {
            let mut until = Vec::new();
            for stage in f.message.all("stageiter") {
                until.push(f.count(stage)?);
            }
            let mut rates = Vec::new();
            for stage in f.message.all("stagelr") {
                rates.push(f.float_of(stage)?);
            }
            if until.len() != rates.len() {
                return Err(f.error(
                    field,
                    format!(
                        "lr_policy multifixed pairs each stageiter with a stagelr, but there \
                         are {} stageiter and {} stagelr",
                        until.len(),
                        rates.len()
                    ),
                ));
            }
            LrPolicy::MultiFixed {
                stages: until.into_iter().zip(rates).collect(),
            }
        }
        Some((field, other)) => {
            return Err(f.error(field, format!("unknown lr_policy {other:?} ({POLICIES})")));
        }
    };
    let regularization = match f.string("regularization_type")? {
        None | Some((_, "L2")) => Regularization::L2,
        Some((_, "L1")) => Regularization::L1,
        Some((field, other)) => {
            return Err(f.error(
                field,
                format!("unknown regularization_type {other:?} (L1 or L2)"),
            ));
        }
    };
    let mut solver = SgdSolver::new(base_lr, lr_policy)
        .with_type(solver_type_of(f)?)
        .with_momentum(f.float("momentum", 0.0)?)
        .with_weight_decay(f.float("weight_decay", 0.0)?)
        .with_regularization(regularization)
        .with_iter_size(f.count_or("iter_size", 1)?);
    // Caffe's -1 (any negative) clips nothing; NaN is kept, and refused
    // by the first step.
    let clip = f.float("clip_gradients", -1.0)?;
    solver.clip_gradients = (clip >= 0.0 || clip.is_nan()).then_some(clip);
    Ok(solver)
}

/// `type` (a string) or the older `solver_type` (an enum, by name or
/// number), not both, as Caffe's upgrade of old solver files requires.
fn solver_type_of(f: &Fields<'_>) -> Result<SolverType, BlobError> {
    const TYPES: [&str; 6] = ["SGD", "Nesterov", "AdaGrad", "RMSProp", "AdaDelta", "Adam"];
    const ENUM: [&str; 6] = ["SGD", "NESTEROV", "ADAGRAD", "RMSPROP", "ADADELTA", "ADAM"];
    let index = match (f.string("type")?, f.enum_name("solver_type")?) {
        (Some((field, _)), Some(_)) => {
            return Err(f.error(
                field,
                "type and the older solver_type are both given; Caffe takes one".into(),
            ));
        }
        (Some((field, name)), None) => {
            Some(TYPES.iter().position(|&t| t == name).ok_or_else(|| {
                f.error(
                    field,
                    format!(
                        "unknown solver type {name:?} (Caffe's are {})",
                        TYPES.join(", ")
                    ),
                )
            })?)
        }
        (None, Some((field, name))) => Some(
            ENUM.iter()
                .position(|&t| t == name)
                .or_else(|| name.parse::<usize>().ok().filter(|&i| i < ENUM.len()))
                .ok_or_else(|| {
                    f.error(
                        field,
                        format!(
                            "unknown solver_type {name} (Caffe's are {})",
                            ENUM.join(", ")
                        ),
                    )
                })?,
        ),
        (None, None) => None,
    };
    let delta = f.float("delta", 1e-8)?;
    Ok(match index.unwrap_or(0) {
        0 => SolverType::Sgd,
        1 => SolverType::Nesterov,
        2 => SolverType::AdaGrad { delta },
        3 => SolverType::RmsProp {
            rms_decay: f.float("rms_decay", 0.99)?,
            delta,
        },
        4 => SolverType::AdaDelta { delta },
        _ => SolverType::Adam {
            momentum2: f.float("momentum2", 0.999)?,
            delta,
        },
    })
}
