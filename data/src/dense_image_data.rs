//! SegNet's `DenseImageData` layer (alexgkendall/caffe-segnet's
//! `dense_image_data_layer.cpp`): images and their label images named
//! in pairs by a list file, for training a net that labels every pixel.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use blob_layers::Arity;
use blob_proto::ParamMessage;
use blob_proto::schema::{FieldDefault, FieldKind, FieldSchema, MessageSchema};
use blob_runtime::{BlobError, MathElement};

use crate::datum::{ColorMode, Example, Pixels, decode_image};
use crate::list::{PairLine, read_pair_list};
use crate::order::ListCycle;
use crate::prefetch::{Decoded, Decoder, LabelPlane, PrefetchingDataLayer, Raw, Records, Setup};
use crate::resize::{resize_linear, resize_nearest};
use crate::transform::DataTransformer;

/// `DenseImageDataParameter`, as SegNet's fork declares it (`mean_file`
/// is declared there and read by nothing; so here), and ENet's
/// `label_divide_factor`.
pub(crate) static DENSE_IMAGE_DATA_PARAMETER: MessageSchema = MessageSchema {
    name: "DenseImageDataParameter",
    fields: &[
        FieldSchema::optional("source", 1, FieldKind::String),
        FieldSchema::optional("batch_size", 2, FieldKind::UInt32),
        FieldSchema::optional("rand_skip", 3, FieldKind::UInt32),
        FieldSchema::optional("shuffle", 4, FieldKind::Bool),
        FieldSchema::optional("new_height", 5, FieldKind::UInt32),
        FieldSchema::optional("new_width", 6, FieldKind::UInt32),
        FieldSchema::optional("is_color", 7, FieldKind::Bool)
            .with_default(FieldDefault::Bool(true)),
        FieldSchema::optional("mean_file", 8, FieldKind::String),
        FieldSchema::optional("root_folder", 9, FieldKind::String),
        FieldSchema::optional("mirror", 10, FieldKind::Bool),
        FieldSchema::optional("crop_width", 11, FieldKind::UInt32),
        FieldSchema::optional("crop_height", 12, FieldKind::UInt32),
        // ENet's fork (TimoSaemann/caffe-enet): labels for its encoder,
        // resized to `new_height / label_divide_factor` x `new_width /
        // label_divide_factor`.
        FieldSchema::optional("label_divide_factor", 13, FieldKind::UInt32)
            .with_default(FieldDefault::Int(1)),
    ],
};

/// `dense_image_data_param` in `LayerParameter`. SegNet's fork numbers it
/// 138, which BVLC's `tile_param` holds; a prototxt names it, so only a
/// binary net's number differs (and `.caffemodel` readers skip the
/// layers of a net they do not load).
pub(crate) const DENSE_IMAGE_DATA_FIELD: FieldSchema = FieldSchema::optional(
    "dense_image_data_param",
    10138,
    FieldKind::Message(&DENSE_IMAGE_DATA_PARAMETER),
);

/// What a record carries besides its image's bytes: its label image's
/// bytes and the draws of its mirror and crop, taken on the prefetch
/// thread in record order (Caffe's `caffe_rng_rand() % 2`, then `% (height
/// - crop_height + 1)` and `% (width - crop_width + 1)`).
pub(crate) struct PairRaw {
    label_bytes: Vec<u8>,
    mirror: Option<u32>,
    crop: Option<[u32; 2]>,
}

/// How each pair is decoded.
#[derive(Clone, Copy)]
struct Decoding {
    color: ColorMode,
    size: Option<(usize, usize)>,
    /// The label's size where it is not the image's (ENet's
    /// `label_divide_factor`).
    label_size: Option<(usize, usize)>,
    mirror: bool,
    crop: Option<(usize, usize)>,
}

/// The pairs of a list, in its order or shuffled.
struct PairRecords {
    list: PathBuf,
    root: String,
    entries: ListCycle<PairLine>,
    decoding: Decoding,
}

