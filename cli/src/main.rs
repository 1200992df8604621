//! The `blobflow` command-line tool.
//!
//! `blobflow inspect FILE [--json]` tells what a Caffe file holds: the
//! format, and for each layer its type and blobs (shape, count, sum of |x|).
//! `blobflow convert MODEL.caffemodel OUT.safetensors` writes a model's
//! learned blobs as `.safetensors`, one tensor per blob named `layer.index`;
//! `blobflow convert NET.prototxt [WEIGHTS.caffemodel] OUT.onnx` writes the
//! net as an ONNX model.
//! `blobflow run NET.prototxt [WEIGHTS]` runs a net's forward pass on
//! `.npy` inputs and writes its outputs as `.npy`; `blobflow time
//! NET.prototxt` is Caffe's `caffe time`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod dataset;
mod inspect;
mod log;
mod run;
mod train;
mod upgrade;

#[derive(Parser)]
#[command(
    name = "blobflow",
    version,
    about = "Caffe blobs and model files in Rust"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// The most host memory all blobs may take, e.g. 512M or 4G (the
    /// machine's physical memory by default); a file or net declaring
    /// more is refused with the layer and the sizes
    #[arg(long, global = true, value_name = "SIZE", value_parser = memory_size)]
    memory_limit: Option<usize>,
}

/// `SIZE` of `--memory-limit`: bytes, or a number with K, M, G or T
/// (powers of 1024).
fn memory_size(text: &str) -> Result<usize, String> {
    let (digits, unit) = match text.char_indices().last() {
        Some((at, c)) if c.is_ascii_alphabetic() => (&text[..at], c.to_ascii_uppercase()),
        _ => (text, 'B'),
    };
    let shift = match unit {
        'B' => 0,
        'K' => 10,
        'M' => 20,
        'G' => 30,
        'T' => 40,
        other => return Err(format!("unknown unit '{other}' (use K, M, G or T)")),
    };
    let value: usize = digits
        .parse()
        .map_err(|_| format!("'{text}' is not a size such as 512M or 4G"))?;
    value
        .checked_mul(1 << shift)
        .filter(|&b| b > 0)
        .ok_or_else(|| format!("'{text}' is not a size between 1 byte and 16 EiB"))
}

