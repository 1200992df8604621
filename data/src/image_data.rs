//! Caffe's `ImageData` layer: images named by a list file, read and
//! resized as Caffe's `ReadImageToCVMat` reads them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use blob_layers::Arity;
use blob_proto::ParamMessage;
use blob_runtime::{BlobError, MathElement};

use crate::datum::{ColorMode, Example, Pixels, decode_image};
use crate::list::{ListLine, read_image_list};
use crate::order::ListCycle;
use crate::prefetch::{Decoded, Decoder, PrefetchingDataLayer, Raw, Records, Setup};
use crate::resize::resize_linear;
use crate::transform::DataTransformer;

/// The images of a list, in its order or shuffled.
struct ImageRecords {
    list: PathBuf,
    root: String,
    entries: ListCycle<ListLine>,
    color: ColorMode,
    size: Option<(usize, usize)>,
}

impl ImageRecords {
    /// The file of a list line, read (decoding is the decoder's).
    fn read(root: &str, entry: &ListLine) -> Result<Raw, String> {
        let path = format!("{root}{}", entry.name);
        let bytes = blob_runtime::read_file(&path).map_err(|e| format!("Could not load {e}"))?;
        Ok(Raw {
            bytes,
            label: Some(entry.label),
            cut: None,
            pair: None,
        })
    }
}

/// Caffe's `ReadImageToCVMat(root_folder + name, new_height, new_width,
/// is_color)` on a file's bytes.
fn decode_file(
    raw: Raw,
    color: ColorMode,
    size: Option<(usize, usize)>,
) -> Result<Example, String> {
    let (channels, height, width, mut pixels) = decode_image(&raw.bytes, color)?;
    let (mut height, mut width) = (height, width);
    if let Some((h, w)) = size {
        pixels = resize_linear(&pixels, channels, height, width, h, w);
        (height, width) = (h, w);
    }
    Ok(Example {
        channels,
        height,
        width,
        pixels: Pixels::Bytes(pixels),
        label: raw.label.unwrap_or(0),
    })
}

impl Records for ImageRecords {
    fn cycle(
        &mut self,
        visit: &mut dyn FnMut(&str, Result<Raw, String>) -> bool,
    ) -> Result<(), String> {
        let root = &self.root;
        self.entries.run(|entry| {
            let key = format!("line {} ({})", entry.line, entry.name);
            visit(&key, Self::read(root, entry))
        });
        Ok(())
    }

    fn decoder(&self) -> Decoder {
        let (color, size) = (self.color, self.size);
        Arc::new(move |raw: Raw| decode_file(raw, color, size).map(Decoded::from))
    }

    fn origin(&self) -> String {
        self.list.display().to_string()
    }
}

fn refused(detail: impl Into<String>) -> BlobError {
    BlobError::InvalidParameter {
        op: "set up ImageData",
        detail: detail.into(),
    }
}

/// Caffe `ImageData` (`image_data_param { source batch_size shuffle
/// new_height new_width is_color root_folder rand_skip }` with
/// `transform_param`): its two tops hold `batch_size` images named by the
/// list file `source` (a line `NAME LABEL` each; `root_folder` is put
/// before each name as it is, as in Caffe), decoded (JPEG or PNG; colour
/// as B, G, R planes unless `is_color: false`), resized to `new_height` x
/// `new_width` where both are given (OpenCV's bilinear resize, byte for
/// byte), transformed, and their labels. The list is read in order and
/// started over after its end, or shuffled at the start and at each
/// pass with `shuffle`.
///
/// ```
/// use blob_data::data_registry;
/// use blob_layers::net::Net;
/// let dir = std::env::temp_dir().join(format!("blobflow-imagedata-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let gray = image::GrayImage::from_raw(2, 2, vec![0, 64, 128, 255]).unwrap();
/// gray.save(dir.join("a.png"))?;
/// std::fs::write(dir.join("list.txt"), "a.png 7\n")?;
/// let text = format!(r#"layer {{ name: "in" type: "ImageData" top: "data" top: "label"
///     image_data_param {{ source: "{0}/list.txt" root_folder: "{0}/" batch_size: 1
///                         is_color: false new_height: 4 new_width: 4 }} }}"#, dir.display());
/// let mut net = Net::<f32>::builder().registry(&data_registry()).from_prototxt(&text)?;
/// net.forward()?;
/// assert_eq!(net.blob("data").unwrap().shape(), [1, 1, 4, 4]);
/// assert_eq!(net.blob("label").unwrap().to_vec()?, [7.0]);
/// std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn image_data_layer<T: MathElement>(
    layer: &ParamMessage,
) -> Result<PrefetchingDataLayer<T>, BlobError> {
    let p = layer
        .message("image_data_param")
        .cloned()
        .unwrap_or_else(|| ParamMessage::new(&blob_proto::schema::IMAGE_DATA));
    let source = p.string("source").to_string();
    if source.is_empty() {
        return Err(refused("image_data_param gives no source (the list file)"));
    }
    let (h, w) = (p.uint("new_height") as usize, p.uint("new_width") as usize);
    let most = crate::datum::MOST_SIDE as usize;
    let size = match (h, w) {
        (0, 0) => None,
        (h, w) if h > most || w > most => {
            return Err(refused(format!(
                "new_height x new_width {h} x {w} is more than the {most} pixels a side an \
                 image may have"
            )));
        }
        (h, w) if h > 0 && w > 0 => Some((h, w)),
        _ => {
            return Err(refused(format!(
                "new_height and new_width must be given together ({h} and {w})"
            )));
        }
    };
    let batch_size = p.uint("batch_size") as usize;
    if batch_size == 0 {
        return Err(refused(format!(
            "image_data_param.batch_size must be at least 1 (source {source})"
        )));
    }
    let entries = read_image_list(Path::new(&source)).map_err(refused)?;
    if entries.is_empty() {
        return Err(refused(format!("{source}: the list names no image")));
    }
    let rand_skip = p.uint("rand_skip").min(u64::from(u32::MAX)) as u32;
    let entries = ListCycle::new(entries, p.boolean("shuffle"), rand_skip)
        .map_err(|e| refused(format!("{source}: {e}")))?;
    let records = ImageRecords {
        list: PathBuf::from(&source),
        root: p.string("root_folder").to_string(),
        entries,
        color: if p.boolean("is_color") {
            ColorMode::Color
        } else {
            ColorMode::Gray
        },
        size,
    };
    PrefetchingDataLayer::start(
        Setup {
            type_name: "ImageData",
            transformer: DataTransformer::<T>::from_layer(layer)?,
            batch_size,
            prefetch: layer
                .message("data_param")
                .map_or(4, |d| d.uint("prefetch") as usize),
            tops: Arity::exactly(2),
            geometry: None,
        },
        records,
    )
}
