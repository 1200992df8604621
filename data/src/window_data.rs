//! Caffe's `WindowData` layer (R-CNN's fine-tuning input): windows of
//! images, named with their overlap and class in a window file, cut out
//! with context, warped to a square and sampled foreground and
//! background in a fixed ratio.

use std::path::PathBuf;
use std::sync::Arc;

use blob_layers::Arity;
use blob_proto::ParamMessage;
use blob_runtime::{BlobError, MathElement};

use crate::datum::{ColorMode, Example, Pixels, decode_image};
use crate::prefetch::{Decoder, PrefetchingDataLayer, Raw, Records, Setup};
use crate::resize::resize_linear;
use crate::transform::DataTransformer;

fn refused(detail: impl Into<String>) -> BlobError {
    BlobError::InvalidParameter {
        op: "set up WindowData",
        detail: detail.into(),
    }
}

/// A window to cut from an image: its corners (inclusive, in pixels)
/// and whether it is mirrored.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Cut {
    pub x1: i32,
    pub y1: i32,
    pub x2: i32,
    pub y2: i32,
    pub mirror: bool,
}

/// One window of the window file.
#[derive(Clone, Debug)]
struct Window {
    image: usize,
    /// Its class (0 for a background window).
    label: i32,
    corners: [i32; 4],
    /// The window file's line that gives it.
    line: usize,
}

/// One image of the window file.
struct Image {
    path: String,
    /// Its bytes, read once at set-up with `cache_images`.
    cached: Option<Arc<Vec<u8>>>,
}

/// The window file read: the images, and the windows sorted into
/// foreground (overlap at least `fg_threshold`) and background (below
/// `bg_threshold`); windows between the two are left out, as in Caffe.
struct WindowFile {
    images: Vec<Image>,
    foreground: Vec<Window>,
    background: Vec<Window>,
}

/// The whitespace-separated words of a file with their line numbers,
/// read as C++'s `>>` reads them.
struct Words<'a> {
    file: &'a str,
    words: std::iter::Peekable<Box<dyn Iterator<Item = (usize, &'a str)> + 'a>>,
    last_line: usize,
}

impl<'a> Words<'a> {
    fn new(file: &'a str, text: &'a str) -> Self {
        let words: Box<dyn Iterator<Item = (usize, &'a str)>> = Box::new(
            text.lines()
                .enumerate()
                .flat_map(|(i, line)| line.split_whitespace().map(move |w| (i + 1, w))),
        );
        Self {
            file,
            words: words.peekable(),
            last_line: 1,
        }
    }

    fn at_end(&mut self) -> bool {
        self.words.peek().is_none()
    }

    /// The next word, read as `what`.
    fn next<V: std::str::FromStr>(&mut self, what: &str) -> Result<(usize, V), String> {
        let Some((line, word)) = self.words.next() else {
            return Err(format!(
                "{}, line {}: the file ends where {what} was expected",
                self.file, self.last_line
            ));
        };
        self.last_line = line;
        let value = word.parse().map_err(|_| {
            format!(
                "{}, line {line}: {what} {:?} is not a number of its kind",
                self.file,
                blob_proto::excerpt(word)
            )
        })?;
        Ok((line, value))
    }
}

/// The most images and windows a window file may name, so that a
/// corrupt count cannot ask for unbounded memory.
const MOST_WINDOWS: usize = 1 << 26;

