//! `blobflow run` (a net's forward pass on inputs from `.npy` files, its
//! outputs written as `.npy`) and `blobflow time` (Caffe's `caffe time`:
//! each layer's forward and backward milliseconds).

use std::path::{Path, PathBuf};

use blobflow::BlobError;
use blobflow::layers::Fork;
use blobflow::layers::net::{Net, NetState};
use blobflow::layers::registry::LayerRegistry;
use blobflow::runtime::{CaffeModel, npy};

/// Where a net runs: `cpu`, `cuda` (GPU 0) or `cuda:N` (builds with
/// `--features cuda`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Device {
    /// The host's cores.
    Cpu,
    /// The GPU of that ordinal.
    Cuda(usize),
}

impl std::fmt::Display for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Device::Cpu => write!(f, "cpu"),
            Device::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

/// A `--device` value: `cpu`, `cuda` or `cuda:N`.
pub fn parse_device(arg: &str) -> Result<Device, String> {
    match arg {
        "cpu" => Ok(Device::Cpu),
        "cuda" => Ok(Device::Cuda(0)),
        _ => arg
            .strip_prefix("cuda:")
            .and_then(|n| n.parse().ok())
            .map(Device::Cuda)
            .ok_or_else(|| format!("expected cpu, cuda or cuda:N (N a GPU's number), got {arg:?}")),
    }
}

/// A `--fork` value: a Caffe fork whose forms of Caffe's layer types
/// the net is built with ([`blobflow::layers::Fork`]).
pub fn parse_fork(arg: &str) -> Result<Fork, String> {
    Fork::from_name(arg).ok_or_else(|| {
        let names: Vec<&str> = Fork::ALL.iter().map(|f| f.name()).collect();
        format!(
            "no fork {arg:?} has layers of its own here; known: {}",
            names.join(", ")
        )
    })
}

/// A `--device` value, or Caffe's `-gpu N` (a bare number: that GPU;
/// Caffe's `all` is GPU 0 here, one GPU a run).
pub fn parse_gpu_or_device(arg: &str) -> Result<Device, String> {
    match arg.parse::<usize>() {
        Ok(n) => Ok(Device::Cuda(n)),
        Err(_) if arg == "all" => Ok(Device::Cuda(0)),
        Err(_) => parse_device(arg),
    }
}

/// A `NAME=VALUE` argument.
pub fn name_value(arg: &str) -> Result<(String, String), String> {
    match arg.split_once('=') {
        Some((n, v)) if !n.is_empty() && !v.is_empty() => Ok((n.to_string(), v.to_string())),
        _ => Err(format!("expected NAME=VALUE, got {arg:?}")),
    }
}

/// A build refused for the shape of an `--input` the net does not have,
/// said as that: the net has no such input.
fn unknown_input(
    e: Box<dyn std::error::Error>,
    given: &[(String, String, blobflow::Blob<f32>)],
    shapes: &[(String, String)],
) -> Box<dyn std::error::Error> {
    let text = e.to_string();
    let named = given.iter().map(|(n, _, _)| n).find(|n| {
        text.contains(&format!("a shape is given for '{n}'"))
            && !shapes.iter().any(|(s, _)| s == *n)
    });
    match (named, text.rsplit_once("(the inputs: ")) {
        (Some(name), Some((_, inputs))) => bad(format!(
            "the net has no input named {name:?} (its inputs: {}",
            inputs
        )),
        _ => e,
    }
}

/// Input shapes by name.
type Shapes = Vec<(String, Vec<usize>)>;

/// Each `--shape NAME=1,3,H,W` as dims.
fn parsed_shapes(shapes: &[(String, String)]) -> Result<Shapes, Box<dyn std::error::Error>> {
    shapes
        .iter()
        .map(|(name, text)| Ok((name.clone(), dims(text).map_err(bad)?)))
        .collect()
}

