//! Caffe's dataset tools: `convert_imageset` (an image list to an LMDB
//! of `Datum` records) and `compute_image_mean` (an LMDB's mean image as
//! a `.binaryproto`).

use std::path::Path;

use blob_proto::{BlobProto, Datum};
use prost::Message;

use crate::datum::{ColorMode, Pixels, decode_datum, decode_image};
use crate::list::{ListLine, read_image_list};
use crate::resize::resize_linear;
use crate::store::{Backend, StoreReader, StoreWriter};

/// `convert_imageset`'s flags.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImageSetOptions {
    /// `--gray`: one gray channel instead of B, G, R.
    pub gray: bool,
    /// `--shuffle`: the list's lines in random order (from the calling
    /// thread's generator).
    pub shuffle: bool,
    /// `--resize_height`, `--resize_width` (both, or neither).
    pub resize: Option<(usize, usize)>,
    /// `--check_size`: every image must have the first one's size.
    pub check_size: bool,
    /// `--encoded`: store the image file (or, resized or recoloured, a
    /// re-encoding of it) instead of its pixels.
    pub encoded: bool,
    /// `--encode_type`: `jpg` or `png` for the re-encoding (the file's
    /// extension otherwise); giving it implies `encoded`.
    pub encode_type: Option<String>,
}

/// What [`convert_imageset`] reports as it goes, in Caffe's log's words.
#[derive(Clone, Debug, PartialEq)]
pub enum ImageSetEvent {
    /// "A total of N images."
    Total(usize),
    /// An image that could not be read, passed over as Caffe passes it
    /// over ("Could not open or find file ..."): its line and why.
    Skipped {
        /// The list's line.
        line: usize,
        /// Why.
        why: String,
    },
    /// "Processed N files." (every 1000, and at the end).
    Processed(usize),
    /// Something Caffe's tool warns of and goes on (`convert_annoset`:
    /// an annotation's image size that is not the image's, a box beyond
    /// the image): its line and what.
    Warning {
        /// The list's line.
        line: usize,
        /// What.
        what: String,
    },
}

/// A tool refused or failed: what, in words naming the file or line.
pub type ToolError = String;

/// The record `convert_imageset` stores for one image (Caffe's
/// `ReadImageToDatum`).
pub(crate) fn image_datum(
    path: &str,
    label: i32,
    options: &ImageSetOptions,
    encoding: Option<&str>,
) -> Result<Datum, String> {
    let bytes = blob_runtime::read_file(path).map_err(|e| e.to_string())?;
    let color = if options.gray {
        ColorMode::Gray
    } else {
        ColorMode::Color
    };
    let (channels, mut height, mut width, mut pixels) = decode_image(&bytes, color)?;
    if let Some((h, w)) = options.resize {
        pixels = resize_linear(&pixels, channels, height, width, h, w);
        (height, width) = (h, w);
    }
    if let Some(encoding) = encoding {
        let extension = Path::new(path)
            .extension()
            .map(|e| e.to_string_lossy().to_lowercase());
        let same_kind =
            |e: &str| matches!((e, encoding), ("jpg" | "jpeg", "jpg" | "jpeg")) || e == encoding;
        let as_stored = decode_image(&bytes, ColorMode::AsStored)?.0;
        if options.resize.is_none()
            && as_stored == channels
            && extension.as_deref().is_some_and(same_kind)
        {
            // Caffe's ReadFileToDatum: the file's own bytes.
            return Ok(Datum {
                data: Some(bytes),
                label: Some(label),
                encoded: Some(true),
                ..Default::default()
            });
        }
        return Ok(Datum {
            data: Some(encode(&pixels, channels, height, width, encoding)?),
            label: Some(label),
            encoded: Some(true),
            ..Default::default()
        });
    }
    Ok(Datum {
        channels: Some(channels as i32),
        height: Some(height as i32),
        width: Some(width as i32),
        data: Some(pixels),
        label: Some(label),
        encoded: Some(false),
        ..Default::default()
    })
}