impl WindowFile {
    /// Reads Caffe's window file: repeated `# IMAGE_INDEX`, the image's
    /// path, its channels, height and width, the number of windows, then
    /// `CLASS OVERLAP X1 Y1 X2 Y2` for each.
    fn read(
        path: &str,
        root: &str,
        fg_threshold: f32,
        bg_threshold: f32,
        cache: bool,
    ) -> Result<Self, String> {
        let text = blob_runtime::read_text_file(path).map_err(|e| e.to_string())?;
        let mut words = Words::new(path, &text);
        if words.at_end() {
            return Err(format!("{path}: the window file is empty"));
        }
        let mut file = WindowFile {
            images: Vec::new(),
            foreground: Vec::new(),
            background: Vec::new(),
        };
        while !words.at_end() {
            let (line, hash) = words.next::<String>("`#`")?;
            if hash != "#" {
                return Err(format!(
                    "{path}, line {line}: {:?} where an image's `# INDEX` line was expected",
                    blob_proto::excerpt(&hash)
                ));
            }
            let (line, index) = words.next::<usize>("the image index")?;
            if index != file.images.len() {
                return Err(format!(
                    "{path}, line {line}: image index {index} where {} was expected (the \
                     windows name their image by this index, so the images are numbered \
                     0, 1, 2, ... in order)",
                    file.images.len()
                ));
            }
            let (_, name) = words.next::<String>("the image's path")?;
            let image_path = format!("{root}{name}");
            let (line, channels) = words.next::<usize>("the image's channels")?;
            if channels != 3 {
                return Err(format!(
                    "{path}, line {line}: image {image_path} has {channels} channels, but \
                     WindowData reads every image in colour (3 channels)"
                ));
            }
            words.next::<usize>("the image's height")?;
            words.next::<usize>("the image's width")?;
            let (line, count) = words.next::<usize>("the number of windows")?;
            if count > MOST_WINDOWS - file.foreground.len() - file.background.len() {
                return Err(format!(
                    "{path}, line {line}: {count} windows is more than a window file may hold"
                ));
            }
            let cached = if cache {
                let bytes = blob_runtime::read_file(&image_path)
                    .map_err(|e| format!("{path}, line {line}: Could not load {e}"))?;
                Some(Arc::new(bytes))
            } else {
                None
            };
            for _ in 0..count {
                let (line, label) = words.next::<i32>("a window's class")?;
                let (_, overlap) = words.next::<f32>("a window's overlap")?;
                let mut corners = [0i32; 4];
                for (corner, name) in corners.iter_mut().zip(["x1", "y1", "x2", "y2"]) {
                    *corner = words.next::<i32>(&format!("a window's {name}"))?.1;
                }
                let [x1, y1, x2, y2] = corners;
                if x1 > x2 || y1 > y2 || x1 < 0 || y1 < 0 {
                    return Err(format!(
                        "{path}, line {line}: the window ({x1}, {y1}) to ({x2}, {y2}) is not \
                         a rectangle of the image"
                    ));
                }
                let mut window = Window {
                    image: index,
                    label,
                    corners,
                    line,
                };
                if overlap >= fg_threshold {
                    if label <= 0 {
                        return Err(format!(
                            "{path}, line {line}: a foreground window (overlap {overlap}) of \
                             class {label}: object classes start at 1, 0 is the background"
                        ));
                    }
                    file.foreground.push(window);
                } else if overlap < bg_threshold {
                    window.label = 0;
                    file.background.push(window);
                }
            }
            file.images.push(Image {
                path: image_path,
                cached,
            });
        }
        Ok(file)
    }
}

/// What the decoding threads need to turn an image and a [`Cut`] into
/// the values of one item of the batch.
struct Warp<T> {
    crop_size: usize,
    context_pad: usize,
    square: bool,
    scale: T,
    mean: WindowMean<T>,
}

/// What `WindowData` subtracts: `transform_param`'s mean file (at the
/// centre of it, offset by the window's padding) or mean values.
enum WindowMean<T> {
    None,
    File {
        height: usize,
        width: usize,
        offset: usize,
        values: Vec<T>,
    },
    Values([T; 3]),
}

/// Where a cut window lands in the crop: the clipped region of the image,
/// the size it is warped to and the padding before it.
#[derive(Debug, PartialEq)]
struct Placement {
    region: [i32; 4],
    warped: (usize, usize),
    pad: (usize, usize),
}

fn round<T: MathElement>(x: T) -> i32 {
    x.to_f64().round() as i32
}

