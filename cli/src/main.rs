//! The `blobflow` command-line tool.
//!
//! `blobflow inspect FILE [--json]` tells what a Caffe file holds: the
//! format, and for each layer its type and blobs (shape, count, sum of |x|).

use std::path::PathBuf;
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
    /// Show the layers and blobs of a .caffemodel, .binaryproto or .solverstate
    Inspect {
        /// The Caffe file
        file: PathBuf,
        /// Print one JSON object instead of a table
        #[arg(long)]
        json: bool,
    },
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
    }
}