#[derive(Subcommand)]
enum Command {
    /// Show the layers and blobs of a .caffemodel, .binaryproto, .solverstate or .safetensors, or what a net or solver .prototxt says
    Inspect {
        /// The Caffe file
        file: PathBuf,
        /// Print one JSON object instead of a table
        #[arg(long)]
        json: bool,
    },
    /// Write a .caffemodel's learned blobs as .safetensors (tensors
    /// `layer.index`), or a net and its weights as an ONNX model (opset
    /// 13, a dynamic batch axis): `convert MODEL.caffemodel OUT.safetensors`
    /// or `convert NET.prototxt [WEIGHTS.caffemodel] OUT.onnx`
    Convert {
        /// MODEL.caffemodel OUT.safetensors, or NET.prototxt [WEIGHTS.caffemodel] OUT.onnx
        #[arg(num_args = 2..=3, required = true)]
        files: Vec<PathBuf>,
        /// ONNX only: the blobs to export as the graph's outputs, with only
        /// the layers they need (e.g. up to an SSD's DetectionOutput)
        #[arg(long, value_delimiter = ',')]
        outputs: Vec<String>,
        /// .safetensors only: `caffe` names tensors `layer.index`;
        /// `framework` the names candle, burn and PyTorch look for
        /// (`layer.weight`, `layer.bias`, BatchNorm's `running_mean` and
        /// `running_var`)
        #[arg(long, value_enum, default_value_t = Names::Caffe)]
        names: Names,
        /// Build the net with a Caffe fork's forms of Caffe's layer types,
        /// for a net written for that fork (caffe-yolov3: darknet's pooling
        /// sizes; faceboxes: its dense PriorBox); repeatable
        #[arg(long = "fork", value_name = "NAME", value_parser = run::parse_fork)]
        forks: Vec<blobflow::layers::Fork>,
    },
    /// Run a net's forward pass (TEST phase) and print each output blob's shape and summary
    Run {
        /// The net's .prototxt
        prototxt: PathBuf,
        /// Trained weights (.caffemodel), matched to the net's layers by name
        weights: Option<PathBuf>,
        /// An input blob's values from a .npy file (f4 or f8, C order); repeatable.
        /// A file of another shape than the declared one reshapes the net to it
        #[arg(long = "input", value_name = "NAME=FILE.npy", value_parser = run::name_value)]
        inputs: Vec<(String, String)>,
        /// An input blob's shape, e.g. data=1,3,240,320; repeatable
        #[arg(long = "shape", value_name = "NAME=DIMS", value_parser = run::name_value)]
        shapes: Vec<(String, String)>,
        /// Write each output blob as DIR/<name>.npy
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
        /// Write the net's weights (loaded, or as the fillers made them) as a .caffemodel Caffe reads
        #[arg(long, value_name = "FILE.caffemodel")]
        save: Option<PathBuf>,
        /// With --out: write every blob of the net, not only the outputs
        #[arg(long, requires = "out")]
        all_blobs: bool,
        /// Fill every parameter at random from SEED (Xavier; biases U(-0.1, 0.1)) instead of
        /// the prototxt's fillers, which deploy files often leave out (Caffe then fills zeros)
        #[arg(long, value_name = "SEED", conflicts_with = "weights")]
        fill: Option<u64>,
        /// Where to run: cpu, cuda (GPU 0) or cuda:N
        #[arg(long, default_value = "cpu", value_parser = run::parse_device)]
        device: run::Device,
        /// Build the net with a Caffe fork's forms of Caffe's layer types,
        /// for a net written for that fork (caffe-yolov3: darknet's pooling
        /// sizes; faceboxes: its dense PriorBox); repeatable
        #[arg(long = "fork", value_name = "NAME", value_parser = run::parse_fork)]
        forks: Vec<blobflow::layers::Fork>,
    },
    /// Train a net from a solver prototxt (Caffe's `caffe train`): its data layers read
    /// their stores, Caffe's log lines go to standard error
    Train(train::TrainArgs),
    /// Score a net's TEST phase over its data (Caffe's `caffe test`): each output averaged
    /// over the iterations
    Test(train::TestArgs),
    /// Write an image list's images into an LMDB or LevelDB of Caffe Datum records (Caffe's
    /// `convert_imageset ROOTFOLDER/ LISTFILE DB_NAME`)
    #[command(alias = "convert_imageset")]
    ConvertImageset(dataset::ConvertImagesetArgs),
    /// Write images and their VOC XML boxes into an LMDB or LevelDB of AnnotatedDatum
    /// records, AnnotatedData's input (the SSD fork's `convert_annoset`)
    #[command(alias = "convert_annoset")]
    ConvertAnnoset(dataset::ConvertAnnosetArgs),
    /// Each listed image's name, height and width: the `name_size_file` DetectionOutput's
    /// save_output_param and DetectionEvaluate read (the SSD fork's `get_image_size`)
    #[command(alias = "get_image_size")]
    GetImageSize(dataset::GetImageSizeArgs),
    /// The mean image of a store's records, as the .binaryproto `mean_file` reads (Caffe's
    /// `compute_image_mean`)
    #[command(alias = "compute_image_mean")]
    ComputeImageMean(dataset::ComputeImageMeanArgs),
    /// Rewrite a net .prototxt of an old format (V0, V1 `layers`, ...) in today's (Caffe's
    /// `upgrade_net_proto_text`)
    #[command(alias = "upgrade_net_proto_text")]
    UpgradeNetProtoText(upgrade::UpgradeArgs),
    /// Rewrite a binary net (a .caffemodel of an old format) in today's (Caffe's
    /// `upgrade_net_proto_binary`)
    #[command(alias = "upgrade_net_proto_binary")]
    UpgradeNetProtoBinary(upgrade::UpgradeArgs),
    /// Rewrite a solver .prototxt naming its solver by the old `solver_type` enum in today's
    /// format (Caffe's `upgrade_solver_proto_text`)
    #[command(alias = "upgrade_solver_proto_text")]
    UpgradeSolverProtoText(upgrade::UpgradeArgs),
    /// The CPU path the kernels take, and the GPU where there is one (Caffe's
    /// `caffe device_query`)
    #[command(alias = "device_query")]
    DeviceQuery,
    /// Time each layer's forward and backward pass (Caffe's `caffe time`), inputs all zeros
    Time {
        /// The net's .prototxt
        prototxt: PathBuf,
        /// Trained weights (.caffemodel); fillers' values otherwise
        #[arg(long)]
        weights: Option<PathBuf>,
        /// Passes to average over (after one warm-up pass)
        #[arg(long, default_value_t = 50, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
        iterations: usize,
        /// The inputs' first dimension (the declared one otherwise)
        #[arg(long, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
        batch: Option<usize>,
        /// An input blob's shape, e.g. data=64,1,28,28 (a data layer's
        /// tops have none in the prototxt); repeatable
        #[arg(long = "shape", value_name = "NAME=DIMS", value_parser = run::name_value)]
        shapes: Vec<(String, String)>,
        /// Where to run: cpu, cuda (GPU 0) or cuda:N
        #[arg(long, default_value = "cpu", value_parser = run::parse_device)]
        device: run::Device,
        /// Build the net with a Caffe fork's forms of Caffe's layer types,
        /// for a net written for that fork (caffe-yolov3: darknet's pooling
        /// sizes; faceboxes: its dense PriorBox); repeatable
        #[arg(long = "fork", value_name = "NAME", value_parser = run::parse_fork)]
        forks: Vec<blobflow::layers::Fork>,
        /// Let each blob, as it is written, take the memory of a blob no
        /// later layer reads (as inference engines' arenas do): a pass
        /// then writes into memory the cache still holds. Only the inputs
        /// and outputs keep their values; for nets that only run forward
        #[arg(long)]
        reuse_memory: bool,
        /// The phase to build the net in (Caffe's -phase; Caffe's time
        /// defaults to TRAIN): train times a training iteration's forward
        /// and backward, its data layers reading their sources
        #[arg(long, value_enum, default_value = "test")]
        phase: run::Phase,
    },
}

