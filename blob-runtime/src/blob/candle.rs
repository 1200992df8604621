//! candle tensors in and out (feature `candle`): `TryFrom` both ways.
//!
//! A blob taken from a tensor gets a copy of its values in row-major
//! order (candle shares a tensor's storage among its views and may write
//! it in place, so a blob, whose memory is writable, cannot share it); a
//! tensor taken from a blob by value gets the blob's memory moved where
//! the blob holds a `Vec` of its own (one adopted by
//! [`Blob::from_vec`], as a blob made from a tensor does), a copy
//! otherwise.

use candle_core::{Device, Tensor, WithDType};

use super::Blob;
use crate::element::Element;
use crate::error::{BlobError, Result};

fn candle_error(op: &'static str, err: candle_core::Error) -> BlobError {
    BlobError::Interop {
        op,
        library: "candle",
        detail: err.to_string(),
    }
}

impl<T: Element + WithDType> TryFrom<&Tensor> for Blob<T> {
    type Error = BlobError;

    /// A blob of the tensor's shape holding a copy of its values, from
    /// whichever device candle keeps them on. A tensor of another element
    /// type is an error naming both.
    ///
    /// ```
    /// use blob_runtime::Blob;
    /// use candle_core::{Device, Tensor};
    /// let tensor = Tensor::arange(0f32, 6.0, &Device::Cpu)?.reshape((2, 3))?;
    /// let blob = Blob::<f32>::try_from(&tensor.t()?)?; // a strided view, laid out
    /// assert_eq!(blob.shape(), &[3, 2]);
    /// assert_eq!(blob.to_vec()?, [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    /// let err = Blob::<f64>::try_from(&tensor).unwrap_err();
    /// assert!(err.to_string().contains("holds f32, not f64"), "{err}");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn try_from(tensor: &Tensor) -> Result<Self> {
        const OP: &str = "make a blob of a candle tensor";
        if tensor.dtype() != T::DTYPE {
            return Err(BlobError::Interop {
                op: OP,
                library: "candle",
                detail: format!(
                    "the tensor holds {}, not {}",
                    tensor.dtype().as_str(),
                    T::NAME
                ),
            });
        }
        let values = tensor
            .flatten_all()
            .and_then(|flat| flat.to_vec1::<T>())
            .map_err(|e| candle_error(OP, e))?;
        Self::from_vec(tensor.dims(), values)
    }
}

impl<T: Element + WithDType> TryFrom<Blob<T>> for Tensor {
    type Error = BlobError;

    /// A CPU tensor of the blob's shape and values: the blob's memory
    /// moved, without a copy, where it holds a `Vec` of its own
    /// ([`Blob::into_vec`]); copied otherwise.
    ///
    /// ```
    /// use blob_runtime::Blob;
    /// use candle_core::Tensor;
    /// let values = vec![1.0f32, 2.0, 3.0, 4.0];
    /// let at = values.as_ptr();
    /// let tensor = Tensor::try_from(Blob::from_vec(&[2, 2], values)?)?;
    /// assert_eq!(tensor.dims(), &[2, 2]);
    /// let (storage, _) = tensor.storage_and_layout();
    /// let candle_core::Storage::Cpu(cpu) = &*storage else { unreachable!() };
    /// assert_eq!(cpu.as_slice::<f32>()?.as_ptr(), at); // moved, not copied
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn try_from(blob: Blob<T>) -> Result<Self> {
        let shape = blob.shape().to_vec();
        Tensor::from_vec(blob.into_vec()?, shape, &Device::Cpu)
            .map_err(|e| candle_error("make a candle tensor of a blob", e))
    }
}

impl<T: Element + WithDType> TryFrom<&Blob<T>> for Tensor {
    type Error = BlobError;

    /// A CPU tensor of the blob's shape holding a copy of its values.
    ///
    /// ```
    /// use blob_runtime::Blob;
    /// use candle_core::Tensor;
    /// let blob = Blob::<f64>::from_vec(&[3], vec![1.0, 2.0, 3.0])?;
    /// let tensor = Tensor::try_from(&blob)?;
    /// assert_eq!(tensor.to_vec1::<f64>()?, [1.0, 2.0, 3.0]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn try_from(blob: &Blob<T>) -> Result<Self> {
        Tensor::from_vec(blob.to_vec()?, blob.shape(), &Device::Cpu)
            .map_err(|e| candle_error("make a candle tensor of a blob", e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_and_shapes_survive_a_candle_op_and_back() {
        let blob =
            Blob::<f32>::from_vec(&[2, 1, 2, 2], (0..8).map(|v| v as f32).collect()).unwrap();
        let tensor = Tensor::try_from(blob).unwrap();
        let doubled = (tensor.permute((0, 2, 3, 1)).unwrap() * 2.0).unwrap();
        let back = Blob::<f32>::try_from(&doubled).unwrap();
        assert_eq!(back.shape(), &[2, 2, 2, 1]);
        assert_eq!(
            back.to_vec().unwrap(),
            [0.0, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 14.0]
        );
    }

    #[test]
    fn empty_and_scalar_blobs_cross() {
        for shape in [&[0usize, 3][..], &[]] {
            let blob = Blob::<f64>::new(shape).unwrap();
            let tensor = Tensor::try_from(&blob).unwrap();
            assert_eq!(tensor.dims(), shape);
            let back = Blob::<f64>::try_from(&tensor).unwrap();
            assert_eq!(back.shape(), shape);
            assert_eq!(back.count(), blob.count());
        }
    }

    #[test]
    fn integer_blobs_take_candle_integers_only() {
        let tensor = Tensor::new(&[1u32, 2, 3], &Device::Cpu).unwrap();
        let blob = Blob::<u32>::try_from(&tensor).unwrap();
        assert_eq!(blob.to_vec().unwrap(), [1, 2, 3]);
        let err = Blob::<f32>::try_from(&tensor).unwrap_err();
        assert_eq!(
            err.to_string(),
            "cannot make a blob of a candle tensor: the tensor holds u32, not f32 (candle)"
        );
    }
}
