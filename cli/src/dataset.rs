//! `blobflow convert-imageset`, `blobflow convert-annoset` and
//! `blobflow get-image-size` (the SSD fork's) and `blobflow
//! compute-image-mean`: Caffe's dataset tools, with their flags and log
//! lines.

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

/// How `convert-imageset` and `convert-annoset` read and store each
/// image.
#[derive(clap::Args)]
pub struct ImageFlags {
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

impl ImageFlags {
    /// The library's options, after Caffe's log lines about them.
    fn options(&self, log: &mut Log) -> Result<ImageSetOptions, Failure> {
        let resize = match (self.resize_height, self.resize_width) {
            (0, 0) => None,
            (h, w) if h > 0 && w > 0 => Some((h, w)),
            (h, w) => {
                return Err(format!(
                    "--resize-height {h} and --resize-width {w}: give both, or neither"
                )
                .into());
            }
        };
        if self.encode_type.is_some() && !self.encoded {
            log.info("encode_type specified, assuming encoded=true.");
        }
        if self.shuffle {
            log.info("Shuffling data");
        }
        Ok(ImageSetOptions {
            gray: self.gray,
            shuffle: self.shuffle,
            resize,
            check_size: self.check_size,
            encoded: self.encoded,
            encode_type: self.encode_type.clone(),
        })
    }
}

/// Caffe's log lines for a dataset tool's events; how many images were
/// passed over.
fn log_events<'a>(log: &'a mut Log, skipped: &'a mut usize) -> impl FnMut(ImageSetEvent) + 'a {
    move |event| match event {
        ImageSetEvent::Total(n) => log.info(&format!("A total of {n} images.")),
        ImageSetEvent::Skipped { line, why } => {
            *skipped += 1;
            log.info(&format!("line {line}: {why}"));
        }
        ImageSetEvent::Processed(n) => log.info(&format!("Processed {n} files.")),
        ImageSetEvent::Warning { line, what } => log.info(&format!("line {line}: {what}")),
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
    #[command(flatten)]
    images: ImageFlags,
}

/// Caffe's `convert_imageset`.
pub fn convert_imageset(args: &ConvertImagesetArgs) -> Result<(), Failure> {
    let mut log = Log::new("convert_imageset", None);
    let options = args.images.options(&mut log)?;
    let mut skipped = 0;
    blobflow::data::convert_imageset(
        &args.root_folder,
        &args.list_file,
        &args.db_name,
        args.images.backend.into(),
        &options,
        &mut log_events(&mut log, &mut skipped),
    )?;
    report_skipped(&mut log, skipped, &args.db_name);
    Ok(())
}

fn report_skipped(log: &mut Log, skipped: usize, db: &std::path::Path) {
    if skipped > 0 {
        log.info(&format!(
            "{skipped} images could not be read and are not in {}",
            db.display()
        ));
    }
}

/// What `blobflow convert-annoset` is asked to do.
#[derive(clap::Args)]
pub struct ConvertAnnosetArgs {
    /// The folder put before each name of the list, as written (end it with /)
    root_folder: String,
    /// The list: `IMAGE ANNOTATION` a line (VOC XML files, or TuSimple JSON files for lanes)
    list_file: PathBuf,
    /// The store to create
    db_name: PathBuf,
    /// The annotation kind: detection (boxes), detection_with_segmentation (boxes and a
    /// label image: `IMAGE ANNOTATION LABEL_IMAGE` lines, the YOLO fork's), or
    /// lane_detection (TuSimple's lanes, with --label-type json: the YOLO fork's LaneData)
    #[arg(long = "anno-type", alias = "anno_type", default_value = "detection")]
    anno_type: String,
    /// The annotation files' format: xml (PASCAL VOC's) for detection, json (TuSimple's)
    /// for lane_detection
    #[arg(long = "label-type", alias = "label_type", default_value = "xml")]
    label_type: String,
    /// The LabelMap prototxt naming each label (labelmap_voc.prototxt); lanes need none
    #[arg(long = "label-map-file", alias = "label_map_file")]
    label_map_file: Option<PathBuf>,
    /// Refuse a label map giving a name or a label twice
    #[arg(long = "check-label", alias = "check_label")]
    check_label: bool,
    /// Resize keeping the aspect ratio (not supported: use --resize-height/--resize-width)
    #[arg(long = "min-dim", alias = "min_dim", default_value_t = 0)]
    min_dim: usize,
    /// Resize keeping the aspect ratio (not supported: use --resize-height/--resize-width)
    #[arg(long = "max-dim", alias = "max_dim", default_value_t = 0)]
    max_dim: usize,
    #[command(flatten)]
    images: ImageFlags,
}

/// The SSD fork's `convert_annoset` (what its `create_annoset.py` runs).
pub fn convert_annoset(args: &ConvertAnnosetArgs) -> Result<(), Failure> {
    let Some(kind) = blobflow::data::AnnotationKind::from_name(&args.anno_type) else {
        return Err(format!(
            "--anno-type {}: detection, detection_with_segmentation and lane_detection are \
             the kinds written (for classification, convert-imageset writes the Datum records \
             Data reads)",
            args.anno_type
        )
        .into());
    };
    let lanes = kind == blobflow::data::AnnotationKind::LaneDetection;
    let format = if lanes { "json" } else { "xml" };
    if args.label_type != format {
        return Err(format!(
            "--label-type {}: {format} is the format read for --anno-type {} (xml: PASCAL \
             VOC's boxes; json: TuSimple's lanes)",
            args.label_type, args.anno_type
        )
        .into());
    }
    if args.min_dim > 0 || args.max_dim > 0 {
        return Err("--min-dim / --max-dim are not supported: resize with \
                    --resize-height and --resize-width"
            .into());
    }
    let mut log = Log::new("convert_annoset", None);
    let options = args.images.options(&mut log)?;
    let mut skipped = 0;
    blobflow::data::convert_annoset(
        &args.root_folder,
        &args.list_file,
        &args.db_name,
        args.images.backend.into(),
        &options,
        kind,
        args.label_map_file.as_deref(),
        args.check_label,
        &mut log_events(&mut log, &mut skipped),
    )?;
    report_skipped(&mut log, skipped, &args.db_name);
    Ok(())
}

/// What `blobflow get-image-size` is asked to do.
#[derive(clap::Args)]
pub struct GetImageSizeArgs {
    /// The folder the list's names are under
    root_folder: String,
    /// The list: `IMAGE ANNOTATION` (or `IMAGE LABEL`) a line
    list_file: PathBuf,
    /// The name_size_file to write: `name height width` a line
    out_file: PathBuf,
    /// A file of `NAME ID` lines: write each image's id for its name (COCO)
    #[arg(long = "name-id-file", alias = "name_id_file")]
    name_id_file: Option<PathBuf>,
}

/// The SSD fork's `get_image_size`: the `name_size_file` of a test set.
pub fn get_image_size(args: &GetImageSizeArgs) -> Result<(), Failure> {
    let mut log = Log::new("get_image_size", None);
    let mut skipped = 0;
    let text = blobflow::data::image_sizes(
        &args.root_folder,
        &args.list_file,
        args.name_id_file.as_deref(),
        &mut log_events(&mut log, &mut skipped),
    )?;
    blobflow::runtime::write_atomically(&args.out_file, text.as_bytes())?;
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