impl<T: MathElement> Warp<T> {
    /// Caffe's geometry (`WindowDataLayer::load_batch`), in the net's
    /// precision as Caffe computes it in `Dtype`: the window grown so
    /// that `context_pad` pixels of the crop show its surroundings (and
    /// made square in `square` mode), clipped to the image, with the
    /// part outside the image becoming zero padding.
    fn place(&self, cut: &Cut, rows: usize, cols: usize) -> Result<Placement, String> {
        let crop = self.crop_size as i32;
        let (mut x1, mut y1, mut x2, mut y2) = (cut.x1, cut.y1, cut.x2, cut.y2);
        let (rows_i, cols_i) = (rows as i32, cols as i32);
        if self.context_pad == 0 && !self.square {
            if x2 >= cols_i || y2 >= rows_i {
                return Err(format!(
                    "the window ({x1}, {y1}) to ({x2}, {y2}) reaches outside the image's \
                     {cols} x {rows} pixels"
                ));
            }
            return Ok(Placement {
                region: [x1, y1, x2, y2],
                warped: (self.crop_size, self.crop_size),
                pad: (0, 0),
            });
        }
        let t = |v: i32| T::from_f64(f64::from(v));
        let context_scale = t(crop) / t(crop - 2 * self.context_pad as i32);
        let two = T::from_f64(2.0);
        let mut half_height = t(y2 - y1 + 1) / two;
        let mut half_width = t(x2 - x1 + 1) / two;
        let center_x = t(x1) + half_width;
        let center_y = t(y1) + half_height;
        if self.square {
            if half_height > half_width {
                half_width = half_height;
            } else {
                half_height = half_width;
            }
        }
        x1 = round(center_x - half_width * context_scale);
        x2 = round(center_x + half_width * context_scale);
        y1 = round(center_y - half_height * context_scale);
        y2 = round(center_y + half_height * context_scale);
        let unclipped_height = y2 - y1 + 1;
        let unclipped_width = x2 - x1 + 1;
        let pad_x1 = (-x1).max(0);
        let pad_y1 = (-y1).max(0);
        let pad_x2 = (x2 - cols_i + 1).max(0);
        let pad_y2 = (y2 - rows_i + 1).max(0);
        x1 += pad_x1;
        x2 -= pad_x2;
        y1 += pad_y1;
        y2 -= pad_y2;
        if x1 > x2 || y1 > y2 {
            return Err(format!(
                "the window with its context lies outside the image's {cols} x {rows} pixels"
            ));
        }
        let scale_x = t(crop) / t(unclipped_width);
        let scale_y = t(crop) / t(unclipped_height);
        let mut width = round(t(x2 - x1 + 1) * scale_x);
        let mut height = round(t(y2 - y1 + 1) * scale_y);
        let pad_x1 = round(t(pad_x1) * scale_x);
        let pad_x2 = round(t(pad_x2) * scale_x);
        let pad_y1 = round(t(pad_y1) * scale_y);
        // Caffe pads the mirrored side when it mirrors.
        let pad_w = if cut.mirror { pad_x2 } else { pad_x1 };
        let pad_h = pad_y1;
        if pad_h + height > crop {
            height = crop - pad_h;
        }
        if pad_w + width > crop {
            width = crop - pad_w;
        }
        if width <= 0 || height <= 0 {
            return Err(format!(
                "the window leaves no pixel of the {crop} x {crop} crop to warp into \
                 ({width} x {height} after its padding)"
            ));
        }
        Ok(Placement {
            region: [x1, y1, x2, y2],
            warped: (height as usize, width as usize),
            pad: (pad_h as usize, pad_w as usize),
        })
    }

