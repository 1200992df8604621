// Type-level arithmetic on a generic dim needs its bound.
use blobflow::blob;
use blobflow::typed::Dim;

fn crop<W: Dim>(x: &blob!(f32; W)) -> blob!(f32; W - 4) {
    blobflow::typed::TypedBlob::from_shape(&[x.shape()[0] - 4]).unwrap()
}

fn main() {}
