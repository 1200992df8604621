//! A user's layer written against `blob-runtime` alone: `blob!` resolves
//! through the crate that exports it, with no `blobflow` in sight.

use blob_runtime::typed::{D, Dim, DimSub, TypedBlob};
use blob_runtime::{BlobError, blob};

blob_runtime::blob!(pub shape Pixels = n: _, c: 1, h: 28, w: 28);

/// A generic struct with blob fields: the weights of a linear layer.
pub struct Linear<I: Dim, O: Dim> {
    /// `(O, I)`, Caffe's InnerProduct layout.
    pub weights: blob!(f32; O, I),
    /// One bias per output.
    pub bias: blob!(f32; O),
}

impl<const I: usize, const O: usize> Linear<D<I>, D<O>> {
    /// Zero weights.
    pub fn zeros() -> Result<Self, BlobError> {
        Ok(Self {
            weights: TypedBlob::new()?,
            bias: TypedBlob::new()?,
        })
    }

    /// `x W^T + b` for a batch of any size.
    pub fn forward(&self, x: &blob!(f32; _, {I})) -> Result<blob!(f32; _, {O}), BlobError> {
        // `{I}`: a const generic; a bare `I` would name a type parameter.
        let y: blob!(f32; _, {O}) = x.inner_product(&self.weights)?.into_shape();
        let bias = self.bias.cpu_data()?;
        for row in y.mutable_cpu_data()?.chunks_mut(O) {
            row.iter_mut().zip(bias.iter()).for_each(|(v, b)| *v += b);
        }
        Ok(y)
    }
}

/// What a 5x5 valid window leaves of `(N, C, H, W)`: type-level arithmetic
/// on generic dims, in a generic type alias.
pub type Cropped5<N, C, H, W> = blob!(f32; N, C, H - 4, W - 4);

/// A 5x5 valid window's output.
pub fn crop5<N: Dim, C: Dim, H, W>(
    x: &blob!(f32; N, C, H, W),
) -> Result<Cropped5<N, C, H, W>, BlobError>
where
    H: DimSub<D<4>>,
    W: DimSub<D<4>>,
{
    let s = x.shape();
    TypedBlob::from_shape(&[s[0], s[1], s[2] - 4, s[3] - 4])
}