/// Writes `text` to standard output. A reader that went away (`| head`)
/// ends the command quietly, as Unix tools end; any other failure to
/// write (a full disk) is an error naming the command.
fn emit(command: &str, text: &str) -> ExitCode {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("blobflow {command}: cannot write the output: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Prints `lines` (or the error, prefixed with the command's name).
fn report(command: &str, result: Result<Vec<String>, Box<dyn std::error::Error>>) -> ExitCode {
    match result {
        Ok(lines) => emit(
            command,
            &lines.iter().map(|l| format!("{l}\n")).collect::<String>(),
        ),
        Err(e) => {
            eprintln!("blobflow {command}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Caffe's tools take gflags' single-dash long flags (`caffe train
/// -solver S -weights W`); they are read here as their `--` forms, so
/// users' scripts keep working with `caffe` replaced by `blobflow`.
fn caffe_style_flag(arg: std::ffi::OsString) -> std::ffi::OsString {
    match arg.to_str() {
        Some(a)
            if a.len() > 2
                && a.starts_with('-')
                && !a.starts_with("--")
                && a[1..2].chars().all(|c| c.is_ascii_alphabetic())
                && a[1..].split('=').next().is_some_and(|name| {
                    name.len() > 1 && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                }) =>
        {
            format!("-{a}").into()
        }
        _ => arg,
    }
}

/// The end of a command that logs as it goes: nothing more, or the
/// error, prefixed with the command's name.
fn quiet(command: &str, result: Result<(), Box<dyn std::error::Error>>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("blobflow {command}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Converts `model` to `out`, and says what it wrote.
/// Whether `out` names the file `model` names (through `.`, `..` or
/// links): converting onto it would replace the model being read.
fn same_file(model: &Path, out: &Path) -> bool {
    match (std::fs::canonicalize(model), std::fs::canonicalize(out)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// How `convert` names a .safetensors' tensors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Names {
    /// `layer.index`, Caffe's blob order
    Caffe,
    /// `layer.weight`, `layer.bias`, `layer.running_mean`, ...
    Framework,
}

/// Converts `files` (a model and a .safetensors, or a prototxt, its
/// weights and an .onnx), and says what it wrote.
fn convert(
    files: &[PathBuf],
    outputs: &[String],
    names: Names,
    forks: &[blobflow::layers::Fork],
) -> Result<String, Box<dyn std::error::Error>> {
    let out = files.last().ok_or("convert: no file given")?;
    if out
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("onnx"))
    {
        return run::to_onnx(
            &files[0],
            files.get(1).filter(|_| files.len() == 3),
            out,
            outputs,
            forks,
        );
    }
    if files.len() != 2 || !outputs.is_empty() || !forks.is_empty() {
        return Err("convert: a .safetensors is written from one .caffemodel \
                    (`convert MODEL.caffemodel OUT.safetensors`); an ONNX model from \
                    a prototxt and its weights (`convert NET.prototxt WEIGHTS.caffemodel OUT.onnx`)"
            .into());
    }
    let names = match names {
        Names::Caffe => blobflow::TensorNames::Caffe,
        Names::Framework => blobflow::TensorNames::Framework,
    };
    Ok(to_safetensors(&files[0], out, names)?)
}

/// Writes `model`'s learned blobs to `out` as .safetensors.
fn to_safetensors(
    model: &Path,
    out: &Path,
    names: blobflow::TensorNames,
) -> Result<String, blobflow::BlobError> {
    if same_file(model, out) {
        return Err(blobflow::BlobError::Io {
            path: out.display().to_string(),
            source: std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "is the model being converted; give the .safetensors another path",
            ),
        });
    }
    let model = blobflow::CaffeModel::open(model)?;
    let bytes = model.to_safetensors_named(names)?;
    let tensors = blobflow::TensorFile::from_bytes(bytes.clone())?
        .names()
        .len();
    blobflow::runtime::write_atomically(out, &bytes)?;
    Ok(format!(
        "{}: {tensors} tensors, {} bytes",
        out.display(),
        bytes.len()
    ))
}

/// The messages every prototxt, model and solver is read against:
/// `caffe.proto` and the forks' parameter fields the layer registry adds.
fn schemas() -> blobflow::proto::Schemas {
    blobflow::layers::registry::LayerRegistry::<f32>::with_caffe_layers()
        .schemas()
        .clone()
}

fn main() -> ExitCode {
    let cli = Cli::parse_from(std::env::args_os().map(caffe_style_flag));
    if let Some(limit) = cli.memory_limit {
        blobflow::set_host_memory_limit(limit);
    }
    match cli.command {
        Command::Inspect { file, json } => {
            let described = match inspect::describe(&file) {
                Ok(d) => d,
                Err(e) => {
                    eprintln!("blobflow inspect: {e}");
                    return ExitCode::FAILURE;
                }
            };
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            let written = if json {
                described.write_json(&mut out)
            } else {
                described.write_table(&mut out)
            }
            .and_then(|()| std::io::Write::flush(&mut out).map_err(inspect::WriteError::Output));
            match written {
                Ok(()) => ExitCode::SUCCESS,
                // A reader that stops early (`| head`) is not a failure.
                Err(inspect::WriteError::Output(e))
                    if e.kind() == std::io::ErrorKind::BrokenPipe =>
                {
                    ExitCode::SUCCESS
                }
                Err(inspect::WriteError::Output(e)) => {
                    eprintln!("blobflow inspect: cannot write the output: {e}");
                    ExitCode::FAILURE
                }
                Err(inspect::WriteError::Summary(e)) => {
                    eprintln!("blobflow inspect: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Run {
            prototxt,
            weights,
            inputs,
            shapes,
            out,
            save,
            all_blobs,
            fill,
            device,
            forks,
        } => report(
            "run",
            run::run(&run::RunArgs {
                prototxt,
                weights,
                inputs,
                shapes,
                out,
                save,
                all_blobs,
                fill,
                device,
                forks,
            }),
        ),
        Command::Time {
            prototxt,
            weights,
            iterations,
            batch,
            shapes,
            device,
            forks,
            reuse_memory,
            phase,
        } => report(
            "time",
            run::time(&run::TimeArgs {
                prototxt,
                weights,
                iterations,
                batch,
                shapes,
                device,
                forks,
                reuse_memory,
                phase,
            }),
        ),
        Command::Train(args) => quiet("train", train::train(&args)),
        Command::Test(args) => quiet("test", train::test(&args)),
        Command::ConvertImageset(args) => {
            quiet("convert-imageset", dataset::convert_imageset(&args))
        }
        Command::ConvertAnnoset(args) => quiet("convert-annoset", dataset::convert_annoset(&args)),
        Command::GetImageSize(args) => quiet("get-image-size", dataset::get_image_size(&args)),
        Command::ComputeImageMean(args) => {
            quiet("compute-image-mean", dataset::compute_image_mean(&args))
        }
        Command::UpgradeNetProtoText(args) => quiet("upgrade-net-proto-text", upgrade::text(&args)),
        Command::UpgradeNetProtoBinary(args) => {
            quiet("upgrade-net-proto-binary", upgrade::binary(&args))
        }
        Command::UpgradeSolverProtoText(args) => {
            quiet("upgrade-solver-proto-text", upgrade::solver_text(&args))
        }
        Command::DeviceQuery => quiet("device-query", train::device_query()),
        Command::Convert {
            files,
            outputs,
            names,
            forks,
        } => match convert(&files, &outputs, names, &forks) {
            Ok(summary) => emit("convert", &format!("{summary}\n")),
            Err(e) => {
                eprintln!("blobflow convert: {e}");
                ExitCode::FAILURE
            }
        },
    }
}
