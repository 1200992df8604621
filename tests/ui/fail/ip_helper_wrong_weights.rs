// A helper generic over the inner product, called with the wrong weights:
// the first error is the inner product's own.
use blobflow::blob;
use blobflow::typed::{InnerProductOut, InnerProductWith, Shape, TypedBlob};

fn ip_forward<X: InnerProductWith<W>, W: Shape>(
    x: &TypedBlob<f32, X>,
    w: &TypedBlob<f32, W>,
) -> TypedBlob<f32, InnerProductOut<X, W>> {
    x.inner_product(w).unwrap()
}

fn main() {
    let x = <blob!(f32; _, 32)>::with_dynamic(4).unwrap();
    let w1 = <blob!(f32; 32, 16)>::new().unwrap();
    let _y = ip_forward(&x, &w1);
}
