// An inner product declared for 20x4x4 inputs, fed pool2's 50x4x4.
use blobflow::layers::{InnerProduct, Layer};
use blobflow::{blob, typed::TypedBlob};

blob!(pub shape Pool2Out = _, 50, 4, 4);
blob!(pub shape Ip1Out = _, 500);
blob!(pub shape Small = _, 20, 4, 4);

fn main() {
    let mut ip = InnerProduct::<f32, Small, 500>::new().unwrap();
    let pooled = TypedBlob::<f32, Pool2Out>::with_dynamic(1).unwrap();
    let out = TypedBlob::<f32, Ip1Out>::with_dynamic(1).unwrap();
    ip.forward(&pooled, &out).unwrap();
}