    /// The crop of one window: `channels x crop x crop` values, zero
    /// where the window's context lies outside the image, `(pixel -
    /// mean) * scale` elsewhere.
    fn cut(&self, bytes: &[u8], cut: &Cut) -> Result<Vec<f32>, String> {
        let (channels, rows, cols, planes) = decode_image(bytes, ColorMode::Color)?;
        let placement = self.place(cut, rows, cols)?;
        let [x1, y1, x2, y2] = placement.region.map(|v| v as usize);
        let (region_h, region_w) = (y2 - y1 + 1, x2 - x1 + 1);
        let mut region = Vec::with_capacity(channels * region_h * region_w);
        for c in 0..channels {
            for y in y1..=y2 {
                let row = (c * rows + y) * cols;
                region.extend_from_slice(&planes[row + x1..=row + x2]);
            }
        }
        let (warped_h, warped_w) = placement.warped;
        let mut warped = resize_linear(&region, channels, region_h, region_w, warped_h, warped_w);
        if cut.mirror {
            for row in warped.chunks_mut(warped_w) {
                row.reverse();
            }
        }
        let crop = self.crop_size;
        let (pad_h, pad_w) = placement.pad;
        let mut out = vec![0f32; channels * crop * crop];
        for c in 0..channels {
            for h in 0..warped_h {
                for w in 0..warped_w {
                    let pixel = T::from_f64(f64::from(warped[(c * warped_h + h) * warped_w + w]));
                    let value = match &self.mean {
                        WindowMean::None => pixel * self.scale,
                        WindowMean::Values(means) => (pixel - means[c]) * self.scale,
                        WindowMean::File {
                            height,
                            width,
                            offset,
                            values,
                        } => {
                            let at = (c * height + h + offset + pad_h) * width + w + offset + pad_w;
                            (pixel - values[at]) * self.scale
                        }
                    };
                    out[(c * crop + h + pad_h) * crop + w + pad_w] = value.to_f64() as f32;
                }
            }
        }
        Ok(out)
    }
}

/// Windows drawn at random, a batch at a time: background ones first,
/// then foreground ones, as Caffe draws them.
struct WindowRecords<T> {
    source: String,
    file: WindowFile,
    batch_size: usize,
    foreground_per_batch: usize,
    mirror: bool,
    warp: Arc<Warp<T>>,
}

impl<T: MathElement> Records for WindowRecords<T> {
    fn cycle(
        &mut self,
        visit: &mut dyn FnMut(&str, Result<Raw, String>) -> bool,
    ) -> Result<(), String> {
        let draw = blob_kernels::cpu::rng_rand;
        loop {
            let background = self.batch_size - self.foreground_per_batch;
            for item in 0..self.batch_size {
                let list = if item < background {
                    &self.file.background
                } else {
                    &self.file.foreground
                };
                let window = &list[draw() as usize % list.len()];
                let mirror = self.mirror && draw() % 2 == 1;
                let image = &self.file.images[window.image];
                let key = format!(
                    "line {} (a window of image {}, {})",
                    window.line, window.image, image.path
                );
                let bytes = match &image.cached {
                    Some(bytes) => Ok(bytes.as_ref().clone()),
                    None => blob_runtime::read_file(&image.path)
                        .map_err(|e| format!("Could not load {e}")),
                };
                let [x1, y1, x2, y2] = window.corners;
                let raw = bytes.map(|bytes| Raw {
                    bytes,
                    label: Some(window.label),
                    cut: Some(Cut {
                        x1,
                        y1,
                        x2,
                        y2,
                        mirror,
                    }),
                    pair: None,
                });
                if !visit(&key, raw) {
                    return Ok(());
                }
            }
        }
    }

    fn decoder(&self) -> Decoder {
        let warp = Arc::clone(&self.warp);
        Arc::new(move |raw: Raw| {
            let cut = raw.cut.expect("WindowData's records carry their window");
            let values = warp.cut(&raw.bytes, &cut)?;
            Ok(Example {
                channels: 3,
                height: warp.crop_size,
                width: warp.crop_size,
                pixels: Pixels::Floats(values),
                label: raw.label.unwrap_or(0),
            }
            .into())
        })
    }

    fn origin(&self) -> String {
        self.source.clone()
    }
}