/// `1,3,H,W` as dims.
fn dims(text: &str) -> Result<Vec<usize>, String> {
    text.split(',')
        .map(|d| {
            d.trim()
                .parse::<usize>()
                .map_err(|_| format!("{d:?} in shape {text:?} is not a dimension"))
        })
        .collect()
}

fn bad(what: String) -> Box<dyn std::error::Error> {
    what.into()
}

/// Builds the net in the TEST phase and loads its weights, saying what
/// it loaded.
fn load(
    prototxt: &Path,
    weights: Option<&Path>,
    shapes: &Shapes,
    forks: &[Fork],
    phase: Phase,
    log: &mut Vec<String>,
) -> Result<Net<f32>, Box<dyn std::error::Error>> {
    let (mut registry, state) = match phase {
        Phase::Test => (LayerRegistry::<f32>::with_caffe_layers(), NetState::test()),
        Phase::Train => {
            log.push(
                "phase: TRAIN (data layers read their sources; each pass is a training \
                 iteration's forward and backward, nothing folded)"
                    .into(),
            );
            (blobflow::data::data_registry::<f32>(), NetState::train())
        }
    };
    for &fork in forks {
        registry.use_fork(fork);
        log.push(format!("layers: {}'s forms of Caffe's", fork.name()));
    }
    let mut builder = Net::<f32>::builder().state(state).registry(&registry);
    for (name, shape) in shapes {
        builder = builder.input_shape(name, shape);
    }
    let mut net = builder.from_file(prototxt)?;
    match weights {
        Some(w) => {
            let report = net.copy_from(&CaffeModel::open(w)?)?;
            log.push(format!(
                "weights: {} layers from {}{}{}",
                report.copied.len(),
                w.display(),
                if report.ignored.is_empty() {
                    String::new()
                } else {
                    // Caffe skips them too: a model saved from a training
                    // net holds its loss and data layers, which a deploy
                    // prototxt leaves out. Their weights, if any, go
                    // unused.
                    let named: Vec<&str> = report.ignored.iter().take(4).map(String::as_str).collect();
                    format!(
                        " ({} of its layers are not in this net and were skipped, as Caffe skips them: {}{})",
                        report.ignored.len(),
                        named.join(", "),
                        if report.ignored.len() > named.len() { ", ..." } else { "" }
                    )
                },
                if report.missing.is_empty() {
                    String::new()
                } else {
                    format!("; left as filled: {}", report.missing.join(", "))
                }
            ));
        }
        None => log.push("weights: none given, every parameter as its filler made it".into()),
    }
    Ok(net)
}

/// Writes the net of `prototxt` with `weights` to `out` as ONNX (up to
/// `outputs` where given), and says what it wrote.
pub fn to_onnx(
    prototxt: &Path,
    weights: Option<&PathBuf>,
    out: &Path,
    outputs: &[String],
    forks: &[Fork],
) -> Result<String, Box<dyn std::error::Error>> {
    let mut log = Vec::new();
    let mut net = load(
        prototxt,
        weights.map(PathBuf::as_path),
        &Vec::new(),
        forks,
        Phase::Test,
        &mut log,
    )?;
    let mut export = blobflow::layers::onnx::OnnxExport::new();
    if !outputs.is_empty() {
        export = export.outputs(outputs.iter().cloned());
    }
    export.save(&mut net, out)?;
    let bytes = std::fs::metadata(out)?.len();
    log.push(format!("{}: ONNX opset 13, {bytes} bytes", out.display()));
    Ok(log.join("\n"))
}

/// Moves the net to GPU `ordinal`.
#[cfg(feature = "cuda")]
fn to_gpu(net: &mut Net<f32>, ordinal: usize, log: &mut Vec<String>) -> Result<GpuSync, BlobError> {
    let gpu = blobflow::runtime::cuda::CudaBackend::new(ordinal)?;
    log.push(format!(
        "device: {}  |  convolutions: {}",
        gpu.gpu().name(),
        blobflow::layers::gpu_convolution_path()
    ));
    net.to_device(gpu.clone())?;
    Ok(GpuSync(Some(gpu)))
}