/// C-H-W planes (B, G, R or gray) encoded as a JPEG or PNG file.
fn encode(
    planes: &[u8],
    channels: usize,
    height: usize,
    width: usize,
    encoding: &str,
) -> Result<Vec<u8>, String> {
    let plane = height * width;
    let interleaved: Vec<u8> = (0..plane)
        .flat_map(|i| match channels {
            1 => vec![planes[i]],
            _ => vec![planes[2 * plane + i], planes[plane + i], planes[i]],
        })
        .collect();
    let color = if channels == 1 {
        image::ExtendedColorType::L8
    } else {
        image::ExtendedColorType::Rgb8
    };
    let format = match encoding {
        "jpg" | "jpeg" => image::ImageFormat::Jpeg,
        "png" => image::ImageFormat::Png,
        other => {
            return Err(format!(
                "cannot encode as {other:?}: jpg and png are written"
            ));
        }
    };
    let mut out = std::io::Cursor::new(Vec::new());
    image::write_buffer_with_format(
        &mut out,
        &interleaved,
        width as u32,
        height as u32,
        color,
        format,
    )
    .map_err(|e| format!("cannot encode as {encoding}: {e}"))?;
    Ok(out.into_inner())
}

/// Caffe's `convert_imageset ROOTFOLDER/ LISTFILE DB_NAME`: each image
/// the list names (`root` put before its name as it is), read as
/// `ReadImageToDatum` reads it, stored under the key `%08d_NAME` in a new
/// LMDB at `db`; returns how many were stored. Images that cannot be read
/// are passed over, as Caffe passes them over, and each is reported. The
/// store appears only when complete.
///
/// ```
/// use blob_data::{Backend, ImageSetOptions, convert_imageset, compute_image_mean};
/// let dir = std::env::temp_dir().join(format!("blobflow-imageset-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// image::GrayImage::from_raw(2, 1, vec![10, 30]).unwrap().save(dir.join("a.png"))?;
/// image::GrayImage::from_raw(2, 1, vec![20, 50]).unwrap().save(dir.join("b.png"))?;
/// std::fs::write(dir.join("list.txt"), "a.png 0\nb.png 1\n")?;
/// let options = ImageSetOptions { gray: true, ..Default::default() };
/// let root = format!("{}/", dir.display());
/// let db = dir.join("db");
/// let stored = convert_imageset(&root, &dir.join("list.txt"), &db, Backend::Lmdb, &options, &mut |_| {})?;
/// assert_eq!(stored, 2);
/// let mean = compute_image_mean(&db, Backend::Lmdb, &mut |_| {})?;
/// assert_eq!(mean.data, [15.0, 40.0]);
/// std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn convert_imageset(
    root: &str,
    list: &Path,
    db: &Path,
    backend: Backend,
    options: &ImageSetOptions,
    report: &mut dyn FnMut(ImageSetEvent),
) -> Result<usize, ToolError> {
    let lines = read_image_list(list)?;
    let lines = lines
        .into_iter()
        .map(|ListLine { line, name, label }| (line, name, label))
        .collect();
    let store = ImageStore {
        root,
        list,
        db,
        backend,
        options,
    };
    let mut record = |_, &label: &i32, mut datum: Datum, _: &mut dyn FnMut(ImageSetEvent)| {
        datum.label = Some(label);
        Ok(datum.encode_to_vec())
    };
    store.write(lines, &mut record, report)
}

/// Where a dataset tool writes its images, and how it reads them.
pub(crate) struct ImageStore<'a> {
    pub root: &'a str,
    pub list: &'a Path,
    pub db: &'a Path,
    pub backend: Backend,
    pub options: &'a ImageSetOptions,
}

/// A record's bytes from its list line and its image's `Datum`.
pub(crate) type MakeRecord<'a, L> =
    dyn FnMut(usize, &L, Datum, &mut dyn FnMut(ImageSetEvent)) -> Result<Vec<u8>, ToolError> + 'a;

