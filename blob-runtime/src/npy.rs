//! NumPy's `.npy` files (format 1.0 to 3.0) in and out of blobs: how a
//! blob moves to and from Python, and how `blobflow run` reads inputs
//! and writes outputs. Little-endian `f4` and `f8`, C order; the reader
//! allocates no more than the file holds.

use std::path::Path;

use crate::blob::Blob;
use crate::element::MathElement;
use crate::error::{BlobError, Result};

const MAGIC: &[u8] = b"\x93NUMPY";

fn bad(path: &str, detail: impl Into<String>) -> BlobError {
    BlobError::InvalidParameter {
        op: "read a .npy file",
        detail: format!("{path}: {}", detail.into()),
    }
}

/// The element type a header's `descr` names, as bytes per value and
/// whether it is `f64`.
fn descr_size(descr: &str) -> Option<(usize, bool)> {
    match descr {
        "<f4" | "|f4" | "f4" | "float32" => Some((4, false)),
        "<f8" | "|f8" | "f8" | "float64" => Some((8, true)),
        _ => None,
    }
}

/// The value of `'key':` in a header dict, up to the next `,` at depth 0
/// (or its closing parenthesis for the shape tuple).
fn header_value<'a>(header: &'a str, key: &str) -> Option<&'a str> {
    let at = header.find(&format!("'{key}'"))?;
    let rest = header[at + key.len() + 2..]
        .trim_start()
        .strip_prefix(':')?
        .trim_start();
    if rest.starts_with('(') {
        let end = rest.find(')')?;
        return Some(&rest[..=end]);
    }
    let end = rest.find([',', '}']).unwrap_or(rest.len());
    Some(rest[..end].trim())
}

/// Parses a `.npy` file's bytes into a blob of `T` (values of the other
/// float width are converted); `path` names the file in errors.
///
/// ```
/// use blob_runtime::{Blob, npy};
/// let b = Blob::<f32>::from_vec(&[2, 3], (0..6).map(|v| v as f32).collect())?;
/// let bytes = npy::to_bytes(&b)?;
/// let back: Blob<f32> = npy::from_bytes(&bytes, "<memory>")?;
/// assert_eq!(back.shape(), [2, 3]);
/// assert_eq!(back.to_vec()?, b.to_vec()?);
/// assert!(npy::from_bytes::<f32>(&bytes[..20], "x.npy").unwrap_err().to_string().contains("x.npy"));
/// # Ok::<(), blob_runtime::BlobError>(())
/// ```
pub fn from_bytes<T: MathElement>(bytes: &[u8], path: &str) -> Result<Blob<T>> {
    if bytes.len() < 10 || !bytes.starts_with(MAGIC) {
        return Err(bad(path, "not a .npy file (no \\x93NUMPY magic)"));
    }
    let major = bytes[6];
    let (header_len, start) = match major {
        1 => (usize::from(u16::from_le_bytes([bytes[8], bytes[9]])), 10),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        _ => return Err(bad(path, format!("unsupported .npy version {major}"))),
    };
    let Some(header) = bytes.get(start..start + header_len) else {
        return Err(bad(
            path,
            format!("the header declares {header_len} bytes; the file is shorter"),
        ));
    };
    let header = std::str::from_utf8(header).map_err(|_| bad(path, "the header is not text"))?;
    let descr = header_value(header, "descr")
        .map(|d| d.trim_matches(['\'', '"']))
        .ok_or_else(|| bad(path, "the header has no 'descr'"))?;
    let Some((size, is_f64)) = descr_size(descr) else {
        return Err(bad(
            path,
            format!("dtype {descr} is not supported (little-endian f4 or f8)"),
        ));
    };
    if header_value(header, "fortran_order") != Some("False") {
        return Err(bad(
            path,
            "only C order (fortran_order: False) is supported",
        ));
    }
    let shape_text =
        header_value(header, "shape").ok_or_else(|| bad(path, "the header has no 'shape'"))?;
    let shape = shape_text
        .trim_matches(['(', ')'])
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|d| {
            d.parse::<usize>()
                .map_err(|_| bad(path, format!("bad dim {d:?} in shape {shape_text}")))
        })
        .collect::<Result<Vec<usize>>>()?;
    let body = &bytes[start + header_len..];
    let count = shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .filter(|&c| c.checked_mul(size) == Some(body.len()))
        .ok_or_else(|| {
            bad(
                path,
                format!(
                    "shape {shape_text} of {descr} needs a different size than the {} bytes of data",
                    body.len()
                ),
            )
        })?;
    let values: Vec<T> = if is_f64 {
        body.chunks_exact(8)
            .map(|c| T::from_f64(f64::from_le_bytes(c.try_into().expect("8 bytes"))))
            .collect()
    } else {
        body.chunks_exact(4)
            .map(|c| {
                T::from_f64(f64::from(f32::from_le_bytes(
                    c.try_into().expect("4 bytes"),
                )))
            })
            .collect()
    };
    debug_assert_eq!(values.len(), count);
    Blob::from_vec(&shape, values).map_err(|e| bad(path, e.to_string()))
}

