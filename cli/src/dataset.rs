//! `blobflow convert-imageset` and `blobflow compute-image-mean`:
//! Caffe's dataset tools, with their flags and log lines.

use std::path::PathBuf;

use blobflow::data::{ImageSetEvent, ImageSetOptions};

use crate::log::{Log, g6};

type Failure = Box<dyn std::error::Error>;

/// The store kinds Caffe's tools write (`--backend`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Backend {
    /// LMDB.
    Lmdb,
    /// LevelDB.
    Leveldb,
}

impl From<Backend> for blobflow::data::Backend {
    fn from(backend: Backend) -> Self {
        match backend {
            Backend::Lmdb => Self::Lmdb,
            Backend::Leveldb => Self::LevelDb,
        }
    }
}

/// What `blobflow convert-imageset` is asked to do.
#[derive(clap::Args)]
pub struct ConvertImagesetArgs {
    /// The folder put before each name of the list, as written (end it with /)
    root_folder: String,
    /// The list: `IMAGE LABEL` a line
    list_file: PathBuf,
    /// The store to create
    db_name: PathBuf,
    /// Store images as one gray channel
    #[arg(long)]
    gray: bool,
    /// Shuffle the list's lines
    #[arg(long)]
    shuffle: bool,
    /// The store kind
    #[arg(long, value_enum, default_value_t = Backend::Lmdb)]
    backend: Backend,
    /// Resize each image to this width (with --resize-height)
    #[arg(long = "resize-width", alias = "resize_width", default_value_t = 0)]
    resize_width: usize,
    /// Resize each image to this height (with --resize-width)
    #[arg(long = "resize-height", alias = "resize_height", default_value_t = 0)]
    resize_height: usize,
    /// Refuse images whose size differs from the first one's
    #[arg(long = "check-size", alias = "check_size")]
    check_size: bool,
    /// Store the encoded image (JPEG, PNG) instead of its pixels
    #[arg(long)]
    encoded: bool,
    /// Re-encode as jpg or png (implies --encoded)
    #[arg(long = "encode-type", alias = "encode_type")]
    encode_type: Option<String>,
}

/// Caffe's `convert_imageset`.
pub fn convert_imageset(args: &ConvertImagesetArgs) -> Result<(), Failure> {
    let resize = match (args.resize_height, args.resize_width) {
        (0, 0) => None,
        (h, w) if h > 0 && w > 0 => Some((h, w)),
        (h, w) => {
            return Err(format!(
                "--resize-height {h} and --resize-width {w}: give both, or neither"
            )
            .into());
        }
    };
    let mut log = Log::new("convert_imageset", None);
    if args.encode_type.is_some() && !args.encoded {
        log.info("encode_type specified, assuming encoded=true.");
    }
    if args.shuffle {
        log.info("Shuffling data");
    }
    let options = ImageSetOptions {
        gray: args.gray,
        shuffle: args.shuffle,
        resize,
        check_size: args.check_size,
        encoded: args.encoded,
        encode_type: args.encode_type.clone(),
    };
    let mut skipped = 0;
    blobflow::data::convert_imageset(
        &args.root_folder,
        &args.list_file,
        &args.db_name,
        args.backend.into(),
        &options,
        &mut |event| match event {
            ImageSetEvent::Total(n) => log.info(&format!("A total of {n} images.")),
            ImageSetEvent::Skipped { line, why } => {
                skipped += 1;
                log.info(&format!("line {line}: {why}"));
            }
            ImageSetEvent::Processed(n) => log.info(&format!("Processed {n} files.")),
        },
    )?;
    if skipped > 0 {
        log.info(&format!(
            "{skipped} images could not be read and are not in {}",
            args.db_name.display()
        ));
    }
    Ok(())
}

/// What `blobflow compute-image-mean` is asked to do.
#[derive(clap::Args)]
pub struct ComputeImageMeanArgs {
    /// The store to read
    input_db: PathBuf,
    /// The .binaryproto to write (the mean image)
    output_file: Option<PathBuf>,
    /// The store kind
    #[arg(long, value_enum, default_value_t = Backend::Lmdb)]
    backend: Backend,
}

/// Caffe's `compute_image_mean`.
pub fn compute_image_mean(args: &ComputeImageMeanArgs) -> Result<(), Failure> {
    let mut log = Log::new("compute_image_mean", None);
    log.info("Starting iteration");
    let mean = blobflow::data::compute_image_mean(&args.input_db, args.backend.into(), &mut |n| {
        log.info(&format!("Processed {n} files."))
    })?;
    if let Some(out) = &args.output_file {
        log.info(&format!("Write to {}", out.display()));
        use prost::Message;
        blobflow::runtime::write_atomically(out, &mean.encode_to_vec())?;
    }
    let channels = mean.channels.unwrap_or(0).max(0) as usize;
    log.info(&format!("Number of channels: {channels}"));
    let dim = mean.data.len() / channels.max(1);
    for c in 0..channels {
        // Caffe sums each channel's mean values in double.
        let sum: f64 = mean.data[c * dim..(c + 1) * dim]
            .iter()
            .map(|&v| f64::from(v))
            .sum();
        log.info(&format!(
            "mean_value channel [{c}]: {}",
            g6(sum / dim as f64)
        ));
    }
    Ok(())
}
