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

/// The longest header read: NumPy itself refuses headers over 10,000
/// bytes unless told otherwise; a 4 GB one declared by a version 2 file
/// is not read into memory.
const MAX_HEADER: usize = 1 << 16;

/// What a `.npy` header says of the data after it.
#[derive(Debug, PartialEq)]
struct Header {
    shape: Vec<usize>,
    /// Bytes per value.
    size: usize,
    is_f64: bool,
    /// Where the data starts in the file.
    data_start: usize,
    /// Values the shape holds.
    count: usize,
}

impl Header {
    /// Bytes of data the shape needs.
    fn data_len(&self) -> usize {
        self.count * self.size
    }
}

/// The magic, version and header length at the file's start: the
/// header's length and where it starts.
fn preamble(bytes: &[u8], path: &str) -> Result<(usize, usize)> {
    if bytes.len() < 10 || !bytes.starts_with(MAGIC) {
        return Err(bad(path, "not a .npy file (no \\x93NUMPY magic)"));
    }
    let (header_len, start) = match bytes[6] {
        1 => (usize::from(u16::from_le_bytes([bytes[8], bytes[9]])), 10),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        major => return Err(bad(path, format!("unsupported .npy version {major}"))),
    };
    if header_len > MAX_HEADER {
        return Err(bad(
            path,
            format!(
                "the header declares {header_len} bytes, more than the {MAX_HEADER} a .npy header may have"
            ),
        ));
    }
    Ok((header_len, start))
}

/// Parses the header after the preamble: a Python dict literal with
/// exactly the keys `descr`, `fortran_order` and `shape`, as NumPy
/// writes and requires it.
fn header(bytes: &[u8], path: &str) -> Result<Header> {
    let (header_len, start) = preamble(bytes, path)?;
    let Some(text) = bytes.get(start..start + header_len) else {
        return Err(bad(
            path,
            format!("the header declares {header_len} bytes; the file is shorter"),
        ));
    };
    let text = std::str::from_utf8(text).map_err(|_| bad(path, "the header is not text"))?;
    let dict = HeaderDict::parse(text).map_err(|why| bad(path, format!("the header {why}")))?;
    let Some((size, is_f64)) = descr_size(&dict.descr) else {
        return Err(bad(
            path,
            format!(
                "dtype {} is not supported (little-endian f4 or f8)",
                dict.descr
            ),
        ));
    };
    if dict.fortran_order {
        return Err(bad(
            path,
            "only C order (fortran_order: False) is supported",
        ));
    }
    let count = dict
        .shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .filter(|c| c.checked_mul(size).is_some())
        .ok_or_else(|| {
            bad(
                path,
                format!("shape {:?} holds more values than memory can", dict.shape),
            )
        })?;
    Ok(Header {
        shape: dict.shape,
        size,
        is_f64,
        data_start: start + header_len,
        count,
    })
}

/// The header's dict, read strictly: a repeated, missing or unknown key,
/// or anything after the closing brace but spaces, is an error (a
/// `'shape'` inside another value once went unnoticed).
struct HeaderDict {
    descr: String,
    fortran_order: bool,
    shape: Vec<usize>,
}

impl HeaderDict {
    fn parse(text: &str) -> std::result::Result<Self, String> {
        let mut p = Cursor { rest: text };
        p.expect('{')?;
        let (mut descr, mut fortran_order, mut shape) = (None, None, None);
        loop {
            if p.eat('}') {
                break;
            }
            let key = p.string()?;
            p.expect(':')?;
            let repeated = match key.as_str() {
                "descr" => descr.replace(p.string()?).is_some(),
                "fortran_order" => fortran_order.replace(p.boolean()?).is_some(),
                "shape" => shape.replace(p.tuple()?).is_some(),
                other => {
                    return Err(format!(
                        "has a key {:?} NumPy does not write",
                        blob_proto::excerpt(other)
                    ));
                }
            };
            if repeated {
                return Err(format!("names {key:?} twice"));
            }
            if !p.eat(',') {
                p.expect('}')?;
                break;
            }
        }
        if !p.rest.trim_matches([' ', '\n']).is_empty() {
            return Err(format!(
                "has {:?} after its closing brace",
                blob_proto::excerpt(p.rest)
            ));
        }
        Ok(Self {
            descr: descr.ok_or("has no 'descr'")?,
            fortran_order: fortran_order.ok_or("has no 'fortran_order'")?,
            shape: shape.ok_or("has no 'shape'")?,
        })
    }
}

/// A Python literal, read a token at a time.
struct Cursor<'a> {
    rest: &'a str,
}