impl PairRecords {
    /// Both files of a pair, read (decoding is the decoder's), and the
    /// pair's draws.
    fn read(root: &str, decoding: &Decoding, entry: &PairLine) -> Result<Raw, String> {
        let read = |name: &str| {
            blob_runtime::read_file(format!("{root}{name}"))
                .map_err(|e| format!("Could not load {e}"))
        };
        let bytes = read(&entry.image)?;
        let label_bytes = read(&entry.label)?;
        let rand = blob_kernels::cpu::rng_rand;
        let mirror = decoding.mirror.then(rand);
        let crop = decoding.crop.map(|_| [rand(), rand()]);
        Ok(Raw {
            bytes,
            label: None,
            cut: None,
            pair: Some(PairRaw {
                label_bytes,
                mirror,
                crop,
            }),
        })
    }
}

/// Decodes a pair as SegNet's layer reads it: the image by
/// `ReadImageToCVMat(.., new_height, new_width, is_color)` (bilinear),
/// the label gray and resized by its nearest pixel, both mirrored and
/// cropped alike.
fn decode_pair(raw: Raw, decoding: Decoding) -> Result<Decoded, String> {
    let pair = raw
        .pair
        .expect("DenseImageData's records carry their label image");
    let read = |bytes: &[u8], color: ColorMode, nearest: bool| {
        let (channels, height, width, pixels) = decode_image(bytes, color)?;
        let size = if nearest {
            decoding.label_size.or(decoding.size)
        } else {
            decoding.size
        };
        Ok::<_, String>(match size {
            Some((h, w)) if nearest => (
                channels,
                h,
                w,
                resize_nearest(&pixels, channels, (height, width), (h, w)),
            ),
            Some((h, w)) => (
                channels,
                h,
                w,
                resize_linear(&pixels, channels, height, width, h, w),
            ),
            None => (channels, height, width, pixels),
        })
    };
    let (channels, height, width, mut image) = read(&raw.bytes, decoding.color, false)?;
    let (_, label_height, label_width, mut label) = read(&pair.label_bytes, ColorMode::Gray, true)
        .map_err(|e| format!("its label image: {e}"))?;
    if decoding.label_size.is_none() && (label_height, label_width) != (height, width) {
        return Err(format!(
            "its image is {height} x {width} but its label image {label_height} x {label_width}: \
             they must match"
        ));
    }
    if pair.mirror.is_some_and(|draw| draw % 2 != 0) {
        mirror_rows(&mut image, width);
        mirror_rows(&mut label, label_width);
    }
    let (mut height, mut width) = (height, width);
    if let (Some((crop_h, crop_w)), Some([draw_h, draw_w])) = (decoding.crop, pair.crop) {
        if crop_h > height || crop_w > width {
            return Err(format!(
                "crop_height x crop_width {crop_h} x {crop_w} is larger than its {height} x \
                 {width} image"
            ));
        }
        let top = draw_h as usize % (height - crop_h + 1);
        let left = draw_w as usize % (width - crop_w + 1);
        image = cut(&image, (height, width), (top, left), (crop_h, crop_w));
        label = cut(&label, (height, width), (top, left), (crop_h, crop_w));
        (height, width) = (crop_h, crop_w);
    }
    Ok(Decoded {
        example: Example {
            channels,
            height,
            width,
            pixels: Pixels::Bytes(image),
            label: 0,
        },
        label_plane: Some(LabelPlane {
            height: if decoding.crop.is_some() {
                height
            } else {
                label_height
            },
            width: if decoding.crop.is_some() {
                width
            } else {
                label_width
            },
            values: label,
        }),
        objects: None,
        segmentation: None,
        lanes: None,
    })
}

