//! `blobflow train` and `blobflow test`: Caffe's `caffe train` and
//! `caffe test` over nets whose data layers read their stores, with
//! Caffe's log lines.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use blobflow::BlobError;
use blobflow::layers::net::{Net, NetState};
use blobflow::layers::solver::{
    NetOutput, SolveEvent, SolverAction, SolverFile, model_of_state, solve_until,
};

use crate::log::{Log, g6};
use crate::run::Device;

type Failure = Box<dyn std::error::Error>;

fn bad(message: impl Into<String>) -> Failure {
    message.into().into()
}

/// What a signal does during `train` (Caffe's `-sigint_effect`,
/// `-sighup_effect`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SignalEffect {
    /// Snapshot and stop.
    Stop,
    /// Snapshot and go on.
    Snapshot,
    /// Nothing.
    None,
}

/// What `blobflow train` is asked to do.
#[derive(clap::Args)]
pub struct TrainArgs {
    /// The solver .prototxt; the paths in it (nets, stores, snapshot_prefix) are read
    /// from the folder this runs in, as Caffe reads them
    #[arg(long)]
    pub solver: PathBuf,
    /// Weights to start from (.caffemodel; several separated by commas): finetuning
    #[arg(long, value_name = "W.caffemodel")]
    pub weights: Option<String>,
    /// A .solverstate to resume from (its .caffemodel is found as Caffe finds it)
    #[arg(long, value_name = "S.solverstate", conflicts_with = "weights")]
    pub snapshot: Option<PathBuf>,
    /// Stop at this iteration instead of the solver's max_iter
    #[arg(long, value_name = "N")]
    pub iterations: Option<usize>,
    /// Where to run: cpu, cuda (GPU 0) or cuda:N (Caffe's -gpu N). By default where the
    /// solver's `solver_mode` says, as Caffe does (its `device_id`, for GPU where this build
    /// and machine have one; the CPU otherwise)
    #[arg(long, alias = "gpu", value_parser = crate::run::parse_gpu_or_device)]
    pub device: Option<Device>,
    /// What Ctrl-C does: snapshot and stop (Caffe's default), snapshot and go on, or nothing
    #[arg(long = "sigint-effect", alias = "sigint_effect", value_enum, default_value_t = SignalEffect::Stop)]
    pub sigint_effect: SignalEffect,
    /// What SIGHUP does (Caffe's default: snapshot and go on)
    #[arg(long = "sighup-effect", alias = "sighup_effect", value_enum, default_value_t = SignalEffect::Snapshot)]
    pub sighup_effect: SignalEffect,
    /// The train net's level (Caffe's -level)
    #[arg(long, default_value_t = 0)]
    pub level: i32,
    /// Stages added to the train net's (Caffe's -stage), separated by commas
    #[arg(long, value_delimiter = ',')]
    pub stage: Vec<String>,
}

/// A net file a solver names, which Caffe reads relative to the folder
/// it runs in: an error that says so where the file is beside the solver
/// instead.
fn net_file(name: &str, solver: &Path) -> Result<PathBuf, Failure> {
    let path = PathBuf::from(name);
    if path.is_file() {
        return Ok(path);
    }
    let beside = solver.parent().map(|d| d.join(name));
    let hint = match beside {
        Some(b) if b.is_file() => format!(
            "; {} exists: a solver's paths are read from the folder train runs in, as Caffe reads them, so run it from {}",
            b.display(),
            solver
                .parent()
                .map_or(".".into(), |d| d.display().to_string())
        ),
        _ => String::new(),
    };
    Err(bad(format!(
        "{}: the net file {name:?} is not there{hint}",
        solver.display()
    )))
}

/// The flag each signal sets, cleared as it is read.
struct Signals {
    interrupt: Arc<AtomicBool>,
    hangup: Arc<AtomicBool>,
    on_interrupt: SignalEffect,
    on_hangup: SignalEffect,
}

impl Signals {
    fn install(on_interrupt: SignalEffect, on_hangup: SignalEffect) -> Result<Self, Failure> {
        let interrupt = Arc::new(AtomicBool::new(false));
        let hangup = Arc::new(AtomicBool::new(false));
        if on_interrupt != SignalEffect::None {
            signal_hook::flag::register(signal_hook::consts::SIGINT, interrupt.clone())?;
        }
        #[cfg(unix)]
        if on_hangup != SignalEffect::None {
            signal_hook::flag::register(signal_hook::consts::SIGHUP, hangup.clone())?;
        }
        Ok(Self {
            interrupt,
            hangup,
            on_interrupt,
            on_hangup,
        })
    }