/// Reads a `.npy` file into a blob; errors name the file.
pub fn read<T: MathElement>(path: impl AsRef<Path>) -> Result<Blob<T>> {
    let path = path.as_ref();
    let shown = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|source| BlobError::Io {
        path: shown.clone(),
        source,
    })?;
    from_bytes(&bytes, &shown)
}

/// A blob's data as a `.npy` file's bytes (version 1.0, `<f4` for `f32`,
/// `<f8` for `f64`).
pub fn to_bytes<T: MathElement>(blob: &Blob<T>) -> Result<Vec<u8>> {
    let is_f64 = size_of::<T>() == 8;
    let dims: Vec<String> = blob.shape().iter().map(usize::to_string).collect();
    let shape = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let descr = if is_f64 { "<f8" } else { "<f4" };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    // Pad with spaces so the data starts on a 64-byte boundary, then '\n'.
    let total = MAGIC.len() + 4 + header.len() + 1;
    header.push_str(&" ".repeat(total.next_multiple_of(64) - total));
    header.push('\n');
    let header_len = u16::try_from(header.len())
        .map_err(|_| bad("<memory>", "the shape is too long for a version 1.0 header"))?;
    let mut out = Vec::with_capacity(total + blob.count() * size_of::<T>());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[1, 0]);
    out.extend_from_slice(&header_len.to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for v in blob.to_vec()? {
        if is_f64 {
            out.extend_from_slice(&v.to_f64().to_le_bytes());
        } else {
            out.extend_from_slice(&(v.to_f64() as f32).to_le_bytes());
        }
    }
    Ok(out)
}

/// Writes a blob's data as a `.npy` file NumPy reads.
pub fn write<T: MathElement>(path: impl AsRef<Path>, blob: &Blob<T>) -> Result<()> {
    crate::write_atomically(path, &to_bytes(blob)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A version 1.0 file of `header` and `body`.
    fn file(header: &str, body: &[u8]) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&[1, 0]);
        out.extend_from_slice(&(header.len() as u16).to_le_bytes());
        out.extend_from_slice(header.as_bytes());
        out.extend_from_slice(body);
        out
    }

    #[test]
    fn f8_reads_into_f32_and_back() {
        let body: Vec<u8> = [1.5f64, -2.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let bytes = file(
            "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }",
            &body,
        );
        let b: Blob<f32> = from_bytes(&bytes, "a.npy").unwrap();
        assert_eq!(
            (b.shape(), b.to_vec().unwrap()),
            (&[2usize][..], vec![1.5, -2.0])
        );
        let scalar = file(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (), }",
            &7f32.to_le_bytes(),
        );
        assert_eq!(
            from_bytes::<f64>(&scalar, "s.npy")
                .unwrap()
                .to_vec()
                .unwrap(),
            [7.0]
        );
    }

    #[test]
    fn bad_files_name_themselves_and_what_is_wrong() {
        let four = 1f32.to_le_bytes();
        let cases: [(Vec<u8>, &str); 6] = [
            (b"PK\x03\x04 not numpy".to_vec(), "not a .npy file"),
            (
                file(
                    "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }",
                    &four,
                ),
                "needs a different size",
            ),
            (
                file(
                    "{'descr': '<i4', 'fortran_order': False, 'shape': (1,), }",
                    &four,
                ),
                "dtype <i4 is not supported",
            ),
            (
                file(
                    "{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }",
                    &four,
                ),
                "only C order",
            ),
            (
                file(
                    "{'descr': '<f4', 'fortran_order': False, 'shape': (1, x), }",
                    &four,
                ),
                "bad dim",
            ),
            (
                file(
                    &format!(
                        "{{'descr': '<f4', 'fortran_order': False, 'shape': ({}), }}",
                        "1, ".repeat(33)
                    ),
                    &four,
                ),
                "32",
            ),
        ];
        for (bytes, want) in cases {
            let err = from_bytes::<f32>(&bytes, "x.npy").unwrap_err().to_string();
            assert!(err.contains("x.npy") && err.contains(want), "{err}");
        }
        let huge = file(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }",
            &four,
        );
        assert!(
            from_bytes::<f32>(&huge, "h.npy").is_err(),
            "no allocation for a shape the bytes do not hold"
        );
    }
}
