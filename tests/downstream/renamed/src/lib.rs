//! A user's crate that renames `blobflow` to `bf`: `bf::blob!` still
//! resolves, and the user pins their own shape rules with trybuild.

use bf::typed::{Dim, TypedBlob};

/// Scales each channel of an `(N, C, H, W)` blob by its own factor: the
/// compiler holds `gamma` to one value per channel.
pub fn scale_channels<N: Dim, C: Dim, H: Dim, W: Dim>(
    x: &bf::blob!(f32; N, C, H, W),
    gamma: &bf::blob!(f32; C),
) -> Result<(), bf::BlobError> {
    let (c, hw) = (x.shape()[1], x.shape()[2] * x.shape()[3]);
    let g = gamma.cpu_data()?;
    for (i, v) in x.mutable_cpu_data()?.iter_mut().enumerate() {
        *v *= g[(i / hw) % c];
    }
    Ok(())
}

/// A blob of logits for `CLASSES` classes and any batch.
pub const CLASSES: usize = 10;
/// Logits: a type alias with a named constant as a dim.
pub type Logits = bf::blob!(f32; _, CLASSES);

/// Makes logits for `n` items.
pub fn logits(n: usize) -> Result<Logits, bf::BlobError> {
    TypedBlob::with_dynamic(n)
}