    /// Caffe's `SignalHandler::CheckForSignals`.
    fn action(&self, log: &mut Log) -> SolverAction {
        let effect = |e: SignalEffect| match e {
            SignalEffect::Stop => SolverAction::Stop,
            SignalEffect::Snapshot => SolverAction::Snapshot,
            SignalEffect::None => SolverAction::None,
        };
        if self.interrupt.swap(false, Ordering::SeqCst) {
            log.info("Interrupted: SIGINT");
            return effect(self.on_interrupt);
        }
        if self.hangup.swap(false, Ordering::SeqCst) {
            log.info("Hung up: SIGHUP");
            return effect(self.on_hangup);
        }
        SolverAction::None
    }
}

/// Caffe's " (* 1 = 0.2 loss)" after a loss output's value.
fn loss_note(weight: f64, value: f64) -> String {
    if weight == 0.0 {
        String::new()
    } else {
        format!(" (* {} = {} loss)", g6(weight), g6(weight * value))
    }
}

/// Caffe's numbered output lines: each value of each output blob.
fn output_lines(kind: &str, outputs: &[NetOutput], log: &mut Log) {
    let mut k = 0;
    for out in outputs {
        for &v in &out.values {
            log.info(&format!(
                "    {kind} net output #{k}: {} = {}{}",
                out.name,
                g6(v),
                loss_note(out.loss_weight, v)
            ));
            k += 1;
        }
    }
}

/// Copies each `.caffemodel` of a comma-separated list into `net`
/// (Caffe's `CopyLayers`).
fn copy_weights(net: &mut Net<f32>, list: &str, log: &mut Log) -> Result<(), Failure> {
    for file in list.split(',').filter(|f| !f.is_empty()) {
        log.info(&format!("Finetuning from {file}"));
        let model = blobflow::CaffeModel::open(file)?;
        let report = net.copy_from(&model)?;
        for layer in &report.copied {
            log.info(&format!("Copying source layer {layer}"));
        }
        for layer in &report.ignored {
            log.info(&format!("Ignoring source layer {layer}"));
        }
        for layer in &report.missing {
            log.info(&format!(
                "No source layer for {layer}: its parameters stay as its fillers made them"
            ));
        }
    }
    Ok(())
}