#[cfg(not(feature = "cuda"))]
fn to_gpu(
    _net: &mut Net<f32>,
    _ordinal: usize,
    _log: &mut Vec<String>,
) -> Result<GpuSync, BlobError> {
    Err(BlobError::Device {
        op: "--device cuda",
        source: blobflow::runtime::DeviceError::new(
            "this build of blobflow has no CUDA; rebuild with --features cuda",
        ),
    })
}

/// Waits for the GPU's queued work, for timings (nothing on the CPU).
struct GpuSync(
    #[cfg(feature = "cuda")] Option<std::sync::Arc<blobflow::runtime::cuda::CudaBackend>>,
);

impl GpuSync {
    fn none() -> Self {
        Self(
            #[cfg(feature = "cuda")]
            None,
        )
    }

    fn wait(&self) -> Result<(), Box<dyn std::error::Error>> {
        #[cfg(feature = "cuda")]
        if let Some(gpu) = &self.0 {
            gpu.gpu().synchronize()?;
        }
        Ok(())
    }
}

/// What `blobflow run` is asked to do.
pub struct RunArgs {
    pub prototxt: PathBuf,
    pub weights: Option<PathBuf>,
    pub inputs: Vec<(String, String)>,
    pub shapes: Vec<(String, String)>,
    pub out: Option<PathBuf>,
    pub save: Option<PathBuf>,
    pub all_blobs: bool,
    pub fill: Option<u64>,
    pub device: Device,
    pub forks: Vec<Fork>,
}

/// Every parameter blob filled at random from `seed`: Xavier's uniform
/// for blobs of two or more axes, `U(-0.1, 0.1)` for biases and slopes,
/// and BatchNorm statistics a trained net could hold (means `U(-0.1,
/// 0.1)`, variances `U(0.5, 1.5)`, scale factor 1); the BN fork's
/// slope `U(0.5, 1.5)`, bias and mean `U(-0.1, 0.1)`, variance `U(0.5,
/// 1.5)`.
fn fill_random(net: &Net<f32>, seed: u64) -> Result<(), BlobError> {
    use blobflow::proto::{ParamMessage, ParamValue, schema};
    blobflow::kernels::cpu::set_seed(seed);
    let mut xavier = ParamMessage::new(&schema::FILLER);
    xavier.set("type", ParamValue::Str("xavier".into()));
    let mut small = ParamMessage::new(&schema::FILLER);
    small.set("type", ParamValue::Str("uniform".into()));
    small.set("min", ParamValue::Float(-0.1));
    small.set("max", ParamValue::Float(0.1));
    for (param, blob) in net.params().iter().zip(net.param_blobs()) {
        let statistics = match (net.layer_type(&param.layer), param.index) {
            // Statistics a net could have learned: means near 0,
            // variances near 1, a scale factor of 1.
            (Some("BatchNorm"), 0) => Some((-0.1, 0.1)),
            (Some("BatchNorm"), 1) => Some((0.5, 1.5)),
            (Some("BatchNorm"), _) => Some((1.0, 1.0)),
            // The BN fork: slope, bias, mean, variance.
            (Some("BN"), 0 | 3) => Some((0.5, 1.5)),
            (Some("BN"), _) => Some((-0.1, 0.1)),
            _ => None,
        };
        if let Some((lo, hi)) = statistics {
            blobflow::kernels::cpu::uniform(lo, hi, &mut blob.mutable_cpu_data()?).map_err(
                |e| BlobError::InvalidParameter {
                    op: "fill normalization statistics",
                    detail: e.to_string(),
                },
            )?;
            continue;
        }
        let filler = if blob.num_axes() >= 2 {
            &xavier
        } else {
            &small
        };
        blobflow::layers::filler::fill(blob, filler)?;
    }
    Ok(())
}