impl Cursor<'_> {
    fn eat(&mut self, c: char) -> bool {
        self.rest = self.rest.trim_start();
        match self.rest.strip_prefix(c) {
            Some(rest) => {
                self.rest = rest;
                true
            }
            None => false,
        }
    }

    fn expect(&mut self, c: char) -> std::result::Result<(), String> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(format!(
                "has {:?} where {c:?} belongs",
                blob_proto::excerpt(&self.rest.chars().take(20).collect::<String>())
            ))
        }
    }

    /// `'text'` or `"text"` (NumPy's keys and dtypes hold no escapes).
    fn string(&mut self) -> std::result::Result<String, String> {
        self.rest = self.rest.trim_start();
        let quote = self.rest.chars().next().filter(|c| matches!(c, '\'' | '"'));
        let Some(quote) = quote else {
            return Err("has a value where a quoted string belongs".into());
        };
        let body = &self.rest[1..];
        let end = body
            .find(quote)
            .ok_or("has a string without its closing quote")?;
        let text = body[..end].to_string();
        self.rest = &body[end + 1..];
        Ok(text)
    }

    fn boolean(&mut self) -> std::result::Result<bool, String> {
        self.rest = self.rest.trim_start();
        for (word, value) in [("True", true), ("False", false)] {
            if let Some(rest) = self.rest.strip_prefix(word) {
                self.rest = rest;
                return Ok(value);
            }
        }
        Err("has a fortran_order that is neither True nor False".into())
    }

    /// `(2, 3)`, `(4,)` or `()`; Python 2's `3L` too.
    fn tuple(&mut self) -> std::result::Result<Vec<usize>, String> {
        self.expect('(')?;
        let mut dims = Vec::new();
        loop {
            if self.eat(')') {
                return Ok(dims);
            }
            self.rest = self.rest.trim_start();
            let digits = self
                .rest
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(self.rest.len());
            let dim = self.rest[..digits].parse::<usize>().map_err(|_| {
                format!(
                    "has a bad dim {:?} in its shape",
                    blob_proto::excerpt(&self.rest.chars().take(20).collect::<String>())
                )
            })?;
            self.rest = &self.rest[digits..];
            self.rest = self.rest.strip_prefix('L').unwrap_or(self.rest);
            dims.push(dim);
            if !self.eat(',') {
                self.expect(')')?;
                return Ok(dims);
            }
        }
    }
}

/// The header's values from `body` into a new blob of its shape; the
/// blob's memory is taken (and counted against the host limit) before a
/// value is converted.
fn blob_of<T: MathElement>(h: &Header, path: &str) -> Result<Blob<T>> {
    Blob::new(&h.shape).map_err(|e| bad(path, e.to_string()))
}

/// The blob's values to write, its memory taken now: a refusal (the host
/// limit) names the file.
fn values_of<'a, T: MathElement>(blob: &'a Blob<T>, path: &str) -> Result<crate::CpuMut<'a, T>> {
    blob.mutable_cpu_data()
        .map_err(|e| bad(path, e.to_string()))
}

/// Converts `body`'s little-endian values into `out`.
fn convert_into<T: MathElement>(body: &[u8], is_f64: bool, out: &mut [T]) {
    if is_f64 {
        for (o, c) in out.iter_mut().zip(body.chunks_exact(8)) {
            *o = T::from_f64(f64::from_le_bytes(c.try_into().expect("8 bytes")));
        }
    } else {
        for (o, c) in out.iter_mut().zip(body.chunks_exact(4)) {
            *o = T::from_f64(f64::from(f32::from_le_bytes(
                c.try_into().expect("4 bytes"),
            )));
        }
    }
}

fn wrong_size(path: &str, h: &Header, have: u64) -> BlobError {
    bad(
        path,
        format!(
            "shape {:?} of {} needs {} bytes of data, but the file holds {have}",
            h.shape,
            if h.is_f64 { "f8" } else { "f4" },
            h.data_len()
        ),
    )
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
    let h = header(bytes, path)?;
    let body = &bytes[h.data_start..];
    if body.len() != h.data_len() {
        return Err(wrong_size(path, &h, body.len() as u64));
    }
    let blob = blob_of::<T>(&h, path)?;
    convert_into(body, h.is_f64, &mut values_of(&blob, path)?);
    Ok(blob)
}