/// The mean `WindowData` subtracts, from `transform_param`.
fn window_mean<T: MathElement>(
    transform: &ParamMessage,
    crop_size: usize,
) -> Result<WindowMean<T>, BlobError> {
    let values = transform.floats("mean_value");
    match (transform.has("mean_file"), values.len()) {
        (true, 0) => {
            let path = transform.string("mean_file");
            let blob = blob_runtime::read_blob_file::<T>(path)?;
            let (channels, height, width) = match *blob.shape() {
                [1, c, h, w] | [c, h, w] => (c, h, w),
                ref shape => {
                    return Err(refused(format!(
                        "mean_file {path} holds a blob of shape {shape:?}, not 1 x 3 x height x width"
                    )));
                }
            };
            // Caffe centres the crop by the width's margin on both axes.
            let offset = width.saturating_sub(crop_size) / 2;
            if channels != 3 || width < crop_size || height < offset + crop_size {
                return Err(refused(format!(
                    "mean_file {path} is {channels} x {height} x {width}: WindowData takes a \
                     crop_size {crop_size} square from its centre (offset {offset} on both axes, \
                     from the width) over 3 channels"
                )));
            }
            Ok(WindowMean::File {
                height,
                width,
                offset,
                values: blob.to_vec()?,
            })
        }
        (true, _) => Err(refused(
            "Cannot specify mean_file and mean_value at the same time",
        )),
        (false, 0) => Ok(WindowMean::None),
        (false, 1) => Ok(WindowMean::Values([T::from_f64(values[0]); 3])),
        (false, 3) => Ok(WindowMean::Values(
            [0, 1, 2].map(|c| T::from_f64(values[c])),
        )),
        (false, n) => Err(refused(format!(
            "Specify either 1 mean_value or as many as channels: 3 (it gives {n})"
        ))),
    }
}