/// The `.npy` file of each blob written: its name with `/` as `_`, and a
/// blob whose name gives a file another blob already has (`a/b` and
/// `a_b`) gets `~2`, `~3`... before `.npy`, so no output overwrites
/// another; a blob written twice (an output with `--all-blobs`) keeps
/// its one file.
#[derive(Default)]
struct OutputFiles {
    /// Each blob given a file, and its file.
    given: std::collections::HashMap<String, String>,
    taken: std::collections::HashSet<String>,
}

impl OutputFiles {
    fn name_for(&mut self, blob: &str) -> String {
        if let Some(file) = self.given.get(blob) {
            return file.clone();
        }
        let stem = blob.replace('/', "_");
        let mut file = format!("{stem}.npy");
        let mut k = 2;
        while self.taken.contains(&file) {
            file = format!("{stem}~{k}.npy");
            k += 1;
        }
        self.taken.insert(file.clone());
        self.given.insert(blob.to_string(), file.clone());
        file
    }
}

/// Runs a forward pass and reports each output; the lines to print.
pub fn run(args: &RunArgs) -> Result<Vec<String>, Box<dyn std::error::Error>> {
    let mut log = Vec::new();
    for (k, (name, file)) in args.inputs.iter().enumerate() {
        if let Some((_, first)) = args.inputs[..k].iter().find(|(n, _)| n == name) {
            return Err(bad(format!(
                "--input {name} is given twice ({first} and {file}); give each input once"
            )));
        }
    }
    // The inputs' files first: the net is built at their shapes (a
    // prototxt may declare a 1 x 1 placeholder its layers cannot take),
    // unless --shape names the input.
    let mut given = Vec::new();
    for (name, file) in &args.inputs {
        let values: blobflow::Blob<f32> = npy::read(file)?;
        given.push((name.clone(), file.clone(), values));
    }
    let mut shapes = parsed_shapes(&args.shapes)?;
    for (name, _, values) in &given {
        if !shapes.iter().any(|(n, _)| n == name) {
            shapes.push((name.clone(), values.shape().to_vec()));
        }
    }
    let mut net = match load(
        &args.prototxt,
        args.weights.as_deref(),
        &shapes,
        &args.forks,
        Phase::Test,
        &mut log,
    ) {
        Ok(net) => net,
        Err(e) => return Err(unknown_input(e, &given, &args.shapes)),
    };
    if let Some(seed) = args.fill {
        fill_random(&net, seed)?;
        log.push(format!(
            "weights: every parameter drawn at random (seed {seed}): Xavier, biases U(-0.1, 0.1)"
        ));
    }
    let names: Vec<String> = net.inputs().iter().map(|s| s.to_string()).collect();
    for (name, _, _) in &given {
        if !names.contains(name) {
            return Err(bad(format!(
                "the net has no input named {name:?} (its inputs: {})",
                names.join(", ")
            )));
        }
    }
    for name in &names {
        let blob = net.blob_mut(name).expect("an input is a blob");
        match given.iter().find(|(n, _, _)| n == name) {
            Some((_, file, values)) => {
                if values.shape() != blob.shape() {
                    log.push(format!(
                        "input {name}: {file} is {}, --shape gives {}: reshaped to the file",
                        values.shape_string(),
                        blob.shape_string()
                    ));
                    blob.reshape(values.shape())?;
                } else {
                    log.push(format!(
                        "input {name}: {file} ({}; the net is built at the file's shape)",
                        values.shape_string()
                    ));
                }
                blob.copy_from(values, false)?;
            }
            None => {
                blob.mutable_cpu_data()?.fill(0.0);
                log.push(format!(
                    "input {name}: none given, filled with zeros ({})",
                    blob.shape_string()
                ));
            }
        }
    }
    if let Some(file) = &args.save {
        net.to_model()?.save(file)?;
        log.push(format!("weights saved: {}", file.display()));
    }
    if let Device::Cuda(ordinal) = args.device {
        to_gpu(&mut net, ordinal, &mut log)?;
    }
    net.forward()?;
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir).map_err(|source| BlobError::Io {
            path: dir.display().to_string(),
            source,
        })?;
    }
    let mut files = OutputFiles::default();
    if args.all_blobs
        && let Some(dir) = &args.out
    {
        for name in net.blob_names() {
            let file = dir.join(files.name_for(name));
            npy::write(&file, net.blob(name).expect("a blob of the net"))?;
        }
        log.push(format!(
            "every blob ({}) written to {}",
            net.blob_names().len(),
            dir.display()
        ));
    }
    for name in net.outputs() {
        let blob = net.blob(name).expect("an output is a blob");
        let values = blob.to_vec()?;
        let (min, max, sum) = values.iter().fold(
            (f32::INFINITY, f32::NEG_INFINITY, 0f64),
            |(lo, hi, s), &v| (lo.min(v), hi.max(v), s + f64::from(v)),
        );
        let mean = sum / values.len().max(1) as f64;
        let mut line = format!(
            "output {name}: {} min {min} max {max} mean {mean:.6}",
            blob.shape_string()
        );
        if let Some(dir) = &args.out {
            let file = dir.join(files.name_for(name));
            npy::write(&file, blob)?;
            line.push_str(&format!(" -> {}", file.display()));
        }
        log.push(line);
    }
    Ok(log)
}