/// Reads a `.npy` file into a blob; errors name the file. The header is
/// read first: the file's size is checked against the shape, and the
/// blob's memory taken under the host limit
/// ([`set_host_memory_limit`](crate::set_host_memory_limit)), before any
/// data is read; the data then goes straight into the blob, a megabyte at
/// a time, so reading takes no more memory than the blob holds.
///
/// ```
/// let err = blob_runtime::npy::read::<f32>("/no/such.npy").unwrap_err();
/// assert!(err.to_string().starts_with("/no/such.npy"));
/// ```
pub fn read<T: MathElement>(path: impl AsRef<Path>) -> Result<Blob<T>> {
    use std::io::Read;
    let path = path.as_ref();
    let shown = path.display().to_string();
    let io = |source| BlobError::Io {
        path: shown.clone(),
        source,
    };
    let mut file = std::fs::File::open(path).map_err(io)?;
    let file_len = file.metadata().map_err(io)?.len();
    // The preamble exactly (10 bytes, 12 from version 2 on), then the
    // header: the file's position is then where the data starts.
    let mut head = vec![0u8; 10];
    let mut got = read_up_to(&mut file, &mut head).map_err(io)?;
    if got == 10 && matches!(head[6], 2 | 3) {
        head.resize(12, 0);
        got += read_up_to(&mut file, &mut head[10..]).map_err(io)?;
    }
    head.truncate(got);
    let (header_len, start) = preamble(&head, &shown)?;
    head.resize(start + header_len, 0);
    let more = read_up_to(&mut file, &mut head[start..]).map_err(io)?;
    head.truncate(start + more);
    let h = header(&head, &shown)?;
    let have = file_len.saturating_sub(h.data_start as u64);
    if have != h.data_len() as u64 {
        return Err(wrong_size(&shown, &h, have));
    }
    let blob = blob_of::<T>(&h, &shown)?;
    {
        let mut out = values_of(&blob, &shown)?;
        let mut chunk = vec![0u8; (1 << 20) / 8 * 8];
        let per = chunk.len() / h.size;
        for values in out.chunks_mut(per) {
            let bytes = &mut chunk[..values.len() * h.size];
            file.read_exact(bytes).map_err(io)?;
            convert_into(bytes, h.is_f64, values);
        }
    }
    Ok(blob)
}

/// Fills as much of `buf` as the reader has, stopping early only at its
/// end.
fn read_up_to(r: &mut impl std::io::Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match r.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
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
                "needs 12 bytes of data, but the file holds 4",
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
                "has a bad dim",
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

    /// NumPy refuses a header whose keys are not exactly its three; a
    /// `'shape'` inside another value was once taken for the shape.
    #[test]
    fn headers_are_read_as_numpy_reads_them() {
        let four = [0u8; 8];
        let refused = [
            (
                "{'note': \"'shape': (1,)\", 'descr': '<f4', 'fortran_order': False, 'shape': (2,), }",
                "key \"note\"",
            ),
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'shape': (1,), }",
                "names \"shape\" twice",
            ),
            ("{'descr': '<f4', 'shape': (2,), }", "no 'fortran_order'"),
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), } x",
                "after its closing brace",
            ),
            (
                "{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,)}",
                "True nor False",
            ),
            (
                "{'descr': '<f4, 'fortran_order': False, 'shape': (2,)}",
                "where '}' belongs",
            ),
        ];
        for (header, want) in refused {
            let err = from_bytes::<f32>(&file(header, &four), "h.npy")
                .unwrap_err()
                .to_string();
            assert!(err.contains(want), "{header}: {err}");
        }
        // What NumPy writes, and Python 2's long dims, in any key order.
        for header in [
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }",
            "{\"shape\": (1L, 2L), \"fortran_order\": False, \"descr\": \"<f4\"}\n",
        ] {
            let b = from_bytes::<f32>(&file(header, &four), "h.npy").unwrap();
            assert_eq!(b.count(), 2, "{header}");
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "writes and reads a file")]
    fn a_file_reads_as_its_bytes_do() {
        let path = std::env::temp_dir().join(format!("npy-read-{}.npy", std::process::id()));
        // More than one read chunk, and f8 converted into f32.
        let values: Vec<f64> = (0..300_000).map(|v| v as f64 * 0.5).collect();
        let b = Blob::<f64>::from_vec(&[3, 100_000], values).unwrap();
        write(&path, &b).unwrap();
        let back: Blob<f32> = read(&path).unwrap();
        assert_eq!(back.shape(), [3, 100_000]);
        assert_eq!(back.data_at(&[2, 99_999]), 149_999.5);
        // Cut short: the size is checked before anything is read.
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 1]).unwrap();
        let err = read::<f32>(&path).unwrap_err().to_string();
        assert!(
            err.contains("needs 2400000 bytes of data, but the file holds 2399999"),
            "{err}"
        );
        std::fs::remove_file(&path).unwrap();
    }
}