/// `blobflow train`: Caffe's `caffe train`.
pub fn train(args: &TrainArgs) -> Result<(), Failure> {
    if args.snapshot.is_some() && args.weights.is_some() {
        return Err(bad(
            "Give a snapshot to resume training or weights to finetune but not both.",
        ));
    }
    let mut file = SolverFile::<f32>::open(&args.solver)?;
    if let Some(n) = args.iterations {
        file.max_iter = n;
    }
    // Caffe's -level and -stage: the train net's state, the file's stages kept.
    if args.level != 0 {
        file.train_state.level = args.level;
    }
    file.train_state.stages.extend(args.stage.iter().cloned());
    let mut log = Log::new("solver", None);
    if let Some(seed) = file.random_seed {
        blobflow::kernels::cpu::set_seed(seed);
    }
    let device = match args.device {
        Some(device) => device,
        None if file.solver_mode.as_deref() == Some("GPU") => {
            if gpu_available(file.device_id) {
                Device::Cuda(file.device_id)
            } else {
                log.info(
                    "The solver's solver_mode is GPU, but there is no GPU here for this build: \
                     running on the CPU (--device cuda insists)",
                );
                Device::Cpu
            }
        }
        None => Device::Cpu,
    };
    match device {
        Device::Cpu => log.info("Use CPU."),
        Device::Cuda(n) => log.info(&format!("Use GPU with device ID {n}")),
    }
    let registry = blobflow::data::data_registry::<f32>();
    let in_solver = |e: BlobError| bad(format!("{}: {e}", args.solver.display()));
    let train_path = net_file(file.train_net_file().map_err(in_solver)?, &args.solver)?;
    log.info(&format!(
        "Creating training net from net file: {}",
        train_path.display()
    ));
    let mut train = Net::builder()
        .state(file.train_state.clone())
        .registry(&registry)
        .from_file(&train_path)?;
    let mut tests = Vec::new();
    for (name, state) in file.test_net_files().map_err(in_solver)? {
        let path = net_file(name, &args.solver)?;
        log.info(&format!(
            "Creating test net (#{}) specified by net file: {}",
            tests.len(),
            path.display()
        ));
        tests.push(
            Net::builder()
                .state(state)
                .registry(&registry)
                .from_file(&path)?,
        );
    }
    log.info("Solver scaffolding done.");
    if let Some(list) = &args.weights {
        copy_weights(&mut train, list, &mut log)?;
    }
    if let Some(state_path) = &args.snapshot {
        log.info(&format!("Resuming from {}", state_path.display()));
        let state = blobflow::runtime::read_solver_state(state_path)?;
        let model = model_of_state(state_path, &state)?;
        train.copy_from(&blobflow::CaffeModel::open(&model)?)?;
        file.solver.restore(&state, &train.param_blobs())?;
    }
    if let Device::Cuda(ordinal) = device {
        to_gpu(
            std::iter::once(&mut train).chain(&mut tests),
            ordinal,
            &mut log,
        )?;
    }
    if file.snapshot_prefix.is_none() {
        // Caffe's default: the solver file's name without .prototxt.
        let stem = args.solver.with_extension("");
        file.snapshot_prefix = Some(stem.display().to_string());
    }
    log.info("Starting Optimization");
    log.info(&format!("Solving {}", train.name()));
    log.info(&format!(
        "Learning Rate Policy: {}",
        file.solver.lr_policy.name()
    ));
    let signals = Signals::install(args.sigint_effect, args.sighup_effect)?;
    let mut log = Log::new("solver", Some((file.solver.iter, file.max_iter)));
    let log_cell = std::cell::RefCell::new(&mut log);
    let stopped = solve_until(
        &mut file,
        &mut train,
        &mut tests,
        &mut |_, _, _| Ok(()),
        &mut |event| {
            let mut log = log_cell.borrow_mut();
            match event {
                SolveEvent::Test {
                    iter,
                    net,
                    outputs,
                    per_class,
                    segmentation,
                } => {
                    log.info(&format!("Iteration {iter}, Testing net (#{net})"));
                    for (class, iou) in segmentation.iter().enumerate() {
                        log.info(&format!("Seg Classes {class} IOU : {}", g6(*iou)));
                    }
                    if !segmentation.is_empty() {
                        let mean = segmentation.iter().sum::<f64>() / segmentation.len() as f64;
                        log.info(&format!("Seg mIOU : {}", g6(mean)));
                    }
                    for (_, label, ap) in per_class {
                        log.info(&format!("class{label}: {}", g6(ap)));
                    }
                    output_lines("Test", &outputs, &mut log);
                }
                SolveEvent::Loss {
                    iter,
                    smoothed,
                    outputs,
                    lr,
                    ..
                } => {
                    log.info(&format!("Iteration {iter}, loss = {}", g6(smoothed)));
                    output_lines("Train", &outputs, &mut log);
                    log.info(&format!("Iteration {iter}, lr = {}", g6(lr)));
                    log.progress(iter + 1);
                }
                SolveEvent::FinalLoss { iter, smoothed } => {
                    log.info(&format!("Iteration {iter}, loss = {}", g6(smoothed)));
                }
                SolveEvent::Snapshot { model, state } => {
                    log.info(&format!(
                        "Snapshotting to binary proto file {}",
                        model.display()
                    ));
                    log.info(&format!(
                        "Snapshotting solver state to binary proto file {}",
                        state.display()
                    ));
                }
            }
        },
        &mut || signals.action(&mut log_cell.borrow_mut()),
    )?;
    let log = log_cell.into_inner();
    log.info(if stopped {
        "Optimization stopped early."
    } else {
        "Optimization Done."
    });
    Ok(())
}

/// Moves `nets` to GPU `ordinal`, naming it in the log; an error where
/// this build has no CUDA.
fn to_gpu<'a>(
    nets: impl Iterator<Item = &'a mut Net<f32>>,
    ordinal: usize,
    log: &mut Log,
) -> Result<(), Failure> {
    #[cfg(feature = "cuda")]
    {
        let gpu = blobflow::runtime::cuda::CudaBackend::new(ordinal)?;
        log.info(&format!("GPU {ordinal}: {}", gpu.gpu().name()));
        for net in nets {
            net.to_device(gpu.clone())?;
        }
        Ok(())
    }
    #[cfg(not(feature = "cuda"))]
    {
        let _ = (nets, ordinal, log);
        Err(bad(
            "--device cuda: this build of blobflow has no CUDA; rebuild with --features cuda",
        ))
    }
}

