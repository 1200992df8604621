//! MNIST digits in the IDX format (`*-idx3-ubyte`, `*-idx1-ubyte`), gzip
//! compressed or not.

use std::io::Read;
use std::path::Path;

/// A digits file that could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MnistError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// What the system said.
        source: std::io::Error,
    },
    /// The bytes are not what an IDX file of digits holds.
    #[error("{path}: {detail}")]
    Format {
        /// The file.
        path: String,
        /// What is wrong.
        detail: String,
    },
}

/// Images and labels read from a pair of IDX files.
///
/// ```no_run
/// let digits = blobflow_mnist::Mnist::open("images-idx3-ubyte.gz", "labels-idx1-ubyte.gz")?;
/// assert_eq!(digits.image(0).len(), 28 * 28);
/// # Ok::<(), blobflow_mnist::MnistError>(())
/// ```
#[derive(Clone, Debug)]
pub struct Mnist {
    /// Pixels, `len() * rows * cols` bytes, image after image.
    pub pixels: Vec<u8>,
    /// One label per image.
    pub labels: Vec<u8>,
    /// Image height.
    pub rows: usize,
    /// Image width.
    pub cols: usize,
}

fn format_err(path: &Path, detail: impl Into<String>) -> MnistError {
    MnistError::Format {
        path: path.display().to_string(),
        detail: detail.into(),
    }
}

/// Reads a file, gunzipping it when it starts with the gzip magic.
fn read_maybe_gz(path: &Path) -> Result<Vec<u8>, MnistError> {
    let raw = std::fs::read(path).map_err(|source| MnistError::Io {
        path: path.display().to_string(),
        source,
    })?;
    if raw.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&raw[..])
            .read_to_end(&mut out)
            .map_err(|e| format_err(path, format!("not a valid gzip file: {e}")))?;
        Ok(out)
    } else {
        Ok(raw)
    }
}

/// Parses an IDX header of `dims` dimensions with magic `0x0000_08_<dims>`
/// (unsigned bytes) and returns the dims and the payload.
fn parse_idx<'a>(
    path: &Path,
    bytes: &'a [u8],
    dims: usize,
) -> Result<(Vec<usize>, &'a [u8]), MnistError> {
    let header = 4 + 4 * dims;
    if bytes.len() < header {
        return Err(format_err(
            path,
            format!(
                "IDX file of {} bytes is shorter than its {header}-byte header",
                bytes.len()
            ),
        ));
    }
    let magic = u32::from_be_bytes(bytes[..4].try_into().expect("4 bytes"));
    let want = 0x0800 | dims as u32;
    if magic != want {
        return Err(format_err(
            path,
            format!(
                "IDX magic is {magic:#010x}, expected {want:#010x} (unsigned bytes, {dims} dims)"
            ),
        ));
    }
    let shape: Vec<usize> = (0..dims)
        .map(|i| {
            u32::from_be_bytes(bytes[4 + 4 * i..8 + 4 * i].try_into().expect("4 bytes")) as usize
        })
        .collect();
    let need = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    let payload = &bytes[header..];
    match need {
        Some(n) if n == payload.len() => Ok((shape, payload)),
        _ => Err(format_err(
            path,
            format!(
                "IDX header says {shape:?} but {} data bytes follow",
                payload.len()
            ),
        )),
    }
}

impl Mnist {
    /// Reads an images file (IDX, 3 dims) and a labels file (IDX, 1 dim);
    /// both may be gzip-compressed. Errors name the file and what is wrong.
    ///
    /// ```
    /// let err = blobflow_mnist::Mnist::open("/no/images", "/no/labels").unwrap_err();
    /// assert!(err.to_string().starts_with("/no/images"));
    /// ```
    pub fn open(images: impl AsRef<Path>, labels: impl AsRef<Path>) -> Result<Self, MnistError> {
        let (ip, lp) = (images.as_ref(), labels.as_ref());
        let ib = read_maybe_gz(ip)?;
        let lb = read_maybe_gz(lp)?;
        let (ishape, pixels) = parse_idx(ip, &ib, 3)?;
        let (lshape, labels) = parse_idx(lp, &lb, 1)?;
        if ishape[0] != lshape[0] {
            return Err(format_err(
                lp,
                format!(
                    "{} labels for {} images in {}",
                    lshape[0],
                    ishape[0],
                    ip.display()
                ),
            ));
        }
        Ok(Self {
            pixels: pixels.to_vec(),
            labels: labels.to_vec(),
            rows: ishape[1],
            cols: ishape[2],
        })
    }

    /// Number of images.
    ///
    /// ```
    /// let m = blobflow_mnist::Mnist { pixels: vec![0; 8], labels: vec![1, 2], rows: 2, cols: 2 };
    /// assert_eq!(m.len(), 2);
    /// ```
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// Whether there are no images.
    ///
    /// ```
    /// let m = blobflow_mnist::Mnist { pixels: vec![], labels: vec![], rows: 28, cols: 28 };
    /// assert!(m.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// The pixels of image `i`.
    ///
    /// ```
    /// let m = blobflow_mnist::Mnist { pixels: vec![1, 2, 3, 4], labels: vec![7], rows: 2, cols: 2 };
    /// assert_eq!(m.image(0), &[1, 2, 3, 4]);
    /// ```
    pub fn image(&self, i: usize) -> &[u8] {
        let n = self.rows * self.cols;
        &self.pixels[i * n..(i + 1) * n]
    }

    /// Writes images `start..start + out.len() / (rows * cols)` into `out`,
    /// each pixel times `scale` (Caffe's LeNet uses 0.00390625).
    ///
    /// ```
    /// let m = blobflow_mnist::Mnist { pixels: vec![0, 128, 255, 64], labels: vec![0], rows: 2, cols: 2 };
    /// let mut out = [0.0f32; 4];
    /// m.scaled_into(0, 0.00390625, &mut out);
    /// assert_eq!(out, [0.0, 0.5, 0.99609375, 0.25]);
    /// ```
    pub fn scaled_into(&self, start: usize, scale: f32, out: &mut [f32]) {
        let n = self.rows * self.cols;
        let src = &self.pixels[start * n..start * n + out.len()];
        for (o, &p) in out.iter_mut().zip(src) {
            *o = f32::from(p) * scale;
        }
    }
}