impl ImageStore<'_> {
    /// Caffe's tools' loop: each line's image (`(line, name, rest)`, the
    /// name after `root` as written) read as `ReadImageToDatum` reads it,
    /// made a record by `record`, stored under `%08d_NAME`; unreadable
    /// images passed over and reported; the store complete or absent.
    pub(crate) fn write<L>(
        &self,
        mut lines: Vec<(usize, String, L)>,
        record: &mut MakeRecord<'_, L>,
        report: &mut dyn FnMut(ImageSetEvent),
    ) -> Result<usize, ToolError> {
        let (options, list) = (self.options, self.list);
        if options.shuffle {
            crate::order::shuffle(&mut lines);
        }
        report(ImageSetEvent::Total(lines.len()));
        let encoded = options.encoded || options.encode_type.is_some();
        let mut writer = StoreWriter::create(self.db, self.backend).map_err(|e| e.to_string())?;
        let mut first_size: Option<usize> = None;
        let mut count = 0usize;
        for (id, (line, name, rest)) in lines.iter().enumerate() {
            let encoding = match (&options.encode_type, encoded) {
                (Some(e), _) => Some(e.to_lowercase()),
                (None, true) => Some(
                    Path::new(name)
                        .extension()
                        .map(|e| e.to_string_lossy().to_lowercase())
                        .ok_or_else(|| {
                            format!(
                                "{}, line {line}: Failed to guess the encoding of {name:?}",
                                list.display()
                            )
                        })?,
                ),
                (None, false) => None,
            };
            let path = format!("{}{name}", self.root);
            let datum = match image_datum(&path, -1, options, encoding.as_deref()) {
                Ok(d) => d,
                Err(why) => {
                    report(ImageSetEvent::Skipped {
                        line: *line,
                        why: format!("Could not open or find file {path}: {why}"),
                    });
                    continue;
                }
            };
            if options.check_size && !encoded {
                let size = datum.data.as_ref().map_or(0, Vec::len);
                match first_size {
                    None => first_size = Some(size),
                    Some(first) if first != size => {
                        return Err(format!(
                            "{}, line {line} ({name}): Incorrect data field size {size} (the first image's is {first})",
                            list.display()
                        ));
                    }
                    Some(_) => {}
                }
            }
            let bytes = record(*line, rest, datum, report)?;
            let key = format!("{id:08}_{name}");
            writer
                .put(key.as_bytes(), &bytes)
                .map_err(|e| e.to_string())?;
            count += 1;
            if count.is_multiple_of(1000) {
                report(ImageSetEvent::Processed(count));
            }
        }
        writer.finish().map_err(|e| e.to_string())?;
        if !count.is_multiple_of(1000) {
            report(ImageSetEvent::Processed(count));
        }
        Ok(count)
    }
}

/// Caffe's `compute_image_mean INPUT_DB`: the mean of every record's
/// values (encoded ones decoded as stored), summed in single precision as
/// Caffe sums them, as a 1 x C x H x W `BlobProto` with Caffe's legacy
/// dims (what `mean_file` reads; write it with `encode_to_vec`).
/// `processed` is told the count every 10000 records.
pub fn compute_image_mean(
    store: &Path,
    backend: Backend,
    processed: &mut dyn FnMut(usize),
) -> Result<BlobProto, ToolError> {
    let reader = StoreReader::open(store, backend).map_err(|e| e.to_string())?;
    let mut sum: Vec<f32> = Vec::new();
    let mut dims = (0, 0, 0);
    let mut count = 0usize;
    let mut failed = None;
    let passed_end = std::cell::Cell::new(false);
    reader
        .cycle(
            &mut |key, value| {
                if passed_end.get() {
                    return false;
                }
                let key_text = String::from_utf8_lossy(&key[..key.len().min(64)]).into_owned();
                let example = match decode_datum(value, ColorMode::AsStored) {
                    Ok(e) => e,
                    Err(e) => {
                        failed = Some(format!("{}, key {key_text:?}: {e}", store.display()));
                        return false;
                    }
                };
                let here = (example.channels, example.height, example.width);
                if count == 0 {
                    dims = here;
                    sum = vec![0.0; here.0 * here.1 * here.2];
                } else if here != dims {
                    failed = Some(format!(
                        "{}, key {key_text:?}: Incorrect data field size: {} x {} x {}, the first record's is {} x {} x {}",
                        store.display(),
                        here.0, here.1, here.2, dims.0, dims.1, dims.2
                    ));
                    return false;
                }
                match &example.pixels {
                    Pixels::Bytes(b) => sum.iter_mut().zip(b).for_each(|(s, &v)| *s += f32::from(v)),
                    Pixels::Floats(f) => sum.iter_mut().zip(f).for_each(|(s, &v)| *s += v),
                }
                count += 1;
                if count.is_multiple_of(10000) {
                    processed(count);
                }
                true
            },
            &mut || passed_end.set(true),
        )
        .map_err(|e| e.to_string())?;
    if let Some(e) = failed {
        return Err(e);
    }
    if !count.is_multiple_of(10000) {
        processed(count);
    }
    let n = count as f32;
    Ok(BlobProto {
        num: Some(1),
        channels: Some(dims.0 as i32),
        height: Some(dims.1 as i32),
        width: Some(dims.2 as i32),
        data: sum.into_iter().map(|s| s / n).collect(),
        ..Default::default()
    })
}