/// Whether GPU `ordinal` can be used: this build has CUDA and the
/// machine a driver and that device.
fn gpu_available(ordinal: usize) -> bool {
    #[cfg(feature = "cuda")]
    {
        blobflow::runtime::cuda::CudaBackend::new(ordinal).is_ok()
    }
    #[cfg(not(feature = "cuda"))]
    {
        let _ = ordinal;
        false
    }
}

/// What `blobflow test` is asked to do.
#[derive(clap::Args)]
pub struct TestArgs {
    /// The net's .prototxt
    #[arg(long)]
    pub model: PathBuf,
    /// Trained weights (.caffemodel; several separated by commas)
    #[arg(long, value_name = "W.caffemodel")]
    pub weights: Option<String>,
    /// Batches to run
    #[arg(long, default_value_t = 50, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub iterations: usize,
    /// Where to run: cpu, cuda (GPU 0) or cuda:N (Caffe's -gpu N)
    #[arg(long, alias = "gpu", default_value = "cpu", value_parser = crate::run::parse_gpu_or_device)]
    pub device: Device,
    /// The net's level (Caffe's -level)
    #[arg(long, default_value_t = 0)]
    pub level: i32,
    /// The net's stages (Caffe's -stage), separated by commas
    #[arg(long, value_delimiter = ',')]
    pub stage: Vec<String>,
}

/// `blobflow test`: Caffe's `caffe test`, each output averaged over the
/// iterations.
pub fn test(args: &TestArgs) -> Result<(), Failure> {
    let mut log = Log::new("caffe", None);
    let registry = blobflow::data::data_registry::<f32>();
    let state = NetState {
        level: args.level,
        stages: args.stage.clone(),
        ..NetState::test()
    };
    let mut net = Net::builder()
        .state(state)
        .registry(&registry)
        .from_file(&args.model)?;
    match &args.weights {
        Some(list) => {
            for file in list.split(',').filter(|f| !f.is_empty()) {
                net.copy_from(&blobflow::CaffeModel::open(file)?)?;
            }
        }
        None => log.info("No weights given: every parameter as its filler made it"),
    }
    if let Device::Cuda(ordinal) = args.device {
        to_gpu(std::iter::once(&mut net), ordinal, &mut log)?;
    }
    log.info(&format!("Running for {} iterations.", args.iterations));
    let mut sums: Vec<NetOutput> = Vec::new();
    let mut loss = 0.0;
    for i in 0..args.iterations {
        loss += f64::from(net.forward()?);
        let batch = NetOutput::read_all(&net)?;
        for out in &batch {
            for &v in &out.values {
                log.info(&format!("Batch {i}, {} = {}", out.name, g6(v)));
            }
        }
        NetOutput::accumulate(&mut sums, batch);
    }
    let n = args.iterations as f64;
    log.info(&format!("Loss: {}", g6(loss / n)));
    for out in &sums {
        for v in &out.values {
            let mean = v / n;
            log.info(&format!(
                "{} = {}{}",
                out.name,
                g6(mean),
                loss_note(out.loss_weight, mean)
            ));
        }
    }
    Ok(())
}

/// `blobflow device-query`: Caffe's `caffe device_query`, and the CPU
/// path this machine takes.
pub fn device_query() -> Result<(), Failure> {
    let mut log = Log::new("caffe", None);
    let isa = blobflow::kernels::cpu::isa();
    log.info(&format!(
        "CPU: {} cores; kernels take the {isa:?} path (BLOBFLOW_CPU=avx2 or baseline picks a narrower one)",
        blobflow::kernels::cpu::cores()
    ));
    #[cfg(feature = "cuda")]
    {
        match blobflow::runtime::cuda::CudaBackend::new(0) {
            Ok(gpu) => {
                log.info("Querying GPUs 0");
                log.info("Device id:                     0");
                log.info(&format!(
                    "Name:                          {}",
                    gpu.gpu().name()
                ));
            }
            Err(e) => log.info(&format!("No GPU: {e}")),
        }
    }
    #[cfg(not(feature = "cuda"))]
    log.info("GPU: this build of blobflow has no CUDA (rebuild with --features cuda)");
    Ok(())
}