/// Each row of C-H-W planes reversed (`cv::flip(.., 1)`).
fn mirror_rows(planes: &mut [u8], width: usize) {
    for row in planes.chunks_exact_mut(width.max(1)) {
        row.reverse();
    }
}

/// The `size` window at `(top, left)` of each plane of `planes`.
fn cut(
    planes: &[u8],
    (height, width): (usize, usize),
    (top, left): (usize, usize),
    (rows, columns): (usize, usize),
) -> Vec<u8> {
    let mut out = Vec::with_capacity(planes.len() / (height * width).max(1) * rows * columns);
    for plane in planes.chunks_exact((height * width).max(1)) {
        for y in top..top + rows {
            out.extend_from_slice(&plane[y * width + left..][..columns]);
        }
    }
    out
}

impl Records for PairRecords {
    fn cycle(
        &mut self,
        visit: &mut dyn FnMut(&str, Result<Raw, String>) -> bool,
    ) -> Result<(), String> {
        let (root, decoding) = (&self.root, &self.decoding);
        self.entries.run(|entry| {
            let key = format!("line {} ({} {})", entry.line, entry.image, entry.label);
            visit(&key, Self::read(root, decoding, entry))
        });
        Ok(())
    }

    fn decoder(&self) -> Decoder {
        let decoding = self.decoding;
        Arc::new(move |raw: Raw| decode_pair(raw, decoding))
    }

    fn origin(&self) -> String {
        self.list.display().to_string()
    }
}

fn refused(detail: impl Into<String>) -> BlobError {
    BlobError::InvalidParameter {
        op: "set up DenseImageData",
        detail: detail.into(),
    }
}

/// Two sizes given together or not at all (`new_height` / `new_width`,
/// `crop_height` / `crop_width`), each at most a decoded image's side.
fn both(p: &ParamMessage, names: [&str; 2]) -> Result<Option<(usize, usize)>, BlobError> {
    let most = crate::datum::MOST_SIDE as usize;
    match names.map(|n| p.uint(n) as usize) {
        [0, 0] => Ok(None),
        [h, w] if h > most || w > most => Err(refused(format!(
            "{} x {} of {h} x {w} is more than the {most} pixels a side an image may have",
            names[0], names[1]
        ))),
        [h, w] if h > 0 && w > 0 => Ok(Some((h, w))),
        [h, w] => Err(refused(format!(
            "{} and {} must be given together ({h} and {w})",
            names[0], names[1]
        ))),
    }
}