/// Caffe `WindowData` (`window_data_param { source batch_size fg_threshold
/// bg_threshold fg_fraction context_pad crop_mode cache_images
/// root_folder scale }` with `transform_param { crop_size mirror
/// mean_file | mean_value }`): R-CNN's fine-tuning input. Its first top
/// holds `batch_size` windows of the images the window file `source`
/// names, each grown by `context_pad` pixels of context (made square
/// first with `crop_mode: "square"`), clipped to its image (what lies
/// outside is zero), warped to `crop_size` x `crop_size` with OpenCV's
/// bilinear resize, mirrored at random with `mirror`, less the mean and
/// times `scale`; its second top their classes. Each batch draws
/// `batch_size - floor(batch_size * fg_fraction)` windows at random from
/// the background ones (overlap below `bg_threshold`, class 0) and the
/// rest from the foreground ones (overlap at least `fg_threshold`).
///
/// As in Caffe, `scale` is `window_data_param`'s (Caffe ignores
/// `transform_param.scale` here, so it is refused rather than ignored),
/// and the mean file is read at its centre, offset by the window's
/// padding. The window file lists, for each image in turn, `#
/// INDEX`, its path (after `root_folder`), `3 HEIGHT WIDTH`, the number
/// of windows and a `CLASS OVERLAP X1 Y1 X2 Y2` line for each. In an
/// `f64` net the values are rounded to `f32` (the geometry is `f64`'s).
///
/// ```
/// use blob_data::data_registry;
/// use blob_layers::net::Net;
/// let dir = std::env::temp_dir().join(format!("blobflow-windowdata-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// image::RgbImage::from_pixel(8, 8, image::Rgb([10, 20, 30])).save(dir.join("a.png"))?;
/// std::fs::write(dir.join("windows.txt"),
///     "# 0\na.png\n3\n8\n8\n2\n1 0.9 0 0 3 3\n0 0.1 4 4 7 7\n")?;
/// let text = format!(r#"layer {{ name: "in" type: "WindowData" top: "data" top: "label"
///     transform_param {{ crop_size: 4 }}
///     window_data_param {{ source: "{0}/windows.txt" root_folder: "{0}/" batch_size: 4
///                          fg_fraction: 0.5 }} }}"#, dir.display());
/// let mut net = Net::<f32>::builder().registry(&data_registry()).from_prototxt(&text)?;
/// net.forward()?;
/// assert_eq!(net.blob("data").unwrap().shape(), [4, 3, 4, 4]);
/// assert_eq!(net.blob("label").unwrap().to_vec()?, [0.0, 0.0, 1.0, 1.0]);
/// assert_eq!(net.blob("data").unwrap().to_vec()?[0], 30.0); // B, G, R planes
/// std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn window_data_layer<T: MathElement>(
    layer: &ParamMessage,
) -> Result<PrefetchingDataLayer<T>, BlobError> {
    let p = layer
        .message("window_data_param")
        .cloned()
        .unwrap_or_else(|| ParamMessage::new(&blob_proto::schema::WINDOW_DATA));
    let transform = layer
        .message("transform_param")
        .cloned()
        .unwrap_or_else(|| ParamMessage::new(&blob_proto::schema::TRANSFORMATION));
    for name in ["mean_file", "crop_size", "mirror"] {
        if p.has(name) {
            return Err(refused(format!(
                "window_data_param.{name} is where Caffe's V1 files kept transform_param.{name}; \
                 Caffe's WindowData of today ignores it there: move it into transform_param"
            )));
        }
    }
    if transform.has("scale") {
        return Err(refused(
            "WindowData scales by window_data_param.scale: Caffe ignores transform_param.scale \
             here, so move it there",
        ));
    }
    if transform.boolean("force_gray") {
        return Err(refused(
            "WindowData reads every image in colour: force_gray cannot apply",
        ));
    }
    let source = p.string("source").to_string();
    if source.is_empty() {
        return Err(refused(
            "window_data_param gives no source (the window file)",
        ));
    }
    let batch_size = p.uint("batch_size") as usize;
    if batch_size == 0 {
        return Err(refused(format!(
            "window_data_param.batch_size must be at least 1 (source {source})"
        )));
    }
    let crop_size = transform.uint("crop_size") as usize;
    let context_pad = p.uint("context_pad") as usize;
    if crop_size == 0 {
        return Err(refused(
            "WindowData needs transform_param.crop_size: the side its windows are warped to",
        ));
    }
    if 2 * context_pad >= crop_size {
        return Err(refused(format!(
            "context_pad {context_pad} leaves nothing of the window in a crop of {crop_size}"
        )));
    }
    let square = match p.string("crop_mode") {
        "warp" => false,
        "square" => true,
        other => {
            return Err(refused(format!(
                "crop_mode {:?}: Caffe's are \"warp\" and \"square\"",
                blob_proto::excerpt(other)
            )));
        }
    };
    let fg_fraction = p.float("fg_fraction");
    if !(0.0..=1.0).contains(&fg_fraction) {
        return Err(refused(format!(
            "fg_fraction {fg_fraction} is not a fraction between 0 and 1"
        )));
    }
    let scale = p.float("scale");
    if !scale.is_finite() {
        return Err(refused(format!("scale {scale} is not a finite number")));
    }
    let (fg_threshold, bg_threshold) = (
        p.float("fg_threshold") as f32,
        p.float("bg_threshold") as f32,
    );
    let file = WindowFile::read(
        &source,
        p.string("root_folder"),
        fg_threshold,
        bg_threshold,
        p.boolean("cache_images"),
    )
    .map_err(refused)?;
    for (list, which, rule) in [
        (
            &file.foreground,
            "foreground",
            format!("overlap at least fg_threshold {fg_threshold}"),
        ),
        (
            &file.background,
            "background",
            format!("overlap below bg_threshold {bg_threshold}"),
        ),
    ] {
        if list.is_empty() {
            return Err(refused(format!(
                "{source} has no {which} window ({rule}): each batch draws from both"
            )));
        }
    }
    let warp = Warp {
        crop_size,
        context_pad,
        square,
        scale: T::from_f64(scale),
        mean: window_mean(&transform, crop_size)?,
    };
    let records = WindowRecords {
        source: PathBuf::from(&source).display().to_string(),
        file,
        batch_size,
        // Caffe's static_cast<int>(static_cast<float>(batch_size) * fg_fraction).
        foreground_per_batch: (batch_size as f32 * fg_fraction as f32) as usize,
        mirror: transform.boolean("mirror"),
        warp: Arc::new(warp),
    };
    PrefetchingDataLayer::start(
        Setup {
            type_name: "WindowData",
            // The window's own warp does what a transformer would.
            transformer: DataTransformer::<T>::from_text("", false)?,
            batch_size,
            prefetch: 4,
            tops: Arity::exactly(2),
            geometry: None,
        },
        records,
    )
}
