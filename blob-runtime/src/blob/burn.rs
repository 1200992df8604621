//! burn's tensor data in and out (feature `burn`): `TryFrom` between
//! blobs and `burn_tensor::TensorData` (burn's `burn::tensor::TensorData`),
//! which a burn tensor of any backend is made from (`Tensor::from_data`)
//! and read into (`Tensor::into_data`).
//!
//! By value, the memory moves without a copy where its owner allows: a
//! blob's own `Vec` becomes the data's bytes, and the data's bytes,
//! where burn holds them in an allocation of the element's alignment,
//! become the blob's `Vec`. By reference, the values are copied.

use burn_tensor::{Element as BurnElement, TensorData};

use super::Blob;
use crate::element::Element;
use crate::error::{BlobError, Result};

fn refused(op: &'static str, detail: String) -> BlobError {
    BlobError::Interop {
        op,
        library: "burn",
        detail,
    }
}

/// Checks that `data` holds `T`s, naming both element types where not.
fn check_dtype<T: Element + BurnElement>(op: &'static str, data: &TensorData) -> Result<()> {
    let dtype = data.dtype();
    if dtype != T::dtype() {
        return Err(refused(
            op,
            format!(
                "the tensor data holds {dtype:?}, not {} ({:?})",
                T::NAME,
                T::dtype()
            ),
        ));
    }
    Ok(())
}

const TO_BLOB: &str = "make a blob of burn tensor data";

impl<T: Element + BurnElement> TryFrom<TensorData> for Blob<T> {
    type Error = BlobError;

    /// A blob of the data's shape adopting its values: no copy where burn
    /// holds them in an allocation of `T`'s alignment (as data made from
    /// a `Vec` or read from a burn tensor is), a copy otherwise. Data of
    /// another element type is an error naming both.
    ///
    /// ```
    /// use blob_runtime::Blob;
    /// use burn_tensor::TensorData;
    /// let data = TensorData::new(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], [2, 3]);
    /// let at = data.as_slice::<f32>()?.as_ptr();
    /// let blob = Blob::<f32>::try_from(data)?;
    /// assert_eq!(blob.shape(), &[2, 3]);
    /// assert_eq!(blob.cpu_data()?.as_ptr(), at); // moved, not copied
    /// let err = Blob::<f64>::try_from(TensorData::new(vec![1i32], [1])).unwrap_err();
    /// assert!(err.to_string().contains("holds I32, not f64"), "{err}");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn try_from(data: TensorData) -> Result<Self> {
        check_dtype::<T>(TO_BLOB, &data)?;
        let shape = data.shape().to_vec();
        let values = data
            .try_into_vec::<T>()
            .map_err(|e| refused(TO_BLOB, format!("{e:?}")))?;
        Self::from_vec(&shape, values)
    }
}

impl<T: Element + BurnElement> TryFrom<&TensorData> for Blob<T> {
    type Error = BlobError;

    /// A blob of the data's shape holding a copy of its values.
    ///
    /// ```
    /// use blob_runtime::Blob;
    /// use burn_tensor::TensorData;
    /// let data = TensorData::new(vec![7u32, 8], [2]);
    /// assert_eq!(Blob::<u32>::try_from(&data)?.to_vec()?, [7, 8]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn try_from(data: &TensorData) -> Result<Self> {
        check_dtype::<T>(TO_BLOB, data)?;
        let values = data
            .as_slice::<T>()
            .map_err(|e| refused(TO_BLOB, format!("{e:?}")))?;
        Self::from_vec(data.shape(), values.to_vec())
    }
}

impl<T: Element + BurnElement> TryFrom<Blob<T>> for TensorData {
    type Error = BlobError;

    /// Tensor data of the blob's shape and values: the blob's memory
    /// moved, without a copy, where it holds a `Vec` of its own
    /// ([`Blob::into_vec`]); copied otherwise. `Tensor::from_data` makes
    /// a tensor of it on any burn backend.
    ///
    /// ```
    /// use blob_runtime::Blob;
    /// use burn_tensor::TensorData;
    /// let values = vec![1.0f64, 2.0, 3.0, 4.0];
    /// let at = values.as_ptr();
    /// let data = TensorData::try_from(Blob::from_vec(&[2, 1, 2], values)?)?;
    /// assert_eq!(data.shape().to_vec(), [2, 1, 2]);
    /// assert_eq!(data.as_slice::<f64>()?.as_ptr(), at); // moved, not copied
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn try_from(blob: Blob<T>) -> Result<Self> {
        let shape = blob.shape().to_vec();
        Ok(TensorData::new(blob.into_vec()?, shape))
    }
}

impl<T: Element + BurnElement> TryFrom<&Blob<T>> for TensorData {
    type Error = BlobError;

    /// Tensor data of the blob's shape holding a copy of its values.
    ///
    /// ```
    /// use blob_runtime::Blob;
    /// use burn_tensor::TensorData;
    /// let blob = Blob::<f32>::from_vec(&[3], vec![1.0, 2.0, 3.0])?;
    /// let data = TensorData::try_from(&blob)?;
    /// assert_eq!(data.as_slice::<f32>()?, [1.0, 2.0, 3.0]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn try_from(blob: &Blob<T>) -> Result<Self> {
        Ok(TensorData::new(blob.to_vec()?, blob.shape()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_values_and_element_types_cross_both_ways() {
        let blob =
            Blob::<f32>::from_vec(&[2, 1, 2, 2], (0..8).map(|v| v as f32).collect()).unwrap();
        let data = TensorData::try_from(&blob).unwrap();
        assert_eq!(data.dtype(), burn_tensor::DType::F32);
        let back = Blob::<f32>::try_from(data).unwrap();
        assert_eq!(back.shape(), blob.shape());
        assert_eq!(back.to_vec().unwrap(), blob.to_vec().unwrap());
        for (data, want) in [
            (
                TensorData::new(vec![1.5f64], [1]),
                "holds F64, not f32 (F32)",
            ),
            (TensorData::new(vec![1i32], [1]), "holds I32, not f32 (F32)"),
        ] {
            let err = Blob::<f32>::try_from(&data).unwrap_err().to_string();
            assert!(err.contains(want), "{err}");
            assert!(
                err.starts_with("cannot make a blob of burn tensor data"),
                "{err}"
            );
        }
    }

    #[test]
    fn empty_and_scalar_blobs_cross() {
        for shape in [&[0usize, 3][..], &[]] {
            let blob = Blob::<f64>::new(shape).unwrap();
            let data = TensorData::try_from(&blob).unwrap();
            assert_eq!(data.shape().to_vec(), shape);
            let back = Blob::<f64>::try_from(data).unwrap();
            assert_eq!(back.shape(), shape);
            assert_eq!(back.count(), blob.count());
        }
    }

    #[test]
    fn a_shared_blob_is_copied_and_both_keep_their_values() {
        let a = Blob::<f32>::from_vec(&[2], vec![1.0, 2.0]).unwrap();
        let mut b = Blob::<f32>::new(&[2]).unwrap();
        b.share_data(&a).unwrap();
        let data = TensorData::try_from(b).unwrap();
        assert_eq!(data.as_slice::<f32>().unwrap(), [1.0, 2.0]);
        assert_eq!(a.to_vec().unwrap(), [1.0, 2.0]);
    }
}