/// What `blobflow time` is asked to do.
pub struct TimeArgs {
    pub prototxt: PathBuf,
    pub weights: Option<PathBuf>,
    pub iterations: usize,
    pub batch: Option<usize>,
    pub shapes: Vec<(String, String)>,
    pub device: Device,
    pub forks: Vec<Fork>,
    pub reuse_memory: bool,
    pub phase: Phase,
}

/// The phase a net is built in (Caffe's `-phase`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Phase {
    /// Layers and blobs of the TRAIN phase; data layers read their
    /// sources, and a pass runs backward as training does.
    #[value(alias = "TRAIN")]
    Train,
    /// The TEST phase, as a deployed net runs.
    #[value(alias = "TEST")]
    Test,
}

/// Caffe's `caffe time`: the average forward and backward milliseconds
/// of each layer over `iterations` passes (after one warm-up pass), then
/// the totals. Inputs hold zeros, as a deploy net's do under `caffe
/// time`; in the TRAIN phase data layers read their sources (a data
/// layer's time is then taking a prefetched batch).
pub fn time(args: &TimeArgs) -> Result<Vec<String>, Box<dyn std::error::Error>> {
    let mut log = Vec::new();
    let mut net = load(
        &args.prototxt,
        args.weights.as_deref(),
        &parsed_shapes(&args.shapes)?,
        &args.forks,
        args.phase,
        &mut log,
    )?;
    let inputs: Vec<String> = net.inputs().iter().map(|s| s.to_string()).collect();
    for name in &inputs {
        let blob = net.blob_mut(name).expect("an input is a blob");
        if let Some(b) = args.batch {
            let mut shape = blob.shape().to_vec();
            if let Some(first) = shape.first_mut() {
                *first = b;
            }
            blob.reshape(&shape)?;
        }
        blob.mutable_cpu_data()?.fill(0.0);
        log.push(format!("input {name}: zeros, {}", blob.shape_string()));
    }
    let sync = if let Device::Cuda(ordinal) = args.device {
        to_gpu(&mut net, ordinal, &mut log)?
    } else {
        GpuSync::none()
    };
    log.push(format!(
        "threads: {} (RAYON_NUM_THREADS sets it)",
        rayon_threads()
    ));
    log.push(cpu_path());
    if net.layer_names().next().is_none() {
        return Err(bad("the net has no layers".into()));
    }
    if args.reuse_memory {
        net.reshape()?;
        let reuse = net.reuse_memory()?;
        log.push(format!(
            "memory: {} intermediate blobs share {:.1} MB, {:.1} MB apart (--reuse-memory: \
             only the inputs and outputs keep their values)",
            reuse.blobs,
            reuse.bytes_after as f64 / 1e6,
            reuse.bytes_before as f64 / 1e6
        ));
        let blocked = net.blobs_in_channel_blocks();
        if !blocked.is_empty() {
            log.push(format!(
                "channel blocks: {} blobs handed from layer to layer 16 channels side by side \
                 ({} .. {})",
                blocked.len(),
                blocked[0],
                blocked[blocked.len() - 1]
            ));
        }
    }
    let timing = net.time_with(args.iterations, || sync.wait())?;
    let width = timing
        .layers
        .iter()
        .map(|l| l.name.len())
        .max()
        .unwrap_or(5)
        .max(5);
    log.push(format!(
        "{:width$}  {:14}  {:>12}  {:>12}",
        "layer", "type", "forward ms", "backward ms"
    ));
    for l in &timing.layers {
        let folded = l
            .folded_into
            .as_ref()
            .map(|into| format!("  (forward folded into {into})"))
            .unwrap_or_default();
        log.push(format!(
            "{:width$}  {:14}  {:>12.4}  {:>12.4}{folded}",
            l.name, l.kind, l.forward_ms, l.backward_ms
        ));
    }
    let forward_ms = timing.forward_ms();
    // The batch: the first input's, or where a data layer feeds the net
    // (the TRAIN phase), its first top's.
    let first_top = net
        .layer_names()
        .next()
        .and_then(|l| net.layer_tops(l))
        .and_then(|tops| tops.first().map(|t| t.to_string()));
    let batch = inputs
        .first()
        .cloned()
        .or(first_top)
        .and_then(|name| net.blob(&name))
        .and_then(|b| b.shape().first().copied())
        .unwrap_or(1);
    log.push(format!("Average Forward pass: {forward_ms:.4} ms"));
    log.push(format!(
        "Average Backward pass: {:.4} ms",
        timing.backward_ms()
    ));
    log.push(format!(
        "Average Forward-Backward: {:.4} ms",
        timing.forward_backward_ms
    ));
    log.push(format!(
        "Forward: {:.1} images/s at batch {batch}",
        batch as f64 * 1e3 / forward_ms.max(1e-12)
    ));
    let macs: u64 = timing
        .layers
        .iter()
        .filter_map(|l| net.multiply_adds(&l.name))
        .sum();
    if macs > 0 {
        let achieved = 2.0 * macs as f64 / 1e9 / (forward_ms / 1e3).max(1e-12);
        log.push(format!(
            "Forward: {:.6} GFLOP a pass in convolutions and inner products (multiply-adds twice), {achieved:.1} GFLOP/s",
            2.0 * macs as f64 / 1e9,
        ));
        if args.device == Device::Cpu {
            // Measured after the passes, on as many threads as they ran.
            let peak = blobflow::kernels::cpu::fma_peak(blobflow::kernels::cpu::cores());
            log.push(format!(
                "Forward: {:.0}% of this machine's multiply-add peak, measured now: {peak}",
                100.0 * achieved / peak.gflops
            ));
        }
    }
    Ok(log)
}

/// Which of the CPU kernels' instruction families ran, and the widest
/// the machine has (`blobflow time`'s line `cpu: ...`).
fn cpu_path() -> String {
    use blobflow::kernels::cpu::{Isa, isa};
    let widest = Isa::ALL
        .into_iter()
        .rev()
        .find(|i| i.is_available())
        .unwrap_or(Isa::Baseline);
    let ran = isa();
    if ran == widest {
        format!("cpu: {ran} kernels (the widest this machine has; BLOBFLOW_CPU caps it)")
    } else {
        format!("cpu: {ran} kernels (capped by BLOBFLOW_CPU; this machine has {widest})")
    }
}

fn rayon_threads() -> usize {
    std::env::var("RAYON_NUM_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}
