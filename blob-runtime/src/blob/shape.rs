//! Shape queries, axis canonicalization, strides and offsets.

use super::Blob;
use crate::element::Element;
use crate::error::{BlobError, Result};

/// Caffe's `shape_string` for any dims: each dim and a space, then
/// `(count)`.
///
/// ```
/// assert_eq!(blob_runtime::shape_string(&[2, 3, 4, 5]), "2 3 4 5 (120)");
/// assert_eq!(blob_runtime::shape_string(&[]), "(1)");
/// ```
pub fn shape_string(shape: &[usize]) -> String {
    let mut s = String::new();
    for d in shape {
        s.push_str(&d.to_string());
        s.push(' ');
    }
    let count = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    match count {
        Some(c) => s.push_str(&format!("({c})")),
        None => s.push_str("(overflow)"),
    }
    s
}

impl<T: Element> Blob<T> {
    /// The dims (Caffe `shape()`).
    ///
    /// ```
    /// let b = blob_runtime::Blob::<f32>::new(&[2, 3]).unwrap();
    /// assert_eq!(b.shape(), &[2, 3]);
    /// ```
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Number of axes (Caffe `num_axes()`).
    ///
    /// ```
    /// assert_eq!(blob_runtime::Blob::<f32>::new(&[2, 3]).unwrap().num_axes(), 2);
    /// ```
    pub fn num_axes(&self) -> usize {
        self.shape.len()
    }

    /// Number of elements (Caffe `count()`); 0 for a default blob, 1 for a
    /// 0-axis scalar.
    ///
    /// ```
    /// assert_eq!(blob_runtime::Blob::<f32>::new(&[]).unwrap().count(), 1);
    /// assert_eq!(blob_runtime::Blob::<f32>::default().count(), 0);
    /// ```
    pub fn count(&self) -> usize {
        self.count
    }

    /// Caffe's `shape_string()`: `"2 3 4 5 (120)"`; `"(0)"` for a default
    /// blob.
    ///
    /// ```
    /// assert_eq!(blob_runtime::Blob::<f32>::default().shape_string(), "(0)");
    /// ```
    pub fn shape_string(&self) -> String {
        if self.shape.is_empty() && self.count == 0 {
            return "(0)".to_string();
        }
        shape_string(&self.shape)
    }

    /// Maps `axis` in `-num_axes..num_axes` to `0..num_axes`, negative
    /// counting from the end (Caffe `CanonicalAxisIndex`).
    ///
    /// ```
    /// let b = blob_runtime::Blob::<f32>::new(&[2, 3, 4]).unwrap();
    /// assert_eq!(b.canonical_axis_index(-1).unwrap(), 2);
    /// assert_eq!(
    ///     b.canonical_axis_index(3).unwrap_err().to_string(),
    ///     "axis 3 out of range for 3-D blob with shape 2 3 4 (24)"
    /// );
    /// ```
    pub fn canonical_axis_index(&self, axis: isize) -> Result<usize> {
        let rank = self.num_axes() as isize;
        if axis < -rank || axis >= rank {
            return Err(BlobError::AxisOutOfRange {
                axis,
                rank: self.num_axes(),
                shape: self.shape_string(),
            });
        }
        Ok(if axis < 0 { axis + rank } else { axis } as usize)
    }

    /// The dim of `axis`, negative counting from the end (Caffe
    /// `shape(index)`).
    ///
    /// ```
    /// let b = blob_runtime::Blob::<f32>::new(&[2, 3, 4]).unwrap();
    /// assert_eq!(b.shape_at(-1).unwrap(), 4);
    /// ```
    pub fn shape_at(&self, axis: isize) -> Result<usize> {
        Ok(self.shape[self.canonical_axis_index(axis)?])
    }

    /// Product of the dims of axes `start..end` (Caffe `count(start, end)`);
    /// an empty range gives 1.
    ///
    /// ```
    /// let b = blob_runtime::Blob::<f32>::new(&[2, 3, 4, 5]).unwrap();
    /// assert_eq!(b.count_range(1, 3).unwrap(), 12);
    /// assert_eq!(b.count_range(2, 2).unwrap(), 1);
    /// assert!(b.count_range(3, 1).is_err());
    /// ```
    pub fn count_range(&self, start: usize, end: usize) -> Result<usize> {
        if start > end || end > self.num_axes() {
            return Err(BlobError::AxisRange {
                start,
                end,
                rank: self.num_axes(),
                shape: self.shape_string(),
            });
        }
        Ok(self.shape[start..end].iter().product())
    }

    /// Product of the dims from `start` to the last axis (Caffe
    /// `count(start)`).
    ///
    /// ```
    /// let b = blob_runtime::Blob::<f32>::new(&[2, 3, 4, 5]).unwrap();
    /// assert_eq!(b.count_from(1).unwrap(), 60);
    /// ```
    pub fn count_from(&self, start: usize) -> Result<usize> {
        self.count_range(start, self.num_axes())
    }

    /// Caffe's `LegacyShape(index)`: only for blobs of at most 4 axes and
    /// `-4 <= index < 4`; an index past the axes gives 1.
    ///
    /// ```
    /// let b = blob_runtime::Blob::<f32>::new(&[3, 2]).unwrap();
    /// assert_eq!(b.legacy_shape(2).unwrap(), 1);
    /// assert_eq!(b.legacy_shape(-1).unwrap(), 2);
    /// assert_eq!(b.legacy_shape(-3).unwrap(), 1);
    /// assert!(blob_runtime::Blob::<f32>::new(&[1; 5]).unwrap().legacy_shape(0).is_err());
    /// ```
    pub fn legacy_shape(&self, index: isize) -> Result<usize> {
        let op = "legacy_shape";
        if self.num_axes() > 4 {
            return Err(BlobError::Legacy {
                op,
                shape: self.shape_string(),
                detail: format!("{} axes, at most 4 allowed", self.num_axes()),
            });
        }
        if !(-4..4).contains(&index) {
            return Err(BlobError::Legacy {
                op,
                shape: self.shape_string(),
                detail: format!("index {index} outside -4..4"),
            });
        }
        let rank = self.num_axes() as isize;
        if index >= rank || index < -rank {
            return Ok(1);
        }
        self.shape_at(index)
    }

