//! The `blobflow` command-line tool.
//!
//! `blobflow inspect FILE [--json]` tells what a Caffe file holds: the
//! format, and for each layer its type and blobs (shape, count, sum of |x|).
//! `blobflow convert MODEL.caffemodel OUT.safetensors` writes a model's
//! learned blobs as `.safetensors`, one tensor per blob named `layer.index`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod inspect;

#[derive(Parser)]
#[command(
    name = "blobflow",
    version,
    about = "Caffe blobs and model files in Rust"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
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
    /// Write a .caffemodel's learned blobs as .safetensors (tensors `layer.index`)
    Convert {
        /// The Caffe model (new, V1 or V0 format)
        model: PathBuf,
        /// The .safetensors file to write
        out: PathBuf,
    },
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

fn convert(model: &Path, out: &Path) -> Result<String, blobflow::BlobError> {
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
    let bytes = model.to_safetensors()?;
    let tensors = blobflow::TensorFile::from_bytes(bytes.clone())?
        .names()
        .len();
    std::fs::write(out, &bytes).map_err(|e| blobflow::BlobError::Io {
        path: out.display().to_string(),
        source: e,
    })?;
    Ok(format!(
        "{}: {tensors} tensors, {} bytes",
        out.display(),
        bytes.len()
    ))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Inspect { file, json } => match inspect::describe(&file) {
            Ok(v) if json => {
                println!("{v}");
                ExitCode::SUCCESS
            }
            Ok(v) => {
                print!("{}", inspect::table(&v));
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("blobflow inspect: {e}");
                ExitCode::FAILURE
            }
        },
        Command::Convert { model, out } => match convert(&model, &out) {
            Ok(summary) => {
                println!("{summary}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("blobflow convert: {e}");
                ExitCode::FAILURE
            }
        },
    }
}