/// SegNet's `DenseImageData` (`dense_image_data_param { source batch_size
/// shuffle rand_skip new_height new_width is_color root_folder mirror
/// crop_height crop_width }` with `transform_param`): its two tops hold
/// `batch_size` images and their label images, named in pairs by the list
/// file `source` (a line `IMAGE LABEL_IMAGE` each; `root_folder` is put
/// before each name as it is). The image is decoded as `ImageData`
/// decodes it (B, G, R planes unless `is_color: false`; OpenCV's
/// bilinear resize to `new_height` x `new_width` where both are given),
/// then transformed (`scale`, `mean_value`, `mean_file`); the label image
/// is read gray, resized by its nearest pixel, and its values are the
/// label top's (`N x 1 x H x W`), neither centred nor scaled. `mirror`
/// flips both at random and `crop_height` x `crop_width` cuts both at the
/// same random place. ENet's `label_divide_factor` makes the labels
/// `new_height / factor` x `new_width / factor` (its encoder's output).
/// `transform_param`'s own `mirror` and `crop_size`
/// would move the image alone, and are refused (SegNet's fork stops at its
/// first batch). The list is read in order and started over after its
/// end, or shuffled at the start and at each pass with `shuffle`. With
/// `batch_size: 1` and no resize or crop, each batch takes its image's
/// size.
///
/// ```
/// use blob_data::data_registry;
/// use blob_layers::net::Net;
/// let dir = std::env::temp_dir().join(format!("blobflow-dense-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// image::GrayImage::from_raw(2, 1, vec![10, 20]).unwrap().save(dir.join("a.png"))?;
/// image::GrayImage::from_raw(2, 1, vec![0, 3]).unwrap().save(dir.join("a_label.png"))?;
/// std::fs::write(dir.join("list.txt"), "a.png a_label.png\n")?;
/// let text = format!(r#"layer {{ name: "in" type: "DenseImageData" top: "data" top: "label"
///     dense_image_data_param {{ source: "{0}/list.txt" root_folder: "{0}/" batch_size: 1
///                               is_color: false }} }}"#, dir.display());
/// let mut net = Net::<f32>::builder().registry(&data_registry()).from_prototxt(&text)?;
/// net.forward()?;
/// assert_eq!(net.blob("data").unwrap().to_vec()?, [10.0, 20.0]);
/// assert_eq!(net.blob("label").unwrap().shape(), [1, 1, 1, 2]);
/// assert_eq!(net.blob("label").unwrap().to_vec()?, [0.0, 3.0]);
/// std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn dense_image_data_layer<T: MathElement>(
    layer: &ParamMessage,
) -> Result<PrefetchingDataLayer<T>, BlobError> {
    let p = layer
        .message(DENSE_IMAGE_DATA_FIELD.name)
        .cloned()
        .unwrap_or_else(|| ParamMessage::new(&DENSE_IMAGE_DATA_PARAMETER));
    let source = p.string("source").to_string();
    if source.is_empty() {
        return Err(refused(
            "dense_image_data_param gives no source (the list file)",
        ));
    }
    let size = both(&p, ["new_height", "new_width"])?;
    let crop = both(&p, ["crop_height", "crop_width"])?;
    let label_size = match (p.uint("label_divide_factor") as usize, size, crop) {
        (0, ..) => return Err(refused("label_divide_factor must be at least 1")),
        (1, ..) => None,
        (_, None, _) => {
            return Err(refused(
                "label_divide_factor divides new_height and new_width: give them too",
            ));
        }
        (_, _, Some(_)) => {
            return Err(refused(
                "label_divide_factor with crop_height / crop_width: ENet's fork cuts the \
                 smaller label at the image's offsets; crop one or the other",
            ));
        }
        (f, Some((h, w)), None) if h / f == 0 || w / f == 0 => {
            return Err(refused(format!(
                "label_divide_factor {f} leaves no label pixel of new_height x new_width {h} x {w}"
            )));
        }
        (f, Some((h, w)), None) => Some((h / f, w / f)),
    };
    let batch_size = p.uint("batch_size") as usize;
    if batch_size == 0 {
        return Err(refused(format!(
            "dense_image_data_param.batch_size must be at least 1 (source {source})"
        )));
    }
    let transformer = DataTransformer::<T>::from_layer(layer)?;
    if transformer.draws() {
        return Err(refused(
            "transform_param's mirror and crop_size would move the image but not its label \
             image: use dense_image_data_param's mirror and crop_height / crop_width",
        ));
    }
    let entries = read_pair_list(Path::new(&source)).map_err(refused)?;
    if entries.is_empty() {
        return Err(refused(format!("{source}: the list names no image")));
    }
    let rand_skip = p.uint("rand_skip").min(u64::from(u32::MAX)) as u32;
    let entries = ListCycle::new(entries, p.boolean("shuffle"), rand_skip)
        .map_err(|e| refused(format!("{source}: {e}")))?;
    let records = PairRecords {
        list: PathBuf::from(&source),
        root: p.string("root_folder").to_string(),
        entries,
        decoding: Decoding {
            color: if p.boolean("is_color") {
                ColorMode::Color
            } else {
                ColorMode::Gray
            },
            size,
            label_size,
            mirror: p.boolean("mirror"),
            crop,
        },
    };
    PrefetchingDataLayer::start(
        Setup {
            type_name: "DenseImageData",
            transformer,
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