    /// Caffe `num()`: `legacy_shape(0)`.
    ///
    /// ```
    /// assert_eq!(blob_runtime::Blob::<f32>::new(&[3, 2]).unwrap().num().unwrap(), 3);
    /// ```
    pub fn num(&self) -> Result<usize> {
        self.legacy_shape(0)
    }

    /// Caffe `channels()`: `legacy_shape(1)`.
    ///
    /// ```
    /// assert_eq!(blob_runtime::Blob::<f32>::new(&[3, 2]).unwrap().channels().unwrap(), 2);
    /// ```
    pub fn channels(&self) -> Result<usize> {
        self.legacy_shape(1)
    }

    /// Caffe `height()`: `legacy_shape(2)`.
    ///
    /// ```
    /// assert_eq!(blob_runtime::Blob::<f32>::new(&[3, 2]).unwrap().height().unwrap(), 1);
    /// ```
    pub fn height(&self) -> Result<usize> {
        self.legacy_shape(2)
    }

    /// Caffe `width()`: `legacy_shape(3)`.
    ///
    /// ```
    /// assert_eq!(blob_runtime::Blob::<f32>::new(&[3, 2]).unwrap().width().unwrap(), 1);
    /// ```
    pub fn width(&self) -> Result<usize> {
        self.legacy_shape(3)
    }

    /// Row-major strides in elements: `stride[i]` is the product of the dims
    /// after axis `i`. Use these instead of Caffe's `offset(0, 1)` trick.
    ///
    /// ```
    /// let b = blob_runtime::Blob::<f32>::new(&[2, 3, 4]).unwrap();
    /// assert_eq!(b.strides(), vec![12, 4, 1]);
    /// ```
    pub fn strides(&self) -> Vec<usize> {
        let mut s = vec![1; self.num_axes()];
        for i in (0..self.num_axes().saturating_sub(1)).rev() {
            s[i] = s[i + 1] * self.shape[i + 1];
        }
        s
    }

    /// The stride of one axis, negative counting from the end.
    ///
    /// ```
    /// let b = blob_runtime::Blob::<f32>::new(&[2, 3, 4]).unwrap();
    /// assert_eq!(b.stride(1).unwrap(), 4);
    /// ```
    pub fn stride(&self, axis: isize) -> Result<usize> {
        let a = self.canonical_axis_index(axis)?;
        Ok(self.shape[a + 1..].iter().product())
    }

    /// The linear offset of `index` (Caffe `offset(indices)`), or an error
    /// naming index and shape. At most `num_axes` indices, each strictly
    /// below its dim; missing trailing indices count as 0.
    ///
    /// ```
    /// let b = blob_runtime::Blob::<f32>::new(&[2, 3, 4]).unwrap();
    /// assert_eq!(b.try_offset(&[1, 2, 3]).unwrap(), 23);
    /// assert_eq!(b.try_offset(&[1]).unwrap(), 12);
    /// assert!(b.try_offset(&[0, 3]).is_err());
    /// ```
    pub fn try_offset(&self, index: &[usize]) -> Result<usize> {
        let bad = || BlobError::IndexOutOfBounds {
            op: "offset",
            index: index.to_vec(),
            shape: self.shape_string(),
        };
        if index.len() > self.num_axes() {
            return Err(bad());
        }
        let mut off = 0;
        for (axis, &dim) in self.shape.iter().enumerate() {
            let i = index.get(axis).copied().unwrap_or(0);
            if i >= dim && axis < index.len() {
                return Err(bad());
            }
            off = off * dim + i;
        }
        Ok(off)
    }

    /// The linear offset of `index` (Caffe `offset(indices)`).
    ///
    /// # Panics
    /// Like slice indexing, when an index is out of bounds; the message
    /// names the index and the shape.
    ///
    /// ```
    /// let b = blob_runtime::Blob::<f32>::new(&[2, 3, 4, 5]).unwrap();
    /// assert_eq!(b.offset(&[1, 2, 3, 4]), 119);
    /// ```
    #[track_caller]
    pub fn offset(&self, index: &[usize]) -> usize {
        self.try_offset(index).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Caffe's `offset(n, c, h, w)` over the legacy dims, with strict bounds
    /// (Caffe's are inclusive and check the wrong values: issues 3420, 790).
    ///
    /// # Panics
    /// When the blob has over 4 axes or an index is out of bounds.
    ///
    /// ```
    /// let b = blob_runtime::Blob::<f32>::new(&[2, 3, 4, 5]).unwrap();
    /// assert_eq!(b.legacy_offset(1, 2, 3, 4), 119);
    /// ```
    #[track_caller]
    pub fn legacy_offset(&self, n: usize, c: usize, h: usize, w: usize) -> usize {
        let dims: Result<Vec<usize>> = (0..4).map(|i| self.legacy_shape(i)).collect();
        let dims = dims.unwrap_or_else(|e| panic!("{e}"));
        let idx = [n, c, h, w];
        if idx.iter().zip(&dims).any(|(i, d)| i >= d) {
            panic!(
                "{}",
                BlobError::IndexOutOfBounds {
                    op: "legacy_offset",
                    index: idx.to_vec(),
                    shape: self.shape_string(),
                }
            );
        }
        ((n * dims[1] + c) * dims[2] + h) * dims[3] + w
    }
}
